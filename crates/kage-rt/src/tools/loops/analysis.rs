//! The analyses on the loop-nest framework (issue 18, after VMAD §5.1–5.2): `interpolate`
//! fits the addresses each memory instruction of a nest touches in sampled iterations as an
//! affine function of the virtual iterators of the loops around it, and the inner loops'
//! trip counts as affine functions of the outer iterators; `dependences` adds, per sampled
//! entry, an exact dependence test on those functions (`kage_affine::dependence`), a shadow
//! of the sampled addresses for the instructions that are not affine, and the scalars the
//! build classified, and says which levels carry no dependence.
//!
//! Per thread, each open sampled entry has an [`EntryAnalysis`]; when the entry ends (or is
//! found dead), its results merge under a lock into the tool's [`NestAnalysis`] of the nest
//! (a few sampled entries per nest: no contention). Only the instrumented version calls
//! here, so the cost stays within the sampled iterations.

use std::collections::BTreeMap;

use kage_abi::loops::ScalarKind;
use kage_abi::{Nest, NONE};
use kage_affine::dependence::{self, Order, Reference};
use kage_affine::fit::{Fit, Iterators, Summary, MAX_DEPTH};
use kage_affine::Affine;
use kage_report::{
    AccessFit, AccessSummary, AnalysedLevel, AnalysedNest, Dependence, ScalarUse, SeenValues,
    TripCount,
};

use super::nests::NestInfo;
use super::LevelState;
use crate::collections::FastMap;
use crate::registry::REGISTRY;

/// Which analysis the tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Analysis {
    Interpolate,
    Dependences,
}

/// Bytes of one access the shadow follows (wider accesses are vector copies: their first
/// bytes stand for them).
const SHADOW_BYTES: u64 = 16;
/// Readers a shadow byte remembers since its last write.
const SHADOW_READERS: usize = 4;

/// The analysis of one open sampled entry.
pub struct EntryAnalysis {
    pub nest: u32,
    analysis: Analysis,
    /// Per access: its chain of levels (outermost first), whether it writes, its size.
    accesses: Vec<(Vec<u32>, bool, u64)>,
    /// Per level: the levels around it, outermost first, itself last.
    chains: Vec<Vec<u32>>,
    fits: Vec<Fit>,
    /// Per level (level 0's unused): its trip count per entry, over the outer iterators.
    trips: Vec<Fit>,
    trip_max: Vec<u64>,
    /// The outermost loop's largest iterator an access saw.
    root_seen: u64,
    shadow: Option<Shadow>,
}

/// The addresses of the sampled iterations, per byte: who wrote it last and who read it
/// since, with the iterators of their iteration.
#[derive(Default)]
struct Shadow {
    stamps: Vec<Iterators>,
    bytes: FastMap<u64, ShadowByte>,
    /// (level, source, sink, kind) found, and their distances.
    found: FastMap<DependenceKey, Option<Vec<i64>>>,
}

#[derive(Default, Clone, Copy)]
struct ShadowByte {
    write: Option<(u32, u32)>,
    reads: [(u32, u32); SHADOW_READERS],
    read_count: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Flow,
    Anti,
    Output,
}

impl Kind {
    fn of(source_writes: bool, sink_writes: bool) -> Kind {
        match (source_writes, sink_writes) {
            (true, false) => Kind::Flow,
            (false, true) => Kind::Anti,
            _ => Kind::Output,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Flow => "flow",
            Kind::Anti => "anti",
            Kind::Output => "output",
        }
    }
}

/// A dependence between two instructions: (carrying level, source, sink, kind).
type DependenceKey = (u32, u32, u32, Kind);

/// What the sampled entries of one nest showed, over threads.
#[derive(Default, Clone)]
pub struct NestAnalysis {
    entries: u64,
    summaries: Vec<Summary>,
    trips: Vec<Summary>,
    trip_range: Vec<(u64, u64, u64)>,
    /// (level, source, sink, kind) → (distance when the same in every entry, from samples).
    dependences: BTreeMap<DependenceKey, (Option<Vec<i64>>, bool)>,
    on_samples: Vec<bool>,
    /// The exact test's answers, by query: a nest's instructions often share one address
    /// function (fields of one struct, re-read), and its entries often repeat their bounds.
    answers: FastMap<Query, Option<Option<Vec<i64>>>>,
}

/// A query of the exact test, its references moved so that `a` starts at address 0 (the
/// answer does not depend on where the pair lies, only on where b lies from a).
#[derive(PartialEq, Eq, Hash, Clone)]
struct Query {
    a: Reference,
    b: Reference,
    common: u8,
    level: u8,
    order: Order,
}

/// Answers kept per nest, at most (a nest whose every entry asks new questions does not
/// grow without bound).
const ANSWERS_KEPT: usize = 1 << 14;

impl NestAnalysis {
    /// [`dependence::carried`], remembered: None if the level carries no dependence, else
    /// its distance when constant.
    fn carried(
        &mut self,
        a: &Reference,
        b: &Reference,
        common: usize,
        level: usize,
        order: Order,
    ) -> Option<Option<Vec<i64>>> {
        let moved = |r: &Reference| Reference {
            address: Affine {
                constant: r.address.constant.wrapping_sub(a.address.constant),
                coefficients: r.address.coefficients.clone(),
            },
            size: r.size,
            max: r.max.clone(),
        };
        let query = Query {
            a: moved(a),
            b: moved(b),
            common: common as u8,
            level: level as u8,
            order,
        };
        if let Some(answer) = self.answers.get(&query) {
            return answer.clone();
        }
        let answer =
            dependence::carried(&query.a, &query.b, common, level, order).map(|d| d.distance);
        if self.answers.len() >= ANSWERS_KEPT {
            self.answers.clear();
        }
        self.answers.insert(query, answer.clone());
        answer
    }
}

/// The levels around each level, outermost first, itself last.
fn chains(levels: &[LevelState]) -> Vec<Vec<u32>> {
    let mut chains: Vec<Vec<u32>> = Vec::with_capacity(levels.len());
    for (k, level) in levels.iter().enumerate() {
        let mut chain = if level.parent == NONE {
            Vec::new()
        } else {
            chains[level.parent as usize].clone()
        };
        chain.push(k as u32);
        chains.push(chain);
    }
    chains
}

fn iterators(chain: &[u32], levels: &[LevelState]) -> Iterators {
    let mut v = [0; MAX_DEPTH];
    for (slot, &k) in v.iter_mut().zip(chain) {
        *slot = levels[k as usize].vi as i64;
    }
    v
}

impl EntryAnalysis {
    /// The analysis of a new sampled entry of `nest` (registered as `id`).
    ///
    /// # Safety
    /// `nest` is a registered (validated) descriptor.
    pub unsafe fn new(
        analysis: Analysis,
        id: u32,
        nest: *const Nest,
        levels: &[LevelState],
    ) -> EntryAnalysis {
        let chains = chains(levels);
        let n = &*nest;
        let described = if n.accesses.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(n.accesses, n.access_count as usize)
        };
        let accesses: Vec<(Vec<u32>, bool, u64)> = (described.iter())
            .map(|a| {
                let chain = chains.get(a.level as usize).cloned().unwrap_or_default();
                (chain, a.writes != 0, a.size.max(1) as u64)
            })
            .collect();
        let fits = (accesses.iter())
            .map(|(chain, _, _)| Fit::new(chain.len().min(MAX_DEPTH)))
            .collect();
        let trips = (chains.iter())
            .map(|chain| Fit::new((chain.len() - 1).min(MAX_DEPTH)))
            .collect();
        EntryAnalysis {
            nest: id,
            analysis,
            trip_max: vec![0; chains.len()],
            root_seen: 0,
            accesses,
            chains,
            fits,
            trips,
            shadow: (analysis == Analysis::Dependences).then(Shadow::default),
        }
    }

    /// Access `index` of the nest touched `address`, the levels being at `levels`.
    pub fn access(&mut self, levels: &[LevelState], index: u32, address: usize) {
        let Some((chain, writes, size)) = self.accesses.get(index as usize) else {
            return;
        };
        let v = iterators(chain, levels);
        self.root_seen = self.root_seen.max(levels[0].vi);
        self.fits[index as usize].add(&v, address as i64);
        if let Some(shadow) = &mut self.shadow {
            shadow.record(&self.accesses, index, v, address as u64, *size, *writes);
        }
    }

    /// An entry of inner level `level` ran `trips` iterations.
    pub fn trip(&mut self, levels: &[LevelState], level: u32, trips: u64) {
        let k = level as usize;
        if k == 0 || k >= self.chains.len() {
            return;
        }
        let chain = &self.chains[k];
        let v = iterators(&chain[..chain.len() - 1], levels);
        self.trips[k].add(&v, trips as i64);
        self.trip_max[k] = self.trip_max[k].max(trips);
    }

    /// The entry ended after `root_trips` iterations of its outermost loop (`None`: left
    /// by an exception or a `longjmp`): its results, merged into `into`.
    pub fn finish(self, root_trips: Option<u64>, into: &mut NestAnalysis) {
        let n_levels = self.chains.len();
        let n_accesses = self.accesses.len();
        into.entries += 1;
        into.summaries.resize_with(n_accesses, Summary::default);
        into.trips.resize_with(n_levels, Summary::default);
        into.trip_range.resize(n_levels, (0, u64::MAX, 0));
        into.on_samples.resize(n_levels, false);
        for (summary, fit) in into.summaries.iter_mut().zip(&self.fits) {
            summary.absorb(fit);
        }
        for (k, fit) in self.trips.iter().enumerate().skip(1) {
            into.trips[k].absorb(fit);
            if fit.samples() > 0 {
                let range = &mut into.trip_range[k];
                range.0 += fit.samples();
                range.1 = range.1.min(fit.seen().min as u64);
                range.2 = range.2.max(fit.seen().max as u64);
            }
        }
        if self.analysis == Analysis::Dependences {
            self.dependences(root_trips, into);
        }
    }

    /// Each level's largest iterator as an affine function of the chain's outer
    /// iterators; marks the levels whose bound rests on samples.
    fn domain(&self, root_trips: Option<u64>, on_samples: &mut [bool]) -> Vec<Affine> {
        (0..self.chains.len())
            .map(|k| {
                let outer = self.chains[k].len() - 1;
                let constant = |c: i64| Affine {
                    constant: c,
                    coefficients: vec![0; outer],
                };
                if k == 0 {
                    return match root_trips {
                        Some(t) => constant(t as i64 - 1),
                        None => {
                            on_samples[0] = true;
                            constant(self.root_seen as i64)
                        }
                    };
                }
                let fit = &self.trips[k];
                if fit.is_linear() && fit.verified() > 0 {
                    if let Some(base) = fit.base() {
                        let strides = fit.strides();
                        if strides.iter().all(Option::is_some) {
                            return Affine {
                                constant: base - 1,
                                coefficients: strides.iter().map(|s| s.unwrap_or(0)).collect(),
                            };
                        }
                    }
                }
                for &j in &self.chains[k] {
                    on_samples[j as usize] = true;
                }
                constant(self.trip_max[k] as i64 - 1)
            })
            .collect()
    }

    /// The affine dependence test on every pair of instructions (one of them writing), the
    /// shadow's findings for the instructions that are not affine.
    fn dependences(self, root_trips: Option<u64>, into: &mut NestAnalysis) {
        let domain = self.domain(root_trips, &mut into.on_samples);
        let references: Vec<Option<Reference>> = (self.accesses.iter().zip(&self.fits))
            .map(|((chain, _, size), fit)| {
                if !fit.is_linear() || fit.samples() == 0 {
                    return None;
                }
                let base = fit.base()?;
                let mut coefficients = Vec::with_capacity(chain.len());
                for (position, &k) in chain.iter().enumerate() {
                    match fit.strides().get(position).copied().flatten() {
                        Some(s) => coefficients.push(s),
                        // A level the samples never moved in: affine only if it has one
                        // iteration at most.
                        None if domain[k as usize].constant <= 0
                            && domain[k as usize].coefficients.iter().all(|&c| c == 0) =>
                        {
                            coefficients.push(0)
                        }
                        None => return None,
                    }
                }
                Some(Reference {
                    address: Affine {
                        constant: base,
                        coefficients,
                    },
                    size: *size,
                    max: chain.iter().map(|&k| domain[k as usize].clone()).collect(),
                })
            })
            .collect();
        for (i, reference) in references.iter().enumerate() {
            if reference.is_none() {
                for &k in &self.accesses[i].0 {
                    into.on_samples[k as usize] = true;
                }
            }
        }
        let mut found: FastMap<DependenceKey, Option<Vec<i64>>> = FastMap::default();
        for i in 0..self.accesses.len() {
            for j in i..self.accesses.len() {
                let (ci, wi, _) = &self.accesses[i];
                let (cj, wj, _) = &self.accesses[j];
                if !(wi | wj) {
                    continue;
                }
                let (Some(a), Some(b)) = (&references[i], &references[j]) else {
                    continue;
                };
                if !dependence::may_overlap(a, b) {
                    continue;
                }
                let common = ci.iter().zip(cj).take_while(|(x, y)| x == y).count();
                for (l, &carrying) in ci.iter().enumerate().take(common) {
                    let orders: &[Order] = if i == j {
                        &[Order::AFirst]
                    } else {
                        &[Order::AFirst, Order::BFirst]
                    };
                    for &order in orders {
                        let (source, sink) = match order {
                            Order::AFirst => (i, j),
                            Order::BFirst => (j, i),
                        };
                        let kind = Kind::of(self.accesses[source].1, self.accesses[sink].1);
                        let key = (carrying, source as u32, sink as u32, kind);
                        // Known from earlier entries with distances that differ: this
                        // entry's answer cannot change what is reported.
                        if into.dependences.get(&key) == Some(&(None, false)) {
                            continue;
                        }
                        let Some(distance) = into.carried(a, b, common, l, order) else {
                            continue;
                        };
                        let distance = match order {
                            Order::AFirst => distance,
                            Order::BFirst => distance.map(|d| d.iter().map(|x| -x).collect()),
                        };
                        found.insert(key, distance);
                    }
                }
            }
        }
        for (key, distance) in found {
            into.add_dependence(key, distance, false);
        }
        if let Some(shadow) = self.shadow {
            for (key, distance) in shadow.found.into_iter() {
                let (_, source, sink, _) = key;
                // Pairs of affine instructions were tested exactly above.
                if references[source as usize].is_some() && references[sink as usize].is_some() {
                    continue;
                }
                into.add_dependence(key, distance, true);
            }
        }
    }
}

impl Shadow {
    fn record(
        &mut self,
        accesses: &[(Vec<u32>, bool, u64)],
        index: u32,
        v: Iterators,
        address: u64,
        size: u64,
        writes: bool,
    ) {
        if self.stamps.last() != Some(&v) {
            self.stamps.push(v);
        }
        let stamp = (self.stamps.len() - 1) as u32;
        // The earlier accesses met, once each, however many bytes they share.
        let mut met: [(u32, u32, Kind); 2 * SHADOW_BYTES as usize] =
            [(0, 0, Kind::Flow); 2 * SHADOW_BYTES as usize];
        let mut met_count = 0;
        let mut meet = |source: u32, at: u32, kind: Kind| {
            if met_count < met.len() && !met[..met_count].contains(&(source, at, kind)) {
                met[met_count] = (source, at, kind);
                met_count += 1;
            }
        };
        for byte in address..address.saturating_add(size.min(SHADOW_BYTES)) {
            let mut cell = self.bytes.get(&byte).copied().unwrap_or_default();
            // The same instruction in the same iteration again: nothing new.
            if writes && cell.write == Some((index, stamp))
                || !writes && cell.reads[..cell.read_count].contains(&(index, stamp))
            {
                continue;
            }
            if let Some((source, at)) = cell.write {
                meet(source, at, if writes { Kind::Output } else { Kind::Flow });
            }
            if writes {
                for &(source, at) in &cell.reads[..cell.read_count] {
                    meet(source, at, Kind::Anti);
                }
                cell.write = Some((index, stamp));
                cell.read_count = 0;
            } else if cell.read_count < SHADOW_READERS {
                cell.reads[cell.read_count] = (index, stamp);
                cell.read_count += 1;
            } else {
                cell.reads[SHADOW_READERS - 1] = (index, stamp);
            }
            self.bytes.insert(byte, cell);
        }
        for &(source, at, kind) in &met[..met_count] {
            self.check(accesses, (source, at), (index, stamp), kind);
        }
    }

    /// An earlier access `(source, at)` and a later one touched the same byte: a dependence
    /// carried by the outermost common level whose iterators differ, if any.
    fn check(
        &mut self,
        accesses: &[(Vec<u32>, bool, u64)],
        (source, at): (u32, u32),
        (sink, now): (u32, u32),
        kind: Kind,
    ) {
        let (cs, ck) = (&accesses[source as usize].0, &accesses[sink as usize].0);
        let common = cs
            .iter()
            .zip(ck)
            .take_while(|(x, y)| x == y)
            .count()
            .min(MAX_DEPTH);
        let (before, after) = (&self.stamps[at as usize], &self.stamps[now as usize]);
        let Some(l) = (0..common).find(|&l| before[l] != after[l]) else {
            return; // the same iteration: no level carries it
        };
        let distance = |p: usize| after[p] - before[p];
        match self.found.get_mut(&(cs[l], source, sink, kind)) {
            // Seen: the distance stays only while every occurrence has it.
            Some(known) => {
                if known
                    .as_ref()
                    .is_some_and(|d| (0..common).any(|p| d[p] != distance(p)))
                {
                    *known = None;
                }
            }
            None => {
                let d = (0..common).map(distance).collect();
                self.found.insert((cs[l], source, sink, kind), Some(d));
            }
        }
    }
}

impl NestAnalysis {
    /// Sampled entries analysed.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    fn add_dependence(
        &mut self,
        key: DependenceKey,
        distance: Option<Vec<i64>>,
        from_samples: bool,
    ) {
        match self.dependences.get_mut(&key) {
            None => {
                self.dependences.insert(key, (distance, from_samples));
            }
            Some((known, samples)) => {
                if *known != distance {
                    *known = None;
                }
                *samples &= from_samples;
            }
        }
    }

    /// The nest in the report.
    pub fn report(&self, id: u32, info: &NestInfo, analysis: Analysis) -> AnalysedNest {
        let levels: Vec<AnalysedLevel> = (info.levels.iter().enumerate())
            .map(|(k, level)| AnalysedLevel {
                level: k as u32 + 1,
                parent: (level.parent != NONE).then_some(level.parent + 1),
                line: level.first_line,
            })
            .collect();
        let empty = Summary::default();
        let mut summary = AccessSummary::default();
        let accesses: Vec<AccessFit> = (info.accesses.iter().enumerate())
            .map(|(i, a)| {
                let fit = self.summaries.get(i).unwrap_or(&empty);
                let linear = fit.is_linear();
                summary.instructions += 1;
                summary.sampled_accesses += fit.samples;
                if linear {
                    summary.linear_instructions += 1;
                    summary.linear_accesses += fit.samples;
                }
                let status = if linear {
                    "linear"
                } else if fit.nonlinear_entries > 0 {
                    "non-linear"
                } else {
                    "too few samples"
                };
                let strides: Option<Vec<Option<i64>>> = linear.then(|| {
                    (fit.strides.iter())
                        .map(|s| match s {
                            kage_affine::fit::Stride::Value(v) => Some(*v),
                            _ => None,
                        })
                        .collect()
                });
                let size = a.size.max(1) as i64;
                AccessFit {
                    index: i as u32,
                    line: a.line,
                    column: a.column,
                    kind: if a.writes { "store" } else { "load" }.into(),
                    size: a.size,
                    variable: a.name.clone(),
                    level: a.level + 1,
                    status: status.into(),
                    linear,
                    element_strides: strides.as_ref().map(|s| {
                        s.iter()
                            .map(|s| s.filter(|v| v % size == 0).map(|v| v / size))
                            .collect()
                    }),
                    strides,
                    base: fit.base.filter(|_| linear).map(|b| format!("{b:#x}")),
                    samples: fit.samples,
                    linear_entries: fit.linear_entries,
                    entries: fit.linear_entries + fit.nonlinear_entries,
                    seen: (!linear && fit.samples > 0).then(|| SeenValues {
                        min: format!("{:#x}", fit.seen.min),
                        max: format!("{:#x}", fit.seen.max),
                        steps: fit.seen.steps().to_vec(),
                        more_steps: fit.seen.more_steps,
                    }),
                }
            })
            .collect();
        let trip_counts = (1..info.levels.len())
            .filter_map(|k| {
                let fit = self.trips.get(k)?;
                let &(samples, min, max) = self.trip_range.get(k)?;
                if samples == 0 {
                    return None;
                }
                let linear = fit.is_linear();
                Some(TripCount {
                    level: k as u32 + 1,
                    linear,
                    constant: fit.base.filter(|_| linear),
                    coefficients: linear.then(|| {
                        (fit.strides.iter())
                            .map(|s| match s {
                                kage_affine::fit::Stride::Value(v) => Some(*v),
                                _ => None,
                            })
                            .collect()
                    }),
                    samples,
                    min,
                    max,
                })
            })
            .collect();
        let scalars: Vec<ScalarUse> = (info.scalars.iter())
            .map(|s| ScalarUse {
                level: s.level + 1,
                variable: s.name.clone(),
                line: s.line,
                kind: scalar_kind_name(s.kind).into(),
                operator: (s.kind == ScalarKind::Reduction)
                    .then(|| char::from_u32(s.operator).unwrap_or('?').to_string()),
                step: matches!(s.kind, ScalarKind::Induction | ScalarKind::Linear)
                    .then_some(s.step),
            })
            .collect();
        let mut nest = AnalysedNest {
            id,
            region: outermost_region(info),
            function: info.function.clone(),
            file: info.file.clone(),
            line: info.levels[0].first_line,
            entries_analysed: self.entries,
            levels,
            parallel_levels: None,
            levels_on_samples: None,
            accesses,
            trip_counts,
            scalars,
            dependences: None,
            suggestion: None,
            summary,
        };
        if analysis == Analysis::Dependences {
            self.report_dependences(info, &mut nest);
        }
        nest
    }

    fn report_dependences(&self, info: &NestInfo, nest: &mut AnalysedNest) {
        let mut dependences: Vec<Dependence> = (self.dependences.iter())
            .map(|(&(level, source, sink, kind), (distance, from_samples))| {
                let line = |i: u32| info.accesses.get(i as usize).map_or(0, |a| a.line);
                let variable = (info.accesses.get(source as usize))
                    .and_then(|a| a.name.clone())
                    .or_else(|| {
                        info.accesses
                            .get(sink as usize)
                            .and_then(|a| a.name.clone())
                    });
                Dependence {
                    level: level + 1,
                    kind: kind.name().into(),
                    source: Some(source),
                    sink: Some(sink),
                    source_line: line(source),
                    sink_line: line(sink),
                    variable,
                    distance: distance.clone(),
                    from_samples: *from_samples,
                }
            })
            .collect();
        let unseen = |k| {
            matches!(
                k,
                ScalarKind::Carried | ScalarKind::Call | ScalarKind::LocalArray
            )
        };
        for s in info.scalars.iter().filter(|s| unseen(s.kind)) {
            dependences.push(Dependence {
                level: s.level + 1,
                kind: match s.kind {
                    ScalarKind::Call => "call",
                    ScalarKind::LocalArray => "local-array",
                    _ => "flow",
                }
                .into(),
                source: None,
                sink: None,
                source_line: s.line,
                sink_line: s.line,
                variable: s.name.clone(),
                distance: None,
                from_samples: false,
            });
        }
        dependences.sort_by_key(|d| (d.level, d.source_line, d.sink_line));
        let carries = |level: u32| dependences.iter().any(|d| d.level == level);
        let parallel: Vec<u32> = (1..=info.levels.len() as u32)
            .filter(|&l| !carries(l))
            .collect();
        let on_samples: Vec<u32> = (self.on_samples.iter().enumerate())
            .filter(|(_, &s)| s)
            .map(|(k, _)| k as u32 + 1)
            .collect();
        nest.suggestion = Some(suggestion(info, &parallel, &dependences, &nest.scalars));
        nest.parallel_levels = Some(parallel);
        nest.levels_on_samples = Some(on_samples);
        nest.dependences = Some(dependences);
    }
}

/// The region of the nest's outermost loop: the first loop region of its function at its
/// file and first line.
fn outermost_region(info: &NestInfo) -> Option<u32> {
    let line = info.levels[0].first_line;
    let registry = REGISTRY.lock();
    (registry.regions.iter().enumerate())
        .find(|(_, r)| {
            r.kind == kage_report::RegionKind::Loop
                && r.line == line
                && &*r.file == info.file.as_str()
                && &*r.name == info.function.as_str()
        })
        .map(|(id, _)| id as u32)
}

fn scalar_kind_name(kind: ScalarKind) -> &'static str {
    match kind {
        ScalarKind::Induction => "induction",
        ScalarKind::Private => "private",
        ScalarKind::LastPrivate => "lastprivate",
        ScalarKind::Reduction => "reduction",
        ScalarKind::Linear => "linear",
        ScalarKind::Carried => "carried",
        ScalarKind::Call => "call",
        ScalarKind::LocalArray => "local-array",
    }
}

/// The OpenMP directive that would run the outermost parallel level in parallel, or why
/// no level can run so.
fn suggestion(
    info: &NestInfo,
    parallel: &[u32],
    dependences: &[Dependence],
    scalars: &[ScalarUse],
) -> String {
    // The outermost: the parallel level of least depth (pre-order breaks ties).
    let Some(&level) = parallel
        .iter()
        .min_by_key(|&&l| info.levels[l as usize - 1].depth)
    else {
        let d = &dependences[0];
        if d.kind == "local-array" {
            return format!(
                "no level is proved to run in parallel: level {} writes the local array {} \
                 (line {}), which is not analysed",
                d.level,
                d.variable.as_deref().unwrap_or("without a name"),
                d.source_line
            );
        }
        if d.kind == "call" {
            return format!(
                "no level is proved to run in parallel: level {} calls {} (line {}), whose memory \
                 accesses are not seen",
                d.level,
                d.variable
                    .as_deref()
                    .unwrap_or("a function through a pointer"),
                d.source_line
            );
        }
        let what = d.variable.as_deref().unwrap_or("memory");
        let article = if d.kind == "flow" { "a" } else { "an" };
        return format!(
            "no level runs in parallel as written: level {} carries {article} {} dependence on \
             {what} from line {} to line {}",
            d.level, d.kind, d.source_line, d.sink_line
        );
    };
    let here = |kind: &str| {
        let mut names: Vec<String> = (scalars.iter())
            .filter(|s| s.level == level && s.kind == kind)
            .filter_map(|s| match kind {
                "reduction" => Some(format!(
                    "{}:{}",
                    s.operator.as_deref().unwrap_or("+"),
                    s.variable.as_deref()?
                )),
                "linear" => Some(format!(
                    "{}:{}",
                    s.variable.as_deref()?,
                    s.step.unwrap_or(1)
                )),
                _ => s.variable.clone(),
            })
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let mut clauses = String::new();
    for (kind, clause) in [
        ("private", "private"),
        ("lastprivate", "lastprivate"),
        ("linear", "linear"),
    ] {
        let names = here(kind);
        if !names.is_empty() {
            clauses += &format!(" {clause}({})", names.join(", "));
        }
    }
    for reduction in here("reduction") {
        let (op, name) = reduction.split_once(':').unwrap_or(("+", &reduction));
        clauses += &format!(" reduction({op}:{name})");
    }
    let unnamed = (scalars.iter())
        .filter(|s| s.level == level && s.variable.is_none() && s.kind != "induction")
        .count();
    let line = info.levels[level as usize - 1].first_line;
    let mut text = format!("#pragma omp parallel for{clauses} (before line {line}, level {level})");
    if unnamed > 0 {
        text += &format!(
            "; {unnamed} scalar{} without a name in the debug information also need a clause \
             (build with -g)",
            if unnamed == 1 { "" } else { "s" }
        );
    }
    text
}

/// The registry's copy of a descriptor's accesses and scalars.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessInfo {
    pub level: u32,
    pub writes: bool,
    pub size: u32,
    pub line: u32,
    pub column: u32,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalarInfo {
    pub level: u32,
    pub kind: ScalarKind,
    pub line: u32,
    pub operator: u32,
    pub step: i64,
    pub name: Option<String>,
}
