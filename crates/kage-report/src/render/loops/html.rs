//! A loops report as one self-contained HTML page: the sampling rule, then per nest its
//! entries and a table of its levels indented by depth, then the run's facts. No scripts, no
//! external resources.

use super::{
    entries_label, facts, file_names, level_cells, level_label, loops_of, nest_label,
    COLUMNS_EXPLAINED, LEVEL_COLUMNS, NO_NESTS,
};
use crate::model::Report;
use crate::render::html::{escape, page_start, run_facts, PageStart};
use crate::render::ViewError;
use std::fmt::Write;

const LOOPS_STYLE: &str = "p.note { color: #555; max-width: 60em; }
";

/// The loops report as an HTML page. Every text that comes from the report (program,
/// arguments, function and file names) is escaped.
pub(crate) fn html(report: &Report) -> Result<String, ViewError> {
    let loops = loops_of(report)?;
    let mut out = page_start(
        report,
        &PageStart {
            title: "Loop nests of",
            heading: "Loop nests of",
            style: LOOPS_STYLE,
            incomplete: "iterations of nests open at that moment may be missing",
        },
    );
    out.push_str(
        "<p>Each loop nest selected at build time ran in two versions: the program's own code \
         and an instrumented copy, chosen at the start of each chunk of iterations. The \
         first entries of each nest were sampled: in them, the first iterations of each loop \
         ran in the instrumented version.</p>\n",
    );
    if loops.nests.is_empty() {
        let _ = writeln!(out, "<p>{}.</p>", escape(&capitalised(NO_NESTS)));
    } else {
        let explained = capitalised(&COLUMNS_EXPLAINED.join("; "));
        let _ = writeln!(out, "<p class=\"note\">{}.</p>", escape(&explained));
    }
    let files = file_names(&loops);
    for nest in &loops.nests {
        let _ = writeln!(
            out,
            "<h2>{}</h2>\n<p>{}; selected by <code>{}</code>.</p>",
            escape(&nest_label(&files, nest)),
            escape(&entries_label(nest)),
            escape(nest.selected_by.describe()),
        );
        out.push_str("<table class=\"data\">\n<tr><th>level</th>");
        for column in LEVEL_COLUMNS {
            let _ = write!(out, "<th>{column}</th>");
        }
        out.push_str("</tr>\n");
        for level in &nest.levels {
            let _ = write!(
                out,
                "<tr><td style=\"padding-left: {:.1}em\">{}</td>",
                0.7 + 1.5 * level.depth as f64,
                escape(level_label(level).trim_start()),
            );
            for (k, cell) in level_cells(level).iter().enumerate() {
                // The lines are text, the counts numbers.
                let class = if k == 0 { "" } else { " class=\"n\"" };
                let _ = write!(out, "<td{class}>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
    }
    run_facts(report, facts(&loops), &mut out);
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

/// `text` with its first letter upper-case, as a sentence starts.
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
