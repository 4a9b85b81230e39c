//! Hierarchical critical path analysis end to end (docs/hcpa.md): C programs built with
//! `KAGE_TOOL=hcpa`, run, and their reports checked
//!
//! - against values derived on paper (`tests/c/hcpa/kernels.c`, one kernel per kind of
//!   loop: independent iterations, a chain through memory, a reduction, an
//!   anti-dependence, 2-D nests parallel outside or inside, recursion, a pointer chase);
//! - against the reference model (`tests/hcpa/reference.py`), which replays the trace of
//!   every timestamp event with plain dictionaries: equal, exactly, at -O1, -O2 and -O3;
//! - against the build without folding (`KAGE_HCPA_FOLD=0`, a call per computed value):
//!   the same statistics, so the pass's static folding loses nothing.

mod e2e_support;
use e2e_support::*;

use std::path::Path;
use std::process::Command;

use kage_report::{HcpaStats, PlanOptions, Region, RegionKind, Report};
use serde_json::Value;

/// The hcpa statistics of the loop of function `name` that starts at `line`.
fn loop_at<'r>(report: &'r Report, name: &str, line: u32) -> (&'r Region, HcpaStats) {
    let region = (report.regions.iter())
        .find(|r| r.kind == RegionKind::Loop && r.name == name && r.line == line)
        .unwrap_or_else(|| panic!("no loop of {name} at line {line}"));
    (region, hstats(region))
}

fn hstats(region: &Region) -> HcpaStats {
    HcpaStats::of(region)
        .unwrap()
        .unwrap_or_else(|| panic!("region {} never ran", region.id))
}

fn sp(report: &Report, name: &str, line: u32) -> f64 {
    loop_at(report, name, line).1.self_parallelism
}

fn build_and_run(work: &Work, source: &str, flags: &[&str], env: &[(&str, &str)]) -> Report {
    let mut env = env.to_vec();
    env.push(("KAGE_TOOL", "hcpa"));
    let exe = work.build_with_env(&format!("hcpa/{source}"), flags, &env);
    work.run_report(&exe, &[], 0)
}

#[test]
fn kernels_have_the_self_parallelism_derived_on_paper() {
    let work = Work::new();
    let report = build_and_run(&work, "kernels.c", &["-O2", "-g"], &[]);
    let n = 1000.0;
    // Independent iterations: every body has the same critical path (load, multiply-add,
    // store: 4 + 5 + 1) and the loop's is the same, the induction variable costing no
    // time: SP = N exactly. The reduction (load 4 + fadd 2 per iteration, combined as a
    // parallel reduction) likewise; the anti-dependence loop runs N - 1 iterations.
    assert_eq!(sp(&report, "independent", 16), n);
    assert_eq!(sp(&report, "reduction", 27), n);
    assert_eq!(sp(&report, "anti", 33), n - 1.0);
    let (_, independent) = loop_at(&report, "independent", 16);
    assert_eq!((independent.critical_path, independent.work), (10, 12000));
    // Chains through memory or a pointer: each iteration waits for the previous one.
    assert!(sp(&report, "chain", 21) < 1.5);
    assert!(sp(&report, "chase", 59) < 1.5);
    // Rows: the 40 rows are independent, each row a chain; columns: the reverse (50).
    let rows = sp(&report, "rows", 38);
    assert!((38.0..=40.5).contains(&rows), "{rows}");
    assert!(sp(&report, "rows", 39) < 1.5);
    assert!(sp(&report, "columns", 44) < 1.5);
    assert_eq!(sp(&report, "columns", 45), 50.0);
    // fib: the two recursive calls are independent until added (the optimiser turns one
    // into a loop around the other: the loop's iterations are the parallel calls).
    let fib = (report.regions.iter())
        .filter(|r| r.name == "fib" && r.kind != RegionKind::LoopBody)
        .filter_map(|r| HcpaStats::of(r).unwrap())
        .map(|s| s.self_parallelism)
        .fold(0.0, f64::max);
    assert!(fib > 1.4, "{fib}");
    // Work adds up: the program's is main's (the one root), and no region has more.
    let hcpa = report.hcpa().unwrap();
    let main = hstats(func(&report, "main"));
    assert_eq!(main.work, hcpa.work);
    assert_eq!(main.coverage, 1.0);

    // The plan for many cores holds the parallel loops and none of the serial ones.
    let plan = kage_report::plan(&report, &PlanOptions::with_cores(64)).unwrap();
    let planned: Vec<(String, u32)> = (plan.rows.iter())
        .map(|row| {
            let r = &report.regions[row.region as usize];
            (r.name.clone(), r.line)
        })
        .collect();
    for parallel in [
        ("independent", 16),
        ("reduction", 27),
        ("anti", 33),
        ("rows", 38),
        ("columns", 45),
    ] {
        assert!(
            planned.contains(&(parallel.0.to_string(), parallel.1)),
            "{parallel:?} not in {planned:?}"
        );
    }
    for serial in [("chain", 21), ("chase", 59), ("rows", 39), ("columns", 44)] {
        assert!(
            !planned.contains(&(serial.0.to_string(), serial.1)),
            "{serial:?} in {planned:?}"
        );
    }
    // The report as written has a plan (this machine's cores), and `kage report` shows it
    // first.
    assert!(report.hcpa_plan().unwrap().is_some());
    let text = kage_report_output(&work.path("report.json"), &["--cores", "64"]);
    let plan_at = text.find("plan for 64 cores").expect(&text);
    let tree_at = text.find("function main").expect(&text);
    assert!(plan_at < tree_at, "{text}");
    assert!(text.contains("loop  independent  kernels.c:16"), "{text}");
}

/// Masked loads and stores, gathers and scatters carry dependences through memory like
/// plain ones, lane by lane (`tests/c/hcpa/masked.c`).
#[test]
fn masked_vector_accesses_carry_dependences_through_memory() {
    let work = Work::new();
    for level in ["-O2", "-O3"] {
        let report = build_and_run(&work, "masked.c", &[level, "-g"], &[]);
        // Each iteration gathers what the one before scattered: a chain.
        let chained = sp(&report, "chained", 24);
        assert!(chained < 1.5, "{level}: {chained}");
        // Each row from itself: 200 independent iterations of the same critical path.
        assert_eq!(sp(&report, "rowwise", 32), 200.0, "{level}");
    }
}

/// The reference model's statistics for a trace: `{"program": ..., "regions": {id: ...}}`;
/// `report` names the source regions (recursion counts once per source region).
fn reference(trace: &Path, report: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/hcpa/reference.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(trace)
        .arg("--regions")
        .arg(report)
        .output()
        .expect("python3 runs the reference model");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Builds `source`, runs it with the trace on, and checks its report against the reference
/// model's replay of the trace: the program's work and critical path, and every region's
/// instances, work, self work, critical path, self-parallelism and dynamic parents.
/// Builds and runs `source`, checks its report against the reference model's replay of
/// the trace; returns the report and the number of `hoist` events in the trace.
fn agrees_with_the_reference(
    work: &Work,
    source: &str,
    flags: &[&str],
    env: &[(&str, &str)],
) -> (Report, usize) {
    let mut env = env.to_vec();
    env.push(("KAGE_TOOL", "hcpa"));
    let exe = work.build_with_env(&format!("hcpa/{source}"), flags, &env);
    let trace = work.path("trace.txt");
    let report_path = work.path("traced.json");
    let out = work.run_with_options(
        &exe,
        &[],
        &format!(
            "timestamp_trace={}:output={}",
            trace.display(),
            report_path.display()
        ),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = kage_report::read_report(&report_path).unwrap();
    let hoists = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("hoist "))
        .count();
    let expected = reference(&trace, &report_path);
    let what = format!("{source} {flags:?} {env:?}");
    let hcpa = report.hcpa().unwrap();
    assert_eq!(hcpa.work, expected["program"]["work"], "{what}");
    assert_eq!(
        hcpa.critical_path, expected["program"]["critical_path"],
        "{what}"
    );
    let regions = expected["regions"].as_object().unwrap();
    let mut ran = 0;
    for region in &report.regions {
        let Some(s) = HcpaStats::of(region).unwrap() else {
            assert!(
                !regions.contains_key(&region.id.to_string()),
                "{what}: {}",
                region.id
            );
            continue;
        };
        ran += 1;
        let e = &regions[&region.id.to_string()];
        let at = format!(
            "{what}: region {} ({:?} {} line {})",
            region.id, region.kind, region.name, region.line
        );
        assert_eq!(s.instances, e["instances"], "{at}");
        assert_eq!(s.work, e["work"], "{at}");
        assert_eq!(s.self_work, e["self_work"], "{at}");
        assert_eq!(s.critical_path, e["critical_path"], "{at}");
        let (got, want) = (s.self_parallelism, e["self_parallelism"].as_f64().unwrap());
        assert!(
            (got - want).abs() <= 1e-9 * want.max(1.0),
            "{at}: SP {got} != {want}"
        );
        let mut parents = s.parents.clone();
        parents.sort_unstable();
        assert_eq!(serde_json::json!(parents), e["parents"], "{at}");
    }
    assert_eq!(ran, regions.len(), "{what}");
    (report, hoists)
}

/// The per-region statistics of a report, for comparing builds.
fn all_stats(report: &Report) -> Vec<Option<HcpaStats>> {
    report
        .regions
        .iter()
        .map(|r| HcpaStats::of(r).unwrap())
        .collect()
}

#[test]
fn the_reference_model_agrees_exactly_and_folding_changes_nothing() {
    for source in [
        "kernels.c",
        "mixed.c",
        "idioms.c",
        "idioms.cpp",
        "dispatch.c",
    ] {
        let work = Work::new();
        for level in ["-O1", "-O2", "-O3"] {
            agrees_with_the_reference(&work, source, &[level, "-g"], &[]);
        }
        let (folded, hoists) = agrees_with_the_reference(&work, source, &["-O2", "-g"], &[]);
        let (unfolded, none) =
            agrees_with_the_reference(&work, source, &["-O2", "-g"], &[("KAGE_HCPA_FOLD", "0")]);
        // Loops' invariant candidates were hoisted, and that changed nothing either.
        assert!(
            hoists > 0 && none == 0,
            "{source}: {hoists} and {none} hoists"
        );
        assert_eq!(all_stats(&folded), all_stats(&unfolded), "{source}");
        assert_eq!(folded.hcpa().unwrap().work, unfolded.hcpa().unwrap().work);
    }
}

/// The events of the kind `op` in the trace of the last run of [`agrees_with_the_reference`].
fn trace_events(work: &Work, op: &str) -> usize {
    trace_lines(work, op).count()
}

/// The lines of the events of the kind `op` in that trace.
fn trace_lines(work: &Work, op: &str) -> impl Iterator<Item = String> {
    let trace = std::fs::read_to_string(work.path("trace.txt")).unwrap();
    let op = op.to_string();
    (trace.lines())
        .filter(move |l| l.split(' ').next() == Some(op.as_str()))
        .map(str::to_string)
        .collect::<Vec<_>>()
        .into_iter()
}

/// Static and branchy leaves (`tests/c/hcpa/leaves.c`): the build computes their work and
/// critical paths (a branchy leaf's as values, by the path taken), and the report is the
/// one the runtime computes with their hooks kept (`KAGE_HCPA_LEAVES=0`), region by
/// region; both agree with the reference model.
#[test]
fn leaves_give_what_the_runtime_computes() {
    let work = Work::new();
    for level in ["-O2", "-O3"] {
        let (with, _) = agrees_with_the_reference(&work, "leaves.c", &[level, "-g"], &[]);
        let leaves = trace_events(&work, "leaf");
        let timestamps = trace_events(&work, "ts");
        let chains = trace_lines(&work, "leaf")
            .filter(|l| l.split(' ').count() == 6)
            .count();
        // pick() and skip() branch: branchy leaves, one `leaf` event per instance.
        let leaf_events_of = |name: &str| {
            let id = (with.regions.iter())
                .find(|r| r.name == name && r.kind == RegionKind::Function)
                .unwrap()
                .id
                .to_string();
            trace_lines(&work, "leaf")
                .filter(|l| l.split(' ').skip(3).eq([id.as_str()]))
                .count()
        };
        let branchy = [leaf_events_of("pick"), leaf_events_of("skip")];
        let env = [("KAGE_HCPA_LEAVES", "0")];
        let (without, _) = agrees_with_the_reference(&work, "leaves.c", &[level, "-g"], &env);
        let none = trace_events(&work, "leaf");
        // Around a static leaf, values fold across the blocks cut where it begins and ends
        // (`leaves::fold_scopes`): fewer times are computed at run time.
        let timestamps_without = trace_events(&work, "ts");
        assert!(
            timestamps < timestamps_without,
            "{level}: {timestamps} timestamps with leaves, {timestamps_without} without"
        );
        // read_le(), put(), bump() and store32() (inside write32() inside scramble(): a
        // chain of three regions): 2048 calls each.
        assert!(
            leaves >= 6 * 2048 && chains == 2048 && none == 0,
            "{level}: {leaves} and {none} leaves, {chains} chains of 3"
        );
        assert_eq!(branchy, [2048, 2048], "{level}: branchy leaves' events");
        assert_eq!(all_stats(&with), all_stats(&without), "{level}");
        let (a, b) = (with.hcpa().unwrap(), without.hcpa().unwrap());
        assert_eq!((a.work, a.critical_path), (b.work, b.critical_path));
        for name in [
            "read_le", "put", "bump", "swap_in", "scramble", "write32", "store32", "pick", "skip",
        ] {
            let region = (with.regions.iter())
                .find(|r| r.name == name && r.kind == RegionKind::Function)
                .unwrap();
            let s = HcpaStats::of(region).unwrap().unwrap();
            assert_eq!(s.instances, 2048, "{level} {name}");
            assert!(
                s.critical_path > 0 && s.critical_path <= s.work,
                "{level} {name}"
            );
        }
        let run = |env: &[(&str, &str)], options: &str| {
            let mut env = env.to_vec();
            env.push(("KAGE_TOOL", "hcpa"));
            let exe = work.build_with_env("hcpa/leaves.c", &[level, "-g"], &env);
            let path = work.path("run.json");
            let options = format!("{options}:output={}", path.display());
            assert!(work.run_with_options(&exe, &[], &options).status.success());
            kage_report::read_report(&path).unwrap()
        };
        // main, pass, its loop and body, scramble, write32, store32: levels 0 to 6; the
        // deepest analysed levels cut the chain.
        for max_depth in [5, 6] {
            let options = format!("max_depth={max_depth}");
            let (with, without) = (run(&[], &options), run(&env, &options));
            assert_eq!(all_stats(&with), all_stats(&without), "{level} {options}");
            let skipped = |r: &Report| r.hcpa().unwrap().skipped_instances;
            assert_eq!(skipped(&with), skipped(&without), "{level} {options}");
            assert!(skipped(&with) >= 2048, "{level} {options}");
        }
        // While accesses are off, region events still come: a leaf counts its instances,
        // with no work, as its hooks would.
        let (with, without) = (run(&[], "enabled=0"), run(&env, "enabled=0"));
        assert_eq!(all_stats(&with), all_stats(&without), "{level} enabled=0");
        let put = (with.regions.iter()).find(|r| r.name == "put").unwrap();
        let s = HcpaStats::of(put).unwrap().unwrap();
        assert_eq!((s.instances, s.work), (2048, 0), "{level} enabled=0");
    }
}

/// Recursion through the compiler's copies of a function (`tests/c/hcpa/copies.c`: step()
/// inlined into main() and into run(), which step() calls) counts once: the report agrees
/// with the reference model, which reads the source regions from the report its own way,
/// and in the source view the joined function's work is its outer copy's, within the
/// program's (summing the copies counted the nested ones twice).
#[test]
fn recursion_through_inlined_copies_counts_once_in_the_source_view() {
    let work = Work::new();
    for level in ["-O0", "-O2"] {
        let (report, _) = agrees_with_the_reference(&work, "copies.c", &[level, "-g"], &[]);
        let program = report.hcpa().unwrap().work;
        let copies: Vec<_> = (report.regions.iter())
            .filter(|r| r.name == "step" && r.kind == RegionKind::Function)
            .filter_map(|r| Some((r, HcpaStats::of(r).unwrap()?)))
            .collect();
        assert_eq!(copies.len(), 2, "{level}: {copies:?}");
        let in_main = |r: &kage_report::Region| {
            r.parent
                .is_some_and(|p| report.regions[p as usize].name == "main")
        };
        let outer = copies.iter().find(|(r, _)| in_main(r)).unwrap().1.clone();
        let joined = report.by_source();
        let step = (joined.regions.iter())
            .find(|r| r.name == "step" && r.kind == RegionKind::Function)
            .unwrap();
        let s = HcpaStats::of(step).unwrap().unwrap();
        assert_eq!(s.instances, 4, "{level}");
        assert_eq!(s.work, outer.work, "{level}: {s:?} {outer:?}");
        assert!(s.work <= program, "{level}: {} > {program}", s.work);
        assert!(s.coverage <= 1.0, "{level}: {}", s.coverage);
    }
}

/// Every region's statistics are consistent: a critical path no longer than the work, self
/// work no more than the work of its instances, coverage within 0..1.
fn assert_consistent(report: &Report) {
    let hcpa = report.hcpa().unwrap();
    assert!(hcpa.critical_path <= hcpa.work);
    for region in &report.regions {
        if let Some(s) = HcpaStats::of(region).unwrap() {
            assert!(s.critical_path <= s.work, "{region:?}");
            assert!(
                s.self_parallelism >= 1.0 && s.total_parallelism >= 1.0,
                "{region:?}"
            );
            assert!((0.0..=1.0).contains(&s.coverage), "{region:?}");
        }
    }
}

fn hcpa_build(work: &Work, source: &str, flags: &[&str]) -> std::path::PathBuf {
    work.build_with_env(source, flags, &[("KAGE_TOOL", "hcpa")])
}

#[test]
fn threads_fork_exit_longjmp_exceptions_and_signals() {
    let work = Work::new();
    // Threads: each analysed on its own; the four workers' loops are as parallel as their
    // 1000 independent stores.
    let report = work.run_report(&hcpa_build(&work, "threads.c", &["-O2"]), &[], 0);
    assert_consistent(&report);
    assert_eq!(report.threads, 5);
    let worker = func(&report, "worker");
    assert_eq!(hstats(worker).instances, 4);
    let worker_loop = only_loop(&report, worker);
    assert_eq!(hstats(worker_loop).instances, 4);
    assert!(hstats(worker_loop).self_parallelism > 500.0);
    let threads = report.hcpa().unwrap().threads;
    assert!(threads.contains("own"), "{threads}");

    // exit() from inside nested loops: every open region is closed and counted.
    let report = work.run_report(&hcpa_build(&work, "exit_nested.c", &["-O2"]), &[], 3);
    assert_consistent(&report);
    assert_eq!(hstats(func(&report, "deep")).instances, 1);
    assert_eq!(
        hstats(body_of(&report, only_loop(&report, func(&report, "deep")))).instances,
        5
    );

    // longjmp out of a loop, at -O2 and -O0: the pending calls and frames left behind do
    // not disturb what follows.
    for level in ["-O2", "-O0"] {
        let report = work.run_report(&hcpa_build(&work, "longjmp.c", &[level]), &[], 0);
        assert_consistent(&report);
        let jumper = func(&report, "jumper");
        assert_eq!(
            hstats(body_of(&report, only_loop(&report, jumper))).instances,
            3
        );
        assert_eq!(hstats(func(&report, "after")).instances, 1);
    }

    // A C++ exception through regions.
    let report = work.run_report(&hcpa_build(&work, "exception.cpp", &["-O2"]), &[], 0);
    assert_consistent(&report);
    let looper = func(&report, "looper");
    assert_eq!(
        hstats(body_of(&report, only_loop(&report, looper))).instances,
        4
    );
    assert_eq!(hstats(func(&report, "thrower")).instances, 4);

    // fork: the child writes its own report (in a directory of their own).
    let forking = Work::new();
    let exe = hcpa_build(&forking, "fork.c", &["-O2"]);
    let (parent_pid, parent, child) = forking.run_forking(&exe);
    assert_consistent(&parent);
    assert_consistent(&child);
    assert_eq!(child.forked_from, Some(parent_pid));
    assert_eq!(hstats(func(&parent, "fill")).instances, 2);
    assert_eq!(hstats(func(&child, "fill")).instances, 1);

    // A fatal signal: a best-effort report, with the plan.
    let exe = hcpa_build(&work, "segv.c", &["-O2"]);
    let path = work.path("segv.json");
    let out = work.run_with_options(&exe, &[], &format!("output={}", path.display()));
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(11)
    );
    let report = kage_report::read_report(&path).unwrap();
    assert!(!report.complete);
    assert_consistent(&report);
    assert_eq!(hstats(func(&report, "crash")).instances, 1);
    assert!(report.hcpa_plan().unwrap().is_some());
}

#[test]
fn the_build_can_change_the_costs() {
    // A load costing 8 instead of 4: each independent iteration's critical path (load,
    // multiply-add, store) is 8 + 5 + 1 = 14 instead of 10, and its work 12 + 4 = 16.
    let work = Work::new();
    let report = build_and_run(
        &work,
        "kernels.c",
        &["-O2", "-g"],
        &[("KAGE_HCPA_COSTS", "load=8")],
    );
    let (_, independent) = loop_at(&report, "independent", 16);
    assert_eq!((independent.critical_path, independent.work), (14, 16000));
    assert_eq!(independent.self_parallelism, 1000.0);
}
