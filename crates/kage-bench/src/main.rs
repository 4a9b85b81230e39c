//! `kage-bench`: builds every program of the benchmark suite natively and with kage-cc, runs
//! both (and optionally the Valgrind peers), checks their outputs agree and prints a markdown
//! table of time and peak-RSS ratios. See `bench/README.md`.

mod cli;
mod compile;
mod harness;
mod machine;
mod measure;
mod sources;
mod stats;
mod suite;
mod table;
mod versions;

use clap::Parser;

fn main() {
    let options = cli::Cli::parse().into_options();
    match harness::run(&options) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(error) => {
            eprintln!("kage-bench: {error:#}");
            std::process::exit(2);
        }
    }
}
