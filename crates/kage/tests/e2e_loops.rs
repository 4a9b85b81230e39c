//! Loop nests (`KAGE_TOOL=loops`): selected by `KAGE_LOOPS=file:line` or `#pragma kage
//! profile`, versioned, and sampled. Every program's output must be what its plain build
//! prints, at -O0, -O2 and -O3; the iterations and sampled iterations the report gives per
//! nest and level must be what the program's own model of the sampling rule computes
//! (`tests/c/loops/shapes.c` prints it), or what is derived here by hand.

mod e2e_support;
use e2e_support::*;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const LEVELS: [&str; 3] = ["-O0", "-O2", "-O3"];

/// The line of `tests/c/loops/<source>` that holds `loop:<name>` (the loop's first line).
fn marked_line(source: &str, name: &str) -> u32 {
    let text = std::fs::read_to_string(c_dir().join("loops").join(source)).unwrap();
    let mark = format!("loop:{name} ");
    let index = (text.lines())
        .position(|l| l.contains(&mark) || l.ends_with(&format!("loop:{name}")))
        .unwrap_or_else(|| panic!("no loop:{name} in {source}"));
    index as u32 + 1
}

/// The program's output with a plain `clang-22 -O2` build (no Kage).
fn plain_output(work: &Work, source: &str, args: &[&str]) -> String {
    let src = c_dir().join("loops").join(source);
    let exe = work.path(&format!("plain_{}", source.replace('.', "_")));
    let compiler = if source.ends_with(".cpp") {
        "clang++-22"
    } else {
        "clang-22"
    };
    let status = Command::new(compiler)
        .args(["-O2", "-w"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-lpthread")
        .status()
        .unwrap();
    assert!(status.success());
    run(&exe, args, None).0
}

/// Runs `exe` with the loops tool's `options`; its standard output and its report.
fn run(exe: &Path, args: &[&str], options: Option<(&Work, &str)>) -> (String, Value) {
    let mut command = Command::new(exe);
    command.args(args);
    let report_path = options.map(|(work, _)| work.path("loops.json"));
    if let (Some((_, options)), Some(path)) = (options, &report_path) {
        let _ = std::fs::remove_file(path);
        command.env(
            "KAGE_OPTIONS",
            format!("{options}:output={}", path.display()),
        );
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{} failed: {}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report_path.map_or(Value::Null, |path| {
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    });
    (String::from_utf8(out.stdout).unwrap(), report)
}

/// Per nest, keyed by (function, first line): entries, sampled entries, and per level
/// (iterations, instrumented iterations).
type Nests = BTreeMap<(String, u64), (u64, u64, Vec<(u64, u64)>)>;

fn nests(report: &Value) -> Nests {
    assert_eq!(report["tool"], "loops", "{report}");
    let mut out = Nests::new();
    for nest in report["loops"]["nests"].as_array().expect("loops.nests") {
        let levels = (nest["levels"].as_array().unwrap().iter())
            .map(|l| {
                (
                    l["iterations"].as_u64().unwrap(),
                    l["instrumented_iterations"].as_u64().unwrap(),
                )
            })
            .collect();
        let key = (
            nest["function"].as_str().unwrap().to_string(),
            nest["line"].as_u64().unwrap(),
        );
        let value = (
            nest["entries"].as_u64().unwrap(),
            nest["sampled_entries"].as_u64().unwrap(),
            levels,
        );
        assert!(out.insert(key.clone(), value).is_none(), "{key:?} twice");
    }
    out
}

/// The model lines `shapes.c` prints, as [`Nests`] keyed by its loops' lines.
fn modelled(output: &str) -> Nests {
    let mut out = Nests::new();
    for line in output.lines().filter_map(|l| l.strip_prefix("model ")) {
        let mut words = line.split_whitespace();
        let name = words.next().unwrap().to_string();
        let field = |key: &str| -> Vec<u64> {
            let text = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap();
            text.split(',').map(|n| n.parse().unwrap()).collect()
        };
        let (iterations, instrumented) = (field("iterations="), field("instrumented="));
        let levels: Vec<(u64, u64)> = iterations.into_iter().zip(instrumented).collect();
        // A single-level nest models a second level of zeros.
        let depth = if levels[1] == (0, 0) { 1 } else { 2 };
        out.insert(
            (name.clone(), marked_line("shapes.c", &name) as u64),
            (
                field("entries=")[0],
                field("sampled=")[0],
                levels[..depth].to_vec(),
            ),
        );
    }
    out
}

#[test]
fn every_loop_shape_is_counted_and_sampled_as_the_rule_says() {
    let work = Work::new();
    let selection: Vec<String> = [
        "nest2",
        "while_calls",
        "do_loop",
        "goto_loop",
        "find_first",
        "rec",
    ]
    .iter()
    .map(|name| format!("shapes.c:{}", marked_line("shapes.c", name)))
    .collect();
    let selection = selection.join(",");
    let expected_output = plain_output(&work, "shapes.c", &[]);
    for level in LEVELS {
        let exe = work.build_with_env(
            "loops/shapes.c",
            &[level],
            &[("KAGE_TOOL", "loops"), ("KAGE_LOOPS", &selection)],
        );
        // The defaults (10 iterations, 8 entries), then other settings of the rule.
        for (args, options) in [
            (vec![], "tool=loops"),
            (vec!["3", "2"], "sample_iterations=3:sample_entries=2"),
            (vec!["0", "5"], "sample_iterations=0:sample_entries=5"),
            (
                vec!["100", "1000"],
                "sample_iterations=100:sample_entries=1000",
            ),
        ] {
            let (output, report) = run(&exe, &args, Some((&work, options)));
            if args.is_empty() {
                assert_eq!(
                    output, expected_output,
                    "{level}: the program's output changed"
                );
            }
            assert_eq!(nests(&report), modelled(&output), "{level} {options}");
        }
    }
}

#[test]
fn pragmas_select_loops_in_templates_lambdas_and_functions() {
    let work = Work::new();
    let expected_output = plain_output(&work, "pragma.cpp", &[]);
    let mut seen = Vec::new();
    for level in LEVELS {
        let exe = work.build_with_env("loops/pragma.cpp", &[level], &[("KAGE_TOOL", "loops")]);
        let (output, report) = run(&exe, &[], Some((&work, "tool=loops")));
        assert_eq!(output, expected_output, "{level}");
        let found = nests(&report);
        for nest in report["loops"]["nests"].as_array().unwrap() {
            assert_eq!(nest["selected_by"], "pragma", "{nest}");
        }
        // 12 rounds; every vector has 30 elements, and the nests of outer_loops(n) run for
        // n = 3..14.
        let vector = (12, 8, vec![(360, 80)]);
        let lines: Vec<(String, u64)> = found.keys().cloned().collect();
        let line_of = |name: &str| marked_line("pragma.cpp", name) as u64;
        let expect = |function_part: &str, line: u64| -> &(u64, u64, Vec<(u64, u64)>) {
            let key = (lines.iter())
                .find(|(f, l)| f.contains(function_part) && *l == line)
                .unwrap_or_else(|| {
                    panic!("{level}: no nest of {function_part} at {line}: {lines:?}")
                });
            &found[key]
        };
        assert_eq!(expect("total<int>", line_of("total")), &vector, "{level}");
        assert_eq!(
            expect("total<double>", line_of("total")),
            &vector,
            "{level}"
        );
        assert_eq!(expect("operator()", line_of("lambda")), &vector, "{level}");
        // outer_loops' first nest: n outer iterations and n(n-1)/2 inner ones per call.
        let (outer, inner): (u64, u64) = (3..15)
            .map(|n| (n, n * (n - 1) / 2))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let first = expect("outer_loops", line_of("outer_loops.first"));
        assert_eq!(
            (first.0, first.1, first.2[0].0, first.2[1].0),
            (12, 8, outer, inner),
            "{level}"
        );
        // The second is a Collatz walk from n: its steps, counted by the program's own
        // output would need a model; its first 8 calls sample min(steps, 10) each.
        let second = expect("outer_loops", line_of("outer_loops.second"));
        let steps = |mut k: u64| {
            let mut s = 0;
            while k > 1 {
                k = if k % 2 == 1 { 3 * k + 1 } else { k / 2 };
                s += 1;
            }
            s
        };
        let total: u64 = (3..15).map(steps).sum();
        let sampled: u64 = (3..11).map(|n| steps(n).min(10)).sum();
        assert_eq!(second, &(12, 8, vec![(total, sampled)]), "{level}");
        assert_eq!(found.len(), 5, "{level}: {lines:?}");
        seen.push(lines);
    }
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "the same nests at every level: {seen:?}"
    );
}

#[test]
fn threads_share_a_nest_and_its_sampling() {
    let work = Work::new();
    let line = marked_line("threads.c", "threads");
    let expected_output = plain_output(&work, "threads.c", &[]);
    for level in ["-O0", "-O2"] {
        let exe = work.build_with_env(
            "loops/threads.c",
            &[level],
            &[
                ("KAGE_TOOL", "loops"),
                ("KAGE_LOOPS", &format!("threads.c:{line}")),
            ],
        );
        let (output, report) = run(&exe, &[], Some((&work, "tool=loops")));
        assert_eq!(output, expected_output, "{level}");
        let found = nests(&report);
        assert_eq!(
            found.values().collect::<Vec<_>>(),
            [&(20, 8, vec![(400, 80), (6000, 800)])],
            "{level}"
        );
    }
}

#[test]
fn a_selection_that_names_no_loop_is_an_error_that_names_it() {
    let work = Work::new();
    let src = c_dir().join("loops/shapes.c");
    // kage-cc compiling shapes.c with `selection`: its stderr; the build must fail.
    let failing_build = |selection: &str| {
        let out = Command::new(kage_cc())
            .args(["-O2", "-c"])
            .arg(&src)
            .arg("-o")
            .arg(work.path("x.o"))
            .env("KAGE_TOOL", "loops")
            .env("KAGE_LOOPS", selection)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{selection} built");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = failing_build("shapes.c:3");
    let first_loop = marked_line("shapes.c", "nest2").to_string();
    assert!(
        stderr.contains("no loop starts at shapes.c:3") && stderr.contains(&first_loop),
        "{stderr}"
    );
    let stderr = failing_build("shapes.c");
    assert!(stderr.contains("'shapes.c' is not file:line"), "{stderr}");
}

#[test]
fn a_count_report_selects_its_hottest_loop_nests() {
    let work = Work::new();
    let exe = work.build("loops/hot.c", &["-O2"]);
    let count = work.run_report(&exe, &[], 0);
    assert_eq!(count.tool, "count");
    let report_path = work.path("count.json");
    std::fs::copy(work.path("report.json"), &report_path).unwrap();
    // Relative: the wrapper runs in the scratch directory.
    let selection = "@count.json";
    let expected_output = plain_output(&work, "hot.c", &[]);
    for level in ["-O0", "-O2"] {
        let exe = work.build_with_env(
            "loops/hot.c",
            &[level],
            &[("KAGE_TOOL", "loops"), ("KAGE_LOOPS", selection)],
        );
        let (output, report) = run(&exe, &[], Some((&work, "tool=loops")));
        assert_eq!(output, expected_output, "{level}");
        let lines: Vec<u64> = (report["loops"]["nests"].as_array().unwrap().iter())
            .inspect(|nest| assert_eq!(nest["selected_by"], "report", "{nest}"))
            .map(|nest| nest["line"].as_u64().unwrap())
            .collect();
        let hot = |name| marked_line("hot.c", name) as u64;
        assert_eq!(
            lines,
            [hot("hot"), hot("warm")],
            "{level}: the hot nests, not the cold loop"
        );
    }
}

#[test]
fn a_reset_restarts_sampling() {
    // After kage_reset: 5 entries of 6 iterations; with sample_entries=3 and
    // sample_iterations=4, 3 sampled entries of 4 instrumented iterations each. Before the
    // reset the samples were all taken (12 entries): the entries after it are sampled
    // again, and the counts of the original's own counters start from the reset.
    let work = Work::new();
    let line = marked_line("reset.c", "sweep");
    for level in ["-O0", "-O2"] {
        let exe = work.build_with_env(
            "loops/reset.c",
            &[level],
            &[
                ("KAGE_TOOL", "loops"),
                ("KAGE_LOOPS", &format!("reset.c:{line}")),
            ],
        );
        let (_, report) = run(
            &exe,
            &[],
            Some((&work, "sample_iterations=4:sample_entries=3")),
        );
        assert_eq!(
            nests(&report).into_values().collect::<Vec<_>>(),
            [(5, 3, vec![(30, 12)])],
            "{level}"
        );
    }
}

#[test]
fn an_exception_out_of_a_nest_keeps_its_entry_and_loses_only_its_iterations() {
    let work = Work::new();
    let expected_output = plain_output(&work, "unwind.cpp", &[]);
    for level in LEVELS {
        let exe = work.build_with_env("loops/unwind.cpp", &[level], &[("KAGE_TOOL", "loops")]);
        let (output, report) = run(&exe, &[], Some((&work, "tool=loops")));
        assert_eq!(output, expected_output, "{level}");
        assert_eq!(
            nests(&report).into_values().collect::<Vec<_>>(),
            [(12, 8, vec![(120, 64)])],
            "{level}"
        );
    }
}
