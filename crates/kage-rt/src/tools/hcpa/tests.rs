//! The hcpa tool's tests: scenarios whose numbers are derived by hand from docs/hcpa.md
//! (each test says how), the tool's statistics and report fields, and a randomized
//! differential test of the engine against a naive model of the definition.

use super::engine::{Engine, EngineConfig, InstanceStats, Lanes, LevelKind, MAX_ARGS, MAX_SLOTS};
use super::*;
use kage_abi::{Candidate, NONE};
use kage_vsm::VsmKind;
use std::collections::HashMap;
use LevelKind::{Function as Func, Nested};

fn engine(max_depth: usize, granule_shift: u32) -> Engine {
    Engine::new(EngineConfig {
        max_depth,
        granule_shift,
        vsm: VsmKind::Gc,
        share_lanes: true,
    })
}

/// A candidate: slot `slot`'s time plus `offset`.
fn c(slot: u32, offset: u32) -> Candidate {
    Candidate { slot, offset }
}

/// A constant: time 0 plus `offset`.
fn k(offset: u32) -> Candidate {
    c(NONE, offset)
}

const A: u64 = 0x1000;

/// `for (i = 0; i < 8; i++) a[i] = a[i] + 1;`: each iteration loads a[i] (cost 4), adds
/// (1) and stores (1), independently of the others. Body: work 6, cp 6. Loop: work 48, and
/// every iteration's chain starts at time 0 at the loop's level too (a[i] was never
/// stored), so cp 6; self-work 0, Σ cp(children) = 48: SP = 48 / 6 = 8, the trip count.
#[test]
fn independent_iterations_make_a_loop_as_parallel_as_its_trip_count() {
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.frame(2, 0x10);
    e.enter(1, Nested);
    for i in 0..8 {
        e.enter(2, Nested);
        e.work(6);
        e.load(0, A + 4 * i, 4, 4, &[]);
        e.ts(1, &[c(0, 1)]);
        e.store(A + 4 * i, 4, 1, &[c(1, 0)]);
        assert_eq!(e.last_time(), [6, 6, 6]);
        let body = e.exit().unwrap();
        assert_eq!((body.work, body.critical_path, body.self_work()), (6, 6, 6));
        assert_eq!(body.self_parallelism(), 1.0);
        assert_eq!((body.parent, body.depth), (Some(1), 2));
    }
    let lp = e.exit().unwrap();
    assert_eq!(
        (lp.work, lp.critical_path, lp.self_work(), lp.children_cp),
        (48, 6, 0, 48)
    );
    assert_eq!(lp.self_parallelism(), 8.0);
    // main: its one child already holds the parallelism: SP 1, total parallelism 8.
    let main = e.exit().unwrap();
    assert_eq!((main.work, main.critical_path, main.parent), (48, 6, None));
    assert_eq!(main.self_parallelism(), 1.0);
}

/// `for (i = 1; i <= 8; i++) a[i] = a[i - 1] + 1;`: iteration i loads what i − 1 stored. At
/// the loop's level the chain grows by 6 per iteration (load 4, add 1, store 1): cp 48 =
/// work, SP (0 + 8 × 6) / 48 = 1. At the body's level a[i − 1] was stored in an earlier
/// instance and reads 0: each body's cp is 6.
#[test]
fn a_chain_through_memory_serialises_its_loop() {
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.frame(2, 0x10);
    e.enter(1, Nested);
    for i in 1..=8u64 {
        e.enter(2, Nested);
        e.work(6);
        e.load(0, A + 4 * (i - 1), 4, 4, &[]);
        e.ts(1, &[c(0, 1)]);
        e.store(A + 4 * i, 4, 1, &[c(1, 0)]);
        assert_eq!(e.last_time(), [6 * i, 6 * i, 6]);
        assert_eq!(e.exit().unwrap().critical_path, 6);
    }
    let lp = e.exit().unwrap();
    assert_eq!((lp.work, lp.critical_path), (48, 48));
    assert_eq!(lp.self_parallelism(), 1.0);
}

/// `s = 0; for (i = 0; i < 8; i++) s += x[i];` with slots p (the header phi), x (the load)
/// and next. The reduction rule `t(next) = max(t(p), t(x) + 2)` (fadd) keeps the loop's
/// cp at 6 (load 4 + fadd 2): at the loop's level next is 6 in every iteration; SP = 48 / 6
/// = 8. Written as a plain chain, `t(next) = max(t(p) + 2, t(x) + 2)`, iteration k ends at
/// 6 + 2k: cp 20, SP 48 / 20.
#[test]
fn a_reduction_under_the_reduction_rule_is_parallel() {
    for (reduction, cp, sp) in [(true, 6, 8.0), (false, 20, 2.4)] {
        let (p, x, next) = (0, 1, 2);
        let mut e = engine(64, 2);
        e.enter(0, Func);
        e.frame(3, 0x10);
        e.enter(1, Nested);
        for i in 0..8 {
            e.enter(2, Nested);
            // The header phi: from the preheader the constant 0, from the latch `next`.
            e.phi(p, if i == 0 { NONE } else { next }, 0, NONE);
            e.work(6);
            e.load(x, A + 4 * i, 4, 4, &[]);
            let from_p = if reduction { 0 } else { 2 };
            e.ts(next, &[c(p, from_p), c(x, 2)]);
            assert_eq!(e.exit().unwrap().critical_path, 6, "reduction {reduction}");
        }
        let lp = e.exit().unwrap();
        assert_eq!(
            (lp.work, lp.critical_path),
            (48, cp),
            "reduction {reduction}"
        );
        assert_eq!(lp.self_parallelism(), sp, "reduction {reduction}");
        // The sum is available when its last input is.
        e.ts(NONE, &[c(next, 0)]);
        assert_eq!(e.last_time(), [cp]);
    }
}

/// `for (i = 0; i < 8; i++) a[i] = a[i + 1] + 1;` after a loop that stored a[0..=8] (time 1
/// at main's level): iteration i + 1 stores a[i + 1] after iteration i read it, an
/// anti-dependence, which does not count. At the loop's level every load reads a value
/// stored before the loop started (0): cp 6, SP 8. At main's level it carries the first
/// loop's time: 1 + 4 + 1 + 1 = 7.
#[test]
fn an_anti_dependence_alone_leaves_a_loop_parallel() {
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.frame(2, 0x10);
    e.enter(1, Nested);
    for i in 0..=8 {
        e.enter(2, Nested);
        e.work(1);
        e.store(A + 4 * i, 4, 1, &[]);
        e.exit();
    }
    e.exit();
    e.enter(3, Nested);
    for i in 0..8 {
        e.enter(4, Nested);
        e.work(6);
        e.load(0, A + 4 * (i + 1), 4, 4, &[]);
        e.ts(1, &[c(0, 1)]);
        e.store(A + 4 * i, 4, 1, &[c(1, 0)]);
        assert_eq!(e.last_time(), [7, 6, 6]);
        e.exit();
    }
    let lp = e.exit().unwrap();
    assert_eq!((lp.work, lp.critical_path), (48, 6));
    assert_eq!(lp.self_parallelism(), 8.0);
}

/// A slot written in one iteration, read in the next: at the body's level it was produced
/// before the instance (0 + 1), at the loop's and the function's it keeps its time (5 + 1).
#[test]
fn a_slot_from_the_previous_iteration_reads_zero_at_the_body_level_only() {
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.frame(2, 0x10);
    e.enter(1, Nested);
    e.enter(2, Nested);
    e.ts(0, &[k(5)]);
    assert_eq!(e.last_time(), [5, 5, 5]);
    e.exit();
    e.enter(2, Nested);
    e.ts(1, &[c(0, 1)]);
    assert_eq!(e.last_time(), [6, 6, 1]);
    assert_eq!(e.exit().unwrap().critical_path, 1);
    assert_eq!(e.exit().unwrap().critical_path, 6);
    // After the loop, the function still sees both.
    e.ts(NONE, &[c(0, 0), c(1, 0)]);
    assert_eq!(e.last_time(), [6]);
}

/// `y = g(x + 1)` with `x` at time 7: the argument has time 8 at main's level and reads 0 at
/// g's own. g computes `arg + 3` (main: 11, g: 3) and returns it + 2 (main: 13, g: 5): g's
/// cp is 5 (not 13: the argument was produced before g started). The result has the
/// returned time at main's level, 13, and the call to instrumented code is free.
#[test]
fn argument_and_return_times_cross_a_call() {
    let g = 0x200;
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.frame(3, 0x100);
    e.ts(0, &[k(7)]);
    e.call(g);
    e.arg(0, &[c(0, 1)]);
    assert_eq!(e.last_time(), [8]);
    e.enter(1, Func);
    e.frame(2, g);
    e.work(5);
    e.ts(1, &[c(0, 3)]);
    assert_eq!(e.last_time(), [11, 3]);
    e.ret(&[c(1, 2)]);
    assert_eq!(e.last_time(), [13, 5]);
    let callee = e.exit().unwrap();
    assert_eq!((callee.work, callee.critical_path), (5, 5));
    e.result(1, 10);
    assert_eq!(e.last_time(), [13]);
    assert_eq!(e.clock(), 5, "no call cost: g is instrumented");
    // The caller's frame is back: slot 0 still holds x.
    e.ts(2, &[c(1, 0), c(0, 0)]);
    assert_eq!(e.last_time(), [13]);
    let main = e.exit().unwrap();
    assert_eq!(
        (main.work, main.critical_path, main.children_cp),
        (5, 13, 5)
    );
}

/// `n = strlen(s)` with `s` at time 7: no instrumented function takes the call, so the
/// result is one instruction over the arguments: 7 + 10 (the call's cost), which is work.
/// A callback (`qsort` calling the instrumented `cmp`) is not taken for the call either:
/// `cmp`'s argument slots read 0, its return goes nowhere, and `qsort`'s result is its
/// arguments' time + 10.
#[test]
fn calls_to_code_that_is_not_instrumented() {
    let (strlen, qsort, cmp) = (0x300, 0x400, 0x500);
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.frame(4, 0x100);
    e.ts(0, &[k(7)]);
    e.call(strlen);
    e.arg(0, &[c(0, 0)]);
    e.result(1, 10);
    assert_eq!(e.last_time(), [17]);
    assert_eq!(e.clock(), 10);
    e.call(qsort);
    e.arg(0, &[c(1, 0)]);
    e.arg(2, &[c(0, 0)]);
    e.enter(1, Func);
    e.frame(2, cmp);
    e.ts(1, &[c(0, 4)]);
    assert_eq!(
        e.last_time(),
        [4, 4],
        "cmp's argument was not passed: 0 + 4"
    );
    e.ret(&[c(1, 0)]);
    e.exit();
    e.result(2, 10);
    assert_eq!(e.last_time(), [27]);
    assert_eq!(e.clock(), 20);
    // A result without any call: an instruction of its own cost.
    e.result(3, 10);
    assert_eq!(e.last_time(), [10]);
    assert_eq!(e.exit().unwrap().work, 30);
}

/// `longjmp` out of g's callee h back into main: the calls to g and h stay pending until
/// main's next result at its own depth, which closes main's call (taken by g, which never
/// returned: the arguments' time, no cost) and drops h's.
#[test]
fn a_result_closes_calls_left_pending_deeper() {
    let (g, h) = (0x200, 0x300);
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.frame(2, 0x100);
    e.call(g);
    e.arg(0, &[k(3)]);
    e.enter(1, Func);
    e.frame(1, g);
    e.call(h);
    e.enter(2, Func);
    e.frame(1, h);
    e.exit();
    e.exit();
    e.result(0, 10);
    assert_eq!(e.last_time(), [3]);
    assert_eq!(e.clock(), 0);
    // Nothing is left pending: the next call is taken by its callee.
    e.call(g);
    e.arg(0, &[k(9)]);
    e.enter(1, Func);
    e.frame(1, g);
    e.ts(NONE, &[c(0, 0)]);
    assert_eq!(e.last_time(), [9, 0]);
}

/// `max_depth=2`: main and its loop are analysed; the body and a function it calls are
/// not (no statistics, counted as skipped), yet their times and work still reach the two
/// outer levels, arguments included.
#[test]
fn levels_deeper_than_max_depth_are_skipped_but_feed_the_outer_ones() {
    let g = 0x200;
    let mut e = engine(2, 2);
    assert!(e.enter(0, Func));
    e.frame(2, 0x100);
    assert!(e.enter(1, Nested));
    assert!(!e.enter(2, Nested));
    e.work(4);
    e.ts(0, &[k(5)]);
    assert_eq!(e.last_time(), [5, 5]);
    e.call(g);
    e.arg(0, &[c(0, 1)]);
    assert!(!e.enter(3, Func));
    e.frame(1, g);
    e.work(3);
    e.ts(0, &[c(0, 3)]);
    assert_eq!(e.last_time(), [9, 9]);
    e.ret(&[c(0, 0)]);
    assert_eq!(e.exit(), None);
    e.result(1, 10);
    assert_eq!(e.last_time(), [9, 9]);
    assert_eq!(e.exit(), None);
    assert_eq!(e.skipped(), 2);
    let lp = e.exit().unwrap();
    // The skipped body is no child: its work is the loop's own.
    assert_eq!(
        (lp.work, lp.critical_path, lp.self_work(), lp.children_cp),
        (7, 9, 7, 0)
    );
    assert_eq!(e.exit().unwrap().work, 7);
}

/// A load depends on the last store to any byte of the granules it touches: with 4-byte
/// granules a byte stored at 0x1001 is seen by a load of 0x1000..0x1004, not 0x1004..;
/// with 8-byte ones by both; with bytes by neither of those but a load of 0x1001 itself.
#[test]
fn granules() {
    for (shift, [lo, hi, same]) in [(2, [15, 4, 15]), (3, [15, 15, 15]), (0, [4, 4, 15])] {
        let mut e = engine(64, shift);
        e.enter(0, Func);
        e.store(A + 1, 1, 1, &[k(10)]);
        e.load(NONE, A, 1, 4, &[]);
        assert_eq!(e.last_time(), [lo], "shift {shift}");
        e.load(NONE, A + 4, 4, 4, &[]);
        assert_eq!(e.last_time(), [hi], "shift {shift}");
        e.load(NONE, A + 1, 1, 4, &[]);
        assert_eq!(e.last_time(), [same], "shift {shift}");
        // A wide load reads the maximum over its granules.
        e.store(A + 64, 4, 1, &[k(20)]);
        e.load(NONE, A + 60, 8, 4, &[]);
        assert_eq!(e.last_time(), [25], "shift {shift}");
    }
}

/// `memcpy(dst, src, 16)` after `src` was stored at time 5: c = 1 × ⌈16 / 8⌉ = 2 is work,
/// and dst's granules get 5 + 2; a load of dst then ends at 11. `memset(dst, 0, 9)` (no
/// source): c = 2, the granules get 2.
#[test]
fn mem_copies_times_and_costs_per_8_bytes() {
    let (src, dst) = (A, A + 0x100);
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.store(src + 12, 4, 1, &[k(4)]);
    e.mem(dst, Some(src), 16, 1, &[]);
    assert_eq!(e.last_time(), [7]);
    assert_eq!(e.clock(), 2);
    e.load(NONE, dst + 12, 4, 4, &[]);
    assert_eq!(e.last_time(), [11]);
    e.load(NONE, dst + 16, 4, 4, &[]);
    assert_eq!(e.last_time(), [4], "beyond the copy");
    e.mem(dst, None, 9, 1, &[k(1)]);
    assert_eq!(e.last_time(), [3]);
    e.load(NONE, dst + 8, 1, 4, &[]);
    assert_eq!(e.last_time(), [7]);
    assert_eq!(e.clock(), 4);
}

/// Bad input is ignored, never a panic: slots beyond the frame, a frame outside every
/// region or at a nested level, a second frame, arguments beyond the limit, exits at
/// depth 0.
#[test]
fn bad_input_is_ignored() {
    let mut e = engine(3, 2);
    e.frame(4, 0x100);
    e.ts(0, &[k(1)]);
    e.result(0, 1);
    assert_eq!(e.exit(), None);
    e.enter(0, Func);
    e.ts(0, &[c(0, 2)]);
    assert_eq!(e.last_time(), [2], "no frame: a slot reads 0");
    e.frame(u32::MAX, 0x100);
    e.frame(2, 0x100);
    e.ts(MAX_SLOTS, &[k(5)]);
    e.ts(NONE - 1, &[c(NONE - 1, 5)]);
    assert_eq!(e.last_time(), [5]);
    e.call(0x200);
    e.arg(MAX_ARGS, &[k(5)]);
    e.arg(u32::MAX, &[k(5)]);
    e.enter(1, Nested);
    e.frame(2, 0x200);
    e.ts(1, &[k(3)]);
    e.exit();
    e.ts(NONE, &[c(1, 0)]);
    assert_eq!(
        e.last_time(),
        [3],
        "the nested level wrote its function's frame"
    );
    for _ in 0..6 {
        e.enter(9, Func);
        e.frame(1, 0);
        e.ts(0, &[k(1)]);
    }
    for _ in 0..10 {
        e.exit();
    }
    assert_eq!(e.depth(), 0);
}

/// A reset: every open level starts anew, and times made before read 0.
#[test]
fn restart_forgets_times_and_statistics() {
    let mut e = engine(64, 2);
    e.enter(0, Func);
    e.frame(1, 0x100);
    e.work(10);
    e.ts(0, &[k(8)]);
    e.store(A, 4, 1, &[k(8)]);
    e.restart();
    e.work(1);
    e.ts(NONE, &[c(0, 1)]);
    assert_eq!(e.last_time(), [1]);
    e.load(NONE, A, 4, 4, &[]);
    assert_eq!(e.last_time(), [4]);
    let main = e.exit().unwrap();
    assert_eq!((main.work, main.critical_path), (1, 4));
}

// ---------------------------------------------------------------------------------------
// The tool: records, report fields, threads, resets, forks.

fn tool(opts: &str) -> &'static HcpaTool {
    tool_with_sources(opts, |region| region)
}

/// A tool whose regions' source regions are `source_of`'s (the registry's are other tests').
fn tool_with_sources(opts: &str, source_of: fn(u32) -> u32) -> &'static HcpaTool {
    let t: &'static HcpaTool = Box::leak(Box::new(HcpaTool {
        source_of,
        ..HcpaTool::new()
    }));
    let (mut opts, w) = Options::parse(opts, &[OPTIONS]);
    assert!(w.is_empty(), "{w:?}");
    t.init(&mut opts, Instrumentations::default());
    t
}

fn engine_of(t: &mut Box<dyn ThreadTool>) -> &mut Engine {
    &mut t
        .as_any_mut()
        .and_then(|a| a.downcast_mut::<HcpaThread>())
        .expect("an hcpa thread")
        .engine
}

fn hcpa(res: &ToolResults, region: usize) -> Value {
    (res.regions)(region)
        .into_map()
        .get("hcpa")
        .cloned()
        .unwrap_or(Value::Null)
}

/// Regions 1 and 2 are copies of one source region (a function inlined in two places): 2
/// runs inside 1 through a call (region 3). Its instance is nested in its source region's,
/// so its work and critical path count in 1's only (every instance still counts), and the
/// copies' sum is the outer instance's work, as for a recursion.
#[test]
fn an_instance_inside_another_copy_of_its_source_region_counts_once() {
    let t = tool_with_sources("", |region| if region == 2 { 1 } else { region });
    let mut th = t.new_thread();
    th.enter(1);
    engine_of(&mut th).work(3);
    th.enter(3);
    th.enter(2);
    engine_of(&mut th).work(5);
    th.exit(2);
    th.exit(3);
    th.exit(1);
    let res = t.finish(4);
    let (outer, inner) = (hcpa(&res, 1), hcpa(&res, 2));
    assert_eq!(
        (outer["instances"].clone(), outer["work"].clone()),
        (json!(1), json!(8))
    );
    assert_eq!(
        (inner["instances"].clone(), inner["work"].clone()),
        (json!(1), json!(0))
    );
    assert_eq!(inner["critical_path"], 0);
    assert_eq!(inner["self_work"], 5);
    assert_eq!(hcpa(&res, 3)["work"], 5, "the call between them is no copy");
}

/// `f` (region 0) recursing three deep, each level doing work 2 and `x = x + 1` on a global
/// (a load of cost 0, a store of cost 1) before recursing: instances, work and cp counted
/// once, in the outermost (1 instance, work 6, cp 3: the chain of three stores at its level),
/// self-work summed over all (2 each). Per instance: the innermost has work 2, cp 1 (the
/// value it loads was stored before it started), SP 2 / 1; the middle work 4, cp 2, SP
/// (2 + 1) / 2; the outer work 6, cp 3, SP (2 + 2) / 3. Harmonic mean: (2 + 4 + 6) /
/// (2 / 2 + 4 / 1.5 + 6 / (4 / 3)).
#[test]
fn recursion_counts_once_and_parents_are_recorded() {
    let t = tool("");
    let mut th = t.new_thread();
    th.enter(5); // main
    for _ in 0..3 {
        th.enter(0);
        let e = engine_of(&mut th);
        e.frame(1, 0x10);
        e.work(2);
        e.load(0, A, 4, 0, &[]);
        e.store(A, 4, 1, &[c(0, 0)]);
    }
    for _ in 0..3 {
        th.exit(0);
    }
    th.exit(5);
    let res = t.finish(6);
    let f = hcpa(&res, 0);
    // Every instance counts; work and critical path only the outermost.
    assert_eq!(f["instances"], 3);
    assert_eq!(f["work"], 6);
    assert_eq!(f["critical_path"], 3);
    assert_eq!(f["total_parallelism"], 2.0);
    assert_eq!(f["self_work"], 6);
    let sp = 12.0 / (1.0 + 4.0 / 1.5 + 6.0 / (4.0 / 3.0));
    assert!(
        (f["self_parallelism"].as_f64().unwrap() - sp).abs() < 1e-12,
        "{f}"
    );
    assert_eq!(f["parents"], json!([0, 5]));
    assert_eq!(f["parents_truncated"], false);
    assert_eq!(f["coverage"], 1.0);
    let main = hcpa(&res, 5);
    assert_eq!(
        (main["instances"].clone(), main["parents"].clone()),
        (json!(1), json!([]))
    );
    assert_eq!(res.top["hcpa"]["work"], 6);
    assert_eq!(hcpa(&res, 1), Value::Null, "no instances: no field");
}

#[test]
fn finish_writes_every_field() {
    let t = tool("max_depth=2:granule=8:shadow=compress");
    let mut th = t.new_thread();
    th.enter(0);
    th.enter(1);
    th.enter(2); // skipped
    {
        let e = engine_of(&mut th);
        e.work(8);
        e.store(A, 4, 1, &[k(3)]);
    }
    th.exit(2);
    th.exit(1);
    th.enter(1);
    engine_of(&mut th).work(2);
    th.exit(1);
    th.exit(0);
    let res = t.finish(3);
    let r = hcpa(&res, 1);
    assert_eq!(
        r,
        json!({
            "instances": 2,
            "work": 10,
            "self_work": 10,
            "critical_path": 4,
            "self_parallelism": (8.0 + 2.0) / (8.0 / 2.0 + 2.0),
            "total_parallelism": 2.5,
            "coverage": 1.0,
            "parents": [0],
            "parents_truncated": false,
        })
    );
    let top = &res.top["hcpa"];
    assert_eq!(top["work"], 10);
    assert_eq!(top["critical_path"], 4);
    assert_eq!(top["max_depth"], 2);
    assert_eq!(top["granularity"], 8);
    assert_eq!(top["vsm"], "compress");
    assert_eq!(top["skipped_instances"], 1);
    assert!(top["shadow_peak_bytes"].as_u64().unwrap() > 0);
    assert_eq!(top["costs"]["load"], 4);
    assert_eq!(top["costs"].as_object().unwrap().len(), 10);
    assert_eq!(
        top["threads"],
        "each thread's regions are analysed on their own"
    );
    assert_eq!(hcpa(&res, 2), Value::Null, "skipped: no statistics");
}

/// At program end the shadow goes before the report is built (its peak does not rise by the
/// report's memory); the statistics and the recorded peak stay.
#[test]
fn program_end_frees_the_shadow_and_keeps_the_statistics() {
    let t = tool("");
    let mut th = t.new_thread();
    th.enter(0);
    {
        let e = engine_of(&mut th);
        e.work(3);
        for g in 0..4096u64 {
            e.store(A + 4 * 1024 * g, 4, 1, &[k(2)]);
        }
    }
    th.exit(0);
    let used = engine_of(&mut th).heap_bytes();
    th.program_end();
    let left = engine_of(&mut th).heap_bytes();
    assert!(left * 8 < used, "{left} of {used} bytes left");
    let res = t.finish(1);
    assert_eq!(hcpa(&res, 0)["work"], 3);
    assert_eq!(hcpa(&res, 0)["critical_path"], 3);
    assert!(res.top["hcpa"]["shadow_peak_bytes"].as_u64().unwrap() >= used as u64);
}

#[test]
fn options_are_checked() {
    let (_, w) = Options::parse("max_depth=0:granule=2:shadow=palette", &[OPTIONS]);
    assert_eq!(w.len(), 3, "{w:?}");
    let (o, w) = Options::parse("max_depth=1024:granule=1:shadow=baseline", &[OPTIONS]);
    assert!(w.is_empty());
    let s = Settings::from_options(&o);
    assert_eq!(s.engine.max_depth, 1024);
    assert_eq!(s.granule_bytes(), 1);
    assert_eq!(s.engine.vsm, VsmKind::Baseline);
    let d = Settings::from_options(&Options::default());
    assert_eq!(
        (d.engine.max_depth, d.granule_bytes(), d.engine.vsm),
        (64, 4, VsmKind::Compress)
    );
}

#[test]
fn at_most_sixteen_parents_are_kept() {
    let t = tool("");
    let mut th = t.new_thread();
    for parent in 1..=20 {
        th.enter(parent);
        th.enter(0);
        th.exit(0);
        th.exit(parent);
    }
    let res = t.finish(21);
    let f = hcpa(&res, 0);
    assert_eq!(f["parents"], json!((1..=16).collect::<Vec<u32>>()));
    assert_eq!(f["parents_truncated"], true);
}

#[test]
fn threads_sum_and_resets_and_forks_start_anew() {
    let t = tool("");
    let mut a = t.new_thread();
    let mut b = t.new_thread();
    a.enter(0);
    engine_of(&mut a).work(10);
    b.enter(0);
    engine_of(&mut b).work(3);
    b.exit(0);
    a.exit(0);
    let res = t.finish(1);
    assert_eq!(hcpa(&res, 0)["instances"], 2);
    assert_eq!(hcpa(&res, 0)["work"], 13);
    assert_eq!(res.top["hcpa"]["work"], 13);
    // A reset while a is inside region 0: it counts from there.
    a.enter(0);
    engine_of(&mut a).work(5);
    t.reset();
    a.reset();
    engine_of(&mut a).work(1);
    a.exit(0);
    let res = t.finish(1);
    assert_eq!(hcpa(&res, 0)["instances"], 1);
    assert_eq!(
        hcpa(&res, 0)["work"],
        1,
        "b has not seen the reset: nothing yet"
    );
    // Fork: a survives inside region 0, b is gone.
    a.enter(0);
    engine_of(&mut a).work(7);
    t.fork_child();
    a.fork_survivor();
    engine_of(&mut a).work(2);
    a.exit(0);
    let res = t.finish(1);
    assert_eq!(hcpa(&res, 0)["work"], 2);
    assert_eq!(hcpa(&res, 0)["instances"], 1);
    assert_eq!(res.top["hcpa"]["work"], 2);
    a.thread_exit();
}

/// Recursion across a reset: the open instances count as open again, so the outermost
/// still counts once, with its work.
#[test]
fn a_reset_inside_recursion_keeps_counting_once() {
    let t = tool("");
    let mut a = t.new_thread();
    a.enter(0);
    a.enter(0);
    t.reset();
    a.reset();
    engine_of(&mut a).work(4);
    a.exit(0);
    a.exit(0);
    let f = hcpa(&t.finish(1), 0);
    assert_eq!(
        (f["instances"].clone(), f["work"].clone()),
        (json!(2), json!(4))
    );
    assert_eq!(f["self_work"], 4);
}

/// The candidates of a C call: none when the pointer is null or `n` 0. (The entry points
/// themselves set the runtime up on a thread's first event, which a unit test must not do:
/// `tests/abi_symbols.rs` checks they are defined, the end-to-end tests run them.)
#[test]
fn candidates_from_c() {
    let cands = [k(1), c(0, 2)];
    unsafe {
        assert_eq!(entry::candidates(cands.as_ptr(), 2), &cands);
        assert_eq!(entry::candidates(cands.as_ptr(), 0), &[]);
        assert_eq!(entry::candidates(std::ptr::null(), 7), &[]);
    }
}

// ---------------------------------------------------------------------------------------
// The differential test: the engine against a naive model of the definition.

/// A value's times: (instance, time) for every analysed instance open when it was made;
/// at a level whose instance is not listed it reads 0. No versions, no vector shadow.
type Times = Vec<(u64, u64)>;

fn time_at(times: &Times, instance: u64) -> u64 {
    times
        .iter()
        .find(|&&(i, _)| i == instance)
        .map_or(0, |&(_, t)| t)
}

struct RefLevel {
    region: u32,
    kind: LevelKind,
    instance: u64,
    analysed: bool,
    frame: Option<usize>,
    owns_frame: bool,
    work: u64,
    cp: u64,
    children_work: u64,
    children_cp: u64,
}

struct RefFrame {
    slots: u32,
    values: HashMap<u32, Times>,
    /// The serial of the pending call it was made from.
    call: Option<u64>,
}

struct RefCall {
    callee: usize,
    depth: usize,
    args: HashMap<u32, Times>,
    ret: Option<Times>,
    consumed: bool,
    serial: u64,
}

/// docs/hcpa.md read literally: a time per open instance, work added to every open
/// instance, memory as a map from granule to its last store's times.
struct Reference {
    max_depth: usize,
    shift: u32,
    levels: Vec<RefLevel>,
    frames: Vec<RefFrame>,
    memory: HashMap<u64, Times>,
    pending: Vec<RefCall>,
    next_instance: u64,
    next_serial: u64,
    last: Vec<u64>,
}

impl Reference {
    fn new(max_depth: usize, shift: u32) -> Self {
        Reference {
            max_depth,
            shift,
            levels: Vec::new(),
            frames: Vec::new(),
            memory: HashMap::new(),
            pending: Vec::new(),
            next_instance: 1,
            next_serial: 1,
            last: Vec::new(),
        }
    }

    fn instances(&self) -> Vec<u64> {
        (self.levels.iter())
            .filter(|l| l.analysed)
            .map(|l| l.instance)
            .collect()
    }

    fn stamp(&self, t: &[u64]) -> Times {
        self.instances()
            .into_iter()
            .zip(t.iter().copied())
            .collect()
    }

    fn frame(&self) -> Option<&RefFrame> {
        self.frames.get(self.levels.last()?.frame?)
    }

    fn slot(&self, slot: u32) -> Option<&Times> {
        let f = self.frame()?;
        if slot == NONE || slot >= f.slots {
            return None;
        }
        f.values.get(&slot)
    }

    /// Per analysed level: the max over candidates of their time there plus offset.
    fn eval(&self, cands: &[Candidate]) -> Vec<u64> {
        (self.instances().into_iter())
            .map(|i| {
                (cands.iter())
                    .map(|c| self.slot(c.slot).map_or(0, |v| time_at(v, i)) + c.offset as u64)
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// The granules of `size` bytes at `addr` (none for 0 bytes).
    fn granules(&self, addr: u64, size: u64) -> Vec<u64> {
        if size == 0 {
            return Vec::new();
        }
        ((addr >> self.shift)..=((addr + size - 1) >> self.shift)).collect()
    }

    fn read_memory(&self, addr: u64, size: u64, t: &mut [u64]) {
        let instances = self.instances();
        for g in self.granules(addr, size) {
            if let Some(v) = self.memory.get(&g) {
                for (tl, &i) in t.iter_mut().zip(&instances) {
                    *tl = (*tl).max(time_at(v, i));
                }
            }
        }
    }

    fn write_memory(&mut self, addr: u64, size: u64, t: &[u64]) {
        let v = self.stamp(t);
        for g in self.granules(addr, size) {
            self.memory.insert(g, v.clone());
        }
    }

    /// Raises every analysed level's critical path; writes `dst`.
    fn done(&mut self, t: Vec<u64>, dst: u32) {
        for (l, &x) in self.levels.iter_mut().filter(|l| l.analysed).zip(&t) {
            l.cp = l.cp.max(x);
        }
        self.write_slot(dst, &t);
        self.last = t;
    }

    /// Slot `dst` of the current frame gets `t` (nothing for `NONE` or a bad slot).
    fn write_slot(&mut self, dst: u32, t: &[u64]) {
        if dst != NONE {
            let v = self.stamp(t);
            if let Some(f) = self.levels.last().and_then(|l| l.frame) {
                let f = &mut self.frames[f];
                if dst < f.slots {
                    f.values.insert(dst, v);
                }
            }
        }
    }

    fn work(&mut self, cost: u64) {
        for l in self.levels.iter_mut().filter(|l| l.analysed) {
            l.work += cost;
        }
    }

    fn enter(&mut self, region: u32, kind: LevelKind) -> bool {
        let analysed = self.levels.len() < self.max_depth;
        let frame = match kind {
            LevelKind::Function => None,
            LevelKind::Nested => self.levels.last().and_then(|l| l.frame),
        };
        self.levels.push(RefLevel {
            region,
            kind,
            instance: self.next_instance,
            analysed,
            frame,
            owns_frame: false,
            work: 0,
            cp: 0,
            children_work: 0,
            children_cp: 0,
        });
        self.next_instance += 1;
        analysed
    }

    fn exit(&mut self) -> Option<InstanceStats> {
        let l = self.levels.pop()?;
        if l.owns_frame {
            self.frames.truncate(l.frame?);
        }
        if !l.analysed {
            return None;
        }
        if let Some(p) = self.levels.last_mut() {
            p.children_work += l.work;
            p.children_cp += l.cp;
        }
        Some(InstanceStats {
            region: l.region,
            parent: self.levels.last().map(|p| p.region),
            depth: self.levels.len(),
            work: l.work,
            critical_path: l.cp,
            children_work: l.children_work,
            children_cp: l.children_cp,
        })
    }

    fn restart(&mut self) {
        for l in self.levels.iter_mut().filter(|l| l.analysed) {
            l.instance = self.next_instance;
            self.next_instance += 1;
            (l.work, l.cp, l.children_work, l.children_cp) = (0, 0, 0, 0);
        }
    }

    fn frame_op(&mut self, slots: u32, function: usize) {
        let depth = self.levels.len();
        let Some(top) = self.levels.last() else {
            return;
        };
        if top.kind != LevelKind::Function || top.owns_frame {
            return;
        }
        let slots = slots.min(MAX_SLOTS);
        let mut f = RefFrame {
            slots,
            values: HashMap::new(),
            call: None,
        };
        if let Some(p) = self.pending.last_mut() {
            if !p.consumed && p.callee == function && p.depth + 1 == depth {
                p.consumed = true;
                f.call = Some(p.serial);
                for (&i, v) in &p.args {
                    if i < slots {
                        f.values.insert(i, v.clone());
                    }
                }
            }
        }
        self.frames.push(f);
        let index = self.frames.len() - 1;
        let top = self.levels.last_mut().unwrap();
        top.frame = Some(index);
        top.owns_frame = true;
    }

    fn apply(&mut self, op: &Op) -> Option<InstanceStats> {
        match op {
            Op::Enter(region, kind) => {
                self.enter(*region, *kind);
            }
            Op::Exit => return self.exit(),
            Op::Frame(slots, function) => self.frame_op(*slots, *function),
            Op::Work(cost) => self.work(*cost),
            Op::Ts(dst, cands) => {
                let t = self.eval(cands);
                self.done(t, *dst);
            }
            Op::Hoist(dst, cands) => {
                let t = self.eval(cands);
                self.write_slot(*dst, &t);
                self.last = t;
            }
            Op::Phi(dst, src, offset, cond) => {
                let t = self.eval(&[c(*src, *offset), c(*cond, 0)]);
                self.done(t, *dst);
            }
            Op::Load(dst, addr, size, cost, cands) => {
                let mut t = self.eval(cands);
                self.read_memory(*addr, *size, &mut t);
                t.iter_mut().for_each(|x| *x += *cost as u64);
                self.done(t, *dst);
            }
            Op::Store(addr, size, cost, cands) => {
                let mut t = self.eval(cands);
                t.iter_mut().for_each(|x| *x += *cost as u64);
                self.write_memory(*addr, *size, &t);
                self.done(t, NONE);
            }
            Op::Mem(dst, src, len, cost8, cands) => {
                let cost = *cost8 as u64 * len.div_ceil(8);
                self.work(cost);
                let mut t = self.eval(cands);
                if let Some(src) = src {
                    self.read_memory(*src, *len, &mut t);
                }
                t.iter_mut().for_each(|x| *x += cost);
                self.write_memory(*dst, *len, &t);
                self.done(t, NONE);
            }
            Op::Call(callee) => {
                self.pending.push(RefCall {
                    callee: *callee,
                    depth: self.levels.len(),
                    args: HashMap::new(),
                    ret: None,
                    consumed: false,
                    serial: self.next_serial,
                });
                self.next_serial += 1;
            }
            Op::Arg(index, cands) => {
                let t = self.eval(cands);
                let v = self.stamp(&t);
                self.done(t, NONE);
                let depth = self.levels.len();
                if let Some(p) = self.pending.last_mut() {
                    if !p.consumed && p.depth == depth && *index < MAX_ARGS {
                        p.args.insert(*index, v);
                    }
                }
            }
            Op::Ret(cands) => {
                let t = self.eval(cands);
                let v = self.stamp(&t);
                self.done(t, NONE);
                if let Some(serial) = self.frame().and_then(|f| f.call) {
                    if let Some(p) = self.pending.iter_mut().find(|p| p.serial == serial) {
                        p.ret = Some(v);
                    }
                }
            }
            Op::Result(dst, cost) => {
                let depth = self.levels.len();
                let cost = *cost as u64;
                let mut first = self.pending.len();
                while first > 0 && self.pending[first - 1].depth >= depth {
                    first -= 1;
                }
                let chosen = (first..self.pending.len())
                    .rev()
                    .min_by_key(|&k| self.pending[k].depth);
                let instances = self.instances();
                let (t, charged) = match chosen.map(|k| &self.pending[k]) {
                    None => (vec![cost; instances.len()], true),
                    Some(p) => {
                        let t = instances.iter().map(|&i| match (&p.ret, p.consumed) {
                            (Some(ret), true) => time_at(ret, i),
                            _ => p.args.values().map(|v| time_at(v, i)).max().unwrap_or(0),
                        });
                        let extra = if p.consumed { 0 } else { cost };
                        (t.map(|x| x + extra).collect(), !p.consumed)
                    }
                };
                if charged {
                    self.work(cost);
                }
                self.pending.truncate(first);
                self.done(t, *dst);
            }
            Op::Restart => self.restart(),
        }
        None
    }
}

#[derive(Debug, Clone)]
enum Op {
    Enter(u32, LevelKind),
    Exit,
    Frame(u32, usize),
    Work(u64),
    Ts(u32, Vec<Candidate>),
    Hoist(u32, Vec<Candidate>),
    Phi(u32, u32, u32, u32),
    Load(u32, u64, u64, u32, Vec<Candidate>),
    Store(u64, u64, u32, Vec<Candidate>),
    Mem(u64, Option<u64>, u64, u32, Vec<Candidate>),
    Call(usize),
    Arg(u32, Vec<Candidate>),
    Ret(Vec<Candidate>),
    Result(u32, u32),
    Restart,
}

fn apply(e: &mut Engine, op: &Op) -> Option<InstanceStats> {
    match op {
        Op::Enter(region, kind) => {
            e.enter(*region, *kind);
        }
        Op::Exit => return e.exit(),
        Op::Frame(slots, function) => e.frame(*slots, *function),
        Op::Work(cost) => e.work(*cost),
        Op::Ts(dst, cands) => e.ts(*dst, cands),
        Op::Hoist(dst, cands) => e.hoist(*dst, cands),
        Op::Phi(dst, src, offset, cond) => e.phi(*dst, *src, *offset, *cond),
        Op::Load(dst, addr, size, cost, cands) => e.load(*dst, *addr, *size, *cost, cands),
        Op::Store(addr, size, cost, cands) => e.store(*addr, *size, *cost, cands),
        Op::Mem(dst, src, len, cost8, cands) => e.mem(*dst, *src, *len, *cost8, cands),
        Op::Call(callee) => e.call(*callee),
        Op::Arg(index, cands) => e.arg(*index, cands),
        Op::Ret(cands) => e.ret(cands),
        Op::Result(dst, cost) => e.result(*dst, *cost),
        Op::Restart => e.restart(),
    }
    None
}

/// Whether the op computes a time (`Engine::last_time` then holds it).
fn computes_a_time(op: &Op) -> bool {
    !matches!(
        op,
        Op::Enter(..) | Op::Exit | Op::Frame(..) | Op::Work(_) | Op::Call(_) | Op::Restart
    )
}

/// xorshift64*: long runs repeat exactly without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// Random programs shaped like instrumented code: functions that make their frame, loops
/// of bodies, inlined calls, timestamps over a few slots (some beyond the frame), loads and
/// stores over a few hundred bytes, calls taken by their callee, by nobody, or by a
/// callback, and now and then a `longjmp` (levels left without return or result), a result
/// left out (an exception) or a reset.
struct Gen {
    rng: Rng,
    ops: Vec<Op>,
    depth: usize,
    max_levels: usize,
}

const FUNCTIONS: [usize; 4] = [0x100, 0x200, 0x300, 0x400];

impl Gen {
    /// A generator seeded with `seed`, nesting at most `max_levels` levels.
    fn new(seed: u64, max_levels: usize) -> Self {
        Gen {
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            ops: Vec::new(),
            depth: 0,
            max_levels,
        }
    }

    fn cands(&mut self, slots: u32) -> Vec<Candidate> {
        let n = self.rng.below(4);
        (0..n)
            .map(|_| {
                let slot = match self.rng.below(8) {
                    0 => NONE,
                    1 => slots + self.rng.below(2) as u32,
                    _ => self.rng.below(slots.max(1) as u64) as u32,
                };
                c(slot, self.rng.below(6) as u32)
            })
            .collect()
    }

    fn slot(&mut self, slots: u32) -> u32 {
        if self.rng.chance(10) {
            NONE
        } else {
            self.rng.below(slots as u64 + 1) as u32
        }
    }

    fn addr(&mut self) -> u64 {
        A + self.rng.below(256)
    }

    fn enter(&mut self, region: u32, kind: LevelKind) {
        self.ops.push(Op::Enter(region, kind));
        self.depth += 1;
    }

    fn exit(&mut self) {
        self.ops.push(Op::Exit);
        self.depth -= 1;
    }

    /// A function's activation: enter, frame, body, return, exit. Returns false when it
    /// `longjmp`ed out (its levels are exited already).
    fn function(&mut self, function: usize, budget: usize) -> bool {
        let region = FUNCTIONS.iter().position(|&f| f == function).unwrap_or(0) as u32;
        let base = self.depth;
        self.enter(region, LevelKind::Function);
        let slots = 1 + self.rng.below(5) as u32;
        if !self.rng.chance(12) {
            self.ops.push(Op::Frame(slots, function));
        }
        if !self.statements(slots, budget) {
            return false;
        }
        if self.rng.chance(12) {
            // longjmp to some caller: exit this activation and maybe more.
            let to = self.rng.below(base as u64 + 1) as usize;
            while self.depth > to {
                self.exit();
            }
            return false;
        }
        let cands = self.cands(slots);
        self.ops.push(Op::Ret(cands));
        self.exit();
        true
    }

    /// False when a callee `longjmp`ed past this code's level (its caller continues).
    fn statements(&mut self, slots: u32, budget: usize) -> bool {
        let level = self.depth;
        for _ in 0..1 + self.rng.below(6) {
            if self.depth < level {
                return false;
            }
            let deeper = budget > 0 && self.depth < self.max_levels;
            match self.rng.below(20) {
                0..=3 => {
                    let (dst, cands) = (self.slot(slots), self.cands(slots));
                    self.ops.push(Op::Ts(dst, cands));
                }
                4 => {
                    let (dst, src, cond) = (self.slot(slots), self.slot(slots), self.slot(slots));
                    let offset = self.rng.below(4) as u32;
                    self.ops.push(Op::Phi(dst, src, offset, cond));
                }
                5..=6 => {
                    let (dst, addr, cands) = (self.slot(slots), self.addr(), self.cands(slots));
                    let size = 1 + self.rng.below(8);
                    self.ops.push(Op::Load(dst, addr, size, 4, cands));
                }
                7..=8 => {
                    let (addr, cands) = (self.addr(), self.cands(slots));
                    let size = 1 + self.rng.below(8);
                    self.ops.push(Op::Store(addr, size, 1, cands));
                }
                9 => {
                    let (dst, cands) = (self.addr(), self.cands(slots));
                    let src = (!self.rng.chance(3)).then(|| self.addr());
                    let len = self.rng.below(24);
                    self.ops.push(Op::Mem(dst, src, len, 1, cands));
                }
                10..=11 => self.ops.push(Op::Work(self.rng.below(10))),
                12..=13 if deeper => {
                    // A loop of bodies.
                    let (lp, body) = (10 + 2 * self.rng.below(3) as u32, 11);
                    self.enter(lp, LevelKind::Nested);
                    for _ in 0..self.rng.below(4) {
                        self.enter(body + lp - 10, LevelKind::Nested);
                        if !self.statements(slots, budget - 1) {
                            return false;
                        }
                        self.exit();
                    }
                    self.exit();
                }
                14 if deeper => {
                    self.enter(20, LevelKind::Nested);
                    if !self.statements(slots, budget - 1) {
                        return false;
                    }
                    self.exit();
                }
                15..=17 if deeper => {
                    let callee = FUNCTIONS[self.rng.below(4) as usize];
                    self.ops.push(Op::Call(callee));
                    for _ in 0..self.rng.below(4) {
                        let (index, cands) = (self.rng.below(4) as u32, self.cands(slots));
                        self.ops.push(Op::Arg(index, cands));
                    }
                    let at = self.depth;
                    match self.rng.below(4) {
                        // Not instrumented.
                        0 => {}
                        // A callback to another function.
                        1 => {
                            let other = FUNCTIONS[self.rng.below(4) as usize];
                            self.function(other, budget - 1);
                        }
                        _ => {
                            self.function(callee, budget - 1);
                        }
                    }
                    if self.depth < at {
                        return false;
                    }
                    if !self.rng.chance(10) {
                        let (dst, cost) = (self.slot(slots), 10);
                        self.ops.push(Op::Result(dst, cost));
                    }
                }
                18 if self.rng.chance(4) => self.ops.push(Op::Restart),
                19 if self.rng.chance(2) => {
                    let (dst, cands) = (self.slot(slots), self.cands(slots));
                    self.ops.push(Op::Hoist(dst, cands));
                }
                _ => {
                    let (dst, cands) = (self.slot(slots), self.cands(slots));
                    self.ops.push(Op::Ts(dst, cands));
                }
            }
        }
        true
    }
}

fn program(seed: u64, max_levels: usize) -> Vec<Op> {
    let mut g = Gen::new(seed, max_levels);
    for _ in 0..1 + g.rng.below(3) {
        let f = FUNCTIONS[g.rng.below(4) as usize];
        g.function(f, 4);
        while g.depth > 0 {
            g.exit();
        }
    }
    g.ops
}

/// Runs `ops` on the engine and the model; panics at the first difference in a computed
/// time or an instance's statistics. Returns the steps after which levels shared lanes.
fn compare(ops: &[Op], config: EngineConfig, what: &str) -> usize {
    let mut shared = 0;
    let mut e = Engine::new(config);
    let mut r = Reference::new(config.max_depth, config.granule_shift);
    for (step, op) in ops.iter().enumerate() {
        let got = apply(&mut e, op);
        let expected = r.apply(op);
        assert_eq!(
            got, expected,
            "{what}: op {step} {op:?}: instance statistics"
        );
        if computes_a_time(op) {
            assert_eq!(e.last_time(), r.last, "{what}: op {step} {op:?}: time");
        }
        assert_eq!(e.depth(), r.levels.len(), "{what}: op {step}");
        shared += usize::from(e.width() < e.analysed_depth());
    }
    shared
}

#[test]
fn the_engine_matches_the_naive_model_on_random_programs() {
    let (mut instances, mut shared) = (0, 0);
    for seed in 0..3000u64 {
        let max_depth = [1, 2, 3, 5, 64][seed as usize % 5];
        let shift = [0, 2, 3][seed as usize % 3];
        let ops = program(seed, 10);
        instances += ops.iter().filter(|op| matches!(op, Op::Exit)).count();
        let config = EngineConfig {
            max_depth,
            granule_shift: shift,
            vsm: VsmKind::Baseline,
            share_lanes: seed % 7 != 0,
        };
        shared += compare(
            &ops,
            config,
            &format!("seed {seed}, max_depth {max_depth}, shift {shift}"),
        );
    }
    assert!(instances > 30_000, "{instances} instances");
    // Levels entered before their parent's lane has a time share it (`Engine::enter`).
    assert!(shared > 10_000, "{shared} steps with shared lanes");
}

/// Every vector shadow memory gives the same times.
#[test]
fn every_shadow_kind_gives_the_same_times() {
    for kind in VsmKind::ALL {
        for seed in 5000..5040u64 {
            let config = EngineConfig {
                max_depth: 4,
                granule_shift: 2,
                vsm: kind,
                share_lanes: true,
            };
            compare(&program(seed, 12), config, &format!("{kind}, seed {seed}"));
        }
    }
}

/// Every path the processor has (scalar, AVX2, AVX-512) matches the model, with the cached
/// shadows (`gc` and `compress`, whose lines the 8-lane paths read and write in place) and
/// the baseline, and up to 30 levels: with more than 8 analysed, the 8-lane paths take 8
/// levels at a time.
#[test]
fn every_time_path_matches_the_naive_model() {
    for lanes in Lanes::ALL.into_iter().filter(|l| l.available()) {
        for seed in 7000..7500u64 {
            let max_depth = [3, 8, 9, 16, 17, 64][seed as usize % 6];
            let shift = [0, 2, 3][seed as usize % 3];
            let vsm = [VsmKind::Gc, VsmKind::Baseline, VsmKind::Compress][seed as usize / 2 % 3];
            let config = EngineConfig {
                max_depth,
                granule_shift: shift,
                vsm,
                share_lanes: seed % 5 != 0,
            };
            let ops = program(seed, [12, 30][seed as usize % 2]);
            let what = format!("{lanes:?}, seed {seed}, max_depth {max_depth}, {vsm}");
            let mut e = Engine::new(config);
            e.set_lanes(lanes);
            let mut r = Reference::new(config.max_depth, config.granule_shift);
            for (step, op) in ops.iter().enumerate() {
                let got = apply(&mut e, op);
                assert_eq!(
                    got,
                    r.apply(op),
                    "{what}: op {step} {op:?}: instance statistics"
                );
                if computes_a_time(op) {
                    assert_eq!(e.last_time(), r.last, "{what}: op {step} {op:?}: time");
                }
            }
        }
    }
}

/// A program of one activation nested up to `budget` deep (loops, blocks and calls), at most
/// `max_levels` levels.
fn deep_program(seed: u64, budget: usize, max_levels: usize) -> Vec<Op> {
    let mut g = Gen::new(seed, max_levels);
    let f = FUNCTIONS[g.rng.below(4) as usize];
    g.function(f, budget);
    while g.depth > 0 {
        g.exit();
    }
    g.ops
}

/// A function whose code nests `floors` blocks, each after a few statements (so that they
/// do not all share one lane), then runs a random program `budget` deep: times at 24 to 70
/// levels.
fn tower_program(seed: u64, floors: usize, budget: usize) -> Vec<Op> {
    let mut g = Gen::new(seed, floors + 2 * budget);
    let (function, slots) = (FUNCTIONS[g.rng.below(4) as usize], 4);
    g.enter(0, LevelKind::Function);
    g.ops.push(Op::Frame(slots, function));
    for _ in 0..floors {
        // Without budget, no call: nothing leaves the tower.
        g.statements(slots, 0);
        g.enter(20, LevelKind::Nested);
    }
    g.statements(slots, budget);
    while g.depth > 0 {
        g.exit();
    }
    g.ops
}

/// As [`every_time_path_matches_the_naive_model`], with programs nested up to about 70
/// levels: a time in 1 to 6 registers of 8 levels, and in memory past 48 levels.
#[test]
fn every_time_path_matches_the_naive_model_deep() {
    let (mut deep, mut shared) = (0, 0);
    // Times computed with 1 to 6 vectors of levels, and more.
    let mut by_vectors = [0usize; 7];
    for lanes in Lanes::ALL.into_iter().filter(|l| l.available()) {
        for seed in 9000..9600u64 {
            let ops = if seed % 4 == 0 {
                tower_program(seed, 24 + seed as usize / 4 % 40, 6)
            } else {
                deep_program(seed, 14, 40)
            };
            let mut depth = 0i64;
            let max = ops
                .iter()
                .map(|op| {
                    depth += match op {
                        Op::Enter(..) => 1,
                        Op::Exit => -1,
                        _ => 0,
                    };
                    depth
                })
                .max()
                .unwrap_or(0);
            if max <= 8 {
                continue;
            }
            deep += 1;
            let config = EngineConfig {
                max_depth: [17, 24, 64, 33, 64, 49][seed as usize % 6],
                granule_shift: [0, 2, 3][seed as usize / 3 % 3],
                vsm: [VsmKind::Gc, VsmKind::Baseline, VsmKind::Compress][seed as usize / 9 % 3],
                share_lanes: seed % 5 != 0,
            };
            let what = format!("{lanes:?}, seed {seed}, {config:?}");
            let mut e = Engine::new(config);
            e.set_lanes(lanes);
            let mut r = Reference::new(config.max_depth, config.granule_shift);
            for (step, op) in ops.iter().enumerate() {
                let got = apply(&mut e, op);
                assert_eq!(
                    got,
                    r.apply(op),
                    "{what}: op {step} {op:?}: instance statistics"
                );
                if computes_a_time(op) {
                    assert_eq!(e.last_time(), r.last, "{what}: op {step} {op:?}: time");
                    by_vectors[e.width().div_ceil(8).clamp(1, 7) - 1] += 1;
                }
                shared += usize::from(e.width() < e.analysed_depth());
            }
        }
    }
    assert!(deep > 200, "{deep} deep programs");
    assert!(
        by_vectors.iter().all(|&n| n > 1000),
        "times by vectors: {by_vectors:?}"
    );
    assert!(shared > 10_000, "{shared} steps with shared lanes");
}
