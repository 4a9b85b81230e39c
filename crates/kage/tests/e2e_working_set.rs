//! The working-set tool, end to end, checked exactly:
//!
//! - against a hand count (`ws/lines.c` touches 1000 then 500 new lines);
//! - against an independent reference computed here from the test-only trace (every access
//!   with the raw interval it fell in), interval by interval, with and without merging;
//! - the optimised inline build (coalescing, hoisting) against the trace build, which has
//!   the same interval boundaries: identical snapshots;
//! - the build for every tool (a call per access, no optimisation) against the inline one:
//!   identical whole-run working sets.

mod e2e_support;
use e2e_support::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

const INLINE: &[(&str, &str)] = &[("KAGE_TOOL", "working-set")];
const TRACE: &[(&str, &str)] = &[("KAGE_TOOL", "working-set"), ("KAGE_WS_TRACE", "1")];

/// Runs `exe` with `options` (plus the report path) and returns the report as JSON.
fn run_ws(work: &Work, exe: &Path, args: &[&str], options: &str) -> Value {
    run_ws_with_stderr(work, exe, args, options).0
}

/// As [`run_ws`], with what the run printed on stderr.
fn run_ws_with_stderr(work: &Work, exe: &Path, args: &[&str], options: &str) -> (Value, String) {
    let report = work.path("ws.json");
    let _ = std::fs::remove_file(&report);
    let out = work.run_with_options(exe, args, &format!("{options}:output={}", report.display()));
    assert!(
        out.status.success(),
        "{} failed: {}\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The reader accepts it too.
    let typed = kage_report::read_report(&report).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(typed.tool, "working-set");
    let json = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    (json, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

fn snapshots(report: &Value) -> &Vec<Value> {
    report["snapshots"].as_array().expect("snapshots")
}

/// (address, size, raw interval) records of the trace file.
fn read_trace(path: &Path) -> Vec<(u64, u64, u64)> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len() % 24, 0, "trace is whole records");
    bytes
        .chunks_exact(24)
        .map(|r| {
            let word = |i: usize| u64::from_le_bytes(r[i * 8..i * 8 + 8].try_into().unwrap());
            (word(0), word(1), word(2))
        })
        .collect()
}

/// The reference: for each raw interval, the set of lines its accesses touched.
fn reference_lines(trace: &[(u64, u64, u64)], line_size: u64) -> Vec<BTreeSet<u64>> {
    let mut per_interval: Vec<BTreeSet<u64>> = Vec::new();
    for &(addr, size, raw) in trace {
        let raw = raw as usize;
        if per_interval.len() <= raw {
            per_interval.resize(raw + 1, BTreeSet::new());
        }
        let first = addr / line_size;
        let last = (addr + size - 1) / line_size;
        per_interval[raw].extend(first..=last);
    }
    per_interval
}

/// Every snapshot's lines, new lines and cumulative lines equal the reference's.
fn assert_matches_reference(report: &Value, trace: &[(u64, u64, u64)]) {
    let line_size = u(report, "line_size");
    let reference = reference_lines(trace, line_size);
    let mut seen = BTreeSet::new();
    let mut expected_raw = 0;
    for (i, s) in snapshots(report).iter().enumerate() {
        let range = s["intervals"].as_array().unwrap();
        let (first, last) = (range[0].as_u64().unwrap(), range[1].as_u64().unwrap());
        assert_eq!(first, expected_raw, "snapshots are consecutive");
        expected_raw = last + 1;
        let mut union = BTreeSet::new();
        for raw in first..=last {
            if let Some(lines) = reference.get(raw as usize) {
                union.extend(lines.iter().copied());
            }
        }
        let new = union.difference(&seen).count() as u64;
        seen.extend(union.iter().copied());
        assert_eq!(
            u(s, "lines"),
            union.len() as u64,
            "snapshot {i} ({first}..={last}): lines"
        );
        assert_eq!(u(s, "new_lines"), new, "snapshot {i}: new lines");
        assert_eq!(
            u(s, "cumulative_lines"),
            seen.len() as u64,
            "snapshot {i}: cumulative"
        );
    }
    assert!(
        expected_raw as usize >= reference.len(),
        "every traced interval is reported"
    );
    assert_eq!(u(report, "total_lines"), seen.len() as u64);
}

#[test]
fn hand_counted_lines() {
    let work = Work::new();
    let exe = work.build_with_env("ws/lines.c", &["-O2"], INLINE);
    let report = run_ws(&work, &exe, &[], "interval_unit=accesses:interval=1G");
    assert_eq!(report["instrumentation"], "inline");
    assert_eq!(u(&report, "line_size"), 64);
    assert_eq!(report["interval_unit"], "accesses");
    // One byte in each of 1000 lines, the same 1000 again, 500 new ones.
    assert_eq!(u(&report, "total_lines"), 1500);
    let snaps = snapshots(&report);
    assert_eq!(snaps.len(), 1);
    assert_eq!(u(&snaps[0], "lines"), 1500);
    // 2500 increments (a load and a store each) and printf's two loads.
    assert_eq!(u(&report, "accesses"), 2 * 2500 + 2);

    // 4096-byte lines, grouped from the build's 64-byte ones: lines 0..=1998 and
    // 2001..=2999 of 64 bytes, i.e. bytes 0..192000.
    let coarse = (2999 * 64) / 4096 + 1;
    let report = run_ws(
        &work,
        &exe,
        &[],
        "interval_unit=accesses:interval=1G:line_size=4096",
    );
    assert_eq!(
        (u(&report, "line_size"), u(&report, "total_lines")),
        (4096, coarse)
    );
    // Lines smaller than the build's cannot be measured: a warning, and the build's size.
    let (report, stderr) = run_ws_with_stderr(
        &work,
        &exe,
        &[],
        "interval_unit=accesses:interval=1G:line_size=32",
    );
    assert_eq!(
        (u(&report, "line_size"), u(&report, "total_lines")),
        (64, 1500)
    );
    assert!(
        stderr
            .contains("line_size=32 is smaller than the 64-byte lines this program was built for")
            && stderr.contains("KAGE_WS_LINE_SIZE=32"),
        "{stderr}"
    );

    // Built for 32-byte lines, which become the default: the touched bytes are 128 bytes
    // apart, so as many lines; grouped into 4096-byte lines, as many as above.
    let exe = work.build_with_env(
        "ws/lines.c",
        &["-O2"],
        &[INLINE[0], ("KAGE_WS_LINE_SIZE", "32")],
    );
    let report = run_ws(&work, &exe, &[], "interval_unit=accesses:interval=1G");
    assert_eq!(
        (u(&report, "line_size"), u(&report, "total_lines")),
        (32, 1500)
    );
    let report = run_ws(
        &work,
        &exe,
        &[],
        "interval_unit=accesses:interval=1G:line_size=4096",
    );
    assert_eq!(
        (u(&report, "line_size"), u(&report, "total_lines")),
        (4096, coarse)
    );
}

#[test]
fn ranges_of_two_lines_mark_the_lines_they_touch() {
    // Two-line ranges first test both shadow bytes at once: a read inside a line whose
    // next line is untouched must not mark that line, a read across the boundary marks both.
    let work = Work::new();
    for line_size in ["64", "16"] {
        let exe = work.build_with_env(
            "ws/straddle.c",
            &["-O2"],
            &[INLINE[0], ("KAGE_WS_LINE_SIZE", line_size)],
        );
        let report = run_ws(&work, &exe, &[], "interval_unit=accesses:interval=1G");
        assert_eq!(u(&report, "total_lines"), 300, "{line_size}-byte lines");
        assert_eq!(u(&report, "accesses"), 400, "{line_size}-byte lines");
    }
}

#[test]
fn masked_vector_accesses_mark_the_lines_of_their_lanes() {
    // tests/c/vector/masked.c: 10 lanes for each of 6 kinds of access, over 8 lines of
    // `src` and 8 of `dst`; the lanes a mask turns off are no accesses.
    let work = Work::new();
    for level in ["-O2", "-O3"] {
        let exe = work.build_with_env("vector/masked.c", &[level], INLINE);
        let report = run_ws(&work, &exe, &[], "interval_unit=accesses:interval=1G");
        assert_eq!(u(&report, "total_lines"), 16, "{level}");
        assert_eq!(u(&report, "accesses"), 60, "{level}");
    }
}

#[test]
fn phases_match_the_trace_reference() {
    let work = Work::new();
    let exe = work.build_with_env("ws/phases.c", &["-O2"], TRACE);
    let trace = work.path("phases.trace");
    let options = format!(
        "interval_unit=accesses:interval=50k:snapshots=100000:trace={}",
        trace.display()
    );
    let report = run_ws(&work, &exe, &[], &options);
    assert_eq!(report["instrumentation"], "trace");
    let records = read_trace(&trace);
    assert!(records.len() > 100_000, "{} records", records.len());
    assert!(
        snapshots(&report).len() > 10,
        "{} snapshots",
        snapshots(&report).len()
    );
    assert_eq!(u(&report, "merges"), 0);
    assert_matches_reference(&report, &records);

    // Few snapshots kept: merged ones are unions of their intervals, still exact.
    let options = format!(
        "interval_unit=accesses:interval=50k:snapshots=4:trace={}",
        trace.display()
    );
    let merged = run_ws(&work, &exe, &[], &options);
    assert!(u(&merged, "merges") >= 2);
    assert!(snapshots(&merged).len() <= 4);
    assert_matches_reference(&merged, &read_trace(&trace));
    assert_eq!(u(&merged, "interval"), 50_000 << u(&merged, "merges"));
    assert_eq!(u(&merged, "total_lines"), u(&report, "total_lines"));

    // Reported lines larger than the build's: each interval's 64-byte lines grouped.
    let options = format!(
        "interval_unit=accesses:interval=50k:snapshots=100000:line_size=256:trace={}",
        trace.display()
    );
    let coarse = run_ws(&work, &exe, &[], &options);
    assert_eq!(u(&coarse, "line_size"), 256);
    assert_matches_reference(&coarse, &read_trace(&trace));
    assert!(u(&coarse, "total_lines") < u(&report, "total_lines"));
}

/// Loops that read through an index array are hoisted in part: their sequential accesses
/// counted and marked per chunk, the indirect ones marked where they are made. Every
/// interval still holds exactly the lines its accesses touched.
#[test]
fn partly_hoisted_loops_match_the_trace_reference() {
    let work = Work::new();
    let exe = work.build_with_env("ws/indirect.c", &["-O2"], TRACE);
    let trace = work.path("indirect.trace");
    let options = format!(
        "interval_unit=accesses:interval=20k:snapshots=100000:trace={}",
        trace.display()
    );
    let report = run_ws(&work, &exe, &[], &options);
    let records = read_trace(&trace);
    assert!(snapshots(&report).len() > 10);
    assert_matches_reference(&report, &records);
}

#[test]
fn memory_unmapped_within_an_interval_still_counts() {
    let work = Work::new();
    let exe = work.build_with_env("ws/unmapped.c", &["-O2"], TRACE);
    let trace = work.path("unmapped.trace");
    // Address placement varies from run to run: try several.
    for interval in ["1G", "5k", "1G", "5k", "1G"] {
        let options = format!(
            "interval_unit=accesses:interval={interval}:snapshots=100000:trace={}",
            trace.display()
        );
        let report = run_ws(&work, &exe, &[], &options);
        assert_matches_reference(&report, &read_trace(&trace));
        // Every round maps at the same address (the largest: 1 MiB + 5 * 64 KiB).
        assert!(
            u(&report, "total_lines") >= ((1 << 20) + 5 * 65536) / 64,
            "{}",
            u(&report, "total_lines")
        );
    }
}

#[test]
fn optimised_inline_build_equals_the_trace_build() {
    let work = Work::new();
    let inline = work.build_with_env("ws/phases.c", &["-O2"], INLINE);
    let traced = work.build_with_env("ws/phases.c", &["-O2"], TRACE);
    for options in [
        "interval_unit=accesses:interval=50k:snapshots=100000",
        "interval_unit=accesses:interval=20k:snapshots=8",
    ] {
        let a = run_ws(&work, &inline, &[], options);
        let b = run_ws(&work, &traced, &[], options);
        let key = |r: &Value| -> Vec<(u64, u64, u64, u64, u64)> {
            snapshots(r)
                .iter()
                .map(|s| {
                    (
                        u(s, "start"),
                        u(s, "end"),
                        u(s, "lines"),
                        u(s, "new_lines"),
                        u(s, "cumulative_lines"),
                    )
                })
                .collect()
        };
        assert_eq!(key(&a), key(&b), "{options}");
        assert_eq!(u(&a, "accesses"), u(&b, "accesses"));
    }
}

#[test]
fn build_for_every_tool_agrees_on_the_whole_run() {
    let work = Work::new();
    let inline = work.build_with_env("ws/phases.c", &["-O2"], INLINE);
    let calls = work.build_for_every_tool("ws/phases.c", &["-O2"]);
    let options = "interval_unit=accesses:interval=50k:snapshots=1000";
    let a = run_ws(&work, &inline, &[], options);
    let b = run_ws(&work, &calls, &[], &format!("tool=working-set:{options}"));
    assert_eq!(b["instrumentation"], "calls");
    assert_eq!(u(&a, "total_lines"), u(&b, "total_lines"));
    assert_eq!(u(&a, "accesses"), u(&b, "accesses"));
}

#[test]
fn threads_count_shared_lines_once() {
    let work = Work::new();
    let exe = work.build_with_env("ws/threads.c", &["-O2"], TRACE);
    let trace = work.path("threads.trace");
    // Volatile accesses, one per iteration: the main thread's first sweep makes 2 * 4 * 256Ki
    // = 2,097,152 accesses and the workers 4 * 8192 = 32,768 in all; with 250k intervals no
    // boundary can fall while the workers run (2.0M < 2,097,152 + 32,768 < 2.25M).
    let options = format!(
        "interval_unit=accesses:interval=250k:snapshots=1000:trace={}",
        trace.display()
    );
    let report = run_ws(&work, &exe, &[], &options);
    let records = read_trace(&trace);
    assert_matches_reference(&report, &records);
    // 4096 lines of main_buf, 512 shared lines read by all four workers (once), 4 * 1024
    // private lines, the results array, and main's pthread_t array on the stack.
    let total = u(&report, "total_lines");
    assert!(
        (4096 + 512 + 4096 + 1..=4096 + 512 + 4096 + 4).contains(&total),
        "{total}"
    );
    assert!(u(&report, "threads") >= 5);
}

#[test]
fn time_intervals_and_region_stacks() {
    let work = Work::new();
    let exe = work.build_with_env("ws/phases.c", &["-O2"], INLINE);
    let report = run_ws(&work, &exe, &["6"], "interval=2ms");
    assert_eq!(report["interval_unit"], "wall-ns");
    let snaps = snapshots(&report);
    assert!(snaps.len() >= 3, "{} snapshots", snaps.len());
    let regions = report["regions"].as_array().unwrap();
    let name_of = |id: &Value| {
        regions[id.as_u64().unwrap() as usize]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let mut saw_stream_in_main = false;
    for w in snaps.windows(2) {
        assert!(w[0]["end_seconds"].as_f64() <= w[1]["start_seconds"].as_f64());
        assert_eq!(u(&w[0], "end"), u(&w[1], "start"));
    }
    for s in snaps {
        let stack: Vec<String> = s["regions"]
            .as_array()
            .unwrap()
            .iter()
            .map(name_of)
            .collect();
        if stack.first().map(String::as_str) == Some("main") && stack.iter().any(|n| n == "stream")
        {
            saw_stream_in_main = true;
        }
    }
    assert!(
        saw_stream_in_main,
        "some boundary falls in stream(), called from main"
    );
    let caches = report["caches"].as_array().unwrap();
    for c in caches {
        let share = c["fit_share"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&share));
        assert_eq!(u(c, "lines"), u(c, "size_bytes") / 64);
    }
}

#[test]
fn count_tool_on_a_working_set_build_is_refused_but_runs() {
    let work = Work::new();
    let exe = work.build_with_env("ws/lines.c", &["-O2"], INLINE);
    let report = work.path("c.json");
    let out = work.run_with_options(
        &exe,
        &[],
        &format!("tool=count:output={}", report.display()),
    );
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("built with KAGE_TOOL=working-set"),
        "{stderr}"
    );
    let r = kage_report::read_report(&report).unwrap();
    assert_eq!(r.tool, "working-set");
}

#[test]
fn wrapper_rejects_an_unknown_build_tool() {
    let work = Work::new();
    let src = c_dir().join("ws/lines.c");
    let out = std::process::Command::new(kage_cc())
        .args([src.to_str().unwrap(), "-o", "x"])
        .env("KAGE_TOOL", "workingset")
        .current_dir(work.dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("KAGE_TOOL='workingset'") && stderr.contains("working-set"),
        "{stderr}"
    );
}

/// Runs `exe` with its address space limited to 4 GiB: too little for the shadow's 8 TiB
/// reservation, however sparse.
fn run_with_little_address_space(work: &Work, exe: &Path) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(exe);
    command.current_dir(work.dir.path());
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.output().unwrap()
}

#[test]
fn a_program_whose_shadow_cannot_be_reserved_stops_before_its_code_runs() {
    let work = Work::new();
    let exe = work.build_with_env("ws/lines.c", &["-O2"], INLINE);
    let out = run_with_little_address_space(&work, &exe);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "the program's code ran");
    assert!(
        stderr.contains(
            "cannot reserve 8192 GiB of address space for the working-set shadow at 0x7fff8000.."
        ) && stderr.contains("this program was built for the working-set tool"),
        "{stderr}"
    );
    // A build for another tool has no marks and runs without the shadow, silently.
    let exe = work.build("ws/lines.c", &["-O2"]);
    let out = run_with_little_address_space(&work, &exe);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3\n");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("shadow"));
}

#[test]
fn a_mapping_in_the_shadows_range_stops_a_build_with_marks_and_not_one_with_call_hooks() {
    let work = Work::new();
    // Built with marks: the runtime names the mapping and ends the program before main.
    let exe = work.build_with_env("ws/occupied.c", &["-O2"], INLINE);
    let out = work.run_with_options(&exe, &[], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "main ran");
    assert!(
        stderr.contains("(10000000000-10000001000 r--p 00000000 00:00 0 is there)"),
        "{stderr}"
    );
    // Built with call hooks: the shadow goes elsewhere and the count is exact.
    let exe = work.build_for_every_tool("ws/occupied.c", &["-O2"]);
    let (report, stderr) = run_ws_with_stderr(&work, &exe, &[], "tool=working-set");
    assert!(!stderr.contains("kage:"), "{stderr}");
    // One byte in each of 100 lines, read and written; printf reads two of them.
    assert_eq!(u(&report, "total_lines"), 100);
}
