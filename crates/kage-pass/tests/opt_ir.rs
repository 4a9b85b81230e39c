//! Runs the plugin under `opt-22 -passes=kage` on the `.ll` files in tests/ir/ and checks the
//! result: snapshots of the whole output, plus explicit assertions for the ABI facts.

mod support;

use support::*;

/// Kind numbers from docs/abi.md.
const FUNCTION: u32 = 0;
const LOOP: u32 = 1;
const BODY: u32 = 2;

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
    // Lines: sum2d is declared on line 4 and returns on 11; its loops span 6-8 and 7-8.
    // find's loop calls the inlined square() (line 2): inlined code counts at its call site.
    assert_eq!(
        regions(&ir),
        vec![
            region(FUNCTION, NONE, (4, 11), 0, "sum2d", file),
            region(LOOP, 0, (6, 8), 1, "sum2d", file),
            region(BODY, 1, (6, 8), 2, "sum2d", file),
            region(LOOP, 2, (7, 8), 3, "sum2d", file),
            region(BODY, 3, (7, 8), 4, "sum2d", file),
            region(FUNCTION, NONE, (14, 20), 5, "find", file),
            region(LOOP, 5, (15, 16), 6, "find", file),
            region(BODY, 6, (15, 16), 7, "find", file),
        ]
    );
    let type_line = global_line(&ir, "__kage_regions").unwrap();
    assert!(type_line.starts_with(
        "@__kage_regions = internal global [8 x { i32, i32, i32, i32, i32, i32, ptr, ptr, ptr, ptr }]"
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
    assert_eq!(count(sum2d, &frame_call_prefix(&ir, "__kage_func_enter", 0)), 1);
    assert_eq!(count(sum2d, &region_call(&ir, "__kage_loop_iter", 1)), 1);
    assert_eq!(count(sum2d, &region_call(&ir, "__kage_loop_iter", 3)), 1);
    // The inner loop exits into the outer loop's latch (settle to the outer body, 2); the
    // outer loop exits into the return block (settle to the function, 0).
    assert_eq!(count(sum2d, "call void @__kage_settle("), 2);
    assert_eq!(count(sum2d, &region_call(&ir, "__kage_settle", 2)), 1);
    assert_eq!(count(sum2d, &region_call(&ir, "__kage_settle", 0)), 1);
    // The loop_iter hooks sit in the loop headers: blocks that branch back to themselves
    // (inner) or are targets of the latch that settles the inner loop (outer).
    for block in blocks(sum2d) {
        let has = |call: &str| block.instructions.contains(&call);
        if has(&region_call(&ir, "__kage_loop_iter", 3)) {
            assert!(
                block
                    .instructions
                    .last()
                    .unwrap()
                    .contains(&format!("label %{}", block.label)),
                "inner header {block:?}"
            );
        }
        if has(&region_call(&ir, "__kage_settle", 2)) {
            let outer_header = blocks(sum2d)
                .into_iter()
                .find(|b| {
                    b.instructions
                        .iter()
                        .any(|l| *l == region_call(&ir, "__kage_loop_iter", 1))
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
        count(find, &region_call(&ir, "__kage_settle", 5)),
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
        "declare void @__kage_register_module(ptr)",
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
        "@llvm.global_dtors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 65535, ptr @fini, ptr null }]"
    );
    assert!(!function_body(&ir, "__kage_module_ctor").contains("__kage_func_enter"));
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
    assert_eq!(lpad.instructions[1], "%1 = call ptr @llvm.addressofreturnaddress.p0()");
    assert_eq!(lpad.instructions[2], format!("{}1)", frame_call_prefix(&ir, "__kage_resume_at", 0)));
    assert_eq!(
        lpad.instructions[3..],
        vec![
            region_call(&ir, "__kage_settle", 0).as_str(),
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
        region_call(&ir, "__kage_loop_iter", 1)
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
        region_call(&ir, "__kage_loop_iter", 2)
    );
    assert_eq!(
        blocks_by_label("done")[0],
        region_call(&ir, "__kage_settle", 1)
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
