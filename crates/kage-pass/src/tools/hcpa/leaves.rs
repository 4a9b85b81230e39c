//! Static leaves (docs/hcpa.md, "Static leaves"): an inlined call whose code is one block
//! that runs straight through, with no call, loop, or load after a store, has the same
//! work and critical path in every instance, known at build time. Such a call keeps its
//! region but loses its hooks: the block's `__kage_hcpa_work` becomes
//! `__kage_hcpa_leaf(r, 1, work, cp)`, which records an instance of `r` with them, and its
//! timestamp calls compute times at the levels around it only. The inlined calls around
//! it that hold nothing else (no block of their own, one child) are static too, with the
//! same work and critical path: `__kage_hcpa_leaf(r, n, ..)` records the chain.
//!
//! Why the critical path is static: at the call's own level every value and granule made
//! before its instance reads 0 (docs/hcpa.md, "Times"), so each time the block computes
//! there is a function of its candidates' offsets and of the times the block computed
//! before it; a load could read a time its own instance stored (through memory the build
//! cannot tell apart), so a block that loads after it stores is not a static leaf.

use std::collections::HashMap;

use kage_abi::NONE;
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMValueRef};
use llvm_sys::LLVMOpcode;

use super::analysis::{Action, Cands, Placed};
use crate::ir;
use crate::plan::FunctionPlan;
use crate::region_tree::NodeKind;

/// The work and critical path, at its own level, of an instance that runs `actions` (a
/// block's, in program order), or `None` when they are not those of a static leaf: a kind of
/// call other than work, phis, timestamps, loads and stores, a load after a store, or no
/// work call (where `__kage_hcpa_leaf` would go).
pub fn static_instance<'a>(actions: impl IntoIterator<Item = &'a Action>) -> Option<(u64, u64)> {
    // The times the block wrote, by slot; any other slot (and `NONE`) reads 0.
    let mut times: HashMap<u32, u64> = HashMap::new();
    let slot_time = |times: &HashMap<u32, u64>, slot: u32| times.get(&slot).copied().unwrap_or(0);
    let time_of = |times: &HashMap<u32, u64>, cands: &Cands| -> u64 {
        (cands.0.iter())
            .map(|(&slot, &offset)| slot_time(times, slot).saturating_add(u64::from(offset)))
            .max()
            .unwrap_or(0)
    };
    let (mut work, mut cp) = (None::<u64>, 0u64);
    let mut stored = false;
    let mut produce = |times: &mut HashMap<u32, u64>, dst: u32, t: u64| {
        cp = cp.max(t);
        if dst != NONE {
            times.insert(dst, t);
        }
    };
    for action in actions {
        match action {
            Action::Work { cost } => work = Some(work.unwrap_or(0).saturating_add(*cost)),
            Action::Phi { dst, incoming, .. } => {
                let t = (incoming.iter())
                    .flat_map(|&(_, src, cond)| [src, cond])
                    .map(|slot| slot_time(&times, slot))
                    .max()
                    .unwrap_or(0);
                produce(&mut times, *dst, t);
            }
            Action::Ts { dst, cands } => {
                let t = time_of(&times, cands);
                produce(&mut times, *dst, t);
            }
            Action::Load {
                dst, cost, cands, ..
            } => {
                if stored {
                    return None;
                }
                let t = time_of(&times, cands).saturating_add(u64::from(*cost));
                produce(&mut times, *dst, t);
            }
            Action::Store { cost, cands, .. } => {
                stored = true;
                let t = time_of(&times, cands).saturating_add(u64::from(*cost));
                produce(&mut times, NONE, t);
            }
            _ => return None,
        }
    }
    Some((work?, cp))
}

/// Finds the function's static leaves and turns each one's work call in `actions` into
/// [`Action::Leaf`], with the chain of inlined calls around it that hold nothing but it
/// (each with no block of its own and one child: `hashPtr(p)` returning `hash4(read32(p))`);
/// returns their nodes (for `hooks::Skipped::folded`).
///
/// # Safety
/// `plan` must describe a live function that nothing was inserted into yet, and `actions`
/// be its analysis's.
pub unsafe fn make(plan: &FunctionPlan, actions: &mut [Placed]) -> Leaves {
    let tree = plan.tree();
    let children = tree.child_counts();
    let own_blocks = plan.blocks_by_region();
    let predecessors = predecessors(&plan.cfg.successors);
    let block_index = plan.cfg.block_indices();
    let mut by_block: HashMap<LLVMBasicBlockRef, Vec<usize>> = HashMap::new();
    for (i, placed) in actions.iter().enumerate() {
        (by_block.entry(LLVMGetInstructionParent(placed.before)))
            .or_default()
            .push(i);
    }
    let mut leaves = Vec::new();
    // The action of each static node's `__kage_hcpa_leaf`, by node: the top of its chain.
    let mut leaf_action: HashMap<usize, usize> = HashMap::new();
    let mut branchy: Vec<BranchyLeaf> = Vec::new();
    // Each branchy leaf, by the node at the top of its chain.
    let mut branchy_of: HashMap<usize, usize> = HashMap::new();
    for (node, n) in tree.nodes.iter().enumerate() {
        if !matches!(n.kind, NodeKind::Inlined(_)) || children[node] != 0 {
            continue;
        }
        if own_blocks[node].len() > 1 {
            let blocks = &own_blocks[node];
            if let Some(mut leaf) = branchy_leaf(
                plan,
                blocks,
                &predecessors,
                &block_index,
                &by_block,
                actions,
            ) {
                leaf.region = plan.slots.base + node as u32;
                branchy_of.insert(node, branchy.len());
                branchy.push(leaf);
                leaves.push(node);
            }
            continue;
        }
        let [b] = own_blocks[node][..] else {
            continue;
        };
        if b == 0 || !straight_block(plan, b) {
            continue;
        }
        let in_block = by_block
            .get(&plan.cfg.blocks[b])
            .map_or(&[][..], Vec::as_slice);
        let Some((work, cp)) = static_instance(in_block.iter().map(|&i| &actions[i].action)) else {
            continue;
        };
        let region = plan.slots.base + node as u32;
        let Some(&i) =
            (in_block.iter()).find(|&&i| matches!(actions[i].action, Action::Work { .. }))
        else {
            continue;
        };
        actions[i].action = Action::Leaf {
            region,
            chain: 1,
            work,
            cp,
        };
        leaf_action.insert(node, i);
        leaves.push(node);
    }
    // An inlined call whose only code is one static call's runs with it: the same work, and
    // the same times at its level as at the child's (both start together, so everything from
    // before reads 0 at both). Children before parents; in pre-order an only child follows
    // its parent.
    for node in (0..tree.nodes.len()).rev() {
        let wraps = matches!(tree.nodes[node].kind, NodeKind::Inlined(_))
            && children[node] == 1
            && own_blocks[node].is_empty()
            && tree
                .nodes
                .get(node + 1)
                .is_some_and(|c| c.parent == Some(node));
        if !wraps {
            continue;
        }
        if let Some(i) = leaf_action.remove(&(node + 1)) {
            if let Action::Leaf { region, chain, .. } = &mut actions[i].action {
                *region -= 1;
                *chain += 1;
            }
            leaf_action.insert(node, i);
            leaves.push(node);
        } else if let Some(k) = branchy_of.remove(&(node + 1)) {
            branchy[k].region -= 1;
            branchy[k].chain += 1;
            branchy_of.insert(node, k);
            leaves.push(node);
        }
    }
    Leaves {
        folded: leaves,
        branchy,
    }
}

/// The leaves of a function: every node that lost its hooks (static and branchy leaves and
/// the chains around them), and the branchy leaves, whose times the build computes.
#[derive(Default)]
pub struct Leaves {
    pub folded: Vec<usize>,
    pub branchy: Vec<BranchyLeaf>,
}

/// A branchy leaf: an inlined call without loops or calls whose code is several blocks,
/// entered from outside at one or more of them (its entries: no block is entered from
/// both), with no way back to a block once left, and the actions a static
/// leaf may have (no load after a store on any path). Its work and critical path depend
/// on the path taken, so the build computes them as values next to the program's (the
/// times at its own level of the slots its blocks write, phis where paths meet:
/// [`MirrorOp`]), and each way out of it calls `__kage_hcpa_leaf` with them; its blocks'
/// work calls go.
pub struct BranchyLeaf {
    /// The table slot of the outermost region of its chain, and the chain's length.
    pub region: u32,
    pub chain: u32,
    /// Its blocks, the entries first, each after the ones that lead to it.
    pub blocks: Vec<usize>,
    /// Per block: what it does to the times at the leaf's level, in program order.
    pub ops: Vec<Vec<MirrorOp>>,
    /// Per block: whether it leaves the leaf.
    pub exits: Vec<Exit>,
    /// Per block: its first instruction but phis before anything is inserted, where its
    /// values and a call in it go (after the hooks at its start, before those at its end).
    pub firsts: Vec<LLVMValueRef>,
}

/// How a branchy leaf's block leaves it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Exit {
    /// It goes on inside.
    No,
    /// Every successor is outside: the instance ends in the block.
    Always,
    /// Some successors are outside: the instance ends on those edges.
    OnEdges,
}

/// One action of a branchy leaf's block, as it changes the times at the leaf's level.
pub enum MirrorOp {
    /// The block's work.
    Work(u64),
    /// `dst` = the larger of the times of the slots the edge taken brings (`src`, `cond`),
    /// per incoming block (an index into [`BranchyLeaf::blocks`]; none at an entry, whose
    /// edges come from outside: 0).
    Phi {
        dst: u32,
        incoming: Vec<(usize, u32, u32)>,
    },
    /// A time: the largest candidate's slot time plus its offset, plus `cost`; written to
    /// `dst` unless it is `NONE` (a store's).
    Time { dst: u32, cands: Cands, cost: u64 },
}

/// Each block's predecessors (without repeats).
fn predecessors(successors: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut predecessors = crate::loops::predecessors(successors);
    for list in &mut predecessors {
        // Listed in order of the predecessors: repeats are neighbours.
        list.dedup();
    }
    predecessors
}

/// `blocks` (a node's own, more than one) as a branchy leaf, or `None`: see [`BranchyLeaf`].
/// Its region and chain are left for the caller.
unsafe fn branchy_leaf(
    plan: &FunctionPlan,
    blocks: &[usize],
    predecessors: &[Vec<usize>],
    block_index: &HashMap<LLVMBasicBlockRef, usize>,
    by_block: &HashMap<LLVMBasicBlockRef, Vec<usize>>,
    actions: &[Placed],
) -> Option<BranchyLeaf> {
    if blocks.iter().any(|&b| b == 0 || !straight_block(plan, b)) {
        return None;
    }
    let inside = |b: usize| blocks.contains(&b);
    let successors = &plan.cfg.successors;
    // Its entries (where an instance begins: the branch that decides between them may be
    // its caller's), entered only from outside; every other block only from inside.
    let entries: Vec<usize> = (blocks.iter().copied())
        .filter(|&b| predecessors[b].iter().any(|&p| !inside(p)))
        .collect();
    if entries.is_empty() || (entries.iter()).any(|&e| predecessors[e].iter().any(|&p| inside(p))) {
        return None;
    }
    // How each block leaves, if it does.
    let mut exits = HashMap::new();
    for &b in blocks {
        let out = successors[b].iter().filter(|&&s| !inside(s)).count();
        let exit = match out {
            0 => Exit::No,
            _ if out == successors[b].len() => Exit::Always,
            _ => Exit::OnEdges,
        };
        exits.insert(b, exit);
    }
    // Each block after the ones leading to it (none leads back: no cycle).
    let mut waiting: HashMap<usize, usize> = blocks
        .iter()
        .map(|&b| (b, predecessors[b].iter().filter(|&&p| inside(p)).count()))
        .collect();
    let mut order = entries.clone();
    let mut at = 0;
    while at < order.len() {
        let b = order[at];
        at += 1;
        let mut next: Vec<usize> = successors[b]
            .iter()
            .copied()
            .filter(|&s| inside(s))
            .collect();
        // Each successor once (a switch may name one in several cases, not side by side),
        // as `waiting` counts each predecessor once.
        next.sort_unstable();
        next.dedup();
        for s in next {
            let w = waiting.get_mut(&s)?;
            *w -= 1;
            if *w == 0 {
                order.push(s);
            }
        }
    }
    if order.len() != blocks.len() {
        return None;
    }
    let position: HashMap<usize, usize> = order.iter().enumerate().map(|(i, &b)| (b, i)).collect();
    // The blocks' actions at the leaf's level; no load where a store may have run before.
    let mut stored = vec![false; order.len()];
    let mut ops = Vec::with_capacity(order.len());
    for (i, &b) in order.iter().enumerate() {
        let mut has_stored = (predecessors[b].iter())
            .filter(|&&p| inside(p))
            .any(|p| stored[position[p]]);
        let mut block_ops = Vec::new();
        let mut phi_dsts = Vec::new();
        let in_block = by_block
            .get(&plan.cfg.blocks[b])
            .map_or(&[][..], Vec::as_slice);
        for &k in in_block {
            let op = match &actions[k].action {
                Action::Work { cost } => MirrorOp::Work(*cost),
                Action::Phi { dst, incoming, .. } => {
                    // Phis read what the edge brings: none may read a slot an earlier phi
                    // of the block wrote, nor come after the block's other actions.
                    let reads_own = (incoming.iter())
                        .any(|&(_, src, cond)| phi_dsts.contains(&src) || phi_dsts.contains(&cond));
                    if reads_own || block_ops.iter().any(|o| !matches!(o, MirrorOp::Phi { .. })) {
                        return None;
                    }
                    phi_dsts.push(*dst);
                    let incoming = if entries.contains(&b) {
                        Vec::new()
                    } else {
                        let mut edges = Vec::new();
                        for &(from, src, cond) in incoming {
                            let from = *position.get(block_index.get(&from)?)?;
                            edges.push((from, src, cond));
                        }
                        let covered = (predecessors[b].iter())
                            .all(|p| edges.iter().any(|&(from, ..)| order[from] == *p));
                        if !covered {
                            return None;
                        }
                        edges
                    };
                    MirrorOp::Phi {
                        dst: *dst,
                        incoming,
                    }
                }
                Action::Ts { dst, cands } => MirrorOp::Time {
                    dst: *dst,
                    cands: cands.clone(),
                    cost: 0,
                },
                Action::Load {
                    dst, cost, cands, ..
                } => {
                    if has_stored {
                        return None;
                    }
                    MirrorOp::Time {
                        dst: *dst,
                        cands: cands.clone(),
                        cost: u64::from(*cost),
                    }
                }
                Action::Store { cost, cands, .. } => {
                    has_stored = true;
                    MirrorOp::Time {
                        dst: NONE,
                        cands: cands.clone(),
                        cost: u64::from(*cost),
                    }
                }
                _ => return None,
            };
            block_ops.push(op);
        }
        stored[i] = has_stored;
        ops.push(block_ops);
    }
    // A block that ends the instance calls at its first instruction; one that is only a
    // branch has none before the hooks at its end.
    let mut firsts = Vec::with_capacity(order.len());
    for &b in &order {
        let block = plan.cfg.blocks[b];
        let first = ir::first_insertion_point(block)?;
        if exits[&b] == Exit::Always && first == LLVMGetBasicBlockTerminator(block) {
            return None;
        }
        firsts.push(first);
    }
    Some(BranchyLeaf {
        region: 0,
        chain: 1,
        firsts,
        exits: order.iter().map(|b| exits[b]).collect(),
        blocks: order,
        ops,
    })
}

/// Puts the static leaves found in `from` (an analysis of the function block by block) in
/// place of the work calls of their blocks in `to` (an analysis of the same function whose
/// values fold across blocks, with the same work calls). False, with `to` unusable, when a
/// leaf's block has no work call in `to`.
///
/// # Safety
/// The actions' instructions must be live.
pub unsafe fn carry_over(from: &[Placed], to: &mut [Placed]) -> bool {
    for placed in from {
        let Action::Leaf {
            region,
            chain,
            work,
            cp,
        } = placed.action
        else {
            continue;
        };
        let block = LLVMGetInstructionParent(placed.before);
        let Some(at) = to.iter_mut().find(|p| {
            matches!(p.action, Action::Work { .. }) && LLVMGetInstructionParent(p.before) == block
        }) else {
            return false;
        };
        at.action = Action::Leaf {
            region,
            chain,
            work,
            cp,
        };
    }
    true
}

/// The run of blocks each block's values fold in (`analysis::analyse`), as the first block of
/// the run: a block entered only from the one before it, which goes only to it, in the same
/// region once the static leaves `folded` lost their hooks (a static leaf's block counts as
/// in the region around its chain), runs right after that block in the same instances with
/// no hook between, so the times of its values are those of one block's. The blocks cut
/// apart where inlined calls begin and end (`plan::split_where_inlined_calls_change`) join
/// again around a static leaf. A run's blocks come in the function's order, so the
/// analysis meets a value before its uses.
///
/// # Safety
/// `plan` must describe a live function.
pub unsafe fn fold_scopes(plan: &FunctionPlan, folded: &[usize]) -> Vec<usize> {
    let tree = plan.tree();
    let mut is_folded = vec![false; tree.nodes.len()];
    for &node in folded {
        is_folded[node] = true;
    }
    let region = |b: usize| {
        let mut node = tree.block_region[b];
        while is_folded[node] {
            match tree.nodes[node].parent {
                Some(parent) => node = parent,
                None => break,
            }
        }
        node
    };
    let successors = &plan.cfg.successors;
    let mut predecessors = vec![0usize; successors.len()];
    for &s in successors.iter().flatten() {
        predecessors[s] += 1;
    }
    let resumes = |b: usize| plan.resume_points.iter().any(|&(_, rb)| rb == b);
    let mut scopes: Vec<usize> = (0..successors.len()).collect();
    // In order: the block before a block in a run comes first, its run already known.
    for b in 0..successors.len() {
        if let [s] = successors[b][..] {
            if s > b && predecessors[s] == 1 && !resumes(s) && region(s) == region(b) {
                scopes[s] = scopes[b];
            }
        }
    }
    scopes
}

/// Block `b` runs once per instance and straight through: not the entry, its own successor
/// or a resume point; no call but to intrinsics, no atomic operation, and a branch at its
/// end. (A loop's header may be one: its iteration hook comes before the block's code.)
unsafe fn straight_block(plan: &FunctionPlan, b: usize) -> bool {
    use LLVMOpcode::*;
    let block = plan.cfg.blocks[b];
    if plan.cfg.successors[b].contains(&b) || plan.resume_points.iter().any(|&(_, rb)| rb == b) {
        return false;
    }
    let terminator = LLVMGetBasicBlockTerminator(block);
    if terminator.is_null() || !matches!(ir::opcode(terminator), LLVMBr | LLVMSwitch) {
        return false;
    }
    ir::instructions(block)
        .into_iter()
        .all(|i| match ir::opcode(i) {
            LLVMAtomicRMW | LLVMAtomicCmpXchg | LLVMFence => false,
            _ if ir::is_call_site(i) => {
                let callee = LLVMGetCalledValue(i);
                ir::opcode(i) == LLVMCall
                    && !LLVMIsAFunction(callee).is_null()
                    && LLVMGetIntrinsicID(callee) != 0
            }
            _ => true,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(list: &[(u32, u32)]) -> Cands {
        Cands(list.iter().copied().collect())
    }

    fn load(dst: u32, cost: u32, list: &[(u32, u32)]) -> Action {
        Action::Load {
            dst,
            ptr: std::ptr::null_mut(),
            size: 4,
            cost,
            cands: cands(list),
        }
    }

    fn store(cost: u32, list: &[(u32, u32)]) -> Action {
        Action::Store {
            ptr: std::ptr::null_mut(),
            size: 4,
            cost,
            cands: cands(list),
        }
    }

    #[test]
    fn a_chain_inside_the_block_is_the_critical_path_and_outside_values_read_zero() {
        // x = load p (cost 4, p from before: 0) -> 4; y = x * 3 + 1 (folded: x + 2) -> 6;
        // store y (cost 1, q from before: offset 0) -> 7; an unrelated value from before
        // with a 3-long computation: 3.
        let actions = [
            Action::Work { cost: 9 },
            load(10, 4, &[(2, 0)]),
            Action::Ts {
                dst: 11,
                cands: cands(&[(10, 2)]),
            },
            store(1, &[(11, 0), (3, 0)]),
            Action::Ts {
                dst: 12,
                cands: cands(&[(5, 3), (NONE, 1)]),
            },
        ];
        assert_eq!(static_instance(&actions), Some((9, 7)));
    }

    #[test]
    fn phis_read_zero_and_their_temporaries_are_read_back() {
        let actions = [
            Action::Phi {
                dst: 20,
                block: std::ptr::null_mut(),
                incoming: vec![(std::ptr::null_mut(), 1, 2)],
            },
            Action::Ts {
                dst: 21,
                cands: cands(&[(20, 0)]),
            },
            Action::Work { cost: 2 },
            Action::Ts {
                dst: 22,
                cands: cands(&[(21, 1), (4, 0)]),
            },
        ];
        assert_eq!(static_instance(&actions), Some((2, 1)));
    }

    #[test]
    fn a_load_after_a_store_a_call_or_no_work_is_not_static() {
        let work = Action::Work { cost: 5 };
        assert_eq!(
            static_instance(&[work, store(1, &[]), load(3, 4, &[])]),
            None
        );
        let work = Action::Work { cost: 5 };
        assert_eq!(
            static_instance(&[work, load(3, 4, &[]), store(1, &[(3, 0)])]),
            Some((5, 5))
        );
        let call = Action::Call {
            callee: std::ptr::null_mut(),
        };
        assert_eq!(static_instance(&[Action::Work { cost: 5 }, call]), None);
        assert_eq!(static_instance(&[load(3, 4, &[])]), None);
    }
}
