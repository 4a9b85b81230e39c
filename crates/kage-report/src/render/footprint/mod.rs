//! The footprint tool's views: the text view and the summary (`text.rs`) and the HTML page
//! with its icicle view (`html.rs`); and here what they share: reading the tool's fields, the
//! facts of the header, the order of the region tree (largest footprint first), the cells of a
//! region's statistics, and the layout of the icicle view.

#[cfg(feature = "html")]
mod html;
mod text;

#[cfg(feature = "html")]
pub(crate) use html::html;
pub(crate) use text::{summary, text};

use crate::model::{Footprint, FootprintStats, RegionKind, Report, FOOTPRINT_TOOL};
use crate::render::tree::RegionTree;
use crate::render::{average_bytes_label, bytes_label, decimal_label, percent_label, ViewError};
use std::cmp::Reverse;

/// The footprint fields of a report the html view is asked for (the dispatch in
/// `render/mod.rs` sends it only reports of the footprint tool).
#[cfg_attr(not(feature = "html"), allow(dead_code))]
pub(crate) fn footprint_of(report: &Report) -> Result<Footprint, ViewError> {
    report.footprint().map_err(|e| ViewError::Malformed {
        tool: FOOTPRINT_TOOL,
        error: e.to_string(),
    })
}

/// The region tree with siblings by largest footprint (`max_bytes`) first, then by id; so
/// regions never entered come last. Loop bodies without instances are left out, their loops
/// taking their place: a body says nothing its loop does not when the loop never ran, and
/// when the runtime did not measure bodies (`loop_bodies` false) nested loops then hang
/// directly under the loop around them.
pub(crate) fn footprint_tree(report: &Report, fp: &Footprint) -> RegionTree {
    RegionTree::new(report)
        .splice_out(|id| {
            report.regions[id as usize].kind == RegionKind::LoopBody && fp.stats(id).never_entered()
        })
        .sort_siblings_by_key(|id| (Reverse(fp.stats(id).max_bytes), id))
}

/// The facts of a footprint report's header, after the common ones: (label, value).
pub(crate) fn facts(report: &Report, fp: &Footprint) -> Vec<(String, String)> {
    let granularity = format!(
        "{} ({} per location)",
        fp.granularity.as_str(),
        plural(fp.location_bytes, "byte")
    );
    let mut total = format!(
        "{} ({}, {})",
        bytes_label(fp.total_bytes),
        plural(fp.total_bytes, "byte"),
        plural(fp.total_lines, "line")
    );
    if report.threads > 1 {
        total.push_str(&format!(
            ", summed over the {} threads (each counts what it touched)",
            report.threads
        ));
    }
    let mut facts = vec![
        ("granularity".to_string(), granularity),
        ("line size".to_string(), plural(fp.line_size, "byte")),
        ("total footprint".to_string(), total),
        (
            "max depth".to_string(),
            format!("{} nested regions", fp.max_depth),
        ),
        ("accesses".to_string(), fp.accesses.to_string()),
        (
            "shadow memory".to_string(),
            format!("{}, peak {}", fp.vsm, bytes_label(fp.shadow_peak_bytes)),
        ),
    ];
    if fp.loop_bodies == Some(false) {
        facts.push((
            "loop bodies".to_string(),
            "not measured (loop_bodies=1 measures each iteration); nested loops are shown \
             under the loop around them"
                .to_string(),
        ));
    }
    if let Some(untracked) = fp.untracked_instances.filter(|&n| n > 0) {
        facts.push((
            "untracked".to_string(),
            format!(
                "{untracked} region instances nested too deep to measure are in no region's \
                 statistics"
            ),
        ));
    }
    facts
}

/// "1 byte", "64 bytes".
fn plural(count: u64, unit: &str) -> String {
    if count == 1 {
        format!("1 {unit}")
    } else {
        format!("{count} {unit}s")
    }
}

/// The column headers of [`stat_cells`].
pub(crate) const STAT_COLUMNS: [&str; 8] = [
    "instances",
    "avg",
    "min",
    "max",
    "avg lines",
    "min lines",
    "max lines",
    "share",
];

/// A region's statistics as the cells of [`STAT_COLUMNS`]: sizes in B/KiB/MiB, lines as
/// numbers, the share as a percentage; "-" for the footprints of a region never entered.
pub(crate) fn stat_cells(stats: &FootprintStats) -> [String; 8] {
    if stats.never_entered() {
        let dash = || "-".to_string();
        return [
            "0".to_string(),
            dash(),
            dash(),
            dash(),
            dash(),
            dash(),
            dash(),
            dash(),
        ];
    }
    [
        stats.instances.to_string(),
        average_bytes_label(stats.avg_bytes),
        bytes_label(stats.min_bytes),
        bytes_label(stats.max_bytes),
        decimal_label(stats.avg_lines),
        stats.min_lines.to_string(),
        stats.max_lines.to_string(),
        percent_label(stats.share),
    ]
}

/// What the icicle view's widths are proportional to, in words.
#[cfg_attr(not(feature = "html"), allow(dead_code))]
pub(crate) const ICICLE_MEASURE: &str = "the largest footprint of any instance (max)";

/// One rectangle of the icicle view.
#[derive(Debug, Clone, PartialEq)]
pub struct IcicleCell {
    /// The region, or `None` for the top row: the whole program (`total_bytes`).
    pub region: Option<u32>,
    /// The row: 0 for the program, 1 for functions, 2 for their loops, ...
    pub depth: usize,
    /// Where it starts, as a share of the whole width (0..1).
    pub x: f64,
    /// Its width, as a share of the whole width.
    pub width: f64,
    /// The footprint it is sized by: the region's `max_bytes` (the program's `total_bytes`).
    pub bytes: u64,
    /// 1, or the factor by which it and its siblings were shrunk because their footprints
    /// added up to more than their parent's.
    pub scale: f64,
}

/// The icicle view's layout: the program on top at full width; under every cell its
/// children (the functions under the program; a region's loops or loop bodies under it),
/// left to right in the tree's order (largest first), each as wide as its parent times its
/// footprint over the parent's (`max_bytes`, at most 1). Siblings' footprints overlap (they
/// may touch the same memory), so they need not add up to their parent's; when they add up
/// to more, all of them are scaled down by the same factor to fit under it exactly. Regions
/// with a footprint of 0 (never entered, or no access) get no cell, nor do their children.
/// Cells come in pre-order.
pub fn icicle(report: &Report, fp: &Footprint) -> Vec<IcicleCell> {
    let tree = footprint_tree(report, fp);
    let program = IcicleCell {
        region: None,
        depth: 0,
        x: 0.0,
        width: 1.0,
        bytes: fp.total_bytes,
        scale: 1.0,
    };
    let mut cells = Vec::new();
    let mut pending = vec![(program, tree.roots())];
    while let Some((parent, children)) = pending.pop() {
        let mut laid_out = Vec::new();
        if parent.bytes > 0 {
            let widths: Vec<(u32, u64, f64)> = children
                .iter()
                .map(|&id| {
                    let bytes = fp.stats(id).max_bytes;
                    let ratio = (bytes as f64 / parent.bytes as f64).min(1.0);
                    (id, bytes, parent.width * ratio)
                })
                .filter(|&(_, bytes, _)| bytes > 0)
                .collect();
            let sum: f64 = widths.iter().map(|w| w.2).sum();
            // A relative margin, so that rounding in the sum never counts as exceeding.
            let scale = if sum > parent.width * (1.0 + 1e-9) {
                parent.width / sum
            } else {
                1.0
            };
            let mut x = parent.x;
            for (id, bytes, width) in widths {
                let cell = IcicleCell {
                    region: Some(id),
                    depth: parent.depth + 1,
                    x,
                    width: width * scale,
                    bytes,
                    scale,
                };
                x += cell.width;
                laid_out.push((cell, tree.children(id)));
            }
        }
        cells.push(parent);
        // Pre-order: the first child is popped next.
        pending.extend(laid_out.into_iter().rev());
    }
    cells
}
