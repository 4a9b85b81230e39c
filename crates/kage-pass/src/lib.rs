//! Kage's LLVM pass plugin (`libkage_pass.so`).
//!
//! `src/shim.cpp` registers a module pass with LLVM's PassBuilder (clang's OptimizerLast
//! extension point followed by `AlwaysInlinerPass`, and `-passes=kage` for `opt`); the pass
//! calls [`kage_run_on_module`], which runs [`pass::instrument_module`]: it plans every
//! function ([`plan`]: its region tree of loops and inlined calls ([`region_tree`]),
//! accesses, entries and exits), emits the region table
//! ([`regions`]) and lets the tool `KAGE_TOOL` selects ([`tools`]) instrument the module as
//! `docs/abi.md` specifies, with the definitions of the `kage-abi` crate:
//! - unset, empty or `count` ([`tools::count`]): instrumentation 0, region hooks and a call
//!   per access;
//! - `working-set` ([`tools::working_set`]): instrumentation 1 (2 with `KAGE_WS_TRACE=1`, a
//!   trace call per access, tests only): no region hooks; per segment a budget check and
//!   coalesced inline marks, simple counted loops per chunk of iterations;
//! - `footprint` ([`tools::footprint`]): instrumentation 3, region hooks, accesses reported
//!   in groups and counted inline.
//!
//! The machinery the tools share, below them (no tool module imports another): [`loops`]
//! (dominators and natural loops on a plain graph, no LLVM), [`equivalence`] (blocks that
//! run equally often, on a plain graph), [`plan`], [`regions`],
//! [`access`] (which instructions are accesses), [`address`] (base + constant offset, range
//! merging), [`segments`] (runs of instructions between calls, accesses coalesced per
//! range), [`checkpoints`] (where a path-wise "already covered" fact dies), [`hoist`]
//! (counted loops with affine addresses, handled per chunk of iterations), [`hooks`] (the
//! region hooks and per-access calls), [`debuginfo`] (lines, files, hook locations), [`ir`]
//! (C API helpers, runtime symbols declared from `kage-abi`).
//!
//! Where it runs: clang's OptimizerLast extension point, which LLVM 22 also invokes from the
//! -O0 pipeline and from the ThinLTO/full-LTO pre-link pipelines (checked by the
//! `clang_plugin` tests and by hand with `-flto`). A module that already has
//! `__kage_module` is left alone, so running the pass twice (or again after LTO merged
//! instrumented modules) does not instrument twice. `opt -passes=kage` does not inline the
//! working-set helpers; clang's pipeline (the shim's `AlwaysInlinerPass`) does, at every
//! `-O` level.
//!
//! Known limits (beyond those in docs/abi.md):
//! - Irreducible cycles are not loops: their blocks belong to the enclosing loop/function.
//! - Unreachable blocks get no region hooks (no func_exit before their `ret`) and are in no
//!   loop; their memory accesses are still instrumented (harmless: they never run).
//! - Blocks starting with a Windows EH pad (catchswitch/catchpad/cleanuppad) get no
//!   block-entry hooks (and in working-set modes no instrumentation at all), and calls
//!   inside funclets get no `funclet` bundle: Windows EH is not supported (Linux targets
//!   never produce these).
//! - Masked and per-lane vector accesses (`llvm.masked.*`) are made plain accesses, one per
//!   lane under a test of its mask bit, before anything is planned ([`pass`]); target
//!   intrinsics that access memory (`llvm.x86.avx2.gather.*`) and `llvm.vp.*` are not seen.
//! - Accesses through pointers outside address space 0, scalable vectors and zero-sized
//!   types are skipped; `naked` and `available_externally` functions are not instrumented.
//! - Before a `ret` that returns a `musttail` call, `__kage_func_exit` goes before the call.
//! - The pass drops `memory`, `speculatable`, `nosync` and `nofree` from instrumented
//!   functions (they now call the runtime); call-site copies of such attributes and
//!   parameter attributes such as `captures(none)` are left as they are (the working-set
//!   marks take the address of such pointers, which no later pass can observe).
//! - The table's `code` field refers to every instrumented function, so the table keeps
//!   them alive (e.g. against `--gc-sections`).
//! - Inline assembly that names a call, jump or system call instruction, `asm goto`, and
//!   `llvm.experimental.gc.statepoint`/`patchpoint`, `llvm.coro.*` and
//!   `llvm.icall.branch.funnel` cut segments like calls; other intrinsics and other inline
//!   assembly do not (its memory accesses are not seen). In the entry block the first
//!   segment starts after the leading static `alloca`s (so they stay static once the
//!   helpers are inlined).
//! - Hoisting needs the shape described in [`hoist`]: a dedicated preheader ending in an
//!   unconditional `br` (clang -O2 often folds an empty preheader into the guard block, and
//!   such loops stay instrumented per segment), a single exit at the latch on `icmp eq|ne`
//!   of a counter stepping by ±2^k, and addresses linear in one induction variable plus
//!   loop-invariant terms. Pointer induction variables are not recognised.

use std::ffi::{c_char, c_int, c_void};

use llvm_sys::prelude::LLVMModuleRef;

pub mod access;
pub mod address;
pub mod checkpoints;
pub mod contexts;
pub mod debuginfo;
pub mod equivalence;
pub mod hoist;
pub mod hooks;
pub mod ir;
pub mod library;
pub mod loops;
pub mod nests;
pub mod pass;
pub mod plan;
pub mod region_tree;
pub mod regions;
pub mod segments;
pub mod tools;

/// Mirror of `llvm::PassPluginLibraryInfo` (llvm/Plugins/PassPlugin.h, LLVM 22); the shim
/// static-asserts the C++ size so a layout change fails the build.
#[repr(C)]
pub struct PassPluginLibraryInfo {
    pub api_version: u32,
    pub plugin_name: *const c_char,
    pub plugin_version: *const c_char,
    /// `void (*)(llvm::PassBuilder &)`.
    pub register_pass_builder_callbacks: Option<unsafe extern "C" fn(pass_builder: *mut c_void)>,
    /// `bool (*)(Module &, TargetMachine &, CodeGenFileType, raw_pwrite_stream &)`; unused.
    pub pre_code_gen_callback:
        Option<unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, *mut c_void) -> bool>,
}

extern "C" {
    /// Registers the pass's PassBuilder callbacks (src/shim.cpp).
    fn kage_register_pass_builder_callbacks(pass_builder: *mut c_void);
    /// `LLVM_PLUGIN_API_VERSION` of the headers the shim was compiled against.
    fn kage_plugin_api_version() -> u32;
}

/// The entry point LLVM's plugin loader looks up. It lives in Rust because a cdylib only
/// exports Rust `#[no_mangle]` items, not symbols of the C++ static archive.
///
/// # Safety
/// Called by LLVM's `PassPlugin::Load` in a process where LLVM 22 is loaded; it only
/// returns static data and function pointers.
#[no_mangle]
pub unsafe extern "C" fn llvmGetPassPluginInfo() -> PassPluginLibraryInfo {
    PassPluginLibraryInfo {
        api_version: kage_plugin_api_version(),
        plugin_name: c"kage".as_ptr(),
        plugin_version: concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char,
        register_pass_builder_callbacks: Some(kage_register_pass_builder_callbacks),
        pre_code_gen_callback: None,
    }
}

/// Runs the Kage pass on one module (called by the C++ pass in src/shim.cpp). Returns
/// whether it instrumented the module now for a tool that asks for the shim's clean-up
/// after inlining its helpers ([`tools::Tool::needs_cleanup`], see src/shim.cpp).
///
/// # Safety
/// `module` must be a valid `LLVMModuleRef` that no one else mutates during the call.
#[no_mangle]
pub unsafe extern "C" fn kage_run_on_module(module: LLVMModuleRef) -> bool {
    if module.is_null() {
        return false;
    }
    pass::instrument_module(module).is_some_and(|tool| tool.needs_cleanup())
}

/// Versions the loop nests the build selects (`KAGE_TOOL=loops`, [`nests`]); called by the
/// C++ pass at the start of clang's pipeline (src/shim.cpp). Returns whether the module
/// changed. A selection that names no loop stops the compiler with an error.
///
/// # Safety
/// `module` must be a valid `LLVMModuleRef` that no one else mutates during the call.
#[no_mangle]
pub unsafe extern "C" fn kage_version_loops(module: LLVMModuleRef) -> bool {
    !module.is_null() && nests::version_module(module)
}
