//! The memory instructions of a selected nest that the instrumented version reports
//! (`KAGE_TOOL=interpolate`, `dependences`; docs/abi.md "Loop nests"), and the calls that
//! report them.
//!
//! The nest is seen as clang wrote it (the start of the pipeline): local variables still
//! live in stack slots. A slot whose address never escapes is the optimiser's to keep in
//! registers, so its loads and stores are not memory the program touches once optimised,
//! and reporting them would make the slot escape and stay in memory in both versions: they
//! are left out. Its scalars are classified statically instead ([`super::scalars`]); its
//! arrays, if any, are named in the build's output as left out.

use std::collections::{HashMap, HashSet};

use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::target::{LLVMGetModuleDataLayout, LLVMStoreSizeOfType};
use llvm_sys::LLVMOpcode;

use super::version::Level;
use crate::debuginfo::{self, HookLocations};
use crate::ir::{self, RuntimeFunction};

extern "C" {
    /// The source name of the variable a stack slot or a global holds (src/shim.cpp).
    fn kage_variable_name(value: LLVMValueRef, len: *mut usize) -> *const std::ffi::c_char;
    /// Inlines a direct call (src/shim.cpp).
    fn kage_inline_call(call: LLVMValueRef) -> bool;
    /// Promotes the slots of inlined callees' locals to SSA values (src/shim.cpp).
    fn kage_promote_inlined_slots(func: LLVMValueRef);
}

/// Callees of at most this many instructions are inlined into a nest before it is
/// analysed (accessors such as C++'s `vector::operator[]` and `size()`).
const SMALL_CALLEE: usize = 64;
/// Rounds of inlining: a callee's own small callees are inlined too, this deep.
const INLINE_ROUNDS: usize = 3;

/// Inlines the small callees of the nest headed by `header`, so that their accesses are the
/// nest's own and can be analysed (the optimiser would inline them anyway; at -O0 this
/// changes which code runs, never what it computes). A callee is small when it has a body
/// of at most [`SMALL_CALLEE`] instructions and no loop, is not the function itself, and is
/// not `noinline` by the program's wish (at -O0 every function is `noinline optnone`: those
/// are inlined, into an `optnone` function that stays unoptimised).
///
/// # Safety
/// `func` is a valid function with a body and `header` one of its loop headers.
pub unsafe fn inline_small_callees(func: LLVMValueRef, header: LLVMBasicBlockRef) {
    for _ in 0..INLINE_ROUNDS {
        let Some(levels) = super::version::levels(func, header) else {
            return;
        };
        let mut calls = Vec::new();
        for &b in &levels[0].blocks {
            for inst in ir::instructions(b) {
                if ir::opcode(inst) != LLVMOpcode::LLVMCall {
                    continue;
                }
                if let Some(callee) = ir::direct_callee(inst) {
                    if callee != func && is_small(callee) {
                        calls.push(inst);
                    }
                }
            }
        }
        if calls.is_empty() {
            break;
        }
        for call in calls {
            kage_inline_call(call);
        }
    }
    kage_promote_inlined_slots(func);
}

unsafe fn is_small(callee: LLVMValueRef) -> bool {
    if LLVMCountBasicBlocks(callee) == 0
        || LLVMIsFunctionVarArg(LLVMGlobalGetValueType(callee)) != 0
    {
        return false;
    }
    let has = |attribute: &str| ir::has_function_attribute(callee, attribute);
    // At -O0 clang marks every function `optnone noinline`; `noinline` alone is the
    // program's own wish.
    if has("noinline") && !has("optnone") {
        return false;
    }
    // A callee's loop would be a new level of the nest.
    let cfg = ir::FunctionCfg::new(callee);
    if !crate::loops::find_loops(&cfg.successors, 0)
        .loops
        .is_empty()
    {
        return false;
    }
    let mut count = 0;
    let mut b = LLVMGetFirstBasicBlock(callee);
    while !b.is_null() {
        count += ir::instructions(b).len();
        if count > SMALL_CALLEE {
            return false;
        }
        b = LLVMGetNextBasicBlock(b);
    }
    true
}

/// Where an instruction is in the nest's own source: the line and column of the outermost
/// call when it was inlined (`v[i]` rather than the line of `operator[]`).
///
/// # Safety
/// `inst` is a valid instruction.
pub unsafe fn source_position(inst: LLVMValueRef) -> (u32, u32) {
    use llvm_sys::debuginfo::{
        LLVMDILocationGetColumn, LLVMDILocationGetInlinedAt, LLVMDILocationGetLine,
        LLVMInstructionGetDebugLoc,
    };
    let mut location = LLVMInstructionGetDebugLoc(inst);
    if location.is_null() {
        return (0, 0);
    }
    loop {
        let outer = LLVMDILocationGetInlinedAt(location);
        if outer.is_null() {
            return (
                LLVMDILocationGetLine(location),
                LLVMDILocationGetColumn(location),
            );
        }
        location = outer;
    }
}

/// One reported memory instruction.
#[derive(Debug, Clone)]
pub struct NestAccess {
    pub instruction: LLVMValueRef,
    /// The innermost level around it.
    pub level: usize,
    pub writes: bool,
    pub size: u32,
    pub line: u32,
    pub column: u32,
    pub name: Option<String>,
}

/// The nest's memory instructions in layout order (`blocks` in function order), but those
/// on stack slots that do not escape.
///
/// # Safety
/// `func` is a valid function and `levels` its prepared nest.
pub unsafe fn memory_accesses(func: LLVMValueRef, levels: &[Level]) -> Vec<NestAccess> {
    let module = LLVMGetGlobalParent(func);
    let data_layout = LLVMGetModuleDataLayout(module);
    let depth = depths(levels);
    let mut local = HashMap::new();
    let mut out = Vec::new();
    let mut block = LLVMGetFirstBasicBlock(func);
    while !block.is_null() {
        let level = (0..levels.len())
            .filter(|&k| levels[k].blocks.contains(&block))
            .max_by_key(|&k| depth[k]);
        if let Some(level) = level {
            for inst in ir::instructions(block) {
                let (pointer, writes, ty) = match ir::opcode(inst) {
                    LLVMOpcode::LLVMLoad => (LLVMGetOperand(inst, 0), false, LLVMTypeOf(inst)),
                    LLVMOpcode::LLVMStore => (
                        LLVMGetOperand(inst, 1),
                        true,
                        LLVMTypeOf(LLVMGetOperand(inst, 0)),
                    ),
                    LLVMOpcode::LLVMAtomicRMW => (
                        LLVMGetOperand(inst, 0),
                        true,
                        LLVMTypeOf(LLVMGetOperand(inst, 1)),
                    ),
                    LLVMOpcode::LLVMAtomicCmpXchg => (
                        LLVMGetOperand(inst, 0),
                        true,
                        LLVMTypeOf(LLVMGetOperand(inst, 1)),
                    ),
                    _ => continue,
                };
                let object = underlying_object(pointer);
                let is_local = *local
                    .entry(object)
                    .or_insert_with(|| is_unescaped_slot(object));
                if is_local {
                    continue;
                }
                let (line, column) = source_position(inst);
                out.push(NestAccess {
                    instruction: inst,
                    level,
                    writes,
                    size: LLVMStoreSizeOfType(data_layout, ty) as u32,
                    line,
                    column,
                    name: variable_behind(pointer),
                });
            }
        }
        block = LLVMGetNextBasicBlock(block);
    }
    out
}

/// Each level's depth (0 for the root).
pub fn depths(levels: &[Level]) -> Vec<u32> {
    let mut depth = vec![0u32; levels.len()];
    for k in 0..levels.len() {
        if let Some(p) = levels[k].parent {
            depth[k] = depth[p] + 1;
        }
    }
    depth
}

/// Reports each access of the instrumented version: a call before its copy
/// (`copies` maps the original's instructions to the instrumented version's).
///
/// # Safety
/// The accesses come from [`memory_accesses`] on the nest `copies` was cloned from.
pub unsafe fn instrument(
    module: LLVMModuleRef,
    accesses: &[NestAccess],
    copies: &HashMap<LLVMValueRef, LLVMValueRef>,
    nest: LLVMValueRef,
    report: &RuntimeFunction,
) {
    let context = LLVMGetModuleContext(module);
    let i32t = LLVMInt32TypeInContext(context);
    let builder = LLVMCreateBuilderInContext(context);
    let mut locations = None;
    for (index, access) in accesses.iter().enumerate() {
        let Some(&copy) = copies.get(&access.instruction) else {
            continue;
        };
        let locations = locations.get_or_insert_with(|| {
            HookLocations::new(
                module,
                LLVMGetBasicBlockParent(LLVMGetInstructionParent(copy)),
            )
        });
        LLVMPositionBuilderBefore(builder, copy);
        LLVMSetCurrentDebugLocation2(builder, locations.for_instruction(copy));
        let pointer = match ir::opcode(copy) {
            LLVMOpcode::LLVMStore => LLVMGetOperand(copy, 1),
            _ => LLVMGetOperand(copy, 0),
        };
        let index = LLVMConstInt(i32t, index as u64, 0);
        report.call(builder, &mut [nest, index, pointer]);
    }
    LLVMDisposeBuilder(builder);
}

/// The object a pointer points into: through GEPs and casts.
///
/// # Safety
/// `pointer` is a valid value.
pub unsafe fn underlying_object(mut pointer: LLVMValueRef) -> LLVMValueRef {
    loop {
        let offsets_or_casts = !LLVMIsAGetElementPtrInst(pointer).is_null()
            || !LLVMIsABitCastInst(pointer).is_null()
            || !LLVMIsAAddrSpaceCastInst(pointer).is_null()
            || (!LLVMIsAConstantExpr(pointer).is_null()
                && matches!(
                    LLVMGetConstOpcode(pointer),
                    LLVMOpcode::LLVMGetElementPtr | LLVMOpcode::LLVMBitCast
                ));
        if !offsets_or_casts {
            return pointer;
        }
        pointer = LLVMGetOperand(pointer, 0);
    }
}

/// Whether `object` is a stack slot whose address is only loaded from, stored to and
/// offset (GEPs whose uses are the same), never passed, stored or converted.
///
/// # Safety
/// `object` is a valid value.
pub unsafe fn is_unescaped_slot(object: LLVMValueRef) -> bool {
    if LLVMIsAAllocaInst(object).is_null() {
        return false;
    }
    let mut seen = HashSet::new();
    let mut work = vec![object];
    while let Some(pointer) = work.pop() {
        if !seen.insert(pointer) {
            continue;
        }
        let mut usage = LLVMGetFirstUse(pointer);
        while !usage.is_null() {
            let user = LLVMGetUser(usage);
            usage = LLVMGetNextUse(usage);
            if LLVMIsAInstruction(user).is_null() {
                return false;
            }
            match ir::opcode(user) {
                LLVMOpcode::LLVMLoad => {}
                // As the address, not the value stored.
                LLVMOpcode::LLVMStore if LLVMGetOperand(user, 0) != pointer => {}
                LLVMOpcode::LLVMGetElementPtr | LLVMOpcode::LLVMBitCast => work.push(user),
                LLVMOpcode::LLVMCall if is_marker_call(user) => {}
                _ => return false,
            }
        }
    }
    true
}

/// Lifetime markers, debug intrinsics and memory intrinsics (which SROA splits like loads
/// and stores): they do not make a slot escape.
unsafe fn is_marker_call(call: LLVMValueRef) -> bool {
    let Some(callee) = ir::direct_callee(call) else {
        return false;
    };
    let name = ir::value_name(callee);
    [
        "llvm.lifetime.",
        "llvm.dbg.",
        "llvm.memcpy.",
        "llvm.memset.",
        "llvm.memmove.",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// The variable whose memory `pointer` reaches: a global, a local array, or the memory a
/// local pointer variable points to (`p[i]`: `p`), through a few loads (`v[i]` of a C++
/// vector `v`: its data pointer is loaded from the object).
///
/// # Safety
/// `pointer` is a valid value.
pub unsafe fn variable_behind(pointer: LLVMValueRef) -> Option<String> {
    let object = underlying_object(pointer);
    if !LLVMIsAGlobalVariable(object).is_null() {
        return variable_name(object).or_else(|| {
            let symbol = ir::value_name(object);
            (!symbol.is_empty()).then(|| debuginfo::display_name(&symbol))
        });
    }
    if !LLVMIsAAllocaInst(object).is_null() {
        return variable_name(object);
    }
    // Through pointers loaded from memory: `p[i]` (p's slot), `v[i]` of a C++ vector (the
    // data pointer loaded from the object v refers to).
    let mut object = object;
    for _ in 0..4 {
        if LLVMIsALoadInst(object).is_null() {
            break;
        }
        object = underlying_object(LLVMGetOperand(object, 0));
        if !LLVMIsAAllocaInst(object).is_null() || !LLVMIsAGlobalVariable(object).is_null() {
            if let Some(name) = variable_name(object) {
                return Some(name);
            }
        }
    }
    None
}

/// A slot's or a global's source name, from debug information.
///
/// # Safety
/// `value` is a valid value.
pub unsafe fn variable_name(value: LLVMValueRef) -> Option<String> {
    let mut len = 0usize;
    let name = kage_variable_name(value, &mut len);
    (!name.is_null()).then(|| ir::lossy_string(name, len))
}
