//! The per-thread engine of hierarchical critical path analysis (docs/hcpa.md, "The model"
//! and "The instrumentation"), in plain Rust: no C ABI, no atomics, no registry, so that it
//! is tested on its own (`tests.rs` compares it with a naive model).
//!
//! State, per thread:
//! - a stack of every open level (region instance). The first `max_depth` are *analysed*:
//!   each has a version (one counter, increasing inwards), the work clock at its start,
//!   its critical path and its children's work and critical paths. Deeper levels only keep
//!   what the structure needs (their frame), and are counted as skipped.
//! - the work clock: the work done so far on this thread. An instance's work is the clock's
//!   growth between its enter and exit, so `work(cost)` is one addition whatever the depth.
//! - shadow registers: a stack of frames, one per function activation that called
//!   `frame`, owned by the level that was innermost then (the function's own) and dropped
//!   when it exits. A slot is the version of the innermost analysed level at its last write
//!   plus one time per analysed level then open; at a read, the levels whose version is
//!   greater than the slot's read 0 (Skadu's SlimTV: versions increase inwards, so the
//!   valid levels are a prefix).
//! - pending calls: a stack of `call`s tagged with the depth they were made at, holding
//!   their argument times and, once the callee has returned, its returned time.
//! - memory: one time per analysed level for each granule, in a vector shadow memory
//!   (`kage_vsm`) entered and exited in lockstep with the analysed levels, so a granule
//!   stored to before a level's instance started reads 0 there.
//!
//! Every computed time raises the critical path of every analysed level. Nothing here
//! panics on bad input: unknown slots read 0 and are not written, unbalanced exits are
//! ignored.

use kage_abi::{Candidate, NONE};
use kage_vsm::{max_valid_level, AnyVsm, Config, Granularity, VectorShadow, VersionStack, VsmKind};

/// The deepest `max_depth` the engine accepts.
pub const MAX_DEPTH_LIMIT: usize = 1024;
/// Slots beyond this many in one frame are ignored (a bad `slots` argument must not
/// allocate gigabytes).
pub const MAX_SLOTS: u32 = 1 << 20;
/// Argument indices from this one on are ignored.
pub const MAX_ARGS: u32 = 1 << 12;
/// Pending calls kept at most; beyond, the stack is emptied (only lost `result`s could fill
/// it).
const MAX_PENDING: usize = 1 << 16;
/// Levels a new frame has room for beyond the current depth (a function's loops and
/// bodies); deeper writes re-lay the frame out.
const HEADROOM: usize = 4;
const NO_FRAME: u32 = u32::MAX;

/// What a level is to the shadow registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LevelKind {
    /// A function: a new activation, whose `frame` call makes its shadow registers.
    Function,
    /// A loop, a loop body or an inlined call: it shares its parent's frame.
    Nested,
}

/// What the engine is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Levels analysed (1..=[`MAX_DEPTH_LIMIT`]); deeper ones are skipped.
    pub max_depth: usize,
    /// log2 of the granule's bytes (0, 2 or 3).
    pub granule_shift: u32,
    /// The vector shadow memory that keeps the granules' times.
    pub vsm: VsmKind,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_depth: 64,
            granule_shift: 2,
            vsm: VsmKind::Gc,
        }
    }
}

/// An analysed instance, at its exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceStats {
    pub region: u32,
    /// The region of the level directly outside; `None` for a root instance.
    pub parent: Option<u32>,
    /// Its level (0: a root instance).
    pub depth: usize,
    pub work: u64,
    pub critical_path: u64,
    /// The analysed children's work and critical paths, summed.
    pub children_work: u64,
    pub children_cp: u64,
}

impl InstanceStats {
    /// `work − Σ work(children)`.
    pub fn self_work(&self) -> u64 {
        self.work.saturating_sub(self.children_work)
    }

    /// `(self_work + Σ cp(children)) / cp`, 1 when cp is 0, and at least 1 (the model
    /// gives at least 1 for consistent instrumentation; a lower value, from costs the
    /// instrumentation folded across instances, would make `work / SP` exceed the work).
    pub fn self_parallelism(&self) -> f64 {
        if self.critical_path == 0 {
            return 1.0;
        }
        let serial = self.self_work().saturating_add(self.children_cp);
        (serial as f64 / self.critical_path as f64).max(1.0)
    }
}

#[derive(Debug, Clone, Copy)]
struct Level {
    region: u32,
    kind: LevelKind,
    /// Index in `frames` of the activation's frame; `NO_FRAME` when it has none.
    frame: u32,
    /// This level made that frame (and drops it at its exit).
    owns_frame: bool,
}

/// An analysed level's own statistics (its critical path is in `Engine::cps`, which every
/// time raises).
#[derive(Debug, Clone, Copy)]
struct Analysed {
    start: u64,
    children_work: u64,
    children_cp: u64,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    /// First slot's index in `slot_versions`.
    slots_base: usize,
    /// First slot's times in `slot_times`.
    times_base: usize,
    slots: u32,
    /// Times per slot.
    stride: u32,
    /// The pending call this activation consumed (index, serial): where `ret` goes.
    call: Option<(usize, u64)>,
}

impl Frame {
    fn versions_end(&self) -> usize {
        self.slots_base + self.slots as usize
    }
    fn times_end(&self) -> usize {
        self.times_base + self.slots as usize * self.stride as usize
    }
}

/// A `call` whose `result` has not come yet. Its vectors live in `Engine::call_times` from
/// `base`: the returned time, then one per argument, each a version word and `width` times
/// (a value like a slot: the innermost analysed version when it was written, 0 while
/// unset).
#[derive(Debug, Clone, Copy)]
struct PendingCall {
    callee: usize,
    /// Open levels when it was made.
    depth: usize,
    /// Analysed levels then: the length of its vectors.
    width: usize,
    base: usize,
    args: u32,
    /// An instrumented function matching `callee` made its frame from it.
    consumed: bool,
    serial: u64,
}

impl PendingCall {
    fn block(&self) -> usize {
        1 + self.width
    }
    fn end(&self) -> usize {
        self.base + (1 + self.args as usize) * self.block()
    }
    fn arg_at(&self, index: usize) -> usize {
        self.base + (1 + index) * self.block()
    }
}

/// Granule times in a vector shadow memory.
struct TimeMemory {
    vsm: AnyVsm<u64>,
    kind: VsmKind,
    shift: u32,
    /// A granule's vector, as read.
    read: Vec<u64>,
}

impl TimeMemory {
    fn new(kind: VsmKind, shift: u32) -> Self {
        TimeMemory {
            vsm: AnyVsm::new(kind, &Self::config(shift)),
            kind,
            shift,
            read: Vec::new(),
        }
    }

    /// HCPA's sizes (`Config::hcpa`, §6.2) over granules: the engine shifts addresses
    /// itself (a granule may be 4 bytes, which `Granularity` has not), so the shadow's units
    /// are granules. Tag tables cover 4 KiB of address space, segment tables 64 MiB, the
    /// uncompressed list 4 MiB; the VCache has `Config::hcpa`'s number of lines.
    fn config(shift: u32) -> Config {
        let hcpa = Config::hcpa();
        Config {
            vcache_lines: hcpa.vcache_lines,
            ..Config::from_spans(
                Granularity::Byte,
                (4 << 10) >> shift,
                (64 << 20) >> shift,
                1,
                (4 << 20) >> shift,
            )
        }
    }

    /// The granules of `size` > 0 bytes at `addr`.
    fn granules(&self, addr: u64, size: u64) -> std::ops::RangeInclusive<u64> {
        let last = addr.saturating_add(size - 1);
        (addr >> self.shift)..=(last >> self.shift)
    }

    /// `t[ℓ] = max(t[ℓ], time of any granule of the range at ℓ)`; `t` has a time per
    /// analysed level (the shadow's depth).
    fn max_into(&mut self, addr: u64, size: u64, t: &mut [u64]) {
        for g in self.granules(addr, size) {
            self.vsm.read(g, &mut self.read);
            for (tl, &m) in t.iter_mut().zip(&self.read) {
                *tl = (*tl).max(m);
            }
        }
    }

    /// Every granule of the range gets the times `t` (a store overwrites).
    fn store(&mut self, addr: u64, size: u64, t: &[u64]) {
        for g in self.granules(addr, size) {
            self.vsm.write_levels(g, t);
        }
    }

    /// A fresh shadow with `depth` levels entered.
    fn renew(&mut self, depth: usize) {
        self.vsm = AnyVsm::new(self.kind, &Self::config(self.shift));
        for _ in 0..depth {
            self.vsm.enter();
        }
    }
}

/// One thread's HCPA state; see the module docs.
pub struct Engine {
    config: EngineConfig,
    levels: Vec<Level>,
    /// One per analysed level: `min(levels.len(), max_depth)`.
    analysed: Vec<Analysed>,
    cps: Vec<u64>,
    versions: VersionStack,
    clock: u64,
    skipped: u64,
    frames: Vec<Frame>,
    /// Slot versions and times; only the part up to the top frame's end is in use (the
    /// rest is kept to avoid reallocating).
    slot_versions: Vec<u64>,
    slot_times: Vec<u64>,
    pending: Vec<PendingCall>,
    call_times: Vec<u64>,
    next_serial: u64,
    memory: TimeMemory,
    /// The time being computed, one per analysed level (`max_depth` long).
    t: Vec<u64>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Self {
        let config = EngineConfig {
            max_depth: config.max_depth.clamp(1, MAX_DEPTH_LIMIT),
            granule_shift: config.granule_shift.min(3),
            ..config
        };
        Engine {
            config,
            levels: Vec::with_capacity(64),
            analysed: Vec::with_capacity(64),
            cps: Vec::with_capacity(64),
            versions: VersionStack::new(),
            clock: 0,
            skipped: 0,
            frames: Vec::with_capacity(64),
            slot_versions: Vec::new(),
            slot_times: Vec::new(),
            pending: Vec::with_capacity(16),
            call_times: Vec::new(),
            next_serial: 1,
            memory: TimeMemory::new(config.vsm, config.granule_shift.min(3)),
            t: vec![0; config.max_depth.clamp(1, MAX_DEPTH_LIMIT)],
        }
    }

    pub fn config(&self) -> EngineConfig {
        self.config
    }

    /// Open levels, analysed or not.
    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    /// Open analysed levels.
    pub fn analysed_depth(&self) -> usize {
        self.analysed.len()
    }

    /// The innermost open region.
    pub fn innermost_region(&self) -> Option<u32> {
        self.levels.last().map(|l| l.region)
    }

    /// The regions of the open analysed levels, outermost first.
    pub fn analysed_regions(&self) -> impl Iterator<Item = u32> + '_ {
        self.levels[..self.analysed.len()].iter().map(|l| l.region)
    }

    /// The work done on this thread so far.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Instances entered deeper than `max_depth`.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The time the last timestamp call computed, one per analysed level (tests).
    #[cfg(test)]
    pub fn last_time(&self) -> &[u64] {
        &self.t[..self.analysed.len()]
    }

    /// The vector shadow memory's exact heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.memory.vsm.heap_bytes()
    }

    /// A region instance starts. True when its level is analysed.
    pub fn enter(&mut self, region: u32, kind: LevelKind) -> bool {
        let frame = match kind {
            LevelKind::Function => NO_FRAME,
            LevelKind::Nested => self.levels.last().map_or(NO_FRAME, |l| l.frame),
        };
        let analysed = self.levels.len() < self.config.max_depth;
        if analysed {
            self.versions.enter();
            self.memory.vsm.enter();
            self.analysed.push(Analysed {
                start: self.clock,
                children_work: 0,
                children_cp: 0,
            });
            self.cps.push(0);
        } else {
            self.skipped += 1;
        }
        self.levels.push(Level {
            region,
            kind,
            frame,
            owns_frame: false,
        });
        analysed
    }

    /// The innermost instance ends: its statistics when it was analysed.
    pub fn exit(&mut self) -> Option<InstanceStats> {
        let level = self.levels.pop()?;
        if level.owns_frame {
            self.frames.truncate(level.frame as usize);
        }
        let depth = self.levels.len();
        if depth >= self.analysed.len() {
            return None;
        }
        let own = self.analysed.pop()?;
        let cp = self.cps.pop().unwrap_or(0);
        self.versions.exit();
        self.memory.vsm.exit();
        let work = self.clock.saturating_sub(own.start);
        if let Some(parent) = self.analysed.last_mut() {
            parent.children_work = parent.children_work.saturating_add(work);
            parent.children_cp = parent.children_cp.saturating_add(cp);
        }
        Some(InstanceStats {
            region: level.region,
            parent: self.levels.last().map(|p| p.region),
            depth,
            work,
            critical_path: cp,
            children_work: own.children_work,
            children_cp: own.children_cp,
        })
    }

    /// Statistics and times start anew (a reset, a forked child): every open level is as if
    /// entered now (new versions, so every time recorded before reads 0; work and critical
    /// paths from 0), memory forgets every time.
    pub fn restart(&mut self) {
        let depth = self.analysed.len();
        for a in &mut self.analysed {
            *a = Analysed {
                start: self.clock,
                children_work: 0,
                children_cp: 0,
            };
        }
        self.cps.fill(0);
        for _ in 0..depth {
            self.versions.exit();
        }
        for _ in 0..depth {
            self.versions.enter();
        }
        self.memory.renew(depth);
        self.skipped = 0;
    }

    /// Frees the shadow memory (the thread has ended, every level exited).
    pub fn release(&mut self) {
        self.memory.renew(self.analysed.len());
        self.slot_versions = Vec::new();
        self.slot_times = Vec::new();
        self.call_times = Vec::new();
    }

    /// `__kage_hcpa_work`: `cost` added to the work of every open level.
    #[inline]
    pub fn work(&mut self, cost: u64) {
        self.clock = self.clock.saturating_add(cost);
    }

    /// `__kage_hcpa_frame`: the innermost level, a function without a frame yet, gets
    /// `slots` shadow registers, every one reading 0; when the innermost pending call was
    /// made to `function` by the level just outside, its argument times fill slots `0..`
    /// (valid at the caller's levels only: at the callee's own they read 0).
    pub fn frame(&mut self, slots: u32, function: usize) {
        let depth = self.levels.len();
        let Some(top) = self.levels.last() else {
            return;
        };
        if top.kind != LevelKind::Function || top.owns_frame {
            return;
        }
        let slots = slots.min(MAX_SLOTS);
        let stride = (self.analysed.len() + HEADROOM).min(self.config.max_depth);
        let (slots_base, times_base) = self
            .frames
            .last()
            .map_or((0, 0), |f| (f.versions_end(), f.times_end()));
        let mut frame = Frame {
            slots_base,
            times_base,
            slots,
            stride: stride as u32,
            call: None,
        };
        grow_to(&mut self.slot_versions, frame.versions_end());
        grow_to(&mut self.slot_times, frame.times_end());
        self.slot_versions[slots_base..frame.versions_end()].fill(0);
        if let Some(index) = self.pending.len().checked_sub(1) {
            let p = &mut self.pending[index];
            if !p.consumed && p.callee == function && p.depth + 1 == depth {
                p.consumed = true;
                frame.call = Some((index, p.serial));
                let p = *p;
                let width = p.width.min(stride);
                for i in 0..(p.args.min(slots) as usize) {
                    let at = p.arg_at(i);
                    let version = self.call_times[at];
                    if version == 0 || width == 0 {
                        continue;
                    }
                    let to = times_base + i * stride;
                    self.slot_times[to..to + width]
                        .copy_from_slice(&self.call_times[at + 1..at + 1 + width]);
                    // Written at the caller's depth: at the callee's levels it reads 0.
                    self.slot_versions[slots_base + i] = version;
                }
            }
        }
        let index = self.frames.len() as u32;
        self.frames.push(frame);
        if let Some(top) = self.levels.last_mut() {
            top.frame = index;
            top.owns_frame = true;
        }
    }

    /// `__kage_hcpa_ts`: `t = max(cands)` → `dst` (unless `NONE`).
    pub fn ts(&mut self, dst: u32, cands: &[Candidate]) {
        let a = self.gather(cands);
        self.raise_cps(a);
        self.write_slot(dst, a);
    }

    /// `__kage_hcpa_phi`: `t = max(t(src) + offset, t(cond))` → `dst`.
    pub fn phi(&mut self, dst: u32, src: u32, offset: u32, cond: u32) {
        let cands = [
            Candidate { slot: src, offset },
            Candidate {
                slot: cond,
                offset: 0,
            },
        ];
        self.ts(dst, &cands);
    }

    /// `__kage_hcpa_load`: `t = max(cands, granules of [addr, addr + size)) + cost` → `dst`.
    pub fn load(&mut self, dst: u32, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        let a = self.gather(cands);
        if a > 0 && size > 0 {
            self.memory.max_into(addr, size, &mut self.t[..a]);
        }
        add(&mut self.t[..a], cost as u64);
        self.raise_cps(a);
        self.write_slot(dst, a);
    }

    /// `__kage_hcpa_store`: `t = max(cands) + cost` → the granules of `[addr, addr + size)`.
    pub fn store(&mut self, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        let a = self.gather(cands);
        add(&mut self.t[..a], cost as u64);
        self.raise_cps(a);
        if a > 0 && size > 0 {
            self.memory.store(addr, size, &self.t[..a]);
        }
    }

    /// `__kage_hcpa_mem` (`memcpy`, `memmove`; `memset` without `src`): `c = cost_per_8 ×
    /// ⌈len / 8⌉` added to the work; `t = max(cands, granules of src) + c` → the granules of
    /// `dst`.
    pub fn mem(
        &mut self,
        dst: u64,
        src: Option<u64>,
        len: u64,
        cost_per_8: u32,
        cands: &[Candidate],
    ) {
        let cost = (cost_per_8 as u64).saturating_mul(len.div_ceil(8));
        self.work(cost);
        let a = self.gather(cands);
        if let Some(src) = src.filter(|_| a > 0 && len > 0) {
            self.memory.max_into(src, len, &mut self.t[..a]);
        }
        add(&mut self.t[..a], cost);
        self.raise_cps(a);
        if a > 0 && len > 0 {
            self.memory.store(dst, len, &self.t[..a]);
        }
    }

    /// `__kage_hcpa_call`: a pending call to `callee`, made at the current depth.
    pub fn call(&mut self, callee: usize) {
        if self.pending.len() >= MAX_PENDING {
            self.pending.clear();
        }
        let width = self.analysed.len();
        let base = self.pending.last().map_or(0, |p| p.end());
        let p = PendingCall {
            callee,
            depth: self.levels.len(),
            width,
            base,
            args: 0,
            consumed: false,
            serial: self.next_serial,
        };
        self.next_serial += 1;
        grow_to(&mut self.call_times, p.end());
        self.call_times[base] = 0;
        self.pending.push(p);
    }

    /// `__kage_hcpa_arg`: argument `index` of the innermost pending call has the time
    /// `max(cands)` (ignored unless that call was made at this depth and not entered yet).
    pub fn arg(&mut self, index: u32, cands: &[Candidate]) {
        let a = self.gather(cands);
        self.raise_cps(a);
        let depth = self.levels.len();
        let Some(p) = self.pending.last_mut() else {
            return;
        };
        if p.consumed || p.depth != depth || index >= MAX_ARGS {
            return;
        }
        if index >= p.args {
            let old_end = p.end();
            p.args = index + 1;
            grow_to(&mut self.call_times, p.end());
            // The arguments not given yet: unset.
            for at in (old_end..p.end()).step_by(p.block()) {
                self.call_times[at] = 0;
            }
        }
        let at = p.arg_at(index as usize);
        let width = p.width;
        let version = self.versions.innermost();
        write_vector(
            &mut self.call_times[at..at + 1 + width],
            version,
            &self.t[..a],
        );
    }

    /// `__kage_hcpa_return`: the returned value has the time `max(cands)`, for the caller
    /// whose pending call made this activation's frame (at the caller's levels).
    pub fn ret(&mut self, cands: &[Candidate]) {
        let a = self.gather(cands);
        self.raise_cps(a);
        let Some((index, serial)) = self.current_frame().and_then(|f| f.call) else {
            return;
        };
        let Some(p) = self.pending.get(index).filter(|p| p.serial == serial) else {
            return;
        };
        let (at, width) = (p.base, p.width);
        let version = self.versions.innermost();
        write_vector(
            &mut self.call_times[at..at + 1 + width],
            version,
            &self.t[..a],
        );
    }

    /// `__kage_hcpa_result`: closes the pending call made at this depth, with every pending
    /// call made here or deeper (left by `longjmp`, exceptions, or callbacks). `dst` gets
    /// the callee's returned time when an instrumented callee made its frame from the call
    /// and returned; the arguments' maximum when it made its frame but returned nothing;
    /// else (code that is not instrumented) the arguments' maximum + `cost`, and `cost` is
    /// added to the work.
    pub fn result(&mut self, dst: u32, cost: u32) {
        let depth = self.levels.len();
        let cost = cost as u64;
        let a = self.analysed.len();
        let mut first = self.pending.len();
        while first > 0 && self.pending[first - 1].depth >= depth {
            first -= 1;
        }
        // The call this result closes: the latest one made at the shallowest depth popped
        // (its own depth, normally; stale calls from deeper levels lie above it).
        let chosen = (first..self.pending.len())
            .rev()
            .min_by_key(|&k| self.pending[k].depth)
            .map(|k| self.pending[k]);
        let t = &mut self.t[..a];
        t.fill(0);
        let versions = self.versions.as_slice();
        let call_times = &self.call_times;
        // `t = max(t, vector)` at the levels where the vector at `at` is valid.
        let max_vector = |t: &mut [u64], at: usize, width: usize| {
            let valid = max_valid_level(call_times[at], versions).min(width);
            for (tl, &x) in t[..valid]
                .iter_mut()
                .zip(&call_times[at + 1..at + 1 + valid])
            {
                *tl = (*tl).max(x);
            }
        };
        let mut charged = true;
        if let Some(p) = chosen {
            let width = p.width.min(a);
            if p.consumed && call_times[p.base] != 0 {
                max_vector(t, p.base, width);
            } else {
                for i in 0..p.args as usize {
                    max_vector(t, p.arg_at(i), width);
                }
            }
            charged = !p.consumed;
        }
        if charged {
            add(t, cost);
            self.work(cost);
        }
        self.pending.truncate(first);
        self.raise_cps(a);
        self.write_slot(dst, a);
    }

    /// The current activation's frame.
    #[inline]
    fn current_frame(&self) -> Option<Frame> {
        let index = self.levels.last()?.frame;
        self.frames.get(index as usize).copied()
    }

    /// `t[..a] = max over cands of (slot time + offset)` at every analysed level (a slot
    /// invalid at a level, or unknown, reads 0 there; `NONE` is a constant); returns `a`.
    #[inline]
    fn gather(&mut self, cands: &[Candidate]) -> usize {
        let a = self.analysed.len();
        let floor = cands.iter().map(|c| c.offset as u64).max().unwrap_or(0);
        let frame = self.current_frame();
        let t = &mut self.t[..a];
        t.fill(floor);
        let Some(frame) = frame.filter(|_| a > 0) else {
            return a;
        };
        let versions = self.versions.as_slice();
        let stride = frame.stride as usize;
        for c in cands {
            if c.slot == NONE || c.slot >= frame.slots {
                continue;
            }
            let slot = c.slot as usize;
            let stored = self.slot_versions[frame.slots_base + slot];
            let valid = max_valid_level(stored, versions).min(stride);
            let from = frame.times_base + slot * stride;
            let offset = c.offset as u64;
            for (tl, &s) in t[..valid]
                .iter_mut()
                .zip(&self.slot_times[from..from + valid])
            {
                *tl = (*tl).max(s.saturating_add(offset));
            }
        }
        a
    }

    /// Every analysed level's critical path is at least `t`.
    #[inline]
    fn raise_cps(&mut self, a: usize) {
        for (cp, &t) in self.cps[..a].iter_mut().zip(&self.t[..a]) {
            *cp = (*cp).max(t);
        }
    }

    /// Slot `dst` of the current frame gets `t[..a]`, valid at the levels open now.
    fn write_slot(&mut self, dst: u32, a: usize) {
        if dst == NONE || a == 0 {
            return;
        }
        let Some(top) = self.levels.last() else {
            return;
        };
        let index = top.frame as usize;
        let Some(&frame) = self.frames.get(index) else {
            return;
        };
        if dst >= frame.slots {
            return;
        }
        let frame = if (frame.stride as usize) < a && index + 1 == self.frames.len() {
            self.widen_top_frame(a).unwrap_or(frame)
        } else {
            frame
        };
        let stride = frame.stride as usize;
        let width = stride.min(a);
        let at = frame.times_base + dst as usize * stride;
        self.slot_times[at..at + width].copy_from_slice(&self.t[..width]);
        // The innermost level written: deeper levels, opened later, read the slot as 0.
        self.slot_versions[frame.slots_base + dst as usize] = self.versions.as_slice()[width - 1];
    }

    /// Re-lays the top frame out with room for at least `a` levels (rare: a frame starts
    /// with `HEADROOM` levels to spare).
    #[cold]
    fn widen_top_frame(&mut self, a: usize) -> Option<Frame> {
        let frame = self.frames.last_mut()?;
        let old = frame.stride as usize;
        let new = a.max(old + HEADROOM).min(self.config.max_depth);
        frame.stride = new as u32;
        let frame = *frame;
        grow_to(&mut self.slot_times, frame.times_end());
        // From the last slot down: a slot's new place never overlaps a lower slot's old one.
        for i in (0..frame.slots as usize).rev() {
            let from = frame.times_base + i * old;
            self.slot_times
                .copy_within(from..from + old, frame.times_base + i * new);
        }
        Some(frame)
    }
}

/// Makes `v` at least `len` long (new words 0).
#[inline]
fn grow_to(v: &mut Vec<u64>, len: usize) {
    if v.len() < len {
        v.resize(len, 0);
    }
}

/// Adds `cost` to every time.
#[inline]
fn add(t: &mut [u64], cost: u64) {
    if cost != 0 {
        for x in t {
            *x = x.saturating_add(cost);
        }
    }
}

/// A call vector (version word, then times) gets `t`, written under `version`, 0 beyond
/// `t`'s length.
fn write_vector(vector: &mut [u64], version: u64, t: &[u64]) {
    let (head, times) = vector.split_at_mut(1);
    head[0] = version;
    let n = times.len().min(t.len());
    times[..n].copy_from_slice(&t[..n]);
    times[n..].fill(0);
}
