//! The `hcpa` tool's part of the report (hierarchical critical path analysis,
//! `docs/hcpa.md`): per region that ran, its work, critical path and parallelism and the
//! regions its instances ran directly inside; at the top level the program's totals and the
//! analysis' settings, and the parallelism plan (`"plan"`, `"plan_options"`) that
//! [`crate::planner`] makes from them. Everything is read field by field, so that an error
//! names the field (and region) that does not match the schema. Work and critical paths are
//! in cost units (`docs/hcpa.md`, "Costs").

use super::{read_field, Region, Report};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The value of `"tool"` in a report of the hcpa tool.
pub const HCPA_TOOL: &str = "hcpa";

/// The top-level key of the tool's totals and settings, and the per-region key of its
/// statistics.
pub const HCPA_KEY: &str = "hcpa";
/// The top-level key of the plan's rows.
pub const PLAN_KEY: &str = "plan";
/// The top-level key of the options the plan was made with.
pub const PLAN_OPTIONS_KEY: &str = "plan_options";

impl Report {
    /// The hcpa tool's fields (the top-level `"hcpa"` object and every region's), or which
    /// one is missing or not as documented. Only meaningful when `tool` is [`HCPA_TOOL`].
    pub fn hcpa(&self) -> Result<Hcpa, HcpaError> {
        Hcpa::from_report(self)
    }

    /// The plan the report holds (`"plan"` and `"plan_options"`), `None` when it has none,
    /// or which field is not as documented (a row naming a region the report does not have
    /// is an error too).
    pub fn hcpa_plan(&self) -> Result<Option<Plan>, HcpaError> {
        let Some(rows) = self.tool_data.get(PLAN_KEY) else {
            return Ok(None);
        };
        let rows: Vec<PlanRow> = match rows {
            Value::Array(rows) => (rows.iter().enumerate())
                .map(|(i, row)| PlanRow::read(row, i))
                .collect::<Result<_, _>>()?,
            _ => return Err(HcpaError::invalid(None, PLAN_KEY, "not an array")),
        };
        if let Some(row) = rows
            .iter()
            .find(|r| r.region as usize >= self.regions.len())
        {
            return Err(HcpaError::invalid(
                None,
                PLAN_KEY,
                format!(
                    "names region {}, which the report does not have",
                    row.region
                ),
            ));
        }
        let options = match self.tool_data.get(PLAN_OPTIONS_KEY) {
            Some(Value::Object(object)) => PlanOptions {
                cores: sub_field(object, None, "\"plan_options\"", "cores")?,
                min_coverage: sub_field(object, None, "\"plan_options\"", "min_coverage")?,
                min_sp: sub_field(object, None, "\"plan_options\"", "min_sp")?,
            },
            Some(_) => return Err(HcpaError::invalid(None, PLAN_OPTIONS_KEY, "not an object")),
            None => return Err(HcpaError::missing(None, PLAN_OPTIONS_KEY)),
        };
        Ok(Some(Plan { options, rows }))
    }

    /// Puts `plan` into the report (`"plan"` and `"plan_options"`), replacing any plan it had.
    pub fn set_hcpa_plan(&mut self, plan: &Plan) {
        self.tool_data.extend(plan.to_tool_data());
    }
}

/// The hcpa tool's top-level `"hcpa"` object (`docs/report-schema.md`, "Tool `hcpa`") and
/// every region's [`HcpaStats`]. Read one with [`Report::hcpa`]; fields this crate does not
/// know are ignored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hcpa {
    /// The program's work: the sum of the work of every root instance (every thread's), in
    /// cost units. Every region's `coverage` is relative to it.
    pub work: u64,
    /// The program's critical path: the sum over root instances, in cost units.
    pub critical_path: u64,
    /// Levels deeper than this were not analysed (`max_depth=`).
    pub max_depth: u64,
    /// Bytes per memory granule (`granularity=`: 1, 4 or 8).
    pub granularity: u64,
    /// Region instances nested deeper than `max_depth`: in no region's statistics.
    pub skipped_instances: u64,
    /// The shadow memory's peak heap use, in bytes.
    pub shadow_peak_bytes: u64,
    /// Optional: the shadow-memory implementation that recorded it (`slim`, `bulk`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vsm: Option<String>,
    /// The cost of each class of instructions in force (`simple`, `load`, ...).
    pub costs: BTreeMap<String, u64>,
    /// How threads were analysed, in words (each on its own).
    pub threads: String,
    /// Each region's statistics, indexed by region id (the report's `regions` order); `None`
    /// for a region that never ran. Not a field of `"hcpa"`: it comes from each region's
    /// `"hcpa"` object.
    #[serde(skip)]
    pub regions: Vec<Option<HcpaStats>>,
}

/// One static region's statistics over its dynamic instances: the `"hcpa"` object of a
/// region in an hcpa report (`docs/hcpa.md`, "Statistics"). Regions that never ran have none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HcpaStats {
    /// Every dynamic instance, nested ones included.
    pub instances: u64,
    /// Work of the instances not nested in another instance of the same source region
    /// (recursion counts once, also through the compiler's copies of a function), nested
    /// regions included, in cost units.
    pub work: u64,
    /// Work done while the region was the innermost open one, over all its instances.
    pub self_work: u64,
    /// Sum of the critical paths of the instances counted in `instances`.
    pub critical_path: u64,
    /// The work-weighted harmonic mean over all instances of `(self_work + Σ cp(children))
    /// / cp`: how much faster its instances would run with their children in parallel.
    pub self_parallelism: f64,
    /// `work / critical_path`.
    pub total_parallelism: f64,
    /// `work / the program's work` (0..1).
    pub coverage: f64,
    /// The static regions directly around this region's instances at run time (for a
    /// function, its callers' innermost regions), by id; may include the region itself
    /// (recursion).
    pub parents: Vec<u32>,
    /// True when the runtime kept only some of the parents.
    pub parents_truncated: bool,
}

/// Why the hcpa fields of a report cannot be read. The `Display` text names the field and,
/// for a region's field, the region.
#[derive(Debug, Clone, PartialEq)]
pub enum HcpaError {
    /// A field is missing: `field` is its path (`"hcpa"."work"`).
    Missing { region: Option<u32>, field: String },
    /// A field is there but not of the documented type or value.
    Invalid {
        region: Option<u32>,
        field: String,
        problem: String,
    },
}

impl HcpaError {
    fn missing(region: Option<u32>, field: &str) -> HcpaError {
        HcpaError::Missing {
            region,
            field: format!("\"{field}\""),
        }
    }

    fn invalid(region: Option<u32>, field: &str, problem: impl Into<String>) -> HcpaError {
        HcpaError::Invalid {
            region,
            field: format!("\"{field}\""),
            problem: problem.into(),
        }
    }
}

impl std::fmt::Display for HcpaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (region, field) = match self {
            HcpaError::Missing { region, field } | HcpaError::Invalid { region, field, .. } => {
                (region, field)
            }
        };
        if let Some(region) = region {
            write!(f, "region {region}: ")?;
        }
        match self {
            HcpaError::Missing { .. } => write!(f, "the field {field} is missing"),
            HcpaError::Invalid { problem, .. } => {
                write!(f, "the field {field} is not as documented: {problem}")
            }
        }
    }
}

impl std::error::Error for HcpaError {}

/// Reads `object.field` of the object at `path` (`"hcpa"`, `"plan"[2]`, quoted as shown).
fn sub_field<T: serde::de::DeserializeOwned>(
    object: &Map<String, Value>,
    region: Option<u32>,
    path: &str,
    field: &str,
) -> Result<T, HcpaError> {
    read_field(object, field).map_err(|problem| {
        let field = format!("{path}.\"{field}\"");
        match problem {
            None => HcpaError::Missing { region, field },
            Some(problem) => HcpaError::Invalid {
                region,
                field,
                problem,
            },
        }
    })
}

/// `"hcpa"`, as error messages show the object.
const HCPA_PATH: &str = "\"hcpa\"";

impl HcpaStats {
    /// Reads a region's `"hcpa"` object: `None` for a region that never ran (no object).
    pub fn of(region: &Region) -> Result<Option<HcpaStats>, HcpaError> {
        Self::of_metrics(region.id, &region.metrics)
    }

    /// [`of`](HcpaStats::of) from region `id`'s metrics.
    pub fn of_metrics(
        id: u32,
        metrics: &Map<String, Value>,
    ) -> Result<Option<HcpaStats>, HcpaError> {
        let object = match metrics.get(HCPA_KEY) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(object)) => object,
            Some(_) => return Err(HcpaError::invalid(Some(id), HCPA_KEY, "not an object")),
        };
        let id = Some(id);
        let field =
            |name: &str| -> Result<u64, HcpaError> { sub_field(object, id, HCPA_PATH, name) };
        let ratio = |name: &str| -> Result<f64, HcpaError> {
            let value: f64 = sub_field(object, id, HCPA_PATH, name)?;
            if value.is_finite() && value >= 0.0 {
                Ok(value)
            } else {
                Err(HcpaError::Invalid {
                    region: id,
                    field: format!("{HCPA_PATH}.\"{name}\""),
                    problem: format!("{value} is not a number of at least 0"),
                })
            }
        };
        Ok(Some(HcpaStats {
            instances: field("instances")?,
            work: field("work")?,
            self_work: field("self_work")?,
            critical_path: field("critical_path")?,
            self_parallelism: ratio("self_parallelism")?,
            total_parallelism: ratio("total_parallelism")?,
            coverage: ratio("coverage")?,
            parents: sub_field(object, id, HCPA_PATH, "parents")?,
            parents_truncated: sub_field(object, id, HCPA_PATH, "parents_truncated")?,
        }))
    }

    /// The object that goes into a region's metrics under `"hcpa"`.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl Hcpa {
    /// Reads the hcpa fields of a report: the top-level `"hcpa"` object and every region's.
    pub fn from_report(report: &Report) -> Result<Hcpa, HcpaError> {
        let mut hcpa = Self::from_parts(&report.tool_data, Vec::new())?;
        hcpa.regions = (report.regions.iter())
            .map(HcpaStats::of)
            .collect::<Result<_, _>>()?;
        Ok(hcpa)
    }

    /// The top-level `"hcpa"` object of a report's `tool_data`, with each region's
    /// statistics, by id.
    pub fn from_parts(
        tool_data: &Map<String, Value>,
        regions: Vec<Option<HcpaStats>>,
    ) -> Result<Hcpa, HcpaError> {
        let object = match tool_data.get(HCPA_KEY) {
            Some(Value::Object(object)) => object,
            Some(_) => return Err(HcpaError::invalid(None, HCPA_KEY, "not an object")),
            None => return Err(HcpaError::missing(None, HCPA_KEY)),
        };
        let field =
            |name: &str| -> Result<u64, HcpaError> { sub_field(object, None, HCPA_PATH, name) };
        Ok(Hcpa {
            work: field("work")?,
            critical_path: field("critical_path")?,
            max_depth: field("max_depth")?,
            granularity: field("granularity")?,
            skipped_instances: field("skipped_instances")?,
            shadow_peak_bytes: field("shadow_peak_bytes")?,
            vsm: match object.get("vsm") {
                None => None,
                Some(_) => Some(sub_field(object, None, HCPA_PATH, "vsm")?),
            },
            costs: sub_field(object, None, HCPA_PATH, "costs")?,
            threads: sub_field(object, None, HCPA_PATH, "threads")?,
            regions,
        })
    }

    /// The top-level fields as they go into [`Report::tool_data`]: one entry, `"hcpa"` (the
    /// per-region stats go into each region's metrics, see [`HcpaStats::to_value`]).
    pub fn to_tool_data(&self) -> Map<String, Value> {
        let mut data = Map::new();
        data.insert(
            HCPA_KEY.into(),
            serde_json::to_value(self).unwrap_or(Value::Null),
        );
        data
    }

    /// The stats of the region with this id; `None` when it never ran or is out of range.
    pub fn stats(&self, id: u32) -> Option<&HcpaStats> {
        self.regions.get(id as usize).and_then(Option::as_ref)
    }
}

/// What the planner was asked for (`"plan_options"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// The cores to plan for (*P*): a region's self-parallelism counts up to it.
    pub cores: u64,
    /// Regions whose coverage (0..1) is under this are left out.
    pub min_coverage: f64,
    /// Regions whose self-parallelism is under this are left out.
    pub min_sp: f64,
}

impl PlanOptions {
    /// The default `min_coverage`: 1% of the program's work.
    pub const DEFAULT_MIN_COVERAGE: f64 = 0.01;
    /// The default `min_sp`.
    pub const DEFAULT_MIN_SP: f64 = 1.5;

    /// The default thresholds, for `cores` cores (at least 1).
    pub fn with_cores(cores: u64) -> PlanOptions {
        PlanOptions {
            cores: cores.max(1),
            min_coverage: Self::DEFAULT_MIN_COVERAGE,
            min_sp: Self::DEFAULT_MIN_SP,
        }
    }

    /// The default thresholds for this machine's cores (`std::thread::available_parallelism`,
    /// 1 when unknown).
    pub fn for_this_machine() -> PlanOptions {
        Self::with_cores(this_machines_cores())
    }
}

/// The cores this process may use (its CPU affinity and cgroup quota included), 1 when
/// unknown.
pub fn this_machines_cores() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// One row of the plan: a region to parallelise, in the order the planner chose them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlanRow {
    /// The region's id in the report that holds the plan (for a report as written, the
    /// first of the compiler's copies of the source region the planner chose).
    pub region: u32,
    /// The source region's self-parallelism.
    pub self_parallelism: f64,
    /// The source region's coverage (0..1).
    pub coverage: f64,
    /// The program's estimated speedup with this region and every region above it
    /// parallelised: `work(program) / (work(program) − Σ saving)`.
    pub speedup: f64,
    /// The work this region would save on `cores` cores, in cost units: `work × (1 − 1 /
    /// min(self_parallelism, cores))`.
    pub saving: f64,
}

impl PlanRow {
    /// Reads `"plan"[index]`.
    fn read(row: &Value, index: usize) -> Result<PlanRow, HcpaError> {
        let path = format!("\"{PLAN_KEY}\"[{index}]");
        let Value::Object(object) = row else {
            return Err(HcpaError::Invalid {
                region: None,
                field: path,
                problem: "not an object".into(),
            });
        };
        Ok(PlanRow {
            region: sub_field(object, None, &path, "region")?,
            self_parallelism: sub_field(object, None, &path, "self_parallelism")?,
            coverage: sub_field(object, None, &path, "coverage")?,
            speedup: sub_field(object, None, &path, "speedup")?,
            saving: sub_field(object, None, &path, "saving")?,
        })
    }
}

/// A parallelism plan (`docs/hcpa.md`, "The planner"): the options it was made with and its
/// rows, best first. Made by [`crate::planner::plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub options: PlanOptions,
    pub rows: Vec<PlanRow>,
}

impl Plan {
    /// The plan as it goes into [`Report::tool_data`]: `"plan"` (the rows) and
    /// `"plan_options"`.
    pub fn to_tool_data(&self) -> Map<String, Value> {
        let mut data = Map::new();
        data.insert(
            PLAN_KEY.into(),
            serde_json::to_value(&self.rows).unwrap_or(Value::Null),
        );
        data.insert(
            PLAN_OPTIONS_KEY.into(),
            serde_json::to_value(self.options).unwrap_or(Value::Null),
        );
        data
    }

    /// The program's estimated speedup with the whole plan (1 without rows).
    pub fn speedup(&self) -> f64 {
        self.rows.last().map_or(1.0, |row| row.speedup)
    }
}
