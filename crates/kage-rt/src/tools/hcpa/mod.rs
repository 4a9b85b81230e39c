//! Tool `hcpa`: hierarchical critical path analysis (docs/hcpa.md, the definition). For
//! every dynamic region instance its work and critical path; per static region the
//! instances, their work and critical path (of an instance nested in another of its
//! region only the outer one's: recursion counts once), the self-work and the
//! work-weighted harmonic mean of the self-parallelism over all instances, the regions it
//! ran directly inside; and the program's work and critical path (its root instances').
//!
//! Layout: `engine.rs` is the per-thread analysis in plain Rust (levels, shadow registers,
//! pending calls, memory times in `kage_vsm`); `entry.rs` the `__kage_hcpa_*` entry points
//! that `KAGE_TOOL=hcpa` builds call, which reach the calling thread's engine through
//! `gate`; this file the `Tool` and `ThreadTool`, the options and the statistics.
//!
//! Each thread is analysed on its own (its own levels and times), so its engine needs no
//! lock. What the report reads across threads is, per thread, `Chunked` records of
//! `AtomicU64`s that only their owner writes, folded in at every analysed instance's exit;
//! resets (`kage_reset`) and forks start them anew as the count tool's do.
//!
//! A tool: imports only the layer below (`tool`, `gate`, `options`, `registry`, `sync`,
//! `chunked`).

pub mod engine;
mod entry;
#[cfg(test)]
mod tests;
mod trace;

use crate::chunked::{bump, Chunked};
use crate::options::{OptionDef, Options};
use crate::registry::{self, Instrumentations};
use crate::sync::SpinLock;
use crate::tool::{RegionMembers, ThreadTool, Tool, ToolResults};
use engine::{Engine, EngineConfig, InstanceStats, LevelKind, MAX_DEPTH_LIMIT};
use kage_abi::{Instrumentation, RegionKind};
use kage_vsm::VsmKind;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::OnceLock;

const MAX_DEPTH: OptionDef = OptionDef {
    name: "max_depth",
    default: "64",
    help: "hcpa: nested region instances analysed (1 to 1024); deeper ones get no statistics \
           (counted in skipped_instances), and each instruction costs time per open level",
    parse: |v| match v.parse::<usize>() {
        Ok(n) if (1..=MAX_DEPTH_LIMIT).contains(&n) => Ok(n.to_string()),
        _ => Err(format!("expected a number from 1 to {MAX_DEPTH_LIMIT}")),
    },
};

// Named apart from footprint's `granularity=` (byte, word, line) and `vsm=` (its own
// kinds): an option name belongs to one declaration.
const GRANULE: OptionDef = OptionDef {
    name: "granule",
    default: "4",
    help: "hcpa: bytes per memory granule (1, 4 or 8): a load depends on the last store to any \
           byte of the granules it touches",
    parse: |v| match v {
        "1" | "4" | "8" => Ok(v.to_string()),
        _ => Err("expected 1, 4 or 8".into()),
    },
};

const SHADOW: OptionDef = OptionDef {
    name: "shadow",
    default: "compress",
    help: "hcpa: the vector shadow memory of the granules' times: baseline (a version per \
           time), slim (SlimTV), bulk (BulkTV), cache (VCache + VStorage), gc (cache with \
           garbage collection), compress (gc with compression of cold level tables)",
    parse: |v| {
        v.parse::<VsmKind>()
            .map(|_| v.to_string())
            .map_err(|e| e.to_string())
    },
};

const SHARE_LANES: OptionDef = OptionDef {
    name: "share_lanes",
    default: "1",
    help: "hcpa: a region entered before its parent's instance computed any time above 0 \
           shares the parent's lane of every time vector (exact: both would hold the same \
           times); 0 gives every level a lane of its own, to measure what sharing saves",
    parse: |v| match v {
        "0" | "1" => Ok(v.to_string()),
        _ => Err("expected 0 or 1".into()),
    },
};

const TIMESTAMP_TRACE: OptionDef = OptionDef {
    name: "timestamp_trace",
    default: "",
    help: "hcpa: write every timestamp event to this file, for tests/hcpa/reference.py \
           (slow; one thread)",
    parse: |v| Ok(v.to_string()),
};

/// The hcpa tool's options (`tools::TOOLS`).
pub static OPTIONS: &[OptionDef] = &[MAX_DEPTH, GRANULE, SHADOW, SHARE_LANES, TIMESTAMP_TRACE];

/// The most distinct dynamic parents kept per region (per thread, and in the report).
const MAX_PARENTS: usize = 16;

// Record layout per region, per thread.
/// Instances not nested in another of the same region, and their work and critical path
/// (the report's `work` and `critical_path`).
const INSTANCES: usize = 0;
const WORK: usize = 1;
const CP: usize = 2;
const SELF_WORK: usize = 3;
/// Work of every instance (the harmonic mean's numerator).
const ALL_WORK: usize = 4;
/// Σ work / SP over every instance, an `f64`'s bits.
const SP_TIME: usize = 5;
/// Open analysed instances of the source region (recursion depth, through any of the
/// compiler's copies: kept in the record of the source region's first copy,
/// `registry::source_of`): owner-only, not reported.
const OPEN: usize = 6;
/// The number of parents kept, and `TRUNCATED` when more were seen.
const PARENT_COUNT: usize = 7;
const TRUNCATED: u64 = 1 << 32;
/// Every instance that exited, nested or not (the report's `instances`).
const ALL_INSTANCES: usize = 8;
/// Owner-only, not reported: what enter, exit and static leaves need of a region besides its
/// record, found once (a region's source region and kind are fixed once it is registered)
/// rather than looked up in the registry per instance: the address of its source region's
/// `OPEN` word | `LINKED` | `NESTED` (records are never freed, so the address stays valid;
/// a reset zeroes it, and it is found again).
const LINK: usize = 9;
const LINKED: u64 = 1;
/// The region is a loop, loop body or inlined call: it shares its function's frame.
const NESTED: u64 = 2;
/// `MAX_PARENTS` parent ids + 1, two per word (0: none).
const PARENTS: usize = 10;
const W: usize = PARENTS + MAX_PARENTS / 2;

type Record = [AtomicU64; W];

#[derive(Debug, Clone, Copy)]
struct Settings {
    engine: EngineConfig,
}

impl Settings {
    fn from_options(opts: &Options) -> Settings {
        let max_depth = opts.get(&MAX_DEPTH).parse().unwrap_or(64);
        let granule: u64 = opts.get(&GRANULE).parse().unwrap_or(4);
        let vsm = opts.get(&SHADOW).parse().unwrap_or(VsmKind::Compress);
        Settings {
            engine: EngineConfig {
                max_depth,
                granule_shift: granule.trailing_zeros(),
                vsm,
                share_lanes: opts.get(&SHARE_LANES) != "0",
            },
        }
    }

    fn granule_bytes(&self) -> u64 {
        1 << self.engine.granule_shift
    }
}

pub struct HcpaTool {
    settings: OnceLock<Settings>,
    epoch: AtomicU64,
    threads: SpinLock<Vec<&'static ThreadStats>>,
    /// Sum over threads of their vector shadow memories' heap bytes, and its peak.
    heap_now: AtomicU64,
    heap_peak: AtomicU64,
    /// Each region's source region (`registry::source_of`; tests give their own).
    source_of: fn(u32) -> u32,
}

/// One thread's statistics, readable by the report writer at any time.
struct ThreadStats {
    epoch: AtomicU64,
    retired: AtomicBool,
    /// Work and critical paths of the thread's root instances, summed.
    work: AtomicU64,
    critical_path: AtomicU64,
    skipped: AtomicU64,
    regions: Chunked<W>,
}

pub struct HcpaThread {
    tool: &'static HcpaTool,
    s: &'static ThreadStats,
    engine: Engine,
    /// The heap bytes last added to the tool's sum.
    heap: u64,
}

pub fn make() -> &'static dyn Tool {
    Box::leak(Box::new(HcpaTool::new()))
}

impl Default for HcpaTool {
    fn default() -> Self {
        Self::new()
    }
}

/// A static region's statistics over every thread.
#[derive(Debug, Clone, Default, PartialEq)]
struct RegionTotals {
    instances: u64,
    all_instances: u64,
    work: u64,
    critical_path: u64,
    self_work: u64,
    all_work: u64,
    sp_time: f64,
    parents: Vec<u32>,
    parents_truncated: bool,
}

impl RegionTotals {
    /// `Σ work / Σ (work / SP)` over every instance: 1 without work.
    fn self_parallelism(&self) -> f64 {
        if self.sp_time > 0.0 {
            self.all_work as f64 / self.sp_time
        } else {
            1.0
        }
    }

    /// `work / critical_path`: 1 without a critical path.
    fn total_parallelism(&self) -> f64 {
        if self.critical_path == 0 {
            1.0
        } else {
            self.work as f64 / self.critical_path as f64
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Totals {
    work: u64,
    critical_path: u64,
    skipped: u64,
}

impl HcpaTool {
    pub fn new() -> Self {
        HcpaTool {
            settings: OnceLock::new(),
            epoch: AtomicU64::new(0),
            threads: SpinLock::new(Vec::new()),
            heap_now: AtomicU64::new(0),
            heap_peak: AtomicU64::new(0),
            source_of: registry::source_of,
        }
    }

    fn settings(&self) -> &Settings {
        self.settings
            .get_or_init(|| Settings::from_options(&Options::default()))
    }

    fn heap_change(&self, old: u64, new: u64) {
        if new >= old {
            let now = self.heap_now.fetch_add(new - old, Relaxed) + (new - old);
            self.heap_peak.fetch_max(now, Relaxed);
        } else {
            self.heap_now.fetch_sub(old - new, Relaxed);
        }
    }

    /// Per region (by global id) its statistics over the threads, and the program's.
    fn collect(&self, region_count: usize) -> (Vec<RegionTotals>, Totals) {
        let mut regions = vec![RegionTotals::default(); region_count];
        let mut totals = Totals::default();
        let epoch = self.epoch.load(Acquire);
        let threads = self.threads.lock().clone();
        for t in threads {
            // A thread that has not applied the latest reset has nothing after it yet.
            if t.retired.load(Relaxed) || t.epoch.load(Acquire) != epoch {
                continue;
            }
            totals.work += t.work.load(Relaxed);
            totals.critical_path += t.critical_path.load(Relaxed);
            totals.skipped += t.skipped.load(Relaxed);
            t.regions.for_each(|r, rec| {
                let Some(out) = regions.get_mut(r) else {
                    return;
                };
                let all_instances = rec[ALL_INSTANCES].load(Relaxed);
                if all_instances == 0 {
                    return;
                }
                out.all_instances += all_instances;
                out.instances += rec[INSTANCES].load(Relaxed);
                out.work += rec[WORK].load(Relaxed);
                out.critical_path += rec[CP].load(Relaxed);
                out.self_work += rec[SELF_WORK].load(Relaxed);
                out.all_work += rec[ALL_WORK].load(Relaxed);
                out.sp_time += f64::from_bits(rec[SP_TIME].load(Relaxed));
                let count = rec[PARENT_COUNT].load(Relaxed);
                out.parents_truncated |= count & TRUNCATED != 0;
                for k in 0..(count as u32 as usize).min(MAX_PARENTS) {
                    if let Some(p) = parent_at(rec, k) {
                        out.parents.push(p);
                    }
                }
            });
        }
        for r in &mut regions {
            r.parents.sort_unstable();
            r.parents.dedup();
            if r.parents.len() > MAX_PARENTS {
                r.parents.truncate(MAX_PARENTS);
                r.parents_truncated = true;
            }
        }
        (regions, totals)
    }
}

/// The `k`th parent kept in a record.
fn parent_at(rec: &Record, k: usize) -> Option<u32> {
    let word = rec[PARENTS + k / 2].load(Relaxed);
    let key = (word >> (32 * (k % 2))) as u32;
    key.checked_sub(1)
}

/// Owner only: notes `parent` among the record's dynamic parents.
fn add_parent(rec: &Record, parent: u32) {
    let Some(key) = parent.checked_add(1) else {
        return;
    };
    let count = rec[PARENT_COUNT].load(Relaxed);
    let n = (count as u32 as usize).min(MAX_PARENTS);
    if (0..n).any(|k| parent_at(rec, k) == Some(parent)) {
        return;
    }
    if n == MAX_PARENTS {
        rec[PARENT_COUNT].store(count | TRUNCATED, Relaxed);
        return;
    }
    let at = &rec[PARENTS + n / 2];
    let shift = 32 * (n % 2);
    let word = at.load(Relaxed) & !(0xffff_ffff << shift) | (key as u64) << shift;
    at.store(word, Relaxed);
    rec[PARENT_COUNT].store(count + 1, Relaxed);
}

impl Tool for HcpaTool {
    fn name(&self) -> &'static str {
        "hcpa"
    }

    /// Times come only from code built with `KAGE_TOOL=hcpa` (region hooks alone give
    /// work 0 everywhere): says so when the modules registered so far were built otherwise.
    fn init(&self, opts: &mut Options, built: Instrumentations) {
        let others: Vec<_> = built
            .iter()
            .filter(|&i| i != Instrumentation::Hcpa)
            .collect();
        if !others.is_empty() {
            if built.contains(Instrumentation::Hcpa) {
                eprintln!(
                    "kage: warning: some of this program's modules were built without \
                     KAGE_TOOL=hcpa ({others:?}); their code adds no work and no times"
                );
            } else {
                eprintln!(
                    "kage: warning: tool hcpa needs a program built with KAGE_TOOL=hcpa, which \
                     reports the instructions' costs and times; this one was built for {others:?}: \
                     every region will show work 0"
                );
            }
        }
        let _ = self.settings.set(Settings::from_options(opts));
        let trace = opts.get(&TIMESTAMP_TRACE);
        if !trace.is_empty() {
            trace::open(trace);
        }
    }

    fn new_thread(&'static self) -> Box<dyn ThreadTool> {
        let settings = self.settings();
        let s: &'static ThreadStats = Box::leak(Box::new(ThreadStats {
            epoch: AtomicU64::new(self.epoch.load(Acquire)),
            retired: AtomicBool::new(false),
            work: AtomicU64::new(0),
            critical_path: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            regions: Chunked::new(),
        }));
        self.threads.lock().push(s);
        let engine = Engine::new(settings.engine);
        let heap = engine.heap_bytes() as u64;
        self.heap_change(0, heap);
        Box::new(HcpaThread {
            tool: self,
            s,
            engine,
            heap,
        })
    }

    fn reset(&self) {
        self.epoch.fetch_add(1, AcqRel);
    }

    fn fork_child(&self) {
        for t in self.threads.lock().iter() {
            t.retired.store(true, Relaxed);
        }
    }

    fn finish(&self, region_count: usize) -> ToolResults {
        trace::flush();
        let settings = *self.settings();
        let (regions, totals) = self.collect(region_count);
        let program_work = totals.work;
        let fields = move |id: usize| {
            let mut m = Map::new();
            let Some(r) = regions.get(id).filter(|r| r.all_instances > 0) else {
                return m;
            };
            let coverage = if program_work == 0 {
                0.0
            } else {
                (r.work as f64 / program_work as f64).min(1.0)
            };
            m.insert(
                "hcpa".into(),
                json!({
                    "instances": r.all_instances,
                    "work": r.work,
                    "self_work": r.self_work,
                    "critical_path": r.critical_path,
                    "self_parallelism": r.self_parallelism(),
                    "total_parallelism": r.total_parallelism(),
                    "coverage": coverage,
                    "parents": r.parents,
                    "parents_truncated": r.parents_truncated,
                }),
            );
            m
        };
        let costs: Map<String, Value> = kage_abi::hcpa::COSTS
            .iter()
            .map(|c| (c.name.to_string(), json!(c.default)))
            .collect();
        let mut top = Map::new();
        top.insert(
            "hcpa".into(),
            json!({
                "work": totals.work,
                "critical_path": totals.critical_path,
                "max_depth": settings.engine.max_depth,
                "granularity": settings.granule_bytes(),
                "vsm": settings.engine.vsm.name(),
                "skipped_instances": totals.skipped,
                "shadow_peak_bytes": self.heap_peak.load(Relaxed),
                "costs": costs,
                "threads": "each thread's regions are analysed on their own",
            }),
        );
        ToolResults {
            regions: Box::new(move |id| RegionMembers::Map(fields(id))),
            top,
        }
    }
}

/// Whether `region` is nested in its function's frame (a loop, loop body or inlined call). An
/// unknown region (not in the registry) is taken for a function: it shares no frame, so no
/// slot of its caller is ever overwritten through it.
fn is_nested(region: u32) -> bool {
    matches!(registry::meta(region), Some(m) if m.kind != RegionKind::Function)
}

/// A region's links, from its record's `LINK` word ([`HcpaThread::linked`]).
#[derive(Clone, Copy)]
struct Linked {
    open: &'static AtomicU64,
    nested: bool,
}

impl HcpaThread {
    /// The region's record on this thread.
    fn record(&self, region: u32) -> Option<&'static Record> {
        // SAFETY: only the owner thread allocates this thread's chunks.
        unsafe { self.s.regions.get_or_alloc(region as usize) }
    }

    /// The region's record on this thread, the word counting the open instances of its
    /// source region, and whether it is nested in its function (not a function), from the
    /// record's `LINK` word, filled at the first call.
    fn linked(&self, region: u32) -> Option<(&'static Record, Linked)> {
        let rec = self.record(region)?;
        let mut word = rec[LINK].load(Relaxed);
        if word & LINKED == 0 {
            let nested = is_nested(region);
            let open = &self.record((self.tool.source_of)(region))?[OPEN];
            word = open as *const AtomicU64 as u64 | LINKED | if nested { NESTED } else { 0 };
            rec[LINK].store(word, Relaxed);
        }
        // SAFETY: the address of a word of a record, which lives as long as the program
        // (`Chunked` never frees).
        let open = unsafe { &*((word & !(LINKED | NESTED)) as *const AtomicU64) };
        Some((
            rec,
            Linked {
                open,
                nested: word & NESTED != 0,
            },
        ))
    }

    /// Publishes the shadow's heap use to the tool's sum when it changed. The shadow only
    /// shrinks when a level's lane closes (`Engine::exit_closes_lane`) or it is renewed or
    /// released, so a sample just before each of those and one at the end see every peak
    /// (the growth in between, by stores and new levels, is monotonic).
    fn sync_heap(&mut self) {
        let now = self.engine.heap_bytes() as u64;
        if now != self.heap {
            self.tool.heap_change(self.heap, now);
            self.heap = now;
        }
    }

    /// Applies the tool's latest reset if this thread has not yet.
    fn sync_epoch(&mut self) {
        let e = self.tool.epoch.load(Acquire);
        if self.s.epoch.load(Relaxed) != e {
            self.zero();
            self.s.epoch.store(e, Release);
        }
    }

    /// Statistics and times start anew; the open regions stay open, as if entered now.
    fn zero(&mut self) {
        self.s.regions.zero();
        for a in [&self.s.work, &self.s.critical_path, &self.s.skipped] {
            a.store(0, Relaxed);
        }
        self.sync_heap();
        self.engine.restart();
        for region in self.engine.analysed_regions() {
            if let Some((_, link)) = self.linked(region) {
                bump(link.open, 1);
            }
        }
        self.sync_heap();
    }

    /// A static leaf's instance inside `n` − 1 calls that hold nothing else
    /// (`__kage_hcpa_leaf`; `region(i)`: the `i`th, outermost first): its work is added to
    /// every open level's, and each is recorded as if entered one inside the other and left
    /// right away.
    pub(super) fn leaf(&mut self, n: u32, region: impl Fn(u32) -> u32, work: u64, cp: u64) {
        self.sync_epoch();
        self.engine.work(work);
        let (parent_outside, depth) = (self.engine.innermost_region(), self.engine.depth());
        let analysed = self.engine.leaf(n, work, cp);
        if analysed < n {
            bump(&self.s.skipped, u64::from(n - analysed));
        }
        // As their enters would (an instance inside another of its source region counts
        // once: a recursion inlined into itself), the outer ones open, then each leaves,
        // innermost first.
        for i in 0..analysed.saturating_sub(1) {
            if let Some((_, link)) = self.linked(region(i)) {
                bump(link.open, 1);
            }
        }
        for i in (0..analysed).rev() {
            // Each one's only child, when analysed too, did all its work.
            let inner = i + 1 < analysed;
            let st = InstanceStats {
                region: region(i),
                parent: if i == 0 {
                    parent_outside
                } else {
                    Some(region(i - 1))
                },
                depth: depth + i as usize,
                work,
                critical_path: cp,
                children_work: if inner { work } else { 0 },
                children_cp: if inner { cp } else { 0 },
            };
            self.fold(&st, inner);
        }
    }

    /// An analysed instance's exit, into its region's record and the thread's totals;
    /// `opened`: its enter counted it among its source region's open instances.
    fn fold(&self, st: &InstanceStats, opened: bool) {
        if st.depth == 0 {
            bump(&self.s.work, st.work);
            bump(&self.s.critical_path, st.critical_path);
        }
        let Some((rec, link)) = self.linked(st.region) else {
            return;
        };
        bump(&rec[ALL_INSTANCES], 1);
        bump(&rec[ALL_WORK], st.work);
        bump(&rec[SELF_WORK], st.self_work());
        let time = st.work as f64 / st.self_parallelism();
        let sp_time = f64::from_bits(rec[SP_TIME].load(Relaxed)) + time;
        rec[SP_TIME].store(sp_time.to_bits(), Relaxed);
        // Not nested in another instance of its source region (recursion, also through
        // the compiler's copies of it, counts once: the copies' sums in the source view
        // count every instance once).
        let open = if opened {
            let left = link.open.load(Relaxed).saturating_sub(1);
            link.open.store(left, Relaxed);
            left
        } else {
            link.open.load(Relaxed)
        };
        if open == 0 {
            bump(&rec[INSTANCES], 1);
            bump(&rec[WORK], st.work);
            bump(&rec[CP], st.critical_path);
        }
        if let Some(parent) = st.parent {
            add_parent(rec, parent);
        }
    }
}

impl ThreadTool for HcpaThread {
    fn enter(&mut self, region: u32) {
        self.sync_epoch();
        let link = self.linked(region).map(|(_, link)| link);
        let nested = match link {
            Some(link) => link.nested,
            None => is_nested(region),
        };
        let kind = if nested {
            LevelKind::Nested
        } else {
            LevelKind::Function
        };
        trace::event!("enter {region}");
        if self.engine.enter(region, kind) {
            if let Some(link) = link {
                bump(link.open, 1);
            }
        } else {
            bump(&self.s.skipped, 1);
        }
    }

    fn exit(&mut self, region: u32) {
        self.sync_epoch();
        // The framework guarantees balance; a mismatch (a bug) is ignored, never a panic.
        if self.engine.innermost_region() != Some(region) {
            debug_assert!(false, "unbalanced exit of region {region}");
            return;
        }
        trace::event!("exit {region}");
        if self.engine.exit_closes_lane() {
            self.sync_heap();
        }
        if let Some(st) = self.engine.exit() {
            self.fold(&st, true);
        }
    }

    /// Memory accesses come through `__kage_hcpa_load`/`store`/`mem` with their times; the
    /// common access hooks (compare-exchange in hcpa builds, every access in others) carry
    /// none, and a read-modify-write leaves a granule's time as it was.
    fn access(&mut self, _addr: usize, _size: u64, _write: bool) {}

    fn reset(&mut self) {
        self.sync_epoch();
    }

    fn fork_survivor(&mut self) {
        self.zero();
        self.s.epoch.store(self.tool.epoch.load(Acquire), Release);
        self.s.retired.store(false, Relaxed);
    }

    fn thread_exit(&mut self) {
        self.sync_heap();
        self.engine.release();
        self.sync_heap();
    }

    /// A new thread goes on with this part's statistics, with an engine of its own (each
    /// thread's times are its own).
    fn adopt(&mut self) -> bool {
        self.engine = Engine::new(self.tool.settings().engine);
        self.sync_heap();
        true
    }

    fn program_end(&mut self) {
        // The shadow memory (megabytes of VCache and tag tables) holds nothing the report
        // reads: the statistics are in the records.
        self.sync_heap();
        self.engine.release();
        self.sync_heap();
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}
