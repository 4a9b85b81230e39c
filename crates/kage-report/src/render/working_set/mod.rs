//! The working-set tool's views: the text view and the summary (`text.rs`), the HTML page
//! (`html.rs`) and the Perfetto trace (`perfetto.rs`); and here what they share: reading the
//! tool's fields, the facts of the header, labels for regions and times, and the rows of a
//! chart that has room for fewer rows than there are snapshots.

#[cfg(feature = "html")]
mod html;
mod perfetto;
mod text;

#[cfg(feature = "html")]
pub(crate) use html::html;
pub(crate) use perfetto::perfetto;
pub use text::MAX_CHART_ROWS;
pub(crate) use text::{summary, text};

use crate::model::{
    CallSite, IntervalUnit, Region, RegionKind, Report, Snapshot, WorkingSet, WORKING_SET_TOOL,
};
use crate::render::tree::call_site_label;
use crate::render::{bytes_label, flat_label, short_name, three_digits, FileNames, ViewError};

/// The working-set fields of a report the html and perfetto views are asked for (the
/// dispatch in `render/mod.rs` sends them only reports of the working-set tool).
pub(crate) fn working_set_of(report: &Report) -> Result<WorkingSet, ViewError> {
    report.working_set().map_err(|e| ViewError::Malformed {
        tool: WORKING_SET_TOOL,
        error: e.to_string(),
    })
}

/// One row of a chart: one snapshot, or several adjacent ones combined for display.
#[derive(Debug, Clone, PartialEq)]
pub struct DisplayRow {
    /// Index of the first snapshot it stands for.
    pub first: usize,
    /// Index of the last snapshot it stands for (equal to `first` unless combined).
    pub last: usize,
    /// The first snapshot's start.
    pub start_seconds: f64,
    /// The last snapshot's end.
    pub end_seconds: f64,
    /// The largest `lines` of its snapshots (never a sum: lines of different snapshots overlap).
    pub lines: u64,
    /// The largest `new_lines` of its snapshots.
    pub new_lines: u64,
    /// The snapshot with the largest `lines` (the first of equals): its region stack is shown.
    pub peak: usize,
}

/// The rows of a chart with room for at most `max_rows` rows: one per snapshot when they fit,
/// else runs of `ceil(n / max_rows)` adjacent snapshots combined by taking the maximum.
pub fn display_rows(snapshots: &[Snapshot], max_rows: usize) -> Vec<DisplayRow> {
    let per_row = snapshots.len().div_ceil(max_rows.max(1)).max(1);
    snapshots
        .chunks(per_row)
        .enumerate()
        .map(|(chunk, group)| {
            let first = chunk * per_row;
            let mut peak = 0;
            for (i, s) in group.iter().enumerate() {
                if s.lines > group[peak].lines {
                    peak = i;
                }
            }
            DisplayRow {
                first,
                last: first + group.len() - 1,
                start_seconds: group[0].start_seconds,
                end_seconds: group[group.len() - 1].end_seconds,
                lines: group[peak].lines,
                new_lines: group.iter().map(|s| s.new_lines).max().unwrap_or(0),
                peak: first + peak,
            }
        })
        .collect()
}

/// A duration in nanoseconds for people: "10 ms", "1.5 s", "250 µs", "80 ns".
pub(crate) fn nanoseconds_label(ns: u64) -> String {
    let ns_f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{} s", three_digits(ns_f / 1e9))
    } else if ns >= 1_000_000 {
        format!("{} ms", three_digits(ns_f / 1e6))
    } else if ns >= 1_000 {
        format!("{} µs", three_digits(ns_f / 1e3))
    } else {
        format!("{ns} ns")
    }
}

/// An interval length in its unit: "10 ms", "1000000 accesses".
pub(crate) fn interval_length_label(length: u64, unit: IntervalUnit) -> String {
    match unit {
        IntervalUnit::WallNs | IntervalUnit::CpuNs => nanoseconds_label(length),
        IntervalUnit::Accesses => format!("{length} accesses"),
        IntervalUnit::Instructions => format!("{length} instructions"),
    }
}

/// An interval length and what it measures: "10 ms of wall-clock time", "1000000 accesses".
pub(crate) fn interval_label(length: u64, unit: IntervalUnit) -> String {
    let length = interval_length_label(length, unit);
    match unit {
        IntervalUnit::WallNs => format!("{length} of wall-clock time"),
        IntervalUnit::CpuNs => format!("{length} of CPU time"),
        IntervalUnit::Accesses | IntervalUnit::Instructions => length,
    }
}

/// How many decimals show times whose rows are `step` seconds apart: at least milliseconds,
/// finer when rows are closer than that (at most nanoseconds).
pub(crate) fn seconds_decimals(step: f64) -> usize {
    (3..9)
        .find(|&d| 10f64.powi(-(d as i32)) <= step)
        .unwrap_or(9)
}

/// A region as one label: "main (main.c:10)", "loop in main (main.c:14)", "helper", and for
/// code the optimiser inlined, where: "loop in sum (inl.c:10), inlined into main at
/// inl.c:18".
pub(crate) fn region_label(report: &Report, files: &FileNames, id: u32) -> String {
    let Some(region) = report.region(id) else {
        return format!("region {id} (not in the report)");
    };
    let name = flat_label(region);
    let label = if region.file.is_empty() {
        name
    } else {
        let file = files.show(&region.file);
        if region.line == 0 {
            format!("{name} ({file})")
        } else {
            format!("{name} ({file}:{})", region.line)
        }
    };
    match inlined_function(report, region) {
        Some((at, Some(caller))) => format!(
            "{label}, inlined into {} at {}",
            short_name(&caller.name),
            call_site_label(at)
        ),
        Some((at, None)) => format!("{label}, inlined at {}", call_site_label(at)),
        None => label,
    }
}

/// For a region in code the optimiser inlined: the innermost inlined call it is in (itself
/// for an inlined function region), and the function region that call is in, if any.
fn inlined_function<'r>(
    report: &'r Report,
    region: &'r Region,
) -> Option<(&'r CallSite, Option<&'r Region>)> {
    let mut at = Some(region);
    // The innermost function region around (or at) the region: loops are their function's.
    while let Some(r) = at.filter(|r| r.kind != RegionKind::Function) {
        at = r.parent.and_then(|p| report.region(p));
    }
    let call = at?.inlined_at.as_ref()?;
    let mut caller = at?.parent.and_then(|p| report.region(p));
    while let Some(r) = caller.filter(|r| r.kind != RegionKind::Function) {
        caller = r.parent.and_then(|p| report.region(p));
    }
    Some((call, caller))
}

/// The label of a snapshot's innermost region, "-" when its stack was empty.
pub(crate) fn innermost_label(report: &Report, files: &FileNames, snapshot: &Snapshot) -> String {
    match snapshot.innermost_region() {
        Some(id) => region_label(report, files, id),
        None => "-".to_string(),
    }
}

/// The facts of a working-set report's header, after the common ones: (label, value).
pub(crate) fn facts(report: &Report, ws: &WorkingSet) -> Vec<(String, String)> {
    let mut facts = vec![("line size".to_string(), format!("{} bytes", ws.line_size))];
    let mut interval = interval_label(ws.interval, ws.interval_unit);
    if ws.initial_interval != ws.interval {
        interval.push_str(&format!(
            " ({} at the start)",
            interval_length_label(ws.initial_interval, ws.interval_unit)
        ));
    }
    facts.push(("interval".to_string(), interval));
    facts.push(("merges".to_string(), ws.merges.to_string()));
    facts.push((
        "instrumentation".to_string(),
        ws.instrumentation.as_str().to_string(),
    ));
    facts.push(("accesses".to_string(), ws.accesses.to_string()));
    facts.push((
        "duration".to_string(),
        format!("{:.3} s", ws.duration_seconds),
    ));
    facts.push((
        "total".to_string(),
        format!(
            "{} distinct lines ({})",
            ws.total_lines,
            bytes_label(ws.bytes(ws.total_lines))
        ),
    ));
    facts.push(("peak".to_string(), peak_label(report, ws)));
    facts.push(("snapshots".to_string(), ws.snapshots.len().to_string()));
    facts
}

/// "5000 lines (312 KiB) in snapshot 3, 0.250-0.300 s, in main (main.c:10)".
pub(crate) fn peak_label(report: &Report, ws: &WorkingSet) -> String {
    let mut label = format!(
        "{} lines ({})",
        ws.peak_lines,
        bytes_label(ws.bytes(ws.peak_lines))
    );
    if let Some(snapshot) = ws
        .peak_snapshot
        .and_then(|i| ws.snapshots.get(i).map(|s| (i, s)))
    {
        let (index, s) = snapshot;
        let decimals = seconds_decimals(s.end_seconds - s.start_seconds);
        let files = FileNames::for_report(report);
        label.push_str(&format!(
            " in snapshot {index}, {:.decimals$}-{:.decimals$} s, in {}",
            s.start_seconds,
            s.end_seconds,
            innermost_label(report, &files, s)
        ));
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_well() {
        assert_eq!(nanoseconds_label(10_000_000), "10 ms");
        assert_eq!(nanoseconds_label(1_500_000_000), "1.5 s");
        assert_eq!(nanoseconds_label(250_000), "250 µs");
        assert_eq!(nanoseconds_label(80), "80 ns");
        assert_eq!(seconds_decimals(0.01), 3);
        assert_eq!(seconds_decimals(0.0002), 4);
        assert_eq!(seconds_decimals(0.0), 9);
    }
}
