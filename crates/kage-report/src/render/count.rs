//! The `count` tool's text views: the region tree (siblings with the most accesses first)
//! with each region's counters in columns (inclusive ones first, then the `self_` ones) and
//! the totals after it, and the summary's regions with the most accesses.

use super::table::{Align, Table};
use super::text::{header, NO_REGIONS};
use super::tree::{tree_label, RegionTree};
use super::{flat_label, FileNames};
use crate::model::{CountStats, Counters, Region, RegionKind, Report};
use std::cmp::Reverse;
use std::fmt::Write;

/// The count view: the header, then every region as a tree by static parent with its counters
/// in columns, siblings with the most accesses (loads + stores, callees included) first and
/// regions that never ran last, then the totals and what no region made (`unattributed`).
/// Never fails: a region without counters shows dashes.
pub(crate) fn text(report: &Report) -> Result<String, String> {
    let mut out = String::new();
    header(report, &[], &mut out);
    out.push('\n');
    if report.regions.is_empty() {
        out.push_str(NO_REGIONS);
    }
    count_tree(report, &mut out);
    Ok(out)
}

fn counter_cells(c: &Counters) -> [String; 4] {
    [
        c.loads.to_string(),
        c.stores.to_string(),
        c.bytes_read.to_string(),
        c.bytes_written.to_string(),
    ]
}

fn count_tree(report: &Report, out: &mut String) {
    let files = FileNames::for_report(report);
    let mut table = Table::new(&[
        ("region", Align::Left),
        ("location", Align::Left),
        ("instances", Align::Right),
        ("loads", Align::Right),
        ("stores", Align::Right),
        ("bytes_read", Align::Right),
        ("bytes_written", Align::Right),
        ("self_loads", Align::Right),
        ("self_stores", Align::Right),
        ("self_bytes_read", Align::Right),
        ("self_bytes_written", Align::Right),
    ]);
    for (region, depth) in ranked_tree(report).walk(report) {
        let mut cells = vec![tree_label(region, depth), files.location(region)];
        match CountStats::of(region) {
            Some(stats) => {
                cells.push(stats.instances.to_string());
                cells.extend(counter_cells(&stats.inclusive));
                cells.extend(counter_cells(&stats.exclusive));
            }
            None => cells.extend(std::iter::repeat_n("-".to_string(), 9)),
        }
        table.row(cells);
    }
    for (label, field) in [("(totals)", "totals"), ("(unattributed)", "unattributed")] {
        let counters = report
            .tool_data
            .get(field)
            .and_then(|v| serde_json::from_value::<Counters>(v.clone()).ok());
        if let Some(counters) = counters {
            let mut cells = vec![label.to_string(), String::new(), String::new()];
            cells.extend(counter_cells(&counters));
            table.row(cells);
        }
    }
    if !table.is_empty() {
        table.render("", out);
    }
}

/// The region tree with siblings by most accesses first, then by id, so regions that never
/// ran (or have no counters) come last, as the other tools' trees order them by their own
/// measure. Loop bodies that never ran are left out, their loops taking their place: such a
/// body says nothing its loop does not.
fn ranked_tree(report: &Report) -> RegionTree {
    let stats = |id: u32| CountStats::of(&report.regions[id as usize]);
    let ran = |id: u32| stats(id).is_some_and(|s| s.instances > 0);
    RegionTree::new(report)
        .splice_out(|id| report.regions[id as usize].kind == RegionKind::LoopBody && !ran(id))
        .sort_siblings_by_key(|id| {
            let accesses = stats(id).map_or(0, |s| s.inclusive.loads + s.inclusive.stores);
            (!ran(id), Reverse(accesses), id)
        })
}

/// The summary's lines after the common ones: the totals, the `top` functions and loops with
/// the most accesses (callees included), and where the whole tree is.
pub(crate) fn summary(report: &Report, report_path: &str, top: usize) -> Result<String, String> {
    let mut out = String::new();
    totals_and_top(report, top, &mut out);
    let _ = writeln!(
        out,
        "kage: the whole region tree: kage report {report_path}"
    );
    Ok(out)
}

fn totals_and_top(report: &Report, top: usize, out: &mut String) {
    if let Some(t) = report.count_totals() {
        let _ = writeln!(
            out,
            "kage: {} loads ({} bytes), {} stores ({} bytes) in total",
            t.loads, t.bytes_read, t.stores, t.bytes_written
        );
    }
    // Loop bodies are left out: a body's inclusive counts are its loop's, split by iteration.
    let mut ranked: Vec<(&Region, CountStats)> = report
        .regions
        .iter()
        .filter(|r| r.kind != RegionKind::LoopBody)
        .filter_map(|r| CountStats::of(r).map(|s| (r, s)))
        .filter(|(_, s)| s.inclusive.loads + s.inclusive.stores > 0)
        .collect();
    ranked.sort_by_key(|(r, s)| {
        (
            std::cmp::Reverse(s.inclusive.loads + s.inclusive.stores),
            r.id,
        )
    });
    ranked.truncate(top);
    if ranked.is_empty() {
        out.push_str("kage: no region made any memory access\n");
        return;
    }
    let _ = writeln!(
        out,
        "kage: top regions by accesses (loads + stores, callees included):"
    );
    let files = FileNames::for_report(report);
    let mut table = Table::new(&[
        ("accesses", Align::Right),
        ("loads", Align::Right),
        ("stores", Align::Right),
        ("region", Align::Left),
        ("location", Align::Left),
    ]);
    for (region, stats) in ranked {
        let c = stats.inclusive;
        table.row(vec![
            (c.loads + c.stores).to_string(),
            c.loads.to_string(),
            c.stores.to_string(),
            flat_label(region),
            files.location(region),
        ]);
    }
    table.render("kage:   ", out);
}
