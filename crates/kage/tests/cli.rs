//! The command-line programs as users run them: exit codes, messages, pass-through. These need
//! no clang, pass plugin or runtime: a script that prints its arguments stands in for the
//! compiler, empty files for the plugin and runtime, and `/bin/sh` for the program.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn kage() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kage"))
}

fn kage_cc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kage-cc"))
}

fn kage_cxx() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kage-cxx"))
}

/// Runs with none of Kage's variables inherited from the test's environment (those the test
/// set on `command` stay).
fn run(mut command: Command) -> Output {
    let set: Vec<_> = command
        .get_envs()
        .map(|(name, _)| name.to_owned())
        .collect();
    for var in [
        "KAGE_CC",
        "KAGE_CXX",
        "KAGE_PASS_PLUGIN",
        "KAGE_RUNTIME",
        "KAGE_OPTIONS",
        "KAGE_CC_VERBOSE",
    ] {
        if !set.iter().any(|name| name == var) {
            command.env_remove(var);
        }
    }
    command.output().expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the fake compiler prints for these arguments.
fn lines(args: &[&str]) -> String {
    args.iter().map(|a| format!("{a}\n")).collect()
}

/// Fails if a Rust panic reached the user.
#[track_caller]
fn assert_no_panic(out: &Output) {
    assert!(!stderr(out).contains("panicked"), "{}", stderr(out));
}

/// Stand-ins for the compiler (it prints its arguments, one per line), the pass plugin and
/// the runtime (the wrapper only needs them to exist).
struct FakeArtifacts {
    dir: tempfile::TempDir,
}

impl FakeArtifacts {
    fn new() -> FakeArtifacts {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libkage_pass.so"), "").unwrap();
        std::fs::write(dir.path().join("libkage_rt.o"), "").unwrap();
        let compiler = dir.path().join("print-args");
        std::fs::write(&compiler, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
        std::fs::set_permissions(&compiler, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeArtifacts { dir }
    }

    fn compiler(&self) -> PathBuf {
        self.dir.path().join("print-args")
    }

    fn plugin(&self) -> PathBuf {
        self.dir.path().join("libkage_pass.so")
    }

    fn runtime(&self) -> PathBuf {
        self.dir.path().join("libkage_rt.o")
    }

    fn apply(&self, command: &mut Command) {
        command
            .env("KAGE_PASS_PLUGIN", self.plugin())
            .env("KAGE_RUNTIME", self.runtime());
    }
}

// ---- compiler wrappers ----

#[test]
fn a_compiler_that_cannot_run_is_explained_with_exit_127() {
    let mut command = kage_cc();
    command.args(["-c", "x.c"]).env("KAGE_CC", "/nonexistent");
    let out = run(command);
    assert_eq!(out.status.code(), Some(127));
    let message = stderr(&out);
    assert!(
        message.starts_with("kage-cc: cannot run the C compiler '/nonexistent' ("),
        "{message}"
    );
    assert!(
        message
            .contains("install it with `apt-get install clang-22`, or point KAGE_CC at a clang 22"),
        "{message}"
    );
    assert_no_panic(&out);

    let mut command = kage_cxx();
    command
        .args(["-c", "x.cpp"])
        .env("KAGE_CXX", "/nonexistent/clang++");
    let out = run(command);
    assert_eq!(out.status.code(), Some(127));
    assert!(
        stderr(&out).starts_with("kage-c++: cannot run the C++ compiler '/nonexistent/clang++'"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("point KAGE_CXX at a clang 22"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_wrapper_adds_the_plugin_and_runtime_and_keeps_every_argument() {
    let fake = FakeArtifacts::new();
    let plugin = format!("-fpass-plugin={}", fake.plugin().display());
    let runtime = fake.runtime().display().to_string();

    let mut command = kage_cc();
    command
        .args(["-O2", "-DNAME=\"a b\"", "-c", "x.c", "-o", "x.o"])
        .env("KAGE_CC", fake.compiler());
    fake.apply(&mut command);
    let out = run(command);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        lines(&[
            "-O2",
            "-DNAME=\"a b\"",
            "-c",
            "x.c",
            "-o",
            "x.o",
            &plugin,
            "-gline-tables-only"
        ])
    );

    let mut command = kage_cc();
    command
        .args(["a.o", "b.o", "-o", "prog"])
        .env("KAGE_CC", fake.compiler());
    fake.apply(&mut command);
    let out = run(command);
    assert_eq!(
        stdout(&out),
        lines(&[
            "a.o",
            "b.o",
            "-o",
            "prog",
            &runtime,
            "-Wl,--export-dynamic-symbol=__kage_*,--export-dynamic-symbol=sigaction,\
             --export-dynamic-symbol=signal,--export-dynamic-symbol=bsd_signal,\
             --export-dynamic-symbol=sysv_signal",
            "-Wl,--push-state,--as-needed",
            "-lpthread",
            "-ldl",
            "-lm",
            "-lrt",
            "-lgcc_s",
            "-Wl,--pop-state",
            "-Wl,-z,pack-relative-relocs",
        ])
    );
}

#[test]
fn kage_cc_and_kage_cxx_pick_their_compiler_variable() {
    let fake = FakeArtifacts::new();
    // `kage c++` takes every argument raw, --help included.
    let mut command = kage();
    command
        .args(["c++", "--help", "-x", "c++", "-E", "-"])
        .env("KAGE_CXX", fake.compiler())
        .env("KAGE_CC", "/nonexistent");
    fake.apply(&mut command);
    let out = run(command);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), lines(&["--help", "-x", "c++", "-E", "-"]));

    let mut command = kage();
    command
        .args(["cc", "--version"])
        .env("KAGE_CC", fake.compiler())
        .env("KAGE_CXX", "/nonexistent");
    assert_eq!(stdout(&run(command)), lines(&["--version"]));

    let mut command = kage_cxx();
    command
        .args(["-dumpversion"])
        .env("KAGE_CXX", fake.compiler())
        .env("KAGE_CC", "/nonexistent");
    assert_eq!(stdout(&run(command)), lines(&["-dumpversion"]));
}

#[test]
fn the_compiler_status_passes_through() {
    let mut command = kage_cc();
    command.args(["--version"]).env("KAGE_CC", "/bin/false");
    assert_eq!(run(command).status.code(), Some(1));
}

#[test]
fn a_missing_plugin_says_how_to_build_it() {
    let fake = FakeArtifacts::new();
    let mut command = kage_cc();
    command
        .args(["-c", "x.c"])
        .env("KAGE_CC", fake.compiler())
        .env("KAGE_PASS_PLUGIN", "/nonexistent/libkage_pass.so");
    let out = run(command);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("KAGE_PASS_PLUGIN is set to '/nonexistent/libkage_pass.so'"),
        "{}",
        stderr(&out)
    );
    // A pass-through call does not need the plugin.
    let mut command = kage_cc();
    command
        .args(["-E", "x.c"])
        .env("KAGE_CC", fake.compiler())
        .env("KAGE_PASS_PLUGIN", "/nonexistent/libkage_pass.so");
    assert_eq!(stdout(&run(command)), lines(&["-E", "x.c"]));
}

#[test]
fn a_wrapper_pointed_at_itself_refuses() {
    let mut command = kage_cc();
    command
        .args(["-c", "x.c"])
        .env("KAGE_CC", env!("CARGO_BIN_EXE_kage-cc"));
    let out = run(command);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("would call itself forever"),
        "{}",
        stderr(&out)
    );
}

// ---- kage report ----

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn region(id: u32, kind: &str, parent: Option<u32>, line: u32, loads: u64) -> String {
    let parent = parent.map_or("null".into(), |p| p.to_string());
    format!(
        r#"{{"id":{id},"kind":"{kind}","name":"work","symbol":"work","file":"/src/work.c","line":{line},
            "end_line":{},"parent":{parent},"instances":1,"loads":{loads},"stores":0,"bytes_read":{},
            "bytes_written":0,"self_loads":{loads},"self_stores":0,"self_bytes_read":{},"self_bytes_written":0}}"#,
        line + 2,
        loads * 4,
        loads * 4
    )
}

fn report_json(regions: &[String]) -> String {
    format!(
        r#"{{"format":"kage-report","version":1,"tool":"count","program":"/bin/work","args":["work"],
            "pid":31,"end":{{"how":"exit","code":0}},"complete":true,"threads":1,"options":{{}},
            "regions":[{}],"totals":{{"loads":7,"stores":0,"bytes_read":28,"bytes_written":0}},
            "unattributed":{{"loads":0,"stores":0,"bytes_read":0,"bytes_written":0}}}}"#,
        regions.join(",")
    )
}

#[test]
fn kage_report_prints_the_region_tree() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "kage.work.31.json",
        &report_json(&[
            region(0, "function", None, 1, 7),
            region(1, "loop", Some(0), 3, 5),
            region(2, "loop-body", Some(1), 3, 5),
        ]),
    );
    let mut command = kage();
    command.arg("report").arg(&file);
    let out = run(command);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("function work"), "{text}");
    assert!(text.contains("\n  loop "), "{text}");
    assert!(text.contains("\n    loop-body "), "{text}");
    assert!(text.contains("work.c:3-5"), "{text}");

    let mut command = kage();
    command.arg("report").arg(&file).args(["--format", "json"]);
    let out = run(command);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["regions"][1]["kind"], "loop");
}

/// The hand-written working-set report the renderers are tested on.
fn working_set_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../kage-report/tests/fixtures/working_set.json")
}

#[test]
fn kage_report_writes_a_working_set_plot_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("ws.html");
    let mut command = kage();
    command
        .arg("report")
        .arg(working_set_fixture())
        .args(["--format", "html", "-o"])
        .arg(&html);
    let out = run(command);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("open it in a web browser"),
        "{}",
        stderr(&out)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<svg").count(), 1);
    assert!(page.contains("L1d 32 KiB"));

    let mut command = kage();
    command
        .arg("report")
        .arg(working_set_fixture())
        .args(["--format", "perfetto"]);
    let out = run(command);
    assert!(out.status.success(), "{}", stderr(&out));
    let trace: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        trace["traceEvents"][0]["args"]["name"],
        "stencil (working set)"
    );

    let mut command = kage();
    command.arg("report").arg(working_set_fixture());
    let out = run(command);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("fits in cache:"), "{}", stdout(&out));
}

#[test]
fn html_of_a_count_report_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "kage.work.31.json",
        &report_json(&[region(0, "function", None, 1, 7)]),
    );
    for (format, tools) in [
        ("html", "the working-set, footprint, hcpa and loops tools"),
        ("perfetto", "the working-set tool"),
    ] {
        let output = dir.path().join(format!("out.{format}"));
        let mut command = kage();
        command
            .arg("report")
            .arg(&file)
            .args(["--format", format, "--output"])
            .arg(&output);
        let out = run(command);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "the {format} view exists for {tools}; this report is from `count`"
            )),
            "{}",
            stderr(&out)
        );
        assert!(stdout(&out).is_empty());
        assert!(!output.exists());
        assert_no_panic(&out);
    }
}

#[test]
fn unreadable_reports_exit_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let full = report_json(&[region(0, "function", None, 1, 7)]);
    let cases = [
        (dir.path().join("missing.json"), "no such report file"),
        (write(dir.path(), "empty.json", ""), "the report is empty"),
        (
            write(dir.path(), "cut.json", &full[..full.len() / 2]),
            "truncated",
        ),
        (
            write(dir.path(), "other.json", r#"{"name": "package.json"}"#),
            "not a Kage report",
        ),
        (write(dir.path(), "text.json", "hello"), "not a Kage report"),
    ];
    for (file, expected) in cases {
        let mut command = kage();
        command.arg("report").arg(&file);
        let out = run(command);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}: {}",
            file.display(),
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(expected),
            "{}: {}",
            file.display(),
            stderr(&out)
        );
        assert!(stdout(&out).is_empty());
        assert_no_panic(&out);
    }
}

#[test]
fn a_closed_pipe_ends_kage_report_quietly() {
    let dir = tempfile::tempdir().unwrap();
    // Far more output than a pipe buffers, so that kage is still writing when the reader goes.
    let mut regions = vec![region(0, "function", None, 1, 7)];
    regions.extend((1..4000).map(|id| region(id, "loop", Some(0), id, 1)));
    let file = write(dir.path(), "big.json", &report_json(&regions));
    let mut child = Command::new(env!("CARGO_BIN_EXE_kage"))
        .arg("report")
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}

// ---- kage run ----

#[test]
fn kage_run_passes_the_exit_status_and_says_there_is_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = kage();
    command
        .args(["run", "--", "/bin/sh", "-c", "exit 3"])
        .current_dir(dir.path());
    let out = run(command);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("no report was written: was /bin/sh built with kage-cc?"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kage_run_reports_death_by_signal_as_128_plus_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = kage();
    command
        .args(["run", "--", "/bin/sh", "-c", "kill -TERM $$"])
        .current_dir(dir.path());
    let out = run(command);
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
}

#[test]
fn kage_run_adds_its_options_after_the_environment_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = kage();
    command
        .args([
            "run",
            "--option",
            "verbosity=1",
            "--",
            "/bin/sh",
            "-c",
            "echo $KAGE_OPTIONS",
        ])
        .current_dir(dir.path());
    let out = run(command);
    // And where every process of the run logs its report.
    let options = stdout(&out);
    assert!(
        options.starts_with("verbosity=1:report_log=") && options.ends_with(".reports\n"),
        "{options}"
    );

    let mut command = kage();
    command
        .args([
            "run",
            "--tool",
            "count",
            "--option",
            "verbosity=1",
            "--",
            "/bin/sh",
            "-c",
            "echo $KAGE_OPTIONS",
        ])
        .current_dir(dir.path());
    command.env("KAGE_OPTIONS", "verbosity=2");
    let out = run(command);
    let options = stdout(&out);
    assert!(
        options.starts_with("verbosity=2:tool=count:verbosity=1:report_log="),
        "{options}"
    );
}

#[test]
fn kage_run_summarises_the_report_the_program_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let report = report_json(&[region(0, "function", None, 1, 7)]);
    write(dir.path(), "template.json", &report);
    // The "program" writes a report where -o says, as the runtime would.
    let mut command = kage();
    command
        .args([
            "run",
            "-o",
            "out.json",
            "--",
            "/bin/sh",
            "-c",
            "cp template.json out.json; exit 4",
        ])
        .current_dir(dir.path());
    let out = run(command);
    assert_eq!(out.status.code(), Some(4));
    let summary = stderr(&out);
    assert!(
        summary.contains("kage: count report written to out.json"),
        "{summary}"
    );
    assert!(summary.contains("work.c:1-3"), "{summary}");

    // The same file, not rewritten by the next run, is not taken for its report.
    let mut command = kage();
    command
        .args(["run", "-o", "out.json", "--", "/bin/sh", "-c", "exit 0"])
        .current_dir(dir.path());
    let out = run(command);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("'out.json' is left from an earlier run"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kage_run_finds_the_report_by_executable_name_and_pid() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "template.json",
        &report_json(&[region(0, "function", None, 1, 7)]),
    );
    // `exec` keeps the pid; the report is named after the shell kage started.
    let sh = Path::new("/bin/sh").canonicalize().unwrap();
    let name = sh.file_name().unwrap().to_str().unwrap().to_owned();
    let script = format!("cp template.json kage.{name}.$$.json");
    let mut command = kage();
    command
        .args(["run", "--", "/bin/sh", "-c", &script])
        .current_dir(dir.path());
    let out = run(command);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains(&format!("count report written to kage.{name}.")),
        "{}",
        stderr(&out)
    );
}

/// A wrapper that execs another executable keeps its pid, and the runtime names the report
/// after the executable that ran (pyenv's `python3` is a script that execs `python3.11`):
/// the report with the pid is the program's own, whatever its executable's name.
#[test]
fn kage_run_finds_the_report_of_a_program_a_wrapper_became() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "template.json",
        &report_json(&[region(0, "function", None, 1, 7)]),
    );
    let mut command = kage();
    command
        .args([
            "run",
            "--",
            "/bin/sh",
            "-c",
            "cp template.json kage.python3.11.$$.json",
        ])
        .current_dir(dir.path());
    let out = run(command);
    assert_eq!(out.status.code(), Some(0));
    let summary = stderr(&out);
    assert!(
        summary.contains("count report written to kage.python3.11."),
        "{summary}"
    );
    assert!(!summary.contains("no report of its own"), "{summary}");
}

#[test]
fn kage_run_cannot_start_a_missing_program() {
    let mut command = kage();
    command.args(["run", "--", "/nonexistent/prog"]);
    let out = run(command);
    assert_eq!(out.status.code(), Some(127));
    assert!(
        stderr(&out).contains("cannot start '/nonexistent/prog'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kage_run_refuses_malformed_options() {
    let mut command = kage();
    command.args(["run", "--option", "verbosity", "--", "/bin/true"]);
    let out = run(command);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("write it like --option verbosity=1"),
        "{}",
        stderr(&out)
    );
}
