//! Classifying a compiler command line: what the call does and which of its inputs get compiled.
//!
//! The classification only decides what kage-cc adds; the user's arguments are always passed
//! to the real compiler unchanged. Response files (`@file`) are expanded here, recursively,
//! only so that the flags inside them are seen.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// How far a call goes, in the order the clang driver decides it: `-E`/`-M`/`-MM` win over
/// `-fsyntax-only`, which wins over `-S`, which wins over `-c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `-E`, `-M`, `-MM`: only the preprocessor runs (`-MD`/`-MMD` are not this: they write
    /// dependencies as a side effect of compiling).
    Preprocess,
    /// `-fsyntax-only`, `--analyze`, `-emit-ast`, `--precompile`: the front end runs, the
    /// optimizer (where the Kage pass lives) does not.
    FrontEndOnly,
    /// `-S`: compile to assembly (or to `.ll` with `-emit-llvm`).
    Assembly,
    /// `-c`: compile to object files.
    Object,
    /// No mode flag: compile the sources, then link everything.
    Link,
}

/// The debug information the user asked for; the last `-g` flag wins, as in clang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebugInfo {
    /// No `-g` flag at all.
    Unspecified,
    /// `-g0` (or `-ggdb0`) came last.
    Off,
    /// A `-g` flag that produces at least line tables came last.
    On,
}

/// Whether an input goes through clang's optimizer (and so through the Kage pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// C, C++, Objective-C, preprocessed output, LLVM IR.
    Source,
    /// Objects, archives, shared libraries, assembly, headers, linker scripts...
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// The input as written (`-` is standard input).
    pub name: String,
    pub kind: InputKind,
}

/// What a compiler call does, as far as Kage cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub mode: Mode,
    pub inputs: Vec<Input>,
    /// `-shared`: the output is a shared library.
    pub shared: bool,
    /// `-r`: a partial link, whose output is linked again later.
    pub relocatable: bool,
    /// `-static` or `-static-pie`: no shared libraries at all.
    pub static_link: bool,
    /// `-fuse-ld=` names gold, which does not take `-z pack-relative-relocs`.
    pub gold_linker: bool,
    pub debug_info: DebugInfo,
    /// `--version`, `-dumpversion`, `-print-*`, `--help`...: the compiler answers a question
    /// and builds nothing.
    pub query: bool,
    /// An `-x LANG` other than `-x none` is still in effect after the last argument, so a file
    /// name appended to the command line would be read as that language.
    pub language_in_effect: bool,
    /// Index (in the original argument list) of the argument that holds the first `--`:
    /// everything after it is an input, so flags must be added before it.
    pub end_of_options: Option<usize>,
}

impl Invocation {
    pub fn has_inputs(&self) -> bool {
        !self.inputs.is_empty()
    }

    pub fn has_sources(&self) -> bool {
        self.inputs.iter().any(|i| i.kind == InputKind::Source)
    }
}

/// One argument after response-file expansion, with the index of the original argument it
/// came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpandedArg {
    pub text: String,
    pub origin: usize,
}

/// Response files nested deeper than this are left unexpanded (clang would reject them anyway).
const MAX_RESPONSE_FILE_DEPTH: usize = 32;

/// Replaces every `@file` whose file can be read by the arguments in it, recursively. A nested
/// relative `@file` is looked up in the current directory first, then beside the file that names
/// it. An `@file` that cannot be read stays as it is, as compilers treat it as a plain argument.
pub fn expand_response_files(
    args: &[OsString],
    read: &mut dyn FnMut(&Path) -> io::Result<Vec<u8>>,
) -> Vec<ExpandedArg> {
    let mut out = Vec::new();
    for (origin, arg) in args.iter().enumerate() {
        expand_one(arg, None, origin, 0, read, &mut out);
    }
    out
}

fn expand_one(
    arg: &OsStr,
    including_dir: Option<&Path>,
    origin: usize,
    depth: usize,
    read: &mut dyn FnMut(&Path) -> io::Result<Vec<u8>>,
    out: &mut Vec<ExpandedArg>,
) {
    let literal = |out: &mut Vec<ExpandedArg>| {
        out.push(ExpandedArg {
            text: arg.to_string_lossy().into_owned(),
            origin,
        })
    };
    let Some(file) = arg.as_bytes().strip_prefix(b"@").filter(|f| !f.is_empty()) else {
        return literal(out);
    };
    if depth >= MAX_RESPONSE_FILE_DEPTH {
        return literal(out);
    }
    let file = Path::new(OsStr::from_bytes(file));
    let mut candidates = vec![file.to_path_buf()];
    if let Some(dir) = including_dir.filter(|_| file.is_relative()) {
        candidates.push(dir.join(file));
    }
    for candidate in candidates {
        if let Ok(contents) = read(&candidate) {
            let dir: PathBuf = candidate
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            for token in tokenize_gnu(&contents) {
                expand_one(&token, Some(&dir), origin, depth + 1, read, out);
            }
            return;
        }
    }
    literal(out)
}

/// Splits a response file the way GCC and clang do on Unix: whitespace separates arguments,
/// single and double quotes group, and a backslash takes the next character literally (inside
/// quotes too).
pub fn tokenize_gnu(contents: &[u8]) -> Vec<OsString> {
    let mut tokens = Vec::new();
    let mut token = Vec::new();
    let mut bytes = contents.iter().copied();
    while let Some(b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(next) => token.push(next),
                None => token.push(b),
            },
            b'\'' | b'"' => {
                let quote = b;
                while let Some(inner) = bytes.next() {
                    match inner {
                        _ if inner == quote => break,
                        b'\\' => token.extend(bytes.next()),
                        _ => token.push(inner),
                    }
                }
            }
            _ if b.is_ascii_whitespace() => {
                if !token.is_empty() {
                    tokens.push(OsString::from_vec(std::mem::take(&mut token)));
                }
            }
            _ => token.push(b),
        }
    }
    if !token.is_empty() {
        tokens.push(OsString::from_vec(token));
    }
    tokens
}

/// Options whose value is the next argument when written apart (`-o out`, `-MF deps.d`): the
/// value must not be mistaken for an input. Joined forms (`-oout`, `-MFdeps.d`, `--output=out`)
/// are single arguments and need no entry here.
const OPTIONS_WITH_SEPARATE_VALUE: &[&str] = &[
    "-o",
    "--output",
    "-x",
    "--language",
    "-I",
    "--include-directory",
    "-D",
    "--define-macro",
    "-U",
    "--undefine-macro",
    "-include",
    "--include",
    "-imacros",
    "--imacros",
    "-isystem",
    "-isystem-after",
    "-iquote",
    "-idirafter",
    "-iprefix",
    "-iwithprefix",
    "-iwithprefixbefore",
    "-isysroot",
    "-iwithsysroot",
    "-iframework",
    "-imultilib",
    "-include-pch",
    "-cxx-isystem",
    "-iapinotes-modules",
    "-ivfsoverlay",
    "-L",
    "--library-directory",
    "-l",
    "-MF",
    "-MT",
    "-MQ",
    "-MJ",
    "-Xlinker",
    "--for-linker",
    "-Xassembler",
    "-Xpreprocessor",
    "-Xclang",
    "-Xanalyzer",
    "-Xopenmp-target",
    "-Xoffload-linker",
    "-Xcuda-fatbinary",
    "-Xcuda-ptxas",
    "-Xarch_host",
    "-Xarch_device",
    "-arch",
    "-target",
    "-u",
    "-T",
    "-z",
    "-e",
    "-A",
    "-mllvm",
    "-B",
    "-F",
    "--param",
    "-aux-info",
    "-dumpbase",
    "-dumpbase-ext",
    "-dumpdir",
    "-working-directory",
    "-resource-dir",
    "-serialize-diagnostics",
    "-install_name",
    "-framework",
    "-dependency-file",
    "-dependency-dot",
    "-module-dependency-dir",
    "--sysroot",
    "--config",
    "-rpath",
    "-exported_symbols_list",
    "-unexported_symbols_list",
    "-bundle_loader",
];

/// Flags that make the compiler print something and stop without building anything.
fn is_query(arg: &str) -> bool {
    matches!(
        arg,
        "--version"
            | "-dumpversion"
            | "-dumpfullversion"
            | "-dumpmachine"
            | "-dumpspecs"
            | "--help"
            | "-help"
            | "--help-hidden"
            | "--target-help"
    ) || arg.starts_with("-print-")
        || arg.starts_with("--print-")
}

/// The debug level a `-g...` flag sets; `None` for flags that only tune debug information
/// without turning it on or off (`-gsplit-dwarf`, `-gz`, `-gcolumn-info`, `-gdwarf64`...).
fn debug_flag(arg: &str) -> Option<DebugInfo> {
    match arg {
        "-g0" | "-ggdb0" => Some(DebugInfo::Off),
        "-g"
        | "-g1"
        | "-g2"
        | "-g3"
        | "-ggdb"
        | "-ggdb1"
        | "-ggdb2"
        | "-ggdb3"
        | "-gdwarf"
        | "-gline-tables-only"
        | "-gmlt"
        | "-gline-directives-only"
        | "-gfull"
        | "-glldb"
        | "-gsce"
        | "-gdbx"
        | "-gmodules"
        | "--debug" => Some(DebugInfo::On),
        _ => match arg.strip_prefix("-gdwarf-") {
            // -gdwarf-4, -gdwarf-5 pick a version and turn debug information on.
            Some(version) if version.parse::<u8>().is_ok() => Some(DebugInfo::On),
            _ => None,
        },
    }
}

/// Languages (`-x LANG`) that clang compiles through its optimizer.
fn language_is_compiled(language: &str) -> bool {
    matches!(
        language,
        "c" | "c++"
            | "objective-c"
            | "objective-c++"
            | "cpp-output"
            | "c++-cpp-output"
            | "objective-c-cpp-output"
            | "objc-cpp-output"
            | "objective-c++-cpp-output"
            | "objc++-cpp-output"
            | "c++-module"
            | "ir"
    )
}

/// File extensions clang compiles through its optimizer when no `-x` is in effect. Case
/// matters: `.C` and `.M` are C++ and Objective-C++.
fn extension_is_compiled(name: &str) -> bool {
    let Some(extension) = Path::new(name).extension().and_then(OsStr::to_str) else {
        return false;
    };
    matches!(
        extension,
        "c" | "i"
            | "cc"
            | "cp"
            | "cxx"
            | "cpp"
            | "CPP"
            | "c++"
            | "C"
            | "ii"
            | "cppm"
            | "ccm"
            | "cxxm"
            | "c++m"
            | "ixx"
            | "m"
            | "mi"
            | "mm"
            | "M"
            | "mii"
            | "ll"
            | "bc"
    )
}

/// The language named by `-x LANG`, `-xLANG`, `--language LANG` or `--language=LANG`, and how
/// many arguments it takes up.
fn language_option<'a>(arg: &'a str, next: Option<&'a str>) -> Option<(Option<&'a str>, usize)> {
    match arg {
        "-x" | "--language" => Some((next, 2)),
        _ => arg
            .strip_prefix("--language=")
            .or_else(|| arg.strip_prefix("-x"))
            .map(|language| (Some(language), 1)),
    }
}

/// Classifies an argument list (without the program name), reading response files with `read`.
pub fn classify_with(
    args: &[OsString],
    read: &mut dyn FnMut(&Path) -> io::Result<Vec<u8>>,
) -> Invocation {
    let expanded = expand_response_files(args, read);
    let mut invocation = Invocation {
        mode: Mode::Link,
        inputs: Vec::new(),
        shared: false,
        relocatable: false,
        static_link: false,
        gold_linker: false,
        debug_info: DebugInfo::Unspecified,
        query: false,
        language_in_effect: false,
        end_of_options: None,
    };
    let (mut preprocess, mut front_end_only, mut assembly, mut object) =
        (false, false, false, false);
    // The language forced by the last -x, None for "by extension".
    let mut language: Option<String> = None;
    let mut i = 0;
    while i < expanded.len() {
        let arg = expanded[i].text.as_str();
        let next = expanded.get(i + 1).map(|a| a.text.as_str());
        i += 1;
        if invocation.end_of_options.is_some() || arg == "-" || !arg.starts_with('-') {
            let kind = match &language {
                Some(language) if language_is_compiled(language) => InputKind::Source,
                Some(_) => InputKind::Other,
                None if extension_is_compiled(arg) => InputKind::Source,
                None => InputKind::Other,
            };
            invocation.inputs.push(Input {
                name: arg.to_string(),
                kind,
            });
            continue;
        }
        if arg == "--" {
            invocation.end_of_options = Some(expanded[i - 1].origin);
            continue;
        }
        if let Some((named, taken)) = language_option(arg, next) {
            language = named.filter(|l| *l != "none").map(str::to_string);
            i += taken - 1;
            continue;
        }
        if let Some(level) = debug_flag(arg) {
            invocation.debug_info = level;
            continue;
        }
        match arg {
            "-E" | "-M" | "-MM" => preprocess = true,
            "-fsyntax-only" | "--analyze" | "-emit-ast" | "--precompile" => front_end_only = true,
            "-S" => assembly = true,
            "-c" => object = true,
            "-shared" | "--shared" => invocation.shared = true,
            "-r" => invocation.relocatable = true,
            "-static" | "--static" | "-static-pie" => invocation.static_link = true,
            _ if arg.starts_with("-fuse-ld=") => {
                invocation.gold_linker = arg.ends_with("gold");
            }
            _ if is_query(arg) => invocation.query = true,
            _ if OPTIONS_WITH_SEPARATE_VALUE.contains(&arg) => i += 1,
            _ => {}
        }
    }
    invocation.mode = if preprocess {
        Mode::Preprocess
    } else if front_end_only {
        Mode::FrontEndOnly
    } else if assembly {
        Mode::Assembly
    } else if object {
        Mode::Object
    } else {
        Mode::Link
    };
    invocation.language_in_effect = language.is_some();
    invocation
}

/// Classifies an argument list, reading response files from the file system.
pub fn classify(args: &[OsString]) -> Invocation {
    classify_with(args, &mut |path| std::fs::read(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn classify_in(args: &[&str], files: &[(&str, &str)]) -> Invocation {
        let files: HashMap<PathBuf, Vec<u8>> = files
            .iter()
            .map(|(p, c)| (PathBuf::from(p), c.as_bytes().to_vec()))
            .collect();
        classify_with(&os(args), &mut |path| {
            files
                .get(path)
                .cloned()
                .ok_or_else(|| io::ErrorKind::NotFound.into())
        })
    }

    fn plain(args: &[&str]) -> Invocation {
        classify_in(args, &[])
    }

    fn names(inv: &Invocation, kind: InputKind) -> Vec<&str> {
        inv.inputs
            .iter()
            .filter(|i| i.kind == kind)
            .map(|i| i.name.as_str())
            .collect()
    }

    #[test]
    fn modes_follow_the_clang_driver_priority() {
        assert_eq!(plain(&["x.c"]).mode, Mode::Link);
        assert_eq!(plain(&["-c", "x.c"]).mode, Mode::Object);
        assert_eq!(plain(&["-S", "-c", "x.c"]).mode, Mode::Assembly);
        assert_eq!(
            plain(&["-fsyntax-only", "-S", "x.c"]).mode,
            Mode::FrontEndOnly
        );
        assert_eq!(
            plain(&["-E", "-fsyntax-only", "x.c"]).mode,
            Mode::Preprocess
        );
        assert_eq!(plain(&["-M", "x.c"]).mode, Mode::Preprocess);
        assert_eq!(plain(&["-MM", "-c", "x.c"]).mode, Mode::Preprocess);
        // -MD and -MMD write dependencies while compiling.
        assert_eq!(plain(&["-MD", "-c", "x.c"]).mode, Mode::Object);
        assert_eq!(plain(&["-MMD", "-MP", "-c", "x.c"]).mode, Mode::Object);
    }

    #[test]
    fn option_values_are_not_inputs() {
        let inv = plain(&[
            "-MD",
            "-MF",
            "x.d",
            "-MT",
            "x.o",
            "-o",
            "prog",
            "-I",
            "inc",
            "-include",
            "cfg.h",
            "-Xlinker",
            "-Map=out.map",
            "-L",
            "lib",
            "-l",
            "m",
            "main.c",
            "util.o",
        ]);
        assert_eq!(names(&inv, InputKind::Source), ["main.c"]);
        assert_eq!(names(&inv, InputKind::Other), ["util.o"]);
        // Joined forms are one argument each.
        let inv = plain(&[
            "-oprog",
            "-MFx.d",
            "-Iinc",
            "-lm",
            "-Wl,--gc-sections",
            "main.c",
        ]);
        assert_eq!(names(&inv, InputKind::Source), ["main.c"]);
        assert!(names(&inv, InputKind::Other).is_empty());
    }

    #[test]
    fn sources_are_recognised_by_extension() {
        let inv = plain(&[
            "a.c", "b.cpp", "c.cc", "d.C", "e.i", "f.ll", "g.s", "h.S", "i.o", "j.a", "k.so.1",
            "l.h",
        ]);
        assert_eq!(
            names(&inv, InputKind::Source),
            ["a.c", "b.cpp", "c.cc", "d.C", "e.i", "f.ll"]
        );
        assert_eq!(
            names(&inv, InputKind::Other),
            ["g.s", "h.S", "i.o", "j.a", "k.so.1", "l.h"]
        );
    }

    #[test]
    fn dash_x_sets_the_language_of_the_inputs_after_it() {
        let inv = plain(&[
            "-x",
            "c++",
            "main.inc",
            "-xassembler",
            "start.txt",
            "-x",
            "none",
            "lib.c",
            "z.o",
        ]);
        assert_eq!(names(&inv, InputKind::Source), ["main.inc", "lib.c"]);
        assert_eq!(names(&inv, InputKind::Other), ["start.txt", "z.o"]);
        assert!(!inv.language_in_effect);
        let inv = plain(&["--language=c", "-"]);
        assert_eq!(names(&inv, InputKind::Source), ["-"]);
        assert!(inv.language_in_effect);
        let inv = plain(&["--language", "c-header", "x.h"]);
        assert_eq!(names(&inv, InputKind::Other), ["x.h"]);
    }

    #[test]
    fn standard_input_is_an_input() {
        let inv = plain(&["-E", "-"]);
        assert_eq!(
            inv.inputs,
            [Input {
                name: "-".into(),
                kind: InputKind::Other
            }]
        );
        let inv = plain(&["-x", "c", "-c", "-", "-o", "x.o"]);
        assert_eq!(names(&inv, InputKind::Source), ["-"]);
    }

    #[test]
    fn everything_after_double_dash_is_an_input() {
        let inv = plain(&["-c", "--", "-weird.c", "x.o"]);
        assert_eq!(inv.end_of_options, Some(1));
        assert_eq!(names(&inv, InputKind::Source), ["-weird.c"]);
        assert_eq!(names(&inv, InputKind::Other), ["x.o"]);
    }

    #[test]
    fn the_last_debug_flag_wins() {
        assert_eq!(plain(&["-c", "x.c"]).debug_info, DebugInfo::Unspecified);
        assert_eq!(plain(&["-g", "-c", "x.c"]).debug_info, DebugInfo::On);
        assert_eq!(plain(&["-g", "-g0", "x.c"]).debug_info, DebugInfo::Off);
        assert_eq!(plain(&["-g0", "-ggdb3", "x.c"]).debug_info, DebugInfo::On);
        assert_eq!(plain(&["-gdwarf-4", "x.c"]).debug_info, DebugInfo::On);
        assert_eq!(
            plain(&["-gline-tables-only", "x.c"]).debug_info,
            DebugInfo::On
        );
        // These tune debug information without turning it on.
        assert_eq!(
            plain(&["-gsplit-dwarf", "-gz", "-gdwarf64", "x.c"]).debug_info,
            DebugInfo::Unspecified
        );
    }

    #[test]
    fn shared_relocatable_and_queries() {
        assert!(plain(&["-shared", "-fPIC", "a.o", "-o", "liba.so"]).shared);
        assert!(plain(&["-r", "a.o", "b.o", "-o", "ab.o"]).relocatable);
        assert!(plain(&["--version"]).query);
        assert!(plain(&["-print-file-name=libc.so"]).query);
        assert!(plain(&["-dumpversion"]).query);
        assert!(!plain(&["-v", "-c", "x.c"]).query);
    }

    #[test]
    fn response_files_expand_recursively_with_quotes() {
        let inv = classify_in(
            &["@build/args.rsp", "-o", "prog"],
            &[
                (
                    "build/args.rsp",
                    "-c \"my file.c\" 'other file.cpp' back\\ slash.c @more.rsp",
                ),
                // A nested relative name is found beside the file that names it.
                ("build/more.rsp", "-g\n-x c++\nheader.inl\n"),
            ],
        );
        assert_eq!(inv.mode, Mode::Object);
        assert_eq!(inv.debug_info, DebugInfo::On);
        assert_eq!(
            names(&inv, InputKind::Source),
            ["my file.c", "other file.cpp", "back slash.c", "header.inl"]
        );
        assert!(inv.language_in_effect);
    }

    #[test]
    fn expanded_arguments_remember_where_they_came_from() {
        let expanded = expand_response_files(&os(&["-O2", "@r", "x.c"]), &mut |p| {
            if p == Path::new("r") {
                Ok(b"-c -- y.c".to_vec())
            } else {
                Err(io::ErrorKind::NotFound.into())
            }
        });
        let origins: Vec<(&str, usize)> = expanded
            .iter()
            .map(|a| (a.text.as_str(), a.origin))
            .collect();
        assert_eq!(
            origins,
            [("-O2", 0), ("-c", 1), ("--", 1), ("y.c", 1), ("x.c", 2)]
        );
        let inv = classify_with(&os(&["-O2", "@r", "x.c"]), &mut |p| {
            if p == Path::new("r") {
                Ok(b"-c -- y.c".to_vec())
            } else {
                Err(io::ErrorKind::NotFound.into())
            }
        });
        assert_eq!(inv.end_of_options, Some(1));
    }

    #[test]
    fn unreadable_and_cyclic_response_files_stay_literal() {
        let inv = plain(&["@missing.rsp", "-c"]);
        assert_eq!(names(&inv, InputKind::Other), ["@missing.rsp"]);
        // A file that names itself expands until the depth limit, then stops.
        let inv = classify_in(&["@loop.rsp"], &[("loop.rsp", "-c @loop.rsp")]);
        assert_eq!(inv.mode, Mode::Object);
        assert_eq!(names(&inv, InputKind::Other), ["@loop.rsp"]);
    }

    #[test]
    fn tokenizer_handles_quotes_escapes_and_blank_lines() {
        let tokens = tokenize_gnu(b"  a\t\"b c\"  'd \"e\"' f\\\"g \"h\\\"i\"\n\n'' j");
        assert_eq!(tokens, os(&["a", "b c", "d \"e\"", "f\"g", "h\"i", "j"]));
    }
}
