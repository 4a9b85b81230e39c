//! The `hcpa` build (instrumentation 4, `KAGE_TOOL=hcpa`): the region hooks, and the
//! timestamp calls of hierarchical critical path analysis (docs/hcpa.md, "The
//! instrumentation"): [`analysis`] decides them for each function before anything is
//! inserted, [`HcpaCalls`] builds them.

mod analysis;
mod control;
mod costs;
mod leaves;

use std::collections::HashMap;

use kage_abi::{symbols, Instrumentation};
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::target::LLVMGetModuleDataLayout;

use super::{Settings, Tool};
use crate::hooks::{self, Hooks, Inserter};
use crate::ir::{self, RuntimeFunction};
use crate::plan::FunctionPlan;
use crate::regions::RegionTable;
use analysis::{Action, Cands};
pub use costs::Costs;

/// Region hooks and timestamp calls.
pub struct Hcpa {
    costs: Costs,
    /// Fold computations into their users' candidates (`KAGE_HCPA_FOLD` not `0`).
    fold: bool,
    /// Static leaves lose their region hooks (`KAGE_HCPA_LEAVES` not `0`).
    leaves: bool,
    omit: Omit,
}

/// The kinds of timestamp calls a build for measuring costs leaves out
/// (`kage_abi::hcpa::OMIT_VARIABLE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Omit {
    ts: bool,
    work: bool,
    memory: bool,
}

impl Omit {
    fn from_settings(settings: &mut Settings) -> Omit {
        let variable = kage_abi::hcpa::OMIT_VARIABLE;
        let mut omit = Omit::default();
        let Some(list) = settings.get(variable) else {
            return omit;
        };
        for kind in list
            .split([',', '+'])
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            match kind {
                "ts" => omit.ts = true,
                "work" => omit.work = true,
                "memory" => omit.memory = true,
                _ => settings.warn(format!(
                    "kage-pass: ignoring '{kind}' in {variable}: expected ts, work or memory"
                )),
            }
        }
        if omit != Omit::default() {
            settings.warn(format!(
                "kage-pass: warning: {variable}={list} leaves those timestamp calls out of the \
                 build: its critical paths and self-parallelism are wrong (it measures what the \
                 calls cost)"
            ));
        }
        omit
    }

    fn leaves_out(&self, action: &Action) -> bool {
        match action {
            Action::Ts { .. } | Action::Phi { .. } | Action::Hoist { .. } => self.ts,
            // A leaf's call stays: it is also the instance's region event.
            Action::Work { .. } => self.work,
            Action::Load { .. } | Action::Store { .. } | Action::Mem { .. } => self.memory,
            _ => false,
        }
    }
}

/// The `hcpa` build, with the costs of `KAGE_HCPA_COSTS`.
pub fn make(settings: &mut Settings) -> Box<dyn Tool> {
    Box::new(Hcpa {
        costs: Costs::from_settings(settings),
        fold: settings.get(kage_abi::hcpa::FOLD_VARIABLE).as_deref() != Some("0"),
        leaves: settings.get(kage_abi::hcpa::LEAVES_VARIABLE).as_deref() != Some("0"),
        omit: Omit::from_settings(settings),
    })
}

impl Tool for Hcpa {
    fn instrumentation(&self) -> Instrumentation {
        Instrumentation::Hcpa
    }

    unsafe fn instrument(
        &self,
        module: LLVMModuleRef,
        plans: &[FunctionPlan],
        table: &RegionTable,
    ) {
        let hooks = Hooks::declare(module);
        let mut calls = HcpaCalls::declare(module);
        let layout = LLVMGetModuleDataLayout(module);
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        for plan in plans {
            let mut function = analysis::analyse(plan, &self.costs, self.fold, layout, None);
            let leaves::Leaves { folded, branchy } = if self.leaves {
                leaves::make(plan, &mut function.actions)
            } else {
                leaves::Leaves::default()
            };
            if self.fold {
                // Again with values folding across blocks that run together (the static
                // leaves were found block by block: at a leaf's own level, values from
                // before it read 0).
                let scopes = leaves::fold_scopes(plan, &folded);
                if scopes.iter().enumerate().any(|(b, &first)| first != b) {
                    let mut joined =
                        analysis::analyse(plan, &self.costs, self.fold, layout, Some(&scopes));
                    if leaves::carry_over(&function.actions, &mut joined.actions) {
                        function = joined;
                    }
                }
            }
            let skipped = hooks::Skipped {
                loops: &[],
                folded: &folded,
            };
            // A branchy leaf's work goes with its `__kage_hcpa_leaf` calls.
            let branchy_blocks: std::collections::HashSet<_> = (branchy.iter())
                .flat_map(|leaf| leaf.blocks.iter().map(|&b| plan.cfg.blocks[b]))
                .collect();
            let mut ins = Inserter::new(module, plan.func, builder, &hooks, table);
            hooks::insert(plan, &mut ins, &skipped, |ins| {
                for placed in &function.actions {
                    let leaf_work = matches!(placed.action, Action::Work { .. })
                        && branchy_blocks.contains(&LLVMGetInstructionParent(placed.before));
                    if !leaf_work && !self.omit.leaves_out(&placed.action) {
                        calls.insert(ins, plan.func, placed.before, &placed.action);
                    }
                }
                for leaf in &branchy {
                    calls.branchy_leaf(ins, plan, leaf);
                }
            });
        }
        LLVMDisposeBuilder(builder);
    }
}

/// The `__kage_hcpa_*` functions and the constant candidate arrays passed to them.
struct HcpaCalls {
    module: LLVMModuleRef,
    frame: RuntimeFunction,
    work: RuntimeFunction,
    leaf: RuntimeFunction,
    ts: RuntimeFunction,
    hoist: RuntimeFunction,
    phi: RuntimeFunction,
    load: RuntimeFunction,
    store: RuntimeFunction,
    mem: RuntimeFunction,
    call: RuntimeFunction,
    arg: RuntimeFunction,
    ret: RuntimeFunction,
    result: RuntimeFunction,
    i32_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
    ptr_type: LLVMTypeRef,
    /// One constant array per distinct candidate list in the module.
    arrays: HashMap<Vec<u32>, LLVMValueRef>,
}

impl HcpaCalls {
    unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        let declare = |symbol| RuntimeFunction::declare(module, symbol);
        HcpaCalls {
            module,
            frame: declare(&symbols::HCPA_FRAME),
            work: declare(&symbols::HCPA_WORK),
            leaf: declare(&symbols::HCPA_LEAF),
            ts: declare(&symbols::HCPA_TS),
            hoist: declare(&symbols::HCPA_HOIST),
            phi: declare(&symbols::HCPA_PHI),
            load: declare(&symbols::HCPA_LOAD),
            store: declare(&symbols::HCPA_STORE),
            mem: declare(&symbols::HCPA_MEM),
            call: declare(&symbols::HCPA_CALL),
            arg: declare(&symbols::HCPA_ARG),
            ret: declare(&symbols::HCPA_RETURN),
            result: declare(&symbols::HCPA_RESULT),
            i32_type: LLVMInt32TypeInContext(context),
            i64_type: LLVMInt64TypeInContext(context),
            ptr_type: LLVMPointerTypeInContext(context, 0),
            arrays: HashMap::new(),
        }
    }

    unsafe fn i32(&self, v: u32) -> LLVMValueRef {
        LLVMConstInt(self.i32_type, u64::from(v), 0)
    }

    /// `cands` as a pointer to a constant `struct kage_candidate[n]` and `n`.
    unsafe fn candidates(&mut self, cands: &Cands) -> [LLVMValueRef; 2] {
        let words: Vec<u32> = cands.0.iter().flat_map(|(&s, &o)| [s, o]).collect();
        let n = self.i32(cands.0.len() as u32);
        if words.is_empty() {
            return [LLVMConstNull(self.ptr_type), n];
        }
        let (module, i32_type) = (self.module, self.i32_type);
        let array = *self.arrays.entry(words).or_insert_with_key(|words| {
            let mut values: Vec<LLVMValueRef> = words
                .iter()
                .map(|&w| LLVMConstInt(i32_type, u64::from(w), 0))
                .collect();
            let init = LLVMConstArray2(i32_type, values.as_mut_ptr(), values.len() as u64);
            let global = LLVMAddGlobal(module, LLVMTypeOf(init), c"__kage_hcpa_cands".as_ptr());
            LLVMSetInitializer(global, init);
            LLVMSetGlobalConstant(global, 1);
            LLVMSetLinkage(global, llvm_sys::LLVMLinkage::LLVMPrivateLinkage);
            LLVMSetUnnamedAddress(global, llvm_sys::LLVMUnnamedAddr::LLVMGlobalUnnamedAddr);
            LLVMSetAlignment(global, 4);
            global
        });
        [array, n]
    }

    /// Builds `action` before `before` in `func`.
    unsafe fn insert(
        &mut self,
        ins: &mut Inserter,
        func: LLVMValueRef,
        before: LLVMValueRef,
        action: &Action,
    ) {
        if let Action::Phi {
            block, incoming, ..
        } = action
        {
            // The shadow phis choosing the source and the edge's condition go first.
            let first = LLVMGetFirstInstruction(*block);
            LLVMPositionBuilder(ins.builder, *block, first);
            let (src, cond) = (
                self.shadow_phi(ins, incoming, |&(_, s, _)| s),
                self.shadow_phi(ins, incoming, |&(_, _, c)| c),
            );
            ins.position_before(before);
            let Action::Phi { dst, .. } = action else {
                unreachable!()
            };
            let mut args = [self.i32(*dst), src, self.i32(0), cond];
            self.phi.call(ins.builder, &mut args);
            return;
        }
        // The frame right after the function's entry hook: an inlined call that begins
        // the function is entered after it (its region's hooks would else run first, and
        // the runtime make the frame for the inlined call's level).
        let before = match action {
            Action::Frame { .. } => ins
                .after_func_enter(LLVMGetEntryBasicBlock(func))
                .unwrap_or(before),
            // The block's first instruction now, its hooks' if it has any.
            Action::Result {
                before_hooks: true, ..
            } => ir::first_insertion_point(LLVMGetInstructionParent(before)).unwrap_or(before),
            _ => before,
        };
        ins.position_before(before);
        let b = ins.builder;
        match action {
            Action::Frame { slots } => {
                self.frame.call(b, &mut [self.i32(*slots), func]);
            }
            Action::Work { cost } => {
                self.work
                    .call(b, &mut [LLVMConstInt(self.i64_type, *cost, 0)]);
            }
            Action::Leaf {
                region,
                chain,
                work,
                cp,
            } => {
                let region = ins.table.region_ptr(*region);
                let [work, cp] = [*work, *cp].map(|v| LLVMConstInt(self.i64_type, v, 0));
                self.leaf.call(b, &mut [region, self.i32(*chain), work, cp]);
            }
            Action::Ts { dst, cands } => {
                let [array, n] = self.candidates(cands);
                self.ts.call(b, &mut [self.i32(*dst), array, n]);
            }
            Action::Hoist { dst, cands } => {
                let [array, n] = self.candidates(cands);
                self.hoist.call(b, &mut [self.i32(*dst), array, n]);
            }
            Action::Load {
                dst,
                ptr,
                size,
                cost,
                cands,
            } => {
                let [array, n] = self.candidates(cands);
                let size = LLVMConstInt(self.i64_type, *size, 0);
                self.load.call(
                    b,
                    &mut [self.i32(*dst), *ptr, size, self.i32(*cost), array, n],
                );
            }
            Action::Store {
                ptr,
                size,
                cost,
                cands,
            } => {
                let [array, n] = self.candidates(cands);
                let size = LLVMConstInt(self.i64_type, *size, 0);
                self.store
                    .call(b, &mut [*ptr, size, self.i32(*cost), array, n]);
            }
            Action::Mem {
                dst,
                src,
                len,
                cost8,
                cands,
            } => {
                let [array, n] = self.candidates(cands);
                let src = src.unwrap_or(LLVMConstNull(self.ptr_type));
                let len = LLVMBuildIntCast2(b, *len, self.i64_type, 0, c"".as_ptr());
                self.mem
                    .call(b, &mut [*dst, src, len, self.i32(*cost8), array, n]);
            }
            Action::Call { callee } => {
                self.call.call(b, &mut [*callee]);
            }
            Action::Arg { index, cands } => {
                let [array, n] = self.candidates(cands);
                self.arg.call(b, &mut [self.i32(*index), array, n]);
            }
            Action::Return { cands } => {
                let [array, n] = self.candidates(cands);
                self.ret.call(b, &mut [array, n]);
            }
            Action::Result { dst, cost, .. } => {
                self.result.call(b, &mut [self.i32(*dst), self.i32(*cost)]);
            }
            Action::Phi { .. } => unreachable!("handled above"),
        }
    }

    /// A branchy leaf's times at its own level, as values next to the program's, and on each
    /// way out of it `__kage_hcpa_leaf` with its work and critical path so far
    /// (`leaves::BranchyLeaf`). The values depend on the path taken alone: they go before
    /// each block's first instruction of the program's, as does the call of a block whose
    /// every successor is outside (after the hooks at its start: a loop's iteration; before
    /// those at its end).
    unsafe fn branchy_leaf(
        &mut self,
        ins: &mut Inserter,
        plan: &FunctionPlan,
        leaf: &leaves::BranchyLeaf,
    ) {
        use leaves::{Exit, MirrorOp};
        use llvm_sys::LLVMIntPredicate::LLVMIntUGT;
        let b = ins.builder;
        let i64_type = self.i64_type;
        let zero = LLVMConstInt(i64_type, 0, 0);
        let blocks: Vec<_> = leaf.blocks.iter().map(|&i| plan.cfg.blocks[i]).collect();
        let anchors = &leaf.firsts;
        let max = |x: LLVMValueRef, y: LLVMValueRef| {
            if x == zero || x == y {
                return y;
            }
            if y == zero {
                return x;
            }
            let greater = LLVMBuildICmp(b, LLVMIntUGT, x, y, c"".as_ptr());
            LLVMBuildSelect(b, greater, x, y, c"".as_ptr())
        };
        // How many edges go from block `from` to block `to` (a switch may have several).
        let edges = |from: LLVMBasicBlockRef, to: LLVMBasicBlockRef| {
            let terminator = LLVMGetBasicBlockTerminator(from);
            (0..LLVMGetNumSuccessors(terminator))
                .filter(|&k| LLVMGetSuccessor(terminator, k) == to)
                .count()
        };
        // One value per edge into `to` from the blocks `from` (leaf positions): a phi
        // unless they are all the same.
        let merge = |to: usize, values: &[(usize, LLVMValueRef)]| {
            let first = values[0].1;
            if values.iter().all(|&(_, v)| v == first) {
                return first;
            }
            // After the block's phis (a leaf's block is never a landing pad).
            let at = ir::first_insertion_point(blocks[to]).expect("a block with code");
            LLVMPositionBuilderBefore(b, at);
            let phi = LLVMBuildPhi(b, i64_type, c"kage.leaf.time".as_ptr());
            for &(from, v) in values {
                for _ in 0..edges(blocks[from], blocks[to]) {
                    let (mut v, mut from) = (v, blocks[from]);
                    LLVMAddIncoming(phi, &mut v, &mut from, 1);
                }
            }
            phi
        };
        // Per block: the times of the slots it leaves, its work and critical path.
        struct State {
            times: HashMap<u32, LLVMValueRef>,
            work: LLVMValueRef,
            cp: LLVMValueRef,
        }
        let mut out: Vec<State> = Vec::with_capacity(blocks.len());
        for (i, ops) in leaf.ops.iter().enumerate() {
            let preds: Vec<usize> = (0..i)
                .filter(|&p| edges(blocks[p], blocks[i]) > 0)
                .collect();
            let mut state = State {
                times: HashMap::new(),
                work: zero,
                cp: zero,
            };
            if !preds.is_empty() {
                let mut slots: Vec<u32> = (preds.iter())
                    .flat_map(|&p| out[p].times.keys().copied())
                    .collect();
                slots.sort_unstable();
                slots.dedup();
                for slot in slots {
                    let values: Vec<_> = (preds.iter())
                        .map(|&p| (p, out[p].times.get(&slot).copied().unwrap_or(zero)))
                        .collect();
                    state.times.insert(slot, merge(i, &values));
                }
                let works: Vec<_> = preds.iter().map(|&p| (p, out[p].work)).collect();
                state.work = merge(i, &works);
                let cps: Vec<_> = preds.iter().map(|&p| (p, out[p].cp)).collect();
                state.cp = merge(i, &cps);
            }
            let time = |state: &State, slot: u32| state.times.get(&slot).copied().unwrap_or(zero);
            for op in ops {
                match op {
                    MirrorOp::Work(cost) => {
                        ins.position_before(anchors[i]);
                        let cost = LLVMConstInt(i64_type, *cost, 0);
                        state.work = LLVMBuildAdd(b, state.work, cost, c"".as_ptr());
                    }
                    MirrorOp::Phi { dst, incoming } => {
                        // What each edge brings, made at the end of its block's own values.
                        let values: Vec<(usize, LLVMValueRef)> = (incoming.iter())
                            .map(|&(from, src, cond)| {
                                ins.position_before(anchors[from]);
                                (from, max(time(&out[from], src), time(&out[from], cond)))
                            })
                            .collect();
                        let t = if values.is_empty() {
                            zero
                        } else {
                            merge(i, &values)
                        };
                        ins.position_before(anchors[i]);
                        state.cp = max(state.cp, t);
                        if *dst != kage_abi::NONE {
                            state.times.insert(*dst, t);
                        }
                    }
                    MirrorOp::Time { dst, cands, cost } => {
                        ins.position_before(anchors[i]);
                        let mut t = zero;
                        for (&slot, &offset) in &cands.0 {
                            let offset = LLVMConstInt(i64_type, u64::from(offset), 0);
                            t = max(t, LLVMBuildAdd(b, time(&state, slot), offset, c"".as_ptr()));
                        }
                        let t = LLVMBuildAdd(b, t, LLVMConstInt(i64_type, *cost, 0), c"".as_ptr());
                        state.cp = max(state.cp, t);
                        if *dst != kage_abi::NONE {
                            state.times.insert(*dst, t);
                        }
                    }
                }
            }
            let region = ins.table.region_ptr(leaf.region);
            let mut args = [region, self.i32(leaf.chain), state.work, state.cp];
            match leaf.exits[i] {
                Exit::No => {}
                Exit::Always => {
                    ins.position_before(anchors[i]);
                    self.leaf.call(b, &mut args);
                }
                Exit::OnEdges => {
                    // On each edge out, as the program has it now (the hooks may have put
                    // a block of their own on it): in the block it goes to when that has
                    // no other way in, else in a new block on the edge. Either way before
                    // the hooks of the regions the edge leaves or enters.
                    let terminator = LLVMGetBasicBlockTerminator(blocks[i]);
                    // Each target once: a switch may name one in several cases, not
                    // side by side.
                    let mut targets: Vec<LLVMBasicBlockRef> = Vec::new();
                    for k in 0..LLVMGetNumSuccessors(terminator) {
                        let target = LLVMGetSuccessor(terminator, k);
                        if !blocks.contains(&target) && !targets.contains(&target) {
                            targets.push(target);
                        }
                    }
                    for target in targets {
                        let at = if ir::single_predecessor(target) {
                            target
                        } else {
                            let edge = ir::split_critical_edge(blocks[i], target);
                            assert!(!edge.is_null(), "a branchy leaf's edge out has a block");
                            edge
                        };
                        let first = ir::first_insertion_point(at).expect("a block with code");
                        ins.position_before(first);
                        self.leaf.call(b, &mut args);
                    }
                }
            }
            out.push(state);
        }
    }

    /// A constant when every edge brings the same slot, else an `i32` phi of them.
    unsafe fn shadow_phi(
        &self,
        ins: &mut Inserter,
        incoming: &[(llvm_sys::prelude::LLVMBasicBlockRef, u32, u32)],
        pick: impl Fn(&(llvm_sys::prelude::LLVMBasicBlockRef, u32, u32)) -> u32,
    ) -> LLVMValueRef {
        let first = incoming.first().map(&pick).unwrap_or(kage_abi::NONE);
        if incoming.iter().all(|e| pick(e) == first) {
            return self.i32(first);
        }
        let phi = LLVMBuildPhi(ins.builder, self.i32_type, c"".as_ptr());
        let mut values: Vec<LLVMValueRef> = incoming.iter().map(|e| self.i32(pick(e))).collect();
        let mut blocks: Vec<_> = incoming.iter().map(|e| e.0).collect();
        LLVMAddIncoming(
            phi,
            values.as_mut_ptr(),
            blocks.as_mut_ptr(),
            values.len() as u32,
        );
        phi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn omit(value: Option<&str>) -> (Omit, Vec<String>) {
        let read = |name: &str| {
            (name == kage_abi::hcpa::OMIT_VARIABLE)
                .then(|| value.map(str::to_string))
                .flatten()
        };
        let mut settings = Settings::new(&read);
        let omit = Omit::from_settings(&mut settings);
        (omit, settings.warnings().to_vec())
    }

    #[test]
    fn a_build_for_measuring_costs_names_what_it_leaves_out_and_warns() {
        assert_eq!(omit(None), (Omit::default(), vec![]));
        let (o, warnings) = omit(Some("ts+memory"));
        assert_eq!(
            o,
            Omit {
                ts: true,
                work: false,
                memory: true
            }
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("wrong"), "{warnings:?}");
        let (o, warnings) = omit(Some("work, bogus"));
        assert!(o.work && !o.ts && !o.memory);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let hoist = Action::Hoist {
            dst: 0,
            cands: Cands::default(),
        };
        assert!(omit(Some("ts")).0.leaves_out(&hoist));
        assert!(!omit(Some("memory")).0.leaves_out(&hoist));
        assert!(!omit(Some("ts,work,memory"))
            .0
            .leaves_out(&Action::Frame { slots: 1 }));
    }
}
