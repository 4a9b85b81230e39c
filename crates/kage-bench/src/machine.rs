//! A description of the machine a table was measured on, from /proc and the tools' own
//! version output: ratios only mean something next to the machine and toolchain.

use std::process::Command;

#[derive(Debug, Clone)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub compiler: String,
    pub valgrind: Option<String>,
    pub date: String,
}

impl Machine {
    pub fn describe(native_cc: &str) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = field(&cpuinfo, "model name").unwrap_or_else(|| "unknown CPU".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = field(&meminfo, "MemTotal")
            .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
            .unwrap_or(0.0);
        Self {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_gib: memory_kib / (1024.0 * 1024.0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unknown".into()),
            compiler: first_line(native_cc, &["--version"]).unwrap_or_else(|| native_cc.into()),
            valgrind: first_line("valgrind", &["--version"]),
            date: first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default(),
        }
    }
}

/// The value of the first `key : value` line of a /proc file.
fn field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

fn first_line(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .next()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
}
