//! The reliability suite: what real use broke, each case built and run as a user would,
//! for every tool it concerns (issue 21). A case here failed before its fix.

mod e2e_support;

use e2e_support::*;
use kage_report::read_report;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The tools whose builds differ (`KAGE_TOOL`): one build serves count, another each of
/// the others.
const BUILDS: &[&str] = &["count", "working-set", "footprint", "hcpa"];

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `kage-cc` with `KAGE_TOOL=tool` and `args`, in the scratch directory.
fn cc(work: &Work, tool: &str, args: &[&str]) {
    work.wrap_with_env(&kage_cc(), args, &[("KAGE_TOOL", tool)]);
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

/// A library built for each tool, bound lazily, linked at build time and `dlopen`ed with
/// `RTLD_LAZY`: the working-set tool's `preserve_most` tick used to be called through a
/// lazily bound PLT entry whose resolver clobbered r10/r11 (SIGSEGV on the first tick).
#[test]
fn lazily_bound_and_dlopened_libraries_work_for_every_tool() {
    let work = Work::new();
    let lazy = "-Wl,-z,lazy";
    let expected = "52226752512000.0\n";
    for tool in BUILDS {
        let lib = work.path(&format!("libbig_{tool}.so"));
        let lib_s = lib.to_str().unwrap();
        cc(
            &work,
            tool,
            &[
                "-O2",
                "-shared",
                "-fPIC",
                lazy,
                &source("biglib.c"),
                "-o",
                lib_s,
            ],
        );
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

/// `kage-cc -static` links (the static unwinder, `libgcc_eh`, instead of `libgcc_s`) and
/// the program measures both of its threads.
#[test]
fn a_static_program_links_and_is_measured() {
    let work = Work::new();
    for tool in BUILDS {
        let exe: PathBuf = work.path(&format!("static_{tool}"));
        cc(
            &work,
            tool,
            &[
                "-O2",
                "-static",
                &source("static.c"),
                "-lpthread",
                "-o",
                exe.to_str().unwrap(),
            ],
        );
        let report_path = work.path(&format!("static_{tool}.json"));
        assert_eq!(run_ok(&exe, &[], &report_path), "1998\n", "{tool}");
        let report = read_report(&report_path).unwrap();
        assert_eq!(report.threads, 2, "{tool}");
        let fill = func(&report, "fill");
        if *tool == "count" {
            assert_counts(fill, 2, c(0, 2000, 0, 8000), c(0, 0, 0, 0));
        }
    }
}
