//! Working-set instrumentation (modes 1 and 2, docs/abi.md "Working-set instrumentation").
//!
//! Each block is cut into *segments* at calls that may run instrumented code. A segment with
//! accesses spends them from the budget at its start and marks each merged range right
//! after the last access it covers: nothing between the segment's start and end can tick,
//! so delaying and coalescing the marks keeps every access in the interval it happened in. Accesses with the same base pointer and constant offsets share
//! one mark call per merged range ([`crate::segments`]). Only segments at checkpoints ([`crate::checkpoints`]:
//! the function's start and loop headers) check the budget and may tick; a mark whose bytes
//! were already marked since the last checkpoint or call on every path is left out. Innermost loops of a simple counted form
//! are counted and marked per chunk of iterations instead ([`crate::hoist`], [`hoisted`]): one helper
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

mod hoisted;
pub mod runtime;

use std::collections::HashSet;

use kage_abi::{Instrumentation, DEFAULT_LINE_SIZE, LINE_SIZE_VARIABLE, TRACE_VARIABLE};
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBuilderRef, LLVMModuleRef, LLVMValueRef};
use llvm_sys::target::{LLVMGetModuleDataLayout, LLVMTargetDataRef};
use llvm_sys::LLVMOpcode;

use super::{Settings, Tool};
use crate::access::{Access, Length, Range};
use crate::address::MERGE_GAP;
use crate::checkpoints::{Checkpoints, Marked};
use crate::debuginfo::HookLocations;
use crate::hoist;
use crate::ir;
use crate::plan::FunctionPlan;
use crate::regions::RegionTable;
use crate::segments::{function_segments, is_cut, plan_marks, Mark, Segment};
use runtime::{LineSpan, WsRuntime};

/// Inline marking of lines of `line_size` bytes, with `__kage_ws_trace` calls when `traces`
/// (instrumentation 2, tests only).
pub struct WorkingSet {
    /// Bytes per line built into the marks: a power of two, see [`kage_abi::LINE_SIZES`].
    pub line_size: u64,
    pub traces: bool,
}

/// The `working-set` build: lines of `KAGE_WS_LINE_SIZE` bytes (64 when unset; an invalid
/// value warns and falls back to 64, the wrapper rejects it earlier), traced with
/// `KAGE_WS_TRACE=1`.
pub fn make(settings: &mut Settings) -> Box<dyn Tool> {
    let line_size = match line_size_from_setting(settings.get(LINE_SIZE_VARIABLE).as_deref()) {
        Ok(size) => size,
        Err(warning) => {
            settings.warn(warning);
            DEFAULT_LINE_SIZE
        }
    };
    let traces = settings.get(TRACE_VARIABLE).as_deref() == Some("1");
    Box::new(WorkingSet { line_size, traces })
}

/// The line size a `KAGE_WS_LINE_SIZE` value asks for (`None`: unset).
pub fn line_size_from_setting(value: Option<&str>) -> Result<u64, String> {
    match value.unwrap_or("") {
        "" => Ok(DEFAULT_LINE_SIZE),
        v => match v.parse::<u64>() {
            Ok(n) if kage_abi::is_line_size(n) => Ok(n),
            _ => Err(format!(
                "kage-pass: {LINE_SIZE_VARIABLE}='{v}' is not a power of two from 16 to 4096; \
                 building for {DEFAULT_LINE_SIZE}-byte lines"
            )),
        },
    }
}

impl Tool for WorkingSet {
    fn instrumentation(&self) -> Instrumentation {
        if self.traces {
            Instrumentation::WorkingSetTrace
        } else {
            Instrumentation::WorkingSet
        }
    }

    fn line_shift(&self) -> u32 {
        self.line_size.trailing_zeros()
    }

    unsafe fn instrument(
        &self,
        module: LLVMModuleRef,
        plans: &[FunctionPlan],
        table: &RegionTable,
    ) {
        instrument_functions(module, plans, table, self.traces, self.line_size);
    }

    fn needs_cleanup(&self) -> bool {
        true
    }
}

/// Instruments every planned function for mode 1 (or 2 when `traces`), marking lines of
/// `line_size` bytes.
///
/// # Safety
/// `module` must be valid, `plans` made from its functions and `table` emitted into it.
unsafe fn instrument_functions(
    module: LLVMModuleRef,
    plans: &[FunctionPlan],
    table: &RegionTable,
    traces: bool,
    line_size: u64,
) {
    let data_layout = LLVMGetModuleDataLayout(module);
    let mut runtime = WsRuntime::new(module, line_size);
    let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
    for plan in plans {
        // Decide everything about the function before changing it.
        let hoists = plan.hoisted_loops(data_layout, hoist::Coverage::Lines);
        let segments = function_segments(&plan.cfg, data_layout);
        let mut inserter = WsInserter {
            builder,
            runtime: &mut runtime,
            locations: HookLocations::new(module, plan.func),
            data_layout,
            traces,
            local_budget: std::ptr::null_mut(),
        };
        // Counted by their loop's chunks: all of them; marked there too: all but those
        // marked inline, where they are made.
        let hoisted: HashSet<LLVMValueRef> = hoists
            .iter()
            .flat_map(|h| h.accesses.iter().chain(&h.marked_inline).copied())
            .collect();
        let marked_inline: HashSet<LLVMValueRef> = hoists
            .iter()
            .flat_map(|h| h.marked_inline.iter().copied())
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
            let region = plan.slots.block_region(b);
            for (i, segment) in by_block[b].iter().enumerate() {
                // A hoisted loop's chunk helper checks at its header itself; a function
                // whose accesses are all in hoisted loops spends nothing outside them.
                let check = i == 0
                    && checkpoints.at_start[b]
                    && !hoisted_headers.contains(&b)
                    && (b != 0 || checks);
                let region = table.region_ptr(region);
                let hoisted = Hoisted {
                    counted: &hoisted,
                    marked_inline: &marked_inline,
                };
                inserter.segment(segment, region, hoisted, check, &mut marked);
            }
            marked_at_end[b] = Some(marked);
        }
        // After the segments: the preheader's own marks stay before the values computed
        // for the loop, and the chunk call goes before mode 2's traces in the header.
        for h in &hoists {
            let region = plan.slots.loop_body(h.loop_index);
            hoisted::emit(h, &mut inserter, table.region_ptr(region));
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
                } else if !ir::is_musttail_call(inst) {
                    inserter.copy_budget(LLVMGetNextInstruction(inst), local, true);
                }
            } else if matches!(
                ir::opcode(inst),
                LLVMOpcode::LLVMRet | LLVMOpcode::LLVMResume
            ) && ir::musttail_call_returned_by(inst).is_none()
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

/// A function's accesses in hoisted loops, as a segment sees them.
#[derive(Clone, Copy)]
struct Hoisted<'a> {
    /// Counted by their loop's chunks (and marked there, unless in `marked_inline`).
    counted: &'a HashSet<LLVMValueRef>,
    /// Marked where they are made.
    marked_inline: &'a HashSet<LLVMValueRef>,
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

    /// Instruments one segment; accesses in `hoisted.counted` are counted elsewhere, and
    /// marked elsewhere unless in `hoisted.marked_inline` (all are traced here). `check`:
    /// the segment starts at a checkpoint and checks the budget (even with no accesses of
    /// its own); otherwise it only spends. `marked`: what is marked since the last point
    /// where a tick could happen, on every path here; updated past the segment.
    unsafe fn segment(
        &mut self,
        segment: &Segment,
        region: LLVMValueRef,
        hoisted: Hoisted<'_>,
        check: bool,
        marked: &mut Marked<LLVMValueRef>,
    ) {
        let counted: Vec<&Access> = (segment.accesses.iter())
            .filter(|a| !hoisted.counted.contains(&a.instruction()))
            .collect();
        let to_mark: Vec<&Access> = (segment.accesses.iter())
            .filter(|a| {
                let inst = a.instruction();
                !hoisted.counted.contains(&inst) || hoisted.marked_inline.contains(&inst)
            })
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
        if !to_mark.is_empty() {
            let (ranges, made_by): (Vec<Range>, Vec<LLVMValueRef>) = (to_mark.iter())
                .flat_map(|a| a.ranges().into_iter().map(|r| (r, a.instruction())))
                .unzip();
            // Where each range's marks go, found before any is inserted: right after its
            // access (the addresses a mark needs are live there anyway, where marks at the
            // segment's end kept them in registers, or spilled, across the rest of it), or
            // at the segment's end for an access that ends its block.
            let places: Vec<LLVMValueRef> = (made_by.iter())
                .map(|&access| {
                    let next = LLVMGetNextInstruction(access);
                    if LLVMIsATerminatorInst(access).is_null() && !next.is_null() {
                        next
                    } else {
                        segment.end
                    }
                })
                .collect();
            for mark in plan_marks(self.data_layout, &ranges, MERGE_GAP) {
                let last = match mark {
                    Mark::Bytes {
                        base, lo, hi, last, ..
                    } => {
                        if marked.covers(base, lo, hi) {
                            continue;
                        }
                        marked.add(base, lo, hi);
                        last
                    }
                    Mark::Whole { last, .. } => last,
                };
                // After the last access it covers: every access it covers was made.
                self.position_before(places[last]);
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
                ..
            } => {
                let ptr = exact.unwrap_or_else(|| self.offset_pointer(base, lo));
                let len = (hi - lo) as u64;
                (
                    ptr,
                    self.i64_constant(len),
                    LineSpan::of(len, align, self.runtime.line_size),
                )
            }
            Mark::Whole { ptr, len, .. } => (ptr, self.length_value(len), LineSpan::Many),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_sizes() {
        use super::line_size_from_setting as size;
        assert_eq!(size(None), Ok(64));
        assert_eq!(size(Some("")), Ok(64));
        assert_eq!(size(Some("16")), Ok(16));
        assert_eq!(size(Some("4096")), Ok(4096));
        for bad in ["8", "48", "8192", "sixty-four", "-64"] {
            let e = size(Some(bad)).unwrap_err();
            assert!(e.contains(&format!("KAGE_WS_LINE_SIZE='{bad}'")), "{e}");
        }
    }

    #[test]
    fn the_build_line_size_is_the_table_line_shift_and_a_bad_one_warns() {
        let build = |value: &'static str| {
            let read = move |name: &str| (name == LINE_SIZE_VARIABLE).then(|| value.to_string());
            let mut settings = Settings::new(&read);
            let tool = make(&mut settings);
            (tool.line_shift(), settings.warnings().len())
        };
        assert_eq!(build("128"), (7, 0));
        assert_eq!(build("16"), (4, 0));
        assert_eq!(build("48"), (6, 1));
    }
}
