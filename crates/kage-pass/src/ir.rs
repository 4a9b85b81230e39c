//! Thin helpers over the LLVM C API used by the rest of the pass.

use std::collections::HashMap;
use std::ffi::{c_char, CString};

use kage_abi::{CType, CallingConvention, Symbol};
use llvm_sys::core::*;
use llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMContextRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::{LLVMAttributeFunctionIndex, LLVMCallConv, LLVMOpcode};

/// Copies `len` bytes at `ptr` into a `String` (invalid UTF-8 replaced); "" for null.
///
/// # Safety
/// `ptr` must be null or point to `len` readable bytes.
pub unsafe fn lossy_string(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() {
        return String::new();
    }
    String::from_utf8_lossy(std::slice::from_raw_parts(ptr as *const u8, len)).into_owned()
}

/// A NUL-terminated copy of `s` for C APIs; interior NULs (never in LLVM names) are dropped.
pub fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// The value's name ("" when unnamed).
///
/// # Safety
/// `value` must be a valid value.
pub unsafe fn value_name(value: LLVMValueRef) -> String {
    let mut len = 0usize;
    let ptr = LLVMGetValueName2(value, &mut len);
    lossy_string(ptr, len)
}

/// # Safety
/// `block` must be a valid basic block.
pub unsafe fn first_instruction(block: LLVMBasicBlockRef) -> LLVMValueRef {
    LLVMGetFirstInstruction(block)
}

/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn next_instruction(inst: LLVMValueRef) -> LLVMValueRef {
    LLVMGetNextInstruction(inst)
}

/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn parent_block(inst: LLVMValueRef) -> LLVMBasicBlockRef {
    LLVMGetInstructionParent(inst)
}

/// The instructions of `block`, in order.
///
/// # Safety
/// `block` must be a valid basic block, not mutated while the result is used.
pub unsafe fn instructions(block: LLVMBasicBlockRef) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    let mut cursor = LLVMGetFirstInstruction(block);
    while !cursor.is_null() {
        out.push(cursor);
        cursor = LLVMGetNextInstruction(cursor);
    }
    out
}

/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn opcode(inst: LLVMValueRef) -> LLVMOpcode {
    LLVMGetInstructionOpcode(inst)
}

/// A function's blocks in layout order (the entry first) and its CFG as successor lists
/// of block indices, read from each block's terminator.
pub struct FunctionCfg {
    pub blocks: Vec<LLVMBasicBlockRef>,
    pub successors: Vec<Vec<usize>>,
}

impl FunctionCfg {
    /// # Safety
    /// `func` must be a valid function with a body.
    pub unsafe fn new(func: LLVMValueRef) -> Self {
        let mut blocks = Vec::new();
        let mut block = LLVMGetFirstBasicBlock(func);
        while !block.is_null() {
            blocks.push(block);
            block = LLVMGetNextBasicBlock(block);
        }
        let index: HashMap<LLVMBasicBlockRef, usize> =
            blocks.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let successors = blocks
            .iter()
            .map(|&b| {
                let terminator = LLVMGetBasicBlockTerminator(b);
                if terminator.is_null() {
                    return Vec::new();
                }
                (0..LLVMGetNumSuccessors(terminator))
                    .filter_map(|i| index.get(&LLVMGetSuccessor(terminator, i)).copied())
                    .collect()
            })
            .collect();
        FunctionCfg { blocks, successors }
    }

    /// Each block's index in [`blocks`](Self::blocks).
    pub fn block_indices(&self) -> HashMap<LLVMBasicBlockRef, usize> {
        (self.blocks.iter())
            .enumerate()
            .map(|(i, &b)| (b, i))
            .collect()
    }
}

/// Where hooks that run "on entry to a block" go: after its PHIs and its `landingpad`.
/// `None` for blocks that begin with a Windows EH pad (`catchswitch`, `catchpad`,
/// `cleanuppad`): nothing but PHIs may precede a `catchswitch`, and calls inside funclets
/// would need `funclet` operand bundles the pass does not build. Linux targets never
/// produce these pads.
///
/// # Safety
/// `block` must be a valid basic block.
pub unsafe fn first_insertion_point(block: LLVMBasicBlockRef) -> Option<LLVMValueRef> {
    let mut cursor = LLVMGetFirstInstruction(block);
    while !cursor.is_null() && opcode(cursor) == LLVMOpcode::LLVMPHI {
        cursor = LLVMGetNextInstruction(cursor);
    }
    if cursor.is_null() {
        return None;
    }
    match opcode(cursor) {
        LLVMOpcode::LLVMLandingPad => {
            let next = LLVMGetNextInstruction(cursor);
            (!next.is_null()).then_some(next)
        }
        LLVMOpcode::LLVMCatchSwitch | LLVMOpcode::LLVMCatchPad | LLVMOpcode::LLVMCleanupPad => None,
        _ => Some(cursor),
    }
}

/// Whether `block` is a landing pad: control reaches it by unwinding.
///
/// # Safety
/// `block` must be a valid basic block.
pub unsafe fn is_landing_pad(block: LLVMBasicBlockRef) -> bool {
    let mut cursor = LLVMGetFirstInstruction(block);
    while !cursor.is_null() && opcode(cursor) == LLVMOpcode::LLVMPHI {
        cursor = LLVMGetNextInstruction(cursor);
    }
    !cursor.is_null() && opcode(cursor) == LLVMOpcode::LLVMLandingPad
}

/// Whether `inst` is a call to a `returns_twice` function (`setjmp`, `sigsetjmp`, `vfork`...),
/// marked on the callee or on the call.
///
/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn calls_returns_twice(inst: LLVMValueRef) -> bool {
    if LLVMIsACallInst(inst).is_null() {
        return false;
    }
    let kind = LLVMGetEnumAttributeKindForName(c"returns_twice".as_ptr(), 13);
    if !LLVMGetCallSiteEnumAttribute(inst, LLVMAttributeFunctionIndex, kind).is_null() {
        return true;
    }
    let callee = LLVMGetCalledValue(inst);
    !callee.is_null()
        && !LLVMIsAFunction(callee).is_null()
        && !LLVMGetEnumAttributeAtIndex(callee, LLVMAttributeFunctionIndex, kind).is_null()
}

/// The value of an integer constant of at most 64 bits, zero-extended.
///
/// # Safety
/// `value` must be a valid value.
pub unsafe fn constant_u64(value: LLVMValueRef) -> Option<u64> {
    let bits = integer_constant_bits(value)?;
    Some(LLVMConstIntGetZExtValue(value)).filter(|_| bits <= 64)
}

/// The value of an integer constant of at most 64 bits, sign-extended.
///
/// # Safety
/// `value` must be a valid value.
pub unsafe fn constant_i64(value: LLVMValueRef) -> Option<i64> {
    let bits = integer_constant_bits(value)?;
    Some(LLVMConstIntGetSExtValue(value)).filter(|_| bits <= 64)
}

unsafe fn integer_constant_bits(value: LLVMValueRef) -> Option<u32> {
    if LLVMIsAConstantInt(value).is_null() {
        return None;
    }
    Some(LLVMGetIntTypeWidth(LLVMTypeOf(value)))
}

/// Whether `inst` calls, invokes or `callbr`s something.
///
/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn is_call_site(inst: LLVMValueRef) -> bool {
    matches!(
        opcode(inst),
        LLVMOpcode::LLVMCall | LLVMOpcode::LLVMInvoke | LLVMOpcode::LLVMCallBr
    )
}

/// The function a call site calls directly, if it does.
///
/// # Safety
/// `inst` must be a valid call site.
pub unsafe fn direct_callee(inst: LLVMValueRef) -> Option<LLVMValueRef> {
    let callee = LLVMGetCalledValue(inst);
    (!callee.is_null() && !LLVMIsAFunction(callee).is_null()).then_some(callee)
}

/// The function `name` of `module`, declared with type `ty` and `nounwind` when missing:
/// the runtime is built with panic=abort and never unwinds into the program.
///
/// # Safety
/// `module` must be valid; `ty` a function type of its context.
unsafe fn declare_runtime_function(
    module: LLVMModuleRef,
    name: &str,
    ty: LLVMTypeRef,
) -> LLVMValueRef {
    let cname = c_string(name);
    let existing = LLVMGetNamedFunction(module, cname.as_ptr());
    if !existing.is_null() {
        return existing;
    }
    let func = LLVMAddFunction(module, cname.as_ptr(), ty);
    add_function_attribute(func, "nounwind");
    func
}

/// A runtime function as the instrumented code calls it, declared from its signature in
/// [`kage_abi::symbols`].
#[derive(Debug, Clone, Copy)]
pub struct RuntimeFunction {
    pub value: LLVMValueRef,
    pub ty: LLVMTypeRef,
    /// The LLVM calling convention of its declaration and of every call.
    convention: u32,
}

impl RuntimeFunction {
    /// One of the pass's own helpers (see [`define_inline_helper`]), of type `ty`, called
    /// like a runtime function.
    pub fn helper(value: LLVMValueRef, ty: LLVMTypeRef) -> Self {
        RuntimeFunction {
            value,
            ty,
            convention: LLVMCallConv::LLVMCCallConv as u32,
        }
    }

    /// Declares `symbol` (a [`Symbol::Function`]) in `module` when missing.
    ///
    /// # Safety
    /// `module` must be valid.
    pub unsafe fn declare(module: LLVMModuleRef, symbol: &Symbol) -> Self {
        let Symbol::Function {
            name,
            params,
            returns,
            convention,
            ..
        } = *symbol
        else {
            unreachable!("{} is a global, not a function", symbol.name());
        };
        let context = LLVMGetModuleContext(module);
        let mut params: Vec<LLVMTypeRef> = params.iter().map(|&t| c_type(context, t)).collect();
        let ty = LLVMFunctionType(
            c_type(context, returns),
            params.as_mut_ptr(),
            params.len() as u32,
            0,
        );
        let convention = match convention {
            CallingConvention::PreserveMostOnX86_64 if targets_x86_64(module) => {
                LLVMCallConv::LLVMPreserveMostCallConv as u32
            }
            _ => LLVMCallConv::LLVMCCallConv as u32,
        };
        let value = declare_runtime_function(module, name, ty);
        LLVMSetFunctionCallConv(value, convention);
        if convention == LLVMCallConv::LLVMPreserveMostCallConv as u32 {
            // A lazily bound PLT entry would run the dynamic linker's resolver on the first
            // call, which clobbers registers `preserve_most` promises to keep (r10, r11):
            // call through the GOT, which the loader fills when the module is loaded.
            add_function_attribute(value, "nonlazybind");
        }
        RuntimeFunction {
            value,
            ty,
            convention,
        }
    }

    /// A call with `args` at the builder's position.
    ///
    /// # Safety
    /// The builder must be positioned in a function of the module the function was declared
    /// in; `args` must match its parameters.
    pub unsafe fn call(&self, builder: LLVMBuilderRef, args: &mut [LLVMValueRef]) -> LLVMValueRef {
        let call = LLVMBuildCall2(
            builder,
            self.ty,
            self.value,
            args.as_mut_ptr(),
            args.len() as u32,
            c"".as_ptr(),
        );
        if self.convention != LLVMCallConv::LLVMCCallConv as u32 {
            LLVMSetInstructionCallConv(call, self.convention);
        }
        call
    }
}

/// The LLVM type of a C type of the ABI.
unsafe fn c_type(context: LLVMContextRef, ty: CType) -> LLVMTypeRef {
    match ty {
        CType::Void => LLVMVoidTypeInContext(context),
        CType::Ptr => LLVMPointerTypeInContext(context, 0),
        CType::I32 => LLVMInt32TypeInContext(context),
        CType::I64 => LLVMInt64TypeInContext(context),
        CType::I64Array(n) => LLVMArrayType2(LLVMInt64TypeInContext(context), n as u64),
    }
}

/// At the builder's position: `llvm.threadlocal.address(global)`, how IR reads the address
/// of a thread-local of `module`.
///
/// # Safety
/// `module` must be valid, `builder` positioned in one of its functions, `global` one of its
/// thread-locals.
pub unsafe fn thread_local_address(
    module: LLVMModuleRef,
    builder: LLVMBuilderRef,
    global: LLVMValueRef,
) -> LLVMValueRef {
    let context = LLVMGetModuleContext(module);
    let name = "llvm.threadlocal.address";
    let id = LLVMLookupIntrinsicID(name.as_ptr() as *const _, name.len());
    let mut overloads = [LLVMPointerTypeInContext(context, 0)];
    let intrinsic = LLVMGetIntrinsicDeclaration(module, id, overloads.as_mut_ptr(), 1);
    let ty = LLVMIntrinsicGetType(context, id, overloads.as_mut_ptr(), 1);
    let mut args = [global];
    LLVMBuildCall2(builder, ty, intrinsic, args.as_mut_ptr(), 1, c"".as_ptr())
}

/// At the builder's position: a relaxed atomic load of an 8-byte `ty` (a pointer or an i64)
/// from `cell`, a value the runtime publishes for the calling thread.
///
/// # Safety
/// `builder` must be positioned in a function; `cell` a pointer of its context.
pub unsafe fn load_relaxed(
    builder: LLVMBuilderRef,
    ty: LLVMTypeRef,
    cell: LLVMValueRef,
) -> LLVMValueRef {
    let value = LLVMBuildLoad2(builder, ty, cell, c"".as_ptr());
    LLVMSetOrdering(
        value,
        llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
    );
    LLVMSetAlignment(value, 8);
    value
}

/// At the builder's position: `*cell += value` (i64) with a relaxed atomic load and store,
/// for a counter only the calling thread writes and others may read.
///
/// # Safety
/// `builder` must be positioned in a function; `cell` a pointer, `value` an i64 of its
/// context.
pub unsafe fn add_relaxed(builder: LLVMBuilderRef, cell: LLVMValueRef, value: LLVMValueRef) {
    let old = load_relaxed(builder, LLVMTypeOf(value), cell);
    let new = LLVMBuildAdd(builder, old, value, c"".as_ptr());
    let store = LLVMBuildStore(builder, new, cell);
    LLVMSetOrdering(
        store,
        llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic,
    );
    LLVMSetAlignment(store, 8);
    mark_own_word(old);
    mark_own_word(store);
}

/// The metadata that marks a relaxed load or store of a word only the calling thread
/// writes ([`add_relaxed`]): where a value added folds to 0 once the helpers are inlined,
/// the store writes back what the load read, a pair LLVM keeps (atomics are not removed)
/// and the shim's clean-up (`KageDropWriteBacks`) removes.
const OWN_WORD_METADATA: &std::ffi::CStr = c"kage.own_word";

unsafe fn mark_own_word(inst: LLVMValueRef) {
    let context = LLVMGetTypeContext(LLVMTypeOf(LLVMGetOperand(inst, 0)));
    let name = OWN_WORD_METADATA;
    let kind = LLVMGetMDKindIDInContext(context, name.as_ptr(), name.count_bytes() as u32);
    let empty = LLVMMDNodeInContext2(context, std::ptr::null_mut(), 0);
    LLVMSetMetadata(inst, kind, LLVMMetadataAsValue(context, empty));
}

/// Whether `module` is compiled for x86-64.
unsafe fn targets_x86_64(module: LLVMModuleRef) -> bool {
    let triple = LLVMGetTarget(module);
    !triple.is_null()
        && std::ffi::CStr::from_ptr(triple)
            .to_bytes()
            .starts_with(b"x86_64")
}

/// Whether `module` is compiled for an executable: position-independent for one (the
/// `PIE Level` flag, `-fPIE`, the default of most distributions' compilers) or not
/// position-independent at all (no `PIC Level` flag, `-fno-pic`), and not compiled by a
/// call that links a shared library ([`kage_abi::SHARED_LIBRARY_CODE_VARIABLE`], set by
/// `kage-cc`: `cc -shared lib.c` without `-fPIC` compiles `-fPIE` code). Code for a shared
/// library (`-fPIC`) has a `PIC Level` and no `PIE Level`.
///
/// # Safety
/// `module` must be valid.
pub unsafe fn is_for_executable(module: LLVMModuleRef) -> bool {
    let has_flag =
        |key: &str| !LLVMGetModuleFlag(module, key.as_ptr() as *const _, key.len()).is_null();
    let shared = std::env::var_os(kage_abi::SHARED_LIBRARY_CODE_VARIABLE).is_some_and(|v| v == "1");
    !shared && (has_flag("PIE Level") || !has_flag("PIC Level"))
}

extern "C" {
    /// `dso_local` on a declared global (shim.cpp).
    fn kage_set_dso_local(global: LLVMValueRef);
    /// Splits the critical edge `from -> to` (shim.cpp).
    fn kage_split_critical_edge(
        from: LLVMBasicBlockRef,
        to: LLVMBasicBlockRef,
    ) -> LLVMBasicBlockRef;
}

/// Splits the critical edge `from -> to` (`from` has other successors, `to` other
/// predecessors; a switch's several cases to `to` become one edge): the new block on it,
/// whose phis `to`'s were updated for, or null if the edge cannot have a block of its own
/// (an `indirectbr`'s, a `callbr`'s, one into an EH pad) or is not critical.
///
/// # Safety
/// `from` and `to` must be blocks of one function.
pub unsafe fn split_critical_edge(
    from: LLVMBasicBlockRef,
    to: LLVMBasicBlockRef,
) -> LLVMBasicBlockRef {
    kage_split_critical_edge(from, to)
}

/// Whether `block` has one predecessor (one terminator branches to it, however many of
/// its edges do).
///
/// # Safety
/// `block` must be a valid basic block.
pub unsafe fn single_predecessor(block: LLVMBasicBlockRef) -> bool {
    let mut users = Vec::new();
    let mut using = LLVMGetFirstUse(LLVMBasicBlockAsValue(block));
    while !using.is_null() {
        let user = LLVMGetUser(using);
        if !LLVMIsATerminatorInst(user).is_null() && !users.contains(&user) {
            users.push(user);
        }
        using = LLVMGetNextUse(using);
    }
    users.len() == 1
}

/// `@name`, the runtime's global `symbol` (a [`Symbol::Global`]: external, and per thread
/// when it is a thread-local), declared when missing.
///
/// In code for an executable the runtime that defines it is linked into the same
/// executable: the global is `dso_local` (an access is one instruction, `gate(%rip)`, not
/// an address loaded from the GOT first), and a thread-local is local-exec (its offset from
/// the thread pointer is known when linking: `%fs:offset`; initial-exec reads the offset
/// from the GOT into a register first, at every function that uses it). The linker cannot
/// relax those accesses itself because the hooks are exported for instrumented shared
/// libraries. Code that may go into a shared library reaches them through the GOT
/// (initial-exec for a thread-local: the runtime is the executable's, at an offset the
/// loader fixes).
///
/// # Safety
/// `module` must be valid.
pub unsafe fn declare_runtime_global(module: LLVMModuleRef, symbol: &Symbol) -> LLVMValueRef {
    let Symbol::Global {
        name,
        ty,
        thread_local,
        ..
    } = *symbol
    else {
        unreachable!("{} is a function, not a global", symbol.name());
    };
    let cname = c_string(name);
    let existing = LLVMGetNamedGlobal(module, cname.as_ptr());
    if !existing.is_null() {
        return existing;
    }
    let global = LLVMAddGlobal(
        module,
        c_type(LLVMGetModuleContext(module), ty),
        cname.as_ptr(),
    );
    LLVMSetLinkage(global, llvm_sys::LLVMLinkage::LLVMExternalLinkage);
    let in_executable = is_for_executable(module);
    if in_executable {
        kage_set_dso_local(global);
    }
    if thread_local {
        let model = if in_executable {
            llvm_sys::LLVMThreadLocalMode::LLVMLocalExecTLSModel
        } else {
            llvm_sys::LLVMThreadLocalMode::LLVMInitialExecTLSModel
        };
        LLVMSetThreadLocalMode(global, model);
    }
    global
}

/// A new internal `alwaysinline nounwind` function `name` of type `ty`, without a body yet:
/// the pass's helpers, inlined into the instrumented code after the pass.
///
/// # Safety
/// `module` must be valid; `ty` a function type of its context.
pub unsafe fn define_inline_helper(
    module: LLVMModuleRef,
    name: &str,
    ty: LLVMTypeRef,
) -> LLVMValueRef {
    let f = LLVMAddFunction(module, c_string(name).as_ptr(), ty);
    LLVMSetLinkage(f, llvm_sys::LLVMLinkage::LLVMInternalLinkage);
    add_function_attribute(f, "alwaysinline");
    add_function_attribute(f, "nounwind");
    f
}

/// Whether `func` has the enum attribute `name` (one without a value).
///
/// # Safety
/// `func` must be a valid function.
pub unsafe fn has_function_attribute(func: LLVMValueRef, name: &str) -> bool {
    let kind = LLVMGetEnumAttributeKindForName(name.as_ptr() as *const c_char, name.len());
    kind != 0 && !LLVMGetEnumAttributeAtIndex(func, LLVMAttributeFunctionIndex, kind).is_null()
}

/// Whether the call `call` of `callee` has the function attribute `name` (one without a
/// value), on the call or on the callee.
///
/// # Safety
/// `call` must be a call instruction of the function `callee`.
pub unsafe fn call_has_function_attribute(
    call: LLVMValueRef,
    callee: LLVMValueRef,
    name: &str,
) -> bool {
    let kind = LLVMGetEnumAttributeKindForName(name.as_ptr() as *const c_char, name.len());
    (kind != 0 && !LLVMGetCallSiteEnumAttribute(call, LLVMAttributeFunctionIndex, kind).is_null())
        || has_function_attribute(callee, name)
}

/// The memory effects of the call `call` of `callee` (the `memory` attribute's value, on the
/// call or else on the callee), if either says.
///
/// # Safety
/// `call` must be a call instruction of the function `callee`.
pub unsafe fn call_memory_effects(call: LLVMValueRef, callee: LLVMValueRef) -> Option<u64> {
    let kind = LLVMGetEnumAttributeKindForName(c"memory".as_ptr(), 6);
    if kind == 0 {
        return None;
    }
    let on_call = LLVMGetCallSiteEnumAttribute(call, LLVMAttributeFunctionIndex, kind);
    let attribute = if on_call.is_null() {
        LLVMGetEnumAttributeAtIndex(callee, LLVMAttributeFunctionIndex, kind)
    } else {
        on_call
    };
    (!attribute.is_null()).then(|| LLVMGetEnumAttributeValue(attribute))
}

/// Adds the enum attribute `name` (one without a value) to `func`.
///
/// # Safety
/// `func` must be a valid function.
pub unsafe fn add_function_attribute(func: LLVMValueRef, name: &str) {
    let kind = LLVMGetEnumAttributeKindForName(name.as_ptr() as *const c_char, name.len());
    if kind == 0 {
        return;
    }
    let context = LLVMGetTypeContext(LLVMTypeOf(func));
    LLVMAddAttributeAtIndex(
        func,
        LLVMAttributeFunctionIndex,
        LLVMCreateEnumAttribute(context, kind, 0),
    );
}

/// Branch weights of a conditional `branch` (or a `switch` with one case: its default, then
/// its case): how often each side is taken, relatively.
///
/// # Safety
/// `branch` must be a conditional `br`, or a `switch` with one case, of a live module.
pub unsafe fn set_branch_weights(branch: LLVMValueRef, taken: u64, not_taken: u64) {
    let context = LLVMGetTypeContext(LLVMTypeOf(branch));
    let weight = |w: u64| LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(context), w, 0));
    let tag = "branch_weights";
    let mut operands = [
        LLVMMDStringInContext2(context, tag.as_ptr() as *const _, tag.len()),
        weight(taken),
        weight(not_taken),
    ];
    let node = LLVMMDNodeInContext2(context, operands.as_mut_ptr(), 3);
    let kind_id = LLVMGetMDKindIDInContext(context, c"prof".as_ptr(), 4);
    LLVMSetMetadata(branch, kind_id, LLVMMetadataAsValue(context, node));
}

/// `base + offset` bytes, at the builder's position (`base` itself when `offset` is 0).
///
/// # Safety
/// `builder` must be positioned in a live function; `base` a pointer, `offset` an integer.
pub unsafe fn byte_gep(
    builder: llvm_sys::prelude::LLVMBuilderRef,
    base: LLVMValueRef,
    offset: LLVMValueRef,
) -> LLVMValueRef {
    if LLVMIsNull(offset) != 0 {
        return base;
    }
    let i8_type = LLVMInt8TypeInContext(LLVMGetTypeContext(LLVMTypeOf(base)));
    let mut indices = [offset];
    LLVMBuildGEP2(
        builder,
        i8_type,
        base,
        indices.as_mut_ptr(),
        1,
        c"".as_ptr(),
    )
}

/// Whether `inst` is a `musttail` call: nothing may come between it and its `ret`.
///
/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn is_musttail_call(inst: LLVMValueRef) -> bool {
    !LLVMIsACallInst(inst).is_null()
        && LLVMGetTailCallKind(inst) == llvm_sys::LLVMTailCallKind::LLVMTailCallKindMustTail
}

/// The `musttail` call whose result the `ret` `terminator` returns (possibly through a
/// bitcast), if any: nothing may go between the two.
///
/// # Safety
/// `terminator` must be a valid instruction.
pub unsafe fn musttail_call_returned_by(terminator: LLVMValueRef) -> Option<LLVMValueRef> {
    let mut prev = LLVMGetPreviousInstruction(terminator);
    if !prev.is_null() && opcode(prev) == LLVMOpcode::LLVMBitCast {
        prev = LLVMGetPreviousInstruction(prev);
    }
    (!prev.is_null() && is_musttail_call(prev)).then_some(prev)
}
