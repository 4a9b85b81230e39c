//! What the pass learns about one function before changing anything: its CFG and loops,
//! its region entries, its memory accesses, and where control enters and leaves it (the
//! places the region hooks go). Every tool instruments from a [`FunctionPlan`].

use std::collections::HashMap;

use llvm_sys::core::*;
use llvm_sys::debuginfo::{
    LLVMDILocationGetColumn, LLVMDILocationGetLine, LLVMInstructionGetDebugLoc,
};
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::target::{LLVMGetModuleDataLayout, LLVMTargetDataRef};
use llvm_sys::LLVMOpcode;

use crate::access::{classify_access, Access};
use crate::debuginfo::{self, Copy, InlineSites};
use crate::hoist;
use crate::ir::{self, FunctionCfg};
use crate::loops::{find_loops, LoopForest};
use crate::region_tree::{self, Location, RegionTree};
use crate::regions::{self, CallSite, FunctionIdentity, FunctionSlots, InlinedCall, RegionEntry};
use crate::segments;

/// A measured instruction of a block, as [`split_where_inlined_calls_change`] reads it.
struct Measured {
    /// Its index in the block's instructions (phis and terminator left out).
    at: usize,
    chain: Vec<region_tree::Site>,
    /// Its own source position and opcode: what makes copies of code recognisable.
    key: (u32, u32, LLVMOpcode),
    call: bool,
}

/// Splits `func`'s blocks where the chain of inlined calls of their measured instructions
/// changes, so that each block is measured in one chain: a block's region is one chain
/// (`region_tree::block_chains`), and small functions inlined one after another in straight
/// code (`get(a, 1) + get(a, 9)`) would otherwise fall into one region, their caller's or
/// one of theirs. A block is cut before the first measured instruction of a new chain, or
/// before the instructions of that chain that lead to it (its address, its arguments).
///
/// Copies of one inlined call laid one after another in a block (a loop around the call
/// unrolled whole) have one chain: they are found as a run of measured instructions of
/// that call that repeats itself, source position by position, at least twice (a repeated
/// unit with one position and no call is left alone: the accesses one statement was split
/// into look the same), cut apart, and returned: each measured instruction of the second
/// copy on, with its [`Copy`].
///
/// # Safety
/// `func` must be a function with a body in a valid module, not yet instrumented.
unsafe fn split_where_inlined_calls_change(
    func: LLVMValueRef,
    data_layout: LLVMTargetDataRef,
) -> HashMap<LLVMValueRef, Copy> {
    let mut sites = InlineSites::default();
    let mut copies = HashMap::new();
    for block in FunctionCfg::new(func).blocks {
        // Each instruction with its chain, when it has a location.
        let mut located: Vec<(LLVMValueRef, Option<Vec<region_tree::Site>>)> = Vec::new();
        let mut measured: Vec<Measured> = Vec::new();
        for inst in ir::instructions(block) {
            let op = ir::opcode(inst);
            if op == LLVMOpcode::LLVMPHI || !LLVMIsATerminatorInst(inst).is_null() {
                continue;
            }
            let chain = sites.location(inst).map(|l| l.sites);
            located.push((inst, chain.clone()));
            let call = segments::calls_other_code(inst);
            if let (Some(chain), true) =
                (chain, call || classify_access(inst, data_layout).is_some())
            {
                let own = LLVMInstructionGetDebugLoc(inst);
                let key = (LLVMDILocationGetLine(own), LLVMDILocationGetColumn(own), op);
                measured.push(Measured {
                    at: located.len() - 1,
                    chain,
                    key,
                    call,
                });
            }
        }
        // The measured instructions that start a block: where the chain changes, and where
        // a copy starts.
        let mut starts: Vec<usize> = (1..measured.len())
            .filter(|&m| measured[m].chain != measured[m - 1].chain)
            .collect();
        let mut copy_of: Vec<Option<Copy>> = vec![None; measured.len()];
        let deepest = measured.iter().map(|m| m.chain.len()).max().unwrap_or(0);
        for depth in 0..deepest {
            let mut first = 0;
            while first < measured.len() {
                let Some(call) = measured[first].chain.get(..=depth) else {
                    first += 1;
                    continue;
                };
                let mut end = first + 1;
                while end < measured.len() && measured[end].chain.get(..=depth) == Some(call) {
                    end += 1;
                }
                let run = &measured[first..end];
                if copy_of[first..end].iter().all(Option::is_none) {
                    if let Some(unit) = repeating_unit(run, depth) {
                        for (i, m) in (first..end).enumerate() {
                            let number = (i / unit) as u32;
                            if number > 0 {
                                copy_of[m] = Some((depth, number));
                                if i % unit == 0 {
                                    starts.push(m);
                                }
                            }
                        }
                    }
                }
                first = end;
            }
        }
        starts.sort_unstable();
        starts.dedup();
        for (m, copy) in copy_of.iter().enumerate() {
            if let Some(copy) = copy {
                copies.insert(located[measured[m].at].0, *copy);
            }
        }
        // Cut before each start, or before the unmeasured instructions of its chain (or
        // without a location) that precede it, back to the measured instruction before;
        // never before an `alloca` (one out of the entry block would be a dynamic one).
        let last_alloca =
            (located.iter()).rposition(|&(inst, _)| ir::opcode(inst) == LLVMOpcode::LLVMAlloca);
        let mut cuts = Vec::with_capacity(starts.len());
        for &m in &starts {
            if last_alloca.is_some_and(|a| a >= measured[m].at) {
                continue;
            }
            let chain = &measured[m].chain;
            let previous = measured[m - 1].at;
            let mut at = measured[m].at;
            while at > previous + 1
                && last_alloca.is_none_or(|a| a < at - 1)
                && located[at - 1].1.as_ref().is_none_or(|c| c == chain)
            {
                at -= 1;
            }
            cuts.push(located[at].0);
        }
        for inst in cuts {
            if ir::opcode(inst) != LLVMOpcode::LLVMLandingPad {
                kage_split_block_before(inst);
            }
        }
    }
    copies
}

/// The length of the unit `run` (measured instructions whose chains share their first
/// `depth + 1` calls) repeats, at least twice, position by position (the same calls below
/// `depth`, source position and opcode; a last copy may be cut short), when there is one:
/// a unit of two positions or more, or with a call.
fn repeating_unit(run: &[Measured], depth: usize) -> Option<usize> {
    // A whole unroll copies small bodies (LLVM's full-unroll threshold is a few hundred
    // instructions); the bound keeps a long run of one position from a quadratic search.
    const MAX_UNIT: usize = 256;
    let same =
        |a: &Measured, b: &Measured| a.key == b.key && a.chain[depth + 1..] == b.chain[depth + 1..];
    (1..=(run.len() / 2).min(MAX_UNIT)).find(|&unit| {
        (unit..run.len()).all(|i| same(&run[i], &run[i % unit])) && {
            let unit = &run[..unit];
            unit.iter().any(|m| m.call)
                || unit
                    .iter()
                    .any(|m| (m.key.0, m.key.1) != (unit[0].key.0, unit[0].key.1))
        }
    })
}

extern "C" {
    /// Splits the block of `inst` before it (shim.cpp); returns the new block.
    fn kage_split_block_before(inst: LLVMValueRef) -> llvm_sys::prelude::LLVMBasicBlockRef;
}

/// Everything the pass will do to one function, decided before mutating it.
pub struct FunctionPlan {
    pub func: LLVMValueRef,
    /// Where its regions are in the table: the function, its loops and inlined calls, and
    /// each block's innermost region.
    pub slots: FunctionSlots,
    pub forest: LoopForest,
    pub cfg: FunctionCfg,
    tree: RegionTree,
    /// Each block's instructions' locations.
    locations: Vec<Vec<Location>>,
    /// The calls inlined into it.
    calls: Vec<InlinedCall>,
    identity: FunctionIdentity,
    /// Every memory access, in program order.
    pub accesses: Vec<Access>,
    /// Instructions before which `__kage_func_exit` goes (reachable `ret`/`resume`).
    pub exits: Vec<LLVMValueRef>,
    /// Where control may arrive from a `longjmp` or an unwinding exception, with the block
    /// it is in: before which `__kage_resume_at` goes.
    pub resume_points: Vec<(LLVMValueRef, usize)>,
}

impl FunctionPlan {
    /// Analyses `func`, whose table entries start at index `base`; with `inlined_regions`
    /// false, inlined calls are no regions (their code is their caller's).
    ///
    /// # Safety
    /// `func` must be a function with a body in a valid module.
    pub unsafe fn new(func: LLVMValueRef, base: u32, inlined_regions: bool) -> Self {
        let data_layout = LLVMGetModuleDataLayout(LLVMGetGlobalParent(func));
        let copies = if inlined_regions {
            split_where_inlined_calls_change(func, data_layout)
        } else {
            HashMap::new()
        };
        let cfg = FunctionCfg::new(func);
        let forest = find_loops(&cfg.successors, 0);
        let mut sites = InlineSites::default();
        let mut locations = Vec::with_capacity(cfg.blocks.len());
        // Each block's located accesses and calls: what decides its chain (see below).
        let mut measured_locations = Vec::with_capacity(cfg.blocks.len());
        // Whether each block makes a memory access or a call (see
        // region_tree::drop_unmeasured_calls).
        let mut measured = vec![false; cfg.blocks.len()];
        let mut accesses = Vec::new();
        let mut exits = Vec::new();
        let mut resume_points = Vec::new();
        // The chain of each block's terminator, where it has a location.
        let mut terminator_chains = vec![None; cfg.blocks.len()];
        for (b, &block) in cfg.blocks.iter().enumerate() {
            let mut block_locations = Vec::new();
            let mut block_measured = Vec::new();
            if forest.reachable[b] && ir::is_landing_pad(block) {
                if let Some(at) = ir::first_insertion_point(block) {
                    resume_points.push((at, b));
                }
            }
            for inst in ir::instructions(block) {
                let location = sites.location_in_copy(inst, copies.get(&inst).copied());
                if !LLVMIsATerminatorInst(inst).is_null() {
                    terminator_chains[b] = location.as_ref().map(|l| l.sites.clone());
                }
                let access = classify_access(inst, data_layout);
                let is_measured = access.is_some() || segments::calls_other_code(inst);
                if let Some(access) = access {
                    accesses.push(access);
                }
                measured[b] |= is_measured;
                if is_measured {
                    block_measured.extend(location.clone());
                }
                block_locations.extend(location);
                let op = ir::opcode(inst);
                // Unreachable blocks never run: no region hooks there (see loops.rs).
                if forest.reachable[b]
                    && (op == LLVMOpcode::LLVMRet || op == LLVMOpcode::LLVMResume)
                {
                    exits.push(exit_insertion_point(inst));
                }
                // A second return from setjmp comes from a longjmp that skipped exit hooks.
                if forest.reachable[b] && ir::calls_returns_twice(inst) {
                    let next = LLVMGetNextInstruction(inst);
                    if !next.is_null() {
                        resume_points.push((next, b));
                    }
                }
            }
            locations.push(block_locations);
            measured_locations.push(block_measured);
        }
        let mut back_edges =
            region_tree::back_edge_chains(&forest, &cfg.successors, &terminator_chains);
        // A block's chain is the one of most of its accesses and calls, not of most of its
        // instructions: an inlined callee's arithmetic scheduled into the block with its
        // caller's load (a hash computed before the first probe) must not take the load.
        let deciding: Vec<Vec<Location>> = (measured_locations.into_iter().zip(&locations))
            .map(|(m, all)| if m.is_empty() { all.clone() } else { m })
            .collect();
        let mut chains = region_tree::block_chains(&cfg.successors, &deciding);
        region_tree::drop_unmeasured_calls(&mut chains, &mut back_edges, &measured);
        if !inlined_regions {
            chains.iter_mut().for_each(Vec::clear);
            back_edges.iter_mut().flatten().for_each(Vec::clear);
        }
        let tree = region_tree::build(&forest, &chains, &back_edges);
        let calls = (sites.sites.iter())
            .map(|site| {
                let (name, symbol, file, line) = debuginfo::subprogram_identity(site.callee);
                InlinedCall {
                    callee: FunctionIdentity {
                        name,
                        symbol,
                        file,
                        declared_line: Some(line).filter(|&l| l != 0),
                    },
                    call: CallSite {
                        file: site.call_file.clone(),
                        line: site.call_line,
                        column: site.call_column,
                    },
                }
            })
            .collect();
        let symbol = ir::value_name(func);
        // A leading \x01 only tells the backend not to add a prefix; it is not part of the name.
        let symbol = symbol.strip_prefix('\u{1}').unwrap_or(&symbol).to_string();
        let identity = FunctionIdentity {
            name: debuginfo::display_name(&symbol),
            symbol,
            file: debuginfo::function_file(func),
            declared_line: debuginfo::subprogram_line(func),
        };
        FunctionPlan {
            func,
            slots: FunctionSlots::new(base, &tree),
            forest,
            cfg,
            tree,
            locations,
            calls,
            identity,
            accesses,
            exits,
            resume_points,
        }
    }

    /// Where `__kage_settle` goes: the first insertion point of each block listed, with the
    /// table index of the region it settles to ([`region_tree::settle_points`]).
    pub fn settle_points(&self) -> Vec<(usize, u32)> {
        self.settle_points_folding(&[])
    }

    /// [`settle_points`](Self::settle_points) with the blocks of the regions `folded`
    /// (nodes of [`tree`](Self::tree) without children) counted as their parents': a tool
    /// that reports those regions itself.
    pub fn settle_points_folding(&self, folded: &[usize]) -> Vec<(usize, u32)> {
        let folded_tree;
        let tree = if folded.is_empty() {
            &self.tree
        } else {
            let mut t = self.tree.clone();
            for region in &mut t.block_region {
                while folded.contains(region) {
                    *region = t.nodes[*region].parent.unwrap_or(0);
                }
            }
            folded_tree = t;
            &folded_tree
        };
        (region_tree::settle_points(tree, &self.forest, &self.cfg.successors).into_iter())
            .map(|(block, node)| (block, self.slots.base + node as u32))
            .collect()
    }

    /// The function's region tree (`slots.block_region`'s values are its nodes).
    pub fn tree(&self) -> &RegionTree {
        &self.tree
    }

    /// [`hoist::plan_function`] for this function, without the loops that hold an inlined
    /// call: a hoisted loop's iterations reach the runtime once per chunk, so the regions
    /// of calls inlined into its body would count one instance per chunk, and their
    /// accesses would go to the loop body.
    ///
    /// # Safety
    /// As for [`hoist::plan_function`].
    pub unsafe fn hoisted_loops(
        &self,
        data_layout: LLVMTargetDataRef,
        coverage: hoist::Coverage,
    ) -> Vec<hoist::HoistPlan> {
        let explain = std::env::var_os(hoist::EXPLAIN_VARIABLE).is_some_and(|v| v == "1");
        (hoist::plan_function(&self.cfg, &self.forest, data_layout, coverage).into_iter())
            .filter(|h| {
                let own = self.tree.loop_node[h.loop_index];
                let holds_call = (self.forest.loops[h.loop_index].blocks.iter())
                    .any(|&b| !(own..=own + 1).contains(&self.tree.block_region[b]));
                if holds_call && explain {
                    eprintln!(
                        "kage-pass: {}: its loop {} is not hoisted after all: it holds an \
                         inlined call",
                        ir::value_name(self.func),
                        h.loop_index
                    );
                }
                !holds_call
            })
            .collect()
    }

    /// The function's entries of the region table.
    pub fn regions(&self) -> Vec<RegionEntry> {
        regions::plan_function(
            &self.slots,
            &self.tree,
            &self.forest,
            &self.locations,
            &self.calls,
            &self.identity,
        )
    }
}

/// Where `__kage_func_exit` goes for a `ret`/`resume`: right before it, unless the `ret`
/// returns a `musttail` call's result, since nothing may sit between that call and the
/// `ret`; then before the call (the callee's events then nest inside nothing of ours).
unsafe fn exit_insertion_point(terminator: LLVMValueRef) -> LLVMValueRef {
    ir::musttail_call_returned_by(terminator).unwrap_or(terminator)
}
