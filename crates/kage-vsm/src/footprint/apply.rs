//! An access applied at the depth of the innermost level that has a shadow level (the root
//! included): a range of any size, split at table boundaries, or the shorter path of at most
//! 8 locations within one word of a byte array or of codes; the line shadow touched over the
//! new locations only; the counters updated once per run of units with the same previous run
//! length. [`Footprint::access`] and the deferred levels' spans end here.

use super::bytes::{bytes_less, load, store, ONES};
use super::presence::Presence;
use super::rle::{Repr, RlePage, Runs, CHUNK_SHIFT};
use super::Footprint;

impl Footprint {
    /// Units `first..=last` are accessed at the depth of the innermost level with a shadow
    /// level (the root included).
    pub(super) fn apply_units(&mut self, first: u64, last: u64) {
        let shift = self.unit_shift();
        let addr = first << shift;
        let size = (last - first).saturating_add(1).saturating_mul(1 << shift);
        self.apply(addr, size);
    }

    /// An access at the depth of the innermost level with a shadow level.
    #[inline]
    pub(super) fn apply(&mut self, addr: u64, size: u64) {
        if size <= 64 && self.access_word(addr, size) {
            return;
        }
        self.access_range(addr, size);
    }

    /// The usual access, in one word: at most 8 locations in one table, once validated. As
    /// bytes: all new with the same previous run length, or none new; a coded or one-value
    /// table: any (one word of codes when they lie in one, else the table's range update).
    /// Returns `false`, changing nothing but the validation, for anything else.
    #[inline(always)]
    fn access_word(&mut self, addr: u64, size: u64) -> bool {
        let Some(Presence::Rle(rle)) = &mut self.location_shadow else {
            return false;
        };
        let shift = self.config.location_shift;
        let (first, last) = (addr >> shift, addr.saturating_add(size - 1) >> shift);
        let table_bits = rle.table_bits;
        let mask = (1u64 << table_bits) - 1;
        let (lo, hi) = ((first & mask) as usize, (last & mask) as usize);
        if last - first >= 8
            || first >> table_bits != last >> table_bits
            || lo + 8 > 1 << table_bits
        {
            return false;
        }
        let current = self.versions.as_slice();
        let d = current.len();
        let page = rle.validated(first >> table_bits, current) as *mut RlePage;
        self.changed |= std::mem::take(&mut rle.changed);
        // SAFETY: as in `RlePresence::touch`.
        let page = unsafe { &mut *page };
        let d8 = d as u8;
        let (bytes, chunk_max) = match &mut page.repr {
            Repr::Bytes { bytes, chunk_max } => (bytes, chunk_max),
            &mut Repr::Uniform(v) if v >= d8 => return true,
            // Kept out of line: the byte path above stays small enough to inline.
            _ => return self.access_coded(page, first, lo, hi),
        };
        // `n <= 8` units from `lo`; the word's other bytes are kept.
        let n = hi - lo + 1;
        let keep = if n == 8 { 0 } else { u64::MAX << (8 * n) };
        let word = load(bytes, lo);
        let dd = ONES * d8 as u64;
        if bytes_less(word, dd) & !keep == 0 {
            return true;
        }
        let valid = word & 0xff;
        if (word ^ (valid * ONES)) & !keep != 0 {
            return false;
        }
        store(bytes, lo, (word & keep) | (dd & !keep));
        for c in [lo >> CHUNK_SHIFT, hi >> CHUNK_SHIFT] {
            chunk_max[c] = chunk_max[c].max(d8);
        }
        page.max = page.max.max(d8);
        add_levels(&mut self.locations, valid as usize, d, n as u64);
        self.touch_lines_of(first, last, d);
        true
    }

    /// [`access_word`](Self::access_word) on a validated coded table, or one of a single
    /// value below the depth.
    #[inline(never)]
    fn access_coded(&mut self, page: *mut RlePage, first: u64, lo: usize, hi: usize) -> bool {
        let Some(Presence::Rle(rle)) = &mut self.location_shadow else {
            unreachable!("kage-vsm: a coded table without a run-length shadow");
        };
        let table_bits = rle.table_bits;
        let d = self.versions.depth();
        // SAFETY: as in `RlePresence::touch`; `access_word` holds no other reference to it.
        let page = unsafe { &mut *page };
        let locations = &mut self.locations;
        let mut runs = Runs::new(|valid, n| add_levels(locations, valid, d, n));
        let (delta, span) = page.raise_compressed(lo, hi, d as u8, 1 << table_bits, &mut runs);
        runs.finish();
        if delta != 0 {
            rle.array_bytes = rle.array_bytes.wrapping_add_signed(delta);
            self.changed = true;
        }
        if let Some((a, b)) = span {
            let base = first & !((1u64 << table_bits) - 1);
            self.touch_lines_of(base + a as u64, base + b as u64, d);
        }
        true
    }

    /// [`touch_lines`] for [`access_word`](Self::access_word).
    #[inline(always)]
    fn touch_lines_of(&mut self, first: u64, last: u64, d: usize) {
        debug_assert_eq!(d, self.versions.depth());
        touch_lines(
            &mut self.line_shadow,
            &mut self.last_line,
            &mut self.lines,
            (first, last),
            self.config.line_shift - self.config.location_shift,
            self.versions.as_slice(),
        );
        // The same kind as the location shadow: it reports its own heap changes.
        self.changed |= self.line_shadow.take_changed();
    }

    /// [`access`](Self::access) in general.
    fn access_range(&mut self, addr: u64, size: u64) {
        let d = self.versions.depth();
        let last = addr.saturating_add(size - 1);
        let current = self.versions.as_slice();
        let (locations, lines) = (&mut self.locations, &mut self.lines);
        let line_shift = self.config.line_shift;
        let line_shadow = &mut self.line_shadow;
        let last_line = &mut self.last_line;
        let any = match &mut self.location_shadow {
            None => line_shadow.touch_span(
                addr >> line_shift,
                last >> line_shift,
                d,
                current,
                |valid, n| {
                    add_levels(lines, valid, d, n);
                    add_levels(locations, valid, d, n);
                },
                |_, _| {},
            ),
            Some(shadow) => {
                let shift = self.config.location_shift;
                // `shift < line_shift`: location `u` lies in line `u >> per_line`.
                let per_line = line_shift - shift;
                let any = shadow.touch_span(
                    addr >> shift,
                    last >> shift,
                    d,
                    current,
                    |valid, n| add_levels(locations, valid, d, n),
                    |from, to| {
                        touch_lines(line_shadow, last_line, lines, (from, to), per_line, current);
                    },
                );
                self.changed |= shadow.take_changed();
                any
            }
        };
        // Run-length tables report their own heap changes; the others may have created a
        // table when a unit was new.
        self.changed |= (any && !matches!(self.line_shadow, Presence::Rle(_)))
            | self.line_shadow.take_changed();
    }
}

/// Touches the lines of locations `new.0..=new.1` (`per_line`: log2 of the locations per
/// line), which include every location just new, and counts the new lines in `lines`.
///
/// A line is new at a level only if one of its locations is (inclusion); touching a line
/// that is not new changes nothing, so the span of the new locations is enough, without
/// `last_line`, touched since the last enter.
#[inline(always)]
fn touch_lines(
    line_shadow: &mut Presence,
    last_line: &mut u64,
    lines: &mut [u64],
    new: (u64, u64),
    per_line: u32,
    current: &[u64],
) {
    let (mut from, to) = (new.0 >> per_line, new.1 >> per_line);
    if from == *last_line {
        if from == to {
            return;
        }
        from += 1;
    }
    *last_line = to;
    let d = current.len();
    line_shadow.touch_span(
        from,
        to,
        d,
        current,
        |valid, n| add_levels(lines, valid, d, n),
        |_, _| {},
    );
}

#[inline]
fn add_levels(counters: &mut [u64], from: usize, to: usize, n: u64) {
    for c in &mut counters[from..to] {
        *c += n;
    }
}
