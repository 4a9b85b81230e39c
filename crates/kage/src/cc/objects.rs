//! Which object files of a link were compiled without Kage (a `make` that reused objects of
//! an earlier plain build is a common slip): their code runs unmeasured, and a program made
//! only of them writes no report at all. An object compiled with the pass has the module
//! table `__kage_module` among its symbols (a local one); an object that defines code
//! without it was compiled without the pass.

use object::{Object, ObjectSymbol, SymbolKind};

use super::args::{Input, InputKind};

/// The symbol every instrumented object defines (`kage_abi::MODULE_GLOBAL`).
const MODULE_SYMBOL: &str = kage_abi::MODULE_GLOBAL;

/// What an object file is, for Kage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// Compiled with the pass.
    Instrumented,
    /// Defines code, compiled without the pass.
    Plain,
    /// Defines no code (data only, or empty), or was assembled rather than compiled.
    NoCode,
    /// Not an object file this can read (LLVM bitcode of an LTO build, another format).
    Unknown,
}

/// Classifies the object file `bytes`. Only objects a compiler made from a source file (they
/// name it in a file symbol) can be plain: an assembled one (`.S`, `.s`) was never going to
/// be instrumented, and names no source file, or an assembly one.
pub fn classify(bytes: &[u8]) -> ObjectKind {
    let Ok(file) = object::File::parse(bytes) else {
        return ObjectKind::Unknown;
    };
    let mut code = false;
    let mut compiled = false;
    for symbol in file.symbols() {
        let name = symbol.name().unwrap_or("");
        if name == MODULE_SYMBOL {
            return ObjectKind::Instrumented;
        }
        code |= symbol.kind() == SymbolKind::Text && symbol.is_definition();
        compiled |= symbol.kind() == SymbolKind::File
            && !name.is_empty()
            && ![".s", ".S", ".asm"].iter().any(|ext| name.ends_with(ext));
    }
    if code && compiled {
        ObjectKind::Plain
    } else {
        ObjectKind::NoCode
    }
}

/// The object files (`*.o`) among a link's `inputs` that were compiled without Kage, as
/// written; `read` reads a file (unreadable ones are left to the linker to complain about).
pub fn plain_objects(inputs: &[Input], read: impl Fn(&str) -> Option<Vec<u8>>) -> Vec<String> {
    (inputs.iter())
        .filter(|input| input.kind == InputKind::Other && input.name.ends_with(".o"))
        .filter(|input| {
            read(&input.name).is_some_and(|bytes| classify(&bytes) == ObjectKind::Plain)
        })
        .map(|input| input.name.clone())
        .collect()
}

/// What the wrapper says when it links objects compiled without Kage.
pub fn plain_objects_warning(wrapper: &str, plain: &[String]) -> String {
    let shown: Vec<&str> = plain.iter().take(5).map(String::as_str).collect();
    let more = match plain.len().saturating_sub(shown.len()) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        "{wrapper}: warning: {} object file{} compiled without kage-cc ({}{more}): {} code is \
         not measured; objects left from a plain build? run `make clean` and build again with \
         CC=kage-cc",
        plain.len(),
        if plain.len() == 1 { " was" } else { "s were" },
        shown.join(", "),
        if plain.len() == 1 { "its" } else { "their" },
    )
}

/// The link argument that tells the runtime some code was compiled without Kage: it defines
/// `__kage_plain_objects` (as an alias, which needs no relocation of its own), which the
/// runtime looks for at start-up.
pub const PLAIN_OBJECTS_FLAG: &str = "-Wl,--defsym=__kage_plain_objects=__kage_register_module";

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Compiles `source` (C) to an object with clang, with or without the pass's symbol.
    fn object(source: &str) -> Option<Vec<u8>> {
        let dir = tempfile::tempdir().ok()?;
        let (c, o) = (dir.path().join("t.c"), dir.path().join("t.o"));
        std::fs::write(&c, source).ok()?;
        let status = Command::new("clang-22")
            .args(["-c", "-o"])
            .arg(&o)
            .arg(&c)
            .status()
            .ok()?;
        status.success().then(|| std::fs::read(&o).ok()).flatten()
    }

    #[test]
    fn objects_are_told_apart_by_the_module_table() {
        let Some(plain) = object("int f(int x) { return x + 1; }") else {
            eprintln!("clang-22 not found: skipped");
            return;
        };
        assert_eq!(classify(&plain), ObjectKind::Plain);
        let marked = object(
            "static char __kage_module[32] __attribute__((used)); int f(int x) { return x; }",
        )
        .unwrap();
        assert_eq!(classify(&marked), ObjectKind::Instrumented);
        assert_eq!(
            classify(&object("int table[4] = {1};").unwrap()),
            ObjectKind::NoCode
        );
        assert_eq!(classify(b"BC\xc0\xde bitcode"), ObjectKind::Unknown);

        let inputs: Vec<Input> = ["a.c", "plain.o", "marked.o", "lib.a", "missing.o"]
            .iter()
            .map(|&name| Input {
                name: name.into(),
                kind: if name.ends_with(".c") {
                    InputKind::Source
                } else {
                    InputKind::Other
                },
            })
            .collect();
        let read = |name: &str| match name {
            "plain.o" => Some(plain.clone()),
            "marked.o" => Some(marked.clone()),
            "lib.a" => Some(plain.clone()),
            _ => None,
        };
        assert_eq!(plain_objects(&inputs, read), ["plain.o"]);
    }

    #[test]
    fn the_warning_names_the_objects_and_the_likely_cause() {
        let one = plain_objects_warning("kage-cc", &["x.o".into()]);
        assert!(one.contains("1 object file was compiled without kage-cc (x.o): its code"));
        assert!(one.contains("make clean"), "{one}");
        let many: Vec<String> = (0..7).map(|i| format!("o{i}.o")).collect();
        let seven = plain_objects_warning("kage-cc", &many);
        assert!(seven.contains("7 object files were"), "{seven}");
        assert!(seven.contains("o4.o and 2 more): their code"), "{seven}");
    }
}
