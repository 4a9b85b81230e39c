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
//! - `palette` (the default): `bulk` with 4 KiB tag tables kept in the smallest of three
//!   forms: one value for the whole table (no array), two values (one bit per location), or
//!   the byte array. Validation shrinks values, so a table usually collapses back to one or
//!   two values when scrubbed; a write that needs a third value expands it.
//!
//! Both BulkTV kinds remember, per table, an upper bound of its bytes (`max`: no scrub when
//! Theorem 1 leaves every level up to it valid) and, for byte arrays, one per chunk of 64
//! units (1/64 more memory): a scrub clamps only the chunks whose bound exceeds the scrub
//! level. A function called again and again, an inner loop walking a column, a recursion
//! unwinding, thus cost the chunks their instances touched, not whole tables (Figure 5
//! scrubs whole tables, which makes nested loops over large arrays quadratic). `palette`
//! re-encodes a table in its smallest form after a scrub that clamped a quarter of it.
//!
//! Accesses are applied a range at a time when they fall in one table: a byte array is
//! compared and filled in one pass, a two-value table sets the range's bits and counts
//! them, and each run of units with the same previous run length updates the counters once.
//!
//! Tags are bytes: at most [`MAX_LEVELS`] levels are tracked (the paper's 256-level limit);
//! [`Footprint::enter`] refuses deeper levels and the caller accounts for them.

use crate::page_table::PageTable;
use crate::{max_valid_level, BaselineVsm, Config, Granularity, VectorShadow, VersionStack};
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
    /// BulkTV with 4 KiB tag tables stored as one value, one bit or one byte per location.
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
    changed: bool,
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
            changed: false,
        };
        fp.push_level();
        fp
    }

    /// The configuration.
    pub fn config(&self) -> &FpConfig {
        &self.config
    }

    fn push_level(&mut self) {
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
        self.versions.depth() - 1
    }

    /// Enters a region. Returns `false`, changing nothing, when [`MAX_LEVELS`] are active.
    pub fn enter(&mut self) -> bool {
        if self.versions.depth() >= MAX_LEVELS {
            return false;
        }
        self.push_level();
        self.changed = true;
        true
    }

    /// Exits the innermost region and returns what its instance touched.
    ///
    /// # Panics
    /// At depth 0.
    pub fn exit(&mut self) -> Touched {
        assert!(self.depth() > 0, "kage-vsm: footprint exit at depth 0");
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

    /// What the thread touched while any region was active (the root level).
    pub fn total(&self) -> Touched {
        Touched {
            locations: self.locations[0],
            lines: self.lines[0],
        }
    }

    /// What the current instance at `level` (0: outermost region) has touched so far.
    pub fn current(&self, level: usize) -> Touched {
        Touched {
            locations: self.locations[level + 1],
            lines: self.lines[level + 1],
        }
    }

    /// `size` bytes at `addr` are accessed. Ignored at depth 0 (no region active).
    #[inline]
    pub fn access(&mut self, addr: u64, size: u64) {
        if self.versions.depth() <= 1 || size == 0 {
            return;
        }
        let d = self.versions.depth();
        let last = addr.saturating_add(size - 1);
        let current = self.versions.as_slice();
        let (locations, lines) = (&mut self.locations, &mut self.lines);
        match &mut self.location_shadow {
            None => {
                let shift = self.config.line_shift;
                let (first, last) = (addr >> shift, last >> shift);
                if let Presence::Rle(rle) = &mut self.line_shadow {
                    if first >> rle.table_bits == last >> rle.table_bits {
                        let new = rle.touch_range(first, last, d, current, |valid, n| {
                            add_levels(lines, valid, d, n);
                            add_levels(locations, valid, d, n);
                        });
                        self.changed |= std::mem::take(&mut rle.changed);
                        let _ = new;
                        return;
                    }
                }
                for line in first..=last {
                    let valid = self.line_shadow.touch(line, d, current);
                    if valid < d {
                        add_levels(lines, valid, d, 1);
                        add_levels(locations, valid, d, 1);
                        self.changed |= !matches!(self.line_shadow, Presence::Rle(_));
                    }
                }
            }
            Some(shadow) => {
                let (shift, line_shift) = (self.config.location_shift, self.config.line_shift);
                let (first, last) = (addr >> shift, last >> shift);
                let new = match shadow {
                    Presence::Rle(rle) if first >> rle.table_bits == last >> rle.table_bits => {
                        let new = rle.touch_range(first, last, d, current, |valid, n| {
                            add_levels(locations, valid, d, n)
                        });
                        self.changed |= std::mem::take(&mut rle.changed);
                        new
                    }
                    _ => {
                        let mut new = false;
                        for unit in first..=last {
                            let valid = shadow.touch(unit, d, current);
                            if valid < d {
                                add_levels(locations, valid, d, 1);
                                new = true;
                            }
                        }
                        self.changed |= shadow.take_changed();
                        new
                    }
                };
                if new {
                    // A line is new at a level only if one of its locations is (inclusion);
                    // touching a line that is not new changes nothing.
                    for line in (first << shift) >> line_shift..=(last << shift) >> line_shift {
                        let valid = self.line_shadow.touch(line, d, current);
                        if valid < d {
                            add_levels(lines, valid, d, 1);
                        }
                    }
                    // Run-length tables report their own heap changes; the others may have
                    // created a table.
                    self.changed |= !matches!(shadow, Presence::Rle(_));
                }
            }
        }
        self.changed |= self.line_shadow.take_changed();
    }

    /// Whether the heap use may have changed since the last call (then call
    /// [`heap_bytes`](Self::heap_bytes)); cheap enough for every access.
    #[inline]
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Exact bytes this structure holds on the heap (O(1)).
    pub fn heap_bytes(&self) -> usize {
        self.versions.heap_bytes()
            + (self.locations.capacity() + self.lines.capacity()) * size_of::<u64>()
            + self
                .location_shadow
                .as_ref()
                .map_or(0, Presence::heap_bytes)
            + self.line_shadow.heap_bytes()
    }
}

#[inline]
fn add_levels(counters: &mut [u64], from: usize, to: usize, n: u64) {
    for c in &mut counters[from..to] {
        *c += n;
    }
}

/// A presence shadow over units (locations or lines): one of the implementations.
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
    /// No byte of the page exceeds this.
    max: u8,
    repr: Repr,
}

#[derive(Debug)]
enum Repr {
    /// Every unit holds this value.
    Uniform(u8),
    /// Units whose bit is set hold `hi`, the others `lo` (`lo < hi`); `ones` bits are set.
    Bits {
        lo: u8,
        hi: u8,
        ones: u32,
        bits: Box<[u64]>,
    },
    /// A byte per unit, and per chunk of 64 units a bound on its bytes (`chunk_max`).
    Bytes {
        bytes: Box<[u8]>,
        chunk_max: Box<[u8]>,
    },
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
    /// `new(valid, n)` for each run of `n` consecutive units whose valid run length was
    /// `valid < d`. Returns whether any unit was new.
    #[inline]
    fn touch_range(
        &mut self,
        first: u64,
        last: u64,
        d: usize,
        current: &[u64],
        mut new: impl FnMut(usize, u64),
    ) -> bool {
        let units = self.units();
        let mask = units as u64 - 1;
        let (lo, hi) = ((first & mask) as usize, (last & mask) as usize);
        let page = self.validated(first >> self.table_bits, current) as *mut RlePage;
        // SAFETY: as in `touch`.
        let page = unsafe { &mut *page };
        let d8 = d as u8;
        if let Repr::Bytes { bytes, chunk_max } = &mut page.repr {
            let mut any = false;
            let (mut run_value, mut run) = (0u8, 0u64);
            for b in &mut bytes[lo..=hi] {
                let old = *b;
                if old < d8 {
                    *b = d8;
                    if run > 0 && old != run_value {
                        new(run_value as usize, run);
                        run = 0;
                    }
                    run_value = old;
                    run += 1;
                    any = true;
                }
            }
            if any {
                if run > 0 {
                    new(run_value as usize, run);
                }
                for m in &mut chunk_max[lo >> CHUNK_SHIFT..=hi >> CHUNK_SHIFT] {
                    *m = (*m).max(d8);
                }
                page.max = page.max.max(d8);
            }
            return any;
        }
        if let Repr::Uniform(v) = page.repr {
            if v >= d8 {
                return false;
            }
        }
        if let Repr::Bits {
            lo: low,
            hi: high,
            ones,
            bits,
        } = &mut page.repr
        {
            if *low >= d8 {
                return false;
            }
            if *high == d8 {
                // Set the range's clear bits: each was `low`.
                let mut n = 0u32;
                let mut i = lo;
                while i <= hi {
                    let word = i / 64;
                    let end = (hi + 1).min((word + 1) * 64);
                    let width = end - i;
                    let mask = if width == 64 {
                        u64::MAX
                    } else {
                        ((1u64 << width) - 1) << (i % 64)
                    };
                    n += (!bits[word] & mask).count_ones();
                    bits[word] |= mask;
                    i = end;
                }
                if n == 0 {
                    return false;
                }
                new(*low as usize, n as u64);
                *ones += n;
                if *ones as usize == units {
                    page.repr = Repr::Uniform(d8);
                    self.array_bytes -= bits_bytes(units);
                    self.changed = true;
                }
                return true;
            }
        }
        let mut any = false;
        for offset in lo..=hi {
            let (valid, delta) = page.set(offset, d8, units);
            if delta != 0 {
                self.array_bytes = self.array_bytes.wrapping_add_signed(delta);
                self.changed = true;
            }
            if valid < d8 {
                new(valid as usize, 1);
                any = true;
            }
        }
        any
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
}

fn bits_bytes(units: usize) -> usize {
    units.div_ceil(64) * size_of::<u64>()
}

impl RlePage {
    /// Figure 5 on run-length bytes: clamp every byte to the valid prefix. Returns the change
    /// in array bytes.
    fn validate(&mut self, current: &[u64], units: usize, compress: bool) -> isize {
        let scrub = max_valid_level(self.version, current) as u8;
        self.version = current[current.len() - 1];
        if scrub >= self.max {
            return 0;
        }
        self.max = scrub;
        match &mut self.repr {
            Repr::Uniform(v) => {
                *v = scrub;
                0
            }
            Repr::Bits { lo, hi, .. } => {
                *hi = scrub;
                if *lo >= scrub {
                    // Both values clamp to `scrub`.
                    self.repr = Repr::Uniform(scrub);
                    -(bits_bytes(units) as isize)
                } else {
                    0
                }
            }
            Repr::Bytes { bytes, chunk_max } => {
                // Only the chunks whose bound exceeds `scrub` hold invalid levels.
                let mut clamped = 0;
                for (chunk, m) in chunk_max.iter_mut().enumerate() {
                    if *m > scrub {
                        let at = chunk << CHUNK_SHIFT;
                        for b in &mut bytes[at..(at + (1 << CHUNK_SHIFT)).min(units)] {
                            *b = (*b).min(scrub);
                        }
                        *m = scrub;
                        clamped += 1;
                    }
                }
                // Re-encode after a large change only: its scan costs at most four times
                // the clamping.
                if !compress || clamped * 4 < chunk_max.len() {
                    return 0;
                }
                let mut seen = [false; 256];
                let mut max = 0;
                for &b in bytes.iter() {
                    seen[b as usize] = true;
                    max = max.max(b);
                }
                self.max = max;
                let mut values = (0..=max).filter(|&v| seen[v as usize]);
                let (first, second) = (values.next().unwrap_or(0), values.next());
                match (second, values.next()) {
                    (None, _) => {
                        self.repr = Repr::Uniform(first);
                        -(bytes_repr_bytes(units) as isize)
                    }
                    (Some(second), None) => {
                        let mut bits = vec![0u64; units.div_ceil(64)].into_boxed_slice();
                        let mut ones = 0;
                        for (i, &b) in bytes.iter().enumerate() {
                            if b == second {
                                bits[i / 64] |= 1 << (i % 64);
                                ones += 1;
                            }
                        }
                        self.repr = Repr::Bits {
                            lo: first,
                            hi: second,
                            ones,
                            bits,
                        };
                        bits_bytes(units) as isize - bytes_repr_bytes(units) as isize
                    }
                    _ => 0,
                }
            }
        }
    }

    /// The tag update on a validated page: the unit at `offset` becomes `d` if it was less.
    /// Returns its valid run length before and the change in array bytes.
    #[inline]
    fn set(&mut self, offset: usize, d: u8, units: usize) -> (u8, isize) {
        match &mut self.repr {
            Repr::Bytes { bytes, chunk_max } => {
                let old = bytes[offset];
                if old < d {
                    bytes[offset] = d;
                    let m = &mut chunk_max[offset >> CHUNK_SHIFT];
                    *m = (*m).max(d);
                    self.max = self.max.max(d);
                }
                (old, 0)
            }
            Repr::Uniform(v) => {
                let old = *v;
                if old >= d {
                    return (old, 0);
                }
                let mut bits = vec![0u64; units.div_ceil(64)].into_boxed_slice();
                bits[offset / 64] |= 1 << (offset % 64);
                self.repr = Repr::Bits {
                    lo: old,
                    hi: d,
                    ones: 1,
                    bits,
                };
                self.max = d;
                (old, bits_bytes(units) as isize)
            }
            Repr::Bits { lo, hi, ones, bits } => {
                let word = &mut bits[offset / 64];
                let mask = 1u64 << (offset % 64);
                let set = *word & mask != 0;
                let old = if set { *hi } else { *lo };
                if old >= d {
                    return (old, 0);
                }
                if !set && d == *hi {
                    *word |= mask;
                    *ones += 1;
                    if *ones as usize == units {
                        let hi = *hi;
                        self.repr = Repr::Uniform(hi);
                        return (old, -(bits_bytes(units) as isize));
                    }
                    return (old, 0);
                }
                // A third value: expand to bytes. Every other unit holds at most `hi`.
                let (lo, hi) = (*lo, *hi);
                let mut bytes = vec![lo; units].into_boxed_slice();
                for (i, b) in bytes.iter_mut().enumerate() {
                    if bits[i / 64] & (1 << (i % 64)) != 0 {
                        *b = hi;
                    }
                }
                bytes[offset] = d;
                // A chunk is exactly one word of the bitmap.
                let mut chunk_max: Box<[u8]> = bits
                    .iter()
                    .map(|&word| if word != 0 { hi } else { lo })
                    .collect();
                chunk_max[offset >> CHUNK_SHIFT] = d;
                self.repr = Repr::Bytes { bytes, chunk_max };
                self.max = self.max.max(d);
                (
                    old,
                    bytes_repr_bytes(units) as isize - bits_bytes(units) as isize,
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(kind: FpKind) -> FpConfig {
        FpConfig {
            table_bits: Some(6),
            ..FpConfig::new(kind)
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
