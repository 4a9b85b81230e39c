//! Whether two affine memory references of a loop nest can touch a common byte in two
//! iterations that a given loop level separates: the dependences that level carries (VMAD
//! §5.2, "beyond VMAD").
//!
//! VMAD compares the value ranges of the two address functions ([`may_overlap`]) and gives up
//! when they overlap, so `a[i][j] = a[i-1][j]` keeps even its inner loop sequential.
//! [`carried`] decides the integer problem instead.
//!
//! # Method
//! With v a's iterations and w b's, the question is whether integers exist with v = w on the
//! levels outside `level`, w = v + d with d ≥ 1 at `level`, every iterator within its
//! (possibly triangular) bounds, and `a(v) − b(w)` in `(−a.size, b.size)`. With variables
//! numbered so that each bound only involves earlier ones (the shared iterators, v_level, d,
//! then v_k and δ_k = w_k − v_k per inner common level k, then each reference's own loops),
//! that is one equation `lo ≤ Σ c_k·y_k ≤ hi` under triangular bounds. A depth-first search
//! over the variables decides it. At each node it prunes with the bounds and the GCD of what
//! remains of the sum, narrows the variable it enumerates to the values the sum allows, tries
//! one value of a variable absent from the equation when a smaller (or larger) one can only
//! loosen the other bounds, and solves the last two variables exactly (per value of the sum,
//! the solutions are a line of integer points, and the bounds cut out a segment of it).
//! The distance is constant when no solution has another value of d or of a δ_k: two more
//! searches per component check that.
//!
//! # Exactness
//! Every step is exact, so [`carried`] returns `None` exactly when no such iterations exist,
//! and a distance exactly when all of them share it, unless a search gives up: after 2^14
//! nodes, or when an iterator may exceed 2^56 (beyond that, sums of products could overflow
//! 128 bits). Giving up answers `Some` without a distance, which is sound. Nests of depth ≤ 3
//! whose loops each run at most 10 iterations never give up (with strides below 2^48 and
//! sizes below 512 bytes). Beyond that it depends on the pruning. Measured: the 2-deep
//! stencils (Gauss–Seidel) stay exact at N = 10^6, a 3-deep one at N = 10^4 (at 10^6 its
//! distance is unknown), the triangular transpose at N = 100, but it gives up from N = 1000:
//! a variable absent from the equation that bounds later ones in both directions (the outer
//! iterator of a triangular nest, or v_k of an inner common level) is enumerated.

use crate::Affine;

/// One memory reference: the bytes `[address(v), address(v) + size)` for every iterator
/// vector v of its chain of loops (outermost first) inside the iteration domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// address(v): constant = base address, coefficients = byte stride per level of the
    /// chain (length = depth of the chain, at least 1; missing trailing strides count as 0).
    pub address: Affine,
    /// Bytes accessed (≥ 1).
    pub size: u64,
    /// Per level of the chain, outermost first: the largest value its iterator takes, as an
    /// affine function of the iterators of the levels outside it in the chain (its
    /// coefficients have length = that level's index; coefficient j applies to level j).
    /// Each iterator ranges over `0..=max`. A max below 0 means the level runs no iteration
    /// there.
    pub max: Vec<Affine>,
}

/// Which reference runs in the earlier iteration of the carrying level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// `a` in the earlier iteration, `b` in the later one.
    AFirst,
    /// `b` in the earlier iteration, `a` in the later one.
    BFirst,
}

/// A dependence that a level carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependence {
    /// When the dependence has a constant distance on the common levels: per common level
    /// (outermost first), b's iterator minus a's iterator. None when not constant (or unknown).
    pub distance: Option<Vec<i64>>,
}

/// Whether `a` and `b` can touch a common byte in iterations v (of a) and w (of b) with
/// `v[j] == w[j]` for every `j < level`, and `v[level] < w[level]` (`Order::AFirst`) or
/// `v[level] > w[level]` (`Order::BFirst`). The first `common` levels of both chains are the
/// same loops (so their `max` functions agree there); `level < common`. Levels of a chain
/// beyond `common` are different loops in a and b: their iterators are free (independent)
/// within their bounds.
///
/// Sound: never `None` when such integer iterations exist. Exact (no spurious `Some`, and a
/// distance whenever it is constant) unless the search gives up, as the module documentation
/// details.
///
/// # Panics
/// If `level < common <= depth of each chain` does not hold.
pub fn carried(
    a: &Reference,
    b: &Reference,
    common: usize,
    level: usize,
    order: Order,
) -> Option<Dependence> {
    decide(a, b, common, level, order).unwrap_or(Some(Dependence { distance: None }))
}

/// VMAD's value-range test: whether the bytes each reference may touch over its whole
/// iteration domain (from the bounds of its address function) intersect. A fast pre-filter:
/// when false, [`carried`] is `None` at every level.
pub fn may_overlap(a: &Reference, b: &Reference) -> bool {
    match (bytes(a), bytes(b)) {
        (Some(a), Some(b)) => a.0 <= b.1 && b.0 <= a.1,
        _ => false, // one of them never runs
    }
}

/// Iterator values beyond this make a search give up: with coefficients below 2^66, every sum
/// of up to 64 products then fits in an i128.
const LIMIT: i128 = 1 << 56;
/// Nodes one search may visit before giving up: bounds the time of a test.
const BUDGET: u32 = 1 << 14;

/// A search stopped before deciding (too many nodes, or values too large).
#[derive(Debug)]
struct GaveUp;

/// [`carried`], telling a proven dependence from a search that gave up.
fn decide(
    a: &Reference,
    b: &Reference,
    common: usize,
    level: usize,
    order: Order,
) -> Result<Option<Dependence>, GaveUp> {
    assert!(
        level < common && common <= a.max.len() && common <= b.max.len(),
        "carried: need level < common <= depth of each chain"
    );
    if a.max.len() + b.max.len() > 64 {
        return Err(GaveUp); // see LIMIT
    }
    // The overlap condition is symmetric, so b first is a first with the roles swapped.
    let (first, second, sign) = match order {
        Order::AFirst => (a, b, 1),
        Order::BFirst => (b, a, -1),
    };
    let system = System::new(first, second, common, level);
    let Some(witness) = search(&system, None)? else {
        return Ok(None);
    };
    // The distance is constant iff no solution has another value in any component.
    let n = system.equation.len();
    let mut distance = vec![0; level];
    for &k in &system.distances {
        let y = Lin::var(n, k);
        let below = y.scaled(-1).shifted(witness[k] - 1); // y_k ≤ witness − 1
        let above = y.shifted(-witness[k] - 1); // y_k ≥ witness + 1
        for extra in [below, above] {
            if !matches!(search(&system, Some(extra)), Ok(None)) {
                return Ok(Some(Dependence { distance: None }));
            }
        }
        distance.push(sign * witness[k] as i64); // |witness| ≤ 2 × LIMIT
    }
    Ok(Some(Dependence {
        distance: Some(distance),
    }))
}

/// `constant + Σ coefficients[k] × y[k]` over the variables of a search.
#[derive(Debug, Clone)]
struct Lin {
    constant: i128,
    coefficients: Vec<i128>,
}

impl Lin {
    fn constant(n: usize, constant: i128) -> Lin {
        let coefficients = vec![0; n];
        Lin {
            constant,
            coefficients,
        }
    }

    fn var(n: usize, k: usize) -> Lin {
        let mut lin = Lin::constant(n, 0);
        lin.coefficients[k] = 1;
        lin
    }

    /// `self + factor × other`.
    fn plus(&self, other: &Lin, factor: i128) -> Lin {
        let coefficients = (self.coefficients.iter().zip(&other.coefficients))
            .map(|(x, y)| x + factor * y)
            .collect();
        let constant = self.constant + factor * other.constant;
        Lin {
            constant,
            coefficients,
        }
    }

    fn scaled(&self, factor: i128) -> Lin {
        Lin::constant(self.coefficients.len(), 0).plus(self, factor)
    }

    fn shifted(&self, by: i128) -> Lin {
        Lin {
            constant: self.constant + by,
            ..self.clone()
        }
    }

    /// Its range when each variable k lies in `hull[k]` (variables beyond must not occur).
    fn range(&self, hull: &[(i128, i128)]) -> (i128, i128) {
        range(self.constant, self.coefficients.iter().copied(), hull)
    }
}

/// The range of `constant + Σ c_k × y_k` over the box `y_k ∈ hull[k]`.
fn range(
    constant: i128,
    coefficients: impl Iterator<Item = i128>,
    hull: &[(i128, i128)],
) -> (i128, i128) {
    (coefficients.zip(hull)).fold((constant, constant), |(lo, hi), (c, &(l, h))| {
        let (x, y) = (c * l, c * h);
        (lo + x.min(y), hi + x.max(y))
    })
}

/// `f` of the chain iterators, each an affine function of the search variables.
fn compose(f: &Affine, iterators: &[Lin], n: usize) -> Lin {
    (f.coefficients.iter().zip(iterators))
        .fold(Lin::constant(n, f.constant.into()), |sum, (&c, it)| {
            sum.plus(it, c.into())
        })
}

/// The question as integer constraints: every `constraints[i] ≥ 0`, and
/// `target.0 ≤ Σ equation[k] × y[k] ≤ target.1`.
struct System {
    constraints: Vec<Lin>,
    equation: Vec<i128>,
    target: (i128, i128),
    /// The variables holding b's iterator minus a's, per common level from `level` on.
    distances: Vec<usize>,
}

impl System {
    /// For `a` in the earlier iteration of `level`.
    fn new(a: &Reference, b: &Reference, common: usize, level: usize) -> System {
        let (a_depth, b_depth) = (a.max.len(), b.max.len());
        let n = a_depth + b_depth - level;
        // Each chain iterator as a function of the variables, numbered so that every bound
        // only involves earlier variables: x_0..x_{level-1} (shared), v_level, d, (v_k, δ_k)
        // per common level k > level, then a's own levels, then b's.
        let var = |k| Lin::var(n, k);
        let mut a_it: Vec<Lin> = (0..=level).map(var).collect();
        let mut b_it: Vec<Lin> = (0..level).map(var).collect();
        b_it.push(var(level).plus(&var(level + 1), 1)); // w = v + d
        let mut distances = vec![level + 1];
        let mut next = level + 2;
        for _ in level + 1..common {
            a_it.push(var(next));
            b_it.push(var(next).plus(&var(next + 1), 1)); // w_k = v_k + δ_k
            distances.push(next + 1);
            next += 2;
        }
        a_it.extend((next..).take(a_depth - common).map(var));
        b_it.extend((next + a_depth - common..n).map(var));

        let mut constraints = vec![var(level + 1).shifted(-1)]; // d ≥ 1
        for (r, it, is_b) in [(a, &a_it, false), (b, &b_it, true)] {
            // b's levels outside `level` are a's; its w_level = v_level + d ≥ 1 holds already
            // (and leaving that bound out lets the search try a single v_level when it can).
            let outside = if is_b { level } else { 0 };
            for (k, max) in r.max.iter().enumerate().skip(outside) {
                if !(is_b && k == level) {
                    constraints.push(it[k].clone()); // iterator ≥ 0
                }
                constraints.push(compose(max, &it[..k], n).plus(&it[k], -1)); // ≤ max
            }
        }
        // a(v) − b(w) ∈ [−(a.size − 1), b.size − 1]
        let e = compose(&a.address, &a_it, n).plus(&compose(&b.address, &b_it, n), -1);
        let target = (
            1 - i128::from(a.size) - e.constant,
            i128::from(b.size) - 1 - e.constant,
        );
        System {
            constraints,
            equation: e.coefficients,
            target,
            distances,
        }
    }
}

/// What a search (or one of its nodes) found: a solution, none, or nothing certain.
#[derive(Clone, Copy, PartialEq)]
enum Outcome {
    Empty,
    Found,
    GaveUp,
}

/// Which values of a variable absent from the equation the search needs to try.
#[derive(Clone, Copy, PartialEq)]
enum Pick {
    All,
    /// Its smallest (a larger one can only tighten the bounds of the later variables).
    Min,
    /// Its largest.
    Max,
}

/// A depth-first search over the variables in order.
struct Search<'s> {
    equation: &'s [i128],
    target: (i128, i128),
    /// Per variable: `y_k ≥` each lower, `y_k ≤` each upper, affine in earlier variables.
    lower: Vec<Vec<Lin>>,
    upper: Vec<Vec<Lin>>,
    pick: Vec<Pick>,
    /// The values assigned so far (a prefix), then a solution.
    values: Vec<i128>,
    nodes: u32,
}

/// A solution of `system` plus the constraint `extra ≥ 0`, if any.
fn search(system: &System, extra: Option<Lin>) -> Result<Option<Vec<i128>>, GaveUp> {
    let n = system.equation.len();
    let (mut lower, mut upper) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    for c in system.constraints.iter().chain(&extra) {
        // Each constraint is `±y_k + (earlier variables) ≥ 0` for its last variable k.
        let k = (0..n).rev().find(|&k| c.coefficients[k] != 0);
        let k = k.expect("every constraint bounds a variable");
        let unit = c.coefficients[k];
        assert!(
            unit.abs() == 1,
            "a chain iterator is ±1 × its last variable"
        );
        let mut rest = c.clone();
        rest.coefficients[k] = 0;
        match unit {
            1 => lower[k].push(rest.scaled(-1)),
            _ => upper[k].push(rest),
        }
    }
    let pick = (0..n)
        .map(|k| {
            if system.equation[k] != 0 {
                return Pick::All;
            }
            // Whether increasing y_k loosens (+1) or tightens (−1) each later bound.
            let effects = (lower[k + 1..]
                .iter()
                .flatten()
                .map(|l| -l.coefficients[k].signum()))
            .chain(
                upper[k + 1..]
                    .iter()
                    .flatten()
                    .map(|u| u.coefficients[k].signum()),
            );
            let effects: Vec<i128> = effects.filter(|&e| e != 0).collect();
            match (effects.contains(&1), effects.contains(&-1)) {
                (true, true) => Pick::All,
                (true, false) => Pick::Max,
                (false, _) => Pick::Min,
            }
        })
        .collect();
    let mut search = Search {
        equation: &system.equation,
        target: system.target,
        lower,
        upper,
        pick,
        values: vec![0; n],
        nodes: 0,
    };
    match search.dfs(0, 0) {
        Outcome::Empty => Ok(None),
        Outcome::Found => Ok(Some(search.values)),
        Outcome::GaveUp => Err(GaveUp),
    }
}

impl Search<'_> {
    /// Whether values of `y_k..` extend `values[..k]` (whose part of the sum is `sum`) to a
    /// solution, left in `values`.
    fn dfs(&mut self, k: usize, sum: i128) -> Outcome {
        self.nodes += 1;
        if self.nodes > BUDGET {
            return Outcome::GaveUp;
        }
        let hull = match self.hull(k) {
            Ok(hull) => hull,
            Err(outcome) => return outcome,
        };
        // What Σ_{j≥k} c_j·y_j must reach, what the variables after k can add, their GCD.
        let (lo, hi) = (self.target.0 - sum, self.target.1 - sum);
        let rest = range(0, self.equation[k + 1..].iter().copied(), &hull[k + 1..]);
        let g = self.equation[k..].iter().fold(0, |g, &c| gcd(g, c));
        let c = self.equation[k];
        let (mut from, mut to) = hull[k];
        let reach = range(0, [c].into_iter(), &hull[k..=k]);
        if !has_multiple(g, lo.max(reach.0 + rest.0), hi.min(reach.1 + rest.1)) {
            return Outcome::Empty;
        }
        if c != 0 {
            // c·y_k ∈ [lo − rest.1, hi − rest.0]
            let (l, h) = if c > 0 {
                (lo - rest.1, hi - rest.0)
            } else {
                (hi - rest.0, lo - rest.1)
            };
            from = from.max(ceil_div(l, c));
            to = to.min(floor_div(h, c));
        }
        if from > to {
            return Outcome::Empty;
        }
        if k + 1 == self.values.len() {
            self.values[k] = from; // exact: the check above had this variable alone
            return Outcome::Found;
        }
        if k + 2 == self.values.len() {
            if let Some(outcome) = self.last_two(k, lo, hi, from, to) {
                return outcome;
            }
        }
        match self.pick[k] {
            Pick::Min => to = from,
            Pick::Max => from = to,
            Pick::All => {}
        }
        for y in from..=to {
            self.values[k] = y;
            match self.dfs(k + 1, sum + c * y) {
                Outcome::Empty => {}
                other => return other,
            }
        }
        Outcome::Empty
    }

    /// Per variable, a range containing every value it can take given `values[..k]` (exact
    /// for `k` itself). Err when one is empty, or too large for exact arithmetic.
    fn hull(&self, k: usize) -> Result<Vec<(i128, i128)>, Outcome> {
        let mut hull: Vec<(i128, i128)> = self.values[..k].iter().map(|&y| (y, y)).collect();
        for j in k..self.values.len() {
            let lo = self.lower[j].iter().map(|l| l.range(&hull).0).max();
            let hi = self.upper[j].iter().map(|u| u.range(&hull).1).min();
            let (lo, hi) = (lo.unwrap_or(i128::MIN), hi.unwrap_or(i128::MAX));
            if lo > hi {
                return Err(Outcome::Empty);
            }
            if lo < -LIMIT || hi > LIMIT {
                return Err(Outcome::GaveUp);
            }
            hull.push((lo, hi));
        }
        Ok(hull)
    }

    /// Exactly whether `y_k ∈ from..=to` and the last variable `y_{k+1}` complete a
    /// solution, when `c_k·y_k + c_{k+1}·y_{k+1}` must lie in `[lo, hi]`: per value e of that
    /// sum, the integer solutions are a line `y = p + q·t`, and every bound becomes a bound on
    /// t. None when the numbers are too large for this (the caller then enumerates y_k).
    fn last_two(&mut self, k: usize, lo: i128, hi: i128, from: i128, to: i128) -> Option<Outcome> {
        let (c1, c2) = (self.equation[k], self.equation[k + 1]);
        let g = gcd(c1, c2);
        if c1.abs() > 1 << 48 || c2.abs() > 1 << 48 {
            return None; // products in the line would overflow
        }
        let sums: Vec<i128> = if g == 0 {
            (lo <= 0 && 0 <= hi).then_some(0).into_iter().collect()
        } else {
            let (first, last) = (ceil_div(lo, g), floor_div(hi, g));
            if last - first > 1024 {
                return None;
            }
            (first..=last).map(|m| m * g).collect()
        };
        // y_{k+1}'s bounds as (α, β): α·y_k + β with the earlier variables assigned.
        let known = |l: &Lin| {
            let beta = l.constant
                + (l.coefficients.iter().zip(&self.values[..k]))
                    .map(|(c, y)| c * y)
                    .sum::<i128>();
            (l.coefficients[k], beta)
        };
        let lower: Vec<(i128, i128)> = self.lower[k + 1].iter().map(known).collect();
        let upper: Vec<(i128, i128)> = self.upper[k + 1].iter().map(known).collect();
        for e in sums {
            // y_k = p1 + q1·t, and y_{k+1} = p2 + q2·t, or None when it is not in the sum.
            let ((p1, q1), second) = match (c1 != 0, c2 != 0) {
                (true, true) => {
                    let m = (c2 / g).abs();
                    let p1 = (ext_gcd(c1, c2).rem_euclid(m) * (e / g).rem_euclid(m)).rem_euclid(m);
                    ((p1, c2 / g), Some(((e - c1 * p1) / c2, -c1 / g)))
                }
                (false, true) if e % c2 == 0 => ((0, 1), Some((e / c2, 0))),
                (true, false) if e % c1 == 0 => ((e / c1, 0), None),
                (false, false) => ((0, 1), None),
                _ => continue,
            };
            // Constraints A·t + B ≥ 0: y_k within from..=to, then y_{k+1}'s bounds.
            let mut constraints = vec![(q1, p1 - from), (-q1, to - p1)];
            // α·y_k + β at the line: (α·q1)·t + (α·p1 + β)
            let at = |(alpha, beta): (i128, i128)| (alpha * q1, alpha * p1 + beta);
            match second {
                Some((p2, q2)) => {
                    constraints.extend(lower.iter().map(|&l| at(l)).map(|(a, b)| (q2 - a, p2 - b)));
                    constraints.extend(upper.iter().map(|&u| at(u)).map(|(a, b)| (a - q2, b - p2)));
                }
                None => {
                    // Only needs a value: every lower bound at most every upper bound.
                    for &l in &lower {
                        for &u in &upper {
                            let ((al, bl), (au, bu)) = (at(l), at(u));
                            constraints.push((au - al, bu - bl));
                        }
                    }
                }
            }
            if let Some(t) = solve(&constraints) {
                let y1 = p1 + q1 * t;
                self.values[k] = y1;
                self.values[k + 1] = match second {
                    Some((p2, q2)) => p2 + q2 * t,
                    None => lower.iter().map(|&(a, b)| a * y1 + b).max().unwrap_or(0),
                };
                return Some(Outcome::Found);
            }
        }
        Some(Outcome::Empty)
    }
}

/// An integer t with `A·t + B ≥ 0` for every `(A, B)`, if any.
fn solve(constraints: &[(i128, i128)]) -> Option<i128> {
    let (mut lo, mut hi) = (i128::MIN, i128::MAX);
    for &(a, b) in constraints {
        match a.signum() {
            1 => lo = lo.max(ceil_div(-b, a)),
            -1 => hi = hi.min(floor_div(b, -a)),
            _ if b < 0 => return None,
            _ => {}
        }
    }
    (lo <= hi).then_some(if lo > i128::MIN { lo } else { hi.min(0) })
}

/// Whether a multiple of `g ≥ 0` lies in `[lo, hi]`.
fn has_multiple(g: i128, lo: i128, hi: i128) -> bool {
    match g {
        _ if lo > hi => false,
        0 => lo <= 0 && 0 <= hi,
        _ => ceil_div(lo, g) * g <= hi,
    }
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// x with `a·x + b·y = gcd(a, b)` for some y.
fn ext_gcd(a: i128, b: i128) -> i128 {
    let (mut r0, mut r1, mut x0, mut x1) = (a, b, 1, 0);
    while r1 != 0 {
        let q = r0.div_euclid(r1);
        (r0, r1, x0, x1) = (r1, r0 - q * r1, x1, x0 - q * x1);
    }
    if r0 < 0 {
        -x0
    } else {
        x0
    }
}

fn floor_div(a: i128, b: i128) -> i128 {
    if b < 0 {
        (-a).div_euclid(-b)
    } else {
        a.div_euclid(b)
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    -floor_div(-a, b)
}

/// The bytes a reference may touch, first and last, from the ranges of its iterators; None
/// when it never runs; everything when an iterator may exceed [`LIMIT`].
fn bytes(r: &Reference) -> Option<(i128, i128)> {
    let mut hull = Vec::new();
    for max in &r.max {
        let (_, hi) = range(
            max.constant.into(),
            max.coefficients.iter().map(|&c| c.into()),
            &hull,
        );
        if hi < 0 {
            return None;
        }
        if hi > LIMIT {
            return Some((i128::MIN, i128::MAX));
        }
        hull.push((0, hi));
    }
    let coefficients = r.address.coefficients.iter().map(|&c| c.into());
    let (lo, hi) = range(r.address.constant.into(), coefficients, &hull);
    Some((lo, hi + i128::from(r.size) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    // ---- brute force ----

    /// Every iterator vector of a chain's domain.
    fn domain(r: &Reference) -> Vec<Vec<i64>> {
        let mut points = vec![Vec::new()];
        for max in &r.max {
            points = (points.into_iter())
                .flat_map(|p| {
                    let m = max.at(&p) as i64;
                    (0..=m).map(move |x| [p.as_slice(), &[x]].concat())
                })
                .collect();
        }
        points
    }

    /// Per level and order (AFirst, BFirst): the distances of the overlapping pairs of
    /// iterations that the level separates.
    fn brute_force(a: &Reference, b: &Reference, common: usize) -> Vec<[BTreeSet<Vec<i64>>; 2]> {
        let mut found = vec![[BTreeSet::new(), BTreeSet::new()]; common];
        let db = domain(b);
        for v in domain(a) {
            let av = a.address.at(&v);
            for w in &db {
                let bw = b.address.at(w);
                if av < bw + i128::from(b.size) && bw < av + i128::from(a.size) {
                    if let Some(l) = (0..common).find(|&j| v[j] != w[j]) {
                        let distance = (0..common).map(|j| w[j] - v[j]).collect();
                        found[l][usize::from(v[l] > w[l])].insert(distance);
                    }
                }
            }
        }
        found
    }

    /// `decide` agrees exactly with brute force at every level and order, never giving up.
    fn check(a: &Reference, b: &Reference, common: usize) -> Result<(), TestCaseError> {
        let expected = brute_force(a, b, common);
        let any = expected.iter().flatten().any(|s| !s.is_empty());
        prop_assert!(!any || may_overlap(a, b), "may_overlap is unsound");
        for (level, sets) in expected.iter().enumerate() {
            for (order, set) in [Order::AFirst, Order::BFirst].into_iter().zip(sets) {
                let got = decide(a, b, common, level, order);
                let got = got.map_err(|_| TestCaseError::fail("gave up on a small domain"))?;
                // Soundness through the public function too.
                prop_assert!(set.is_empty() || carried(a, b, common, level, order).is_some());
                let distance = (set.len() == 1).then(|| set.first().unwrap().clone());
                let want = (!set.is_empty()).then_some(Dependence { distance });
                prop_assert_eq!(
                    got,
                    want,
                    "level {} {:?} brute force {:?}",
                    level,
                    order,
                    set
                );
            }
        }
        Ok(())
    }

    // ---- random small nests ----

    /// The max of level k: a constant in a box, else also ±1 per outer iterator (as in
    /// `j <= i - 1` or `j <= 5 - i`); always ≤ 6 (each +1 may add 6), sometimes negative.
    fn arb_max(k: usize, boxed: bool) -> impl Strategy<Value = Affine> {
        let constant = prop_oneof![19 => 0i64..=6, 1 => Just(-1i64)];
        let coefficient = if boxed {
            Just(0i64).boxed()
        } else {
            (-1i64..=1).boxed()
        };
        (constant, prop::collection::vec(coefficient, k)).prop_map(|(c, coefficients)| {
            let constant = match coefficients.iter().filter(|&&x| x > 0).count() as i64 {
                0 => c,
                positive => c.min(1) - 1 - 6 * (positive - 1),
            };
            Affine {
                constant,
                coefficients,
            }
        })
    }

    fn arb_address(depth: usize) -> impl Strategy<Value = Affine> {
        (-100i64..=100, prop::collection::vec(-40i64..=40, depth)).prop_map(
            |(constant, coefficients)| Affine {
                constant,
                coefficients,
            },
        )
    }

    /// Two references and their number of common levels: depth ≤ 3, loops of ≤ 7 iterations;
    /// half the time b has a's strides on the common levels (same array, other offset).
    fn arb_case(boxed: bool) -> impl Strategy<Value = (Reference, Reference, usize)> {
        (1usize..=3, 0usize..=2, 0usize..=2).prop_flat_map(move |(common, ea, eb)| {
            let (da, db) = ((common + ea).min(3), (common + eb).min(3));
            let maxes = |levels: std::ops::Range<usize>| {
                levels.map(|k| arb_max(k, boxed)).collect::<Vec<_>>()
            };
            let size = || prop::sample::select(vec![1u64, 2, 4, 8]);
            let parts = (
                maxes(0..da),
                maxes(common..db),
                arb_address(da),
                arb_address(db),
            );
            (parts, size(), size(), any::<bool>()).prop_map(
                move |((a_max, b_own, a_address, mut b_address), a_size, b_size, same)| {
                    if same {
                        b_address.coefficients[..common]
                            .copy_from_slice(&a_address.coefficients[..common]);
                    }
                    let b_max = a_max[..common].iter().cloned().chain(b_own).collect();
                    let a = Reference {
                        address: a_address,
                        size: a_size,
                        max: a_max,
                    };
                    let b = Reference {
                        address: b_address,
                        size: b_size,
                        max: b_max,
                    };
                    (a, b, common)
                },
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn exact_on_boxes((a, b, common) in arb_case(true)) {
            check(&a, &b, common)?;
        }

        #[test]
        fn exact_on_triangular_domains((a, b, common) in arb_case(false)) {
            check(&a, &b, common)?;
        }
    }

    // ---- textbook nests: N = 100, doubles, rows of 800 bytes ----

    const N: i64 = 100;
    const ROW: i64 = 8 * N;
    const A: i64 = 1_000_000;
    const B: i64 = 2_000_000;
    const C: i64 = 3_000_000;

    /// A double at `base + Σ strides[k]·vi_k` in a nest with these maxes.
    fn double(base: i64, strides: &[i64], max: &[Affine]) -> Reference {
        Reference {
            address: Affine {
                constant: base,
                coefficients: strides.to_vec(),
            },
            size: 8,
            max: max.to_vec(),
        }
    }

    /// Max `constant + Σ coefficients·outer` of a level.
    fn max(constant: i64, coefficients: &[i64]) -> Affine {
        Affine {
            constant,
            coefficients: coefficients.to_vec(),
        }
    }

    /// A rectangular 2-deep nest whose loops take n0 and n1 iterations.
    fn rectangle(n0: i64, n1: i64) -> Vec<Affine> {
        vec![max(n0 - 1, &[]), max(n1 - 1, &[0])]
    }

    /// The distance of the dependence carried, `None` if none, `Some(None)` if not constant.
    fn dist(a: &Reference, b: &Reference, level: usize, order: Order) -> Option<Option<Vec<i64>>> {
        let common = a.max.len().min(b.max.len());
        carried(a, b, common, level, order).map(|d| d.distance)
    }

    fn assert_independent(a: &Reference, b: &Reference) {
        for level in 0..a.max.len().min(b.max.len()) {
            for order in [Order::AFirst, Order::BFirst] {
                assert_eq!(dist(a, b, level, order), None, "level {level} {order:?}");
            }
        }
    }

    #[test]
    fn disjoint_arrays_carry_nothing() {
        // C[i][j] = A[i][j] + B[j][i]
        let nest = rectangle(N, N);
        let write_c = double(C, &[ROW, 8], &nest);
        let read_a = double(A, &[ROW, 8], &nest);
        let read_b = double(B, &[8, ROW], &nest);
        for other in [&write_c, &read_a, &read_b] {
            assert_independent(&write_c, other);
        }
        assert!(!may_overlap(&write_c, &read_a));
    }

    #[test]
    fn previous_row_is_carried_by_the_outer_loop_only() {
        // for i in 1..N, j in 0..N: A[i][j] = A[i-1][j], with i = vi + 1.
        let nest = rectangle(N - 1, N);
        let write = double(A + ROW, &[ROW, 8], &nest);
        let read = double(A, &[ROW, 8], &nest);
        assert_eq!(
            dist(&write, &read, 0, Order::AFirst),
            Some(Some(vec![1, 0]))
        );
        assert_eq!(dist(&write, &read, 0, Order::BFirst), None);
        assert_eq!(dist(&write, &read, 1, Order::AFirst), None);
        assert_eq!(dist(&write, &read, 1, Order::BFirst), None);
        assert_independent(&write, &write);
        // VMAD's range test sees overlapping ranges and would keep both loops sequential.
        assert!(may_overlap(&write, &read));
    }

    #[test]
    fn previous_column_is_carried_by_the_inner_loop_only() {
        // for i in 0..N, j in 1..N: A[i][j] = A[i][j-1], with j = vj + 1.
        let nest = rectangle(N, N - 1);
        let write = double(A + 8, &[ROW, 8], &nest);
        let read = double(A, &[ROW, 8], &nest);
        assert_eq!(dist(&write, &read, 0, Order::AFirst), None);
        assert_eq!(dist(&write, &read, 0, Order::BFirst), None);
        assert_eq!(
            dist(&write, &read, 1, Order::AFirst),
            Some(Some(vec![0, 1]))
        );
        assert_eq!(dist(&write, &read, 1, Order::BFirst), None);
        assert_independent(&write, &write);
    }

    #[test]
    fn gauss_seidel_carries_both_levels() {
        // for i in 1..N-1, j in 1..N-1:
        //   A[i][j] = (A[i-1][j] + A[i+1][j] + A[i][j-1] + A[i][j+1]) / 4
        let nest = rectangle(N - 2, N - 2);
        let at = |di: i64, dj: i64| double(A + (1 + di) * ROW + (1 + dj) * 8, &[ROW, 8], &nest);
        let write = at(0, 0);
        assert_eq!(
            dist(&write, &at(-1, 0), 0, Order::AFirst),
            Some(Some(vec![1, 0]))
        );
        assert_eq!(
            dist(&write, &at(1, 0), 0, Order::BFirst),
            Some(Some(vec![-1, 0]))
        );
        assert_eq!(
            dist(&write, &at(0, -1), 1, Order::AFirst),
            Some(Some(vec![0, 1]))
        );
        assert_eq!(
            dist(&write, &at(0, 1), 1, Order::BFirst),
            Some(Some(vec![0, -1]))
        );
        // The column neighbours stay within their row: the outer loop carries nothing there.
        assert_eq!(dist(&write, &at(0, -1), 0, Order::AFirst), None);
    }

    #[test]
    fn triangular_transpose_needs_its_triangular_bound() {
        // for i in 0..N, j in 0..i: A[i][j] = A[j][i]
        let nest = vec![max(N - 1, &[]), max(-1, &[1])];
        let write = double(A, &[ROW, 8], &nest);
        let read = double(A, &[8, ROW], &nest);
        assert_independent(&write, &read);
        assert_independent(&write, &write);
        // Over the box j in 0..N, iteration (i, j) writes what (j, i) reads.
        let boxed = rectangle(N, N);
        let (write, read) = (double(A, &[ROW, 8], &boxed), double(A, &[8, ROW], &boxed));
        assert!(dist(&write, &read, 0, Order::AFirst).is_some());
        assert!(dist(&write, &read, 0, Order::BFirst).is_some());
    }

    #[test]
    fn reduction_into_a_scalar() {
        // for i in 0..N: s[0] += x[i]
        let nest = vec![max(N - 1, &[])];
        let write = double(B, &[0], &nest);
        let read = double(B, &[0], &nest);
        let x = double(A, &[8], &nest);
        assert_eq!(dist(&write, &write, 0, Order::AFirst), Some(None)); // output, any distance
        assert_eq!(dist(&write, &read, 0, Order::AFirst), Some(None)); // flow
        assert_eq!(dist(&write, &read, 0, Order::BFirst), Some(None)); // anti
        assert_independent(&write, &x);
    }

    #[test]
    fn pointer_walk_reads_what_the_next_iteration_writes() {
        // for i in 0..N: *p = *(p + 1); p += 1 (4-byte elements)
        let nest = vec![max(N - 1, &[])];
        let int = |base: i64| Reference {
            address: max(base, &[4]),
            size: 4,
            max: nest.clone(),
        };
        let (write, read) = (int(A), int(A + 4));
        // The read of iteration v is the write of iteration v + 1: anti, read first.
        assert_eq!(dist(&write, &read, 0, Order::BFirst), Some(Some(vec![-1])));
        assert_eq!(dist(&read, &write, 0, Order::AFirst), Some(Some(vec![1])));
        assert_eq!(dist(&write, &read, 0, Order::AFirst), None);
        assert_independent(&write, &write);
    }

    #[test]
    fn large_rectangular_nests_are_decided() {
        // The previous-row nest at N = 10^6 (rows of 8 MB): still exact.
        let n = 1_000_000;
        let nest = rectangle(n - 1, n);
        let write = double(A + 8 * n, &[8 * n, 8], &nest);
        let read = double(A, &[8 * n, 8], &nest);
        assert_eq!(
            dist(&write, &read, 0, Order::AFirst),
            Some(Some(vec![1, 0]))
        );
        assert_eq!(dist(&write, &read, 0, Order::BFirst), None);
        assert_eq!(dist(&write, &read, 1, Order::AFirst), None);
        assert_independent(&write, &write);
        // A 1-D loop of 2^31 iterations, i = vi + 1: a[i] = a[i-1], then a[vi] = a[2·vi].
        let nest = vec![max((1 << 31) - 1, &[])];
        let (write, read) = (double(A + 8, &[8], &nest), double(A, &[8], &nest));
        assert_eq!(dist(&write, &read, 0, Order::AFirst), Some(Some(vec![1])));
        let (write, read) = (double(A, &[8], &nest), double(A, &[16], &nest));
        assert_eq!(dist(&write, &read, 0, Order::AFirst), None);
        assert_eq!(dist(&write, &read, 0, Order::BFirst), Some(None)); // w = v / 2
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        let base = (1i64 << 47) - 12345;
        let big = 1i64 << 31;
        let maxes = [
            vec![max(big, &[]), max(big, &[0]), max(big, &[0, 0])],
            vec![max(big, &[]), max(-1, &[1]), max(big, &[-1, 1])],
            vec![max(big, &[]), max(big, &[-1]), max(3, &[0, 0])],
        ];
        let strides = [
            [1 << 20, -(1 << 20), 8],
            [-(1 << 20), 3, 1 << 20],
            [0, 1 << 19, -8],
        ];
        for nest in &maxes {
            let a = double(base, &strides[0], nest);
            let b = double(-base, &strides[1], nest);
            let c = double(base - (1 << 20), &strides[2], nest);
            for (x, y) in [(&a, &b), (&a, &c), (&c, &c)] {
                may_overlap(x, y);
                for level in 0..3 {
                    for order in [Order::AFirst, Order::BFirst] {
                        carried(x, y, 3, level, order);
                    }
                }
            }
        }
        // Beyond any realistic nest: i64 extremes everywhere.
        let huge = Reference {
            address: max(i64::MAX, &[i64::MIN, i64::MAX]),
            size: u64::MAX,
            max: vec![max(i64::MAX, &[]), max(i64::MAX, &[i64::MAX])],
        };
        let small = Reference {
            address: max(i64::MIN, &[i64::MAX, i64::MIN]),
            size: 1,
            max: rectangle(3, 3),
        };
        for (x, y) in [
            (&huge, &small),
            (&small, &huge),
            (&huge, &huge),
            (&small, &small),
        ] {
            may_overlap(x, y);
            carried(x, y, 2, 0, Order::AFirst);
            carried(x, y, 2, 1, Order::BFirst);
        }
    }
}
