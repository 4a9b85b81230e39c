//! The analyses on loop nests (`KAGE_TOOL=interpolate`, `dependences`): on the nests of
//! `tests/c/nests/kernels.c`, whose answers are derived on paper in its comments, the
//! strides, trip counts, dependences and parallel levels must be exactly those, at -O0, -O2
//! and -O3, with default sampling and with every iteration instrumented; the program's
//! output must be its plain build's.

mod e2e_support;
use e2e_support::*;

use std::process::Command;

use kage_report::{read_report, AccessFit, AnalysedNest, Report};

const LEVELS: [&str; 3] = ["-O0", "-O2", "-O3"];
const SOURCE: &str = "nests/kernels.c";
/// A row of the kernels' `double [64][64]` arrays, in bytes.
const ROW: i64 = 64 * 8;

fn plain_output(work: &Work) -> String {
    let exe = work.path("plain");
    let status = Command::new("clang-22")
        .args(["-O2", "-w"])
        .arg(c_dir().join(SOURCE))
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .status()
        .unwrap();
    assert!(status.success());
    String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap()
}

/// Builds the kernels for `tool` at `level` (with `-g` when `named`), runs them with
/// `options`, checks their output, and returns the report.
fn analyse(work: &Work, tool: &str, level: &str, named: bool, options: &str) -> Report {
    let flags: Vec<&str> = if named {
        vec![level, "-g"]
    } else {
        vec![level]
    };
    let exe = work.build_with_env(SOURCE, &flags, &[("KAGE_TOOL", tool)]);
    let report_path = work.path("nests.json");
    let _ = std::fs::remove_file(&report_path);
    let out = work.run_with_options(
        &exe,
        &[],
        &format!("{options}:output={}", report_path.display()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), plain_output(work));
    let report = read_report(&report_path).unwrap();
    assert_eq!(report.tool, tool);
    report
}

fn nest<'a>(nests: &'a [AnalysedNest], function: &str) -> &'a AnalysedNest {
    (nests.iter())
        .find(|n| n.function == function)
        .unwrap_or_else(|| panic!("no nest in {function}: {nests:#?}"))
}

/// The nest's access of `kind` to `variable` (the first one, in source order).
fn access<'a>(nest: &'a AnalysedNest, kind: &str, variable: &str) -> &'a AccessFit {
    (nest.accesses.iter())
        .find(|a| a.kind == kind && a.variable.as_deref() == Some(variable))
        .unwrap_or_else(|| panic!("no {kind} of {variable} in {}: {nest:#?}", nest.function))
}

fn strides(a: &AccessFit) -> Vec<i64> {
    let strides = a
        .strides
        .as_ref()
        .unwrap_or_else(|| panic!("not linear: {a:#?}"));
    strides
        .iter()
        .map(|s| s.expect("a stride per level"))
        .collect()
}

fn base(a: &AccessFit) -> i64 {
    i64::from_str_radix(a.base.as_ref().unwrap().trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn interpolation_fits_the_strides_and_trip_counts_derived_on_paper() {
    let work = Work::new();
    for level in LEVELS {
        let report = analyse(&work, "interpolate", level, true, "");
        let nests = report.analysed_nests().unwrap();
        let context = format!("{level}: {nests:#?}");

        // C[i][j] = A[i][j] + B[j][i]: rows and columns, in bytes and in elements.
        let n = nest(&nests, "all_parallel");
        assert_eq!(strides(access(n, "load", "A")), [ROW, 8], "{context}");
        assert_eq!(strides(access(n, "load", "B")), [8, ROW], "{context}");
        assert_eq!(strides(access(n, "store", "C")), [ROW, 8], "{context}");
        let elements = access(n, "load", "B").element_strides.clone().unwrap();
        assert_eq!(elements, [Some(1), Some(64)]);
        assert_eq!(n.summary.instructions, 3);
        assert_eq!(n.summary.linear_instructions, 3);
        // 10 x 10 sampled iterations, one access each.
        assert_eq!(access(n, "load", "A").samples, 100);
        let trip = &n.trip_counts[0];
        assert!(trip.linear, "{context}");
        assert_eq!((trip.level, trip.constant), (2, Some(64)));
        assert_eq!(trip.coefficients, Some(vec![Some(0)]));

        // A[i][j] = A[i-1][j] from i = 1: the store's base is one row past the load's.
        let n = nest(&nests, "outer_carried");
        let (load, store) = (access(n, "load", "A"), access(n, "store", "A"));
        assert_eq!(base(store) - base(load), ROW, "{context}");
        // B[i][j] = B[i][j-1] from j = 1: one element.
        let n = nest(&nests, "inner_carried");
        assert_eq!(
            base(access(n, "store", "B")) - base(access(n, "load", "B")),
            8
        );
        assert_eq!(n.trip_counts[0].constant, Some(63));

        // Triangular: the inner loop runs vi1 times (j < i).
        let n = nest(&nests, "triangular");
        let trip = &n.trip_counts[0];
        assert!(trip.linear, "{context}");
        assert_eq!(trip.constant, Some(0));
        assert_eq!(trip.coefficients, Some(vec![Some(1)]));
        assert_eq!((trip.min, trip.max), (0, 9));
        assert_eq!(strides(access(n, "load", "A")), [8, ROW]);

        // Histogram: the index array is linear, the counters are not.
        let n = nest(&nests, "histogram");
        assert_eq!(strides(access(n, "load", "idx")), [4]);
        for kind in ["load", "store"] {
            let hist = access(n, kind, "hist");
            assert_eq!(hist.status, "non-linear", "{context}");
            let seen = hist.seen.as_ref().unwrap();
            assert!(!seen.steps.is_empty() && seen.steps.iter().all(|s| s % 4 == 0));
        }

        // A list laid out in order is linear by accident (16-byte nodes); shuffled, not.
        let n = nest(&nests, "walk_in_order");
        assert!(n.accesses.iter().all(|a| a.linear), "{context}");
        assert!(n.accesses.iter().all(|a| strides(a) == [16]));
        let n = nest(&nests, "walk_shuffled");
        assert!(
            n.accesses.iter().all(|a| a.status == "non-linear"),
            "{context}"
        );

        // A pointer walking ints: 4 bytes per iteration, the read one element ahead.
        let n = nest(&nests, "shift");
        let (load, store) = (access(n, "load", "p"), access(n, "store", "p"));
        assert_eq!((strides(load), strides(store)), (vec![4], vec![4]));
        assert_eq!(base(load) - base(store), 4);

        // Each nest names the region of its outermost loop.
        for n in &nests {
            let region = &report.regions[n.region.expect("a region") as usize];
            assert_eq!(
                (region.line, region.name.as_str()),
                (n.line, n.function.as_str())
            );
        }
        // Dependences are the other tool's.
        assert!(nests
            .iter()
            .all(|n| n.dependences.is_none() && n.parallel_levels.is_none()));
    }
}

/// The parallel levels, the dependences and the suggestion each nest gets, with `options`.
fn check_dependences(report: &Report, context: &str) {
    let nests = report.analysed_nests().unwrap();
    let context = format!("{context}: {nests:#?}");
    let parallel = |f: &str| nest(&nests, f).parallel_levels.clone().unwrap();
    let expected: [(&str, &[u32]); 14] = [
        ("all_parallel", &[1, 2]),
        ("outer_carried", &[2]),
        ("inner_carried", &[1]),
        ("gauss_seidel", &[]),
        ("reduction", &[1]),
        ("histogram", &[]),
        ("walk_in_order", &[]),
        ("walk_shuffled", &[]),
        ("triangular", &[1, 2]),
        ("shift", &[]),
        ("lcg", &[]),
        ("dot_roots", &[1]),
        ("calls", &[]),
        ("local_array", &[]),
    ];
    for (function, levels) in expected {
        assert_eq!(parallel(function), levels, "{function}: {context}");
    }
    let deps = |f: &str| nest(&nests, f).dependences.clone().unwrap();
    // A[i][j] = A[i-1][j]: flow from the store to the next row's load.
    let d = deps("outer_carried");
    assert_eq!(d.len(), 1, "{context}");
    assert_eq!((d[0].level, d[0].kind.as_str()), (1, "flow"));
    assert_eq!(d[0].distance, Some(vec![1, 0]));
    assert!(!d[0].from_samples);
    let d = deps("inner_carried");
    assert_eq!(d.len(), 1, "{context}");
    assert_eq!((d[0].level, d[0].distance.clone()), (2, Some(vec![0, 1])));
    // Gauss-Seidel: flow and anti at both levels.
    let mut kinds: Vec<(u32, String)> = (deps("gauss_seidel").into_iter())
        .map(|d| (d.level, d.kind))
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [(1, "anti"), (1, "flow"), (2, "anti"), (2, "flow")].map(|(l, k)| (l, k.to_string()))
    );
    // The histogram's dependences are seen in its sampled addresses only.
    let n = nest(&nests, "histogram");
    assert!(deps("histogram")
        .iter()
        .all(|d| d.from_samples && d.level == 1));
    assert_eq!(n.levels_on_samples, Some(vec![1]));
    // Scalars: the reduction is a clause, the recurrences are carried.
    let n = nest(&nests, "reduction");
    let suggestion = n.suggestion.as_deref().unwrap();
    assert!(
        suggestion.starts_with("#pragma omp parallel for reduction(+:sum)"),
        "{suggestion}"
    );
    for (function, variable) in [
        ("lcg", "seed"),
        ("walk_in_order", "p"),
        ("walk_shuffled", "p"),
    ] {
        let d = deps(function);
        assert!(
            d.iter()
                .any(|d| d.source.is_none() && d.variable.as_deref() == Some(variable)),
            "{function}: {context}"
        );
    }
    // *p = *(p + 1): the read comes an iteration before the write of the same bytes.
    let d = deps("shift");
    assert_eq!(d.len(), 1, "{context}");
    assert_eq!(
        (d[0].kind.as_str(), d[0].distance.clone()),
        ("anti", Some(vec![1]))
    );
    let n = nest(&nests, "outer_carried");
    assert!(n.suggestion.as_deref().unwrap().contains("level 2"));
    // A fused multiply-add accumulates too; sqrt hides no access; `bump` does.
    let suggestion = nest(&nests, "dot_roots").suggestion.clone().unwrap();
    assert!(suggestion.contains("reduction(+:dot)"), "{suggestion}");
    let d = deps("calls");
    assert_eq!(d.len(), 1, "{context}");
    assert_eq!(
        (d[0].kind.as_str(), d[0].variable.as_deref()),
        ("call", Some("bump"))
    );
    // t[4] is written by both levels, not analysed: named with -g.
    let d = deps("local_array");
    assert_eq!(d.len(), 2, "{context}");
    assert!(d.iter().all(|d| d.kind == "local-array"), "{context}");
}

#[test]
fn dependences_find_the_parallel_levels_derived_on_paper() {
    let work = Work::new();
    for level in LEVELS {
        let report = analyse(&work, "dependences", level, true, "");
        check_dependences(&report, level);
    }
}

#[test]
fn every_iteration_instrumented_gives_the_same_answers() {
    let work = Work::new();
    let report = analyse(
        &work,
        "dependences",
        "-O2",
        true,
        "sample_iterations=1000000:sample_entries=1000000",
    );
    check_dependences(&report, "sampling off");
    let nests = report.analysed_nests().unwrap();
    // Every access of every iteration: 64 x 64 for the square nests.
    assert_eq!(
        access(nest(&nests, "all_parallel"), "load", "A").samples,
        64 * 64
    );
}

#[test]
fn without_debug_information_globals_keep_their_names_and_the_text_reads_as_remarks() {
    let work = Work::new();
    let report = analyse(&work, "dependences", "-O2", false, "");
    let nests = report.analysed_nests().unwrap();
    let n = nest(&nests, "all_parallel");
    assert_eq!(access(n, "store", "C").kind, "store");
    // Locals are named by -g only: the clause names what it can and says what it cannot.
    let n = nest(&nests, "reduction");
    assert!(n.scalars.iter().all(|s| s.variable.is_none()));
    let suggestion = n.suggestion.as_deref().unwrap();
    assert!(suggestion.contains("build with -g"), "{suggestion}");

    let path = work.path("nests.json");
    let text = kage_report_output(&path, &[]);
    let line = |needle: &str| text.lines().any(|l| l.contains(needle));
    let (all_parallel, outer) = (nest(&nests, "all_parallel"), nest(&nests, "outer_carried"));
    let remark = |n: &AnalysedNest, verdict: &str| {
        format!("kernels.c:{}: remark: level 1 carries {verdict}", n.line)
    };
    assert!(line(&remark(all_parallel, "no dependence")), "{text}");
    assert!(line(&remark(outer, "a dependence")), "{text}");
    let a = access(outer, "store", "A").line;
    assert!(
        line(&format!(
            "dependence: level 1 carries a flow dependence on A: line {a} store -> line {a} \
             load, distance (1, 0)"
        )),
        "{text}"
    );
    assert!(line("store C: linear, stride per iteration of the levels around it: 512 B (64 elements), 8 B (1 element)"), "{text}");
    assert!(line("memory instructions"), "{text}");
}

/// Per function of `tests/c/nests/suite.c`: the parallel levels its comment derives by hand
/// (`parallel: 1, 2.` or `parallel: none.`), and the first lines of the loops its authors
/// run in parallel (the line after each `#pragma omp parallel for`).
fn hand_derived(source: &str) -> Vec<(String, Vec<u32>, Vec<u32>)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut out: Vec<(String, Vec<u32>, Vec<u32>)> = Vec::new();
    let mut parallel = None;
    for (i, line) in lines.iter().enumerate() {
        if let Some(rest) = line.split("parallel: ").nth(1) {
            let list = rest.split('.').next().unwrap();
            parallel = Some(if list == "none" {
                Vec::new()
            } else {
                list.split(", ").map(|n| n.parse().unwrap()).collect()
            });
        }
        let is_definition = !line.starts_with(' ') && line.contains('(') && line.ends_with('{');
        if let Some(levels) = parallel.take_if(|_| is_definition) {
            let name = line.split('(').next().unwrap().rsplit(' ').next().unwrap();
            out.push((name.to_string(), levels, Vec::new()));
        }
        if line.trim().starts_with("#pragma omp parallel for") {
            out.last_mut().unwrap().2.push(i as u32 + 2);
        }
    }
    out
}

#[test]
fn dependences_on_ompscr_and_polybench_kernels_match_the_hand_derivation() {
    let source = std::fs::read_to_string(c_dir().join("nests/suite.c")).unwrap();
    let expected = hand_derived(&source);
    assert_eq!(expected.len(), 13, "{expected:?}");
    let work = Work::new();
    for level in ["-O0", "-O2"] {
        let exe = work.build_with_env(
            "nests/suite.c",
            &[level, "-g"],
            &[("KAGE_TOOL", "dependences")],
        );
        let report = work.run_report(&exe, &[], 0);
        let nests = report.analysed_nests().unwrap();
        for (function, parallel, marked) in &expected {
            let n = nest(&nests, function);
            let found = n.parallel_levels.clone().unwrap();
            assert_eq!(&found, parallel, "{level} {function}: {n:#?}");
            // The loops the authors run in parallel are found parallel, but floyd-warshall's
            // (see its comment: the dependences are in memory, not in values).
            for line in marked {
                let at = n.levels.iter().find(|l| l.line == *line);
                let at = at.unwrap_or_else(|| panic!("{function}: no level at line {line}"));
                assert_eq!(
                    found.contains(&at.level),
                    *function != "floyd_warshall",
                    "{level} {function} line {line}"
                );
            }
            // The directive goes before the outermost parallel level, with the reductions
            // OmpSCR writes.
            let suggestion = n.suggestion.clone().unwrap();
            let reduction = match function.as_str() {
                "jacobi_sweep" => Some("reduction(+:error)"),
                "pi" => Some("reduction(+:sum)"),
                "mandel" => Some("reduction(+:outside)"),
                _ => None,
            };
            if let Some(clause) = reduction {
                assert!(suggestion.contains(clause), "{function}: {suggestion}");
            }
        }
    }
}

#[test]
fn cxx_accessors_are_seen_through() {
    let work = Work::new();
    let plain = work.path("plain_vectors");
    let status = Command::new("clang++-22")
        .args(["-O2", "-w"])
        .arg(c_dir().join("nests/vectors.cpp"))
        .arg("-o")
        .arg(&plain)
        .status()
        .unwrap();
    assert!(status.success());
    let expected = Command::new(&plain).output().unwrap().stdout;
    for level in ["-O0", "-O2"] {
        let exe = work.build_with_env(
            "nests/vectors.cpp",
            &[level, "-g"],
            &[("KAGE_TOOL", "dependences")],
        );
        let report_path = work.path("vectors.json");
        let out = work.run_with_options(&exe, &[], &format!("output={}", report_path.display()));
        assert_eq!(out.stdout, expected);
        let nests = read_report(&report_path).unwrap().analysed_nests().unwrap();
        let find = |prefix: &str| {
            (nests.iter())
                .find(|n| n.function.starts_with(prefix))
                .unwrap_or_else(|| panic!("{level}: no {prefix}: {nests:#?}"))
        };
        let dot = find("dot(");
        assert_eq!(dot.parallel_levels, Some(vec![1]), "{level}: {dot:#?}");
        assert!(dot
            .suggestion
            .as_deref()
            .unwrap()
            .contains("reduction(+:s)"));
        let scale = find("scale(");
        assert_eq!(scale.parallel_levels, Some(vec![1]), "{level}: {scale:#?}");
        assert!(scale
            .scalars
            .iter()
            .any(|s| s.kind == "induction" && s.step == Some(8)));
        let prefix = find("prefix(");
        assert_eq!(prefix.parallel_levels, Some(vec![]), "{level}: {prefix:#?}");
        let d = prefix.dependences.as_ref().unwrap();
        assert_eq!(d.len(), 1, "{level}: {prefix:#?}");
        assert_eq!(
            (d[0].kind.as_str(), d[0].distance.clone()),
            ("flow", Some(vec![1]))
        );
        assert_eq!(d[0].variable.as_deref(), Some("v"));
    }
}

/// Four threads run one nest, each on its own array: eight sampled entries in all, merged
/// across threads, each with its own base and the same strides.
#[test]
fn threads_merge_their_sampled_entries() {
    let work = Work::new();
    let source = std::fs::read_to_string(c_dir().join("loops/threads.c")).unwrap();
    let line = source
        .lines()
        .position(|l| l.contains("loop:threads"))
        .unwrap()
        + 1;
    for level in ["-O0", "-O2"] {
        let exe = work.build_with_env(
            "loops/threads.c",
            &[level, "-g"],
            &[
                ("KAGE_TOOL", "dependences"),
                ("KAGE_LOOPS", &format!("threads.c:{line}")),
            ],
        );
        let report = work.run_report(&exe, &[], 0);
        let nests = report.analysed_nests().unwrap();
        assert_eq!(nests.len(), 1, "{level}: {nests:#?}");
        let n = &nests[0];
        assert_eq!(n.entries_analysed, 8, "{level}");
        for a in &n.accesses {
            // g[i][j] of double[20][15]: 120 bytes a row; the bases differ per thread.
            assert_eq!(strides(a), [120, 8], "{level}: {a:#?}");
            assert_eq!((a.entries, a.linear_entries), (8, 8));
        }
        assert_eq!(n.parallel_levels, Some(vec![1, 2]), "{level}: {n:#?}");
    }
}
