//! `kage report FILE`: show a report as text (a region tree, or for the working-set tool a
//! chart of its snapshots), as JSON, working-set reports as an HTML page with a plot or as a
//! trace for Perfetto, footprint reports as an HTML page with an icicle view, and hcpa
//! reports as an HTML page with the parallelism plan and the region tree coloured by
//! self-parallelism. An hcpa report is planned again when asked for other options, or when it
//! has no plan.

use crate::exit_code;
use kage_report::render::{self, ViewError};
use kage_report::{read_report, HcpaError, PlanOptions, ReadError, Report, HCPA_TOOL};
use std::io::{self, Write};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReportFormat {
    /// For people: the region tree, or the working-set chart.
    #[default]
    Text,
    /// The report re-serialised, pretty-printed.
    Json,
    /// Working-set reports: a self-contained HTML page with a plot; footprint reports: one
    /// with an icicle view of the region tree; hcpa reports: one with the plan and the
    /// region tree coloured by self-parallelism; loops reports: one with each selected nest's
    /// levels.
    Html,
    /// Working-set reports: a Chrome JSON trace for ui.perfetto.dev or chrome://tracing.
    Perfetto,
}

/// Which regions a view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionsView {
    /// As the source wrote them: the compiler's copies of a region (inlined calls, split
    /// and versioned loops) joined into one ([`Report::by_source`]).
    Source,
    /// As the report holds them: every copy apart.
    Static,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReportOptions {
    pub file: PathBuf,
    pub format: ReportFormat,
    /// `None`: source regions for the views for people, the report as written for JSON.
    pub regions: Option<RegionsView>,
    /// Write to this file instead of the output stream.
    pub output: Option<PathBuf>,
    /// For hcpa reports: the planner's options to change.
    pub plan: PlanChoice,
}

/// The planner's options `kage report` was given (`--cores`, `--min-coverage`, `--min-sp`);
/// `None` for those it was not. Any given one plans the report again, the others as the
/// report's plan had them (the defaults, for this machine's cores, when it has none).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PlanChoice {
    pub cores: Option<u64>,
    /// A fraction of the program's work, 0..1.
    pub min_coverage: Option<f64>,
    pub min_sp: Option<f64>,
}

impl PlanChoice {
    /// Whether any option was given.
    pub fn any(&self) -> bool {
        self.cores.is_some() || self.min_coverage.is_some() || self.min_sp.is_some()
    }

    /// The options to plan with: the given ones over `recorded` (else the defaults for this
    /// machine).
    pub fn over(&self, recorded: Option<PlanOptions>) -> PlanOptions {
        let base = recorded.unwrap_or_else(PlanOptions::for_this_machine);
        PlanOptions {
            cores: self.cores.unwrap_or(base.cores),
            min_coverage: self.min_coverage.unwrap_or(base.min_coverage),
            min_sp: self.min_sp.unwrap_or(base.min_sp),
        }
    }
}

/// Plans an hcpa report again when `choice` gives any option or when it has no plan (or one
/// that cannot be read), and puts the plan in it. Returns whether it planned. Other reports
/// are left alone.
pub fn plan_hcpa_report(report: &mut Report, choice: &PlanChoice) -> Result<bool, HcpaError> {
    if report.tool != HCPA_TOOL {
        return Ok(false);
    }
    let recorded = report.hcpa_plan().ok().flatten();
    if recorded.is_some() && !choice.any() {
        return Ok(false);
    }
    let options = choice.over(recorded.map(|plan| plan.options));
    report.replan(&options)?;
    Ok(true)
}

fn render(report: &Report, format: ReportFormat) -> Result<String, ViewError> {
    match format {
        ReportFormat::Text => Ok(render::text(report)),
        ReportFormat::Json => Ok(render::json(report)),
        ReportFormat::Html => render::html(report),
        ReportFormat::Perfetto => render::perfetto(report),
    }
}

/// What to do about a view that cannot be made, beyond what the error already says.
fn view_hint(error: &ViewError) -> Option<&'static str> {
    match error {
        ViewError::NotForTool { .. } => Some("--format text or --format json show any report"),
        ViewError::Malformed { .. } => {
            Some("the report was written by a different kage; --format json shows it as it is")
        }
        ViewError::Plot(_) => None,
    }
}

/// Where to open a written file.
fn open_hint(format: ReportFormat) -> Option<&'static str> {
    match format {
        ReportFormat::Html => Some("open it in a web browser"),
        ReportFormat::Perfetto => Some("open it at https://ui.perfetto.dev or in chrome://tracing"),
        ReportFormat::Text | ReportFormat::Json => None,
    }
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

/// Reads the report and writes it to `out`, or to the `output` file; messages go to `err`.
/// Returns the exit code: 0, also when `out` is a pipe its reader closed early
/// (`kage report f | head`), 2 when the report cannot be read or has no such view (html is
/// for working-set, footprint, hcpa and loops reports, perfetto for working-set reports), 1
/// when the output cannot be written. Planner options for a report that is not from hcpa are
/// ignored, with a warning.
pub fn report(options: &ReportOptions, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let mut report = match read_report(&options.file) {
        Ok(report) => report,
        Err(error) => {
            let _ = writeln!(err, "kage report: {error}");
            if let Some(hint) = hint(&error) {
                let _ = writeln!(err, "kage report: {hint}");
            }
            return exit_code::BAD_INPUT;
        }
    };
    if options.plan.any() && report.tool != HCPA_TOOL {
        let _ = writeln!(
            err,
            "kage report: warning: --cores, --min-coverage and --min-sp are for hcpa reports; \
             this report is from `{}`",
            report.tool
        );
    }
    if let Err(error) = plan_hcpa_report(&mut report, &options.plan) {
        // The views say what is wrong with the fields; JSON shows the report as it is.
        if options.plan.any() || options.format == ReportFormat::Json {
            let _ = writeln!(err, "kage report: cannot plan: {error}");
        }
    }
    let default_view = match options.format {
        ReportFormat::Json => RegionsView::Static,
        _ => RegionsView::Source,
    };
    let report = match options.regions.unwrap_or(default_view) {
        RegionsView::Source => report.by_source(),
        RegionsView::Static => report,
    };
    let rendered = match render(&report, options.format) {
        Ok(rendered) => rendered,
        Err(error) => {
            let _ = writeln!(err, "kage report: {}: {error}", options.file.display());
            if let Some(hint) = view_hint(&error) {
                let _ = writeln!(err, "kage report: {hint}");
            }
            return exit_code::BAD_INPUT;
        }
    };
    if let Some(path) = &options.output {
        return match std::fs::write(path, rendered) {
            Ok(()) => {
                if let Some(hint) = open_hint(options.format) {
                    let _ = writeln!(err, "kage report: wrote {}: {hint}", path.display());
                }
                0
            }
            Err(error) => {
                let _ = writeln!(err, "kage report: cannot write {}: {error}", path.display());
                exit_code::OUTPUT_ERROR
            }
        };
    }
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
                regions: None,
                output: None,
                plan: PlanChoice::default(),
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

    const WORKING_SET: &str = include_str!("../../kage-report/tests/fixtures/working_set.json");

    #[test]
    fn working_set_formats() {
        let (dir, mut options) = options_for(WORKING_SET);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(report(&options, &mut out, &mut err), 0);
        assert!(String::from_utf8(out).unwrap().contains("fits in cache"));
        options.format = ReportFormat::Perfetto;
        let mut out = Vec::new();
        assert_eq!(report(&options, &mut out, &mut err), 0);
        let trace: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(trace["traceEvents"].is_array());
        assert!(err.is_empty());

        options.format = ReportFormat::Html;
        options.output = Some(dir.path().join("ws.html"));
        let mut out = Vec::new();
        assert_eq!(report(&options, &mut out, &mut err), 0);
        assert!(out.is_empty());
        let html = std::fs::read_to_string(dir.path().join("ws.html")).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(String::from_utf8(err)
            .unwrap()
            .contains("open it in a web browser"));

        options.output = Some(dir.path().join("no/such/dir/ws.html"));
        let mut err = Vec::new();
        assert_eq!(report(&options, &mut Vec::new(), &mut err), 1);
        assert!(String::from_utf8(err).unwrap().contains("cannot write"));
    }

    const FOOTPRINT: &str = include_str!("../../kage-report/tests/fixtures/footprint.json");

    #[test]
    fn footprint_formats() {
        let (dir, mut options) = options_for(FOOTPRINT);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(report(&options, &mut out, &mut err), 0);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("total footprint"), "{text}");
        assert!(text.contains("function main"), "{text}");

        options.format = ReportFormat::Html;
        options.output = Some(dir.path().join("fp.html"));
        assert_eq!(report(&options, &mut Vec::new(), &mut err), 0);
        let html = std::fs::read_to_string(dir.path().join("fp.html")).unwrap();
        assert!(html.contains("<svg class=\"icicle\""), "{html}");
        assert!(String::from_utf8(err)
            .unwrap()
            .contains("open it in a web browser"));

        options.format = ReportFormat::Perfetto;
        options.output = Some(dir.path().join("fp.trace"));
        let mut err = Vec::new();
        assert_eq!(report(&options, &mut Vec::new(), &mut err), 2);
        let err = String::from_utf8(err).unwrap();
        assert!(
            err.contains(
                "the perfetto view exists for the working-set tool; \
                 this report is from `footprint`"
            ),
            "{err}"
        );
        assert!(err.contains("--format text or --format json"), "{err}");
        assert!(!dir.path().join("fp.trace").exists());
    }

    const HCPA: &str = include_str!("../../kage-report/tests/fixtures/hcpa.json");

    fn run(options: &ReportOptions) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = report(options, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn hcpa_formats() {
        let (dir, mut options) = options_for(HCPA);
        let (code, text, err) = run(&options);
        assert_eq!(code, 0, "{err}");
        assert!(err.is_empty(), "{err}");
        // The plan as recorded, on source regions: the split loop once.
        assert!(text.contains("plan for 8 cores"), "{text}");
        assert_eq!(text.matches("main.c:19-20").count(), 2, "{text}");

        options.regions = Some(RegionsView::Static);
        let (_, text, _) = run(&options);
        assert_eq!(text.matches("main.c:19-20").count(), 5, "{text}");

        options.regions = None;
        options.format = ReportFormat::Html;
        options.output = Some(dir.path().join("hcpa.html"));
        let (code, _, err) = run(&options);
        assert_eq!(code, 0, "{err}");
        let html = std::fs::read_to_string(dir.path().join("hcpa.html")).unwrap();
        assert!(html.contains("<h2>Plan for 8 cores</h2>"), "{html}");
        assert!(err.contains("open it in a web browser"));

        // JSON: the report as written, static ids in the plan (fib is 13).
        options.format = ReportFormat::Json;
        options.output = None;
        let (code, json, _) = run(&options);
        assert_eq!(code, 0);
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(json["regions"].as_array().unwrap().len(), 17);
        assert_eq!(json["plan"][2]["region"], 13);
    }

    #[test]
    fn hcpa_reports_are_planned_again_for_the_options_given() {
        let (_dir, mut options) = options_for(HCPA);
        options.plan.cores = Some(2);
        let (code, text, err) = run(&options);
        assert_eq!(code, 0, "{err}");
        assert!(text.contains("plan for 2 cores"), "{text}");
        options.format = ReportFormat::Json;
        let (_, json, _) = run(&options);
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            json["plan_options"],
            serde_json::json!({"cores": 2, "min_coverage": 0.01, "min_sp": 1.5})
        );
        // On 2 cores fib (13) saves more than scale's loop (6).
        let regions: Vec<u64> = (json["plan"].as_array().unwrap().iter())
            .map(|row| row["region"].as_u64().unwrap())
            .collect();
        assert_eq!(regions, [1, 13, 6]);
        // Thresholds over the recorded cores.
        options.plan = PlanChoice {
            min_coverage: Some(0.05),
            min_sp: Some(3.0),
            ..PlanChoice::default()
        };
        let (_, json, _) = run(&options);
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(json["plan_options"]["cores"], 8);
        assert_eq!(json["plan"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn an_hcpa_report_without_a_plan_gets_one_when_read() {
        let mut json: serde_json::Value = serde_json::from_str(HCPA).unwrap();
        let object = json.as_object_mut().unwrap();
        object.remove("plan");
        object.remove("plan_options");
        let (_dir, mut options) = options_for(&json.to_string());
        options.format = ReportFormat::Json;
        let (code, out, err) = run(&options);
        assert_eq!(code, 0, "{err}");
        let out: serde_json::Value = serde_json::from_str(&out).unwrap();
        let cores = kage_report::this_machines_cores();
        assert_eq!(out["plan_options"]["cores"], cores);
        assert!(out["plan"].is_array());
    }

    #[test]
    fn planner_options_for_other_tools_are_ignored_with_a_warning() {
        let (_dir, mut options) = options_for(MINIMAL);
        options.plan.cores = Some(4);
        let (code, text, err) = run(&options);
        assert_eq!(code, 0);
        assert!(text.contains("(totals)"));
        assert!(
            err.contains("--cores, --min-coverage and --min-sp are for hcpa reports; this report is from `count`"),
            "{err}"
        );
    }

    #[test]
    fn plan_choices_fill_in_from_the_recorded_plan() {
        let recorded = PlanOptions {
            cores: 16,
            min_coverage: 0.02,
            min_sp: 2.0,
        };
        let choice = PlanChoice {
            cores: Some(4),
            ..PlanChoice::default()
        };
        assert!(choice.any() && !PlanChoice::default().any());
        assert_eq!(
            choice.over(Some(recorded)),
            PlanOptions {
                cores: 4,
                ..recorded
            }
        );
        let fresh = PlanChoice::default().over(None);
        assert_eq!(fresh, PlanOptions::for_this_machine());
    }

    #[test]
    fn html_and_perfetto_are_for_working_set_reports() {
        let (dir, mut options) = options_for(MINIMAL);
        for format in [ReportFormat::Html, ReportFormat::Perfetto] {
            options.format = format;
            options.output = Some(dir.path().join("out"));
            let (mut out, mut err) = (Vec::new(), Vec::new());
            assert_eq!(report(&options, &mut out, &mut err), 2);
            let err = String::from_utf8(err).unwrap();
            assert!(err.contains("this report is from `count`"), "{err}");
            assert!(out.is_empty());
            assert!(
                !dir.path().join("out").exists(),
                "no file for a view that failed"
            );
        }
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
