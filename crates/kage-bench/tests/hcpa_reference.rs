//! The HCPA runtime agrees exactly with the reference model (`tests/hcpa/reference.py`,
//! replaying the runtime's timestamp trace) on real programs of the suite: Lua running a
//! small script (its parser, code generator, VM, string library and table sort), SQLite
//! inserting and querying three rows, zstd compressing 1 KB and PCRE2 matching ten patterns
//! (backtracking, backreferences, lookarounds, its DFA matcher) over half a KB of lines,
//! built as the suite builds them (-O2, inlined calls as regions). Every region's instances, work, self work, critical path, self-parallelism
//! and dynamic parents (the runtime keeps at most 16 parents a region, and says when it
//! dropped some: then they are a subset of the model's).

mod common;

use common::kage_bench_quick;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Builds the quick suite's `programs` for the hcpa tool in `work` (and runs them once).
fn build(work: &Path, programs: &str) {
    kage_bench_quick(work, &["--tool", "hcpa", "--filter", programs]);
}

/// Runs `exe args` with the timestamp trace on; returns the report and the model's replay.
fn traced(work: &Path, name: &str, exe: &Path, args: &[&str]) -> (Value, Value) {
    let trace = work.join(format!("{name}.trace"));
    let report = work.join(format!("{name}.json"));
    let output = Command::new(exe)
        .args(args)
        .env(
            "KAGE_OPTIONS",
            format!(
                "timestamp_trace={}:output={}",
                trace.display(),
                report.display()
            ),
        )
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/hcpa/reference.py");
    let model = Command::new("python3")
        .arg(script)
        .arg(&trace)
        .arg("--regions")
        .arg(&report)
        .output()
        .expect("python3 runs the reference model");
    assert!(
        model.status.success(),
        "{}",
        String::from_utf8_lossy(&model.stderr)
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    (report, serde_json::from_slice(&model.stdout).unwrap())
}

/// The report agrees with the model on every region, and at least `regions` ran.
fn assert_agrees(name: &str, report: &Value, model: &Value, regions: usize) {
    assert_eq!(report["hcpa"]["work"], model["program"]["work"], "{name}");
    assert_eq!(
        report["hcpa"]["critical_path"], model["program"]["critical_path"],
        "{name}"
    );
    let expected = model["regions"].as_object().unwrap();
    let mut ran = 0;
    for region in report["regions"].as_array().unwrap() {
        let id = region["id"].to_string();
        let Some(got) = region.get("hcpa") else {
            assert!(!expected.contains_key(&id), "{name}: region {id} ran");
            continue;
        };
        ran += 1;
        let want = &expected[&id];
        let at = format!(
            "{name}: region {id} ({} {})",
            region["kind"], region["name"]
        );
        for field in ["instances", "work", "self_work", "critical_path"] {
            assert_eq!(got[field], want[field], "{at}: {field}");
        }
        let (sp, sp_model) = (
            got["self_parallelism"].as_f64().unwrap(),
            want["self_parallelism"].as_f64().unwrap(),
        );
        assert!(
            (sp - sp_model).abs() <= 1e-9 * sp_model.max(1.0),
            "{at}: SP {sp} != {sp_model}"
        );
        let mut parents: Vec<u64> = (got["parents"].as_array().unwrap().iter())
            .map(|p| p.as_u64().unwrap())
            .collect();
        parents.sort_unstable();
        let model_parents: Vec<u64> = (want["parents"].as_array().unwrap().iter())
            .map(|p| p.as_u64().unwrap())
            .collect();
        if got["parents_truncated"] == true {
            assert!(
                parents.len() == 16 && parents.iter().all(|p| model_parents.contains(p)),
                "{at}: {parents:?} not among {model_parents:?}"
            );
        } else {
            assert_eq!(parents, model_parents, "{at}");
        }
    }
    assert_eq!(ran, expected.len(), "{name}");
    assert!(ran >= regions, "{name}: only {ran} regions ran");
}

#[test]
fn the_reference_model_agrees_exactly_on_lua_sqlite_zstd_and_pcre2() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    build(work, "lua,sqlite,zstd,pcre2");
    let script = work.join("small.lua");
    std::fs::write(
        &script,
        "local s = 0 for i = 1, 50 do s = s + i * i end\n\
         local t = {} for i = 1, 20 do t[i] = tostring(i * 7 % 13) end table.sort(t)\n\
         local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end\n\
         print(s, #t, string.format('%d-%s', s, t[3]), fib(10), ('abc'):rep(3):upper())\n",
    )
    .unwrap();
    let lua = work.join("kage-hcpa/lua");
    let (report, model) = traced(work, "lua", &lua, &[script.to_str().unwrap()]);
    assert_agrees("lua", &report, &model, 500);
    let sqlite = work.join("kage-hcpa/sqlite");
    let (report, model) = traced(work, "sqlite", &sqlite, &["3"]);
    assert_agrees("sqlite", &report, &model, 500);
    let zstd = work.join("kage-hcpa/zstd");
    let (report, model) = traced(work, "zstd", &zstd, &["0.001"]);
    assert_agrees("zstd", &report, &model, 500);
    // A smaller program: its pattern compiler and matchers are some 200 regions.
    let pcre2 = work.join("kage-hcpa/pcre2");
    let (report, model) = traced(work, "pcre2", &pcre2, &["0.0005"]);
    assert_agrees("pcre2", &report, &model, 200);
}
