//! Emitting a hoisted loop's instrumentation: loop-invariant values in the preheader, and a
//! call of the loop's own chunk helper at the start of every iteration (see the module docs
//! of [`super`] for why it is exact). The helper's frame (the test for a chunk start, the
//! iteration index `j` and the chunk's `last`, each range's lowest byte in the chunk) is
//! shared; what it does per chunk is the instrumentation's: the working set checks the
//! budget and marks lines ([`emit`]), the footprint enters the loop's region on its first
//! iteration and reports each range element by element ([`emit_footprint`]).

use std::collections::HashMap;

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMBuilderRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::LLVMIntPredicate;

use super::{Extension, HoistPlan, InvariantTerm, StridedRange, TripCount};
use crate::footprint::FpRuntime;
use crate::ir;
use crate::working_set::WsInserter;
use crate::ws_runtime::{LineSpan, WsRuntime};

/// Emits a hoisted loop's working-set instrumentation: before the preheader's `br`, `T - 1`
/// and where each range starts in iteration 0; at the header's first insertion point, the
/// call `__kage_ws_chunk(iv, S, T - 1, starts..., local_budget)` of a helper defined for
/// this loop. `region` is the loop body's table entry, `local_budget` the function's copy
/// of the budget (`inserter.local_budget`, see [`crate::working_set`]).
///
/// # Safety
/// `plan` must come from [`super::analyze_loop`] on the function `inserter` works on,
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

/// Emits a hoisted loop's footprint instrumentation (mode 3, docs/abi.md): the preheader's
/// values as for [`emit`], and at the header's first insertion point the call
/// `__kage_fp_chunk(iv, S, T - 1, starts...)` of a helper that, at iteration 0, calls
/// `__kage_loop_iter(loop)` (the loop's only iteration event: it enters the loop's region)
/// and, at every chunk start (`m` iterations), adds the chunk's `m * n` accesses to the
/// thread's counter and calls `__kage_fp_strided(lowest, width, |stride|, m)` for each range.
/// `loop_iter` is `__kage_loop_iter` and its type. `position(at)` puts `builder` before
/// `at` with the hook location of `at`.
///
/// # Safety
/// `plan` must come from [`super::analyze_loop`] (with [`super::Coverage::Bytes`]) on the
/// function being instrumented, whose header has not been given its loop hook.
pub unsafe fn emit_footprint(
    plan: &HoistPlan,
    builder: LLVMBuilderRef,
    position: &mut dyn FnMut(LLVMValueRef),
    rt: &FpRuntime,
    loop_iter: (LLVMValueRef, LLVMTypeRef),
    loop_region: LLVMValueRef,
) {
    let module = LLVMGetGlobalParent(LLVMGetBasicBlockParent(plan.header));
    let context = LLVMGetModuleContext(module);
    let i64_type = LLVMInt64TypeInContext(context);
    position(plan.at);
    let mut args = preheader_values(builder, i64_type, plan);
    let mut params: Vec<LLVMTypeRef> = args.iter().map(|&a| LLVMTypeOf(a)).collect();
    let helper_type = LLVMFunctionType(
        LLVMVoidTypeInContext(context),
        params.as_mut_ptr(),
        params.len() as u32,
        0,
    );
    let helper = ir::define_inline_helper(module, "__kage_fp_chunk", helper_type);
    let mut frame = ChunkFrame::open(helper, plan);
    let b = frame.builder;
    // Iteration 0: the loop's region is entered before its first range is reported.
    let first_iteration = LLVMBuildICmp(
        b,
        LLVMIntPredicate::LLVMIntEQ,
        frame.index,
        frame.math.constant(0),
        c"".as_ptr(),
    );
    let enter = LLVMAppendBasicBlockInContext(context, helper, c"enter".as_ptr());
    let report = LLVMAppendBasicBlockInContext(context, helper, c"report".as_ptr());
    let branch = LLVMBuildCondBr(b, first_iteration, enter, report);
    ir::set_branch_weights(branch, 1, plan.chunk_iterations.max(2) - 1);
    LLVMPositionBuilderAtEnd(b, enter);
    let mut region_arg = [loop_region];
    let (loop_iter, loop_iter_type) = loop_iter;
    LLVMBuildCall2(
        b,
        loop_iter_type,
        loop_iter,
        region_arg.as_mut_ptr(),
        1,
        c"".as_ptr(),
    );
    LLVMBuildBr(b, report);
    LLVMPositionBuilderAtEnd(b, report);
    let iterations = frame.math.add(frame.last, frame.math.constant(1));
    let accesses = frame.math.mul(
        iterations,
        frame.math.constant(plan.accesses_per_iteration as i64),
    );
    rt.count(b, accesses);
    for (r, range) in plan.ranges.iter().enumerate() {
        let lowest = frame.lowest_byte(plan, r);
        let m = &frame.math;
        let (width, stride) = (range.hi - range.lo, range.stride().abs());
        rt.report(b, lowest, m.constant(width), m.constant(stride), iterations);
    }
    frame.close();
    let at = ir::first_insertion_point(plan.header)
        .expect("a loop header has an insertion point (it has a terminator)");
    position(at);
    LLVMBuildCall2(
        builder,
        helper_type,
        helper,
        args.as_mut_ptr(),
        args.len() as u32,
        c"".as_ptr(),
    );
}

/// Computed before the preheader's `br` (the builder is there): `iv`, `S`, `T - 1` and each
/// range's start in iteration 0, the first arguments of every chunk helper.
unsafe fn preheader_values(
    builder: LLVMBuilderRef,
    i64_type: LLVMTypeRef,
    plan: &HoistPlan,
) -> Vec<LLVMValueRef> {
    let math = Math { builder, i64_type };
    let mut args = vec![
        plan.trip.counter,
        plan.trip.start,
        math.iterations_after_first(plan.trip),
    ];
    for range in &plan.ranges {
        let start = math.add(range_start_offset(&math, range), math.constant(range.lo));
        args.push(ir::byte_gep(builder, range.base, start));
    }
    args
}

/// Iteration 0's offset of a range from its base, without `lo`:
/// `Σ invariant + M * ext(S')`.
unsafe fn range_start_offset(math: &Math, range: &StridedRange) -> LLVMValueRef {
    let mut offset = math.invariant_sum(&range.invariant);
    if let Some((induction, extension)) = range.induction {
        let start = math.extend(induction.start, extension);
        offset = math.add(offset, math.mul(start, math.constant(range.scale)));
    }
    offset
}

/// A chunk helper being built: parameters `(iN iv, iN S, i64 after_first, ptr start...)`
/// (and whatever the instrumentation adds after them), and
///
/// ```text
/// entry: d = (iv - S) * sign(C)                 ; mod 2^w: j << s, j the iteration index
///        if (d & ((K - 1) << s)) != 0: goto done ; not a chunk start (no test when K = 1)
/// chunk: j = d >> s; last = umin(after_first - j, K - 1)    ; the chunk is j .. j + last
///        ... the instrumentation's work, then `close` branches to
/// done:  ret void
/// ```
struct ChunkFrame {
    builder: LLVMBuilderRef,
    math: Math,
    /// `j`, as an i64.
    index: LLVMValueRef,
    /// The chunk's iterations after its first, as an i64.
    last: LLVMValueRef,
    done: LLVMBasicBlockRef,
    /// Built once per stride, for the ranges sharing it: the byte offset of the chunk's
    /// lowest element from iteration 0's.
    offsets: HashMap<i64, LLVMValueRef>,
    /// `j + last`, for ranges moving down.
    last_index: Option<LLVMValueRef>,
}

impl ChunkFrame {
    /// Starts `f`'s body; the builder is left in the chunk block.
    unsafe fn open(f: LLVMValueRef, plan: &HoistPlan) -> Self {
        let context = LLVMGetTypeContext(LLVMTypeOf(f));
        let builder = LLVMCreateBuilderInContext(context);
        let append =
            |name: &std::ffi::CStr| LLVMAppendBasicBlockInContext(context, f, name.as_ptr());
        let (entry, chunk_block, done) = (append(c"entry"), append(c"chunk"), append(c"done"));
        let math = Math {
            builder,
            i64_type: LLVMInt64TypeInContext(context),
        };
        let trip = plan.trip;
        let counter_type = LLVMTypeOf(trip.counter);
        let width = LLVMGetIntTypeWidth(counter_type);
        let chunk = plan.chunk_iterations;
        let shift = trip.step.unsigned_abs().trailing_zeros();
        for (i, name) in ["iv", "start", "after_first"].into_iter().enumerate() {
            set_name(LLVMGetParam(f, i as u32), name);
        }
        for r in 0..plan.ranges.len() {
            set_name(LLVMGetParam(f, 3 + r as u32), &format!("range{r}"));
        }
        LLVMPositionBuilderAtEnd(builder, entry);
        let (iv, start) = (LLVMGetParam(f, 0), LLVMGetParam(f, 1));
        let scaled_index = if trip.step > 0 {
            LLVMBuildSub(builder, iv, start, c"scaled".as_ptr())
        } else {
            LLVMBuildSub(builder, start, iv, c"scaled".as_ptr())
        };
        if chunk == 1 {
            LLVMBuildBr(builder, chunk_block);
        } else {
            // j & (K - 1) == 0, tested before the shift; bits beyond the counter's width are
            // dropped (j < 2^(w - s) has no bits there).
            let mask = ((chunk - 1) << shift) & (u64::MAX >> (64 - width));
            let low = LLVMBuildAnd(
                builder,
                scaled_index,
                LLVMConstInt(counter_type, mask, 0),
                c"".as_ptr(),
            );
            let starts = LLVMBuildICmp(
                builder,
                LLVMIntPredicate::LLVMIntEQ,
                low,
                LLVMConstInt(counter_type, 0, 0),
                c"".as_ptr(),
            );
            let branch = LLVMBuildCondBr(builder, starts, chunk_block, done);
            ir::set_branch_weights(branch, 1, chunk - 1);
        }

        LLVMPositionBuilderAtEnd(builder, chunk_block);
        let mut index = scaled_index;
        if shift > 0 {
            let amount = LLVMConstInt(counter_type, u64::from(shift), 0);
            index = LLVMBuildLShr(builder, index, amount, c"".as_ptr());
        }
        let index = LLVMBuildZExtOrBitCast(builder, index, math.i64_type, c"".as_ptr());
        // A no-op (nothing here is poison) that hides `j`'s induction from the code
        // generator's loop strength reduction, which would otherwise rewrite the chunk's
        // address arithmetic in terms of new induction variables and compute parts of it
        // (`min(..., K - 1)`) in the header, on every iteration, instead of at chunk starts
        // only.
        let index = LLVMBuildFreeze(builder, index, c"j".as_ptr());
        let last = if chunk == 1 {
            math.constant(0)
        } else {
            let remaining = math.sub(LLVMGetParam(f, 2), index);
            let cap = math.constant(chunk as i64 - 1);
            let fits = LLVMBuildICmp(
                builder,
                LLVMIntPredicate::LLVMIntULT,
                remaining,
                cap,
                c"".as_ptr(),
            );
            LLVMBuildSelect(builder, fits, remaining, cap, c"last".as_ptr())
        };
        ChunkFrame {
            builder,
            math,
            index,
            last,
            done,
            offsets: HashMap::new(),
            last_index: None,
        }
    }

    /// A pointer to range `r`'s lowest byte in the chunk: iteration `j`'s start when the
    /// range moves up, iteration `j + last`'s when it moves down.
    unsafe fn lowest_byte(&mut self, plan: &HoistPlan, r: usize) -> LLVMValueRef {
        let f = LLVMGetBasicBlockParent(LLVMGetInsertBlock(self.builder));
        let range_start = LLVMGetParam(f, 3 + r as u32);
        let stride = plan.ranges[r].stride();
        if stride == 0 {
            return range_start;
        }
        let (math, index, last) = (&self.math, self.index, self.last);
        let last_index = &mut self.last_index;
        let offset = *self.offsets.entry(stride).or_insert_with(|| {
            let first = if stride > 0 {
                index
            } else {
                *last_index.get_or_insert_with(|| math.add(index, last))
            };
            math.mul(first, math.constant(stride))
        });
        ir::byte_gep(self.builder, range_start, offset)
    }

    /// Ends the chunk's work and the helper.
    unsafe fn close(self) {
        LLVMBuildBr(self.builder, self.done);
        LLVMPositionBuilderAtEnd(self.builder, self.done);
        LLVMBuildRetVoid(self.builder);
        LLVMDisposeBuilder(self.builder);
    }
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

/// Names a value (an instruction or a parameter) unless it is a constant.
unsafe fn set_name(value: LLVMValueRef, name: &str) {
    if LLVMIsAConstant(value).is_null() {
        LLVMSetValueName2(value, name.as_ptr() as *const _, name.len());
    }
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

/// Integer arithmetic at the builder's position that skips operations with no effect (the
/// C API's builder only folds when every operand is a constant).
struct Math {
    builder: LLVMBuilderRef,
    i64_type: LLVMTypeRef,
}

impl Math {
    fn constant(&self, value: i64) -> LLVMValueRef {
        unsafe { LLVMConstInt(self.i64_type, value as u64, 1) }
    }

    /// `value` as an i64 (`value` is at most 64 bits wide).
    unsafe fn extend(&self, value: LLVMValueRef, extension: Extension) -> LLVMValueRef {
        let (builder, ty) = (self.builder, self.i64_type);
        match extension {
            Extension::None => value,
            Extension::Sign => LLVMBuildSExtOrBitCast(builder, value, ty, c"".as_ptr()),
            Extension::Zero => LLVMBuildZExtOrBitCast(builder, value, ty, c"".as_ptr()),
        }
    }

    /// `Σ coefficient * ext(value)`.
    unsafe fn invariant_sum(&self, terms: &[InvariantTerm]) -> LLVMValueRef {
        let mut sum = self.constant(0);
        for term in terms {
            let value = self.extend(term.value, term.extension);
            sum = self.add(sum, self.mul(value, self.constant(term.coefficient)));
        }
        sum
    }

    unsafe fn add(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        if LLVMIsNull(b) != 0 {
            return a;
        }
        if LLVMIsNull(a) != 0 {
            return b;
        }
        LLVMBuildAdd(self.builder, a, b, c"".as_ptr())
    }

    unsafe fn sub(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        if LLVMIsNull(b) != 0 {
            return a;
        }
        LLVMBuildSub(self.builder, a, b, c"".as_ptr())
    }

    unsafe fn mul(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        if ir::constant_u64(b) == Some(1) {
            return a;
        }
        if ir::constant_u64(a) == Some(1) {
            return b;
        }
        LLVMBuildMul(self.builder, a, b, c"".as_ptr())
    }

    /// `T - 1 = ((N - S [- C]) * sign(C) mod 2^w) >> s` (see the module docs), as an i64.
    unsafe fn iterations_after_first(&self, trip: TripCount) -> LLVMValueRef {
        let iv_type = LLVMTypeOf(trip.start);
        let magnitude = trip.step.unsigned_abs();
        // Counting up: N - S [- C]; counting down: S - N [- |C|].
        let (from, to) = if trip.step > 0 {
            (trip.start, trip.bound)
        } else {
            (trip.bound, trip.start)
        };
        let mut count = self.sub(to, from);
        if trip.compares_next {
            count = self.sub(count, LLVMConstInt(iv_type, magnitude, 0));
        }
        let shift = magnitude.trailing_zeros();
        if shift > 0 {
            let shift = LLVMConstInt(iv_type, u64::from(shift), 0);
            count = LLVMBuildLShr(self.builder, count, shift, c"".as_ptr());
        }
        LLVMBuildZExtOrBitCast(self.builder, count, self.i64_type, c"".as_ptr())
    }
}
