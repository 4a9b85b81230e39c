//! The module pass: picks functions, builds the region table, and instruments them in the
//! mode `KAGE_TOOL` selects: the hooks of docs/abi.md (here) or working-set marking
//! ([`crate::working_set`]). All instructions to instrument are collected before any is
//! inserted.

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::target::LLVMGetModuleDataLayout;
use llvm_sys::{LLVMAttributeFunctionIndex, LLVMLinkage, LLVMOpcode, LLVMTailCallKind};

use crate::access::{classify_access, Access};
use crate::debuginfo::{self, HookLocations};
use crate::footprint::{self, FpRuntime};
use crate::hoist::{self, Coverage, HoistPlan};
use crate::ir::{self, c_string, FunctionCfg};
use crate::loops::{find_loops, LoopForest};
use crate::mode::{self, Instrumentation};
use crate::regions::{self, FunctionIdentity, FunctionSlots, LineRange, ModuleInfo, RegionEntry};
use crate::working_set;

/// Instruments `module` in place for the mode the environment selects (`KAGE_TOOL`, and
/// `KAGE_WS_LINE_SIZE` for the working-set modes).
/// Modules without instrumentable functions are untouched. Returns the mode when the
/// module was instrumented now, `None` when it was left alone.
///
/// # Safety
/// `module` must be a valid module that nothing else mutates meanwhile.
pub unsafe fn instrument_module(module: LLVMModuleRef) -> Option<Instrumentation> {
    let mode = Instrumentation::from_environment();
    let line_size = if mode.is_working_set() {
        mode::line_size_from_environment()
    } else {
        mode::DEFAULT_LINE_SIZE
    };
    instrument_module_for(module, mode, line_size)
}

/// Instruments `module` in place for `mode` (marking lines of `line_size` bytes in the
/// working-set modes); returns `Some(mode)` when it did, `None` when the module was already
/// instrumented or has nothing to instrument.
///
/// # Safety
/// `module` must be a valid module that nothing else mutates meanwhile.
pub unsafe fn instrument_module_for(
    module: LLVMModuleRef,
    mode: Instrumentation,
    line_size: u64,
) -> Option<Instrumentation> {
    if !LLVMGetNamedGlobal(module, c_string(regions::MODULE_GLOBAL).as_ptr()).is_null() {
        return None; // already instrumented (e.g. the pass was scheduled twice)
    }
    let functions: Vec<LLVMValueRef> = module_functions(module)
        .into_iter()
        .filter(|&f| should_instrument(f))
        .collect();
    if functions.is_empty() {
        return None;
    }

    // Analyse every function before changing anything.
    let mut plans = Vec::with_capacity(functions.len());
    let mut entries: Vec<RegionEntry> = Vec::new();
    // The table's `code` column: each function entry points at its function.
    let mut code: Vec<LLVMValueRef> = Vec::new();
    for &func in &functions {
        let plan = FunctionPlan::new(
            func,
            FunctionSlots {
                base: entries.len() as u32,
            },
        );
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
        instrumentation: mode.abi_value(),
        line_shift: if mode.is_working_set() {
            line_size.trailing_zeros()
        } else {
            0
        },
    };
    let table = regions::emit_table(module, &entries, &code, &info);
    let register_type = region_hook_type(module);
    let register = ir::declare_runtime_function(module, "__kage_register_module", register_type);
    for plan in &plans {
        drop_attributes_hooks_break(plan.func);
    }
    if mode.is_working_set() {
        working_set::instrument_functions(module, &plans, &table, mode, line_size);
    } else {
        insert_hooks(module, &plans, &table, mode);
    }
    regions::add_registration_ctor(module, &table, register, register_type);
    Some(mode)
}

/// `void (ptr)`: the type of `__kage_register_module` and of the region hooks.
unsafe fn region_hook_type(module: LLVMModuleRef) -> LLVMTypeRef {
    let context = LLVMGetModuleContext(module);
    let mut params = [LLVMPointerTypeInContext(context, 0)];
    LLVMFunctionType(LLVMVoidTypeInContext(context), params.as_mut_ptr(), 1, 0)
}

/// Modes 0 and 3: region hooks and a call per access; mode 3 reports accesses in groups
/// instead ([`footprint`]), simple counted innermost loops per chunk of iterations
/// ([`hoist`]).
unsafe fn insert_hooks(
    module: LLVMModuleRef,
    plans: &[FunctionPlan],
    table: &regions::RegionTable,
    mode: Instrumentation,
) {
    let hooks = Hooks::declare(module);
    let fp_runtime = (mode == Instrumentation::Footprint).then(|| FpRuntime::declare(module));
    let data_layout = LLVMGetModuleDataLayout(module);
    let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
    for plan in plans {
        let hoists = if mode == Instrumentation::Footprint {
            hoist::plan_function(&plan.cfg, &plan.forest, data_layout, Coverage::Bytes)
        } else {
            Vec::new()
        };
        let mut inserter = Inserter {
            builder,
            hooks: &hooks,
            fp: fp_runtime.as_ref(),
            data_layout,
            table,
            locations: HookLocations::new(module, plan.func),
        };
        plan.insert_hooks(&mut inserter, &hoists);
    }
    LLVMDisposeBuilder(builder);
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

/// The demangled name for C++ (`_Z...`) symbols, else the symbol itself.
pub fn display_name(symbol: &str) -> String {
    if symbol.starts_with("_Z") {
        if let Ok(parsed) = cpp_demangle::Symbol::new(symbol) {
            if let Ok(demangled) = parsed.demangle(&cpp_demangle::DemangleOptions::default()) {
                return demangled;
            }
        }
    }
    symbol.to_string()
}

/// Everything the pass will do to one function, decided before mutating it.
pub struct FunctionPlan {
    pub func: LLVMValueRef,
    pub slots: FunctionSlots,
    pub forest: LoopForest,
    pub cfg: FunctionCfg,
    block_lines: Vec<LineRange>,
    identity: FunctionIdentity,
    accesses: Vec<Access>,
    /// Instructions before which `__kage_func_exit` goes (reachable `ret`/`resume`).
    exits: Vec<LLVMValueRef>,
    /// Where control may arrive from a `longjmp` or an unwinding exception, with the block
    /// it is in: before which `__kage_resume_at` goes.
    resume_points: Vec<(LLVMValueRef, usize)>,
}

impl FunctionPlan {
    unsafe fn new(func: LLVMValueRef, slots: FunctionSlots) -> Self {
        let cfg = FunctionCfg::new(func);
        let forest = find_loops(&cfg.successors, 0);
        let data_layout = LLVMGetModuleDataLayout(LLVMGetGlobalParent(func));
        let mut block_lines = Vec::with_capacity(cfg.blocks.len());
        let mut accesses = Vec::new();
        let mut exits = Vec::new();
        let mut resume_points = Vec::new();
        for (b, &block) in cfg.blocks.iter().enumerate() {
            let mut lines = LineRange::default();
            if forest.reachable[b] && ir::is_landing_pad(block) {
                if let Some(at) = ir::first_insertion_point(block) {
                    resume_points.push((at, b));
                }
            }
            for inst in ir::instructions(block) {
                lines.add(debuginfo::outermost_line(inst));
                if let Some(access) = classify_access(inst, data_layout) {
                    accesses.push(access);
                }
                let op = ir::opcode(inst);
                // Unreachable blocks never run: no region hooks there (see loops.rs).
                if forest.reachable[b]
                    && (op == LLVMOpcode::LLVMRet || op == LLVMOpcode::LLVMResume)
                {
                    exits.push(exit_insertion_point(inst));
                }
                // A second return from setjmp comes from a longjmp that skipped exit hooks.
                if forest.reachable[b] && ir::calls_returns_twice(inst) {
                    let next = LLVMGetNextInstruction(inst);
                    if !next.is_null() {
                        resume_points.push((next, b));
                    }
                }
            }
            block_lines.push(lines);
        }
        let symbol = ir::value_name(func);
        // A leading \x01 only tells the backend not to add a prefix; it is not part of the name.
        let symbol = symbol.strip_prefix('\u{1}').unwrap_or(&symbol).to_string();
        let identity = FunctionIdentity {
            name: display_name(&symbol),
            symbol,
            file: debuginfo::function_file(func),
            declared_line: debuginfo::subprogram_line(func),
        };
        FunctionPlan {
            func,
            slots,
            forest,
            cfg,
            block_lines,
            identity,
            accesses,
            exits,
            resume_points,
        }
    }

    fn regions(&self) -> Vec<RegionEntry> {
        regions::plan_function(self.slots, &self.forest, &self.block_lines, &self.identity)
    }

    /// Inserts in an order that keeps hooks sharing a position right: block-entry hooks
    /// first (later insertions before the same instruction land after them), then accesses
    /// in program order (mode 3: the segments' reports), then function exits (so they come
    /// after a cmpxchg's hook and a segment's reports). The `hoisted` loops (mode 3) get
    /// their chunk helper instead of a loop hook and access hooks, at the loop hook's place
    /// (first in the header).
    unsafe fn insert_hooks(&self, ins: &mut Inserter, hoisted: &[HoistPlan]) {
        let hoisted_loops: Vec<usize> = hoisted.iter().map(|h| h.loop_index).collect();
        let hoisted_accesses: std::collections::HashSet<LLVMValueRef> = hoisted
            .iter()
            .flat_map(|h| h.accesses.iter().copied())
            .collect();
        let reports = (ins.fp.is_some())
            .then(|| footprint::plan_reports(self, &hoisted_accesses, ins.data_layout));
        // Every block-entry position is taken before anything is inserted: inserting before
        // the same instruction then keeps the hooks in the order written here.
        let entry_block = self.cfg.blocks[0];
        let function_region = self.slots.function();
        let func_enter_at = ir::first_insertion_point(entry_block);
        let loop_iters: Vec<_> = (self.forest.loops.iter().enumerate())
            .filter(|(k, _)| !hoisted_loops.contains(k))
            .filter_map(|(k, lp)| Some((ir::first_insertion_point(self.cfg.blocks[lp.header])?, k)))
            .collect();
        let settles: Vec<_> = (self.forest.settle_blocks(&self.cfg.successors).into_iter())
            .filter_map(|(block, innermost)| {
                Some((
                    ir::first_insertion_point(self.cfg.blocks[block])?,
                    innermost,
                ))
            })
            .collect();
        if let Some(at) = func_enter_at {
            ins.frame_hook(ins.hooks.func_enter, function_region, at);
        }
        for &(at, block) in &self.resume_points {
            let region = self.slots.innermost_region(self.forest.innermost[block]);
            ins.frame_hook(ins.hooks.resume_at, region, at);
        }
        for (at, k) in loop_iters {
            ins.region_hook(ins.hooks.loop_iter, self.slots.loop_entry(k), at);
        }
        for (at, innermost) in settles {
            ins.region_hook(ins.hooks.settle, self.slots.innermost_region(innermost), at);
        }
        match ins.fp {
            None => {
                for access in &self.accesses {
                    ins.access_hook(access);
                }
            }
            Some(rt) => {
                let cmpxchgs = (self.accesses.iter())
                    .filter(|a| matches!(a, Access::CmpXchg { .. }))
                    .filter(|a| !hoisted_accesses.contains(&a.instruction()));
                for access in cmpxchgs {
                    ins.access_hook(access);
                }
                let builder = ins.builder;
                let mut position = |at: LLVMValueRef| ins.position_before(at);
                let reports = reports.as_deref().unwrap_or_default();
                footprint::emit_reports(reports, rt, builder, &mut position);
            }
        }
        for &at in &self.exits {
            ins.region_hook(ins.hooks.func_exit, function_region, at);
        }
        // Last: each helper call goes before the hooks already at its header's start.
        if let Some(rt) = ins.fp {
            for plan in hoisted {
                let region = ins.table.region_ptr(self.slots.loop_entry(plan.loop_index));
                let loop_iter = (ins.hooks.loop_iter, ins.hooks.region_fn_type);
                let builder = ins.builder;
                let mut position = |at: LLVMValueRef| ins.position_before(at);
                hoist::emit_footprint(plan, builder, &mut position, rt, loop_iter, region);
            }
        }
    }
}

/// Where `__kage_func_exit` goes for a `ret`/`resume`: right before it, unless the `ret`
/// returns a `musttail` call's result, since nothing may sit between that call and the
/// `ret`; then before the call (the callee's events then nest inside nothing of ours).
unsafe fn exit_insertion_point(terminator: LLVMValueRef) -> LLVMValueRef {
    let mut prev = LLVMGetPreviousInstruction(terminator);
    if !prev.is_null() && ir::opcode(prev) == LLVMOpcode::LLVMBitCast {
        prev = LLVMGetPreviousInstruction(prev);
    }
    if !prev.is_null()
        && !LLVMIsACallInst(prev).is_null()
        && LLVMGetTailCallKind(prev) == LLVMTailCallKind::LLVMTailCallKindMustTail
    {
        return prev;
    }
    terminator
}

/// The runtime's entry points, declared with the exact C signatures of docs/abi.md.
struct Hooks {
    region_fn_type: LLVMTypeRef,
    /// `(region, frame)`: hooks that also get the function's frame address.
    frame_fn_type: LLVMTypeRef,
    /// `llvm.addressofreturnaddress`: where the return address of the current activation
    /// lives, i.e. the stack pointer at the function's entry. The runtime orders function
    /// activations by it, whatever size their frames have.
    frame_address_type: LLVMTypeRef,
    frame_address: LLVMValueRef,
    access_fn_type: LLVMTypeRef,
    cmpxchg_fn_type: LLVMTypeRef,
    func_enter: LLVMValueRef,
    func_exit: LLVMValueRef,
    loop_iter: LLVMValueRef,
    settle: LLVMValueRef,
    resume_at: LLVMValueRef,
    load: LLVMValueRef,
    store: LLVMValueRef,
    cmpxchg: LLVMValueRef,
    i32_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
}

impl Hooks {
    unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        let void_type = LLVMVoidTypeInContext(context);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let i32_type = LLVMInt32TypeInContext(context);
        let i64_type = LLVMInt64TypeInContext(context);
        let fn_type = |params: &mut [LLVMTypeRef]| {
            LLVMFunctionType(void_type, params.as_mut_ptr(), params.len() as u32, 0)
        };
        let region_fn_type = fn_type(&mut [ptr_type]);
        let frame_fn_type = fn_type(&mut [ptr_type, ptr_type]);
        let frame_address_type = LLVMFunctionType(ptr_type, std::ptr::null_mut(), 0, 0);
        let access_fn_type = fn_type(&mut [ptr_type, i64_type]);
        let cmpxchg_fn_type = fn_type(&mut [ptr_type, i64_type, i32_type]);
        let declare = |name: &str, ty: LLVMTypeRef| ir::declare_runtime_function(module, name, ty);
        Hooks {
            func_enter: declare("__kage_func_enter", frame_fn_type),
            func_exit: declare("__kage_func_exit", region_fn_type),
            loop_iter: declare("__kage_loop_iter", region_fn_type),
            settle: declare("__kage_settle", region_fn_type),
            resume_at: declare("__kage_resume_at", frame_fn_type),
            frame_address: {
                let name = c"llvm.addressofreturnaddress.p0";
                let existing = LLVMGetNamedFunction(module, name.as_ptr());
                if existing.is_null() {
                    LLVMAddFunction(module, name.as_ptr(), frame_address_type)
                } else {
                    existing
                }
            },
            frame_fn_type,
            frame_address_type,
            load: declare("__kage_load", access_fn_type),
            store: declare("__kage_store", access_fn_type),
            cmpxchg: declare("__kage_cmpxchg", cmpxchg_fn_type),
            region_fn_type,
            access_fn_type,
            cmpxchg_fn_type,
            i32_type,
            i64_type,
        }
    }
}

/// Builds hook calls inside one function.
struct Inserter<'a> {
    builder: LLVMBuilderRef,
    hooks: &'a Hooks,
    /// Mode 3's runtime symbols; `None` in mode 0.
    fp: Option<&'a FpRuntime>,
    data_layout: llvm_sys::target::LLVMTargetDataRef,
    table: &'a regions::RegionTable,
    locations: HookLocations,
}

impl Inserter<'_> {
    /// Positions the builder before `at`, with `at`'s hook debug location.
    unsafe fn position_before(&mut self, at: LLVMValueRef) {
        LLVMPositionBuilderBefore(self.builder, at);
        LLVMSetCurrentDebugLocation2(self.builder, self.locations.for_instruction(at));
    }

    unsafe fn call(
        &mut self,
        fn_type: LLVMTypeRef,
        callee: LLVMValueRef,
        args: &mut [LLVMValueRef],
    ) {
        LLVMBuildCall2(
            self.builder,
            fn_type,
            callee,
            args.as_mut_ptr(),
            args.len() as u32,
            c"".as_ptr(),
        );
    }

    unsafe fn region_hook(&mut self, hook: LLVMValueRef, region: u32, at: LLVMValueRef) {
        self.position_before(at);
        let region_ptr = self.table.region_ptr(region);
        self.call(self.hooks.region_fn_type, hook, &mut [region_ptr]);
    }

    /// A region hook that also passes the current activation's frame address.
    unsafe fn frame_hook(&mut self, hook: LLVMValueRef, region: u32, at: LLVMValueRef) {
        self.position_before(at);
        let region_ptr = self.table.region_ptr(region);
        let frame = LLVMBuildCall2(
            self.builder,
            self.hooks.frame_address_type,
            self.hooks.frame_address,
            std::ptr::null_mut(),
            0,
            c"".as_ptr(),
        );
        self.call(self.hooks.frame_fn_type, hook, &mut [region_ptr, frame]);
    }

    unsafe fn access_hook(&mut self, access: &Access) {
        let i64_type = self.hooks.i64_type;
        let (load_hook, store_hook, access_type) =
            (self.hooks.load, self.hooks.store, self.hooks.access_fn_type);
        match *access {
            Access::Plain {
                at,
                ptr,
                size,
                load,
                store,
            } => {
                self.position_before(at);
                let size = LLVMConstInt(i64_type, size, 0);
                if load {
                    self.call(access_type, load_hook, &mut [ptr, size]);
                }
                if store {
                    self.call(access_type, store_hook, &mut [ptr, size]);
                }
            }
            Access::CmpXchg { inst, ptr, size } => {
                // After the cmpxchg (never a terminator), with its own location.
                let next = LLVMGetNextInstruction(inst);
                if next.is_null() {
                    return;
                }
                LLVMPositionBuilderBefore(self.builder, next);
                LLVMSetCurrentDebugLocation2(self.builder, self.locations.for_instruction(inst));
                let success = LLVMBuildExtractValue(self.builder, inst, 1, c"".as_ptr());
                let stored =
                    LLVMBuildZExt(self.builder, success, self.hooks.i32_type, c"".as_ptr());
                let size = LLVMConstInt(i64_type, size, 0);
                self.call(
                    self.hooks.cmpxchg_fn_type,
                    self.hooks.cmpxchg,
                    &mut [ptr, size, stored],
                );
            }
            Access::Intrinsic { at, dst, src, len } => {
                self.position_before(at);
                let len = LLVMBuildIntCast2(self.builder, len, i64_type, 0, c"".as_ptr());
                if let Some(src) = src {
                    self.call(access_type, load_hook, &mut [src, len]);
                }
                self.call(access_type, store_hook, &mut [dst, len]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::display_name;

    #[test]
    fn demangles_cpp_and_keeps_c_names() {
        assert_eq!(display_name("_ZN3foo3barEi"), "foo::bar(int)");
        assert_eq!(display_name("main"), "main");
        assert_eq!(display_name("_Znot_valid!"), "_Znot_valid!");
    }
}
