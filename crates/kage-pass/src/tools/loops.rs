//! The `loops` build (instrumentation 5, `KAGE_TOOL=loops`): the selected loop nests were
//! versioned at the start of the pipeline ([`crate::nests`]); here nothing more is
//! inserted. The module still gets its region table and registration, which start the
//! runtime and tell it the build's tool.

use kage_abi::Instrumentation;
use llvm_sys::prelude::LLVMModuleRef;

use super::{Settings, Tool};
use crate::plan::FunctionPlan;
use crate::regions::RegionTable;

/// The selected nests' versions call the runtime themselves.
pub struct Loops;

/// The `loops` build; its setting (`KAGE_LOOPS`) is read where the nests are versioned.
pub fn make(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(Loops)
}

impl Tool for Loops {
    fn instrumentation(&self) -> Instrumentation {
        Instrumentation::Loops
    }

    unsafe fn instrument(&self, _: LLVMModuleRef, _: &[FunctionPlan], _: &RegionTable) {}
}
