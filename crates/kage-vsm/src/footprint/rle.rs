//! BulkTV over run-length bytes (kinds `bulk` and `palette`): tag tables with one version
//! each ([`RlePage`]), validated on their first touch under a new innermost version (Figure
//! 5) and scrubbed only as far as their bound (`max`) and, for byte arrays, the bounds of
//! their 64-unit chunks require; the page cache; the tag update of one unit and the range
//! update, dispatched by form ([`Repr`]); and [`Runs`], which turns the old values of the
//! raised units into counter updates.

use super::bytes::{clamp_chunks, raise_bytes};
use super::forms::event;
use super::palette::{Packed, MAX_PACKED_BITS};
use super::SEGMENT_BITS;
use crate::max_valid_level;
use crate::page_table::PageTable;

/// Entries of the per-shadow page cache (a kernel walking a few arrays at once hits it).
const PAGE_CACHE: usize = 16;

/// BulkTV over run-length bytes: one version per tag table.
#[derive(Debug)]
pub(super) struct RlePresence {
    pub(super) table_bits: u32,
    compress: bool,
    pages: PageTable<RlePage>,
    /// Recently used pages, direct-mapped by page number: (page number + 1, page), a
    /// pointer into a `Box` that lives as long as `pages` (0: empty slot).
    cached: [(u64, *mut RlePage); PAGE_CACHE],
    /// Bytes held by the pages' arrays.
    pub(super) array_bytes: usize,
    /// `array_bytes` or the page count changed since the last `take_changed`.
    pub(super) changed: bool,
}

// SAFETY: `cached` points into a box owned by `pages`; moving the whole structure to
// another thread moves the box's owner with it.
unsafe impl Send for RlePresence {}

#[derive(Debug)]
pub(super) struct RlePage {
    /// The innermost version at the last validation; 0: never.
    pub(super) version: u64,
    /// No unit of the page holds more than this.
    pub(super) max: u8,
    /// How many times (saturating) codes became bytes since the page last held one value.
    pub(super) expansions: u8,
    pub(super) repr: Repr,
}

/// A page whose codes became bytes this many times since it last held one value goes back
/// to codes only as one value: the values it takes at once keep exceeding four (a recursion
/// over its stack), so re-encoding would be undone.
pub(super) const MAX_EXPANSIONS: u8 = 2;

#[derive(Debug)]
pub(super) enum Repr {
    /// Every unit holds this value.
    Uniform(u8),
    /// At most four values: a code of one or two bits per unit (palette tables only).
    Packed(Packed),
    /// A byte per unit, and per chunk of 64 units a bound on its bytes (`chunk_max`).
    Bytes {
        bytes: Box<[u8]>,
        chunk_max: Box<[u8]>,
    },
}

/// Chunks of a byte array: 64 units each (a table has at least one).
pub(super) const CHUNK_SHIFT: u32 = 6;

fn chunks(units: usize) -> usize {
    (units >> CHUNK_SHIFT).max(1)
}

/// Heap bytes of a byte-array table: the bytes and the chunk bounds.
pub(super) fn bytes_repr_bytes(units: usize) -> usize {
    units + chunks(units)
}

fn new_bytes(units: usize, fill: u8) -> Repr {
    Repr::Bytes {
        bytes: vec![fill; units].into_boxed_slice(),
        chunk_max: vec![fill; chunks(units)].into_boxed_slice(),
    }
}

impl RlePresence {
    pub(super) fn new(table_bits: u32, compress: bool) -> Self {
        assert!(
            !compress || table_bits <= MAX_PACKED_BITS,
            "kage-vsm: palette tables of 2^{table_bits} units (at most 2^{MAX_PACKED_BITS})"
        );
        Self {
            table_bits,
            compress,
            pages: PageTable::new(SEGMENT_BITS),
            cached: [(0, std::ptr::null_mut()); PAGE_CACHE],
            array_bytes: 0,
            changed: false,
        }
    }

    fn units(&self) -> usize {
        1 << self.table_bits
    }

    #[inline]
    fn page(&mut self, number: u64) -> &mut RlePage {
        let (key, page) = self.cached[number as usize % PAGE_CACHE];
        if key == number.wrapping_add(1) {
            // SAFETY: see `cached`.
            return unsafe { &mut *page };
        }
        self.page_slow(number)
    }

    #[cold]
    fn page_slow(&mut self, number: u64) -> &mut RlePage {
        let units = self.units();
        let compress = self.compress;
        let mut created = false;
        let page = self.pages.get_or_insert_with(number, || {
            created = true;
            RlePage {
                version: 0,
                max: 0,
                expansions: 0,
                repr: if compress {
                    Repr::Uniform(0)
                } else {
                    new_bytes(units, 0)
                },
            }
        }) as *mut RlePage;
        if created {
            self.changed = true;
            if !compress {
                self.array_bytes += bytes_repr_bytes(units);
            }
        }
        self.cached[number as usize % PAGE_CACHE] = (number.wrapping_add(1), page);
        // SAFETY: just taken from `pages`, which outlives the borrow of `self`.
        unsafe { &mut *page }
    }

    #[inline]
    pub(super) fn touch(&mut self, unit: u64, d: usize, current: &[u64]) -> usize {
        let table_bits = self.table_bits;
        let units = self.units();
        let compress = self.compress;
        let offset = (unit & (units as u64 - 1)) as usize;
        let page = self.page(unit >> table_bits) as *mut RlePage;
        // SAFETY: `page` is owned by `self.pages`; `array_bytes` is a separate field.
        let page = unsafe { &mut *page };
        let innermost = current[d - 1];
        if page.version != innermost {
            let delta = page.validate(current, units, compress);
            if delta != 0 {
                self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
                self.changed = true;
            }
        }
        let (valid, delta) = page.set(offset, d as u8, units);
        if delta != 0 {
            self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
            self.changed = true;
        }
        valid as usize
    }

    /// Marks every unit of `first..=last` (one table) touched at levels `0..d`, calling
    /// `new(valid, n)` for `n` new units whose valid run length was `valid < d` (runs merged
    /// in any way: only the totals per `valid` are meaningful). Returns the first and the
    /// last new unit, if any.
    #[inline]
    pub(super) fn touch_range(
        &mut self,
        first: u64,
        last: u64,
        d: usize,
        current: &[u64],
        new: impl FnMut(usize, u64),
    ) -> Option<(u64, u64)> {
        let units = self.units();
        let mask = units as u64 - 1;
        let base = first & !mask;
        let (lo, hi) = ((first & mask) as usize, (last & mask) as usize);
        let page = self.validated(first >> self.table_bits, current) as *mut RlePage;
        // SAFETY: as in `touch`.
        let page = unsafe { &mut *page };
        let d8 = d as u8;
        let mut runs = Runs::new(new);
        let span = match &mut page.repr {
            Repr::Bytes { bytes, chunk_max } => {
                let span = raise_bytes(&mut bytes[lo..=hi], d8, &mut runs)?;
                for m in &mut chunk_max[lo >> CHUNK_SHIFT..=hi >> CHUNK_SHIFT] {
                    *m = (*m).max(d8);
                }
                page.max = page.max.max(d8);
                (lo + span.0, lo + span.1)
            }
            &mut Repr::Uniform(v) if v >= d8 => return None,
            _ => {
                let (delta, span) = page.raise_compressed(lo, hi, d8, units, &mut runs);
                if delta != 0 {
                    self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
                    self.changed = true;
                }
                span?
            }
        };
        runs.finish();
        Some((base + span.0 as u64, base + span.1 as u64))
    }

    /// The page, created if needed and validated under `current`.
    #[inline]
    pub(super) fn validated(&mut self, number: u64, current: &[u64]) -> &mut RlePage {
        let units = self.units();
        let compress = self.compress;
        let page = self.page(number) as *mut RlePage;
        // SAFETY: as in `touch`.
        let page = unsafe { &mut *page };
        if page.version != current[current.len() - 1] {
            let delta = page.validate(current, units, compress);
            if delta != 0 {
                self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
                self.changed = true;
            }
        }
        page
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.pages.heap_bytes() + self.array_bytes
    }

    pub(super) fn forms(&self) -> Vec<(&'static str, usize)> {
        let mut forms = vec![("uniform", 0), ("1-bit", 0), ("2-bit", 0), ("bytes", 0)];
        for (_, page) in self.pages.iter() {
            let form = match &page.repr {
                Repr::Uniform(_) => 0,
                Repr::Packed(p) => p.width as usize,
                Repr::Bytes { .. } => 3,
            };
            forms[form].1 += 1;
        }
        forms
    }
}

impl RlePage {
    /// Figure 5 on run-length bytes: clamp every unit to the valid prefix. Returns the change
    /// in array bytes.
    fn validate(&mut self, current: &[u64], units: usize, compress: bool) -> isize {
        let scrub = max_valid_level(self.version, current) as u8;
        self.version = current[current.len() - 1];
        if scrub >= self.max {
            return 0;
        }
        self.scrub(scrub, units, compress)
    }

    /// Clamps every unit to `scrub` (below `max`). Returns the change in array bytes.
    pub(super) fn scrub(&mut self, scrub: u8, units: usize, compress: bool) -> isize {
        self.max = scrub;
        match &mut self.repr {
            Repr::Uniform(v) => {
                *v = (*v).min(scrub);
                self.max = *v;
                0
            }
            Repr::Packed(p) => {
                // The palette only: codes stay, values that become equal stay two codes.
                for v in &mut p.value {
                    *v = (*v).min(scrub);
                }
                if let Some(v) = p.one_value() {
                    event("scrubbed to one value");
                    let freed = p.array_bytes();
                    self.max = v;
                    self.repr = Repr::Uniform(v);
                    self.expansions = 0;
                    return -(freed as isize);
                }
                self.max = p.max_value();
                0
            }
            Repr::Bytes { bytes, chunk_max } => {
                let clamped = clamp_chunks(bytes, chunk_max, scrub);
                // Re-encode after a large change only: its scan costs at most four times
                // the clamping.
                if !compress || clamped * 4 < chunk_max.len() {
                    return 0;
                }
                self.reencode(units)
            }
        }
    }

    /// The tag update on a validated page: the unit at `offset` becomes `d` if it was less.
    /// Returns its valid run length before and the change in array bytes.
    #[inline]
    pub(super) fn set(&mut self, offset: usize, d: u8, units: usize) -> (u8, isize) {
        let old = match &mut self.repr {
            Repr::Bytes { bytes, chunk_max } => {
                let old = bytes[offset];
                if old < d {
                    bytes[offset] = d;
                    let m = &mut chunk_max[offset >> CHUNK_SHIFT];
                    *m = (*m).max(d);
                    self.max = self.max.max(d);
                }
                return (old, 0);
            }
            &mut Repr::Uniform(v) => v,
            Repr::Packed(p) => p.value_at(offset),
        };
        if old >= d {
            return (old, 0);
        }
        let (delta, _) = self.raise_compressed(offset, offset, d, units, &mut Runs::new(|_, _| {}));
        (old, delta)
    }
}

/// Calls `new(valid, n)` once per run of equal `valid` values added in a row.
pub(super) struct Runs<F: FnMut(usize, u64)> {
    value: u8,
    n: u64,
    new: F,
}

impl<F: FnMut(usize, u64)> Runs<F> {
    #[inline(always)]
    pub(super) fn new(new: F) -> Self {
        Self {
            value: 0,
            n: 0,
            new,
        }
    }

    #[inline(always)]
    pub(super) fn add(&mut self, value: u8, n: u64) {
        if value != self.value {
            if self.n != 0 {
                (self.new)(self.value as usize, self.n);
            }
            self.value = value;
            self.n = 0;
        }
        self.n += n;
    }

    #[inline(always)]
    pub(super) fn finish(mut self) {
        if self.n != 0 {
            (self.new)(self.value as usize, self.n);
        }
    }
}
