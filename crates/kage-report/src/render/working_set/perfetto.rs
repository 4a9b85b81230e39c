//! The working set as a trace in the Chrome JSON trace format, which ui.perfetto.dev and
//! chrome://tracing open: a counter track with the lines (and new lines) of each snapshot, and
//! a track of slices, one per snapshot, named after the innermost region of its stack.

use super::{innermost_label, region_label, working_set_of};
use crate::model::Report;
use crate::render::{FileNames, ViewError};
use serde_json::{json, Value};

/// Microseconds (the format's unit for `ts` and `dur`) per second.
const MICROS: f64 = 1e6;
/// The counter track's name.
pub const COUNTER_NAME: &str = "working set";
/// The thread id of the track of snapshot slices.
const PHASES_TID: u32 = 1;

/// The working-set report as a Chrome JSON trace (`{"traceEvents": [...]}`), ending with a
/// newline. Timestamps are wall-clock microseconds since the runtime's start.
///
/// Events: metadata naming the process after the program and the slice track; one counter
/// event (`"ph": "C"`, name [`COUNTER_NAME`], args `lines` and `new lines`) at each snapshot's
/// start and a last one, at zero, at the last snapshot's end; one complete event
/// (`"ph": "X"`) per snapshot on the slice track, named after the innermost region of its
/// stack, with the whole stack and its counts in `args`.
pub(crate) fn perfetto(report: &Report) -> Result<String, ViewError> {
    let ws = working_set_of(report)?;
    let pid = report.pid;
    let files = FileNames::for_report(report);
    let program = report
        .program
        .rsplit('/')
        .next()
        .filter(|name| !name.is_empty())
        .unwrap_or(&report.program);
    let mut events = vec![
        json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
               "args": {"name": format!("{program} (working set)")}}),
        json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": PHASES_TID,
               "args": {"name": "snapshots: innermost region at the end"}}),
    ];
    for (index, s) in ws.snapshots.iter().enumerate() {
        let ts = s.start_seconds * MICROS;
        events.push(
            json!({"name": COUNTER_NAME, "ph": "C", "pid": pid, "ts": ts,
                           "args": {"lines": s.lines, "new lines": s.new_lines}}),
        );
        let stack: Vec<Value> = s
            .regions
            .iter()
            .map(|&id| Value::String(region_label(report, &files, id)))
            .collect();
        let mut args = json!({
            "snapshot": index,
            "lines": s.lines,
            "new lines": s.new_lines,
            "cumulative lines": s.cumulative_lines,
            "stack": stack,
            "start": s.start,
            "end": s.end,
            "unit": ws.interval_unit.as_str(),
        });
        if s.is_merged() {
            args["intervals"] = json!(s.intervals);
        }
        events.push(json!({
            "name": innermost_label(report, &files, s),
            "cat": "snapshot",
            "ph": "X",
            "pid": pid,
            "tid": PHASES_TID,
            "ts": ts,
            // Computed from the same products as the next slice's `ts`, so that rounding never
            // makes neighbours overlap.
            "dur": (s.end_seconds * MICROS - ts).max(0.0),
            "args": args,
        }));
    }
    if let Some(last) = ws.snapshots.last() {
        events.push(json!({"name": COUNTER_NAME, "ph": "C", "pid": pid,
                           "ts": last.end_seconds * MICROS,
                           "args": {"lines": 0, "new lines": 0}}));
    }
    // One event per line, so that the file reads and diffs well.
    let mut out = String::from("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    let lines: Vec<String> = events.iter().map(Value::to_string).collect();
    out.push_str(&lines.join(",\n"));
    out.push_str("\n]}\n");
    Ok(out)
}
