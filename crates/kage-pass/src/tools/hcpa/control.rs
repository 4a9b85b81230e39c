//! Control dependence for hierarchical critical path analysis (docs/hcpa.md, "Time",
//! source 3): each block's *controller*, the nearest block that strictly dominates it and
//! whose terminator decides whether it runs. Pure: works on successor lists.
//!
//! Block B is control dependent on A when A has a successor S with B post-dominating S
//! but not strictly post-dominating A (Ferrante, Ottenstein and Warren). Of the blocks B
//! depends on, only a strict dominator is sure to have decided *this* arrival at B (it ran
//! before B on every path); the deepest one in the dominator tree is the nearest. A block
//! is never its own controller: a loop's test does not serialise the loop's iterations,
//! any more than its induction variable does.

use petgraph::algo::dominators::{simple_fast, Dominators};
use petgraph::graph::{DiGraph, NodeIndex};

/// Each block's controller (`None`: nothing decides whether it runs, or it is unreachable).
pub fn controllers(successors: &[Vec<usize>], entry: usize) -> Vec<Option<usize>> {
    let n = successors.len();
    if entry >= n {
        return vec![None; n];
    }
    let edges = || {
        (successors.iter().enumerate())
            .flat_map(|(from, succs)| succs.iter().map(move |&to| (from, to)))
            .filter(move |&(_, to)| to < n)
    };
    // Dominators from the entry.
    let mut forward: DiGraph<(), ()> = DiGraph::with_capacity(n, 0);
    for _ in 0..n {
        forward.add_node(());
    }
    for (from, to) in edges() {
        forward.add_edge(NodeIndex::new(from), NodeIndex::new(to), ());
    }
    let doms = simple_fast(&forward, NodeIndex::new(entry));
    // Post-dominators: dominators of the reversed graph from a virtual exit that every
    // block without successors leads to. Blocks that never reach an exit (an endless
    // loop) have none, and depend on nothing.
    let exit = n;
    let mut reverse: DiGraph<(), ()> = DiGraph::with_capacity(n + 1, 0);
    for _ in 0..=n {
        reverse.add_node(());
    }
    for (from, to) in edges() {
        reverse.add_edge(NodeIndex::new(to), NodeIndex::new(from), ());
    }
    for (b, succs) in successors.iter().enumerate() {
        if succs.iter().all(|&s| s >= n) {
            reverse.add_edge(NodeIndex::new(exit), NodeIndex::new(b), ());
        }
    }
    let post = simple_fast(&reverse, NodeIndex::new(exit));
    let ipdom = |b: usize| {
        post.immediate_dominator(NodeIndex::new(b))
            .map(|x| x.index())
    };
    let reachable = |b: usize| b == entry || doms.immediate_dominator(NodeIndex::new(b)).is_some();

    // dependences[b]: the blocks b is control dependent on.
    let mut dependences: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (a, succs) in successors.iter().enumerate() {
        if !reachable(a) || post_root_unreached(&post, a, exit) {
            continue;
        }
        let stop = ipdom(a);
        for &s in succs.iter().filter(|&&s| s < n) {
            let mut runner = Some(s);
            while let Some(r) = runner {
                if Some(r) == stop || r == exit || post_root_unreached(&post, r, exit) {
                    break;
                }
                if !dependences[r].contains(&a) {
                    dependences[r].push(a);
                }
                runner = ipdom(r);
            }
        }
    }
    let depth = |b: usize| dom_depth(&doms, b);
    (0..n)
        .map(|b| {
            if !reachable(b) {
                return None;
            }
            (dependences[b].iter().copied())
                .filter(|&a| a != b && strictly_dominates(&doms, a, b))
                .max_by_key(|&a| depth(a))
        })
        .collect()
}

/// Whether `b` is outside the post-dominator tree (it never reaches an exit).
fn post_root_unreached(post: &Dominators<NodeIndex>, b: usize, exit: usize) -> bool {
    b != exit && post.immediate_dominator(NodeIndex::new(b)).is_none()
}

fn strictly_dominates(doms: &Dominators<NodeIndex>, a: usize, b: usize) -> bool {
    a != b
        && doms
            .strict_dominators(NodeIndex::new(b))
            .is_some_and(|mut it| it.any(|d| d.index() == a))
}

fn dom_depth(doms: &Dominators<NodeIndex>, b: usize) -> usize {
    doms.strict_dominators(NodeIndex::new(b))
        .map_or(0, |it| it.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_then_else_and_join() {
        // 0: if → 1 (then) | 2 (else); both → 3 (join).
        let succ = vec![vec![1, 2], vec![3], vec![3], vec![]];
        assert_eq!(controllers(&succ, 0), vec![None, Some(0), Some(0), None]);
    }

    #[test]
    fn a_loop_does_not_control_itself() {
        // 0 → 1 (header: test) → 2 (body) → 1; 1 → 3 (exit).
        let succ = vec![vec![1], vec![2, 3], vec![1], vec![]];
        assert_eq!(controllers(&succ, 0), vec![None, None, Some(1), None]);
        // Rotated (do-while): 0 → 1 (body and test) → 1 | 2.
        let succ = vec![vec![1], vec![1, 2], vec![]];
        assert_eq!(controllers(&succ, 0), vec![None, None, None]);
    }

    #[test]
    fn nested_conditions_take_the_nearest() {
        // 0: if → 1 | 4; 1: if → 2 | 3; 2, 3 → 4; 4 exit.
        let succ = vec![vec![1, 4], vec![2, 3], vec![3], vec![4], vec![]];
        let c = controllers(&succ, 0);
        assert_eq!(c[1], Some(0));
        assert_eq!(c[2], Some(1));
        // 3 runs when 1 ran (either way): controlled by 0, not by 1.
        assert_eq!(c[3], Some(0));
        assert_eq!(c[4], None);
    }

    #[test]
    fn an_if_inside_a_loop_body() {
        // 0 → 1 (header) → 2 (body: if) → 3 (then) → 4 (latch) → 1; 2 → 4; 1 → 5 (exit).
        let succ = vec![vec![1], vec![2, 5], vec![3, 4], vec![4], vec![1], vec![]];
        let c = controllers(&succ, 0);
        assert_eq!(c, vec![None, None, Some(1), Some(2), Some(1), None]);
    }

    #[test]
    fn endless_loops_and_unreachable_blocks() {
        // 0: if → 1 (endless self loop) | 2 (exit); 3 unreachable.
        let succ = vec![vec![1, 2], vec![1], vec![], vec![2]];
        let c = controllers(&succ, 0);
        assert_eq!(c[3], None);
        assert_eq!(c[2], None);
    }
}
