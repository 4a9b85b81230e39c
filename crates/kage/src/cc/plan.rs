//! Turning a classified call into the real compiler's argument list.
//!
//! The user's arguments come first, unchanged and in order; Kage's are added after them
//! (before a `--`, after which everything is an input):
//!
//! - a call that runs the optimizer on sources (`-S`, `-c`, or a link that compiles sources)
//!   gets `-fpass-plugin=<libkage_pass.so>`, and `-gline-tables-only`
//!   unless a `-g` level of at least 1 is already in force, so that regions have a file and
//!   lines; building for the loops tool, it also gets `-fplugin=<libkage_pragma.so>`, which
//!   reads `#pragma kage profile`;
//! - a call that links an executable gets the runtime ([`RUNTIME_LINK_ARGS`]).
//!
//! Shared libraries (`-shared`) and partial links (`-r`) do not get the runtime: their
//! `__kage_*` references stay undefined and resolve at load time against the runtime the
//! instrumented executable exports (`--export-dynamic-symbol=__kage_*`). An executable built
//! without kage-cc cannot load an instrumented library.
//!
//! Queries (`--version`, `-print-*`...) and calls without inputs (`-v`, autoconf's probes) go
//! to the compiler exactly as they came.

use super::args::{DebugInfo, Invocation, Mode};
use super::artifacts::Artifact;
use std::ffi::OsString;
use std::path::PathBuf;

/// Stands for the runtime object's path in [`RUNTIME_LINK_ARGS`].
pub const RUNTIME_OBJECT: &str = "<libkage_rt.o>";

/// What a link adds: the runtime, one object (linked whole, so its start-up code and hooks
/// are all kept, even the ones nothing in the program references yet), the hooks exported
/// so that instrumented shared libraries resolve against them, and the system libraries the
/// Rust runtime may need, each loaded only if something uses it (`--as-needed`, for these
/// alone: loading libm for nothing costs every program half a megabyte of resident pages).
pub const RUNTIME_LINK_ARGS: &[&str] = &[
    RUNTIME_OBJECT,
    EXPORT_HOOKS,
    "-Wl,--push-state,--as-needed",
    "-lpthread",
    "-ldl",
    "-lm",
    "-lrt",
    SHARED_UNWINDER,
    "-Wl,--pop-state",
];

/// Added to a dynamic link after [`RUNTIME_LINK_ARGS`]: the relative relocations of the
/// instrumented code's tables (a few pointers per region: 90,000 in SQLite, 2 MB as plain
/// `RELA` entries that the loader reads at every start) packed as `RELR` (a few KB). The
/// loader's memory goes into the program's peak RSS, which the tools' memory figures
/// compare with native. GNU ld (2.38 and later), lld and mold take it and record a need for
/// glibc's `GLIBC_ABI_DT_RELR`, so that a C library too old to read packed relocations
/// refuses to load the program instead of running it wrong; gold rejects the flag, and a
/// static link is left as it is.
pub const PACKED_RELOCATIONS_FLAG: &str = "-Wl,-z,pack-relative-relocs";

/// Exports the runtime's hooks, for instrumented shared libraries, and the signal functions
/// it puts in place of the C library's, so that a shared library's handlers are the
/// program's too (crates/kage-rt/src/handlers.rs); in [`RUNTIME_LINK_ARGS`]. A static link
/// (which loads no shared library) leaves it out: an exported thread-local hook keeps a
/// dynamic TLS relocation, which a static PIE's start-up code cannot apply (it crashed in
/// `_dl_relocate_static_pie` before `main`).
pub const EXPORT_HOOKS: &str = "-Wl,--export-dynamic-symbol=__kage_*,\
--export-dynamic-symbol=sigaction,--export-dynamic-symbol=signal,\
--export-dynamic-symbol=bsd_signal,--export-dynamic-symbol=sysv_signal";

/// The unwinder the Rust runtime may need, in [`RUNTIME_LINK_ARGS`]; a static link
/// (`-static` has no shared `libgcc_s`) takes [`STATIC_UNWINDER`] in its place.
pub const SHARED_UNWINDER: &str = "-lgcc_s";
pub const STATIC_UNWINDER: &str = "-lgcc_eh";

/// The debug level added when the user asked for none: line tables only, so that regions get
/// a file and lines without changing the generated code.
pub const LINE_TABLES_FLAG: &str = "-gline-tables-only";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Load the Kage pass.
    pub instrument: bool,
    /// Load the `#pragma kage profile` plugin too (set for loops builds).
    pub read_pragmas: bool,
    /// Add [`LINE_TABLES_FLAG`].
    pub add_line_tables: bool,
    /// Add [`RUNTIME_LINK_ARGS`].
    pub link_runtime: bool,
    /// Where the additions go: before this original argument, or at the end.
    insert_before: Option<usize>,
    /// Reset `-x` before the runtime object so that it is not read as source code.
    reset_language: bool,
    /// More arguments for a link with the runtime, after [`RUNTIME_LINK_ARGS`].
    pub extra_link_args: Vec<OsString>,
    /// The link is static (`-static`): the unwinder comes from `libgcc_eh`.
    static_link: bool,
    /// Add [`PACKED_RELOCATIONS_FLAG`].
    pack_relocations: bool,
    /// The sources compiled go into a shared library or a partial link: the compiler runs
    /// with [`kage_abi::SHARED_LIBRARY_CODE_VARIABLE`] set.
    pub code_for_shared_library: bool,
}

impl Plan {
    pub fn new(invocation: &Invocation) -> Plan {
        let builds = !invocation.query && invocation.has_inputs();
        let optimizes = matches!(invocation.mode, Mode::Assembly | Mode::Object | Mode::Link);
        let instrument = builds && optimizes && invocation.has_sources();
        let link_runtime = builds
            && invocation.mode == Mode::Link
            && !invocation.shared
            && !invocation.relocatable;
        Plan {
            instrument,
            read_pragmas: false,
            add_line_tables: instrument && invocation.debug_info != DebugInfo::On,
            link_runtime,
            insert_before: invocation.end_of_options,
            reset_language: link_runtime && invocation.language_in_effect,
            extra_link_args: Vec::new(),
            static_link: invocation.static_link,
            pack_relocations: !invocation.static_link && !invocation.gold_linker,
            code_for_shared_library: instrument
                && invocation.mode == Mode::Link
                && (invocation.shared || invocation.relocatable),
        }
    }

    /// True when the call goes to the compiler unchanged.
    pub fn is_pass_through(&self) -> bool {
        !self.instrument && !self.link_runtime
    }

    /// The real compiler's arguments. `artifact` is asked only for the files this plan needs,
    /// so a pass-through call works even when Kage is not built.
    pub fn argv<E>(
        &self,
        user_args: &[OsString],
        mut artifact: impl FnMut(Artifact) -> Result<PathBuf, E>,
    ) -> Result<Vec<OsString>, E> {
        let mut added: Vec<OsString> = Vec::new();
        if self.instrument {
            let mut flag = OsString::from("-fpass-plugin=");
            flag.push(artifact(Artifact::PassPlugin)?);
            added.push(flag);
            if self.read_pragmas {
                let mut flag = OsString::from("-fplugin=");
                flag.push(artifact(Artifact::PragmaPlugin)?);
                added.push(flag);
            }
        }
        if self.add_line_tables {
            added.push(LINE_TABLES_FLAG.into());
        }
        if self.link_runtime {
            let runtime = artifact(Artifact::Runtime)?;
            if self.reset_language {
                added.extend(["-x".into(), "none".into()]);
            }
            added.extend(RUNTIME_LINK_ARGS.iter().filter_map(|&arg| match arg {
                RUNTIME_OBJECT => Some(runtime.clone().into_os_string()),
                EXPORT_HOOKS if self.static_link => None,
                SHARED_UNWINDER if self.static_link => Some(STATIC_UNWINDER.into()),
                _ => Some(arg.into()),
            }));
            if self.pack_relocations {
                added.push(PACKED_RELOCATIONS_FLAG.into());
            }
            added.extend(self.extra_link_args.iter().cloned());
        }
        let at = self
            .insert_before
            .unwrap_or(user_args.len())
            .min(user_args.len());
        let mut argv = Vec::with_capacity(user_args.len() + added.len());
        argv.extend_from_slice(&user_args[..at]);
        argv.extend(added);
        argv.extend_from_slice(&user_args[at..]);
        Ok(argv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::args::classify_with;
    use std::io;
    use std::path::Path;

    const PLUGIN: &str = "-fpass-plugin=/k/libkage_pass.so";

    fn fixed_artifacts(artifact: Artifact) -> Result<PathBuf, std::convert::Infallible> {
        Ok(match artifact {
            Artifact::PassPlugin => "/k/libkage_pass.so".into(),
            Artifact::Runtime => "/k/libkage_rt.o".into(),
            Artifact::PragmaPlugin => "/k/libkage_pragma.so".into(),
            Artifact::SharedRuntime => "/k/libkage_rt.so".into(),
        })
    }

    fn runtime() -> Vec<String> {
        RUNTIME_LINK_ARGS
            .iter()
            .map(|&a| match a {
                RUNTIME_OBJECT => "/k/libkage_rt.o".to_string(),
                _ => a.to_string(),
            })
            .collect()
    }

    fn final_args(args: &[&str]) -> Vec<String> {
        final_args_with_files(args, &[])
    }

    fn final_args_with_files(args: &[&str], files: &[(&str, &str)]) -> Vec<String> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let invocation = classify_with(&args, &mut |path: &Path| {
            files
                .iter()
                .find(|(name, _)| Path::new(name) == path)
                .map(|(_, contents)| contents.as_bytes().to_vec())
                .ok_or_else(|| io::ErrorKind::NotFound.into())
        });
        let Ok(argv) = Plan::new(&invocation).argv(&args, fixed_artifacts);
        argv.into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    /// `user` followed by `added`.
    fn then(user: &[&str], added: &[&str]) -> Vec<String> {
        user.iter().chain(added).map(|s| s.to_string()).collect()
    }

    fn then_link(user: &[&str], added: &[&str]) -> Vec<String> {
        let mut all = then(user, added);
        all.extend(runtime());
        all.push(PACKED_RELOCATIONS_FLAG.into());
        all
    }

    #[test]
    fn sources_linked_into_a_shared_library_are_compiled_as_its_code() {
        let plan = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            Plan::new(&classify_with(&args, &mut |_: &Path| {
                Err(io::ErrorKind::NotFound.into())
            }))
        };
        for args in [
            &["-O2", "-shared", "lib.c", "-o", "lib.so"][..],
            &["-shared", "-fPIC", "lib.c", "-o", "lib.so"],
            &["-r", "a.c", "-o", "part.o"],
        ] {
            assert!(plan(args).code_for_shared_library, "{args:?}");
        }
        for args in [
            &["-O2", "-c", "lib.c", "-o", "lib.o"][..],
            &["-O2", "prog.c", "-o", "prog"],
            &["-shared", "lib.o", "-o", "lib.so"],
        ] {
            assert!(!plan(args).code_for_shared_library, "{args:?}");
        }
    }

    #[test]
    fn table_of_calls_and_their_plans() {
        let cases: &[(&[&str], Vec<String>)] = &[
            // Compile only: plugin and line tables, no runtime.
            (
                &["-O2", "-c", "x.c", "-o", "x.o"],
                then(
                    &["-O2", "-c", "x.c", "-o", "x.o"],
                    &[PLUGIN, LINE_TABLES_FLAG],
                ),
            ),
            // Dependencies written while compiling do not change anything.
            (
                &["-MD", "-MF", "x.d", "-c", "x.c"],
                then(
                    &["-MD", "-MF", "x.d", "-c", "x.c"],
                    &[PLUGIN, LINE_TABLES_FLAG],
                ),
            ),
            // A -g level is kept as it is.
            (&["-g", "-c", "x.c"], then(&["-g", "-c", "x.c"], &[PLUGIN])),
            (
                &["-g3", "-S", "x.c"],
                then(&["-g3", "-S", "x.c"], &[PLUGIN]),
            ),
            // -g0 last: line tables are added after it, so they win.
            (
                &["-g", "-g0", "-c", "x.c"],
                then(&["-g", "-g0", "-c", "x.c"], &[PLUGIN, LINE_TABLES_FLAG]),
            ),
            // Preprocessing, dependency listing and syntax checks run no optimizer.
            (&["-E", "x.c"], then(&["-E", "x.c"], &[])),
            (&["-M", "x.c"], then(&["-M", "x.c"], &[])),
            (
                &["-MM", "-MT", "x.o", "x.c"],
                then(&["-MM", "-MT", "x.o", "x.c"], &[]),
            ),
            (
                &["-fsyntax-only", "x.cpp"],
                then(&["-fsyntax-only", "x.cpp"], &[]),
            ),
            // Assembly is not compiled by the optimizer.
            (&["-c", "start.S"], then(&["-c", "start.S"], &[])),
            // Compile and link in one call; several sources.
            (
                &["-O2", "a.c", "b.c", "-o", "prog"],
                then_link(
                    &["-O2", "a.c", "b.c", "-o", "prog"],
                    &[PLUGIN, LINE_TABLES_FLAG],
                ),
            ),
            // Link only: no plugin, no line tables, the runtime.
            (
                &["a.o", "b.o", "-o", "prog", "-lm"],
                then_link(&["a.o", "b.o", "-o", "prog", "-lm"], &[]),
            ),
            // Shared libraries are instrumented but get no runtime.
            (
                &["-shared", "-fPIC", "lib.c", "-o", "lib.so"],
                then(
                    &["-shared", "-fPIC", "lib.c", "-o", "lib.so"],
                    &[PLUGIN, LINE_TABLES_FLAG],
                ),
            ),
            (
                &["-shared", "lib.o", "-o", "lib.so"],
                then(&["-shared", "lib.o", "-o", "lib.so"], &[]),
            ),
            (
                &["-r", "a.o", "b.o", "-o", "ab.o"],
                then(&["-r", "a.o", "b.o", "-o", "ab.o"], &[]),
            ),
            // C++ by -x: instrumented.
            (
                &["-x", "c++", "-c", "main.inc"],
                then(
                    &["-x", "c++", "-c", "main.inc"],
                    &[PLUGIN, LINE_TABLES_FLAG],
                ),
            ),
            // Queries and calls without inputs pass straight through.
            (&["--version"], then(&["--version"], &[])),
            (&["-v"], then(&["-v"], &[])),
            (&["-dumpversion"], then(&["-dumpversion"], &[])),
            (
                &["-print-file-name=libgcc.a"],
                then(&["-print-file-name=libgcc.a"], &[]),
            ),
            (
                &["-print-search-dirs", "x.c"],
                then(&["-print-search-dirs", "x.c"], &[]),
            ),
            (&["-O2", "-o", "prog"], then(&["-O2", "-o", "prog"], &[])),
            (&[], vec![]),
            // A verbose compile is still a compile.
            (
                &["-v", "-c", "x.c"],
                then(&["-v", "-c", "x.c"], &[PLUGIN, LINE_TABLES_FLAG]),
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(&final_args(args), expected, "for {args:?}");
        }
    }

    #[test]
    fn a_static_link_takes_the_static_unwinder_and_exports_no_hooks() {
        for flag in ["-static", "-static-pie"] {
            let args = ["x.o", flag, "-o", "prog"];
            let expected: Vec<String> = then_link(&args, &[])
                .into_iter()
                .filter(|a| a != PACKED_RELOCATIONS_FLAG && a != EXPORT_HOOKS)
                .map(|a| {
                    if a == SHARED_UNWINDER {
                        STATIC_UNWINDER.into()
                    } else {
                        a
                    }
                })
                .collect();
            assert_eq!(final_args(&args), expected, "{flag}");
        }
        assert!(final_args(&["x.o", "-o", "prog"]).contains(&SHARED_UNWINDER.to_string()));
    }

    #[test]
    fn relocations_are_packed_unless_gold_links() {
        let packed = |args: &[&str]| final_args(args).contains(&PACKED_RELOCATIONS_FLAG.into());
        assert!(packed(&["x.o", "-o", "prog"]));
        assert!(packed(&["x.o", "-fuse-ld=lld", "-o", "prog"]));
        assert!(packed(&[
            "x.o",
            "-fuse-ld=gold",
            "-fuse-ld=bfd",
            "-o",
            "prog"
        ]));
        assert!(!packed(&["x.o", "-fuse-ld=gold", "-o", "prog"]));
        assert!(!packed(&["x.o", "-fuse-ld=/usr/bin/ld.gold", "-o", "prog"]));
        assert!(!packed(&["x.o", "-static", "-o", "prog"]));
        // No link, no flag.
        assert!(!packed(&["-c", "x.c", "-o", "x.o"]));
    }

    #[test]
    fn an_active_language_is_reset_before_the_runtime_object() {
        let args = ["-x", "c", "main.txt", "-o", "prog"];
        let mut expected = then(&args, &[PLUGIN, LINE_TABLES_FLAG, "-x", "none"]);
        expected.extend(runtime());
        expected.push(PACKED_RELOCATIONS_FLAG.into());
        assert_eq!(final_args(&args), expected);
    }

    #[test]
    fn loops_builds_read_pragmas_when_they_compile() {
        let plan_for = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            let mut plan = Plan::new(&classify_with(&args, &mut |_| {
                Err(io::ErrorKind::NotFound.into())
            }));
            plan.read_pragmas = true;
            let Ok(argv) = plan.argv(&args, fixed_artifacts);
            argv.into_iter()
                .map(|a| a.into_string().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            plan_for(&["-c", "x.c"]),
            then(
                &["-c", "x.c"],
                &[PLUGIN, "-fplugin=/k/libkage_pragma.so", LINE_TABLES_FLAG]
            )
        );
        // A link of objects compiles nothing: no plugin.
        assert_eq!(
            plan_for(&["a.o", "-o", "p"]),
            then_link(&["a.o", "-o", "p"], &[])
        );
    }

    #[test]
    fn additions_go_before_a_double_dash() {
        assert_eq!(
            final_args(&["-c", "--", "x.c"]),
            then(&["-c", PLUGIN, LINE_TABLES_FLAG, "--", "x.c"], &[])
        );
        // A `--` inside a response file: the additions go before that file.
        assert_eq!(
            final_args_with_files(&["-O2", "-g", "@r", "y.c"], &[("r", "-c -- x.c")]),
            then(&["-O2", "-g", PLUGIN, "@r", "y.c"], &[])
        );
    }

    #[test]
    fn response_files_are_passed_through_but_classified() {
        assert_eq!(
            final_args_with_files(
                &["@objs.rsp", "-o", "prog"],
                &[("objs.rsp", "'a file.o' b.o")]
            ),
            then_link(&["@objs.rsp", "-o", "prog"], &[])
        );
        assert_eq!(
            final_args_with_files(&["@flags", "x.c"], &[("flags", "-c\n-g2\n")]),
            then(&["@flags", "x.c", PLUGIN], &[])
        );
    }

    #[test]
    fn artifacts_are_asked_for_only_when_needed() {
        let args: Vec<OsString> = ["-c", "x.c"].iter().map(OsString::from).collect();
        let plan = Plan::new(&classify_with(&args, &mut |_| {
            Err(io::ErrorKind::NotFound.into())
        }));
        let mut asked = Vec::new();
        let _ = plan.argv(&args, |a| {
            asked.push(a);
            Ok::<_, ()>(PathBuf::from("/p"))
        });
        assert_eq!(asked, [Artifact::PassPlugin]);

        let args: Vec<OsString> = ["--version"].iter().map(OsString::from).collect();
        let plan = Plan::new(&classify_with(&args, &mut |_| {
            Err(io::ErrorKind::NotFound.into())
        }));
        assert!(plan.is_pass_through());
        assert_eq!(plan.argv(&args, |_| Err("not built")).unwrap(), args);

        let args: Vec<OsString> = ["a.o"].iter().map(OsString::from).collect();
        let plan = Plan::new(&classify_with(&args, &mut |_| {
            Err(io::ErrorKind::NotFound.into())
        }));
        assert_eq!(
            plan.argv(&args, |_| Err::<PathBuf, _>("runtime not built")),
            Err("runtime not built")
        );
    }
}
