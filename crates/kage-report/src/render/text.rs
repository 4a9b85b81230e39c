//! The text views, whichever the tool: the whole report (`kage report`) and the short summary
//! (`kage run`). Each tool that has its own text view renders it in its module
//! (`count.rs`, `working_set/text.rs`, `footprint/text.rs`), dispatched by
//! [`TEXT`](super::TEXT) and [`SUMMARY`](super::SUMMARY); any other tool's report, or one whose
//! tool fields do not match the schema, is shown here as a generic region tree.

use super::table::{Align, Table};
use super::tree::{tree_label, RegionTree};
use super::{common_facts, describe_end, tool_view, FileNames, Incomplete, SUMMARY, TEXT};
use crate::model::{ProgramEnd, Report};
use serde_json::Value;
use std::fmt::Write;

/// The whole report for a person: a header, then every region as a tree by static parent.
///
/// A tool with a text view of its own in `render::TEXT` renders the report (the
/// `count` tool: each region's counters in columns, siblings most accesses first, then the
/// totals; the `working-set` tool:
/// a bar chart of the snapshots and how many of them fit in each cache instead of the tree;
/// the `footprint` tool: each region's footprints in columns, siblings largest first; the
/// `hcpa` tool: the parallelism plan, then each region's work, critical path and parallelism
/// in columns, siblings most work first; the `loops` tool: each selected nest's entries and
/// its levels' iterations instead of the tree). For any other tool, or when a tool's fields
/// do not match the schema, each region lists its metrics as `name=value` and the tool's
/// top-level fields follow.
pub fn text(report: &Report) -> String {
    let malformed = match tool_view(TEXT, &report.tool) {
        Some(tool_text) => match tool_text(report) {
            Ok(out) => return out,
            Err(error) => Some(error),
        },
        None => None,
    };
    let mut out = String::new();
    header(report, &[], &mut out);
    if let Some(error) = malformed {
        let _ = writeln!(
            out,
            "warning: the {} fields do not match docs/report-schema.md ({error}); \
             here they are as written",
            report.tool
        );
    }
    out.push('\n');
    if report.regions.is_empty() {
        out.push_str(NO_REGIONS);
    }
    generic_tree(report, &mut out);
    out
}

/// What a report without regions means.
pub(crate) const NO_REGIONS: &str =
    "no instrumented regions: build the program with kage-cc / kage-c++ \
     (or `kage cc`) so that its code is instrumented\n";

/// The header every text view starts with: the common facts, then `extra` (a tool's own),
/// then a warning when the report is incomplete.
pub(crate) fn header(report: &Report, extra: &[(String, String)], out: &mut String) {
    let mut fields = Table::new(&[("", Align::Left), ("", Align::Left)]);
    for (label, value) in common_facts(report)
        .into_iter()
        .chain(extra.iter().cloned())
    {
        fields.row(vec![label, value]);
    }
    // The table's header row is empty; skip it.
    let mut rendered = String::new();
    fields.render("", &mut rendered);
    out.extend(rendered.lines().skip(1).map(|l| format!("{l}\n")));
    for cause in Incomplete::of(report) {
        let text = cause.explain(
            "accesses of regions that other threads had open at that moment may be missing",
        );
        out.push_str(&format!("warning: the report is incomplete: {text}\n"));
    }
}

/// Metric values as people write them: strings without quotes, everything else as compact JSON.
fn show_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn generic_tree(report: &Report, out: &mut String) {
    let files = FileNames::for_report(report);
    let mut table = Table::new(&[
        ("region", Align::Left),
        ("location", Align::Left),
        ("metrics", Align::Left),
    ]);
    for (region, depth) in RegionTree::new(report).walk(report) {
        let metrics: Vec<String> = region
            .metrics
            .iter()
            .map(|(k, v)| format!("{k}={}", show_value(v)))
            .collect();
        table.row(vec![
            tree_label(region, depth),
            files.location(region),
            metrics.join(" "),
        ]);
    }
    if !table.is_empty() {
        table.render("", out);
    }
    if !report.tool_data.is_empty() {
        out.push('\n');
        for (key, value) in &report.tool_data {
            let _ = writeln!(out, "{key}: {}", show_value(value));
        }
    }
}

/// A few lines for the end of `kage run`: where the report is, how the program ended, then what
/// the tool's summary in `render::SUMMARY` says (for the `count` tool the `top`
/// functions and loops with the most accesses, callees included; for the `working-set` tool
/// the total and peak working sets and how often they fit in cache; for the `footprint` tool
/// the total footprint and the `top` functions and loops with the largest footprints; for the
/// `hcpa` tool the program's work and the plan's `top` rows; for the `loops` tool the
/// sampling rule and the first `top` nests) and how
/// to see more.
pub fn summary(report: &Report, report_path: &str, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "kage: {} report written to {report_path}", report.tool);
    let was = if matches!(report.end, ProgramEnd::Signal { .. }) {
        "was "
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "kage: the program (pid {}) {was}{}",
        report.pid,
        describe_end(&report.end)
    );
    if let Some(cause) = Incomplete::of(report).first() {
        out.push_str(&format!(
            "kage: warning: the report is incomplete ({})\n",
            cause.brief()
        ));
    }
    match tool_view(SUMMARY, &report.tool)
        .map(|tool_summary| tool_summary(report, report_path, top))
    {
        Some(Ok(lines)) => out.push_str(&lines),
        Some(Err(error)) => {
            let _ = writeln!(
                out,
                "kage: warning: the {} fields do not match docs/report-schema.md ({error})",
                report.tool
            );
            let _ = writeln!(out, "kage: the whole report: kage report {report_path}");
        }
        None => {
            let _ = writeln!(
                out,
                "kage: the whole region tree: kage report {report_path}"
            );
        }
    }
    out
}
