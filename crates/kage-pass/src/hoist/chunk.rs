//! The frame every hoisted loop's chunk helper shares (see the module docs of [`super`] for
//! why chunks are exact): the preheader's values ([`preheader_values`]), the test for a
//! chunk start, the iteration index `j`, the chunk's `last`, and each range's lowest byte in
//! the chunk ([`ChunkFrame`]). What a helper does per chunk is its tool's (the working set
//! checks the budget and marks lines, the footprint enters the loop's region on its first
//! iteration and reports each range element by element).

use std::collections::HashMap;

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMBuilderRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::LLVMIntPredicate;

use super::{Extension, HoistPlan, InvariantTerm, StridedRange, TripCount};
use crate::ir;

/// Computed before the preheader's `br` (the builder is there): `iv`, `S`, `T - 1` and each
/// range's start in iteration 0, the first arguments of every chunk helper.
///
/// # Safety
/// The builder must be positioned before the preheader's `br` of `plan`'s loop.
pub unsafe fn preheader_values(
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
pub struct ChunkFrame {
    pub builder: LLVMBuilderRef,
    pub math: Math,
    /// `j`, as an i64.
    pub index: LLVMValueRef,
    /// The chunk's iterations after its first, as an i64.
    pub last: LLVMValueRef,
    done: LLVMBasicBlockRef,
    /// Built once per stride, for the ranges sharing it: the byte offset of the chunk's
    /// lowest element from iteration 0's.
    offsets: HashMap<i64, LLVMValueRef>,
    /// `j + last`, for ranges moving down.
    last_index: Option<LLVMValueRef>,
}

impl ChunkFrame {
    /// Starts `f`'s body; the builder is left in the chunk block.
    ///
    /// # Safety
    /// `f` must be a new helper without blocks whose first parameters are those of
    /// [`preheader_values`] for `plan`.
    pub unsafe fn open(f: LLVMValueRef, plan: &HoistPlan) -> Self {
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
    ///
    /// # Safety
    /// The builder must be in the chunk block; `r` a range of `plan`, the frame's plan.
    pub unsafe fn lowest_byte(&mut self, plan: &HoistPlan, r: usize) -> LLVMValueRef {
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
    ///
    /// # Safety
    /// The builder must be in the chunk block (or a block it flows into).
    pub unsafe fn close(self) {
        LLVMBuildBr(self.builder, self.done);
        LLVMPositionBuilderAtEnd(self.builder, self.done);
        LLVMBuildRetVoid(self.builder);
        LLVMDisposeBuilder(self.builder);
    }
}

/// Names a value (an instruction or a parameter) unless it is a constant.
///
/// # Safety
/// `value` must be a valid value.
pub unsafe fn set_name(value: LLVMValueRef, name: &str) {
    if LLVMIsAConstant(value).is_null() {
        LLVMSetValueName2(value, name.as_ptr() as *const _, name.len());
    }
}

/// Integer arithmetic at the builder's position that skips operations with no effect (the
/// C API's builder only folds when every operand is a constant). The operations' operands
/// must be i64 values available at the builder's position (their safety condition).
pub struct Math {
    builder: LLVMBuilderRef,
    pub i64_type: LLVMTypeRef,
}

impl Math {
    pub fn constant(&self, value: i64) -> LLVMValueRef {
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

    /// # Safety
    /// See [`Math`].
    pub unsafe fn add(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        if LLVMIsNull(b) != 0 {
            return a;
        }
        if LLVMIsNull(a) != 0 {
            return b;
        }
        LLVMBuildAdd(self.builder, a, b, c"".as_ptr())
    }

    /// # Safety
    /// See [`Math`].
    pub unsafe fn sub(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        if LLVMIsNull(b) != 0 {
            return a;
        }
        LLVMBuildSub(self.builder, a, b, c"".as_ptr())
    }

    /// # Safety
    /// See [`Math`].
    pub unsafe fn mul(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
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
