//! Compiles `tests/c/hooks.c` (which calls the hooks by hand with known sequences), links it
//! with the runtime's static library exactly as the compiler wrapper does, runs it, and checks
//! the report field by field. The expected numbers are worked out by hand from hooks.c.

use kage_report::{read_report, CountStats, Counters, ProgramEnd, Region, RegionKind, Report};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

mod common;
use common::staticlib;

/// The test program, compiled once per test process.
fn program() -> &'static Path {
    static BIN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &BIN.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("hooks");
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(&cc)
            .args(["-O1", "-g", "-I"])
            .arg(manifest.join("include"))
            .arg(manifest.join("tests/c/hooks.c"))
            .arg("-o")
            .arg(&bin)
            // The link line the compiler wrapper uses, with the whole archive standing for
            // the object scripts/build.sh makes of it (the same code, less what is unreachable).
            .args(kage::cc::plan::RUNTIME_LINK_ARGS.iter().flat_map(|&arg| {
                if arg == kage::cc::plan::RUNTIME_OBJECT {
                    let archive = staticlib().into_os_string();
                    vec![
                        "-Wl,--whole-archive".into(),
                        archive,
                        "-Wl,--no-whole-archive".into(),
                    ]
                } else {
                    vec![arg.into()]
                }
            }))
            .output()
            .expect("run the C compiler");
        assert!(
            out.status.success(),
            "{cc} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (dir, bin)
    })
    .1
}

struct Run {
    out: Output,
    pid: u32,
    dir: tempfile::TempDir,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    fn report(&self, name: &str) -> Report {
        read_report(&self.dir.path().join(name))
            .unwrap_or_else(|e| panic!("{e}\nstderr: {}", self.stderr()))
    }
}

/// Runs a mode with `output=<tmp>/r.json` plus `extra` options.
fn run(mode: &str, extra: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = format!("output={}/r.json", dir.path().display());
    if !extra.is_empty() {
        opts = format!("{opts}:{extra}");
    }
    let child = Command::new(program())
        .arg(mode)
        .current_dir(dir.path())
        .env("KAGE_OPTIONS", opts)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    Run { out, pid, dir }
}

fn c(loads: u64, stores: u64, bytes_read: u64, bytes_written: u64) -> Counters {
    Counters {
        loads,
        stores,
        bytes_read,
        bytes_written,
    }
}

/// (instances, inclusive, self) of a region.
fn stats(r: &Report, id: u32) -> (u64, Counters, Counters) {
    let s = CountStats::of(r.region(id).unwrap()).expect("count fields");
    (s.instances, s.inclusive, s.exclusive)
}

fn zero() -> Counters {
    Counters::default()
}

fn check_invariant(r: &Report) {
    let mut sum: Counters = serde_json::from_value(r.tool_data["unattributed"].clone()).unwrap();
    for g in &r.regions {
        sum.add(&CountStats::of(g).unwrap().exclusive);
    }
    assert_eq!(
        Some(sum),
        r.count_totals(),
        "totals = unattributed + sum of self"
    );
}

#[test]
fn basic_counts_are_exact() {
    let run = run("basic", "");
    assert_eq!(run.out.status.code(), Some(7), "{}", run.stderr());
    assert!(run
        .stderr()
        .contains("kage: ignoring the region table of module 'bad.c': ABI version 17"));
    let r = run.report("r.json");
    assert_eq!(r.tool, "count");
    assert_eq!(r.program, program().to_str().unwrap());
    assert_eq!(
        r.args,
        vec![program().to_str().unwrap().to_string(), "basic".into()]
    );
    assert_eq!(r.pid, run.pid);
    assert_eq!(r.forked_from, None);
    assert_eq!(r.end, ProgramEnd::Exit { code: 7 });
    assert!(r.complete);
    assert_eq!(r.threads, 2);
    let mut opts: Vec<_> = r.options.keys().cloned().collect();
    opts.sort();
    assert_eq!(
        opts,
        [
            "enabled",
            "granularity",
            "granule",
            "handle_signals",
            "help",
            "interval",
            "interval_unit",
            "line_size",
            "loop_bodies",
            "max_depth",
            "min_chunk_us",
            "output",
            "report_log",
            "sample_entries",
            "sample_iterations",
            "shadow",
            "share_lanes",
            "snapshot_mib",
            "snapshots",
            "timestamp_trace",
            "tool",
            "trace",
            "verbosity",
            "version",
            "vsm"
        ]
    );
    assert_eq!(r.options["tool"], "count");
    assert_eq!(r.options["enabled"], "1");

    // 14 regions of t.c, then lazy.c's function (registered lazily); bad.c is absent.
    assert_eq!(r.regions.len(), 15);
    type Want = (
        RegionKind,
        &'static str,
        &'static str,
        &'static str,
        u32,
        u32,
        Option<u32>,
    );
    let want: [Want; 15] = {
        use RegionKind::*;
        let t = "/src/t.c";
        let w = ("work(int)", "_Z4worki");
        [
            (Function, "main", "main", t, 10, 50, None),
            (Loop, "main", "main", t, 20, 30, Some(0)),
            (LoopBody, "main", "main", t, 20, 30, Some(1)),
            (Function, w.0, w.1, t, 60, 80, None),
            (Loop, w.0, w.1, t, 62, 78, Some(3)),
            (LoopBody, w.0, w.1, t, 62, 78, Some(4)),
            (Loop, w.0, w.1, t, 64, 70, Some(5)),
            (LoopBody, w.0, w.1, t, 64, 70, Some(6)),
            (Function, "rec", "rec", t, 90, 95, None),
            (Function, "thread_fn", "thread_fn", t, 100, 110, None),
            (Function, "deep", "deep", t, 120, 130, None),
            (Loop, "deep", "deep", t, 122, 128, Some(10)),
            (LoopBody, "deep", "deep", t, 122, 128, Some(11)),
            (Function, "jumper", "jumper", t, 140, 150, None),
            (Function, "lazy_fn", "lazy_fn", "/src/lazy.c", 1, 5, None),
        ]
    };
    for (i, (g, w)) in r.regions.iter().zip(want).enumerate() {
        let Region {
            id,
            kind,
            name,
            symbol,
            file,
            line,
            end_line,
            parent,
            ..
        } = g;
        assert_eq!(
            (
                *id,
                *kind,
                name.as_str(),
                symbol.as_str(),
                file.as_str(),
                *line,
                *end_line,
                *parent
            ),
            (i as u32, w.0, w.1, w.2, w.3, w.4, w.5, w.6)
        );
    }

    // main: store 8; cmpxchg x2 (2 loads of 8, 1 store of 8); memcpy 100; bad_fn's load 4
    // (its module is rejected, so it lands in main).
    assert_eq!(stats(&r, 0), (1, c(17, 13, 163, 156), c(4, 3, 120, 116)));
    assert_eq!(stats(&r, 1), (1, c(9, 9, 27, 24), zero()));
    assert_eq!(stats(&r, 2), (4, c(9, 9, 27, 24), c(6, 0, 24, 0)));
    // work(0), work(1), work(2)
    assert_eq!(stats(&r, 3), (3, c(3, 9, 3, 24), c(0, 3, 0, 12)));
    assert_eq!(stats(&r, 4), (3, c(3, 6, 3, 12), zero()));
    assert_eq!(stats(&r, 5), (6, c(3, 6, 3, 12), c(3, 0, 3, 0)));
    assert_eq!(stats(&r, 6), (3, c(0, 6, 0, 12), zero()));
    assert_eq!(stats(&r, 7), (9, c(0, 6, 0, 12), c(0, 6, 0, 12)));
    // rec(3): 4 instances, counted once in the outermost.
    assert_eq!(stats(&r, 8), (4, c(4, 0, 16, 0), c(4, 0, 16, 0)));
    // The second thread's frame is closed by its end.
    assert_eq!(stats(&r, 9), (1, c(0, 10, 0, 40), c(0, 10, 0, 40)));
    for id in 10..=13 {
        assert_eq!(stats(&r, id), (0, zero(), zero()), "region {id}");
    }
    assert_eq!(stats(&r, 14), (1, c(0, 1, 0, 16), c(0, 1, 0, 16)));
    assert_eq!(r.count_totals(), Some(c(19, 23, 175, 196)));
    let un: Counters = serde_json::from_value(r.tool_data["unattributed"].clone()).unwrap();
    assert_eq!(un, c(2, 0, 12, 0));
    check_invariant(&r);
}

#[test]
fn exit_from_a_nested_loop_closes_every_frame() {
    let run = run("exit", "");
    assert_eq!(run.out.status.code(), Some(3));
    let r = run.report("r.json");
    assert_eq!(r.end, ProgramEnd::Exit { code: 3 });
    assert!(r.complete);
    assert_eq!(stats(&r, 0), (1, c(3, 1, 12, 4), c(0, 1, 0, 4)));
    assert_eq!(stats(&r, 10), (1, c(3, 0, 12, 0), zero()));
    assert_eq!(stats(&r, 11), (1, c(3, 0, 12, 0), zero()));
    assert_eq!(stats(&r, 12), (1, c(3, 0, 12, 0), c(3, 0, 12, 0)));
    check_invariant(&r);
}

#[test]
fn longjmp_over_frames_is_repaired() {
    let run = run("longjmp", "");
    assert_eq!(run.out.status.code(), Some(0), "{}", run.stderr());
    let r = run.report("r.json");
    // jumper and deep are left by longjmp; lazy_fn's entry (higher on the stack) closes them.
    assert_eq!(stats(&r, 13), (1, c(5, 0, 20, 0), c(2, 0, 8, 0)));
    assert_eq!(stats(&r, 10), (1, c(3, 0, 12, 0), zero()));
    assert_eq!(stats(&r, 12), (1, c(3, 0, 12, 0), c(3, 0, 12, 0)));
    assert_eq!(stats(&r, 14), (1, c(0, 1, 0, 16), c(0, 1, 0, 16)));
    assert_eq!(stats(&r, 0), (1, c(5, 2, 20, 20), c(0, 1, 0, 4)));
    check_invariant(&r);
}

#[test]
fn forked_child_writes_its_own_report() {
    let run = run("fork", "");
    assert_eq!(run.out.status.code(), Some(0), "{}", run.stderr());
    let stdout = String::from_utf8_lossy(&run.out.stdout);
    let child: u32 = stdout
        .trim()
        .strip_prefix("child ")
        .unwrap()
        .parse()
        .unwrap();
    let parent = run.report("r.json");
    let kid = run.report(&format!("r.{child}.json"));
    assert_eq!(parent.forked_from, None);
    assert_eq!(parent.pid, run.pid);
    assert_eq!(kid.forked_from, Some(parent.pid));
    assert_eq!(kid.pid, child);
    assert_eq!((parent.threads, kid.threads), (1, 1));
    // Parent: two loads before the fork, one after.
    assert_eq!(stats(&parent, 0), (1, c(3, 0, 12, 0), c(3, 0, 12, 0)));
    assert_eq!(stats(&parent, 3), (0, zero(), zero()));
    assert_eq!(parent.count_totals(), Some(c(3, 0, 12, 0)));
    // Child: only what it did after the fork; main, open at the fork, is one instance.
    assert_eq!(stats(&kid, 0), (1, c(1, 4, 1, 16), c(0, 1, 0, 8)));
    assert_eq!(stats(&kid, 3), (1, c(1, 3, 1, 8), c(0, 1, 0, 4)));
    assert_eq!(stats(&kid, 7), (3, c(0, 2, 0, 4), c(0, 2, 0, 4)));
    assert_eq!(kid.count_totals(), Some(c(1, 4, 1, 16)));
    check_invariant(&parent);
    check_invariant(&kid);
}

#[test]
fn sigsegv_writes_an_incomplete_report_and_dies_by_the_signal() {
    let run = run("segv", "");
    assert_eq!(
        run.out.status.signal(),
        Some(libc::SIGSEGV),
        "{:?}",
        run.out.status
    );
    let r = run.report("r.json");
    assert!(!r.complete);
    assert_eq!(r.end, ProgramEnd::Signal { signal: 11 });
    assert_eq!(stats(&r, 0), (1, c(3, 0, 12, 0), c(3, 0, 12, 0)));
}

#[test]
fn handle_signals_0_leaves_signals_alone() {
    let run = run("segv", "handle_signals=0");
    assert_eq!(run.out.status.signal(), Some(libc::SIGSEGV));
    assert!(!run.dir.path().join("r.json").exists());
}

#[test]
fn reset_discards_earlier_statistics() {
    let run = run("reset", "");
    let r = run.report("r.json");
    // main was open at the reset: statistics restart with it as one instance.
    assert_eq!(stats(&r, 0), (1, c(1, 1, 4, 4), c(1, 0, 4, 0)));
    assert_eq!(stats(&r, 3), (1, c(0, 1, 0, 4), c(0, 1, 0, 4)));
    assert_eq!(stats(&r, 5), (1, zero(), zero()));
    assert_eq!(stats(&r, 7), (0, zero(), zero()));
    assert_eq!(r.count_totals(), Some(c(1, 1, 4, 4)));
}

#[test]
fn enabled_0_counts_regions_but_no_accesses() {
    let run = run("basic", "enabled=0");
    let r = run.report("r.json");
    assert_eq!(r.options["enabled"], "0");
    assert_eq!(r.count_totals(), Some(zero()));
    assert_eq!(stats(&r, 3).0, 3);
    assert_eq!(stats(&r, 7).0, 9);
}

#[test]
fn unknown_option_bad_value_unknown_tool_and_help() {
    let run = run("basic", "bogus=1:enabled=yes:tool=nope:help=1:verbosity=1");
    assert_eq!(run.out.status.code(), Some(7));
    let err = run.stderr();
    assert!(err.contains("kage: warning: KAGE_OPTIONS: unknown option 'bogus' ignored; known options: tool, output, report_log, enabled, handle_signals, verbosity, line_size, interval_unit, interval, snapshots, snapshot_mib, trace, vsm, granularity, loop_bodies, max_depth, granule, shadow, share_lanes, timestamp_trace, sample_iterations, sample_entries, version, min_chunk_us, help"), "{err}");
    assert!(
        err.contains("bad value 'yes' for option 'enabled'"),
        "{err}"
    );
    assert!(err.contains("kage: warning: unknown tool 'nope'; available tools: count, working-set, footprint, hcpa, loops, interpolate, dependences, select; using the 'count' tool instead"), "{err}");
    for line in [
        "tool",
        "output",
        "enabled",
        "handle_signals",
        "verbosity",
        "help",
    ] {
        assert!(
            err.lines()
                .any(|l| l.trim_start().starts_with(line) && l.contains("default:")),
            "help for {line}: {err}"
        );
    }
    assert!(err.contains("kage.%e.%p.json"));
    assert!(err.contains(&format!(
        "kage: report written to {}/r.json",
        run.dir.path().display()
    )));
    let r = run.report("r.json");
    assert_eq!(r.options["tool"], "count");
    assert_eq!(r.options["enabled"], "1");
    assert_eq!(r.count_totals(), Some(c(19, 23, 175, 196)));
}

#[test]
fn default_output_name_uses_exe_and_pid() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(program())
        .arg("exit")
        .current_dir(dir.path())
        .env_remove("KAGE_OPTIONS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let r = read_report(&dir.path().join(&names[0])).unwrap();
    assert_eq!(names[0], format!("kage.hooks.{}.json", r.pid));
}

#[test]
fn concurrent_threads_and_a_thread_alive_at_exit() {
    let run = run("threads", "");
    assert_eq!(run.out.status.code(), Some(0), "{}", run.stderr());
    let r = run.report("r.json");
    assert_eq!(r.threads, 10);
    let (instances, incl, _) = stats(&r, 9);
    assert_eq!(instances, 9);
    // Eight finished workers, and the live one, whose instance the runtime closed on it
    // when the program ended: its loads, and the stores it made until then.
    let t = r.count_totals().unwrap();
    assert_eq!((incl.loads, incl.bytes_read), (900_000, 3_600_000));
    assert_eq!(t.loads, 900_000);
    assert!(incl.stores > 0 && incl.stores == t.stores, "{incl:?} {t:?}");
    assert!(r.complete);
}
