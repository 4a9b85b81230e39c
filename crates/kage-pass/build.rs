//! Compiles src/shim.cpp, the C++ that registers the pass with LLVM's PassBuilder.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/shim.cpp");
    println!("cargo:rerun-if-env-changed=LLVM_CONFIG");
    let llvm_config = std::env::var("LLVM_CONFIG").unwrap_or_else(|_| "llvm-config-22".to_string());
    let output = Command::new(&llvm_config)
        .arg("--cxxflags")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {llvm_config}: {e}"));
    assert!(output.status.success(), "{llvm_config} --cxxflags failed");
    let cxxflags = String::from_utf8(output.stdout).expect("llvm-config output is UTF-8");

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .compiler("clang++-22")
        .file("src/shim.cpp")
        .warnings(true);
    for flag in cxxflags.split_whitespace() {
        // LLVM's headers as system headers: their own warnings are not ours to fix.
        match flag.strip_prefix("-I") {
            Some(dir) => build.flag("-isystem").flag(dir),
            None => build.flag(flag),
        };
    }
    // Debian's LLVM is built without RTTI; the pass model's vtables must not ask for typeinfo.
    build.flag("-fno-rtti");
    build.compile("kage_shim");
}
