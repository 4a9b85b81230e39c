//! Natural loops on a plain control-flow graph of block indices (no LLVM here).
//!
//! The LLVM C API exposes neither a dominator tree nor LoopInfo, so the pass builds the
//! CFG from terminators and hands it to [`find_loops`].
//!
//! Definitions (the classic ones, as in LLVM's LoopInfo):
//! - A back edge is an edge `u -> h` where `h` dominates `u`.
//! - There is one loop per header `h`: the union of all its back edges. Its blocks are `h`
//!   plus every block that reaches a latch (`u`) walking predecessors without passing `h`.
//! - A loop's parent is the smallest loop that strictly contains it.
//!
//! Irreducible cycles (a cycle entered at more than one block, so no block of it dominates
//! the others) have no back edge and are therefore not loops; their blocks belong to the
//! enclosing loop or function. Blocks unreachable from the entry have no dominators, take
//! part in no loop, and are reported as unreachable so callers can treat them consistently.

use petgraph::algo::dominators::{simple_fast, Dominators};
use petgraph::graph::{DiGraph, NodeIndex};

/// One natural loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// The block every back edge targets.
    pub header: usize,
    /// All blocks of the loop (header included), sorted ascending.
    pub blocks: Vec<usize>,
    /// Index (into [`LoopForest::loops`]) of the smallest loop strictly containing this one.
    pub parent: Option<usize>,
}

/// All natural loops of one function, outer loops before inner ones (pre-order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopForest {
    /// Loops in pre-order: every loop comes after its parent and before its next sibling;
    /// siblings are ordered by header index (which is block layout order for the pass).
    pub loops: Vec<Loop>,
    /// For each block, the innermost loop containing it.
    pub innermost: Vec<Option<usize>>,
    /// For each block, whether it is reachable from the entry.
    pub reachable: Vec<bool>,
}

impl LoopForest {
    /// Whether `block` is one of the loops' headers.
    pub fn is_header(&self, block: usize) -> bool {
        self.loops.iter().any(|l| l.header == block)
    }

    /// Whether `block` belongs to loop `loop_index` (directly or through a nested loop).
    pub fn contains(&self, loop_index: usize, block: usize) -> bool {
        self.loops[loop_index].blocks.binary_search(&block).is_ok()
    }

    /// The forest with each loop of `pieces` joined into its parent: its blocks are its
    /// parent's own, its inner loops its parent's (a piece without a parent stays). Returns
    /// the new forest and, for each loop of this one, its index there (`None`: joined).
    ///
    /// For the loops the optimiser cut out of one source loop (LLVM's loop simplification
    /// makes a loop with several back edges two nested loops when a value changes on some
    /// of them only): the region is the source's loop. Its blocks then hold a cycle that is
    /// no loop of the forest, as an irreducible one would.
    pub fn joining(&self, pieces: &[usize]) -> (LoopForest, Vec<Option<usize>>) {
        let joined = |k: usize| pieces.contains(&k) && self.loops[k].parent.is_some();
        // The loop each one becomes: itself, or the first of its parents that stays.
        let mut into: Vec<usize> = Vec::with_capacity(self.loops.len());
        for (k, lp) in self.loops.iter().enumerate() {
            // Pre-order: a parent's `into` is known.
            into.push(match lp.parent {
                Some(p) if joined(k) => into[p],
                _ => k,
            });
        }
        let mut index = vec![None; self.loops.len()];
        let mut loops = Vec::new();
        for (k, lp) in self.loops.iter().enumerate() {
            if joined(k) {
                continue;
            }
            index[k] = Some(loops.len());
            loops.push(Loop {
                header: lp.header,
                blocks: lp.blocks.clone(),
                parent: lp
                    .parent
                    .map(|p| index[into[p]].expect("a parent that stays")),
            });
        }
        let innermost = (self.innermost.iter())
            .map(|l| l.map(|k| index[into[k]].expect("a loop that stays")))
            .collect();
        let forest = LoopForest {
            loops,
            innermost,
            reachable: self.reachable.clone(),
        };
        (forest, index)
    }
}

/// Each block's predecessors, one entry per edge (a block that branches twice to the same
/// block is listed twice), from successor lists; out-of-range targets are ignored.
pub fn predecessors(successors: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut predecessors = vec![Vec::new(); successors.len()];
    for (from, succs) in successors.iter().enumerate() {
        for &to in succs.iter().filter(|&&to| to < successors.len()) {
            predecessors[to].push(from);
        }
    }
    predecessors
}

/// Finds the natural loops of the CFG given as successor lists (`successors[b]` are the
/// blocks `b` branches to; out-of-range targets are ignored), entered at `entry`.
pub fn find_loops(successors: &[Vec<usize>], entry: usize) -> LoopForest {
    let block_count = successors.len();
    let mut graph: DiGraph<(), ()> = DiGraph::with_capacity(block_count, 0);
    for _ in 0..block_count {
        graph.add_node(());
    }
    let mut predecessors = vec![Vec::new(); block_count];
    for (from, succs) in successors.iter().enumerate() {
        for &to in succs {
            if to < block_count {
                graph.add_edge(NodeIndex::new(from), NodeIndex::new(to), ());
                predecessors[to].push(from);
            }
        }
    }
    if block_count == 0 || entry >= block_count {
        return LoopForest {
            loops: Vec::new(),
            innermost: Vec::new(),
            reachable: vec![false; block_count],
        };
    }
    let doms = simple_fast(&graph, NodeIndex::new(entry));
    let reachable: Vec<bool> = (0..block_count)
        .map(|b| b == entry || doms.immediate_dominator(NodeIndex::new(b)).is_some())
        .collect();

    // Back edges grouped by header: latches[h] = blocks with a back edge to h.
    let mut latches: Vec<Vec<usize>> = vec![Vec::new(); block_count];
    for from in (0..block_count).filter(|&b| reachable[b]) {
        for &to in &successors[from] {
            if to < block_count && dominates(&doms, to, from) && !latches[to].contains(&from) {
                latches[to].push(from);
            }
        }
    }

    // Loop bodies: walk predecessors back from the latches, stopping at the header.
    let mut unordered: Vec<(usize, Vec<usize>)> = Vec::new();
    for header in 0..block_count {
        if latches[header].is_empty() {
            continue;
        }
        let mut in_loop = vec![false; block_count];
        in_loop[header] = true;
        let mut work: Vec<usize> = latches[header].clone();
        while let Some(b) = work.pop() {
            if in_loop[b] || !reachable[b] {
                continue;
            }
            in_loop[b] = true;
            work.extend(predecessors[b].iter().copied());
        }
        let blocks: Vec<usize> = (0..block_count).filter(|&b| in_loop[b]).collect();
        unordered.push((header, blocks));
    }

    // Nesting: natural loops with distinct headers are disjoint or nested, so the parent
    // is the smallest other loop that contains this loop's header.
    let contains = |outer: &Vec<usize>, block: usize| outer.binary_search(&block).is_ok();
    let parent_of: Vec<Option<usize>> = unordered
        .iter()
        .enumerate()
        .map(|(i, (header, blocks))| {
            unordered
                .iter()
                .enumerate()
                .filter(|&(j, (_, other))| {
                    j != i && other.len() > blocks.len() && contains(other, *header)
                })
                .min_by_key(|&(_, (_, other))| other.len())
                .map(|(j, _)| j)
        })
        .collect();

    // Pre-order: roots then children, each group by header index (`unordered` is already
    // sorted by header because headers were visited in increasing order).
    let mut order: Vec<usize> = Vec::with_capacity(unordered.len());
    fn visit(node: Option<usize>, parent_of: &[Option<usize>], order: &mut Vec<usize>) {
        for child in (0..parent_of.len()).filter(|&c| parent_of[c] == node) {
            order.push(child);
            visit(Some(child), parent_of, order);
        }
    }
    visit(None, &parent_of, &mut order);
    let mut new_index = vec![0; unordered.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let loops: Vec<Loop> = order
        .iter()
        .map(|&old| Loop {
            header: unordered[old].0,
            blocks: unordered[old].1.clone(),
            parent: parent_of[old].map(|p| new_index[p]),
        })
        .collect();

    // Innermost loop of each block: the smallest loop containing it.
    let innermost: Vec<Option<usize>> = (0..block_count)
        .map(|b| {
            loops
                .iter()
                .enumerate()
                .filter(|(_, l)| contains(&l.blocks, b))
                .min_by_key(|(_, l)| l.blocks.len())
                .map(|(i, _)| i)
        })
        .collect();

    LoopForest {
        loops,
        innermost,
        reachable,
    }
}

/// Whether `a` dominates `b` (both reachable; every block dominates itself).
fn dominates(doms: &Dominators<NodeIndex>, a: usize, b: usize) -> bool {
    match doms.dominators(NodeIndex::new(b)) {
        Some(mut iter) => iter.any(|d| d.index() == a),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocks that get a settle hook in a function without inlined code, each with the
    /// innermost loop containing it (`None`: the function).
    fn settle_blocks(f: &LoopForest, cfg: &[Vec<usize>]) -> Vec<(usize, Option<usize>)> {
        use crate::region_tree::{build, settle_points, NodeKind};
        let tree = build(f, &vec![Vec::new(); cfg.len()], &[]);
        (settle_points(&tree, f, cfg, &[]).into_iter())
            .map(|(b, node)| match tree.nodes[node].kind {
                NodeKind::LoopBody(k) => (b, Some(k)),
                _ => (b, None),
            })
            .collect()
    }

    fn headers(f: &LoopForest) -> Vec<usize> {
        f.loops.iter().map(|l| l.header).collect()
    }

    #[test]
    fn straight_line_has_no_loops() {
        let f = find_loops(&[vec![1], vec![2], vec![]], 0);
        assert!(f.loops.is_empty());
        assert_eq!(f.innermost, vec![None, None, None]);
        assert_eq!(f.reachable, vec![true, true, true]);
        assert!(settle_blocks(&f, &[vec![1], vec![2], vec![]]).is_empty());
    }

    #[test]
    fn self_loop() {
        // 0 -> 1, 1 -> 1 | 2
        let cfg = vec![vec![1], vec![1, 2], vec![]];
        let f = find_loops(&cfg, 0);
        assert_eq!(
            f.loops,
            vec![Loop {
                header: 1,
                blocks: vec![1],
                parent: None
            }]
        );
        assert_eq!(f.innermost, vec![None, Some(0), None]);
        assert_eq!(settle_blocks(&f, &cfg), vec![(2, None)]);
    }

    #[test]
    fn doubly_nested_loops() {
        // 0 -> 1 (outer header) -> 2 (inner header) -> 3 (inner latch) -> 2 | 4
        // 4 (outer latch) -> 1 | 5 (exit)
        let cfg = vec![vec![1], vec![2, 5], vec![3], vec![2, 4], vec![1, 5], vec![]];
        let f = find_loops(&cfg, 0);
        assert_eq!(headers(&f), vec![1, 2]);
        assert_eq!(f.loops[0].blocks, vec![1, 2, 3, 4]);
        assert_eq!(f.loops[0].parent, None);
        assert_eq!(f.loops[1].blocks, vec![2, 3]);
        assert_eq!(f.loops[1].parent, Some(0));
        assert_eq!(
            f.innermost,
            vec![None, Some(0), Some(1), Some(1), Some(0), None]
        );
        // 4 exits the inner loop (innermost: outer loop), 5 exits the outer one.
        assert_eq!(settle_blocks(&f, &cfg), vec![(4, Some(0)), (5, None)]);
    }

    #[test]
    fn a_piece_joined_into_its_parent_leaves_its_blocks_and_inner_loops_to_it() {
        // What loop simplification makes of a `while` with a `continue`: 1 (outer header)
        // -> 2 (the piece's header) -> 3 -> 2 (the `continue`) | 4; 4 -> 5 (a real inner
        // loop) -> 5 | 6; 6 -> 1 | 7 (exit).
        let cfg = vec![
            vec![1],
            vec![2],
            vec![3],
            vec![2, 4],
            vec![5],
            vec![5, 6],
            vec![1, 7],
            vec![],
        ];
        let f = find_loops(&cfg, 0);
        assert_eq!(headers(&f), vec![1, 2, 5]);
        let (joined, index) = f.joining(&[1]);
        assert_eq!(index, vec![Some(0), None, Some(1)]);
        assert_eq!(headers(&joined), vec![1, 5]);
        assert_eq!(joined.loops[0].blocks, f.loops[0].blocks);
        assert_eq!(joined.loops[1].parent, Some(0));
        assert_eq!(
            joined.innermost,
            vec![
                None,
                Some(0),
                Some(0),
                Some(0),
                Some(0),
                Some(1),
                Some(0),
                None
            ]
        );
        // The piece's blocks are the loop's body: no region changes at them.
        assert_eq!(settle_blocks(&joined, &cfg), vec![(6, Some(0)), (7, None)]);
        // A loop without a parent is no piece.
        assert_eq!(f.joining(&[0]).1, vec![Some(0), Some(1), Some(2)]);
    }

    #[test]
    fn multiple_back_edges_make_one_loop() {
        // 0 -> 1 (header) -> 2 | 3; 2 -> 1 (latch); 3 -> 1 | 4 (latch); 4 exit
        let cfg = vec![vec![1], vec![2, 3], vec![1], vec![1, 4], vec![]];
        let f = find_loops(&cfg, 0);
        assert_eq!(
            f.loops,
            vec![Loop {
                header: 1,
                blocks: vec![1, 2, 3],
                parent: None
            }]
        );
        assert_eq!(settle_blocks(&f, &cfg), vec![(4, None)]);
    }

    #[test]
    fn irreducible_cycle_is_not_a_loop() {
        // 0 -> 1 | 2; 1 -> 2; 2 -> 1 | 3: the 1<->2 cycle has two entries.
        let cfg = vec![vec![1, 2], vec![2], vec![1, 3], vec![]];
        let f = find_loops(&cfg, 0);
        assert!(f.loops.is_empty());
        assert!(settle_blocks(&f, &cfg).is_empty());
    }

    #[test]
    fn irreducible_cycle_inside_a_loop_belongs_to_it() {
        // 0 -> 1 (header); 1 -> 2 | 3; 2 -> 3; 3 -> 2 | 4; 4 -> 1 | 5
        let cfg = vec![vec![1], vec![2, 3], vec![3], vec![2, 4], vec![1, 5], vec![]];
        let f = find_loops(&cfg, 0);
        assert_eq!(
            f.loops,
            vec![Loop {
                header: 1,
                blocks: vec![1, 2, 3, 4],
                parent: None
            }]
        );
    }

    #[test]
    fn unreachable_blocks_are_in_no_loop() {
        // 3 is unreachable and jumps into the loop and to itself.
        let cfg = vec![vec![1], vec![1, 2], vec![], vec![1, 3]];
        let f = find_loops(&cfg, 0);
        assert_eq!(f.reachable, vec![true, true, true, false]);
        assert_eq!(
            f.loops,
            vec![Loop {
                header: 1,
                blocks: vec![1],
                parent: None
            }]
        );
        assert_eq!(f.innermost[3], None);
    }

    #[test]
    fn sibling_loops_and_exit_into_another_header() {
        // Loop A: 1 <-> 2, exits straight into loop B's header 3; loop B: 3 -> 3 | 4.
        let cfg = vec![vec![1], vec![2], vec![1, 3], vec![3, 4], vec![]];
        let f = find_loops(&cfg, 0);
        assert_eq!(headers(&f), vec![1, 3]);
        assert_eq!(f.loops[1].parent, None);
        // 3 is a header: its iteration hook settles, so only 4 gets a settle.
        assert_eq!(settle_blocks(&f, &cfg), vec![(4, None)]);
    }

    #[test]
    fn pre_order_puts_children_right_after_their_parent() {
        // Outer 1 contains inner 2 (self loop) then inner 4 (self loop); sibling 6 after.
        // 0->1; 1->2; 2->2|3; 3->4; 4->4|5; 5->1|6; 6->6|7; 7
        let cfg = vec![
            vec![1],
            vec![2],
            vec![2, 3],
            vec![4],
            vec![4, 5],
            vec![1, 6],
            vec![6, 7],
            vec![],
        ];
        let f = find_loops(&cfg, 0);
        assert_eq!(headers(&f), vec![1, 2, 4, 6]);
        let parents: Vec<Option<usize>> = f.loops.iter().map(|l| l.parent).collect();
        assert_eq!(parents, vec![None, Some(0), Some(0), None]);
        assert_eq!(
            settle_blocks(&f, &cfg),
            vec![(3, Some(0)), (5, Some(0)), (7, None)]
        );
    }

    #[test]
    fn empty_and_bad_edges_do_not_panic() {
        let f = find_loops(&[], 0);
        assert!(f.loops.is_empty());
        let f = find_loops(&[vec![7], vec![0]], 0);
        assert!(f.loops.is_empty());
        assert_eq!(f.reachable, vec![true, false]);
    }
}
