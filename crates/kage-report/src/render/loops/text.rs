//! The loops tool's text views: the header with the sampling rule, then per nest a line
//! with its entries and a table of its levels; and the summary's lines, a line per nest.

use super::{
    entries_label, facts, file_names, level_cells, level_label, nest_label, sampling_label,
    COLUMNS_EXPLAINED, LEVEL_COLUMNS, NO_NESTS,
};
use crate::model::Report;
use crate::render::table::{Align, Table};
use crate::render::text::header;
use std::fmt::Write;

/// The loops view: the header with the tool's facts, then every nest by id: "nest main
/// (x.c:12-20): 100 entries, 8 sampled" and its levels in pre-order, indented by depth,
/// with their counts in columns.
pub(crate) fn text(report: &Report) -> Result<String, String> {
    let loops = report.loops().map_err(|e| e.to_string())?;
    let mut out = String::new();
    header(report, &facts(&loops), &mut out);
    out.push('\n');
    if loops.nests.is_empty() {
        let _ = writeln!(out, "{NO_NESTS}");
        return Ok(out);
    }
    let _ = writeln!(out, "{}", COLUMNS_EXPLAINED.join(";\n"));
    let files = file_names(&loops);
    let mut columns = vec![("level", Align::Left), (LEVEL_COLUMNS[0], Align::Left)];
    columns.extend(LEVEL_COLUMNS[1..].iter().map(|&c| (c, Align::Right)));
    for nest in &loops.nests {
        let _ = writeln!(
            out,
            "\n{}: {}",
            nest_label(&files, nest),
            entries_label(nest)
        );
        let mut table = Table::new(&columns);
        for level in &nest.levels {
            let mut cells = vec![level_label(level)];
            cells.extend(level_cells(level));
            table.row(cells);
        }
        table.render("  ", &mut out);
    }
    Ok(out)
}

/// The summary's lines after the common ones: the sampling rule, then the first `top`
/// nests by id with their entries and instrumented iterations, and where the levels are.
pub(crate) fn summary(report: &Report, report_path: &str, top: usize) -> Result<String, String> {
    let loops = report.loops().map_err(|e| e.to_string())?;
    let mut out = String::new();
    if loops.nests.is_empty() {
        let _ = writeln!(out, "kage: {NO_NESTS}");
        return Ok(out);
    }
    let shown = loops.nests.len().min(top);
    let more = match loops.nests.len() - shown {
        0 => String::new(),
        n => format!(" ({n} more in the report)"),
    };
    let _ = writeln!(out, "kage: sampling: {}", sampling_label(&loops));
    let _ = writeln!(out, "kage: the nests that ran{more}:");
    let files = file_names(&loops);
    for nest in loops.nests.iter().take(top) {
        let _ = writeln!(
            out,
            "kage:   {}: {}, {} iterations instrumented",
            nest_label(&files, nest),
            entries_label(nest),
            nest.instrumented_iterations()
        );
    }
    let _ = writeln!(
        out,
        "kage: every level of every nest: kage report {report_path}"
    );
    Ok(out)
}
