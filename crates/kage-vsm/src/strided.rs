//! What the three flat implementations (baseline, slim, bulk) share: addresses split into a
//! page number and an offset, and pages holding one fixed-stride vector per address, where
//! the stride is the deepest level seen so far (the paper's baseline layout, §6.1).

use crate::Config;

/// Splits an address into (page number, unit offset in the page).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Addressing {
    shift: u32,
    table_bits: u32,
}

impl Addressing {
    pub(crate) fn new(config: &Config) -> Self {
        Self {
            shift: config.granularity.shift(),
            table_bits: config.table_bits,
        }
    }

    #[inline]
    pub(crate) fn split(self, addr: u64) -> (u64, usize) {
        let unit = addr >> self.shift;
        (
            unit >> self.table_bits,
            (unit & ((1u64 << self.table_bits) - 1)) as usize,
        )
    }

    pub(crate) fn units(self) -> usize {
        1 << self.table_bits
    }

    pub(crate) fn table_bits(self) -> u32 {
        self.table_bits
    }
}

/// `units` vectors of `old_stride` elements re-laid out with `new_stride`; the new levels
/// hold `fill`. Allocates exactly `units * new_stride` elements.
pub(crate) fn restride<T: Copy>(
    old: &[T],
    units: usize,
    old_stride: usize,
    new_stride: usize,
    fill: T,
) -> Box<[T]> {
    debug_assert!(new_stride >= old_stride);
    let mut new = vec![fill; units * new_stride];
    if old_stride > 0 {
        for (to, from) in new
            .chunks_exact_mut(new_stride)
            .zip(old.chunks_exact(old_stride))
        {
            to[..old_stride].copy_from_slice(from);
        }
    }
    new.into_boxed_slice()
}

/// Heap bytes of a boxed slice of `len` elements.
#[inline]
pub(crate) fn slice_bytes<T>(len: usize) -> usize {
    len * size_of::<T>()
}
