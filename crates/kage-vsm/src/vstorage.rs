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
//! With compression, only the level tables on the clock list stay unpacked ([`compress`]);
//! a page is unpacked when it is touched and packed when the list evicts it (after a BulkTV
//! validation, so that dead levels are not packed).
//!
//! [`compress`]: crate::compress
//! [`Config::free_tables`]: crate::Config::free_tables

use crate::compress::{Clock, PackedLevels, Packer};
use crate::page_table::PageTable;
use crate::strided::{slice_bytes, Addressing};
use crate::{max_valid_level, Config, Stats, Tag};

const NOT_LISTED: u32 = u32::MAX;

/// One page of the VStorage: the segment table entry's version and level table.
#[derive(Debug)]
pub struct StoragePage<T> {
    /// The innermost version at the last BulkTV validation; 0: never.
    version: u64,
    /// Levels at and beyond this hold only default tags.
    dirty: usize,
    /// Slot on the clock list, or `NOT_LISTED`.
    clock_slot: u32,
    /// The level table: one tag table per level, `None` when all default.
    levels: Vec<Option<Box<[T]>>>,
    /// The level table while compressed (then `levels` is empty).
    packed: Option<PackedLevels>,
}

impl<T> StoragePage<T> {
    fn new() -> Self {
        Self {
            version: 0,
            dirty: 0,
            clock_slot: NOT_LISTED,
            levels: Vec::new(),
            packed: None,
        }
    }
}

/// Tag table allocation, the garbage collector's free list and their accounting.
#[derive(Debug)]
struct Tables<T> {
    units: usize,
    gc: bool,
    /// Tag tables in level tables.
    in_use: usize,
    free: Vec<Box<[T]>>,
    free_max: usize,
    /// Bytes of the level tables' vectors (their capacity).
    level_bytes: usize,
    page_scrubs: u64,
}

/// Compression state: the clock list, the packer and the packed bytes.
#[derive(Debug)]
struct Compression {
    clock: Clock,
    packer: Packer,
    packed_tables: usize,
    packed_bytes: usize,
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

    /// Applies `f` to a page's level table, keeping `level_bytes` exact.
    #[inline]
    fn resize_levels<R>(
        &mut self,
        levels: &mut Vec<Option<Box<[T]>>>,
        f: impl FnOnce(&mut Vec<Option<Box<[T]>>>) -> R,
    ) -> R {
        let before = levels.capacity();
        let result = f(levels);
        self.level_bytes = self.level_bytes + levels.capacity() * size_of::<Option<Box<[T]>>>()
            - before * size_of::<Option<Box<[T]>>>();
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
        if self.gc {
            let dead = page.levels.len().saturating_sub(scrub_start);
            for _ in 0..dead {
                if let Some(table) = page.levels.pop().flatten() {
                    self.give(table);
                }
            }
            self.trim(&mut page.levels);
        } else {
            let end = dirty.min(page.levels.len());
            for table in page.levels[scrub_start.min(end)..end].iter_mut().flatten() {
                table.fill(T::default());
            }
        }
    }

    /// Drops trailing empty levels and, when the level table is mostly slack, its capacity.
    fn trim(&mut self, levels: &mut Vec<Option<Box<[T]>>>) {
        while let Some(None) = levels.last() {
            levels.pop();
        }
        if levels.capacity() > 2 * levels.len().max(4) {
            self.resize_levels(levels, |levels| levels.shrink_to(levels.len().max(4)));
        }
    }

    fn heap_bytes(&self) -> usize {
        (self.in_use + self.free.len()) * slice_bytes::<T>(self.units)
            + self.free.capacity() * size_of::<Box<[T]>>()
            + self.level_bytes
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
                in_use: 0,
                free: Vec::new(),
                free_max: if gc { config.free_tables } else { 0 },
                level_bytes: 0,
                page_scrubs: 0,
            },
            compression: compress.then(|| Compression {
                clock: Clock::new(config.victim_tables),
                packer: Packer::default(),
                packed_tables: 0,
                packed_bytes: 0,
                packs: 0,
                unpacks: 0,
            }),
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
        let Some(page) = self.pages.get_mut(page_no) else {
            return 0;
        };
        let page = if self.compression.is_some() {
            let slot = page.clock_slot;
            self.list(page_no, slot, current);
            self.pages.get_mut(page_no).expect("listed page exists")
        } else {
            page
        };
        self.tables.validate(page, current);
        let len = page.dirty.min(page.levels.len());
        debug_assert!(len <= current.len());
        for (slot, level) in out[..len].iter_mut().zip(&page.levels) {
            *slot = level.as_ref().map_or(T::default(), |table| table[offset]);
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
        let page = if used == 0 {
            // Nothing to store: only an existing page can hold stale values to clear.
            match self.pages.get_mut(page_no) {
                Some(page) => page,
                None => return,
            }
        } else {
            self.pages.get_or_insert_with(page_no, StoragePage::new)
        };
        let page = if self.compression.is_some() {
            let slot = page.clock_slot;
            self.list(page_no, slot, current);
            self.pages.get_mut(page_no).expect("listed page exists")
        } else {
            page
        };
        let tables = &mut self.tables;
        tables.validate(page, current);
        if page.levels.len() < used {
            tables.resize_levels(&mut page.levels, |levels| levels.resize_with(used, || None));
        }
        for (level, &tag) in tags.iter().enumerate() {
            if tag != T::default() {
                page.levels[level].get_or_insert_with(|| tables.take())[offset] = tag;
            } else if let Some(Some(table)) = page.levels.get_mut(level) {
                table[offset] = T::default();
            }
        }
        // The VCache line was the address's only valid copy: deeper levels hold nothing.
        let end = page.dirty.min(page.levels.len());
        for table in page.levels[tags.len().min(end)..end].iter_mut().flatten() {
            table[offset] = T::default();
        }
        page.dirty = page.dirty.max(used);
    }

    /// Marks page `page_no` (which exists, in clock slot `slot`) as recently used or, when
    /// it is not listed, lists it: packs the list's victim and unpacks the page.
    #[inline]
    fn list(&mut self, page_no: u64, slot: u32, current: &[u64]) {
        let compression = self.compression.as_mut().expect("compression on");
        if slot != NOT_LISTED {
            compression.clock.reference(slot as usize);
            return;
        }
        let (slot, victim) = compression.clock.insert(page_no);
        if let Some(victim) = victim {
            let victim = self.pages.get_mut(victim).expect("listed page exists");
            victim.clock_slot = NOT_LISTED;
            self.tables.validate(victim, current);
            let tables = &mut self.tables;
            let keep = victim.dirty.min(victim.levels.len());
            for table in victim.levels.drain(keep..).flatten() {
                tables.give(table);
            }
            if victim.levels.iter().any(Option::is_some) {
                let packed = compression.packer.pack(&victim.levels, tables.units);
                compression.packed_tables += 1;
                compression.packed_bytes += packed.heap_bytes();
                compression.packs += 1;
                victim.packed = Some(packed);
            }
            for table in victim.levels.drain(..).flatten() {
                tables.give(table);
            }
            tables.resize_levels(&mut victim.levels, |levels| *levels = Vec::new());
        }
        let page = self.pages.get_mut(page_no).expect("listed page exists");
        page.clock_slot = slot as u32;
        if let Some(packed) = page.packed.take() {
            let tables = &mut self.tables;
            tables.resize_levels(&mut page.levels, |levels| {
                levels.reserve_exact(packed.levels())
            });
            compression
                .packer
                .unpack(&packed, tables.units, &mut page.levels, || {
                    tables.take_unscrubbed()
                });
            compression.packed_tables -= 1;
            compression.packed_bytes -= packed.heap_bytes();
            compression.unpacks += 1;
        }
    }

    /// Exact bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        let compression = self.compression.as_ref().map_or(0, |compression| {
            compression.clock.heap_bytes()
                + compression.packer.heap_bytes()
                + compression.packed_bytes
        });
        self.pages.heap_bytes() + self.tables.heap_bytes() + compression
    }

    /// The store's counters (tables, scrubs, compression).
    pub fn stats(&self) -> Stats {
        let (packed_tables, packed_bytes, packs, unpacks) =
            self.compression.as_ref().map_or((0, 0, 0, 0), |c| {
                (c.packed_tables, c.packed_bytes, c.packs, c.unpacks)
            });
        Stats {
            page_scrubs: self.tables.page_scrubs,
            tag_tables: self.tables.in_use + self.tables.free.len(),
            free_tables: self.tables.free.len(),
            packed_tables,
            packed_bytes,
            packs,
            unpacks,
            ..Stats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VersionStack;

    fn config() -> Config {
        Config {
            table_bits: 2,
            segment_bits: 2,
            victim_tables: 1,
            free_tables: 8,
            ..Config::default()
        }
    }

    #[test]
    fn garbage_collection_reuses_the_tables_of_exited_levels() {
        let mut versions = VersionStack::new();
        let mut storage = VStorage::<u64>::new(&config(), true, false);
        for _ in 0..4 {
            versions.enter();
        }
        storage.store(0, versions.as_slice(), &[1, 2, 3, 4]);
        assert_eq!(storage.stats().tag_tables, 4);
        // Two levels exit; the next access to the page collects their tables.
        versions.exit();
        versions.exit();
        let mut out = [0; 4];
        assert_eq!(storage.fetch(1, versions.as_slice(), &mut out), 2);
        assert_eq!(storage.stats().free_tables, 2);
        let page = storage.pages.get(0).unwrap();
        assert_eq!(page.levels.len(), 2);
        // Another page reuses them, scrubbed.
        versions.enter();
        storage.store(4, versions.as_slice(), &[0, 0, 9]);
        assert_eq!(storage.stats().free_tables, 1);
        assert_eq!(storage.stats().tag_tables, 4);
        assert_eq!(storage.fetch(5, versions.as_slice(), &mut out), 3);
        assert_eq!(&out[..3], &[0, 0, 0]);
        assert_eq!(storage.fetch(4, versions.as_slice(), &mut out), 3);
        assert_eq!(&out[..3], &[0, 0, 9]);
    }

    #[test]
    fn without_garbage_collection_dead_tables_are_scrubbed_in_place() {
        let mut versions = VersionStack::new();
        let mut storage = VStorage::<u64>::new(&config(), false, false);
        for _ in 0..4 {
            versions.enter();
        }
        storage.store(0, versions.as_slice(), &[1, 2, 3, 4]);
        versions.exit();
        versions.exit();
        let mut out = [0; 4];
        assert_eq!(storage.fetch(0, versions.as_slice(), &mut out), 2);
        assert_eq!(&out[..2], &[1, 2]);
        let page = storage.pages.get(0).unwrap();
        assert_eq!(page.levels.len(), 4);
        assert!(page.levels[2..]
            .iter()
            .all(|t| t.as_ref().unwrap().iter().all(|&tag| tag == 0)));
        assert_eq!(storage.stats().tag_tables, 4);
    }

    #[test]
    fn packed_pages_come_back_exactly() {
        let mut versions = VersionStack::new();
        let mut storage = VStorage::<u64>::new(&config(), true, true);
        for _ in 0..3 {
            versions.enter();
        }
        storage.store(0, versions.as_slice(), &[5, 6, 7]);
        storage.store(3, versions.as_slice(), &[8, 0, 10]);
        storage.store(4, versions.as_slice(), &[1]); // another page: packs page 0
        let stats = storage.stats();
        assert_eq!((stats.packed_tables, stats.packs), (1, 1));
        assert!(storage.pages.get(0).unwrap().levels.is_empty());
        let mut out = [0; 3];
        assert_eq!(storage.fetch(3, versions.as_slice(), &mut out), 3);
        assert_eq!(out, [8, 0, 10]);
        assert_eq!(storage.fetch(0, versions.as_slice(), &mut out), 3);
        assert_eq!(out, [5, 6, 7]);
        assert_eq!(storage.stats().unpacks, 1);
        assert_eq!(storage.stats().packs, 2, "page 1 was packed in turn");
    }
}
