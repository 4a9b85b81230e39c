//! The memory footprint profiler's shadow (paper §5.1): for every active region level, how
//! many distinct locations (and cache lines) its current instance touched.
//!
//! # The tag and its encoding
//!
//! A location's tag vector holds one bit per active level: "touched by this level's current
//! instance". By the inclusion property (a location touched in a region was touched in all
//! its ancestors), valid vectors are always 1s followed by 0s, so a vector is its run length:
//! one byte, the number of leading levels that touched it. Everything below works on that
//! byte directly:
//!
//! - **validation** clamps it to the number of levels still valid (Theorem 1,
//!   [`max_valid_level`]) — per location (SlimTV) or per tag table (BulkTV);
//! - an access at depth `d` (levels `0..d` active) to a location whose valid run length is
//!   `v < d` makes levels `v..d` go 0→1: their counters each gain one location
//!   (**footprint update**), and the byte becomes `d` (**tag update**). When `v == d`
//!   nothing changes and nothing is written.
//!
//! A cache line can only be new at level `L` when some location in it is new at `L`
//! (inclusion again), so the line shadow is consulted only on a location's first touch.
//!
//! # Implementations ([`FpKind`], the `vsm=` option)
//!
//! - `baseline` (§3.1, §6.1): the crate's [`BaselineVsm`] with `bool` tags — a version beside
//!   every 1-bit tag, vectors as long as the deepest level seen (the paper's baseline).
//! - `slim` (SlimTV, §3.2): the run-length byte plus one 8-byte version per location.
//! - `bulk` (SlimTV + BulkTV, §3.3, Figure 5): run-length bytes in 64 KiB tag tables, one
//!   version per table (the paper's footprint configuration).
//! - `palette` (the default): `bulk` with 4 KiB tag tables kept in one of four forms: one
//!   value for the whole table (no array); up to four values as a palette (a value per code)
//!   and a code per location, of one bit (two codes: 1/8 of the bytes) or two bits (four
//!   codes: 1/4); or the byte array, only when five values are needed at once.
//!
//! Both BulkTV kinds remember, per table, an upper bound of its values (`max`: no scrub when
//! Theorem 1 leaves every level up to it valid) and, for byte arrays, one per chunk of 64
//! units (1/64 more memory): a scrub clamps only the chunks whose bound exceeds the scrub
//! level. A function called again and again, an inner loop walking a column, a recursion
//! unwinding, thus cost the chunks their instances touched, not whole tables (Figure 5
//! scrubs whole tables, which makes nested loops over large arrays quadratic).
//!
//! # Palette tables
//!
//! A scrub of a coded table clamps its palette, O(4), never its codes; two codes may then
//! hold the same value, and all of them one value makes the table one value again. A raise
//! of a range to `d` counts the range's units per code below `d` (the counters' input) and
//! gives them a code of value `d`: the one already holding `d`; else a code whose units all
//! lie in the range takes the value `d` in place (every such code: no unit changes); else a
//! free code; else two codes of the same value are merged first (the merged code's units
//! rewritten, within the span of words each code keeps); else one-bit codes widen to two
//! bits, and a table of four distinct values none of which is raised whole becomes bytes.
//! Codes are compared, counted and set a word (64 or 32 units) at a time, a word all of one
//! code without a popcount. Each code keeps its count of units (free at 0) and its span of
//! words. So in a loop nest, where a table holds rows or elements of several instances
//! (older rows at some level, this instance's clamped one below `d`, the ones being raised),
//! an instance changes its range's codes and nothing else, without allocating; a column walk
//! (a new instance per access in each table) merges the code of the previous instance's
//! element, one word.
//!
//! A one-value table becomes one-bit codes on a partial write, widens on a third value, and
//! narrows back after a raise that leaves two codes in use when that raise covered a quarter
//! of the table or more (its cost is then of the order of the raise itself, and small writes
//! never switch forms back and forth). A byte array is re-encoded after a scrub that clamped
//! a quarter of its chunks, when it holds at most three values (a code left for the write
//! that follows the scrub, which is above every value): four stay bytes, since that write
//! would expand them again; and a table whose codes became bytes twice since it last held one
//! value (a stack under a recursion, which keeps needing five values) goes back only to one
//! value. A page (version, bound, form, palette, counts, spans) is 64 bytes.
//!
//! # Ranges
//!
//! Accesses of any size are applied a range at a time, split at table boundaries (the
//! run-length kinds; `baseline` and `slim` go unit by unit): a byte array is compared and
//! raised a word (8 bytes) at a time — a word already at `d` skipped, a word of one value
//! counted at once, 32 bytes of one value on long ranges —, coded tables as above, and the
//! counters are updated once per run of units with the same previous run length. The line
//! shadow is then touched over the lines from the first to the last new location of each
//! piece (the others are not new), except the line touched last since the last enter
//! (already at every active level). An access of at most 8 locations within one word of a
//! byte array or of codes takes a shorter path: one word loaded, compared and stored. A scrub
//! finds the chunks of a byte array to clamp 8 bounds at a time.
//!
//! # Deferred levels
//!
//! With `palette`, an entered level has no shadow level at first (module `deferred`; the
//! paper's kinds keep its scheme, a level per enter): its instance's unit
//! ranges wait in a 64-entry buffer, and if it exits before it needs one its footprint is
//! the size of their union, the ranges then passing to its parent. A level is given its
//! shadow level (outermost first) when the buffer fills; [`Footprint::flush`] gives every
//! open level one. Most instances (leaf calls, small loops) thus never start a version, and
//! neither their tables nor their parents' are scrubbed for them.
//!
//! Tags are bytes: at most [`MAX_LEVELS`] levels are tracked (the paper's 256-level limit);
//! [`Footprint::enter`] refuses deeper levels and the caller accounts for them.
//!
//! # Files
//!
//! This file holds the public API: [`FpKind`], [`FpConfig`], [`Touched`] and [`Footprint`]
//! (its levels and their counters, deferral, the access entry points). The rest, by concern:
//! `apply.rs` applies an access at the innermost level with a shadow level (the one-word
//! path, ranges, the line shadow, the counters); `presence.rs` is the presence shadow of
//! each kind and the dispatch between them (SlimTV included); `rle.rs` the BulkTV run-length
//! tables (the page cache, validation and chunk-bounded scrubs, the tag update); `palette.rs`
//! the codes of palette tables and the word-at-a-time operations on them; `forms.rs` the
//! changes of a table's form (raises of tables that are not bytes, widening, narrowing,
//! expansion to bytes, re-encoding after a scrub); `bytes.rs` the word-at-a-time operations
//! on byte arrays; `deferred.rs` the deferred levels.
//!
//! [`max_valid_level`]: crate::max_valid_level
//! [`BaselineVsm`]: crate::BaselineVsm

mod apply;
mod bytes;
mod deferred;
mod forms;
mod palette;
mod presence;
mod rle;
#[cfg(test)]
mod tests;

use crate::VersionStack;
use deferred::Deferred;
use presence::Presence;
use std::fmt;
use std::str::FromStr;

/// The deepest level a run-length byte can describe (the root level included).
pub const MAX_LEVELS: usize = 255;

/// Segment tables of 1024 tag table slots (8 KiB) for every kind: the paper's 4 GiB
/// segments cost 512 KiB each, several times per thread, which small programs notice.
const SEGMENT_BITS: u32 = 10;

/// The footprint shadow implementation (`vsm=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FpKind {
    /// A version per tag (the paper's baseline).
    Baseline,
    /// SlimTV: run-length byte + a version per location.
    Slim,
    /// SlimTV + BulkTV: run-length bytes, a version per 64 KiB tag table.
    Bulk,
    /// BulkTV with 4 KiB tag tables stored as one value, a palette of up to four values with
    /// a code of one or two bits per location, or one byte per location.
    Palette,
}

impl FpKind {
    /// Every kind, in the paper's order of techniques.
    pub const ALL: [FpKind; 4] = [
        FpKind::Baseline,
        FpKind::Slim,
        FpKind::Bulk,
        FpKind::Palette,
    ];
    /// The default: the best the library offers.
    pub const DEFAULT: FpKind = FpKind::Palette;

    /// Whether levels are deferred ([`deferred`]): a technique of ours, for `palette`
    /// only, so that `baseline`, `slim` and `bulk` stay the paper's techniques and the
    /// paper's comparison (Figure 7) can be reproduced.
    pub const fn defers_levels(self) -> bool {
        matches!(self, FpKind::Palette)
    }

    /// The short name.
    pub const fn name(self) -> &'static str {
        match self {
            FpKind::Baseline => "baseline",
            FpKind::Slim => "slim",
            FpKind::Bulk => "bulk",
            FpKind::Palette => "palette",
        }
    }
}

impl fmt::Display for FpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FpKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FpKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = FpKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown footprint VSM `{s}` (one of: {})", names.join(", "))
            })
    }
}

/// What the footprint shadow measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpConfig {
    /// The implementation.
    pub kind: FpKind,
    /// log2 of the bytes per location (0: byte, 3: word; `line_shift`: the line itself).
    pub location_shift: u32,
    /// log2 of the cache line size.
    pub line_shift: u32,
    /// log2 of the locations per tag table; `None`: the kind's own (64 KiB of bytes for
    /// baseline, slim and bulk, 4 KiB for palette; tables never cover less than 64 locations).
    pub table_bits: Option<u32>,
}

impl FpConfig {
    /// `kind` at byte granularity with 64-byte lines.
    pub fn new(kind: FpKind) -> Self {
        Self {
            kind,
            location_shift: 0,
            line_shift: 6,
            table_bits: None,
        }
    }

    /// Whether locations are the lines themselves (no separate line shadow).
    pub fn locations_are_lines(&self) -> bool {
        self.location_shift >= self.line_shift
    }

    fn table_bits_for(&self, unit_shift: u32) -> u32 {
        self.table_bits.unwrap_or_else(|| {
            let span: u32 = if self.kind == FpKind::Palette { 12 } else { 16 };
            span.saturating_sub(unit_shift).max(6)
        })
    }
}

/// The counters of one level's instance: distinct locations and distinct lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// Distinct locations.
    pub locations: u64,
    /// Distinct cache lines.
    pub lines: u64,
}

/// One thread's footprint shadow: a root level that is always active (the thread's whole
/// run) plus one level per active region.
#[derive(Debug)]
pub struct Footprint {
    config: FpConfig,
    versions: VersionStack,
    /// Per level (root first): the current instance's distinct locations.
    locations: Vec<u64>,
    /// Per level: the current instance's distinct lines.
    lines: Vec<u64>,
    location_shadow: Option<Presence>,
    line_shadow: Presence,
    /// A line touched since the last enter (so at every active level, also after exits:
    /// the instances still active are those it was touched in; touching it again changes
    /// nothing), when there is a location shadow; `u64::MAX`: none (no line number is that
    /// large then).
    last_line: u64,
    changed: bool,
    /// The innermost levels, while they have no shadow level of their own (see
    /// [`deferred`]).
    deferred: Deferred,
}

impl Footprint {
    /// An empty shadow at the root level (depth 0: no region).
    pub fn new(config: FpConfig) -> Self {
        let location_shadow = (!config.locations_are_lines())
            .then(|| Presence::new(config.kind, config.table_bits_for(config.location_shift)));
        let line_shadow = Presence::new(config.kind, config.table_bits_for(config.line_shift));
        let mut fp = Self {
            config,
            versions: VersionStack::new(),
            locations: Vec::with_capacity(64),
            lines: Vec::with_capacity(64),
            location_shadow,
            line_shadow,
            last_line: u64::MAX,
            changed: false,
            deferred: Deferred::new(MAX_LEVELS),
        };
        fp.push_level();
        fp
    }

    /// The configuration.
    pub fn config(&self) -> &FpConfig {
        &self.config
    }

    fn push_level(&mut self) {
        self.last_line = u64::MAX;
        self.versions.enter();
        self.locations.push(0);
        self.lines.push(0);
        if let Some(shadow) = &mut self.location_shadow {
            shadow.enter();
        }
        self.line_shadow.enter();
    }

    /// Active region levels (the root not counted).
    #[inline]
    pub fn depth(&self) -> usize {
        self.versions.depth() - 1 + self.deferred.levels()
    }

    /// Whether a region entered now would be measured ([`enter`](Self::enter) would accept
    /// it).
    #[inline]
    pub fn can_enter(&self) -> bool {
        self.depth() + 1 < MAX_LEVELS
    }

    /// What an instance whose accesses are the byte ranges `ranges` (first byte, last byte;
    /// reordered here) touched, as [`exit`](Self::exit) would count it: a region entered,
    /// given these accesses and left without children, counted without entering it. Its
    /// parent does not see them: the caller reports them with [`access`](Self::access).
    pub fn touched_by(&self, ranges: &mut [[u64; 2]]) -> Touched {
        if let [[first, last]] = *ranges {
            return self.touched_by_range(first, last);
        }
        let shift = self.unit_shift();
        let mut kept = ranges.len();
        if ranges.len() <= 32 {
            // A leaf's ranges, often in order, a few walks interleaved, or the same ones
            // again (a loop's): an insertion sort by first unit (`Runs` takes overlapping
            // ranges in any order of their ends), a range that starts inside or right after
            // the one before it joining it.
            kept = 0;
            for i in 0..ranges.len() {
                let x = [ranges[i][0] >> shift, ranges[i][1] >> shift];
                let mut j = kept;
                while j > 0 && ranges[j - 1][0] > x[0] {
                    j -= 1;
                }
                if j > 0 && x[0] <= ranges[j - 1][1].saturating_add(1) {
                    ranges[j - 1][1] = ranges[j - 1][1].max(x[1]);
                } else {
                    if j < kept {
                        ranges.copy_within(j..kept, j + 1);
                    }
                    ranges[j] = x;
                    kept += 1;
                }
            }
        } else {
            for r in ranges.iter_mut() {
                *r = [r[0] >> shift, r[1] >> shift];
            }
            ranges.sort_unstable_by_key(|r| r[0]);
        }
        let mut runs = deferred::Runs::new(self.units_per_line_shift());
        for &[first, last] in ranges[..kept].iter() {
            runs.add(first, last);
        }
        runs.finish()
    }

    /// [`touched_by`](Self::touched_by) one range, bytes `first..=last` (most leaves: a
    /// helper's one load).
    pub fn touched_by_range(&self, first: u64, last: u64) -> Touched {
        let shift = self.unit_shift();
        let mut runs = deferred::Runs::new(self.units_per_line_shift());
        runs.add(first >> shift, last >> shift);
        runs.finish()
    }

    /// Enters a region. Returns `false`, changing nothing, when [`MAX_LEVELS`] are active.
    ///
    /// With `palette`, the level is deferred: it has no shadow level until it has children
    /// of its own that need it or accesses too many ranges ([`deferred`]).
    #[inline]
    pub fn enter(&mut self) -> bool {
        if self.depth() + 1 >= MAX_LEVELS {
            return false;
        }
        if self.config.kind.defers_levels() {
            self.deferred.enter();
        } else {
            self.push_level();
            self.changed = true;
        }
        true
    }

    /// Gives the outermost deferred level its shadow level and applies its own ranges.
    fn materialize_outermost(&mut self) {
        self.push_level();
        self.changed = true;
        self.apply_spans(self.deferred.outermost_len());
        self.deferred.drop_outermost();
    }

    /// Applies the first `n` deferred spans at the depth of the innermost level with a
    /// shadow level.
    fn apply_spans(&mut self, n: usize) {
        for i in 0..n {
            let span = self.deferred.spans()[i];
            for k in 0..span.count {
                let (first, last) = span.element(k);
                self.apply_units(first, last);
            }
        }
    }

    /// Applies what every deferred level accessed so far: [`total`](Self::total) and
    /// [`current`](Self::current) are then exact (between calls they may lag behind what
    /// the deferred levels accessed). Exits stay exact without it.
    pub fn flush(&mut self) {
        while self.deferred.levels() > 0 {
            self.materialize_outermost();
        }
    }

    /// Records an access for the innermost deferred level with `push` (one of
    /// [`Deferred`]'s), making room when the buffer is full. Returns `false` when making
    /// room materialized every level: the access is then the innermost level's, in the
    /// shadow.
    #[inline(always)]
    fn defer(&mut self, push: impl Fn(&mut Deferred) -> bool) -> bool {
        push(&mut self.deferred) || self.defer_after_making_room(push)
    }

    /// [`defer`](Self::defer) when the buffer is full: kept out of the accesses' path.
    #[cold]
    #[inline(never)]
    fn defer_after_making_room(&mut self, push: impl Fn(&mut Deferred) -> bool) -> bool {
        self.make_room();
        if self.deferred.levels() == 0 {
            return false;
        }
        let pushed = push(&mut self.deferred);
        debug_assert!(pushed, "make_room leaves room");
        true
    }

    /// Makes room in the deferred levels' buffer.
    #[cold]
    fn make_room(&mut self) {
        self.deferred.compact();
        while self.deferred.len() > deferred::COMPACT_TO && self.deferred.levels() > 0 {
            self.materialize_outermost();
        }
    }

    /// The shift from units (locations, or lines when locations are lines) to lines.
    #[inline]
    fn units_per_line_shift(&self) -> u32 {
        self.config.line_shift - self.unit_shift()
    }

    #[inline]
    fn unit_shift(&self) -> u32 {
        self.config.location_shift.min(self.config.line_shift)
    }

    /// Exits the innermost region and returns what its instance touched.
    ///
    /// # Panics
    /// At depth 0.
    pub fn exit(&mut self) -> Touched {
        assert!(self.depth() > 0, "kage-vsm: footprint exit at depth 0");
        if self.deferred.levels() > 0 {
            let touched = self.deferred.exit(self.units_per_line_shift());
            if self.deferred.levels() == 0 {
                // The parent has its shadow level (the root, at least): apply the union.
                self.apply_spans(self.deferred.len());
                self.deferred.clear();
            }
            return touched;
        }
        self.versions.exit();
        if let Some(shadow) = &mut self.location_shadow {
            shadow.exit();
        }
        self.line_shadow.exit();
        Touched {
            locations: self.locations.pop().unwrap_or(0),
            lines: self.lines.pop().unwrap_or(0),
        }
    }

    /// What the thread touched while any region was active (the root level), as of the
    /// last [`flush`](Self::flush) or exit of an outermost deferred level.
    pub fn total(&self) -> Touched {
        Touched {
            locations: self.locations[0],
            lines: self.lines[0],
        }
    }

    /// What the current instance at `level` (0: outermost region) has touched so far, as
    /// of the last [`flush`](Self::flush).
    pub fn current(&self, level: usize) -> Touched {
        Touched {
            locations: self.locations[level + 1],
            lines: self.lines[level + 1],
        }
    }

    /// `size` bytes at `addr` are accessed. Ignored at depth 0 (no region active).
    ///
    /// Any size: a range is applied a tag table at a time, and the line shadow is touched
    /// only over the span of each table's piece whose locations were new.
    #[inline]
    pub fn access(&mut self, addr: u64, size: u64) {
        if size == 0 {
            return;
        }
        if self.deferred.levels() > 0 {
            let shift = self.unit_shift();
            let (first, last) = (addr >> shift, addr.saturating_add(size - 1) >> shift);
            if self.defer(|d| d.push(first, last)) {
                return;
            }
        }
        if self.versions.depth() <= 1 {
            return;
        }
        self.apply(addr, size);
    }

    /// The accesses of bytes `first..=last` of each of `ranges`, in order: the same as an
    /// [`access`](Self::access) of each, with the common case (a deferred level takes the
    /// range) in one loop, not a call per range.
    pub fn access_ranges(&mut self, ranges: &[[u64; 2]]) {
        let shift = self.unit_shift();
        for &[first, last] in ranges {
            let size = last.wrapping_sub(first).wrapping_add(1);
            if size != 0 && self.deferred.levels() > 0 {
                let last_unit = first.saturating_add(size - 1) >> shift;
                if self.deferred.push(first >> shift, last_unit) {
                    continue;
                }
            }
            self.access(first, size);
        }
    }

    /// `count` accesses of `width` bytes, the first at `addr`, each `stride` bytes after
    /// the one before (a hoisted loop's chunk). Ignored at depth 0.
    pub fn access_strided(&mut self, addr: u64, width: u64, stride: u64, count: u64) {
        if count == 1 {
            // A segment's report.
            self.access(addr, width);
            return;
        }
        if width == 0 || count == 0 {
            return;
        }
        let shift = self.unit_shift();
        if self.deferred.levels() > 0 && stride & ((1 << shift) - 1) == 0 {
            // Whole units apart: the same units in every element, shifted.
            let (first, last) = (addr >> shift, addr.saturating_add(width - 1) >> shift);
            if self.defer(|d| d.push_strided(first, last, stride >> shift, count)) {
                return;
            }
        }
        if stride <= width {
            // Elements that overlap or touch make one range.
            let len = (count - 1).saturating_mul(stride).saturating_add(width);
            self.access(addr, len);
        } else {
            for k in 0..count {
                self.access(addr.wrapping_add(k.wrapping_mul(stride)), width);
            }
        }
    }

    /// Whether the heap use may have changed since the last call (then call
    /// [`heap_bytes`](Self::heap_bytes)); cheap enough for every access.
    #[inline]
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// How many tag tables of the location shadow (the line shadow when locations are lines)
    /// are in each form, by name (a diagnostic, O(tables)); empty for kinds without forms.
    pub fn table_forms(&self) -> Vec<(&'static str, usize)> {
        match self.location_shadow.as_ref().unwrap_or(&self.line_shadow) {
            Presence::Rle(rle) => rle.forms(),
            _ => Vec::new(),
        }
    }

    /// Exact bytes this structure holds on the heap (O(1)).
    pub fn heap_bytes(&self) -> usize {
        self.deferred.heap_bytes()
            + self.versions.heap_bytes()
            + (self.locations.capacity() + self.lines.capacity()) * size_of::<u64>()
            + self
                .location_shadow
                .as_ref()
                .map_or(0, Presence::heap_bytes)
            + self.line_shadow.heap_bytes()
    }
}
