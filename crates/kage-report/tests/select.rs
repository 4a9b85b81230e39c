//! The select model and views on a hand-written report (`fixtures/select.json`): a gemm nest
//! in three versions whose race dropped the dot products and chose the tiles of 64 at its
//! 74th iteration, and a nest whose three short entries took turns without a decision yet
//! (and whose versions began at different values).

use kage_report::render::{self};
use kage_report::{read_report, Report, VersionDecision};
use std::path::Path;

fn fixture() -> Report {
    read_report(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/select.json"))
        .expect("the fixture is a valid report")
}

#[test]
fn the_typed_view_reads_every_documented_field() {
    let selection = fixture()
        .select()
        .expect("the select fields are as documented");
    assert_eq!(
        (selection.version.as_str(), selection.min_chunk_us),
        ("auto", 100)
    );
    let gemm = &selection.nests[0];
    assert_eq!(
        (gemm.function.as_str(), gemm.line, gemm.entries),
        ("gemm", 15, 1)
    );
    assert_eq!(gemm.versions[2].name, "tiled64");
    assert_eq!(gemm.versions[2].step, 64);
    assert_eq!(gemm.versions[1].ns_per_iteration, Some(9.3e6));
    assert_eq!(
        gemm.decisions,
        [VersionDecision {
            min_iterations: 1024,
            max_iterations: 2047,
            version: 2,
            entry: 0,
            iteration: 74,
            at_seconds: 0.105,
            into_entry_seconds: 0.062,
            abandoned: vec![1],
            how: "race".into(),
        }]
    );
    assert!(selection.nests[1].start_mismatch.is_some());
}

#[test]
fn a_field_that_is_not_documented_is_an_error_that_names_it() {
    let mut json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/select.json"))
            .unwrap(),
    )
    .unwrap();
    json["select"]["nests"][0]["versions"][0]["chunks"] = serde_json::json!("three");
    let report: kage_report::Report = serde_json::from_value(json.clone()).unwrap();
    let error = report.select().unwrap_err();
    assert!(
        error.contains("\"select\"") && error.contains("invalid type"),
        "{error}"
    );
    // The reader refuses it with the same words.
    let refused = kage_report::parse_report(Path::new("edited.json"), json.to_string().as_bytes())
        .unwrap_err();
    assert!(refused.to_string().contains(&error), "{refused}");
}

#[test]
fn select_as_text() {
    insta::assert_snapshot!(render::text(&fixture()));
}

#[test]
fn select_summary() {
    insta::assert_snapshot!(render::summary(&fixture(), "kage.gemm.4242.json", 10));
}
