//! Where a function's interval boundaries may fall, and which marks are then redundant
//! (pure Rust over block indices; unit-tested without LLVM).
//!
//! A tick (an interval boundary) can only happen in a budget check or inside a call. The
//! working-set instrumentation checks the budget only at *checkpoints*: the start of the
//! function and the start of every block that a back edge of a depth-first search from the
//! entry leads to (every loop header, and one block of every irreducible cycle, since every
//! cycle contains such an edge). Every other segment only spends its accesses from the
//! budget. Any run of the function that does not return or call passes a checkpoint at least
//! once per cycle, so a spent budget is noticed after a bounded number of segments.
//!
//! Between two checkpoints (and calls) nothing can tick, so a line marked there stays
//! marked in the current interval: a later access to the same bytes needs no mark. The
//! pass tracks, along each path, the byte ranges `[lo, hi)` of base values already marked
//! since the last checkpoint or call ([`Marked`]), joins paths by keeping what every
//! predecessor marked ([`Marked::meet`]), and drops a mark whose range an entry covers.
//! Blocks are visited in reverse post-order, so every predecessor of a block that is not a
//! checkpoint is visited before it (a predecessor reached later would be the source of a
//! back edge, whose target is a checkpoint).

/// The checkpoints and the visiting order of a function's blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoints {
    /// Blocks reachable from the entry (block 0), in reverse post-order.
    pub order: Vec<usize>,
    /// Whether the block starts with a checkpoint.
    pub at_start: Vec<bool>,
    /// The predecessors of each block (reachable or not).
    pub predecessors: Vec<Vec<usize>>,
}

impl Checkpoints {
    /// For the control-flow graph given by each block's successors, entry = block 0.
    pub fn new(successors: &[Vec<usize>]) -> Self {
        let n = successors.len();
        let mut at_start = vec![false; n];
        let mut predecessors = vec![Vec::new(); n];
        for (b, succ) in successors.iter().enumerate() {
            for &s in succ {
                predecessors[s].push(b);
            }
        }
        let mut order = Vec::with_capacity(n);
        if n == 0 {
            return Checkpoints {
                order,
                at_start,
                predecessors,
            };
        }
        at_start[0] = true;
        // Iterative depth-first search; `on_stack` marks the current path, so an edge to a
        // block on it is a back edge.
        let (mut visited, mut on_stack) = (vec![false; n], vec![false; n]);
        let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
        visited[0] = true;
        on_stack[0] = true;
        while let Some(&mut (block, ref mut next)) = stack.last_mut() {
            if let Some(&s) = successors[block].get(*next) {
                *next += 1;
                if on_stack[s] {
                    at_start[s] = true;
                } else if !visited[s] {
                    visited[s] = true;
                    on_stack[s] = true;
                    stack.push((s, 0));
                }
            } else {
                on_stack[block] = false;
                order.push(block);
                stack.pop();
            }
        }
        order.reverse();
        Checkpoints {
            order,
            at_start,
            predecessors,
        }
    }
}

/// Byte ranges `[lo, hi)` relative to base values `K`, marked since the last point where a
/// tick could happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked<K> {
    ranges: Vec<(K, i64, i64)>,
}

impl<K> Default for Marked<K> {
    fn default() -> Self {
        Marked { ranges: Vec::new() }
    }
}

impl<K: Copy + Eq> Marked<K> {
    /// Whether `[base + lo, base + hi)` lies inside a marked range.
    pub fn covers(&self, base: K, lo: i64, hi: i64) -> bool {
        self.ranges
            .iter()
            .any(|&(b, l, h)| b == base && l <= lo && hi <= h)
    }

    /// `[base + lo, base + hi)` is marked now.
    pub fn add(&mut self, base: K, lo: i64, hi: i64) {
        if !self.covers(base, lo, hi) {
            self.ranges.push((base, lo, hi));
        }
    }

    /// A tick may happen: nothing is known to be marked any more.
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// What is marked on both paths: the ranges of `self` that `other` covers too.
    pub fn meet(&self, other: &Marked<K>) -> Marked<K> {
        Marked {
            ranges: (self.ranges.iter().copied())
                .filter(|&(b, l, h)| other.covers(b, l, h))
                .collect(),
        }
    }

    /// What every one of `paths` marked (nothing for no paths).
    pub fn meet_all<'a>(mut paths: impl Iterator<Item = &'a Marked<K>>) -> Marked<K>
    where
        K: 'a,
    {
        let Some(first) = paths.next() else {
            return Marked::default();
        };
        paths.fold(first.clone(), |acc, p| acc.meet(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn straight_line_has_one_checkpoint() {
        let c = Checkpoints::new(&[vec![1], vec![2], vec![]]);
        assert_eq!(c.order, [0, 1, 2]);
        assert_eq!(c.at_start, [true, false, false]);
        assert_eq!(c.predecessors, [vec![], vec![0], vec![1]]);
    }

    #[test]
    fn loop_headers_are_checkpoints_and_come_before_their_bodies() {
        // 0 -> 1 (header) -> 2 (body) -> 1, 1 -> 3 (exit)
        let c = Checkpoints::new(&[vec![1], vec![2, 3], vec![1], vec![]]);
        assert_eq!(c.at_start, [true, true, false, false]);
        let pos = |b| c.order.iter().position(|&x| x == b).unwrap();
        assert!(pos(0) < pos(1) && pos(1) < pos(2) && pos(1) < pos(3));
    }

    #[test]
    fn a_diamond_has_no_checkpoint_inside_and_joins_after_both_arms() {
        let c = Checkpoints::new(&[vec![1, 2], vec![3], vec![3], vec![]]);
        assert_eq!(c.at_start, [true, false, false, false]);
        let pos = |b| c.order.iter().position(|&x| x == b).unwrap();
        assert!(pos(1) < pos(3) && pos(2) < pos(3));
    }

    #[test]
    fn every_cycle_of_an_irreducible_graph_gets_a_checkpoint() {
        // 0 -> 1, 0 -> 2, 1 <-> 2: no natural loop, one cycle.
        let c = Checkpoints::new(&[vec![1, 2], vec![2], vec![1]]);
        assert_eq!(c.at_start.iter().filter(|&&x| x).count(), 2);
        assert!(c.at_start[0] && (c.at_start[1] || c.at_start[2]));
    }

    #[test]
    fn unreachable_blocks_are_not_visited() {
        let c = Checkpoints::new(&[vec![], vec![0]]);
        assert_eq!(c.order, [0]);
        assert_eq!(c.at_start, [true, false]);
    }

    #[test]
    fn self_loop_is_a_checkpoint() {
        let c = Checkpoints::new(&[vec![1], vec![1, 2], vec![]]);
        assert_eq!(c.at_start, [true, true, false]);
    }

    #[test]
    fn marked_ranges_cover_sub_ranges_of_the_same_base_only() {
        let mut m = Marked::default();
        m.add('p', 0, 16);
        assert!(m.covers('p', 0, 16) && m.covers('p', 4, 8));
        assert!(!m.covers('p', 8, 24) && !m.covers('q', 0, 4));
        m.add('p', 4, 8); // already covered: not added again
        assert_eq!(m.ranges.len(), 1);
        m.clear();
        assert!(!m.covers('p', 0, 1));
    }

    #[test]
    fn meet_keeps_what_every_path_marked() {
        let mut a = Marked::default();
        a.add('p', 0, 8);
        a.add('q', 0, 8);
        let mut b = Marked::default();
        b.add('p', 0, 16);
        let met = Marked::meet_all([&a, &b].into_iter());
        assert!(met.covers('p', 0, 8) && !met.covers('q', 0, 8));
        assert!(
            !met.covers('p', 8, 16),
            "only a's range survives, not b's wider one"
        );
        assert_eq!(
            Marked::<char>::meet_all(std::iter::empty()),
            Marked::default()
        );
    }
}
