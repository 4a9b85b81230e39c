//! The count builds, both read by the runtime's count tool:
//!
//! - `count` (instrumentation 9, `KAGE_TOOL` unset or `count`; docs/abi.md, "Count
//!   instrumentation"): no call into the runtime on the common path. Each thread's
//!   per-region records and its stack of open function activations are updated inline: a
//!   function's entry pushes its activation and opens its region, the edges where the open
//!   regions change close and open them ([`Transition`]), a loop's back edges count an
//!   iteration, each return closes what is open in the activation and pops it. Each
//!   segment's loads, stores and bytes are added to the thread's totals and to its region's
//!   self counts at the segment's start. Segments are cut at calls ([`crate::segments`]): a
//!   callee counts its own, a call that never returns (`exit`, `longjmp`, a throw) ends a
//!   segment whose accesses all ran, and `kage_set_enabled` (a call) switches counting
//!   exactly where the program calls it. A segment adds only while `__kage_gate` is 0. An
//!   `llvm.mem*` of run-time length adds its own right before it (its length is known
//!   there); a `cmpxchg` right after it (whether it wrote is known then). The runtime is
//!   called where the inline checks fail (a function's entry: the thread's first, a
//!   module's first on the thread, after a reset, a full stack, activations left dead by a
//!   `longjmp`), where control may arrive from a `longjmp` or an exception (resume points),
//!   and at blocks whose edges cannot carry their region changes.
//! - `count-calls` (instrumentation 0): the region hooks and a call per access, which every
//!   runtime tool understands.

mod classes;
mod emit;
mod regions;

use std::collections::HashMap;

use kage_abi::count::{IN_LOCALS, WORDS};
use kage_abi::{symbols, Instrumentation};
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::target::LLVMGetModuleDataLayout;
use llvm_sys::LLVMOpcode;

use super::{Settings, Tool};
use crate::access::Access;
use crate::debuginfo::HookLocations;
use crate::hooks::{self, Hooks, Inserter};
use crate::ir::{self, RuntimeFunction};
use crate::plan::FunctionPlan;
use crate::region_tree::NodeKind;
use crate::regions::RegionTable;
use crate::segments::function_segments;
use emit::{Emitter, Inline, TreeLocals};
use regions::{path_up, place, promoted_trees, Change, Placement, PromotedTree, Reporting};

/// Regions and counts kept inline.
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

    /// The helpers are inlined, and their thread-local addresses merged and hoisted.
    fn needs_cleanup(&self) -> bool {
        true
    }

    unsafe fn instrument(
        &self,
        module: LLVMModuleRef,
        plans: &[FunctionPlan],
        table: &RegionTable,
    ) {
        let inline = Inline::declare(module);
        let data_layout = LLVMGetModuleDataLayout(module);
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        let promoted: Vec<Promotion> = plans.iter().map(|plan| promote(plan)).collect();
        let open_cells = cells_opened_in_records(table, plans, &promoted);
        // The regions counted in locals, whose inclusive counts the report derives.
        let in_locals: Vec<(u32, u32)> = (plans.iter().zip(&promoted))
            .flat_map(|(plan, promotion)| {
                let base = plan.slots.base;
                (promotion.tree_of.iter().enumerate())
                    .filter(|(_, tree)| tree.is_some())
                    .map(move |(node, _)| (base + node as u32, IN_LOCALS))
            })
            .collect();
        table.set_flags(&in_locals);
        for (plan, promotion) in plans.iter().zip(promoted) {
            let module_wide = (table, &open_cells[..]);
            instrument_function(
                &inline,
                module,
                plan,
                promotion,
                module_wide,
                builder,
                data_layout,
            );
        }
        LLVMDisposeBuilder(builder);
    }
}

/// Which regions of a function keep their counts in locals, and where the edges' changes
/// go (before anything is inserted).
struct Promotion {
    /// Each loop header's loop.
    header_of: HashMap<usize, usize>,
    /// Each block's predecessors (reachable ones).
    predecessors: Vec<Vec<usize>>,
    trees: Vec<PromotedTree>,
    /// Per tree node: the tree it is in.
    tree_of: Vec<Option<usize>>,
    placements: Vec<(usize, Placement)>,
    /// Per block: the trees its way in leaves.
    trees_left_into: Vec<Vec<usize>>,
}

/// The function's promoted trees and the placement of its changes.
///
/// # Safety
/// `plan` must describe a live function.
unsafe fn promote(plan: &FunctionPlan) -> Promotion {
    let n = plan.cfg.blocks.len();
    let tree = plan.tree();
    let reachable = &plan.forest.reachable;
    let header_of: HashMap<usize, usize> = (plan.forest.loops.iter().enumerate())
        .map(|(k, lp)| (lp.header, k))
        .collect();
    let mut predecessors = vec![Vec::new(); n];
    for (p, succs) in plan.cfg.successors.iter().enumerate() {
        for &s in succs.iter().filter(|&&s| s < n) {
            if reachable[p] && !predecessors[s].contains(&p) {
                predecessors[s].push(p);
            }
        }
    }
    let mut trees = promoted_trees(plan, &predecessors);
    // A block that needs the runtime to change its regions cannot be in a promoted tree
    // (the runtime does not see the tree's locals): such trees are given up.
    let (tree_of, placements, trees_left_into) = loop {
        let placed = place(plan, &header_of, &predecessors, &trees);
        let (tree_of, placements, _) = &placed;
        let owner = |b: usize| tree_of[tree.block_region[b]];
        let dynamic_in_tree: Vec<usize> = (placements.iter())
            .filter(|(b, p)| matches!(p, Placement::Dynamic) && owner(*b).is_some())
            .filter_map(|(b, _)| owner(*b))
            .collect();
        if dynamic_in_tree.is_empty() {
            break placed;
        }
        trees = (trees.into_iter().enumerate())
            .filter(|(j, _)| !dynamic_in_tree.contains(j))
            .map(|(_, t)| t)
            .collect();
    };
    Promotion {
        header_of,
        predecessors,
        trees,
        tree_of,
        placements,
        trees_left_into,
    }
}

/// Per source cell of the module (`kage_region.source_cell`): whether a copy of its source
/// region is counted in records, so that the cell can count open instances. A promoted
/// tree's copy checks at its report whether its instances ran inside another copy's only
/// where it can.
fn cells_opened_in_records(
    table: &RegionTable,
    plans: &[FunctionPlan],
    promoted: &[Promotion],
) -> Vec<bool> {
    let mut open = vec![false; table.source_cells() as usize];
    for (plan, promotion) in plans.iter().zip(promoted) {
        for (node, in_tree) in promotion.tree_of.iter().enumerate() {
            let local = plan.slots.base + node as u32;
            if let (Some(cell), None) = (table.source_cell(local), in_tree) {
                open[cell as usize] = true;
            }
        }
    }
    open
}

/// Count instrumentation of one function, with its `promotion` and the module's `table`
/// and [`cells_opened_in_records`].
///
/// # Safety
/// `plan` must describe a live function of `module` that nothing was inserted into yet.
unsafe fn instrument_function(
    inline: &Inline,
    module: LLVMModuleRef,
    plan: &FunctionPlan,
    promotion: Promotion,
    (table, open_cells): (&RegionTable, &[bool]),
    builder: LLVMBuilderRef,
    data_layout: llvm_sys::target::LLVMTargetDataRef,
) {
    let n = plan.cfg.blocks.len();
    let tree = plan.tree();
    let Promotion {
        header_of,
        predecessors,
        trees,
        tree_of,
        placements,
        trees_left_into,
    } = promotion;
    // Where the function's entry goes: after the entry block's static allocas, which must
    // stay first (the entry's checks split the block).
    let first = LLVMGetFirstInstruction(plan.cfg.blocks[0]);
    let Some(mut entry_at) = ir::first_insertion_point(plan.cfg.blocks[0]) else {
        return;
    };
    while ir::opcode(entry_at) == LLVMOpcode::LLVMAlloca {
        entry_at = LLVMGetNextInstruction(entry_at);
    }
    let segments = function_segments(&plan.cfg, data_layout);
    let block_of = |inst: LLVMValueRef| {
        let parent = LLVMGetInstructionParent(inst);
        plan.cfg.blocks.iter().position(|&b| b == parent)
    };
    let exits: Vec<(LLVMValueRef, usize)> = (plan.exits.iter())
        .filter_map(|&at| Some((at, block_of(at)?)))
        .collect();
    let cmpxchgs: Vec<(LLVMValueRef, u64, usize)> = (plan.accesses.iter())
        .filter_map(|access| match *access {
            Access::CmpXchg { inst, size, .. } => Some((inst, size, block_of(inst)?)),
            _ => None,
        })
        .collect();
    let owner = |b: usize| tree_of[tree.block_region[b]];
    let whole_function = trees.first().is_some_and(|t| t.root == 0);
    // Blocks made on edges, before anything is inserted.
    // Edges' code: `(terminator, change, (from, to))`.
    let mut edge_code: Vec<(LLVMValueRef, Change, (usize, usize))> = Vec::new();
    let mut start_code: Vec<(usize, Option<Change>)> = Vec::new();
    for (b, placement) in placements {
        match placement {
            Placement::Start(c) => start_code.push((b, Some(c))),
            Placement::Dynamic => start_code.push((b, None)),
            Placement::Edges(edges) => {
                let mut made = Vec::new();
                for (p, split, c) in edges {
                    let mut block = plan.cfg.blocks[p];
                    if split {
                        block = ir::split_critical_edge(block, plan.cfg.blocks[b]);
                    }
                    if block.is_null() {
                        made.clear();
                        start_code.push((b, None));
                        break;
                    }
                    made.push((LLVMGetBasicBlockTerminator(block), c, (p, b)));
                }
                edge_code.extend(made);
            }
        }
    }
    let dynamic_blocks: Vec<usize> = (start_code.iter())
        .filter(|(_, code)| code.is_none())
        .map(|&(b, _)| b)
        .collect();
    let mut cut_blocks = vec![false; n];
    // Each block's first call, where the trees waiting there report.
    let mut first_cut: Vec<Option<LLVMValueRef>> = vec![None; n];
    for s in segments.iter().filter(|s| crate::segments::is_cut(s.end)) {
        cut_blocks[s.block] = true;
        first_cut[s.block].get_or_insert(s.end);
    }
    let deferred_nodes = deferred_regions(
        plan,
        &tree_of,
        &trees,
        &cut_blocks,
        &dynamic_blocks,
        &predecessors,
        &exits,
        &cmpxchgs,
    );
    let reports = report_places(
        plan,
        (&trees, &tree_of),
        (&start_code, &edge_code),
        &deferred_nodes,
        &predecessors,
        (&cut_blocks, &exits),
    );
    for (b, code) in start_code.iter_mut() {
        if let Some(c) = code {
            c.reports = reports.at_start[*b].clone();
        }
    }
    for (_, c, edge) in edge_code.iter_mut() {
        if let Some(list) = reports.on_edge.get(edge) {
            c.reports = list.clone();
        }
    }
    // The calls before which the function's activation, or a deferred region's record, must
    // be open: those in the own code of the function and of deferred regions.
    let deferred_cuts: Vec<(LLVMValueRef, usize)> = (segments.iter())
        .filter(|s| crate::segments::is_cut(s.end))
        .map(|s| (s.end, tree.block_region[s.block]))
        .filter(|&(_, region)| region == 0 || deferred_nodes[region])
        .collect();
    let deferrable = !whole_function
        && dynamic_blocks.is_empty()
        && !cmpxchgs.iter().any(|&(_, _, b)| tree.block_region[b] == 0)
        && returns_quietly(plan, &tree_of, &trees, &deferred_nodes, &cut_blocks, &exits);
    let locations = HookLocations::new(module, plan.func);
    let position = |at: LLVMValueRef| {
        LLVMPositionBuilderBefore(builder, at);
        LLVMSetCurrentDebugLocation2(builder, locations.for_instruction(at));
    };
    let region_index = |node: usize| plan.slots.base + node as u32;
    // The trees' locals, zero, first in the entry block.
    position(first);
    let locals: Vec<TreeLocals> = trees
        .iter()
        .map(|t| inline.tree_locals(builder, t.len))
        .collect();
    // The additions of the segments counted in records to the thread's totals wait in
    // locals until something may read the totals.
    let waiting_totals = (!whole_function).then(|| inline.waiting_totals(builder));
    let deferred_locals: Vec<Option<emit::DeferredLocals>> = (deferred_nodes.iter())
        .map(|&d| d.then(|| inline.deferred_locals(builder)))
        .collect();
    // Each segment's counts: its constants, and the `llvm.mem*` of run-time length in it.
    let segment_counts: Vec<_> = (segments.iter())
        .map(|segment| SegmentCounts::of(&segment.accesses))
        .collect();
    // Which of each region's own counters its segments may add to.
    let mut counted = vec![[false; 4]; tree.nodes.len()];
    for (segment, (constant, dynamic)) in segments.iter().zip(&segment_counts) {
        let node = &mut counted[tree.block_region[segment.block]];
        for k in 0..4 {
            node[k] |= constant.constant[k] != 0;
        }
        for (_, counts) in dynamic {
            for &(_, reads, writes) in &counts.dynamic {
                node[LOADS] |= reads;
                node[BYTES_READ] |= reads;
                node[STORES] |= writes;
                node[BYTES_WRITTEN] |= writes;
            }
        }
    }
    // A region whose loads all read the same number of bytes (stores: write) needs no local
    // for its bytes in a tree: its report derives them from the loads (stores).
    let sizes = uniform_sizes(
        &segments,
        &segment_counts,
        &tree.block_region,
        tree.nodes.len(),
    );
    // What the pending locals of a deferred function or region receive: the counts of the
    // trees and deferred regions directly under it.
    let mut pending_of = vec![[false; 4]; tree.nodes.len()];
    for t in &trees {
        if let Some(parent) = tree.nodes[t.root].parent {
            for node in &counted[t.root..t.root + t.len] {
                for k in 0..4 {
                    pending_of[parent][k] |= node[k];
                }
            }
        }
    }
    for i in (1..tree.nodes.len()).rev().filter(|&i| deferred_nodes[i]) {
        let parent = tree.nodes[i]
            .parent
            .expect("a deferred region has a parent");
        for k in 0..4 {
            pending_of[parent][k] |= counted[i][k] | pending_of[i][k];
        }
    }
    let function = region_index(0);
    let deferred = deferrable.then(|| {
        // A tree that starts with the entry block notes itself as running at once.
        let tree_starts = (start_code.iter()).any(|(b, code)| {
            *b == 0
                && code.as_ref().is_some_and(|c| {
                    (c.counted.iter()).any(|node| trees.iter().any(|t| t.root == *node))
                })
        });
        inline.deferred_entry(
            builder,
            entry_at,
            table.module_global,
            (
                table.region_ptr(function),
                function,
                table.open_offset(function),
            ),
            !tree_starts,
            counted[0],
            pending_of[0],
        )
    });
    // Deferred regions, parents first (their children's quiet leaves add to their locals).
    let mut deferred_regions: Vec<Option<emit::DeferredRegion>> = Vec::new();
    for (i, locals) in deferred_locals.into_iter().enumerate() {
        let region = locals.map(|locals| {
            let parent = tree.nodes[i]
                .parent
                .expect("a deferred region has a parent");
            let parent_pending = match (parent, &deferred) {
                (0, Some(d)) => Some(d.pending),
                (0, None) => None,
                _ => deferred_regions[parent].as_ref().map(|r| r.pending),
            };
            inline.deferred_region(locals, counted[i], pending_of[i], parent_pending)
        });
        deferred_regions.push(region);
    }
    // The function's entry: its activation and region (a promoted function has neither,
    // a deferred one pushes them when it needs them).
    position(entry_at);
    let (records, activation) = if whole_function || deferred.is_some() {
        (None, None)
    } else {
        let (records, activation) = inline.enter(
            builder,
            table.module_global,
            table.region_ptr(function),
            (function, table.open_offset(function)),
        );
        (Some(records), Some(activation))
    };
    let in_records = (0..tree.nodes.len())
        .filter(|&node| tree_of[node].is_none() && !deferred_nodes[node])
        .count();
    let records_slot = match (records, &deferred) {
        _ if in_records < emit::RECORDS_RELOADED_FROM => None,
        (Some(records), _) => {
            let slot = inline.local_at_entry(builder, first, c"kage.records");
            position(entry_at);
            LLVMBuildStore(builder, records, slot);
            Some(slot)
        }
        (None, Some(d)) => Some(d.records),
        (None, None) => None,
    };
    // Trees directly under a deferred function or region leave their accesses in its locals.
    let tree_pending: Vec<Option<[LLVMValueRef; 4]>> = (trees.iter())
        .map(|t| match (tree.nodes[t.root].parent, &deferred) {
            (Some(0), Some(d)) => Some(d.pending),
            (Some(0), None) | (None, _) => None,
            (Some(parent), _) => deferred_regions[parent].as_ref().map(|r| r.pending),
        })
        .collect();
    let flushes: Vec<RuntimeFunction> = (trees.iter().zip(&tree_pending))
        .map(|(t, pending)| {
            // Where the tree's copies count their source regions' open instances, from
            // the root's record on.
            let root = plan.slots.base + t.root as u32;
            let cells: Vec<Option<u64>> = (root..root + t.len as u32)
                .map(|local| {
                    let from_root = u64::from(root) * (WORDS as u64 * 8);
                    let cell = table.source_cell(local)?;
                    (open_cells[cell as usize]).then(|| table.open_offset(local) - from_root)
                })
                .collect();
            inline.define_flush(plan, t, (&counted, &sizes, &cells), pending.is_some())
        })
        .collect();
    let at = Emitter {
        inline,
        builder,
        records,
        records_slot,
        activation,
        table,
        base: plan.slots.base,
        trees: &trees,
        locals: &locals,
        sizes: &sizes,
        flushes: &flushes,
        waits: &reports.waits,
        deferred: deferred.as_ref(),
        tree_pending: &tree_pending,
        nodes: &tree.nodes,
        deferred_regions: &deferred_regions,
        waiting_totals,
        emitted: Default::default(),
    };
    for (b, code) in &start_code {
        let Some(start) = (if *b == 0 {
            Some(entry_at)
        } else {
            ir::first_insertion_point(plan.cfg.blocks[*b])
        }) else {
            continue;
        };
        position(start);
        match code {
            Some(c) => at.change(c),
            None => {
                let waiting = &reports.at_start[*b];
                let left = trees_left_into[*b].iter().filter(|j| !waiting.contains(j));
                for &j in waiting.iter().chain(left) {
                    at.flush(j);
                }
                let lp = header_of
                    .get(b)
                    .map(|&k| table.region_ptr(region_index(tree.loop_node[k])));
                at.settle_totals();
                at.arrive(table.region_ptr(region_index(tree.block_region[*b])), lp);
            }
        }
    }
    for &(inst, block) in &plan.resume_points {
        position(inst);
        at.settle_totals();
        at.resume(table.region_ptr(region_index(tree.block_region[block])));
        at.resumed(tree.block_region[block]);
    }
    for (segment, (constant, dynamic)) in segments.iter().zip(&segment_counts) {
        let region = tree.block_region[segment.block];
        if !constant.is_empty() {
            position(segment.start);
            at.add(constant, region, owner(segment.block));
        }
        for (inst, counts) in dynamic {
            position(*inst);
            at.add(counts, region, owner(segment.block));
        }
    }
    for &(inst, size, block) in &cmpxchgs {
        let next = LLVMGetNextInstruction(inst);
        if next.is_null() {
            continue;
        }
        LLVMPositionBuilderBefore(builder, next);
        LLVMSetCurrentDebugLocation2(builder, locations.for_instruction(inst));
        at.cmpxchg(inst, size, tree.block_region[block]);
    }
    // The totals complete before every call that may run instrumented code.
    for s in segments.iter().filter(|s| crate::segments::is_cut(s.end)) {
        position(s.end);
        at.settle_totals();
    }
    // The trees waiting at a call report before it (and before a deferred function or
    // region opens its record there, as they may report to its locals).
    for b in 0..n {
        if let (Some(call), false) = (first_cut[b], reports.before_leaving[b].is_empty()) {
            position(call);
            reports.before_leaving[b].iter().for_each(|&j| at.flush(j));
        }
    }
    for &(call, region) in &deferred_cuts {
        if region != 0 {
            position(call);
            at.materialize_down_to(region);
        } else if deferred.is_some() {
            position(call);
            at.materialize();
        }
    }
    for (terminator, c, _) in &edge_code {
        position(*terminator);
        at.change(c);
    }
    for &(inst, block) in &exits {
        position(inst);
        at.settle_totals();
        if first_cut[block].is_none() {
            reports.before_leaving[block]
                .iter()
                .for_each(|&j| at.flush(j));
        }
        if whole_function {
            at.flush(0);
        } else {
            at.exit(&path_up(&tree.nodes, tree.block_region[block], None));
        }
    }
    let in_tree: Vec<Option<usize>> = (0..n).map(owner).collect();
    classes::count_per_class(plan, &in_tree, &at.emitted.borrow(), inline, builder);
}

/// Which trees wait to report, and where they report ([`regions::delay_reports`]), given
/// the function's `trees` (and each region's tree), the changes placed at blocks' starts
/// (`None`: the runtime's) and on edges, its deferred regions, and the blocks that call
/// (`cut_blocks`) or return.
fn report_places(
    plan: &FunctionPlan,
    (trees, tree_of): (&[PromotedTree], &[Option<usize>]),
    (start_code, edge_code): (
        &[(usize, Option<Change>)],
        &[(LLVMValueRef, Change, (usize, usize))],
    ),
    deferred_nodes: &[bool],
    predecessors: &[Vec<usize>],
    (cut_blocks, exits): (&[bool], &[(LLVMValueRef, usize)]),
) -> regions::Reports {
    let tree = plan.tree();
    let n = plan.cfg.blocks.len();
    let size = regions::subtree_sizes(&tree.nodes);
    let reporting = |c: &Change| {
        let t = &c.records;
        let in_records = |node: &usize| !deferred_nodes[*node];
        if t.closes.iter().any(in_records) || t.opens.iter().any(in_records) {
            return Some(Reporting::All);
        }
        // Deferred regions left (opening one does nothing yet).
        let inside_left =
            |root: usize| (t.closes.iter()).any(|&d| (d..d + size[d]).contains(&root));
        (!t.closes.is_empty()).then(|| {
            Reporting::Trees(
                (trees.iter().enumerate())
                    .filter(|(_, t)| inside_left(t.root))
                    .map(|(j, _)| j)
                    .collect(),
            )
        })
    };
    let mut at_start = vec![None; n];
    for (b, code) in start_code {
        at_start[*b] = match code {
            Some(c) => reporting(c),
            None => Some(Reporting::All),
        };
    }
    let on_edges: HashMap<(usize, usize), Reporting> = (edge_code.iter())
        .filter_map(|(_, c, edge)| Some((*edge, reporting(c)?)))
        .collect();
    let mut leaves = cut_blocks.to_vec();
    exits.iter().for_each(|&(_, b)| leaves[b] = true);
    let tree_of_block: Vec<Option<usize>> = (0..n).map(|b| tree_of[tree.block_region[b]]).collect();
    let may_wait: Vec<bool> = trees.iter().map(|t| t.root != 0).collect();
    regions::delay_reports(&regions::ReportFlow {
        predecessors,
        tree_of_block: &tree_of_block,
        trees: trees.len(),
        may_wait: &may_wait,
        at_start: &at_start,
        on_edges: &on_edges,
        leaves: &leaves,
    })
}

/// Per region of the function: the bytes every one of its loads reads (`[0]`) and every
/// one of its stores writes (`[1]`), when its segments' constant counts all have the same
/// ratio of bytes to accesses (none of run-time length); `None` otherwise, and for a
/// region without loads (stores).
///
/// `counts` are the segments' ([`SegmentCounts::of`]).
fn uniform_sizes(
    segments: &[crate::segments::Segment],
    counts: &[(SegmentCounts, Vec<(LLVMValueRef, SegmentCounts)>)],
    block_region: &[usize],
    regions: usize,
) -> Vec<[Option<u64>; 2]> {
    // Per region and direction: unseen (`None`), one ratio, or mixed (`Some(None)`).
    let mut seen: Vec<[Option<Option<u64>>; 2]> = vec![[None; 2]; regions];
    for (segment, (constant, dynamic)) in segments.iter().zip(counts) {
        let node = &mut seen[block_region[segment.block]];
        for (d, (accesses, bytes)) in [(LOADS, BYTES_READ), (STORES, BYTES_WRITTEN)]
            .into_iter()
            .enumerate()
        {
            let (n, b) = (constant.constant[accesses], constant.constant[bytes]);
            let ratio = (n > 0 && b % n == 0).then(|| b / n);
            if n > 0 {
                node[d] = match node[d] {
                    None => Some(ratio),
                    Some(seen) if seen == ratio => Some(seen),
                    Some(_) => Some(None),
                };
            }
        }
        for (_, counts) in dynamic {
            for &(_, reads, writes) in &counts.dynamic {
                if reads {
                    node[0] = Some(None);
                }
                if writes {
                    node[1] = Some(None);
                }
            }
        }
    }
    seen.into_iter()
        .map(|node| node.map(Option::flatten))
        .collect()
}

/// Whether a function can return without a call, without opening a region counted in
/// records: it then defers its entry ([`emit::DeferredEntry`]). Its own code may run
/// promoted trees and deferred regions (and promoted trees in those) under it.
///
/// # Safety
/// `plan` must describe a live function that nothing was inserted into yet.
unsafe fn returns_quietly(
    plan: &FunctionPlan,
    tree_of: &[Option<usize>],
    trees: &[regions::PromotedTree],
    deferred_nodes: &[bool],
    cut_blocks: &[bool],
    exits: &[(LLVMValueRef, usize)],
) -> bool {
    let tree = plan.tree();
    let n = plan.cfg.blocks.len();
    let passable = |b: usize| {
        let region = tree.block_region[b];
        let outside_trees = match tree_of[region] {
            Some(j) => tree.nodes[trees[j].root].parent,
            None if cut_blocks[b] => None,
            None => Some(region),
        };
        outside_trees.is_some_and(|r| {
            path_up(&tree.nodes, r, Some(0))
                .iter()
                .all(|&x| deferred_nodes[x])
        })
    };
    let mut seen = vec![false; n];
    let mut stack = vec![0usize];
    while let Some(b) = stack.pop() {
        if seen[b] || !plan.forest.reachable[b] || !passable(b) {
            continue;
        }
        seen[b] = true;
        stack.extend(plan.cfg.successors[b].iter().copied().filter(|&s| s < n));
    }
    exits.iter().any(|&(_, b)| {
        let region = tree.block_region[b];
        seen[b]
            && tree_of[region].is_none()
            && path_up(&tree.nodes, region, Some(0))
                .iter()
                .all(|&x| deferred_nodes[x])
    })
}

/// The inlined calls whose records open only when they need to ([`emit::DeferredRegion`]):
/// those not in a promoted tree, with no block in or right after them whose regions the
/// runtime changes on an edge (it does not see the flags; at a resume point, which a call
/// always precedes, the pass sets them: `Emitter::resumed`), and no `cmpxchg` in their own
/// code (it adds to the thread's totals directly).
#[allow(clippy::too_many_arguments)]
fn deferred_regions(
    plan: &FunctionPlan,
    tree_of: &[Option<usize>],
    trees: &[regions::PromotedTree],
    cut_blocks: &[bool],
    dynamic_blocks: &[usize],
    predecessors: &[Vec<usize>],
    exits: &[(LLVMValueRef, usize)],
    cmpxchgs: &[(LLVMValueRef, u64, usize)],
) -> Vec<bool> {
    let tree = plan.tree();
    let nodes = &tree.nodes;
    let mut deferred: Vec<bool> = (nodes.iter().zip(tree_of))
        .map(|(node, in_tree)| matches!(node.kind, NodeKind::Inlined(_)) && in_tree.is_none())
        .collect();
    let mut not_around = |b: usize| {
        for node in path_up(nodes, tree.block_region[b], None) {
            deferred[node] = false;
        }
    };
    for &b in dynamic_blocks {
        not_around(b);
        predecessors[b].iter().for_each(|&p| not_around(p));
    }
    for &(_, _, b) in cmpxchgs {
        deferred[tree.block_region[b]] = false;
    }
    // Only a region that some instances pass through without a call, and without opening a
    // region counted in records, gains from waiting: innermost first, as that depends on
    // which regions under it wait.
    let size = regions::subtree_sizes(nodes);
    let node_blocks = plan.blocks_by_region();
    let mut returns = vec![false; tree.block_region.len()];
    exits.iter().for_each(|&(_, b)| returns[b] = true);
    // Blocks seen by the search, cleared after each.
    let mut seen = vec![false; tree.block_region.len()];
    for d in (1..nodes.len()).rev() {
        if !deferred[d] {
            continue;
        }
        let inside = |b: usize| (d..d + size[d]).contains(&tree.block_region[b]);
        // Regions waiting down to `d` (itself assumed to).
        let waiting_up_to_d = |mut r: usize| loop {
            if r == d {
                break true;
            }
            if !deferred[r] {
                break false;
            }
            r = nodes[r].parent.expect("a region under d has a parent");
        };
        let passable = |b: usize| match tree_of[tree.block_region[b]] {
            Some(j) => nodes[trees[j].root].parent.is_some_and(&waiting_up_to_d),
            None => !cut_blocks[b] && waiting_up_to_d(tree.block_region[b]),
        };
        let blocks: Vec<usize> = (d..d + size[d])
            .flat_map(|r| node_blocks[r].iter().copied())
            .collect();
        let mut stack: Vec<usize> = (blocks.iter().copied())
            .filter(|&b| b == 0 || predecessors[b].iter().any(|&p| !inside(p)))
            .collect();
        let mut visited = Vec::new();
        let mut quiet = false;
        while let Some(b) = stack.pop() {
            if seen[b] || !passable(b) {
                continue;
            }
            seen[b] = true;
            visited.push(b);
            let successors = &plan.cfg.successors[b];
            if returns[b] || successors.iter().any(|&s| s < seen.len() && !inside(s)) {
                quiet = true;
                break;
            }
            stack.extend(successors.iter().copied().filter(|&s| s < seen.len()));
        }
        visited.into_iter().for_each(|b| seen[b] = false);
        deferred[d] = quiet;
    }
    deferred
}

/// What is added to `__kage_count` at one place: constants (a segment's), or the length of
/// a bulk access of run-time length (an `llvm.mem*`, a library function's effect).
#[derive(Default)]
struct SegmentCounts {
    /// Loads, stores, bytes read, bytes written, as `__kage_count` orders them.
    constant: [u64; 4],
    /// `(len, reads, writes)`: one load when `reads`, one store when `writes`, of `len`
    /// bytes; none when `len` is 0, as the runtime ignores empty accesses.
    dynamic: Vec<(LLVMValueRef, bool, bool)>,
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
                Access::Bulk { at, dst, src, len } => {
                    let (reads, writes) = (src.is_some(), dst.is_some());
                    if LLVMIsAConstantInt(len).is_null() {
                        let own = SegmentCounts {
                            constant: [0; 4],
                            dynamic: vec![(len, reads, writes)],
                        };
                        dynamic.push((at, own));
                        continue;
                    }
                    let len = LLVMConstIntGetZExtValue(len);
                    if len > 0 {
                        if reads {
                            counts.constant[LOADS] += 1;
                            counts.constant[BYTES_READ] += len;
                        }
                        if writes {
                            counts.constant[STORES] += 1;
                            counts.constant[BYTES_WRITTEN] += len;
                        }
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
            hooks::insert(plan, &mut ins, &Default::default(), |ins| {
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
            Access::Bulk { at, dst, src, len } => {
                ins.position_before(at);
                let len = LLVMBuildIntCast2(ins.builder, len, self.i64_type, 0, c"".as_ptr());
                if let Some(src) = src {
                    self.load.call(ins.builder, &mut [src, len]);
                }
                if let Some(dst) = dst {
                    self.store.call(ins.builder, &mut [dst, len]);
                }
            }
        }
    }
}
