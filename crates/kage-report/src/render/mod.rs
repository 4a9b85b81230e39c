//! Views of a report for people ([`text`], [`summary`], and for working-set reports [`html`])
//! and for programs ([`json`], and for working-set reports [`perfetto`]).
//!
//! Renderers return a `String` instead of writing to a stream, so the caller decides what a
//! write error means (for `kage report`, a closed pipe is not an error) and tests can compare
//! the output with snapshots. The views that exist only for the working-set tool return a
//! [`ViewError`] for other reports.

#[cfg(feature = "html")]
mod html;
mod perfetto;
mod table;
mod text;
mod working_set;

#[cfg(feature = "html")]
pub use html::html;
pub use perfetto::perfetto;
pub use text::{summary, text, MAX_CHART_ROWS};
pub use working_set::{display_rows, DisplayRow, ViewError};

use crate::model::{ProgramEnd, Region, RegionKind, Report};

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

/// How the program ended, in words: "exited with status 0", "killed by signal 11 (SIGSEGV)".
pub fn describe_end(end: &ProgramEnd) -> String {
    match *end {
        ProgramEnd::Exit { code } => format!("exited with status {code}"),
        ProgramEnd::Signal { signal } => match signal_name(signal) {
            Some(name) => format!("killed by signal {signal} ({name})"),
            None => format!("killed by signal {signal}"),
        },
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

/// Shortens source file names for display: the directory every file of the report shares is
/// dropped (with a single file, only its base name is left), and a name that is still long
/// keeps only its base name.
pub(crate) struct FileNames {
    common_dir: String,
}

/// File names longer than this (after dropping the common directory) are cut to their base name.
const LONG_FILE_NAME: usize = 40;

impl FileNames {
    pub(crate) fn for_report(report: &Report) -> FileNames {
        let mut files = report
            .regions
            .iter()
            .map(|r| r.file.as_str())
            .filter(|f| !f.is_empty());
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
        let short = file.strip_prefix(self.common_dir.as_str()).unwrap_or(file);
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
