//! A footprint report as one self-contained HTML page: an icicle view of the region tree
//! (hand-built SVG: a rectangle and a label per region, its statistics as a hover title),
//! then the header facts and a table of every region. No scripts, no external resources.

use super::{
    facts, footprint_of, footprint_tree, icicle, stat_cells, IcicleCell, ICICLE_MEASURE,
    STAT_COLUMNS,
};
use crate::model::{Footprint, Region, RegionKind, Report};
use crate::render::html::{escape, page_start, program_name, run_facts, PageStart};
use crate::render::tree::node_label;
use crate::render::{
    average_bytes_label, bytes_label, decimal_label, flat_label, percent_label, short_name,
    FileNames, ViewError,
};
use std::fmt::Write;

/// The icicle's width in pixels (it scales with the page: the SVG has a viewBox).
const ICICLE_WIDTH: f64 = 1200.0;
/// The height of one row of the icicle.
const ROW_HEIGHT: f64 = 24.0;
/// About the width of one character of a label (12px sans-serif).
const CHAR_PIXELS: f64 = 7.0;
/// Cells narrower than this get no label.
const MIN_LABEL_PIXELS: f64 = 3.0 * CHAR_PIXELS;

/// The footprint report as an HTML page. Every text that comes from the report (program,
/// arguments, region and file names, the shadow memory's name) is escaped.
pub(crate) fn html(report: &Report) -> Result<String, ViewError> {
    let fp = footprint_of(report)?;
    let files = FileNames::for_report(report);
    let mut out = page_start(
        report,
        &PageStart {
            title: "Footprint of",
            heading: "Memory footprint of",
            style: ICICLE_STYLE,
            incomplete: "footprints of regions open at that moment may be missing",
        },
    );
    let _ = writeln!(
        out,
        "<p>The footprint of a dynamic region (a call, a loop, one iteration of a loop) is the \
         number of distinct memory locations it touched, nested loops and callees included; \
         a location is {} here. Each static region shows the average, smallest and largest \
         footprint of its instances, and the largest one's share of the total footprint \
         ({}).</p>",
        location_words(&fp),
        bytes_label(fp.total_bytes),
    );
    let _ = writeln!(
        out,
        "<p class=\"note\">The top row is the whole program. Under it the functions side by \
         side (they are the roots of the static tree: a function's footprint also counts in \
         each of its callers'), and under each region its loops, and under each loop its body \
         (one iteration) when bodies were measured. Widths are proportional to {ICICLE_MEASURE}: a region is as wide as \
         the region above it times its footprint over that region's. Footprints of siblings \
         overlap (they may touch the same memory), so they need not add up to their \
         parent's; where they add up to more, they are scaled down together to fit under it, \
         as the tooltip says. Regions that never ran or touched nothing are not drawn. Hover \
         over a rectangle for its statistics.</p>"
    );
    let _ = writeln!(
        out,
        "<figure>\n{}</figure>",
        icicle_svg(report, &fp, &files, program_name(report))
    );

    run_facts(report, facts(report, &fp), &mut out);
    out.push_str("<h2>Regions</h2>\n");
    region_table(report, &fp, &files, &mut out);
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

const ICICLE_STYLE: &str =
    "svg.icicle text { font: 12px sans-serif; fill: #111; pointer-events: none; }
svg.icicle rect { stroke: #fff; stroke-width: 1; }
svg.icicle g:hover rect { stroke: #000; }
p.note { color: #555; max-width: 60em; }
tr.idle td { color: #999; }
";

/// "a byte", "an aligned 8-byte word", "a 64-byte cache line".
fn location_words(fp: &Footprint) -> String {
    use crate::model::FootprintGranularity::*;
    match fp.granularity {
        Byte => "a byte".to_string(),
        Word => format!("an aligned {}-byte word", fp.location_bytes),
        Line => format!("a {}-byte cache line", fp.location_bytes),
    }
}

/// The icicle as an `<svg>` element: one `<g>` per cell with a hover title, a rectangle and,
/// when it is wide enough, a label cut to fit.
fn icicle_svg(report: &Report, fp: &Footprint, files: &FileNames, program: &str) -> String {
    let cells = icicle(report, fp);
    // Only the program's row: a line under it says why.
    let empty = cells.len() == 1;
    let rows = cells.iter().map(|c| c.depth).max().unwrap_or(0) + 1 + usize::from(empty);
    let height = rows as f64 * ROW_HEIGHT;
    let mut svg = format!(
        "<svg class=\"icicle\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {ICICLE_WIDTH} \
         {height}\" width=\"{ICICLE_WIDTH}\" height=\"{height}\" role=\"img\" \
         aria-label=\"icicle view of the region tree, sized by footprint\">\n"
    );
    for cell in &cells {
        let (label, title, fill) = match cell.region.and_then(|id| report.region(id)) {
            Some(region) => (
                cell_label(region),
                region_title(region, fp, files, cell),
                fill(region, cell.depth),
            ),
            None => (
                program.to_string(),
                format!(
                    "{program}: the whole program\ntotal footprint {} ({} bytes, {} lines)",
                    bytes_label(fp.total_bytes),
                    fp.total_bytes,
                    fp.total_lines
                ),
                "#c9c9c9".to_string(),
            ),
        };
        let x = cell.x * ICICLE_WIDTH;
        let width = cell.width * ICICLE_WIDTH;
        let y = cell.depth as f64 * ROW_HEIGHT;
        let _ = write!(
            svg,
            "<g><title>{}</title><rect x=\"{x:.2}\" y=\"{y}\" width=\"{width:.2}\" \
             height=\"{}\" fill=\"{fill}\"/>",
            escape(&title),
            ROW_HEIGHT - 1.0,
        );
        if let Some(label) = fit_label(&label, width) {
            let _ = write!(
                svg,
                "<text x=\"{:.2}\" y=\"{}\">{}</text>",
                x + 4.0,
                y + ROW_HEIGHT / 2.0 + 4.0,
                escape(&label)
            );
        }
        svg.push_str("</g>\n");
    }
    if empty {
        let _ = writeln!(
            svg,
            "<text x=\"4\" y=\"{}\">no region touched any memory</text>",
            ROW_HEIGHT * 1.5 + 4.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The text inside a cell: a function's name, "loop, line 33", "loop body, line 33".
fn cell_label(region: &Region) -> String {
    let what = match region.kind {
        RegionKind::Function => return short_name(&region.name),
        RegionKind::Loop => "loop",
        RegionKind::LoopBody => "loop body",
    };
    if region.line == 0 {
        what.to_string()
    } else {
        format!("{what}, line {}", region.line)
    }
}

/// `label` as it fits in `width` pixels: whole, cut with an ellipsis, or not at all.
fn fit_label(label: &str, width: f64) -> Option<String> {
    if width < MIN_LABEL_PIXELS {
        return None;
    }
    let room = ((width - 8.0) / CHAR_PIXELS).floor().max(0.0) as usize;
    let length = label.chars().count();
    if length <= room {
        Some(label.to_string())
    } else if room >= 2 {
        let mut cut: String = label.chars().take(room - 1).collect();
        cut.push('…');
        Some(cut)
    } else {
        None
    }
}

/// Warm colours for functions, blues for loops, greens for loop bodies; a little lighter
/// with each level, so that neighbours stand apart.
fn fill(region: &Region, depth: usize) -> String {
    let (hue, saturation) = match region.kind {
        RegionKind::Function => (24, 80),
        RegionKind::Loop => (210, 60),
        RegionKind::LoopBody => (160, 45),
    };
    let lightness = 58 + (depth % 4) * 6;
    format!("hsl({hue},{saturation}%,{lightness}%)")
}

/// A cell's hover title: what the region is, where, and every statistic.
fn region_title(region: &Region, fp: &Footprint, files: &FileNames, cell: &IcicleCell) -> String {
    let stats = fp.stats(region.id);
    let mut title = format!(
        "{} ({})\ninstances: {}\nfootprint: avg {}, min {}, max {}\n\
         lines: avg {}, min {}, max {}\nshare of the total footprint: {}",
        flat_label(region),
        files.location(region),
        stats.instances,
        average_bytes_label(stats.avg_bytes),
        bytes_label(stats.min_bytes),
        bytes_label(stats.max_bytes),
        decimal_label(stats.avg_lines),
        stats.min_lines,
        stats.max_lines,
        percent_label(stats.share),
    );
    if cell.scale < 1.0 {
        let _ = write!(
            title,
            "\ndrawn at {} of its width: its siblings' footprints and its own add up to more \
             than its parent's",
            percent_label(cell.scale)
        );
    }
    title
}

/// Every region in tree order (largest first), indented by depth, with its statistics.
fn region_table(report: &Report, fp: &Footprint, files: &FileNames, out: &mut String) {
    if report.regions.is_empty() {
        out.push_str(
            "<p>No instrumented regions: build the program with kage-cc / kage-c++ so that \
             its code is instrumented.</p>\n",
        );
        return;
    }
    out.push_str("<table class=\"data\">\n<tr><th>region</th><th>location</th>");
    for column in STAT_COLUMNS {
        let _ = write!(out, "<th>{column}</th>");
    }
    out.push_str("</tr>\n");
    for (region, depth) in footprint_tree(report, fp).walk(report) {
        let stats = fp.stats(region.id);
        let class = if stats.never_entered() {
            " class=\"idle\""
        } else {
            ""
        };
        let _ = write!(
            out,
            "<tr{class}><td style=\"padding-left: {:.1}em\" title=\"{}\">{}</td><td>{}</td>",
            0.7 + 1.2 * depth as f64,
            escape(&region.name),
            escape(&node_label(region)),
            escape(&files.location(region)),
        );
        for cell in stat_cells(&stats) {
            let _ = write!(out, "<td class=\"n\">{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}
