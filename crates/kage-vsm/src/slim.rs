//! SlimTV (paper §3.2): one stored version per tag vector instead of one per tag.
//!
//! Same layout as the baseline (a `stride`-long vector per address, the deepest level seen
//! so far) but a single version per address: the innermost version current when the vector
//! was last validated. Before every access, if that version is not the current innermost
//! one, Theorem 1 gives the valid prefix and the levels from there to the current depth are
//! scrubbed. Levels at or beyond the depth are left as they are: any region later entered
//! there gets a version above the stored one, so they are scrubbed before they are read.

use std::ops::Range;

use crate::strided::{restride, set_levels, slice_bytes, Strided, StridedPage};
use crate::{max_valid_level, Config, Stats, Tag, VectorShadow, VersionStack};

/// SlimTV vector shadow memory: a version per address.
#[derive(Debug)]
pub struct SlimVsm<T: Tag> {
    flat: Strided<SlimPage<T>>,
}

#[derive(Debug)]
struct SlimPage<T> {
    tags: Box<[T]>,
    /// Per address, the innermost version at its last validation; 0: never.
    vector_versions: Box<[u64]>,
}

impl<T: Tag> SlimPage<T> {
    fn new(units: usize, stride: usize) -> Self {
        Self {
            tags: vec![T::default(); units * stride].into_boxed_slice(),
            vector_versions: vec![0; units].into_boxed_slice(),
        }
    }

    /// SlimTV: scrubs the address's invalid levels; returns its vector (`depth` long).
    #[inline]
    fn validate(&mut self, offset: usize, stride: usize, current: &[u64]) -> &mut [T] {
        let vector = &mut self.tags[offset * stride..offset * stride + current.len()];
        let stored = &mut self.vector_versions[offset];
        let innermost = current.last().copied().unwrap_or(0);
        if *stored != innermost {
            vector[max_valid_level(*stored, current)..].fill(T::default());
            *stored = innermost;
        }
        vector
    }
}

impl<T: Tag> StridedPage for SlimPage<T> {
    fn restride(&mut self, units: usize, old: usize, new: usize) {
        self.tags = restride(&self.tags, units, old, new, T::default());
    }

    fn heap_bytes(units: usize, stride: usize) -> usize {
        slice_bytes::<T>(units * stride) + slice_bytes::<u64>(units)
    }
}

impl<T: Tag> SlimVsm<T> {
    /// An empty shadow.
    pub fn new(config: &Config) -> Self {
        Self {
            flat: Strided::new(config),
        }
    }

    /// The address's validated vector (its page created if new).
    #[inline]
    fn vector(&mut self, addr: u64) -> &mut [T] {
        let stride = self.flat.stride;
        let (page, offset, current) = self.flat.page(addr, SlimPage::new);
        page.validate(offset, stride, current)
    }
}

impl<T: Tag> VectorShadow<T> for SlimVsm<T> {
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
        match self.flat.pages.get_mut(page) {
            Some(page) => out.extend_from_slice(page.validate(offset, self.flat.stride, current)),
            None => out.resize(current.len(), T::default()),
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
        let start = levels.start;
        set_levels(&mut self.vector(addr)[levels], start, tag, on_set);
    }

    #[inline]
    fn update(&mut self, addr: u64, f: impl FnOnce(&mut [T])) {
        if self.depth() == 0 {
            return f(&mut []);
        }
        f(self.vector(addr));
    }

    fn heap_bytes(&self) -> usize {
        self.flat.heap_bytes()
    }

    fn stats(&self) -> Stats {
        self.flat.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_worked_example_scrubs_levels_one_to_three() {
        // Figure 4: tags written in region 4 (versions [1, 2, 3, 4]); read in region 7
        // (versions [1, 5, 6, 7]): only level 0 survives.
        let mut vsm = SlimVsm::<u64>::new(&Config::default());
        for _ in 0..4 {
            vsm.enter();
        }
        assert_eq!(vsm.versions().as_slice(), &[1, 2, 3, 4]);
        vsm.write(0x1000, 0..4, 42);
        for _ in 0..3 {
            vsm.exit();
        }
        for _ in 0..3 {
            vsm.enter();
        }
        assert_eq!(vsm.versions().as_slice(), &[1, 5, 6, 7]);
        let (page, offset) = vsm.flat.addressing.split(0x1000);
        let stored = vsm.flat.pages.get(page).unwrap();
        assert_eq!(stored.vector_versions[offset], 4);
        assert_eq!(&stored.tags[offset * 4..offset * 4 + 4], &[42, 42, 42, 42]);
        let mut out = Vec::new();
        vsm.read(0x1000, &mut out);
        assert_eq!(out, [42, 0, 0, 0]);
        let stored = vsm.flat.pages.get(page).unwrap();
        assert_eq!(
            &stored.tags[offset * 4..offset * 4 + 4],
            &[42, 0, 0, 0],
            "scrubbed"
        );
        assert_eq!(stored.vector_versions[offset], 7);
    }
}
