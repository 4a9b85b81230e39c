//! The report's data model. Field names are the JSON schema (`docs/report-schema.md`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The value of the `"format"` field: how a reader recognises a Kage report.
pub const FORMAT_NAME: &str = "kage-report";
/// The schema version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// One report, as written by one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// Always [`FORMAT_VERSION`] for reports this crate writes.
    pub version: u32,
    /// The tool that wrote the report (`count`, ...).
    pub tool: String,
    /// Absolute path of the program's executable.
    pub program: String,
    /// The program's command line, `argv[0]` first.
    #[serde(default)]
    pub args: Vec<String>,
    /// The process that wrote this report.
    pub pid: u32,
    /// The parent process when this process is a forked child of an instrumented program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<u32>,
    /// How the program ended.
    pub end: ProgramEnd,
    /// False when the report was written from a fatal signal handler: counts in regions that
    /// other threads had open at that moment may be missing.
    pub complete: bool,
    /// Number of threads that ran instrumented code.
    pub threads: u32,
    /// The runtime options in force (every option, with its value).
    pub options: BTreeMap<String, String>,
    /// Every static region of every registered module.
    pub regions: Vec<Region>,
    /// Tool-level results (for `count`: `"totals"`).
    #[serde(flatten)]
    pub tool_data: Map<String, Value>,
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "kebab-case")]
pub enum ProgramEnd {
    /// `exit()` or a return from `main`, with its status.
    Exit { code: i32 },
    /// A fatal signal.
    Signal { signal: i32 },
}

/// What kind of code a region is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegionKind {
    Function,
    Loop,
    LoopBody,
}

impl RegionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RegionKind::Function => "function",
            RegionKind::Loop => "loop",
            RegionKind::LoopBody => "loop-body",
        }
    }
}

/// One static region: a function, a natural loop, or a loop's body (one iteration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Region {
    /// Dense id, unique within the report (the index in `regions`).
    pub id: u32,
    pub kind: RegionKind,
    /// The function's name (demangled for C++).
    pub name: String,
    /// The function's linkage name.
    #[serde(default)]
    pub symbol: String,
    /// Source file, "" when the module had no line tables.
    pub file: String,
    /// First source line, 0 when unknown.
    pub line: u32,
    /// Last source line, 0 when unknown.
    pub end_line: u32,
    /// The static parent region's id.
    pub parent: Option<u32>,
    /// Tool-specific per-region results (for `count`: see [`CountStats`]).
    #[serde(flatten)]
    pub metrics: Map<String, Value>,
}

/// Access counters of one region, in one direction of inclusion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    pub loads: u64,
    pub stores: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl Counters {
    pub fn add(&mut self, other: &Counters) {
        self.loads += other.loads;
        self.stores += other.stores;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
    }
}

/// The `count` tool's per-region results, flattened into the region's JSON object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountStats {
    /// Dynamic instances (calls, loop entries, iterations).
    pub instances: u64,
    /// Accesses made while the region or any region nested in it at run time was active.
    /// Recursive instances are counted once, in the outermost one.
    #[serde(flatten)]
    pub inclusive: Counters,
    /// Accesses made while the region was the innermost active one.
    #[serde(flatten, with = "self_prefixed")]
    pub exclusive: Counters,
}

impl CountStats {
    /// Reads the `count` fields of a region; `None` when they are absent or malformed.
    pub fn of(region: &Region) -> Option<CountStats> {
        serde_json::from_value(Value::Object(region.metrics.clone())).ok()
    }
}

/// Serialises [`Counters`] with every field name prefixed by `self_`.
mod self_prefixed {
    use super::Counters;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct SelfCounters {
        self_loads: u64,
        self_stores: u64,
        self_bytes_read: u64,
        self_bytes_written: u64,
    }

    pub fn serialize<S: Serializer>(c: &Counters, s: S) -> Result<S::Ok, S::Error> {
        SelfCounters {
            self_loads: c.loads,
            self_stores: c.stores,
            self_bytes_read: c.bytes_read,
            self_bytes_written: c.bytes_written,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Counters, D::Error> {
        let c = SelfCounters::deserialize(d)?;
        Ok(Counters {
            loads: c.self_loads,
            stores: c.self_stores,
            bytes_read: c.self_bytes_read,
            bytes_written: c.self_bytes_written,
        })
    }
}

impl Report {
    /// The region with this id.
    pub fn region(&self, id: u32) -> Option<&Region> {
        self.regions.get(id as usize).filter(|r| r.id == id)
    }

    /// The `count` tool's `"totals"`: every access the program made, whichever region it fell in.
    pub fn count_totals(&self) -> Option<Counters> {
        serde_json::from_value(self.tool_data.get("totals")?.clone()).ok()
    }
}
