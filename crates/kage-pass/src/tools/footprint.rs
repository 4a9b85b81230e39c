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
//!   ([`crate::segments::function_segments`]). A segment's accesses are reported at its
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
//!   Landing pads start afresh too, and so does every edge into an inlined call (its
//!   instance begins there and has touched nothing yet), as leaving one does not.
//! - **Hoisted loops** ([`crate::hoist`], [`Coverage::Bytes`](crate::hoist::Coverage)):
//!   per chunk of iterations, see [`emit_hoisted`].
//! - **The access count.** Every group adds the number of accesses it stands for to the
//!   thread's `__kage_fp_accesses` inline (relaxed atomic load and store: other threads only
//!   read it), so the report's `accesses` equals a build for every tool's.
//!
//! `cmpxchg`s keep their own hook (`__kage_cmpxchg`: whether they wrote is known only
//! after), and count themselves in the runtime.

use std::collections::{HashMap, HashSet};

use kage_abi::{symbols, Instrumentation};
use llvm_sys::core::*;
use llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::target::{LLVMGetModuleDataLayout, LLVMTargetDataRef};
use llvm_sys::{LLVMIntPredicate, LLVMOpcode};

use super::{Settings, Tool};
use crate::access::{Access, Length, Range};
use crate::checkpoints::{Checkpoints, Marked};
use crate::hoist::chunk::{preheader_values, ChunkFrame};
use crate::hoist::{Coverage, HoistPlan};
use crate::hooks::{self, Hooks, Inserter};
use crate::ir::{self, RuntimeFunction};
use crate::plan::FunctionPlan;
use crate::region_tree::NodeKind;
use crate::regions::RegionTable;
use crate::segments::{function_segments, plan_marks, Mark, Segment};

/// Region hooks, accesses reported in groups.
pub struct Footprint;

/// The `footprint` build; it has no settings of its own.
pub fn make(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(Footprint)
}

impl Tool for Footprint {
    fn instrumentation(&self) -> Instrumentation {
        Instrumentation::Footprint
    }

    unsafe fn instrument(
        &self,
        module: LLVMModuleRef,
        plans: &[FunctionPlan],
        table: &RegionTable,
    ) {
        let hooks = Hooks::declare(module);
        let rt = FpRuntime::declare(module);
        let data_layout = LLVMGetModuleDataLayout(module);
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        let mut leaf_flags = Vec::new();
        for plan in plans {
            // Planned before anything is inserted into the function.
            let hoisted = plan.hoisted_loops(data_layout, Coverage::Bytes);
            let hoisted_loops: Vec<usize> = hoisted.iter().map(|h| h.loop_index).collect();
            let hoisted_accesses: HashSet<LLVMValueRef> = (hoisted.iter())
                .flat_map(|h| h.accesses.iter().copied())
                .collect();
            let reports = plan_reports(plan, &hoisted_accesses, data_layout);
            let leaves = Leaves::find(plan, &reports);
            let chain_of: HashMap<usize, u32> = leaves.chains.iter().copied().collect();
            let one_range: HashSet<usize> = leaves.one_range.iter().map(|&(_, u)| u).collect();
            leaf_flags.extend((leaves.units.iter()).map(|&unit| {
                let follow = chain_of.get(&unit).copied().unwrap_or(0);
                let mut flags =
                    kage_abi::footprint::LEAF | follow << kage_abi::footprint::CHAIN_SHIFT;
                if one_range.contains(&unit) {
                    flags |= kage_abi::footprint::ONE_RANGE;
                }
                (plan.slots.base + unit as u32, flags)
            }));
            // The one-range leaves' reports, by report: the leaf's table entry.
            let leaf_of_report: HashMap<usize, LLVMValueRef> = (leaves.one_range.iter())
                .map(|&(report, unit)| (report, table.region_ptr(plan.slots.base + unit as u32)))
                .collect();
            let mut ins = Inserter::new(module, plan.func, builder, &hooks, table);
            let skipped = hooks::Skipped {
                loops: &hoisted_loops,
                folded: &leaves.regions,
            };
            // Taken before anything is inserted: a leaf's entry goes after the settle there.
            let leaf_entries: Vec<(LLVMValueRef, u32, Option<u32>)> = (leaves.entries.iter())
                .filter_map(|&(block, node)| {
                    let at = ir::first_insertion_point(plan.cfg.blocks[block])?;
                    let slot = |node: usize| plan.slots.base + node as u32;
                    let parent = leaves.parent_leaf.get(&node).copied();
                    Some((at, slot(node), parent.map(slot)))
                })
                .collect();
            let preheader_hooks: Vec<PlacedPreheaderHooks> = (leaves.preheaders.iter())
                .map(|h| {
                    let slot = |node: usize| plan.slots.base + node as u32;
                    let with_parent =
                        |node: usize| (slot(node), leaves.parent_leaf.get(&node).map(|&p| slot(p)));
                    PlacedPreheaderHooks {
                        at: LLVMGetBasicBlockTerminator(plan.cfg.blocks[h.block]),
                        end: h.end.map(with_parent),
                        enter: h.enter.iter().map(|&node| with_parent(node)).collect(),
                    }
                })
                .collect();
            let leaf_exits: Vec<LLVMValueRef> = (plan.exits.iter().copied())
                .filter(|&at| leaves.holds(plan, LLVMGetInstructionParent(at)))
                .collect();
            let entry_at = ir::first_insertion_point(plan.cfg.blocks[0]);
            // A leaf loop's helper goes after the leaf hooks at its header's start (its
            // instance begins before its first chunk is reported): before the header's
            // first instruction, taken before anything is inserted.
            let leaf_helpers_at: HashMap<usize, LLVMValueRef> = (hoisted.iter())
                .filter(|h| {
                    leaves
                        .regions
                        .contains(&plan.tree().loop_node[h.loop_index])
                })
                .filter_map(|h| Some((h.loop_index, ir::first_insertion_point(h.header)?)))
                .collect();
            let mut frame = std::ptr::null_mut();
            hooks::insert(plan, &mut ins, &skipped, |ins| {
                if let (false, Some(at)) = (leaves.regions.is_empty(), entry_at) {
                    // After `__kage_func_enter`, before every leaf hook (the entry block
                    // dominates them).
                    ins.position_before(at);
                    frame = ins.frame_address();
                }
                for &(at, region, parent) in &leaf_entries {
                    ins.position_before(at);
                    let parent = match parent {
                        Some(parent) => table.region_ptr(parent),
                        None => LLVMConstNull(LLVMTypeOf(frame)),
                    };
                    rt.leaf_enter
                        .call(builder, &mut [table.region_ptr(region), parent, frame]);
                }
                for access in &plan.accesses {
                    if let Access::CmpXchg { inst, ptr, size } = *access {
                        if !hoisted_accesses.contains(&inst) {
                            ins.cmpxchg_hook(inst, ptr, size);
                        }
                    }
                }
                let mut position = |at: LLVMValueRef| ins.position_before(at);
                emit_reports(&reports, &leaf_of_report, &rt, builder, &mut position);
                // After the block's reports, before its branch into the loop.
                for hooks in &preheader_hooks {
                    ins.position_before(hooks.at);
                    let null = LLVMConstNull(LLVMTypeOf(frame));
                    if let Some((keep, keep_parent)) = hooks.end {
                        let keep_parent = keep_parent.map_or(null, |r| table.region_ptr(r));
                        rt.leaf_end
                            .call(builder, &mut [frame, table.region_ptr(keep), keep_parent]);
                    }
                    for &(region, parent) in &hooks.enter {
                        let parent = parent.map_or(null, |r| table.region_ptr(r));
                        rt.leaf_enter
                            .call(builder, &mut [table.region_ptr(region), parent, frame]);
                    }
                }
                // After the reports, before `__kage_func_exit`.
                for &at in &leaf_exits {
                    ins.position_before(at);
                    let null = LLVMConstNull(LLVMTypeOf(frame));
                    rt.leaf_end.call(builder, &mut [frame, null, null]);
                }
            });
            // Last: each helper call goes before the hooks already at its header's start,
            // but a leaf loop's, after its leaf hooks (it has no loop event of its own).
            for h in &hoisted {
                let call = match leaf_helpers_at.get(&h.loop_index) {
                    Some(&at) => HelperCall::LeafAt(at),
                    None => HelperCall::EntersLoop(
                        hooks.loop_iter,
                        table.region_ptr(plan.slots.loop_entry(h.loop_index)),
                    ),
                };
                let mut position = |at: LLVMValueRef| ins.position_before(at);
                emit_hoisted(h, builder, &mut position, &rt, call);
            }
            // Before everything else at the start of a block a leaf leads to.
            for &block in &leaves.after {
                if let Some(at) = ir::first_insertion_point(plan.cfg.blocks[block]) {
                    ins.position_before(at);
                    // A block of a leaf keeps its own instance, coming from its own block,
                    // and the leaves around it.
                    let null = LLVMConstNull(LLVMTypeOf(frame));
                    let region = |node: usize| table.region_ptr(plan.slots.base + node as u32);
                    let keep = leaves.leaf_of[block];
                    let keep_parent = keep.and_then(|node| leaves.parent_leaf.get(&node).copied());
                    rt.leaf_end.call(
                        builder,
                        &mut [
                            frame,
                            keep.map_or(null, region),
                            keep_parent.map_or(null, region),
                        ],
                    );
                }
            }
        }
        LLVMDisposeBuilder(builder);
        table.set_flags(&leaf_flags);
    }
}

/// The leaves of a function (docs/abi.md, "Footprint instrumentation"): inlined calls and
/// loops with only leaves inside (or no region), whose code and theirs has no cycle but
/// their loops' iterations, and whose own blocks hold no `invoke` or `callbr` (plain calls
/// are fine), resume point or `cmpxchg` (a loop's body is part of its loop's leaf; a
/// hoisted loop may be one, its chunks' ranges its instance's). They get no
/// `__kage_settle` nor `__kage_loop_iter` (their blocks count as those of the nearest
/// region around them that is not a leaf):
/// `__kage_fp_leaf_enter(r, parent)` starts each block entered from outside (after any
/// settle there), and `__kage_fp_leaf_end(keep, keep_parent)` each block they lead to
/// outside them (before any hook there) and each return in them, so that the runtime
/// counts an instance from the ranges it reported, without a region event (unless an
/// event comes while it runs: a call it makes, a signal handler).
struct Leaves {
    /// The regions folded into their parents for the region hooks: each leaf, the
    /// inlined calls of its chain, a loop's body (nodes of the plan's tree).
    regions: Vec<usize>,
    /// Per leaf counted as one with the calls around it (a chain's outermost call): how
    /// many regions follow it in the chain (they are the next nodes, in pre-order).
    chains: Vec<(usize, u32)>,
    /// The leaves (a chain's outermost call for its chain).
    units: Vec<usize>,
    /// The leaf around each leaf that is inside one.
    parent_leaf: HashMap<usize, usize>,
    /// Each leaf's blocks entered from outside it (but from a leaf inside it), with the
    /// leaf: the leaves around a leaf whose code begins at the same block come first.
    entries: Vec<(usize, usize)>,
    /// The blocks a leaf's block leads to, but its own (from inside the loop, for a
    /// loop's header whose hooks are in `preheaders`).
    after: Vec<usize>,
    /// The hooks on the edges into leaf loops, at the ends of the blocks before them.
    preheaders: Vec<PreheaderHooks>,
    /// Each block's leaf, if it is one's (a one-range leaf's blocks are its parent leaf's:
    /// it has no leaf hooks).
    leaf_of: Vec<Option<usize>>,
    /// The one-range leaves (docs/abi.md, "One-range leaves"): (the index of the report
    /// of its one range, the leaf).
    one_range: Vec<(usize, usize)>,
}

/// What a block that leads to a leaf loop's header only (a preheader) ends with, after its
/// reports: `__kage_fp_leaf_end(frame, end, end's parent leaf)` if a leaf that does not
/// hold the loop ends there, then `__kage_fp_leaf_enter` for each leaf of `enter`, the
/// loop's and those around it that begin with it (outermost first).
struct PreheaderHooks {
    block: usize,
    end: Option<usize>,
    enter: Vec<usize>,
}

/// [`PreheaderHooks`] as table slots (region, parent leaf), before the block's terminator.
struct PlacedPreheaderHooks {
    at: LLVMValueRef,
    end: Option<(u32, Option<u32>)>,
    enter: Vec<(u32, Option<u32>)>,
}

impl Leaves {
    /// # Safety
    /// `plan` must describe a live function not yet changed.
    unsafe fn find(plan: &FunctionPlan, reports: &[SegmentReport]) -> Leaves {
        let tree = plan.tree();
        let n = plan.cfg.blocks.len();
        let reachable = &plan.forest.reachable;
        let mut candidate: Vec<bool> = (tree.nodes.iter())
            .map(|node| {
                matches!(
                    node.kind,
                    NodeKind::Inlined(_) | NodeKind::Loop(_) | NodeKind::LoopBody(_)
                )
            })
            .collect();
        let cmpxchg_blocks: HashSet<LLVMBasicBlockRef> = (plan.accesses.iter())
            .filter_map(|a| match *a {
                Access::CmpXchg { inst, .. } => Some(LLVMGetInstructionParent(inst)),
                _ => None,
            })
            .collect();
        let disqualified = |b: usize| -> bool {
            plan.resume_points.iter().any(|&(_, rb)| rb == b)
                || cmpxchg_blocks.contains(&plan.cfg.blocks[b])
                || (ir::instructions(plan.cfg.blocks[b]).into_iter())
                    .any(|i| ir::is_call_site(i) && ir::opcode(i) != LLVMOpcode::LLVMCall)
        };
        for b in (0..n).filter(|&b| reachable[b]) {
            let node = tree.block_region[b];
            if candidate[node] && disqualified(b) {
                candidate[node] = false;
            }
        }
        // A leaf holds leaves only (pre-order: children after their parents), and no cycle
        // among its blocks and theirs but the iterations of its loops (a loop's instance
        // is all its iterations; a body is counted with its loop).
        let own_blocks = plan.blocks_by_region();
        let mut subtree_blocks: Vec<HashSet<usize>> = vec![HashSet::new(); tree.nodes.len()];
        let mut subtree_loops: Vec<Vec<usize>> = vec![Vec::new(); tree.nodes.len()];
        for k in (0..tree.nodes.len()).rev() {
            subtree_blocks[k].extend(own_blocks[k].iter().copied());
            if let NodeKind::Loop(j) | NodeKind::LoopBody(j) = tree.nodes[k].kind {
                subtree_loops[k].push(j);
            }
            let back_edge = |from: usize, to: usize| {
                (subtree_loops[k].iter()).any(|&j| {
                    let lp = &plan.forest.loops[j];
                    lp.header == to && lp.blocks.binary_search(&from).is_ok()
                })
            };
            if candidate[k] && has_cycle(&subtree_blocks[k], &plan.cfg.successors, &back_edge) {
                candidate[k] = false;
            }
            if let Some(parent) = tree.nodes[k].parent {
                if !candidate[k] {
                    candidate[parent] = false;
                }
                let blocks = std::mem::take(&mut subtree_blocks[k]);
                subtree_blocks[parent].extend(blocks);
                let loops = std::mem::take(&mut subtree_loops[k]);
                subtree_loops[parent].extend(loops);
            }
        }
        // A body is its loop's: a leaf only with it.
        for k in 0..tree.nodes.len() {
            if let NodeKind::LoopBody(_) = tree.nodes[k].kind {
                let lp = tree.nodes[k].parent.expect("a loop body has its loop");
                candidate[k] &= candidate[lp];
            }
        }
        let mut predecessors = vec![Vec::new(); n];
        for (p, succs) in plan.cfg.successors.iter().enumerate() {
            if reachable[p] {
                for &s in succs.iter().filter(|&&s| s < n) {
                    predecessors[s].push(p);
                }
            }
        }
        let (mut unit_of, chains) = chains(plan, &candidate, &predecessors, &disqualified);
        // A loop's blocks are its body's: both one leaf, the loop (bodies are not regions
        // in footprint builds).
        for k in 0..tree.nodes.len() {
            if let (NodeKind::LoopBody(_), Some(lp)) = (&tree.nodes[k].kind, tree.nodes[k].parent) {
                if unit_of[k].is_some() {
                    unit_of[k] = unit_of[lp];
                }
            }
        }
        let one_range = one_range_leaves(plan, &unit_of, &chains, reports, &predecessors);
        let counted: HashSet<usize> = one_range.iter().map(|&(_, unit)| unit).collect();
        // A one-range leaf's blocks are its parent leaf's, if it has one.
        let leaf_of: Vec<Option<usize>> = (0..n)
            .map(|b| {
                let unit = unit_of[tree.block_region[b]].filter(|_| reachable[b])?;
                if counted.contains(&unit) {
                    tree.nodes[unit].parent.and_then(|p| unit_of[p])
                } else {
                    Some(unit)
                }
            })
            .collect();
        // The leaves with code of their own, and the leaves around them (a call whose code
        // is all its inlined callees', a loop around such a call).
        let mut used: HashSet<usize> = HashSet::new();
        for &leaf in leaf_of.iter().flatten() {
            let mut at = Some(leaf);
            while let Some(u) = at.filter(|&u| used.insert(u)) {
                at = tree.nodes[u].parent.and_then(|p| unit_of[p]);
            }
        }
        // The leaf around a leaf, if any: its parent's unit (a chain's calls but its
        // outermost hold their chain only, so a leaf's parent is never one of them).
        let parent_unit = |u: usize| {
            (tree.nodes[u].parent)
                .and_then(|p| unit_of[p])
                .filter(|p| used.contains(p))
        };
        // Whether leaf `outer` is `inner` or around it.
        let holds = |outer: usize, inner: usize| {
            let mut at = Some(inner);
            while let Some(u) = at {
                if u == outer {
                    return true;
                }
                at = parent_unit(u);
            }
            false
        };
        // The leaf loops' headers, with the loop's leaf and blocks, whose every predecessor from
        // outside the loop leads there only: the leaf's hooks for entering the loop go at
        // those blocks' ends, not at each iteration.
        let entered_at_preheaders: HashMap<usize, (usize, &[usize])> = (plan.forest.loops.iter())
            .enumerate()
            .filter_map(|(k, lp)| {
                let unit = unit_of[tree.loop_node[k]].filter(|u| used.contains(u))?;
                let dedicated = (predecessors[lp.header].iter())
                    .filter(|p| lp.blocks.binary_search(p).is_err())
                    .all(|&p| plan.cfg.successors[p].iter().all(|&s| s == lp.header));
                (dedicated && lp.header != 0).then_some((lp.header, (unit, &lp.blocks[..])))
            })
            .collect();
        let (mut entries, mut after, mut preheaders) = (Vec::new(), Vec::new(), Vec::new());
        for b in (0..n).filter(|&b| reachable[b]) {
            let preds = &predecessors[b];
            let (entered_loop, loop_blocks) = match entered_at_preheaders.get(&b) {
                Some(&(unit, blocks)) => (Some(unit), blocks),
                None => (None, &[][..]),
            };
            // Whether the edge from `p` enters the loop (its hooks are at `p`'s end).
            let at_preheader =
                |p: usize| entered_loop.is_some() && loop_blocks.binary_search(&p).is_err();
            // A leaf's instance ends here (one that is not this block's leaf nor around
            // it): before any region event at the block's start (a settle to this leaf's
            // parent among them).
            let ends = |p: usize, here: Option<usize>| match (leaf_of[p], here) {
                (Some(left), Some(here)) => !holds(left, here),
                (Some(_), None) => true,
                (None, _) => false,
            };
            if (preds.iter()).any(|&p| !at_preheader(p) && ends(p, leaf_of[b])) {
                after.push(b);
            }
            // An instance may begin here: from outside the leaf, not from a leaf inside it
            // (the end of which leaves the leaf open); so may the leaves around it, whose
            // code may start with its own (opened first, outermost first).
            let begins_from = |node: usize, p: usize| leaf_of[p].is_none_or(|u| !holds(node, u));
            let begins = |node: usize| b == 0 || preds.iter().any(|&p| begins_from(node, p));
            let mut beginning = Vec::new();
            let mut at = leaf_of[b];
            while let Some(node) = at.filter(|&node| begins(node)) {
                beginning.push(node);
                at = parent_unit(node);
            }
            beginning.reverse();
            // The loop's leaf and those around it begin on the edges into the loop.
            let (on_edges, here): (Vec<usize>, Vec<usize>) = (beginning.into_iter())
                .partition(|&node| entered_loop.is_some_and(|l| holds(node, l)));
            if let Some(l) = entered_loop.filter(|_| !on_edges.is_empty()) {
                for &p in preds.iter().filter(|&&p| at_preheader(p)) {
                    preheaders.push(PreheaderHooks {
                        block: p,
                        end: ends(p, Some(l)).then_some(l),
                        enter: (on_edges.iter().copied())
                            .filter(|&node| begins_from(node, p))
                            .collect(),
                    });
                }
            }
            entries.extend(here.into_iter().map(|node| (b, node)));
        }
        let kept = |u: usize| used.contains(&u) || counted.contains(&u);
        let regions: Vec<usize> = (0..tree.nodes.len())
            .filter(|&k| unit_of[k].is_some_and(kept))
            .collect();
        let units: Vec<usize> = (regions.iter().copied())
            .filter(|&k| unit_of[k] == Some(k))
            .collect();
        Leaves {
            parent_leaf: (units.iter())
                .filter_map(|&u| Some((u, parent_unit(u)?)))
                .collect(),
            units,
            regions,
            chains: (chains.into_iter())
                .filter(|&(root, _)| kept(root))
                .collect(),
            entries,
            after,
            preheaders,
            leaf_of,
            one_range,
        }
    }

    /// Whether `block` is a leaf's.
    ///
    /// # Safety
    /// `block` must be a block of `plan`'s function.
    unsafe fn holds(&self, plan: &FunctionPlan, block: LLVMBasicBlockRef) -> bool {
        (plan.cfg.blocks.iter().position(|&b| b == block))
            .is_some_and(|b| self.leaf_of[b].is_some())
    }
}

/// The leaves of a function counted together with the inlined calls around them
/// (docs/abi.md, "Leaf chains"): an inlined call whose only region inside is a leaf that
/// holds none (`candidate`), or such a call, with no access, no call and no disqualified block of its
/// own, whose code and its chain's has no cycle, is entered at one block only, and enters
/// each call of its chain exactly once (the chain's entry block is on every path from its
/// own to where it is left). Its instances are then its leaf's, and so are its footprints
/// (only the leaf accesses memory). Returns each node's unit (the outermost call of its
/// chain, or itself for a leaf alone; `None` for others), and each chain's outermost call
/// with how many regions follow it. Leaves are `candidate`'s nodes; the chains' calls
/// become candidates too (`candidate` is not changed: callers read `unit_of`).
///
/// # Safety
/// `plan` must describe a live function not yet changed.
unsafe fn chains(
    plan: &FunctionPlan,
    candidate: &[bool],
    predecessors: &[Vec<usize>],
    disqualified: &dyn Fn(usize) -> bool,
) -> (Vec<Option<usize>>, Vec<(usize, u32)>) {
    let tree = plan.tree();
    let nodes = &tree.nodes;
    let mut unit_of: Vec<Option<usize>> = (0..nodes.len())
        .map(|k| candidate[k].then_some(k))
        .collect();
    let kids = tree.child_counts();
    let own_blocks = plan.blocks_by_region();
    let access_blocks: HashSet<LLVMBasicBlockRef> = (plan.accesses.iter())
        .map(|a| LLVMGetInstructionParent(a.instruction()))
        .collect();
    // A call with nothing of its own to measure or to wait for.
    let plain = |k: usize| {
        matches!(nodes[k].kind, NodeKind::Inlined(_))
            && kids[k] == 1
            && own_blocks[k].iter().all(|&b| {
                !disqualified(b)
                    && !access_blocks.contains(&plan.cfg.blocks[b])
                    && !(ir::instructions(plan.cfg.blocks[b]).into_iter())
                        .any(|i| ir::is_call_site(i))
            })
    };
    // The blocks of `root`'s subtree (a chain: `root..=last`).
    let blocks_of = |root: usize, last: usize| -> Vec<usize> {
        (root..=last)
            .flat_map(|k| own_blocks[k].iter().copied())
            .collect()
    };
    // The one block of `set` entered from outside it (or the function's start), if one.
    let single_entry = |set: &HashSet<usize>| -> Option<usize> {
        let mut entry = None;
        for &b in set {
            if b == 0 || predecessors[b].iter().any(|p| !set.contains(p)) {
                if entry.replace(b).is_some() {
                    return None;
                }
            }
        }
        entry
    };
    let mut chains = Vec::new();
    // From the leaves that hold no leaf: an inlined call, or a loop with nothing inside but
    // its body (`last`, whose blocks are the loop's: bodies are not regions here).
    for last in (0..nodes.len()).filter(|&k| candidate[k] && kids[k] == 0) {
        let leaf = match nodes[last].kind {
            NodeKind::LoopBody(_) => match nodes[last].parent {
                Some(lp) if kids[lp] == 1 && candidate[lp] => lp,
                _ => continue,
            },
            _ => last,
        };
        // A loop's iterations are its own: the chain's code has no other cycle.
        let (header, loop_blocks): (Option<usize>, &[usize]) = match nodes[leaf].kind {
            NodeKind::Loop(j) => (
                Some(plan.forest.loops[j].header),
                &plan.forest.loops[j].blocks[..],
            ),
            _ => (None, &[]),
        };
        let iterates =
            |from: usize, to: usize| Some(to) == header && loop_blocks.binary_search(&from).is_ok();
        let mut top = leaf;
        let longest = kage_abi::footprint::CHAIN_MASK >> kage_abi::footprint::CHAIN_SHIFT;
        let fits = |p: usize| leaf - p <= longest as usize;
        while let Some(parent) = nodes[top].parent.filter(|&p| fits(p) && plain(p)) {
            let unit: HashSet<usize> = blocks_of(parent, last).into_iter().collect();
            let Some(entry) = single_entry(&unit) else {
                break;
            };
            // Each call (or loop) inside entered once, at one block every path through the
            // unit takes.
            let once = (parent + 1..=leaf).all(|inner| {
                let inside: HashSet<usize> = blocks_of(inner, last).into_iter().collect();
                let Some(inner_entry) = single_entry(&inside) else {
                    return false;
                };
                // A walk from the unit's entry that avoids `inner_entry` must not leave it.
                let (mut seen, mut stack) = (HashSet::from([entry]), vec![entry]);
                while let Some(b) = stack.pop() {
                    if b == inner_entry {
                        continue;
                    }
                    let succs = &plan.cfg.successors[b];
                    if succs.is_empty() || succs.iter().any(|s| !unit.contains(s)) {
                        return false;
                    }
                    for &s in succs {
                        if seen.insert(s) {
                            stack.push(s);
                        }
                    }
                }
                true
            });
            if !once || has_cycle(&unit, &plan.cfg.successors, &iterates) {
                break;
            }
            top = parent;
        }
        if top != leaf {
            for k in top..=last {
                unit_of[k] = Some(top);
            }
            chains.push((top, (leaf - top) as u32));
        }
    }
    (unit_of, chains)
}

/// The leaves whose every instance is the one range they report (docs/abi.md, "One-range
/// leaves"): an inlined call (with the calls of its chain) that holds no other region, with
/// no call that may run instrumented code among its blocks, entered at one block only,
/// whose blocks report one range in all, in a block that every path through them takes
/// (once: an inlined call that holds no loop has no cycle among its blocks). Such a leaf
/// needs no hook to tell where its instances begin and end: each report is one. Returns,
/// per such leaf, the index in `reports` of its range's report, and the leaf (its chain's
/// outermost call). `unit_of` and `chains` are [`chains`]'.
///
/// # Safety
/// `plan` must describe a live function not yet changed, `reports` its reports.
unsafe fn one_range_leaves(
    plan: &FunctionPlan,
    unit_of: &[Option<usize>],
    chains: &[(usize, u32)],
    reports: &[SegmentReport],
    predecessors: &[Vec<usize>],
) -> Vec<(usize, usize)> {
    let tree = plan.tree();
    let nodes = &tree.nodes;
    let kids = tree.child_counts();
    let chain_length: HashMap<usize, usize> = (chains.iter())
        .map(|&(root, length)| (root, length as usize))
        .collect();
    let index_of: HashMap<LLVMBasicBlockRef, usize> = (plan.cfg.blocks.iter().enumerate())
        .map(|(b, &block)| (block, b))
        .collect();
    // Per block: its reports with ranges (index, how many ranges).
    let mut reported: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
    for (i, report) in reports.iter().enumerate() {
        if let Some(&b) = index_of.get(&LLVMGetInstructionParent(report.end)) {
            reported.entry(b).or_default().push((i, report.marks.len()));
        }
    }
    let mut blocks_of: HashMap<usize, Vec<usize>> = HashMap::new();
    for b in (0..plan.cfg.blocks.len()).filter(|&b| plan.forest.reachable[b]) {
        if let Some(unit) = unit_of[tree.block_region[b]] {
            blocks_of.entry(unit).or_default().push(b);
        }
    }
    let mut out = Vec::new();
    for (&unit, blocks) in &blocks_of {
        // An inlined call, or a chain of them, with no region inside but its chain's.
        let last = unit + chain_length.get(&unit).copied().unwrap_or(0);
        if !matches!(nodes[unit].kind, NodeKind::Inlined(_)) || kids[last] != 0 {
            continue;
        }
        let set: HashSet<usize> = blocks.iter().copied().collect();
        let cuts = |b: usize| {
            (ir::instructions(plan.cfg.blocks[b]).into_iter()).any(|i| crate::segments::is_cut(i))
        };
        if blocks.iter().any(|&b| cuts(b)) {
            continue;
        }
        let ranges: Vec<(usize, usize)> = (blocks.iter())
            .flat_map(|b| reported.get(b).into_iter().flatten())
            .filter(|&&(_, marks)| marks != 0)
            .copied()
            .collect();
        let &[(report, 1)] = &ranges[..] else {
            continue;
        };
        let at = index_of[&LLVMGetInstructionParent(reports[report].end)];
        let mut entries = (blocks.iter().copied())
            .filter(|&b| b == 0 || predecessors[b].iter().any(|p| !set.contains(p)));
        let (Some(entry), None) = (entries.next(), entries.next()) else {
            continue;
        };
        // A walk from the entry that avoids the report's block must not leave the leaf.
        let (mut seen, mut stack, mut once) = (HashSet::from([entry]), vec![entry], true);
        while let Some(b) = stack.pop().filter(|_| once) {
            if b == at {
                continue;
            }
            let succs = &plan.cfg.successors[b];
            once = !succs.is_empty() && succs.iter().all(|s| set.contains(s));
            stack.extend(succs.iter().copied().filter(|&s| seen.insert(s)));
        }
        if once {
            out.push((report, unit));
        }
    }
    out.sort_unstable();
    out
}

/// Whether the blocks of `set` hold a cycle among themselves, edges `ignored(from, to)`
/// left out.
fn has_cycle(
    set: &HashSet<usize>,
    successors: &[Vec<usize>],
    ignored: &dyn Fn(usize, usize) -> bool,
) -> bool {
    let mut state: HashMap<usize, u8> = HashMap::new();
    for &start in set {
        if state.contains_key(&start) {
            continue;
        }
        state.insert(start, 1);
        let mut stack = vec![(start, 0usize)];
        while let Some(&mut (b, ref mut next)) = stack.last_mut() {
            if let Some(&s) = successors[b].get(*next) {
                *next += 1;
                if set.contains(&s) && !ignored(b, s) {
                    match state.get(&s) {
                        None => {
                            state.insert(s, 1);
                            stack.push((s, 0));
                        }
                        Some(1) => return true,
                        Some(_) => {}
                    }
                }
            } else {
                state.insert(b, 2);
                stack.pop();
            }
        }
    }
    false
}

/// The runtime's footprint symbols, declared in one module.
struct FpRuntime {
    leaf_enter: RuntimeFunction,
    leaf_end: RuntimeFunction,
    leaf_range: RuntimeFunction,
    strided: RuntimeFunction,
    /// The thread-local access counter.
    accesses: LLVMValueRef,
    range: RuntimeFunction,
    i64_type: LLVMTypeRef,
}

impl FpRuntime {
    /// Declares the symbols in `module`.
    ///
    /// # Safety
    /// `module` must be a valid module.
    unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        FpRuntime {
            leaf_enter: RuntimeFunction::declare(module, &symbols::FP_LEAF_ENTER),
            leaf_end: RuntimeFunction::declare(module, &symbols::FP_LEAF_END),
            leaf_range: RuntimeFunction::declare(module, &symbols::FP_LEAF_RANGE),
            strided: RuntimeFunction::declare(module, &symbols::FP_STRIDED),
            accesses: ir::declare_runtime_global(module, &symbols::FP_ACCESSES),
            range: RuntimeFunction::declare(module, &symbols::FP_RANGE),
            i64_type: LLVMInt64TypeInContext(context),
        }
    }

    /// At the builder's position: `__kage_fp_range(ptr, len)`.
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module; `ptr` a pointer, `len` an
    /// i64.
    unsafe fn report_range(&self, builder: LLVMBuilderRef, ptr: LLVMValueRef, len: LLVMValueRef) {
        self.range.call(builder, &mut [ptr, len]);
    }

    /// An i64 constant.
    fn constant(&self, value: u64) -> LLVMValueRef {
        unsafe { LLVMConstInt(self.i64_type, value, 0) }
    }

    /// At the builder's position: `__kage_fp_accesses += n`, relaxed.
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module; `n` an i64.
    unsafe fn count(&self, builder: LLVMBuilderRef, n: LLVMValueRef) {
        ir::add_relaxed(builder, self.accesses, n);
    }

    /// At the builder's position: `__kage_fp_strided(ptr, width, stride, count)`.
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module; the others are a pointer
    /// and i64s.
    unsafe fn report(
        &self,
        builder: LLVMBuilderRef,
        ptr: LLVMValueRef,
        width: LLVMValueRef,
        stride: LLVMValueRef,
        count: LLVMValueRef,
    ) {
        self.strided.call(builder, &mut [ptr, width, stride, count]);
    }
}

/// How many accesses a build for every tool would report for `access` (one per load and per
/// store hook).
fn hook_count(access: &Access) -> u64 {
    match *access {
        Access::Plain { load, store, .. } => u64::from(load) + u64::from(store),
        Access::Bulk { dst, src, .. } => u64::from(dst.is_some()) + u64::from(src.is_some()),
        Access::CmpXchg { .. } => 0,
    }
}

/// What one segment reports, at its end: its access count and the merged ranges not
/// reported before on every path.
struct SegmentReport {
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
unsafe fn plan_reports(
    plan: &FunctionPlan,
    hoisted: &HashSet<LLVMValueRef>,
    data_layout: LLVMTargetDataRef,
) -> Vec<SegmentReport> {
    let segments = function_segments(&plan.cfg, data_layout);
    let checkpoints = Checkpoints::new(&plan.cfg.successors);
    let mut by_block: Vec<Vec<&Segment>> = vec![Vec::new(); plan.cfg.blocks.len()];
    for segment in &segments {
        by_block[segment.block].push(segment);
    }
    let tree = plan.tree();
    let mut out = Vec::new();
    // What each block leaves reported, for its successors; `None` until visited.
    let mut reported_at_end: Vec<Option<Marked<LLVMValueRef>>> = vec![None; plan.cfg.blocks.len()];
    for &b in &checkpoints.order {
        let block = plan.cfg.blocks[b];
        let nothing = Marked::default();
        let mut reported = if checkpoints.at_start[b] || ir::is_landing_pad(block) {
            Marked::default()
        } else {
            // An edge into a new instance (an inlined call entered) brings nothing: what
            // was reported before belongs to instances the new one is not part of.
            let predecessors = checkpoints.predecessors[b].iter();
            Marked::meet_all(predecessors.filter_map(|&p| {
                let known = reported_at_end[p].as_ref()?;
                let region = |block: usize| tree.block_region[block];
                Some(if tree.encloses(region(b), region(p)) {
                    known
                } else {
                    &nothing
                })
            }))
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
unsafe fn emit_reports(
    reports: &[SegmentReport],
    leaf_of_report: &HashMap<usize, LLVMValueRef>,
    rt: &FpRuntime,
    builder: LLVMBuilderRef,
    position: &mut dyn FnMut(LLVMValueRef),
) {
    for (i, report) in reports.iter().enumerate() {
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
                Mark::Whole { ptr, len, .. } => {
                    let len = match len {
                        Length::Constant(n) => rt.constant(n),
                        Length::Dynamic(v) => {
                            LLVMBuildIntCast2(builder, v, rt.i64_type, 0, c"".as_ptr())
                        }
                    };
                    (ptr, len)
                }
            };
            match leaf_of_report.get(&i) {
                Some(&leaf) => {
                    rt.leaf_range.call(builder, &mut [ptr, len, leaf]);
                }
                None => rt.report_range(builder, ptr, len),
            }
        }
    }
}

/// Where a hoisted loop's helper is called, and whether it enters the loop's region.
enum HelperCall {
    /// At the header's start, before the hooks there; at iteration 0 it calls
    /// `__kage_loop_iter` (the function) with the loop's table entry.
    EntersLoop(RuntimeFunction, LLVMValueRef),
    /// Before this instruction (the header's first, after the leaf hooks there): a leaf
    /// loop, entered by its leaf hooks.
    LeafAt(LLVMValueRef),
}

/// Emits a hoisted loop's footprint instrumentation (mode 3, docs/abi.md): the preheader's
/// values ([`preheader_values`]), and at the header's first insertion point the call
/// `__kage_fp_chunk(iv, S, T - 1, starts...)` of a helper that, at iteration 0, calls
/// `__kage_loop_iter(loop)` (the loop's only iteration event: it enters the loop's region;
/// not for a leaf loop, entered by its leaf hooks) and, at every chunk start (`m`
/// iterations), adds the chunk's `m * n` accesses to the thread's counter (`n` accesses
/// followed per iteration; those marked inline are reported and counted by their segments)
/// and reports each range: `__kage_fp_range(lowest, (m - 1) * |stride| + width)` when its
/// elements overlap or touch (buffered, as a segment's ranges), `__kage_fp_strided(lowest,
/// width, |stride|, m)` otherwise.
/// `position(at)` puts `builder` before `at` with the hook location of `at`.
///
/// # Safety
/// `plan` must come from [`hoist::plan_function`] (with [`Coverage::Bytes`]) on the
/// function being instrumented, whose header has not been given its loop hook.
unsafe fn emit_hoisted(
    plan: &HoistPlan,
    builder: LLVMBuilderRef,
    position: &mut dyn FnMut(LLVMValueRef),
    rt: &FpRuntime,
    call: HelperCall,
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
    if let HelperCall::EntersLoop(loop_iter, loop_region) = call {
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
        loop_iter.call(b, &mut [loop_region]);
        LLVMBuildBr(b, report);
        LLVMPositionBuilderAtEnd(b, report);
    }
    let iterations = frame.math.add(frame.last, frame.math.constant(1));
    // The accesses followed; those marked inline are counted by their segments.
    let accesses = frame
        .math
        .mul(iterations, frame.math.constant(plan.accesses.len() as i64));
    rt.count(b, accesses);
    for (r, range) in plan.ranges.iter().enumerate() {
        let lowest = frame.lowest_byte(plan, r);
        let m = &frame.math;
        let (width, stride) = (range.hi - range.lo, range.stride().abs());
        if stride <= width {
            // Elements that overlap or touch: one range, buffered like a segment's.
            let span = m.add(m.mul(frame.last, m.constant(stride)), m.constant(width));
            rt.report_range(b, lowest, span);
        } else {
            rt.report(b, lowest, m.constant(width), m.constant(stride), iterations);
        }
    }
    frame.close();
    let at = match call {
        HelperCall::LeafAt(at) => at,
        HelperCall::EntersLoop(..) => ir::first_insertion_point(plan.header)
            .expect("a loop header has an insertion point (it has a terminator)"),
    };
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
