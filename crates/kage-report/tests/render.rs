//! Snapshot tests of the renderers on hand-made reports.

use kage_report::{parse_report, render, Report};
use std::path::Path;

fn parse(json: &str) -> Report {
    parse_report(Path::new("hand-made.json"), json.as_bytes()).expect("hand-made report is valid")
}

// One call per region reads like a row of the table it builds.
#[allow(clippy::too_many_arguments)]
fn count_region(
    id: u32,
    kind: &str,
    name: &str,
    file: &str,
    lines: (u32, u32),
    parent: Option<u32>,
    instances: u64,
    inclusive: [u64; 4],
    exclusive: [u64; 4],
) -> String {
    let parent = parent.map_or("null".to_string(), |p| p.to_string());
    format!(
        r#"{{"id":{id},"kind":"{kind}","name":"{name}","symbol":"{name}","file":"{file}",
            "line":{},"end_line":{},"parent":{parent},"instances":{instances},
            "loads":{},"stores":{},"bytes_read":{},"bytes_written":{},
            "self_loads":{},"self_stores":{},"self_bytes_read":{},"self_bytes_written":{}}}"#,
        lines.0,
        lines.1,
        inclusive[0],
        inclusive[1],
        inclusive[2],
        inclusive[3],
        exclusive[0],
        exclusive[1],
        exclusive[2],
        exclusive[3],
    )
}

/// main (with a loop nest) calls sum(), which lives in another file; fill() makes more
/// accesses than main (its row comes first), unused() and its loop never ran (they come last,
/// the loop's body left out). Totals add up: sum of self_ counters (main 4+2, loop 0, body
/// 10+10, inner loop 0, inner body 100+50, sum 30+0, fill 300+100) plus unattributed (4+1).
fn count_report() -> Report {
    let regions = [
        count_region(
            0,
            "function",
            "main",
            "/home/ada/proj/src/main.c",
            (10, 40),
            None,
            1,
            [144, 62, 1152, 496],
            [4, 2, 32, 16],
        ),
        count_region(
            1,
            "loop",
            "main",
            "/home/ada/proj/src/main.c",
            (12, 30),
            Some(0),
            1,
            [140, 60, 1120, 480],
            [0, 0, 0, 0],
        ),
        count_region(
            2,
            "loop-body",
            "main",
            "/home/ada/proj/src/main.c",
            (12, 30),
            Some(1),
            10,
            [140, 60, 1120, 480],
            [10, 10, 80, 80],
        ),
        count_region(
            3,
            "loop",
            "main",
            "/home/ada/proj/src/main.c",
            (14, 20),
            Some(2),
            10,
            [100, 50, 800, 400],
            [0, 0, 0, 0],
        ),
        count_region(
            4,
            "loop-body",
            "main",
            "/home/ada/proj/src/main.c",
            (14, 20),
            Some(3),
            100,
            [100, 50, 800, 400],
            [100, 50, 800, 400],
        ),
        count_region(
            5,
            "function",
            "sum",
            "/home/ada/proj/src/lib/sum.c",
            (3, 3),
            None,
            10,
            [30, 0, 240, 0],
            [30, 0, 240, 0],
        ),
        count_region(
            6,
            "function",
            "unused",
            "/home/ada/proj/src/main.c",
            (50, 60),
            None,
            0,
            [0, 0, 0, 0],
            [0, 0, 0, 0],
        ),
        count_region(
            7,
            "loop",
            "unused",
            "/home/ada/proj/src/main.c",
            (52, 58),
            Some(6),
            0,
            [0, 0, 0, 0],
            [0, 0, 0, 0],
        ),
        count_region(
            8,
            "loop-body",
            "unused",
            "/home/ada/proj/src/main.c",
            (52, 58),
            Some(7),
            0,
            [0, 0, 0, 0],
            [0, 0, 0, 0],
        ),
        count_region(
            9,
            "function",
            "fill",
            "/home/ada/proj/src/main.c",
            (42, 48),
            None,
            1,
            [300, 100, 2400, 800],
            [300, 100, 2400, 800],
        ),
    ];
    parse(&format!(
        r#"{{"format":"kage-report","version":1,"tool":"count","program":"/home/ada/proj/build/prog",
            "args":["./prog","-n","10"],"pid":4242,"end":{{"how":"exit","code":0}},"complete":true,
            "threads":1,"options":{{"tool":"count"}},"regions":[{}],
            "totals":{{"loads":448,"stores":163,"bytes_read":3584,"bytes_written":1304}},
            "unattributed":{{"loads":4,"stores":1,"bytes_read":32,"bytes_written":8}}}}"#,
        regions.join(",")
    ))
}

#[test]
fn count_report_as_text() {
    insta::assert_snapshot!(render::text(&count_report()));
}

#[test]
fn count_report_summary() {
    insta::assert_snapshot!(render::summary(&count_report(), "kage.prog.4242.json", 3));
}

/// Written from a signal handler in a forked child; one region has no line table, one a long
/// C++ name, one lost its counters.
#[test]
fn incomplete_report_from_a_signal_as_text() {
    let long_name = "std::vector<std::pair<std::basic_string<char>, int>>::_M_realloc_insert(iterator, value_type&&)";
    let regions = [
        count_region(0, "function", long_name, "/usr/include/c++/12/bits/vector.tcc", (436, 520),
            None, 2, [20, 12, 160, 96], [20, 12, 160, 96]),
        count_region(1, "function", "helper", "", (0, 0), None, 5, [5, 5, 20, 20], [5, 5, 20, 20]),
        r#"{"id":2,"kind":"loop","name":"helper","symbol":"helper","file":"","line":0,"end_line":0,"parent":1}"#
            .to_string(),
    ];
    let report = parse(&format!(
        r#"{{"format":"kage-report","version":1,"tool":"count","program":"/tmp/crash",
            "args":["/tmp/crash"],"pid":77,"forked_from":76,"end":{{"how":"signal","signal":11}},
            "complete":false,"threads":3,"options":{{}},"regions":[{}],
            "totals":{{"loads":25,"stores":17,"bytes_read":180,"bytes_written":116}}}}"#,
        regions.join(",")
    ));
    insta::assert_snapshot!(render::text(&report));
    insta::assert_snapshot!(
        "incomplete_report_summary",
        render::summary(&report, "/tmp/kage.crash.77.json", 5)
    );
}

/// A program that exited while two of its threads could not close their regions: one
/// blocks every signal (a pool's worker), one is stopped. The warnings say which, and why.
#[test]
fn incomplete_report_of_threads_left_open() {
    let regions = [count_region(
        0,
        "function",
        "worker",
        "pool.c",
        (10, 30),
        None,
        2,
        [20, 12, 160, 96],
        [20, 12, 160, 96],
    )];
    let report = parse(&format!(
        r#"{{"format":"kage-report","version":1,"tool":"count","program":"/tmp/pool",
            "args":["/tmp/pool"],"pid":80,"end":{{"how":"exit","code":0}},
            "complete":false,"unclosed_threads":{{"blocking":1,"stopped":1,"unanswered":0}},
            "threads":3,"options":{{}},"regions":[{}],
            "totals":{{"loads":20,"stores":12,"bytes_read":160,"bytes_written":96}}}}"#,
        regions.join(",")
    ));
    insta::assert_snapshot!(render::text(&report));
    insta::assert_snapshot!(
        "threads_left_open_summary",
        render::summary(&report, "/tmp/kage.pool.80.json", 5)
    );
}

/// The reader refuses a tool Kage does not have; a report made otherwise (a library user's
/// own) still renders, as a generic tree of its regions' fields.
#[test]
fn unknown_tool_is_refused_by_the_reader_and_gets_a_generic_tree() {
    let json = r#"{"format":"kage-report","version":1,"tool":"hot-lines","program":"/bin/ws",
            "args":[],"pid":9,"end":{"how":"exit","code":3},"complete":true,"threads":1,
            "options":{"interval":"10ms"},
            "regions":[
              {"id":0,"kind":"function","name":"main","file":"ws.c","line":1,"end_line":9,"parent":null,
               "lines_touched":12,"label":"hot"},
              {"id":1,"kind":"loop","name":"main","file":"ws.c","line":4,"end_line":6,"parent":0,
               "lines_touched":8}],
            "intervals":[3,5,8],"line_size":64}"#;
    let refused = parse_report(Path::new("r.json"), json.as_bytes()).unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("\"tool\" is 'hot-lines', which is none of Kage's tools (count, "),
        "{refused}"
    );
    let report: Report = serde_json::from_str(json).unwrap();
    insta::assert_snapshot!(render::text(&report));
    insta::assert_snapshot!(
        "unknown_tool_summary",
        render::summary(&report, "kage.ws.9.json", 5)
    );
}

#[test]
fn report_without_regions_says_how_to_get_some() {
    let report = parse(
        r#"{"format":"kage-report","version":1,"tool":"count","program":"/bin/true","args":["true"],
            "pid":1,"end":{"how":"exit","code":0},"complete":true,"threads":0,"options":{},
            "regions":[],"totals":{"loads":0,"stores":0,"bytes_read":0,"bytes_written":0}}"#,
    );
    insta::assert_snapshot!(render::text(&report));
    insta::assert_snapshot!(
        "report_without_regions_summary",
        render::summary(&report, "kage.true.1.json", 5)
    );
}

#[test]
fn json_view_reads_back_as_the_same_report() {
    let report = count_report();
    let json = render::json(&report);
    assert!(json.ends_with("}\n"));
    assert_eq!(parse(&json), report);
    assert!(
        json.contains("\n  \"tool\": \"count\""),
        "pretty-printed: {json}"
    );
}

#[test]
fn signal_names_follow_linux() {
    assert_eq!(render::signal_name(11), Some("SIGSEGV"));
    assert_eq!(render::signal_name(15), Some("SIGTERM"));
    assert_eq!(render::signal_name(31), Some("SIGSYS"));
    assert_eq!(render::signal_name(0), None);
    assert_eq!(render::signal_name(64), None);
    assert_eq!(render::signal_name(-1), None);
}
