//! The count builds, both read by the runtime's count tool:
//!
//! - `count` (instrumentation 9, `KAGE_TOOL` unset or `count`; docs/abi.md, "Count
//!   instrumentation"): the region hooks, and each segment's loads, stores and bytes added
//!   inline to the thread's `__kage_count` at the segment's start. Segments are cut at
//!   calls ([`crate::segments`]): a callee's region events drain what came before the call
//!   into the caller's region, a call that never returns (`exit`, `longjmp`, a throw) ends
//!   a segment whose accesses all ran, and `kage_set_enabled` (a call) switches counting
//!   exactly where the program calls it. At the start, as a call per access would, a fault
//!   counts the faulting access. What a segment adds is masked by `__kage_gate`, as the
//!   calls are gated in the runtime. An `llvm.mem*` of run-time length adds its own right
//!   before it (its length is known there); `cmpxchg`s keep their hook (whether they wrote
//!   is known after). A loop header counts an iteration inline when the runtime has armed
//!   the thread for its loop (the loop's body is the innermost open region: a new iteration
//!   changes nothing but the body's instances), and calls `__kage_loop_iter` otherwise.
//!   Innermost loops in which nothing else reaches the runtime keep their counts and
//!   iterations in registers while they run ([`promoted_loops`]) and add them at their
//!   exits, before the exits' hooks.
//! - `count-calls` (instrumentation 0): the region hooks and a call per access, which every
//!   runtime tool understands.

use kage_abi::{symbols, Instrumentation};
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::target::LLVMGetModuleDataLayout;
use llvm_sys::{LLVMAtomicOrdering, LLVMIntPredicate};

use super::{Settings, Tool};
use crate::access::Access;
use crate::hooks::{self, Hooks, Inserter};
use crate::ir::{self, RuntimeFunction};
use crate::plan::FunctionPlan;
use crate::regions::RegionTable;
use crate::segments::{self, function_segments};

/// Region hooks, counts added inline per segment.
pub struct Count;

/// Region hooks and a call per access.
pub struct CountCalls;

/// The `count` build; it has no settings of its own.
pub fn make(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(Count)
}

/// The `count-calls` build; it has no settings of its own.
pub fn make_calls(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(CountCalls)
}

impl Tool for Count {
    fn instrumentation(&self) -> Instrumentation {
        Instrumentation::Counts
    }

    /// Promoted loops' local counts become registers (mem2reg), and the inlined helpers'
    /// thread-local addresses are merged and hoisted out of loops.
    fn needs_cleanup(&self) -> bool {
        true
    }

    unsafe fn instrument(
        &self,
        module: LLVMModuleRef,
        plans: &[FunctionPlan],
        table: &RegionTable,
    ) {
        let mut hooks = Hooks::declare(module);
        let counter = InlineCounter::declare(module);
        let mut local_loop_iter = None;
        if plans.iter().any(|plan| !plan.forest.loops.is_empty()) {
            local_loop_iter = Some(counter.define_loop_iter(module, &hooks.loop_iter, true));
            hooks.loop_iter = counter.define_loop_iter(module, &hooks.loop_iter, false);
        }
        let data_layout = LLVMGetModuleDataLayout(module);
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        for plan in plans {
            // Taken before anything is inserted into the function.
            let promoted = promoted_loops(plan);
            let in_promoted = |block: usize| {
                (plan.forest.innermost[block]).is_some_and(|k| promoted.contains(&k))
            };
            let mut additions: Vec<(LLVMValueRef, SegmentCounts, bool)> = Vec::new();
            for segment in function_segments(&plan.cfg, data_layout) {
                let local = in_promoted(segment.block);
                let (constant, dynamic) = SegmentCounts::of(&segment.accesses);
                if !constant.is_empty() {
                    additions.push((segment.start, constant, local));
                }
                additions.extend(dynamic.into_iter().map(|(at, counts)| (at, counts, local)));
            }
            let flushes: Vec<usize> = {
                let mut blocks: Vec<usize> = promoted
                    .iter()
                    .flat_map(|&k| exit_blocks(plan, k))
                    .collect();
                blocks.sort_unstable();
                blocks.dedup();
                blocks
            };
            let headers: Vec<(LLVMValueRef, u32)> = (promoted.iter())
                .filter_map(|&k| {
                    let at =
                        ir::first_insertion_point(plan.cfg.blocks[plan.forest.loops[k].header])?;
                    Some((at, plan.slots.loop_entry(k)))
                })
                .collect();
            let entry_start = LLVMGetFirstInstruction(plan.cfg.blocks[0]);
            let mut ins = Inserter::new(module, plan.func, builder, &hooks, table);
            // The counts kept in registers while a promoted loop runs (allocas that the
            // clean-up's mem2reg promotes), zero outside the loops.
            let local = (!promoted.is_empty() && !entry_start.is_null()).then(|| {
                ins.position_before(entry_start);
                counter.local_counts(ins.builder)
            });
            hooks::insert(plan, &mut ins, &promoted, |ins| {
                if let (Some(local), Some(helper)) = (&local, &local_loop_iter) {
                    for &(at, region) in &headers {
                        ins.position_before(at);
                        let region = ins.table.region_ptr(region);
                        helper.call(ins.builder, &mut [region, local.iterations]);
                    }
                }
                for access in &plan.accesses {
                    if let Access::CmpXchg { inst, ptr, size } = *access {
                        ins.cmpxchg_hook(inst, ptr, size);
                    }
                }
                for (at, counts, in_loop) in &additions {
                    ins.position_before(*at);
                    let to = local.as_ref().filter(|_| *in_loop);
                    counter.add(ins.builder, counts, to);
                }
            });
            // Last, so before the hooks at the exit block's start: a settle there drains the
            // cells into the loop's body, still the innermost region.
            if let Some(local) = &local {
                for &block in &flushes {
                    if let Some(at) = ir::first_insertion_point(plan.cfg.blocks[block]) {
                        ins.position_before(at);
                        counter.flush(ins.builder, local);
                    }
                }
            }
        }
        LLVMDisposeBuilder(builder);
    }
}

/// The loops whose counts are kept in registers while they run and added to the thread's
/// at their exits: innermost loops in which nothing but their header's iteration hook would
/// reach the runtime (no call that may run instrumented code, no other region hook, no
/// return). So no region event falls inside them but a first iteration's (the loop is
/// entered, before anything is counted) and balanced signal handlers'.
///
/// # Safety
/// `plan` must describe a live function that nothing was inserted into yet.
unsafe fn promoted_loops(plan: &FunctionPlan) -> Vec<usize> {
    let loops = &plan.forest.loops;
    let mut hooked = vec![false; plan.cfg.blocks.len()];
    for (block, _) in plan.settle_points() {
        hooked[block] = true;
    }
    for &(_, block) in &plan.resume_points {
        hooked[block] = true;
    }
    for &exit in &plan.exits {
        let parent = LLVMGetInstructionParent(exit);
        if let Some(block) = plan.cfg.blocks.iter().position(|&b| b == parent) {
            hooked[block] = true;
        }
    }
    (0..loops.len())
        .filter(|&k| !loops.iter().any(|inner| inner.parent == Some(k)))
        .filter(|&k| {
            loops[k].blocks.iter().all(|&b| {
                let block = plan.cfg.blocks[b];
                plan.forest.reachable[b]
                    && !hooked[b]
                    && ir::first_insertion_point(block).is_some()
                    && !ir::is_landing_pad(block)
                    && !ir::instructions(block)
                        .into_iter()
                        .any(|i| segments::is_cut(i))
            })
        })
        .filter(|&k| {
            // Every exit block has a place for the flush.
            (exit_blocks(plan, k).into_iter())
                .all(|b| ir::first_insertion_point(plan.cfg.blocks[b]).is_some())
        })
        .collect()
}

/// The blocks outside loop `k` that its blocks branch to.
fn exit_blocks(plan: &FunctionPlan, k: usize) -> Vec<usize> {
    let lp = &plan.forest.loops[k];
    let mut exits: Vec<usize> = (lp.blocks.iter())
        .flat_map(|&b| plan.cfg.successors[b].iter().copied())
        .filter(|&s| s < plan.cfg.blocks.len() && !plan.forest.contains(k, s))
        .collect();
    exits.sort_unstable();
    exits.dedup();
    exits
}

/// What is added to `__kage_count` at one place: constants (a segment's), or the length of
/// an `llvm.mem*` call of run-time length.
#[derive(Default)]
struct SegmentCounts {
    /// Loads, stores, bytes read, bytes written, as `__kage_count` orders them.
    constant: [u64; 4],
    /// `(len, reads)`: one store (and one load when `reads`) of `len` bytes, none when `len`
    /// is 0, as the runtime ignores empty accesses.
    dynamic: Vec<(LLVMValueRef, bool)>,
}

const LOADS: usize = 0;
const STORES: usize = 1;
const BYTES_READ: usize = 2;
const BYTES_WRITTEN: usize = 3;

impl SegmentCounts {
    /// The constant counts of `accesses`, and each `llvm.mem*` of run-time length with the
    /// instruction before which its own counts go (`cmpxchg`s are counted by their hook).
    ///
    /// # Safety
    /// The accesses' values must be live.
    unsafe fn of(accesses: &[Access]) -> (Self, Vec<(LLVMValueRef, SegmentCounts)>) {
        let mut counts = SegmentCounts::default();
        let mut dynamic = Vec::new();
        for access in accesses {
            match *access {
                Access::Plain {
                    size, load, store, ..
                } if size > 0 => {
                    if load {
                        counts.constant[LOADS] += 1;
                        counts.constant[BYTES_READ] += size;
                    }
                    if store {
                        counts.constant[STORES] += 1;
                        counts.constant[BYTES_WRITTEN] += size;
                    }
                }
                Access::Plain { .. } | Access::CmpXchg { .. } => {}
                Access::Intrinsic { at, src, len, .. } => {
                    if LLVMIsAConstantInt(len).is_null() {
                        let own = SegmentCounts {
                            constant: [0; 4],
                            dynamic: vec![(len, src.is_some())],
                        };
                        dynamic.push((at, own));
                        continue;
                    }
                    let len = LLVMConstIntGetZExtValue(len);
                    if len > 0 {
                        if src.is_some() {
                            counts.constant[LOADS] += 1;
                            counts.constant[BYTES_READ] += len;
                        }
                        counts.constant[STORES] += 1;
                        counts.constant[BYTES_WRITTEN] += len;
                    }
                }
            }
        }
        (counts, dynamic)
    }

    fn is_empty(&self) -> bool {
        self.constant == [0; 4] && self.dynamic.is_empty()
    }
}

/// `__kage_count`, `__kage_gate`, `__kage_fast_loop` and `__kage_iterations`, declared in
/// one module.
struct InlineCounter {
    totals: LLVMValueRef,
    totals_type: LLVMTypeRef,
    gate: LLVMValueRef,
    fast_loop: LLVMValueRef,
    iterations: LLVMValueRef,
    i32_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
    module: LLVMModuleRef,
}

impl InlineCounter {
    /// Declares the globals in `module`.
    ///
    /// # Safety
    /// `module` must be a valid module.
    unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        let i64_type = LLVMInt64TypeInContext(context);
        let totals = ir::declare_runtime_global(module, &symbols::COUNT_TOTALS);
        InlineCounter {
            totals,
            totals_type: LLVMGlobalGetValueType(totals),
            gate: ir::declare_runtime_global(module, &symbols::GATE),
            fast_loop: ir::declare_runtime_global(module, &symbols::FAST_LOOP),
            iterations: ir::declare_runtime_global(module, &symbols::ITERATIONS),
            i32_type: LLVMInt32TypeInContext(context),
            i64_type,
            module,
        }
    }

    /// An inline helper for loop headers. `void __kage_count_loop_iter(ptr loop)`: adds 1 to
    /// `__kage_iterations` when `__kage_fast_loop` is `loop`, else calls `loop_iter`
    /// (`__kage_loop_iter`). With `local`, `void __kage_count_loop_iter_local(ptr loop, ptr
    /// iterations)`, for promoted loops: adds 1 to `*iterations` (the loop's count in a
    /// register) instead.
    ///
    /// # Safety
    /// `module` must be the module the globals were declared in.
    unsafe fn define_loop_iter(
        &self,
        module: LLVMModuleRef,
        loop_iter: &RuntimeFunction,
        local: bool,
    ) -> RuntimeFunction {
        let context = LLVMGetModuleContext(module);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let mut params = [ptr_type, ptr_type];
        let arity = if local { 2 } else { 1 };
        let ty = LLVMFunctionType(
            LLVMVoidTypeInContext(context),
            params.as_mut_ptr(),
            arity,
            0,
        );
        let name = if local {
            "__kage_count_loop_iter_local"
        } else {
            "__kage_count_loop_iter"
        };
        let f = ir::define_inline_helper(module, name, ty);
        let lp = LLVMGetParam(f, 0);
        let builder = LLVMCreateBuilderInContext(context);
        let block =
            |name: &std::ffi::CStr| LLVMAppendBasicBlockInContext(context, f, name.as_ptr());
        let (entry, fast, slow) = (block(c"entry"), block(c"fast"), block(c"slow"));
        LLVMPositionBuilderAtEnd(builder, entry);
        let armed = LLVMBuildLoad2(
            builder,
            ptr_type,
            self.address(builder, self.fast_loop),
            c"".as_ptr(),
        );
        LLVMSetOrdering(armed, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
        LLVMSetAlignment(armed, 8);
        let same = LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntEQ,
            armed,
            lp,
            c"".as_ptr(),
        );
        let branch = LLVMBuildCondBr(builder, same, fast, slow);
        ir::set_branch_weights(branch, 1 << 20, 1);
        LLVMPositionBuilderAtEnd(builder, fast);
        let one = LLVMConstInt(self.i64_type, 1, 0);
        if local {
            self.add_plain(builder, LLVMGetParam(f, 1), one);
        } else {
            ir::add_relaxed(builder, self.address(builder, self.iterations), one);
        }
        LLVMBuildRetVoid(builder);
        LLVMPositionBuilderAtEnd(builder, slow);
        loop_iter.call(builder, &mut [lp]);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
        RuntimeFunction::helper(f, ty)
    }

    /// `llvm.threadlocal.address(global)`.
    unsafe fn address(&self, builder: LLVMBuilderRef, global: LLVMValueRef) -> LLVMValueRef {
        ir::thread_local_address(self.module, builder, global)
    }

    /// `*cell += value`, a local's plain load and store (mem2reg makes it a register).
    unsafe fn add_plain(&self, builder: LLVMBuilderRef, cell: LLVMValueRef, value: LLVMValueRef) {
        let old = LLVMBuildLoad2(builder, self.i64_type, cell, c"".as_ptr());
        LLVMSetAlignment(old, 8);
        let new = LLVMBuildAdd(builder, old, value, c"".as_ptr());
        LLVMSetAlignment(LLVMBuildStore(builder, new, cell), 8);
    }

    /// `mask`: all ones while `__kage_gate` is 0, else 0.
    unsafe fn gate_mask(&self, builder: LLVMBuilderRef) -> LLVMValueRef {
        let gate = LLVMBuildLoad2(builder, self.i32_type, self.gate, c"".as_ptr());
        LLVMSetOrdering(gate, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
        LLVMSetAlignment(gate, 4);
        let zero = LLVMConstInt(self.i32_type, 0, 0);
        let open = LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntEQ,
            gate,
            zero,
            c"".as_ptr(),
        );
        LLVMBuildSExt(builder, open, self.i64_type, c"".as_ptr())
    }

    /// Cell `k` of a `[4 x i64]` at `base`.
    unsafe fn cell(&self, builder: LLVMBuilderRef, base: LLVMValueRef, k: usize) -> LLVMValueRef {
        let mut indices = [
            LLVMConstInt(self.i64_type, 0, 0),
            LLVMConstInt(self.i64_type, k as u64, 0),
        ];
        LLVMBuildInBoundsGEP2(
            builder,
            self.totals_type,
            base,
            indices.as_mut_ptr(),
            2,
            c"".as_ptr(),
        )
    }

    /// At the builder's position (the entry block's start): a function's local counts, zero.
    ///
    /// # Safety
    /// `builder` must be positioned at the start of a function's entry block.
    unsafe fn local_counts(&self, builder: LLVMBuilderRef) -> LocalCounts {
        let cells = LLVMBuildAlloca(builder, self.totals_type, c"kage.counts".as_ptr());
        let iterations = LLVMBuildAlloca(builder, self.i64_type, c"kage.iterations".as_ptr());
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        for k in 0..4 {
            LLVMSetAlignment(
                LLVMBuildStore(builder, zero, self.cell(builder, cells, k)),
                8,
            );
        }
        LLVMSetAlignment(LLVMBuildStore(builder, zero, iterations), 8);
        LocalCounts { cells, iterations }
    }

    /// At the builder's position (a promoted loop's exit): the local counts added to the
    /// thread's (masked by the gate) and the local iterations to `__kage_iterations`, then
    /// zeroed.
    ///
    /// # Safety
    /// `builder` must be positioned in the function `local` belongs to.
    unsafe fn flush(&self, builder: LLVMBuilderRef, local: &LocalCounts) {
        let mask = self.gate_mask(builder);
        let totals = self.address(builder, self.totals);
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        for k in 0..4 {
            let cell = self.cell(builder, local.cells, k);
            let value = LLVMBuildLoad2(builder, self.i64_type, cell, c"".as_ptr());
            LLVMSetAlignment(value, 8);
            let masked = LLVMBuildAnd(builder, value, mask, c"".as_ptr());
            ir::add_relaxed(builder, self.cell(builder, totals, k), masked);
            LLVMSetAlignment(LLVMBuildStore(builder, zero, cell), 8);
        }
        let value = LLVMBuildLoad2(builder, self.i64_type, local.iterations, c"".as_ptr());
        LLVMSetAlignment(value, 8);
        ir::add_relaxed(builder, self.address(builder, self.iterations), value);
        LLVMSetAlignment(LLVMBuildStore(builder, zero, local.iterations), 8);
    }

    /// At the builder's position: `counts` added to the thread's cells, each masked by the
    /// gate (relaxed atomic loads and stores, plain moves: only this thread writes its cells),
    /// or, inside a promoted loop, to the function's local counts.
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module, where `counts`' lengths
    /// are defined (and `local`, if any, is the function's).
    unsafe fn add(
        &self,
        builder: LLVMBuilderRef,
        counts: &SegmentCounts,
        local: Option<&LocalCounts>,
    ) {
        let mut values: [Option<LLVMValueRef>; 4] = [None; 4];
        for (k, &constant) in counts.constant.iter().enumerate() {
            if constant != 0 {
                values[k] = Some(LLVMConstInt(self.i64_type, constant, 0));
            }
        }
        for &(len, reads) in &counts.dynamic {
            let len = LLVMBuildIntCast2(builder, len, self.i64_type, 0, c"".as_ptr());
            let zero = LLVMConstInt(self.i64_type, 0, 0);
            let nonempty = LLVMBuildICmp(
                builder,
                LLVMIntPredicate::LLVMIntNE,
                len,
                zero,
                c"".as_ptr(),
            );
            let one = LLVMBuildZExt(builder, nonempty, self.i64_type, c"".as_ptr());
            let mut plus = |k: usize, v: LLVMValueRef| {
                values[k] = Some(match values[k] {
                    Some(sum) => LLVMBuildAdd(builder, sum, v, c"".as_ptr()),
                    None => v,
                });
            };
            if reads {
                plus(LOADS, one);
                plus(BYTES_READ, len);
            }
            plus(STORES, one);
            plus(BYTES_WRITTEN, len);
        }
        if let Some(local) = local {
            for (k, value) in values.iter().enumerate() {
                if let Some(value) = *value {
                    self.add_plain(builder, self.cell(builder, local.cells, k), value);
                }
            }
            return;
        }
        let mask = self.gate_mask(builder);
        let totals = self.address(builder, self.totals);
        for (k, value) in values.iter().enumerate() {
            let Some(value) = *value else { continue };
            let masked = LLVMBuildAnd(builder, value, mask, c"".as_ptr());
            ir::add_relaxed(builder, self.cell(builder, totals, k), masked);
        }
    }
}

/// A function's counts kept locally while a promoted loop runs.
struct LocalCounts {
    /// `[4 x i64]`, as `__kage_count`.
    cells: LLVMValueRef,
    /// `i64`: iterations counted inline.
    iterations: LLVMValueRef,
}

impl Tool for CountCalls {
    fn instrumentation(&self) -> Instrumentation {
        Instrumentation::Calls
    }

    unsafe fn instrument(
        &self,
        module: LLVMModuleRef,
        plans: &[FunctionPlan],
        table: &RegionTable,
    ) {
        let hooks = Hooks::declare(module);
        let calls = AccessCalls {
            load: RuntimeFunction::declare(module, &symbols::LOAD),
            store: RuntimeFunction::declare(module, &symbols::STORE),
            i64_type: LLVMInt64TypeInContext(LLVMGetModuleContext(module)),
        };
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        for plan in plans {
            let mut ins = Inserter::new(module, plan.func, builder, &hooks, table);
            hooks::insert(plan, &mut ins, &[], |ins| {
                for access in &plan.accesses {
                    calls.insert(ins, access);
                }
            });
        }
        LLVMDisposeBuilder(builder);
    }
}

/// `__kage_load` and `__kage_store`.
struct AccessCalls {
    load: RuntimeFunction,
    store: RuntimeFunction,
    i64_type: LLVMTypeRef,
}

impl AccessCalls {
    /// The calls of docs/abi.md's table for one access: `__kage_load`/`__kage_store` before
    /// it, or `__kage_cmpxchg` after a `cmpxchg`.
    ///
    /// # Safety
    /// `access` must be an access of the function `ins` was made for.
    unsafe fn insert(&self, ins: &mut Inserter, access: &Access) {
        match *access {
            Access::Plain {
                at,
                ptr,
                size,
                load,
                store,
            } => {
                ins.position_before(at);
                let size = LLVMConstInt(self.i64_type, size, 0);
                if load {
                    self.load.call(ins.builder, &mut [ptr, size]);
                }
                if store {
                    self.store.call(ins.builder, &mut [ptr, size]);
                }
            }
            Access::CmpXchg { inst, ptr, size } => ins.cmpxchg_hook(inst, ptr, size),
            Access::Intrinsic { at, dst, src, len } => {
                ins.position_before(at);
                let len = LLVMBuildIntCast2(ins.builder, len, self.i64_type, 0, c"".as_ptr());
                if let Some(src) = src {
                    self.load.call(ins.builder, &mut [src, len]);
                }
                self.store.call(ins.builder, &mut [dst, len]);
            }
        }
    }
}
