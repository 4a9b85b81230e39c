//! What the pass learns about one function before changing anything: its CFG and loops,
//! its region entries, its memory accesses, and where control enters and leaves it (the
//! places the region hooks go). Every tool instruments from a [`FunctionPlan`].

use llvm_sys::core::*;
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::target::LLVMGetModuleDataLayout;
use llvm_sys::LLVMOpcode;

use crate::access::{classify_access, Access};
use crate::debuginfo;
use crate::ir::{self, FunctionCfg};
use crate::loops::{find_loops, LoopForest};
use crate::regions::{self, FunctionIdentity, FunctionSlots, LineRange, RegionEntry};

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
    /// Every memory access, in program order.
    pub accesses: Vec<Access>,
    /// Instructions before which `__kage_func_exit` goes (reachable `ret`/`resume`).
    pub exits: Vec<LLVMValueRef>,
    /// Where control may arrive from a `longjmp` or an unwinding exception, with the block
    /// it is in: before which `__kage_resume_at` goes.
    pub resume_points: Vec<(LLVMValueRef, usize)>,
}

impl FunctionPlan {
    /// Analyses `func`, whose table entries start at `slots`.
    ///
    /// # Safety
    /// `func` must be a function with a body in a valid module.
    pub unsafe fn new(func: LLVMValueRef, slots: FunctionSlots) -> Self {
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

    /// The function's entries of the region table.
    pub fn regions(&self) -> Vec<RegionEntry> {
        regions::plan_function(self.slots, &self.forest, &self.block_lines, &self.identity)
    }
}

/// Where `__kage_func_exit` goes for a `ret`/`resume`: right before it, unless the `ret`
/// returns a `musttail` call's result, since nothing may sit between that call and the
/// `ret`; then before the call (the callee's events then nest inside nothing of ours).
unsafe fn exit_insertion_point(terminator: LLVMValueRef) -> LLVMValueRef {
    ir::musttail_call_returned_by(terminator).unwrap_or(terminator)
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
