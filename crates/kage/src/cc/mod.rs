//! The compiler wrapper behind `kage-cc`, `kage-c++` (`kage-cxx`), `kage cc` and `kage c++`.
//!
//! A library in the style of LibAFL's `libafl_cc`: [`args`] classifies a command line,
//! [`plan`] decides what to add, [`compiler`] and [`artifacts`] find the files involved, and
//! [`exec_compiler`] puts them together and replaces the process with the real compiler, so
//! its exit status and signals reach the build system untouched.

pub mod args;
pub mod artifacts;
pub mod compiler;
pub mod objects;
pub mod plan;

pub use compiler::Language;

use crate::exit_code;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// Set to print the real compiler's command line on stderr before running it.
pub const VERBOSE_ENV_VAR: &str = "KAGE_CC_VERBOSE";

/// Chooses the instrumentation at build time (read by the pass, see docs/abi.md): unset or
/// `count` builds for the count tool (counts added inline), `count-calls` for every tool
/// (a call per access), `working-set` for the working-set tool's inline fast path,
/// `footprint` for the footprint tool's grouped reports...; the values are
/// `kage_abi::BUILD_TOOLS`.
pub const TOOL_ENV_VAR: &str = kage_abi::TOOL_VARIABLE;

/// Checks a `KAGE_TOOL` value; the error names the valid ones.
pub fn check_build_tool(value: Option<&std::ffi::OsStr>) -> Result<(), String> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    match value.to_str() {
        Some(v) if kage_abi::BUILD_TOOLS.iter().any(|t| t.name == v) => Ok(()),
        _ => Err(format!(
            "{TOOL_ENV_VAR}='{}' is not a tool; use one of: {} (or leave it unset to build for \
             the count tool)",
            value.to_string_lossy(),
            (kage_abi::BUILD_TOOLS.iter().map(|t| t.name))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// With `KAGE_TOOL=working-set`: the cache line size built into the inline marks (read by
/// the pass; 64 when unset). The runtime reports in lines of this size or larger.
pub const LINE_SIZE_ENV_VAR: &str = kage_abi::LINE_SIZE_VARIABLE;

/// Checks a `KAGE_WS_LINE_SIZE` value: a power of two from 16 to 4096, as `line_size=`.
pub fn check_build_line_size(value: Option<&std::ffi::OsStr>) -> Result<(), String> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    match value.to_str().and_then(|v| v.parse::<u64>().ok()) {
        Some(n) if kage_abi::is_line_size(n) => Ok(()),
        _ => Err(format!(
            "{LINE_SIZE_ENV_VAR}='{}' is not a line size; use a power of two from 16 to 4096 \
             (or leave it unset for 64)",
            value.to_string_lossy()
        )),
    }
}

/// Runs the real compiler for `user_args` (the arguments after the program name) with Kage's
/// additions. Returns only when that is impossible, with the exit code to use; `wrapper` is
/// the name messages start with.
pub fn exec_compiler(wrapper: &str, language: Language, user_args: &[OsString]) -> i32 {
    let env = |name: &str| std::env::var_os(name);
    let checked = check_build_tool(env(TOOL_ENV_VAR).as_deref())
        .and_then(|()| check_build_line_size(env(LINE_SIZE_ENV_VAR).as_deref()));
    if let Err(message) = checked {
        eprintln!("{wrapper}: {message}");
        return exit_code::SETUP_ERROR;
    }
    let invocation = args::classify(user_args);
    let mut plan = plan::Plan::new(&invocation);
    // `#pragma kage profile` selects loop nests for the loops tools, `#pragma kage versions`
    // writes a nest in versions for the select tool.
    plan.read_pragmas = env(TOOL_ENV_VAR).is_some_and(|tool| {
        (kage_abi::BUILD_TOOLS.iter()).any(|t| t.name == tool && t.instrumentation.reads_pragmas())
    });
    if plan.link_runtime {
        // Objects compiled without Kage: say so now, and have the program say so when it
        // starts (the runtime looks for the symbol the flag defines).
        let plain = objects::plain_objects(&invocation.inputs, |name| std::fs::read(name).ok());
        if !plain.is_empty() {
            eprintln!("{}", objects::plain_objects_warning(wrapper, &plain));
            plan.extra_link_args
                .push(objects::PLAIN_OBJECTS_FLAG.into());
        }
    }
    let compiler = compiler::choose(language, &env);
    let current_exe = std::env::current_exe().ok();

    // A missing compiler is reported before anything else: nothing works without it.
    let path = env("PATH").unwrap_or_default();
    let resolved =
        compiler::find_on_path(compiler.program.as_os_str(), &path).filter(|p| p.is_file());
    let Some(resolved) = resolved else {
        let error = io::Error::from(io::ErrorKind::NotFound);
        eprintln!(
            "{}",
            compiler::cannot_run_message(wrapper, language, &compiler, &error)
        );
        return exit_code::CANNOT_RUN;
    };
    if current_exe
        .as_deref()
        .is_some_and(|exe| same_file(&resolved, exe))
    {
        eprintln!(
            "{wrapper}: {} points at this wrapper ('{}'), which would call itself forever: \
             point {} at the real clang 22, e.g. /usr/lib/llvm-22/bin/{}",
            language.env_var(),
            compiler.program.display(),
            language.env_var(),
            if language == Language::Cxx {
                "clang++"
            } else {
                "clang"
            },
        );
        return exit_code::SETUP_ERROR;
    }

    let argv = match plan.argv(user_args, |artifact| {
        artifacts::locate(artifact, &env, current_exe.as_deref())
    }) {
        Ok(argv) => argv,
        Err(missing) => {
            eprintln!("{wrapper}: {missing}");
            return exit_code::SETUP_ERROR;
        }
    };
    if env(VERBOSE_ENV_VAR).is_some_and(|v| !v.is_empty() && v != "0") {
        let shown: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        eprintln!(
            "{wrapper}: {} {}",
            compiler.program.display(),
            shown.join(" ")
        );
    }
    let mut command = Command::new(&compiler.program);
    command.args(&argv);
    if plan.code_for_shared_library {
        command.env(kage_abi::SHARED_LIBRARY_CODE_VARIABLE, "1");
    }
    let error = command.exec();
    eprintln!(
        "{}",
        compiler::cannot_run_message(wrapper, language, &compiler, &error)
    );
    exit_code::CANNOT_RUN
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn build_tools_are_checked() {
        assert_eq!(check_build_tool(None), Ok(()));
        assert_eq!(check_build_tool(Some(OsStr::new(""))), Ok(()));
        assert_eq!(check_build_tool(Some(OsStr::new("working-set"))), Ok(()));
        assert_eq!(check_build_tool(Some(OsStr::new("count"))), Ok(()));
        let e = check_build_tool(Some(OsStr::new("workingset"))).unwrap_err();
        assert!(
            e.contains("'workingset'") && e.contains("count, count-calls, working-set"),
            "{e}"
        );
    }

    #[test]
    fn build_line_sizes_are_checked() {
        for ok in [None, Some(""), Some("16"), Some("64"), Some("4096")] {
            assert_eq!(check_build_line_size(ok.map(OsStr::new)), Ok(()), "{ok:?}");
        }
        for bad in ["8", "100", "8192", "64B"] {
            let e = check_build_line_size(Some(OsStr::new(bad))).unwrap_err();
            assert!(
                e.contains(&format!("KAGE_WS_LINE_SIZE='{bad}'")) && e.contains("16 to 4096"),
                "{e}"
            );
        }
    }
}
