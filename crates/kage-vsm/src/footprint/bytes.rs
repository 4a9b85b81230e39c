//! Word-at-a-time operations on byte arrays (8 bytes in a `u64`): raising a range of
//! run-length bytes to a depth while reporting their old values ([`raise_bytes`]), clamping
//! the chunks whose bound exceeds a scrub level ([`clamp_chunks`]), and the scans that
//! re-encoding uses (the bytes equal to a value as a bit mask, the smallest and the largest,
//! whether at most three values are present).

use super::rle::{Runs, CHUNK_SHIFT};

/// A byte's lowest bit in every byte of a word.
pub(super) const ONES: u64 = 0x0101_0101_0101_0101;
/// A byte's highest bit in every byte of a word.
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `x` that is less than the same byte of `y` (unsigned,
/// exact: no borrow crosses bytes).
#[inline(always)]
pub(super) fn bytes_less(x: u64, y: u64) -> u64 {
    // Per byte: (x | 0x80) - (y & 0x7f) is in 1..=255, its high bit set iff x's low seven
    // bits are at least y's.
    let low_ge = (x | HIGHS) - (y & !HIGHS);
    ((!x & y) | (!(x ^ y) & !low_ge)) & HIGHS
}

#[inline(always)]
pub(super) fn load(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
pub(super) fn store(bytes: &mut [u8], at: usize, word: u64) {
    bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
}

/// The first and the last offset of something, if any.
pub(super) struct Span {
    first: usize,
    last: usize,
}

impl Span {
    pub(super) const NONE: Span = Span {
        first: usize::MAX,
        last: 0,
    };

    #[inline(always)]
    pub(super) fn note(&mut self, first: usize, last: usize) {
        self.first = self.first.min(first);
        self.last = last;
    }

    #[inline(always)]
    pub(super) fn get(self) -> Option<(usize, usize)> {
        (self.first != usize::MAX).then_some((self.first, self.last))
    }
}

/// Raises the bytes below `d` (`dd`: `d` in every byte) of the word at `at` to `d`, adding
/// their old values to `runs` and their offsets to `span`.
#[inline(always)]
fn raise_word(
    bytes: &mut [u8],
    at: usize,
    dd: u64,
    runs: &mut Runs<impl FnMut(usize, u64)>,
    span: &mut Span,
) {
    let word = load(bytes, at);
    let less = bytes_less(word, dd);
    if less == 0 {
        return;
    }
    span.note(
        at + less.trailing_zeros() as usize / 8,
        at + (63 - less.leading_zeros() as usize) / 8,
    );
    if word == (word & 0xff) * ONES {
        // One value, below `d`: the usual case (a table or a line touched at one level).
        runs.add(word as u8, 8);
        store(bytes, at, dd);
        return;
    }
    let mut bits = less;
    while bits != 0 {
        runs.add((word >> (bits.trailing_zeros() & !7) & 0xff) as u8, 1);
        bits &= bits - 1;
    }
    let mask = (less >> 7) * 0xff;
    store(bytes, at, (word & !mask) | (dd & mask));
}

#[inline(always)]
fn raise_scalar(bytes: &mut [u8], d: u8, runs: &mut Runs<impl FnMut(usize, u64)>, span: &mut Span) {
    for (i, b) in bytes.iter_mut().enumerate() {
        if *b < d {
            runs.add(*b, 1);
            span.note(i, i);
            *b = d;
        }
    }
}

/// Raises every byte of `bytes` below `d` to `d`, adding the old values to `runs`, a word
/// (8 bytes) at a time: a word all at least `d` is skipped, one of a single value below
/// `d` counted at once; on long ranges, 32 bytes of one value are decided together.
/// Returns the first and the last raised offset, if any.
#[inline(always)]
pub(super) fn raise_bytes(
    bytes: &mut [u8],
    d: u8,
    runs: &mut Runs<impl FnMut(usize, u64)>,
) -> Option<(usize, usize)> {
    let len = bytes.len();
    let mut span = Span::NONE;
    if len < 8 {
        raise_scalar(bytes, d, runs, &mut span);
        return span.get();
    }
    let dd = ONES * d as u64;
    let mut at = 0;
    if len >= 32 {
        raise_long(bytes, d, runs, &mut span);
        at = len & !31;
    }
    while at + 8 <= len {
        raise_word(bytes, at, dd, runs, &mut span);
        at += 8;
    }
    if at < len {
        // The last word again, overlapping: its raised bytes are no longer below `d`.
        raise_word(bytes, len - 8, dd, runs, &mut span);
    }
    span.get()
}

/// [`raise_bytes`] over the leading multiple of 32 bytes.
fn raise_long(bytes: &mut [u8], d: u8, runs: &mut Runs<impl FnMut(usize, u64)>, span: &mut Span) {
    let dd = ONES * d as u64;
    for at in (0..bytes.len() & !31).step_by(32) {
        let w: [u64; 4] = std::array::from_fn(|i| load(bytes, at + 8 * i));
        let v = w[0] & 0xff;
        if w[0] == v * ONES && w[1] == w[0] && w[2] == w[0] && w[3] == w[0] {
            if (v as u8) < d {
                runs.add(v as u8, 32);
                span.note(at, at + 31);
                for i in 0..4 {
                    store(bytes, at + 8 * i, dd);
                }
            }
        } else {
            for i in 0..4 {
                raise_word(bytes, at + 8 * i, dd, runs, span);
            }
        }
    }
}

/// Clamps to `scrub` the chunks of `bytes` whose bound in `chunk_max` exceeds it (bounds
/// included), finding them 8 bounds at a time. Returns how many chunks were clamped.
#[inline]
pub(super) fn clamp_chunks(bytes: &mut [u8], chunk_max: &mut [u8], scrub: u8) -> usize {
    let mut clamped = 0;
    let mut clamp = |c: usize| {
        let at = c << CHUNK_SHIFT;
        let end = bytes.len().min(at + (1 << CHUNK_SHIFT));
        match <&mut [u8; 1 << CHUNK_SHIFT]>::try_from(&mut bytes[at..end]) {
            Ok(chunk) => {
                for b in chunk {
                    *b = (*b).min(scrub);
                }
            }
            Err(_) => {
                for b in &mut bytes[at..end] {
                    *b = (*b).min(scrub);
                }
            }
        }
        clamped += 1;
    };
    let ss = ONES * scrub as u64;
    let words = chunk_max.len() / 8;
    for w in 0..words {
        let above = bytes_less(ss, load(chunk_max, w * 8));
        if above != 0 {
            let mut bits = above;
            while bits != 0 {
                clamp(w * 8 + bits.trailing_zeros() as usize / 8);
                bits &= bits - 1;
            }
            let mask = (above >> 7) * 0xff;
            let word = load(chunk_max, w * 8);
            store(chunk_max, w * 8, (word & !mask) | (ss & mask));
        }
    }
    for (c, m) in chunk_max.iter_mut().enumerate().skip(words * 8) {
        if *m > scrub {
            clamp(c);
            *m = scrub;
        }
    }
    clamped
}

/// The high bit of every zero byte of `x` (exact).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    // Per byte: the low seven bits plus 0x7f carry into the high bit iff not all zero.
    !((((x & !HIGHS) + !HIGHS) | x) & HIGHS) & HIGHS
}

/// Bit `i` set where `chunk[i] == value` (at most 64 bytes), a word at a time.
#[inline]
pub(super) fn eq_mask(chunk: &[u8], value: u8) -> u64 {
    let Ok(chunk) = <&[u8; 64]>::try_from(chunk) else {
        return chunk
            .iter()
            .enumerate()
            .fold(0, |word, (i, &b)| word | ((b == value) as u64) << i);
    };
    let vv = ONES * value as u64;
    let mut mask = 0;
    for w in 0..8 {
        let zero = zero_bytes(load(chunk, 8 * w) ^ vv);
        // Bit 8i to bit i (no two partial products meet in the top byte).
        let packed = (zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= packed << (8 * w);
    }
    mask
}

/// The distinct values of `bytes`, whose smallest is `min` and largest `max > min`, and how
/// many there are, if two or three (unused entries repeat the first): whether any other byte
/// is there, then whether it is the only one (passes the compiler vectorizes; a table that
/// has more values, the usual case where this fails, costs two of them).
pub(super) fn few_values(bytes: &[u8], min: u8, max: u8) -> Option<([u8; 3], usize)> {
    debug_assert!(min < max);
    if only_values(bytes, [min, max, max]) {
        return Some(([min, max, min], 2));
    }
    let &mid = bytes.iter().find(|&&b| b != min && b != max)?;
    only_values(bytes, [min, mid, max]).then_some(([min, mid, max], 3))
}

/// The smallest and the largest byte (`(255, 0)` for none), 32 lanes at a time.
#[inline]
pub(super) fn min_max(bytes: &[u8]) -> (u8, u8) {
    const LANES: usize = 32;
    let (mut min, mut max) = ([u8::MAX; LANES], [0u8; LANES]);
    let mut blocks = bytes.chunks_exact(LANES);
    for block in blocks.by_ref() {
        let block: &[u8; LANES] = block.try_into().expect("a block");
        for i in 0..LANES {
            min[i] = min[i].min(block[i]);
            max[i] = max[i].max(block[i]);
        }
    }
    let mut lo = min.iter().fold(u8::MAX, |a, &b| a.min(b));
    let mut hi = max.iter().fold(0, |a, &b| a.max(b));
    for &b in blocks.remainder() {
        lo = lo.min(b);
        hi = hi.max(b);
    }
    (lo, hi)
}

/// Whether every byte is one of `values`, 32 lanes at a time.
#[inline]
fn only_values(bytes: &[u8], values: [u8; 3]) -> bool {
    const LANES: usize = 32;
    let mut other = [0u8; LANES];
    let mut blocks = bytes.chunks_exact(LANES);
    for block in blocks.by_ref() {
        let block: &[u8; LANES] = block.try_into().expect("a block");
        for i in 0..LANES {
            let b = block[i];
            other[i] |=
                u8::from(b != values[0]) & u8::from(b != values[1]) & u8::from(b != values[2]);
        }
    }
    other.iter().all(|&o| o == 0) && blocks.remainder().iter().all(|b| values.contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::footprint::tests::Rng;

    #[test]
    fn bytes_less_compares_every_byte_pair() {
        for x in 0..=255u8 {
            for y in 0..=255u8 {
                // Every lane, with different neighbours on either side.
                let words = [
                    (ONES * x as u64, ONES * y as u64),
                    (
                        (ONES * x as u64) ^ 0x00ff_00ff_00ff_00ff,
                        (ONES * y as u64) ^ 0xff00_ff00_ff00_ff00,
                    ),
                ];
                for (a, b) in words {
                    let expected = (0..8)
                        .filter(|i| ((a >> (8 * i)) as u8) < ((b >> (8 * i)) as u8))
                        .fold(0, |m, i| m | 0x80 << (8 * i));
                    assert_eq!(bytes_less(a, b), expected, "{a:x} < {b:x}");
                }
            }
        }
    }

    #[test]
    fn word_helpers_match_byte_loops() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..3000 {
            let len = 1 + rng.next() as usize % 300;
            let bytes = rng.bytes(len);
            let d = if rng.next().is_multiple_of(3) {
                bytes[0]
            } else {
                rng.next() as u8
            };

            // raise_bytes: the totals per old value, the span, the result.
            let mut raised = bytes.clone();
            let mut totals = [0u64; 256];
            let mut runs = Runs::new(|v, n| totals[v] += n);
            let span = raise_bytes(&mut raised, d, &mut runs);
            runs.finish();
            let mut expected = [0u64; 256];
            for &b in bytes.iter().filter(|&&b| b < d) {
                expected[b as usize] += 1;
            }
            assert_eq!(totals, expected, "{bytes:?} {d}");
            let first = bytes.iter().position(|&b| b < d);
            let last = bytes.iter().rposition(|&b| b < d);
            assert_eq!(span, first.zip(last), "{bytes:?} {d}");
            let max: Vec<u8> = bytes.iter().map(|&b| b.max(d)).collect();
            assert_eq!(raised, max);

            let mut distinct = bytes.clone();
            distinct.sort();
            distinct.dedup();
            let (min, top) = (distinct[0], distinct[distinct.len() - 1]);
            if min < top {
                match few_values(&bytes, min, top) {
                    Some((values, n)) => {
                        let mut found = values[..n].to_vec();
                        found.sort();
                        assert_eq!(found, distinct, "{bytes:?}");
                        assert!(values[n..].iter().all(|&v| v == values[0]));
                    }
                    None => assert!(distinct.len() > 3, "{bytes:?}"),
                }
            }
            assert_eq!(min_max(&bytes), (min, top));
            let three = [min, top, distinct[distinct.len() / 2]];
            assert_eq!(
                only_values(&bytes, three),
                bytes.iter().all(|b| three.contains(b))
            );
            for chunk in bytes.chunks(64) {
                let mask = (0..chunk.len())
                    .filter(|&i| chunk[i] == d)
                    .fold(0u64, |m, i| m | 1 << i);
                assert_eq!(eq_mask(chunk, d), mask);
            }

            // clamp_chunks: bounds that hold, some above the truth.
            let mut clamped = bytes.clone();
            let mut bounds: Vec<u8> = clamped
                .chunks(64)
                .map(|c| {
                    c.iter()
                        .copied()
                        .max()
                        .unwrap()
                        .saturating_add(rng.next() as u8 % 3)
                })
                .collect();
            let expected_count = bounds.iter().filter(|&&m| m > d).count();
            let expected_bounds: Vec<u8> = bounds.iter().map(|&m| m.min(d)).collect();
            assert_eq!(clamp_chunks(&mut clamped, &mut bounds, d), expected_count);
            assert_eq!(bounds, expected_bounds);
            let expected: Vec<u8> = bytes.iter().map(|&b| b.min(d)).collect();
            assert_eq!(clamped, expected);
        }
    }
}
