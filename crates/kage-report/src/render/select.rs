//! The select tool's text views: per versioned nest a line with its entries, a table of its
//! versions (chunks, iterations, time, time per iteration) and its decisions; and the
//! summary's lines, a line per nest with what it runs.

use super::text::header;
use super::{short_name, FileNames};
use crate::model::{Report, Selection, VersionedNest};
use crate::render::table::{Align, Table};
use std::fmt::Write;

/// `nest gemm (gemm.c:14)`.
fn nest_label(files: &FileNames, nest: &VersionedNest) -> String {
    let function = if nest.function.is_empty() {
        "?".to_string()
    } else {
        short_name(&nest.function)
    };
    let at = match (nest.file.is_empty(), nest.line) {
        (true, 0) => "-".to_string(),
        (true, line) => format!("?:{line}"),
        (false, 0) => files.show(&nest.file).to_string(),
        (false, line) => format!("{}:{line}", files.show(&nest.file)),
    };
    format!("versioned nest {function} ({at})")
}

/// `3 tiled32` or `3` when unnamed.
fn version_label(nest: &VersionedNest, index: u32) -> String {
    match nest.versions.get(index as usize) {
        Some(v) if !v.name.is_empty() => format!("{index} {}", v.name),
        _ => index.to_string(),
    }
}

fn entries_label(entries: u64) -> String {
    match entries {
        1 => "1 entry".into(),
        n => format!("{n} entries"),
    }
}

/// `ns_per_iteration` as people read it: `1.23 ms`, `456 µs`, `78.9 ns`.
fn rate_label(ns: Option<f64>) -> String {
    match ns {
        None => "-".into(),
        Some(ns) if ns >= 1e6 => format!("{:.3} ms", ns / 1e6),
        Some(ns) if ns >= 1e3 => format!("{:.1} µs", ns / 1e3),
        Some(ns) => format!("{ns:.1} ns"),
    }
}

fn files(selection: &Selection) -> FileNames {
    FileNames::for_files(selection.nests.iter().map(|n| n.file.as_str()))
}

const NO_NESTS: &str = "no versioned nest ran (a nest is a `#pragma kage versions` switch, built with KAGE_TOOL=select)";

/// The select view: the header, then every nest: its versions and its decisions.
pub(crate) fn text(report: &Report) -> Result<String, String> {
    let selection = report.select()?;
    let mut out = String::new();
    header(
        report,
        &[
            ("version".into(), selection.version.clone()),
            ("min chunk".into(), format!("{} µs", selection.min_chunk_us)),
        ],
        &mut out,
    );
    out.push('\n');
    if selection.nests.is_empty() {
        let _ = writeln!(out, "{NO_NESTS}");
        return Ok(out);
    }
    let files = files(&selection);
    for nest in &selection.nests {
        let _ = writeln!(
            out,
            "{}: {}",
            nest_label(&files, nest),
            entries_label(nest.entries)
        );
        let mut table = Table::new(&[
            ("version", Align::Left),
            ("loop", Align::Left),
            ("step", Align::Right),
            ("chunks", Align::Right),
            ("iterations", Align::Right),
            ("seconds", Align::Right),
            ("timed chunks", Align::Right),
            ("time per iteration", Align::Right),
        ]);
        for v in &nest.versions {
            table.row(vec![
                version_label(nest, v.index),
                if v.line == 0 {
                    "-".into()
                } else {
                    format!("line {}", v.line)
                },
                v.step.to_string(),
                v.chunks.to_string(),
                v.iterations.to_string(),
                format!("{:.3}", v.seconds),
                v.measured_chunks.to_string(),
                rate_label(v.ns_per_iteration),
            ]);
        }
        table.render("  ", &mut out);
        if nest.decisions.is_empty() {
            let _ = writeln!(
                out,
                "  no decision yet: its entries ran the versions in turn"
            );
        }
        for d in &nest.decisions {
            let abandoned = if d.abandoned.is_empty() {
                String::new()
            } else {
                let names: Vec<String> = d
                    .abandoned
                    .iter()
                    .map(|&v| version_label(nest, v))
                    .collect();
                format!("; dropped as far slower: {}", names.join(", "))
            };
            let _ = writeln!(
                out,
                "  entries of {}-{} iterations run version {}: chosen by {} in entry {} at iteration {} ({:.3} s into it, {:.3} s into the run){abandoned}",
                d.min_iterations,
                d.max_iterations,
                version_label(nest, d.version),
                d.how,
                d.entry,
                d.iteration,
                d.into_entry_seconds,
                d.at_seconds,
            );
        }
        if let Some(mismatch) = &nest.start_mismatch {
            let _ = writeln!(out, "  warning: {mismatch}");
        }
        out.push('\n');
    }
    Ok(out)
}

/// The summary's lines after the common ones: a line per nest (the first `top`) with the
/// version its latest decision runs.
pub(crate) fn summary(report: &Report, report_path: &str, top: usize) -> Result<String, String> {
    let selection = report.select()?;
    let mut out = String::new();
    if selection.nests.is_empty() {
        let _ = writeln!(out, "kage: {NO_NESTS}");
        return Ok(out);
    }
    let files = files(&selection);
    for nest in selection.nests.iter().take(top) {
        let runs = match nest.decisions.last() {
            Some(d) => format!("runs version {}", version_label(nest, d.version)),
            None => "no decision yet".into(),
        };
        let _ = writeln!(
            out,
            "kage: {}: {}, {runs}",
            nest_label(&files, nest),
            entries_label(nest.entries)
        );
    }
    let _ = writeln!(
        out,
        "kage: every version's times: kage report {report_path}"
    );
    Ok(out)
}
