//! Fitting `value = base + Σ stride_k × v_k` online to the values one instruction produced at
//! sampled iterator vectors `v` (VMAD §5.1: the first values compute the coefficients, the
//! rest verify them).
//!
//! Samples arrive in execution order, so each one usually differs from the first in a single
//! loop level whose stride is still unknown: that stride is then `Δvalue / Δv` (it must divide
//! exactly). A sample that differs in several unknown levels waits in a small buffer until
//! the others are known; a sample that differs only in known levels verifies the function. A
//! single miss makes the instruction non-linear for the entry: the fit keeps what it saw
//! (range and distinct steps) for the report.
//!
//! A [`Fit`] holds one entry of the nest (its base can change from one entry to the next,
//! for example a function called on different arrays); a [`Summary`] merges the entries.

/// Loop levels a fit follows at most (a deeper instruction is fitted on its outermost
/// levels only by the caller, or left out).
pub const MAX_DEPTH: usize = 8;
/// Samples that may wait for their strides.
const PENDING: usize = 8;
/// Distinct steps between consecutive values kept to describe a non-linear instruction.
pub const STEPS: usize = 4;

/// Iterator vectors, outermost level first; unused levels are 0.
pub type Iterators = [i64; MAX_DEPTH];

/// The fit of one instruction over one entry of its nest.
#[derive(Debug, Clone)]
pub struct Fit {
    depth: usize,
    origin: Option<(Iterators, i64)>,
    strides: [Option<i64>; MAX_DEPTH],
    pending: [(Iterators, i64); PENDING],
    pending_len: usize,
    linear: bool,
    samples: u64,
    verified: u64,
    seen: Seen,
}

/// What an instruction's values looked like, linear or not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    pub min: i64,
    pub max: i64,
    last: Option<i64>,
    /// The first distinct differences between consecutive values.
    pub steps: [i64; STEPS],
    pub step_count: usize,
    /// More distinct differences were seen than `steps` holds.
    pub more_steps: bool,
}

impl Seen {
    fn add(&mut self, value: i64) {
        match self.last {
            None => {
                self.min = value;
                self.max = value;
            }
            Some(last) => {
                self.min = self.min.min(value);
                self.max = self.max.max(value);
                self.note_step(value.wrapping_sub(last));
            }
        }
        self.last = Some(value);
    }

    /// Keeps `step` among the distinct steps, or notes that there were more.
    fn note_step(&mut self, step: i64) {
        if !self.steps[..self.step_count].contains(&step) {
            if self.step_count < STEPS {
                self.steps[self.step_count] = step;
                self.step_count += 1;
            } else {
                self.more_steps = true;
            }
        }
    }

    fn merge(&mut self, other: &Seen) {
        if other.last.is_none() {
            return;
        }
        if self.last.is_none() {
            *self = *other;
            return;
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        for &step in other.steps() {
            self.note_step(step);
        }
        self.more_steps |= other.more_steps;
    }

    /// The distinct steps seen.
    pub fn steps(&self) -> &[i64] {
        &self.steps[..self.step_count]
    }
}

impl Fit {
    /// A fit over `depth` levels (at most [`MAX_DEPTH`]).
    pub fn new(depth: usize) -> Fit {
        assert!(depth <= MAX_DEPTH, "depth {depth} over {MAX_DEPTH}");
        Fit {
            depth,
            origin: None,
            strides: [None; MAX_DEPTH],
            pending: [([0; MAX_DEPTH], 0); PENDING],
            pending_len: 0,
            linear: true,
            samples: 0,
            verified: 0,
            seen: Seen::default(),
        }
    }

    /// The instruction produced `value` at iterators `v` (only its first `depth` count).
    pub fn add(&mut self, v: &Iterators, value: i64) {
        self.samples += 1;
        self.seen.add(value);
        if !self.linear {
            return;
        }
        let Some(origin) = self.origin else {
            self.origin = Some((*v, value));
            return;
        };
        if !self.place(&origin, v, value) {
            if self.pending_len < PENDING {
                self.pending[self.pending_len] = (*v, value);
                self.pending_len += 1;
            }
            return;
        }
        // A new stride may let waiting samples in.
        let mut progress = true;
        while progress && self.linear && self.pending_len > 0 {
            progress = false;
            let mut i = 0;
            while i < self.pending_len {
                let (w, x) = self.pending[i];
                if self.place(&origin, &w, x) {
                    self.pending_len -= 1;
                    self.pending[i] = self.pending[self.pending_len];
                    progress = true;
                } else {
                    i += 1;
                }
            }
        }
    }

    /// Uses one sample against the origin: verifies it, learns a stride from it or finds
    /// the values non-linear (true), or leaves it for later (false: several unknown strides).
    fn place(&mut self, origin: &(Iterators, i64), v: &Iterators, value: i64) -> bool {
        let (o, origin_value) = origin;
        let mut rest = value as i128 - *origin_value as i128;
        let mut unknown = None;
        for k in 0..self.depth {
            let dv = v[k] as i128 - o[k] as i128;
            if dv == 0 {
                continue;
            }
            match self.strides[k] {
                Some(s) => rest -= s as i128 * dv,
                None if unknown.is_none() => unknown = Some((k, dv)),
                None => return false,
            }
        }
        match unknown {
            None if rest == 0 => self.verified += 1,
            None => self.linear = false,
            Some((k, dv)) => match i64::try_from(rest / dv) {
                Ok(stride) if rest % dv == 0 => self.strides[k] = Some(stride),
                _ => self.linear = false,
            },
        }
        true
    }

    /// Whether every sample so far fits one affine function.
    pub fn is_linear(&self) -> bool {
        self.linear
    }

    /// Samples that checked the function (neither the origin nor one that set a stride).
    pub fn verified(&self) -> u64 {
        self.verified
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Per level, its stride when a sample told it (`None`: the level never changed
    /// between samples that could tell).
    pub fn strides(&self) -> &[Option<i64>] {
        &self.strides[..self.depth]
    }

    /// The value at iterators 0, when linear and every level the samples moved in has its
    /// stride (a level that never moved counts as stride 0 there).
    pub fn base(&self) -> Option<i64> {
        let (o, value) = self.origin?;
        if !self.linear {
            return None;
        }
        let mut base = value as i128;
        for (&at, stride) in o.iter().zip(&self.strides).take(self.depth) {
            if at != 0 {
                base -= (*stride)? as i128 * at as i128;
            }
        }
        i64::try_from(base).ok()
    }

    pub fn seen(&self) -> &Seen {
        &self.seen
    }
}

/// One level's stride over several entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stride {
    /// No entry told it.
    #[default]
    Unknown,
    /// The same in every entry that told it.
    Value(i64),
    /// Entries disagree.
    Varies,
}

/// The fits of one instruction over the entries of its nest.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub samples: u64,
    pub verified: u64,
    /// Entries whose samples fitted, and entries whose samples did not.
    pub linear_entries: u64,
    pub nonlinear_entries: u64,
    pub strides: Vec<Stride>,
    /// The base of the first linear entry with one.
    pub base: Option<i64>,
    pub seen: Seen,
}

impl Summary {
    /// Adds one entry's fit (an entry with no sample adds nothing).
    pub fn absorb(&mut self, fit: &Fit) {
        if fit.samples == 0 {
            return;
        }
        self.samples += fit.samples;
        self.verified += fit.verified;
        self.seen.merge(&fit.seen);
        if !fit.linear {
            self.nonlinear_entries += 1;
            return;
        }
        self.linear_entries += 1;
        if self.strides.len() < fit.depth {
            self.strides.resize(fit.depth, Stride::Unknown);
        }
        for (merged, &stride) in self.strides.iter_mut().zip(fit.strides()) {
            *merged = match (*merged, stride) {
                (m, None) => m,
                (Stride::Unknown, Some(s)) => Stride::Value(s),
                (Stride::Value(m), Some(s)) if m == s => Stride::Value(s),
                _ => Stride::Varies,
            };
        }
        if self.base.is_none() {
            self.base = fit.base();
        }
    }

    /// Merges another summary of the same instruction (another thread's).
    pub fn merge(&mut self, other: &Summary) {
        self.samples += other.samples;
        self.verified += other.verified;
        self.linear_entries += other.linear_entries;
        self.nonlinear_entries += other.nonlinear_entries;
        self.seen.merge(&other.seen);
        if self.strides.len() < other.strides.len() {
            self.strides.resize(other.strides.len(), Stride::Unknown);
        }
        for (merged, &stride) in self.strides.iter_mut().zip(&other.strides) {
            *merged = match (*merged, stride) {
                (m, Stride::Unknown) => m,
                (Stride::Unknown, s) => s,
                (Stride::Value(m), Stride::Value(s)) if m == s => Stride::Value(s),
                _ => Stride::Varies,
            };
        }
        if self.base.is_none() {
            self.base = other.base;
        }
    }

    /// Linear in every entry, with at least one sample that verified the function (a
    /// function fitted to the few values that define it is not evidence).
    pub fn is_linear(&self) -> bool {
        self.nonlinear_entries == 0 && self.linear_entries > 0 && self.verified > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(levels: &[i64]) -> Iterators {
        let mut v = [0; MAX_DEPTH];
        v[..levels.len()].copy_from_slice(levels);
        v
    }

    /// Runs a 2-level nest of `n × m` iterations through a fit of `f`.
    fn fit_nest(n: i64, m: i64, f: impl Fn(i64, i64) -> i64) -> Fit {
        let mut fit = Fit::new(2);
        for i in 0..n {
            for j in 0..m {
                fit.add(&at(&[i, j]), f(i, j));
            }
        }
        fit
    }

    #[test]
    fn a_row_major_array_fits_its_strides() {
        let fit = fit_nest(10, 10, |i, j| 4096 + 800 * i + 8 * j);
        assert!(fit.is_linear());
        assert_eq!(fit.strides(), &[Some(800), Some(8)]);
        assert_eq!(fit.base(), Some(4096));
        // Two samples set the strides, the origin is the third that is not a check.
        assert_eq!(fit.verified(), 100 - 3);
    }

    #[test]
    fn a_transposed_access_has_a_negative_and_a_large_stride() {
        let fit = fit_nest(5, 7, |i, j| 1_000_000 - 4 * i + 400 * j);
        assert!(fit.is_linear());
        assert_eq!(fit.strides(), &[Some(-4), Some(400)]);
    }

    #[test]
    fn an_indirect_access_is_not_linear_and_says_what_it_saw() {
        let index = [3, 1, 4, 1, 5, 9, 2, 6];
        let mut fit = Fit::new(1);
        for (i, &x) in index.iter().enumerate() {
            fit.add(&at(&[i as i64]), 100 + 4 * x);
        }
        assert!(!fit.is_linear());
        assert_eq!(fit.seen().min, 104);
        assert_eq!(fit.seen().max, 136);
        assert_eq!(fit.seen().steps(), &[-8, 12, -12, 16]);
        assert!(fit.seen().more_steps);
    }

    #[test]
    fn a_stride_that_does_not_divide_is_not_linear() {
        let mut fit = Fit::new(1);
        fit.add(&at(&[0]), 0);
        fit.add(&at(&[2]), 3);
        assert!(!fit.is_linear());
    }

    #[test]
    fn a_sample_moving_two_unknown_levels_waits_for_them() {
        // Guarded by a condition: (0,0), then (1,1) moves both levels, then (1,0) and (2,1).
        let f = |i: i64, j: i64| 50 + 100 * i + 3 * j;
        let mut fit = Fit::new(2);
        for (i, j) in [(0, 0), (1, 1), (1, 0), (2, 1)] {
            fit.add(&at(&[i, j]), f(i, j));
        }
        assert!(fit.is_linear());
        assert_eq!(fit.strides(), &[Some(100), Some(3)]);
        assert_eq!(fit.verified(), 1);
        // The same order with a wrong value waiting: found when it can be checked.
        let mut fit = Fit::new(2);
        for (i, j, value) in [(0, 0, 50), (1, 1, 999), (1, 0, 150), (0, 1, 53)] {
            fit.add(&at(&[i, j]), value);
        }
        assert!(!fit.is_linear());
    }

    #[test]
    fn the_same_iteration_twice_with_two_values_is_not_linear() {
        let mut fit = Fit::new(1);
        fit.add(&at(&[0]), 8);
        fit.add(&at(&[0]), 16);
        assert!(!fit.is_linear());
    }

    #[test]
    fn summaries_keep_agreeing_strides_and_mark_varying_ones() {
        let mut summary = Summary::default();
        summary.absorb(&fit_nest(3, 3, |i, j| 800 * i + 8 * j));
        summary.absorb(&fit_nest(3, 3, |i, j| 5000 + 1600 * i + 8 * j));
        assert!(summary.is_linear());
        assert_eq!(summary.strides, vec![Stride::Varies, Stride::Value(8)]);
        assert_eq!(summary.base, Some(0));
        let mut other = Summary::default();
        other.absorb(&fit_nest(2, 2, |i, j| i * j));
        summary.merge(&other);
        assert!(!summary.is_linear());
        assert_eq!(summary.linear_entries, 2);
        assert_eq!(summary.nonlinear_entries, 1);
    }

    #[test]
    fn too_few_samples_are_not_evidence() {
        let mut summary = Summary::default();
        summary.absorb(&fit_nest(1, 2, |_, j| 8 * j));
        assert_eq!(summary.verified, 0);
        assert!(!summary.is_linear());
    }

    proptest! {
        /// Any affine function over any sampled nest shape is found linear with its
        /// strides, where the levels moved.
        #[test]
        fn affine_values_always_fit(
            base in -1_000_000i64..1_000_000,
            strides in proptest::collection::vec(-5000i64..5000, 3),
            trips in proptest::collection::vec(1i64..5, 3),
        ) {
            let mut fit = Fit::new(3);
            for i in 0..trips[0] {
                for j in 0..trips[1] {
                    for k in 0..trips[2] {
                        let v = at(&[i, j, k]);
                        fit.add(&v, base + strides[0] * i + strides[1] * j + strides[2] * k);
                    }
                }
            }
            prop_assert!(fit.is_linear());
            for k in 0..3 {
                if trips[k] > 1 {
                    prop_assert_eq!(fit.strides()[k], Some(strides[k]));
                }
            }
            prop_assert_eq!(fit.base(), Some(base));
        }

        /// One value off the function anywhere after the fitting samples is found.
        #[test]
        fn a_single_wrong_value_is_found(
            strides in proptest::collection::vec(-100i64..100, 2),
            wrong in 3usize..16,
            off in 1i64..1000,
        ) {
            let mut fit = Fit::new(2);
            let mut n = 0;
            for i in 0..4 {
                for j in 0..4 {
                    let mut value = strides[0] * i + strides[1] * j;
                    if n == wrong {
                        value += off;
                    }
                    fit.add(&at(&[i, j]), value);
                    n += 1;
                }
            }
            prop_assert!(!fit.is_linear());
        }
    }
}
