//! Dynamic compression of cold level tables (paper §5.2, §6.3).
//!
//! A level table (one tag table per level, for one page of addresses) is packed as: one
//! mode byte per level, then each present tag table as its element-wise difference from the
//! table one level up ([`Tag::delta_from`]; absent tables count as default), little endian,
//! all compressed with LZ4 (`lz4_flex`'s block format). HCPA's timestamps of adjacent levels
//! often differ by a constant (§6.3), so the differences compress far better than the
//! tables; a difference that is the same for the whole table is stored once (mode
//! `CONSTANT`), which keeps LZ4's work to the tables that need it. Unpacking restores every
//! tag exactly.
//!
//! Which tables stay unpacked is decided by a [`Clock`] list of bounded capacity (second
//! chance): touching a listed table sets its reference bit; a table not listed is unpacked
//! and listed, and the list evicts (packs) the first table whose bit is clear, clearing bits
//! as the hand passes. It acts as the paper's victim cache behind the VCache.

use crate::Tag;

/// Level modes in a packed level table's header.
const ABSENT: u8 = 0;
/// Every tag differs from the level above by the same delta: stored once.
const CONSTANT: u8 = 1;
/// The deltas, one per tag.
const TABLE: u8 = 2;

/// A packed level table.
#[derive(Debug)]
pub struct PackedLevels {
    bytes: Box<[u8]>,
    raw_len: u32,
    levels: u32,
}

impl PackedLevels {
    /// Bytes on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Levels (present or not) the table had.
    pub fn levels(&self) -> usize {
        self.levels as usize
    }
}

/// Packs and unpacks level tables, reusing its scratch buffers (whose capacity it counts).
#[derive(Debug, Default)]
pub struct Packer {
    raw: Vec<u8>,
    compressed: Vec<u8>,
}

impl Packer {
    /// Packs `levels` (each a table of `units` tags, or `None` for all default).
    pub fn pack<T: Tag>(&mut self, levels: &[Option<Box<[T]>>], units: usize) -> PackedLevels {
        self.raw.clear();
        self.raw.resize(levels.len(), ABSENT);
        let mut above: Option<&[T]> = None;
        for (level, table) in levels.iter().enumerate() {
            let Some(table) = table.as_deref() else {
                above = None;
                continue;
            };
            let at = self.raw.len();
            let first = table[0].delta_from(above.map_or(T::default(), |above| above[0]));
            let constant = match above {
                Some(above) => table
                    .iter()
                    .zip(above)
                    .all(|(&tag, &above)| tag.delta_from(above) == first),
                None => table.iter().all(|&tag| tag == first),
            };
            if constant {
                self.raw[level] = CONSTANT;
                self.raw.resize(at + T::BYTES, 0);
                first.write_le(&mut self.raw[at..]);
            } else {
                self.raw[level] = TABLE;
                self.raw.resize(at + units * T::BYTES, 0);
                let out = self.raw[at..].chunks_exact_mut(T::BYTES);
                match above {
                    Some(above) => {
                        for ((bytes, &tag), &above) in out.zip(table).zip(above) {
                            tag.delta_from(above).write_le(bytes);
                        }
                    }
                    None => {
                        for (bytes, &tag) in out.zip(table) {
                            tag.write_le(bytes);
                        }
                    }
                }
            }
            above = Some(table);
        }
        let raw_len = self.raw.len();
        let bound = lz4_flex::block::get_maximum_output_size(raw_len);
        if self.compressed.len() < bound {
            self.compressed.resize(bound, 0);
        }
        let written = lz4_flex::block::compress_into(&self.raw, &mut self.compressed)
            .expect("kage-vsm: LZ4 output buffer sized by its bound");
        PackedLevels {
            bytes: Box::from(&self.compressed[..written]),
            raw_len: u32::try_from(raw_len).expect("kage-vsm: level table over 4 GiB"),
            levels: levels.len() as u32,
        }
    }

    /// Appends the tables of `packed` to `levels` (which should be empty), taking each new
    /// table (`units` tags, any contents: every tag is overwritten) from `new_table`.
    pub fn unpack<T: Tag>(
        &mut self,
        packed: &PackedLevels,
        units: usize,
        levels: &mut Vec<Option<Box<[T]>>>,
        mut new_table: impl FnMut() -> Box<[T]>,
    ) {
        let raw_len = packed.raw_len as usize;
        if self.raw.len() < raw_len {
            self.raw.resize(raw_len, 0);
        }
        let read = lz4_flex::block::decompress_into(&packed.bytes, &mut self.raw[..raw_len])
            .expect("kage-vsm: corrupt packed level table");
        assert_eq!(
            read, raw_len,
            "kage-vsm: packed level table of the wrong size"
        );
        let (modes, mut data) = self.raw[..raw_len].split_at(packed.levels as usize);
        let first = levels.len();
        for &mode in modes {
            if mode == ABSENT {
                levels.push(None);
                continue;
            }
            let mut table = new_table();
            debug_assert_eq!(table.len(), units);
            let above = match levels.last() {
                Some(level) if levels.len() > first => level.as_deref(),
                _ => None,
            };
            let width = if mode == CONSTANT {
                T::BYTES
            } else {
                units * T::BYTES
            };
            let (chunk, rest) = data.split_at(width);
            data = rest;
            // A constant delta is the same bytes for every tag: repeat them.
            let deltas = chunk.chunks_exact(T::BYTES).cycle();
            match above {
                Some(above) => {
                    for ((slot, bytes), &above) in table.iter_mut().zip(deltas).zip(above) {
                        *slot = T::undelta(T::read_le(bytes), above);
                    }
                }
                None => {
                    for (slot, bytes) in table.iter_mut().zip(deltas) {
                        *slot = T::read_le(bytes);
                    }
                }
            }
            levels.push(Some(table));
        }
    }

    /// Bytes of the scratch buffers.
    pub fn heap_bytes(&self) -> usize {
        self.raw.capacity() + self.compressed.capacity()
    }
}

/// Bounded second-chance ("clock") list of keys.
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
            self.hand = (self.hand + 1) % self.capacity;
        }
        let slot = self.hand;
        let victim = std::mem::replace(&mut self.keys[slot], key);
        self.referenced[slot] = true;
        self.hand = (slot + 1) % self.capacity;
        (slot, Some(victim))
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

    fn round_trip<T: Tag>(levels: Vec<Option<Box<[T]>>>, units: usize) -> usize {
        let mut packer = Packer::default();
        let packed = packer.pack(&levels, units);
        let mut back = Vec::new();
        packer.unpack(&packed, units, &mut back, || {
            vec![T::default(); units].into_boxed_slice()
        });
        assert_eq!(back, levels);
        packed.heap_bytes()
    }

    #[test]
    fn packing_is_exactly_reversible() {
        let units = 512;
        let timestamps =
            |base: u64| -> Box<[u64]> { (0..units as u64).map(|u| base + 3 * u).collect() };
        let noise = |seed: u64| -> Box<[u64]> {
            let mut x = seed | 1;
            (0..units)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                })
                .collect()
        };
        round_trip::<u64>(vec![], units);
        round_trip::<u64>(vec![None, None], units);
        round_trip(
            vec![
                Some(timestamps(100)),
                None,
                Some(noise(7)),
                Some(noise(9)),
                None,
            ],
            units,
        );
        round_trip(
            vec![
                Some(vec![u64::MAX; units].into_boxed_slice()),
                Some(timestamps(0)),
            ],
            units,
        );
        let ts = timestamps;
        round_trip(
            vec![
                Some(ts(5)),
                Some(ts(7)),
                None,
                Some(ts(7)),
                Some(ts(7)),
                Some(noise(3)),
            ],
            units,
        );
        round_trip(
            vec![
                Some(vec![4u64; 1].into_boxed_slice()),
                Some(vec![9u64; 1].into_boxed_slice()),
            ],
            1,
        );
        let bits: Box<[bool]> = (0..units).map(|u| u % 3 == 0).collect();
        round_trip(vec![Some(bits.clone()), None, Some(bits)], units);
        round_trip(
            vec![Some((0..units).map(|u| u as u8).collect::<Box<[u8]>>())],
            units,
        );
    }

    #[test]
    fn level_deltas_make_offset_timestamps_small() {
        // Levels whose timestamps differ by a constant: the deltas are constant tables.
        let units = 512;
        let levels: Vec<Option<Box<[u64]>>> = (0..16u64)
            .map(|level| {
                Some(
                    (0..units as u64)
                        .map(|u| ((u * 7919) ^ 0x5555) + level * 1000)
                        .collect(),
                )
            })
            .collect();
        let raw = 16 * units * 8;
        let packed = round_trip(levels, units);
        assert!(packed * 8 < raw, "{packed} of {raw}");
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
}
