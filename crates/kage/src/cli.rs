//! The `kage` command line (clap), turned into the library's plain option structs.

use clap::{Args, Parser, Subcommand, ValueEnum};
use kage::report::{PlanChoice, RegionsView, ReportFormat, ReportOptions};
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
                  kage report kage.prog.1234.json --format html -o prog.html   (working-set, footprint, hcpa and loops reports)"
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
    /// page with an icicle view, for hcpa reports the parallelism plan (text or HTML), for
    /// loops reports each selected nest's levels (text or HTML)
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
    /// with an icicle view of the region tree; hcpa reports: one with the plan and the tree
    /// coloured by self-parallelism; loops reports: one with each selected nest's levels (use
    /// with -o)
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
    /// Hcpa reports: plan for P cores [default: the report's plan; for a report without one,
    /// this machine's cores]
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u64).range(1..))]
    pub cores: Option<u64>,
    /// Hcpa reports: leave out regions with less of the program's work than this, a
    /// percentage (5%) or a fraction (0.05) [default: the report's plan, else 1%]
    #[arg(long, value_name = "SHARE", value_parser = parse_share)]
    pub min_coverage: Option<f64>,
    /// Hcpa reports: leave out regions whose self-parallelism is under this [default: the
    /// report's plan, else 1.5]
    #[arg(long, value_name = "SP", value_parser = parse_parallelism)]
    pub min_sp: Option<f64>,
}

/// A share of the program's work: "5%" or "0.05", as a fraction (0..1).
fn parse_share(value: &str) -> Result<f64, String> {
    let (number, scale) = match value.trim().strip_suffix('%') {
        Some(percent) => (percent.trim(), 100.0),
        None => (value.trim(), 1.0),
    };
    let parsed: f64 = number.parse().map_err(|_| {
        format!("'{value}' is not a share: write a percentage (5%) or a fraction (0.05)")
    })?;
    let share = parsed / scale;
    if !(0.0..=1.0).contains(&share) {
        return Err(if scale == 1.0 && parsed <= 100.0 {
            format!("{value} is more than the whole program: write {value}% for a percentage, or a fraction from 0 to 1")
        } else {
            format!("{value} is not between 0 and 100%")
        });
    }
    Ok(share)
}

/// A self-parallelism threshold: a number of at least 0.
fn parse_parallelism(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(sp) if sp.is_finite() && sp >= 0.0 => Ok(sp),
        _ => Err(format!(
            "'{value}' is not a self-parallelism: write a number such as 1.5"
        )),
    }
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
            plan: PlanChoice {
                cores: args.cores,
                min_coverage: args.min_coverage,
                min_sp: args.min_sp,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_options(args: &[&str]) -> Result<ReportOptions, clap::Error> {
        let cli = Cli::try_parse_from(["kage", "report", "r.json"].iter().chain(args))?;
        match cli.command {
            Command::Report(report) => Ok(report.into()),
            _ => unreachable!(),
        }
    }

    #[test]
    fn planner_options_become_a_plan_choice() {
        let options = report_options(&[]).unwrap();
        assert_eq!(options.plan, PlanChoice::default());
        let options =
            report_options(&["--cores", "4", "--min-coverage", "5%", "--min-sp", "2"]).unwrap();
        assert_eq!(
            options.plan,
            PlanChoice {
                cores: Some(4),
                min_coverage: Some(0.05),
                min_sp: Some(2.0),
            }
        );
        let options = report_options(&["--min-coverage", "0.2"]).unwrap();
        assert_eq!(options.plan.min_coverage, Some(0.2));
        for bad in [
            &["--cores", "0"][..],
            &["--cores", "many"],
            &["--min-coverage", "5"],
            &["--min-coverage", "150%"],
            &["--min-coverage", "-1%"],
            &["--min-coverage", "x"],
            &["--min-sp", "-1"],
            &["--min-sp", "inf"],
        ] {
            assert!(report_options(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shares_are_percentages_or_fractions() {
        assert_eq!(parse_share("1%"), Ok(0.01));
        assert_eq!(parse_share("0.5"), Ok(0.5));
        assert_eq!(parse_share("0"), Ok(0.0));
        assert_eq!(parse_share("100%"), Ok(1.0));
        assert_eq!(
            parse_share("5").unwrap_err(),
            "5 is more than the whole program: write 5% for a percentage, or a fraction from 0 to 1"
        );
    }
}
