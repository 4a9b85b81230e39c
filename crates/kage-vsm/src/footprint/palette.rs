//! The codes of a palette table ([`Packed`]): per unit a code of one or two bits, per code a
//! value, a count of units and a span of words. The raise within one word of codes (the
//! usual small access), merges of two codes of the same value, and the word-at-a-time
//! operations on codes (compared, counted and set 64 or 32 units at a time; spread from one
//! bit to two and compacted back).

use super::bytes::Span;
use super::forms::event;
use super::rle::Runs;

/// A table of at most four values: per unit a code of `width` bits, per code a value (a
/// palette). A scrub clamps the values, not the codes; a raise gives the raised units a code
/// whose value is the depth, found or made (a code raised whole takes the new value, a free
/// code is taken, or two codes of the same value are merged first).
#[derive(Debug)]
pub(super) struct Packed {
    /// Bits per code.
    pub(super) width: Width,
    /// Per code, its value. A code no unit holds is free, whatever its value; two codes may
    /// hold the same value (a scrub clamps both to the same level).
    pub(super) value: [u8; 4],
    /// Per code, how many units hold it (together: the table's units).
    pub(super) count: [u16; 4],
    /// Per code, the first and the last word of `codes` that may hold it (`NO_WORDS` for a
    /// free code): a merge rewrites the words of the code merged, not the whole table.
    pub(super) words: [[u16; 2]; 4],
    /// Per code (bit `c`): its units lie in its first and its last word only, so a merge
    /// rewrites at most two words however far apart they are (a column walk leaves a code
    /// with this instance's element and the last one's, a row apart).
    pub(super) ends: u8,
    /// The code given the depth at the last raise (a hint for the next one).
    pub(super) hot: u8,
    /// Unit `i`'s code in bits `width * i..width * (i + 1)`.
    pub(super) codes: Box<[u64]>,
}

/// Bits per code (an enum: its spare values hold [`Repr`]'s variant, so that a page is 64
/// bytes).
///
/// [`Repr`]: super::rle::Repr
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Width {
    /// Codes 0 and 1.
    One = 1,
    /// Codes 0 to 3.
    Two = 2,
}

/// The words of a free code.
pub(super) const NO_WORDS: [u16; 2] = [u16::MAX, 0];

/// The largest palette table, in units (`Packed::count` holds up to the table's units in 16
/// bits).
pub(super) const MAX_PACKED_BITS: u32 = 15;

impl Packed {
    /// The codes some unit holds.
    #[inline]
    pub(super) fn used(&self) -> impl Iterator<Item = usize> + '_ {
        (0..4).filter(|&c| self.count[c] != 0)
    }

    /// The value of every unit, if they all hold the same.
    #[inline]
    pub(super) fn one_value(&self) -> Option<u8> {
        let mut used = self.used();
        let v = self.value[used.next()?];
        used.all(|c| self.value[c] == v).then_some(v)
    }

    pub(super) fn max_value(&self) -> u8 {
        self.used().map(|c| self.value[c]).max().unwrap_or(0)
    }

    #[inline]
    pub(super) fn value_at(&self, unit: usize) -> u8 {
        let width = self.width as usize;
        // 64 or 32 units per word (no division).
        let per_word_bits = 7 - width;
        let at = (unit & ((1 << per_word_bits) - 1)) * width;
        let code = self.codes[unit >> per_word_bits] >> at & ((1 << width) - 1);
        self.value[code as usize]
    }

    pub(super) fn array_bytes(&self) -> usize {
        self.codes.len() * size_of::<u64>()
    }

    /// Code `code` may now hold units in words `first..=last`.
    #[inline]
    pub(super) fn add_words(&mut self, code: usize, first: usize, last: usize) {
        let [f, l] = self.words[code];
        let (nf, nl) = (f.min(first as u16), l.max(last as u16));
        let is_end = |w: u16| w == nf || w == nl;
        let ends_only = last - first <= 1
            && is_end(first as u16)
            && is_end(last as u16)
            && (f > l || (self.ends >> code & 1 != 0 && is_end(f) && is_end(l)));
        self.ends = self.ends & !(1 << code) | (ends_only as u8) << code;
        self.words[code] = [nf, nl];
    }

    /// Code `code` holds no unit any more.
    pub(super) fn free_words(&mut self, code: usize) {
        self.words[code] = NO_WORDS;
        self.ends &= !(1 << code);
    }

    /// The words a merge of code `c` into another rewrites.
    fn merge_cost(&self, c: usize) -> u16 {
        let [first, last] = self.words[c];
        if self.ends >> c & 1 != 0 {
            1 + (first != last) as u16
        } else {
            last - first + 1
        }
    }

    /// Two used codes of the same value, if any: (the one to merge, the one to keep), the
    /// merged one spanning the fewest words.
    pub(super) fn duplicate(&self) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        let mut best_span = u16::MAX;
        for a in 0..4 {
            for b in a + 1..4 {
                if self.count[a] == 0 || self.count[b] == 0 || self.value[a] != self.value[b] {
                    continue;
                }
                let (sa, sb) = (self.merge_cost(a), self.merge_cost(b));
                let (pair, span) = if sa <= sb { ((a, b), sa) } else { ((b, a), sb) };
                if best.is_none() || span < best_span {
                    best = Some(pair);
                    best_span = span;
                }
            }
        }
        best
    }

    /// A used code of value `d`, if any (`hot` first).
    #[inline(always)]
    fn code_of(&self, d: u8) -> Option<usize> {
        let hot = self.hot as usize;
        if self.count[hot] != 0 && self.value[hot] == d {
            return Some(hot);
        }
        (0..4).find(|&c| self.count[c] != 0 && self.value[c] == d)
    }

    /// A code for the value `d` when none is used: a free one, or one freed by a merge.
    #[inline(always)]
    fn new_code<const W: u32>(&mut self, got: &mut [u16; 4]) -> Option<usize> {
        if let Some(free) = (0..1 << W).find(|&c| self.count[c] == 0) {
            return Some(free);
        }
        // The code raised last is usually small and now equal to another (a scrub clamped
        // it): merge it without a search.
        let hot = self.hot as usize;
        let (from, into) = match (0..4).find(|&c| c != hot && self.value[c] == self.value[hot]) {
            Some(other) if self.count[other] != 0 && self.count[hot] != 0 => {
                // Either way frees a code: rewrite the fewer words.
                if self.merge_cost(other) < self.merge_cost(hot) {
                    (other, hot)
                } else {
                    (hot, other)
                }
            }
            _ => self.duplicate()?,
        };
        event(if from == hot {
            "word merge (last)"
        } else if into == hot {
            "word merge (into last)"
        } else {
            "word merge"
        });
        self.merge::<W>(from, into);
        got[into] += std::mem::take(&mut got[from]);
        Some(from)
    }

    /// [`RlePage::raise_compressed`] for units `lo..=hi` of one word of codes, when no code
    /// runs out of units and no code must be added: the usual small access. Returns `None`,
    /// having changed nothing but maybe merged two codes of the same value, when the
    /// general path is needed.
    ///
    /// [`RlePage::raise_compressed`]: super::rle::RlePage::raise_compressed
    #[inline(always)]
    pub(super) fn raise_in_word<const W: u32>(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> Option<Option<(usize, usize)>> {
        let per_word = 64 / W as usize;
        let w = lo / per_word;
        debug_assert_eq!(hi / per_word, w);
        let word = self.codes[w];
        let range = unit_range::<W>(lo % per_word, hi % per_word);
        let first = (word >> range.trailing_zeros() & ((1 << W) - 1)) as usize;
        let mut got = [0u16; 4];
        if code_eq::<W>(word, first) & range == range {
            // The usual case, one code over the range (no popcount: without the instruction,
            // counting would be most of the work).
            if self.value[first] >= d {
                return Some(None);
            }
            let n = (hi - lo + 1) as u16;
            if n == self.count[first] {
                // All of the code: it takes the value (unless the table is then one value).
                if (0..4).all(|c| c == first || self.count[c] == 0 || self.value[c] == d) {
                    return None;
                }
                event("word relabel");
                runs.add(self.value[first], n as u64);
                self.value[first] = d;
                self.hot = first as u8;
                return Some(Some((lo, hi)));
            }
            let (t, from) = match self.code_of(d) {
                Some(t) => (t, first),
                None => {
                    got[first] = n;
                    let t = self.new_code::<W>(&mut got)?;
                    // After a merge, `first`'s units may be another code's (same value).
                    (
                        t,
                        got.iter().position(|&g| g != 0).expect("the units counted"),
                    )
                }
            };
            let word = self.codes[w];
            self.codes[w] = (word & !unit_bits::<W>(range)) | (range * t as u64);
            runs.add(self.value[from], n as u64);
            self.count[from] -= n;
            self.count[t] += n;
            self.value[t] = d;
            self.hot = t as u8;
            self.add_words(t, w, w);
            return Some(Some((lo, hi)));
        }
        // The units below `d`, per code: one step per code present in the range.
        let mut below = 0u64;
        let mut rest = range;
        while rest != 0 {
            let c = (word >> rest.trailing_zeros() & ((1 << W) - 1)) as usize;
            let units = code_eq::<W>(word, c) & rest;
            rest &= !units;
            if self.value[c] < d {
                got[c] = units.count_ones() as u16;
                if got[c] == self.count[c] {
                    return None;
                }
                below |= units;
            }
        }
        if below == 0 {
            return Some(None);
        }
        let t = match self.code_of(d) {
            Some(t) => t,
            None => self.new_code::<W>(&mut got)?,
        };
        // Reloaded: a merge may have rewritten it (the units below `d` are the same).
        let word = self.codes[w];
        self.codes[w] = (word & !unit_bits::<W>(below)) | (below * t as u64);
        for (c, &n) in got.iter().enumerate() {
            if n != 0 {
                runs.add(self.value[c], n as u64);
                self.count[c] -= n;
                self.count[t] += n;
            }
        }
        self.value[t] = d;
        self.hot = t as u8;
        self.add_words(t, w, w);
        Some(Some((
            w * per_word + below.trailing_zeros() as usize / W as usize,
            w * per_word + (63 - below.leading_zeros() as usize) / W as usize,
        )))
    }

    /// Gives the units of code `from` the code `into`, which has the same value: `from`
    /// becomes free. Rewrites `from`'s words only.
    pub(super) fn merge<const W: u32>(&mut self, from: usize, into: usize) {
        debug_assert_eq!(self.value[from], self.value[into]);
        let [first, last] = self.words[from];
        let rewrite = |word: &mut u64| {
            let m = code_eq::<W>(*word, from);
            *word = (*word & !unit_bits::<W>(m)) | (m * into as u64);
        };
        if self.ends >> from & 1 != 0 {
            event("merge of ends");
            rewrite(&mut self.codes[first as usize]);
            rewrite(&mut self.codes[last as usize]);
            self.add_words(into, first as usize, first as usize);
            self.add_words(into, last as usize, last as usize);
        } else {
            self.codes[first as usize..=last as usize]
                .iter_mut()
                .for_each(rewrite);
            self.add_words(into, first as usize, last as usize);
        }
        self.count[into] += self.count[from];
        self.count[from] = 0;
        self.free_words(from);
    }
}

/// The low bit of every 2-bit code of a word.
const LOW2: u64 = 0x5555_5555_5555_5555;

/// The lowest bit of every unit of a word of `W`-bit codes whose code is `code`.
#[inline(always)]
pub(super) fn code_eq<const W: u32>(word: u64, code: usize) -> u64 {
    if W == 1 {
        if code == 1 {
            word
        } else {
            !word
        }
    } else {
        let x = word ^ (LOW2 * code as u64);
        !(x | x >> 1) & LOW2
    }
}

/// Every bit of the units whose lowest bit is set in `m`.
#[inline(always)]
fn unit_bits<const W: u32>(m: u64) -> u64 {
    if W == 1 {
        m
    } else {
        m * 3
    }
}

/// The lowest bits of units `a..=b` of a word of `W`-bit codes.
#[inline(always)]
fn unit_range<const W: u32>(a: usize, b: usize) -> u64 {
    let m = (u64::MAX << (a as u32 * W)) & (u64::MAX >> (63 - (b as u32 * W + W - 1)));
    if W == 1 {
        m
    } else {
        m & LOW2
    }
}

/// Over units `lo..=hi` of `W`-bit codes, a word at a time: counts in `got` the units of
/// each code in `from` (a bit per code) and, when `SET`, gives them the code `to`. Returns
/// the first and the last of them.
#[inline(always)]
pub(super) fn scan_codes<const W: u32, const SET: bool>(
    codes: &mut [u64],
    lo: usize,
    hi: usize,
    from: u32,
    to: usize,
    got: &mut [u16; 4],
) -> Span {
    let per_word = 64 / W as usize;
    let (first_word, last_word) = (lo / per_word, hi / per_word);
    let mut span = Span::NONE;
    for (w, code_word) in codes
        .iter_mut()
        .enumerate()
        .take(last_word + 1)
        .skip(first_word)
    {
        let a = if w == first_word { lo % per_word } else { 0 };
        let b = if w == last_word {
            hi % per_word
        } else {
            per_word - 1
        };
        let range = unit_range::<W>(a, b);
        let word = *code_word;
        // A word all of one code is the usual case (without a popcount instruction,
        // counting would be most of the work).
        let first = (word >> (a as u32 * W) & ((1 << W) - 1)) as usize;
        let m = if code_eq::<W>(word, first) & range == range {
            if from >> first & 1 == 0 {
                continue;
            }
            got[first] += (b - a + 1) as u16;
            range
        } else {
            let mut m = 0;
            let mut set = from;
            while set != 0 {
                let c = set.trailing_zeros() as usize;
                set &= set - 1;
                let mc = code_eq::<W>(word, c) & range;
                got[c] += mc.count_ones() as u16;
                m |= mc;
            }
            m
        };
        if m != 0 {
            span.note(
                w * per_word + m.trailing_zeros() as usize / W as usize,
                w * per_word + (63 - m.leading_zeros() as usize) / W as usize,
            );
            if SET {
                *code_word = (word & !unit_bits::<W>(m)) | (m * to as u64);
            }
        }
    }
    span
}

/// Bit `i` of `x` to bit `2i`: 32 one-bit codes as the low bits of 32 two-bit codes.
#[inline(always)]
pub(super) fn spread(x: u32) -> u64 {
    let mut x = x as u64;
    x = (x | x << 16) & 0x0000_ffff_0000_ffff;
    x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
    x = (x | x << 4) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x << 2) & 0x3333_3333_3333_3333;
    (x | x << 1) & LOW2
}

/// Bit `2i` of `x` to bit `i` (the odd bits ignored): the inverse of [`spread`].
#[inline(always)]
pub(super) fn compact(x: u64) -> u32 {
    let mut x = x & LOW2;
    x = (x | x >> 1) & 0x3333_3333_3333_3333;
    x = (x | x >> 2) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x >> 4) & 0x00ff_00ff_00ff_00ff;
    x = (x | x >> 8) & 0x0000_ffff_0000_ffff;
    (x | x >> 16) as u32
}

#[cfg(test)]
mod tests {
    use crate::footprint::tests::EVENTS;
    use crate::footprint::{Footprint, FpConfig, FpKind, Touched};

    /// Covariance's column walks: each new innermost instance raises an element of column
    /// `i` and one of column `j` in every row's table, and the code of the last instance's
    /// elements, a row apart, is merged rewriting its two words only.
    #[test]
    fn a_column_walk_merges_two_words_per_table() {
        let (m, n) = (120u64, 40u64);
        let mut fp = Footprint::new(FpConfig::new(FpKind::Palette));
        let data = 0x10_0000u64;
        fp.enter();
        fp.access(data, m * n * 8);
        EVENTS.with(|e| e.borrow_mut().clear());
        let mut expected_k = Touched::default();
        for i in 0..4 {
            fp.enter();
            for j in i + 1..m {
                fp.enter();
                fp.flush();
                for k in 0..n {
                    fp.access(data + (k * m + i) * 8, 8);
                    fp.access(data + (k * m + j) * 8, 8);
                }
                let lines: std::collections::HashSet<u64> = (0..n)
                    .flat_map(|k| [(data + (k * m + i) * 8) >> 6, (data + (k * m + j) * 8) >> 6])
                    .collect();
                expected_k.locations = 16 * n;
                expected_k.lines = lines.len() as u64;
                assert_eq!(fp.exit(), expected_k, "{i} {j}");
            }
            fp.exit();
        }
        let events = EVENTS.with(|e| e.borrow().clone());
        let walks = 4 * (m - 1) - 6;
        assert!(
            events.get("merge of ends") >= Some(&(walks as usize)),
            "{events:?}"
        );
    }
}
