//! The builds that version loop nests (`KAGE_TOOL=loops`, `interpolate`, `dependences`:
//! instrumentations 5 to 7): the selected nests were versioned at the start of the pipeline
//! ([`crate::nests`], which also made the instrumented versions report their accesses for
//! the last two); here nothing more is inserted. The module still gets its region table and registration, which start the
//! runtime and tell it the build's tool.

use kage_abi::Instrumentation;
use llvm_sys::prelude::LLVMModuleRef;

use super::{Settings, Tool};
use crate::plan::FunctionPlan;
use crate::regions::RegionTable;

/// The selected nests' versions call the runtime themselves.
pub struct Loops(Instrumentation);

/// The `loops` build; its setting (`KAGE_LOOPS`) is read where the nests are versioned.
pub fn make(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(Loops(Instrumentation::Loops))
}

/// The `interpolate` build.
pub fn make_interpolate(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(Loops(Instrumentation::Interpolate))
}

/// The `dependences` build.
pub fn make_dependences(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(Loops(Instrumentation::Dependences))
}

impl Tool for Loops {
    fn instrumentation(&self) -> Instrumentation {
        self.0
    }

    unsafe fn instrument(&self, _: LLVMModuleRef, _: &[FunctionPlan], _: &RegionTable) {}
}
