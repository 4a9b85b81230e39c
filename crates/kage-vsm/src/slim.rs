//! SlimTV (paper §3.2): one stored version per tag vector instead of one per tag.
//!
//! Same layout as the baseline (a `stride`-long vector per address, the deepest level seen
//! so far) but a single version per address: the innermost version current when the vector
//! was last validated. Before every access, if that version is not the current innermost
//! one, Theorem 1 gives the valid prefix and the levels from there to the current depth are
//! scrubbed. Levels at or beyond the depth are left as they are: any region later entered
//! there gets a version above the stored one, so they are scrubbed before they are read.

use std::ops::Range;

use crate::page_table::PageTable;
use crate::strided::{restride, slice_bytes, Addressing};
use crate::{max_valid_level, Config, Stats, Tag, VectorShadow, VersionStack};

/// SlimTV vector shadow memory: a version per address.
#[derive(Debug)]
pub struct SlimVsm<T: Tag> {
    addressing: Addressing,
    versions: VersionStack,
    stride: usize,
    pages: PageTable<SlimPage<T>>,
    relayouts: u64,
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

impl<T: Tag> SlimVsm<T> {
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
        });
        self.stride = stride;
        self.relayouts += 1;
    }
}

impl<T: Tag> VectorShadow<T> for SlimVsm<T> {
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
        match self.pages.get_mut(page) {
            Some(page) => out.extend_from_slice(page.validate(offset, self.stride, current)),
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
        let (page, offset) = self.addressing.split(addr);
        let (units, stride) = (self.addressing.units(), self.stride);
        let page = self
            .pages
            .get_or_insert_with(page, || SlimPage::new(units, stride));
        let vector = page.validate(offset, stride, self.versions.as_slice());
        let start = levels.start;
        for (level, slot) in vector[levels].iter_mut().enumerate() {
            if *slot == T::default() && tag != T::default() {
                on_set(start + level);
            }
            *slot = tag;
        }
    }

    #[inline]
    fn update(&mut self, addr: u64, f: impl FnOnce(&mut [T])) {
        if self.depth() == 0 {
            return f(&mut []);
        }
        let (page, offset) = self.addressing.split(addr);
        let (units, stride) = (self.addressing.units(), self.stride);
        let page = self
            .pages
            .get_or_insert_with(page, || SlimPage::new(units, stride));
        f(page.validate(offset, stride, self.versions.as_slice()));
    }

    fn heap_bytes(&self) -> usize {
        let units = self.addressing.units();
        let per_page = slice_bytes::<T>(units * self.stride) + slice_bytes::<u64>(units);
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
        let (page, offset) = vsm.addressing.split(0x1000);
        let stored = vsm.pages.get(page).unwrap();
        assert_eq!(stored.vector_versions[offset], 4);
        assert_eq!(&stored.tags[offset * 4..offset * 4 + 4], &[42, 42, 42, 42]);
        let mut out = Vec::new();
        vsm.read(0x1000, &mut out);
        assert_eq!(out, [42, 0, 0, 0]);
        let stored = vsm.pages.get(page).unwrap();
        assert_eq!(
            &stored.tags[offset * 4..offset * 4 + 4],
            &[42, 0, 0, 0],
            "scrubbed"
        );
        assert_eq!(stored.vector_versions[offset], 7);
    }
}
