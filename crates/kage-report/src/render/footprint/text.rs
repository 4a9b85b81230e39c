//! The footprint tool's text views: the header with the tool's facts, then the region tree
//! (siblings largest footprint first) with each region's footprints in columns; and the
//! summary's lines.

use super::{facts, footprint_tree, stat_cells, STAT_COLUMNS};
use crate::model::{Region, RegionKind, Report};
use crate::render::table::{Align, Table};
use crate::render::text::{header, NO_REGIONS};
use crate::render::tree::tree_label;
use crate::render::{bytes_label, flat_label, FileNames};
use std::fmt::Write;

/// The footprint view: the header with the tool's facts, then every region as a tree by
/// static parent, siblings by largest footprint first, with its footprints in columns.
pub(crate) fn text(report: &Report) -> Result<String, String> {
    let fp = report.footprint().map_err(|e| e.to_string())?;
    let mut out = String::new();
    header(report, &facts(report, &fp), &mut out);
    out.push('\n');
    if report.regions.is_empty() {
        out.push_str(NO_REGIONS);
        return Ok(out);
    }
    let _ = writeln!(
        out,
        "footprint of an instance: the distinct memory it touched ({} granularity), nested \
         loops and callees included;\nshare: the largest instance's share of the total footprint",
        fp.granularity.as_str()
    );
    let mut columns = vec![("region", Align::Left), ("location", Align::Left)];
    columns.extend(STAT_COLUMNS.iter().map(|&c| (c, Align::Right)));
    let mut table = Table::new(&columns);
    let files = FileNames::for_report(report);
    for (region, depth) in footprint_tree(report, &fp).walk(report) {
        let mut cells = vec![tree_label(region, depth), files.location(region)];
        cells.extend(stat_cells(&fp.stats(region.id)));
        table.row(cells);
    }
    table.render("", &mut out);
    Ok(out)
}

/// The summary's lines after the common ones: the total footprint, the `top` functions and
/// loops with the largest footprints (callees included), and where the tree and the icicle
/// view are.
pub(crate) fn summary(report: &Report, report_path: &str, top: usize) -> Result<String, String> {
    let fp = report.footprint().map_err(|e| e.to_string())?;
    let mut out = String::new();
    let threads = if report.threads > 1 {
        format!(" (summed over {} threads)", report.threads)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "kage: total footprint {} ({} lines){threads} at {} granularity; \
         shadow memory ({}) peaked at {}",
        bytes_label(fp.total_bytes),
        fp.total_lines,
        fp.granularity.as_str(),
        fp.vsm,
        bytes_label(fp.shadow_peak_bytes)
    );
    // Loop bodies are left out: a body's footprint is one iteration of its loop's.
    let mut ranked: Vec<(&Region, u64)> = report
        .regions
        .iter()
        .filter(|r| r.kind != RegionKind::LoopBody)
        .map(|r| (r, fp.stats(r.id).max_bytes))
        .filter(|&(_, max)| max > 0)
        .collect();
    ranked.sort_by_key(|&(r, max)| (std::cmp::Reverse(max), r.id));
    ranked.truncate(top);
    if ranked.is_empty() {
        out.push_str("kage: no region touched any memory\n");
    } else {
        let _ = writeln!(
            out,
            "kage: top regions by footprint (largest instance, callees included):"
        );
        let files = FileNames::for_report(report);
        let mut table = Table::new(&[
            ("max", Align::Right),
            ("avg", Align::Right),
            ("instances", Align::Right),
            ("share", Align::Right),
            ("region", Align::Left),
            ("location", Align::Left),
        ]);
        for (region, _) in ranked {
            let [instances, avg, _, max, _, _, _, share] = stat_cells(&fp.stats(region.id));
            table.row(vec![
                max,
                avg,
                instances,
                share,
                flat_label(region),
                files.location(region),
            ]);
        }
        table.render("kage:   ", &mut out);
    }
    let _ = writeln!(
        out,
        "kage: the whole region tree: kage report {report_path}\n\
         kage: an icicle view: kage report {report_path} --format html -o footprint.html"
    );
    Ok(out)
}
