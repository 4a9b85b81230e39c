//! Deferred levels: regions entered but not yet given a shadow level.
//!
//! Most region instances are short and have few or no children (a leaf function called from
//! a loop, a small loop). Giving each one a shadow level costs a new version, so every tag
//! table it touches is scrubbed on first touch, and so is every table its parent touches
//! after it returns. A deferred level instead keeps the unit ranges its instance accessed in
//! a small buffer. When it exits, its footprint is the size of their union (sorted and
//! coalesced in place, the lines counted from the same ranges); the coalesced ranges then
//! belong to its parent: they stay in the buffer when the parent is deferred too, and are
//! applied to the shadow at the parent's depth otherwise, which marks levels `0..=parent`
//! exactly as the original accesses would have (an instance's tags at its own level are
//! never read after it exits).
//!
//! Deferred levels are always the innermost ones. When the buffer fills, the innermost
//! level's ranges are coalesced; if that leaves it more than half full, the outermost
//! deferred levels are *materialized* (given their shadow level, their own ranges applied)
//! until it is not. Accesses of a materialized innermost level go to the shadow directly.

use super::Touched;

/// Ranges the buffer holds (16 bytes each).
pub(super) const CAPACITY: usize = 64;

#[derive(Debug)]
pub(super) struct Deferred {
    /// Inclusive unit ranges accessed by the deferred levels, each level's own after its
    /// start (coalesced ranges of exited children included).
    ranges: Vec<(u64, u64)>,
    /// Per deferred level, outermost first: where its own ranges begin in `ranges`.
    starts: Vec<usize>,
}

impl Deferred {
    /// `max_levels`: the most levels that can be deferred at once.
    pub(super) fn new(max_levels: usize) -> Self {
        Self {
            ranges: Vec::with_capacity(CAPACITY),
            starts: Vec::with_capacity(max_levels),
        }
    }

    /// Levels deferred.
    #[inline]
    pub(super) fn levels(&self) -> usize {
        self.starts.len()
    }

    #[inline]
    pub(super) fn enter(&mut self) {
        debug_assert!(self.starts.len() < self.starts.capacity());
        self.starts.push(self.ranges.len());
    }

    /// Records units `first..=last` for the innermost deferred level. Returns `false`,
    /// recording nothing, when the buffer is full.
    #[inline]
    pub(super) fn push(&mut self, first: u64, last: u64) -> bool {
        debug_assert!(!self.starts.is_empty());
        // A range overlapping or touching the last one (the same fields read again, the
        // next fields of a structure, the next elements of an array) joins it.
        if self.ranges.len() > self.innermost_start() {
            let top = self.ranges.last_mut().expect("a range of this level");
            if first <= top.1.saturating_add(1) && last.saturating_add(1) >= top.0 {
                *top = (top.0.min(first), top.1.max(last));
                return true;
            }
        }
        if self.ranges.len() == CAPACITY {
            return false;
        }
        self.ranges.push((first, last));
        true
    }

    fn innermost_start(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Ranges held.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Coalesces the innermost level's own ranges.
    pub(super) fn compact_innermost(&mut self) {
        let start = self.innermost_start();
        let kept = coalesce(&mut self.ranges[start..]);
        self.ranges.truncate(start + kept);
    }

    /// The innermost deferred level exits: what its instance touched (`per_line`: log2 of
    /// the units per line; 0 when units are lines). Its coalesced ranges stay, now its
    /// parent's own (or, without a deferred parent, for the caller to apply and
    /// [`clear`](Self::clear)).
    pub(super) fn exit(&mut self, per_line: u32) -> Touched {
        let start = self
            .starts
            .pop()
            .expect("kage-vsm: no deferred level to exit");
        let kept = coalesce(&mut self.ranges[start..]);
        self.ranges.truncate(start + kept);
        let ranges = &self.ranges[start..];
        let mut touched = Touched::default();
        // Lines are counted once, however many ranges share them (ranges are in order).
        let mut counted_to: Option<u64> = None;
        for &(first, last) in ranges {
            touched.locations += last - first + 1;
            let (mut from, to) = (first >> per_line, last >> per_line);
            if let Some(c) = counted_to {
                from = from.max(c + 1);
            }
            if to >= from {
                touched.lines += to - from + 1;
                counted_to = Some(to);
            }
        }
        touched
    }

    /// Every range held (with no level deferred: those of the level that just exited).
    #[inline]
    pub(super) fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    pub(super) fn clear(&mut self) {
        debug_assert!(self.starts.is_empty());
        self.ranges.clear();
    }

    /// How many of the leading ranges are the outermost deferred level's own.
    pub(super) fn outermost_len(&self) -> usize {
        self.starts.get(1).copied().unwrap_or(self.ranges.len())
    }

    /// The outermost deferred level has been materialized (its own ranges, the first
    /// [`outermost_len`](Self::outermost_len), applied): forget it and them.
    pub(super) fn drop_outermost(&mut self) {
        let n = self.outermost_len();
        self.ranges.drain(..n);
        self.starts.remove(0);
        for s in &mut self.starts {
            *s -= n;
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.ranges.capacity() * size_of::<(u64, u64)>()
            + self.starts.capacity() * size_of::<usize>()
    }
}

/// Sorts `ranges` and merges those that overlap or touch into the leading ones. Returns how
/// many are left.
fn coalesce(ranges: &mut [(u64, u64)]) -> usize {
    if ranges.len() <= 1 {
        return ranges.len();
    }
    ranges.sort_unstable_by_key(|r| r.0);
    let mut kept = 0;
    for i in 1..ranges.len() {
        let (first, last) = ranges[i];
        let top = &mut ranges[kept];
        if first <= top.1.saturating_add(1) {
            top.1 = top.1.max(last);
        } else {
            kept += 1;
            ranges[kept] = (first, last);
        }
    }
    kept + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_overlapping_and_touching_ranges_only() {
        let mut r = [
            (10, 12),
            (0, 3),
            (4, 4),
            (13, 20),
            (30, 31),
            (2, 2),
            (22, 25),
        ];
        let n = coalesce(&mut r);
        assert_eq!(&r[..n], &[(0, 4), (10, 20), (22, 25), (30, 31)]);
        let mut r = [(u64::MAX - 1, u64::MAX), (u64::MAX, u64::MAX)];
        assert_eq!(coalesce(&mut r), 1);
        assert_eq!(r[0], (u64::MAX - 1, u64::MAX));
    }

    #[test]
    fn an_exit_counts_the_union_and_its_lines() {
        let mut d = Deferred::new(4);
        d.enter();
        d.push(100, 100);
        d.enter();
        // 64-unit lines: units 0..=70 are lines 0 and 1; 127..=128 lines 1 and 2; 200 line 3.
        for (a, b) in [(0, 70), (127, 128), (50, 60), (200, 200), (127, 127)] {
            assert!(d.push(a, b));
        }
        assert_eq!(
            d.exit(6),
            Touched {
                locations: 71 + 2 + 1,
                lines: 4
            }
        );
        // The child's union is now the parent's, with the parent's own unit 100.
        assert_eq!(
            d.exit(6),
            Touched {
                locations: 75,
                lines: 4
            }
        );
        assert_eq!(d.ranges(), &[(0, 70), (100, 100), (127, 128), (200, 200)]);
        d.clear();
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn materializing_the_outermost_keeps_the_inner_levels_ranges() {
        let mut d = Deferred::new(4);
        d.enter();
        d.push(1, 2);
        d.push(8, 9);
        d.enter();
        d.push(5, 5);
        assert_eq!(d.outermost_len(), 2);
        d.drop_outermost();
        assert_eq!(d.levels(), 1);
        assert_eq!(d.ranges(), &[(5, 5)]);
        assert_eq!(d.exit(6).locations, 1);
    }

    #[test]
    fn a_range_touching_the_last_one_joins_it() {
        let mut d = Deferred::new(2);
        d.enter();
        d.push(10, 19);
        d.push(20, 23);
        d.push(5, 9);
        d.push(12, 14);
        d.enter();
        // Not the parent's: a level's ranges join only its own.
        d.push(24, 24);
        assert_eq!(d.ranges(), &[(5, 23), (24, 24)]);
        d.push(26, 26);
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn the_buffer_refuses_when_full_and_repeats_cost_nothing() {
        let mut d = Deferred::new(1);
        d.enter();
        for k in 0..CAPACITY as u64 {
            assert!(d.push(2 * k, 2 * k));
        }
        assert!(d.push(2 * (CAPACITY as u64 - 1), 2 * (CAPACITY as u64 - 1)));
        assert!(!d.push(1, 1));
        d.compact_innermost();
        assert_eq!(d.len(), CAPACITY);
    }
}
