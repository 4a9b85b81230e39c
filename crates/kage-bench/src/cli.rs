//! The command line. Clap stays here; the rest of the harness sees a plain `Options`.

use std::path::PathBuf;

use clap::Parser;

/// Builds each benchmark natively (clang-22 -O2) and with Kage (kage-cc -O2), runs both
/// alternately, checks their outputs match and prints median time and peak-RSS ratios.
#[derive(Parser, Debug)]
#[command(name = "kage-bench")]
pub struct Cli {
    /// Runs per program and variant; medians are reported.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Also run the native binary under `valgrind --tool=cachegrind` and `--tool=dhat`.
    #[arg(long)]
    peers: bool,
    /// Runs per peer (Valgrind is slow: one run each by default).
    #[arg(long, default_value_t = 1)]
    peer_runs: usize,
    /// The Kage tool to build for (KAGE_TOOL) and run the instrumented programs under
    /// (KAGE_OPTIONS tool=); `count-calls` runs the count tool on a build with a call per
    /// access.
    #[arg(long, default_value = "count")]
    tool: String,
    /// Only programs whose name contains one of these (repeatable, or comma-separated).
    #[arg(long, value_delimiter = ',')]
    filter: Vec<String>,
    /// Tiny problem sizes and one run: a smoke test of the whole pipeline, not a measurement.
    #[arg(long)]
    quick: bool,
    /// Problem sizes running about a tenth of the full native time (for slow tools).
    #[arg(long, conflicts_with = "quick")]
    medium: bool,
    /// Write the markdown report to this file as well as printing it.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Where builds, outputs and reports go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/kage-bench"))]
    work_dir: PathBuf,
    /// The kage-cc wrapper (default: next to this executable, as scripts/build.sh puts it).
    #[arg(long)]
    kage_cc: Option<PathBuf>,
    /// The native C compiler.
    #[arg(long, default_value = "clang-22")]
    native_cc: String,
    /// Rebuild every program even when its binaries are newer than their inputs.
    #[arg(long)]
    rebuild: bool,
    /// List the programs of the suite and exit.
    #[arg(long)]
    list: bool,
    /// Compare several configurations of the tool instead of one: each is more KAGE_OPTIONS
    /// items (`vsm=bulk:granularity=line`), compiler variables (`KAGE_INLINED_REGIONS=0`)
    /// and an optimisation level (`-O0`, in place of `-O2`), the last two building the
    /// variant's own binary, `:`-separated; repeatable, `''` for the default. The table then has a memory expansion and a slowdown column per variant (the
    /// Skadu paper's Figure 7).
    #[arg(long = "variant", allow_hyphen_values = true)]
    variants: Vec<String>,
    /// With --variant: limit each instrumented run's address space (RLIMIT_AS) to this
    /// many GiB; a run that runs out shows as "> N GiB" instead of exhausting the machine.
    #[arg(long)]
    mem_limit_gib: Option<f64>,
}

/// What the harness was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub runs: usize,
    pub peers: bool,
    pub peer_runs: usize,
    pub tool: String,
    pub filters: Vec<String>,
    pub quick: bool,
    pub medium: bool,
    pub output: Option<PathBuf>,
    pub work_dir: PathBuf,
    pub kage_cc: Option<PathBuf>,
    pub native_cc: String,
    pub rebuild: bool,
    pub list: bool,
    /// Runtime option sets to compare (empty: the one `tool` run).
    pub variants: Vec<String>,
    /// Address-space limit for instrumented runs, GiB.
    pub mem_limit_gib: Option<f64>,
    /// The command line as typed, for the report's "reproduce with" line.
    pub command_line: Vec<String>,
}

impl Options {
    /// The problem sizes asked for.
    pub fn size(&self) -> crate::suite::Size {
        use crate::suite::Size;
        match (self.quick, self.medium) {
            (true, _) => Size::Quick,
            (_, true) => Size::Medium,
            _ => Size::Full,
        }
    }
}

impl Cli {
    pub fn into_options(self) -> Options {
        Options {
            // --quick is a smoke test: one run unless the caller asked for more explicitly.
            runs: if self.quick && !std::env::args().any(|a| a.starts_with("--runs")) {
                1
            } else {
                self.runs.max(1)
            },
            peers: self.peers,
            peer_runs: self.peer_runs.max(1),
            tool: self.tool,
            filters: self.filter.into_iter().filter(|f| !f.is_empty()).collect(),
            quick: self.quick,
            medium: self.medium,
            output: self.output,
            work_dir: self.work_dir,
            kage_cc: self.kage_cc,
            native_cc: self.native_cc,
            rebuild: self.rebuild,
            list: self.list,
            variants: self.variants,
            mem_limit_gib: self.mem_limit_gib,
            command_line: std::env::args().collect(),
        }
    }
}
