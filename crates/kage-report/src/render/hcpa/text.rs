//! The hcpa tool's text views: the header with the tool's facts, the plan (a ranked table,
//! what was left out and the cores), then the region tree (siblings most work first) with
//! each region's statistics in columns; and the summary's lines: the plan's top rows.

use super::{
    cores_label, facts, file_line, hcpa_tree, kind_label, left_out, parallelism_label,
    speedup_label, stat_cells, HcpaView, STAT_COLUMNS,
};
use crate::model::Report;
use crate::render::table::{Align, Table};
use crate::render::text::{header, NO_REGIONS};
use crate::render::tree::tree_label;
use crate::render::{flat_label, percent_label, short_name, FileNames};
use std::fmt::Write;

/// The hcpa view: the header with the tool's facts, the plan, then every region as a tree
/// by static parent, siblings most work first, with its statistics in columns and its rank
/// in the plan.
pub(crate) fn text(report: &Report) -> Result<String, String> {
    let view = HcpaView::of(report)?;
    let mut out = String::new();
    header(report, &facts(&view.hcpa), &mut out);
    out.push('\n');
    if report.regions.is_empty() {
        out.push_str(NO_REGIONS);
        return Ok(out);
    }
    let files = FileNames::for_report(report);
    plan_table(report, &view, &files, &mut out);
    out.push('\n');
    out.push_str(
        "self-par.: self-parallelism, how much faster a region's instances would run if the \
         regions directly inside them ran in parallel;\ntotal par.: work / critical path; work \
         and critical path in cost units; coverage: share of the program's work\n",
    );
    let mut columns = vec![("region", Align::Left), ("location", Align::Left)];
    columns.extend(STAT_COLUMNS.iter().map(|&c| (c, Align::Right)));
    columns.push(("plan", Align::Left));
    let mut table = Table::new(&columns);
    for (region, depth) in hcpa_tree(report, &view).walk(report) {
        let mut cells = vec![tree_label(region, depth), files.location(region)];
        cells.extend(stat_cells(view.stats(region.id)));
        cells.push(
            view.rank(region.id)
                .map_or(String::new(), |r| format!("#{r}")),
        );
        table.row(cells);
    }
    table.render("", &mut out);
    Ok(out)
}

/// The plan: a line that says what it is, the ranked table (or that it is empty), what was
/// left out, and the cores.
fn plan_table(report: &Report, view: &HcpaView, files: &FileNames, out: &mut String) {
    let plan = &view.plan;
    let cores = plan.options.cores;
    if plan.rows.is_empty() {
        let _ = writeln!(
            out,
            "plan for {cores} cores: no region is worth parallelising"
        );
    } else {
        let _ = writeln!(
            out,
            "plan for {cores} cores: the regions to parallelise, best first (none runs inside \
             another);\nspeedup: the program's estimated speedup with the region and those \
             above it parallelised"
        );
        let mut table = Table::new(&[
            ("rank", Align::Right),
            ("kind", Align::Left),
            ("region", Align::Left),
            ("location", Align::Left),
            ("coverage", Align::Right),
            ("self-parallelism", Align::Right),
            ("speedup", Align::Right),
        ]);
        for (rank, row) in plan.rows.iter().enumerate() {
            let Some(region) = report.region(row.region) else {
                continue;
            };
            table.row(vec![
                (rank + 1).to_string(),
                kind_label(region.kind).to_string(),
                short_name(&region.name),
                file_line(files, region),
                percent_label(row.coverage),
                parallelism_label(row.self_parallelism),
                speedup_label(row.speedup),
            ]);
        }
        table.render("", out);
    }
    let _ = writeln!(out, "left out: {}", left_out(&plan.options));
    let _ = writeln!(
        out,
        "cores: {} (kage report --cores P plans for P cores)",
        cores_label(view)
    );
    if view.parents_truncated() {
        out.push_str(
            "note: some regions ran inside more regions than the report lists, so the plan \
             may hold regions that ran inside one another\n",
        );
    }
}

/// The summary's lines after the common ones: the program's work and critical path, the
/// plan's `top` rows, and where the whole plan, the tree and the HTML page are.
pub(crate) fn summary(report: &Report, report_path: &str, top: usize) -> Result<String, String> {
    let view = HcpaView::of(report)?;
    let hcpa = &view.hcpa;
    let plan = &view.plan;
    let mut out = String::new();
    let total = match hcpa.critical_path {
        0 => String::new(),
        cp => format!(
            " (total parallelism {})",
            parallelism_label(hcpa.work as f64 / cp as f64)
        ),
    };
    let _ = writeln!(
        out,
        "kage: work {} cost units, critical path {}{total}",
        hcpa.work, hcpa.critical_path
    );
    let cores = plan.options.cores;
    if plan.rows.is_empty() {
        let _ = writeln!(
            out,
            "kage: no region is worth parallelising on {cores} cores (left out: {})",
            left_out(&plan.options)
        );
    } else {
        let shown = plan.rows.len().min(top);
        let more = match plan.rows.len() - shown {
            0 => String::new(),
            n => format!(", {n} more in the report"),
        };
        let regions = match plan.rows.len() {
            1 => "its 1 region".to_string(),
            n => format!("all {n} regions"),
        };
        let _ = writeln!(
            out,
            "kage: parallelism plan for {cores} cores: estimated speedup {} with {regions}{more}:",
            speedup_label(plan.speedup()),
        );
        let files = FileNames::for_report(report);
        let mut table = Table::new(&[
            ("rank", Align::Right),
            ("speedup", Align::Right),
            ("coverage", Align::Right),
            ("self-par.", Align::Right),
            ("region", Align::Left),
            ("location", Align::Left),
        ]);
        for (rank, row) in plan.rows.iter().take(top).enumerate() {
            let Some(region) = report.region(row.region) else {
                continue;
            };
            table.row(vec![
                (rank + 1).to_string(),
                speedup_label(row.speedup),
                percent_label(row.coverage),
                parallelism_label(row.self_parallelism),
                flat_label(region),
                file_line(&files, region),
            ]);
        }
        table.render("kage:   ", &mut out);
    }
    let _ = writeln!(
        out,
        "kage: the whole plan and region tree: kage report {report_path}\n\
         kage: the tree coloured by self-parallelism: kage report {report_path} --format html \
         -o hcpa.html"
    );
    Ok(out)
}
