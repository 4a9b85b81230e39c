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

mod deferred;

use crate::page_table::PageTable;
use crate::{max_valid_level, BaselineVsm, Config, Granularity, VectorShadow, VersionStack};
use deferred::Deferred;
use std::fmt;
use std::str::FromStr;

/// The deepest level a run-length byte can describe (the root level included).
pub const MAX_LEVELS: usize = 255;

/// Segment tables of 1024 tag table slots (8 KiB) for every kind: the paper's 4 GiB
/// segments cost 512 KiB each, several times per thread, which small programs notice.
const SEGMENT_BITS: u32 = 10;

/// Entries of the per-shadow page cache (a kernel walking a few arrays at once hits it).
const PAGE_CACHE: usize = 16;

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

    /// Units `first..=last` are accessed at the depth of the innermost level with a shadow
    /// level (the root included).
    fn apply_units(&mut self, first: u64, last: u64) {
        let shift = self.unit_shift();
        let addr = first << shift;
        let size = (last - first).saturating_add(1).saturating_mul(1 << shift);
        self.apply(addr, size);
    }

    /// An access at the depth of the innermost level with a shadow level.
    #[inline]
    fn apply(&mut self, addr: u64, size: u64) {
        if size <= 64 && self.access_word(addr, size) {
            return;
        }
        self.access_range(addr, size);
    }

    /// The usual access, in one word: at most 8 locations in one table, once validated. As
    /// bytes: all new with the same previous run length, or none new; a coded or one-value
    /// table: any (one word of codes when they lie in one, else the table's range update).
    /// Returns `false`, changing nothing but the validation, for anything else.
    #[inline(always)]
    fn access_word(&mut self, addr: u64, size: u64) -> bool {
        let Some(Presence::Rle(rle)) = &mut self.location_shadow else {
            return false;
        };
        let shift = self.config.location_shift;
        let (first, last) = (addr >> shift, addr.saturating_add(size - 1) >> shift);
        let table_bits = rle.table_bits;
        let mask = (1u64 << table_bits) - 1;
        let (lo, hi) = ((first & mask) as usize, (last & mask) as usize);
        if last - first >= 8
            || first >> table_bits != last >> table_bits
            || lo + 8 > 1 << table_bits
        {
            return false;
        }
        let current = self.versions.as_slice();
        let d = current.len();
        let page = rle.validated(first >> table_bits, current) as *mut RlePage;
        self.changed |= std::mem::take(&mut rle.changed);
        // SAFETY: as in `RlePresence::touch`.
        let page = unsafe { &mut *page };
        let d8 = d as u8;
        let (bytes, chunk_max) = match &mut page.repr {
            Repr::Bytes { bytes, chunk_max } => (bytes, chunk_max),
            &mut Repr::Uniform(v) if v >= d8 => return true,
            // Kept out of line: the byte path above stays small enough to inline.
            _ => return self.access_coded(page, first, lo, hi),
        };
        // `n <= 8` units from `lo`; the word's other bytes are kept.
        let n = hi - lo + 1;
        let keep = if n == 8 { 0 } else { u64::MAX << (8 * n) };
        let word = load(bytes, lo);
        let dd = ONES * d8 as u64;
        if bytes_less(word, dd) & !keep == 0 {
            return true;
        }
        let valid = word & 0xff;
        if (word ^ (valid * ONES)) & !keep != 0 {
            return false;
        }
        store(bytes, lo, (word & keep) | (dd & !keep));
        for c in [lo >> CHUNK_SHIFT, hi >> CHUNK_SHIFT] {
            chunk_max[c] = chunk_max[c].max(d8);
        }
        page.max = page.max.max(d8);
        add_levels(&mut self.locations, valid as usize, d, n as u64);
        self.touch_lines_of(first, last, d);
        true
    }

    /// [`access_word`](Self::access_word) on a validated coded table, or one of a single
    /// value below the depth.
    #[inline(never)]
    fn access_coded(&mut self, page: *mut RlePage, first: u64, lo: usize, hi: usize) -> bool {
        let Some(Presence::Rle(rle)) = &mut self.location_shadow else {
            unreachable!("kage-vsm: a coded table without a run-length shadow");
        };
        let table_bits = rle.table_bits;
        let d = self.versions.depth();
        // SAFETY: as in `RlePresence::touch`; `access_word` holds no other reference to it.
        let page = unsafe { &mut *page };
        let locations = &mut self.locations;
        let mut runs = Runs::new(|valid, n| add_levels(locations, valid, d, n));
        let (delta, span) = page.raise_compressed(lo, hi, d as u8, 1 << table_bits, &mut runs);
        runs.finish();
        if delta != 0 {
            rle.array_bytes = rle.array_bytes.wrapping_add_signed(delta);
            self.changed = true;
        }
        if let Some((a, b)) = span {
            let base = first & !((1u64 << table_bits) - 1);
            self.touch_lines_of(base + a as u64, base + b as u64, d);
        }
        true
    }

    /// [`touch_lines`] for [`access_word`](Self::access_word).
    #[inline(always)]
    fn touch_lines_of(&mut self, first: u64, last: u64, d: usize) {
        debug_assert_eq!(d, self.versions.depth());
        touch_lines(
            &mut self.line_shadow,
            &mut self.last_line,
            &mut self.lines,
            (first, last),
            self.config.line_shift - self.config.location_shift,
            self.versions.as_slice(),
        );
        // The same kind as the location shadow: it reports its own heap changes.
        self.changed |= self.line_shadow.take_changed();
    }

    /// [`access`](Self::access) in general.
    fn access_range(&mut self, addr: u64, size: u64) {
        let d = self.versions.depth();
        let last = addr.saturating_add(size - 1);
        let current = self.versions.as_slice();
        let (locations, lines) = (&mut self.locations, &mut self.lines);
        let line_shift = self.config.line_shift;
        let line_shadow = &mut self.line_shadow;
        let last_line = &mut self.last_line;
        let any = match &mut self.location_shadow {
            None => line_shadow.touch_span(
                addr >> line_shift,
                last >> line_shift,
                d,
                current,
                |valid, n| {
                    add_levels(lines, valid, d, n);
                    add_levels(locations, valid, d, n);
                },
                |_, _| {},
            ),
            Some(shadow) => {
                let shift = self.config.location_shift;
                // `shift < line_shift`: location `u` lies in line `u >> per_line`.
                let per_line = line_shift - shift;
                let any = shadow.touch_span(
                    addr >> shift,
                    last >> shift,
                    d,
                    current,
                    |valid, n| add_levels(locations, valid, d, n),
                    |from, to| {
                        touch_lines(line_shadow, last_line, lines, (from, to), per_line, current);
                    },
                );
                self.changed |= shadow.take_changed();
                any
            }
        };
        // Run-length tables report their own heap changes; the others may have created a
        // table when a unit was new.
        self.changed |= (any && !matches!(self.line_shadow, Presence::Rle(_)))
            | self.line_shadow.take_changed();
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

/// Touches the lines of locations `new.0..=new.1` (`per_line`: log2 of the locations per
/// line), which include every location just new, and counts the new lines in `lines`.
///
/// A line is new at a level only if one of its locations is (inclusion); touching a line
/// that is not new changes nothing, so the span of the new locations is enough, without
/// `last_line`, touched since the last enter.
#[inline(always)]
fn touch_lines(
    line_shadow: &mut Presence,
    last_line: &mut u64,
    lines: &mut [u64],
    new: (u64, u64),
    per_line: u32,
    current: &[u64],
) {
    let (mut from, to) = (new.0 >> per_line, new.1 >> per_line);
    if from == *last_line {
        if from == to {
            return;
        }
        from += 1;
    }
    *last_line = to;
    let d = current.len();
    line_shadow.touch_span(
        from,
        to,
        d,
        current,
        |valid, n| add_levels(lines, valid, d, n),
        |_, _| {},
    );
}

#[inline]
fn add_levels(counters: &mut [u64], from: usize, to: usize, n: u64) {
    for c in &mut counters[from..to] {
        *c += n;
    }
}

/// A presence shadow over units (locations or lines): one of the implementations.
// Two per footprint shadow, used on every access: the run-length kind's page cache stays
// inline rather than behind another pointer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Presence {
    Baseline(BaselineVsm<bool>),
    Slim(SlimPresence),
    Rle(RlePresence),
}

impl Presence {
    fn new(kind: FpKind, table_bits: u32) -> Self {
        match kind {
            FpKind::Baseline => {
                // Units are pre-shifted: the VSM sees them as bytes.
                let config = Config {
                    granularity: Granularity::Byte,
                    table_bits,
                    segment_bits: SEGMENT_BITS,
                    ..Config::footprint()
                };
                Presence::Baseline(BaselineVsm::new(&config))
            }
            FpKind::Slim => Presence::Slim(SlimPresence::new(table_bits)),
            FpKind::Bulk => Presence::Rle(RlePresence::new(table_bits, false)),
            FpKind::Palette => Presence::Rle(RlePresence::new(table_bits, true)),
        }
    }

    fn enter(&mut self) {
        if let Presence::Baseline(vsm) = self {
            vsm.enter();
        }
    }

    fn exit(&mut self) {
        if let Presence::Baseline(vsm) = self {
            vsm.exit();
        }
    }

    /// Marks `unit` touched at levels `0..d` (`current` has `d` versions) and returns how
    /// many leading levels had touched it before (`d`: nothing new).
    #[inline]
    fn touch(&mut self, unit: u64, d: usize, current: &[u64]) -> usize {
        match self {
            Presence::Baseline(vsm) => {
                let mut first = d;
                vsm.write_with(unit, 0..d, true, &mut |level| first = first.min(level));
                first
            }
            Presence::Slim(slim) => slim.touch(unit, d, current),
            Presence::Rle(rle) => rle.touch(unit, d, current),
        }
    }

    /// Marks units `first..=last` touched at levels `0..d`, calling `new(valid, n)` for
    /// new units (`n` of them whose valid run length was `valid < d`, in runs merged in any
    /// way) and `span(from, to)` with spans of units covering every new unit (disjoint, in
    /// order; units in a span may also be old). Returns whether any unit was new.
    #[inline]
    fn touch_span(
        &mut self,
        first: u64,
        last: u64,
        d: usize,
        current: &[u64],
        mut new: impl FnMut(usize, u64),
        mut span: impl FnMut(u64, u64),
    ) -> bool {
        if let Presence::Rle(rle) = self {
            if first == last {
                // One unit (a line, usually): the plain tag update.
                let valid = rle.touch(first, d, current);
                if valid < d {
                    new(valid, 1);
                    span(first, first);
                }
                return valid < d;
            }
            let mask = (1u64 << rle.table_bits) - 1;
            let mut any = false;
            let mut from = first;
            loop {
                let to = last.min(from | mask);
                if let Some((a, b)) = rle.touch_range(from, to, d, current, &mut new) {
                    span(a, b);
                    any = true;
                }
                if to == last {
                    return any;
                }
                from = to + 1;
            }
        }
        let mut covered: Option<(u64, u64)> = None;
        for unit in first..=last {
            let valid = self.touch(unit, d, current);
            if valid < d {
                new(valid, 1);
                covered = Some((covered.map_or(unit, |(a, _)| a), unit));
            }
        }
        if let Some((a, b)) = covered {
            span(a, b);
        }
        covered.is_some()
    }

    /// Whether the heap use changed without a new touch (a scrub freed an array).
    #[inline]
    fn take_changed(&mut self) -> bool {
        match self {
            Presence::Rle(rle) => std::mem::take(&mut rle.changed),
            _ => false,
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Presence::Baseline(vsm) => vsm.heap_bytes(),
            Presence::Slim(slim) => slim.heap_bytes(),
            Presence::Rle(rle) => rle.heap_bytes(),
        }
    }
}

/// SlimTV: a run-length byte and the version it was written under, per unit.
#[derive(Debug)]
struct SlimPresence {
    table_bits: u32,
    pages: PageTable<SlimPage>,
}

#[derive(Debug)]
struct SlimPage {
    tags: Box<[u8]>,
    versions: Box<[u64]>,
}

impl SlimPresence {
    fn new(table_bits: u32) -> Self {
        Self {
            table_bits,
            pages: PageTable::new(SEGMENT_BITS),
        }
    }

    #[inline]
    fn touch(&mut self, unit: u64, d: usize, current: &[u64]) -> usize {
        let units = 1usize << self.table_bits;
        let offset = (unit & (units as u64 - 1)) as usize;
        let page = self
            .pages
            .get_or_insert_with(unit >> self.table_bits, || SlimPage {
                tags: vec![0; units].into_boxed_slice(),
                versions: vec![0; units].into_boxed_slice(),
            });
        let tag = page.tags[offset] as usize;
        if tag >= d && page.versions[offset] >= current[d - 1] {
            return d;
        }
        let valid = tag.min(max_valid_level(page.versions[offset], current));
        if valid < d {
            page.tags[offset] = d as u8;
            page.versions[offset] = current[d - 1];
        }
        valid
    }

    fn heap_bytes(&self) -> usize {
        let units = 1usize << self.table_bits;
        self.pages.heap_bytes() + self.pages.len() * units * (1 + size_of::<u64>())
    }
}

/// BulkTV over run-length bytes: one version per tag table.
#[derive(Debug)]
struct RlePresence {
    table_bits: u32,
    compress: bool,
    pages: PageTable<RlePage>,
    /// Recently used pages, direct-mapped by page number: (page number + 1, page), a
    /// pointer into a `Box` that lives as long as `pages` (0: empty slot).
    cached: [(u64, *mut RlePage); PAGE_CACHE],
    /// Bytes held by the pages' arrays.
    array_bytes: usize,
    /// `array_bytes` or the page count changed since the last `take_changed`.
    changed: bool,
}

// SAFETY: `cached` points into a box owned by `pages`; moving the whole structure to
// another thread moves the box's owner with it.
unsafe impl Send for RlePresence {}

#[derive(Debug)]
struct RlePage {
    /// The innermost version at the last validation; 0: never.
    version: u64,
    /// No unit of the page holds more than this.
    max: u8,
    /// How many times (saturating) codes became bytes since the page last held one value.
    expansions: u8,
    repr: Repr,
}

/// A page whose codes became bytes this many times since it last held one value goes back
/// to codes only as one value: the values it takes at once keep exceeding four (a recursion
/// over its stack), so re-encoding would be undone.
const MAX_EXPANSIONS: u8 = 2;

#[derive(Debug)]
enum Repr {
    /// Every unit holds this value.
    Uniform(u8),
    /// At most four values: a code of one or two bits per unit (palette tables only).
    Packed(Packed),
    /// A byte per unit, and per chunk of 64 units a bound on its bytes (`chunk_max`).
    Bytes {
        bytes: Box<[u8]>,
        chunk_max: Box<[u8]>,
    },
}

/// A table of at most four values: per unit a code of `width` bits, per code a value (a
/// palette). A scrub clamps the values, not the codes; a raise gives the raised units a code
/// whose value is the depth, found or made (a code raised whole takes the new value, a free
/// code is taken, or two codes of the same value are merged first).
#[derive(Debug)]
struct Packed {
    /// Bits per code.
    width: Width,
    /// Per code, its value. A code no unit holds is free, whatever its value; two codes may
    /// hold the same value (a scrub clamps both to the same level).
    value: [u8; 4],
    /// Per code, how many units hold it (together: the table's units).
    count: [u16; 4],
    /// Per code, the first and the last word of `codes` that may hold it (`NO_WORDS` for a
    /// free code): a merge rewrites the words of the code merged, not the whole table.
    words: [[u16; 2]; 4],
    /// Per code (bit `c`): its units lie in its first and its last word only, so a merge
    /// rewrites at most two words however far apart they are (a column walk leaves a code
    /// with this instance's element and the last one's, a row apart).
    ends: u8,
    /// The code given the depth at the last raise (a hint for the next one).
    hot: u8,
    /// Unit `i`'s code in bits `width * i..width * (i + 1)`.
    codes: Box<[u64]>,
}

/// Bits per code (an enum: its spare values hold [`Repr`]'s variant, so that a page is 64
/// bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Width {
    /// Codes 0 and 1.
    One = 1,
    /// Codes 0 to 3.
    Two = 2,
}

/// The words of a free code.
const NO_WORDS: [u16; 2] = [u16::MAX, 0];

/// The largest palette table, in units (`Packed::count` holds up to the table's units in 16
/// bits).
const MAX_PACKED_BITS: u32 = 15;

impl Packed {
    /// The codes some unit holds.
    #[inline]
    fn used(&self) -> impl Iterator<Item = usize> + '_ {
        (0..4).filter(|&c| self.count[c] != 0)
    }

    /// The value of every unit, if they all hold the same.
    #[inline]
    fn one_value(&self) -> Option<u8> {
        let mut used = self.used();
        let v = self.value[used.next()?];
        used.all(|c| self.value[c] == v).then_some(v)
    }

    fn max_value(&self) -> u8 {
        self.used().map(|c| self.value[c]).max().unwrap_or(0)
    }

    #[inline]
    fn value_at(&self, unit: usize) -> u8 {
        let width = self.width as usize;
        // 64 or 32 units per word (no division).
        let per_word_bits = 7 - width;
        let at = (unit & ((1 << per_word_bits) - 1)) * width;
        let code = self.codes[unit >> per_word_bits] >> at & ((1 << width) - 1);
        self.value[code as usize]
    }

    fn array_bytes(&self) -> usize {
        self.codes.len() * size_of::<u64>()
    }

    /// Code `code` may now hold units in words `first..=last`.
    #[inline]
    fn add_words(&mut self, code: usize, first: usize, last: usize) {
        let [f, l] = self.words[code];
        let (nf, nl) = (f.min(first as u16), l.max(last as u16));
        let is_end = |w: u16| w == nf || w == nl;
        let ends_only = last - first <= 1
            && is_end(first as u16)
            && is_end(last as u16)
            && (f > l || (self.ends >> code & 1 != 0 && is_end(f) && is_end(l)));
        self.ends = self.ends & !(1 << code) | (ends_only as u8) << code;
        self.words[code] = [nf, nl];
    }

    /// Code `code` holds no unit any more.
    fn free_words(&mut self, code: usize) {
        self.words[code] = NO_WORDS;
        self.ends &= !(1 << code);
    }

    /// The words a merge of code `c` into another rewrites.
    fn merge_cost(&self, c: usize) -> u16 {
        let [first, last] = self.words[c];
        if self.ends >> c & 1 != 0 {
            1 + (first != last) as u16
        } else {
            last - first + 1
        }
    }

    /// Two used codes of the same value, if any: (the one to merge, the one to keep), the
    /// merged one spanning the fewest words.
    fn duplicate(&self) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        let mut best_span = u16::MAX;
        for a in 0..4 {
            for b in a + 1..4 {
                if self.count[a] == 0 || self.count[b] == 0 || self.value[a] != self.value[b] {
                    continue;
                }
                let (sa, sb) = (self.merge_cost(a), self.merge_cost(b));
                let (pair, span) = if sa <= sb { ((a, b), sa) } else { ((b, a), sb) };
                if best.is_none() || span < best_span {
                    best = Some(pair);
                    best_span = span;
                }
            }
        }
        best
    }

    /// A used code of value `d`, if any (`hot` first).
    #[inline(always)]
    fn code_of(&self, d: u8) -> Option<usize> {
        let hot = self.hot as usize;
        if self.count[hot] != 0 && self.value[hot] == d {
            return Some(hot);
        }
        (0..4).find(|&c| self.count[c] != 0 && self.value[c] == d)
    }

    /// A code for the value `d` when none is used: a free one, or one freed by a merge.
    #[inline(always)]
    fn new_code<const W: u32>(&mut self, got: &mut [u16; 4]) -> Option<usize> {
        if let Some(free) = (0..1 << W).find(|&c| self.count[c] == 0) {
            return Some(free);
        }
        // The code raised last is usually small and now equal to another (a scrub clamped
        // it): merge it without a search.
        let hot = self.hot as usize;
        let (from, into) = match (0..4).find(|&c| c != hot && self.value[c] == self.value[hot]) {
            Some(other) if self.count[other] != 0 && self.count[hot] != 0 => {
                // Either way frees a code: rewrite the fewer words.
                if self.merge_cost(other) < self.merge_cost(hot) {
                    (other, hot)
                } else {
                    (hot, other)
                }
            }
            _ => self.duplicate()?,
        };
        event(if from == hot {
            "word merge (last)"
        } else if into == hot {
            "word merge (into last)"
        } else {
            "word merge"
        });
        self.merge::<W>(from, into);
        got[into] += std::mem::take(&mut got[from]);
        Some(from)
    }

    /// [`RlePage::raise_compressed`] for units `lo..=hi` of one word of codes, when no code
    /// runs out of units and no code must be added: the usual small access. Returns `None`,
    /// having changed nothing but maybe merged two codes of the same value, when the
    /// general path is needed.
    #[inline(always)]
    fn raise_in_word<const W: u32>(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> Option<Option<(usize, usize)>> {
        let per_word = 64 / W as usize;
        let w = lo / per_word;
        debug_assert_eq!(hi / per_word, w);
        let word = self.codes[w];
        let range = unit_range::<W>(lo % per_word, hi % per_word);
        let first = (word >> range.trailing_zeros() & ((1 << W) - 1)) as usize;
        let mut got = [0u16; 4];
        if code_eq::<W>(word, first) & range == range {
            // The usual case, one code over the range (no popcount: without the instruction,
            // counting would be most of the work).
            if self.value[first] >= d {
                return Some(None);
            }
            let n = (hi - lo + 1) as u16;
            if n == self.count[first] {
                // All of the code: it takes the value (unless the table is then one value).
                if (0..4).all(|c| c == first || self.count[c] == 0 || self.value[c] == d) {
                    return None;
                }
                event("word relabel");
                runs.add(self.value[first], n as u64);
                self.value[first] = d;
                self.hot = first as u8;
                return Some(Some((lo, hi)));
            }
            let (t, from) = match self.code_of(d) {
                Some(t) => (t, first),
                None => {
                    got[first] = n;
                    let t = self.new_code::<W>(&mut got)?;
                    // After a merge, `first`'s units may be another code's (same value).
                    (
                        t,
                        got.iter().position(|&g| g != 0).expect("the units counted"),
                    )
                }
            };
            let word = self.codes[w];
            self.codes[w] = (word & !unit_bits::<W>(range)) | (range * t as u64);
            runs.add(self.value[from], n as u64);
            self.count[from] -= n;
            self.count[t] += n;
            self.value[t] = d;
            self.hot = t as u8;
            self.add_words(t, w, w);
            return Some(Some((lo, hi)));
        }
        // The units below `d`, per code: one step per code present in the range.
        let mut below = 0u64;
        let mut rest = range;
        while rest != 0 {
            let c = (word >> rest.trailing_zeros() & ((1 << W) - 1)) as usize;
            let units = code_eq::<W>(word, c) & rest;
            rest &= !units;
            if self.value[c] < d {
                got[c] = units.count_ones() as u16;
                if got[c] == self.count[c] {
                    return None;
                }
                below |= units;
            }
        }
        if below == 0 {
            return Some(None);
        }
        let t = match self.code_of(d) {
            Some(t) => t,
            None => self.new_code::<W>(&mut got)?,
        };
        // Reloaded: a merge may have rewritten it (the units below `d` are the same).
        let word = self.codes[w];
        self.codes[w] = (word & !unit_bits::<W>(below)) | (below * t as u64);
        for (c, &n) in got.iter().enumerate() {
            if n != 0 {
                runs.add(self.value[c], n as u64);
                self.count[c] -= n;
                self.count[t] += n;
            }
        }
        self.value[t] = d;
        self.hot = t as u8;
        self.add_words(t, w, w);
        Some(Some((
            w * per_word + below.trailing_zeros() as usize / W as usize,
            w * per_word + (63 - below.leading_zeros() as usize) / W as usize,
        )))
    }

    /// Gives the units of code `from` the code `into`, which has the same value: `from`
    /// becomes free. Rewrites `from`'s words only.
    fn merge<const W: u32>(&mut self, from: usize, into: usize) {
        debug_assert_eq!(self.value[from], self.value[into]);
        let [first, last] = self.words[from];
        let rewrite = |word: &mut u64| {
            let m = code_eq::<W>(*word, from);
            *word = (*word & !unit_bits::<W>(m)) | (m * into as u64);
        };
        if self.ends >> from & 1 != 0 {
            event("merge of ends");
            rewrite(&mut self.codes[first as usize]);
            rewrite(&mut self.codes[last as usize]);
            self.add_words(into, first as usize, first as usize);
            self.add_words(into, last as usize, last as usize);
        } else {
            self.codes[first as usize..=last as usize]
                .iter_mut()
                .for_each(rewrite);
            self.add_words(into, first as usize, last as usize);
        }
        self.count[into] += self.count[from];
        self.count[from] = 0;
        self.free_words(from);
    }
}

/// Chunks of a byte array: 64 units each (a table has at least one).
const CHUNK_SHIFT: u32 = 6;

fn chunks(units: usize) -> usize {
    (units >> CHUNK_SHIFT).max(1)
}

/// Heap bytes of a byte-array table: the bytes and the chunk bounds.
fn bytes_repr_bytes(units: usize) -> usize {
    units + chunks(units)
}

fn new_bytes(units: usize, fill: u8) -> Repr {
    Repr::Bytes {
        bytes: vec![fill; units].into_boxed_slice(),
        chunk_max: vec![fill; chunks(units)].into_boxed_slice(),
    }
}

impl RlePresence {
    fn new(table_bits: u32, compress: bool) -> Self {
        assert!(
            !compress || table_bits <= MAX_PACKED_BITS,
            "kage-vsm: palette tables of 2^{table_bits} units (at most 2^{MAX_PACKED_BITS})"
        );
        Self {
            table_bits,
            compress,
            pages: PageTable::new(SEGMENT_BITS),
            cached: [(0, std::ptr::null_mut()); PAGE_CACHE],
            array_bytes: 0,
            changed: false,
        }
    }

    fn units(&self) -> usize {
        1 << self.table_bits
    }

    #[inline]
    fn page(&mut self, number: u64) -> &mut RlePage {
        let (key, page) = self.cached[number as usize % PAGE_CACHE];
        if key == number.wrapping_add(1) {
            // SAFETY: see `cached`.
            return unsafe { &mut *page };
        }
        self.page_slow(number)
    }

    #[cold]
    fn page_slow(&mut self, number: u64) -> &mut RlePage {
        let units = self.units();
        let compress = self.compress;
        let mut created = false;
        let page = self.pages.get_or_insert_with(number, || {
            created = true;
            RlePage {
                version: 0,
                max: 0,
                expansions: 0,
                repr: if compress {
                    Repr::Uniform(0)
                } else {
                    new_bytes(units, 0)
                },
            }
        }) as *mut RlePage;
        if created {
            self.changed = true;
            if !compress {
                self.array_bytes += bytes_repr_bytes(units);
            }
        }
        self.cached[number as usize % PAGE_CACHE] = (number.wrapping_add(1), page);
        // SAFETY: just taken from `pages`, which outlives the borrow of `self`.
        unsafe { &mut *page }
    }

    #[inline]
    fn touch(&mut self, unit: u64, d: usize, current: &[u64]) -> usize {
        let table_bits = self.table_bits;
        let units = self.units();
        let compress = self.compress;
        let offset = (unit & (units as u64 - 1)) as usize;
        let page = self.page(unit >> table_bits) as *mut RlePage;
        // SAFETY: `page` is owned by `self.pages`; `array_bytes` is a separate field.
        let page = unsafe { &mut *page };
        let innermost = current[d - 1];
        if page.version != innermost {
            let delta = page.validate(current, units, compress);
            if delta != 0 {
                self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
                self.changed = true;
            }
        }
        let (valid, delta) = page.set(offset, d as u8, units);
        if delta != 0 {
            self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
            self.changed = true;
        }
        valid as usize
    }

    /// Marks every unit of `first..=last` (one table) touched at levels `0..d`, calling
    /// `new(valid, n)` for `n` new units whose valid run length was `valid < d` (runs merged
    /// in any way: only the totals per `valid` are meaningful). Returns the first and the
    /// last new unit, if any.
    #[inline]
    fn touch_range(
        &mut self,
        first: u64,
        last: u64,
        d: usize,
        current: &[u64],
        new: impl FnMut(usize, u64),
    ) -> Option<(u64, u64)> {
        let units = self.units();
        let mask = units as u64 - 1;
        let base = first & !mask;
        let (lo, hi) = ((first & mask) as usize, (last & mask) as usize);
        let page = self.validated(first >> self.table_bits, current) as *mut RlePage;
        // SAFETY: as in `touch`.
        let page = unsafe { &mut *page };
        let d8 = d as u8;
        let mut runs = Runs::new(new);
        let span = match &mut page.repr {
            Repr::Bytes { bytes, chunk_max } => {
                let span = raise_bytes(&mut bytes[lo..=hi], d8, &mut runs)?;
                for m in &mut chunk_max[lo >> CHUNK_SHIFT..=hi >> CHUNK_SHIFT] {
                    *m = (*m).max(d8);
                }
                page.max = page.max.max(d8);
                (lo + span.0, lo + span.1)
            }
            &mut Repr::Uniform(v) if v >= d8 => return None,
            _ => {
                let (delta, span) = page.raise_compressed(lo, hi, d8, units, &mut runs);
                if delta != 0 {
                    self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
                    self.changed = true;
                }
                span?
            }
        };
        runs.finish();
        Some((base + span.0 as u64, base + span.1 as u64))
    }

    /// The page, created if needed and validated under `current`.
    #[inline]
    fn validated(&mut self, number: u64, current: &[u64]) -> &mut RlePage {
        let units = self.units();
        let compress = self.compress;
        let page = self.page(number) as *mut RlePage;
        // SAFETY: as in `touch`.
        let page = unsafe { &mut *page };
        if page.version != current[current.len() - 1] {
            let delta = page.validate(current, units, compress);
            if delta != 0 {
                self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
                self.changed = true;
            }
        }
        page
    }

    fn heap_bytes(&self) -> usize {
        self.pages.heap_bytes() + self.array_bytes
    }

    fn forms(&self) -> Vec<(&'static str, usize)> {
        let mut forms = vec![("uniform", 0), ("1-bit", 0), ("2-bit", 0), ("bytes", 0)];
        for (_, page) in self.pages.iter() {
            let form = match &page.repr {
                Repr::Uniform(_) => 0,
                Repr::Packed(p) => p.width as usize,
                Repr::Bytes { .. } => 3,
            };
            forms[form].1 += 1;
        }
        forms
    }
}

fn bits_bytes(units: usize) -> usize {
    units.div_ceil(64) * size_of::<u64>()
}

impl RlePage {
    /// Figure 5 on run-length bytes: clamp every unit to the valid prefix. Returns the change
    /// in array bytes.
    fn validate(&mut self, current: &[u64], units: usize, compress: bool) -> isize {
        let scrub = max_valid_level(self.version, current) as u8;
        self.version = current[current.len() - 1];
        if scrub >= self.max {
            return 0;
        }
        self.scrub(scrub, units, compress)
    }

    /// Clamps every unit to `scrub` (below `max`). Returns the change in array bytes.
    fn scrub(&mut self, scrub: u8, units: usize, compress: bool) -> isize {
        self.max = scrub;
        match &mut self.repr {
            Repr::Uniform(v) => {
                *v = (*v).min(scrub);
                self.max = *v;
                0
            }
            Repr::Packed(p) => {
                // The palette only: codes stay, values that become equal stay two codes.
                for v in &mut p.value {
                    *v = (*v).min(scrub);
                }
                if let Some(v) = p.one_value() {
                    event("scrubbed to one value");
                    let freed = p.array_bytes();
                    self.max = v;
                    self.repr = Repr::Uniform(v);
                    self.expansions = 0;
                    return -(freed as isize);
                }
                self.max = p.max_value();
                0
            }
            Repr::Bytes { bytes, chunk_max } => {
                let clamped = clamp_chunks(bytes, chunk_max, scrub);
                // Re-encode after a large change only: its scan costs at most four times
                // the clamping.
                if !compress || clamped * 4 < chunk_max.len() {
                    return 0;
                }
                self.reencode(units)
            }
        }
    }

    /// A byte table of at most three values as one value or as codes of two bits (a code
    /// left free for the write that follows the scrub, which is above every value). Four
    /// values stay bytes: that write would expand them again, unless it covered every unit
    /// of one value. Returns the change in array bytes.
    fn reencode(&mut self, units: usize) -> isize {
        let Repr::Bytes { bytes, .. } = &self.repr else {
            unreachable!("kage-vsm: re-encoding a table that is not bytes");
        };
        let before = bytes_repr_bytes(units) as isize;
        let (min, max) = min_max(bytes);
        self.max = max;
        if min == max {
            event("bytes to one value");
            self.repr = Repr::Uniform(min);
            self.expansions = 0;
            return -before;
        }
        if self.expansions >= MAX_EXPANSIONS {
            event("bytes stay (expanded before)");
            return 0;
        }
        let Some((values, n)) = few_values(bytes, min, max) else {
            event("bytes stay");
            return 0;
        };
        event("bytes to 2-bit");
        let mut p = Packed {
            width: Width::Two,
            hot: 3,
            value: [values[0], values[1], values[2], 0],
            count: [0; 4],
            words: [NO_WORDS; 4],
            ends: 0,
            codes: vec![0; units / 32].into_boxed_slice(),
        };
        for (j, chunk) in bytes.chunks_exact(64).enumerate() {
            let ones = eq_mask(chunk, values[1]);
            let twos = if n == 3 { eq_mask(chunk, values[2]) } else { 0 };
            for (c, m) in [!(ones | twos), ones, twos].into_iter().enumerate() {
                p.count[c] += m.count_ones() as u16;
                for half in 0..2 {
                    if (m >> (32 * half)) as u32 != 0 {
                        p.add_words(c, 2 * j + half, 2 * j + half);
                    }
                }
            }
            p.codes[2 * j] = spread(ones as u32) | spread(twos as u32) << 1;
            p.codes[2 * j + 1] = spread((ones >> 32) as u32) | spread((twos >> 32) as u32) << 1;
        }
        let after = p.array_bytes() as isize;
        self.repr = Repr::Packed(p);
        after - before
    }

    /// The tag update on a validated page: the unit at `offset` becomes `d` if it was less.
    /// Returns its valid run length before and the change in array bytes.
    #[inline]
    fn set(&mut self, offset: usize, d: u8, units: usize) -> (u8, isize) {
        let old = match &mut self.repr {
            Repr::Bytes { bytes, chunk_max } => {
                let old = bytes[offset];
                if old < d {
                    bytes[offset] = d;
                    let m = &mut chunk_max[offset >> CHUNK_SHIFT];
                    *m = (*m).max(d);
                    self.max = self.max.max(d);
                }
                return (old, 0);
            }
            &mut Repr::Uniform(v) => v,
            Repr::Packed(p) => p.value_at(offset),
        };
        if old >= d {
            return (old, 0);
        }
        let (delta, _) = self.raise_compressed(offset, offset, d, units, &mut Runs::new(|_, _| {}));
        (old, delta)
    }

    /// The range update of [`RlePresence::touch_range`] on a validated table that is not
    /// bytes: units `lo..=hi` below `d` become `d`. Returns the change in array bytes and
    /// the first and the last unit raised, if any.
    #[inline(always)]
    fn raise_compressed(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        units: usize,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> (isize, Option<(usize, usize)>) {
        let in_word = match &mut self.repr {
            Repr::Packed(p) if p.width == Width::Two && lo / 32 == hi / 32 => {
                p.raise_in_word::<2>(lo, hi, d, runs)
            }
            Repr::Packed(p) if p.width == Width::One && lo / 64 == hi / 64 => {
                p.raise_in_word::<1>(lo, hi, d, runs)
            }
            _ => None,
        };
        match in_word {
            Some(span) => {
                self.max = self.max.max(d);
                (0, span)
            }
            None => self.raise_table(lo, hi, d, units, runs),
        }
    }

    /// [`raise_compressed`](Self::raise_compressed) for everything but a range within one
    /// word of codes (out of line, so that the one-word path stays small).
    #[inline(never)]
    fn raise_table(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        units: usize,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> (isize, Option<(usize, usize)>) {
        match &mut self.repr {
            &mut Repr::Uniform(v) => {
                if v >= d {
                    return (0, None);
                }
                let n = hi - lo + 1;
                runs.add(v, n as u64);
                self.max = self.max.max(d);
                if n == units {
                    self.repr = Repr::Uniform(d);
                    self.expansions = 0;
                    return (0, Some((lo, hi)));
                }
                let words = units / 64;
                let mut codes = vec![0u64; words].into_boxed_slice();
                set_bits(&mut codes, lo, hi);
                self.repr = Repr::Packed(Packed {
                    width: Width::One,
                    hot: 1,
                    value: [v, d, 0, 0],
                    count: [(units - n) as u16, n as u16, 0, 0],
                    words: [
                        [0, (words - 1) as u16],
                        [(lo / 64) as u16, (hi / 64) as u16],
                        NO_WORDS,
                        NO_WORDS,
                    ],
                    ends: 0,
                    codes,
                });
                (bits_bytes(units) as isize, Some((lo, hi)))
            }
            Repr::Packed(p) if p.width == Width::One => {
                self.raise_packed::<1>(lo, hi, d, units, runs)
            }
            Repr::Packed(_) => self.raise_packed::<2>(lo, hi, d, units, runs),
            Repr::Bytes { .. } => unreachable!("kage-vsm: a byte table is not compressed"),
        }
    }

    /// [`raise_compressed`](Self::raise_compressed) on codes of `W` bits.
    #[inline(never)]
    fn raise_packed<const W: u32>(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        units: usize,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> (isize, Option<(usize, usize)>) {
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: raising codes of a table that has none");
        };
        debug_assert_eq!(p.width as u32, W);
        let per_word = 64 / W as usize;
        // The codes in use below `d`, and one whose value is `d`.
        let (mut below, mut target) = (0u32, None);
        for c in p.used() {
            match p.value[c].cmp(&d) {
                std::cmp::Ordering::Less => below |= 1 << c,
                std::cmp::Ordering::Equal => target = Some(c),
                std::cmp::Ordering::Greater => {}
            }
        }
        if below == 0 {
            return (0, None);
        }
        let mut got = [0u16; 4];
        let report = |p: &Packed, got: &[u16; 4], runs: &mut Runs<_>| {
            for (c, &n) in got.iter().enumerate() {
                if n != 0 {
                    runs.add(p.value[c], n as u64);
                }
            }
        };
        let (t, span) = if let Some(t) = target {
            // One pass: count the units below `d` per code and give them code `t`.
            let Some(span) = scan_codes::<W, true>(&mut p.codes, lo, hi, below, t, &mut got).get()
            else {
                return (0, None);
            };
            report(p, &got, runs);
            (t, span)
        } else {
            let Some(span) = scan_codes::<W, false>(&mut p.codes, lo, hi, below, 0, &mut got).get()
            else {
                return (0, None);
            };
            let (mut whole, mut partial) = (0u32, 0u32);
            for (c, &n) in got.iter().enumerate() {
                if n == p.count[c] && n != 0 {
                    whole |= 1 << c;
                } else if n != 0 {
                    partial |= 1 << c;
                }
            }
            if partial == 0 {
                // Every code raised is raised whole: it takes the value `d`, no unit changes.
                event("relabel all");
                report(p, &got, runs);
                for c in 0..4 {
                    if whole >> c & 1 != 0 {
                        p.value[c] = d;
                        p.hot = c as u8;
                    }
                }
                self.max = self.max.max(d);
                return (self.after_raise::<W>(lo, hi, units), Some(span));
            }
            let free = (0..1 << W).find(|&c| p.count[c] == 0);
            let t = if whole != 0 {
                event("relabel one");
                whole.trailing_zeros() as usize
            } else if let Some(free) = free {
                event("free code");
                free
            } else if let Some((from, into)) = p.duplicate() {
                event("merge");
                p.merge::<W>(from, into);
                got[into] += std::mem::take(&mut got[from]);
                from
            } else if W == 1 {
                // Two values in use, a third needed: two bits per unit.
                let widened = self.widen();
                let (delta, span) = self.raise_packed::<2>(lo, hi, d, units, runs);
                return (widened + delta, span);
            } else {
                // Four values in use, none raised whole: a fifth needs bytes.
                return self.expand_and_raise(lo, hi, d, units, runs);
            };
            report(p, &got, runs);
            // `t`'s units in the range (if any) are all below `d`; the others take `t`.
            let rest = (0..4)
                .filter(|&c| c != t && got[c] != 0)
                .fold(0, |set, c| set | 1 << c);
            scan_codes::<W, true>(&mut p.codes, span.0, span.1, rest, t, &mut [0; 4]);
            (t, span)
        };
        // Move the counts to `t`.
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: still codes");
        };
        p.value[t] = d;
        p.hot = t as u8;
        for (c, &n) in got.iter().enumerate() {
            if c != t && n != 0 {
                p.count[c] -= n;
                p.count[t] += n;
                if p.count[c] == 0 {
                    p.free_words(c);
                }
            }
        }
        p.add_words(t, span.0 / per_word, span.1 / per_word);
        self.max = self.max.max(d);
        (self.after_raise::<W>(lo, hi, units), Some(span))
    }

    /// After raising units `lo..=hi` of a table of codes: one value if every unit holds
    /// the same; from two bits to one when two codes are left in use and the raise covered a
    /// quarter of the table (the narrowing costs at most a few times the raise; a small
    /// write does not pay for it, nor switch back and forth). Returns the change in array
    /// bytes.
    fn after_raise<const W: u32>(&mut self, lo: usize, hi: usize, units: usize) -> isize {
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: still codes");
        };
        if let Some(v) = p.one_value() {
            event("raised to one value");
            let freed = p.array_bytes();
            self.repr = Repr::Uniform(v);
            self.expansions = 0;
            return -(freed as isize);
        }
        if W == 2 && p.used().count() <= 2 && (hi - lo + 1) * 4 >= units {
            return self.narrow(units);
        }
        0
    }

    /// A table of one-bit codes as two-bit codes (the same codes). Returns the change in
    /// array bytes.
    #[cold]
    fn widen(&mut self) -> isize {
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: widening a table without codes");
        };
        debug_assert_eq!(p.width, Width::One);
        event("widen");
        let mut codes = vec![0u64; 2 * p.codes.len()].into_boxed_slice();
        for (pair, &bits) in codes.chunks_exact_mut(2).zip(p.codes.iter()) {
            pair[0] = spread(bits as u32);
            pair[1] = spread((bits >> 32) as u32);
        }
        for c in p.used().collect::<Vec<_>>() {
            let [first, last] = p.words[c];
            p.words[c] = [2 * first, 2 * last + 1];
        }
        // A word's units are now in two words: only a code in one word keeps its ends.
        p.ends &= p
            .used()
            .filter(|&c| p.words[c][1] - p.words[c][0] == 1)
            .fold(0, |m, c| m | 1 << c);
        let before = p.array_bytes() as isize;
        p.width = Width::Two;
        p.codes = codes;
        p.array_bytes() as isize - before
    }

    /// A table of two-bit codes, two of them in use, as one-bit codes. Returns the change in
    /// array bytes.
    #[cold]
    fn narrow(&mut self, units: usize) -> isize {
        let Repr::Packed(p) = &mut self.repr else {
            unreachable!("kage-vsm: narrowing a table without codes");
        };
        let a = p.used().next().expect("a code in use");
        let b = p.used().find(|&c| c > a).expect("two codes in use");
        debug_assert_eq!(p.used().count(), 2);
        event("narrow");
        let mut bits = vec![0u64; units / 64].into_boxed_slice();
        for (word, pair) in bits.iter_mut().zip(p.codes.chunks_exact(2)) {
            *word = compact(code_eq::<2>(pair[0], b)) as u64
                | (compact(code_eq::<2>(pair[1], b)) as u64) << 32;
        }
        let half = |w: [u16; 2]| [w[0] / 2, w[1] / 2];
        let narrow = Packed {
            width: Width::One,
            hot: (p.hot as usize == b) as u8,
            value: [p.value[a], p.value[b], 0, 0],
            count: [p.count[a], p.count[b], 0, 0],
            words: [half(p.words[a]), half(p.words[b]), NO_WORDS, NO_WORDS],
            // The words of the ends hold the units of the ends.
            ends: (p.ends >> a & 1) | (p.ends >> b & 1) << 1,
            codes: bits,
        };
        let delta = narrow.array_bytes() as isize - p.array_bytes() as isize;
        *p = narrow;
        delta
    }

    /// A table of two-bit codes as bytes (exact chunk bounds), then units `lo..=hi` below
    /// `d` raised to `d`. Returns the change in array bytes and the first and the last unit
    /// raised.
    #[cold]
    fn expand_and_raise(
        &mut self,
        lo: usize,
        hi: usize,
        d: u8,
        units: usize,
        runs: &mut Runs<impl FnMut(usize, u64)>,
    ) -> (isize, Option<(usize, usize)>) {
        let Repr::Packed(p) = &self.repr else {
            unreachable!("kage-vsm: expanding a table without codes");
        };
        debug_assert_eq!(p.width, Width::Two);
        event("expand");
        // A byte of codes (four units) to their four values.
        let four: [u32; 256] = std::array::from_fn(|byte| {
            (0..4).fold(0, |word, i| {
                word | (p.value[byte >> (2 * i) & 3] as u32) << (8 * i)
            })
        });
        let mut bytes = vec![0u8; units].into_boxed_slice();
        for (out, &word) in bytes.chunks_exact_mut(32).zip(p.codes.iter()) {
            for (q, quad) in out.chunks_exact_mut(4).enumerate() {
                quad.copy_from_slice(&four[(word >> (8 * q) & 0xff) as usize].to_le_bytes());
            }
        }
        // A chunk of 64 units is two words of codes.
        let mut chunk_max: Box<[u8]> = p
            .codes
            .chunks_exact(2)
            .map(|pair| {
                p.used()
                    .filter(|&c| code_eq::<2>(pair[0], c) | code_eq::<2>(pair[1], c) != 0)
                    .map(|c| p.value[c])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let span = raise_bytes(&mut bytes[lo..=hi], d, runs).map(|(a, b)| (lo + a, lo + b));
        for m in &mut chunk_max[lo >> CHUNK_SHIFT..=hi >> CHUNK_SHIFT] {
            *m = (*m).max(d);
        }
        let delta = bytes_repr_bytes(units) as isize - p.array_bytes() as isize;
        self.max = self.max.max(d);
        self.expansions = self.expansions.saturating_add(1);
        self.repr = Repr::Bytes { bytes, chunk_max };
        (delta, span)
    }
}

/// Sets bits `lo..=hi` of a bitmap. Returns how many were clear and the first and the last
/// of them, if any.
#[inline]
fn set_bits(bits: &mut [u64], lo: usize, hi: usize) -> (u32, Option<(usize, usize)>) {
    let (first_word, last_word) = (lo / 64, hi / 64);
    let mut n = 0;
    let (mut first, mut last) = (usize::MAX, 0);
    for (w, word) in bits[first_word..=last_word].iter_mut().enumerate() {
        let w = first_word + w;
        let mut mask = u64::MAX;
        if w == first_word {
            mask &= u64::MAX << (lo % 64);
        }
        if w == last_word {
            mask &= u64::MAX >> (63 - hi % 64);
        }
        let clear = !*word & mask;
        if clear != 0 {
            n += clear.count_ones();
            if first == usize::MAX {
                first = w * 64 + clear.trailing_zeros() as usize;
            }
            last = w * 64 + 63 - clear.leading_zeros() as usize;
            *word |= mask;
        }
    }
    (n, (n != 0).then_some((first, last)))
}

/// Calls `new(valid, n)` once per run of equal `valid` values added in a row.
struct Runs<F: FnMut(usize, u64)> {
    value: u8,
    n: u64,
    new: F,
}

impl<F: FnMut(usize, u64)> Runs<F> {
    #[inline(always)]
    fn new(new: F) -> Self {
        Self {
            value: 0,
            n: 0,
            new,
        }
    }

    #[inline(always)]
    fn add(&mut self, value: u8, n: u64) {
        if value != self.value {
            if self.n != 0 {
                (self.new)(self.value as usize, self.n);
            }
            self.value = value;
            self.n = 0;
        }
        self.n += n;
    }

    #[inline(always)]
    fn finish(mut self) {
        if self.n != 0 {
            (self.new)(self.value as usize, self.n);
        }
    }
}

/// A byte's lowest bit in every byte of a word.
const ONES: u64 = 0x0101_0101_0101_0101;
/// A byte's highest bit in every byte of a word.
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `x` that is less than the same byte of `y` (unsigned,
/// exact: no borrow crosses bytes).
#[inline(always)]
fn bytes_less(x: u64, y: u64) -> u64 {
    // Per byte: (x | 0x80) - (y & 0x7f) is in 1..=255, its high bit set iff x's low seven
    // bits are at least y's.
    let low_ge = (x | HIGHS) - (y & !HIGHS);
    ((!x & y) | (!(x ^ y) & !low_ge)) & HIGHS
}

#[inline(always)]
fn load(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
fn store(bytes: &mut [u8], at: usize, word: u64) {
    bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
}

/// The first and the last offset of something, if any.
struct Span {
    first: usize,
    last: usize,
}

impl Span {
    const NONE: Span = Span {
        first: usize::MAX,
        last: 0,
    };

    #[inline(always)]
    fn note(&mut self, first: usize, last: usize) {
        self.first = self.first.min(first);
        self.last = last;
    }

    #[inline(always)]
    fn get(self) -> Option<(usize, usize)> {
        (self.first != usize::MAX).then_some((self.first, self.last))
    }
}

/// Raises the bytes below `d` (`dd`: `d` in every byte) of the word at `at` to `d`, adding
/// their old values to `runs` and their offsets to `span`.
#[inline(always)]
fn raise_word(
    bytes: &mut [u8],
    at: usize,
    dd: u64,
    runs: &mut Runs<impl FnMut(usize, u64)>,
    span: &mut Span,
) {
    let word = load(bytes, at);
    let less = bytes_less(word, dd);
    if less == 0 {
        return;
    }
    span.note(
        at + less.trailing_zeros() as usize / 8,
        at + (63 - less.leading_zeros() as usize) / 8,
    );
    if word == (word & 0xff) * ONES {
        // One value, below `d`: the usual case (a table or a line touched at one level).
        runs.add(word as u8, 8);
        store(bytes, at, dd);
        return;
    }
    let mut bits = less;
    while bits != 0 {
        runs.add((word >> (bits.trailing_zeros() & !7) & 0xff) as u8, 1);
        bits &= bits - 1;
    }
    let mask = (less >> 7) * 0xff;
    store(bytes, at, (word & !mask) | (dd & mask));
}

#[inline(always)]
fn raise_scalar(bytes: &mut [u8], d: u8, runs: &mut Runs<impl FnMut(usize, u64)>, span: &mut Span) {
    for (i, b) in bytes.iter_mut().enumerate() {
        if *b < d {
            runs.add(*b, 1);
            span.note(i, i);
            *b = d;
        }
    }
}

/// Raises every byte of `bytes` below `d` to `d`, adding the old values to `runs`, a word
/// (8 bytes) at a time: a word all at least `d` is skipped, one of a single value below
/// `d` counted at once; on long ranges, 32 bytes of one value are decided together.
/// Returns the first and the last raised offset, if any.
#[inline(always)]
fn raise_bytes(
    bytes: &mut [u8],
    d: u8,
    runs: &mut Runs<impl FnMut(usize, u64)>,
) -> Option<(usize, usize)> {
    let len = bytes.len();
    let mut span = Span::NONE;
    if len < 8 {
        raise_scalar(bytes, d, runs, &mut span);
        return span.get();
    }
    let dd = ONES * d as u64;
    let mut at = 0;
    if len >= 32 {
        raise_long(bytes, d, runs, &mut span);
        at = len & !31;
    }
    while at + 8 <= len {
        raise_word(bytes, at, dd, runs, &mut span);
        at += 8;
    }
    if at < len {
        // The last word again, overlapping: its raised bytes are no longer below `d`.
        raise_word(bytes, len - 8, dd, runs, &mut span);
    }
    span.get()
}

/// [`raise_bytes`] over the leading multiple of 32 bytes.
fn raise_long(bytes: &mut [u8], d: u8, runs: &mut Runs<impl FnMut(usize, u64)>, span: &mut Span) {
    let dd = ONES * d as u64;
    for at in (0..bytes.len() & !31).step_by(32) {
        let w: [u64; 4] = std::array::from_fn(|i| load(bytes, at + 8 * i));
        let v = w[0] & 0xff;
        if w[0] == v * ONES && w[1] == w[0] && w[2] == w[0] && w[3] == w[0] {
            if (v as u8) < d {
                runs.add(v as u8, 32);
                span.note(at, at + 31);
                for i in 0..4 {
                    store(bytes, at + 8 * i, dd);
                }
            }
        } else {
            for i in 0..4 {
                raise_word(bytes, at + 8 * i, dd, runs, span);
            }
        }
    }
}

/// Clamps to `scrub` the chunks of `bytes` whose bound in `chunk_max` exceeds it (bounds
/// included), finding them 8 bounds at a time. Returns how many chunks were clamped.
#[inline]
fn clamp_chunks(bytes: &mut [u8], chunk_max: &mut [u8], scrub: u8) -> usize {
    let mut clamped = 0;
    let mut clamp = |c: usize| {
        let at = c << CHUNK_SHIFT;
        let end = bytes.len().min(at + (1 << CHUNK_SHIFT));
        match <&mut [u8; 1 << CHUNK_SHIFT]>::try_from(&mut bytes[at..end]) {
            Ok(chunk) => {
                for b in chunk {
                    *b = (*b).min(scrub);
                }
            }
            Err(_) => {
                for b in &mut bytes[at..end] {
                    *b = (*b).min(scrub);
                }
            }
        }
        clamped += 1;
    };
    let ss = ONES * scrub as u64;
    let words = chunk_max.len() / 8;
    for w in 0..words {
        let above = bytes_less(ss, load(chunk_max, w * 8));
        if above != 0 {
            let mut bits = above;
            while bits != 0 {
                clamp(w * 8 + bits.trailing_zeros() as usize / 8);
                bits &= bits - 1;
            }
            let mask = (above >> 7) * 0xff;
            let word = load(chunk_max, w * 8);
            store(chunk_max, w * 8, (word & !mask) | (ss & mask));
        }
    }
    for (c, m) in chunk_max.iter_mut().enumerate().skip(words * 8) {
        if *m > scrub {
            clamp(c);
            *m = scrub;
        }
    }
    clamped
}

/// The high bit of every zero byte of `x` (exact).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    // Per byte: the low seven bits plus 0x7f carry into the high bit iff not all zero.
    !((((x & !HIGHS) + !HIGHS) | x) & HIGHS) & HIGHS
}

/// Bit `i` set where `chunk[i] == value` (at most 64 bytes), a word at a time.
#[inline]
fn eq_mask(chunk: &[u8], value: u8) -> u64 {
    let Ok(chunk) = <&[u8; 64]>::try_from(chunk) else {
        return chunk
            .iter()
            .enumerate()
            .fold(0, |word, (i, &b)| word | ((b == value) as u64) << i);
    };
    let vv = ONES * value as u64;
    let mut mask = 0;
    for w in 0..8 {
        let zero = zero_bytes(load(chunk, 8 * w) ^ vv);
        // Bit 8i to bit i (no two partial products meet in the top byte).
        let packed = (zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= packed << (8 * w);
    }
    mask
}

/// Counts a table transition (tests only: they check that every path is taken).
#[inline(always)]
fn event(_name: &'static str) {
    #[cfg(test)]
    tests::EVENTS.with(|e| *e.borrow_mut().entry(_name).or_default() += 1);
}

/// The low bit of every 2-bit code of a word.
const LOW2: u64 = 0x5555_5555_5555_5555;

/// The lowest bit of every unit of a word of `W`-bit codes whose code is `code`.
#[inline(always)]
fn code_eq<const W: u32>(word: u64, code: usize) -> u64 {
    if W == 1 {
        if code == 1 {
            word
        } else {
            !word
        }
    } else {
        let x = word ^ (LOW2 * code as u64);
        !(x | x >> 1) & LOW2
    }
}

/// Every bit of the units whose lowest bit is set in `m`.
#[inline(always)]
fn unit_bits<const W: u32>(m: u64) -> u64 {
    if W == 1 {
        m
    } else {
        m * 3
    }
}

/// The lowest bits of units `a..=b` of a word of `W`-bit codes.
#[inline(always)]
fn unit_range<const W: u32>(a: usize, b: usize) -> u64 {
    let m = (u64::MAX << (a as u32 * W)) & (u64::MAX >> (63 - (b as u32 * W + W - 1)));
    if W == 1 {
        m
    } else {
        m & LOW2
    }
}

/// Over units `lo..=hi` of `W`-bit codes, a word at a time: counts in `got` the units of
/// each code in `from` (a bit per code) and, when `SET`, gives them the code `to`. Returns
/// the first and the last of them.
#[inline(always)]
fn scan_codes<const W: u32, const SET: bool>(
    codes: &mut [u64],
    lo: usize,
    hi: usize,
    from: u32,
    to: usize,
    got: &mut [u16; 4],
) -> Span {
    let per_word = 64 / W as usize;
    let (first_word, last_word) = (lo / per_word, hi / per_word);
    let mut span = Span::NONE;
    for (w, code_word) in codes
        .iter_mut()
        .enumerate()
        .take(last_word + 1)
        .skip(first_word)
    {
        let a = if w == first_word { lo % per_word } else { 0 };
        let b = if w == last_word {
            hi % per_word
        } else {
            per_word - 1
        };
        let range = unit_range::<W>(a, b);
        let word = *code_word;
        // A word all of one code is the usual case (without a popcount instruction,
        // counting would be most of the work).
        let first = (word >> (a as u32 * W) & ((1 << W) - 1)) as usize;
        let m = if code_eq::<W>(word, first) & range == range {
            if from >> first & 1 == 0 {
                continue;
            }
            got[first] += (b - a + 1) as u16;
            range
        } else {
            let mut m = 0;
            let mut set = from;
            while set != 0 {
                let c = set.trailing_zeros() as usize;
                set &= set - 1;
                let mc = code_eq::<W>(word, c) & range;
                got[c] += mc.count_ones() as u16;
                m |= mc;
            }
            m
        };
        if m != 0 {
            span.note(
                w * per_word + m.trailing_zeros() as usize / W as usize,
                w * per_word + (63 - m.leading_zeros() as usize) / W as usize,
            );
            if SET {
                *code_word = (word & !unit_bits::<W>(m)) | (m * to as u64);
            }
        }
    }
    span
}

/// Bit `i` of `x` to bit `2i`: 32 one-bit codes as the low bits of 32 two-bit codes.
#[inline(always)]
fn spread(x: u32) -> u64 {
    let mut x = x as u64;
    x = (x | x << 16) & 0x0000_ffff_0000_ffff;
    x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
    x = (x | x << 4) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x << 2) & 0x3333_3333_3333_3333;
    (x | x << 1) & LOW2
}

/// Bit `2i` of `x` to bit `i` (the odd bits ignored): the inverse of [`spread`].
#[inline(always)]
fn compact(x: u64) -> u32 {
    let mut x = x & LOW2;
    x = (x | x >> 1) & 0x3333_3333_3333_3333;
    x = (x | x >> 2) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x >> 4) & 0x00ff_00ff_00ff_00ff;
    x = (x | x >> 8) & 0x0000_ffff_0000_ffff;
    (x | x >> 16) as u32
}

/// The distinct values of `bytes`, whose smallest is `min` and largest `max > min`, and how
/// many there are, if two or three (unused entries repeat the first): whether any other byte
/// is there, then whether it is the only one (passes the compiler vectorizes; a table that
/// has more values, the usual case where this fails, costs two of them).
fn few_values(bytes: &[u8], min: u8, max: u8) -> Option<([u8; 3], usize)> {
    debug_assert!(min < max);
    if only_values(bytes, [min, max, max]) {
        return Some(([min, max, min], 2));
    }
    let &mid = bytes.iter().find(|&&b| b != min && b != max)?;
    only_values(bytes, [min, mid, max]).then_some(([min, mid, max], 3))
}

/// The smallest and the largest byte (`(255, 0)` for none), 32 lanes at a time.
#[inline]
fn min_max(bytes: &[u8]) -> (u8, u8) {
    const LANES: usize = 32;
    let (mut min, mut max) = ([u8::MAX; LANES], [0u8; LANES]);
    let mut blocks = bytes.chunks_exact(LANES);
    for block in blocks.by_ref() {
        let block: &[u8; LANES] = block.try_into().expect("a block");
        for i in 0..LANES {
            min[i] = min[i].min(block[i]);
            max[i] = max[i].max(block[i]);
        }
    }
    let mut lo = min.iter().fold(u8::MAX, |a, &b| a.min(b));
    let mut hi = max.iter().fold(0, |a, &b| a.max(b));
    for &b in blocks.remainder() {
        lo = lo.min(b);
        hi = hi.max(b);
    }
    (lo, hi)
}

/// Whether every byte is one of `values`, 32 lanes at a time.
#[inline]
fn only_values(bytes: &[u8], values: [u8; 3]) -> bool {
    const LANES: usize = 32;
    let mut other = [0u8; LANES];
    let mut blocks = bytes.chunks_exact(LANES);
    for block in blocks.by_ref() {
        let block: &[u8; LANES] = block.try_into().expect("a block");
        for i in 0..LANES {
            let b = block[i];
            other[i] |=
                u8::from(b != values[0]) & u8::from(b != values[1]) & u8::from(b != values[2]);
        }
    }
    other.iter().all(|&o| o == 0) && blocks.remainder().iter().all(|b| values.contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    thread_local! {
        pub(super) static EVENTS: RefCell<BTreeMap<&'static str, usize>> = RefCell::default();
    }

    fn small(kind: FpKind) -> FpConfig {
        FpConfig {
            table_bits: Some(6),
            ..FpConfig::new(kind)
        }
    }

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// Bytes from a few values, in runs: what tag tables hold.
        fn bytes(&mut self, len: usize) -> Vec<u8> {
            let values: Vec<u8> = (0..1 + self.next() % 4)
                .map(|_| self.next() as u8)
                .collect();
            let mut out = Vec::with_capacity(len);
            while out.len() < len {
                let r = self.next();
                let run = 1 + (r >> 8) as usize % if r & 1 == 0 { 3 } else { 90 };
                let v = values[(r >> 32) as usize % values.len()];
                out.extend(std::iter::repeat_n(v, run.min(len - out.len())));
            }
            out
        }
    }

    #[test]
    fn bytes_less_compares_every_byte_pair() {
        for x in 0..=255u8 {
            for y in 0..=255u8 {
                // Every lane, with different neighbours on either side.
                let words = [
                    (ONES * x as u64, ONES * y as u64),
                    (
                        (ONES * x as u64) ^ 0x00ff_00ff_00ff_00ff,
                        (ONES * y as u64) ^ 0xff00_ff00_ff00_ff00,
                    ),
                ];
                for (a, b) in words {
                    let expected = (0..8)
                        .filter(|i| ((a >> (8 * i)) as u8) < ((b >> (8 * i)) as u8))
                        .fold(0, |m, i| m | 0x80 << (8 * i));
                    assert_eq!(bytes_less(a, b), expected, "{a:x} < {b:x}");
                }
            }
        }
    }

    #[test]
    fn word_helpers_match_byte_loops() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..3000 {
            let len = 1 + rng.next() as usize % 300;
            let bytes = rng.bytes(len);
            let d = if rng.next().is_multiple_of(3) {
                bytes[0]
            } else {
                rng.next() as u8
            };

            // raise_bytes: the totals per old value, the span, the result.
            let mut raised = bytes.clone();
            let mut totals = [0u64; 256];
            let mut runs = Runs::new(|v, n| totals[v] += n);
            let span = raise_bytes(&mut raised, d, &mut runs);
            runs.finish();
            let mut expected = [0u64; 256];
            for &b in bytes.iter().filter(|&&b| b < d) {
                expected[b as usize] += 1;
            }
            assert_eq!(totals, expected, "{bytes:?} {d}");
            let first = bytes.iter().position(|&b| b < d);
            let last = bytes.iter().rposition(|&b| b < d);
            assert_eq!(span, first.zip(last), "{bytes:?} {d}");
            let max: Vec<u8> = bytes.iter().map(|&b| b.max(d)).collect();
            assert_eq!(raised, max);

            let mut distinct = bytes.clone();
            distinct.sort();
            distinct.dedup();
            let (min, top) = (distinct[0], distinct[distinct.len() - 1]);
            if min < top {
                match few_values(&bytes, min, top) {
                    Some((values, n)) => {
                        let mut found = values[..n].to_vec();
                        found.sort();
                        assert_eq!(found, distinct, "{bytes:?}");
                        assert!(values[n..].iter().all(|&v| v == values[0]));
                    }
                    None => assert!(distinct.len() > 3, "{bytes:?}"),
                }
            }
            assert_eq!(min_max(&bytes), (min, top));
            let three = [min, top, distinct[distinct.len() / 2]];
            assert_eq!(
                only_values(&bytes, three),
                bytes.iter().all(|b| three.contains(b))
            );
            for chunk in bytes.chunks(64) {
                let mask = (0..chunk.len())
                    .filter(|&i| chunk[i] == d)
                    .fold(0u64, |m, i| m | 1 << i);
                assert_eq!(eq_mask(chunk, d), mask);
            }

            // clamp_chunks: bounds that hold, some above the truth.
            let mut clamped = bytes.clone();
            let mut bounds: Vec<u8> = clamped
                .chunks(64)
                .map(|c| {
                    c.iter()
                        .copied()
                        .max()
                        .unwrap()
                        .saturating_add(rng.next() as u8 % 3)
                })
                .collect();
            let expected_count = bounds.iter().filter(|&&m| m > d).count();
            let expected_bounds: Vec<u8> = bounds.iter().map(|&m| m.min(d)).collect();
            assert_eq!(clamp_chunks(&mut clamped, &mut bounds, d), expected_count);
            assert_eq!(bounds, expected_bounds);
            let expected: Vec<u8> = bytes.iter().map(|&b| b.min(d)).collect();
            assert_eq!(clamped, expected);
        }
    }

    /// Every unit's value, whatever the form.
    fn values_of(page: &RlePage, units: usize) -> Vec<u8> {
        match &page.repr {
            &Repr::Uniform(v) => vec![v; units],
            Repr::Packed(p) => (0..units).map(|i| p.value_at(i)).collect(),
            Repr::Bytes { bytes, .. } => bytes.to_vec(),
        }
    }

    /// The form's own invariants, and its array bytes.
    fn check_form(page: &RlePage, units: usize, model: &[u8]) -> usize {
        assert_eq!(values_of(page, units), model, "{:?}", page.repr);
        let top = model.iter().copied().max().unwrap_or(0);
        assert!(page.max >= top, "max {} below {top}", page.max);
        match &page.repr {
            Repr::Uniform(_) => 0,
            Repr::Packed(p) => {
                let width = p.width as usize;
                assert!(width == 1 || width == 2);
                assert_eq!(p.codes.len(), units * width / 64);
                let per_word = 64 / width;
                let mut count = [0u16; 4];
                for i in 0..units {
                    let c = (p.codes[i / per_word] >> (i % per_word * width) & 3) as usize;
                    let c = if width == 1 { c & 1 } else { c };
                    count[c] += 1;
                    let [first, last] = p.words[c];
                    let w = (i / per_word) as u16;
                    assert!(
                        first <= w && w <= last,
                        "code {c} at unit {i} outside its words"
                    );
                    assert!(
                        p.ends >> c & 1 == 0 || w == first || w == last,
                        "code {c} at unit {i} between its ends"
                    );
                }
                assert_eq!(count, p.count);
                let used = p.used().count();
                assert!(used >= 2, "a table of codes with {used} in use");
                assert!(p.one_value().is_none(), "codes of one value");
                for c in 0..4 {
                    if p.count[c] == 0 {
                        assert_eq!(p.words[c], NO_WORDS);
                    }
                }
                p.array_bytes()
            }
            Repr::Bytes { bytes, chunk_max } => {
                for (m, chunk) in chunk_max.iter().zip(bytes.chunks(1 << CHUNK_SHIFT)) {
                    assert!(chunk.iter().all(|b| b <= m));
                }
                bytes_repr_bytes(units)
            }
        }
    }

    /// Drives single palette tables through raises and scrubs against a byte model: one to
    /// five and more values, merges, scrubs that make values equal, the narrow and wide
    /// codes, bytes and back.
    #[test]
    fn palette_tables_match_a_byte_model() {
        let mut rng = Rng(0x5851_f42d_4c95_7f2d);
        let mut forms = [0usize; 4];
        let mut expansions = 0;
        for units in [64usize, 128, 256, 4096] {
            for _ in 0..60 {
                let mut page = RlePage {
                    version: 0,
                    max: 0,
                    expansions: 0,
                    repr: Repr::Uniform(0),
                };
                let mut model = vec![0u8; units];
                let mut held = 0isize;
                let mut prev = (0, 0);
                // Small depths collide often; a few programs go deeper.
                let levels = if rng.next().is_multiple_of(4) { 12 } else { 6 };
                for _ in 0..400 {
                    let r = rng.next();
                    if r.is_multiple_of(6) {
                        let scrub = (rng.next() % (levels + 1)) as u8;
                        if scrub < page.max {
                            held += page.scrub(scrub, units, true);
                            for b in &mut model {
                                *b = (*b).min(scrub);
                            }
                        }
                    } else {
                        let d = 1 + (rng.next() % levels) as u8;
                        let (lo, hi) = match r % 8 {
                            // The same units again (a line, a stack frame, per instance).
                            7 => prev,
                            1 => {
                                let lo = rng.next() as usize % units;
                                (lo, lo)
                            }
                            2 => (0, units - 1),
                            3 | 4 => {
                                let lo = rng.next() as usize % units;
                                (lo, (lo + rng.next() as usize % 9).min(units - 1))
                            }
                            _ => {
                                let lo = rng.next() as usize % units;
                                (lo, lo + rng.next() as usize % (units - lo))
                            }
                        };
                        prev = (lo, hi);
                        let mut expected = [0u64; 256];
                        for &b in &model[lo..=hi] {
                            if b < d {
                                expected[b as usize] += 1;
                            }
                        }
                        let first = model[lo..=hi].iter().position(|&b| b < d);
                        let last = model[lo..=hi].iter().rposition(|&b| b < d);
                        let expected_span = first.zip(last).map(|(a, b)| (lo + a, lo + b));
                        let distinct_before = {
                            let mut v = values_of(&page, units);
                            v.sort();
                            v.dedup();
                            v.len()
                        };
                        let was_packed = matches!(page.repr, Repr::Packed(_));

                        let mut totals = [0u64; 256];
                        if lo == hi && r.is_multiple_of(2) {
                            let (old, delta) = page.set(lo, d, units);
                            assert_eq!(old, model[lo]);
                            held += delta;
                            if old < d {
                                totals[old as usize] += 1;
                            }
                        } else {
                            let mut runs = Runs::new(|v, n| totals[v] += n);
                            let span = match &mut page.repr {
                                Repr::Bytes { bytes, chunk_max } => {
                                    let span = raise_bytes(&mut bytes[lo..=hi], d, &mut runs)
                                        .map(|(a, b)| (lo + a, lo + b));
                                    for m in &mut chunk_max[lo >> CHUNK_SHIFT..=hi >> CHUNK_SHIFT] {
                                        *m = (*m).max(d);
                                    }
                                    page.max = page.max.max(d);
                                    span
                                }
                                _ => {
                                    let (delta, span) =
                                        page.raise_compressed(lo, hi, d, units, &mut runs);
                                    held += delta;
                                    span
                                }
                            };
                            runs.finish();
                            assert_eq!(span, expected_span, "{lo}..={hi} to {d}");
                        }
                        assert_eq!(totals, expected, "{lo}..={hi} to {d}");
                        for b in &mut model[lo..=hi] {
                            *b = (*b).max(d);
                        }
                        if was_packed && matches!(page.repr, Repr::Bytes { .. }) {
                            // Only when five values are really needed.
                            let mut v = model.clone();
                            v.sort();
                            v.dedup();
                            assert!(v.len() >= 5, "expanded to bytes for {} values", v.len());
                            assert!(distinct_before >= 4);
                            expansions += 1;
                        }
                    }
                    let array = check_form(&page, units, &model);
                    assert_eq!(held, array as isize, "array bytes");
                    forms[match &page.repr {
                        Repr::Uniform(_) => 0,
                        Repr::Packed(p) => p.width as usize,
                        Repr::Bytes { .. } => 3,
                    }] += 1;
                }
            }
        }
        let events = EVENTS.with(|e| e.borrow().clone());
        for name in [
            "relabel one",
            "relabel all",
            "free code",
            "merge",
            "raised to one value",
            "scrubbed to one value",
            "widen",
            "narrow",
            "expand",
            "bytes to one value",
            "bytes to 2-bit",
            "bytes stay",
            "bytes stay (expanded before)",
            "word merge (last)",
            "word merge",
            "word relabel",
        ] {
            assert!(events.get(name) >= Some(&20), "{name}: {events:?}");
        }
        assert!(forms.iter().all(|&n| n > 100), "forms reached: {forms:?}");
        assert!(expansions > 10, "{expansions} expansions");
    }

    /// Covariance's column walks: each new innermost instance raises an element of column
    /// `i` and one of column `j` in every row's table, and the code of the last instance's
    /// elements, a row apart, is merged rewriting its two words only.
    #[test]
    fn a_column_walk_merges_two_words_per_table() {
        let (m, n) = (120u64, 40u64);
        let mut fp = Footprint::new(FpConfig::new(FpKind::Palette));
        let data = 0x10_0000u64;
        fp.enter();
        fp.access(data, m * n * 8);
        EVENTS.with(|e| e.borrow_mut().clear());
        let mut expected_k = Touched::default();
        for i in 0..4 {
            fp.enter();
            for j in i + 1..m {
                fp.enter();
                fp.flush();
                for k in 0..n {
                    fp.access(data + (k * m + i) * 8, 8);
                    fp.access(data + (k * m + j) * 8, 8);
                }
                let lines: std::collections::HashSet<u64> = (0..n)
                    .flat_map(|k| [(data + (k * m + i) * 8) >> 6, (data + (k * m + j) * 8) >> 6])
                    .collect();
                expected_k.locations = 16 * n;
                expected_k.lines = lines.len() as u64;
                assert_eq!(fp.exit(), expected_k, "{i} {j}");
            }
            fp.exit();
        }
        let events = EVENTS.with(|e| e.borrow().clone());
        let walks = 4 * (m - 1) - 6;
        assert!(
            events.get("merge of ends") >= Some(&(walks as usize)),
            "{events:?}"
        );
    }

    #[test]
    fn a_page_is_one_cache_line_of_bytes() {
        // The variant lives in `Width`'s spare values.
        assert_eq!(size_of::<Repr>(), size_of::<Packed>());
        assert!(size_of::<RlePage>() <= 64, "{}", size_of::<RlePage>());
    }

    #[test]
    fn set_bits_counts_and_finds_the_clear_bits() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2000 {
            let mut bits: Vec<u64> = (0..4)
                .map(|_| rng.next() & rng.next() & rng.next())
                .collect();
            let lo = rng.next() as usize % 256;
            let hi = lo + rng.next() as usize % (256 - lo);
            let clear: Vec<usize> = (lo..=hi)
                .filter(|&i| bits[i / 64] >> (i % 64) & 1 == 0)
                .collect();
            let (n, span) = set_bits(&mut bits, lo, hi);
            assert_eq!(n as usize, clear.len());
            assert_eq!(span, clear.first().copied().zip(clear.last().copied()));
            assert!((lo..=hi).all(|i| bits[i / 64] >> (i % 64) & 1 == 1));
        }
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in FpKind::ALL {
            assert_eq!(kind.name().parse::<FpKind>(), Ok(kind));
        }
        assert!("fast".parse::<FpKind>().unwrap_err().contains("palette"));
    }

    #[test]
    fn nested_regions_count_inclusively() {
        for kind in FpKind::ALL {
            let mut fp = Footprint::new(small(kind));
            fp.access(0, 100); // no region: ignored
            assert!(fp.enter()); // f
            fp.access(0, 10);
            assert!(fp.enter()); // loop
            fp.access(5, 10); // 10 new for loop, 5 new for f
            fp.access(5, 10);
            let inner = fp.exit();
            assert_eq!(inner.locations, 10, "{kind}");
            assert_eq!(inner.lines, 1, "{kind}");
            assert!(fp.enter()); // loop again: a fresh instance
            fp.access(0, 1);
            fp.access(64, 1);
            assert_eq!(
                fp.exit(),
                Touched {
                    locations: 2,
                    lines: 2
                },
                "{kind}"
            );
            let outer = fp.exit();
            assert_eq!(
                outer,
                Touched {
                    locations: 16,
                    lines: 2
                },
                "{kind}"
            );
            assert_eq!(fp.total(), outer, "{kind}");
        }
    }
}
