//! Tool `count`: per region, dynamic instances and the loads, stores and bytes made while it
//! was active (inclusive, callees included; a recursive region counts in its outermost
//! instance only) and while it was the innermost region (self).
//!
//! Where the counts live (docs/abi.md, "Count instrumentation"): each thread has a record
//! per region ([`kage_abi::count`]), in one array per module found through a directory by
//! the module's slot, and a stack of open function activations, each with its innermost
//! open region; both hang off the thread's `__kage_count_thread`, and `__kage_count` holds
//! its running totals. A count build updates all of it inline: a function's entry pushes
//! its activation and opens its region, the edges where regions change close and open
//! them, each segment adds its accesses to the totals and to its region's self counts. A
//! region's inclusive counts are the totals' growth over its outermost instances: when its
//! open instances go from 0 to 1 the totals are subtracted, when they return to 0 they are
//! added. The runtime is called only where the inline checks fail ([`__kage_count_prepare`]:
//! the thread's first entry, a module's first entry on the thread, a reset, a full stack,
//! activations left dead by a `longjmp` or an exception) and where control may arrive from
//! one (`__kage_count_resume`, `__kage_count_unwind`, `__kage_count_arrive`), which repair
//! the stack with the rules of `stack.rs`.
//!
//! A count-calls build (a call per access, the common region hooks) feeds the same records
//! through [`ThreadTool`]: the events open and close them as the inline code would.
//!
//! Everything the report reads across threads is an `AtomicU64` written only by its owner
//! thread.

use crate::chunked::bump;
use crate::gate::{self, ThreadState};
use crate::registry;
use crate::sync::SpinLock;
use crate::tool::{to_map, RegionMembers, ThreadTool, Tool, ToolResults};
use kage_abi::count::{
    ACTIVATIONS, ACTIVATION_SIZE, CAPACITY, CURRENT, DEPTH, FRAME, INCLUSIVE, INSTANCES, IN_LOCALS,
    MAX_MODULES, OWNER, RECORDS, SELF, THREAD_WORDS, TOP, WORDS,
};
use kage_abi::{symbols, Module, Region, RegionKind, NONE};
use kage_report::{CountStats, Counters};
use serde_json::{Map, Value};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

extern "C" {
    /// The calling thread's `__kage_count` (csrc/tls.c).
    fn kage_count_slot() -> *mut AtomicU64;
    /// The calling thread's `__kage_count_thread` (csrc/tls.c).
    fn kage_count_thread_slot() -> *mut u64;
}

/// A thread's `__kage_count`: loads, stores, bytes read, bytes written.
type Cells = [AtomicU64; 4];

/// A region's record on one thread.
type Record = [AtomicU64; WORDS];

/// A region's record on one thread, with the word counting its source region's open
/// instances there: the record's `DEPTH`, or for a copy its module's cell of the source
/// region ([`kage_abi::count::open_offset`]).
#[derive(Clone, Copy)]
struct Counted {
    rec: &'static Record,
    open: &'static AtomicU64,
}

impl Counted {
    /// Whether the record holds its source region's outermost open instance (its
    /// inclusive counts lack the cells since its start).
    fn holds(&self) -> bool {
        self.rec[DEPTH].load(Relaxed) > 0
    }
}

/// How a region's inclusive counts are read at the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inclusive {
    /// As its record counted them.
    AsCounted,
    /// Derived from the self counts below it, plus the (negative) correction its record
    /// holds: a region counted in locals ([`IN_LOCALS`]).
    Derived,
}

impl Inclusive {
    fn of(region: &Region) -> Inclusive {
        if region.flags & IN_LOCALS != 0 {
            Inclusive::Derived
        } else {
            Inclusive::AsCounted
        }
    }
}

/// A module's records on one thread: a record per region, then a cell per source region
/// with copies in the module.
struct ModuleRecords {
    records: &'static [Record],
    cells: &'static [AtomicU64],
    regions: &'static [Region],
}

impl ModuleRecords {
    /// The records at `p` of module `m`.
    ///
    /// # Safety
    /// `m` is a registered module's table and `p` its records on a thread
    /// ([`record_words`]), both never freed.
    unsafe fn new(p: *const AtomicU64, m: &'static Module) -> ModuleRecords {
        let count = m.region_count as usize;
        ModuleRecords {
            records: std::slice::from_raw_parts(p as *const Record, count),
            cells: std::slice::from_raw_parts(p.add(count * WORDS), m.source_cells as usize),
            regions: std::slice::from_raw_parts(m.regions, count),
        }
    }

    /// Region `i`'s record and its source region's open instances.
    fn counted(&self, i: usize) -> Counted {
        let rec = &self.records[i];
        let open = match self.regions[i].source_cell {
            NONE => &rec[DEPTH],
            cell => &self.cells[cell as usize],
        };
        Counted { rec, open }
    }
}

// Counter order inside SELF/INCLUSIVE and the cells.
const LOADS: usize = 0;
const STORES: usize = 1;
const BYTES_READ: usize = 2;
const BYTES_WRITTEN: usize = 3;

/// `__kage_count_thread`, as [`kage_abi::count`] lays it out.
#[repr(C)]
pub struct ThreadSlot {
    records: AtomicPtr<AtomicPtr<AtomicU64>>,
    acts: AtomicPtr<Activation>,
    top: AtomicU32,
    cap: AtomicU32,
    /// The part whose activations these are (null: none).
    owner: AtomicPtr<ThreadCounts>,
}

/// An open function activation.
#[repr(C)]
struct Activation {
    /// The table entry of its innermost open region.
    cur: AtomicPtr<Region>,
    /// Its frame address; `usize::MAX` for one opened by a region event (count-calls code),
    /// which the stack of region events repairs.
    frame: AtomicUsize,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(ThreadSlot, records) == RECORDS);
    assert!(offset_of!(ThreadSlot, acts) == ACTIVATIONS);
    assert!(offset_of!(ThreadSlot, top) == TOP && offset_of!(ThreadSlot, cap) == CAPACITY);
    assert!(offset_of!(ThreadSlot, owner) == OWNER);
    assert!(size_of::<ThreadSlot>() == THREAD_WORDS * 8);
    assert!(offset_of!(Activation, cur) == CURRENT && offset_of!(Activation, frame) == FRAME);
    assert!(size_of::<Activation>() == ACTIVATION_SIZE);
};

/// The count tool's reset epoch: `kage_reset` bumps it (then empties every part's
/// directory, so that each thread's next entry of each module applies it).
static RESET_EPOCH: AtomicU64 = AtomicU64::new(0);

/// `bytes` of zeroed memory straight from the kernel (async-signal-safe, never freed):
/// what a thread's directory and activations take, and what a signal handler gets while
/// the runtime is busy on its thread.
fn map_zeroed(bytes: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes.max(1),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        // Instrumented code cannot go on without somewhere to count.
        let message = b"kage: out of memory for the count tool's records\n";
        // SAFETY: writes a constant message, then ends the process.
        unsafe {
            libc::write(2, message.as_ptr() as *const c_void, message.len());
            libc::abort();
        }
    }
    p as *mut u8
}

/// The directory of a thread that counts nowhere (`__kage_count_thread`'s first value in
/// csrc/tls.c, and where a parked part leaves it): every module's records null, so the
/// inline entry checks take the runtime's path without a test of the directory itself.
/// Never written.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static kage_count_no_directory: [AtomicPtr<AtomicU64>; MAX_MODULES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_MODULES];

/// [`kage_count_no_directory`] as `ThreadSlot::records` holds it.
fn no_directory() -> *mut AtomicPtr<AtomicU64> {
    kage_count_no_directory.as_ptr() as *mut _
}

/// A directory of record arrays, by module slot, twice over: first as instrumented code
/// finds them (the published half: a reset empties it, so that each module's next entry on
/// the thread takes the runtime's path, which applies the reset), then as the thread's part
/// keeps them (only its owner writes those).
fn new_directory() -> &'static [AtomicPtr<AtomicU64>] {
    let p = map_zeroed(2 * MAX_MODULES * 8) as *const AtomicPtr<AtomicU64>;
    // SAFETY: zeroed memory is a valid array of null pointers, never freed.
    unsafe { std::slice::from_raw_parts(p, 2 * MAX_MODULES) }
}

/// The kept entry of module `slot` in the directory whose published half starts at
/// `published` ([`new_directory`]).
///
/// # Safety
/// `published` starts a directory from [`new_directory`]; `slot` < [`MAX_MODULES`].
unsafe fn kept_entry(
    published: *const AtomicPtr<AtomicU64>,
    slot: u32,
) -> &'static AtomicPtr<AtomicU64> {
    &*published.add(MAX_MODULES + slot as usize)
}

/// Where code counts when no thread part can take its counts (the thread could not be set
/// up, or another tool runs): shared by every thread and never read.
struct Scratch {
    directory: &'static [AtomicPtr<AtomicU64>],
    /// Records for any module of at most `len` words of records.
    records: AtomicPtr<AtomicU64>,
    len: AtomicUsize,
}

static SCRATCH: std::sync::OnceLock<Scratch> = std::sync::OnceLock::new();

fn scratch() -> &'static Scratch {
    SCRATCH.get_or_init(|| Scratch {
        directory: new_directory(),
        records: AtomicPtr::new(std::ptr::null_mut()),
        len: AtomicUsize::new(0),
    })
}

impl Scratch {
    /// Records for `m`'s regions.
    ///
    /// # Safety
    /// `m` points to a module table.
    unsafe fn records(&self, m: *const Module) -> *mut AtomicU64 {
        let n = record_words(&*m).max(1);
        if self.len.load(Acquire) < n {
            let p = map_zeroed(n * 8) as *mut AtomicU64;
            self.records.store(p, Release);
            self.len.store(n, Release);
        }
        self.records.load(Acquire)
    }
}

pub struct CountTool {
    threads: SpinLock<Vec<&'static ThreadCounts>>,
    /// The reset epoch: [`RESET_EPOCH`] (a tool of its own in unit tests).
    epoch: &'static AtomicU64,
}

/// One thread's (or coroutine context's) statistics, readable by the report writer at any
/// time.
struct ThreadCounts {
    /// The reset epoch these counters belong to.
    epoch: AtomicU64,
    /// The thread does not exist in this process (forked child).
    retired: AtomicBool,
    /// Its record arrays, by module slot: published and kept ([`new_directory`]).
    directory: &'static [AtomicPtr<AtomicU64>],
    /// Accesses made outside every region (count-calls code only).
    outside: Record,
    /// The cells when its counts started (its start, or the last reset).
    base: [AtomicU64; 4],
    /// The cells while it runs on them (null while it does not).
    live: AtomicPtr<AtomicU64>,
    /// The cells when it last stopped running.
    saved: [AtomicU64; 4],
    /// Its activations while it does not run.
    acts: AtomicPtr<Activation>,
    top: AtomicU32,
    cap: AtomicU32,
}

impl ThreadCounts {
    /// Its cells now.
    fn cells_now(&self) -> [u64; 4] {
        let live = self.live.load(Acquire);
        if live.is_null() {
            return std::array::from_fn(|k| self.saved[k].load(Relaxed));
        }
        // SAFETY: non-null only while the owner runs on them (it clears it first).
        let cells = unsafe { &*(live as *const Cells) };
        std::array::from_fn(|k| cells[k].load(Relaxed))
    }

    /// Where instrumented code finds its records of module `slot`.
    fn published(&self, slot: u32) -> Option<&AtomicPtr<AtomicU64>> {
        self.directory[..MAX_MODULES].get(slot as usize)
    }

    /// Where it keeps its records of module `slot`.
    fn kept(&self, slot: u32) -> Option<&AtomicPtr<AtomicU64>> {
        self.directory[MAX_MODULES..].get(slot as usize)
    }

    /// The records of module `slot`, if allocated.
    fn records(&self, slot: u32) -> Option<ModuleRecords> {
        let module = registry::slot_module(slot)?;
        let p = self.kept(slot)?.load(Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a registered module's table and the records allocated for it.
        Some(unsafe { ModuleRecords::new(p, &*module.module) })
    }
}

/// A thread's (or coroutine context's) part: the owner's view.
pub struct CountThread {
    c: &'static ThreadCounts,
    /// The tool's reset epoch.
    epoch: &'static AtomicU64,
    /// The owner thread's `__kage_count`.
    cells: &'static Cells,
    /// The owner thread's `__kage_count_thread`, which holds this part's activations while
    /// it runs.
    slot: &'static ThreadSlot,
}

/// The first capacity of a part's activations (a page).
const FIRST_CAPACITY: u32 = 256;

/// The `u64`s of `m`'s records on a thread.
fn record_words(m: &Module) -> usize {
    kage_abi::count::record_words(m.region_count, m.source_cells)
}

/// Opens an instance of a region, as the inline code does: `now` are the thread's cells.
/// The first open instance of its source region marks the record as holding it and
/// subtracts the cells from its inclusive counts.
#[inline]
fn open(c: Counted, now: [u64; 4]) {
    let Counted { rec, open } = c;
    bump(&rec[INSTANCES], 1);
    let depth = open.load(Relaxed);
    open.store(depth + 1, Relaxed);
    if depth == 0 {
        // (A region without copies counts in this word: it is 1 already.)
        rec[DEPTH].store(1, Relaxed);
        for k in 0..4 {
            bump(&rec[INCLUSIVE + k], now[k].wrapping_neg());
        }
    }
}

/// Closes an instance of a region (none of its source region open: nothing). The last
/// one, which the record holds (instances nest), adds the cells to its inclusive counts.
#[inline]
fn close(c: Counted, now: [u64; 4]) {
    let Counted { rec, open } = c;
    let depth = open.load(Relaxed);
    if depth == 0 {
        return;
    }
    open.store(depth - 1, Relaxed);
    if depth == 1 {
        rec[DEPTH].store(0, Relaxed);
        for k in 0..4 {
            bump(&rec[INCLUSIVE + k], now[k]);
        }
    }
}

/// The global id of a registered entry.
///
/// # Safety
/// `r` is null or points to an entry of a module table.
unsafe fn gid_of(r: *const Region) -> Option<u32> {
    registry::global_id(r as *mut Region)
}

/// `gid` and its static ancestors up to its function, innermost first.
fn chain(gid: u32) -> impl Iterator<Item = u32> {
    let mut at = Some(gid);
    std::iter::from_fn(move || {
        let here = at?;
        at = registry::meta(here)
            .filter(|m| m.kind != RegionKind::Function && m.parent != NONE)
            .map(|m| m.parent);
        Some(here)
    })
}

impl CountThread {
    fn now(&self) -> [u64; 4] {
        std::array::from_fn(|k| self.cells[k].load(Relaxed))
    }

    /// Whether the part runs on its thread (its activations are the thread's).
    fn running(&self) -> bool {
        std::ptr::eq(self.slot.owner.load(Relaxed), self.c)
    }

    /// The records of module `slot` (`words` `u64`s: [`record_words`]), allocated on first
    /// use: through the runtime's allocator, or straight from the kernel when `busy` (a
    /// signal handler while the runtime runs on the thread).
    fn module_records(&self, slot: u32, words: usize, busy: bool) -> *mut AtomicU64 {
        let Some(entry) = self.c.kept(slot) else {
            return std::ptr::null_mut();
        };
        let p = entry.load(Acquire);
        if !p.is_null() {
            return p;
        }
        let bytes = words.max(1) * 8;
        let p = if busy {
            map_zeroed(bytes) as *mut AtomicU64
        } else {
            let layout = std::alloc::Layout::from_size_align(bytes, 64).ok();
            // SAFETY: a non-zero size.
            let p = layout.map_or(std::ptr::null_mut(), |l| unsafe {
                std::alloc::alloc_zeroed(l)
            });
            if p.is_null() {
                map_zeroed(bytes) as *mut AtomicU64
            } else {
                p as *mut AtomicU64
            }
        };
        entry.store(p, Release);
        p
    }

    /// The record of the region at table entry `r`.
    ///
    /// # Safety
    /// `r` points to an entry of a registered module's table.
    unsafe fn record_at(&self, r: *const Region) -> Option<Counted> {
        let m = (*r).module;
        let slot = (*m).slot;
        if slot == 0 {
            return None;
        }
        let records = self.module_records(slot, record_words(&*m), false);
        if records.is_null() {
            return None;
        }
        Some(ModuleRecords::new(records, &*m).counted((*r).local_index as usize))
    }

    /// The record of region `gid`.
    fn record(&self, gid: u32) -> Option<Counted> {
        let entry = registry::region_entry(gid)?;
        // SAFETY: a registered entry.
        unsafe { self.record_at(entry) }
    }

    /// Activation `i` of the running part.
    fn act(&self, i: u32) -> &Activation {
        // SAFETY: `i` < top <= cap, within the array the slot holds.
        unsafe { &*self.slot.acts.load(Relaxed).add(i as usize) }
    }

    fn top(&self) -> u32 {
        self.slot.top.load(Relaxed)
    }

    /// Room for one more activation.
    fn reserve(&self) {
        reserve(self.slot);
    }

    /// Pushes an activation (of the running part).
    fn push(&self, cur: *const Region, frame: usize) {
        self.reserve();
        let i = self.top();
        self.slot.top.store(i + 1, Relaxed);
        let act = self.act(i);
        act.cur.store(cur as *mut Region, Relaxed);
        act.frame.store(frame, Relaxed);
    }

    /// Closes the regions open in activation `i`: its innermost one and those around it.
    fn close_activation(&self, i: u32) {
        let cur = self.act(i).cur.load(Relaxed);
        // SAFETY: activations hold registered entries.
        let Some(gid) = (unsafe { gid_of(cur) }) else {
            return;
        };
        let now = self.now();
        for g in chain(gid) {
            if let Some(rec) = self.record(g) {
                close(rec, now);
            }
        }
    }

    /// Closes the activations above `i`.
    /// Counts an instance of `root`, a tree's root (and of its body, a loop's) whose code
    /// was left while it ran (a fault, a signal handler's `siglongjmp`): what its locals
    /// held is lost, the instance is not.
    ///
    /// # Safety
    /// `root` points to an entry of a module table.
    unsafe fn count_left_tree(&self, root: *const Region) {
        let Some(gid) = gid_of(root) else { return };
        let body =
            (registry::meta(gid).map(|m| m.kind) == Some(RegionKind::Loop)).then_some(gid + 1);
        for g in std::iter::once(gid).chain(body) {
            if let Some(rec) = self.record(g) {
                bump(&rec.rec[INSTANCES], 1);
            }
        }
    }

    fn close_above(&self, i: u32) {
        while self.top() > i + 1 {
            let last = self.top() - 1;
            self.close_activation(last);
            self.slot.top.store(last, Relaxed);
        }
    }

    /// The innermost open region of activation `i`.
    fn current(&self, i: u32) -> Option<u32> {
        // SAFETY: activations hold registered entries.
        unsafe { gid_of(self.act(i).cur.load(Relaxed)) }
    }

    fn set_current(&self, i: u32, gid: u32) {
        if let Some(entry) = registry::region_entry(gid) {
            self.act(i).cur.store(entry as *mut Region, Relaxed);
        }
    }

    /// Closes the regions of activation `i` above `keep` (an open one).
    fn close_down_to(&self, i: u32, keep: u32) {
        let Some(cur) = self.current(i) else { return };
        let now = self.now();
        for g in chain(cur).take_while(|&g| g != keep) {
            if let Some(rec) = self.record(g) {
                close(rec, now);
            }
        }
        self.set_current(i, keep);
    }

    /// Whether `gid` is open in activation `i`.
    fn is_open(&self, i: u32, gid: u32) -> bool {
        self.current(i)
            .is_some_and(|cur| chain(cur).any(|g| g == gid))
    }

    /// `gid` becomes the innermost open region of activation `i`, as `RegionStack::settle`
    /// makes it: the regions above it close when it is open; else those above its innermost
    /// open ancestor close and the regions between open, when they are all inlined calls
    /// (nothing happens otherwise).
    fn settle_in(&self, i: u32, gid: u32) {
        if self.current(i) == Some(gid) {
            return;
        }
        if self.is_open(i, gid) {
            self.close_down_to(i, gid);
            return;
        }
        let mut missing = Vec::new();
        let mut at = gid;
        let base = loop {
            let Some(meta) = registry::meta(at) else {
                return;
            };
            if meta.kind != RegionKind::Inlined || missing.len() == 64 {
                return;
            }
            missing.push(at);
            if meta.parent_kind == Some(RegionKind::Function) || self.is_open(i, meta.parent) {
                break meta.parent;
            }
            at = meta.parent;
        };
        self.close_down_to(i, base);
        let now = self.now();
        for &g in missing.iter().rev() {
            if let Some(rec) = self.record(g) {
                open(rec, now);
            }
        }
        self.set_current(i, gid);
    }

    /// A header of loop `lp` runs in activation `i`, as `RegionStack::loop_iter` has it: a
    /// new iteration when its body is open, else the loop is entered in its parent.
    fn loop_iter_in(&self, i: u32, lp: u32) {
        let body = lp + 1;
        if self.is_open(i, body) {
            self.close_down_to(i, body);
            if let Some(rec) = self.record(body) {
                let now = self.now();
                close(rec, now);
                open(rec, now);
            }
            return;
        }
        let Some(meta) = registry::meta(lp) else {
            return;
        };
        if !self.is_open(i, meta.parent) {
            self.settle_in(i, meta.parent);
        }
        let keep = if self.is_open(i, meta.parent) {
            meta.parent
        } else {
            meta.func
        };
        self.close_down_to(i, keep);
        let now = self.now();
        for g in [lp, body] {
            if let Some(rec) = self.record(g) {
                open(rec, now);
            }
        }
        self.set_current(i, body);
    }

    /// At a function's entry, when the inline checks failed (`__kage_count_prepare`).
    ///
    /// # Safety
    /// `m` points to a module table; the part runs on the calling thread.
    unsafe fn prepare(&mut self, m: *mut Module, frame: usize) -> *mut u64 {
        if (*m).slot == 0 {
            registry::register(m);
        }
        let slot = (*m).slot;
        let records = loop {
            self.sync_epoch();
            if slot == 0 {
                break std::ptr::null_mut();
            }
            let records = self.module_records(slot, record_words(&*m), false);
            let Some(published) = self.c.published(slot).filter(|_| !records.is_null()) else {
                break records;
            };
            // Published for the inline checks. A reset bumps the epoch before it empties
            // the directories: if it came meanwhile, the entry may have been published
            // after it emptied it, and is applied now (sequentially consistent, as there).
            published.store(records, SeqCst);
            if self.epoch.load(SeqCst) == self.c.epoch.load(Relaxed) {
                break records;
            }
        };
        if frame != 0 {
            while self.top() > 0 && self.act(self.top() - 1).frame.load(Relaxed) <= frame {
                let last = self.top() - 1;
                self.close_activation(last);
                self.slot.top.store(last, Relaxed);
            }
        }
        self.reserve();
        if records.is_null() {
            scratch().records(m) as *mut u64
        } else {
            records as *mut u64
        }
    }

    /// Applies the tool's latest reset if this part has not yet; true if it did.
    fn sync_epoch(&mut self) -> bool {
        let e = self.epoch.load(Acquire);
        if self.c.epoch.load(Relaxed) == e {
            return false;
        }
        self.zero();
        self.c.epoch.store(e, Release);
        true
    }

    /// Zeroes every counter. Statistics start anew: each region open at this moment counts
    /// as many instances as it has open (so a forked child's `main`, entered before the fork,
    /// has one), its inclusive counts from now.
    fn zero(&mut self) {
        let now = if self.running() {
            self.now()
        } else {
            std::array::from_fn(|k| self.c.saved[k].load(Relaxed))
        };
        for slot in 1..=registry::last_slot() {
            let Some(module) = self.c.records(slot) else {
                continue;
            };
            for (i, rec) in module.records.iter().enumerate() {
                // The record holding its source region's outermost open instance counts
                // them all (a copy opened inside it has none of its own).
                let counted = module.counted(i);
                let holds = counted.holds();
                let open = if holds { counted.open.load(Relaxed) } else { 0 };
                rec[INSTANCES].store(open, Relaxed);
                for k in 0..4 {
                    rec[SELF + k].store(0, Relaxed);
                    let inclusive = if holds { now[k].wrapping_neg() } else { 0 };
                    rec[INCLUSIVE + k].store(inclusive, Relaxed);
                }
            }
        }
        for w in &self.c.outside {
            w.store(0, Relaxed);
        }
        for k in 0..4 {
            self.c.base[k].store(now[k], Relaxed);
        }
    }

    /// The part starts running on its thread: its activations, directory and cells there.
    /// A part still running there (a coroutine that ended without switching back) stops.
    fn start_running(&mut self) {
        if self.running() {
            return;
        }
        let s = self.slot;
        let other = s.owner.load(Relaxed);
        if !other.is_null() {
            // SAFETY: parts' counts are never freed.
            park(unsafe { &*other }, self.cells, s);
        } else if self.c.acts.load(Relaxed).is_null()
            && ENDED_ACTIVATIONS
                .get()
                .is_none_or(|lent| lent.acts.load(Relaxed) != s.acts.load(Relaxed))
        {
            // The thread's first part, perhaps after code ran counting nowhere (the runtime
            // could not set the thread up then): the activations still open there are its
            // own.
            self.c.acts.store(s.acts.load(Relaxed), Relaxed);
            self.c.cap.store(s.cap.load(Relaxed), Relaxed);
            self.c.top.store(s.top.load(Relaxed), Relaxed);
        }
        s.acts.store(self.c.acts.load(Relaxed), Relaxed);
        s.cap.store(self.c.cap.load(Relaxed), Relaxed);
        s.top.store(self.c.top.load(Relaxed), Relaxed);
        // A part that never ran has no activations yet; the entry checks read the one below
        // theirs (the sentinel) once the records are set.
        reserve(s);
        s.records
            .store(self.c.directory.as_ptr() as *mut _, Relaxed);
        for k in 0..4 {
            self.cells[k].store(self.c.saved[k].load(Relaxed), Relaxed);
        }
        s.owner
            .store(self.c as *const ThreadCounts as *mut ThreadCounts, Relaxed);
        self.c
            .live
            .store(self.cells.as_ptr() as *mut AtomicU64, Release);
    }

    /// The part stops running on its thread (another context runs there, or it ends).
    fn stop_running(&mut self) {
        if self.running() {
            self.sync_epoch();
            park(self.c, self.cells, self.slot);
        }
    }

    /// The innermost open region's record (the outside record when none is open).
    fn innermost(&self) -> &Record {
        let top = self.top();
        if top == 0 {
            return &self.c.outside;
        }
        let cur = self.act(top - 1).cur.load(Relaxed);
        if cur.is_null() {
            return &self.c.outside;
        }
        // SAFETY: activations hold registered entries.
        unsafe { self.record_at(cur) }.map_or(&self.c.outside, |c| c.rec)
    }
}

/// The part of `c`, running on the thread of `cells` and `slot`, stops: what the thread
/// holds for it is kept in `c`, and the thread holds nothing.
fn park(c: &ThreadCounts, cells: &Cells, slot: &ThreadSlot) {
    c.acts.store(slot.acts.load(Relaxed), Relaxed);
    c.cap.store(slot.cap.load(Relaxed), Relaxed);
    c.top.store(slot.top.load(Relaxed), Relaxed);
    for k in 0..4 {
        c.saved[k].store(cells[k].load(Relaxed), Relaxed);
    }
    c.live.store(std::ptr::null_mut(), Release);
    // Code that runs before another part does (a signal handler, a thread's last
    // destructors) counts nowhere rather than in these.
    slot.records.store(no_directory(), Relaxed);
    slot.acts.store(std::ptr::null_mut(), Relaxed);
    slot.cap.store(0, Relaxed);
    slot.top.store(0, Relaxed);
    slot.owner.store(std::ptr::null_mut(), Relaxed);
}

/// Room for one more activation in `slot`: a new array twice as large when full, the old
/// one left in place (a signal handler may be using it). Every array starts with a
/// sentinel before its first activation, with the highest frame address: the inline entry
/// checks compare with the activation below theirs without testing for none
/// (docs/abi.md). So a thread whose records are set always has an array.
fn reserve(slot: &ThreadSlot) {
    let top = slot.top.load(Relaxed);
    let cap = slot.cap.load(Relaxed);
    if top < cap {
        return;
    }
    let new_cap = (cap * 2).max(FIRST_CAPACITY);
    let sentinel = map_zeroed((new_cap as usize + 1) * ACTIVATION_SIZE) as *mut Activation;
    // SAFETY: a fresh array of `new_cap + 1` activations.
    let p = unsafe {
        (*sentinel).frame.store(usize::MAX, Relaxed);
        sentinel.add(1)
    };
    let old = slot.acts.load(Relaxed);
    if !old.is_null() {
        // SAFETY: both arrays hold at least `top` activations.
        unsafe { std::ptr::copy_nonoverlapping(old, p, top as usize) };
    }
    slot.acts.store(p, Relaxed);
    slot.cap.store(new_cap, Relaxed);
}

/// The activations [`lend_ended_activations`] lends, once it has.
static ENDED_ACTIVATIONS: std::sync::OnceLock<ThreadSlot> = std::sync::OnceLock::new();

/// Gives `slot`, the slot of a thread whose part has ended (and gone to the next thread),
/// activations for the code that runs on the thread still, counting nowhere (other
/// thread-specific destructors than the runtime's): one array that every ended thread
/// shares, so that a program that starts threads again and again does not map one for each.
/// What they write there is never read but by the entry checks of the same code.
fn lend_ended_activations(slot: &ThreadSlot) {
    let shared = ENDED_ACTIVATIONS.get_or_init(|| {
        let shared = ThreadSlot {
            records: AtomicPtr::new(no_directory()),
            acts: AtomicPtr::new(std::ptr::null_mut()),
            top: AtomicU32::new(0),
            cap: AtomicU32::new(0),
            owner: AtomicPtr::new(std::ptr::null_mut()),
        };
        reserve(&shared);
        shared
    });
    slot.top.store(0, Relaxed);
    slot.acts.store(shared.acts.load(Relaxed), Relaxed);
    slot.cap.store(shared.cap.load(Relaxed), Relaxed);
}

/// The calling thread's `__kage_count_thread`.
fn thread_slot() -> &'static ThreadSlot {
    // SAFETY: the calling thread's thread-local, which lives as long as it.
    unsafe { &*(kage_count_thread_slot() as *const ThreadSlot) }
}

/// What a count entry point can work with on the calling thread.
enum Part<'a> {
    /// The thread's running count part (the thread marked busy meanwhile).
    Running(&'a mut CountThread),
    /// The runtime is busy on this thread (a signal handler interrupted it).
    Busy,
    /// The thread could not be set up (the runtime starting on it, or finished).
    NoThread,
    /// Another tool runs (the program was run with `tool=`): this code is not measured.
    OtherTool,
}

/// Runs `f` with what the calling thread has.
///
/// # Safety
/// Called from instrumented code, on the calling thread.
unsafe fn with_part<R>(f: impl FnOnce(Part) -> R) -> R {
    let ts = gate::event_thread();
    if ts.is_null() {
        return f(Part::NoThread);
    }
    let state: &ThreadState = &*ts;
    if state.busy.get() != 0 {
        return f(Part::Busy);
    }
    state.busy.set(gate::IN_RUNTIME);
    std::sync::atomic::compiler_fence(SeqCst);
    let tool = &mut **state.tool.get();
    let answer = match tool
        .as_any_mut()
        .and_then(|a| a.downcast_mut::<CountThread>())
    {
        Some(part) if part.running() => f(Part::Running(part)),
        Some(_) => f(Part::NoThread),
        None => f(Part::OtherTool),
    };
    gate::leave_runtime(state);
    answer
}

const _: symbols::CountPrepare = __kage_count_prepare;

/// A function of module `m` starts, and the inline checks failed (docs/abi.md, "Count
/// instrumentation"): sets the thread up, applies a reset, makes room for one more
/// activation and, with a `frame`, closes the activations that are not its live callers.
/// Returns the thread's records of `m`'s regions.
///
/// # Safety
/// `m` points to a module table; `frame` is the calling function's
/// `llvm.addressofreturnaddress` (only compared) or null.
#[no_mangle]
pub unsafe extern "C" fn __kage_count_prepare(m: *mut Module, frame: *const c_void) -> *mut u64 {
    let slot = thread_slot();
    with_part(|part| match part {
        Part::Running(part) => part.prepare(m, frame as usize),
        Part::Busy if slot.records.load(Relaxed) != no_directory() && (*m).slot != 0 => {
            // Inside the runtime's own work on this thread: records straight from the
            // kernel, no repair, no reset; kept for the report, not published (the next
            // entry asks again).
            reserve(slot);
            let entry = kept_entry(slot.records.load(Relaxed), (*m).slot);
            let mut p = entry.load(Acquire);
            if p.is_null() {
                p = map_zeroed(record_words(&*m).max(1) * 8) as *mut AtomicU64;
                entry.store(p, Release);
            }
            p as *mut u64
        }
        part => {
            // Counted nowhere. While another tool runs, from now on without the runtime;
            // else the next entry tries again.
            let scratch = scratch();
            let records = scratch.records(m);
            if matches!(part, Part::OtherTool) {
                if (*m).slot != 0 {
                    scratch.directory[(*m).slot as usize].store(records, Release);
                }
                slot.records
                    .store(scratch.directory.as_ptr() as *mut _, Relaxed);
            }
            reserve(slot);
            records as *mut u64
        }
    })
}

extern "C" {
    /// The calling thread's `__kage_count_running` (csrc/tls.c).
    fn kage_count_running_slot() -> *const AtomicPtr<c_void>;
}

/// A fatal signal on the calling thread (`ts`): if it was running a promoted tree (counted
/// in locals), the tree's root counts an instance (a loop with its body), so that the
/// report names the region that faulted; the counts in locals are lost. Any build may call
/// it: only count builds set the thread-local.
///
/// # Safety
/// On the calling thread, `ts` its state, from the fatal-signal path.
pub unsafe fn count_faulted_tree(ts: &ThreadState) {
    let r = (*kage_count_running_slot()).swap(std::ptr::null_mut(), Relaxed) as *const Region;
    if r.is_null() || ts.busy.get() != 0 {
        return;
    }
    let tool = &mut **ts.tool.get();
    let Some(part) = tool
        .as_any_mut()
        .and_then(|a| a.downcast_mut::<CountThread>())
    else {
        return;
    };
    part.count_left_tree(r);
}

const _: symbols::CountUnwind = __kage_count_unwind;

/// A function returns while activations above its own, `activation`, remain open: they
/// are closed.
///
/// # Safety
/// Called from count-instrumented code, on the calling thread.
#[no_mangle]
pub unsafe extern "C" fn __kage_count_unwind(activation: u32) {
    with_part(|part| match part {
        Part::Running(part) => part.close_above(activation),
        _ => forget_above(activation),
    })
}

/// Drops the activations above `activation` without closing them.
fn forget_above(activation: u32) {
    let slot = thread_slot();
    if slot.top.load(Relaxed) > activation + 1 {
        slot.top.store(activation + 1, Relaxed);
    }
}

const _: symbols::CountResume = __kage_count_resume;

/// Control may have arrived from a `longjmp` or an exception: the activations above
/// `activation` are closed, then `r` becomes its innermost region as `__kage_settle` makes
/// it.
///
/// # Safety
/// `r` points to an entry of a module table; called from count-instrumented code, on the
/// calling thread.
#[no_mangle]
pub unsafe extern "C" fn __kage_count_resume(r: *mut Region, activation: u32) {
    with_part(|part| match part {
        Part::Running(part) => {
            // Trees that a signal handler interrupted and left by `siglongjmp` to here.
            let frame = part.act(activation).frame.load(Relaxed);
            crate::handlers::take_abandoned(frame, |root| {
                part.count_left_tree(root as *const Region)
            });
            part.close_above(activation);
            if let Some(gid) = gid_of(r) {
                part.settle_in(activation, gid);
            }
        }
        _ => forget_above(activation),
    })
}

const _: symbols::CountArrive = __kage_count_arrive;

/// A block whose edges could not carry its region changes: as `__kage_loop_iter(lp)` (when
/// not null) and then `__kage_settle(r)` would.
///
/// # Safety
/// `r` and `lp` (if not null) point to entries of a module table; called from
/// count-instrumented code, on the calling thread.
#[no_mangle]
pub unsafe extern "C" fn __kage_count_arrive(r: *mut Region, lp: *mut Region, activation: u32) {
    with_part(|part| {
        if let Part::Running(part) = part {
            if let Some(gid) = gid_of(lp) {
                part.loop_iter_in(activation, gid);
            }
            if let Some(gid) = gid_of(r) {
                part.settle_in(activation, gid);
            }
        }
    })
}

pub fn make() -> &'static dyn Tool {
    Box::leak(Box::new(CountTool::new()))
}

impl Default for CountTool {
    fn default() -> Self {
        Self::new()
    }
}

impl CountTool {
    pub fn new() -> Self {
        Self::with_epoch(&RESET_EPOCH)
    }

    /// A tool whose resets bump `epoch`.
    fn with_epoch(epoch: &'static AtomicU64) -> Self {
        CountTool {
            threads: SpinLock::new(Vec::new()),
            epoch,
        }
    }

    /// The typed results (what `finish` serialises).
    pub fn collect(&self, region_count: usize) -> (Vec<CountStats>, Counters, Counters) {
        let mut regions = vec![CountStats::default(); region_count];
        let mut inclusive = vec![Inclusive::AsCounted; region_count];
        let mut totals = Counters::default();
        let mut unattributed = Counters::default();
        let epoch = self.epoch.load(Acquire);
        let threads = self.threads.lock().clone();
        for t in threads {
            // A thread that has not applied the latest reset has nothing after it yet.
            if t.retired.load(Relaxed) || t.epoch.load(Acquire) != epoch {
                continue;
            }
            let now = t.cells_now();
            totals.add(&counters(std::array::from_fn(|k| {
                now[k].wrapping_sub(t.base[k].load(Relaxed))
            })));
            unattributed.add(&counters(std::array::from_fn(|k| {
                t.outside[SELF + k].load(Relaxed)
            })));
            for slot in 1..=registry::last_slot() {
                let (Some(records), Some(module)) = (t.records(slot), registry::slot_module(slot))
                else {
                    continue;
                };
                for (i, rec) in records.records.iter().enumerate() {
                    let gid = module.base as usize + i;
                    let Some(s) = regions.get_mut(gid) else {
                        continue;
                    };
                    let counted = records.counted(i);
                    inclusive[gid] = Inclusive::of(&records.regions[i]);
                    let v: [u64; WORDS] = std::array::from_fn(|k| rec[k].load(Relaxed));
                    // An open instance counts what it did so far (in the record holding its
                    // source region's outermost one).
                    let open = counted.holds();
                    s.instances += v[INSTANCES];
                    s.exclusive
                        .add(&counters(std::array::from_fn(|k| v[SELF + k])));
                    s.inclusive.add(&counters(std::array::from_fn(|k| {
                        v[INCLUSIVE + k].wrapping_add(if open { now[k] } else { 0 })
                    })));
                }
            }
        }
        let parent_of = |gid| registry::meta(gid).map(|m| m.parent);
        derive_inclusive(&mut regions, &inclusive, parent_of);
        (regions, totals, unattributed)
    }

    /// A part counting what `cells` gain from now on, with its activations in `slot` while
    /// it runs; `running`: it is the one running on the cells' thread (a thread's own part;
    /// a context's is resumed first).
    fn new_part(
        &'static self,
        cells: &'static Cells,
        slot: &'static ThreadSlot,
        running: bool,
    ) -> Box<dyn ThreadTool> {
        let now: [u64; 4] = std::array::from_fn(|k| cells[k].load(Relaxed));
        let c: &'static ThreadCounts = Box::leak(Box::new(ThreadCounts {
            epoch: AtomicU64::new(self.epoch.load(Acquire)),
            retired: AtomicBool::new(false),
            directory: new_directory(),
            outside: Default::default(),
            // A context starts from zero cells when it first runs.
            base: std::array::from_fn(|k| AtomicU64::new(if running { now[k] } else { 0 })),
            live: AtomicPtr::new(std::ptr::null_mut()),
            saved: std::array::from_fn(|k| AtomicU64::new(if running { now[k] } else { 0 })),
            acts: AtomicPtr::new(std::ptr::null_mut()),
            top: AtomicU32::new(0),
            cap: AtomicU32::new(0),
        }));
        self.threads.lock().push(c);
        let mut part = Box::new(CountThread {
            c,
            epoch: self.epoch,
            cells,
            slot,
        });
        if running {
            part.start_running();
        }
        part
    }
}

/// The inclusive counts the inline code leaves to the report: a region kept in locals (a
/// promoted tree's, docs/abi.md) adds none to its record, and its inclusive counts are its
/// self counts plus those of the regions below it (nothing in a tree calls out), plus the
/// correction its record holds (minus what its instances made inside another copy of its
/// source region, which counts them). Derived so as `how` says ([`Inclusive`]), children
/// first (a child's global id is above its parent's); `parent_of` gives a region's
/// parent's global id ([`NONE`]: none).
fn derive_inclusive(
    regions: &mut [CountStats],
    how: &[Inclusive],
    parent_of: impl Fn(u32) -> Option<u32>,
) {
    // Per region, the self counts of the regions below it.
    let mut below = vec![[0u64; 4]; regions.len()];
    for gid in (0..regions.len()).rev() {
        let s = &mut regions[gid];
        let counted = [
            s.inclusive.loads,
            s.inclusive.stores,
            s.inclusive.bytes_read,
            s.inclusive.bytes_written,
        ];
        let own = [
            s.exclusive.loads,
            s.exclusive.stores,
            s.exclusive.bytes_read,
            s.exclusive.bytes_written,
        ];
        let subtree: [u64; 4] = std::array::from_fn(|k| own[k] + below[gid][k]);
        if how.get(gid) == Some(&Inclusive::Derived) {
            s.inclusive = counters(std::array::from_fn(|k| subtree[k].wrapping_add(counted[k])));
        }
        let parent = parent_of(gid as u32).filter(|&p| p != NONE && (p as usize) < gid);
        if let Some(p) = parent {
            for k in 0..4 {
                below[p as usize][k] += subtree[k];
            }
        }
    }
}

fn counters(a: [u64; 4]) -> Counters {
    Counters {
        loads: a[LOADS],
        stores: a[STORES],
        bytes_read: a[BYTES_READ],
        bytes_written: a[BYTES_WRITTEN],
    }
}

impl Tool for CountTool {
    fn name(&self) -> &'static str {
        "count"
    }

    fn new_thread(&'static self) -> Box<dyn ThreadTool> {
        // SAFETY: the calling thread's thread-locals, which live as long as it (the part's
        // owner).
        let cells = unsafe { &*(kage_count_slot() as *const Cells) };
        self.new_part(cells, thread_slot(), true)
    }

    fn new_context(&'static self) -> Box<dyn ThreadTool> {
        // SAFETY: as for `new_thread`: the context runs on the calling thread.
        let cells = unsafe { &*(kage_count_slot() as *const Cells) };
        self.new_part(cells, thread_slot(), false)
    }

    /// The epoch bumped, then every part's published records emptied: each thread's next
    /// entry of each module takes the runtime's path, which applies the reset (its records
    /// in registers until then count on, as before a reset). Sequentially consistent with
    /// the publishing in [`CountThread::prepare`].
    fn reset(&self) {
        self.epoch.fetch_add(1, SeqCst);
        let last = registry::last_slot();
        for t in self.threads.lock().iter() {
            for slot in 1..=last {
                if let Some(entry) = t.published(slot) {
                    entry.store(std::ptr::null_mut(), SeqCst);
                }
            }
        }
    }

    fn fork_child(&self) {
        for t in self.threads.lock().iter() {
            t.retired.store(true, Relaxed);
        }
    }

    fn finish(&self, region_count: usize) -> ToolResults {
        let (regions, totals, unattributed) = self.collect(region_count);
        let mut top = Map::new();
        top.insert("totals".into(), Value::Object(to_map(totals)));
        top.insert("unattributed".into(), Value::Object(to_map(unattributed)));
        ToolResults {
            regions: Box::new(move |id| match regions.get(id) {
                Some(&stats) => RegionMembers::Count(stats),
                None => RegionMembers::Map(Map::new()),
            }),
            top,
        }
    }
}

impl ThreadTool for CountThread {
    /// A region event of count-calls code: as the inline code opens it.
    fn enter(&mut self, region: u32) {
        self.sync_epoch();
        let (Some(entry), Some(meta), Some(rec)) = (
            registry::region_entry(region),
            registry::meta(region),
            self.record(region),
        ) else {
            return;
        };
        if meta.kind == RegionKind::Function {
            self.push(entry, usize::MAX);
        } else if self.top() > 0 {
            self.act(self.top() - 1)
                .cur
                .store(entry as *mut Region, Relaxed);
        }
        open(rec, self.now());
    }

    fn exit(&mut self, region: u32) {
        self.sync_epoch();
        let (Some(meta), Some(rec)) = (registry::meta(region), self.record(region)) else {
            return;
        };
        close(rec, self.now());
        let top = self.top();
        if meta.kind == RegionKind::Function {
            if top > 0 {
                self.slot.top.store(top - 1, Relaxed);
            }
        } else if top > 0 {
            self.set_current(top - 1, meta.parent);
        }
    }

    #[inline]
    fn access(&mut self, _addr: usize, size: u64, write: bool) {
        let (count, bytes) = if write {
            (STORES, BYTES_WRITTEN)
        } else {
            (LOADS, BYTES_READ)
        };
        bump(&self.cells[count], 1);
        bump(&self.cells[bytes], size);
        let rec = self.innermost();
        bump(&rec[SELF + count], 1);
        bump(&rec[SELF + bytes], size);
    }

    fn reset(&mut self) {
        self.sync_epoch();
    }

    fn fork_survivor(&mut self) {
        self.zero();
        let e = self.epoch.load(Acquire);
        self.c.epoch.store(e, Release);
        self.c.retired.store(false, Relaxed);
    }

    /// The thread ends (or the program): its open regions close.
    fn thread_exit(&mut self) {
        if self.running() {
            self.sync_epoch();
            let now = self.now();
            for slot in 1..=registry::last_slot() {
                let Some(module) = self.c.records(slot) else {
                    continue;
                };
                for i in 0..module.records.len() {
                    let counted = module.counted(i);
                    if counted.holds() {
                        counted.open.store(1, Relaxed);
                        close(counted, now);
                    }
                }
                for cell in module.cells {
                    cell.store(0, Relaxed);
                }
            }
            self.slot.top.store(0, Relaxed);
        }
        self.stop_running();
        if self.slot.owner.load(Relaxed).is_null() {
            lend_ended_activations(self.slot);
        }
    }

    /// The thread's cells and slot become the calling thread's: it runs on them with the
    /// counts this part saved when it stopped (its records hold no open instance).
    fn adopt(&mut self) -> bool {
        // SAFETY: the calling thread's thread-locals, which live as long as it (the part's
        // new owner).
        self.cells = unsafe { &*(kage_count_slot() as *const Cells) };
        self.slot = thread_slot();
        self.start_running();
        true
    }

    fn suspend(&mut self) {
        self.stop_running();
    }

    fn resume(&mut self) {
        self.start_running();
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kage_abi::NONE;

    const F: u32 = RegionKind::Function as u32;
    const L: u32 = RegionKind::Loop as u32;
    const B: u32 = RegionKind::LoopBody as u32;
    const I: u32 = RegionKind::Inlined as u32;

    /// A tool with a reset epoch of its own (tests run side by side).
    fn tool() -> &'static CountTool {
        let epoch = Box::leak(Box::new(AtomicU64::new(0)));
        Box::leak(Box::new(CountTool::with_epoch(epoch)))
    }

    /// A registered module of `entries` (kind, parent): its first global id.
    fn module(entries: &[(u32, u32)]) -> u32 {
        let m = registry::tests::table(entries, "count_test.c");
        unsafe { registry::register(m) };
        unsafe { (*(*m).regions).global_id }
    }

    /// A part with cells and a thread slot of its own, as a thread of its own would have,
    /// with the cells it counts.
    fn thread(tool: &'static CountTool) -> (Box<dyn ThreadTool>, &'static Cells) {
        let cells: &'static Cells = Box::leak(Box::new(Cells::default()));
        (
            tool.new_part(cells, Box::leak(Box::new(empty_slot())), true),
            cells,
        )
    }

    fn empty_slot() -> ThreadSlot {
        ThreadSlot {
            records: AtomicPtr::new(no_directory()),
            acts: AtomicPtr::new(std::ptr::null_mut()),
            top: AtomicU32::new(0),
            cap: AtomicU32::new(0),
            owner: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn part(t: &mut Box<dyn ThreadTool>) -> &mut CountThread {
        t.as_any_mut()
            .unwrap()
            .downcast_mut::<CountThread>()
            .unwrap()
    }

    fn c(loads: u64, stores: u64, br: u64, bw: u64) -> Counters {
        Counters {
            loads,
            stores,
            bytes_read: br,
            bytes_written: bw,
        }
    }

    fn ld(t: &mut dyn ThreadTool, n: u64, size: u64) {
        for _ in 0..n {
            t.access(0x1000, size, false);
        }
    }

    fn st(t: &mut dyn ThreadTool, n: u64, size: u64) {
        for _ in 0..n {
            t.access(0x2000, size, true);
        }
    }

    /// The statistics of the regions `base..base + n`.
    fn stats(tool: &CountTool, base: u32, n: u32) -> (Vec<CountStats>, Counters, Counters) {
        let (regions, totals, unattributed) = tool.collect((base + n) as usize);
        (regions[base as usize..].to_vec(), totals, unattributed)
    }

    fn check_invariant(regions: &[CountStats], totals: Counters, un: Counters) {
        let mut sum = un;
        for r in regions {
            sum.add(&r.exclusive);
        }
        assert_eq!(sum, totals, "totals = sum of self + unattributed");
    }

    /// Region events of count-calls code: a function (0) with a loop (1, body 2) whose body
    /// calls another function (3).
    #[test]
    fn nested_inclusive_and_self() {
        let g = module(&[(F, NONE), (L, 0), (B, 1), (F, NONE)]);
        let tl = tool();
        let (mut t, _) = thread(tl);
        ld(&mut *t, 1, 8); // unattributed
        t.enter(g); // main
        ld(&mut *t, 2, 4);
        t.enter(g + 1); // loop
        t.enter(g + 2); // body
        st(&mut *t, 3, 4);
        t.enter(g + 3); // callee
        ld(&mut *t, 5, 4);
        st(&mut *t, 1, 100);
        t.exit(g + 3);
        t.exit(g + 2);
        t.enter(g + 2);
        ld(&mut *t, 1, 2);
        t.exit(g + 2);
        t.exit(g + 1);
        t.exit(g);
        st(&mut *t, 1, 1); // unattributed
        let (r, tot, un) = stats(tl, g, 4);
        assert_eq!(r[0].instances, 1);
        assert_eq!(r[0].inclusive, c(8, 4, 8 + 20 + 2, 12 + 100));
        assert_eq!(r[0].exclusive, c(2, 0, 8, 0));
        assert_eq!(r[1].instances, 1);
        assert_eq!(r[1].inclusive, c(6, 4, 22, 112));
        assert_eq!(r[1].exclusive, Counters::default());
        assert_eq!(r[2].instances, 2);
        assert_eq!(r[2].inclusive, c(6, 4, 22, 112));
        assert_eq!(r[2].exclusive, c(1, 3, 2, 12));
        assert_eq!(r[3].inclusive, c(5, 1, 20, 100));
        assert_eq!(r[3].exclusive, c(5, 1, 20, 100));
        assert_eq!(tot, c(9, 5, 38, 113));
        assert_eq!(un, c(1, 1, 8, 1));
        check_invariant(&r, tot, un);
    }

    #[test]
    fn recursion_counts_outermost_only() {
        let g = module(&[(F, NONE)]);
        let tl = tool();
        let (mut t, _) = thread(tl);
        // rec(3): each level loads 4 bytes once, then recurses.
        for _ in 0..3 {
            t.enter(g);
            ld(&mut *t, 1, 4);
        }
        for _ in 0..3 {
            t.exit(g);
        }
        t.enter(g);
        ld(&mut *t, 2, 4);
        t.exit(g);
        let (r, tot, un) = stats(tl, g, 1);
        assert_eq!(r[0].instances, 4);
        assert_eq!(r[0].inclusive, c(5, 0, 20, 0));
        assert_eq!(r[0].exclusive, c(5, 0, 20, 0));
        check_invariant(&r, tot, un);
    }

    /// A module of `main` (0) with a copy of `step` inlined (1), and `run` (2) with another
    /// (3), both copies sharing source cell 0 (as the pass numbers them): its first global id.
    fn module_with_copies() -> u32 {
        let m = registry::tests::table(&[(F, NONE), (I, 0), (F, NONE), (I, 2)], "copies.c");
        // SAFETY: the test's own table, not registered yet.
        unsafe {
            let regions = (*m).regions;
            (*regions.add(3)).name = (*regions.add(1)).name;
            (*regions.add(3)).symbol = (*regions.add(1)).symbol;
            (*regions.add(3)).first_line = (*regions.add(1)).first_line;
            (*regions.add(1)).source_cell = 0;
            (*regions.add(3)).source_cell = 0;
            (*m).source_cells = 1;
            registry::register(m);
            (*regions).global_id
        }
    }

    /// Recursion through two copies of one source region (step inlined into main and into
    /// run, which step calls): each instance counts once, in the copy whose instance is the
    /// outermost of the source region, so the copies' sum is the source region's; open
    /// instances count what they did so far, and a reset while they are open gives their
    /// instances to the copy that holds them.
    #[test]
    fn recursion_through_copies_counts_once_per_source_region() {
        let g = module_with_copies();
        let (main, step_in_main, run, step_in_run) = (g, g + 1, g + 2, g + 3);
        assert_eq!(
            registry::source_of(step_in_run),
            registry::source_of(step_in_main)
        );
        let tl = tool();
        let (mut t, _) = thread(tl);
        t.enter(main);
        t.enter(step_in_main);
        ld(&mut *t, 1, 4);
        for _ in 0..2 {
            t.enter(run);
            t.enter(step_in_run);
            ld(&mut *t, 1, 4);
        }
        let (r, _, _) = stats(tl, g, 4);
        assert_eq!(r[1].inclusive, c(3, 0, 12, 0), "the open outer copy so far");
        assert_eq!(r[3].inclusive, c(0, 0, 0, 0), "nested in the outer copy");
        part(&mut t).zero();
        let (r, _, _) = stats(tl, g, 4);
        assert_eq!(
            (r[1].instances, r[3].instances),
            (3, 0),
            "open, held by the outer copy"
        );
        ld(&mut *t, 1, 4);
        for _ in 0..2 {
            t.exit(step_in_run);
            t.exit(run);
            st(&mut *t, 1, 8);
        }
        t.exit(step_in_main);
        t.exit(main);
        let (r, tot, un) = stats(tl, g, 4);
        assert_eq!(r[1].inclusive, c(1, 2, 4, 16));
        assert_eq!(r[3].inclusive, c(0, 0, 0, 0));
        assert_eq!(
            r[2].inclusive,
            c(1, 1, 4, 8),
            "run, outermost instance after the reset"
        );
        assert_eq!((r[1].instances, r[3].instances), (3, 0));
        check_invariant(&r, tot, un);
        // Another call of run from outside step: its copy is the outermost now.
        t.enter(main);
        t.enter(run);
        t.enter(step_in_run);
        ld(&mut *t, 2, 4);
        t.exit(step_in_run);
        t.exit(run);
        t.exit(main);
        let (r, _, _) = stats(tl, g, 4);
        assert_eq!(r[3].inclusive, c(2, 0, 8, 0));
        assert_eq!((r[1].instances, r[3].instances), (3, 1));
    }

    /// A live thread's open instances count what they did so far.
    #[test]
    fn threads_sum_and_live_threads_are_read() {
        let g = module(&[(F, NONE)]);
        let tl = tool();
        let (mut a, _) = thread(tl);
        let (mut b, _) = thread(tl);
        a.enter(g);
        ld(&mut *a, 10, 4);
        a.exit(g);
        b.enter(g);
        st(&mut *b, 7, 8);
        let (r, tot, un) = stats(tl, g, 1);
        assert_eq!(r[0].instances, 2);
        assert_eq!(r[0].exclusive, c(10, 7, 40, 56));
        assert_eq!(r[0].inclusive, c(10, 7, 40, 56), "b's open instance so far");
        assert_eq!(tot, c(10, 7, 40, 56));
        check_invariant(&r, tot, un);
        b.exit(g);
        assert_eq!(stats(tl, g, 1).0[0].inclusive, c(10, 7, 40, 56));
    }

    #[test]
    fn reset_and_fork() {
        let g = module(&[(F, NONE), (F, NONE)]);
        let tl = tool();
        let (mut a, _) = thread(tl);
        let (mut b, _) = thread(tl);
        a.enter(g);
        ld(&mut *a, 10, 4);
        b.enter(g + 1);
        ld(&mut *b, 3, 4);
        tl.reset();
        a.reset(); // the caller applies it now
        ld(&mut *a, 1, 4);
        a.exit(g);
        // b has not seen the reset yet: it contributes nothing.
        let (r, tot, _) = stats(tl, g, 2);
        assert_eq!(r[0].instances, 1, "open at the reset: one instance");
        assert_eq!(r[0].inclusive, c(1, 0, 4, 0));
        assert_eq!(tot, c(1, 0, 4, 0));
        b.exit(g + 1); // applies the reset, then closes with zero
        st(&mut *b, 1, 2);
        let (r, tot, un) = stats(tl, g, 2);
        assert_eq!(r[1].inclusive, Counters::default());
        assert_eq!(un, c(0, 1, 0, 2));
        check_invariant(&r, tot, un);
        // Fork: a survives, b is gone.
        a.enter(g);
        ld(&mut *a, 2, 4);
        tl.fork_child();
        a.fork_survivor();
        ld(&mut *a, 3, 1);
        a.exit(g);
        let (r, tot, un) = stats(tl, g, 2);
        assert_eq!(tot, c(3, 0, 3, 0));
        assert_eq!(r[0].inclusive, c(3, 0, 3, 0));
        assert_eq!(r[0].instances, 1);
        assert_eq!(un, Counters::default());
    }

    /// What count instrumentation does inline for a segment: its counts added to the cells
    /// and to its region's self counts.
    fn segment(part: &CountThread, gid: u32, add: [u64; 4]) {
        let rec = part.record(gid).unwrap().rec;
        for k in 0..4 {
            bump(&part.cells[k], add[k]);
            bump(&rec[SELF + k], add[k]);
        }
    }

    /// What a function's entry does inline: its activation pushed and its region opened.
    fn enter_inline(part: &CountThread, gid: u32, frame: usize) -> u32 {
        let i = part.top();
        part.push(registry::region_entry(gid).unwrap(), frame);
        open(part.record(gid).unwrap(), part.now());
        i
    }

    /// Coroutine contexts on one thread: each part counts its own accesses (the cells are
    /// switched with the part that runs), and one that ends without switching back stops
    /// when the other resumes.
    #[test]
    fn contexts_sharing_a_thread_count_their_own() {
        let g = module(&[(F, NONE), (F, NONE)]);
        let tl = tool();
        let cells: &'static Cells = Box::leak(Box::new(Cells::default()));
        let slot: &'static ThreadSlot = Box::leak(Box::new(empty_slot()));
        let mut main = tl.new_part(cells, slot, true);
        let mut coroutine = tl.new_part(cells, slot, false);
        enter_inline(part(&mut main), g, 1000);
        segment(part(&mut main), g, [2, 1, 8, 4]);
        let (r, tot, _) = stats(tl, g, 2);
        assert_eq!((r[0].exclusive, tot), (c(2, 1, 8, 4), c(2, 1, 8, 4)));
        // swapcontext: main is suspended, the coroutine runs on the same thread.
        main.suspend();
        coroutine.resume();
        enter_inline(part(&mut coroutine), g + 1, 500);
        segment(part(&mut coroutine), g + 1, [1, 0, 4, 0]);
        assert_eq!(stats(tl, g, 2).0[1].inclusive, c(1, 0, 4, 0));
        // The coroutine ends without switching back: main resumes.
        main.resume();
        segment(part(&mut main), g, [0, 3, 0, 12]);
        main.thread_exit();
        let (r, tot, un) = stats(tl, g, 2);
        assert_eq!(r[0].inclusive, c(2, 4, 8, 16), "main's own accesses");
        assert_eq!(r[1].inclusive, c(1, 0, 4, 0));
        assert_eq!(tot, c(3, 4, 12, 16));
        check_invariant(&r, tot, un);
    }

    /// The runtime's repairs of what instrumented code keeps inline: activations left dead
    /// by a longjmp are closed at the next entry (`prepare`) or resume point, and a resume
    /// point settles its activation into its region.
    #[test]
    fn dead_activations_are_closed_and_resume_points_settle() {
        // 0 main, 1 its loop, 2 body; 3 jumper with 4 an inlined call in it.
        let g = module(&[(F, NONE), (L, 0), (B, 1), (F, NONE), (I, 3)]);
        let tl = tool();
        let (mut t, _) = thread(tl);
        let p = part(&mut t);
        let main = enter_inline(p, g, 1000);
        p.loop_iter_in(main, g + 1);
        let jumper = enter_inline(p, g + 3, 900);
        p.settle_in(jumper, g + 4);
        assert_eq!(p.current(jumper), Some(g + 4));
        segment(p, g + 4, [1, 0, 8, 0]);
        // longjmp back to main's body: jumper's activation is dead.
        p.close_above(main);
        p.settle_in(main, g + 2);
        assert_eq!(p.top(), 1);
        p.loop_iter_in(main, g + 1); // a second iteration
                                     // A call at the depth jumper had: the dead frame check of a function's entry.
        let again = enter_inline(p, g + 3, 900);
        let module = unsafe { (*registry::region_entry(g).unwrap()).module };
        unsafe { p.prepare(module, 900) };
        assert_eq!(p.top(), again, "the activation at the same frame is dead");
        p.close_above(main - 1);
        p.slot.top.store(0, Relaxed);
        let (r, _, _) = stats(tl, g, 5);
        assert_eq!(r[2].instances, 2, "two iterations");
        assert_eq!(r[3].instances, 2);
        assert_eq!(r[4].inclusive, c(1, 0, 8, 0));
        assert_eq!(r[3].inclusive, c(1, 0, 8, 0));
        assert_eq!(r[0].inclusive, c(1, 0, 8, 0), "main is still open");
    }

    #[test]
    fn inclusive_counts_left_to_the_report_are_derived_from_self_counts() {
        let stats = |inclusive: [u64; 4], own: [u64; 4]| CountStats {
            instances: 1,
            inclusive: counters(inclusive),
            exclusive: counters(own),
        };
        // 0: a function counted in records, 1: a loop kept in locals, 2: its body, 3: an
        // inlined call in the body, 4: another function, recursive through its two inlined
        // calls 5 and 6 (5's inclusive holds 6's inner instance: the children's sum exceeds
        // the function's own, which counts the recursion once), 7, a copy of a source
        // region whose every instance ran inside another copy's (as counted: no inclusive
        // counts, though it made accesses), and 8, an inlined call kept in locals with its
        // loop 9, a copy of a source region whose instances partly ran inside another
        // copy's: 4 loads, 32 bytes of its subtree's then (its correction).
        let parents = [NONE, 0, 1, 2, NONE, 4, 4, 4, 4, 8];
        use Inclusive::{AsCounted, Derived};
        let how = [
            AsCounted, Derived, Derived, Derived, AsCounted, AsCounted, AsCounted, AsCounted,
            Derived, Derived,
        ];
        let minus = |v: [u64; 4]| v.map(u64::wrapping_neg);
        let mut regions = vec![
            stats([40, 4, 320, 32], [10, 1, 80, 8]),
            stats([0; 4], [0; 4]),
            stats([0; 4], [5, 0, 40, 0]),
            stats([0; 4], [3, 2, 24, 16]),
            stats([9, 0, 72, 0], [1, 0, 8, 0]),
            stats([8, 0, 64, 0], [2, 0, 16, 0]),
            stats([6, 0, 48, 0], [6, 0, 48, 0]),
            stats([0; 4], [2, 0, 16, 0]),
            stats(minus([4, 0, 32, 0]), [2, 0, 16, 0]),
            stats([0; 4], [4, 0, 32, 0]),
        ];
        derive_inclusive(&mut regions, &how, |gid| parents.get(gid as usize).copied());
        let inclusive: Vec<Counters> = regions.iter().map(|s| s.inclusive).collect();
        assert_eq!(
            inclusive,
            [
                counters([40, 4, 320, 32]),
                counters([8, 2, 64, 16]),
                counters([8, 2, 64, 16]),
                counters([3, 2, 24, 16]),
                counters([9, 0, 72, 0]),
                counters([8, 0, 64, 0]),
                counters([6, 0, 48, 0]),
                counters([0; 4]),
                counters([2, 0, 16, 0]),
                counters([4, 0, 32, 0]),
            ]
        );
    }
}
