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
//! - lanes: a time is a vector with one entry per *lane*. A level opens a lane of its own,
//!   except one entered while its parent's lane holds no time above 0, which shares it
//!   (`enter` says why that is exact); every "per analysed level" above is per lane.
//!
//! Every computed time raises the critical path of every lane. Nothing here
//! panics on bad input: unknown slots read 0 and are not written, unbalanced exits are
//! ignored.

use kage_abi::{Candidate, NONE};
use kage_vsm::{max_valid_level, AnyVsm, Config, Granularity, VectorShadow, VersionStack, VsmKind};

mod lanes;

/// How the timestamp calls run their per-level loops: 8 levels per vector operation where
/// the processor can (`lanes.rs`), else one at a time. Every path gives the same times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lanes {
    Scalar,
    /// Two AVX2 registers of 4 levels.
    Avx2,
    /// One AVX-512 register of 8 levels.
    Avx512,
}

impl Lanes {
    /// Every path, the scalar one first.
    pub const ALL: [Lanes; 3] = [Lanes::Scalar, Lanes::Avx2, Lanes::Avx512];

    /// Whether this processor runs the path.
    pub fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        match self {
            Lanes::Scalar => true,
            Lanes::Avx2 => lanes::avx2::available(),
            Lanes::Avx512 => lanes::avx512::available(),
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Lanes::Scalar
        }
    }

    /// The widest path this processor runs.
    pub fn best() -> Lanes {
        Lanes::ALL
            .into_iter()
            .rev()
            .find(|l| l.available())
            .unwrap_or(Lanes::Scalar)
    }
}

/// Levels in one vector of the 8-lane paths.
const LANES: usize = 8;
/// With at most this many vectors of levels analysed (48 levels), a time is held in
/// registers; with more, in memory (`*_wide`).
const REGISTER_CHUNKS: usize = 6;

/// `self.$fast::<N>(args)` on the processor's vector path, a time in `N` vectors of 8
/// levels, when `N` ≤ [`REGISTER_CHUNKS`]; `$wide` with more levels; `$scalar` without a
/// vector path.
macro_rules! by_lanes {
    ($engine:ident, $fast:ident, $wide:ident, $scalar:ident, ($($arg:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            match $engine.lanes {
                Lanes::Avx512 => return by_chunks!(avx512_path, $engine, $fast, $wide, ($($arg),*)),
                Lanes::Avx2 => return by_chunks!(avx2_path, $engine, $fast, $wide, ($($arg),*)),
                Lanes::Scalar => {}
            }
        }
        $engine.$scalar($($arg),*)
    }};
}

/// `by_lanes!` on one vector path: the number of vectors a time takes.
#[cfg(target_arch = "x86_64")]
macro_rules! by_chunks {
    ($path:ident, $engine:ident, $fast:ident, $wide:ident, ($($arg:expr),*)) => {{
        const _: () = assert!(REGISTER_CHUNKS == 6);
        // SAFETY: `lanes` is only ever a path the processor runs (`Lanes::available`); `N`
        // vectors hold the `width` analysed levels.
        unsafe {
            match $engine.width.div_ceil(LANES) {
                0 | 1 => lanes::$path::$fast::<1>($engine, $($arg),*),
                2 => lanes::$path::$fast::<2>($engine, $($arg),*),
                3 => lanes::$path::$fast::<3>($engine, $($arg),*),
                4 => lanes::$path::$fast::<4>($engine, $($arg),*),
                5 => lanes::$path::$fast::<5>($engine, $($arg),*),
                6 => lanes::$path::$fast::<6>($engine, $($arg),*),
                _ => lanes::$path::$wide($engine, $($arg),*),
            }
        }
    }};
}

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
    /// A level entered while its parent's lane holds no time above 0 shares that lane
    /// ([`Engine::enter`]); false gives every analysed level a lane of its own.
    pub share_lanes: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_depth: 64,
            granule_shift: 2,
            vsm: VsmKind::Compress,
            share_lanes: true,
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

/// An analysed level's own statistics (its critical path is its lane's in `Engine::cps`,
/// which every time raises).
#[derive(Debug, Clone, Copy)]
struct Analysed {
    start: u64,
    children_work: u64,
    children_cp: u64,
    /// Its lane: the index of its times in every time vector.
    lane: u32,
    /// It opened that lane (and closes it at its exit); else it shares its parent's.
    owns_lane: bool,
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
    /// Lanes open: the length of every time vector (at most `analysed.len()`; less where
    /// levels share lanes).
    width: usize,
    /// The lanes' critical paths: the first `width` words; the buffer has [`buffer_len`]
    /// words, so that whole 8-word chunks are in bounds (the words after the open lanes'
    /// are left over, and set at `enter`).
    cps: Words,
    /// Per open lane: a `hoist` wrote a time above 0 there (which raises no critical path),
    /// so a level entered now may not share it.
    hoisted: Vec<bool>,
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
    /// The path of the timestamp calls' per-level loops: the widest the processor has.
    lanes: Lanes,
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
            width: 0,
            cps: Words::new(buffer_len(config.max_depth)),
            hoisted: vec![false; buffer_len(config.max_depth)],
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
            lanes: Lanes::best(),
        }
    }

    /// Takes `lanes` if the processor has it, else the scalar path (tests: every path gives
    /// the same times).
    #[cfg(test)]
    pub fn set_lanes(&mut self, lanes: Lanes) {
        self.lanes = if lanes.available() {
            lanes
        } else {
            Lanes::Scalar
        };
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

    /// Lanes open (at most [`analysed_depth`](Self::analysed_depth)).
    pub fn width(&self) -> usize {
        self.width
    }

    /// The time the last timestamp call computed, one per analysed level (tests).
    #[cfg(test)]
    pub fn last_time(&self) -> Vec<u64> {
        self.analysed
            .iter()
            .map(|l| self.t[l.lane as usize])
            .collect()
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
            // While the parent's lane holds no time above 0 (its critical path is 0 and no
            // hoist wrote one), every value and granule made in the parent's instance
            // reads 0 at both levels, as one made before either, so everything made in
            // the new instance gets the same time at both: one lane computes both, and its
            // critical path at the exit is the new instance's.
            let owns_lane = !(self.config.share_lanes
                && self.width > 0
                && self.cps[self.width - 1] == 0
                && !self.hoisted[self.width - 1]);
            if owns_lane {
                self.versions.enter();
                self.memory.vsm.enter();
                self.cps[self.width] = 0;
                self.hoisted[self.width] = false;
                self.width += 1;
            }
            self.analysed.push(Analysed {
                start: self.clock,
                children_work: 0,
                children_cp: 0,
                lane: (self.width - 1) as u32,
                owns_lane,
            });
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

    /// Whether [`exit`](Self::exit) closes a lane (the innermost level is analysed and has a
    /// lane of its own): the only exit that can shrink the shadow memory.
    #[inline]
    pub fn exit_closes_lane(&self) -> bool {
        self.levels.len() == self.analysed.len()
            && self.analysed.last().is_some_and(|a| a.owns_lane)
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
        let cp = self.cps[own.lane as usize];
        if own.owns_lane {
            self.versions.exit();
            self.memory.vsm.exit();
            self.width -= 1;
        }
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

    /// A static leaf's instance inside `n` − 1 calls that hold nothing else, its work already
    /// added (docs/hcpa.md, "Static leaves"): as `n` [`enter`](Self::enter)s and
    /// [`exit`](Self::exit)s with nothing between but work, whose critical path the build
    /// computed, the same at each of their levels. Returns how many of them, outermost
    /// first, are analysed (the others are skipped, as deeper than `max_depth`); the
    /// caller records their statistics.
    pub fn leaf(&mut self, n: u32, work: u64, cp: u64) -> u32 {
        let room = self.config.max_depth.saturating_sub(self.levels.len());
        let analysed = (n as usize).min(room) as u32;
        self.skipped += u64::from(n - analysed);
        if analysed > 0 {
            if let Some(parent) = self.analysed.last_mut() {
                parent.children_work = parent.children_work.saturating_add(work);
                parent.children_cp = parent.children_cp.saturating_add(cp);
            }
        }
        analysed
    }

    /// Statistics and times start anew (a reset, a forked child): every open level is as if
    /// entered now (new versions, so every time recorded before reads 0; work and critical
    /// paths from 0), memory forgets every time.
    pub fn restart(&mut self) {
        let depth = self.width;
        for a in &mut self.analysed {
            *a = Analysed {
                start: self.clock,
                children_work: 0,
                children_cp: 0,
                ..*a
            };
        }
        self.cps[..depth].fill(0);
        self.hoisted[..depth].fill(false);
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
        self.memory.renew(self.width);
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
        let stride = (self.width + HEADROOM).min(self.config.max_depth);
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
    #[inline(always)]
    pub fn ts(&mut self, dst: u32, cands: &[Candidate]) {
        by_lanes!(self, ts, ts_wide, ts_scalar, (dst, cands))
    }

    /// Out of line: the entry points inline the dispatch only.
    #[inline(never)]
    fn ts_scalar(&mut self, dst: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let a = self.gather(frame, cands);
        self.finish(dst, frame, a, 0);
    }

    /// `__kage_hcpa_hoist`: `t = max(cands)` → `dst`, and no critical path raised (once
    /// per loop entry).
    #[inline(always)]
    pub fn hoist(&mut self, dst: u32, cands: &[Candidate]) {
        by_lanes!(self, hoist, hoist_wide, hoist_scalar, (dst, cands))
    }

    /// The levels where the hoisted time `t[..a]` is above 0 have had a time (see `enter`).
    #[inline(always)]
    fn mark_hoisted(&mut self, a: usize) {
        for (hoisted, &t) in self.hoisted.iter_mut().zip(&self.t[..a]) {
            *hoisted |= t > 0;
        }
    }

    /// Out of line: the entry points inline the dispatch only.
    #[inline(never)]
    fn hoist_scalar(&mut self, dst: u32, cands: &[Candidate]) {
        let frame = self.current_frame();
        let a = self.gather(frame, cands);
        self.mark_hoisted(a);
        if let Some((index, frame)) = frame {
            if dst != NONE && dst < frame.slots && a > 0 {
                let (at, width) = self.slot_to_write(index, frame, dst, a);
                self.slot_times[at..at + width].copy_from_slice(&self.t[..width]);
            }
        }
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
    #[inline(always)]
    pub fn load(&mut self, dst: u32, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        by_lanes!(
            self,
            load,
            load_wide,
            load_scalar,
            (dst, addr, size, cost, cands)
        )
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
    #[inline(always)]
    pub fn store(&mut self, addr: u64, size: u64, cost: u32, cands: &[Candidate]) {
        by_lanes!(
            self,
            store,
            store_wide,
            store_scalar,
            (addr, size, cost, cands)
        )
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
        let width = self.width;
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
        // As a `ts` to no slot (on the lane paths), which leaves the time in `t`.
        self.ts(NONE, cands);
        let a = self.width;
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
        // As a `ts` to no slot (on the lane paths), which leaves the time in `t`.
        self.ts(NONE, cands);
        let a = self.width;
        let frame = self.current_frame();
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
        let a = self.width;
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
        let a = self.width;
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

    /// Where slot `dst` of the current `frame` is written at the `a` levels open now, as
    /// [`slot_to_write`](Self::slot_to_write) (`None`: nothing to write): its first time, in
    /// whole chunks (`lanes.rs`), and the number of levels written.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn slot_out(
        &mut self,
        dst: u32,
        frame: Option<(usize, Frame)>,
        a: usize,
    ) -> Option<(*mut u64, usize)> {
        let (index, frame) = frame?;
        if dst == NONE || dst >= frame.slots || a == 0 {
            return None;
        }
        let (at, width) = self.slot_to_write(index, frame, dst, a);
        let out = self.slot_times[at..at + width.next_multiple_of(LANES)].as_mut_ptr();
        Some((out, width))
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
