//! Hoisting instrumentation out of simple counted loops, a planner shared by the tools: it
//! finds the loops and their strided ranges ([`plan_function`], with the tool's
//! [`Coverage`]) and [`chunk`] builds the frame of a per-loop helper; what the helper does
//! per chunk is the tool's (`tools::working_set::hoisted`, `tools::footprint`). The working
//! set's use of it is described here, the footprint's in its module.
//!
//! For the working set: an innermost loop
//! whose trip count and addresses are known before it runs is counted and marked per
//! *chunk* of `C` iterations instead of per access. Its preheader computes the trip count
//! `T` and each range's start, marking and counting nothing; the header's first insertion
//! point calls a per-loop `alwaysinline` helper, `__kage_ws_chunk`, which does nothing
//! unless the iteration `j` is a multiple of `C`, and then makes one budget check for the
//! chunk's `min(C, T - j) * n` accesses (`n` accesses per iteration, region = the loop body)
//! and marks the lines every hoisted access touches in iterations `j .. min(j + C, T) - 1`.
//! The branch lives in the helper, so the pass does not edit the loop's CFG (the
//! AlwaysInliner splits the header when it inlines the helper). Mode 2 keeps its per-access
//! trace calls inside the loop, after the helper call.
//!
//! The form hoisted (anything else is instrumented per segment as usual):
//! - an innermost natural loop `L` without cutting calls and without inner cycles, whose
//!   blocks are all its own or its body's region (no inlined call in it:
//!   [`FunctionPlan::hoisted_loops`](crate::plan::FunctionPlan::hoisted_loops));
//! - its header has one predecessor outside `L`, the preheader `P`, ending in a `br` to `h`
//!   (conditional or not),
//!   and one inside, the latch `E`, which is also `L`'s only exiting block;
//! - `E` ends in `br (icmp eq|ne X, N)` leaving `L` exactly when `X == N`, where `N` is
//!   loop-invariant, `iv = phi [S, P], [iv.next, E]` in the header,
//!   `iv.next = add iv, C` with `C = ±2^s`, and `X` is `iv` or `iv.next`;
//! - every access is in a block that dominates `E` (footprint: or is reported by its
//!   segment, below), has a constant length, and an address
//!   `A + M * ext(iv') + c`, where `iv'` is any induction variable of the header (a PHI of
//!   the same form with any constant step), `A` is a loop-invariant pointer plus
//!   loop-invariant indices, `M` and `c` are constants ([`affine::Linear`]); one such
//!   access is enough: the others (through an index array, a pointer loaded in the loop, a
//!   length known only at run time) are counted by the chunk all the same and marked where
//!   they are made for the working set, reported and counted by their segments for the
//!   footprint (which hoists no loop with such a `cmpxchg`: [`HoistPlan::marked_inline`]);
//!   for the footprint, accesses in blocks that do not run in every iteration are reported
//!   and counted by their segments too;
//! - for each coalesced range, consecutive iterations leave gaps below 16 bytes.
//!
//! (`C` above is the counter's step; the chunk length is written `K` below.)
//!
//! Why the chunked marks and counts are exact (for a loop that terminates):
//! - Iterations. `P` branches straight to the header and `L` is left only at the end of an
//!   iteration, at `E`, when `X == N`; so every entry from `P` runs iterations
//!   `0, 1, ..., T - 1` and no other, where `T >= 1` is the first iteration count at which
//!   `X == N` holds. `iv` takes `S, S + C, ...`; with `|C| = 2^s` and the exit on equality,
//!   `T = ((N - S - C) * sign(C) mod 2^w) / 2^s + 1` when `X` is `iv.next` and
//!   `((N - S) * sign(C) mod 2^w) / 2^s + 1` when `X` is `iv` (`w` = the width of `iv`); the
//!   division is exact whenever the loop terminates (otherwise `iv` never equals `N`).
//!   No iteration `>= T` runs: iteration `T - 1` takes the exit.
//! - The iteration index. In iteration `j`, `iv = S + j * C mod 2^w` with
//!   `j <= T - 1 < 2^(w - s)`, so `j = ((iv - S) * sign(C) mod 2^w) >> s` exactly, and the
//!   helper sees every `j` from 0 to `T - 1` in turn at the header's start. Chunk starts
//!   are the `j` that are multiples of `K`, iteration 0 among them.
//! - Counts. With no inner cycles, a block dominating `E` runs exactly once per
//!   iteration, so iterations `j .. j + m - 1` make exactly `m * n` accesses. The check at a
//!   chunk start `j` counts `m = min(K, T - j)` iterations: the iterations up to the next
//!   chunk start `j + K`, or to the last one, `T - 1`, whichever comes first (`T - 1 - j`
//!   is computed without overflow because `j <= T - 1`). Every iteration belongs to exactly
//!   one chunk, so the loop's accesses are counted exactly once.
//! - Intervals. The helper's budget check is the only one in `L` (all of `L`'s accesses
//!   are counted by it, so segment instrumentation adds none) and `L` has no cutting call,
//!   so nothing can tick between a chunk's check and the next chunk's check (or the exit). A
//!   chunk's marks come right after its check, before any access of the chunk (the helper
//!   runs at the header's first insertion point of its first iteration), and after every
//!   access of the previous chunk (earlier iterations). So the check, the marks and the
//!   accesses of a chunk fall in one interval, as for a segment; a mark made inline, at the
//!   end of its access's segment within an iteration, falls in the interval of its access,
//!   and the header, where the helper may tick, is a checkpoint: no mark is left out there
//!   for having been made in an earlier iteration.
//! - Addresses: 64-bit arithmetic (`add`, `sub`, `mul` by a constant... and the GEP's own)
//!   is exact modulo 2^64, so with a 64-bit `iv'` iteration `j` accesses
//!   `start + j * M * C'` exactly, where `start` is iteration 0's address (computed in the
//!   preheader). Through `sext`/`zext` (or a narrower GEP index) the sequence of `iv'` must
//!   not wrap in its own width: its `add` carries `nsw` (for `sext`, or for a `zext nneg`)
//!   or `nuw` with `C' > 0` (for `zext`). A wrapped value would be poison, and so would the
//!   address every iteration accesses: undefined behaviour.
//! - Each range is marked from its lowest to its highest byte over the chunk's iterations
//!   (iteration `j`'s start when it moves up, iteration `j + m - 1`'s when it moves down);
//!   the gap condition means no whole 16-byte line in between is marked untouched.
//! - A loop that cannot terminate normally (its counter skips `N`) runs until the program
//!   ends otherwise; its iteration index is then only known modulo `2^(w - s)` and its `T`
//!   is meaningless, so its marks may name lines of other iterations than the chunk's.
//!   Every chunk's marked length is still bounded by constants (`K * MAX_STRIDE`), so
//!   the runtime is never asked to mark more than `K` real iterations could touch. (In C
//!   and C++ such a loop without I/O, volatile or atomic accesses is undefined anyway.)

mod affine;
pub mod chunk;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMValueRef};
use llvm_sys::target::LLVMTargetDataRef;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode};

use crate::access::{classify_access, Access, Length};
use crate::address::{merge_ranges_within, MERGE_GAP};
use crate::ir::{self, FunctionCfg};
use crate::loops::LoopForest;
use crate::segments::is_cut;

use affine::{inductions, is_loop_invariant, Affine, Induction, LoopContext};
pub use affine::{Extension, InvariantTerm};

/// Hoisted per-iteration strides are at most this many bytes, which bounds a chunk's marked
/// length by `MAX_CHUNK * MAX_STRIDE` bytes.
const MAX_STRIDE: i64 = 1 << 16;
/// |C| of the counter is at most this.
const MAX_STEP: i64 = 1 << 30;

/// What the instrumentation does with a hoisted range, which decides how ranges may be
/// merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Working set: the range's lines are marked from its lowest to its highest byte, so
    /// pieces merge across gaps below [`MERGE_GAP`] (no 16-byte line lies in such a gap) and
    /// consecutive iterations may not leave a larger one.
    Lines,
    /// Footprint: the range's bytes are reported exactly, iteration by iteration (start,
    /// width, stride, count), so pieces merge only when they overlap or touch, and
    /// iterations may leave any gap.
    Bytes,
}

impl Coverage {
    /// Whether a loop with `access`, whose addresses cannot be followed or which does not
    /// run in every iteration (`every_iteration` false), is still hoisted, the access
    /// marked or reported where it is made. Working set: when it runs in every iteration (a
    /// mark needs no count of its own, and the chunk counts it, as every iteration's).
    /// Footprint: unless it is a `cmpxchg`, which has its own hook (its segment reports and
    /// counts it, and the chunk's ranges are in the same loop instance: a hoisted loop has
    /// no region event).
    fn marks_inline(self, access: &Access, every_iteration: bool) -> bool {
        match self {
            Coverage::Lines => every_iteration,
            Coverage::Bytes => !matches!(access, Access::CmpXchg { .. }),
        }
    }

    /// Pieces of one iteration merge across gaps below this many bytes.
    fn merge_gap(self) -> i64 {
        match self {
            Coverage::Lines => MERGE_GAP,
            Coverage::Bytes => 1,
        }
    }
}

/// Why a loop keeps its per-segment instrumentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotHoisted {
    HasSubloops,
    CuttingCall,
    InnerCycle,
    NoPreheader,
    NotSingleExitLatch,
    ExitNotOnEquality,
    NoInductionVariable,
    UnsupportedStep,
    NoAccesses,
    AccessNotEveryIteration,
    AccessNotAffine,
    StrideLeavesGaps,
}

/// The trip count's ingredients.
#[derive(Debug, Clone, Copy)]
pub struct TripCount {
    /// `iv`: the counter's PHI in the header.
    pub counter: LLVMValueRef,
    /// `S`: the counter in the first iteration.
    pub start: LLVMValueRef,
    /// `N`: the loop leaves when the compared value equals it.
    pub bound: LLVMValueRef,
    /// `C`, a power of two in magnitude.
    pub step: i64,
    /// Whether the exit compares `iv.next` (else `iv`).
    pub compares_next: bool,
}

/// Bytes `[A + lo, A + hi)` in iteration 0, moving by `scale * C'` bytes per iteration, with
/// `A = base + Σ invariant + scale * ext(S')` for the induction variable `S' + j * C'`.
#[derive(Debug, Clone)]
pub struct StridedRange {
    pub base: LLVMValueRef,
    pub invariant: Vec<InvariantTerm>,
    /// The induction variable and its extension; `None` when `scale` is 0.
    pub induction: Option<(Induction, Extension)>,
    pub scale: i64,
    pub lo: i64,
    pub hi: i64,
}

impl StridedRange {
    /// Bytes the range moves per iteration.
    pub fn stride(&self) -> i64 {
        self.induction.map_or(0, |(iv, _)| self.scale * iv.step) // checked by the analysis
    }
}

/// One loop instrumented per chunk of iterations.
pub struct HoistPlan {
    pub loop_index: usize,
    /// The preheader's `br`: the loop-invariant values go right before it.
    pub at: LLVMValueRef,
    /// The loop's header: the chunk helper's call goes at its first insertion point.
    pub header: LLVMBasicBlockRef,
    pub trip: TripCount,
    pub accesses_per_iteration: u64,
    /// `K`: iterations per chunk, a power of two ([`chunk_iterations`]).
    pub chunk_iterations: u64,
    pub ranges: Vec<StridedRange>,
    /// The loop's access instructions, which get no budget check or mark of their own.
    pub accesses: Vec<LLVMValueRef>,
    /// The loop's accesses whose addresses the plan cannot follow (through an index array,
    /// a pointer loaded in the loop), and for the footprint those that do not run in every
    /// iteration: in `accesses_per_iteration`, and marked where they are made (working
    /// set: the chunk counts them) or reported and counted there (footprint).
    pub marked_inline: Vec<LLVMValueRef>,
}

/// Every hoistable loop of a function.
///
/// # Safety
/// `cfg` and `forest` must describe a live function of a module with `data_layout`.
pub unsafe fn plan_function(
    cfg: &FunctionCfg,
    forest: &LoopForest,
    data_layout: LLVMTargetDataRef,
    coverage: Coverage,
) -> Vec<HoistPlan> {
    let explain = std::env::var_os(EXPLAIN_VARIABLE).is_some_and(|v| v == "1");
    (0..forest.loops.len())
        .filter_map(|k| {
            let plan = analyze_loop(cfg, forest, k, data_layout, coverage);
            if explain {
                explain_decision(cfg, forest, k, &plan);
            }
            plan.ok()
        })
        .collect()
}

/// With `KAGE_PASS_EXPLAIN=1` in the compiler's environment, the pass says on stderr which
/// loops it hoists and why the others keep per-segment instrumentation.
pub const EXPLAIN_VARIABLE: &str = "KAGE_PASS_EXPLAIN";

unsafe fn explain_decision(
    cfg: &FunctionCfg,
    forest: &LoopForest,
    k: usize,
    plan: &Result<HoistPlan, NotHoisted>,
) {
    let header = cfg.blocks[forest.loops[k].header];
    let function = ir::value_name(LLVMGetBasicBlockParent(header));
    // The header's first instruction with a location (PHIs usually have none).
    let line = ir::instructions(header)
        .into_iter()
        .map(|i| LLVMGetDebugLocLine(i))
        .find(|&line| line != 0)
        .unwrap_or(0);
    match plan {
        Ok(plan) => eprintln!(
            "kage-pass: {function}: loop at line {line} hoisted ({} accesses per iteration, \
             chunks of {})",
            plan.accesses_per_iteration, plan.chunk_iterations
        ),
        Err(why) => eprintln!("kage-pass: {function}: loop at line {line} not hoisted: {why:?}"),
    }
}

/// The blocks around a loop that the hoisting form needs.
struct Shape {
    preheader: usize,
    latch: usize,
    /// The preheader's `br`.
    at: LLVMValueRef,
}

/// Whether loop `k` can be hoisted, and how.
///
/// # Safety
/// As [`plan_function`].
pub unsafe fn analyze_loop(
    cfg: &FunctionCfg,
    forest: &LoopForest,
    k: usize,
    data_layout: LLVMTargetDataRef,
    coverage: Coverage,
) -> Result<HoistPlan, NotHoisted> {
    let lp = &forest.loops[k];
    if forest.loops.iter().any(|l| l.parent == Some(k)) {
        return Err(NotHoisted::HasSubloops);
    }
    let shape = loop_shape(cfg, &lp.blocks, lp.header)?;
    if has_inner_cycle(&cfg.successors, &lp.blocks, lp.header) {
        return Err(NotHoisted::InnerCycle);
    }
    let loop_blocks: HashSet<LLVMBasicBlockRef> =
        lp.blocks.iter().map(|&b| cfg.blocks[b]).collect();
    for &b in &lp.blocks {
        if ir::instructions(cfg.blocks[b])
            .into_iter()
            .any(|i| is_cut(i))
        {
            return Err(NotHoisted::CuttingCall);
        }
    }
    let inductions = inductions(cfg, lp.header, shape.preheader, shape.latch);
    let trip = trip_count(cfg, &loop_blocks, &inductions, shape.latch, lp.header)?;
    let context = LoopContext {
        blocks: &loop_blocks,
        inductions: &inductions,
        data_layout,
    };

    let mut accesses = Vec::new();
    let mut marked_inline = Vec::new();
    let mut marked_why = None;
    let mut pieces: Vec<(Affine, i64)> = Vec::new(); // (address, length)
    for &b in &lp.blocks {
        for inst in ir::instructions(cfg.blocks[b]) {
            let Some(access) = classify_access(inst, data_layout) else {
                continue;
            };
            if !dominates_within(&cfg.successors, &lp.blocks, lp.header, b, shape.latch) {
                if !coverage.marks_inline(&access, false) {
                    return Err(NotHoisted::AccessNotEveryIteration);
                }
                marked_why.get_or_insert(NotHoisted::AccessNotEveryIteration);
                marked_inline.push(inst);
                continue;
            }
            // Every range of the access followed, or the access is marked inline whole.
            let followed: Option<Vec<(Affine, i64)>> = (access.ranges().into_iter())
                .map(|range| {
                    let Length::Constant(len) = range.len else {
                        return None;
                    };
                    Some((context.affine(range.ptr)?, i64::try_from(len).ok()?))
                })
                .collect();
            match followed {
                Some(followed) => {
                    pieces.extend(followed);
                    accesses.push(inst);
                }
                None if coverage.marks_inline(&access, true) => {
                    marked_why.get_or_insert(NotHoisted::AccessNotAffine);
                    marked_inline.push(inst);
                }
                None => return Err(NotHoisted::AccessNotAffine),
            }
        }
    }
    if accesses.is_empty() {
        // Nothing for the chunks to report: why the first access left inline was.
        return Err(marked_why.unwrap_or(NotHoisted::NoAccesses));
    }
    let ranges = strided_ranges(&pieces, &inductions, coverage)?;
    let accesses_per_iteration = (accesses.len() + marked_inline.len()) as u64;
    Ok(HoistPlan {
        loop_index: k,
        at: shape.at,
        header: cfg.blocks[lp.header],
        trip,
        accesses_per_iteration,
        chunk_iterations: chunk_iterations(accesses_per_iteration, &ranges),
        ranges,
        accesses,
        marked_inline,
    })
}

/// Iterations per chunk, at most.
pub const MAX_CHUNK: u64 = 1024;
/// Accesses per chunk, at most (unless one iteration makes more).
pub const CHUNK_ACCESSES: u64 = 4096;
/// New bytes per chunk, at most (unless one iteration touches more).
pub const CHUNK_BYTES: u64 = 64 * 1024;

/// `K`, the iterations a chunk counts and marks at once: the largest power of two up to
/// [`MAX_CHUNK`] whose chunk makes at most [`CHUNK_ACCESSES`] accesses and moves its
/// ranges by at most [`CHUNK_BYTES`] in all (at least 1).
///
/// Why these bounds: the budget is only checked at chunk starts, so an interval boundary
/// that falls inside a chunk is taken at the next chunk start, up to `K * n - 1` accesses
/// late, and the interval that the chunk fell into gains up to `K` iterations' worth of
/// lines. 1024 iterations keep both small next to any useful interval (the runtime itself
/// reads the clock only every 16384 accesses in time units) while the per-iteration cost
/// stays one `sub`/`and`/branch: the chunk's check and marks, a few dozen instructions plus
/// the lines, are spread over 1024 iterations. Loops whose iterations make many accesses
/// (unrolled, vectorised) or move far (a column walk with a 4 KiB stride touches a new page
/// per iteration: 1024 of them would be 4 MiB marked at once) get shorter chunks, so that
/// neither the lateness in accesses nor the lines one chunk adds grow with the loop's
/// body.
pub fn chunk_iterations(accesses_per_iteration: u64, ranges: &[StridedRange]) -> u64 {
    let bytes_per_iteration: u64 = ranges.iter().map(|r| r.stride().unsigned_abs()).sum();
    let mut chunk = MAX_CHUNK;
    while chunk > 1
        && (chunk * accesses_per_iteration > CHUNK_ACCESSES
            || chunk * bytes_per_iteration > CHUNK_BYTES)
    {
        chunk /= 2;
    }
    chunk
}

/// The preheader (the header's only predecessor outside the loop, ending in a branch to
/// it) and the latch (its only predecessor inside, and the loop's only exiting block).
///
/// The preheader's branch may be conditional (a vectorised loop's `vector.ph` is often
/// folded into the minimum-iterations check): the values computed before it for the loop
/// are then computed on the path that skips the loop too, where they are plain arithmetic
/// that nothing uses.
unsafe fn loop_shape(
    cfg: &FunctionCfg,
    blocks: &[usize],
    header: usize,
) -> Result<Shape, NotHoisted> {
    let in_loop = |b: usize| blocks.binary_search(&b).is_ok();
    let (inside, outside): (Vec<usize>, Vec<usize>) = (0..cfg.successors.len())
        .filter(|&b| cfg.successors[b].contains(&header))
        .partition(|&b| in_loop(b));
    let [preheader] = outside[..] else {
        return Err(NotHoisted::NoPreheader);
    };
    let at = LLVMGetBasicBlockTerminator(cfg.blocks[preheader]);
    let branches_to_header = |at: LLVMValueRef| {
        (0..LLVMGetNumSuccessors(at)).any(|i| LLVMGetSuccessor(at, i) == cfg.blocks[header])
    };
    if at.is_null() || ir::opcode(at) != LLVMOpcode::LLVMBr || !branches_to_header(at) {
        return Err(NotHoisted::NoPreheader);
    }
    let [latch] = inside[..] else {
        return Err(NotHoisted::NotSingleExitLatch);
    };
    let exiting: Vec<usize> = (blocks.iter().copied())
        .filter(|&b| cfg.successors[b].iter().any(|&s| !in_loop(s)))
        .collect();
    if exiting != [latch] {
        return Err(NotHoisted::NotSingleExitLatch);
    }
    Ok(Shape {
        preheader,
        latch,
        at,
    })
}

/// Matches the latch's `br (icmp eq|ne X, N)`, leaving exactly when `X == N`, against the
/// induction variables: `X` is one of them (`iv`) or its `iv.next`, `N` is invariant.
unsafe fn trip_count(
    cfg: &FunctionCfg,
    loop_blocks: &HashSet<LLVMBasicBlockRef>,
    inductions: &[Induction],
    latch: usize,
    header: usize,
) -> Result<TripCount, NotHoisted> {
    let branch = LLVMGetBasicBlockTerminator(cfg.blocks[latch]);
    if branch.is_null()
        || ir::opcode(branch) != LLVMOpcode::LLVMBr
        || LLVMIsConditional(branch) == 0
    {
        return Err(NotHoisted::ExitNotOnEquality);
    }
    let compare = LLVMGetCondition(branch);
    if LLVMIsAICmpInst(compare).is_null() {
        return Err(NotHoisted::ExitNotOnEquality);
    }
    let (on_true, on_false) = (LLVMGetSuccessor(branch, 0), LLVMGetSuccessor(branch, 1));
    let header_block = cfg.blocks[header];
    let leaves_on_equal = match LLVMGetICmpPredicate(compare) {
        LLVMIntPredicate::LLVMIntEQ => on_false == header_block && !loop_blocks.contains(&on_true),
        LLVMIntPredicate::LLVMIntNE => on_true == header_block && !loop_blocks.contains(&on_false),
        _ => false,
    };
    if !leaves_on_equal {
        return Err(NotHoisted::ExitNotOnEquality);
    }
    let (a, b) = (LLVMGetOperand(compare, 0), LLVMGetOperand(compare, 1));
    for (compared, bound) in [(a, b), (b, a)] {
        if !is_loop_invariant(loop_blocks, bound) {
            continue;
        }
        let Some(counter) = (inductions.iter()).find(|i| i.phi == compared || i.next == compared)
        else {
            continue;
        };
        let magnitude = counter.step.checked_abs().unwrap_or(0);
        if magnitude == 0 || magnitude > MAX_STEP || magnitude.count_ones() != 1 {
            return Err(NotHoisted::UnsupportedStep);
        }
        return Ok(TripCount {
            counter: counter.phi,
            start: counter.start,
            bound,
            step: counter.step,
            compares_next: compared == counter.next,
        });
    }
    Err(NotHoisted::NoInductionVariable)
}

/// What makes accesses share a strided range: the same base, invariant terms, induction
/// variable and scale; only their constant offsets differ.
#[derive(PartialEq, Eq, Hash, Clone)]
struct RangeKey {
    base: LLVMValueRef,
    invariant: Vec<InvariantTerm>,
    induction: Option<(usize, Extension)>,
    scale: i64,
}

/// Groups the loop's byte ranges by [`RangeKey`], merges each group's per-iteration ranges
/// as `coverage` allows, and (for [`Coverage::Lines`]) checks that iterations leave no
/// 16-byte gap.
fn strided_ranges(
    pieces: &[(Affine, i64)],
    inductions: &[Induction],
    coverage: Coverage,
) -> Result<Vec<StridedRange>, NotHoisted> {
    let mut order: Vec<RangeKey> = Vec::new();
    let mut groups: HashMap<RangeKey, Vec<(i64, i64)>> = HashMap::new();
    for (address, len) in pieces {
        let key = RangeKey {
            base: address.base,
            invariant: address.offset.invariant.clone(),
            induction: address.offset.iv,
            scale: address.offset.iv_coefficient,
        };
        let lo = address.offset.constant;
        let hi = lo.checked_add(*len).ok_or(NotHoisted::AccessNotAffine)?;
        groups
            .entry(key.clone())
            .or_insert_with(|| {
                order.push(key);
                Vec::new()
            })
            .push((lo, hi));
    }
    let mut out = Vec::new();
    for key in order {
        let induction = key
            .induction
            .map(|(k, extension)| (inductions[k], extension));
        let step = induction.map_or(0, |(iv, _)| iv.step);
        let stride = key
            .scale
            .checked_mul(step)
            .ok_or(NotHoisted::StrideLeavesGaps)?;
        if stride.abs() > MAX_STRIDE {
            return Err(NotHoisted::StrideLeavesGaps);
        }
        let group = groups.remove(&key).unwrap_or_default();
        for (lo, hi) in merge_ranges_within(group, coverage.merge_gap()) {
            if coverage == Coverage::Lines && stride != 0 && stride.abs() - (hi - lo) >= MERGE_GAP {
                return Err(NotHoisted::StrideLeavesGaps);
            }
            out.push(StridedRange {
                base: key.base,
                invariant: key.invariant.clone(),
                induction,
                scale: key.scale,
                lo,
                hi,
            });
        }
    }
    Ok(out)
}

/// Whether the loop has a cycle that does not pass through its header (an irreducible one:
/// the loop has no subloops), in which blocks could run more than once per iteration.
fn has_inner_cycle(successors: &[Vec<usize>], blocks: &[usize], header: usize) -> bool {
    // Iterative DFS over the loop's blocks, ignoring edges back to the header.
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    let in_loop = |b: usize| blocks.binary_search(&b).is_ok();
    let mut state: HashMap<usize, State> = blocks.iter().map(|&b| (b, State::New)).collect();
    // (block, index of the next successor to visit)
    let mut stack: Vec<(usize, usize)> = vec![(header, 0)];
    state.insert(header, State::Open);
    while let Some(top) = stack.len().checked_sub(1) {
        let (block, next) = stack[top];
        let Some(&succ) = successors[block].get(next) else {
            state.insert(block, State::Done);
            stack.pop();
            continue;
        };
        stack[top].1 += 1;
        if succ == header || !in_loop(succ) {
            continue;
        }
        match state[&succ] {
            State::Open => return true,
            State::New => {
                state.insert(succ, State::Open);
                stack.push((succ, 0));
            }
            State::Done => {}
        }
    }
    false
}

/// Whether every path from the header to `latch` inside the loop passes `block`.
fn dominates_within(
    successors: &[Vec<usize>],
    blocks: &[usize],
    header: usize,
    block: usize,
    latch: usize,
) -> bool {
    if block == header || block == latch {
        return true;
    }
    let in_loop = |b: usize| blocks.binary_search(&b).is_ok();
    let mut seen: HashSet<usize> = HashSet::from([header]);
    let mut work = vec![header];
    while let Some(b) = work.pop() {
        for &s in &successors[b] {
            if s == latch {
                return false;
            }
            if s != block && in_loop(s) && seen.insert(s) {
                work.push(s);
            }
        }
    }
    true
}
