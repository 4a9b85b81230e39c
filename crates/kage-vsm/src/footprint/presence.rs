//! The presence shadow over units (locations, or lines): a footprint shadow has one for
//! locations (unless locations are lines) and one for lines. [`Presence`] dispatches by
//! `match` over the kinds: the crate's `BaselineVsm<bool>`, [`SlimPresence`] (SlimTV: a
//! run-length byte and a version per unit) and the run-length tables of `bulk` and `palette`
//! ([`RlePresence`]), whose ranges it splits at table boundaries.

use super::rle::RlePresence;
use super::{FpKind, SEGMENT_BITS};
use crate::page_table::PageTable;
use crate::{max_valid_level, BaselineVsm, Config, Granularity, VectorShadow};

/// A presence shadow over units (locations or lines): one of the implementations.
// Two per footprint shadow, used on every access: the run-length kind's page cache stays
// inline rather than behind another pointer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum Presence {
    Baseline(BaselineVsm<bool>),
    Slim(SlimPresence),
    Rle(RlePresence),
}

impl Presence {
    pub(super) fn new(kind: FpKind, table_bits: u32) -> Self {
        match kind {
            FpKind::Baseline => {
                // Units are pre-shifted: the VSM sees them as bytes.
                let config = Config {
                    granularity: Granularity::Byte,
                    table_bits,
                    segment_bits: SEGMENT_BITS,
                    ..Config::footprint()
                };
                Presence::Baseline(BaselineVsm::new(&config))
            }
            FpKind::Slim => Presence::Slim(SlimPresence::new(table_bits)),
            FpKind::Bulk => Presence::Rle(RlePresence::new(table_bits, false)),
            FpKind::Palette => Presence::Rle(RlePresence::new(table_bits, true)),
        }
    }

    pub(super) fn enter(&mut self) {
        if let Presence::Baseline(vsm) = self {
            vsm.enter();
        }
    }

    pub(super) fn exit(&mut self) {
        if let Presence::Baseline(vsm) = self {
            vsm.exit();
        }
    }

    /// Marks `unit` touched at levels `0..d` (`current` has `d` versions) and returns how
    /// many leading levels had touched it before (`d`: nothing new).
    #[inline]
    fn touch(&mut self, unit: u64, d: usize, current: &[u64]) -> usize {
        match self {
            Presence::Baseline(vsm) => {
                let mut first = d;
                vsm.write_with(unit, 0..d, true, &mut |level| first = first.min(level));
                first
            }
            Presence::Slim(slim) => slim.touch(unit, d, current),
            Presence::Rle(rle) => rle.touch(unit, d, current),
        }
    }

    /// Marks units `first..=last` touched at levels `0..d`, calling `new(valid, n)` for
    /// new units (`n` of them whose valid run length was `valid < d`, in runs merged in any
    /// way) and `span(from, to)` with spans of units covering every new unit (disjoint, in
    /// order; units in a span may also be old). Returns whether any unit was new.
    #[inline]
    pub(super) fn touch_span(
        &mut self,
        first: u64,
        last: u64,
        d: usize,
        current: &[u64],
        mut new: impl FnMut(usize, u64),
        mut span: impl FnMut(u64, u64),
    ) -> bool {
        if let Presence::Rle(rle) = self {
            if first == last {
                // One unit (a line, usually): the plain tag update.
                let valid = rle.touch(first, d, current);
                if valid < d {
                    new(valid, 1);
                    span(first, first);
                }
                return valid < d;
            }
            let mask = (1u64 << rle.table_bits) - 1;
            let mut any = false;
            let mut from = first;
            loop {
                let to = last.min(from | mask);
                if let Some((a, b)) = rle.touch_range(from, to, d, current, &mut new) {
                    span(a, b);
                    any = true;
                }
                if to == last {
                    return any;
                }
                from = to + 1;
            }
        }
        let mut covered: Option<(u64, u64)> = None;
        for unit in first..=last {
            let valid = self.touch(unit, d, current);
            if valid < d {
                new(valid, 1);
                covered = Some((covered.map_or(unit, |(a, _)| a), unit));
            }
        }
        if let Some((a, b)) = covered {
            span(a, b);
        }
        covered.is_some()
    }

    /// Whether the heap use changed without a new touch (a scrub freed an array).
    #[inline]
    pub(super) fn take_changed(&mut self) -> bool {
        match self {
            Presence::Rle(rle) => std::mem::take(&mut rle.changed),
            _ => false,
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        match self {
            Presence::Baseline(vsm) => vsm.heap_bytes(),
            Presence::Slim(slim) => slim.heap_bytes(),
            Presence::Rle(rle) => rle.heap_bytes(),
        }
    }
}

/// SlimTV: a run-length byte and the version it was written under, per unit.
#[derive(Debug)]
pub(super) struct SlimPresence {
    table_bits: u32,
    pages: PageTable<SlimPage>,
}

#[derive(Debug)]
struct SlimPage {
    tags: Box<[u8]>,
    versions: Box<[u64]>,
}

impl SlimPresence {
    fn new(table_bits: u32) -> Self {
        Self {
            table_bits,
            pages: PageTable::new(SEGMENT_BITS),
        }
    }

    #[inline]
    fn touch(&mut self, unit: u64, d: usize, current: &[u64]) -> usize {
        let units = 1usize << self.table_bits;
        let offset = (unit & (units as u64 - 1)) as usize;
        let page = self
            .pages
            .get_or_insert_with(unit >> self.table_bits, || SlimPage {
                tags: vec![0; units].into_boxed_slice(),
                versions: vec![0; units].into_boxed_slice(),
            });
        let tag = page.tags[offset] as usize;
        if tag >= d && page.versions[offset] >= current[d - 1] {
            return d;
        }
        let valid = tag.min(max_valid_level(page.versions[offset], current));
        if valid < d {
            page.tags[offset] = d as u8;
            page.versions[offset] = current[d - 1];
        }
        valid
    }

    fn heap_bytes(&self) -> usize {
        let units = 1usize << self.table_bits;
        self.pages.heap_bytes() + self.pages.len() * units * (1 + size_of::<u64>())
    }
}
