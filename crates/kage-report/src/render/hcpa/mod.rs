//! The hcpa tool's views: the text view and the summary (`text.rs`) and the HTML page with
//! the plan and the region tree coloured by self-parallelism (`html.rs`); and here what they
//! share: reading the tool's fields and the plan, the facts of the header, the plan's rows
//! and thresholds in words, the order of the region tree (most work first) and a region's
//! cells.

#[cfg(feature = "html")]
mod html;
mod text;

#[cfg(feature = "html")]
pub(crate) use html::html;
pub(crate) use text::{summary, text};

use crate::model::{Hcpa, HcpaStats, Plan, PlanOptions, Region, RegionKind, Report, HCPA_TOOL};
use crate::planner::plan_regions;
use crate::render::tree::RegionTree;
use crate::render::{bytes_label, percent_label, three_digits, FileNames, ViewError};
use std::cmp::Reverse;

/// What every hcpa view reads: the tool's fields and the plan.
pub(crate) struct HcpaView {
    pub hcpa: Hcpa,
    pub plan: Plan,
    /// Whether the plan is the report's own (else it was made here, for this machine).
    pub recorded: bool,
}

impl HcpaView {
    /// The fields and the plan of `report`: the plan it holds, or, for a report without
    /// one, a plan for this machine with the default thresholds.
    pub(crate) fn of(report: &Report) -> Result<HcpaView, String> {
        let hcpa = report.hcpa().map_err(|e| e.to_string())?;
        let (plan, recorded) = match report.hcpa_plan().map_err(|e| e.to_string())? {
            Some(plan) => (plan, true),
            None => (
                plan_regions(&report.regions, &hcpa, &PlanOptions::for_this_machine()),
                false,
            ),
        };
        Ok(HcpaView {
            hcpa,
            plan,
            recorded,
        })
    }

    /// The stats of region `id`, `None` when it never ran.
    pub(crate) fn stats(&self, id: u32) -> Option<&HcpaStats> {
        self.hcpa.stats(id)
    }

    /// The plan's rank (1 first) of region `id`, if it is in the plan.
    pub(crate) fn rank(&self, id: u32) -> Option<usize> {
        self.plan
            .rows
            .iter()
            .position(|row| row.region == id)
            .map(|i| i + 1)
    }

    /// Why region `id` is not in the plan, in words, `None` when it is (or never ran): the
    /// first of the planner's rules it fails (`docs/hcpa.md`, "The planner").
    #[cfg_attr(not(feature = "html"), allow(dead_code))]
    pub(crate) fn why_not_planned(&self, report: &Report, id: u32) -> Option<&'static str> {
        let stats = self.stats(id)?;
        if self.rank(id).is_some() {
            return None;
        }
        let options = &self.plan.options;
        let kind = report.region(id)?.kind;
        let ran_inside = stats.work > stats.self_work
            || (self.hcpa.regions.iter().flatten()).any(|s| s.parents.contains(&id))
            || (report.regions.iter()).any(|r| r.parent == Some(id) && self.stats(r.id).is_some());
        Some(if stats.coverage < options.min_coverage {
            "not planned: its coverage is under the threshold"
        } else if stats.self_parallelism < options.min_sp {
            "not planned: its self-parallelism is under the threshold"
        } else if kind != RegionKind::Loop && !ran_inside {
            "not planned: no region ran inside it, so its parallelism is between its own \
             instructions"
        } else if stats.self_parallelism.min(options.cores as f64) <= 1.0 {
            "not planned: it would save nothing on these cores"
        } else {
            "not planned: it ran inside or around a region that saves more"
        })
    }

    /// Whether some region's parents were cut short, so that the planner may not have seen
    /// every nesting.
    pub(crate) fn parents_truncated(&self) -> bool {
        (self.hcpa.regions.iter().flatten()).any(|s| s.parents_truncated)
    }
}

/// [`HcpaView::of`] for the html view (the dispatch in `render/mod.rs` sends it only
/// reports of the hcpa tool).
#[cfg_attr(not(feature = "html"), allow(dead_code))]
pub(crate) fn hcpa_view_of(report: &Report) -> Result<HcpaView, ViewError> {
    HcpaView::of(report).map_err(|error| ViewError::Malformed {
        tool: HCPA_TOOL,
        error,
    })
}

/// The region tree with siblings by most work first, then by id, so regions that never ran
/// come last. Loop bodies that never ran are left out, their loops taking their place (as
/// when the runtime did not measure bodies).
pub(crate) fn hcpa_tree(report: &Report, view: &HcpaView) -> RegionTree {
    RegionTree::new(report)
        .splice_out(|id| {
            report.regions[id as usize].kind == RegionKind::LoopBody && view.stats(id).is_none()
        })
        .sort_siblings_by_key(|id| (Reverse(view.stats(id).map_or(0, |s| s.work)), id))
}

/// The facts of an hcpa report's header, after the common ones: (label, value).
pub(crate) fn facts(hcpa: &Hcpa) -> Vec<(String, String)> {
    let total = match hcpa.critical_path {
        0 => String::new(),
        cp => format!(
            " (total parallelism {})",
            three_digits(hcpa.work as f64 / cp as f64)
        ),
    };
    let mut facts = vec![
        ("work".to_string(), format!("{} cost units", hcpa.work)),
        (
            "critical path".to_string(),
            format!("{} cost units{total}", hcpa.critical_path),
        ),
        (
            "granularity".to_string(),
            format!(
                "{} byte{} per memory granule",
                hcpa.granularity,
                if hcpa.granularity == 1 { "" } else { "s" }
            ),
        ),
        (
            "max depth".to_string(),
            format!("{} nested regions analysed", hcpa.max_depth),
        ),
    ];
    if hcpa.skipped_instances > 0 {
        facts.push((
            "skipped".to_string(),
            format!(
                "{} region instances nested deeper than the max depth are in no region's \
                 statistics",
                hcpa.skipped_instances
            ),
        ));
    }
    let vsm = hcpa
        .vsm
        .as_ref()
        .map_or(String::new(), |vsm| format!("{vsm}, "));
    facts.push((
        "shadow memory".to_string(),
        format!("{vsm}peak {}", bytes_label(hcpa.shadow_peak_bytes)),
    ));
    let costs: Vec<String> = (hcpa.costs.iter())
        .map(|(class, cost)| format!("{class}={cost}"))
        .collect();
    facts.push(("costs".to_string(), costs.join(" ")));
    if !hcpa.threads.is_empty() {
        facts.push(("thread analysis".to_string(), hcpa.threads.clone()));
    }
    facts
}

/// What the planner left out, in words: "coverage < 1%, self-parallelism < 1.5, functions
/// and loop bodies in which no other region ran".
pub(crate) fn left_out(options: &PlanOptions) -> String {
    format!(
        "coverage < {}, self-parallelism < {}, functions and loop bodies in which no other \
         region ran",
        percent_label(options.min_coverage),
        three_digits(options.min_sp)
    )
}

/// Where the cores came from: "8 (as recorded in the report)".
pub(crate) fn cores_label(view: &HcpaView) -> String {
    let cores = view.plan.options.cores;
    if view.recorded {
        format!("{cores}")
    } else {
        format!("{cores} (this machine's; the report had no plan)")
    }
}

/// A plan row's kind: "function", "loop", "loop body".
pub(crate) fn kind_label(kind: RegionKind) -> &'static str {
    match kind {
        RegionKind::Function => "function",
        RegionKind::Loop => "loop",
        RegionKind::LoopBody => "loop body",
    }
}

/// `file:line` of a region (its first line), `file` or `-`.
pub(crate) fn file_line(files: &FileNames, region: &Region) -> String {
    match (region.file.is_empty(), region.line) {
        (true, 0) => "-".to_string(),
        (true, line) => format!("?:{line}"),
        (false, 0) => files.show(&region.file).to_string(),
        (false, line) => format!("{}:{line}", files.show(&region.file)),
    }
}

/// A parallelism: "70.1", "437", "1.93".
pub(crate) fn parallelism_label(value: f64) -> String {
    three_digits(value)
}

/// An estimated speedup: "1.51x".
pub(crate) fn speedup_label(value: f64) -> String {
    format!("{value:.2}x")
}

/// The column headers of [`stat_cells`].
pub(crate) const STAT_COLUMNS: [&str; 7] = [
    "instances",
    "work",
    "self work",
    "critical path",
    "self-par.",
    "total par.",
    "coverage",
];

/// A region's statistics as the cells of [`STAT_COLUMNS`]; "0" instances and dashes for a
/// region that never ran.
pub(crate) fn stat_cells(stats: Option<&HcpaStats>) -> [String; 7] {
    let Some(s) = stats else {
        let dash = || "-".to_string();
        return [
            "0".to_string(),
            dash(),
            dash(),
            dash(),
            dash(),
            dash(),
            dash(),
        ];
    };
    [
        s.instances.to_string(),
        s.work.to_string(),
        s.self_work.to_string(),
        s.critical_path.to_string(),
        parallelism_label(s.self_parallelism),
        parallelism_label(s.total_parallelism),
        percent_label(s.coverage),
    ]
}
