//! The report's data model. Field names are the JSON schema (`docs/report-schema.md`).
//!
//! This module holds what every report has: the common fields ([`ReportOf`], [`Report`]),
//! how the program ended, and the static regions. Each tool's typed view of its own fields,
//! with the value of `"tool"` its reports carry, is a module of its own, re-exported here:
//! `count` ([`COUNT_TOOL`], [`CountStats`]), `working_set` ([`WORKING_SET_TOOL`],
//! [`WorkingSet`]), `footprint` ([`FOOTPRINT_TOOL`], [`Footprint`]), `hcpa`
//! ([`HCPA_TOOL`], [`Hcpa`], [`HcpaStats`] and the [`Plan`] that `crate::planner` makes) and
//! `loops` ([`LOOPS_TOOL`], [`Loops`]: the selected loop nests) and `nests`
//! ([`INTERPOLATE_TOOL`], [`DEPENDENCES_TOOL`], [`AnalysedNest`]: the analyses on them) and
//! `select` ([`SELECT_TOOL`], [`Selection`]: the nests written in versions).

mod count;
mod footprint;
mod hcpa;
mod loops;
mod nests;
mod select;
pub(crate) mod source;
mod working_set;

pub use count::*;
pub use footprint::*;
pub use hcpa::*;
pub use kage_abi::SourceKey;
pub use loops::*;
pub use nests::*;
pub use select::*;
pub use source::RegionShape;
pub use working_set::*;

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
    /// False when the report was written from a fatal signal handler (counts in regions
    /// that other threads had open at that moment may be missing), when threads still
    /// running at the end left their regions open ([`unclosed_threads`](Self::unclosed_threads)),
    /// or when a signal handler left the runtime by `siglongjmp`.
    pub complete: bool,
    /// Threads still running when the program ended that did not close their open regions:
    /// what those regions did is missing. Absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unclosed_threads: Option<UnclosedThreads>,
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

/// Threads still running when the program ended whose open regions stayed open, by why the
/// runtime could not have them closed (with the signal `SIGRTMAX`, which each thread
/// handles itself).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnclosedThreads {
    /// They block the signal (worker threads of a pool often block every signal).
    pub blocking: u32,
    /// They are stopped or traced.
    pub stopped: u32,
    /// They did not answer within a second.
    pub unanswered: u32,
}

impl UnclosedThreads {
    /// Every thread.
    pub fn total(&self) -> u32 {
        self.blocking + self.stopped + self.unanswered
    }

    /// In words, for a warning: "2 threads: 1 blocks SIGRTMAX, by which the runtime asks a
    /// thread to close its regions; 1 is stopped".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.blocking > 0 {
            parts.push(format!(
                "{} {} SIGRTMAX, by which the runtime asks a thread to close its regions",
                self.blocking,
                if self.blocking == 1 {
                    "blocks"
                } else {
                    "block"
                }
            ));
        }
        if self.stopped > 0 {
            let verb = if self.stopped == 1 { "is" } else { "are" };
            parts.push(format!("{} {verb} stopped", self.stopped));
        }
        if self.unanswered > 0 {
            parts.push(format!(
                "{} did not answer within a second",
                self.unanswered
            ));
        }
        let total = self.total();
        let threads = if total == 1 { "thread" } else { "threads" };
        format!("{total} {threads}: {}", parts.join("; "))
    }
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "kebab-case")]
pub enum ProgramEnd {
    /// `exit()` or a return from `main`, with its status.
    Exit { code: i32 },
    /// A fatal signal.
    Signal { signal: i32 },
    /// `quick_exit()`, whose status the runtime cannot see.
    QuickExit,
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
    /// The table kind of a region of this kind (an inlined call's is its function's).
    pub fn abi(self) -> kage_abi::RegionKind {
        match self {
            RegionKind::Function => kage_abi::RegionKind::Function,
            RegionKind::Loop => kage_abi::RegionKind::Loop,
            RegionKind::LoopBody => kage_abi::RegionKind::LoopBody,
        }
    }

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
    /// A function region that is a call the optimiser inlined: where the call is (the
    /// function it was inlined into is the nearest function region above it). `name`,
    /// `file` and the lines are the callee's, as for its loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inlined_at: Option<CallSite>,
    /// Tool-specific per-region results (for `count`: see [`CountStats`]).
    #[serde(flatten)]
    pub metrics: Map<String, Value>,
}

/// Where a call is in the source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSite {
    pub file: String,
    pub line: u32,
    /// 0 when unknown.
    #[serde(default)]
    pub column: u32,
}

impl Report {
    /// The region with this id.
    pub fn region(&self, id: u32) -> Option<&Region> {
        self.regions.get(id as usize).filter(|r| r.id == id)
    }
}

/// Reads one field of a JSON object on its own, so that an error can name it (serde's type
/// errors do not): `Err(None)` when it is missing, `Err(Some(why))` when it has the wrong type.
pub(crate) fn read_field<T: serde::de::DeserializeOwned>(
    object: &Map<String, Value>,
    field: &str,
) -> Result<T, Option<String>> {
    let value = object.get(field).ok_or(None)?;
    T::deserialize(value).map_err(|e| Some(e.to_string()))
}
