//! The reliability suite: what real use broke, each case built and run as a user would,
//! for every tool it concerns (issue 21). A case here failed before its fix.

mod e2e_support;

use e2e_support::*;
use kage_report::{read_report, RegionKind};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tools whose builds differ (`KAGE_TOOL`): one build serves count, another each of
/// the others (loops stands for interpolate and dependences, built the same way).
const BUILDS: &[&str] = &[
    "count",
    "count-calls",
    "working-set",
    "footprint",
    "hcpa",
    "loops",
    "select",
];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `kage-cc` with `KAGE_TOOL=tool` and `args`, in the scratch directory.
fn cc(work: &Work, tool: &str, args: &[&str]) {
    work.wrap_with_env(&kage_cc(), args, &[("KAGE_TOOL", tool)]);
}

/// Builds `tests/c/reliability/<file>` with `KAGE_TOOL=tool` at -O2 (and `flags`) into
/// `<scratch>/<name>`.
fn build(work: &Work, tool: &str, file: &str, name: &str, flags: &[&str]) -> PathBuf {
    let out = work.path(name);
    let src = source(file);
    let mut args = vec!["-O2", src.as_str()];
    args.extend_from_slice(flags);
    args.extend(["-o", out.to_str().unwrap()]);
    cc(work, tool, &args);
    out
}

/// Builds `tests/c/reliability/<file>` with `KAGE_TOOL=tool` at -O2 as a shared library
/// (and `flags`) into `<scratch>/<name>`.
fn shared_library(work: &Work, tool: &str, file: &str, name: &str, flags: &[&str]) -> PathBuf {
    let out = work.path(name);
    let src = source(file);
    let mut args = vec!["-O2", "-shared", "-fPIC", src.as_str()];
    args.extend_from_slice(flags);
    args.extend(["-o", out.to_str().unwrap()]);
    cc(work, tool, &args);
    out
}

fn source(name: &str) -> String {
    c_dir()
        .join("reliability")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

/// Runs `exe args` with its report written to `report`; returns stdout after checking the
/// exit status is 0.
fn run_ok(exe: &Path, args: &[&str], report: &Path) -> String {
    let out = Command::new(exe)
        .args(args)
        .env("KAGE_OPTIONS", format!("output={}", report.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {args:?}: {}\n{}",
        exe.display(),
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs `exe` with its report written to `report` and its output captured; panics with
/// `what` when it does not end within `limit`.
fn run_within(
    exe: &Path,
    report: &Path,
    limit: std::time::Duration,
    what: &str,
) -> std::process::Output {
    use std::time::Instant;
    let mut child = Command::new(exe)
        .env("KAGE_OPTIONS", format!("output={}", report.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The instances of function `name` in a report of `tool` (count, footprint or hcpa).
fn instances_of(report: &kage_report::Report, tool: &str, name: &str) -> u64 {
    let region = func(report, name);
    match tool {
        "count" => stats(region).instances,
        "footprint" => report.footprint().unwrap().regions[region.id as usize].instances,
        _ => kage_report::HcpaStats::of(region)
            .unwrap()
            .map_or(0, |s| s.instances),
    }
}

/// A library built for each tool, bound lazily, linked at build time and `dlopen`ed with
/// `RTLD_LAZY`: the working-set tool's `preserve_most` tick used to be called through a
/// lazily bound PLT entry whose resolver clobbered r10/r11 (SIGSEGV on the first tick).
#[test]
fn lazily_bound_and_dlopened_libraries_work_for_every_tool() {
    let work = Work::new();
    let lazy = "-Wl,-z,lazy";
    let expected = "52226752512000.0\n";
    for tool in BUILDS {
        let lib = shared_library(
            &work,
            tool,
            "biglib.c",
            &format!("libbig_{tool}.so"),
            &[lazy],
        );
        let lib_s = lib.to_str().unwrap();
        let linked = work.path(&format!("linked_{tool}"));
        let dir = work.dir.path().to_str().unwrap().to_owned();
        cc(
            &work,
            tool,
            &[
                "-O2",
                lazy,
                &source("bigmain.c"),
                &format!("-L{dir}"),
                &format!("-lbig_{tool}"),
                &format!("-Wl,-rpath,{dir}"),
                "-o",
                linked.to_str().unwrap(),
            ],
        );
        let loader = work.path(&format!("loader_{tool}"));
        cc(
            &work,
            tool,
            &[
                "-O2",
                lazy,
                &source("bigmain.c"),
                "-ldl",
                "-o",
                loader.to_str().unwrap(),
            ],
        );
        for (exe, args) in [(&linked, vec![]), (&loader, vec![lib_s])] {
            let report_path = work.path(&format!("{tool}.json"));
            let out = run_ok(exe, &args, &report_path);
            assert_eq!(out, expected, "{tool} {}", exe.display());
            let report = read_report(&report_path).unwrap();
            let big_sum = report
                .regions
                .iter()
                .find(|r| r.name == "big_sum")
                .unwrap_or_else(|| panic!("{tool}: no big_sum region"));
            assert!(big_sum.file.ends_with("reliability/biglib.c"), "{tool}");
        }
    }
}

/// A library loaded, called and unloaded three times: the count build crashed at the end
/// (the report read the unmapped module's table), and a library loaded again at the same
/// address was taken for the one already registered, so its calls went uncounted. Every
/// load's calls are in the report now, with the library's names and lines.
#[test]
fn an_unloaded_library_keeps_its_counts_and_a_reloaded_one_counts_anew() {
    const N: u64 = 1000;
    let work = Work::new();
    for tool in BUILDS {
        let lib = shared_library(
            &work,
            tool,
            "unloaded.c",
            &format!("libunloaded_{tool}.so"),
            &[],
        );
        let lib_s = lib.to_str().unwrap();
        let exe = build(
            &work,
            tool,
            "reload.c",
            &format!("reload_{tool}"),
            &["-ldl"],
        );
        let report_path = work.path(&format!("reload_{tool}.json"));
        let out = run_ok(&exe, &[lib_s], &report_path);
        assert_eq!(out, "3\n", "{tool}: the library was unmapped each time");
        let report = read_report(&report_path).unwrap().by_source();
        let fill = func(&report, "fill");
        assert!(fill.file.ends_with("reliability/unloaded.c"), "{tool}");
        match *tool {
            "count" | "count-calls" => {
                assert_counts(fill, 3, c(0, 3 * N, 0, 12 * N), c(0, 0, 0, 0))
            }
            "footprint" => {
                let footprint = report.footprint().unwrap();
                assert_eq!(footprint.regions[fill.id as usize].instances, 3, "{tool}");
            }
            "hcpa" => {
                let stats = kage_report::HcpaStats::of(fill).unwrap().unwrap();
                assert_eq!(stats.instances, 3, "{tool}");
            }
            _ => {}
        }
    }
}

/// `kage-cc -static` and `-static-pie` link (the static unwinder, `libgcc_eh`, instead of
/// `libgcc_s`; no exported hooks, whose TLS relocations a static PIE cannot apply at
/// start-up) and the program measures both of its threads.
#[test]
fn a_static_program_links_and_is_measured() {
    let work = Work::new();
    for link in ["-static", "-static-pie"] {
        for tool in BUILDS {
            let exe: PathBuf = work.path(&format!("static_{tool}{link}"));
            cc(
                &work,
                tool,
                &[
                    "-O2",
                    link,
                    &source("static.c"),
                    "-lpthread",
                    "-o",
                    exe.to_str().unwrap(),
                ],
            );
            let report_path = work.path(&format!("static_{tool}{link}.json"));
            assert_eq!(run_ok(&exe, &[], &report_path), "1998\n", "{tool} {link}");
            let report = read_report(&report_path).unwrap();
            // The loop tools see a thread when it runs a selected nest (none here).
            let seen = if matches!(*tool, "loops" | "select") {
                0
            } else {
                2
            };
            assert_eq!(report.threads, seen, "{tool} {link}");
            let fill = func(&report, "fill");
            if matches!(*tool, "count" | "count-calls") {
                assert_counts(fill, 2, c(0, 2000, 0, 8000), c(0, 0, 0, 0));
            }
        }
    }
}

/// Runs `exe args` with its report at `report`; returns the exit status.
fn run_status(exe: &Path, args: &[&str], report: &Path) -> std::process::ExitStatus {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(exe);
    command
        .args(args)
        .env("KAGE_OPTIONS", format!("output={}", report.display()));
    // The program starts with every signal's default action, unblocked, whatever the test
    // harness inherited (under `nohup`, SIGHUP is ignored, and an ignored signal is left
    // ignored by the runtime and by `exec`).
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(|| {
            for signal in 1..=libc::SIGRTMAX() {
                if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                    libc::signal(signal, libc::SIG_DFL);
                }
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
    command.output().unwrap().status
}

/// Three threads with regions open (waiting forever) when the main thread calls `exit()` or
/// crashes: their data is in the report, as if they ended then. Before, their functions had
/// 0 instances under footprint, inclusive counts below self counts under count, and hcpa's
/// coverage went over 100% (their root instances never ended).
#[test]
fn threads_still_running_at_the_end_are_in_the_report() {
    use std::os::unix::process::ExitStatusExt;
    const N: u64 = 1000;
    let work = Work::new();
    for tool in ["count", "footprint", "hcpa"] {
        let exe = build(
            &work,
            tool,
            "alive.c",
            &format!("alive_{tool}"),
            &["-lpthread"],
        );
        for crash in [false, true] {
            let report_path = work.path(&format!("alive_{tool}_{crash}.json"));
            let status = run_status(&exe, if crash { &["crash"] } else { &[] }, &report_path);
            if crash {
                assert_eq!(status.signal(), Some(libc::SIGSEGV), "{tool}");
            } else {
                assert_eq!(status.code(), Some(0), "{tool}");
            }
            let report = read_report(&report_path).unwrap();
            let what = format!("{tool}, crash: {crash}");
            assert_eq!(report.threads, 4, "{what}");
            assert_eq!(report.complete, !crash, "{what}");
            let waiting = func(&report, "wait_forever");
            match tool {
                "count" => {
                    assert_counts(
                        func(&report, "work"),
                        4,
                        c(0, 4 * N, 0, 16 * N),
                        c(0, 0, 0, 0),
                    );
                    let s = stats(waiting);
                    assert_eq!(s.instances, 3, "{what}");
                    assert_eq!(s.inclusive.stores, 3 * N + s.exclusive.stores, "{what}");
                    for region in &report.regions {
                        let s = stats(region);
                        let (i, e) = (s.inclusive, s.exclusive);
                        if crash && region.name == "main" && region.kind == RegionKind::Function {
                            // The fault loses what main's frame kept waiting in registers
                            // for the thread's totals (docs/abi.md, "Totals that wait"):
                            // its own accesses since its last call (argv[1], strcmp's
                            // reads, the faulting store) are in its self counts only.
                            assert!(i.stores >= N, "{what}: {i:?}");
                            continue;
                        }
                        assert!(
                            i.loads >= e.loads && i.stores >= e.stores,
                            "{what}: region {} {i:?} {e:?}",
                            region.name
                        );
                    }
                }
                "footprint" => {
                    let footprint = report.footprint().unwrap();
                    let stats = &footprint.regions[waiting.id as usize];
                    assert_eq!(stats.instances, 3, "{what}");
                    assert!(stats.max_bytes >= 4 * N, "{what}: {stats:?}");
                    assert!(footprint.total_bytes >= 4 * 4 * N, "{what}");
                }
                _ => {
                    let hcpa = report.hcpa().unwrap();
                    let stats = hcpa.stats(waiting.id).unwrap();
                    assert_eq!(stats.instances, 3, "{what}");
                    for region in hcpa.regions.iter().flatten() {
                        assert!(region.coverage <= 1.0, "{what}: {region:?}");
                    }
                }
            }
        }
    }
}

/// A thread that blocks every signal (a pool's worker) cannot be asked to close its regions
/// when the program ends: the report says which threads stayed open and why, and the end
/// does not wait for them (it waited a second, on every run of `xz -T2`).
#[test]
fn threads_that_block_every_signal_are_named_in_the_report() {
    const N: u64 = 1000;
    let work = Work::new();
    for tool in ["count", "working-set"] {
        let exe = build(
            &work,
            tool,
            "alive.c",
            &format!("alive_{tool}"),
            &["-lpthread"],
        );
        let report_path = work.path(&format!("alive_blocking_{tool}.json"));
        assert_eq!(
            run_status(&exe, &["blocking"], &report_path).code(),
            Some(0),
            "{tool}"
        );
        let report = read_report(&report_path).unwrap();
        assert_eq!(report.threads, 4, "{tool}");
        assert!(!report.complete, "{tool}");
        assert_eq!(
            report.unclosed_threads,
            Some(kage_report::UnclosedThreads {
                blocking: 1,
                stopped: 0,
                unanswered: 0
            }),
            "{tool}"
        );
        if tool == "count" {
            // Every thread's finished calls are in, the blocking one's too.
            assert_counts(
                func(&report, "work"),
                4,
                c(0, 4 * N, 0, 16 * N),
                c(0, 0, 0, 0),
            );
        }
        let text = kage_report::render::text(&report);
        assert!(
            text.contains("1 thread: 1 blocks SIGRTMAX, by which the runtime asks a thread"),
            "{tool}: {text}"
        );
    }
}

/// Every signal whose default action ends the process leaves a report (`complete: false`,
/// `end` naming the signal) and the program still dies by it; `quick_exit` leaves a complete
/// one. Before, only eight signals were caught and `quick_exit` left none.
#[test]
fn every_fatal_signal_and_quick_exit_leave_a_report() {
    use kage_report::ProgramEnd;
    use std::os::unix::process::ExitStatusExt;
    let work = Work::new();
    let exe = build(&work, "count", "ends.c", "ends", &[]);
    let mut signals = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGILL,
        libc::SIGTRAP,
        libc::SIGABRT,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGUSR1,
        libc::SIGSEGV,
        libc::SIGUSR2,
        libc::SIGPIPE,
        libc::SIGALRM,
        libc::SIGTERM,
        libc::SIGSTKFLT,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSYS,
    ];
    signals.extend([libc::SIGRTMIN(), libc::SIGRTMIN() + 5, libc::SIGRTMAX() - 1]);
    let check_work = |report: &kage_report::Report| {
        assert_counts(func(report, "work"), 1, c(0, 100, 0, 400), c(0, 0, 0, 0));
    };
    for signal in signals {
        let report_path = work.path(&format!("signal_{signal}.json"));
        let status = run_status(&exe, &["signal", &signal.to_string()], &report_path);
        assert_eq!(status.signal(), Some(signal), "{signal}");
        let report = read_report(&report_path).unwrap_or_else(|e| panic!("{signal}: {e}"));
        assert_eq!(report.end, ProgramEnd::Signal { signal });
        assert!(!report.complete);
        check_work(&report);
    }
    let report_path = work.path("quick.json");
    assert_eq!(run_status(&exe, &["quick"], &report_path).code(), Some(5));
    let report = read_report(&report_path).unwrap();
    assert_eq!(report.end, ProgramEnd::QuickExit);
    assert!(report.complete);
    check_work(&report);
}

/// A child killed by its parent right after `fork` leaves its report: the signal used to
/// come while the child's runtime, holding a lock, started its tool over, and the child
/// died without a report ("fatal signal inside the runtime"), every time, for every tool.
#[test]
fn a_child_killed_right_after_fork_leaves_its_report() {
    use kage_report::ProgramEnd;
    const CHILDREN: u32 = 4;
    let work = Work::new();
    for tool in ["count", "working-set", "footprint", "hcpa"] {
        let exe = build(&work, tool, "killed.c", &format!("killed_{tool}"), &[]);
        let dir = work.path(&format!("killed_{tool}.d"));
        std::fs::create_dir(&dir).unwrap();
        let out = Command::new(&exe)
            .arg(CHILDREN.to_string())
            .current_dir(&dir)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{tool}: {stderr}");
        assert_eq!(text(&out.stdout).trim(), CHILDREN.to_string(), "{tool}");
        assert!(!stderr.contains("no report written"), "{tool}: {stderr}");
        let reports: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| read_report(&entry.unwrap().path()).unwrap())
            .collect();
        assert_eq!(reports.len() as u32, 1 + CHILDREN, "{tool}");
        let parent = reports.iter().find(|r| r.forked_from.is_none()).unwrap();
        assert_eq!(parent.end, ProgramEnd::Exit { code: 0 }, "{tool}");
        for child in reports.iter().filter(|r| r.forked_from.is_some()) {
            assert_eq!(child.forked_from, Some(parent.pid), "{tool}");
            assert_eq!(
                child.end,
                ProgramEnd::Signal {
                    signal: libc::SIGTERM
                },
                "{tool}"
            );
        }
    }
}

/// `kage run` passes the signals sent to it alone on to the program (it used to die of
/// SIGUSR1 and orphan the program), and refuses a tool that does not exist (it used to run
/// the default one without a word).
#[test]
fn kage_run_forwards_signals_and_refuses_unknown_tools() {
    let work = Work::new();
    let exe = build(&work, "count", "ends.c", "ends", &[]);
    let out = Command::new(kage())
        .args(["run", "-o", "r.json", "--"])
        .arg(&exe)
        .arg("forward")
        .current_dir(work.dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("count report written to r.json"));
    let out = Command::new(kage())
        .args(["run", "--tool", "bogus", "--"])
        .arg(&exe)
        .current_dir(work.dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("'bogus' is not a tool"),
        "{}",
        text(&out.stderr)
    );
}

/// A program that changes directory before it ends writes its report (and `kage run`'s
/// list of reports) relative to where it started.
#[test]
fn a_program_that_changes_directory_reports_where_it_started() {
    let work = Work::new();
    let exe = build(&work, "count", "wanders.c", "wanders", &[]);
    std::fs::create_dir(work.path("elsewhere")).unwrap();
    let out = Command::new(kage())
        .args(["run", "--"])
        .arg(&exe)
        .arg("elsewhere")
        .current_dir(work.dir.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "4950\n");
    let written: Vec<String> = std::fs::read_dir(work.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("kage.wanders.") && n.ends_with(".json"))
        .collect();
    assert_eq!(written.len(), 1, "{written:?}: {stderr}");
    assert!(
        stderr.contains(&format!("count report written to {}", written[0])),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(work.path("elsewhere")).unwrap().count(),
        0
    );
    let report = kage_report::read_report(&work.path(&written[0])).unwrap();
    // 100 values written and read back, and argv[1].
    let main = stats(func(&report, "main"));
    assert_eq!((main.inclusive.loads, main.inclusive.stores), (101, 100));
}

/// A test driver (here a shell, not instrumented) that runs instrumented tests in their own
/// directories: `kage run` lists the reports they wrote instead of saying none was.
#[test]
fn kage_run_lists_the_reports_of_the_processes_the_program_started() {
    let work = Work::new();
    let exe = build(&work, "count", "ends.c", "ends", &[]);
    let script = format!(
        "mkdir -p a b && (cd a && {0}) && (cd b && {0} && {0})",
        exe.display()
    );
    let out = Command::new(kage())
        .args(["run", "--", "/bin/sh", "-c", &script])
        .current_dir(work.dir.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("/bin/sh wrote no report of its own"),
        "{stderr}"
    );
    assert!(
        stderr.contains("3 other processes of the run wrote reports"),
        "{stderr}"
    );
    let listed: Vec<&str> = stderr
        .lines()
        .find(|l| l.contains("other processes"))
        .unwrap()
        .rsplit(": ")
        .next()
        .unwrap()
        .split(' ')
        .collect();
    assert_eq!(listed.len(), 3, "{stderr}");
    assert_eq!(
        listed
            .iter()
            .filter(|p| p.starts_with("a/kage.ends."))
            .count(),
        1
    );
    assert_eq!(
        listed
            .iter()
            .filter(|p| p.starts_with("b/kage.ends."))
            .count(),
        2
    );
    for path in listed {
        read_report(&work.path(path)).unwrap();
    }
}

/// A program that turns counting off before it exits keeps its last interval: the lines
/// pending when counting stopped used to be dropped (`total_lines` 0), under the inline
/// build and under call hooks alike.
#[test]
fn the_working_set_interval_under_way_when_counting_stops_is_kept() {
    let work = Work::new();
    for tool in ["working-set", "count-calls"] {
        let exe = build(
            &work,
            tool,
            "bracketed.c",
            &format!("bracketed_{tool}"),
            &[],
        );
        let report_path = work.path(&format!("bracketed_{tool}.json"));
        let out = Command::new(&exe)
            .env(
                "KAGE_OPTIONS",
                format!(
                    "tool=working-set:enabled=0:output={}",
                    report_path.display()
                ),
            )
            .output()
            .unwrap();
        assert!(out.status.success());
        let report = read_report(&report_path).unwrap();
        let ws = report.working_set().unwrap();
        assert_eq!(ws.total_lines, 4096, "{tool}");
        assert_eq!(
            ws.snapshots.last().unwrap().cumulative_lines,
            4096,
            "{tool}"
        );
        let last = ws.snapshots.last().unwrap();
        assert!(last.end_seconds <= ws.duration_seconds, "{tool}");
    }
}

/// A program and a library built for different tools: the program's build decides the tool
/// (a library's constructor used to, silently, as it runs first), and the library is named
/// on stderr with its tool, linked or `dlopen`ed. A part built for every tool is measured
/// by the tool the other part was built for, without a word.
#[test]
fn parts_built_for_different_tools_are_named_and_the_program_decides() {
    let work = Work::new();
    let dir = work.dir.path().to_str().unwrap().to_owned();
    let lib = work.path("libfp.so");
    cc(
        &work,
        "footprint",
        &[
            "-O2",
            "-shared",
            "-fPIC",
            &source("biglib.c"),
            "-o",
            lib.to_str().unwrap(),
        ],
    );
    let build_main = |tool: &str, name: &str, dlopen: bool| {
        let exe = work.path(name);
        let mut args = vec!["-O2".to_string(), source("bigmain.c")];
        if dlopen {
            args.push("-ldl".into());
        } else {
            args.extend([
                format!("-L{dir}"),
                "-lfp".into(),
                format!("-Wl,-rpath,{dir}"),
            ]);
        }
        args.extend(["-o".into(), exe.to_str().unwrap().to_owned()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cc(&work, tool, &args);
        exe
    };
    let run = |exe: &Path, args: &[&str]| {
        let report_path = work.path("mixed.json");
        let out = Command::new(exe)
            .args(args)
            .env("KAGE_OPTIONS", format!("output={}", report_path.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        (text(&out.stderr), read_report(&report_path).unwrap())
    };
    let lib_s = lib.to_str().unwrap();
    for (exe, args) in [
        (build_main("working-set", "ws_linked", false), vec![]),
        (build_main("working-set", "ws_loader", true), vec![lib_s]),
    ] {
        let (stderr, report) = run(&exe, &args);
        assert_eq!(report.tool, "working-set", "{stderr}");
        let warning = format!(
            "kage: warning: {} ({}) was built with KAGE_TOOL=footprint, but the \
             'working-set' tool runs (the program was built for it): that code is not measured",
            lib.display(),
            source("biglib.c")
        );
        assert_eq!(stderr.matches(&warning).count(), 1, "{stderr}");
    }
    // Built for every tool: measured by footprint, the library's tool.
    let (stderr, report) = run(&build_main("count-calls", "calls_linked", false), &[]);
    assert_eq!(report.tool, "footprint");
    assert!(!stderr.contains("warning"), "{stderr}");
    let footprint = report.footprint().unwrap();
    assert_eq!(
        footprint.regions[func(&report, "main").id as usize].instances,
        1
    );
    assert_eq!(
        footprint.regions[func(&report, "big_sum").id as usize].instances,
        1
    );
}

/// Recursion 400,000 frames deep finishes (it ran for minutes under count and footprint:
/// the region stack searched its frames from the bottom at every call), with exact counts.
#[test]
fn deep_recursion_finishes_with_exact_counts() {
    use std::time::Duration;
    let work = Work::new();
    for tool in ["count", "footprint"] {
        let exe = build(
            &work,
            tool,
            "deep.c",
            &format!("deep_{tool}"),
            &["-lpthread"],
        );
        let report_path = work.path(&format!("deep_{tool}.json"));
        let out = run_within(
            &exe,
            &report_path,
            Duration::from_secs(60),
            &format!("{tool}: 400,000 nested calls did not finish in 60 s"),
        );
        assert!(out.status.success(), "{tool}");
        let report = read_report(&report_path).unwrap();
        let down = func(&report, "down");
        if tool == "count" {
            // Recursion counts once in the inclusive counters, every time in the self ones.
            assert_counts(
                down,
                400_000,
                c(399_999, 400_000, 1_599_996, 1_600_000),
                c(399_999, 400_000, 1_599_996, 1_600_000),
            );
        } else {
            let footprint = report.footprint().unwrap();
            let measured = footprint.regions[down.id as usize].instances;
            assert_eq!(
                measured + footprint.untracked_instances.unwrap(),
                400_000,
                "every instance is measured or counted as too deep"
            );
        }
    }
}

/// A program not linked by kage-cc that loads an instrumented library: run directly, the
/// library says what is missing and what to do (the loader used to say only `undefined
/// symbol: __kage_register_module`); under `kage run`, which preloads the runtime, the
/// library is measured, for every tool.
#[test]
fn an_instrumented_library_in_a_plain_program_says_so_and_kage_run_measures_it() {
    let work = Work::new();
    let loader = work.path("plain_loader");
    let out = Command::new("clang-22")
        .args([
            "-O2",
            &source("bigmain.c"),
            "-ldl",
            "-o",
            loader.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    for tool in BUILDS {
        let lib = work.path(&format!("libplain_{tool}.so"));
        let lib_s = lib.to_str().unwrap();
        cc(
            &work,
            tool,
            &["-O2", "-shared", "-fPIC", &source("biglib.c"), "-o", lib_s],
        );
        let direct = Command::new(&loader).arg(lib_s).output().unwrap();
        let stderr = text(&direct.stderr);
        // Builds whose code reads the runtime's data (every build with region hooks reads
        // `__kage_innermost`) or calls it through the GOT stop at load time, with the
        // loader's words naming a Kage symbol; the others say what is missing, and run
        // unmeasured (the loop tools' builds call the runtime only in the nests selected:
        // none here).
        assert!(
            stderr.contains("was not linked by kage-cc")
                || stderr.contains("undefined symbol: __kage_"),
            "{tool}: {stderr}"
        );
        assert_eq!(
            direct.status.success(),
            matches!(*tool, "loops" | "select"),
            "{tool}: {stderr}"
        );
        if matches!(*tool, "loops" | "select") {
            assert!(
                stderr.contains("run the program with `kage run"),
                "{tool}: {stderr}"
            );
        }
        let report_name = format!("plain_{tool}.json");
        let run = Command::new(kage())
            .args(["run", "-o", &report_name, "--"])
            .arg(&loader)
            .arg(lib_s)
            .current_dir(work.dir.path())
            .output()
            .unwrap();
        assert!(run.status.success(), "{tool}: {}", text(&run.stderr));
        assert_eq!(text(&run.stdout), "52226752512000.0\n", "{tool}");
        let report = read_report(&work.path(&report_name)).unwrap();
        let runtime_tool = if *tool == "count-calls" {
            "count"
        } else {
            tool
        };
        assert_eq!(report.tool, runtime_tool);
        assert!(report.regions.iter().any(|r| r.name == "big_sum"), "{tool}");
    }
}

/// Coroutines (`makecontext`/`swapcontext`): each context runs with its own region stack,
/// so what a coroutine does is charged to its own regions (before, to the region that
/// switched to it, after its first switch back: 64 of 64,000 loads were charged right).
#[test]
fn coroutines_are_charged_their_own_accesses() {
    const TURNS: u64 = 1000;
    const N: u64 = 64;
    let work = Work::new();
    for tool in ["count", "count-calls", "footprint", "hcpa"] {
        let exe = build(
            &work,
            tool,
            "coroutines.c",
            &format!("coroutines_{tool}"),
            &[],
        );
        let report_path = work.path(&format!("coroutines_{tool}.json"));
        let out = run_ok(&exe, &[], &report_path);
        assert_eq!(out, "2016000 2080000 63040\n", "{tool}");
        let report = read_report(&report_path).unwrap();
        assert_eq!(report.threads, 1, "{tool}: contexts are not threads");
        let produce = func(&report, "produce");
        let main = func(&report, "main");
        match tool {
            "count" | "count-calls" => {
                // Per coroutine and turn: 64 loads of its data and one of its sum (and a
                // store); main loads one element per turn and coroutine, and both sums.
                let p = stats(produce);
                assert_eq!(p.instances, 2);
                assert_eq!(p.inclusive.loads, 2 * TURNS * (N + 1));
                assert_eq!(p.inclusive.stores, 2 * TURNS);
                let m = stats(main);
                assert_eq!(m.instances, 1);
                assert_eq!(m.inclusive.loads, 2 * TURNS + 2, "{m:?}");
                assert_totals_consistent(&report);
            }
            "footprint" => {
                let footprint = report.footprint().unwrap();
                let p = &footprint.regions[produce.id as usize];
                assert_eq!(p.instances, 2);
                // Its 64 elements and its sum.
                assert_eq!((p.min_bytes, p.max_bytes), (N * 4 + 8, N * 4 + 8), "{p:?}");
            }
            _ => {
                let hcpa = report.hcpa().unwrap();
                assert_eq!(hcpa.stats(produce.id).unwrap().instances, 2);
                assert_eq!(hcpa.stats(main.id).unwrap().instances, 1);
            }
        }
    }
}

/// Footprint keeps the shadows of the threads alive, not of every thread the program ran:
/// its shadow peak does not grow with the rounds of a program that starts threads again and
/// again (it grew with them, as mimalloc's stress test found: 40 rounds held 20 times what
/// 2 did). Within a round, up to 4 threads overlap, more or less: the bound leaves room.
#[test]
fn footprint_shadows_go_with_their_threads() {
    let work = Work::new();
    let exe = build(&work, "footprint", "churn.c", "churn", &[]);
    let peak = |rounds: &str| {
        let report_path = work.path(&format!("churn_{rounds}.json"));
        run_ok(&exe, &[rounds], &report_path);
        let report = read_report(&report_path).unwrap();
        assert_eq!(
            report.threads as usize,
            1 + 4 * rounds.parse::<usize>().unwrap()
        );
        let footprint = report.footprint().unwrap();
        // Every thread's megabyte counts in the total.
        assert!(footprint.total_bytes >= 4 * rounds.parse::<u64>().unwrap() * (1 << 20) / 8);
        footprint.shadow_peak_bytes
    };
    let (two, forty) = (peak("2"), peak("40"));
    assert!(
        forty < 5 * two,
        "shadow peak {two} B with 2 rounds, {forty} B with 40"
    );
}

/// A timer's handler that leaves with `siglongjmp` (a computation cut short five times):
/// every round's call and handler are counted, whichever tool, though the signal mostly
/// comes while the runtime is busy on the thread. The runtime keeps such a signal until it
/// is done, then runs the handler (crates/kage-rt/src/handlers.rs); it used to run it
/// there, and the siglongjmp left the thread marked busy: main, spin and the handler had 0
/// instances under footprint and hcpa. The count build lost the instances of `spin` the
/// handler left.
#[test]
fn a_handler_that_leaves_by_siglongjmp_leaves_the_runtime_whole() {
    let work = Work::new();
    for tool in ["count", "footprint", "hcpa"] {
        let exe = build(&work, tool, "timeouts.c", &format!("timeouts_{tool}"), &[]);
        let report_path = work.path(&format!("timeouts_{tool}.json"));
        assert_eq!(run_ok(&exe, &[], &report_path), "5 timeouts\n", "{tool}");
        let report = read_report(&report_path).unwrap();
        assert!(report.complete, "{tool}");
        let instances = |name: &str| instances_of(&report, tool, name);
        assert_eq!(instances("main"), 1, "{tool}: main");
        assert_eq!(instances("on_alarm"), 5, "{tool}: on_alarm");
        // The count build keeps `spin` (a function without calls) in locals until it
        // returns: the resume point where the siglongjmp lands counts the instance it left.
        assert_eq!(instances("spin"), 5, "{tool}: spin");
    }
}

/// Stack overflows recovered by a SIGSEGV handler's `siglongjmp`: when an overflow comes
/// inside a runtime hook, the handler (which cannot wait: it is a fault) leaves the runtime
/// half-way and the thread is ignored from then on. Whichever happens, the report is right
/// or says it is not: complete with main's one instance and the handler's three, or
/// incomplete with a warning (it used to be complete, with main and down at 0 instances).
#[test]
fn a_fault_handler_that_leaves_the_runtime_leaves_an_incomplete_report() {
    let work = Work::new();
    for tool in ["count", "footprint", "hcpa"] {
        let exe = build(&work, tool, "overflow.c", &format!("overflow_{tool}"), &[]);
        let report_path = work.path(&format!("overflow_{tool}.json"));
        let out = Command::new(&exe)
            .env("KAGE_OPTIONS", format!("output={}", report_path.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{tool}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "3 overflows, then -236\n", "{tool}");
        let report = read_report(&report_path).unwrap();
        let instances = |name: &str| instances_of(&report, tool, name);
        let warned = text(&out.stderr).contains("left the runtime by siglongjmp");
        if report.complete {
            assert!(!warned, "{tool}");
            assert_eq!(instances("main"), 1, "{tool}: main");
            assert_eq!(instances("on_segv"), 3, "{tool}: on_segv");
        } else {
            assert!(warned, "{tool}: an incomplete report says why");
        }
        // The count build runs its hooks only at a function's first entry: complete.
        if tool == "count" {
            assert!(report.complete);
        }
    }
}

/// Signals sent to threads while they set themselves up with the runtime: the handler used
/// to enter the runtime again and wait for ever on the lock the set-up held. Now it runs
/// once the set-up is done: the program ends, and every handler call is counted.
#[test]
fn signals_while_threads_start_wait_for_the_set_up() {
    use std::time::Duration;
    let work = Work::new();
    for tool in ["count", "footprint", "hcpa"] {
        let exe = build(
            &work,
            tool,
            "startsignals.c",
            &format!("startsignals_{tool}"),
            &["-lpthread"],
        );
        for round in 0..3 {
            let report_path = work.path(&format!("startsignals_{tool}_{round}.json"));
            let out = run_within(
                &exe,
                &report_path,
                Duration::from_secs(60),
                &format!("{tool}: hung (round {round})"),
            );
            assert!(out.status.success(), "{tool}");
            let handled: u64 = text(&out.stdout).trim().parse().unwrap();
            assert!(handled >= 64, "{tool}: every thread's handler ran");
            let report = read_report(&report_path).unwrap();
            assert_eq!(
                instances_of(&report, tool, "on_usr1"),
                handled,
                "{tool}: every handler call is counted"
            );
        }
    }
}

/// A program that starts threads again and again holds the runtime's state of the threads
/// alive, not of every thread it ever ran: a thread that starts takes over the state of one
/// that ended, with its statistics, which go on adding up exactly. Each thread's state used
/// to stay until the program ended: 20,000 threads, one after another, took 272 MB under
/// count, 829 MB under footprint and 978 MB under hcpa (3 MB now). The program's own
/// thread-specific destructor, which runs after the runtime has ended the thread, calls an
/// instrumented function: it must not count into the state a new thread took over.
#[test]
fn threads_that_end_leave_their_state_to_the_next_ones() {
    let work = Work::new();
    for tool in ["count", "working-set", "footprint", "hcpa"] {
        let exe = build(
            &work,
            tool,
            "relay.c",
            &format!("relay-{tool}"),
            &["-lpthread"],
        );
        // (threads started besides main, the report, the peak RSS in KiB)
        let run = |n: u64| {
            let report_path = work.path(&format!("relay-{tool}-{n}.json"));
            let out = Command::new(&exe)
                .arg(n.to_string())
                .env("KAGE_OPTIONS", format!("output={}", report_path.display()))
                .output()
                .unwrap();
            assert!(out.status.success(), "{tool}: {}", text(&out.stderr));
            let stdout = text(&out.stdout);
            let threads = n + n / 4 * 4;
            // The checksum is what native code computes: Σ k × 523776 over every thread's k.
            let ks: u64 = (0..n).sum::<u64>() + (0..n / 4).map(|w| 4 * w + 6).sum::<u64>();
            assert_eq!(stdout, format!("{} {threads}\n", ks * 523_776), "{tool}");
            let rss: u64 = text(&out.stderr)
                .lines()
                .find_map(|l| l.strip_prefix("rss "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{tool}: no rss line"));
            let report = read_report(&report_path).unwrap();
            assert_eq!(report.threads as u64, 1 + threads, "{tool}");
            (threads, report, rss)
        };
        let (few, small, small_rss) = run(8);
        let (many, large, large_rss) = run(2000);
        // About 4,000 threads' states would be tens to hundreds of megabytes.
        assert!(
            large_rss < small_rss + 8 * 1024,
            "{tool}: peak RSS {small_rss} KiB with {few} threads, {large_rss} KiB with {many}"
        );
        match tool {
            "count" => {
                let s = stats(func(&large, "work"));
                assert_eq!(s.instances, many);
                assert_eq!(s.inclusive.loads, 1024 * many);
                assert_eq!(s.inclusive.bytes_read, 4096 * many);
            }
            "footprint" => {
                let (fs, fl) = (small.footprint().unwrap(), large.footprint().unwrap());
                let w = &fl.regions[func(&large, "work").id as usize];
                assert_eq!(w.instances, many);
                assert_eq!((w.min_bytes, w.max_bytes), (4096, 4096));
                // Each thread's own bytes count in the total (the table, and `key`, which the
                // thread reads: 4,100), main's are the same in both runs.
                assert_eq!(fl.total_bytes - fs.total_bytes, 4100 * (many - few));
                // Every thread adds the same accesses (what footprint instrumentation counts
                // as one: docs/report-schema.md), at least its 1,025 loads.
                let added = fl.accesses - fs.accesses;
                assert!(
                    added % (many - few) == 0 && added >= 1025 * (many - few),
                    "{added}"
                );
            }
            "hcpa" => {
                let of = |r: &kage_report::Report| {
                    let s = kage_report::HcpaStats::of(func(r, "work"))
                        .unwrap()
                        .unwrap();
                    (s.instances, s.work, s.critical_path)
                };
                let ((n1, w1, c1), (n2, w2, c2)) = (of(&small), of(&large));
                assert_eq!((n1, n2), (few, many));
                assert!(w1 > 0 && c1 > 0);
                assert_eq!((w2 * n1, c2 * n1), (w1 * n2, c1 * n2));
            }
            _ => {}
        }
    }
}

/// The runtime started by an instrumented function of the program's `.preinit_array`,
/// before `environ` exists, still reads `KAGE_OPTIONS` (there: the report's path) and
/// counts that call; every tool.
#[test]
fn a_program_whose_preinit_array_runs_instrumented_code_is_measured() {
    let work = Work::new();
    for tool in ["count", "footprint", "hcpa"] {
        let exe = build(&work, tool, "preinit.c", &format!("preinit_{tool}"), &[]);
        let report = work.path(&format!("preinit_{tool}.json"));
        assert_eq!(run_ok(&exe, &[], &report), "126\n", "{tool}");
        let r = kage_report::read_report(&report).unwrap_or_else(|e| panic!("{tool}: {e}"));
        assert_eq!(instances_of(&r, tool, "early"), 2, "{tool}");
    }
    // The working set's first budget check ticks, which reserves the shadow before the
    // first mark.
    let exe = build(&work, "working-set", "preinit.c", "preinit_ws", &[]);
    let report = work.path("preinit_ws.json");
    assert_eq!(run_ok(&exe, &[], &report), "126\n");
    let r = kage_report::read_report(&report).unwrap();
    assert_eq!(r.tool, "working-set");
}
