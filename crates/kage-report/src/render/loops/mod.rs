//! The loops tool's views: the text view and the summary (`text.rs`) and the HTML page
//! (`html.rs`): per selected nest a line with its entries, then a table of its loop levels
//! (indented by depth) with their iterations, the iterations that ran instrumented and the
//! chunks each version ran. Here what they share: reading the tool's fields, the header's
//! facts, a nest's label and a level's cells.

#[cfg(feature = "html")]
mod html;
mod text;

#[cfg(feature = "html")]
pub(crate) use html::html;
pub(crate) use text::{summary, text};

use crate::model::{LoopNest, Loops, NestLevel, Report, LOOPS_TOOL};
use crate::render::{short_name, FileNames, ViewError};

/// The loops fields of a report the html view is asked for (the dispatch in
/// `render/mod.rs` sends it only reports of the loops tool).
#[cfg_attr(not(feature = "html"), allow(dead_code))]
pub(crate) fn loops_of(report: &Report) -> Result<Loops, ViewError> {
    report.loops().map_err(|e| ViewError::Malformed {
        tool: LOOPS_TOOL,
        error: e.to_string(),
    })
}

/// What a report without nests means.
pub(crate) const NO_NESTS: &str = "no selected loop nest ran: select loops at build time \
     with KAGE_LOOPS=file.c:line or #pragma kage profile, and build with KAGE_TOOL=loops";

/// What the columns of a nest's table mean, clause by clause.
pub(crate) const COLUMNS_EXPLAINED: [&str; 3] = [
    "iterations: in the nest's entries that were left normally, both versions",
    "instrumented: the iterations that ran in the instrumented version",
    "chunks: the decisions taken for the loop, by the version they chose",
];

/// The headers of [`level_cells`], after the level's own column.
pub(crate) const LEVEL_COLUMNS: [&str; 5] = [
    "lines",
    "iterations",
    "instrumented",
    "chunks original",
    "chunks instrumented",
];

/// A level's cells under [`LEVEL_COLUMNS`].
pub(crate) fn level_cells(level: &NestLevel) -> [String; 5] {
    [
        lines_label(level.line, level.end_line),
        level.iterations.to_string(),
        level.instrumented_iterations.to_string(),
        level.chunks.original.to_string(),
        level.chunks.instrumented.to_string(),
    ]
}

/// The nests' files, shortened together.
pub(crate) fn file_names(loops: &Loops) -> FileNames {
    FileNames::for_files(loops.nests.iter().map(|n| n.file.as_str()))
}

/// `12-20`, `12`, or `-` when unknown.
fn lines_label(line: u32, end_line: u32) -> String {
    match (line, end_line) {
        (0, _) => "-".to_string(),
        (line, end) if end <= line => line.to_string(),
        (line, end) => format!("{line}-{end}"),
    }
}

/// `x.c:12-20`, `x.c`, `?:12-20`, or `-` when nothing is known.
fn nest_location(files: &FileNames, nest: &LoopNest) -> String {
    let lines = lines_label(nest.line, nest.end_line);
    match (nest.file.is_empty(), nest.line) {
        (true, 0) => "-".to_string(),
        (true, _) => format!("?:{lines}"),
        (false, 0) => files.show(&nest.file).to_string(),
        (false, _) => format!("{}:{lines}", files.show(&nest.file)),
    }
}

/// `nest main (x.c:12-20)`.
pub(crate) fn nest_label(files: &FileNames, nest: &LoopNest) -> String {
    let function = if nest.function.is_empty() {
        "?".to_string()
    } else {
        short_name(&nest.function)
    };
    format!("nest {function} ({})", nest_location(files, nest))
}

/// `100 entries, 8 sampled`.
pub(crate) fn entries_label(nest: &LoopNest) -> String {
    let entries = match nest.entries {
        1 => "1 entry".to_string(),
        n => format!("{n} entries"),
    };
    format!("{entries}, {} sampled", nest.sampled_entries)
}

/// A level's label in its table: its index, indented by its depth.
pub(crate) fn level_label(level: &NestLevel) -> String {
    format!("{}{}", "  ".repeat(level.depth as usize), level.level)
}

/// "the first 10 iterations", "the first entry".
fn first(n: u64, one: &str, many: &str) -> String {
    match n {
        1 => format!("the first {one}"),
        n => format!("the first {n} {many}"),
    }
}

/// The sampling rule in force, in words.
pub(crate) fn sampling_label(loops: &Loops) -> String {
    if loops.sample_iterations == 0 {
        "none (sample_iterations=0)".to_string()
    } else if loops.sample_entries == 0 {
        "none (sample_entries=0)".to_string()
    } else {
        format!(
            "{} of each loop level in {} of each nest ran instrumented",
            first(loops.sample_iterations, "iteration", "iterations"),
            first(loops.sample_entries, "entry", "entries")
        )
    }
}

/// The facts of a loops report's header, after the common ones: (label, value).
pub(crate) fn facts(loops: &Loops) -> Vec<(String, String)> {
    let nests = match loops.nests.len() {
        1 => "1 selected nest ran".to_string(),
        n => format!("{n} selected nests ran"),
    };
    vec![
        ("sampling".to_string(), sampling_label(loops)),
        ("nests".to_string(), nests),
    ]
}
