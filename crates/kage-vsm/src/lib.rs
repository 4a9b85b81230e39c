//! Vector shadow memory (VSM): a vector of tags per shadowed address, one tag per active
//! region level, after the Skadu paper (`../shared/seeds/skadu-vector-shadow-memory.txt`
//! from the repository root; section and figure numbers below are the paper's). It is the
//! base of Kage's poly-scopic tools: the memory footprint profiler (1-bit presence tags) and
//! hierarchical critical path analysis (HCPA, 64-bit timestamps).
//!
//! # Model
//!
//! The program's regions nest. [`VectorShadow::enter`] pushes a level whose dynamic instance
//! gets a fresh version (a counter over the whole run, so versions order instances by start);
//! [`VectorShadow::exit`] pops it. Level 0 is the outermost active region. A tag written at
//! level `i` belongs to the instance active at level `i` then, and is valid only until that
//! instance exits: afterwards that level of the address reads as `T::default()`, even when
//! the same static region is entered again (a new instance). Exactly: the observable state is
//! a map `(address, instance) → tag`; `write(a, levels, t)` sets it for the instances at
//! `levels`, `read(a)` returns it for every active instance (default when absent).
//! Addresses are `u64`, shifted right by the [`Granularity`] before anything else.
//!
//! # Implementations
//!
//! All behind [`VectorShadow`], chosen at run time with [`VsmKind`] through [`AnyVsm`]
//! (static dispatch by `match`):
//!
//! - [`BaselineVsm`] (`baseline`, §3.1, Garcia et al.): a version beside every tag; every
//!   address holds a fixed-length vector sized to the deepest level seen so far.
//! - [`SlimVsm`] (`slim`, §3.2, SlimTV): the same vectors with one stored version each;
//!   Theorem 1 ([`max_valid_level`]) finds the valid prefix, the rest is scrubbed.
//! - [`BulkVsm`] (`bulk`, §3.3, BulkTV): one version per tag table (a page of addresses);
//!   the first access to a page under a new innermost version scrubs the whole page (Figure 5).
//! - [`CachedVsm`] (`cache`, §4): a direct-mapped [`vcache`] of fixed-capacity vectors using
//!   SlimTV in front of a [`vstorage`] organised by level (top table → segment table → level
//!   table → tag tables) using BulkTV. Kind `gc` adds garbage collection (tag tables of exited
//!   levels go to a bounded free list and are reused), kind `compress` adds dynamic
//!   compression of the tag tables of cold level tables (§5.2, §6.3: [`compress`], level
//!   deltas + LZ4, constant deltas kept as one tag, an adaptive clock list of uncompressed
//!   level tables as victim cache).
//!
//! Every implementation reports the exact bytes it holds on the heap
//! ([`VectorShadow::heap_bytes`]; the `accounting` test checks it against a counting
//! allocator), so memory expansion is measured, not estimated. No access allocates unless
//! the structure grows (a new page, a deeper vector, a new tag table when the free list is
//! empty), with one exception: compression allocates each packed tag table's buffer (and
//! the tag tables it unpacks beyond the free list), on VCache misses to cold pages.
//!
//! The building blocks are public for tools with their own tag encodings (the footprint
//! profiler's run-length bytes): [`VersionStack`], [`max_valid_level`], [`PageTable`],
//! [`bulk::BulkPage`] and the [`compress`] module.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

pub mod baseline;
pub mod bulk;
pub mod compress;
pub mod footprint;
pub mod page_table;
pub mod slim;
mod strided;
pub mod vcache;
pub mod version;
pub mod vstorage;

pub use baseline::BaselineVsm;
pub use bulk::BulkVsm;
pub use footprint::{Footprint, FpConfig, FpKind, Touched};
pub use page_table::PageTable;
pub use slim::SlimVsm;
pub use vcache::CachedVsm;
pub use version::{max_valid_level, VersionStack};

/// A shadow tag. `T::default()` is the value of an address never touched in a region.
///
/// The byte encoding and the delta serve compression, which must be exactly reversible:
/// `read_le(write_le(t)) == t` and `undelta(t.delta_from(p), p) == t`.
pub trait Tag: Copy + Eq + Default + fmt::Debug + Send + 'static {
    /// Bytes of the little-endian encoding.
    const BYTES: usize;
    /// The difference from `prev` (wrapping subtraction, or XOR for `bool`): timestamps of
    /// adjacent levels often differ by a constant, which compresses better than the values.
    fn delta_from(self, prev: Self) -> Self;
    /// Inverse of [`delta_from`](Tag::delta_from): `prev` plus `delta`.
    fn undelta(delta: Self, prev: Self) -> Self;
    /// Writes the little-endian encoding into `out` (`out.len() == BYTES`).
    fn write_le(self, out: &mut [u8]);
    /// Reads what [`write_le`](Tag::write_le) wrote.
    fn read_le(bytes: &[u8]) -> Self;
    /// The tag as an unsigned number (for tags narrower than 64 bits, zero-extended).
    fn to_bits(self) -> u64;
    /// Inverse of [`to_bits`](Tag::to_bits) (`bits` must be one of its results).
    fn from_bits(bits: u64) -> Self;
}

/// The 1-bit presence tag of the footprint profiler. Stored in one byte (Rust's `bool`),
/// not packed into bits: the profiler proper encodes a whole presence vector as a byte
/// (its run length) and needs this only as the reference.
impl Tag for bool {
    const BYTES: usize = 1;
    #[inline]
    fn delta_from(self, prev: Self) -> Self {
        self ^ prev
    }
    #[inline]
    fn undelta(delta: Self, prev: Self) -> Self {
        delta ^ prev
    }
    #[inline]
    fn write_le(self, out: &mut [u8]) {
        out[0] = self as u8;
    }
    #[inline]
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    #[inline]
    fn to_bits(self) -> u64 {
        self as u64
    }
    #[inline]
    fn from_bits(bits: u64) -> Self {
        bits != 0
    }
}

macro_rules! integer_tag {
    ($($t:ty),*) => {$(
        impl Tag for $t {
            const BYTES: usize = size_of::<$t>();
            #[inline]
            fn delta_from(self, prev: Self) -> Self {
                self.wrapping_sub(prev)
            }
            #[inline]
            fn undelta(delta: Self, prev: Self) -> Self {
                delta.wrapping_add(prev)
            }
            #[inline]
            fn write_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("Tag::BYTES bytes"))
            }
            #[inline]
            fn to_bits(self) -> u64 {
                self as u64
            }
            #[inline]
            fn from_bits(bits: u64) -> Self {
                bits as $t
            }
        }
    )*};
}
integer_tag!(u8, u16, u32, u64);

/// How many bytes of the program's address space share one tag vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// One vector per byte.
    Byte,
    /// One vector per 8-byte word.
    Word,
    /// One vector per 64-byte cache line.
    Line,
}

impl Granularity {
    /// Every granularity with its name (`granularity=` of the footprint tool, the report's
    /// `"granularity"`).
    pub const NAMED: [(&'static str, Granularity); 3] = [
        ("byte", Granularity::Byte),
        ("word", Granularity::Word),
        ("line", Granularity::Line),
    ];

    /// The granularity called `name`, if any.
    pub fn from_name(name: &str) -> Option<Granularity> {
        Self::NAMED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, g)| g)
    }

    /// Its name: `byte`, `word` or `line`.
    pub fn name(self) -> &'static str {
        Self::NAMED
            .iter()
            .find(|(_, g)| *g == self)
            .map_or("byte", |(n, _)| n)
    }

    /// The right shift that turns an address into a shadowed unit.
    pub const fn shift(self) -> u32 {
        match self {
            Granularity::Byte => 0,
            Granularity::Word => 3,
            Granularity::Line => 6,
        }
    }
}

/// Sizes of the structures; see [`Config::hcpa`] (the default) and [`Config::footprint`]
/// for the paper's settings. All counts are in shadowed units (addresses after the
/// granularity shift), tables and lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Shadowing granularity.
    pub granularity: Granularity,
    /// A tag table (BulkTV page) holds `2^table_bits` shadowed units.
    pub table_bits: u32,
    /// A segment table holds `2^segment_bits` tag table slots (8 bytes each).
    pub segment_bits: u32,
    /// VCache lines (a power of two): one tag vector each, direct-mapped by address.
    pub vcache_lines: usize,
    /// The VCache's tags take at most this many bytes (0: no bound): when the vectors
    /// grow, the lines halve (down to [`vcache::FEWEST_LINES_SHIFT`]).
    pub vcache_bytes: usize,
    /// Level tables kept uncompressed by the clock list when compression is on (at least
    /// 1): the list's initial capacity; it adapts between an eighth and 8 times this.
    pub victim_tables: usize,
    /// With garbage collection, free tag tables kept for reuse; more are released.
    pub free_tables: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self::hcpa()
    }
}

impl Config {
    /// HCPA's settings (§5.2, §6.2): 8-byte words; tag tables cover 4 KiB of address space
    /// (512 words); the VCache covers 1 MiB (131072 lines) and the uncompressed list 4 MiB
    /// (1024 level tables); the VCache's tags take at most 8 MiB (fewer lines for vectors
    /// deeper than 8 levels). Segment tables cover 64 MiB (16384 slots, 128 KiB each, against
    /// the paper's 4 GiB: smaller tables waste less in small programs, the top table takes
    /// the rest). The free list keeps up to 256 tag tables.
    pub fn hcpa() -> Self {
        Self::from_spans(Granularity::Word, 4 << 10, 64 << 20, 1 << 20, 4 << 20)
    }

    /// The footprint profiler's settings (§5.1): bytes; tag tables cover 64 KiB; segment
    /// tables 4 GiB as in the paper (65536 slots). The paper's profiler has no VCache; for
    /// the kinds that do, it covers 64 KiB here, and the uncompressed list 4 MiB.
    pub fn footprint() -> Self {
        Self::from_spans(Granularity::Byte, 64 << 10, 4 << 30, 64 << 10, 4 << 20)
    }

    /// Sizes given as spans of the program's address space (bytes, powers of two).
    pub fn from_spans(
        granularity: Granularity,
        table_span: u64,
        segment_span: u64,
        vcache_span: u64,
        victim_span: u64,
    ) -> Self {
        for span in [table_span, segment_span, vcache_span, victim_span] {
            assert!(
                span.is_power_of_two(),
                "kage-vsm: span {span} is not a power of two"
            );
        }
        let shift = granularity.shift();
        let table_bits = table_span.trailing_zeros().saturating_sub(shift);
        let segment_bits = segment_span
            .trailing_zeros()
            .saturating_sub(shift + table_bits);
        Self {
            granularity,
            table_bits,
            segment_bits,
            vcache_lines: (vcache_span >> shift).max(1) as usize,
            vcache_bytes: 8 << 20,
            victim_tables: (victim_span >> (shift + table_bits)).max(1) as usize,
            free_tables: 256,
        }
    }

    /// Shadowed units per tag table.
    pub fn table_units(&self) -> usize {
        1 << self.table_bits
    }

    fn check(&self) {
        assert!(
            self.table_bits <= 24,
            "kage-vsm: tag tables of 2^{} units",
            self.table_bits
        );
        assert!(
            self.vcache_lines.is_power_of_two(),
            "kage-vsm: vcache_lines not a power of two"
        );
        assert!(
            self.victim_tables >= 1,
            "kage-vsm: victim_tables must be at least 1"
        );
    }
}

/// Counters for benchmarks and tests. Fields that do not apply to an implementation are 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// VCache accesses that found their address.
    pub cache_hits: u64,
    /// VCache accesses that did not.
    pub cache_misses: u64,
    /// VCache lines written back to the VStorage.
    pub evictions: u64,
    /// BulkTV validations that found invalid levels holding data and scrubbed them.
    pub page_scrubs: u64,
    /// Re-layouts for a deeper vector (baseline, slim, bulk) or VCache capacity growths.
    pub relayouts: u64,
    /// Tag tables (pages for baseline, slim, bulk) currently allocated, free ones included.
    pub tag_tables: usize,
    /// Tag tables on the garbage collector's free list.
    pub free_tables: usize,
    /// Tag tables currently stored as a constant difference from the level above.
    pub constant_tables: usize,
    /// Tag tables currently compressed with LZ4.
    pub packed_tables: usize,
    /// Bytes of LZ4-compressed tag tables.
    pub packed_bytes: usize,
    /// Tag tables currently stored narrow (4 bytes a tag, [`compress::NarrowTable`]).
    pub narrow_tables: usize,
    /// Tag tables packed so far (to a constant, LZ4, or released as all default).
    pub packs: u64,
    /// Tag tables decompressed so far.
    pub unpacks: u64,
    /// The clock list's current capacity in level tables (it adapts).
    pub victim_tables: usize,
}

/// A vector shadow memory. See the crate docs for the observable semantics, which every
/// implementation shares exactly.
pub trait VectorShadow<T: Tag> {
    /// Enters a region: a new innermost level with a fresh version.
    fn enter(&mut self);
    /// Exits the innermost region; its tags become invalid.
    ///
    /// # Panics
    /// At depth 0 (an unbalanced exit is the caller's bug).
    fn exit(&mut self);
    /// The number of active levels.
    fn depth(&self) -> usize {
        self.versions().depth()
    }
    /// The version vector (outermost first).
    fn versions(&self) -> &VersionStack;
    /// Replaces `out` with the address's valid tags, exactly [`depth`](Self::depth) of them;
    /// levels never written in their current instance read as default. Takes `&mut self`
    /// because validation may scrub stale tags.
    fn read(&mut self, addr: u64, out: &mut Vec<T>);
    /// Sets the address's tag to `tag` at each level of `levels` (`levels.end <= depth`).
    fn write(&mut self, addr: u64, levels: Range<usize>, tag: T) {
        self.write_with(addr, levels, tag, &mut |_| {});
    }
    /// [`write`](Self::write), calling `on_set(level)` for each level, in increasing order,
    /// whose valid tag was default before and is not after (the footprint profiler's first
    /// touch).
    fn write_with(
        &mut self,
        addr: u64,
        levels: Range<usize>,
        tag: T,
        on_set: &mut impl FnMut(usize),
    );
    /// Read-modify-write of the whole valid vector (length [`depth`](Self::depth)); at
    /// depth 0, `f` gets an empty slice.
    fn update(&mut self, addr: u64, f: impl FnOnce(&mut [T]));
    /// Sets the address's tag at each level `i < tags.len()` to `tags[i]`: a tag per level,
    /// as HCPA stores a time per level. Levels from `tags.len()` on keep their valid tags;
    /// tags beyond [`depth`](Self::depth) are ignored. Implementations may skip reading the
    /// old vector when every level is written.
    fn write_levels(&mut self, addr: u64, tags: &[T]) {
        self.update(addr, |vector| {
            let n = tags.len().min(vector.len());
            vector[..n].copy_from_slice(&tags[..n]);
        });
    }
    /// Exact bytes this structure currently holds on the heap.
    fn heap_bytes(&self) -> usize;
    /// Counters.
    fn stats(&self) -> Stats;
}

/// The implementation to build, by its short name (`FromStr`/`Display`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VsmKind {
    /// `baseline`: a version per tag.
    Baseline,
    /// `slim`: SlimTV, a version per tag vector.
    Slim,
    /// `bulk`: SlimTV + BulkTV, a version per tag table.
    Bulk,
    /// `cache`: VCache (SlimTV) + VStorage (BulkTV), no garbage collection.
    Cache,
    /// `gc`: `cache` with garbage collection of tag tables.
    Gc,
    /// `compress`: `gc` with dynamic compression of cold level tables.
    Compress,
}

impl VsmKind {
    /// Every kind, in the paper's order of techniques.
    pub const ALL: [VsmKind; 6] = [
        VsmKind::Baseline,
        VsmKind::Slim,
        VsmKind::Bulk,
        VsmKind::Cache,
        VsmKind::Gc,
        VsmKind::Compress,
    ];

    /// The short name.
    pub const fn name(self) -> &'static str {
        match self {
            VsmKind::Baseline => "baseline",
            VsmKind::Slim => "slim",
            VsmKind::Bulk => "bulk",
            VsmKind::Cache => "cache",
            VsmKind::Gc => "gc",
            VsmKind::Compress => "compress",
        }
    }
}

impl fmt::Display for VsmKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown [`VsmKind`] name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKind(pub String);

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = VsmKind::ALL.iter().map(|k| k.name()).collect();
        write!(
            f,
            "unknown VSM kind `{}` (one of: {})",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownKind {}

impl FromStr for VsmKind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VsmKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

/// One of the implementations, selected at run time; dispatches by `match`.
// One per thread: boxing the large variant would cost an indirection on every access.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum AnyVsm<T: Tag> {
    /// [`VsmKind::Baseline`].
    Baseline(BaselineVsm<T>),
    /// [`VsmKind::Slim`].
    Slim(SlimVsm<T>),
    /// [`VsmKind::Bulk`].
    Bulk(BulkVsm<T>),
    /// [`VsmKind::Cache`], [`VsmKind::Gc`] and [`VsmKind::Compress`].
    Cached(CachedVsm<T>),
}

impl<T: Tag> AnyVsm<T> {
    /// Builds the implementation `kind` with `config`.
    pub fn new(kind: VsmKind, config: &Config) -> Self {
        match kind {
            VsmKind::Baseline => AnyVsm::Baseline(BaselineVsm::new(config)),
            VsmKind::Slim => AnyVsm::Slim(SlimVsm::new(config)),
            VsmKind::Bulk => AnyVsm::Bulk(BulkVsm::new(config)),
            VsmKind::Cache => AnyVsm::Cached(CachedVsm::new(config, false, false)),
            VsmKind::Gc => AnyVsm::Cached(CachedVsm::new(config, true, false)),
            VsmKind::Compress => AnyVsm::Cached(CachedVsm::new(config, true, true)),
        }
    }

    /// Which implementation this is.
    pub fn kind(&self) -> VsmKind {
        match self {
            AnyVsm::Baseline(_) => VsmKind::Baseline,
            AnyVsm::Slim(_) => VsmKind::Slim,
            AnyVsm::Bulk(_) => VsmKind::Bulk,
            AnyVsm::Cached(vsm) => vsm.kind(),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $vsm:ident => $body:expr) => {
        match $self {
            AnyVsm::Baseline($vsm) => $body,
            AnyVsm::Slim($vsm) => $body,
            AnyVsm::Bulk($vsm) => $body,
            AnyVsm::Cached($vsm) => $body,
        }
    };
}

impl<T: Tag> VectorShadow<T> for AnyVsm<T> {
    #[inline]
    fn enter(&mut self) {
        dispatch!(self, vsm => vsm.enter())
    }
    #[inline]
    fn exit(&mut self) {
        dispatch!(self, vsm => vsm.exit())
    }
    #[inline]
    fn versions(&self) -> &VersionStack {
        dispatch!(self, vsm => vsm.versions())
    }
    #[inline]
    fn read(&mut self, addr: u64, out: &mut Vec<T>) {
        dispatch!(self, vsm => vsm.read(addr, out))
    }
    #[inline]
    fn write(&mut self, addr: u64, levels: Range<usize>, tag: T) {
        dispatch!(self, vsm => vsm.write(addr, levels, tag))
    }
    #[inline]
    fn write_with(
        &mut self,
        addr: u64,
        levels: Range<usize>,
        tag: T,
        on_set: &mut impl FnMut(usize),
    ) {
        dispatch!(self, vsm => vsm.write_with(addr, levels, tag, on_set))
    }
    #[inline]
    fn update(&mut self, addr: u64, f: impl FnOnce(&mut [T])) {
        dispatch!(self, vsm => vsm.update(addr, f))
    }
    #[inline]
    fn write_levels(&mut self, addr: u64, tags: &[T]) {
        dispatch!(self, vsm => vsm.write_levels(addr, tags))
    }
    fn heap_bytes(&self) -> usize {
        dispatch!(self, vsm => vsm.heap_bytes())
    }
    fn stats(&self) -> Stats {
        dispatch!(self, vsm => vsm.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granularities_round_trip_through_their_names() {
        for (name, g) in Granularity::NAMED {
            assert_eq!(Granularity::from_name(name), Some(g));
            assert_eq!(g.name(), name);
        }
        assert_eq!(Granularity::from_name("page"), None);
    }

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in VsmKind::ALL {
            assert_eq!(kind.to_string().parse::<VsmKind>(), Ok(kind));
            assert_eq!(AnyVsm::<u64>::new(kind, &Config::default()).kind(), kind);
        }
        let err = "fast".parse::<VsmKind>().unwrap_err().to_string();
        assert!(
            err.contains("baseline, slim, bulk, cache, gc, compress"),
            "{err}"
        );
    }

    #[test]
    fn write_levels_sets_a_tag_per_level() {
        for kind in VsmKind::ALL {
            let mut vsm = AnyVsm::<u64>::new(kind, &Config::default());
            let mut out = Vec::new();
            vsm.write_levels(0x40, &[1, 2]); // depth 0: nothing to write
            (0..3).for_each(|_| vsm.enter());
            vsm.write_levels(0x40, &[7, 8, 9, 10]); // beyond the depth: ignored
            vsm.read(0x40, &mut out);
            assert_eq!(out, [7, 8, 9], "{kind}");
            vsm.write_levels(0x40, &[1]); // deeper levels keep theirs
            vsm.read(0x40, &mut out);
            assert_eq!(out, [1, 8, 9], "{kind}");
            vsm.exit();
            vsm.enter();
            vsm.write_levels(0x48, &[4, 5, 6]);
            vsm.read(0x40, &mut out);
            assert_eq!(out, [1, 8, 0], "{kind}: a new instance at level 2");
            vsm.read(0x48, &mut out);
            assert_eq!(out, [4, 5, 6], "{kind}");
        }
    }

    #[test]
    fn shadows_can_move_to_another_thread() {
        fn send<S: Send>() {}
        send::<AnyVsm<u64>>();
        send::<AnyVsm<bool>>();
    }

    #[test]
    fn paper_configs() {
        let hcpa = Config::hcpa();
        assert_eq!(
            (hcpa.granularity, hcpa.table_units()),
            (Granularity::Word, 512)
        );
        assert_eq!((hcpa.vcache_lines, hcpa.victim_tables), (131072, 1024));
        assert_eq!(hcpa.segment_bits, 14);
        let footprint = Config::footprint();
        assert_eq!(
            (footprint.table_units(), footprint.segment_bits),
            (65536, 16)
        );
    }

    fn round_trip<T: Tag>(values: &[T]) {
        let mut bytes = vec![0; T::BYTES];
        for &value in values {
            value.write_le(&mut bytes);
            assert_eq!(T::read_le(&bytes), value);
            for &prev in values {
                assert_eq!(T::undelta(value.delta_from(prev), prev), value);
            }
        }
    }

    #[test]
    fn tags_encode_and_delta_exactly() {
        round_trip(&[false, true]);
        round_trip(&[0u8, 1, 255]);
        round_trip(&[0u16, 1, 65535]);
        round_trip(&[0u32, 7, u32::MAX]);
        round_trip(&[0u64, 1, u64::MAX, 1 << 63]);
    }
}
