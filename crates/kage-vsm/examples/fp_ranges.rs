//! Time of `Footprint::access` on loop-nest patterns, with small accesses and with the
//! large contiguous ranges a hoisted loop reports in one call.
//!
//!     CARGO_TARGET_DIR=/tmp/target-vsm cargo run --release -p kage-vsm --example fp_ranges [-- RUNS [KIND [PATTERN]]]
//!
//! Patterns, at byte granularity with 64-byte lines, for `palette` and `bulk`:
//!
//! - **gemm/8**: a loop nest at depth 4 (a function, the `i`, `k` and `j` loops): 200
//!   instances of the innermost loop (10 × 20), each touching a 5600-byte row of `C`
//!   (`C[i]`, again in each of the 20 instances of one `k` loop) and of `B` (`B[k]`, a new
//!   row for each `k`, the same 20 rows for every `i`) in 8-byte accesses;
//! - **gemm/row**: the same with each row as one 5600-byte `access`;
//! - **column**: depth 3 (a function, the `j` loop, the `i` loop), 550 instances of the
//!   innermost loop, each making 550 8-byte accesses down a column at a stride of 4400
//!   bytes (every access in another 4 KiB table).
//!
//! Each run builds a fresh shadow and repeats the pattern `REPS` times (the later
//! repetitions find the tables built: the steady state); times are the median of the runs
//! (5 unless `RUNS` is given), per byte accessed and per `access` call. The counts the
//! shadow reports are printed too (a checksum: they must not change with the speed).

use std::time::Instant;

use kage_vsm::footprint::{Footprint, FpConfig, FpKind};

const ROW: u64 = 5600;
const REPS: usize = 20;

const A_BASE: u64 = 0x7f00_0000_0000;
const B_BASE: u64 = 0x5555_0000_0000;
const C_BASE: u64 = 0x5555_4000_0000;

#[derive(Clone, Copy)]
enum Pattern {
    GemmWords,
    GemmRows,
    Column,
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::GemmWords => "gemm/8",
            Pattern::GemmRows => "gemm/row",
            Pattern::Column => "column",
        }
    }
}

/// Runs `pattern` once on `fp`; returns (bytes accessed, access calls, a checksum of the
/// reported counts).
fn run(fp: &mut Footprint, pattern: Pattern) -> (u64, u64, u64) {
    let (mut bytes, mut calls, mut sum) = (0u64, 0u64, 0u64);
    match pattern {
        Pattern::GemmWords | Pattern::GemmRows => {
            fp.enter(); // the function
            fp.enter(); // the i loop
            for i in 0..10u64 {
                fp.enter(); // the k loop
                for k in 0..20u64 {
                    fp.enter(); // the j loop
                    let rows = [C_BASE + i * ROW, B_BASE + k * ROW];
                    for row in rows {
                        if let Pattern::GemmRows = pattern {
                            fp.access(row, ROW);
                            calls += 1;
                        } else {
                            for j in 0..ROW / 8 {
                                fp.access(row + j * 8, 8);
                            }
                            calls += ROW / 8;
                        }
                        bytes += ROW;
                    }
                    let t = fp.exit();
                    sum = sum.wrapping_mul(31).wrapping_add(t.locations * 7 + t.lines);
                }
                let t = fp.exit();
                sum = sum.wrapping_mul(31).wrapping_add(t.locations * 7 + t.lines);
            }
            let t = fp.exit();
            sum = sum.wrapping_mul(31).wrapping_add(t.locations * 7 + t.lines);
            let t = fp.exit();
            sum = sum.wrapping_mul(31).wrapping_add(t.locations * 7 + t.lines);
        }
        Pattern::Column => {
            const N: u64 = 550;
            const STRIDE: u64 = 4400;
            fp.enter(); // the function
            fp.enter(); // the j loop
            for j in 0..N {
                fp.enter(); // the i loop
                for i in 0..N {
                    fp.access(A_BASE + i * STRIDE + j * 8, 8);
                }
                calls += N;
                bytes += N * 8;
                let t = fp.exit();
                sum = sum.wrapping_mul(31).wrapping_add(t.locations * 7 + t.lines);
            }
            let t = fp.exit();
            sum = sum.wrapping_mul(31).wrapping_add(t.locations * 7 + t.lines);
            let t = fp.exit();
            sum = sum.wrapping_mul(31).wrapping_add(t.locations * 7 + t.lines);
        }
    }
    (bytes, calls, sum)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args
        .first()
        .map_or(5, |s| s.parse().expect("RUNS: a number"));
    let wanted = |i: usize, name: &str| args.get(i).is_none_or(|a| a == name);
    println!("| kind | pattern | ns/byte | ns/access | runs | checksum | heap KiB |");
    println!("|---|---|--:|--:|--:|--:|--:|");
    for kind in [FpKind::Palette, FpKind::Bulk] {
        for pattern in [Pattern::GemmWords, Pattern::GemmRows, Pattern::Column] {
            if !wanted(1, kind.name()) || !wanted(2, pattern.name()) {
                continue;
            }
            let (mut per_byte, mut per_call) = (Vec::new(), Vec::new());
            let (mut checksum, mut heap) = (0, 0);
            for _ in 0..runs {
                let mut fp = Footprint::new(FpConfig::new(kind));
                let (mut bytes, mut calls, mut sum) = (0, 0, 0u64);
                let start = Instant::now();
                for _ in 0..REPS {
                    let (b, c, s) = run(&mut fp, pattern);
                    bytes += b;
                    calls += c;
                    sum = sum.wrapping_mul(1_000_003).wrapping_add(s);
                }
                let ns = start.elapsed().as_nanos() as f64;
                per_byte.push(ns / bytes as f64);
                per_call.push(ns / calls as f64);
                checksum = sum;
                heap = fp.heap_bytes();
                std::hint::black_box(&fp);
            }
            println!(
                "| {kind} | {} | {:.3} | {:.2} | {runs} | {:016x} | {} |",
                pattern.name(),
                median(per_byte),
                median(per_call),
                checksum,
                heap / 1024,
            );
        }
    }
}
