//! The count builds, both read by the runtime's count tool:
//!
//! - `count` (instrumentation 9, `KAGE_TOOL` unset or `count`; docs/abi.md, "Count
//!   instrumentation"): the region hooks, and each segment's loads, stores and bytes added
//!   inline to the thread's `__kage_count` at the segment's start. Segments are cut at
//!   calls ([`crate::segments`]): a callee's region events drain what came before the call
//!   into the caller's region, a call that never returns (`exit`, `longjmp`, a throw) ends
//!   a segment whose accesses all ran, and `kage_set_enabled` (a call) switches counting
//!   exactly where the program calls it. At the start, as a call per access would, a fault
//!   counts the faulting access. What a segment adds is masked by `__kage_gate`, as the
//!   calls are gated in the runtime. An `llvm.mem*` of run-time length adds its own right
//!   before it (its length is known there); `cmpxchg`s keep their hook (whether they wrote
//!   is known after). A loop header counts an iteration inline when the runtime has armed
//!   the thread for its loop (the loop's body is the innermost open region: a new iteration
//!   changes nothing but the body's instances), and calls `__kage_loop_iter` otherwise.
//!   A loop or inlined call with the regions in it, in which nothing else reaches the
//!   runtime, keeps every region's counts and instances in registers while it runs
//!   ([`promoted_trees`]) and reports them whole at its exits, before the exits' hooks
//!   (`__kage_count_regions`).
//! - `count-calls` (instrumentation 0): the region hooks and a call per access, which every
//!   runtime tool understands.

use kage_abi::{symbols, Instrumentation};
use llvm_sys::core::*;
use llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::target::LLVMGetModuleDataLayout;
use llvm_sys::{LLVMAtomicOrdering, LLVMIntPredicate, LLVMOpcode};

use super::{Settings, Tool};
use crate::access::Access;
use crate::hooks::{self, Hooks, Inserter};
use crate::ir::{self, RuntimeFunction};
use crate::plan::FunctionPlan;
use crate::region_tree::{Node, NodeKind};
use crate::regions::RegionTable;
use crate::segments::{self, function_segments};

extern "C" {
    /// Splits the critical edge `from -> to` (src/shim.cpp): the new block, or null.
    fn kage_split_critical_edge(
        from: LLVMBasicBlockRef,
        to: LLVMBasicBlockRef,
    ) -> LLVMBasicBlockRef;
}

/// Region hooks, counts added inline per segment.
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

    /// Promoted loops' local counts become registers (mem2reg), and the inlined helpers'
    /// thread-local addresses are merged and hoisted out of loops.
    fn needs_cleanup(&self) -> bool {
        true
    }

    unsafe fn instrument(
        &self,
        module: LLVMModuleRef,
        plans: &[FunctionPlan],
        table: &RegionTable,
    ) {
        let mut hooks = Hooks::declare(module);
        let counter = InlineCounter::declare(module);
        if plans.iter().any(|plan| !plan.forest.loops.is_empty()) {
            hooks.loop_iter = counter.define_loop_iter(module, &hooks.loop_iter);
        }
        let mut report_helpers = ReportHelpers::default();
        let data_layout = LLVMGetModuleDataLayout(module);
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        for plan in plans {
            // Taken before anything is inserted into the function.
            let trees = promoted_trees(plan);
            // Each block of a promoted tree: (tree, the offset of its region in the tree).
            let mut owner: Vec<Option<(usize, usize)>> = vec![None; plan.cfg.blocks.len()];
            for (j, tree) in trees.iter().enumerate() {
                for &b in &tree.blocks {
                    owner[b] = Some((j, plan.tree().block_region[b] - tree.root));
                }
            }
            let mut additions = Vec::new();
            for segment in function_segments(&plan.cfg, data_layout) {
                let to = owner[segment.block];
                let (constant, dynamic) = SegmentCounts::of(&segment.accesses);
                if !constant.is_empty() {
                    additions.push((segment.start, constant, to));
                }
                additions.extend(dynamic.into_iter().map(|(at, counts)| (at, counts, to)));
            }
            // Where instances start, as instructions to insert before (taken now; an edge
            // that needs a block of its own gets it first, before anything else changes).
            let starts: Vec<Vec<(LLVMValueRef, &InstanceStart)>> = (trees.iter())
                .map(|tree| {
                    (tree.starts.iter())
                        .filter_map(|start| {
                            let at = match start.place {
                                Place::Start(b) => ir::first_insertion_point(plan.cfg.blocks[b])?,
                                Place::Edge { from, to, split } => {
                                    let mut block = plan.cfg.blocks[from];
                                    if split {
                                        block =
                                            kage_split_critical_edge(block, plan.cfg.blocks[to]);
                                    }
                                    LLVMGetBasicBlockTerminator(block)
                                }
                            };
                            (!at.is_null()).then_some((at, start))
                        })
                        .collect()
                })
                .collect();
            let skipped_loops: Vec<usize> = (trees.iter())
                .flat_map(|tree| tree.loops.iter().copied())
                .collect();
            let skipped_settles: Vec<usize> = (trees.iter())
                .flat_map(|tree| tree.blocks.iter().copied())
                .collect();
            let entry_start = LLVMGetFirstInstruction(plan.cfg.blocks[0]);
            let mut ins = Inserter::new(module, plan.func, builder, &hooks, table);
            // The counts kept in registers while a promoted tree runs (allocas that the
            // clean-up's mem2reg promotes), zero outside it.
            let locals: Vec<TreeLocals> = if trees.is_empty() || entry_start.is_null() {
                Vec::new()
            } else {
                ins.position_before(entry_start);
                let largest = trees.iter().map(|tree| tree.len).max().unwrap_or(1);
                let report = counter.report_buffer(ins.builder, largest);
                (trees.iter())
                    .map(|tree| counter.tree_locals(ins.builder, tree.len, report))
                    .collect()
            };
            let skipped = hooks::Skipped {
                loops: &skipped_loops,
                settles: &skipped_settles,
                function: trees.iter().any(|tree| tree.root == 0),
            };
            hooks::insert(plan, &mut ins, &skipped, |ins| {
                for (j, tree_starts) in starts.iter().enumerate() {
                    let Some(local) = locals.get(j) else { break };
                    let root = ins.table.region_ptr(plan.slots.base + trees[j].root as u32);
                    for &(at, start) in tree_starts {
                        if start.enters_root {
                            // Not at the end of a block of another tree: its exits clear
                            // the note.
                            let before = start.running_from.filter(|&p| owner[p].is_none());
                            let before = before.map(|p| plan.cfg.blocks[p]);
                            match before.map(|block| LLVMGetBasicBlockTerminator(block)) {
                                Some(end) if !end.is_null() => ins.position_before(end),
                                _ => ins.position_before(at),
                            }
                            counter.set_running(ins.builder, root);
                        }
                        ins.position_before(at);
                        if start.enters_root {
                            counter.set_one(ins.builder, local.records[0][0]);
                        }
                        for &offset in &start.opened {
                            counter.add_one(ins.builder, local.records[offset][0]);
                        }
                    }
                }
                for access in &plan.accesses {
                    if let Access::CmpXchg { inst, ptr, size } = *access {
                        ins.cmpxchg_hook(inst, ptr, size);
                    }
                }
                for (at, counts, to) in &additions {
                    ins.position_before(*at);
                    let to = to.and_then(|(j, offset)| Some(&locals.get(j)?.records[offset]));
                    counter.add(ins.builder, counts, to);
                }
            });
            // Last, and before the hooks at the exit block's start: the whole instance is
            // reported in its parent, before the exit block settles anywhere else.
            for (tree, local) in trees.iter().zip(&locals) {
                let helper = report_helpers.get(&counter, module, tree.len);
                let region_ptr = ins.table.region_ptr(plan.slots.base + tree.root as u32);
                let exits = (tree.exits.iter())
                    .filter_map(|&block| ir::first_insertion_point(plan.cfg.blocks[block]));
                for at in exits.chain(tree.returns.iter().copied()) {
                    ins.position_before(at);
                    let mut args = vec![region_ptr, local.report];
                    args.extend(local.records.iter().flatten().copied());
                    helper.call(ins.builder, &mut args);
                }
            }
        }
        LLVMDisposeBuilder(builder);
    }
}

/// A subtree of a function's regions whose counts are kept in registers while it runs and
/// reported whole at its exits ([`promoted_trees`]).
struct PromotedTree {
    /// Its root's tree node; the tree is the nodes `root..root + len` (pre-order).
    root: usize,
    len: usize,
    /// The loops in it.
    loops: Vec<usize>,
    /// Its blocks: those whose innermost region is in it.
    blocks: Vec<usize>,
    /// Where instances of its regions start.
    starts: Vec<InstanceStart>,
    /// The blocks outside it that its blocks branch to.
    exits: Vec<usize>,
    /// For a tree of the whole function: its returns (where `__kage_func_exit` would go).
    returns: Vec<LLVMValueRef>,
}

/// Where instances start.
#[derive(Clone, Copy)]
enum Place {
    /// At the start of this block.
    Start(usize),
    /// On the edge `from -> to`: before `from`'s terminator when it has no other successor,
    /// else (`split`) in a block made on the edge (`from` ends in a conditional branch).
    Edge { from: usize, to: usize, split: bool },
}

/// Instances that start at a block's start, or on an edge.
struct InstanceStart {
    place: Place,
    /// The regions below the root (offsets in the tree) entered there.
    opened: Vec<usize>,
    /// Whether the root is noted as entered there (its instances set to 1).
    enters_root: bool,
    /// Where the thread notes that it runs the tree (`__kage_count_running`), when the root
    /// is entered here: at the end of the block all its entries from outside come through
    /// (a loop's preheader), so that the note is not repeated every iteration, or here.
    running_from: Option<usize>,
}

/// The subtrees whose counts are kept in registers while they run and reported whole at
/// their exits, in which nothing would reach the runtime but their own region events (no
/// call that may run instrumented code, no resume point, no `cmpxchg` hook, no return but
/// the function's own). So no region event falls inside them but balanced signal handlers',
/// and the regions open at every block are the static ones
/// ([`region_tree`](crate::region_tree)): the instances the hooks would count are known per
/// edge. Each is a loop or an inlined call with its descendants, or the whole function (a
/// leaf: it reports before its returns, in the region that called it), at most
/// `kage_abi::MAX_COUNTED_REGIONS` regions, the outermost such ones (pre-order), and its
/// instances must start at block starts or on edges from a block with one successor or a
/// conditional branch (which get a block of their own).
///
/// # Safety
/// `plan` must describe a live function that nothing was inserted into yet.
unsafe fn promoted_trees(plan: &FunctionPlan) -> Vec<PromotedTree> {
    let n = plan.cfg.blocks.len();
    let nodes = &plan.tree().nodes;
    let block_region = &plan.tree().block_region;
    // Blocks where something reaches the runtime: resume points and `cmpxchg`s (their hook
    // counts in the runtime, into the innermost open region, which is the tree's parent
    // while it runs); and returns, which only a tree of the whole function may hold.
    let mut reaches_runtime = vec![false; n];
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
        reaches_runtime[block] = true;
    }
    for block in plan.exits.iter().filter_map(|&inst| block_of(inst)) {
        returns[block] = true;
    }
    let quiet: Vec<bool> = (0..n)
        .map(|b| {
            let block = plan.cfg.blocks[b];
            plan.forest.reachable[b]
                && !reaches_runtime[b]
                && ir::first_insertion_point(block).is_some()
                && !ir::is_landing_pad(block)
                && !ir::instructions(block)
                    .into_iter()
                    .any(|i| segments::is_cut(i))
        })
        .collect();
    let mut predecessors = vec![Vec::new(); n];
    for (p, succs) in plan.cfg.successors.iter().enumerate() {
        for &s in succs.iter().filter(|&&s| s < n) {
            if plan.forest.reachable[p] && !predecessors[s].contains(&p) {
                predecessors[s].push(p);
            }
        }
    }
    // Each node's subtree: the nodes `i..i + size[i]` (pre-order).
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
    let header_of: std::collections::HashMap<usize, usize> = (plan.forest.loops.iter())
        .enumerate()
        .map(|(k, lp)| (lp.header, k))
        .collect();
    // The regions entered on the edge `from -> to` (`None`: the function's start), as the
    // hooks enter them: a header's iteration hook reopens its loop's body below everything
    // of the previous iteration, a settle the regions down from the closest common ancestor.
    let opened = |from: Option<usize>, to: usize| -> Vec<usize> {
        let target = block_region[to];
        let stop = match (from, header_of.get(&to)) {
            (Some(p), Some(&k)) if plan.forest.contains(k, p) => {
                nodes[plan.tree().loop_node[k] + 1].parent
            }
            (Some(p), _) => Some(common_ancestor(nodes, block_region[p], target)),
            (None, _) => None,
        };
        let mut path = Vec::new();
        let mut at = Some(target);
        while at != stop {
            let Some(node) = at else { break };
            path.push(node);
            at = nodes[node].parent;
        }
        path
    };
    // Whether the edge `from -> to` can have a block made on it: `from` ends in a
    // conditional branch to two blocks, `to` has other predecessors (a critical edge).
    let splittable = |from: usize, to: usize| {
        let successors = &plan.cfg.successors[from];
        let terminator = LLVMGetBasicBlockTerminator(plan.cfg.blocks[from]);
        !terminator.is_null()
            && ir::opcode(terminator) == LLVMOpcode::LLVMBr
            && successors.len() == 2
            && successors[0] != successors[1]
            && successors.contains(&to)
            && predecessors[to].len() > 1
    };
    let try_tree = |root: usize| -> Option<PromotedTree> {
        let whole_function = match nodes[root].kind {
            NodeKind::Loop(_) | NodeKind::Inlined(_) => false,
            NodeKind::Function => true,
            NodeKind::LoopBody(_) => return None,
        };
        let len = size[root];
        if len > kage_abi::MAX_COUNTED_REGIONS {
            return None;
        }
        let inside = |node: usize| (root..root + len).contains(&node);
        let mut blocks: Vec<usize> = (root..root + len)
            .flat_map(|node| node_blocks[node].iter().copied())
            .collect();
        blocks.sort_unstable();
        if blocks.is_empty()
            || !blocks
                .iter()
                .all(|&b| quiet[b] && (whole_function || !returns[b]))
        {
            return None;
        }
        let loops: Vec<usize> = (root..root + len)
            .filter_map(|node| match nodes[node].kind {
                NodeKind::Loop(k) => Some(k),
                _ => None,
            })
            .collect();
        let in_tree = |b: usize| blocks.binary_search(&b).is_ok();
        let mut starts = Vec::new();
        for &b in &blocks {
            let edges: Vec<(Option<usize>, Vec<usize>)> = predecessors[b]
                .iter()
                .map(|&p| Some(p))
                .chain((b == 0).then_some(None))
                .map(|p| {
                    let mut entered: Vec<usize> = opened(p, b)
                        .into_iter()
                        .filter(|&node| inside(node))
                        .map(|node| node - root)
                        .collect();
                    entered.sort_unstable();
                    (p, entered)
                })
                .collect();
            // The root runs once per report: noting it as entered (1) may repeat.
            let enters_root = edges.iter().any(|(_, entered)| entered.contains(&0));
            // What every edge enters counts at the block's start, the rest on the edges.
            let mut common = edges.first().map(|(_, e)| e.clone()).unwrap_or_default();
            common.retain(|node| *node != 0 && edges.iter().all(|(_, e)| e.contains(node)));
            if enters_root || !common.is_empty() {
                let mut outside = predecessors[b].iter().copied().filter(|&p| !in_tree(p));
                let running_from = match (outside.next(), outside.next()) {
                    (Some(p), None) if b != 0 && plan.cfg.successors[p].iter().all(|&s| s == b) => {
                        Some(p)
                    }
                    _ => None,
                };
                starts.push(InstanceStart {
                    place: Place::Start(b),
                    opened: common.clone(),
                    enters_root,
                    running_from,
                });
            }
            for (p, entered) in edges {
                let extra: Vec<usize> = (entered.into_iter())
                    .filter(|node| *node != 0 && !common.contains(node))
                    .collect();
                if extra.is_empty() {
                    continue;
                }
                // On the edge itself: at the end of its source when that is its only way
                // out, else in a block of its own (from a conditional branch).
                let p = p?;
                let split = !plan.cfg.successors[p].iter().all(|&s| s == b);
                if split && !splittable(p, b) {
                    return None;
                }
                starts.push(InstanceStart {
                    place: Place::Edge {
                        from: p,
                        to: b,
                        split,
                    },
                    opened: extra,
                    enters_root: false,
                    running_from: None,
                });
            }
        }
        let mut exits: Vec<usize> = (blocks.iter())
            .flat_map(|&b| plan.cfg.successors[b].iter().copied())
            .filter(|&s| s < n && !in_tree(s))
            .collect();
        exits.sort_unstable();
        exits.dedup();
        if !(exits.iter()).all(|&b| ir::first_insertion_point(plan.cfg.blocks[b]).is_some()) {
            return None;
        }
        Some(PromotedTree {
            root,
            len,
            loops,
            blocks,
            starts,
            exits,
            returns: if whole_function {
                plan.exits.clone()
            } else {
                Vec::new()
            },
        })
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

/// The closest common ancestor of tree nodes `a` and `b` (a node is its own ancestor).
fn common_ancestor(nodes: &[Node], a: usize, b: usize) -> usize {
    let ancestors = |mut node: usize| {
        let mut chain = vec![node];
        while let Some(parent) = nodes[node].parent {
            chain.push(parent);
            node = parent;
        }
        chain
    };
    let of_a = ancestors(a);
    (ancestors(b).into_iter())
        .find(|node| of_a.contains(node))
        .unwrap_or(0)
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

/// `__kage_count`, `__kage_gate`, `__kage_fast_loop` and `__kage_iterations`, declared in
/// one module.
struct InlineCounter {
    totals: LLVMValueRef,
    /// `__kage_count_running`.
    running: LLVMValueRef,
    totals_type: LLVMTypeRef,
    gate: LLVMValueRef,
    fast_loop: LLVMValueRef,
    iterations: LLVMValueRef,
    i32_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
    module: LLVMModuleRef,
}

impl InlineCounter {
    /// Declares the globals in `module`.
    ///
    /// # Safety
    /// `module` must be a valid module.
    unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        let i64_type = LLVMInt64TypeInContext(context);
        let totals = ir::declare_runtime_global(module, &symbols::COUNT_TOTALS);
        InlineCounter {
            totals,
            totals_type: LLVMGlobalGetValueType(totals),
            running: ir::declare_runtime_global(module, &symbols::COUNT_RUNNING),
            gate: ir::declare_runtime_global(module, &symbols::GATE),
            fast_loop: ir::declare_runtime_global(module, &symbols::FAST_LOOP),
            iterations: ir::declare_runtime_global(module, &symbols::ITERATIONS),
            i32_type: LLVMInt32TypeInContext(context),
            i64_type,
            module,
        }
    }

    /// An inline helper for loop headers. `void __kage_count_loop_iter(ptr loop)`: adds 1 to
    /// `__kage_iterations` when `__kage_fast_loop` is `loop`, else calls `loop_iter`
    /// (`__kage_loop_iter`).
    ///
    /// # Safety
    /// `module` must be the module the globals were declared in.
    unsafe fn define_loop_iter(
        &self,
        module: LLVMModuleRef,
        loop_iter: &RuntimeFunction,
    ) -> RuntimeFunction {
        let context = LLVMGetModuleContext(module);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let mut params = [ptr_type];
        let ty = LLVMFunctionType(LLVMVoidTypeInContext(context), params.as_mut_ptr(), 1, 0);
        let f = ir::define_inline_helper(module, "__kage_count_loop_iter", ty);
        let lp = LLVMGetParam(f, 0);
        let builder = LLVMCreateBuilderInContext(context);
        let block =
            |name: &std::ffi::CStr| LLVMAppendBasicBlockInContext(context, f, name.as_ptr());
        let (entry, fast, slow) = (block(c"entry"), block(c"fast"), block(c"slow"));
        LLVMPositionBuilderAtEnd(builder, entry);
        let armed = ir::load_relaxed(builder, ptr_type, self.address(builder, self.fast_loop));
        let same = LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntEQ,
            armed,
            lp,
            c"".as_ptr(),
        );
        let branch = LLVMBuildCondBr(builder, same, fast, slow);
        ir::set_branch_weights(branch, 1 << 20, 1);
        LLVMPositionBuilderAtEnd(builder, fast);
        let one = LLVMConstInt(self.i64_type, 1, 0);
        ir::add_relaxed(builder, self.address(builder, self.iterations), one);
        LLVMBuildRetVoid(builder);
        LLVMPositionBuilderAtEnd(builder, slow);
        loop_iter.call(builder, &mut [lp]);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
        RuntimeFunction::helper(f, ty)
    }

    /// An inline helper for the exits of a promoted tree of `n` regions, `void
    /// __kage_count_regions_exit.<n>(ptr region, ptr report, ptr locals...)`, the locals
    /// being each region's instances, loads, stores, bytes read and bytes written (`i64`s):
    /// clears `__kage_count_running`, and when the tree ran (its root's instances are not
    /// 0; an exit block may also be reached from outside it), copies them to `report` (the
    /// accesses masked by the gate), zeroes them and calls `__kage_count_regions(region, n,
    /// report)`.
    ///
    /// # Safety
    /// `module` must be the module the globals were declared in.
    unsafe fn define_report(&self, module: LLVMModuleRef, n: usize) -> RuntimeFunction {
        let context = LLVMGetModuleContext(module);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let words = n * kage_abi::COUNT_RECORD_WORDS;
        let mut params = vec![ptr_type; 2 + words];
        let ty = LLVMFunctionType(
            LLVMVoidTypeInContext(context),
            params.as_mut_ptr(),
            params.len() as u32,
            0,
        );
        let f = ir::define_inline_helper(module, &format!("__kage_count_regions_exit.{n}"), ty);
        let (region, report) = (LLVMGetParam(f, 0), LLVMGetParam(f, 1));
        let locals: Vec<LLVMValueRef> = (0..words).map(|i| LLVMGetParam(f, 2 + i as u32)).collect();
        let runtime = RuntimeFunction::declare(module, &symbols::COUNT_REGIONS);
        let builder = LLVMCreateBuilderInContext(context);
        let block =
            |name: &std::ffi::CStr| LLVMAppendBasicBlockInContext(context, f, name.as_ptr());
        let (entry, ran, done) = (block(c"entry"), block(c"ran"), block(c"done"));
        LLVMPositionBuilderAtEnd(builder, entry);
        // Whether or not the tree ran, none runs now (trees do not nest).
        self.set_running(builder, LLVMConstNull(ptr_type));
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let root = LLVMBuildLoad2(builder, self.i64_type, locals[0], c"".as_ptr());
        LLVMSetAlignment(root, 8);
        let none = LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntEQ,
            root,
            zero,
            c"".as_ptr(),
        );
        LLVMBuildCondBr(builder, none, done, ran);
        LLVMPositionBuilderAtEnd(builder, ran);
        let mask = self.gate_mask(builder);
        for (i, &local) in locals.iter().enumerate() {
            let mut value = LLVMBuildLoad2(builder, self.i64_type, local, c"".as_ptr());
            LLVMSetAlignment(value, 8);
            if i % kage_abi::COUNT_RECORD_WORDS != 0 {
                value = LLVMBuildAnd(builder, value, mask, c"".as_ptr());
            }
            let mut index = [LLVMConstInt(self.i64_type, i as u64, 0)];
            let slot = LLVMBuildInBoundsGEP2(
                builder,
                self.i64_type,
                report,
                index.as_mut_ptr(),
                1,
                c"".as_ptr(),
            );
            LLVMSetAlignment(LLVMBuildStore(builder, value, slot), 8);
            LLVMSetAlignment(LLVMBuildStore(builder, zero, local), 8);
        }
        let count = LLVMConstInt(self.i64_type, n as u64, 0);
        runtime.call(builder, &mut [region, count, report]);
        LLVMBuildBr(builder, done);
        LLVMPositionBuilderAtEnd(builder, done);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
        RuntimeFunction::helper(f, ty)
    }

    /// `llvm.threadlocal.address(global)`.
    unsafe fn address(&self, builder: LLVMBuilderRef, global: LLVMValueRef) -> LLVMValueRef {
        ir::thread_local_address(self.module, builder, global)
    }

    /// `*cell += value`, a local's plain load and store (mem2reg makes it a register).
    unsafe fn add_plain(&self, builder: LLVMBuilderRef, cell: LLVMValueRef, value: LLVMValueRef) {
        let old = LLVMBuildLoad2(builder, self.i64_type, cell, c"".as_ptr());
        LLVMSetAlignment(old, 8);
        let new = LLVMBuildAdd(builder, old, value, c"".as_ptr());
        LLVMSetAlignment(LLVMBuildStore(builder, new, cell), 8);
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

    /// Cell `k` of a `[4 x i64]` at `base`.
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

    /// At the builder's position (the entry block's start): the buffer promoted trees'
    /// reports are copied to (`records` records).
    ///
    /// # Safety
    /// `builder` must be positioned at the start of a function's entry block.
    unsafe fn report_buffer(&self, builder: LLVMBuilderRef, records: usize) -> LLVMValueRef {
        let words = records * kage_abi::COUNT_RECORD_WORDS;
        let ty = LLVMArrayType2(self.i64_type, words as u64);
        let buffer = LLVMBuildAlloca(builder, ty, c"kage.report".as_ptr());
        LLVMSetAlignment(buffer, 8);
        buffer
    }

    /// At the builder's position (the entry block's start): the locals of a promoted tree
    /// of `len` regions, zero; `report` is the function's report buffer.
    ///
    /// # Safety
    /// `builder` must be positioned at the start of a function's entry block.
    unsafe fn tree_locals(
        &self,
        builder: LLVMBuilderRef,
        len: usize,
        report: LLVMValueRef,
    ) -> TreeLocals {
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let records = (0..len)
            .map(|_| {
                std::array::from_fn(|_| {
                    let local = LLVMBuildAlloca(builder, self.i64_type, c"kage.count".as_ptr());
                    LLVMSetAlignment(local, 8);
                    LLVMSetAlignment(LLVMBuildStore(builder, zero, local), 8);
                    local
                })
            })
            .collect();
        TreeLocals { records, report }
    }

    /// At the builder's position: the local `instances` set to 1.
    ///
    /// # Safety
    /// `builder` must be positioned in the function `instances` belongs to.
    unsafe fn set_one(&self, builder: LLVMBuilderRef, instances: LLVMValueRef) {
        let one = LLVMConstInt(self.i64_type, 1, 0);
        LLVMSetAlignment(LLVMBuildStore(builder, one, instances), 8);
    }

    /// At the builder's position: `__kage_count_running = root` (null: none).
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module the globals were declared
    /// in.
    unsafe fn set_running(&self, builder: LLVMBuilderRef, root: LLVMValueRef) {
        let store = LLVMBuildStore(builder, root, self.address(builder, self.running));
        LLVMSetOrdering(store, LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic);
        LLVMSetAlignment(store, 8);
    }

    /// At the builder's position: 1 added to the local `instances`.
    ///
    /// # Safety
    /// `builder` must be positioned in the function `instances` belongs to.
    unsafe fn add_one(&self, builder: LLVMBuilderRef, instances: LLVMValueRef) {
        self.add_plain(builder, instances, LLVMConstInt(self.i64_type, 1, 0));
    }

    /// At the builder's position: `counts` added to the thread's cells, each masked by the
    /// gate (relaxed atomic loads and stores, plain moves: only this thread writes its cells),
    /// or, in a promoted tree, to the locals of the region the block is in (`local`:
    /// instances, loads, stores, bytes read, bytes written).
    ///
    /// # Safety
    /// `builder` must be positioned in a function of the module, where `counts`' lengths
    /// are defined (and `local`, if any, is the function's).
    unsafe fn add(
        &self,
        builder: LLVMBuilderRef,
        counts: &SegmentCounts,
        local: Option<&[LLVMValueRef; kage_abi::COUNT_RECORD_WORDS]>,
    ) {
        let mut values: [Option<LLVMValueRef>; 4] = [None; 4];
        for (k, &constant) in counts.constant.iter().enumerate() {
            if constant != 0 {
                values[k] = Some(LLVMConstInt(self.i64_type, constant, 0));
            }
        }
        for &(len, reads) in &counts.dynamic {
            let len = LLVMBuildIntCast2(builder, len, self.i64_type, 0, c"".as_ptr());
            let zero = LLVMConstInt(self.i64_type, 0, 0);
            let nonempty = LLVMBuildICmp(
                builder,
                LLVMIntPredicate::LLVMIntNE,
                len,
                zero,
                c"".as_ptr(),
            );
            let one = LLVMBuildZExt(builder, nonempty, self.i64_type, c"".as_ptr());
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
        if let Some(local) = local {
            for (k, value) in values.iter().enumerate() {
                if let Some(value) = *value {
                    self.add_plain(builder, local[1 + k], value);
                }
            }
            return;
        }
        let mask = self.gate_mask(builder);
        let totals = self.address(builder, self.totals);
        for (k, value) in values.iter().enumerate() {
            let Some(value) = *value else { continue };
            let masked = LLVMBuildAnd(builder, value, mask, c"".as_ptr());
            ir::add_relaxed(builder, self.cell(builder, totals, k), masked);
        }
    }
}

/// A promoted tree's locals.
struct TreeLocals {
    /// Per region of the tree: instances, loads, stores, bytes read, bytes written (`i64`
    /// allocas, zero outside the tree).
    records: Vec<[LLVMValueRef; kage_abi::COUNT_RECORD_WORDS]>,
    /// The function's report buffer.
    report: LLVMValueRef,
}

/// The report helpers defined in a module, one per tree size.
#[derive(Default)]
struct ReportHelpers(Vec<(usize, RuntimeFunction)>);

impl ReportHelpers {
    /// The helper for trees of `n` regions, defined on first use.
    ///
    /// # Safety
    /// `module` must be the module `counter`'s globals were declared in.
    unsafe fn get(
        &mut self,
        counter: &InlineCounter,
        module: LLVMModuleRef,
        n: usize,
    ) -> &RuntimeFunction {
        let at = match self.0.iter().position(|(size, _)| *size == n) {
            Some(at) => at,
            None => {
                self.0.push((n, counter.define_report(module, n)));
                self.0.len() - 1
            }
        };
        &self.0[at].1
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
