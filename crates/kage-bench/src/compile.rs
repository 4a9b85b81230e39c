//! Builds a program from its recipe with one compiler: every source to an object (in parallel,
//! one job per core), then a link. An output newer than all its inputs is reused, so a second
//! harness run does not recompile SQLite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use anyhow::{bail, Context, Result};

use crate::suite::Recipe;

/// A C compiler driver and what its output depends on besides the sources.
#[derive(Debug, Clone)]
pub struct Compiler {
    pub command: PathBuf,
    /// Files whose change invalidates earlier builds (kage-cc, the pass, the runtime).
    pub depends_on: Vec<PathBuf>,
    /// Environment for the compiler (`KAGE_TOOL` for tools with their own instrumentation).
    pub env: Vec<(String, String)>,
    /// `-O2` but in a variant that asks for another level.
    pub opt_level: String,
}

impl Compiler {
    pub fn native(command: &str) -> Self {
        Self {
            command: command.into(),
            depends_on: vec![],
            env: vec![],
            opt_level: "-O2".to_string(),
        }
    }

    /// kage-cc, rebuilding when the wrapper, the plugins or the runtime next to it change,
    /// building for `tool` (`KAGE_TOOL`), a `kage_abi::BUILD_TOOLS` name (`count-calls`: a
    /// call per access, under the count tool).
    pub fn kage(kage_cc: &Path, tool: &str) -> Self {
        let dir = kage_cc.parent().unwrap_or(Path::new("."));
        let depends_on = [
            kage_cc.to_path_buf(),
            dir.join("libkage_pass.so"),
            dir.join("libkage_rt.o"),
            dir.join("libkage_pragma.so"),
        ]
        .into_iter()
        .filter(|p| p.exists())
        .collect();
        let env = if kage_abi::BUILD_TOOLS.iter().any(|t| t.name == tool) {
            vec![(kage_abi::TOOL_VARIABLE.to_string(), tool.to_string())]
        } else {
            vec![]
        };
        Self {
            command: kage_cc.to_path_buf(),
            depends_on,
            env,
            opt_level: "-O2".to_string(),
        }
    }
}

/// The runtime tool (`KAGE_OPTIONS` `tool=`) that reads a build for `tool`: the tool itself,
/// or `count` for `count-calls`.
pub fn runtime_tool(tool: &str) -> &str {
    (kage_abi::BUILD_TOOLS.iter())
        .find(|t| t.name == tool)
        .and_then(|t| t.instrumentation.only_tool())
        .unwrap_or(if tool == "count-calls" { "count" } else { tool })
}

/// Builds `recipe` into `dir/<name>` with `compiler` at its optimisation level and returns
/// the executable's path.
pub fn build(
    compiler: &Compiler,
    recipe: &Recipe,
    dir: &Path,
    name: &str,
    rebuild: bool,
) -> Result<PathBuf> {
    let objects_dir = dir.join(format!("{name}.obj"));
    std::fs::create_dir_all(&objects_dir)
        .with_context(|| format!("creating {}", objects_dir.display()))?;
    let jobs: Vec<(PathBuf, PathBuf)> = recipe
        .sources
        .iter()
        .map(|s| (s.clone(), objects_dir.join(object_name(s))))
        .collect();
    let stale: Vec<&(PathBuf, PathBuf)> = jobs
        .iter()
        .filter(|(source, object)| {
            rebuild
                || !up_to_date(
                    object,
                    std::iter::once(source.as_path())
                        .chain(compiler.depends_on.iter().map(PathBuf::as_path)),
                )
        })
        .collect();
    run_parallel(&stale, |(source, object)| {
        let mut command = Command::new(&compiler.command);
        command
            .envs(compiler.env.iter().map(|(k, v)| (k, v)))
            .arg(&compiler.opt_level)
            .args(&recipe.cflags)
            .arg("-c")
            .arg(source)
            .arg("-o")
            .arg(object);
        run_checked(command)
    })?;

    let executable = dir.join(name);
    let objects: Vec<&Path> = jobs.iter().map(|(_, o)| o.as_path()).collect();
    if rebuild
        || !stale.is_empty()
        || !up_to_date(
            &executable,
            objects
                .iter()
                .copied()
                .chain(compiler.depends_on.iter().map(PathBuf::as_path)),
        )
    {
        let mut command = Command::new(&compiler.command);
        command
            .envs(compiler.env.iter().map(|(k, v)| (k, v)))
            .arg(&compiler.opt_level)
            .args(&objects)
            .arg("-o")
            .arg(&executable)
            .args(&recipe.libs);
        run_checked(command)?;
    }
    Ok(executable)
}

/// An object name unique within a program: zstd has sources of the same name in different
/// directories, so the parent directory is part of it.
fn object_name(source: &Path) -> String {
    let parent = source
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let stem = source
        .file_stem()
        .and_then(|n| n.to_str())
        .unwrap_or("source");
    format!("{parent}-{stem}.o")
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Whether `output` exists and is newer than every input.
fn up_to_date<'a>(output: &Path, inputs: impl IntoIterator<Item = &'a Path>) -> bool {
    let Some(built) = modified(output) else {
        return false;
    };
    inputs
        .into_iter()
        .all(|input| modified(input).is_some_and(|m| m <= built))
}

fn run_checked(mut command: Command) -> Result<()> {
    let output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// Runs `job` over `items` on as many threads as there are cores; the first error wins.
fn run_parallel<T: Sync>(items: &[T], job: impl Fn(&T) -> Result<()> + Sync) -> Result<()> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len().max(1));
    let next = AtomicUsize::new(0);
    let first_error = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(index) else { break };
                if let Err(error) = job(item) {
                    first_error.lock().unwrap().get_or_insert(error);
                    // Stop handing out work; the other threads finish their current item.
                    next.store(items.len(), Ordering::Relaxed);
                    break;
                }
            });
        }
    });
    match first_error.into_inner().unwrap() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}
