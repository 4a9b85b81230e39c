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
        debug_assert!(above.is_none_or(|above| above.len() == table.len()));
        let first = table[0].delta_from(above_at(above, 0));
        let (mut constant, mut plain_zeros, mut delta_zeros) = (true, 0usize, 0usize);
        for (index, &tag) in table.iter().enumerate() {
            let delta = tag.delta_from(above_at(above, index));
            constant &= delta == first;
            plain_zeros += (tag == T::default()) as usize;
            delta_zeros += (delta == T::default()) as usize;
        }
        if plain_zeros == table.len() {
            return Packing::Absent;
        }
        if constant {
            return Packing::Constant(first);
        }
        let delta = above.is_some() && delta_zeros >= plain_zeros;
        self.raw.clear();
        self.raw.resize(table.len() * T::BYTES, 0);
        let out = self.raw.chunks_exact_mut(T::BYTES);
        match above {
            Some(above) if delta => {
                for ((bytes, &tag), &above) in out.zip(table).zip(above) {
                    tag.delta_from(above).write_le(bytes);
                }
            }
            _ => {
                for (bytes, &tag) in out.zip(table) {
                    tag.delta_from(T::default()).write_le(bytes);
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
            if written * INCOMPRESSIBLE > sample.len() {
                return Packing::Incompressible;
            }
        }
        let written = lz4_flex::block::compress_into(&self.raw, &mut self.compressed[1..])
            .expect("kage-vsm: LZ4 output buffer sized by its bound");
        if written * INCOMPRESSIBLE > self.raw.len() {
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
