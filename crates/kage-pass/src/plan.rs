//! What the pass learns about one function before changing anything: its CFG and loops,
//! its region entries, its memory accesses, and where control enters and leaves it (the
//! places the region hooks go). Every tool instruments from a [`FunctionPlan`].

use std::collections::{HashMap, HashSet};

use llvm_sys::core::*;
use llvm_sys::debuginfo::{
    LLVMDILocationGetColumn, LLVMDILocationGetLine, LLVMGetSubprogram, LLVMInstructionGetDebugLoc,
};
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::target::{LLVMGetModuleDataLayout, LLVMTargetDataRef};
use llvm_sys::LLVMOpcode;

use crate::access::{classify_access, Access};
use crate::debuginfo::{self, CallCopy, DeclaredLoop, InlineSites, WrittenSource};
use crate::hoist;
use crate::ir::{self, FunctionCfg};
use crate::loops::{find_loops, LoopForest};
use crate::region_tree::{self, Location, RegionTree};
use crate::regions::{
    self, CallSite, FunctionIdentity, FunctionSlots, InlinedCall, LineRange, LoopAsWritten,
    RegionEntry,
};
use crate::segments;

/// What makes a measured instruction recognisable in copies of an inlined call's code: the
/// inlined calls below the copied one, its own source position and opcode, and the innermost
/// loop of its block.
type CopyKey = (Vec<region_tree::Site>, u32, u32, LLVMOpcode, Option<usize>);
/// A measured instruction's source line, column and opcode.
type Position = (u32, u32, LLVMOpcode);

/// An inlined call open along the path [`split_where_inlined_calls_change`] walks.
#[derive(Clone)]
struct OpenCall {
    site: region_tree::Site,
    /// Which copy of the call's code this is (0: the first).
    copy: u32,
    /// The measured instructions of this copy so far, in order.
    seen: Vec<CopyKey>,
    /// Where each of `seen` is: its block, and its index in that block's located instructions.
    seen_at: Vec<(usize, usize)>,
}

impl OpenCall {
    fn new(site: region_tree::Site) -> Self {
        OpenCall {
            site,
            copy: 0,
            seen: Vec::new(),
            seen_at: Vec::new(),
        }
    }
}

/// Where a block's measured instructions pass from one chain of inlined calls (and copy)
/// to another: `located[previous]` is the last of the chain before, `located[here]` the
/// first of `chain`'s.
struct Start {
    previous: usize,
    here: usize,
    chain: Vec<region_tree::Site>,
    copy: Option<CallCopy>,
    /// The chain and copy before.
    from: (Vec<region_tree::Site>, Option<CallCopy>),
}

/// Splits `func`'s blocks where the chain of inlined calls of their measured instructions
/// (memory accesses and calls) changes, so that each block is measured in one chain: a
/// block's region is one chain (`region_tree::block_chains`), and small functions inlined
/// one after another in straight code (`get(a, 1) + get(a, 9)`) would otherwise fall into
/// one region, their caller's or one of theirs. A block is cut before the first measured
/// instruction of a new chain, or before the instructions of that chain that lead to it
/// (its address, its arguments).
///
/// Copies of one inlined call's code laid one after another (a loop around the call
/// unrolled whole) have one chain. The blocks are walked in reverse post-order (loops' back
/// edges left out), each inlined call open along the path with the measured instructions
/// its code made so far; the call's first instruction on the path made again (the same
/// calls below it, source position, opcode and loop), with code of another line in between
/// and nothing of another loop, starts a new copy of it, and so does any of its
/// instructions made again after the caller's code that computes its operands. (One line
/// repeated alone is what one statement split into several accesses, or a macro, looks
/// like; code of a loop in between is what a loop's peeled iteration looks like; code at a
/// line where the source has a loop is a loop unrolled whole; line 0 is code merged from
/// several positions.) Copies are cut apart and returned: each instruction of the second
/// copy on, with its [`CallCopy`].
///
/// # Safety
/// `func` must be a function with a body in a valid module, not yet instrumented.
unsafe fn split_where_inlined_calls_change(
    func: LLVMValueRef,
    data_layout: LLVMTargetDataRef,
    written: &WrittenSource,
) -> HashMap<LLVMValueRef, CallCopy> {
    let cfg = FunctionCfg::new(func);
    let forest = find_loops(&cfg.successors, 0);
    let order = region_tree::reverse_post_order(&cfg.successors);
    let mut position = vec![usize::MAX; cfg.blocks.len()];
    for (i, &b) in order.iter().enumerate() {
        position[b] = i;
    }
    let predecessors = crate::loops::predecessors(&cfg.successors);
    let mut sites = InlineSites::default();
    let loop_code = loop_code_of_inlined_calls(&cfg, &forest, &mut sites, data_layout);
    let mut state_out: Vec<Option<Vec<OpenCall>>> = vec![None; cfg.blocks.len()];
    let mut next_copy: HashMap<region_tree::Site, u32> = HashMap::new();
    let mut copies = HashMap::new();
    let mut cuts = Vec::new();
    let mut latch_cuts = Vec::new();
    for &b in &order {
        let forward = (predecessors[b].iter())
            .filter(|&&p| position[p] < position[b])
            .filter_map(|&p| state_out[p].as_ref());
        let mut stack = merge_open_calls(forward);
        // What the calls open as the block starts made before it.
        let made_before: Vec<(region_tree::Site, Vec<Position>)> = (stack.iter())
            .map(|open| {
                let own = (open.seen.iter()).filter(|k| k.0.is_empty());
                (open.site, own.map(|k| (k.1, k.2, k.3)).collect())
            })
            .collect();
        let innermost_loop = forest.innermost[b];
        // Each instruction with its chain (when it has a location).
        let mut located: Vec<(LLVMValueRef, Option<Vec<region_tree::Site>>)> = Vec::new();
        // The source position and opcode of each measured one.
        let mut positions: Vec<Option<Position>> = Vec::new();
        // The last measured instruction: its index in `located`, chain and copy.
        let mut last: Option<(usize, Vec<region_tree::Site>, Option<CallCopy>)> = None;
        let mut starts = Vec::new();
        for inst in ir::instructions(cfg.blocks[b]) {
            let op = ir::opcode(inst);
            if op == LLVMOpcode::LLVMPHI || !LLVMIsATerminatorInst(inst).is_null() {
                continue;
            }
            let chain = sites.location(inst).map(|l| l.sites);
            located.push((inst, chain.clone()));
            positions.push(None);
            let Some(chain) = chain else { continue };
            let call = segments::calls_other_code(inst);
            if !call && classify_access(inst, data_layout).is_none() {
                if let Some(copy) = copy_along(&stack, &chain) {
                    copies.insert(inst, copy);
                }
                continue;
            }
            // The calls left since the last instruction are over; those entered begin.
            let kept = (stack.iter().zip(&chain))
                .take_while(|(open, &site)| open.site == site)
                .count();
            stack.truncate(kept);
            while stack.len() < chain.len() {
                stack.push(OpenCall::new(chain[stack.len()]));
            }
            let own = LLVMInstructionGetDebugLoc(inst);
            let (line, column) = (LLVMDILocationGetLine(own), LLVMDILocationGetColumn(own));
            *positions.last_mut().expect("pushed above") = Some((line, column, op));
            let key = |depth: usize| -> CopyKey {
                (
                    chain[depth + 1..].to_vec(),
                    line,
                    column,
                    op,
                    innermost_loop,
                )
            };
            // Calls whose own loops hold this instruction are not copied by its repeats, nor
            // are any when its function's source has a loop at its line (a loop the
            // optimiser unrolled whole repeats its body's code in straight code).
            let own_function = chain.last().map_or(LLVMGetSubprogram(func), |&site| {
                sites.sites[site as usize].callee
            });
            let in_written_loop = (written.loops(own_function).iter())
                .any(|&(first, last)| (first..=last).contains(&line));
            let in_own_loop = if in_written_loop {
                chain.len()
            } else {
                (loop_code.get(&(chain.clone(), line, column, op as u32)))
                    .copied()
                    .unwrap_or(0)
            };
            let here = located.len() - 1;
            // The same position again after the caller's code that computes this
            // instruction's operands (an unrolled loop's next call, its index computed
            // between the two): the call returned and was called again.
            let called_again = |d: usize| {
                let open = &stack[d];
                (open.seen.iter().rposition(|k| *k == key(d))).is_some_and(|last| {
                    let (block, at) = open.seen_at[last];
                    block == b && fed_by_code_outside(inst, &located, at, &chain[..=d])
                })
            };
            // Line 0 is no position: the optimiser gives it to code it merged from several
            // (two loads of different statements hoisted into one).
            let positioned = line != 0;
            if let Some(depth) = (in_own_loop..chain.len())
                .filter(|_| positioned)
                .find(|&d| starts_copy(&stack[d].seen, &key(d)) || called_again(d))
            {
                let number = next_copy.entry(chain[depth]).or_insert(0);
                *number += 1;
                stack[depth].copy = *number;
                stack[depth].seen.clear();
                stack[depth].seen_at.clear();
                stack.truncate(depth + 1);
                while stack.len() < chain.len() {
                    stack.push(OpenCall::new(chain[stack.len()]));
                }
            }
            for (d, open) in stack.iter_mut().enumerate().filter(|_| positioned) {
                open.seen.push(key(d));
                open.seen_at.push((b, here));
            }
            let copy = copy_along(&stack, &chain);
            if let Some(copy) = copy {
                copies.insert(inst, copy);
            }
            if let Some((previous, previous_chain, previous_copy)) = &last {
                if *previous_chain != chain || *previous_copy != copy {
                    starts.push(Start {
                        previous: *previous,
                        here,
                        chain: chain.clone(),
                        copy,
                        from: (previous_chain.clone(), *previous_copy),
                    });
                }
            }
            last = Some((here, chain, copy));
        }
        // The caller's code scheduled into a call's (a store of the caller's between two of
        // the callee's, where the optimiser merged neighbouring stores): the call goes on
        // after it, the same copy, making none of the accesses it made before again (which
        // is what calls laid side by side look like), so it is no new call. No cut around
        // it: its block is the call's.
        let mut i = 0;
        while i + 1 < starts.len() {
            let (out, back) = (&starts[i], &starts[i + 1]);
            let (call, call_copy) = &out.from;
            let resumed_until = starts.get(i + 2).map_or(located.len(), |next| next.here);
            // Made before the interruption in this block, or before the block by the call
            // open as it starts (the test of a rotated loop's condition at the block's end,
            // the call's rest at its start: two calls).
            let open_before = (!call.is_empty()
                && made_before.len() >= call.len()
                && made_before.iter().zip(call).all(|((site, _), c)| site == c))
            .then(|| &made_before[call.len() - 1].1);
            let made_again = (back.here..resumed_until).any(|j| {
                positions[j].is_some_and(|p| {
                    (0..=out.previous)
                        .any(|k| positions[k] == Some(p) && located[k].1.as_ref() == Some(call))
                        || open_before.is_some_and(|made| made.contains(&p))
                })
            });
            if out.chain.len() < call.len()
                && call.starts_with(&out.chain)
                && back.from.0 == out.chain
                && back.chain == *call
                && back.copy == *call_copy
                && !made_again
            {
                starts.drain(i..i + 2);
            } else {
                i += 1;
            }
        }
        state_out[b] = Some(stack);
        // A loop's back edge whose block ends an inlined call inside the loop (its last
        // measured instruction the call's, its branch the loop's: the call's `return`
        // and the loop's latch in one block) is cut apart after the call's code, so that
        // the call's blocks hold no iteration of a loop around it.
        let term = LLVMGetBasicBlockTerminator(cfg.blocks[b]);
        let back_edge = (forest.loops.iter())
            .any(|l| cfg.successors[b].contains(&l.header) && l.blocks.binary_search(&b).is_ok());
        if let (true, Some((at, chain, _))) = (back_edge && !term.is_null(), &last) {
            let loop_chain = sites.location(term).map(|l| l.sites).unwrap_or_default();
            if loop_chain.len() < chain.len() && chain.starts_with(&loop_chain) {
                // The call's own instructions after its last measured one stay with it.
                let mut tail = at + 1;
                while (located.get(tail)).is_some_and(|(_, c)| c.as_ref() == Some(chain)) {
                    tail += 1;
                }
                latch_cuts.push(located.get(tail).map_or(term, |&(inst, _)| inst));
            }
        }
        // Cut before each start, or before the unmeasured instructions of its chain (or
        // without a location) that precede it, back to the measured instruction before;
        // never before an `alloca` (one out of the entry block would be a dynamic one).
        let last_alloca =
            (located.iter()).rposition(|&(inst, _)| ir::opcode(inst) == LLVMOpcode::LLVMAlloca);
        for Start {
            previous,
            here,
            chain,
            ..
        } in starts
        {
            if last_alloca.is_some_and(|a| a >= here) {
                continue;
            }
            let mut at = here;
            while at > previous + 1
                && last_alloca.is_none_or(|a| a < at - 1)
                && located[at - 1].1.as_ref().is_none_or(|c| *c == chain)
            {
                at -= 1;
            }
            cuts.push(located[at].0);
        }
    }
    for inst in cuts {
        if ir::opcode(inst) != LLVMOpcode::LLVMLandingPad {
            kage_split_block_before(inst);
        }
    }
    // After the other cuts: each of these is the last cut of its block.
    for inst in latch_cuts {
        kage_split_block_before(inst);
    }
    copies
}

/// The measured instructions found in a loop of an inlined call's own code, by chain,
/// source position and opcode, each with how many of its chain's calls the loop lies in
/// (the loop's instructions all share that prefix of their chains). Such an instruction met
/// again is a copy of that loop's body (an unrolled or vectorised loop's remainder, its
/// unrolled iterations), not of the calls around the loop.
///
/// # Safety
/// `cfg` is a function's, not yet instrumented; `sites` numbers its inlined calls.
unsafe fn loop_code_of_inlined_calls(
    cfg: &FunctionCfg,
    forest: &LoopForest,
    sites: &mut InlineSites,
    data_layout: LLVMTargetDataRef,
) -> HashMap<(Vec<region_tree::Site>, u32, u32, u32), usize> {
    let mut found = HashMap::new();
    for lp in &forest.loops {
        let mut common: Option<Vec<region_tree::Site>> = None;
        let mut measured = Vec::new();
        for &b in &lp.blocks {
            for inst in ir::instructions(cfg.blocks[b]) {
                let Some(chain) = sites.location(inst).map(|l| l.sites) else {
                    continue;
                };
                let prefix = common.get_or_insert_with(|| chain.clone());
                let shared = region_tree::common_prefix(prefix, &chain);
                prefix.truncate(shared);
                if segments::calls_other_code(inst) || classify_access(inst, data_layout).is_some()
                {
                    let own = LLVMInstructionGetDebugLoc(inst);
                    let (line, column) = (LLVMDILocationGetLine(own), LLVMDILocationGetColumn(own));
                    measured.push((chain, line, column, ir::opcode(inst) as u32));
                }
            }
        }
        let depth = common.map_or(0, |c| c.len());
        if depth == 0 {
            continue;
        }
        for key in measured {
            let at = found.entry(key).or_insert(0);
            *at = depth.max(*at);
        }
    }
    found
}

/// The inlined calls open where the paths from `states` (the forward predecessors') meet:
/// the longest path's, each call's copy the highest any path has (a copy that began on one
/// branch of its code goes on after the join).
fn merge_open_calls<'a>(states: impl Iterator<Item = &'a Vec<OpenCall>>) -> Vec<OpenCall> {
    let states: Vec<&Vec<OpenCall>> = states.collect();
    let Some(longest) = states.iter().max_by_key(|s| s.len()) else {
        return Vec::new();
    };
    let mut merged: Vec<OpenCall> = (*longest).clone();
    for other in &states {
        for (d, open) in other.iter().enumerate() {
            if merged.get(d).is_none_or(|m| m.site != open.site) {
                break;
            }
            if open.copy > merged[d].copy
                || (open.copy == merged[d].copy && open.seen.len() > merged[d].seen.len())
            {
                merged[d] = open.clone();
            }
        }
    }
    merged
}

/// The copy an instruction of `chain` is in, given the calls open along the path: the
/// outermost of its calls that is not the first copy.
fn copy_along(stack: &[OpenCall], chain: &[region_tree::Site]) -> Option<CallCopy> {
    (stack.iter().zip(chain))
        .take_while(|(open, &site)| open.site == site)
        .position(|(open, _)| open.copy != 0)
        .map(|depth| (depth, stack[depth].copy))
}

/// Whether `inst` uses, directly or through instructions of its block, a value computed after
/// `located[after]` by code outside the call `call` (a chain of inlined calls, outermost
/// first): its caller's. Instructions without a location are looked through.
///
/// # Safety
/// `inst` and the instructions of `located` are one block's, in order.
unsafe fn fed_by_code_outside(
    inst: LLVMValueRef,
    located: &[(LLVMValueRef, Option<Vec<region_tree::Site>>)],
    after: usize,
    call: &[region_tree::Site],
) -> bool {
    let since = &located[after + 1..];
    let mut pending = vec![inst];
    let mut visited = HashSet::new();
    while let Some(value) = pending.pop() {
        for i in 0..LLVMGetNumOperands(value).max(0) as u32 {
            let operand = LLVMGetOperand(value, i);
            if operand.is_null() || !visited.insert(operand) {
                continue;
            }
            let Some((_, chain)) = since.iter().find(|(made, _)| *made == operand) else {
                continue;
            };
            match chain {
                Some(chain) if !chain.starts_with(call) => return true,
                _ => pending.push(operand),
            }
        }
    }
    false
}

/// Whether `key` starts a new copy of a call whose copy so far made `seen`: the call began
/// with it, with code of another line since and nothing of another loop. (Not any key
/// made again, nor after another position of the same line: a macro's accesses share one
/// position, its arguments' calls their own, so a statement such as Lua's
/// `if (luaV_fastget(...))` makes a load, a call and the same load again.)
fn starts_copy(seen: &[CopyKey], key: &CopyKey) -> bool {
    if seen.first() != Some(key) {
        return false;
    }
    let Some(last) = seen.iter().rposition(|k| k == key) else {
        return false;
    };
    let since = &seen[last + 1..];
    !since.is_empty() && since.iter().all(|k| k.4 == key.4) && since.iter().any(|k| k.1 != key.1)
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
    /// What says where each loop of `forest` is in the source, besides its code's lines.
    loops_as_written: Vec<LoopAsWritten>,
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
    pub unsafe fn new(
        func: LLVMValueRef,
        base: u32,
        inlined_regions: bool,
        written: &WrittenSource,
    ) -> Self {
        let data_layout = LLVMGetModuleDataLayout(LLVMGetGlobalParent(func));
        let copies = if inlined_regions {
            split_where_inlined_calls_change(func, data_layout, written)
        } else {
            HashMap::new()
        };
        let cfg = FunctionCfg::new(func);
        let mut forest = find_loops(&cfg.successors, 0);
        let mut sites = InlineSites::default();
        let mut locations = Vec::with_capacity(cfg.blocks.len());
        // Each block's located accesses and calls: what decides its chain (see below).
        let mut measured_locations = Vec::with_capacity(cfg.blocks.len());
        // Whether each block makes a memory access or a call (see
        // region_tree::drop_unmeasured_calls).
        let mut measured = vec![false; cfg.blocks.len()];
        // Whether each block's measured instructions are all loads (one at least).
        let mut only_loads = vec![true; cfg.blocks.len()];
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
                if is_measured && ir::opcode(inst) != LLVMOpcode::LLVMLoad {
                    only_loads[b] = false;
                }
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
            only_loads[b] &= measured[b];
            locations.push(block_locations);
            measured_locations.push(block_measured);
        }
        let declared: Vec<Option<DeclaredLoop>> = (forest.loops.iter())
            .map(|lp| debuginfo::declared_loop(&cfg, &lp.blocks, lp.header))
            .collect();
        let mut back_edges =
            region_tree::back_edge_chains(&forest, &cfg.successors, &terminator_chains);
        let declared_calls: Vec<Option<Vec<(u32, u32)>>> = (declared.iter())
            .map(|d| d.as_ref().map(|d| d.calls.clone()))
            .collect();
        let placed = region_tree::declared_back_edges(
            &forest,
            &locations,
            &mut back_edges,
            &declared_calls,
            |site| {
                let site = &sites.sites[site as usize];
                (site.call_line, site.call_column)
            },
        );
        let own_subprogram = LLVMGetSubprogram(func);
        region_tree::written_back_edges(&forest, &locations, &mut back_edges, &placed, |site| {
            let subprogram = site.map_or(own_subprogram, |s| sites.sites[s as usize].callee);
            written.function_end(subprogram)?;
            Some(written.loops(subprogram))
        });
        // A block's chain is the one of most of its accesses and calls, not of most of its
        // instructions: an inlined callee's arithmetic scheduled into the block with its
        // caller's load (a hash computed before the first probe) must not take the load.
        let deciding: Vec<Vec<Location>> = (measured_locations.into_iter().zip(&locations))
            .map(|(m, all)| if m.is_empty() { all.clone() } else { m })
            .collect();
        let mut chains = region_tree::block_chains(&cfg.successors, &deciding);
        // LLVM gives code merged from several calls a call site of line 0 when they were on
        // different lines, of column 0 when on one line (DILocation::getMergedLocation); a
        // column 0 says so only where calls have columns (not under -gno-column-info).
        let columns = sites.sites.iter().any(|s| s.call_column != 0);
        let merged = |site: &debuginfo::InlineSite| {
            site.call_line == 0 || (columns && site.call_column == 0)
        };
        // A call merged from calls on one line whose own code remains: another call of the
        // same function on that line that is not merged. (Calls merged from several lines
        // may have been merged whole, their own code gone: the other calls of the function
        // around are other calls.)
        let piece = |m: &debuginfo::InlineSite| {
            m.call_line != 0
                && merged(m)
                && sites.sites.iter().any(|s| {
                    !merged(s)
                        && s.callee == m.callee
                        && s.parent == m.parent
                        && s.call_line == m.call_line
                })
        };
        // With KAGE_PASS_EXPLAIN=1, which code changed hands and why.
        let explain = std::env::var_os(hoist::EXPLAIN_VARIABLE).is_some_and(|v| v == "1");
        let explain_changes = |before: &[Vec<region_tree::Site>],
                               after: &[Vec<region_tree::Site>],
                               why: &str| {
            for (b, (old, new)) in before.iter().zip(after).enumerate() {
                let longer = if old.len() >= new.len() { old } else { new };
                if old != new {
                    let site = &sites.sites[longer[region_tree::common_prefix(old, new)] as usize];
                    eprintln!(
                        "kage-pass: {}: block {b}: code of {} called at line {}:{} {why}",
                        ir::value_name(func),
                        debuginfo::subprogram_identity(site.callee).0,
                        site.call_line,
                        site.call_column
                    );
                }
            }
        };
        // Runs a fold of the chains, saying (with KAGE_PASS_EXPLAIN=1) which code it moved.
        let explained =
            |chains: &mut [Vec<region_tree::Site>],
             why: &str,
             fold: &mut dyn FnMut(&mut [Vec<region_tree::Site>])| {
                let before = explain.then(|| chains.to_vec());
                fold(chains);
                if let Some(before) = before {
                    explain_changes(&before, chains, why);
                }
            };
        explained(
            &mut chains,
            "is its caller's: merged from several calls",
            &mut |chains| {
                region_tree::fold_merged_call_tails(
                    chains,
                    &mut back_edges,
                    &cfg.successors,
                    |site| merged(&sites.sites[site as usize]),
                    |site| piece(&sites.sites[site as usize]),
                    |site| sites.sites[site as usize].callee,
                )
            },
        );
        explained(
            &mut chains,
            "holds its caller's code at a loop's exit",
            &mut |chains| {
                region_tree::absorb_loop_exits_in_calls(
                    &forest,
                    chains,
                    &cfg.successors,
                    &back_edges,
                )
            },
        );
        explained(
            &mut chains,
            "holds its caller's code scheduled inside it",
            &mut |chains| {
                region_tree::absorb_caller_code_scheduled_in_calls(
                    &forest,
                    chains,
                    &cfg.successors,
                    &terminator_chains,
                )
            },
        );
        explained(
            &mut chains,
            "holds its caller's code placed between its pieces",
            &mut |chains| {
                region_tree::absorb_caller_code_between_call_pieces(
                    &forest,
                    chains,
                    &cfg.successors,
                    &deciding,
                )
            },
        );
        drop_unmeasured(
            &forest,
            &mut chains,
            &mut back_edges,
            &cfg.successors,
            &measured,
        );
        if !inlined_regions {
            chains.iter_mut().for_each(Vec::clear);
            back_edges.iter_mut().flatten().for_each(Vec::clear);
        }
        let calls: Vec<InlinedCall> = (sites.sites.iter())
            .map(|site| {
                let (name, symbol, file, line) = debuginfo::subprogram_identity(site.callee);
                InlinedCall {
                    callee: FunctionIdentity {
                        name,
                        symbol,
                        file,
                        declared_line: Some(line).filter(|&l| l != 0),
                        written_end: written.function_end(site.callee),
                    },
                    call: CallSite {
                        file: site.call_file.clone(),
                        line: site.call_line,
                        column: site.call_column,
                    },
                }
            })
            .collect();
        let as_written = |tree: &RegionTree, declared: Vec<Option<DeclaredLoop>>| {
            (declared.into_iter().enumerate())
                .map(|(k, declared)| {
                    // The function whose source the loop's node is in.
                    let owner = (tree.nodes[tree.loop_node[k]].context.last())
                        .map_or(own_subprogram, |&site| sites.sites[site as usize].callee);
                    LoopAsWritten {
                        declared,
                        written: (written.loops(owner).iter())
                            .map(|&(first, last)| LineRange { first, last })
                            .collect(),
                    }
                })
                .collect::<Vec<_>>()
        };
        let mut tree = region_tree::build(&forest, &chains, &back_edges);
        let mut loops_as_written = as_written(&tree, declared);
        // The loops the optimiser cut out of a source loop are its code.
        let pieces = regions::loop_pieces(&tree, &forest, &locations, &calls, &loops_as_written);
        if !pieces.is_empty() {
            let (joined, index) = forest.joining(&pieces);
            let kept = |k: &usize| index[*k].is_some();
            let declared = (loops_as_written.into_iter().enumerate())
                .filter(|(k, _)| kept(k))
                .map(|(_, l)| l.declared)
                .collect();
            back_edges = (back_edges.into_iter().enumerate())
                .filter(|(k, _)| kept(k))
                .map(|(_, b)| b)
                .collect();
            forest = joined;
            tree = region_tree::build(&forest, &chains, &back_edges);
            loops_as_written = as_written(&tree, declared);
        }
        let dead_ends: Vec<bool> = (cfg.blocks.iter())
            .map(|&b| {
                let terminator = LLVMGetBasicBlockTerminator(b);
                !terminator.is_null()
                    && LLVMGetInstructionOpcode(terminator) == LLVMOpcode::LLVMUnreachable
            })
            .collect();
        let mut folded = false;
        explained(
            &mut chains,
            "is its caller's: moved out of a loop",
            &mut |chains| {
                folded |= region_tree::fold_moved_call_pieces(
                    &forest,
                    &cfg.successors,
                    (&dead_ends, &only_loads),
                    chains,
                    &back_edges,
                    &deciding,
                    |merged_site, other| {
                        let (m, o) = (
                            &sites.sites[merged_site as usize],
                            &sites.sites[other as usize],
                        );
                        merged(m) && o.callee == m.callee && o.parent == m.parent
                    },
                )
            },
        );
        explained(
            &mut chains,
            "is its caller's: a call begun in the iteration before",
            &mut |chains| {
                folded |= region_tree::fold_calls_continued_across_iterations(
                    &forest,
                    &cfg.successors,
                    chains,
                    &back_edges,
                )
            },
        );
        explained(
            &mut chains,
            "is its caller's: a load hoisted above the caller's code",
            &mut |chains| {
                folded |= region_tree::fold_hoisted_call_loads(
                    &cfg.successors,
                    &deciding,
                    &only_loads,
                    chains,
                )
            },
        );
        explained(
            &mut chains,
            "is its caller's: sunk past another call of the caller's",
            &mut |chains| {
                folded |= region_tree::fold_sunk_call_pieces(
                    &cfg.successors,
                    &deciding,
                    &only_loads,
                    chains,
                )
            },
        );
        if folded {
            drop_unmeasured(
                &forest,
                &mut chains,
                &mut back_edges,
                &cfg.successors,
                &measured,
            );
            let declared = (loops_as_written.into_iter()).map(|l| l.declared).collect();
            tree = region_tree::build(&forest, &chains, &back_edges);
            loops_as_written = as_written(&tree, declared);
        }
        let symbol = ir::value_name(func);
        // A leading \x01 only tells the backend not to add a prefix; it is not part of the name.
        let symbol = symbol.strip_prefix('\u{1}').unwrap_or(&symbol).to_string();
        let identity = FunctionIdentity {
            name: debuginfo::display_name(&symbol),
            symbol,
            file: debuginfo::function_file(func),
            declared_line: debuginfo::subprogram_line(func),
            written_end: written.function_end(own_subprogram),
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
            loops_as_written,
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
    /// (nodes of [`tree`](Self::tree) whose children are folded too; folded loops have no
    /// iteration hook) counted as their parents': a tool that reports those regions itself.
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
        (region_tree::settle_points(tree, &self.forest, &self.cfg.successors, folded).into_iter())
            .map(|(block, node)| (block, self.slots.base + node as u32))
            .collect()
    }

    /// The function's region tree (`slots.block_region`'s values are its nodes).
    pub fn tree(&self) -> &RegionTree {
        &self.tree
    }

    /// Each region's own reachable blocks (by tree node).
    pub fn blocks_by_region(&self) -> Vec<Vec<usize>> {
        let mut node_blocks = vec![Vec::new(); self.tree.nodes.len()];
        for b in (0..self.cfg.blocks.len()).filter(|&b| self.forest.reachable[b]) {
            node_blocks[self.tree.block_region[b]].push(b);
        }
        node_blocks
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
            &self.loops_as_written,
        )
    }
}

/// Where `__kage_func_exit` goes for a `ret`/`resume`: right before it, unless the `ret`
/// returns a `musttail` call's result, since nothing may sit between that call and the
/// `ret`; then before the call (the callee's events then nest inside nothing of ours).
unsafe fn exit_insertion_point(terminator: LLVMValueRef) -> LLVMValueRef {
    ir::musttail_call_returned_by(terminator).unwrap_or(terminator)
}

/// Leaves out the inlined calls, and the pieces of calls, that make no memory access and no
/// call ([`region_tree::drop_unmeasured_calls`], [`region_tree::drop_unmeasured_call_pieces`]).
fn drop_unmeasured(
    forest: &crate::loops::LoopForest,
    chains: &mut [Vec<region_tree::Site>],
    back_edges: &mut [Option<Vec<region_tree::Site>>],
    successors: &[Vec<usize>],
    measured: &[bool],
) {
    region_tree::drop_unmeasured_calls(chains, back_edges, measured);
    region_tree::drop_unmeasured_call_pieces(forest, chains, back_edges, successors, measured);
}
