//! Tool `count`: per region, dynamic instances and the loads, stores and bytes made while it
//! was active (inclusive, callees included; a recursive region counts in its outermost
//! instance only) and while it was the innermost region (self).
//!
//! Hot path: accesses add to the thread's `__kage_count` (docs/abi.md, "Count
//! instrumentation"): inline, a segment's constants at a time, in a count build; here, one
//! access at a time, for a count-calls build. Region events drain what it gained since the
//! last event into the thread's totals and into the `self` counters of the region that was
//! innermost, and an outermost instance adds the growth of the totals between its enter and
//! exit to its inclusive counters. Everything the report reads across threads is an
//! `AtomicU64` written only by its owner thread.

use crate::chunked::{bump, Chunked};
use crate::gate;
use crate::registry;
use crate::stack::FrameKind;
use crate::sync::SpinLock;
use crate::tool::{ThreadTool, Tool, ToolResults};
use kage_abi::{symbols, Region, RegionKind};
use kage_report::{CountStats, Counters};
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering::*};

extern "C" {
    /// The calling thread's `__kage_count` (csrc/tls.c).
    fn kage_count_slot() -> *mut AtomicU64;
}

/// A thread's `__kage_count`: loads, stores, bytes read, bytes written.
type Cells = [AtomicU64; 4];

// Record layout per slot (slot 0 = no region, slot r+1 = region r).
const INSTANCES: usize = 0;
const INCL: usize = 1;
const SELF: usize = 5;
/// Open instances of the region on the owner thread (recursion depth): owner-only, not
/// reported.
const DEPTH: usize = 9;
const W: usize = 10;

type Record = [AtomicU64; W];

/// Where counts go when no record could be allocated (never reported).
static LOST: Record = [const { AtomicU64::new(0) }; W];
// Counter order inside INCL/SELF, the totals and `__kage_count`.
const LOADS: usize = 0;
const STORES: usize = 1;
const BYTES_READ: usize = 2;
const BYTES_WRITTEN: usize = 3;

pub struct CountTool {
    epoch: AtomicU64,
    threads: SpinLock<Vec<&'static ThreadCounts>>,
}

/// One thread's statistics, readable by the report writer at any time.
struct ThreadCounts {
    /// The reset epoch these counters belong to.
    epoch: AtomicU64,
    /// The thread does not exist in this process (forked child).
    retired: AtomicBool,
    /// The part's accesses since the last reset, as of its last region event.
    tot: [AtomicU64; 4],
    /// The owner's `__kage_count` while this part runs on it (null once the thread ended, or
    /// while another coroutine context runs there): what it gained since `seen` is pending.
    inline: AtomicPtr<AtomicU64>,
    /// `__kage_count` at the last drain.
    seen: [AtomicU64; 4],
    /// The slot that receives accesses since the last flush.
    top: AtomicU32,
    slots: Chunked<W>,
}

struct Open {
    region: u32,
    /// The region's record (records never move).
    rec: &'static Record,
    /// Totals at entry, for an outermost instance of its region (recursion counts once).
    snapshot: Option<[u64; 4]>,
}

pub struct CountThread {
    tool: &'static CountTool,
    c: &'static ThreadCounts,
    /// The owner thread's `__kage_count`.
    cells: &'static Cells,
    open: Vec<Open>,
    /// The record of the slot `c.top`, which flushes add to.
    top_rec: &'static Record,
    /// Slot 0's record: accesses outside every region.
    outside: &'static Record,
}

const _: symbols::CountRegions = __kage_count_regions;

/// Whole instances of regions that count instrumentation kept in registers ran
/// (docs/abi.md, "Count instrumentation"): `r`'s subtree, the `n` table entries from `r`,
/// with a record each at `records` (instances, then the accesses not counted yet, masked by
/// the gate). A loop or inlined call `r` ran in its parent, which becomes the innermost
/// open region as at a loop's entry; a function `r` ran in the innermost open region. One
/// event instead of an entry and an exit per instance: nothing else reaches the runtime
/// while such regions run.
///
/// # Safety
/// `r` is null or points to an entry of a module table (see `__kage_register_module`)
/// followed by at least `n - 1` more; `records` points to `n` records of
/// `kage_abi::COUNT_RECORD_WORDS` words.
#[no_mangle]
pub unsafe extern "C" fn __kage_count_regions(r: *mut Region, n: u64, records: *const u64) {
    let n = n as usize;
    if n == 0 || n > kage_abi::MAX_COUNTED_REGIONS || records.is_null() {
        return;
    }
    // SAFETY: the caller passes `n` records.
    let records = std::slice::from_raw_parts(records, n * kage_abi::COUNT_RECORD_WORDS);
    gate::region_event(|stack, tool| {
        let Some(gid) = registry::global_id(r) else {
            return;
        };
        let Some(meta) = registry::meta(gid) else {
            return;
        };
        match meta.kind {
            RegionKind::Loop | RegionKind::Inlined => {
                if !stack.settle_in_parent(meta.parent, meta.func, &registry::Tree, tool) {
                    return;
                }
            }
            RegionKind::Function => {}
            RegionKind::LoopBody => return,
        }
        if let Some(count) = (tool.as_any_mut()).and_then(|part| part.downcast_mut::<CountThread>())
        {
            let parents = |i: usize| registry::meta(gid + i as u32).map(|m| m.parent);
            count.regions_ran(gid, records, parents);
        }
    });
}

extern "C" {
    /// The calling thread's `__kage_count_running` (csrc/tls.c).
    fn kage_count_running_slot() -> *const AtomicPtr<std::ffi::c_void>;
}

/// A fatal signal on the calling thread (`ts`): if it was running a subtree that count
/// instrumentation keeps in registers, that subtree's root is opened, so that the report
/// names the region that faulted (its instance; the accesses it made are lost with the
/// registers). Any build may call it: only count builds set the thread-local.
///
/// # Safety
/// On the calling thread, `ts` its state, from the fatal-signal path.
pub unsafe fn open_faulted_subtree(ts: &gate::ThreadState) {
    let r = (*kage_count_running_slot()).swap(std::ptr::null_mut(), Relaxed) as *mut Region;
    if r.is_null() {
        return;
    }
    ts.with(|stack, tool| {
        let Some(gid) = registry::global_id(r) else {
            return;
        };
        let Some(meta) = registry::meta(gid) else {
            return;
        };
        let entry = r as usize;
        match meta.kind {
            // No frame address: 0 leaves the live activations alone.
            RegionKind::Function => stack.func_enter(gid, entry, 0, tool),
            // As its header's hook would: the loop and its body (the next entry) open.
            RegionKind::Loop => {
                let tree = &registry::Tree;
                stack.loop_iter(gid, entry, gid + 1, meta.parent, meta.func, tree, tool)
            }
            RegionKind::Inlined => {
                let tree = &registry::Tree;
                stack.settle(gid, FrameKind::Inlined, entry, meta.func, tree, tool)
            }
            RegionKind::LoopBody => {}
        }
    });
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
        CountTool {
            epoch: AtomicU64::new(0),
            threads: SpinLock::new(Vec::new()),
        }
    }

    /// The typed results (what `finish` serialises).
    pub fn collect(&self, region_count: usize) -> (Vec<CountStats>, Counters, Counters) {
        let mut regions = vec![CountStats::default(); region_count];
        let mut totals = Counters::default();
        let mut unattributed = Counters::default();
        let epoch = self.epoch.load(Acquire);
        let threads = self.threads.lock().clone();
        for t in threads {
            // A thread that has not applied the latest reset has nothing after it yet.
            if t.retired.load(Relaxed) || t.epoch.load(Acquire) != epoch {
                continue;
            }
            let pending = t.pending();
            let tot: [u64; 4] =
                std::array::from_fn(|k| t.tot[k].load(Relaxed).wrapping_add(pending[k]));
            let top = t.top.load(Relaxed) as usize;
            totals.add(&counters(tot));
            let n = region_count + 1;
            t.slots.for_each(|slot, rec| {
                if slot >= n {
                    return;
                }
                let v: [u64; W] = std::array::from_fn(|k| rec[k].load(Relaxed));
                let mut own = counters([v[SELF], v[SELF + 1], v[SELF + 2], v[SELF + 3]]);
                if slot == top {
                    // Accesses since the thread's last region event (a live thread).
                    own.add(&counters(pending));
                }
                if slot == 0 {
                    unattributed.add(&own);
                } else {
                    let s = &mut regions[slot - 1];
                    s.instances += v[INSTANCES];
                    s.inclusive
                        .add(&counters([v[INCL], v[INCL + 1], v[INCL + 2], v[INCL + 3]]));
                    s.exclusive.add(&own);
                }
            });
        }
        (regions, totals, unattributed)
    }
}

impl ThreadCounts {
    /// What the owner's `__kage_count` gained since its last region event (nothing once the
    /// owner ended, or while another context runs on it: that drained it).
    fn pending(&self) -> [u64; 4] {
        let inline = self.inline.load(Acquire);
        if inline.is_null() {
            return [0; 4];
        }
        // SAFETY: non-null only while the owner lives (it clears it in `thread_exit`).
        let cells = unsafe { &*(inline as *const Cells) };
        std::array::from_fn(|k| (cells[k].load(Relaxed)).wrapping_sub(self.seen[k].load(Relaxed)))
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

fn to_map<T: serde::Serialize>(v: T) -> Map<String, Value> {
    match serde_json::to_value(v) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

impl Tool for CountTool {
    fn name(&self) -> &'static str {
        "count"
    }

    fn new_thread(&'static self) -> Box<dyn ThreadTool> {
        // SAFETY: the calling thread's cells, which live as long as it (the part's owner).
        let cells = unsafe { &*(kage_count_slot() as *const Cells) };
        self.new_part(cells, true)
    }

    fn new_context(&'static self) -> Box<dyn ThreadTool> {
        // SAFETY: as for `new_thread`: the context runs on the calling thread.
        let cells = unsafe { &*(kage_count_slot() as *const Cells) };
        self.new_part(cells, false)
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
        let (regions, totals, unattributed) = self.collect(region_count);
        let mut top = Map::new();
        top.insert("totals".into(), Value::Object(to_map(totals)));
        top.insert("unattributed".into(), Value::Object(to_map(unattributed)));
        ToolResults {
            regions: Box::new(move |id| regions.get(id).map_or_else(Map::new, to_map)),
            top,
        }
    }
}

impl CountTool {
    /// A part counting what `cells` gain from now on; `running`: it is the one running on
    /// the cells' thread (a thread's own part; a context's is resumed first).
    fn new_part(&'static self, cells: &'static Cells, running: bool) -> Box<dyn ThreadTool> {
        let inline = if running {
            cells.as_ptr() as *mut AtomicU64
        } else {
            std::ptr::null_mut()
        };
        let c: &'static ThreadCounts = Box::leak(Box::new(ThreadCounts {
            epoch: AtomicU64::new(self.epoch.load(Acquire)),
            retired: AtomicBool::new(false),
            tot: Default::default(),
            inline: AtomicPtr::new(inline),
            seen: std::array::from_fn(|k| AtomicU64::new(cells[k].load(Relaxed))),
            top: AtomicU32::new(0),
            slots: Chunked::new(),
        }));
        // SAFETY: the thread does not run yet. Slot 0 exists from the start: flushes
        // outside every region go there.
        // Out of memory already: counts outside regions are lost rather than the program.
        let outside = unsafe { c.slots.get_or_alloc(0) }.unwrap_or(&LOST);
        self.threads.lock().push(c);
        Box::new(CountThread {
            tool: self,
            c,
            cells,
            open: Vec::with_capacity(64),
            top_rec: outside,
            outside,
        })
    }
}

impl CountThread {
    fn totals(&self) -> [u64; 4] {
        std::array::from_fn(|k| self.c.tot[k].load(Relaxed))
    }

    /// Moves what `__kage_count` gained since the last event into the totals and the
    /// innermost region's self counters (branch-free: an event costs the same whether
    /// accesses happened or not). An instrumented signal handler adding to the cells meanwhile
    /// loses nothing: what it adds after a cell is read stays pending.
    #[inline(always)]
    fn flush(&mut self) {
        let rec = self.top_rec;
        for k in 0..4 {
            let now = self.cells[k].load(Relaxed);
            let gained = now.wrapping_sub(self.c.seen[k].load(Relaxed));
            self.c.seen[k].store(now, Relaxed);
            bump(&self.c.tot[k], gained);
            bump(&rec[SELF + k], gained);
        }
    }

    /// The part stops running on its cells (its thread ends, or another context runs
    /// there): what they gained is its own, and nothing more is read from them.
    fn stop_running(&mut self) {
        self.sync_epoch();
        self.flush();
        self.c.inline.store(std::ptr::null_mut(), Release);
    }

    /// Forgets what `__kage_count` gained since the last event.
    fn skip_pending(&mut self) {
        for k in 0..4 {
            self.c.seen[k].store(self.cells[k].load(Relaxed), Relaxed);
        }
    }

    /// Applies the tool's latest reset if this thread has not yet; true if it did.
    #[inline(always)]
    fn sync_epoch(&mut self) -> bool {
        let e = self.tool.epoch.load(Acquire);
        if self.c.epoch.load(Relaxed) != e {
            self.zero();
            self.c.epoch.store(e, Release);
            return true;
        }
        false
    }

    /// Zeroes every counter. Statistics start anew: each region open at this moment counts
    /// as one instance (so a forked child's `main`, entered before the fork, has one).
    fn zero(&mut self) {
        self.c.slots.zero();
        self.skip_pending();
        for k in 0..4 {
            self.c.tot[k].store(0, Relaxed);
        }
        for o in &mut self.open {
            if o.snapshot.is_some() {
                o.snapshot = Some([0; 4]);
            }
            bump(&o.rec[INSTANCES], 1);
            bump(&o.rec[DEPTH], 1);
        }
    }

    /// The record of `slot` (region `slot - 1`), allocated on first use; `None` when out of
    /// memory.
    fn record(&self, slot: usize) -> Option<&'static Record> {
        // SAFETY: only the owner thread (the caller: parts are owner-only) allocates this
        // thread's chunks.
        unsafe { self.c.slots.get_or_alloc(slot) }
    }

    /// Whole instances of the regions `first..first + n` ran in the innermost open region
    /// (`records`: `n` records of instances and accesses, which the thread's cells do not
    /// hold), a subtree in pre-order: `parent(i)` is the global id of region `first + i`'s
    /// parent. As their entries, iterations and exits would count: none of them is open
    /// below (they make no call), so a region not open below counts its subtree's accesses
    /// as inclusive. A reset while they ran counts them whole.
    fn regions_ran(&mut self, first: u32, records: &[u64], parent: impl Fn(usize) -> Option<u32>) {
        const WORDS: usize = kage_abi::COUNT_RECORD_WORDS;
        let n = records.len() / WORDS;
        if n > kage_abi::MAX_COUNTED_REGIONS {
            return;
        }
        self.sync_epoch();
        self.flush();
        // Each region's inclusive accesses: its own and its descendants', children after
        // their parents (pre-order), so summed from the last.
        let mut inclusive = [[0u64; 4]; kage_abi::MAX_COUNTED_REGIONS];
        for i in (0..n).rev() {
            let own = &records[i * WORDS + 1..(i + 1) * WORDS];
            for k in 0..4 {
                inclusive[i][k] = inclusive[i][k].wrapping_add(own[k]);
            }
            let up = parent(i)
                .and_then(|p| p.checked_sub(first))
                .map(|p| p as usize);
            if let Some(p) = up.filter(|&p| p < i) {
                for k in 0..4 {
                    inclusive[p][k] = inclusive[p][k].wrapping_add(inclusive[i][k]);
                }
            }
        }
        for i in 0..n {
            let record = &records[i * WORDS..(i + 1) * WORDS];
            if record.iter().all(|&w| w == 0) {
                continue;
            }
            let Some(rec) = self.record(first as usize + i + 1) else {
                continue;
            };
            bump(&rec[INSTANCES], record[0]);
            let outermost = rec[DEPTH].load(Relaxed) == 0;
            for k in 0..4 {
                bump(&self.c.tot[k], record[1 + k]);
                bump(&rec[SELF + k], record[1 + k]);
                if outermost {
                    bump(&rec[INCL + k], inclusive[i][k]);
                }
            }
        }
    }
}

impl ThreadTool for CountThread {
    fn enter(&mut self, region: u32) {
        self.sync_epoch();
        self.flush();
        let slot = region as usize + 1;
        let Some(rec) = self.record(slot) else {
            return;
        };
        bump(&rec[INSTANCES], 1);
        let depth = rec[DEPTH].load(Relaxed);
        rec[DEPTH].store(depth + 1, Relaxed);
        let snapshot = (depth == 0).then(|| self.totals());
        self.open.push(Open {
            region,
            rec,
            snapshot,
        });
        self.top_rec = rec;
        self.c.top.store(slot as u32, Relaxed);
    }

    fn exit(&mut self, region: u32) {
        self.sync_epoch();
        self.flush();
        // The framework guarantees balance; a mismatch (a bug) is ignored, never a panic.
        if self.open.last().map(|o| o.region) != Some(region) {
            debug_assert!(false, "unbalanced exit of region {region}");
            return;
        }
        let Some(o) = self.open.pop() else { return };
        let rec = o.rec;
        rec[DEPTH].store(rec[DEPTH].load(Relaxed).saturating_sub(1), Relaxed);
        if let Some(snap) = o.snapshot {
            let now = self.totals();
            for k in 0..4 {
                bump(&rec[INCL + k], now[k].wrapping_sub(snap[k]));
            }
        }
        let (top_rec, top) = self
            .open
            .last()
            .map_or((self.outside, 0), |o| (o.rec, o.region + 1));
        self.top_rec = top_rec;
        self.c.top.store(top, Relaxed);
    }

    fn iterations_in_bulk(&self) -> bool {
        true
    }

    /// The body's instances grow; nothing else changes: the accesses of consecutive
    /// iterations go to the same self counters, and their inclusive sum is the totals'
    /// growth from the first iteration's enter to the last one's exit.
    fn iterations(&mut self, body: u32, n: u64) {
        // Iterations from before a reset are not counted (the open body counts as one).
        if self.sync_epoch() {
            return;
        }
        if self.open.last().map(|o| o.region) == Some(body) {
            bump(&self.top_rec[INSTANCES], n);
        }
    }

    #[inline]
    fn access(&mut self, _addr: usize, size: u64, write: bool) {
        let t = self.cells;
        if write {
            bump(&t[STORES], 1);
            bump(&t[BYTES_WRITTEN], size);
        } else {
            bump(&t[LOADS], 1);
            bump(&t[BYTES_READ], size);
        }
    }

    fn reset(&mut self) {
        self.sync_epoch();
    }

    fn fork_survivor(&mut self) {
        self.zero();
        self.c.epoch.store(self.tool.epoch.load(Acquire), Release);
        self.c.retired.store(false, Relaxed);
    }

    fn thread_exit(&mut self) {
        self.stop_running();
    }

    fn suspend(&mut self) {
        self.stop_running();
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn resume(&mut self) {
        // What the cells gained meanwhile was the other contexts', drained by them.
        self.skip_pending();
        self.c
            .inline
            .store(self.cells.as_ptr() as *mut AtomicU64, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> &'static CountTool {
        Box::leak(Box::new(CountTool::new()))
    }

    /// A part with cells of its own, as a thread of its own would have.
    fn thread(tool: &'static CountTool) -> Box<dyn ThreadTool> {
        tool.new_part(Box::leak(Box::new(Cells::default())), true)
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

    fn check_invariant(regions: &[CountStats], totals: Counters, un: Counters) {
        let mut sum = un;
        for r in regions {
            sum.add(&r.exclusive);
        }
        assert_eq!(sum, totals, "totals = sum of self + unattributed");
    }

    #[test]
    fn nested_inclusive_and_self() {
        let tl = tool();
        let mut t = thread(tl);
        ld(&mut *t, 1, 8); // unattributed
        t.enter(0); // main
        ld(&mut *t, 2, 4);
        t.enter(1); // loop
        t.enter(2); // body
        st(&mut *t, 3, 4);
        t.enter(3); // callee
        ld(&mut *t, 5, 4);
        st(&mut *t, 1, 100);
        t.exit(3);
        t.exit(2);
        t.enter(2);
        ld(&mut *t, 1, 2);
        t.exit(2);
        t.exit(1);
        t.exit(0);
        st(&mut *t, 1, 1); // unattributed
        let (r, tot, un) = tl.collect(4);
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

    /// Subtrees reported whole in `main` (0) count as their entries, iterations, accesses
    /// and exits would: an inlined call (1) around a loop (2, body 3) whose body makes an
    /// inlined call (4) once, and a leaf inlined call (5).
    #[test]
    fn regions_reported_whole_count_as_their_events() {
        let (by_events, whole) = (tool(), tool());
        let mut t = thread(by_events);
        t.enter(0);
        ld(&mut *t, 1, 8);
        t.enter(1);
        ld(&mut *t, 1, 8);
        t.enter(2);
        for k in 0..3 {
            t.enter(3);
            ld(&mut *t, 1, 8);
            if k == 1 {
                t.enter(4);
                st(&mut *t, 1, 4);
                t.exit(4);
            }
            t.exit(3);
        }
        t.exit(2);
        ld(&mut *t, 1, 8);
        t.exit(1);
        t.enter(5);
        ld(&mut *t, 2, 8);
        t.exit(5);
        st(&mut *t, 1, 2);
        t.exit(0);
        let mut t = thread(whole);
        t.enter(0);
        ld(&mut *t, 1, 8);
        let count = t
            .as_any_mut()
            .unwrap()
            .downcast_mut::<CountThread>()
            .unwrap();
        let parents = [0, 1, 2, 3];
        #[rustfmt::skip]
        let records = [
            1, 2, 0, 16, 0,
            1, 0, 0, 0, 0,
            3, 3, 0, 24, 0,
            1, 0, 1, 0, 4,
        ];
        count.regions_ran(1, &records, |i| Some(parents[i]));
        count.regions_ran(5, &[1, 2, 0, 16, 0], |_| Some(0));
        st(&mut *t, 1, 2);
        t.exit(0);
        let expected = by_events.collect(6);
        assert_eq!(expected.0[1].inclusive, c(5, 1, 40, 4));
        assert_eq!(expected.0[3].instances, 3);
        assert_eq!(expected.0[3].exclusive, c(3, 0, 24, 0));
        assert_eq!(whole.collect(6), expected);
    }

    #[test]
    fn recursion_counts_outermost_only() {
        let tl = tool();
        let mut t = thread(tl);
        // rec(3): each level loads 4 bytes once, then recurses.
        for _ in 0..3 {
            t.enter(0);
            ld(&mut *t, 1, 4);
        }
        for _ in 0..3 {
            t.exit(0);
        }
        t.enter(0);
        ld(&mut *t, 2, 4);
        t.exit(0);
        let (r, tot, un) = tl.collect(1);
        assert_eq!(r[0].instances, 4);
        assert_eq!(r[0].inclusive, c(5, 0, 20, 0));
        assert_eq!(r[0].exclusive, c(5, 0, 20, 0));
        check_invariant(&r, tot, un);
    }

    #[test]
    fn threads_sum_and_live_threads_are_read() {
        let tl = tool();
        let mut a = thread(tl);
        let mut b = thread(tl);
        a.enter(0);
        ld(&mut *a, 10, 4);
        a.exit(0);
        b.enter(0);
        st(&mut *b, 7, 8);
        // b is still inside region 0: its self counts since the last event are pending.
        let (r, tot, un) = tl.collect(1);
        assert_eq!(r[0].instances, 2);
        assert_eq!(r[0].exclusive, c(10, 7, 40, 56));
        assert_eq!(
            r[0].inclusive,
            c(10, 0, 40, 0),
            "b's open instance is not closed yet"
        );
        assert_eq!(tot, c(10, 7, 40, 56));
        check_invariant(&r, tot, un);
        b.exit(0);
        assert_eq!(tl.collect(1).0[0].inclusive, c(10, 7, 40, 56));
    }

    #[test]
    fn reset_and_fork() {
        let tl = tool();
        let mut a = thread(tl);
        let mut b = thread(tl);
        a.enter(0);
        ld(&mut *a, 10, 4);
        b.enter(1);
        ld(&mut *b, 3, 4);
        tl.reset();
        a.reset(); // the caller applies it now
        ld(&mut *a, 1, 4);
        a.exit(0);
        // b has not seen the reset yet: it contributes nothing.
        let (r, tot, _) = tl.collect(2);
        assert_eq!(r[0].instances, 1, "open at the reset: one instance");
        assert_eq!(r[0].inclusive, c(1, 0, 4, 0));
        assert_eq!(tot, c(1, 0, 4, 0));
        b.exit(1); // applies the reset, then closes with zero
        st(&mut *b, 1, 2);
        let (r, tot, un) = tl.collect(2);
        assert_eq!(r[1].inclusive, Counters::default());
        assert_eq!(un, c(0, 1, 0, 2));
        check_invariant(&r, tot, un);
        // Fork: a survives, b is gone.
        a.enter(0);
        ld(&mut *a, 2, 4);
        tl.fork_child();
        a.fork_survivor();
        ld(&mut *a, 3, 1);
        a.exit(0);
        let (r, tot, un) = tl.collect(2);
        assert_eq!(tot, c(3, 0, 3, 0));
        assert_eq!(r[0].inclusive, c(3, 0, 3, 0));
        assert_eq!(r[0].instances, 1);
        assert_eq!(un, Counters::default());
    }

    /// What count instrumentation does inline: adds a segment's counts to the cells.
    fn segment(cells: &Cells, add: [u64; 4]) {
        for k in 0..4 {
            bump(&cells[k], add[k]);
        }
    }

    #[test]
    fn inline_counts_and_contexts_sharing_a_thread() {
        let tl = tool();
        let cells: &'static Cells = Box::leak(Box::new(Cells::default()));
        segment(cells, [7, 7, 7, 7]); // before the thread's first event: not its
        let mut main = tl.new_part(cells, true);
        let mut coroutine = tl.new_part(cells, false);
        main.enter(0);
        segment(cells, [2, 1, 8, 4]);
        // The live thread's pending counts are read.
        let (r, tot, _) = tl.collect(2);
        assert_eq!((r[0].exclusive, tot), (c(2, 1, 8, 4), c(2, 1, 8, 4)));
        // swapcontext: main is suspended, the coroutine runs on the same cells.
        main.suspend();
        coroutine.resume();
        coroutine.enter(1);
        segment(cells, [1, 0, 4, 0]);
        let (r, _, _) = tl.collect(2);
        assert_eq!(
            r[1].exclusive,
            c(1, 0, 4, 0),
            "pending, the coroutine's only"
        );
        coroutine.exit(1);
        coroutine.suspend();
        main.resume();
        segment(cells, [0, 3, 0, 12]);
        main.exit(0);
        let (r, tot, un) = tl.collect(2);
        assert_eq!(r[0].inclusive, c(2, 4, 8, 16), "main's own accesses");
        assert_eq!(r[1].inclusive, c(1, 0, 4, 0));
        assert_eq!(tot, c(3, 4, 12, 16));
        check_invariant(&r, tot, un);
        // The thread ends: nothing is read from its cells any more.
        main.thread_exit();
        segment(cells, [100, 100, 100, 100]);
        assert_eq!(tl.collect(2).1, c(3, 4, 12, 16));
    }

    /// Iterations counted inline come in bulk: as many instances of the innermost body, its
    /// accesses its own, the loop's inclusive counts unchanged; none from before a reset.
    #[test]
    fn iterations_in_bulk_are_instances_of_the_innermost_body() {
        let tl = tool();
        let mut t = thread(tl);
        assert!(t.iterations_in_bulk());
        t.enter(0); // the function
        t.enter(1); // its loop
        t.enter(2); // the first iteration's body
        ld(&mut *t, 3, 4);
        t.iterations(2, 9);
        ld(&mut *t, 7, 4);
        t.exit(2);
        t.exit(1);
        let (r, _, _) = tl.collect(3);
        assert_eq!(r[2].instances, 10);
        assert_eq!(
            (r[2].inclusive, r[2].exclusive),
            (c(10, 0, 40, 0), c(10, 0, 40, 0))
        );
        assert_eq!(r[1].inclusive, c(10, 0, 40, 0));
        // A reset between the iterations and the event that takes them: not counted.
        t.enter(1);
        t.enter(2);
        tl.reset();
        t.iterations(2, 5);
        t.exit(2);
        t.exit(1);
        t.exit(0);
        assert_eq!(
            tl.collect(3).0[2].instances,
            1,
            "open at the reset: one instance"
        );
    }

    #[test]
    fn finish_json_fields() {
        let tl = tool();
        let mut t = thread(tl);
        t.enter(0);
        ld(&mut *t, 1, 4);
        t.exit(0);
        let res = tl.finish(1);
        let m = &(res.regions)(0);
        for k in [
            "instances",
            "loads",
            "self_loads",
            "bytes_written",
            "self_bytes_read",
        ] {
            assert!(m.contains_key(k), "{k}");
        }
        assert_eq!(res.top["totals"]["loads"], 1);
        assert_eq!(res.top["unattributed"]["loads"], 0);
    }
}
