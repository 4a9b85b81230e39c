//! The VCache (paper §4, Figure 6b) in front of the [`VStorage`]: [`CachedVsm`].
//!
//! A direct-mapped array of lines indexed by the low bits of the shadowed address. A line
//! holds the address, one SlimTV version, the vector's length and a fixed capacity of tags
//! (the same for every line, so a line is found by arithmetic). Most accesses hit and cost a
//! SlimTV check; a miss writes the resident line back to the storage (validated first) if it
//! was written since it was fetched, and fetches the requested vector from it. A store that overwrites every level (HCPA's stores)
//! needs no fetch. When the depth exceeds the capacity, the lines are re-laid out with a
//! larger one (at least double, their contents kept), and, when the tags would exceed
//! [`Config::vcache_bytes`], fewer lines: deep vectors take the cache's memory, not more of
//! it (lines whose new place is taken go back to the storage).
//!
//! The length says which levels the line holds: levels from it on are default. SlimTV
//! validation only shortens it, so exited levels are never written back.

use std::ops::Range;

use crate::strided::{set_levels, slice_bytes};
use crate::vstorage::VStorage;
use crate::{max_valid_level, Config, Stats, Tag, VectorShadow, VersionStack, VsmKind};

/// [`Config::vcache_bytes`] leaves the VCache at least a `1 / 2^FEWEST_LINES_SHIFT` of
/// [`Config::vcache_lines`] (HCPA: 4096 of 131072).
pub const FEWEST_LINES_SHIFT: u32 = 5;

/// VCache + VStorage vector shadow memory (kinds `cache`, `gc`, `compress`).
#[derive(Debug)]
pub struct CachedVsm<T: Tag> {
    shift: u32,
    versions: VersionStack,
    /// Lines now (a power of two): fewer as vectors grow, within `tag_bytes`.
    lines: usize,
    max_lines: usize,
    tag_bytes: usize,
    /// Tags per line; 0 until the first access.
    capacity: usize,
    line_units: Box<[u64]>,
    /// The line's SlimTV version; 0: empty line.
    line_versions: Box<[u64]>,
    line_lens: Box<[u32]>,
    /// Whether the line was written since it was fetched: a clean line is what the storage
    /// holds already (validation only shortens both alike), so evicting it writes nothing.
    line_dirty: Box<[bool]>,
    line_tags: Box<[T]>,
    storage: VStorage<T>,
    hits: u64,
    misses: u64,
    evictions: u64,
    relayouts: u64,
}

impl<T: Tag> CachedVsm<T> {
    /// An empty shadow; `gc` and `compress` select the storage's techniques.
    pub fn new(config: &Config, gc: bool, compress: bool) -> Self {
        config.check();
        Self {
            shift: config.granularity.shift(),
            versions: VersionStack::new(),
            lines: config.vcache_lines,
            max_lines: config.vcache_lines,
            tag_bytes: config.vcache_bytes,
            capacity: 0,
            line_units: Box::default(),
            line_versions: Box::default(),
            line_lens: Box::default(),
            line_dirty: Box::default(),
            line_tags: Box::default(),
            storage: VStorage::new(config, gc, compress),
            hits: 0,
            misses: 0,
            evictions: 0,
            relayouts: 0,
        }
    }

    /// `cache`, `gc` or `compress`.
    pub fn kind(&self) -> VsmKind {
        match (self.storage.collects_garbage(), self.storage.compresses()) {
            (_, true) => VsmKind::Compress,
            (true, false) => VsmKind::Gc,
            (false, false) => VsmKind::Cache,
        }
    }

    /// The backing store.
    pub fn storage(&self) -> &VStorage<T> {
        &self.storage
    }

    /// Lines for vectors of `capacity` tags: as many as [`Config::vcache_bytes`] holds
    /// (a power of two), from [`Config::vcache_lines`] down to a [`FEWEST_LINES_SHIFT`]
    /// fraction of it.
    fn lines_for(&self, capacity: usize) -> usize {
        if self.tag_bytes == 0 {
            return self.max_lines;
        }
        let fit = self.tag_bytes / (capacity * size_of::<T>()).max(1);
        let fit = if fit == 0 { 1 } else { 1 << fit.ilog2() };
        fit.clamp(
            (self.max_lines >> FEWEST_LINES_SHIFT).max(1),
            self.max_lines,
        )
    }

    #[cold]
    fn grow(&mut self, depth: usize) {
        // Doubling bounds the re-layouts (each copies the whole cache) to log2 of the depth.
        let capacity = depth.next_multiple_of(4).max(2 * self.capacity);
        let lines = self.lines_for(capacity);
        if self.capacity == 0 {
            self.lines = lines;
            self.line_units = vec![0; lines].into_boxed_slice();
            self.line_versions = vec![0; lines].into_boxed_slice();
            self.line_lens = vec![0; lines].into_boxed_slice();
            self.line_dirty = vec![false; lines].into_boxed_slice();
        } else if lines < self.lines {
            self.fold_lines(lines);
        }
        // Only what a line holds moves: its tags up to its length, if it holds an address
        // (the tags past the length are stale, and an empty line's are never read). The rest
        // of the new table is left as allocated, zeroed and not yet touched: a program that
        // uses a few lines does not pay for copying, or faulting in, all of them.
        let mut tags = vec![T::default(); self.lines * capacity].into_boxed_slice();
        if self.capacity > 0 {
            for (index, &version) in self.line_versions.iter().enumerate() {
                if version == 0 {
                    continue;
                }
                let len = (self.line_lens[index] as usize).min(self.capacity);
                let from = index * self.capacity;
                tags[index * capacity..index * capacity + len]
                    .copy_from_slice(&self.line_tags[from..from + len]);
            }
        }
        self.line_tags = tags;
        self.capacity = capacity;
        self.relayouts += 1;
    }

    /// Fewer lines (`lines`, a smaller power of two), in the current capacity's layout: a
    /// line beyond them moves to its new index when that is empty, else goes back to the
    /// storage.
    fn fold_lines(&mut self, lines: usize) {
        for index in lines..self.lines {
            if self.line_versions[index] == 0 {
                continue;
            }
            let target = index & (lines - 1);
            if self.line_versions[target] != 0 {
                self.evict(index);
                continue;
            }
            self.line_units[target] = self.line_units[index];
            self.line_versions[target] = self.line_versions[index];
            self.line_lens[target] = self.line_lens[index];
            self.line_dirty[target] = self.line_dirty[index];
            let len = (self.line_lens[index] as usize).min(self.capacity);
            self.line_tags.copy_within(
                index * self.capacity..index * self.capacity + len,
                target * self.capacity,
            );
            self.line_versions[index] = 0;
        }
        self.line_units = self.line_units[..lines].into();
        self.line_versions = self.line_versions[..lines].into();
        self.line_lens = self.line_lens[..lines].into();
        self.line_dirty = self.line_dirty[..lines].into();
        self.lines = lines;
    }

    /// Writes line `index` back to the storage, if it was written, and empties it.
    fn evict(&mut self, index: usize) {
        let version = std::mem::take(&mut self.line_versions[index]);
        if !self.line_dirty[index] {
            return;
        }
        self.evictions += 1;
        let current = self.versions.as_slice();
        let valid = max_valid_level(version, current);
        let len = (self.line_lens[index] as usize).min(valid);
        let start = index * self.capacity;
        self.storage.store(
            self.line_units[index],
            current,
            &self.line_tags[start..start + len],
        );
    }

    /// The line holding shadowed `unit`, validated (fetched from the storage on a miss
    /// unless `fetch` is false, for a store that overwrites every level). Inlined: a hit,
    /// validated or not, is the common case of every access.
    #[inline(always)]
    fn line(&mut self, unit: u64, fetch: bool) -> usize {
        let depth = self.versions.depth();
        if depth > self.capacity {
            self.grow(depth);
        }
        let index = (unit as usize) & (self.lines - 1);
        let innermost = self.versions.innermost();
        let version = self.line_versions[index];
        if version != 0 && self.line_units[index] == unit {
            self.hits += 1;
            if version != innermost {
                let valid = max_valid_level(version, self.versions.as_slice());
                self.line_lens[index] = self.line_lens[index].min(valid as u32);
                self.line_versions[index] = innermost;
            }
        } else {
            self.miss(index, unit, fetch);
        }
        index
    }

    #[inline(never)]
    fn miss(&mut self, index: usize, unit: u64, fetch: bool) {
        self.misses += 1;
        if self.line_versions[index] != 0 {
            self.evict(index);
        }
        let start = index * self.capacity;
        let len = if fetch {
            let current = self.versions.as_slice();
            self.storage.fetch(
                unit,
                current,
                &mut self.line_tags[start..start + self.capacity],
            )
        } else {
            0
        };
        self.line_units[index] = unit;
        self.line_versions[index] = self.versions.innermost();
        self.line_lens[index] = len as u32;
        // A line not fetched is about to be overwritten.
        self.line_dirty[index] = !fetch;
    }

    /// The valid tags of `addr` where the line holds them, without copying: a prefix of the
    /// [`depth`](VectorShadow::depth) levels, those after it reading as default (what
    /// [`read`](VectorShadow::read) gives, before its padding).
    #[inline(always)]
    pub fn read_prefix(&mut self, addr: u64) -> &[T] {
        let (line, valid) = self.read_line(addr);
        &line[..valid]
    }

    /// The `depth` tags of `addr`, all to be overwritten by the caller: a store of every
    /// level ([`write_levels`](VectorShadow::write_levels) with `depth` tags) that writes
    /// them in place. No fetch from the storage.
    #[inline(always)]
    pub fn overwrite_levels(&mut self, addr: u64) -> &mut [T] {
        let depth = self.versions.depth();
        &mut self.overwrite_line(addr)[..depth]
    }

    /// As [`read_prefix`](Self::read_prefix), with the whole line: its `capacity` tags,
    /// of which the first `valid` are the prefix (the rest are stale, to be ignored). For
    /// whole-line vector loads, which a processor forwards an earlier whole store to.
    #[inline(always)]
    pub fn read_line(&mut self, addr: u64) -> (&[T], usize) {
        let depth = self.versions.depth();
        if depth == 0 {
            return (&[], 0);
        }
        let index = self.line(addr >> self.shift, true);
        let start = index * self.capacity;
        let valid = (self.line_lens[index] as usize).min(depth);
        (&self.line_tags[start..start + self.capacity], valid)
    }

    /// As [`overwrite_levels`](Self::overwrite_levels), with the whole line: its
    /// `capacity` tags, of which the caller writes the first `depth`; what it writes past
    /// them is never read.
    #[inline(always)]
    pub fn overwrite_line(&mut self, addr: u64) -> &mut [T] {
        let depth = self.versions.depth();
        if depth == 0 {
            return &mut [];
        }
        let index = self.line(addr >> self.shift, false);
        let start = index * self.capacity;
        self.line_lens[index] = depth as u32;
        self.line_dirty[index] = true;
        &mut self.line_tags[start..start + self.capacity]
    }

    /// Line `index`'s tags and length, to be written.
    #[inline]
    fn vector(&mut self, index: usize) -> (&mut [T], &mut u32) {
        self.line_dirty[index] = true;
        let start = index * self.capacity;
        (
            &mut self.line_tags[start..start + self.capacity],
            &mut self.line_lens[index],
        )
    }
}

impl<T: Tag> VectorShadow<T> for CachedVsm<T> {
    fn enter(&mut self) {
        self.versions.enter();
    }

    fn exit(&mut self) {
        self.versions.exit();
    }

    fn versions(&self) -> &VersionStack {
        &self.versions
    }

    #[inline]
    fn read(&mut self, addr: u64, out: &mut Vec<T>) {
        out.clear();
        let depth = self.depth();
        if depth == 0 {
            return;
        }
        let index = self.line(addr >> self.shift, true);
        let start = index * self.capacity;
        let len = self.line_lens[index] as usize;
        out.extend_from_slice(&self.line_tags[start..start + len]);
        out.resize(depth, T::default());
    }

    #[inline]
    fn write(&mut self, addr: u64, levels: Range<usize>, tag: T) {
        debug_assert!(
            levels.end <= self.depth(),
            "kage-vsm: write above the depth"
        );
        if levels.is_empty() {
            return;
        }
        let whole = levels.start == 0 && levels.end == self.depth();
        let index = self.line(addr >> self.shift, !whole);
        let (vector, len) = self.vector(index);
        let old_len = *len as usize;
        if levels.start > old_len {
            vector[old_len..levels.start].fill(T::default());
        }
        *len = old_len.max(levels.end) as u32;
        vector[levels].fill(tag);
    }

    #[inline]
    fn write_with(
        &mut self,
        addr: u64,
        levels: Range<usize>,
        tag: T,
        on_set: &mut impl FnMut(usize),
    ) {
        debug_assert!(
            levels.end <= self.depth(),
            "kage-vsm: write above the depth"
        );
        if levels.is_empty() {
            return;
        }
        let index = self.line(addr >> self.shift, true);
        let (vector, len) = self.vector(index);
        let old_len = *len as usize;
        if levels.end > old_len {
            // Levels from the length on hold stale tags: they read as default.
            vector[old_len..levels.end].fill(T::default());
            *len = levels.end as u32;
        }
        let start = levels.start;
        set_levels(&mut vector[levels], start, tag, on_set);
    }

    #[inline]
    fn update(&mut self, addr: u64, f: impl FnOnce(&mut [T])) {
        let depth = self.depth();
        if depth == 0 {
            return f(&mut []);
        }
        let index = self.line(addr >> self.shift, true);
        let (vector, len) = self.vector(index);
        vector[*len as usize..depth].fill(T::default());
        *len = depth as u32;
        f(&mut vector[..depth]);
    }

    /// Writing every level needs no fetch from the storage (HCPA's stores), as
    /// [`write`](VectorShadow::write) of every level.
    #[inline]
    fn write_levels(&mut self, addr: u64, tags: &[T]) {
        let depth = self.depth();
        if tags.len() < depth {
            return self.update(addr, |vector| vector[..tags.len()].copy_from_slice(tags));
        }
        if depth == 0 {
            return;
        }
        let index = self.line(addr >> self.shift, false);
        let (vector, len) = self.vector(index);
        vector[..depth].copy_from_slice(&tags[..depth]);
        *len = depth as u32;
    }

    fn heap_bytes(&self) -> usize {
        let lines = if self.capacity == 0 {
            0
        } else {
            self.lines * (2 * size_of::<u64>() + size_of::<u32>() + size_of::<bool>())
                + slice_bytes::<T>(self.lines * self.capacity)
        };
        self.versions.heap_bytes() + lines + self.storage.heap_bytes()
    }

    fn stats(&self) -> Stats {
        Stats {
            cache_hits: self.hits,
            cache_misses: self.misses,
            evictions: self.evictions,
            relayouts: self.relayouts,
            ..self.storage.stats()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_grows_with_the_depth_and_keeps_its_lines() {
        let config = Config {
            vcache_lines: 4,
            vcache_bytes: 0,
            ..Config::default()
        };
        let mut vsm = CachedVsm::<u64>::new(&config, true, false);
        assert_eq!(vsm.heap_bytes(), 0);
        vsm.enter();
        vsm.write(0, 0..1, 7);
        assert_eq!(vsm.capacity, 4);
        for _ in 0..5 {
            vsm.enter();
        }
        vsm.write(8, 0..6, 9);
        assert_eq!((vsm.capacity, vsm.stats().relayouts), (8, 2));
        let mut out = Vec::new();
        vsm.read(0, &mut out);
        assert_eq!(out, [7, 0, 0, 0, 0, 0]);
        let stats = vsm.stats();
        assert_eq!(
            (stats.cache_hits, stats.cache_misses, stats.evictions),
            (1, 2, 0)
        );
    }

    #[test]
    fn read_prefix_and_overwrite_levels_match_read_and_write_levels() {
        let config = Config {
            vcache_lines: 2,
            vcache_bytes: 0,
            table_bits: 2,
            ..Config::default()
        };
        let mut a = CachedVsm::<u64>::new(&config, true, false);
        let mut b = CachedVsm::<u64>::new(&config, true, false);
        assert!(a.read_prefix(0).is_empty());
        assert!(a.overwrite_levels(0).is_empty());
        let mut out = Vec::new();
        let mut step = 0u64;
        for round in 0..40u64 {
            for vsm in [&mut a, &mut b] {
                match round % 5 {
                    0 | 3 => vsm.enter(),
                    4 if vsm.depth() > 1 => vsm.exit(),
                    _ => {}
                }
            }
            for addr in [0u64, 8, 16, 24, 40] {
                step += 1;
                let depth = a.depth();
                if (round + addr) % 3 == 0 {
                    let tags: Vec<u64> = (0..depth as u64).map(|l| step * 10 + l).collect();
                    a.overwrite_levels(addr).copy_from_slice(&tags);
                    b.write_levels(addr, &tags);
                } else {
                    let prefix = a.read_prefix(addr).to_vec();
                    b.read(addr, &mut out);
                    assert!(prefix.len() <= depth);
                    assert_eq!(
                        &out[..prefix.len()],
                        &prefix[..],
                        "round {round} addr {addr}"
                    );
                    assert!(out[prefix.len()..].iter().all(|&t| t == 0));
                }
            }
        }
        assert_eq!(a.stats(), b.stats());
    }

    #[test]
    fn a_conflict_miss_goes_through_the_storage() {
        let config = Config {
            vcache_lines: 2,
            vcache_bytes: 0,
            table_bits: 2,
            ..Config::default()
        };
        let mut vsm = CachedVsm::<u64>::new(&config, false, false);
        vsm.enter();
        vsm.enter();
        vsm.write(0, 0..2, 1); // line 0
        vsm.write(16, 0..2, 2); // line 0 again: evicts address 0
        assert_eq!(vsm.stats().evictions, 1);
        vsm.exit();
        vsm.enter();
        let mut out = Vec::new();
        vsm.read(0, &mut out); // evicts 16, fetches 0 with level 1 scrubbed
        assert_eq!(out, [1, 0]);
        vsm.read(16, &mut out);
        assert_eq!(out, [2, 0]);
        assert_eq!(vsm.stats().evictions, 2);
    }
}
