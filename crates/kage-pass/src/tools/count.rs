//! The `count` build (instrumentation 0, `KAGE_TOOL` unset or `count`): the region hooks and
//! a call per access of docs/abi.md, which every runtime tool understands.

use kage_abi::Instrumentation;
use llvm_sys::core::*;
use llvm_sys::prelude::LLVMModuleRef;

use super::{Settings, Tool};
use crate::hooks::{self, Hooks, Inserter};
use crate::plan::FunctionPlan;
use crate::regions::RegionTable;

/// Region hooks and a call per access.
pub struct Count;

/// The `count` build; it has no settings of its own.
pub fn make(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(Count)
}

impl Tool for Count {
    fn instrumentation(&self) -> Instrumentation {
        Instrumentation::Calls
    }

    unsafe fn instrument(
        &self,
        module: LLVMModuleRef,
        plans: &[FunctionPlan],
        table: &RegionTable,
    ) {
        let hooks = Hooks::declare(module);
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        for plan in plans {
            let mut ins = Inserter::new(module, plan.func, builder, &hooks, table);
            hooks::insert(plan, &mut ins, &[], |ins| {
                for access in &plan.accesses {
                    ins.access_hook(access);
                }
            });
        }
        LLVMDisposeBuilder(builder);
    }
}
