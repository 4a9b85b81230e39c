//! Finds the C sources bundled in crates (`lua-src`, `libsqlite3-sys`, `zstd-sys`,
//! `bzip2-sys`, `pcre2-sys`). They are dependencies of kage-bench (never compiled into it), so
//! `cargo metadata` resolves, downloads and reports where they are unpacked.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The root directories of the source crates, by crate name.
#[derive(Debug, Clone)]
pub struct CrateSources {
    roots: Vec<(String, PathBuf)>,
}

const SOURCE_CRATES: &[&str] = &[
    "lua-src",
    "libsqlite3-sys",
    "zstd-sys",
    "bzip2-sys",
    "pcre2-sys",
];

impl CrateSources {
    pub fn locate() -> Result<Self> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let output = Command::new(&cargo)
            .args(["metadata", "--format-version", "1", "--manifest-path"])
            .arg(&manifest)
            .output()
            .with_context(|| format!("running {cargo} metadata"))?;
        if !output.status.success() {
            bail!(
                "cargo metadata failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let metadata: serde_json::Value =
            serde_json::from_slice(&output.stdout).context("parsing cargo metadata")?;
        let packages = metadata["packages"]
            .as_array()
            .context("cargo metadata: no packages")?;
        let roots = packages
            .iter()
            .filter_map(|p| {
                let name = p["name"].as_str()?;
                let manifest = p["manifest_path"].as_str()?;
                if !SOURCE_CRATES.contains(&name) {
                    return None;
                }
                Some((name.to_owned(), Path::new(manifest).parent()?.to_path_buf()))
            })
            .collect();
        Ok(Self { roots })
    }

    fn root(&self, name: &str) -> Result<&Path> {
        self.roots
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_path())
            .with_context(|| format!("crate {name} not found by cargo metadata"))
    }

    /// The newest Lua 5.4 release inside `lua-src` (it bundles several versions).
    pub fn lua_dir(&self) -> Result<PathBuf> {
        newest_child(self.root("lua-src")?, "lua-5.4")
    }

    pub fn sqlite_dir(&self) -> Result<PathBuf> {
        existing(self.root("libsqlite3-sys")?.join("sqlite3"))
    }

    pub fn zstd_lib_dir(&self) -> Result<PathBuf> {
        existing(self.root("zstd-sys")?.join("zstd/lib"))
    }

    pub fn bzip2_dir(&self) -> Result<PathBuf> {
        newest_child(self.root("bzip2-sys")?, "bzip2-")
    }

    /// PCRE2's sources (`src/`, with `include/config.h` and `include/pcre2.h` made for the
    /// crate's build).
    pub fn pcre2_dir(&self) -> Result<PathBuf> {
        existing(self.root("pcre2-sys")?.join("upstream"))
    }
}

fn existing(path: PathBuf) -> Result<PathBuf> {
    if path.is_dir() {
        Ok(path)
    } else {
        bail!("{} does not exist", path.display())
    }
}

fn newest_child(root: &Path, prefix: &str) -> Result<PathBuf> {
    let mut matches: Vec<PathBuf> = std::fs::read_dir(root)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    // Lexical order is enough for the versions bundled today (lua-5.4.x has one x per crate).
    matches.sort();
    matches
        .pop()
        .with_context(|| format!("no {prefix}* directory in {}", root.display()))
}
