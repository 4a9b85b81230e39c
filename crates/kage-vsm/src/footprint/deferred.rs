//! Deferred levels: regions entered but not yet given a shadow level.
//!
//! Most region instances are short and have few or no children (a leaf function called from
//! a loop, a small loop). Giving each one a shadow level costs a new version, so every tag
//! table it touches is scrubbed on first touch, and so is every table its parent touches
//! after it returns. A deferred level instead keeps what its instance accessed in a small
//! buffer of [`Span`]s: unit ranges, or progressions of equal ranges (a column walk, a
//! hoisted loop's chunk). When it exits, its footprint is the size of their union (sorted,
//! coalesced in place, then walked in address order, the lines counted on the way); the
//! coalesced spans then belong to its parent: they stay in the buffer when the parent is
//! deferred too, and are applied to the shadow at the parent's depth otherwise, which marks
//! levels `0..=parent` exactly as the original accesses would have (an instance's tags at
//! its own level are never read after it exits).
//!
//! Deferred levels are always the innermost ones. When the buffer fills, every deferred
//! level's spans are compacted (coalesced; progressions found among its ranges if that is
//! not enough); if that leaves it more than a quarter full, the outermost deferred levels
//! are *materialized* (given their shadow level, their own spans applied) until it is not.
//! Accesses of a materialized innermost level go to the shadow directly.

use super::Touched;

/// Spans the buffer holds (32 bytes each).
pub(super) const CAPACITY: usize = 64;

/// Spans a compaction must leave at most, or deferred levels are materialized: a quarter of
/// the buffer, so that compactions (a sort of the buffer) come at most once per
/// `3 * CAPACITY / 4` accesses.
pub(super) const COMPACT_TO: usize = CAPACITY / 4;

/// Spans looked back at for progressions when compacting.
const WINDOW: usize = 4;

/// Units `first + k * stride ..= last + k * stride` for `k` in `0..count`: a range
/// (`count` 1, `stride` 0) or a progression of disjoint ranges (`stride` beyond the width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) first: u64,
    pub(super) last: u64,
    pub(super) stride: u64,
    pub(super) count: u64,
}

impl Span {
    fn range(first: u64, last: u64) -> Self {
        Span {
            first,
            last,
            stride: 0,
            count: 1,
        }
    }

    /// Units per element.
    fn width(&self) -> u64 {
        self.last - self.first
    }

    /// The last unit of the last element (saturating: spans come from real addresses).
    fn end(&self) -> u64 {
        self.last
            .saturating_add((self.count - 1).saturating_mul(self.stride))
    }

    /// Whether `next` continues this progression: its elements are this one's next ones.
    #[inline(always)]
    fn continued_by(&self, next: &Span) -> bool {
        self.count > 1
            && next.first
                == self
                    .first
                    .wrapping_add(self.count.wrapping_mul(self.stride))
            && next.width() == self.width()
            && (next.count == 1 || next.stride == self.stride)
    }

    /// Element `k`.
    pub(super) fn element(&self, k: u64) -> (u64, u64) {
        let offset = k.wrapping_mul(self.stride);
        (
            self.first.wrapping_add(offset),
            self.last.wrapping_add(offset),
        )
    }

    /// `self` (the earlier in address order) and `other` as one span, if they are one.
    #[inline]
    fn join(&self, other: &Span) -> Option<Span> {
        debug_assert!(self.first <= other.first);
        if self.count == 1 && other.count == 1 {
            return (other.first <= self.last.saturating_add(1))
                .then(|| Span::range(self.first, self.last.max(other.last)));
        }
        if self.count == 1 && other.end() <= self.last {
            return Some(*self); // `other` lies within this range.
        }
        if other.count > 1 && self.stride != other.stride {
            return None;
        }
        if self.count == other.count && other.first <= self.last.saturating_add(1) {
            // The same rows, columns that overlap or touch: one wider band.
            let last = self.last.max(other.last);
            return Some(if last - self.first + 1 >= self.stride {
                Span::range(self.first, last + (self.count - 1) * self.stride)
            } else {
                Span { last, ..*self }
            });
        }
        // Equal elements: `other` continues (or repeats part of) this progression.
        let offset = other.first - self.first;
        if self.width() == other.width() && offset.is_multiple_of(self.stride) {
            let k = offset / self.stride;
            if k <= self.count {
                return Some(Span {
                    count: self.count.max(k + other.count),
                    ..*self
                });
            }
        }
        None
    }
}

#[derive(Debug)]
pub(super) struct Deferred {
    /// What the deferred levels accessed, each level's own spans after its start
    /// (coalesced spans of exited children included).
    spans: Vec<Span>,
    /// Per deferred level, outermost first: where its own spans begin in `spans`.
    starts: Vec<usize>,
    /// Whether `spans` may hold a progression (`count` above 1); false: ranges only, which
    /// an exit sorts, joins and counts in one pass.
    progressions: bool,
}

impl Deferred {
    /// `max_levels`: the most levels that can be deferred at once.
    pub(super) fn new(max_levels: usize) -> Self {
        Self {
            spans: Vec::with_capacity(CAPACITY),
            starts: Vec::with_capacity(max_levels),
            progressions: false,
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
        self.starts.push(self.spans.len());
    }

    /// Records units `first..=last` for the innermost deferred level. Returns `false`,
    /// recording nothing, when the buffer is full.
    #[inline(always)]
    pub(super) fn push(&mut self, first: u64, last: u64) -> bool {
        if self.progressions {
            return self.push_span(Span::range(first, last));
        }
        // Ranges only (the common case): `push_span` without its progressions' cases.
        let n = self.spans.len();
        let from = self.innermost_start().max(n.saturating_sub(3));
        for e in self.spans[from..n].iter_mut().rev() {
            if first <= e.last.saturating_add(1) && last.saturating_add(1) >= e.first {
                (e.first, e.last) = (e.first.min(first), e.last.max(last));
                return true;
            }
        }
        if n == CAPACITY {
            return false;
        }
        self.spans.push(Span::range(first, last));
        true
    }

    /// Records `count` ranges `first..=last`, each `stride` units after the one before
    /// (`count >= 1`). Returns `false`, recording nothing, when the buffer is full.
    #[inline]
    pub(super) fn push_strided(&mut self, first: u64, last: u64, stride: u64, count: u64) -> bool {
        debug_assert!(count >= 1);
        let span = if count == 1 || stride <= last - first + 1 {
            // One element, or elements that overlap or touch: one range.
            Span::range(
                first,
                last.saturating_add((count - 1).saturating_mul(stride)),
            )
        } else {
            self.progressions = true;
            Span {
                first,
                last,
                stride,
                count,
            }
        };
        self.push_span(span)
    }

    // Always inlined: a span passed through memory is stored as words and reloaded as
    // vectors, which stalls (store forwarding) on every access.
    #[inline(always)]
    fn push_span(&mut self, span: Span) -> bool {
        debug_assert!(!self.starts.is_empty());
        let start = self.innermost_start();
        let n = self.spans.len();
        // A range overlapping or touching one of the last three ranges (the same fields read
        // again, the next fields of a structure, the next elements of an array, or of two
        // or three arrays walked together) joins it; so does the next element of one of the
        // last three progressions.
        for e in self.spans[start.max(n.saturating_sub(3))..n]
            .iter_mut()
            .rev()
        {
            if e.count == 1 {
                if span.count == 1
                    && span.first <= e.last.saturating_add(1)
                    && span.last.saturating_add(1) >= e.first
                {
                    *e = Span::range(e.first.min(span.first), e.last.max(span.last));
                    return true;
                }
            } else if e.continued_by(&span) {
                e.count += span.count;
                return true;
            }
        }
        if n == CAPACITY {
            return false;
        }
        self.spans.push(span);
        true
    }

    fn innermost_start(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    /// Spans held.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Compacts every deferred level's own spans (a parent's hold its exited children's,
    /// which only its exit would coalesce otherwise): coalesced, then, if that left more
    /// than [`COMPACT_TO`], progressions found among them (in address order, interleaved
    /// walks alternate as they were accessed) and coalesced again.
    pub(super) fn compact(&mut self) {
        self.compact_with(coalesce);
        if self.spans.len() > COMPACT_TO {
            self.progressions = true;
            self.compact_with(|spans| {
                let kept = find_progressions(spans);
                coalesce(&mut spans[..kept])
            });
        }
    }

    /// Rewrites each level's own spans with `f`, which returns how many it left at the
    /// front; the levels' spans stay in order, each after the one before.
    fn compact_with(&mut self, f: impl Fn(&mut [Span]) -> usize) {
        let mut kept_total = 0;
        for level in 0..self.starts.len() {
            let (from, to) = (
                self.starts[level],
                self.starts
                    .get(level + 1)
                    .copied()
                    .unwrap_or(self.spans.len()),
            );
            let kept = f(&mut self.spans[from..to]);
            self.spans.copy_within(from..from + kept, kept_total);
            self.starts[level] = kept_total;
            kept_total += kept;
        }
        self.spans.truncate(kept_total);
    }

    /// The innermost deferred level exits: what its instance touched (`per_line`: log2 of
    /// the units per line; 0 when units are lines). Its coalesced spans stay, now its
    /// parent's own (or, without a deferred parent, for the caller to apply and
    /// [`clear`](Self::clear)).
    pub(super) fn exit(&mut self, per_line: u32) -> Touched {
        let start = self
            .starts
            .pop()
            .expect("kage-vsm: no deferred level to exit");
        if !self.progressions {
            let (kept, touched) = join_and_count_ranges(&mut self.spans[start..], per_line);
            self.spans.truncate(start + kept);
            return touched;
        }
        let kept = coalesce(&mut self.spans[start..]);
        self.spans.truncate(start + kept);
        union_size(&self.spans[start..], per_line)
    }

    /// Every span held (with no level deferred: those of the level that just exited).
    #[inline]
    pub(super) fn spans(&self) -> &[Span] {
        &self.spans
    }

    pub(super) fn clear(&mut self) {
        debug_assert!(self.starts.is_empty());
        self.spans.clear();
        self.progressions = false;
    }

    /// How many of the leading spans are the outermost deferred level's own.
    pub(super) fn outermost_len(&self) -> usize {
        self.starts.get(1).copied().unwrap_or(self.spans.len())
    }

    /// The outermost deferred level has been materialized (its own spans, the first
    /// [`outermost_len`](Self::outermost_len), applied): forget it and them.
    pub(super) fn drop_outermost(&mut self) {
        let n = self.outermost_len();
        self.spans.drain(..n);
        self.starts.remove(0);
        for s in &mut self.starts {
            *s -= n;
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.spans.capacity() * size_of::<Span>() + self.starts.capacity() * size_of::<usize>()
    }
}

/// Rewrites `spans` (in the order accessed) with equally spaced equal ranges as
/// progressions: a range continues one of the last [`WINDOW`] spans kept, or makes one with
/// two of them (the third of three equally spaced). Returns how many spans are left.
fn find_progressions(spans: &mut [Span]) -> usize {
    let mut kept: usize = 0;
    'next: for i in 0..spans.len() {
        let x = spans[i];
        let window = kept.saturating_sub(WINDOW)..kept;
        for j in window.clone().rev() {
            let e = &mut spans[j];
            if e.continued_by(&x) {
                e.count += x.count;
                continue 'next;
            }
        }
        if x.count == 1 {
            for b in window.clone().rev() {
                let newer = spans[b];
                if newer.count != 1 || newer.width() != x.width() || newer.first >= x.first {
                    continue;
                }
                let stride = x.first - newer.first;
                if stride <= x.width() + 1 {
                    continue;
                }
                for a in (window.start..b).rev() {
                    let older = spans[a];
                    if older.count == 1
                        && older.width() == x.width()
                        && newer.first.checked_sub(older.first) == Some(stride)
                    {
                        spans[a] = Span {
                            stride,
                            count: 3,
                            ..older
                        };
                        spans.copy_within(b + 1..kept, b);
                        kept -= 1;
                        continue 'next;
                    }
                }
            }
        }
        spans[kept] = x;
        kept += 1;
    }
    kept
}

/// Sorts `spans` and joins neighbours that are one span into the leading ones. Returns how
/// many are left. Their union is unchanged; they may still overlap.
fn coalesce(spans: &mut [Span]) -> usize {
    if spans.len() <= 1 {
        return spans.len();
    }
    if spans.iter().all(|s| s.count == 1) {
        return join_and_count_ranges(spans, 0).0;
    }
    if spans.len() <= 16 {
        // A leaf's few ranges, often nearly in order.
        for i in 1..spans.len() {
            let x = spans[i];
            let mut j = i;
            while j > 0 && spans[j - 1].first > x.first {
                spans[j] = spans[j - 1];
                j -= 1;
            }
            spans[j] = x;
        }
    } else {
        spans.sort_unstable_by_key(|s| s.first);
    }
    let mut kept = 0;
    for i in 1..spans.len() {
        let next = spans[i];
        match spans[kept].join(&next) {
            Some(joined) => spans[kept] = joined,
            None => {
                kept += 1;
                spans[kept] = next;
            }
        }
    }
    kept + 1
}

/// [`coalesce`] and [`union_size`] in one pass, for spans that are all ranges (none a
/// progression): sorted by first unit, each joined into the one before when it overlaps
/// or touches it, and the joined ranges counted on the way. Returns how many are left at
/// the front (disjoint, in order) and what they cover.
#[inline(always)]
fn join_and_count_ranges(spans: &mut [Span], per_line: u32) -> (usize, Touched) {
    debug_assert!(spans.iter().all(|s| s.count == 1));
    let n = spans.len();
    if n == 0 {
        return (0, Touched::default());
    }
    if n <= 16 {
        // An exit's few ranges: an insertion sort, moving only what is out of order, and
        // only their bounds (every range's `stride` and `count` are the same).
        for i in 1..n {
            let (first, last) = (spans[i].first, spans[i].last);
            let mut j = i;
            while j > 0 && spans[j - 1].first > first {
                (spans[j].first, spans[j].last) = (spans[j - 1].first, spans[j - 1].last);
                j -= 1;
            }
            (spans[j].first, spans[j].last) = (first, last);
        }
    } else {
        spans.sort_unstable_by_key(|s| s.first);
    }
    let mut touched = Touched::default();
    // Lines below `next_line` are counted (none at first): disjoint ranges may share one.
    let mut next_line = 0u64;
    let mut count = |first: u64, last: u64| {
        touched.locations += last - first + 1;
        let (from, to) = ((first >> per_line).max(next_line), last >> per_line);
        if to >= from {
            touched.lines += to - from + 1;
            next_line = to.saturating_add(1);
        }
    };
    let mut kept = 0;
    let (mut first, mut last) = (spans[0].first, spans[0].last);
    for i in 1..n {
        let s = spans[i];
        if s.first <= last.saturating_add(1) {
            last = last.max(s.last);
        } else {
            (spans[kept].first, spans[kept].last) = (first, last);
            count(first, last);
            kept += 1;
            (first, last) = (s.first, s.last);
        }
    }
    (spans[kept].first, spans[kept].last) = (first, last);
    count(first, last);
    (kept + 1, touched)
}

/// Row 0 of spans that are all progressions of one stride and count whose elements lie
/// within one stride of the first (so that row `k`, every span's element `k`, lies before
/// row `k + 1`): its ranges, merged and in order.
struct Row {
    ranges: [(u64, u64); CAPACITY],
    len: usize,
}

fn one_row_pattern(spans: &[Span]) -> Option<Row> {
    let (stride, count) = (spans[0].stride, spans[0].count);
    let start = spans[0].first;
    if count < 2
        || spans
            .iter()
            .any(|s| s.stride != stride || s.count != count || s.last - start >= stride)
    {
        return None;
    }
    // `spans` are sorted by `first`.
    let mut row = Row {
        ranges: [(0, 0); CAPACITY],
        len: 0,
    };
    for s in spans {
        match row.len.checked_sub(1).map(|i| &mut row.ranges[i]) {
            Some(top) if s.first <= top.1 + 1 => top.1 = top.1.max(s.last),
            _ => {
                row.ranges[row.len] = (s.first, s.last);
                row.len += 1;
            }
        }
    }
    Some(row)
}

/// Counts the distinct units and lines of unit ranges given in the order of their first
/// units, overlapping or not.
pub(super) struct Runs {
    touched: Touched,
    per_line: u32,
    /// The run being merged.
    run: Option<(u64, u64)>,
    /// The last line counted: lines are counted once, however many runs share them.
    counted_to: Option<u64>,
}

impl Runs {
    /// `per_line`: log2 of the units per line.
    pub(super) fn new(per_line: u32) -> Self {
        Runs {
            touched: Touched::default(),
            per_line,
            run: None,
            counted_to: None,
        }
    }

    /// Units `first..=last`, `first` no lower than any added before.
    #[inline]
    pub(super) fn add(&mut self, first: u64, last: u64) {
        self.run = match self.run {
            Some((a, b)) if first <= b.saturating_add(1) => Some((a, b.max(last))),
            Some((a, b)) => {
                self.count(a, b);
                Some((first, last))
            }
            None => Some((first, last)),
        };
    }

    fn count(&mut self, first: u64, last: u64) {
        self.touched.locations += last - first + 1;
        let (mut from, to) = (first >> self.per_line, last >> self.per_line);
        if let Some(c) = self.counted_to {
            from = from.max(c + 1);
        }
        if to >= from {
            self.touched.lines += to - from + 1;
            self.counted_to = Some(to);
        }
    }

    pub(super) fn finish(mut self) -> Touched {
        if let Some((a, b)) = self.run.take() {
            self.count(a, b);
        }
        self.touched
    }
}

/// The distinct units and lines of `spans` (sorted by `first`, as [`coalesce`] leaves them).
fn union_size(spans: &[Span], per_line: u32) -> Touched {
    let mut runs = Runs::new(per_line);
    if spans.iter().all(|s| s.count == 1) {
        // Coalesced ranges are disjoint and in order.
        for s in spans {
            runs.add(s.first, s.last);
        }
        return runs.finish();
    }
    if let Some(row) = one_row_pattern(spans) {
        // Rows of the same ranges (a nest's column walks): row `k` is row 0 shifted by
        // `k * stride`, after row `k - 1`.
        let (stride, count) = (spans[0].stride, spans[0].count);
        for k in 0..count {
            let shift = k * stride;
            for &(first, last) in &row.ranges[..row.len] {
                runs.add(first + shift, last + shift);
            }
        }
        return runs.finish();
    }
    // Elements of every span in address order (each span's are), overlapping ones merged.
    // Per span not yet walked to its end: (its next element's first unit, that element,
    // the span).
    debug_assert!(spans.len() <= CAPACITY);
    let mut cursors = [(0u64, 0u64, 0u64); CAPACITY];
    let mut open = 0;
    for (i, s) in spans.iter().enumerate() {
        cursors[open] = (s.first, 0, i as u64);
        open += 1;
    }
    while open > 0 {
        let next = &mut cursors[..open];
        let (at, _) = next
            .iter()
            .enumerate()
            .min_by_key(|(_, n)| n.0)
            .expect("a span left");
        let (_, k, i) = next[at];
        let span = &spans[i as usize];
        let (first, last) = span.element(k);
        if k + 1 < span.count {
            next[at] = (span.element(k + 1).0, k + 1, i);
        } else {
            next[at] = next[open - 1];
            open -= 1;
        }
        runs.add(first, last);
    }
    runs.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn units(spans: &[Span]) -> BTreeSet<u64> {
        spans
            .iter()
            .flat_map(|s| {
                (0..s.count).flat_map(move |k| {
                    let (a, b) = s.element(k);
                    a..=b
                })
            })
            .collect()
    }

    fn naive(spans: &[Span], per_line: u32) -> Touched {
        let set = units(spans);
        Touched {
            locations: set.len() as u64,
            lines: set
                .iter()
                .map(|u| u >> per_line)
                .collect::<BTreeSet<_>>()
                .len() as u64,
        }
    }

    #[test]
    fn coalesce_merges_overlapping_and_touching_ranges_only() {
        let r = |a, b| Span::range(a, b);
        let mut s = [
            r(10, 12),
            r(0, 3),
            r(4, 4),
            r(13, 20),
            r(30, 31),
            r(2, 2),
            r(22, 25),
        ];
        let n = coalesce(&mut s);
        assert_eq!(&s[..n], &[r(0, 4), r(10, 20), r(22, 25), r(30, 31)]);
        let mut s = [r(u64::MAX - 1, u64::MAX), r(u64::MAX, u64::MAX)];
        assert_eq!(coalesce(&mut s), 1);
        assert_eq!(s[0], r(u64::MAX - 1, u64::MAX));
    }

    #[test]
    fn progressions_join_as_bands_continuations_and_ranges() {
        let p = |first, last, stride, count| Span {
            first,
            last,
            stride,
            count,
        };
        // Columns 0, 1 and 3 of 10 rows of 100: 0 and 1 make a band, 3 stays.
        let mut s = [p(3, 3, 100, 10), p(1, 1, 100, 10), p(0, 0, 100, 10)];
        let n = coalesce(&mut s);
        assert_eq!(&s[..n], &[p(0, 1, 100, 10), p(3, 3, 100, 10)]);
        // A band as wide as the stride is one range.
        let mut s = [p(0, 49, 100, 4), p(50, 99, 100, 4)];
        assert_eq!(coalesce(&mut s), 1);
        assert_eq!(s[0], Span::range(0, 399));
        // A continuation, and a repeat of part of it.
        let mut s = [p(8, 9, 10, 3), p(38, 39, 10, 2), p(18, 19, 10, 1)];
        assert_eq!(coalesce(&mut s), 1);
        assert_eq!(s[0], p(8, 9, 10, 5));
        // A range inside a range; a progression inside a range.
        let mut s = [Span::range(0, 1000), p(5, 6, 50, 4), Span::range(7, 9)];
        assert_eq!(coalesce(&mut s), 1);
    }

    #[test]
    fn progressions_are_found_among_interleaved_walks() {
        // Two column walks interleaved (columns 3 and 7, rows 100 apart), then a stray range.
        let mut s: Vec<Span> = (0..20u64)
            .flat_map(|k| {
                [
                    Span::range(k * 100 + 3, k * 100 + 3),
                    Span::range(k * 100 + 7, k * 100 + 8),
                ]
            })
            .collect();
        s.push(Span::range(5000, 5000));
        let before = units(&s);
        let n = find_progressions(&mut s);
        assert_eq!(n, 3, "{:?}", &s[..n]);
        assert_eq!(units(&s[..n]), before);
        assert_eq!(s[0].count, 20);
        assert_eq!(s[1].count, 20);
    }

    #[test]
    fn union_size_walks_progressions_in_address_order() {
        let p = |first, last, stride, count| Span {
            first,
            last,
            stride,
            count,
        };
        let cases: Vec<Vec<Span>> = vec![
            vec![p(0, 7, 4400, 50), p(64, 71, 4400, 50)],
            vec![p(0, 7, 4400, 50), p(8, 15, 4400, 50), Span::range(100, 300)],
            vec![
                p(3, 5, 7, 9),
                p(4, 9, 13, 5),
                Span::range(0, 2),
                p(60, 60, 2, 30),
            ],
            vec![p(0, 0, 64, 10), p(63, 63, 64, 10)],
            // Rows of one pattern: column walks, touching and line-sharing rows.
            vec![p(5, 7, 100, 20), p(40, 47, 100, 20), p(44, 60, 100, 20)],
            vec![p(0, 10, 24, 30), p(12, 23, 24, 30)],
            vec![p(60, 63, 70, 9), p(64, 65, 70, 9)],
        ];
        for mut spans in cases {
            for per_line in [0, 3, 6] {
                let expected = naive(&spans, per_line);
                let n = coalesce(&mut spans);
                assert_eq!(units(&spans[..n]).len() as u64, expected.locations);
                assert_eq!(union_size(&spans[..n], per_line), expected, "{spans:?}");
            }
        }
    }

    #[test]
    fn ranges_are_joined_and_counted_as_the_union_of_their_units() {
        // Random ranges, few and many (the sort's two ways), touching, overlapping,
        // sharing lines, at several units per line.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..400 {
            let n = 1 + (next() % 40) as usize;
            let spans: Vec<Span> = (0..n)
                .map(|_| {
                    let first = next() % 300;
                    Span::range(first, first + next() % 20)
                })
                .collect();
            for per_line in [0, 2, 6] {
                let mut joined = spans.clone();
                let (kept, touched) = join_and_count_ranges(&mut joined, per_line);
                assert_eq!(touched, naive(&spans, per_line), "round {round}");
                let joined = &joined[..kept];
                assert_eq!(units(joined), units(&spans), "round {round}");
                // Disjoint, neither overlapping nor touching, in order.
                assert!(joined.windows(2).all(|w| w[0].last + 1 < w[1].first));
            }
        }
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
        let r = Span::range;
        assert_eq!(
            d.spans(),
            &[r(0, 70), r(100, 100), r(127, 128), r(200, 200)]
        );
        d.clear();
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn materializing_the_outermost_keeps_the_inner_levels_spans() {
        let mut d = Deferred::new(4);
        d.enter();
        d.push(1, 2);
        d.push(8, 9);
        d.enter();
        d.push(5, 5);
        assert_eq!(d.outermost_len(), 2);
        d.drop_outermost();
        assert_eq!(d.levels(), 1);
        assert_eq!(d.spans(), &[Span::range(5, 5)]);
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
        assert_eq!(d.spans(), &[Span::range(5, 23), Span::range(24, 24)]);
        d.push(26, 26);
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn the_next_element_of_a_recent_progression_joins_it() {
        let mut d = Deferred::new(1);
        d.enter();
        d.push_strided(0, 7, 100, 4);
        d.push_strided(50, 57, 100, 4);
        d.push(400, 407);
        d.push(450, 457);
        d.push_strided(500, 507, 100, 3);
        assert_eq!(d.len(), 2);
        assert_eq!(d.exit(0).locations, 8 * 8 + 5 * 8);
    }

    #[test]
    fn compacting_coalesces_every_level_and_keeps_them_apart() {
        let mut d = Deferred::new(3);
        d.enter();
        // The parent's spans: what 40 children left, one column each (a band once sorted).
        for c in [7u64, 3, 5, 1, 0, 2, 6, 4].iter().cycle().take(40) {
            assert!(d.push_strided(*c, *c, 100, 10));
        }
        d.enter();
        for k in 0..24u64 {
            assert!(d.push(1000 + 10 * k, 1000 + 10 * k));
        }
        assert_eq!(d.len(), CAPACITY);
        d.compact();
        // The parent's band; the child's ranges as one progression (coalescing alone left
        // more than a quarter of the buffer).
        assert_eq!(d.outermost_len(), 1, "{:?}", d.spans());
        assert_eq!(d.len(), 2, "{:?}", d.spans());
        assert_eq!(d.exit(0).locations, 24);
        assert_eq!(d.exit(0).locations, 80 + 24);
    }

    #[test]
    fn the_buffer_refuses_when_full_and_repeats_cost_nothing() {
        let mut d = Deferred::new(1);
        d.enter();
        for k in 0..CAPACITY as u64 {
            assert!(d.push(3 * k * k, 3 * k * k));
        }
        let last = 3 * (CAPACITY as u64 - 1).pow(2);
        assert!(d.push(last, last));
        assert!(!d.push(1, 1));
        d.compact();
        assert_eq!(d.len(), CAPACITY);
    }
}
