//! Tool `working-set` (the EfficiencySanitizer working-set RFC): the distinct cache lines
//! the program touches per interval, as snapshots kept as compressed line bitmaps.
//!
//! - Marking happens inline in instrumented code (docs/abi.md, "Working-set
//!   instrumentation") into the [`shadow`]; programs built for every tool (call hooks) are
//!   served too, through [`ThreadTool::access`].
//! - Every thread counts its accesses down in a thread-local budget; when it runs out,
//!   [`WorkingSet::tick`] adds them to the process-wide count, checks the interval's clock
//!   and, past the boundary, takes a snapshot: scan the shadow of every address range seen
//!   mapped, collect the lines with bit 0 set into a `RoaringTreemap`, shift the bytes.
//! - Snapshots are bounded: when more than `snapshots=` are stored, adjacent pairs are
//!   merged by union (never by adding counts) and the interval doubles (the RFC's adaptive
//!   strategy). Bitmaps make any merge exact.
//! - A snapshot's region stack comes from [`callstack`]: no per-call hook is needed.
//! - The C entry points only working-set instrumentation calls are in [`entry`]; the
//!   tool's options in [`options`].

pub mod callstack;
pub mod entry;
pub mod machine;
pub mod options;
pub mod shadow;

use crate::options::Options;
use crate::registry::{self, Instrumentations};
use crate::sync::SpinLock;
use crate::tool::{ThreadTool, Tool, ToolResults};
use callstack::FunctionMap;
use kage_abi::Instrumentation;
use kage_report as report;
use machine::{wall_ns, Clock};
use options::{IntervalUnit, WsOptions};
use roaring::{RoaringBitmap, RoaringTreemap};
use serde_json::{Map, Value};
use shadow::{merge_ranges, Placement, Scan, Shadow};
use std::cell::Cell;
use std::ffi::{c_char, c_int};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::OnceLock;

extern "C" {
    // csrc/tls.c: the thread's remaining access budget, decremented inline.
    fn kage_ws_budget_get() -> i64;
    fn kage_ws_budget_set(value: i64);
}

/// Budget granted per tick for time and instruction units: the clock is read about once
/// per this many accesses.
const TIME_CHUNK: i64 = 1 << 14;
/// Lines collected per append to a snapshot's bitmap.
/// The most an access-count grant can be (keeps other threads' counts flowing in).
const COUNT_CHUNK: i64 = 1 << 20;

thread_local! {
    /// The budget last granted to this thread: what it consumed is `granted - budget`.
    static GRANTED: Cell<i64> = const { Cell::new(0) };
}

static SHADOW: OnceLock<Shadow> = OnceLock::new();
/// Why the shadow could not be reserved, kept for [`require_shadow`]: a program without
/// working-set code runs on without it, silently.
static SHADOW_ERROR: OnceLock<String> = OnceLock::new();
static TOOL: OnceLock<&'static WorkingSet> = OnceLock::new();

/// Reserves the shadow where instrumented code finds it.
fn reserve_shadow() {
    if SHADOW.get().is_some() || SHADOW_ERROR.get().is_some() {
        return;
    }
    match Shadow::reserve(Placement::Fixed) {
        Ok(s) => {
            let _ = SHADOW.set(s);
        }
        Err(e) => {
            let _ = SHADOW_ERROR.set(e);
        }
    }
}

/// Stops the program, before its code runs, when a module with working-set marks
/// registers and the shadow they write to could not be reserved: the marks would write
/// into whatever is mapped there.
pub fn require_shadow(instrumentation: u32) {
    let marks =
        Instrumentation::from_u32(instrumentation).is_some_and(Instrumentation::has_line_size);
    if !marks || shadow().is_some_and(|s| s.base == kage_abi::WS_SHADOW_BASE) {
        return;
    }
    let why = SHADOW_ERROR.get().map_or("", String::as_str);
    eprintln!(
        "kage: error: {why}; this program was built for the working-set tool, whose code \
         marks its accesses there: it cannot run while that range is in use"
    );
    // SAFETY: ends the process without running anything of the program's.
    unsafe { libc::_exit(1) };
}

/// A program without working-set marks (run under `--tool working-set` with call hooks)
/// needs no fixed base: when it could not be reserved, the shadow goes wherever the kernel
/// puts it, and a module with marks that registers later stops the program
/// ([`require_shadow`]).
fn shadow_for_call_hooks(built: Instrumentations) -> Option<&'static Shadow> {
    let warn = |e: &str| eprintln!("kage: warning: {e}; the working set is not measured");
    if built.iter().any(Instrumentation::has_line_size) {
        return None; // `require_shadow` has stopped the program
    }
    match Shadow::reserve(Placement::Anywhere) {
        Ok(s) => {
            let _ = SHADOW.set(s);
            SHADOW.get()
        }
        Err(e) => {
            warn(&e);
            None
        }
    }
}

/// Runs from `.preinit_array`, before any constructor (instrumented code may run in
/// constructors). Needs no option: the reservation suits every line size.
extern "C" fn preinit(_argc: c_int, _argv: *const *const c_char, _envp: *const *const c_char) {
    if crate::registry::is_the_programs_runtime() {
        reserve_shadow();
    }
}

#[used]
#[link_section = ".preinit_array"]
static PREINIT: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = preinit;

/// The shadow, reserving it now if start-up did not (a program without `.preinit_array`).
pub fn shadow() -> Option<&'static Shadow> {
    if SHADOW.get().is_none() {
        reserve_shadow();
    }
    SHADOW.get()
}

/// A budget for a thread whose tick cannot run now (runtime initialising or finished):
/// check again after a while.
pub fn grant_while_unavailable() {
    GRANTED.with(|g| g.set(0));
    // SAFETY: plain TLS write.
    unsafe { kage_ws_budget_set(TIME_CHUNK) };
}

/// The working-set tool, when it is the selected one.
pub fn tool() -> Option<&'static WorkingSet> {
    TOOL.get().copied()
}

struct Config {
    /// Used with the build's line size (`KAGE_WS_LINE_SIZE`), or `line_size=` for call hooks.
    shadow: Shadow,
    /// log2 of the reported line size (`line_size=`): at least the shadow's; the shadow's
    /// lines are grouped into reported ones when they differ.
    line_shift: u32,
    unit: IntervalUnit,
    clock: Clock,
    initial_interval: u64,
    max_snapshots: usize,
    max_snapshot_bytes: usize,
    start_ns: u64,
    start_reading: u64,
}

struct Snapshot {
    start: u64,
    end: u64,
    start_ns: u64,
    end_ns: u64,
    raw: (u64, u64),
    lines: RoaringTreemap,
    new_lines: u64,
    cumulative: u64,
    regions: Vec<u32>,
    /// Memory its bitmap takes (serialized size, close to the in-memory size).
    bytes: usize,
}

struct State {
    snapshots: Vec<Snapshot>,
    /// Sum of the snapshots' `bytes`.
    snapshot_bytes: usize,
    cumulative: RoaringTreemap,
    /// Lines collected outside a boundary (before the tool was disabled), for the current
    /// interval.
    pending: RoaringTreemap,
    /// When counting was last turned off (clock reading, wall ns): where the current
    /// interval ends if the program ends before counting is on again.
    paused_at: Option<(u64, u64)>,
    interval: u64,
    interval_start: u64,
    interval_start_ns: u64,
    /// Number of the current raw (unmerged) interval.
    raw: u64,
    merges: u32,
    /// Lines of every raw interval, for the share of intervals that fit in each cache (a
    /// merged snapshot no longer knows its parts' sizes).
    raw_lines: Vec<u64>,
    /// Every app address range seen mapped at a boundary (merged), plus the edges of the
    /// shadow reservation.
    seen: Vec<(u64, u64)>,
    /// What the scan covers: `seen` and the space around it ([`cover`]), so lines touched
    /// just before an `munmap` count. Derived from `seen`, never widened again.
    known: Vec<(u64, u64)>,
    mincore_buf: Vec<u8>,
    functions: FunctionMap,
    trace: Option<std::io::BufWriter<std::fs::File>>,
}

impl State {
    fn new(interval: u64, start: u64, start_ns: u64) -> State {
        State {
            snapshots: Vec::new(),
            snapshot_bytes: 0,
            cumulative: RoaringTreemap::new(),
            pending: RoaringTreemap::new(),
            paused_at: None,
            interval,
            interval_start: start,
            interval_start_ns: start_ns,
            raw: 0,
            merges: 0,
            raw_lines: Vec::new(),
            seen: Vec::new(),
            known: Vec::new(),
            mincore_buf: Vec::new(),
            functions: FunctionMap::default(),
            trace: None,
        }
    }
}

pub struct WorkingSet {
    config: OnceLock<Config>,
    accesses: AtomicU64,
    enabled: AtomicBool,
    /// Clock reading at which the current interval ends.
    next_boundary: AtomicU64,
    state: SpinLock<Option<State>>,
}

pub fn make() -> &'static dyn Tool {
    let ws: &'static WorkingSet = Box::leak(Box::new(WorkingSet {
        config: OnceLock::new(),
        accesses: AtomicU64::new(0),
        enabled: AtomicBool::new(false),
        next_boundary: AtomicU64::new(u64::MAX),
        state: SpinLock::new(None),
    }));
    let _ = TOOL.set(ws);
    ws
}

/// Where a snapshot's region stack comes from.
#[derive(Clone, Copy)]
pub enum StackAt<'a> {
    /// Inline instrumentation: the innermost region of the code that ran out of budget.
    Innermost(Option<u32>),
    /// Call-hook instrumentation: the thread's region stack, outermost first.
    Known(&'a [u32]),
}

impl WorkingSet {
    /// This thread's budget ran out (or it is new): count what it consumed, take a snapshot
    /// when the interval is over, grant a new budget.
    pub fn tick(&self, at: StackAt) {
        let Some(cfg) = self.config.get() else {
            // SAFETY: plain TLS write.
            unsafe { kage_ws_budget_set(TIME_CHUNK) };
            return;
        };
        let consumed = self.take_consumed();
        let enabled = self.enabled.load(Relaxed);
        let total = if enabled {
            self.accesses.fetch_add(consumed, Relaxed) + consumed
        } else {
            self.accesses.load(Relaxed)
        };
        if enabled && cfg.clock.now(total) >= self.next_boundary.load(Relaxed) {
            // Whoever holds the lock is taking this boundary (or tracing): go on.
            if let Some(mut guard) = self.state.try_lock_for(1) {
                let now = cfg.clock.now(self.accesses.load(Relaxed));
                if let Some(st) = guard.as_mut() {
                    if now >= self.next_boundary.load(Relaxed) {
                        self.boundary(cfg, st, now, at);
                    }
                }
            }
        }
        let grant = match cfg.unit {
            IntervalUnit::Accesses => {
                let left = self
                    .next_boundary
                    .load(Relaxed)
                    .saturating_sub(self.accesses.load(Relaxed));
                (left.min(COUNT_CHUNK as u64) as i64).max(1)
            }
            _ => TIME_CHUNK,
        };
        GRANTED.with(|g| g.set(grant));
        // SAFETY: plain TLS write.
        unsafe { kage_ws_budget_set(grant) };
    }

    /// What this thread consumed of its grant since the last tick; resets the grant.
    fn take_consumed(&self) -> u64 {
        // SAFETY: plain TLS read.
        let left = unsafe { kage_ws_budget_get() };
        let granted = GRANTED.with(|g| g.replace(0));
        unsafe { kage_ws_budget_set(0) };
        granted.saturating_sub(left).max(0) as u64
    }

    /// Adds the calling thread's unreported accesses to the total (thread or process end).
    fn flush_thread(&self) {
        let consumed = self.take_consumed();
        if self.enabled.load(Relaxed) {
            self.accesses.fetch_add(consumed, Relaxed);
        }
    }

    /// Every line with bit 0 set, plus the pending ones; `mode` says what happens to the bits.
    fn collect(&self, cfg: &Config, st: &mut State, mode: Scan) -> RoaringTreemap {
        let seen = add_seen(&st.seen, shadow::mapped_ranges(), cfg.shadow.own_range());
        if seen != st.seen {
            st.known = cover(seen.clone());
            st.seen = seen;
        }
        // With one thread in the process and signals blocked, nothing else can write the
        // shadow: plain stores instead of compare-exchange. (Only this thread could start
        // another, and it is busy here.)
        let exclusive = machine::process_threads() == Some(1);
        let _blocked = exclusive.then(machine::SignalsBlocked::new);
        let mut lines = LineSet::new(cfg.line_shift - cfg.shadow.shift);
        cfg.shadow.scan(
            &st.known,
            mode,
            exclusive,
            &mut |first, bits| lines.add_page(first, bits),
            &mut st.mincore_buf,
        );
        let mut lines = lines.finish();
        lines |= std::mem::take(&mut st.pending);
        lines
    }

    fn boundary(&self, cfg: &Config, st: &mut State, now: u64, at: StackAt) {
        let end_ns = wall_ns();
        let lines = self.collect(cfg, st, Scan::Shift);
        let regions = match at {
            StackAt::Innermost(r) => callstack::region_stack(&mut st.functions, r),
            StackAt::Known(stack) => stack.to_vec(),
        };
        self.push_snapshot(cfg, st, lines, now, end_ns, regions);
        self.next_boundary
            .store(now.saturating_add(st.interval), Relaxed);
    }

    fn push_snapshot(
        &self,
        cfg: &Config,
        st: &mut State,
        lines: RoaringTreemap,
        now: u64,
        end_ns: u64,
        regions: Vec<u32>,
    ) {
        let mut lines = lines;
        // Run containers: a streamed range of lines takes a few bytes, not a bitmap.
        lines.optimize();
        let new_lines = lines.difference_len(&st.cumulative);
        st.cumulative |= &lines;
        st.cumulative.optimize();
        st.raw_lines.push(lines.len());
        st.snapshots.push(Snapshot {
            start: st.interval_start.saturating_sub(cfg.start_reading),
            end: now.saturating_sub(cfg.start_reading),
            start_ns: st.interval_start_ns.saturating_sub(cfg.start_ns),
            end_ns: end_ns.saturating_sub(cfg.start_ns),
            raw: (st.raw, st.raw),
            lines,
            new_lines,
            cumulative: st.cumulative.len(),
            regions,
            bytes: 0,
        });
        let last = st.snapshots.last_mut().expect("just pushed");
        last.bytes = last.lines.serialized_size();
        st.snapshot_bytes += last.bytes;
        st.raw += 1;
        st.interval_start = now;
        st.interval_start_ns = end_ns;
        // The RFC's adaptive strategy, bounded by count and by memory.
        while st.snapshots.len() > cfg.max_snapshots
            || (st.snapshot_bytes > cfg.max_snapshot_bytes && st.snapshots.len() > 1)
        {
            st.snapshots = merge_pairs(std::mem::take(&mut st.snapshots));
            st.snapshot_bytes = st.snapshots.iter().map(|s| s.bytes).sum();
            st.interval = st.interval.saturating_mul(2);
            st.merges += 1;
        }
    }

    /// Test-only trace mode: marks the access and records it with its interval, atomically
    /// with respect to boundaries (both hold the state lock).
    pub fn trace(&self, addr: u64, size: u64) {
        let Some(cfg) = self.config.get() else { return };
        let mut guard = self.state.lock();
        let Some(st) = guard.as_mut() else { return };
        if !self.enabled.load(Relaxed) {
            return;
        }
        cfg.shadow.mark_range(addr, size);
        if let Some(w) = st.trace.as_mut() {
            let mut rec = [0u8; 24];
            rec[..8].copy_from_slice(&addr.to_le_bytes());
            rec[8..16].copy_from_slice(&size.to_le_bytes());
            rec[16..].copy_from_slice(&st.raw.to_le_bytes());
            let _ = w.write_all(&rec);
        }
    }

    fn restart(&self, cfg: &Config, st: &mut State) {
        let now = cfg.clock.now(self.accesses.load(Relaxed));
        let trace = st.trace.take();
        let seen = std::mem::take(&mut st.seen);
        let known = std::mem::take(&mut st.known);
        *st = State::new(cfg.initial_interval, now, wall_ns());
        st.trace = trace;
        st.seen = seen;
        st.known = known;
        self.next_boundary
            .store(now.saturating_add(cfg.initial_interval), Relaxed);
    }

    fn results(&self, cfg: &Config, st: &State) -> Map<String, Value> {
        let line_size = 1u64 << cfg.line_shift;
        let peak = (st.snapshots.iter().enumerate())
            .max_by_key(|(i, s)| (s.lines.len(), std::cmp::Reverse(*i)));
        let raw_count = st.raw_lines.len().max(1) as f64;
        let caches = machine::data_caches()
            .iter()
            .map(|c| {
                let lines = c.size_bytes / line_size;
                let fit = st.raw_lines.iter().filter(|&&n| n <= lines).count();
                report::CacheFit {
                    level: c.level,
                    size_bytes: c.size_bytes,
                    lines,
                    fit_share: fit as f64 / raw_count,
                }
            })
            .collect();
        let snapshots = (st.snapshots.iter())
            .map(|s| report::Snapshot {
                start: s.start,
                end: s.end,
                start_seconds: s.start_ns as f64 / 1e9,
                end_seconds: s.end_ns as f64 / 1e9,
                intervals: [s.raw.0, s.raw.1],
                lines: s.lines.len(),
                new_lines: s.new_lines,
                cumulative_lines: s.cumulative,
                regions: s.regions.clone(),
            })
            .collect();
        let seen = registry::instrumentations_seen();
        let instrumentation = if seen.contains(Instrumentation::WorkingSetTrace) {
            report::Instrumentation::Trace
        } else if seen.contains(Instrumentation::WorkingSet) {
            report::Instrumentation::Inline
        } else {
            report::Instrumentation::Calls
        };
        report::WorkingSet {
            line_size,
            interval_unit: cfg.unit.to_report(),
            interval: st.interval,
            initial_interval: cfg.initial_interval,
            merges: st.merges as u64,
            instrumentation,
            accesses: self.accesses.load(Relaxed),
            duration_seconds: wall_ns().saturating_sub(cfg.start_ns) as f64 / 1e9,
            total_lines: st.cumulative.len(),
            peak_lines: peak.map_or(0, |(_, s)| s.lines.len()),
            peak_snapshot: peak.map(|(i, _)| i),
            caches,
            snapshots,
        }
        .to_tool_data()
    }
}

/// How far around the mapped address ranges the scan reaches, and the gaps it bridges.
/// Memory can be mapped, touched and unmapped between two boundaries (glibc's `malloc`
/// does this with large blocks through its internal `munmap`, which cannot be
/// interposed): the kernel places such mappings next to existing ones, so covering the
/// space around them catches their lines. Costs one `mincore` byte per 256 KiB of it.
const COVER_MARGIN: u64 = 4 << 30;

/// Builds the set of an interval's lines from page bitmaps of the shadow's lines (in
/// increasing order): one roaring container (2^16 lines) at a time, straight from its bits,
/// instead of a push per line.
struct LineSet {
    lines: RoaringTreemap,
    /// Index (line >> 16) of the container being filled, and its bits.
    container: Option<u64>,
    bits: Vec<u8>,
    /// Reported lines are `1 << coarsen` of the shadow's.
    coarsen: u32,
}

impl LineSet {
    const CONTAINER_BYTES: usize = (1 << 16) / 8;

    fn new(coarsen: u32) -> LineSet {
        LineSet {
            lines: RoaringTreemap::new(),
            container: None,
            bits: Vec::new(),
            coarsen,
        }
    }

    fn add_page(&mut self, first: u64, page: &shadow::PageBits) {
        if self.coarsen > 0 {
            return self.add_page_coarsened(first, page);
        }
        let container = first >> 16;
        if self.container != Some(container) {
            self.flush();
            self.container = Some(container);
        }
        self.bits.resize(Self::CONTAINER_BYTES, 0);
        let at = (first & 0xFFFF) as usize / 8;
        self.bits[at..at + page.len()].copy_from_slice(page);
    }

    /// As [`LineSet::add_page`], each shadow line counting as the reported line holding it.
    fn add_page_coarsened(&mut self, first: u64, page: &shadow::PageBits) {
        for (i, &byte) in page.iter().enumerate() {
            let mut rest = byte;
            while rest != 0 {
                let shadow_line = first + 8 * i as u64 + rest.trailing_zeros() as u64;
                self.set(shadow_line >> self.coarsen);
                rest &= rest - 1;
            }
        }
    }

    fn set(&mut self, line: u64) {
        let container = line >> 16;
        if self.container != Some(container) {
            self.flush();
            self.container = Some(container);
        }
        self.bits.resize(Self::CONTAINER_BYTES, 0);
        let at = (line & 0xFFFF) as usize;
        self.bits[at / 8] |= 1 << (at % 8);
    }

    fn flush(&mut self) {
        if let Some(container) = self.container.take() {
            let high = (container >> 16) as u32;
            let low = ((container & 0xFFFF) << 16) as u32;
            let bitmap = RoaringBitmap::from_lsb0_bytes(low, &self.bits);
            self.lines |= RoaringTreemap::from_bitmaps([(high, bitmap)]);
            self.bits.iter_mut().for_each(|b| *b = 0);
        }
    }

    fn finish(mut self) -> RoaringTreemap {
        self.flush();
        self.lines
    }
}

/// `seen` plus the ranges mapped now, except the shadow itself, whose edges are added
/// instead: the kernel places new mappings right below the lowest one, often the shadow.
fn add_seen(seen: &[(u64, u64)], mapped: Vec<(u64, u64)>, own: (u64, u64)) -> Vec<(u64, u64)> {
    let (own_lo, own_hi) = own;
    let mut ranges = seen.to_vec();
    ranges.extend(
        mapped
            .into_iter()
            .filter(|&(lo, hi)| !(lo >= own_lo && hi <= own_hi)),
    );
    ranges.push((own_lo.saturating_sub(1), own_lo));
    ranges.push((own_hi, own_hi + 1));
    merge_ranges(ranges)
}

/// The ranges to scan: mapped ranges with gaps below [`COVER_MARGIN`] bridged and
/// [`COVER_MARGIN`] added on both sides (the scan leaves out what the shadow does not cover).
fn cover(ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let widened = ranges
        .into_iter()
        .filter(|&(lo, hi)| hi > lo)
        .map(|(lo, hi)| {
            (
                lo.saturating_sub(COVER_MARGIN),
                hi.saturating_add(COVER_MARGIN),
            )
        })
        .collect();
    merge_ranges(widened)
}

/// The RFC's adaptive step: adjacent snapshots combined by logical OR of their lines.
fn merge_pairs(snapshots: Vec<Snapshot>) -> Vec<Snapshot> {
    let mut out = Vec::with_capacity(snapshots.len() / 2 + 1);
    let mut it = snapshots.into_iter();
    while let Some(mut a) = it.next() {
        if let Some(b) = it.next() {
            a.lines |= b.lines;
            a.lines.optimize();
            a.bytes = a.lines.serialized_size();
            a.new_lines += b.new_lines;
            a.end = b.end;
            a.end_ns = b.end_ns;
            a.raw.1 = b.raw.1;
            a.cumulative = b.cumulative;
            a.regions = b.regions;
        }
        out.push(a);
    }
    out
}

impl Tool for WorkingSet {
    fn name(&self) -> &'static str {
        "working-set"
    }

    fn init(&self, opts: &mut Options, built: Instrumentations) {
        let Some(shadow) = shadow().or_else(|| shadow_for_call_hooks(built)) else {
            return;
        };
        let ws = WsOptions::from(opts);
        // The runtime set `line_size=` to at least the build's (`runtime::init`).
        let line_shift = opts.line_size().trailing_zeros();
        let shadow = shadow.with_line_shift(registry::built_line_shift().unwrap_or(line_shift));
        let mut unit = ws.interval_unit;
        let mut interval = ws.interval_length().unwrap_or_else(|e| {
            eprintln!(
                "kage: warning: interval={}: {e}; using 10ms of wall time",
                ws.interval
            );
            unit = IntervalUnit::WallTime;
            10_000_000
        });
        let clock = Clock::open(unit).unwrap_or_else(|e| {
            eprintln!(
                "kage: warning: interval_unit=instructions: {e}; measuring intervals in CPU time \
                 (interval=10ms) instead"
            );
            unit = IntervalUnit::CpuTime;
            interval = 10_000_000;
            Clock::Cpu
        });
        let start_reading = clock.now(0);
        let start_ns = wall_ns();
        let mut state = State::new(interval, start_reading, start_ns);
        if !ws.trace.is_empty() {
            match std::fs::File::create(&ws.trace) {
                Ok(f) => state.trace = Some(std::io::BufWriter::with_capacity(1 << 20, f)),
                Err(e) => eprintln!(
                    "kage: warning: cannot create the trace file {}: {e}",
                    ws.trace
                ),
            }
        }
        *self.state.lock() = Some(state);
        let _ = self.config.set(Config {
            shadow,
            line_shift: line_shift.max(shadow.shift),
            unit,
            clock,
            initial_interval: interval,
            max_snapshots: ws.snapshots as usize,
            max_snapshot_bytes: ws.snapshot_mib as usize * (1 << 20),
            start_ns,
            start_reading,
        });
        self.next_boundary
            .store(start_reading.saturating_add(interval), Relaxed);
        self.enabled.store(opts.enabled(), Relaxed);
    }

    fn new_thread(&'static self) -> Box<dyn ThreadTool> {
        Box::new(WsThread {
            tool: self,
            stack: Vec::new(),
        })
    }

    fn set_enabled(&self, on: bool) {
        let Some(cfg) = self.config.get() else { return };
        let mut guard = self.state.lock();
        let Some(st) = guard.as_mut() else { return };
        if on == self.enabled.load(Relaxed) {
            return;
        }
        if on {
            // Lines marked while disabled are not the program's working set.
            let _ = self.collect(cfg, st, Scan::Drop);
            st.paused_at = None;
        } else {
            let lines = self.collect(cfg, st, Scan::Collect);
            st.pending = lines;
            st.paused_at = Some((cfg.clock.now(self.accesses.load(Relaxed)), wall_ns()));
        }
        self.enabled.store(on, Relaxed);
    }

    fn reset(&self) {
        let Some(cfg) = self.config.get() else { return };
        let mut guard = self.state.lock();
        let Some(st) = guard.as_mut() else { return };
        let _ = self.collect(cfg, st, Scan::Drop);
        self.restart(cfg, st);
    }

    fn fork_child(&self) {
        let Some(cfg) = self.config.get() else { return };
        // Only this thread exists now: a lock another thread held at fork() stays held
        // forever, and what it protected may be half-updated. Start over without it.
        // SAFETY: the only thread left (fork child).
        unsafe { self.state.raw_unlock() };
        let mut guard = self.state.lock();
        if let Some(old) = guard.take() {
            // The parent's trace buffer must not be written twice; leak what may be torn.
            std::mem::forget(old);
        }
        let mut st = State::new(cfg.initial_interval, 0, 0);
        let _ = self.collect(cfg, &mut st, Scan::Drop);
        self.restart(cfg, &mut st);
        *guard = Some(st);
    }

    fn finish(&self, _region_count: usize) -> ToolResults {
        let mut results = ToolResults::default();
        let Some(cfg) = self.config.get() else {
            return results;
        };
        self.flush_thread();
        let Some(mut guard) = self.state.try_lock_for(1 << 20) else {
            return results;
        };
        let Some(st) = guard.as_mut() else {
            return results;
        };
        if self.enabled.load(Relaxed) {
            let now = cfg.clock.now(self.accesses.load(Relaxed));
            let lines = self.collect(cfg, st, Scan::Shift);
            if !lines.is_empty() || st.snapshots.is_empty() {
                self.push_snapshot(cfg, st, lines, now, wall_ns(), Vec::new());
            }
        } else if let Some((now, end_ns)) = st.paused_at.filter(|_| !st.pending.is_empty()) {
            // Counting was turned off with an interval under way: it ended then.
            let lines = std::mem::take(&mut st.pending);
            self.push_snapshot(cfg, st, lines, now, end_ns, Vec::new());
        }
        if let Some(w) = st.trace.as_mut() {
            let _ = w.flush();
        }
        results.top = self.results(cfg, st);
        results
    }
}

/// The per-thread part, for programs built with call hooks.
struct WsThread {
    tool: &'static WorkingSet,
    /// The thread's open regions, outermost first.
    stack: Vec<u32>,
}

impl ThreadTool for WsThread {
    fn enter(&mut self, region: u32) {
        self.stack.push(region);
    }

    fn exit(&mut self, _region: u32) {
        self.stack.pop();
    }

    fn access(&mut self, addr: usize, size: u64, _write: bool) {
        let Some(cfg) = self.tool.config.get() else {
            return;
        };
        if !self.tool.enabled.load(Relaxed) {
            return;
        }
        cfg.shadow.mark_range(addr as u64, size);
        // SAFETY: plain TLS accesses.
        let left = unsafe { kage_ws_budget_get() } - 1;
        unsafe { kage_ws_budget_set(left) };
        if left < 0 {
            self.tool.tick(StackAt::Known(&self.stack));
        }
    }

    /// A new iteration pops the body and pushes it again: the stack is the same.
    fn measures_iterations(&self) -> bool {
        false
    }

    fn reset(&mut self) {}

    fn fork_survivor(&mut self) {}

    fn thread_exit(&mut self) {
        self.tool.flush_thread();
    }

    /// Nothing of the part is the thread's but its region stack (empty once it ended).
    fn adopt(&mut self) -> bool {
        self.stack.clear();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shadow_is_where_instrumented_code_finds_it() {
        let s = shadow().expect("the shadow is reserved");
        assert_eq!(s.base, kage_abi::WS_SHADOW_BASE);
        assert_eq!(s.address_limit(), 1 << 47);
        // The byte instrumented code tests for a line is the runtime's.
        let data = [0u8; 256];
        let address = data.as_ptr() as u64;
        s.with_line_shift(6).mark_lines(address >> 6, address >> 6);
        let byte = (kage_abi::WS_SHADOW_BASE + (address >> 6)) as *const u8;
        assert_eq!(unsafe { byte.read_volatile() } & 1, 1);
        // A second reservation there fails, naming what is in the way.
        let e = Shadow::reserve(Placement::Fixed).unwrap_err();
        assert!(
            e.contains(&format!("at {:#x}..", kage_abi::WS_SHADOW_BASE))
                && e.contains(" is there)"),
            "{e}"
        );
    }

    fn snapshot(lines: &[u64], raw: u64) -> Snapshot {
        Snapshot {
            start: raw * 10,
            end: raw * 10 + 10,
            start_ns: 0,
            end_ns: 0,
            raw: (raw, raw),
            lines: lines.iter().copied().collect(),
            new_lines: 0,
            cumulative: 0,
            regions: vec![raw as u32],
            bytes: 0,
        }
    }

    #[test]
    fn merging_is_a_union_never_a_sum() {
        let merged = merge_pairs(vec![
            snapshot(&[1, 2, 3], 0),
            snapshot(&[2, 3, 4], 1),
            snapshot(&[9], 2),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!(
            merged[0].lines.len(),
            4,
            "{{1,2,3}} | {{2,3,4}} has 4 lines, not 6"
        );
        assert_eq!(merged[0].raw, (0, 1));
        assert_eq!((merged[0].start, merged[0].end), (0, 20));
        assert_eq!(merged[0].regions, vec![1]);
        assert_eq!(merged[1].raw, (2, 2));
    }

    #[test]
    fn line_sets_from_page_bitmaps() {
        // Pages in several containers and two high words, some sharing a container.
        let pages: [u64; 5] = [
            0,
            4096 * 3,
            1 << 16,
            (1 << 32) - 4096,
            (5 << 32) + (7 << 12),
        ];
        for coarsen in [0, 1, 3, 8] {
            let mut set = LineSet::new(coarsen);
            let mut expected = RoaringTreemap::new();
            for (k, &first) in pages.iter().enumerate() {
                let bits: shadow::PageBits = std::array::from_fn(|i| (i * 7 + k) as u8);
                set.add_page(first, &bits);
                expected.extend(shadow::page_lines(first, &bits).map(|line| line >> coarsen));
            }
            assert_eq!(set.finish(), expected, "grouping 2^{coarsen} lines");
            assert!(LineSet::new(coarsen).finish().is_empty());
        }
    }

    #[test]
    fn seen_ranges_stay_put_across_boundaries() {
        // The cover is derived from what was seen, never from the previous cover: an earlier
        // version widened it again at every boundary, scanning terabytes of shadow.
        let g = 1u64 << 30;
        let own = (100 * g, 200 * g);
        let mapped = vec![(10 * g, 11 * g), (150 * g, 160 * g), (300 * g, 301 * g)];
        let first = add_seen(&[], mapped.clone(), own);
        assert_eq!(
            first,
            vec![
                (10 * g, 11 * g),
                (100 * g - 1, 100 * g),
                (200 * g, 200 * g + 1),
                (300 * g, 301 * g)
            ]
        );
        let mut seen = first.clone();
        for _ in 0..10 {
            seen = add_seen(&seen, mapped.clone(), own);
        }
        assert_eq!(seen, first);
        assert_eq!(cover(seen.clone()), cover(first));
        // A range mapped later (and gone again) stays seen.
        let more = add_seen(&seen, vec![(50 * g, 51 * g)], own);
        assert!(more.contains(&(50 * g, 51 * g)) && more.contains(&(300 * g, 301 * g)));
    }

    #[test]
    fn cover_bridges_gaps_and_adds_margins() {
        let g = 1u64 << 30;
        assert_eq!(
            cover(vec![
                (10 * g, 11 * g),
                (13 * g, 14 * g),
                (40 * g, 41 * g),
                (g, g)
            ]),
            vec![(6 * g, 18 * g), (36 * g, 45 * g)]
        );
        assert_eq!(cover(vec![(0, 4096)]), vec![(0, 4096 + COVER_MARGIN)]);
    }

    #[test]
    fn ranges_merge() {
        assert_eq!(
            merge_ranges(vec![(10, 20), (0, 5), (15, 30), (30, 31), (40, 50)]),
            vec![(0, 5), (10, 31), (40, 50)]
        );
    }
}
