//! What the report compares the working set with: this machine's data caches (sysfs), and
//! the clocks intervals can be measured with.

use super::options::IntervalUnit;

/// One data (or unified) cache level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cache {
    pub level: u32,
    pub size_bytes: u64,
}

/// The data caches of CPU 0, smallest level first (one entry per level).
pub fn data_caches() -> Vec<Cache> {
    data_caches_in(std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"))
}

fn data_caches_in(dir: &std::path::Path) -> Vec<Cache> {
    let read = |p: std::path::PathBuf| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut caches = Vec::new();
    for i in 0.. {
        let d = dir.join(format!("index{i}"));
        let Some(kind) = read(d.join("type")) else {
            break;
        };
        if kind == "Instruction" {
            continue;
        }
        let level = read(d.join("level")).and_then(|l| l.parse().ok());
        let size = read(d.join("size")).and_then(|s| parse_size(&s));
        if let (Some(level), Some(size_bytes)) = (level, size) {
            if !caches.iter().any(|c: &Cache| c.level == level) {
                caches.push(Cache { level, size_bytes });
            }
        }
    }
    caches.sort_by_key(|c| c.level);
    caches
}

/// sysfs sizes: `32K`, `1024K`, `32M`, or plain bytes.
fn parse_size(s: &str) -> Option<u64> {
    let (digits, scale) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok().map(|n| n * scale)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock nanoseconds (monotonic).
pub fn wall_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `perf_event_attr` up to `config` plus the flag word (PERF_ATTR_SIZE_VER0 = 64 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    bp_addr: u64,
}

/// Where intervals are measured. `Accesses` reads the access counter the tool keeps.
pub enum Clock {
    Accesses,
    Wall,
    Cpu,
    /// A hardware instruction counter for this process and the threads it creates.
    Instructions {
        fd: i32,
    },
}

impl Clock {
    /// The clock for `unit`. Instructions need a hardware counter: when the machine has none
    /// (virtual machines often do not), `Err` carries the reason.
    pub fn open(unit: IntervalUnit) -> Result<Clock, String> {
        Ok(match unit {
            IntervalUnit::Accesses => Clock::Accesses,
            IntervalUnit::WallTime => Clock::Wall,
            IntervalUnit::CpuTime => Clock::Cpu,
            IntervalUnit::Instructions => Clock::Instructions {
                fd: open_instruction_counter()?,
            },
        })
    }

    /// The current reading; `accesses` is the tool's access count.
    pub fn now(&self, accesses: u64) -> u64 {
        match *self {
            Clock::Accesses => accesses,
            Clock::Wall => wall_ns(),
            Clock::Cpu => clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            Clock::Instructions { fd } => {
                let mut v = 0u64;
                // SAFETY: reading 8 bytes into `v` from our own counter fd.
                let n = unsafe { libc::read(fd, &mut v as *mut u64 as *mut _, 8) };
                if n == 8 {
                    v
                } else {
                    0
                }
            }
        }
    }
}

fn open_instruction_counter() -> Result<i32, String> {
    const PERF_TYPE_HARDWARE: u32 = 0;
    const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
    const INHERIT: u64 = 1 << 1;
    const EXCLUDE_KERNEL: u64 = 1 << 5;
    const EXCLUDE_HV: u64 = 1 << 6;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    let attr = PerfEventAttr {
        kind: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_HW_INSTRUCTIONS,
        flags: INHERIT | EXCLUDE_KERNEL | EXCLUDE_HV,
        ..Default::default()
    };
    // SAFETY: a valid attr; pid 0 = this process, cpu -1 = any, no group.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            0,
            -1,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!(
            "no hardware instruction counter (perf_event_open: {})",
            std::io::Error::last_os_error()
        ));
    }
    Ok(fd as i32)
}

/// How many threads the process has now (`/proc/self/stat`), if the kernel says.
pub fn process_threads() -> Option<u64> {
    let stat = std::fs::read("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its end.
    let after_name = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    let field = std::str::from_utf8(after_name)
        .ok()?
        .split_whitespace()
        .nth(17)?;
    field.parse().ok()
}

/// Blocks every signal on the calling thread until dropped, so that no handler runs (and
/// marks the shadow) in the middle of an exclusive scan.
pub struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    /// Blocks them now (not a `Default`: constructing it has an effect).
    #[allow(clippy::new_without_default)]
    pub fn new() -> SignalsBlocked {
        // SAFETY: plain signal-mask calls on local sets.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            SignalsBlocked(old)
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_caches() {
        let dir = tempfile::tempdir().unwrap();
        let index = |i: u32, kind: &str, level: u32, size: &str| {
            let d = dir.path().join(format!("index{i}"));
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
        };
        index(0, "Data", 1, "32K");
        index(1, "Instruction", 1, "32K");
        index(2, "Unified", 3, "32768K");
        index(3, "Unified", 2, "1M");
        assert_eq!(
            data_caches_in(dir.path()),
            vec![
                Cache {
                    level: 1,
                    size_bytes: 32 << 10
                },
                Cache {
                    level: 2,
                    size_bytes: 1 << 20
                },
                Cache {
                    level: 3,
                    size_bytes: 32 << 20
                },
            ]
        );
        assert!(data_caches_in(&dir.path().join("none")).is_empty());
    }

    #[test]
    fn clocks_move_forward() {
        let wall = Clock::open(IntervalUnit::WallTime).unwrap();
        let a = wall.now(0);
        let cpu = Clock::open(IntervalUnit::CpuTime).unwrap();
        let c = cpu.now(0);
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(wall.now(0) > a && cpu.now(0) > c);
        assert_eq!(Clock::open(IntervalUnit::Accesses).unwrap().now(42), 42);
        // Instructions: either a counter that counts, or a clear reason why not.
        match Clock::open(IntervalUnit::Instructions) {
            Ok(clock) => assert!(clock.now(0) > 0),
            Err(e) => assert!(e.contains("perf_event_open"), "{e}"),
        }
    }

    #[test]
    fn counting_threads() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv().unwrap());
        // This test's thread and the one just started, at least.
        assert!(process_threads().unwrap() >= 2);
        tx.send(()).unwrap();
        t.join().unwrap();
    }
}
