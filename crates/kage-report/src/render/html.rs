//! What every HTML page shares, whichever tool's report it shows: the style, the page's head
//! and first heading, and the escaping of every text that comes from the report.

use crate::model::Report;

/// How a tool's page begins.
pub(crate) struct PageStart<'a> {
    /// Before the program's name in the title: "Footprint of".
    pub title: &'a str,
    /// Before the program's path in the first heading: "Memory footprint of".
    pub heading: &'a str,
    /// The page's own style, after [`STYLE`].
    pub style: &'a str,
    /// What an incomplete report (written from a fatal signal handler) may miss: "footprints
    /// of regions open at that moment may be missing".
    pub incomplete: &'a str,
}

/// The page up to and including its first heading, and the warning when the report is
/// incomplete.
pub(crate) fn page_start(report: &Report, page: &PageStart) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{} {} (pid {})</title>\n<style>\n{STYLE}{}</style>\n</head>\n<body>\n\
         <h1>{} <code>{}</code></h1>\n",
        page.title,
        escape(program_name(report)),
        report.pid,
        page.style,
        page.heading,
        escape(&report.program),
    );
    for cause in super::Incomplete::of(report) {
        out.push_str(&format!(
            "<p class=\"warning\">The report is incomplete: {}.</p>\n",
            escape(&cause.explain(page.incomplete))
        ));
    }
    out
}

/// The executable's base name ("stencil" for "/home/ada/stencil/build/stencil").
pub(crate) fn program_name(report: &Report) -> &str {
    report
        .program
        .rsplit('/')
        .next()
        .filter(|name| !name.is_empty())
        .unwrap_or(&report.program)
}

/// The style every page shares.
pub(crate) const STYLE: &str =
    "body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
code { font-size: 0.95em; }
figure { margin: 1em 0; }
figure svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { padding: 0.2em 0.7em; text-align: left; vertical-align: top; }
table.facts th { font-weight: normal; color: #555; }
table.data th { border-bottom: 1px solid #999; }
table.data td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.data tr:nth-child(even) { background: #f4f4f4; }
tr.peak td { font-weight: bold; }
.warning { color: #a00; }
";

/// Escapes text for HTML element content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The "Run" section every page has: the report's common facts, then the tool's own.
pub(crate) fn run_facts(report: &Report, tool_facts: Vec<(String, String)>, out: &mut String) {
    use std::fmt::Write;
    out.push_str("<h2>Run</h2>\n<table class=\"facts\">\n");
    for (label, value) in crate::render::common_facts(report)
        .into_iter()
        .chain(tool_facts)
    {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(&label),
            escape(&value)
        );
    }
    out.push_str("</table>\n");
}
