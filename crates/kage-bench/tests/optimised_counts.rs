//! The count tool's calls per source function in `-O2` and `-O3` builds against the `-O0`
//! build of the same program and input, on the suite's programs full of inlined calls (quick
//! sizes). At `-O0` nothing is inlined: its counts are the calls the source made. At `-O2`
//! and `-O3` a function is its own calls plus every call of it the optimiser inlined
//! (README, "Optimised builds"); the optimiser may leave an inlined call no code of its own
//! to count (fewer calls: allowed, by design; `-O3`'s argument promotion moves small
//! functions' loads into their callers), but code it moved, merged, duplicated or unswitched
//! must not count calls the source never made.
//!
//! Only functions of the program's own sources are compared: at `-O0` the C library's and
//! libstdc++'s header functions are partly calls into the uninstrumented libraries
//! (`atoi`, `std::string`'s members declared `extern template`), so their `-O0` counts
//! are not the source's.
//!
//! `cargo nextest run --release -p kage-bench --test optimised_counts --no-capture` prints
//! every function counted more often, and per program how many are counted less often.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::kage_bench_quick;
use kage_report::{read_report, CountStats, RegionKind, Report};

const PROGRAMS: &[&str] = &["stl", "lua", "sqlite", "zstd", "bzip2", "pcre2"];

/// Calls per source function (name, file), summed over every function region of it.
fn calls(report: &Report) -> BTreeMap<(String, String), u64> {
    let mut calls = BTreeMap::new();
    for region in report
        .regions
        .iter()
        .filter(|r| r.kind == RegionKind::Function)
    {
        let stats = CountStats::of(region).expect("count fields");
        *calls
            .entry((region.name.clone(), region.file.clone()))
            .or_insert(0) += stats.instances;
    }
    calls
}

/// A file of the C library's or the compiler's headers, not of the program.
fn system_header(file: &str) -> bool {
    file.starts_with("/usr/")
}

#[test]
fn an_optimised_build_counts_no_call_the_source_did_not_make() {
    let work = tempfile::tempdir().unwrap();
    kage_bench_quick(
        work.path(),
        &[
            "--tool",
            "count",
            "--filter",
            &PROGRAMS.join(","),
            "--variant",
            "",
            "--variant",
            "-O3",
            "--variant",
            "-O0",
        ],
    );
    let mut over_counted = Vec::new();
    for program in PROGRAMS {
        let read = |variant: usize| {
            let path = work
                .path()
                .join(format!("runs/{program}/kage.{program}.{variant}.json"));
            read_report(Path::new(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let plain = read(2);
        assert!(plain.complete, "{program}");
        let at_o0 = calls(&plain);
        assert!(
            at_o0.len() > 10,
            "{program}: {} functions at -O0",
            at_o0.len()
        );
        for (variant, level) in [(0, "-O2"), (1, "-O3")] {
            let optimised = read(variant);
            assert!(optimised.complete, "{program} {level}");
            over_counted.extend(compare(program, level, &calls(&optimised), &at_o0));
        }
    }
    assert!(
        over_counted.is_empty(),
        "calls the source did not make:\n{}",
        over_counted.join("\n")
    );
}

/// The functions `optimised` (a build at `level`) counts more often than `at_o0`, printed with
/// how many it counts less often.
fn compare(
    program: &str,
    level: &str,
    optimised: &BTreeMap<(String, String), u64>,
    at_o0: &BTreeMap<(String, String), u64>,
) -> Vec<String> {
    let main = |calls: &BTreeMap<(String, String), u64>| {
        (calls.iter())
            .filter(|((name, _), _)| name == "main")
            .map(|(_, &n)| n)
            .sum::<u64>()
    };
    assert_eq!(
        (main(optimised), main(at_o0)),
        (1, 1),
        "{program} {level}: main"
    );
    let mut over_counted = Vec::new();
    let (mut under, mut gone) = (0, 0);
    for ((name, file), &o2) in optimised {
        if system_header(file) {
            continue;
        }
        let o0 = at_o0
            .get(&(name.clone(), file.clone()))
            .copied()
            .unwrap_or(0);
        if o2 > o0 {
            eprintln!("{program}: {name} ({file}): {o2} calls at {level}, {o0} at -O0");
            over_counted.push(format!("{program} {level}: {name}: {o2} calls for {o0}"));
        }
    }
    for ((name, file), &o0) in at_o0 {
        if system_header(file) || o0 == 0 {
            continue;
        }
        match optimised
            .get(&(name.clone(), file.clone()))
            .copied()
            .unwrap_or(0)
        {
            0 => gone += 1,
            o2 if o2 < o0 => under += 1,
            _ => {}
        }
    }
    eprintln!(
        "{program}: {} functions ran at -O0; at {level} {} counted more often, {under} less \
         often, {gone} not at all",
        at_o0.values().filter(|&&n| n > 0).count(),
        over_counted.len()
    );
    over_counted
}
