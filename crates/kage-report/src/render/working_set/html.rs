//! The working set as one self-contained HTML page: an SVG plot (drawn with plotters) of the
//! lines touched per snapshot over time with the cache sizes across it, then the header facts,
//! the share of snapshots that fit in each cache, and a table of every snapshot. No scripts,
//! no external resources: the file can be mailed or attached as it is.

use super::{facts, seconds_decimals, working_set_of};
use crate::model::{CacheFit, Report, Snapshot, WorkingSet};
use crate::render::html::{escape, page_start, run_facts, PageStart};
use crate::render::{bytes_label, flat_label, percent_label, FileNames, ViewError};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::fmt::Write;

/// The plot's size in pixels (it scales with the page: the SVG has a viewBox).
const PLOT_SIZE: (u32, u32) = (960, 440);
/// Room above the highest thing drawn, as a factor of it.
const HEADROOM: f64 = 1.25;
/// The height of a cache line's label, and the width of one of its characters (about).
const LABEL_HEIGHT_PIXELS: f64 = 16.0;
const LABEL_CHAR_PIXELS: f64 = 7.0;
const LINES_COLOR: RGBColor = RGBColor(31, 119, 180);
const NEW_LINES_COLOR: RGBColor = RGBColor(230, 110, 0);
/// Dashed cache-size lines, by level (L1d, L2, L3, beyond).
const CACHE_COLORS: [RGBColor; 4] = [
    RGBColor(44, 140, 44),
    RGBColor(140, 90, 180),
    RGBColor(200, 40, 40),
    RGBColor(90, 90, 90),
];

/// The working-set report as an HTML page. Every text that comes from the report (program,
/// arguments, region and file names) is escaped.
pub(crate) fn html(report: &Report) -> Result<String, ViewError> {
    let ws = working_set_of(report)?;
    let svg = plot(&ws)?;
    let mut out = page_start(
        report,
        &PageStart {
            title: "Working set of",
            heading: "Working set of",
            style: "",
            incomplete: "accesses of other threads at that moment may be missing",
        },
    );
    let _ = writeln!(
        out,
        "<p>Each snapshot is the set of distinct {}-byte cache lines the program's loads and \
         stores touched during one interval; a merged snapshot covers several adjacent \
         intervals and counts their union. New lines are those no earlier snapshot touched.</p>",
        ws.line_size
    );
    let _ = writeln!(out, "<figure>\n{svg}</figure>");

    run_facts(report, facts(report, &ws), &mut out);

    out.push_str("<h2>Fits in cache</h2>\n");
    cache_table(&ws, &mut out);
    out.push_str("<h2>Snapshots</h2>\n");
    snapshot_table(report, &ws, &mut out);
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

fn cache_table(ws: &WorkingSet, out: &mut String) {
    if ws.caches.is_empty() {
        out.push_str("<p>Cache sizes unknown: the runtime found no data caches.</p>\n");
        return;
    }
    out.push_str(
        "<table class=\"data\">\n<tr><th>cache</th><th>size</th><th>lines</th>\
         <th>snapshots that fit</th></tr>\n",
    );
    for cache in &ws.caches {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            cache.name(),
            bytes_label(cache.size_bytes),
            cache.lines,
            percent_label(cache.fit_share)
        );
    }
    out.push_str("</table>\n");
}

fn snapshot_table(report: &Report, ws: &WorkingSet, out: &mut String) {
    if ws.snapshots.is_empty() {
        out.push_str("<p>No snapshots: the program ended before any interval was recorded.</p>\n");
        return;
    }
    let decimals = seconds_decimals(typical_duration(&ws.snapshots));
    let unit = ws.interval_unit.as_str();
    let _ = writeln!(
        out,
        "<table class=\"data\">\n<tr><th>#</th><th>start (s)</th><th>end (s)</th>\
         <th>start ({unit})</th><th>end ({unit})</th><th>intervals</th><th>lines</th>\
         <th>new lines</th><th>cumulative</th>\
         <th>region stack at the end (outermost first)</th></tr>"
    );
    let files = FileNames::for_report(report);
    for (index, s) in ws.snapshots.iter().enumerate() {
        let class = if ws.peak_snapshot == Some(index) {
            " class=\"peak\""
        } else {
            ""
        };
        let intervals = if s.is_merged() {
            format!("{}–{}", s.intervals[0], s.intervals[1])
        } else {
            s.intervals[0].to_string()
        };
        let _ = writeln!(
            out,
            "<tr{class}><td class=\"n\">{index}</td><td class=\"n\">{:.decimals$}</td>\
             <td class=\"n\">{:.decimals$}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{intervals}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td>{}</td></tr>",
            s.start_seconds,
            s.end_seconds,
            s.start,
            s.end,
            s.lines,
            s.new_lines,
            s.cumulative_lines,
            stack_cell(report, &files, s),
        );
    }
    out.push_str("</table>\n");
}

/// The names of a snapshot's stack, outermost first, each with its location as a tooltip.
fn stack_cell(report: &Report, files: &FileNames, snapshot: &Snapshot) -> String {
    if snapshot.regions.is_empty() {
        return "-".to_string();
    }
    let names: Vec<String> = snapshot
        .regions
        .iter()
        .map(|&id| match report.region(id) {
            Some(region) => format!(
                "<span title=\"{}\">{}</span>",
                escape(&files.location(region)),
                escape(&flat_label(region))
            ),
            None => format!("region {id} (not in the report)"),
        })
        .collect();
    names.join(" › ")
}

fn typical_duration(snapshots: &[Snapshot]) -> f64 {
    match (snapshots.first(), snapshots.last()) {
        (Some(first), Some(last)) => {
            (last.end_seconds - first.start_seconds) / snapshots.len() as f64
        }
        _ => 0.0,
    }
}

/// The plot as an `<svg>` element.
fn plot(ws: &WorkingSet) -> Result<String, ViewError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, PLOT_SIZE).into_drawing_area();
        draw(&root, ws).map_err(|e| ViewError::Plot(e.to_string()))?;
        root.present().map_err(|e| ViewError::Plot(e.to_string()))?;
    }
    Ok(svg)
}

/// The steps of a value that holds from each snapshot's start to its end.
fn steps(snapshots: &[Snapshot], value: impl Fn(&Snapshot) -> u64) -> Vec<(f64, f64)> {
    snapshots
        .iter()
        .flat_map(|s| {
            let v = value(s) as f64;
            [(s.start_seconds, v), (s.end_seconds, v)]
        })
        .collect()
}

fn cache_label(cache: &CacheFit) -> String {
    format!("{} {}", cache.name(), bytes_label(cache.size_bytes))
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    ws: &WorkingSet,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let snapshots = &ws.snapshots;
    let peak = snapshots.iter().map(|s| s.lines).max().unwrap_or(0);
    // The y range reaches the smallest cache the peak fits in, so that the plot shows which
    // cache holds the working set; larger caches are named above the plot instead.
    let fitting = ws
        .caches
        .iter()
        .find(|c| c.lines >= peak)
        .map_or(0, |c| c.lines);
    let top = peak.max(fitting).max(1) as f64 * HEADROOM;
    let mut end = snapshots
        .last()
        .map_or(ws.duration_seconds, |s| s.end_seconds);
    if end.is_nan() || end <= 0.0 {
        end = 1e-6;
    }
    let x_decimals = (0..9).find(|&d| 10f64.powi(-d) <= end / 10.0).unwrap_or(9) as usize;
    let x_format = move |x: &f64| format!("{x:.x_decimals$}");
    let y_format = |y: &f64| format!("{y:.0}");

    let mut chart = ChartBuilder::on(root)
        .margin(16)
        .margin_right(24)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..end, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("time since the start (s)")
        .y_desc("distinct cache lines touched per interval")
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .axis_desc_style(("sans-serif", 16))
        .label_style(("sans-serif", 13))
        .draw()?;

    if let (Some(first), Some(last)) = (snapshots.first(), snapshots.last()) {
        let mut area = vec![(first.start_seconds, 0.0)];
        area.extend(steps(snapshots, |s| s.lines));
        area.push((last.end_seconds, 0.0));
        chart.draw_series(std::iter::once(Polygon::new(
            area,
            LINES_COLOR.mix(0.22).filled(),
        )))?;
        chart
            .draw_series(LineSeries::new(
                steps(snapshots, |s| s.lines),
                LINES_COLOR.stroke_width(2),
            ))?
            .label("lines touched in the snapshot")
            .legend(|(x, y)| {
                Rectangle::new([(x, y - 5), (x + 18, y + 5)], LINES_COLOR.mix(0.5).filled())
            });
        chart
            .draw_series(LineSeries::new(
                steps(snapshots, |s| s.new_lines),
                NEW_LINES_COLOR.stroke_width(2),
            ))?
            .label("new lines (touched for the first time)")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], NEW_LINES_COLOR.stroke_width(2))
            });
    }

    // Labels of cache lines that lie close together on the plot go side by side.
    let (x_pixels, y_pixels) = chart.plotting_area().get_pixel_range();
    let x_per_pixel = end / f64::from((x_pixels.end - x_pixels.start).max(1));
    let y_per_pixel = top / f64::from((y_pixels.end - y_pixels.start).max(1));
    let label_x = end * 0.005;
    let mut previous_label: Option<(f64, f64)> = None; // (y, x where it ends)
    let mut above = Vec::new();
    for (i, cache) in ws.caches.iter().enumerate() {
        let color = CACHE_COLORS[i.min(CACHE_COLORS.len() - 1)];
        let lines = cache.lines as f64;
        let label = format!("{} ({} lines)", cache_label(cache), cache.lines);
        if lines > top {
            above.push(label);
            continue;
        }
        chart.draw_series(DashedLineSeries::new(
            [(0.0, lines), (end, lines)],
            8,
            5,
            color.stroke_width(2),
        ))?;
        let x = match previous_label {
            Some((y, x_end)) if (lines - y) / y_per_pixel < LABEL_HEIGHT_PIXELS => {
                x_end + 12.0 * x_per_pixel
            }
            _ => label_x,
        };
        let width = label.chars().count() as f64 * LABEL_CHAR_PIXELS * x_per_pixel;
        previous_label = Some((lines, x + width));
        // A light backing keeps the label readable over the series.
        chart.draw_series(std::iter::once(Rectangle::new(
            [
                (x - 2.0 * x_per_pixel, lines + y_per_pixel),
                (x + width, lines + (LABEL_HEIGHT_PIXELS + 1.0) * y_per_pixel),
            ],
            WHITE.mix(0.75).filled(),
        )))?;
        let style = ("sans-serif", 14)
            .into_font()
            .color(&color)
            .pos(Pos::new(HPos::Left, VPos::Bottom));
        chart.draw_series(std::iter::once(Text::new(
            label,
            (x, lines + 2.0 * y_per_pixel),
            style,
        )))?;
    }
    if !above.is_empty() {
        let style = ("sans-serif", 14)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Top));
        chart.draw_series(std::iter::once(Text::new(
            format!("{}: above the top of this plot", above.join(", ")),
            (label_x, top * 0.99),
            style,
        )))?;
    }
    if snapshots.is_empty() {
        let style = ("sans-serif", 18)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center));
        chart.draw_series(std::iter::once(Text::new(
            "no snapshots",
            (end / 2.0, top / 2.0),
            style,
        )))?;
    } else {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 14))
            .draw()?;
    }
    Ok(())
}
