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
//!   Innermost loops, and inlined calls without loops, in which nothing else reaches the
//!   runtime keep their counts and instances in registers while they run
//!   ([`promoted_regions`]) and report each whole instance at their exits, before the exits'
//!   hooks (`__kage_count_region`).
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
        if plans.iter().any(|plan| !plan.forest.loops.is_empty()) {
            hooks.loop_iter = counter.define_loop_iter(module, &hooks.loop_iter);
        }
        let region_exit = counter.define_region_exit(module);
        let data_layout = LLVMGetModuleDataLayout(module);
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        for plan in plans {
            // Taken before anything is inserted into the function.
            let promoted = promoted_regions(plan);
            let mut local_block = vec![false; plan.cfg.blocks.len()];
            for region in &promoted {
                for &b in &region.blocks {
                    local_block[b] = true;
                }
            }
            let mut additions: Vec<(LLVMValueRef, SegmentCounts, bool)> = Vec::new();
            for segment in function_segments(&plan.cfg, data_layout) {
                let local = local_block[segment.block];
                let (constant, dynamic) = SegmentCounts::of(&segment.accesses);
                if !constant.is_empty() {
                    additions.push((segment.start, constant, local));
                }
                additions.extend(dynamic.into_iter().map(|(at, counts)| (at, counts, local)));
            }
            let entries: Vec<Vec<LLVMValueRef>> = (promoted.iter())
                .map(|region| {
                    (region.entries.iter())
                        .filter_map(|&b| ir::first_insertion_point(plan.cfg.blocks[b]))
                        .collect()
                })
                .collect();
            let skipped_loops: Vec<usize> = promoted.iter().filter_map(|r| r.lp).collect();
            let skipped_settles: Vec<usize> = (promoted.iter())
                .filter(|r| r.lp.is_none())
                .flat_map(|r| r.entries.iter().copied())
                .collect();
            let entry_start = LLVMGetFirstInstruction(plan.cfg.blocks[0]);
            let mut ins = Inserter::new(module, plan.func, builder, &hooks, table);
            // The counts kept in registers while a promoted region runs (allocas that the
            // clean-up's mem2reg promotes), zero outside them.
            let local = (!promoted.is_empty() && !entry_start.is_null()).then(|| {
                ins.position_before(entry_start);
                counter.local_counts(ins.builder, promoted.len())
            });
            hooks::insert(plan, &mut ins, &skipped_loops, &skipped_settles, |ins| {
                if let Some(local) = &local {
                    for (j, region) in promoted.iter().enumerate() {
                        for &at in &entries[j] {
                            ins.position_before(at);
                            counter.count_entry(
                                ins.builder,
                                local.instances[j],
                                region.lp.is_some(),
                            );
                        }
                    }
                }
                for access in &plan.accesses {
                    if let Access::CmpXchg { inst, ptr, size } = *access {
                        ins.cmpxchg_hook(inst, ptr, size);
                    }
                }
                for (at, counts, in_region) in &additions {
                    ins.position_before(*at);
                    let to = local.as_ref().filter(|_| *in_region);
                    counter.add(ins.builder, counts, to);
                }
            });
            // Last, and before the hooks at the exit block's start: the whole instance is
            // reported in its parent, before the exit block settles anywhere else.
            if let Some(local) = &local {
                for (j, region) in promoted.iter().enumerate() {
                    let region_ptr = ins.table.region_ptr(region.region);
                    for &block in &region.exits {
                        if let Some(at) = ir::first_insertion_point(plan.cfg.blocks[block]) {
                            ins.position_before(at);
                            let mut args = [region_ptr, local.instances[j], local.cells];
                            region_exit.call(ins.builder, &mut args);
                        }
                    }
                }
            }
        }
        LLVMDisposeBuilder(builder);
    }
}

/// A region whose counts are kept in registers while it runs and reported whole at its
/// exits ([`promoted_regions`]).
struct PromotedRegion {
    /// Its table entry.
    region: u32,
    /// The loop's index, for a loop; `None` for an inlined call.
    lp: Option<usize>,
    /// Its blocks.
    blocks: Vec<usize>,
    /// Where an instance starts: a loop's header (an iteration: counted), an inlined call's
    /// blocks entered from outside it (noted).
    entries: Vec<usize>,
    /// The blocks outside it that its blocks branch to.
    exits: Vec<usize>,
}

/// The regions whose counts are kept in registers while they run and reported whole at
/// their exits, in which nothing would reach the runtime but their own entry's hook (no call
/// that may run instrumented code, no other region hook, no return, no `cmpxchg` hook). So
/// no region event falls inside them but balanced signal handlers'. They are the innermost
/// loops, and the inlined calls without a region inside (no loop, no inlined call of their
/// own: a call's blocks without a cycle) that are not inside such a loop.
///
/// # Safety
/// `plan` must describe a live function that nothing was inserted into yet.
unsafe fn promoted_regions(plan: &FunctionPlan) -> Vec<PromotedRegion> {
    let loops = &plan.forest.loops;
    let n = plan.cfg.blocks.len();
    // Blocks where something reaches the runtime: returns, resume points, and `cmpxchg`s
    // (their hook counts in the runtime, into the innermost open region, which is the
    // region's parent while it runs).
    let mut reaches_runtime = vec![false; n];
    let cmpxchgs = (plan.accesses.iter()).filter_map(|access| match *access {
        Access::CmpXchg { inst, .. } => Some(inst),
        _ => None,
    });
    let resumes = plan.resume_points.iter().map(|&(inst, _)| inst);
    for inst in plan.exits.iter().copied().chain(cmpxchgs).chain(resumes) {
        let parent = LLVMGetInstructionParent(inst);
        if let Some(block) = plan.cfg.blocks.iter().position(|&b| b == parent) {
            reaches_runtime[block] = true;
        }
    }
    let settle_points = plan.settle_points();
    let mut settles = vec![false; n];
    for &(block, _) in &settle_points {
        settles[block] = true;
    }
    // A block that may hold counts kept in registers.
    let quiet = |b: usize| {
        let block = plan.cfg.blocks[b];
        plan.forest.reachable[b]
            && !reaches_runtime[b]
            && ir::first_insertion_point(block).is_some()
            && !ir::is_landing_pad(block)
            && !ir::instructions(block)
                .into_iter()
                .any(|i| segments::is_cut(i))
    };
    let exits_of = |blocks: &[usize]| {
        let mut exits: Vec<usize> = (blocks.iter())
            .flat_map(|&b| plan.cfg.successors[b].iter().copied())
            .filter(|&s| s < n && !blocks.contains(&s))
            .collect();
        exits.sort_unstable();
        exits.dedup();
        exits
    };
    let placeable = |exits: &[usize]| {
        (exits.iter()).all(|&b| ir::first_insertion_point(plan.cfg.blocks[b]).is_some())
    };
    let mut promoted: Vec<PromotedRegion> = (0..loops.len())
        .filter(|&k| !loops.iter().any(|inner| inner.parent == Some(k)))
        .filter(|&k| loops[k].blocks.iter().all(|&b| quiet(b) && !settles[b]))
        .map(|k| PromotedRegion {
            region: plan.slots.loop_entry(k),
            lp: Some(k),
            blocks: loops[k].blocks.clone(),
            entries: vec![loops[k].header],
            exits: exit_blocks(plan, k),
        })
        .filter(|r| placeable(&r.exits))
        .collect();
    for node in plan.leaf_inlined_calls() {
        let blocks: Vec<usize> = (0..n)
            .filter(|&b| plan.forest.reachable[b] && plan.slots.block_region[b] == node)
            .collect();
        if blocks.is_empty()
            || !blocks.iter().all(|&b| quiet(b))
            || has_cycle(&blocks, &plan.cfg.successors)
        {
            continue;
        }
        // Not inside a promoted loop (its blocks would count twice over).
        if promoted
            .iter()
            .any(|r| r.blocks.iter().any(|b| blocks.contains(b)))
        {
            continue;
        }
        let region = plan.slots.base + node as u32;
        let entries: Vec<usize> = (settle_points.iter())
            .filter(|&&(_, r)| r == region)
            .map(|&(b, _)| b)
            .collect();
        let exits = exits_of(&blocks);
        if entries.is_empty() || !placeable(&exits) {
            continue;
        }
        promoted.push(PromotedRegion {
            region,
            lp: None,
            blocks,
            entries,
            exits,
        });
    }
    promoted
}

/// Whether the blocks `set` branch around a cycle among themselves (Kahn's algorithm on the
/// subgraph they make): an instance of a region made of them could then enter it more than
/// once without leaving it.
fn has_cycle(set: &[usize], successors: &[Vec<usize>]) -> bool {
    let inside = |b: usize| set.binary_search(&b).is_ok();
    let mut indegree = vec![0usize; set.len()];
    for &b in set {
        for &s in successors[b].iter().filter(|&&s| inside(s)) {
            indegree[set.binary_search(&s).unwrap_or(0)] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..set.len()).filter(|&i| indegree[i] == 0).collect();
    let mut removed = 0;
    while let Some(i) = ready.pop() {
        removed += 1;
        for &s in successors[set[i]].iter().filter(|&&s| inside(s)) {
            let j = set.binary_search(&s).unwrap_or(0);
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.push(j);
            }
        }
    }
    removed < set.len()
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
    /// (`__kage_loop_iter`).
    ///
    /// # Safety
    /// `module` must be the module the globals were declared in.
    unsafe fn define_loop_iter(
        &self,
        module: LLVMModuleRef,
        loop_iter: &RuntimeFunction,
    ) -> RuntimeFunction {
        let context = LLVMGetModuleContext(module);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let mut params = [ptr_type];
        let ty = LLVMFunctionType(LLVMVoidTypeInContext(context), params.as_mut_ptr(), 1, 0);
        let f = ir::define_inline_helper(module, "__kage_count_loop_iter", ty);
        let lp = LLVMGetParam(f, 0);
        let builder = LLVMCreateBuilderInContext(context);
        let block =
            |name: &std::ffi::CStr| LLVMAppendBasicBlockInContext(context, f, name.as_ptr());
        let (entry, fast, slow) = (block(c"entry"), block(c"fast"), block(c"slow"));
        LLVMPositionBuilderAtEnd(builder, entry);
        let armed = ir::load_relaxed(builder, ptr_type, self.address(builder, self.fast_loop));
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
        ir::add_relaxed(builder, self.address(builder, self.iterations), one);
        LLVMBuildRetVoid(builder);
        LLVMPositionBuilderAtEnd(builder, slow);
        loop_iter.call(builder, &mut [lp]);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
        RuntimeFunction::helper(f, ty)
    }

    /// An inline helper for a promoted region's exits, `void __kage_count_region_exit(ptr
    /// region, ptr instances, ptr counts)`: when the region ran (`*instances` is not 0; an
    /// exit block may also be reached from outside it), calls `__kage_count_region` with its
    /// instances and its counts (`[4 x i64]`, masked by the gate), and zeroes both.
    ///
    /// # Safety
    /// `module` must be the module the globals were declared in.
    unsafe fn define_region_exit(&self, module: LLVMModuleRef) -> RuntimeFunction {
        let context = LLVMGetModuleContext(module);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let mut params = [ptr_type, ptr_type, ptr_type];
        let ty = LLVMFunctionType(LLVMVoidTypeInContext(context), params.as_mut_ptr(), 3, 0);
        let f = ir::define_inline_helper(module, "__kage_count_region_exit", ty);
        let (region, iterations, cells) =
            (LLVMGetParam(f, 0), LLVMGetParam(f, 1), LLVMGetParam(f, 2));
        let report = RuntimeFunction::declare(module, &symbols::COUNT_REGION);
        let builder = LLVMCreateBuilderInContext(context);
        let block =
            |name: &std::ffi::CStr| LLVMAppendBasicBlockInContext(context, f, name.as_ptr());
        let (entry, ran, done) = (block(c"entry"), block(c"ran"), block(c"done"));
        LLVMPositionBuilderAtEnd(builder, entry);
        let n = LLVMBuildLoad2(builder, self.i64_type, iterations, c"".as_ptr());
        LLVMSetAlignment(n, 8);
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let none = LLVMBuildICmp(builder, LLVMIntPredicate::LLVMIntEQ, n, zero, c"".as_ptr());
        LLVMBuildCondBr(builder, none, done, ran);
        LLVMPositionBuilderAtEnd(builder, ran);
        let mask = self.gate_mask(builder);
        let mut args = vec![region, n];
        for k in 0..4 {
            let cell = self.cell(builder, cells, k);
            let value = LLVMBuildLoad2(builder, self.i64_type, cell, c"".as_ptr());
            LLVMSetAlignment(value, 8);
            args.push(LLVMBuildAnd(builder, value, mask, c"".as_ptr()));
            LLVMSetAlignment(LLVMBuildStore(builder, zero, cell), 8);
        }
        LLVMSetAlignment(LLVMBuildStore(builder, zero, iterations), 8);
        report.call(builder, &mut args);
        LLVMBuildBr(builder, done);
        LLVMPositionBuilderAtEnd(builder, done);
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

    /// At the builder's position (the entry block's start): a function's local counts and
    /// the instances of each of its `regions` promoted regions, zero.
    ///
    /// # Safety
    /// `builder` must be positioned at the start of a function's entry block.
    unsafe fn local_counts(&self, builder: LLVMBuilderRef, regions: usize) -> LocalCounts {
        let cells = LLVMBuildAlloca(builder, self.totals_type, c"kage.counts".as_ptr());
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        for k in 0..4 {
            LLVMSetAlignment(
                LLVMBuildStore(builder, zero, self.cell(builder, cells, k)),
                8,
            );
        }
        let instances = (0..regions)
            .map(|_| {
                let n = LLVMBuildAlloca(builder, self.i64_type, c"kage.instances".as_ptr());
                LLVMSetAlignment(LLVMBuildStore(builder, zero, n), 8);
                n
            })
            .collect();
        LocalCounts { cells, instances }
    }

    /// At the builder's position (a promoted region's entry): a loop's header adds 1 to its
    /// `instances` (an iteration); an inlined call's entry sets it to 1.
    ///
    /// # Safety
    /// `builder` must be positioned in the function `instances` belongs to.
    unsafe fn count_entry(&self, builder: LLVMBuilderRef, instances: LLVMValueRef, is_loop: bool) {
        let one = LLVMConstInt(self.i64_type, 1, 0);
        if is_loop {
            self.add_plain(builder, instances, one);
        } else {
            LLVMSetAlignment(LLVMBuildStore(builder, one, instances), 8);
        }
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

/// A function's counts kept locally while a promoted region runs.
struct LocalCounts {
    /// `[4 x i64]`, as `__kage_count`: the accesses of the promoted region that runs.
    cells: LLVMValueRef,
    /// `i64` per promoted region: a loop's executions of its header since it was entered,
    /// 1 once an inlined call was entered; 0 outside it.
    instances: Vec<LLVMValueRef>,
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
            hooks::insert(plan, &mut ins, &[], &[], |ins| {
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
