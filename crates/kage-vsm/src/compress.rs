//! Dynamic compression of cold tag tables (paper §5.2, §6.3).
//!
//! The unit is one tag table (one level of one page, `2^table_bits` tags), encoded as its
//! element-wise difference from the level above ([`Tag::delta_from`]; a level with no table
//! above counts as default), little endian, then compressed with LZ4 (`lz4_flex`'s block
//! format). [`Packer::pack`] picks the cheapest exact form of a table:
//!
//! - [`Packing::Absent`]: every tag is default; the table can simply be released.
//! - [`Packing::Constant`]: every tag differs from the level above by the same delta. HCPA
//!   stores write one timestamp to every level (§6.3), so most levels are this; the delta is
//!   one tag, and a tag of the level is read in O(1) from the level above, with no
//!   unpacking at all (see `vstorage`).
//! - [`Packing::Packed`]: the deltas (or the tags themselves, when that gives more zero
//!   tags, as for a sparse inner level under a dense one) compressed with LZ4.
//! - [`Packing::Incompressible`]: LZ4 did not halve the table (or, for a table of 2 KiB or
//!   more, its first eighth): it is better kept as it is (the caller remembers this in a
//!   per-table bit and does not try again).
//!
//! A table that LZ4 cannot halve may still be *narrow* ([`NarrowTable`]): HCPA's timestamps
//! are 64-bit, but a page's tags at one level usually lie within `2^32` of each other (times
//! since an instance's start, in cost units). Such a table keeps each tag as a 32-bit
//! offset from a base: half the bytes, read and written in place like a plain table (no
//! unpacking), until a store writes a tag out of its range.
//!
//! Unpacking restores every tag exactly. Which tables stay unpacked is decided by a
//! [`Clock`] list of level tables (second chance): touching a listed level table sets its
//! reference bit; one not listed is listed and unpacked, and the list evicts (packs) the
//! first level table whose bit is clear, clearing bits as the hand passes, so a table is
//! packed only after a whole sweep of the hand without being touched. The list's capacity
//! adapts (`vstorage`), as the paper's clock list acts as a victim cache behind the VCache.

use crate::Tag;

/// LZ4 output larger than `raw / INCOMPRESSIBLE` counts as incompressible.
const INCOMPRESSIBLE: usize = 2;
/// Tables of at least this many bytes are first judged by a sample, their first eighth.
const SAMPLE_FROM: usize = 2048;

/// An LZ4-compressed tag table: one byte saying whether the values are differences from
/// the level above (1) or the tags (0), then the LZ4 block. (One boxed slice, so that a
/// level holding it fits in 24 bytes.)
#[derive(Debug)]
pub struct PackedTable {
    bytes: Box<[u8]>,
}

impl PackedTable {
    /// Bytes on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the table was encoded as differences from the level above.
    pub fn is_delta(&self) -> bool {
        self.bytes[0] == 1
    }
}

/// A tag table of 64-bit tags that all lie in `base .. base + 2^32`, stored as 32-bit
/// offsets from `base`: 4 KiB for a page of 1024 granules, one block of the runtime
/// allocator's largest class. `base` is a multiple of `2^16` below `2^48` (0 when every tag
/// is below `2^32`, so later small tags fit too), kept as `base_high = base >> 16` in 32
/// bits: a level holds the two fields apart and still fits in 24 bytes, and reads and writes
/// them in place with [`narrow_get`] and [`narrow_set`].
#[derive(Debug)]
pub struct NarrowTable {
    pub offsets: Box<[u32]>,
    pub base_high: u32,
}

/// `base = base_high << BASE_SHIFT`.
const BASE_SHIFT: u32 = 16;

impl NarrowTable {
    /// `tags` narrow, or `None` when the tags are not wider than 32 bits (nothing to gain)
    /// or do not fit in one range.
    pub fn of<T: Tag>(tags: &[T]) -> Option<Self> {
        if T::BYTES <= size_of::<u32>() {
            return None;
        }
        let (low, high) = tags.iter().fold((u64::MAX, 0), |(low, high), tag| {
            let bits = tag.to_bits();
            (low.min(bits), high.max(bits))
        });
        let base_high = if high <= u64::from(u32::MAX) {
            0
        } else {
            u32::try_from(low >> BASE_SHIFT).ok()?
        };
        let base = narrow_base(base_high);
        if high - base > u64::from(u32::MAX) {
            return None;
        }
        Some(Self {
            offsets: tags
                .iter()
                .map(|tag| (tag.to_bits() - base) as u32)
                .collect(),
            base_high,
        })
    }

    /// A table of `units` zero tags (base 0), or `None` when `T` is not wider than 32 bits.
    pub fn zeroed<T: Tag>(units: usize) -> Option<Self> {
        (T::BYTES > size_of::<u32>()).then(|| Self {
            offsets: vec![0; units].into_boxed_slice(),
            base_high: 0,
        })
    }
}

/// The base of a narrow table.
#[inline]
pub fn narrow_base(base_high: u32) -> u64 {
    u64::from(base_high) << BASE_SHIFT
}

/// The tag at `offset` of a narrow table.
#[inline]
pub fn narrow_get<T: Tag>(offsets: &[u32], base_high: u32, offset: usize) -> T {
    T::from_bits(narrow_base(base_high) + u64::from(offsets[offset]))
}

/// Stores `tag` at `offset` of a narrow table if it is in the table's range; returns whether
/// it was.
#[inline]
pub fn narrow_set<T: Tag>(offsets: &mut [u32], base_high: u32, offset: usize, tag: T) -> bool {
    let Some(narrow) = tag.to_bits().checked_sub(narrow_base(base_high)) else {
        return false;
    };
    let Ok(narrow) = u32::try_from(narrow) else {
        return false;
    };
    offsets[offset] = narrow;
    true
}

/// Every tag of a narrow table, into `out` (as long as the table).
pub fn narrow_widen_into<T: Tag>(offsets: &[u32], base_high: u32, out: &mut [T]) {
    let base = narrow_base(base_high);
    for (slot, &narrow) in out.iter_mut().zip(offsets) {
        *slot = T::from_bits(base + u64::from(narrow));
    }
}

/// What [`Packer::pack`] made of a table.
#[derive(Debug)]
pub enum Packing<T> {
    /// Every tag is default.
    Absent,
    /// Every tag is `T::undelta(delta, above)`, `above` being the level above's tag at the
    /// same address (default when there is no level above or it has no table).
    Constant(T),
    /// Compressed.
    Packed(PackedTable),
    /// LZ4 would not even halve it.
    Incompressible,
}

/// Packs and unpacks tag tables, reusing its scratch buffers (whose capacity it counts).
#[derive(Debug, Default)]
pub struct Packer {
    raw: Vec<u8>,
    compressed: Vec<u8>,
}

#[inline]
fn above_at<T: Tag>(above: Option<&[T]>, index: usize) -> T {
    above.map_or(T::default(), |above| above[index])
}

impl Packer {
    /// Packs `table`; `above` holds the level above's tags (`None`: all default).
    pub fn pack<T: Tag>(&mut self, table: &[T], above: Option<&[T]>) -> Packing<T> {
        self.pack_tags(table.len(), |index| table[index], above, INCOMPRESSIBLE)
    }

    /// Packs a narrow table, as [`pack`](Packer::pack) does a plain one; LZ4 must then
    /// halve the narrow form, not the plain one.
    pub fn pack_narrow<T: Tag>(
        &mut self,
        offsets: &[u32],
        base_high: u32,
        above: Option<&[T]>,
    ) -> Packing<T> {
        let tag_at = |index| narrow_get(offsets, base_high, index);
        self.pack_tags(offsets.len(), tag_at, above, 2 * INCOMPRESSIBLE)
    }

    /// Packs the `len` tags `tag_at(0..len)`; LZ4 output must be at most `1 / shrink` of the
    /// plain form.
    fn pack_tags<T: Tag>(
        &mut self,
        len: usize,
        tag_at: impl Fn(usize) -> T,
        above: Option<&[T]>,
        shrink: usize,
    ) -> Packing<T> {
        debug_assert!(above.is_none_or(|above| above.len() == len));
        let first = tag_at(0).delta_from(above_at(above, 0));
        let (mut constant, mut plain_zeros, mut delta_zeros) = (true, 0usize, 0usize);
        for index in 0..len {
            let tag = tag_at(index);
            let delta = tag.delta_from(above_at(above, index));
            constant &= delta == first;
            plain_zeros += (tag == T::default()) as usize;
            delta_zeros += (delta == T::default()) as usize;
        }
        if plain_zeros == len {
            return Packing::Absent;
        }
        if constant {
            return Packing::Constant(first);
        }
        let delta = above.is_some() && delta_zeros >= plain_zeros;
        self.raw.clear();
        self.raw.resize(len * T::BYTES, 0);
        let out = self.raw.chunks_exact_mut(T::BYTES);
        match above {
            Some(above) if delta => {
                for ((index, bytes), &above) in out.enumerate().zip(above) {
                    tag_at(index).delta_from(above).write_le(bytes);
                }
            }
            _ => {
                for (index, bytes) in out.enumerate() {
                    tag_at(index).delta_from(T::default()).write_le(bytes);
                }
            }
        }
        let bound = 1 + lz4_flex::block::get_maximum_output_size(self.raw.len());
        if self.compressed.len() < bound {
            self.compressed.resize(bound, 0);
        }
        // LZ4 is slowest on what it cannot compress: judge a large table by its first
        // eighth before compressing all of it.
        if self.raw.len() >= SAMPLE_FROM {
            let sample = &self.raw[..self.raw.len() / 8];
            let written = lz4_flex::block::compress_into(sample, &mut self.compressed)
                .expect("kage-vsm: LZ4 output buffer sized by its bound");
            if written * shrink > sample.len() {
                return Packing::Incompressible;
            }
        }
        let written = lz4_flex::block::compress_into(&self.raw, &mut self.compressed[1..])
            .expect("kage-vsm: LZ4 output buffer sized by its bound");
        if written * shrink > self.raw.len() {
            return Packing::Incompressible;
        }
        self.compressed[0] = delta as u8;
        Packing::Packed(PackedTable {
            bytes: Box::from(&self.compressed[..1 + written]),
        })
    }

    /// Restores a packed table into `out` (every tag is overwritten); `above` must hold the
    /// level above's tags as they were when it was packed, wherever `out`'s tags matter.
    pub fn unpack<T: Tag>(&mut self, packed: &PackedTable, above: Option<&[T]>, out: &mut [T]) {
        let raw_len = out.len() * T::BYTES;
        if self.raw.len() < raw_len {
            self.raw.resize(raw_len, 0);
        }
        let read = lz4_flex::block::decompress_into(&packed.bytes[1..], &mut self.raw[..raw_len])
            .expect("kage-vsm: corrupt packed tag table");
        assert_eq!(
            read, raw_len,
            "kage-vsm: packed tag table of the wrong size"
        );
        let values = self.raw[..raw_len].chunks_exact(T::BYTES);
        match above {
            Some(above) if packed.is_delta() => {
                for ((slot, bytes), &above) in out.iter_mut().zip(values).zip(above) {
                    *slot = T::undelta(T::read_le(bytes), above);
                }
            }
            _ => {
                debug_assert!(!packed.is_delta() || above.is_none());
                for (slot, bytes) in out.iter_mut().zip(values) {
                    // Deltas from an all-default level above are the tags' own deltas
                    // from default.
                    *slot = T::undelta(T::read_le(bytes), T::default());
                }
            }
        }
    }

    /// Bytes of the scratch buffers.
    pub fn heap_bytes(&self) -> usize {
        self.raw.capacity() + self.compressed.capacity()
    }
}

/// Bounded second-chance ("clock") list of keys whose capacity can change.
#[derive(Debug)]
pub struct Clock {
    keys: Vec<u64>,
    referenced: Vec<bool>,
    hand: usize,
    capacity: usize,
}

impl Clock {
    /// An empty list holding up to `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 1, "kage-vsm: clock list of capacity 0");
        Self {
            keys: Vec::new(),
            referenced: Vec::new(),
            hand: 0,
            capacity,
        }
    }

    /// Marks the key in `slot` as recently used.
    #[inline]
    pub fn reference(&mut self, slot: usize) {
        self.referenced[slot] = true;
    }

    /// Lists `key` (not listed yet) as recently used. Returns its slot and, when the list
    /// was full, the key it evicted from that slot.
    pub fn insert(&mut self, key: u64) -> (usize, Option<u64>) {
        if self.keys.len() < self.capacity {
            self.keys.push(key);
            self.referenced.push(true);
            return (self.keys.len() - 1, None);
        }
        while self.referenced[self.hand] {
            self.referenced[self.hand] = false;
            self.hand = (self.hand + 1) % self.keys.len();
        }
        let slot = self.hand;
        let victim = std::mem::replace(&mut self.keys[slot], key);
        self.referenced[slot] = true;
        self.hand = (slot + 1) % self.keys.len();
        (slot, Some(victim))
    }

    /// The most keys listed at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Changes the capacity (at least 1). When it shrinks below [`len`](Self::len), the
    /// caller evicts the excess with [`pop_excess`](Self::pop_excess).
    pub fn set_capacity(&mut self, capacity: usize) {
        assert!(capacity >= 1, "kage-vsm: clock list of capacity 0");
        self.capacity = capacity;
    }

    /// Evicts the key in the last slot if more keys are listed than the capacity allows
    /// (slots of the other keys do not change).
    pub fn pop_excess(&mut self) -> Option<u64> {
        if self.keys.len() <= self.capacity {
            return None;
        }
        self.referenced.pop();
        let key = self.keys.pop();
        if self.hand >= self.keys.len() {
            self.hand = 0;
        }
        key
    }

    /// Listed keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is listed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.keys.capacity() * size_of::<u64>() + self.referenced.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs and unpacks `table` under `above`; returns the packing's bytes (0 when not LZ4).
    fn round_trip<T: Tag>(table: &[T], above: Option<&[T]>) -> Packing<T> {
        let mut packer = Packer::default();
        let packing = packer.pack(table, above);
        match &packing {
            Packing::Absent => assert!(table.iter().all(|&t| t == T::default())),
            Packing::Constant(delta) => {
                for (index, &tag) in table.iter().enumerate() {
                    assert_eq!(T::undelta(*delta, above_at(above, index)), tag);
                }
            }
            Packing::Packed(packed) => {
                let mut back = vec![T::default(); table.len()];
                packer.unpack(packed, above, &mut back);
                assert_eq!(back, table);
                // Unpacking overwrites whatever the table held.
                let mut dirty = table.to_vec();
                dirty.reverse();
                packer.unpack(packed, above, &mut dirty);
                assert_eq!(dirty, table);
            }
            Packing::Incompressible => {}
        }
        packing
    }

    fn noise(seed: u64, units: usize) -> Vec<u64> {
        let mut x = seed | 1;
        (0..units)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect()
    }

    #[test]
    fn each_form_round_trips_exactly() {
        let units = 512;
        let stamps: Vec<u64> = (0..units as u64).map(|u| 1000 + 3 * u).collect();
        // All default, with or without a level above.
        assert!(matches!(
            round_trip(&vec![0u64; units], Some(&stamps)),
            Packing::Absent
        ));
        // One timestamp written to every level: a zero delta from the level above.
        assert!(matches!(
            round_trip(&stamps, Some(&stamps)),
            Packing::Constant(0)
        ));
        let offset: Vec<u64> = stamps.iter().map(|s| s.wrapping_add(7)).collect();
        assert!(matches!(
            round_trip(&offset, Some(&stamps)),
            Packing::Constant(7)
        ));
        assert!(matches!(
            round_trip(&vec![u64::MAX; units], None),
            Packing::Constant(u64::MAX)
        ));
        // Sparse inner level under a dense one: the tags, not the deltas, are mostly zero.
        let mut sparse = vec![0u64; units];
        sparse[5] = stamps[5];
        sparse[300] = 99;
        match round_trip(&sparse, Some(&stamps)) {
            Packing::Packed(packed) => {
                assert!(!packed.is_delta());
                assert!(
                    packed.heap_bytes() * 20 < units * 8,
                    "{}",
                    packed.heap_bytes()
                );
            }
            other => panic!("{other:?}"),
        }
        // Mostly equal to the level above: deltas.
        let mut close = stamps.clone();
        close[17] = 5;
        close[200] = 0;
        match round_trip(&close, Some(&stamps)) {
            Packing::Packed(packed) => assert!(packed.is_delta()),
            other => panic!("{other:?}"),
        }
        // Random 64-bit values do not compress.
        assert!(matches!(
            round_trip(&noise(7, units), Some(&stamps)),
            Packing::Incompressible
        ));
        assert!(matches!(
            round_trip(&noise(9, units), None),
            Packing::Incompressible
        ));
        // A large table is judged by its first eighth: noise there marks it incompressible
        // even when the rest is zero (a heuristic that saves LZ4 time, never exactness).
        let mut noisy_head = vec![0u64; units];
        noisy_head[..units / 8].copy_from_slice(&noise(5, units / 8));
        assert!(matches!(
            round_trip(&noisy_head, None),
            Packing::Incompressible
        ));
        let mut noisy_tail = vec![0u64; units];
        noisy_tail[units - units / 8..].copy_from_slice(&noise(5, units / 8));
        assert!(matches!(round_trip(&noisy_tail, None), Packing::Packed(_)));
        // Small tag types and tiny tables.
        let bits: Vec<bool> = (0..units).map(|u| u % 3 == 0).collect();
        round_trip(&bits, None);
        let shifted: Vec<bool> = (0..units).map(|u| u % 3 == 1).collect();
        round_trip(&shifted, Some(&bits));
        round_trip(&(0..units).map(|u| u as u8).collect::<Vec<u8>>(), None);
        assert!(matches!(
            round_trip(&[4u64], Some(&[9])),
            Packing::Constant(_)
        ));
    }

    #[test]
    fn clock_gives_a_second_chance() {
        let mut clock = Clock::new(3);
        assert_eq!(clock.insert(10), (0, None));
        assert_eq!(clock.insert(11), (1, None));
        assert_eq!(clock.insert(12), (2, None));
        // All referenced: the hand clears every bit and evicts the first key.
        assert_eq!(clock.insert(13), (0, Some(10)));
        // 11 and 12 are now clear; 11 is touched again and survives.
        clock.reference(1);
        assert_eq!(clock.insert(14), (2, Some(12)));
        assert_eq!(
            clock.insert(15),
            (1, Some(11)),
            "the second chance is used up"
        );
        assert_eq!(clock.len(), 3);
    }

    #[test]
    fn clock_grows_and_shrinks() {
        let mut clock = Clock::new(2);
        clock.insert(1);
        clock.insert(2);
        clock.set_capacity(4);
        assert_eq!(clock.insert(3), (2, None), "room after growing");
        assert_eq!(clock.insert(4), (3, None));
        assert_eq!(clock.pop_excess(), None);
        clock.set_capacity(2);
        assert_eq!(clock.pop_excess(), Some(4));
        assert_eq!(clock.pop_excess(), Some(3));
        assert_eq!(clock.pop_excess(), None);
        // Slots 0 and 1 kept their keys; the hand wraps within the smaller list.
        assert_eq!(clock.insert(5), (0, Some(1)));
        assert_eq!(clock.insert(6), (1, Some(2)));
        assert_eq!(clock.len(), 2);
    }
}

#[cfg(test)]
mod narrow_tests {
    use super::*;

    #[test]
    fn small_tags_keep_base_zero_and_wide_ones_their_least_aligned() {
        let small = NarrowTable::of(&[0u64, 5, u64::from(u32::MAX)]).expect("fits");
        assert_eq!(small.base_high, 0);
        assert_eq!(narrow_get::<u64>(&small.offsets, 0, 2), u64::from(u32::MAX));
        let high = (1u64 << 40) + 0x1_2345;
        let NarrowTable {
            mut offsets,
            base_high,
        } = NarrowTable::of(&[high + 9, high, high + 7]).expect("fits");
        let base = narrow_base(base_high);
        assert_eq!(base, (1 << 40) + 0x1_0000, "the least tag, 2^16 aligned");
        let mut out = [0u64; 3];
        narrow_widen_into(&offsets, base_high, &mut out);
        assert_eq!(out, [high + 9, high, high + 7]);
        // In range: stored; below the base or past 2^32 above it: refused, unchanged.
        assert!(narrow_set(&mut offsets, base_high, 1, high + 3));
        assert!(narrow_set(&mut offsets, base_high, 0, base));
        assert!(!narrow_set(&mut offsets, base_high, 1, base - 1));
        assert!(!narrow_set(&mut offsets, base_high, 1, base + (1 << 32)));
        assert_eq!(narrow_get::<u64>(&offsets, base_high, 1), high + 3);
        assert_eq!(narrow_get::<u64>(&offsets, base_high, 0), base);
    }

    #[test]
    fn tags_spanning_more_than_32_bits_or_no_wider_than_32_are_not_narrowed() {
        assert!(NarrowTable::of(&[0u64, 1 << 32]).is_none());
        assert!(NarrowTable::of(&[1u64 << 40, (1 << 40) + (1 << 32)]).is_none());
        assert!(
            NarrowTable::of(&[u64::MAX - 5, u64::MAX]).is_none(),
            "base beyond 2^48"
        );
        assert!(NarrowTable::of(&[1u32, 2]).is_none());
        assert!(NarrowTable::of(&[true, false]).is_none());
        assert!(NarrowTable::zeroed::<u32>(4).is_none());
        assert_eq!(NarrowTable::zeroed::<u64>(4).expect("u64").offsets.len(), 4);
    }
}
