//! Unit tests of the loop analysis on hand-written IR.

use super::*;
use crate::loops::find_loops;
use llvm_sys::core::*;
use llvm_sys::ir_reader::LLVMParseIRInContext2;
use llvm_sys::prelude::{LLVMContextRef, LLVMModuleRef};
use llvm_sys::target::LLVMGetModuleDataLayout;

const HEADER: &str = r#"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"
declare void @g()
"#;

/// What the analysis says about the function `@f`'s loops: `Ok` with the accesses per
/// iteration, each range as `(scale, lo, hi)`, `compares_next` and the counter's step.
type Summary = Result<(u64, Vec<(i64, i64, i64)>, bool, i64), NotHoisted>;

/// Parses `HEADER` + `body` into a new context.
unsafe fn parse(body: &str) -> (LLVMContextRef, LLVMModuleRef) {
    let text = format!("{HEADER}\n{body}");
    let context = LLVMContextCreate();
    let buffer = LLVMCreateMemoryBufferWithMemoryRangeCopy(
        text.as_ptr() as *const _,
        text.len(),
        c"test.ll".as_ptr(),
    );
    let mut module = std::ptr::null_mut();
    let mut message = std::ptr::null_mut();
    let failed = LLVMParseIRInContext2(context, buffer, &mut module, &mut message);
    LLVMDisposeMemoryBuffer(buffer);
    assert_eq!(
        failed,
        0,
        "{}",
        std::ffi::CStr::from_ptr(message).to_string_lossy()
    );
    (context, module)
}

/// The plans of `@f`'s hoistable loops, mapped by `summary`.
fn plans<T>(body: &str, summary: impl Fn(&HoistPlan) -> T) -> Vec<T> {
    unsafe {
        let (context, module) = parse(body);
        let func = LLVMGetNamedFunction(module, c"f".as_ptr());
        let cfg = FunctionCfg::new(func);
        let forest = find_loops(&cfg.successors, 0);
        let data_layout = LLVMGetModuleDataLayout(module);
        let out = plan_function(&cfg, &forest, data_layout, Coverage::Lines)
            .iter()
            .map(summary)
            .collect();
        LLVMDisposeModule(module);
        LLVMContextDispose(context);
        out
    }
}

fn analyze(body: &str) -> Vec<Summary> {
    analyze_for(body, Coverage::Lines)
}

fn analyze_for(body: &str, coverage: Coverage) -> Vec<Summary> {
    unsafe {
        let (context, module) = parse(body);
        let func = LLVMGetNamedFunction(module, c"f".as_ptr());
        let cfg = FunctionCfg::new(func);
        let forest = find_loops(&cfg.successors, 0);
        let data_layout = LLVMGetModuleDataLayout(module);
        let out = (0..forest.loops.len())
            .map(|k| {
                analyze_loop(&cfg, &forest, k, data_layout, coverage).map(|plan| {
                    let ranges = plan.ranges.iter().map(|r| (r.scale, r.lo, r.hi)).collect();
                    (
                        plan.accesses_per_iteration,
                        ranges,
                        plan.trip.compares_next,
                        plan.trip.step,
                    )
                })
            })
            .collect();
        LLVMDisposeModule(module);
        LLVMContextDispose(context);
        out
    }
}

/// `for (i = 0; i < n; i++) a[i] = b[i] + 1;` as clang -O2 leaves it (rotated, with
/// a dedicated preheader).
const ROTATED: &str = r#"
define void @f(ptr %a, ptr %b, i64 %n) {
entry:
  %guard = icmp sgt i64 %n, 0
  br i1 %guard, label %pre, label %exit
pre:
  br label %loop
loop:
  %i = phi i64 [ 0, %pre ], [ %i.next, %loop ]
  %pb = getelementptr inbounds i32, ptr %b, i64 %i
  %v = load i32, ptr %pb, align 4
  %w = add i32 %v, 1
  %pa = getelementptr inbounds i32, ptr %a, i64 %i
  store i32 %w, ptr %pa, align 4
  %i.next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;

#[test]
fn rotated_counted_loop_is_hoisted() {
    assert_eq!(
        analyze(ROTATED),
        vec![Ok((2, vec![(4, 0, 4), (4, 0, 4)], true, 1))]
    );
}

#[test]
fn vectorized_loop_merges_its_two_halves() {
    let body = r#"
define void @f(ptr %a, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %p = getelementptr inbounds i32, ptr %a, i64 %i
  %p16 = getelementptr inbounds i8, ptr %p, i64 16
  %x = load <4 x i32>, ptr %p, align 4
  %y = load <4 x i32>, ptr %p16, align 4
  %i.next = add nuw i64 %i, 8
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    assert_eq!(analyze(body), vec![Ok((2, vec![(4, 0, 32)], true, 8))]);
    assert_eq!(
        analyze_for(body, Coverage::Bytes),
        vec![Ok((2, vec![(4, 0, 32)], true, 8))]
    );
    // A 4-byte hole between the halves: lines merge across it, exact bytes do not.
    let holed = body.replace("i64 16\n", "i64 20\n");
    assert_eq!(analyze(&holed), vec![Ok((2, vec![(4, 0, 36)], true, 8))]);
    assert_eq!(
        analyze_for(&holed, Coverage::Bytes),
        vec![Ok((2, vec![(4, 0, 16), (4, 20, 36)], true, 8))]
    );
}

#[test]
fn exit_on_ne_and_compare_of_iv_itself_and_downward_steps() {
    // do { a[i] = 0; } while (i-- != n): leaves when iv == n, after the access.
    let body = r#"
define void @f(ptr %a, i64 %s, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ %s, %entry ], [ %i.next, %loop ]
  %p = getelementptr [100 x i64], ptr %a, i64 0, i64 %i
  store i64 0, ptr %p, align 8
  %i.next = add i64 %i, -1
  %more = icmp ne i64 %i, %n
  br i1 %more, label %loop, label %exit
exit:
  ret void
}
"#;
    assert_eq!(analyze(body), vec![Ok((1, vec![(8, 0, 8)], false, -1))]);
}

#[test]
fn narrow_counters_need_no_wrap_flags() {
    let with = |flags: &str, ext: &str| {
        format!(
            r#"
define void @f(ptr %a, i32 %n) {{
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i.next, %loop ]
  %idx = {ext} i32 %i to i64
  %p = getelementptr inbounds i32, ptr %a, i64 %idx
  store i32 0, ptr %p, align 4
  %i.next = add {flags} i32 %i, 1
  %done = icmp eq i32 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}
"#
        )
    };
    let hoisted = Ok((1, vec![(4, 0, 4)], true, 1));
    assert_eq!(analyze(&with("nsw", "sext")), vec![hoisted.clone()]);
    assert_eq!(analyze(&with("nuw", "zext")), vec![hoisted.clone()]);
    assert_eq!(analyze(&with("nsw", "zext nneg")), vec![hoisted]);
    assert_eq!(
        analyze(&with("", "sext")),
        vec![Err(NotHoisted::AccessNotAffine)]
    );
    assert_eq!(
        analyze(&with("nsw", "zext")),
        vec![Err(NotHoisted::AccessNotAffine)]
    );
}

#[test]
fn invariant_addresses_count_every_iteration() {
    let body = r#"
define void @f(ptr %a, ptr %sum, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %p = getelementptr inbounds i64, ptr %a, i64 %i
  %x = load i64, ptr %p, align 8
  %s = load i64, ptr %sum, align 8
  %t = add i64 %s, %x
  store i64 %t, ptr %sum, align 8
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    assert_eq!(
        analyze(body),
        vec![Ok((3, vec![(8, 0, 8), (0, 0, 8)], true, 1))]
    );
}

#[test]
fn loops_of_other_shapes_are_not_hoisted() {
    let call = ROTATED.replace(
        "  %w = add i32 %v, 1",
        "  %w = add i32 %v, 1\n  call void @g()",
    );
    assert_eq!(analyze(&call), vec![Err(NotHoisted::CuttingCall)]);
    // Two predecessors outside the loop: no preheader.
    let two_entries = ROTATED
        .replace(
            "br i1 %guard, label %pre, label %exit",
            "br i1 %guard, label %pre, label %loop",
        )
        .replace("[ 0, %pre ]", "[ 0, %pre ], [ 0, %entry ]");
    assert_eq!(analyze(&two_entries), vec![Err(NotHoisted::NoPreheader)]);
}

#[test]
fn loop_entered_from_a_conditional_branch_is_hoisted() {
    // No dedicated preheader: the guard's conditional branch enters the loop, as in a
    // vectorised loop whose `vector.ph` is folded into the minimum-iterations check.
    let shared = ROTATED
        .replace(
            "br i1 %guard, label %pre, label %exit",
            "br i1 %guard, label %loop, label %exit",
        )
        .replace("pre:\n  br label %loop\n", "")
        .replace("[ 0, %pre ]", "[ 0, %entry ]");
    assert_eq!(analyze(&shared), analyze(ROTATED));
}

#[test]
fn loops_of_other_forms_are_not_hoisted() {
    // Exit on `slt`, not on equality.
    let less = ROTATED.replace("icmp eq i64 %i.next, %n", "icmp sge i64 %i.next, %n");
    assert_eq!(analyze(&less), vec![Err(NotHoisted::ExitNotOnEquality)]);
    // The stride leaves a 28-byte gap between iterations.
    let sparse = ROTATED.replace(
        "%i.next = add nuw nsw i64 %i, 1",
        "%i.next = add nuw nsw i64 %i, 8",
    );
    assert_eq!(analyze(&sparse), vec![Err(NotHoisted::StrideLeavesGaps)]);
    // The footprint reports ranges element by element: gaps are no obstacle there.
    assert_eq!(
        analyze_for(&sparse, Coverage::Bytes),
        vec![Ok((2, vec![(4, 0, 4), (4, 0, 4)], true, 8))]
    );
    // A step that is no power of two.
    let three = ROTATED.replace(
        "%i.next = add nuw nsw i64 %i, 1",
        "%i.next = add nuw nsw i64 %i, 3",
    );
    assert_eq!(analyze(&three), vec![Err(NotHoisted::UnsupportedStep)]);
}

#[test]
fn early_exits_and_conditional_accesses_are_not_hoisted() {
    let early_exit = r#"
define void @f(ptr %a, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %latch ]
  %p = getelementptr inbounds i32, ptr %a, i64 %i
  %x = load i32, ptr %p, align 4
  %found = icmp eq i32 %x, 0
  br i1 %found, label %exit, label %latch
latch:
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    assert_eq!(
        analyze(early_exit),
        vec![Err(NotHoisted::NotSingleExitLatch)]
    );
    let conditional = r#"
define void @f(ptr %a, i64 %n, i1 %c) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %latch ]
  br i1 %c, label %then, label %latch
then:
  %p = getelementptr inbounds i32, ptr %a, i64 %i
  store i32 0, ptr %p, align 4
  br label %latch
latch:
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    assert_eq!(
        analyze(conditional),
        vec![Err(NotHoisted::AccessNotEveryIteration)]
    );
    // The footprint reports it where it is made, but with nothing else in the loop there
    // is nothing to hoist.
    assert_eq!(
        analyze_for(conditional, Coverage::Bytes),
        vec![Err(NotHoisted::AccessNotEveryIteration)]
    );
}

/// The footprint hoists a loop's strided accesses that run in every iteration, and leaves
/// to their segments those through a loaded index and those under a condition (counted
/// there: one access per iteration in the chunks, three per iteration in all). The working
/// set counts every access per chunk, so it cannot take the conditional one.
#[test]
fn footprint_hoists_around_indirect_and_conditional_accesses() {
    let body = r#"
define void @f(ptr %a, ptr %idx, ptr %hist, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %latch ]
  %pi = getelementptr inbounds i32, ptr %idx, i64 %i
  %k = load i32, ptr %pi, align 4
  %kk = sext i32 %k to i64
  %ph = getelementptr inbounds i64, ptr %hist, i64 %kk
  %h = load i64, ptr %ph, align 8
  %big = icmp sgt i64 %h, 100
  br i1 %big, label %then, label %latch
then:
  %pa = getelementptr inbounds i64, ptr %a, i64 %i
  store i64 %h, ptr %pa, align 8
  br label %latch
latch:
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    assert_eq!(
        analyze_for(body, Coverage::Bytes),
        vec![Ok((3, vec![(4, 0, 4)], true, 1))]
    );
    assert_eq!(
        analyze_for(body, Coverage::Lines),
        vec![Err(NotHoisted::AccessNotEveryIteration)]
    );
}

#[test]
fn loops_with_subloops_are_not_hoisted_but_their_inner_loops_are() {
    let body = r#"
define void @f(ptr %a, i64 %n) {
entry:
  br label %outer
outer:
  %j = phi i64 [ 0, %entry ], [ %j.next, %outer.latch ]
  %row = getelementptr inbounds i64, ptr %a, i64 %j
  br label %inner
inner:
  %i = phi i64 [ 0, %outer ], [ %i.next, %inner ]
  %p = getelementptr inbounds i64, ptr %row, i64 %i
  store i64 0, ptr %p, align 8
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %outer.latch, label %inner
outer.latch:
  %j.next = add i64 %j, 1
  %outer.done = icmp eq i64 %j.next, %n
  br i1 %outer.done, label %exit, label %outer
exit:
  ret void
}
"#;
    assert_eq!(
        analyze(body),
        vec![
            Err(NotHoisted::HasSubloops),
            Ok((1, vec![(8, 0, 8)], true, 1))
        ]
    );
}

#[test]
fn inner_cycles_are_detected() {
    // 0 -> 1 (header) -> 2 <-> 3 -> 4 (latch) -> 1: 2 and 3 cycle without the header.
    let succ = vec![vec![1], vec![2, 3], vec![3], vec![2, 4], vec![1, 5], vec![]];
    assert!(has_inner_cycle(&succ, &[1, 2, 3, 4], 1));
    let diamond = vec![vec![1], vec![2, 3], vec![4], vec![4], vec![1, 5], vec![]];
    assert!(!has_inner_cycle(&diamond, &[1, 2, 3, 4], 1));
    assert!(!dominates_within(&diamond, &[1, 2, 3, 4], 1, 2, 4));
    assert!(dominates_within(&diamond, &[1, 2, 3, 4], 1, 1, 4));
    let chain = vec![vec![1], vec![2], vec![3], vec![1, 4], vec![]];
    assert!(dominates_within(&chain, &[1, 2, 3], 1, 2, 3));
}

#[test]
fn a_second_induction_variable_may_address_the_accesses() {
    // Unrolled remainder loops count with their own `niter` and address with `i`.
    let body = r#"
define void @f(ptr %a, i64 %s, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ %s, %entry ], [ %i.next, %loop ]
  %niter = phi i64 [ 0, %entry ], [ %niter.next, %loop ]
  %p = getelementptr inbounds double, ptr %a, i64 %i
  store double 0.0, ptr %p, align 8
  %i.next = add nuw nsw i64 %i, 1
  %niter.next = add i64 %niter, 1
  %done = icmp eq i64 %niter.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    assert_eq!(analyze(body), vec![Ok((1, vec![(8, 0, 8)], true, 1))]);
}

#[test]
fn loop_invariant_index_terms_are_part_of_the_base() {
    // for (j = 0; j < n; j++) A[i * n + j] += B[j]: the row offset is invariant.
    let body = r#"
define void @f(ptr %A, ptr %B, i64 %row, i64 %n) {
entry:
  %offset = mul i64 %row, %n
  br label %loop
loop:
  %j = phi i64 [ 0, %entry ], [ %j.next, %loop ]
  %idx = add nuw nsw i64 %j, %offset
  %pa = getelementptr inbounds double, ptr %A, i64 %idx
  %pb = getelementptr inbounds double, ptr %B, i64 %j
  %x = load double, ptr %pa, align 8
  %y = load double, ptr %pb, align 8
  %z = fadd double %x, %y
  store double %z, ptr %pa, align 8
  %j.next = add nuw nsw i64 %j, 1
  %done = icmp eq i64 %j.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    assert_eq!(
        analyze(body),
        vec![Ok((3, vec![(8, 0, 8), (8, 0, 8)], true, 1))]
    );
}

#[test]
fn reversed_and_unrolled_indices() {
    // a[n - 1 - i] and b[2i], b[2i + 1] (an `or disjoint`).
    let body = r#"
define void @f(ptr %a, ptr %b, i64 %n) {
entry:
  %last = add i64 %n, -1
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %r = sub i64 %last, %i
  %pa = getelementptr inbounds i32, ptr %a, i64 %r
  store i32 0, ptr %pa, align 4
  %even = shl i64 %i, 1
  %odd = or disjoint i64 %even, 1
  %pe = getelementptr inbounds i32, ptr %b, i64 %even
  %po = getelementptr inbounds i32, ptr %b, i64 %odd
  store i32 1, ptr %pe, align 4
  store i32 2, ptr %po, align 4
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    assert_eq!(
        analyze(body),
        // a + 4 * last (invariant) - 4i: bytes [0, 4) moving down; b: 8 bytes moving up.
        vec![Ok((3, vec![(-4, 0, 4), (8, 0, 8)], true, 1))]
    );
}

#[test]
fn linear_forms_combine_one_induction_variable() {
    use super::affine::{Extension, Linear};
    let iv = |k| Linear {
        iv: Some((k, Extension::None)),
        iv_coefficient: 1,
        ..Linear::default()
    };
    let twice = iv(0).plus(iv(0)).unwrap();
    assert_eq!(twice.iv_coefficient, 2);
    assert_eq!(iv(0).plus(iv(1)), None);
    let cancelled = iv(0).plus(iv(0).times(-1).unwrap()).unwrap();
    assert_eq!(cancelled.iv, None);
    assert_eq!(cancelled.iv_coefficient, 0);
    assert_eq!(iv(0).times(i64::MAX).unwrap().times(2), None);
}

/// The chunk length per loop for (accesses per iteration, strides).
fn chunk_of(accesses: u64, strides: &[i64]) -> u64 {
    let ranges: Vec<StridedRange> = strides
        .iter()
        .map(|&stride| StridedRange {
            base: std::ptr::null_mut(),
            invariant: Vec::new(),
            induction: (stride != 0).then_some((
                affine::Induction {
                    phi: std::ptr::null_mut(),
                    next: std::ptr::null_mut(),
                    start: std::ptr::null_mut(),
                    step: 1,
                    nsw: true,
                    nuw: true,
                },
                Extension::None,
            )),
            scale: stride,
            lo: 0,
            hi: stride.abs().max(1),
        })
        .collect();
    chunk_iterations(accesses, &ranges)
}

#[test]
fn chunks_are_1024_iterations_unless_an_iteration_does_much() {
    // a[i] = b[i] + 1 on ints, or vectorised (32 bytes per array per iteration).
    assert_eq!(chunk_of(2, &[4, 4]), 1024);
    assert_eq!(chunk_of(4, &[32, 32]), 1024);
    // An invariant address moves nothing.
    assert_eq!(chunk_of(3, &[8, 0]), 1024);
    // 8 accesses per iteration: 512 iterations make 4096 accesses.
    assert_eq!(chunk_of(8, &[64]), 512);
    assert_eq!(chunk_of(5, &[8]), 512);
    // A 4 KiB stride: 16 iterations move 64 KiB.
    assert_eq!(chunk_of(1, &[4096]), 16);
    assert_eq!(chunk_of(1, &[-4096]), 16);
    // More than the bounds in one iteration: one iteration per chunk.
    assert_eq!(chunk_of(5000, &[4]), 1);
    assert_eq!(chunk_of(1, &[1 << 16, 1 << 16]), 1);
    // In the analysis: the rotated loop of two ints per iteration.
    assert_eq!(plans(ROTATED, |p| p.chunk_iterations), [1024]);
}

#[test]
fn the_chunk_call_starts_the_header_before_mode_2_traces() {
    // The first instruction after the PHIs is an access: its trace goes right before it,
    // and the chunk call before the trace. Nothing else is counted or marked in the loop.
    let body = r#"
define void @f(ptr %a, ptr %sum, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %s = load i64, ptr %sum, align 8
  %p = getelementptr inbounds i64, ptr %a, i64 %i
  %x = load i64, ptr %p, align 8
  %t = add i64 %s, %x
  store i64 %t, ptr %sum, align 8
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"#;
    for traces in [false, true] {
        let tool = crate::tools::working_set::WorkingSet {
            line_size: kage_abi::DEFAULT_LINE_SIZE,
            traces,
        };
        let mode = crate::tools::Tool::instrumentation(&tool);
        let text = unsafe {
            let (context, module) = parse(body);
            crate::pass::instrument_module_with(module, &tool, true);
            let func = LLVMGetNamedFunction(module, c"f".as_ptr());
            let header = LLVMGetNextBasicBlock(LLVMGetFirstBasicBlock(func));
            let first = crate::ir::first_insertion_point(header).unwrap();
            assert!(crate::ir::is_call_site(first), "{mode:?}");
            let mut blocks = Vec::new();
            let mut block = LLVMGetFirstBasicBlock(func);
            while !block.is_null() {
                let calls: Vec<String> = crate::ir::instructions(block)
                    .into_iter()
                    .filter(|&i| crate::ir::is_call_site(i))
                    .map(|i| {
                        let callee = crate::ir::direct_callee(i).unwrap();
                        crate::ir::value_name(callee)
                    })
                    .collect();
                blocks.push(calls);
                block = LLVMGetNextBasicBlock(block);
            }
            LLVMDisposeModule(module);
            LLVMContextDispose(context);
            blocks
        };
        let trace = |name: &str| match traces {
            true => vec![name.to_string()],
            false => vec![],
        };
        // The preheader (the entry) only loads the function's local budget, which the exit
        // stores back: every access is hoisted, so nothing is spent outside the chunks.
        assert_eq!(
            text[0],
            ["__kage_ws_budget_load"],
            "{mode:?}: the preheader"
        );
        assert_eq!(text[2], ["__kage_ws_budget_store"], "{mode:?}: the exit");
        let mut header = vec!["__kage_ws_chunk".to_string()];
        header.extend(trace("__kage_ws_trace"));
        header.extend(trace("__kage_ws_trace"));
        header.extend(trace("__kage_ws_trace"));
        assert_eq!(text[1], header, "{mode:?}: the header");
    }
}
