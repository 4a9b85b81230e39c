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
//! levels outside `level`, `w_level ≥ v_level + 1`, every iterator within its (possibly
//! triangular) bounds, and `a(v) − b(w)` in `(−a.size, b.size)`: a system of linear
//! inequalities over the iterators, one variable per iterator (shared ones once). An integer
//! solver decides it exactly: Pugh's Omega test, with additions. Each step rewrites the
//! system without losing or adding integer solutions (of the variables still present), or
//! splits it into cases that together have the same solutions:
//!
//! - Normalizing: each constraint is divided by the GCD of its coefficients, rounding the
//!   constant of an inequality down (where integrality bites: `1000·i ≤ 1000·j + 999` becomes
//!   `i ≤ j`); parallel inequalities keep the tightest, opposite ones that leave one value
//!   become an equality. Bounds propagated over boxes make each variable's range explicit,
//!   and drop the inequalities that hold throughout it.
//! - An equality is solved for a variable of coefficient ±1 and substituted, or else Pugh's
//!   "mod hat" step trades it for one with smaller coefficients.
//! - A variable whose coefficient is 1 in all its lower bounds or −1 in all its upper bounds
//!   (loop bounds like `j ≤ i − 1`: the usual case) is eliminated by Fourier–Motzkin, which is
//!   then exact over the integers: `L ≤ y`, `b·y ≤ U` leave an integer y iff `b·L ≤ U`.
//! - Otherwise, a linear form that a pair of opposite inequalities confines to fewer than 8
//!   values (a short loop, the few offsets at which two sizes overlap) is enumerated, each
//!   value an equality, unless an exact elimination adds at most 8 inequalities; else a
//!   unimodular change of variables `y_k → y_k − q·y_j` that shrinks the coefficients is
//!   applied (`10000·i − 10001·j ≥ c` has no exact elimination, but with `i = i' + j` it is
//!   `10000·i' − j ≥ c`); else the Omega test's inexact step: no solution if the real shadow
//!   (the Fourier–Motzkin projection) has none, one if the dark shadow (where the bounds leave
//!   room for an integer) has one, else the solutions lie in "splinters", each an equality,
//!   or in the values of a thin form when fewer.
//! - Large coefficients (beyond 2^10 times their constraint's GCD: large strides) grow fast
//!   under these steps (splinters are as many as the coefficients are large), and come with
//!   small domains as often as not: there, a variable with fewer than 16 values is enumerated
//!   first (substituted, value by value), as long as several are left. So are variables when
//!   the numbers outgrow the checked arithmetic anyway.
//!
//! A solution is rebuilt from the steps, in reverse. The distance is constant when no
//! solution has another value in any component: two more solves per component check that.
//!
//! # Exactness
//! Every step is exact, so [`carried`] returns `None` exactly when no such iterations exist,
//! and a distance exactly when all of them share it, unless the solver gives up: when a query
//! would handle more than 2^17 constraints in all (which bounds its time: under 100 ms), or
//! when the numbers outgrow the checked 128-bit arithmetic with no variable left to
//! enumerate. Giving up answers `Some` without a distance, which is sound.
//!
//! Whether it gives up depends on the problem more than on its size. Measured (in these tests
//! and in larger runs of their generators; a query typically handles 30 to 100 constraints,
//! in 10 to 40 µs, and a dependence whose distance is checked in 3 components 400, in 160 µs):
//! - Thirteen PolyBench kernels (gemm, lu in two forms, cholesky, trisolv, syrk,
//!   correlation, seidel-2d and -3d, gramschmidt, trmm, symm, ludcmp: triangular and
//!   rectangular, depth up to 3, row-major and transposed accesses, offsets), every pair
//!   with a write, level and order: never gives up from N = 7 to 10^4, agrees with brute
//!   force at N = 7 and gives the same answers at every N, handling at most 560 constraints
//!   per query (the triangular transpose 66, right-looking lu at N = 2000 392, gemm 94).
//! - 3·10^5 queries on random nests of that form (rows of N doubles, indices sums of
//!   iterators plus offsets, rectangular or triangular) at N = 10^3 and 10^4: never gave up,
//!   at most 2000 constraints (p99: 500).
//! - 3·10^5 queries on random nests of depth ≤ 3 with loops of at most 7 iterations and
//!   strides up to 40, and 3·10^5 with strides up to 2^47, loops of up to 10 iterations and
//!   sizes up to 511 bytes (against brute force, in part): never gave up; at most 5·10^4 and
//!   10^5 constraints (p99: 800 and 5000).
//! - The 2-deep stencils stay exact at N = 10^6, a 1-deep loop at 2^31 iterations.

use crate::Affine;
use std::mem::take;

/// One memory reference: the bytes `[address(v), address(v) + size)` for every iterator
/// vector v of its chain of loops (outermost first) inside the iteration domain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
/// distance whenever it is constant) unless the solver gives up, as the module documentation
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

/// Iterator values beyond this make [`may_overlap`] assume any byte (below it, its sums of
/// products fit in an i128).
const LIMIT: i128 = 1 << 56;
/// Work (constraints handled) one query may do before giving up: bounds its time.
const BUDGET: u64 = 1 << 17;
/// Numbers beyond this in a constraint stop the Omega test ([`GaveUp::Numbers`]): sums of
/// two products of such numbers by small ones still fit in an i128 (and every operation is
/// checked anyway).
const HUGE: i128 = 1 << 120;
/// A form with fewer values than this is enumerated rather than a variable eliminated, when
/// that would add more than [`GROWTH`] inequalities.
const THIN: i128 = 8;
const GROWTH: isize = 8;
/// Coefficients beyond this (over their constraint's GCD) make [`Solver::solve`] enumerate a
/// variable with fewer than [`FEW`] values rather than start the Omega test.
const LARGE: i128 = 1 << 10;
const FEW: i128 = 16;
/// Rounds of bound propagation per step (it only prunes, so it need not converge).
const ROUNDS: usize = 3;

/// Why the solver stopped before deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GaveUp {
    /// It would do more work than [`BUDGET`].
    Work,
    /// A number outgrew its checked arithmetic.
    Numbers,
}

/// [`carried`], telling a proven dependence from a solver that gave up.
fn decide(
    a: &Reference,
    b: &Reference,
    common: usize,
    level: usize,
    order: Order,
) -> Result<Option<Dependence>, GaveUp> {
    decide_with(&mut Solver::default(), a, b, common, level, order)
}

/// [`decide`], counting its work in `solver`.
fn decide_with(
    solver: &mut Solver,
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
    // The overlap condition is symmetric, so b first is a first with the roles swapped.
    let (first, second, sign) = match order {
        Order::AFirst => (a, b, 1),
        Order::BFirst => (b, a, -1),
    };
    let (problem, distances) = Problem::new(first, second, common, level)?;
    let Some(witness) = solver.solve(problem.clone())? else {
        return Ok(None);
    };
    // The distance is constant iff no solution has another value in any component.
    let mut distance = vec![0; level];
    for &(v, w) in &distances {
        let delta = Lin::var(problem.n, w).plus(&Lin::var(problem.n, v), -1)?; // w_k − v_k
        let found = delta.at(&witness)?;
        let below = delta.scaled(-1)?.shifted(found - 1)?; // ≤ found − 1
        let above = delta.shifted(-found - 1)?; // ≥ found + 1
        for extra in [below, above] {
            let mut p = problem.clone();
            p.inequalities.push(extra);
            if !matches!(solver.solve(p), Ok(None)) {
                return Ok(Some(Dependence { distance: None }));
            }
        }
        distance.push(i64::try_from(sign * found).map_err(|_| GaveUp::Numbers)?);
    }
    Ok(Some(Dependence {
        distance: Some(distance),
    }))
}

/// `constant + Σ coefficients[k] × y_k` over the variables of a problem. Ordered by
/// coefficients first, so that sorting brings parallel constraints together.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Lin {
    coefficients: Vec<i128>,
    constant: i128,
}

fn mul(x: i128, y: i128) -> Result<i128, GaveUp> {
    x.checked_mul(y).ok_or(GaveUp::Numbers)
}

fn add(x: i128, y: i128) -> Result<i128, GaveUp> {
    x.checked_add(y).ok_or(GaveUp::Numbers)
}

impl Lin {
    fn constant(n: usize, constant: i128) -> Lin {
        let coefficients = vec![0; n];
        Lin {
            coefficients,
            constant,
        }
    }

    fn var(n: usize, k: usize) -> Lin {
        let mut lin = Lin::constant(n, 0);
        lin.coefficients[k] = 1;
        lin
    }

    /// `self + factor × other`.
    fn plus(&self, other: &Lin, factor: i128) -> Result<Lin, GaveUp> {
        let coefficients = (self.coefficients.iter().zip(&other.coefficients))
            .map(|(&x, &y)| add(x, mul(factor, y)?))
            .collect::<Result<_, _>>()?;
        let constant = add(self.constant, mul(factor, other.constant)?)?;
        Ok(Lin {
            coefficients,
            constant,
        })
    }

    fn scaled(&self, factor: i128) -> Result<Lin, GaveUp> {
        let coefficients = (self.coefficients.iter())
            .map(|&x| mul(factor, x))
            .collect::<Result<_, _>>()?;
        let constant = mul(factor, self.constant)?;
        Ok(Lin {
            coefficients,
            constant,
        })
    }

    fn shifted(&self, by: i128) -> Result<Lin, GaveUp> {
        let constant = add(self.constant, by)?;
        Ok(Lin {
            constant,
            ..self.clone()
        })
    }

    /// Its value at `values` (below 2^126 in magnitude, so that it can be negated).
    fn at(&self, values: &[i128]) -> Result<i128, GaveUp> {
        let sum = (self.coefficients.iter().zip(values))
            .try_fold(self.constant, |sum, (&c, &y)| add(sum, mul(c, y)?))?;
        match sum.unsigned_abs() < 1 << 126 {
            true => Ok(sum),
            false => Err(GaveUp::Numbers),
        }
    }

    /// With `y_k` replaced by `expression`.
    fn substituted(&self, k: usize, expression: &Lin) -> Result<Lin, GaveUp> {
        let mut lin = self.clone();
        lin.coefficients[k] = 0;
        lin.plus(expression, self.coefficients[k])
    }

    /// Its variables with their coefficients.
    fn terms(&self) -> impl Iterator<Item = (usize, i128)> + '_ {
        (self.coefficients.iter().enumerate()).filter_map(|(k, &a)| (a != 0).then_some((k, a)))
    }

    /// The GCD of its coefficients (0 when it is a constant).
    fn gcd(&self) -> i128 {
        self.coefficients.iter().fold(0, |g, &c| gcd(g, c))
    }

    /// Whether a number in it exceeds [`HUGE`].
    fn huge(&self) -> bool {
        let huge = |x: &i128| x.unsigned_abs() > HUGE.unsigned_abs();
        huge(&self.constant) || self.coefficients.iter().any(huge)
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

/// `f` of the chain iterators, each an affine function of the problem's variables.
fn compose(f: &Affine, iterators: &[Lin], n: usize) -> Result<Lin, GaveUp> {
    (f.coefficients.iter().zip(iterators))
        .try_fold(Lin::constant(n, f.constant.into()), |sum, (&c, it)| {
            sum.plus(it, c.into())
        })
}

/// Integer constraints on `n` variables: every equality `= 0`, every inequality `≥ 0`.
#[derive(Debug, Clone)]
struct Problem {
    n: usize,
    equalities: Vec<Lin>,
    inequalities: Vec<Lin>,
}

/// Lower and upper bounds of a variable, when known.
type Bounds = (Option<i128>, Option<i128>);

/// A linear form (constant 0) that two opposite inequalities confine: `lo ≤ form ≤ hi`.
#[derive(Debug, Clone)]
struct Slab {
    form: Lin,
    lo: i128,
    hi: i128,
}

/// A variable to eliminate from the inequalities: see [`Problem::choose`].
struct Choice {
    k: usize,
    /// How many splinters eliminating it needs (0: Fourier–Motzkin is exact), and on which
    /// side of it (see [`Problem::splinters`]).
    splinters: i128,
    side: i128,
    /// How many inequalities eliminating it adds (less those it removes).
    growth: isize,
}

/// How to give a variable its value once the variables left after a step have theirs.
enum Step {
    /// `y_k` = this expression, in which index k stands for the variable that replaced y_k
    /// (if any).
    Set(usize, Lin),
    /// `y_k` is the least integer these inequalities allow (they leave room for one).
    Least(usize, Vec<Lin>),
}

impl Step {
    fn apply(&self, values: &mut [i128]) -> Result<(), GaveUp> {
        match self {
            Step::Set(k, expression) => values[*k] = expression.at(values)?,
            Step::Least(k, constraints) => {
                values[*k] = 0;
                let (mut lo, mut hi) = (None, None);
                for c in constraints {
                    // a·y_k + rest ≥ 0
                    let (a, rest) = (c.coefficients[*k], c.at(values)?);
                    if a > 0 {
                        lo = lo.max(Some(ceil_div(-rest, a)));
                    } else {
                        let h = floor_div(rest, -a);
                        hi = Some(hi.map_or(h, |hi: i128| hi.min(h)));
                    }
                }
                values[*k] = lo.or(hi).unwrap_or(0);
            }
        }
        Ok(())
    }
}

impl Problem {
    /// For `a` in the earlier iteration of `level`: the problem, and per common level from
    /// `level` on, the variables of a's iterator and of b's there.
    fn new(
        a: &Reference,
        b: &Reference,
        common: usize,
        level: usize,
    ) -> Result<(Problem, Vec<(usize, usize)>), GaveUp> {
        let (a_depth, b_depth) = (a.max.len(), b.max.len());
        let n = a_depth + b_depth - level;
        // The variables: a's iterators (the first `level` shared with b), then b's others.
        let var = |k| Lin::var(n, k);
        let a_it: Vec<Lin> = (0..a_depth).map(var).collect();
        let b_it: Vec<Lin> = (0..level).chain(a_depth..n).map(var).collect();
        let later = b_it[level].plus(&a_it[level], -1)?.shifted(-1)?; // w_level ≥ v_level + 1
        let mut inequalities = vec![later];
        for (r, it, outside) in [(a, &a_it, 0), (b, &b_it, level)] {
            for (k, max) in r.max.iter().enumerate().skip(outside) {
                inequalities.push(it[k].clone()); // iterator ≥ 0
                inequalities.push(compose(max, &it[..k], n)?.plus(&it[k], -1)?);
                // ≤ max
            }
        }
        // a(v) − b(w) ∈ [−(a.size − 1), b.size − 1]
        let e = compose(&a.address, &a_it, n)?.plus(&compose(&b.address, &b_it, n)?, -1)?;
        inequalities.push(e.shifted(i128::from(a.size) - 1)?);
        inequalities.push(e.scaled(-1)?.shifted(i128::from(b.size) - 1)?);
        let equalities = Vec::new();
        let problem = Problem {
            n,
            equalities,
            inequalities,
        };
        let distances = (level..common).map(|k| (k, a_depth + k - level)).collect();
        Ok((problem, distances))
    }

    /// Divides each constraint by the GCD of its coefficients (rounding an inequality's
    /// constant down), drops those that always hold, makes the bounds that propagation finds
    /// explicit and drops the inequalities that hold throughout them (when there is no
    /// equality left to eliminate), keeps the tightest of parallel inequalities, and turns
    /// opposite ones that leave one value into an equality. None when a constraint never
    /// holds; else the thinnest slab of opposite inequalities left, if any.
    fn normalize(&mut self) -> Result<Option<Option<Slab>>, GaveUp> {
        let mut equalities = Vec::new();
        for mut e in take(&mut self.equalities) {
            if e.huge() {
                return Err(GaveUp::Numbers);
            }
            match e.gcd() {
                0 if e.constant != 0 => return Ok(None),
                0 => {}
                g if e.constant % g != 0 => return Ok(None),
                g => {
                    if g > 1 {
                        e.coefficients.iter_mut().for_each(|c| *c /= g);
                        e.constant /= g;
                    }
                    equalities.push(e);
                }
            }
        }
        let mut inequalities = Vec::new();
        for mut c in take(&mut self.inequalities) {
            if c.huge() {
                return Err(GaveUp::Numbers);
            }
            match c.gcd() {
                0 if c.constant < 0 => return Ok(None),
                0 => {}
                g => {
                    if g > 1 {
                        c.coefficients.iter_mut().for_each(|x| *x /= g);
                        c.constant = floor_div(c.constant, g);
                    }
                    inequalities.push(c);
                }
            }
        }
        if equalities.is_empty() {
            self.inequalities = inequalities;
            let mut bounds = self.bounds();
            if (bounds.iter()).any(|b| matches!(b, (Some(lo), Some(hi)) if lo > hi)) {
                return Ok(None);
            }
            // (Only bounds that can be stated as constraints below.)
            let fits = |x: &i128| x.unsigned_abs() <= HUGE.unsigned_abs();
            for (lo, hi) in &mut bounds {
                (*lo, *hi) = (lo.filter(fits), hi.filter(fits));
            }
            inequalities = take(&mut self.inequalities);
            inequalities.retain(|c| c.terms().nth(1).is_none() || !holds(c, &bounds));
            // Single-variable inequalities (normalized: ±y_k + c ≥ 0) state some bounds.
            let mut stated: Vec<Bounds> = vec![(None, None); self.n];
            for c in &inequalities {
                let mut terms = c.terms();
                if let (Some((k, a)), None) = (terms.next(), terms.next()) {
                    let (lo, hi) = &mut stated[k];
                    match a {
                        1 => *lo = (*lo).max(Some(-c.constant)),
                        _ => *hi = Some(hi.map_or(c.constant, |h| h.min(c.constant))),
                    }
                }
            }
            for (k, (&(lo, hi), &stated)) in bounds.iter().zip(&stated).enumerate() {
                let y = Lin::var(self.n, k);
                if let Some(lo) = lo.filter(|&lo| Some(lo) != stated.0) {
                    inequalities.push(y.shifted(-lo)?);
                }
                if let Some(hi) = hi.filter(|&hi| Some(hi) != stated.1) {
                    inequalities.push(y.scaled(-1)?.shifted(hi)?);
                }
            }
        }
        // Sorted, parallel inequalities are adjacent, the tightest (smallest constant) first.
        inequalities.sort_unstable();
        inequalities.dedup_by(|later, first| later.coefficients == first.coefficients);
        let mut keep = vec![true; inequalities.len()];
        let mut thinnest: Option<Slab> = None;
        for (i, c) in inequalities.iter().enumerate() {
            if c.terms().next().is_some_and(|(_, a)| a < 0) {
                continue; // each opposite pair once, from its positive side
            }
            let opposite = c.coefficients.iter().map(|x| -x);
            let find = |d: &Lin| d.coefficients.iter().copied().cmp(opposite.clone());
            let Ok(j) = inequalities.binary_search_by(find) else {
                continue;
            };
            // −c.constant ≤ c − c.constant ≤ d.constant
            let (lo, hi) = (-c.constant, inequalities[j].constant);
            match hi - lo {
                ..0 => return Ok(None),
                0 => {
                    equalities.push(c.clone());
                    (keep[i], keep[j]) = (false, false);
                }
                gap if thinnest.as_ref().is_none_or(|t| gap < t.hi - t.lo) => {
                    let form = c.shifted(-c.constant)?;
                    thinnest = Some(Slab { form, lo, hi });
                }
                _ => {}
            }
        }
        let mut keep = keep.into_iter();
        inequalities.retain(|_| keep.next() == Some(true));
        self.equalities = equalities;
        self.inequalities = inequalities;
        Ok(Some(thinnest))
    }

    /// Bounds on each variable that the inequalities imply, propagated over boxes for a few
    /// rounds (None: unbounded on that side, or too large).
    fn bounds(&self) -> Vec<Bounds> {
        let mut bounds = vec![(None, None); self.n];
        let mut terms = Vec::with_capacity(self.n);
        // An equality is two inequalities.
        let negated: Vec<Lin> = (self.equalities.iter())
            .filter_map(|e| e.scaled(-1).ok())
            .collect();
        let constraints = || {
            self.inequalities
                .iter()
                .chain(&self.equalities)
                .chain(&negated)
        };
        for _ in 0..ROUNDS {
            let mut changed = false;
            for c in constraints() {
                // The largest value of each term over the box, and of their sum.
                terms.clear();
                terms.extend(
                    (c.coefficients.iter().zip(&bounds)).map(|(&a, &(lo, hi))| match a {
                        0 => Some(0),
                        _ => a.checked_mul(if a > 0 { hi } else { lo }?),
                    }),
                );
                let unknown = terms.iter().filter(|t| t.is_none()).count();
                let sum = (terms.iter().flatten()).try_fold(c.constant, |s, &t| s.checked_add(t));
                for (k, a) in c.terms() {
                    // a·y_k ≥ −(the rest) ≥ −(its largest value)
                    let most = match terms[k] {
                        None if unknown == 1 => sum,
                        Some(t) if unknown == 0 => sum.and_then(|s| s.checked_sub(t)),
                        _ => None,
                    };
                    let Some(least) = most.and_then(i128::checked_neg) else {
                        continue;
                    };
                    let (lo, hi) = &mut bounds[k];
                    if a > 0 && lo.is_none_or(|l| l < ceil_div(least, a)) {
                        (*lo, changed) = (Some(ceil_div(least, a)), true);
                    } else if a < 0 && hi.is_none_or(|h| h > floor_div(-least, -a)) {
                        (*hi, changed) = (Some(floor_div(-least, -a)), true);
                    }
                }
            }
            if !changed {
                break;
            }
        }
        bounds
    }

    /// Removes the equality `e = 0` (normalized) and one of its variables y_k: solved for when
    /// its coefficient is ±1, else Pugh's reduction: with m = |a_k| + 1, a new variable σ
    /// (in y_k's place) with `m·σ = Σ (a_j mod^ m)·y_j + (constant mod^ m)`, where y_k's term
    /// is −sign(a_k)·y_k, gives y_k, and substituted in `e` leaves smaller coefficients.
    fn eliminate_equality(&mut self, mut e: Lin) -> Result<Step, GaveUp> {
        let (k, a) = (e.terms())
            .min_by_key(|&(_, a)| a.abs())
            .expect("a normalized equality has a variable");
        let expression = if a.abs() == 1 {
            e.coefficients[k] = 0;
            e.scaled(-a)? // y_k = −a·(the rest)
        } else {
            let m = a.abs() + 1;
            let mut reduced = Lin {
                coefficients: e.coefficients.iter().map(|&c| mod_hat(c, m)).collect(),
                constant: mod_hat(e.constant, m),
            };
            reduced.coefficients[k] = -m; // σ
            self.equalities.push(e);
            reduced.scaled(a.signum())? // y_k = sign(a_k)·(Σ_{j≠k} … + … − m·σ)
        };
        for c in self.equalities.iter_mut().chain(&mut self.inequalities) {
            *c = c.substituted(k, &expression)?;
        }
        Ok(Step::Set(k, expression))
    }

    /// The variable to eliminate from the inequalities next, none when none is left. Prefers
    /// those that Fourier–Motzkin eliminates exactly over the integers (no splinters): when
    /// its coefficient is 1 in all its lower bounds or −1 in all its upper bounds, each pair
    /// of bounds `L ≤ a·y`, `b·y ≤ U` has a = 1 or b = 1, and an integer y exists iff
    /// `b·L ≤ a·U`. Then fewer splinters, then fewer new inequalities.
    fn choose(&self) -> Option<Choice> {
        let mut best: Option<Choice> = None;
        for k in 0..self.n {
            let (lower, upper) = (self.inequalities.iter()).fold((0, 0), |(l, u), c| {
                match c.coefficients[k].signum() {
                    1 => (l + 1, u),
                    -1 => (l, u + 1),
                    _ => (l, u),
                }
            });
            let (splinters, side) = self.splinters(k, 1).min(self.splinters(k, -1));
            let growth = (lower * upper) as isize - (lower + upper) as isize;
            let choice = Choice {
                k,
                splinters,
                side,
                growth,
            };
            let key = |c: &Choice| (c.splinters, c.growth);
            if lower + upper > 0 && best.as_ref().is_none_or(|b| key(&choice) < key(b)) {
                best = Some(choice);
            }
        }
        best
    }

    /// How many splinters y_k needs from its lower bounds (`side` = 1) or its upper bounds
    /// (`side` = −1), and `side`. An integer solution outside the dark shadow has
    /// `c = a·y_k + rest` (a bound on that side, `side·a > 0`) in `0..=(m·|a| − m − |a|) / m`
    /// for some bound c, where m is the largest |coefficient| of y_k on the other side.
    fn splinters(&self, k: usize, side: i128) -> (i128, i128) {
        let m = (self.inequalities.iter())
            .map(|c| c.coefficients[k] * -side)
            .max()
            .unwrap_or(0);
        let count = (self.inequalities.iter())
            .map(|c| splinters(c.coefficients[k] * side, m))
            .fold(0, i128::saturating_add);
        (count, side)
    }

    /// Fourier–Motzkin: replaces the inequalities on y_k by what each pair of its bounds
    /// implies on the others: the real shadow, or with `dark` the dark shadow (where the
    /// bounds leave room for an integer y_k).
    fn eliminate(&mut self, k: usize, dark: bool, solver: &mut Solver) -> Result<Step, GaveUp> {
        let (on, off) = (take(&mut self.inequalities).into_iter())
            .partition::<Vec<_>, _>(|c| c.coefficients[k] != 0);
        self.inequalities = off;
        let lower = on.iter().filter(|c| c.coefficients[k] > 0).count();
        solver.spend(lower * (on.len() - lower))?;
        for l in on.iter().filter(|c| c.coefficients[k] > 0) {
            for u in on.iter().filter(|c| c.coefficients[k] < 0) {
                // b·(a·y + L) + a·(U − b·y) = b·L + a·U ≥ 0, or ≥ (a − 1)(b − 1) in the dark
                let (a, b) = (l.coefficients[k], -u.coefficients[k]);
                let slack = if dark { mul(a - 1, b - 1)? } else { 0 };
                self.inequalities
                    .push(l.scaled(b)?.plus(u, a)?.shifted(-slack)?);
            }
        }
        Ok(Step::Least(k, on))
    }

    /// A unimodular change of variables that shrinks the coefficients: `y_k = y' − q·y_j`,
    /// y' in y_k's place (so `a·y_j + b·y_k` becomes `(a − q·b)·y_j + b·y'`), with
    /// q = round(a / b) for the pair of coefficients of an inequality that shrinks the sum of
    /// all their magnitudes the most. None when none shrinks it.
    fn reduce(&mut self, solver: &mut Solver) -> Result<Option<Step>, GaveUp> {
        let mut candidates: Vec<(usize, usize, i128)> = Vec::new();
        for c in &self.inequalities {
            for ((j, a), (k, b)) in c.terms().flat_map(|x| c.terms().map(move |y| (x, y))) {
                if k != j && b.abs() <= a.abs() {
                    let q = floor_div(2 * a + b.abs(), 2 * b.abs()) * b.signum();
                    candidates.push((j, k, q));
                }
            }
        }
        candidates.sort_unstable();
        candidates.dedup();
        solver.spend(1 + candidates.len() * self.inequalities.len() / self.n)?;
        // The change in the sum of the magnitudes of y_j's coefficients (y_k's stay).
        let gain = |&(j, k, q): &(usize, usize, i128)| {
            (self.inequalities.iter()).try_fold(0i128, |sum, d| {
                let (x, y) = (d.coefficients[j], d.coefficients[k]);
                let now = x.checked_sub(q.checked_mul(y)?)?;
                sum.checked_add(now.checked_abs()? - x.abs())
            })
        };
        let best = (candidates.iter())
            .filter_map(|c| Some((gain(c)?, *c)))
            .filter(|&(gain, _)| gain < 0)
            .min();
        let Some((_, (j, k, q))) = best else {
            return Ok(None);
        };
        let expression = Lin::var(self.n, k).plus(&Lin::var(self.n, j), -q)?;
        for c in &mut self.inequalities {
            *c = c.substituted(k, &expression)?;
        }
        Ok(Some(Step::Set(k, expression)))
    }
}

/// Whether `c ≥ 0` holds throughout the box `bounds`.
fn holds(c: &Lin, bounds: &[Bounds]) -> bool {
    let least =
        (c.coefficients.iter().zip(bounds)).try_fold(c.constant, |s, (&a, &(lo, hi))| match a {
            0 => Some(s),
            _ => s.checked_add(a.checked_mul(if a > 0 { lo } else { hi }?)?),
        });
    least.is_some_and(|l| l >= 0)
}

/// How many splinters a bound `a·y + rest ≥ 0` (a > 0) needs when the largest coefficient
/// of y in a bound on the other side is m: `(m·a − m − a) / m + 1 = a − ⌈a / m⌉`, or none.
fn splinters(a: i128, m: i128) -> i128 {
    match a > 0 && m > 0 {
        true => a - ceil_div(a, m),
        false => 0,
    }
}

/// Decides problems by the Omega test, with the additions of the module documentation.
/// Counts its work.
#[derive(Default)]
struct Solver {
    work: u64,
}

impl Solver {
    fn spend(&mut self, work: usize) -> Result<(), GaveUp> {
        self.work += work as u64;
        match self.work > BUDGET {
            true => Err(GaveUp::Work),
            false => Ok(()),
        }
    }

    /// An integer solution of `p`, if any: by the Omega test, except that with coefficients
    /// beyond [`LARGE`] (large strides), whose multiples the Omega test's steps make huge
    /// (while such domains are often small), it enumerates the values of a variable that
    /// takes fewer than [`FEW`] of them while several variables are left; and when the Omega
    /// test's numbers outgrow its arithmetic, it enumerates one with any finite range. Each
    /// value substituted leaves a variable fewer.
    fn solve(&mut self, mut p: Problem) -> Result<Option<Vec<i128>>, GaveUp> {
        let constraints = || p.equalities.iter().chain(&p.inequalities);
        let large = constraints().any(|c| {
            let g = c.gcd().max(1);
            (c.coefficients.iter()).any(|x| x.abs() / g > LARGE)
        });
        let present: Vec<usize> = (0..p.n)
            .filter(|&k| constraints().any(|c| c.coefficients[k] != 0))
            .collect();
        let enumerate = large && present.len() > 1;
        if !enumerate {
            match self.omega(p.clone()) {
                Err(GaveUp::Numbers) => {}
                decided => return decided,
            }
        }
        self.spend(1 + p.equalities.len() + p.inequalities.len())?;
        if p.normalize()?.is_none() {
            return Ok(None);
        }
        let bounds = p.bounds();
        let narrowest = (present.iter())
            .filter_map(|&k| Some((k, bounds[k].0?, bounds[k].1?)))
            .min_by_key(|&(_, lo, hi)| hi.saturating_sub(lo));
        let few = |&(_, lo, hi): &(usize, i128, i128)| !enumerate || hi.saturating_sub(lo) < FEW;
        let Some((k, lo, hi)) = narrowest.filter(few) else {
            return match enumerate {
                true => self.omega(p),
                false => Err(GaveUp::Numbers),
            };
        };
        if hi.saturating_sub(lo) >= (BUDGET - self.work) as i128 {
            return Err(GaveUp::Work);
        }
        for value in lo..=hi {
            let y = Lin::constant(p.n, value);
            let mut q = p.clone();
            for c in q.equalities.iter_mut().chain(&mut q.inequalities) {
                *c = c.substituted(k, &y)?;
            }
            if let Some(mut values) = self.solve(q)? {
                values[k] = value;
                return Ok(Some(values));
            }
        }
        Ok(None)
    }

    /// [`Solver::solve`] by the Omega test.
    fn omega(&mut self, mut p: Problem) -> Result<Option<Vec<i128>>, GaveUp> {
        let (mut trail, mut reductions) = (Vec::new(), 0);
        let mut values = loop {
            self.spend(1 + p.equalities.len() + p.inequalities.len())?;
            let Some(thinnest) = p.normalize()? else {
                return Ok(None);
            };
            if let Some(e) = p.equalities.pop() {
                trail.push(p.eliminate_equality(e)?);
                continue;
            }
            let Some(choice) = p.choose() else {
                break vec![0; p.n]; // no constraint left
            };
            let thin = thinnest.clone().filter(|t| t.hi - t.lo < THIN);
            let exact = choice.splinters == 0;
            let found = if exact && (choice.growth <= GROWTH || thin.is_none()) {
                trail.push(p.eliminate(choice.k, false, self)?);
                continue;
            } else if let Some(slab) = thin {
                self.branch(&p, &slab)?
            } else {
                if reductions < p.n {
                    if let Some(step) = p.reduce(self)? {
                        reductions += 1;
                        trail.push(step);
                        continue;
                    }
                }
                self.inexact(p, choice.k, choice.side, thinnest)?
            };
            match found {
                Some(values) => break values,
                None => return Ok(None),
            }
        };
        for step in trail.iter().rev() {
            step.apply(&mut values)?;
        }
        Ok(Some(values))
    }

    /// Decides `p` when Fourier–Motzkin is inexact on y_k: no solution when the real shadow
    /// has none, a solution when the dark shadow has one, else one in a splinter (from the
    /// bounds on `side` of y_k), or with a value of the thinnest slab when that is fewer
    /// problems.
    fn inexact(
        &mut self,
        p: Problem,
        k: usize,
        side: i128,
        thinnest: Option<Slab>,
    ) -> Result<Option<Vec<i128>>, GaveUp> {
        let mut real = p.clone();
        real.eliminate(k, false, self)?;
        if self.solve(real)?.is_none() {
            return Ok(None);
        }
        let mut dark = p.clone();
        let step = dark.eliminate(k, true, self)?;
        if let Some(mut values) = self.solve(dark)? {
            step.apply(&mut values)?;
            return Ok(Some(values));
        }
        let (count, _) = p.splinters(k, side);
        if let Some(slab) = thinnest.filter(|t| t.hi - t.lo < count) {
            return self.branch(&p, &slab);
        }
        if count > (BUDGET - self.work) as i128 {
            return Err(GaveUp::Work);
        }
        let m = (p.inequalities.iter())
            .map(|c| c.coefficients[k] * -side)
            .max()
            .unwrap_or(0);
        for c in &p.inequalities {
            for t in 0..splinters(c.coefficients[k] * side, m) {
                let mut q = p.clone();
                q.equalities.push(c.shifted(-t)?);
                if let Some(values) = self.solve(q)? {
                    return Ok(Some(values));
                }
            }
        }
        Ok(None)
    }

    /// A solution of `p`, trying each value of the slab's form.
    fn branch(&mut self, p: &Problem, slab: &Slab) -> Result<Option<Vec<i128>>, GaveUp> {
        if slab.hi - slab.lo >= (BUDGET - self.work) as i128 {
            return Err(GaveUp::Work);
        }
        for value in slab.lo..=slab.hi {
            let mut q = p.clone();
            q.equalities.push(slab.form.shifted(-value)?);
            if let Some(values) = self.solve(q)? {
                return Ok(Some(values));
            }
        }
        Ok(None)
    }
}

/// `x − m·round(x / m)` (halves rounded up, m > 0): in `[−m/2, m/2)`, congruent to x modulo m.
fn mod_hat(x: i128, m: i128) -> i128 {
    x - m * floor_div(2 * x + m, 2 * m)
}

/// (In 64 bits when the numbers fit: 128-bit division is slow.)
fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        if let (Ok(mut x), Ok(mut y)) = (u64::try_from(a), u64::try_from(b)) {
            while y != 0 {
                (x, y) = (y, x % y);
            }
            return x.into();
        }
        (a, b) = (b, a % b);
    }
    a as i128
}

/// ⌊a / b⌋ for b > 0.
fn floor_div(a: i128, b: i128) -> i128 {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(x), Ok(y)) => x.div_euclid(y).into(),
        _ => a.div_euclid(b),
    }
}

/// ⌈a / b⌉ for b > 0.
fn ceil_div(a: i128, b: i128) -> i128 {
    let q = floor_div(a, b);
    q + i128::from(q * b < a)
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

    // ---- PolyBench kernels at any N ----

    /// One memory instruction of a kernel: its chain of loops (one letter per loop, so that
    /// two chains share their common prefix), its reference, and whether it writes.
    struct Access {
        path: &'static str,
        reference: Reference,
        writes: bool,
    }

    /// An affine function of a chain's virtual iterators: `constant + Σ coefficients·vi`.
    fn ix(constant: i64, coefficients: &[i64]) -> Affine {
        max(constant, coefficients)
    }

    /// The double `index` of a row-major array at `base` with `dims` elements per dimension,
    /// accessed in the chain `path` whose maxes are `chain` (one per letter).
    fn access(
        path: &'static str,
        chain: &[Affine],
        writes: bool,
        base: i64,
        dims: &[i64],
        index: &[Affine],
    ) -> Access {
        let depth = path.len();
        let mut address = Affine {
            constant: base,
            coefficients: vec![0; depth],
        };
        for (d, index) in index.iter().enumerate() {
            let stride = 8 * dims[d + 1..].iter().product::<i64>();
            address.constant += stride * index.constant;
            for (k, c) in index.coefficients.iter().enumerate() {
                address.coefficients[k] += stride * c;
            }
        }
        let reference = double(address.constant, &address.coefficients, &chain[..depth]);
        Access {
            path,
            reference,
            writes,
        }
    }

    /// The levels two chains share.
    fn common(a: &str, b: &str) -> usize {
        a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
    }

    /// Arrays far apart, so that they do not overlap even at n = 10^4 (800 MB each).
    const KA: i64 = 1 << 40;
    const KB: i64 = 2 << 40;
    const KC: i64 = 3 << 40;
    const KD: i64 = 4 << 40;
    const KE: i64 = 5 << 40;

    /// The kernels at size n: name, accesses (arrays of n × n doubles, n × n × n for 3-D).
    fn kernels(n: i64) -> Vec<(&'static str, Vec<Access>)> {
        let (nn, m1, m2) = ([n, n], n - 1, n - 2);
        let v = |k: usize, depth: usize| {
            let mut c = vec![0; depth];
            c[k] = 1;
            ix(0, &c)
        };
        let mut all = Vec::new();
        {
            // for i, for j < i: A[i][j] = A[j][i]
            let c = [max(m1, &[]), max(-1, &[1])];
            let (i, j) = (v(0, 2), v(1, 2));
            let at = |w, index: &[Affine]| access("ij", &c, w, KA, &nn, index);
            all.push((
                "transpose",
                vec![at(true, &[i.clone(), j.clone()]), at(false, &[j, i])],
            ));
        }
        {
            // lu (right-looking): for k, for i > k, for j > k: A[i][j] -= A[i][k] * A[k][j]
            let c = [max(m1, &[]), max(m2, &[-1]), max(m2, &[-1, 0])];
            let (k, i, j) = (ix(0, &[1, 0, 0]), ix(1, &[1, 1, 0]), ix(1, &[1, 0, 1]));
            let at = |w, index: &[Affine]| access("kij", &c, w, KA, &nn, index);
            all.push((
                "lu right-looking",
                vec![
                    at(true, &[i.clone(), j.clone()]),
                    at(false, &[i.clone(), j.clone()]),
                    at(false, &[i, k.clone()]),
                    at(false, &[k, j]),
                ],
            ));
        }
        {
            // gemm: for i, for j: C[i][j] *= beta; for k: C[i][j] += A[i][k] * B[k][j]
            let c = [max(m1, &[]), max(m1, &[0]), max(m1, &[0, 0])];
            let (i, j, k) = (v(0, 3), v(1, 3), v(2, 3));
            let (i2, j2) = (v(0, 2), v(1, 2));
            all.push((
                "gemm",
                vec![
                    access("ij", &c, true, KC, &nn, &[i2.clone(), j2.clone()]),
                    access("ij", &c, false, KC, &nn, &[i2, j2]),
                    access("ijk", &c, true, KC, &nn, &[i.clone(), j.clone()]),
                    access("ijk", &c, false, KC, &nn, &[i.clone(), j.clone()]),
                    access("ijk", &c, false, KA, &nn, &[i, k.clone()]),
                    access("ijk", &c, false, KB, &nn, &[k, j]),
                ],
            ));
        }
        {
            // lu (PolyBench): for i: for j < i: (for k < j: A[i][j] -= A[i][k] * A[k][j];)
            // A[i][j] /= A[j][j]; for j >= i: for k < i: A[i][j] -= A[i][k] * A[k][j]
            let c = [max(m1, &[]), max(-1, &[1]), max(-1, &[0, 1])];
            let c2 = [max(m1, &[]), max(m1, &[-1]), max(-1, &[1, 0])];
            let (i, j, k) = (v(0, 3), v(1, 3), v(2, 3));
            let (i2, j2) = (v(0, 2), v(1, 2));
            let (ib, jb, kb) = (v(0, 3), ix(0, &[1, 1, 0]), v(2, 3));
            let at = |p, w, index: &[Affine]| access(p, &c, w, KA, &nn, index);
            let bt = |w, index: &[Affine]| access("iJK", &c2, w, KA, &nn, index);
            all.push((
                "lu",
                vec![
                    at("ijk", true, &[i.clone(), j.clone()]),
                    at("ijk", false, &[i.clone(), k.clone()]),
                    at("ijk", false, &[k, j]),
                    at("ij", true, &[i2.clone(), j2.clone()]),
                    at("ij", false, &[j2.clone(), j2]),
                    bt(true, &[ib.clone(), jb.clone()]),
                    bt(false, &[ib, kb.clone()]),
                    bt(false, &[kb, jb]),
                ],
            ));
        }
        {
            // cholesky: for i: for j < i: (for k < j: A[i][j] -= A[i][k] * A[j][k];)
            // A[i][j] /= A[j][j]; for k < i: A[i][i] -= A[i][k] * A[i][k]; A[i][i] = sqrt
            let c = [max(m1, &[]), max(-1, &[1]), max(-1, &[0, 1])];
            let c2 = [max(m1, &[]), max(-1, &[1])];
            let (i, j, k) = (v(0, 3), v(1, 3), v(2, 3));
            let (i2, j2) = (v(0, 2), v(1, 2));
            let (ik, kk) = (v(0, 2), v(1, 2));
            let at = |p, w, index: &[Affine]| access(p, &c, w, KA, &nn, index);
            all.push((
                "cholesky",
                vec![
                    at("ijk", true, &[i.clone(), j.clone()]),
                    at("ijk", false, &[i, k.clone()]),
                    at("ijk", false, &[j, k]),
                    at("ij", true, &[i2.clone(), j2.clone()]),
                    at("ij", false, &[j2.clone(), j2]),
                    access("iK", &c2, true, KA, &nn, &[ik.clone(), ik.clone()]),
                    access("iK", &c2, false, KA, &nn, &[ik, kk]),
                    access("i", &c, true, KA, &nn, &[v(0, 1), v(0, 1)]),
                ],
            ));
        }
        {
            // trisolv: for i: x[i] = b[i]; for j < i: x[i] -= L[i][j] * x[j]; x[i] /= L[i][i]
            let c = [max(m1, &[]), max(-1, &[1])];
            let (i, j, i1) = (v(0, 2), v(1, 2), v(0, 1));
            all.push((
                "trisolv",
                vec![
                    access("i", &c, true, KB, &[n], std::slice::from_ref(&i1)),
                    access("ij", &c, true, KB, &[n], std::slice::from_ref(&i)),
                    access("ij", &c, false, KB, &[n], std::slice::from_ref(&j)),
                    access("ij", &c, false, KA, &nn, &[i, j]),
                    access("i", &c, false, KA, &nn, &[i1.clone(), i1]),
                ],
            ));
        }
        {
            // syrk: for i: for j <= i: C[i][j] *= beta; for k: for j <= i:
            // C[i][j] += A[i][k] * A[j][k]
            let c = [max(m1, &[]), max(0, &[1])];
            let c3 = [max(m1, &[]), max(m1, &[0]), max(0, &[1, 0])];
            let (i, k, j) = (v(0, 3), v(1, 3), v(2, 3));
            all.push((
                "syrk",
                vec![
                    access("ij", &c, true, KC, &nn, &[v(0, 2), v(1, 2)]),
                    access("ikj", &c3, true, KC, &nn, &[i.clone(), j.clone()]),
                    access("ikj", &c3, false, KA, &nn, &[i, k.clone()]),
                    access("ikj", &c3, false, KA, &nn, &[j, k]),
                ],
            ));
        }
        {
            // correlation: for i < n - 1: for j in i + 1..n: corr[i][j] = 0; for k:
            // corr[i][j] += data[k][i] * data[k][j]; corr[j][i] = corr[i][j]
            let c = [max(m2, &[]), max(m2, &[-1]), max(m1, &[0, 0])];
            let (i, j, k) = (v(0, 3), ix(1, &[1, 1, 0]), v(2, 3));
            let (i2, j2) = (v(0, 2), ix(1, &[1, 1]));
            all.push((
                "correlation",
                vec![
                    access("ij", &c, true, KC, &nn, &[i2.clone(), j2.clone()]),
                    access("ijk", &c, true, KC, &nn, &[i.clone(), j.clone()]),
                    access("ijk", &c, false, KA, &nn, &[k.clone(), i]),
                    access("ijk", &c, false, KA, &nn, &[k, j]),
                    access("ij", &c, true, KC, &nn, &[j2.clone(), i2.clone()]),
                    access("ij", &c, false, KC, &nn, &[i2, j2]),
                ],
            ));
        }
        {
            // seidel-2d: for i, j in 1..n-1: A[i][j] = (9 neighbours) / 9
            let c = [max(n - 3, &[]), max(n - 3, &[0])];
            let mut accesses = vec![access(
                "ij",
                &c,
                true,
                KA,
                &nn,
                &[ix(1, &[1, 0]), ix(1, &[0, 1])],
            )];
            for di in 0..3 {
                for dj in 0..3 {
                    let index = [ix(di, &[1, 0]), ix(dj, &[0, 1])];
                    accesses.push(access("ij", &c, false, KA, &nn, &index));
                }
            }
            all.push(("seidel-2d", accesses));
        }
        {
            // gramschmidt: for k: R[k][k] = ...; for i: Q[i][k] = A[i][k] / R[k][k];
            // for j > k: R[k][j] = 0; for i: R[k][j] += Q[i][k] * A[i][j];
            // for i: A[i][j] -= Q[i][k] * R[k][j]
            let c = [max(m1, &[]), max(m1, &[0])];
            let cj = [max(m1, &[]), max(m2, &[-1]), max(m1, &[0, 0])];
            let (k, j, i) = (v(0, 3), ix(1, &[1, 1, 0]), v(2, 3));
            let (k2, j2) = (v(0, 2), ix(1, &[1, 1]));
            let at = |p, w, base, index: &[Affine]| access(p, &cj, w, base, &nn, index);
            all.push((
                "gramschmidt",
                vec![
                    access("k", &c, true, KB, &nn, &[v(0, 1), v(0, 1)]),
                    access("kI", &c, true, KC, &nn, &[v(1, 2), v(0, 2)]),
                    access("kI", &c, false, KA, &nn, &[v(1, 2), v(0, 2)]),
                    access("kI", &c, false, KB, &nn, &[v(0, 2), v(0, 2)]),
                    at("kj", true, KB, &[k2, j2]),
                    at("kja", true, KB, &[k.clone(), j.clone()]),
                    at("kja", false, KC, &[i.clone(), k.clone()]),
                    at("kja", false, KA, &[i.clone(), j.clone()]),
                    at("kjb", true, KA, &[i.clone(), j.clone()]),
                    at("kjb", false, KC, &[i.clone(), k.clone()]),
                    at("kjb", false, KB, &[k, j]),
                ],
            ));
        }
        {
            // trmm: for i, for j: for k > i: B[i][j] += A[k][i] * B[k][j]; B[i][j] *= alpha
            let c = [max(m1, &[]), max(m1, &[0]), max(m2, &[-1, 0])];
            let (i, j, k) = (v(0, 3), v(1, 3), ix(1, &[1, 0, 1]));
            all.push((
                "trmm",
                vec![
                    access("ijk", &c, true, KB, &nn, &[i.clone(), j.clone()]),
                    access("ijk", &c, false, KA, &nn, &[k.clone(), i]),
                    access("ijk", &c, false, KB, &nn, &[k, j]),
                    access("ij", &c, true, KB, &nn, &[v(0, 2), v(1, 2)]),
                ],
            ));
        }
        {
            // symm: for i, for j: for k < i: C[k][j] += B[i][j] * A[i][k];
            // C[i][j] = C[i][j] + B[i][j] * A[i][i]
            let c = [max(m1, &[]), max(m1, &[0]), max(-1, &[1, 0])];
            let (i, j, k) = (v(0, 3), v(1, 3), v(2, 3));
            let (i2, j2) = (v(0, 2), v(1, 2));
            all.push((
                "symm",
                vec![
                    access("ijk", &c, true, KC, &nn, &[k.clone(), j.clone()]),
                    access("ijk", &c, false, KB, &nn, &[i.clone(), j.clone()]),
                    access("ijk", &c, false, KA, &nn, &[i, k.clone()]),
                    access("ijk", &c, false, KB, &nn, &[k, j]),
                    access("ij", &c, true, KC, &nn, &[i2.clone(), j2.clone()]),
                    access("ij", &c, false, KA, &nn, &[i2.clone(), i2]),
                ],
            ));
        }
        {
            // ludcmp's back substitution: for i = n-1 down to 0: w = y[i];
            // for j > i: w -= A[i][j] * x[j]; x[i] = w / A[i][i]
            let c = [max(m1, &[]), max(-1, &[1])];
            let i1 = ix(m1, &[-1]);
            let (i, j) = (ix(m1, &[-1, 0]), ix(n, &[-1, 1]));
            all.push((
                "ludcmp",
                vec![
                    access("i", &c, true, KD, &[n], std::slice::from_ref(&i1)),
                    access("i", &c, false, KE, &[n], &[i1]),
                    access("ij", &c, false, KD, &[n], std::slice::from_ref(&j)),
                    access("ij", &c, false, KA, &nn, &[i, j]),
                ],
            ));
        }
        {
            // seidel-3d: for i, j, k in 1..n-1: A[i][j][k] = (7 neighbours) / 7
            let c = [max(n - 3, &[]), max(n - 3, &[0]), max(n - 3, &[0, 0])];
            let at = |di, dj, dk, w| {
                let index = [ix(di, &[1, 0, 0]), ix(dj, &[0, 1, 0]), ix(dk, &[0, 0, 1])];
                access("ijk", &c, w, KA, &[n, n, n], &index)
            };
            let mut accesses = vec![at(1, 1, 1, true)];
            for (di, dj, dk) in [
                (0, 1, 1),
                (2, 1, 1),
                (1, 0, 1),
                (1, 2, 1),
                (1, 1, 0),
                (1, 1, 2),
            ] {
                accesses.push(at(di, dj, dk, false));
            }
            all.push(("seidel-3d", accesses));
        }
        all
    }

    /// Every pair of a kernel's accesses with a write and common loops, as the tool tests them.
    fn pairs(accesses: &[Access]) -> Vec<(&Access, &Access, usize)> {
        let mut pairs = Vec::new();
        for (x, a) in accesses.iter().enumerate() {
            for b in &accesses[x..] {
                let common = common(a.path, b.path);
                if (a.writes || b.writes) && common > 0 {
                    pairs.push((a, b, common));
                }
            }
        }
        pairs
    }

    // ---- realistic sizes: exact, and a bounded amount of work ----

    /// The work a query may do in the tests below: a deterministic guard on its time (some
    /// 0.3 µs per unit, measured), far below [`BUDGET`].
    const WORK: u64 = 10_000;

    const BOTH: [Order; 2] = [Order::AFirst, Order::BFirst];

    /// [`dist`], from a solver that must neither give up nor do more than [`WORK`].
    fn exact(
        a: &Reference,
        b: &Reference,
        common: usize,
        level: usize,
        order: Order,
    ) -> Option<Option<Vec<i64>>> {
        let mut solver = Solver::default();
        let got = decide_with(&mut solver, a, b, common, level, order);
        let work = solver.work;
        assert!(work <= WORK, "level {level} {order:?}: work {work}");
        let got = got.unwrap_or_else(|_| panic!("level {level} {order:?}: gave up"));
        got.map(|d| d.distance)
    }

    #[test]
    fn triangular_transpose_is_exact_at_large_sizes() {
        // for i in 0..n, j in 0..i: A[i][j] = A[j][i]. The write is below the diagonal and
        // the read above it, so neither loop carries anything, nor does the write alone.
        for n in [1000, 4000, 10_000] {
            let nest = vec![max(n - 1, &[]), max(-1, &[1])];
            let write = double(A, &[8 * n, 8], &nest);
            let read = double(A, &[8, 8 * n], &nest);
            for (x, y) in [(&write, &read), (&read, &write), (&write, &write)] {
                for (level, order) in [0, 1].into_iter().flat_map(|l| BOTH.map(|o| (l, o))) {
                    assert_eq!(exact(x, y, 2, level, order), None, "n {n}");
                }
            }
        }
    }

    #[test]
    fn lu_carries_its_update_at_k_only() {
        // for k in 0..n, i in k+1..n, j in k+1..n: A[i][j] -= A[i][k] * A[k][j], with the
        // virtual iterators from 0 (i = vi + k + 1, j = vj + k + 1, both at most n − 2 − k).
        let n = 2000;
        let row = 8 * n;
        let nest = vec![max(n - 1, &[]), max(n - 2, &[-1]), max(n - 2, &[-1, 0])];
        // A[i][j] = A + row·(vi + k + 1) + 8·(vj + k + 1), A[i][k] and A[k][j] likewise.
        let a_ij = double(KA + row + 8, &[row + 8, row, 8], &nest);
        let a_ik = double(KA + row, &[row + 8, row, 0], &nest);
        let a_kj = double(KA + 8, &[row + 8, 0, 8], &nest);
        // The write of A[i][j] in iteration (k, i, j) and the read of A[i'][k'] in (k', i',
        // j') touch the same element iff i' = i and k' = j. Then k' = j > k: the read comes
        // at a later k (it exists, e.g. k = 0, j = 1, i = 2: flow), at a distance k' − k =
        // j − k that varies; never at an earlier k nor at the same one (j ≠ k). Likewise
        // with A[k'][j'] (k' = i > k). A[i][j] itself (read, then written) is touched again
        // in every later k' < min(i, j): output, flow and anti dependences at varying
        // distances, both ways. Within one k, distinct (i, j) are distinct elements: the i
        // and j loops carry nothing among these references.
        for (other, both_ways) in [(&a_ik, false), (&a_kj, false), (&a_ij, true)] {
            assert_eq!(exact(&a_ij, other, 3, 0, Order::AFirst), Some(None));
            let back = exact(&a_ij, other, 3, 0, Order::BFirst);
            assert_eq!(back, both_ways.then_some(None));
            for (level, order) in [1, 2].into_iter().flat_map(|l| BOTH.map(|o| (l, o))) {
                assert_eq!(
                    exact(&a_ij, other, 3, level, order),
                    None,
                    "{level} {order:?}"
                );
            }
        }
    }

    #[test]
    fn gemm_carries_its_reduction_at_k_only() {
        // for i, j, k in 0..n: C[i][j] += A[i][k] * B[k][j] (k innermost)
        let n = 4000;
        let row = 8 * n;
        let nest = vec![max(n - 1, &[]), max(n - 1, &[0]), max(n - 1, &[0, 0])];
        let c_ij = double(KC, &[row, 8, 0], &nest);
        let a_ik = double(KA, &[row, 0, 8], &nest);
        let b_kj = double(KB, &[0, 8, row], &nest);
        // C[i][j] is written at every k and read again at every later k: the k loop
        // carries a flow (and anti, and output) dependence, at every distance [0, 0, d] for
        // d in 1..n, so at no constant distance ([0, 0, 1] is the shortest). Distinct (i, j)
        // are distinct elements, so the i and j loops carry nothing.
        for order in BOTH {
            assert_eq!(exact(&c_ij, &c_ij, 3, 2, order), Some(None));
            for level in [0, 1] {
                assert_eq!(exact(&c_ij, &c_ij, 3, level, order), None);
            }
            for other in [&a_ik, &b_kj] {
                for level in 0..3 {
                    assert_eq!(exact(&c_ij, other, 3, level, order), None);
                }
            }
        }
    }

    /// Per pair of accesses of each kernel (with a write), level and order: the answer.
    fn kernel_answers(n: i64) -> Vec<(String, Option<Option<Vec<i64>>>)> {
        let mut answers = Vec::new();
        for (name, accesses) in kernels(n) {
            for (a, b, common) in pairs(&accesses) {
                for (level, order) in (0..common).flat_map(|l| BOTH.map(|o| (l, o))) {
                    let what = format!("{name}: {} {} level {level} {order:?}", a.path, b.path);
                    let got = exact(&a.reference, &b.reference, common, level, order);
                    answers.push((what, got));
                }
            }
        }
        answers
    }

    #[test]
    fn polybench_kernels_are_exact_at_any_size() {
        for (name, accesses) in kernels(7) {
            for (a, b, common) in pairs(&accesses) {
                let checked = check(&a.reference, &b.reference, common);
                checked.unwrap_or_else(|e| panic!("{name}: {} {}: {e}", a.path, b.path));
            }
        }
        // The answers do not depend on n (from 7 on), and the brute force agrees at 7.
        let small = kernel_answers(7);
        for n in [1000, 10_000] {
            for (got, want) in kernel_answers(n).iter().zip(&small) {
                assert_eq!(got, want, "n {n}");
            }
        }
    }

    /// A random nest of the kernels' form, at any size: row-major n × n doubles, each index
    /// a sum of iterators plus an offset in −1..=1, loops rectangular or triangular.
    #[derive(Debug, Clone)]
    struct Shape {
        /// Per level from 1: its max is n − 1, or `outer + c` for an outer level and c in
        /// −1..=0, or `n − 2 − outer`.
        maxes: Vec<(u8, usize, i64)>,
        /// Per reference and dimension: the iterators summed (0 or 1 each), the offset.
        index: [Vec<(Vec<i64>, i64)>; 2],
        /// Whether b's innermost loop is its own (the references share one level less).
        apart: bool,
    }

    impl Shape {
        fn at(&self, n: i64) -> (Reference, Reference, usize) {
            let depth = self.maxes.len() + 1;
            let mut nest = vec![max(n - 1, &[])];
            for (k, &(kind, outer, c)) in self.maxes.iter().enumerate() {
                let mut coefficients = vec![0; k + 1];
                nest.push(match kind {
                    0 => max(n - 1, &coefficients),
                    1 => {
                        coefficients[outer] = 1;
                        max(c, &coefficients)
                    }
                    _ => {
                        coefficients[outer] = -1;
                        max(n - 2, &coefficients)
                    }
                });
            }
            let reference = |index: &[(Vec<i64>, i64)]| {
                let dims = index
                    .iter()
                    .map(|(iterators, offset)| ix(offset + 1, iterators));
                let path = &"ijk"[..depth];
                access(path, &nest, false, KA, &[n, n], &dims.collect::<Vec<_>>()).reference
            };
            let (a, mut b) = (reference(&self.index[0]), reference(&self.index[1]));
            if self.apart {
                b.address.coefficients[depth - 1] = 0;
            }
            (a, b, depth - usize::from(self.apart))
        }
    }

    fn arb_shape() -> impl Strategy<Value = Shape> {
        (2usize..=3).prop_flat_map(|depth| {
            let maxes = (1..depth)
                .map(|k| (0u8..3, 0..k, -1i64..=0))
                .collect::<Vec<_>>();
            let dimension = (prop::collection::vec(0i64..=1, depth), -1i64..=1);
            let index = prop::collection::vec(dimension, 2);
            (maxes, [index.clone(), index], any::<bool>()).prop_map(|(maxes, index, apart)| Shape {
                maxes,
                index,
                apart,
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Exact at n = 9 (against brute force), and at n = 10^4 neither giving up nor
        /// working more than [`WORK`].
        #[test]
        fn realistic_nests_are_exact_at_any_size(shape in arb_shape()) {
            let (a, b, common) = shape.at(9);
            check(&a, &b, common)?;
            let (a, b, common) = shape.at(10_000);
            for (level, order) in (0..common).flat_map(|l| BOTH.map(|o| (l, o))) {
                exact(&a, &b, common, level, order);
            }
        }
    }

    /// [`arb_case`] with large strides: up to 2^47 bytes, multiples of 8 or not, or up to
    /// 10^5; half the time b's equal to a's on the common levels. Sizes up to 511 bytes,
    /// rectangular loops of up to 10 iterations.
    fn arb_wide_case() -> impl Strategy<Value = (Reference, Reference, usize)> {
        let strides = prop::collection::vec(-(1i64 << 47)..(1 << 47), 6);
        let size = prop::sample::select(vec![1u64, 8, 64, 511]);
        (arb_case(false), strides, size, 0u8..3, any::<bool>()).prop_map(
            |((mut a, mut b, common), strides, size, kind, same)| {
                let stride = |x: i64| match kind {
                    0 => x,
                    1 => x / 8 * 8,
                    _ => x % 100_000,
                };
                for (k, c) in a.address.coefficients.iter_mut().enumerate() {
                    *c = stride(strides[k]);
                }
                for (k, c) in b.address.coefficients.iter_mut().enumerate() {
                    *c = match same && k < common {
                        true => a.address.coefficients[k],
                        false => stride(strides[3 + k]),
                    };
                }
                (a.size, b.size) = (size, size);
                for max in a.max.iter_mut().chain(&mut b.max) {
                    if max.coefficients.iter().all(|&c| c == 0) {
                        max.constant = max.constant.max(0) + 3;
                    }
                }
                (a, b, common)
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]

        /// Large numbers in small domains: enumeration rather than the Omega test.
        #[test]
        fn exact_with_large_strides((a, b, common) in arb_wide_case()) {
            check(&a, &b, common)?;
        }
    }
}
