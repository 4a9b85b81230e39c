//! Runs one program once and measures it: wall time around spawn-to-reap, and peak RSS from
//! the child's own rusage (`wait4`), with its standard output kept for comparison.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// How a program is run: the variants the table compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variant {
    Native,
    /// The instrumented build under `KAGE_OPTIONS=tool=<tool>` (plus `options`, more
    /// `key=value` items separated by `:`), its report written to `report`.
    Kage {
        tool: String,
        options: String,
        report: PathBuf,
    },
    /// The native build under `valgrind --tool=cachegrind`.
    Cachegrind,
    /// The native build under `valgrind --tool=dhat`.
    Dhat,
}

impl Variant {
    pub fn label(&self) -> &'static str {
        match self {
            Variant::Native => "native",
            Variant::Kage { .. } => "kage",
            Variant::Cachegrind => "cachegrind",
            Variant::Dhat => "dhat",
        }
    }

    fn command(&self, executable: &Path, args: &[String]) -> Command {
        let valgrind = |tool: &str, out_option: &str| {
            let mut command = Command::new("valgrind");
            // Their profiles are not wanted, only the cost of producing them.
            command.args([
                "-q",
                &format!("--tool={tool}"),
                &format!("{out_option}=/dev/null"),
            ]);
            command.arg(executable).args(args);
            command
        };
        match self {
            Variant::Native => {
                let mut command = Command::new(executable);
                command.args(args);
                command
            }
            Variant::Kage {
                tool,
                options,
                report,
            } => {
                let mut command = Command::new(executable);
                let extra = if options.is_empty() {
                    String::new()
                } else {
                    format!(":{options}")
                };
                command.args(args).env(
                    "KAGE_OPTIONS",
                    format!("tool={tool}:output={}{extra}", report.display()),
                );
                command
            }
            Variant::Cachegrind => valgrind("cachegrind", "--cachegrind-out-file"),
            Variant::Dhat => valgrind("dhat", "--dhat-out-file"),
        }
    }
}

/// One run's measurements.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub wall: Duration,
    /// Peak resident set size in bytes.
    pub peak_rss: u64,
    pub stdout: String,
}

/// Runs `executable args` as `variant` once; a non-zero exit is an error carrying stderr.
/// Standard output and error go to files in `scratch` (a pipe would need a reader thread
/// running alongside the measurement).
pub fn run_once(
    variant: &Variant,
    executable: &Path,
    args: &[String],
    scratch: &Path,
) -> Result<Measurement> {
    run_limited(variant, executable, args, scratch, None)?
        .ok_or_else(|| anyhow::anyhow!("no memory limit, yet the run exceeded it"))
}

/// [`run_once`] with the child's address space limited to `limit` bytes (`RLIMIT_AS`):
/// `Ok(None)` when the run failed for want of memory (the limit was exceeded) instead of
/// taking the machine down.
pub fn run_limited(
    variant: &Variant,
    executable: &Path,
    args: &[String],
    scratch: &Path,
    limit: Option<u64>,
) -> Result<Option<Measurement>> {
    let stdout_path = scratch.join(format!("{}.stdout", variant.label()));
    let stderr_path = scratch.join(format!("{}.stderr", variant.label()));
    if let Variant::Kage { report, .. } = variant {
        let _ = std::fs::remove_file(report);
    }
    let mut command = variant.command(executable, args);
    command
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path)?)
        .stderr(File::create(&stderr_path)?);

    // Linux carries a process's peak RSS across exec, and glibc's posix_spawn (which std
    // uses by default) runs the child in the harness's own address space until exec: every
    // child would inherit the harness's whole RSS as a floor. A pre_exec hook makes std use
    // a real fork, whose copied address space counts only the harness's few private pages.
    // SAFETY: the hook does nothing, so it is trivially async-signal-safe.
    // With a limit, the hook also sets RLIMIT_AS (setrlimit is async-signal-safe).
    unsafe {
        command.pre_exec(move || {
            if let Some(bytes) = limit {
                let rlimit = libc::rlimit {
                    rlim_cur: bytes as libc::rlim_t,
                    rlim_max: bytes as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &rlimit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let child = command
        .spawn()
        .with_context(|| format!("starting {command:?}"))?;
    let (status, usage) = wait_with_rusage(child.id() as libc::pid_t)?;
    let wall = start.elapsed();

    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        let out_of_memory = [
            "memory allocation of",
            "out of memory",
            "Cannot allocate memory",
        ]
        .iter()
        .any(|m| stderr.contains(m));
        if limit.is_some() && out_of_memory {
            return Ok(None);
        }
        bail!(
            "{command:?} failed (wait status {status:#x}):\n{}",
            tail(&stderr, 20)
        );
    }
    if let Variant::Kage { report, .. } = variant {
        // The tool must really have run: an empty or missing report means it did not.
        if std::fs::metadata(report).map_or(true, |m| m.len() == 0) {
            bail!(
                "{command:?} wrote no Kage report at {}:\n{}",
                report.display(),
                tail(&stderr, 20)
            );
        }
    }
    Ok(Some(Measurement {
        wall,
        // Linux reports ru_maxrss in KiB.
        peak_rss: usage.ru_maxrss as u64 * 1024,
        stdout: std::fs::read_to_string(&stdout_path)?,
    }))
}

/// Reaps `pid` with `wait4`, which also returns the child's resource usage (its own, not
/// that of every child the harness ever had, as `getrusage(RUSAGE_CHILDREN)` would).
fn wait_with_rusage(pid: libc::pid_t) -> Result<(libc::c_int, libc::rusage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; wait4 fills it in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to locals; pid is our own unreaped child.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            return Ok((status, usage));
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error).context("wait4");
        }
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
