//! Blocks that run equally often: execution classes on a plain graph (no LLVM here).
//!
//! Two blocks are in one class when every walk from the graph's entry to its exit runs them
//! the same number of times; a counter for one then counts the other. The count build
//! keeps one local per class of a promoted tree instead of one per region and statistic: a
//! helper inlined unconditionally into a loop body runs once per iteration, as the body
//! does.
//!
//! How the classes are found (a sufficient condition, not every pair that runs equally
//! often):
//! - Each level (the graph outside its loops, or one natural loop outside its inner loops)
//!   is made acyclic: an inner loop is one node, a back edge to the level's header or an
//!   edge that leaves the loop goes to the level's sink. One walk through a level (from
//!   the entry to the exit; for a loop, one iteration, from its header to a back edge or
//!   out) runs each of its blocks at most once.
//! - In that acyclic graph, `a` and `b` run in the same walks when `a` dominates `b` and
//!   `b` post-dominates `a`. Such pairs form chains in the dominator tree: a node is in its
//!   immediate dominator's class when it post-dominates it.
//! - A level with an irreducible cycle (no single header) stays acyclic only in name: its
//!   blocks get no class.

use petgraph::algo::dominators::simple_fast;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::loops::{find_loops, LoopForest};

/// The execution classes of a graph's blocks ([`execution_classes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionClasses {
    /// Per block, its class (`None`: in none: unreachable, in an irreducible cycle, or
    /// unable to reach the exit).
    pub of_block: Vec<Option<usize>>,
    /// Per class, whether its blocks are in a loop (may run many times in one walk).
    pub in_loop: Vec<bool>,
}

/// The execution classes of the graph given as successor lists, for walks from `entry` to
/// `exit` (a block with no successors). Blocks of one class run equally often in every
/// such walk.
pub fn execution_classes(successors: &[Vec<usize>], entry: usize, exit: usize) -> ExecutionClasses {
    let n = successors.len();
    let mut classes = ExecutionClasses {
        of_block: vec![None; n],
        in_loop: Vec::new(),
    };
    if entry >= n || exit >= n || !successors[exit].is_empty() {
        return classes;
    }
    let forest = find_loops(successors, entry);
    let levels = std::iter::once(None).chain((0..forest.loops.len()).map(Some));
    for level in levels {
        level_classes(successors, &forest, (entry, exit), level, &mut classes);
    }
    classes
}

/// The loop (index) of `block` directly under `level` (`None`: the graph), or `None` when
/// `block` is directly in `level`.
fn loop_under(forest: &LoopForest, level: Option<usize>, block: usize) -> Option<usize> {
    let mut at = forest.innermost[block]?;
    while forest.loops[at].parent != level {
        at = forest.loops[at].parent?;
    }
    (Some(at) != level).then_some(at)
}

/// The classes of the blocks directly in `level`, numbered from `next_class`.
fn level_classes(
    successors: &[Vec<usize>],
    forest: &LoopForest,
    (entry, exit): (usize, usize),
    level: Option<usize>,
    classes: &mut ExecutionClasses,
) {
    let n = successors.len();
    let inside = |b: usize| {
        forest.reachable[b]
            && match level {
                None => true,
                Some(l) => forest.contains(l, b),
            }
    };
    let source = match level {
        None => entry,
        Some(l) => forest.loops[l].header,
    };
    // Nodes: the level's blocks and its inner loops (as their headers), and a sink (`n`).
    let sink = n;
    let node_of = |b: usize| match loop_under(forest, level, b) {
        Some(inner) => forest.loops[inner].header,
        None => b,
    };
    let mut graph: DiGraph<(), ()> = DiGraph::with_capacity(n + 1, 0);
    for _ in 0..=n {
        graph.add_node(());
    }
    let mut in_degree = vec![0usize; n + 1];
    let mut edges: Vec<(usize, usize)> = Vec::new();
    for from in (0..n).filter(|&b| inside(b)) {
        let u = node_of(from);
        let mut targets: Vec<usize> = successors[from]
            .iter()
            .map(|&to| {
                if to >= n || !inside(to) || to == source {
                    sink
                } else {
                    node_of(to)
                }
            })
            .filter(|&v| v != u)
            .collect();
        if level.is_none() && from == exit {
            targets.push(sink);
        }
        for v in targets {
            if !edges.contains(&(u, v)) {
                edges.push((u, v));
                in_degree[v] += 1;
                graph.add_edge(NodeIndex::new(u), NodeIndex::new(v), ());
            }
        }
    }
    // Acyclic, or an irreducible cycle in the level: then no classes here.
    let order = match topological_order(n + 1, &edges, &in_degree, source) {
        Some(order) => order,
        None => return,
    };
    let dominators = simple_fast(&graph, NodeIndex::new(source));
    let mut reversed = graph.clone();
    reversed.reverse();
    let post_dominators = simple_fast(&reversed, NodeIndex::new(sink));
    let post_dominates = |a: usize, b: usize| {
        post_dominators
            .dominators(NodeIndex::new(b))
            .is_some_and(|mut up| up.any(|d| d.index() == a))
    };
    // Chains in the dominator tree, in topological order so that a node's immediate
    // dominator has its class first.
    let mut node_class = vec![None; n + 1];
    for &v in &order {
        let joined = dominators
            .immediate_dominator(NodeIndex::new(v))
            .map(|d| d.index())
            .filter(|&d| post_dominates(v, d))
            .and_then(|d| node_class[d]);
        node_class[v] = Some(joined.unwrap_or_else(|| {
            classes.in_loop.push(level.is_some());
            classes.in_loop.len() - 1
        }));
    }
    for b in (0..n).filter(|&b| inside(b) && loop_under(forest, level, b).is_none()) {
        // Only walks that end at the exit count: a block that cannot reach the sink (an
        // endless loop's) has no post-dominators and stays alone.
        if post_dominators.dominators(NodeIndex::new(b)).is_some() {
            classes.of_block[b] = node_class[b];
        }
    }
}

/// The nodes reachable from `source` in topological order, or `None` if they hold a cycle.
fn topological_order(
    count: usize,
    edges: &[(usize, usize)],
    in_degree: &[usize],
    source: usize,
) -> Option<Vec<usize>> {
    let mut reachable = vec![false; count];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); count];
    for &(u, v) in edges {
        out[u].push(v);
    }
    let mut stack = vec![source];
    reachable[source] = true;
    while let Some(u) = stack.pop() {
        for &v in &out[u] {
            if !reachable[v] {
                reachable[v] = true;
                stack.push(v);
            }
        }
    }
    // In-degrees counting reachable predecessors only.
    let mut degree = vec![0usize; count];
    for &(u, v) in edges {
        if reachable[u] {
            degree[v] += 1;
        }
    }
    debug_assert!(degree.iter().zip(in_degree).all(|(d, i)| d <= i));
    let mut ready = vec![source];
    let mut order = Vec::new();
    while let Some(u) = ready.pop() {
        order.push(u);
        for &v in &out[u] {
            degree[v] -= 1;
            if degree[v] == 0 {
                ready.push(v);
            }
        }
    }
    let expected = reachable.iter().filter(|&&r| r).count();
    (order.len() == expected).then_some(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Classes as lists of blocks, for readable assertions.
    fn groups(classes: &[Option<usize>]) -> Vec<Vec<usize>> {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut seen: Vec<usize> = Vec::new();
        for (b, class) in classes.iter().enumerate() {
            if let Some(c) = class {
                match seen.iter().position(|s| s == c) {
                    Some(i) => groups[i].push(b),
                    None => {
                        seen.push(*c);
                        groups.push(vec![b]);
                    }
                }
            }
        }
        groups
    }

    #[test]
    fn a_diamond_joins_its_head_and_tail_not_its_arms() {
        // 0 -> 1 | 2 -> 3 (exit)
        let g = vec![vec![1, 2], vec![3], vec![3], vec![]];
        assert_eq!(
            groups(&execution_classes(&g, 0, 3).of_block),
            [vec![0, 3], vec![1], vec![2]]
        );
    }

    #[test]
    fn a_loop_body_and_a_helper_inlined_in_it_share_a_class_apart_from_the_loop() {
        // 0 -> 1 (header) -> 2 (helper) -> 3 (latch) -> 1 | 4 (exit)
        let g = vec![vec![1], vec![2], vec![3], vec![1, 4], vec![]];
        let classes = execution_classes(&g, 0, 4);
        assert_eq!(groups(&classes.of_block), [vec![0, 4], vec![1, 2, 3]]);
        let in_loop = |b: usize| classes.in_loop[classes.of_block[b].unwrap()];
        assert!(!in_loop(0) && in_loop(2));
    }

    #[test]
    fn a_continue_before_the_tail_splits_the_body() {
        // for (;;) { 1; if (c) continue (2 -> 1); 3; if (d) break } : 1 runs more than 3.
        let g = vec![vec![1], vec![2], vec![1, 3], vec![1, 4], vec![]];
        let classes = execution_classes(&g, 0, 4).of_block;
        assert_ne!(classes[1], classes[3]);
        assert_eq!(classes[1], classes[2]);
    }

    #[test]
    fn an_inner_loop_is_one_node_of_its_parent() {
        // 0 -> 1 (outer header) -> 2 (inner header) -> 3 -> 2 | 4 -> 1 | 5 (exit)
        let g = vec![vec![1], vec![2], vec![3], vec![2, 4], vec![1, 5], vec![]];
        let classes = execution_classes(&g, 0, 5).of_block;
        assert_eq!(classes[1], classes[4]);
        assert_eq!(classes[2], classes[3]);
        assert_ne!(classes[1], classes[2]);
        assert_eq!(classes[0], classes[5]);
    }

    #[test]
    fn an_irreducible_cycle_leaves_its_level_without_classes() {
        // 0 -> 1 | 2, 1 <-> 2, both -> 3 (exit)
        let g = vec![vec![1, 2], vec![2, 3], vec![1, 3], vec![]];
        assert!(execution_classes(&g, 0, 3)
            .of_block
            .iter()
            .all(Option::is_none));
    }

    /// A random graph of `n` blocks where block `n - 1` is the exit (no successors).
    fn graphs() -> impl Strategy<Value = Vec<Vec<usize>>> {
        (3usize..9).prop_flat_map(|n| {
            proptest::collection::vec(proptest::collection::vec(0..n, 1..3), n).prop_map(
                move |mut g| {
                    g[n - 1].clear();
                    g
                },
            )
        })
    }

    proptest! {
        /// Every walk from the entry that reaches the exit runs the blocks of a class
        /// equally often.
        #[test]
        fn blocks_of_a_class_run_equally_often(
            g in graphs(),
            choices in proptest::collection::vec(0usize..4, 1..200),
        ) {
            let exit = g.len() - 1;
            let classes = execution_classes(&g, 0, exit).of_block;
            let mut counts = vec![0usize; g.len()];
            let mut at = 0;
            counts[0] = 1;
            for &choice in &choices {
                if at == exit {
                    break;
                }
                at = g[at][choice % g[at].len()];
                counts[at] += 1;
            }
            prop_assume!(at == exit);
            for a in 0..g.len() {
                for b in 0..g.len() {
                    if classes[a].is_some() && classes[a] == classes[b] {
                        prop_assert_eq!(counts[a], counts[b], "{:?} {:?}", g, classes);
                    }
                }
            }
        }
    }
}
