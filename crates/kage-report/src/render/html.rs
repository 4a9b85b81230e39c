//! What every HTML page shares, whichever tool's report it shows: the style, the program's
//! name for titles, and the escaping of every text that comes from the report.

use crate::model::Report;

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
