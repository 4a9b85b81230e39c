//! The working-set shadow: one byte per cache line of the user address space, reserved
//! once at start-up at [`kage_abi::WS_SHADOW_BASE`] (`MAP_NORESERVE`: only the pages the
//! program's accesses reach ever take memory). Bit 0 = "touched in the current interval";
//! at each boundary every byte is shifted left, so bits 1..7 hold the previous seven
//! intervals (the RFC's in-shadow history).
//!
//! Instrumented code has the base built in (docs/abi.md), so it is reserved from
//! `.preinit_array`, before any constructor or instrumented code runs, and a program with
//! working-set code stops with an error when it could not be (`super::require_shadow`).
//! The line size is a constant of the build (`KAGE_WS_LINE_SIZE`), which start-up does not
//! know yet: the reservation has room for lines of the smallest size, [`MIN_LINE_SHIFT`],
//! and so for any larger one.

use std::sync::atomic::{AtomicU64, Ordering::*};

/// log2 of the smallest line size (16 bytes): the reservation covers the user address space
/// at this granularity.
pub const MIN_LINE_SHIFT: u32 = kage_abi::LINE_SIZES.start().trailing_zeros();
const PAGE: u64 = 4096;
const LOW_BITS: u64 = 0x0101_0101_0101_0101;

/// The reserved shadow and the line size it is used with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shadow {
    pub base: u64,
    /// Bytes reserved: one per [`MIN_LINE_SHIFT`] line of the user address space.
    pub len: u64,
    /// log2 of the line size in use (the build's, or `line_size=` for call hooks).
    pub shift: u32,
}

/// Where [`Shadow::reserve`] puts the shadow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// At [`kage_abi::WS_SHADOW_BASE`], where instrumented code finds it.
    Fixed,
    /// Wherever the kernel puts it (the runtime's own marks only: tests).
    Anywhere,
}

/// The addresses a shadow at [`kage_abi::WS_SHADOW_BASE`] covers: below 2^47.
const FIXED_ADDRESS_LIMIT: u64 = 1 << 47;

/// The first line of `/proc/self/maps` that overlaps `start..end`, to name what is in the
/// way of the shadow.
fn mapping_in(start: u64, end: u64) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .find(|line| {
            let range = line.split_whitespace().next().unwrap_or("");
            let mut bounds = range.split('-').map(|b| u64::from_str_radix(b, 16).ok());
            match (bounds.next().flatten(), bounds.next().flatten()) {
                (Some(lo), Some(hi)) => lo < end && start < hi,
                _ => false,
            }
        })
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// What a scan does to the bytes it visits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Interval boundary: collect the lines with bit 0 set and shift every byte left.
    Shift,
    /// Collect the lines with bit 0 set and clear bit 0 (history kept).
    Collect,
    /// Clear bit 0 without collecting (accesses made while disabled are dropped).
    Drop,
}

impl Shadow {
    /// Reserves the shadow with room for lines of any size from `1 << MIN_LINE_SHIFT`
    /// bytes, in use with lines of that size until [`Shadow::with_line_shift`] says
    /// otherwise. [`Placement::Fixed`] is the one instrumented code finds: it covers the
    /// lower 2^47 bytes of the address space (all of it with 4-level page tables; with
    /// 5-level ones the kernel maps above only when a program asks with a hint), and fails
    /// when anything is mapped in its range. [`Placement::Anywhere`] (tests) covers the
    /// whole user address space wherever the kernel puts it.
    pub fn reserve(placement: Placement) -> Result<Shadow, String> {
        let (hint, limit, fixed) = match placement {
            Placement::Fixed => (
                kage_abi::WS_SHADOW_BASE as *mut libc::c_void,
                FIXED_ADDRESS_LIMIT,
                libc::MAP_FIXED_NOREPLACE,
            ),
            Placement::Anywhere => (std::ptr::null_mut(), user_address_limit(), 0),
        };
        let len = limit >> MIN_LINE_SHIFT;
        // SAFETY: a fresh anonymous mapping; `MAP_FIXED_NOREPLACE` never replaces one.
        let p = unsafe {
            libc::mmap(
                hint,
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | fixed,
                -1,
                0,
            )
        };
        let error = std::io::Error::last_os_error();
        if p != libc::MAP_FAILED && fixed != 0 && p != hint {
            // A kernel older than 4.17 takes MAP_FIXED_NOREPLACE for a hint.
            // SAFETY: the mapping just made, not yet used.
            unsafe { libc::munmap(p, len as usize) };
        }
        if p == libc::MAP_FAILED || (fixed != 0 && p != hint) {
            let start = hint as u64;
            let what = match placement {
                Placement::Fixed => format!(
                    "at {start:#x}..{:#x}{}",
                    start + len,
                    mapping_in(start, start + len)
                        .map(|m| format!(" ({m} is there)"))
                        .unwrap_or_default()
                ),
                Placement::Anywhere => String::new(),
            };
            return Err(format!(
                "cannot reserve {} GiB of address space for the working-set shadow{}{what}: {}",
                len >> 30,
                if what.is_empty() { "" } else { " " },
                if p == libc::MAP_FAILED {
                    error.to_string()
                } else {
                    "the kernel put it elsewhere".to_string()
                }
            ));
        }
        // Transparent huge pages would turn one touched shadow byte into 2 MiB of memory.
        unsafe { libc::madvise(p, len as usize, libc::MADV_NOHUGEPAGE) };
        Ok(Shadow {
            base: p as u64,
            len,
            shift: MIN_LINE_SHIFT,
        })
    }

    /// The same reservation used with lines of `1 << shift` bytes.
    pub fn with_line_shift(self, shift: u32) -> Shadow {
        assert!(
            shift >= MIN_LINE_SHIFT,
            "the reservation is too small for {shift}"
        );
        Shadow { shift, ..self }
    }

    pub fn line_size(&self) -> u64 {
        1 << self.shift
    }

    /// The end of the address space the shadow covers.
    pub fn address_limit(&self) -> u64 {
        self.len << MIN_LINE_SHIFT
    }

    /// As the instrumented code computes it: no mask (docs/abi.md); lines at or beyond
    /// `len` are never marked by the runtime itself.
    pub fn line_of(&self, addr: u64) -> u64 {
        addr >> self.shift
    }

    /// The app address range this shadow occupies itself (never scanned as app memory).
    pub fn own_range(&self) -> (u64, u64) {
        (self.base, self.base + self.len)
    }

    fn cell(&self, line: u64) -> *mut u8 {
        (self.base + line) as *mut u8
    }

    /// Marks every line in `first..=last` (check before set, as the inline path does).
    /// Ranges are often marked again within an interval (a loop nest re-reading a row):
    /// whole words whose 8 lines are all set already are skipped with one load.
    pub fn mark_lines(&self, first: u64, last: u64) {
        let last = last.min(self.len - 1);
        if first > last {
            return;
        }
        let mark = |line: u64| {
            let p = self.cell(line);
            // SAFETY: `line < len`, inside the reservation (readable and writable).
            unsafe {
                let b = p.read_volatile();
                if b & 1 == 0 {
                    p.write_volatile(b | 1);
                }
            }
        };
        let end = last + 1;
        let mut line = first;
        while line < end && !(self.base + line).is_multiple_of(8) {
            mark(line);
            line += 1;
        }
        while end - line >= 8 {
            // SAFETY: 8-byte aligned, inside the reservation; other threads may store bytes
            // into this word concurrently, which an atomic load tolerates.
            let word = unsafe { &*(self.cell(line) as *const AtomicU64) }.load(Relaxed);
            if word & LOW_BITS != LOW_BITS {
                (line..line + 8).for_each(mark);
            }
            line += 8;
        }
        (line..end).for_each(mark);
    }

    /// Marks the lines of `size` bytes at `addr` (`size` > 0); lines beyond the shadow
    /// are left out.
    pub fn mark_range(&self, addr: u64, size: u64) {
        let first = self.line_of(addr);
        let last = self.line_of(addr.saturating_add(size - 1));
        self.mark_lines(first, last);
    }

    /// Applies `mode` to the shadow of the app address ranges `ranges` (sorted or not,
    /// overlapping or not). For every shadow page with lines whose bit 0 was set, `out`
    /// gets the page's first line and those lines as a bitmap ([`PageBits`]), in
    /// increasing order. Only shadow pages the kernel reports resident are read: a page
    /// never touched holds no set bit, and reading it would map memory for nothing. `buf`
    /// is scratch space.
    ///
    /// `exclusive` says no other code can write the shadow during the scan (one thread in
    /// the process, signals blocked): bytes are then updated with plain stores instead of
    /// compare-exchange.
    pub fn scan(
        &self,
        ranges: &[(u64, u64)],
        mode: Scan,
        exclusive: bool,
        out: &mut impl FnMut(u64, &PageBits),
        buf: &mut Vec<u8>,
    ) {
        let mut bits = [0u8; PAGE_BITS];
        for &(lo, hi) in &self.shadow_pages(ranges) {
            self.scan_pages(lo, hi, mode, exclusive, out, buf, &mut bits);
        }
    }

    /// The shadow byte ranges (page-aligned, sorted, disjoint) of app ranges.
    fn shadow_pages(&self, ranges: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let (own_lo, own_hi) = self.own_range();
        let pages: Vec<(u64, u64)> = ranges
            .iter()
            .filter(|&&(lo, hi)| {
                hi > lo && lo < self.address_limit() && !(lo >= own_lo && hi <= own_hi)
            })
            .map(|&(lo, hi)| {
                let first = self.line_of(lo);
                let last = self.line_of(hi.min(self.address_limit()) - 1);
                let s_lo = (self.base + first) & !(PAGE - 1);
                let s_hi = (self.base + last + PAGE) & !(PAGE - 1);
                (s_lo, s_hi.min(self.base + self.len))
            })
            .collect();
        merge_ranges(pages)
    }

    #[allow(clippy::too_many_arguments)]
    fn scan_pages(
        &self,
        lo: u64,
        hi: u64,
        mode: Scan,
        exclusive: bool,
        out: &mut impl FnMut(u64, &PageBits),
        buf: &mut Vec<u8>,
        bits: &mut PageBits,
    ) {
        const BATCH: u64 = 1 << 16; // pages per mincore call
        let mut start = lo;
        while start < hi {
            let end = (start + BATCH * PAGE).min(hi);
            let pages = ((end - start) / PAGE) as usize;
            buf.clear();
            buf.resize(pages, 0);
            // SAFETY: [start, end) lies inside the reservation; `buf` has one byte per page.
            let r =
                unsafe { libc::mincore(start as *mut _, (end - start) as usize, buf.as_mut_ptr()) };
            for (i, &resident) in buf.iter().enumerate() {
                if r != 0 || resident & 1 != 0 {
                    let page = start + i as u64 * PAGE;
                    let any = if exclusive {
                        self.scan_page_exclusive(page, mode, bits)
                    } else {
                        self.scan_page_shared(page, mode, bits)
                    };
                    if any && mode != Scan::Drop {
                        out(page - self.base, bits);
                    }
                }
            }
            start = end;
        }
    }

    /// [`Scan`] on one page when other threads may set bits concurrently with plain byte
    /// stores: the compare-exchange never loses one (it retries), and a line set during the
    /// scan lands in one of the two neighbouring intervals. Fills `bits`; says if any is set.
    fn scan_page_shared(&self, page: u64, mode: Scan, bits: &mut PageBits) -> bool {
        let words = page as *const AtomicU64;
        let mut any = 0u8;
        for (w, out) in bits.iter_mut().enumerate() {
            // SAFETY: the page is inside the reservation, 8-byte aligned.
            let cell = unsafe { &*words.add(w) };
            let mut old = cell.load(Relaxed);
            *out = 0;
            if old == 0 {
                continue;
            }
            loop {
                let new = next_word(old, mode);
                if new == old {
                    break;
                }
                match cell.compare_exchange_weak(old, new, Relaxed, Relaxed) {
                    Ok(_) => break,
                    Err(now) => old = now,
                }
            }
            *out = gather_bit0(old);
            any |= *out;
        }
        any != 0
    }

    /// [`Scan`] on one page that nothing else writes meanwhile: plain loads and stores.
    fn scan_page_exclusive(&self, page: u64, mode: Scan, bits: &mut PageBits) -> bool {
        // SAFETY: the page is inside the reservation, 8-byte aligned, readable and
        // writable, and (the caller's promise) written by no one else during the scan.
        let words = unsafe { std::slice::from_raw_parts_mut(page as *mut u64, bits.len()) };
        let mut any = 0u8;
        for (word, out) in words.iter_mut().zip(bits.iter_mut()) {
            let old = *word;
            let new = next_word(old, mode);
            if new != old {
                *word = new;
            }
            *out = gather_bit0(old);
            any |= *out;
        }
        any != 0
    }
}

/// One bit per line of a shadow page (least significant bit first): line `first + 8 * i
/// + j` is bit `j` of byte `i`.
pub type PageBits = [u8; PAGE_BITS];
pub const PAGE_BITS: usize = (PAGE / 8) as usize;

/// A shadow word (8 lines) after a scan in `mode`.
#[inline(always)]
fn next_word(old: u64, mode: Scan) -> u64 {
    match mode {
        Scan::Shift => (old << 1) & !LOW_BITS,
        Scan::Collect | Scan::Drop => old & !LOW_BITS,
    }
}

/// Bit 0 of each of the word's 8 bytes, gathered into one byte (byte `j` → bit `j`). The
/// multiplier moves bit `8j` to bit `56 + j`; every partial product lands on its own bit,
/// so nothing carries.
#[inline(always)]
fn gather_bit0(word: u64) -> u8 {
    ((word & LOW_BITS).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

/// The lines of a page bitmap, in increasing order: the tests' reference for what the scan
/// hands on (the runtime itself builds roaring containers from the bits).
#[cfg(test)]
pub fn page_lines(first: u64, bits: &PageBits) -> impl Iterator<Item = u64> + '_ {
    bits.iter().enumerate().flat_map(move |(i, &b)| {
        (0..8)
            .filter(move |j| b >> j & 1 != 0)
            .map(move |j| first + 8 * i as u64 + j)
    })
}

/// The end of the user address space: 2^47 with 4-level page tables, 2^56 where the kernel
/// uses 5-level ones (it then maps above 2^47 when asked to with a hint, as this probe does).
pub fn user_address_limit() -> u64 {
    const LOW: u64 = 1 << 47;
    // SAFETY: a fresh anonymous mapping at a hint (no MAP_FIXED), unmapped right away.
    unsafe {
        let p = libc::mmap(
            (LOW << 1) as *mut libc::c_void,
            PAGE as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            return LOW;
        }
        libc::munmap(p, PAGE as usize);
        if p as u64 >= LOW {
            1 << 56
        } else {
            LOW
        }
    }
}

/// Sorts and merges overlapping or touching ranges.
pub fn merge_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// The program's mapped address ranges, from `/proc/self/maps`.
pub fn mapped_ranges() -> Vec<(u64, u64)> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    maps.lines()
        .filter_map(|line| {
            let range = line.split_whitespace().next()?;
            let (lo, hi) = range.split_once('-')?;
            Some((
                u64::from_str_radix(lo, 16).ok()?,
                u64::from_str_radix(hi, 16).ok()?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_scan_shift_collect_drop() {
        for exclusive in [false, true] {
            mark_scan_shift_collect_drop_with(exclusive);
        }
    }

    fn mark_scan_shift_collect_drop_with(exclusive: bool) {
        let s = Shadow::reserve(Placement::Anywhere)
            .unwrap()
            .with_line_shift(6);
        let data = vec![0u8; 64 * 1024];
        let base = data.as_ptr() as u64;
        let range = [(base, base + data.len() as u64)];
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let scan = |mode, out: &mut Vec<u64>, buf: &mut Vec<u8>| {
            s.scan(
                &range,
                mode,
                exclusive,
                &mut |f, b| out.extend(page_lines(f, b)),
                buf,
            )
        };
        scan(Scan::Shift, &mut out, &mut buf);
        assert!(out.is_empty());
        // 8 bytes straddling a line boundary touch two lines; a 1-byte access one.
        let straddle = (base + 64) & !63;
        s.mark_range(straddle + 60, 8);
        s.mark_range(straddle + 1000, 1);
        s.mark_range(straddle + 1001, 1);
        scan(Scan::Shift, &mut out, &mut buf);
        let l = s.line_of(straddle);
        out.sort();
        assert_eq!(out, vec![l, l + 1, s.line_of(straddle + 1000)]);
        // After the shift, bit 1 holds the previous interval and bit 0 is clear.
        let cell = unsafe { *s.cell(l) };
        assert_eq!(cell, 0b10);
        out.clear();
        scan(Scan::Shift, &mut out, &mut buf);
        assert!(out.is_empty());
        assert_eq!(unsafe { *s.cell(l) }, 0b100);
        s.mark_lines(l, l + 3);
        scan(Scan::Collect, &mut out, &mut buf);
        assert_eq!(out, vec![l, l + 1, l + 2, l + 3]);
        assert_eq!(unsafe { *s.cell(l) }, 0b100, "collect keeps the history");
        out.clear();
        s.mark_lines(l, l);
        scan(Scan::Drop, &mut out, &mut buf);
        assert!(out.is_empty());
        scan(Scan::Collect, &mut out, &mut buf);
        assert!(out.is_empty(), "dropped lines are gone");
    }

    #[test]
    fn mark_lines_word_at_a_time() {
        let s = Shadow::reserve(Placement::Anywhere)
            .unwrap()
            .with_line_shift(6);
        let data = vec![0u8; 64 * 4096];
        let base = data.as_ptr() as u64;
        let range = [(base, base + data.len() as u64)];
        let l0 = s.line_of(base + 64);
        // Unaligned head and tail, a run of words, and partly set words inside.
        s.mark_lines(l0 + 3, l0 + 5);
        s.mark_lines(l0 + 20, l0 + 21);
        s.mark_lines(l0 + 1, l0 + 70);
        s.mark_lines(l0 + 1, l0 + 70);
        let mut out = Vec::new();
        s.scan(
            &range,
            Scan::Shift,
            true,
            &mut |f, b| out.extend(page_lines(f, b)),
            &mut Vec::new(),
        );
        assert_eq!(out, (l0 + 1..=l0 + 70).collect::<Vec<_>>());
        // History bits do not count as set: the next interval marks again.
        s.mark_lines(l0 + 1, l0 + 70);
        out.clear();
        s.scan(
            &range,
            Scan::Shift,
            false,
            &mut |f, b| out.extend(page_lines(f, b)),
            &mut Vec::new(),
        );
        assert_eq!(out, (l0 + 1..=l0 + 70).collect::<Vec<_>>());
    }

    #[test]
    fn gathering_bit0_of_each_byte() {
        for j in 0..8 {
            assert_eq!(gather_bit0(1 << (8 * j)), 1 << j);
            assert_eq!(gather_bit0(0xFE << (8 * j)), 0, "only bit 0 counts");
        }
        assert_eq!(gather_bit0(u64::MAX), 0xFF);
        assert_eq!(gather_bit0(0x0100_0001_0000_0101), 0b1001_0011);
        let bits: PageBits = std::array::from_fn(|i| if i == 2 { 0b1000_0001 } else { 0 });
        assert_eq!(
            page_lines(4096, &bits).collect::<Vec<_>>(),
            vec![4096 + 16, 4096 + 23]
        );
    }

    #[test]
    fn other_line_sizes_and_maps() {
        let s = Shadow::reserve(Placement::Anywhere).unwrap();
        assert_eq!(s.line_size(), 16);
        assert!([1 << 47, 1 << 56].contains(&s.address_limit()));
        // Addresses beyond the user address space are never marked by the runtime.
        s.mark_range(s.address_limit() - 8, 64);
        s.mark_range(u64::MAX - 3, 8);
        let last = s.len - 1;
        assert_eq!(
            unsafe { *s.cell(last) },
            1,
            "the last line inside is marked"
        );
        let top = [(s.address_limit() - 4096, s.address_limit())];
        let mut out = Vec::new();
        s.scan(
            &top,
            Scan::Shift,
            true,
            &mut |f, b| out.extend(page_lines(f, b)),
            &mut Vec::new(),
        );
        assert_eq!(out, vec![last]);
        let data = vec![0u8; 4096];
        let base = (data.as_ptr() as u64 + 15) & !15;
        s.mark_range(base, 64); // four 16-byte lines
        let mut out = Vec::new();
        let range = [(base, base + 1024)];
        s.scan(
            &range,
            Scan::Shift,
            true,
            &mut |f, b| out.extend(page_lines(f, b)),
            &mut Vec::new(),
        );
        assert_eq!(out.len(), 4);
        let maps = mapped_ranges();
        assert!(maps.iter().any(|&(lo, hi)| lo <= base && base < hi));
    }
}
