//! Shared by the tests of the tools' typed views.

use kage_report::{parse_report, Report};
use serde_json::Value;
use std::path::Path;

/// The fixture at `path` with its JSON changed by `edit` first. An edit that breaks the
/// schema makes the reader refuse the report, with the message of the tool's typed view
/// (`view_error` gives it for the report made without the reader); the report is then that
/// one, for the test to look at the view's error itself.
pub fn edited(
    path: &Path,
    edit: impl FnOnce(&mut Value),
    view_error: impl FnOnce(&Report) -> String,
) -> Report {
    let mut json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut json);
    let unchecked: Report = serde_json::from_value(json.clone()).unwrap();
    match parse_report(Path::new("edited.json"), json.to_string().as_bytes()) {
        Ok(report) => report,
        Err(error) => {
            let view = view_error(&unchecked);
            assert!(error.to_string().contains(&view), "{error} / {view}");
            unchecked
        }
    }
}
