//! The tools' instrumentations: each is one module behind [`Tool`], built on the shared
//! machinery below it (plans, segments, the hoisting planner, the region hooks) and never
//! on another tool's module; [`TOOLS`] maps each `KAGE_TOOL` value to its tool.
//!
//! Adding a tool's instrumentation: a module here implementing [`Tool`] with a `make`
//! function, a [`TOOLS`] row, and its `KAGE_TOOL` value in `kage_abi::BUILD_TOOLS` (with a
//! new `kage_abi::Instrumentation` when its code needs a runtime tool of its own). See
//! ARCHITECTURE.md, "Adding a tool".

pub mod count;
pub mod footprint;
pub mod hcpa;
pub mod loops;
pub mod working_set;

use std::sync::Mutex;

use kage_abi::{Instrumentation, TOOL_VARIABLE};
use llvm_sys::prelude::LLVMModuleRef;

use crate::plan::FunctionPlan;
use crate::regions::RegionTable;

/// What one tool does to a module. The driver ([`crate::pass`]) has planned every function
/// and emitted the region table; the tool inserts its instrumentation, then the driver adds
/// the registration.
pub trait Tool {
    /// `kage_module.instrumentation` of the modules it builds.
    fn instrumentation(&self) -> Instrumentation;

    /// `kage_module.line_shift`: log2 of a line size built into the code, 0 for none.
    fn line_shift(&self) -> u32 {
        0
    }

    /// Instruments the functions of `plans`, which are all of `module`'s instrumented ones,
    /// analysed before anything was changed; `table` is the module's region table.
    ///
    /// # Safety
    /// `module` must be valid and nothing else mutate it meanwhile; `plans` and `table` must
    /// have been made from it, and no function changed since but for the driver dropping
    /// attributes.
    unsafe fn instrument(&self, module: LLVMModuleRef, plans: &[FunctionPlan], table: &RegionTable);

    /// Whether the tool sees the memory effects of C library functions (`strlen`, `memcmp`,
    /// `fread`...: [`crate::library`]): the driver marks them as bulk accesses before
    /// planning, and removes the marks after [`Tool::instrument`]. The instrumentations
    /// that call `__kage_library_compared` (`kage_abi::symbols::LIBRARY_EFFECTS`).
    fn sees_library_effects(&self) -> bool {
        kage_abi::symbols::LIBRARY_EFFECTS.contains(&self.instrumentation())
    }

    /// Whether the module needs the clean-up passes the C++ shim runs after inlining the
    /// `alwaysinline` helpers (src/shim.cpp): promoting the helpers' locals to registers,
    /// merging their repeated loads and threading their branches.
    fn needs_cleanup(&self) -> bool {
        false
    }
}

/// Reads a build's settings: the compiler's environment, or a test's table.
pub struct Settings<'a> {
    read: &'a dyn Fn(&str) -> Option<String>,
    warnings: Vec<String>,
}

impl<'a> Settings<'a> {
    /// Settings read through `read` (`None`: unset).
    pub fn new(read: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Settings {
            read,
            warnings: Vec::new(),
        }
    }

    /// The value of the variable `name`, if set.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.read)(name)
    }

    /// Notes a problem with a setting; the build goes on with a fallback.
    pub fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// The warnings noted so far.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// One registered tool: the `KAGE_TOOL` value that selects it, and how to make it from the
/// build's settings (its own variables, such as `KAGE_WS_LINE_SIZE`).
pub struct Registration {
    pub name: &'static str,
    pub make: fn(&mut Settings) -> Box<dyn Tool>,
}

/// Every tool's instrumentation. Its names are exactly `kage_abi::BUILD_TOOLS`'s (tested).
pub static TOOLS: &[Registration] = &[
    Registration {
        name: "count",
        make: count::make,
    },
    Registration {
        name: "count-calls",
        make: count::make_calls,
    },
    Registration {
        name: "working-set",
        make: working_set::make,
    },
    Registration {
        name: "footprint",
        make: footprint::make,
    },
    Registration {
        name: "hcpa",
        make: hcpa::make,
    },
    Registration {
        name: "loops",
        make: loops::make,
    },
    Registration {
        name: "interpolate",
        make: loops::make_interpolate,
    },
    Registration {
        name: "dependences",
        make: loops::make_dependences,
    },
    Registration {
        name: "select",
        make: loops::make_select,
    },
];

/// The tool `KAGE_TOOL` selects (unset or empty: `count`). An unknown name falls back to
/// `count`, which works with every runtime tool, with a warning (the wrapper rejects unknown
/// tools earlier; this is a fallback).
pub fn select(settings: &mut Settings) -> Box<dyn Tool> {
    let name = settings.get(TOOL_VARIABLE).unwrap_or_default();
    let name = if name.is_empty() { "count" } else { &name };
    match TOOLS.iter().find(|t| t.name == name) {
        Some(tool) => (tool.make)(settings),
        None => {
            settings.warn(format!(
                "kage-pass: unknown {TOOL_VARIABLE} '{name}'; instrumenting for every tool"
            ));
            count::make_calls(settings)
        }
    }
}

/// The tool the compiler's environment selects; each warning is printed once per process
/// (clang runs the pass once per module, and a process may compile several).
pub fn from_environment() -> Box<dyn Tool> {
    static PRINTED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let read = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    let mut settings = Settings::new(&read);
    let tool = select(&mut settings);
    if let Ok(mut printed) = PRINTED.lock() {
        for warning in settings.warnings() {
            if !printed.contains(warning) {
                eprintln!("{warning}");
                printed.push(warning.clone());
            }
        }
    }
    tool
}

#[cfg(test)]
mod tests {
    use super::*;
    use kage_abi::Instrumentation::*;

    /// The tool and warnings for a table of settings.
    fn select_with(vars: &[(&str, &str)]) -> (Box<dyn Tool>, Vec<String>) {
        let read = |name: &str| {
            (vars.iter())
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        let mut settings = Settings::new(&read);
        let tool = select(&mut settings);
        (tool, settings.warnings().to_vec())
    }

    fn instrumentation(vars: &[(&str, &str)]) -> Instrumentation {
        let (tool, warnings) = select_with(vars);
        assert!(warnings.is_empty(), "{warnings:?}");
        tool.instrumentation()
    }

    #[test]
    fn registry_matches_the_abi_build_tools() {
        let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        let abi: Vec<&str> = kage_abi::BUILD_TOOLS.iter().map(|t| t.name).collect();
        assert_eq!(names, abi);
        for build in kage_abi::BUILD_TOOLS {
            assert_eq!(
                instrumentation(&[(TOOL_VARIABLE, build.name)]),
                build.instrumentation
            );
            let (trace, _) = select_with(&[(TOOL_VARIABLE, build.name), ("KAGE_WS_TRACE", "1")]);
            // The trace switch turns only the working-set build into its trace build.
            let traced = match build.instrumentation {
                WorkingSet => WorkingSetTrace,
                other => other,
            };
            assert_eq!(trace.instrumentation(), traced);
        }
    }

    #[test]
    fn unset_empty_and_count_select_counts_and_footprint_its_own() {
        assert_eq!(instrumentation(&[]), Counts);
        assert_eq!(instrumentation(&[(TOOL_VARIABLE, "")]), Counts);
        assert_eq!(instrumentation(&[(TOOL_VARIABLE, "count")]), Counts);
        assert_eq!(instrumentation(&[(TOOL_VARIABLE, "count-calls")]), Calls);
        assert_eq!(instrumentation(&[(TOOL_VARIABLE, "footprint")]), Footprint);
        // The trace switch only means something for the working-set tool.
        let trace = ("KAGE_WS_TRACE", "1");
        assert_eq!(instrumentation(&[(TOOL_VARIABLE, "count"), trace]), Counts);
        assert_eq!(instrumentation(&[trace]), Counts);
    }

    #[test]
    fn working_set_with_and_without_trace() {
        let ws = (TOOL_VARIABLE, "working-set");
        assert_eq!(instrumentation(&[ws]), WorkingSet);
        assert_eq!(instrumentation(&[ws, ("KAGE_WS_TRACE", "0")]), WorkingSet);
        assert_eq!(instrumentation(&[ws, ("KAGE_WS_TRACE", "")]), WorkingSet);
        assert_eq!(
            instrumentation(&[ws, ("KAGE_WS_TRACE", "1")]),
            WorkingSetTrace
        );
        let (tool, _) = select_with(&[ws]);
        assert!(tool.needs_cleanup());
        assert_eq!(tool.line_shift(), 6);
        let (tool, _) = select_with(&[(TOOL_VARIABLE, "footprint")]);
        assert!(!tool.needs_cleanup());
        assert_eq!(tool.line_shift(), 0);
    }

    #[test]
    fn unknown_tool_falls_back_to_calls_with_a_warning() {
        let (tool, warnings) =
            select_with(&[(TOOL_VARIABLE, "workingset"), ("KAGE_WS_TRACE", "1")]);
        assert_eq!(tool.instrumentation(), Calls);
        assert_eq!(
            warnings,
            ["kage-pass: unknown KAGE_TOOL 'workingset'; instrumenting for every tool"]
        );
    }
}
