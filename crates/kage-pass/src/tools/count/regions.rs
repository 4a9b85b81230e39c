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
    /// The tree (index) left on this edge: it reports here, unless it waits.
    pub(super) flush: Option<usize>,
    /// The waiting trees that report here, before the records change ([`delay_reports`]).
    pub(super) reports: Vec<usize>,
}

impl Change {
    fn is_empty(&self) -> bool {
        self.records.is_empty()
            && self.counted.is_empty()
            && self.flush.is_none()
            && self.reports.is_empty()
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
    let node_blocks = plan.blocks_by_region();
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

/// The most regions a promoted tree holds: its locals stay live while it runs (more spill
/// to the stack), and its report at each exit checks each child of a region that ran.
/// Since inlined calls are regions, a function's inner loops hold many small ones, and a
/// small limit leaves the loops around them counted in records, with a report per
/// instance of each small tree inside. Measured (`--medium`, cachegrind, bench/RESULTS-count.md):
/// zstd 747.7 million instructions at 16, 667.6 at 64, 659.6 at 256, 658.9 with no limit
/// (its block compressors are leaf functions of 100 to 600 regions); SQLite, Lua and bzip2
/// within 0.2% of 16 either way. The limit keeps a giant function's report helper bounded.
pub(super) const MAX_PROMOTED: usize = 256;

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
        reports: Vec::new(),
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

/// Which waiting trees must report where a function's regions change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Reporting {
    /// All: a region counted in records opens or closes (its record takes or reads the
    /// thread's totals), or the runtime changes the regions.
    All,
    /// Those in deferred regions left here, unopened or not (their locals, which the trees
    /// directly under them report to, are reported then).
    Trees(Vec<usize>),
}

/// What decides when the trees of a function report ([`delay_reports`]), as plain data: per
/// block (reachable ones; others are never reached from them).
pub(super) struct ReportFlow<'a> {
    pub(super) predecessors: &'a [Vec<usize>],
    /// The promoted tree each block is in, if any.
    pub(super) tree_of_block: &'a [Option<usize>],
    pub(super) trees: usize,
    /// Whether a tree may wait in the block's function: not the whole function (its report
    /// is at its returns).
    pub(super) may_wait: &'a [bool],
    /// Per block whose start changes the regions on every way in: who reports there.
    pub(super) at_start: &'a [Option<Reporting>],
    /// Per edge `(from, to)` whose own change changes the regions: who reports there.
    pub(super) on_edges: &'a HashMap<(usize, usize), Reporting>,
    /// Whether the block calls (a call that may run instrumented code or the runtime) or
    /// returns.
    pub(super) leaves: &'a [bool],
}

/// Where the trees that wait report ([`delay_reports`]).
pub(super) struct Reports {
    /// Per tree: whether it waits rather than reporting at each exit.
    pub(super) waits: Vec<bool>,
    /// Per block whose start changes the regions: the waiting trees reported first.
    pub(super) at_start: Vec<Vec<usize>>,
    /// Per edge whose change changes the regions: the waiting trees reported first.
    pub(super) on_edge: HashMap<(usize, usize), Vec<usize>>,
    /// Per block that calls or returns: the waiting trees reported before its first call
    /// (or its return).
    pub(super) before_leaving: Vec<Vec<usize>>,
}

/// The most places a waiting tree may report at: each is a copy of its report's code.
/// Measured (`--medium`, bench/RESULTS-count.md): 4 gives zstd as few instructions as 8
/// (its sequence decoder's tree reports at 4) with 4% less code; bzip2's code grows by 22%
/// at 4, 42% at 8, 8% at 3.
pub(super) const MAX_WAITING_REPORTS: usize = 4;

/// A set of trees, one bit each.
#[derive(Clone, PartialEq, Eq)]
struct TreeSet(Vec<u64>);

impl TreeSet {
    fn new(trees: usize) -> Self {
        TreeSet(vec![0; trees.div_ceil(64)])
    }

    fn contains(&self, j: usize) -> bool {
        self.0[j / 64] >> (j % 64) & 1 == 1
    }

    fn insert(&mut self, j: usize) {
        self.0[j / 64] |= 1 << (j % 64);
    }

    fn union(&mut self, other: &TreeSet) {
        self.0.iter_mut().zip(&other.0).for_each(|(a, b)| *a |= b);
    }

    /// The members `reporting` reports (all of them, or those it names).
    fn reported(&self, reporting: &Reporting) -> Vec<usize> {
        match reporting {
            Reporting::All => (0..self.0.len() * 64)
                .filter(|&j| self.contains(j))
                .collect(),
            Reporting::Trees(list) => list.iter().copied().filter(|&j| self.contains(j)).collect(),
        }
    }

    /// Without the members `reporting` reports.
    fn after(&self, reporting: Option<&Reporting>) -> TreeSet {
        let mut set = self.clone();
        match reporting {
            None => {}
            Some(Reporting::All) => set.0.iter_mut().for_each(|w| *w = 0),
            Some(Reporting::Trees(list)) => {
                list.iter().for_each(|&j| set.0[j / 64] &= !(1 << (j % 64)))
            }
        }
        set
    }
}

/// Which trees wait to report, and where they report then.
///
/// A tree's report at each exit adds its locals to the records and to the thread's totals
/// (or to the locals of the deferred function or region directly around it). It need not
/// be made at once: only before something reads what it adds, that is before a region
/// counted in records opens or closes (its record takes or reads the totals), before the
/// deferred region it is in is left, before the runtime changes the regions, before a call
/// and before a return. A loop body counted in records (a rare call inside it) that runs
/// inlined helpers at each iteration then reports them once per call or loop exit, not once
/// per iteration: the iterations only add to the locals. A tree waits when an instance can
/// start while its locals are still waiting (else waiting would save nothing) and it would
/// report at no more than [`MAX_WAITING_REPORTS`] places.
pub(super) fn delay_reports(flow: &ReportFlow) -> Reports {
    let n = flow.predecessors.len();
    let empty = TreeSet::new(flow.trees);
    // Per block: the trees whose locals may wait at its start (after its start's change)
    // and at its end.
    let mut at_entry = vec![empty.clone(); n];
    let mut at_exit = vec![empty.clone(); n];
    let edge_reporting = |p: usize, b: usize| match &flow.at_start[b] {
        Some(reporting) => Some(reporting),
        None => flow.on_edges.get(&(p, b)),
    };
    let mut changed = true;
    while changed {
        changed = false;
        for b in 0..n {
            let mut entry = empty.clone();
            for &p in &flow.predecessors[b] {
                entry.union(&at_exit[p].after(edge_reporting(p, b)));
            }
            let mut exit = if flow.leaves[b] {
                empty.clone()
            } else {
                entry.clone()
            };
            if let Some(j) = flow.tree_of_block[b].filter(|&j| flow.may_wait[j]) {
                exit.insert(j);
            }
            if entry != at_entry[b] || exit != at_exit[b] {
                at_entry[b] = entry;
                at_exit[b] = exit;
                changed = true;
            }
        }
    }
    // Where each tree would report if it waited, and whether an instance can start while
    // its locals wait.
    let mut at_start: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut on_edge: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    let mut before_leaving: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut reentered = vec![false; flow.trees];
    for b in 0..n {
        if let Some(reporting) = &flow.at_start[b] {
            let mut waiting = empty.clone();
            flow.predecessors[b]
                .iter()
                .for_each(|&p| waiting.union(&at_exit[p]));
            at_start[b] = waiting.reported(reporting);
        }
        if flow.leaves[b] {
            before_leaving[b] = at_entry[b].reported(&Reporting::All);
        }
        if let Some(j) = flow.tree_of_block[b] {
            let from_outside =
                (flow.predecessors[b].iter()).filter(|&&p| flow.tree_of_block[p] != Some(j));
            for &p in from_outside {
                reentered[j] |= at_exit[p].after(edge_reporting(p, b)).contains(j);
            }
        }
    }
    for (&(p, b), reporting) in flow.on_edges {
        if flow.at_start[b].is_none() {
            on_edge.insert((p, b), at_exit[p].reported(reporting));
        }
    }
    let mut sites = vec![0usize; flow.trees];
    for list in (at_start.iter())
        .chain(on_edge.values())
        .chain(before_leaving.iter())
    {
        list.iter().for_each(|&j| sites[j] += 1);
    }
    let waits: Vec<bool> = (0..flow.trees)
        .map(|j| reentered[j] && sites[j] <= MAX_WAITING_REPORTS)
        .collect();
    let keep = |list: &mut Vec<usize>| list.retain(|&j| waits[j]);
    at_start.iter_mut().for_each(keep);
    on_edge.values_mut().for_each(keep);
    before_leaving.iter_mut().for_each(keep);
    on_edge.retain(|_, list| !list.is_empty());
    Reports {
        waits,
        at_start,
        on_edge,
        before_leaving,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function's blocks as [`ReportFlow`] sees them: successors, the tree of each block,
    /// the blocks whose start changes the regions, the edges that do, the blocks that call
    /// or return.
    struct Cfg {
        successors: Vec<Vec<usize>>,
        tree_of_block: Vec<Option<usize>>,
        at_start: Vec<Option<Reporting>>,
        on_edges: HashMap<(usize, usize), Reporting>,
        leaves: Vec<bool>,
    }

    impl Cfg {
        fn new(successors: Vec<Vec<usize>>) -> Self {
            let n = successors.len();
            Cfg {
                successors,
                tree_of_block: vec![None; n],
                at_start: vec![None; n],
                on_edges: HashMap::new(),
                leaves: vec![false; n],
            }
        }

        fn reports(&self, trees: usize) -> Reports {
            let n = self.successors.len();
            let mut predecessors = vec![Vec::new(); n];
            for (p, succs) in self.successors.iter().enumerate() {
                succs.iter().for_each(|&s| predecessors[s].push(p));
            }
            delay_reports(&ReportFlow {
                predecessors: &predecessors,
                tree_of_block: &self.tree_of_block,
                trees,
                may_wait: &vec![true; trees],
                at_start: &self.at_start,
                on_edges: &self.on_edges,
                leaves: &self.leaves,
            })
        }
    }

    /// `0 -> 1 (header) -> 2 (tree 0) -> 3 (latch) -> 1`, `3 -> 4 (a call) -> 1`, and the
    /// loop's exit `1 -> 5`, which closes its record and returns.
    fn loop_with_rare_call() -> Cfg {
        let mut cfg = Cfg::new(vec![
            vec![1],
            vec![2, 5],
            vec![3],
            vec![1, 4],
            vec![1],
            vec![],
        ]);
        cfg.tree_of_block[2] = Some(0);
        cfg.leaves[4] = true;
        cfg.leaves[5] = true;
        cfg.at_start[5] = Some(Reporting::All);
        cfg
    }

    #[test]
    fn a_tree_run_at_each_iteration_reports_at_the_call_and_the_loops_exit() {
        let reports = loop_with_rare_call().reports(1);
        assert_eq!(reports.waits, [true]);
        assert_eq!(reports.before_leaving[4], [0]);
        assert_eq!(reports.at_start[5], [0]);
        // Its locals were reported at the start of the exit block: none wait at the return.
        assert!(reports.before_leaving[5].is_empty());
        assert!(reports.on_edge.is_empty());
        let elsewhere = (0..4).all(|b| reports.at_start[b].is_empty());
        assert!(elsewhere && (0..4).all(|b| reports.before_leaving[b].is_empty()));
    }

    #[test]
    fn a_tree_not_run_again_before_a_report_reports_at_its_exit() {
        let mut cfg = Cfg::new(vec![vec![1], vec![2], vec![]]);
        cfg.tree_of_block[1] = Some(0);
        cfg.leaves[2] = true;
        let reports = cfg.reports(1);
        assert_eq!(reports.waits, [false]);
        assert!(reports.before_leaving.iter().all(Vec::is_empty));
    }

    #[test]
    fn a_records_change_on_the_back_edge_ends_the_wait() {
        let mut cfg = loop_with_rare_call();
        cfg.on_edges.insert((3, 1), Reporting::All);
        let reports = cfg.reports(1);
        assert_eq!(reports.waits, [false]);
        assert!(reports.on_edge.is_empty());
    }

    #[test]
    fn a_tree_that_would_report_in_too_many_places_reports_at_its_exit() {
        // 1 (header) -> 2 (the tree) -> 3 -> 1 or one of `calls` blocks, each calling,
        // -> 1.
        let calls = MAX_WAITING_REPORTS + 1;
        let mut successors = vec![vec![1], vec![2], vec![3], vec![1]];
        successors[3].extend(4..4 + calls);
        successors.extend((0..calls).map(|_| vec![1]));
        let mut cfg = Cfg::new(successors);
        cfg.tree_of_block[2] = Some(0);
        (4..4 + calls).for_each(|b| cfg.leaves[b] = true);
        assert_eq!(cfg.reports(1).waits, [false]);
        // One place fewer, and it waits.
        cfg.successors[3].pop();
        cfg.successors.pop();
        cfg.tree_of_block.pop();
        cfg.at_start.pop();
        cfg.leaves.pop();
        let reports = cfg.reports(1);
        assert_eq!(reports.waits, [true]);
        let places = reports
            .before_leaving
            .iter()
            .filter(|l| !l.is_empty())
            .count();
        assert_eq!(places, MAX_WAITING_REPORTS);
    }

    #[test]
    fn a_changing_edge_reports_what_waits_at_its_source() {
        // Two trees in the loop; the edge 3 -> 5 (out of the loop from the latch) closes
        // its record; 1 -> 5 too.
        let mut cfg = Cfg::new(vec![
            vec![1],
            vec![2, 5],
            vec![6],
            vec![1, 5],
            vec![],
            vec![],
            vec![3],
        ]);
        cfg.tree_of_block[2] = Some(0);
        cfg.tree_of_block[6] = Some(1);
        cfg.on_edges.insert((3, 5), Reporting::All);
        cfg.on_edges.insert((1, 5), Reporting::All);
        cfg.leaves[5] = true;
        let reports = cfg.reports(2);
        assert_eq!(reports.waits, [true, true]);
        assert_eq!(reports.on_edge[&(3, 5)], [0, 1]);
        assert_eq!(reports.on_edge[&(1, 5)], [0, 1]);
        assert!(reports.before_leaving[5].is_empty());
    }

    #[test]
    fn leaving_a_deferred_region_reports_only_the_trees_in_it() {
        // A loop (header 1, exit 6) whose body runs tree 1 (block 2), then a deferred region
        // (blocks 3 to 5) with tree 0 (block 4) in it, left on the back edge 5 -> 1.
        let mut cfg = Cfg::new(vec![
            vec![1],
            vec![2, 6],
            vec![3],
            vec![4],
            vec![5],
            vec![1],
            vec![],
        ]);
        cfg.tree_of_block[4] = Some(0);
        cfg.tree_of_block[2] = Some(1);
        cfg.on_edges.insert((5, 1), Reporting::Trees(vec![0]));
        cfg.at_start[6] = Some(Reporting::All);
        cfg.leaves[6] = true;
        let reports = cfg.reports(2);
        // Tree 0 reports to the region's locals as it is left, at each iteration: nothing
        // to gain by waiting. Tree 1 waits across it to the loop's exit.
        assert_eq!(reports.waits, [false, true]);
        assert_eq!(reports.at_start[6], [1]);
        assert!(reports.on_edge.is_empty());
    }
}
