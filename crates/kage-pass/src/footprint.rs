//! Footprint instrumentation (mode 3, docs/abi.md "Footprint instrumentation"): the region
//! hooks of mode 0, with the accesses reported in groups.
//!
//! A footprint counts the distinct locations each open region instance touched, whatever
//! the order of the accesses. So accesses may be reported later and together as long as the
//! same instances are open when they are reported, and an access to bytes already reported
//! in the current innermost instance (or in a child instance that has since ended: its
//! locations count for the parent too) need not be reported again. Hence:
//!
//! - **Segments.** Each block is cut into segments at calls, as for the working set
//!   ([`crate::working_set::function_segments`]). A segment's accesses are reported at its
//!   end (before the call or the terminator), ranges with one base and constant offsets
//!   merged where they overlap or touch: one `__kage_fp_range(ptr, len)` per merged range
//!   (the runtime's C part appends it to a thread-local buffer that the tool drains at
//!   region events; a call, not inline code: sqlite's text grew by 2.9 MB of resident
//!   pages when it was inline).
//!   Region hooks sit only at block starts (`__kage_func_enter`, `__kage_loop_iter`,
//!   `__kage_settle`, `__kage_resume_at`) and right before `ret`/`resume`
//!   (`__kage_func_exit`, inserted after the reports), so a segment's reports see the
//!   instances its accesses saw. A call's own region events are balanced: after it returns,
//!   the same instances are open.
//! - **Already reported.** Along each path, the byte ranges reported since the last
//!   checkpoint ([`crate::checkpoints`]: the function's start and loop headers, where a loop
//!   instance may begin) are tracked; a range they cover is left out. Calls do not end
//!   what is tracked (see above) except calls to `returns_twice` functions, and neither do
//!   loop exits (`__kage_settle` ends a loop instance; what it touched counts for its parent).
//!   Landing pads start afresh too.
//! - **Hoisted loops** ([`crate::hoist`], [`Coverage::Bytes`](crate::hoist::Coverage)):
//!   per chunk of iterations, see [`crate::hoist::emit_footprint`].
//! - **The access count.** Every group adds the number of accesses it stands for to the
//!   thread's `__kage_fp_accesses` inline (relaxed atomic load and store: other threads only
//!   read it), so the report's `accesses` equals a build for every tool's.
//!
//! `cmpxchg`s keep their own hook (`__kage_cmpxchg`: whether they wrote is known only
//! after), and count themselves in the runtime.

use std::collections::HashSet;

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::target::LLVMTargetDataRef;
use llvm_sys::LLVMAtomicOrdering;

use crate::access::{Access, Length, Range};
use crate::checkpoints::{Checkpoints, Marked};
use crate::instrument::FunctionPlan;
use crate::ir;
use crate::working_set::{function_segments, plan_marks, Mark, Segment};

/// `void __kage_fp_strided(const void *addr, uint64_t width, uint64_t stride, uint64_t count)`.
pub const STRIDED: &str = "__kage_fp_strided";
/// `__thread uint64_t __kage_fp_accesses` (initial-exec).
pub const ACCESSES: &str = "__kage_fp_accesses";
/// `void __kage_fp_range(const void *addr, uint64_t len)`: a range, buffered by the runtime's
/// C part (docs/abi.md).
pub const RANGE: &str = "__kage_fp_range";

/// The runtime's footprint symbols, declared in one module.
pub struct FpRuntime {
    pub strided: LLVMValueRef,
    pub strided_type: LLVMTypeRef,
    /// The thread-local access counter.
    pub accesses: LLVMValueRef,
    /// `__kage_fp_range`.
    range: LLVMValueRef,
    range_type: LLVMTypeRef,
    pub i64_type: LLVMTypeRef,
}

impl FpRuntime {
    /// Declares the symbols in `module`.
    ///
    /// # Safety
    /// `module` must be a valid module.
    pub unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        let i64_type = LLVMInt64TypeInContext(context);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let mut params = [ptr_type, i64_type, i64_type, i64_type];
        let strided_type =
            LLVMFunctionType(LLVMVoidTypeInContext(context), params.as_mut_ptr(), 4, 0);
        let range_type =
            LLVMFunctionType(LLVMVoidTypeInContext(context), params.as_mut_ptr(), 2, 0);
        FpRuntime {
            strided: ir::declare_runtime_function(module, STRIDED, strided_type),
            strided_type,
            accesses: ir::declare_runtime_global(module, ACCESSES, true),
            range: ir::declare_runtime_function(module, RANGE, range_type),
            range_type,
            i64_type,
        }
    }

    /// At the builder's position: `__kage_fp_range(ptr, len)`.
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module; `ptr` a pointer, `len` an
    /// i64.
    pub unsafe fn report_range(
        &self,
        builder: LLVMBuilderRef,
        ptr: LLVMValueRef,
        len: LLVMValueRef,
    ) {
        let mut args = [ptr, len];
        LLVMBuildCall2(
            builder,
            self.range_type,
            self.range,
            args.as_mut_ptr(),
            2,
            c"".as_ptr(),
        );
    }

    /// An i64 constant.
    pub fn constant(&self, value: u64) -> LLVMValueRef {
        unsafe { LLVMConstInt(self.i64_type, value, 0) }
    }

    /// At the builder's position: `__kage_fp_accesses += n`, relaxed.
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module; `n` an i64.
    pub unsafe fn count(&self, builder: LLVMBuilderRef, n: LLVMValueRef) {
        let old = LLVMBuildLoad2(builder, self.i64_type, self.accesses, c"".as_ptr());
        LLVMSetOrdering(old, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
        LLVMSetAlignment(old, 8);
        let new = LLVMBuildAdd(builder, old, n, c"".as_ptr());
        let store = LLVMBuildStore(builder, new, self.accesses);
        LLVMSetOrdering(store, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
        LLVMSetAlignment(store, 8);
    }

    /// At the builder's position: `__kage_fp_strided(ptr, width, stride, count)`.
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module; the others are a pointer
    /// and i64s.
    pub unsafe fn report(
        &self,
        builder: LLVMBuilderRef,
        ptr: LLVMValueRef,
        width: LLVMValueRef,
        stride: LLVMValueRef,
        count: LLVMValueRef,
    ) {
        let mut args = [ptr, width, stride, count];
        LLVMBuildCall2(
            builder,
            self.strided_type,
            self.strided,
            args.as_mut_ptr(),
            4,
            c"".as_ptr(),
        );
    }
}

/// How many accesses a build for every tool would report for `access` (one per load and per
/// store hook).
fn hook_count(access: &Access) -> u64 {
    match *access {
        Access::Plain { load, store, .. } => u64::from(load) + u64::from(store),
        Access::Intrinsic { src, .. } => 1 + u64::from(src.is_some()),
        Access::CmpXchg { .. } => 0,
    }
}

/// What one segment reports, at its end: its access count and the merged ranges not
/// reported before on every path.
pub struct SegmentReport {
    /// The cutting call or terminator the reports go before.
    pub end: LLVMValueRef,
    /// The accesses it stands for.
    pub accesses: u64,
    pub marks: Vec<Mark>,
}

/// Plans the reports of the accesses of `plan`'s function per segment (see the module
/// docs), except those in `hoisted` and `cmpxchg`s, which the caller instruments.
///
/// # Safety
/// `plan` must describe a live function not yet changed.
pub unsafe fn plan_reports(
    plan: &FunctionPlan,
    hoisted: &HashSet<LLVMValueRef>,
    data_layout: LLVMTargetDataRef,
) -> Vec<SegmentReport> {
    let segments = function_segments(plan, data_layout);
    let checkpoints = Checkpoints::new(&plan.cfg.successors);
    let mut by_block: Vec<Vec<&Segment>> = vec![Vec::new(); plan.cfg.blocks.len()];
    for segment in &segments {
        by_block[segment.block].push(segment);
    }
    let mut out = Vec::new();
    // What each block leaves reported, for its successors; `None` until visited.
    let mut reported_at_end: Vec<Option<Marked<LLVMValueRef>>> = vec![None; plan.cfg.blocks.len()];
    for &b in &checkpoints.order {
        let block = plan.cfg.blocks[b];
        let mut reported = if checkpoints.at_start[b] || ir::is_landing_pad(block) {
            Marked::default()
        } else {
            let predecessors = checkpoints.predecessors[b].iter();
            Marked::meet_all(predecessors.filter_map(|&p| reported_at_end[p].as_ref()))
        };
        for segment in &by_block[b] {
            let accesses: Vec<&Access> = (segment.accesses.iter())
                .filter(|a| !hoisted.contains(&a.instruction()))
                .filter(|a| !matches!(a, Access::CmpXchg { .. }))
                .collect();
            let n: u64 = accesses.iter().map(|a| hook_count(a)).sum();
            if n > 0 {
                let ranges: Vec<Range> = accesses.iter().flat_map(|a| a.ranges()).collect();
                let marks = (plan_marks(data_layout, &ranges, 1).into_iter())
                    .filter(|mark| match *mark {
                        Mark::Bytes { base, lo, hi, .. } => {
                            let new = !reported.covers(base, lo, hi);
                            reported.add(base, lo, hi);
                            new
                        }
                        Mark::Whole { .. } => true,
                    })
                    .collect();
                out.push(SegmentReport {
                    end: segment.end,
                    accesses: n,
                    marks,
                });
            }
            if ir::calls_returns_twice(segment.end) {
                reported.clear();
            }
        }
        reported_at_end[b] = Some(reported);
    }
    out
}

/// Emits `reports`: before each segment's end, the count and one `__kage_fp_range(ptr,
/// len)` per range. `position(at)` puts `builder` right before `at` with the hook
/// location of `at`.
///
/// # Safety
/// `reports` must come from [`plan_reports`] on a live function of `rt`'s module.
pub unsafe fn emit_reports(
    reports: &[SegmentReport],
    rt: &FpRuntime,
    builder: LLVMBuilderRef,
    position: &mut dyn FnMut(LLVMValueRef),
) {
    for report in reports {
        position(report.end);
        rt.count(builder, rt.constant(report.accesses));
        for mark in &report.marks {
            let (ptr, len) = match *mark {
                Mark::Bytes {
                    base,
                    lo,
                    hi,
                    exact,
                    ..
                } => {
                    let ptr = exact
                        .unwrap_or_else(|| ir::byte_gep(builder, base, rt.constant(lo as u64)));
                    (ptr, rt.constant((hi - lo) as u64))
                }
                Mark::Whole { ptr, len } => {
                    let len = match len {
                        Length::Constant(n) => rt.constant(n),
                        Length::Dynamic(v) => {
                            LLVMBuildIntCast2(builder, v, rt.i64_type, 0, c"".as_ptr())
                        }
                    };
                    (ptr, len)
                }
            };
            rt.report_range(builder, ptr, len);
        }
    }
}
