//! `kage-cxx` (and the `kage-c++` symlink to it): a drop-in C++ compiler (`CXX=kage-c++`) that
//! builds programs with Kage instrumentation. Cargo cannot name a binary `kage-c++`.

use kage::cc::{exec_compiler, Language};
use std::ffi::OsString;

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(exec_compiler(
        Language::Cxx.wrapper_name(),
        Language::Cxx,
        &args,
    ));
}
