//! The text views of the analyses on loop nests (`interpolate`, `dependences`): they read
//! like a compiler's optimisation remarks, `file:line:column: kind: message`, one per memory
//! instruction, trip count, scalar and dependence, then per nest its parallel levels and
//! the directive that would run the outermost of them; VMAD's Table 1 columns per program
//! come first.

use super::FileNames;
use crate::model::{AccessFit, AnalysedNest, Dependence, Report, TripCount};
use crate::render::text::header;
use std::fmt::Write;

/// What a report without analysed nests means.
const NO_NESTS: &str = "no sampled entry of a selected loop nest ran: select loops at build \
     time with KAGE_LOOPS=file.c:line or #pragma kage profile, and build with \
     KAGE_TOOL=interpolate or KAGE_TOOL=dependences";

pub(crate) fn text(report: &Report) -> Result<String, String> {
    let nests = report.analysed_nests()?;
    let mut out = String::new();
    let totals = table_one(&nests);
    header(report, &[("memory instructions".into(), totals)], &mut out);
    if nests.is_empty() {
        let _ = writeln!(out, "\n{NO_NESTS}");
        return Ok(out);
    }
    let files = FileNames::for_files(nests.iter().map(|n| n.file.as_str()));
    for nest in &nests {
        out.push('\n');
        nest_remarks(&files, nest, &mut out);
    }
    Ok(out)
}

pub(crate) fn summary(report: &Report, report_path: &str, top: usize) -> Result<String, String> {
    let nests = report.analysed_nests()?;
    let mut out = String::new();
    if nests.is_empty() {
        let _ = writeln!(out, "kage: {NO_NESTS}");
        return Ok(out);
    }
    let _ = writeln!(out, "kage: memory instructions: {}", table_one(&nests));
    let files = FileNames::for_files(nests.iter().map(|n| n.file.as_str()));
    for nest in nests.iter().take(top) {
        let where_ = format!("{}:{}", files.show(&nest.file), nest.line);
        let verdict = match (&nest.parallel_levels, &nest.suggestion) {
            (Some(levels), _) if levels.is_empty() => "no parallel level".to_string(),
            (Some(levels), _) => format!("parallel levels {}", join(levels)),
            (None, _) => format!(
                "{} of {} instructions linear",
                nest.summary.linear_instructions, nest.summary.instructions
            ),
        };
        let _ = writeln!(out, "kage:   {where_} ({}): {verdict}", nest.function);
    }
    if nests.len() > top {
        let _ = writeln!(out, "kage:   ({} more nests)", nests.len() - top);
    }
    let _ = writeln!(out, "kage: remarks: kage report {report_path}");
    Ok(out)
}

/// VMAD's Table 1 over the whole program: instrumented, linear, share of accesses linear.
fn table_one(nests: &[AnalysedNest]) -> String {
    let (mut instructions, mut linear, mut sampled, mut linear_accesses) = (0, 0, 0, 0);
    for n in nests {
        instructions += n.summary.instructions;
        linear += n.summary.linear_instructions;
        sampled += n.summary.sampled_accesses;
        linear_accesses += n.summary.linear_accesses;
    }
    let share = if sampled == 0 {
        0.0
    } else {
        100.0 * linear_accesses as f64 / sampled as f64
    };
    format!(
        "{instructions} instrumented, {linear} linear; {share:.1}% of {sampled} sampled \
         accesses linear"
    )
}

fn join(values: &[u32]) -> String {
    values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn nest_remarks(files: &FileNames, nest: &AnalysedNest, out: &mut String) {
    let file = files.show(&nest.file);
    let entries = nest.entries_analysed;
    let _ = writeln!(
        out,
        "{file}:{}: nest in {}: {} level{}, {entries} sampled entr{}; {} of {} memory \
         instructions linear",
        nest.line,
        nest.function,
        nest.levels.len(),
        if nest.levels.len() == 1 { "" } else { "s" },
        if entries == 1 { "y" } else { "ies" },
        nest.summary.linear_instructions,
        nest.summary.instructions
    );
    for access in &nest.accesses {
        let _ = writeln!(
            out,
            "{file}:{}:{}: {}",
            access.line,
            access.column,
            access_remark(access)
        );
    }
    for trip in &nest.trip_counts {
        let line = nest.levels[trip.level as usize - 1].line;
        let _ = writeln!(out, "{file}:{line}: {}", trip_remark(trip));
    }
    for scalar in &nest.scalars {
        let name = scalar.variable.as_deref().unwrap_or("without a name");
        let what = match scalar.kind.as_str() {
            "induction" => format!("the iterator (step {})", scalar.step.unwrap_or(1)),
            "reduction" => format!(
                "a reduction ({})",
                scalar.operator.as_deref().unwrap_or("+")
            ),
            "linear" => format!("linear (step {})", scalar.step.unwrap_or(1)),
            "carried" => "carried from one iteration to the next".into(),
            "call" | "local-array" => continue,
            other => other.to_string(),
        };
        let _ = writeln!(
            out,
            "{file}:{}: scalar {name}: {what} in level {}",
            scalar.line, scalar.level
        );
    }
    let Some(dependences) = &nest.dependences else {
        return;
    };
    // Several instructions on one line (a stencil's loads) give the same remark: once, with
    // how many pairs of instructions it stands for.
    let kind = |i: Option<u32>| {
        i.and_then(|i| nest.accesses.get(i as usize))
            .map_or("", |a| a.kind.as_str())
    };
    let mut remarks: Vec<(&Dependence, usize)> = Vec::new();
    for d in dependences {
        let same = |(e, _): &&mut (&Dependence, usize)| {
            (
                e.level,
                &e.kind,
                e.source_line,
                e.sink_line,
                &e.variable,
                &e.distance,
            ) == (
                d.level,
                &d.kind,
                d.source_line,
                d.sink_line,
                &d.variable,
                &d.distance,
            ) && e.from_samples == d.from_samples
                && kind(e.source) == kind(d.source)
                && kind(e.sink) == kind(d.sink)
        };
        match remarks.iter_mut().find(same) {
            Some((_, pairs)) => *pairs += 1,
            None => remarks.push((d, 1)),
        }
    }
    for (d, pairs) in remarks {
        let samples = match (d.from_samples, pairs) {
            (true, 1) => " (seen in sampled addresses)".to_string(),
            (true, n) => format!(" (seen in sampled addresses; {n} pairs of instructions)"),
            (false, 1) => String::new(),
            (false, n) => format!(" ({n} pairs of instructions)"),
        };
        let what = d.variable.as_deref().unwrap_or("memory");
        let distance = d
            .distance
            .as_ref()
            .map(|v| {
                let v: Vec<String> = v.iter().map(i64::to_string).collect();
                format!(", distance ({})", v.join(", "))
            })
            .unwrap_or_default();
        let article = if d.kind == "flow" { "a" } else { "an" };
        if d.kind == "local-array" {
            let _ = writeln!(
                out,
                "{file}:{}: dependence: level {} is not proved free of dependences: it writes \
                 the local array {}, which is not analysed",
                d.sink_line,
                d.level,
                d.variable.as_deref().unwrap_or("without a name")
            );
            continue;
        }
        if d.kind == "call" {
            let _ =
                writeln!(
                out,
                "{file}:{}: dependence: level {} is not proved free of dependences: it calls {}, \
                 whose memory accesses are not seen",
                d.sink_line,
                d.level,
                d.variable.as_deref().unwrap_or("a function through a pointer")
            );
            continue;
        }
        if d.source.is_none() {
            let what = d
                .variable
                .as_deref()
                .unwrap_or("without a name (build with -g)");
            let _ = writeln!(
                out,
                "{file}:{}: dependence: level {} carries {article} {} dependence through scalar \
                 {what}: an iteration reads the value the previous one wrote",
                d.sink_line, d.level, d.kind
            );
            continue;
        }
        let _ = writeln!(
            out,
            "{file}:{}: dependence: level {} carries {article} {} dependence on {what}: line {} \
             {} -> line {} {}{distance}{samples}",
            d.sink_line,
            d.level,
            d.kind,
            d.source_line,
            kind(d.source),
            d.sink_line,
            kind(d.sink)
        );
    }
    if let Some(parallel) = &nest.parallel_levels {
        for level in &nest.levels {
            let on_samples =
                (nest.levels_on_samples.as_ref()).is_some_and(|s| s.contains(&level.level));
            let verdict = if parallel.contains(&level.level) {
                "carries no dependence: it can run in parallel"
            } else {
                "carries a dependence"
            };
            let caveat = if on_samples {
                " (this rests on sampled addresses: an instruction or trip count is not affine)"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "{file}:{}: remark: level {} {verdict}{caveat}",
                level.line, level.level
            );
        }
    }
    if let Some(suggestion) = &nest.suggestion {
        let _ = writeln!(out, "{file}:{}: suggestion: {suggestion}", nest.line);
    }
}

fn access_remark(a: &AccessFit) -> String {
    let what = match &a.variable {
        Some(v) => format!("{} {v}", a.kind),
        None => a.kind.clone(),
    };
    let partial = if a.entries > a.linear_entries && a.linear_entries > 0 {
        format!(" (linear in {} of {} entries)", a.linear_entries, a.entries)
    } else {
        String::new()
    };
    match (&a.strides, &a.seen) {
        (Some(strides), _) => {
            let per_level: Vec<String> = (strides.iter().enumerate())
                .map(|(k, s)| {
                    let elements = (a.element_strides.as_ref())
                        .and_then(|e| e.get(k).copied().flatten())
                        .filter(|&e| e != 0)
                        .map(|e| format!(" ({e} element{})", if e == 1 { "" } else { "s" }))
                        .unwrap_or_default();
                    match s {
                        Some(s) => format!("{s} B{elements}"),
                        None => "?".into(),
                    }
                })
                .collect();
            format!(
                "{what}: linear, stride per iteration of the levels around it: {}",
                per_level.join(", ")
            )
        }
        (None, Some(seen)) => {
            let steps: Vec<String> = seen.steps.iter().map(|s| format!("{s:+}")).collect();
            format!(
                "{what}: not linear{partial}: addresses {}..{}, steps {}{}",
                seen.min,
                seen.max,
                steps.join(", "),
                if seen.more_steps { " and more" } else { "" }
            )
        }
        (None, None) => format!("{what}: {} ({} samples)", a.status, a.samples),
    }
}

fn trip_remark(t: &TripCount) -> String {
    match (t.constant, &t.coefficients) {
        (Some(c), Some(coefficients)) if t.linear => {
            let mut terms = vec![c.to_string()];
            for (k, co) in coefficients.iter().enumerate() {
                match co {
                    Some(0) => {}
                    Some(co) => terms.push(format!("{co} x vi{}", k + 1)),
                    None => terms.push(format!("? x vi{}", k + 1)),
                }
            }
            format!(
                "trip count of level {}: {} (affine in the iterators vi of the levels around it; {} entries seen)",
                t.level,
                terms.join(" + "),
                t.samples
            )
        }
        _ => format!(
            "trip count of level {}: not affine, {}..{} over {} entries seen",
            t.level, t.min, t.max, t.samples
        ),
    }
}
