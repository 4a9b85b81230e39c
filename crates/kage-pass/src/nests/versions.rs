//! `#pragma kage versions` switches made into versioned nests (`KAGE_TOOL=select`;
//! docs/abi.md, "Versioned nests"): every case of the switch is a version of one loop nest,
//! and the runtime gives each chunk of the outermost loop's iterations to the version it
//! measures fastest. The program computes what version 0 computes alone, provided the versions
//! do the same work for any range of outermost iterations (the developer's promise, as in
//! VMAD §5.3).
//!
//! What the pragma plugin leaves, on code as the source wrote it (before SROA):
//!
//! ```text
//!  S:  m = llvm.annotation(0, "kage.versions:names")
//!      switch m, J [0 -> B0, 1 -> B1, ...]          J: where every case's `break` goes
//!  Bv: before the loop (lifetime.start, `i = init`) -> H
//!  H:  c = icmp pred (load i), bound; br c, body, E  the version's outermost loop
//!  E:  after the loop (lifetime.end, clang's cleanup slot) -> J
//! ```
//!
//! and what it becomes (`st` is a `struct kage_select_state` on the stack):
//!
//! ```text
//!  S:  __kage_select_enter(nest, st) -> D
//!  D:  st.more = 0; switch st.version, J [0 -> B0, 1 -> B1, ...]
//!  Bv: ... st.init = init; i = st.resume ? st.lo : init; st.lo = i;
//!      st.hi = i + st.span (saturated; i - st.span counting down) -> H
//!  H:  c = ...; br c && i < st.hi, body, X          (i > st.hi counting down)
//!  X:  st.at = i; st.bound = bound; st.more = c -> E
//!  E:  ... -> J'
//!  J': st.more ? (__kage_select_next(nest, st) -> D) : (__kage_select_exit(nest, st) -> J)
//! ```
//!
//! A chunk ends where the iterator reaches `hi`, after a whole outermost iteration, so the next
//! chunk, of whatever version, starts exactly where this one stopped: with the value the
//! version's own step led to (a tiled version's outer iterator ends on a tile's start).
//! Everything a case does besides its loop runs once per chunk, so the analysis below allows
//! only what may repeat: locals of the case, lifetime markers, clang's cleanup stores.

use std::collections::{HashMap, HashSet};

use kage_abi::select::{INCLUSIVE, MARK, MAX_VERSIONS, SIGNED, STATE_FIELDS, STATE_SIZE};
use kage_abi::NONE;
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMLinkage, LLVMOpcode};

use super::LoopSource;
use crate::debuginfo::HookLocations;
use crate::ir::{self, FunctionCfg, RuntimeFunction};
use crate::loops::find_loops;
use crate::regions::StringPool;

/// The runtime's entry points for versioned nests.
pub struct SelectCalls {
    pub enter: RuntimeFunction,
    pub next: RuntimeFunction,
    pub exit: RuntimeFunction,
}

/// One case of a versions switch, analysed.
struct Version {
    case_value: i64,
    name: Option<String>,
    /// The blocks of the case (reachable from its first without passing the switch's end).
    blocks: HashSet<LLVMBasicBlockRef>,
    /// The outermost loop's header.
    header: LLVMBasicBlockRef,
    /// The header's compare, the iterator's load it tests, the other operand.
    compare: LLVMValueRef,
    iterator: LLVMValueRef,
    bound: LLVMValueRef,
    /// `store init, slot` before the loop.
    init_store: LLVMValueRef,
    step: i64,
    signed: bool,
    inclusive: bool,
    source: LoopSource,
}

/// A versions switch, analysed.
pub struct VersionsSwitch {
    function: LLVMValueRef,
    mark: LLVMValueRef,
    switch: LLVMValueRef,
    join: LLVMBasicBlockRef,
    versions: Vec<Version>,
    file: String,
    line: u32,
}

/// The `llvm.annotation` calls the versions pragma left in `func`, with their mark strings.
unsafe fn marks(func: LLVMValueRef) -> Vec<(LLVMValueRef, String)> {
    let is_versions = |text: &str| text == MARK || text.starts_with(&format!("{MARK}:"));
    let mut out = Vec::new();
    let mut block = LLVMGetFirstBasicBlock(func);
    while !block.is_null() {
        for inst in ir::instructions(block) {
            if let Some(text) = super::annotation_text(inst).filter(|t| is_versions(t)) {
                out.push((inst, text));
            }
        }
        block = LLVMGetNextBasicBlock(block);
    }
    out
}

/// Every versions switch of the module, analysed; `Err` says where one is malformed.
///
/// # Safety
/// `module` must be valid.
pub unsafe fn find(module: LLVMModuleRef) -> Result<Vec<VersionsSwitch>, String> {
    let mut out = Vec::new();
    let mut func = LLVMGetFirstFunction(module);
    while !func.is_null() {
        if super::can_version(func) {
            for (mark, text) in marks(func) {
                out.push(analyse(func, mark, &text)?);
            }
        }
        func = LLVMGetNextFunction(func);
    }
    Ok(out)
}

/// Removes the marks of versions switches from a module whose build does not select among
/// versions: the switch tests the pragma's condition (`0`: the first version), as without
/// Kage.
///
/// # Safety
/// `module` must be valid.
pub unsafe fn remove_marks(module: LLVMModuleRef) {
    let mut func = LLVMGetFirstFunction(module);
    while !func.is_null() {
        if LLVMIsDeclaration(func) == 0 {
            for (mark, _) in marks(func) {
                LLVMReplaceAllUsesWith(mark, LLVMGetOperand(mark, 0));
                LLVMInstructionEraseFromParent(mark);
            }
        }
        func = LLVMGetNextFunction(func);
    }
}

/// `file:line` of an instruction, for messages.
unsafe fn place(inst: LLVMValueRef) -> String {
    format!("{}:{}", super::debug_file(inst), LLVMGetDebugLocLine(inst))
}

/// Whether `inst` is a call to an intrinsic that may repeat harmlessly (lifetime, debug,
/// annotation markers).
unsafe fn is_marker_call(inst: LLVMValueRef) -> bool {
    ir::is_call_site(inst)
        && ir::direct_callee(inst).is_some_and(|f| {
            let name = ir::value_name(f);
            name.starts_with("llvm.lifetime.")
                || name.starts_with("llvm.dbg.")
                || name.starts_with("llvm.experimental.noalias.scope.decl")
        })
}

/// The load a compare operand tests, through widening casts, and whether they were sign
/// extensions (`None` for none).
unsafe fn tested_load(mut value: LLVMValueRef) -> Option<(LLVMValueRef, Option<bool>)> {
    let mut widened = None;
    loop {
        if !LLVMIsALoadInst(value).is_null() {
            return Some((value, widened));
        }
        if !LLVMIsASExtInst(value).is_null() || !LLVMIsAZExtInst(value).is_null() {
            let signed = !LLVMIsASExtInst(value).is_null();
            if widened.is_some_and(|w| w != signed) {
                return None;
            }
            widened = Some(signed);
            value = LLVMGetOperand(value, 0);
            continue;
        }
        return None;
    }
}

/// Whether the stack slot `slot`'s address is only loaded from and stored to (and given to
/// lifetime and debug markers).
unsafe fn slot_stays_local(slot: LLVMValueRef) -> bool {
    let mut using = LLVMGetFirstUse(slot);
    while !using.is_null() {
        let user = LLVMGetUser(using);
        let ok = !LLVMIsALoadInst(user).is_null()
            || (!LLVMIsAStoreInst(user).is_null()
                && LLVMGetOperand(user, 1) == slot
                && LLVMGetOperand(user, 0) != slot)
            || is_marker_call(user);
        if !ok {
            return false;
        }
        using = LLVMGetNextUse(using);
    }
    true
}

/// Whether every use of `slot` lies in `blocks`.
unsafe fn used_only_in(slot: LLVMValueRef, blocks: &HashSet<LLVMBasicBlockRef>) -> bool {
    let mut using = LLVMGetFirstUse(slot);
    while !using.is_null() {
        let user = LLVMGetUser(using);
        if LLVMIsAInstruction(user).is_null() || !blocks.contains(&LLVMGetInstructionParent(user)) {
            return false;
        }
        using = LLVMGetNextUse(using);
    }
    true
}

/// The switch the mark `mark` leads, checked and analysed.
unsafe fn analyse(
    func: LLVMValueRef,
    mark: LLVMValueRef,
    text: &str,
) -> Result<VersionsSwitch, String> {
    let at = place(mark);
    let bad = |why: &str| Err(format!("'#pragma kage versions' at {at}: {why}"));
    let switch = LLVMGetFirstUse(mark);
    let switch = if switch.is_null() {
        std::ptr::null_mut()
    } else {
        LLVMGetUser(switch)
    };
    if switch.is_null()
        || LLVMIsASwitchInst(switch).is_null()
        || !LLVMGetNextUse(LLVMGetFirstUse(mark)).is_null()
    {
        return bad("the pragma must come right before a switch (0) whose cases are the versions");
    }
    let names: Vec<String> = match text.split_once(':') {
        Some((_, list)) => list.split(',').map(str::to_string).collect(),
        None => Vec::new(),
    };
    let join = LLVMGetSwitchDefaultDest(switch);
    let case_count = LLVMGetNumSuccessors(switch) - 1;
    if case_count < 2 {
        return bad("a versions switch needs two versions or more");
    }
    if case_count as usize > MAX_VERSIONS {
        return bad(&format!("at most {MAX_VERSIONS} versions"));
    }
    if !names.is_empty() && names.len() != case_count as usize {
        return bad(&format!(
            "the pragma names {} versions, the switch has {case_count}",
            names.len()
        ));
    }
    if !ir::first_instruction(join).is_null()
        && ir::opcode(ir::first_instruction(join)) == LLVMOpcode::LLVMPHI
    {
        return bad("the switch's end has a PHI node (a case yields a value)");
    }
    let cfg = FunctionCfg::new(func);
    let index = cfg.block_indices();
    let forest = find_loops(&cfg.successors, 0);
    let join_index = index[&join];
    let mut versions = Vec::new();
    let mut seen: HashSet<LLVMBasicBlockRef> = HashSet::new();
    for case in 0..case_count {
        let value = LLVMGetSwitchCaseValue(switch, case + 1);
        let entry = LLVMGetSuccessor(switch, case + 1);
        let case_value = ir::constant_i64(value).unwrap_or(0);
        let label = format!("case {case_value}");
        if case == 0 && case_value != 0 {
            return bad(
                "the first case must be `case 0`, the original version (a plain compiler runs it)",
            );
        }
        if entry == join {
            return bad(&format!("{label} has no loop"));
        }
        // The case's blocks: reachable from its first without passing the switch's end.
        let mut reach = vec![false; cfg.blocks.len()];
        let mut stack = vec![index[&entry]];
        while let Some(b) = stack.pop() {
            if b == join_index || reach[b] {
                continue;
            }
            reach[b] = true;
            stack.extend(cfg.successors[b].iter().copied());
        }
        let blocks: HashSet<LLVMBasicBlockRef> = (0..cfg.blocks.len())
            .filter(|&b| reach[b])
            .map(|b| cfg.blocks[b])
            .collect();
        let other_case = (1..=case_count)
            .map(|k| LLVMGetSuccessor(switch, k))
            .any(|b| b != entry && blocks.contains(&b));
        if other_case
            || blocks.contains(&LLVMGetInstructionParent(switch))
            || blocks.iter().any(|b| seen.contains(b))
        {
            return bad(&format!(
                "{label} does not end with `break` (it falls into another case, jumps back, \
                 returns or leaves the switch otherwise)"
            ));
        }
        // Entered only from the switch.
        for (b, succs) in cfg.successors.iter().enumerate() {
            if reach[b] {
                continue;
            }
            let from_switch = cfg.blocks[b] == LLVMGetInstructionParent(switch);
            for &s in succs {
                if reach[s] && !(from_switch && cfg.blocks[s] == entry) {
                    return bad(&format!(
                        "{label} is entered other than from the switch (a goto)"
                    ));
                }
            }
        }
        seen.extend(blocks.iter().copied());
        // Its outermost loop: a loop of the case whose parent is not in the case.
        let outermost: Vec<usize> = (0..forest.loops.len())
            .filter(|&k| reach[forest.loops[k].header])
            .filter(|&k| {
                forest.loops[k]
                    .parent
                    .is_none_or(|p| !reach[forest.loops[p].header])
            })
            .collect();
        let [k] = outermost[..] else {
            return bad(&format!(
                "{label} must hold exactly one outermost loop, it holds {}",
                outermost.len()
            ));
        };
        let lp = &forest.loops[k];
        let in_loop: HashSet<usize> = lp.blocks.iter().copied().collect();
        let source = super::loop_source(&cfg, &lp.blocks, lp.header).unwrap_or(LoopSource {
            file: String::new(),
            first_line: 0,
            last_line: 0,
        });
        let label = format!("{label} (the loop at line {})", source.first_line);
        let header = cfg.blocks[lp.header];

        // The header's test.
        let term = LLVMGetBasicBlockTerminator(header);
        let test_form = "its outermost loop must test its iterator at its head \
                         (`for (i = start; i < bound; i += step)` or a `while` alike)";
        if ir::opcode(term) != LLVMOpcode::LLVMBr || LLVMIsConditional(term) == 0 {
            return bad(&format!("{label}: {test_form}"));
        }
        let (go, out) = (LLVMGetSuccessor(term, 0), LLVMGetSuccessor(term, 1));
        if !in_loop.contains(&index[&go]) || in_loop.contains(&index[&out]) {
            return bad(&format!("{label}: {test_form}"));
        }
        if !ir::first_instruction(out).is_null()
            && ir::opcode(ir::first_instruction(out)) == LLVMOpcode::LLVMPHI
        {
            return bad(&format!("{label}: the loop's exit has a PHI node"));
        }
        let compare = LLVMGetCondition(term);
        if LLVMIsAICmpInst(compare).is_null() {
            return bad(&format!("{label}: {test_form}"));
        }
        let predicate = LLVMGetICmpPredicate(compare);
        let operand_type = LLVMTypeOf(LLVMGetOperand(compare, 0));
        if LLVMGetTypeKind(operand_type) != llvm_sys::LLVMTypeKind::LLVMIntegerTypeKind
            || LLVMGetIntTypeWidth(operand_type) > 64
        {
            return bad(&format!(
                "{label}: its iterator must be an integer of 64 bits or fewer"
            ));
        }
        // Which operand is the iterator: the load of a slot the loop steps once per iteration.
        let mut found = None;
        for side in 0..2 {
            let Some((load, widened)) = tested_load(LLVMGetOperand(compare, side)) else {
                continue;
            };
            let slot = LLVMGetOperand(load, 0);
            if LLVMIsAAllocaInst(slot).is_null() || LLVMGetInstructionParent(load) != header {
                continue;
            }
            if let Some(step) = loop_step(slot, &cfg, &index, &forest, k) {
                found = Some((side, load, widened, slot, step));
                break;
            }
        }
        let Some((side, iterator, widened, slot, step)) = found else {
            return bad(&format!(
                "{label}: {test_form}, stepping it by a constant once per iteration"
            ));
        };
        if !slot_stays_local(slot) {
            return bad(&format!("{label}: its iterator's address is taken"));
        }
        use LLVMIntPredicate::*;
        // The predicate with the iterator on the left.
        let predicate = if side == 0 {
            predicate
        } else {
            match predicate {
                LLVMIntSLT => LLVMIntSGT,
                LLVMIntSLE => LLVMIntSGE,
                LLVMIntSGT => LLVMIntSLT,
                LLVMIntSGE => LLVMIntSLE,
                LLVMIntULT => LLVMIntUGT,
                LLVMIntULE => LLVMIntUGE,
                LLVMIntUGT => LLVMIntULT,
                LLVMIntUGE => LLVMIntULE,
                other => other,
            }
        };
        let (up, signed, inclusive) = match predicate {
            LLVMIntSLT => (true, true, false),
            LLVMIntSLE => (true, true, true),
            LLVMIntULT => (true, false, false),
            LLVMIntULE => (true, false, true),
            LLVMIntSGT => (false, true, false),
            LLVMIntSGE => (false, true, true),
            LLVMIntUGT => (false, false, false),
            LLVMIntUGE => (false, false, true),
            LLVMIntNE => (step > 0, true, false),
            _ => return bad(&format!("{label}: {test_form}")),
        };
        if up != (step > 0) {
            return bad(&format!("{label}: its iterator steps away from its bound"));
        }
        if widened.is_some_and(|w| w != signed) {
            return bad(&format!(
                "{label}: its iterator is widened with another signedness than its test"
            ));
        }
        let bound = LLVMGetOperand(compare, 1 - side);

        // Before the loop: the blocks of the case that reach the header outside the loop.
        let mut before = HashSet::new();
        let mut stack = vec![index[&entry]];
        while let Some(b) = stack.pop() {
            if in_loop.contains(&b) || !before.insert(b) {
                continue;
            }
            stack.extend(cfg.successors[b].iter().copied().filter(|&s| reach[s]));
        }
        let mut init_store = None;
        for &b in &before {
            if cfg.successors[b]
                .iter()
                .any(|&s| s != lp.header && !before.contains(&s))
            {
                return bad(&format!(
                    "{label}: the code before its loop branches elsewhere"
                ));
            }
            for inst in ir::instructions(cfg.blocks[b]) {
                if !LLVMIsAStoreInst(inst).is_null() {
                    let target = LLVMGetOperand(inst, 1);
                    if target == slot {
                        if init_store.replace(inst).is_some() {
                            return bad(&format!(
                                "{label}: its iterator is set twice before the loop"
                            ));
                        }
                        continue;
                    }
                    if LLVMIsAAllocaInst(target).is_null() || !used_only_in(target, &blocks) {
                        return bad(&format!(
                            "{label}: the code before its loop ({}) writes memory the case does \
                             not own; it would run again before every chunk: move it before the \
                             switch",
                            place(inst)
                        ));
                    }
                } else if ir::is_call_site(inst) && !is_marker_call(inst) {
                    return bad(&format!(
                        "{label}: the code before its loop calls a function ({}); it would run \
                         again before every chunk: move it before the switch",
                        place(inst)
                    ));
                } else if LLVMIsAInstruction(inst).is_null() || may_write(inst) {
                    return bad(&format!(
                        "{label}: the code before its loop has effects ({})",
                        place(inst)
                    ));
                }
            }
        }
        let Some(init_store) = init_store else {
            return bad(&format!(
                "{label}: the loop must set its iterator (`for (i = start; ...)`)"
            ));
        };
        // After the loop, where its test ends a chunk: only what may run after every chunk
        // (what a `break` leads to runs once, at the nest's end).
        let mut after = HashSet::new();
        let mut stack = vec![index[&out]];
        while let Some(b) = stack.pop() {
            if !reach[b] || in_loop.contains(&b) || !after.insert(b) {
                continue;
            }
            stack.extend(cfg.successors[b].iter().copied());
        }
        for &b in &after {
            for inst in ir::instructions(cfg.blocks[b]) {
                let harmless = ir::opcode(inst) == LLVMOpcode::LLVMBr
                    || ir::opcode(inst) == LLVMOpcode::LLVMUnreachable
                    || is_marker_call(inst)
                    || (!LLVMIsAStoreInst(inst).is_null()
                        && !LLVMIsAAllocaInst(LLVMGetOperand(inst, 1)).is_null()
                        && !LLVMIsAConstant(LLVMGetOperand(inst, 0)).is_null());
                if !harmless {
                    return bad(&format!(
                        "{label}: the code after its loop ({}) would run after every chunk: \
                         move it after the switch",
                        place(inst)
                    ));
                }
            }
        }
        // Every way out of the case is the switch's end (or a dead end).
        for &b in &blocks {
            let term = LLVMGetBasicBlockTerminator(b);
            if matches!(
                ir::opcode(term),
                LLVMOpcode::LLVMRet | LLVMOpcode::LLVMResume
            ) {
                return bad(&format!(
                    "{label} leaves the function ({}): a version may only end with `break`",
                    place(term)
                ));
            }
        }
        versions.push(Version {
            case_value,
            name: names.get(case as usize).cloned(),
            blocks,
            header,
            compare,
            iterator,
            bound,
            init_store,
            step,
            signed,
            inclusive,
            source,
        });
    }
    if versions
        .iter()
        .any(|v| (v.step > 0) != (versions[0].step > 0))
    {
        return bad("every version's outermost loop must run the same way (up or down)");
    }
    Ok(VersionsSwitch {
        function: func,
        mark,
        switch,
        join,
        versions,
        file: super::debug_file(mark),
        line: LLVMGetDebugLocLine(mark),
    })
}

/// Whether a non-call instruction may write memory.
unsafe fn may_write(inst: LLVMValueRef) -> bool {
    matches!(
        ir::opcode(inst),
        LLVMOpcode::LLVMStore
            | LLVMOpcode::LLVMAtomicRMW
            | LLVMOpcode::LLVMAtomicCmpXchg
            | LLVMOpcode::LLVMFence
    )
}

/// The constant step of the iterator in `slot`, when loop `k` stores it once per iteration
/// (`slot = slot ± c` in its only latch, outside its inner loops) and nowhere else.
unsafe fn loop_step(
    slot: LLVMValueRef,
    cfg: &FunctionCfg,
    index: &HashMap<LLVMBasicBlockRef, usize>,
    forest: &crate::loops::LoopForest,
    k: usize,
) -> Option<i64> {
    let lp = &forest.loops[k];
    let latches: Vec<usize> = lp
        .blocks
        .iter()
        .copied()
        .filter(|&b| cfg.successors[b].contains(&lp.header))
        .collect();
    let [latch] = latches[..] else { return None };
    let mut stores = Vec::new();
    let mut using = LLVMGetFirstUse(slot);
    while !using.is_null() {
        let user = LLVMGetUser(using);
        if !LLVMIsAStoreInst(user).is_null() && LLVMGetOperand(user, 1) == slot {
            let block = index[&LLVMGetInstructionParent(user)];
            if lp.blocks.binary_search(&block).is_ok() {
                stores.push((user, block));
            }
        }
        using = LLVMGetNextUse(using);
    }
    let [(store, block)] = stores[..] else {
        return None;
    };
    if block != latch {
        return None;
    }
    let value = LLVMGetOperand(store, 0);
    let (sign, op) = match ir::opcode(value) {
        LLVMOpcode::LLVMAdd => (1, value),
        LLVMOpcode::LLVMSub => (-1, value),
        _ => return None,
    };
    let (a, b) = (LLVMGetOperand(op, 0), LLVMGetOperand(op, 1));
    let loads_slot =
        |v: LLVMValueRef| !LLVMIsALoadInst(v).is_null() && LLVMGetOperand(v, 0) == slot;
    let step = if loads_slot(a) {
        ir::constant_i64(b)?
    } else if sign == 1 && loads_slot(b) {
        ir::constant_i64(a)?
    } else {
        return None;
    };
    let step = step.checked_mul(sign)?;
    (step != 0).then_some(step)
}

/// Makes `switch` a versioned nest: its descriptor, the state, the chunk loop (module docs).
///
/// # Safety
/// `module` must hold `switch`'s function, unchanged since [`find`] analysed it.
pub unsafe fn transform(
    module: LLVMModuleRef,
    switch: VersionsSwitch,
    calls: &SelectCalls,
    strings: &mut StringPool,
) {
    let context = LLVMGetModuleContext(module);
    let i32t = LLVMInt32TypeInContext(context);
    let i64t = LLVMInt64TypeInContext(context);
    let builder = LLVMCreateBuilderInContext(context);
    let nest = emit_descriptor(module, &switch, strings);
    let func = switch.function;
    let locations = HookLocations::new(module, func);
    let debug_location = locations.for_instruction(switch.switch);

    // The state, at the top of the entry block.
    let entry = LLVMGetEntryBasicBlock(func);
    LLVMPositionBuilderBefore(builder, ir::first_instruction(entry));
    let state_type = LLVMArrayType2(i64t, (STATE_SIZE / 8) as u64);
    let state = LLVMBuildAlloca(builder, state_type, c"kage.select.state".as_ptr());
    LLVMSetAlignment(state, 8);
    let field = |builder: LLVMBuilderRef, k: usize| {
        ir::byte_gep(
            builder,
            state,
            LLVMConstInt(i64t, STATE_FIELDS[k] as u64, 0),
        )
    };
    const SPAN: usize = 0;
    const LO: usize = 1;
    const HI: usize = 2;
    const AT: usize = 3;
    const BOUND: usize = 4;
    const INIT: usize = 5;
    const VERSION: usize = 6;
    const MORE: usize = 7;
    const RESUME: usize = 8;
    let load = |builder: LLVMBuilderRef, ty: LLVMTypeRef, k: usize| {
        LLVMBuildLoad2(builder, ty, field(builder, k), c"".as_ptr())
    };
    let store = |builder: LLVMBuilderRef, value: LLVMValueRef, k: usize| {
        LLVMBuildStore(builder, value, field(builder, k));
    };

    // S: enter, then the dispatch.
    let dispatch = LLVMAppendBasicBlockInContext(context, func, c"kage.select.dispatch".as_ptr());
    let rejoin = LLVMAppendBasicBlockInContext(context, func, c"kage.select.chunk_end".as_ptr());
    let next = LLVMAppendBasicBlockInContext(context, func, c"kage.select.next".as_ptr());
    let done = LLVMAppendBasicBlockInContext(context, func, c"kage.select.done".as_ptr());
    LLVMPositionBuilderBefore(builder, switch.switch);
    LLVMSetCurrentDebugLocation2(builder, debug_location);
    calls.enter.call(builder, &mut [nest, state]);
    LLVMBuildBr(builder, dispatch);
    LLVMPositionBuilderAtEnd(builder, dispatch);
    let version = load(builder, i32t, VERSION);
    store(builder, LLVMConstInt(i32t, 0, 0), MORE);
    let dispatch_switch =
        LLVMBuildSwitch(builder, version, switch.join, switch.versions.len() as u32);
    for i in 0..switch.versions.len() {
        let case_entry = LLVMGetSuccessor(switch.switch, i as u32 + 1);
        LLVMAddCase(dispatch_switch, LLVMConstInt(i32t, i as u64, 0), case_entry);
    }
    LLVMInstructionEraseFromParent(switch.switch);
    LLVMInstructionEraseFromParent(switch.mark);

    // J': another chunk, or the end.
    LLVMPositionBuilderAtEnd(builder, rejoin);
    let more = load(builder, i32t, MORE);
    let more = LLVMBuildICmp(
        builder,
        LLVMIntPredicate::LLVMIntNE,
        more,
        LLVMConstInt(i32t, 0, 0),
        c"".as_ptr(),
    );
    LLVMBuildCondBr(builder, more, next, done);
    LLVMPositionBuilderAtEnd(builder, next);
    calls.next.call(builder, &mut [nest, state]);
    LLVMBuildBr(builder, dispatch);
    LLVMPositionBuilderAtEnd(builder, done);
    calls.exit.call(builder, &mut [nest, state]);
    LLVMBuildBr(builder, switch.join);

    let up = switch.versions[0].step > 0;
    for v in &switch.versions {
        // The case's ways to the switch's end go through J'.
        for &b in &v.blocks {
            let term = LLVMGetBasicBlockTerminator(b);
            for s in 0..LLVMGetNumSuccessors(term) {
                if LLVMGetSuccessor(term, s) == switch.join {
                    LLVMSetSuccessor(term, s, rejoin);
                }
            }
        }
        let widen = |builder: LLVMBuilderRef, value: LLVMValueRef| {
            if LLVMGetIntTypeWidth(LLVMTypeOf(value)) == 64 {
                value
            } else if v.signed {
                LLVMBuildSExt(builder, value, i64t, c"".as_ptr())
            } else {
                LLVMBuildZExt(builder, value, i64t, c"".as_ptr())
            }
        };
        // Before the loop: where this chunk starts, and its bound.
        let iterator_type = LLVMTypeOf(LLVMGetOperand(v.init_store, 0));
        LLVMPositionBuilderBefore(builder, v.init_store);
        LLVMSetCurrentDebugLocation2(builder, locations.for_instruction(v.init_store));
        let init = LLVMGetOperand(v.init_store, 0);
        store(builder, widen(builder, init), INIT);
        let resume = load(builder, i32t, RESUME);
        let resume = LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntNE,
            resume,
            LLVMConstInt(i32t, 0, 0),
            c"".as_ptr(),
        );
        let lo = load(builder, i64t, LO);
        let lo = if LLVMGetIntTypeWidth(iterator_type) == 64 {
            lo
        } else {
            LLVMBuildTrunc(builder, lo, iterator_type, c"".as_ptr())
        };
        let start = LLVMBuildSelect(builder, resume, lo, init, c"".as_ptr());
        LLVMSetOperand(v.init_store, 0, start);
        let start = widen(builder, start);
        store(builder, start, LO);
        let span = load(builder, i64t, SPAN);
        let saturating = match (up, v.signed) {
            (true, true) => "llvm.sadd.sat.i64",
            (true, false) => "llvm.uadd.sat.i64",
            (false, true) => "llvm.ssub.sat.i64",
            (false, false) => "llvm.usub.sat.i64",
        };
        let (intrinsic, intrinsic_type) = binary_intrinsic(module, saturating, i64t);
        let mut args = [start, span];
        let hi = LLVMBuildCall2(
            builder,
            intrinsic_type,
            intrinsic,
            args.as_mut_ptr(),
            2,
            c"".as_ptr(),
        );
        store(builder, hi, HI);

        // The header: the loop goes on while its own test holds and the chunk lasts.
        let term = LLVMGetBasicBlockTerminator(v.header);
        let exit = LLVMGetSuccessor(term, 1);
        LLVMPositionBuilderBefore(builder, term);
        LLVMSetCurrentDebugLocation2(builder, locations.for_instruction(term));
        let at = widen(builder, v.iterator);
        let hi = load(builder, i64t, HI);
        use LLVMIntPredicate::*;
        let within = match (up, v.signed) {
            (true, true) => LLVMIntSLT,
            (true, false) => LLVMIntULT,
            (false, true) => LLVMIntSGT,
            (false, false) => LLVMIntUGT,
        };
        let within = LLVMBuildICmp(builder, within, at, hi, c"".as_ptr());
        let go = LLVMBuildAnd(builder, v.compare, within, c"".as_ptr());
        LLVMSetCondition(term, go);
        let stopped = LLVMAppendBasicBlockInContext(context, func, c"kage.select.stopped".as_ptr());
        LLVMSetSuccessor(term, 1, stopped);
        LLVMPositionBuilderAtEnd(builder, stopped);
        store(builder, at, AT);
        store(builder, widen(builder, v.bound), BOUND);
        store(
            builder,
            LLVMBuildZExt(builder, v.compare, i32t, c"".as_ptr()),
            MORE,
        );
        LLVMBuildBr(builder, exit);
    }
    LLVMDisposeBuilder(builder);
}

/// `name` (a two-operand integer intrinsic on `ty`), declared when missing, and its type.
unsafe fn binary_intrinsic(
    module: LLVMModuleRef,
    name: &str,
    ty: LLVMTypeRef,
) -> (LLVMValueRef, LLVMTypeRef) {
    let mut params = [ty, ty];
    let function_type = LLVMFunctionType(ty, params.as_mut_ptr(), 2, 0);
    let c_name = ir::c_string(name);
    let existing = LLVMGetNamedFunction(module, c_name.as_ptr());
    let f = if existing.is_null() {
        LLVMAddFunction(module, c_name.as_ptr(), function_type)
    } else {
        existing
    };
    (f, function_type)
}

/// Emits the switch's `struct kage_versioned_nest` and its versions.
unsafe fn emit_descriptor(
    module: LLVMModuleRef,
    switch: &VersionsSwitch,
    strings: &mut StringPool,
) -> LLVMValueRef {
    let context = LLVMGetModuleContext(module);
    let i32t = LLVMInt32TypeInContext(context);
    let i64t = LLVMInt64TypeInContext(context);
    let ptr = LLVMPointerTypeInContext(context, 0);
    let c32 = |v: u32| LLVMConstInt(i32t, v as u64, 0);
    let c64 = |v: i64| LLVMConstInt(i64t, v as u64, 1);
    let mut version_fields = [i64t, i64t, i32t, i32t, i32t, i32t, ptr];
    let version_type = LLVMStructTypeInContext(context, version_fields.as_mut_ptr(), 7, 0);
    let values = (switch.versions.iter())
        .map(|v| {
            let flags = if v.signed { SIGNED } else { 0 } | if v.inclusive { INCLUSIVE } else { 0 };
            let mut fields = [
                c64(v.case_value),
                c64(v.step),
                c32(v.source.first_line),
                c32(v.source.last_line),
                c32(flags),
                c32(0),
                match &v.name {
                    Some(name) => strings.get(name),
                    None => LLVMConstNull(ptr),
                },
            ];
            LLVMConstNamedStruct(version_type, fields.as_mut_ptr(), 7)
        })
        .collect();
    let versions = super::constant_array(module, version_type, values, "__kage_select_versions");
    let file = if switch.versions[0].source.file.is_empty() {
        switch.file.clone()
    } else {
        switch.versions[0].source.file.clone()
    };
    let mut nest_fields = [i32t, i32t, ptr, ptr, ptr, i32t, i32t];
    let nest_type = LLVMStructTypeInContext(context, nest_fields.as_mut_ptr(), 7, 0);
    let mut fields = [
        c32(NONE),
        c32(switch.versions.len() as u32),
        versions,
        strings.get(&super::function_name(switch.function)),
        strings.get(&file),
        c32(switch.line),
        c32(0),
    ];
    let init = LLVMConstNamedStruct(nest_type, fields.as_mut_ptr(), 7);
    let global = LLVMAddGlobal(module, nest_type, c"__kage_select_nest".as_ptr());
    LLVMSetInitializer(global, init);
    LLVMSetLinkage(global, LLVMLinkage::LLVMPrivateLinkage);
    LLVMSetAlignment(global, 8);
    global
}
