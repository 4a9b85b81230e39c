//! The loops tool driven with the event sequences compiled nests make (no C): the sampling
//! rule over whole runs of a simulated nest, resynchronisation, resets, dead entries,
//! `sample_iterations=0`, unknown and malformed descriptors, and the report's fields. Each
//! test's numbers are derived in its comment from the rule in the module docs.

use super::nests::{validate, NestRegistry, MAX_LEVELS};
use super::*;
use kage_abi::loops::{chunk_end, decode, RESYNC};
use kage_abi::{LoopLevel, REJECTED};
use serde_json::json;
use std::ffi::CString;

/// A tool over a registry of its own, with `options` (`KAGE_OPTIONS` syntax).
fn tool(options: &str) -> &'static LoopsTool {
    let registry: &'static NestRegistry = Box::leak(Box::new(NestRegistry::new()));
    let tool: &'static LoopsTool = Box::leak(Box::new(LoopsTool::new(registry, None)));
    let (mut opts, warnings) = Options::parse(options, &[OPTIONS]);
    assert!(warnings.is_empty(), "{warnings:?}");
    tool.init(
        &mut opts,
        Instrumentations::default().with(Instrumentation::Loops),
    );
    tool
}

/// A thread of `tool`.
struct Thread(Box<dyn ThreadTool>);

impl Thread {
    fn of(tool: &'static LoopsTool) -> Thread {
        Thread(tool.new_thread())
    }

    fn loops(&mut self) -> &mut LoopsThread {
        (self.0.as_any_mut())
            .and_then(|any| any.downcast_mut::<LoopsThread>())
            .expect("a loops thread")
    }

    fn enter(&mut self, nest: *mut Nest, frame: usize) -> u64 {
        unsafe { self.loops().enter(nest, frame) }
    }

    fn decide(&mut self, nest: *mut Nest, level: u32, vi: u64) -> u64 {
        unsafe { self.loops().decide(nest, level, vi) }
    }

    fn iter(&mut self, nest: *mut Nest, level: u32, vi: u64) {
        unsafe { self.loops().iter(nest, level, vi) }
    }

    fn exit(&mut self, nest: *mut Nest, iterations: &[u64]) {
        unsafe { self.loops().exit(nest, iterations.as_ptr()) }
    }

    /// The open entries' nests, outermost first.
    fn open(&mut self) -> Vec<u32> {
        self.loops().entries.iter().map(|e| e.nest).collect()
    }
}

/// A leaked descriptor: `levels` are (parent, first line, last line), in pre-order, depths
/// derived from the parents.
fn nest_with(
    function: &str,
    file: &str,
    selected_by: Selection,
    levels: &[(u32, u32, u32)],
) -> *mut Nest {
    let mut built: Vec<LoopLevel> = Vec::new();
    for &(parent, first_line, last_line) in levels {
        let depth = if parent == NONE {
            0
        } else {
            built[parent as usize].depth + 1
        };
        built.push(LoopLevel {
            parent,
            depth,
            first_line,
            last_line,
        });
    }
    raw_nest(function, file, selected_by as u32, built)
}

fn raw_nest(function: &str, file: &str, selected_by: u32, levels: Vec<LoopLevel>) -> *mut Nest {
    let level_count = levels.len() as u32;
    let levels = Box::leak(levels.into_boxed_slice());
    Box::leak(Box::new(Nest {
        global_id: NONE,
        level_count,
        levels: levels.as_ptr(),
        function: CString::new(function).unwrap().into_raw(),
        file: CString::new(file).unwrap().into_raw(),
        selected_by,
        sampling_over: 0,
        // Room for any level count a test writes (at most MAX_LEVELS + 1 counters).
        unsampled: Box::leak(vec![0u64; 2048].into_boxed_slice()).as_mut_ptr(),
        access_count: 0,
        scalar_count: 0,
        accesses: std::ptr::null(),
        scalars: std::ptr::null(),
    }))
}

/// A nest of `depth` loops, each directly inside the one before.
fn chain(depth: u32) -> *mut Nest {
    let levels: Vec<(u32, u32, u32)> = (0..depth)
        .map(|k| (if k == 0 { NONE } else { k - 1 }, 10 + k, 20 - k))
        .collect();
    nest_with("f", "/src/f.c", Selection::Line, &levels)
}

/// What a compiled nest does (docs/abi.md, "Loop nests"): the outermost loop's entry asks
/// for its chunk end; at an iteration start whose virtual iterator reaches the level's chunk
/// end it asks for a decision (a resync making every enclosing level ask at its next
/// iteration); an inner loop entered from the instrumented version asks at its first
/// iteration, one entered from the original never; the instrumented version reports each
/// iteration; the exit gives each level's iterations. `trips[k]` is level k's trip count in
/// each of its entries; the levels are those of `chain`.
struct Program {
    nest: *mut Nest,
    trips: Vec<u64>,
    chunk_end: Vec<u64>,
    vi: Vec<u64>,
    iterations: Vec<u64>,
}

impl Program {
    fn new(nest: *mut Nest, trips: &[u64]) -> Program {
        let n = trips.len();
        Program {
            nest,
            trips: trips.to_vec(),
            chunk_end: vec![NEVER; n],
            vi: vec![0; n],
            iterations: vec![0; n],
        }
    }

    /// One entry of the nest from the function whose frame is `frame`. Once the runtime
    /// says sampling is over, the entry skips it and counts into the descriptor's counters.
    fn run(&mut self, t: &mut Thread, frame: usize) {
        self.iterations.fill(0);
        // SAFETY: a leaked descriptor of this test.
        let over = unsafe { (*self.nest).sampling_over } != 0;
        self.chunk_end[0] = if over {
            NEVER
        } else {
            t.enter(self.nest, frame)
        };
        self.level(t, 0, ORIGINAL);
        let iterations = self.iterations.clone();
        if over {
            // SAFETY: as above; `unsampled` has room for 1 + levels counters.
            let counters = unsafe { (*self.nest).unsampled };
            unsafe {
                *counters += 1;
                for (k, n) in iterations.iter().enumerate() {
                    *counters.add(1 + k) += n;
                }
            }
        } else {
            t.exit(self.nest, &iterations);
        }
    }

    /// An entry of level `k` from code in `version`; returns the version its code is in
    /// when the loop is left.
    fn level(&mut self, t: &mut Thread, k: usize, entered_from: u64) -> u64 {
        let mut version = entered_from;
        if k > 0 {
            self.chunk_end[k] = if entered_from == INSTRUMENTED {
                DECIDE_NOW
            } else {
                NEVER
            };
        }
        for vi in 0..self.trips[k] {
            self.vi[k] = vi;
            if vi == self.chunk_end[k] {
                let d = t.decide(self.nest, k as u32, vi);
                self.chunk_end[k] = chunk_end(vi, d);
                version = d & 1;
                if d & RESYNC != 0 {
                    for j in 0..k {
                        // Their next iteration is `vi[j] + 1`: it asks again.
                        self.chunk_end[j] = self.vi[j] + 1;
                    }
                }
            }
            if version == INSTRUMENTED {
                t.iter(self.nest, k as u32, vi);
            }
            self.iterations[k] += 1;
            if k + 1 < self.trips.len() {
                // The rest of the iteration runs in the version the inner loop left in.
                version = self.level(t, k + 1, version);
            }
        }
        version
    }
}

/// A nest's `(entries, sampled entries)`.
type EntryCounts = (u64, u64);
/// A level's `(iterations, instrumented, chunks original, chunks instrumented)`.
type LevelCounts = (u64, u64, u64, u64);

/// The counts of `nest` and of each of its levels in the report of `tool`.
fn stats(tool: &LoopsTool, nest: *mut Nest) -> (EntryCounts, Vec<LevelCounts>) {
    let id = unsafe { (*nest).global_id };
    let report = tool.report();
    let n = report
        .nests
        .iter()
        .find(|n| n.id == id)
        .expect("the nest is in the report");
    let levels = (n.levels.iter())
        .map(|l| {
            (
                l.iterations,
                l.instrumented_iterations,
                l.chunks.original,
                l.chunks.instrumented,
            )
        })
        .collect();
    ((n.entries, n.sampled_entries), levels)
}

/// Defaults (10 iterations, 8 entries), 12 entries of a 20 × 30 nest. A sampled entry:
/// level 0 decides at 0 (instrumented, chunk 10); the inner loop, entered from the
/// instrumented version, decides at 0 (instrumented, chunk 10) and at 10 (original to the
/// end, resync): level 0 decides again at its next iteration, 1 (instrumented, chunk 9),
/// and so on up to iteration 9; at 10 it decides original to the end, and the inner loops
/// entered from the original never ask. So per sampled entry: level 0 has 10 instrumented
/// iterations and 11 chunks (10 instrumented, 1 original), level 1 has 10 × 10 instrumented
/// iterations and 20 chunks (10 and 10). Entries 9 to 12 are not sampled: nothing.
#[test]
fn default_sampling_instruments_the_first_iterations_of_the_first_entries() {
    let tool = tool("");
    let mut t = Thread::of(tool);
    let nest = chain(2);
    let mut program = Program::new(nest, &[20, 30]);
    for _ in 0..12 {
        program.run(&mut t, 0x7000);
    }
    let (entries, levels) = stats(tool, nest);
    assert_eq!(entries, (12, 8));
    assert_eq!(
        levels,
        [
            (12 * 20, 8 * 10, 8, 8 * 10),
            (12 * 20 * 30, 8 * 100, 8 * 10, 8 * 10)
        ]
    );
    assert!(t.open().is_empty(), "every entry exited");
}

/// The decisions themselves: chunk lengths count down to `sample_iterations`, an inner
/// level leaving the instrumented version asks its enclosing level to resync, level 0
/// never does, and an unsampled entry gets no chunk end.
#[test]
fn decisions_follow_the_rule() {
    let tool = tool("sample_iterations=4:sample_entries=1");
    let mut t = Thread::of(tool);
    let nest = chain(3);
    assert_eq!(t.enter(nest, 100), DECIDE_NOW);
    assert_eq!(decode(t.decide(nest, 0, 0)), (INSTRUMENTED, false, 4));
    assert_eq!(decode(t.decide(nest, 1, 1)), (INSTRUMENTED, false, 3));
    assert_eq!(decode(t.decide(nest, 2, 0)), (INSTRUMENTED, false, 4));
    // Level 2 runs out: original, and level 1 (instrumented) must ask again.
    assert_eq!(t.decide(nest, 2, 4), decision(ORIGINAL, true, UNBOUNDED));
    // Level 1 asks at its next iteration, still under 4: instrumented again.
    assert_eq!(decode(t.decide(nest, 1, 2)), (INSTRUMENTED, false, 2));
    assert_eq!(t.decide(nest, 1, 4), decision(ORIGINAL, true, UNBOUNDED));
    // Level 2 entered while level 1 is original (it would not ask; if it did): original,
    // no resync.
    assert_eq!(t.decide(nest, 2, 0), ORIGINAL_TO_THE_END);
    assert_eq!(t.decide(nest, 0, 4), ORIGINAL_TO_THE_END);
    // Level 1 inside an original level 0: original, no resync.
    assert_eq!(t.decide(nest, 1, 0), ORIGINAL_TO_THE_END);
    // Out-of-range levels are refused.
    assert_eq!(t.decide(nest, 3, 0), ORIGINAL_TO_THE_END);
    t.exit(nest, &[5, 10, 20]);
    // The second entry is not sampled: no chunk end, and decisions are original.
    assert_eq!(t.enter(nest, 100), NEVER);
    assert_eq!(t.decide(nest, 0, 0), ORIGINAL_TO_THE_END);
    t.exit(nest, &[5, 10, 20]);
    let (entries, levels) = stats(tool, nest);
    assert_eq!(entries, (2, 1));
    // Chunks (original, instrumented): level 0 (2, 1), its original ones at 4 and in the
    // unsampled entry; level 1 (2, 2); level 2 (2, 1).
    assert_eq!(
        levels,
        [(10, 0, 2, 1), (20, 0, 2, 2), (40, 0, 2, 1)],
        "{levels:?}"
    );
}

/// The iteration calls set the levels' virtual iterators, which the analyses read, and
/// count the instrumented iterations.
#[test]
fn iteration_calls_keep_the_virtual_iterators() {
    let tool = tool("");
    let mut t = Thread::of(tool);
    let nest = chain(2);
    t.enter(nest, 100);
    t.decide(nest, 0, 0);
    t.iter(nest, 0, 0);
    t.decide(nest, 1, 0);
    for vi in 0..3 {
        t.iter(nest, 1, vi);
    }
    let active = t.loops().active().unwrap();
    assert_eq!(active.nest, unsafe { (*nest).global_id });
    assert!(active.sampled);
    let state: Vec<(u64, u64, u32)> = (active.levels.iter())
        .map(|l| (l.vi, l.version, l.parent))
        .collect();
    assert_eq!(state, [(0, INSTRUMENTED, NONE), (2, INSTRUMENTED, 0)]);
    t.iter(nest, 5, 0); // no such level: ignored
    t.exit(nest, &[1, 3]);
    assert!(t.loops().active().is_none());
    assert_eq!(stats(tool, nest).1, [(1, 1, 0, 1), (3, 3, 0, 1)]);
}

/// `sample_entries=` counts over the whole process: two threads share the first 3
/// entries; `sample_entries=0` samples nothing.
#[test]
fn sampled_entries_are_counted_over_the_process() {
    let tool = tool("sample_entries=3");
    let nest = chain(1);
    let (mut a, mut b) = (Thread::of(tool), Thread::of(tool));
    let mut answers = Vec::new();
    for k in 0..3 {
        for t in [&mut a, &mut b] {
            answers.push(t.enter(nest, 100 + k));
            t.exit(nest, &[1]);
        }
    }
    assert_eq!(
        answers,
        [DECIDE_NOW, DECIDE_NOW, DECIDE_NOW, NEVER, NEVER, NEVER]
    );
    assert_eq!(stats(tool, nest).0, (6, 3));

    let none = self::tool("sample_entries=0");
    let mut t = Thread::of(none);
    assert_eq!(
        t.enter(nest_with("g", "", Selection::Line, &[(NONE, 1, 2)]), 9),
        NEVER
    );
}

/// `sample_iterations=0`: the sampled entries ask, and every decision is original.
#[test]
fn no_sample_iterations_instruments_nothing() {
    let tool = tool("sample_iterations=0:sample_entries=2");
    let mut t = Thread::of(tool);
    let nest = chain(2);
    let mut program = Program::new(nest, &[5, 5]);
    for _ in 0..3 {
        program.run(&mut t, 0x7000);
    }
    // Two sampled entries: one original decision each at level 0, none inside.
    assert_eq!(
        stats(tool, nest),
        ((3, 2), vec![(15, 0, 2, 0), (75, 0, 0, 0)])
    );
}

/// An inner loop shorter than its chunk never asks again: level 0 keeps its first chunk
/// (10 iterations, one decision), each of those iterations enters the inner loop once from
/// the instrumented version (one decision, 4 instrumented iterations).
#[test]
fn short_inner_loops_keep_the_enclosing_chunk() {
    let tool = tool("sample_entries=1");
    let mut t = Thread::of(tool);
    let nest = chain(2);
    Program::new(nest, &[12, 4]).run(&mut t, 0x7000);
    assert_eq!(
        stats(tool, nest),
        ((1, 1), vec![(12, 10, 1, 1), (48, 40, 0, 10)])
    );
}

/// `sample_iterations=1`, `sample_entries=2`, 3 entries of 3 iterations: a sampled entry
/// decides at 0 (instrumented, chunk 1) and at 1 (original). A reset zeroes the statistics
/// and restarts sampling: the next entries are sampled again. An entry open at the reset
/// counts as an entry, and stays sampled if it claims one of the new samples.
#[test]
fn reset_restarts_statistics_and_sampling() {
    let tool = tool("sample_entries=2:sample_iterations=1");
    let mut t = Thread::of(tool);
    let nest = chain(1);
    let mut program = Program::new(nest, &[3]);
    for _ in 0..3 {
        program.run(&mut t, 0x7000);
    }
    assert_eq!(stats(tool, nest), ((3, 2), vec![(9, 2, 2, 2)]));

    tool.reset();
    // Until the thread applies it, its statistics are not reported.
    assert_eq!(stats(tool, nest), ((0, 0), vec![(0, 0, 0, 0)]));
    t.0.reset();
    for _ in 0..3 {
        program.run(&mut t, 0x7000);
    }
    assert_eq!(stats(tool, nest), ((3, 2), vec![(9, 2, 2, 2)]));

    // An entry open across a reset stays sampled by claiming one of the new samples.
    tool.reset();
    t.0.reset();
    assert_eq!(t.enter(nest, 0x7000), DECIDE_NOW);
    tool.reset();
    t.0.reset();
    t.iter(nest, 0, 0);
    t.exit(nest, &[3]);
    assert_eq!(stats(tool, nest), ((1, 1), vec![(3, 1, 0, 0)]));
    assert_eq!(t.enter(nest, 0x7000), DECIDE_NOW, "one sample is left");
    t.exit(nest, &[0]);
    assert_eq!(t.enter(nest, 0x7000), NEVER);
}

/// Entries below a new entry's frame are dead (the stack grows down), and so is one of the
/// same nest at that frame; an event of a nest whose entry lies under others drops those;
/// an exit drops what is above its entry.
#[test]
fn entries_left_without_their_exit_are_dropped() {
    let tool = tool("");
    let mut t = Thread::of(tool);
    let (a, b, c) = (chain(1), chain(2), chain(1));
    let id = |n: *mut Nest| unsafe { (*n).global_id };

    // a in main calls a function holding b, which calls one holding c.
    t.enter(a, 0x9000);
    t.enter(b, 0x8000);
    t.enter(c, 0x7000);
    assert_eq!(t.open(), [id(a), id(b), id(c)]);
    // A longjmp back to b's function, which enters b again: b and c are dead.
    t.enter(b, 0x8000);
    assert_eq!(t.open(), [id(a), id(b)]);
    // A recursive call enters b deeper: both stay.
    t.enter(b, 0x7800);
    assert_eq!(t.open(), [id(a), id(b), id(b)]);
    t.enter(c, 0x7000);
    // An exception caught in a's body: a's next decision drops everything above it.
    t.decide(a, 0, 1);
    assert_eq!(t.open(), [id(a)]);
    // An exit drops what is above its entry and counts only its own iterations.
    t.enter(c, 0x7000);
    t.exit(a, &[7]);
    assert!(t.open().is_empty());
    assert_eq!(stats(tool, a), ((1, 1), vec![(7, 0, 0, 1)]));
    assert_eq!(stats(tool, c).1, [(0, 0, 0, 0)]);
    // The exit of an entry that is not open is ignored.
    t.exit(b, &[1, 1]);
    assert_eq!(stats(tool, b).1, [(0, 0, 0, 0), (0, 0, 0, 0)]);
}

/// A function's nest inlined into another nest's body shares its frame: the outer entry
/// stays open, and both count their iterations. Entering the outer nest again at that
/// frame drops both (they were left by a `longjmp` back into the function).
#[test]
fn a_nest_inlined_into_another_keeps_it_open() {
    let tool = tool("");
    let mut t = Thread::of(tool);
    let (outer, inlined) = (chain(1), chain(1));
    let id = |n: *mut Nest| unsafe { (*n).global_id };
    t.enter(outer, 0x9000);
    for _ in 0..3 {
        t.enter(inlined, 0x9000);
        assert_eq!(t.open(), [id(outer), id(inlined)]);
        t.exit(inlined, &[2]);
    }
    t.enter(inlined, 0x9000);
    t.enter(outer, 0x9000);
    assert_eq!(t.open(), [id(outer)]);
    t.exit(outer, &[3]);
    assert_eq!(stats(tool, outer), ((2, 2), vec![(3, 0, 0, 0)]));
    assert_eq!(stats(tool, inlined), ((4, 4), vec![(6, 0, 0, 0)]));
}

/// Recursion: the inner activation's entry is the innermost; once it exits, the outer
/// one's levels are as they were.
#[test]
fn recursive_entries_keep_their_own_levels() {
    let tool = tool("");
    let mut t = Thread::of(tool);
    let nest = chain(1);
    t.enter(nest, 0x9000);
    t.decide(nest, 0, 0);
    t.iter(nest, 0, 3);
    t.enter(nest, 0x8000);
    t.decide(nest, 0, 0);
    t.iter(nest, 0, 0);
    t.exit(nest, &[1]);
    let active = t.loops().active().unwrap();
    assert_eq!(
        (active.levels[0].vi, active.levels[0].version),
        (3, INSTRUMENTED)
    );
    t.exit(nest, &[4]);
    assert_eq!(stats(tool, nest), ((2, 2), vec![(5, 2, 0, 2)]));
}

/// With the tool disabled (`enabled=0`, `kage_set_enabled(0)`) entries and iterations are
/// counted but nothing is sampled, and an open sampled entry gets original chunks.
#[test]
fn disabled_tool_samples_nothing() {
    let tool = tool("enabled=0");
    let mut t = Thread::of(tool);
    let nest = chain(1);
    assert_eq!(t.enter(nest, 1), NEVER);
    t.exit(nest, &[2]);
    tool.set_enabled(true);
    assert_eq!(t.enter(nest, 1), DECIDE_NOW);
    tool.set_enabled(false);
    assert_eq!(t.decide(nest, 0, 0), ORIGINAL_TO_THE_END);
    t.exit(nest, &[2]);
    assert_eq!(stats(tool, nest), ((2, 1), vec![(4, 0, 1, 0)]));
}

/// A null, malformed or unknown descriptor is never registered and gets the original
/// version; a malformed one is marked so that it is not looked at again.
#[test]
fn unknown_and_malformed_nests_are_ignored() {
    let tool = tool("");
    let mut t = Thread::of(tool);
    assert_eq!(t.enter(std::ptr::null_mut(), 1), NEVER);
    let level = |parent, depth| LoopLevel {
        parent,
        depth,
        first_line: 1,
        last_line: 2,
    };
    let line = Selection::Line as u32;
    let bad = [
        raw_nest("f", "", line, vec![]),
        raw_nest("f", "", line, vec![level(NONE, 0); MAX_LEVELS as usize + 1]),
        raw_nest("f", "", 7, vec![level(NONE, 0)]),
        raw_nest("f", "", line, vec![level(0, 1)]),
        raw_nest("f", "", line, vec![level(NONE, 0), level(NONE, 1)]),
        raw_nest("f", "", line, vec![level(NONE, 0), level(0, 2)]),
        raw_nest("f", "", line, vec![level(NONE, 0), level(1, 1)]),
        // Level 2's parent, 0... fine; level 3's parent 1 is closed (2 came after it under 0).
        raw_nest(
            "f",
            "",
            line,
            vec![level(NONE, 0), level(0, 1), level(0, 1), level(1, 2)],
        ),
    ];
    let null_levels = raw_nest("f", "", line, vec![level(NONE, 0)]);
    unsafe { (*null_levels).levels = std::ptr::null() };
    for nest in bad.into_iter().chain([null_levels]) {
        assert_eq!(t.enter(nest, 1), NEVER);
        assert_eq!(unsafe { (*nest).global_id }, REJECTED);
        assert_eq!(t.decide(nest, 0, 0), ORIGINAL_TO_THE_END);
        t.iter(nest, 0, 0);
        t.exit(nest, &[1, 1, 1, 1]);
    }
    // A well-formed nest that was never entered (its entry ignored) only gets answers.
    let unseen = chain(1);
    assert_eq!(t.decide(unseen, 0, 0), ORIGINAL_TO_THE_END);
    t.exit(unseen, &[1]);
    assert_eq!(unsafe { (*unseen).global_id }, NONE);
    assert!(tool.report().nests.is_empty());
    assert!(t.open().is_empty());
}

/// Pre-order with siblings and a return to an outer level is accepted.
#[test]
fn pre_order_nests_are_valid() {
    // 0 { 1 { 2 } 3 } : 3's parent 0 is open after 2 (2's grandparent).
    let nest = nest_with(
        "g",
        "/g.c",
        Selection::Pragma,
        &[(NONE, 1, 9), (0, 2, 5), (1, 3, 4), (0, 6, 8)],
    );
    let info = unsafe { validate(nest) }.unwrap();
    assert_eq!(info.levels.len(), 4);
    assert_eq!(info.selected_by, Selection::Pragma);
    assert_eq!((info.function.as_str(), info.file.as_str()), ("g", "/g.c"));
}

/// The report's `"loops"` object, as `finish` writes it: nests by id (the order they first
/// ran), their source, selection and counts.
#[test]
fn the_report_lists_every_nest_that_ran() {
    let tool = tool("sample_iterations=2:sample_entries=1");
    let mut t = Thread::of(tool);
    let first = nest_with(
        "main",
        "/abs/x.c",
        Selection::Line,
        &[(NONE, 12, 20), (0, 14, 18)],
    );
    let second = nest_with("scale", "/abs/y.c", Selection::Pragma, &[(NONE, 3, 5)]);
    Program::new(second, &[3]).run(&mut t, 0x7000);
    Program::new(first, &[3, 3]).run(&mut t, 0x7000);
    let results = tool.finish(0);
    // What the runtime writes is what the report crate reads.
    let read = kage_report::Loops::from_tool_data(&results.top).expect("a valid report");
    assert_eq!(read, tool.report());
    // first: level 0 decides at 0 (chunk 2) and 2 (original); each of its instrumented
    // iterations enters level 1, which decides at 0 (chunk 2) and at 2 (original, resync,
    // so level 0 asks again at 1 with chunk 1).
    assert_eq!(
        Value::Object(results.top),
        json!({"loops": {
            "sample_iterations": 2,
            "sample_entries": 1,
            "nests": [
                {"id": 0, "function": "scale", "file": "/abs/y.c", "line": 3, "end_line": 5,
                 "selected_by": "pragma", "entries": 1, "sampled_entries": 1,
                 "levels": [
                     {"level": 0, "parent": null, "depth": 0, "line": 3, "end_line": 5,
                      "iterations": 3, "instrumented_iterations": 2,
                      "chunks": {"original": 1, "instrumented": 1}}]},
                {"id": 1, "function": "main", "file": "/abs/x.c", "line": 12, "end_line": 20,
                 "selected_by": "line", "entries": 1, "sampled_entries": 1,
                 "levels": [
                     {"level": 0, "parent": null, "depth": 0, "line": 12, "end_line": 20,
                      "iterations": 3, "instrumented_iterations": 2,
                      "chunks": {"original": 1, "instrumented": 2}},
                     {"level": 1, "parent": 0, "depth": 1, "line": 14, "end_line": 18,
                      "iterations": 9, "instrumented_iterations": 4,
                      "chunks": {"original": 2, "instrumented": 2}}]}
            ]
        }})
    );
    assert!((results.regions)(0).into_map().is_empty());
}

/// A forked child's report starts at the fork, and sampling with it; the other threads'
/// statistics are gone.
#[test]
fn a_forked_child_starts_anew() {
    let tool = tool("sample_entries=1");
    let nest = chain(1);
    let (mut parent, mut other) = (Thread::of(tool), Thread::of(tool));
    assert_eq!(parent.enter(nest, 1), DECIDE_NOW);
    assert_eq!(other.enter(nest, 1), NEVER);
    other.exit(nest, &[4]);
    tool.fork_child();
    parent.0.fork_survivor();
    // The open entry counts in the child and keeps its sample by claiming the child's.
    assert_eq!(parent.loops().active().map(|a| a.sampled), Some(true));
    parent.exit(nest, &[2]);
    assert_eq!(parent.enter(nest, 1), NEVER);
    parent.exit(nest, &[2]);
    assert_eq!(stats(tool, nest), ((2, 1), vec![(4, 0, 0, 0)]));
}

/// Every option's default is the rule's.
#[test]
fn options_default_to_vmads_sampling() {
    let sampling = Sampling::from_options(&Options::parse("", &[OPTIONS]).0);
    assert_eq!(
        sampling,
        Sampling {
            iterations: 10,
            entries: 8
        }
    );
    let (_, warnings) = Options::parse("sample_entries=-1:sample_iterations=x", &[OPTIONS]);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
}

#[test]
fn entries_after_sampling_skip_the_runtime_and_still_count() {
    // Two samples: the third entry finds them taken and marks the descriptor; from the
    // fourth on entries count themselves. Five entries of 4 x 3 iterations in all: 5
    // entries, 20 and 60 iterations; 2 sampled, instrumented 2 x 4 and 2 x 4 x 3.
    let tool = tool("sample_entries=2");
    let mut t = Thread::of(tool);
    let nest = chain(2);
    let mut program = Program::new(nest, &[4, 3]);
    for _ in 0..5 {
        program.run(&mut t, 1000);
    }
    assert_eq!(unsafe { (*nest).sampling_over }, 1);
    let counters = unsafe { std::slice::from_raw_parts((*nest).unsampled, 3) };
    assert_eq!(counters, [2, 8, 24], "entries 4 and 5 counted themselves");
    assert_eq!(
        stats(tool, nest),
        ((5, 2), vec![(20, 8, 0, 2), (60, 24, 0, 8)])
    );
    // A reset starts sampling again and counts the program's own counters from here on.
    tool.reset();
    assert_eq!(unsafe { (*nest).sampling_over }, 0);
    program.run(&mut t, 1000);
    assert_eq!(
        stats(tool, nest),
        ((1, 1), vec![(4, 4, 0, 1), (12, 12, 0, 4)])
    );
}
