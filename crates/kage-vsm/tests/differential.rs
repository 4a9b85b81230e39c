//! Differential tests: every implementation against the naive model, on random programs of
//! region enters, exits and re-entries (depth up to 72) and dense, strided and random
//! accesses, with tiny structures so that evictions, page scrubs, garbage collection and
//! compression happen all the time.

mod common;

use common::{check_program, compressible_config, random_program, Op, Rng, TestTag};
use kage_vsm::{Config, Granularity};
use proptest::prelude::*;

const MAX_DEPTH: usize = 72;

fn granularity() -> impl Strategy<Value = Granularity> {
    prop_oneof![
        Just(Granularity::Byte),
        Just(Granularity::Word),
        Just(Granularity::Line)
    ]
}

/// Small structures: tag tables of 1 to 64 units (from 32 units on, LZ4 can halve a
/// table), segment tables of 1 to 8 slots, a VCache of 1 to 8 lines, 1 or 2 uncompressed
/// level tables (adapting between 1 and 16), 0 to 3 free tables; the VCache's tags
/// unbounded or bounded to 64 to 512 bytes (fewer lines as vectors deepen).
fn small_config() -> impl Strategy<Value = Config> {
    (
        granularity(),
        0u32..=6,
        0u32..=3,
        prop::sample::select(vec![1usize, 2, 4, 8]),
        1usize..=2,
        0usize..=3,
        prop::sample::select(vec![0usize, 64, 128, 512]),
    )
        .prop_map(
            |(
                granularity,
                table_bits,
                segment_bits,
                vcache_lines,
                victim_tables,
                free_tables,
                vcache_bytes,
            )| {
                Config {
                    granularity,
                    table_bits,
                    segment_bits,
                    vcache_lines,
                    vcache_bytes,
                    victim_tables,
                    free_tables,
                }
            },
        )
}

fn op(span: u64) -> impl Strategy<Value = Op> {
    let at = (0u8..5, 0..span);
    let stride = prop::sample::select(vec![1u64, 8, 24, 64, 4096]);
    let levels = prop_oneof![Just((255u8, 255u8)), (any::<u8>(), any::<u8>())];
    let tag = prop_oneof![Just(0u64), 1..4u64, any::<u64>()];
    prop_oneof![
        3 => (1u8..=20).prop_map(Op::Enter),
        2 => (1u8..=20).prop_map(Op::Exit),
        2 => (1u8..=4).prop_map(Op::Cycle),
        5 => (at.clone(), 1u8..=16, stride.clone(), levels, tag, any::<bool>()).prop_map(
            |(at, count, stride, levels, tag, hook)| Op::Write { at, count, stride, levels, tag, hook }
        ),
        3 => (at.clone(), 1u8..=8, stride.clone()).prop_map(|(at, count, stride)| Op::Read { at, count, stride }),
        2 => (at.clone(), 1u8..=4, stride.clone(), 0..1000u64).prop_map(|(at, count, stride, by)| Op::Update { at, count, stride, by }),
        2 => (at, 1u8..=8, stride, prop_oneof![Just(255u8), any::<u8>()], any::<u64>()).prop_map(
            |(at, count, stride, levels, tag)| Op::WriteLevels { at, count, stride, levels, tag }
        ),
        1 => Just(Op::Sweep),
    ]
}

fn program(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(2048), len)
}

/// Programs that dive to depth 64 first and then churn there.
fn deep_program() -> impl Strategy<Value = Vec<Op>> {
    program(50..250).prop_map(|mut ops| {
        ops.insert(0, Op::Enter(64));
        ops
    })
}

fn check<T: TestTag>(config: &Config, program: &[Op]) {
    check_program::<T>(config, program, MAX_DEPTH);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_kind_matches_the_model_u64(config in small_config(), program in program(1..300)) {
        check::<u64>(&config, &program);
    }

    #[test]
    fn every_kind_matches_the_model_deep_u64(config in small_config(), program in deep_program()) {
        check::<u64>(&config, &program);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_kind_matches_the_model_bool(config in small_config(), program in program(1..300)) {
        check::<bool>(&config, &program);
    }

    #[test]
    fn every_kind_matches_the_model_u8(config in small_config(), program in program(1..300)) {
        check::<u8>(&config, &program);
    }
}

/// One long seeded run per configuration: tiny structures, medium ones, and the paper's.
#[test]
fn long_runs_match_the_model() {
    let tiny = Config {
        granularity: Granularity::Word,
        table_bits: 2,
        segment_bits: 1,
        vcache_lines: 4,
        vcache_bytes: 0,
        victim_tables: 2,
        free_tables: 2,
    };
    let medium = Config {
        granularity: Granularity::Byte,
        table_bits: 6,
        segment_bits: 4,
        vcache_lines: 64,
        vcache_bytes: 0,
        victim_tables: 8,
        free_tables: 16,
    };
    let runs = [
        (tiny, 200_000, 1),
        (medium, 100_000, 2),
        (compressible_config(), 20_000, 4),
        (Config::hcpa(), 20_000, 3),
    ];
    for (config, len, seed) in runs {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let program = random_program(&mut rng, len, 4096);
        check::<u64>(&config, &program);
    }
}

/// Figure 4 as a program: written in region 4, read in region 7 ([1, 5, 6, 7]).
#[test]
fn paper_worked_example_on_every_kind() {
    let program = [
        Op::Enter(4),
        Op::Write {
            at: (0, 0x40),
            count: 1,
            stride: 8,
            levels: (255, 255),
            tag: 42,
            hook: true,
        },
        Op::Exit(3),
        Op::Enter(3),
        Op::Read {
            at: (0, 0x40),
            count: 1,
            stride: 8,
        },
    ];
    check::<u64>(&Config::default(), &program);
    // And the read itself.
    use kage_vsm::{AnyVsm, VectorShadow, VsmKind};
    for kind in VsmKind::ALL {
        let mut vsm = AnyVsm::<u64>::new(kind, &Config::default());
        (0..4).for_each(|_| vsm.enter());
        vsm.write(0x40, 0..4, 42);
        (0..3).for_each(|_| vsm.exit());
        (0..3).for_each(|_| vsm.enter());
        assert_eq!(vsm.versions().as_slice(), &[1, 5, 6, 7]);
        let mut out = Vec::new();
        vsm.read(0x40, &mut out);
        assert_eq!(out, [42, 0, 0, 0], "{kind}");
    }
}

/// Runs `program` on the compressed VSM under `config` and on the model, asserting that they
/// agree at every step; returns the largest numbers of constant, LZ4 and narrow tables seen,
/// the clock list's capacities and the final counters.
fn run_compressed(
    config: &Config,
    program: &[Op],
) -> (
    usize,
    usize,
    usize,
    std::collections::BTreeSet<usize>,
    kage_vsm::Stats,
) {
    use common::{apply, Model};
    use kage_vsm::{AnyVsm, VectorShadow, VsmKind};
    let mut model = Model::<u64>::new(config.granularity);
    let mut vsm = AnyVsm::<u64>::new(VsmKind::Compress, config);
    let (mut touched, mut expected, mut got) = (Vec::new(), Vec::new(), Vec::new());
    let (mut constants, mut packed, mut narrow) = (0, 0, 0);
    let mut lists = std::collections::BTreeSet::new();
    for op in program {
        let before = touched.len();
        expected.clear();
        got.clear();
        apply(&mut model, op, 72, &mut touched, &mut expected);
        touched.truncate(before);
        apply(&mut vsm, op, 72, &mut touched, &mut got);
        assert_eq!(got, expected, "{op:?}");
        let stats = vsm.stats();
        constants = constants.max(stats.constant_tables);
        packed = packed.max(stats.packed_tables);
        narrow = narrow.max(stats.narrow_tables);
        lists.insert(stats.victim_tables);
    }
    (constants, packed, narrow, lists, vsm.stats())
}

/// The compression paths the differential runs rely on do run: with tiny structures, tag
/// tables become constants and LZ4 tables, are unpacked again, and the clock list both grows
/// and shrinks, all while matching the model.
#[test]
fn compression_paths_are_exercised() {
    let config = Config {
        victim_tables: 2,
        ..compressible_config()
    };
    let mut rng = Rng(0x00c0_ffee);
    let program = random_program(&mut rng, 30_000, 4096);
    let (constants, packed, _, lists, stats) = run_compressed(&config, &program);
    assert!(
        constants > 0 && packed > 0,
        "{constants} constant, {packed} LZ4 tables"
    );
    assert!(
        stats.unpacks > 0 && stats.packs > stats.unpacks,
        "{stats:?}"
    );
    assert!(
        lists.len() > 2 && lists.contains(&1),
        "the list's capacities: {lists:?}"
    );
}

/// Dense pages of 32-bit tags, as HCPA's times are, become narrow tables (LZ4 cannot halve
/// them); updates that multiply tags push some out of the 32-bit range, turning their tables
/// back into plain ones; all while matching the model.
#[test]
fn narrow_tables_match_the_model() {
    let config = Config {
        victim_tables: 2,
        ..compressible_config()
    };
    let mut rng = Rng(0x0dd_ba11);
    let mut program = Vec::new();
    for _ in 0..4000 {
        let page = rng.below(4) * 512;
        program.push(match rng.below(8) {
            0 if rng.below(16) == 0 => Op::Enter(1 + rng.below(3) as u8),
            1 if rng.below(16) == 0 => Op::Exit(1 + rng.below(3) as u8),
            2 if rng.below(16) == 0 => Op::Cycle(1),
            3 if rng.below(4) == 0 => Op::Update {
                at: (1, page + rng.below(64) * 8),
                count: 1 + rng.below(4) as u8,
                stride: 8,
                by: rng.below(100),
            },
            4 => Op::Read {
                at: (1, page),
                count: 64,
                stride: 8,
            },
            _ => Op::Write {
                at: (1, page + rng.below(64) * 8),
                count: 1,
                stride: 8,
                levels: (255, 255),
                tag: rng.next() >> 32,
                hook: false,
            },
        });
    }
    program.push(Op::Sweep);
    let (_, _, narrow, _, stats) = run_compressed(&config, &program);
    assert!(narrow > 0, "no narrow table: {stats:?}");
}
