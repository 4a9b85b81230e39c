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
//!   exactly where the program calls it. What a segment adds is masked by `__kage_gate`. An
//!   `llvm.mem*` of run-time length adds its own right before it (its length is known
//!   there); a `cmpxchg` right after it (whether it wrote is known then). The runtime is
//!   called where the inline checks fail (a function's entry: the thread's first, a
//!   module's first on the thread, after a reset, a full stack, activations left dead by a
//!   `longjmp`), where control may arrive from a `longjmp` or an exception (resume points),
//!   and at blocks whose edges cannot carry their region changes.
//! - `count-calls` (instrumentation 0): the region hooks and a call per access, which every
//!   runtime tool understands.

use std::collections::HashMap;

use kage_abi::count::{
    ACTIVATIONS, ACTIVATION_SIZE, CAPACITY, DEPTH, EPOCH, FRAME, INCLUSIVE, INSTANCES, RECORDS,
    SELF, TOP, WORDS,
};
use kage_abi::{layout, symbols, Instrumentation};
use llvm_sys::core::*;
use llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::target::LLVMGetModuleDataLayout;
use llvm_sys::{LLVMAtomicOrdering, LLVMIntPredicate, LLVMOpcode};

use super::{Settings, Tool};
use crate::access::Access;
use crate::debuginfo::HookLocations;
use crate::hooks::{self, Hooks, Inserter};
use crate::ir::{self, RuntimeFunction};
use crate::plan::FunctionPlan;
use crate::region_tree::Node;
use crate::regions::RegionTable;
use crate::segments::function_segments;

extern "C" {
    /// Splits the critical edge `from -> to` (src/shim.cpp): the new block, or null.
    fn kage_split_critical_edge(
        from: LLVMBasicBlockRef,
        to: LLVMBasicBlockRef,
    ) -> LLVMBasicBlockRef;
}

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
        for plan in plans {
            instrument_function(&inline, module, plan, table, builder, data_layout);
        }
        LLVMDisposeBuilder(builder);
    }
}

/// What changes on an edge: the regions closed (innermost first), an iteration of a loop
/// body that stays open, the regions opened (outermost first), and the block's region, the
/// activation's innermost one after it (tree nodes).
#[derive(Clone, PartialEq, Eq, Debug)]
struct Transition {
    closes: Vec<usize>,
    iteration: Option<usize>,
    opens: Vec<usize>,
    target: usize,
}

impl Transition {
    fn is_empty(&self) -> bool {
        self.closes.is_empty() && self.iteration.is_none() && self.opens.is_empty()
    }
}

/// What an edge does inline: the regions counted in records change ([`Transition`], those
/// of promoted trees left out), the instances of tree regions entered are counted in their
/// locals, and a tree left is reported to the records first.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Change {
    records: Transition,
    /// Tree nodes whose local instances grow (entered, or a new iteration of a body).
    counted: Vec<usize>,
    /// The tree (index) left on this edge.
    flush: Option<usize>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.counted.is_empty() && self.flush.is_none()
    }
}

/// A subtree of the function's regions whose instances and counts are kept in locals
/// (registers, after mem2reg) while it runs and added to the records when it is left
/// ([`promoted_trees`]).
struct PromotedTree {
    /// Its root's tree node; the tree is the nodes `root..root + len` (pre-order).
    root: usize,
    len: usize,
}

/// Where a block's transitions go.
enum Placement {
    /// At the block's start: every way in changes the same.
    Start(Change),
    /// On edges: `(from, split, change)`, at the end of `from` (its only successor is the
    /// block) or in a block made on the edge.
    Edges(Vec<(usize, bool, Change)>),
    /// A call at the block's start that changes the regions from what is open
    /// (`__kage_count_arrive`): some edge could not carry its change.
    Dynamic,
}

/// The regions from `from` up to `stop` (excluded; the root when `None`), innermost first.
fn path_up(nodes: &[Node], from: usize, stop: Option<usize>) -> Vec<usize> {
    let mut path = Vec::new();
    let mut at = Some(from);
    while at != stop {
        let Some(node) = at else { break };
        path.push(node);
        at = nodes[node].parent;
    }
    path
}

/// The closest common ancestor of tree nodes `a` and `b` (a node is its own ancestor).
fn common_ancestor(nodes: &[Node], a: usize, b: usize) -> usize {
    let of_a = path_up(nodes, a, None);
    path_up(nodes, b, None)
        .into_iter()
        .find(|node| of_a.contains(node))
        .unwrap_or(0)
}

/// The change on the edge `from -> to` (`None`: the function's start, after its own region
/// opened), as the region hooks of a count-calls build would make it: a header entered from
/// inside its loop iterates its body (everything above the body closes, the body counts an
/// instance), any other edge closes up to the closest common ancestor and opens down from
/// it.
fn transition(
    plan: &FunctionPlan,
    header_of: &HashMap<usize, usize>,
    from: Option<usize>,
    to: usize,
) -> Transition {
    let tree = plan.tree();
    let nodes = &tree.nodes;
    let target = tree.block_region[to];
    let Some(from) = from else {
        let mut opens = path_up(nodes, target, Some(0));
        opens.reverse();
        return Transition {
            closes: Vec::new(),
            iteration: None,
            opens,
            target,
        };
    };
    let source = tree.block_region[from];
    if let Some(&k) = header_of.get(&to) {
        if plan.forest.contains(k, from) {
            let body = tree.loop_node[k] + 1;
            let closes = path_up(nodes, source, Some(body));
            let mut opens = path_up(nodes, target, Some(body));
            opens.reverse();
            return Transition {
                closes,
                iteration: Some(body),
                opens,
                target,
            };
        }
    }
    let common = common_ancestor(nodes, source, target);
    let closes = path_up(nodes, source, Some(common));
    let mut opens = path_up(nodes, target, Some(common));
    opens.reverse();
    Transition {
        closes,
        iteration: None,
        opens,
        target,
    }
}

/// Whether the edge `from -> to` can get a block of its own: a branch or switch edge, or an
/// invoke's normal one.
unsafe fn splittable(plan: &FunctionPlan, from: usize, to: usize) -> bool {
    let terminator = LLVMGetBasicBlockTerminator(plan.cfg.blocks[from]);
    if terminator.is_null() {
        return false;
    }
    match ir::opcode(terminator) {
        LLVMOpcode::LLVMBr | LLVMOpcode::LLVMSwitch => true,
        LLVMOpcode::LLVMInvoke => LLVMGetNormalDest(terminator) == plan.cfg.blocks[to],
        _ => false,
    }
}

/// The subtrees whose counts are kept in locals while they run, in which nothing reaches
/// the runtime or another function (no call that may run instrumented code, no resume
/// point, no return but the function's own): a loop or an inlined call with its
/// descendants, or the whole function (a leaf: no activation at all), at most
/// `MAX_PROMOTED` regions, the outermost such ones. Every edge into their blocks must be
/// able to carry code (so that no instance is counted by the runtime).
///
/// # Safety
/// `plan` must describe a live function that nothing was inserted into yet.
unsafe fn promoted_trees(plan: &FunctionPlan, predecessors: &[Vec<usize>]) -> Vec<PromotedTree> {
    let n = plan.cfg.blocks.len();
    let nodes = &plan.tree().nodes;
    let block_region = &plan.tree().block_region;
    let mut busy = vec![false; n];
    let mut returns = vec![false; n];
    let block_of = |inst: LLVMValueRef| {
        let parent = LLVMGetInstructionParent(inst);
        plan.cfg.blocks.iter().position(|&b| b == parent)
    };
    let cmpxchgs = (plan.accesses.iter()).filter_map(|access| match *access {
        Access::CmpXchg { inst, .. } => Some(inst),
        _ => None,
    });
    let resumes = plan.resume_points.iter().map(|&(inst, _)| inst);
    for block in cmpxchgs.chain(resumes).filter_map(block_of) {
        busy[block] = true;
    }
    for block in plan.exits.iter().filter_map(|&inst| block_of(inst)) {
        returns[block] = true;
    }
    let ends_plainly = |b: usize| {
        let terminator = LLVMGetBasicBlockTerminator(plan.cfg.blocks[b]);
        !terminator.is_null()
            && matches!(
                ir::opcode(terminator),
                LLVMOpcode::LLVMBr
                    | LLVMOpcode::LLVMSwitch
                    | LLVMOpcode::LLVMRet
                    | LLVMOpcode::LLVMUnreachable
            )
    };
    let quiet: Vec<bool> = (0..n)
        .map(|b| {
            let block = plan.cfg.blocks[b];
            plan.forest.reachable[b]
                && !busy[b]
                && ends_plainly(b)
                && ir::first_insertion_point(block).is_some()
                && !ir::is_landing_pad(block)
                && !ir::instructions(block)
                    .into_iter()
                    .any(|i| crate::segments::is_cut(i))
        })
        .collect();
    let mut size = vec![1usize; nodes.len()];
    for i in (1..nodes.len()).rev() {
        if let Some(parent) = nodes[i].parent {
            size[parent] += size[i];
        }
    }
    let mut node_blocks = vec![Vec::new(); nodes.len()];
    for b in (0..n).filter(|&b| plan.forest.reachable[b]) {
        node_blocks[block_region[b]].push(b);
    }
    let try_tree = |root: usize| -> Option<PromotedTree> {
        let whole_function = match nodes[root].kind {
            crate::region_tree::NodeKind::Loop(_) | crate::region_tree::NodeKind::Inlined(_) => {
                false
            }
            crate::region_tree::NodeKind::Function => true,
            crate::region_tree::NodeKind::LoopBody(_) => return None,
        };
        let len = size[root];
        if len > MAX_PROMOTED {
            return None;
        }
        let blocks: Vec<usize> = (root..root + len)
            .flat_map(|node| node_blocks[node].iter().copied())
            .collect();
        let fits = !blocks.is_empty()
            && blocks.iter().all(|&b| {
                quiet[b]
                    && (whole_function || !returns[b])
                    && predecessors[b].iter().all(|&p| {
                        let only = plan.cfg.successors[p].iter().all(|&s| s == b);
                        only || splittable(plan, p, b)
                    })
            });
        fits.then_some(PromotedTree { root, len })
    };
    let mut trees = Vec::new();
    let mut node = 0;
    while node < nodes.len() {
        match try_tree(node) {
            Some(tree) => {
                node += tree.len;
                trees.push(tree);
            }
            None => node += 1,
        }
    }
    trees
}

/// The most regions a promoted tree holds: its report at each exit costs a few
/// instructions per region.
const MAX_PROMOTED: usize = 8;

/// `t` with the regions of promoted trees (`tree_of`: each node's tree) counted in locals;
/// `left`: the tree the edge leaves, if any; `from_outside_function`: the function's start.
fn change(nodes: &[Node], tree_of: &[Option<usize>], t: Transition, left: Option<usize>) -> Change {
    let in_tree = |node: &usize| tree_of[*node].is_some();
    let mut counted: Vec<usize> = t.opens.iter().copied().filter(in_tree).collect();
    let mut iteration = t.iteration;
    if let Some(body) = t.iteration.filter(in_tree) {
        counted.push(body);
        iteration = None;
    }
    let mut target = t.target;
    while tree_of[target].is_some() {
        match nodes[target].parent {
            Some(parent) => target = parent,
            None => break,
        }
    }
    Change {
        records: Transition {
            closes: t.closes.into_iter().filter(|n| !in_tree(n)).collect(),
            iteration,
            opens: t.opens.into_iter().filter(|n| !in_tree(n)).collect(),
            target,
        },
        counted,
        flush: left,
    }
}

/// Each block's changes and where they go, with `trees` promoted: each tree node's tree,
/// the placements, and the trees whose exits lead into each block.
///
/// # Safety
/// `plan` must describe a live function that nothing was inserted into yet.
unsafe fn place(
    plan: &FunctionPlan,
    header_of: &HashMap<usize, usize>,
    predecessors: &[Vec<usize>],
    trees: &[PromotedTree],
) -> (Vec<Option<usize>>, Vec<(usize, Placement)>, Vec<Vec<usize>>) {
    let n = plan.cfg.blocks.len();
    let tree = plan.tree();
    let reachable = &plan.forest.reachable;
    let mut tree_of = vec![None; tree.nodes.len()];
    for (j, t) in trees.iter().enumerate() {
        tree_of[t.root..t.root + t.len]
            .iter_mut()
            .for_each(|slot| *slot = Some(j));
    }
    let owner = |b: usize| tree_of[tree.block_region[b]];
    let whole_function = trees.first().is_some_and(|t| t.root == 0);
    // Each block's changes, decided before anything changes.
    let mut placements: Vec<(usize, Placement)> = Vec::new();
    // The trees whose exits lead into each block.
    let mut trees_left_into = vec![Vec::new(); n];
    for b in (0..n).filter(|&b| reachable[b]) {
        if ir::is_landing_pad(plan.cfg.blocks[b])
            || ir::first_insertion_point(plan.cfg.blocks[b]).is_none()
        {
            continue;
        }
        let edges: Vec<(Option<usize>, Change)> = (predecessors[b].iter())
            .map(|&p| Some(p))
            .chain((b == 0).then_some(None))
            .map(|p| {
                let left = p.and_then(|p| owner(p)).filter(|&j| owner(b) != Some(j));
                let mut c = change(
                    &tree.nodes,
                    &tree_of,
                    transition(plan, &header_of, p, b),
                    left,
                );
                if p.is_none() && whole_function {
                    c.counted.insert(0, 0);
                }
                (p, c)
            })
            .collect();
        for (_, c) in &edges {
            if let Some(j) = c.flush {
                if !trees_left_into[b].contains(&j) {
                    trees_left_into[b].push(j);
                }
            }
        }
        let Some((_, first)) = edges.first() else {
            continue;
        };
        if edges.iter().all(|(_, c)| c == first) {
            if !first.is_empty() {
                placements.push((b, Placement::Start(first.clone())));
            }
            continue;
        }
        let mut on_edges = Vec::new();
        let mut dynamic = false;
        for (p, c) in edges {
            if c.is_empty() {
                continue;
            }
            let Some(p) = p else {
                dynamic = true;
                break;
            };
            let only = plan.cfg.successors[p].iter().all(|&s| s == b);
            if !only && !splittable(plan, p, b) {
                dynamic = true;
                break;
            }
            on_edges.push((p, !only, c));
        }
        placements.push((
            b,
            if dynamic {
                Placement::Dynamic
            } else {
                Placement::Edges(on_edges)
            },
        ));
    }
    (tree_of, placements, trees_left_into)
}

/// Count instrumentation of one function.
///
/// # Safety
/// `plan` must describe a live function of `module` that nothing was inserted into yet.
unsafe fn instrument_function(
    inline: &Inline,
    module: LLVMModuleRef,
    plan: &FunctionPlan,
    table: &RegionTable,
    builder: LLVMBuilderRef,
    data_layout: llvm_sys::target::LLVMTargetDataRef,
) {
    let n = plan.cfg.blocks.len();
    let tree = plan.tree();
    let reachable = &plan.forest.reachable;
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
    let owner = |b: usize| tree_of[tree.block_region[b]];
    let whole_function = trees.first().is_some_and(|t| t.root == 0);
    // Blocks made on edges, before anything is inserted.
    let mut edge_code: Vec<(LLVMValueRef, Change)> = Vec::new();
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
                        block = kage_split_critical_edge(block, plan.cfg.blocks[b]);
                    }
                    if block.is_null() {
                        made.clear();
                        start_code.push((b, None));
                        break;
                    }
                    made.push((LLVMGetBasicBlockTerminator(block), c));
                }
                edge_code.extend(made);
            }
        }
    }
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
    // The function's entry: its activation and region (a promoted function has neither).
    position(entry_at);
    let function = region_index(0);
    let (records, activation) = if whole_function {
        (None, None)
    } else {
        let (records, activation) = inline.enter(
            builder,
            table.module_global,
            table.region_ptr(function),
            function,
        );
        (Some(records), Some(activation))
    };
    let flushes: Vec<RuntimeFunction> = (trees.iter().enumerate())
        .map(|(j, t)| inline.define_flush(plan, t, j))
        .collect();
    let at = Emitter {
        inline,
        builder,
        records,
        activation,
        table,
        base: plan.slots.base,
        trees: &trees,
        locals: &locals,
        flushes: &flushes,
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
                for &j in &trees_left_into[*b] {
                    at.flush(j);
                }
                let lp = header_of
                    .get(b)
                    .map(|&k| table.region_ptr(region_index(tree.loop_node[k])));
                at.arrive(table.region_ptr(region_index(tree.block_region[*b])), lp);
            }
        }
    }
    for &(inst, block) in &plan.resume_points {
        position(inst);
        at.resume(table.region_ptr(region_index(tree.block_region[block])));
    }
    for segment in &segments {
        let (constant, dynamic) = SegmentCounts::of(&segment.accesses);
        let region = tree.block_region[segment.block];
        if !constant.is_empty() {
            position(segment.start);
            at.add(&constant, region, owner(segment.block));
        }
        for (inst, counts) in dynamic {
            position(inst);
            at.add(&counts, region, owner(segment.block));
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
    for (terminator, c) in &edge_code {
        position(*terminator);
        at.change(c);
    }
    for &(inst, block) in &exits {
        position(inst);
        if whole_function {
            at.flush(0);
        } else {
            at.exit(&path_up(&tree.nodes, tree.block_region[block], None));
        }
    }
}

/// A promoted tree's locals: per region, its instances, loads, stores, bytes read and bytes
/// written (`i64` allocas, zero outside the tree).
struct TreeLocals(Vec<[LLVMValueRef; 5]>);

/// Builds one function's inline code at the builder's position.
struct Emitter<'a> {
    inline: &'a Inline,
    builder: LLVMBuilderRef,
    /// The thread's records of the module's regions (from the function's entry; none in a
    /// promoted function, whose report looks them up).
    records: Option<LLVMValueRef>,
    /// The function's activation index (none in a promoted function).
    activation: Option<LLVMValueRef>,
    table: &'a RegionTable,
    /// The function's first table index (its tree node 0).
    base: u32,
    trees: &'a [PromotedTree],
    locals: &'a [TreeLocals],
    /// Each tree's report helper.
    flushes: &'a [RuntimeFunction],
}

impl Emitter<'_> {
    /// The record of tree node `node` in `records`.
    unsafe fn record_in(&self, records: LLVMValueRef, node: usize) -> LLVMValueRef {
        let offset = (self.base as u64 + node as u64) * (WORDS as u64 * 8);
        ir::byte_gep(
            self.builder,
            records,
            LLVMConstInt(self.inline.i64_type, offset, 0),
        )
    }

    /// The record of tree node `node` (not in a promoted function).
    unsafe fn record(&self, node: usize) -> LLVMValueRef {
        self.record_in(
            self.records.expect("records outside promoted functions"),
            node,
        )
    }

    unsafe fn activation(&self) -> LLVMValueRef {
        self.activation
            .expect("an activation outside promoted functions")
    }

    unsafe fn change(&self, c: &Change) {
        if let Some(j) = c.flush {
            self.flush(j);
        }
        let t = &c.records;
        for &node in &t.closes {
            self.inline
                .close
                .call(self.builder, &mut [self.record(node)]);
        }
        if let Some(body) = t.iteration {
            let one = LLVMConstInt(self.inline.i64_type, 1, 0);
            self.inline
                .add_word(self.builder, self.record(body), INSTANCES, one);
        }
        for &node in &t.opens {
            self.inline
                .open
                .call(self.builder, &mut [self.record(node)]);
        }
        if !t.closes.is_empty() || !t.opens.is_empty() {
            let entry = self.table.region_ptr(self.base + t.target as u32);
            self.inline
                .set_current
                .call(self.builder, &mut [self.activation(), entry]);
        }
        for &node in &c.counted {
            // A tree's root starts: the thread notes it, for a fatal signal's report.
            if self.trees.iter().any(|t| t.root == node) {
                let entry = self.table.region_ptr(self.base + node as u32);
                self.inline.set_running(self.builder, entry);
            }
            if let Some(local) = self.local(node) {
                self.inline.add_plain(
                    self.builder,
                    local[0],
                    LLVMConstInt(self.inline.i64_type, 1, 0),
                );
            }
        }
    }

    /// The locals of tree node `node`, if it is in a promoted tree.
    fn local(&self, node: usize) -> Option<&[LLVMValueRef; 5]> {
        let j = self
            .trees
            .iter()
            .position(|t| (t.root..t.root + t.len).contains(&node))?;
        self.locals[j].0.get(node - self.trees[j].root)
    }

    /// Tree `j`'s report (when it ran: an exit block may also be reached from outside it).
    unsafe fn flush(&self, j: usize) {
        let records = match self.records {
            Some(records) => records,
            None => self
                .inline
                .records
                .call(self.builder, &mut [self.table.module_global]),
        };
        let mut args = vec![self.record_in(records, self.trees[j].root)];
        args.extend(self.locals[j].0.iter().flatten().copied());
        self.flushes[j].call(self.builder, &mut args);
    }

    /// `__kage_count_arrive` (a promoted function has no activation, and no block that
    /// needs it: see [`place`]).
    unsafe fn arrive(&self, region: LLVMValueRef, lp: Option<LLVMValueRef>) {
        let Some(activation) = self.activation else {
            return;
        };
        let ptr_type = LLVMTypeOf(region);
        let lp = lp.unwrap_or_else(|| LLVMConstPointerNull(ptr_type));
        self.inline
            .arrive
            .call(self.builder, &mut [region, lp, activation]);
    }

    unsafe fn resume(&self, region: LLVMValueRef) {
        self.inline
            .resume
            .call(self.builder, &mut [region, self.activation()]);
    }

    /// A return: `open` (the block's region and those around it, innermost first) close,
    /// and the activation is popped.
    unsafe fn exit(&self, open: &[usize]) {
        self.inline
            .exit_check
            .call(self.builder, &mut [self.activation()]);
        for &node in open {
            self.inline
                .close
                .call(self.builder, &mut [self.record(node)]);
        }
        self.inline.pop.call(self.builder, &mut [self.activation()]);
    }

    /// `counts` added to the thread's totals and to `node`'s self counts, masked by the
    /// gate; in a promoted tree (`tree`), to the node's locals.
    unsafe fn add(&self, counts: &SegmentCounts, node: usize, tree: Option<usize>) {
        let values = counts.values(self.builder, self.inline.i64_type);
        if tree.is_some() {
            if let Some(local) = self.local(node) {
                for (k, value) in values.iter().enumerate() {
                    if let Some(value) = *value {
                        self.inline.add_plain(self.builder, local[1 + k], value);
                    }
                }
            }
            return;
        }
        self.add_values(values, node);
    }

    unsafe fn add_values(&self, values: [Option<LLVMValueRef>; 4], node: usize) {
        if values.iter().all(Option::is_none) {
            return;
        }
        let mask = self.inline.gate_mask(self.builder);
        let totals = self.inline.address(self.builder, self.inline.totals);
        let record = self.record(node);
        for (k, value) in values.iter().enumerate() {
            let Some(value) = *value else { continue };
            let masked = LLVMBuildAnd(self.builder, value, mask, c"".as_ptr());
            ir::add_relaxed(
                self.builder,
                self.inline.cell(self.builder, totals, k),
                masked,
            );
            self.inline.add_word(self.builder, record, SELF + k, masked);
        }
    }

    /// After a `cmpxchg` of `size` bytes: a load, and a store when it wrote.
    unsafe fn cmpxchg(&self, inst: LLVMValueRef, size: u64, node: usize) {
        let i64_type = self.inline.i64_type;
        let success = LLVMBuildExtractValue(self.builder, inst, 1, c"".as_ptr());
        let stored = LLVMBuildZExt(self.builder, success, i64_type, c"".as_ptr());
        let size_value = LLVMConstInt(i64_type, size, 0);
        let stored_bytes = LLVMBuildMul(self.builder, stored, size_value, c"".as_ptr());
        let values = [
            Some(LLVMConstInt(i64_type, 1, 0)),
            Some(stored),
            Some(size_value),
            Some(stored_bytes),
        ];
        self.add_values(values, node);
    }
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

impl SegmentCounts {
    /// The values to add to loads, stores, bytes read and bytes written, at the builder's
    /// position (where the run-time lengths are defined).
    ///
    /// # Safety
    /// `builder` must be positioned where `dynamic`'s lengths are defined.
    unsafe fn values(
        &self,
        builder: LLVMBuilderRef,
        i64_type: LLVMTypeRef,
    ) -> [Option<LLVMValueRef>; 4] {
        let mut values: [Option<LLVMValueRef>; 4] = [None; 4];
        for (k, &constant) in self.constant.iter().enumerate() {
            if constant != 0 {
                values[k] = Some(LLVMConstInt(i64_type, constant, 0));
            }
        }
        for &(len, reads) in &self.dynamic {
            let len = LLVMBuildIntCast2(builder, len, i64_type, 0, c"".as_ptr());
            let zero = LLVMConstInt(i64_type, 0, 0);
            let nonempty = LLVMBuildICmp(
                builder,
                LLVMIntPredicate::LLVMIntNE,
                len,
                zero,
                c"".as_ptr(),
            );
            let one = LLVMBuildZExt(builder, nonempty, i64_type, c"".as_ptr());
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
        values
    }
}

/// The runtime's count symbols and the inline helpers, declared and defined once per
/// module.
struct Inline {
    /// `__kage_count`.
    totals: LLVMValueRef,
    totals_type: LLVMTypeRef,
    /// `__kage_count_thread`.
    thread: LLVMValueRef,
    /// `__kage_count_running`.
    running: LLVMValueRef,
    epoch: LLVMValueRef,
    gate: LLVMValueRef,
    enter: RuntimeFunction,
    open: RuntimeFunction,
    close: RuntimeFunction,
    set_current: RuntimeFunction,
    exit_check: RuntimeFunction,
    pop: RuntimeFunction,
    arrive: RuntimeFunction,
    resume: RuntimeFunction,
    /// `ptr __kage_count_records(ptr module)`.
    records: RuntimeFunction,
    i32_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
    ptr_type: LLVMTypeRef,
    module: LLVMModuleRef,
}

/// One helper's blocks, built in order.
struct HelperBuilder {
    function: LLVMValueRef,
    builder: LLVMBuilderRef,
    context: llvm_sys::prelude::LLVMContextRef,
}

impl HelperBuilder {
    unsafe fn new(
        module: LLVMModuleRef,
        name: &str,
        returns: LLVMTypeRef,
        params: &mut [LLVMTypeRef],
    ) -> (Self, LLVMTypeRef) {
        let context = LLVMGetModuleContext(module);
        let ty = LLVMFunctionType(returns, params.as_mut_ptr(), params.len() as u32, 0);
        let function = ir::define_inline_helper(module, name, ty);
        let builder = LLVMCreateBuilderInContext(context);
        let helper = HelperBuilder {
            function,
            builder,
            context,
        };
        let entry = helper.block(c"entry");
        LLVMPositionBuilderAtEnd(builder, entry);
        (helper, ty)
    }

    unsafe fn block(&self, name: &std::ffi::CStr) -> LLVMBasicBlockRef {
        LLVMAppendBasicBlockInContext(self.context, self.function, name.as_ptr())
    }

    unsafe fn param(&self, i: u32) -> LLVMValueRef {
        LLVMGetParam(self.function, i)
    }

    unsafe fn finish(self, ty: LLVMTypeRef) -> RuntimeFunction {
        LLVMDisposeBuilder(self.builder);
        RuntimeFunction::helper(self.function, ty)
    }
}

impl Inline {
    /// Declares the runtime's symbols and defines the helpers in `module`.
    ///
    /// # Safety
    /// `module` must be a valid module.
    unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        let totals = ir::declare_runtime_global(module, &symbols::COUNT_TOTALS);
        let null = std::ptr::null_mut();
        let null_type = std::ptr::null_mut();
        let mut inline = Inline {
            totals,
            totals_type: LLVMGlobalGetValueType(totals),
            thread: ir::declare_runtime_global(module, &symbols::COUNT_THREAD),
            running: ir::declare_runtime_global(module, &symbols::COUNT_RUNNING),
            epoch: ir::declare_runtime_global(module, &symbols::COUNT_EPOCH),
            gate: ir::declare_runtime_global(module, &symbols::GATE),
            enter: RuntimeFunction::helper(null, null_type),
            open: RuntimeFunction::helper(null, null_type),
            close: RuntimeFunction::helper(null, null_type),
            set_current: RuntimeFunction::helper(null, null_type),
            exit_check: RuntimeFunction::helper(null, null_type),
            pop: RuntimeFunction::helper(null, null_type),
            records: RuntimeFunction::helper(null, null_type),
            arrive: RuntimeFunction::declare(module, &symbols::COUNT_ARRIVE),
            resume: RuntimeFunction::declare(module, &symbols::COUNT_RESUME),
            i32_type: LLVMInt32TypeInContext(context),
            i64_type: LLVMInt64TypeInContext(context),
            ptr_type: LLVMPointerTypeInContext(context, 0),
            module,
        };
        inline.enter = inline.define_enter();
        inline.open = inline.define_open();
        inline.close = inline.define_close();
        inline.set_current = inline.define_set_current();
        inline.exit_check = inline.define_exit_check();
        inline.pop = inline.define_pop();
        inline.records = inline.define_records();
        inline
    }

    /// `ptr __kage_count_records(ptr module)`: the thread's records of the module's regions
    /// (`__kage_count_prepare` without a frame when the inline checks fail).
    unsafe fn define_records(&self) -> RuntimeFunction {
        let mut params = [self.ptr_type];
        let (h, ty) = HelperBuilder::new(
            self.module,
            "__kage_count_records",
            self.ptr_type,
            &mut params,
        );
        let b = h.builder;
        let module = h.param(0);
        let (has_directory, fast, slow) =
            (h.block(c"directory"), h.block(c"fast"), h.block(c"slow"));
        let thread = self.address(b, self.thread);
        let directory = self.load(b, self.ptr_type, self.field(b, thread, RECORDS));
        let null = LLVMConstPointerNull(self.ptr_type);
        let ok = LLVMBuildICmp(
            b,
            LLVMIntPredicate::LLVMIntNE,
            directory,
            null,
            c"".as_ptr(),
        );
        ir::set_branch_weights(LLVMBuildCondBr(b, ok, has_directory, slow), 1 << 20, 1);
        LLVMPositionBuilderAtEnd(b, has_directory);
        let records = self.module_records(b, directory, module);
        let has = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, records, null, c"".as_ptr());
        let epoch = ir::load_relaxed(b, self.i64_type, self.epoch);
        let own = self.load(b, self.i64_type, self.field(b, thread, EPOCH));
        let same = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, epoch, own, c"".as_ptr());
        let ok = LLVMBuildAnd(b, has, same, c"".as_ptr());
        ir::set_branch_weights(LLVMBuildCondBr(b, ok, fast, slow), 1 << 20, 1);
        LLVMPositionBuilderAtEnd(b, fast);
        LLVMBuildRet(b, records);
        LLVMPositionBuilderAtEnd(b, slow);
        let prepare = RuntimeFunction::declare(self.module, &symbols::COUNT_PREPARE);
        let prepared = prepare.call(b, &mut [module, null]);
        LLVMBuildRet(b, prepared);
        h.finish(ty)
    }

    /// `directory[module->slot]`.
    unsafe fn module_records(
        &self,
        b: LLVMBuilderRef,
        directory: LLVMValueRef,
        module: LLVMValueRef,
    ) -> LLVMValueRef {
        let slot_field = ir::byte_gep(
            b,
            module,
            LLVMConstInt(self.i64_type, layout::MODULE_FIELDS[6] as u64, 0),
        );
        let slot = LLVMBuildLoad2(b, self.i32_type, slot_field, c"".as_ptr());
        LLVMSetAlignment(slot, 4);
        let slot = LLVMBuildZExt(b, slot, self.i64_type, c"".as_ptr());
        let entry_offset = LLVMBuildShl(b, slot, LLVMConstInt(self.i64_type, 3, 0), c"".as_ptr());
        self.load(b, self.ptr_type, ir::byte_gep(b, directory, entry_offset))
    }

    /// At the builder's position (the entry block's start): a promoted tree's locals, zero.
    unsafe fn tree_locals(&self, b: LLVMBuilderRef, len: usize) -> TreeLocals {
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        TreeLocals(
            (0..len)
                .map(|_| {
                    std::array::from_fn(|_| {
                        let local = LLVMBuildAlloca(b, self.i64_type, c"kage.count".as_ptr());
                        LLVMSetAlignment(local, 8);
                        LLVMSetAlignment(LLVMBuildStore(b, zero, local), 8);
                        local
                    })
                })
                .collect(),
        )
    }

    /// `__kage_count_running = root` (null: none).
    unsafe fn set_running(&self, b: LLVMBuilderRef, root: LLVMValueRef) {
        self.store(b, root, self.address(b, self.running));
    }

    /// `*local += value`, a plain load and store (mem2reg makes it a register).
    unsafe fn add_plain(&self, b: LLVMBuilderRef, local: LLVMValueRef, value: LLVMValueRef) {
        let old = LLVMBuildLoad2(b, self.i64_type, local, c"".as_ptr());
        LLVMSetAlignment(old, 8);
        let new = LLVMBuildAdd(b, old, value, c"".as_ptr());
        LLVMSetAlignment(LLVMBuildStore(b, new, local), 8);
    }

    /// Promoted tree `tree`'s report, `void __kage_count_flush(ptr root_record, ptr
    /// locals...)` (five locals per region: instances, loads, stores, bytes read, bytes
    /// written): when it ran (its root's instances are not 0), each region's instances and
    /// self counts go to its record, the tree's accesses to the thread's totals, each
    /// region's subtree's accesses to its inclusive counts unless it is open around the
    /// tree (recursion counts once); the locals are zeroed.
    unsafe fn define_flush(
        &self,
        plan: &FunctionPlan,
        tree: &PromotedTree,
        _index: usize,
    ) -> RuntimeFunction {
        let mut params = vec![self.ptr_type; 1 + tree.len * 5];
        let void = LLVMVoidTypeInContext(LLVMGetModuleContext(self.module));
        let (h, ty) = HelperBuilder::new(self.module, "__kage_count_flush", void, &mut params);
        let b = h.builder;
        let root_record = h.param(0);
        let local = |i: usize, w: usize| h.param(1 + (i * 5 + w) as u32);
        let (ran, done) = (h.block(c"ran"), h.block(c"done"));
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        // Whether or not the tree ran, none runs now (trees do not nest).
        self.set_running(b, LLVMConstPointerNull(self.ptr_type));
        let load = |at: LLVMValueRef| {
            let v = LLVMBuildLoad2(b, self.i64_type, at, c"".as_ptr());
            LLVMSetAlignment(v, 8);
            v
        };
        let root_instances = load(local(0, 0));
        let none = LLVMBuildICmp(
            b,
            LLVMIntPredicate::LLVMIntEQ,
            root_instances,
            zero,
            c"".as_ptr(),
        );
        LLVMBuildCondBr(b, none, done, ran);
        LLVMPositionBuilderAtEnd(b, ran);
        let mask = self.gate_mask(b);
        let own: Vec<[LLVMValueRef; 4]> = (0..tree.len)
            .map(|i| {
                std::array::from_fn(|k| LLVMBuildAnd(b, load(local(i, 1 + k)), mask, c"".as_ptr()))
            })
            .collect();
        // Subtree sums: children come after their parents (pre-order).
        let mut inclusive = own.clone();
        let nodes = &plan.tree().nodes;
        for i in (1..tree.len).rev() {
            if let Some(parent) = nodes[tree.root + i]
                .parent
                .and_then(|p| p.checked_sub(tree.root))
            {
                for k in 0..4 {
                    inclusive[parent][k] =
                        LLVMBuildAdd(b, inclusive[parent][k], inclusive[i][k], c"".as_ptr());
                }
            }
        }
        for i in 0..tree.len {
            let record = ir::byte_gep(
                b,
                root_record,
                LLVMConstInt(self.i64_type, (i * WORDS * 8) as u64, 0),
            );
            self.add_word(b, record, INSTANCES, load(local(i, 0)));
            let depth = self.load(
                b,
                self.i64_type,
                ir::byte_gep(b, record, LLVMConstInt(self.i64_type, DEPTH as u64 * 8, 0)),
            );
            let closed = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, depth, zero, c"".as_ptr());
            let closed = LLVMBuildSExt(b, closed, self.i64_type, c"".as_ptr());
            for k in 0..4 {
                self.add_word(b, record, SELF + k, own[i][k]);
                let value = LLVMBuildAnd(b, inclusive[i][k], closed, c"".as_ptr());
                self.add_word(b, record, INCLUSIVE + k, value);
            }
        }
        let totals = self.address(b, self.totals);
        for k in 0..4 {
            ir::add_relaxed(b, self.cell(b, totals, k), inclusive[0][k]);
        }
        for i in 0..tree.len {
            for w in 0..5 {
                LLVMSetAlignment(LLVMBuildStore(b, zero, local(i, w)), 8);
            }
        }
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// `llvm.threadlocal.address(global)`.
    unsafe fn address(&self, builder: LLVMBuilderRef, global: LLVMValueRef) -> LLVMValueRef {
        ir::thread_local_address(self.module, builder, global)
    }

    /// A field of `__kage_count_thread` (at `offset`), relaxed.
    unsafe fn field(
        &self,
        builder: LLVMBuilderRef,
        thread: LLVMValueRef,
        offset: usize,
    ) -> LLVMValueRef {
        ir::byte_gep(
            builder,
            thread,
            LLVMConstInt(self.i64_type, offset as u64, 0),
        )
    }

    unsafe fn load(
        &self,
        builder: LLVMBuilderRef,
        ty: LLVMTypeRef,
        at: LLVMValueRef,
    ) -> LLVMValueRef {
        let value = ir::load_relaxed(builder, ty, at);
        if ty == self.i32_type {
            LLVMSetAlignment(value, 4);
        }
        value
    }

    unsafe fn store(&self, builder: LLVMBuilderRef, value: LLVMValueRef, at: LLVMValueRef) {
        let store = LLVMBuildStore(builder, value, at);
        LLVMSetOrdering(store, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
        LLVMSetAlignment(
            store,
            if LLVMTypeOf(value) == self.i32_type {
                4
            } else {
                8
            },
        );
    }

    /// Word `word` of the record at `record` += `value` (relaxed load and store: only this
    /// thread writes it).
    unsafe fn add_word(
        &self,
        builder: LLVMBuilderRef,
        record: LLVMValueRef,
        word: usize,
        value: LLVMValueRef,
    ) {
        let cell = ir::byte_gep(
            builder,
            record,
            LLVMConstInt(self.i64_type, word as u64 * 8, 0),
        );
        ir::add_relaxed(builder, cell, value);
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

    /// Cell `k` of `__kage_count` at `base`.
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

    /// At a function's entry: `{records, activation} = enter(module, function, frame,
    /// offset of the function's record)`.
    unsafe fn enter(
        &self,
        builder: LLVMBuilderRef,
        module: LLVMValueRef,
        function: LLVMValueRef,
        index: u32,
    ) -> (LLVMValueRef, LLVMValueRef) {
        let frame_type = LLVMFunctionType(self.ptr_type, std::ptr::null_mut(), 0, 0);
        let name = c"llvm.addressofreturnaddress.p0";
        let mut intrinsic = LLVMGetNamedFunction(self.module, name.as_ptr());
        if intrinsic.is_null() {
            intrinsic = LLVMAddFunction(self.module, name.as_ptr(), frame_type);
        }
        let frame = LLVMBuildCall2(
            builder,
            frame_type,
            intrinsic,
            std::ptr::null_mut(),
            0,
            c"".as_ptr(),
        );
        let offset = LLVMConstInt(self.i64_type, index as u64 * WORDS as u64 * 8, 0);
        let pair = self
            .enter
            .call(builder, &mut [module, function, frame, offset]);
        let records = LLVMBuildExtractValue(builder, pair, 0, c"kage.records".as_ptr());
        let activation = LLVMBuildExtractValue(builder, pair, 1, c"kage.activation".as_ptr());
        (records, activation)
    }

    /// `{ptr, i32} __kage_count_enter(ptr module, ptr function, ptr frame, i64 offset)`:
    /// the thread's records of the module (`__kage_count_prepare` when the inline checks
    /// fail), the function's activation pushed and its record (at `offset`) opened.
    unsafe fn define_enter(&self) -> RuntimeFunction {
        let mut fields = [self.ptr_type, self.i32_type];
        let pair_type =
            LLVMStructTypeInContext(LLVMGetModuleContext(self.module), fields.as_mut_ptr(), 2, 0);
        let mut params = [self.ptr_type, self.ptr_type, self.ptr_type, self.i64_type];
        let (h, ty) = HelperBuilder::new(self.module, "__kage_count_enter", pair_type, &mut params);
        let b = h.builder;
        let (module, function, frame, offset) = (h.param(0), h.param(1), h.param(2), h.param(3));
        let (has_directory, has_records, no_activation, check_frame, slow, join) = (
            h.block(c"directory"),
            h.block(c"records"),
            h.block(c"first"),
            h.block(c"frame"),
            h.block(c"slow"),
            h.block(c"join"),
        );
        let fast = no_activation;
        let thread = self.address(b, self.thread);
        let directory = self.load(b, self.ptr_type, self.field(b, thread, RECORDS));
        let null = LLVMConstPointerNull(self.ptr_type);
        let ok = LLVMBuildICmp(
            b,
            LLVMIntPredicate::LLVMIntNE,
            directory,
            null,
            c"".as_ptr(),
        );
        ir::set_branch_weights(LLVMBuildCondBr(b, ok, has_directory, slow), 1 << 20, 1);
        // The module's records, the epoch and room for an activation.
        LLVMPositionBuilderAtEnd(b, has_directory);
        let records = self.module_records(b, directory, module);
        let has = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, records, null, c"".as_ptr());
        let epoch = ir::load_relaxed(b, self.i64_type, self.epoch);
        let own = self.load(b, self.i64_type, self.field(b, thread, EPOCH));
        let same = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, epoch, own, c"".as_ptr());
        let top = self.load(b, self.i32_type, self.field(b, thread, TOP));
        let capacity = self.load(b, self.i32_type, self.field(b, thread, CAPACITY));
        let room = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntULT, top, capacity, c"".as_ptr());
        let ok = LLVMBuildAnd(
            b,
            LLVMBuildAnd(b, has, same, c"".as_ptr()),
            room,
            c"".as_ptr(),
        );
        ir::set_branch_weights(LLVMBuildCondBr(b, ok, has_records, slow), 1 << 20, 1);
        // The activation below must be a live caller: its frame above this one's.
        LLVMPositionBuilderAtEnd(b, has_records);
        let zero32 = LLVMConstInt(self.i32_type, 0, 0);
        let first = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, top, zero32, c"".as_ptr());
        LLVMBuildCondBr(b, first, fast, check_frame);
        LLVMPositionBuilderAtEnd(b, check_frame);
        let activations = self.load(b, self.ptr_type, self.field(b, thread, ACTIVATIONS));
        let below = LLVMBuildSub(
            b,
            LLVMBuildZExt(b, top, self.i64_type, c"".as_ptr()),
            LLVMConstInt(self.i64_type, 1, 0),
            c"".as_ptr(),
        );
        let below_offset = LLVMBuildAdd(
            b,
            LLVMBuildMul(
                b,
                below,
                LLVMConstInt(self.i64_type, ACTIVATION_SIZE as u64, 0),
                c"".as_ptr(),
            ),
            LLVMConstInt(self.i64_type, FRAME as u64, 0),
            c"".as_ptr(),
        );
        let caller_frame = self.load(b, self.i64_type, ir::byte_gep(b, activations, below_offset));
        let own_frame = LLVMBuildPtrToInt(b, frame, self.i64_type, c"".as_ptr());
        let live = LLVMBuildICmp(
            b,
            LLVMIntPredicate::LLVMIntUGT,
            caller_frame,
            own_frame,
            c"".as_ptr(),
        );
        ir::set_branch_weights(LLVMBuildCondBr(b, live, fast, slow), 1 << 20, 1);
        LLVMPositionBuilderAtEnd(b, fast);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, slow);
        let prepare = RuntimeFunction::declare(self.module, &symbols::COUNT_PREPARE);
        let prepared = prepare.call(b, &mut [module, frame]);
        LLVMBuildBr(b, join);
        // Push the activation: written, counted, written again (a signal handler running
        // between may have used the slot).
        LLVMPositionBuilderAtEnd(b, join);
        let records = {
            let phi = LLVMBuildPhi(b, self.ptr_type, c"".as_ptr());
            let mut values = [records, prepared];
            let mut blocks = [fast, slow];
            LLVMAddIncoming(phi, values.as_mut_ptr(), blocks.as_mut_ptr(), 2);
            phi
        };
        let top = self.load(b, self.i32_type, self.field(b, thread, TOP));
        let activations = self.load(b, self.ptr_type, self.field(b, thread, ACTIVATIONS));
        let at = LLVMBuildMul(
            b,
            LLVMBuildZExt(b, top, self.i64_type, c"".as_ptr()),
            LLVMConstInt(self.i64_type, ACTIVATION_SIZE as u64, 0),
            c"".as_ptr(),
        );
        let activation = ir::byte_gep(b, activations, at);
        let frame_field = ir::byte_gep(b, activation, LLVMConstInt(self.i64_type, FRAME as u64, 0));
        let own_frame = LLVMBuildPtrToInt(b, frame, self.i64_type, c"".as_ptr());
        self.store(b, function, activation);
        self.store(b, own_frame, frame_field);
        let next = LLVMBuildAdd(b, top, LLVMConstInt(self.i32_type, 1, 0), c"".as_ptr());
        self.store(b, next, self.field(b, thread, TOP));
        self.store(b, function, activation);
        self.store(b, own_frame, frame_field);
        self.open_at(b, ir::byte_gep(b, records, offset));
        let undef = LLVMGetUndef(pair_type);
        let pair = LLVMBuildInsertValue(b, undef, records, 0, c"".as_ptr());
        let pair = LLVMBuildInsertValue(b, pair, top, 1, c"".as_ptr());
        LLVMBuildRet(b, pair);
        h.finish(ty)
    }

    /// Opens an instance of the record at `record`: instances + 1, open instances + 1, and
    /// the first open one subtracts the totals from the inclusive counts. Ends in a new
    /// block of the builder's function.
    unsafe fn open_at(&self, b: LLVMBuilderRef, record: LLVMValueRef) {
        let one = LLVMConstInt(self.i64_type, 1, 0);
        self.add_word(b, record, INSTANCES, one);
        let depth_field = ir::byte_gep(b, record, LLVMConstInt(self.i64_type, DEPTH as u64 * 8, 0));
        let depth = self.load(b, self.i64_type, depth_field);
        self.store(b, LLVMBuildAdd(b, depth, one, c"".as_ptr()), depth_field);
        let function = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
        let context = LLVMGetModuleContext(self.module);
        let outermost = LLVMAppendBasicBlockInContext(context, function, c"outermost".as_ptr());
        let done = LLVMAppendBasicBlockInContext(context, function, c"opened".as_ptr());
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let first = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, depth, zero, c"".as_ptr());
        LLVMBuildCondBr(b, first, outermost, done);
        LLVMPositionBuilderAtEnd(b, outermost);
        let totals = self.address(b, self.totals);
        for k in 0..4 {
            let now = ir::load_relaxed(b, self.i64_type, self.cell(b, totals, k));
            self.add_word(b, record, INCLUSIVE + k, LLVMBuildNeg(b, now, c"".as_ptr()));
        }
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
    }

    /// `void __kage_count_open(ptr record)`.
    unsafe fn define_open(&self) -> RuntimeFunction {
        let mut params = [self.ptr_type];
        let void = LLVMVoidTypeInContext(LLVMGetModuleContext(self.module));
        let (h, ty) = HelperBuilder::new(self.module, "__kage_count_open", void, &mut params);
        self.open_at(h.builder, h.param(0));
        LLVMBuildRetVoid(h.builder);
        h.finish(ty)
    }

    /// `void __kage_count_close(ptr record)`: open instances - 1 (none open: nothing), and
    /// the last one adds the totals to the inclusive counts.
    unsafe fn define_close(&self) -> RuntimeFunction {
        let mut params = [self.ptr_type];
        let void = LLVMVoidTypeInContext(LLVMGetModuleContext(self.module));
        let (h, ty) = HelperBuilder::new(self.module, "__kage_count_close", void, &mut params);
        let b = h.builder;
        let record = h.param(0);
        let (open, last, done) = (h.block(c"open"), h.block(c"last"), h.block(c"done"));
        let depth_field = ir::byte_gep(b, record, LLVMConstInt(self.i64_type, DEPTH as u64 * 8, 0));
        let depth = self.load(b, self.i64_type, depth_field);
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let one = LLVMConstInt(self.i64_type, 1, 0);
        let none = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, depth, zero, c"".as_ptr());
        ir::set_branch_weights(LLVMBuildCondBr(b, none, done, open), 1, 1 << 20);
        LLVMPositionBuilderAtEnd(b, open);
        self.store(b, LLVMBuildSub(b, depth, one, c"".as_ptr()), depth_field);
        let outermost = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, depth, one, c"".as_ptr());
        LLVMBuildCondBr(b, outermost, last, done);
        LLVMPositionBuilderAtEnd(b, last);
        let totals = self.address(b, self.totals);
        for k in 0..4 {
            let now = ir::load_relaxed(b, self.i64_type, self.cell(b, totals, k));
            self.add_word(b, record, INCLUSIVE + k, now);
        }
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// The address of activation `index`'s first field.
    unsafe fn activation(&self, b: LLVMBuilderRef, index: LLVMValueRef) -> LLVMValueRef {
        let thread = self.address(b, self.thread);
        let activations = self.load(b, self.ptr_type, self.field(b, thread, ACTIVATIONS));
        let at = LLVMBuildMul(
            b,
            LLVMBuildZExt(b, index, self.i64_type, c"".as_ptr()),
            LLVMConstInt(self.i64_type, ACTIVATION_SIZE as u64, 0),
            c"".as_ptr(),
        );
        ir::byte_gep(b, activations, at)
    }

    /// `void __kage_count_set_current(i32 activation, ptr region)`: the activation's
    /// innermost open region.
    unsafe fn define_set_current(&self) -> RuntimeFunction {
        let mut params = [self.i32_type, self.ptr_type];
        let void = LLVMVoidTypeInContext(LLVMGetModuleContext(self.module));
        let (h, ty) =
            HelperBuilder::new(self.module, "__kage_count_set_current", void, &mut params);
        let b = h.builder;
        let at = self.activation(b, h.param(0));
        self.store(b, h.param(1), at);
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// `void __kage_count_exit_check(i32 activation)`: before a return, activations left
    /// above this one are closed (`__kage_count_unwind`).
    unsafe fn define_exit_check(&self) -> RuntimeFunction {
        let mut params = [self.i32_type];
        let void = LLVMVoidTypeInContext(LLVMGetModuleContext(self.module));
        let (h, ty) = HelperBuilder::new(self.module, "__kage_count_exit_check", void, &mut params);
        let b = h.builder;
        let (slow, done) = (h.block(c"slow"), h.block(c"done"));
        let index = h.param(0);
        let thread = self.address(b, self.thread);
        let top = self.load(b, self.i32_type, self.field(b, thread, TOP));
        let expected = LLVMBuildAdd(b, index, LLVMConstInt(self.i32_type, 1, 0), c"".as_ptr());
        let same = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, top, expected, c"".as_ptr());
        ir::set_branch_weights(LLVMBuildCondBr(b, same, done, slow), 1 << 20, 1);
        LLVMPositionBuilderAtEnd(b, slow);
        let unwind = RuntimeFunction::declare(self.module, &symbols::COUNT_UNWIND);
        unwind.call(b, &mut [index]);
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// `void __kage_count_pop(i32 activation)`: the activation ends.
    unsafe fn define_pop(&self) -> RuntimeFunction {
        let mut params = [self.i32_type];
        let void = LLVMVoidTypeInContext(LLVMGetModuleContext(self.module));
        let (h, ty) = HelperBuilder::new(self.module, "__kage_count_pop", void, &mut params);
        let b = h.builder;
        let thread = self.address(b, self.thread);
        self.store(b, h.param(0), self.field(b, thread, TOP));
        LLVMBuildRetVoid(b);
        h.finish(ty)
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
