//! Growable arrays of `AtomicU64` records that other threads may read at any time.
//!
//! A fixed directory points to chunks allocated on first use and never freed, so a reader
//! never sees memory move or disappear (regions keep arriving with `dlopen`). Only one
//! writer may allocate chunks (the owning thread, or a holder of the runtime lock);
//! readers see a chunk once its pointer is published with release ordering.

use std::alloc::{alloc_zeroed, Layout};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Records per chunk.
pub const PER_CHUNK: usize = 512;
/// Directory entries: room for `PER_CHUNK * DIR` records (about 2 million regions).
pub const DIR: usize = 4096;

pub struct Chunked<const W: usize> {
    dir: Box<[AtomicPtr<[AtomicU64; W]>]>,
}

impl<const W: usize> Default for Chunked<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const W: usize> Chunked<W> {
    pub fn new() -> Self {
        let dir = (0..DIR)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        Chunked { dir }
    }

    /// Largest record index + 1 that can ever be stored.
    pub const CAPACITY: usize = PER_CHUNK * DIR;

    /// The directory, `DIR` chunk pointers (null: not allocated), for code that reads and
    /// writes records itself (the footprint tool's C part): chunks are `PER_CHUNK` records.
    pub fn directory(&self) -> *const AtomicPtr<[AtomicU64; W]> {
        self.dir.as_ptr()
    }

    /// The record at `i` if its chunk exists.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[AtomicU64; W]> {
        let d = self.dir.get(i / PER_CHUNK)?;
        let c = d.load(Ordering::Acquire);
        if c.is_null() {
            None
        } else {
            // SAFETY: chunks hold PER_CHUNK records and are never freed.
            Some(unsafe { &*c.add(i % PER_CHUNK) })
        }
    }

    /// The record at `i`, allocating its chunk (zeroed) when needed.
    /// `None` only when `i` is beyond [`Self::CAPACITY`] or memory is exhausted.
    ///
    /// # Safety
    /// At most one thread may call this on a given `Chunked` at a time.
    pub unsafe fn get_or_alloc(&self, i: usize) -> Option<&[AtomicU64; W]> {
        if let Some(r) = self.get(i) {
            return Some(r);
        }
        let d = self.dir.get(i / PER_CHUNK)?;
        let layout = Layout::array::<[AtomicU64; W]>(PER_CHUNK).ok()?;
        let c = alloc_zeroed(layout) as *mut [AtomicU64; W];
        if c.is_null() {
            return None;
        }
        d.store(c, Ordering::Release);
        Some(&*c.add(i % PER_CHUNK))
    }

    /// Calls `f` on every record of every allocated chunk, with its index.
    pub fn for_each(&self, mut f: impl FnMut(usize, &[AtomicU64; W])) {
        for (ci, d) in self.dir.iter().enumerate() {
            let c = d.load(Ordering::Acquire);
            if c.is_null() {
                continue;
            }
            for k in 0..PER_CHUNK {
                f(ci * PER_CHUNK + k, unsafe { &*c.add(k) });
            }
        }
    }

    /// Sets every word of every allocated record to 0 (the owner's reset).
    pub fn zero(&self) {
        self.for_each(|_, rec| rec.iter().for_each(|a| a.store(0, Ordering::Relaxed)));
    }
}

/// Owner-only increment: a relaxed load and store (plain moves), no read-modify-write.
/// Other threads may read the value at any time; only the owner writes it.
#[inline(always)]
pub fn bump(a: &AtomicU64, d: u64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(d), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_chunks() {
        let c: Chunked<3> = Chunked::new();
        assert!(c.get(0).is_none());
        unsafe {
            bump(&c.get_or_alloc(1000).unwrap()[2], 5);
        }
        assert_eq!(c.get(1000).unwrap()[2].load(Ordering::Relaxed), 5);
        assert!(c.get(0).is_none(), "chunk 0 not touched");
        assert!(c.get(PER_CHUNK * 2 - 1).is_some(), "same chunk as 1000");
        assert!(unsafe { c.get_or_alloc(Chunked::<3>::CAPACITY) }.is_none());
        let mut seen = 0;
        c.for_each(|i, r| {
            if r[2].load(Ordering::Relaxed) != 0 {
                assert_eq!(i, 1000);
                seen += 1;
            }
        });
        assert_eq!(seen, 1);
        c.zero();
        assert_eq!(c.get(1000).unwrap()[2].load(Ordering::Relaxed), 0);
    }
}
