//! Runs one program once and measures it: wall time around spawn-to-reap, and peak RSS from
//! the program's own rusage (`wait4` in a small launcher, `launch.c`), with its standard
//! output kept for comparison.

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
                // Padded (empty items are ignored) to one length for every variant: the
                // environment sits at the top of the stack, so its length moves the stack.
                let value = format!("tool={tool}:output={}{extra}", report.display());
                command
                    .args(args)
                    .env("KAGE_OPTIONS", format!("{value::<OPTIONS_LENGTH$}"));
                command
            }
            Variant::Cachegrind => valgrind("cachegrind", "--cachegrind-out-file"),
            Variant::Dhat => valgrind("dhat", "--dhat-out-file"),
        }
    }
}

/// `KAGE_OPTIONS` is padded to this many bytes (when shorter).
const OPTIONS_LENGTH: usize = 512;

/// One run's measurements.
#[derive(Debug, Clone)]
pub struct Measurement {
    pub wall: Duration,
    /// Peak resident set size in bytes.
    pub peak_rss: u64,
    pub stdout: String,
}

/// Runs programs through the launcher (`launch.c`), which measures a program's peak RSS
/// without the harness's own pages under it.
pub struct Runner {
    launcher: PathBuf,
}

impl Runner {
    /// Builds the launcher with the C compiler `cc` into `work_dir`: statically linked where
    /// the C library allows, so that what a program inherits from it is a few pages.
    pub fn new(cc: &str, work_dir: &Path) -> Result<Runner> {
        std::fs::create_dir_all(work_dir)?;
        let source = work_dir.join("launch.c");
        let launcher = work_dir.join("launch");
        std::fs::write(&source, include_str!("launch.c"))?;
        let build = |extra: &[&str]| {
            Command::new(cc)
                .args(["-O2", "-o"])
                .arg(&launcher)
                .arg(&source)
                .args(extra)
                .output()
        };
        let built = build(&["-static"]).ok().filter(|o| o.status.success());
        if built.is_none() {
            let out = build(&[]).with_context(|| format!("running {cc}"))?;
            if !out.status.success() {
                bail!(
                    "building the launcher with {cc} failed:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        Ok(Runner { launcher })
    }

    /// Runs `executable args` as `variant` once; a non-zero exit is an error carrying
    /// stderr. Standard output and error go to files in `scratch` (a pipe would need a
    /// reader thread running alongside the measurement).
    pub fn run_once(
        &self,
        variant: &Variant,
        executable: &Path,
        args: &[String],
        scratch: &Path,
    ) -> Result<Measurement> {
        self.run_limited(variant, executable, args, scratch, None)?
            .ok_or_else(|| anyhow::anyhow!("no memory limit, yet the run exceeded it"))
    }

    /// [`Runner::run_once`] with the program's address space limited to `limit` bytes
    /// (`RLIMIT_AS`): `Ok(None)` when the run failed for want of memory (the limit was
    /// exceeded) instead of taking the machine down.
    pub fn run_limited(
        &self,
        variant: &Variant,
        executable: &Path,
        args: &[String],
        scratch: &Path,
        limit: Option<u64>,
    ) -> Result<Option<Measurement>> {
        let stdout_path = scratch.join(format!("{}.stdout", variant.label()));
        let stderr_path = scratch.join(format!("{}.stderr", variant.label()));
        let rss_path = scratch.join(format!("{}.maxrss", variant.label()));
        let _ = std::fs::remove_file(&rss_path);
        if let Variant::Kage { report, .. } = variant {
            let _ = std::fs::remove_file(report);
        }
        let program = variant.command(executable, args);
        let mut command = Command::new(&self.launcher);
        command
            .arg(&rss_path)
            .arg(program.get_program())
            .args(program.get_args());
        for (key, value) in program.get_envs() {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        command
            .stdin(Stdio::null())
            .stdout(File::create(&stdout_path)?)
            .stderr(File::create(&stderr_path)?);
        if let Some(bytes) = limit {
            // SAFETY: setrlimit is async-signal-safe; the launcher and the program inherit it.
            unsafe {
                command.pre_exec(move || {
                    let rlimit = libc::rlimit {
                        rlim_cur: bytes as libc::rlim_t,
                        rlim_max: bytes as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_AS, &rlimit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let start = Instant::now();
        let child = command
            .spawn()
            .with_context(|| format!("starting {command:?}"))?;
        let status = wait(child.id() as libc::pid_t)?;
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
                "{program:?} failed (wait status {status:#x}):\n{}",
                tail(&stderr, 20)
            );
        }
        if let Variant::Kage { report, .. } = variant {
            // The tool must really have run: an empty or missing report means it did not.
            if std::fs::metadata(report).map_or(true, |m| m.len() == 0) {
                bail!(
                    "{program:?} wrote no Kage report at {}:\n{}",
                    report.display(),
                    tail(&stderr, 20)
                );
            }
        }
        let max_rss_kib: u64 = std::fs::read_to_string(&rss_path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .with_context(|| format!("the launcher left no peak RSS in {}", rss_path.display()))?;
        Ok(Some(Measurement {
            wall,
            peak_rss: max_rss_kib * 1024,
            stdout: std::fs::read_to_string(&stdout_path)?,
        }))
    }
}

/// Reaps `pid` (the launcher), retrying when interrupted.
fn wait(pid: libc::pid_t) -> Result<libc::c_int> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: a valid pointer to a local; pid is our own unreaped child.
        let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
        if reaped == pid {
            return Ok(status);
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error).context("waitpid");
        }
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A C program that touches `argv[1]` MiB of fresh memory, prints "done" and exits
    /// with code `argv[2]`.
    const TOUCH: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
  size_t n = (size_t)atoi(argv[1]) << 20;
  char *p = malloc(n + 1);
  memset(p, 1, n);
  printf("done %d\n", p[n / 2]);
  return atoi(argv[2]);
}
"#;

    #[test]
    fn peak_rss_is_the_programs_own_and_failures_are_errors() {
        let work = tempfile::tempdir().unwrap();
        let runner = Runner::new("clang-22", work.path()).unwrap();
        let source = work.path().join("touch.c");
        let exe = work.path().join("touch");
        std::fs::write(&source, TOUCH).unwrap();
        let built = Command::new("clang-22")
            .arg("-O1")
            .arg(&source)
            .arg("-o")
            .arg(&exe)
            .status();
        assert!(built.unwrap().success());
        let run = |mib: &str, code: &str| {
            let args = [mib.to_string(), code.to_string()];
            runner.run_once(&Variant::Native, &exe, &args, work.path())
        };
        let small = run("0", "0").unwrap();
        let large = run("64", "0").unwrap();
        assert_eq!(small.stdout, "done 0\n");
        assert_eq!(large.stdout, "done 1\n");
        // No floor from the harness (whose own RSS is several MiB): a program that touches
        // nothing stays near the C library's own pages, and 64 MiB show as 64 MiB more.
        assert!(small.peak_rss < 3 << 20, "{}", small.peak_rss);
        let grown = large.peak_rss - small.peak_rss;
        assert!((62 << 20..68 << 20).contains(&grown), "{grown}");
        let error = run("0", "3").unwrap_err().to_string();
        assert!(error.contains("wait status 0x300"), "{error}");
    }

    #[test]
    fn runs_see_fixed_addresses_and_equal_option_lengths() {
        let work = tempfile::tempdir().unwrap();
        let runner = Runner::new("clang-22", work.path()).unwrap();
        // /proc/self/personality shows ADDR_NO_RANDOMIZE (0x0040000) in the program.
        let cat = Path::new("/bin/cat");
        let args = ["/proc/self/personality".to_string()];
        let run = runner.run_once(&Variant::Native, cat, &args, work.path());
        let flags = u32::from_str_radix(run.unwrap().stdout.trim(), 16).unwrap();
        assert_ne!(flags & 0x0040000, 0, "{flags:#x}");
        // Two configurations' KAGE_OPTIONS are as long as each other.
        let options = |extra: &str| {
            let variant = Variant::Kage {
                tool: "footprint".into(),
                options: extra.into(),
                report: work.path().join("r.json"),
            };
            let command = variant.command(cat, &[]);
            let (_, value) = (command.get_envs())
                .find(|(k, _)| *k == "KAGE_OPTIONS")
                .unwrap();
            value.unwrap().to_string_lossy().into_owned()
        };
        let (a, b) = (
            options("vsm=slim"),
            options("vsm=baseline:granularity=line"),
        );
        assert_eq!(a.len(), b.len());
        assert_eq!(a.len(), OPTIONS_LENGTH);
        assert!(a.starts_with("tool=footprint:output="), "{a}");
        assert!(a.trim_end_matches(':').ends_with(".json:vsm=slim"), "{a}");
    }
}
