//! The footprint views on a hand-written report (`fixtures/footprint.json`): `main` with a
//! loop that fills a 100×100 matrix and a nest of two loops that multiplies it by a vector,
//! a recursive `fib`, a C++ method whose name holds `<`, `>` and `&`, and a function that
//! never ran. Footprints overlap: main's two loops add up to more than main.

mod common;

use kage_report::render::{self, IcicleCell, View, ViewError};
use kage_report::{
    parse_report, read_report, Footprint, FootprintError, FootprintGranularity, FootprintStats,
    Report,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/footprint.json")
}

fn fixture() -> Report {
    read_report(&fixture_path()).expect("the fixture is a valid report")
}

/// The fixture with its JSON changed by `edit` first.
fn edited(edit: impl FnOnce(&mut Value)) -> Report {
    common::edited(&fixture_path(), edit, |report| {
        report.footprint().unwrap_err().to_string()
    })
}

const SUM: &str = "Grid<double>::sum(std::vector<double> const&) const";

#[test]
fn the_typed_view_reads_every_documented_field() {
    let report = fixture();
    let fp = report
        .footprint()
        .expect("the footprint fields are as documented");
    assert_eq!(fp.granularity, FootprintGranularity::Byte);
    assert_eq!((fp.location_bytes, fp.line_size), (1, 64));
    assert_eq!(fp.vsm, "slim");
    assert_eq!((fp.total_bytes, fp.total_lines), (83_200, 1318));
    assert_eq!((fp.max_depth, fp.accesses), (11, 43_262));
    assert_eq!(fp.shadow_peak_bytes, 1_310_720);
    assert_eq!(
        (fp.loop_bodies, fp.untracked_instances),
        (Some(true), Some(0))
    );
    assert_eq!(fp.regions.len(), report.regions.len());
    let fib = fp.stats(7);
    assert_eq!(
        fib,
        FootprintStats {
            instances: 177,
            avg_bytes: 130.66,
            min_bytes: 48,
            max_bytes: 480,
            avg_lines: 2.6,
            min_lines: 1,
            max_lines: 8,
            share: 480.0 / 83_200.0,
        }
    );
    assert!(fp.stats(11).never_entered());
    assert_eq!(fp.stats(11), FootprintStats::default());
    assert_eq!(
        FootprintStats::of(&report.regions[4]).unwrap().avg_lines,
        27.3
    );
    // Out of range: zeros, never a panic.
    assert_eq!(fp.stats(999), FootprintStats::default());
}

#[test]
fn the_json_view_round_trips_and_keeps_the_documented_names() {
    let report = fixture();
    let json = render::json(&report);
    let back = parse_report(Path::new("back.json"), json.as_bytes()).unwrap();
    assert_eq!(back, report);
    assert_eq!(back.footprint().unwrap(), report.footprint().unwrap());
    let value: Value = serde_json::from_str(&json).unwrap();
    let main = &value["regions"][0]["footprint"];
    for field in [
        "instances",
        "avg_bytes",
        "min_bytes",
        "max_bytes",
        "avg_lines",
        "min_lines",
        "max_lines",
        "share",
    ] {
        assert!(main.get(field).is_some(), "no {field} in {main}");
    }
    assert_eq!(value["granularity"], "byte");
    assert_eq!(value["shadow_peak_bytes"], 1_310_720);
}

/// What the runtime does: build the model from typed values, serialise it, read it back.
#[test]
fn the_typed_view_writes_what_it_reads() {
    let mut report = fixture();
    let fp = report.footprint().unwrap();
    let mut data = fp.to_tool_data();
    assert_eq!(data["granularity"], "byte");
    assert!(
        !data.contains_key("regions"),
        "per-region stats live in the regions"
    );
    data.insert("something_new".into(), Value::from(1));
    report.tool_data = data;
    for (region, stats) in report.regions.iter_mut().zip(&fp.regions) {
        region.metrics.clear();
        region.metrics.insert("footprint".into(), stats.to_value());
    }
    let json = serde_json::to_vec(&report).unwrap();
    let back = parse_report(Path::new("r.json"), &json).unwrap();
    assert_eq!(back.footprint().unwrap(), fp);
    for granularity in ["byte", "word", "line"] {
        let mut back = back.clone();
        back.tool_data
            .insert("granularity".into(), granularity.into());
        assert_eq!(back.footprint().unwrap().granularity.as_str(), granularity);
    }
}

#[test]
fn missing_or_wrong_fields_are_errors_that_name_them() {
    for field in [
        "granularity",
        "location_bytes",
        "line_size",
        "vsm",
        "total_bytes",
        "total_lines",
        "max_depth",
        "accesses",
        "shadow_peak_bytes",
    ] {
        let report = edited(|json| {
            json.as_object_mut().unwrap().remove(field);
        });
        let error = report.footprint().unwrap_err();
        assert_eq!(error, FootprintError::MissingField(field));
        assert_eq!(
            error.to_string(),
            format!("the field \"{field}\" is missing")
        );
    }

    let report = edited(|json| json["granularity"] = "nibble".into());
    let error = report.footprint().unwrap_err();
    assert!(
        matches!(
            error,
            FootprintError::InvalidField {
                field: "granularity",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("nibble"), "{error}");

    let report = edited(|json| {
        json["regions"][3]
            .as_object_mut()
            .unwrap()
            .remove("footprint");
    });
    assert_eq!(
        report.footprint().unwrap_err().to_string(),
        "region 3 has no \"footprint\" object"
    );

    let report = edited(|json| {
        json["regions"][5]["footprint"]
            .as_object_mut()
            .unwrap()
            .remove("avg_bytes");
    });
    assert_eq!(
        report.footprint().unwrap_err(),
        FootprintError::InvalidRegion {
            region: 5,
            field: "avg_bytes",
            problem: None
        }
    );
    assert_eq!(
        report.footprint().unwrap_err().to_string(),
        "region 5: \"footprint\" has no \"avg_bytes\""
    );

    // A NaN average would be written as null by serde_json: it must not pass for a number.
    let report = edited(|json| json["regions"][2]["footprint"]["avg_lines"] = Value::Null);
    let error = report.footprint().unwrap_err().to_string();
    assert!(
        error.starts_with("region 2: \"footprint\".\"avg_lines\" is not as documented"),
        "{error}"
    );
    let report = edited(|json| json["regions"][2]["footprint"]["min_bytes"] = (-1).into());
    let error = report.footprint().unwrap_err().to_string();
    assert!(error.contains("\"min_bytes\""), "{error}");

    // The text view still shows what there is; the html view says what is wrong.
    let report = edited(|json| {
        json.as_object_mut().unwrap().remove("total_bytes");
    });
    let text = render::text(&report);
    assert!(
        text.contains(
            "warning: the footprint fields do not match docs/report-schema.md \
             (the field \"total_bytes\" is missing); here they are as written"
        ),
        "{text}"
    );
    assert!(text.contains("function main"), "{text}");
    let error = render::html(&report).unwrap_err();
    assert!(matches!(
        error,
        ViewError::Malformed {
            tool: "footprint",
            ..
        }
    ));
    assert_eq!(
        error.to_string(),
        "the footprint fields of this report do not match docs/report-schema.md: \
         the field \"total_bytes\" is missing"
    );
    let summary = render::summary(&report, "r.json", 5);
    assert!(summary.contains("do not match"), "{summary}");
}

#[test]
fn footprint_as_text() {
    insta::assert_snapshot!(render::text(&fixture()));
}

#[test]
fn footprint_summary() {
    insta::assert_snapshot!(render::summary(&fixture(), "kage.matvec.5151.json", 4));
}

#[test]
fn the_tree_lists_siblings_largest_first_and_regions_never_entered_with_dashes() {
    let text = render::text(&fixture());
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("region "))
        .skip(1)
        .collect();
    let labels: Vec<&str> = rows.iter().map(|r| r.split("  ").next().unwrap()).collect();
    // Functions by largest footprint: main, then the C++ method, fib, then the one never run;
    // under main the multiplying loop (81600 bytes) before the filling one (80000).
    assert_eq!(rows.len(), 13, "{text}");
    assert!(rows[0].starts_with("function main "), "{text}");
    assert!(
        rows[1].starts_with("  loop ") && rows[1].contains("matvec.c:38-44"),
        "{text}"
    );
    assert!(
        rows[5].starts_with("  loop ") && rows[5].contains("matvec.c:33-36"),
        "{text}"
    );
    assert!(
        rows[7].starts_with(&format!("function {SUM}")),
        "{labels:?}"
    );
    assert!(rows[10].starts_with("function fib "), "{text}");
    assert!(rows[11].starts_with("function report_error "), "{text}");
    let never: Vec<&str> = rows[11].split_whitespace().collect();
    assert_eq!(
        never[never.len() - 8..],
        ["0", "-", "-", "-", "-", "-", "-", "-"]
    );
}

/// The parent of a cell: the cell of the region's static parent, or the program's.
fn parent_of<'c>(cells: &'c [IcicleCell], report: &Report, cell: &IcicleCell) -> &'c IcicleCell {
    let parent = report.region(cell.region.unwrap()).unwrap().parent;
    cells.iter().find(|c| c.region == parent).unwrap()
}

fn cell(cells: &[IcicleCell], id: u32) -> &IcicleCell {
    cells.iter().find(|c| c.region == Some(id)).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12
}

#[test]
fn icicle_children_are_their_parents_width_times_their_ratio() {
    let report = fixture();
    let fp = report.footprint().unwrap();
    let cells = render::icicle(&report, &fp);
    assert_eq!(cells[0].region, None);
    assert_eq!(
        (cells[0].x, cells[0].width, cells[0].bytes),
        (0.0, 1.0, 83_200)
    );
    // Every region that touched memory has a cell; the one never run has none.
    let ids: Vec<u32> = cells.iter().filter_map(|c| c.region).collect();
    assert_eq!(
        ids,
        [0, 3, 4, 5, 6, 1, 2, 8, 9, 10, 7],
        "pre-order, largest first"
    );

    for c in &cells[1..] {
        let parent = parent_of(&cells, &report, c);
        assert_eq!(c.depth, parent.depth + 1);
        let ratio = c.bytes as f64 / parent.bytes as f64;
        assert!(ratio <= 1.0);
        assert!(
            close(c.width, parent.width * ratio * c.scale),
            "{c:?} under {parent:?}"
        );
        // Siblings share a scale, lie side by side from the parent's left edge and fit in it.
        let siblings: Vec<&IcicleCell> = cells[1..]
            .iter()
            .filter(|s| parent_of(&cells, &report, s) == parent)
            .collect();
        assert!(siblings.iter().all(|s| s.scale == c.scale));
        let mut x = parent.x;
        for s in &siblings {
            assert!(close(s.x, x), "{s:?}");
            x += s.width;
        }
        let used: f64 = siblings.iter().map(|s| s.width).sum();
        assert!(used <= parent.width + 1e-12);
        if c.scale < 1.0 {
            assert!(
                close(used, parent.width),
                "scaled siblings fill their parent exactly"
            );
        }
    }

    // No scaling where children fit: the multiplying loop's body, its inner loop, fib.
    let body = cell(&cells, 4);
    assert_eq!(body.scale, 1.0);
    assert!(close(body.width, cell(&cells, 3).width * 1608.0 / 81_600.0));
    assert!(close(cell(&cells, 5).width, body.width * 1600.0 / 1608.0));
}

#[test]
fn icicle_siblings_that_exceed_their_parent_are_normalised_to_fit() {
    let report = fixture();
    let fp = report.footprint().unwrap();
    let cells = render::icicle(&report, &fp);
    // The functions: 83000 + 8032 + 480 bytes > 83200, the program's total.
    let roots = 83_000.0 + 8_032.0 + 480.0;
    let main = cell(&cells, 0);
    assert!(close(main.scale, 83_200.0 / roots));
    assert!(close(main.width, 83_000.0 / roots));
    assert!(close(cell(&cells, 8).width, 8_032.0 / roots));
    assert!(close(cell(&cells, 7).x, (83_000.0 + 8_032.0) / roots));
    // main's loops: 81600 + 80000 bytes > main's 83000.
    let (multiply, fill) = (cell(&cells, 3), cell(&cells, 1));
    let scale = 83_000.0 / (81_600.0 + 80_000.0);
    assert!(close(multiply.scale, scale) && close(fill.scale, scale));
    assert!(close(
        multiply.width,
        main.width * 81_600.0 / 83_000.0 * scale
    ));
    assert!(close(multiply.x, 0.0));
    assert!(close(fill.x, multiply.width));
    assert!(close(multiply.width + fill.width, main.width));

    // Without the overlap (a smaller filling loop) nothing is scaled.
    let report = edited(|json| json["regions"][1]["footprint"]["max_bytes"] = 1_000.into());
    let fp = report.footprint().unwrap();
    let cells = render::icicle(&report, &fp);
    assert_eq!(cell(&cells, 3).scale, 1.0);
    assert!(close(
        cell(&cells, 1).width,
        cell(&cells, 0).width * 1_000.0 / 83_000.0
    ));
}

#[test]
fn html_is_one_page_with_an_icicle_whose_rectangles_have_the_layouts_widths() {
    let report = fixture();
    let fp = report.footprint().unwrap();
    let html = render::html(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.ends_with("</html>\n"));
    assert_eq!(html.matches("<svg").count(), 1);
    assert_eq!(html.matches("</svg>").count(), 1);
    for external in ["src=", "href=", "@import", "url(", "<script"] {
        assert!(!html.contains(external), "{external} in {html}");
    }
    let cells = render::icicle(&report, &fp);
    assert_eq!(html.matches("<rect ").count(), cells.len());
    for c in &cells {
        let rect = format!(
            "<rect x=\"{:.2}\" y=\"{}\" width=\"{:.2}\"",
            c.x * 1200.0,
            c.depth * 24,
            c.width * 1200.0
        );
        assert!(html.contains(&rect), "no {rect}");
    }
    // The note says what the widths are and that siblings overlap.
    assert!(html.contains("the largest footprint of any instance (max)"));
    assert!(html.contains("Footprints of siblings overlap"));
    // Hover titles hold the full stats; a scaled cell says so.
    assert!(
        html.contains(
            "<title>loop in main (src/matvec.c:38-44)\ninstances: 1\nfootprint: avg 79.7 KiB, \
         min 79.7 KiB, max 79.7 KiB\nlines: avg 1276, min 1276, max 1276\n\
         share of the total footprint: 98.1%\ndrawn at 51.4% of its width"
        ),
        "{html}"
    );
    // One table row per region, the one never run greyed.
    assert_eq!(html.matches("<tr class=\"idle\">").count(), 2);
}

#[test]
fn html_escapes_every_text_from_the_report() {
    let report = edited(|json| {
        json["program"] = "/tmp/a<b>&\"c\"/mat<vec>".into();
        json["args"] = serde_json::json!(["./mat<vec>", "<script>alert(1)</script>"]);
        json["vsm"] = "<i>slim</i>".into();
        json["regions"][0]["file"] = "/src/<main>.c".into();
    });
    let html = render::html(&report).unwrap();
    let escaped_sum = "Grid&lt;double&gt;::sum(std::vector&lt;double&gt; const&amp;) const";
    // In the icicle's label, its title and the table.
    assert!(html.contains(&format!("<title>{escaped_sum} (")), "{html}");
    assert!(html.contains(">Grid&lt;double&gt;…</text>"), "{html}");
    assert!(
        html.contains(&format!(">function {escaped_sum}</td>")),
        "{html}"
    );
    assert!(html.contains("/tmp/a&lt;b&gt;&amp;&quot;c&quot;/mat&lt;vec&gt;"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;i&gt;slim&lt;/i&gt;"));
    assert!(html.contains("&lt;main&gt;.c"));
    for raw in [
        "<double>", "<script", "<i>", "<b>", "<main>", "<vec>", "const&)",
    ] {
        assert!(!html.contains(raw), "{raw} unescaped in {html}");
    }
}

#[test]
fn footprint_html() {
    insta::assert_snapshot!(render::html(&fixture()).unwrap());
}

#[test]
fn perfetto_is_not_a_footprint_view() {
    let error = render::perfetto(&fixture()).unwrap_err();
    assert_eq!(
        error,
        ViewError::NotForTool {
            view: View::Perfetto,
            tool: "footprint".into()
        }
    );
    assert_eq!(
        error.to_string(),
        "the perfetto view exists for the working-set tool; this report is from `footprint`"
    );
}

#[test]
fn several_threads_and_an_empty_run() {
    let report = edited(|json| json["threads"] = 4.into());
    let text = render::text(&report);
    assert!(text.contains("summed over the 4 threads"), "{text}");
    assert!(render::summary(&report, "r.json", 3).contains("(summed over 4 threads)"));

    // Nothing touched: the program's row only, and a line that says so.
    let report = edited(|json| {
        json["total_bytes"] = 0.into();
        json["total_lines"] = 0.into();
        for region in json["regions"].as_array_mut().unwrap() {
            region["footprint"] = FootprintStats::default().to_value();
        }
    });
    let fp: Footprint = report.footprint().unwrap();
    assert_eq!(render::icicle(&report, &fp).len(), 1);
    let html = render::html(&report).unwrap();
    assert!(html.contains("no region touched any memory"), "{html}");
    assert!(
        html.contains("viewBox=\"0 0 1200 48\" width=\"1200\" height=\"48\""),
        "room for the program's row and the line: {html}"
    );
    let summary = render::summary(&report, "r.json", 3);
    assert!(
        summary.contains("kage: no region touched any memory"),
        "{summary}"
    );

    // No regions at all.
    let report = edited(|json| json["regions"] = serde_json::json!([]));
    assert!(render::text(&report).contains("no instrumented regions"));
    assert!(render::html(&report)
        .unwrap()
        .contains("No instrumented regions"));
}

/// The runtime's default: loop bodies are not measured, so every body has 0 instances. The
/// tree and the icicle leave them out and hang nested loops under the loop around them.
#[test]
fn loops_nest_directly_when_bodies_were_not_measured() {
    let report = edited(|json| {
        json["loop_bodies"] = false.into();
        json["untracked_instances"] = 3.into();
        for region in json["regions"].as_array_mut().unwrap() {
            if region["kind"] == "loop-body" {
                region["footprint"] = FootprintStats::default().to_value();
            }
        }
    });
    let text = render::text(&report);
    assert!(!text.contains("loop-body"), "{text}");
    assert!(text.contains("\nloop bodies      not measured"), "{text}");
    assert!(
        text.contains("\nuntracked        3 region instances nested too deep"),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("region "))
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 13 - 4, "{text}");
    assert!(
        rows[1].starts_with("  loop ") && rows[1].contains(":38-44"),
        "{text}"
    );
    assert!(
        rows[2].starts_with("    loop ") && rows[2].contains(":40-42"),
        "{text}"
    );
    assert!(
        rows[3].starts_with("  loop ") && rows[3].contains(":33-36"),
        "{text}"
    );

    let fp = report.footprint().unwrap();
    let cells = render::icicle(&report, &fp);
    let ids: Vec<u32> = cells.iter().filter_map(|c| c.region).collect();
    assert_eq!(ids, [0, 3, 5, 1, 8, 9, 7]);
    let (outer, inner) = (cell(&cells, 3), cell(&cells, 5));
    assert_eq!(inner.depth, outer.depth + 1);
    assert_eq!(inner.x, outer.x);
    assert!(close(inner.width, outer.width * 1_600.0 / 81_600.0));
    assert_eq!(inner.scale, 1.0);
    let html = render::html(&report).unwrap();
    assert!(!html.contains(">loop-body<"), "{html}");
}
