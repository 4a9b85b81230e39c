//! What the hcpa build inserts into one function, decided before anything is inserted
//! (docs/hcpa.md, "The instrumentation"): the slot of every value whose time must exist at
//! run time, each block's controlling condition, the loops' induction variables and
//! reductions, and the calls to make, in program order.

use std::collections::{BTreeMap, HashMap, HashSet};

use kage_abi::{hcpa, NONE};
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMValueRef};
use llvm_sys::target::{LLVMStoreSizeOfType, LLVMTargetDataRef};
use llvm_sys::LLVMOpcode::*;
use llvm_sys::LLVMTypeKind;

use super::control;
use super::costs::{intrinsic_name, is_computation, Costs};
use crate::ir;
use crate::plan::FunctionPlan;

/// The sources of a time: slot → the largest offset (`NONE`: a constant).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cands(pub BTreeMap<u32, u32>);

impl Cands {
    fn add(&mut self, slot: u32, offset: u32) {
        let e = self.0.entry(slot).or_insert(offset);
        *e = (*e).max(offset);
    }

    fn merge(&mut self, other: &Cands) {
        for (&slot, &offset) in &other.0 {
            self.add(slot, offset);
        }
    }

    fn shifted(&self, by: u32) -> Cands {
        Cands(
            self.0
                .iter()
                .map(|(&s, &o)| (s, o.saturating_add(by)))
                .collect(),
        )
    }
}

/// One call the hcpa build inserts.
pub enum Action {
    Frame {
        slots: u32,
    },
    Work {
        cost: u64,
    },
    /// `__kage_hcpa_leaf`: the work call of a static leaf's block (`leaves`): an instance of
    /// each of the `chain` regions at table slots `region..region + chain` (each the only
    /// child of the one before, the last the leaf) with this work and critical path.
    Leaf {
        region: u32,
        chain: u32,
        work: u64,
        cp: u64,
    },
    /// `__kage_hcpa_phi(dst, src, 0, cond)`, with `src` and `cond` chosen by the edge taken:
    /// per incoming block of the phi, its source slot and edge condition slot.
    Phi {
        dst: u32,
        block: LLVMBasicBlockRef,
        incoming: Vec<(LLVMBasicBlockRef, u32, u32)>,
    },
    Ts {
        dst: u32,
        cands: Cands,
    },
    /// `__kage_hcpa_hoist`: a loop's invariant candidates, before it is entered.
    Hoist {
        dst: u32,
        cands: Cands,
    },
    Load {
        dst: u32,
        ptr: LLVMValueRef,
        size: u64,
        cost: u32,
        cands: Cands,
    },
    Store {
        ptr: LLVMValueRef,
        size: u64,
        cost: u32,
        cands: Cands,
    },
    Mem {
        dst: LLVMValueRef,
        src: Option<LLVMValueRef>,
        len: LLVMValueRef,
        cost8: u32,
        cands: Cands,
    },
    Call {
        callee: LLVMValueRef,
    },
    Arg {
        index: u32,
        cands: Cands,
    },
    Return {
        cands: Cands,
    },
    Result {
        dst: u32,
        cost: u32,
        /// Before the region hooks of the block `before` begins (an `invoke`'s normal
        /// destination): the result belongs to the invoke's regions, which that block's
        /// hooks may leave.
        before_hooks: bool,
    },
}

/// An action and the instruction it goes before.
pub struct Placed {
    pub before: LLVMValueRef,
    pub action: Action,
}

/// The hcpa instrumentation of one function.
pub struct HcpaFunction {
    pub actions: Vec<Placed>,
}

struct Analysis {
    slots: HashMap<LLVMValueRef, u32>,
    next_slot: u32,
    /// Folded candidates of the values without a slot, by value.
    folded: HashMap<LLVMValueRef, Cands>,
}

impl Analysis {
    fn slot(&self, v: LLVMValueRef) -> Option<u32> {
        self.slots.get(&v).copied()
    }

    fn new_slot(&mut self) -> u32 {
        self.next_slot += 1;
        self.next_slot - 1
    }

    /// The sources a use of `v` brings.
    fn base(&self, v: LLVMValueRef) -> Cands {
        let mut c = Cands::default();
        if let Some(s) = self.slot(v) {
            c.add(s, 0);
        } else if let Some(f) = self.folded.get(&v) {
            c = f.clone();
        }
        c
    }
}

/// Analyses the function of `plan`; without `fold`, every computed value gets a slot. With
/// `scopes` (by block, the first block of the run it belongs to: `leaves::fold_scopes`), a
/// value folds into its uses anywhere in its block's run, else only in its block.
///
/// # Safety
/// `plan` must describe a live function nothing was inserted into yet.
pub unsafe fn analyse(
    plan: &FunctionPlan,
    costs: &Costs,
    fold: bool,
    layout: LLVMTargetDataRef,
    scopes: Option<&[usize]>,
) -> HcpaFunction {
    let cfg = &plan.cfg;
    let reachable = &plan.forest.reachable;
    let index = cfg.block_indices();
    let block_of = |inst: LLVMValueRef| index.get(&LLVMGetInstructionParent(inst)).copied();
    let scope_of = |inst: LLVMValueRef| {
        let b = block_of(inst)?;
        Some(scopes.map_or(b, |scopes| scopes[b]))
    };
    let controllers = control::controllers(&cfg.successors, 0);
    let mut a = Analysis {
        slots: HashMap::new(),
        next_slot: 0,
        folded: HashMap::new(),
    };
    // Slots: the arguments first, then every value whose time is needed beyond its block.
    let params = LLVMCountParams(plan.func);
    for i in 0..params {
        a.slots.insert(LLVMGetParam(plan.func, i), i);
    }
    a.next_slot = params;
    let blocks: Vec<(usize, Vec<LLVMValueRef>)> = (cfg.blocks.iter().enumerate())
        .filter(|&(b, _)| reachable[b])
        .map(|(b, &block)| (b, ir::instructions(block)))
        .collect();
    let conditions: Vec<Option<LLVMValueRef>> = (cfg.blocks.iter())
        .map(|&block| terminator_condition(block))
        .collect();
    for (b, insts) in &blocks {
        for &v in insts {
            let scope = scopes.map_or(*b, |scopes| scopes[*b]);
            if needs_slot(v, scope, &scope_of, conditions[*b], fold) {
                let s = a.new_slot();
                a.slots.insert(v, s);
            }
        }
    }
    // Computed once: the slots of each block's condition, controlling condition, and the
    // condition of the edges leaving it (its own branch's, or what decided that it ran
    // when it always goes on to the same block).
    let n = cfg.blocks.len();
    let condition_slots: Vec<Option<u32>> = (0..n)
        .map(|b| conditions[b].and_then(|c| a.slot(c)))
        .collect();
    let control_slots: Vec<Option<u32>> = (0..n)
        .map(|b| controllers[b].and_then(|c| condition_slots[c]))
        .collect();
    let edge_conditions: Vec<u32> = (0..n)
        .map(|b| {
            if cfg.successors[b].len() > 1 {
                condition_slots[b]
            } else {
                control_slots[b]
            }
            .unwrap_or(NONE)
        })
        .collect();
    let (inductive_phis, updates) = inductions(plan, &index);

    let mut actions = Vec::new();
    let entry_at = ir::first_insertion_point(cfg.blocks[0]);
    for (b, insts) in &blocks {
        let b = *b;
        let block = cfg.blocks[b];
        let Some(start) = ir::first_insertion_point(block) else {
            continue;
        };
        if b == 0 {
            if let Some(at) = entry_at {
                actions.push(Placed {
                    before: at,
                    action: Action::Frame { slots: 0 },
                });
            }
        }
        let cd = control_slots[b];
        let cd_cands = |cost: u32| {
            let mut c = Cands::default();
            if let Some(s) = cd {
                c.add(s, cost);
            }
            c
        };
        // Phis: each takes the time of the value that arrived and of the edge's condition;
        // when one reads another of the same block, all read into temporaries first (phis
        // take their values at once).
        let phis: Vec<LLVMValueRef> = (insts.iter().copied())
            .filter(|&v| ir::opcode(v) == LLVMPHI)
            .collect();
        let reads_own_phi = phis.iter().any(|&p| {
            (0..LLVMCountIncoming(p)).any(|k| phis.contains(&LLVMGetIncomingValue(p, k)))
        });
        let mut commits = Vec::new();
        for &p in &phis {
            let Some(dst) = a.slot(p) else { continue };
            let incoming = (0..LLVMCountIncoming(p))
                .map(|k| {
                    let pred = LLVMGetIncomingBlock(p, k);
                    let src = a.slot(LLVMGetIncomingValue(p, k)).unwrap_or(NONE);
                    let cond = match index.get(&pred) {
                        Some(&pb) if !inductive_phis.contains(&p) => edge_conditions[pb],
                        _ => NONE,
                    };
                    (pred, src, cond)
                })
                .collect();
            let target = if reads_own_phi {
                let tmp = a.new_slot();
                commits.push((dst, tmp));
                tmp
            } else {
                dst
            };
            actions.push(Placed {
                before: start,
                action: Action::Phi {
                    dst: target,
                    block,
                    incoming,
                },
            });
        }
        for (dst, tmp) in commits {
            let mut cands = Cands::default();
            cands.add(tmp, 0);
            actions.push(Placed {
                before: start,
                action: Action::Ts { dst, cands },
            });
        }
        let work_at = actions.len();
        let mut work: u64 = 0;
        for &v in insts {
            let op = ir::opcode(v);
            let next = LLVMGetNextInstruction(v);
            match op {
                LLVMPHI => {}
                LLVMLoad | LLVMVAArg => {
                    let cost = costs.of(hcpa::LOAD);
                    work += u64::from(cost);
                    let dst = a.slot(v).unwrap_or(NONE);
                    let ptr = LLVMGetOperand(v, 0);
                    let mut cands = a.base(ptr);
                    cands.merge(&cd_cands(0));
                    match (op, access_size(layout, LLVMTypeOf(v))) {
                        (LLVMLoad, Some(size)) if is_plain_pointer(ptr) => actions.push(Placed {
                            before: v,
                            action: Action::Load {
                                dst,
                                ptr,
                                size,
                                cost,
                                cands,
                            },
                        }),
                        _ => {
                            let cands = cands.shifted(cost);
                            push_after(&mut actions, next, Action::Ts { dst, cands });
                        }
                    }
                }
                LLVMStore => {
                    let cost = costs.of(hcpa::STORE);
                    work += u64::from(cost);
                    let (value, ptr) = (LLVMGetOperand(v, 0), LLVMGetOperand(v, 1));
                    let mut cands = a.base(value);
                    cands.merge(&a.base(ptr));
                    cands.merge(&cd_cands(0));
                    match access_size(layout, LLVMTypeOf(value)) {
                        Some(size) if is_plain_pointer(ptr) => actions.push(Placed {
                            before: v,
                            action: Action::Store {
                                ptr,
                                size,
                                cost,
                                cands,
                            },
                        }),
                        _ => push_after(
                            &mut actions,
                            next,
                            Action::Ts {
                                dst: NONE,
                                cands: cands.shifted(cost),
                            },
                        ),
                    }
                }
                LLVMAtomicRMW | LLVMAtomicCmpXchg => {
                    // A load, the operation (the compare, or the read-modify-write's
                    // arithmetic) and a store: all three are work, as on the path.
                    let (load, store) = (costs.of(hcpa::LOAD), costs.of(hcpa::STORE));
                    let operation = costs.of(hcpa::SIMPLE);
                    work += u64::from(load + operation + store);
                    let ptr = LLVMGetOperand(v, 0);
                    let dst = a.slot(v).unwrap_or(NONE);
                    let mut cands = cd_cands(0);
                    for k in 0..LLVMGetNumOperands(v) as u32 {
                        cands.merge(&a.base(LLVMGetOperand(v, k)));
                    }
                    let size = access_size(layout, LLVMTypeOf(LLVMGetOperand(v, 1)));
                    match size {
                        Some(size) if is_plain_pointer(ptr) && dst != NONE => {
                            actions.push(Placed {
                                before: v,
                                action: Action::Load {
                                    dst,
                                    ptr,
                                    size,
                                    cost: load,
                                    cands: cands.clone(),
                                },
                            });
                            let mut stored = Cands::default();
                            stored.add(dst, operation);
                            stored.merge(&cands);
                            actions.push(Placed {
                                before: v,
                                action: Action::Store {
                                    ptr,
                                    size,
                                    cost: store,
                                    cands: stored,
                                },
                            });
                        }
                        _ => push_after(
                            &mut actions,
                            next,
                            Action::Ts {
                                dst,
                                cands: cands.shifted(load + operation + store),
                            },
                        ),
                    }
                }
                LLVMCall | LLVMInvoke | LLVMCallBr => {
                    analyse_call(
                        &mut a,
                        v,
                        &mut actions,
                        &cd_cands(0),
                        costs,
                        &index,
                        &mut work,
                    );
                }
                LLVMRet
                    if LLVMGetNumOperands(v) == 1 && ir::musttail_call_returned_by(v).is_none() =>
                {
                    let mut cands = a.base(LLVMGetOperand(v, 0));
                    cands.merge(&cd_cands(0));
                    actions.push(Placed {
                        before: v,
                        action: Action::Return { cands },
                    });
                }
                LLVMAlloca => {}
                _ if is_computation(op) => {
                    let cost = costs.of_instruction(v);
                    work += u64::from(cost);
                    let cands = match updates.get(&v) {
                        // t(next) = max(t(p), t(x) + c): the update does not chain.
                        // An induction variable's values are known in advance:
                        // t(next) = max(t(p), t(x)); a reduction's update costs its
                        // operation: max(t(p), t(x) + c). Neither chains.
                        Some(&(acc, other, induction)) => {
                            let delay = if induction { 0 } else { cost };
                            let mut c = a.base(other).shifted(delay);
                            if c.0.is_empty() && delay > 0 {
                                c.add(NONE, delay);
                            }
                            c.merge(&cd_cands(delay));
                            c.merge(&a.base(acc));
                            c
                        }
                        None => computation_cands(&a, v, cost, &cd_cands(cost)),
                    };
                    finish_value(&mut a, v, cands, cost, next, &mut actions);
                }
                _ => {}
            }
        }
        if work > 0 {
            actions.insert(
                work_at,
                Placed {
                    before: start,
                    action: Action::Work { cost: work },
                },
            );
        }
    }
    if fold {
        hoist_invariant_candidates(plan, &mut a, &mut actions, &index);
    }
    let slots = a.next_slot;
    for p in &mut actions {
        if let Action::Frame { slots: s } = &mut p.action {
            *s = slots;
        }
    }
    HcpaFunction { actions }
}

/// The candidates of the calls in a loop that do not change while it runs (arguments'
/// slots, and slots written outside the loop), two or more of them, become one slot
/// written by a `hoist` at the end of the loop's preheader, each time the loop is
/// entered; a call keeps that slot and, as a constant, their largest offset. Exact: a
/// slot written outside the loop cannot change before the loop is left (re-entering
/// goes through the preheader), and the hoisted slot is valid at exactly the levels
/// they were valid at there (those open before the loop was entered); at the levels
/// entered since, each of them reads 0 and the call gets their largest offset, as the
/// constant gives. The `hoist` raises no critical path: the calls do, as before.
unsafe fn hoist_invariant_candidates(
    plan: &FunctionPlan,
    a: &mut Analysis,
    actions: &mut Vec<Placed>,
    index: &HashMap<LLVMBasicBlockRef, usize>,
) {
    let (cfg, forest) = (&plan.cfg, &plan.forest);
    // The block each slot is written in (`None`: an argument, written by `frame`). A
    // call's result slot is written after the call, in the next block for an `invoke`:
    // those are left out.
    let mut home: HashMap<u32, Option<usize>> = HashMap::new();
    for (&v, &slot) in &a.slots {
        if !LLVMIsAArgument(v).is_null() {
            home.insert(slot, None);
        } else if !LLVMIsAInstruction(v).is_null() && LLVMIsATerminatorInst(v).is_null() {
            if let Some(&b) = index.get(&LLVMGetInstructionParent(v)) {
                home.insert(slot, Some(b));
            }
        }
    }
    // A loop's preheader: its header's only predecessor outside it, which branches to
    // the header alone.
    let preheader = |l: usize| -> Option<usize> {
        let header = forest.loops[l].header;
        let mut outside = (0..cfg.blocks.len())
            .filter(|&b| cfg.successors[b].contains(&header) && !forest.contains(l, b));
        let p = outside.next()?;
        let branch = LLVMGetBasicBlockTerminator(cfg.blocks[p]);
        (outside.next().is_none()
            && cfg.successors[p] == [header]
            && !branch.is_null()
            && ir::opcode(branch) == LLVMBr)
            .then_some(p)
    };
    let mut preheaders: HashMap<usize, Option<usize>> = HashMap::new();
    let mut hoisted: HashMap<(usize, Vec<(u32, u32)>), u32> = HashMap::new();
    let mut hoists = Vec::new();
    for placed in actions.iter_mut() {
        let cands = match &mut placed.action {
            Action::Ts { cands, .. }
            | Action::Load { cands, .. }
            | Action::Store { cands, .. }
            | Action::Mem { cands, .. }
            | Action::Arg { cands, .. }
            | Action::Return { cands } => cands,
            _ => continue,
        };
        let Some(&b) = index.get(&LLVMGetInstructionParent(placed.before)) else {
            continue;
        };
        let Some(l) = forest.innermost[b] else {
            continue;
        };
        let Some(p) = *preheaders.entry(l).or_insert_with(|| preheader(l)) else {
            continue;
        };
        let invariant: Vec<(u32, u32)> = (cands.0.iter())
            .filter(|&(&slot, _)| {
                slot != NONE
                    && home
                        .get(&slot)
                        .is_some_and(|h| h.is_none_or(|hb| !forest.contains(l, hb)))
            })
            .map(|(&s, &o)| (s, o))
            .collect();
        if invariant.len() < 2 {
            continue;
        }
        let largest = invariant.iter().map(|&(_, o)| o).max().unwrap_or(0);
        for (slot, _) in &invariant {
            cands.0.remove(slot);
        }
        let dst = *hoisted.entry((l, invariant.clone())).or_insert_with(|| {
            let dst = a.new_slot();
            hoists.push(Placed {
                before: LLVMGetBasicBlockTerminator(cfg.blocks[p]),
                action: Action::Hoist {
                    dst,
                    cands: Cands(invariant.into_iter().collect()),
                },
            });
            dst
        });
        cands.add(dst, 0);
        if largest > 0 {
            cands.add(NONE, largest);
        }
    }
    // After every other call in the preheader: they write the slots hoisted.
    actions.extend(hoists);
}

/// A computed value's candidates: its operands' plus its cost, and the block's condition.
unsafe fn computation_cands(a: &Analysis, v: LLVMValueRef, cost: u32, cd: &Cands) -> Cands {
    let operands = if ir::is_call_site(v) {
        LLVMGetNumArgOperands(v)
    } else {
        LLVMGetNumOperands(v) as u32
    };
    let mut c = Cands::default();
    for k in 0..operands {
        c.merge(&a.base(LLVMGetOperand(v, k)));
    }
    let mut c = c.shifted(cost);
    c.merge(cd);
    if c.0.is_empty() && cost > 0 {
        c.add(NONE, cost);
    }
    c
}

/// Records `v`'s candidates: a `ts` into its slot when it has one, a `ts` for the critical
/// path alone when nothing uses it, else folded into its users.
unsafe fn finish_value(
    a: &mut Analysis,
    v: LLVMValueRef,
    cands: Cands,
    cost: u32,
    next: LLVMValueRef,
    actions: &mut Vec<Placed>,
) {
    if let Some(dst) = a.slot(v) {
        push_after(actions, next, Action::Ts { dst, cands });
    } else if LLVMGetFirstUse(v).is_null() {
        if cost > 0 && !cands.0.is_empty() {
            push_after(actions, next, Action::Ts { dst: NONE, cands });
        }
    } else {
        a.folded.insert(v, cands);
    }
}

unsafe fn push_after(actions: &mut Vec<Placed>, next: LLVMValueRef, action: Action) {
    if !next.is_null() {
        actions.push(Placed {
            before: next,
            action,
        });
    }
}

/// Calls: intrinsics that compute are folded like any computation, `memcpy` and friends
/// read and write memory, and the rest go through the pending-call protocol.
#[allow(clippy::too_many_arguments)]
unsafe fn analyse_call(
    a: &mut Analysis,
    v: LLVMValueRef,
    actions: &mut Vec<Placed>,
    cd: &Cands,
    costs: &Costs,
    index: &HashMap<LLVMBasicBlockRef, usize>,
    work: &mut u64,
) {
    let next = LLVMGetNextInstruction(v);
    if ir::is_musttail_call(v) {
        return;
    }
    let name = ir::direct_callee(v).map(|f| ir::value_name(f));
    let name = name.as_deref().unwrap_or("");
    let args = LLVMGetNumArgOperands(v);
    let arg = |k: u32| LLVMGetOperand(v, k);
    let is_mem = ["llvm.memcpy", "llvm.memmove", "llvm.memset"]
        .iter()
        .any(|p| name.starts_with(p))
        || matches!(name, "memcpy" | "memmove" | "memset");
    if is_mem && args >= 3 {
        let transfer = !name.contains("memset");
        let mut cands = cd.clone();
        for k in 0..3 {
            cands.merge(&a.base(arg(k)));
        }
        let (dst, len) = (arg(0), arg(2));
        let src = transfer.then(|| arg(1));
        if is_plain_pointer(dst) && src.is_none_or(|p| is_plain_pointer(p)) && is_integer(len) {
            actions.push(Placed {
                before: v,
                action: Action::Mem {
                    dst,
                    src,
                    len,
                    cost8: costs.of(hcpa::MEM8),
                    cands,
                },
            });
        }
        return;
    }
    if intrinsic_name(v).is_some() || !LLVMIsAInlineAsm(LLVMGetCalledValue(v)).is_null() {
        let cost = if intrinsic_name(v).is_some() {
            costs.of_instruction(v)
        } else {
            costs.of(hcpa::SIMPLE)
        };
        *work += u64::from(cost);
        let cands = computation_cands(a, v, cost, &cd.shifted(cost));
        if LLVMGetTypeKind(LLVMTypeOf(v)) != LLVMTypeKind::LLVMVoidTypeKind {
            finish_value(a, v, cands, cost, next, actions);
        }
        return;
    }
    actions.push(Placed {
        before: v,
        action: Action::Call {
            callee: LLVMGetCalledValue(v),
        },
    });
    for k in 0..args {
        let mut cands = a.base(arg(k));
        if cands.0.is_empty() {
            continue;
        }
        cands.merge(cd);
        actions.push(Placed {
            before: v,
            action: Action::Arg { index: k, cands },
        });
    }
    let dst = a.slot(v).unwrap_or(NONE);
    let result = |before_hooks| Action::Result {
        dst,
        cost: costs.of(hcpa::CALL),
        before_hooks,
    };
    match ir::opcode(v) {
        LLVMCall => push_after(actions, next, result(false)),
        LLVMInvoke => {
            // The normal destination, when the invoke is its only way in.
            let normal = LLVMGetNormalDest(v);
            let only_pred = index.contains_key(&normal) && single_predecessor(normal);
            if let (true, Some(at)) = (only_pred, ir::first_insertion_point(normal)) {
                actions.push(Placed {
                    before: at,
                    action: result(true),
                });
            }
        }
        _ => {}
    }
}

/// Whether `v` needs a slot: its time is read at run time outside the code that computes
/// it, the run of blocks `scope` (docs/hcpa.md, "Slots").
unsafe fn needs_slot(
    v: LLVMValueRef,
    scope: usize,
    scope_of: &impl Fn(LLVMValueRef) -> Option<usize>,
    condition: Option<LLVMValueRef>,
    fold: bool,
) -> bool {
    if LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMTypeKind::LLVMVoidTypeKind {
        return false;
    }
    let op = ir::opcode(v);
    if op == LLVMAlloca {
        return false;
    }
    if !fold {
        return true;
    }
    if matches!(
        op,
        LLVMPHI
            | LLVMLoad
            | LLVMAtomicRMW
            | LLVMAtomicCmpXchg
            | LLVMInvoke
            | LLVMLandingPad
            | LLVMVAArg
    ) || (op == LLVMCall && intrinsic_name(v).is_none())
        || condition == Some(v)
    {
        return true;
    }
    let mut u = LLVMGetFirstUse(v);
    while !u.is_null() {
        let user = LLVMGetUser(u);
        if LLVMIsAInstruction(user).is_null()
            || ir::opcode(user) == LLVMPHI
            || scope_of(user) != Some(scope)
        {
            return true;
        }
        u = LLVMGetNextUse(u);
    }
    false
}

/// The value a block's terminator branches on, if it is conditional.
unsafe fn terminator_condition(block: LLVMBasicBlockRef) -> Option<LLVMValueRef> {
    let t = LLVMGetBasicBlockTerminator(block);
    if t.is_null() {
        return None;
    }
    let cond = match ir::opcode(t) {
        LLVMBr if LLVMIsConditional(t) != 0 => LLVMGetCondition(t),
        LLVMSwitch | LLVMIndirectBr => LLVMGetOperand(t, 0),
        _ => return None,
    };
    (LLVMIsAConstant(cond).is_null()).then_some(cond)
}

/// Each update of an induction variable or reduction: (the accumulator operand, the other
/// operand, whether it is an induction variable).
type Updates = HashMap<LLVMValueRef, (LLVMValueRef, LLVMValueRef, bool)>;

/// The loop-header phis that are induction variables or reductions, and their updates:
/// docs/hcpa.md, "Induction variables and reductions". An unrolled update is a chain,
/// `op(op(p, x1), x2)`, each link used only by the next: every link is an update.
unsafe fn inductions(
    plan: &FunctionPlan,
    index: &HashMap<LLVMBasicBlockRef, usize>,
) -> (HashSet<LLVMValueRef>, Updates) {
    let mut phis = HashSet::new();
    let mut updates = HashMap::new();
    for (k, lp) in plan.forest.loops.iter().enumerate() {
        let in_loop = |v: LLVMValueRef| {
            !LLVMIsAInstruction(v).is_null()
                && index
                    .get(&LLVMGetInstructionParent(v))
                    .is_some_and(|&b| plan.forest.contains(k, b))
        };
        for p in ir::instructions(plan.cfg.blocks[lp.header]) {
            if ir::opcode(p) != LLVMPHI {
                break;
            }
            let mut found = Vec::new();
            let mut invariant = true;
            let ok = (0..LLVMCountIncoming(p)).all(|i| {
                let pred = LLVMGetIncomingBlock(p, i);
                if !index
                    .get(&pred)
                    .is_some_and(|&b| plan.forest.contains(k, b))
                {
                    return true;
                }
                let next = LLVMGetIncomingValue(p, i);
                match update_chain(next, p, 0) {
                    Some(links) => {
                        for (link, acc, other) in links {
                            invariant &= !in_loop(other);
                            found.push((link, acc, other));
                        }
                        true
                    }
                    None => false,
                }
            });
            if !ok || found.is_empty() {
                continue;
            }
            // A reduction: the phi feeds nothing in the loop but its updates.
            let only_updates = {
                let mut u = LLVMGetFirstUse(p);
                let mut only = true;
                while !u.is_null() {
                    let user = LLVMGetUser(u);
                    if in_loop(user) && !found.iter().any(|&(n, _, _)| n == user) {
                        only = false;
                    }
                    u = LLVMGetNextUse(u);
                }
                only
            };
            if invariant || only_updates {
                phis.insert(p);
                for (link, acc, other) in found {
                    updates.insert(link, (acc, other, invariant));
                }
            }
        }
    }
    (phis, updates)
}

/// The links of the update chain from `phi` to `next`, `(link, accumulator, other)`, first
/// link first, when `next` is `op(... op(phi, x1) ..., xk)` with an associative `op` and
/// each inner link used only by the next (docs/hcpa.md).
unsafe fn update_chain(
    next: LLVMValueRef,
    phi: LLVMValueRef,
    depth: usize,
) -> Option<Vec<(LLVMValueRef, LLVMValueRef, LLVMValueRef)>> {
    if LLVMIsAInstruction(next).is_null() || depth > 64 {
        return None;
    }
    let op = ir::opcode(next);
    let operand = |k| LLVMGetOperand(next, k);
    let commutative = matches!(
        op,
        LLVMAdd | LLVMMul | LLVMAnd | LLVMOr | LLVMXor | LLVMFAdd | LLVMFMul
    ) || is_min_max(next);
    let left_only = matches!(op, LLVMSub | LLVMFSub)
        || (op == LLVMGetElementPtr && LLVMGetNumOperands(next) == 2);
    if !commutative && !left_only {
        return None;
    }
    let positions: &[u32] = if commutative { &[0, 1] } else { &[0] };
    for &k in positions {
        let (acc, other) = (operand(k), operand(1 - k));
        if acc == phi {
            return Some(vec![(next, acc, other)]);
        }
        let inner_link = !LLVMIsAInstruction(acc).is_null()
            && ir::opcode(acc) == op
            && LLVMGetInstructionParent(acc) == LLVMGetInstructionParent(next)
            && single_use(acc);
        if inner_link {
            if let Some(mut links) = update_chain(acc, phi, depth + 1) {
                links.push((next, acc, other));
                return Some(links);
            }
        }
    }
    None
}

unsafe fn single_use(v: LLVMValueRef) -> bool {
    let u = LLVMGetFirstUse(v);
    !u.is_null() && LLVMGetNextUse(u).is_null()
}

unsafe fn is_min_max(v: LLVMValueRef) -> bool {
    ir::opcode(v) == LLVMCall
        && intrinsic_name(v).is_some_and(|n| {
            [
                "smax", "smin", "umax", "umin", "maxnum", "minnum", "maximum", "minimum",
            ]
            .iter()
            .any(|m| n.starts_with(&format!("llvm.{m}.")))
        })
}

unsafe fn single_predecessor(block: LLVMBasicBlockRef) -> bool {
    // A block's predecessors are the users of the block that are terminators.
    let mut count = 0;
    let mut u = LLVMGetFirstUse(LLVMBasicBlockAsValue(block));
    while !u.is_null() {
        if !LLVMIsATerminatorInst(LLVMGetUser(u)).is_null() {
            count += 1;
        }
        u = LLVMGetNextUse(u);
    }
    count == 1
}

unsafe fn access_size(
    layout: LLVMTargetDataRef,
    ty: llvm_sys::prelude::LLVMTypeRef,
) -> Option<u64> {
    if LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMScalableVectorTypeKind || LLVMTypeIsSized(ty) == 0 {
        return None;
    }
    Some(LLVMStoreSizeOfType(layout, ty)).filter(|&s| s > 0)
}

unsafe fn is_plain_pointer(v: LLVMValueRef) -> bool {
    let ty = LLVMTypeOf(v);
    LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMPointerTypeKind && LLVMGetPointerAddressSpace(ty) == 0
}

unsafe fn is_integer(v: LLVMValueRef) -> bool {
    LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMTypeKind::LLVMIntegerTypeKind
}
