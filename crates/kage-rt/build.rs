//! Compiles the runtime's only C: the thread-locals instrumented code updates and the
//! footprint range buffer (csrc/tls.c).
fn main() {
    println!("cargo:rerun-if-changed=csrc/tls.c");
    cc::Build::new()
        .file("csrc/tls.c")
        .flag_if_supported("-fno-sanitize=all")
        .compile("kage_tls");
}
