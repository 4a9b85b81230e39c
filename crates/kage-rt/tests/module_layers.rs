//! The runtime's modules import only downwards (the check: `tests/rust/module_layers.rs`):
//! no circle; the low-level modules import nothing above them; a tool imports neither the
//! runtime, the common C ABI, the thread list, the signal handling, the report, nor
//! another tool.

#[path = "../../../tests/rust/module_layers.rs"]
mod module_layers;

use module_layers::{check, check_the_parser, Layers};
use std::path::Path;

#[test]
fn crate_paths_are_read_whole() {
    check_the_parser();
}

#[test]
fn modules_import_only_downwards() {
    check(&Layers {
        src: Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        low: &[
            "sync",
            "alloc",
            "chunked",
            "collections",
            "stack",
            "registry",
            "options",
            "gate",
            "inline",
            "tool",
        ],
        high: &[
            "runtime", "abi", "contexts", "thread", "signals", "report", "tools",
        ],
        tools: "tools",
        expected_tools: &["count", "footprint", "working_set"],
    });
}
