//! Reading a report back, with an error for every way the input can be wrong.

use crate::model::{
    CountStats, Report, COUNT_TOOL, DEPENDENCES_TOOL, FOOTPRINT_TOOL, FORMAT_NAME, FORMAT_VERSION,
    HCPA_TOOL, INTERPOLATE_TOOL, LOOPS_TOOL, SELECT_TOOL, WORKING_SET_TOOL,
};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a file could not be read as a Kage report. The `Display` text is the message shown to users.
#[derive(Debug)]
pub enum ReadError {
    /// The file does not exist.
    Missing(PathBuf),
    /// The file exists but could not be read.
    Io(PathBuf, std::io::Error),
    /// The file is empty.
    Empty(PathBuf),
    /// The JSON stops before its end: the program was probably killed while writing it.
    Truncated(PathBuf),
    /// The file is not JSON at all.
    NotJson(PathBuf, String),
    /// Valid JSON, but not a Kage report.
    NotKage(PathBuf),
    /// A Kage report of a version this reader does not know.
    UnsupportedVersion(PathBuf, u64),
    /// A Kage report whose fields do not match the schema.
    Malformed(PathBuf, String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Missing(p) => write!(f, "{}: no such report file", p.display()),
            ReadError::Io(p, e) => write!(f, "{}: cannot read: {e}", p.display()),
            ReadError::Empty(p) => write!(f, "{}: the report is empty", p.display()),
            ReadError::Truncated(p) => write!(
                f,
                "{}: the report is truncated (it ends in the middle of the JSON); \
                 the program may have been killed while writing it",
                p.display()
            ),
            ReadError::NotJson(p, e) => write!(f, "{}: not a Kage report (not JSON: {e})", p.display()),
            ReadError::NotKage(p) => write!(
                f,
                "{}: not a Kage report (JSON without \"format\": \"{FORMAT_NAME}\")",
                p.display()
            ),
            ReadError::UnsupportedVersion(p, v) => write!(
                f,
                "{}: Kage report version {v} is not supported (this kage reads version {FORMAT_VERSION})",
                p.display()
            ),
            ReadError::Malformed(p, e) => write!(f, "{}: malformed Kage report: {e}", p.display()),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads and validates the report at `path`.
pub fn read_report(path: &Path) -> Result<Report, ReadError> {
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::Missing(path.to_owned()),
        _ => ReadError::Io(path.to_owned(), e),
    })?;
    parse_report(path, &bytes)
}

/// Validates `bytes` as a report; `path` is only used in messages.
pub fn parse_report(path: &Path, bytes: &[u8]) -> Result<Report, ReadError> {
    let p = || path.to_owned();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ReadError::Empty(p()));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_eof() {
            ReadError::Truncated(p())
        } else {
            ReadError::NotJson(p(), e.to_string())
        }
    })?;
    if value.get("format").and_then(Value::as_str) != Some(FORMAT_NAME) {
        return Err(ReadError::NotKage(p()));
    }
    match value.get("version").and_then(Value::as_u64) {
        Some(v) if v == u64::from(FORMAT_VERSION) => {}
        Some(v) => return Err(ReadError::UnsupportedVersion(p(), v)),
        None => {
            return Err(ReadError::Malformed(
                p(),
                "\"version\" is missing or not a number".into(),
            ))
        }
    }
    let report: Report =
        serde_json::from_value(value).map_err(|e| ReadError::Malformed(p(), e.to_string()))?;
    for (index, region) in report.regions.iter().enumerate() {
        if region.id as usize != index {
            return Err(ReadError::Malformed(
                p(),
                format!("region at index {index} has id {}", region.id),
            ));
        }
        if let Some(parent) = region.parent {
            if parent >= region.id {
                return Err(ReadError::Malformed(
                    p(),
                    format!(
                        "region {} has parent {parent}, which does not precede it",
                        region.id
                    ),
                ));
            }
        }
    }
    check_tool_fields(&report).map_err(|e| ReadError::Malformed(p(), e))?;
    Ok(report)
}

/// Every tool a report can come from.
pub const TOOLS: [&str; 8] = [
    COUNT_TOOL,
    WORKING_SET_TOOL,
    FOOTPRINT_TOOL,
    HCPA_TOOL,
    LOOPS_TOOL,
    INTERPOLATE_TOOL,
    DEPENDENCES_TOOL,
    SELECT_TOOL,
];

/// Reads the fields of the report's tool as the views will (so that no view meets a value
/// the schema does not allow: a negative or string counter, a region id out of range, a
/// line size of 0), and says which one is wrong.
fn check_tool_fields(report: &Report) -> Result<(), String> {
    let regions = report.regions.len();
    let region_in_range = |id: u32, what: &str| {
        if (id as usize) < regions {
            Ok(())
        } else {
            Err(format!(
                "{what} names region {id}, but the report has {regions} regions"
            ))
        }
    };
    let line_size = |size: u64| {
        if size.is_power_of_two() {
            Ok(())
        } else {
            Err(format!("\"line_size\" is {size}, not a power of two"))
        }
    };
    match report.tool.as_str() {
        COUNT_TOOL => {
            const COUNTERS: [&str; 9] = [
                "instances",
                "loads",
                "stores",
                "bytes_read",
                "bytes_written",
                "self_loads",
                "self_stores",
                "self_bytes_read",
                "self_bytes_written",
            ];
            for region in &report.regions {
                // A region without any counter was not measured (the views show it empty).
                let measured = COUNTERS.iter().any(|k| region.metrics.contains_key(*k));
                if measured && CountStats::of(region).is_none() {
                    return Err(format!(
                        "region {}: its counters (instances, loads, stores, bytes_read, \
                         bytes_written and their self_ forms) are missing or not \
                         non-negative integers",
                        region.id
                    ));
                }
            }
            if report.count_totals().is_none() {
                return Err(
                    "\"totals\" is missing or its counters are not non-negative \
                            integers"
                        .into(),
                );
            }
        }
        WORKING_SET_TOOL => {
            let ws = report.working_set().map_err(|e| e.to_string())?;
            line_size(ws.line_size)?;
            for (index, snapshot) in ws.snapshots.iter().enumerate() {
                for &id in &snapshot.regions {
                    region_in_range(id, &format!("snapshot {index}"))?;
                }
            }
            if let Some(peak) = ws.peak_snapshot.filter(|&i| i >= ws.snapshots.len()) {
                return Err(format!(
                    "\"peak_snapshot\" is {peak}, but there are {} snapshots",
                    ws.snapshots.len()
                ));
            }
        }
        FOOTPRINT_TOOL => {
            let footprint = report.footprint().map_err(|e| e.to_string())?;
            line_size(footprint.line_size)?;
        }
        HCPA_TOOL => {
            report.hcpa().map_err(|e| e.to_string())?;
            report.hcpa_plan().map_err(|e| e.to_string())?;
        }
        LOOPS_TOOL => {
            report.loops().map_err(|e| e.to_string())?;
        }
        INTERPOLATE_TOOL | DEPENDENCES_TOOL => {
            report.loops().map_err(|e| e.to_string())?;
            for nest in report.analysed_nests()? {
                if let Some(id) = nest.region {
                    region_in_range(id, "an analysed nest")?;
                }
            }
        }
        SELECT_TOOL => {
            report.select()?;
        }
        other => {
            return Err(format!(
                "\"tool\" is '{other}', which is none of Kage's tools ({})",
                TOOLS.join(", ")
            ))
        }
    }
    Ok(())
}
