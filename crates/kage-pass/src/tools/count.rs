//! The `count` build (instrumentation 0, `KAGE_TOOL` unset or `count`): the region hooks and
//! a call per access of docs/abi.md, which every runtime tool understands.

use kage_abi::{symbols, Instrumentation};
use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMModuleRef, LLVMTypeRef};

use super::{Settings, Tool};
use crate::access::Access;
use crate::hooks::{self, Hooks, Inserter};
use crate::ir::RuntimeFunction;
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
        let calls = AccessCalls {
            load: RuntimeFunction::declare(module, &symbols::LOAD),
            store: RuntimeFunction::declare(module, &symbols::STORE),
            i64_type: LLVMInt64TypeInContext(LLVMGetModuleContext(module)),
        };
        let builder = LLVMCreateBuilderInContext(LLVMGetModuleContext(module));
        for plan in plans {
            let mut ins = Inserter::new(module, plan.func, builder, &hooks, table);
            hooks::insert(plan, &mut ins, &[], |ins| {
                for access in &plan.accesses {
                    calls.insert(ins, access);
                }
            });
        }
        LLVMDisposeBuilder(builder);
    }
}

/// `__kage_load` and `__kage_store`.
struct AccessCalls {
    load: RuntimeFunction,
    store: RuntimeFunction,
    i64_type: LLVMTypeRef,
}

impl AccessCalls {
    /// The calls of docs/abi.md's table for one access: `__kage_load`/`__kage_store` before
    /// it, or `__kage_cmpxchg` after a `cmpxchg`.
    ///
    /// # Safety
    /// `access` must be an access of the function `ins` was made for.
    unsafe fn insert(&self, ins: &mut Inserter, access: &Access) {
        match *access {
            Access::Plain {
                at,
                ptr,
                size,
                load,
                store,
            } => {
                ins.position_before(at);
                let size = LLVMConstInt(self.i64_type, size, 0);
                if load {
                    self.load.call(ins.builder, &mut [ptr, size]);
                }
                if store {
                    self.store.call(ins.builder, &mut [ptr, size]);
                }
            }
            Access::CmpXchg { inst, ptr, size } => ins.cmpxchg_hook(inst, ptr, size),
            Access::Intrinsic { at, dst, src, len } => {
                ins.position_before(at);
                let len = LLVMBuildIntCast2(ins.builder, len, self.i64_type, 0, c"".as_ptr());
                if let Some(src) = src {
                    self.load.call(ins.builder, &mut [src, len]);
                }
                self.store.call(ins.builder, &mut [dst, len]);
            }
        }
    }
}
