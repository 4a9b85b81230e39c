//! Where a count build changes a function's regions: what each edge opens, closes and
//! iterates ([`Transition`]), the subtrees kept in locals ([`promoted_trees`]), and where
//! each block's changes go ([`place`]).

use std::collections::HashMap;

use llvm_sys::core::*;
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::LLVMOpcode;

use crate::access::Access;
use crate::ir;
use crate::plan::FunctionPlan;
use crate::region_tree::{Node, NodeKind};

/// What changes on an edge: the regions closed (innermost first), an iteration of a loop
/// body that stays open, the regions opened (outermost first), and the block's region, the
/// activation's innermost one after it (tree nodes).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(super) struct Transition {
    pub(super) closes: Vec<usize>,
    pub(super) iteration: Option<usize>,
    pub(super) opens: Vec<usize>,
    pub(super) target: usize,
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
pub(super) struct Change {
    pub(super) records: Transition,
    /// Tree nodes whose local instances grow (entered, or a new iteration of a body).
    pub(super) counted: Vec<usize>,
    /// The tree (index) left on this edge.
    pub(super) flush: Option<usize>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.counted.is_empty() && self.flush.is_none()
    }
}

/// A subtree of the function's regions whose instances and counts are kept in locals
/// (registers, after mem2reg) while it runs and added to the records when it is left
/// ([`promoted_trees`]).
pub(super) struct PromotedTree {
    /// Its root's tree node; the tree is the nodes `root..root + len` (pre-order).
    pub(super) root: usize,
    pub(super) len: usize,
}

/// Where a block's transitions go.
pub(super) enum Placement {
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
pub(super) fn path_up(nodes: &[Node], from: usize, stop: Option<usize>) -> Vec<usize> {
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
pub(super) fn common_ancestor(nodes: &[Node], a: usize, b: usize) -> usize {
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
pub(super) fn transition(
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
pub(super) unsafe fn splittable(plan: &FunctionPlan, from: usize, to: usize) -> bool {
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
pub(super) unsafe fn promoted_trees(
    plan: &FunctionPlan,
    predecessors: &[Vec<usize>],
) -> Vec<PromotedTree> {
    let n = plan.cfg.blocks.len();
    let nodes = &plan.tree().nodes;
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
    let size = subtree_sizes(nodes);
    let node_blocks = blocks_by_region(plan);
    let try_tree = |root: usize| -> Option<PromotedTree> {
        let whole_function = match nodes[root].kind {
            NodeKind::Loop(_) | NodeKind::Inlined(_) => false,
            NodeKind::Function => true,
            NodeKind::LoopBody(_) => return None,
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

/// Each region's number of regions in its subtree, itself included (the nodes are in
/// pre-order: a subtree is the nodes `i..i + size[i]`).
pub(super) fn subtree_sizes(nodes: &[Node]) -> Vec<usize> {
    let mut size = vec![1usize; nodes.len()];
    for i in (1..nodes.len()).rev() {
        if let Some(parent) = nodes[i].parent {
            size[parent] += size[i];
        }
    }
    size
}

/// Each region's reachable blocks.
pub(super) fn blocks_by_region(plan: &FunctionPlan) -> Vec<Vec<usize>> {
    let tree = plan.tree();
    let mut node_blocks = vec![Vec::new(); tree.nodes.len()];
    for b in (0..plan.cfg.blocks.len()).filter(|&b| plan.forest.reachable[b]) {
        node_blocks[tree.block_region[b]].push(b);
    }
    node_blocks
}

/// The most regions a promoted tree holds: its locals stay live while it runs (more spill
/// to the stack), and its report at each exit checks each child of a region that ran.
/// Measured: 64 gives zstd 0.6% more instructions than 16.
pub(super) const MAX_PROMOTED: usize = 16;

/// `t` with the regions of promoted trees (`tree_of`: each node's tree) counted in locals;
/// `left`: the tree the edge leaves, if any; `from_outside_function`: the function's start.
pub(super) fn change(
    nodes: &[Node],
    tree_of: &[Option<usize>],
    t: Transition,
    left: Option<usize>,
) -> Change {
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
pub(super) unsafe fn place(
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
