//! Versioning one selected loop nest (docs/abi.md, "Loop nests"): the nest is cloned into an
//! instrumented version, and every loop level of both versions gets a virtual iterator, a
//! chunk end and a decision block, so that the runtime chooses the version of each chunk of
//! iterations and the program computes exactly what it computes without Kage.
//!
//! The shape, per loop level `k` and version `v` (O: the original, I: the instrumented
//! clone):
//!
//! ```text
//!  root's entry ──> sampling_over ? (count the entry; P, the pristine copy) : N(0,O)
//!  entry edges ──> N(k,v): vi=0; ce=(root: enter() | I: DECIDE_NOW | O: NEVER); ver=v
//!                    └──> Dispatch(k): switch ver ──> loop entry of O or I
//!  P: the nest as it was, a counter per level; its ways out add them to `unsampled`
//!  header(k,v): ... the loop's own test `cond` ...
//!       combined form: br (cond && vi != ce), T(k,v), X(k,v)
//!       X(k,v): br cond, D(k), <exit>            (a chunk ended / the loop ended)
//!  T(k,v): [I: iter(k, vi)]; vi += 1; br <first block of the iteration>
//!  D(k): d = decide(k, vi); ce = chunk_end(vi, d); ver = d & 1;
//!        RESYNC: ce(j) = vi(j) for every enclosing level j; br Dispatch(k)
//!  exit edges ──> Y: total(k) += vi for each level left; root left: exit(totals)
//! ```
//!
//! The combined form keeps the original version's loop a single-exit loop whose trip count
//! is `min(its own, ce - vi)`, so it still vectorises; it re-runs the header's test after a
//! decision, so it is used only where the header has no side effects (loads, arithmetic,
//! compares). Elsewhere (a `do` loop, a test that calls or stores) the generic form checks
//! first, in a block `C(k,v)` that the back edges and the dispatch enter: `br vi != ce,
//! header, D(k)`. `Dispatch(k)` is the only way into a level's loops, so each version's loop
//! stays a natural loop with one entry, inside the chunk loop `Dispatch → … → D → Dispatch`.
//!
//! Switching versions at a header is sound because every SSA value that crosses a block
//! boundary inside the nest (and every PHI in it or at its exits) is first demoted to a stack
//! slot (`kage_demote_to_stack`), which SROA promotes again after the pass: at a header no
//! value of the nest is live but in memory, which both versions share.

use std::collections::{HashMap, HashSet};

use kage_abi::loops::{DECIDE_NOW, INSTRUMENTED, NEVER, ORIGINAL, RESYNC, UNBOUNDED};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMAtomicOrdering, LLVMAtomicRMWBinOp, LLVMIntPredicate, LLVMLinkage, LLVMOpcode};

use crate::debuginfo::HookLocations;
use crate::ir::{self, c_string, FunctionCfg, RuntimeFunction};
use crate::loops::find_loops;

extern "C" {
    /// Demotes an instruction (or PHI) to a stack slot; null when it cannot (src/shim.cpp).
    fn kage_demote_to_stack(value: LLVMValueRef) -> LLVMValueRef;
    /// Gives a loop (by its back-edge branch) an ID of its own that forbids vectorising,
    /// interleaving, unrolling and distributing it (src/shim.cpp).
    fn kage_keep_loop_as_written(branch: LLVMValueRef);
    fn kage_copy_function(function: LLVMValueRef, name: *const std::ffi::c_char) -> LLVMValueRef;
    fn kage_fresh_loop_id(branch: LLVMValueRef);
}

/// The weight of the usual side of a branch whose other side runs only while sampling: the
/// instrumented version and the runtime's calls are cold.
const COLD: u64 = 1 << 16;

/// Where `kage_nest.sampling_over` is.
const SAMPLING_OVER_OFFSET: u64 = kage_abi::nest_layout::NEST_FIELDS[6] as u64;

/// The runtime's entry points and the types the versions use.
pub struct NestCalls {
    pub enter: RuntimeFunction,
    pub decide: RuntimeFunction,
    pub iter: RuntimeFunction,
    pub exit: RuntimeFunction,
    /// `__kage_loops_trip`, in builds whose instrumented versions report accesses.
    pub trip: Option<RuntimeFunction>,
    /// `llvm.addressofreturnaddress.p0` and its type.
    pub frame_address: (LLVMValueRef, LLVMTypeRef),
}

/// One loop of the nest, as found before versioning.
#[derive(Debug, Clone)]
pub struct Level {
    /// Index of the enclosing level; `None` for the root.
    pub parent: Option<usize>,
    pub header: LLVMBasicBlockRef,
    pub blocks: HashSet<LLVMBasicBlockRef>,
}

/// The nest rooted at the loop whose header is `header` in `func`, demoted so that no
/// value crosses a block boundary inside it; its levels in pre-order. `Err` says why it
/// cannot be versioned.
///
/// # Safety
/// `func` must be a valid function with a body, `header` one of its blocks.
pub unsafe fn prepare(func: LLVMValueRef, header: LLVMBasicBlockRef) -> Result<Vec<Level>, String> {
    let blocks = nest_blocks(func, header).ok_or("the loop was not found")?;
    for &b in &blocks {
        let term = LLVMGetBasicBlockTerminator(b);
        if term.is_null() {
            return Err("a block has no terminator".into());
        }
        match ir::opcode(term) {
            LLVMOpcode::LLVMIndirectBr | LLVMOpcode::LLVMCallBr => {
                return Err("it contains an indirect branch or asm goto".into())
            }
            LLVMOpcode::LLVMCatchSwitch | LLVMOpcode::LLVMCatchRet | LLVMOpcode::LLVMCleanupRet => {
                return Err("it contains Windows EH funclets".into())
            }
            _ => {}
        }
    }
    // PHIs in the nest and at its exits first (their demotion adds loads and stores), then
    // every value used in another block than its own.
    let mut phis = Vec::new();
    for &b in &blocks {
        let term = LLVMGetBasicBlockTerminator(b);
        let exits = (0..LLVMGetNumSuccessors(term))
            .map(|i| LLVMGetSuccessor(term, i))
            .filter(|s| !blocks.contains(s));
        for block in std::iter::once(b).chain(exits) {
            for inst in ir::instructions(block) {
                if ir::opcode(inst) == LLVMOpcode::LLVMPHI && !phis.contains(&inst) {
                    phis.push(inst);
                }
            }
        }
    }
    for phi in phis {
        if kage_demote_to_stack(phi).is_null() {
            return Err("a PHI node cannot be demoted".into());
        }
    }
    let blocks = nest_blocks(func, header).ok_or("the loop was lost")?;
    let mut crossing = Vec::new();
    for &b in &blocks {
        for inst in ir::instructions(b) {
            if used_outside_block(inst) {
                crossing.push(inst);
            }
        }
    }
    for inst in crossing {
        if kage_demote_to_stack(inst).is_null() {
            return Err("a value used across blocks cannot be demoted (a token)".into());
        }
    }
    // Demoting an `invoke`'s result may split an edge: read the loops again.
    levels(func, header).ok_or_else(|| "the loop was lost".into())
}

/// The blocks of the loop headed by `header`.
unsafe fn nest_blocks(
    func: LLVMValueRef,
    header: LLVMBasicBlockRef,
) -> Option<HashSet<LLVMBasicBlockRef>> {
    Some(levels(func, header)?.swap_remove(0).blocks)
}

/// The loop headed by `header` and the loops inside it, in pre-order.
///
/// # Safety
/// `func` is a valid function with a body, `header` one of its blocks.
pub unsafe fn levels(func: LLVMValueRef, header: LLVMBasicBlockRef) -> Option<Vec<Level>> {
    let cfg = FunctionCfg::new(func);
    let forest = find_loops(&cfg.successors, 0);
    let root = forest
        .loops
        .iter()
        .position(|l| cfg.blocks[l.header] == header)?;
    let mut index = HashMap::new();
    let mut out = Vec::new();
    for (k, lp) in forest.loops.iter().enumerate() {
        let inside = k == root || lp.parent.is_some_and(|p| index.contains_key(&p));
        if !inside {
            continue;
        }
        index.insert(k, out.len());
        out.push(Level {
            parent: if k == root {
                None
            } else {
                lp.parent.and_then(|p| index.get(&p).copied())
            },
            header: cfg.blocks[lp.header],
            blocks: lp.blocks.iter().map(|&b| cfg.blocks[b]).collect(),
        });
    }
    Some(out)
}

/// Whether any user of `inst` lies in another block (a PHI user counts: it reads the value
/// at the end of a predecessor).
unsafe fn used_outside_block(inst: LLVMValueRef) -> bool {
    let block = LLVMGetInstructionParent(inst);
    let mut usage = LLVMGetFirstUse(inst);
    while !usage.is_null() {
        let user = LLVMGetUser(usage);
        if LLVMIsAInstruction(user).is_null()
            || LLVMGetInstructionParent(user) != block
            || ir::opcode(user) == LLVMOpcode::LLVMPHI
        {
            return true;
        }
        usage = LLVMGetNextUse(usage);
    }
    false
}

/// Versions the prepared nest `levels` of `func`; `nest` is its descriptor global and
/// `unsampled` its counters of the entries that skip the runtime. Returns the instrumented
/// version's copy of each of the nest's instructions.
///
/// # Safety
/// `levels` must come from [`prepare`] on `func`, with nothing changed since.
pub unsafe fn version(
    module: LLVMModuleRef,
    func: LLVMValueRef,
    levels: &[Level],
    nest: LLVMValueRef,
    unsampled: LLVMValueRef,
    calls: &NestCalls,
) -> HashMap<LLVMValueRef, LLVMValueRef> {
    let context = LLVMGetModuleContext(module);
    let i64t = LLVMInt64TypeInContext(context);
    let i32t = LLVMInt32TypeInContext(context);
    let builder = LLVMCreateBuilderInContext(context);
    let locations = HookLocations::new(module, func);
    let root_blocks: Vec<LLVMBasicBlockRef> = {
        // Layout order, for a readable clone.
        let mut all = Vec::new();
        let mut b = LLVMGetFirstBasicBlock(func);
        while !b.is_null() {
            if levels[0].blocks.contains(&b) {
                all.push(b);
            }
            b = LLVMGetNextBasicBlock(b);
        }
        all
    };
    let single_use_calls = calls_of_single_use_callees(&root_blocks);
    let (clone, copies) = clone_blocks(func, &root_blocks, builder, "kage.instrumented");
    call_copies_of_callees(&single_use_calls, &copies, "kage.instrumented");
    // The nest as the program wrote it, for the entries that come once sampling is over.
    let (pristine_map, pristine_copies) =
        clone_blocks(func, &root_blocks, builder, "kage.pristine");
    call_copies_of_callees(&single_use_calls, &pristine_copies, "kage.pristine");
    for &b in &root_blocks {
        kage_fresh_loop_id(LLVMGetBasicBlockTerminator(pristine_map[&b]));
    }

    // The versions' views of the levels.
    let versions: [(u64, Vec<Level>); 2] = [
        (ORIGINAL, levels.to_vec()),
        (
            INSTRUMENTED,
            levels
                .iter()
                .map(|l| Level {
                    parent: l.parent,
                    header: clone[&l.header],
                    blocks: l.blocks.iter().map(|b| clone[b]).collect(),
                })
                .collect(),
        ),
    ];
    // Which levels the source wrote as `for`, `while` or `do` (clang marks their back edges
    // with `llvm.loop`), read before the instrumented version gets marks of its own.
    let structured: Vec<bool> = (levels.iter())
        .map(|level| {
            (level.blocks.iter()).any(|&b| {
                let term = LLVMGetBasicBlockTerminator(b);
                successors(term).contains(&level.header) && has_loop_metadata(term)
            })
        })
        .collect();
    // The instrumented version runs one source iteration at a time.
    for level in &versions[1].1 {
        for &b in &level.blocks {
            let term = LLVMGetBasicBlockTerminator(b);
            if successors(term).contains(&level.header) {
                kage_keep_loop_as_written(term);
            }
        }
    }

    // Per level: virtual iterator, chunk end, current version, iterations of this entry.
    let entry = LLVMGetEntryBasicBlock(func);
    let mut at = LLVMGetFirstInstruction(entry);
    while !at.is_null() && ir::opcode(at) == LLVMOpcode::LLVMAlloca {
        at = LLVMGetNextInstruction(at);
    }
    if at.is_null() {
        LLVMPositionBuilderAtEnd(builder, entry);
    } else {
        LLVMPositionBuilderBefore(builder, at);
    }
    let slot = |name: String| LLVMBuildAlloca(builder, i64t, c_string(&name).as_ptr());
    let n = levels.len();
    let vi: Vec<_> = (0..n).map(|k| slot(format!("kage.vi{k}"))).collect();
    let ce: Vec<_> = (0..n).map(|k| slot(format!("kage.ce{k}"))).collect();
    let ver: Vec<_> = (0..n).map(|k| slot(format!("kage.ver{k}"))).collect();
    let total: Vec<_> = (0..n).map(|k| slot(format!("kage.iters{k}"))).collect();
    let totals_type = LLVMArrayType2(i64t, n as u64);
    let totals = LLVMBuildAlloca(builder, totals_type, c"kage.iterations".as_ptr());

    let c64 = |v: u64| LLVMConstInt(i64t, v, 0);
    let new_block =
        |name: &str| LLVMAppendBasicBlockInContext(context, func, c_string(name).as_ptr());
    // Calls to the runtime take the location of the loop they serve (a function with debug
    // information needs one on every call).
    let locate =
        |near: LLVMValueRef| LLVMSetCurrentDebugLocation2(builder, locations.for_instruction(near));
    let header_of_root = levels[0].header;
    let near_root = LLVMGetBasicBlockTerminator(header_of_root);

    let depth = super::accesses::depths(levels);
    // Levels with no level inside them.
    let is_leaf: Vec<bool> = (0..n)
        .map(|k| !levels.iter().any(|l| l.parent == Some(k)))
        .collect();
    // The original's innermost loops never reach a chunk end: entered from the original
    // they run to their end (NEVER), and a decision that sends one to the original gives it
    // an unbounded chunk; the root decides its first chunk on entry. They have no check,
    // and count their iterations in a counter of their own that starts at 0 each time
    // they are entered (so that the optimiser replaces it by the trip count: no work per
    // iteration is left), added to the level's virtual iterator where they exit.
    let unchecked = |version: u64, k: usize| version == ORIGINAL && is_leaf[k];
    let run: Vec<_> = (0..n).map(|k| slot(format!("kage.run{k}"))).collect();
    // The pristine copy's iterations per level, in this entry.
    let pristine_counters: Vec<_> = (0..n).map(|k| slot(format!("kage.pristine{k}"))).collect();
    let pristine = pristine_counting(
        func,
        levels,
        &root_blocks,
        &pristine_map,
        &structured,
        unsampled,
        builder,
        pristine_counters,
    );
    // Exit edges first (the check below moves a header's exit edge behind its X block, which
    // then leads to the Y block made here).
    for (version_id, view) in &versions {
        let nest_blocks: Vec<LLVMBasicBlockRef> = view[0].blocks.iter().copied().collect();
        for b in nest_blocks {
            let term = LLVMGetBasicBlockTerminator(b);
            for i in 0..LLVMGetNumSuccessors(term) {
                let s = LLVMGetSuccessor(term, i);
                // An exception leaving the nest: nothing may come before its landing pad.
                // The entry's iterations are lost; the runtime drops the entry as dead at
                // the next one (docs/abi.md).
                if ir::is_landing_pad(s) {
                    continue;
                }
                let left: Vec<usize> = (0..n)
                    .rev()
                    .filter(|&k| view[k].blocks.contains(&b) && !view[k].blocks.contains(&s))
                    .collect();
                if left.is_empty() {
                    continue;
                }
                let y = new_block("kage.loop.exit");
                LLVMPositionBuilderAtEnd(builder, y);
                for &k in &left {
                    let mut iterations = LLVMBuildLoad2(builder, i64t, vi[k], c"".as_ptr());
                    if unchecked(*version_id, k) {
                        let this_run = LLVMBuildLoad2(builder, i64t, run[k], c"".as_ptr());
                        iterations = LLVMBuildAdd(builder, iterations, this_run, c"".as_ptr());
                        LLVMBuildStore(builder, iterations, vi[k]);
                    }
                    let sum = LLVMBuildAdd(
                        builder,
                        LLVMBuildLoad2(builder, i64t, total[k], c"".as_ptr()),
                        iterations,
                        c"".as_ptr(),
                    );
                    LLVMBuildStore(builder, sum, total[k]);
                }
                if left.contains(&0) {
                    // A sampled entry ends: the runtime hears of its iterations (an
                    // unsampled one runs the pristine copy, which counts them itself).
                    for (k, &level_total) in total.iter().enumerate() {
                        let value = LLVMBuildLoad2(builder, i64t, level_total, c"".as_ptr());
                        let mut index = [c64(0), c64(k as u64)];
                        let element = LLVMBuildInBoundsGEP2(
                            builder,
                            totals_type,
                            totals,
                            index.as_mut_ptr(),
                            2,
                            c"".as_ptr(),
                        );
                        LLVMBuildStore(builder, value, element);
                    }
                    locate(term);
                    calls.exit.call(builder, &mut [nest, totals]);
                    LLVMBuildBr(builder, s);
                    LLVMSetSuccessor(term, i, y);
                    continue;
                }
                // The level the edge stays in. An iteration of it that runs instrumented
                // goes on instrumented after an inner loop ran (part of) its entry in the
                // original: from the original's exit to the instrumented version's copy of
                // the block (every value crossing blocks is in memory, which both versions
                // share).
                let staying = (0..n)
                    .filter(|&k| view[k].blocks.contains(&s))
                    .max_by_key(|&k| depth[k])
                    .expect("an edge that leaves no level but the root's stays in one");
                let report_trips = || {
                    if let Some(trip) = &calls.trip {
                        for &k in &left {
                            let trips = LLVMBuildLoad2(builder, i64t, vi[k], c"".as_ptr());
                            let level_index = LLVMConstInt(i32t, k as u64, 0);
                            locate(term);
                            trip.call(builder, &mut [nest, level_index, trips]);
                        }
                    }
                };
                let is_header = levels.iter().any(|l| l.header == s);
                if *version_id == INSTRUMENTED {
                    report_trips();
                    LLVMBuildBr(builder, s);
                } else if is_header {
                    LLVMBuildBr(builder, s);
                } else {
                    let switch = new_block("kage.loop.resume.instrumented");
                    let running = LLVMBuildLoad2(builder, i64t, ver[staying], c"".as_ptr());
                    let instrumented = LLVMBuildICmp(
                        builder,
                        LLVMIntPredicate::LLVMIntEQ,
                        running,
                        c64(INSTRUMENTED),
                        c"".as_ptr(),
                    );
                    let resume = LLVMBuildCondBr(builder, instrumented, switch, s);
                    // Cold: only in sampled iterations (block frequencies steer register
                    // allocation towards the original's loops).
                    ir::set_branch_weights(resume, 1, COLD);
                    LLVMPositionBuilderAtEnd(builder, switch);
                    report_trips();
                    LLVMBuildBr(builder, clone[&s]);
                }
                LLVMSetSuccessor(term, i, y);
            }
        }
    }

    // Decision and dispatch blocks, one pair per level.
    let dispatch: Vec<_> = (0..n).map(|_| new_block("kage.loop.dispatch")).collect();
    let decide: Vec<_> = (0..n).map(|_| new_block("kage.loop.decide")).collect();
    // Each version's way into each level (its header, or its check block).
    let mut loop_entry = vec![[std::ptr::null_mut(); 2]; n];

    for (v, (version_id, view)) in versions.iter().enumerate() {
        for k in 0..n {
            let level = &view[k];
            let header = level.header;
            let near = LLVMGetBasicBlockTerminator(header);
            // Entry edges (from outside this level), before anything else adds edges.
            let preds = predecessors(func, header);
            let entries: Vec<(LLVMValueRef, u32)> = (preds.iter())
                .filter(|(p, _)| !level.blocks.contains(p))
                .map(|&(p, i)| (LLVMGetBasicBlockTerminator(p), i))
                .collect();
            let back_edges: Vec<(LLVMValueRef, u32)> = (preds.iter())
                .filter(|(p, _)| level.blocks.contains(p))
                .map(|&(p, i)| (LLVMGetBasicBlockTerminator(p), i))
                .collect();
            if !entries.is_empty() {
                let block = new_block("kage.loop.enter");
                LLVMPositionBuilderAtEnd(builder, block);
                LLVMBuildStore(builder, c64(0), vi[k]);
                let first_end = if k == 0 {
                    for &t in &total {
                        LLVMBuildStore(builder, c64(0), t);
                    }
                    // Once the runtime says sampling is over, entries skip it: they run the
                    // pristine copy.
                    let over_field = ir::byte_gep(builder, nest, c64(SAMPLING_OVER_OFFSET));
                    let over = LLVMBuildLoad2(builder, i32t, over_field, c"".as_ptr());
                    LLVMSetOrdering(over, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
                    LLVMSetAlignment(over, 4);
                    let over = LLVMBuildICmp(
                        builder,
                        LLVMIntPredicate::LLVMIntNE,
                        over,
                        LLVMConstInt(i32t, 0, 0),
                        c"".as_ptr(),
                    );
                    let (ask, skip) = (new_block("kage.nest.enter"), new_block("kage.nest.count"));
                    // No weights: which copy runs most depends on the program (a nest in
                    // `main` has one entry, sampled; one in a callee may have millions, all
                    // but a few pristine), and a copy the optimiser thought cold would lose
                    // its callees' inlining.
                    LLVMBuildCondBr(builder, over, skip, ask);
                    // Counted on entry, so that an entry left by an exception or a
                    // `longjmp` counts too (its iterations cannot).
                    LLVMPositionBuilderAtEnd(builder, skip);
                    add_to_unsampled(builder, unsampled, n, 0, c64(1));
                    for &counter in &pristine.counters {
                        LLVMBuildStore(builder, c64(0), counter);
                    }
                    LLVMBuildBr(builder, pristine.entry);
                    LLVMPositionBuilderAtEnd(builder, ask);
                    let (frame_fn, frame_ty) = calls.frame_address;
                    let frame = LLVMBuildCall2(
                        builder,
                        frame_ty,
                        frame_fn,
                        std::ptr::null_mut(),
                        0,
                        c"".as_ptr(),
                    );
                    locate(near_root);
                    calls.enter.call(builder, &mut [nest, frame])
                } else if *version_id == INSTRUMENTED {
                    c64(DECIDE_NOW)
                } else {
                    c64(NEVER)
                };
                LLVMBuildStore(builder, first_end, ce[k]);
                LLVMBuildStore(builder, c64(*version_id), ver[k]);
                if k == 0 {
                    // A sampled entry decides its first chunk right away, so that the
                    // original's innermost loops need no check (see below).
                    let now = LLVMBuildICmp(
                        builder,
                        LLVMIntPredicate::LLVMIntEQ,
                        first_end,
                        c64(DECIDE_NOW),
                        c"".as_ptr(),
                    );
                    LLVMBuildCondBr(builder, now, decide[k], dispatch[k]);
                } else {
                    LLVMBuildBr(builder, dispatch[k]);
                }
                for (term, i) in entries {
                    LLVMSetSuccessor(term, i, block);
                }
            }

            // The iteration check.
            let term = LLVMGetBasicBlockTerminator(header);
            let exiting = test_before_iteration(level, structured[k]);
            let counter = if unchecked(*version_id, k) {
                run[k]
            } else {
                vi[k]
            };
            let counting = |block_after: LLVMBasicBlockRef| {
                // T: report (instrumented), count, go on.
                let t = new_block("kage.loop.iteration");
                LLVMPositionBuilderAtEnd(builder, t);
                let now = LLVMBuildLoad2(builder, i64t, counter, c"".as_ptr());
                if *version_id == INSTRUMENTED {
                    let level_index = LLVMConstInt(i32t, k as u64, 0);
                    locate(near);
                    calls.iter.call(builder, &mut [nest, level_index, now]);
                }
                let next = LLVMBuildAdd(builder, now, c64(1), c"".as_ptr());
                LLVMBuildStore(builder, next, counter);
                LLVMBuildBr(builder, block_after);
                t
            };
            match exiting {
                _ if unchecked(*version_id, k) => {
                    // Entered (through the dispatch) with a run counter of 0.
                    let start = new_block("kage.loop.run");
                    let first = match exiting {
                        Some((in_index, _)) => {
                            let inside = LLVMGetSuccessor(term, in_index);
                            let t = counting(inside);
                            LLVMSetSuccessor(term, in_index, t);
                            header
                        }
                        None => {
                            let t = counting(header);
                            for (term, i) in back_edges {
                                LLVMSetSuccessor(term, i, t);
                            }
                            t
                        }
                    };
                    LLVMPositionBuilderAtEnd(builder, start);
                    LLVMBuildStore(builder, c64(0), run[k]);
                    LLVMBuildBr(builder, first);
                    loop_entry[k][v] = start;
                }
                Some((in_index, out_index)) if has_no_side_effects(header) => {
                    // Combined form.
                    let cond = LLVMGetCondition(term);
                    let inside = LLVMGetSuccessor(term, in_index);
                    let outside = LLVMGetSuccessor(term, out_index);
                    LLVMPositionBuilderBefore(builder, term);
                    let cont = if in_index == 0 {
                        cond
                    } else {
                        LLVMBuildNot(builder, cond, c"".as_ptr())
                    };
                    let now = LLVMBuildLoad2(builder, i64t, vi[k], c"".as_ptr());
                    let end = LLVMBuildLoad2(builder, i64t, ce[k], c"".as_ptr());
                    let more =
                        LLVMBuildICmp(builder, LLVMIntPredicate::LLVMIntNE, now, end, c"".as_ptr());
                    let go = LLVMBuildAnd(builder, cont, more, c"".as_ptr());
                    let x = new_block("kage.loop.chunk");
                    LLVMPositionBuilderAtEnd(builder, x);
                    LLVMBuildCondBr(builder, cont, decide[k], outside);
                    let t = counting(inside);
                    LLVMSetCondition(term, go);
                    LLVMSetSuccessor(term, 0, t);
                    LLVMSetSuccessor(term, 1, x);
                    loop_entry[k][v] = header;
                }
                other => {
                    // Generic form: check before the header, which the back edges now enter.
                    let c = new_block("kage.loop.check");
                    for (term, i) in back_edges {
                        LLVMSetSuccessor(term, i, c);
                    }
                    let after_check = match other {
                        Some((in_index, _)) => {
                            // Count on the way into the iteration, past the header's test.
                            let inside = LLVMGetSuccessor(term, in_index);
                            let t = counting(inside);
                            LLVMSetSuccessor(term, in_index, t);
                            header
                        }
                        None => counting(header),
                    };
                    LLVMPositionBuilderAtEnd(builder, c);
                    let now = LLVMBuildLoad2(builder, i64t, vi[k], c"".as_ptr());
                    let end = LLVMBuildLoad2(builder, i64t, ce[k], c"".as_ptr());
                    let more =
                        LLVMBuildICmp(builder, LLVMIntPredicate::LLVMIntNE, now, end, c"".as_ptr());
                    LLVMBuildCondBr(builder, more, after_check, decide[k]);
                    loop_entry[k][v] = c;
                }
            }
        }
    }

    // Dispatch(k) and D(k).
    for k in 0..n {
        let near = LLVMGetBasicBlockTerminator(levels[k].header);
        LLVMPositionBuilderAtEnd(builder, dispatch[k]);
        let which = LLVMBuildLoad2(builder, i64t, ver[k], c"".as_ptr());
        let switch = LLVMBuildSwitch(builder, which, loop_entry[k][0], 1);
        LLVMAddCase(switch, c64(INSTRUMENTED), loop_entry[k][1]);
        ir::set_branch_weights(switch, COLD, 1);

        LLVMPositionBuilderAtEnd(builder, decide[k]);
        let now = LLVMBuildLoad2(builder, i64t, vi[k], c"".as_ptr());
        let level_index = LLVMConstInt(i32t, k as u64, 0);
        locate(near);
        let d = calls.decide.call(builder, &mut [nest, level_index, now]);
        let chunk = LLVMBuildLShr(
            builder,
            d,
            c64(kage_abi::loops::CHUNK_SHIFT as u64),
            c"".as_ptr(),
        );
        let unbounded = LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntEQ,
            chunk,
            c64(UNBOUNDED),
            c"".as_ptr(),
        );
        let bounded_end = LLVMBuildAdd(builder, now, chunk, c"".as_ptr());
        let end = LLVMBuildSelect(builder, unbounded, c64(NEVER), bounded_end, c"".as_ptr());
        LLVMBuildStore(builder, end, ce[k]);
        let version = LLVMBuildAnd(builder, d, c64(1), c"".as_ptr());
        LLVMBuildStore(builder, version, ver[k]);
        let resync_bit = LLVMBuildAnd(builder, d, c64(RESYNC), c"".as_ptr());
        let resync = LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntNE,
            resync_bit,
            c64(0),
            c"".as_ptr(),
        );
        let mut up = levels[k].parent;
        while let Some(j) = up {
            let their_vi = LLVMBuildLoad2(builder, i64t, vi[j], c"".as_ptr());
            let their_end = LLVMBuildLoad2(builder, i64t, ce[j], c"".as_ptr());
            let value = LLVMBuildSelect(builder, resync, their_vi, their_end, c"".as_ptr());
            LLVMBuildStore(builder, value, ce[j]);
            up = levels[j].parent;
        }
        LLVMBuildBr(builder, dispatch[k]);
    }
    LLVMDisposeBuilder(builder);
    copies
}

/// Whether a branch carries `llvm.loop` metadata (clang's mark of a source loop).
unsafe fn has_loop_metadata(branch: LLVMValueRef) -> bool {
    let context = LLVMGetModuleContext(LLVMGetGlobalParent(LLVMGetBasicBlockParent(
        LLVMGetInstructionParent(branch),
    )));
    let kind = LLVMGetMDKindIDInContext(context, c"llvm.loop".as_ptr(), 9);
    !LLVMGetMetadata(branch, kind).is_null()
}

/// The successors of a terminator.
unsafe fn successors(term: LLVMValueRef) -> Vec<LLVMBasicBlockRef> {
    (0..LLVMGetNumSuccessors(term))
        .map(|i| LLVMGetSuccessor(term, i))
        .collect()
}

/// Every edge into `block`: (predecessor, successor index in its terminator).
unsafe fn predecessors(
    func: LLVMValueRef,
    block: LLVMBasicBlockRef,
) -> Vec<(LLVMBasicBlockRef, u32)> {
    let mut out = Vec::new();
    let mut b = LLVMGetFirstBasicBlock(func);
    while !b.is_null() {
        let term = LLVMGetBasicBlockTerminator(b);
        if !term.is_null() {
            for i in 0..LLVMGetNumSuccessors(term) {
                if LLVMGetSuccessor(term, i) == block {
                    out.push((b, i));
                }
            }
        }
        b = LLVMGetNextBasicBlock(b);
    }
    out
}

/// Where an iteration of `level` begins: past the header's test for a `for` or `while` loop
/// (a header that exits, of a loop the source wrote as one, `structured`: it has
/// `llvm.loop` metadata), given as the header branch's (inside, outside) successors; None
/// for at the header: a `do` loop (whose header does not exit) and a `goto` loop (no
/// metadata: each run of its label is an iteration).
///
/// # Safety
/// `level` must be a loop of a live function.
unsafe fn test_before_iteration(level: &Level, structured: bool) -> Option<(u32, u32)> {
    let term = LLVMGetBasicBlockTerminator(level.header);
    single_exit_branch(term, &level.blocks)
        .filter(|&(inside, _)| LLVMGetSuccessor(term, inside) != level.header)
        .filter(|_| structured)
}

/// For a conditional `br` with one successor inside `blocks` and one outside: the indices
/// of the inside and the outside one.
unsafe fn single_exit_branch(
    term: LLVMValueRef,
    blocks: &HashSet<LLVMBasicBlockRef>,
) -> Option<(u32, u32)> {
    if ir::opcode(term) != LLVMOpcode::LLVMBr || LLVMIsConditional(term) == 0 {
        return None;
    }
    let inside = |i| blocks.contains(&LLVMGetSuccessor(term, i));
    match (inside(0), inside(1)) {
        (true, false) => Some((0, 1)),
        (false, true) => Some((1, 0)),
        _ => None,
    }
}

/// Whether running `block`'s instructions (but its terminator) twice is the same as once:
/// plain loads and pure computation only.
unsafe fn has_no_side_effects(block: LLVMBasicBlockRef) -> bool {
    use LLVMOpcode::*;
    let term = LLVMGetBasicBlockTerminator(block);
    ir::instructions(block)
        .into_iter()
        .filter(|&i| i != term)
        .all(|inst| match ir::opcode(inst) {
            LLVMLoad => {
                LLVMGetVolatile(inst) == 0
                    && LLVMGetOrdering(inst) == LLVMAtomicOrdering::LLVMAtomicOrderingNotAtomic
            }
            LLVMGetElementPtr | LLVMICmp | LLVMFCmp | LLVMSelect | LLVMExtractValue
            | LLVMExtractElement | LLVMFreeze | LLVMTrunc | LLVMZExt | LLVMSExt | LLVMFPToUI
            | LLVMFPToSI | LLVMUIToFP | LLVMSIToFP | LLVMFPTrunc | LLVMFPExt | LLVMPtrToInt
            | LLVMIntToPtr | LLVMBitCast | LLVMAdd | LLVMSub | LLVMMul | LLVMUDiv | LLVMSDiv
            | LLVMURem | LLVMSRem | LLVMShl | LLVMLShr | LLVMAShr | LLVMAnd | LLVMOr | LLVMXor
            | LLVMFAdd | LLVMFSub | LLVMFMul | LLVMFDiv | LLVMFRem | LLVMFNeg => true,
            _ => false,
        })
}

/// Adds `value` to the nest's counter `unsampled[index]` (`1 + levels` of them: entries that
/// skipped the runtime, then each level's iterations in them), atomically: threads share it.
///
/// # Safety
/// `builder` must be positioned in a block; `unsampled` must be the nest's counters.
unsafe fn add_to_unsampled(
    builder: LLVMBuilderRef,
    unsampled: LLVMValueRef,
    levels: usize,
    index: u64,
    value: LLVMValueRef,
) {
    let i64t = LLVMTypeOf(value);
    let mut at = [LLVMConstInt(i64t, 0, 0), LLVMConstInt(i64t, index, 0)];
    let counter = LLVMBuildInBoundsGEP2(
        builder,
        LLVMArrayType2(i64t, 1 + levels as u64),
        unsampled,
        at.as_mut_ptr(),
        2,
        c"".as_ptr(),
    );
    LLVMBuildAtomicRMW(
        builder,
        LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpAdd,
        counter,
        value,
        LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
        0,
    );
}

/// The pristine copy of a nest, as the entries that come once sampling is over run it.
struct Pristine {
    /// Where an entry begins.
    entry: LLVMBasicBlockRef,
    /// Per level: its iterations in this entry (stack slots).
    counters: Vec<LLVMValueRef>,
}

/// Makes the pristine copy (`pristine_map`, of `root_blocks`) count each level's iterations
/// in `counters` (a stack slot per level),
/// where an iteration begins as in the versions, and add them to the nest's counters
/// `unsampled` (docs/abi.md) wherever it leaves the nest. It has no decision and no check:
/// the optimiser sees the program's own loops, plus a counter per level.
///
/// # Safety
/// `levels` and `root_blocks` must describe the nest of `func` that `pristine_map` copied,
/// `structured` say which of its levels the source wrote as `for`, `while` or `do`.
#[allow(clippy::too_many_arguments)]
unsafe fn pristine_counting(
    func: LLVMValueRef,
    levels: &[Level],
    root_blocks: &[LLVMBasicBlockRef],
    pristine_map: &HashMap<LLVMBasicBlockRef, LLVMBasicBlockRef>,
    structured: &[bool],
    unsampled: LLVMValueRef,
    builder: LLVMBuilderRef,
    counters: Vec<LLVMValueRef>,
) -> Pristine {
    let context = LLVMGetModuleContext(LLVMGetGlobalParent(func));
    let i64t = LLVMInt64TypeInContext(context);
    let c64 = |v: u64| LLVMConstInt(i64t, v, 0);
    let new_block =
        |name: &str| LLVMAppendBasicBlockInContext(context, func, c_string(name).as_ptr());
    let n = levels.len();
    let copy: Vec<Level> = (levels.iter())
        .map(|l| Level {
            parent: l.parent,
            header: pristine_map[&l.header],
            blocks: l.blocks.iter().map(|b| pristine_map[b]).collect(),
        })
        .collect();
    // Ways out of the nest (before the counting blocks, which lie inside it).
    for &original in root_blocks {
        let b = pristine_map[&original];
        let term = LLVMGetBasicBlockTerminator(b);
        for i in 0..LLVMGetNumSuccessors(term) {
            let s = LLVMGetSuccessor(term, i);
            // An exception leaving the nest: nothing may come before its landing pad (its
            // iterations are lost, as in the versions).
            if copy[0].blocks.contains(&s) || ir::is_landing_pad(s) {
                continue;
            }
            let y = new_block("kage.pristine.exit");
            LLVMPositionBuilderAtEnd(builder, y);
            for (k, &counter) in counters.iter().enumerate() {
                let iterations = LLVMBuildLoad2(builder, i64t, counter, c"".as_ptr());
                add_to_unsampled(builder, unsampled, n, 1 + k as u64, iterations);
            }
            LLVMBuildBr(builder, s);
            LLVMSetSuccessor(term, i, y);
        }
    }
    // Each level's iterations, counted where they begin (as in the versions).
    let mut entry = copy[0].header;
    for (k, level) in copy.iter().enumerate() {
        let header = level.header;
        let term = LLVMGetBasicBlockTerminator(header);
        let exiting = test_before_iteration(level, structured[k]);
        let into_header = predecessors(func, header);
        let t = new_block("kage.pristine.iteration");
        LLVMPositionBuilderAtEnd(builder, t);
        let now = LLVMBuildLoad2(builder, i64t, counters[k], c"".as_ptr());
        let next = LLVMBuildAdd(builder, now, c64(1), c"".as_ptr());
        LLVMBuildStore(builder, next, counters[k]);
        match exiting {
            Some((in_index, _)) => {
                LLVMBuildBr(builder, LLVMGetSuccessor(term, in_index));
                LLVMSetSuccessor(term, in_index, t);
            }
            None => {
                for (p, i) in into_header {
                    LLVMSetSuccessor(LLVMGetBasicBlockTerminator(p), i, t);
                }
                LLVMBuildBr(builder, header);
                if k == 0 {
                    entry = t;
                }
            }
        }
    }
    Pristine { entry, counters }
}

/// The calls in `blocks` of a function of this module that they alone call, once (a
/// `static` function called from one place). The optimiser inlines such a function whatever
/// its size; with a second call in a copy of the nest it would weigh its size, and a hot
/// callee the program's own build inlines (bzip2's `mainSimpleSort`) would stay a call in
/// the code that runs. So each copy of the nest calls a copy of it
/// ([`call_copies_of_callees`]).
///
/// # Safety
/// `blocks` must be blocks of a live function.
unsafe fn calls_of_single_use_callees(blocks: &[LLVMBasicBlockRef]) -> Vec<LLVMValueRef> {
    let mut calls = Vec::new();
    for &b in blocks {
        for inst in ir::instructions(b) {
            if !ir::is_call_site(inst) {
                continue;
            }
            let Some(callee) = ir::direct_callee(inst) else {
                continue;
            };
            let local = matches!(
                LLVMGetLinkage(callee),
                LLVMLinkage::LLVMInternalLinkage | LLVMLinkage::LLVMPrivateLinkage
            );
            let single_use = {
                let first = LLVMGetFirstUse(callee);
                !first.is_null() && LLVMGetNextUse(first).is_null()
            };
            // A `noinline` callee (every function at -O0) stays a call either way.
            let noinline = ir::has_function_attribute(callee, "noinline");
            if local && single_use && !noinline && LLVMIsDeclaration(callee) == 0 {
                calls.push(inst);
            }
        }
    }
    calls
}

/// Makes the copies (`copies`, from [`clone_blocks`]) of `calls` (from
/// [`calls_of_single_use_callees`]) call a copy of their callee, named after `suffix`.
///
/// # Safety
/// `copies` must map each of `calls` to its copy.
unsafe fn call_copies_of_callees(
    calls: &[LLVMValueRef],
    copies: &HashMap<LLVMValueRef, LLVMValueRef>,
    suffix: &str,
) {
    for &call in calls {
        let Some(callee) = ir::direct_callee(call) else {
            continue;
        };
        let name = format!("{}.{suffix}", ir::value_name(callee));
        let function = kage_copy_function(callee, c_string(&name).as_ptr());
        if function.is_null() {
            continue;
        }
        // The callee is a call's last operand.
        let copy = copies[&call];
        LLVMSetOperand(copy, LLVMGetNumOperands(copy) as u32 - 1, function);
    }
}

/// Clones `blocks` (in this order) at the end of `func`, with names ending in `suffix`:
/// operands and successors that refer to the blocks or their instructions refer to the
/// copies. Returns the block map and the instruction map.
unsafe fn clone_blocks(
    func: LLVMValueRef,
    blocks: &[LLVMBasicBlockRef],
    builder: LLVMBuilderRef,
    suffix: &str,
) -> (
    HashMap<LLVMBasicBlockRef, LLVMBasicBlockRef>,
    HashMap<LLVMValueRef, LLVMValueRef>,
) {
    let context = LLVMGetModuleContext(LLVMGetGlobalParent(func));
    let mut block_map = HashMap::new();
    for &b in blocks {
        let name = format!("{}.{suffix}", ir::value_name(LLVMBasicBlockAsValue(b)));
        let copy = LLVMAppendBasicBlockInContext(context, func, c_string(&name).as_ptr());
        block_map.insert(b, copy);
    }
    let mut value_map: HashMap<LLVMValueRef, LLVMValueRef> = HashMap::new();
    let mut copies = Vec::new();
    for &b in blocks {
        LLVMPositionBuilderAtEnd(builder, block_map[&b]);
        for inst in ir::instructions(b) {
            let copy = LLVMInstructionClone(inst);
            let name = ir::value_name(inst);
            LLVMInsertIntoBuilderWithName(builder, copy, c_string(&name).as_ptr());
            value_map.insert(inst, copy);
            copies.push(copy);
        }
    }
    for &copy in &copies {
        let is_terminator = !LLVMIsATerminatorInst(copy).is_null();
        for i in 0..LLVMGetNumOperands(copy) as u32 {
            let op = LLVMGetOperand(copy, i);
            if let Some(&mapped) = value_map.get(&op) {
                LLVMSetOperand(copy, i, mapped);
            }
        }
        if is_terminator {
            for i in 0..LLVMGetNumSuccessors(copy) {
                if let Some(&mapped) = block_map.get(&LLVMGetSuccessor(copy, i)) {
                    LLVMSetSuccessor(copy, i, mapped);
                }
            }
        }
    }
    (block_map, value_map)
}
