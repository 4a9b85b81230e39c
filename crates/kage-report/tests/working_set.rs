//! The working-set views on a hand-written report (`fixtures/working_set.json`: six snapshots,
//! the first of them merged, three caches, a region stack per snapshot, and fields this
//! reader does not know, which it must ignore).

use kage_report::{
    parse_report, read_report, render, Instrumentation, IntervalUnit, Report, Snapshot, WorkingSet,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/working_set.json")
}

fn fixture() -> Report {
    read_report(&fixture_path()).expect("the fixture is a valid report")
}

#[test]
fn the_typed_view_reads_every_documented_field() {
    let report = fixture();
    let ws = report
        .working_set()
        .expect("the working-set fields are as documented");
    assert_eq!(ws.line_size, 64);
    assert_eq!(ws.interval_unit, IntervalUnit::WallNs);
    assert_eq!(
        (ws.interval, ws.initial_interval, ws.merges),
        (20_000_000, 10_000_000, 1)
    );
    assert_eq!(ws.instrumentation, Instrumentation::Inline);
    assert_eq!(ws.accesses, 48_213_377);
    assert_eq!(
        (ws.total_lines, ws.peak_lines, ws.peak_snapshot),
        (9700, 9500, Some(2))
    );
    assert_eq!(ws.caches.len(), 3);
    assert_eq!(ws.caches[0].name(), "L1d");
    assert_eq!(ws.caches[2].name(), "L3");
    assert_eq!(ws.caches[1].lines, 16384);
    assert_eq!(ws.snapshots.len(), 6);
    assert!(ws.snapshots[0].is_merged());
    assert!(!ws.snapshots[1].is_merged());
    assert_eq!(ws.snapshots[1].regions, vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(ws.snapshots[1].innermost_region(), Some(5));
    assert_eq!(ws.snapshots[5].innermost_region(), None);
    assert_eq!(ws.bytes(ws.total_lines), 9700 * 64);
}

#[test]
fn the_typed_view_writes_the_documented_names_and_reads_back() {
    let ws = fixture().working_set().unwrap();
    let data = ws.to_tool_data();
    assert_eq!(data["interval_unit"], "wall-ns");
    assert_eq!(data["instrumentation"], "inline");
    assert_eq!(data["snapshots"][0]["intervals"], serde_json::json!([0, 1]));
    assert_eq!(data["caches"][0]["fit_share"], 0.5);
    assert_eq!(WorkingSet::from_tool_data(&data).unwrap(), ws);
    for unit in ["accesses", "wall-ns", "cpu-ns", "instructions"] {
        let mut data = data.clone();
        data.insert("interval_unit".into(), unit.into());
        let back = WorkingSet::from_tool_data(&data).unwrap();
        assert_eq!(back.interval_unit.as_str(), unit);
    }
}

#[test]
fn a_missing_field_is_an_error_that_names_it() {
    let mut report = fixture();
    report.tool_data.remove("line_size");
    let error = report.working_set().unwrap_err().to_string();
    assert!(error.contains("line_size"), "{error}");
    let error = render::html(&report).unwrap_err().to_string();
    assert!(
        error.contains("do not match docs/report-schema.md"),
        "{error}"
    );
    assert!(error.contains("line_size"), "{error}");
    // The text view still shows what there is.
    let text = render::text(&report);
    assert!(
        text.contains("warning: the working-set fields do not match"),
        "{text}"
    );
    assert!(text.contains("function main"), "{text}");
}

#[test]
fn working_set_as_text() {
    insta::assert_snapshot!(render::text(&fixture()));
}

#[test]
fn working_set_summary() {
    insta::assert_snapshot!(render::summary(&fixture(), "kage.stencil.4242.json", 5));
}

/// A snapshot of `lines` lines that lasts 10 ms.
fn snapshot(index: u64, lines: u64, new_lines: u64) -> Snapshot {
    Snapshot {
        start: index * 10_000_000,
        end: (index + 1) * 10_000_000,
        start_seconds: index as f64 * 0.01,
        end_seconds: (index + 1) as f64 * 0.01,
        intervals: [index, index],
        lines,
        new_lines,
        cumulative_lines: 0,
        regions: vec![0],
    }
}

/// 200 snapshots whose lines rise and fall: the chart has 60 rows at most, each the maximum
/// of the (four) snapshots it stands for, never their sum.
#[test]
fn many_snapshots_are_combined_by_taking_maxima() {
    let mut report = fixture();
    let mut ws = report.working_set().unwrap();
    let lines = |i: u64| (i * 37) % 101 + 1;
    let new_lines = |i: u64| (i * 13) % 7;
    ws.snapshots = (0..200)
        .map(|i| snapshot(i, lines(i), new_lines(i)))
        .collect();
    ws.peak_snapshot = None;
    report.tool_data = ws.to_tool_data();

    let rows = render::display_rows(&ws.snapshots, render::MAX_CHART_ROWS);
    assert_eq!(rows.len(), 50);
    for (r, row) in rows.iter().enumerate() {
        let group = (r as u64 * 4)..(r as u64 * 4 + 4);
        assert_eq!((row.first, row.last), (r * 4, r * 4 + 3));
        assert_eq!(row.lines, group.clone().map(lines).max().unwrap());
        assert_eq!(row.new_lines, group.clone().map(new_lines).max().unwrap());
        assert_eq!(ws.snapshots[row.peak].lines, row.lines);
        assert_eq!(row.start_seconds, ws.snapshots[r * 4].start_seconds);
        assert_eq!(row.end_seconds, ws.snapshots[r * 4 + 3].end_seconds);
    }

    let text = render::text(&report);
    assert!(text.contains("200 snapshots, up to 4 per row"), "{text}");
    // The chart's rows: time, lines, bar, new lines, region.
    let chart: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("time (s)"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(chart.len(), 50, "{text}");
    for (r, row) in chart.iter().enumerate() {
        let group = (r as u64 * 4)..(r as u64 * 4 + 4);
        assert_eq!(row[0], format!("{:.3}", r as f64 * 0.04), "{text}");
        assert_eq!(
            row[1],
            group.clone().map(lines).max().unwrap().to_string(),
            "{text}"
        );
        let after_bar = row
            .iter()
            .rposition(|cell| cell.starts_with("main"))
            .unwrap()
            - 1;
        assert_eq!(
            row[after_bar],
            group.clone().map(new_lines).max().unwrap().to_string()
        );
    }

    // 60 snapshots or fewer get a row each.
    assert_eq!(render::display_rows(&ws.snapshots[..60], 60).len(), 60);
    assert_eq!(render::display_rows(&ws.snapshots[..61], 60).len(), 31);
    assert!(render::display_rows(&[], 60).is_empty());
}

#[test]
fn html_is_one_page_with_one_svg_plot_and_escaped_text() {
    let mut report = fixture();
    report.program = "/tmp/a<b>&\"c\"/stencil<1>".to_string();
    report.args = vec!["./stencil<1>".into(), "<script>alert(1)</script>".into()];
    let html = render::html(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.ends_with("</html>\n"));
    assert_eq!(html.matches("<svg").count(), 1, "{html}");
    assert_eq!(html.matches("</svg>").count(), 1);
    for label in ["L1d 32 KiB", "L2 1 MiB", "L3 32 MiB"] {
        assert!(html.contains(label), "no {label} in {html}");
    }
    assert!(html.contains("time since the start (s)"));
    assert!(html.contains("distinct cache lines touched per interval"));
    assert!(
        html.contains("/tmp/a&lt;b&gt;&amp;&quot;c&quot;/stencil&lt;1&gt;"),
        "{html}"
    );
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<b>"));
    // Self-contained: nothing is fetched.
    for external in ["src=", "href=", "@import", "url("] {
        assert!(!html.contains(external), "{external} in {html}");
    }
    // One table row per snapshot (plus the header), the peak marked, stacks as names.
    assert_eq!(html.matches("<tr class=\"peak\">").count(), 1);
    assert!(html.contains(
        "<span title=\"stencil.c:20-60\">main</span> › <span title=\"stencil.c:30-50\">loop in main</span>"
    ), "{html}");
    assert!(
        html.contains("<td class=\"n\">0–1</td>"),
        "the merged snapshot: {html}"
    );
}

#[test]
fn html_and_perfetto_refuse_other_tools() {
    let count = parse_report(
        Path::new("count.json"),
        br#"{"format":"kage-report","version":1,"tool":"count","program":"/p","pid":5,
            "end":{"how":"exit","code":0},"complete":true,"threads":1,"options":{},"regions":[],
            "totals":{"loads":1,"stores":2,"bytes_read":3,"bytes_written":4}}"#,
    )
    .unwrap();
    assert_eq!(
        render::html(&count).unwrap_err().to_string(),
        "the html view exists for the working-set, footprint, hcpa and loops tools; \
         this report is from `count`"
    );
    assert_eq!(
        render::perfetto(&count).unwrap_err().to_string(),
        "the perfetto view exists for the working-set tool; this report is from `count`"
    );
}

#[test]
fn perfetto_trace_has_a_counter_per_snapshot_and_a_slice_per_snapshot() {
    let report = fixture();
    let ws = report.working_set().unwrap();
    let trace: Value = serde_json::from_str(&render::perfetto(&report).unwrap()).unwrap();
    assert_eq!(trace["displayTimeUnit"], "ms");
    let events = trace["traceEvents"].as_array().unwrap();
    let of = |ph: &str| -> Vec<&Value> { events.iter().filter(|e| e["ph"] == ph).collect() };

    let counters = of("C");
    assert_eq!(counters.len(), ws.snapshots.len() + 1);
    for (event, s) in counters.iter().zip(&ws.snapshots) {
        assert_eq!(event["name"], "working set");
        assert_eq!(event["pid"], 4242);
        assert_eq!(event["ts"].as_f64().unwrap(), s.start_seconds * 1e6);
        assert_eq!(event["args"]["lines"], s.lines);
        assert_eq!(event["args"]["new lines"], s.new_lines);
    }
    let last = counters.last().unwrap();
    assert_eq!(
        last["ts"].as_f64().unwrap(),
        ws.snapshots[5].end_seconds * 1e6
    );
    assert_eq!(last["args"]["lines"], 0);

    let slices = of("X");
    assert_eq!(slices.len(), ws.snapshots.len());
    for (event, s) in slices.iter().zip(&ws.snapshots) {
        assert_eq!(event["ts"].as_f64().unwrap(), s.start_seconds * 1e6);
        let end = event["ts"].as_f64().unwrap() + event["dur"].as_f64().unwrap();
        assert!((end - s.end_seconds * 1e6).abs() < 1e-6, "{event}");
        assert_eq!(event["args"]["lines"], s.lines);
        assert_eq!(
            event["args"]["stack"].as_array().unwrap().len(),
            s.regions.len()
        );
        assert_eq!(event["tid"], slices[0]["tid"]);
    }
    assert_eq!(slices[1]["name"], "loop body in sweep (stencil.c:7)");
    assert_eq!(slices[1]["args"]["stack"][0], "main (stencil.c:20)");
    assert_eq!(slices[4]["name"], "checksum (util/checksum.c:3)");
    assert_eq!(slices[5]["name"], "-");
    assert_eq!(slices[0]["args"]["intervals"], serde_json::json!([0, 1]));
    assert!(slices[1]["args"].get("intervals").is_none());

    let metadata = of("M");
    let process = metadata
        .iter()
        .find(|e| e["name"] == "process_name")
        .unwrap();
    assert_eq!(process["args"]["name"], "stencil (working set)");
    assert_eq!(process["pid"], 4242);
    assert!(metadata
        .iter()
        .any(|e| e["name"] == "thread_name" && e["tid"] == slices[0]["tid"]));
}

#[test]
fn a_report_without_snapshots_or_caches_still_renders() {
    let mut report = fixture();
    let mut ws = report.working_set().unwrap();
    ws.snapshots.clear();
    ws.caches.clear();
    ws.peak_snapshot = None;
    ws.peak_lines = 0;
    report.tool_data = ws.to_tool_data();
    let text = render::text(&report);
    assert!(text.contains("no snapshots"), "{text}");
    assert!(text.contains("cache sizes unknown"), "{text}");
    let html = render::html(&report).unwrap();
    assert_eq!(html.matches("<svg").count(), 1);
    assert!(html.contains("no snapshots"));
    let trace: Value = serde_json::from_str(&render::perfetto(&report).unwrap()).unwrap();
    assert!(trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["ph"] == "M"));
    let summary = render::summary(&report, "r.json", 5);
    assert!(summary.contains("; 0 snapshots"), "{summary}");
}
