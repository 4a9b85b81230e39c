//! The module pass: picks the functions to instrument, plans each ([`FunctionPlan`]), emits
//! the region table and its registration, and lets the build's tool ([`crate::tools`])
//! instrument the functions. Everything is analysed before anything is inserted.

use kage_abi::symbols;
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMModuleRef, LLVMValueRef};
use llvm_sys::{LLVMAttributeFunctionIndex, LLVMLinkage};

use crate::contexts;
use crate::debuginfo::WrittenSource;
use crate::ir::{self, c_string, RuntimeFunction};
use crate::library;
use crate::plan::FunctionPlan;
use crate::regions::{self, ModuleInfo, RegionEntry};
use crate::tools::{self, Tool};

/// Instruments `module` in place for the tool the compiler's environment selects
/// (`KAGE_TOOL` and the tool's own variables, see [`tools::from_environment`]). Returns the
/// tool when the module was instrumented now, `None` when it was left alone (already
/// instrumented, or nothing to instrument).
///
/// # Safety
/// `module` must be a valid module that nothing else mutates meanwhile.
pub unsafe fn instrument_module(module: LLVMModuleRef) -> Option<Box<dyn Tool>> {
    let tool = tools::from_environment();
    let inlined_regions =
        std::env::var_os(kage_abi::INLINED_REGIONS_VARIABLE).is_none_or(|v| v != "0");
    instrument_module_with(module, tool.as_ref(), inlined_regions).then_some(tool)
}

/// Instruments `module` in place for `tool`; returns whether it did (`false` when the module
/// was already instrumented or has nothing to instrument). With `inlined_regions` false,
/// inlined calls are no regions of their own.
///
/// # Safety
/// `module` must be a valid module that nothing else mutates meanwhile.
pub unsafe fn instrument_module_with(
    module: LLVMModuleRef,
    tool: &dyn Tool,
    inlined_regions: bool,
) -> bool {
    if !LLVMGetNamedGlobal(module, c_string(kage_abi::MODULE_GLOBAL).as_ptr()).is_null() {
        return false; // already instrumented (e.g. the pass was scheduled twice)
    }
    let functions: Vec<LLVMValueRef> = module_functions(module)
        .into_iter()
        .filter(|&f| should_instrument(f))
        .collect();
    if functions.is_empty() {
        return false;
    }

    // Before planning: the plans (regions, segments, hoisting) and every tool then see each
    // lane of a masked or gathering vector access as a plain load or store.
    if declares_masked_memory(module) {
        for &func in &functions {
            kage_scalarize_masked_memory(func);
        }
    }

    if tool.sees_library_effects() {
        for &func in &functions {
            library::mark_effects(module, func);
        }
    }

    // Analyse every function before changing anything.
    let mut plans = Vec::with_capacity(functions.len());
    let mut entries: Vec<RegionEntry> = Vec::new();
    // The table's `code` column: each function entry points at its function.
    let mut code: Vec<LLVMValueRef> = Vec::new();
    let written = WrittenSource::of_module(module);
    for &func in &functions {
        let plan = FunctionPlan::new(func, entries.len() as u32, inlined_regions, &written);
        let regions = plan.regions();
        code.push(func);
        code.resize(code.len() + regions.len() - 1, std::ptr::null_mut());
        entries.extend(regions);
        plans.push(plan);
    }

    let mut name_len = 0usize;
    let module_name = ir::lossy_string(LLVMGetSourceFileName(module, &mut name_len), name_len);
    let info = ModuleInfo {
        name: &module_name,
        instrumentation: tool.instrumentation().value(),
        line_shift: tool.line_shift(),
    };
    let table = regions::emit_table(module, &entries, &code, &info);
    let register = RuntimeFunction::declare(module, &symbols::REGISTER_MODULE);
    for plan in &plans {
        drop_attributes_hooks_break(plan.func);
    }
    tool.instrument(module, &plans, &table);
    library::remove_markers(module);
    // After the tool: the versions some builds make of a function switch contexts too.
    let instrumented: Vec<LLVMValueRef> = module_functions(module)
        .into_iter()
        .filter(|&f| should_instrument(f))
        .collect();
    contexts::redirect_context_switches(module, &instrumented);
    let unregister = RuntimeFunction::declare(module, &symbols::UNREGISTER_MODULE);
    regions::add_registration_ctor(module, &table, register, unregister, &module_name);
    true
}

extern "C" {
    /// Turns the function's masked vector accesses into a plain access per lane under a
    /// branch on its mask bit (shim.cpp).
    fn kage_scalarize_masked_memory(func: LLVMValueRef);
}

/// Whether `module` declares a vector access that no tool sees as it is: a masked load or
/// store, a gather or scatter, an expanding load or compressing store (the vectoriser's,
/// for AVX2 and AVX-512 targets), or a histogram update. [`kage_scalarize_masked_memory`]
/// makes them plain loads and stores, one per lane, before the tools plan anything.
unsafe fn declares_masked_memory(module: LLVMModuleRef) -> bool {
    module_functions(module).into_iter().any(|f| {
        LLVMIsDeclaration(f) != 0 && {
            let name = ir::value_name(f);
            name.starts_with("llvm.masked.")
                || name.starts_with("llvm.experimental.vector.histogram.")
        }
    })
}

/// Instrumented functions now call the runtime, which reads and writes its own memory and
/// may synchronise: attributes promising otherwise would let later passes (or LTO callers)
/// move or delete calls and lose events. MemorySanitizer drops the same ones.
unsafe fn drop_attributes_hooks_break(func: LLVMValueRef) {
    for name in ["memory", "speculatable", "nosync", "nofree"] {
        let kind = LLVMGetEnumAttributeKindForName(name.as_ptr() as *const _, name.len());
        if kind != 0 {
            LLVMRemoveEnumAttributeAtIndex(func, LLVMAttributeFunctionIndex, kind);
        }
    }
}

unsafe fn module_functions(module: LLVMModuleRef) -> Vec<LLVMValueRef> {
    let mut out = Vec::new();
    let mut func = LLVMGetFirstFunction(module);
    while !func.is_null() {
        out.push(func);
        func = LLVMGetNextFunction(func);
    }
    out
}

/// Functions with a body, except the runtime's own (`__kage_*`, which includes the pass's
/// constructor), those opting out with `disable_sanitizer_instrumentation`, `naked` ones
/// (no prologue to call from) and `available_externally` copies (never emitted themselves).
unsafe fn should_instrument(func: LLVMValueRef) -> bool {
    if LLVMIsDeclaration(func) != 0 || LLVMGetFirstBasicBlock(func).is_null() {
        return false;
    }
    if ir::value_name(func).starts_with("__kage_") {
        return false;
    }
    if LLVMGetLinkage(func) == LLVMLinkage::LLVMAvailableExternallyLinkage {
        return false;
    }
    !["disable_sanitizer_instrumentation", "naked"]
        .iter()
        .any(|attr| has_function_attribute(func, attr))
}

unsafe fn has_function_attribute(func: LLVMValueRef, name: &str) -> bool {
    let kind = LLVMGetEnumAttributeKindForName(name.as_ptr() as *const _, name.len());
    kind != 0 && !LLVMGetEnumAttributeAtIndex(func, LLVMAttributeFunctionIndex, kind).is_null()
}
