//! The hcpa model, planner and views on a hand-written report (`fixtures/hcpa.json`) of a
//! small program, `src/main.c`:
//!
//! - `main` (23-40) fills a 100×100 matrix in a nest of two parallel loops (25-30 and 27-29,
//!   each with its body), calls `scale` (inlined at line 32), `prefix` and `fib(15)`;
//! - `scale` (17-21): a parallel loop (19-20) the compiler split into two copies, a vector
//!   loop of 1000 iterations (regions 6, 7) and a remainder of 3 (8, 9); `scale` as emitted
//!   (14-16) never ran;
//! - `prefix` (11-15): a serial loop (13-14), `a[i] += a[i-1]`, whose body overlaps its own
//!   instructions (self-parallelism 13/7) but whose iterations form one chain;
//! - `fib` (5-9): recursive, its parents are `main` and itself.
//!
//! The statistics follow `docs/hcpa.md` exactly for these costs: an inner iteration has work
//! 10 and critical path 8, an inner loop `(2 + 100 × 8) / 12` = 66.8 self-parallelism, the
//! outer loop `(2 + 100 × 14) / 20` = 70.1, the vector loop `(2 + 1000 × 10) / 12` = 833.5,
//! the remainder `(2 + 3 × 10) / 12` = 2.67, and so on; `fib`'s are summed over its 1973
//! calls. The program's work is 260328 cost units.

mod common;

use kage_report::render::{self, View, ViewError};
use kage_report::{
    parse_report, plan, read_report, HcpaError, HcpaStats, Plan, PlanOptions, PlanRow, Report,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hcpa.json")
}

fn fixture() -> Report {
    read_report(&fixture_path()).expect("the fixture is a valid report")
}

/// The fixture with its JSON changed by `edit` first.
fn edited(edit: impl FnOnce(&mut Value)) -> Report {
    common::edited(&fixture_path(), edit, |report| {
        (report.hcpa().err())
            .or(report.hcpa_plan().err())
            .unwrap()
            .to_string()
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

const WORK: u64 = 260_328;

#[test]
fn the_typed_view_reads_every_documented_field() {
    let report = fixture();
    let hcpa = report.hcpa().expect("the hcpa fields are as documented");
    assert_eq!((hcpa.work, hcpa.critical_path), (WORK, 70_014));
    assert_eq!((hcpa.max_depth, hcpa.granularity), (64, 4));
    assert_eq!(
        (hcpa.skipped_instances, hcpa.shadow_peak_bytes),
        (0, 2_359_296)
    );
    assert_eq!(hcpa.vsm.as_deref(), Some("slim"));
    assert_eq!(hcpa.costs["load"], 4);
    assert_eq!(hcpa.costs.len(), 10);
    assert_eq!(hcpa.threads, "each thread analysed on its own");
    assert_eq!(hcpa.regions.len(), report.regions.len());
    let outer = hcpa.stats(1).unwrap();
    assert_eq!(
        *outer,
        HcpaStats {
            instances: 1,
            work: 100_502,
            self_work: 2,
            critical_path: 20,
            self_parallelism: 70.1,
            total_parallelism: 5025.1,
            coverage: 100_502.0 / WORK as f64,
            parents: vec![0],
            parents_truncated: false,
        }
    );
    assert_eq!(hcpa.stats(13).unwrap().parents, [0, 13]);
    // The emitted scale never ran: no statistics, and out of range is no panic.
    assert!(hcpa.stats(14).is_none() && hcpa.stats(16).is_none());
    assert!(hcpa.stats(999).is_none());

    let plan = report
        .hcpa_plan()
        .unwrap()
        .expect("the runtime wrote a plan");
    assert_eq!(
        plan.options,
        PlanOptions {
            cores: 8,
            min_coverage: 0.01,
            min_sp: 1.5
        }
    );
    let regions: Vec<u32> = plan.rows.iter().map(|r| r.region).collect();
    assert_eq!(regions, [1, 6, 13]);
}

/// The plan the fixture holds, derived by hand for 8 cores:
/// - the outer loop: 100502 × (1 − 1/8) = 87939.25 (self-parallelism 70.1 counts as 8);
/// - the inner loop would save 100200 × 7/8 = 87675, but it runs inside the outer one;
/// - scale's loop, its two copies joined: work 12002 + 35 = 12037, self-parallelism
///   12037 / (12002 / 833.5 + 35 / (32/12)) = 437.3, saving 12037 × 7/8 = 10532.375;
/// - `scale` itself (1.93) would save 5797 but holds that loop;
/// - `fib`: 17753 × (1 − 1/2.02) = 8964.3;
/// - `prefix`'s body (1.86, 49.9% of the work) is a loop body in which no region ran;
///   `prefix`, its loop and `main` are serial (about 1).
///
/// Speedups: 260328 / (260328 − 87939.25) = 1.510, then − 10532.375 → 1.608, then
/// − 8964.34 → 1.703.
#[test]
fn the_planner_makes_the_plan_derived_by_hand() {
    let report = fixture();
    let expected = report.hcpa_plan().unwrap().unwrap();
    let made = plan(&report, &expected.options).unwrap();
    assert_eq!(made.options, expected.options);
    assert_eq!(made.rows.len(), 3);
    let by_hand = [
        (1, 87_939.25, 260_328.0 / (260_328.0 - 87_939.25)),
        (6, 10_532.375, 260_328.0 / (260_328.0 - 98_471.625)),
        (
            13,
            17_753.0 * (1.0 - 1.0 / 2.0199882876967337),
            1.702691652928672,
        ),
    ];
    for ((row, recorded), (region, saving, speedup)) in
        made.rows.iter().zip(&expected.rows).zip(by_hand)
    {
        assert_eq!(row.region, region);
        assert!(close(row.saving, saving), "{row:?}");
        assert!(close(row.speedup, speedup), "{row:?}");
        assert_eq!(row.region, recorded.region);
        assert!(close(row.saving, recorded.saving) && close(row.speedup, recorded.speedup));
        assert!(close(row.self_parallelism, recorded.self_parallelism));
        assert!(close(row.coverage, recorded.coverage));
    }
    assert!(close(
        made.rows[1].self_parallelism,
        12_037.0 / (12_002.0 / 833.5 + 35.0 / (32.0 / 12.0))
    ));

    // The same plan from the report by source, named by source ids (fib is 11 there).
    let source = report.by_source();
    let made = plan(&source, &expected.options).unwrap();
    let regions: Vec<u32> = made.rows.iter().map(|r| r.region).collect();
    assert_eq!(regions, [1, 6, 11]);
    // And by_source renames the recorded plan the same way.
    let recorded = source.hcpa_plan().unwrap().unwrap();
    assert_eq!(
        recorded.rows.iter().map(|r| r.region).collect::<Vec<_>>(),
        [1, 6, 11]
    );

    // On 2 cores: the outer loop saves 100502/2 = 50251, scale's loop 6018.5, fib
    // 17753 × (1 − 1/2) ... capped at 2: 17753 × (1 − 1/2.02) = 8964.3 > 6018.5.
    let made = plan(&report, &PlanOptions::with_cores(2)).unwrap();
    let regions: Vec<u32> = made.rows.iter().map(|r| r.region).collect();
    assert_eq!(regions, [1, 13, 6]);
    assert!(close(made.rows[0].saving, 50_251.0));
    // With a coverage threshold of 5%, scale's loop (4.6%) is left out.
    let options = PlanOptions {
        min_coverage: 0.05,
        ..PlanOptions::with_cores(8)
    };
    let made = plan(&report, &options).unwrap();
    let regions: Vec<u32> = made.rows.iter().map(|r| r.region).collect();
    assert_eq!(regions, [1, 13]);
}

#[test]
fn copies_join_into_source_regions() {
    let source = fixture().by_source();
    // main, its two loops and bodies, scale, its loop and body, prefix, its loop and body,
    // fib.
    assert_eq!(source.regions.len(), 12);
    let hcpa = source.hcpa().unwrap();
    let scale_loop = hcpa.stats(6).unwrap();
    assert_eq!(source.regions[6].line, 19);
    assert_eq!(
        (
            scale_loop.instances,
            scale_loop.work,
            scale_loop.self_work,
            scale_loop.critical_path
        ),
        (1, 12_037, 4, 24)
    );
    assert!(close(
        scale_loop.self_parallelism,
        12_037.0 / (12_002.0 / 833.5 + 35.0 / (32.0 / 12.0))
    ));
    assert!(close(scale_loop.total_parallelism, 12_037.0 / 24.0));
    assert!(close(scale_loop.coverage, 12_037.0 / WORK as f64));
    assert_eq!(scale_loop.parents, [5]);
    // The bodies: 1000 + 3 iterations.
    assert_eq!(hcpa.stats(7).unwrap().instances, 1003);
    // scale inlined (ran) and emitted (never ran) are one function with main as parent.
    let scale = hcpa.stats(5).unwrap();
    assert_eq!((scale.work, scale.parents.as_slice()), (12_040, &[0][..]));
    // fib's parents become source ids: main and itself.
    assert_eq!(source.regions[11].name, "fib");
    assert_eq!(hcpa.stats(11).unwrap().parents, [0, 11]);
    // by_source of by_source changes nothing.
    assert_eq!(source.by_source(), source);
}

#[test]
fn the_json_view_round_trips_and_keeps_the_documented_names() {
    let report = fixture();
    let json = render::json(&report);
    let back = parse_report(Path::new("back.json"), json.as_bytes()).unwrap();
    assert_eq!(back, report);
    assert_eq!(back.hcpa().unwrap(), report.hcpa().unwrap());
    assert_eq!(back.hcpa_plan().unwrap(), report.hcpa_plan().unwrap());
    let value: Value = serde_json::from_str(&json).unwrap();
    let main = &value["regions"][0]["hcpa"];
    for field in [
        "instances",
        "work",
        "self_work",
        "critical_path",
        "self_parallelism",
        "total_parallelism",
        "coverage",
        "parents",
        "parents_truncated",
    ] {
        assert!(main.get(field).is_some(), "no {field} in {main}");
    }
    for field in [
        "work",
        "critical_path",
        "max_depth",
        "granularity",
        "skipped_instances",
        "shadow_peak_bytes",
        "costs",
        "threads",
    ] {
        assert!(value["hcpa"].get(field).is_some(), "no {field}");
    }
    for field in [
        "region",
        "self_parallelism",
        "coverage",
        "speedup",
        "saving",
    ] {
        assert!(value["plan"][0].get(field).is_some(), "no {field}");
    }
    assert_eq!(value["plan_options"]["cores"], 8);
    // Regions that never ran have no "hcpa".
    assert!(value["regions"][14].get("hcpa").is_none());
}

/// What the runtime does: build the model from typed values, plan, serialise it, read it
/// back.
#[test]
fn the_typed_view_writes_what_it_reads() {
    let mut report = fixture();
    let hcpa = report.hcpa().unwrap();
    let mut data = hcpa.to_tool_data();
    assert_eq!(data.len(), 1);
    assert_eq!(data["hcpa"]["granularity"], 4);
    assert!(
        data["hcpa"].get("regions").is_none(),
        "per-region stats live in the regions"
    );
    data.insert("something_new".into(), Value::from(1));
    report.tool_data = data;
    for (region, stats) in report.regions.iter_mut().zip(&hcpa.regions) {
        region.metrics.clear();
        if let Some(stats) = stats {
            region.metrics.insert("hcpa".into(), stats.to_value());
        }
    }
    assert_eq!(report.hcpa_plan().unwrap(), None);
    // The runtime's regions carry no metrics when it plans: plan_regions reads only `hcpa`.
    let mut bare = report.regions.clone();
    bare.iter_mut().for_each(|r| r.metrics.clear());
    let planned = kage_report::plan_regions(&bare, &hcpa, &PlanOptions::with_cores(8));
    report.set_hcpa_plan(&planned);
    let json = serde_json::to_vec(&report).unwrap();
    let back = parse_report(Path::new("r.json"), &json).unwrap();
    assert_eq!(back.hcpa().unwrap(), hcpa);
    // serde_json reads some floats back one unit in the last place off.
    let read = back.hcpa_plan().unwrap().unwrap();
    assert_eq!(read.options, planned.options);
    assert_eq!(read.rows.len(), 3);
    for (read, planned) in read.rows.iter().zip(&planned.rows) {
        assert_eq!(read.region, planned.region);
        assert!(close(read.speedup, planned.speedup) && close(read.saving, planned.saving));
    }
    // Re-planning replaces the plan.
    let mut again = back.clone();
    let replanned = again.replan(&PlanOptions::with_cores(2)).unwrap();
    assert_eq!(again.hcpa_plan().unwrap(), Some(replanned));
    assert_eq!(again.hcpa_plan().unwrap().unwrap().options.cores, 2);
}

/// A change to the fixture's JSON.
type Edit = Box<dyn FnOnce(&mut Value)>;

#[test]
fn missing_or_wrong_fields_are_errors_that_name_them() {
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|j| {
                j.as_object_mut().unwrap().remove("hcpa");
            }),
            "the field \"hcpa\" is missing",
        ),
        (
            Box::new(|j| {
                j["hcpa"].as_object_mut().unwrap().remove("work");
            }),
            "the field \"hcpa\".\"work\" is missing",
        ),
        (
            Box::new(|j| j["hcpa"]["costs"] = "cheap".into()),
            "the field \"hcpa\".\"costs\" is not as documented: invalid type: string \
             \"cheap\", expected a map",
        ),
        (
            Box::new(|j| {
                j["regions"][3]["hcpa"]
                    .as_object_mut()
                    .unwrap()
                    .remove("parents");
            }),
            "region 3: the field \"hcpa\".\"parents\" is missing",
        ),
        (
            Box::new(|j| j["regions"][2]["hcpa"]["self_parallelism"] = (-1.0).into()),
            "region 2: the field \"hcpa\".\"self_parallelism\" is not as documented: -1 is \
             not a number of at least 0",
        ),
        (
            Box::new(|j| j["regions"][2]["hcpa"] = 3.into()),
            "region 2: the field \"hcpa\" is not as documented: not an object",
        ),
    ];
    for (edit, message) in cases {
        let report = edited(edit);
        let error = report.hcpa().unwrap_err();
        assert_eq!(error.to_string(), message);
        // The views say so: the text falls back to the generic tree with a warning.
        let text = render::text(&report);
        assert!(
            text.contains("warning: the hcpa fields do not match"),
            "{text}"
        );
        assert!(matches!(
            render::html(&report).unwrap_err(),
            ViewError::Malformed { tool: "hcpa", .. }
        ));
    }
    let plan_cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|j| {
                j["plan"][1].as_object_mut().unwrap().remove("speedup");
            }),
            "the field \"plan\"[1].\"speedup\" is missing",
        ),
        (
            Box::new(|j| j["plan"][0]["region"] = 99.into()),
            "the field \"plan\" is not as documented: names region 99, which the report does \
             not have",
        ),
        (
            Box::new(|j| {
                j.as_object_mut().unwrap().remove("plan_options");
            }),
            "the field \"plan_options\" is missing",
        ),
        (
            Box::new(|j| j["plan_options"]["cores"] = "many".into()),
            "the field \"plan_options\".\"cores\" is not as documented: invalid type: string \
             \"many\", expected u64",
        ),
    ];
    for (edit, message) in plan_cases {
        let report = edited(edit);
        assert_eq!(report.hcpa_plan().unwrap_err().to_string(), message);
        assert!(report.hcpa().is_ok());
    }
    assert!(matches!(
        edited(|j| j["plan"] = 1.into()).hcpa_plan(),
        Err(HcpaError::Invalid { .. })
    ));
}

#[test]
fn hcpa_as_text() {
    insta::assert_snapshot!(render::text(&fixture().by_source()));
}

#[test]
fn hcpa_as_text_with_every_copy() {
    let text = render::text(&fixture());
    // The split loop's two copies, each with its body, under the inlined call; the emitted
    // scale (never ran) last with dashes; the plan names the first copy.
    assert!(
        text.contains("\n  function scale, inlined at main.c:32  main.c:17-21"),
        "{text}"
    );
    let copies: Vec<&str> = (text.lines())
        .filter(|l| l.starts_with("    loop ") && l.contains("main.c:19-20"))
        .collect();
    assert_eq!(copies.len(), 2, "{text}");
    assert!(copies[0].ends_with("#2"), "{text}");
    let last = text
        .lines()
        .rev()
        .find(|l| l.starts_with("function"))
        .unwrap();
    assert!(last.starts_with("function scale "), "{text}");
    let cells: Vec<&str> = last.split_whitespace().collect();
    assert_eq!(
        cells[cells.len() - 7..],
        ["0", "-", "-", "-", "-", "-", "-"],
        "{last}"
    );
}

#[test]
fn hcpa_summary() {
    insta::assert_snapshot!(render::summary(
        &fixture().by_source(),
        "kage.par.7311.json",
        5
    ));
}

#[test]
fn hcpa_html() {
    insta::assert_snapshot!(render::html(&fixture().by_source()).unwrap());
}

#[test]
fn a_report_without_a_plan_is_planned_for_this_machine() {
    let report = edited(|j| {
        let object = j.as_object_mut().unwrap();
        object.remove("plan");
        object.remove("plan_options");
    });
    let cores = kage_report::this_machines_cores();
    let text = render::text(&report.by_source());
    assert!(
        text.contains(&format!(
            "cores: {cores} (this machine's; the report had no plan)"
        )),
        "{text}"
    );
    let expected = plan(&report, &PlanOptions::for_this_machine()).unwrap();
    assert!(text.contains(&format!("plan for {cores} cores")), "{text}");
    assert!(!expected.rows.is_empty() || cores == 1);
}

#[test]
fn an_empty_plan_says_so() {
    let report = edited(|j| {
        j["plan"] = serde_json::json!([]);
        j["plan_options"]["cores"] = 1.into();
    });
    let text = render::text(&report);
    assert!(
        text.contains("plan for 1 cores: no region is worth parallelising\nleft out: "),
        "{text}"
    );
    let summary = render::summary(&report, "r.json", 5);
    assert!(
        summary.contains(
            "kage: no region is worth parallelising on 1 cores (left out: coverage < 1%, \
             self-parallelism < 1.5, functions and loop bodies in which no other region ran)"
        ),
        "{summary}"
    );
    assert!(render::html(&report)
        .unwrap()
        .contains("No region is worth parallelising on 1 cores."));
}

#[test]
fn truncated_parents_and_skipped_instances_are_mentioned() {
    let report = edited(|j| {
        j["regions"][13]["hcpa"]["parents_truncated"] = true.into();
        j["hcpa"]["skipped_instances"] = 12.into();
    });
    let text = render::text(&report);
    assert!(
        text.contains("note: some regions ran inside more regions"),
        "{text}"
    );
    assert!(
        text.contains("12 region instances nested deeper than the max depth"),
        "{text}"
    );
    assert!(render::html(&report)
        .unwrap()
        .contains("Some regions ran inside more regions"));
}

#[test]
fn html_is_one_page_with_a_legend_and_every_text_escaped() {
    let report = edited(|json| {
        json["program"] = "/tmp/a<b>&\"c\"/p<ar>".into();
        json["args"] = serde_json::json!(["./p<ar>", "<script>alert(1)</script>"]);
        json["hcpa"]["threads"] = "<i>each</i>".into();
        json["regions"][13]["name"] = "fib<int>".into();
        json["regions"][0]["file"] = "/src/<main>.c".into();
    })
    .by_source();
    let html = render::html(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.ends_with("</html>\n"));
    for external in ["src=", "href=", "@import", "url(", "<script"] {
        assert!(!html.contains(external), "{external} in {html}");
    }
    for class in ["sp0", "sp1", "sp2", "sp3", "sp4", "sp5", "none"] {
        assert!(
            html.contains(&format!("<li><span class=\"region {class}\">")),
            "no legend entry {class}"
        );
    }
    assert!(html.contains("fib&lt;int&gt;"));
    assert!(html.contains("/tmp/a&lt;b&gt;&amp;&quot;c&quot;/p&lt;ar&gt;"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&lt;i&gt;each&lt;/i&gt;"));
    assert!(html.contains("&lt;main&gt;.c"));
    for raw in ["<int>", "<i>", "<b>", "<main>", "<ar>"] {
        assert!(!html.contains(raw), "{raw} unescaped in {html}");
    }
    // One row per region in the tree, the plan's three rows with their ranks.
    assert_eq!(html.matches("<tr class=\"planned\">").count(), 3);
    assert_eq!(html.matches("<span class=\"rank\">").count(), 6);
}

#[test]
fn perfetto_is_not_an_hcpa_view() {
    let error = render::perfetto(&fixture()).unwrap_err();
    assert_eq!(
        error,
        ViewError::NotForTool {
            view: View::Perfetto,
            tool: "hcpa".into()
        }
    );
    assert_eq!(
        View::Html.tools(),
        ["working-set", "footprint", "hcpa", "loops"],
        "the html view names its tools"
    );
}

#[test]
fn plan_types_serialise_as_documented() {
    let plan = Plan {
        options: PlanOptions::with_cores(4),
        rows: vec![PlanRow {
            region: 3,
            self_parallelism: 2.0,
            coverage: 0.5,
            speedup: 1.333,
            saving: 250.0,
        }],
    };
    let data = plan.to_tool_data();
    assert_eq!(
        Value::Object(data),
        serde_json::json!({
            "plan": [{"region": 3, "self_parallelism": 2.0, "coverage": 0.5, "speedup": 1.333,
                      "saving": 250.0}],
            "plan_options": {"cores": 4, "min_coverage": 0.01, "min_sp": 1.5}
        })
    );
}
