//! OpenMP programs (`tests/c/openmp`), built with `-fopenmp` as their users build them:
//! libomp runs each parallel loop's outlined body on a team of threads it keeps alive
//! between loops and past the end of `main`. Every tool measures every thread of the team,
//! names the parallel loops by their function and lines, and finishes with a complete
//! report (the team's threads, still waiting in libomp when the program ends, close their
//! own regions).

mod e2e_support;
use e2e_support::*;

use std::process::Command;

use kage_report::{read_report, HcpaStats, Region, RegionKind, Report};

const N: u64 = 100_000;
const RUNS: u64 = 5;
const THREADS: u64 = 2;

/// What the program prints: Σ over the runs r of (r + 1) × Σ (i mod 7), and the team size.
fn expected_output() -> String {
    let column: u64 = (0..N).map(|i| i % 7).sum();
    let sum: u64 = (1..=RUNS).map(|k| k * column).sum();
    format!("{sum} {THREADS}\n")
}

/// Builds `openmp/parallel_for.c` for `tool` at -O2 and runs it on a team of [`THREADS`].
fn run(work: &Work, tool: &str) -> Report {
    let exe = work.build_with_env(
        "openmp/parallel_for.c",
        &["-O2", "-fopenmp"],
        &[("KAGE_TOOL", tool)],
    );
    let report_path = work.path(&format!("{tool}.json"));
    let out = Command::new(&exe)
        .env("OMP_NUM_THREADS", THREADS.to_string())
        .env("KAGE_OPTIONS", format!("output={}", report_path.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        expected_output(),
        "{tool}"
    );
    let report = read_report(&report_path).unwrap();
    assert!(report.complete, "{tool}: incomplete report");
    assert_eq!(report.threads as u64, THREADS, "{tool}: threads");
    report
}

/// The loop regions of the outlined body of `function`'s parallel loop.
fn parallel_loops<'r>(report: &'r Report, function: &str) -> Vec<&'r Region> {
    let outlined = format!("{function}.omp_outlined");
    let loops: Vec<&Region> = (report.regions.iter())
        .filter(|r| r.kind == RegionKind::Loop && r.name == outlined)
        .collect();
    assert!(!loops.is_empty(), "no loop in {outlined}");
    loops
}

#[test]
fn every_thread_of_a_team_is_counted_exactly() {
    let work = Work::new();
    let report = run(&work, "count");
    let bytes = |function| {
        (parallel_loops(&report, function).iter()).fold((0, 0), |(r, w), region| {
            let s = stats(region).inclusive;
            (r + s.bytes_read, w + s.bytes_written)
        })
    };
    // Every run of each loop, split over the team: N doubles each.
    assert_eq!(bytes("scale"), (8 * N * RUNS, 8 * N * RUNS));
    assert_eq!(bytes("total").0, 8 * N * RUNS);
    // Each thread runs each parallel loop's body once per run.
    let instances: u64 = (report.regions.iter())
        .filter(|r| r.kind == RegionKind::Function && r.name == "scale.omp_outlined")
        .map(|r| stats(r).instances)
        .sum();
    assert_eq!(instances, THREADS * RUNS);
    // The team's loops are named where the source has them: scale's at its pragma, line 13.
    let scale = parallel_loops(&report, "scale");
    assert!(scale
        .iter()
        .all(|r| r.file.ends_with("parallel_for.c") && r.line == 13));
    // The functions whose calls start the team, inlined into main, are each called 5 times.
    for name in ["scale", "total"] {
        let calls: u64 = (report.regions.iter())
            .filter(|r| r.kind == RegionKind::Function && r.name == name)
            .map(|r| stats(r).instances)
            .sum();
        assert_eq!(calls, RUNS, "{name}");
    }
}

#[test]
fn footprint_working_set_and_hcpa_finish_with_the_team_alive() {
    let work = Work::new();
    let footprint = run(&work, "footprint");
    let fp = footprint.footprint().unwrap();
    // Each thread's footprint counts its half of a and b, at least.
    assert!(fp.total_bytes >= 2 * 8 * N, "{}", fp.total_bytes);
    let instances: u64 = (parallel_loops(&footprint, "scale").iter())
        .map(|r| fp.regions[r.id as usize].instances)
        .sum();
    assert_eq!(instances, THREADS * RUNS);
    let ws = run(&work, "working-set");
    assert!(!ws.working_set().unwrap().snapshots.is_empty());
    let hcpa = run(&work, "hcpa");
    let scale = parallel_loops(&hcpa, "scale");
    let instances: u64 = (scale.iter())
        .map(|r| HcpaStats::of(r).unwrap().map_or(0, |s| s.instances))
        .sum();
    assert_eq!(instances, THREADS * RUNS);
}
