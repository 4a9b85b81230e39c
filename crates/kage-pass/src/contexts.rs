//! Context switches: calls to `swapcontext` and `setcontext` go through the runtime
//! (`__kage_swapcontext`, `__kage_setcontext`), which keeps a region stack per context, so a
//! coroutine's regions are its own as a thread's are; after `makecontext` the runtime is told
//! that the context is made anew (`__kage_context_made`): its next run starts a new stack.

use kage_abi::{symbols, Symbol};
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMModuleRef, LLVMValueRef};
use llvm_sys::LLVMOpcode;

use crate::ir::{self, RuntimeFunction};

/// The libc functions whose calls are redirected, and the runtime function each goes to
/// (same signature).
const REDIRECTED: [(&str, Symbol); 2] = [
    ("swapcontext", symbols::SWAPCONTEXT),
    ("setcontext", symbols::SETCONTEXT),
];

/// Redirects the context switches of `functions` and follows each `makecontext` call with
/// the runtime's notice.
///
/// # Safety
/// `module` must be valid and hold `functions`.
pub unsafe fn redirect_context_switches(module: LLVMModuleRef, functions: &[LLVMValueRef]) {
    let mut calls: Vec<(LLVMValueRef, &str)> = Vec::new();
    for &func in functions {
        let mut block = LLVMGetFirstBasicBlock(func);
        while !block.is_null() {
            for inst in ir::instructions(block) {
                if !ir::is_call_site(inst) {
                    continue;
                }
                let Some(callee) = ir::direct_callee(inst) else {
                    continue;
                };
                let name = ir::value_name(callee);
                if let Some(&(libc_name, _)) = REDIRECTED.iter().find(|(n, _)| *n == name) {
                    calls.push((inst, libc_name));
                } else if name == "makecontext" && ir::opcode(inst) == LLVMOpcode::LLVMCall {
                    calls.push((inst, "makecontext"));
                }
            }
            block = LLVMGetNextBasicBlock(block);
        }
    }
    if calls.is_empty() {
        return;
    }
    let context = LLVMGetModuleContext(module);
    let builder = LLVMCreateBuilderInContext(context);
    for (call, name) in calls {
        if name == "makecontext" {
            let made = RuntimeFunction::declare(module, &symbols::CONTEXT_MADE);
            LLVMPositionBuilderBefore(builder, LLVMGetNextInstruction(call));
            made.call(builder, &mut [LLVMGetOperand(call, 0)]);
            continue;
        }
        let (_, symbol) = REDIRECTED.iter().find(|(n, _)| *n == name).expect("listed");
        let runtime = RuntimeFunction::declare(module, symbol);
        // The callee is a call site's last operand.
        LLVMSetOperand(call, (LLVMGetNumOperands(call) - 1) as u32, runtime.value);
    }
    LLVMDisposeBuilder(builder);
}
