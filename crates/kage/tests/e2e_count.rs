//! The `count` tool on `tests/c/counts.c`, checked exactly at -O2 and -O0.
//!
//! The numbers are derived by hand from the source (see the comments); a change in the
//! pass, the runtime or the tool that miscounts by one access fails here.

mod e2e_support;
use e2e_support::*;
use kage_report::{read_report, Counters, RegionKind};

#[test]
fn counts_are_exact_at_o2() {
    let work = Work::new();
    let exe = work.build("counts.c", &["-O2"]);
    let report = work.run_report(&exe, &[], 0);
    assert_eq!(report.tool, "count");
    assert!(report.complete);
    assert_totals_consistent(&report);

    // fill(100): one 4-byte volatile store per iteration; the loop is rotated at -O2, so its
    // header runs once per iteration: 100 body instances.
    let fill = func(&report, "fill");
    assert!(fill.file.ends_with("tests/c/counts.c"), "{}", fill.file);
    let fill_loop = only_loop(&report, fill);
    assert_counts(fill, 1, c(0, 100, 0, 400), c(0, 0, 0, 0));
    assert_counts(fill_loop, 1, c(0, 100, 0, 400), c(0, 0, 0, 0));
    assert_counts(
        body_of(&report, fill_loop),
        100,
        c(0, 100, 0, 400),
        c(0, 100, 0, 400),
    );
    assert!(fill_loop.line > fill.line && fill_loop.line <= fill.end_line);

    // sum(100): one 4-byte volatile load per iteration; s stays in a register.
    let sum = func(&report, "sum");
    let sum_loop = only_loop(&report, sum);
    assert_counts(sum, 1, c(100, 0, 400, 0), c(0, 0, 0, 0));
    assert_counts(
        body_of(&report, sum_loop),
        100,
        c(100, 0, 400, 0),
        c(100, 0, 400, 0),
    );

    // nested(3, 4): g[..] += 1 is one load and one store, 12 times.
    let nested = func(&report, "nested");
    let outer = only_loop(&report, nested);
    let outer_body = body_of(&report, outer);
    let inner = only_loop(&report, outer_body);
    let inner_body = body_of(&report, inner);
    assert_counts(nested, 1, c(12, 12, 48, 48), c(0, 0, 0, 0));
    assert_counts(outer, 1, c(12, 12, 48, 48), c(0, 0, 0, 0));
    assert_counts(outer_body, 3, c(12, 12, 48, 48), c(0, 0, 0, 0));
    assert_counts(inner, 3, c(12, 12, 48, 48), c(0, 0, 0, 0));
    assert_counts(inner_body, 12, c(12, 12, 48, 48), c(12, 12, 48, 48));

    // copy(100): memcpy reads 100 and writes 100 bytes, memset writes 100.
    let copy = func(&report, "copy");
    assert_counts(copy, 1, c(1, 2, 100, 200), c(1, 2, 100, 200));

    // atomics(): fetch_add reads and writes 8 bytes; the first compare-exchange succeeds
    // (reads and writes 4), the second fails (reads 4, writes nothing).
    let atomics = func(&report, "atomics");
    assert_counts(atomics, 1, c(3, 2, 16, 12), c(3, 2, 16, 12));

    // vector_sum(): vectorised and unrolled as the optimiser likes, but it reads the 1024
    // ints exactly once.
    let vector_sum = stats(func(&report, "vector_sum"));
    assert_eq!(vector_sum.inclusive.bytes_read, 4096);
    assert_eq!(vector_sum.inclusive.stores, 0);
    assert!(
        vector_sum.inclusive.loads >= 1 && vector_sum.inclusive.loads < 1024,
        "{vector_sum:?}"
    );
    let v = vector_sum.inclusive.loads;

    // main: two 8-byte stores to `sink` of its own, everything else in its callees.
    let main = func(&report, "main");
    assert_counts(main, 1, c(116 + v, 118, 4660, 676), c(0, 2, 0, 16));
    assert_eq!(report.count_totals(), Some(stats(main).inclusive));
}

#[test]
fn counts_are_exact_at_o0() {
    let work = Work::new();
    let exe = work.build("counts.c", &["-O0"]);
    let report = work.run_report(&exe, &[], 0);
    assert_totals_consistent(&report);

    // At -O0 every parameter is spilled and every read of a local is a load. The loop's
    // header is the condition block, which runs n + 1 times per loop entry.
    //
    // fill(n): entry stores n and i = 0. Per iteration: condition loads i and n, body loads i
    // twice (value and index) and stores g[i], increment loads and stores i. The last
    // condition check loads i and n once more.
    let n = 100;
    let fill = func(&report, "fill");
    let fill_loop = only_loop(&report, fill);
    let loop_loads = 5 * n + 2;
    let loop_stores = 2 * n;
    assert_counts(
        fill,
        1,
        c(
            loop_loads,
            loop_stores + 2,
            4 * loop_loads,
            4 * (loop_stores + 2),
        ),
        c(0, 2, 0, 8),
    );
    assert_counts(
        fill_loop,
        1,
        c(loop_loads, loop_stores, 4 * loop_loads, 4 * loop_stores),
        c(0, 0, 0, 0),
    );
    assert_counts(
        body_of(&report, fill_loop),
        n + 1,
        c(loop_loads, loop_stores, 4 * loop_loads, 4 * loop_stores),
        c(loop_loads, loop_stores, 4 * loop_loads, 4 * loop_stores),
    );

    // sum(n): entry stores n (4 bytes), s (8) and i (4). Per iteration: condition loads i
    // and n (4 + 4), body loads i (4), g[i] (4) and s (8) and stores s (8), increment loads
    // and stores i (4). Last condition: 8 bytes. Return loads s (8).
    let sum = func(&report, "sum");
    let sum_loop = only_loop(&report, sum);
    let body_loads = 2 * (n + 1) + 3 * n + n;
    let body_read = 8 * (n + 1) + 16 * n + 4 * n;
    let body_stores = 2 * n;
    let body_written = 12 * n;
    assert_counts(
        sum,
        1,
        c(
            body_loads + 1,
            body_stores + 3,
            body_read + 8,
            body_written + 16,
        ),
        c(1, 3, 8, 16),
    );
    assert_counts(
        body_of(&report, sum_loop),
        n + 1,
        c(body_loads, body_stores, body_read, body_written),
        c(body_loads, body_stores, body_read, body_written),
    );

    // nested(3, 4), every access 4 bytes. Inner loop, per entry: condition 2 loads x 5,
    // body loads r, cols, c and g and stores g (x 4), increment loads and stores c (x 4):
    // 30 loads, 8 stores; 3 entries. Outer loop adds: condition 2 loads x 4, body stores
    // c = 0 (x 3), increment loads and stores r (x 3). Entry stores rows, cols, r = 0.
    let nested = func(&report, "nested");
    let outer = only_loop(&report, nested);
    let outer_body = body_of(&report, outer);
    let inner = only_loop(&report, outer_body);
    let inner_body = body_of(&report, inner);
    assert_counts(inner_body, 15, c(90, 24, 360, 96), c(90, 24, 360, 96));
    assert_counts(inner, 3, c(90, 24, 360, 96), c(0, 0, 0, 0));
    assert_counts(outer_body, 4, c(101, 30, 404, 120), c(11, 6, 44, 24));
    assert_counts(outer, 1, c(101, 30, 404, 120), c(0, 0, 0, 0));
    assert_counts(nested, 1, c(101, 33, 404, 132), c(0, 3, 0, 12));

    // copy(n): entry stores n; memcpy loads n and reads 100 bytes, writes 100; memset loads
    // n and writes 100.
    let copy = func(&report, "copy");
    assert_counts(copy, 1, c(3, 3, 108, 204), c(3, 3, 108, 204));
}

/// `tests/c/count_reset.c`: `kage_reset` in the middle of a function, in the count build
/// (where a thread applies it at its next function entry) and the count-calls build.
#[test]
fn every_lane_of_a_masked_vector_access_is_an_access_of_its_own() {
    // tests/c/vector/masked.c: each function makes one masked load or store of 8 doubles,
    // called with 2, 8 and 0 lanes on: 10 accesses of 8 bytes, nothing else (no stack
    // traffic from -O1 on).
    let work = Work::new();
    for level in ["-O1", "-O2", "-O3"] {
        for exe in [
            work.build("vector/masked.c", &[level]),
            work.build_for_every_tool("vector/masked.c", &[level]),
        ] {
            let report = work.run_report(&exe, &[], 0);
            assert_totals_consistent(&report);
            for name in ["masked_load", "gather", "expand_load"] {
                assert_counts(func(&report, name), 3, c(10, 0, 80, 0), c(10, 0, 80, 0));
            }
            for name in ["masked_store", "scatter", "compress_store"] {
                assert_counts(func(&report, name), 3, c(0, 10, 0, 80), c(0, 10, 0, 80));
            }
        }
    }
}

#[test]
fn c_library_functions_count_what_they_read_and_write() {
    // tests/c/library/effects.c, whose comment derives each function's bytes. With
    // -fno-builtin every call stays a call; at -O2 the optimiser folds the calls on constant
    // strings (search, strcmp), turns strcpy and strcat's copy into llvm.memcpy, and drops
    // the memcpy that memset overwrites: the same bytes where the calls remain.
    let work = Work::new();
    for exe in [
        work.build("library/effects.c", &["-O2", "-fno-builtin"]),
        work.build_for_every_tool("library/effects.c", &["-O2", "-fno-builtin"]),
    ] {
        let report = work.run_report(&exe, &[], 0);
        assert_totals_consistent(&report);
        for (name, counts) in [
            ("measure", c(1, 0, 13, 0)),
            ("compare", c(4, 0, 41 * 2 + 6 * 2, 0)),
            ("search", c(2, 0, 8 + 13, 0)),
            ("copy", c(2, 3, 13 + 64, 13 + 64 + 100)),
            ("append", c(2, 1, 13 + 3, 3)),
            ("io", c(1, 2, 13, 50 + 20)),
            ("scan", c(5, 1, 5 + 4 + 10 + 4 + 1, 7)),
        ] {
            assert_counts(func(&report, name), 1, counts, counts);
        }
    }
    let report = work.run_report(&work.build("library/effects.c", &["-O2"]), &[], 0);
    for (name, counts) in [
        ("measure", c(1, 0, 13, 0)),
        ("compare", c(2, 0, 41 * 2, 0)),
        ("copy", c(1, 2, 13, 13 + 100)),
        ("append", c(2, 1, 13 + 3, 3)),
        ("io", c(1, 2, 13, 50 + 20)),
    ] {
        assert_counts(func(&report, name), 1, counts, counts);
    }
}

#[test]
fn a_reset_forgets_what_ran_before_and_keeps_the_open_regions() {
    let work = Work::new();
    let inline = work.build("count_reset.c", &["-O2"]);
    let calls = work.build_for_every_tool("count_reset.c", &["-O2"]);
    for exe in [&inline, &calls] {
        let report = work.run_report(exe, &[], 0);
        assert_totals_consistent(&report);
        assert_counts(
            func(&report, "store_one"),
            3,
            c(0, 3, 0, 12),
            c(0, 3, 0, 12),
        );
        assert_counts(
            func(&report, "before_and_after"),
            1,
            c(0, 3, 0, 12),
            c(0, 0, 0, 0),
        );
        assert_counts(func(&report, "main"), 1, c(0, 3, 0, 12), c(0, 0, 0, 0));
        assert_eq!(report.count_totals(), Some(c(0, 3, 0, 12)));
    }
}

/// `tests/c/count_reset_thread.c`: `kage_reset` while another thread waits in the middle of
/// a function: that thread forgets what it did before, at its next function entry.
#[test]
fn a_reset_from_another_thread_applies_at_its_next_entry() {
    let work = Work::new();
    let inline = work.build("count_reset_thread.c", &["-O2", "-pthread"]);
    let calls = work.build_with_env(
        "count_reset_thread.c",
        &["-O2", "-pthread"],
        &[("KAGE_TOOL", "count-calls")],
    );
    for exe in [&inline, &calls] {
        let report = work.run_report(exe, &[], 0);
        assert_totals_consistent(&report);
        assert_counts(
            func(&report, "store_one"),
            3,
            c(0, 3, 0, 12),
            c(0, 3, 0, 12),
        );
        assert_counts(func(&report, "worker"), 1, c(0, 3, 0, 12), c(0, 0, 0, 0));
        // After the reset, main loads `t` for pthread_join.
        assert_counts(func(&report, "main"), 1, c(1, 0, 8, 0), c(1, 0, 8, 0));
        assert_eq!(report.count_totals(), Some(c(1, 3, 8, 12)));
    }
}

/// `tests/c/count_inline.c`: what counting per segment and per loop could get wrong (counts
/// switched off in the middle of a block and around a loop counted in registers, blocks
/// left by `longjmp` and `exit`, a vectorised loop, loops with and without calls, a loop's
/// compare-exchanges, an inlined helper without loops), exact
/// in the count build and equal, region by region, in the count-calls build.
#[test]
fn inline_counts_are_exact_where_blocks_are_left_early_or_counting_switches() {
    let work = Work::new();
    let inline = work.build("count_inline.c", &["-O2"]);
    let calls = work.build_for_every_tool("count_inline.c", &["-O2"]);
    let a = work.run_report(&inline, &[], 0);
    let b = work.run_report(&calls, &[], 0);
    for report in [&a, &b] {
        assert!(report.complete);
        assert_totals_consistent(report);
        // On, off (a store and a loop of 50 stores not counted), on again.
        let switched = func(report, "switched");
        assert_counts(switched, 1, c(1, 2, 4, 8), c(1, 2, 4, 8));
        let switched_loop = only_loop(report, switched);
        assert_eq!(stats(body_of(report, switched_loop)).instances, 50);
        // longjmp leaves jumper's block after its store; jumps stores once more after.
        assert_counts(func(report, "jumper"), 1, c(0, 1, 0, 4), c(0, 1, 0, 4));
        assert_counts(func(report, "jumps"), 1, c(0, 2, 0, 8), c(0, 1, 0, 4));
        // Vector body and remainder: every byte read once.
        let split = stats(func(report, "split"));
        assert_eq!(
            (split.inclusive.bytes_read, split.inclusive.stores),
            (4012, 0)
        );
        // A loop in registers, then one calling a function 100 times.
        let spin = func(report, "spin_then_call");
        assert_counts(spin, 1, c(100, 200, 400, 800), c(0, 0, 0, 0));
        assert_counts(
            func(report, "callee"),
            100,
            c(0, 100, 0, 400),
            c(0, 100, 0, 400),
        );
        // The compare-exchanges are the loop body's.
        let cas = func(report, "cas_loop");
        assert_counts(cas, 1, c(10, 10, 40, 40), c(0, 0, 0, 0));
        let cas_body = stats(body_of(report, only_loop(report, cas)));
        assert_eq!(
            (cas_body.instances, cas_body.exclusive),
            (10, c(10, 10, 40, 40))
        );
        // The inlined helper (its code may sit at several places, each a region): its
        // instances and its loads, apart from its caller's store.
        let mut pick = (0, Counters::default(), Counters::default());
        for r in report.regions.iter().filter(|r| r.name == "pick") {
            let s = stats(r);
            pick.0 += s.instances;
            pick.1.add(&s.inclusive);
            pick.2.add(&s.exclusive);
        }
        assert_eq!(pick, (100, c(200, 0, 800, 0), c(200, 0, 800, 0)));
        assert_counts(
            func(report, "calls_pick"),
            1,
            c(200, 1, 800, 4),
            c(0, 1, 0, 4),
        );
        // An inlined helper with a loop: 100 calls, 250 probes, apart from the caller's
        // store.
        let probe = (report.regions.iter())
            .filter(|r| r.name == "probe" && r.kind == RegionKind::Function)
            .fold((0, Counters::default()), |(n, mut incl), r| {
                incl.add(&stats(r).inclusive);
                (n + stats(r).instances, incl)
            });
        assert_eq!(probe, (100, c(250, 0, 1000, 0)));
        let probe_bodies: u64 = (report.regions.iter())
            .filter(|r| r.name == "probe" && r.kind == RegionKind::LoopBody)
            .map(|r| stats(r).instances)
            .sum();
        assert_eq!(probe_bodies, 250);
        assert_counts(func(report, "probes"), 1, c(250, 1, 1000, 4), c(0, 1, 0, 4));
        // A function without calls, with a loop: 100 calls, 250 loads and 100 stores.
        let leaf = func(report, "leaf_sum");
        assert_counts(leaf, 100, c(250, 100, 1000, 400), c(0, 100, 0, 400));
        assert_eq!(
            stats(body_of(report, only_loop(report, leaf))).instances,
            250
        );
        assert_counts(
            func(report, "calls_leaves"),
            1,
            c(250, 100, 1000, 400),
            c(0, 0, 0, 0),
        );
        // Deferred entries: 100 loads, and every tenth call a store and rare_callee's.
        assert_counts(
            func(report, "rarely_calls"),
            100,
            c(100, 20, 400, 80),
            c(100, 10, 400, 40),
        );
        assert_counts(
            func(report, "calls_rarely"),
            1,
            c(100, 21, 400, 84),
            c(0, 1, 0, 4),
        );
        // descend(3): 4 instances, 4 loads, 3 stores; recursion counts once.
        assert_counts(func(report, "descend"), 4, c(4, 3, 16, 12), c(4, 3, 16, 12));
        // sum_then_maybe_call(1..=4): 1 + 2 + 3 + 4 loads in its loop; sums 0, 1, 3, 6 make
        // two calls of rare_callee (12 in all).
        let summed = func(report, "sum_then_maybe_call");
        assert_counts(summed, 4, c(10, 2, 40, 8), c(0, 0, 0, 0));
        assert_eq!(
            stats(body_of(report, only_loop(report, summed))).instances,
            10
        );
        assert_counts(func(report, "sums"), 1, c(10, 3, 40, 12), c(0, 1, 0, 4));
        assert_counts(
            func(report, "rare_callee"),
            12,
            c(0, 12, 0, 48),
            c(0, 12, 0, 48),
        );
        // The same inlined (deferred regions): 100 instances of inl_rarely, 100 loads, and
        // every tenth a store and rare_callee2's; descend_inl(3) through the inlined step:
        // recursion counts once (step's inclusive counts are its outermost instance's: all
        // but the outermost descend_inl's own load).
        let sum_of = |name: &str| {
            (report.regions.iter())
                .filter(|r| r.name == name && r.kind == RegionKind::Function)
                .fold(
                    (0, Counters::default(), Counters::default()),
                    |(n, mut i, mut e), r| {
                        i.add(&stats(r).inclusive);
                        e.add(&stats(r).exclusive);
                        (n + stats(r).instances, i, e)
                    },
                )
        };
        assert_eq!(
            sum_of("inl_rarely"),
            (100, c(100, 20, 400, 80), c(100, 10, 400, 40))
        );
        assert_counts(
            func(report, "calls_inl_rarely"),
            1,
            c(100, 21, 400, 84),
            c(0, 1, 0, 4),
        );
        assert_eq!(sum_of("step"), (4, c(7, 3, 28, 12), c(4, 3, 16, 12)));
        assert_counts(
            func(report, "descend_inl"),
            4,
            c(8, 3, 32, 12),
            c(4, 0, 16, 0),
        );
        // exit() leaves the block after both stores.
        assert_counts(
            func(report, "leaves_by_exit"),
            1,
            c(0, 2, 0, 8),
            c(0, 2, 0, 8),
        );
    }
    assert_eq!(a.count_totals(), b.count_totals());
    assert_eq!(a.regions.len(), b.regions.len());
    for (x, y) in a.regions.iter().zip(&b.regions) {
        assert_eq!((&x.name, x.line), (&y.name, y.line));
        assert_eq!(stats(x), stats(y), "{} line {}", x.name, x.line);
    }
}

#[test]
fn deferred_regions_count_as_a_call_per_access_on_random_paths() {
    let helpers = [
        "inner",
        "middle",
        "scan",
        "early",
        "rec_step",
        "switching",
        "sink",
    ];
    inline_counts_equal_a_call_per_access("count_deferred.c", &helpers);
}

#[test]
fn trees_that_wait_across_iterations_count_as_a_call_per_access() {
    inline_counts_equal_a_call_per_access("count_waiting.c", &["load2", "store1", "exec"]);
}

#[test]
fn regions_changed_by_the_runtime_at_a_computed_goto_count_as_a_call_per_access() {
    inline_counts_equal_a_call_per_access("count_arrive.c", &["load2"]);
}

#[test]
fn calls_of_library_functions_that_return_without_callbacks_count_as_a_call_per_access() {
    inline_counts_equal_a_call_per_access("count_library.c", &["same", "copied_length"]);
}

#[test]
fn deferred_regions_where_exceptions_land_count_as_a_call_per_access() {
    inline_counts_equal_a_call_per_access(
        "count_exceptions.cpp",
        &["step(int, bool)", "guarded(int)", "Guard::~Guard()"],
    );
}

#[test]
fn blocks_that_share_a_counter_count_as_a_call_per_access() {
    inline_counts_equal_a_call_per_access(
        "count_classes.c",
        &["node_value", "node_set", "get", "put", "row_sum"],
    );
}

/// The inline count build of `source` and its per-access build agree region by region at
/// -O2 and -O3, and each of `helpers` (inlined functions) ran more than 100 times.
fn inline_counts_equal_a_call_per_access(source: &str, helpers: &[&str]) {
    let work = Work::new();
    for level in ["-O2", "-O3"] {
        let inline = work.build(source, &[level]);
        let calls = work.build_for_every_tool(source, &[level]);
        let run = |exe: &std::path::Path| {
            let path = work.path("deferred.json");
            let _ = std::fs::remove_file(&path);
            let out = work.run_with_options(exe, &[], &format!("output={}", path.display()));
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            (
                out.stdout,
                read_report(&path).unwrap_or_else(|e| panic!("{e}")),
            )
        };
        let (a_out, a) = run(&inline);
        let (b_out, b) = run(&calls);
        // The same program output, the same counts in every region.
        assert_eq!(a_out, b_out);
        assert_totals_consistent(&a);
        assert_eq!(a.count_totals(), b.count_totals(), "{level}");
        assert_eq!(a.regions.len(), b.regions.len());
        for (x, y) in a.regions.iter().zip(&b.regions) {
            assert_eq!((&x.name, x.line), (&y.name, y.line));
            assert_eq!(stats(x), stats(y), "{level}: {} line {}", x.name, x.line);
        }
        // The helpers ran as regions of their own, on both kinds of paths.
        let instances = |name: &str| -> u64 {
            (a.regions.iter())
                .filter(|r| r.name == name && r.kind == RegionKind::Function)
                .map(|r| stats(r).instances)
                .sum()
        };
        for helper in helpers {
            assert!(instances(helper) > 100, "{level}: {helper}");
        }
    }
}
