//! Finding the files kage-cc adds to a build: the pass plugin, the runtime object, and for
//! the loops tool the `#pragma kage profile` plugin; and the runtime as a shared object,
//! which `kage run` preloads into programs not linked by kage-cc.
//!
//! Lookup order: the environment variable (`KAGE_PASS_PLUGIN`, `KAGE_RUNTIME`), then the
//! directory of the running executable (cargo's `target/release/` holds the wrappers, the
//! plugin and the archive side by side), then `<exe dir>/../lib/kage/` (an installed layout:
//! `bin/kage-cc` and `lib/kage/libkage_pass.so`).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Artifact {
    /// `libkage_pass.so`, loaded by clang with `-fpass-plugin=`.
    PassPlugin,
    /// `libkage_rt.o`, linked into every instrumented executable: cargo's `libkage_rt.a`
    /// reduced by `scripts/build.sh` to what the runtime's entry points reach.
    Runtime,
    /// `libkage_pragma.so`, the clang plugin that reads `#pragma kage profile`, loaded with
    /// `-fplugin=` when building for the loops tool (made by `scripts/build.sh`).
    PragmaPlugin,
    /// `libkage_rt.so`, the same runtime as a shared object, for `LD_PRELOAD` into a
    /// program not linked by kage-cc that loads instrumented libraries (made by
    /// `scripts/build.sh`).
    SharedRuntime,
}

impl Artifact {
    pub fn file_name(self) -> &'static str {
        match self {
            Artifact::PassPlugin => "libkage_pass.so",
            Artifact::Runtime => "libkage_rt.o",
            Artifact::PragmaPlugin => "libkage_pragma.so",
            Artifact::SharedRuntime => "libkage_rt.so",
        }
    }

    pub fn env_var(self) -> &'static str {
        match self {
            Artifact::PassPlugin => "KAGE_PASS_PLUGIN",
            Artifact::Runtime => "KAGE_RUNTIME",
            Artifact::PragmaPlugin => "KAGE_PRAGMA_PLUGIN",
            Artifact::SharedRuntime => "KAGE_SHARED_RUNTIME",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Artifact::PassPlugin => "the Kage pass plugin",
            Artifact::Runtime => "the Kage runtime",
            Artifact::PragmaPlugin => "the Kage pragma plugin",
            Artifact::SharedRuntime => "the Kage runtime as a shared object",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingArtifact {
    /// The environment variable names a file that does not exist.
    EnvPointsNowhere { artifact: Artifact, path: PathBuf },
    /// Not in any of the places searched.
    NotFound {
        artifact: Artifact,
        searched: Vec<PathBuf>,
    },
    /// Found, but older than the file it is made from beside it (cargo rebuilt the runtime
    /// archive after `scripts/build.sh` made the object).
    Stale { path: PathBuf, source: PathBuf },
}

impl fmt::Display for MissingArtifact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissingArtifact::EnvPointsNowhere { artifact, path } => write!(
                f,
                "{} is set to '{}', which is not a file: point it at a built {}, or unset it to \
                 use the one beside the kage executables",
                artifact.env_var(),
                path.display(),
                artifact.file_name(),
            ),
            MissingArtifact::NotFound { artifact, searched } => {
                let searched: Vec<String> =
                    searched.iter().map(|p| p.display().to_string()).collect();
                write!(
                    f,
                    "cannot find {} {} (looked for {}): build it with \
                     `scripts/build.sh` in the Kage source tree, or set {} to its path",
                    artifact.description(),
                    artifact.file_name(),
                    if searched.is_empty() {
                        "it nowhere: the running executable's path is unknown".into()
                    } else {
                        searched.join(" and ")
                    },
                    artifact.env_var(),
                )
            }
            MissingArtifact::Stale { path, source } => write!(
                f,
                "{} is older than {}, which it is made from: run `scripts/build.sh` in the Kage \
                 source tree",
                path.display(),
                source.display()
            ),
        }
    }
}

/// The file beside `found` that `artifact` is made from, when it is newer than `found`.
fn newer_source(artifact: Artifact, found: &Path) -> Option<PathBuf> {
    let source = match artifact {
        Artifact::Runtime | Artifact::SharedRuntime => found.with_file_name("libkage_rt.a"),
        Artifact::PassPlugin | Artifact::PragmaPlugin => return None,
    };
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (modified(&source)? > modified(found)?).then_some(source)
}

impl std::error::Error for MissingArtifact {}

/// Finds `artifact`. `exe` is the running executable (symlinks resolved, as
/// `std::env::current_exe` gives it on Linux).
pub fn locate(
    artifact: Artifact,
    env_var: &dyn Fn(&str) -> Option<OsString>,
    exe: Option<&Path>,
) -> Result<PathBuf, MissingArtifact> {
    if let Some(path) = env_var(artifact.env_var()).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(MissingArtifact::EnvPointsNowhere { artifact, path });
        }
        // clang may run in another directory than the one the variable was written for.
        return Ok(std::path::absolute(&path).unwrap_or(path));
    }
    let searched: Vec<PathBuf> = exe
        .and_then(Path::parent)
        .map(|dir| {
            vec![
                dir.join(artifact.file_name()),
                dir.join("../lib/kage").join(artifact.file_name()),
            ]
        })
        .unwrap_or_default();
    match searched.iter().find(|candidate| candidate.is_file()) {
        Some(found) => match newer_source(artifact, found) {
            Some(source) => Err(MissingArtifact::Stale {
                path: found.clone(),
                source,
            }),
            None => Ok(found.clone()),
        },
        None => Err(MissingArtifact::NotFound { artifact, searched }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    #[test]
    fn found_beside_the_executable_then_in_lib_kage() {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin");
        std::fs::create_dir_all(root.path().join("lib/kage")).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        let exe = bin.join("kage-cc");
        std::fs::write(bin.join("libkage_pass.so"), "").unwrap();
        std::fs::write(root.path().join("lib/kage/libkage_rt.o"), "").unwrap();
        assert_eq!(
            locate(Artifact::PassPlugin, &no_env, Some(&exe)).unwrap(),
            bin.join("libkage_pass.so")
        );
        assert_eq!(
            locate(Artifact::Runtime, &no_env, Some(&exe)).unwrap(),
            bin.join("../lib/kage/libkage_rt.o")
        );
    }

    #[test]
    fn the_environment_variable_wins_and_must_point_at_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let plugin = dir.path().join("custom.so");
        std::fs::write(&plugin, "").unwrap();
        let plugin_var = plugin.clone().into_os_string();
        let env = move |name: &str| (name == "KAGE_PASS_PLUGIN").then(|| plugin_var.clone());
        assert_eq!(locate(Artifact::PassPlugin, &env, None).unwrap(), plugin);

        let env =
            |name: &str| (name == "KAGE_RUNTIME").then(|| OsString::from("/nonexistent/rt.a"));
        let error = locate(Artifact::Runtime, &env, Some(Path::new("/x/kage-cc"))).unwrap_err();
        assert_eq!(
            error,
            MissingArtifact::EnvPointsNowhere {
                artifact: Artifact::Runtime,
                path: "/nonexistent/rt.a".into()
            }
        );
        assert!(
            error
                .to_string()
                .contains("KAGE_RUNTIME is set to '/nonexistent/rt.a'"),
            "{error}"
        );
    }

    #[test]
    fn a_runtime_object_older_than_its_archive_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("kage-cc");
        let object = dir.path().join("libkage_rt.o");
        std::fs::write(&object, "").unwrap();
        assert_eq!(
            locate(Artifact::Runtime, &no_env, Some(&exe)).unwrap(),
            object
        );
        let archive = dir.path().join("libkage_rt.a");
        std::fs::write(&archive, "").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&object)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let error = locate(Artifact::Runtime, &no_env, Some(&exe)).unwrap_err();
        assert_eq!(
            error,
            MissingArtifact::Stale {
                path: object.clone(),
                source: archive.clone()
            }
        );
        assert!(
            error.to_string().contains("run `scripts/build.sh`"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_artifact_says_how_to_build_it() {
        let error = locate(
            Artifact::PassPlugin,
            &no_env,
            Some(Path::new("/nowhere/bin/kage-cc")),
        )
        .unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains(
                "/nowhere/bin/libkage_pass.so and /nowhere/bin/../lib/kage/libkage_pass.so"
            ),
            "{message}"
        );
        assert!(message.contains("`scripts/build.sh`"), "{message}");
        assert!(message.contains("KAGE_PASS_PLUGIN"), "{message}");
    }
}
