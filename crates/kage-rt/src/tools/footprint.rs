//! Tool `footprint` (Skadu §5.1): for every dynamic region instance, the number of distinct
//! locations (and cache lines) it touched, inclusive of its children; per static region the
//! instances and the average, minimum and maximum footprint.
//!
//! The shadow is `kage_vsm::footprint::Footprint`, one per thread (regions belong to
//! threads, so a thread's shadow sees exactly its own regions' accesses; its memory is the
//! per-thread cost, a few hundred bytes plus the tag tables of what the thread touched).
//! Region enters push a level, exits pop it and fold its counters into the region's record:
//! instances, sums, minima and maxima, `AtomicU64`s written only by the owner thread so the
//! report can read them at any time. Loop bodies are regions only with `loop_bodies=1`
//! (one instance per iteration); otherwise their events are ignored here.
//!
//! Levels beyond the run-length byte's range (`MAX_LEVELS`, 254 nested regions) are not
//! measured: such instances are counted in the top-level `untracked_instances`.
//!
//! Footprint instrumentation (`KAGE_TOOL=footprint`) reports ranges through
//! [`__kage_fp_strided`], defined here, and `__kage_fp_range` (csrc/tls.c), which buffers
//! them per thread for [`ThreadTool::access_strided`] and the region events to drain.

use crate::chunked::{self, bump, Chunked};
use crate::gate;
use crate::options::{parse_bool, OptionDef, Options};
use crate::registry::{self, Instrumentations};
use crate::sync::SpinLock;
use crate::tool::{RegionMembers, ThreadTool, Tool, ToolResults};
use kage_abi::{symbols, Instrumentation, RegionKind};
use kage_vsm::footprint::{Footprint, FpConfig, FpKind, Touched};
use kage_vsm::Granularity;
#[cfg(test)]
use serde_json::Value;
use serde_json::{json, Map};
use std::ffi::c_void;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicPtr, AtomicU64, Ordering::*};
use std::sync::OnceLock;

const VSM: OptionDef = OptionDef {
    name: "vsm",
    default: "palette",
    help: "footprint: the vector shadow memory: baseline (a version per tag), slim \
           (SlimTV), bulk (SlimTV+BulkTV, 64 KiB tag tables), palette (BulkTV, 4 KiB \
           tag tables stored as one value, a bit or a byte per location)",
    parse: |v| v.parse::<FpKind>().map(|_| v.to_string()),
};

const GRANULARITY: OptionDef = OptionDef {
    name: "granularity",
    default: "byte",
    help: "footprint: what a location is: byte, word (8 bytes) or line (line_size bytes)",
    parse: |v| match Granularity::from_name(v) {
        Some(_) => Ok(v.to_string()),
        None => Err("expected byte, word or line".into()),
    },
};

const LOOP_BODIES: OptionDef = OptionDef {
    name: "loop_bodies",
    default: "0",
    help: "footprint: 1: loop bodies are regions too (one instance per iteration)",
    parse: parse_bool,
};

/// The footprint tool's options (`tools::TOOLS`).
pub static OPTIONS: &[OptionDef] = &[VSM, GRANULARITY, LOOP_BODIES];

const _: symbols::FpStrided = __kage_fp_strided;

/// Footprint instrumentation: `width` bytes at `addr`, `addr + stride`, ...,
/// `addr + (count - 1) * stride` are accessed (a segment's merged range, or a chunk of a
/// hoisted loop's iterations; see `docs/abi.md`). The accesses are counted inline.
///
/// # Safety
/// Always safe to call; the addresses are only recorded, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_fp_strided(
    addr: *const c_void,
    width: u64,
    stride: u64,
    count: u64,
) {
    if width == 0 || count == 0 {
        return;
    }
    gate::with_access_tool(|tool| tool.access_strided(addr as usize, width, stride, count));
}

// Record layout per region.
const INSTANCES: usize = 0;
const SUM: usize = 1;
const MIN: usize = 2;
const MAX: usize = 3;
const SUM_LINES: usize = 4;
const MIN_LINES: usize = 5;
const MAX_LINES: usize = 6;
const W: usize = 7;

struct Settings {
    config: FpConfig,
    granularity: Granularity,
    line_size: u64,
    bodies: bool,
}

pub struct FootprintTool {
    settings: OnceLock<Settings>,
    epoch: AtomicU64,
    threads: SpinLock<Vec<&'static ThreadStats>>,
    /// Sum over threads of their shadows' current heap bytes, and its peak.
    heap_now: AtomicU64,
    heap_peak: AtomicU64,
    /// Whether accesses are delivered (`kage_set_enabled`).
    enabled: AtomicBool,
}

extern "C" {
    /// csrc/tls.c: the calling thread's `__kage_fp_accesses`.
    fn kage_fp_accesses_slot() -> *mut AtomicU64;
    /// csrc/tls.c: the calling thread's range buffer.
    fn kage_fp_buffer_slot() -> *mut RangeBuffer;
    /// csrc/tls.c: the ranges the buffer holds.
    fn kage_fp_buffer_capacity() -> u64;
    /// csrc/tls.c: the calling thread's open leaf inlined calls.
    fn kage_fp_leaf_slot() -> *mut LeafSlot;
    /// csrc/tls.c: the open leaves the slot holds.
    fn kage_fp_leaf_capacity() -> u64;
    /// csrc/tls.c: the ended leaves the slot holds.
    fn kage_fp_ended_capacity() -> u64;
    /// csrc/tls.c: the size of the slot (`LeafSlot` here).
    fn kage_fp_leaf_size() -> u64;
    /// csrc/tls.c: the layout of the records it counts leaf instances in, and the depth
    /// it leaves to the tool: [`RECORD_LAYOUT`].
    fn kage_fp_record_layout(out: *mut [u64; 4]);
}

/// What `kage_fp_record_layout` must say: the records' directory and chunk sizes, a
/// record's words, and the shadow's depth limit.
const RECORD_LAYOUT: [u64; 4] = [
    chunked::DIR as u64,
    chunked::PER_CHUNK as u64,
    W as u64,
    kage_vsm::footprint::MAX_LEVELS as u64,
];

/// `struct kage_fp_leaf` (csrc/tls.c): the thread's open leaves (docs/abi.md, "Leaves" in
/// "Footprint instrumentation"), which `__kage_fp_leaf_enter` opens: a stack of `depth`
/// leaves, each inside the one below, of the activation `frame`; the activation and entry
/// of the innermost leaf that is a level of the tool's (`FootprintThread::leaf_levels`;
/// null when none); whether a leaf hook is changing the slot (a signal handler's hooks and events
/// then leave it alone); and the leaves that `__kage_fp_leaf_end` ended since the tool
/// last ran, for it to count.
#[repr(C)]
pub(crate) struct LeafSlot {
    depth: u64,
    frame: *const c_void,
    level_frame: *const c_void,
    level_entry: *const c_void,
    changing: u64,
    ended_len: u64,
    open: [OpenLeaf; LEAVES],
    ended: [EndedLeaf; ENDED],
    counting: Counting,
}

/// `struct kage_fp_counting` (csrc/tls.c): the records of the part running on the thread,
/// in which the C part counts the leaf instances that reported a few ranges (null
/// `records`: not bound, the tool counts them), what tells it to leave a count to the
/// tool (a reset to apply, the shadow's depth limit), and how it counts.
#[repr(C)]
struct Counting {
    records: *const AtomicPtr<[AtomicU64; W]>,
    tool_epoch: *const AtomicU64,
    part_epoch: *const AtomicU64,
    max_depth: *const AtomicU64,
    /// The part's `open.len()`.
    open_levels: u64,
    location_shift: u64,
    line_shift: u64,
}

/// One open leaf: its region entry, its parent leaf's (null: none), and where its ranges
/// begin in the range buffer.
#[repr(C)]
#[derive(Clone, Copy)]
struct OpenLeaf {
    entry: *const c_void,
    parent: *const c_void,
    mark: u64,
}

/// A leaf that ended: its region entry, its ranges in the buffer (from `mark` to before
/// `end`), and how many leaves were open below it.
#[repr(C)]
#[derive(Clone, Copy)]
struct EndedLeaf {
    entry: *const c_void,
    mark: u64,
    end: u64,
    below: u64,
}

/// `KAGE_FP_LEAVES` and `KAGE_FP_ENDED` (csrc/tls.c), checked when a thread's part is made
/// (with the slot's size).
const LEAVES: usize = 8;
const ENDED: usize = 32;

impl LeafSlot {
    /// The innermost open leaf.
    fn top(&self) -> Option<OpenLeaf> {
        (self.depth as usize).checked_sub(1).map(|d| self.open[d])
    }

    /// Holds the slot for a change outside the tool's events (a signal handler's leaf hooks
    /// then leave it alone); false when a hook that the handler running now interrupted
    /// holds it.
    fn hold(&mut self) -> bool {
        if self.changing != 0 {
            return false;
        }
        self.changing = 1;
        compiler_fence(SeqCst);
        true
    }

    fn release(&mut self) {
        compiler_fence(SeqCst);
        self.changing = 0;
    }
}

/// The open leaves of the activation at `frame` that are neither `keep` nor around it have
/// ended (called by `__kage_fp_leaf_end`, csrc/tls.c): each instance is counted as a
/// region exit would count it, from the ranges it reported, which stay in the buffer for
/// the regions around it. When the runtime does not run the event (the analysis has ended,
/// or this is a signal handler interrupting the runtime: the handler's leaves are not
/// measured, as its other events are not), the activation's open leaves are forgotten.
///
/// # Safety
/// Called from the runtime's C part on the calling thread; `frame` is only compared, `keep`
/// is null or a registered module's table entry.
#[no_mangle]
pub unsafe extern "C" fn __kage_fp_leaf_close(frame: *const c_void, keep: *const c_void) {
    let mut ran = false;
    gate::tool_event(|tool| {
        ran = true;
        if let Some(t) = footprint_part(tool) {
            t.begin();
            t.leaf_close(frame, keep);
        }
    });
    // Not run: leaves of this activation that `__kage_fp_leaf_enter` opened meanwhile (a
    // handler's) go unmeasured; another's (the code the handler interrupted) stay.
    let leaf = &mut *kage_fp_leaf_slot();
    if !ran && leaf.frame == frame && leaf.hold() {
        while leaf.top().is_some_and(|top| top.entry != keep) {
            leaf.depth -= 1;
        }
        leaf.release();
        // A signal that came while the slot was held waited (`crate::handlers`).
        if crate::handlers::pending() {
            crate::handlers::kage_run_waiting_handlers();
        }
    }
}

/// `__kage_fp_leaf_enter(entry, parent, frame)` could not open `entry` itself: ends the
/// activation's open leaves and leaf levels that are neither `entry` nor around it, then
/// opens `entry` and the leaves around it that are not open, unless its instance goes on.
/// When the runtime does not run the event, nothing changes (the leaf is not measured).
///
/// # Safety
/// Called from the runtime's C part on the calling thread; `entry` is a registered module's
/// table entry, `frame` is only compared.
#[no_mangle]
pub unsafe extern "C" fn __kage_fp_leaf_resume(entry: *const c_void, frame: *const c_void) {
    gate::tool_event(|tool| {
        if let Some(t) = footprint_part(tool) {
            t.begin();
            t.leaf_resume(entry, frame);
        }
    });
}

/// `__kage_fp_leaf_range(addr, len, r)` (csrc/tls.c) could not count the instance of the
/// one-range leaf `entry` itself: reports the range as `__kage_fp_range` does when it
/// cannot append it, then counts the instance with what it touched (nothing when accesses
/// are off or `len` is 0). When the runtime does not run the event (the analysis has ended,
/// a signal handler interrupts the runtime or a leaf hook), the instance is not counted.
///
/// # Safety
/// Called from the runtime's C part on the calling thread; `entry` is a registered module's
/// table entry; `addr` is only recorded.
#[no_mangle]
pub unsafe extern "C" fn __kage_fp_leaf_count(addr: *const c_void, len: u64, entry: *const c_void) {
    let delivered = len != 0 && gate::GATE.load(Relaxed) & gate::DISABLED == 0;
    __kage_fp_strided(addr, len, 0, 1);
    gate::tool_event(|tool| {
        if let Some(t) = footprint_part(tool) {
            t.begin();
            let first = addr as u64;
            let range = delivered.then(|| (first, first.wrapping_add(len - 1)));
            t.count_one_range(entry, range);
        }
    });
}

/// The leaf around the leaf `entry`, if any (its parent entry, when that is a leaf).
fn leaf_parent(entry: *const c_void) -> Option<*const c_void> {
    let r = entry as *const kage_abi::Region;
    // SAFETY: a leaf's entry, given by instrumented code: an entry of a registered module's
    // table, whose parent is an entry of the same array.
    unsafe {
        let parent_of = |r: *const kage_abi::Region| {
            let parent = (*r).parent;
            (parent != kage_abi::NONE)
                .then(|| r.offset(parent as isize - (*r).local_index as isize))
        };
        let mut p = parent_of(r)?;
        // A leaf in a loop's body is inside the loop (the body is part of its loop's leaf).
        if (*p).kind == RegionKind::LoopBody as u32 {
            p = parent_of(p)?;
        }
        ((*p).flags & kage_abi::footprint::LEAF != 0).then_some(p as *const c_void)
    }
}

/// Whether the leaf `outer` is `inner` or around it (`inner` null: none is).
fn holds_leaf(outer: *const c_void, inner: *const c_void) -> bool {
    let mut at = (!inner.is_null()).then_some(inner);
    while let Some(e) = at {
        if e == outer {
            return true;
        }
        at = leaf_parent(e);
    }
    false
}

/// How many regions follow the leaf `entry` in its chain (its table flags).
fn chain_of(entry: *const c_void) -> u32 {
    // SAFETY: a leaf's entry, given by instrumented code: a registered module's table entry
    // (the slot keeps only those, `take_leaf`).
    let flags = unsafe { (*(entry as *const kage_abi::Region)).flags };
    kage_abi::footprint::chain_length(flags)
}

/// The thread's part of the footprint tool, if that is the tool.
fn footprint_part(tool: &mut dyn ThreadTool) -> Option<&mut FootprintThread> {
    tool.as_any_mut()?.downcast_mut::<FootprintThread>()
}

/// `struct kage_fp_buffer` (csrc/tls.c): the ranges (first byte, last byte) that
/// `__kage_fp_range` appends while `len < limit`; the owner thread drains it at every region
/// event, and whoever turns accesses on or off sets `limit`.
#[repr(C)]
pub(crate) struct RangeBuffer {
    len: u64,
    limit: AtomicU64,
    /// Non-zero while `__kage_fp_range` appends (the owner is a signal handler's events
    /// interrupting it).
    appending: u64,
    /// `kage_fp_buffer_capacity()` pairs.
    ranges: [u64; 0],
}

/// The owner thread's buffer, as the tool holds it (a coroutine context's part holds its
/// thread's buffer too, without owning it: it drains it while it runs).
struct BufferSlot {
    /// Null once the owner has ended.
    buffer: AtomicPtr<RangeBuffer>,
    capacity: u64,
    /// The thread's own part, which turns the buffer off when the thread ends.
    owner: bool,
}

impl BufferSlot {
    /// For the calling thread (the owner), buffering when `on`.
    fn new(on: bool) -> Self {
        // SAFETY: the calling thread's buffer, which lives as long as the thread.
        let (buffer, capacity) = unsafe { (kage_fp_buffer_slot(), kage_fp_buffer_capacity()) };
        let slot = BufferSlot {
            buffer: AtomicPtr::new(buffer),
            capacity,
            owner: true,
        };
        slot.set_enabled(on);
        slot
    }

    /// For a coroutine context on the calling thread: its buffer, not owned.
    fn shared() -> Self {
        // SAFETY: the calling thread's buffer, which lives as long as the thread.
        let (buffer, capacity) = unsafe { (kage_fp_buffer_slot(), kage_fp_buffer_capacity()) };
        BufferSlot {
            buffer: AtomicPtr::new(buffer),
            capacity,
            owner: false,
        }
    }

    /// The holder stops draining the buffer while another part runs on the thread
    /// (suspended), or for good: the owner turns it off when it ends running.
    fn release(&self, running: bool) {
        if running && self.owner {
            self.close();
        } else {
            if running {
                self.clear();
            }
            self.buffer.store(std::ptr::null_mut(), Release);
        }
    }

    /// Instrumented code buffers ranges (`on`) or reports each one (the runtime then drops
    /// them while accesses are off).
    fn set_enabled(&self, on: bool) {
        let buffer = self.buffer.load(Acquire);
        if !buffer.is_null() {
            let limit = if on { self.capacity } else { 0 };
            // SAFETY: non-null only while the owner lives.
            unsafe { (*buffer).limit.store(limit, Relaxed) };
        }
    }

    /// Owner only: takes the buffered ranges, in order. Returns how many stay (the buffer
    /// is emptied unless a signal handler's events interrupted `__kage_fp_range`, which
    /// sets the length it read: those already taken are taken again, and change nothing).
    fn drain(&self, take: impl FnOnce(&[[u64; 2]])) -> u64 {
        let buffer = self.buffer.load(Relaxed);
        if buffer.is_null() {
            return 0;
        }
        // SAFETY: the owner's own buffer; only the owner (inline, or here) writes `len`
        // and the ranges (a signal handler's append goes above `len`).
        unsafe {
            let len = (*buffer).len.min(self.capacity) as usize;
            let ranges = std::ptr::addr_of!((*buffer).ranges) as *const [u64; 2];
            take(std::slice::from_raw_parts(ranges, len));
            if std::ptr::read_volatile(std::ptr::addr_of!((*buffer).appending)) != 0 {
                return len as u64;
            }
            (*buffer).len = 0;
            0
        }
    }

    /// Owner only: the buffered ranges (first byte, last byte) from the `from`th on, in
    /// order, left in the buffer.
    fn ranges_from(&self, from: u64) -> &[[u64; 2]] {
        let buffer = self.buffer.load(Relaxed);
        if buffer.is_null() {
            return &[];
        }
        // SAFETY: as in `drain`; the entries below `len` are written and stay as they are
        // while the runtime runs on the owner thread (a handler appends above them).
        unsafe {
            let len = (*buffer).len.min(self.capacity) as usize;
            let from = (from as usize).min(len);
            let ranges = std::ptr::addr_of!((*buffer).ranges) as *const [u64; 2];
            std::slice::from_raw_parts(ranges.add(from), len - from)
        }
    }

    /// Owner only: the buffered ranges from the `from`th to before the `to`th, in order,
    /// left in the buffer.
    fn ranges_between(&self, from: u64, to: u64) -> &[[u64; 2]] {
        let ranges = self.ranges_from(from);
        &ranges[..(to.saturating_sub(from) as usize).min(ranges.len())]
    }

    /// Owner only: how many ranges the buffer holds.
    fn len(&self) -> u64 {
        let buffer = self.buffer.load(Relaxed);
        if buffer.is_null() {
            return 0;
        }
        // SAFETY: as in `drain`.
        unsafe { (*buffer).len.min(self.capacity) }
    }

    /// Owner only: takes the ranges before the `from`th, in order, and moves the others
    /// down. False (nothing taken) when there are none before it, or when a signal
    /// handler's events interrupted `__kage_fp_range` (which set the length it read).
    fn compact(&self, from: u64, take: impl FnOnce(&[[u64; 2]])) -> bool {
        let buffer = self.buffer.load(Relaxed);
        if buffer.is_null() || from == 0 {
            return false;
        }
        // SAFETY: as in `drain`.
        unsafe {
            if std::ptr::read_volatile(std::ptr::addr_of!((*buffer).appending)) != 0 {
                return false;
            }
            let len = (*buffer).len.min(self.capacity);
            let from = from.min(len);
            let ranges = std::ptr::addr_of_mut!((*buffer).ranges) as *mut [u64; 2];
            take(std::slice::from_raw_parts(ranges, from as usize));
            std::ptr::copy(ranges.add(from as usize), ranges, (len - from) as usize);
            (*buffer).len = len - from;
            from != 0
        }
    }

    /// Owner only: appends a range if the buffer has room (and buffering is on).
    fn push(&self, first: u64, last: u64) -> bool {
        let buffer = self.buffer.load(Relaxed);
        if buffer.is_null() {
            return false;
        }
        // SAFETY: as in `drain`.
        unsafe {
            let len = (*buffer).len;
            if len >= (*buffer).limit.load(Relaxed).min(self.capacity) {
                return false;
            }
            let ranges = std::ptr::addr_of_mut!((*buffer).ranges) as *mut [u64; 2];
            *ranges.add(len as usize) = [first, last];
            (*buffer).len = len + 1;
            true
        }
    }

    /// Owner only: forgets the buffered ranges.
    fn clear(&self) {
        self.drain(|_| {});
    }

    /// After [`close`](Self::close): the calling thread is the new owner, its buffer used
    /// when `on`.
    fn adopt(&self, on: bool) {
        // SAFETY: the calling thread's buffer, which lives as long as the thread.
        let buffer = unsafe { kage_fp_buffer_slot() };
        self.buffer.store(buffer, Release);
        self.set_enabled(on);
    }

    /// Owner only, at its end: nothing is buffered any more.
    fn close(&self) {
        self.clear();
        self.set_enabled(false);
        self.buffer.store(std::ptr::null_mut(), Release);
    }
}

/// The accesses that footprint instrumentation counts inline, in the owner thread's
/// `__kage_fp_accesses` (docs/abi.md), as any thread may read them: the counter minus what
/// is not to be counted (what it held at the last reset, and what it gained while accesses
/// were off).
struct InlineCount {
    /// The owner's counter while the owner lives; null once folded into `folded`.
    slot: AtomicPtr<AtomicU64>,
    excluded: AtomicU64,
    /// The counter when accesses were last turned off.
    paused_at: AtomicU64,
    /// The count of an owner that has ended.
    folded: AtomicU64,
}

impl InlineCount {
    /// For a coroutine context: its accesses are counted in its thread's part.
    fn detached() -> Self {
        InlineCount {
            slot: AtomicPtr::new(std::ptr::null_mut()),
            excluded: AtomicU64::new(0),
            paused_at: AtomicU64::new(0),
            folded: AtomicU64::new(0),
        }
    }

    /// For the calling thread (the owner), counting from now.
    fn new() -> Self {
        // SAFETY: returns the address of the calling thread's counter.
        let slot = unsafe { kage_fp_accesses_slot() };
        // SAFETY: the slot lives as long as the thread.
        let now = unsafe { (*slot).load(Relaxed) };
        InlineCount {
            slot: AtomicPtr::new(slot),
            excluded: AtomicU64::new(now),
            paused_at: AtomicU64::new(now),
            folded: AtomicU64::new(0),
        }
    }

    fn now(&self) -> Option<u64> {
        let slot = self.slot.load(Acquire);
        // SAFETY: non-null only while the owner lives (it clears it in `fold`).
        (!slot.is_null()).then(|| unsafe { (*slot).load(Relaxed) })
    }

    fn counted(&self, paused: bool) -> u64 {
        let live = self.now().map_or(0, |now| {
            let upto = if paused {
                self.paused_at.load(Relaxed)
            } else {
                now
            };
            upto.saturating_sub(self.excluded.load(Relaxed))
        });
        self.folded.load(Relaxed) + live
    }

    /// Accesses turned off (`on` false) or on again.
    fn set_enabled(&self, on: bool) {
        if let Some(now) = self.now() {
            if on {
                let gained = now.saturating_sub(self.paused_at.load(Relaxed));
                self.excluded.fetch_add(gained, Relaxed);
            } else {
                self.paused_at.store(now, Relaxed);
            }
        }
    }

    /// The owner starts counting from zero.
    fn zero(&self) {
        self.folded.store(0, Relaxed);
        if let Some(now) = self.now() {
            self.excluded.store(now, Relaxed);
            self.paused_at.store(now, Relaxed);
        }
    }

    /// The owner ends: keep its count.
    fn fold(&self, paused: bool) {
        self.folded.store(self.counted(paused), Relaxed);
        self.slot.store(std::ptr::null_mut(), Release);
    }

    /// After [`fold`](Self::fold): the calling thread becomes the owner, its accesses from
    /// now on added to the count kept.
    fn adopt(&self) {
        // SAFETY: returns the address of the calling thread's counter.
        let slot = unsafe { kage_fp_accesses_slot() };
        // SAFETY: the slot lives as long as the thread.
        let now = unsafe { (*slot).load(Relaxed) };
        self.excluded.store(now, Relaxed);
        self.paused_at.store(now, Relaxed);
        self.slot.store(slot, Release);
    }
}

/// One thread's statistics, readable by the report writer at any time.
struct ThreadStats {
    epoch: AtomicU64,
    retired: AtomicBool,
    accesses: AtomicU64,
    /// The root level's counters, published at every region exit (exact once the thread's
    /// regions have all exited, as at thread and process end; while deferred levels are
    /// open, without their ranges: `Footprint::total`).
    total_locations: AtomicU64,
    total_lines: AtomicU64,
    max_depth: AtomicU64,
    untracked: AtomicU64,
    regions: Chunked<W>,
    inline: InlineCount,
    buffer: BufferSlot,
}

pub struct FootprintThread {
    tool: &'static FootprintTool,
    s: &'static ThreadStats,
    /// Another part (a coroutine context's, or the thread's) runs on the thread: the
    /// thread's range buffer holds its ranges, not this part's.
    suspended: bool,
    /// The shadow; `None` once the thread has ended (its statistics are published).
    fp: Option<Footprint>,
    config: FpConfig,
    /// Open regions this tool tracks: (region, whether it has a shadow level).
    open: Vec<(u32, bool)>,
    /// The thread's leaf slot (csrc/tls.c).
    leaf: *mut LeafSlot,
    /// The ranges of a leaf that reported several, or of the leaves made levels.
    leaf_ranges: Vec<[u64; 2]>,
    /// The leaves to open at once (`leaf_resume`).
    leaf_path: Vec<*const c_void>,
    /// The slot is the running event's to change ([`begin`](Self::begin)).
    slot_ok: bool,
    /// Leaves that became levels (an event came while they ran: a call they made, a
    /// signal handler): (entry, activation, the length of `open` with it innermost).
    leaf_levels: Vec<(*const c_void, *const c_void, usize)>,
    /// The heap bytes last added to the tool's sum.
    heap: u64,
    bodies: bool,
    /// The root level's counters of the threads this part counted for before the current
    /// one (`adopt`): the part's totals are theirs plus the current shadow's.
    carried: Touched,
}

pub fn make() -> &'static dyn Tool {
    Box::leak(Box::new(FootprintTool::new()))
}

impl Default for FootprintTool {
    fn default() -> Self {
        Self::new()
    }
}

impl FootprintTool {
    /// A thread's or a context's part, with its inline counter and buffer.
    fn new_part(&'static self, inline: InlineCount, buffer: BufferSlot) -> Box<dyn ThreadTool> {
        let settings = self.settings();
        let s: &'static ThreadStats = Box::leak(Box::new(ThreadStats {
            epoch: AtomicU64::new(self.epoch.load(Acquire)),
            retired: AtomicBool::new(false),
            accesses: AtomicU64::new(0),
            total_locations: AtomicU64::new(0),
            total_lines: AtomicU64::new(0),
            max_depth: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
            regions: Chunked::new(),
            inline,
            buffer,
        }));
        self.threads.lock().push(s);
        // SAFETY: a constant of the runtime's C part.
        assert_eq!(unsafe { kage_fp_leaf_capacity() }, LEAVES as u64);
        // SAFETY: a constant of the runtime's C part.
        assert_eq!(unsafe { kage_fp_ended_capacity() }, ENDED as u64);
        // SAFETY: a constant of the runtime's C part.
        assert_eq!(unsafe { kage_fp_leaf_size() }, size_of::<LeafSlot>() as u64);
        let mut layout = [0u64; 4];
        // SAFETY: writes the four words.
        unsafe { kage_fp_record_layout(&mut layout) };
        assert_eq!(layout, RECORD_LAYOUT);
        let fp = Footprint::new(settings.config);
        let heap = fp.heap_bytes() as u64;
        self.heap_change(0, heap);
        Box::new(FootprintThread {
            tool: self,
            s,
            suspended: false,
            fp: Some(fp),
            config: settings.config,
            open: Vec::with_capacity(64),
            // SAFETY: the calling thread's slot, which lives as long as the thread (a
            // context's part runs on its thread only).
            leaf: unsafe { kage_fp_leaf_slot() },
            leaf_ranges: Vec::with_capacity(2 * 32),
            leaf_path: Vec::with_capacity(LEAVES),
            slot_ok: false,
            leaf_levels: Vec::new(),
            heap,
            bodies: settings.bodies,
            carried: Touched::default(),
        })
    }

    pub fn new() -> Self {
        FootprintTool {
            settings: OnceLock::new(),
            epoch: AtomicU64::new(0),
            threads: SpinLock::new(Vec::new()),
            heap_now: AtomicU64::new(0),
            heap_peak: AtomicU64::new(0),
            enabled: AtomicBool::new(true),
        }
    }

    fn settings(&self) -> &Settings {
        self.settings
            .get_or_init(|| settings_from(&Options::default()))
    }

    fn heap_change(&self, old: u64, new: u64) {
        if new >= old {
            let now = self.heap_now.fetch_add(new - old, Relaxed) + (new - old);
            self.heap_peak.fetch_max(now, Relaxed);
        } else {
            self.heap_now.fetch_sub(old - new, Relaxed);
        }
    }

    /// Per region (by global id): (instances, sum, min, max of locations; sum, min, max of
    /// lines), summed over threads; and the totals.
    fn collect(&self, region_count: usize) -> (Vec<[u64; W]>, Totals) {
        let mut regions = vec![[0u64; W]; region_count];
        let mut totals = Totals::default();
        let epoch = self.epoch.load(Acquire);
        let threads = self.threads.lock().clone();
        for t in threads {
            if t.retired.load(Relaxed) || t.epoch.load(Acquire) != epoch {
                continue;
            }
            totals.locations += t.total_locations.load(Relaxed);
            totals.lines += t.total_lines.load(Relaxed);
            totals.accesses +=
                t.accesses.load(Relaxed) + t.inline.counted(!self.enabled.load(Relaxed));
            totals.untracked += t.untracked.load(Relaxed);
            totals.max_depth = totals.max_depth.max(t.max_depth.load(Relaxed));
            t.regions.for_each(|r, rec| {
                let Some(out) = regions.get_mut(r) else {
                    return;
                };
                let v: [u64; W] = std::array::from_fn(|k| rec[k].load(Relaxed));
                if v[INSTANCES] == 0 {
                    return;
                }
                let first = out[INSTANCES] == 0;
                out[INSTANCES] += v[INSTANCES];
                out[SUM] += v[SUM];
                out[SUM_LINES] += v[SUM_LINES];
                out[MAX] = out[MAX].max(v[MAX]);
                out[MAX_LINES] = out[MAX_LINES].max(v[MAX_LINES]);
                out[MIN] = if first { v[MIN] } else { out[MIN].min(v[MIN]) };
                out[MIN_LINES] = if first {
                    v[MIN_LINES]
                } else {
                    out[MIN_LINES].min(v[MIN_LINES])
                };
            });
        }
        // The calls of a leaf chain count what its outermost call counts (docs/abi.md, "Leaf
        // chains"): copied here rather than at each instance.
        for gid in 0..region_count {
            if regions[gid][INSTANCES] == 0 {
                continue;
            }
            let Some(entry) = registry::region_entry(gid as u32) else {
                continue;
            };
            let chain = chain_of(entry.cast()) as usize;
            for follower in gid + 1..=(gid + chain).min(region_count - 1) {
                regions[follower] = regions[gid];
            }
        }
        (regions, totals)
    }
}

#[derive(Default, Debug)]
struct Totals {
    locations: u64,
    lines: u64,
    accesses: u64,
    untracked: u64,
    max_depth: u64,
}

fn settings_from(opts: &Options) -> Settings {
    let kind: FpKind = opts.get(&VSM).parse().unwrap_or(FpKind::DEFAULT);
    let granularity = Granularity::from_name(opts.get(&GRANULARITY)).unwrap_or(Granularity::Byte);
    // A line is `line_size=` bytes here, whatever `Granularity::shift` says.
    let line_size = opts.line_size();
    let line_shift = line_size.trailing_zeros();
    let location_shift = match granularity {
        Granularity::Byte => 0,
        Granularity::Word => 3.min(line_shift),
        Granularity::Line => line_shift,
    };
    Settings {
        config: FpConfig {
            kind,
            location_shift,
            line_shift,
            table_bits: None,
        },
        granularity,
        line_size,
        bodies: opts.flag(&LOOP_BODIES),
    }
}

impl Tool for FootprintTool {
    fn name(&self) -> &'static str {
        "footprint"
    }

    /// Footprint builds report a loop's iterations as one event, so they cannot measure
    /// loop bodies: `loop_bodies=1` is refused there.
    fn init(&self, opts: &mut Options, built: Instrumentations) {
        if built.contains(Instrumentation::Footprint) && opts.flag(&LOOP_BODIES) {
            eprintln!(
                "kage: warning: loop_bodies=1 needs every loop iteration reported, but this program \
                 was built with KAGE_TOOL=footprint, which reports the iterations of simple loops \
                 together; measuring without loop bodies (build with KAGE_TOOL=count for them)"
            );
            let _ = opts.set(&LOOP_BODIES, "0");
        }
        let _ = self.settings.set(settings_from(opts));
        self.enabled.store(opts.enabled(), Relaxed);
    }

    fn set_enabled(&self, on: bool) {
        if self.enabled.swap(on, Relaxed) == on {
            return;
        }
        for t in self.threads.lock().iter() {
            t.inline.set_enabled(on);
            t.buffer.set_enabled(on);
        }
    }

    fn new_thread(&'static self) -> Box<dyn ThreadTool> {
        self.new_part(
            InlineCount::new(),
            BufferSlot::new(self.enabled.load(Relaxed)),
        )
    }

    /// A context shares its thread's inline counter and buffer: the thread's part counts
    /// the accesses, each part drains the buffer while it runs.
    fn new_context(&'static self) -> Box<dyn ThreadTool> {
        self.new_part(InlineCount::detached(), BufferSlot::shared())
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
        let settings = self.settings();
        let location_bytes = 1u64 << settings.config.location_shift;
        let (regions, totals) = self.collect(region_count);
        let total_bytes = totals.locations * location_bytes;
        let fields = move |id: usize| {
            let Some(v) = regions.get(id) else {
                return Map::new();
            };
            let n = v[INSTANCES];
            let avg = |sum: u64, scale: u64| {
                if n == 0 {
                    0.0
                } else {
                    (sum * scale) as f64 / n as f64
                }
            };
            let max_bytes = v[MAX] * location_bytes;
            let share = if total_bytes == 0 {
                0.0
            } else {
                max_bytes as f64 / total_bytes as f64
            };
            let mut m = Map::new();
            m.insert(
                "footprint".into(),
                json!({
                    "instances": n,
                    "avg_bytes": avg(v[SUM], location_bytes),
                    "min_bytes": v[MIN] * location_bytes,
                    "max_bytes": max_bytes,
                    "avg_lines": avg(v[SUM_LINES], 1),
                    "min_lines": v[MIN_LINES],
                    "max_lines": v[MAX_LINES],
                    "share": share,
                }),
            );
            m
        };
        let mut top = Map::new();
        top.insert("granularity".into(), json!(settings.granularity.name()));
        top.insert("location_bytes".into(), json!(location_bytes));
        top.insert("line_size".into(), json!(settings.line_size));
        top.insert("vsm".into(), json!(settings.config.kind.name()));
        top.insert("total_bytes".into(), json!(total_bytes));
        top.insert("total_lines".into(), json!(totals.lines));
        top.insert("max_depth".into(), json!(totals.max_depth));
        top.insert("accesses".into(), json!(totals.accesses));
        top.insert(
            "shadow_peak_bytes".into(),
            json!(self.heap_peak.load(Relaxed)),
        );
        top.insert("loop_bodies".into(), json!(settings.bodies));
        top.insert("untracked_instances".into(), json!(totals.untracked));
        ToolResults {
            regions: Box::new(move |id| RegionMembers::Map(fields(id))),
            top,
        }
    }
}

impl FootprintThread {
    /// Publishes the heap use to the tool's sum when it changed.
    #[inline]
    fn sync_heap(&mut self) {
        let Some(fp) = self.fp.as_mut() else { return };
        if fp.take_changed() {
            let now = fp.heap_bytes() as u64;
            if now != self.heap {
                self.tool.heap_change(self.heap, now);
                self.heap = now;
            }
        }
    }

    fn publish_totals(&self) {
        let Some(fp) = self.fp.as_ref() else { return };
        let total = fp.total();
        (self.s.total_locations).store(self.carried.locations + total.locations, Relaxed);
        (self.s.total_lines).store(self.carried.lines + total.lines, Relaxed);
    }

    /// Applies the ranges instrumented code buffered (all in the current innermost
    /// instance: every region event drains them first, and makes the open leaves levels or
    /// ends them before).
    #[inline]
    fn drain(&mut self) {
        self.count_ended();
        let Some(fp) = self.fp.as_mut() else { return };
        self.s.buffer.drain(|ranges| fp.access_ranges(ranges));
    }

    /// The thread's leaf slot.
    fn slot(&self) -> &'static mut LeafSlot {
        // SAFETY: the thread's slot (a context's part runs on its thread only), which lives
        // as long as the thread; written by this thread only (the runtime's changes only
        // while `slot_ok`).
        unsafe { &mut *self.leaf }
    }

    /// An event begins: the leaf slot is its to change, unless a leaf hook that a signal
    /// handler interrupted holds it (the handler's event then leaves the slot alone, and
    /// its regions are not measured). No leaf hook runs while the event does: the program's
    /// signal handlers wait while the runtime runs (`crate::handlers`).
    #[inline]
    fn begin(&mut self) {
        self.slot_ok = self.slot().changing == 0;
    }

    /// Whether leaves are open (not levels), and the slot is the event's to change.
    fn leaf_pending(&self) -> bool {
        self.slot_ok && self.slot().depth != 0
    }

    /// `__kage_fp_leaf_end(frame, keep)`: ends the activation's open leaves, then its leaf
    /// levels, that are neither `keep` nor around it.
    fn leaf_close(&mut self, frame: *const c_void, keep: *const c_void) {
        if !self.slot_ok {
            return;
        }
        let leaf = self.slot();
        while let Some(top) = leaf.top() {
            if leaf.frame == frame && holds_leaf(top.entry, keep) {
                break;
            }
            self.close_pending_leaf();
        }
        if leaf.depth == 0 {
            while let Some(entry) = self.innermost_leaf_level(frame) {
                if holds_leaf(entry, keep) {
                    break;
                }
                self.exit_leaf_level();
            }
        }
    }

    /// The innermost level, if it is a leaf of the activation at `frame`: its entry.
    fn innermost_leaf_level(&self, frame: *const c_void) -> Option<*const c_void> {
        (self.leaf_levels.last())
            .filter(|&&(_, at, depth)| at == frame && depth == self.open.len())
            .map(|&(entry, _, _)| entry)
    }

    /// `__kage_fp_leaf_enter(entry, parent, frame)` found the slot in another state than
    /// `entry`'s instance going on or beginning inside its parent's.
    fn leaf_resume(&mut self, entry: *const c_void, frame: *const c_void) {
        if !self.slot_ok || self.leaf_is_open(entry, frame) {
            return;
        }
        self.leaf_close(frame, entry);
        let leaf = self.slot();
        // The innermost open leaf now, if any: `entry` or one around it.
        let innermost =
            (leaf.top().map(|top| top.entry)).or_else(|| self.innermost_leaf_level(frame));
        if innermost != Some(entry) {
            // `entry` and the leaves around it up to the innermost open one, opened
            // outermost first.
            let mut path = std::mem::take(&mut self.leaf_path);
            let mut at = Some(entry);
            while let Some(e) = at.filter(|&e| Some(e) != innermost) {
                path.push(e);
                at = leaf_parent(e);
            }
            for &e in path.iter().rev() {
                if leaf.depth as usize == LEAVES {
                    self.materialize_leaves();
                }
                let d = leaf.depth as usize;
                leaf.open[d] = OpenLeaf {
                    entry: e,
                    parent: leaf_parent(e).unwrap_or(std::ptr::null()),
                    mark: self.s.buffer.len(),
                };
                leaf.frame = frame;
                leaf.depth = d as u64 + 1;
            }
            path.clear();
            self.leaf_path = path;
        }
    }

    /// Counts the innermost open leaf's instance from the ranges it reported (its own and
    /// those of the leaves it held), and closes it.
    fn close_pending_leaf(&mut self) {
        let leaf = self.slot();
        let Some(OpenLeaf { entry, mark, .. }) = leaf.top() else {
            return;
        };
        leaf.depth -= 1;
        self.sync_epoch();
        let end = self.s.buffer.len();
        self.count_leaf(entry, mark, end, leaf.depth);
    }

    /// Counts the leaves that `__kage_fp_leaf_end` ended since the tool last ran: first
    /// thing wherever the buffer that holds their ranges changes (`drain`,
    /// `materialize_leaves`, `make_room_for_leaves`).
    #[inline]
    fn count_ended(&mut self) {
        let leaf = self.slot();
        if leaf.ended_len == 0 || !self.slot_ok {
            return;
        }
        self.sync_epoch();
        let n = (leaf.ended_len as usize).min(ENDED);
        for k in 0..n {
            let EndedLeaf {
                entry,
                mark,
                end,
                below,
            } = leaf.ended[k];
            self.count_leaf(entry, mark, end, below);
        }
        leaf.ended_len = 0;
    }

    /// Counts an instance of the leaf `entry` from the ranges the buffer holds from `mark`
    /// to before `end`; `below` leaves were open around it.
    fn count_leaf(&mut self, entry: *const c_void, mark: u64, end: u64, below: u64) {
        self.bind_counting();
        let ranges = self.s.buffer.ranges_between(mark, end);
        let mut leaf_ranges = std::mem::take(&mut self.leaf_ranges);
        self.count_instance(entry, below, |fp| match ranges {
            &[[first, last]] => fp.touched_by_range(first, last),
            ranges => {
                leaf_ranges.extend_from_slice(ranges);
                let touched = fp.touched_by(&mut leaf_ranges);
                leaf_ranges.clear();
                touched
            }
        });
        self.leaf_ranges = leaf_ranges;
    }

    /// `__kage_fp_leaf_count`: counts an instance of the one-range leaf `entry` that touched
    /// `range` (first and last byte; `None`: nothing), inside the open leaves.
    fn count_one_range(&mut self, entry: *const c_void, range: Option<(u64, u64)>) {
        if !self.slot_ok {
            // A signal handler that interrupted a leaf hook: its leaves are not measured.
            return;
        }
        self.bind_counting();
        self.sync_epoch();
        let below = self.slot().depth;
        self.count_instance(entry, below, |fp| match range {
            Some((first, last)) => fp.touched_by_range(first, last),
            None => Touched::default(),
        });
    }

    /// Counts an instance of the leaf `entry`, inside `below` open leaves, that touched what
    /// `touched` says (unless the shadow is as deep as it goes).
    fn count_instance(
        &mut self,
        entry: *const c_void,
        below: u64,
        touched: impl FnOnce(&Footprint) -> Touched,
    ) {
        // SAFETY: the leaf hooks are given registered modules' entries.
        let Some(region) = (unsafe { registry::global_id(entry as *mut kage_abi::Region) }) else {
            return;
        };
        let Some(fp) = self.fp.as_ref() else { return };
        let chain = chain_of(entry);
        let depth = (self.open.len() as u64) + below + 1 + u64::from(chain);
        if depth > self.s.max_depth.load(Relaxed) {
            self.s.max_depth.store(depth, Relaxed);
        }
        if !fp.can_enter() {
            bump(&self.s.untracked, 1 + u64::from(chain));
            return;
        }
        let touched = touched(fp);
        self.record(region, touched);
    }

    /// Lets the C part count leaf instances in this part's records ([`Counting`]), if it
    /// does not yet.
    #[inline]
    fn bind_counting(&self) {
        let c = &mut self.slot().counting;
        if !c.records.is_null() || self.fp.is_none() {
            return;
        }
        *c = Counting {
            records: self.s.regions.directory(),
            tool_epoch: &self.tool.epoch,
            part_epoch: &self.s.epoch,
            max_depth: &self.s.max_depth,
            open_levels: self.open.len() as u64,
            location_shift: u64::from(self.config.location_shift),
            line_shift: u64::from(self.config.line_shift),
        };
    }

    /// The C part counts no more in this part's records (the slot goes to another part, or
    /// the thread ends).
    fn unbind_counting(&self) {
        self.slot().counting.records = std::ptr::null();
    }

    /// Tells the C part how many regions are open (`open` changed).
    #[inline]
    fn publish_open_levels(&self) {
        self.slot().counting.open_levels = self.open.len() as u64;
    }

    /// An event inside the open leaves (a call they make, a signal handler interrupting
    /// them, a switch to another context, more ranges than the buffer holds): they become
    /// levels of their own, outermost first, each entered with what it reported so far,
    /// exited at its end (`leaf_close`) or when a region around it exits first
    /// ([`exit`](ThreadTool::exit)).
    fn materialize_leaves(&mut self) {
        self.count_ended();
        let leaf = self.slot();
        let depth = leaf.depth as usize;
        if depth == 0 {
            return;
        }
        leaf.depth = 0;
        let frame = leaf.frame;
        let Some(fp) = self.fp.as_mut() else { return };
        // What the buffer holds before the outermost leaf's mark is the level open now's
        // (the leaves' parent); each leaf's, up to the next one's mark, its own (what it
        // holds counts for the level around it when it exits).
        let ranges = &mut self.leaf_ranges;
        ranges.clear();
        self.s.buffer.drain(|taken| ranges.extend_from_slice(taken));
        let apply = |fp: &mut Footprint, from: u64, to: u64| {
            let (from, to) = (from as usize, (to as usize).min(ranges.len()));
            fp.access_ranges(ranges.get(from..to).unwrap_or(&[]));
        };
        apply(fp, 0, leaf.open[0].mark);
        for d in 0..depth {
            let OpenLeaf { entry, mark, .. } = leaf.open[d];
            let end = leaf
                .open
                .get(d + 1)
                .filter(|_| d + 1 < depth)
                .map_or(u64::MAX, |l| l.mark);
            // SAFETY: `__kage_fp_leaf_enter` was given a registered module's entry.
            let Some(region) = (unsafe { registry::global_id(entry as *mut kage_abi::Region) })
            else {
                // Its ranges go to the level around it.
                apply(fp, mark, end);
                continue;
            };
            let tracked = fp.enter();
            if tracked {
                apply(fp, mark, end);
            } else {
                bump(&self.s.untracked, 1);
            }
            self.open.push((region, tracked));
            self.leaf_levels.push((entry, frame, self.open.len()));
        }
        self.leaf_ranges.clear();
        self.publish_level();
        self.publish_open_levels();
        let depth = self.open.len() as u64;
        if depth > self.s.max_depth.load(Relaxed) {
            self.s.max_depth.store(depth, Relaxed);
        }
        self.sync_heap();
    }

    /// The buffer is full while leaves are open: what it holds before the outermost one
    /// began goes to the level open now, the rest moves down, and the range that did not
    /// fit (`first`..=`last`, the innermost leaf's) is appended. False when the leaves
    /// hold the whole buffer (or an interrupted append holds it): nothing changed then.
    fn make_room_for_leaves(&mut self, first: u64, last: u64) -> bool {
        self.count_ended();
        let leaf = self.slot();
        let from = leaf.open[0].mark;
        let Some(fp) = self.fp.as_mut() else {
            return false;
        };
        let moved = self
            .s
            .buffer
            .compact(from, |ranges| fp.access_ranges(ranges));
        if !moved {
            return false;
        }
        for open in &mut leaf.open[..leaf.depth as usize] {
            open.mark = open.mark.saturating_sub(from);
        }
        self.s.buffer.push(first, last)
    }

    /// Makes the open leaves levels, if the slot is the runtime's to change.
    fn materialize_pending(&mut self) {
        if self.leaf_pending() {
            self.materialize_leaves();
        }
    }

    /// Ends the open leaves, innermost first, if the slot is the runtime's to change.
    fn close_pending(&mut self) {
        if self.leaf_pending() {
            while self.slot().depth != 0 {
                self.close_pending_leaf();
            }
        }
    }

    /// Tells the leaf hooks which leaf level is the innermost (`leaf_levels`' last).
    fn publish_level(&self) {
        let (entry, frame) = (self.leaf_levels.last()).map_or(
            (std::ptr::null(), std::ptr::null()),
            |&(entry, frame, _)| (entry, frame),
        );
        let leaf = self.slot();
        (leaf.level_entry, leaf.level_frame) = (entry, frame);
    }

    /// Whether the leaf `entry` of the activation at `frame` is open (in the slot or as a
    /// level): at a loop's header that also begins a leaf around the loop, that leaf goes on
    /// at each iteration.
    fn leaf_is_open(&self, entry: *const c_void, frame: *const c_void) -> bool {
        let leaf = self.slot();
        let in_slot = leaf.frame == frame
            && (leaf.open.iter().take(leaf.depth as usize)).any(|open| open.entry == entry);
        in_slot || (self.leaf_levels.iter()).any(|&(e, at, _)| e == entry && at == frame)
    }

    /// The innermost leaf level, innermost in `open`, exits.
    fn exit_leaf_level(&mut self) {
        self.leaf_levels.pop();
        self.publish_level();
        self.exit_innermost();
    }

    /// Folds an instance of `region` that touched `touched` into its record (a leaf chain's
    /// outermost call's: the calls of its chain get its record in the report, `collect`).
    fn record(&mut self, region: u32, touched: Touched) {
        // SAFETY: only the owner thread allocates this thread's chunks.
        let Some(rec) = (unsafe { self.s.regions.get_or_alloc(region as usize) }) else {
            return;
        };
        let first = rec[INSTANCES].load(Relaxed) == 0;
        bump(&rec[INSTANCES], 1);
        bump(&rec[SUM], touched.locations);
        bump(&rec[SUM_LINES], touched.lines);
        let fold = |at: usize, value: u64, keep_min: bool| {
            let old = rec[at].load(Relaxed);
            let new = if first {
                value
            } else if keep_min {
                old.min(value)
            } else {
                old.max(value)
            };
            rec[at].store(new, Relaxed);
        };
        fold(MIN, touched.locations, true);
        fold(MAX, touched.locations, false);
        fold(MIN_LINES, touched.lines, true);
        fold(MAX_LINES, touched.lines, false);
    }

    /// The innermost region of `open` exits.
    fn exit_innermost(&mut self) {
        self.drain();
        let Some((region, tracked)) = self.open.pop() else {
            return;
        };
        self.publish_open_levels();
        if !tracked {
            return;
        }
        let Some(fp) = self.fp.as_mut() else { return };
        let touched = fp.exit();
        self.publish_totals();
        self.sync_heap();
        self.record(region, touched);
    }

    /// Applies the tool's latest reset if this thread has not yet.
    fn sync_epoch(&mut self) {
        let e = self.tool.epoch.load(Acquire);
        if self.s.epoch.load(Relaxed) != e {
            self.zero();
            self.s.epoch.store(e, Release);
        }
    }

    /// Statistics and shadow start anew; the open regions stay open, as if entered now.
    fn zero(&mut self) {
        self.carried = Touched::default();
        self.s.regions.zero();
        for a in [
            &self.s.accesses,
            &self.s.total_locations,
            &self.s.total_lines,
            &self.s.max_depth,
            &self.s.untracked,
        ] {
            a.store(0, Relaxed);
        }
        self.s.inline.zero();
        self.s.buffer.clear();
        // Open leaves go on, as if entered now; those that ended are forgotten.
        let leaf = self.slot();
        for open in &mut leaf.open {
            open.mark = 0;
        }
        leaf.ended_len = 0;
        let mut fp = Footprint::new(self.config);
        for _ in self.open.iter().filter(|(_, tracked)| *tracked) {
            fp.enter();
        }
        fp.take_changed();
        let now = fp.heap_bytes() as u64;
        self.fp = Some(fp);
        self.tool.heap_change(self.heap, now);
        self.heap = now;
    }

    fn is_tracked_kind(&self, region: u32) -> bool {
        self.bodies || registry::meta(region).is_none_or(|m| m.kind != RegionKind::LoopBody)
    }
}

impl ThreadTool for FootprintThread {
    fn enter(&mut self, region: u32) {
        self.begin();
        self.sync_epoch();
        if !self.is_tracked_kind(region) {
            return;
        }
        if !self.slot_ok {
            // A signal handler that interrupted a leaf hook (the slot is that hook's): its
            // regions are not measured, as its leaves are not (its accesses count for the
            // instances it interrupted).
            self.open.push((region, false));
            self.publish_open_levels();
            return;
        }
        self.materialize_pending();
        self.drain();
        let tracked = self.fp.as_mut().is_some_and(|fp| fp.enter());
        if !tracked {
            bump(&self.s.untracked, 1);
        }
        self.open.push((region, tracked));
        self.publish_open_levels();
        let depth = self.open.len() as u64;
        if depth > self.s.max_depth.load(Relaxed) {
            self.s.max_depth.store(depth, Relaxed);
        }
        self.sync_heap();
    }

    fn exit(&mut self, region: u32) {
        self.begin();
        self.sync_epoch();
        if !self.is_tracked_kind(region) {
            return;
        }
        // Leaves end before the region around them (left by `exit`, a `longjmp` or an
        // exception out of a call they made).
        self.close_pending();
        while self
            .leaf_levels
            .last()
            .is_some_and(|&(_, _, depth)| depth == self.open.len())
        {
            self.exit_leaf_level();
        }
        if self.open.last().map(|o| o.0) != Some(region) {
            debug_assert!(false, "unbalanced exit of region {region}");
            return;
        }
        self.exit_innermost();
    }

    #[inline]
    fn access(&mut self, addr: usize, size: u64, _write: bool) {
        bump(&self.s.accesses, 1);
        if let Some(fp) = self.fp.as_mut() {
            fp.access(addr as u64, size);
        }
        self.sync_heap();
    }

    fn access_strided(&mut self, addr: usize, width: u64, stride: u64, count: u64) {
        self.begin();
        // Called when the buffer is full, among others: the open leaves' ranges stay in the
        // buffer when there is room to make (a contiguous range, the innermost leaf's),
        // else the leaves become levels.
        if self.leaf_pending() {
            let first = addr as u64;
            let contiguous = count == 1 || stride <= width;
            let len = (count.saturating_sub(1))
                .saturating_mul(stride)
                .saturating_add(width);
            let kept = contiguous
                && count != 0
                && len != 0
                && self.make_room_for_leaves(first, first.saturating_add(len - 1));
            if kept {
                self.sync_heap();
                return;
            }
            self.materialize_leaves();
        }
        self.drain();
        if let Some(fp) = self.fp.as_mut() {
            fp.access_strided(addr as u64, width, stride, count);
        }
        self.sync_heap();
    }

    /// Loop bodies are regions only with `loop_bodies=1`.
    fn measures_iterations(&self) -> bool {
        self.bodies
    }

    fn reset(&mut self) {
        self.begin();
        self.sync_epoch();
    }

    fn fork_survivor(&mut self) {
        // The parent's leaves are gone with its other threads' (this thread's go on).
        self.begin();
        self.zero();
        self.s.epoch.store(self.tool.epoch.load(Acquire), Release);
        self.s.retired.store(false, Relaxed);
    }

    fn suspend(&mut self) {
        self.begin();
        // The thread's slot goes to the other part: open leaves (a call one made switched
        // contexts) become levels of this part's, and the activation of its innermost leaf
        // level is kept.
        self.materialize_pending();
        let leaf = self.slot();
        (leaf.level_frame, leaf.level_entry) = (std::ptr::null(), std::ptr::null());
        self.drain();
        self.unbind_counting();
        self.suspended = true;
    }

    /// A new thread goes on with this part's statistics: the ended thread's totals are
    /// carried, the shadow starts empty (each thread's footprints are its own), the inline
    /// counter, the buffer and the leaf slot are the new thread's.
    fn adopt(&mut self) -> bool {
        if !self.s.buffer.owner {
            return false;
        }
        self.carried = Touched {
            locations: self.s.total_locations.load(Relaxed),
            lines: self.s.total_lines.load(Relaxed),
        };
        let on = self.tool.enabled.load(Relaxed);
        self.s.inline.adopt();
        {
            // As `thread_exit` releases it: under the lock `set_enabled` writes limits under.
            let _threads = self.tool.threads.lock();
            self.s.buffer.adopt(on);
        }
        // SAFETY: the calling thread's slot, which lives as long as the thread.
        self.leaf = unsafe { kage_fp_leaf_slot() };
        self.suspended = false;
        self.open.clear();
        self.publish_open_levels();
        self.leaf_ranges.clear();
        self.leaf_levels.clear();
        let fp = Footprint::new(self.config);
        let heap = fp.heap_bytes() as u64;
        self.tool.heap_change(self.heap, heap);
        self.heap = heap;
        self.fp = Some(fp);
        true
    }

    fn resume(&mut self) {
        self.suspended = false;
        self.publish_level();
        self.publish_open_levels();
    }

    fn thread_exit(&mut self) {
        self.begin();
        let running = !self.suspended;
        if running {
            // Left by a fatal signal's report, or `exit` in a call a leaf made.
            self.close_pending();
            while !self.leaf_levels.is_empty() {
                self.exit_leaf_level();
            }
        }
        if running {
            self.drain();
        }
        {
            // Under the lock `set_enabled` writes limits under: the buffer goes with the
            // thread (or the context stops holding it).
            let _threads = self.tool.threads.lock();
            self.s.buffer.release(running);
        }
        self.s.inline.fold(!self.tool.enabled.load(Relaxed));
        self.publish_totals();
        if running {
            self.unbind_counting();
        }
        // Its statistics are published: the shadow goes, so that a program that starts
        // threads again and again (a thread pool's churn, a stress test) holds the shadows
        // of the threads alive, not of every thread it ever ran.
        self.fp = None;
        self.tool.heap_change(self.heap, 0);
        self.heap = 0;
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(vsm: &str, granularity: &str) -> &'static FootprintTool {
        let t: &'static FootprintTool = Box::leak(Box::new(FootprintTool::new()));
        let opts = format!("vsm={vsm}:granularity={granularity}");
        let (mut opts, w) = Options::parse(&opts, &[OPTIONS]);
        assert!(w.is_empty(), "{w:?}");
        t.init(&mut opts, Instrumentations::default());
        t
    }

    #[test]
    fn options_and_loop_bodies_on_footprint_builds() {
        let (_, w) = Options::parse("vsm=fast:granularity=page:loop_bodies=2", &[OPTIONS]);
        assert_eq!(w.len(), 3, "{w:?}");
        for (built, bodies) in [
            (Instrumentations::default(), true),
            (
                Instrumentations::default().with(Instrumentation::Calls),
                true,
            ),
            (
                Instrumentations::default().with(Instrumentation::Footprint),
                false,
            ),
        ] {
            let t = FootprintTool::new();
            let (mut opts, _) = Options::parse("loop_bodies=1:vsm=slim", &[OPTIONS]);
            t.init(&mut opts, built);
            assert_eq!(t.settings().bodies, bodies, "{built:?}");
            assert_eq!(
                opts.flag(&LOOP_BODIES),
                bodies,
                "the report shows what is in force"
            );
            assert_eq!(t.settings().config.kind.name(), "slim");
        }
    }

    fn fp(res: &ToolResults, r: usize) -> Value {
        (res.regions)(r).into_map()["footprint"].clone()
    }

    #[test]
    fn regions_threads_and_report_fields() {
        for vsm in ["baseline", "slim", "bulk", "palette"] {
            let t = tool(vsm, "byte");
            let mut a = t.new_thread();
            let mut b = t.new_thread();
            // Thread a: f (region 0) twice; the second call re-touches 8 of the 16 bytes.
            a.enter(0);
            a.access(0x1000, 16, true);
            a.exit(0);
            a.enter(0);
            a.access(0x1008, 4, false);
            a.access(0x100c, 4, false);
            a.exit(0);
            // Thread b: f touching the same bytes counts for b (its own shadow).
            b.enter(0);
            b.access(0x1000, 64, false);
            b.exit(0);
            a.thread_exit();
            b.thread_exit();
            let res = t.finish(2);
            let f = fp(&res, 0);
            assert_eq!(f["instances"], 3, "{vsm}");
            assert_eq!(f["min_bytes"], 8, "{vsm}");
            assert_eq!(f["max_bytes"], 64, "{vsm}");
            assert_eq!(f["avg_bytes"], (16.0 + 8.0 + 64.0) / 3.0, "{vsm}");
            assert_eq!(f["max_lines"], 1, "{vsm}");
            assert_eq!(res.top["total_bytes"], 16 + 64, "{vsm}");
            assert_eq!(res.top["total_lines"], 2, "{vsm}");
            assert_eq!(f["share"], 64.0 / 80.0, "{vsm}");
            assert_eq!(fp(&res, 1)["instances"], 0);
            assert_eq!(res.top["vsm"], vsm);
            assert_eq!(res.top["accesses"], 4);
            assert!(res.top["shadow_peak_bytes"].as_u64().unwrap() > 0);
        }
    }

    /// What `__kage_fp_range` does: append a range if the buffer has room.
    fn buffer_range(first: u64, len: u64) -> bool {
        // SAFETY: this thread's buffer; the test is its only writer.
        unsafe {
            let b = kage_fp_buffer_slot();
            let n = (*b).len;
            if n >= (*b).limit.load(Relaxed) {
                return false;
            }
            let ranges = std::ptr::addr_of_mut!((*b).ranges) as *mut u64;
            *ranges.add(2 * n as usize) = first;
            *ranges.add(2 * n as usize + 1) = first + len - 1;
            (*b).len = n + 1;
            true
        }
    }

    #[test]
    fn ranges_buffered_inline_count_in_the_instance_they_were_made_in() {
        let t = tool("palette", "byte");
        let mut a = t.new_thread();
        a.enter(0);
        assert!(buffer_range(0x1000, 16));
        a.enter(1);
        // Buffered in region 1's instance (entered above, so drained before it).
        assert!(buffer_range(0x2000, 8));
        assert!(buffer_range(0x1000, 4));
        a.exit(1);
        // Until the buffer is full; then instrumented code calls the runtime.
        let capacity = unsafe { kage_fp_buffer_capacity() };
        for k in 0..capacity {
            assert!(buffer_range(0x3000 + 2 * k, 1));
        }
        assert!(!buffer_range(0x9000, 1));
        a.access_strided(0x9000, 1, 0, 1);
        // Off: nothing is buffered (instrumented code calls the runtime, whose gate drops it).
        t.set_enabled(false);
        assert!(!buffer_range(0xa000, 64));
        t.set_enabled(true);
        a.exit(0);
        a.thread_exit();
        assert!(
            !buffer_range(0xb000, 64),
            "no buffering after the thread's end"
        );
        let res = t.finish(2);
        assert_eq!(fp(&res, 1)["max_bytes"], 12);
        assert_eq!(fp(&res, 0)["max_bytes"], 16 + 8 + capacity + 1);
        assert_eq!(res.top["total_bytes"], 16 + 8 + capacity + 1);
    }

    #[test]
    fn word_and_line_granularity() {
        for (g, bytes, lines) in [("word", 24, 2), ("line", 128, 2)] {
            let t = tool("palette", g);
            let mut a = t.new_thread();
            a.enter(0);
            a.access(60, 8, false); // words 7, 8; lines 0, 1
            a.access(64, 1, false); // word 8, line 1
            a.access(72, 1, false); // word 9, line 1
            a.exit(0);
            let res = t.finish(1);
            assert_eq!(fp(&res, 0)["max_bytes"], bytes, "{g}");
            assert_eq!(fp(&res, 0)["max_lines"], lines, "{g}");
            assert_eq!(res.top["granularity"], g);
        }
    }

    #[test]
    fn reset_starts_anew() {
        let t = tool("palette", "byte");
        let mut a = t.new_thread();
        a.enter(0);
        a.access(0, 100, false);
        t.reset();
        a.reset();
        a.access(50, 100, false);
        a.exit(0);
        let res = t.finish(1);
        assert_eq!(fp(&res, 0)["max_bytes"], 100);
        assert_eq!(fp(&res, 0)["instances"], 1);
    }
}
