//! `kage report FILE`: show a report as a region tree or as JSON.

use crate::exit_code;
use kage_report::{read_report, render, ReadError};
use std::io::{self, Write};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReportFormat {
    /// The region tree for people.
    #[default]
    Text,
    /// The report re-serialised, pretty-printed.
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportOptions {
    pub file: PathBuf,
    pub format: ReportFormat,
}

/// What to do about a report that cannot be read, beyond what the error already says.
fn hint(error: &ReadError) -> Option<&'static str> {
    match error {
        ReadError::Missing(_) => Some(
            "reports are named kage.<program>.<pid>.json in the directory the program ran in; \
             `ls kage.*.json` lists the ones here",
        ),
        ReadError::Empty(_) => {
            Some("the program may have been killed before it wrote the report: run it again")
        }
        ReadError::NotJson(..) | ReadError::NotKage(_) => {
            Some("give the JSON file an instrumented program wrote (see `kage run --help`)")
        }
        ReadError::UnsupportedVersion(..) => {
            Some("read it with the kage that matches the program's runtime")
        }
        ReadError::Io(..) | ReadError::Truncated(_) | ReadError::Malformed(..) => None,
    }
}

/// Reads the report and writes it to `out`; messages go to `err`. Returns the exit code:
/// 0, also when `out` is a pipe its reader closed early (`kage report f | head`), 2 when the
/// report cannot be read, 1 when the output cannot be written.
pub fn report(options: &ReportOptions, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let report = match read_report(&options.file) {
        Ok(report) => report,
        Err(error) => {
            let _ = writeln!(err, "kage report: {error}");
            if let Some(hint) = hint(&error) {
                let _ = writeln!(err, "kage report: {hint}");
            }
            return exit_code::BAD_INPUT;
        }
    };
    let rendered = match options.format {
        ReportFormat::Text => render::text(&report),
        ReportFormat::Json => render::json(&report),
    };
    match out
        .write_all(rendered.as_bytes())
        .and_then(|()| out.flush())
    {
        Ok(()) => 0,
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(error) => {
            let _ = writeln!(err, "kage report: cannot write the report out: {error}");
            exit_code::OUTPUT_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader has gone away.
    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }

    const MINIMAL: &str = r#"{"format":"kage-report","version":1,"tool":"count","program":"/p","pid":5,
        "end":{"how":"exit","code":0},"complete":true,"threads":1,"options":{},"regions":[],
        "totals":{"loads":1,"stores":2,"bytes_read":3,"bytes_written":4}}"#;

    fn options_for(contents: &str) -> (tempfile::TempDir, ReportOptions) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.json");
        std::fs::write(&file, contents).unwrap();
        (
            dir,
            ReportOptions {
                file,
                format: ReportFormat::Text,
            },
        )
    }

    #[test]
    fn a_closed_pipe_is_not_an_error() {
        let (_dir, options) = options_for(MINIMAL);
        let mut err = Vec::new();
        assert_eq!(report(&options, &mut ClosedPipe, &mut err), 0);
        assert!(err.is_empty());
    }

    #[test]
    fn formats() {
        let (_dir, mut options) = options_for(MINIMAL);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(report(&options, &mut out, &mut err), 0);
        assert!(String::from_utf8(out).unwrap().contains("(totals)"));
        options.format = ReportFormat::Json;
        let mut out = Vec::new();
        assert_eq!(report(&options, &mut out, &mut err), 0);
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["totals"]["bytes_written"], 4);
    }

    #[test]
    fn unreadable_reports_exit_2_with_a_hint() {
        let (_dir, options) = options_for("");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(report(&options, &mut out, &mut err), 2);
        let err = String::from_utf8(err).unwrap();
        assert!(err.contains("the report is empty"), "{err}");
        assert!(err.contains("run it again"), "{err}");
        assert!(out.is_empty());
    }
}
