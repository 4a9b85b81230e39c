//! The report's data model. Field names are the JSON schema (`docs/report-schema.md`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The value of the `"format"` field: how a reader recognises a Kage report.
pub const FORMAT_NAME: &str = "kage-report";
/// The schema version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// One report, as written by one process, as read: its regions in a `Vec`.
pub type Report = ReportOf<Vec<Region>>;

/// One report, as written by one process. `Regions` holds the region list: a `Vec<Region>`
/// when read ([`Report`]), or anything that serialises as a sequence of [`Region`]s when
/// written (the runtime makes each region's entry as it writes it, so that thousands of
/// regions never sit in memory as JSON maps all at once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportOf<Regions> {
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
    pub regions: Regions,
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

    /// The working-set tool's fields, or why they cannot be read (missing, or not as
    /// documented). Only meaningful when `tool` is [`WORKING_SET_TOOL`].
    pub fn working_set(&self) -> Result<WorkingSet, serde_json::Error> {
        WorkingSet::from_tool_data(&self.tool_data)
    }

    /// The footprint tool's fields (top level and every region's), or which one is missing or
    /// not as documented. Only meaningful when `tool` is [`FOOTPRINT_TOOL`].
    pub fn footprint(&self) -> Result<Footprint, FootprintError> {
        Footprint::from_report(self)
    }
}

/// The value of `"tool"` in a report of the working-set tool.
pub const WORKING_SET_TOOL: &str = "working-set";

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

/// The value of `"tool"` in a report of the footprint tool.
pub const FOOTPRINT_TOOL: &str = "footprint";

/// What the footprint tool counts as one memory location (`granularity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FootprintGranularity {
    /// Every byte is a location.
    Byte,
    /// Aligned 8-byte words.
    Word,
    /// Cache lines of `line_size` bytes.
    Line,
}

impl FootprintGranularity {
    /// The name in the report: `byte`, `word`, `line`.
    pub fn as_str(self) -> &'static str {
        match self {
            FootprintGranularity::Byte => "byte",
            FootprintGranularity::Word => "word",
            FootprintGranularity::Line => "line",
        }
    }
}

/// The footprint tool's top-level fields (`docs/report-schema.md`, "Tool `footprint`") and
/// every region's [`FootprintStats`]. Read one with [`Report::footprint`], which says which
/// field is missing or wrong; top-level fields this crate does not know are ignored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Footprint {
    /// What one location is.
    pub granularity: FootprintGranularity,
    /// Bytes per location: 1, 8 or `line_size`.
    pub location_bytes: u64,
    /// Bytes per cache line (what `*_lines` count in).
    pub line_size: u64,
    /// The shadow-memory implementation that recorded it (`baseline`, `slim`, `bulk`, ...).
    pub vsm: String,
    /// The sum over threads of the distinct bytes each thread touched (with one thread, the
    /// program's footprint). Every region's `share` is relative to it.
    pub total_bytes: u64,
    /// The same in cache lines.
    pub total_lines: u64,
    /// The deepest nesting of dynamic regions.
    pub max_depth: u64,
    /// Memory accesses recorded.
    pub accesses: u64,
    /// The shadow memory's peak heap use, in bytes.
    pub shadow_peak_bytes: u64,
    /// Optional: whether loop bodies were measured (an instance per iteration); when false,
    /// every loop body has 0 instances.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_bodies: Option<bool>,
    /// Optional: region instances nested too deep for the shadow memory, which are in no
    /// region's statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untracked_instances: Option<u64>,
    /// Each region's footprint, indexed by region id (the report's `regions` order). Not a
    /// top-level field: it comes from each region's `"footprint"` object.
    #[serde(skip)]
    pub regions: Vec<FootprintStats>,
}

/// One static region's footprints over its dynamic instances: the `"footprint"` object of a
/// region in a footprint report. A footprint is the number of distinct locations an instance
/// touched, inclusive of the regions that ran inside it (loops, callees). A region never
/// entered has 0 instances and zeros everywhere.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FootprintStats {
    /// Dynamic instances (calls, loop entries, iterations).
    pub instances: u64,
    /// Average footprint of an instance, in bytes (locations × `location_bytes`).
    pub avg_bytes: f64,
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// Average footprint of an instance in distinct cache lines.
    pub avg_lines: f64,
    pub min_lines: u64,
    pub max_lines: u64,
    /// `max_bytes / total_bytes`: the largest instance's share of the program's footprint.
    pub share: f64,
}

/// Why the footprint fields of a report cannot be read. The `Display` text names the field
/// and, for a region's field, the region.
#[derive(Debug, Clone, PartialEq)]
pub enum FootprintError {
    /// A top-level field is missing.
    MissingField(&'static str),
    /// A top-level field is there but not of the documented type.
    InvalidField {
        field: &'static str,
        problem: String,
    },
    /// A region has no `"footprint"` object.
    MissingRegion { region: u32 },
    /// A field of a region's `"footprint"` is missing (`problem` is `None`) or not of the
    /// documented type.
    InvalidRegion {
        region: u32,
        field: &'static str,
        problem: Option<String>,
    },
}

impl std::fmt::Display for FootprintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FootprintError::MissingField(field) => write!(f, "the field \"{field}\" is missing"),
            FootprintError::InvalidField { field, problem } => {
                write!(f, "the field \"{field}\" is not as documented: {problem}")
            }
            FootprintError::MissingRegion { region } => {
                write!(f, "region {region} has no \"footprint\" object")
            }
            FootprintError::InvalidRegion {
                region,
                field,
                problem: None,
            } => write!(f, "region {region}: \"footprint\" has no \"{field}\""),
            FootprintError::InvalidRegion {
                region,
                field,
                problem: Some(problem),
            } => write!(
                f,
                "region {region}: \"footprint\".\"{field}\" is not as documented: {problem}"
            ),
        }
    }
}

impl std::error::Error for FootprintError {}

impl FootprintStats {
    /// Reads a region's `"footprint"` object.
    pub fn of(region: &Region) -> Result<FootprintStats, FootprintError> {
        let object = match region.metrics.get("footprint") {
            Some(Value::Object(object)) => object,
            _ => return Err(FootprintError::MissingRegion { region: region.id }),
        };
        fn field<T: serde::de::DeserializeOwned>(
            object: &Map<String, Value>,
            region: u32,
            field: &'static str,
        ) -> Result<T, FootprintError> {
            read_field(object, field).map_err(|problem| FootprintError::InvalidRegion {
                region,
                field,
                problem,
            })
        }
        let id = region.id;
        Ok(FootprintStats {
            instances: field(object, id, "instances")?,
            avg_bytes: field(object, id, "avg_bytes")?,
            min_bytes: field(object, id, "min_bytes")?,
            max_bytes: field(object, id, "max_bytes")?,
            avg_lines: field(object, id, "avg_lines")?,
            min_lines: field(object, id, "min_lines")?,
            max_lines: field(object, id, "max_lines")?,
            share: field(object, id, "share")?,
        })
    }

    /// The object that goes into a region's metrics under `"footprint"`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// True for a region that never ran.
    pub fn never_entered(&self) -> bool {
        self.instances == 0
    }
}

/// Reads one field of a JSON object on its own, so that an error can name it (serde's type
/// errors do not): `Err(None)` when it is missing, `Err(Some(why))` when it has the wrong type.
fn read_field<T: serde::de::DeserializeOwned>(
    object: &Map<String, Value>,
    field: &str,
) -> Result<T, Option<String>> {
    let value = object.get(field).ok_or(None)?;
    T::deserialize(value).map_err(|e| Some(e.to_string()))
}

/// Reads one top-level field of a footprint report.
fn footprint_field<T: serde::de::DeserializeOwned>(
    tool_data: &Map<String, Value>,
    field: &'static str,
) -> Result<T, FootprintError> {
    read_field(tool_data, field).map_err(|problem| match problem {
        None => FootprintError::MissingField(field),
        Some(problem) => FootprintError::InvalidField { field, problem },
    })
}

/// Reads one optional top-level field of a footprint report: `None` when it is absent.
fn optional_footprint_field<T: serde::de::DeserializeOwned>(
    tool_data: &Map<String, Value>,
    field: &'static str,
) -> Result<Option<T>, FootprintError> {
    match tool_data.get(field) {
        None => Ok(None),
        Some(_) => footprint_field(tool_data, field).map(Some),
    }
}

impl Footprint {
    /// Reads the footprint fields of a report: the top-level ones and every region's.
    pub fn from_report(report: &Report) -> Result<Footprint, FootprintError> {
        let data = &report.tool_data;
        Ok(Footprint {
            granularity: footprint_field(data, "granularity")?,
            location_bytes: footprint_field(data, "location_bytes")?,
            line_size: footprint_field(data, "line_size")?,
            vsm: footprint_field(data, "vsm")?,
            total_bytes: footprint_field(data, "total_bytes")?,
            total_lines: footprint_field(data, "total_lines")?,
            max_depth: footprint_field(data, "max_depth")?,
            accesses: footprint_field(data, "accesses")?,
            shadow_peak_bytes: footprint_field(data, "shadow_peak_bytes")?,
            loop_bodies: optional_footprint_field(data, "loop_bodies")?,
            untracked_instances: optional_footprint_field(data, "untracked_instances")?,
            regions: report
                .regions
                .iter()
                .map(FootprintStats::of)
                .collect::<Result<_, _>>()?,
        })
    }

    /// The top-level fields as they go into [`Report::tool_data`] (the per-region stats go
    /// into each region's metrics, see [`FootprintStats::to_value`]).
    pub fn to_tool_data(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            // A struct of plain data always serialises to an object.
            _ => Map::new(),
        }
    }

    /// The stats of the region with this id (zeros for an id out of range).
    pub fn stats(&self, id: u32) -> FootprintStats {
        self.regions.get(id as usize).copied().unwrap_or_default()
    }
}
