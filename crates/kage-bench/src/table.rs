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
        if options.quick { ". **--quick: tiny sizes, a smoke test, not a measurement**" } else { "" },
    ));
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
        let extra = r.kage.median_rss_mb().zip(r.native.median_rss_mb()).map(|(k, n)| k - n);
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
