use kage_report::*;
use std::path::Path;

fn sample() -> Report {
    let stats = CountStats {
        instances: 3,
        inclusive: Counters {
            loads: 10,
            stores: 5,
            bytes_read: 40,
            bytes_written: 20,
        },
        exclusive: Counters {
            loads: 7,
            stores: 1,
            bytes_read: 28,
            bytes_written: 4,
        },
    };
    let metrics = match serde_json::to_value(stats).unwrap() {
        serde_json::Value::Object(m) => m,
        _ => unreachable!(),
    };
    Report {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        tool: "count".into(),
        program: "/bin/prog".into(),
        args: vec!["prog".into()],
        pid: 42,
        forked_from: None,
        end: ProgramEnd::Exit { code: 0 },
        complete: true,
        unclosed_threads: None,
        threads: 1,
        options: Default::default(),
        regions: vec![Region {
            id: 0,
            kind: RegionKind::Function,
            name: "main".into(),
            symbol: "main".into(),
            file: "/src/prog.c".into(),
            line: 3,
            end_line: 9,
            parent: None,
            inlined_at: None,
            metrics,
        }],
        tool_data: serde_json::json!({"totals": stats.inclusive})
            .as_object()
            .unwrap()
            .clone(),
    }
}

#[test]
fn count_stats_use_the_documented_field_names() {
    let json = serde_json::to_value(sample()).unwrap();
    let region = &json["regions"][0];
    assert_eq!(region["instances"], 3);
    assert_eq!(region["loads"], 10);
    assert_eq!(region["self_loads"], 7);
    assert_eq!(region["self_bytes_written"], 4);
    assert_eq!(region["kind"], "function");
    assert_eq!(json["end"]["how"], "exit");
}

#[test]
fn a_report_survives_a_round_trip() {
    let report = sample();
    let text = serde_json::to_vec(&report).unwrap();
    let back = parse_report(Path::new("r.json"), &text).unwrap();
    assert_eq!(back, report);
    assert_eq!(CountStats::of(&back.regions[0]).unwrap().exclusive.loads, 7);
}

#[test]
fn bad_input_gets_the_right_error() {
    let p = Path::new("r.json");
    let full = serde_json::to_vec(&sample()).unwrap();
    let cut = &full[..full.len() / 2];
    assert!(matches!(parse_report(p, cut), Err(ReadError::Truncated(_))));
    assert!(matches!(parse_report(p, b""), Err(ReadError::Empty(_))));
    assert!(matches!(
        parse_report(p, b"hello"),
        Err(ReadError::NotJson(..))
    ));
    assert!(matches!(
        parse_report(p, b"{\"a\":1}"),
        Err(ReadError::NotKage(_))
    ));
    assert!(matches!(
        parse_report(p, b"{\"format\":\"kage-report\",\"version\":99}"),
        Err(ReadError::UnsupportedVersion(_, 99))
    ));
    assert!(matches!(
        parse_report(p, b"{\"format\":\"kage-report\",\"version\":1}"),
        Err(ReadError::Malformed(..))
    ));
    let msg = parse_report(p, cut).unwrap_err().to_string();
    assert!(msg.contains("truncated"), "{msg}");
    assert!(matches!(
        read_report(Path::new("/nonexistent/r.json")),
        Err(ReadError::Missing(_))
    ));
}
