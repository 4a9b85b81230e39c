//! The inline code of a count build: the helpers each module defines once ([`Inline`]:
//! a function's entry, opening and closing a record, a tree's report...) and what one
//! function's edges, segments and returns get ([`Emitter`]).

use kage_abi::count::{
    ACTIVATIONS, ACTIVATION_SIZE, CAPACITY, DEPTH, FRAME, INCLUSIVE, INSTANCES, RECORDS, SELF, TOP,
    WORDS,
};
use kage_abi::{layout, symbols};
use llvm_sys::core::*;
use llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::{LLVMAtomicOrdering, LLVMIntPredicate};
use std::cell::RefCell;

use super::regions::{path_up, Change, PromotedTree};
use super::{SegmentCounts, BYTES_READ, BYTES_WRITTEN, LOADS, STORES};
use crate::ir::{self, RuntimeFunction};
use crate::plan::FunctionPlan;
use crate::region_tree::Node;
use crate::regions::RegionTable;

/// A promoted tree's locals: per region, its instances, loads, stores, bytes read and bytes
/// written (`i64` allocas, zero outside the tree).
pub(super) struct TreeLocals(Vec<[LLVMValueRef; 5]>);

/// A constant added to a tree's local, as emitted: `load`, `add`, `store`.
pub(super) struct TreeAdd {
    pub(super) tree: usize,
    pub(super) local: LLVMValueRef,
    pub(super) amount: u64,
    pub(super) instructions: [LLVMValueRef; 3],
}

/// What the emitter built that [`super::classes`] may rewrite: each constant added to a
/// tree's locals, each tree's report (tree, call) and where a tree that does not wait is
/// entered (tree, the first of the stores that zero its locals there).
#[derive(Default)]
pub(super) struct Emitted {
    pub(super) adds: Vec<TreeAdd>,
    pub(super) flushes: Vec<(usize, LLVMValueRef)>,
    pub(super) entries: Vec<(usize, LLVMValueRef)>,
}

/// What a tree's report visits its regions with ([`Inline::flush_region`]).
struct FlushSite<'a> {
    helper: &'a HelperBuilder,
    /// The tree root's record; the others follow it.
    root_record: LLVMValueRef,
    /// Per region of the tree: which of its own counters its segments may add to.
    counts: &'a [[bool; 4]],
    /// Per region of the tree: its uniform load and store sizes, whose bytes are derived.
    sizes: &'a [[Option<u64>; 2]],
    /// Per region of the tree: its children (local indices).
    children: &'a [Vec<usize>],
    /// Per region of the tree with copies in the module: the byte offset from the root's
    /// record of the word counting its source region's open instances.
    cells: &'a [Option<u64>],
    /// The local of region `i`'s word `w` (instances, loads, stores, bytes read, written).
    local: &'a dyn Fn(usize, usize) -> LLVMValueRef,
}

/// How many regions a function counts in records before it reads their base afresh at each
/// use: otherwise LLVM hoists each record's address out of the loops, and in a function
/// with hundreds of them (an interpreter's loop: SQLite's `sqlite3VdbeExec`) the register
/// allocator spills them all at every call (a `lea` and a store each, 430 instructions a
/// call). A fresh read costs what the reload of a spilled address costs.
pub(super) const RECORDS_RELOADED_FROM: usize = 64;

/// Builds one function's inline code at the builder's position.
pub(super) struct Emitter<'a> {
    pub(super) inline: &'a Inline,
    pub(super) builder: LLVMBuilderRef,
    /// The thread's records of the module's regions (from the function's entry; none in a
    /// promoted function, whose report looks them up).
    pub(super) records: Option<LLVMValueRef>,
    /// Where `records` is kept when the function counts many regions in records (a deferred
    /// function's local of them): read afresh (a volatile load) at each use
    /// ([`RECORDS_RELOADED_FROM`]).
    pub(super) records_slot: Option<LLVMValueRef>,
    /// The function's activation index (none in a promoted function).
    pub(super) activation: Option<LLVMValueRef>,
    pub(super) table: &'a RegionTable,
    /// The function's first table index (its tree node 0).
    pub(super) base: u32,
    pub(super) trees: &'a [PromotedTree],
    pub(super) locals: &'a [TreeLocals],
    /// Per region: its uniform load and store sizes; a tree's region then counts no bytes in
    /// locals, its report derives them from its loads and stores.
    pub(super) sizes: &'a [[Option<u64>; 2]],
    /// Each tree's report helper.
    pub(super) flushes: &'a [RuntimeFunction],
    /// Per tree: whether it waits to report ([`super::regions::delay_reports`]).
    pub(super) waits: &'a [bool],
    /// The function's entry, when it is deferred until it needs its activation.
    pub(super) deferred: Option<&'a DeferredEntry>,
    /// Per tree: the locals its report leaves the thread's totals in (its parent's, when
    /// that is deferred).
    pub(super) tree_pending: &'a [Option<[LLVMValueRef; 4]>],
    /// The function's regions (tree nodes).
    pub(super) nodes: &'a [Node],
    /// Per region: its deferral, when it is deferred.
    pub(super) deferred_regions: &'a [Option<DeferredRegion>],
    /// The locals holding the function's additions to the thread's totals not made yet
    /// (none in a promoted function, which counts everything in its tree's locals).
    pub(super) waiting_totals: Option<[LLVMValueRef; 4]>,
    pub(super) emitted: RefCell<Emitted>,
}

/// What a push needs: the module, the function's table entry, its frame, and the byte
/// offsets in the module's records of its record and of the word counting its source
/// region's open instances.
struct Push {
    module: LLVMValueRef,
    function: LLVMValueRef,
    frame: LLVMValueRef,
    offset: LLVMValueRef,
    open_offset: LLVMValueRef,
}

/// A function whose activation is pushed only when it first needs one
/// ([`Inline::quiet_enter`]): before a call, a region that is counted in records, or a block
/// the runtime changes. Until then (and for an instance that never needs one) its own
/// counts, and the accesses of the trees directly under it, wait in locals; a return that
/// finds no activation reports them as a promoted tree would, the function's own record
/// included.
pub(super) struct DeferredEntry {
    /// `i1` local: the activation was pushed.
    flag: LLVMValueRef,
    /// `ptr` local: the thread's records of the module.
    pub(super) records: LLVMValueRef,
    /// `i32` local: the activation, once pushed.
    activation: LLVMValueRef,
    /// `i64` locals: the function's own loads, stores, bytes read and written, whether
    /// counting is on or not (the report looks at the gate); then what the trees directly
    /// under it added while it was on, for the thread's totals.
    own: [LLVMValueRef; 4],
    pub(super) pending: [LLVMValueRef; 4],
    module: LLVMValueRef,
    /// The function's table entry.
    function: LLVMValueRef,
    frame: LLVMValueRef,
    /// Byte offsets in the module's records of the function's record and of the word
    /// counting its source region's open instances.
    offset: LLVMValueRef,
    open_offset: LLVMValueRef,
    materialize: RuntimeFunction,
    leave: RuntimeFunction,
}

/// An inlined call whose record opens only when it needs to (docs/abi.md, "Deferred
/// regions"): before a call in its own code, or before a region counted in records opens
/// inside it. Until then its own counts, and the accesses of the trees and
/// deferred regions directly under it, wait in locals; leaving it unopened reports them as
/// a promoted tree's root would.
pub(super) struct DeferredRegion {
    /// `i1` local: its record is open.
    flag: LLVMValueRef,
    /// `i64` locals: its own loads, stores, bytes read and written, whether counting is on
    /// or not (the report looks at the gate); then what the trees and deferred regions
    /// directly under it added, for the thread's totals.
    own: [LLVMValueRef; 4],
    pub(super) pending: [LLVMValueRef; 4],
    /// The parent's pending locals, when the parent is deferred: where a quiet leave puts
    /// the thread's totals.
    parent_pending: Option<[LLVMValueRef; 4]>,
    open: RuntimeFunction,
    leave: RuntimeFunction,
}

/// A deferred region's locals, before its helpers are chosen.
pub(super) struct DeferredLocals {
    flag: LLVMValueRef,
    own: [LLVMValueRef; 4],
    pending: [LLVMValueRef; 4],
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

    /// The thread's records of the module (not in a promoted function).
    unsafe fn records(&self) -> LLVMValueRef {
        match (self.records_slot, self.deferred) {
            (Some(slot), _) => {
                let records = self.plain_load(self.inline.ptr_type, slot);
                LLVMSetVolatile(records, 1);
                records
            }
            (None, Some(d)) => self.plain_load(self.inline.ptr_type, d.records),
            (None, None) => self.records.expect("records outside promoted functions"),
        }
    }

    /// The record of tree node `node` (not in a promoted function).
    unsafe fn record(&self, node: usize) -> LLVMValueRef {
        self.record_in(self.records(), node)
    }

    /// The record of tree node `node` and the word counting its source region's open
    /// instances ([`kage_abi::count::open_offset`]), as the helpers that open and close
    /// records take them.
    unsafe fn record_and_cell(&self, node: usize) -> [LLVMValueRef; 2] {
        let records = self.records();
        let offset = self.table.open_offset(self.base + node as u32);
        let cell = ir::byte_gep(
            self.builder,
            records,
            LLVMConstInt(self.inline.i64_type, offset, 0),
        );
        [self.record_in(records, node), cell]
    }

    unsafe fn activation(&self) -> LLVMValueRef {
        match self.deferred {
            Some(d) => self.plain_load(self.inline.i32_type, d.activation),
            None => self
                .activation
                .expect("an activation outside promoted functions"),
        }
    }

    unsafe fn plain_load(&self, ty: LLVMTypeRef, local: LLVMValueRef) -> LLVMValueRef {
        LLVMBuildLoad2(self.builder, ty, local, c"".as_ptr())
    }

    /// A deferred function pushes its activation if it has not yet, and reports the counts
    /// waiting in its locals (the thread's totals must have them before a region opens or
    /// another function starts).
    pub(super) unsafe fn materialize(&self) {
        let Some(d) = self.deferred else {
            return;
        };
        let mut args = vec![
            d.module,
            d.function,
            d.frame,
            d.offset,
            d.open_offset,
            d.flag,
            d.records,
            d.activation,
        ];
        args.extend(d.own);
        args.extend(d.pending);
        d.materialize.call(self.builder, &mut args);
    }

    fn deferred_region(&self, node: usize) -> Option<&DeferredRegion> {
        self.deferred_regions.get(node)?.as_ref()
    }

    /// The table entry of tree node `node`.
    unsafe fn entry(&self, node: usize) -> LLVMValueRef {
        self.table.region_ptr(self.base + node as u32)
    }

    /// Before a call in the own code of `node`, or a region counted in records opening
    /// under it: the function's activation, then each deferred region around `node` and
    /// `node` itself (outermost first) open in records, what waited in their locals
    /// reported.
    pub(super) unsafe fn materialize_down_to(&self, node: usize) {
        self.materialize();
        for &n in path_up(self.nodes, node, None).iter().rev() {
            if let Some(d) = self.deferred_region(n) {
                let mut args = self.record_and_cell(n).to_vec();
                args.extend([self.activation(), self.entry(n), d.flag]);
                args.extend(d.own);
                args.extend(d.pending);
                d.open.call(self.builder, &mut args);
            }
        }
    }

    /// Deferred region `node` is left: closed if it was opened, else reported as a tree's
    /// root.
    unsafe fn leave_deferred(&self, node: usize, d: &DeferredRegion) {
        let parent = self.nodes[node]
            .parent
            .expect("a deferred region has a parent");
        let mut args = self.record_and_cell(node).to_vec();
        args.extend([self.activation(), self.entry(parent), d.flag]);
        args.extend(d.own);
        args.extend(d.pending);
        args.extend(d.parent_pending.into_iter().flatten());
        d.leave.call(self.builder, &mut args);
    }

    /// Region `node` (not in a tree) closes: a deferred one is left; whether a record
    /// closed for sure.
    unsafe fn close(&self, node: usize) -> bool {
        match self.deferred_region(node) {
            Some(d) => {
                self.leave_deferred(node, d);
                false
            }
            None => {
                self.inline
                    .close
                    .call(self.builder, &mut self.record_and_cell(node));
                true
            }
        }
    }

    /// The additions to the thread's totals that wait in locals made (a branch on whether
    /// any is not 0, which folds away where they are known to be).
    pub(super) unsafe fn settle_totals(&self) {
        if let Some(waiting) = self.waiting_totals {
            self.inline.settle_totals(self.builder, waiting);
        }
    }

    pub(super) unsafe fn change(&self, c: &Change) {
        // A record that opens or closes reads the totals.
        let counted_in_records = |node: &usize| self.deferred_region(*node).is_none();
        if !c.records.closes.is_empty() || c.records.opens.iter().any(counted_in_records) {
            self.settle_totals();
        }
        for &j in &c.reports {
            self.flush(j);
        }
        match c.flush.filter(|j| !c.reports.contains(j)) {
            // A tree that waits is no longer running: a fault from here on is not its.
            Some(j) if self.waits[j] => self.inline.set_running(self.builder, self.running_after()),
            Some(j) => self.flush(j),
            None => {}
        }
        let t = &c.records;
        let counted_in_records = |node: &usize| self.deferred_region(*node).is_none();
        // Whether a region counted in records closes or opens: the activation's innermost
        // region changes. (A deferred region's leave sets it if it was opened.)
        let mut moved = false;
        for &node in &t.closes {
            moved |= self.close(node);
        }
        // A record opening takes the thread's totals: what waits around it is reported
        // first. (A loop body counted in records iterates only inside its loop's record,
        // which opened them all.)
        if let Some(first) = t.opens.iter().copied().find(counted_in_records) {
            match self.nodes[first].parent {
                Some(parent) => self.materialize_down_to(parent),
                None => self.materialize(),
            }
        }
        if let Some(body) = t.iteration {
            let one = LLVMConstInt(self.inline.i64_type, 1, 0);
            self.inline
                .add_word(self.builder, self.record(body), INSTANCES, one);
        }
        // Deferred regions opened on this edge open nothing yet (those above a region
        // counted in records were opened just above).
        for &node in t.opens.iter().filter(|n| counted_in_records(n)) {
            self.inline
                .open
                .call(self.builder, &mut self.record_and_cell(node));
            moved = true;
        }
        if moved {
            // The innermost region open in records: the last opened, else the target's
            // closest one not opened on this edge.
            let mut target = t.target;
            if let Some(&last) = t.opens.iter().rev().find(|n| counted_in_records(n)) {
                target = last;
            } else {
                while self.deferred_region(target).is_some() && t.opens.contains(&target) {
                    target = self.nodes[target]
                        .parent
                        .expect("a deferred region has a parent");
                }
            }
            self.inline
                .set_current
                .call(self.builder, &mut [self.activation(), self.entry(target)]);
        }
        for &node in &c.counted {
            // A tree's root starts: the thread notes it, for a fatal signal's report.
            if let Some(j) = self.trees.iter().position(|t| t.root == node) {
                let entry = self.table.region_ptr(self.base + node as u32);
                self.inline.set_running(self.builder, entry);
                // Its locals are 0 here (its last visit reported them), unless it waits: said
                // so, they are dead outside the tree. Else mem2reg carries them around every
                // loop outside it too, through phis that LLVM cannot fold when a join has
                // more than 64 ways in (PCRE2's `match()`, one loop around its dispatch: 328
                // locals spilled, 300 stores of 0 at each call).
                if !self.waits[j] {
                    self.zero_locals(j);
                }
            }
            if let Some(local) = self.local(node) {
                self.add_to_tree(node, local[0], LLVMConstInt(self.inline.i64_type, 1, 0));
            }
        }
    }

    /// The promoted tree holding tree node `node`, if any.
    fn tree_of(&self, node: usize) -> Option<usize> {
        (self.trees.iter()).position(|t| (t.root..t.root + t.len).contains(&node))
    }

    /// Stores 0 to tree `j`'s locals, at an entry into it (noted in [`Emitted`]).
    unsafe fn zero_locals(&self, j: usize) {
        let zero = LLVMConstInt(self.inline.i64_type, 0, 0);
        let mut first = None;
        for &local in self.locals[j].0.iter().flatten() {
            let store = LLVMBuildStore(self.builder, zero, local);
            LLVMSetAlignment(store, 8);
            first.get_or_insert(store);
        }
        if let Some(first) = first {
            self.emitted.borrow_mut().entries.push((j, first));
        }
    }

    /// The locals of tree node `node`, if it is in a promoted tree.
    fn local(&self, node: usize) -> Option<&[LLVMValueRef; 5]> {
        let j = self.tree_of(node)?;
        self.locals[j].0.get(node - self.trees[j].root)
    }

    /// `*local += value` for a local of tree node `node`'s tree; a constant is noted in
    /// [`Emitted`].
    unsafe fn add_to_tree(&self, node: usize, local: LLVMValueRef, value: LLVMValueRef) {
        let instructions = self.inline.add_plain(self.builder, local, value);
        if let (Some(tree), false) = (self.tree_of(node), LLVMIsAConstantInt(value).is_null()) {
            self.emitted.borrow_mut().adds.push(TreeAdd {
                tree,
                local,
                amount: LLVMConstIntGetZExtValue(value),
                instructions,
            });
        }
    }

    /// Tree `j`'s report (when it ran: an exit block may also be reached from outside it).
    pub(super) unsafe fn flush(&self, j: usize) {
        let records = match (self.deferred, self.records) {
            (None, None) => self
                .inline
                .records
                .call(self.builder, &mut [self.table.module_global]),
            _ => self.records(),
        };
        let mut args = vec![self.record_in(records, self.trees[j].root)];
        args.extend(self.locals[j].0.iter().flatten().copied());
        if let Some(pending) = self.tree_pending[j] {
            args.extend(pending);
        }
        args.push(self.running_after());
        let call = self.flushes[j].call(self.builder, &mut args);
        self.emitted.borrow_mut().flushes.push((j, call));
    }

    /// What `__kage_count_running` holds once a tree no longer runs.
    unsafe fn running_after(&self) -> LLVMValueRef {
        let null = LLVMConstPointerNull(self.inline.ptr_type);
        match self.deferred {
            Some(d) => {
                // The function runs on: it is the tree a fault would name until it is pushed.
                let pushed = self.plain_load(LLVMInt1TypeInContext(self.context()), d.flag);
                LLVMBuildSelect(self.builder, pushed, null, d.function, c"".as_ptr())
            }
            None => null,
        }
    }

    unsafe fn context(&self) -> llvm_sys::prelude::LLVMContextRef {
        LLVMGetModuleContext(self.inline.module)
    }

    /// `__kage_count_arrive` (a promoted function has no activation, and no block that
    /// needs it: see [`place`]).
    pub(super) unsafe fn arrive(&self, region: LLVMValueRef, lp: Option<LLVMValueRef>) {
        if self.activation.is_none() && self.deferred.is_none() {
            return;
        }
        self.materialize();
        let activation = self.activation();
        let ptr_type = LLVMTypeOf(region);
        let lp = lp.unwrap_or_else(|| LLVMConstPointerNull(ptr_type));
        self.inline
            .arrive
            .call(self.builder, &mut [region, lp, activation]);
    }

    pub(super) unsafe fn resume(&self, region: LLVMValueRef) {
        self.inline
            .resume
            .call(self.builder, &mut [region, self.activation()]);
    }

    /// After the runtime made `node` the activation's innermost region at a resume point
    /// (every record from the function's down to `node`'s open, the others closed), the
    /// deferrals' flags say the same: the activation is pushed (a call came first: an
    /// `invoke`, or `setjmp`), and a deferred region's record is open exactly when the
    /// region is around `node`. Their counts are 0 there: the call reported them.
    pub(super) unsafe fn resumed(&self, node: usize) {
        let bool_type = LLVMInt1TypeInContext(self.context());
        if let Some(d) = self.deferred {
            LLVMBuildStore(self.builder, LLVMConstInt(bool_type, 1, 0), d.flag);
        }
        let around = path_up(self.nodes, node, None);
        for (region, deferral) in self.deferred_regions.iter().enumerate() {
            if let Some(d) = deferral {
                let open = LLVMConstInt(bool_type, around.contains(&region) as u64, 0);
                LLVMBuildStore(self.builder, open, d.flag);
            }
        }
    }

    /// A return: `open` (the block's region and those around it, innermost first) close,
    /// and the activation is popped.
    pub(super) unsafe fn exit(&self, open: &[usize]) {
        // Deferred regions, innermost first, then the function.
        let waiting = open
            .iter()
            .take_while(|&&n| self.deferred_region(n).is_some());
        if let Some(d) = self
            .deferred
            .filter(|_| open[waiting.clone().count()..] == [0])
        {
            for &node in waiting {
                self.leave_deferred(node, self.deferred_region(node).expect("deferred"));
            }
            let mut args = vec![d.offset, d.open_offset, d.flag, d.records, d.activation];
            args.extend(d.own);
            args.extend(d.pending);
            d.leave.call(self.builder, &mut args);
            return;
        }
        self.inline
            .exit_check
            .call(self.builder, &mut [self.activation()]);
        for &node in open {
            self.close(node);
        }
        self.inline.pop.call(self.builder, &mut [self.activation()]);
    }

    /// `counts` added to the thread's totals and to `node`'s self counts while counting is
    /// on (the gate); in a promoted tree (`tree`), to the node's locals.
    pub(super) unsafe fn add(&self, counts: &SegmentCounts, node: usize, tree: Option<usize>) {
        let values = counts.values(self.builder, self.inline.i64_type);
        if let Some(d) = self.deferred.filter(|_| node == 0 && tree.is_none()) {
            for (k, value) in values.iter().enumerate() {
                if let Some(value) = *value {
                    self.inline.add_plain(self.builder, d.own[k], value);
                }
            }
            return;
        }
        if let Some(d) = self.deferred_region(node).filter(|_| tree.is_none()) {
            for (k, value) in values.iter().enumerate() {
                if let Some(value) = *value {
                    self.inline.add_plain(self.builder, d.own[k], value);
                }
            }
            return;
        }
        if tree.is_some() {
            if let Some(local) = self.local(node) {
                let derived = |k: usize| match k {
                    BYTES_READ => self.sizes[node][0].is_some(),
                    BYTES_WRITTEN => self.sizes[node][1].is_some(),
                    _ => false,
                };
                for (k, value) in values.iter().enumerate() {
                    if let (Some(value), false) = (*value, derived(k)) {
                        self.add_to_tree(node, local[1 + k], value);
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
        let adder = self.inline.segment_adder(values.map(|v| v.is_some()));
        let zero = LLVMConstInt(self.inline.i64_type, 0, 0);
        let waiting = self
            .waiting_totals
            .expect("a promoted function counts in its tree's locals");
        let mut args = [
            self.record(node),
            zero,
            zero,
            zero,
            zero,
            waiting[0],
            waiting[1],
            waiting[2],
            waiting[3],
        ];
        for (k, value) in values.iter().enumerate() {
            args[1 + k] = value.unwrap_or(zero);
        }
        adder.call(self.builder, &mut args);
    }

    /// After a `cmpxchg` of `size` bytes: a load, and a store when it wrote.
    pub(super) unsafe fn cmpxchg(&self, inst: LLVMValueRef, size: u64, node: usize) {
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
        for &(len, reads, writes) in &self.dynamic {
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
            if writes {
                plus(STORES, one);
                plus(BYTES_WRITTEN, len);
            }
        }
        values
    }
}

/// The runtime's count symbols and the inline helpers, declared and defined once per
/// module.
pub(super) struct Inline {
    /// `__kage_count`.
    totals: LLVMValueRef,
    totals_type: LLVMTypeRef,
    /// `__kage_count_thread`.
    thread: LLVMValueRef,
    /// `__kage_count_running`.
    running: LLVMValueRef,
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
    /// Defined with the module's first deferred function.
    quiet_enter: std::cell::OnceCell<RuntimeFunction>,
    /// Deferred regions' open and leave helpers, by the locals they add to (own, pending)
    /// and whether a quiet leave adds to the parent's locals.
    deferred_helpers: std::cell::RefCell<DeferredHelpers>,
    /// Deferred functions' materialize and leave helpers, by the locals they add to.
    deferred_entry_helpers: std::cell::RefCell<DeferredEntryHelpers>,
    /// The helpers that add a segment's counts to a record, by the counters they add to.
    segment_adders: std::cell::RefCell<std::collections::HashMap<[bool; 4], RuntimeFunction>>,
    /// The helper that adds what waits in a function's locals to the thread's totals.
    totals_settler: std::cell::OnceCell<RuntimeFunction>,
    i32_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
    ptr_type: LLVMTypeRef,
    module: LLVMModuleRef,
}

type DeferredHelpers =
    std::collections::HashMap<([bool; 4], [bool; 4], bool), (RuntimeFunction, RuntimeFunction)>;
type DeferredEntryHelpers =
    std::collections::HashMap<([bool; 4], [bool; 4]), (RuntimeFunction, RuntimeFunction)>;

/// One helper's blocks, built in order.
pub(super) struct HelperBuilder {
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
    pub(super) unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        let totals = ir::declare_runtime_global(module, &symbols::COUNT_TOTALS);
        let null = std::ptr::null_mut();
        let null_type = std::ptr::null_mut();
        let mut inline = Inline {
            totals,
            totals_type: LLVMGlobalGetValueType(totals),
            thread: ir::declare_runtime_global(module, &symbols::COUNT_THREAD),
            running: ir::declare_runtime_global(module, &symbols::COUNT_RUNNING),
            gate: ir::declare_runtime_global(module, &symbols::GATE),
            enter: RuntimeFunction::helper(null, null_type),
            open: RuntimeFunction::helper(null, null_type),
            close: RuntimeFunction::helper(null, null_type),
            set_current: RuntimeFunction::helper(null, null_type),
            exit_check: RuntimeFunction::helper(null, null_type),
            pop: RuntimeFunction::helper(null, null_type),
            records: RuntimeFunction::helper(null, null_type),
            quiet_enter: std::cell::OnceCell::new(),
            deferred_helpers: Default::default(),
            deferred_entry_helpers: Default::default(),
            segment_adders: Default::default(),
            totals_settler: Default::default(),
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
        let (fast, slow) = (h.block(c"fast"), h.block(c"slow"));
        let thread = self.address(b, self.thread);
        let (records, ok) = self.checked_records(b, thread, module);
        ir::set_branch_weights(LLVMBuildCondBr(b, ok, fast, slow), 1 << 20, 1);
        LLVMPositionBuilderAtEnd(b, fast);
        LLVMBuildRet(b, records);
        LLVMPositionBuilderAtEnd(b, slow);
        let prepare = RuntimeFunction::declare(self.module, &symbols::COUNT_PREPARE);
        let prepared = prepare.call(b, &mut [module, LLVMConstPointerNull(self.ptr_type)]);
        LLVMBuildRet(b, prepared);
        h.finish(ty)
    }

    /// From the thread's directory (`thread` its `__kage_count_thread`): the records of
    /// `module`, and whether there are any. A thread that counts nowhere has a directory too,
    /// all null (the runtime's), and a reset empties every thread's: then its next entry of
    /// each module takes the runtime's path, which applies the reset first.
    unsafe fn checked_records(
        &self,
        b: LLVMBuilderRef,
        thread: LLVMValueRef,
        module: LLVMValueRef,
    ) -> (LLVMValueRef, LLVMValueRef) {
        let directory = self.load(b, self.ptr_type, self.field(b, thread, RECORDS));
        let null = LLVMConstPointerNull(self.ptr_type);
        let records = self.module_records(b, directory, module);
        let has = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, records, null, c"".as_ptr());
        (records, has)
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
    pub(super) unsafe fn tree_locals(&self, b: LLVMBuilderRef, len: usize) -> TreeLocals {
        TreeLocals(
            (0..len)
                .map(|_| std::array::from_fn(|_| self.zeroed_count(b)))
                .collect(),
        )
    }

    /// At the builder's position (the entry block's start): an `i64` local, zero.
    pub(super) unsafe fn zeroed_count(&self, b: LLVMBuilderRef) -> LLVMValueRef {
        let local = LLVMBuildAlloca(b, self.i64_type, c"kage.count".as_ptr());
        LLVMSetAlignment(local, 8);
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        LLVMSetAlignment(LLVMBuildStore(b, zero, local), 8);
        local
    }

    /// A `ptr` local before `first` (the entry block's first instruction).
    pub(super) unsafe fn local_at_entry(
        &self,
        b: LLVMBuilderRef,
        first: LLVMValueRef,
        name: &std::ffi::CStr,
    ) -> LLVMValueRef {
        LLVMPositionBuilderBefore(b, first);
        LLVMBuildAlloca(b, self.ptr_type, name.as_ptr())
    }

    /// The locals where a function's additions to the thread's totals wait: four `i64`,
    /// zero, at the builder's position (the entry block's start: mem2reg promotes them).
    pub(super) unsafe fn waiting_totals(&self, b: LLVMBuilderRef) -> [LLVMValueRef; 4] {
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        std::array::from_fn(|_| {
            let local = LLVMBuildAlloca(b, self.i64_type, c"kage.totals.waiting".as_ptr());
            LLVMBuildStore(b, zero, local);
            local
        })
    }

    /// The waiting locals added to the thread's totals and zeroed, when any is not 0: a call
    /// of `void __kage_count_settle_totals(ptr waiting...)` (inlined; its branch folds away
    /// where the locals are known to be 0).
    pub(super) unsafe fn settle_totals(&self, b: LLVMBuilderRef, waiting: [LLVMValueRef; 4]) {
        let helper = *self
            .totals_settler
            .get_or_init(|| self.define_settle_totals());
        let mut args = waiting;
        helper.call(b, &mut args);
    }

    unsafe fn define_settle_totals(&self) -> RuntimeFunction {
        let mut params = [self.ptr_type; 4];
        let (h, ty) = self.void_helper("__kage_count_settle_totals", &mut params);
        let b = h.builder;
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let values: [LLVMValueRef; 4] = std::array::from_fn(|k| {
            LLVMBuildLoad2(b, self.i64_type, h.param(k as u32), c"".as_ptr())
        });
        let any = values
            .iter()
            .fold(zero, |any, &v| LLVMBuildOr(b, any, v, c"".as_ptr()));
        let waiting = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, any, zero, c"".as_ptr());
        let (add, done) = (h.block(c"add"), h.block(c"done"));
        LLVMBuildCondBr(b, waiting, add, done);
        LLVMPositionBuilderAtEnd(b, add);
        let totals = self.address(b, self.totals);
        for (k, &v) in values.iter().enumerate() {
            ir::add_relaxed(b, self.cell(b, totals, k), v);
        }
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
        // Zero on both ways: once promoted to registers they are the constant 0 here, and
        // the next settling with nothing added in between folds away.
        for k in 0..4 {
            LLVMBuildStore(b, zero, h.param(k as u32));
        }
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// `__kage_count_running = root` (null: none).
    unsafe fn set_running(&self, b: LLVMBuilderRef, root: LLVMValueRef) {
        self.store(b, root, self.address(b, self.running));
    }

    /// `*local += value`, a plain load and store (mem2reg makes it a register); the load,
    /// the addition and the store.
    pub(super) unsafe fn add_plain(
        &self,
        b: LLVMBuilderRef,
        local: LLVMValueRef,
        value: LLVMValueRef,
    ) -> [LLVMValueRef; 3] {
        let old = LLVMBuildLoad2(b, self.i64_type, local, c"".as_ptr());
        LLVMSetAlignment(old, 8);
        let new = LLVMBuildAdd(b, old, value, c"".as_ptr());
        let store = LLVMBuildStore(b, new, local);
        LLVMSetAlignment(store, 8);
        [old, new, store]
    }

    /// Promoted tree `tree`'s report, `void __kage_count_flush(ptr root_record, ptr
    /// locals..., [ptr pending...,] ptr running_after)` (five locals per region: instances,
    /// loads, stores, bytes read, bytes written; the deferred function's four pending totals
    /// when `pending`; what `__kage_count_running` becomes): when it ran (its root's
    /// instances are not 0), each region's instances and self counts go to its record, the
    /// tree's accesses to the thread's totals (or the pending ones); the report derives
    /// each region's inclusive counts from the self counts (no region of a tree is ever
    /// open around it: opening it again would take a call); the locals are zeroed.
    /// `counts[node]` says which of a region's own counters its segments may add to: the
    /// others are left alone; `cells[i]` where the tree's region `i`, a copy, counts its
    /// source region's open instances (from the root's record on).
    pub(super) unsafe fn define_flush(
        &self,
        plan: &FunctionPlan,
        tree: &PromotedTree,
        (counts, sizes, cells): (&[[bool; 4]], &[[Option<u64>; 2]], &[Option<u64>]),
        pending: bool,
    ) -> RuntimeFunction {
        let own_params = 1 + tree.len * 5;
        let running_after = own_params + if pending { 4 } else { 0 };
        let mut params = vec![self.ptr_type; running_after + 1];
        let (h, ty) = self.void_helper("__kage_count_flush", &mut params);
        let b = h.builder;
        let root_record = h.param(0);
        let local = |i: usize, w: usize| h.param(1 + (i * 5 + w) as u32);
        let (ran, done) = (h.block(c"ran"), h.block(c"done"));
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        // Whether or not the tree ran, it runs no more (trees do not nest): the function
        // around it does, if it has not pushed its activation, else none.
        self.set_running(b, h.param(running_after as u32));
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
        // Counting switched off (`__kage_gate`): the regions' instances still count, their
        // accesses are dropped; a branch to a report of the instances alone, rather than a
        // mask on each count.
        LLVMPositionBuilderAtEnd(b, ran);
        let (counting, closed) = (h.block(c"counting"), h.block(c"closed"));
        LLVMBuildCondBr(b, self.gate_open(b), counting, closed);
        // Each region's children in the tree (local indices; pre-order, so a subtree is
        // contiguous and a parent comes before its children).
        let nodes = &plan.tree().nodes;
        let mut children = vec![Vec::new(); tree.len];
        for i in 1..tree.len {
            if let Some(parent) = nodes[tree.root + i]
                .parent
                .and_then(|p| p.checked_sub(tree.root))
            {
                children[parent].push(i);
            }
        }
        let no_counts = vec![[false; 4]; tree.len];
        for (block, counts) in [
            (counting, &counts[tree.root..tree.root + tree.len]),
            (closed, &no_counts[..]),
        ] {
            LLVMPositionBuilderAtEnd(b, block);
            let site = FlushSite {
                helper: &h,
                root_record,
                counts,
                sizes: &sizes[tree.root..tree.root + tree.len],
                children: &children,
                cells,
                local: &local,
            };
            let accesses = self.flush_region(&site, 0, self.tree_own(&site, 0));
            // The thread's totals; under a deferred function, its locals hold them for now.
            let totals = self.address(b, self.totals);
            for (k, value) in accesses.iter().enumerate() {
                if let Some(value) = *value {
                    if pending {
                        self.add_plain(b, h.param((own_params + k) as u32), value);
                    } else {
                        ir::add_relaxed(b, self.cell(b, totals, k), value);
                    }
                }
            }
            LLVMBuildBr(b, done);
        }
        // The locals are zeroed whether the tree ran or not (they are 0 then anyway): once
        // inlined, every local is a known 0 after a report, so none is carried around the
        // loops outside the tree (zstd's `ZSTD_compressBlock_lazy_generic`: 186 of them, all
        // spilled, when only the `ran` path zeroed them).
        LLVMPositionBuilderAtEnd(b, done);
        for i in 0..tree.len {
            for w in 0..5 {
                LLVMSetAlignment(LLVMBuildStore(b, zero, local(i, w)), 8);
            }
        }
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// Tree region `i`'s own counts at the builder's position (0 when it did not run: its
    /// locals are 0); bytes of a uniform size are its loads (stores) times the size.
    unsafe fn tree_own(&self, site: &FlushSite, i: usize) -> [Option<LLVMValueRef>; 4] {
        let b = site.helper.builder;
        let load = |k: usize| {
            let v = LLVMBuildLoad2(b, self.i64_type, (site.local)(i, 1 + k), c"".as_ptr());
            LLVMSetAlignment(v, 8);
            v
        };
        let accesses = [LOADS, STORES].map(|k| site.counts[i][k].then(|| load(k)));
        std::array::from_fn(|k| {
            site.counts[i][k].then(|| match k {
                LOADS | STORES => accesses[k].expect("a counted counter"),
                _ => match site.sizes[i][k - BYTES_READ] {
                    Some(size) => {
                        let n = accesses[k - BYTES_READ].expect("bytes without accesses");
                        LLVMBuildMul(b, n, LLVMConstInt(self.i64_type, size, 0), c"".as_ptr())
                    }
                    None => load(k),
                },
            })
        })
    }

    /// Adds tree region `i`'s instances and its self counts `own` to its record, visiting
    /// the children that ran on the way (a region that did not run has nothing to add, and
    /// neither have those in it: the report's work follows what ran, not the tree's size);
    /// returns its subtree's accesses. Its inclusive counts are left to the report, which
    /// derives them from the self counts (a tree's regions never call out), but for a copy
    /// whose source region is open in records (its instances ran inside another copy's,
    /// which counts them): its subtree's accesses go to its inclusive counts as a
    /// correction, subtracted. The builder is in a block where region `i` ran, and is left
    /// at the end of the visit. A leaf child's counts are summed whether it ran or not
    /// (they are 0 if not): only its record's update is skipped.
    unsafe fn flush_region(
        &self,
        site: &FlushSite,
        i: usize,
        own: [Option<LLVMValueRef>; 4],
    ) -> [Option<LLVMValueRef>; 4] {
        let b = site.helper.builder;
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let record = ir::byte_gep(
            b,
            site.root_record,
            LLVMConstInt(self.i64_type, (i * WORDS * 8) as u64, 0),
        );
        let instances = LLVMBuildLoad2(b, self.i64_type, (site.local)(i, 0), c"".as_ptr());
        LLVMSetAlignment(instances, 8);
        self.add_word(b, record, INSTANCES, instances);
        for (k, value) in own.iter().enumerate() {
            if let Some(value) = *value {
                self.add_word(b, record, SELF + k, value);
            }
        }
        let mut subtree = own;
        for &c in &site.children[i] {
            let leaf = site.children[c].is_empty();
            let leaf_own = leaf.then(|| self.tree_own(site, c));
            let instances_c = LLVMBuildLoad2(b, self.i64_type, (site.local)(c, 0), c"".as_ptr());
            LLVMSetAlignment(instances_c, 8);
            let ran = LLVMBuildICmp(
                b,
                LLVMIntPredicate::LLVMIntNE,
                instances_c,
                zero,
                c"".as_ptr(),
            );
            let before = LLVMGetInsertBlock(b);
            let (visit, after) = (site.helper.block(c"region"), site.helper.block(c"next"));
            LLVMBuildCondBr(b, ran, visit, after);
            LLVMPositionBuilderAtEnd(b, visit);
            let own_c = leaf_own.unwrap_or_else(|| self.tree_own(site, c));
            let of_child = self.flush_region(site, c, own_c);
            let visited = LLVMGetInsertBlock(b);
            LLVMBuildBr(b, after);
            LLVMPositionBuilderAtEnd(b, after);
            // The child's subtree sums: a leaf's whether it ran or not, else 0 when it did
            // not run (phis first in the block).
            let sums = if let Some(own_c) = leaf_own {
                own_c
            } else {
                of_child.map(|value| {
                    value.map(|value| {
                        let phi = LLVMBuildPhi(b, self.i64_type, c"".as_ptr());
                        let mut values = [value, zero];
                        let mut blocks = [visited, before];
                        LLVMAddIncoming(phi, values.as_mut_ptr(), blocks.as_mut_ptr(), 2);
                        phi
                    })
                })
            };
            for (sum, value) in subtree.iter_mut().zip(sums) {
                if let Some(value) = value {
                    *sum = Some(match *sum {
                        Some(sum) => LLVMBuildAdd(b, sum, value, c"".as_ptr()),
                        None => value,
                    });
                }
            }
        }
        if let Some(offset) = site.cells[i].filter(|_| subtree.iter().any(Option::is_some)) {
            let cell = ir::byte_gep(b, site.root_record, LLVMConstInt(self.i64_type, offset, 0));
            let open = self.load(b, self.i64_type, cell);
            let nested = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, open, zero, c"".as_ptr());
            let (correct, after) = (site.helper.block(c"nested"), site.helper.block(c"counted"));
            ir::set_branch_weights(LLVMBuildCondBr(b, nested, correct, after), 1, 1 << 20);
            LLVMPositionBuilderAtEnd(b, correct);
            for (k, value) in subtree.iter().enumerate() {
                if let Some(value) = *value {
                    let minus = LLVMBuildNeg(b, value, c"".as_ptr());
                    self.add_word(b, record, INCLUSIVE + k, minus);
                }
            }
            LLVMBuildBr(b, after);
            LLVMPositionBuilderAtEnd(b, after);
        }
        subtree
    }

    /// A helper `name` returning nothing (see [`HelperBuilder::new`]).
    unsafe fn void_helper(
        &self,
        name: &str,
        params: &mut [LLVMTypeRef],
    ) -> (HelperBuilder, LLVMTypeRef) {
        let void = LLVMVoidTypeInContext(LLVMGetModuleContext(self.module));
        HelperBuilder::new(self.module, name, void, params)
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

    /// Whether counting is on: `__kage_gate` is 0 (an `i1`). An unordered atomic load: the
    /// compare takes it as its operand (`cmpl $0, __kage_gate(%rip)`), and one the code no
    /// longer needs goes away; the gate changes on this thread only in calls (which every
    /// load after them sees), and another thread's change has no order to keep.
    unsafe fn gate_open(&self, builder: LLVMBuilderRef) -> LLVMValueRef {
        let gate = LLVMBuildLoad2(builder, self.i32_type, self.gate, c"".as_ptr());
        LLVMSetOrdering(gate, LLVMAtomicOrdering::LLVMAtomicOrderingUnordered);
        LLVMSetAlignment(gate, 4);
        let zero = LLVMConstInt(self.i32_type, 0, 0);
        LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntEQ,
            gate,
            zero,
            c"".as_ptr(),
        )
    }

    /// `void __kage_count_add(ptr record, i64 loads, i64 stores, i64 bytes_read, i64
    /// bytes_written)`: when counting is on, the counts (those of `present` only) added to the
    /// record's self counts and to the thread's totals. A branch on the gate, not a mask on
    /// every count: once inlined, the constant counts are added as they are, and a segment
    /// costs a compare and a jump more than its additions.
    unsafe fn segment_adder(&self, present: [bool; 4]) -> RuntimeFunction {
        if let Some(adder) = self.segment_adders.borrow().get(&present) {
            return *adder;
        }
        let mut params = [
            self.ptr_type,
            self.i64_type,
            self.i64_type,
            self.i64_type,
            self.i64_type,
            self.ptr_type,
            self.ptr_type,
            self.ptr_type,
            self.ptr_type,
        ];
        let (h, ty) = self.void_helper("__kage_count_add", &mut params);
        let b = h.builder;
        let (counting, done) = (h.block(c"counting"), h.block(c"done"));
        let branch = LLVMBuildCondBr(b, self.gate_open(b), counting, done);
        ir::set_branch_weights(branch, 1 << 20, 1);
        LLVMPositionBuilderAtEnd(b, counting);
        for k in (0..4).filter(|&k| present[k]) {
            let value = h.param(1 + k as u32);
            self.add_plain(b, h.param(5 + k as u32), value);
            self.add_word(b, h.param(0), SELF + k, value);
        }
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
        LLVMBuildRetVoid(b);
        let adder = h.finish(ty);
        self.segment_adders.borrow_mut().insert(present, adder);
        adder
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
    /// offset of the function's record, offset of its source region's open count)`
    /// (`index`: the function's table index, `open_offset`: [`RegionTable::open_offset`]).
    pub(super) unsafe fn enter(
        &self,
        builder: LLVMBuilderRef,
        module: LLVMValueRef,
        function: LLVMValueRef,
        (index, open_offset): (u32, u64),
    ) -> (LLVMValueRef, LLVMValueRef) {
        let frame = self.frame_address(builder);
        let offset = LLVMConstInt(self.i64_type, index as u64 * WORDS as u64 * 8, 0);
        let open_offset = LLVMConstInt(self.i64_type, open_offset, 0);
        let pair = self
            .enter
            .call(builder, &mut [module, function, frame, offset, open_offset]);
        let records = LLVMBuildExtractValue(builder, pair, 0, c"kage.records".as_ptr());
        let activation = LLVMBuildExtractValue(builder, pair, 1, c"kage.activation".as_ptr());
        (records, activation)
    }

    /// `{ptr, i32} __kage_count_enter(ptr module, ptr function, ptr frame, i64 offset, i64
    /// open_offset)`: the thread's records of the module (`__kage_count_prepare` when the
    /// inline checks fail), the function's activation pushed and its record (at `offset`)
    /// opened.
    unsafe fn define_enter(&self) -> RuntimeFunction {
        let mut fields = [self.ptr_type, self.i32_type];
        let pair_type =
            LLVMStructTypeInContext(LLVMGetModuleContext(self.module), fields.as_mut_ptr(), 2, 0);
        let mut params = [
            self.ptr_type,
            self.ptr_type,
            self.ptr_type,
            self.i64_type,
            self.i64_type,
        ];
        let (h, ty) = HelperBuilder::new(self.module, "__kage_count_enter", pair_type, &mut params);
        let b = h.builder;
        let (module, function, frame) = (h.param(0), h.param(1), h.param(2));
        let (offset, open_offset) = (h.param(3), h.param(4));
        let (has_records, fast, slow, join) = (
            h.block(c"records"),
            h.block(c"live"),
            h.block(c"slow"),
            h.block(c"join"),
        );
        let thread = self.address(b, self.thread);
        // The module's records, and room for an activation.
        let (records, has) = self.checked_records(b, thread, module);
        let (top, room) = self.room(b, thread);
        let ok = LLVMBuildAnd(b, has, room, c"".as_ptr());
        ir::set_branch_weights(LLVMBuildCondBr(b, ok, has_records, slow), 1 << 20, 1);
        LLVMPositionBuilderAtEnd(b, has_records);
        self.check_live_caller(&h, thread, top, frame, fast, slow);
        let push = Push {
            module,
            function,
            frame,
            offset,
            open_offset,
        };
        let (records, top) = self.push_or_prepare(&h, thread, records, &push, [fast, slow, join]);
        let undef = LLVMGetUndef(pair_type);
        let pair = LLVMBuildInsertValue(b, undef, records, 0, c"".as_ptr());
        let pair = LLVMBuildInsertValue(b, pair, top, 1, c"".as_ptr());
        LLVMBuildRet(b, pair);
        h.finish(ty)
    }

    unsafe fn phi<const N: usize>(
        &self,
        b: LLVMBuilderRef,
        ty: LLVMTypeRef,
        incoming: [(LLVMValueRef, LLVMBasicBlockRef); N],
    ) -> LLVMValueRef {
        let phi = LLVMBuildPhi(b, ty, c"".as_ptr());
        let mut values = incoming.map(|(v, _)| v);
        let mut blocks = incoming.map(|(_, block)| block);
        LLVMAddIncoming(phi, values.as_mut_ptr(), blocks.as_mut_ptr(), N as u32);
        phi
    }

    /// In the builder's block: on to `live` when the activation below (of `top`) is a live
    /// caller, its frame above `frame`, else to `slow`. With no activation open, the one
    /// below is the sentinel the runtime keeps before the first (its frame the highest
    /// address): no test of `top` against 0.
    unsafe fn check_live_caller(
        &self,
        h: &HelperBuilder,
        thread: LLVMValueRef,
        top: LLVMValueRef,
        frame: LLVMValueRef,
        live: LLVMBasicBlockRef,
        slow: LLVMBasicBlockRef,
    ) {
        let b = h.builder;
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
        let is_live = LLVMBuildICmp(
            b,
            LLVMIntPredicate::LLVMIntUGT,
            caller_frame,
            own_frame,
            c"".as_ptr(),
        );
        ir::set_branch_weights(LLVMBuildCondBr(b, is_live, live, slow), 1 << 20, 1);
    }

    /// The thread's number of activations, and whether there is room for one more.
    unsafe fn room(&self, b: LLVMBuilderRef, thread: LLVMValueRef) -> (LLVMValueRef, LLVMValueRef) {
        let top = self.load(b, self.i32_type, self.field(b, thread, TOP));
        let capacity = self.load(b, self.i32_type, self.field(b, thread, CAPACITY));
        let room = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntULT, top, capacity, c"".as_ptr());
        (top, room)
    }

    /// In helper `h`, whose checks branch to `fast` (with `records`) or `slow` (empty
    /// blocks) and leave `join` empty: `slow` asks `__kage_count_prepare`, and `join`
    /// pushes the activation and opens the function's record ([`push_and_open`]), where
    /// the builder is left. Returns the records and the activation's index.
    ///
    /// [`push_and_open`]: Self::push_and_open
    unsafe fn push_or_prepare(
        &self,
        h: &HelperBuilder,
        thread: LLVMValueRef,
        records: LLVMValueRef,
        push: &Push,
        [fast, slow, join]: [LLVMBasicBlockRef; 3],
    ) -> (LLVMValueRef, LLVMValueRef) {
        let b = h.builder;
        LLVMPositionBuilderAtEnd(b, fast);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, slow);
        let prepare = RuntimeFunction::declare(self.module, &symbols::COUNT_PREPARE);
        let prepared = prepare.call(b, &mut [push.module, push.frame]);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, join);
        let records = self.phi(b, self.ptr_type, [(records, fast), (prepared, slow)]);
        let index = self.push_and_open(b, thread, records, push);
        (records, index)
    }

    /// Pushes an activation of `push.function` (there is room) and opens its record (at
    /// `push.offset` in `records`). Returns the activation's index; leaves the builder in a
    /// new block.
    unsafe fn push_and_open(
        &self,
        b: LLVMBuilderRef,
        thread: LLVMValueRef,
        records: LLVMValueRef,
        push: &Push,
    ) -> LLVMValueRef {
        let (function, frame) = (push.function, push.frame);
        // Written, counted, written again (a signal handler running between may have used
        // the slot).
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
        let record = ir::byte_gep(b, records, push.offset);
        self.open_at(b, record, ir::byte_gep(b, records, push.open_offset));
        top
    }

    /// `ptr __kage_count_quiet_enter(ptr module, ptr frame)`: a deferred function's entry,
    /// the thread's records of the module; `__kage_count_prepare` when the inline checks
    /// fail, or when activations left by a `longjmp` lie above the caller's (as at an entry
    /// that pushes).
    unsafe fn define_quiet_enter(&self) -> RuntimeFunction {
        let mut params = [self.ptr_type, self.ptr_type];
        let (h, ty) = HelperBuilder::new(
            self.module,
            "__kage_count_quiet_enter",
            self.ptr_type,
            &mut params,
        );
        let b = h.builder;
        let (module, frame) = (h.param(0), h.param(1));
        let (has_records, fast, slow) = (h.block(c"records"), h.block(c"fast"), h.block(c"slow"));
        let thread = self.address(b, self.thread);
        let (records, has) = self.checked_records(b, thread, module);
        ir::set_branch_weights(LLVMBuildCondBr(b, has, has_records, slow), 1 << 20, 1);
        LLVMPositionBuilderAtEnd(b, has_records);
        let top = self.load(b, self.i32_type, self.field(b, thread, TOP));
        self.check_live_caller(&h, thread, top, frame, fast, slow);
        LLVMPositionBuilderAtEnd(b, fast);
        LLVMBuildRet(b, records);
        LLVMPositionBuilderAtEnd(b, slow);
        let prepare = RuntimeFunction::declare(self.module, &symbols::COUNT_PREPARE);
        let prepared = prepare.call(b, &mut [module, frame]);
        LLVMBuildRet(b, prepared);
        h.finish(ty)
    }

    /// A deferred function's locals, zero, at the builder's position (the entry block's
    /// start), and its entry at `entry_at` (`function`: its table entry and index), which
    /// notes it as running unless a tree that does starts right after (`note_running`).
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn deferred_entry(
        &self,
        b: LLVMBuilderRef,
        entry_at: LLVMValueRef,
        module: LLVMValueRef,
        (function, index, open_offset): (LLVMValueRef, u32, u64),
        note_running: bool,
        own: [bool; 4],
        pending: [bool; 4],
    ) -> DeferredEntry {
        let context = LLVMGetModuleContext(self.module);
        let bool_type = LLVMInt1TypeInContext(context);
        let local = |ty: LLVMTypeRef, init: LLVMValueRef| {
            let local = LLVMBuildAlloca(b, ty, c"kage.deferred".as_ptr());
            LLVMBuildStore(b, init, local);
            local
        };
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let flag = local(bool_type, LLVMConstInt(bool_type, 0, 0));
        let records = local(self.ptr_type, LLVMConstPointerNull(self.ptr_type));
        let activation = local(self.i32_type, LLVMConstInt(self.i32_type, 0, 0));
        let own_locals = std::array::from_fn(|_| local(self.i64_type, zero));
        let pending_locals = std::array::from_fn(|_| local(self.i64_type, zero));
        LLVMPositionBuilderBefore(b, entry_at);
        let frame = self.frame_address(b);
        let quiet_enter = self.quiet_enter.get_or_init(|| self.define_quiet_enter());
        let entered = quiet_enter.call(b, &mut [module, frame]);
        LLVMBuildStore(b, entered, records);
        if note_running {
            self.set_running(b, function);
        }
        let (materialize, leave) = *(self.deferred_entry_helpers.borrow_mut())
            .entry((own, pending))
            .or_insert_with(|| {
                (
                    self.define_materialize(own, pending),
                    self.define_leave(own, pending),
                )
            });
        DeferredEntry {
            flag,
            records,
            activation,
            own: own_locals,
            pending: pending_locals,
            module,
            function,
            frame,
            offset: LLVMConstInt(self.i64_type, index as u64 * WORDS as u64 * 8, 0),
            open_offset: LLVMConstInt(self.i64_type, open_offset, 0),
            materialize,
            leave,
        }
    }

    /// `llvm.addressofreturnaddress`: the frame of the function being built.
    unsafe fn frame_address(&self, builder: LLVMBuilderRef) -> LLVMValueRef {
        let frame_type = LLVMFunctionType(self.ptr_type, std::ptr::null_mut(), 0, 0);
        let name = c"llvm.addressofreturnaddress.p0";
        let mut intrinsic = LLVMGetNamedFunction(self.module, name.as_ptr());
        if intrinsic.is_null() {
            intrinsic = LLVMAddFunction(self.module, name.as_ptr(), frame_type);
        }
        LLVMBuildCall2(
            builder,
            frame_type,
            intrinsic,
            std::ptr::null_mut(),
            0,
            c"".as_ptr(),
        )
    }

    /// A deferred function's helper `name`, whose parameters after the `fixed` ones are the
    /// flag, records and activation locals, then the own and pending locals; the builder at
    /// its entry, where the flag (whether the function pushed its activation) is loaded.
    unsafe fn deferred_helper(
        &self,
        name: &str,
        fixed: &[LLVMTypeRef],
    ) -> (HelperBuilder, LLVMTypeRef, LLVMValueRef) {
        let mut params = fixed.to_vec();
        params.extend([self.ptr_type; 3 + 8]);
        let (h, ty) = self.void_helper(name, &mut params);
        let bool_type = LLVMInt1TypeInContext(LLVMGetModuleContext(self.module));
        let flag = h.param(fixed.len() as u32);
        let pushed = LLVMBuildLoad2(h.builder, bool_type, flag, c"".as_ptr());
        (h, ty, pushed)
    }

    /// In helper `h`, whose parameters from `own_at` are the own and then the pending locals
    /// (four each): the own counts, when counting is on, to the self counts at `record`;
    /// those and the pending ones to the thread's totals (or, `to`, to the locals that are
    /// parameters from there on); the locals zeroed. Returns what went to the totals. A
    /// branch on the gate (taken while counting is on), not a mask on every count: the
    /// own counts are often constants once inlined, added as they are.
    unsafe fn report_waiting(
        &self,
        h: &HelperBuilder,
        own_at: u32,
        record: LLVMValueRef,
        (own, pending): ([bool; 4], [bool; 4]),
        to: Option<u32>,
    ) -> [Option<LLVMValueRef>; 4] {
        let b = h.builder;
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let take = |present: bool, local: LLVMValueRef| {
            present.then(|| {
                let value = LLVMBuildLoad2(b, self.i64_type, local, c"".as_ptr());
                LLVMBuildStore(b, zero, local);
                value
            })
        };
        let own_values: [Option<LLVMValueRef>; 4] =
            std::array::from_fn(|k| take(own[k], h.param(own_at + k as u32)));
        let pending_values: [Option<LLVMValueRef>; 4] =
            std::array::from_fn(|k| take(pending[k], h.param(own_at + 4 + k as u32)));
        let counted = if own.iter().any(|&o| o) {
            let (counting, join) = (h.block(c"counting"), h.block(c"counted"));
            let closed = LLVMGetInsertBlock(b);
            let branch = LLVMBuildCondBr(b, self.gate_open(b), counting, join);
            ir::set_branch_weights(branch, 1 << 20, 1);
            LLVMPositionBuilderAtEnd(b, counting);
            for (k, value) in own_values.iter().enumerate() {
                if let Some(value) = *value {
                    self.add_word(b, record, SELF + k, value);
                }
            }
            LLVMBuildBr(b, join);
            LLVMPositionBuilderAtEnd(b, join);
            own_values.map(|value| {
                value.map(|value| self.phi(b, self.i64_type, [(value, counting), (zero, closed)]))
            })
        } else {
            own_values
        };
        let totals = self.address(b, self.totals);
        std::array::from_fn(|k| {
            let total = match (counted[k], pending_values[k]) {
                (Some(a), Some(c)) => Some(LLVMBuildAdd(b, a, c, c"".as_ptr())),
                (a, c) => a.or(c),
            };
            if let Some(total) = total {
                match to {
                    Some(at) => {
                        self.add_plain(b, h.param(at + k as u32), total);
                    }
                    None => ir::add_relaxed(b, self.cell(b, totals, k), total),
                }
            }
            total
        })
    }

    /// [`report_waiting`](Self::report_waiting) to the thread's totals, when anything waits
    /// (after the first push or open, the locals are often zero: then not even the gate is
    /// read).
    unsafe fn report_any_waiting(
        &self,
        h: &HelperBuilder,
        own_at: u32,
        record: LLVMValueRef,
        (own, pending): ([bool; 4], [bool; 4]),
    ) {
        let b = h.builder;
        let (report, done) = (h.block(c"waiting"), h.block(c"reported"));
        let mut any = LLVMConstInt(self.i64_type, 0, 0);
        for k in 0..4 {
            for (counted, at) in [(own[k], 0), (pending[k], 4)] {
                if counted {
                    let local = h.param(own_at + at + k as u32);
                    let value = LLVMBuildLoad2(b, self.i64_type, local, c"".as_ptr());
                    any = LLVMBuildOr(b, any, value, c"".as_ptr());
                }
            }
        }
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let waiting = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntNE, any, zero, c"".as_ptr());
        let (quiet, report) = (h.block(c"none"), report);
        LLVMBuildCondBr(b, waiting, report, quiet);
        LLVMPositionBuilderAtEnd(b, report);
        self.report_waiting(h, own_at, record, (own, pending), None);
        LLVMBuildBr(b, done);
        // The locals are 0 on both ways out, stored so that once promoted to registers they
        // are constants (nothing stays live across the calls that follow).
        LLVMPositionBuilderAtEnd(b, quiet);
        for k in 0..4 {
            for (counted, at) in [(own[k], 0), (pending[k], 4)] {
                if counted {
                    LLVMBuildStore(b, zero, h.param(own_at + at + k as u32));
                }
            }
        }
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
    }

    /// `void __kage_count_materialize(ptr module, ptr function, ptr frame, i64 offset, i64
    /// open_offset, locals...)`: pushes the deferred function's activation and opens its
    /// record if it has not yet, then reports what waits in its locals.
    unsafe fn define_materialize(&self, own: [bool; 4], pending: [bool; 4]) -> RuntimeFunction {
        let fixed = [
            self.ptr_type,
            self.ptr_type,
            self.ptr_type,
            self.i64_type,
            self.i64_type,
        ];
        let (h, ty, pushed) = self.deferred_helper("__kage_count_materialize", &fixed);
        let b = h.builder;
        let (module, function, frame) = (h.param(0), h.param(1), h.param(2));
        let (offset, open_offset) = (h.param(3), h.param(4));
        let (flag, records_local, activation_local) = (h.param(5), h.param(6), h.param(7));
        let (push, has_room, slow, join, report) = (
            h.block(c"push"),
            h.block(c"room"),
            h.block(c"slow"),
            h.block(c"join"),
            h.block(c"report"),
        );
        let bool_type = LLVMTypeOf(pushed);
        let already = h.block(c"already");
        LLVMBuildCondBr(b, pushed, already, push);
        // (It is 1 already; stored so that once promoted to a register it is a constant.)
        LLVMPositionBuilderAtEnd(b, already);
        LLVMBuildStore(b, LLVMConstInt(bool_type, 1, 0), flag);
        LLVMBuildBr(b, report);
        LLVMPositionBuilderAtEnd(b, push);
        let thread = self.address(b, self.thread);
        let records = LLVMBuildLoad2(b, self.ptr_type, records_local, c"".as_ptr());
        let (_, room) = self.room(b, thread);
        ir::set_branch_weights(LLVMBuildCondBr(b, room, has_room, slow), 1 << 20, 1);
        let push = Push {
            module,
            function,
            frame,
            offset,
            open_offset,
        };
        let (records, index) =
            self.push_or_prepare(&h, thread, records, &push, [has_room, slow, join]);
        LLVMBuildStore(b, records, records_local);
        LLVMBuildStore(b, index, activation_local);
        LLVMBuildStore(b, LLVMConstInt(bool_type, 1, 0), flag);
        self.set_running(b, LLVMConstPointerNull(self.ptr_type));
        LLVMBuildBr(b, report);
        LLVMPositionBuilderAtEnd(b, report);
        let records = LLVMBuildLoad2(b, self.ptr_type, records_local, c"".as_ptr());
        let record = ir::byte_gep(b, records, offset);
        self.report_waiting(&h, 8, record, (own, pending), None);
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// `void __kage_count_leave(i64 offset, i64 open_offset, locals...)`: a deferred
    /// function returns. If it
    /// pushed its activation, as any return (after the report of its locals); else its
    /// record counts the instance, its own counts and its inclusive ones (unless it is open
    /// further up the stack: recursion counts once), and the thread's totals what waited.
    unsafe fn define_leave(&self, own: [bool; 4], pending: [bool; 4]) -> RuntimeFunction {
        let fixed = [self.i64_type, self.i64_type];
        let (h, ty, pushed) = self.deferred_helper("__kage_count_leave", &fixed);
        let b = h.builder;
        let (offset, open_offset) = (h.param(0), h.param(1));
        let (records_local, activation_local) = (h.param(3), h.param(4));
        let (pushed_block, quiet) = (h.block(c"pushed"), h.block(c"quiet"));
        LLVMBuildCondBr(b, pushed, pushed_block, quiet);
        LLVMPositionBuilderAtEnd(b, pushed_block);
        let records = LLVMBuildLoad2(b, self.ptr_type, records_local, c"".as_ptr());
        let record = ir::byte_gep(b, records, offset);
        self.report_any_waiting(&h, 5, record, (own, pending));
        let activation = LLVMBuildLoad2(b, self.i32_type, activation_local, c"".as_ptr());
        self.exit_check.call(b, &mut [activation]);
        let cell = ir::byte_gep(b, records, open_offset);
        self.close.call(b, &mut [record, cell]);
        self.pop.call(b, &mut [activation]);
        LLVMBuildRetVoid(b);
        LLVMPositionBuilderAtEnd(b, quiet);
        let records = LLVMBuildLoad2(b, self.ptr_type, records_local, c"".as_ptr());
        let record = ir::byte_gep(b, records, offset);
        let cell = ir::byte_gep(b, records, open_offset);
        self.report_unopened(&h, 5, [record, cell], (own, pending), None);
        self.set_running(b, LLVMConstPointerNull(self.ptr_type));
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// A deferred region's locals (flag, own, pending), zero, at the builder's position (the
    /// entry block's start, before anything but allocas: mem2reg promotes only those).
    pub(super) unsafe fn deferred_locals(&self, b: LLVMBuilderRef) -> DeferredLocals {
        let bool_type = LLVMInt1TypeInContext(LLVMGetModuleContext(self.module));
        let local = |ty: LLVMTypeRef, init: LLVMValueRef| {
            let local = LLVMBuildAlloca(b, ty, c"kage.deferred".as_ptr());
            LLVMBuildStore(b, init, local);
            local
        };
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        DeferredLocals {
            flag: local(bool_type, LLVMConstInt(bool_type, 0, 0)),
            own: std::array::from_fn(|_| local(self.i64_type, zero)),
            pending: std::array::from_fn(|_| local(self.i64_type, zero)),
        }
    }

    /// A deferred region with `locals` ([`Self::deferred_locals`]) and its helpers. `own`
    /// and `pending` say which of its locals are added to; `parent_pending`: its parent's
    /// pending locals, when the parent is deferred.
    pub(super) unsafe fn deferred_region(
        &self,
        locals: DeferredLocals,
        own: [bool; 4],
        pending: [bool; 4],
        parent_pending: Option<[LLVMValueRef; 4]>,
    ) -> DeferredRegion {
        let key = (own, pending, parent_pending.is_some());
        let (open, leave) = *(self.deferred_helpers.borrow_mut().entry(key)).or_insert_with(|| {
            (
                self.define_open_deferred(own, pending),
                self.define_leave_deferred(own, pending, parent_pending.is_some()),
            )
        });
        DeferredRegion {
            flag: locals.flag,
            own: locals.own,
            pending: locals.pending,
            parent_pending,
            open,
            leave,
        }
    }

    /// A deferred region's helper `name`, with parameters `(ptr record, ptr cell, i32
    /// activation, ptr region, ptr flag, ptr own..., ptr pending...)` (`cell`: the word
    /// counting its source region's open instances) and, `to_parent`, the parent's pending
    /// locals; its entry branches on the flag (the record is open) to the first of the two
    /// blocks returned, else to the second.
    unsafe fn deferred_region_helper(
        &self,
        name: &str,
        to_parent: bool,
    ) -> (
        HelperBuilder,
        LLVMTypeRef,
        [LLVMValueRef; 5],
        [LLVMBasicBlockRef; 2],
    ) {
        let mut params = vec![self.ptr_type; if to_parent { 17 } else { 13 }];
        params[2] = self.i32_type;
        let (h, ty) = self.void_helper(name, &mut params);
        let fixed = std::array::from_fn(|i| h.param(i as u32));
        let bool_type = LLVMInt1TypeInContext(LLVMGetModuleContext(self.module));
        let opened = LLVMBuildLoad2(h.builder, bool_type, fixed[4], c"".as_ptr());
        let blocks = [h.block(c"opened"), h.block(c"unopened")];
        LLVMBuildCondBr(h.builder, opened, blocks[0], blocks[1]);
        (h, ty, fixed, blocks)
    }

    /// `void __kage_count_open_deferred(ptr record, ptr cell, i32 activation, ptr region,
    /// ptr flag, ptr own..., ptr pending...)`: opens a deferred region's record if it is
    /// not open (the region becomes the activation's innermost), then reports what waits in
    /// its locals.
    unsafe fn define_open_deferred(&self, own: [bool; 4], pending: [bool; 4]) -> RuntimeFunction {
        let (h, ty, [record, cell, activation, region, flag], [already, open]) =
            self.deferred_region_helper("__kage_count_open_deferred", false);
        let b = h.builder;
        let bool_type = LLVMInt1TypeInContext(LLVMGetModuleContext(self.module));
        LLVMPositionBuilderAtEnd(b, open);
        self.open_at(b, record, cell);
        LLVMBuildStore(b, LLVMConstInt(bool_type, 1, 0), flag);
        self.set_current.call(b, &mut [activation, region]);
        self.report_waiting(&h, 5, record, (own, pending), None);
        LLVMBuildRetVoid(b);
        LLVMPositionBuilderAtEnd(b, already);
        // (It is 1 already; stored so that once promoted to a register it is a constant.)
        LLVMBuildStore(b, LLVMConstInt(bool_type, 1, 0), flag);
        self.report_any_waiting(&h, 5, record, (own, pending));
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// `void __kage_count_leave_deferred(ptr record, ptr cell, i32 activation, ptr parent,
    /// ptr flag, ptr own..., ptr pending..., [ptr parent_pending...])`: a deferred region is
    /// left. If
    /// its record is open: what waits reported, the record closed, `parent` the
    /// activation's innermost region. Else its record counts the instance, its own counts
    /// and its inclusive ones (unless it is open further up the stack), and the thread's
    /// totals (or the parent's pending locals) what waited.
    unsafe fn define_leave_deferred(
        &self,
        own: [bool; 4],
        pending: [bool; 4],
        to_parent: bool,
    ) -> RuntimeFunction {
        let (h, ty, [record, cell, activation, parent, flag], [opened_block, quiet]) =
            self.deferred_region_helper("__kage_count_leave_deferred", to_parent);
        let b = h.builder;
        let bool_type = LLVMInt1TypeInContext(LLVMGetModuleContext(self.module));
        LLVMPositionBuilderAtEnd(b, opened_block);
        self.report_any_waiting(&h, 5, record, (own, pending));
        self.close.call(b, &mut [record, cell]);
        self.set_current.call(b, &mut [activation, parent]);
        LLVMBuildStore(b, LLVMConstInt(bool_type, 0, 0), flag);
        LLVMBuildRetVoid(b);
        LLVMPositionBuilderAtEnd(b, quiet);
        // (It is 0 already; stored so that once promoted to a register it is a constant.)
        LLVMBuildStore(b, LLVMConstInt(bool_type, 0, 0), flag);
        let to = to_parent.then_some(13);
        self.report_unopened(&h, 5, [record, cell], (own, pending), to);
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }

    /// In a deferred function's or region's helper (own and pending locals from parameter
    /// `own_at`): an instance that never opened its record, reported as a tree's root would
    /// be: an instance, what waited ([`Self::report_waiting`], to `to`), and its inclusive
    /// counts unless its source region is open further up the stack (`cell` is not 0:
    /// recursion counts once). Ends in a new block.
    unsafe fn report_unopened(
        &self,
        h: &HelperBuilder,
        own_at: u32,
        [record, cell]: [LLVMValueRef; 2],
        waiting: ([bool; 4], [bool; 4]),
        to: Option<u32>,
    ) {
        let b = h.builder;
        let (outermost, done) = (h.block(c"outermost"), h.block(c"done"));
        self.add_word(b, record, INSTANCES, LLVMConstInt(self.i64_type, 1, 0));
        let totals = self.report_waiting(h, own_at, record, waiting, to);
        let depth = self.load(b, self.i64_type, cell);
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let none_open = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, depth, zero, c"".as_ptr());
        LLVMBuildCondBr(b, none_open, outermost, done);
        LLVMPositionBuilderAtEnd(b, outermost);
        for (k, total) in totals.iter().enumerate() {
            if let Some(total) = *total {
                self.add_word(b, record, INCLUSIVE + k, total);
            }
        }
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
    }

    /// A new block of the builder's function.
    unsafe fn new_block(&self, b: LLVMBuilderRef, name: &std::ffi::CStr) -> LLVMBasicBlockRef {
        let function = LLVMGetBasicBlockParent(LLVMGetInsertBlock(b));
        let context = LLVMGetModuleContext(self.module);
        LLVMAppendBasicBlockInContext(context, function, name.as_ptr())
    }

    /// `value` to a copy's `DEPTH` (1 while it holds its source region's outermost open
    /// instance); nothing when `cell` is the record's own `DEPTH` (a region without copies:
    /// the comparison folds once the helper is inlined). Ends in a new block.
    unsafe fn mark_copy(&self, b: LLVMBuilderRef, [record, cell]: [LLVMValueRef; 2], value: u64) {
        let depth_field = ir::byte_gep(b, record, LLVMConstInt(self.i64_type, DEPTH as u64 * 8, 0));
        let (copy, done) = (self.new_block(b, c"copy"), self.new_block(b, c"marked"));
        let elsewhere = LLVMBuildICmp(
            b,
            LLVMIntPredicate::LLVMIntNE,
            cell,
            depth_field,
            c"".as_ptr(),
        );
        LLVMBuildCondBr(b, elsewhere, copy, done);
        LLVMPositionBuilderAtEnd(b, copy);
        self.store(b, LLVMConstInt(self.i64_type, value, 0), depth_field);
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
    }

    /// Opens an instance of the record at `record`, whose source region's open instances
    /// `cell` counts: instances + 1, open instances + 1, and the source region's first open
    /// one subtracts the totals from the inclusive counts (a copy's record marked as
    /// holding it, [`Self::mark_copy`]). Ends in a new block of the builder's function.
    unsafe fn open_at(&self, b: LLVMBuilderRef, record: LLVMValueRef, cell: LLVMValueRef) {
        let one = LLVMConstInt(self.i64_type, 1, 0);
        self.add_word(b, record, INSTANCES, one);
        let depth = self.load(b, self.i64_type, cell);
        self.store(b, LLVMBuildAdd(b, depth, one, c"".as_ptr()), cell);
        let outermost = self.new_block(b, c"outermost");
        let done = self.new_block(b, c"opened");
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let first = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, depth, zero, c"".as_ptr());
        LLVMBuildCondBr(b, first, outermost, done);
        LLVMPositionBuilderAtEnd(b, outermost);
        self.mark_copy(b, [record, cell], 1);
        let totals = self.address(b, self.totals);
        for k in 0..4 {
            let now = ir::load_relaxed(b, self.i64_type, self.cell(b, totals, k));
            self.add_word(b, record, INCLUSIVE + k, LLVMBuildNeg(b, now, c"".as_ptr()));
        }
        LLVMBuildBr(b, done);
        LLVMPositionBuilderAtEnd(b, done);
    }

    /// `void __kage_count_open(ptr record, ptr cell)`.
    unsafe fn define_open(&self) -> RuntimeFunction {
        let mut params = [self.ptr_type, self.ptr_type];
        let (h, ty) = self.void_helper("__kage_count_open", &mut params);
        self.open_at(h.builder, h.param(0), h.param(1));
        LLVMBuildRetVoid(h.builder);
        h.finish(ty)
    }

    /// `void __kage_count_close(ptr record, ptr cell)`: the source region's open instances
    /// (`cell`) - 1 (none open: nothing), and the last one adds the totals to the
    /// inclusive counts (the record holds it: instances nest; a copy's no longer does).
    unsafe fn define_close(&self) -> RuntimeFunction {
        let mut params = [self.ptr_type, self.ptr_type];
        let (h, ty) = self.void_helper("__kage_count_close", &mut params);
        let b = h.builder;
        let (record, cell) = (h.param(0), h.param(1));
        let (open, last, done) = (h.block(c"open"), h.block(c"last"), h.block(c"done"));
        let depth = self.load(b, self.i64_type, cell);
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let one = LLVMConstInt(self.i64_type, 1, 0);
        let none = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, depth, zero, c"".as_ptr());
        ir::set_branch_weights(LLVMBuildCondBr(b, none, done, open), 1, 1 << 20);
        LLVMPositionBuilderAtEnd(b, open);
        self.store(b, LLVMBuildSub(b, depth, one, c"".as_ptr()), cell);
        let outermost = LLVMBuildICmp(b, LLVMIntPredicate::LLVMIntEQ, depth, one, c"".as_ptr());
        LLVMBuildCondBr(b, outermost, last, done);
        LLVMPositionBuilderAtEnd(b, last);
        self.mark_copy(b, [record, cell], 0);
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
        let (h, ty) = self.void_helper("__kage_count_set_current", &mut params);
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
        let (h, ty) = self.void_helper("__kage_count_exit_check", &mut params);
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
        let (h, ty) = self.void_helper("__kage_count_pop", &mut params);
        let b = h.builder;
        let thread = self.address(b, self.thread);
        self.store(b, h.param(0), self.field(b, thread, TOP));
        LLVMBuildRetVoid(b);
        h.finish(ty)
    }
}
