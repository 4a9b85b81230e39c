//! The tools, and [`TOOLS`], the table `tool=` selects from.
//!
//! A tool is one module (implementing `crate::tool::{Tool, ThreadTool}`, declaring its
//! options as [`OptionDef`]s and defining the C entry points only its instrumentation
//! calls) plus one [`TOOLS`] row; nothing else changes. Which builds need which tool is
//! `kage_abi::Instrumentation::only_tool`, by the row's name. A tool imports only modules
//! below it (`tool`, `gate`, `options`, `registry`, `sync`, `chunked`, `stack`), never the
//! runtime, the common C ABI, the thread list or another tool (`tests/module_layers.rs`).

use crate::options::OptionDef;
use crate::tool::Tool;

pub mod count;
pub mod footprint;
pub mod hcpa;
pub mod loops;
pub mod select;
pub mod working_set;

/// A registered tool: `tool=<name>` selects it.
pub struct ToolInfo {
    pub name: &'static str,
    pub help: &'static str,
    pub make: fn() -> &'static dyn Tool,
    /// The tool's own options, beside the common ones (`options::COMMON`).
    pub options: &'static [OptionDef],
}

/// Every tool; the first is the default `tool=` and the fallback for an unknown one.
pub static TOOLS: &[ToolInfo] = &[
    ToolInfo {
        name: "count",
        help: "per-region instances, loads, stores and bytes (inclusive and self)",
        make: count::make,
        options: &[],
    },
    ToolInfo {
        name: "working-set",
        help:
            "distinct cache lines touched per interval over time (build with KAGE_TOOL=working-set \
           for the inline fast path)",
        make: working_set::make,
        options: working_set::options::OPTIONS,
    },
    ToolInfo {
        name: "footprint",
        help: "distinct bytes and lines each region instance touched (inclusive): per region \
           instances, average, minimum and maximum (options vsm=, granularity=, loop_bodies=)",
        make: footprint::make,
        options: footprint::OPTIONS,
    },
    ToolInfo {
        name: "hcpa",
        help: "hierarchical critical path analysis: per region work, critical path and \
           self-parallelism, for a parallelisation plan (build with KAGE_TOOL=hcpa; options \
           max_depth=, granule=, shadow=)",
        make: hcpa::make,
        options: hcpa::OPTIONS,
    },
    ToolInfo {
        name: "loops",
        help: "loop nests selected at build time (KAGE_TOOL=loops, KAGE_LOOPS=file.c:line or \
           #pragma kage profile): per nest entries, iterations per level, the iterations \
           sampled in the instrumented version (options sample_iterations=, sample_entries=)",
        make: loops::make,
        options: loops::OPTIONS,
    },
    ToolInfo {
        name: "interpolate",
        help: "the addresses of every memory instruction of the selected loop nests (built \
           with KAGE_TOOL=interpolate) fitted as affine functions of the loops' iterators, and \
           the inner loops' trip counts (sampling: the loops tool's options)",
        make: loops::make_interpolate,
        options: &[],
    },
    ToolInfo {
        name: "dependences",
        help: "the dependences each level of the selected loop nests carries (built with \
           KAGE_TOOL=dependences), the levels that can run in parallel and the OpenMP clause \
           for them (sampling: the loops tool's options)",
        make: loops::make_dependences,
        options: &[],
    },
    ToolInfo {
        name: "select",
        help: "nests written in versions (#pragma kage versions, built with KAGE_TOOL=select): \
           each chunk of a nest's outermost iterations in the version measured fastest, per \
           size of entry; the report gives every version's time per iteration and the \
           decisions (options version=, min_chunk_us=)",
        make: select::make,
        options: select::OPTIONS,
    },
];

/// The tool called `name`; an unknown name is an error that lists the tools.
pub fn select(name: &str) -> Result<&'static ToolInfo, String> {
    TOOLS.iter().find(|t| t.name == name).ok_or_else(|| {
        format!(
            "unknown tool '{name}'; available tools: {}",
            TOOLS.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
        )
    })
}

/// The default tool, which also stands in for an unknown one.
pub fn fallback() -> &'static ToolInfo {
    &TOOLS[0]
}

/// Every tool's option table, for `Options::parse`.
pub fn option_tables() -> Vec<&'static [OptionDef]> {
    TOOLS.iter().map(|t| t.options).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Options, COMMON, HELP, TOOL};

    #[test]
    fn select_tools() {
        assert_eq!(select("count").unwrap().name, "count");
        let e = select("nope").err().unwrap();
        assert!(e.contains("'nope'") && e.contains("count"), "{e}");
        assert_eq!(fallback().name, TOOL.default);
    }

    #[test]
    fn every_option_is_named_once_and_its_default_passes() {
        let all: Vec<&OptionDef> = (COMMON.iter())
            .chain(TOOLS.iter().flat_map(|t| t.options))
            .chain([&HELP])
            .collect();
        for (i, d) in all.iter().enumerate() {
            assert_eq!((d.parse)(d.default).as_deref(), Ok(d.default), "{}", d.name);
            assert!(
                all[i + 1..].iter().all(|e| e.name != d.name),
                "{} declared twice",
                d.name
            );
        }
        let (o, w) = Options::parse("", &option_tables());
        assert!(w.is_empty());
        assert_eq!(o.to_map().len(), all.len());
    }

    #[test]
    fn builds_name_tools() {
        for i in kage_abi::Instrumentation::ALL {
            if let Some(name) = i.only_tool() {
                assert!(select(name).is_ok(), "{i:?} builds need tool {name}");
            }
        }
    }
}
