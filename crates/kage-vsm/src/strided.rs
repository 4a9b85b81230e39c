//! What the three flat implementations (baseline, slim, bulk) share: addresses split into a
//! page number and an offset, and pages holding one fixed-stride vector per address, where
//! the stride is the deepest level seen so far (the paper's baseline layout, §6.1), re-laid
//! out as it grows ([`Strided`]); and the first-touch write ([`set_levels`]), which the
//! VCache shares too.

use crate::page_table::PageTable;
use crate::{Config, Stats, Tag, VersionStack};

/// Splits an address into (page number, unit offset in the page).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Addressing {
    shift: u32,
    table_bits: u32,
}

impl Addressing {
    pub(crate) fn new(config: &Config) -> Self {
        Self {
            shift: config.granularity.shift(),
            table_bits: config.table_bits,
        }
    }

    #[inline]
    pub(crate) fn split(self, addr: u64) -> (u64, usize) {
        let unit = addr >> self.shift;
        (
            unit >> self.table_bits,
            (unit & ((1u64 << self.table_bits) - 1)) as usize,
        )
    }

    pub(crate) fn units(self) -> usize {
        1 << self.table_bits
    }

    pub(crate) fn table_bits(self) -> u32 {
        self.table_bits
    }
}

/// `units` vectors of `old_stride` elements re-laid out with `new_stride`; the new levels
/// hold `fill`. Allocates exactly `units * new_stride` elements.
pub(crate) fn restride<T: Copy>(
    old: &[T],
    units: usize,
    old_stride: usize,
    new_stride: usize,
    fill: T,
) -> Box<[T]> {
    debug_assert!(new_stride >= old_stride);
    let mut new = vec![fill; units * new_stride];
    if old_stride > 0 {
        for (to, from) in new
            .chunks_exact_mut(new_stride)
            .zip(old.chunks_exact(old_stride))
        {
            to[..old_stride].copy_from_slice(from);
        }
    }
    new.into_boxed_slice()
}

/// Heap bytes of a boxed slice of `len` elements.
#[inline]
pub(crate) fn slice_bytes<T>(len: usize) -> usize {
    len * size_of::<T>()
}

/// What baseline, slim and bulk share: the version stack and pages of `stride`-long
/// vectors, re-laid out whenever a region is entered deeper than the stride.
#[derive(Debug)]
pub(crate) struct Strided<P> {
    pub(crate) addressing: Addressing,
    pub(crate) versions: VersionStack,
    /// Tags per vector: the deepest level seen so far.
    pub(crate) stride: usize,
    pub(crate) pages: PageTable<P>,
    relayouts: u64,
}

/// A page of [`Strided`] vectors.
pub(crate) trait StridedPage {
    /// Re-lays the page's `units` vectors out from `old` to `new` tags each.
    fn restride(&mut self, units: usize, old: usize, new: usize);
    /// Heap bytes of one page (beyond its box) with vectors of `stride` tags.
    fn heap_bytes(units: usize, stride: usize) -> usize;
}

impl<P: StridedPage> Strided<P> {
    pub(crate) fn new(config: &Config) -> Self {
        config.check();
        Self {
            addressing: Addressing::new(config),
            versions: VersionStack::new(),
            stride: 0,
            pages: PageTable::new(config.segment_bits),
            relayouts: 0,
        }
    }

    /// Enters a region, re-laying every page out if it is the deepest yet.
    pub(crate) fn enter(&mut self) {
        self.versions.enter();
        let depth = self.versions.depth();
        if depth > self.stride {
            let (units, old) = (self.addressing.units(), self.stride);
            self.pages
                .for_each_mut(|_, page| page.restride(units, old, depth));
            self.stride = depth;
            self.relayouts += 1;
        }
    }

    /// The page of `addr` (made by `make(units, stride)` if new), the address's offset in
    /// it, and the current version vector.
    #[inline]
    pub(crate) fn page(
        &mut self,
        addr: u64,
        make: impl FnOnce(usize, usize) -> P,
    ) -> (&mut P, usize, &[u64]) {
        let (page, offset) = self.addressing.split(addr);
        let (units, stride) = (self.addressing.units(), self.stride);
        let page = self.pages.get_or_insert_with(page, || make(units, stride));
        (page, offset, self.versions.as_slice())
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.versions.heap_bytes()
            + self.pages.heap_bytes()
            + self.pages.len() * P::heap_bytes(self.addressing.units(), self.stride)
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            relayouts: self.relayouts,
            tag_tables: self.pages.len(),
            ..Stats::default()
        }
    }
}

/// Sets every slot to `tag` (slot `i` is level `first + i`), calling `on_set(level)` for
/// each whose tag was default and is not any more (`write_with`'s first touch).
#[inline]
pub(crate) fn set_levels<T: Tag>(
    slots: &mut [T],
    first: usize,
    tag: T,
    on_set: &mut impl FnMut(usize),
) {
    if tag != T::default() {
        for (level, slot) in slots.iter().enumerate() {
            if *slot == T::default() {
                on_set(first + level);
            }
        }
    }
    slots.fill(tag);
}
