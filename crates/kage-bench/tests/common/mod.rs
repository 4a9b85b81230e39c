//! What the harness's end-to-end tests share.

use std::path::PathBuf;

/// kage-cc as scripts/build.sh leaves it: next to kage-bench in a release build, else in the
/// workspace's target/release.
pub fn kage_cc() -> PathBuf {
    let sibling = PathBuf::from(env!("CARGO_BIN_EXE_kage-bench")).with_file_name("kage-cc");
    let release = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/kage-cc");
    [sibling, release]
        .into_iter()
        .find(|p| p.exists())
        .expect("kage-cc not built: run scripts/build.sh first")
}
