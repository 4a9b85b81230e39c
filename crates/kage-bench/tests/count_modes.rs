//! The count build (counts added inline per segment) and the count-calls build (a call per
//! access) give identical reports on every program of the suite: every region's instances,
//! inclusive and self counters, the totals and what no region had. The suite's quick sizes,
//! real programs included; the harness builds and runs them, this test compares the reports
//! it leaves.

mod common;

use common::kage_bench_quick;
use kage_report::{read_report, CountStats, Report};
use std::path::Path;
use std::process::Command;

/// The programs of the suite, as `kage-bench --list` names them.
fn suite() -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_kage-bench"))
        .args(["--list", "--quick"])
        .output()
        .unwrap();
    assert!(output.status.success());
    (String::from_utf8_lossy(&output.stdout).lines())
        .filter_map(|l| l.split('\t').next().map(str::to_string))
        .collect()
}

/// Runs the quick suite built for `tool` in `work` (native builds shared between runs) and
/// moves each program's report to `<work>/<tool>/<program>.json`.
fn run_suite(work: &Path, tool: &str, programs: &[String]) {
    kage_bench_quick(work, &["--tool", tool]);
    let kept = work.join(tool);
    std::fs::create_dir_all(&kept).unwrap();
    for program in programs {
        let report = work.join(format!("runs/{program}/kage.{program}.json"));
        std::fs::rename(&report, kept.join(format!("{program}.json")))
            .unwrap_or_else(|e| panic!("{tool}: {program}'s report {}: {e}", report.display()));
    }
}

/// Each region's name, kind, lines and count statistics.
fn regions(report: &Report) -> Vec<(String, String, u32, CountStats)> {
    (report.regions.iter())
        .map(|r| {
            let stats = CountStats::of(r).expect("count fields");
            (r.name.clone(), format!("{:?}", r.kind), r.line, stats)
        })
        .collect()
}

#[test]
fn inline_counts_equal_a_call_per_access_on_every_suite_program() {
    let work = tempfile::tempdir().unwrap();
    let programs = suite();
    assert!(programs.len() >= 20, "{programs:?}");
    run_suite(work.path(), "count", &programs);
    run_suite(work.path(), "count-calls", &programs);
    for program in &programs {
        let read = |tool: &str| {
            let path = work.path().join(format!("{tool}/{program}.json"));
            read_report(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let (inline, calls) = (read("count"), read("count-calls"));
        assert_eq!(inline.tool, "count");
        assert_eq!(calls.tool, "count");
        assert!(inline.complete && calls.complete, "{program}");
        assert!(
            inline.count_totals().unwrap().loads > 0,
            "{program}: nothing counted"
        );
        assert_eq!(
            inline.count_totals(),
            calls.count_totals(),
            "{program}: totals"
        );
        assert_eq!(
            inline.tool_data["unattributed"], calls.tool_data["unattributed"],
            "{program}: outside every region"
        );
        let (a, b) = (regions(&inline), regions(&calls));
        assert_eq!(a.len(), b.len(), "{program}: the same regions");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y, "{program}");
        }
    }
}
