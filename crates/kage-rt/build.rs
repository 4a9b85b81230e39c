//! Compiles the runtime's only C: the thread-local access budget (csrc/ws_tls.c).
fn main() {
    println!("cargo:rerun-if-changed=csrc/ws_tls.c");
    cc::Build::new()
        .file("csrc/ws_tls.c")
        .flag_if_supported("-fno-sanitize=all")
        .compile("kage_ws_tls");
}
