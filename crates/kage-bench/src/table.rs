//! The results model and its markdown rendering: one row per program (medians and ratios
//! against the native run of the same invocation), a geometric-mean row, the machine and
//! the command that reproduces the table.

use crate::cli::Options;
use crate::machine::Machine;
use crate::measure::Measurement;
use crate::stats::{geometric_mean, median};

/// Repeated measurements of one variant of one program.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub seconds: Vec<f64>,
    pub rss_bytes: Vec<f64>,
}

impl Samples {
    pub fn push(&mut self, measurement: &Measurement) {
        self.seconds.push(measurement.wall.as_secs_f64());
        self.rss_bytes.push(measurement.peak_rss as f64);
    }

    fn median_seconds(&self) -> Option<f64> {
        median(&self.seconds)
    }

    fn median_rss_mb(&self) -> Option<f64> {
        median(&self.rss_bytes).map(|b| b / 1e6)
    }
}

#[derive(Debug, Clone)]
pub struct ProgramResult {
    pub name: &'static str,
    pub native: Samples,
    pub kage: Samples,
    pub cachegrind: Option<Samples>,
    pub dhat: Option<Samples>,
    /// Why the outputs differed, when they did.
    pub mismatch: Option<String>,
    /// working-set: the shadow of the memory the program touched (one byte per line), MB.
    pub touched_shadow_mb: Option<f64>,
    /// `--variant`: one result per runtime configuration, in the order given.
    pub variants: Vec<VariantResult>,
}

/// One `--variant` of one program.
#[derive(Debug, Clone)]
pub struct VariantResult {
    pub samples: Samples,
    /// The run ran out of the `--mem-limit-gib` address space.
    pub exceeded: bool,
    /// footprint: the shadow's own peak heap (`shadow_peak_bytes`), MB.
    pub shadow_peak_mb: Option<f64>,
}

impl Default for VariantResult {
    fn default() -> Self {
        Self::new()
    }
}

impl VariantResult {
    pub fn new() -> Self {
        Self {
            samples: Samples::default(),
            exceeded: false,
            shadow_peak_mb: None,
        }
    }
}

impl ProgramResult {
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            native: Samples::default(),
            kage: Samples::default(),
            cachegrind: None,
            dhat: None,
            mismatch: None,
            touched_shadow_mb: None,
            variants: Vec::new(),
        }
    }

    fn time_ratio(&self, other: &Samples) -> Option<f64> {
        Some(other.median_seconds()? / self.native.median_seconds()?)
    }

    fn rss_ratio(&self) -> Option<f64> {
        Some(self.kage.median_rss_mb()? / self.native.median_rss_mb()?)
    }
}

pub struct Report {
    pub results: Vec<ProgramResult>,
    pub machine: Machine,
    pub options: Options,
}

const HEADER: &str = "| program | native s | kage s | ratio | native RSS MB | kage RSS MB | RSS ratio | cachegrind ratio | dhat ratio | outputs |\n\
                      |---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n";

pub fn render(report: &Report) -> String {
    let options = &report.options;
    let machine = &report.machine;
    let mut out = String::new();
    out.push_str("# Kage benchmark results\n\n");
    out.push_str(&format!(
        "Reproduce with (from the repository root, after `scripts/build.sh`):\n\n    {}\n\n",
        command(options)
    ));
    out.push_str(&format!(
        "Machine: {}, {} cores, {:.1} GiB; Linux {}; {}; {}. Measured {}.\n\n",
        machine.cpu,
        machine.cores,
        machine.memory_gib,
        machine.kernel,
        machine.compiler,
        machine.valgrind.as_deref().unwrap_or("no valgrind"),
        machine.date
    ));
    out.push_str(&format!(
        "Kage tool `{}`. Native is `{} -O2`, kage is `kage-cc -O2` on the same sources. {} run(s) of each, \
         alternating native and kage; times are medians of wall time, RSS is the median peak \
         resident set (`ru_maxrss`). Ratios are against the native median of this run{}{}.\n\n",
        options.tool,
        options.native_cc,
        options.runs,
        if options.peers {
            format!("; cachegrind and dhat ran the native binary {} time(s) each with default options", options.peer_runs)
        } else {
            String::new()
        },
        if options.quick {
            ". **--quick: tiny sizes, a smoke test, not a measurement**"
        } else if options.medium {
            ". **--medium: problem sizes running about a tenth of the full native time** (`--list --medium` shows them)"
        } else {
            ""
        },
    ));
    if !options.variants.is_empty() {
        out.push_str(&variants_table(report));
        return out;
    }
    out.push_str(HEADER);
    for r in &report.results {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            number(r.native.median_seconds(), 3),
            number(r.kage.median_seconds(), 3),
            ratio(r.time_ratio(&r.kage)),
            number(r.native.median_rss_mb(), 1),
            number(r.kage.median_rss_mb(), 1),
            ratio(r.rss_ratio()),
            ratio(r.cachegrind.as_ref().and_then(|s| r.time_ratio(s))),
            ratio(r.dhat.as_ref().and_then(|s| r.time_ratio(s))),
            if r.mismatch.is_some() {
                "**DIFFER**"
            } else {
                "match"
            },
        ));
    }
    let column = |f: &dyn Fn(&ProgramResult) -> Option<f64>| {
        ratio(geometric_mean(
            &report.results.iter().filter_map(f).collect::<Vec<_>>(),
        ))
    };
    out.push_str(&format!(
        "| **geometric mean** | | | {} | | | {} | {} | {} | |\n",
        column(&|r| r.time_ratio(&r.kage)),
        column(&|r| r.rss_ratio()),
        column(&|r| r.cachegrind.as_ref().and_then(|s| r.time_ratio(s))),
        column(&|r| r.dhat.as_ref().and_then(|s| r.time_ratio(s))),
    ));
    if report.results.iter().any(|r| r.touched_shadow_mb.is_some()) {
        out.push_str(&memory_table(&report.results));
    }
    for r in &report.results {
        if let Some(mismatch) = &r.mismatch {
            out.push_str(&format!("\n{}: outputs differ: {}\n", r.name, mismatch));
        }
    }
    out
}

/// Where the instrumented RSS goes: native, plus the shadow of the touched memory (1/64 of
/// it for 64-byte lines), plus what is left: the runtime's constant part.
fn memory_table(results: &[ProgramResult]) -> String {
    let mut out = String::from(
        "\nMemory: the shadow holds one byte per touched line (1/64 of the touched memory); \
         `rest` is what the instrumented run used beyond native + that shadow (runtime, \
         snapshot bitmaps, report).\n\n\
         | program | native RSS MB | kage RSS MB | kage − native MB | shadow of touched MB | rest MB |\n\
         |---|--:|--:|--:|--:|--:|\n",
    );
    for r in results {
        let extra = r
            .kage
            .median_rss_mb()
            .zip(r.native.median_rss_mb())
            .map(|(k, n)| k - n);
        let rest = extra.zip(r.touched_shadow_mb).map(|(e, s)| e - s);
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.name,
            number(r.native.median_rss_mb(), 1),
            number(r.kage.median_rss_mb(), 1),
            number(extra, 1),
            number(r.touched_shadow_mb, 1),
            number(rest, 1),
        ));
    }
    out
}

impl ProgramResult {
    /// Memory expansion (peak RSS / native) and slowdown of variant `n`.
    fn variant_ratios(&self, n: usize) -> (Option<f64>, Option<f64>) {
        let v = &self.variants[n];
        let rss = v
            .samples
            .median_rss_mb()
            .zip(self.native.median_rss_mb())
            .map(|(k, n)| k / n);
        (rss, self.time_ratio(&v.samples))
    }
}

/// `--variant`: per program, native time and RSS, then per variant the memory expansion
/// factor and the slowdown; geometric means; and each variant's reduction of the memory
/// expansion against the first variant (geometric mean over the programs both completed).
fn variants_table(report: &Report) -> String {
    let options = &report.options;
    let limit = options
        .mem_limit_gib
        .map_or(String::new(), |g| format!("> {g} GiB"));
    let mut out = String::new();
    out.push_str(&format!(
        "Variants (extra `KAGE_OPTIONS` items of each instrumented run, and compiler \
         variables `KAGE_*=` and optimisation level `-O...` of its build): {}. Memory expansion = \
         median peak RSS instrumented / native; slowdown = median wall time instrumented / \
         native.{}\n\n",
        options
            .variants
            .iter()
            .enumerate()
            .map(|(n, v)| format!("**{}** `{v}`", n + 1))
            .collect::<Vec<_>>()
            .join(", "),
        options.mem_limit_gib.map_or(String::new(), |g| format!(
            " Instrumented runs are limited to {g} GiB of address space (`RLIMIT_AS`); \
             `{limit}` marks a run that exceeded it."
        )),
    ));
    out.push_str("| program | native s | native RSS MB |");
    let mut rule = String::from("|---|--:|--:|");
    for (n, _) in options.variants.iter().enumerate() {
        out.push_str(&format!(" {0} mem | {0} slow |", n + 1));
        rule.push_str("--:|--:|");
    }
    out.push_str(" outputs |\n");
    out.push_str(&rule);
    out.push_str("---|\n");
    for r in &report.results {
        out.push_str(&format!(
            "| {} | {} | {} |",
            r.name,
            number(r.native.median_seconds(), 3),
            number(r.native.median_rss_mb(), 1)
        ));
        for (n, v) in r.variants.iter().enumerate() {
            if v.exceeded {
                out.push_str(&format!(" {limit} | – |"));
            } else {
                let (rss, time) = r.variant_ratios(n);
                out.push_str(&format!(" {} | {} |", ratio(rss), ratio(time)));
            }
        }
        out.push_str(if r.mismatch.is_some() {
            " **DIFFER** |\n"
        } else {
            " match |\n"
        });
    }
    out.push_str("| **geometric mean** | | |");
    for n in 0..options.variants.len() {
        let col = |f: &dyn Fn(&ProgramResult) -> Option<f64>| {
            ratio(geometric_mean(
                &report.results.iter().filter_map(f).collect::<Vec<_>>(),
            ))
        };
        out.push_str(&format!(
            " {} | {} |",
            col(&|r| r.variant_ratios(n).0),
            col(&|r| r.variant_ratios(n).1)
        ));
    }
    out.push_str(" |\n");
    out.push_str("| **reduction vs 1** (memory expansion of variant 1 / this one) | | |");
    for n in 0..options.variants.len() {
        let reductions: Vec<f64> = report
            .results
            .iter()
            .filter_map(|r| Some(r.variant_ratios(0).0? / r.variant_ratios(n).0?))
            .collect();
        out.push_str(&format!(
            " {} ({} programs) | |",
            ratio(geometric_mean(&reductions)),
            reductions.len()
        ));
    }
    out.push_str(" |\n");
    if report
        .results
        .iter()
        .any(|r| r.variants.iter().any(|v| v.shadow_peak_mb.is_some()))
    {
        out.push_str(
            "\nThe shadow's own peak heap (`shadow_peak_bytes` of the report), MB:\n\n| program |",
        );
        let mut rule = String::from("|---|");
        for (n, _) in options.variants.iter().enumerate() {
            out.push_str(&format!(" {} |", n + 1));
            rule.push_str("--:|");
        }
        out.push('\n');
        out.push_str(&rule);
        out.push('\n');
        for r in &report.results {
            out.push_str(&format!("| {} |", r.name));
            for v in &r.variants {
                if v.exceeded {
                    out.push_str(&format!(" {limit} |"));
                } else {
                    out.push_str(&format!(" {} |", number(v.shadow_peak_mb, 1)));
                }
            }
            out.push('\n');
        }
    }
    for r in &report.results {
        if let Some(mismatch) = &r.mismatch {
            out.push_str(&format!("\n{}: outputs differ: {}\n", r.name, mismatch));
        }
    }
    out
}

fn number(value: Option<f64>, decimals: usize) -> String {
    value.map_or("–".into(), |v| format!("{v:.decimals$}"))
}

fn ratio(value: Option<f64>) -> String {
    value.map_or("–".into(), |v| format!("{v:.2}×"))
}

/// The command line as typed, shell-quoted where needed.
fn command(options: &Options) -> String {
    options
        .command_line
        .iter()
        .map(|arg| {
            if !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+".contains(c))
            {
                arg.clone()
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(seconds: f64, rss_mb: f64) -> Samples {
        Samples {
            seconds: vec![seconds],
            rss_bytes: vec![rss_mb * 1e6],
        }
    }

    fn variant(seconds: f64, rss_mb: f64) -> VariantResult {
        VariantResult {
            samples: samples(seconds, rss_mb),
            ..VariantResult::new()
        }
    }

    #[test]
    fn variants_table_ratios_geomeans_reductions_and_the_limit() {
        let mut a = ProgramResult::new("a");
        a.native = samples(1.0, 10.0);
        a.variants = vec![variant(40.0, 200.0), variant(5.0, 12.5)];
        let mut b = ProgramResult::new("b");
        b.native = samples(2.0, 100.0);
        b.variants = vec![VariantResult::new(), variant(4.0, 125.0)];
        b.variants[0].exceeded = true;
        let options = Options {
            runs: 1,
            peers: false,
            peer_runs: 1,
            tool: "footprint".into(),
            filters: vec![],
            quick: false,
            medium: false,
            output: None,
            work_dir: "/tmp".into(),
            kage_cc: None,
            native_cc: "clang-22".into(),
            rebuild: false,
            list: false,
            variants: vec!["vsm=baseline".into(), "vsm=palette".into()],
            mem_limit_gib: Some(8.0),
            command_line: vec!["kage-bench".into()],
        };
        let machine = Machine {
            cpu: "cpu".into(),
            cores: 2,
            memory_gib: 1.0,
            kernel: "k".into(),
            compiler: "c".into(),
            valgrind: None,
            date: "d".into(),
        };
        let text = variants_table(&Report {
            results: vec![a, b],
            machine,
            options,
        });
        assert!(
            text.contains("| a | 1.000 | 10.0 | 20.00× | 40.00× | 1.25× | 5.00× | match |"),
            "{text}"
        );
        assert!(
            text.contains("| b | 2.000 | 100.0 | > 8 GiB | – | 1.25× | 2.00× | match |"),
            "{text}"
        );
        // Geometric means over the programs that completed: baseline only a; palette both.
        assert!(
            text.contains("| **geometric mean** | | | 20.00× | 40.00× | 1.25× | 3.16× |"),
            "{text}"
        );
        // Reduction: only a has both (20 / 1.25 = 16).
        assert!(
            text.contains("1.00× (1 programs) | | 16.00× (1 programs) |"),
            "{text}"
        );
    }
}
