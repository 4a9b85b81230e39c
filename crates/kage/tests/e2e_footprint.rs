//! The `footprint` tool on `tests/c/footprint/footprint.c`, checked exactly per region at
//! byte, word and line granularity, with and without loop bodies, for every `vsm=` mode.
//!
//! Expected numbers are derived from the byte ranges each dynamic instance touches by
//! construction (the comments in the C file): every array is aligned to at least a line,
//! so each is modelled at its own 4 KiB-aligned base and the test counts distinct locations
//! and lines of the union of an instance's ranges, the definition of the footprint.

mod e2e_support;
use e2e_support::*;
use kage_report::{Region, RegionKind, Report};
use std::collections::BTreeSet;

const BUF: u64 = 0x10000;
const GRID: u64 = 0x20000;
const ARR: u64 = 0x30000;
const PER_THREAD: u64 = 0x40000;
const SHARED: u64 = 0x50000;
/// `pthread_t t[2]` in main: 16 bytes, 16-byte aligned (one line, two words).
const STACK_T: u64 = 0x60000;

const VSMS: [&str; 4] = ["baseline", "slim", "bulk", "palette"];

type Instance = Vec<(u64, u64)>;

/// Distinct (locations × location bytes, lines) of the union of `ranges`.
fn measure(ranges: &[(u64, u64)], location_bytes: u64) -> (u64, u64) {
    let mut locations = BTreeSet::new();
    let mut lines = BTreeSet::new();
    for &(lo, hi) in ranges {
        for a in lo..hi {
            locations.insert(a / location_bytes);
            lines.insert(a / 64);
        }
    }
    (locations.len() as u64 * location_bytes, lines.len() as u64)
}

/// What the report must say of a region whose instances touched `instances`.
#[track_caller]
fn check(region: &Region, instances: &[Instance], location_bytes: u64, what: &str) {
    let f = &region.metrics["footprint"];
    let what = format!(
        "{what}: {} {} line {}",
        region.kind.as_str(),
        region.name,
        region.line
    );
    let sizes: Vec<(u64, u64)> = instances
        .iter()
        .map(|i| measure(i, location_bytes))
        .collect();
    let n = sizes.len() as u64;
    assert_eq!(f["instances"], n, "instances of {what}");
    if n == 0 {
        for k in ["min_bytes", "max_bytes", "min_lines", "max_lines"] {
            assert_eq!(f[k], 0, "{k} of {what}");
        }
        return;
    }
    let bytes: Vec<u64> = sizes.iter().map(|s| s.0).collect();
    let lines: Vec<u64> = sizes.iter().map(|s| s.1).collect();
    assert_eq!(
        f["min_bytes"],
        *bytes.iter().min().unwrap(),
        "min_bytes of {what}"
    );
    assert_eq!(
        f["max_bytes"],
        *bytes.iter().max().unwrap(),
        "max_bytes of {what}"
    );
    assert_eq!(
        f["min_lines"],
        *lines.iter().min().unwrap(),
        "min_lines of {what}"
    );
    assert_eq!(
        f["max_lines"],
        *lines.iter().max().unwrap(),
        "max_lines of {what}"
    );
    let avg = |v: &[u64]| v.iter().sum::<u64>() as f64 / n as f64;
    assert!(
        (f["avg_bytes"].as_f64().unwrap() - avg(&bytes)).abs() < 1e-9,
        "avg_bytes of {what}: {f}"
    );
    assert!(
        (f["avg_lines"].as_f64().unwrap() - avg(&lines)).abs() < 1e-9,
        "avg_lines of {what}: {f}"
    );
}

fn union(instances: &[&[Instance]]) -> Instance {
    instances
        .iter()
        .flat_map(|i| i.iter().flatten().copied())
        .collect()
}

/// One instance per element of `ranges`, each touching that one range.
fn each(ranges: impl IntoIterator<Item = (u64, u64)>) -> Vec<Instance> {
    ranges.into_iter().map(|r| vec![r]).collect()
}

fn regions_of<'r>(report: &'r Report, parent: &Region, kind: RegionKind) -> Vec<&'r Region> {
    let mut v: Vec<_> = report
        .regions
        .iter()
        .filter(|r| r.kind == kind && r.parent == Some(parent.id))
        .collect();
    v.sort_by_key(|r| (r.line, r.id));
    v
}

fn check_report(report: &Report, location_bytes: u64, bodies: bool, what: &str) {
    assert_eq!(report.tool, "footprint");
    assert!(report.complete);
    let top = &report.tool_data;
    assert_eq!(top["location_bytes"], location_bytes, "{what}");
    assert_eq!(top["line_size"], 64, "{what}");
    // Each of the byte ranges below is what the C file's comments say.
    let touch_n = each([(BUF, BUF + 100), (BUF, BUF + 10), (BUF, BUF + 200)]);
    let rows: Vec<(u64, u64)> = (0..4)
        .map(|r| (GRID + r * 128, GRID + r * 128 + 32))
        .collect();
    let nested = vec![rows.clone()];
    let inner = each(rows.iter().copied());
    let rec = each((0..4).rev().map(|d| (ARR, ARR + 8 * (d + 1))));
    let sum_arr = each([(ARR, ARR + 512), (ARR, ARR + 256)]);
    let sweep = each([(BUF, BUF + 20), (BUF + 10, BUF + 30), (BUF + 20, BUF + 40)]);
    let main_loop = vec![union(&[&sweep])];
    let workers: Vec<Instance> = (0..2)
        .map(|id| {
            vec![
                (PER_THREAD + id * 256, PER_THREAD + id * 256 + 256),
                (SHARED, SHARED + 64),
            ]
        })
        .collect();
    let worker_own = each((0..2).map(|id| (PER_THREAD + id * 256, PER_THREAD + id * 256 + 256)));
    let worker_shared = each([(SHARED, SHARED + 64); 2]);
    let mut main = union(&[&touch_n, &nested, &rec, &sum_arr, &sweep]);
    main.push((STACK_T, STACK_T + 16));
    let main = vec![main];

    let f = func(report, "touch_n");
    check(f, &touch_n, location_bytes, what);
    check(only_loop(report, f), &touch_n, location_bytes, what);
    let f = func(report, "nested");
    check(f, &nested, location_bytes, what);
    let outer = only_loop(report, f);
    check(outer, &nested, location_bytes, what);
    let inner_loop = only_loop(report, body_of(report, outer));
    check(inner_loop, &inner, location_bytes, what);
    check(func(report, "rec"), &rec, location_bytes, what);
    let f = func(report, "sum_arr");
    check(f, &sum_arr, location_bytes, what);
    check(only_loop(report, f), &sum_arr, location_bytes, what);
    let f = func(report, "sweep");
    check(f, &sweep, location_bytes, what);
    check(only_loop(report, f), &sweep, location_bytes, what);
    let f = func(report, "worker");
    check(f, &workers, location_bytes, what);
    let worker_loops = regions_of(report, f, RegionKind::Loop);
    assert_eq!(worker_loops.len(), 2);
    check(worker_loops[0], &worker_own, location_bytes, what);
    check(worker_loops[1], &worker_shared, location_bytes, what);
    let m = func(report, "main");
    check(m, &main, location_bytes, what);
    let main_loops = regions_of(report, m, RegionKind::Loop);
    check(main_loops[0], &main_loop, location_bytes, what);

    // Loop bodies: one instance per iteration when enabled, never entered otherwise.
    let byte_each = |base: u64, n: u64| each((0..n).map(move |i| (base + i, base + i + 1)));
    let body = |lp: &Region| body_of(report, lp);
    let expect = |v: Vec<Instance>| if bodies { v } else { Vec::new() };
    let touch_iters: Vec<Instance> = [100u64, 10, 200]
        .iter()
        .flat_map(|&n| byte_each(BUF, n))
        .collect();
    check(
        body(only_loop(report, func(report, "touch_n"))),
        &expect(touch_iters),
        location_bytes,
        what,
    );
    let cells: Vec<Instance> = (0..4)
        .flat_map(|r| {
            (0..8).map(move |c| vec![(GRID + r * 128 + c * 4, GRID + r * 128 + c * 4 + 4)])
        })
        .collect();
    check(body(inner_loop), &expect(cells), location_bytes, what);
    check(body(outer), &expect(inner.clone()), location_bytes, what);
    let elems: Vec<Instance> = [64u64, 32]
        .iter()
        .flat_map(|&k| (0..k).map(|i| vec![(ARR + 8 * i, ARR + 8 * i + 8)]))
        .collect();
    check(
        body(only_loop(report, func(report, "sum_arr"))),
        &expect(elems),
        location_bytes,
        what,
    );
    let sweep_iters: Vec<Instance> = (0..3).flat_map(|k| byte_each(BUF + 10 * k, 20)).collect();
    check(
        body(only_loop(report, func(report, "sweep"))),
        &expect(sweep_iters),
        location_bytes,
        what,
    );
    check(
        body(main_loops[0]),
        &expect(sweep.clone()),
        location_bytes,
        what,
    );
    let own_iters: Vec<Instance> = (0..2)
        .flat_map(|id| byte_each(PER_THREAD + 256 * id, 256))
        .collect();
    check(
        body(worker_loops[0]),
        &expect(own_iters),
        location_bytes,
        what,
    );
    let shared_iters: Vec<Instance> = (0..2).flat_map(|_| byte_each(SHARED, 64)).collect();
    check(
        body(worker_loops[1]),
        &expect(shared_iters),
        location_bytes,
        what,
    );

    // Each thread's footprint while a region was active: main's, then each worker's.
    let (main_bytes, main_lines) = measure(&main[0], location_bytes);
    let (worker_bytes, worker_lines) = measure(&workers[0], location_bytes);
    assert_eq!(
        top["total_bytes"],
        main_bytes + 2 * worker_bytes,
        "total_bytes {what}"
    );
    assert_eq!(
        top["total_lines"],
        main_lines + 2 * worker_lines,
        "total_lines {what}"
    );
    let share = func(report, "main").metrics["footprint"]["share"]
        .as_f64()
        .unwrap();
    assert!((share - main_bytes as f64 / (main_bytes + 2 * worker_bytes) as f64).abs() < 1e-12);
    // main → the sweep loop (→ its body) → sweep → its loop (→ its body); rec: main + 4.
    assert_eq!(
        top["max_depth"],
        if bodies { 6 } else { 5 },
        "max_depth {what}"
    );
    assert!(top["shadow_peak_bytes"].as_u64().unwrap() > 0);
}

fn run(work: &Work, exe: &std::path::Path, options: &str) -> Report {
    let report_path = work.path("fp.json");
    let _ = std::fs::remove_file(&report_path);
    let out = work.run_with_options(
        exe,
        &[],
        &format!("tool=footprint:output={}:{options}", report_path.display()),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    kage_report::read_report(&report_path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn footprints_are_exact_at_every_granularity_and_vsm() {
    let work = Work::new();
    let exe = work.build_with_env(
        "footprint/footprint.c",
        &["-O2"],
        &[("KAGE_TOOL", "footprint")],
    );
    for (granularity, location_bytes) in [("byte", 1), ("word", 8), ("line", 64)] {
        for vsm in VSMS {
            let what = format!("vsm={vsm} granularity={granularity}");
            let report = run(&work, &exe, &format!("vsm={vsm}:granularity={granularity}"));
            assert_eq!(report.tool_data["vsm"], vsm);
            assert_eq!(report.tool_data["granularity"], granularity);
            check_report(&report, location_bytes, false, &what);
        }
    }
}

/// A program built for every tool (call hooks: every iteration is an event) gives the same
/// footprints, and measures loop bodies too.
#[test]
fn call_hook_build_agrees_and_measures_loop_bodies() {
    let work = Work::new();
    let exe = work.build_for_every_tool("footprint/footprint.c", &["-O2"]);
    let report = run(&work, &exe, "granularity=byte");
    check_report(&report, 1, false, "KAGE_TOOL=count-calls");
    // A footprint build counts the accesses it reports in groups, threads' included.
    let grouped = work.build_with_env(
        "footprint/footprint.c",
        &["-O2"],
        &[("KAGE_TOOL", "footprint")],
    );
    let grouped = run(&work, &grouped, "granularity=byte");
    assert_eq!(grouped.tool_data["accesses"], report.tool_data["accesses"]);
    for vsm in ["baseline", "palette"] {
        for (granularity, location_bytes) in [("byte", 1), ("line", 64)] {
            let what = format!("vsm={vsm} granularity={granularity} loop_bodies=1");
            let report = run(
                &work,
                &exe,
                &format!("vsm={vsm}:granularity={granularity}:loop_bodies=1"),
            );
            check_report(&report, location_bytes, true, &what);
        }
    }
}

/// Iterations left out inline (a loop whose body is the innermost region, for a tool that
/// does not measure iterations: docs/abi.md, "Hooks the pass inserts") change no footprint.
/// A build with call hooks, run with `loop_bodies=1` (every iteration reaches the runtime)
/// and without (iterations left out), and a footprint build agree on every function's and
/// loop's footprint, over loops left by `break`, `continue`, `goto`, a `longjmp` two frames
/// down, and loop bodies with inlined helpers and calls in them.
#[test]
fn iterations_left_out_inline_change_no_footprint() {
    let work = Work::new();
    for source in ["count_classes.c", "longjmp.c"] {
        let exe = work.build_for_every_tool(source, &["-O2"]);
        let every = run(&work, &exe, "loop_bodies=1");
        let skipped = run(&work, &exe, "loop_bodies=0");
        let grouped = work.build_with_env(source, &["-O2"], &[("KAGE_TOOL", "footprint")]);
        let grouped = run(&work, &grouped, "loop_bodies=0");
        let footprints = |report: &Report| -> Vec<(String, u32, String)> {
            (report.regions.iter())
                .filter(|r| r.kind != RegionKind::LoopBody)
                .map(|r| {
                    let f = &r.metrics["footprint"];
                    (r.name.clone(), r.line, f.to_string())
                })
                .collect()
        };
        assert_eq!(footprints(&every), footprints(&skipped), "{source}");
        assert_eq!(footprints(&grouped), footprints(&skipped), "{source}");
        let iterations: u64 = (every.regions.iter())
            .filter(|r| r.kind == RegionKind::LoopBody)
            .map(|r| r.metrics["footprint"]["instances"].as_u64().unwrap())
            .sum();
        assert!(iterations > 0, "{source}: no iteration measured");
    }
}

/// A footprint build reports a simple loop's iterations together, so it refuses loop
/// bodies, says why and what to do, and measures the rest exactly.
#[test]
fn footprint_build_refuses_loop_bodies_and_measures_the_rest() {
    let work = Work::new();
    let exe = work.build_with_env(
        "footprint/footprint.c",
        &["-O2"],
        &[("KAGE_TOOL", "footprint")],
    );
    let report_path = work.path("bodies.json");
    let out = work.run_with_options(
        &exe,
        &[],
        &format!(
            "tool=footprint:loop_bodies=1:output={}",
            report_path.display()
        ),
    );
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("loop_bodies=1 needs every loop iteration reported")
            && stderr.contains("KAGE_TOOL=count"),
        "{stderr}"
    );
    let report = kage_report::read_report(&report_path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.tool_data["loop_bodies"], false);
    check_report(&report, 1, false, "KAGE_TOOL=footprint loop_bodies=1");
    // Another tool on a footprint build: an error, and the footprint tool.
    let out = work.run_with_options(&exe, &[], "tool=count:output=count.json");
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("tool=count needs a program built for it or for every tool (KAGE_TOOL=count-calls), but this one was built with KAGE_TOOL=footprint"));
    let report = kage_report::read_report(&work.path("count.json")).unwrap();
    assert_eq!(report.tool, "footprint");
}

/// `tests/c/footprint/hoisted.c`: loops that a footprint build reports per chunk of
/// iterations. Each array is modelled at its own base, far from the others.
mod hoisted {
    use super::*;

    const RECS: u64 = 0x100000;
    const MAT: u64 = 0x200000;
    const INTS: u64 = 0x300000;
    const IN: u64 = 0x400000;
    const OUT: u64 = 0x500000;
    const FA: u64 = 0x600000;
    const FB: u64 = 0x700000;
    const HIST: u64 = 0x800000;
    const IDX: u64 = 0x900000;
    const WEIGHT: u64 = 0xa00000;
    const PTRS: u64 = 0xb00000;
    const GRID: u64 = 0xc00000;
    const CLEARED: u64 = 0xd00000;
    const TEXT: u64 = 0xe00000;
    const ODD: u64 = 0xf00000;

    /// Every function's (and its one loop's) instances: byte ranges.
    fn expected() -> Vec<(&'static str, Vec<Instance>)> {
        let fields = vec![(0..200)
            .map(|i| (RECS + 24 * i + 8, RECS + 24 * i + 16))
            .collect()];
        let column = (0..8)
            .map(|j| {
                (0..64)
                    .map(|i| (MAT + 512 * i + 8 * j, MAT + 512 * i + 8 * j + 8))
                    .collect()
            })
            .collect();
        let down = vec![vec![(INTS, INTS + 4 * 3000)]];
        let stencil = vec![vec![(IN, IN + 8000), (OUT + 8, OUT + 8 * 999)]];
        let axpy = vec![vec![(FA, FA + 4 * 4999), (FB, FB + 4 * 4999)]];
        let indexed = vec![vec![
            (IDX, IDX + 4 * 500),
            (WEIGHT, WEIGHT + 4 * 500),
            (HIST, HIST + 8 * 64),
        ]];
        let chased = vec![std::iter::once((PTRS, PTRS + 8 * 300))
            .chain(
                (0..150)
                    .step_by(3)
                    .map(|r| (RECS + 24 * r + 16, RECS + 24 * r + 24)),
            )
            .collect()];
        let rows = vec![std::iter::once((CLEARED, CLEARED + 40))
            .chain((0..40).map(|i| (GRID + 256 * i, GRID + 256 * i + 100)))
            .collect()];
        let odds = vec![std::iter::once((TEXT, TEXT + 700))
            .chain(
                (0..700)
                    .filter(|i| i % 7 % 2 == 1)
                    .map(|i| (ODD + i, ODD + i + 1)),
            )
            .collect()];
        vec![
            ("fields", fields),
            ("column", column),
            ("down", down),
            ("stencil", stencil),
            ("axpy", axpy),
            ("indexed", indexed),
            ("chased", chased),
            ("rows", rows),
            ("odds", odds),
        ]
    }

    fn check_hoisted(report: &Report, location_bytes: u64, what: &str) {
        for (name, instances) in expected() {
            let f = func(report, name);
            check(f, &instances, location_bytes, what);
            if name != "axpy" {
                check(only_loop(report, f), &instances, location_bytes, what);
            }
        }
        // axpy is a loop over 8 floats at a time (4992 of them) and a remainder loop (7).
        let mut loops = regions_of(report, func(report, "axpy"), RegionKind::Loop);
        loops.sort_by_key(|l| std::cmp::Reverse(l.metrics["footprint"]["max_bytes"].as_u64()));
        let [vector, remainder] = loops[..] else {
            panic!("axpy has {} loops: {what}", loops.len())
        };
        let split = 4 * 4992;
        let vector_part = vec![vec![(FA, FA + split), (FB, FB + split)]];
        let rest = vec![vec![
            (FA + split, FA + 4 * 4999),
            (FB + split, FB + 4 * 4999),
        ]];
        check(vector, &vector_part, location_bytes, what);
        check(remainder, &rest, location_bytes, what);
    }

    #[test]
    fn hoisted_loops_are_exact_in_every_build() {
        let work = Work::new();
        let (exe, out) = work.build_with_output(
            "footprint/hoisted.c",
            &["-O2"],
            &[("KAGE_TOOL", "footprint"), ("KAGE_PASS_EXPLAIN", "1")],
        );
        // The loops really are reported per chunk in this build.
        let said = String::from_utf8_lossy(&out.stderr);
        for name in [
            "fields", "column", "down", "stencil", "axpy", "indexed", "chased", "rows", "odds",
        ] {
            assert!(
                said.contains(&format!("kage-pass: {name}: loop at line")),
                "{said}"
            );
        }
        assert!(!said.contains("not hoisted"), "{said}");
        let calls = work.build_for_every_tool("footprint/hoisted.c", &["-O2"]);
        for (granularity, location_bytes) in [("byte", 1), ("word", 8), ("line", 64)] {
            for vsm in VSMS {
                let what = format!("footprint build, vsm={vsm} granularity={granularity}");
                let options = format!("vsm={vsm}:granularity={granularity}");
                check_hoisted(&run(&work, &exe, &options), location_bytes, &what);
            }
            let what = format!("build for every tool, granularity={granularity}");
            let report = run(&work, &calls, &format!("granularity={granularity}"));
            check_hoisted(&report, location_bytes, &what);
        }
        // Both builds count the same accesses.
        let a = run(&work, &exe, "");
        let b = run(&work, &calls, "");
        assert_eq!(a.tool_data["accesses"], b.tool_data["accesses"]);
    }
}

/// `tests/c/footprint/grouped.c`: accesses a footprint build reports per segment.
mod grouped {
    use super::*;

    #[test]
    fn grouped_reports_are_exact_and_agree_with_the_build_for_every_tool() {
        let work = Work::new();
        let grouped = work.build_with_env(
            "footprint/grouped.c",
            &["-O2"],
            &[("KAGE_TOOL", "footprint")],
        );
        let calls = work.build_for_every_tool("footprint/grouped.c", &["-O2"]);
        let expected = [
            ("fields", 1, 20),
            ("other", 1, 4),
            ("around_call", 1, 12),
            ("diamond", 2, 6),
            ("copy", 1, 2 * 501),
            ("thrower", 1, 8),
            ("jumper", 1, 16),
            ("unseen", 1, 0),
            ("main", 1, 20 + 12 + 6 + 2 * 501 + 16),
        ];
        for (granularity, location_bytes) in [("byte", 1), ("word", 8), ("line", 64)] {
            let options = format!("granularity={granularity}");
            let a = run(&work, &grouped, &options);
            let b = run(&work, &calls, &options);
            assert_eq!(
                a.tool_data["accesses"], b.tool_data["accesses"],
                "{granularity}"
            );
            assert_eq!(a.regions.len(), b.regions.len());
            for (x, y) in a.regions.iter().zip(&b.regions) {
                assert_eq!(
                    x.metrics["footprint"], y.metrics["footprint"],
                    "{granularity}: {}",
                    x.name
                );
            }
            if location_bytes == 1 {
                for (name, instances, bytes) in expected {
                    let f = &func(&a, name).metrics["footprint"];
                    assert_eq!(f["instances"], instances, "{name}");
                    assert_eq!(f["max_bytes"], bytes, "{name}");
                    assert_eq!(f["min_bytes"], bytes, "{name}");
                }
            }
        }
    }
}

/// A forked child of a footprint build reports what it did after the fork (its inline
/// access count starts from zero too), the parent what it did.
#[test]
fn a_forked_child_of_a_footprint_build_reports_its_own_accesses() {
    let work = Work::new();
    let exe = work.build_with_env("fork.c", &["-O2"], &[("KAGE_TOOL", "footprint")]);
    let (_, parent, child) = work.run_forking(&exe);
    assert_eq!(parent.tool, "footprint");
    // fill(n) writes g[0, n): 4 n bytes; the parent fills 10 then 20, the child 7.
    let fill = &func(&parent, "fill").metrics["footprint"];
    assert_eq!(
        (fill["instances"].as_u64(), fill["max_bytes"].as_u64()),
        (Some(2), Some(80))
    );
    assert_eq!(parent.tool_data["accesses"], 30);
    let fill = &func(&child, "fill").metrics["footprint"];
    assert_eq!(
        (fill["instances"].as_u64(), fill["max_bytes"].as_u64()),
        (Some(1), Some(28))
    );
    assert_eq!(child.tool_data["accesses"], 7);
}

/// Masked and per-lane vector accesses (`tests/c/vector/masked.c`): each lane the mask lets
/// through is a range of its own, and no other is.
#[test]
fn masked_vector_accesses_touch_exactly_their_lanes() {
    let work = Work::new();
    // Per function, its three calls (masks 0x05, 0xFF, 0x00), as offsets into its array.
    let contiguous: Vec<Instance> = vec![vec![(0, 8), (16, 24)], vec![(0, 64)], vec![]];
    let packed: Vec<Instance> = vec![vec![(0, 16)], vec![(0, 64)], vec![]];
    let spread: Vec<Instance> = vec![
        vec![(0, 8), (128, 136)],
        (0..8).map(|i| (i * 64, i * 64 + 8)).collect(),
        vec![],
    ];
    for level in ["-O2", "-O3"] {
        let exe = work.build_with_env("vector/masked.c", &[level], &[("KAGE_TOOL", "footprint")]);
        for (granularity, location_bytes) in [("byte", 1), ("line", 64)] {
            let report = run(&work, &exe, &format!("granularity={granularity}"));
            let what = format!("{level} granularity={granularity}");
            for (name, instances) in [
                ("masked_load", &contiguous),
                ("masked_store", &contiguous),
                ("expand_load", &packed),
                ("compress_store", &packed),
                ("gather", &spread),
                ("scatter", &spread),
            ] {
                check(func(&report, name), instances, location_bytes, &what);
            }
        }
    }
}

/// The C library functions' reads and writes are ranges like the program's own
/// (`tests/c/library/effects.c`, whose comment derives them).
#[test]
fn c_library_functions_touch_what_they_read_and_write() {
    let work = Work::new();
    let exe = work.build_with_env(
        "library/effects.c",
        &["-O2", "-fno-builtin"],
        &[("KAGE_TOOL", "footprint")],
    );
    let report = run(&work, &exe, "");
    for (name, bytes) in [
        ("measure", 13),
        // a[0..41) and b[0..41), and 6 bytes of each literal.
        ("compare", 41 * 2 + 6 * 2),
        ("search", 13),
        // text and buf 13 each, a 64, big 100 (the memcpy's 64 inside the memset's 100).
        ("copy", 13 + 13 + 64 + 100),
        // buf up to its NUL and the 2 bytes after it, and "!!" with its NUL.
        ("append", 15 + 3),
        ("io", 50 + 13),
        // text through the match, "hel" and "wor" with their NULs, out's 7 bytes.
        ("scan", 10 + 4 + 4 + 7),
    ] {
        let f = &func(&report, name).metrics["footprint"];
        assert_eq!(
            (f["instances"].as_u64(), f["max_bytes"].as_u64()),
            (Some(1), Some(bytes)),
            "{name}: {f}"
        );
    }
}
