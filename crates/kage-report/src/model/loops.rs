//! The `loops` tool's part of the report: the loop nests a build selected and versioned
//! (`KAGE_TOOL=loops`), per nest its entries and the entries that were sampled, per loop
//! level its iterations, the iterations that ran in the instrumented version and the chunks
//! each version ran. Everything is read field by field, so that an error names the field
//! (and nest) that does not match the schema.

use super::{read_field, Report};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The value of `"tool"` in a report of the loops tool.
pub const LOOPS_TOOL: &str = "loops";

/// The top-level key of the tool's fields.
pub const LOOPS_KEY: &str = "loops";

impl Report {
    /// The loops tool's fields (the top-level `"loops"` object), or which one is missing or
    /// not as documented. Only meaningful when `tool` is [`LOOPS_TOOL`].
    pub fn loops(&self) -> Result<Loops, LoopsError> {
        Loops::from_tool_data(&self.tool_data)
    }
}

/// The loops tool's top-level `"loops"` object (`docs/report-schema.md`, "Tool `loops`").
/// Read one with [`Report::loops`]; fields this crate does not know are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loops {
    /// `sample_iterations=`: in a sampled entry, the first iterations of each level (in each
    /// of its entries made from the instrumented version) that ran instrumented.
    pub sample_iterations: u64,
    /// `sample_entries=`: the first entries of each nest that were sampled (since the start
    /// or the last `kage_reset()`).
    pub sample_entries: u64,
    /// Every nest that ran, by id.
    pub nests: Vec<LoopNest>,
}

/// How a nest was selected at build time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NestSelection {
    /// A `file:line` of `KAGE_LOOPS`.
    Line,
    /// `#pragma kage profile`.
    Pragma,
    /// One of the hottest loops of a count report (`KAGE_LOOPS=@report.json`).
    Report,
}

impl NestSelection {
    /// The name in the report: `line`, `pragma`, `report`.
    pub fn as_str(self) -> &'static str {
        match self {
            NestSelection::Line => "line",
            NestSelection::Pragma => "pragma",
            NestSelection::Report => "report",
        }
    }

    /// How people wrote the selection: "KAGE_LOOPS", "#pragma kage profile".
    pub fn describe(self) -> &'static str {
        match self {
            NestSelection::Line => "KAGE_LOOPS",
            NestSelection::Pragma => "#pragma kage profile",
            NestSelection::Report => "KAGE_LOOPS=@report",
        }
    }
}

/// One selected loop nest that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoopNest {
    /// The nest's id in this process: ids are given in the order nests first ran.
    pub id: u32,
    /// The function whose source holds the nest (demangled), "" when unknown.
    pub function: String,
    /// The source file, "" when unknown.
    pub file: String,
    /// The outermost loop's first and last source line (0 = unknown).
    pub line: u32,
    pub end_line: u32,
    pub selected_by: NestSelection,
    /// Entries of the outermost loop.
    pub entries: u64,
    /// Of those, the entries that were sampled (at most `sample_entries`).
    pub sampled_entries: u64,
    /// Its loops in pre-order: level 0 is the outermost, every level after its parent.
    pub levels: Vec<NestLevel>,
}

/// One loop of a nest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NestLevel {
    /// Its index in the nest's `levels`.
    pub level: u32,
    /// The enclosing loop's level; `None` for level 0.
    pub parent: Option<u32>,
    /// 0 for the outermost loop, its parent's depth + 1 otherwise.
    pub depth: u32,
    /// The loop's first and last source line (0 = unknown).
    pub line: u32,
    pub end_line: u32,
    /// Iterations in the nest's entries that were left normally (every entry of this loop
    /// inside them), in either version.
    pub iterations: u64,
    /// Iterations that started in the instrumented version.
    pub instrumented_iterations: u64,
    /// The chunks each version ran: decisions taken for this loop, by version.
    pub chunks: LevelChunks,
}

/// The chunks a loop level ran, by version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LevelChunks {
    pub original: u64,
    pub instrumented: u64,
}

impl LoopNest {
    /// The sum over its levels of their instrumented iterations.
    pub fn instrumented_iterations(&self) -> u64 {
        self.levels.iter().map(|l| l.instrumented_iterations).sum()
    }
}

/// Why the loops fields of a report cannot be read. The `Display` text names the field by
/// its path (`"loops"."nests"[0]."levels"[1]."iterations"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopsError {
    Missing { field: String },
    Invalid { field: String, problem: String },
}

impl std::fmt::Display for LoopsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoopsError::Missing { field } => write!(f, "the field {field} is missing"),
            LoopsError::Invalid { field, problem } => {
                write!(f, "the field {field} is not as documented: {problem}")
            }
        }
    }
}

impl std::error::Error for LoopsError {}

fn invalid(field: String, problem: impl Into<String>) -> LoopsError {
    LoopsError::Invalid {
        field,
        problem: problem.into(),
    }
}

/// Reads `object.name`, `path` being the object's own path.
fn field<T: serde::de::DeserializeOwned>(
    object: &Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<T, LoopsError> {
    read_field(object, name).map_err(|problem| {
        let field = format!("{path}.\"{name}\"");
        match problem {
            None => LoopsError::Missing { field },
            Some(problem) => invalid(field, problem),
        }
    })
}

/// `value` as an object, `path` being its path.
fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, LoopsError> {
    value
        .as_object()
        .ok_or_else(|| invalid(path.to_string(), "not an object"))
}

/// `object.name` as an array.
fn array<'a>(
    object: &'a Map<String, Value>,
    path: &str,
    name: &str,
) -> Result<&'a [Value], LoopsError> {
    let field = format!("{path}.\"{name}\"");
    match object.get(name) {
        None => Err(LoopsError::Missing { field }),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(invalid(field, "not an array")),
    }
}

impl Loops {
    /// Reads the `"loops"` object of a report's tool data.
    pub fn from_tool_data(tool_data: &Map<String, Value>) -> Result<Loops, LoopsError> {
        let path = format!("\"{LOOPS_KEY}\"");
        let value = tool_data.get(LOOPS_KEY).ok_or(LoopsError::Missing {
            field: path.clone(),
        })?;
        let top = object(value, &path)?;
        let nests = (array(top, &path, "nests")?.iter().enumerate())
            .map(|(i, nest)| LoopNest::read(nest, &format!("{path}.\"nests\"[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, pair) in nests.windows(2).enumerate() {
            if pair[1].id <= pair[0].id {
                return Err(invalid(
                    format!("{path}.\"nests\"[{}].\"id\"", i + 1),
                    format!(
                        "{} after {}: nests are sorted by id, each once",
                        pair[1].id, pair[0].id
                    ),
                ));
            }
        }
        Ok(Loops {
            sample_iterations: field(top, &path, "sample_iterations")?,
            sample_entries: field(top, &path, "sample_entries")?,
            nests,
        })
    }

    /// The fields as they go into [`Report::tool_data`]: one entry, `"loops"`.
    pub fn to_tool_data(&self) -> Map<String, Value> {
        let mut data = Map::new();
        data.insert(
            LOOPS_KEY.into(),
            serde_json::to_value(self).unwrap_or(Value::Null),
        );
        data
    }
}

impl LoopNest {
    /// Reads the nest at `path`.
    fn read(value: &Value, path: &str) -> Result<LoopNest, LoopsError> {
        let nest = object(value, path)?;
        let levels = (array(nest, path, "levels")?.iter().enumerate())
            .map(|(k, level)| NestLevel::read(level, &format!("{path}.\"levels\"[{k}]"), k))
            .collect::<Result<Vec<_>, _>>()?;
        if levels.is_empty() {
            return Err(invalid(
                format!("{path}.\"levels\""),
                "a nest has at least one level",
            ));
        }
        for (k, level) in levels.iter().enumerate().skip(1) {
            // `NestLevel::read` checked that the parent comes before.
            let parent = level.parent.unwrap_or(0) as usize;
            if level.depth != levels[parent].depth + 1 {
                return Err(invalid(
                    format!("{path}.\"levels\"[{k}].\"depth\""),
                    format!(
                        "{} is not its parent's depth + 1 ({})",
                        level.depth,
                        levels[parent].depth + 1
                    ),
                ));
            }
        }
        let entries: u64 = field(nest, path, "entries")?;
        let sampled_entries: u64 = field(nest, path, "sampled_entries")?;
        if sampled_entries > entries {
            return Err(invalid(
                format!("{path}.\"sampled_entries\""),
                format!("{sampled_entries} is more than the {entries} entries"),
            ));
        }
        Ok(LoopNest {
            id: field(nest, path, "id")?,
            function: field(nest, path, "function")?,
            file: field(nest, path, "file")?,
            line: field(nest, path, "line")?,
            end_line: field(nest, path, "end_line")?,
            selected_by: field(nest, path, "selected_by")?,
            entries,
            sampled_entries,
            levels,
        })
    }
}

impl NestLevel {
    /// Reads level `k` of a nest, at `path`.
    fn read(value: &Value, path: &str, k: usize) -> Result<NestLevel, LoopsError> {
        let level = object(value, path)?;
        let index: u32 = field(level, path, "level")?;
        if index as usize != k {
            return Err(invalid(
                format!("{path}.\"level\""),
                format!("{index} is not its index in \"levels\" ({k})"),
            ));
        }
        let parent: Option<u32> = field(level, path, "parent")?;
        let parent_ok = match parent {
            None => k == 0,
            Some(p) => (p as usize) < k,
        };
        if !parent_ok {
            let problem = match parent {
                None => "only level 0 has no parent".to_string(),
                Some(p) if k == 0 => format!("level 0 has no parent, not {p}"),
                Some(p) => format!("{p} is not a level before {k}"),
            };
            return Err(invalid(format!("{path}.\"parent\""), problem));
        }
        let depth: u32 = field(level, path, "depth")?;
        if k == 0 && depth != 0 {
            return Err(invalid(format!("{path}.\"depth\""), "level 0 has depth 0"));
        }
        let chunks_path = format!("{path}.\"chunks\"");
        let chunks = match level.get("chunks") {
            None => return Err(LoopsError::Missing { field: chunks_path }),
            Some(chunks) => object(chunks, &chunks_path)?,
        };
        Ok(NestLevel {
            level: index,
            parent,
            depth,
            line: field(level, path, "line")?,
            end_line: field(level, path, "end_line")?,
            iterations: field(level, path, "iterations")?,
            instrumented_iterations: field(level, path, "instrumented_iterations")?,
            chunks: LevelChunks {
                original: field(chunks, &chunks_path, "original")?,
                instrumented: field(chunks, &chunks_path, "instrumented")?,
            },
        })
    }
}
