//! The `working-set` tool's part of the report: the distinct cache lines the program touched
//! per interval (snapshots), and how many snapshots fit in each cache of the machine.

use super::Report;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The value of `"tool"` in a report of the working-set tool.
pub const WORKING_SET_TOOL: &str = "working-set";

impl Report {
    /// The working-set tool's fields, or why they cannot be read (missing, or not as
    /// documented). Only meaningful when `tool` is [`WORKING_SET_TOOL`].
    pub fn working_set(&self) -> Result<WorkingSet, serde_json::Error> {
        WorkingSet::from_tool_data(&self.tool_data)
    }
}

/// The working-set tool's top-level fields (`docs/report-schema.md`, "Tool `working-set`"),
/// flattened into the report's JSON object beside the common fields. Read one with
/// [`Report::working_set`]; fields this crate does not know are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkingSet {
    /// Bytes per cache line.
    pub line_size: u64,
    /// The unit of every snapshot's `start` and `end`.
    pub interval_unit: IntervalUnit,
    /// The interval length in force at the end (after adaptive doubling), in `interval_unit`.
    pub interval: u64,
    /// The interval length at the start, in `interval_unit`.
    pub initial_interval: u64,
    /// How many times the snapshot store was full and pairs of snapshots were merged.
    pub merges: u64,
    /// How the program was instrumented.
    pub instrumentation: Instrumentation,
    /// Memory accesses counted (each access site execution once).
    pub accesses: u64,
    /// Wall-clock time from the runtime's start to the report.
    pub duration_seconds: f64,
    /// Distinct lines over the whole run.
    pub total_lines: u64,
    /// The largest `lines` of any snapshot.
    pub peak_lines: u64,
    /// The index of the snapshot with `peak_lines`.
    pub peak_snapshot: Option<usize>,
    /// This machine's data caches, smallest first.
    pub caches: Vec<CacheFit>,
    /// In time order; consecutive and non-overlapping.
    pub snapshots: Vec<Snapshot>,
}

/// What a working-set interval is measured in (`interval_unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntervalUnit {
    /// Memory accesses.
    Accesses,
    /// Nanoseconds of wall-clock time.
    WallNs,
    /// Nanoseconds of the process's CPU time.
    CpuNs,
    /// Instructions retired (hardware counter).
    Instructions,
}

impl IntervalUnit {
    /// The name in the report: `accesses`, `wall-ns`, `cpu-ns`, `instructions`.
    pub fn as_str(self) -> &'static str {
        match self {
            IntervalUnit::Accesses => "accesses",
            IntervalUnit::WallNs => "wall-ns",
            IntervalUnit::CpuNs => "cpu-ns",
            IntervalUnit::Instructions => "instructions",
        }
    }

    /// True for the units counted in nanoseconds.
    pub fn is_time(self) -> bool {
        matches!(self, IntervalUnit::WallNs | IntervalUnit::CpuNs)
    }
}

/// How a working-set program was instrumented (`instrumentation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Instrumentation {
    /// Inline marking, built with `KAGE_TOOL=working-set`.
    Inline,
    /// Inline marking plus a trace call per access (test-only).
    Trace,
    /// The hooks every tool uses: a call per access.
    Calls,
}

impl Instrumentation {
    pub fn as_str(self) -> &'static str {
        match self {
            Instrumentation::Inline => "inline",
            Instrumentation::Trace => "trace",
            Instrumentation::Calls => "calls",
        }
    }
}

/// One snapshot: the distinct cache lines of one interval, or of several adjacent intervals
/// when the store was full and they were merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Where the interval begins, in the report's `interval_unit` since the start.
    pub start: u64,
    /// Where the interval ends, in `interval_unit` since the start.
    pub end: u64,
    /// `start` in wall-clock seconds since the start.
    pub start_seconds: f64,
    /// `end` in wall-clock seconds since the start.
    pub end_seconds: f64,
    /// The first and last raw interval number it covers (equal unless merged).
    pub intervals: [u64; 2],
    /// Distinct lines touched during it (merged: the union, never a sum).
    pub lines: u64,
    /// Of those, lines no earlier snapshot touched.
    pub new_lines: u64,
    /// Distinct lines touched from the start to its end.
    pub cumulative_lines: u64,
    /// The region stack at its end, outermost first (ids into the report's `regions`).
    pub regions: Vec<u32>,
}

impl Snapshot {
    /// True when it covers more than one raw interval.
    pub fn is_merged(&self) -> bool {
        self.intervals[1] > self.intervals[0]
    }

    /// The innermost region of its stack, if any.
    pub fn innermost_region(&self) -> Option<u32> {
        self.regions.last().copied()
    }
}

/// One data cache of the machine that ran the program, and how many snapshots fit in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheFit {
    /// 1, 2, 3.
    pub level: u32,
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// `size_bytes / line_size`.
    pub lines: u64,
    /// The share (0..1) of snapshots whose `lines` fit in this cache.
    pub fit_share: f64,
}

impl CacheFit {
    /// "L1d", "L2", "L3": the caches are data caches, and only level 1 is split.
    pub fn name(&self) -> String {
        if self.level == 1 {
            "L1d".to_string()
        } else {
            format!("L{}", self.level)
        }
    }
}

impl WorkingSet {
    /// Reads the working-set fields out of a report's tool data.
    pub fn from_tool_data(tool_data: &Map<String, Value>) -> Result<WorkingSet, serde_json::Error> {
        WorkingSet::deserialize(&Value::Object(tool_data.clone()))
    }

    /// The fields as they go into [`Report::tool_data`].
    pub fn to_tool_data(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            // A struct of plain data always serialises to an object.
            _ => Map::new(),
        }
    }

    /// Bytes in `lines` cache lines.
    pub fn bytes(&self, lines: u64) -> u64 {
        lines.saturating_mul(self.line_size)
    }
}
