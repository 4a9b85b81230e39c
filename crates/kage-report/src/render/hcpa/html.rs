//! An hcpa report as one self-contained HTML page: the plan as a table, then the region tree
//! as a table whose regions are coloured by self-parallelism (with a legend), then the run's
//! facts. No scripts, no external resources.

use super::{
    cores_label, facts, file_line, hcpa_tree, hcpa_view_of, kind_label, left_out,
    parallelism_label, speedup_label, stat_cells, HcpaView, STAT_COLUMNS,
};
use crate::model::{HcpaStats, Region, RegionKind, Report};
use crate::render::html::{escape, page_start, run_facts, PageStart};
use crate::render::{flat_label, percent_label, FileNames, ViewError};
use std::fmt::Write;

/// The classes of self-parallelism the tree is coloured by: (lower bound, label, class).
/// A region falls in the last class whose bound it reaches.
const CLASSES: [(f64, &str, &str); 6] = [
    (0.0, "under 1.5: serial", "sp0"),
    (1.5, "1.5 to 2", "sp1"),
    (2.0, "2 to 4", "sp2"),
    (4.0, "4 to 16", "sp3"),
    (16.0, "16 to 64", "sp4"),
    (64.0, "64 and more", "sp5"),
];

/// The class of a self-parallelism.
fn class_of(self_parallelism: f64) -> &'static str {
    CLASSES
        .iter()
        .rev()
        .find(|(bound, _, _)| self_parallelism >= *bound)
        .map_or(CLASSES[0].2, |c| c.2)
}

const HCPA_STYLE: &str = "p.note { color: #555; max-width: 60em; }
tr.idle td { color: #999; }
tr.planned td { font-weight: bold; }
span.region { display: inline-block; padding: 0.1em 0.5em; border-radius: 0.3em; \
border: 1px solid #ccc; }
span.sp0 { background: #f2f2f2; }
span.sp1 { background: #ffffcc; }
span.sp2 { background: #d9f0a3; }
span.sp3 { background: #addd8e; }
span.sp4 { background: #78c679; }
span.sp5 { background: #238443; color: #fff; }
span.none { background: #fff; color: #999; border-style: dashed; }
ul.legend { list-style: none; padding: 0; margin: 0.5em 0; }
ul.legend li { display: inline-block; margin: 0 0.8em 0.3em 0; }
span.rank { display: inline-block; min-width: 1.6em; text-align: center; \
border-radius: 0.8em; background: #2b5c9e; color: #fff; font-weight: bold; }
";

/// The hcpa report as an HTML page. Every text that comes from the report (program,
/// arguments, region and file names, the thread analysis) is escaped.
pub(crate) fn html(report: &Report) -> Result<String, ViewError> {
    let view = hcpa_view_of(report)?;
    let files = FileNames::for_report(report);
    let mut out = page_start(
        report,
        &PageStart {
            title: "Parallelism of",
            heading: "Parallelism of",
            style: HCPA_STYLE,
            incomplete: "the work of regions open at that moment may be missing",
        },
    );
    let _ = writeln!(
        out,
        "<p>Hierarchical critical path analysis measured, for every region instance (a call, \
         a loop, one iteration of a loop), its <em>work</em> (the cost of the instructions it \
         executed, regions inside it included) and its <em>critical path</em> (the longest \
         chain of dependences through it), in cost units. A region's \
         <em>self-parallelism</em> is how much faster its instances would run if the regions \
         directly inside them (iterations, calls, loops) ran in parallel as far as the \
         dependences allow; its <em>coverage</em> is its share of the program's work \
         ({} cost units).</p>",
        view.hcpa.work
    );

    let _ = writeln!(out, "<h2>Plan for {} cores</h2>", view.plan.options.cores);
    plan_table(report, &view, &files, &mut out);

    out.push_str("<h2>Regions</h2>\n");
    if report.regions.is_empty() {
        out.push_str(
            "<p>No instrumented regions: build the program with kage-cc / kage-c++ so that \
             its code is instrumented.</p>\n",
        );
    } else {
        legend(&view, &mut out);
        region_table(report, &view, &files, &mut out);
    }

    run_facts(report, facts(&view.hcpa), &mut out);
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

/// The plan: a table of its rows (or a line that says it is empty), then what was left out
/// and the cores.
fn plan_table(report: &Report, view: &HcpaView, files: &FileNames, out: &mut String) {
    let plan = &view.plan;
    if plan.rows.is_empty() {
        let _ = writeln!(
            out,
            "<p>No region is worth parallelising on {} cores.</p>",
            plan.options.cores
        );
    } else {
        out.push_str(
            "<p class=\"note\">The regions to parallelise, best first; none ran inside \
             another, and a region is in the plan rather than the regions inside it when it \
             alone saves at least as much as they do together. The speedup is \
             the program's estimated speedup with the region and every region above it \
             parallelised: its work divided by what is left of it, each region taking \
             its work divided by its self-parallelism (at most the cores).</p>\n",
        );
        out.push_str(
            "<table class=\"data\">\n<tr><th>rank</th><th>kind</th><th>region</th>\
             <th>location</th><th>coverage</th><th>self-parallelism</th>\
             <th>saving (cost units)</th><th>speedup</th></tr>\n",
        );
        for (rank, row) in plan.rows.iter().enumerate() {
            let Some(region) = report.region(row.region) else {
                continue;
            };
            let _ = writeln!(
                out,
                "<tr><td class=\"n\"><span class=\"rank\">{}</span></td><td>{}</td>\
                 <td title=\"{}\"><span class=\"region {}\">{}</span></td><td>{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.0}</td>\
                 <td class=\"n\">{}</td></tr>",
                rank + 1,
                kind_label(region.kind),
                escape(&region.name),
                class_of(row.self_parallelism),
                escape(&flat_label(region)),
                escape(&file_line(files, region)),
                percent_label(row.coverage),
                parallelism_label(row.self_parallelism),
                row.saving,
                speedup_label(row.speedup),
            );
        }
        out.push_str("</table>\n");
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">Left out: {}. Cores: {}; <code>kage report --cores P</code> plans \
         for P cores, <code>--min-coverage</code> and <code>--min-sp</code> change the \
         thresholds.</p>",
        escape(&left_out(&plan.options)),
        escape(&cores_label(view)),
    );
    if view.parents_truncated() {
        out.push_str(
            "<p class=\"warning\">Some regions ran inside more regions than the report lists, \
             so the plan may hold regions that ran inside one another.</p>\n",
        );
    }
}

/// What the colours mean.
fn legend(view: &HcpaView, out: &mut String) {
    let _ = writeln!(
        out,
        "<p class=\"note\">Each region is coloured by its self-parallelism; on {} cores, \
         self-parallelism beyond {} gains nothing more. Planned regions are in bold with \
         their rank. Siblings are listed most work first. Hover over a region for its \
         parallelism and, when it ran but is not in the plan, why.</p>",
        view.plan.options.cores, view.plan.options.cores
    );
    out.push_str("<ul class=\"legend\">\n<li>self-parallelism:</li>\n");
    for (_, label, class) in CLASSES {
        let _ = writeln!(
            out,
            "<li><span class=\"region {class}\">{label}</span></li>"
        );
    }
    out.push_str("<li><span class=\"region none\">never ran</span></li>\n</ul>\n");
}

/// Every region in tree order, indented by depth, coloured by self-parallelism, with its
/// statistics and its rank in the plan.
fn region_table(report: &Report, view: &HcpaView, files: &FileNames, out: &mut String) {
    out.push_str("<table class=\"data\">\n<tr><th>region</th><th>location</th>");
    for column in STAT_COLUMNS {
        let _ = write!(out, "<th>{column}</th>");
    }
    out.push_str("<th>plan</th></tr>\n");
    for (region, depth) in hcpa_tree(report, view).walk(report) {
        let stats = view.stats(region.id);
        let rank = view.rank(region.id);
        let class = match (stats, rank) {
            (None, _) => " class=\"idle\"",
            (_, Some(_)) => " class=\"planned\"",
            _ => "",
        };
        let colour = stats.map_or("none", |s| class_of(s.self_parallelism));
        let _ = write!(
            out,
            "<tr{class}><td style=\"padding-left: {:.1}em\" title=\"{}\">\
             <span class=\"region {colour}\">{}</span></td><td>{}</td>",
            0.7 + 1.5 * depth as f64,
            escape(&region_title(
                region,
                stats,
                view.why_not_planned(report, region.id)
            )),
            escape(&tree_name(region)),
            escape(&files.location(region)),
        );
        for cell in stat_cells(stats) {
            let _ = write!(out, "<td class=\"n\">{}</td>", escape(&cell));
        }
        match rank {
            Some(rank) => {
                let _ = write!(out, "<td><span class=\"rank\">{rank}</span></td>");
            }
            None => out.push_str("<td></td>"),
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// A region's name in the tree: "function main", "function scale, inlined at main.c:32",
/// "loop", "loop body".
fn tree_name(region: &Region) -> String {
    match region.kind {
        RegionKind::Function => crate::render::tree::node_label(region),
        kind => kind_label(kind).to_string(),
    }
}

/// A region's hover title: what it is, its parallelism in words and, when it ran but is not
/// in the plan, why.
fn region_title(region: &Region, stats: Option<&HcpaStats>, why_not: Option<&str>) -> String {
    let mut title = match stats {
        None => format!("{}: never ran", flat_label(region)),
        Some(s) => format!(
            "{}: self-parallelism {}, total parallelism {}, {} of the work",
            flat_label(region),
            parallelism_label(s.self_parallelism),
            parallelism_label(s.total_parallelism),
            percent_label(s.coverage)
        ),
    };
    if let Some(why_not) = why_not {
        title.push_str("; ");
        title.push_str(why_not);
    }
    title
}
