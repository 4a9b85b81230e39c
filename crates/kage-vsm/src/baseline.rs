//! The baseline (paper §3.1, after Garcia et al.): a version stored beside every tag.
//!
//! Each address owns a vector of `stride` tags and `stride` versions, where the stride is
//! the deepest level seen so far (all pages are re-laid out when it grows). The tag at level
//! `i` is valid iff its stored version equals the current version of level `i`: simple, and
//! the costs the paper measures against, a Θ(depth) version vector per address and a
//! version load and store beside every tag access.

use std::ops::Range;

use crate::page_table::PageTable;
use crate::strided::{restride, slice_bytes, Addressing};
use crate::{Config, Stats, Tag, VectorShadow, VersionStack};

/// Version-per-tag vector shadow memory.
#[derive(Debug)]
pub struct BaselineVsm<T: Tag> {
    addressing: Addressing,
    versions: VersionStack,
    stride: usize,
    pages: PageTable<BaselinePage<T>>,
    relayouts: u64,
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
        config.check();
        Self {
            addressing: Addressing::new(config),
            versions: VersionStack::new(),
            stride: 0,
            pages: PageTable::new(config.segment_bits),
            relayouts: 0,
        }
    }

    fn relayout(&mut self, stride: usize) {
        let (units, old) = (self.addressing.units(), self.stride);
        self.pages.for_each_mut(|_, page| {
            page.tags = restride(&page.tags, units, old, stride, T::default());
            page.tag_versions = restride(&page.tag_versions, units, old, stride, 0);
        });
        self.stride = stride;
        self.relayouts += 1;
    }
}

impl<T: Tag> BaselinePage<T> {
    fn new(len: usize) -> Self {
        Self {
            tags: vec![T::default(); len].into_boxed_slice(),
            tag_versions: vec![0; len].into_boxed_slice(),
        }
    }
}

impl<T: Tag> VectorShadow<T> for BaselineVsm<T> {
    fn enter(&mut self) {
        self.versions.enter();
        if self.versions.depth() > self.stride {
            self.relayout(self.versions.depth());
        }
    }

    fn exit(&mut self) {
        self.versions.exit();
    }

    fn versions(&self) -> &VersionStack {
        &self.versions
    }

    #[inline]
    fn read(&mut self, addr: u64, out: &mut Vec<T>) {
        out.clear();
        let current = self.versions.as_slice();
        let (page, offset) = self.addressing.split(addr);
        let Some(page) = self.pages.get(page) else {
            out.resize(current.len(), T::default());
            return;
        };
        let base = offset * self.stride;
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
        let (page, offset) = self.addressing.split(addr);
        let base = offset * self.stride;
        let len = self.addressing.units() * self.stride;
        let page = self
            .pages
            .get_or_insert_with(page, || BaselinePage::new(len));
        let current = self.versions.as_slice();
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
        let (page, offset) = self.addressing.split(addr);
        let base = offset * self.stride;
        let len = self.addressing.units() * self.stride;
        let page = self
            .pages
            .get_or_insert_with(page, || BaselinePage::new(len));
        let current = self.versions.as_slice();
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
        let per_page = slice_bytes::<T>(self.addressing.units() * self.stride)
            + slice_bytes::<u64>(self.addressing.units() * self.stride);
        self.versions.heap_bytes() + self.pages.heap_bytes() + self.pages.len() * per_page
    }

    fn stats(&self) -> Stats {
        Stats {
            relayouts: self.relayouts,
            tag_tables: self.pages.len(),
            ..Stats::default()
        }
    }
}
