//! The footprint shadow against a naive model: per active region instance, the set of
//! locations and lines it touched. Every kind must report, for every instance, exactly the
//! model's counts (at its exit, and for every open level at every step), at byte, word and
//! line granularity, with tag tables small enough that programs cross many of them.

use kage_vsm::footprint::{Footprint, FpConfig, FpKind, Touched};
use proptest::prelude::*;
use std::collections::HashSet;

#[derive(Clone, Debug)]
enum Op {
    Enter,
    Exit,
    Access(u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Enter),
        2 => Just(Op::Exit),
        // Addresses clustered so that locations are touched again, across a few tables.
        6 => (0u64..3000, 1u64..20).prop_map(|(a, s)| Op::Access(a, s)),
        1 => (0u64..4, 1u64..300).prop_map(|(p, s)| Op::Access((p << 40) + 4096, s)),
    ]
}

struct Model {
    location_shift: u32,
    line_shift: u32,
    /// Root first.
    levels: Vec<(HashSet<u64>, HashSet<u64>)>,
}

impl Model {
    fn touched(&self, level: usize) -> Touched {
        let (locations, lines) = &self.levels[level];
        Touched {
            locations: locations.len() as u64,
            lines: lines.len() as u64,
        }
    }

    fn access(&mut self, addr: u64, size: u64) {
        if self.levels.len() <= 1 {
            return;
        }
        let last = addr + size - 1;
        let units: Vec<u64> =
            ((addr >> self.location_shift)..=(last >> self.location_shift)).collect();
        let lines: Vec<u64> = ((addr >> self.line_shift)..=(last >> self.line_shift)).collect();
        for (locations, ls) in &mut self.levels {
            locations.extend(&units);
            ls.extend(&lines);
        }
    }
}

fn check(config: FpConfig, ops: &[Op]) -> Result<(), TestCaseError> {
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
        }
        prop_assert_eq!(fp.depth(), model.levels.len() - 1);
        prop_assert_eq!(fp.total(), model.touched(0));
        for level in 0..fp.depth() {
            prop_assert_eq!(
                fp.current(level),
                model.touched(level + 1),
                "level {}",
                level
            );
        }
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
