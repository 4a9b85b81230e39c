//! `kage-cc`: a drop-in C compiler (`CC=kage-cc`) that builds programs with Kage instrumentation.
//! Called through a name ending in `++` or `cxx` it compiles C++ instead.

use kage::cc::{exec_compiler, Language};
use std::ffi::OsString;

fn main() {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| OsString::from("kage-cc"));
    let language = Language::from_program_name(&argv0);
    let args: Vec<OsString> = args.collect();
    std::process::exit(exec_compiler(language.wrapper_name(), language, &args));
}
