//! `kage`: the compiler wrappers as subcommands (`kage cc`, `kage c++`), `kage run`, `kage report`.

mod cli;

use clap::Parser;
use kage::cc::{exec_compiler, Language};
use std::ffi::OsString;
use std::process::exit;

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Compiler arguments go to clang byte for byte, so they bypass clap (which would want them
    // to be UTF-8 and would claim --help and --version).
    let wrapper = match args.get(1).and_then(|a| a.to_str()) {
        Some("cc") => Some(("kage cc", Language::C)),
        Some("c++") => Some(("kage c++", Language::Cxx)),
        _ => None,
    };
    if let Some((name, language)) = wrapper {
        exit(exec_compiler(name, language, &args[2..]));
    }

    let code = match cli::Cli::parse_from(args).command {
        cli::Command::Cc(compiler) => exec_compiler("kage cc", Language::C, &compiler.args),
        cli::Command::Cxx(compiler) => exec_compiler("kage c++", Language::Cxx, &compiler.args),
        cli::Command::Run(run) => kage::run::run(&run.into()),
        cli::Command::Report(report) => kage::report::report(
            &report.into(),
            &mut std::io::stdout().lock(),
            &mut std::io::stderr(),
        ),
    };
    exit(code);
}
