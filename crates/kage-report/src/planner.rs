//! The parallelism planner of the hcpa tool (`docs/hcpa.md`, "The planner"): from each
//! region's work and self-parallelism, the regions worth parallelising, none of which ran
//! inside another, best first, with the program's estimated speedup.
//!
//! It works on source regions: the compiler's copies of a region (a loop split into a vector
//! body and a remainder, a function inlined in several places) are joined first
//! ([`Report::by_source`]'s rules), so a plan never names two copies of one loop. A plan row
//! names the first copy of its source region in the report it was made from (in a report
//! that is already by source, the source region itself).
//!
//! The planner is pure: the runtime calls [`plan_shapes`] when it writes an hcpa report, and
//! `kage report` calls [`plan`] (through [`Report::replan`]) when the report has no plan or is
//! asked for other options.

use crate::model::source::{hcpa_by_source, shapes};
use crate::model::{
    Hcpa, HcpaError, HcpaStats, Plan, PlanOptions, PlanRow, Region, RegionKind, RegionShape,
};
use crate::Report;
use std::cmp::Ordering;

/// The plan of a report with hcpa fields (as written, or already by source), or why its
/// fields cannot be read.
pub fn plan(report: &Report, options: &PlanOptions) -> Result<Plan, HcpaError> {
    Ok(plan_regions(&report.regions, &report.hcpa()?, options))
}

impl Report {
    /// Plans the report again with `options` ([`plan`]) and puts the plan in it (`"plan"`,
    /// `"plan_options"`), replacing the one it had.
    pub fn replan(&mut self, options: &PlanOptions) -> Result<Plan, HcpaError> {
        let plan = plan(self, options)?;
        self.set_hcpa_plan(&plan);
        Ok(plan)
    }
}

/// The plan for the static `regions` (ids equal to indices, parents before children, as in
/// any report; their metrics are not read) with the statistics in `hcpa` (`hcpa.regions` by
/// region id, `hcpa.work` the program's work).
///
/// Each source region *R* that ran is a candidate when its coverage is at least
/// `min_coverage`, its self-parallelism at least `min_sp`, it is a loop or another region ran
/// inside it (a function or loop body in which none did has only its own instructions to
/// overlap: parallelism for the processor, not for threads), and its saving
/// `work(R) × (1 − 1 / min(SP(R), cores))` is positive. From each region that ran inside no
/// other, the plan takes a region when its own saving is at least the best its children can
/// save together, and looks inside it otherwise (Kremlin's planner): nesting is through the
/// regions' `parents` (plus their static parents, which always hold them), cycles from
/// recursion included. Rows are ordered by saving (then coverage, then id), and a region
/// that ran inside or around one above it (reached from two sides) is left out. A row's `speedup` is
/// `work(program) / (work(program) − Σ saving)` over it and the rows above it, at most
/// `cores`.
pub fn plan_regions(regions: &[Region], hcpa: &Hcpa, options: &PlanOptions) -> Plan {
    plan_shapes(&shapes(regions), hcpa, options)
}

/// [`plan_regions`] on the regions' shapes ([`Region::shape`]): all the planner reads.
pub fn plan_shapes(regions: &[RegionShape], hcpa: &Hcpa, options: &PlanOptions) -> Plan {
    let options = PlanOptions {
        cores: options.cores.max(1),
        ..*options
    };
    let mut plan = Plan {
        options,
        rows: Vec::new(),
    };
    let program_work = hcpa.work as f64;
    if hcpa.work == 0 {
        return plan;
    }
    let source = hcpa_by_source(regions, &hcpa.regions, hcpa.work);
    let count = source.stats.len();

    // The nesting graph over source regions: each one's parents and children, from the
    // regions that ran.
    let mut parents: Vec<Vec<u32>> = vec![Vec::new(); count];
    for (id, stats) in source.stats.iter().enumerate() {
        let Some(stats) = stats else { continue };
        let first = &regions[source.first[id] as usize];
        let static_parent = match first.kind {
            RegionKind::Function => None,
            _ => first.parent.map(|p| source.of[p as usize]),
        };
        parents[id].extend(
            stats
                .parents
                .iter()
                .copied()
                .filter(|&p| (p as usize) < count),
        );
        parents[id].extend(static_parent);
        parents[id].sort_unstable();
        parents[id].dedup();
    }
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); count];
    for (id, ps) in parents.iter().enumerate() {
        for &p in ps {
            children[p as usize].push(id as u32);
        }
    }

    let cores = options.cores as f64;
    // Each region's saving if parallelised alone: 0 for the regions that are no candidates.
    let savings: Vec<f64> = (source.stats.iter().enumerate())
        .map(|(id, stats)| {
            let Some(s) = stats else { return 0.0 };
            let kind = regions[source.first[id] as usize].kind;
            let ran_inside = s.work > s.self_work || !children[id].is_empty();
            let candidate = s.coverage >= options.min_coverage
                && s.self_parallelism >= options.min_sp
                && (kind == RegionKind::Loop || ran_inside);
            if candidate {
                saving(s, cores).max(0.0)
            } else {
                0.0
            }
        })
        .collect();
    // The best saving inside each region: itself, or the best of the regions directly
    // inside it, whichever is more (Kremlin's planner, over the nesting graph).
    let best = best_savings(&savings, &children);
    let mut chosen = Vec::new();
    let mut visited = vec![false; count];
    let roots = (0..count).filter(|&id| source.stats[id].is_some() && parents[id].is_empty());
    for root in roots {
        choose(
            root as u32,
            &savings,
            &best,
            &children,
            &mut visited,
            &mut chosen,
        );
    }
    // A region that runs inside several others may have been reached from two sides:
    // keep no two chosen regions that ran one inside the other, the larger saving first.
    chosen.sort_by(|&a, &b| {
        let (sa, sb) = (&source.stats[a as usize], &source.stats[b as usize]);
        let coverage = |s: &Option<HcpaStats>| s.as_ref().map_or(0.0, |s| s.coverage);
        (savings[b as usize].total_cmp(&savings[a as usize]))
            .then(coverage(sb).total_cmp(&coverage(sa)))
            .then(a.cmp(&b))
            .then(Ordering::Equal)
    });
    let mut nested = vec![false; count];
    let mut saved = 0.0;
    for id in chosen {
        let (Some(stats), saving) = (&source.stats[id as usize], savings[id as usize]) else {
            continue;
        };
        if nested[id as usize] || saving <= 0.0 {
            continue;
        }
        mark_reachable(id, &parents, &mut nested);
        mark_reachable(id, &children, &mut nested);
        saved += saving;
        let speedup = program_work / (program_work - saved).max(program_work / cores);
        plan.rows.push(PlanRow {
            region: source.first[id as usize],
            self_parallelism: stats.self_parallelism,
            coverage: stats.coverage,
            speedup,
            saving,
        });
    }
    plan
}

/// For each region, the larger of its own saving and the sum of its children's best: the
/// most a plan confined to it can save. A region that is its own descendant (recursion)
/// counts nothing for the repeated visit.
fn best_savings(savings: &[f64], children: &[Vec<u32>]) -> Vec<f64> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    let n = savings.len();
    let mut best = vec![0.0; n];
    let mut state = vec![State::New; n];
    for start in 0..n {
        if state[start] != State::New {
            continue;
        }
        // Iterative depth-first search: (region, next child to visit).
        let mut stack = vec![(start, 0usize)];
        state[start] = State::Open;
        while let Some(&mut (id, ref mut next)) = stack.last_mut() {
            if let Some(&child) = children[id].get(*next) {
                *next += 1;
                if state[child as usize] == State::New {
                    state[child as usize] = State::Open;
                    stack.push((child as usize, 0));
                }
                continue;
            }
            let inside: f64 = (children[id].iter())
                .filter(|&&c| state[c as usize] == State::Done)
                .map(|&c| best[c as usize])
                .sum();
            best[id] = savings[id].max(inside);
            state[id] = State::Done;
            stack.pop();
        }
    }
    best
}

/// Chooses `id` when its own saving is at least what the regions inside it can save
/// together, else looks inside; each region is looked at once.
fn choose(
    id: u32,
    savings: &[f64],
    best: &[f64],
    children: &[Vec<u32>],
    visited: &mut [bool],
    chosen: &mut Vec<u32>,
) {
    let mut stack = vec![id];
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut visited[id as usize], true) {
            continue;
        }
        let own = savings[id as usize];
        if own > 0.0 && own >= best[id as usize] {
            chosen.push(id);
        } else {
            stack.extend(children[id as usize].iter().rev().copied());
        }
    }
}

/// `work × (1 − 1 / min(SP, cores))`: the cost units parallelising a region alone would
/// save.
fn saving(stats: &HcpaStats, cores: f64) -> f64 {
    stats.work as f64 * (1.0 - 1.0 / stats.self_parallelism.min(cores))
}

/// Marks `from` and every region reachable from it through `edges` (cycles are fine: a
/// region is visited once).
fn mark_reachable(from: u32, edges: &[Vec<u32>], marked: &mut [bool]) {
    let mut seen = vec![false; edges.len()];
    let mut stack = vec![from];
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut seen[id as usize], true) {
            continue;
        }
        marked[id as usize] = true;
        stack.extend(edges[id as usize].iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CallSite;
    use serde_json::Map;

    /// A region without tool fields.
    fn region(id: u32, kind: RegionKind, name: &str, line: u32, parent: Option<u32>) -> Region {
        Region {
            id,
            kind,
            name: name.into(),
            symbol: name.into(),
            file: "/s/p.c".into(),
            line,
            end_line: line + 2,
            parent,
            inlined_at: None,
            metrics: Map::new(),
        }
    }

    /// Statistics with `work`, self-parallelism `sp` and `parents`; self work a tenth of the
    /// work (something ran inside), coverage out of `program`.
    fn stats(work: u64, sp: f64, parents: &[u32], program: u64) -> HcpaStats {
        HcpaStats {
            instances: 1,
            work,
            self_work: work / 10,
            critical_path: (work as f64 / sp).round() as u64,
            self_parallelism: sp,
            total_parallelism: sp,
            coverage: work as f64 / program as f64,
            parents: parents.to_vec(),
            parents_truncated: false,
        }
    }

    fn hcpa(work: u64, regions: Vec<Option<HcpaStats>>) -> Hcpa {
        Hcpa {
            work,
            critical_path: 1,
            max_depth: 64,
            granularity: 4,
            skipped_instances: 0,
            shadow_peak_bytes: 0,
            vsm: None,
            costs: Default::default(),
            threads: String::new(),
            regions,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// `(region, saving, speedup)` of each row.
    fn rows(plan: &Plan) -> Vec<(u32, f64, f64)> {
        plan.rows
            .iter()
            .map(|r| (r.region, r.saving, r.speedup))
            .collect()
    }

    fn assert_rows(plan: &Plan, expected: &[(u32, f64, f64)]) {
        let got = rows(plan);
        assert_eq!(got.len(), expected.len(), "{got:?}");
        for (g, e) in got.iter().zip(expected) {
            assert!(
                g.0 == e.0 && close(g.1, e.1) && close(g.2, e.2),
                "{got:?} != {expected:?}"
            );
        }
    }

    /// main (work 1000) with a loop (0.8 of it: SP 10) whose body holds a loop (0.6 of the
    /// program: SP 50).
    fn nest() -> (Vec<Region>, Hcpa) {
        use RegionKind::*;
        let regions = vec![
            region(0, Function, "main", 1, None),
            region(1, Loop, "main", 2, Some(0)),
            region(2, LoopBody, "main", 2, Some(1)),
            region(3, Loop, "main", 3, Some(2)),
            region(4, LoopBody, "main", 3, Some(3)),
        ];
        let stats = vec![
            Some(stats(1000, 1.0, &[], 1000)),
            Some(stats(800, 10.0, &[0], 1000)),
            Some(stats(790, 1.1, &[1], 1000)),
            Some(stats(600, 50.0, &[2], 1000)),
            Some(stats(590, 1.0, &[3], 1000)),
        ];
        (regions, hcpa(1000, stats))
    }

    #[test]
    fn of_two_nested_parallel_loops_only_the_better_one() {
        let (regions, hcpa) = nest();
        // On 4 cores: outer 800 × (1 − 1/4) = 600, inner 600 × 3/4 = 450: the outer one;
        // speedup 1000 / (1000 − 600) = 2.5.
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(4));
        assert_rows(&plan, &[(1, 600.0, 2.5)]);
        assert_eq!(plan.rows[0].self_parallelism, 10.0);
        assert_eq!(plan.rows[0].coverage, 0.8);
        // On 64 cores: outer 800 × (1 − 1/10) = 720, inner 600 × (1 − 1/50) = 588: still
        // the outer one.
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(64));
        assert_rows(&plan, &[(1, 720.0, 1000.0 / 280.0)]);
        // An inner loop with more work than its parent's saving can match: inner 780 ×
        // (1 − 1/50) = 764.4 > 720, so the inner one, and then the outer is nested.
        let (regions, mut hcpa) = nest();
        hcpa.regions[3] = Some(stats(780, 50.0, &[2], 1000));
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(64));
        assert_rows(&plan, &[(3, 764.4, 1000.0 / 235.6)]);
    }

    #[test]
    fn two_sibling_loops_are_both_taken() {
        use RegionKind::*;
        let regions = vec![
            region(0, Function, "main", 1, None),
            region(1, Loop, "main", 2, Some(0)),
            region(2, Loop, "main", 5, Some(0)),
        ];
        let hcpa = hcpa(
            1000,
            vec![
                Some(stats(1000, 1.2, &[], 1000)),
                Some(stats(500, 100.0, &[0], 1000)),
                Some(stats(300, 2.0, &[0], 1000)),
            ],
        );
        // On 8 cores: 500 × 7/8 = 437.5, then 300 × (1 − 1/2) = 150; main's 1000 × (1 −
        // 1/1.2) = 166.7 is under its SP threshold (1.2 < 1.5).
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(8));
        assert_rows(
            &plan,
            &[
                (1, 437.5, 1000.0 / 562.5),
                (2, 150.0, 1000.0 / (1000.0 - 587.5)),
            ],
        );
        // Thresholds: coverage 0.3 < 0.4 leaves the second out; min_sp 2.5 too.
        let options = PlanOptions {
            min_coverage: 0.4,
            ..PlanOptions::with_cores(8)
        };
        assert_rows(
            &plan_regions(&regions, &hcpa, &options),
            &[(1, 437.5, 1000.0 / 562.5)],
        );
        let options = PlanOptions {
            min_sp: 2.5,
            ..PlanOptions::with_cores(8)
        };
        assert_eq!(plan_regions(&regions, &hcpa, &options).rows.len(), 1);
        // A lower min_sp takes main in, but main holds both loops: still the loops alone.
        let options = PlanOptions {
            min_sp: 1.0,
            ..PlanOptions::with_cores(8)
        };
        assert_eq!(rows(&plan_regions(&regions, &hcpa, &options)).len(), 2);
        // One core: nothing saves anything.
        assert!(plan_regions(&regions, &hcpa, &PlanOptions::with_cores(1))
            .rows
            .is_empty());
    }

    #[test]
    fn children_that_save_more_together_win_over_their_parent() {
        use RegionKind::*;
        let regions = vec![
            region(0, Function, "main", 1, None),
            region(1, Loop, "main", 2, Some(0)),
            region(2, Loop, "main", 5, Some(0)),
        ];
        // main: 1000 × (1 − 1/2) = 500 alone; its loops 450 × (1 − 1/64) = 442.97 each,
        // 885.9 together: the loops, although main alone saves more than either.
        let hcpa = hcpa(
            1000,
            vec![
                Some(stats(1000, 2.0, &[], 1000)),
                Some(stats(450, 100.0, &[0], 1000)),
                Some(stats(450, 80.0, &[0], 1000)),
            ],
        );
        let each = 450.0 * (1.0 - 1.0 / 64.0);
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(64));
        assert_rows(
            &plan,
            &[
                (1, each, 1000.0 / (1000.0 - each)),
                (2, each, 1000.0 / (1000.0 - 2.0 * each)),
            ],
        );
        // On 2 cores each loop saves 225, together 450 < 500: main.
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(2));
        assert_rows(&plan, &[(0, 500.0, 2.0)]);
    }

    #[test]
    fn recursion_cycles_terminate_and_block_both_ways() {
        use RegionKind::*;
        // main calls f; f and g call each other (f's parents: main, g; g's: f), and g calls
        // h, a function with a loop.
        let regions = vec![
            region(0, Function, "main", 1, None),
            region(1, Function, "f", 10, None),
            region(2, Function, "g", 20, None),
            region(3, Function, "h", 30, None),
            region(4, Loop, "h", 31, Some(3)),
        ];
        let hcpa = hcpa(
            1000,
            vec![
                Some(stats(1000, 1.0, &[], 1000)),
                Some(stats(900, 3.0, &[0, 2], 1000)),
                Some(stats(850, 4.0, &[1], 1000)),
                Some(stats(400, 2.0, &[2], 1000)),
                Some(stats(380, 2.0, &[3], 1000)),
            ],
        );
        // On 4 cores: f 900 × 2/3 = 600, g 850 × 3/4 = 637.5, h 200, h's loop 190. g first;
        // f is its ancestor and descendant, h and the loop its descendants.
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(4));
        assert_rows(&plan, &[(2, 637.5, 1000.0 / 362.5)]);
        // A function that calls itself: fib's parents are main and fib. Its work is all
        // self work (the only region inside it is itself), but it is not a leaf.
        let regions = vec![
            region(0, Function, "main", 1, None),
            region(1, Function, "fib", 10, None),
        ];
        let mut fib = stats(500, 2.0, &[0, 1], 1000);
        fib.self_work = fib.work;
        let hcpa = self::hcpa(1000, vec![Some(stats(1000, 1.0, &[], 1000)), Some(fib)]);
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(4));
        assert_rows(&plan, &[(1, 250.0, 1000.0 / 750.0)]);
    }

    #[test]
    fn leaves_other_than_loops_are_left_out() {
        use RegionKind::*;
        // A serial loop (SP 1) whose body overlaps its own instructions (SP 1.9), and a leaf
        // function with instruction-level parallelism; a leaf loop (bodies not measured) is a
        // candidate.
        let regions = vec![
            region(0, Function, "main", 1, None),
            region(1, Loop, "main", 2, Some(0)),
            region(2, LoopBody, "main", 2, Some(1)),
            region(3, Function, "leaf", 10, None),
            region(4, Loop, "main", 5, Some(0)),
        ];
        let leaf = |work: u64, sp: f64, parents: &[u32]| HcpaStats {
            self_work: work,
            ..stats(work, sp, parents, 1000)
        };
        let hcpa = hcpa(
            1000,
            vec![
                Some(stats(1000, 1.0, &[], 1000)),
                Some(stats(500, 1.0, &[0], 1000)),
                Some(leaf(490, 1.9, &[1])),
                Some(leaf(200, 3.0, &[0])),
                Some(leaf(100, 8.0, &[0])),
            ],
        );
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(4));
        assert_rows(&plan, &[(4, 75.0, 1000.0 / 925.0)]);
    }

    #[test]
    fn copies_are_planned_as_their_source_region() {
        use RegionKind::*;
        // scale inlined in main (1) with its loop split in two copies (2: SP 100, work 600;
        // 3: SP 2, work 40), and scale as emitted (4) with its loop (5), which also ran
        // (work 300, SP 10), called from main.
        let mut inlined = region(1, Function, "scale", 10, Some(0));
        inlined.inlined_at = Some(CallSite {
            file: "/s/p.c".into(),
            line: 3,
            column: 5,
        });
        let regions = vec![
            region(0, Function, "main", 1, None),
            inlined,
            region(2, Loop, "scale", 11, Some(1)),
            region(3, Loop, "scale", 11, Some(1)),
            region(4, Function, "scale", 10, None),
            region(5, Loop, "scale", 11, Some(4)),
        ];
        let hcpa = hcpa(
            1000,
            vec![
                Some(stats(1000, 1.0, &[], 1000)),
                Some(stats(650, 1.0, &[0], 1000)),
                Some(stats(600, 100.0, &[1], 1000)),
                Some(stats(40, 2.0, &[1], 1000)),
                Some(stats(310, 1.0, &[0], 1000)),
                Some(stats(300, 10.0, &[4], 1000)),
            ],
        );
        // The source loop: work 940, SP 940 / (600/100 + 40/2 + 300/10) = 940 / 56; on 8
        // cores its saving is 940 × 7/8 = 822.5. It is named by its first copy, 2.
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(8));
        assert_rows(&plan, &[(2, 822.5, 1000.0 / 177.5)]);
        assert!(close(plan.rows[0].self_parallelism, 940.0 / 56.0));
        assert!(close(plan.rows[0].coverage, 0.94));
        // The same report by source: the same plan, named by source ids (the loop is 2).
        let source = hcpa_by_source(&shapes(&regions), &hcpa.regions, 1000);
        assert_eq!(source.of, [0, 1, 2, 2, 1, 2]);
        assert_eq!(source.first, [0, 1, 2]);
        let joined = source.stats[2].as_ref().unwrap();
        assert_eq!((joined.work, joined.parents.as_slice()), (940, &[1][..]));
        assert_eq!(source.stats[1].as_ref().unwrap().parents, [0]);
    }

    #[test]
    fn speedup_never_exceeds_the_cores_and_an_empty_program_has_no_plan() {
        use RegionKind::*;
        let regions = vec![
            region(0, Function, "a", 1, None),
            region(1, Function, "b", 5, None),
        ];
        // Two roots whose work adds up to more than the program's (as threads may).
        let hcpa = hcpa(
            1000,
            vec![
                Some(stats(1000, 100.0, &[], 1000)),
                Some(stats(1000, 100.0, &[], 1000)),
            ],
        );
        let plan = plan_regions(&regions, &hcpa, &PlanOptions::with_cores(4));
        assert_eq!(plan.rows.len(), 2);
        assert_eq!(plan.rows[1].speedup, 4.0);
        assert!(plan_regions(
            &regions,
            &self::hcpa(0, vec![None, None]),
            &PlanOptions::with_cores(4)
        )
        .rows
        .is_empty());
        // Zero cores means one.
        let zero = PlanOptions {
            cores: 0,
            ..PlanOptions::with_cores(4)
        };
        assert_eq!(plan_regions(&regions, &hcpa, &zero).options.cores, 1);
    }
}
