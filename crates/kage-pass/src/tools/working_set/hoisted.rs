//! A hoisted loop's working-set instrumentation (see [`crate::hoist`] for the planner and
//! why it is exact): the preheader's values, and a per-loop `__kage_ws_chunk` helper called
//! at the start of every iteration that checks the budget and marks lines once per chunk.

use std::collections::HashMap;

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBuilderRef, LLVMTypeRef, LLVMValueRef};

use super::runtime::{LineSpan, WsRuntime};
use super::WsInserter;
#[cfg(doc)]
use crate::hoist;
use crate::hoist::chunk::{preheader_values, set_name, ChunkFrame};
use crate::hoist::HoistPlan;
use crate::ir;

/// Emits a hoisted loop's working-set instrumentation: before the preheader's `br`, `T - 1`
/// and where each range starts in iteration 0; at the header's first insertion point, the
/// call `__kage_ws_chunk(iv, S, T - 1, starts..., local_budget)` of a helper defined for
/// this loop. `region` is the loop body's table entry, `local_budget` the function's copy
/// of the budget (`inserter.local_budget`, see [`super`]).
///
/// # Safety
/// `plan` must come from [`hoist::plan_function`] on the function `inserter` works on,
/// before it was changed elsewhere than by segment instrumentation (mode 2's traces
/// included: the call goes before them).
pub unsafe fn emit(plan: &HoistPlan, inserter: &mut WsInserter, region: LLVMValueRef) {
    inserter.position_before(plan.at);
    let mut args = preheader_values(inserter.builder, inserter.runtime.i64_type, plan);
    args.push(inserter.local_budget);
    let (helper, helper_type) = build_ws_chunk_helper(inserter.runtime, plan, region);
    // Recomputed now: mode 2's traces may start the header, and the call goes before them.
    let at = ir::first_insertion_point(plan.header)
        .expect("a loop header has an insertion point (it has a terminator)");
    inserter.position_before(at);
    LLVMBuildCall2(
        inserter.builder,
        helper_type,
        helper,
        args.as_mut_ptr(),
        args.len() as u32,
        c"".as_ptr(),
    );
}

/// Defines the loop's `__kage_ws_chunk(iN iv, iN S, i64 after_first, ptr start..., ptr local)`:
/// the [`ChunkFrame`], whose chunk block does
///
/// ```text
/// __kage_ws_budget_check(region, (last + 1) * n, local)
/// for each range: __kage_ws_mark_range(lowest, last * |stride| + width)
/// ```
unsafe fn build_ws_chunk_helper(
    runtime: &mut WsRuntime,
    plan: &HoistPlan,
    region: LLVMValueRef,
) -> (LLVMValueRef, LLVMTypeRef) {
    let counter_type = LLVMTypeOf(plan.trip.counter);
    let (f, ty) = runtime.define_chunk_helper(counter_type, plan.ranges.len());
    let budget_check = runtime.budget_check();
    let mark_range = runtime.mark(LineSpan::Many);
    let mut frame = ChunkFrame::open(f, plan);
    let builder = frame.builder;
    let iterations = frame.math.add(frame.last, frame.math.constant(1));
    let k = frame.math.mul(
        iterations,
        frame.math.constant(plan.accesses_per_iteration as i64),
    );
    let local_budget = LLVMGetParam(f, 3 + plan.ranges.len() as u32);
    set_name(local_budget, "local_budget");
    let mut args = [region, k, local_budget];
    LLVMBuildCall2(
        builder,
        runtime.budget_check_type,
        budget_check,
        args.as_mut_ptr(),
        3,
        c"".as_ptr(),
    );
    // Built once per (|stride|, width), for the ranges sharing them.
    let mut lengths: HashMap<(i64, i64), LLVMValueRef> = HashMap::new();
    for (r, range) in plan.ranges.iter().enumerate() {
        let stride = range.stride();
        let width = range.hi - range.lo;
        let (math, last) = (&frame.math, frame.last);
        let len = *lengths.entry((stride.abs(), width)).or_insert_with(|| {
            let span = math.mul(last, math.constant(stride.abs()));
            math.add(span, math.constant(width))
        });
        let ptr = frame.lowest_byte(plan, r);
        call_pointer_length(runtime, builder, mark_range, ptr, len);
    }
    frame.close();
    (f, ty)
}

/// A call of a `void (ptr, i64)` function at the builder's position.
unsafe fn call_pointer_length(
    runtime: &WsRuntime,
    builder: LLVMBuilderRef,
    callee: LLVMValueRef,
    ptr: LLVMValueRef,
    len: LLVMValueRef,
) {
    let mut args = [ptr, len];
    LLVMBuildCall2(
        builder,
        runtime.pointer_length_type,
        callee,
        args.as_mut_ptr(),
        2,
        c"".as_ptr(),
    );
}
