//! What the harness's end-to-end tests share.

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Runs `kage-bench --quick <args> --work-dir <work>` with this build's kage-cc and no
/// `KAGE_OPTIONS` from the environment; panics with its output if it fails, else returns
/// its standard output.
#[allow(dead_code)] // not every test uses it
pub fn kage_bench_quick(work: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_kage-bench"))
        .arg("--quick")
        .args(args)
        .arg("--work-dir")
        .arg(work)
        .arg("--kage-cc")
        .arg(kage_cc())
        .env_remove("KAGE_OPTIONS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kage-bench {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
