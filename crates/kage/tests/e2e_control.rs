//! Reports stay complete and exact when control leaves regions the unusual ways: threads,
//! fork, exit() from deep inside, longjmp out of a loop, a C++ exception, a fatal signal.

mod e2e_support;
use e2e_support::*;
use kage_report::{read_report, ProgramEnd};
use std::os::unix::process::ExitStatusExt;

#[test]
fn threads_each_have_their_own_region_stack() {
    let work = Work::new();
    let exe = work.build("threads.c", &["-O2"]);
    let report = work.run_report(&exe, &[], 0);
    assert_totals_consistent(&report);
    assert_eq!(report.threads, 5, "main and four workers");
    let worker = func(&report, "worker");
    let worker_loop = only_loop(&report, worker);
    assert_counts(worker, 4, c(0, 4000, 0, 16000), c(0, 0, 0, 0));
    assert_counts(
        body_of(&report, worker_loop),
        4000,
        c(0, 4000, 0, 16000),
        c(0, 4000, 0, 16000),
    );
    // main only reads the four thread handles when joining; the workers' stores are theirs.
    let main = func(&report, "main");
    assert_counts(main, 1, c(4, 0, 32, 0), c(0, 0, 0, 0));
    let loops = loops_in(&report, main);
    assert_eq!(loops.len(), 2);
    assert_eq!(stats(body_of(&report, loops[0])).instances, 4);
    assert_eq!(stats(body_of(&report, loops[1])).instances, 4);
}

#[test]
fn a_forked_child_writes_its_own_report() {
    let work = Work::new();
    let exe = work.build("fork.c", &["-O2"]);
    let (parent_pid, parent, child) = work.run_forking(&exe);
    assert_eq!(parent.forked_from, None);
    assert_counts(func(&parent, "fill"), 2, c(0, 30, 0, 120), c(0, 0, 0, 0));
    assert_counts(func(&parent, "main"), 1, c(0, 30, 0, 120), c(0, 0, 0, 0));

    assert_eq!(child.forked_from, Some(parent_pid));
    assert_ne!(child.pid, parent_pid);
    // The child's report covers what the child did after the fork.
    assert_counts(func(&child, "fill"), 1, c(0, 7, 0, 28), c(0, 0, 0, 0));
    assert_counts(func(&child, "main"), 1, c(0, 7, 0, 28), c(0, 0, 0, 0));
}

#[test]
fn exit_from_a_nested_loop_still_reports_every_open_region() {
    let work = Work::new();
    let exe = work.build("exit_nested.c", &["-O2"]);
    let report = work.run_report(&exe, &[], 3);
    assert_eq!(report.end, ProgramEnd::Exit { code: 3 });
    assert!(report.complete);
    assert_totals_consistent(&report);
    let deep = func(&report, "deep");
    assert_counts(deep, 1, c(0, 5, 0, 20), c(0, 0, 0, 0));
    assert_counts(
        body_of(&report, only_loop(&report, deep)),
        5,
        c(0, 5, 0, 20),
        c(0, 5, 0, 20),
    );
    assert_counts(func(&report, "middle"), 1, c(0, 6, 0, 24), c(0, 1, 0, 4));
    assert_counts(func(&report, "main"), 1, c(0, 7, 0, 28), c(0, 1, 0, 4));
}

#[test]
fn longjmp_out_of_a_loop_repairs_the_region_stack() {
    let work = Work::new();
    let exe = work.build("longjmp.c", &["-O2"]);
    let report = work.run_report(&exe, &[], 0);
    assert_totals_consistent(&report);
    // jumper stores g[0..=2], then jumps out of the third iteration.
    let jumper = func(&report, "jumper");
    assert_counts(jumper, 1, c(0, 3, 0, 12), c(0, 0, 0, 0));
    assert_eq!(
        stats(body_of(&report, only_loop(&report, jumper))).instances,
        3
    );
    assert_counts(func(&report, "after"), 1, c(0, 1, 0, 4), c(0, 1, 0, 4));
    // After the jump, g[600] = 1 belongs to main itself, not to the loop it jumped out of.
    let main = func(&report, "main");
    assert_counts(main, 1, c(0, 8, 0, 32), c(0, 1, 0, 4));
    let main_loop = only_loop(&report, main);
    assert_counts(main_loop, 1, c(0, 3, 0, 12), c(0, 0, 0, 0));
    assert_eq!(stats(body_of(&report, main_loop)).instances, 3);

    // At -O0 jumper also stores n, i = 0 and i++ twice: 7 stores. An eighth would be
    // main's g[600] = 1 charged to the loop that was jumped out of.
    let exe = work.build("longjmp.c", &["-O0"]);
    let report = work.run_report(&exe, &[], 0);
    assert_totals_consistent(&report);
    let jumper = stats(func(&report, "jumper"));
    assert_eq!(
        (jumper.inclusive.stores, jumper.inclusive.bytes_written),
        (7, 28)
    );
    assert_eq!(stats(func(&report, "after")).inclusive, c(0, 1, 0, 4));
}

#[test]
fn a_cxx_exception_crossing_regions_repairs_the_region_stack() {
    let work = Work::new();
    let exe = work.build("exception.cpp", &["-O2"]);
    let report = work.run_report(&exe, &[], 0);
    assert_totals_consistent(&report);
    let thrower = func(&report, "thrower");
    assert_eq!(thrower.name, "thrower(int)", "C++ names are demangled");
    // Four stores to g, and the fourth call stores 42 into the exception object it throws.
    assert_counts(thrower, 4, c(0, 5, 0, 20), c(0, 5, 0, 20));
    let looper = func(&report, "looper");
    assert_counts(looper, 1, c(0, 5, 0, 20), c(0, 0, 0, 0));
    assert_eq!(
        stats(body_of(&report, only_loop(&report, looper))).instances,
        4
    );
    assert_counts(func(&report, "after"), 1, c(0, 1, 0, 4), c(0, 1, 0, 4));
    // g[900] in the handler and g[901] after it are main's own.
    assert_counts(func(&report, "main"), 1, c(0, 8, 0, 32), c(0, 2, 0, 8));
}

#[test]
fn a_fatal_signal_leaves_a_best_effort_report() {
    let report = report_of_a_segfault("segv.c");
    assert!(!report.complete);
    // main's loop is counted (its instance was reported when it exited). crash calls
    // nothing, so the count build keeps its instance and accesses in locals until it
    // returns: the fault loses the accesses, and the report counts an instance of the
    // function the thread was running (docs/abi.md, "Regions counted in locals").
    assert_counts(func(&report, "crash"), 1, c(0, 0, 0, 0), c(0, 0, 0, 0));
    assert_counts(func(&report, "main"), 1, c(0, 5, 0, 20), c(0, 0, 0, 0));
}

/// A fault inside a loop kept in locals: the report names the loop, with one instance of it
/// and of its body (the iterations before the fault were in locals).
#[test]
fn a_fatal_signal_in_a_loop_kept_in_locals_names_the_loop() {
    let report = report_of_a_segfault("segv_loop.c");
    let walk = func(&report, "walk");
    let lp = only_loop(&report, walk);
    assert_eq!(stats(lp).instances, 1);
    assert_eq!(stats(body_of(&report, lp)).instances, 1);
    // touch's store, made before the loop, is walk's.
    assert_counts(walk, 1, c(0, 1, 0, 4), c(0, 0, 0, 0));
}

/// Builds `source` (which dies of SIGSEGV) at -O2, runs it, and reads its report.
fn report_of_a_segfault(source: &str) -> kage_report::Report {
    let work = Work::new();
    let exe = work.build(source, &["-O2"]);
    let report_path = work.path("report.json");
    let out = work.run_with_options(&exe, &[], &format!("output={}", report_path.display()));
    assert_eq!(out.status.signal(), Some(SIGSEGV), "{:?}", out.status);
    let report = read_report(&report_path).unwrap();
    assert_eq!(report.end, ProgramEnd::Signal { signal: SIGSEGV });
    report
}

const SIGSEGV: i32 = 11;
