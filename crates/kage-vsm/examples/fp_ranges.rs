//! Time and memory of `Footprint::access` on loop-nest patterns, with small accesses and with
//! the large contiguous ranges a hoisted loop reports in one call.
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
//! - **gemm/full**: gemm as PolyBench writes it, rows as ranges: per `i`, a `j` loop scaling
//!   `C[i]` (depth 3), then the `k` loop, whose body reads `A[i][k]` (8 bytes, depth 3: one
//!   more element of `A[i]` per instance) before the `j` loop over `C[i]` and `B[k]` (depth
//!   4). Tables of `A` and `C` hold rows or elements of three instances and more;
//! - **rows/1400**: gemm/row with rows of 1400 bytes: a 4 KiB table holds parts of three or
//!   four rows, each last touched by another instance (`B[k-1]` in the instance before,
//!   `B[k]` and `B[k+1]` under the previous `i`);
//! - **column**: depth 3 (a function, the `j` loop, the `i` loop), 550 instances of the
//!   innermost loop, each making 550 8-byte accesses down a column at a stride of 4400
//!   bytes (every access in another 4 KiB table).
//!
//! Each run builds a fresh shadow and repeats the pattern `REPS` times (the later
//! repetitions find the tables built: the steady state); times are the median of the runs
//! (5 unless `RUNS` is given), per byte accessed and per `access` call. The counts the
//! shadow reports are printed too (a checksum: they must not change with the speed). One
//! more run, not timed, samples `heap_bytes()` whenever `take_changed()` says it may have
//! changed (after every call): the peak; the heap at the end and the tables' forms then are
//! those of the last timed run.

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
    GemmFull,
    Rows1400,
    Column,
}

impl Pattern {
    const ALL: [Pattern; 5] = [
        Pattern::GemmWords,
        Pattern::GemmRows,
        Pattern::GemmFull,
        Pattern::Rows1400,
        Pattern::Column,
    ];

    fn name(self) -> &'static str {
        match self {
            Pattern::GemmWords => "gemm/8",
            Pattern::GemmRows => "gemm/row",
            Pattern::GemmFull => "gemm/full",
            Pattern::Rows1400 => "rows/1400",
            Pattern::Column => "column",
        }
    }
}

/// The shadow, and what a run counts: bytes accessed, access calls, a checksum of the
/// reported counts, and (when `track`) the peak of `heap_bytes()`.
struct Runner {
    fp: Footprint,
    track: bool,
    bytes: u64,
    calls: u64,
    sum: u64,
    peak: usize,
}

impl Runner {
    #[inline]
    fn access(&mut self, addr: u64, size: u64) {
        self.fp.access(addr, size);
        self.calls += 1;
        self.bytes += size;
        self.note();
    }

    #[inline]
    fn note(&mut self) {
        if self.track && self.fp.take_changed() {
            self.peak = self.peak.max(self.fp.heap_bytes());
        }
    }

    fn enter(&mut self) {
        self.fp.enter();
        self.note();
    }

    fn exit(&mut self) {
        let t = self.fp.exit();
        self.sum = self
            .sum
            .wrapping_mul(31)
            .wrapping_add(t.locations * 7 + t.lines);
        self.note();
    }

    /// An access per 8 bytes of the row, or the row as one range.
    fn row(&mut self, addr: u64, len: u64, words: bool) {
        if words {
            for j in 0..len / 8 {
                self.access(addr + j * 8, 8);
            }
        } else {
            self.access(addr, len);
        }
    }

    fn run(&mut self, pattern: Pattern) {
        match pattern {
            Pattern::GemmWords | Pattern::GemmRows | Pattern::Rows1400 => {
                let words = matches!(pattern, Pattern::GemmWords);
                let row = if let Pattern::Rows1400 = pattern {
                    1400
                } else {
                    ROW
                };
                self.enter(); // the function
                self.enter(); // the i loop
                for i in 0..10u64 {
                    self.enter(); // the k loop
                    for k in 0..20u64 {
                        self.enter(); // the j loop
                        self.row(C_BASE + i * row, row, words);
                        self.row(B_BASE + k * row, row, words);
                        self.exit();
                    }
                    self.exit();
                }
                self.exit();
                self.exit();
            }
            Pattern::GemmFull => {
                self.enter(); // the function
                self.enter(); // the i loop
                for i in 0..10u64 {
                    self.enter(); // the j loop scaling C[i]
                    self.row(C_BASE + i * ROW, ROW, false);
                    self.exit();
                    self.enter(); // the k loop
                    for k in 0..20u64 {
                        self.access(A_BASE + i * ROW + k * 8, 8);
                        self.enter(); // the j loop
                        self.row(C_BASE + i * ROW, ROW, false);
                        self.row(B_BASE + k * ROW, ROW, false);
                        self.exit();
                    }
                    self.exit();
                }
                self.exit();
                self.exit();
            }
            Pattern::Column => {
                const N: u64 = 550;
                const STRIDE: u64 = 4400;
                self.enter(); // the function
                self.enter(); // the j loop
                for j in 0..N {
                    self.enter(); // the i loop
                    for i in 0..N {
                        self.access(A_BASE + i * STRIDE + j * 8, 8);
                    }
                    self.exit();
                }
                self.exit();
                self.exit();
            }
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A fresh shadow through `REPS` repetitions of `pattern`; the time in ns.
fn repeat(kind: FpKind, pattern: Pattern, track: bool) -> (Runner, f64) {
    let mut runner = Runner {
        fp: Footprint::new(FpConfig::new(kind)),
        track,
        bytes: 0,
        calls: 0,
        sum: 0,
        peak: 0,
    };
    let start = Instant::now();
    let mut sum = 0u64;
    for _ in 0..REPS {
        runner.sum = 0;
        runner.run(pattern);
        sum = sum.wrapping_mul(1_000_003).wrapping_add(runner.sum);
    }
    let ns = start.elapsed().as_nanos() as f64;
    runner.sum = sum;
    (runner, ns)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args
        .first()
        .map_or(5, |s| s.parse().expect("RUNS: a number"));
    let wanted = |i: usize, name: &str| args.get(i).is_none_or(|a| a == name);
    println!(
        "| kind | pattern | ns/byte | ns/access | runs | checksum | heap KiB | peak KiB | tables |"
    );
    println!("|---|---|--:|--:|--:|--:|--:|--:|---|");
    for kind in [FpKind::Palette, FpKind::Bulk] {
        for pattern in Pattern::ALL {
            if !wanted(1, kind.name()) || !wanted(2, pattern.name()) {
                continue;
            }
            let (mut per_byte, mut per_call) = (Vec::new(), Vec::new());
            let (mut checksum, mut heap, mut forms) = (0, 0, Vec::new());
            for _ in 0..runs {
                let (runner, ns) = repeat(kind, pattern, false);
                per_byte.push(ns / runner.bytes as f64);
                per_call.push(ns / runner.calls as f64);
                checksum = runner.sum;
                heap = runner.fp.heap_bytes();
                forms = runner.fp.table_forms();
                std::hint::black_box(&runner.fp);
            }
            let (tracked, _) = repeat(kind, pattern, true);
            assert_eq!(tracked.sum, checksum, "the counts depend on the tracking");
            let forms: Vec<String> = forms.iter().map(|(f, n)| format!("{f} {n}")).collect();
            println!(
                "| {kind} | {} | {:.3} | {:.2} | {runs} | {:016x} | {} | {} | {} |",
                pattern.name(),
                median(per_byte),
                median(per_call),
                checksum,
                heap / 1024,
                tracked.peak.max(heap) / 1024,
                forms.join(", "),
            );
        }
    }
}
