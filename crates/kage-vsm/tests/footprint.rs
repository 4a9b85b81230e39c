//! The footprint shadow against a naive model: per active region instance, the set of
//! locations and lines it touched. Every kind must report, for every instance, exactly the
//! model's counts (at its exit, and for every open level after a flush), at byte, word and
//! line granularity, with tag tables small enough that programs cross many of them, for
//! accesses of a few bytes and for ranges of up to tens of thousands of bytes.

use kage_vsm::footprint::{Footprint, FpConfig, FpKind, Touched};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug)]
enum Op {
    Enter,
    Exit,
    Access(u64, u64),
    /// `Footprint::access_strided(addr, width, stride, count)`.
    Strided(u64, u64, u64, u64),
    /// `Footprint::flush`: every open level's counts are exact after it.
    Flush,
}

/// A hoisted loop's chunk: elements that overlap, touch or leave gaps, strides of whole
/// words or not.
fn strided() -> impl Strategy<Value = Op> {
    (0u64..3000, 1u64..12, 1u64..300, 1u64..40).prop_map(|(a, w, s, c)| Op::Strided(a, w, s, c))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Enter),
        2 => Just(Op::Exit),
        // Addresses clustered so that locations are touched again, across a few tables.
        6 => (0u64..3000, 1u64..20).prop_map(|(a, s)| Op::Access(a, s)),
        1 => (0u64..4, 1u64..300).prop_map(|(p, s)| Op::Access((p << 40) + 4096, s)),
        1 => Just(Op::Flush),
        1 => strided(),
    ]
}

/// A set of units (`u64`), as a sparse bitmap: inserting a range costs its words, not its
/// units (the model must keep up with ranges of tens of thousands of bytes).
#[derive(Default)]
struct UnitSet {
    blocks: HashMap<u64, Box<[u64; 64]>>,
    len: u64,
}

impl UnitSet {
    fn insert_range(&mut self, first: u64, last: u64) {
        let mut unit = first;
        loop {
            let block = self
                .blocks
                .entry(unit >> 12)
                .or_insert_with(|| Box::new([0; 64]));
            let block_last = last.min(unit | 4095);
            while unit <= block_last {
                let word = &mut block[(unit >> 6 & 63) as usize];
                let to = block_last.min(unit | 63);
                let width = to - unit + 1;
                let mask = if width == 64 {
                    u64::MAX
                } else {
                    ((1 << width) - 1) << (unit & 63)
                };
                self.len += u64::from((!*word & mask).count_ones());
                *word |= mask;
                if to == last {
                    return;
                }
                unit = to + 1;
            }
        }
    }

    fn len(&self) -> u64 {
        self.len
    }
}

struct Model {
    location_shift: u32,
    line_shift: u32,
    /// Root first.
    levels: Vec<(UnitSet, UnitSet)>,
}

impl Model {
    fn touched(&self, level: usize) -> Touched {
        let (locations, lines) = &self.levels[level];
        Touched {
            locations: locations.len(),
            lines: lines.len(),
        }
    }

    fn access(&mut self, addr: u64, size: u64) {
        if self.levels.len() <= 1 {
            return;
        }
        let last = addr + size - 1;
        for (locations, lines) in &mut self.levels {
            locations.insert_range(addr >> self.location_shift, last >> self.location_shift);
            lines.insert_range(addr >> self.line_shift, last >> self.line_shift);
        }
    }
}

#[test]
fn the_models_unit_set_is_a_set() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut set, mut naive) = (UnitSet::default(), HashSet::new());
    for _ in 0..3000 {
        let r = next();
        let first = (r >> 8) % 30_000 + ((r >> 60) << 40);
        let last = first + (r >> 40) % if r & 1 == 0 { 9000 } else { 70 };
        set.insert_range(first, last);
        naive.extend(first..=last);
        assert_eq!(set.len(), naive.len() as u64);
    }
}

/// `ops` against the model twice: with levels deferred as `Footprint` does, and with every
/// level given its shadow level at once (a flush after each enter), so that both the
/// deferred levels and the shadow under deep nesting are checked.
fn check(config: FpConfig, ops: &[Op]) -> Result<(), TestCaseError> {
    check_with(config, ops, false)?;
    check_with(config, ops, true)
}

fn check_with(config: FpConfig, ops: &[Op], eager: bool) -> Result<(), TestCaseError> {
    let mut fp = Footprint::new(config);
    let mut model = Model {
        location_shift: config.location_shift.min(config.line_shift),
        line_shift: config.line_shift,
        levels: vec![Default::default()],
    };
    for op in ops {
        match *op {
            Op::Enter => {
                prop_assert!(fp.enter());
                if eager {
                    fp.flush();
                }
                model.levels.push(Default::default());
            }
            Op::Exit => {
                if model.levels.len() > 1 {
                    let expected = model.touched(model.levels.len() - 1);
                    model.levels.pop();
                    prop_assert_eq!(fp.exit(), expected);
                }
            }
            Op::Access(addr, size) => {
                fp.access(addr, size);
                model.access(addr, size);
            }
            Op::Strided(addr, width, stride, count) => {
                fp.access_strided(addr, width, stride, count);
                for k in 0..count {
                    model.access(addr + k * stride, width);
                }
            }
            Op::Flush => fp.flush(),
        }
        prop_assert_eq!(fp.depth(), model.levels.len() - 1);
        if matches!(op, Op::Flush) || fp.depth() == 0 {
            check_open_levels(&fp, &model)?;
        }
    }
    fp.flush();
    check_open_levels(&fp, &model)
}

/// The root's and every open level's counts.
fn check_open_levels(fp: &Footprint, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(fp.total(), model.touched(0));
    for level in 0..fp.depth() {
        prop_assert_eq!(
            fp.current(level),
            model.touched(level + 1),
            "level {}",
            level
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_kind_matches_the_model(ops in prop::collection::vec(op(), 0..160)) {
        for kind in FpKind::ALL {
            for (location_shift, line_shift) in [(0, 6), (3, 6), (6, 6), (0, 4)] {
                for table_bits in [Some(6), None] {
                    let config = FpConfig { kind, location_shift, line_shift, table_bits };
                    check(config, &ops)?;
                }
            }
        }
    }
}

/// Deterministic programs shaped like real ones: a loop nest sweeping arrays (tables fill
/// up, collapse to one or two values and expand to bytes again), a function called many
/// times on the same stack bytes, deep nesting.
#[test]
fn sweeps_and_repeated_calls_match_the_model() {
    let mut ops = vec![Op::Enter];
    for outer in 0..3u64 {
        ops.push(Op::Enter); // loop
        for i in 0..700u64 {
            ops.push(Op::Access(i * 8, 8));
            if i % 50 == 0 {
                ops.push(Op::Enter); // a call
                ops.push(Op::Access(10_000, 32));
                ops.push(Op::Access(outer * 64 + i, 3));
                ops.push(Op::Exit);
            }
        }
        ops.push(Op::Exit);
    }
    for _ in 0..40 {
        ops.push(Op::Enter);
        ops.push(Op::Access(20_000, 4));
    }
    for _ in 0..41 {
        ops.push(Op::Exit);
    }
    for kind in FpKind::ALL {
        for table_bits in [Some(6), Some(8), None] {
            let config = FpConfig {
                kind,
                location_shift: 0,
                line_shift: 6,
                table_bits,
            };
            check(config, &ops).unwrap();
        }
    }
}

/// Deferred levels whose ranges overflow the buffer: nested levels each accessing more
/// scattered ranges than it holds, with leaf children in between (kept deferred, their
/// unions handed to a deferred or a materialized parent), at every granularity.
#[test]
fn deferred_levels_that_overflow_match_the_model() {
    let mut ops = vec![Op::Enter];
    for outer in 0..3u64 {
        ops.push(Op::Enter);
        for i in 0..150u64 {
            ops.push(Op::Access(outer * 7 + i * 40, 3));
            if i % 20 == 0 {
                ops.push(Op::Enter);
                ops.extend((0..5).map(|k| Op::Access(9000 + k * 100 + i, 4)));
                ops.push(Op::Exit);
            }
            if i % 50 == 25 {
                ops.push(Op::Enter);
                ops.extend((0..90).map(|k| Op::Access(20_000 + k * 17 + outer, 2)));
                ops.push(Op::Exit);
            }
        }
        ops.push(Op::Exit);
    }
    ops.push(Op::Exit);
    for kind in FpKind::ALL {
        for (location_shift, line_shift) in [(0, 6), (3, 6), (6, 6)] {
            let config = FpConfig {
                kind,
                location_shift,
                line_shift,
                table_bits: Some(7),
            };
            check(config, &ops).unwrap();
        }
    }
}

/// Covariance's loop nest: per column pair an innermost instance walking two columns
/// (interleaved, one access per element, so the deferred buffer finds the progressions),
/// then row and column writes; and the same walks reported as hoisted chunks.
#[test]
fn column_walks_match_the_model() {
    let (m, n) = (24u64, 30u64);
    let data = 0x10_0000;
    let cov = 0x20_0000;
    let mut ops = vec![Op::Enter, Op::Access(data, m * n * 8), Op::Enter];
    for i in 0..m {
        ops.push(Op::Enter);
        for j in i..m {
            ops.push(Op::Enter);
            if j % 3 == 0 {
                for chunk in 0..n / 10 {
                    let row = data + chunk * 10 * m * 8;
                    ops.push(Op::Strided(row + i * 8, 8, m * 8, 10));
                    ops.push(Op::Strided(row + j * 8, 8, m * 8, 10));
                }
            } else {
                for k in 0..n {
                    ops.push(Op::Access(data + (k * m + i) * 8, 8));
                    ops.push(Op::Access(data + (k * m + j) * 8, 8));
                }
            }
            ops.push(Op::Exit);
            ops.push(Op::Access(cov + (i * m + j) * 8, 8));
            ops.push(Op::Access(cov + (j * m + i) * 8, 8));
        }
        ops.push(Op::Exit);
    }
    ops.extend([Op::Exit, Op::Exit]);
    for kind in FpKind::ALL {
        for (location_shift, line_shift) in [(0, 6), (3, 6), (2, 3), (6, 6)] {
            let config = FpConfig {
                kind,
                location_shift,
                line_shift,
                table_bits: None,
            };
            check(config, &ops).unwrap();
        }
    }
}

/// Long random programs (deep nesting, many tables, accesses straddling tables and lines)
/// against the model, for every kind.
#[test]
fn long_random_programs_match_the_model() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut ops = Vec::new();
    let mut depth = 0;
    for _ in 0..6000 {
        let r = next();
        match r % 10 {
            0 | 1 if depth < 30 => {
                ops.push(Op::Enter);
                depth += 1;
            }
            2 | 3 if depth > 0 => {
                ops.push(Op::Exit);
                depth -= 1;
            }
            _ => ops.push(Op::Access((r >> 16) % 200_000, 1 + (r >> 40) % 100)),
        }
    }
    for kind in FpKind::ALL {
        for (location_shift, table_bits) in [(0, Some(6)), (0, None), (3, None)] {
            let config = FpConfig {
                kind,
                location_shift,
                line_shift: 6,
                table_bits,
            };
            check(config, &ops).unwrap();
        }
    }
}

/// Accesses of hundreds to tens of thousands of bytes among small ones: they cross tag
/// tables (of 64 units and of the kinds' own sizes) and lines anywhere, over data touched
/// before at other levels (tables in every form, runs of mixed levels within a word).
fn range_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Enter),
        2 => Just(Op::Exit),
        3 => (0u64..40_000, 1u64..20).prop_map(|(a, s)| Op::Access(a, s)),
        4 => (0u64..40_000, 100u64..20_000).prop_map(|(a, s)| Op::Access(a, s)),
        1 => (0u64..3, 0u64..8192, 1u64..70_000)
            .prop_map(|(p, o, s)| Op::Access((p << 40) + o, s)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn large_ranges_match_the_model(ops in prop::collection::vec(range_op(), 0..48)) {
        for kind in FpKind::ALL {
            for (location_shift, line_shift) in [(0, 6), (3, 6), (6, 6), (0, 8), (2, 4)] {
                for table_bits in [Some(6), None] {
                    let config = FpConfig { kind, location_shift, line_shift, table_bits };
                    check(config, &ops)?;
                }
            }
        }
    }
}

/// A loop nest as instrumented code reports it: `C[i]` and `B[k]` rows of 5600 bytes per
/// innermost instance, as 8-byte accesses or each as one range (a hoisted loop), then a
/// column walk at a stride of 4400 bytes; with default tables both forms cross tables
/// mid-row.
#[test]
fn hoisted_rows_match_word_accesses_and_the_model() {
    const ROW: u64 = 5600;
    let program = |hoisted: bool| {
        let mut ops = vec![Op::Enter, Op::Enter];
        for i in 0..4u64 {
            ops.push(Op::Enter);
            for k in 0..6u64 {
                ops.push(Op::Enter);
                for row in [0x10_0000 + i * ROW, 0x20_0003 + k * ROW] {
                    if hoisted {
                        ops.push(Op::Access(row, ROW));
                    } else {
                        ops.extend((0..ROW / 8).map(|j| Op::Access(row + j * 8, 8)));
                    }
                }
                ops.push(Op::Exit);
            }
            ops.push(Op::Exit);
        }
        ops.push(Op::Enter);
        for j in 0..40u64 {
            ops.push(Op::Enter);
            ops.extend((0..40u64).map(|i| Op::Access(0x10_0000 + i * 4400 + j * 8, 8)));
            ops.push(Op::Exit);
        }
        ops.extend([Op::Exit, Op::Exit, Op::Exit]);
        ops
    };
    let (words, rows) = (program(false), program(true));
    for kind in FpKind::ALL {
        for (location_shift, line_shift) in [(0, 6), (3, 6), (6, 6)] {
            for table_bits in [Some(6), Some(9), None] {
                let config = FpConfig {
                    kind,
                    location_shift,
                    line_shift,
                    table_bits,
                };
                check(config, &words).unwrap();
                check(config, &rows).unwrap();
            }
        }
    }
}

/// Programs that keep coming back to a few tables (of 64 units with `Some(6)`) at many
/// depths: palette tables take one to five and more values, codes of equal values merge,
/// scrubs make values equal, codes narrow and widen, bytes come back to codes.
fn revisit_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Enter),
        3 => Just(Op::Exit),
        6 => (0u64..1200, 1u64..16).prop_map(|(a, s)| Op::Access(a, s)),
        2 => (0u64..1200, 16u64..700).prop_map(|(a, s)| Op::Access(a, s)),
        1 => strided(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn revisited_tables_match_the_model(ops in prop::collection::vec(revisit_op(), 0..300)) {
        for kind in FpKind::ALL {
            for (location_shift, line_shift) in [(0, 6), (3, 6), (6, 6), (0, 4), (2, 3)] {
                for table_bits in [Some(6), Some(7), None] {
                    let config = FpConfig { kind, location_shift, line_shift, table_bits };
                    check(config, &ops)?;
                }
            }
        }
    }
}

/// One palette table through every form, checked against the model at every step: nested
/// instances give it one value more each (1-bit, 2-bit codes, bytes at five), new instances
/// scrub it (bytes back to codes or one value, codes of equal values), ranges across tables.
#[test]
fn palette_tables_take_every_form() {
    let mut ops = vec![Op::Enter];
    for round in 0..6u64 {
        for depth in 0..6u64 {
            ops.push(Op::Enter);
            ops.push(Op::Access(depth * 8 + round, 8));
            ops.push(Op::Access(64 + depth * 3, 2));
        }
        ops.push(Op::Access(100 + round * 7, 40));
        for _ in 0..4 {
            ops.push(Op::Exit);
        }
        ops.push(Op::Access(round * 11, 9));
        ops.push(Op::Exit);
        ops.push(Op::Access(30, 90));
        ops.push(Op::Exit);
        ops.push(Op::Enter);
        ops.push(Op::Access(0, 512));
        ops.push(Op::Exit);
    }
    for (location_shift, line_shift) in [(0, 6), (3, 6), (0, 3)] {
        let config = FpConfig {
            kind: FpKind::Palette,
            location_shift,
            line_shift,
            table_bits: Some(6),
        };
        check(config, &ops).unwrap();
        // The forms the location tables took along the way.
        let mut fp = Footprint::new(config);
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for op in &ops {
            match *op {
                Op::Enter => {
                    assert!(fp.enter());
                    // Every level in the shadow: the forms are those of nested instances.
                    fp.flush();
                }
                Op::Exit => {
                    fp.exit();
                }
                Op::Access(addr, size) => fp.access(addr, size),
                Op::Strided(addr, width, stride, count) => {
                    fp.access_strided(addr, width, stride, count)
                }
                Op::Flush => fp.flush(),
            }
            for (form, n) in fp.table_forms() {
                *seen.entry(form).or_default() += n;
            }
        }
        for form in ["uniform", "1-bit", "2-bit", "bytes"] {
            assert!(
                seen.get(form) > Some(&0),
                "{location_shift}: {form}: {seen:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `touched_by` (a leaf's instance counted from the ranges it reported, without a level)
    /// counts what an instance entered, given the same ranges and exited would: ranges in
    /// any order, repeated, overlapping, touching, interleaved walks.
    #[test]
    fn touched_by_counts_as_an_instance_would(
        ranges in prop::collection::vec((0u64..600, 1u64..24), 1..80),
        walks in prop::collection::vec((0u64..2000, 1u64..16, 1u64..40, 1u64..12), 0..3),
    ) {
        let mut all: Vec<[u64; 2]> = ranges.iter().map(|&(a, s)| [a, a + s - 1]).collect();
        // Arrays walked together, element by element, in access order.
        for step in 0..12 {
            for &(base, width, stride, count) in &walks {
                if step < count {
                    let first = base + step * stride;
                    all.push([first, first + width - 1]);
                }
            }
        }
        for (location_shift, line_shift) in [(0, 6), (3, 6), (6, 6), (2, 3)] {
            let config = FpConfig { kind: FpKind::Palette, location_shift, line_shift, table_bits: Some(6) };
            let mut fp = Footprint::new(config);
            prop_assert!(fp.enter());
            let counted = fp.touched_by(&mut all.clone());
            prop_assert!(fp.enter());
            for &[first, last] in &all {
                fp.access(first, last - first + 1);
            }
            prop_assert_eq!(counted, fp.exit(), "{:?}", config);
        }
    }

    /// `access_ranges` (a buffer of ranges taken at once) counts as an `access` of each
    /// would, at every level: deferred levels, more ranges than they hold (levels given
    /// their shadow level on the way), and a batch at depth 0.
    #[test]
    fn access_ranges_counts_as_an_access_of_each_would(
        ranges in prop::collection::vec((0u64..6000, 1u64..40), 0..300),
        depth in 0usize..5,
        cut in 0usize..300,
    ) {
        let pairs: Vec<[u64; 2]> = ranges.iter().map(|&(a, s)| [a, a + s - 1]).collect();
        let cut = cut.min(pairs.len());
        for (location_shift, line_shift) in [(0, 6), (3, 6), (6, 6), (2, 3)] {
            let config = FpConfig { kind: FpKind::Palette, location_shift, line_shift, table_bits: Some(6) };
            let (mut batched, mut each) = (Footprint::new(config), Footprint::new(config));
            for _ in 0..depth {
                prop_assert!(batched.enter());
                prop_assert!(each.enter());
            }
            batched.access_ranges(&pairs[..cut]);
            for &[first, last] in &pairs[..cut] {
                each.access(first, last - first + 1);
            }
            // The rest inside one more level.
            prop_assert!(batched.enter());
            prop_assert!(each.enter());
            batched.access_ranges(&pairs[cut..]);
            for &[first, last] in &pairs[cut..] {
                each.access(first, last - first + 1);
            }
            for level in 0..=depth {
                prop_assert_eq!(batched.exit(), each.exit(), "{:?} level {}", config, level);
            }
            prop_assert_eq!(batched.total(), each.total(), "{:?}", config);
        }
    }
}
