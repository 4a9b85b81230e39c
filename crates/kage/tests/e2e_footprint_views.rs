//! The footprint views end to end: `tests/c/footprint_views/matvec.c` built for every tool
//! (loop bodies need every iteration's event), run with `kage run`, shown with `kage report` as text, HTML and (refused) Perfetto.
//! The numbers of the tool itself are checked in `e2e_footprint.rs`; this checks that a real
//! report reads and renders as `crates/kage-report`'s snapshot tests say.

mod e2e_support;
use e2e_support::*;
use kage_report::{read_report, render};
use std::process::Command;

#[test]
fn a_real_footprint_report_reads_and_renders() {
    let work = Work::new();
    let exe = work.build_for_every_tool("footprint_views/matvec.c", &["-O1"]);
    let report_path = work.path("matvec.json");
    let out = Command::new(kage())
        .args([
            "run",
            "--tool",
            "footprint",
            "--option",
            "loop_bodies=1",
            "-o",
        ])
        .arg(&report_path)
        .arg("--")
        .arg(&exe)
        .current_dir(work.dir.path())
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{summary}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "49333350 55\n");
    assert!(summary.contains("kage: total footprint"), "{summary}");
    assert!(
        summary.contains("top regions by footprint (largest instance, callees included):"),
        "{summary}"
    );
    assert!(
        summary.contains("--format html -o footprint.html"),
        "{summary}"
    );

    let report = read_report(&report_path).unwrap();
    let fp = report.footprint().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fp.loop_bodies, Some(true));

    // The text tree: main first (largest), its loops by footprint, bodies under them, the
    // recursive fib, and report_error never called.
    let text = kage_report_output(&report_path, &[]);
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("region "))
        .skip(1)
        .collect();
    let row = |start: &str, location: &str| -> Vec<&str> {
        rows.iter()
            .find(|r| r.starts_with(start) && r.contains(location))
            .unwrap_or_else(|| panic!("no {start:?} at {location} in\n{text}"))
            .split_whitespace()
            .collect()
    };
    assert!(rows[0].starts_with("function main "), "{text}");
    // The nest (81600 bytes), then the loop over A (80000), then the loop over x (800).
    assert!(
        rows[1].starts_with("  loop ") && rows[1].contains("matvec.c:27-32"),
        "{text}"
    );
    assert!(rows[2].starts_with("    loop-body ") && rows[2].contains("matvec.c:27-32"));
    assert!(
        rows[3].starts_with("      loop ") && rows[3].contains("matvec.c:29-30"),
        "{text}"
    );
    let fill = row("  loop ", "matvec.c:23-24");
    assert_eq!(
        fill[2..9],
        ["1", "78.1", "KiB", "78.1", "KiB", "78.1", "KiB"],
        "{text}"
    );
    let inner = row("      loop ", "matvec.c:29-30");
    assert_eq!(
        inner[2..9],
        ["100", "1.56", "KiB", "1.56", "KiB", "1.56", "KiB"],
        "{text}"
    );
    let fib = row("function fib ", "matvec.c");
    assert_eq!(fib[3], "177", "{text}");
    let never = row("function report_error ", "matvec.c");
    assert_eq!(
        never[3..],
        ["0", "-", "-", "-", "-", "-", "-", "-"],
        "{text}"
    );

    // HTML: one page, the icicle's rectangles as the layout says.
    let html_path = work.path("matvec.html");
    kage_report_output(
        &report_path,
        &["--format", "html", "-o", html_path.to_str().unwrap()],
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    // The default view joins the compiler's copies of a source region (putchar, inlined
    // into report_error's loop, is one function row).
    let shown = report.by_source();
    assert_eq!(html, render::html(&shown).unwrap());
    assert_eq!(
        html.matches("<rect ").count(),
        render::icicle(&shown, &shown.footprint().unwrap()).len()
    );
    assert!(
        html.contains("<text x=\"4.00\" y=\"40\">main</text>"),
        "{html}"
    );

    // Perfetto: refused, with the reason.
    let out = Command::new(kage())
        .args(["report", "--format", "perfetto"])
        .arg(&report_path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "the perfetto view exists for the working-set tool; this report is from `footprint`"
    ));
}

/// By default the runtime does not measure loop bodies: the tree leaves them out and the
/// inner loop hangs under the outer one.
#[test]
fn without_loop_bodies_loops_nest_directly() {
    let work = Work::new();
    let exe = work.build_with_env(
        "footprint_views/matvec.c",
        &["-O1"],
        &[("KAGE_TOOL", "footprint")],
    );
    let report_path = work.path("matvec.json");
    let out = work.run_with_options(
        &exe,
        &[],
        &format!("tool=footprint:output={}", report_path.display()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = kage_report_output(&report_path, &[]);
    assert!(text.contains("\nloop bodies      not measured"), "{text}");
    assert!(!text.contains("loop-body"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("region "))
        .skip(1)
        .collect();
    assert!(
        rows[1].starts_with("  loop ") && rows[1].contains("matvec.c:27-32"),
        "{text}"
    );
    assert!(
        rows[2].starts_with("    loop ") && rows[2].contains("matvec.c:29-30"),
        "{text}"
    );
}
