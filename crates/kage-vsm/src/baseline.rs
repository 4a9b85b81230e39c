//! The baseline (paper §3.1, after Garcia et al.): a version stored beside every tag.
//!
//! Each address owns a vector of `stride` tags and `stride` versions, where the stride is
//! the deepest level seen so far (all pages are re-laid out when it grows). The tag at level
//! `i` is valid iff its stored version equals the current version of level `i`: simple, and
//! the costs the paper measures against, a Θ(depth) version vector per address and a
//! version load and store beside every tag access.

use std::ops::Range;

use crate::strided::{restride, slice_bytes, Strided, StridedPage};
use crate::{Config, Stats, Tag, VectorShadow, VersionStack};

/// Version-per-tag vector shadow memory.
#[derive(Debug)]
pub struct BaselineVsm<T: Tag> {
    flat: Strided<BaselinePage<T>>,
}

#[derive(Debug)]
struct BaselinePage<T> {
    tags: Box<[T]>,
    /// The version each tag was written under; 0: never.
    tag_versions: Box<[u64]>,
}

impl<T: Tag> BaselineVsm<T> {
    /// An empty shadow.
    pub fn new(config: &Config) -> Self {
        Self {
            flat: Strided::new(config),
        }
    }
}

impl<T: Tag> BaselinePage<T> {
    fn new(units: usize, stride: usize) -> Self {
        let len = units * stride;
        Self {
            tags: vec![T::default(); len].into_boxed_slice(),
            tag_versions: vec![0; len].into_boxed_slice(),
        }
    }
}

impl<T: Tag> StridedPage for BaselinePage<T> {
    fn restride(&mut self, units: usize, old: usize, new: usize) {
        self.tags = restride(&self.tags, units, old, new, T::default());
        self.tag_versions = restride(&self.tag_versions, units, old, new, 0);
    }

    fn heap_bytes(units: usize, stride: usize) -> usize {
        slice_bytes::<T>(units * stride) + slice_bytes::<u64>(units * stride)
    }
}

impl<T: Tag> VectorShadow<T> for BaselineVsm<T> {
    fn enter(&mut self) {
        self.flat.enter();
    }

    fn exit(&mut self) {
        self.flat.versions.exit();
    }

    fn versions(&self) -> &VersionStack {
        &self.flat.versions
    }

    #[inline]
    fn read(&mut self, addr: u64, out: &mut Vec<T>) {
        out.clear();
        let current = self.flat.versions.as_slice();
        let (page, offset) = self.flat.addressing.split(addr);
        let Some(page) = self.flat.pages.get(page) else {
            out.resize(current.len(), T::default());
            return;
        };
        let base = offset * self.flat.stride;
        let tags = &page.tags[base..base + current.len()];
        let stored = &page.tag_versions[base..base + current.len()];
        out.extend(
            tags.iter()
                .zip(stored)
                .zip(current)
                .map(
                    |((&tag, &stored), &current)| {
                        if stored == current {
                            tag
                        } else {
                            T::default()
                        }
                    },
                ),
        );
    }

    #[inline]
    fn write_with(
        &mut self,
        addr: u64,
        levels: Range<usize>,
        tag: T,
        on_set: &mut impl FnMut(usize),
    ) {
        debug_assert!(
            levels.end <= self.depth(),
            "kage-vsm: write above the depth"
        );
        if levels.is_empty() {
            return;
        }
        let stride = self.flat.stride;
        let (page, offset, current) = self.flat.page(addr, BaselinePage::new);
        let base = offset * stride;
        for level in levels {
            let at = base + level;
            let old = if page.tag_versions[at] == current[level] {
                page.tags[at]
            } else {
                T::default()
            };
            if old == T::default() && tag != T::default() {
                on_set(level);
            }
            page.tags[at] = tag;
            page.tag_versions[at] = current[level];
        }
    }

    #[inline]
    fn update(&mut self, addr: u64, f: impl FnOnce(&mut [T])) {
        let depth = self.depth();
        if depth == 0 {
            return f(&mut []);
        }
        let stride = self.flat.stride;
        let (page, offset, current) = self.flat.page(addr, BaselinePage::new);
        let base = offset * stride;
        let tags = &mut page.tags[base..base + depth];
        let stored = &mut page.tag_versions[base..base + depth];
        for ((tag, stored), &current) in tags.iter_mut().zip(stored.iter_mut()).zip(current) {
            if *stored != current {
                *tag = T::default();
                *stored = current;
            }
        }
        f(tags);
    }

    fn heap_bytes(&self) -> usize {
        self.flat.heap_bytes()
    }

    fn stats(&self) -> Stats {
        self.flat.stats()
    }
}
