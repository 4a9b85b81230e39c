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
//!   valid levels are a prefix). A slot also keeps how many levels it was written at: when
//!   the level of that depth still has the slot's version, exactly that many levels are
//!   valid (versions strictly increase), which one comparison tells, without a search.
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

/// A shadow register's version (0: never written in this frame) and the number of levels
/// it was written at, `hint`: when `versions[hint - 1] == version`, exactly `hint` levels
/// are valid (see [`valid_levels`]).
#[derive(Debug, Clone, Copy, Default)]
struct SlotMeta {
    version: u64,
    hint: u32,
}

/// [`max_valid_level`]`(version, versions)`: `hint` when the level `hint − 1` still has
/// `version` (versions strictly increase, so the levels before it are valid and those after
/// it are not), else a search from the innermost level.
#[inline(always)]
fn valid_levels(version: u64, hint: u32, versions: &[u64]) -> usize {
    match versions.get((hint as usize).wrapping_sub(1)) {
        Some(&v) if v == version => hint as usize,
        _ => valid_levels_search(version, versions),
    }
}

#[inline(never)]
fn valid_levels_search(version: u64, versions: &[u64]) -> usize {
    if version == 0 {
        0
    } else {
        max_valid_level(version, versions)
    }
}

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
    /// First slot's index in `slot_meta`.
    slots_base: usize,
    /// First slot's times in `slot_times`.
    times_base: usize,
    slots: u32,
    /// Levels a slot has times for (its validity is at most that many levels).
    stride: u32,
    /// Words from one slot's times to the next: `stride` rounded up to whole 8-word chunks
    /// ([`pitch`]), so that each slot's times start a chunk of their own (the 8-lane path
    /// loads and stores whole chunks: a store then forwards to the next load of the slot).
    pitch: u32,
    /// The pending call this activation consumed (index, serial): where `ret` goes.
    call: Option<(usize, u64)>,
}

impl Frame {
    fn versions_end(&self) -> usize {
        self.slots_base + self.slots as usize
    }
    fn times_end(&self) -> usize {
        self.times_base + self.slots as usize * self.pitch as usize
    }
    /// Slot `slot`'s first time in `slot_times`.
    fn times_at(&self, slot: usize) -> usize {
        self.times_base + slot * self.pitch as usize
    }
}

/// The words between slots of `stride` times: whole chunks.
fn pitch(stride: usize) -> usize {
    stride.next_multiple_of(8)
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
    #[inline(always)]
    fn max_into(&mut self, addr: u64, size: u64, t: &mut [u64]) {
        let granules = self.granules(addr, size);
        match &mut self.vsm {
            // The line's valid prefix, in place (the levels after it read 0: no change).
            AnyVsm::Cached(vsm) => {
                for g in granules {
                    max_with(t, vsm.read_prefix(g));
                }
            }
            vsm => {
                for g in granules {
                    vsm.read(g, &mut self.read);
                    max_with(t, &self.read);
                }
            }
        }
    }

    /// Every granule of the range gets the times `t` (a store overwrites).
    #[inline(always)]
    fn store(&mut self, addr: u64, size: u64, t: &[u64]) {
        let granules = self.granules(addr, size);
        match &mut self.vsm {
            // Every level (`t` has the shadow's depth, as always here): in place.
            AnyVsm::Cached(vsm) if t.len() == vsm.depth() => {
                for g in granules {
                    vsm.overwrite_levels(g).copy_from_slice(t);
                }
            }
            vsm => {
                for g in granules {
                    vsm.write_levels(g, t);
                }
            }
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
    /// The analysed levels' critical paths: the first `analysed.len()` words; the buffer
    /// has [`buffer_len`] words, so that whole 8-word chunks are in bounds (the words after
    /// the analysed levels' are left over, and set at `enter`).
    cps: Words,
    versions: VersionStack,
    clock: u64,
    skipped: u64,
    frames: Vec<Frame>,
    /// Slot versions and times; only the part up to the top frame's end is in use (the
    /// rest is kept to avoid reallocating).
    slot_meta: Vec<SlotMeta>,
    slot_times: Words,
    pending: Vec<PendingCall>,
    call_times: Vec<u64>,
    next_serial: u64,
    memory: TimeMemory,
    /// The time being computed, one per analysed level ([`buffer_len`] words).
    t: Words,
    /// The processor has AVX-512F: the timestamp calls take the 8-lane path (see `x8`), with
    /// the time in a register when at most 8 levels are analysed, else 8 levels at a time.
    lanes8: bool,
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
            cps: Words::new(buffer_len(config.max_depth)),
            versions: VersionStack::new(),
            clock: 0,
            skipped: 0,
            frames: Vec::with_capacity(64),
            slot_meta: Vec::new(),
            slot_times: Words::new(0),
            pending: Vec::with_capacity(16),
            call_times: Vec::new(),
            next_serial: 1,
            memory: TimeMemory::new(config.vsm, config.granule_shift.min(3)),
            t: Words::new(buffer_len(config.max_depth)),
            lanes8: x8::available(),
        }
    }

    /// Turns the 8-lane path off, or on where the processor has it (tests: both paths give
    /// the same times).
    #[cfg(test)]
    pub fn set_lanes8(&mut self, on: bool) {
        self.lanes8 = on && x8::available();
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
            self.cps[self.analysed.len() - 1] = 0;
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
        let cp = self.cps[self.analysed.len()];
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
        self.cps[..depth].fill(0);
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
        self.slot_meta = Vec::new();
        self.slot_times = Words::new(0);
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
            pitch: pitch(stride) as u32,
            call: None,
        };
        if self.slot_meta.len() < frame.versions_end() {
            self.slot_meta
                .resize(frame.versions_end(), SlotMeta::default());
        }
        self.slot_times.grow_to(frame.times_end());
        self.slot_meta[slots_base..frame.versions_end()].fill(SlotMeta::default());
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
                    let to = frame.times_at(i);
                    self.slot_times[to..to + width]
                        .copy_from_slice(&self.call_times[at + 1..at + 1 + width]);
                    // Written at the caller's depth: at the callee's levels it reads 0.
                    self.slot_meta[slots_base + i] = SlotMeta {
                        version,
                        hint: p.width as u32,
                    };
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
    #[inline]
    pub fn ts(&mut self, dst: u32, cands: &[Candidate]) {
        #[cfg(target_arch = "x86_64")]
        if self.lanes8 {
            // SAFETY: the processor has AVX-512F; `ts_x8` takes at most 8 levels.
            return unsafe {
                if self.analysed.len() <= x8::LANES {
                    self.ts_x8(dst, cands)
                } else {
                    self.ts_wide(dst, cands)
                }
            };
        }
        self.ts_scalar(dst, cands)
    }

    /// Out of line: the entry points inline the dispatch only.
    #[inline(never)]
    fn ts_scalar(&mut self, dst: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let a = self.gather(frame, cands);
        self.finish(dst, frame, a, 0);
    }

    /// `__kage_hcpa_phi`: `t = max(t(src) + offset, t(cond))` → `dst`.
    #[inline]
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
    #[inline]
    pub fn load(&mut self, dst: u32, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        #[cfg(target_arch = "x86_64")]
        if self.lanes8 {
            // SAFETY: as in `ts`.
            return unsafe {
                if self.analysed.len() <= x8::LANES {
                    self.load_x8(dst, addr, size, cost, cands)
                } else {
                    self.load_wide(dst, addr, size, cost, cands)
                }
            };
        }
        self.load_scalar(dst, addr, size, cost, cands)
    }

    /// Out of line: the entry points inline the dispatch only.
    #[inline(never)]
    fn load_scalar(&mut self, dst: u32, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let a = self.gather(frame, cands);
        if a > 0 && size > 0 {
            self.memory.max_into(addr, size, &mut self.t[..a]);
        }
        self.finish(dst, frame, a, cost as u64);
    }

    /// `__kage_hcpa_store`: `t = max(cands) + cost` → the granules of `[addr, addr + size)`.
    #[inline]
    pub fn store(&mut self, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        #[cfg(target_arch = "x86_64")]
        if self.lanes8 {
            // SAFETY: as in `ts`.
            return unsafe {
                if self.analysed.len() <= x8::LANES {
                    self.store_x8(addr, size, cost, cands)
                } else {
                    self.store_wide(addr, size, cost, cands)
                }
            };
        }
        self.store_scalar(addr, size, cost, cands)
    }

    /// Out of line: the entry points inline the dispatch only.
    #[inline(never)]
    fn store_scalar(&mut self, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let a = self.gather(frame, cands);
        self.finish(NONE, frame, a, cost as u64);
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
        let frame = self.current_frame();
        let a = self.gather(frame, cands);
        if let Some(src) = src.filter(|_| a > 0 && len > 0) {
            self.memory.max_into(src, len, &mut self.t[..a]);
        }
        self.finish(NONE, frame, a, cost);
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
        let frame = self.current_frame();
        let a = self.gather(frame, cands);
        self.finish(NONE, frame, a, 0);
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
        let frame = self.current_frame();
        let a = self.gather(frame, cands);
        self.finish(NONE, frame, a, 0);
        let Some((index, serial)) = frame.and_then(|(_, f)| f.call) else {
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
        let frame = self.current_frame();
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
        self.finish(dst, frame, a, 0);
    }

    /// The current activation's frame and its index in `frames`.
    #[inline(always)]
    fn current_frame(&self) -> Option<(usize, Frame)> {
        let index = self.levels.last()?.frame as usize;
        self.frames.get(index).map(|&f| (index, f))
    }

    /// `t[..a] = max over cands of (slot time + offset)` at every analysed level (a slot
    /// invalid at a level, or unknown, reads 0 there; `NONE` is a constant); returns `a`.
    /// `frame` is the current one.
    #[inline(always)]
    fn gather(&mut self, frame: Option<(usize, Frame)>, cands: &[Candidate]) -> usize {
        let a = self.analysed.len();
        let t = &mut self.t[..a];
        let floor = offset_floor(cands);
        for x in t.iter_mut() {
            *x = floor;
        }
        let Some((_, frame)) = frame else {
            return a;
        };
        let Some((metas, times)) = frame_slots(&self.slot_meta, &self.slot_times, &frame) else {
            return a;
        };
        // One version per analysed level: `a` of them.
        let versions = self.versions.as_slice();
        let stride = frame.stride as usize;
        for c in cands {
            // `NONE` is beyond any frame's slots.
            let Some(m) = metas.get(c.slot as usize) else {
                continue;
            };
            let valid = valid_levels(m.version, m.hint, versions).min(stride);
            let from = c.slot as usize * frame.pitch as usize;
            let s = &times[from..from + valid];
            let offset = c.offset as u64;
            if offset == 0 {
                max_with(t, s);
            } else {
                for (x, &y) in t.iter_mut().zip(s) {
                    *x = (*x).max(y.saturating_add(offset));
                }
            }
        }
        a
    }

    /// The time in `t[..a]` is complete: `cost` is added to it, every analysed level's
    /// critical path is raised to it, and slot `dst` of `frame` (the current frame; unless
    /// `dst` is `NONE` or not a slot of it) gets it, valid at the levels open now.
    #[inline(always)]
    fn finish(&mut self, dst: u32, frame: Option<(usize, Frame)>, a: usize, cost: u64) {
        let slot = match frame {
            Some((index, frame)) if dst != NONE && dst < frame.slots && a > 0 => {
                Some(self.slot_to_write(index, frame, dst, a))
            }
            _ => None,
        };
        let t = &mut self.t[..a];
        let cps = &mut self.cps[..a];
        match slot {
            Some((at, width)) => {
                let (t_in, t_rest) = t.split_at_mut(width);
                let (cps_in, cps_rest) = cps.split_at_mut(width);
                let out = &mut self.slot_times[at..at + width];
                for ((x, cp), o) in t_in.iter_mut().zip(cps_in).zip(out) {
                    let v = x.saturating_add(cost);
                    *x = v;
                    *cp = (*cp).max(v);
                    *o = v;
                }
                complete(t_rest, cps_rest, cost);
            }
            None => complete(t, cps, cost),
        }
    }

    /// Slot `dst` (< `frame.slots`) of frame `index` is written at the `a` > 0 levels open
    /// now: its version and hint are set, and the place and number of its times returned
    /// (the levels the frame has room for, widened first if it is the top frame).
    #[inline(always)]
    fn slot_to_write(&mut self, index: usize, frame: Frame, dst: u32, a: usize) -> (usize, usize) {
        let frame = if (frame.stride as usize) < a && index + 1 == self.frames.len() {
            self.widen_top_frame(a).unwrap_or(frame)
        } else {
            frame
        };
        let stride = frame.stride as usize;
        let width = stride.min(a);
        // The innermost level written: deeper levels, opened later, read the slot as 0.
        self.slot_meta[frame.slots_base + dst as usize] = SlotMeta {
            version: self.versions.as_slice()[width - 1],
            hint: width as u32,
        };
        (frame.times_at(dst as usize), width)
    }

    /// Re-lays the top frame out with room for at least `a` levels (rare: a frame starts
    /// with `HEADROOM` levels to spare).
    #[cold]
    fn widen_top_frame(&mut self, a: usize) -> Option<Frame> {
        let frame = self.frames.last_mut()?;
        let old = frame.stride as usize;
        let new = a.max(old + HEADROOM).min(self.config.max_depth);
        frame.stride = new as u32;
        let old_pitch = frame.pitch as usize;
        let new_pitch = pitch(new);
        if new_pitch == old_pitch {
            // The slots have the room already.
            return Some(*frame);
        }
        frame.pitch = new_pitch as u32;
        let frame = *frame;
        self.slot_times.grow_to(frame.times_end());
        // From the last slot down: a slot's new place never overlaps a lower slot's old one.
        for i in (0..frame.slots as usize).rev() {
            let from = frame.times_base + i * old_pitch;
            self.slot_times
                .copy_within(from..from + old, frame.times_at(i));
        }
        Some(frame)
    }
}

/// 8 words on a 64-byte boundary: one AVX-512 register, one cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Chunk([u64; 8]);

/// A buffer of words in whole chunks (a slice of `u64`s that an 8-word load or store at a
/// multiple of 8 stays within, and finds aligned).
/// The largest offset of `cands`: every level's time is at least that (a slot read as 0,
/// plus its offset).
#[inline(always)]
fn offset_floor(cands: &[Candidate]) -> u64 {
    cands.iter().fold(0, |m, c| m.max(c.offset)) as u64
}

/// `frame`'s slot metadata and times (`None` if they are not all there, which a frame of
/// this engine never is).
#[inline(always)]
fn frame_slots<'a>(
    meta: &'a [SlotMeta],
    times: &'a [u64],
    frame: &Frame,
) -> Option<(&'a [SlotMeta], &'a [u64])> {
    Some((
        meta.get(frame.slots_base..frame.versions_end())?,
        times.get(frame.times_base..frame.times_end())?,
    ))
}

struct Words(Vec<Chunk>);

impl Words {
    /// At least `len` words, 0.
    fn new(len: usize) -> Self {
        Words(vec![Chunk::default(); len.div_ceil(8)])
    }

    /// Makes it at least `len` words long (new words 0).
    fn grow_to(&mut self, len: usize) {
        let chunks = len.div_ceil(8);
        if self.0.len() < chunks {
            self.0.resize(chunks, Chunk::default());
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        // SAFETY: a chunk is 8 `u64`s with no padding (`repr(C)`, 64 bytes).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast(), self.0.len() * 8) }
    }
}

impl std::ops::DerefMut for Words {
    fn deref_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `deref`.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast(), self.0.len() * 8) }
    }
}

/// The words of the per-level buffers `t` and `cps`: `max_depth` (clamped as `Engine::new`
/// does) rounded up to whole 8-word chunks.
fn buffer_len(max_depth: usize) -> usize {
    max_depth.clamp(1, MAX_DEPTH_LIMIT).next_multiple_of(8)
}

/// Makes `v` at least `len` long (new words 0).
#[inline]
fn grow_to(v: &mut Vec<u64>, len: usize) {
    if v.len() < len {
        v.resize(len, 0);
    }
}

/// `t[ℓ] = max(t[ℓ], v[ℓ])` at `v`'s levels.
#[inline(always)]
fn max_with(t: &mut [u64], v: &[u64]) {
    for (x, &y) in t.iter_mut().zip(v) {
        *x = (*x).max(y);
    }
}

/// `t += cost`, and every critical path at least `t`.
#[inline(always)]
fn complete(t: &mut [u64], cps: &mut [u64], cost: u64) {
    for (x, cp) in t.iter_mut().zip(cps) {
        let v = x.saturating_add(cost);
        *x = v;
        *cp = (*cp).max(v);
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

/// The 8-lane path: with at most 8 analysed levels (the common case), a time is one AVX-512
/// register of 8 `u64` lanes (lane ℓ: level ℓ; lanes from the number of levels on are
/// ignored), and every per-level loop of the timestamp calls is one instruction: a slot's
/// valid prefix is its whole first chunk, loaded and masked (levels after the prefix read
/// 0), a granule's is a masked load from its VCache line, a maximum is `vpmaxuq`. With more
/// levels, the same 8 at a time (`*_wide`). The times are exactly the scalar path's
/// (`tests.rs` runs the model comparison both ways).
///
/// Slots are stored and loaded whole (their `pitch` is whole chunks), because a processor
/// forwards a store only to a load of the same bytes, and a masked load to none (measured
/// on AMD Zen 5): a slot written by one call and read by the next would otherwise wait for
/// the store to reach the cache. A whole store also writes the slot's times past the
/// levels it was written at, which are never read: a slot written at `width` levels with
/// the version `v` of level `width − 1` is valid at `width` levels at most, since a level
/// open later at an index of `width` or more was entered after `v`'s instance (it is not
/// one of `v`'s ancestors), so its version is greater.
#[cfg(target_arch = "x86_64")]
mod x8 {
    use std::arch::x86_64::*;

    pub const LANES: usize = 8;

    /// The processor (and the system) run AVX-512F.
    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
    }

    // The helpers are inlined into the `#[target_feature(enable = "avx512f")]` functions
    // that use them (`Engine::*_x8`), where the intrinsics inline in turn.

    /// The first `n` (≤ 8) lanes.
    #[inline(always)]
    fn mask(n: usize) -> __mmask8 {
        debug_assert!(n <= LANES);
        ((1u32 << n) - 1) as __mmask8
    }

    /// The first `min(n, 8)` times from `p`, the other lanes 0.
    ///
    /// A masked load is not forwarded the older stores to its 64 bytes, masked lanes
    /// included (measured: AMD Zen 5), so it waits for them to reach the cache: with no lane
    /// to load (a granule never stored to), none is made.
    ///
    /// # Safety
    /// AVX-512F; `p` points to `min(n, 8)` readable `u64`s.
    #[inline(always)]
    pub unsafe fn load(p: *const u64, n: usize) -> __m512i {
        let n = n.min(LANES);
        if n == 0 {
            _mm512_setzero_si512()
        } else {
            _mm512_maskz_loadu_epi64(mask(n), p as *const i64)
        }
    }

    /// The first `min(n, 8)` of the 8 words at `p`, the other lanes 0: a whole load, which
    /// an older whole store to the same 8 words forwards to (where a masked load would wait
    /// for it to reach the cache), then masked.
    ///
    /// # Safety
    /// AVX-512F; `p` points to 8 readable `u64`s.
    #[inline(always)]
    pub unsafe fn load_chunk_prefix(p: *const u64, n: usize) -> __m512i {
        _mm512_maskz_mov_epi64(mask(n.min(LANES)), _mm512_loadu_si512(p as *const __m512i))
    }

    /// `v` to the 8 words at `p`.
    ///
    /// # Safety
    /// AVX-512F; `p` points to 8 writable `u64`s.
    #[inline(always)]
    pub unsafe fn store_whole(p: *mut u64, v: __m512i) {
        _mm512_storeu_si512(p as *mut __m512i, v)
    }

    /// The first `min(n, 8)` lanes of `v` to `p`.
    ///
    /// # Safety
    /// AVX-512F; `p` points to `min(n, 8)` writable `u64`s.
    #[inline(always)]
    pub unsafe fn store(p: *mut u64, n: usize, v: __m512i) {
        _mm512_mask_storeu_epi64(p as *mut i64, mask(n.min(LANES)), v)
    }

    /// The 8 words at `p`, a chunk of a `Words`.
    ///
    /// # Safety
    /// AVX-512F; `p` is 64-byte aligned, 8 readable `u64`s.
    #[inline(always)]
    pub unsafe fn load_chunk(p: *const u64) -> __m512i {
        _mm512_load_si512(p as *const __m512i)
    }

    /// `v` to the 8 words at `p`, a chunk of a `Words`.
    ///
    /// # Safety
    /// AVX-512F; `p` is 64-byte aligned, 8 writable `u64`s.
    #[inline(always)]
    pub unsafe fn store_chunk(p: *mut u64, v: __m512i) {
        _mm512_store_si512(p as *mut __m512i, v)
    }

    /// `v + x` in every lane, saturating as `u64::saturating_add`.
    ///
    /// # Safety
    /// AVX-512F.
    #[inline(always)]
    pub unsafe fn saturating_add(v: __m512i, x: u64) -> __m512i {
        let sum = _mm512_add_epi64(v, _mm512_set1_epi64(x as i64));
        let overflow = _mm512_cmplt_epu64_mask(sum, v);
        _mm512_mask_mov_epi64(sum, overflow, _mm512_set1_epi64(-1))
    }

    ///
    /// # Safety
    /// AVX-512F.
    #[inline(always)]
    pub unsafe fn max(a: __m512i, b: __m512i) -> __m512i {
        _mm512_max_epu64(a, b)
    }

    ///
    /// # Safety
    /// AVX-512F.
    #[inline(always)]
    pub unsafe fn splat(x: u64) -> __m512i {
        _mm512_set1_epi64(x as i64)
    }
}

/// Elsewhere the scalar path only.
#[cfg(not(target_arch = "x86_64"))]
mod x8 {
    pub const LANES: usize = 8;

    pub fn available() -> bool {
        false
    }
}

#[cfg(target_arch = "x86_64")]
impl Engine {
    /// [`ts`](Engine::ts) for more than 8 levels, 8 at a time.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn ts_wide(&mut self, dst: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let a = self.gather_wide(frame, cands);
        self.finish_wide(dst, frame, a, 0);
    }

    /// [`load`](Engine::load) for more than 8 levels, 8 at a time.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn load_wide(&mut self, dst: u32, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let a = self.gather_wide(frame, cands);
        if a > 0 && size > 0 {
            let granules = self.memory.granules(addr, size);
            let t = self.t.as_mut_ptr();
            match &mut self.memory.vsm {
                AnyVsm::Cached(vsm) => {
                    for g in granules {
                        // At most `a` times: within `t`'s chunks.
                        let v = vsm.read_prefix(g);
                        for k in (0..v.len()).step_by(x8::LANES) {
                            let s = x8::load(v.as_ptr().add(k), v.len() - k);
                            x8::store_chunk(t.add(k), x8::max(x8::load_chunk(t.add(k)), s));
                        }
                    }
                }
                _ => self.memory.max_into(addr, size, &mut self.t[..a]),
            }
        }
        self.finish_wide(dst, frame, a, cost as u64);
    }

    /// [`store`](Engine::store) for more than 8 levels, 8 at a time.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn store_wide(&mut self, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let a = self.gather_wide(frame, cands);
        self.finish_wide(NONE, frame, a, cost as u64);
        if a > 0 && size > 0 {
            let granules = self.memory.granules(addr, size);
            let t = self.t.as_ptr();
            match &mut self.memory.vsm {
                AnyVsm::Cached(vsm) => {
                    for g in granules {
                        // Every level, as `write_levels` with `a` (the depth) times.
                        let v = vsm.overwrite_levels(g);
                        for k in (0..v.len()).step_by(x8::LANES) {
                            x8::store(v.as_mut_ptr().add(k), v.len() - k, x8::load_chunk(t.add(k)));
                        }
                    }
                }
                _ => self.memory.store(addr, size, &self.t[..a]),
            }
        }
    }

    /// [`gather`](Engine::gather) 8 levels at a time, into `t`; returns `a`.
    ///
    /// # Safety
    /// As for [`ts_wide`](Engine::ts_wide).
    #[inline(always)]
    unsafe fn gather_wide(&mut self, frame: Option<(usize, Frame)>, cands: &[Candidate]) -> usize {
        let a = self.analysed.len();
        let floor = offset_floor(cands);
        // `t` has whole chunks up to `a` rounded up.
        let t = self.t.as_mut_ptr();
        for k in (0..a).step_by(x8::LANES) {
            x8::store_chunk(t.add(k), x8::splat(floor));
        }
        let Some((_, frame)) = frame else {
            return a;
        };
        let Some((metas, times)) = frame_slots(&self.slot_meta, &self.slot_times, &frame) else {
            return a;
        };
        let versions = self.versions.as_slice();
        let stride = frame.stride as usize;
        for c in cands {
            let Some(m) = metas.get(c.slot as usize) else {
                continue;
            };
            let valid = valid_levels(m.version, m.hint, versions).min(stride);
            // The slot's `pitch` words: whole chunks, `valid` ≤ `stride` ≤ `pitch`.
            let from = times.as_ptr().add(c.slot as usize * frame.pitch as usize);
            for k in (0..valid).step_by(x8::LANES) {
                // Lanes past `valid` read 0: plus the offset, at most `floor`.
                let s = x8::load_chunk_prefix(from.add(k), valid - k);
                let s = if c.offset == 0 {
                    s
                } else {
                    x8::saturating_add(s, c.offset as u64)
                };
                x8::store_chunk(t.add(k), x8::max(x8::load_chunk(t.add(k)), s));
            }
        }
        a
    }

    /// [`finish`](Engine::finish) 8 levels at a time.
    ///
    /// # Safety
    /// As for [`ts_wide`](Engine::ts_wide).
    #[inline(always)]
    unsafe fn finish_wide(&mut self, dst: u32, frame: Option<(usize, Frame)>, a: usize, cost: u64) {
        let slot = match frame {
            Some((index, frame)) if dst != NONE && dst < frame.slots && a > 0 => {
                Some(self.slot_to_write(index, frame, dst, a))
            }
            _ => None,
        };
        // Whole chunks of the slot (its pitch; see `x8`: the times past `width` in them are
        // never read).
        let (out, width) = match slot {
            Some((at, width)) => (
                self.slot_times[at..at + width.next_multiple_of(x8::LANES)].as_mut_ptr(),
                width,
            ),
            None => (std::ptr::null_mut(), 0),
        };
        // `t` and `cps` have whole chunks up to `a` rounded up; the lanes past `a` are left
        // over (`enter` sets a level's critical path).
        let t = self.t.as_mut_ptr();
        let cps = self.cps.as_mut_ptr();
        for k in (0..a).step_by(x8::LANES) {
            let mut v = x8::load_chunk(t.add(k));
            if cost != 0 {
                v = x8::saturating_add(v, cost);
                x8::store_chunk(t.add(k), v);
            }
            x8::store_chunk(cps.add(k), x8::max(x8::load_chunk(cps.add(k)), v));
            if k < width {
                x8::store_whole(out.add(k), v);
            }
        }
    }

    /// [`ts`](Engine::ts) on the 8-lane path.
    ///
    /// # Safety
    /// AVX-512F, at most 8 analysed levels.
    #[target_feature(enable = "avx512f")]
    unsafe fn ts_x8(&mut self, dst: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let t = self.gather_x8(frame, cands);
        self.finish_x8(dst, frame, t, 0);
    }

    /// [`load`](Engine::load) on the 8-lane path.
    ///
    /// # Safety
    /// As for [`ts_x8`](Engine::ts_x8).
    #[target_feature(enable = "avx512f")]
    unsafe fn load_x8(&mut self, dst: u32, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        use std::arch::x86_64::__m512i;
        let frame = self.current_frame();
        let mut t: __m512i = self.gather_x8(frame, cands);
        let a = self.analysed.len();
        if a > 0 && size > 0 {
            let granules = self.memory.granules(addr, size);
            match &mut self.memory.vsm {
                AnyVsm::Cached(vsm) => {
                    for g in granules {
                        // At most the shadow's depth, `a`: the levels after the prefix read 0.
                        let v = vsm.read_prefix(g);
                        t = x8::max(t, x8::load(v.as_ptr(), v.len()));
                    }
                }
                _ => {
                    x8::store(self.t.as_mut_ptr(), a, t);
                    self.memory.max_into(addr, size, &mut self.t[..a]);
                    t = x8::load(self.t.as_ptr(), a);
                }
            }
        }
        self.finish_x8(dst, frame, t, cost as u64);
    }

    /// [`store`](Engine::store) on the 8-lane path.
    ///
    /// # Safety
    /// As for [`ts_x8`](Engine::ts_x8).
    #[target_feature(enable = "avx512f")]
    unsafe fn store_x8(&mut self, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let t = self.gather_x8(frame, cands);
        let t = self.finish_x8(NONE, frame, t, cost as u64);
        let a = self.analysed.len();
        if a > 0 && size > 0 {
            let granules = self.memory.granules(addr, size);
            match &mut self.memory.vsm {
                AnyVsm::Cached(vsm) => {
                    for g in granules {
                        // Every level, as `write_levels` with `a` (the depth) times.
                        let v = vsm.overwrite_levels(g);
                        x8::store(v.as_mut_ptr(), v.len(), t);
                    }
                }
                _ => self.memory.store(addr, size, &self.t[..a]),
            }
        }
    }

    /// [`gather`](Engine::gather) into a register.
    ///
    /// # Safety
    /// As for [`ts_x8`](Engine::ts_x8).
    #[inline(always)]
    unsafe fn gather_x8(
        &mut self,
        frame: Option<(usize, Frame)>,
        cands: &[Candidate],
    ) -> std::arch::x86_64::__m512i {
        // Every offset is at most `floor`: a lane a slot does not cover (read as 0) plus its
        // offset changes nothing.
        let floor = offset_floor(cands);
        let mut t = x8::splat(floor);
        let Some((_, frame)) = frame else {
            return t;
        };
        let Some((metas, times)) = frame_slots(&self.slot_meta, &self.slot_times, &frame) else {
            return t;
        };
        let versions = self.versions.as_slice();
        let stride = frame.stride as usize;
        for c in cands {
            let Some(m) = metas.get(c.slot as usize) else {
                continue;
            };
            // At most `a` ≤ 8; the slot's `pitch` words are whole chunks.
            let valid = valid_levels(m.version, m.hint, versions).min(stride);
            let s = x8::load_chunk_prefix(
                times.as_ptr().add(c.slot as usize * frame.pitch as usize),
                valid,
            );
            let s = if c.offset == 0 {
                s
            } else {
                x8::saturating_add(s, c.offset as u64)
            };
            t = x8::max(t, s);
        }
        t
    }

    /// [`finish`](Engine::finish) of a time in a register; returns the complete time (also
    /// left in `t`).
    ///
    /// # Safety
    /// As for [`ts_x8`](Engine::ts_x8).
    #[inline(always)]
    unsafe fn finish_x8(
        &mut self,
        dst: u32,
        frame: Option<(usize, Frame)>,
        t: std::arch::x86_64::__m512i,
        cost: u64,
    ) -> std::arch::x86_64::__m512i {
        let a = self.analysed.len();
        let t = if cost == 0 {
            t
        } else {
            x8::saturating_add(t, cost)
        };
        // `t` and `cps` have a whole chunk at least; the lanes past `a` are left over.
        x8::store_chunk(self.t.as_mut_ptr(), t);
        let cps = self.cps.as_mut_ptr();
        x8::store_chunk(cps, x8::max(x8::load_chunk(cps), t));
        if let Some((index, frame)) = frame {
            if dst != NONE && dst < frame.slots && a > 0 {
                // The slot's first chunk, whole (see `x8`: the times past the
                // levels written are never read).
                let (at, _) = self.slot_to_write(index, frame, dst, a);
                let out = &mut self.slot_times[at..at + x8::LANES];
                x8::store_whole(out.as_mut_ptr(), t);
            }
        }
        t
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod x8_tests {
    use super::x8;
    use std::arch::x86_64::__m512i;

    #[test]
    fn lanes_saturate_and_take_the_maximum_as_the_scalar_code() {
        if !x8::available() {
            return;
        }
        let a = [0, 1, u64::MAX, u64::MAX - 3, 1 << 63, 7, 5, 9];
        let b = [3, 0, 1, u64::MAX - 2, (1 << 63) - 1, 7, 6, 2];
        for n in 0..=8 {
            for x in [0, 1, 4, u64::MAX] {
                let mut out = [42u64; 8];
                // SAFETY: the processor has AVX-512F; 8-word arrays.
                unsafe {
                    let v: __m512i = x8::load(a.as_ptr(), n);
                    let w = x8::max(x8::saturating_add(v, x), x8::load(b.as_ptr(), n));
                    x8::store(out.as_mut_ptr(), n, w);
                }
                for l in 0..8 {
                    let expected = if l < n {
                        a[l].saturating_add(x).max(b[l])
                    } else {
                        42
                    };
                    assert_eq!(out[l], expected, "n {n} x {x} lane {l}");
                }
            }
        }
    }
}
