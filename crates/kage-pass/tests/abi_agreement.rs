//! The pass's side of "the pass and the runtime agree": for every build tool, every runtime
//! symbol the instrumented IR refers to is one of `kage_abi::symbols` with exactly that
//! signature, calling convention and thread-locality, and is meant for that
//! instrumentation; every symbol `kage_abi` lists for an instrumentation is used by it on
//! some test input; and the module table has the layout and version `kage_abi` defines.
//! (The runtime's side, that it defines each of these symbols with these types, is checked
//! in `kage-rt`.)

mod support;

use std::collections::BTreeSet;

use kage_abi::{symbols, CType, CallingConvention, Instrumentation, Symbol};
use support::*;

const MODES: [Mode; 5] = [
    Mode::Calls,
    Mode::Counts,
    Mode::WorkingSet,
    Mode::WorkingSetTrace,
    Mode::Footprint,
];

/// Inputs that between them reach every hook: loops, every kind of access, exceptions,
/// setjmp, hoisted loops, segments.
const INPUTS: [&str; 8] = [
    "accesses.ll",
    "library.ll",
    "contexts.ll",
    "nested_loops.ll",
    "eh.ll",
    "setjmp.ll",
    "ws_loops.ll",
    "ws_segments.ll",
];

fn instrumentation(mode: Mode) -> Instrumentation {
    Instrumentation::from_u32(mode.abi_value()).expect("a kage-abi instrumentation")
}

/// The LLVM spelling of a C type of the ABI.
fn llvm_type(ty: CType) -> String {
    match ty {
        CType::Void => "void".into(),
        CType::Ptr => "ptr".into(),
        CType::I32 => "i32".into(),
        CType::I64 => "i64".into(),
        CType::I64Array(n) => format!("[{n} x i64]"),
    }
}

/// A runtime symbol as the printed IR declares it.
#[derive(Debug)]
enum Declared {
    /// `declare [cc] <ret> @name(<params>)`.
    Function {
        name: String,
        convention: Option<String>,
        returns: String,
        params: Vec<String>,
    },
    /// `@name = external [thread_local(localexec|initialexec)] global <ty>`.
    Global {
        name: String,
        ty: String,
        thread_local: bool,
    },
}

/// Every external `__kage_*` function or global `ir` declares (the pass's own helpers are
/// defined, not declared, and so are not listed).
fn declared_runtime_symbols(ir: &str) -> Vec<Declared> {
    let mut out = Vec::new();
    for line in ir.lines() {
        if let Some(rest) = line.strip_prefix("declare ") {
            let Some(at) = rest.find("@__kage_") else {
                continue;
            };
            // The registration entry point is a weak reference (`docs/abi.md`).
            let head: Vec<&str> = (rest[..at].split_whitespace())
                .filter(|word| *word != "extern_weak")
                .collect();
            let (convention, returns) = match head.as_slice() {
                [returns] => (None, returns.to_string()),
                [cc, returns] => (Some(cc.to_string()), returns.to_string()),
                other => panic!("unexpected declaration head {other:?} in: {line}"),
            };
            let signature = &rest[at + 1..];
            let open = signature.find('(').expect("a parameter list");
            let close = signature.find(')').expect("a parameter list");
            let params = signature[open + 1..close]
                .split(',')
                .map(|p| p.split_whitespace().next().unwrap_or("").to_string())
                .filter(|p| !p.is_empty())
                .collect();
            out.push(Declared::Function {
                name: signature[..open].to_string(),
                convention,
                returns,
                params,
            });
        } else if line.starts_with("@__kage_") && line.contains(" = external ") {
            let name = line[1..line.find(' ').unwrap()].to_string();
            // `global <ty>[, align N]`; an array type has spaces in it.
            let ty = &line[line.find(" global ").expect("global") + " global ".len()..];
            let ty = ty.split(',').next().unwrap_or(ty).trim();
            out.push(Declared::Global {
                name,
                ty: ty.to_string(),
                thread_local: line.contains("thread_local(localexec)")
                    || line.contains("thread_local(initialexec)"),
            });
        }
    }
    out
}

/// Checks one declaration against kage-abi for a module built with `mode` (x86-64 inputs).
fn check(declared: &Declared, mode: Mode, input: &str) {
    let instrumentation = instrumentation(mode);
    let (name, symbol) = match declared {
        Declared::Function { name, .. } | Declared::Global { name, .. } => {
            (name, symbols::find(name))
        }
    };
    let symbol =
        symbol.unwrap_or_else(|| panic!("{mode:?} {input}: @{name} is not in kage_abi::symbols"));
    match (declared, *symbol) {
        (
            Declared::Function {
                convention,
                returns,
                params,
                ..
            },
            Symbol::Function {
                params: abi_params,
                returns: abi_returns,
                convention: abi_convention,
                called_by,
                ..
            },
        ) => {
            let abi_params: Vec<String> = abi_params.iter().map(|&t| llvm_type(t)).collect();
            assert_eq!(
                params, &abi_params,
                "{mode:?} {input}: @{name}'s parameters"
            );
            assert_eq!(
                returns,
                &llvm_type(abi_returns),
                "{mode:?} {input}: @{name}"
            );
            let expected = match abi_convention {
                CallingConvention::C => None,
                CallingConvention::PreserveMostOnX86_64 => Some("preserve_mostcc"),
            };
            assert_eq!(convention.as_deref(), expected, "{mode:?} {input}: @{name}");
            assert!(
                called_by.contains(&instrumentation),
                "{mode:?} {input}: @{name} is not meant for {instrumentation:?}"
            );
        }
        (
            Declared::Global {
                ty, thread_local, ..
            },
            Symbol::Global {
                ty: abi_ty,
                thread_local: abi_thread_local,
                used_by,
                ..
            },
        ) => {
            assert_eq!(ty, &llvm_type(abi_ty), "{mode:?} {input}: @{name}");
            assert_eq!(*thread_local, abi_thread_local, "{mode:?} {input}: @{name}");
            assert!(
                used_by.contains(&instrumentation),
                "{mode:?} {input}: @{name} is not meant for {instrumentation:?}"
            );
        }
        _ => panic!("{mode:?} {input}: @{name} is declared as the wrong kind of symbol"),
    }
}

#[test]
fn every_runtime_symbol_the_pass_emits_is_kage_abis_and_each_is_used() {
    for mode in MODES {
        let instrumentation = instrumentation(mode);
        let mut used = BTreeSet::new();
        for input in INPUTS {
            let ir = instrument_in(mode, input);
            for declared in declared_runtime_symbols(&ir) {
                check(&declared, mode, input);
                let (Declared::Function { name, .. } | Declared::Global { name, .. }) = declared;
                used.insert(name);
            }
        }
        // What kage-abi says this instrumentation uses, it uses (on these inputs).
        for symbol in symbols::ALL {
            let (Symbol::Function { called_by: by, .. } | Symbol::Global { used_by: by, .. }) =
                *symbol;
            if by.contains(&instrumentation) {
                assert!(
                    used.contains(symbol.name()),
                    "{mode:?}: kage_abi says {} uses {}, but no test input's output refers to it",
                    instrumentation as u32,
                    symbol.name()
                );
            }
        }
    }
}

#[test]
fn the_module_table_has_kage_abis_layout_and_version() {
    for mode in MODES {
        let ir = instrument_in(mode, "nested_loops.ll");
        // The LLVM struct types of the table: field for field those of kage_abi::layout on
        // this x86-64 data layout (i32 at 4-byte, ptr at 8-byte alignment).
        let module_line = ir
            .lines()
            .find(|l| l.starts_with("@__kage_module = internal global"))
            .expect("the module table");
        let expected = format!(
            "@__kage_module = internal global {{ i32, i32, ptr, ptr, i32, i32, i32, i32 }} {{ i32 {}, i32 ",
            kage_abi::VERSION
        );
        assert!(module_line.starts_with(&expected), "{module_line}");
        let regions_line = ir
            .lines()
            .find(|l| l.starts_with("@__kage_regions = internal global"))
            .expect("the region table");
        assert!(
            regions_line.contains(
                "x { i32, i32, i32, i32, i32, i32, ptr, ptr, ptr, ptr, ptr, ptr, i32, i32, i32, i32 }] [{ i32, i32, i32, i32, i32, i32, ptr, ptr, ptr, ptr, ptr, ptr, i32, i32, i32, i32 } { i32 -1,"
            ),
            "{regions_line}"
        );
        assert_eq!(kage_abi::NONE, u32::MAX); // printed as `i32 -1` above
                                              // Offsets of those struct types under the C layout rules, as kage-abi states them.
        let offsets = |fields: &[usize]| {
            let mut at = 0usize;
            fields
                .iter()
                .map(|&size| {
                    at = at.next_multiple_of(size);
                    let here = at;
                    at += size;
                    here
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            offsets(&[4, 4, 4, 4, 4, 4, 8, 8, 8, 8, 8, 8, 4, 4, 4, 4]),
            kage_abi::layout::REGION_FIELDS
        );
        assert_eq!(
            offsets(&[4, 4, 8, 8, 4, 4, 4, 4]),
            kage_abi::layout::MODULE_FIELDS
        );
    }
}
