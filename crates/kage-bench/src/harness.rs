//! The harness proper: select, build, run alternately, compare outputs, report.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::cli::Options;
use crate::compile::{self, Compiler};
use crate::machine::Machine;
use crate::measure::{self, Measurement, Variant};
use crate::sources::CrateSources;
use crate::suite::{self, Program};
use crate::table::{self, ProgramResult, Report, Samples, VariantResult};

/// Runs the whole benchmark; `Ok(false)` when some instrumented or peer output differed
/// from the native one.
pub fn run(options: &Options) -> Result<bool> {
    if options.tool == "select" {
        return crate::versions::run(options, &find_kage_cc(options)?);
    }
    let programs = suite::select(&options.filters);
    if programs.is_empty() {
        bail!(
            "no program matches {:?}; --list shows them",
            options.filters
        );
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
    let kage_cc = find_kage_cc(options)?;
    let crates = if programs.iter().any(Program::needs_crate_sources) {
        Some(CrateSources::locate()?)
    } else {
        None
    };
    let native = Compiler::native(&options.native_cc);
    let kage = Compiler::kage(&kage_cc, &options.tool);
    let runner = measure::Runner::new(&options.native_cc, &options.work_dir)?;
    let variants: Vec<VariantSpec> = options
        .variants
        .iter()
        .map(|v| VariantSpec::parse(v))
        .collect();

    let mut results = Vec::new();
    for program in &programs {
        let recipe = program.recipe(crates.as_ref())?;
        eprintln!(
            "kage-bench: building {} ({} sources)",
            program.name,
            recipe.sources.len()
        );
        let dir = |variant: &str| options.work_dir.join(variant);
        let native_exe = compile::build(
            &native,
            &recipe,
            &dir("native"),
            program.name,
            options.rebuild,
        )
        .with_context(|| format!("building {} natively", program.name))?;
        // One instrumented build per set of compiler settings the variants ask for.
        let mut kage_exes: Vec<(VariantBuild, PathBuf)> = Vec::new();
        for build in
            std::iter::once(VariantBuild::default()).chain(variants.iter().map(|v| v.build.clone()))
        {
            if kage_exes.iter().any(|(b, _)| *b == build) {
                continue;
            }
            let mut compiler = kage.clone();
            compiler.env.extend(build.env.iter().cloned());
            if let Some(level) = &build.opt_level {
                compiler.opt_level = level.clone();
            }
            let suffix = build.suffix();
            let kage_dir = dir(&format!("kage-{}{suffix}", options.tool));
            let exe = compile::build(&compiler, &recipe, &kage_dir, program.name, options.rebuild)
                .with_context(|| format!("building {} with kage-cc{suffix}", program.name))?;
            kage_exes.push((build, exe));
        }
        let exe_for = |build: &VariantBuild| -> PathBuf {
            (kage_exes.iter())
                .find(|(b, _)| b == build)
                .map(|(_, exe)| exe.clone())
                .expect("every variant's build was made above")
        };
        let variant_exes: Vec<PathBuf> = variants.iter().map(|v| exe_for(&v.build)).collect();
        results.push(measure_program(
            options,
            &runner,
            program,
            &native_exe,
            &exe_for(&VariantBuild::default()),
            &variants,
            &variant_exes,
        )?);
    }

    let report = Report {
        results,
        machine: Machine::describe(&options.native_cc),
        options: options.clone(),
    };
    let markdown = table::render(&report);
    print!("{markdown}");
    if let Some(path) = &options.output {
        std::fs::write(path, &markdown).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("kage-bench: wrote {}", path.display());
    }
    Ok(report.results.iter().all(|r| r.mismatch.is_none()))
}

/// One `--variant`: how its program is built (compiler variables, `KAGE_*` items in upper
/// case, and an optimisation level, `-O0` ... `-Oz`) and the `KAGE_OPTIONS` items its runs
/// add (the others).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantSpec {
    pub build: VariantBuild,
    pub runtime_options: String,
}

/// What a variant changes in the instrumented build; the default is the suite's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VariantBuild {
    /// Compiler variables, sorted.
    pub env: Vec<(String, String)>,
    /// The optimisation level in place of `-O2`.
    pub opt_level: Option<String>,
}

impl VariantBuild {
    /// What the build's directory adds to `kage-<tool>`: `+NAME=value` per variable, `+O0`.
    fn suffix(&self) -> String {
        let env = self.env.iter().map(|(k, v)| format!("+{k}={v}"));
        let level = self.opt_level.iter().map(|l| format!("+{}", &l[1..]));
        env.chain(level).collect()
    }
}

impl VariantSpec {
    pub fn parse(text: &str) -> Self {
        let mut build = VariantBuild::default();
        let mut runtime = Vec::new();
        for item in text.split(':').filter(|i| !i.is_empty()) {
            match item.split_once('=') {
                Some((name, value))
                    if name.starts_with("KAGE_")
                        && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') =>
                {
                    build.env.push((name.to_string(), value.to_string()));
                }
                None if is_opt_level(item) => build.opt_level = Some(item.to_string()),
                _ => runtime.push(item),
            }
        }
        build.env.sort();
        VariantSpec {
            build,
            runtime_options: runtime.join(":"),
        }
    }
}

/// `-O0`, `-O1`, `-O2`, `-O3`, `-Os`, `-Oz`, `-Og`.
fn is_opt_level(item: &str) -> bool {
    matches!(item, "-O0" | "-O1" | "-O2" | "-O3" | "-Os" | "-Oz" | "-Og")
}

/// kage-cc from the options, else next to this executable (where scripts/build.sh puts both).
fn find_kage_cc(options: &Options) -> Result<PathBuf> {
    let path = match &options.kage_cc {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("kage-cc"),
    };
    if !path.exists() {
        bail!(
            "{} not found: build Kage first (scripts/build.sh) or pass --kage-cc",
            path.display()
        );
    }
    Ok(path)
}

/// The shadow of the memory a working-set report says was touched: one byte per line, MB.
fn touched_shadow_mb(report: &Path) -> Option<f64> {
    let report = kage_report::read_report(report).ok()?;
    let working_set = report.working_set().ok()?;
    Some(working_set.total_lines as f64 / 1e6)
}

fn measure_program(
    options: &Options,
    runner: &measure::Runner,
    program: &Program,
    native_exe: &Path,
    kage_exe: &Path,
    variants: &[VariantSpec],
    variant_exes: &[PathBuf],
) -> Result<ProgramResult> {
    let args = program.args(options.size());
    let scratch = options.work_dir.join("runs").join(program.name);
    std::fs::create_dir_all(&scratch)?;
    let kage_variant = Variant::Kage {
        tool: crate::compile::runtime_tool(&options.tool).to_string(),
        options: String::new(),
        report: scratch.join(format!("kage.{}.json", program.name)),
    };
    if !options.variants.is_empty() {
        return measure_variants(
            options,
            runner,
            program,
            native_exe,
            variants,
            variant_exes,
            &scratch,
        );
    }

    let mut result = ProgramResult::new(program.name);
    let mut reference: Option<String> = None;
    let mut record = |variant: &Variant, measurement: Measurement, samples: &mut Samples| {
        match &reference {
            None => reference = Some(measurement.stdout.clone()),
            Some(expected) if *expected != measurement.stdout && result.mismatch.is_none() => {
                result.mismatch = Some(format!(
                    "{} printed {:?}, native printed {:?}",
                    variant.label(),
                    measurement.stdout.trim(),
                    expected.trim()
                ));
            }
            Some(_) => {}
        }
        samples.push(&measurement);
    };

    // Alternating native and instrumented runs spreads the machine's noise over both.
    for run in 0..options.runs {
        eprintln!(
            "kage-bench: {} run {}/{}",
            program.name,
            run + 1,
            options.runs
        );
        let m = runner.run_once(&Variant::Native, native_exe, &args, &scratch)?;
        record(&Variant::Native, m, &mut result.native);
        let m = runner.run_once(&kage_variant, kage_exe, &args, &scratch)?;
        record(&kage_variant, m, &mut result.kage);
    }
    if options.peers {
        for variant in [Variant::Cachegrind, Variant::Dhat] {
            let mut samples = Samples::default();
            for _ in 0..options.peer_runs {
                eprintln!("kage-bench: {} under {}", program.name, variant.label());
                let m = runner.run_once(&variant, native_exe, &args, &scratch)?;
                record(&variant, m, &mut samples);
            }
            match variant {
                Variant::Cachegrind => result.cachegrind = Some(samples),
                _ => result.dhat = Some(samples),
            }
        }
    }
    if let Variant::Kage { report, .. } = &kage_variant {
        result.touched_shadow_mb = touched_shadow_mb(report);
    }
    if let Some(mismatch) = &result.mismatch {
        eprintln!("kage-bench: {}: OUTPUTS DIFFER: {mismatch}", program.name);
    }
    Ok(result)
}

/// The shadow's own peak heap, from the report (footprint: at the top level; hcpa: in its
/// `hcpa` object), MB.
fn shadow_peak_mb(report: &Path) -> Option<f64> {
    let report = kage_report::read_report(report).ok()?;
    let data = &report.tool_data;
    let peak =
        (data.get("shadow_peak_bytes")).or_else(|| data.get("hcpa")?.get("shadow_peak_bytes"))?;
    Some(peak.as_f64()? / 1e6)
}

/// `--variant`: native, then each variant, alternately, `--runs` times.
fn measure_variants(
    options: &Options,
    runner: &measure::Runner,
    program: &Program,
    native_exe: &Path,
    specs: &[VariantSpec],
    variant_exes: &[PathBuf],
    scratch: &Path,
) -> Result<ProgramResult> {
    let args = program.args(options.size());
    let limit = options
        .mem_limit_gib
        .map(|gib| (gib * (1u64 << 30) as f64) as u64);
    let variants: Vec<Variant> = specs
        .iter()
        .enumerate()
        .map(|(n, spec)| Variant::Kage {
            tool: crate::compile::runtime_tool(&options.tool).to_string(),
            options: spec.runtime_options.clone(),
            report: scratch.join(format!("kage.{}.{n}.json", program.name)),
        })
        .collect();
    let mut result = ProgramResult::new(program.name);
    result.variants = options
        .variants
        .iter()
        .map(|_| VariantResult::new())
        .collect();
    let mut reference: Option<String> = None;
    let mut check = |label: &str, stdout: &str, result: &mut ProgramResult| match &reference {
        None => reference = Some(stdout.to_owned()),
        Some(expected) if expected != stdout && result.mismatch.is_none() => {
            result.mismatch = Some(format!(
                "{label} printed {:?}, native printed {:?}",
                stdout.trim(),
                expected.trim()
            ));
        }
        Some(_) => {}
    };
    for run in 0..options.runs {
        eprintln!(
            "kage-bench: {} run {}/{}",
            program.name,
            run + 1,
            options.runs
        );
        let m = runner.run_once(&Variant::Native, native_exe, &args, scratch)?;
        check("native", &m.stdout, &mut result);
        result.native.push(&m);
        for (n, variant) in variants.iter().enumerate() {
            if result.variants[n].exceeded {
                continue;
            }
            eprintln!("kage-bench: {} [{}]", program.name, options.variants[n]);
            match runner.run_limited(variant, &variant_exes[n], &args, scratch, limit)? {
                Some(m) => {
                    check(&options.variants[n], &m.stdout, &mut result);
                    result.variants[n].samples.push(&m);
                    if let Variant::Kage { report, .. } = variant {
                        result.variants[n].shadow_peak_mb = shadow_peak_mb(report);
                    }
                }
                None => {
                    eprintln!(
                        "kage-bench: {} [{}] exceeded the memory limit",
                        program.name, options.variants[n]
                    );
                    result.variants[n].exceeded = true;
                }
            }
        }
    }
    if let Some(mismatch) = &result.mismatch {
        eprintln!("kage-bench: {}: OUTPUTS DIFFER: {mismatch}", program.name);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::{VariantBuild, VariantSpec};

    #[test]
    fn a_variant_splits_into_compiler_variables_and_runtime_options() {
        let spec = VariantSpec::parse("vsm=bulk:KAGE_INLINED_REGIONS=0:granularity=line");
        assert_eq!(
            spec.build.env,
            vec![("KAGE_INLINED_REGIONS".to_string(), "0".to_string())]
        );
        assert_eq!(spec.build.opt_level, None);
        assert_eq!(spec.runtime_options, "vsm=bulk:granularity=line");
        let default = VariantSpec::parse("");
        assert_eq!(default.build, VariantBuild::default());
        assert!(default.runtime_options.is_empty());
    }

    #[test]
    fn an_optimisation_level_is_the_builds() {
        let spec = VariantSpec::parse("-O0:KAGE_INLINED_REGIONS=0:-O1");
        assert_eq!(spec.build.opt_level.as_deref(), Some("-O1"));
        assert_eq!(spec.build.suffix(), "+KAGE_INLINED_REGIONS=0+O1");
        assert!(spec.runtime_options.is_empty());
        // Not a level: a runtime option, which the runtime will refuse by name.
        assert_eq!(VariantSpec::parse("-O9").runtime_options, "-O9");
    }
}
