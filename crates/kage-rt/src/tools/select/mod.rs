//! Tool `select`: the runtime side of the nests written in versions (`#pragma kage
//! versions`, `KAGE_TOOL=select`; docs/abi.md "Versioned nests"), after VMAD §5.3.
//!
//! Each entry of a versioned nest runs its outermost loop's iterations in chunks; at the
//! end of each chunk the code asks which version runs the next one and for how many
//! iterations (`entry.rs`). `policy.rs` decides, from the times it measured, per nest and
//! per size class of entries; this file holds the options, the registry of nests (a spin
//! lock: calls come once per chunk, never per iteration) and the report.
//!
//! The tool has no per-thread part: the versions' code calls nothing but the three entry
//! points, and the time is the monotonic clock (`clock_gettime`, the time-stamp counter
//! behind the vDSO on x86-64, without the frequency to calibrate).
//!
//! A tool: imports only the layer below (`tool`, `gate`, `options`, `registry`, `sync`).

mod entry;
pub mod policy;

use crate::options::{OptionDef, Options};
use crate::registry::Instrumentations;
use crate::sync::SpinLock;
use crate::tool::{ThreadTool, Tool, ToolResults};
use kage_abi::{VersionedNest, NONE};
use kage_report::{
    NestVersion, Selection, VersionDecision, VersionedNest as NestReport, SELECT_KEY,
};
use policy::{Force, NestPolicy, Params};
use serde_json::{Map, Value};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

fn parse_version(v: &str) -> Result<String, String> {
    match v {
        "auto" | "rotate" => Ok(v.to_string()),
        n => n
            .parse::<u32>()
            .map(|n| n.to_string())
            .map_err(|_| "expected auto, rotate or a version's index".into()),
    }
}

fn parse_count(v: &str) -> Result<String, String> {
    v.parse::<u64>()
        .map(|n| n.to_string())
        .map_err(|_| "expected a non-negative integer".into())
}

const VERSION: OptionDef = OptionDef {
    name: "version",
    default: "auto",
    help: "select: which version of each versioned nest runs: auto (measure and run the \
           fastest), a version's index (0: the original; to time one version alone), or \
           rotate (every chunk in the next version, chunks one step long: to check that the \
           versions agree)",
    parse: parse_version,
};

const MIN_CHUNK_US: OptionDef = OptionDef {
    name: "min_chunk_us",
    default: "100",
    help: "select: the shortest chunk a race times, in microseconds (entries too short for \
           twenty of them per version take turns instead)",
    parse: parse_count,
};

/// The select tool's options (`tools::TOOLS`).
pub static OPTIONS: &[OptionDef] = &[VERSION, MIN_CHUNK_US];

/// A versioned nest the runtime has seen.
struct Known {
    function: String,
    file: String,
    line: u32,
    versions: Vec<VersionInfo>,
    policy: NestPolicy,
}

struct VersionInfo {
    case: i64,
    name: String,
    step: i64,
    line: u32,
    end_line: u32,
}

/// Every versioned nest seen, by id (`kage_versioned_nest.global_id`).
static NESTS: SpinLock<Vec<Known>> = SpinLock::new(Vec::new());
/// The parameters, set by `init` before any thread runs a nest.
static PARAMS: OnceLock<Params> = OnceLock::new();
/// `clock_gettime` at `init`: decisions are reported relative to it.
static START_NS: AtomicU64 = AtomicU64::new(0);

/// The monotonic clock, in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn params() -> Params {
    PARAMS.get().copied().unwrap_or_default()
}

/// The C string `p`, "" for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Runs `f` on the nest `nest` describes, registering it on first sight; `None` for a
/// descriptor that cannot be one (null, no versions).
///
/// # Safety
/// `nest` is null or points to a `struct kage_versioned_nest` (docs/abi.md) whose
/// `global_id` is writable and whose other fields stay as they are.
unsafe fn with_nest<R>(
    nest: *mut VersionedNest,
    f: impl FnOnce(&mut NestPolicy) -> R,
) -> Option<R> {
    if nest.is_null() || (*nest).version_count == 0 || (*nest).versions.is_null() {
        return None;
    }
    let mut nests = NESTS.lock();
    let id = (*nest).global_id;
    let id = if id != NONE && (id as usize) < nests.len() {
        id as usize
    } else {
        let count = ((*nest).version_count as usize).min(policy::MAX_VERSIONS);
        let versions = std::slice::from_raw_parts((*nest).versions, count);
        let steps: Vec<i64> = versions.iter().map(|v| v.step).collect();
        let inclusive: Vec<bool> = (versions.iter())
            .map(|v| v.flags & kage_abi::select::INCLUSIVE != 0)
            .collect();
        nests.push(Known {
            function: text((*nest).function),
            file: text((*nest).file),
            line: (*nest).line,
            versions: (versions.iter())
                .map(|v| VersionInfo {
                    case: v.case_value,
                    name: text(v.name),
                    step: v.step,
                    line: v.first_line,
                    end_line: v.last_line,
                })
                .collect(),
            policy: NestPolicy::new(&steps, &inclusive),
        });
        (*nest).global_id = (nests.len() - 1) as u32;
        nests.len() - 1
    };
    Some(f(&mut nests[id].policy))
}

pub struct SelectTool;

struct SelectThread;

impl ThreadTool for SelectThread {
    fn enter(&mut self, _: u32) {}
    fn exit(&mut self, _: u32) {}
    fn access(&mut self, _: usize, _: u64, _: bool) {}
    fn reset(&mut self) {}
    fn fork_survivor(&mut self) {}
    /// The part holds nothing.
    fn adopt(&mut self) -> bool {
        true
    }
}

pub fn make() -> &'static dyn Tool {
    &SelectTool
}

impl Tool for SelectTool {
    fn name(&self) -> &'static str {
        "select"
    }

    fn init(&self, opts: &mut Options, _built: Instrumentations) {
        let force = match opts.get(&VERSION) {
            "auto" => Force::Auto,
            "rotate" => Force::Rotate,
            n => Force::Version(n.parse().unwrap_or(0)),
        };
        let min_chunk_ns = opts.get(&MIN_CHUNK_US).parse::<u64>().unwrap_or(100) * 1000;
        let _ = PARAMS.set(Params {
            force,
            min_chunk_ns,
            ..Params::default()
        });
        START_NS.store(now_ns(), Relaxed);
    }

    fn new_thread(&'static self) -> Box<dyn ThreadTool> {
        Box::new(SelectThread)
    }

    /// The statistics restart; what was learnt (the decisions) stays.
    fn reset(&self) {
        for nest in NESTS.lock().iter_mut() {
            nest.policy.entries = 0;
            for t in nest.policy.totals.iter_mut() {
                *t = Default::default();
            }
        }
    }

    fn fork_child(&self) {
        // SAFETY: the forked child's only thread, before any nest runs in it.
        unsafe { NESTS.release_in_fork_child() };
    }

    fn finish(&self, _region_count: usize) -> ToolResults {
        let p = params();
        let start = START_NS.load(Relaxed);
        let seconds = |ns: u64| ns as f64 / 1e9;
        let nests = (NESTS.lock().iter().enumerate())
            .filter(|(_, n)| n.policy.entries > 0 || n.policy.totals.iter().any(|t| t.chunks > 0))
            .map(|(id, n)| NestReport {
                id: id as u32,
                function: n.function.clone(),
                file: n.file.clone(),
                line: n.line,
                entries: n.policy.entries,
                versions: (n.versions.iter().zip(&n.policy.totals).enumerate())
                    .map(|(k, (v, t))| NestVersion {
                        index: k as u32,
                        case: v.case,
                        name: v.name.clone(),
                        step: v.step,
                        line: v.line,
                        end_line: v.end_line,
                        chunks: t.chunks,
                        iterations: t.iterations,
                        seconds: seconds(t.ns),
                        measured_chunks: t.measured_chunks,
                        ns_per_iteration: (t.measured_iterations > 0)
                            .then(|| t.measured_ns as f64 / t.measured_iterations as f64),
                    })
                    .collect(),
                decisions: (n.policy.decisions.iter())
                    .map(|d| VersionDecision {
                        min_iterations: 1u64 << d.class,
                        max_iterations: (1u64 << d.class).saturating_mul(2) - 1,
                        version: d.version as u32,
                        entry: d.entry,
                        iteration: d.iteration,
                        at_seconds: seconds(d.at_ns.saturating_sub(start)),
                        into_entry_seconds: seconds(d.into_entry_ns),
                        abandoned: d.abandoned.iter().map(|&v| v as u32).collect(),
                        how: d.how.to_string(),
                    })
                    .collect(),
                start_mismatch: n.policy.mismatch.map(|(v, own, first)| {
                    format!(
                        "version {v} starts its outermost loop at {own}, the entry's first chunk \
                         at {first}: the versions do not share the outermost loop's iterations"
                    )
                }),
            })
            .collect();
        let selection = Selection {
            version: match p.force {
                Force::Auto => "auto".into(),
                Force::Rotate => "rotate".into(),
                Force::Version(v) => v.to_string(),
            },
            min_chunk_us: p.min_chunk_ns / 1000,
            nests,
        };
        let mut top = Map::new();
        top.insert(
            SELECT_KEY.into(),
            serde_json::to_value(selection).unwrap_or(Value::Null),
        );
        ToolResults {
            top,
            ..ToolResults::default()
        }
    }
}
