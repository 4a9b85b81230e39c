//! Tests of the table forms: single palette tables driven through raises and scrubs against
//! a byte model (every transition taken), the size of a page, the bitmap helper.

use super::*;
use crate::footprint::tests::{Rng, EVENTS};

/// Every unit's value, whatever the form.
fn values_of(page: &RlePage, units: usize) -> Vec<u8> {
    match &page.repr {
        &Repr::Uniform(v) => vec![v; units],
        Repr::Packed(p) => (0..units).map(|i| p.value_at(i)).collect(),
        Repr::Bytes { bytes, .. } => bytes.to_vec(),
    }
}

/// The form's own invariants, and its array bytes.
fn check_form(page: &RlePage, units: usize, model: &[u8]) -> usize {
    assert_eq!(values_of(page, units), model, "{:?}", page.repr);
    let top = model.iter().copied().max().unwrap_or(0);
    assert!(page.max >= top, "max {} below {top}", page.max);
    match &page.repr {
        Repr::Uniform(_) => 0,
        Repr::Packed(p) => {
            let width = p.width as usize;
            assert!(width == 1 || width == 2);
            assert_eq!(p.codes.len(), units * width / 64);
            let per_word = 64 / width;
            let mut count = [0u16; 4];
            for i in 0..units {
                let c = (p.codes[i / per_word] >> (i % per_word * width) & 3) as usize;
                let c = if width == 1 { c & 1 } else { c };
                count[c] += 1;
                let [first, last] = p.words[c];
                let w = (i / per_word) as u16;
                assert!(
                    first <= w && w <= last,
                    "code {c} at unit {i} outside its words"
                );
                assert!(
                    p.ends >> c & 1 == 0 || w == first || w == last,
                    "code {c} at unit {i} between its ends"
                );
            }
            assert_eq!(count, p.count);
            let used = p.used().count();
            assert!(used >= 2, "a table of codes with {used} in use");
            assert!(p.one_value().is_none(), "codes of one value");
            for c in 0..4 {
                if p.count[c] == 0 {
                    assert_eq!(p.words[c], NO_WORDS);
                }
            }
            p.array_bytes()
        }
        Repr::Bytes { bytes, chunk_max } => {
            for (m, chunk) in chunk_max.iter().zip(bytes.chunks(1 << CHUNK_SHIFT)) {
                assert!(chunk.iter().all(|b| b <= m));
            }
            bytes_repr_bytes(units)
        }
    }
}

/// Drives single palette tables through raises and scrubs against a byte model: one to
/// five and more values, merges, scrubs that make values equal, the narrow and wide
/// codes, bytes and back.
#[test]
fn palette_tables_match_a_byte_model() {
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let mut forms = [0usize; 4];
    let mut expansions = 0;
    for units in [64usize, 128, 256, 4096] {
        for _ in 0..60 {
            let mut page = RlePage {
                version: 0,
                max: 0,
                expansions: 0,
                repr: Repr::Uniform(0),
            };
            let mut model = vec![0u8; units];
            let mut held = 0isize;
            let mut prev = (0, 0);
            // Small depths collide often; a few programs go deeper.
            let levels = if rng.next().is_multiple_of(4) { 12 } else { 6 };
            for _ in 0..400 {
                let r = rng.next();
                if r.is_multiple_of(6) {
                    let scrub = (rng.next() % (levels + 1)) as u8;
                    if scrub < page.max {
                        held += page.scrub(scrub, units, true);
                        for b in &mut model {
                            *b = (*b).min(scrub);
                        }
                    }
                } else {
                    let d = 1 + (rng.next() % levels) as u8;
                    let (lo, hi) = match r % 8 {
                        // The same units again (a line, a stack frame, per instance).
                        7 => prev,
                        1 => {
                            let lo = rng.next() as usize % units;
                            (lo, lo)
                        }
                        2 => (0, units - 1),
                        3 | 4 => {
                            let lo = rng.next() as usize % units;
                            (lo, (lo + rng.next() as usize % 9).min(units - 1))
                        }
                        _ => {
                            let lo = rng.next() as usize % units;
                            (lo, lo + rng.next() as usize % (units - lo))
                        }
                    };
                    prev = (lo, hi);
                    let mut expected = [0u64; 256];
                    for &b in &model[lo..=hi] {
                        if b < d {
                            expected[b as usize] += 1;
                        }
                    }
                    let first = model[lo..=hi].iter().position(|&b| b < d);
                    let last = model[lo..=hi].iter().rposition(|&b| b < d);
                    let expected_span = first.zip(last).map(|(a, b)| (lo + a, lo + b));
                    let distinct_before = {
                        let mut v = values_of(&page, units);
                        v.sort();
                        v.dedup();
                        v.len()
                    };
                    let was_packed = matches!(page.repr, Repr::Packed(_));

                    let mut totals = [0u64; 256];
                    if lo == hi && r.is_multiple_of(2) {
                        let (old, delta) = page.set(lo, d, units);
                        assert_eq!(old, model[lo]);
                        held += delta;
                        if old < d {
                            totals[old as usize] += 1;
                        }
                    } else {
                        let mut runs = Runs::new(|v, n| totals[v] += n);
                        let span = match &mut page.repr {
                            Repr::Bytes { bytes, chunk_max } => {
                                let span = raise_bytes(&mut bytes[lo..=hi], d, &mut runs)
                                    .map(|(a, b)| (lo + a, lo + b));
                                for m in &mut chunk_max[lo >> CHUNK_SHIFT..=hi >> CHUNK_SHIFT] {
                                    *m = (*m).max(d);
                                }
                                page.max = page.max.max(d);
                                span
                            }
                            _ => {
                                let (delta, span) =
                                    page.raise_compressed(lo, hi, d, units, &mut runs);
                                held += delta;
                                span
                            }
                        };
                        runs.finish();
                        assert_eq!(span, expected_span, "{lo}..={hi} to {d}");
                    }
                    assert_eq!(totals, expected, "{lo}..={hi} to {d}");
                    for b in &mut model[lo..=hi] {
                        *b = (*b).max(d);
                    }
                    if was_packed && matches!(page.repr, Repr::Bytes { .. }) {
                        // Only when five values are really needed.
                        let mut v = model.clone();
                        v.sort();
                        v.dedup();
                        assert!(v.len() >= 5, "expanded to bytes for {} values", v.len());
                        assert!(distinct_before >= 4);
                        expansions += 1;
                    }
                }
                let array = check_form(&page, units, &model);
                assert_eq!(held, array as isize, "array bytes");
                forms[match &page.repr {
                    Repr::Uniform(_) => 0,
                    Repr::Packed(p) => p.width as usize,
                    Repr::Bytes { .. } => 3,
                }] += 1;
            }
        }
    }
    let events = EVENTS.with(|e| e.borrow().clone());
    for name in [
        "relabel one",
        "relabel all",
        "free code",
        "merge",
        "raised to one value",
        "scrubbed to one value",
        "widen",
        "narrow",
        "expand",
        "bytes to one value",
        "bytes to 2-bit",
        "bytes stay",
        "bytes stay (expanded before)",
        "word merge (last)",
        "word merge",
        "word relabel",
    ] {
        assert!(events.get(name) >= Some(&20), "{name}: {events:?}");
    }
    assert!(forms.iter().all(|&n| n > 100), "forms reached: {forms:?}");
    assert!(expansions > 10, "{expansions} expansions");
}

#[test]
fn a_page_is_one_cache_line_of_bytes() {
    // The variant lives in `Width`'s spare values.
    assert_eq!(size_of::<Repr>(), size_of::<Packed>());
    assert!(size_of::<RlePage>() <= 64, "{}", size_of::<RlePage>());
}

#[test]
fn set_bits_counts_and_finds_the_clear_bits() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..2000 {
        let mut bits: Vec<u64> = (0..4)
            .map(|_| rng.next() & rng.next() & rng.next())
            .collect();
        let lo = rng.next() as usize % 256;
        let hi = lo + rng.next() as usize % (256 - lo);
        let clear: Vec<usize> = (lo..=hi)
            .filter(|&i| bits[i / 64] >> (i % 64) & 1 == 0)
            .collect();
        let (n, span) = set_bits(&mut bits, lo, hi);
        assert_eq!(n as usize, clear.len());
        assert_eq!(span, clear.first().copied().zip(clear.last().copied()));
        assert!((lo..=hi).all(|i| bits[i / 64] >> (i % 64) & 1 == 1));
    }
}
