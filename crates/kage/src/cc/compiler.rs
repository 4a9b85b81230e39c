//! The real compiler behind kage-cc and kage-c++.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The language a wrapper compiles, which picks the real compiler (clang or clang++) the same
/// way `cc` and `c++` differ: by how the wrapper was called, not by the inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    C,
    Cxx,
}

impl Language {
    /// The language a wrapper executable stands for, from its `argv[0]`: names ending in `++`
    /// (`kage-c++`, the symlink the build makes) or `cxx` (`kage-cxx`) are C++, anything else C.
    pub fn from_program_name(argv0: &OsStr) -> Language {
        let name = Path::new(argv0)
            .file_name()
            .unwrap_or(argv0)
            .to_string_lossy();
        if name.ends_with("++") || name.ends_with("cxx") {
            Language::Cxx
        } else {
            Language::C
        }
    }

    /// The environment variable that names the real compiler.
    pub fn env_var(self) -> &'static str {
        match self {
            Language::C => "KAGE_CC",
            Language::Cxx => "KAGE_CXX",
        }
    }

    /// How people name the language in messages.
    pub fn display_name(self) -> &'static str {
        match self {
            Language::C => "C",
            Language::Cxx => "C++",
        }
    }

    /// The wrapper's name, for the start of messages.
    pub fn wrapper_name(self) -> &'static str {
        match self {
            Language::C => "kage-cc",
            Language::Cxx => "kage-c++",
        }
    }

    /// The compiler looked for on `PATH` (Debian's versioned name).
    fn versioned_name(self) -> &'static str {
        match self {
            Language::C => "clang-22",
            Language::Cxx => "clang++-22",
        }
    }

    /// Where Debian's `clang-22` package installs the compiler.
    fn packaged_path(self) -> &'static str {
        match self {
            Language::C => "/usr/lib/llvm-22/bin/clang",
            Language::Cxx => "/usr/lib/llvm-22/bin/clang++",
        }
    }
}

/// Why this compiler was chosen, so that a failure message can say which setting to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompilerOrigin {
    /// Named by `KAGE_CC` / `KAGE_CXX`.
    Env(&'static str),
    /// `clang-22` / `clang++-22` found on `PATH`.
    Path,
    /// Nothing else found: the path Debian's package would use.
    Packaged,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiler {
    pub program: PathBuf,
    pub origin: CompilerOrigin,
}

impl fmt::Display for CompilerOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompilerOrigin::Env(var) => write!(f, "named by {var}"),
            CompilerOrigin::Path => write!(f, "found on PATH"),
            CompilerOrigin::Packaged => write!(f, "no clang 22 on PATH"),
        }
    }
}

/// Picks the real compiler: `KAGE_CC`/`KAGE_CXX` when set and not empty, else `clang-22` /
/// `clang++-22` on `PATH`, else `/usr/lib/llvm-22/bin/clang{,++}` (whether or not it exists:
/// running it then fails with a message that says how to install it).
pub fn choose(language: Language, env_var: &dyn Fn(&str) -> Option<OsString>) -> Compiler {
    if let Some(program) = env_var(language.env_var()).filter(|p| !p.is_empty()) {
        return Compiler {
            program: program.into(),
            origin: CompilerOrigin::Env(language.env_var()),
        };
    }
    let path = env_var("PATH").unwrap_or_default();
    match find_on_path(OsStr::new(language.versioned_name()), &path) {
        Some(program) => Compiler {
            program,
            origin: CompilerOrigin::Path,
        },
        None => Compiler {
            program: language.packaged_path().into(),
            origin: CompilerOrigin::Packaged,
        },
    }
}

/// The executable a program name resolves to: names with a `/` as they are, bare names
/// through the directories of `path` (a `PATH` value), as `execvp` does.
pub fn find_on_path(program: &OsStr, path: &OsStr) -> Option<PathBuf> {
    if program.as_encoded_bytes().contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(path)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            }
        })
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The message for a compiler that could not be started.
pub fn cannot_run_message(
    wrapper: &str,
    language: Language,
    compiler: &Compiler,
    error: &io::Error,
) -> String {
    format!(
        "{wrapper}: cannot run the {} compiler '{}' ({}; {error}): install it with \
         `apt-get install clang-22`, or point {} at a clang 22",
        language.display_name(),
        compiler.program.display(),
        compiler.origin,
        language.env_var(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &OsStr)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_os_string()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn the_program_name_picks_the_language() {
        for name in [
            "kage-c++",
            "/usr/local/bin/kage-c++",
            "kage-cxx",
            "./target/release/kage-cxx",
            "g++",
        ] {
            assert_eq!(
                Language::from_program_name(OsStr::new(name)),
                Language::Cxx,
                "{name}"
            );
        }
        for name in [
            "kage-cc",
            "/opt/kage/bin/kage-cc",
            "kage",
            "cc",
            "kage-cxx.d/kage-cc",
        ] {
            assert_eq!(
                Language::from_program_name(OsStr::new(name)),
                Language::C,
                "{name}"
            );
        }
    }

    #[test]
    fn the_environment_variable_wins() {
        let vars = env(&[
            ("KAGE_CC", OsStr::new("/opt/clang/bin/clang")),
            ("KAGE_CXX", OsStr::new("my-clang++")),
        ]);
        assert_eq!(
            choose(Language::C, &vars),
            Compiler {
                program: "/opt/clang/bin/clang".into(),
                origin: CompilerOrigin::Env("KAGE_CC")
            }
        );
        assert_eq!(
            choose(Language::Cxx, &vars).program,
            PathBuf::from("my-clang++")
        );
    }

    #[test]
    fn path_then_the_packaged_location() {
        let dir = tempfile::tempdir().unwrap();
        let clang = dir.path().join("clang-22");
        std::fs::write(&clang, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&clang, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A file that is not executable is not a compiler.
        std::fs::write(dir.path().join("clang++-22"), "").unwrap();
        let path = std::env::join_paths(["/nonexistent-dir".as_ref(), dir.path()]).unwrap();
        // An empty KAGE_CC counts as unset.
        let vars = env(&[("PATH", &path), ("KAGE_CC", OsStr::new(""))]);
        assert_eq!(
            choose(Language::C, &vars),
            Compiler {
                program: clang,
                origin: CompilerOrigin::Path
            }
        );
        assert_eq!(
            choose(Language::Cxx, &vars),
            Compiler {
                program: "/usr/lib/llvm-22/bin/clang++".into(),
                origin: CompilerOrigin::Packaged
            }
        );
    }

    #[test]
    fn the_failure_message_says_what_to_do() {
        let compiler = Compiler {
            program: "/nonexistent".into(),
            origin: CompilerOrigin::Env("KAGE_CC"),
        };
        let error = io::Error::from(io::ErrorKind::NotFound);
        let message = cannot_run_message("kage-cc", Language::C, &compiler, &error);
        assert!(
            message.starts_with(
                "kage-cc: cannot run the C compiler '/nonexistent' (named by KAGE_CC; "
            ),
            "{message}"
        );
        assert!(
            message.ends_with(
                "install it with `apt-get install clang-22`, or point KAGE_CC at a clang 22"
            ),
            "{message}"
        );
    }
}
