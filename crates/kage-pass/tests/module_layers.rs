//! The pass's modules import only downwards (the check: `tests/rust/module_layers.rs`): no
//! circle; the shared machinery imports neither the driver nor the tools; a tool's
//! instrumentation imports neither the driver nor another tool.

#[path = "../../../tests/rust/module_layers.rs"]
mod module_layers;

use module_layers::{check, check_the_parser, Layers};
use std::path::Path;

#[test]
fn crate_paths_are_read_whole() {
    check_the_parser();
}

/// The shared machinery, below the driver and the tools.
const LOW: &[&str] = &[
    "access",
    "address",
    "checkpoints",
    "contexts",
    "debuginfo",
    "equivalence",
    "hoist",
    "hooks",
    "ir",
    "library",
    "loops",
    "plan",
    "region_tree",
    "regions",
    "segments",
];
/// The drivers (the instrumenting pass, the early versioning of loop nests) and the tools.
const HIGH: &[&str] = &["nests", "pass", "tools"];

#[test]
fn modules_import_only_downwards() {
    let graph = check(&Layers {
        src: Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        low: LOW,
        high: HIGH,
        tools: "tools",
        expected_tools: &["count", "footprint", "hcpa", "loops", "working_set"],
    });
    // Every module is in a layer: a new one must be placed.
    for module in graph.keys().filter(|m| *m != "lib") {
        assert!(
            LOW.contains(&module.as_str()) || HIGH.contains(&module.as_str()),
            "{module}: add it to a layer of this test"
        );
    }
}
