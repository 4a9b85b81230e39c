//! What the integration tests share.

use std::path::PathBuf;

/// The runtime's static library, found from this test executable (`<target>/<profile>/deps/`):
/// `<target>/<profile>/libkage_rt.a` as `cargo build` leaves it, or the copy `cargo test`
/// builds in `deps/` (cargo does not refresh the top-level one then): the newest wins.
pub fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let mut candidates = vec![deps.parent().unwrap().join("libkage_rt.a")];
    for e in std::fs::read_dir(deps).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("libkage_rt-") && name.ends_with(".a") {
            candidates.push(e.path());
        }
    }
    candidates
        .into_iter()
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
        .expect("libkage_rt.a not found next to the test executable (build kage-rt first)")
}
