//! The text views: the whole region tree (`kage report`) and the short summary (`kage run`).

use super::footprint::{self, footprint_tree, stat_cells, STAT_COLUMNS};
use super::table::{Align, Table};
use super::tree::{tree_label, RegionTree};
use super::working_set::{
    display_rows, facts, innermost_label, interval_label, peak_label, seconds_decimals,
};
use super::{bytes_label, common_facts, describe_end, flat_label, percent_label, FileNames};
use crate::model::{
    CountStats, Counters, Footprint, ProgramEnd, Region, RegionKind, Report, WorkingSet,
    FOOTPRINT_TOOL, WORKING_SET_TOOL,
};
use serde_json::Value;
use std::fmt::Write;

/// The tool whose per-region counters get their own columns.
const COUNT_TOOL: &str = "count";

/// The whole report for a person: a header, then every region as a tree by static parent.
///
/// For the `working-set` tool the header is followed by a bar chart of the snapshots and how
/// many of them fit in each cache instead of the tree (see `working_set_text`). For the
/// `count` tool each region gets its counters in columns (inclusive ones first, then the
/// `self_` ones) and the totals follow. For the `footprint` tool each region gets its
/// footprints in columns, siblings largest first (see `footprint_text`). For any other
/// tool, or when a tool's fields do not match the schema, each region lists its metrics as
/// `name=value` and the tool's top-level fields follow.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let malformed = match report.tool.as_str() {
        WORKING_SET_TOOL => match report.working_set() {
            Ok(ws) => {
                working_set_text(report, &ws, &mut out);
                return out;
            }
            Err(error) => Some(error.to_string()),
        },
        FOOTPRINT_TOOL => match report.footprint() {
            Ok(fp) => {
                footprint_text(report, &fp, &mut out);
                return out;
            }
            Err(error) => Some(error.to_string()),
        },
        _ => None,
    };
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
    if report.tool == COUNT_TOOL {
        count_tree(report, &mut out);
    } else {
        generic_tree(report, &mut out);
    }
    out
}

/// What a report without regions means.
const NO_REGIONS: &str = "no instrumented regions: build the program with kage-cc / kage-c++ \
                          (or `kage cc`) so that its code is instrumented\n";

fn header(report: &Report, extra: &[(String, String)], out: &mut String) {
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
    if !report.complete {
        out.push_str(
            "warning: the report is incomplete: it was written from a fatal signal handler, \
             so accesses of regions that other threads had open at that moment may be missing\n",
        );
    }
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
    for (region, depth) in RegionTree::new(report).walk(report) {
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

/// A few lines for the end of `kage run`: where the report is, how the program ended, and for
/// the `count` tool the `top` functions and loops with the most accesses (callees included);
/// for the `working-set` tool the total and peak working sets and how often they fit in cache;
/// for the `footprint` tool the total footprint and the `top` functions and loops with the
/// largest footprints.
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
    if !report.complete {
        out.push_str(
            "kage: warning: the report is incomplete (written from a fatal signal handler)\n",
        );
    }
    if report.tool == WORKING_SET_TOOL {
        working_set_summary(report, report_path, &mut out);
        return out;
    }
    if report.tool == FOOTPRINT_TOOL {
        footprint_summary(report, report_path, top, &mut out);
        return out;
    }
    if report.tool == COUNT_TOOL {
        count_summary(report, top, &mut out);
    }
    let _ = writeln!(
        out,
        "kage: the whole region tree: kage report {report_path}"
    );
    out
}

fn count_summary(report: &Report, top: usize, out: &mut String) {
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

/// Rows of the working-set bar chart at most; more snapshots are combined by taking maxima.
pub const MAX_CHART_ROWS: usize = 60;
/// Characters of the longest bar.
const BAR_WIDTH: usize = 40;

/// The working-set view: the header with the tool's facts, a bar chart with a row per
/// snapshot (at most [`MAX_CHART_ROWS`]: more snapshots are combined, showing the maximum of
/// each run), and the share of snapshots that fit in each cache.
fn working_set_text(report: &Report, ws: &WorkingSet, out: &mut String) {
    header(report, &facts(report, ws), out);
    out.push('\n');
    if report.regions.is_empty() {
        out.push_str(NO_REGIONS);
        out.push('\n');
    }
    working_set_chart(report, ws, out);
    out.push('\n');
    cache_table(ws, out);
}

fn working_set_chart(report: &Report, ws: &WorkingSet, out: &mut String) {
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

fn working_set_summary(report: &Report, report_path: &str, out: &mut String) {
    let ws = match report.working_set() {
        Ok(ws) => ws,
        Err(error) => {
            let _ = writeln!(
                out,
                "kage: warning: the {WORKING_SET_TOOL} fields do not match \
                 docs/report-schema.md ({error})"
            );
            let _ = writeln!(out, "kage: the whole report: kage report {report_path}");
            return;
        }
    };
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
}

/// The footprint view: the header with the tool's facts, then every region as a tree by
/// static parent, siblings by largest footprint first, with its footprints in columns.
fn footprint_text(report: &Report, fp: &Footprint, out: &mut String) {
    header(report, &footprint::facts(report, fp), out);
    out.push('\n');
    if report.regions.is_empty() {
        out.push_str(NO_REGIONS);
        return;
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
    for (region, depth) in footprint_tree(report, fp).walk(report) {
        let mut cells = vec![tree_label(region, depth), files.location(region)];
        cells.extend(stat_cells(&fp.stats(region.id)));
        table.row(cells);
    }
    table.render("", out);
}

fn footprint_summary(report: &Report, report_path: &str, top: usize, out: &mut String) {
    let fp = match report.footprint() {
        Ok(fp) => fp,
        Err(error) => {
            let _ = writeln!(
                out,
                "kage: warning: the {FOOTPRINT_TOOL} fields do not match \
                 docs/report-schema.md ({error})"
            );
            let _ = writeln!(out, "kage: the whole report: kage report {report_path}");
            return;
        }
    };
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
        table.render("kage:   ", out);
    }
    let _ = writeln!(
        out,
        "kage: the whole region tree: kage report {report_path}\n\
         kage: an icicle view: kage report {report_path} --format html -o footprint.html"
    );
}
