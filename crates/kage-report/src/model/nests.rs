//! The part of the report of the analyses on loop nests (`tool=interpolate`,
//! `tool=dependences`, issue 18; docs/report-schema.md "Tools `interpolate` and
//! `dependences`"): per selected nest, every memory instruction's addresses fitted as an
//! affine function of the loops' virtual iterators, the inner loops' trip counts fitted the
//! same way, the scalars the build classified, and (dependences) the dependences each
//! level carries, the levels that can run in parallel and the OpenMP clause that would run
//! the outermost of them.

use super::Report;
use serde::{Deserialize, Serialize};

/// The value of `"tool"` in a report of access interpolation.
pub const INTERPOLATE_TOOL: &str = "interpolate";
/// The value of `"tool"` in a report of dependence analysis.
pub const DEPENDENCES_TOOL: &str = "dependences";
/// The top-level key of both tools' nests.
pub const NESTS_KEY: &str = "nests";

impl Report {
    /// The analysed nests (the top-level `"nests"` array), or why it does not match the
    /// schema. Only meaningful for the interpolate and dependences tools.
    pub fn analysed_nests(&self) -> Result<Vec<AnalysedNest>, String> {
        let value = (self.tool_data.get(NESTS_KEY))
            .ok_or_else(|| format!("the report has no \"{NESTS_KEY}\""))?;
        serde_json::from_value(value.clone()).map_err(|e| format!("\"{NESTS_KEY}\": {e}"))
    }
}

/// One selected nest that ran sampled entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnalysedNest {
    /// The nest's id in this process (as in the loops tool's report).
    pub id: u32,
    /// The region of the outermost loop in the report's `regions` (its first, when the
    /// optimiser made several loops of it), null when none is there.
    pub region: Option<u32>,
    pub function: String,
    pub file: String,
    /// The outermost loop's first line.
    pub line: u32,
    /// Entries of the nest whose sampled iterations were analysed.
    pub entries_analysed: u64,
    pub levels: Vec<AnalysedLevel>,
    /// Dependences only: the levels (1-based, outermost first) that carry no dependence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_levels: Option<Vec<u32>>,
    /// Dependences only: the levels whose answer rests on sampled addresses only (an
    /// instruction or a trip count that is not affine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels_on_samples: Option<Vec<u32>>,
    pub accesses: Vec<AccessFit>,
    pub trip_counts: Vec<TripCount>,
    pub scalars: Vec<ScalarUse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependences: Option<Vec<Dependence>>,
    /// Dependences only: what would run the outermost parallel level in parallel, or why
    /// none can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<String>,
    pub summary: AccessSummary,
}

/// One loop of a nest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalysedLevel {
    /// 1-based, pre-order (1 is the outermost loop).
    pub level: u32,
    /// The enclosing level (1-based), none for level 1.
    pub parent: Option<u32>,
    pub line: u32,
}

/// VMAD's Table 1 columns for one nest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct AccessSummary {
    /// Memory instructions instrumented.
    pub instructions: u64,
    /// Those whose addresses fitted an affine function (and were checked).
    pub linear_instructions: u64,
    /// Accesses made in sampled iterations, and those made by linear instructions.
    pub sampled_accesses: u64,
    pub linear_accesses: u64,
}

/// One memory instruction and the function its addresses fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccessFit {
    /// Its index among the nest's instructions (dependences name it so).
    pub index: u32,
    pub line: u32,
    pub column: u32,
    /// `load` or `store`.
    pub kind: String,
    /// Bytes per access.
    pub size: u32,
    /// The variable whose memory it reaches, when debug information or a global names it.
    pub variable: Option<String>,
    /// The innermost level around it (1-based).
    pub level: u32,
    /// `linear`, `non-linear`, or `too few samples` (fewer than needed to check a fit).
    pub status: String,
    pub linear: bool,
    /// Bytes per iteration of each level around it (outermost first) when linear; null
    /// for a level whose stride no sample told or that varies between entries.
    pub strides: Option<Vec<Option<i64>>>,
    /// The same in elements of `size` bytes, where they divide.
    pub element_strides: Option<Vec<Option<i64>>>,
    /// The address at iterators 0 in the first entry, in hex.
    pub base: Option<String>,
    /// Accesses seen in sampled iterations.
    pub samples: u64,
    /// Sampled entries of the nest in which it ran, and those in which its addresses
    /// fitted (a list laid out in order fits by accident in some entries only).
    pub entries: u64,
    pub linear_entries: u64,
    /// What the addresses looked like, for a non-linear instruction: range and the first
    /// distinct steps between consecutive addresses.
    pub seen: Option<SeenValues>,
}

/// The values an instruction produced when they did not fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenValues {
    pub min: String,
    pub max: String,
    pub steps: Vec<i64>,
    pub more_steps: bool,
}

/// An inner loop's trip count as a function of the iterators of the loops around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TripCount {
    /// The inner level (1-based).
    pub level: u32,
    pub linear: bool,
    /// trip = constant + Σ coefficients[k] × vi_k over the levels around it (outermost
    /// first), when linear.
    pub constant: Option<i64>,
    pub coefficients: Option<Vec<Option<i64>>>,
    /// Entries of the loop whose trip count was seen.
    pub samples: u64,
    pub min: u64,
    pub max: u64,
}

/// A scalar variable a level writes, and what it is to that level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalarUse {
    pub level: u32,
    pub variable: Option<String>,
    pub line: u32,
    /// `induction`, `private`, `lastprivate`, `reduction`, `linear`, `carried`, or `call`
    /// (not a scalar: a call to the function `variable` names, whose memory accesses are not
    /// seen).
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
}

/// A dependence a level carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependence {
    /// The carrying level (1-based).
    pub level: u32,
    /// `flow` (read after write), `anti` (write after read), `output` (write after write),
    /// `call`: the level calls a function whose accesses are not seen (`variable`), or
    /// `local-array`: it writes a stack array that is not analysed; either way it is not
    /// proved free of dependences.
    pub kind: String,
    /// The instruction of the earlier iteration and that of the later one (indices into
    /// `accesses`); none for a scalar's.
    pub source: Option<u32>,
    pub sink: Option<u32>,
    pub source_line: u32,
    pub sink_line: u32,
    pub variable: Option<String>,
    /// Per common level, the later iteration's iterator minus the earlier's, when constant.
    pub distance: Option<Vec<i64>>,
    /// Found in sampled addresses only (an instruction that is not affine), not proved.
    pub from_samples: bool,
}
