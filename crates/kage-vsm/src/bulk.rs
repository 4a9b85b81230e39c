//! SlimTV + BulkTV (paper §3.3, Figure 5): one version per tag table.
//!
//! A page (tag table) of `2^table_bits` addresses shares one stored version. The first
//! access to a page under a new innermost version validates the whole page: the levels from
//! Theorem 1's valid prefix on are scrubbed in every vector of the page, and the page takes
//! the innermost version. The page also remembers how many leading levels may hold data
//! (`dirty`; Figure 5's per-vector `size()`), so entering a deeper region costs no scrubbing
//! of levels nobody wrote. Vectors have the baseline's fixed stride.

use std::ops::Range;

use crate::strided::{restride, set_levels, slice_bytes, Strided, StridedPage};
use crate::{max_valid_level, Config, Stats, Tag, VectorShadow, VersionStack};

/// BulkTV vector shadow memory: a version per tag table.
#[derive(Debug)]
pub struct BulkVsm<T: Tag> {
    flat: Strided<BulkPage<T>>,
    page_scrubs: u64,
}

/// A tag table validated as a whole. Public so that tools with their own tag encodings
/// (the footprint profiler's run-length bytes) can reuse [`BulkPage::validate`].
#[derive(Debug)]
pub struct BulkPage<T> {
    /// The innermost version at the page's last validation; 0: never.
    pub version: u64,
    /// Levels at and beyond this are default in every vector of the page.
    pub dirty: usize,
    /// `units × stride` tags, one vector per address.
    pub tags: Box<[T]>,
}

impl<T: Tag> BulkPage<T> {
    /// A page of default tags.
    pub fn new(units: usize, stride: usize) -> Self {
        Self {
            version: 0,
            dirty: 0,
            tags: vec![T::default(); units * stride].into_boxed_slice(),
        }
    }

    /// Figure 5's `scrubBulkTV`: if the page was last validated under another innermost
    /// version, scrubs every vector's invalid levels. Returns whether anything was scrubbed.
    #[inline]
    pub fn validate(&mut self, stride: usize, current: &[u64]) -> bool {
        let innermost = current.last().copied().unwrap_or(0);
        if self.version == innermost {
            return false;
        }
        let scrub_start = max_valid_level(self.version, current);
        self.version = innermost;
        if scrub_start >= self.dirty {
            return false;
        }
        for vector in self.tags.chunks_exact_mut(stride) {
            vector[scrub_start..self.dirty].fill(T::default());
        }
        self.dirty = scrub_start;
        true
    }
}

impl<T: Tag> StridedPage for BulkPage<T> {
    fn restride(&mut self, units: usize, old: usize, new: usize) {
        self.tags = restride(&self.tags, units, old, new, T::default());
    }

    fn heap_bytes(units: usize, stride: usize) -> usize {
        slice_bytes::<T>(units * stride)
    }
}

impl<T: Tag> BulkVsm<T> {
    /// An empty shadow.
    pub fn new(config: &Config) -> Self {
        Self {
            flat: Strided::new(config),
            page_scrubs: 0,
        }
    }

    /// The address's validated page (created if new) and the start of its vector.
    #[inline]
    fn vector(&mut self, addr: u64) -> (&mut BulkPage<T>, usize) {
        let stride = self.flat.stride;
        let (page, offset, current) = self.flat.page(addr, BulkPage::new);
        if page.validate(stride, current) {
            self.page_scrubs += 1;
        }
        (page, offset * stride)
    }
}

impl<T: Tag> VectorShadow<T> for BulkVsm<T> {
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
        let depth = current.len();
        if depth == 0 {
            return;
        }
        let (page, offset) = self.flat.addressing.split(addr);
        let stride = self.flat.stride;
        match self.flat.pages.get_mut(page) {
            Some(page) => {
                if page.validate(stride, current) {
                    self.page_scrubs += 1;
                }
                out.extend_from_slice(&page.tags[offset * stride..offset * stride + depth])
            }
            None => out.resize(depth, T::default()),
        }
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
        let (page, base) = self.vector(addr);
        page.dirty = page.dirty.max(levels.end);
        let start = levels.start;
        let slots = &mut page.tags[base + start..base + levels.end];
        set_levels(slots, start, tag, on_set);
    }

    #[inline]
    fn update(&mut self, addr: u64, f: impl FnOnce(&mut [T])) {
        let depth = self.depth();
        if depth == 0 {
            return f(&mut []);
        }
        let (page, base) = self.vector(addr);
        page.dirty = depth;
        f(&mut page.tags[base..base + depth]);
    }

    fn heap_bytes(&self) -> usize {
        self.flat.heap_bytes()
    }

    fn stats(&self) -> Stats {
        Stats {
            page_scrubs: self.page_scrubs,
            ..self.flat.stats()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_innermost_version_scrubs_the_whole_page() {
        let config = Config {
            table_bits: 2,
            ..Config::default()
        };
        let mut vsm = BulkVsm::<u64>::new(&config);
        vsm.enter();
        vsm.enter();
        vsm.enter();
        for word in 0..4 {
            vsm.write(word * 8, 0..3, word + 1);
        }
        vsm.exit();
        vsm.exit();
        vsm.enter(); // versions [1, 4]: level 1 is a new instance
        let (page, _) = vsm.flat.addressing.split(0);
        assert_eq!(vsm.flat.pages.get(page).unwrap().version, 3);
        // Touching one address validates all four.
        let mut out = Vec::new();
        vsm.read(0, &mut out);
        assert_eq!(out, [1, 0]);
        let stored = vsm.flat.pages.get(page).unwrap();
        assert_eq!((stored.version, stored.dirty), (4, 1));
        assert_eq!(&stored.tags[..], &[1, 0, 0, 2, 0, 0, 3, 0, 0, 4, 0, 0]);
        assert_eq!(vsm.stats().page_scrubs, 1);
        // Same innermost version: no more work, and entering deeper scrubs nothing.
        vsm.read(8, &mut out);
        vsm.enter();
        vsm.read(16, &mut out);
        assert_eq!(out, [3, 0, 0]);
        assert_eq!(vsm.stats().page_scrubs, 1);
    }
}
