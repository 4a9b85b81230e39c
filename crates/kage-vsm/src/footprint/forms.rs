//! The forms of a palette table ([`Repr`]) and the changes between them: the raise of a
//! table that is not bytes (within one word of codes, or over the table: a code relabelled,
//! taken free or freed by a merge), one value becoming one-bit codes, one-bit codes widening
//! to two bits and two-bit codes narrowing back, two-bit codes expanding to bytes when a
//! fifth value is needed, and a byte array re-encoded after a large scrub. [`event`] counts
//! these transitions for the tests.

use super::bytes::{eq_mask, few_values, min_max, raise_bytes};
use super::palette::{code_eq, compact, scan_codes, spread, Packed, Width, NO_WORDS};
use super::rle::{bytes_repr_bytes, Repr, RlePage, Runs, CHUNK_SHIFT, MAX_EXPANSIONS};

impl RlePage {
    /// A byte table of at most three values as one value or as codes of two bits (a code
    /// left free for the write that follows the scrub, which is above every value). Four
    /// values stay bytes: that write would expand them again, unless it covered every unit
    /// of one value. Returns the change in array bytes.
    pub(super) fn reencode(&mut self, units: usize) -> isize {
        let Repr::Bytes { bytes, .. } = &self.repr else {
            unreachable!("kage-vsm: re-encoding a table that is not bytes");
        };
        let before = bytes_repr_bytes(units) as isize;
        let (min, max) = min_max(bytes);
        self.max = max;
        if min == max {
            event("bytes to one value");
            self.repr = Repr::Uniform(min);
            self.expansions = 0;
            return -before;
        }
        if self.expansions >= MAX_EXPANSIONS {
            event("bytes stay (expanded before)");
            return 0;
        }
        let Some((values, n)) = few_values(bytes, min, max) else {
            event("bytes stay");
            return 0;
        };
        event("bytes to 2-bit");
        let mut p = Packed {
            width: Width::Two,
            hot: 3,
            value: [values[0], values[1], values[2], 0],
            count: [0; 4],
            words: [NO_WORDS; 4],
            ends: 0,
            codes: vec![0; units / 32].into_boxed_slice(),
        };
        for (j, chunk) in bytes.chunks_exact(64).enumerate() {
            let ones = eq_mask(chunk, values[1]);
            let twos = if n == 3 { eq_mask(chunk, values[2]) } else { 0 };
            for (c, m) in [!(ones | twos), ones, twos].into_iter().enumerate() {
                p.count[c] += m.count_ones() as u16;
                for half in 0..2 {
                    if (m >> (32 * half)) as u32 != 0 {
                        p.add_words(c, 2 * j + half, 2 * j + half);
                    }
                }
            }
            p.codes[2 * j] = spread(ones as u32) | spread(twos as u32) << 1;
            p.codes[2 * j + 1] = spread((ones >> 32) as u32) | spread((twos >> 32) as u32) << 1;
        }
        let after = p.array_bytes() as isize;
        self.repr = Repr::Packed(p);
        after - before
    }

    /// The range update of [`RlePresence::touch_range`] on a validated table that is not
    /// bytes: units `lo..=hi` below `d` become `d`. Returns the change in array bytes and
    /// the first and the last unit raised, if any.
    ///
    /// [`RlePresence::touch_range`]: super::rle::RlePresence::touch_range
    #[inline(always)]
    pub(super) fn raise_compressed(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        units: usize,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> (isize, Option<(usize, usize)>) {
        let in_word = match &mut self.repr {
            Repr::Packed(p) if p.width == Width::Two && lo / 32 == hi / 32 => {
                p.raise_in_word::<2>(lo, hi, d, runs)
            }
            Repr::Packed(p) if p.width == Width::One && lo / 64 == hi / 64 => {
                p.raise_in_word::<1>(lo, hi, d, runs)
            }
            _ => None,
        };
        match in_word {
            Some(span) => {
                self.max = self.max.max(d);
                (0, span)
            }
            None => self.raise_table(lo, hi, d, units, runs),
        }
    }

    /// [`raise_compressed`](Self::raise_compressed) for everything but a range within one
    /// word of codes (out of line, so that the one-word path stays small).
    #[inline(never)]
    fn raise_table(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        units: usize,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> (isize, Option<(usize, usize)>) {
        match &mut self.repr {
            &mut Repr::Uniform(v) => {
                if v >= d {
                    return (0, None);
                }
                let n = hi - lo + 1;
                runs.add(v, n as u64);
                self.max = self.max.max(d);
                if n == units {
                    self.repr = Repr::Uniform(d);
                    self.expansions = 0;
                    return (0, Some((lo, hi)));
                }
                let words = units / 64;
                let mut codes = vec![0u64; words].into_boxed_slice();
                set_bits(&mut codes, lo, hi);
                self.repr = Repr::Packed(Packed {
                    width: Width::One,
                    hot: 1,
                    value: [v, d, 0, 0],
                    count: [(units - n) as u16, n as u16, 0, 0],
                    words: [
                        [0, (words - 1) as u16],
                        [(lo / 64) as u16, (hi / 64) as u16],
                        NO_WORDS,
                        NO_WORDS,
                    ],
                    ends: 0,
                    codes,
                });
                (bits_bytes(units) as isize, Some((lo, hi)))
            }
            Repr::Packed(p) if p.width == Width::One => {
                self.raise_packed::<1>(lo, hi, d, units, runs)
            }
            Repr::Packed(_) => self.raise_packed::<2>(lo, hi, d, units, runs),
            Repr::Bytes { .. } => unreachable!("kage-vsm: a byte table is not compressed"),
        }
    }

    /// [`raise_compressed`](Self::raise_compressed) on codes of `W` bits.
    #[inline(never)]
    fn raise_packed<const W: u32>(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        units: usize,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> (isize, Option<(usize, usize)>) {
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: raising codes of a table that has none");
        };
        debug_assert_eq!(p.width as u32, W);
        let per_word = 64 / W as usize;
        // The codes in use below `d`, and one whose value is `d`.
        let (mut below, mut target) = (0u32, None);
        for c in p.used() {
            match p.value[c].cmp(&d) {
                std::cmp::Ordering::Less => below |= 1 << c,
                std::cmp::Ordering::Equal => target = Some(c),
                std::cmp::Ordering::Greater => {}
            }
        }
        if below == 0 {
            return (0, None);
        }
        let mut got = [0u16; 4];
        let report = |p: &Packed, got: &[u16; 4], runs: &mut Runs<_>| {
            for (c, &n) in got.iter().enumerate() {
                if n != 0 {
                    runs.add(p.value[c], n as u64);
                }
            }
        };
        let (t, span) = if let Some(t) = target {
            // One pass: count the units below `d` per code and give them code `t`.
            let Some(span) = scan_codes::<W, true>(&mut p.codes, lo, hi, below, t, &mut got).get()
            else {
                return (0, None);
            };
            report(p, &got, runs);
            (t, span)
        } else {
            let Some(span) = scan_codes::<W, false>(&mut p.codes, lo, hi, below, 0, &mut got).get()
            else {
                return (0, None);
            };
            let (mut whole, mut partial) = (0u32, 0u32);
            for (c, &n) in got.iter().enumerate() {
                if n == p.count[c] && n != 0 {
                    whole |= 1 << c;
                } else if n != 0 {
                    partial |= 1 << c;
                }
            }
            if partial == 0 {
                // Every code raised is raised whole: it takes the value `d`, no unit changes.
                event("relabel all");
                report(p, &got, runs);
                for c in 0..4 {
                    if whole >> c & 1 != 0 {
                        p.value[c] = d;
                        p.hot = c as u8;
                    }
                }
                self.max = self.max.max(d);
                return (self.after_raise::<W>(lo, hi, units), Some(span));
            }
            let free = (0..1 << W).find(|&c| p.count[c] == 0);
            let t = if whole != 0 {
                event("relabel one");
                whole.trailing_zeros() as usize
            } else if let Some(free) = free {
                event("free code");
                free
            } else if let Some((from, into)) = p.duplicate() {
                event("merge");
                p.merge::<W>(from, into);
                got[into] += std::mem::take(&mut got[from]);
                from
            } else if W == 1 {
                // Two values in use, a third needed: two bits per unit.
                let widened = self.widen();
                let (delta, span) = self.raise_packed::<2>(lo, hi, d, units, runs);
                return (widened + delta, span);
            } else {
                // Four values in use, none raised whole: a fifth needs bytes.
                return self.expand_and_raise(lo, hi, d, units, runs);
            };
            report(p, &got, runs);
            // `t`'s units in the range (if any) are all below `d`; the others take `t`.
            let rest = (0..4)
                .filter(|&c| c != t && got[c] != 0)
                .fold(0, |set, c| set | 1 << c);
            scan_codes::<W, true>(&mut p.codes, span.0, span.1, rest, t, &mut [0; 4]);
            (t, span)
        };
        // Move the counts to `t`.
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: still codes");
        };
        p.value[t] = d;
        p.hot = t as u8;
        for (c, &n) in got.iter().enumerate() {
            if c != t && n != 0 {
                p.count[c] -= n;
                p.count[t] += n;
                if p.count[c] == 0 {
                    p.free_words(c);
                }
            }
        }
        p.add_words(t, span.0 / per_word, span.1 / per_word);
        self.max = self.max.max(d);
        (self.after_raise::<W>(lo, hi, units), Some(span))
    }

    /// After raising units `lo..=hi` of a table of codes: one value if every unit holds
    /// the same; from two bits to one when two codes are left in use and the raise covered a
    /// quarter of the table (the narrowing costs at most a few times the raise; a small
    /// write does not pay for it, nor switch back and forth). Returns the change in array
    /// bytes.
    fn after_raise<const W: u32>(&mut self, lo: usize, hi: usize, units: usize) -> isize {
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: still codes");
        };
        if let Some(v) = p.one_value() {
            event("raised to one value");
            let freed = p.array_bytes();
            self.repr = Repr::Uniform(v);
            self.expansions = 0;
            return -(freed as isize);
        }
        if W == 2 && p.used().count() <= 2 && (hi - lo + 1) * 4 >= units {
            return self.narrow(units);
        }
        0
    }

    /// A table of one-bit codes as two-bit codes (the same codes). Returns the change in
    /// array bytes.
    #[cold]
    fn widen(&mut self) -> isize {
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: widening a table without codes");
        };
        debug_assert_eq!(p.width, Width::One);
        event("widen");
        let mut codes = vec![0u64; 2 * p.codes.len()].into_boxed_slice();
        for (pair, &bits) in codes.chunks_exact_mut(2).zip(p.codes.iter()) {
            pair[0] = spread(bits as u32);
            pair[1] = spread((bits >> 32) as u32);
        }
        for c in p.used().collect::<Vec<_>>() {
            let [first, last] = p.words[c];
            p.words[c] = [2 * first, 2 * last + 1];
        }
        // A word's units are now in two words: only a code in one word keeps its ends.
        p.ends &= p
            .used()
            .filter(|&c| p.words[c][1] - p.words[c][0] == 1)
            .fold(0, |m, c| m | 1 << c);
        let before = p.array_bytes() as isize;
        p.width = Width::Two;
        p.codes = codes;
        p.array_bytes() as isize - before
    }

    /// A table of two-bit codes, two of them in use, as one-bit codes. Returns the change in
    /// array bytes.
    #[cold]
    fn narrow(&mut self, units: usize) -> isize {
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: narrowing a table without codes");
        };
        let a = p.used().next().expect("a code in use");
        let b = p.used().find(|&c| c > a).expect("two codes in use");
        debug_assert_eq!(p.used().count(), 2);
        event("narrow");
        let mut bits = vec![0u64; units / 64].into_boxed_slice();
        for (word, pair) in bits.iter_mut().zip(p.codes.chunks_exact(2)) {
            *word = compact(code_eq::<2>(pair[0], b)) as u64
                | (compact(code_eq::<2>(pair[1], b)) as u64) << 32;
        }
        let half = |w: [u16; 2]| [w[0] / 2, w[1] / 2];
        let narrow = Packed {
            width: Width::One,
            hot: (p.hot as usize == b) as u8,
            value: [p.value[a], p.value[b], 0, 0],
            count: [p.count[a], p.count[b], 0, 0],
            words: [half(p.words[a]), half(p.words[b]), NO_WORDS, NO_WORDS],
            // The words of the ends hold the units of the ends.
            ends: (p.ends >> a & 1) | (p.ends >> b & 1) << 1,
            codes: bits,
        };
        let delta = narrow.array_bytes() as isize - p.array_bytes() as isize;
        *p = narrow;
        delta
    }

    /// A table of two-bit codes as bytes (exact chunk bounds), then units `lo..=hi` below
    /// `d` raised to `d`. Returns the change in array bytes and the first and the last unit
    /// raised.
    #[cold]
    fn expand_and_raise(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        units: usize,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> (isize, Option<(usize, usize)>) {
        let Repr::Packed(p) = &self.repr else {
            unreachable!("kage-vsm: expanding a table without codes");
        };
        debug_assert_eq!(p.width, Width::Two);
        event("expand");
        // A byte of codes (four units) to their four values.
        let four: [u32; 256] = std::array::from_fn(|byte| {
            (0..4).fold(0, |word, i| {
                word | (p.value[byte >> (2 * i) & 3] as u32) << (8 * i)
            })
        });
        let mut bytes = vec![0u8; units].into_boxed_slice();
        for (out, &word) in bytes.chunks_exact_mut(32).zip(p.codes.iter()) {
            for (q, quad) in out.chunks_exact_mut(4).enumerate() {
                quad.copy_from_slice(&four[(word >> (8 * q) & 0xff) as usize].to_le_bytes());
            }
        }
        // A chunk of 64 units is two words of codes.
        let mut chunk_max: Box<[u8]> = p
            .codes
            .chunks_exact(2)
            .map(|pair| {
                p.used()
                    .filter(|&c| code_eq::<2>(pair[0], c) | code_eq::<2>(pair[1], c) != 0)
                    .map(|c| p.value[c])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let span = raise_bytes(&mut bytes[lo..=hi], d, runs).map(|(a, b)| (lo + a, lo + b));
        for m in &mut chunk_max[lo >> CHUNK_SHIFT..=hi >> CHUNK_SHIFT] {
            *m = (*m).max(d);
        }
        let delta = bytes_repr_bytes(units) as isize - p.array_bytes() as isize;
        self.max = self.max.max(d);
        self.expansions = self.expansions.saturating_add(1);
        self.repr = Repr::Bytes { bytes, chunk_max };
        (delta, span)
    }
}

fn bits_bytes(units: usize) -> usize {
    units.div_ceil(64) * size_of::<u64>()
}

/// Sets bits `lo..=hi` of a bitmap. Returns how many were clear and the first and the last
/// of them, if any.
#[inline]
fn set_bits(bits: &mut [u64], lo: usize, hi: usize) -> (u32, Option<(usize, usize)>) {
    let (first_word, last_word) = (lo / 64, hi / 64);
    let mut n = 0;
    let (mut first, mut last) = (usize::MAX, 0);
    for (w, word) in bits[first_word..=last_word].iter_mut().enumerate() {
        let w = first_word + w;
        let mut mask = u64::MAX;
        if w == first_word {
            mask &= u64::MAX << (lo % 64);
        }
        if w == last_word {
            mask &= u64::MAX >> (63 - hi % 64);
        }
        let clear = !*word & mask;
        if clear != 0 {
            n += clear.count_ones();
            if first == usize::MAX {
                first = w * 64 + clear.trailing_zeros() as usize;
            }
            last = w * 64 + 63 - clear.leading_zeros() as usize;
            *word |= mask;
        }
    }
    (n, (n != 0).then_some((first, last)))
}

/// Counts a table transition (tests only: they check that every path is taken).
#[inline(always)]
pub(super) fn event(_name: &'static str) {
    #[cfg(test)]
    super::tests::EVENTS.with(|e| *e.borrow_mut().entry(_name).or_default() += 1);
}

#[cfg(test)]
mod tests;
