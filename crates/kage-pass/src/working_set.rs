//! Working-set instrumentation (modes 1 and 2, docs/abi.md "Working-set instrumentation").
//!
//! Each block is cut into *segments* at calls that may run instrumented code. A segment with
//! accesses spends them from the budget at its start and marks them at its end: nothing
//! between the two can tick, so delaying and coalescing the marks keeps every access in the
//! interval it happened in. Accesses with the same base pointer and constant offsets share
//! one mark call per merged range. Only segments at checkpoints ([`crate::checkpoints`]:
//! the function's start and loop headers) check the budget and may tick; a mark whose bytes
//! were already marked since the last checkpoint or call on every path is left out. Innermost loops of a simple counted form
//! are counted and marked per chunk of iterations instead ([`crate::hoist`]): one helper
//! call at the start of each iteration, which checks and marks when a chunk starts. In
//! mode 2 every access also calls `__kage_ws_trace` right before it.
//!
//! The budget in a function. The budget checks of a function count down a local copy of
//! the thread's budget (an `alloca` that the cleanup after the pass promotes to a
//! register), not the thread-local itself: a read-modify-write of one memory location per
//! segment makes a chain of store-to-load forwarding through the whole function, which
//! is most of what the checks cost in branchy code. The copy is loaded from the
//! thread-local at the function's entry, after every cutting call and at the start of every
//! block an `invoke` or `callbr` leads to (normal or unwind), and stored back before every
//! cutting call, `ret` and `resume`, and before every branch into such a block; a tick
//! stores it before and loads it after. So at every point where other code could read or
//! change the budget (a callee, the tick, the caller after a return or an unwind) the
//! thread-local holds exactly what a check-by-check update would have left there, and
//! interval boundaries fall exactly where they did. A signal handler that runs
//! instrumented code between two of these points decrements (or ticks) the thread-local
//! while the interrupted function keeps its copy, which the function later stores back:
//! the handler's accesses are then not counted towards the next boundary, which moves
//! later by as much (marks are never affected).

use std::collections::{HashMap, HashSet};

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMBuilderRef, LLVMModuleRef, LLVMValueRef};
use llvm_sys::target::{LLVMGetModuleDataLayout, LLVMTargetDataRef};
use llvm_sys::LLVMOpcode;

use crate::access::{classify_access, Access, Length, Range};
use crate::address::{merge_ranges_within, split_constant_offset, MERGE_GAP};
use crate::checkpoints::{Checkpoints, Marked};
use crate::debuginfo::HookLocations;
use crate::hoist;
use crate::instrument::FunctionPlan;
use crate::ir;
use crate::mode::Instrumentation;
use crate::regions::RegionTable;
use crate::ws_runtime::{LineSpan, WsRuntime};

/// Constant-length `llvm.mem*` ranges up to this size are coalesced like ordinary accesses;
/// longer ones get a mark call of their own.
pub const COALESCED_LENGTH_LIMIT: u64 = 4096;

/// Intrinsics that can run arbitrary code: calls to them end a segment like other calls.
const CALLING_INTRINSICS: &[&str] = &[
    "llvm.experimental.gc.statepoint",
    "llvm.experimental.patchpoint",
    "llvm.coro.",
    "llvm.icall.branch.funnel",
];

/// Instruments every planned function for mode 1 or 2, marking lines of `line_size` bytes.
///
/// # Safety
/// `module` must be valid, `plans` made from its functions and `table` emitted into it.
pub unsafe fn instrument_functions(
    module: LLVMModuleRef,
    plans: &[FunctionPlan],
    table: &RegionTable,
    mode: Instrumentation,
    line_size: u64,
) {
    let data_layout = LLVMGetModuleDataLayout(module);
    let mut runtime = WsRuntime::new(module, line_size);
    let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
    for plan in plans {
        // Decide everything about the function before changing it.
        let hoists =
            hoist::plan_function(&plan.cfg, &plan.forest, data_layout, hoist::Coverage::Lines);
        let segments = function_segments(plan, data_layout);
        let mut inserter = WsInserter {
            builder,
            runtime: &mut runtime,
            locations: HookLocations::new(module, plan.func),
            data_layout,
            traces: mode.traces(),
            local_budget: std::ptr::null_mut(),
        };
        let hoisted: HashSet<LLVMValueRef> = hoists
            .iter()
            .flat_map(|h| h.accesses.iter().copied())
            .collect();
        let checks = segments.iter().any(|s| {
            s.accesses
                .iter()
                .any(|a| !hoisted.contains(&a.instruction()))
        });
        if !checks && hoists.is_empty() {
            continue; // no budget check: the function never touches the budget
        }
        // First, so that the loads of the local budget come before the checks that the
        // segments put at the same places.
        inserter.local_budget = place_local_budget(&mut inserter, plan);
        let checkpoints = Checkpoints::new(&plan.cfg.successors);
        let hoisted_headers: HashSet<usize> = hoists
            .iter()
            .map(|h| plan.forest.loops[h.loop_index].header)
            .collect();
        let mut by_block: Vec<Vec<&Segment>> = vec![Vec::new(); plan.cfg.blocks.len()];
        for segment in &segments {
            by_block[segment.block].push(segment);
        }
        // What each block leaves marked, for its successors; `None` until visited.
        let mut marked_at_end: Vec<Option<Marked<LLVMValueRef>>> =
            vec![None; plan.cfg.blocks.len()];
        for &b in &checkpoints.order {
            let mut marked = if checkpoints.at_start[b] {
                Marked::default()
            } else {
                let predecessors = checkpoints.predecessors[b].iter();
                Marked::meet_all(predecessors.filter_map(|&p| marked_at_end[p].as_ref()))
            };
            let region = plan.slots.innermost_region(plan.forest.innermost[b]);
            for (i, segment) in by_block[b].iter().enumerate() {
                // A hoisted loop's chunk helper checks at its header itself; a function
                // whose accesses are all in hoisted loops spends nothing outside them.
                let check = i == 0
                    && checkpoints.at_start[b]
                    && !hoisted_headers.contains(&b)
                    && (b != 0 || checks);
                let region = table.region_ptr(region);
                inserter.segment(segment, region, &hoisted, check, &mut marked);
            }
            marked_at_end[b] = Some(marked);
        }
        // After the segments: the preheader's own marks stay before the values computed
        // for the loop, and the chunk call goes before mode 2's traces in the header.
        for h in &hoists {
            let region = plan.slots.loop_body(h.loop_index);
            hoist::emit(h, &mut inserter, table.region_ptr(region));
        }
    }
    LLVMDisposeBuilder(builder);
}

/// Allocates the function's local budget and places its loads and stores (see the module
/// docs); returns the `alloca`.
unsafe fn place_local_budget(inserter: &mut WsInserter, plan: &FunctionPlan) -> LLVMValueRef {
    let cfg = &plan.cfg;
    let entry = cfg.blocks[0];
    // At the very top of the entry block, so that it is a static alloca.
    inserter.position_before(LLVMGetFirstInstruction(entry));
    let local = LLVMBuildAlloca(
        inserter.builder,
        inserter.runtime.i64_type,
        c"kage.budget".as_ptr(),
    );
    LLVMSetAlignment(local, 8);
    let mut after_allocas = LLVMGetFirstInstruction(entry);
    while ir::opcode(after_allocas) == LLVMOpcode::LLVMAlloca {
        after_allocas = LLVMGetNextInstruction(after_allocas);
    }
    inserter.copy_budget(after_allocas, local, true);

    // Blocks that `invoke`/`callbr` lead to load the budget; their other predecessors store
    // it before branching there.
    let mut loading_blocks = vec![false; cfg.blocks.len()];
    for (b, &block) in cfg.blocks.iter().enumerate() {
        for inst in ir::instructions(block) {
            let terminator = !LLVMIsATerminatorInst(inst).is_null();
            if is_cut(inst) {
                inserter.copy_budget(inst, local, false);
                if terminator {
                    for &s in &cfg.successors[b] {
                        loading_blocks[s] = true;
                    }
                } else if !is_musttail(inst) {
                    inserter.copy_budget(LLVMGetNextInstruction(inst), local, true);
                }
            } else if matches!(
                ir::opcode(inst),
                LLVMOpcode::LLVMRet | LLVMOpcode::LLVMResume
            ) && !returns_musttail_call(inst)
            {
                inserter.copy_budget(inst, local, false);
            }
        }
    }
    for (s, _) in loading_blocks.iter().enumerate().filter(|(_, &l)| l) {
        if let Some(at) = ir::first_insertion_point(cfg.blocks[s]) {
            inserter.copy_budget(at, local, true);
        }
        for (p, successors) in cfg.successors.iter().enumerate() {
            let terminator = LLVMGetBasicBlockTerminator(cfg.blocks[p]);
            if successors.contains(&s) && !is_cut(terminator) {
                inserter.copy_budget(terminator, local, false);
            }
        }
    }
    local
}

/// Whether `inst` is a `musttail` call: nothing may come between it and its `ret`.
unsafe fn is_musttail(inst: LLVMValueRef) -> bool {
    !LLVMIsACallInst(inst).is_null()
        && LLVMGetTailCallKind(inst) == llvm_sys::LLVMTailCallKind::LLVMTailCallKindMustTail
}

/// Whether the `ret` `inst` returns a `musttail` call's result (possibly through a bitcast):
/// the budget was stored before that call and nothing may go between the two.
unsafe fn returns_musttail_call(inst: LLVMValueRef) -> bool {
    let mut prev = LLVMGetPreviousInstruction(inst);
    if !prev.is_null() && ir::opcode(prev) == LLVMOpcode::LLVMBitCast {
        prev = LLVMGetPreviousInstruction(prev);
    }
    !prev.is_null() && is_musttail(prev)
}

/// A run of instructions of one block that no call into instrumented code interrupts.
pub struct Segment {
    /// Index of the block in the function's CFG.
    pub block: usize,
    /// The segment's first instruction: the budget check goes right before it.
    pub start: LLVMValueRef,
    /// The cutting call or the block's terminator: the marks go right before it.
    pub end: LLVMValueRef,
    pub accesses: Vec<Access>,
}

/// Every segment of every block, in layout order.
///
/// # Safety
/// `plan` must describe a live function of a module with `data_layout`.
pub unsafe fn function_segments(
    plan: &FunctionPlan,
    data_layout: LLVMTargetDataRef,
) -> Vec<Segment> {
    let mut out = Vec::new();
    for (b, &block) in plan.cfg.blocks.iter().enumerate() {
        out.extend(block_segments(b, block, b == 0, data_layout));
    }
    out
}

/// The segments of `block`. None for blocks starting with a Windows EH pad (no insertion
/// point, see [`ir::first_insertion_point`]).
unsafe fn block_segments(
    index: usize,
    block: LLVMBasicBlockRef,
    is_entry: bool,
    data_layout: LLVMTargetDataRef,
) -> Vec<Segment> {
    let Some(mut start) = ir::first_insertion_point(block) else {
        return Vec::new();
    };
    if is_entry {
        // Static allocas stay first: once the inlined budget check splits the entry block,
        // allocas after it would become dynamic.
        while ir::opcode(start) == LLVMOpcode::LLVMAlloca {
            start = LLVMGetNextInstruction(start);
        }
    }
    let mut segments = Vec::new();
    let mut accesses = Vec::new();
    for inst in ir::instructions(block) {
        if let Some(access) = classify_access(inst, data_layout) {
            accesses.push(access);
        }
        let is_terminator = !LLVMIsATerminatorInst(inst).is_null();
        if is_terminator || is_cut(inst) {
            segments.push(Segment {
                block: index,
                start,
                end: inst,
                accesses: std::mem::take(&mut accesses),
            });
            if is_terminator {
                break;
            }
            start = LLVMGetNextInstruction(inst);
        }
    }
    segments
}

/// Whether `inst` ends a segment: a call, invoke or callbr that may run instrumented code,
/// i.e. any except the pass's own `__kage_*` functions and intrinsics other than those in
/// [`CALLING_INTRINSICS`]. Inline assembly counts as a call (it could call anything).
///
/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn is_cut(inst: LLVMValueRef) -> bool {
    if !ir::is_call_site(inst) {
        return false;
    }
    let Some(callee) = ir::direct_callee(inst) else {
        return true; // indirect call or inline assembly
    };
    let name = ir::value_name(callee);
    if name.starts_with("__kage_") {
        false
    } else if name.starts_with("llvm.") {
        CALLING_INTRINSICS
            .iter()
            .any(|prefix| name.starts_with(prefix))
    } else {
        true
    }
}

/// One mark (or report) call for a range of bytes.
pub enum Mark {
    /// `[base + lo, base + hi)`; `exact` is an access pointer equal to `base + lo`, if any;
    /// `align` what `base + lo` is known to be a multiple of.
    Bytes {
        base: LLVMValueRef,
        lo: i64,
        hi: i64,
        exact: Option<LLVMValueRef>,
        align: u64,
    },
    /// A range marked on its own: long or run-time-sized `llvm.mem*` ranges.
    Whole { ptr: LLVMValueRef, len: Length },
}

/// Bytes `[lo, hi)` from a base, accessed through `ptr`, a multiple of `align`.
struct Piece {
    lo: i64,
    hi: i64,
    ptr: LLVMValueRef,
    align: u64,
}

/// The marks for `ranges`, coalesced per base pointer (merged across gaps below `gap`
/// bytes: [`MERGE_GAP`] for lines, 1 for exact bytes), in order of first appearance.
///
/// # Safety
/// The ranges' pointers must be live values of a module with `data_layout`.
pub unsafe fn plan_marks(data_layout: LLVMTargetDataRef, ranges: &[Range], gap: i64) -> Vec<Mark> {
    enum Item {
        Group(usize),
        Whole(LLVMValueRef, Length),
    }
    let mut groups: Vec<(LLVMValueRef, Vec<Piece>)> = Vec::new();
    let mut group_of: HashMap<LLVMValueRef, usize> = HashMap::new();
    let mut items = Vec::new();
    for range in ranges {
        let size = match range.len {
            Length::Constant(0) => continue,
            Length::Constant(n) if n <= COALESCED_LENGTH_LIMIT => n as i64,
            len => {
                items.push(Item::Whole(range.ptr, len));
                continue;
            }
        };
        let (base, offset) = split_constant_offset(data_layout, range.ptr);
        let Some(end) = offset.checked_add(size) else {
            items.push(Item::Whole(range.ptr, range.len));
            continue;
        };
        let group = *group_of.entry(base).or_insert_with(|| {
            groups.push((base, Vec::new()));
            items.push(Item::Group(groups.len() - 1));
            groups.len() - 1
        });
        groups[group].1.push(Piece {
            lo: offset,
            hi: end,
            ptr: range.ptr,
            align: range.align,
        });
    }
    let mut marks = Vec::new();
    for item in items {
        match item {
            Item::Whole(ptr, len) => marks.push(Mark::Whole { ptr, len }),
            Item::Group(g) => {
                let (base, pieces) = &groups[g];
                let merged =
                    merge_ranges_within(pieces.iter().map(|p| (p.lo, p.hi)).collect(), gap);
                for (lo, hi) in merged {
                    let starting = || pieces.iter().filter(|p| p.lo == lo);
                    let exact = starting().next().map(|p| p.ptr);
                    let align = starting().map(|p| p.align).max().unwrap_or(1);
                    marks.push(Mark::Bytes {
                        base: *base,
                        lo,
                        hi,
                        exact,
                        align,
                    });
                }
            }
        }
    }
    marks
}

/// Builds the working-set instrumentation inside one function.
pub struct WsInserter<'a> {
    pub builder: LLVMBuilderRef,
    pub runtime: &'a mut WsRuntime,
    locations: HookLocations,
    data_layout: LLVMTargetDataRef,
    traces: bool,
    /// The function's local budget (an `alloca` of `i64`).
    pub local_budget: LLVMValueRef,
}

impl WsInserter<'_> {
    /// Positions the builder before `at`, with the debug location hooks at `at` get.
    ///
    /// # Safety
    /// `at` must be an instruction of the function this inserter was made for.
    pub unsafe fn position_before(&mut self, at: LLVMValueRef) {
        LLVMPositionBuilderBefore(self.builder, at);
        LLVMSetCurrentDebugLocation2(self.builder, self.locations.for_instruction(at));
    }

    /// Instruments one segment; accesses in `hoisted` are marked elsewhere (only traced).
    /// `check`: the segment starts at a checkpoint and checks the budget (even with no
    /// accesses of its own); otherwise it only spends. `marked`: what is marked since the
    /// last point where a tick could happen, on every path here; updated past the segment.
    unsafe fn segment(
        &mut self,
        segment: &Segment,
        region: LLVMValueRef,
        hoisted: &HashSet<LLVMValueRef>,
        check: bool,
        marked: &mut Marked<LLVMValueRef>,
    ) {
        let counted: Vec<&Access> = (segment.accesses.iter())
            .filter(|a| !hoisted.contains(&a.instruction()))
            .collect();
        let k = self.i64_constant(counted.len() as u64);
        if check {
            self.position_before(segment.start);
            self.budget_check(region, k);
            marked.clear();
        } else if !counted.is_empty() {
            self.position_before(segment.start);
            self.budget_spend(k);
        }
        if self.traces {
            for access in &segment.accesses {
                self.trace(access);
            }
        }
        if !counted.is_empty() {
            self.position_before(segment.end);
            let ranges: Vec<Range> = counted.iter().flat_map(|a| a.ranges()).collect();
            for mark in plan_marks(self.data_layout, &ranges, MERGE_GAP) {
                if let Mark::Bytes { base, lo, hi, .. } = mark {
                    if marked.covers(base, lo, hi) {
                        continue;
                    }
                    marked.add(base, lo, hi);
                }
                self.mark(mark);
            }
        }
        if is_cut(segment.end) {
            marked.clear(); // the call may tick
        }
    }

    /// `__kage_ws_budget_spend(k, local)` at the builder's position.
    unsafe fn budget_spend(&mut self, k: LLVMValueRef) {
        let helper = self.runtime.budget_spend();
        let mut args = [k, self.local_budget];
        LLVMBuildCall2(
            self.builder,
            self.runtime.budget_spend_type,
            helper,
            args.as_mut_ptr(),
            2,
            c"".as_ptr(),
        );
    }

    /// `__kage_ws_budget_check(region, k)` at the builder's position.
    ///
    /// # Safety
    /// The builder must be positioned; `k` an i64.
    pub unsafe fn budget_check(&mut self, region: LLVMValueRef, k: LLVMValueRef) {
        let helper = self.runtime.budget_check();
        let mut args = [region, k, self.local_budget];
        LLVMBuildCall2(
            self.builder,
            self.runtime.budget_check_type,
            helper,
            args.as_mut_ptr(),
            3,
            c"".as_ptr(),
        );
    }

    /// Before `at`: `__kage_ws_budget_load(local)` when `to_local`, else
    /// `__kage_ws_budget_store(local)`.
    unsafe fn copy_budget(&mut self, at: LLVMValueRef, local: LLVMValueRef, to_local: bool) {
        self.position_before(at);
        let helper = self.runtime.budget_copy(to_local);
        let mut args = [local];
        LLVMBuildCall2(
            self.builder,
            self.runtime.budget_copy_type,
            helper,
            args.as_mut_ptr(),
            1,
            c"".as_ptr(),
        );
    }

    unsafe fn mark(&mut self, mark: Mark) {
        let (ptr, len, span) = match mark {
            Mark::Bytes {
                base,
                lo,
                hi,
                exact,
                align,
            } => {
                let ptr = exact.unwrap_or_else(|| self.offset_pointer(base, lo));
                let len = (hi - lo) as u64;
                (
                    ptr,
                    self.i64_constant(len),
                    LineSpan::of(len, align, self.runtime.line_size),
                )
            }
            Mark::Whole { ptr, len } => (ptr, self.length_value(len), LineSpan::Many),
        };
        let helper = self.runtime.mark(span);
        self.call(helper, ptr, len);
    }

    /// `base + offset` bytes.
    ///
    /// # Safety
    /// The builder must be positioned where `base` is available.
    pub unsafe fn offset_pointer(&mut self, base: LLVMValueRef, offset: i64) -> LLVMValueRef {
        let offset = self.i64_constant(offset as u64);
        self.byte_gep(base, offset)
    }

    /// `getelementptr i8, ptr base, i64 offset` (`base` itself for a zero offset), without
    /// `inbounds`: a marked range need not stay inside one object.
    ///
    /// # Safety
    /// The builder must be positioned where `base` and `offset` are available.
    pub unsafe fn byte_gep(&mut self, base: LLVMValueRef, offset: LLVMValueRef) -> LLVMValueRef {
        ir::byte_gep(self.builder, base, offset)
    }

    /// An i64 constant.
    pub fn i64_constant(&self, value: u64) -> LLVMValueRef {
        unsafe { LLVMConstInt(self.runtime.i64_type, value, 0) }
    }

    /// A length as an i64 value (run-time lengths zero-extended).
    unsafe fn length_value(&mut self, len: Length) -> LLVMValueRef {
        match len {
            Length::Constant(n) => self.i64_constant(n),
            Length::Dynamic(v) => {
                LLVMBuildIntCast2(self.builder, v, self.runtime.i64_type, 0, c"".as_ptr())
            }
        }
    }

    /// Mode 2: `__kage_ws_trace` for each range of `access`, right before it; zero-length
    /// ranges are skipped (at run time when the length is not a constant).
    unsafe fn trace(&mut self, access: &Access) {
        self.position_before(access.instruction());
        for range in access.ranges() {
            let helper = match range.len {
                Length::Constant(0) => continue,
                Length::Constant(_) => self.runtime.trace(),
                Length::Dynamic(_) => self.runtime.trace_range(),
            };
            let len = self.length_value(range.len);
            self.call(helper, range.ptr, len);
        }
    }

    /// A call of a `void (ptr, i64)` function.
    unsafe fn call(&mut self, callee: LLVMValueRef, ptr: LLVMValueRef, len: LLVMValueRef) {
        let mut args = [ptr, len];
        LLVMBuildCall2(
            self.builder,
            self.runtime.pointer_length_type,
            callee,
            args.as_mut_ptr(),
            2,
            c"".as_ptr(),
        );
    }
}
