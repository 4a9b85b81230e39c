//! The reader against malformed input, property-based: whatever the bytes, `parse_report`
//! returns an error or a report and never panics, and every view of a report it accepts
//! renders without panicking. Inputs: arbitrary bytes, and each tool's fixture with values
//! replaced at random places (negative, fractional, huge and string numbers, nulls, wrong
//! kinds), which is how hand-edited or damaged reports look.

use kage_report::{parse_report, render, Report};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

/// A count report: the one tool without a fixture file.
const COUNT: &str = r#"{"format":"kage-report","version":1,"tool":"count","program":"/p",
  "args":["p"],"pid":1,"end":{"how":"exit","code":0},"complete":true,"threads":1,
  "options":{"tool":"count"},
  "regions":[
   {"id":0,"kind":"function","name":"main","symbol":"main","file":"p.c","line":1,"end_line":9,
    "parent":null,"instances":1,"loads":10,"stores":4,"bytes_read":40,"bytes_written":16,
    "self_loads":2,"self_stores":0,"self_bytes_read":8,"self_bytes_written":0},
   {"id":1,"kind":"loop","name":"main","symbol":"main","file":"p.c","line":3,"end_line":5,
    "parent":0,"instances":1,"loads":8,"stores":4,"bytes_read":32,"bytes_written":16,
    "self_loads":8,"self_stores":4,"self_bytes_read":32,"self_bytes_written":16}],
  "totals":{"loads":10,"stores":4,"bytes_read":40,"bytes_written":16},
  "unattributed":{"loads":0,"stores":0,"bytes_read":0,"bytes_written":0}}"#;

fn fixtures() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut all = vec![serde_json::from_str(COUNT).unwrap()];
    for name in [
        "working_set.json",
        "footprint.json",
        "hcpa.json",
        "loops.json",
        "select.json",
    ] {
        all.push(serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap()).unwrap());
    }
    all
}

/// Every view `kage report` offers, on an accepted report.
fn render_every_view(report: &Report) {
    let _ = render::text(report);
    let _ = render::summary(report, "r.json", 5);
    let _ = render::json(report);
    let _ = render::perfetto(report);
    let _ = render::html(report);
    let by_source = report.by_source();
    let _ = render::text(&by_source);
    if let Ok(plan) = kage_report::plan(report, &kage_report::PlanOptions::with_cores(4)) {
        let mut planned = report.clone();
        planned.set_hcpa_plan(&plan);
        let _ = render::text(&planned);
    }
}

/// A value that does not belong where it is put, most of the time.
fn replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(-1)),
        Just(json!(-1.5)),
        Just(json!(0)),
        Just(json!(0.5)),
        Just(json!(u64::MAX)),
        Just(json!(1e300)),
        Just(json!("12")),
        Just(json!("")),
        Just(json!(null)),
        Just(json!(true)),
        Just(json!([])),
        Just(json!({})),
        Just(json!([0, 1, 99999])),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-z_]{0,12}".prop_map(|s| json!(s)),
    ]
}

/// Replaces the node reached by following `path` (each step picks a child by index modulo
/// the number of children; the walk stops at a leaf or after the last step) with `value`.
fn replace_at(node: &mut Value, path: &[usize], value: Value) {
    let Some((&step, rest)) = path.split_first() else {
        *node = value;
        return;
    };
    match node {
        Value::Object(map) if !map.is_empty() => {
            let key = map.keys().nth(step % map.len()).unwrap().clone();
            replace_at(map.get_mut(&key).unwrap(), rest, value);
        }
        Value::Array(items) if !items.is_empty() => {
            let len = items.len();
            replace_at(&mut items[step % len], rest, value);
        }
        _ => *node = value,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn arbitrary_bytes_are_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_report(Path::new("r.json"), &bytes);
    }

    #[test]
    fn damaged_reports_are_refused_or_render(
        fixture in 0usize..6,
        edits in proptest::collection::vec(
            (proptest::collection::vec(any::<usize>(), 1..7), replacement()),
            1..4,
        ),
    ) {
        let mut json = fixtures().swap_remove(fixture);
        for (path, value) in edits {
            replace_at(&mut json, &path, value);
        }
        let text = json.to_string();
        if let Ok(report) = parse_report(Path::new("r.json"), text.as_bytes()) {
            render_every_view(&report);
        }
        // Cut anywhere: truncated, never a panic.
        let cut = &text.as_bytes()[..text.len() / 2];
        prop_assert!(parse_report(Path::new("r.json"), cut).is_err());
    }
}

/// What the issue found accepted, each refused with a message naming the field.
#[test]
fn values_the_schema_forbids_are_refused() {
    let count: Value = serde_json::from_str(COUNT).unwrap();
    let refused = |json: &Value| {
        parse_report(Path::new("r.json"), json.to_string().as_bytes())
            .unwrap_err()
            .to_string()
    };
    let mut negative = count.clone();
    negative["regions"][1]["loads"] = json!(-5);
    assert!(refused(&negative).contains("region 1: its counters"));
    let mut string = count.clone();
    string["totals"]["stores"] = json!("4");
    assert!(refused(&string).contains("\"totals\""));
    let mut tool = count.clone();
    tool["tool"] = json!("cachegrind");
    assert!(refused(&tool).contains("none of Kage's tools"));

    let ws = &fixtures()[1];
    let mut out_of_range = ws.clone();
    out_of_range["snapshots"][0]["regions"] = json!([0, 4000]);
    assert!(
        refused(&out_of_range).contains("snapshot 0 names region 4000"),
        "{}",
        refused(&out_of_range)
    );
    let mut line_size = ws.clone();
    line_size["line_size"] = json!(0);
    assert!(refused(&line_size).contains("\"line_size\" is 0, not a power of two"));
    let mut footprint = fixtures()[2].clone();
    footprint["line_size"] = json!(0);
    assert!(refused(&footprint).contains("\"line_size\" is 0"));
}
