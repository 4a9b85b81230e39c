//! The `kage` command line (clap), turned into the library's plain option structs.

use clap::{Args, Parser, Subcommand, ValueEnum};
use kage::report::{RegionsView, ReportFormat, ReportOptions};
use kage::run::RunOptions;
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "kage",
    version,
    about = "Shadow-memory analysis of C and C++ programs",
    after_help = "Build with the wrappers, run, read the report:\n  \
                  CC=kage-cc CXX=kage-c++ make        (or: kage cc -O2 prog.c -o prog)\n  \
                  kage run -- ./prog args\n  \
                  kage report kage.prog.1234.json\n  \
                  kage report kage.prog.1234.json --format html -o prog.html   (working-set and footprint reports)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Compile and link C with Kage instrumentation: every argument goes to clang 22 unchanged
    #[command(disable_help_flag = true)]
    Cc(CompilerArgs),
    /// Compile and link C++ with Kage instrumentation: every argument goes to clang++ 22 unchanged
    #[command(name = "c++", disable_help_flag = true)]
    Cxx(CompilerArgs),
    /// Run an instrumented program, then summarise its report on stderr
    Run(RunArgs),
    /// Show a report: a region tree or working-set chart (text), JSON, for working-set
    /// reports an HTML page with a plot or a Perfetto trace, for footprint reports an HTML
    /// page with an icicle view
    Report(ReportArgs),
}

#[derive(Debug, Args)]
pub struct CompilerArgs {
    /// Compiler arguments, as for clang
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CLANG ARGS"
    )]
    pub args: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The analysis to run (runtime option tool=)
    #[arg(long, value_name = "TOOL")]
    pub tool: Option<String>,
    /// A runtime option, NAME=VALUE (repeatable; `KAGE_OPTIONS=help=1 ./prog` lists them).
    /// Added after any KAGE_OPTIONS already set, so these win
    #[arg(long = "option", value_name = "NAME=VALUE")]
    pub options: Vec<String>,
    /// Write the report to FILE instead of kage.<program>.<pid>.json (%p in FILE stands for
    /// the pid, %e for the executable's name, %% for a percent sign)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The program and its arguments (put `--` before them)
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// For people: the region tree, or for working-set reports a chart of the snapshots
    Text,
    /// The report itself, pretty-printed
    Json,
    /// Working-set reports: a self-contained HTML page with a plot; footprint reports: one
    /// with an icicle view of the region tree (use with -o)
    Html,
    /// Working-set reports: a trace for ui.perfetto.dev or chrome://tracing (use with -o)
    Perfetto,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The report file (kage.<program>.<pid>.json)
    pub file: PathBuf,
    /// How to show it
    #[arg(long, value_enum, default_value = "text")]
    pub format: FormatArg,
    /// Write to FILE instead of standard output
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Regions as the source wrote them (the compiler's copies of a region, such as calls
    /// inlined in several places and split loops, joined into one), or every copy apart
    /// [default: source, but static for --format json, which shows the report as written]
    #[arg(long, value_enum)]
    pub regions: Option<RegionsArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RegionsArg {
    Source,
    Static,
}

impl From<RunArgs> for RunOptions {
    fn from(args: RunArgs) -> RunOptions {
        RunOptions {
            tool: args.tool,
            options: args.options,
            output: args.output,
            command: args.command,
        }
    }
}

impl From<ReportArgs> for ReportOptions {
    fn from(args: ReportArgs) -> ReportOptions {
        let format = match args.format {
            FormatArg::Text => ReportFormat::Text,
            FormatArg::Json => ReportFormat::Json,
            FormatArg::Html => ReportFormat::Html,
            FormatArg::Perfetto => ReportFormat::Perfetto,
        };
        ReportOptions {
            file: args.file,
            format,
            output: args.output,
            regions: args.regions.map(|r| match r {
                RegionsArg::Source => RegionsView::Source,
                RegionsArg::Static => RegionsView::Static,
            }),
        }
    }
}
