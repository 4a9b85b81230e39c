//! Memory accounting: every implementation's `heap_bytes()` equals, to the byte, what a
//! counting allocator saw it allocate and not free, at every step of random programs.

mod common;
mod counting;

use common::{
    address, compressible_config, random_program, resolve_level_count, resolve_levels, Op, Rng,
    TestTag,
};
use counting::live;
use kage_vsm::{AnyVsm, Config, Granularity, VectorShadow, VsmKind};

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// Runs `op` without allocating anything outside the shadow (`out` is preallocated).
fn run<T: TestTag>(
    vsm: &mut AnyVsm<T>,
    op: &Op,
    max_depth: usize,
    out: &mut Vec<T>,
    sets: &mut usize,
) {
    match *op {
        Op::Enter(n) => (0..n).for_each(|_| {
            if vsm.depth() < max_depth {
                vsm.enter()
            }
        }),
        Op::Exit(n) => (0..n).for_each(|_| {
            if vsm.depth() > 0 {
                vsm.exit()
            }
        }),
        Op::Cycle(n) => (0..n).for_each(|_| {
            if vsm.depth() > 0 {
                vsm.exit();
                vsm.enter();
            }
        }),
        Op::Write {
            at,
            count,
            stride,
            levels,
            tag,
            hook,
        } => {
            let levels = resolve_levels(levels, vsm.depth());
            for i in 0..count as u64 {
                let addr = address(at, i, stride);
                if hook {
                    vsm.write_with(addr, levels.clone(), T::from_u64(tag), &mut |_| *sets += 1);
                } else {
                    vsm.write(addr, levels.clone(), T::from_u64(tag));
                }
            }
        }
        Op::Read { at, count, stride } => {
            for i in 0..count as u64 {
                vsm.read(address(at, i, stride), out);
            }
        }
        Op::Update {
            at,
            count,
            stride,
            by,
        } => {
            for i in 0..count as u64 {
                vsm.update(address(at, i, stride), |tags| {
                    for (level, tag) in tags.iter_mut().enumerate() {
                        *tag = tag.bump(level, by);
                    }
                });
            }
        }
        Op::WriteLevels {
            at,
            count,
            stride,
            levels,
            tag,
        } => {
            let n = resolve_level_count(levels, vsm.depth());
            // `out` has room for every level: no allocation outside the shadow.
            out.clear();
            out.extend((0..n as u64).map(|level| T::from_u64(tag.wrapping_add(level))));
            for i in 0..count as u64 {
                vsm.write_levels(address(at, i, stride), out);
            }
        }
        Op::Sweep => {}
    }
}

fn check_accounting<T: TestTag>(kind: VsmKind, config: &Config, program: &[Op], max_depth: usize) {
    let mut out: Vec<T> = Vec::with_capacity(max_depth + 1);
    let mut sets = 0;
    let start = live();
    let mut vsm = AnyVsm::<T>::new(kind, config);
    assert_eq!(
        live() - start,
        vsm.heap_bytes() as isize,
        "{kind}: after construction"
    );
    let mut peak = 0;
    for (step, op) in program.iter().enumerate() {
        run(&mut vsm, op, max_depth, &mut out, &mut sets);
        let held = live() - start;
        peak = peak.max(held);
        if held != vsm.heap_bytes() as isize {
            panic!(
                "{kind}: allocator says {held}, heap_bytes {} after op {step} {op:?}",
                vsm.heap_bytes()
            );
        }
    }
    while vsm.depth() > 0 {
        vsm.exit();
        vsm.read(address((0, 0), 0, 8), &mut out);
        vsm.write(address((1, 64), 0, 8), 0..vsm.depth(), T::from_u64(3));
        assert_eq!(
            live() - start,
            vsm.heap_bytes() as isize,
            "{kind}: while unwinding"
        );
    }
    assert!(peak > 0, "{kind}: the program allocated nothing");
    drop(vsm);
    assert_eq!(live() - start, 0, "{kind}: after drop");
}

fn configs() -> Vec<Config> {
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
    let hcpa_small_cache = Config {
        vcache_lines: 1024,
        vcache_bytes: 0,
        ..Config::hcpa()
    };
    vec![
        tiny,
        medium,
        compressible_config(),
        hcpa_small_cache,
        Config::footprint(),
    ]
}

#[test]
fn heap_bytes_is_exact_u64() {
    for (n, config) in configs().iter().enumerate() {
        let mut rng = Rng(0x1234_5678 + n as u64);
        let program = random_program(&mut rng, 6000, 1 << 14);
        for kind in VsmKind::ALL {
            check_accounting::<u64>(kind, config, &program, 72);
        }
    }
}

#[test]
fn heap_bytes_is_exact_bool() {
    for (n, config) in configs().iter().take(3).enumerate() {
        let mut rng = Rng(0x8765_4321 + n as u64);
        let program = random_program(&mut rng, 6000, 1 << 14);
        for kind in VsmKind::ALL {
            check_accounting::<bool>(kind, config, &program, 72);
        }
    }
}

/// Deep nesting with garbage collection and compression doing most of the work.
#[test]
fn heap_bytes_is_exact_deep_with_gc_and_compression() {
    let config = Config {
        vcache_lines: 8,
        vcache_bytes: 0,
        victim_tables: 1,
        free_tables: 3,
        ..Config::hcpa()
    };
    let mut program = vec![Op::Enter(64)];
    for round in 0..200u64 {
        program.push(Op::Write {
            at: (1, round * 4096),
            count: 40,
            stride: 64,
            levels: (255, 255),
            tag: round,
            hook: true,
        });
        program.push(Op::Exit((round % 50) as u8));
        program.push(Op::Update {
            at: (1, round * 512),
            count: 8,
            stride: 4096,
            by: round,
        });
        program.push(Op::Enter((round % 50) as u8));
        program.push(Op::Cycle(3));
    }
    for kind in [VsmKind::Gc, VsmKind::Compress] {
        check_accounting::<u64>(kind, &config, &program, 72);
    }
}
