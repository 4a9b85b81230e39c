//! A function's region tree as the source wrote it, recovered from optimised code: its
//! natural loops and the calls the optimiser inlined into it. Pure Rust over block indices
//! and the inline chains of the blocks' debug locations; no LLVM.
//!
//! An instruction's debug location names the inlined calls it came through, outermost
//! first (its *chain* of call sites; empty for the function's own code). Each block takes
//! the chain most of its located accesses and calls have, or when it makes none, most of
//! its located instructions ([`block_chains`], given those locations by `plan.rs`; blocks
//! without any location inherit from their predecessors): an inlined callee's arithmetic
//! scheduled beside its caller's load does not take the load. Loops are the CFG's natural loops; a loop's
//! *context* is the inlined calls the whole loop lies in (a loop of an inlined function has
//! that call in its context): the chain of its back edges' branches, which the loop's own
//! statement makes, or when they have no location, the longest chain prefix all of its
//! blocks share; always extending its enclosing loop's context. (Not the blocks' majority:
//! a loop whose small body is mostly an inlined callee's code is still its caller's loop.)
//!
//! The tree: the function, under it loops (under each loop its body) and inlined calls,
//! nested as follows. A loop hangs under the body of its enclosing loop (or the function),
//! below the inlined calls of its context that the enclosing loop's context does not have.
//! A block's innermost region is the body of its innermost loop (or the function), below
//! the inlined calls of its chain beyond that loop's context. An inlined call is thus one
//! node per place it occurs: inside a loop and before it (code the optimiser hoisted) it
//! is two nodes of the same call site, which views can join as one source region.
//!
//! Every block's path from the root lists exactly the regions open while it runs, which is
//! what the region hooks need: the set of regions changes only at edges between blocks
//! with different innermost regions, and a loop's blocks all lie under its body.

use std::collections::HashMap;

use crate::loops::LoopForest;

/// An inlined call site of the function (an index into the caller's table of sites).
pub type Site = u32;

/// Where one instruction's code comes from: the inlined calls it came through (outermost
/// first) and its line at every level: `lines[0]` in the function's own source (the
/// outermost call's line), `lines[k]` in the callee of `sites[k - 1]`; `column` is its
/// column in the innermost of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub sites: Vec<Site>,
    /// `sites.len() + 1` lines (0 = unknown).
    pub lines: Vec<u32>,
    /// 0 = unknown.
    pub column: u32,
}

/// Where in an inlined call's code an instruction is: its lines inside the call and its
/// column. Two copies of a call (an unrolled loop's) hold the same places; two pieces of one
/// call hold different ones, also where the callee is written on one line.
type Place<'a> = (&'a [u32], u32);

/// `location`'s [`Place`] in the code of the call `depth` sites in; none where its line
/// there is unknown (0: code the optimiser merged from several places, which tells no copy
/// from a piece).
fn place(location: &Location, depth: usize) -> Option<Place<'_>> {
    let lines = &location.lines[depth..];
    (lines.last() != Some(&0)).then_some((lines, location.column))
}

/// What a region of the tree is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Function,
    /// Loop `k` of the forest.
    Loop(usize),
    /// The body (one iteration) of loop `k`.
    LoopBody(usize),
    /// An inlined call.
    Inlined(Site),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    /// Its parent's index; `None` for the function.
    pub parent: Option<usize>,
    /// The chain of inlined calls it lies in, itself included for an inlined call: the
    /// level its lines are read at is this chain's length.
    pub context: Vec<Site>,
}

/// The tree in pre-order (every node after its parent, a loop right before its body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionTree {
    pub nodes: Vec<Node>,
    /// Each block's innermost region.
    pub block_region: Vec<usize>,
    /// Each loop's node; its body is the next one.
    pub loop_node: Vec<usize>,
}

impl RegionTree {
    /// How many children each node has.
    pub fn child_counts(&self) -> Vec<usize> {
        let mut counts = vec![0usize; self.nodes.len()];
        for parent in self.nodes.iter().filter_map(|node| node.parent) {
            counts[parent] += 1;
        }
        counts
    }

    /// Whether `inner` is `outer` or lies inside it: control going from a block of `inner`
    /// to a block of `outer` enters no new region instance.
    pub fn encloses(&self, outer: usize, inner: usize) -> bool {
        let mut at = Some(inner);
        while let Some(node) = at {
            if node == outer {
                return true;
            }
            at = self.nodes[node].parent;
        }
        false
    }
}

/// The chain of inlined calls each block's code comes from: the one most of its located
/// instructions have (the first of equally common ones); a block without any located
/// instruction takes the longest prefix its already visited predecessors share, in reverse
/// post-order, and the function's own level when none was visited. `locations[b]` are the
/// locations of block `b`'s instructions.
pub fn block_chains(successors: &[Vec<usize>], locations: &[Vec<Location>]) -> Vec<Vec<Site>> {
    let n = successors.len();
    let mut chains: Vec<Option<Vec<Site>>> = (0..n)
        .map(|b| majority(locations.get(b).map(Vec::as_slice).unwrap_or(&[])))
        .collect();
    let predecessors = crate::loops::predecessors(successors);
    for b in reverse_post_order(successors) {
        if chains[b].is_some() {
            continue;
        }
        let mut known = predecessors[b].iter().filter_map(|&p| chains[p].as_deref());
        let inherited = known.next().map(|first| {
            let mut prefix = first.to_vec();
            for other in known {
                prefix.truncate(common_prefix(&prefix, other));
            }
            prefix
        });
        chains[b] = Some(inherited.unwrap_or_default());
    }
    chains.into_iter().map(Option::unwrap_or_default).collect()
}

/// The chain most of `locations` have, if any.
fn majority(locations: &[Location]) -> Option<Vec<Site>> {
    let mut counts: Vec<(&[Site], usize)> = Vec::new();
    for location in locations {
        match counts
            .iter_mut()
            .find(|(c, _)| *c == location.sites.as_slice())
        {
            Some((_, n)) => *n += 1,
            None => counts.push((&location.sites, 1)),
        }
    }
    let best = counts.iter().map(|&(_, n)| n).max()?;
    counts
        .into_iter()
        .find(|&(_, n)| n == best)
        .map(|(c, _)| c.to_vec())
}

/// The chain of each loop's back edges: the longest prefix the chains of the branches that
/// go back to its header share (`terminators[b]`: block `b`'s branch's chain, if it has a
/// location); `None` when none of them has one.
pub fn back_edge_chains(
    forest: &LoopForest,
    successors: &[Vec<usize>],
    terminators: &[Option<Vec<Site>>],
) -> Vec<Option<Vec<Site>>> {
    (forest.loops.iter())
        .map(|lp| {
            let mut chains = (lp.blocks.iter())
                .filter(|&&b| successors.get(b).is_some_and(|s| s.contains(&lp.header)))
                .filter_map(|&b| terminators.get(b)?.as_deref());
            let mut common = chains.next()?.to_vec();
            for chain in chains {
                common.truncate(common_prefix(&common, chain));
            }
            Some(common)
        })
        .collect()
}

/// Makes each loop's back-edge chain the chain of inlined calls its `llvm.loop` metadata
/// says it is written in: `declared[k]`, each call's line and column (`call(site)` gives a
/// site's), outermost first; empty for a loop of the function's own source. The optimiser
/// often gives a loop's branches the location of code inlined into its body (the latch of
/// `while (!ready) wait(&c);` is the inlined `wait`'s last line), which would make the
/// caller's loop a loop of the callee. The chain is the first of the loop's code's (its back
/// edges', then its blocks' instructions', `locations[b]`, in order) whose first calls are
/// the declared ones, cut after them; a loop whose metadata names calls none of its code
/// is in (or that has none) keeps its back edges' chain. Whether each loop was placed so.
pub fn declared_back_edges(
    forest: &LoopForest,
    locations: &[Vec<Location>],
    back_edges: &mut [Option<Vec<Site>>],
    declared: &[Option<Vec<(u32, u32)>>],
    call: impl Fn(Site) -> (u32, u32),
) -> Vec<bool> {
    let mut placed = vec![false; forest.loops.len()];
    for (k, lp) in forest.loops.iter().enumerate() {
        let Some(calls) = declared.get(k).and_then(Option::as_ref) else {
            continue;
        };
        let written_in = |chain: &[Site]| {
            chain.len() >= calls.len()
                && (chain.iter().zip(calls)).all(|(&site, &line_column)| call(site) == line_column)
        };
        let own = back_edges.get(k).cloned().flatten();
        let code = (lp.blocks.iter())
            .filter_map(|&b| locations.get(b))
            .flatten()
            .map(|l| l.sites.as_slice());
        let found = own
            .as_deref()
            .into_iter()
            .chain(code)
            .find(|c| written_in(c));
        if let (Some(chain), Some(slot)) = (found, back_edges.get_mut(k)) {
            *slot = Some(chain[..calls.len()].to_vec());
            placed[k] = true;
        }
    }
    placed
}

/// The least share of a loop's code (by instructions) that a loop as written must hold to
/// be the one it came from: the rest may be code the optimiser moved in from around it.
pub const WRITTEN_LOOP_SHARE: f64 = 0.75;

/// Whether the loop as written at lines `first..=last` holds at least [`WRITTEN_LOOP_SHARE`]
/// of a loop's code, `code` the line of each of its instructions ([`code_lines`]): the
/// share is of instructions, so that a line or two of code the optimiser moved in from
/// around the loop (an address computed before it) weigh what their instructions do.
pub fn holds_most_of(first: u32, last: u32, code: &[u32]) -> bool {
    let held = code
        .iter()
        .filter(|&&l| (first..=last).contains(&l))
        .count();
    held > 0 && held as f64 >= WRITTEN_LOOP_SHARE * code.len() as f64
}

/// The line of each instruction of `blocks` (with a line) whose code is at the level of
/// `context` or deeper, at that level (the line of the call for deeper code).
pub fn code_lines(blocks: &[usize], locations: &[Vec<Location>], context: &[Site]) -> Vec<u32> {
    (blocks.iter())
        .filter_map(|&b| locations.get(b))
        .flatten()
        .filter(|l| l.sites.starts_with(context))
        .map(|l| l.lines.get(context.len()).copied().unwrap_or(0))
        .filter(|&line| line != 0)
        .collect()
}

/// Moves a loop that its metadata did not place ([`declared_back_edges`]; `placed[k]`) out of
/// an inlined call none of whose loops as written holds most of its code (at the call's
/// level, [`holds_most_of`]; a function without loops as written holds none): when its
/// back-edge chain ends in such a call (the optimiser gave the branch back the location of
/// a callee's last code: `while (skip(&s, ';')) {}`, a body that ends in an inlined call
/// returning early; or of a callee's first code it reloads for the next iteration:
/// `while (step(v) == RETRY) {...}`, even where `step` has a loop of its own), the loop
/// is a caller's: the deepest call of the chain (or the function itself) with a loop
/// as written that holds some of the loop's code lines at its level (not necessarily most:
/// code the optimiser moved into the loop from before it counts at that level too).
/// `loops_of(site)` gives the loops as written (first and last lines) of the callee of
/// `site` (`None`: of the function itself); `None` when the early pass recorded nothing of
/// that function (a loop stays where it is unless its function is known to have none).
pub fn written_back_edges<'a>(
    forest: &LoopForest,
    locations: &[Vec<Location>],
    back_edges: &mut [Option<Vec<Site>>],
    placed: &[bool],
    loops_of: impl Fn(Option<Site>) -> Option<&'a [(u32, u32)]>,
) {
    for (k, lp) in forest.loops.iter().enumerate() {
        if placed.get(k).copied().unwrap_or(false) {
            continue;
        }
        let Some(Some(chain)) = back_edges.get(k) else {
            continue;
        };
        let Some(&innermost) = chain.last() else {
            continue;
        };
        // The callee's loops as written: one that holds most of the loop's code at its
        // level makes the loop its.
        let Some(callee_loops) = loops_of(Some(innermost)) else {
            continue;
        };
        let code = code_lines(&lp.blocks, locations, chain);
        if (callee_loops.iter()).any(|&(first, last)| holds_most_of(first, last, &code)) {
            continue;
        }
        let outer = (0..chain.len()).rev().find(|&depth| {
            let owner = depth.checked_sub(1).map(|d| chain[d]);
            let code = code_lines(&lp.blocks, locations, &chain[..depth]);
            (loops_of(owner).unwrap_or_default().iter())
                .any(|&(first, last)| code.iter().any(|l| (first..=last).contains(l)))
        });
        if let Some(depth) = outer {
            let cut = chain[..depth].to_vec();
            back_edges[k] = Some(cut);
        }
    }
}

pub(crate) fn common_prefix(a: &[Site], b: &[Site]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The blocks in reverse post-order, and which edges go forward in it: within one
/// iteration of every loop around them (a back edge goes to a block met before).
struct ForwardEdges {
    order: Vec<usize>,
    position: Vec<usize>,
}

impl ForwardEdges {
    fn new(successors: &[Vec<usize>]) -> Self {
        let order = reverse_post_order(successors);
        let mut position = vec![usize::MAX; successors.len()];
        for (i, &b) in order.iter().enumerate() {
            position[b] = i;
        }
        ForwardEdges { order, position }
    }

    /// Whether the edge `from -> to` is forward (`to` a block of the function).
    fn forward(&self, from: usize, to: usize) -> bool {
        to < self.position.len() && self.position[to] > self.position[from]
    }
}

/// Blocks reachable from block 0, in reverse post-order.
pub(crate) fn reverse_post_order(successors: &[Vec<usize>]) -> Vec<usize> {
    let n = successors.len();
    if n == 0 {
        return Vec::new();
    }
    let mut visited = vec![false; n];
    let mut order = Vec::with_capacity(n);
    // (block, next successor to look at)
    let mut stack = vec![(0usize, 0usize)];
    visited[0] = true;
    while let Some((b, i)) = stack.last_mut() {
        let b = *b;
        match successors[b].get(*i) {
            Some(&s) => {
                *i += 1;
                if s < n && !visited[s] {
                    visited[s] = true;
                    stack.push((s, 0));
                }
            }
            None => {
                order.push(b);
                stack.pop();
            }
        }
    }
    order.reverse();
    order
}

/// Leaves out the inlined calls whose code makes no memory access and no call and holds no
/// loop (arithmetic the optimiser merged into the caller: there is nothing in them for a
/// tool to measure, and entering and leaving them would cost an event each time they run):
/// cuts every chain (and loop back edges' chain) at the first such call. `measured[b]` says
/// whether block `b` makes a memory access or a call; a call counts as measured when any
/// block whose chain holds it is, or a loop's back edges are its code (the loop is a region
/// of its own, named and placed in the callee: left out, the call would make it a loop of
/// the caller at the line of the call).
pub fn drop_unmeasured_calls(
    chains: &mut [Vec<Site>],
    back_edges: &mut [Option<Vec<Site>>],
    measured: &[bool],
) {
    let mut useful: HashMap<Site, bool> = HashMap::new();
    for (b, chain) in chains.iter().enumerate() {
        let here = measured.get(b).copied().unwrap_or(false);
        for &site in chain {
            *useful.entry(site).or_insert(false) |= here;
        }
    }
    for chain in back_edges.iter().flatten() {
        for &site in chain {
            useful.insert(site, true);
        }
    }
    let cut = |chain: &mut Vec<Site>| {
        if let Some(i) = chain
            .iter()
            .position(|s| !useful.get(s).copied().unwrap_or(false))
        {
            chain.truncate(i);
        }
    };
    chains.iter_mut().for_each(cut);
    back_edges.iter_mut().flatten().for_each(cut);
}

/// Gives the caller the pieces of an inlined call that make no memory access and no call:
/// blocks of the call's code (`chains`) that are connected to each other but not to the
/// call's measured blocks (`measured`, as for [`drop_unmeasured_calls`]), such as the
/// address arithmetic of a call in a loop that LICM hoisted into the function's entry
/// block (bzip2's `isempty_RL`, at -O3, where argument promotion made the address
/// invariant). As a region such a piece would count an instance more each time it runs,
/// with nothing in it to measure. A piece that holds the header of a loop whose back edges
/// are the call's code stays (the loop is the call's).
pub fn drop_unmeasured_call_pieces(
    forest: &LoopForest,
    chains: &mut [Vec<Site>],
    back_edges: &[Option<Vec<Site>>],
    successors: &[Vec<usize>],
    measured: &[bool],
) {
    let predecessors = crate::loops::predecessors(successors);
    let sites: std::collections::BTreeSet<Site> = chains.iter().flatten().copied().collect();
    let mut cut_at: Vec<Option<usize>> = vec![None; chains.len()];
    for site in sites {
        let blocks: Vec<usize> = (0..chains.len())
            .filter(|&b| chains[b].contains(&site))
            .collect();
        let depth = chains[blocks[0]]
            .iter()
            .position(|&s| s == site)
            .expect("the site is in the chain");
        // Every edge between the call's blocks joins them.
        for piece in connected_pieces(&blocks, &predecessors, successors, |_, _| true) {
            let loop_of_the_call = (forest.loops.iter().zip(back_edges)).any(|(lp, edges)| {
                piece.contains(&lp.header) && edges.as_ref().is_some_and(|c| c.contains(&site))
            });
            if loop_of_the_call
                || piece
                    .iter()
                    .any(|&b| measured.get(b).copied().unwrap_or(false))
            {
                continue;
            }
            for b in piece {
                cut_at[b] = Some(cut_at[b].map_or(depth, |d| d.min(depth)));
            }
        }
    }
    for (chain, cut) in chains.iter_mut().zip(cut_at) {
        if let Some(depth) = cut {
            chain.truncate(depth);
        }
    }
}

/// Folds into their caller the pieces of an inlined call that the optimiser moved out of a
/// loop of the caller's around the call (LICM: a load hoisted into the preheader, a store
/// sunk past the exit): run once per run of the loop, as a region of their own they would
/// count one instance more each time. The loops looked at are the caller's own (in the code
/// that makes the call `c`, not further out: the calls around `c` are looked at first) that
/// hold code of `c` and lie inside the innermost loop around a piece of `c`'s other code
/// (any loop, for a piece in none); see the function's body for which pieces count as
/// moved. Where the optimiser copied code rather than moved it (a rotated loop's condition,
/// evaluated once before the loop and again at its end; an unrolled loop's first
/// iterations before it), the copy is a call of its own. Blocks in a loop of `c`'s own
/// stay. A call the optimiser merged from several (`stands_for(merged, other)`: `other`
/// is one of the calls of the same function beside it) is looked at with their code in the
/// loops. `deciding[b]` are block `b`'s locations, `dead_ends[b]` whether it ends in
/// `unreachable`, `only_loads[b]` whether the accesses and calls it makes are all loads (one
/// at least); `forest` must be the one the regions are
/// built on (the loops the optimiser cut out of a source loop joined into it: a call's
/// code in the path of a `continue` is not moved code). Returns whether it folded any.
pub fn fold_moved_call_pieces(
    forest: &LoopForest,
    successors: &[Vec<usize>],
    (dead_ends, only_loads): (&[bool], &[bool]),
    chains: &mut [Vec<Site>],
    back_edges: &[Option<Vec<Site>>],
    deciding: &[Vec<Location>],
    stands_for: impl Fn(Site, Site) -> bool,
) -> bool {
    let predecessors = crate::loops::predecessors(successors);
    let contexts = loop_contexts(forest, chains, back_edges);
    let mut folded = false;
    let mut calls: Vec<Vec<Site>> = Vec::new();
    for chain in chains.iter() {
        for depth in 1..=chain.len() {
            if !calls.iter().any(|c| c[..] == chain[..depth]) {
                calls.push(chain[..depth].to_vec());
            }
        }
    }
    // Outer calls first: folding one folds what it holds.
    calls.sort_by_key(Vec::len);
    let strictly_inside = |inner: Option<usize>, outer: Option<usize>| {
        let mut up = match inner {
            Some(k) => forest.loops[k].parent,
            None => return false,
        };
        loop {
            if up == outer {
                return true;
            }
            match up {
                Some(k) => up = forest.loops[k].parent,
                None => return false,
            }
        }
    };
    for call in calls {
        // Each block of the call, and of the calls it stands for (`stands_for`: a merged
        // call, for the calls of the same function beside it), with its innermost loop around
        // the call (in the code of the caller or further out; None: in no loop); blocks in a
        // loop of the call's own are left out: they stay. Loops of other calls beside it
        // are passed over.
        let caller = &call[..call.len() - 1];
        let last = call[call.len() - 1];
        let back = |k: usize| contexts.get(k);
        // (block, loop, the block is the call's own code)
        let mut blocks: Vec<(usize, Option<usize>, bool)> = Vec::new();
        'blocks: for (b, chain) in chains.iter().enumerate() {
            if chain.len() < call.len()
                || !chain.starts_with(caller)
                || !(chain[caller.len()] == last || stands_for(last, chain[caller.len()]))
            {
                continue;
            }
            let own_call = &chain[..call.len()];
            let mut at = forest.innermost.get(b).copied().flatten();
            while let Some(k) = at {
                match back(k) {
                    Some(chain) if chain.starts_with(own_call) => continue 'blocks,
                    Some(chain) if caller.starts_with(chain) => break,
                    _ => at = forest.loops[k].parent,
                }
            }
            blocks.push((b, at, chain.starts_with(&call)));
        }
        // Code is moved out of the caller's own loops only (the calls around the call are
        // looked at first): the call's blocks in one of them inside `own`.
        let in_callers_loop = |lp: Option<usize>, own: Option<usize>| {
            lp.is_some_and(|k| back(k).is_some_and(|chain| chain[..] == *caller))
                && strictly_inside(lp, own)
        };
        // Where in the callee each of a block's instructions is.
        let places = |b: usize| -> Vec<Place> {
            (deciding.get(b).map(Vec::as_slice).unwrap_or(&[]).iter())
                .filter(|l| l.sites.len() >= call.len() && l.sites.starts_with(caller))
                .filter(|l| {
                    let site = l.sites[caller.len()];
                    site == last || stands_for(last, site)
                })
                .filter_map(|l| place(l, call.len()))
                .collect()
        };
        let mut owns: Vec<Option<usize>> = (blocks.iter())
            .filter(|&&(_, _, exact)| exact)
            .map(|&(_, own, _)| own)
            .collect();
        owns.sort_unstable();
        owns.dedup();
        let mut pieces = Vec::new();
        for own in owns {
            let there: Vec<Place> = (blocks.iter())
                .filter(|&&(_, lp, _)| in_callers_loop(lp, own))
                .flat_map(|&(o, _, _)| places(o))
                .collect();
            if !blocks.iter().any(|&(_, lp, _)| in_callers_loop(lp, own)) {
                continue;
            }
            // The loops inside `own` whose code holds the call's: a block goes into them or
            // comes from them when it is in one.
            let mut holding: Vec<usize> = Vec::new();
            for &(_, lp, _) in blocks
                .iter()
                .filter(|&&(_, lp, _)| in_callers_loop(lp, own))
            {
                let mut up = lp;
                while let Some(k) = up.filter(|_| up != own) {
                    if !holding.contains(&k) {
                        holding.push(k);
                    }
                    up = forest.loops[k].parent;
                }
            }
            let only_inside = |blocks: &[usize]| {
                !blocks.is_empty()
                    && (blocks.iter()).all(|&o| holding.iter().any(|&k| forest.contains(k, o)))
            };
            // The call's code outside those loops, in pieces of connected blocks. A piece
            // entered only from the loops (a loop's exit: stores sunk out of it, or the rest
            // of a call that left the loop) is moved code, as is one that goes only into them
            // but not into the call's code there and is part of the call's code there (a
            // preheader), or one at places the code in the loops is not at and with no edge
            // to or from it. A piece that goes on into
            // the call's code in the loops and elsewhere is the start of a call (its test
            // before a rotated loop), one entered from it and from elsewhere a part of calls
            // (a path to an error).
            let outside: Vec<usize> = (blocks.iter())
                .filter(|&&(_, lp, exact)| exact && lp == own)
                .map(|&(b, _, _)| b)
                .collect();
            let in_loops =
                |o: usize| (blocks.iter()).any(|&(b, lp, _)| b == o && strictly_inside(lp, own));
            // Which side of the loops each such block is on: before them (it reaches them
            // through the call's code outside), after them (reached from them so), both or
            // neither. Pieces join blocks of one side only: the call's test before a rotated
            // loop goes straight past it to the stores sunk after it when the loop does not
            // run, and they are a call and a moved piece.
            let in_holding = |o: usize| holding.iter().any(|&k| forest.contains(k, o));
            let mut before = vec![false; outside.len()];
            let mut after = vec![false; outside.len()];
            let index = |o: usize| outside.iter().position(|&x| x == o);
            let mut changed = true;
            while changed {
                changed = false;
                for (i, &b) in outside.iter().enumerate() {
                    let reaches = (successors[b].iter())
                        .any(|&o| in_holding(o) || index(o).is_some_and(|j| before[j]));
                    let reached = (predecessors[b].iter())
                        .any(|&o| in_holding(o) || index(o).is_some_and(|j| after[j]));
                    if reaches && !before[i] || reached && !after[i] {
                        before[i] |= reaches;
                        after[i] |= reached;
                        changed = true;
                    }
                }
            }
            let side = |i: usize| (before[i], after[i]);
            let same_side = |a: usize, o: usize| {
                index(o).is_some_and(|i| index(a).is_some_and(|j| side(i) == side(j)))
            };
            for piece in connected_pieces(&outside, &predecessors, successors, same_side) {
                // Its ways out and in, but to and from the call's code on the other side.
                let exits: Vec<usize> = (piece.iter())
                    .flat_map(|&b| successors[b].iter().copied())
                    .filter(|&o| index(o).is_none())
                    .collect();
                let entries: Vec<usize> = (piece.iter())
                    .flat_map(|&b| predecessors[b].iter().copied())
                    .filter(|&o| index(o).is_none())
                    .collect();
                // A path to an error (ending in `unreachable`) leaves the loop without being
                // moved out of it: it is the call's.
                if piece
                    .iter()
                    .any(|&b| dead_ends.get(b).copied().unwrap_or(false))
                {
                    continue;
                }
                let exits_to_call = exits.iter().any(|&o| in_loops(o));
                let entered_from_call = entries.iter().any(|&o| in_loops(o));
                let at: Vec<Place> = piece.iter().flat_map(|&b| places(b)).collect();
                // Part of the call, not all of it (a rotated loop's test before the loop is
                // the whole call, as at the loop's end).
                let part = there.iter().any(|p| !at.contains(p));
                // A piece whose every way out goes on into the call's code in the loops is a
                // part of the calls there hoisted to the preheader (SQLite's
                // `sqlite3_vfs_register` in a loop: its call of `sqlite3_initialize`, whose
                // first load the optimiser made once before the loop).
                let into_call = only_inside(&exits) && exits.iter().all(|&o| in_loops(o));
                // A rotated loop's test before it, where the call goes on in the loop's
                // header and the calls of later iterations begin in the caller's code at the
                // latch (zstd's `while ((BIT_reloadDStream(d) == ...) & ...)`, its first
                // test made at the end of the iteration before): the header counts a call at
                // every entry, the first one included, so the test before the loop is that
                // call's start. Every way out goes into such a header or past its loop.
                let continued_in_header = exits_to_call
                    && part
                    && forest.loops.iter().enumerate().any(|(k, l)| {
                        let begins_at_latch = (predecessors[l.header].iter())
                            .any(|&p| forest.contains(k, p) && !chains[p].starts_with(&call));
                        let past = |o: usize| {
                            !in_loops(o)
                                && !forest.contains(k, o)
                                && l.blocks.iter().any(|&b| successors[b].contains(&o))
                        };
                        begins_at_latch && exits.iter().all(|&o| o == l.header || past(o))
                    });
                // A test of the call's that loop unswitching (-O3) made once before the loop,
                // where it chooses between two versions of it, and that the version holding
                // the call makes again (SQLite's `sqlite3VdbeSetColName` in a loop: its test
                // of `p->db->mallocFailed`): loads only, at places the call's code in the
                // loops is at and not all of them, and every way out goes into a loop (its
                // header, or a block that goes only there), one of them holding the call.
                let enters_loop = |o: usize| {
                    forest.is_header(o) || matches!(successors[o][..], [s] if forest.is_header(s))
                };
                let unswitched = part
                    && !at.is_empty()
                    && at.iter().all(|p| there.contains(p))
                    && (piece.iter()).all(|&b| only_loads.get(b).copied().unwrap_or(false))
                    && exits.iter().all(|&o| enters_loop(o))
                    && exits.iter().any(|&o| in_holding(o));
                let moved = only_inside(&entries)
                    || (only_inside(&exits) && (!exits_to_call || into_call) && part)
                    || continued_in_header
                    || unswitched
                    || (!exits_to_call
                        && !entered_from_call
                        && at.iter().all(|p| !there.contains(p)));
                if moved {
                    pieces.extend(piece);
                }
            }
        }
        for b in pieces {
            chains[b].truncate(call.len() - 1);
            folded = true;
        }
    }
    folded
}

/// Folds into their caller the code of an inlined call that a loop of the caller's starts
/// its iterations with while the call began in the iteration before (or before the loop):
/// `while (next(p)) { ... }` rotated, `next`'s test at the end of each iteration and the
/// rest of it (its call of a function, taken when the test passed) at the start of the
/// next. The header's part (a header of a loop whose back edges are not the call's, entered
/// only from the call's code) and what follows it of the call, entered only from there,
/// are the caller's: as a region of their own they would count each call twice. So is a
/// latch that goes only to the header and holds code of the call the header begins (the
/// optimiser reloads the call's first operand at the end of the iteration before:
/// `while (step(v) == RETRY) {...}`), or a block of it that runs straight on to such a
/// latch (past the loop's own code: `std::sort`'s `while (comp(val, next))`, the
/// comparator's load of `val` reloaded at the end of each iteration): left the call's, the
/// call would span the back edge and count one instance more per iteration. Returns whether
/// it folded any.
pub fn fold_calls_continued_across_iterations(
    forest: &LoopForest,
    successors: &[Vec<usize>],
    chains: &mut [Vec<Site>],
    back_edges: &[Option<Vec<Site>>],
) -> bool {
    let n = chains.len();
    let predecessors = crate::loops::predecessors(successors);
    let contexts = loop_contexts(forest, chains, back_edges);
    let mut folded = false;
    for (k, lp) in forest.loops.iter().enumerate() {
        let header = lp.header;
        let call = chains[header].clone();
        let back = &contexts[k];
        // The loop is in the code of `back`; the call is the first of the header's chain
        // past it, and every way into the header comes from that call's code.
        if call.len() <= back.len() || !call.starts_with(back) {
            continue;
        }
        let depth = back.len() + 1;
        let outer = call[..depth].to_vec();
        if predecessors[header].is_empty() {
            continue;
        }
        if !(predecessors[header].iter()).all(|&p| chains[p].starts_with(&outer)) {
            // Entered from the caller's code too: only the call's code at the end of an
            // iteration, in the straight run of blocks that ends with a latch going only
            // back to the header (past the loop's own code between them).
            for &latch in &predecessors[header] {
                let only_back = successors[latch].iter().all(|&s| s == header);
                if !only_back || !forest.contains(k, latch) {
                    continue;
                }
                let mut at = latch;
                loop {
                    if chains[at].starts_with(&outer) {
                        chains[at].truncate(depth - 1);
                        folded = true;
                    } else if chains[at] != *back {
                        break;
                    }
                    match predecessors[at][..] {
                        [before]
                            if before != header
                                && successors[before] == [at]
                                && forest.contains(k, before) =>
                        {
                            at = before
                        }
                        _ => break,
                    }
                }
            }
            continue;
        }
        let mut part = vec![header];
        let mut at = 0;
        while at < part.len() {
            for &next in &successors[part[at]] {
                if next < n
                    && !part.contains(&next)
                    && !forest.is_header(next)
                    && chains[next].starts_with(&outer)
                    && predecessors[next].iter().all(|p| part.contains(p))
                {
                    part.push(next);
                }
            }
            at += 1;
        }
        for b in part {
            chains[b].truncate(depth - 1);
        }
        folded = true;
    }
    folded
}

/// Folds into their caller the loads of an inlined call that the optimiser hoisted above
/// code of the caller's: a block where the call's code begins (`chains[b]` the call's, no
/// predecessor in it) that only loads (`only_loads[b]`) and goes on into the caller's own
/// code or another call of the caller's, from which the call's code is reached again in
/// the same iteration (by forward edges: after a back edge it is the next call) from each
/// of its ways out that is not the call's code (one that never comes back is where the
/// block decides the call is over: it is the whole call there). SQLite's `if (nTabList !=
/// 1 || whereShortCut(&sWLB) == 0) rc = whereLoopAddAll(&sWLB);` (`whereLoopAddAll`'s
/// first load made before the test, and so before `whereShortCut`) and
/// `sqlite3PagerBegin(pPager, ..., sqlite3TempInMemory(db))` (its test of
/// `pPager->errCode` made before the argument's call). The source runs a call's code in
/// one piece: as the call's, the block would count a call more each time that path runs.
/// A block that goes on into the call's code nowhere, where the code reached again holds
/// one of its places ([`Place`]), is a whole call and that a copy (an unrolled loop's next call): the
/// block stays. `deciding[b]` are block `b`'s locations. Returns whether it folded any.
pub fn fold_hoisted_call_loads(
    successors: &[Vec<usize>],
    deciding: &[Vec<Location>],
    only_loads: &[bool],
    chains: &mut [Vec<Site>],
) -> bool {
    let n = chains.len();
    // Forward edges only: a call met again after a back edge is the next iteration's.
    let edges = ForwardEdges::new(successors);
    let (order, forward) = (&edges.order, |from, to| edges.forward(from, to));
    let mut folded = false;
    let predecessors = crate::loops::predecessors(successors);
    for b in order.iter().copied() {
        let call = chains[b].clone();
        if call.is_empty() || !only_loads.get(b).copied().unwrap_or(false) {
            continue;
        }
        // Where the call begins: folded, a block inside its code would cut it in two.
        if predecessors[b]
            .iter()
            .any(|&p| chains[p].starts_with(&call))
        {
            continue;
        }
        let caller = &call[..call.len() - 1];
        // On through the caller's code (its own or its other calls'), not through this
        // block, to the call's code again: the blocks of the call reached so from each way
        // out of the block that is not the call's code.
        let again_from = |start: usize| -> Vec<usize> {
            let mut seen = vec![false; n];
            seen[b] = true;
            let mut work = vec![start];
            let mut again = Vec::new();
            while let Some(o) = work.pop() {
                if seen[o] || !chains[o].starts_with(caller) {
                    continue;
                }
                seen[o] = true;
                if chains[o].starts_with(&call) {
                    again.push(o);
                    continue;
                }
                work.extend(successors[o].iter().copied().filter(|&x| forward(o, x)));
            }
            again
        };
        let ways: Vec<Vec<usize>> = (successors[b].iter())
            .filter(|&&o| forward(b, o) && !chains[o].starts_with(&call))
            .map(|&o| again_from(o))
            .collect();
        // A way out of the block that never comes back to the call (`if (!initialised)
        // return;`): the block decides, and is the whole call, on that way.
        if ways.is_empty() || ways.iter().any(Vec::is_empty) {
            continue;
        }
        let again: Vec<usize> = ways.concat();
        // A block that is a whole call on its ways out (none goes on into the call's code)
        // may be the first of two copies; it is one when the code reached again holds its
        // places. One that goes on into the call's code elsewhere is the call's start, the
        // code reached again a start the optimiser copied onto that way.
        let whole = !(successors[b].iter()).any(|&o| o < n && chains[o].starts_with(&call));
        let here = call_places(deciding, b, &call);
        let copy = whole
            && (again.iter()).any(|&o| {
                call_places(deciding, o, &call)
                    .iter()
                    .any(|l| here.contains(l))
            });
        if !copy {
            chains[b].truncate(caller.len());
            folded = true;
        }
    }
    folded
}

/// The places of `call`'s code in block `b` (from the callee's on), by `deciding`.
fn call_places<'a>(deciding: &'a [Vec<Location>], b: usize, call: &[Site]) -> Vec<Place<'a>> {
    (deciding.get(b).map(Vec::as_slice).unwrap_or(&[]).iter())
        .filter(|l| l.sites.starts_with(call))
        .filter_map(|l| place(l, call.len()))
        .collect()
}

/// Folds into their caller the pieces of an inlined call that the optimiser sank past a
/// sibling call (`std::vector<long> v(n, x)`: `_Vector_base`'s store of the end of the
/// storage made after `_M_fill_initialize`'s loop): a block of the call's code reached, by
/// forward edges inside the caller's code, from a block of another call of the caller's
/// that is itself reached so from the call's code. The source runs one call after the
/// other, so within one iteration the call's code cannot come back after its sibling's
/// began: as the call's, the block would count a call more. A copy of the whole call (an
/// unrolled or peeled iteration's, after the sibling's copy) is told apart by its places
/// ([`Place`]): a block holding any place of the call that the earlier code of the call holds too is a
/// copy, and stays; so does the rest of a call whose earlier code only loads (that is
/// what moved: [`fold_hoisted_call_loads`]). `deciding[b]` are block `b`'s locations,
/// `only_loads[b]` whether it makes no access but loads. Returns whether it folded any.
pub fn fold_sunk_call_pieces(
    successors: &[Vec<usize>],
    deciding: &[Vec<Location>],
    only_loads: &[bool],
    chains: &mut [Vec<Site>],
) -> bool {
    let n = chains.len();
    let predecessors = crate::loops::predecessors(successors);
    // Forward edges only: a call met again after a back edge is the next iteration's.
    let edges = ForwardEdges::new(successors);
    let (order, forward) = (&edges.order, |from, to| edges.forward(from, to));
    let mut folded = false;
    for &b in order {
        for depth in 0..chains[b].len() {
            let call = chains[b][..=depth].to_vec();
            let caller = &call[..depth];
            // Where the call ends: folded, a block inside its code would cut it in two.
            if (successors[b].iter()).any(|&o| o < n && chains[o].starts_with(&call)) {
                continue;
            }
            // Back from `b` inside the caller's code: first through anything, then, once past
            // a sibling's code, to the call's code.
            let mut seen = vec![[false; 2]; n];
            let mut work = vec![(b, 0usize)];
            let mut earlier: Vec<usize> = Vec::new();
            while let Some((o, phase)) = work.pop() {
                if seen[o][phase] {
                    continue;
                }
                seen[o][phase] = true;
                let chain = &chains[o];
                let phase = if chain.len() > depth && chain[depth] != call[depth] {
                    1
                } else {
                    phase
                };
                if phase == 1 && chain.starts_with(&call) {
                    earlier.push(o);
                    continue;
                }
                for &p in &predecessors[o] {
                    if forward(p, o) && chains[p].starts_with(caller) {
                        work.push((p, phase));
                    }
                }
            }
            // Earlier code that only loads is what moved, up ([`fold_hoisted_call_loads`]).
            if earlier
                .iter()
                .all(|&a| only_loads.get(a).copied().unwrap_or(false))
            {
                continue;
            }
            let here = call_places(deciding, b, &call);
            let copy = (earlier.iter()).any(|&a| {
                call_places(deciding, a, &call)
                    .iter()
                    .any(|l| here.contains(l))
            });
            if !copy {
                chains[b].truncate(depth);
                folded = true;
                break;
            }
        }
    }
    folded
}

/// Gives a block of the caller's code that the optimiser placed where a loop of an inlined
/// call exits (a load of the caller's rematerialised there: bzip2's `bsW` in
/// `sendMTFValues`) to that call: a block entered only from that loop, a loop of the
/// call's own (its back edges the call's code), and leaving only to the call's code. Left
/// the caller's, it would end the call's instance and start another, two instances for one
/// call. (The caller's code between two pieces of one call site is not enough: it may be
/// what tells apart two calls the optimiser laid side by side.)
pub fn absorb_loop_exits_in_calls(
    forest: &LoopForest,
    chains: &mut [Vec<Site>],
    successors: &[Vec<usize>],
    back_edges: &[Option<Vec<Site>>],
) {
    let n = chains.len();
    let predecessors = crate::loops::predecessors(successors);
    for b in reverse_post_order(successors)
        .into_iter()
        .filter(|&b| b != 0)
    {
        let (Some(&first), false) = (successors[b].first(), predecessors[b].is_empty()) else {
            continue;
        };
        if first >= n {
            continue;
        }
        let call = chains[first].clone();
        if call.len() <= chains[b].len()
            || !call.starts_with(&chains[b])
            || !successors[b]
                .iter()
                .all(|&o| o < n && chains[o].starts_with(&call))
        {
            continue;
        }
        // Every predecessor in a loop of the call's own that `b` is not in.
        let exits_own_loop = predecessors[b].iter().all(|&p| {
            let mut at = forest.innermost.get(p).copied().flatten();
            while let Some(k) = at {
                let own = (back_edges.get(k).and_then(Option::as_ref))
                    .is_some_and(|chain| chain.starts_with(&call));
                if own && !forest.contains(k, b) {
                    return true;
                }
                at = forest.loops[k].parent;
            }
            false
        });
        if exits_own_loop {
            chains[b] = call;
        }
    }
}

/// Gives an inlined call the block of its caller's code that the optimiser scheduled inside
/// the call across one of its branches (SQLite's `OP_Copy`: the caller's load of
/// `pOut->flags` placed before the last branch of the inlined `sqlite3VdbeMemShallowCopy`,
/// whose last store follows): a block whose chain is a prefix of its conditional branch's
/// (`terminators[b]`, the call's), entered only from that call's code and going on into it
/// within the iteration.
/// Left the caller's, it would end the call and begin it again: two instances for one.
pub fn absorb_caller_code_scheduled_in_calls(
    forest: &LoopForest,
    chains: &mut [Vec<Site>],
    successors: &[Vec<usize>],
    terminators: &[Option<Vec<Site>>],
) {
    let n = chains.len();
    let predecessors = crate::loops::predecessors(successors);
    for b in reverse_post_order(successors)
        .into_iter()
        .filter(|&b| b != 0)
    {
        let Some(call) = terminators.get(b).cloned().flatten() else {
            continue;
        };
        // A decision of the call's (an unconditional branch may be one a cut made, with the
        // location of the code after it), within one iteration (a loop's header is where a
        // call may begin again).
        let decides = successors[b].iter().any(|&s| s != successors[b][0]);
        if !decides
            || forest.is_header(b)
            || call.len() <= chains[b].len()
            || !call.starts_with(&chains[b])
        {
            continue;
        }
        let entered_from_call = !predecessors[b].is_empty()
            && (predecessors[b].iter()).all(|&p| p != b && chains[p].starts_with(&call));
        let goes_on_into_call = (successors[b].iter())
            .any(|&s| s < n && !forest.is_header(s) && chains[s].starts_with(&call));
        if entered_from_call && goes_on_into_call {
            chains[b] = call;
        }
    }
}

/// Gives an inlined call the block of its caller's code that the optimiser placed between
/// two pieces of the call (SQLite's `sqlite3PCacheBufferSetup(sqlite3GlobalConfig.pPage,
/// ...)`: the call's test of `pcache1.isInit` made first, the caller's loads of the
/// arguments after it, then the rest of the call): a block, not a loop's header, going only
/// into the call's code and entered from it (and perhaps from other code: SQLite's
/// `sqlite3DbStrNDup(p->db, z, n)`, the load of `p->db` after its first test, also reached
/// from the sibling call computing `n`), by forward edges, where the call's
/// code after it holds none of the places ([`Place`]) of the call's code before it (two copies of the
/// call, an unrolled loop's, hold the same places: the caller's code between them is what
/// tells them apart). Left the caller's, it would end the call and begin it again.
/// `deciding[b]` are block `b`'s locations.
pub fn absorb_caller_code_between_call_pieces(
    forest: &LoopForest,
    chains: &mut [Vec<Site>],
    successors: &[Vec<usize>],
    deciding: &[Vec<Location>],
) {
    let n = chains.len();
    let predecessors = crate::loops::predecessors(successors);
    let edges = ForwardEdges::new(successors);
    let (order, forward) = (&edges.order, |from, to| edges.forward(from, to));
    for &b in order.iter().filter(|&&b| b != 0) {
        if forest.is_header(b) || predecessors[b].is_empty() || successors[b].is_empty() {
            continue;
        }
        if (predecessors[b].iter().chain(&successors[b])).any(|&o| o >= n || o == b) {
            continue;
        }
        // The call the block goes into on every way, and its code the block is entered
        // from (on at least one way: the others, from other code, would begin a call at
        // the block's successor anyway).
        let depth = chains[b].len();
        let mut around = chains[successors[b][0]].clone();
        for &o in &successors[b][1..] {
            around.truncate(common_prefix(&around, &chains[o]));
        }
        if around.len() <= depth || !around.starts_with(&chains[b]) {
            continue;
        }
        let from_call: Vec<usize> = (predecessors[b].iter().copied())
            .filter(|&p| chains[p].starts_with(&around[..=depth]))
            .collect();
        if from_call.is_empty() {
            continue;
        }
        for &p in &from_call {
            around.truncate(common_prefix(&around, &chains[p]));
        }
        // The call's code before and after the block, each as far as it runs on.
        let call = &around[..=depth];
        // Into a loop only where it is the call's own (the block its preheader: SQLite's
        // `sqlite3ExpirePreparedStatements(db, pOp->p2)`, the caller's load of `p2` after
        // the call's test of the list it walks); a loop of the caller's holds calls of
        // another iteration.
        let own_loops: Vec<&crate::loops::Loop> = (forest.loops.iter())
            .filter(|l| l.blocks.iter().all(|&o| chains[o].starts_with(call)))
            .collect();
        let ways_forward = predecessors[b].iter().all(|&p| forward(p, b))
            && (successors[b].iter()).all(|&s| {
                forward(b, s) && (!forest.is_header(s) || own_loops.iter().any(|l| l.header == s))
            });
        if !ways_forward {
            continue;
        }
        // The places of the call's own loops are left out: a rotated loop's test is made
        // once before it too (the list's first `p` tested before the walk).
        let piece = |starts: &[usize], next: &dyn Fn(usize) -> Vec<usize>| {
            let mut seen = vec![false; n];
            let mut work = starts.to_vec();
            let mut places: Vec<Place> = Vec::new();
            while let Some(o) = work.pop() {
                if o >= n || seen[o] || !chains[o].starts_with(call) {
                    continue;
                }
                seen[o] = true;
                if !own_loops.iter().any(|l| l.blocks.contains(&o)) {
                    places.extend(call_places(deciding, o, call));
                }
                work.extend(next(o));
            }
            places
        };
        let before = piece(&from_call, &|o| {
            predecessors[o]
                .iter()
                .copied()
                .filter(|&p| forward(p, o))
                .collect()
        });
        let after = piece(&successors[b], &|o| {
            successors[o]
                .iter()
                .copied()
                .filter(|&s| forward(o, s))
                .collect()
        });
        if before.iter().all(|l| !after.contains(l)) {
            chains[b] = around;
        }
    }
}

/// Folds into their caller the code the optimiser merged from the ends of several inlined
/// calls of one function (their common tail, which it gives a call site of its own at line
/// 0, or at column 0 of their line when they share one): entered only from the code of
/// those calls, a region of its own would count each of them twice, once for its head and
/// once for the tail. Such code's chain (and any loop back edge's in it) stops before the
/// merged call, as the caller's code. So does a merged call that is a piece of calls whose
/// own code remains (`piece`: another call of the same function on the same line, not
/// merged): their common head hoisted before the branch that chooses between them, or
/// moved out of a loop around them. A merged call entered from anywhere else (two whole
/// calls merged into one) stays a call. Each piece of a merged call (its connected blocks)
/// is judged on its own, and a piece that goes only into two or more calls of the function
/// that are not merged is their common head, whatever their lines, and the caller's too.
/// `merged(site)` says whether a site is such a merged
/// one; `callee(site)` names its function.
pub fn fold_merged_call_tails<C: PartialEq>(
    chains: &mut [Vec<Site>],
    back_edges: &mut [Option<Vec<Site>>],
    successors: &[Vec<usize>],
    merged: impl Fn(Site) -> bool,
    piece: impl Fn(Site) -> bool,
    callee: impl Fn(Site) -> C,
) {
    let mut calls: Vec<Vec<Site>> = Vec::new();
    for chain in chains.iter() {
        for depth in (0..chain.len()).filter(|&d| merged(chain[d])) {
            if !calls.iter().any(|c| c[..] == chain[..=depth]) {
                calls.push(chain[..=depth].to_vec());
            }
        }
    }
    // Outer calls first: folding one folds what it holds.
    calls.sort_by_key(Vec::len);
    let predecessors = crate::loops::predecessors(successors);
    for call in calls {
        let depth = call.len() - 1;
        let inside: Vec<bool> = chains.iter().map(|c| c.starts_with(&call)).collect();
        let inside_at = |b: usize| inside.get(b).copied().unwrap_or(false);
        // A call of the same function beside the merged one, in the same caller.
        let same_function = |chain: &[Site]| {
            chain.len() > depth
                && chain[..depth] == call[..depth]
                && callee(chain[depth]) == callee(call[depth])
        };
        // Each piece of it (connected blocks) on its own: a tail entered only from calls of
        // the same function, or a head that goes only into calls of the same function that
        // are not merged, at least two of them (their common head hoisted above the branch
        // that chooses between them: Lua's freeregs(), `if (r1 > r2) { freereg(r1);
        // freereg(r2); } else { freereg(r2); freereg(r1); }`, the first calls' call of
        // luaY_nvarstack() made once before the test, whatever their lines).
        let mut folded = Vec::new();
        let blocks_inside: Vec<usize> = (0..chains.len()).filter(|&b| inside_at(b)).collect();
        for blocks in connected_pieces(&blocks_inside, &predecessors, successors, |_, o| {
            inside_at(o)
        }) {
            // The function's entry block is entered from its caller.
            let mut entered_from_elsewhere = blocks.contains(&0);
            let mut entered = false;
            let mut into: Vec<Site> = Vec::new();
            let mut only_into_calls = true;
            for &b in &blocks {
                for &o in predecessors[b].iter().filter(|&&o| !inside_at(o)) {
                    entered = true;
                    entered_from_elsewhere |= o >= chains.len() || !same_function(&chains[o]);
                }
                for &o in successors[b].iter().filter(|&&o| !inside_at(o)) {
                    if o < chains.len() && same_function(&chains[o]) && !merged(chains[o][depth]) {
                        into.push(chains[o][depth]);
                    } else {
                        only_into_calls = false;
                    }
                }
            }
            into.sort_unstable();
            into.dedup();
            let tail = entered && !entered_from_elsewhere;
            let head = only_into_calls && into.len() >= 2;
            if piece(call[depth]) || tail || head {
                folded.extend(blocks);
            }
        }
        let whole = folded.len() == inside.iter().filter(|&&i| i).count();
        for b in folded {
            chains[b].truncate(depth);
        }
        if whole {
            for chain in back_edges.iter_mut().flatten() {
                if chain.starts_with(&call) {
                    chain.truncate(depth);
                }
            }
        }
    }
}

/// `blocks` in pieces: each piece the blocks reached from the first of `blocks` not yet in
/// one, by edges either way from a block `a` to a block `o` of `blocks` with `joined(a, o)`.
fn connected_pieces(
    blocks: &[usize],
    predecessors: &[Vec<usize>],
    successors: &[Vec<usize>],
    joined: impl Fn(usize, usize) -> bool,
) -> Vec<Vec<usize>> {
    let mut seen = vec![false; blocks.iter().map(|&b| b + 1).max().unwrap_or(0)];
    let mut pieces = Vec::new();
    for &first in blocks {
        if seen[first] {
            continue;
        }
        seen[first] = true;
        let mut piece = vec![first];
        let mut at = 0;
        while at < piece.len() {
            let a = piece[at];
            for &o in predecessors[a].iter().chain(&successors[a]) {
                if o < seen.len() && !seen[o] && blocks.contains(&o) && joined(a, o) {
                    seen[o] = true;
                    piece.push(o);
                }
            }
            at += 1;
        }
        pieces.push(piece);
    }
    pieces
}

/// The chain of inlined calls each loop is in (the code of the last one; the function's
/// own for an empty chain): its back edges' (`back_edges[k]`), or, when they have no
/// location, the longest prefix its blocks' `chains` share; never outside its parent's.
pub fn loop_contexts(
    forest: &LoopForest,
    chains: &[Vec<Site>],
    back_edges: &[Option<Vec<Site>>],
) -> Vec<Vec<Site>> {
    let n = chains.len();
    // Outer loops first: the forest is in pre-order.
    let mut contexts: Vec<Vec<Site>> = Vec::with_capacity(forest.loops.len());
    for (k, lp) in forest.loops.iter().enumerate() {
        let mut context = match back_edges.get(k).cloned().flatten() {
            Some(chain) => chain,
            None => {
                let mut blocks = lp.blocks.iter().filter(|&&b| b < n && forest.reachable[b]);
                let mut context = blocks
                    .next()
                    .map(|&b| chains[b].clone())
                    .unwrap_or_default();
                for &b in blocks {
                    context.truncate(common_prefix(&context, &chains[b]));
                }
                context
            }
        };
        let outer = lp.parent.map_or(&[][..], |o| contexts[o].as_slice());
        if !context.starts_with(outer) {
            context = outer.to_vec();
        }
        contexts.push(context);
    }
    contexts
}

/// Builds the tree of a function whose blocks have `chains` (see [`block_chains`]);
/// `back_edges[k]` is the chain of loop `k`'s back-edge branches, when they have a location.
pub fn build(
    forest: &LoopForest,
    chains: &[Vec<Site>],
    back_edges: &[Option<Vec<Site>>],
) -> RegionTree {
    let n = chains.len();
    let contexts = loop_contexts(forest, chains, back_edges);

    let mut builder = Builder {
        nodes: vec![Node {
            kind: NodeKind::Function,
            parent: None,
            context: Vec::new(),
        }],
        inlined: HashMap::new(),
        first_block: vec![usize::MAX],
        headers: forest.loops.iter().map(|lp| lp.header).collect(),
    };
    // Loops first, outer before inner (the forest is in pre-order).
    let mut loop_node = vec![0; forest.loops.len()];
    for (k, lp) in forest.loops.iter().enumerate() {
        let (start, depth) = match lp.parent {
            Some(outer) => (loop_node[outer] + 1, contexts[outer].len()),
            None => (0, 0),
        };
        let parent = builder.inlined_path(start, &contexts[k], depth);
        let node = builder.add(NodeKind::Loop(k), Some(parent), contexts[k].clone());
        builder.add(NodeKind::LoopBody(k), Some(node), contexts[k].clone());
        builder.note_block(node, lp.header);
        loop_node[k] = node;
    }
    let mut block_region = vec![0; n];
    for (b, chain) in chains.iter().enumerate() {
        let (start, context) = match forest.innermost.get(b).copied().flatten() {
            Some(k) => (loop_node[k] + 1, contexts[k].as_slice()),
            None => (0, &[][..]),
        };
        // Code of the loop's own level or deeper; anything else (a block whose code the
        // optimiser merged from elsewhere) counts as the loop's own.
        let region = if chain.starts_with(context) {
            builder.inlined_path(start, chain, context.len())
        } else {
            start
        };
        block_region[b] = region;
        builder.note_block(region, b);
    }
    builder.finish(block_region, loop_node)
}

struct Builder {
    nodes: Vec<Node>,
    /// The inlined-call node for (parent node, site).
    inlined: HashMap<(usize, Site), usize>,
    /// The smallest block index in each node's subtree: the order of siblings, but for
    /// loops, which are ordered by their header as in the forest.
    first_block: Vec<usize>,
    /// Each loop's header.
    headers: Vec<usize>,
}

impl Builder {
    fn add(&mut self, kind: NodeKind, parent: Option<usize>, context: Vec<Site>) -> usize {
        self.nodes.push(Node {
            kind,
            parent,
            context,
        });
        self.first_block.push(usize::MAX);
        self.nodes.len() - 1
    }

    /// The node of the inlined calls `chain[depth..]` under `start`, made where missing.
    fn inlined_path(&mut self, start: usize, chain: &[Site], depth: usize) -> usize {
        let mut at = start;
        for (i, &site) in chain.iter().enumerate().skip(depth) {
            at = match self.inlined.get(&(at, site)) {
                Some(&node) => node,
                None => {
                    let node = self.add(NodeKind::Inlined(site), Some(at), chain[..=i].to_vec());
                    self.inlined.insert((at, site), node);
                    node
                }
            };
        }
        at
    }

    /// `block` lies in `node`'s subtree.
    fn note_block(&mut self, node: usize, block: usize) {
        let mut at = Some(node);
        while let Some(i) = at {
            self.first_block[i] = self.first_block[i].min(block);
            at = self.nodes[i].parent;
        }
    }

    /// Renumbers the nodes in pre-order, siblings by their first block.
    fn finish(self, block_region: Vec<usize>, loop_node: Vec<usize>) -> RegionTree {
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            if let Some(p) = node.parent {
                children[p].push(i);
            }
        }
        let key = |c: usize| match self.nodes[c].kind {
            NodeKind::Loop(k) => self.headers[k],
            _ => self.first_block[c],
        };
        for list in &mut children {
            list.sort_by_key(|&c| (key(c), c));
        }
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![0];
        while let Some(i) = stack.pop() {
            order.push(i);
            stack.extend(children[i].iter().rev());
        }
        let mut new_index = vec![0; self.nodes.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let nodes = (order.iter())
            .map(|&old| {
                let node = &self.nodes[old];
                Node {
                    kind: node.kind,
                    parent: node.parent.map(|p| new_index[p]),
                    context: node.context.clone(),
                }
            })
            .collect();
        RegionTree {
            nodes,
            block_region: block_region.into_iter().map(|r| new_index[r]).collect(),
            loop_node: loop_node.into_iter().map(|l| new_index[l]).collect(),
        }
    }
}

/// Where the set of open regions changes other than at a loop's header: each reachable
/// block whose innermost region differs from that of a reachable predecessor, and the entry
/// block when its region is not the function, with that region (sorted by block). There a
/// `__kage_settle` makes the region the innermost open one: leaving loops (exit blocks),
/// entering and leaving inlined calls. A loop header whose own region lies below its
/// loop's body (code of a call inlined at the loop's start) is listed too, after its
/// iteration hook; other headers are not (their iteration hook settles). The headers of
/// the loops in `folded` (nodes of `tree`: loops a tool reports itself, without an
/// iteration hook) are ordinary blocks.
pub fn settle_points(
    tree: &RegionTree,
    forest: &LoopForest,
    successors: &[Vec<usize>],
    folded: &[usize],
) -> Vec<(usize, usize)> {
    let n = tree.block_region.len();
    let mut differs = vec![false; n];
    if n > 0 {
        differs[0] = tree.block_region[0] != 0;
    }
    for (p, succs) in successors.iter().enumerate().take(n) {
        if !forest.reachable[p] {
            continue;
        }
        for &s in succs.iter().filter(|&&s| s < n) {
            if tree.block_region[s] != tree.block_region[p] {
                differs[s] = true;
            }
        }
    }
    let header_of: HashMap<usize, usize> = (forest.loops.iter().enumerate())
        .filter(|&(k, _)| !folded.contains(&tree.loop_node[k]))
        .map(|(k, lp)| (lp.header, k))
        .collect();
    (0..n)
        .filter(|&b| forest.reachable[b])
        .filter(|&b| match header_of.get(&b) {
            Some(&k) => tree.block_region[b] != tree.loop_node[k] + 1,
            None => differs[b],
        })
        .map(|b| (b, tree.block_region[b]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::find_loops;
    use NodeKind::*;

    fn at(sites: &[Site]) -> Location {
        Location {
            sites: sites.to_vec(),
            lines: vec![1; sites.len() + 1],
            column: 0,
        }
    }

    /// [`fold_moved_call_pieces`] with no block ending in `unreachable` and no merged call.
    fn moved_pieces(
        forest: &LoopForest,
        successors: &[Vec<usize>],
        chains: &mut [Vec<Site>],
        back_edges: &[Option<Vec<Site>>],
        deciding: &[Vec<Location>],
    ) -> bool {
        fold_moved_call_pieces(
            forest,
            successors,
            (&[], &[]),
            chains,
            back_edges,
            deciding,
            |_, _| false,
        )
    }

    /// An instruction's location: through `sites`, at `lines` (one more than the sites).
    fn line(sites: &[Site], lines: &[u32]) -> Location {
        Location {
            sites: sites.to_vec(),
            lines: lines.to_vec(),
            column: 0,
        }
    }

    /// (kind, parent) of every node.
    fn shape(tree: &RegionTree) -> Vec<(NodeKind, Option<usize>)> {
        tree.nodes.iter().map(|n| (n.kind, n.parent)).collect()
    }

    #[test]
    fn without_inlining_the_tree_is_the_loop_forest() {
        // 0 -> 1 (header) -> 2 -> 1, 1 -> 3 (header) -> 3, 3 -> 4
        let successors = vec![vec![1], vec![2, 3], vec![1], vec![3, 4], vec![]];
        let forest = find_loops(&successors, 0);
        let chains = block_chains(&successors, &vec![vec![at(&[])]; 5]);
        let tree = build(&forest, &chains, &[]);
        assert_eq!(
            shape(&tree),
            [
                (Function, None),
                (Loop(0), Some(0)),
                (LoopBody(0), Some(1)),
                (Loop(1), Some(0)),
                (LoopBody(1), Some(3))
            ]
        );
        assert_eq!(tree.block_region, [0, 2, 2, 4, 0]);
        assert_eq!(tree.loop_node, [1, 3]);
    }

    #[test]
    fn an_inlined_function_with_a_loop_is_a_region_around_its_loop() {
        // main: 0 (own code), then f inlined (site 7): 1 (f's code), 2 (f's loop header)
        // -> 2, 2 -> 3 (f's code), 3 -> 4 (main's code).
        let successors = vec![vec![1], vec![2], vec![2, 3], vec![4], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![
            vec![at(&[])],
            vec![at(&[7])],
            vec![at(&[7]), at(&[7])],
            vec![at(&[7])],
            vec![at(&[])],
        ];
        let tree = build(&forest, &block_chains(&successors, &locations), &[]);
        assert_eq!(
            shape(&tree),
            [
                (Function, None),
                (Inlined(7), Some(0)),
                (Loop(0), Some(1)),
                (LoopBody(0), Some(2)),
            ]
        );
        assert_eq!(tree.block_region, [0, 1, 3, 1, 0]);
        assert_eq!(tree.nodes[2].context, [7]);
    }

    #[test]
    fn a_call_inlined_in_a_loop_body_is_a_region_under_the_body() {
        // 0 -> 1 (header, main's) -> 2 (g inlined, site 3; inside g, h inlined: site 4)
        // -> 1, 1 -> 5; block 2 -> 4 -> 1 too (g's own code).
        let successors = vec![vec![1], vec![2, 5], vec![4], vec![], vec![1], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![
            vec![at(&[])],
            vec![at(&[])],
            vec![at(&[3, 4]), at(&[3, 4]), at(&[3])],
            vec![],
            vec![at(&[3])],
            vec![at(&[])],
        ];
        let tree = build(&forest, &block_chains(&successors, &locations), &[]);
        assert_eq!(
            shape(&tree),
            [
                (Function, None),
                (Loop(0), Some(0)),
                (LoopBody(0), Some(1)),
                (Inlined(3), Some(2)),
                (Inlined(4), Some(3)),
            ]
        );
        assert_eq!(tree.block_region[2], 4);
        assert_eq!(tree.block_region[4], 3);
        assert_eq!(tree.block_region[1], 2);
        assert_eq!(tree.block_region[5], 0);
        assert_eq!(tree.nodes[4].context, [3, 4]);
    }

    #[test]
    fn a_calls_code_hoisted_into_a_preheader_that_only_enters_the_call_is_its_callers() {
        // for (i = 0; i < 4; i++) reg(&vfs[i]): reg (site 5) is the whole loop body, its
        // header (1) and the block after it (2); its first load (line 2 of reg) made once
        // before, in the entry block (0), which goes only into the header; 3 the latch
        // (the caller's), 4 after the loop.
        let successors = vec![vec![1], vec![2], vec![3], vec![1, 4], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = |entry: &[u32]| {
            vec![
                (entry.iter()).map(|&l| line(&[5], &[7, l])).collect(),
                vec![line(&[5], &[7, 3])],
                vec![line(&[5], &[7, 4])],
                vec![line(&[], &[6])],
                vec![line(&[], &[8])],
            ]
        };
        let back_edges = [Some(vec![])];
        let chains = vec![vec![5], vec![5], vec![5], vec![], vec![]];
        let mut folded = chains.clone();
        assert!(moved_pieces(
            &forest,
            &successors,
            &mut folded,
            &back_edges,
            &locations(&[2])
        ));
        assert_eq!(folded, [vec![], vec![5], vec![5], vec![], vec![]]);
        // Every line of the code in the loop: a copy of the whole call, the first call (a
        // peeled iteration), kept.
        let mut kept = chains.clone();
        assert!(!moved_pieces(
            &forest,
            &successors,
            &mut kept,
            &back_edges,
            &locations(&[3, 4])
        ));
        assert_eq!(kept, chains);
    }

    #[test]
    fn a_calls_test_that_loop_unswitching_made_before_the_loop_is_its_callers() {
        // for (i = 0; i < n; i++) set(v, i) at -O3, set (site 5) testing `v->db->failed`
        // (line 2) before its work (line 3): block 1 makes the test once and chooses a
        // version of the loop, 3 (the caller's alone: set does nothing there) or 4 and 5
        // (set's test and work again each iteration); 2 goes only to 3's header, 6 after.
        //   0 -> 1 -> {2, 4}, 2 -> 3 -> {3, 6}, 4 -> 5 -> {4, 6}
        let successors = vec![
            vec![1],
            vec![2, 4],
            vec![3],
            vec![3, 6],
            vec![5],
            vec![4, 6],
            vec![],
        ];
        let forest = find_loops(&successors, 0);
        let locations = vec![
            vec![line(&[], &[6])],
            vec![line(&[5], &[7, 2])],
            vec![line(&[], &[7])],
            vec![line(&[], &[8])],
            vec![line(&[], &[8])],
            vec![line(&[5], &[7, 2]), line(&[5], &[7, 3])],
            vec![line(&[], &[9])],
        ];
        let back_edges = [Some(vec![]), Some(vec![])];
        let chains = vec![vec![], vec![5], vec![], vec![], vec![], vec![5], vec![]];
        let fold = |chains: &mut [Vec<Site>], only_loads: &[bool]| {
            fold_moved_call_pieces(
                &forest,
                &successors,
                (&[], only_loads),
                chains,
                &back_edges,
                &locations,
                |_, _| false,
            )
        };
        // As a region of its own, the test would count a call more at every run of the loop.
        let mut folded = chains.clone();
        let loads = [false, true, false, false, false, false, false];
        assert!(fold(&mut folded, &loads));
        assert_eq!(
            folded,
            [vec![], vec![], vec![], vec![], vec![], vec![5], vec![]]
        );
        // A piece that stores is no test: a call of its own (a peeled iteration's), kept.
        let mut kept = chains.clone();
        assert!(!fold(&mut kept, &[false; 7]));
        assert_eq!(kept, chains);
    }

    #[test]
    fn hoisted_code_of_an_inlined_call_is_its_callers() {
        // 0: a load of f's hoisted before the loop (site 9); 1: the loop's header (main's);
        // 2: the rest of f's code in the loop (a load at the same place and a store at
        // another), its back edge main's; 3: after the loop.
        let successors = vec![vec![1], vec![2, 3], vec![1], vec![]];
        let forest = find_loops(&successors, 0);
        let store = line(&[9], &[1, 2]);
        let locations = vec![
            vec![at(&[9])],
            vec![at(&[])],
            vec![at(&[9]), store],
            vec![at(&[])],
        ];
        let mut chains = block_chains(&successors, &locations);
        let back_edges = [Some(vec![])];
        // As a region of its own, the hoisted code would count one more call each time the
        // loop starts.
        assert!(moved_pieces(
            &forest,
            &successors,
            &mut chains,
            &back_edges,
            &locations
        ));
        let tree = build(&forest, &chains, &back_edges);
        assert_eq!(
            shape(&tree),
            [
                (Function, None),
                (Loop(0), Some(0)),
                (LoopBody(0), Some(1)),
                (Inlined(9), Some(2)),
            ]
        );
        assert_eq!(tree.block_region, [0, 2, 3, 0]);
    }

    #[test]
    fn a_call_begun_in_the_iteration_before_goes_on_as_its_callers_code() {
        // while (next(p)) body(): next (site 4) tests before the loop (block 0) and at the
        // end of each iteration (block 4), and the rest of it (its own call, taken when the
        // test passed) is the loop's header (block 1), entered from both, and block 2,
        // entered only from there: the caller's code. 3: the body; 5: after the loop.
        let successors = vec![vec![1, 5], vec![2], vec![3], vec![4], vec![1, 5], vec![]];
        let forest = find_loops(&successors, 0);
        let mut chains = vec![vec![4], vec![4], vec![4], vec![], vec![4], vec![]];
        let back_edges = [Some(vec![])];
        assert!(fold_calls_continued_across_iterations(
            &forest,
            &successors,
            &mut chains,
            &back_edges
        ));
        assert_eq!(chains, [vec![4], vec![], vec![], vec![], vec![4], vec![]]);
        // Entered from the caller's code too (block 0 the caller's): a call of its own.
        let mut chains = vec![vec![], vec![4], vec![4], vec![], vec![4], vec![]];
        assert!(!fold_calls_continued_across_iterations(
            &forest,
            &successors,
            &mut chains,
            &back_edges
        ));
    }

    #[test]
    fn a_latch_holding_the_start_of_the_next_call_is_its_callers_code() {
        // while (step(v) == RETRY) body(): step (site 4) is the header (1) and block 2, which
        // leaves the loop (to 5) or goes on to the body (3, the caller's); the latch (4) goes
        // only back to the header and holds step's first load, reloaded for the next call.
        // As step's code, the call would span the back edge: two instances per iteration.
        let successors = vec![vec![1], vec![2], vec![3, 5], vec![4, 5], vec![1], vec![]];
        let forest = find_loops(&successors, 0);
        let mut chains = vec![vec![], vec![4], vec![4], vec![], vec![4], vec![]];
        let back_edges = [Some(vec![])];
        assert!(fold_calls_continued_across_iterations(
            &forest,
            &successors,
            &mut chains,
            &back_edges
        ));
        assert_eq!(chains, [vec![], vec![4], vec![4], vec![], vec![], vec![]]);
    }

    #[test]
    fn a_calls_store_sunk_past_its_siblings_loop_is_its_callers_code() {
        // std::vector<long> v(n, x) (site 1): _Vector_base (site 2, blocks 1 and 4: its
        // allocation at line 332, then its store of the end of the storage, line 333, sunk
        // past the fill) and _M_fill_initialize (site 3, blocks 2 and its loop 3).
        let successors = vec![vec![1], vec![2, 4], vec![3, 4], vec![3, 4], vec![5], vec![]];
        let deciding = |store_line: u32| {
            vec![
                vec![],
                vec![line(&[1, 2], &[84, 566, 332])],
                vec![line(&[1, 3], &[84, 567, 1702])],
                vec![line(&[1, 3], &[84, 567, 1703])],
                vec![line(&[1, 2], &[84, 566, store_line])],
                vec![],
            ]
        };
        let chains = vec![
            vec![],
            vec![1, 2],
            vec![1, 3],
            vec![1, 3],
            vec![1, 2],
            vec![],
        ];
        let loads = [false; 6];
        let mut folded = chains.clone();
        assert!(fold_sunk_call_pieces(
            &successors,
            &deciding(333),
            &loads,
            &mut folded
        ));
        assert_eq!(folded[4], [1]);
        assert_eq!(folded[..4], chains[..4]);
        // A copy of the call's code after its sibling's (a peeled iteration's): kept.
        let mut kept = chains.clone();
        assert!(!fold_sunk_call_pieces(
            &successors,
            &deciding(332),
            &loads,
            &mut kept
        ));
        assert_eq!(kept, chains);
        // The earlier code only loads: it is what moved, the rest stays the call's.
        let mut kept = chains.clone();
        let early_loads = [false, true, false, false, false, false];
        assert!(!fold_sunk_call_pieces(
            &successors,
            &deciding(333),
            &early_loads,
            &mut kept
        ));
        assert_eq!(kept, chains);
        // Calls one after the other, or the call's code again only after a back edge: kept.
        let successors = vec![vec![1], vec![2], vec![3], vec![1, 4], vec![5], vec![]];
        let chains = vec![vec![], vec![1, 2], vec![1, 3], vec![1, 3], vec![1], vec![]];
        let mut kept = chains.clone();
        assert!(!fold_sunk_call_pieces(
            &successors,
            &deciding(333),
            &loads,
            &mut kept
        ));
        assert_eq!(kept, chains);
    }

    #[test]
    fn the_start_of_the_next_call_before_an_empty_latch_is_its_callers_code() {
        // while (comp(val, next)) { move(); }: comp (site 4) is the header (1) and block 2,
        // which leaves the loop (to 6) or goes on to the body (3, move's: site 5); block 4
        // holds comp's reload of `val` and runs straight on to the latch (5, the loop's own
        // code), which goes only back to the header.
        let successors = vec![
            vec![1],
            vec![2],
            vec![3, 6],
            vec![4],
            vec![5],
            vec![1],
            vec![],
        ];
        let forest = find_loops(&successors, 0);
        let mut chains = vec![vec![], vec![4], vec![4], vec![5], vec![4], vec![], vec![]];
        let back_edges = [Some(vec![])];
        assert!(fold_calls_continued_across_iterations(
            &forest,
            &successors,
            &mut chains,
            &back_edges
        ));
        assert_eq!(
            chains,
            [vec![], vec![4], vec![4], vec![5], vec![], vec![], vec![]]
        );
        // comp's code before another call's on the way (an unrolled body's own call of
        // comp, then move): a call of its own, kept.
        let mut chains = vec![vec![], vec![4], vec![4], vec![5], vec![4], vec![5], vec![]];
        assert!(!fold_calls_continued_across_iterations(
            &forest,
            &successors,
            &mut chains,
            &back_edges
        ));
        assert_eq!(chains[4], [4]);
        // A block that branches ends the run: comp's code before it stays comp's.
        let successors = vec![
            vec![1],
            vec![2],
            vec![3, 6],
            vec![4],
            vec![5, 6],
            vec![1],
            vec![],
        ];
        let forest = find_loops(&successors, 0);
        let mut chains = vec![vec![], vec![4], vec![4], vec![4], vec![], vec![], vec![]];
        assert!(!fold_calls_continued_across_iterations(
            &forest,
            &successors,
            &mut chains,
            &back_edges
        ));
        assert_eq!(chains[3], [4]);
    }

    #[test]
    fn a_calls_return_threaded_past_its_loops_test_is_its_callers_code() {
        // while (step(v) == RETRY) body(), the loop's branch back without a location: step
        // (site 7) is the header (1) and block 2, whose early `return ROW` (3) the optimiser
        // sends straight past the loop's test to after the loop (5); 4 is the body. Block 3
        // is entered only from the loop: the rest of a call that left it, the caller's code
        // (the loop is the caller's: its blocks share no call).
        let successors = vec![vec![1], vec![2], vec![3, 4], vec![5], vec![1, 5], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![
            vec![at(&[])],
            vec![at(&[7])],
            vec![at(&[7])],
            vec![at(&[7])],
            vec![at(&[])],
            vec![at(&[])],
        ];
        let mut chains = block_chains(&successors, &locations);
        let back_edges = [None];
        assert!(moved_pieces(
            &forest,
            &successors,
            &mut chains,
            &back_edges,
            &locations
        ));
        assert_eq!(chains, [vec![], vec![7], vec![7], vec![], vec![], vec![]]);
        let tree = build(&forest, &chains, &back_edges);
        assert_eq!(
            shape(&tree),
            [
                (Function, None),
                (Loop(0), Some(0)),
                (LoopBody(0), Some(1)),
                (Inlined(7), Some(2)),
            ]
        );
    }

    #[test]
    fn caller_code_scheduled_before_a_calls_branch_is_the_calls() {
        // 0: the caller; 1: f's code (site 3); 2: a load of the caller's, cut from 1, with
        // f's branch, to f's last store (3) or past it (4, the caller's). As the caller's,
        // block 2 would end f and 3 begin it again.
        let successors = vec![vec![1], vec![2], vec![3, 4], vec![4], vec![]];
        let mut chains = vec![vec![], vec![3], vec![], vec![3], vec![]];
        let terminators = [None, Some(vec![3]), Some(vec![3]), Some(vec![3]), None];
        let forest = find_loops(&successors, 0);
        absorb_caller_code_scheduled_in_calls(&forest, &mut chains, &successors, &terminators);
        assert_eq!(chains, [vec![], vec![3], vec![3], vec![3], vec![]]);
        // Going on only into the caller's code (4 or 5), it ends the call.
        let successors = vec![vec![1], vec![2], vec![4, 5], vec![4], vec![], vec![]];
        let mut chains = vec![vec![], vec![3], vec![], vec![3], vec![], vec![]];
        let terminators = [
            None,
            Some(vec![3]),
            Some(vec![3]),
            Some(vec![3]),
            None,
            None,
        ];
        let forest = find_loops(&successors, 0);
        absorb_caller_code_scheduled_in_calls(&forest, &mut chains, &successors, &terminators);
        assert_eq!(chains, [vec![], vec![3], vec![], vec![3], vec![], vec![]]);
        // An unconditional branch with the call's location is where a cut was made, before
        // the call's next code (a call begun again after the caller's code): it decides
        // nothing of the call's.
        let successors = vec![vec![1], vec![2], vec![3], vec![4], vec![]];
        let mut chains = vec![vec![], vec![3], vec![], vec![3], vec![]];
        let terminators = [None, Some(vec![3]), Some(vec![3]), Some(vec![3]), None];
        let forest = find_loops(&successors, 0);
        absorb_caller_code_scheduled_in_calls(&forest, &mut chains, &successors, &terminators);
        assert_eq!(chains, [vec![], vec![3], vec![], vec![3], vec![]]);
    }

    #[test]
    fn caller_code_between_two_pieces_of_a_call_is_the_calls() {
        // setup(config.buf, config.size): setup's (site 4) test of `initialised` (block 1,
        // line 2), which returns at once (to 4) or lets the caller load the arguments (2),
        // then the rest of setup (3, line 3).
        let successors = vec![vec![1], vec![2, 4], vec![3], vec![4], vec![]];
        let forest = find_loops(&successors, 0);
        let deciding = |later: u32| {
            vec![
                vec![],
                vec![line(&[4], &[9, 2])],
                vec![line(&[], &[9])],
                vec![line(&[4], &[9, later])],
                vec![],
            ]
        };
        let chains = vec![vec![], vec![4], vec![], vec![4], vec![]];
        let mut absorbed = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut absorbed, &successors, &deciding(3));
        assert_eq!(absorbed, [vec![], vec![4], vec![4], vec![4], vec![]]);
        // The code after holds a line of the code before: two copies of the call (get(a, i);
        // i++; get(a, i)), and the caller's code between them stays the caller's.
        let mut kept = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut kept, &successors, &deciding(2));
        assert_eq!(kept, chains);
        // A callee written on one line (`if (p->n > 0) p->op[p->n - 1].p5 = p5;`, SQLite's
        // sqlite3VdbeChangeP5, the caller's load of `p5` between its test and its store):
        // the same line, other columns, two pieces.
        let at_column = |column: u32| Location {
            column,
            ..line(&[4], &[9, 2])
        };
        let mut deciding = deciding(2);
        deciding[1] = vec![at_column(10), at_column(13)];
        deciding[3] = vec![at_column(21), at_column(38)];
        let mut absorbed = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut absorbed, &successors, &deciding);
        assert_eq!(absorbed, [vec![], vec![4], vec![4], vec![4], vec![]]);
        // Code the optimiser merged from several places of the callee (line 0) before and
        // after tells nothing: still two pieces (SQLite's clearAllSharedCacheTableLocks,
        // its two stores of `btsFlags` sunk into one after the caller's load).
        let merged = line(&[4], &[9, 0]);
        deciding[1].push(merged.clone());
        deciding[3].push(merged);
        let mut absorbed = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut absorbed, &successors, &deciding);
        assert_eq!(absorbed, [vec![], vec![4], vec![4], vec![4], vec![]]);
        // The same places after as before: two copies.
        deciding[3] = vec![at_column(10), at_column(13)];
        let mut kept = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut kept, &successors, &deciding);
        assert_eq!(kept, chains);
    }

    #[test]
    fn caller_code_before_a_calls_own_loop_is_the_calls() {
        // expire(db, op->p2): expire's (site 4) `for (p = db->list; p; p = p->next)`
        // rotated: its test of the first `p` (block 1, line 2) before the loop, the
        // caller's load of `op->p2` in the preheader (2), the loop (3, testing `p` again at
        // the same place), then 4.
        let successors = vec![vec![1], vec![4, 2], vec![3], vec![3, 4], vec![]];
        let forest = find_loops(&successors, 0);
        let test = Location {
            column: 3,
            ..line(&[4], &[9, 2])
        };
        let deciding = vec![
            vec![],
            vec![test.clone()],
            vec![line(&[], &[9])],
            vec![line(&[4], &[9, 3]), test],
            vec![],
        ];
        let chains = vec![vec![], vec![4], vec![], vec![4], vec![]];
        let mut absorbed = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut absorbed, &successors, &deciding);
        assert_eq!(absorbed, [vec![], vec![4], vec![4], vec![4], vec![]]);
        // A loop of the caller's (its latch, 5, the caller's code) holds a call in each
        // iteration: its preheader stays the caller's.
        let successors = vec![vec![1], vec![4, 2], vec![3], vec![5, 4], vec![], vec![3]];
        let forest = find_loops(&successors, 0);
        let mut deciding = deciding;
        deciding.push(vec![line(&[], &[10])]);
        let chains = vec![vec![], vec![4], vec![], vec![4], vec![], vec![]];
        let mut kept = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut kept, &successors, &deciding);
        assert_eq!(kept, chains);
    }

    #[test]
    fn caller_code_between_two_pieces_of_a_call_and_after_other_code_is_the_calls() {
        // if (n == 0) n = len(z); s = dup(db->p, z, n): dup's (site 4) test of `z` (block
        // 1, after the caller's test in 0), the caller's load of `db->p` (2), the rest of dup
        // (3); when n was 0, len's code (5, site 6) leads to the load, past dup's test.
        let successors = vec![vec![1, 5], vec![2, 4], vec![3], vec![4], vec![], vec![2]];
        let forest = find_loops(&successors, 0);
        let deciding = |later: u32| {
            vec![
                vec![],
                vec![line(&[4], &[9, 2])],
                vec![line(&[], &[9])],
                vec![line(&[4], &[9, later])],
                vec![],
                vec![line(&[6], &[8, 1])],
            ]
        };
        let chains = vec![vec![], vec![4], vec![], vec![4], vec![], vec![6]];
        // Each way in begins one call: from dup's test it goes on, from len's it begins.
        let mut absorbed = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut absorbed, &successors, &deciding(3));
        assert_eq!(
            absorbed,
            [vec![], vec![4], vec![4], vec![4], vec![], vec![6]]
        );
        let mut kept = chains.clone();
        absorb_caller_code_between_call_pieces(&forest, &mut kept, &successors, &deciding(2));
        assert_eq!(kept, chains);
    }

    #[test]
    fn a_calls_load_hoisted_above_a_sibling_call_is_its_callers() {
        // if (n != 1 || shortcut() == 0) addall(): addall's (site 5) first load in block 1,
        // before the test; shortcut (site 6) in 2, which may go on to addall's code (3) or
        // skip it (4). Left addall's, block 1 would count a call more on the way through 2.
        let successors = vec![vec![1], vec![2, 3], vec![3, 4], vec![4], vec![]];
        let only_loads = [false, true, false, false, false];
        let mut chains = vec![vec![], vec![5], vec![6], vec![5], vec![]];
        assert!(fold_hoisted_call_loads(
            &successors,
            &[],
            &only_loads,
            &mut chains
        ));
        assert_eq!(chains, [vec![], vec![], vec![6], vec![5], vec![]]);
        // In a loop, the call met again after the back edge is the next iteration's: 1 is
        // the header, 2 a call of 5's that only loads, 3 a call of 6's, back to 1 or out.
        let successors = vec![vec![1], vec![2], vec![3], vec![1, 4], vec![]];
        let only_loads = [false, false, true, false, false];
        let mut chains = vec![vec![], vec![], vec![5], vec![6], vec![]];
        assert!(!fold_hoisted_call_loads(
            &successors,
            &[],
            &only_loads,
            &mut chains
        ));
        // begin(pager, temp_in_memory(db)): begin's (site 5) test of the pager's error code
        // (block 1, line 2 of begin, going to begin's return (4) when set) made before the
        // caller's code (2) and the argument's call (3, site 6), then the rest of begin (4,
        // line 3).
        let successors = vec![vec![1], vec![2, 4], vec![3], vec![4], vec![5], vec![]];
        let only_loads = [false, true, false, false, false, false];
        let deciding = |later: u32| {
            vec![
                vec![],
                vec![line(&[5], &[9, 2])],
                vec![line(&[], &[9])],
                vec![line(&[6], &[9, 1])],
                vec![line(&[5], &[9, later])],
                vec![],
            ]
        };
        let mut chains = vec![vec![], vec![5], vec![], vec![6], vec![5], vec![]];
        assert!(fold_hoisted_call_loads(
            &successors,
            &deciding(3),
            &only_loads,
            &mut chains
        ));
        assert_eq!(chains[1], Vec::<Site>::new());
        // With no other call between, the caller's code only: the caller's too.
        let mut chains = vec![vec![], vec![5], vec![], vec![], vec![5], vec![]];
        assert!(fold_hoisted_call_loads(
            &successors,
            &deciding(3),
            &only_loads,
            &mut chains
        ));
        assert_eq!(chains[1], Vec::<Site>::new());
        // A way on that never comes back to the call (setup's `if (!initialised)
        // return;`, 1 -> 5): there the block is the whole call, kept.
        let successors = vec![vec![1], vec![2, 5], vec![3], vec![4], vec![5], vec![]];
        let chains = vec![vec![], vec![5], vec![], vec![], vec![5], vec![]];
        let mut kept = chains.clone();
        assert!(!fold_hoisted_call_loads(
            &successors,
            &deciding(3),
            &only_loads,
            &mut kept
        ));
        assert_eq!(kept, chains);
        // A block that goes on into the call's code nowhere, and the code reached again
        // holds its line: two copies, an unrolled loop's calls (get(a, i); i++; log();
        // get(a, i)), kept.
        let successors = vec![vec![1], vec![2], vec![3], vec![4], vec![5], vec![]];
        let chains = vec![vec![], vec![5], vec![], vec![6], vec![5], vec![]];
        let mut kept = chains.clone();
        assert!(!fold_hoisted_call_loads(
            &successors,
            &deciding(2),
            &only_loads,
            &mut kept
        ));
        assert_eq!(kept, chains);
    }

    #[test]
    fn a_rotated_loops_test_before_it_is_the_start_of_the_call_the_header_goes_on_with() {
        // while (reload(d) == OK) decode(d): reload (site 5) tests an overflow first (line 2
        // of reload), then goes on (line 3); rotated, the first test is made before the loop
        // (block 1) and the later ones at the end of the iteration before, in the caller's
        // code (block 3, decode's). The header (2) holds the rest of reload: each entry into
        // it is a call, the first one included, so block 1 is that call's start.
        let successors = vec![vec![1], vec![2, 4], vec![3, 4], vec![2, 4], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = |guard: &[u32]| {
            vec![
                vec![line(&[], &[6])],
                (guard.iter()).map(|&l| line(&[5], &[7, l])).collect(),
                vec![line(&[5], &[7, 3])],
                vec![line(&[], &[8]), line(&[5], &[7, 2])],
                vec![line(&[], &[10])],
            ]
        };
        let back_edges = [Some(vec![])];
        let chains = vec![vec![], vec![5], vec![5], vec![], vec![]];
        let mut folded = chains.clone();
        assert!(moved_pieces(
            &forest,
            &successors,
            &mut folded,
            &back_edges,
            &locations(&[2])
        ));
        assert_eq!(folded, [vec![], vec![], vec![5], vec![], vec![]]);
        // The whole of reload before the loop: a call of its own (the header's code a copy).
        let mut kept = chains.clone();
        assert!(!moved_pieces(
            &forest,
            &successors,
            &mut kept,
            &back_edges,
            &locations(&[2, 3])
        ));
        assert_eq!(kept, chains);
        // The latch reload's own code: the call spans the back edge and its code in the
        // header is the caller's (`fold_calls_continued_across_iterations`), so the test
        // before the loop is the call and stays.
        let chains = vec![vec![], vec![5], vec![5], vec![5], vec![]];
        let mut kept = chains.clone();
        assert!(!moved_pieces(
            &forest,
            &successors,
            &mut kept,
            &back_edges,
            &locations(&[2])
        ));
        assert_eq!(kept, chains);
    }

    #[test]
    fn a_rotated_loops_condition_before_the_loop_is_a_call_of_its_own() {
        // while (f()) g(): f (site 9) in block 0, which may skip the loop (0 -> 3), and
        // again in the loop's latch 2; the same code in both places: two calls.
        let successors = vec![vec![1, 3], vec![2], vec![1, 3], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![vec![at(&[9])], vec![at(&[])], vec![at(&[9])], vec![at(&[])]];
        let mut chains = block_chains(&successors, &locations);
        let back_edges = [Some(vec![9])];
        // Its back edge is in f: the loop is no caller's loop of f's, nothing is folded.
        assert!(!moved_pieces(
            &forest,
            &successors,
            &mut chains,
            &back_edges,
            &locations
        ));
        let back_edges = [Some(vec![])];
        assert!(!moved_pieces(
            &forest,
            &successors,
            &mut chains,
            &back_edges,
            &locations
        ));
        assert_eq!(chains, [vec![9], vec![], vec![9], vec![]]);
    }

    #[test]
    fn a_loop_whose_body_is_mostly_an_inlined_callee_is_the_callers() {
        // 0 -> 1 (one-block loop, mostly f's code inlined at site 2, its branch main's) -> 1,
        // 1 -> 2.
        let successors = vec![vec![1], vec![1, 2], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![
            vec![at(&[])],
            vec![at(&[2]), at(&[2]), at(&[])],
            vec![at(&[])],
        ];
        let chains = block_chains(&successors, &locations);
        assert_eq!(chains[1], [2]);
        // By its blocks alone, the loop would be f's.
        let by_blocks = build(&forest, &chains, &[]);
        assert_eq!(by_blocks.nodes[1].kind, Inlined(2));
        // By its back edge, it is main's, with f's code inside its body.
        let tree = build(&forest, &chains, &[Some(vec![])]);
        assert_eq!(
            shape(&tree),
            [
                (Function, None),
                (Loop(0), Some(0)),
                (LoopBody(0), Some(1)),
                (Inlined(2), Some(2)),
            ]
        );
        assert_eq!(tree.block_region, [0, 3, 0]);
        // A back edge whose chain does not extend the enclosing loop's context is ignored.
        let nested = vec![vec![1], vec![2], vec![2, 1], vec![]];
        let forest = find_loops(&nested, 0);
        let locations = vec![vec![at(&[])], vec![at(&[5])], vec![at(&[5])], vec![at(&[])]];
        let chains = block_chains(&nested, &locations);
        let tree = build(&forest, &chains, &[Some(vec![5]), Some(vec![6])]);
        for (i, node) in tree.nodes.iter().enumerate().skip(1) {
            assert!(!matches!(node.kind, Inlined(6)), "{i}: {:?}", shape(&tree));
        }
    }

    #[test]
    fn settles_enter_and_leave_inlined_calls_and_leave_loops() {
        // The tree of a_call_inlined_in_a_loop_body_is_a_region_under_the_body: 0 -> 1
        // (header) -> 2 (h in g) -> 4 (g) -> 1, 1 -> 5.
        let successors = vec![vec![1], vec![2, 5], vec![4], vec![], vec![1], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![
            vec![at(&[])],
            vec![at(&[])],
            vec![at(&[3, 4])],
            vec![],
            vec![at(&[3])],
            vec![at(&[])],
        ];
        let tree = build(&forest, &block_chains(&successors, &locations), &[]);
        // 2 enters g and h, 4 leaves h, 5 leaves the loop; 3 is unreachable.
        assert_eq!(
            settle_points(&tree, &forest, &successors, &[]),
            [(2, 4), (4, 3), (5, 0)]
        );
        // A function whose first block is an inlined call's, and a header that is.
        let successors = vec![vec![1], vec![1, 2], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![vec![at(&[1])], vec![at(&[2])], vec![at(&[])]];
        let tree = build(
            &forest,
            &block_chains(&successors, &locations),
            &[Some(vec![])],
        );
        assert_eq!(
            shape(&tree),
            [
                (Function, None),
                (Inlined(1), Some(0)),
                (Loop(0), Some(0)),
                (LoopBody(0), Some(2)),
                (Inlined(2), Some(3)),
            ]
        );
        assert_eq!(
            settle_points(&tree, &forest, &successors, &[]),
            [(0, 1), (1, 4), (2, 0)]
        );
    }

    #[test]
    fn inlined_calls_without_accesses_or_calls_are_left_out() {
        // Site 1 (inside it, 2) touches memory in block 1; site 3 is arithmetic only; site
        // 4 only holds site 5, which touches memory: 4 counts too. Site 6 is arithmetic
        // only but holds a loop (the back edge of loop 1 is its code): it stays, so that
        // its loop is its own, not its caller's.
        let mut chains = vec![
            vec![1],
            vec![1, 2],
            vec![3],
            vec![1, 3],
            vec![4],
            vec![4, 5],
            vec![6],
        ];
        let measured = [false, true, false, false, false, true, false];
        let mut back_edges = vec![Some(vec![1]), Some(vec![6]), Some(vec![1, 2])];
        drop_unmeasured_calls(&mut chains, &mut back_edges, &measured);
        assert_eq!(
            chains,
            [
                vec![1],
                vec![1, 2],
                vec![],
                vec![1],
                vec![4],
                vec![4, 5],
                vec![6]
            ]
        );
        assert_eq!(back_edges, [Some(vec![1]), Some(vec![6]), Some(vec![1, 2])]);
    }

    #[test]
    fn pieces_of_a_call_without_accesses_or_calls_are_their_callers_code() {
        // bzip2's handle_compress at -O3: the address arithmetic of isempty_RL (site 1)
        // hoisted into the entry block 0, its load in block 2 of the caller's loop (header
        // 1). Site 2's test (block 4, no access) leads into its load (block 5): one piece,
        // kept. Site 3 is a loop of its own (blocks 6, 7, its back edge its code) that makes
        // no access, and a load in block 9 apart from it: the loop stays the call's.
        //   0 -> 1 -> 2 -> {1, 3}, 3 -> 4 -> 5 -> 6 -> 7 -> {6, 8}, 8 -> 9 -> 10
        let successors = vec![
            vec![1],
            vec![2],
            vec![1, 3],
            vec![4],
            vec![5],
            vec![6],
            vec![7],
            vec![6, 8],
            vec![9],
            vec![10],
            vec![],
        ];
        let forest = find_loops(&successors, 0);
        let mut chains = vec![
            vec![1],
            vec![],
            vec![1],
            vec![],
            vec![2],
            vec![2],
            vec![3],
            vec![3],
            vec![],
            vec![3],
            vec![],
        ];
        let measured = [
            false, false, true, false, false, true, false, false, false, true, false,
        ];
        let back_edges = vec![Some(vec![]), Some(vec![3])];
        drop_unmeasured_call_pieces(&forest, &mut chains, &back_edges, &successors, &measured);
        assert_eq!(
            chains,
            [
                vec![],
                vec![],
                vec![1],
                vec![],
                vec![2],
                vec![2],
                vec![3],
                vec![3],
                vec![],
                vec![3],
                vec![],
            ]
        );
    }

    #[test]
    fn the_merged_head_and_tail_of_calls_of_one_function_are_their_callers_code() {
        // if (a > b) { f(a); f(b); } else { f(b); f(a); } (sites 1, 2 and 3, 4): the first
        // calls' common head merged before the test (block 1, site 5, line 0), their second
        // calls' common tail after them (6, site 5 too). Each piece on its own: the head goes
        // only into calls of f, the tail comes only from them: both the caller's.
        //   0 -> 1 -> {2, 4}, 2 -> 3 -> 6, 4 -> 5 -> 6, 3 -> 7, 5 -> 7, 6 -> 7
        let successors = vec![
            vec![1],
            vec![2, 4],
            vec![3],
            vec![6, 7],
            vec![5],
            vec![6, 7],
            vec![7],
            vec![],
        ];
        let chains = vec![
            vec![],
            vec![5],
            vec![1],
            vec![2],
            vec![3],
            vec![4],
            vec![5],
            vec![],
        ];
        let callee = |site: Site| if site <= 5 { 'f' } else { 'g' };
        let merged = |site: Site| site == 5;
        let mut folded = chains.clone();
        fold_merged_call_tails(&mut folded, &mut [], &successors, merged, |_| false, callee);
        let mut expected = chains.clone();
        expected[1].clear();
        expected[6].clear();
        assert_eq!(folded, expected);
        // A merged head that goes into one call only (f(x) merged from two ways, then f(y)
        // right after): two calls, kept.
        let successors = vec![vec![1], vec![2], vec![3], vec![]];
        let chains = vec![vec![], vec![5], vec![1], vec![]];
        let mut kept = chains.clone();
        fold_merged_call_tails(&mut kept, &mut [], &successors, merged, |_| false, callee);
        assert_eq!(kept, chains);
    }

    #[test]
    fn the_merged_tail_of_calls_of_one_function_is_their_callers_code() {
        // Function f inlined at sites 1 and 2 (blocks 1 and 2), their common tail merged
        // into block 3 at site 3 (line 0, f again, with f's own call 4 inside in block 4),
        // entered from both heads only: the caller's code. Site 5 (line 0, g) is a whole
        // merged call of g, entered from the caller's block 5: it stays a call.
        //   0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3, 3 -> 4 -> 5 -> 6 -> 7
        let successors = vec![
            vec![1, 2],
            vec![3],
            vec![3],
            vec![4],
            vec![5],
            vec![6],
            vec![7],
            vec![],
        ];
        let mut chains = vec![
            vec![],
            vec![1],
            vec![2],
            vec![3],
            vec![3, 4],
            vec![],
            vec![5],
            vec![],
        ];
        let mut back_edges = vec![Some(vec![3, 4]), Some(vec![5]), None];
        let callee = |site: Site| match site {
            1..=3 => 'f',
            4 => 'h',
            _ => 'g',
        };
        let merged = |site: Site| site == 3 || site == 5;
        let piece = |_: Site| false;
        fold_merged_call_tails(
            &mut chains,
            &mut back_edges,
            &successors,
            merged,
            piece,
            callee,
        );
        assert_eq!(
            chains,
            [
                vec![],
                vec![1],
                vec![2],
                vec![],
                vec![],
                vec![],
                vec![5],
                vec![]
            ]
        );
        assert_eq!(back_edges, [Some(vec![]), Some(vec![5]), None]);
        // Entered from the caller's code too (0 -> 3): a call of its own.
        let mut successors = successors;
        successors[0].push(3);
        let mut chains = vec![vec![], vec![1], vec![2], vec![3], vec![3, 4]];
        let before = chains.clone();
        fold_merged_call_tails(
            &mut chains,
            &mut [],
            &successors[..5],
            merged,
            piece,
            callee,
        );
        assert_eq!(chains, before);
        // Unless it is a piece of calls 1 and 2, whose code remains: their common head
        // hoisted before the branch (0 -> 3 -> 1, 3 -> 2), or out of a loop around them.
        let successors = vec![vec![3], vec![4], vec![4], vec![1, 2], vec![]];
        let mut chains = vec![vec![], vec![1], vec![2], vec![3], vec![]];
        let piece = |site: Site| site == 3;
        fold_merged_call_tails(&mut chains, &mut [], &successors, merged, piece, callee);
        assert_eq!(chains, [vec![], vec![1], vec![2], vec![], vec![]]);
    }

    #[test]
    fn a_callers_block_where_a_loop_of_an_inlined_call_exits_is_the_calls() {
        // Call 1's code: 1 -> 2 (its loop, 2 -> 2) -> 3 -> 4, with block 3 holding a load
        // of the caller's (chain []) where the loop exits; block 5 is the caller's, entered
        // from the call and from block 0: it stays the caller's, as does block 6 after it.
        let successors = vec![
            vec![1, 5],
            vec![2],
            vec![2, 3],
            vec![4],
            vec![5],
            vec![6],
            vec![],
        ];
        let forest = find_loops(&successors, 0);
        let mut chains = vec![vec![], vec![1], vec![1], vec![], vec![1], vec![], vec![]];
        absorb_loop_exits_in_calls(&forest, &mut chains, &successors, &[Some(vec![1])]);
        assert_eq!(
            chains,
            [vec![], vec![1], vec![1], vec![1], vec![1], vec![], vec![]]
        );
        // Between two pieces of call 1 without a loop of its own (two calls laid side by
        // side: 1 -> 3 -> 4), the caller's block 3 tells them apart: it stays.
        let successors = vec![vec![1], vec![3], vec![], vec![4], vec![]];
        let forest = find_loops(&successors, 0);
        let mut chains = vec![vec![], vec![1], vec![], vec![], vec![1]];
        absorb_loop_exits_in_calls(&forest, &mut chains, &successors, &[]);
        assert_eq!(chains, [vec![], vec![1], vec![], vec![], vec![1]]);
    }

    #[test]
    fn a_loops_back_edges_share_their_common_chain() {
        // 0 -> 1 (header) -> 2 -> 1, 1 -> 3 -> 1, 3 -> 4: two back edges, from 2 and 3.
        let successors = vec![vec![1], vec![2, 3], vec![1], vec![1, 4], vec![]];
        let forest = find_loops(&successors, 0);
        let terminators = vec![
            None,
            Some(vec![9]),
            Some(vec![1, 2]),
            Some(vec![1, 5]),
            None,
        ];
        assert_eq!(
            back_edge_chains(&forest, &successors, &terminators),
            [Some(vec![1])]
        );
        let unlocated = vec![None; 5];
        assert_eq!(back_edge_chains(&forest, &successors, &unlocated), [None]);
    }

    #[test]
    fn a_loop_is_where_its_metadata_says_it_is_written() {
        // 0 -> 1 (header) -> 2 -> 1, 1 -> 3: the loop's code is in the call at site 4 (line
        // 10, column 3), its latch 2 in the call at site 6 (line 20, column 5) inside it.
        let successors = vec![vec![1], vec![2, 3], vec![1], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![vec![], vec![at(&[4])], vec![at(&[4, 6])], vec![]];
        let call = |site: Site| match site {
            4 => (10, 3),
            6 => (20, 5),
            _ => (0, 0),
        };
        let placed = |declared: Option<Vec<(u32, u32)>>| {
            let mut back_edges = vec![Some(vec![4, 6])];
            declared_back_edges(&forest, &locations, &mut back_edges, &[declared], call);
            back_edges
        };
        // Written in the function's own source (the caller's loop around the calls).
        assert_eq!(placed(Some(vec![])), [Some(vec![])]);
        // In the outer call's source, or in the inner one's.
        assert_eq!(placed(Some(vec![(10, 3)])), [Some(vec![4])]);
        assert_eq!(placed(Some(vec![(10, 3), (20, 5)])), [Some(vec![4, 6])]);
        // In calls none of its code is in, or nothing declared: its back edges' chain.
        assert_eq!(placed(Some(vec![(30, 1)])), [Some(vec![4, 6])]);
        assert_eq!(placed(None), [Some(vec![4, 6])]);
    }

    #[test]
    fn a_loop_is_not_in_a_call_of_a_function_without_loops() {
        // 0 -> 1 (header) -> 2 -> 1, 1 -> 3: the loop's condition is the function's own code
        // (line 20), its latch 2 the code of the call at site 5 (line 21; the callee's line
        // 7), which branches back to the header. No metadata placed it.
        let successors = vec![vec![1], vec![2, 3], vec![1], vec![]];
        let forest = find_loops(&successors, 0);
        let locations = vec![
            vec![],
            vec![line(&[], &[20])],
            vec![line(&[5], &[21, 7]), line(&[5], &[21, 8])],
            vec![],
        ];
        let placed_by = |callee: Option<Vec<(u32, u32)>>, own: Vec<(u32, u32)>, placed: bool| {
            let mut back_edges = vec![Some(vec![5])];
            let loops_of = |site: Option<Site>| match site {
                None => Some(own.as_slice()),
                Some(_) => callee.as_deref(),
            };
            written_back_edges(&forest, &locations, &mut back_edges, &[placed], loops_of);
            back_edges
        };
        // The callee has no loop as written: the loop is the function's (20-22).
        assert_eq!(
            placed_by(Some(vec![]), vec![(20, 22)], false),
            [Some(vec![])]
        );
        // The callee has loops, or nothing is known of it, or the metadata placed the loop,
        // or the function has no loop at these lines: the back edges' chain stands.
        assert_eq!(
            placed_by(Some(vec![(7, 8)]), vec![(20, 22)], false),
            [Some(vec![5])]
        );
        assert_eq!(placed_by(None, vec![(20, 22)], false), [Some(vec![5])]);
        assert_eq!(
            placed_by(Some(vec![]), vec![(20, 22)], true),
            [Some(vec![5])]
        );
        assert_eq!(
            placed_by(Some(vec![]), vec![(40, 45)], false),
            [Some(vec![5])]
        );
    }

    #[test]
    fn a_loop_as_written_holds_a_loop_by_its_share_of_instructions() {
        // Four instructions at 10 and 11, one at 3 (moved in from before the loop).
        let code = [10, 10, 11, 11, 3];
        assert!(holds_most_of(10, 12, &code));
        assert!(!holds_most_of(10, 10, &code));
        assert!(!holds_most_of(20, 30, &code));
        assert!(!holds_most_of(10, 12, &[]));
    }

    #[test]
    fn blocks_without_locations_inherit_what_their_predecessors_share() {
        // 0 (site 1) -> 1 (no location) -> 2 (site 1, 2); 0 -> 3 (site 1, 5) -> 1.
        let successors = vec![vec![1, 3], vec![2], vec![], vec![1]];
        let locations = vec![vec![at(&[1])], vec![], vec![at(&[1, 2])], vec![at(&[1, 5])]];
        assert_eq!(
            block_chains(&successors, &locations),
            [vec![1], vec![1], vec![1, 2], vec![1, 5]]
        );
        // The majority wins, the first of equals breaks ties.
        let locations = vec![vec![at(&[1]), at(&[2]), at(&[2])], vec![at(&[4]), at(&[3])]];
        assert_eq!(
            block_chains(&[vec![1], vec![]], &locations),
            [vec![2], vec![4]]
        );
    }

    #[test]
    fn every_block_path_runs_through_the_bodies_of_its_loops() {
        // Random CFGs and chains: the tree's invariants hold.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let n = 2 + next(10) as usize;
            let successors: Vec<Vec<usize>> = (0..n)
                .map(|_| (0..next(3)).map(|_| next(n as u64) as usize).collect())
                .collect();
            let locations: Vec<Vec<Location>> = (0..n)
                .map(|_| {
                    (0..next(3))
                        .map(|_| {
                            let depth = next(3) as usize;
                            at(&(0..depth)
                                .map(|d| d as u32 * 10 + next(2) as u32)
                                .collect::<Vec<_>>())
                        })
                        .collect()
                })
                .collect();
            let forest = find_loops(&successors, 0);
            // Without inlined code: the function, then each loop of the forest in its
            // order with its body, under its enclosing loop's body.
            let plain = build(&forest, &vec![Vec::new(); n], &[]);
            let mut expected = vec![(Function, None)];
            for (k, lp) in forest.loops.iter().enumerate() {
                expected.push((Loop(k), Some(lp.parent.map_or(0, |o| 2 + 2 * o))));
                expected.push((LoopBody(k), Some(1 + 2 * k)));
            }
            assert_eq!(shape(&plain), expected);
            let back_edges: Vec<Option<Vec<Site>>> = (0..forest.loops.len())
                .map(|_| match next(3) {
                    0 => None,
                    d => Some((0..d - 1).map(|d| d as u32 * 10 + next(2) as u32).collect()),
                })
                .collect();
            let tree = build(&forest, &block_chains(&successors, &locations), &back_edges);
            for (i, node) in tree.nodes.iter().enumerate() {
                assert!(node.parent.is_none_or(|p| p < i), "pre-order");
                if let Loop(k) = node.kind {
                    assert_eq!(tree.nodes[i + 1].kind, LoopBody(k));
                    assert_eq!(tree.loop_node[k], i);
                }
            }
            for b in 0..n {
                let mut path = Vec::new();
                let mut at = Some(tree.block_region[b]);
                while let Some(i) = at {
                    path.push(tree.nodes[i].kind);
                    at = tree.nodes[i].parent;
                }
                for (k, lp) in forest.loops.iter().enumerate() {
                    assert_eq!(
                        path.contains(&LoopBody(k)),
                        lp.blocks.contains(&b),
                        "block {b}, loop {k}"
                    );
                }
            }
        }
    }
}
