//! The `footprint` tool's part of the report: per region, the distinct memory its dynamic
//! instances touched (average, smallest, largest), read field by field so that an error names
//! the field and region that do not match the schema.

use super::{read_field, Region, Report};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The value of `"tool"` in a report of the footprint tool.
pub const FOOTPRINT_TOOL: &str = "footprint";

impl Report {
    /// The footprint tool's fields (top level and every region's), or which one is missing or
    /// not as documented. Only meaningful when `tool` is [`FOOTPRINT_TOOL`].
    pub fn footprint(&self) -> Result<Footprint, FootprintError> {
        Footprint::from_report(self)
    }
}

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
