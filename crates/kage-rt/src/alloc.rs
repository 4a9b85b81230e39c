//! The runtime's global allocator: power-of-two size classes (16 B .. 4 KiB), each carved on
//! demand from mmap'd chunks of its own (so only the pages in use take memory, and blocks
//! of one size sit side by side) and kept on free lists under one spin lock; larger blocks
//! come straight from mmap. It never calls `malloc`, so the runtime cannot re-enter an instrumented or
//! interposed allocator of the program. Small-class memory is never returned to the OS
//! (the runtime's allocations are few and long-lived).

use crate::sync::SpinLock;
use std::alloc::{GlobalAlloc, Layout};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

const MIN_SHIFT: usize = 4; // 16 bytes
const MAX_SHIFT: usize = 12; // 4096 bytes
const CLASSES: usize = MAX_SHIFT - MIN_SHIFT + 1;
const CHUNK: usize = 64 * 1024;

struct FreeLists {
    heads: [usize; CLASSES],
    /// Per class, the part of its current chunk not carved yet: `[bump, bump_end)`. Each
    /// class carves from chunks of its own: blocks of one size side by side, so a small
    /// block never takes a page of its own between two page-aligned large ones (a 64-byte
    /// block carved between two 4 KiB blocks would keep a whole page resident).
    bump: [usize; CLASSES],
    bump_end: [usize; CLASSES],
}

static LISTS: SpinLock<FreeLists> = SpinLock::new(FreeLists {
    heads: [0; CLASSES],
    bump: [0; CLASSES],
    bump_end: [0; CLASSES],
});
static PAGE: AtomicUsize = AtomicUsize::new(0);

pub struct KageAlloc;

/// The size class for a layout, or `None` when it goes straight to mmap.
fn class_of(layout: &Layout) -> Option<usize> {
    let need = layout.size().max(layout.align()).max(1 << MIN_SHIFT);
    if need > 1 << MAX_SHIFT {
        return None;
    }
    let shift = usize::BITS as usize - (need - 1).leading_zeros() as usize;
    Some(shift.max(MIN_SHIFT) - MIN_SHIFT)
}

fn page_size() -> usize {
    let p = PAGE.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let p = if p > 0 { p as usize } else { 4096 };
    PAGE.store(p, Ordering::Relaxed);
    p
}

fn round_up(n: usize, to: usize) -> usize {
    (n + to - 1) & !(to - 1)
}

/// Where the runtime asks for its next mapping: an address range of its own, far from where
/// the kernel puts the program's mappings (top down from below the stack) and its heap. A
/// program's own mappings then land where they would without the runtime, whatever the
/// runtime uses: runs under different tool configurations touch the same addresses (a
/// program that hashes pointers, or reuses a freed buffer's lines, behaves the same), which
/// is what lets their reports be compared exactly. A hint only: where it is taken, the
/// kernel picks another place.
static NEXT_HINT: AtomicUsize = AtomicUsize::new(HINT_BASE);
const HINT_BASE: usize = 0x2000_0000_0000;

unsafe fn map(len: usize) -> *mut u8 {
    let hint = NEXT_HINT.fetch_add(round_up(len, page_size()), Ordering::Relaxed);
    let p = libc::mmap(
        hint as *mut libc::c_void,
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        null_mut()
    } else {
        p as *mut u8
    }
}

/// Length of the mapping that backs a large block of this layout.
fn large_len(layout: &Layout) -> usize {
    round_up(layout.size().max(1), page_size())
}

unsafe fn alloc_large(layout: &Layout) -> *mut u8 {
    let len = large_len(layout);
    let page = page_size();
    if layout.align() <= page {
        return map(len);
    }
    // Over-map and trim to get an alignment above the page size.
    let total = len + layout.align();
    let raw = map(total);
    if raw.is_null() {
        return raw;
    }
    let start = round_up(raw as usize, layout.align());
    let head = start - raw as usize;
    if head > 0 {
        libc::munmap(raw as *mut _, head);
    }
    let tail = total - head - len;
    if tail > 0 {
        libc::munmap((start + len) as *mut _, tail);
    }
    start as *mut u8
}

/// A new block of `class` when its free list is empty: the next block of the class's current
/// chunk, or of a new one. Called with the lock held.
unsafe fn carve(lists: &mut FreeLists, class: usize) -> *mut u8 {
    let size = 1usize << (class + MIN_SHIFT);
    let mut start = lists.bump[class];
    if start == 0 || start + size > lists.bump_end[class] {
        let chunk = map(CHUNK);
        if chunk.is_null() {
            return null_mut();
        }
        // Chunks are page-aligned and hold blocks of one power-of-two size, so every block
        // is aligned to its size.
        start = chunk as usize;
        lists.bump_end[class] = start + CHUNK;
    }
    lists.bump[class] = start + size;
    start as *mut u8
}

unsafe impl GlobalAlloc for KageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(&layout) {
            None => alloc_large(&layout),
            Some(c) => {
                let mut l = LISTS.lock();
                if l.heads[c] == 0 {
                    return carve(&mut l, c);
                }
                let b = l.heads[c] as *mut u8;
                l.heads[c] = *(b as *const usize);
                b
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ptr.is_null() {
            return;
        }
        match class_of(&layout) {
            None => {
                libc::munmap(ptr as *mut _, large_len(&layout));
            }
            Some(c) => {
                let mut l = LISTS.lock();
                *(ptr as *mut usize) = l.heads[c];
                l.heads[c] = ptr as usize;
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = self.alloc(layout);
        // Fresh mappings are already zero; recycled small blocks are not.
        if !p.is_null() && class_of(&layout).is_some() {
            std::ptr::write_bytes(p, 0, layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = match Layout::from_size_align(new_size, layout.align()) {
            Ok(l) => l,
            Err(_) => return null_mut(),
        };
        let old_class = class_of(&layout);
        if old_class.is_some() && old_class == class_of(&new_layout) {
            return ptr; // the block already has room
        }
        if old_class.is_none()
            && class_of(&new_layout).is_none()
            && large_len(&layout) == large_len(&new_layout)
        {
            return ptr;
        }
        let n = self.alloc(new_layout);
        if !n.is_null() {
            std::ptr::copy_nonoverlapping(ptr, n, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        n
    }
}

/// Fork support: the prepare handler holds the allocator lock so the child never inherits
/// it held by a thread that does not exist there.
pub fn fork_prepare() {
    LISTS.raw_lock();
}

/// # Safety
/// Only after [`fork_prepare`] on this thread (parent or child side of the fork).
pub unsafe fn fork_release() {
    LISTS.raw_unlock();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let l = |s, a| Layout::from_size_align(s, a).unwrap();
        assert_eq!(class_of(&l(1, 1)), Some(0));
        assert_eq!(class_of(&l(16, 8)), Some(0));
        assert_eq!(class_of(&l(17, 8)), Some(1));
        assert_eq!(class_of(&l(8, 64)), Some(2));
        assert_eq!(class_of(&l(4096, 8)), Some(8));
        assert_eq!(class_of(&l(4097, 8)), None);
        assert_eq!(class_of(&l(8, 8192)), None);
    }

    #[test]
    fn alignment_and_sizes() {
        let a = KageAlloc;
        for &align in &[1usize, 8, 16, 64, 256, 4096, 16384, 65536] {
            for &size in &[1usize, 7, 16, 100, 1000, 4096, 5000, 70000] {
                let l = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    let p = a.alloc(l);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    std::ptr::write_bytes(p, 0xAB, size);
                    a.dealloc(p, l);
                    let z = a.alloc_zeroed(l);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, l);
                }
            }
        }
    }

    #[test]
    fn mappings_go_to_the_runtimes_own_range() {
        let a = KageAlloc;
        let layout = Layout::from_size_align(1 << 20, 8).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            assert!((p as usize) >= HINT_BASE, "{p:p}");
            a.dealloc(p, layout);
        }
    }

    #[test]
    fn small_blocks_carved_between_large_ones_share_pages() {
        // The footprint shadow allocates a 4 KiB table and its 64-byte bounds together.
        let mut lists = FreeLists {
            heads: [0; CLASSES],
            bump: [0; CLASSES],
            bump_end: [0; CLASSES],
        };
        let (large, small) = (12 - MIN_SHIFT, 6 - MIN_SHIFT);
        let mut pages = std::collections::BTreeSet::new();
        for _ in 0..64 {
            let big = unsafe { carve(&mut lists, large) } as usize;
            assert_eq!(big % 4096, 0);
            let p = unsafe { carve(&mut lists, small) } as usize;
            assert_eq!(p % 64, 0);
            pages.insert(p / 4096);
        }
        assert_eq!(pages.len(), 1, "64 blocks of 64 bytes fill one page");
    }

    #[test]
    fn carved_blocks_of_mixed_classes_never_overlap() {
        let a = KageAlloc;
        let mut blocks: Vec<(usize, usize, Layout)> = (0..3000usize)
            .map(|i| {
                let l = Layout::from_size_align(16 << (i * 7 % CLASSES), 8).unwrap();
                let p = unsafe { a.alloc(l) } as usize;
                assert!(p != 0 && p.is_multiple_of(l.size()), "aligned to its size");
                (p, p + l.size(), l)
            })
            .collect();
        blocks.sort_unstable_by_key(|b| b.0);
        assert!(blocks.windows(2).all(|w| w[0].1 <= w[1].0), "disjoint");
        for (p, _, l) in blocks {
            unsafe { a.dealloc(p as *mut u8, l) };
        }
    }

    #[test]
    fn realloc_keeps_contents() {
        let a = KageAlloc;
        unsafe {
            let mut l = Layout::from_size_align(10, 8).unwrap();
            let mut p = a.alloc(l);
            for i in 0..10 {
                *p.add(i) = i as u8;
            }
            for &n in &[12usize, 40, 3000, 9000, 200_000, 50, 5] {
                p = a.realloc(p, l, n);
                assert!(!p.is_null());
                let keep = l.size().min(n).min(10);
                for i in 0..keep {
                    assert_eq!(*p.add(i), i as u8, "after realloc to {n}");
                }
                l = Layout::from_size_align(n, 8).unwrap();
            }
            a.dealloc(p, l);
        }
    }

    #[test]
    fn multithread_stress() {
        // Runs through the #[global_allocator] too (Vec, Box), with a pattern check per block.
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut seed = t * 7919 + 1;
                    let mut live: Vec<Vec<u64>> = Vec::new();
                    for i in 0..20_000u64 {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let n = ((seed >> 33) % 700) as usize + 1;
                        live.push(vec![t ^ i; n]);
                        if live.len() > 64 {
                            let v = live.swap_remove((seed >> 20) as usize % live.len());
                            let x = v[0];
                            assert!(v.iter().all(|&y| y == x));
                        }
                        if i % 97 == 0 {
                            if let Some(v) = live.last_mut() {
                                let x = v[0];
                                v.resize(v.len() * 3 + 1, x);
                                assert!(v.iter().all(|&y| y == x));
                            }
                        }
                    }
                    for v in live {
                        let x = v[0];
                        assert!(v.iter().all(|&y| y == x));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
