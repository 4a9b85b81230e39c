//! The builds that version loop nests (`KAGE_TOOL=loops`, `interpolate`, `dependences`,
//! `select`: instrumentations 5 to 8): the selected nests were versioned at the start of the
//! pipeline ([`crate::nests`], which also made the instrumented versions report their
//! accesses for interpolate and dependences, and made the `#pragma kage versions` switches
//! of select builds into versioned nests); here nothing more is inserted. The module still gets its region table and registration, which start the
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

/// The `select` build: its versioned nests ([`crate::nests::versions`]) call the runtime
/// themselves too.
pub fn make_select(_: &mut Settings) -> Box<dyn Tool> {
    Box::new(Loops(Instrumentation::Select))
}

impl Tool for Loops {
    fn instrumentation(&self) -> Instrumentation {
        self.0
    }

    unsafe fn instrument(&self, _: LLVMModuleRef, _: &[FunctionPlan], _: &RegionTable) {}
}
