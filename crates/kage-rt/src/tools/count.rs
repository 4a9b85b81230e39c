//! Tool `count`: per region, dynamic instances and the loads, stores and bytes made while it
//! was active (inclusive, callees included; a recursive region counts in its outermost
//! instance only) and while it was the innermost region (self).
//!
//! Hot path: an access adds to the thread's running totals (two owner-only relaxed
//! load+store pairs). Region events flush the totals' growth since the last event into the
//! `self` counters of the region that was innermost, and an outermost instance adds the
//! growth of the totals between its enter and exit to its inclusive counters. Everything the
//! report reads across threads is an `AtomicU64` written only by its owner thread.

use crate::chunked::{bump, Chunked};
use crate::sync::SpinLock;
use crate::tool::{ThreadTool, Tool, ToolResults};
use kage_report::{CountStats, Counters};
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};

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
// Counter order inside INCL/SELF and the totals.
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
    /// Running totals of accesses.
    tot: [AtomicU64; 4],
    /// The totals at the last flush into `self` counters.
    last: [AtomicU64; 4],
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
    open: Vec<Open>,
    /// The record of the slot `c.top`, which flushes add to.
    top_rec: &'static Record,
    /// Slot 0's record: accesses outside every region.
    outside: &'static Record,
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
            let tot: [u64; 4] = std::array::from_fn(|k| t.tot[k].load(Relaxed));
            let pending: [u64; 4] =
                std::array::from_fn(|k| tot[k].saturating_sub(t.last[k].load(Relaxed)));
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
        let c: &'static ThreadCounts = Box::leak(Box::new(ThreadCounts {
            epoch: AtomicU64::new(self.epoch.load(Acquire)),
            retired: AtomicBool::new(false),
            tot: Default::default(),
            last: Default::default(),
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
            open: Vec::with_capacity(64),
            top_rec: outside,
            outside,
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

impl CountThread {
    fn totals(&self) -> [u64; 4] {
        std::array::from_fn(|k| self.c.tot[k].load(Relaxed))
    }

    /// Moves the accesses since the last event into the innermost region's self counters
    /// (branch-free: an event costs the same whether accesses happened or not).
    #[inline(always)]
    fn flush(&mut self) {
        let rec = self.top_rec;
        for k in 0..4 {
            let t = self.c.tot[k].load(Relaxed);
            bump(&rec[SELF + k], t.wrapping_sub(self.c.last[k].load(Relaxed)));
            self.c.last[k].store(t, Relaxed);
        }
    }

    /// Applies the tool's latest reset if this thread has not yet.
    #[inline(always)]
    fn sync_epoch(&mut self) {
        let e = self.tool.epoch.load(Acquire);
        if self.c.epoch.load(Relaxed) != e {
            self.zero();
            self.c.epoch.store(e, Release);
        }
    }

    /// Zeroes every counter. Statistics start anew: each region open at this moment counts
    /// as one instance (so a forked child's `main`, entered before the fork, has one).
    fn zero(&mut self) {
        self.c.slots.zero();
        for k in 0..4 {
            self.c.tot[k].store(0, Relaxed);
            self.c.last[k].store(0, Relaxed);
        }
        for o in &mut self.open {
            if o.snapshot.is_some() {
                o.snapshot = Some([0; 4]);
            }
            bump(&o.rec[INSTANCES], 1);
            bump(&o.rec[DEPTH], 1);
        }
    }
}

impl ThreadTool for CountThread {
    fn enter(&mut self, region: u32) {
        self.sync_epoch();
        self.flush();
        let slot = region as usize + 1;
        // SAFETY: only the owner thread allocates this thread's chunks.
        let Some(rec) = (unsafe { self.c.slots.get_or_alloc(slot) }) else {
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

    #[inline]
    fn access(&mut self, _addr: usize, size: u64, write: bool) {
        let t = &self.c.tot;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> &'static CountTool {
        Box::leak(Box::new(CountTool::new()))
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
        let mut t = tl.new_thread();
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

    #[test]
    fn recursion_counts_outermost_only() {
        let tl = tool();
        let mut t = tl.new_thread();
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
        let mut a = tl.new_thread();
        let mut b = tl.new_thread();
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
        let mut a = tl.new_thread();
        let mut b = tl.new_thread();
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

    #[test]
    fn finish_json_fields() {
        let tl = tool();
        let mut t = tl.new_thread();
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
