//! Runs the plugin under `opt-22 -passes=kage` on the `.ll` files in tests/ir/ and checks the
//! result: snapshots of the whole output, plus explicit assertions for the ABI facts.

mod support;

use support::*;

/// Kind numbers from docs/abi.md.
const FUNCTION: u32 = 0;
const LOOP: u32 = 1;
const BODY: u32 = 2;
const INLINED: u32 = 3;

fn region(kind: u32, parent: u32, lines: (u32, u32), index: u32, name: &str, file: &str) -> Region {
    Region {
        kind,
        parent,
        first_line: lines.0,
        last_line: lines.1,
        local_index: index,
        name: name.into(),
        symbol: name.into(),
        file: file.into(),
        source_cell: NONE,
    }
}

/// The instructions of the block holding the first instruction that starts with `target`,
/// and that instruction's position in them.
fn lines_around<'a>(body: &'a str, target: &str) -> (Vec<&'a str>, usize) {
    for block in blocks(body) {
        if let Some(i) = block
            .instructions
            .iter()
            .position(|l| l.starts_with(target))
        {
            return (block.instructions.clone(), i);
        }
    }
    panic!("no instruction starting with {target:?} in:\n{body}");
}

#[test]
fn nested_loops_table_and_hooks() {
    let ir = instrument("nested_loops.ll");
    insta::assert_snapshot!("nested_loops", ir);
    let file = "/src/kage/tests/ir/nested_loops.c";
    // sum2d: function, outer loop + body, inner loop + body; find: function, loop + body.
    // Lines: sum2d is declared on line 4 and returns on 11; its loops span 6-10 and 7-9,
    // from their `for` to their closing braces (their `llvm.loop` metadata).
    // find's loop calls the inlined square() (line 2): a block mostly of find's own code, so
    // the inlined code counts as find's, at its call site.
    assert_eq!(
        regions(&ir),
        vec![
            region(FUNCTION, NONE, (4, 11), 0, "sum2d", file),
            region(LOOP, 0, (6, 10), 1, "sum2d", file),
            region(BODY, 1, (6, 10), 2, "sum2d", file),
            region(LOOP, 2, (7, 9), 3, "sum2d", file),
            region(BODY, 3, (7, 9), 4, "sum2d", file),
            region(FUNCTION, NONE, (14, 20), 5, "find", file),
            region(LOOP, 5, (15, 18), 6, "find", file),
            region(BODY, 6, (15, 18), 7, "find", file),
        ]
    );
    let type_line = global_line(&ir, "__kage_regions").unwrap();
    assert!(type_line.starts_with(
        "@__kage_regions = internal global [8 x { i32, i32, i32, i32, i32, i32, ptr, ptr, ptr, ptr, ptr, ptr, i32, i32, i32, i32 }]"
    ));
    check_registration(&ir);
    check_hook_placement(&ir, &[]);
    assert!(
        strings(&ir).values().any(|s| s == "nested_loops.c"),
        "module_name"
    );

    let sum2d = function_body(&ir, "sum2d");
    let count =
        |body: &str, call: &str| body.lines().filter(|l| l.trim().starts_with(call)).count();
    assert_eq!(
        count(sum2d, &frame_call_prefix(&ir, "__kage_func_enter", 0)),
        1
    );
    for lp in [1, 3] {
        let call = region_call(&ir, "__kage_loop_iter_unless_iterating", lp);
        assert_eq!(count(sum2d, &call), 1, "{call}");
    }
    // The inner loop exits into the outer loop's latch (settle to the outer body, 2); the
    // outer loop exits into the return block (settle to the function, 0).
    assert_eq!(
        count(sum2d, "call void @__kage_settle_unless_innermost("),
        2
    );
    for region in [2, 0] {
        let call = region_call(&ir, "__kage_settle_unless_innermost", region);
        assert_eq!(count(sum2d, &call), 1, "{call}");
    }
    // The loop_iter hooks sit in the loop headers: blocks that branch back to themselves
    // (inner) or are targets of the latch that settles the inner loop (outer).
    for block in blocks(sum2d) {
        let has = |call: &str| block.instructions.contains(&call);
        if has(&region_call(&ir, "__kage_loop_iter_unless_iterating", 3)) {
            assert!(
                block
                    .instructions
                    .last()
                    .unwrap()
                    .contains(&format!("label %{}", block.label)),
                "inner header {block:?}"
            );
        }
        if has(&region_call(&ir, "__kage_settle_unless_innermost", 2)) {
            let outer_header = blocks(sum2d)
                .into_iter()
                .find(|b| {
                    b.instructions
                        .iter()
                        .any(|l| *l == region_call(&ir, "__kage_loop_iter_unless_iterating", 1))
                })
                .unwrap()
                .label;
            assert!(
                block
                    .instructions
                    .last()
                    .unwrap()
                    .contains(&format!("label %{outer_header}")),
                "outer latch {block:?}"
            );
        }
    }
    let find = function_body(&ir, "find");
    assert_eq!(
        count(find, &region_call(&ir, "__kage_settle_unless_innermost", 5)),
        2,
        "two exits of find's loop"
    );
    assert_eq!(count(find, "call void @__kage_load(ptr %"), 1);

    // Calls get debug locations in functions with debug info.
    for line in sum2d
        .lines()
        .chain(find.lines())
        .filter(|l| l.contains("call void @__kage_"))
    {
        assert!(line.contains(", !dbg !"), "hook call without !dbg: {line}");
    }
    // Calling the runtime breaks `memory(argmem: read)`; it must be gone.
    let define = sum2d.lines().next().unwrap();
    let group = define
        .rsplit(" #")
        .next()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let attributes = ir
        .lines()
        .find(|l| l.starts_with(&format!("attributes #{group} = ")))
        .unwrap();
    assert!(
        !attributes.contains("memory(") && !attributes.contains("nosync"),
        "{attributes}"
    );
}

/// The count build: each segment's loads, stores and bytes added at its start (after the
/// block's region hooks): to `__kage_count`, masked by `__kage_gate`, or, in a function
/// without calls (a tree kept in registers), to its locals; run-time `llvm.mem*` lengths
/// added right before the call (an empty one is no access); `cmpxchg` keeps its hook.
#[test]
fn count_build_adds_each_segments_counts_inline() {
    let ir = instrument_in(Mode::Counts, "accesses.ll");
    insta::assert_snapshot!("accesses_counts", ir);
    check_registration_in(Mode::Counts, &ir);
    assert!(!ir.contains("@__kage_load(") && !ir.contains("@__kage_store("));
    // What each function adds to its records and the thread's cells: the values its
    // segments pass to the helper that adds them when counting is on (0 for a counter the
    // segment does not add to, left out here).
    let added = |function: &str| -> Vec<String> {
        (function_body(&ir, function).lines())
            .filter_map(|line| line.split("@__kage_count_add(").nth(1))
            .flat_map(|args| {
                let args = args.split(')').next().unwrap();
                // The record, its four counts, then the locals where the totals wait.
                (args.split(", ").skip(1).take(4))
                    .map(|arg| arg.trim_start_matches("i64 ").to_string())
                    .collect::<Vec<_>>()
            })
            .filter(|value| value != "0")
            .collect()
    };
    // What a function without calls adds to its locals: (cell, value), cells counted as
    // in `__kage_count` (0 loads, 1 stores, 2 bytes read, 3 bytes written).
    let added_locally = |function: &str| -> Vec<(usize, String)> {
        let lines: Vec<&str> = function_body(&ir, function)
            .lines()
            .map(str::trim)
            .collect();
        (lines.windows(2))
            .filter_map(|pair| {
                let local = pair[0].split("load i64, ptr %kage.count").nth(1)?;
                let k: usize = local.split(',').next()?.parse().unwrap_or(0);
                let value = pair[1].split(" = add i64 %").nth(1)?.split(", ").nth(1)?;
                (k % 5 != 0).then(|| (k % 5 - 1, value.to_string()))
            })
            .collect()
    };
    let cells = |v: &[(usize, &str)]| -> Vec<(usize, String)> {
        v.iter().map(|&(k, n)| (k, n.to_string())).collect()
    };
    assert_eq!(
        added_locally("vector_load"),
        cells(&[(0, "1")]),
        "one load of 16 bytes: cell 0; its bytes are derived by the report"
    );
    assert!(
        ir.lines()
            .any(|l| l.contains(" = mul i64 %") && l.ends_with(", 16")),
        "the report's bytes read: loads times 16"
    );
    assert!(added("vector_load").is_empty());
    let atomics = added("atomics");
    assert_eq!(
        atomics[..4],
        ["2", "1", "8", "4"],
        "load, atomicrmw at the segment's start"
    );
    // The cmpxchg right after it: a load of 8 bytes, and a store of 8 when it wrote.
    assert_eq!(
        (&atomics[4], &atomics[6]),
        (&"1".to_string(), &"8".to_string())
    );
    assert!(
        atomics[5].starts_with('%') && atomics[7].starts_with('%'),
        "{atomics:?}"
    );
    let body: Vec<&str> = function_body(&ir, "atomics").lines().collect();
    let position = |text: &str| body.iter().position(|l| l.contains(text)).unwrap();
    let enter = position("@__kage_count_enter(");
    let add = position("@__kage_count_add(");
    let first_access = position("load atomic i32, ptr %p");
    let written = position("extractvalue { i64, i1 } %pair, 1");
    assert!(
        enter < add && add < first_access && first_access < written,
        "{body:#?}"
    );
    // The run-time length is added right before its memmove, the constants at the start.
    let body: Vec<&str> = function_body(&ir, "mem_intrinsics").lines().collect();
    let adds: Vec<usize> = (body.iter().enumerate())
        .filter(|(_, l)| l.contains("load i64, ptr %kage.count1,"))
        .map(|(i, _)| i)
        .collect();
    let memmove = body
        .iter()
        .position(|l| l.contains("@llvm.memmove"))
        .unwrap();
    let memcpy = body
        .iter()
        .position(|l| l.contains("@llvm.memcpy.p0"))
        .unwrap();
    assert_eq!(adds.len(), 2, "{body:#?}");
    assert!(
        adds[0] < memcpy && memcpy < adds[1] && adds[1] < memmove,
        "{body:#?}"
    );
}

/// In a count build nothing calls the runtime's region hooks: each function's entry calls
/// the inline helper that pushes its activation (`__kage_count_enter`), or none when the
/// whole function is kept in locals; in `ws_loops.ll`, the loops without calls are kept in
/// locals, each reported at its exits before the regions around it close there.
#[test]
fn count_build_changes_regions_inline() {
    let ir = instrument_in(Mode::Counts, "ws_loops.ll");
    for hook in [
        "@__kage_loop_iter",
        "@__kage_settle",
        "@__kage_func_enter(",
        "@__kage_func_exit(",
    ] {
        assert!(!ir.contains(hook), "{hook} in {ir}");
    }
    let mut reports = 0;
    for line in ir.lines().filter(|l| l.starts_with("define ")) {
        let name = &line[line.find('@').unwrap() + 1..line.find('(').unwrap()];
        if name.starts_with("__kage") {
            continue;
        }
        let body = function_body(&ir, name);
        assert!(
            body.matches("call { ptr, i32 } @__kage_count_enter(")
                .count()
                <= 1,
            "{body}"
        );
        for block in blocks(body) {
            let calls: Vec<&&str> = (block.instructions.iter())
                .filter(|i| i.starts_with("call "))
                .collect();
            let flush = calls.iter().position(|i| i.contains("@__kage_count_flush"));
            let close = calls
                .iter()
                .position(|i| i.contains("@__kage_count_close("));
            if let Some(at) = flush {
                assert!(close.is_none_or(|c| at < c), "{:#?}", block.instructions);
                reports += 1;
            }
        }
    }
    assert!(reports > 1, "{ir}");
    // The helpers: the entry's checks call the runtime only when they fail.
    let enter = function_body(&ir, "__kage_count_enter");
    for needed in [
        "@llvm.threadlocal.address.p0(ptr @__kage_count_thread)",
        "call ptr @__kage_count_prepare(ptr %0, ptr %2)",
        "icmp ult i32",
        "icmp ugt i64",
    ] {
        assert!(enter.contains(needed), "{needed} in {enter}");
    }
    let close = function_body(&ir, "__kage_count_close");
    assert!(
        close.contains("@llvm.threadlocal.address.p0(ptr @__kage_count)"),
        "{close}"
    );
}

/// A loop kept in locals after a call: the thread notes it as the tree it runs
/// (`__kage_count_running`, for a fatal signal's report) once per loop instance, in the
/// preheader, not in the loop; the report clears the note.
#[test]
fn count_build_notes_a_loop_kept_in_locals_in_its_preheader() {
    let ir = instrument_in(Mode::Counts, "loop_after_call.ll");
    let f = function_body(&ir, "sum_after_note");
    assert!(f.contains("@__kage_count_enter("), "{f}");
    let is_note = |i: &&str| i.starts_with("store atomic ptr ") && i.contains("@__kage_regions");
    let noted: Vec<Block> = (blocks(f).into_iter())
        .filter(|b| b.instructions.iter().any(is_note))
        .collect();
    assert_eq!(noted.len(), 1, "{f}");
    let preheader = &noted[0].instructions;
    assert!(
        preheader.last().unwrap().starts_with("br label"),
        "{preheader:#?}"
    );
    // The report notes what runs after the tree: nothing (the function pushed its
    // activation at its entry).
    let report = (f.lines())
        .find(|l| l.contains("call void @__kage_count_flush("))
        .expect("the loop's report");
    assert!(report.contains(", ptr null)"), "{report}");
    let flush = function_body(&ir, "__kage_count_flush");
    let last = flush.lines().next().unwrap().split("ptr %").last().unwrap();
    let last = last.split(')').next().unwrap();
    assert!(
        flush.contains(&format!("store atomic ptr %{last}, ")),
        "{flush}"
    );
}

/// In a count build, a function that can return without calling (`get` in `deferred.ll`)
/// defers its entry: the thread's records at once (`__kage_count_quiet_enter`), its
/// activation only right before its call (`__kage_count_materialize`), its own counts in
/// locals, reported at its return (`__kage_count_leave`). One that always calls pushes its
/// activation at its entry.
#[test]
fn count_build_defers_the_entry_of_a_function_that_may_return_without_calling() {
    let ir = instrument_in(Mode::Counts, "deferred.ll");
    let get = function_body(&ir, "get");
    assert!(get.contains("@__kage_count_quiet_enter("), "{get}");
    assert!(!get.contains("@__kage_count_enter("), "{get}");
    let lines: Vec<&str> = get.lines().map(str::trim).collect();
    let call = lines.iter().position(|l| l.contains("@slow(")).unwrap();
    assert!(
        lines[call - 1].contains("@__kage_count_materialize("),
        "{get}"
    );
    let leaves = lines
        .iter()
        .filter(|l| l.contains("@__kage_count_leave("))
        .count();
    assert_eq!(leaves, 1, "{get}");
    // The quiet path's load goes to the locals: nothing atomic but the running region.
    assert!(
        !get.contains("atomicrmw") && !get.contains("atomic i64"),
        "{get}"
    );
    let always = function_body(&ir, "always");
    assert!(always.contains("@__kage_count_enter("), "{always}");
    assert!(!always.contains("@__kage_count_quiet_enter("), "{always}");
}

/// In a count build, a function without calls (`sum2d`, a loop nest, in `nested_loops.ll`)
/// is one tree kept in locals: no activation, no region change in the records; its entry
/// counts the function's instance, each header an instance of its body, each loop's entry
/// edge an instance of the loop, and the blocks' counts go to their regions' locals. Before
/// its return it reports the five regions at once, to the records it looks up then.
#[test]
fn count_build_reports_a_function_without_calls_whole() {
    let ir = instrument_in(Mode::Counts, "nested_loops.ll");
    let sum2d = function_body(&ir, "sum2d");
    for absent in [
        "@__kage_count_enter(",
        "@__kage_count_open(",
        "@__kage_count_close(",
        "@__kage_count)",
    ] {
        assert!(!sum2d.contains(absent), "{absent} in {sum2d}");
    }
    assert_eq!(sum2d.matches("= alloca i64").count(), 25);
    let blocks = blocks(sum2d);
    let returns: Vec<&Block> = (blocks.iter())
        .filter(|b| b.instructions.last().is_some_and(|i| i.starts_with("ret ")))
        .collect();
    assert_eq!(returns.len(), 1);
    let instructions = &returns[0].instructions;
    let n = instructions.len();
    assert!(
        instructions[n - 3].contains("call ptr @__kage_count_records(ptr @__kage_module)")
            && instructions[n - 2].starts_with("call void @__kage_count_flush"),
        "{instructions:#?}"
    );
    // The function noted once (as the tree the thread runs); an instance added for the
    // function, for each loop and its body on the loop's entry edge, for each body on its
    // back edge.
    assert_eq!(sum2d.matches("store atomic ptr @__kage_regions").count(), 1);
    let added = (sum2d.lines())
        .filter(|i| i.contains("= add i64 %") && strip_metadata(i.trim()).ends_with(", 1"))
        .count();
    // The function, two loops and two bodies twice, and a load counted in the inner body.
    assert_eq!(added, 8, "{sum2d}");
    let report = function_body(&ir, "__kage_count_flush");
    for needed in [
        "icmp eq i64",
        "@__kage_gate",
        "@__kage_count)",
        "store i64 0, ptr %",
    ] {
        assert!(report.contains(needed), "{needed} in {report}");
    }
}

/// A call of a C library function that returns without calling back and writes only what
/// its arguments point to (`bcmp`, from `memcmp`) cuts no segment: `count_equal`, whose loop
/// calls it, is counted whole in locals, as a function without calls. `strdup` (which calls
/// the allocator) and the program's own function declared `leaf` and `const` (its body is
/// instrumented) still do: their callers push an activation.
#[test]
fn count_build_does_not_cut_at_library_calls_that_return_without_callbacks() {
    let ir = instrument_in(Mode::Counts, "library_calls.ll");
    let count_equal = function_body(&ir, "count_equal");
    assert!(count_equal.contains("call i32 @bcmp("), "{count_equal}");
    assert!(
        !count_equal.contains("@__kage_count_enter("),
        "{count_equal}"
    );
    assert!(count_equal.contains("@__kage_count_flush"), "{count_equal}");
    for caller in ["copy", "mixed"] {
        let body = function_body(&ir, caller);
        assert!(body.contains("@__kage_count_enter("), "{body}");
    }
}

/// In a count build, an inlined call without calls inside a loop (`pick`, whose code is the
/// loop's header and two branches), in a function without calls: one tree, nothing settled
/// into; the loop's entry from the function's guard (a conditional branch) gets a block of
/// its own, which adds an instance of the loop, of its body and of `pick`, and the back edge
/// one of the body and of `pick`. A count-calls build settles into `pick`.
#[test]
fn count_build_reports_an_inlined_call_in_a_quiet_loop_whole() {
    let ir = instrument_in(Mode::Counts, "inlined_leaf.ll");
    let file = "/src/inlined_leaf.c";
    assert_eq!(
        regions(&ir),
        vec![
            region(FUNCTION, NONE, (10, 15), 0, "calls_pick", file),
            region(LOOP, 0, (12, 13), 1, "calls_pick", file),
            region(BODY, 1, (12, 13), 2, "calls_pick", file),
            region(INLINED, 2, (4, 7), 3, "pick", file),
        ]
    );
    let body = function_body(&ir, "calls_pick");
    assert!(!body.contains("@__kage_count_enter("), "{body}");
    assert_eq!(
        body.matches("call void @__kage_count_flush").count(),
        1,
        "{body}"
    );
    let blocks = blocks(body);
    let instances = |label: &str| {
        let block = (blocks.iter()).find(|b| b.label == label).expect(label);
        (block.instructions.iter())
            .filter(|i| i.contains("= add i64 %") && strip_metadata(i).ends_with(", 1"))
            .count()
    };
    assert_eq!(instances("._crit_edge"), 3, "the loop's entry edge: {body}");
    assert_eq!(instances("._crit_edge1"), 2, "its back edge: {body}");
    // Only calls_pick's store after the loop counts, and locally too.
    assert!(!body.contains("@__kage_count)"), "{body}");
    let calls = instrument_in(Mode::Calls, "inlined_leaf.ll");
    assert!(function_body(&calls, "calls_pick").contains(&region_call(
        &calls,
        "__kage_settle_unless_innermost",
        3
    )));
}

#[test]
fn memory_accesses() {
    let ir = instrument("accesses.ll");
    insta::assert_snapshot!("accesses", ir);
    check_registration(&ir);
    check_hook_placement(&ir, &[]);
    let expect_before = |function: &str, target: &str, calls: &[&str]| {
        let (lines, i) = lines_around(function_body(&ir, function), target);
        assert!(i >= calls.len(), "{lines:#?}");
        assert_eq!(
            &lines[i - calls.len()..i],
            calls,
            "before {target} in @{function}"
        );
    };
    expect_before(
        "vector_load",
        "%v = load <4 x i32>",
        &["call void @__kage_load(ptr %p, i64 16)"],
    );
    expect_before(
        "scalar_stores",
        "store i64 7",
        &["call void @__kage_store(ptr %p, i64 8)"],
    );
    expect_before(
        "scalar_stores",
        "store volatile i8",
        &["call void @__kage_store(ptr %p, i64 1)"],
    );
    expect_before(
        "scalar_stores",
        "store i1 %b",
        &["call void @__kage_store(ptr %p, i64 1)"],
    );
    expect_before(
        "scalar_stores",
        "store x86_fp80",
        &["call void @__kage_store(ptr %p, i64 10)"],
    );
    expect_before(
        "scalar_stores",
        "store { i32, i8 }",
        &["call void @__kage_store(ptr %p, i64 8)"],
    );
    expect_before(
        "atomics",
        "%a = load atomic i32",
        &["call void @__kage_load(ptr %p, i64 4)"],
    );
    expect_before(
        "atomics",
        "%old = atomicrmw add",
        &[
            "call void @__kage_load(ptr %p, i64 4)",
            "call void @__kage_store(ptr %p, i64 4)",
        ],
    );
    expect_before(
        "mem_intrinsics",
        "call void @llvm.memcpy.p0.p0.i64",
        &[
            "call void @__kage_load(ptr %s, i64 100)",
            "call void @__kage_store(ptr %d, i64 100)",
        ],
    );
    expect_before(
        "mem_intrinsics",
        "call void @llvm.memmove.p0.p0.i32",
        &[
            "%2 = zext i32 %n to i64",
            "call void @__kage_load(ptr %s, i64 %2)",
            "call void @__kage_store(ptr %d, i64 %2)",
        ],
    );
    expect_before(
        "mem_intrinsics",
        "call void @llvm.memset.p0.i64",
        &["call void @__kage_store(ptr %d, i64 64)"],
    );
    expect_before(
        "mem_intrinsics",
        "call void @llvm.memcpy.inline",
        &[
            "call void @__kage_load(ptr %s, i64 8)",
            "call void @__kage_store(ptr %d, i64 8)",
        ],
    );
    expect_before(
        "mem_intrinsics",
        "call void @llvm.memset.inline",
        &["call void @__kage_store(ptr %d, i64 4)"],
    );

    // cmpxchg: after it, extract the success bit, widen it to i32, pass it with size 8.
    let (lines, i) = lines_around(function_body(&ir, "atomics"), "%pair = cmpxchg");
    // (%1 is the frame address passed to __kage_func_enter.)
    assert_eq!(lines[i + 1], "%2 = extractvalue { i64, i1 } %pair, 1");
    assert_eq!(lines[i + 2], "%3 = zext i1 %2 to i32");
    assert_eq!(
        lines[i + 3],
        "call void @__kage_cmpxchg(ptr %p, i64 8, i32 %3)"
    );
    assert!(!lines[..i].iter().any(|l| l.contains("__kage_cmpxchg")));

    // Scalable vectors and non-zero address spaces are left alone.
    let skipped = function_body(&ir, "not_instrumented");
    assert!(
        !skipped.contains("@__kage_load") && !skipped.contains("@__kage_store"),
        "{skipped}"
    );

    // Both returns of two_returns exit the function.
    let two = function_body(&ir, "two_returns");
    assert_eq!(
        two.matches(&region_call(&ir, "__kage_func_exit", 5))
            .count(),
        2
    );
    assert_eq!(regions(&ir).len(), 6);

    // The hooks are declared with the exact C signatures.
    for decl in [
        "declare extern_weak void @__kage_register_module(ptr)",
        "declare void @__kage_func_enter(ptr, ptr)",
        "declare void @__kage_resume_at(ptr, ptr)",
        "declare void @__kage_func_exit(ptr)",
        "declare void @__kage_loop_iter(ptr)",
        "declare void @__kage_settle(ptr)",
        "declare void @__kage_load(ptr, i64)",
        "declare void @__kage_store(ptr, i64)",
        "declare void @__kage_cmpxchg(ptr, i64, i32)",
    ] {
        assert!(ir.lines().any(|l| l.starts_with(decl)), "missing {decl}");
    }
}

#[test]
fn existing_global_ctors_are_kept() {
    let ir = instrument("ctors.ll");
    insta::assert_snapshot!("ctors", ir);
    check_registration(&ir);
    assert_eq!(
        global_line(&ir, "llvm.global_ctors").unwrap(),
        "@llvm.global_ctors = appending global [2 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 65535, ptr @init, ptr null }, { i32, ptr, ptr } { i32 1, ptr @__kage_module_ctor, ptr null }]"
    );
    assert_eq!(
        global_line(&ir, "llvm.global_dtors").unwrap(),
        "@llvm.global_dtors = appending global [2 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 65535, ptr @fini, ptr null }, { i32, ptr, ptr } { i32 1, ptr @__kage_module_dtor, ptr null }]"
    );
    assert!(!function_body(&ir, "__kage_module_ctor").contains("__kage_func_enter"));
    assert!(function_body(&ir, "__kage_module_dtor")
        .contains("call void @__kage_unregister_module(ptr @__kage_module)"));
    // Functions without debug info: lines unknown (0), file "".
    assert_eq!(
        regions(&ir)[0],
        region(FUNCTION, NONE, (0, 0), 0, "init", "")
    );
}

#[test]
fn exceptions_settle_after_landingpad_and_exit_before_resume() {
    let ir = instrument("eh.ll");
    insta::assert_snapshot!("eh", ir);
    check_registration(&ir);
    check_hook_placement(&ir, &[]);
    let table = regions(&ir);
    assert_eq!(table.len(), 3);
    assert_eq!(table[0].name, "loop(int*, int)");
    assert_eq!(table[0].symbol, "_Z4loopPii");
    let body = function_body(&ir, "_Z4loopPii");
    let lpad = blocks(body)
        .into_iter()
        .find(|b| b.label == "lpad")
        .unwrap();
    assert_eq!(lpad.instructions[0], "%lp = landingpad { ptr, i32 }");
    assert_eq!(
        lpad.instructions[1],
        "%1 = call ptr @llvm.addressofreturnaddress.p0()"
    );
    assert_eq!(
        lpad.instructions[2],
        format!("{}1)", frame_call_prefix(&ir, "__kage_resume_at", 0))
    );
    assert_eq!(
        lpad.instructions[3..],
        vec![
            region_call(&ir, "__kage_settle_unless_innermost", 0).as_str(),
            "call void @__kage_store(ptr %p, i64 4)",
            "store i32 -1, ptr %p, align 4",
            region_call(&ir, "__kage_func_exit", 0).as_str(),
            "resume { ptr, i32 } %lp",
        ]
    );
    let header = blocks(body)
        .into_iter()
        .find(|b| b.label == "header")
        .unwrap();
    assert_eq!(
        header.instructions[1],
        region_call(&ir, "__kage_loop_iter_unless_iterating", 1)
    );
}

#[test]
fn odd_control_flow_and_skipped_functions() {
    let ir = instrument("odd_cfg.ll");
    insta::assert_snapshot!("odd_cfg", ir);
    check_registration(&ir);
    check_hook_placement(&ir, &["dead.ret"]);
    let table = regions(&ir);
    let summary: Vec<(u32, u32, u32, &str)> = table
        .iter()
        .map(|r| (r.kind, r.parent, r.local_index, r.name.as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (FUNCTION, NONE, 0, "irreducible"), // its cycle is irreducible: no loop entry
            (FUNCTION, NONE, 1, "self_loop_and_dead_code"),
            (LOOP, 1, 2, "self_loop_and_dead_code"),
            (BODY, 2, 3, "self_loop_and_dead_code"),
            (FUNCTION, NONE, 4, "ns::tailer(int)"),
        ]
    );
    assert_eq!(table[4].symbol, "_ZN2ns6tailerEi");
    assert!(!function_body(&ir, "irreducible").contains("__kage_loop_iter"));
    assert!(!function_body(&ir, "irreducible").contains("__kage_settle"));

    let self_loop = function_body(&ir, "self_loop_and_dead_code");
    let blocks_by_label = |label: &str| {
        blocks(self_loop)
            .into_iter()
            .find(|b| b.label == label)
            .unwrap()
            .instructions
    };
    assert_eq!(
        blocks_by_label("spin")[1],
        region_call(&ir, "__kage_loop_iter_unless_iterating", 2)
    );
    assert_eq!(
        blocks_by_label("done")[0],
        region_call(&ir, "__kage_settle_unless_innermost", 1)
    );
    // Unreachable code: accesses still reported, no region hooks.
    assert_eq!(
        blocks_by_label("dead")[0],
        "call void @__kage_load(ptr %p, i64 4)"
    );
    assert_eq!(blocks_by_label("dead.ret"), vec!["ret i32 %x"]);

    // musttail: the exit hook goes before the call, nothing between call and ret.
    let tailer: Vec<&str> = blocks(function_body(&ir, "_ZN2ns6tailerEi"))
        .remove(0)
        .instructions;
    assert_eq!(
        tailer[2..],
        [
            region_call(&ir, "__kage_func_exit", 4).as_str(),
            "%r = musttail call i32 @callee(i32 %x)",
            "ret i32 %r",
        ]
    );

    for skipped in ["opted_out", "__kage_internal", "naked_fn"] {
        assert!(
            !function_body(&ir, skipped).contains("call void @__kage_"),
            "@{skipped} must not be instrumented"
        );
    }
}

#[test]
fn module_without_instrumentable_functions_is_unchanged() {
    let plain = run_opt("declarations_only.ll", None);
    let instrumented = instrument("declarations_only.ll");
    assert_eq!(instrumented, plain);
    assert!(!instrumented.contains("__kage_module") && !instrumented.contains("llvm.global_ctors"));
}

#[test]
fn running_twice_instruments_once() {
    let once = instrument("nested_loops.ll");
    let twice = run_opt("nested_loops.ll", Some("kage,kage"));
    assert_eq!(twice, once);
}

#[test]
fn a_second_return_from_setjmp_resumes_in_its_region() {
    let ir = instrument("setjmp.ll");
    insta::assert_snapshot!("setjmp", ir);
    check_registration(&ir);
    let body = function_body(&ir, "main");
    // setjmp is called inside the loop: control may come back there from a longjmp.
    let (instructions, at) = lines_around(body, "%r = call i32 @_setjmp");
    assert!(instructions[at + 1].ends_with(" = call ptr @llvm.addressofreturnaddress.p0()"));
    assert!(instructions[at + 2].starts_with(&frame_call_prefix(&ir, "__kage_resume_at", 2)));
    // Plain calls get nothing.
    let (instructions, at) = lines_around(body, "call void @work()");
    assert!(!instructions[at + 1].contains("__kage_resume_at"));
}

// ---------------------------------------------------------------------------------------
// Working-set instrumentation (KAGE_TOOL=working-set, docs/abi.md "Working-set
// instrumentation").

/// Mode-0 hooks, none of which may appear in modes 1 and 2.
const CALL_MODE_HOOKS: &[&str] = &[
    "@__kage_func_enter",
    "@__kage_func_exit",
    "@__kage_loop_iter",
    "@__kage_settle",
    "@__kage_resume_at",
    "@__kage_load",
    "@__kage_store",
    "@__kage_cmpxchg",
];

fn assert_no_call_mode_hooks(ir: &str) {
    for hook in CALL_MODE_HOOKS {
        assert!(!ir.contains(hook), "{hook} in working-set output");
    }
}

/// The lines of a block that call the working-set helpers or the runtime, or other
/// functions (the cuts), in order.
fn ws_calls<'a>(instructions: &[&'a str]) -> Vec<&'a str> {
    instructions
        .iter()
        .copied()
        .filter(|l| l.starts_with("call ") || l.starts_with("invoke "))
        // The local budget's copies are checked on their own.
        .filter(|&l| l != BUDGET_LOAD && l != BUDGET_STORE)
        .collect()
}

/// The table operand of function `name`'s entry (`+ offset`: its loops and bodies).
fn region_of(ir: &str, name: &str, offset: u32) -> String {
    let index = regions(ir)
        .iter()
        .find(|r| r.kind == FUNCTION && r.symbol == name)
        .unwrap_or_else(|| panic!("no table entry for {name}"))
        .local_index;
    region_operand(ir, index + offset)
}

fn budget_check(region: &str, k: &str) -> String {
    format!("call void @__kage_ws_budget_check({region}, i64 {k}, ptr %kage.budget)")
}

/// `k` accesses spent from the local budget, without a check (not a checkpoint).
fn budget_spend(k: &str) -> String {
    format!("call void @__kage_ws_budget_spend(i64 {k}, ptr %kage.budget)")
}

/// The budget check inside a chunk helper, on the local budget it is passed.
fn chunk_budget_check(region: &str, k: &str) -> String {
    format!("call void @__kage_ws_budget_check({region}, i64 {k}, ptr %local_budget)")
}

/// The function's local budget copied to the thread-local / reloaded from it.
const BUDGET_STORE: &str = "call void @__kage_ws_budget_store(ptr %kage.budget)";
const BUDGET_LOAD: &str = "call void @__kage_ws_budget_load(ptr %kage.budget)";

/// A mark of any length (`__kage_ws_mark_range`).
fn mark(range: &str) -> String {
    format!("call void @__kage_ws_mark_range({range})")
}

/// A mark of at most 16 bytes: at most two lines (`__kage_ws_mark_pair`).
fn mark_pair(range: &str) -> String {
    format!("call void @__kage_ws_mark_pair({range})")
}

/// A mark inside one line, whatever its size (`__kage_ws_mark_line`).
fn mark_line(range: &str) -> String {
    format!("call void @__kage_ws_mark_line({range})")
}

fn block<'a>(body: &'a str, label: &str) -> Vec<&'a str> {
    blocks(body)
        .into_iter()
        .find(|b| b.label == label)
        .unwrap_or_else(|| panic!("no block {label:?} in:\n{body}"))
        .instructions
}

/// The instruction defining `%value` in `body` (right-hand side of `%value = ...`).
fn definition<'a>(body: &'a str, value: &str) -> &'a str {
    let prefix = format!("{value} = ");
    body.lines()
        .map(|l| strip_metadata(l.trim()))
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no definition of {value}"))
}

/// Every budget-check and mark call of every function, in order: what decides the
/// interval boundaries, which must not depend on the mode.
fn checks_and_marks(ir: &str) -> Vec<String> {
    ir.lines()
        .map(|l| strip_metadata(l.trim()))
        .filter(|l| {
            l.contains("@__kage_ws_budget_check(")
                || l.contains("@__kage_ws_mark_")
                || l.contains("@__kage_ws_chunk")
        })
        .filter(|l| l.starts_with("call "))
        .map(str::to_string)
        .collect()
}

#[test]
fn working_set_segments_checks_and_coalesced_marks() {
    let ir = instrument_in(Mode::WorkingSet, "ws_segments.ll");
    insta::assert_snapshot!("ws_segments", ir);
    check_registration_in(Mode::WorkingSet, &ir);
    assert_no_call_mode_hooks(&ir);
    let calls = |name: &str| ws_calls(&blocks(function_body(&ir, name)).remove(0).instructions);

    // p[0..3] as i32: 4 accesses, one 16-byte mark.
    let region = region_of(&ir, "four_ints", 0);
    assert_eq!(
        calls("four_ints"),
        [budget_check(&region, "4"), mark_pair("ptr %p, i64 16")]
    );
    // p[0] and p[10] as i64: 72 bytes apart, two marks.
    let region = region_of(&ir, "far_apart", 0);
    assert_eq!(
        calls("far_apart"),
        [
            budget_check(&region, "2"),
            mark_line("ptr %p, i64 8"),
            mark_line("ptr %p10, i64 8")
        ]
    );
    // The call splits the block: marks before it, and after it the segment spends its
    // access (no checkpoint there) and marks p again (the call may have ticked).
    let region = region_of(&ir, "split_by_call", 0);
    let split = blocks(function_body(&ir, "split_by_call"))
        .remove(0)
        .instructions;
    let at_call = split
        .iter()
        .position(|l| *l == "call void @opaque()")
        .unwrap();
    // The local budget goes back to the thread-local before the call and is reloaded after.
    assert_eq!(split[at_call - 1], BUDGET_STORE);
    // Each mark right after the last access it covers.
    for (access, mark) in [
        ("store i32 1, ptr %p", "ptr %p"),
        ("store i32 2, ptr %q", "ptr %q"),
    ] {
        let at = split.iter().position(|l| l.starts_with(access)).unwrap();
        assert_eq!(split[at + 1], mark_line(&format!("{mark}, i64 4")));
    }
    assert_eq!(split[at_call + 1], BUDGET_LOAD);
    assert_eq!(split[at_call + 2], budget_spend("1"));
    assert_eq!(
        ws_calls(&split),
        [
            budget_check(&region, "2"),
            mark_line("ptr %p, i64 4"),
            mark_line("ptr %q, i64 4"),
            "call void @opaque()".to_string(),
            budget_spend("1"),
            mark_line("ptr %p, i64 4"),
        ]
    );
    // Fields and globals through constant offsets; llvm.assume cuts nothing; a variable
    // index starts a base of its own.
    let region = region_of(&ir, "fields_and_globals", 0);
    assert_eq!(
        calls("fields_and_globals"),
        [
            budget_check(&region, "6"),
            mark_pair("ptr %s, i64 16"),
            "call void @llvm.assume(i1 true)".to_string(),
            mark_pair("ptr @table, i64 12"),
            mark_pair("ptr %vi, i64 8"),
        ]
    );
    // memcpy merges with the store before it; unknown and large lengths are marked alone
    // (the helper marks nothing for a zero length); a zero-length memset marks nothing.
    let region = region_of(&ir, "mem", 0);
    let mem_calls: Vec<&str> = calls("mem")
        .into_iter()
        .filter(|l| !l.contains("@llvm.mem"))
        .collect();
    assert_eq!(
        mem_calls,
        [
            budget_check(&region, "5"),
            mark_pair("ptr %d, i64 16"),
            mark_pair("ptr %s, i64 12"),
            mark("ptr %d, i64 %n"),
            mark("ptr %s, i64 8192"),
        ]
    );
    let region = region_of(&ir, "atomics", 0);
    assert_eq!(
        calls("atomics"),
        [budget_check(&region, "2"), mark_line("ptr %p, i64 4")]
    );

    // An invoke ends a segment; the landing pad's check comes after its landingpad.
    let invokes = function_body(&ir, "invokes");
    let entry = blocks(invokes).remove(0).instructions;
    assert_eq!(
        entry[entry.len() - 3..],
        [
            mark_line("ptr %p, i64 4").as_str(),
            BUDGET_STORE,
            "invoke void @opaque()"
        ]
    );
    // Both of the invoke's destinations reload the local budget first.
    let lpad = block(invokes, "lpad");
    assert_eq!(lpad[0], "%lp = landingpad { ptr, i32 }");
    assert_eq!(lpad[1], BUDGET_LOAD);
    assert_eq!(lpad[2], budget_spend("1"));
    assert_eq!(lpad[lpad.len() - 2..lpad.len() - 1], [BUDGET_STORE]); // before resume
    let cont = block(invokes, "cont");
    assert_eq!(cont[..2], [BUDGET_LOAD, budget_spend("1").as_str()]);
    // Static allocas stay first, the local budget's among them.
    let with_alloca = blocks(function_body(&ir, "with_alloca"))
        .remove(0)
        .instructions;
    assert_eq!(with_alloca[0], "%kage.budget = alloca i64, align 8");
    assert_eq!(with_alloca[1], "%slot = alloca i32, align 4");
    assert_eq!(with_alloca[2], BUDGET_LOAD);
    assert!(with_alloca[3].starts_with("call void @__kage_ws_budget_check("));
    assert!(!function_body(&ir, "no_accesses").contains("@__kage_ws_"));
    // Only checkpoints check; marks made on every path since the last one are left out.
    let redundant = function_body(&ir, "redundant");
    let region = region_of(&ir, "redundant", 0);
    let block_calls = |label: &str| {
        ws_calls(&block(redundant, label))
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        block_calls("entry"),
        [budget_check(&region, "1"), mark_line("ptr %p, i64 4")]
    );
    assert_eq!(
        block_calls("left"),
        [budget_spend("2"), mark_line("ptr %q, i64 4")]
    );
    assert_eq!(block_calls("right"), [budget_spend("1")]);
    assert_eq!(
        block_calls("join"),
        [budget_spend("2"), mark_line("ptr %q2, i64 4")]
    );
    let loop_region = region_of(&ir, "redundant", 2);
    assert_eq!(
        block_calls("loop"),
        [budget_check(&loop_region, "1"), mark_line("ptr %p, i64 4")]
    );
    assert!(block_calls("exit").is_empty());
    // A block that an invoke and a branch both lead to: the branch stores the budget
    // before it, the block reloads it.
    let joins = function_body(&ir, "joins");
    let entry = blocks(joins).remove(0).instructions;
    assert_eq!(
        entry[entry.len() - 3..],
        [
            mark_line("ptr %p, i64 4").as_str(),
            BUDGET_STORE,
            "br i1 %c, label %call, label %join"
        ]
    );
    assert_eq!(block(joins, "join")[0], BUDGET_LOAD);
    // musttail: the budget is stored before the call and nothing comes between the call
    // and its ret.
    let tail = blocks(function_body(&ir, "tail")).remove(0).instructions;
    assert_eq!(
        tail[tail.len() - 4..],
        [
            mark_line("ptr %p, i64 4").as_str(),
            BUDGET_STORE,
            "%r = musttail call i32 @callee(ptr %p, i32 %x)",
            "ret i32 %r"
        ]
    );
    // setjmp returns twice: the budget is reloaded after it, so a longjmp back resumes
    // with the thread-local's value, not a stale register.
    let jumps = blocks(function_body(&ir, "jumps")).remove(0).instructions;
    let at_setjmp = jumps
        .iter()
        .position(|l| l.starts_with("%j = call i32 @setjmp("))
        .unwrap();
    assert_eq!(jumps[at_setjmp - 1], BUDGET_STORE);
    assert_eq!(jumps[at_setjmp + 1], BUDGET_LOAD);

    check_working_set_declarations(&ir);
}

/// The runtime's symbols and the helpers, exactly as docs/abi.md declares them.
fn check_working_set_declarations(ir: &str) {
    for line in [
        "@__kage_ws_budget = external dso_local thread_local(localexec) global i64",
        "declare void @__kage_ws_mark_lines(i64, i64)",
        "declare preserve_mostcc void @__kage_ws_tick(ptr)",
        "define internal void @__kage_ws_budget_check(ptr %0, i64 %1, ptr %2)",
        "define internal void @__kage_ws_budget_spend(i64 %0, ptr %1)",
        "define internal void @__kage_ws_budget_load(ptr %0)",
        "define internal void @__kage_ws_budget_store(ptr %0)",
        "define internal void @__kage_ws_mark_range(ptr %0, i64 %1)",
        "define internal void @__kage_ws_mark_pair(ptr %0, i64 %1)",
        "define internal void @__kage_ws_mark_line(ptr %0, i64 %1)",
    ] {
        assert!(ir.lines().any(|l| l.starts_with(line)), "missing {line}");
    }
    for helper in [
        "__kage_ws_budget_check",
        "__kage_ws_budget_spend",
        "__kage_ws_budget_load",
        "__kage_ws_budget_store",
        "__kage_ws_mark_range",
        "__kage_ws_mark_pair",
        "__kage_ws_mark_line",
    ] {
        let define = function_body(ir, helper).lines().next().unwrap();
        let group = define.rsplit(" #").next().unwrap().trim_end_matches(" {");
        let attributes = ir
            .lines()
            .find(|l| l.starts_with(&format!("attributes #{group} = ")))
            .unwrap();
        assert!(
            attributes.contains("alwaysinline") && attributes.contains("nounwind"),
            "{attributes}"
        );
    }
    // The shadow's base is a constant of the ABI, as the line shift (64-byte lines by
    // default), with no mask before it; the budget goes through its TLS address.
    let mark_range = function_body(ir, "__kage_ws_mark_range");
    assert!(
        mark_range.contains(&format!(" = add i64 {}, ", kage_abi::WS_SHADOW_BASE)),
        "{mark_range}"
    );
    assert!(!mark_range.contains("load i64, ptr @"), "{mark_range}");
    let shifts: Vec<&str> = mark_range
        .lines()
        .filter(|l| l.contains(" lshr "))
        .collect();
    assert!(
        shifts.len() == 2 && shifts.iter().all(|l| l.ends_with(", 6")),
        "{mark_range}"
    );
    assert!(!mark_range.contains("and i64"), "{mark_range}");
    // Shadow bytes checked by each helper, and which may call out for the lines between.
    for (helper, checks, calls) in [
        ("__kage_ws_mark_line", 1, false),
        ("__kage_ws_mark_pair", 2, false),
        ("__kage_ws_mark_range", 2, true),
    ] {
        let body = function_body(ir, helper);
        assert_eq!(body.matches("load i8, ptr").count(), checks, "{body}");
        assert_eq!(
            body.contains("call void @__kage_ws_mark_lines("),
            calls,
            "{body}"
        );
    }
    let budget_check = function_body(ir, "__kage_ws_budget_check");
    assert!(budget_check.contains("call ptr @llvm.threadlocal.address.p0(ptr @__kage_ws_budget)"));
    assert!(budget_check.contains("call preserve_mostcc void @__kage_ws_tick(ptr %0)"));
}

#[test]
fn working_set_line_size_is_a_build_constant() {
    let build = |size: &str| {
        let out = run_opt_with(
            Mode::WorkingSet,
            &[("KAGE_WS_LINE_SIZE", size)],
            "ws_segments.ll",
            Some("kage,verify"),
        );
        let ir = String::from_utf8(out.stdout).unwrap();
        (ir, String::from_utf8(out.stderr).unwrap())
    };
    let shifts = |ir: &str| -> Vec<String> {
        let mark_range = function_body(ir, "__kage_ws_mark_range");
        let shifts = mark_range.lines().filter(|l| l.contains(" lshr "));
        shifts
            .map(|l| l.rsplit(", ").next().unwrap().to_string())
            .collect()
    };
    // The sixth field: instrumentation, line_shift, slot, source_cells end the table.
    let module_shift = |ir: &str| {
        let module = global_line(ir, "__kage_module").unwrap();
        module
            .rsplit("i32 ")
            .nth(2)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .to_string()
    };
    let (ir, stderr) = build("128");
    assert_eq!(
        (shifts(&ir), module_shift(&ir)),
        (vec!["7".to_string(), "7".into()], "7".into())
    );
    assert!(stderr.is_empty(), "{stderr}");
    let (ir, _) = build("16");
    assert_eq!(
        (shifts(&ir), module_shift(&ir)),
        (vec!["4".to_string(), "4".into()], "4".into())
    );
    // Ranges are classified with the build's line size: p[0] and p[10] as i64 with 16-byte
    // lines are still one line each, p[0..3] as i32 (16 bytes, 4-aligned) still two.
    let first = |name: &str| ws_calls(&blocks(function_body(&ir, name)).remove(0).instructions);
    assert!(first("four_ints").contains(&mark_pair("ptr %p, i64 16").as_str()));
    assert!(first("far_apart").contains(&mark_line("ptr %p, i64 8").as_str()));
    // A bad value: one warning, and the default.
    let (ir, stderr) = build("48");
    assert_eq!(module_shift(&ir), "6");
    assert!(
        stderr.contains("KAGE_WS_LINE_SIZE='48' is not a power of two from 16 to 4096"),
        "{stderr}"
    );
}

#[test]
fn working_set_trace_mode_adds_traces_and_keeps_the_intervals() {
    let ir = instrument_in(Mode::WorkingSetTrace, "ws_segments.ll");
    insta::assert_snapshot!("ws_segments_trace", ir);
    check_registration_in(Mode::WorkingSetTrace, &ir);
    assert_no_call_mode_hooks(&ir);
    let plain = instrument_in(Mode::WorkingSet, "ws_segments.ll");
    assert_eq!(checks_and_marks(&ir), checks_and_marks(&plain));
    assert!(!plain.contains("@__kage_ws_trace"));

    let expect_before = |function: &str, target: &str, calls: &[&str]| {
        let (lines, i) = lines_around(function_body(&ir, function), target);
        assert_eq!(
            &lines[i - calls.len()..i],
            calls,
            "before {target} in @{function}"
        );
    };
    expect_before(
        "four_ints",
        "%b = load",
        &["call void @__kage_ws_trace(ptr %p1, i64 4)"],
    );
    expect_before(
        "atomics",
        "%pair = cmpxchg",
        &["call void @__kage_ws_trace(ptr %p, i64 4)"],
    );
    // Source, then destination; run-time lengths through the helper that skips 0.
    expect_before(
        "mem",
        "call void @llvm.memcpy",
        &[
            "call void @__kage_ws_trace(ptr %s, i64 12)",
            "call void @__kage_ws_trace(ptr %d4, i64 12)",
        ],
    );
    expect_before(
        "mem",
        "call void @llvm.memset.p0.i64(ptr %d, i8 0, i64 %n",
        &["call void @__kage_ws_trace_range(ptr %d, i64 %n)"],
    );
    // A zero-length memset is not traced.
    let (lines, i) = lines_around(
        function_body(&ir, "mem"),
        "call void @llvm.memset.p0.i64(ptr %s, i8 0, i64 0",
    );
    assert!(lines[i - 2].starts_with("call void @llvm.memset.p0.i64(ptr %s, i8 0, i64 8192"));
    assert_eq!(
        lines[i - 1],
        "call void @__kage_ws_mark_range(ptr %s, i64 8192)"
    );
    // The first access's trace comes after the segment's check.
    let first = blocks(function_body(&ir, "four_ints"))
        .remove(0)
        .instructions;
    assert_eq!(first[0], "%kage.budget = alloca i64, align 8");
    assert_eq!(first[1], BUDGET_LOAD);
    assert!(first[2].starts_with("call void @__kage_ws_budget_check("));
    assert!(
        first[1..]
            .iter()
            .position(|l| l.starts_with("call void @__kage_ws_trace(ptr %p, i64 4)"))
            < first.iter().position(|l| l.starts_with("%a = load"))
    );
    assert!(ir
        .lines()
        .any(|l| l.starts_with("declare void @__kage_ws_trace(ptr, i64)")));
    let trace_range = function_body(&ir, "__kage_ws_trace_range");
    assert!(trace_range.starts_with("define internal void @__kage_ws_trace_range(ptr %0, i64 %1)"));
}

#[test]
fn working_set_counts_and_marks_simple_counted_loops_per_chunk() {
    let ir = instrument_in(Mode::WorkingSet, "ws_loops.ll");
    insta::assert_snapshot!("ws_loops", ir);
    check_registration_in(Mode::WorkingSet, &ir);
    assert_no_call_mode_hooks(&ir);

    // for (i = 0; i < n; i++) a[i] = b[i] + 1: the preheader computes T - 1 and checks or
    // marks nothing; the header starts with the chunk call, the only call in the loop.
    let increment = function_body(&ir, "increment");
    assert!(
        ws_calls(&block(increment, "preheader")).is_empty(),
        "{increment}"
    );
    let header = block(increment, "loop");
    assert!(header[0].starts_with("%i = phi i64"));
    let (helper, args) = chunk_call(header[1]);
    assert_eq!(ws_calls(&header), [header[1]]);
    let [iv, start, after_first, b, a] = args[..] else {
        panic!("{args:?}")
    };
    assert_eq!((iv, start, b, a), ("i64 %i", "i64 0", "ptr %b", "ptr %a"));
    let after_first = after_first.strip_prefix("i64 ").unwrap();
    assert_eq!(definition(increment, after_first), "sub i64 %count, 1");
    // The helper: a chunk starts when (i - 0) & 1023 == 0; it counts 2 accesses per
    // iteration of iterations j ..= j + last, last = min(T - 1 - j, 1023), with the loop
    // body's region, then marks 4 * (last + 1) bytes of each array from element j.
    let body = function_body(&ir, &helper);
    assert!(body.starts_with(&format!(
        "define internal void @{helper}(i64 %iv, i64 %start, i64 %after_first, ptr %range0, ptr %range1, ptr %local_budget) #"
    )));
    let body_region = region_of(&ir, "increment", 2);
    assert_eq!(
        blocks(body)[0].instructions,
        [
            "%scaled = sub i64 %iv, %start",
            "%0 = and i64 %scaled, 1023",
            "%1 = icmp eq i64 %0, 0",
            "br i1 %1, label %chunk, label %done",
        ]
    );
    assert!(body.contains(", !prof !"), "chunk starts are rare: {body}");
    assert_eq!(
        block(body, "chunk"),
        [
            // The index, hidden from loop strength reduction (see hoist::emit).
            "%j = freeze i64 %scaled",
            "%2 = sub i64 %after_first, %j",
            "%3 = icmp ult i64 %2, 1023",
            "%last = select i1 %3, i64 %2, i64 1023",
            "%4 = add i64 %last, 1",
            "%5 = mul i64 %4, 2",
            &chunk_budget_check(&body_region, "%5"),
            "%6 = mul i64 %last, 4",
            "%7 = add i64 %6, 4",
            "%8 = mul i64 %j, 4",
            "%9 = getelementptr i8, ptr %range0, i64 %8",
            &mark("ptr %9, i64 %7"),
            "%10 = getelementptr i8, ptr %range1, i64 %8",
            &mark("ptr %10, i64 %7"),
            "br label %done",
        ]
    );
    assert_eq!(block(body, "done"), ["ret void"]);

    // Vectorized: 2 loads + 2 stores per iteration of 8 elements (32 bytes per array):
    // the counter moves by 8, so j = (index - 0) >> 3 and chunk starts are tested on
    // bits 3..12; T - 1 = (n.vec - 8) >> 3.
    let vectorized = function_body(&ir, "vectorized");
    assert!(ws_calls(&blocks(vectorized)[0].instructions).is_empty());
    let header = block(vectorized, "vector.body");
    let (helper, args) = chunk_call(header[1]);
    assert_eq!(ws_calls(&header), [header[1]]);
    assert_eq!(args[..2], ["i64 %index", "i64 0"]);
    let after_first = args[2].strip_prefix("i64 ").unwrap();
    let shifted = definition(vectorized, after_first)
        .strip_prefix("lshr i64 ")
        .unwrap();
    let (difference, three) = shifted.split_once(", ").unwrap();
    assert_eq!(three, "3");
    assert_eq!(definition(vectorized, difference), "sub i64 %n.vec, 8");
    let body = function_body(&ir, &helper);
    assert_eq!(definition(body, "%0"), "and i64 %scaled, 8184");
    let shifted = definition(body, "%j").strip_prefix("freeze i64 ").unwrap();
    assert_eq!(definition(body, shifted), "lshr i64 %scaled, 3");
    assert!(body.contains("mul i64 %last, 32"), "{body}");
    assert!(body.contains("%6 = mul i64 %5, 4"), "{body}");
    assert!(body.contains(&chunk_budget_check(&region_of(&ir, "vectorized", 2), "%6")));

    // Counting down with an i32 counter: j = s - i; the range moves down, so a chunk's
    // lowest bytes are those of its last iteration, j + last.
    let count_down = function_body(&ir, "count_down");
    assert!(ws_calls(&blocks(count_down)[0].instructions).is_empty());
    let (helper, args) = chunk_call(block(count_down, "loop")[1]);
    assert_eq!(args[..2], ["i32 %i", "i32 %s"]);
    let after_first = args[2].strip_prefix("i64 ").unwrap();
    assert_eq!(definition(count_down, after_first), "zext i32 %s to i64");
    let body = function_body(&ir, &helper);
    assert_eq!(definition(body, "%scaled"), "sub i32 %start, %iv");
    let extended = definition(body, "%j").strip_prefix("freeze i64 ").unwrap();
    assert_eq!(definition(body, extended), "zext i32 %scaled to i64");
    let lowest = body
        .lines()
        .map(str::trim)
        .find(|l| l.contains("= mul i64 ") && l.ends_with(", -8"))
        .unwrap_or_else(|| panic!("{body}"));
    let first = lowest
        .split(" = mul i64 ")
        .nth(1)
        .unwrap()
        .trim_end_matches(", -8");
    assert_eq!(definition(body, first), "add i64 %j, %last");
    // Iteration 0's start: a + 8 * sext(s).
    let range0 = args[3].strip_prefix("ptr ").unwrap();
    let (base, offset) = definition(count_down, range0)
        .strip_prefix("getelementptr i8, ptr ")
        .unwrap()
        .split_once(", i64 ")
        .unwrap();
    assert_eq!(base, "%a");
    let (extended, eight) = definition(count_down, offset)
        .strip_prefix("mul i64 ")
        .unwrap()
        .split_once(", ")
        .unwrap();
    assert_eq!(
        (definition(count_down, extended), eight),
        ("sext i32 %s to i64", "8")
    );

    // A row of a flattened 2-D array, counted by a second counter: A's range starts at
    // A + 8 * row + 8 * s, B's at B + 8 * s; the chunk index comes from niter.
    let row_update = function_body(&ir, "row_update");
    let header = block(row_update, "loop");
    let (_, args) = chunk_call(header[2]);
    assert_eq!(ws_calls(&header), [header[2]]);
    assert_eq!(args[..2], ["i64 %niter", "i64 0"]);
    let a_start = args[3].strip_prefix("ptr ").unwrap();
    let (base, offset) = definition(row_update, a_start)
        .strip_prefix("getelementptr i8, ptr ")
        .unwrap()
        .split_once(", i64 ")
        .unwrap();
    assert_eq!(base, "%A");
    let (row_bytes, start_bytes) = definition(row_update, offset)
        .strip_prefix("add i64 ")
        .unwrap()
        .split_once(", ")
        .unwrap();
    assert_eq!(definition(row_update, row_bytes), "mul i64 %row, 8");
    assert_eq!(definition(row_update, start_bytes), "mul i64 %s, 8");

    assert!(ws_calls(&blocks(row_update)[0].instructions).is_empty());
    // No hoisted function checks or marks outside its chunk helper.
    for name in ["increment", "vectorized", "count_down", "row_update"] {
        let body = function_body(&ir, name);
        assert!(!body.contains("@__kage_ws_budget_check("), "{body}");
        assert!(!body.contains("@__kage_ws_mark_"), "{body}");
        assert_eq!(
            body.matches("call void @__kage_ws_chunk").count(),
            1,
            "{body}"
        );
    }

    // An early exit: instrumented inside, per segment, with the loop body's region.
    let find = function_body(&ir, "find");
    let region = region_of(&ir, "find", 2);
    assert_eq!(
        ws_calls(&block(find, "loop")),
        [budget_check(&region, "1"), mark_line("ptr %p, i64 4")]
    );
    // The function's start is a checkpoint: it checks, with nothing of its own to count.
    assert_eq!(
        ws_calls(&blocks(find).remove(0).instructions),
        [budget_check(&region_of(&ir, "find", 0), "0")]
    );
    // A call: two segments per iteration.
    let with_call = function_body(&ir, "with_call");
    let region = region_of(&ir, "with_call", 2);
    assert_eq!(
        ws_calls(&block(with_call, "loop")),
        [
            budget_check(&region, "1"),
            mark_line("ptr %p, i64 4"),
            "call void @opaque()".to_string(),
            budget_spend("1"),
            mark_line("ptr %p, i64 4"),
        ]
    );
    // The chunk helpers are internal, `alwaysinline nounwind`, one per hoisted loop.
    let helpers: Vec<&str> = ir
        .lines()
        .filter(|l| l.starts_with("define internal void @__kage_ws_chunk"))
        .collect();
    assert_eq!(helpers.len(), 4, "{helpers:#?}");
    for define in helpers {
        let group = define.rsplit(" #").next().unwrap().trim_end_matches(" {");
        let attributes = ir
            .lines()
            .find(|l| l.starts_with(&format!("attributes #{group} = ")))
            .unwrap();
        assert!(
            attributes.contains("alwaysinline") && attributes.contains("nounwind"),
            "{attributes}"
        );
    }
}

/// The helper's name and the arguments of `call void @__kage_ws_chunk...(args)`.
fn chunk_call(call: &str) -> (String, Vec<&str>) {
    let rest = call
        .strip_prefix("call void @")
        .filter(|r| r.starts_with("__kage_ws_chunk"))
        .unwrap_or_else(|| panic!("not a chunk call: {call}"));
    let (name, args) = rest.split_once('(').unwrap();
    let mut args: Vec<&str> = args.strip_suffix(')').unwrap().split(", ").collect();
    // The function's local budget always comes last.
    assert_eq!(args.pop(), Some("ptr %kage.budget"), "{call}");
    (name.to_string(), args)
}

#[test]
fn working_set_trace_mode_keeps_traces_inside_hoisted_loops() {
    let ir = instrument_in(Mode::WorkingSetTrace, "ws_loops.ll");
    insta::assert_snapshot!("ws_loops_trace", ir);
    let plain = instrument_in(Mode::WorkingSet, "ws_loops.ll");
    assert_eq!(checks_and_marks(&ir), checks_and_marks(&plain));
    // The chunk call starts the header, before the first access's trace.
    let increment = function_body(&ir, "increment");
    let header = block(increment, "loop");
    let calls = ws_calls(&header);
    assert_eq!(header[1], calls[0]);
    assert!(calls[0].starts_with("call void @__kage_ws_chunk(i64 %i, i64 0, i64 %"));
    assert_eq!(
        calls[1..],
        [
            "call void @__kage_ws_trace(ptr %pb, i64 4)",
            "call void @__kage_ws_trace(ptr %pa, i64 4)",
        ]
    );
}

#[test]
fn every_input_is_valid_in_working_set_modes() {
    let inputs = [
        "accesses.ll",
        "ctors.ll",
        "eh.ll",
        "nested_loops.ll",
        "odd_cfg.ll",
        "setjmp.ll",
    ];
    for mode in [Mode::WorkingSet, Mode::WorkingSetTrace] {
        for name in inputs {
            let ir = instrument_in(mode, name); // verified by opt
            check_registration_in(mode, &ir);
            assert_no_call_mode_hooks(&ir);
            assert_eq!(
                regions(&ir),
                regions(&instrument(name)),
                "{name}: same table"
            );
        }
        // Every call the pass adds in a function with debug info has a location.
        let ir = instrument_in(mode, "nested_loops.ll");
        for name in ["sum2d", "find"] {
            for line in function_body(&ir, name)
                .lines()
                .filter(|l| l.contains("call void @__kage_ws_"))
            {
                assert!(line.contains(", !dbg !"), "call without !dbg: {line}");
            }
        }
        // Running twice instruments once.
        assert_eq!(
            run_opt_in(mode, "ws_segments.ll", Some("kage,kage")),
            run_opt_in(mode, "ws_segments.ll", Some("kage"))
        );
    }
    assert_eq!(
        run_opt_in(Mode::WorkingSet, "declarations_only.ll", Some("kage")),
        run_opt("declarations_only.ll", None)
    );
}

// Footprint instrumentation (KAGE_TOOL=footprint, docs/abi.md "Footprint instrumentation"):
// the hooks of mode 0, except that simple counted innermost loops report their accesses per
// chunk of iterations and enter their region once.

#[test]
fn footprint_reports_simple_counted_loops_per_chunk() {
    let ir = instrument_in(Mode::Footprint, "ws_loops.ll");
    insta::assert_snapshot!("fp_loops", ir);
    check_registration_in(Mode::Footprint, &ir);
    assert!(!ir.contains("__kage_ws_"), "no working-set code: {ir}");

    // for (i = 0; i < n; i++) a[i] = b[i] + 1, a leaf: the preheader enters it and
    // computes T - 1; the header starts with the chunk call, the loop's only call (no loop
    // hook, no access hooks); the exit ends it.
    let increment = function_body(&ir, "increment");
    let loop_region = region_of(&ir, "increment", 1);
    assert_eq!(
        block(increment, "preheader"),
        [
            "%count = zext nneg i32 %n to i64",
            format!("call void @__kage_fp_leaf_enter({loop_region}, ptr null, ptr %1)").as_str(),
            "%2 = sub i64 %count, 1",
            "br label %loop"
        ]
    );
    let header = block(increment, "loop");
    assert_eq!(
        header[0],
        "%i = phi i64 [ 0, %preheader ], [ %i.next, %loop ]"
    );
    assert_eq!(
        header[1],
        "call void @__kage_fp_chunk(i64 %i, i64 0, i64 %2, ptr %b, ptr %a)"
    );
    assert_eq!(
        block(increment, "exit")[0],
        "call void @__kage_fp_leaf_end(ptr %1, ptr null, ptr null)"
    );
    assert_eq!(
        header.iter().filter(|i| i.contains("call ")).count(),
        1,
        "{increment}"
    );
    // The helper: at a chunk start it counts the chunk's 2 (last + 1) accesses and reports
    // each array's 4-byte elements j ..= j + last as one buffered range of 4 (last + 1)
    // bytes (no loop event: the loop is a leaf).
    let helper = function_body(&ir, "__kage_fp_chunk");
    assert!(helper.starts_with(
        "define internal void @__kage_fp_chunk(i64 %iv, i64 %start, i64 %after_first, ptr %range0, ptr %range1) #"
    ));
    assert_eq!(
        block(helper, "chunk"),
        [
            "%j = freeze i64 %scaled",
            "%2 = sub i64 %after_first, %j",
            "%3 = icmp ult i64 %2, 1023",
            "%last = select i1 %3, i64 %2, i64 1023",
            "%4 = add i64 %last, 1",
            "%5 = mul i64 %4, 2",
            "%6 = load atomic i64, ptr @__kage_fp_accesses monotonic, align 8",
            "%7 = add i64 %6, %5",
            "store atomic i64 %7, ptr @__kage_fp_accesses monotonic, align 8",
            "%8 = mul i64 %j, 4",
            "%9 = getelementptr i8, ptr %range0, i64 %8",
            "%10 = mul i64 %last, 4",
            "%11 = add i64 %10, 4",
            "call void @__kage_fp_range(ptr %9, i64 %11)",
            "%12 = getelementptr i8, ptr %range1, i64 %8",
            "%13 = mul i64 %last, 4",
            "%14 = add i64 %13, 4",
            "call void @__kage_fp_range(ptr %12, i64 %14)",
            "br label %done",
        ]
    );
    assert!(!helper.contains("__kage_loop_iter"), "{helper}");

    // Loops of other forms are leaves (no loop event: the runtime's C part opens the
    // loop's instance at its header and ends it at its exit); their accesses are counted
    // and reported per segment, at its end. The search's load: one report before the
    // branch.
    let find = function_body(&ir, "find");
    let find_loop = region_of(&ir, "find", 1);
    assert!(
        find.contains(&format!(
            "call void @__kage_fp_leaf_enter({find_loop}, ptr null, ptr %1)"
        )),
        "{find}"
    );
    assert!(!find.contains("__kage_loop_iter"), "{find}");
    assert!(
        !find.contains("__kage_load") && !find.contains("__kage_store"),
        "{find}"
    );
    let header = block(find, "loop");
    let count = |n: u32, m: u32, k: u32| {
        [
            format!("%{n} = load atomic i64, ptr @__kage_fp_accesses monotonic, align 8"),
            format!("%{m} = add i64 %{n}, {k}"),
            format!("store atomic i64 %{m}, ptr @__kage_fp_accesses monotonic, align 8"),
        ]
    };
    let tail: Vec<String> = header[header.len() - 5..]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut expected = count(2, 3, 1).to_vec();
    expected.push("call void @__kage_fp_range(ptr %p, i64 4)".into());
    expected.push("br i1 %found, label %exit, label %latch".into());
    assert_eq!(tail, expected);
    // Around a call, the same element is stored twice: reported once (before the call, at
    // the end of the first segment), counted twice.
    let with_call = function_body(&ir, "with_call");
    let header: Vec<String> = block(with_call, "loop")
        .iter()
        .map(|s| s.to_string())
        .collect();
    let reports: Vec<&String> = header
        .iter()
        .filter(|i| i.contains("__kage_fp_range"))
        .collect();
    assert_eq!(reports, ["call void @__kage_fp_range(ptr %p, i64 4)"]);
    let at = |needle: &str| header.iter().position(|i| i.contains(needle)).unwrap();
    assert!(at("__kage_fp_range") < at("call void @opaque()"));
    let counts = header
        .iter()
        .filter(|i| i.starts_with("store atomic i64"))
        .count();
    assert_eq!(counts, 2, "{with_call}");
    // A build for every tool never reports per chunk.
    let calls = instrument_in(Mode::Calls, "ws_loops.ll");
    assert!(!calls.contains("__kage_fp_"), "{calls}");
}

#[test]
fn an_inlined_call_is_a_region_around_its_loop_entered_and_left_by_settling() {
    let ir = instrument("inlined.ll");
    insta::assert_snapshot!("inlined", ir);
    let file = "/src/inlined.c";
    // main (declared on 8, code to 11) with fill (declared on 1, code to 3) inlined at
    // 10:3; fill's loop (2-3) is under the inlined call, named fill.
    assert_eq!(
        regions(&ir),
        vec![
            region(FUNCTION, NONE, (8, 11), 0, "main", file),
            region(INLINED, 0, (1, 3), 1, "fill", file),
            region(LOOP, 1, (2, 3), 2, "fill", file),
            region(BODY, 2, (2, 3), 3, "fill", file),
        ]
    );
    // The inlined call's site: the file, line 10, column 3.
    let table = global_line(&ir, "__kage_regions").unwrap();
    let call = table
        .split("{ i32 -1, i32 3, ")
        .nth(1)
        .expect("the inlined entry");
    let call = &call[..call.find(" }").unwrap()];
    assert!(call.ends_with(", i32 10, i32 3, i32 -1, i32 0"), "{call}");
    check_registration(&ir);
    check_hook_placement(&ir, &[]);
    // Entry: main starts, then the guard is fill's code: settle into the inlined call.
    // The loop: its iteration hook. After it, main's own code: settle back to main.
    let main = function_body(&ir, "main");
    let blocks = blocks(main);
    let entry: Vec<&str> = (blocks[0].instructions.iter())
        .filter(|l| l.contains("@__kage_"))
        .copied()
        .collect();
    assert!(
        entry[0].starts_with(&frame_call_prefix(&ir, "__kage_func_enter", 0)),
        "{entry:?}"
    );
    assert_eq!(
        entry[1],
        region_call(&ir, "__kage_settle_unless_innermost", 1)
    );
    assert_eq!(
        main.matches(&region_call(&ir, "__kage_loop_iter_unless_iterating", 2))
            .count(),
        1
    );
    assert_eq!(
        main.matches(&region_call(&ir, "__kage_settle_unless_innermost", 0))
            .count(),
        1
    );
    assert_eq!(main.matches("@__kage_settle_unless_innermost(").count(), 2);
}

#[test]
fn inlined_calls_are_their_callers_code_when_inlined_regions_are_off() {
    // KAGE_INLINED_REGIONS=0, the layout kept to measure what inlined regions cost: fill's
    // loop is main's, named at the call's line (10); the only settle is back to main after
    // the loop (none into the call).
    let output = run_opt_with(
        Mode::Calls,
        &[("KAGE_INLINED_REGIONS", "0")],
        "inlined.ll",
        Some("kage"),
    );
    let ir = String::from_utf8(output.stdout).unwrap();
    let file = "/src/inlined.c";
    assert_eq!(
        regions(&ir),
        vec![
            region(FUNCTION, NONE, (8, 11), 0, "main", file),
            region(LOOP, 0, (10, 10), 1, "main", file),
            region(BODY, 1, (10, 10), 2, "main", file),
        ]
    );
    check_registration(&ir);
    let main = function_body(&ir, "main");
    assert_eq!(main.matches("@__kage_settle_unless_innermost(").count(), 1);
    assert_eq!(
        main.matches(&region_call(&ir, "__kage_settle_unless_innermost", 0))
            .count(),
        1
    );
    assert_eq!(
        main.matches(&region_call(&ir, "__kage_loop_iter_unless_iterating", 1))
            .count(),
        1
    );
}

/// C library calls get their effects as accesses right after the call, the markers gone
/// (docs/abi.md, "C library functions"); a program's own function of a library name is not
/// one; a masked store is a store per lane.
#[test]
fn library_effects_and_masked_accesses_become_plain_accesses() {
    let ir = instrument_in(Mode::Calls, "library.ll");
    assert!(!ir.contains("__kage_effect_"), "{ir}");
    assert!(!ir.contains("call void @llvm.masked.store"), "{ir}");
    let calls_of = |function: &str, callee: &str| -> Vec<String> {
        (function_body(&ir, function).lines())
            .filter_map(|line| line.split(&format!("@{callee}(")).nth(1))
            .map(|args| args.rsplit_once(')').unwrap().0.to_string())
            .collect()
    };
    // strlen(s): its result and the NUL, read at s.
    let measure = function_body(&ir, "measure");
    let length = measure
        .lines()
        .find(|l| l.contains("add i64 %n, 1"))
        .expect(measure);
    let length = length.trim().split(' ').next().unwrap();
    assert_eq!(
        calls_of("measure", "__kage_load"),
        [format!("ptr %s, i64 {length}")]
    );
    // memcmp(a, b, n): both, up to the first byte that differs, at most n.
    let compared = calls_of("compare", "__kage_library_compared");
    assert_eq!(compared, ["ptr %a, ptr %b, i64 %n, i32 0"]);
    let loads = calls_of("compare", "__kage_load");
    assert_eq!(loads.len(), 2, "{loads:?}");
    assert!(loads[0].starts_with("ptr %a, i64 %") && loads[1].starts_with("ptr %b, i64 %"));
    // The program's own strnlen is instrumented as its own (one load of a byte); its call
    // is no library call.
    assert!(calls_of("own", "__kage_load").is_empty());
    assert_eq!(calls_of("strnlen", "__kage_load"), ["ptr %s, i64 1"]);
    // A musttail call keeps its ret right after it: nothing marked.
    assert!(calls_of("measure_in_tail", "__kage_load").is_empty());
    // The masked store: a store of 4 bytes per lane, each under its mask bit.
    let stores = calls_of("masked", "__kage_store");
    assert_eq!(stores.len(), 4, "{stores:?}");
    assert!(stores.iter().all(|s| s.ends_with("i64 4")), "{stores:?}");
}
