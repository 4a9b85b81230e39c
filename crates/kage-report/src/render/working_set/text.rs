//! The working-set tool's text views: the header with the tool's facts, a bar chart of the
//! snapshots and the share of snapshots that fit in each cache; and the summary's lines.

use super::{display_rows, facts, innermost_label, interval_label, peak_label, seconds_decimals};
use crate::model::{Report, WorkingSet};
use crate::render::table::{Align, Table};
use crate::render::text::{header, NO_REGIONS};
use crate::render::{bytes_label, percent_label, FileNames};
use std::fmt::Write;

/// Rows of the working-set bar chart at most; more snapshots are combined by taking maxima.
pub const MAX_CHART_ROWS: usize = 60;
/// Characters of the longest bar.
const BAR_WIDTH: usize = 40;

/// The working-set view: the header with the tool's facts, a bar chart with a row per
/// snapshot (at most [`MAX_CHART_ROWS`]: more snapshots are combined, showing the maximum of
/// each run), and the share of snapshots that fit in each cache.
pub(crate) fn text(report: &Report) -> Result<String, String> {
    let ws = report.working_set().map_err(|e| e.to_string())?;
    let mut out = String::new();
    header(report, &facts(report, &ws), &mut out);
    out.push('\n');
    if report.regions.is_empty() {
        out.push_str(NO_REGIONS);
        out.push('\n');
    }
    chart(report, &ws, &mut out);
    out.push('\n');
    cache_table(&ws, &mut out);
    Ok(out)
}

fn chart(report: &Report, ws: &WorkingSet, out: &mut String) {
    if ws.snapshots.is_empty() {
        out.push_str("no snapshots: the program ended before any interval was recorded\n");
        return;
    }
    let rows = display_rows(&ws.snapshots, MAX_CHART_ROWS);
    let scale = rows.iter().map(|r| r.lines).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "distinct cache lines touched per snapshot (bars scaled to the peak, {scale} lines):"
    );
    let combined = ws.snapshots.len() > rows.len();
    if combined {
        let per_row = rows[0].last - rows[0].first + 1;
        let _ = writeln!(
            out,
            "({} snapshots, up to {per_row} per row: a row shows the largest lines and new lines\n \
             of the snapshots it combines, never their sum, and the region of the largest)",
            ws.snapshots.len()
        );
    }
    let span = ws.snapshots[ws.snapshots.len() - 1].end_seconds - ws.snapshots[0].start_seconds;
    let decimals = seconds_decimals(span / rows.len() as f64);
    let files = FileNames::for_report(report);
    let mut table = Table::new(&[
        ("time (s)", Align::Right),
        ("lines", Align::Right),
        ("", Align::Left),
        ("new", Align::Right),
        ("region at the end", Align::Left),
    ]);
    for row in &rows {
        table.row(vec![
            format!("{:.decimals$}", row.start_seconds),
            row.lines.to_string(),
            bar(row.lines, scale),
            row.new_lines.to_string(),
            innermost_label(report, &files, &ws.snapshots[row.peak]),
        ]);
    }
    table.render("", out);
}

/// A bar of [`BAR_WIDTH`] characters at most, in eighths of a character, padded to that width.
/// A non-zero value always gets at least a sliver.
fn bar(value: u64, scale: u64) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let mut eighths = if scale == 0 {
        0
    } else {
        ((value as f64 / scale as f64) * (BAR_WIDTH * 8) as f64).round() as usize
    };
    eighths = eighths.min(BAR_WIDTH * 8);
    if value > 0 && eighths == 0 {
        eighths = 1;
    }
    let mut bar: String = std::iter::repeat_n('█', eighths / 8).collect();
    if eighths % 8 != 0 {
        bar.push(PARTS[eighths % 8]);
    }
    let pad = BAR_WIDTH - bar.chars().count();
    bar.extend(std::iter::repeat_n(' ', pad));
    bar
}

fn cache_table(ws: &WorkingSet, out: &mut String) {
    if ws.caches.is_empty() {
        out.push_str("cache sizes unknown: the runtime found no data caches on this machine\n");
        return;
    }
    out.push_str("fits in cache:\n");
    let mut table = Table::new(&[
        ("cache", Align::Left),
        ("size", Align::Right),
        ("lines", Align::Right),
        ("snapshots that fit", Align::Right),
    ]);
    for cache in &ws.caches {
        table.row(vec![
            cache.name(),
            bytes_label(cache.size_bytes),
            cache.lines.to_string(),
            percent_label(cache.fit_share),
        ]);
    }
    table.render("", out);
}

/// The summary's lines after the common ones: the total and peak working sets, how many
/// snapshots fit in each cache, and where the chart and the plot are.
pub(crate) fn summary(report: &Report, report_path: &str, _top: usize) -> Result<String, String> {
    let ws = report.working_set().map_err(|e| e.to_string())?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kage: {} distinct cache lines ({}) touched in total; {} snapshots (interval {})",
        ws.total_lines,
        bytes_label(ws.bytes(ws.total_lines)),
        ws.snapshots.len(),
        interval_label(ws.interval, ws.interval_unit)
    );
    let _ = writeln!(out, "kage: peak: {}", peak_label(report, &ws));
    if !ws.caches.is_empty() {
        let fits: Vec<String> = ws
            .caches
            .iter()
            .map(|c| {
                format!(
                    "{} {}: {}",
                    c.name(),
                    bytes_label(c.size_bytes),
                    percent_label(c.fit_share)
                )
            })
            .collect();
        let _ = writeln!(out, "kage: snapshots that fit in {}", fits.join(", "));
    }
    let _ = writeln!(
        out,
        "kage: a chart of the snapshots: kage report {report_path}\n\
         kage: a plot: kage report {report_path} --format html -o working-set.html"
    );
    Ok(out)
}
