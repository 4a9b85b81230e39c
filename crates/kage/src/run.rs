//! `kage run`: run an instrumented program with runtime options, then summarise its report.

use crate::exit_code;
use crate::report::{plan_hcpa_report, PlanChoice};
use kage_report::{read_report, render};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::SystemTime;

/// The environment variable the runtime reads its options from.
pub const OPTIONS_ENV_VAR: &str = "KAGE_OPTIONS";
/// Separates the options we add to [`OPTIONS_ENV_VAR`], sanitizer style (`tool=count:verbosity=1`).
const OPTION_SEPARATOR: char = ':';
/// Every character the runtime splits options at, so none may appear inside a value.
const OPTION_SEPARATORS: [char; 2] = [':', ','];
/// The runtime's default for `output=`: `%e` is the executable's name, `%p` the pid.
/// How many regions the summary lists.
const SUMMARY_REGIONS: usize = 5;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunOptions {
    /// `tool=`: the analysis to run.
    pub tool: Option<String>,
    /// Further runtime options, each `name=value`.
    pub options: Vec<String>,
    /// `output=`: where the report goes.
    pub output: Option<PathBuf>,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// The value for [`OPTIONS_ENV_VAR`]: the one already in the environment (`existing`) first,
/// then ours, so ours win where both set an option. `None` when there is nothing to add.
/// `output` should be absolute, so that a program that changes directory still writes there.
pub fn runtime_options(
    existing: Option<&OsStr>,
    tool: Option<&str>,
    options: &[String],
    output: Option<&Path>,
) -> Result<Option<OsString>, String> {
    let mut ours: Vec<String> = Vec::new();
    if let Some(tool) = tool {
        // The runtime's tools: each build tool that only its own tool reads (`count-calls`
        // is a build every tool reads, not a tool).
        let names: Vec<&str> = (kage_abi::BUILD_TOOLS.iter())
            .filter(|t| t.instrumentation.only_tool() == Some(t.name))
            .map(|t| t.name)
            .collect();
        if !names.contains(&tool) {
            let hint = if tool == "count-calls" {
                "count-calls is a build (KAGE_TOOL=count-calls) that every tool reads"
            } else {
                "write it like --tool count"
            };
            return Err(format!(
                "'{tool}' is not a tool: {hint} (the tools: {})",
                names.join(", ")
            ));
        }
        ours.push(format!("tool={tool}"));
    }
    for option in options {
        let well_formed = option.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
        if !well_formed {
            return Err(format!(
                "--option '{option}' is not name=value: write it like --option verbosity=1 \
                 (KAGE_OPTIONS=help=1 ./prog lists every option)"
            ));
        }
        if option.contains(OPTION_SEPARATORS) {
            return Err(format!(
                "--option '{option}' contains ':' or ',', which separate options in \
                 {OPTIONS_ENV_VAR}: give each option its own --option"
            ));
        }
        ours.push(option.clone());
    }
    if let Some(output) = output {
        let Some(text) = output.to_str().filter(|t| !t.contains(OPTION_SEPARATORS)) else {
            return Err(format!(
                "the report path '{}' must be UTF-8 without ':' or ',' (they separate options \
                 in {OPTIONS_ENV_VAR}): choose another path for -o",
                output.display()
            ));
        };
        ours.push(format!("output={text}"));
    }
    if ours.is_empty() {
        return Ok(None);
    }
    let mut value = OsString::new();
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        value.push(existing);
        value.push(OPTION_SEPARATOR.to_string());
    }
    value.push(ours.join(&OPTION_SEPARATOR.to_string()));
    Ok(Some(value))
}

/// Where the runtime will write the report of process `pid` running the executable named
/// `exe_name`: the last `output=` in the options, else the default, expanded as the runtime
/// expands it (`kage_report::expand_output`).
pub fn expected_report_path(options: Option<&OsStr>, exe_name: &str, pid: u32) -> PathBuf {
    let template = output_option(options);
    let template = template.as_deref().unwrap_or(kage_report::DEFAULT_OUTPUT);
    PathBuf::from(kage_report::expand_output(template, exe_name, pid, false))
}

/// The last non-empty `output=` in a [`OPTIONS_ENV_VAR`] value.
fn output_option(options: Option<&OsStr>) -> Option<String> {
    options.and_then(|o| {
        o.to_string_lossy()
            .split(OPTION_SEPARATORS)
            .filter_map(|option| option.trim().strip_prefix("output="))
            .rfind(|path| !path.is_empty())
            .map(str::to_string)
    })
}

/// The name the runtime gives `%e`: the base name of the executable with symlinks resolved
/// (it reads `/proc/self/exe`).
fn exe_name(program: &OsStr) -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    crate::cc::compiler::find_on_path(program, &path)
        .and_then(|found| found.canonicalize().ok())
        .as_deref()
        .and_then(Path::file_name)
        .or_else(|| Path::new(program).file_name())
        .unwrap_or(program)
        .to_string_lossy()
        .into_owned()
}

/// The shell's convention for a child's status: its exit code, or 128 + the signal that killed it.
pub fn exit_code_of(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        // Neither exited nor signalled: only possible for stopped children, which wait() does not report.
        (None, None) => 1,
    }
}

/// Modification times of report files before the run, to tell a fresh report from one an
/// earlier run left behind.
struct ReportFiles {
    before: HashMap<PathBuf, SystemTime>,
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn looks_like_report(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with("kage.") && name.ends_with(".json")
}

impl ReportFiles {
    /// Records every `kage.*.json` in `dir`, and `extra` (the report path the user chose).
    fn scan(dir: &Path, extra: Option<&Path>) -> ReportFiles {
        let mut before = HashMap::new();
        for path in reports_in(dir)
            .into_iter()
            .chain(extra.map(Path::to_path_buf))
        {
            if let Some(time) = modified(&path) {
                before.insert(path, time);
            }
        }
        ReportFiles { before }
    }

    fn is_fresh(&self, path: &Path) -> bool {
        match (modified(path), self.before.get(path)) {
            (Some(now), Some(then)) => now != *then,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

fn reports_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut reports: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| looks_like_report(&e.file_name()))
        .map(|e| dir.join(e.file_name()))
        .collect();
    reports.sort();
    reports
}

/// The child's pid, for the signal handler.
static CHILD_PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_to_child(signal: libc::c_int) {
    let pid = CHILD_PID.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, signal) };
    }
}

/// The signals sent to `kage run` alone (`timeout`, `kill`, a closed session) that would end
/// it: passed on to the program, which decides, while kage waits to report on it.
const FORWARDED_SIGNALS: [libc::c_int; 11] = [
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGPWR,
    libc::SIGIO,
];

/// [`FORWARDED_SIGNALS`] as a signal set.
fn forwarded_set() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid storage; sigemptyset and sigaddset initialise it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in FORWARDED_SIGNALS {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Before the program starts: [`FORWARDED_SIGNALS`] are held back (blocked) until its pid is
/// known, and will be passed on to it ([`shield_from_signals`]): a program that signals
/// `kage run` right away must not find it unprepared. The program itself starts with them
/// unblocked (the child inherits the mask: `command` unblocks them before `exec`) and with
/// default dispositions (`exec` resets handlers).
fn hold_forwarded_signals(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    let forward = forward_to_child as extern "C" fn(libc::c_int) as libc::sighandler_t;
    let set = forwarded_set();
    // SAFETY: blocking signals and installing a handler that only calls kill with an
    // atomic's value.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        for signal in FORWARDED_SIGNALS {
            libc::signal(signal, forward);
        }
    }
    // SAFETY: between fork and exec the closure only calls pthread_sigmask
    // (async-signal-safe) on a set made before the fork.
    unsafe {
        command.pre_exec(move || {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// While the program runs, `kage run` stays alive to report on it: SIGINT and SIGQUIT from the
/// terminal already reach the program (same process group), so kage ignores them, as
/// `system(3)` does (only now: the program must not inherit that); [`FORWARDED_SIGNALS`],
/// held back since before it started, are passed on to it from now on.
fn shield_from_signals(child: u32) {
    CHILD_PID.store(child as i32, Ordering::Relaxed);
    let set = forwarded_set();
    // SAFETY: installing dispositions and unblocking the signals held back.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Whether `program` (a path, or a name looked up in `PATH`) was linked by kage-cc: its
/// file holds the runtime's registration entry point. A file that cannot be read counts as
/// without.
fn has_runtime(program: &OsStr) -> bool {
    let path = Path::new(program);
    let file = if path.components().count() > 1 {
        Some(path.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|dirs| {
            std::env::split_paths(&dirs)
                .map(|dir| dir.join(path))
                .find(|candidate| candidate.is_file())
        })
    };
    let marker = kage_abi::symbols::REGISTER_MODULE.name().as_bytes();
    file.and_then(|f| std::fs::read(f).ok())
        .is_some_and(|bytes| bytes.windows(marker.len()).any(|w| w == marker))
}

/// A program not linked by kage-cc (a test driver, a shell, python) may load instrumented
/// libraries, or start programs that do: it gets the runtime as a shared object, preloaded
/// (the processes it starts inherit it; in those linked by kage-cc, it stands down).
fn preload_runtime(command: &mut Command) {
    let exe = std::env::current_exe().ok();
    let env = |name: &str| std::env::var_os(name);
    let Ok(runtime) = crate::cc::artifacts::locate(
        crate::cc::artifacts::Artifact::SharedRuntime,
        &env,
        exe.as_deref(),
    ) else {
        return;
    };
    let mut preload = runtime.into_os_string();
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    command.env("LD_PRELOAD", preload);
}

/// The file the runtime of every process the program starts appends its report's path to
/// (`report_log=`), removed when read.
struct ReportLog {
    path: PathBuf,
}

impl ReportLog {
    /// A fresh log in the temporary directory; `None` when its path cannot be an option value.
    fn new() -> Option<ReportLog> {
        let path = std::env::temp_dir().join(format!("kage-run.{}.reports", std::process::id()));
        let text = path.to_str()?;
        if text.contains(OPTION_SEPARATORS) {
            return None;
        }
        let _ = std::fs::remove_file(&path);
        Some(ReportLog { path })
    }

    fn option(&self) -> String {
        format!("report_log={}", self.path.display())
    }

    /// The reports written, in the order they were, each once.
    fn take(self) -> Vec<PathBuf> {
        let text = std::fs::read(&self.path).unwrap_or_default();
        let _ = std::fs::remove_file(&self.path);
        let mut reports: Vec<PathBuf> = Vec::new();
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let path = PathBuf::from(OsStr::from_bytes(line));
            if !reports.contains(&path) {
                reports.push(path);
            }
        }
        reports
    }
}

/// Runs the program and returns its exit status (128 + signal when a signal killed it), or
/// 127 when it cannot be started, or 2 for bad options. The summary goes to stderr.
pub fn run(options: &RunOptions) -> i32 {
    let Some(program) = options.command.first() else {
        eprintln!("kage run: no program given: write `kage run -- ./prog args...`");
        return exit_code::BAD_INPUT;
    };
    let output = options
        .output
        .as_ref()
        .map(|o| std::path::absolute(o).unwrap_or_else(|_| o.clone()));
    let existing = std::env::var_os(OPTIONS_ENV_VAR);
    let log = ReportLog::new();
    let mut extra_options = options.options.clone();
    extra_options.extend(log.as_ref().map(ReportLog::option));
    let runtime_options = match runtime_options(
        existing.as_deref(),
        options.tool.as_deref(),
        &extra_options,
        output.as_deref(),
    ) {
        Ok(value) => value,
        Err(message) => {
            eprintln!("kage run: {message}");
            return exit_code::BAD_INPUT;
        }
    };
    let options_in_force = runtime_options.clone().or(existing);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let exe = exe_name(program);
    // An output= without %p names the report before the pid is known.
    let chosen_output = output_option(options_in_force.as_deref())
        .filter(|o| !o.contains("%p"))
        .map(|_| cwd.join(expected_report_path(options_in_force.as_deref(), &exe, 0)));
    let reports_before = ReportFiles::scan(&cwd, chosen_output.as_deref());

    let mut command = Command::new(program);
    command.args(&options.command[1..]);
    if let Some(value) = &runtime_options {
        command.env(OPTIONS_ENV_VAR, value);
    }
    if !has_runtime(program) {
        preload_runtime(&mut command);
    }
    hold_forwarded_signals(&mut command);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "kage run: cannot start '{}': {error}: check the path (a program in the current \
                 directory needs ./) and that it is executable",
                Path::new(program).display()
            );
            return exit_code::CANNOT_RUN;
        }
    };
    let pid = child.id();
    shield_from_signals(pid);
    let status = match child.wait() {
        Ok(status) => status,
        Err(error) => {
            eprintln!(
                "kage run: lost track of '{}' (pid {pid}): {error}",
                Path::new(program).display()
            );
            return exit_code::CANNOT_RUN;
        }
    };
    let code = exit_code_of(status);
    let logged = log.map(ReportLog::take).unwrap_or_default();

    let mut report_path = expected_report_path(options_in_force.as_deref(), &exe, pid);
    if !reports_before.is_fresh(&cwd.join(&report_path)) {
        // The program may have become another executable under the same pid (a wrapper
        // script that execs it, as pyenv's `python3` does), whose name the runtime used.
        if let Some(found) =
            report_of_any_executable(options_in_force.as_deref(), pid, &cwd, &reports_before)
        {
            report_path = found;
        }
    }
    let absolute_report = cwd.join(&report_path);
    // Show the path as the user would type it: as given with -o, else relative to here.
    let shown = match &options.output {
        Some(given) if !given.to_string_lossy().contains('%') => given.display().to_string(),
        _ => report_path.display().to_string(),
    };
    // Reports of other processes (children, the tests a test driver ran), as logged, and
    // any fresh one here (a runtime from before report_log= existed).
    let mut others: Vec<PathBuf> = logged;
    others.extend(
        reports_in(&cwd)
            .into_iter()
            .filter(|p| reports_before.is_fresh(p)),
    );
    let mut seen = std::collections::HashSet::new();
    others.retain(|p| *p != absolute_report && seen.insert(p.clone()));
    if reports_before.is_fresh(&absolute_report) {
        list_other_reports(&others, &cwd, "too");
        match read_report(&absolute_report) {
            Ok(mut report) => {
                // An hcpa report without a plan gets one (the summary's malformed-fields
                // warning covers a failure).
                let _ = plan_hcpa_report(&mut report, &PlanChoice::default());
                eprint!(
                    "{}",
                    render::summary(&report.by_source(), &shown, SUMMARY_REGIONS)
                )
            }
            Err(error) => eprintln!("kage run: the report cannot be read: {error}"),
        }
        return code;
    }
    explain_missing_report(program, &shown, &absolute_report, status, &others);
    list_other_reports(&others, &cwd, "");
    code
}

/// The fresh report of process `pid` under the report path's template with any executable
/// name for `%e` (relative to `cwd`, where the template is), when exactly one matches.
fn report_of_any_executable(
    options: Option<&OsStr>,
    pid: u32,
    cwd: &Path,
    reports: &ReportFiles,
) -> Option<PathBuf> {
    const ANY: &str = "\u{0}";
    let template = expected_report_path(options, ANY, pid);
    let template = template.to_str()?;
    let (before, after) = template.split_once(ANY)?;
    if after.contains(ANY) || before.contains('/') || after.contains('/') {
        return None; // %e twice, or in a directory's name: not worth guessing
    }
    let mut found = reports_in(cwd).into_iter().filter(|path| {
        let name = path.file_name().and_then(OsStr::to_str).unwrap_or("");
        name.len() > before.len() + after.len()
            && name.starts_with(before)
            && name.ends_with(after)
            && reports.is_fresh(path)
    });
    let first = found.next()?;
    found
        .next()
        .is_none()
        .then(|| first.strip_prefix(cwd).unwrap_or(&first).to_path_buf())
}

/// How many other reports `kage run` names; the rest are counted.
const LISTED_REPORTS: usize = 20;

/// Names the reports other processes of the run wrote (relative to `cwd` where they are
/// under it), with `also` ("too") after "wrote reports" when the program's own was written.
fn list_other_reports(others: &[PathBuf], cwd: &Path, also: &str) {
    if others.is_empty() {
        return;
    }
    let shown: Vec<String> = others
        .iter()
        .take(LISTED_REPORTS)
        .map(|p| p.strip_prefix(cwd).unwrap_or(p).display().to_string())
        .collect();
    let more = match others.len().saturating_sub(LISTED_REPORTS) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let also = if also.is_empty() {
        String::new()
    } else {
        format!(" {also}")
    };
    eprintln!(
        "kage run: {} other process{} of the run wrote reports{also} (see them with `kage report FILE`): {}{more}",
        others.len(),
        if others.len() == 1 { "" } else { "es" },
        shown.join(" ")
    );
}

fn explain_missing_report(
    program: &OsStr,
    shown: &str,
    path: &Path,
    status: ExitStatus,
    others: &[PathBuf],
) {
    let program = Path::new(program).display();
    if path.exists() {
        eprintln!("kage run: no report was written: '{shown}' is left from an earlier run");
    } else if others.is_empty() {
        eprintln!("kage run: no report was written: was {program} built with kage-cc? (looked for {shown})");
    } else {
        eprintln!(
            "kage run: {program} wrote no report of its own (looked for {shown}): it was not \
             built with kage-cc, or it ended without a chance to write one"
        );
    }
    if status.signal() == Some(libc::SIGKILL) {
        eprintln!(
            "kage run: the program was killed by SIGKILL, which leaves no chance to write a report"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_from_the_environment_come_first_so_ours_win() {
        let value = runtime_options(
            Some(OsStr::new("verbosity=2:tool=x")),
            Some("count"),
            &opts(&["verbosity=1"]),
            Some(Path::new("/tmp/r.json")),
        );
        assert_eq!(
            value,
            Ok(Some(
                "verbosity=2:tool=x:tool=count:verbosity=1:output=/tmp/r.json".into()
            ))
        );
        assert_eq!(
            runtime_options(None, None, &opts(&["a=1", "b="]), None),
            Ok(Some("a=1:b=".into()))
        );
        // Nothing to add: the environment is left alone.
        assert_eq!(
            runtime_options(Some(OsStr::new("a=1")), None, &[], None),
            Ok(None)
        );
        assert_eq!(
            runtime_options(Some(OsStr::new("")), Some("count"), &[], None),
            Ok(Some("tool=count".into()))
        );
    }

    #[test]
    fn malformed_options_are_refused_with_advice() {
        for bad in ["verbosity", "=1", "a b=1", "a=1:b=2", "a=1,b=2"] {
            let error = runtime_options(None, None, &opts(&[bad]), None).unwrap_err();
            assert!(error.contains("--option"), "{bad}: {error}");
        }
        for bad in ["", "bogus", "count:verbosity=1"] {
            let error = runtime_options(None, Some(bad), &[], None).unwrap_err();
            assert!(error.contains("--tool count"), "{bad}: {error}");
            assert!(
                error.contains("(the tools: count, working-set, footprint"),
                "{bad}: {error}"
            );
        }
        let error = runtime_options(None, Some("count-calls"), &[], None).unwrap_err();
        assert!(error.contains("every tool reads"), "{error}");
        assert!(
            runtime_options(None, None, &[], Some(Path::new("/a:b.json")))
                .unwrap_err()
                .contains("-o")
        );
    }

    #[test]
    fn the_report_is_where_output_says_else_named_by_exe_and_pid() {
        assert_eq!(
            expected_report_path(None, "prog", 42),
            PathBuf::from("kage.prog.42.json")
        );
        assert_eq!(
            expected_report_path(
                Some(OsStr::new("output=/a.json:tool=count,output=/b.json")),
                "prog",
                1
            ),
            PathBuf::from("/b.json")
        );
        assert_eq!(
            expected_report_path(Some(OsStr::new("verbosity=1:output=")), "prog", 7),
            PathBuf::from("kage.prog.7.json")
        );
        assert_eq!(
            expected_report_path(Some(OsStr::new("output=out/%e-%p-100%%.json")), "prog", 7),
            PathBuf::from("out/prog-7-100%.json")
        );
    }

    #[test]
    fn exit_codes_follow_the_shell() {
        assert_eq!(exit_code_of(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code_of(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code_of(ExitStatus::from_raw(libc::SIGTERM)), 143);
        assert_eq!(exit_code_of(ExitStatus::from_raw(libc::SIGSEGV)), 139);
    }

    #[test]
    fn fresh_reports_are_told_from_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("kage.prog.1.json");
        std::fs::write(&old, "{}").unwrap();
        std::fs::write(dir.path().join("unrelated.json"), "{}").unwrap();
        let before = ReportFiles::scan(dir.path(), None);
        assert!(!before.is_fresh(&old));
        let new = dir.path().join("kage.prog.2.json");
        std::fs::write(&new, "{}").unwrap();
        assert!(before.is_fresh(&new));
        assert!(!before.is_fresh(&dir.path().join("kage.prog.3.json")));
        assert_eq!(reports_in(dir.path()), [old, new]);
    }
}
