//! The region hooks of docs/abi.md ("Hooks the pass inserts") and the `cmpxchg` hook:
//! shared by the tools whose builds report region events (`count-calls`: every access a
//! call; `footprint`: accesses in groups; `hcpa`). [`insert`] places a function's region hooks around what
//! the tool inserts for its accesses, in the order that keeps hooks sharing a position
//! right; [`Inserter`] builds the calls.

use kage_abi::symbols;
use llvm_sys::core::*;
use llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::LLVMIntPredicate;

use crate::debuginfo::HookLocations;
use crate::ir::{self, RuntimeFunction};
use crate::plan::FunctionPlan;
use crate::regions::RegionTable;

/// Inserts `plan`'s region hooks and, through `accesses`, the tool's instrumentation of its
/// accesses. The order keeps hooks sharing a position right: block-entry hooks first
/// (`__kage_func_enter`, `__kage_resume_at`, `__kage_loop_iter`, `__kage_settle` where the
/// open regions change, see [`FunctionPlan::settle_points`]; later
/// insertions before the same instruction land after them), then `accesses` (in program
/// order), then the function exits (so they come after a `cmpxchg`'s hook and a segment's
/// reports). What `skipped` lists gets no hook: the tool reports those regions itself.
/// Every position is taken before anything is inserted.
///
/// # Safety
/// `plan` must describe a live function that nothing was inserted into yet, and `ins` be
/// made for it.
pub unsafe fn insert(
    plan: &FunctionPlan,
    ins: &mut Inserter,
    skipped: &Skipped,
    accesses: impl FnOnce(&mut Inserter),
) {
    let skipped_loops = skipped.loops;
    let entry_block = plan.cfg.blocks[0];
    let function_region = plan.slots.function();
    let func_enter_at = ir::first_insertion_point(entry_block);
    let loop_iters: Vec<_> = (plan.forest.loops.iter().enumerate())
        .filter(|(k, _)| !skipped_loops.contains(k))
        .filter(|&(k, _)| !skipped.folded.contains(&plan.tree().loop_node[k]))
        .filter_map(|(k, lp)| Some((ir::first_insertion_point(plan.cfg.blocks[lp.header])?, k)))
        .collect();
    let settles: Vec<_> = (plan.settle_points_folding(skipped.folded).into_iter())
        .filter_map(|(block, region)| {
            Some((ir::first_insertion_point(plan.cfg.blocks[block])?, region))
        })
        .collect();
    let hooks = ins.hooks;
    if let Some(at) = func_enter_at {
        ins.frame_hook(hooks.func_enter, function_region, at);
    }
    for &(at, block) in &plan.resume_points {
        ins.frame_hook(hooks.resume_at, plan.slots.block_region(block), at);
    }
    for (at, k) in loop_iters {
        ins.region_hook(hooks.loop_iter, plan.slots.loop_entry(k), at);
    }
    for (at, region) in settles {
        ins.region_hook(hooks.settle, region, at);
    }
    accesses(ins);
    for &at in &plan.exits {
        ins.region_hook(hooks.func_exit, function_region, at);
    }
}

/// The hooks a tool leaves out of [`insert`] because it reports those regions itself.
#[derive(Clone, Copy, Default)]
pub struct Skipped<'a> {
    /// Loops without `__kage_loop_iter`.
    pub loops: &'a [usize],
    /// Regions (nodes of the plan's tree, whose children are listed too) no
    /// `__kage_settle` enters or leaves, nor `__kage_loop_iter`: their blocks count as
    /// their parents'.
    pub folded: &'a [usize],
}

/// The runtime's region hooks and `__kage_cmpxchg`, declared from [`kage_abi::symbols`].
pub struct Hooks {
    pub func_enter: RuntimeFunction,
    pub func_exit: RuntimeFunction,
    pub loop_iter: RuntimeFunction,
    /// The inline helper that calls `__kage_settle(r)` unless `r` is the thread's
    /// `__kage_innermost` ([`define_settle`]).
    pub settle: RuntimeFunction,
    pub resume_at: RuntimeFunction,
    /// `llvm.addressofreturnaddress`: where the return address of the current activation
    /// lives, i.e. the stack pointer at the function's entry. The runtime orders function
    /// activations by it, whatever size their frames have.
    frame_address: LLVMValueRef,
    frame_address_type: LLVMTypeRef,
    cmpxchg: RuntimeFunction,
    i32_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
}

impl Hooks {
    /// Declares the hooks in `module`.
    ///
    /// # Safety
    /// `module` must be valid.
    pub unsafe fn declare(module: LLVMModuleRef) -> Self {
        let context = LLVMGetModuleContext(module);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let frame_address_type = LLVMFunctionType(ptr_type, std::ptr::null_mut(), 0, 0);
        let declare = |symbol| RuntimeFunction::declare(module, symbol);
        Hooks {
            func_enter: declare(&symbols::FUNC_ENTER),
            func_exit: declare(&symbols::FUNC_EXIT),
            loop_iter: define_unless_innermost(
                module,
                "__kage_loop_iter_unless_iterating",
                declare(&symbols::LOOP_ITER),
                kage_abi::layout::REGION_SIZE as u64,
            ),
            settle: define_unless_innermost(
                module,
                "__kage_settle_unless_innermost",
                declare(&symbols::SETTLE),
                0,
            ),
            resume_at: declare(&symbols::RESUME_AT),
            frame_address: {
                let name = c"llvm.addressofreturnaddress.p0";
                let existing = LLVMGetNamedFunction(module, name.as_ptr());
                if existing.is_null() {
                    LLVMAddFunction(module, name.as_ptr(), frame_address_type)
                } else {
                    existing
                }
            },
            frame_address_type,
            cmpxchg: declare(&symbols::CMPXCHG),
            i32_type: LLVMInt32TypeInContext(context),
            i64_type: LLVMInt64TypeInContext(context),
        }
    }
}

/// The inline helper `void name(ptr r)`: calls `hook(r)` unless the thread's
/// `__kage_innermost` is the entry `offset` bytes after `r`: `__kage_settle_unless_innermost`
/// (offset 0: a settle to the innermost region changes nothing) and
/// `__kage_loop_iter_unless_iterating` (the loop's body, the next entry: the runtime publishes
/// a body only for tools to which a new iteration changes nothing). docs/abi.md, "Hooks the
/// pass inserts".
///
/// # Safety
/// `module` must be valid and hold `hook`.
unsafe fn define_unless_innermost(
    module: LLVMModuleRef,
    name: &str,
    hook: RuntimeFunction,
    offset: u64,
) -> RuntimeFunction {
    let context = LLVMGetModuleContext(module);
    let ptr_type = LLVMPointerTypeInContext(context, 0);
    let mut params = [ptr_type];
    let ty = LLVMFunctionType(LLVMVoidTypeInContext(context), params.as_mut_ptr(), 1, 0);
    let existing = LLVMGetNamedFunction(module, ir::c_string(name).as_ptr());
    if !existing.is_null() {
        return RuntimeFunction::helper(existing, ty);
    }
    let f = ir::define_inline_helper(module, name, ty);
    let region = LLVMGetParam(f, 0);
    let innermost = ir::declare_runtime_global(module, &symbols::INNERMOST);
    let builder = LLVMCreateBuilderInContext(context);
    let block = |name: &std::ffi::CStr| LLVMAppendBasicBlockInContext(context, f, name.as_ptr());
    let (entry, call, done) = (block(c"entry"), block(c"call"), block(c"done"));
    LLVMPositionBuilderAtEnd(builder, entry);
    let address = ir::thread_local_address(module, builder, innermost);
    let current = ir::load_relaxed(builder, ptr_type, address);
    let skipped_if = if offset == 0 {
        region
    } else {
        let i8_type = LLVMInt8TypeInContext(context);
        let mut index = [LLVMConstInt(LLVMInt64TypeInContext(context), offset, 0)];
        LLVMBuildInBoundsGEP2(
            builder,
            i8_type,
            region,
            index.as_mut_ptr(),
            1,
            c"".as_ptr(),
        )
    };
    let same = LLVMBuildICmp(
        builder,
        LLVMIntPredicate::LLVMIntEQ,
        current,
        skipped_if,
        c"".as_ptr(),
    );
    LLVMBuildCondBr(builder, same, done, call);
    LLVMPositionBuilderAtEnd(builder, call);
    hook.call(builder, &mut [region]);
    LLVMBuildBr(builder, done);
    LLVMPositionBuilderAtEnd(builder, done);
    LLVMBuildRetVoid(builder);
    LLVMDisposeBuilder(builder);
    RuntimeFunction::helper(f, ty)
}

/// Builds hook calls inside one function.
pub struct Inserter<'a> {
    pub builder: LLVMBuilderRef,
    pub hooks: &'a Hooks,
    pub table: &'a RegionTable,
    locations: HookLocations,
}

impl<'a> Inserter<'a> {
    /// An inserter for `func`, building with `builder`.
    ///
    /// # Safety
    /// `func` must be a function of `module`, which holds `hooks` and `table`.
    pub unsafe fn new(
        module: LLVMModuleRef,
        func: LLVMValueRef,
        builder: LLVMBuilderRef,
        hooks: &'a Hooks,
        table: &'a RegionTable,
    ) -> Self {
        Inserter {
            builder,
            hooks,
            table,
            locations: HookLocations::new(module, func),
        }
    }

    /// Positions the builder before `at`, with `at`'s hook debug location.
    ///
    /// # Safety
    /// `at` must be an instruction of the function this inserter was made for.
    pub unsafe fn position_before(&mut self, at: LLVMValueRef) {
        LLVMPositionBuilderBefore(self.builder, at);
        LLVMSetCurrentDebugLocation2(self.builder, self.locations.for_instruction(at));
    }

    /// The instruction right after `__kage_func_enter` in `entry` (the function's entry
    /// block, after [`insert`] placed its hooks), or `None` if it has none: where a tool's
    /// own hook for the new activation goes, before the region changes the entry block
    /// may start with (the entry of an inlined call that begins the function).
    ///
    /// # Safety
    /// `entry` must be a block of the function this inserter was made for.
    pub unsafe fn after_func_enter(&self, entry: LLVMBasicBlockRef) -> Option<LLVMValueRef> {
        let mut inst = LLVMGetFirstInstruction(entry);
        while !inst.is_null() {
            if !LLVMIsACallInst(inst).is_null()
                && ir::direct_callee(inst) == Some(self.hooks.func_enter.value)
            {
                let next = LLVMGetNextInstruction(inst);
                return (!next.is_null()).then_some(next);
            }
            inst = LLVMGetNextInstruction(inst);
        }
        None
    }

    /// `hook(region)` before `at`.
    unsafe fn region_hook(&mut self, hook: RuntimeFunction, region: u32, at: LLVMValueRef) {
        self.position_before(at);
        let region_ptr = self.table.region_ptr(region);
        hook.call(self.builder, &mut [region_ptr]);
    }

    /// A region hook that also passes the current activation's frame address.
    unsafe fn frame_hook(&mut self, hook: RuntimeFunction, region: u32, at: LLVMValueRef) {
        self.position_before(at);
        let region_ptr = self.table.region_ptr(region);
        let frame = self.frame_address();
        hook.call(self.builder, &mut [region_ptr, frame]);
    }

    /// At the builder's position: the current activation's frame address (where its
    /// return address lives), which identifies the activation to the runtime.
    ///
    /// # Safety
    /// The builder must be positioned in the function this inserter was made for.
    pub unsafe fn frame_address(&mut self) -> LLVMValueRef {
        LLVMBuildCall2(
            self.builder,
            self.hooks.frame_address_type,
            self.hooks.frame_address,
            std::ptr::null_mut(),
            0,
            c"".as_ptr(),
        )
    }

    /// `__kage_cmpxchg(ptr, size, stored)` right after the `cmpxchg` `inst`, with its own
    /// location: whether it wrote is known only then.
    ///
    /// # Safety
    /// `inst` must be a `cmpxchg` of the function this inserter was made for.
    pub unsafe fn cmpxchg_hook(&mut self, inst: LLVMValueRef, ptr: LLVMValueRef, size: u64) {
        // A cmpxchg is never a terminator.
        let next = LLVMGetNextInstruction(inst);
        if next.is_null() {
            return;
        }
        LLVMPositionBuilderBefore(self.builder, next);
        LLVMSetCurrentDebugLocation2(self.builder, self.locations.for_instruction(inst));
        let success = LLVMBuildExtractValue(self.builder, inst, 1, c"".as_ptr());
        let stored = LLVMBuildZExt(self.builder, success, self.hooks.i32_type, c"".as_ptr());
        let size = LLVMConstInt(self.hooks.i64_type, size, 0);
        self.hooks
            .cmpxchg
            .call(self.builder, &mut [ptr, size, stored]);
    }
}
