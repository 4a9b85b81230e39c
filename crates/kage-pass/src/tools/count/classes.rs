//! One counter per execution class of a promoted tree's blocks, instead of an addition to
//! each region's locals in each block.
//!
//! A tree's locals (per region: instances, loads, stores, bytes) grow by constants in
//! its blocks. Blocks that run equally often in every visit of the tree
//! ([`crate::equivalence`]) need one counter between them: the class's counter grows by 1
//! in one of its blocks, and each report first adds `amount * counter` to the locals the
//! class's blocks added to. A helper inlined unconditionally into a loop body then costs
//! nothing per iteration, and a tree's loop keeps one register per class rather than one
//! per region and statistic. A class whose blocks add once in all keeps its addition.
//!
//! A visit of a tree is a stay in its blocks (those of its regions, the blocks made on
//! edges between them, and those its instances are counted in on the way in); it reports
//! only after a visit, which is what makes the counts per class exact at each report.

use std::collections::HashMap;

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBuilderRef, LLVMValueRef};

use super::emit::{Emitted, Inline};
use crate::equivalence::execution_classes;
use crate::ir::FunctionCfg;
use crate::plan::FunctionPlan;

/// Rewrites the additions to the locals of each tree in `emitted` to class counters, where
/// that saves additions; `in_tree[b]` is the tree of the plan's block `b`.
///
/// # Safety
/// `plan` must describe the function the emitter instrumented, `emitted` what it built
/// (nothing removed since) with `inline`, and `builder` a builder of the function's context.
pub(super) unsafe fn count_per_class(
    plan: &FunctionPlan,
    in_tree: &[Option<usize>],
    emitted: &Emitted,
    inline: &Inline,
    builder: LLVMBuilderRef,
) {
    let Some(trees) = emitted.adds.iter().map(|a| a.tree + 1).max() else {
        return;
    };
    // What is inserted here is bookkeeping, of no source line.
    LLVMSetCurrentDebugLocation2(builder, std::ptr::null_mut());
    let cfg = FunctionCfg::new(plan.func);
    let index = cfg.block_indices();
    let original = plan.cfg.block_indices();
    let predecessors = crate::loops::predecessors(&cfg.successors);
    let block_of = |inst: LLVMValueRef| index.get(&LLVMGetInstructionParent(inst)).copied();
    for tree in 0..trees {
        let adds: Vec<_> = (emitted.adds.iter()).filter(|a| a.tree == tree).collect();
        if adds.is_empty() {
            continue;
        }
        // The tree's blocks: its regions', those its additions are in, and blocks made on
        // edges between them.
        let mut member: Vec<bool> = (cfg.blocks.iter())
            .map(|b| original.get(b).is_some_and(|&o| in_tree[o] == Some(tree)))
            .collect();
        for add in &adds {
            if let Some(b) = block_of(add.instructions[0]) {
                member[b] = true;
            }
        }
        for b in (0..cfg.blocks.len()).filter(|b| !original.contains_key(&cfg.blocks[*b])) {
            if let ([p], [s]) = (&predecessors[b][..], &cfg.successors[b][..]) {
                member[b] |= member[*p] && member[*s];
            }
        }
        let Some(reports) = reports_after_visits(tree, emitted, &member, &cfg, &adds, block_of)
        else {
            continue;
        };
        // The visit graph: the members, a source before the ways in, a sink after the ways
        // out.
        let members: Vec<usize> = (0..cfg.blocks.len()).filter(|&b| member[b]).collect();
        let mut local_index = vec![usize::MAX; cfg.blocks.len()];
        for (i, &b) in members.iter().enumerate() {
            local_index[b] = i;
        }
        let (source, sink) = (members.len(), members.len() + 1);
        let mut graph: Vec<Vec<usize>> = vec![Vec::new(); members.len() + 2];
        for (i, &b) in members.iter().enumerate() {
            if b == 0 || predecessors[b].iter().any(|&p| !member[p]) {
                graph[source].push(i);
            }
            for &s in &cfg.successors[b] {
                graph[i].push(if member[s] { local_index[s] } else { sink });
            }
            if cfg.successors[b].is_empty() {
                graph[i].push(sink);
            }
        }
        let classes = execution_classes(&graph, source, sink);
        // The additions of each class (those of a block in no class stay).
        let mut by_class: HashMap<usize, Vec<usize>> = HashMap::new();
        for (k, add) in adds.iter().enumerate() {
            let Some(b) = block_of(add.instructions[0]) else {
                continue;
            };
            let class = classes.of_block[local_index[b]];
            if let Some(class) = class.filter(|&c| classes.in_loop[c]) {
                by_class.entry(class).or_default().push(k);
            }
        }
        let mut shared: Vec<(LLVMValueRef, Vec<(LLVMValueRef, u64)>)> = Vec::new();
        let mut classes_in_order: Vec<_> = by_class.into_iter().collect();
        classes_in_order.sort_unstable();
        for (_, class_adds) in classes_in_order {
            let mut amounts: Vec<(LLVMValueRef, u64)> = Vec::new();
            for &k in &class_adds {
                let add = adds[k];
                match amounts.iter_mut().find(|(local, _)| *local == add.local) {
                    Some((_, amount)) => *amount += add.amount,
                    None => amounts.push((add.local, add.amount)),
                }
            }
            // A counter saves `additions - 1` additions an iteration and costs one per local
            // at each report: taken when it pays for itself within 1.5 iterations.
            if 2 * amounts.len() > 3 * (class_adds.len() - 1) {
                continue;
            }
            let entry = LLVMGetEntryBasicBlock(plan.func);
            LLVMPositionBuilderBefore(builder, LLVMGetFirstInstruction(entry));
            let counter = inline.zeroed_count(builder);
            // 0 at each entry into the tree too, as its locals are: dead outside it.
            for &(_, at) in emitted.entries.iter().filter(|(j, _)| *j == tree) {
                LLVMPositionBuilderBefore(builder, at);
                let zero = LLVMConstInt(LLVMGetAllocatedType(counter), 0, 0);
                LLVMSetAlignment(LLVMBuildStore(builder, zero, counter), 8);
            }
            // One block of the class counts, before its first addition.
            let first = first_in_block(adds[class_adds[0]].instructions[0], &class_adds, &adds);
            LLVMPositionBuilderBefore(builder, first);
            let one = LLVMConstInt(LLVMGetAllocatedType(counter), 1, 0);
            inline.add_plain(builder, counter, one);
            for &k in &class_adds {
                for &inst in adds[k].instructions.iter().rev() {
                    LLVMInstructionEraseFromParent(inst);
                }
            }
            shared.push((counter, amounts));
        }
        for &call in &reports {
            LLVMPositionBuilderBefore(builder, call);
            settle(inline, builder, &shared);
        }
    }
}

/// The reports of `tree`, if each comes after whole visits: one in a member block must
/// follow the tree's additions there, in a block that leaves the tree.
unsafe fn reports_after_visits(
    tree: usize,
    emitted: &Emitted,
    member: &[bool],
    cfg: &FunctionCfg,
    adds: &[&super::emit::TreeAdd],
    block_of: impl Fn(LLVMValueRef) -> Option<usize>,
) -> Option<Vec<LLVMValueRef>> {
    let mut reports = Vec::new();
    for &(_, call) in emitted.flushes.iter().filter(|(j, _)| *j == tree) {
        let b = block_of(call)?;
        if member[b] {
            if cfg.successors[b].iter().any(|&s| member[s]) {
                return None;
            }
            // No addition of the tree after the report in its block.
            let mut at = LLVMGetNextInstruction(call);
            while !at.is_null() {
                if adds.iter().any(|a| a.instructions.contains(&at)) {
                    return None;
                }
                at = LLVMGetNextInstruction(at);
            }
        }
        reports.push(call);
    }
    Some(reports)
}

/// The first of the additions `members` (indices into `adds`) in the block of `any`.
unsafe fn first_in_block(
    any: LLVMValueRef,
    members: &[usize],
    adds: &[&super::emit::TreeAdd],
) -> LLVMValueRef {
    let block = LLVMGetInstructionParent(any);
    let mut at = LLVMGetFirstInstruction(block);
    while !at.is_null() {
        if members.iter().any(|&k| adds[k].instructions[0] == at) {
            return at;
        }
        at = LLVMGetNextInstruction(at);
    }
    any
}

/// Before a report: each class's `amount * counter` added to its locals, the counters
/// zeroed.
unsafe fn settle(
    inline: &Inline,
    builder: LLVMBuilderRef,
    shared: &[(LLVMValueRef, Vec<(LLVMValueRef, u64)>)],
) {
    for &(counter, ref amounts) in shared {
        let i64_type = LLVMGetAllocatedType(counter);
        let count = LLVMBuildLoad2(builder, i64_type, counter, c"".as_ptr());
        LLVMSetAlignment(count, 8);
        for &(local, amount) in amounts {
            let scaled = match amount {
                1 => count,
                _ => LLVMBuildMul(
                    builder,
                    count,
                    LLVMConstInt(i64_type, amount, 0),
                    c"".as_ptr(),
                ),
            };
            inline.add_plain(builder, local, scaled);
        }
        let zero = LLVMConstInt(i64_type, 0, 0);
        LLVMSetAlignment(LLVMBuildStore(builder, zero, counter), 8);
    }
}
