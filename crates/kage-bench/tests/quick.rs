//! Runs the harness end to end in `--quick` mode (tiny sizes, one run) on a few programs:
//! it must build them natively and with kage-cc, find matching outputs and print the table.
//! No timing is asserted: ratios belong in the benchmark, not in tests.

mod common;

use common::kage_bench_quick;
use std::process::Command;

#[test]
fn quick_run_builds_runs_and_tabulates_kernels_and_a_real_program() {
    let work = tempfile::tempdir().unwrap();
    let results = work.path().join("RESULTS.md");
    let stdout = kage_bench_quick(
        work.path(),
        &[
            "--filter",
            "gemm,hash-table,bzip2",
            "--output",
            results.to_str().unwrap(),
        ],
    );

    let written = std::fs::read_to_string(&results).unwrap();
    assert_eq!(written, stdout, "--output writes exactly the printed table");
    for program in ["gemm", "hash-table", "bzip2"] {
        let row = written
            .lines()
            .find(|l| l.starts_with(&format!("| {program} |")))
            .unwrap_or_else(|| panic!("no row for {program} in:\n{written}"));
        assert!(
            row.ends_with("| match |"),
            "outputs of {program} differ: {row}"
        );
        assert_eq!(row.matches('|').count(), 11, "ten columns: {row}");
    }
    assert!(written.contains("| **geometric mean** |"), "{written}");
    assert!(written.contains("Machine: "), "{written}");
    assert!(
        written.contains("kage-bench --quick --filter gemm,hash-table,bzip2"),
        "the command is recorded: {written}"
    );
    // Each instrumented run really ran the count tool.
    assert!(work.path().join("runs/gemm/kage.gemm.json").exists());
}

#[test]
fn list_names_at_least_ten_kernels_and_three_real_programs() {
    let output = Command::new(env!("CARGO_BIN_EXE_kage-bench"))
        .args(["--list", "--quick"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let listing = String::from_utf8_lossy(&output.stdout);
    let names: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split('\t').next())
        .collect();
    let real = ["lua", "sqlite", "zstd", "bzip2", "pcre2"];
    assert!(
        names.iter().filter(|n| !real.contains(n)).count() >= 10,
        "{listing}"
    );
    for program in real {
        assert!(
            names.contains(&program),
            "{program} missing from:\n{listing}"
        );
    }
}
