//! The VStorage (paper §4, Figure 6c): the memory-efficient backing store of the VCache.
//!
//! Tags are grouped by level, not by address: a page number leads through the
//! [`PageTable`] (top table → segment table) to a [`StoragePage`], which holds the page's
//! single BulkTV version and its level table, one tag table (`2^table_bits` tags) per level.
//! The storage only sees whole vectors, when the VCache fetches or evicts one; both validate
//! the page with BulkTV first.
//!
//! Without garbage collection, the tag tables of levels found invalid are scrubbed in place
//! and kept, so a page holds as many tables as the deepest level ever stored to it. With
//! garbage collection they leave the level table for a free list and are reused, scrubbed,
//! by the next table allocation anywhere; the list keeps at most [`Config::free_tables`]
//! tables and frees the rest, so memory follows the live levels (plus that bounded reserve),
//! not the deepest ever seen. Collection is lazy, as in the paper: a page's dead tables are
//! found the next time the page is fetched from, evicted to or packed.
//!
//! With compression (which also collects dead levels), each level of a level table is one
//! of: absent (all default), a tag table, a narrow tag table (64-bit tags in one 32-bit
//! range, as 32-bit offsets: [`NarrowTable`]), a constant difference from the level above,
//! or a tag table compressed with LZ4 ([`compress`]). New and unpacked tables of 64-bit tags
//! are made narrow when their tags allow; a narrow table is read and written in place like
//! a plain one, and a store out of its range makes it plain. A page goes on the clock list
//! when it gets a tag table not yet tried for packing (a store made one, or it was
//! unpacked); only pages off the list hold compressed tables: touching such a page validates
//! it (dropping dead levels unopened), unpacks what is left and lists it. The clock list's victim is
//! validated and each of its tag tables packed into the cheapest form. Pages with nothing
//! to pack or unpack (constants, incompressible tables) stay off the list, so accessing
//! them costs no list work. A constant level is read and written where it is, in
//! O(1) from the level above (a store that breaks the constant turns it back into a table),
//! so it never needs unpacking; a table LZ4 cannot halve (a narrow one: halve again) is made
//! narrow if it is not already and its tags allow, marked incompressible and kept.
//! The list's capacity adapts to the re-decompression rate: every 4 × capacity storage
//! accesses it grows by a quarter (up to 8× [`Config::victim_tables`]) when more than 1 in
//! 128 of them had to unpack something, and shrinks by an eighth (down to an eighth of it)
//! when fewer than 1 in 1024 did, packing the level tables it drops: memory goes down while
//! time allows.
//!
//! [`compress`]: crate::compress
//! [`Config::free_tables`]: crate::Config::free_tables
//! [`Config::victim_tables`]: crate::Config::victim_tables

use crate::compress::{
    narrow_get, narrow_set, narrow_widen_into, Clock, NarrowTable, PackedTable, Packer, Packing,
};
use crate::page_table::PageTable;
use crate::strided::{slice_bytes, Addressing};
use crate::{max_valid_level, Config, Stats, Tag};

const NOT_LISTED: u32 = u32::MAX;
/// The clock list adapts every `ADAPT_WINDOW × capacity` storage accesses.
const ADAPT_WINDOW: u64 = 4;
/// It grows when more than 1 access in `GROW_BELOW` unpacked something (an unpack and the
/// pack that follows cost about as much as a few dozen accesses)...
const GROW_BELOW: u64 = 128;
/// ...and shrinks when fewer than 1 in `SHRINK_BELOW` did.
const SHRINK_BELOW: u64 = 1024;

/// One level of a page's level table.
#[derive(Debug)]
enum Level<T> {
    /// Every tag is default.
    Absent,
    /// A tag table; `incompressible`: LZ4 could not halve it, so it is not tried again.
    Table {
        tags: Box<[T]>,
        incompressible: bool,
    },
    /// A tag table whose tags lie in one 32-bit range ([`NarrowTable`]'s fields, kept
    /// apart so that a level fits in 24 bytes), at half the bytes, read and written in
    /// place; `incompressible` as for a table.
    Narrow {
        offsets: Box<[u32]>,
        base_high: u32,
        incompressible: bool,
    },
    /// Every tag is `T::undelta(delta, above)`, `above` being the level above's tag.
    Constant(T),
    /// A compressed tag table (only in pages off the clock list).
    Packed(PackedTable),
}

impl<T: Tag> Level<T> {
    /// The tag at `offset`, given the level above's tag there.
    #[inline]
    fn get(&self, offset: usize, above: T) -> T {
        if let Level::Table { tags, .. } = self {
            return tags[offset];
        }
        match self {
            Level::Absent => T::default(),
            Level::Table { tags, .. } => tags[offset],
            Level::Constant(delta) => T::undelta(*delta, above),
            Level::Narrow {
                offsets, base_high, ..
            } => narrow_get(offsets, *base_high, offset),
            Level::Packed(_) => unreachable!("kage-vsm: packed level in a listed page"),
        }
    }
}

/// One page of the VStorage: the segment table entry's version and level table.
#[derive(Debug)]
pub struct StoragePage<T> {
    /// The innermost version at the last BulkTV validation; 0: never.
    version: u64,
    /// Levels at and beyond this hold only default tags.
    dirty: usize,
    /// Slot on the clock list, or `NOT_LISTED`.
    clock_slot: u32,
    /// Some level may be packed (then the page is unpacked before any access).
    packed: bool,
    /// Some level may be a tag table that was never tried for packing (then the page is
    /// listed, to be packed once it is cold).
    packable: bool,
    /// The level table.
    levels: Vec<Level<T>>,
}

impl<T> StoragePage<T> {
    fn new() -> Self {
        Self {
            version: 0,
            dirty: 0,
            clock_slot: NOT_LISTED,
            packed: false,
            packable: false,
            levels: Vec::new(),
        }
    }
}

/// Tag table allocation, the garbage collector's free list, the other forms of a level and
/// their accounting.
#[derive(Debug)]
struct Tables<T> {
    units: usize,
    /// Free tables are kept for reuse.
    gc: bool,
    /// Dead levels leave the level table (else their tables are scrubbed in place).
    collect: bool,
    /// New and unpacked tables are made narrow when their tags allow (with compression).
    narrow: bool,
    /// Tag tables in level tables.
    in_use: usize,
    free: Vec<Box<[T]>>,
    free_max: usize,
    /// Bytes of the level tables' vectors (their capacity).
    level_bytes: usize,
    page_scrubs: u64,
    constant_tables: usize,
    packed_tables: usize,
    packed_bytes: usize,
    narrow_tables: usize,
    narrow_bytes: usize,
}

/// Compression state: the clock list, the packer and the list's adaptation.
#[derive(Debug)]
struct Compression {
    clock: Clock,
    packer: Packer,
    min_capacity: usize,
    max_capacity: usize,
    /// Storage accesses since the last adaptation, and how many of them unpacked something.
    accesses: u64,
    refaults: u64,
    packs: u64,
    unpacks: u64,
}

/// Level-organised backing store with BulkTV, optional garbage collection and compression.
#[derive(Debug)]
pub struct VStorage<T: Tag> {
    addressing: Addressing,
    pages: PageTable<StoragePage<T>>,
    tables: Tables<T>,
    compression: Option<Compression>,
    /// The tags of one level, when they must be derived through constant levels.
    scratch: Vec<T>,
}

impl<T: Tag> Tables<T> {
    /// A table of default tags.
    fn take(&mut self) -> Box<[T]> {
        self.in_use += 1;
        match self.free.pop() {
            Some(mut table) => {
                table.fill(T::default());
                table
            }
            None => vec![T::default(); self.units].into_boxed_slice(),
        }
    }

    /// A table with any contents, for a caller that overwrites every tag.
    fn take_unscrubbed(&mut self) -> Box<[T]> {
        self.in_use += 1;
        self.free
            .pop()
            .unwrap_or_else(|| vec![T::default(); self.units].into_boxed_slice())
    }

    /// Returns a table to the free list, or frees it when the list is full. Free tables
    /// are scrubbed when they are taken again, and only if they need to be.
    fn give(&mut self, table: Box<[T]>) {
        self.in_use -= 1;
        if self.free.len() < self.free_max {
            self.free.push(table);
        }
    }

    /// A new level holding `tags`: narrow when allowed and they fit (the table goes back to
    /// the free list), else the table.
    fn table_level(&mut self, tags: Box<[T]>) -> Level<T> {
        match self.narrow.then(|| NarrowTable::of(&tags)).flatten() {
            Some(table) => {
                self.give(tags);
                self.narrow_level(table)
            }
            None => Level::Table {
                tags,
                incompressible: false,
            },
        }
    }

    /// A level holding `table`, counted.
    fn narrow_level(&mut self, table: NarrowTable) -> Level<T> {
        self.narrow_tables += 1;
        self.narrow_bytes += slice_bytes::<u32>(table.offsets.len());
        Level::Narrow {
            offsets: table.offsets,
            base_high: table.base_high,
            incompressible: false,
        }
    }

    /// Releases whatever a level holds.
    fn release(&mut self, level: Level<T>) {
        match level {
            Level::Absent => {}
            Level::Table { tags, .. } => self.give(tags),
            Level::Constant(_) => self.constant_tables -= 1,
            Level::Packed(packed) => {
                self.packed_tables -= 1;
                self.packed_bytes -= packed.heap_bytes();
            }
            Level::Narrow { offsets, .. } => {
                self.narrow_tables -= 1;
                self.narrow_bytes -= slice_bytes::<u32>(offsets.len());
            }
        }
    }

    /// Applies `f` to a page's level table, keeping `level_bytes` exact.
    #[inline]
    fn resize_levels<R>(
        &mut self,
        levels: &mut Vec<Level<T>>,
        f: impl FnOnce(&mut Vec<Level<T>>) -> R,
    ) -> R {
        let before = levels.capacity();
        let result = f(levels);
        self.level_bytes = self.level_bytes + levels.capacity() * size_of::<Level<T>>()
            - before * size_of::<Level<T>>();
        result
    }

    /// BulkTV (Figure 5) on a whole page, with garbage collection when on.
    fn validate(&mut self, page: &mut StoragePage<T>, current: &[u64]) {
        let innermost = current.last().copied().unwrap_or(0);
        if page.version == innermost {
            return;
        }
        let scrub_start = max_valid_level(page.version, current);
        page.version = innermost;
        if scrub_start >= page.dirty {
            return;
        }
        self.page_scrubs += 1;
        let dirty = std::mem::replace(&mut page.dirty, scrub_start);
        if self.collect {
            while page.levels.len() > scrub_start {
                let level = page.levels.pop().expect("longer than scrub_start");
                self.release(level);
            }
            self.trim(&mut page.levels);
        } else {
            let end = dirty.min(page.levels.len());
            for level in &mut page.levels[scrub_start.min(end)..end] {
                if let Level::Table { tags, .. } = level {
                    tags.fill(T::default());
                }
            }
        }
    }

    /// Drops trailing absent levels and, when the level table is mostly slack, its capacity.
    fn trim(&mut self, levels: &mut Vec<Level<T>>) {
        while let Some(Level::Absent) = levels.last() {
            levels.pop();
        }
        if levels.capacity() > 2 * levels.len().max(4) {
            self.resize_levels(levels, |levels| levels.shrink_to(levels.len().max(4)));
        }
    }

    /// Stores `tag` at `offset` of level `level` of `levels`, which is absent, constant or
    /// narrow and does not hold `tag` there already; `above` is the new tag of the level
    /// above there. Returns whether it made a table.
    #[inline(never)]
    fn store_other(
        &mut self,
        levels: &mut [Level<T>],
        level: usize,
        offset: usize,
        tag: T,
        above: T,
        scratch: &mut Vec<T>,
    ) -> bool {
        match levels[level] {
            Level::Absent if tag != T::default() => {
                let zeroed = self.narrow.then(|| NarrowTable::zeroed::<T>(self.units));
                if let Some(mut table) = zeroed.flatten() {
                    if narrow_set(&mut table.offsets, table.base_high, offset, tag) {
                        levels[level] = self.narrow_level(table);
                        return true;
                    }
                }
                let mut table = self.take();
                table[offset] = tag;
                levels[level] = Level::Table {
                    tags: table,
                    incompressible: false,
                };
                true
            }
            Level::Constant(delta) if T::undelta(delta, above) != tag => {
                let mut tags = self.constant_tags(levels, level, delta, scratch);
                tags[offset] = tag;
                levels[level] = self.table_level(tags);
                true
            }
            Level::Narrow {
                ref mut offsets,
                base_high,
                ..
            } => {
                if narrow_set(offsets, base_high, offset, tag) {
                    return false;
                }
                // Out of its range: a plain table again, to be judged afresh when cold.
                let mut tags = self.take_unscrubbed();
                narrow_widen_into(offsets, base_high, &mut tags);
                tags[offset] = tag;
                let narrow = std::mem::replace(
                    &mut levels[level],
                    Level::Table {
                        tags,
                        incompressible: false,
                    },
                );
                self.release(narrow);
                true
            }
            Level::Absent | Level::Constant(_) => false,
            Level::Table { .. } => unreachable!("not a table"),
            Level::Packed(_) => unreachable!("kage-vsm: packed level in a listed page"),
        }
    }

    /// The tags of constant level `level` (difference `delta` from the level above) as a
    /// table, for a store that breaks the constant; the level is no longer counted as one.
    #[cold]
    fn constant_tags(
        &mut self,
        levels: &[Level<T>],
        level: usize,
        delta: T,
        scratch: &mut Vec<T>,
    ) -> Box<[T]> {
        let above = level_values(&levels[..level], self.units, scratch);
        let mut tags = self.take_unscrubbed();
        for (index, tag) in tags.iter_mut().enumerate() {
            *tag = T::undelta(delta, above.map_or(T::default(), |above| above[index]));
        }
        self.constant_tables -= 1;
        tags
    }

    fn heap_bytes(&self) -> usize {
        (self.in_use + self.free.len()) * slice_bytes::<T>(self.units)
            + self.free.capacity() * size_of::<Box<[T]>>()
            + self.level_bytes
            + self.packed_bytes
            + self.narrow_bytes
    }
}

/// The tags of the last level of `levels` (none packed) at every offset: its table, or
/// `scratch` derived from the nearest table above through the constant levels, or `None`
/// when they are all default (also when `levels` is empty: above level 0).
fn level_values<'a, T: Tag>(
    levels: &'a [Level<T>],
    units: usize,
    scratch: &'a mut Vec<T>,
) -> Option<&'a [T]> {
    let last = levels.len().checked_sub(1)?;
    let base = levels
        .iter()
        .rposition(|level| !matches!(level, Level::Constant(_)));
    let from = match base.map(|base| &levels[base]) {
        Some(Level::Table { tags, .. }) if base == Some(last) => return Some(tags),
        Some(Level::Absent) if base == Some(last) => return None,
        Some(Level::Packed(_)) => unreachable!("kage-vsm: deriving from a packed level"),
        Some(Level::Table { tags, .. }) => {
            scratch.clear();
            scratch.extend_from_slice(tags);
            base.expect("some") + 1
        }
        Some(Level::Narrow {
            offsets, base_high, ..
        }) => {
            scratch.clear();
            scratch.resize(units, T::default());
            narrow_widen_into(offsets, *base_high, scratch);
            base.expect("some") + 1
        }
        _ => {
            scratch.clear();
            scratch.resize(units, T::default());
            base.map_or(0, |base| base + 1)
        }
    };
    for level in &levels[from..] {
        if let Level::Constant(delta) = *level {
            for tag in scratch.iter_mut() {
                *tag = T::undelta(delta, *tag);
            }
        }
    }
    Some(scratch)
}

impl Compression {
    /// Grows the clock list by a quarter when more than 1 in `GROW_BELOW` storage accesses
    /// since the last adaptation unpacked something, shrinks it by an eighth when fewer
    /// than 1 in `SHRINK_BELOW` did (packing the level tables it drops).
    #[cold]
    fn adapt<T: Tag>(
        &mut self,
        pages: &mut PageTable<StoragePage<T>>,
        tables: &mut Tables<T>,
        scratch: &mut Vec<T>,
        current: &[u64],
    ) {
        let capacity = self.clock.capacity();
        let capacity = if self.refaults * GROW_BELOW > self.accesses {
            (capacity + capacity / 4 + 1).min(self.max_capacity)
        } else if self.refaults * SHRINK_BELOW < self.accesses {
            (capacity - (capacity / 8).max(1)).max(self.min_capacity)
        } else {
            capacity
        };
        self.clock.set_capacity(capacity);
        self.accesses = 0;
        self.refaults = 0;
        while let Some(victim) = self.clock.pop_excess() {
            self.unlist(pages, tables, scratch, victim, current);
        }
    }

    /// Takes page `page_no` off the clock list: validates and packs it.
    fn unlist<T: Tag>(
        &mut self,
        pages: &mut PageTable<StoragePage<T>>,
        tables: &mut Tables<T>,
        scratch: &mut Vec<T>,
        page_no: u64,
        current: &[u64],
    ) {
        let page = pages.get_mut(page_no).expect("listed page exists");
        page.clock_slot = NOT_LISTED;
        tables.validate(page, current);
        self.pack(&mut page.levels, tables, scratch);
        page.packed = page
            .levels
            .iter()
            .any(|level| matches!(level, Level::Packed(_)));
        page.packable = false;
        if page.levels.is_empty() {
            tables.resize_levels(&mut page.levels, |levels| *levels = Vec::new());
        }
    }

    /// Packs every tag table of a level table (none packed) into its cheapest form,
    /// deepest first, so that each is encoded against the level above as it still is. A
    /// table LZ4 cannot halve (a narrow one: halve again) is kept narrow if its tags allow,
    /// else plain, and is not tried again.
    fn pack<T: Tag>(
        &mut self,
        levels: &mut Vec<Level<T>>,
        tables: &mut Tables<T>,
        scratch: &mut Vec<T>,
    ) {
        for level in (0..levels.len()).rev() {
            let (upper, rest) = levels.split_at_mut(level);
            let packing = match &rest[0] {
                Level::Table {
                    tags,
                    incompressible: false,
                } => (self.packer).pack(tags, level_values(upper, tables.units, scratch)),
                Level::Narrow {
                    offsets,
                    base_high,
                    incompressible: false,
                } => {
                    let above = level_values(upper, tables.units, scratch);
                    self.packer.pack_narrow(offsets, *base_high, above)
                }
                _ => continue,
            };
            let packed = match packing {
                Packing::Absent => Level::Absent,
                Packing::Constant(delta) => {
                    tables.constant_tables += 1;
                    Level::Constant(delta)
                }
                Packing::Packed(packed) => {
                    tables.packed_tables += 1;
                    tables.packed_bytes += packed.heap_bytes();
                    Level::Packed(packed)
                }
                Packing::Incompressible => {
                    let narrow = match &rest[0] {
                        Level::Table { tags, .. } => NarrowTable::of(tags),
                        _ => None,
                    };
                    if let Some(table) = narrow {
                        let narrow = tables.narrow_level(table);
                        let table = std::mem::replace(&mut rest[0], narrow);
                        tables.release(table);
                    }
                    match &mut rest[0] {
                        Level::Table { incompressible, .. } => *incompressible = true,
                        Level::Narrow { incompressible, .. } => *incompressible = true,
                        _ => {}
                    }
                    continue;
                }
            };
            self.packs += 1;
            let table = std::mem::replace(&mut rest[0], packed);
            tables.release(table);
        }
        tables.trim(levels);
    }

    /// Unpacks the packed tables of a level table, outermost first (each is decoded against
    /// the level above, already unpacked). Returns how many there were.
    fn unpack<T: Tag>(
        &mut self,
        levels: &mut [Level<T>],
        tables: &mut Tables<T>,
        scratch: &mut Vec<T>,
    ) -> usize {
        let mut unpacked = 0;
        for level in 0..levels.len() {
            let (upper, rest) = levels.split_at_mut(level);
            let Level::Packed(packed) = &rest[0] else {
                continue;
            };
            let above = if packed.is_delta() {
                level_values(upper, tables.units, scratch)
            } else {
                None
            };
            let mut tags = tables.take_unscrubbed();
            self.packer.unpack(packed, above, &mut tags);
            let unpacked_level = tables.table_level(tags);
            let packed = std::mem::replace(&mut rest[0], unpacked_level);
            tables.release(packed);
            unpacked += 1;
        }
        self.unpacks += unpacked as u64;
        unpacked
    }
}

impl<T: Tag> VStorage<T> {
    /// An empty store.
    pub fn new(config: &Config, gc: bool, compress: bool) -> Self {
        let addressing = Addressing::new(config);
        Self {
            addressing,
            pages: PageTable::new(config.segment_bits),
            tables: Tables {
                units: addressing.units(),
                gc,
                collect: gc || compress,
                narrow: compress,
                in_use: 0,
                free: Vec::new(),
                free_max: if gc { config.free_tables } else { 0 },
                level_bytes: 0,
                page_scrubs: 0,
                constant_tables: 0,
                packed_tables: 0,
                packed_bytes: 0,
                narrow_tables: 0,
                narrow_bytes: 0,
            },
            compression: compress.then(|| Compression {
                clock: Clock::new(config.victim_tables),
                packer: Packer::default(),
                min_capacity: (config.victim_tables / 8).max(1),
                max_capacity: config.victim_tables.saturating_mul(8),
                accesses: 0,
                refaults: 0,
                packs: 0,
                unpacks: 0,
            }),
            scratch: Vec::new(),
        }
    }

    /// Whether tag tables of dead levels are collected.
    pub fn collects_garbage(&self) -> bool {
        self.tables.gc
    }

    /// Whether cold level tables are compressed.
    pub fn compresses(&self) -> bool {
        self.compression.is_some()
    }

    #[inline]
    fn split_unit(&self, unit: u64) -> (u64, usize) {
        let bits = self.addressing.table_bits();
        (unit >> bits, (unit & ((1u64 << bits) - 1)) as usize)
    }

    /// Reads the vector of shadowed `unit` into `out` (at least `current.len()` long) and
    /// returns its length: levels from there on are default.
    pub fn fetch(&mut self, unit: u64, current: &[u64], out: &mut [T]) -> usize {
        let (page_no, offset) = self.split_unit(unit);
        if self.compression.is_some() && !self.touch(page_no, current, false) {
            return 0;
        }
        let Some(page) = self.pages.get_mut(page_no) else {
            return 0;
        };
        self.tables.validate(page, current);
        let len = page.dirty.min(page.levels.len());
        debug_assert!(len <= current.len());
        let mut above = T::default();
        for (slot, level) in out[..len].iter_mut().zip(&page.levels) {
            above = level.get(offset, above);
            *slot = above;
        }
        len
    }

    /// Writes the whole vector of shadowed `unit`, valid under `current`: `tags`, then
    /// default at every deeper level.
    pub fn store(&mut self, unit: u64, current: &[u64], tags: &[T]) {
        let (page_no, offset) = self.split_unit(unit);
        let used = tags
            .iter()
            .rposition(|&tag| tag != T::default())
            .map_or(0, |last| last + 1);
        if self.compression.is_some() && !self.touch(page_no, current, used > 0) {
            return;
        }
        let page = if used > 0 {
            self.pages.get_or_insert_with(page_no, StoragePage::new)
        } else {
            // Nothing to store: only an existing page can hold stale values to clear.
            match self.pages.get_mut(page_no) {
                Some(page) => page,
                None => return,
            }
        };
        let tables = &mut self.tables;
        tables.validate(page, current);
        if page.levels.len() < used {
            tables.resize_levels(&mut page.levels, |levels| {
                levels.resize_with(used, || Level::Absent)
            });
        }
        // The VCache line was the address's only valid copy: deeper levels hold nothing.
        let end = page.levels.len().min(page.dirty.max(used));
        let levels = &mut page.levels[..end];
        let mut above = T::default();
        for level in 0..levels.len() {
            let tag = tags.get(level).copied().unwrap_or_default();
            // Tables first, in a tight loop; the other forms are rarer.
            let entry = &mut levels[level];
            if let Level::Table { tags, .. } = entry {
                tags[offset] = tag;
            } else {
                let unchanged = match entry {
                    Level::Constant(delta) => T::undelta(*delta, above) == tag,
                    Level::Absent => tag == T::default(),
                    Level::Narrow {
                        offsets, base_high, ..
                    } => narrow_set(offsets, *base_high, offset, tag),
                    _ => false,
                };
                if !unchanged
                    && tables.store_other(levels, level, offset, tag, above, &mut self.scratch)
                {
                    page.packable = true;
                }
            }
            above = tag;
        }
        page.dirty = page.dirty.max(used);
        if page.packable && page.clock_slot == NOT_LISTED && self.compression.is_some() {
            self.list(page_no, current);
        }
    }

    /// Before an access to page `page_no` with compression: marks it as
    /// recently used if it is on the clock list, or lists and unpacks it if it holds packed
    /// levels (pages holding only constants, incompressible tables and absent levels need
    /// neither). Every `ADAPT_WINDOW × capacity` storage accesses, the list's capacity
    /// adapts to how many of them had to unpack something.
    /// Returns whether the page exists (created first if `create`).
    #[inline]
    fn touch(&mut self, page_no: u64, current: &[u64], create: bool) -> bool {
        let Self {
            pages,
            tables,
            compression,
            scratch,
            ..
        } = self;
        let compression = compression.as_mut().expect("compression on");
        compression.accesses += 1;
        if compression.accesses >= ADAPT_WINDOW * compression.clock.capacity() as u64 {
            compression.adapt(pages, tables, scratch, current);
        }
        let page = if create {
            pages.get_or_insert_with(page_no, StoragePage::new)
        } else {
            match pages.get_mut(page_no) {
                Some(page) => page,
                None => return false,
            }
        };
        if page.clock_slot != NOT_LISTED {
            compression.clock.reference(page.clock_slot as usize);
        } else if page.packed {
            tables.validate(page, current);
            if compression.unpack(&mut page.levels, tables, scratch) > 0 {
                compression.refaults += 1;
                page.packable = true;
            }
            page.packed = false;
            self.list(page_no, current);
        }
        true
    }

    /// Lists page `page_no` (which exists, is not listed and holds no packed level) on the
    /// clock list as recently used; the list's victim, if any, is validated and packed.
    fn list(&mut self, page_no: u64, current: &[u64]) {
        let compression = self.compression.as_mut().expect("compression on");
        let (slot, victim) = compression.clock.insert(page_no);
        let page = self.pages.get_mut(page_no).expect("page exists");
        debug_assert!(page.clock_slot == NOT_LISTED && !page.packed);
        page.clock_slot = slot as u32;
        if let Some(victim) = victim {
            compression.unlist(
                &mut self.pages,
                &mut self.tables,
                &mut self.scratch,
                victim,
                current,
            );
        }
    }

    /// Exact bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        let compression = self.compression.as_ref().map_or(0, |compression| {
            compression.clock.heap_bytes() + compression.packer.heap_bytes()
        });
        self.pages.heap_bytes()
            + self.tables.heap_bytes()
            + compression
            + slice_bytes::<T>(self.scratch.capacity())
    }

    /// The store's counters (tables, scrubs, compression).
    pub fn stats(&self) -> Stats {
        let (packs, unpacks, victim_tables) = self
            .compression
            .as_ref()
            .map_or((0, 0, 0), |c| (c.packs, c.unpacks, c.clock.capacity()));
        Stats {
            page_scrubs: self.tables.page_scrubs,
            tag_tables: self.tables.in_use + self.tables.free.len(),
            free_tables: self.tables.free.len(),
            constant_tables: self.tables.constant_tables,
            packed_tables: self.tables.packed_tables,
            packed_bytes: self.tables.packed_bytes,
            narrow_tables: self.tables.narrow_tables,
            packs,
            unpacks,
            victim_tables,
            ..Stats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VersionStack;

    #[test]
    fn a_level_takes_three_words() {
        // An 8-level table spans three 64-byte cache lines, not four.
        assert_eq!(size_of::<Level<u64>>(), 24);
        assert_eq!(size_of::<Level<bool>>(), 24);
    }

    fn config() -> Config {
        Config {
            table_bits: 2,
            segment_bits: 2,
            victim_tables: 1,
            free_tables: 8,
            ..Config::default()
        }
    }

    /// [`config`] with tag tables of 64 units (LZ4 can halve them).
    fn config_64() -> Config {
        Config {
            table_bits: 6,
            ..config()
        }
    }

    /// Whether page `page` is on the clock list.
    fn listed(storage: &VStorage<u64>, page: u64) -> bool {
        storage.pages.get(page).unwrap().clock_slot != NOT_LISTED
    }

    fn versions(depth: usize) -> VersionStack {
        let mut versions = VersionStack::new();
        (0..depth).for_each(|_| {
            versions.enter();
        });
        versions
    }

    /// The forms of page `page_no`'s levels: `-` absent, `T` table, `I` incompressible
    /// table, `N` narrow table, `n` incompressible narrow table, `C` constant, `P` packed.
    fn forms<T: Tag>(storage: &VStorage<T>, page_no: u64) -> String {
        let page = storage.pages.get(page_no).expect("page");
        page.levels
            .iter()
            .map(|level| match level {
                Level::Absent => '-',
                Level::Table {
                    incompressible: false,
                    ..
                } => 'T',
                Level::Table { .. } => 'I',
                Level::Constant(_) => 'C',
                Level::Packed(_) => 'P',
                Level::Narrow {
                    incompressible: false,
                    ..
                } => 'N',
                Level::Narrow { .. } => 'n',
            })
            .collect()
    }

    #[test]
    fn garbage_collection_reuses_the_tables_of_exited_levels() {
        let mut versions = versions(4);
        let mut storage = VStorage::<u64>::new(&config(), true, false);
        storage.store(0, versions.as_slice(), &[1, 2, 3, 4]);
        assert_eq!(storage.stats().tag_tables, 4);
        // Two levels exit; the next access to the page collects their tables.
        versions.exit();
        versions.exit();
        let mut out = [0; 4];
        assert_eq!(storage.fetch(1, versions.as_slice(), &mut out), 2);
        assert_eq!(storage.stats().free_tables, 2);
        assert_eq!(forms(&storage, 0), "TT");
        // Another page reuses them, scrubbed.
        versions.enter();
        storage.store(4, versions.as_slice(), &[0, 0, 9]);
        assert_eq!(storage.stats().free_tables, 1);
        assert_eq!(storage.stats().tag_tables, 4);
        assert_eq!(forms(&storage, 1), "--T");
        assert_eq!(storage.fetch(5, versions.as_slice(), &mut out), 3);
        assert_eq!(&out[..3], &[0, 0, 0]);
        assert_eq!(storage.fetch(4, versions.as_slice(), &mut out), 3);
        assert_eq!(&out[..3], &[0, 0, 9]);
    }

    #[test]
    fn without_garbage_collection_dead_tables_are_scrubbed_in_place() {
        let mut versions = versions(4);
        let mut storage = VStorage::<u64>::new(&config(), false, false);
        storage.store(0, versions.as_slice(), &[1, 2, 3, 4]);
        versions.exit();
        versions.exit();
        let mut out = [0; 4];
        assert_eq!(storage.fetch(0, versions.as_slice(), &mut out), 2);
        assert_eq!(&out[..2], &[1, 2]);
        assert_eq!(forms(&storage, 0), "TTTT");
        let page = storage.pages.get(0).unwrap();
        assert!(page.levels[2..].iter().all(|level| matches!(
            level,
            Level::Table { tags, .. } if tags.iter().all(|&tag| tag == 0)
        )));
        assert_eq!(storage.stats().tag_tables, 4);
    }

    #[test]
    fn each_tag_table_takes_its_own_form_and_comes_back_exactly() {
        let config = config_64();
        let versions = versions(5);
        let current = versions.as_slice();
        let mut storage = VStorage::<u64>::new(&config, true, true);
        // Page 0, 64 words: level 0 noise, level 1 the same (constant delta 0), level 2 the
        // same plus 5 (constant delta 5), level 3 sparse, level 4 never written.
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut expected = Vec::new();
        for unit in 0..64u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let sparse = if unit % 16 == 3 { unit + 1 } else { 0 };
            let vector = [x, x, x.wrapping_add(5), sparse];
            storage.store(unit, current, &vector);
            expected.push(vector);
        }
        assert_eq!(forms(&storage, 0), "TTTN");
        storage.store(64, current, &[1]); // page 1 is listed: page 0 is packed
        assert_eq!(forms(&storage, 0), "ICCP");
        let stats = storage.stats();
        assert_eq!(
            (stats.constant_tables, stats.packed_tables, stats.packs),
            (2, 1, 3)
        );
        assert_eq!(
            (stats.tag_tables - stats.free_tables, stats.narrow_tables),
            (1, 1),
            "the incompressible table; page 1's is narrow"
        );
        assert!(stats.packed_bytes > 0 && stats.packed_bytes < 64 * 8 / 4);
        // Back on the list (page 1 packed in turn): only the LZ4 table is unpacked, narrow
        // as its tags allow.
        let mut out = [0; 5];
        assert_eq!(storage.fetch(3, current, &mut out), 4);
        assert_eq!(out[..4], expected[3]);
        assert_eq!(forms(&storage, 0), "ICCN");
        assert_eq!(storage.stats().unpacks, 1);
        for (unit, vector) in expected.iter().enumerate() {
            assert_eq!(storage.fetch(unit as u64, current, &mut out), 4);
            assert_eq!(&out[..4], vector, "unit {unit}");
        }
        // A store consistent with the constants keeps them; one that is not turns the
        // broken level back into a table, and the others still read right.
        storage.store(7, current, &[11, 11, 16, 0]);
        assert_eq!(forms(&storage, 0), "ICCN");
        expected[7] = [11, 11, 16, 0];
        storage.store(9, current, &[12, 13, 18, 1]);
        expected[9] = [12, 13, 18, 1];
        assert_eq!(forms(&storage, 0), "ITCN");
        assert_eq!(storage.stats().constant_tables, 1);
        for (unit, vector) in expected.iter().enumerate() {
            assert_eq!(storage.fetch(unit as u64, current, &mut out), 4);
            assert_eq!(&out[..4], vector, "unit {unit}");
        }
        // Off the list again (fresh pages push it out): level 1 is constant again except at
        // unit 9, so LZ4 this time (deltas from level 0).
        for page in 2..=12 {
            storage.store(page * 64, current, &[2]);
        }
        assert_eq!(forms(&storage, 0), "IPCP");
        for (unit, vector) in expected.iter().enumerate() {
            assert_eq!(storage.fetch(unit as u64, current, &mut out), 4);
            assert_eq!(&out[..4], vector, "unit {unit}");
        }
    }

    #[test]
    fn pages_with_nothing_to_pack_stay_off_the_list() {
        let config = config_64();
        let versions = versions(3);
        let current = versions.as_slice();
        let mut storage = VStorage::<u64>::new(&config, true, true);
        // One timestamp per store at every level: level 0 all 7s, the others constants.
        for unit in 0..64 {
            storage.store(unit, current, &[7, 7, 7]);
        }
        assert!(listed(&storage, 0));
        storage.store(64, current, &[1]); // lists page 1, packs page 0
        assert_eq!(forms(&storage, 0), "CCC");
        assert!(!listed(&storage, 0));
        // Reads and stores that keep the constants need no list work.
        let mut out = [0; 3];
        assert_eq!(storage.fetch(5, current, &mut out), 3);
        assert_eq!(out, [7, 7, 7]);
        storage.store(6, current, &[7, 7, 7]);
        assert!(!listed(&storage, 0) && listed(&storage, 1));
        // A store that breaks one makes a (narrow) table, and the page goes back on the list.
        storage.store(6, current, &[7, 8, 8]);
        assert_eq!(forms(&storage, 0), "CNC");
        assert!(listed(&storage, 0) && !listed(&storage, 1));
        assert_eq!(storage.stats().unpacks, 0);
        for unit in 0..64 {
            let expected = if unit == 6 { [7, 8, 8] } else { [7, 7, 7] };
            assert_eq!(storage.fetch(unit, current, &mut out), 3);
            assert_eq!(out, expected, "unit {unit}");
        }
    }

    #[test]
    fn an_incompressible_table_is_not_tried_again() {
        let units = 64;
        let mut tables = Tables::<u64> {
            units,
            gc: true,
            collect: true,
            narrow: true,
            in_use: 2,
            free: Vec::new(),
            free_max: 8,
            level_bytes: 0,
            page_scrubs: 0,
            constant_tables: 0,
            packed_tables: 0,
            packed_bytes: 0,
            narrow_tables: 0,
            narrow_bytes: 0,
        };
        let mut compression = Compression {
            clock: Clock::new(1),
            packer: Packer::default(),
            min_capacity: 1,
            max_capacity: 1,
            accesses: 0,
            refaults: 0,
            packs: 0,
            unpacks: 0,
        };
        // Levels 0 and 1, all 7s, would be constant but are marked incompressible: not
        // tried again. Level 2, all 7s and never tried, is constant (delta 0 from level 1);
        // level 3, 32-bit noise, is narrowed (LZ4 cannot halve it) and marked.
        let sevens = || vec![7u64; units].into_boxed_slice();
        let mut x = 0x9e37_79b9u32;
        let noise = (0..units)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                u64::from(x)
            })
            .collect::<Box<[u64]>>();
        let narrow_sevens = |incompressible| {
            let table = NarrowTable::of(&sevens()).expect("narrow");
            Level::Narrow {
                offsets: table.offsets,
                base_high: table.base_high,
                incompressible,
            }
        };
        tables.narrow_tables = 2;
        tables.narrow_bytes = 2 * units * 4;
        let mut levels = vec![
            Level::Table {
                tags: sevens(),
                incompressible: true,
            },
            narrow_sevens(true),
            narrow_sevens(false),
            Level::Table {
                tags: noise,
                incompressible: false,
            },
        ];
        compression.pack(&mut levels, &mut tables, &mut Vec::new());
        let forms: String = levels
            .iter()
            .map(|level| match level {
                Level::Table {
                    incompressible: true,
                    ..
                } => 'I',
                Level::Narrow {
                    incompressible: true,
                    ..
                } => 'n',
                Level::Constant(0) => 'C',
                _ => '?',
            })
            .collect();
        assert_eq!(forms, "InCn");
        assert_eq!(
            (
                compression.packs,
                tables.in_use,
                tables.constant_tables,
                tables.narrow_tables
            ),
            (1, 1, 1, 2)
        );
        assert_eq!(tables.narrow_bytes, 2 * units * 4);
    }

    #[test]
    fn a_narrow_table_is_read_and_written_in_place_until_a_tag_leaves_its_range() {
        let config = config_64();
        let versions = versions(2);
        let current = versions.as_slice();
        let mut storage = VStorage::<u64>::new(&config, true, true);
        let check = |storage: &mut VStorage<u64>, expected: &[[u64; 2]]| {
            let mut out = [0; 2];
            for (unit, vector) in expected.iter().enumerate() {
                assert_eq!(storage.fetch(unit as u64, current, &mut out), 2);
                assert_eq!(&out, vector, "unit {unit}");
            }
        };
        // Level 0: 31-bit noise (LZ4 cannot even halve its narrow form); level 1: level 0
        // plus 5. New tables are narrow.
        let mut x = 0x9e37_79b9u32;
        let mut expected = Vec::new();
        for unit in 0..64u64 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let vector = [u64::from(x >> 1), u64::from(x >> 1) + 5];
            storage.store(unit, current, &vector);
            expected.push(vector);
        }
        assert_eq!(forms(&storage, 0), "NN");
        assert_eq!(storage.stats().narrow_tables, 2);
        storage.store(64, current, &[1]); // lists page 1, packs page 0
        assert_eq!(forms(&storage, 0), "nC");
        assert!(!listed(&storage, 0));
        check(&mut storage, &expected);
        assert_eq!(storage.stats().unpacks, 0);
        // A tag in range is written in place: no new table, no listing.
        expected[3] = [17, 22];
        storage.store(3, current, &expected[3]);
        assert_eq!(forms(&storage, 0), "nC");
        assert!(!listed(&storage, 0));
        // Breaking the constant below a narrow level makes a narrow table of it, derived
        // through the narrow level.
        expected[4] = [18, 24];
        storage.store(4, current, &expected[4]);
        assert_eq!(forms(&storage, 0), "nN");
        assert!(listed(&storage, 0));
        check(&mut storage, &expected);
        // A tag out of the range turns a narrow level back into a plain table.
        expected[5] = [1 << 40, (1 << 40) + 5];
        storage.store(5, current, &expected[5]);
        assert_eq!(forms(&storage, 0), "TT");
        assert_eq!(storage.stats().narrow_tables, 0);
        check(&mut storage, &expected);
    }

    #[test]
    fn dead_packed_levels_are_dropped_without_unpacking() {
        let config = config_64();
        let mut versions = versions(3);
        let mut storage = VStorage::<u64>::new(&config, true, true);
        storage.store(0, versions.as_slice(), &[1, 2, 0]);
        storage.store(1, versions.as_slice(), &[1, 0, 7]);
        storage.store(64, versions.as_slice(), &[1]); // packs page 0
        assert_eq!(forms(&storage, 0), "PPP");
        versions.exit();
        versions.exit();
        versions.enter();
        let mut out = [0; 2];
        assert_eq!(storage.fetch(1, versions.as_slice(), &mut out), 1);
        assert_eq!(out[0], 1);
        assert_eq!(forms(&storage, 0), "N");
        let stats = storage.stats();
        assert_eq!(stats.unpacks, 1, "only level 0");
        assert_eq!(stats.packed_tables, 1, "page 1's level 0, packed in turn");
    }

    #[test]
    fn the_clock_list_grows_when_pages_keep_coming_back_and_shrinks_when_not() {
        let config = Config {
            victim_tables: 8,
            table_bits: 6,
            ..config()
        };
        let versions = versions(2);
        let current = versions.as_slice();
        let mut storage = VStorage::<u64>::new(&config, true, true);
        let mut out = [0; 2];
        // 40 pages whose levels are sparse (LZ4 shrinks them to a quarter of their narrow
        // form), visited round-robin: every listing of a page that was packed unpacks it.
        for round in 0..30u64 {
            for page in 0..40u64 {
                storage.store(page * 64, current, &[round + 1, round + page]);
            }
        }
        let grown = storage.stats().victim_tables;
        assert!(grown > 8 && grown <= 64, "{grown}");
        for page in 0..40u64 {
            assert_eq!(storage.fetch(page * 64, current, &mut out), 2);
            assert_eq!(out, [30, 29 + page]);
        }
        // Pages whose levels are all constant (once written whole) never need unpacking:
        // the list shrinks to an eighth of its initial size, packing what it drops.
        let mut unpacks = 0;
        for round in 0..100 {
            for unit in 4096..5296u64 {
                storage.store(unit, current, &[7, 7]);
            }
            if round == 0 {
                unpacks = storage.stats().unpacks;
            }
        }
        assert_eq!(storage.stats().unpacks, unpacks);
        assert_eq!(storage.stats().victim_tables, 1);
        assert!(storage.compression.as_ref().unwrap().clock.len() <= 1);
        for page in 0..40u64 {
            assert_eq!(storage.fetch(page * 64, current, &mut out), 2);
            assert_eq!(out, [30, 29 + page]);
        }
    }
}
