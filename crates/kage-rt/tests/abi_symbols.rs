//! Every symbol of the pass/runtime contract (`kage_abi::symbols::ALL`: hooks, tool entry
//! points, the thread-locals of `csrc/tls.c`) is defined by the
//! runtime's static library, as a global symbol. (Their Rust types are checked against
//! `kage_abi::symbols` at compile time, beside each definition.)

use std::collections::BTreeSet;
use std::process::Command;

mod common;

#[test]
fn every_abi_symbol_is_defined() {
    let lib = common::staticlib();
    let nm = std::env::var("NM").unwrap_or_else(|_| "nm".into());
    let out = Command::new(&nm)
        .args(["-g", "--defined-only"])
        .arg(&lib)
        .output()
        .unwrap_or_else(|e| panic!("run {nm}: {e}"));
    assert!(
        out.status.success(),
        "{nm} {}: {}",
        lib.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Lines "<address> <type> <name>"; archive member headers and blank lines have fewer
    // fields.
    let defined: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3).then(|| f[2].to_string())
        })
        .collect();
    let missing: Vec<&str> = kage_abi::symbols::ALL
        .iter()
        .map(|s| s.name())
        .filter(|name| !defined.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "{} does not define {missing:?}",
        lib.display()
    );
    // And the control API of include/kage.h.
    for name in ["kage_set_enabled", "kage_reset"] {
        assert!(defined.contains(name), "{name}");
    }
}
