//! The copies `kage-version-loops` makes of a selected nest (src/nests/version.rs): besides
//! the original with its decision blocks and the instrumented version, a pristine copy for
//! the entries that come once sampling is over, which calls the runtime nowhere and only
//! counts; and a copy per version of a `static` function the nest alone calls, so that the
//! original still inlines it as the program's own build does.

mod support;

use std::collections::BTreeMap;

use support::*;

/// `tests/ir/nest_copies.c` as an -O2 pipeline begins with it, versioned for the loops tool.
fn versioned() -> String {
    let dir = tempfile::tempdir().unwrap();
    let ll = early_ir("clang-22", &ir_dir().join("nest_copies.c"), dir.path());
    let env = [("KAGE_TOOL", "loops"), ("KAGE_LOOPS", "nest_copies.c:9")];
    run_plugin_on(&ll, &env, "kage-version-loops")
}

/// The blocks of function `name` in `ir`: label → its instructions.
fn blocks<'a>(ir: &'a str, name: &str) -> BTreeMap<&'a str, Vec<&'a str>> {
    let start = ir
        .find(&format!("@{name}("))
        .and_then(|at| ir[..at].rfind("\ndefine").map(|d| d + 1))
        .unwrap_or_else(|| panic!("no definition of {name}"));
    let body = &ir[start..];
    let body = &body[..body.find("\n}\n").unwrap()];
    let mut blocks = BTreeMap::new();
    let mut current = "entry";
    for line in body.lines().skip(1) {
        if let Some(label) = line.split(':').next().filter(|_| !line.starts_with(' ')) {
            if !label.is_empty() && !label.starts_with(';') {
                current = label;
                continue;
            }
        }
        if !line.trim().is_empty() {
            blocks
                .entry(current)
                .or_insert_with(Vec::new)
                .push(line.trim());
        }
    }
    blocks
}

#[test]
fn unsampled_entries_run_a_pristine_copy_that_only_counts() {
    let ir = versioned();
    let sum = blocks(&ir, "sum");
    let pristine: Vec<&&str> = sum.keys().filter(|b| b.contains("kage.pristine")).collect();
    // Both loops' blocks, a counting block per level, a way out.
    assert!(
        pristine.iter().any(|b| b.ends_with(".kage.pristine")),
        "{pristine:?}"
    );
    assert_eq!(
        pristine
            .iter()
            .filter(|b| b.starts_with("kage.pristine.iteration"))
            .count(),
        2,
        "{pristine:?}"
    );
    assert!(pristine.iter().any(|b| b.starts_with("kage.pristine.exit")));
    for block in &pristine {
        for inst in &sum[**block] {
            assert!(!inst.contains("@__kage_loops_"), "{block}: {inst}");
        }
    }
    // Its way out adds each level's iterations to the nest's counters.
    let exit = pristine
        .iter()
        .find(|b| b.starts_with("kage.pristine.exit"))
        .unwrap();
    let adds = sum[**exit]
        .iter()
        .filter(|i| i.contains("atomicrmw add"))
        .count();
    assert_eq!(adds, 2, "{:?}", sum[**exit]);
    // An entry that finds sampling over counts itself and goes there, asking nothing.
    let skip = &sum["kage.nest.count"];
    assert!(
        skip.iter().all(|i| !i.contains("@__kage_loops_")),
        "{skip:?}"
    );
    assert!(skip.last().unwrap().contains(".kage.pristine"), "{skip:?}");
}

#[test]
fn each_copy_of_the_nest_calls_its_own_copy_of_a_function_it_alone_calls() {
    let ir = versioned();
    let sum = blocks(&ir, "sum");
    let calls_to = |callee: &str| {
        (sum.values().flatten())
            .filter(|i| i.contains(&format!("@{callee}(")) && i.contains("call "))
            .count()
    };
    assert_eq!(calls_to("helper"), 1, "the original's call");
    assert_eq!(calls_to("helper.kage.instrumented"), 1);
    assert_eq!(calls_to("helper.kage.pristine"), 1);
    for copy in ["helper.kage.instrumented", "helper.kage.pristine"] {
        assert!(
            ir.contains(&format!("define internal i32 @{copy}(")),
            "no definition of {copy}"
        );
    }
}
