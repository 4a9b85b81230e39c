//! Shared by the end-to-end tests: build C/C++ programs from `tests/c` with the real
//! wrappers, run them under the runtime, read their reports, and find regions in them.
#![allow(dead_code)]

use kage_report::{read_report, CountStats, Counters, Region, RegionKind, Report};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `tests/c` at the repository's root.
pub fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/c")
        .canonicalize()
        .unwrap()
}

pub fn kage_cc() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kage-cc"))
}

pub fn kage_cxx() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kage-cxx"))
}

pub fn kage() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kage"))
}

/// A scratch directory for one test's builds and reports.
pub struct Work {
    pub dir: tempfile::TempDir,
}

impl Work {
    pub fn new() -> Work {
        Work {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs a wrapper with `args` in the scratch directory and requires success.
    pub fn wrap(&self, wrapper: &Path, args: &[&str]) -> Output {
        self.wrap_with_env(wrapper, args, &[])
    }

    pub fn wrap_with_env(&self, wrapper: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        let out = Command::new(wrapper)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} {:?} failed: {}\n{}",
            wrapper.display(),
            args,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Builds `tests/c/<source>` into an executable with the wrapper its extension calls for.
    pub fn build(&self, source: &str, flags: &[&str]) -> PathBuf {
        self.build_with_env(source, flags, &[])
    }

    /// As [`Work::build`], built for every tool (`KAGE_TOOL=count-calls`: a call per access).
    pub fn build_for_every_tool(&self, source: &str, flags: &[&str]) -> PathBuf {
        self.build_with_env(source, flags, &[("KAGE_TOOL", "count-calls")])
    }

    /// As [`Work::build`], with extra environment variables for the wrapper (`KAGE_TOOL`...).
    pub fn build_with_env(&self, source: &str, flags: &[&str], env: &[(&str, &str)]) -> PathBuf {
        self.build_with_output(source, flags, env).0
    }

    /// As [`Work::build_with_env`], also returning the wrapper's output (what the pass said).
    pub fn build_with_output(
        &self,
        source: &str,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> (PathBuf, Output) {
        let src = c_dir().join(source);
        let env_tag: String = env.iter().map(|(k, v)| format!("_{k}{v}")).collect();
        let exe = self.path(&format!(
            "{}{}{}",
            source.replace(['/', '.'], "_"),
            flags.join("").replace('-', "_"),
            env_tag.replace(['-', '='], "_")
        ));
        let wrapper = if source.ends_with(".cpp") {
            kage_cxx()
        } else {
            kage_cc()
        };
        let mut args: Vec<&str> = flags.to_vec();
        let (src_s, exe_s) = (
            src.to_str().unwrap().to_owned(),
            exe.to_str().unwrap().to_owned(),
        );
        args.extend([src_s.as_str(), "-o", exe_s.as_str(), "-lpthread"]);
        let out = self.wrap_with_env(&wrapper, &args, env);
        (exe, out)
    }

    /// Runs `exe`, a program that forks one child, with reports to `r.<pid>.json`; asserts
    /// that it succeeded and that the child wrote one report too. Returns the parent's pid,
    /// its report and the child's.
    pub fn run_forking(&self, exe: &Path) -> (u32, kage_report::Report, kage_report::Report) {
        let template = self.path("r.%p.json");
        let child = Command::new(exe)
            .env("KAGE_OPTIONS", format!("output={}", template.display()))
            .spawn()
            .unwrap();
        let parent_pid = child.id();
        assert!(child.wait_with_output().unwrap().status.success());
        let parent_path = self.path(&format!("r.{parent_pid}.json"));
        let parent = read_report(&parent_path).unwrap();
        let others: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json") && *p != parent_path)
            .collect();
        assert_eq!(others.len(), 1, "one report from the child: {others:?}");
        let child = read_report(&others[0]).unwrap();
        (parent_pid, parent, child)
    }

    /// Runs `exe` with the report going to `<scratch>/<report_name>`; returns the process output.
    pub fn run_with_options(&self, exe: &Path, args: &[&str], options: &str) -> Output {
        Command::new(exe)
            .args(args)
            .env("KAGE_OPTIONS", options)
            .current_dir(self.dir.path())
            .output()
            .unwrap()
    }

    /// Runs `exe` and reads its report; the program must exit with `expected_code`.
    pub fn run_report(&self, exe: &Path, args: &[&str], expected_code: i32) -> Report {
        let report_path = self.path("report.json");
        let _ = std::fs::remove_file(&report_path);
        let out = self.run_with_options(exe, args, &format!("output={}", report_path.display()));
        assert_eq!(
            out.status.code(),
            Some(expected_code),
            "{} exited with {}; stderr:\n{}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        read_report(&report_path).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// `kage report FILE ARGS...`, which must succeed: its standard output.
pub fn kage_report_output(report: &Path, args: &[&str]) -> String {
    let out = Command::new(kage())
        .arg("report")
        .arg(report)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The function region called `name` (for C++, `name(...)` with any parameters).
pub fn func<'r>(report: &'r Report, name: &str) -> &'r Region {
    let named = |r: &&Region| {
        r.name == name
            || r.name
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('('))
    };
    let mut found = report
        .regions
        .iter()
        .filter(|r| r.kind == RegionKind::Function)
        .filter(named);
    let region = found
        .next()
        .unwrap_or_else(|| panic!("no function region named {name}"));
    assert!(
        found.next().is_none(),
        "several function regions named {name}"
    );
    region
}

/// The loops whose static parent is `parent`, in source order.
pub fn loops_in<'r>(report: &'r Report, parent: &Region) -> Vec<&'r Region> {
    let mut loops: Vec<&Region> = report
        .regions
        .iter()
        .filter(|r| r.kind == RegionKind::Loop && r.parent == Some(parent.id))
        .collect();
    loops.sort_by_key(|r| (r.line, r.id));
    loops
}

/// The only loop whose static parent is `parent`.
pub fn only_loop<'r>(report: &'r Report, parent: &Region) -> &'r Region {
    let loops = loops_in(report, parent);
    assert_eq!(
        loops.len(),
        1,
        "expected one loop in {} {}, found {}",
        parent.kind.as_str(),
        parent.name,
        loops.len()
    );
    loops[0]
}

/// The body region of `lp`.
pub fn body_of<'r>(report: &'r Report, lp: &Region) -> &'r Region {
    let mut bodies = report
        .regions
        .iter()
        .filter(|r| r.kind == RegionKind::LoopBody && r.parent == Some(lp.id));
    let body = bodies.next().expect("loop without a body region");
    assert!(bodies.next().is_none());
    body
}

pub fn stats(region: &Region) -> CountStats {
    CountStats::of(region).unwrap_or_else(|| panic!("region {} has no count fields", region.id))
}

/// Counters in the order loads, stores, bytes read, bytes written.
pub fn c(loads: u64, stores: u64, bytes_read: u64, bytes_written: u64) -> Counters {
    Counters {
        loads,
        stores,
        bytes_read,
        bytes_written,
    }
}

/// Checks a region's instances and its inclusive and exclusive counters exactly.
#[track_caller]
pub fn assert_counts(region: &Region, instances: u64, inclusive: Counters, exclusive: Counters) {
    let s = stats(region);
    let what = format!(
        "{} {} (line {})",
        region.kind.as_str(),
        region.name,
        region.line
    );
    assert_eq!(s.instances, instances, "instances of {what}");
    assert_eq!(s.inclusive, inclusive, "inclusive counters of {what}");
    assert_eq!(s.exclusive, exclusive, "exclusive counters of {what}");
}

/// Sum of the exclusive counters of every region plus the unattributed accesses: must equal
/// the totals, whatever the program.
#[track_caller]
pub fn assert_totals_consistent(report: &Report) {
    let mut sum = Counters::default();
    for r in &report.regions {
        sum.add(&stats(r).exclusive);
    }
    let unattributed: Counters = serde_json::from_value(report.tool_data["unattributed"].clone())
        .expect("unattributed counters");
    sum.add(&unattributed);
    assert_eq!(
        Some(sum),
        report.count_totals(),
        "totals = sum of self counters + unattributed"
    );
}
