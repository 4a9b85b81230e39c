//! What each scalar variable of a selected nest is to each of its loop levels, decided from
//! the IR as clang wrote it (`KAGE_TOOL=dependences`, `interpolate`): the loop's iterator,
//! a private temporary, a reduction, a linear variable, or a value carried from one
//! iteration to the next.
//!
//! Scalars are the stack slots whose address does not escape and that hold no aggregate:
//! the optimiser keeps them in registers, so the instrumented version does not report their
//! loads and stores (`accesses.rs`), and their dependences are decided here instead, exactly,
//! per level `L`, from the slot's loads and stores inside `L`:
//! - none stored: read-only, nothing to say;
//! - one store per iteration of `x ± c` (or a pointer `x + c`): `L`'s iterator when `L`'s
//!   header reads it, a linear variable otherwise;
//! - every load feeding one `x = x op e` with the same associative `op`: a reduction;
//! - every load preceded in its iteration by a store on every path: private (lastprivate
//!   when a load after the loop can read the last value);
//! - otherwise an iteration can read what the previous one wrote: carried.

use std::collections::{HashMap, HashSet};

use kage_abi::loops::ScalarKind;
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMOpcode;

use super::accesses;
use super::version::Level;
use crate::ir;

/// A scalar and what it is to one level.
#[derive(Debug, Clone, PartialEq)]
pub struct NestScalar {
    pub level: usize,
    pub kind: ScalarKind,
    pub line: u32,
    /// A reduction's operator.
    pub operator: Option<char>,
    /// An induction's or linear variable's step (bytes for a pointer).
    pub step: i64,
    pub name: Option<String>,
}

/// The scalars each level of the prepared nest writes, level by level.
///
/// # Safety
/// `func` is a valid function and `levels` its prepared nest.
pub unsafe fn classify(func: LLVMValueRef, levels: &[Level]) -> Vec<NestScalar> {
    let slots = scalar_slots(func);
    let mut out = Vec::new();
    for (k, level) in levels.iter().enumerate() {
        for &slot in &slots {
            if let Some(scalar) = classify_in(func, slot, k, level) {
                out.push(scalar);
            }
        }
        out.extend(opaque_calls(k, level));
        out.extend(local_arrays_written(&slots, k, level));
    }
    out
}

/// The stack slots that are not scalars, whose address never escapes (so their accesses
/// are not reported) and that the level writes: one entry each.
unsafe fn local_arrays_written(
    scalars: &[LLVMValueRef],
    k: usize,
    level: &Level,
) -> Vec<NestScalar> {
    let mut out: Vec<NestScalar> = Vec::new();
    let mut done = HashSet::new();
    let func = LLVMGetBasicBlockParent(level.header);
    let mut b = LLVMGetFirstBasicBlock(func);
    while !b.is_null() {
        if level.blocks.contains(&b) {
            for inst in ir::instructions(b) {
                if ir::opcode(inst) != LLVMOpcode::LLVMStore {
                    continue;
                }
                let slot = accesses::underlying_object(LLVMGetOperand(inst, 1));
                if LLVMIsAAllocaInst(slot).is_null()
                    || scalars.contains(&slot)
                    || !accesses::is_unescaped_slot(slot)
                    || !done.insert(slot)
                {
                    continue;
                }
                out.push(NestScalar {
                    level: k,
                    kind: ScalarKind::LocalArray,
                    line: accesses::source_position(inst).0,
                    operator: None,
                    step: 0,
                    name: accesses::variable_name(slot),
                });
            }
        }
        b = LLVMGetNextBasicBlock(b);
    }
    out
}

/// C library functions that touch no memory but `errno`: their calls hide no access.
const PURE_LIBRARY: &[&str] = &[
    "sqrt",
    "cbrt",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "pow",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "fabs",
    "floor",
    "ceil",
    "round",
    "trunc",
    "fmod",
    "hypot",
    "fmin",
    "fmax",
    "erf",
    "erfc",
    "abs",
    "labs",
    "llabs",
    "rint",
    "nearbyint",
    "lround",
    "copysign",
];

/// The calls in the level (its inner levels included) whose memory accesses the
/// instrumented version does not see: not an intrinsic, not a pure C library function,
/// not `memory(none)` (or touching only memory the program cannot name). One per callee.
unsafe fn opaque_calls(k: usize, level: &Level) -> Vec<NestScalar> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let func = LLVMGetBasicBlockParent(level.header);
    let mut b = LLVMGetFirstBasicBlock(func);
    while !b.is_null() {
        if level.blocks.contains(&b) {
            for inst in ir::instructions(b) {
                if !matches!(
                    ir::opcode(inst),
                    LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke | LLVMOpcode::LLVMCallBr
                ) {
                    continue;
                }
                let callee = ir::direct_callee(inst);
                let name = callee.map(|f| ir::value_name(f));
                if let (Some(f), Some(name)) = (callee, &name) {
                    let intrinsic = name.starts_with("llvm.")
                        && !name.starts_with("llvm.memcpy")
                        && !name.starts_with("llvm.memmove")
                        && !name.starts_with("llvm.memset");
                    let base = name.trim_end_matches(['f', 'l']);
                    let pure =
                        PURE_LIBRARY.contains(&name.as_str()) || PURE_LIBRARY.contains(&base);
                    if intrinsic || pure || touches_no_named_memory(f) {
                        continue;
                    }
                }
                let shown = name.map(|n| crate::debuginfo::display_name(&n));
                if seen.insert(shown.clone()) {
                    out.push(NestScalar {
                        level: k,
                        kind: ScalarKind::Call,
                        line: accesses::source_position(inst).0,
                        operator: None,
                        step: 0,
                        name: shown,
                    });
                }
            }
        }
        b = LLVMGetNextBasicBlock(b);
    }
    out
}

/// Whether a function's `memory` attribute lets it read or write neither its arguments'
/// memory nor any other the program can name (only errno, inaccessible or target memory).
unsafe fn touches_no_named_memory(f: LLVMValueRef) -> bool {
    let kind = LLVMGetEnumAttributeKindForName(c"memory".as_ptr(), 6);
    let attribute = LLVMGetEnumAttributeAtIndex(f, llvm_sys::LLVMAttributeFunctionIndex, kind);
    if attribute.is_null() {
        return false;
    }
    // Two bits (ref, mod) per location: argument memory is location 0, other memory 3.
    let effects = LLVMGetEnumAttributeValue(attribute);
    effects & 0b11 == 0 && (effects >> 6) & 0b11 == 0
}

extern "C" {
    /// Whether a stack slot is a local of an inlined callee (src/shim.cpp).
    fn kage_slot_of_inlined_callee(slot: LLVMValueRef) -> bool;
}

/// The function's scalar stack slots, in order: slots that hold one value (a struct of one
/// scalar field, such as a C++ iterator, counts), only loaded and stored.
unsafe fn scalar_slots(func: LLVMValueRef) -> Vec<LLVMValueRef> {
    let entry = LLVMGetEntryBasicBlock(func);
    (ir::instructions(entry).into_iter())
        .filter(|&inst| !LLVMIsAAllocaInst(inst).is_null())
        .filter(|&slot| holds_one_value(LLVMGetAllocatedType(slot)) && direct_uses_only(slot))
        .collect()
}

unsafe fn holds_one_value(ty: LLVMTypeRef) -> bool {
    use llvm_sys::LLVMTypeKind::*;
    match LLVMGetTypeKind(ty) {
        LLVMArrayTypeKind | LLVMScalableVectorTypeKind => false,
        LLVMStructTypeKind => {
            LLVMCountStructElementTypes(ty) == 1 && holds_one_value(LLVMStructGetTypeAtIndex(ty, 0))
        }
        _ => true,
    }
}

/// Whether `pointer` is `slot`'s address: the slot itself, or a GEP of it whose indices are
/// all zero (its first field).
unsafe fn is_slot(pointer: LLVMValueRef, slot: LLVMValueRef) -> bool {
    if pointer == slot {
        return true;
    }
    !LLVMIsAGetElementPtrInst(pointer).is_null()
        && (1..LLVMGetNumOperands(pointer) as u32)
            .all(|i| ir::constant_i64(LLVMGetOperand(pointer, i)) == Some(0))
        && is_slot(LLVMGetOperand(pointer, 0), slot)
}

/// The loads and stores of the slot (through its first-field GEPs), and whether it has no
/// other use but lifetime markers.
unsafe fn slot_accesses(slot: LLVMValueRef) -> Option<Vec<LLVMValueRef>> {
    let mut out = Vec::new();
    let mut work = vec![slot];
    while let Some(pointer) = work.pop() {
        let mut usage = LLVMGetFirstUse(pointer);
        while !usage.is_null() {
            let user = LLVMGetUser(usage);
            usage = LLVMGetNextUse(usage);
            if LLVMIsAInstruction(user).is_null() {
                return None;
            }
            match ir::opcode(user) {
                LLVMOpcode::LLVMLoad => out.push(user),
                LLVMOpcode::LLVMStore if LLVMGetOperand(user, 0) != pointer => out.push(user),
                LLVMOpcode::LLVMGetElementPtr if is_slot(user, slot) => work.push(user),
                LLVMOpcode::LLVMCall
                    if ir::direct_callee(user)
                        .is_some_and(|f| ir::value_name(f).starts_with("llvm.lifetime.")) => {}
                _ => return None,
            }
        }
    }
    Some(out)
}

/// Whether the slot is only loaded from and stored to (as the address), or marked.
unsafe fn direct_uses_only(slot: LLVMValueRef) -> bool {
    slot_accesses(slot).is_some()
}

/// The loads and stores of `slot` in `blocks`.
unsafe fn uses_in(
    slot: LLVMValueRef,
    blocks: &HashSet<LLVMBasicBlockRef>,
) -> (Vec<LLVMValueRef>, Vec<LLVMValueRef>) {
    let (mut loads, mut stores) = (Vec::new(), Vec::new());
    for access in slot_accesses(slot).unwrap_or_default() {
        if !blocks.contains(&LLVMGetInstructionParent(access)) {
            continue;
        }
        match ir::opcode(access) {
            LLVMOpcode::LLVMLoad => loads.push(access),
            _ => stores.push(access),
        }
    }
    (loads, stores)
}

unsafe fn classify_in(
    func: LLVMValueRef,
    slot: LLVMValueRef,
    k: usize,
    level: &Level,
) -> Option<NestScalar> {
    let (loads, stores) = uses_in(slot, &level.blocks);
    let first_store = *stores.first()?;
    let inlined = kage_slot_of_inlined_callee(slot);
    let name = accesses::variable_name(slot);
    let scalar = |kind, line, operator, step| NestScalar {
        level: k,
        kind,
        line,
        operator,
        step,
        name: name.clone(),
    };
    let store_line = accesses::source_position(first_store).0;
    if let [store] = stores[..] {
        if let Some(step) = step_of(slot, store) {
            if on_every_path(level, LLVMGetInstructionParent(store)) {
                let in_header = loads
                    .iter()
                    .any(|&l| LLVMGetInstructionParent(l) == level.header);
                let kind = if in_header {
                    ScalarKind::Induction
                } else {
                    ScalarKind::Linear
                };
                return Some(scalar(kind, store_line, None, step));
            }
        }
    }
    if let Some(operator) = reduction(slot, &loads, &stores) {
        return Some(scalar(ScalarKind::Reduction, store_line, Some(operator), 0));
    }
    if loads.is_empty() && !read_after(func, slot, level) {
        return None; // written and never read: a compiler's bookkeeping (a cleanup slot)
    }
    match first_exposed_load(slot, level) {
        None if inlined => None,
        None if read_after(func, slot, level) => {
            Some(scalar(ScalarKind::LastPrivate, store_line, None, 0))
        }
        None => Some(scalar(ScalarKind::Private, store_line, None, 0)),
        Some(load) => Some(scalar(
            ScalarKind::Carried,
            accesses::source_position(load).0,
            None,
            0,
        )),
    }
}

/// `x = x ± c` or `x = &x[c]` (a pointer stepped by `c` bytes): the step.
unsafe fn step_of(slot: LLVMValueRef, store: LLVMValueRef) -> Option<i64> {
    let value = LLVMGetOperand(store, 0);
    if LLVMIsAInstruction(value).is_null() {
        return None;
    }
    let loads_slot =
        |v: LLVMValueRef| !LLVMIsALoadInst(v).is_null() && is_slot(LLVMGetOperand(v, 0), slot);
    match ir::opcode(value) {
        LLVMOpcode::LLVMAdd | LLVMOpcode::LLVMSub => {
            let (a, b) = (LLVMGetOperand(value, 0), LLVMGetOperand(value, 1));
            let sign = if ir::opcode(value) == LLVMOpcode::LLVMSub {
                -1
            } else {
                1
            };
            if loads_slot(a) {
                ir::constant_i64(b).map(|c| sign * c)
            } else if loads_slot(b) && sign == 1 {
                ir::constant_i64(a)
            } else {
                None
            }
        }
        LLVMOpcode::LLVMGetElementPtr if loads_slot(LLVMGetOperand(value, 0)) => {
            let module =
                LLVMGetGlobalParent(LLVMGetBasicBlockParent(LLVMGetInstructionParent(store)));
            let data_layout = llvm_sys::target::LLVMGetModuleDataLayout(module);
            if LLVMGetNumOperands(value) != 2 {
                return None;
            }
            let index = ir::constant_i64(LLVMGetOperand(value, 1))?;
            let element = LLVMGetGEPSourceElementType(value);
            let size = llvm_sys::target::LLVMABISizeOfType(data_layout, element) as i64;
            Some(index * size)
        }
        _ => None,
    }
}

/// Whether every path from the level's header back to it passes through `block`.
unsafe fn on_every_path(level: &Level, block: LLVMBasicBlockRef) -> bool {
    if block == level.header {
        return true;
    }
    let mut seen = HashSet::from([level.header]);
    let mut work = vec![level.header];
    while let Some(b) = work.pop() {
        let term = LLVMGetBasicBlockTerminator(b);
        for i in 0..LLVMGetNumSuccessors(term) {
            let s = LLVMGetSuccessor(term, i);
            if s == level.header && b != block {
                return false; // back at the header without passing `block`
            }
            if s != block && level.blocks.contains(&s) && seen.insert(s) {
                work.push(s);
            }
        }
    }
    true
}

/// Every store is `x = x op e` on a load of `x` used only there, every load is one of
/// those, all with the same associative operator: that operator.
unsafe fn reduction(
    slot: LLVMValueRef,
    loads: &[LLVMValueRef],
    stores: &[LLVMValueRef],
) -> Option<char> {
    let mut operator = None;
    let mut used_loads = HashSet::new();
    for &store in stores {
        let value = LLVMGetOperand(store, 0);
        if LLVMIsAInstruction(value).is_null() {
            return None;
        }
        // `s += a * b` contracted: `fmuladd(a, b, s)`.
        if ir::opcode(value) == LLVMOpcode::LLVMCall {
            let callee = ir::direct_callee(value).map(|f| ir::value_name(f));
            let fused = callee
                .is_some_and(|n| n.starts_with("llvm.fmuladd.") || n.starts_with("llvm.fma."));
            // Operands: a, b, the accumulator, the callee.
            if !fused || LLVMGetNumOperands(value) != 4 || operator.is_some_and(|o| o != '+') {
                return None;
            }
            let own = LLVMGetOperand(value, 2);
            let is_own = !LLVMIsALoadInst(own).is_null()
                && is_slot(LLVMGetOperand(own, 0), slot)
                && single_use(own);
            if !is_own {
                return None;
            }
            operator = Some('+');
            used_loads.insert(own);
            continue;
        }
        let this = match ir::opcode(value) {
            LLVMOpcode::LLVMAdd | LLVMOpcode::LLVMFAdd => '+',
            LLVMOpcode::LLVMSub | LLVMOpcode::LLVMFSub => '-',
            LLVMOpcode::LLVMMul | LLVMOpcode::LLVMFMul => '*',
            LLVMOpcode::LLVMAnd => '&',
            LLVMOpcode::LLVMOr => '|',
            LLVMOpcode::LLVMXor => '^',
            _ => return None,
        };
        let is_own_load = |v: LLVMValueRef| {
            !LLVMIsALoadInst(v).is_null() && is_slot(LLVMGetOperand(v, 0), slot) && single_use(v)
        };
        let (a, b) = (LLVMGetOperand(value, 0), LLVMGetOperand(value, 1));
        // `x - e` accumulates like `x + (-e)`; `e - x` does not.
        let own = if is_own_load(a) {
            a
        } else if this != '-' && is_own_load(b) {
            b
        } else {
            return None;
        };
        let this = if this == '-' { '+' } else { this };
        if operator.is_some_and(|o| o != this) {
            return None;
        }
        operator = Some(this);
        used_loads.insert(own);
    }
    (loads.iter().all(|l| used_loads.contains(l))).then_some(operator?)
}

unsafe fn single_use(value: LLVMValueRef) -> bool {
    let first = LLVMGetFirstUse(value);
    !first.is_null() && LLVMGetNextUse(first).is_null()
}

/// A load of `slot` in the level that some path from the level's header reaches before any
/// store to it in the same iteration (a must-be-written analysis over the iteration's
/// blocks: edges back to the header are not followed).
unsafe fn first_exposed_load(slot: LLVMValueRef, level: &Level) -> Option<LLVMValueRef> {
    let blocks: Vec<LLVMBasicBlockRef> = level.blocks.iter().copied().collect();
    let mut preds: HashMap<LLVMBasicBlockRef, Vec<LLVMBasicBlockRef>> = HashMap::new();
    for &b in &blocks {
        let term = LLVMGetBasicBlockTerminator(b);
        for i in 0..LLVMGetNumSuccessors(term) {
            let s = LLVMGetSuccessor(term, i);
            if s != level.header && level.blocks.contains(&s) {
                preds.entry(s).or_default().push(b);
            }
        }
    }
    let stores_in = |b: LLVMBasicBlockRef| {
        ir::instructions(b)
            .into_iter()
            .any(|i| ir::opcode(i) == LLVMOpcode::LLVMStore && is_slot(LLVMGetOperand(i, 1), slot))
    };
    // Written on every path to the block's end; optimistic start, then down to a fixpoint.
    let mut written_out: HashMap<LLVMBasicBlockRef, bool> =
        blocks.iter().map(|&b| (b, true)).collect();
    let written_in = |b: LLVMBasicBlockRef, out: &HashMap<LLVMBasicBlockRef, bool>| {
        b != level.header && preds.get(&b).is_some_and(|ps| ps.iter().all(|p| out[p]))
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in &blocks {
            let value = written_in(b, &written_out) || stores_in(b);
            if written_out[&b] != value {
                written_out.insert(b, value);
                changed = true;
            }
        }
    }
    // Layout order, so the first exposed load is the source's first.
    let func = LLVMGetBasicBlockParent(level.header);
    let mut b = LLVMGetFirstBasicBlock(func);
    while !b.is_null() {
        if level.blocks.contains(&b) {
            let mut written = written_in(b, &written_out);
            for inst in ir::instructions(b) {
                match ir::opcode(inst) {
                    LLVMOpcode::LLVMStore if is_slot(LLVMGetOperand(inst, 1), slot) => {
                        written = true
                    }
                    LLVMOpcode::LLVMLoad if is_slot(LLVMGetOperand(inst, 0), slot) && !written => {
                        return Some(inst)
                    }
                    _ => {}
                }
            }
        }
        b = LLVMGetNextBasicBlock(b);
    }
    None
}

/// Whether a load of `slot` after the level (reached from its exits before a store) can
/// read the value its last iteration left.
unsafe fn read_after(_func: LLVMValueRef, slot: LLVMValueRef, level: &Level) -> bool {
    let mut work = Vec::new();
    for &b in &level.blocks {
        let term = LLVMGetBasicBlockTerminator(b);
        for i in 0..LLVMGetNumSuccessors(term) {
            let s = LLVMGetSuccessor(term, i);
            if !level.blocks.contains(&s) {
                work.push(s);
            }
        }
    }
    let mut seen: HashSet<LLVMBasicBlockRef> = work.iter().copied().collect();
    'blocks: while let Some(b) = work.pop() {
        for inst in ir::instructions(b) {
            match ir::opcode(inst) {
                LLVMOpcode::LLVMLoad if is_slot(LLVMGetOperand(inst, 0), slot) => return true,
                LLVMOpcode::LLVMStore if is_slot(LLVMGetOperand(inst, 1), slot) => continue 'blocks,
                _ => {}
            }
        }
        let term = LLVMGetBasicBlockTerminator(b);
        for i in 0..LLVMGetNumSuccessors(term) {
            let s = LLVMGetSuccessor(term, i);
            if seen.insert(s) {
                work.push(s);
            }
        }
    }
    false
}
