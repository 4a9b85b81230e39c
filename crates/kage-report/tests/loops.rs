//! The loops model and views on a hand-written report (`fixtures/loops.json`) of a stencil
//! program run with the default sampling (10 iterations, 8 entries):
//!
//! - nest 0, `main`'s loops at `stencil.c:12` (KAGE_LOOPS): 100 entries of 20 × 30
//!   iterations. A sampled entry instruments level 0's first 10 iterations (a decision each:
//!   the inner loop's resync makes level 0 ask again at every iteration) and, in each, the
//!   inner loop's first 10 (two decisions: instrumented at 0, original at 10), then level 0
//!   decides original at 10: per sampled entry 10 + 100 instrumented iterations, level 0
//!   10 + 1 chunks, level 1 10 + 10;
//! - nest 1, a C++ method with `#pragma kage profile`: one entry of 5 iterations holding two
//!   sibling loops of 4 and 20 iterations: every level 0 iteration is instrumented (a
//!   decision each, the second sibling resyncing it), the first sibling entirely (one
//!   decision per entry), the second for its first 10 iterations (two decisions per entry).

mod common;

use kage_report::render::{self, View, ViewError};
use kage_report::{
    read_report, LevelChunks, LoopNest, Loops, LoopsError, NestLevel, NestSelection, Report,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/loops.json")
}

fn fixture() -> Report {
    read_report(&fixture_path()).expect("the fixture is a valid report")
}

/// The fixture with its JSON changed by `edit` first.
fn edited(edit: impl FnOnce(&mut Value)) -> Report {
    common::edited(&fixture_path(), edit, |report| {
        report.loops().unwrap_err().to_string()
    })
}

#[test]
fn the_typed_view_reads_every_documented_field() {
    let loops = fixture()
        .loops()
        .expect("the loops fields are as documented");
    assert_eq!((loops.sample_iterations, loops.sample_entries), (10, 8));
    assert_eq!(loops.nests.len(), 2);
    let main = &loops.nests[0];
    assert_eq!(
        *main,
        LoopNest {
            id: 0,
            function: "main".into(),
            file: "/home/ada/stencil/src/stencil.c".into(),
            line: 12,
            end_line: 20,
            selected_by: NestSelection::Line,
            entries: 100,
            sampled_entries: 8,
            levels: vec![
                NestLevel {
                    level: 0,
                    parent: None,
                    depth: 0,
                    line: 12,
                    end_line: 20,
                    iterations: 100 * 20,
                    instrumented_iterations: 8 * 10,
                    chunks: LevelChunks {
                        original: 8,
                        instrumented: 8 * 10
                    },
                },
                NestLevel {
                    level: 1,
                    parent: Some(0),
                    depth: 1,
                    line: 14,
                    end_line: 18,
                    iterations: 100 * 20 * 30,
                    instrumented_iterations: 8 * 10 * 10,
                    chunks: LevelChunks {
                        original: 8 * 10,
                        instrumented: 8 * 10
                    },
                },
            ],
        }
    );
    assert_eq!(main.instrumented_iterations(), 880);
    let smooth = &loops.nests[1];
    assert_eq!(smooth.selected_by, NestSelection::Pragma);
    let levels: Vec<(Option<u32>, u32, u64, u64, u64, u64)> = (smooth.levels.iter())
        .map(|l| {
            (
                l.parent,
                l.depth,
                l.iterations,
                l.instrumented_iterations,
                l.chunks.original,
                l.chunks.instrumented,
            )
        })
        .collect();
    assert_eq!(
        levels,
        [
            (None, 0, 5, 5, 0, 5),
            (Some(0), 1, 5 * 4, 5 * 4, 0, 5),
            (Some(0), 1, 5 * 20, 5 * 10, 5, 5),
        ]
    );
}

/// What the runtime writes (`Loops::to_tool_data`) reads back the same.
#[test]
fn the_fields_round_trip() {
    let loops = fixture().loops().unwrap();
    let again = Loops::from_tool_data(&loops.to_tool_data()).unwrap();
    assert_eq!(again, loops);
    let value = serde_json::to_value(&loops).unwrap();
    assert_eq!(value["nests"][1]["selected_by"], "pragma");
    assert_eq!(value["nests"][0]["levels"][0]["parent"], Value::Null);
    assert_eq!(value["nests"][0]["levels"][1]["chunks"]["original"], 80);
}

type Edit = Box<dyn FnOnce(&mut Value)>;

/// Level `k` of nest 1.
fn level(json: &mut Value, k: usize) -> &mut Value {
    &mut json["loops"]["nests"][1]["levels"][k]
}

/// Every kind of field the schema rejects is named by its path; the text view then falls
/// back to the generic view with a warning, the HTML view is an error.
#[test]
fn fields_not_as_documented_are_named() {
    let cases: Vec<(Edit, &str)> =
        vec![
        (
            Box::new(|j| {
                j.as_object_mut().unwrap().remove("loops");
            }),
            "the field \"loops\" is missing",
        ),
        (
            Box::new(|j| j["loops"] = 3.into()),
            "the field \"loops\" is not as documented: not an object",
        ),
        (
            Box::new(|j| {
                j["loops"].as_object_mut().unwrap().remove("sample_entries");
            }),
            "the field \"loops\".\"sample_entries\" is missing",
        ),
        (
            Box::new(|j| j["loops"]["nests"] = "none".into()),
            "the field \"loops\".\"nests\" is not as documented: not an array",
        ),
        (
            Box::new(|j| j["loops"]["nests"][0]["entries"] = (-1).into()),
            "the field \"loops\".\"nests\"[0].\"entries\" is not as documented: invalid value: \
             integer `-1`, expected u64",
        ),
        (
            Box::new(|j| level(j, 2)["iterations"] = 1.5.into()),
            "the field \"loops\".\"nests\"[1].\"levels\"[2].\"iterations\" is not as \
             documented: invalid type: floating point `1.5`, expected u64",
        ),
        (
            Box::new(|j| {
                level(j, 1)["chunks"].as_object_mut().unwrap().remove("original");
            }),
            "the field \"loops\".\"nests\"[1].\"levels\"[1].\"chunks\".\"original\" is missing",
        ),
        (
            Box::new(|j| level(j, 1)["level"] = 2.into()),
            "the field \"loops\".\"nests\"[1].\"levels\"[1].\"level\" is not as documented: 2 \
             is not its index in \"levels\" (1)",
        ),
        (
            Box::new(|j| level(j, 2)["parent"] = 2.into()),
            "the field \"loops\".\"nests\"[1].\"levels\"[2].\"parent\" is not as documented: 2 \
             is not a level before 2",
        ),
        (
            Box::new(|j| level(j, 1)["parent"] = Value::Null),
            "the field \"loops\".\"nests\"[1].\"levels\"[1].\"parent\" is not as documented: \
             only level 0 has no parent",
        ),
        (
            Box::new(|j| level(j, 0)["parent"] = 0.into()),
            "the field \"loops\".\"nests\"[1].\"levels\"[0].\"parent\" is not as documented: \
             level 0 has no parent, not 0",
        ),
        (
            Box::new(|j| level(j, 2)["depth"] = 2.into()),
            "the field \"loops\".\"nests\"[1].\"levels\"[2].\"depth\" is not as documented: 2 \
             is not its parent's depth + 1 (1)",
        ),
        (
            Box::new(|j| j["loops"]["nests"][1]["levels"] = serde_json::json!([])),
            "the field \"loops\".\"nests\"[1].\"levels\" is not as documented: a nest has at \
             least one level",
        ),
        (
            Box::new(|j| j["loops"]["nests"][0]["sampled_entries"] = 101.into()),
            "the field \"loops\".\"nests\"[0].\"sampled_entries\" is not as documented: 101 is \
             more than the 100 entries",
        ),
        (
            Box::new(|j| j["loops"]["nests"][1]["id"] = 0.into()),
            "the field \"loops\".\"nests\"[1].\"id\" is not as documented: 0 after 0: nests are \
             sorted by id, each once",
        ),
        (
            Box::new(|j| j["loops"]["nests"][0]["selected_by"] = "guess".into()),
            "the field \"loops\".\"nests\"[0].\"selected_by\" is not as documented: unknown \
             variant `guess`, expected one of `line`, `pragma`, `report`",
        ),
    ];
    for (edit, message) in cases {
        let report = edited(edit);
        let error = report.loops().unwrap_err();
        assert_eq!(error.to_string(), message);
        let text = render::text(&report);
        assert!(
            text.contains("warning: the loops fields do not match"),
            "{text}"
        );
        assert!(matches!(
            render::html(&report).unwrap_err(),
            ViewError::Malformed { tool: "loops", .. }
        ));
        let summary = render::summary(&report, "kage.stencil.4242.json", 5);
        assert!(
            summary.contains("the loops fields do not match"),
            "{summary}"
        );
    }
    assert!(matches!(
        edited(|j| j["loops"]["nests"][0]["levels"] = 1.into()).loops(),
        Err(LoopsError::Invalid { .. })
    ));
}

#[test]
fn loops_as_text() {
    insta::assert_snapshot!(render::text(&fixture().by_source()));
}

#[test]
fn loops_summary() {
    insta::assert_snapshot!(render::summary(
        &fixture().by_source(),
        "kage.stencil.4242.json",
        5
    ));
}

#[test]
fn loops_html() {
    insta::assert_snapshot!(render::html(&fixture().by_source()).unwrap());
}

/// A nest's header line, the levels indented by depth, a summary cut at `top`.
#[test]
fn each_nest_has_its_line_and_its_levels() {
    let text = render::text(&fixture());
    assert!(
        text.contains("\nnest main (stencil.c:12-20): 100 entries, 8 sampled\n"),
        "{text}"
    );
    assert!(
        text.contains("\nnest Grid<double>::smooth(int) (grid.hpp:40-52): 1 entry, 1 sampled\n"),
        "{text}"
    );
    let rows: Vec<&str> = (text.lines())
        .skip_while(|l| !l.starts_with("nest Grid"))
        .skip(2)
        .collect();
    let cells = |row: &str| row.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(rows[0].starts_with("  0 "), "{text}");
    assert!(
        rows[1].starts_with("    1 ") && rows[2].starts_with("    2 "),
        "{text}"
    );
    assert_eq!(cells(rows[0]), "0 40-52 5 5 0 5");
    assert_eq!(cells(rows[2]), "2 47-50 100 50 5 5");
    let summary = render::summary(&fixture(), "r.json", 1);
    assert!(summary.contains("(1 more in the report)"), "{summary}");
    assert!(!summary.contains("smooth"), "{summary}");
}

/// Without nests the views say how to get some; a rule that samples nothing says so.
#[test]
fn a_report_without_nests_says_how_to_select_some() {
    let report = edited(|j| {
        j["loops"]["nests"] = serde_json::json!([]);
        j["loops"]["sample_iterations"] = 0.into();
    });
    let text = render::text(&report);
    assert!(
        text.contains("sampling  none (sample_iterations=0)"),
        "{text}"
    );
    assert!(text.contains("nests     0 selected nests ran"), "{text}");
    assert!(
        text.ends_with(
            "no selected loop nest ran: select loops at build time with \
             KAGE_LOOPS=file.c:line or #pragma kage profile, and build with KAGE_TOOL=loops\n"
        ),
        "{text}"
    );
    let summary = render::summary(&report, "r.json", 5);
    assert!(
        summary.contains("kage: no selected loop nest ran"),
        "{summary}"
    );
    let html = render::html(&report).unwrap();
    assert!(html.contains("<p>No selected loop nest ran"), "{html}");
}

#[test]
fn html_is_one_page_with_every_text_escaped() {
    let report = edited(|json| {
        json["program"] = "/tmp/a<b>&\"c\"/p<ar>".into();
        json["args"] = serde_json::json!(["./p<ar>", "<script>alert(1)</script>"]);
        json["loops"]["nests"][0]["file"] = "/src/<main>.c".into();
    });
    let html = render::html(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.ends_with("</html>\n"));
    for external in ["src=", "href=", "@import", "url(", "<script"] {
        assert!(!html.contains(external), "{external} in {html}");
    }
    assert!(html.contains("Grid&lt;double&gt;::smooth(int)"));
    assert!(html.contains("/tmp/a&lt;b&gt;&amp;&quot;c&quot;/p&lt;ar&gt;"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;main&gt;.c"));
    for raw in ["<double>", "<b>", "<main>", "<ar>"] {
        assert!(!html.contains(raw), "{raw} unescaped in {html}");
    }
    // A table per nest, a row per level.
    assert_eq!(html.matches("<table class=\"data\">").count(), 2);
    assert_eq!(html.matches("<tr><td style=").count(), 5);
    assert!(html.contains("selected by <code>#pragma kage profile</code>"));
}

#[test]
fn perfetto_is_not_a_loops_view() {
    assert_eq!(
        render::perfetto(&fixture()).unwrap_err(),
        ViewError::NotForTool {
            view: View::Perfetto,
            tool: "loops".into()
        }
    );
}
