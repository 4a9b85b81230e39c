//! The `select` tool's part of the report: the nests written in versions (`#pragma kage
//! versions`, `KAGE_TOOL=select`), per nest each version's chunks, iterations and measured
//! time per iteration, and the decisions: which version each size class of entries runs,
//! when it was chosen and which versions were dropped on the way.

use super::Report;
use serde::{Deserialize, Serialize};

/// The value of `"tool"` in a report of the select tool.
pub const SELECT_TOOL: &str = "select";

/// The top-level key of the tool's fields.
pub const SELECT_KEY: &str = "select";

impl Report {
    /// The select tool's fields (the top-level `"select"` object), or why they do not match
    /// the schema. Only meaningful when `tool` is [`SELECT_TOOL`].
    pub fn select(&self) -> Result<Selection, String> {
        let value = (self.tool_data.get(SELECT_KEY))
            .ok_or_else(|| format!("the report has no \"{SELECT_KEY}\""))?;
        serde_json::from_value(value.clone()).map_err(|e| format!("\"{SELECT_KEY}\": {e}"))
    }
}

/// The select tool's `"select"` object (`docs/report-schema.md`, "Tool `select`").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// `version=`: `auto`, a version's index, or `rotate`.
    pub version: String,
    /// `min_chunk_us=`: the shortest chunk a race times.
    pub min_chunk_us: u64,
    /// Every versioned nest that ran, by id.
    pub nests: Vec<VersionedNest>,
}

/// One nest written in versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionedNest {
    /// The nest's id in this process, in the order nests first ran.
    pub id: u32,
    /// The function whose source holds the switch (demangled), "" when unknown.
    pub function: String,
    /// The source file, "" when unknown.
    pub file: String,
    /// The line of the switch.
    pub line: u32,
    /// Times the switch was reached.
    pub entries: u64,
    pub versions: Vec<NestVersion>,
    /// In the order taken.
    pub decisions: Vec<VersionDecision>,
    /// Set when versions began the outermost loop at different values: they do not share its
    /// iterations, and the chunks may not add up to the original's work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_mismatch: Option<String>,
}

/// One version of a nest: a case of its switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestVersion {
    /// Its index (the order of the cases).
    pub index: u32,
    /// The case's value.
    pub case: i64,
    /// The name the pragma gave it, "" for none.
    pub name: String,
    /// Its outermost loop's step and lines.
    pub step: i64,
    pub line: u32,
    pub end_line: u32,
    /// Chunks it ran, the outermost iterations in them, and their time.
    pub chunks: u64,
    pub iterations: u64,
    pub seconds: f64,
    /// The chunks timed to compare versions (races and turns), and their mean time per
    /// outermost iteration in nanoseconds (null when none was timed).
    pub measured_chunks: u64,
    pub ns_per_iteration: Option<f64>,
}

/// A decision: the version entries of one size class run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionDecision {
    /// The size class: entries of `min_iterations` to `max_iterations` outermost iterations.
    pub min_iterations: u64,
    pub max_iterations: u64,
    /// The chosen version's index.
    pub version: u32,
    /// Entry (0-based) and outermost iteration of it at which it was chosen.
    pub entry: u64,
    pub iteration: u64,
    /// Seconds since the program started, and since that entry began.
    pub at_seconds: f64,
    pub into_entry_seconds: f64,
    /// The versions dropped as far slower, by index.
    pub abandoned: Vec<u32>,
    /// How: a race inside an entry, turns of short entries, or a race after a phase change.
    pub how: String,
}
