//! Views of a report for people ([`text`], [`summary`], and for working-set, footprint,
//! hcpa and loops reports [`html`]) and for programs ([`json`], and for working-set reports
//! [`perfetto`]).
//!
//! Renderers return a `String` instead of writing to a stream, so the caller decides what a
//! write error means (for `kage report`, a closed pipe is not an error) and tests can compare
//! the output with snapshots. The views that exist only for some tools return a
//! [`ViewError`] for other reports.
//!
//! The generic parts are `text.rs` (the region tree any report has, and the summary's common
//! lines), `tree.rs`, `table.rs`, `html.rs` (what every page shares) and this module (what
//! every view shares: header facts, file names, size and share labels). Each tool's own views
//! are in its module (`count.rs`, `working_set/`, `footprint/`, `hcpa/`, `loops/`,
//! `nests.rs`, `select.rs`), and the
//! tables below, one per view, are the only place that names them: a new tool adds a line to
//! each table it has a view for.

mod count;
mod footprint;
mod hcpa;
#[cfg(feature = "html")]
mod html;
mod loops;
mod nests;
mod select;
mod table;
mod text;
mod tree;
mod working_set;

pub use footprint::{icicle, IcicleCell};
pub use text::{summary, text};
pub use working_set::{display_rows, DisplayRow, MAX_CHART_ROWS};

use crate::model::{
    ProgramEnd, Region, RegionKind, Report, UnclosedThreads, COUNT_TOOL, DEPENDENCES_TOOL,
    FOOTPRINT_TOOL, HCPA_TOOL, INTERPOLATE_TOOL, LOOPS_TOOL, SELECT_TOOL, WORKING_SET_TOOL,
};
use std::fmt;

/// A tool's text view of its report ([`text`]), or why its fields do not match the schema
/// (the report is then shown as the generic region tree, with a warning).
type TextView = fn(&Report) -> Result<String, String>;
/// A tool's lines of [`summary`] after the common ones (`report_path`, `top`), or why its
/// fields do not match the schema (the summary then says so and where the whole report is).
type SummaryView = fn(&Report, &str, usize) -> Result<String, String>;
/// A view that exists only for some tools ([`html`], [`perfetto`]), of one tool's report.
type ToolView = fn(&Report) -> Result<String, ViewError>;

/// The tools with a text view of their own; any other tool's report is the generic tree.
const TEXT: &[(&str, TextView)] = &[
    (COUNT_TOOL, count::text),
    (WORKING_SET_TOOL, working_set::text),
    (FOOTPRINT_TOOL, footprint::text),
    (HCPA_TOOL, hcpa::text),
    (LOOPS_TOOL, loops::text),
    (INTERPOLATE_TOOL, nests::text),
    (DEPENDENCES_TOOL, nests::text),
    (SELECT_TOOL, select::text),
];

/// The tools whose summary says more than where the report is.
const SUMMARY: &[(&str, SummaryView)] = &[
    (COUNT_TOOL, count::summary),
    (WORKING_SET_TOOL, working_set::summary),
    (FOOTPRINT_TOOL, footprint::summary),
    (HCPA_TOOL, hcpa::summary),
    (LOOPS_TOOL, loops::summary),
    (INTERPOLATE_TOOL, nests::summary),
    (DEPENDENCES_TOOL, nests::summary),
    (SELECT_TOOL, select::summary),
];

/// The tools with an HTML view, in the order messages name them.
#[cfg(feature = "html")]
const HTML: &[(&str, ToolView)] = &[
    (WORKING_SET_TOOL, working_set::html),
    (FOOTPRINT_TOOL, footprint::html),
    (HCPA_TOOL, hcpa::html),
    (LOOPS_TOOL, loops::html),
];

/// The tools with a Perfetto view, in the order messages name them.
const PERFETTO: &[(&str, ToolView)] = &[(WORKING_SET_TOOL, working_set::perfetto)];

/// The function a view table has for this tool, if any.
fn tool_view<V: Copy>(table: &[(&str, V)], tool: &str) -> Option<V> {
    table
        .iter()
        .find(|(name, _)| *name == tool)
        .map(|&(_, view)| view)
}

/// A view that exists only for some tools: the function in `table` for the report's tool, or
/// [`ViewError::NotForTool`].
fn tool_only(view: View, table: &[(&str, ToolView)], report: &Report) -> Result<String, ViewError> {
    match tool_view(table, &report.tool) {
        Some(render) => render(report),
        None => Err(ViewError::NotForTool {
            view,
            tool: report.tool.clone(),
        }),
    }
}

/// The report as one self-contained HTML page: for the working-set tool a plot of the
/// snapshots, for the footprint tool an icicle view of the region tree, for the hcpa tool
/// the parallelism plan and the region tree coloured by self-parallelism, for the loops tool
/// a table of each selected nest's levels; a [`ViewError`] for other tools.
#[cfg(feature = "html")]
pub fn html(report: &Report) -> Result<String, ViewError> {
    tool_only(View::Html, HTML, report)
}

/// The report as a Chrome JSON trace, which ui.perfetto.dev and chrome://tracing open: for the
/// working-set tool a counter track of the lines of each snapshot and a slice per snapshot
/// named after its innermost region; a [`ViewError`] for other tools.
pub fn perfetto(report: &Report) -> Result<String, ViewError> {
    tool_only(View::Perfetto, PERFETTO, report)
}

/// The views that exist only for some tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Html,
    Perfetto,
}

impl View {
    pub fn as_str(self) -> &'static str {
        match self {
            View::Html => "html",
            View::Perfetto => "perfetto",
        }
    }

    /// The tools whose reports have this view: the names in its table, in order (without the
    /// `html` feature, no tool has the HTML view).
    pub fn tools(self) -> &'static [&'static str] {
        #[cfg(feature = "html")]
        const HTML_TOOLS: &[&str] = &names::<{ HTML.len() }>(HTML);
        #[cfg(not(feature = "html"))]
        const HTML_TOOLS: &[&str] = &[];
        const PERFETTO_TOOLS: &[&str] = &names::<{ PERFETTO.len() }>(PERFETTO);
        match self {
            View::Html => HTML_TOOLS,
            View::Perfetto => PERFETTO_TOOLS,
        }
    }
}

/// The tool names of a view table, in order, computed at compile time.
const fn names<const N: usize>(table: &[(&'static str, ToolView)]) -> [&'static str; N] {
    let mut names = [""; N];
    let mut i = 0;
    while i < N {
        names[i] = table[i].0;
        i += 1;
    }
    names
}

/// Why a view cannot be made of a report.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewError {
    /// The view does not exist for the report's tool (`tool`).
    NotForTool { view: View, tool: String },
    /// The report's tool-specific fields do not match the schema.
    Malformed { tool: &'static str, error: String },
    /// The plot could not be drawn.
    Plot(String),
}

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewError::NotForTool { view, tool } => {
                let tools = match view.tools() {
                    [one] => format!("the {one} tool"),
                    [first @ .., last] => format!("the {} and {last} tools", first.join(", ")),
                    [] => "no tool".to_string(),
                };
                write!(
                    f,
                    "the {} view exists for {tools}; this report is from `{tool}`",
                    view.as_str()
                )
            }
            ViewError::Malformed { tool, error } => write!(
                f,
                "the {tool} fields of this report do not match docs/report-schema.md: {error}"
            ),
            ViewError::Plot(e) => write!(f, "cannot draw the plot: {e}"),
        }
    }
}

impl std::error::Error for ViewError {}

/// The report as pretty-printed JSON, ending with a newline.
pub fn json(report: &Report) -> String {
    // Serialising a `Report` cannot fail: every map has string keys and every value is plain data.
    let mut out = serde_json::to_string_pretty(report).expect("a Report always serialises to JSON");
    out.push('\n');
    out
}

/// The facts every header starts with: program, args, pid, tool, end, threads.
pub(crate) fn common_facts(report: &Report) -> Vec<(String, String)> {
    let mut facts = vec![("program".to_string(), report.program.clone())];
    if !report.args.is_empty() {
        facts.push(("args".into(), report.args.join(" ")));
    }
    let pid = match report.forked_from {
        Some(parent) => format!("{} (forked from {parent})", report.pid),
        None => report.pid.to_string(),
    };
    facts.push(("pid".into(), pid));
    facts.push(("tool".into(), report.tool.clone()));
    facts.push(("end".into(), describe_end(&report.end)));
    facts.push(("threads".into(), report.threads.to_string()));
    facts
}

/// Why a report is incomplete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Incomplete {
    /// It was written from a fatal signal handler.
    FatalSignal,
    /// Threads still running at the end kept their regions open.
    Threads(UnclosedThreads),
    /// A signal handler left the runtime by `siglongjmp`, or (a report of an earlier
    /// version, which does not name them) threads kept their regions open.
    Unnamed,
}

impl Incomplete {
    /// Every cause of `report`'s incompleteness (none when it is complete).
    pub(crate) fn of(report: &Report) -> Vec<Incomplete> {
        if report.complete {
            return Vec::new();
        }
        let mut causes = Vec::new();
        if matches!(report.end, ProgramEnd::Signal { .. }) {
            causes.push(Incomplete::FatalSignal);
        }
        if let Some(unclosed) = report.unclosed_threads.filter(|u| u.total() > 0) {
            causes.push(Incomplete::Threads(unclosed));
        }
        if causes.is_empty() {
            causes.push(Incomplete::Unnamed);
        }
        causes
    }

    /// The cause in full, to follow "the report is incomplete: "; `missed` says what a
    /// report written from a fatal signal handler may miss, in the view's terms.
    pub(crate) fn explain(self, missed: &str) -> String {
        match self {
            Incomplete::FatalSignal => {
                format!("it was written from a fatal signal handler, so {missed}")
            }
            Incomplete::Threads(unclosed) => format!(
                "threads still running when the program ended kept their regions open ({}): \
                 what those regions did is missing",
                unclosed.describe()
            ),
            Incomplete::Unnamed => "a signal handler left the runtime by siglongjmp (after a \
                                    fault inside it), or threads still running when the \
                                    program ended kept their regions open"
                .into(),
        }
    }

    /// The cause in a few words, for a summary line.
    pub(crate) fn brief(self) -> String {
        match self {
            Incomplete::FatalSignal => "written from a fatal signal handler".into(),
            Incomplete::Threads(unclosed) => {
                format!("regions left open by {}", unclosed.describe())
            }
            Incomplete::Unnamed => {
                "a signal handler left the runtime by siglongjmp, or threads kept regions open"
                    .into()
            }
        }
    }
}

/// How the program ended, in words: "exited with status 0", "killed by signal 11 (SIGSEGV)".
pub fn describe_end(end: &ProgramEnd) -> String {
    match *end {
        ProgramEnd::Exit { code } => format!("exited with status {code}"),
        ProgramEnd::Signal { signal } => match signal_name(signal) {
            Some(name) => format!("killed by signal {signal} ({name})"),
            None => format!("killed by signal {signal}"),
        },
        ProgramEnd::QuickExit => "quick_exit() (status not known)".into(),
    }
}

/// The Linux name of a signal number (the same on x86_64 and aarch64).
pub fn signal_name(signal: i32) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(signal)
        .ok()
        .and_then(|s| s.checked_sub(1))
        .and_then(|i| NAMES.get(i))
        .copied()
}

/// Shortens source file names for display: the directory every file of the program's own
/// shares is dropped (with a single file, only its base name is left), and a name that is
/// still long keeps only its base name. The system's headers (`/usr/...`: the C library's
/// inline functions, the C++ library's templates, inlined into the program) are not the
/// program's: they keep their directory, and do not shorten the common one to `/`.
pub(crate) struct FileNames {
    common_dir: String,
}

/// File names longer than this (after dropping the common directory) are cut to their base name.
const LONG_FILE_NAME: usize = 40;

/// Whether `file` is one of the system's (a header under `/usr`).
fn is_system_file(file: &str) -> bool {
    file.starts_with("/usr/")
}

impl FileNames {
    pub(crate) fn for_report(report: &Report) -> FileNames {
        Self::for_files(report.regions.iter().map(|r| r.file.as_str()))
    }

    /// For a report's files other than its regions' (the loops tool's nests).
    pub(crate) fn for_files<'a>(files: impl IntoIterator<Item = &'a str>) -> FileNames {
        let files: Vec<&str> = files.into_iter().filter(|f| !f.is_empty()).collect();
        let own: Vec<&str> = files
            .iter()
            .copied()
            .filter(|f| !is_system_file(f))
            .collect();
        let mut files = if own.is_empty() { files } else { own }.into_iter();
        let Some(first) = files.next() else {
            return FileNames {
                common_dir: String::new(),
            };
        };
        // The common prefix ends just after a '/', so it is always a whole directory.
        let mut common = match first.rfind('/') {
            Some(slash) => &first[..=slash],
            None => "",
        };
        for file in files {
            while !file.starts_with(common) {
                common = match common[..common.len() - 1].rfind('/') {
                    Some(slash) => &common[..=slash],
                    None => "",
                };
            }
        }
        FileNames {
            common_dir: common.to_string(),
        }
    }

    pub(crate) fn show<'a>(&self, file: &'a str) -> &'a str {
        let short = if is_system_file(file) && !self.common_dir.starts_with("/usr/") {
            file
        } else {
            file.strip_prefix(self.common_dir.as_str()).unwrap_or(file)
        };
        if short.chars().count() > LONG_FILE_NAME {
            short.rsplit('/').next().unwrap_or(short)
        } else {
            short
        }
    }

    /// `file:line-end_line`, `file:line`, `file`, or `-` when nothing is known.
    pub(crate) fn location(&self, region: &Region) -> String {
        let file = if region.file.is_empty() {
            "?"
        } else {
            self.show(&region.file)
        };
        match (region.line, region.end_line) {
            (0, _) if region.file.is_empty() => "-".to_string(),
            (0, _) => file.to_string(),
            (line, end) if end <= line => format!("{file}:{line}"),
            (line, end) => format!("{file}:{line}-{end}"),
        }
    }
}

/// Demangled C++ names can run to hundreds of characters; tables keep the start of them.
const LONG_REGION_NAME: usize = 60;

pub(crate) fn short_name(name: &str) -> String {
    if name.chars().count() <= LONG_REGION_NAME {
        name.to_string()
    } else {
        let mut cut: String = name.chars().take(LONG_REGION_NAME - 3).collect();
        cut.push_str("...");
        cut
    }
}

/// A region's label where it stands alone (no tree around it): "main", "loop in main".
pub(crate) fn flat_label(region: &Region) -> String {
    let name = short_name(&region.name);
    match region.kind {
        RegionKind::Function => name,
        RegionKind::Loop => format!("loop in {name}"),
        RegionKind::LoopBody => format!("loop body in {name}"),
    }
}

/// A byte count for people: "640 B", "32 KiB", "1.5 MiB", "312 KiB".
pub(crate) fn bytes_label(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    scaled_bytes_label(bytes as f64)
}

/// An average byte count for people: "40.5 B", "16 B", "1.21 KiB".
pub(crate) fn average_bytes_label(bytes: f64) -> String {
    if bytes < 1024.0 {
        return format!("{} B", decimal_label(bytes));
    }
    scaled_bytes_label(bytes)
}

/// At least 1024 bytes in KiB, MiB, ...
fn scaled_bytes_label(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    // 1023.999 KiB shows as "1024 KiB", never as "1.02e3".
    format!("{} {}", three_digits(value), UNITS[unit])
}

/// About three significant digits, without trailing zeros: 1.5, 31.25 -> 31.2, 312.5 -> 312.
pub(crate) fn three_digits(value: f64) -> String {
    let decimals = if value < 10.0 {
        2
    } else if value < 100.0 {
        1
    } else {
        0
    };
    trim_zeros(format!("{value:.decimals$}"))
}

/// A number with at most one decimal, without a trailing ".0": 26.5, 3, 1.1.
pub(crate) fn decimal_label(value: f64) -> String {
    trim_zeros(format!("{value:.1}"))
}

fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A share as a percentage: "12.5%", "100%", "<0.1%". Never rounds a share below 1 up to
/// 100%, nor a share above 0 down to 0%.
pub(crate) fn percent_label(share: f64) -> String {
    let percent = share * 100.0;
    let mut s = format!("{percent:.1}");
    if s == "100.0" && share < 1.0 {
        s = "99.9".to_string();
    }
    if s == "0.0" && share > 0.0 {
        return "<0.1%".to_string();
    }
    format!("{}%", s.trim_end_matches(".0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_shares_read_well() {
        assert_eq!(bytes_label(640), "640 B");
        assert_eq!(bytes_label(32 * 1024), "32 KiB");
        assert_eq!(bytes_label(1536 * 1024), "1.5 MiB");
        assert_eq!(bytes_label(320_000), "312 KiB");
        assert_eq!(bytes_label(32 << 20), "32 MiB");
        assert_eq!(average_bytes_label(40.5), "40.5 B");
        assert_eq!(average_bytes_label(16.0), "16 B");
        assert_eq!(average_bytes_label(130.66), "130.7 B");
        assert_eq!(average_bytes_label(8024.0), "7.84 KiB");
        assert_eq!(average_bytes_label(1023.96), "1024 B");
        assert_eq!(decimal_label(26.5), "26.5");
        assert_eq!(decimal_label(3.0), "3");
        assert_eq!(decimal_label(1.04), "1");
        assert_eq!(percent_label(0.125), "12.5%");
        assert_eq!(percent_label(1.0), "100%");
        assert_eq!(percent_label(0.0), "0%");
        assert_eq!(percent_label(0.99999), "99.9%");
        assert_eq!(percent_label(0.0002), "<0.1%");
    }

    /// The program's files lose the directory they share; a system header inlined into the
    /// program (`atoi` from stdlib.h at -O2) keeps its own, and does not take the program's
    /// files back to the root.
    #[test]
    fn file_names_drop_the_programs_directory_and_keep_system_headers_whole() {
        let names = FileNames::for_files([
            "/work/app/src/main.c",
            "/work/app/src/util/hash.c",
            "/usr/include/stdlib.h",
        ]);
        assert_eq!(names.show("/work/app/src/main.c"), "main.c");
        assert_eq!(names.show("/work/app/src/util/hash.c"), "util/hash.c");
        assert_eq!(names.show("/usr/include/stdlib.h"), "/usr/include/stdlib.h");
        let long = "/usr/lib/gcc/x86_64-linux-gnu/12/../../../../include/c++/12/bits/stl_algo.h";
        assert_eq!(names.show(long), "stl_algo.h");
        // Only system files: they share /usr/include/.
        let names = FileNames::for_files(["/usr/include/stdlib.h", "/usr/include/string.h"]);
        assert_eq!(names.show("/usr/include/string.h"), "string.h");
        // Files of the program's in unrelated places share only the root.
        let names = FileNames::for_files(["/tmp/a.c", "/home/b.c", "/usr/include/stdio.h"]);
        assert_eq!(names.show("/tmp/a.c"), "tmp/a.c");
        assert_eq!(names.show("/usr/include/stdio.h"), "/usr/include/stdio.h");
    }
}
