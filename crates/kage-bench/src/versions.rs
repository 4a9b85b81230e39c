//! `--tool select`: VMAD's Table 3 (§5.3). For each kernel of `bench/versions/`, the native
//! build (which runs version 0, the original), each version alone (`version=k`) and Kage's
//! choice (`version=auto`), run alternately `--runs` times; the table gives the best, worst
//! and average version's median time, Kage's, and Kage's gap to the best version.

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::cli::Options;
use crate::compile::{self, Compiler};
use crate::machine::Machine;
use crate::measure::{Runner, Variant};
use crate::stats::{geometric_mean, median};
use crate::suite::{self, Program};

/// One kernel's medians.
#[derive(Debug, Clone)]
pub struct KernelResult {
    pub name: &'static str,
    /// The versions' names (the report's), in order.
    pub versions: Vec<String>,
    pub native: Vec<f64>,
    /// Per version, its times alone.
    pub alone: Vec<Vec<f64>>,
    pub kage: Vec<f64>,
    /// What Kage chose (the decisions of its last run): `nest: version`.
    pub chosen: Vec<String>,
    /// Kage's time over the best version's in back-to-back pairs (the best by the medians
    /// above), one per pair: the machine's slow drifts fall on both alike.
    pub paired: Vec<f64>,
    pub mismatch: Option<String>,
}

impl KernelResult {
    fn medians(&self) -> Vec<f64> {
        self.alone.iter().filter_map(|t| median(t)).collect()
    }

    /// Kage's median over the best version's, minus one.
    pub fn gap_to_best(&self) -> Option<f64> {
        let best = self.medians().into_iter().min_by(f64::total_cmp)?;
        Some(median(&self.kage)? / best - 1.0)
    }

    /// The median of the paired ratios, minus one.
    pub fn paired_gap(&self) -> Option<f64> {
        Some(median(&self.paired)? - 1.0)
    }
}

/// The versions' names and Kage's decisions, from a select report.
fn read_report(path: &Path) -> Result<(Vec<String>, Vec<String>)> {
    let report = kage_report::read_report(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let selection = report.select().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut names: Vec<String> = Vec::new();
    let mut chosen = Vec::new();
    for nest in &selection.nests {
        for v in &nest.versions {
            let name = if v.name.is_empty() {
                format!("v{}", v.index)
            } else {
                v.name.clone()
            };
            if names.len() <= v.index as usize {
                names.push(name);
            }
        }
        for d in &nest.decisions {
            let name = nest
                .versions
                .get(d.version as usize)
                .map_or("?", |v| v.name.as_str());
            chosen.push(format!("{}:{} {name}", nest.function, nest.line));
        }
    }
    Ok((names, chosen))
}

/// Runs the select tool's benchmark; `Ok(false)` when some output differed from native.
pub fn run(options: &Options, kage_cc: &Path) -> Result<bool> {
    let programs = suite::select_from(suite::VERSIONED, &options.filters);
    if programs.is_empty() {
        bail!("no versioned kernel matches {:?}", options.filters);
    }
    if options.list {
        for program in &programs {
            println!(
                "{}\t{}",
                program.name,
                program.args(options.size()).join(" ")
            );
        }
        return Ok(true);
    }
    let native = Compiler::native(&options.native_cc);
    let kage = Compiler::kage(kage_cc, "select");
    let runner = Runner::new(&options.native_cc, &options.work_dir)?;
    let mut results = Vec::new();
    for program in &programs {
        results.push(measure(options, &runner, &native, &kage, program)?);
    }
    let markdown = render(&results, &Machine::describe(&options.native_cc), options);
    print!("{markdown}");
    if let Some(path) = &options.output {
        std::fs::write(path, &markdown).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("kage-bench: wrote {}", path.display());
    }
    Ok(results.iter().all(|r| r.mismatch.is_none()))
}

fn measure(
    options: &Options,
    runner: &Runner,
    native: &Compiler,
    kage: &Compiler,
    program: &Program,
) -> Result<KernelResult> {
    let recipe = program.recipe(None)?;
    eprintln!("kage-bench: building {}", program.name);
    let dir = |variant: &str| options.work_dir.join(variant);
    let native_exe = compile::build(
        native,
        &recipe,
        &dir("native-versions"),
        program.name,
        options.rebuild,
    )?;
    let kage_exe = compile::build(
        kage,
        &recipe,
        &dir("kage-select"),
        program.name,
        options.rebuild,
    )?;
    let args = program.args(options.size());
    let scratch = options
        .work_dir
        .join("runs")
        .join(format!("select-{}", program.name));
    std::fs::create_dir_all(&scratch)?;
    let report = scratch.join("kage.json");
    let variant = |choice: &str| Variant::Kage {
        tool: "select".into(),
        options: format!("version={choice}"),
        report: report.clone(),
    };
    // A first run tells the versions.
    let first = runner.run_once(&variant("auto"), &kage_exe, &args, &scratch)?;
    let (versions, _) = read_report(&report)?;
    let mut result = KernelResult {
        name: program.name,
        alone: vec![Vec::new(); versions.len()],
        versions,
        native: Vec::new(),
        kage: Vec::new(),
        chosen: Vec::new(),
        paired: Vec::new(),
        mismatch: None,
    };
    let reference = runner
        .run_once(&Variant::Native, &native_exe, &args, &scratch)?
        .stdout;
    let check = |label: &str, stdout: &str, result: &mut KernelResult| {
        if stdout != reference && result.mismatch.is_none() {
            result.mismatch = Some(format!(
                "{label} printed {:?}, native {:?}",
                stdout.trim(),
                reference.trim()
            ));
        }
    };
    check("auto", &first.stdout, &mut result);
    for run in 0..options.runs {
        eprintln!(
            "kage-bench: {} run {}/{}",
            program.name,
            run + 1,
            options.runs
        );
        let m = runner.run_once(&Variant::Native, &native_exe, &args, &scratch)?;
        check("native", &m.stdout, &mut result);
        result.native.push(m.wall.as_secs_f64());
        // Kage between the versions, the versions' order reversed every other run.
        let mut order: Vec<usize> = (0..result.versions.len()).collect();
        if run % 2 == 1 {
            order.reverse();
        }
        let half = order.len() / 2;
        for (i, &k) in order.iter().enumerate() {
            if i == half {
                let m = runner.run_once(&variant("auto"), &kage_exe, &args, &scratch)?;
                check("auto", &m.stdout, &mut result);
                result.kage.push(m.wall.as_secs_f64());
                result.chosen = read_report(&report)?.1;
            }
            let m = runner.run_once(&variant(&k.to_string()), &kage_exe, &args, &scratch)?;
            check(&format!("version {k}"), &m.stdout, &mut result);
            result.alone[k].push(m.wall.as_secs_f64());
        }
    }
    // Then the best version and Kage back to back, in alternating order.
    let medians = result.medians();
    if let Some(best) = (0..medians.len()).min_by(|&a, &b| medians[a].total_cmp(&medians[b])) {
        for pair in 0..options.runs {
            eprintln!(
                "kage-bench: {} pair {}/{}",
                program.name,
                pair + 1,
                options.runs
            );
            let time = |choice: &str, result: &mut KernelResult| -> Result<f64> {
                let m = runner.run_once(&variant(choice), &kage_exe, &args, &scratch)?;
                check(choice, &m.stdout, result);
                Ok(m.wall.as_secs_f64())
            };
            let (kage, alone) = if pair % 2 == 0 {
                let k = time("auto", &mut result)?;
                (k, time(&best.to_string(), &mut result)?)
            } else {
                let a = time(&best.to_string(), &mut result)?;
                (time("auto", &mut result)?, a)
            };
            result.paired.push(kage / alone);
        }
    }
    if let Some(mismatch) = &result.mismatch {
        eprintln!("kage-bench: {}: OUTPUTS DIFFER: {mismatch}", program.name);
    }
    Ok(result)
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("–".into(), |v| format!("{v:.3}"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or("–".into(), |v| format!("{:+.1}%", v * 100.0))
}

/// The markdown table.
pub fn render(results: &[KernelResult], machine: &Machine, options: &Options) -> String {
    let mut out = String::new();
    out.push_str("| kernel | versions | native s (version 0) | best s | worst s | average s | Kage s | gap to best | gap to average | gap to best, paired | chosen | outputs |\n");
    out.push_str("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|\n");
    let mut gaps = Vec::new();
    let mut paired = Vec::new();
    for r in results {
        let medians = r.medians();
        let (best, worst) = (
            medians.iter().copied().min_by(f64::total_cmp),
            medians.iter().copied().max_by(f64::total_cmp),
        );
        let best_name = best
            .and_then(|b| medians.iter().position(|&m| m == b))
            .map_or(String::new(), |k| format!(" ({})", r.versions[k]));
        let average =
            (!medians.is_empty()).then(|| medians.iter().sum::<f64>() / medians.len() as f64);
        let kage = median(&r.kage);
        let gap = r.gap_to_best();
        if let Some(g) = gap {
            gaps.push(1.0 + g);
        }
        if let Some(g) = r.paired_gap() {
            paired.push(1.0 + g);
        }
        out.push_str(&format!(
            "| {} | {} | {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            r.versions.len(),
            seconds(median(&r.native)),
            seconds(best),
            best_name,
            seconds(worst),
            seconds(average),
            seconds(kage),
            percent(gap),
            percent(kage.zip(average).map(|(k, a)| k / a - 1.0)),
            percent(r.paired_gap()),
            r.chosen.join("; "),
            if r.mismatch.is_some() {
                "DIFFER"
            } else {
                "match"
            },
        ));
    }
    let worst = |gaps: &[f64]| gaps.iter().copied().max_by(f64::total_cmp).map(|g| g - 1.0);
    out.push_str(&format!(
        "\nGap to the best version, medians: geometric mean {}, worst {}; in back-to-back pairs \
         (the median of Kage's time over the best version's, {} pairs per kernel): geometric \
         mean {}, worst {}. Bar: at most +5% geomean, none over +15%.\n",
        percent(geometric_mean(&gaps).map(|g| g - 1.0)),
        percent(worst(&gaps)),
        options.runs,
        percent(geometric_mean(&paired).map(|g| g - 1.0)),
        percent(worst(&paired)),
    ));
    let command = options.command_line.join(" ");
    out.push_str(&format!(
        "\nReproduce with `{command}` (after `scripts/build.sh`).\n"
    ));
    out.push_str(&format!(
        "\nMachine: {}, {} cores, {:.1} GiB; {}; {}. {}. Medians of {} runs, alternating native, every version alone and Kage.\n",
        machine.cpu, machine.cores, machine.memory_gib, machine.kernel, machine.compiler, machine.date, options.runs
    ));
    out
}
