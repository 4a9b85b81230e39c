//! Which version runs the next chunk of a versioned nest: plain Rust over measured times, so
//! that tests drive it with a simulated clock.
//!
//! The unit of work is one value of the outermost loop's iterator ("iteration" below): a
//! chunk runs the iterations `[lo, hi)` in one version, and its time per iteration is that
//! version's *rate* there. Decisions are kept per nest and per *size class* of an entry
//! (`floor(log2(iterations))`), since which version is fastest depends on the size.
//!
//! An entry's first chunk, the *probe*, is one step of the class's winner when the last
//! entry's class has one (and a few times the last entry's size: an entry of another size
//! comes back to be judged), else one step of the original. An entry whose class has no
//! decision yet then either *races* the versions inside itself, when it is long enough to pay
//! for it (the probe is the race's first chunk; a first round of short chunks drops the far
//! slower; later rounds, each in the reverse order of the last so that a trend along the
//! iteration space, a triangular loop's, falls equally on every version, time again what is
//! not known well enough and the two best while they are too close to call), or, when
//! entries are short, runs one version to its end and entries *take turns*. Once decided, an
//! entry runs the winner and checks its rate every [`CHECK_NS`]; two checks in a row far
//! slower than it won with are a phase change, and the versions race again.
//!
//! A version whose outermost loop steps by `s` only starts where `s` divides the iterations
//! done since the entry's start, so a tiled version's tiles line up as they would without
//! Kage: a chunk ends where the next version can start, and otherwise the fastest version
//! known that can get there exactly runs the iterations between, untimed (a *bridge*).

/// The most versions a nest may have (`kage_abi::select::MAX_VERSIONS`).
pub const MAX_VERSIONS: usize = kage_abi::select::MAX_VERSIONS;
/// Size classes: `floor(log2(iterations))`, 0 to 63.
pub const CLASSES: usize = 64;
const NO_CLASS: u32 = u32::MAX;
const NO_VERSION: u32 = u32::MAX;

/// A rate that needs no other version's chunk to be dropped: slower than the best by more
/// than this after the first round.
const ABANDON_FIRST: f64 = 1.5;
/// ... and after later rounds.
const ABANDON_LATER: f64 = 1.08;
/// The best is decided when the runner-up is slower by more than this, every candidate having
/// run twice.
const CLEAR_LEAD: f64 = 1.03;
/// A sample this many race chunks long needs no second.
const CONFIRMING_CHUNKS: u64 = 4;
/// The first chunk timed in an entry may be this many times slower than the best for
/// cold caches alone: it is timed again rather than dropped.
const COLD_AT_MOST: f64 = 4.0;
/// The first round's chunks last at most this many `min_chunk_ns`.
const FIRST_ROUND_CHUNKS: u64 = 4;
/// Rounds of a race at most.
const MAX_ROUNDS: u32 = 4;
/// A rate this much worse than the winner's when it won, at this many checks in a row, is a
/// phase change.
const PHASE_CHANGE: f64 = 1.5;
const PHASE_CHANGE_CHECKS: u32 = 2;
/// The winner's rate is checked this often (ns): a call to the runtime, nothing more.
const CHECK_NS: u64 = 20_000_000;

/// How the runtime picks (`version=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Force {
    /// Measure and choose.
    Auto,
    /// Always this version (an index into the nest's versions).
    Version(usize),
    /// Every chunk in the next version, chunks one step long (tests of exactness).
    Rotate,
}

/// The selection's parameters (the tool's options).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// A race's chunks last at least this long (ns): shorter ones are noise.
    pub min_chunk_ns: u64,
    /// A race spends about this fraction of the entry's estimated time in each round.
    pub race_fraction: f64,
    pub force: Force,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            min_chunk_ns: 100_000,
            race_fraction: 0.01,
            force: Force::Auto,
        }
    }
}

/// What the code wrote when a chunk stopped (`struct kage_select_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stop {
    /// Where the chunk began, and where the iterator stopped.
    pub lo: i64,
    pub at: i64,
    /// The loop's bound and its version's own initial value.
    pub bound: i64,
    pub init: i64,
}

/// What runs next: `version` for at most `span` iterations ([`kage_abi::select::UNBOUNDED`]: to
/// the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub version: usize,
    pub span: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Phase {
    /// The entry's first chunk, before its size is known.
    Probe = 0,
    Race = 1,
    /// The whole rest of a short entry in one candidate.
    Turn = 2,
    /// The class's winner.
    Winner = 3,
    /// Reaching a place where the winner can start, in the fastest version that can.
    Bridge = 4,
    Forced = 5,
    Rotate = 6,
}

/// One entry's selection state, kept in the entry's `struct kage_select_state` (plain data).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Entry {
    phase: u32,
    /// The version running the current chunk.
    current: u32,
    class: u32,
    round: u32,
    /// Race: the candidates still to run in this round (bits).
    left: u32,
    /// Whether the current chunk's time is a sample of its version's rate.
    sampled: u32,
    /// Whether the entry's size is known (its first chunk stopped).
    sized: u32,
    /// The version of the race's first timed chunk, which may have run with cold caches
    /// ([`NO_VERSION`] before it; another value when the race needs no such care).
    first_timed: u32,
    /// The winner's checks in a row that found it far slower than when it won.
    slow_checks: u32,
    reserved: u32,
    /// The winner's rate at its last check.
    checked_rate: f64,
    chunk_start_ns: u64,
    /// The first chunk's start, and the entry's iterations from the loop's bound.
    start: i64,
    total: u64,
    /// Race: each chunk's target time; winner: the time between checks.
    target_ns: u64,
    /// Rate (ns per iteration) to size chunks by; the winner's last checked rate.
    rate: f64,
    /// Iterations done, and time, since the entry began.
    done: u64,
    entry_start_ns: u64,
}

impl Entry {
    fn phase(&self) -> Phase {
        match self.phase {
            0 => Phase::Probe,
            1 => Phase::Race,
            2 => Phase::Turn,
            3 => Phase::Winner,
            4 => Phase::Bridge,
            5 => Phase::Forced,
            _ => Phase::Rotate,
        }
    }
}

/// A version's rates measured in one size class.
#[derive(Debug, Clone, Default)]
struct Samples {
    count: u32,
    /// The samples' time and iterations: their rate is time over iterations (chunks of one
    /// round are about as long, and a round's order, reversed in the next, cancels a trend).
    ns: u64,
    iterations: u64,
}

impl Samples {
    fn mean(&self) -> Option<f64> {
        (self.count > 0 && self.iterations > 0).then(|| self.ns as f64 / self.iterations as f64)
    }

    /// Whether the rate is known well enough: two samples, or one long chunk (a tiled
    /// version's step can be many chunk targets long).
    fn confirmed(&self, target_ns: u64) -> bool {
        self.count >= 2 || (target_ns > 0 && self.ns >= CONFIRMING_CHUNKS * target_ns)
    }
}

/// What a nest knows of one size class.
#[derive(Debug, Clone, Default)]
pub struct Class {
    samples: [Samples; MAX_VERSIONS],
    /// Versions dropped (bits).
    abandoned: u32,
    winner: Option<(usize, f64)>,
    /// Turns taken by short entries.
    turns: u32,
}

/// A decision, for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub class: u32,
    pub version: usize,
    /// The nest's entry (0-based) and the iteration of it at which it was taken.
    pub entry: u64,
    pub iteration: u64,
    /// Time since the runtime started, and since that entry began.
    pub at_ns: u64,
    pub into_entry_ns: u64,
    /// The versions dropped for being far slower, in the order dropped.
    pub abandoned: Vec<usize>,
    /// Why: `race`, `turns`, `only candidate`, `phase change`...
    pub how: &'static str,
}

/// Per version, over the whole run (the report).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct VersionTotals {
    pub chunks: u64,
    pub iterations: u64,
    pub ns: u64,
    /// Chunks and time while measuring (races, turns).
    pub measured_chunks: u64,
    pub measured_ns: u64,
    pub measured_iterations: u64,
}

/// What the runtime knows of one versioned nest.
#[derive(Debug, Clone)]
pub struct NestPolicy {
    /// Each version's step (iterations, > 0).
    steps: Vec<u64>,
    /// Whether the outermost loop counts up.
    up: bool,
    /// Whether its test includes the bound (`<=`), by version.
    inclusive: Vec<bool>,
    classes: Vec<Option<Box<Class>>>,
    last_class: u32,
    /// The last entry's iterations and time.
    last_total: u64,
    last_ns: u64,
    pub entries: u64,
    pub totals: Vec<VersionTotals>,
    pub decisions: Vec<Decision>,
    /// Entries whose versions began at different places: the versions do not share the
    /// outermost loop's iterations (the first such, `(version, its start, the entry's)`).
    pub mismatch: Option<(usize, i64, i64)>,
    rotate: u32,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    (a / gcd(a, b)).saturating_mul(b)
}

/// The smallest multiple of `m` that is at least `x`.
fn round_up(x: u64, m: u64) -> u64 {
    x.div_ceil(m).saturating_mul(m)
}

const UNBOUNDED: i64 = kage_abi::select::UNBOUNDED;

impl NestPolicy {
    /// A nest whose versions step by `steps` (signed: all the same sign), `inclusive` by
    /// version.
    pub fn new(steps: &[i64], inclusive: &[bool]) -> NestPolicy {
        let count = steps.len().clamp(1, MAX_VERSIONS);
        NestPolicy {
            steps: steps
                .iter()
                .take(count)
                .map(|s| s.unsigned_abs().max(1))
                .collect(),
            up: steps.first().is_none_or(|&s| s > 0),
            inclusive: inclusive.iter().take(count).copied().collect(),
            classes: vec![None; CLASSES],
            last_class: NO_CLASS,
            last_total: 0,
            last_ns: 0,
            entries: 0,
            totals: vec![VersionTotals::default(); count],
            decisions: Vec::new(),
            mismatch: None,
            rotate: 0,
        }
    }

    pub fn version_count(&self) -> usize {
        self.steps.len()
    }

    fn all(&self) -> u32 {
        ((1u64 << self.steps.len()) - 1) as u32
    }

    fn class(&mut self, c: u32) -> &mut Class {
        self.classes[c as usize].get_or_insert_with(Default::default)
    }

    /// The decision of class `c`, if any (tests, report).
    pub fn winner(&self, c: u32) -> Option<usize> {
        self.classes
            .get(c as usize)?
            .as_ref()?
            .winner
            .map(|(v, _)| v)
    }

    /// Iterations from `from` to `to` in the loop's direction (0 when backwards).
    fn iterations(&self, from: i64, to: i64) -> u64 {
        let d = if self.up {
            to as i128 - from as i128
        } else {
            from as i128 - to as i128
        };
        d.clamp(0, u64::MAX as i128) as u64
    }

    /// A span that ends where `next` can start (a multiple of both steps from the start),
    /// covering at least `want` iterations from `position`.
    fn span_to(&self, position: u64, want: u64, current: usize, next: Option<usize>) -> i64 {
        let step = self.steps[current];
        let align = next.map_or(step, |n| lcm(step, self.steps[n]));
        let end = round_up(position.saturating_add(want.max(1)), align);
        (end - position).min(UNBOUNDED as u64) as i64
    }

    /// The entry begins.
    pub fn enter(&mut self, e: &mut Entry, p: &Params, now: u64) -> Run {
        *e = Entry {
            phase: Phase::Probe as u32,
            current: 0,
            class: NO_CLASS,
            round: 0,
            left: 0,
            sampled: 0,
            sized: 0,
            first_timed: NO_VERSION,
            slow_checks: 0,
            reserved: 0,
            checked_rate: 0.0,
            chunk_start_ns: now,
            start: 0,
            total: 0,
            target_ns: 0,
            rate: 0.0,
            done: 0,
            entry_start_ns: now,
        };
        let run = match p.force {
            Force::Version(v) => {
                e.phase = Phase::Forced as u32;
                Run {
                    version: v.min(self.steps.len() - 1),
                    span: UNBOUNDED,
                }
            }
            Force::Rotate => {
                e.phase = Phase::Rotate as u32;
                let v = (self.rotate as usize) % self.steps.len();
                self.rotate = self.rotate.wrapping_add(1);
                let next = (v + 1) % self.steps.len();
                Run {
                    version: v,
                    span: self.span_to(0, 1, v, Some(next)),
                }
            }
            Force::Auto => {
                // Guess this entry is the size of the last one: its class's winner, or its
                // next turn; a span a few times the last entry's, so that an entry of another
                // size comes back to be judged. Nothing known: one step of the original.
                let guess = self.last_class;
                let room = self.last_total.saturating_mul(4).max(1);
                let known = (guess != NO_CLASS)
                    .then(|| self.classes[guess as usize].as_deref())
                    .flatten();
                match known {
                    Some(Class {
                        winner: Some((w, _)),
                        ..
                    }) => {
                        e.phase = Phase::Winner as u32;
                        e.class = guess;
                        Run {
                            version: *w,
                            span: self.span_to(0, room, *w, None),
                        }
                    }
                    Some(_) if self.last_ns < self.race_worth_ns(p) => {
                        let v = self.next_turn(guess, 0).unwrap_or(0);
                        e.phase = Phase::Turn as u32;
                        e.class = guess;
                        e.sampled = 1;
                        Run {
                            version: v,
                            span: self.span_to(0, room, v, None),
                        }
                    }
                    _ => Run {
                        version: 0,
                        span: self.span_to(0, 1, 0, None),
                    },
                }
            }
        };
        e.current = run.version as u32;
        run
    }

    /// An entry this long (ns) pays for a race inside it.
    fn race_worth_ns(&self, p: &Params) -> u64 {
        20 * self.steps.len() as u64 * p.min_chunk_ns
    }

    /// The candidate whose turn it is in class `c`: the one with the fewest samples, ties
    /// broken forwards on even turns, backwards on odd ones.
    fn next_turn(&mut self, c: u32, position: u64) -> Option<usize> {
        let n = self.steps.len();
        let startable: Vec<usize> = (0..n)
            .filter(|&v| position.is_multiple_of(self.steps[v]))
            .collect();
        let class = self.class(c);
        let backwards = class.turns % 2 == 1;
        let order: Vec<usize> = if backwards {
            (0..n).rev().collect()
        } else {
            (0..n).collect()
        };
        order
            .into_iter()
            .filter(|&v| class.abandoned & (1 << v) == 0 && startable.contains(&v))
            .min_by_key(|&v| class.samples[v].count)
    }

    /// Accounts for the chunk that just stopped; returns its iterations.
    fn account(&mut self, e: &mut Entry, stop: &Stop, now: u64) -> u64 {
        let v = e.current as usize;
        let mut iterations = self.iterations(stop.lo, stop.at);
        let ns = now.saturating_sub(e.chunk_start_ns);
        if e.sized == 0 {
            e.sized = 1;
            e.start = stop.lo;
            let inclusive = self.inclusive.get(v).copied().unwrap_or(false) as u64;
            e.total = self
                .iterations(stop.init, stop.bound)
                .saturating_add(inclusive);
            let class = 63 - e.total.max(1).leading_zeros();
            if e.class != class && e.phase() != Phase::Forced && e.phase() != Phase::Rotate {
                if e.class != NO_CLASS {
                    // Guessed wrong: this entry is of another size; judge it afresh.
                    e.phase = Phase::Probe as u32;
                    e.sampled = 0;
                }
                e.class = class;
            }
        } else if stop.init != e.start && self.mismatch.is_none() {
            self.mismatch = Some((v, stop.init, e.start));
        }
        // A tiled version's last tile is partial: its iterator stops past the bound.
        iterations = iterations.min(e.total.saturating_sub(e.done));
        e.done = e.done.saturating_add(iterations);
        let t = &mut self.totals[v];
        t.chunks += 1;
        t.iterations += iterations;
        t.ns += ns;
        if e.sampled != 0 && iterations > 0 {
            t.measured_chunks += 1;
            t.measured_ns += ns;
            t.measured_iterations += iterations;
            let cold = v as u32 == e.first_timed && e.phase() == Phase::Race;
            let class = self.class(e.class);
            if cold && class.samples[v].count > 0 {
                // Its first chunk may have run with cold caches: this one replaces it.
                class.samples[v] = Samples::default();
                e.first_timed = u32::MAX - 1;
            }
            class.samples[v].count += 1;
            class.samples[v].ns += ns;
            class.samples[v].iterations += iterations;
        }
        iterations
    }

    /// A chunk stopped at its bound with iterations left; what runs next.
    pub fn next(&mut self, e: &mut Entry, p: &Params, stop: &Stop, now: u64) -> Run {
        let ran = e.current as usize;
        let iterations = self.account(e, stop, now);
        let chunk_ns = now.saturating_sub(e.chunk_start_ns);
        let position = self.iterations(e.start, stop.at);
        let left = e.total.saturating_sub(position);
        let run = match e.phase() {
            Phase::Forced => Run {
                version: ran,
                span: UNBOUNDED,
            },
            Phase::Rotate => {
                let v = (ran + 1) % self.steps.len();
                let next = (v + 1) % self.steps.len();
                Run {
                    version: v,
                    span: self.span_to(position, 1, v, Some(next)),
                }
            }
            Phase::Probe | Phase::Turn => {
                let rate = if iterations > 0 {
                    chunk_ns as f64 / iterations as f64
                } else {
                    0.0
                };
                let probe = (e.phase() == Phase::Probe && iterations > 0)
                    .then_some((ran, chunk_ns, iterations));
                self.plan(e, p, position, left, rate, probe)
            }
            Phase::Race => self.race_step(e, p, position, left, now),

            Phase::Bridge => {
                let (w, _) = self.class(e.class).winner.unwrap_or((ran, 0.0));
                e.phase = Phase::Winner as u32;
                self.winner_run(e, position, w)
            }
            Phase::Winner => {
                // A check: a sudden slowdown is a phase change, to race again.
                let rate = if iterations > 0 {
                    chunk_ns as f64 / iterations as f64
                } else {
                    0.0
                };
                let slow = e.rate > 0.0 && rate > e.rate * PHASE_CHANGE;
                e.slow_checks = if slow { e.slow_checks + 1 } else { 0 };
                e.checked_rate = rate;
                if e.slow_checks >= PHASE_CHANGE_CHECKS && left > 0 {
                    // Slower than when it won, by far, check after check (one slow check is
                    // the machine's noise): race every version again (one dropped then may
                    // be the fastest now).
                    e.slow_checks = 0;
                    *self.class(e.class) = Class::default();
                    self.start_race(e, p, position, left, rate, false, None)
                } else {
                    self.winner_run(e, position, ran)
                }
            }
        };
        e.current = run.version as u32;
        e.chunk_start_ns = now;
        run
    }

    /// After the first chunk (or a turn the entry outgrew): the class's winner, a turn, or a
    /// race.
    #[allow(clippy::too_many_arguments)]
    fn plan(
        &mut self,
        e: &mut Entry,
        p: &Params,
        position: u64,
        left: u64,
        rate: f64,
        probe: Option<(usize, u64, u64)>,
    ) -> Run {
        if let Some((w, _)) = self.class(e.class).winner {
            return self.bridge_to(e, position, w);
        }
        let estimate = left as f64 * rate;
        if estimate >= self.race_worth_ns(p) as f64 {
            return self.start_race(e, p, position, left, rate, true, probe);
        }
        // Too short to race: the rest of the entry is one candidate's turn.
        e.phase = Phase::Turn as u32;
        match self.next_turn(e.class, position) {
            Some(v) => {
                e.sampled = 1;
                Run {
                    version: v,
                    span: UNBOUNDED,
                }
            }
            None => {
                // No candidate can start here: the rest in one that can, unmeasured.
                e.sampled = 0;
                let v = self.fastest_startable(e.class, position, None).unwrap_or(0);
                Run {
                    version: v,
                    span: UNBOUNDED,
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn start_race(
        &mut self,
        e: &mut Entry,
        p: &Params,
        position: u64,
        left: u64,
        rate: f64,
        first_race: bool,
        probe: Option<(usize, u64, u64)>,
    ) -> Run {
        let candidates = self.all() & !self.class(e.class).abandoned;
        e.round = 1;
        e.left = candidates;
        e.rate = if rate > 0.0 { rate } else { 1.0 };
        // The first round only screens for the far slower: short chunks (the estimate rests
        // on the probe's version, perhaps a slow one); later rounds time the close ones
        // longer, at the best rate measured.
        let estimate = left as f64 * e.rate;
        e.target_ns = ((estimate * p.race_fraction / candidates.count_ones().max(1) as f64) as u64)
            .min(FIRST_ROUND_CHUNKS * p.min_chunk_ns)
            .max(p.min_chunk_ns);
        e.phase = Phase::Race as u32;
        // The caches may still be cold for the first chunk timed: its version is not dropped
        // on that chunk alone (it is timed again in the next round, last).
        e.first_timed = if first_race { NO_VERSION } else { u32::MAX - 1 };
        if let Some((v, ns, iterations)) = probe {
            // The probe is the race's first chunk of its version (timed with cold caches,
            // so it is timed again before being dropped): one chunk saved, of what is often
            // the slowest version, the original.
            self.class(e.class).samples[v] = Samples {
                count: 1,
                ns,
                iterations,
            };
            let t = &mut self.totals[v];
            t.measured_chunks += 1;
            t.measured_ns += ns;
            t.measured_iterations += iterations;
            e.first_timed = v as u32;
            e.left &= !(1 << v);
        }
        self.race_next(e, position)
    }

    /// The race's order in round `r`: by step, ascending in odd rounds (each chunk's end is
    /// then aligned for the next), descending in even ones.
    fn race_order(&self, round: u32) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.steps.len()).collect();
        order.sort_by_key(|&v| (self.steps[v], v));
        if round.is_multiple_of(2) {
            order.reverse();
        }
        order
    }

    /// The next race chunk: the next candidate of this round that can start here.
    fn race_next(&mut self, e: &mut Entry, position: u64) -> Run {
        if e.round > 1 {
            // Later rounds time again only what is not known well enough yet, and the two
            // best while they are too close to call.
            if let Some(class) = self.classes[e.class as usize].as_deref() {
                let mut ranked: Vec<(f64, usize)> = (0..self.steps.len())
                    .filter(|&v| e.left & (1 << v) != 0)
                    .filter_map(|v| class.samples[v].mean().map(|m| (m, v)))
                    .collect();
                ranked.sort_by(|a, b| a.0.total_cmp(&b.0));
                let close = ranked.len() >= 2 && ranked[1].0 <= ranked[0].0 * CLEAR_LEAD;
                for v in 0..self.steps.len() {
                    let contested = close && (ranked[0].1 == v || ranked[1].1 == v);
                    if class.samples[v].confirmed(e.target_ns) && !contested {
                        e.left &= !(1 << v);
                    }
                }
            }
        }
        let order = self.race_order(e.round);
        let pending: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&v| e.left & (1 << v) != 0)
            .collect();
        let Some(&v) = pending
            .iter()
            .find(|&&v| position.is_multiple_of(self.steps[v]))
        else {
            // None can start here: the fastest version that can reaches where the next one
            // can, untimed; or, when none reaches it, the round's rest is skipped.
            e.sampled = 0;
            let next = pending.first().copied().unwrap_or(0);
            let target = round_up(position, self.steps[next]);
            if let Some(b) = self.fastest_startable(e.class, position, Some(target)) {
                return Run {
                    version: b,
                    span: (target - position) as i64,
                };
            }
            e.left = 0;
            let v = self.fastest_startable(e.class, position, None).unwrap_or(0);
            return Run {
                version: v,
                span: self.span_to(position, 1, v, None),
            };
        };
        e.left &= !(1 << v);
        if e.first_timed == NO_VERSION {
            e.first_timed = v as u32;
        }
        let next = order.iter().copied().find(|&w| e.left & (1 << w) != 0);
        // Sized by the version's own rate once it has one: a slow version's chunk lasts the
        // target too, not its slowdown times it.
        let own = (self.classes[e.class as usize].as_deref()).and_then(|c| c.samples[v].mean());
        let rate = own.unwrap_or(e.rate).max(e.rate);
        let want = (e.target_ns as f64 / rate.max(1e-9)).ceil() as u64;
        e.sampled = 1;
        Run {
            version: v,
            span: self.span_to(position, want, v, next),
        }
    }

    fn race_step(&mut self, e: &mut Entry, p: &Params, position: u64, left: u64, now: u64) -> Run {
        if let Some(best) = self.best_rate(e.class) {
            e.rate = best;
        }
        if e.left != 0 {
            return self.race_next(e, position);
        }
        // The round is over: drop the far slower, decide or go on.
        if let Some(w) = self.judge(e, now, "race") {
            return self.bridge_to(e, position, w);
        }
        e.round += 1;
        e.left = self.all() & !self.class(e.class).abandoned;
        // The entry's time estimated anew at the best rate measured (the first estimate was
        // the probe version's, perhaps a slow one's).
        let estimate = left as f64 * e.rate;
        e.target_ns = ((estimate * p.race_fraction / e.left.count_ones().max(1) as f64) as u64)
            .max(p.min_chunk_ns);
        self.race_next(e, position)
    }

    fn best_rate(&self, c: u32) -> Option<f64> {
        let class = self.classes.get(c as usize)?.as_ref()?;
        (0..self.steps.len())
            .filter(|&v| class.abandoned & (1 << v) == 0)
            .filter_map(|v| class.samples[v].mean())
            .min_by(f64::total_cmp)
    }

    /// After a round or a turn: drops candidates far slower than the best and decides when
    /// one is left, or every candidate has run twice and the best leads clearly (or the
    /// race has run its rounds). Returns the winner when decided.
    fn judge(&mut self, e: &Entry, now: u64, how: &'static str) -> Option<usize> {
        let n = self.steps.len();
        let round = e.round;
        let all = self.all();
        let entry = self.entries.saturating_sub(1);
        let class = self.class(e.class);
        let mean = |v: usize| class.samples[v].mean();
        let candidates: Vec<usize> = (0..n)
            .filter(|&v| class.abandoned & (1 << v) == 0)
            .collect();
        let best = candidates
            .iter()
            .filter_map(|&v| mean(v).map(|m| (m, v)))
            .min_by(|a, b| a.0.total_cmp(&b.0))?;
        let first_pass = candidates.iter().any(|&v| class.samples[v].count < 2);
        let limit = if first_pass && round <= 1 {
            ABANDON_FIRST
        } else {
            ABANDON_LATER
        };
        let mut dropped = Vec::new();
        for &v in &candidates {
            // Cold caches explain a few times slower, not more.
            let cold = v as u32 == e.first_timed
                && class.samples[v].count < 2
                && mean(v).is_some_and(|m| m <= best.0 * COLD_AT_MOST);
            if v != best.1 && !cold && mean(v).is_some_and(|m| m > best.0 * limit) {
                dropped.push(v);
            }
        }
        for &v in &dropped {
            class.abandoned |= 1 << v;
        }
        let left: Vec<usize> = (0..n)
            .filter(|&v| class.abandoned & (1 << v) == 0 && all & (1 << v) != 0)
            .collect();
        let everyone_twice = left
            .iter()
            .all(|&v| class.samples[v].confirmed(e.target_ns));
        let runner_up = (left.iter().filter(|&&v| v != best.1))
            .filter_map(|&v| class.samples[v].mean())
            .min_by(f64::total_cmp);
        let decided = left.len() == 1
            || (everyone_twice && runner_up.is_none_or(|r| r > best.0 * CLEAR_LEAD))
            || (everyone_twice && round >= MAX_ROUNDS);
        if !decided {
            return None;
        }
        class.winner = Some((best.1, best.0));
        let abandoned: Vec<usize> = (0..n)
            .filter(|&v| class.abandoned & (1 << v) != 0)
            .collect();
        self.decisions.push(Decision {
            class: e.class,
            version: best.1,
            entry,
            iteration: e.done,
            at_ns: now,
            into_entry_ns: now.saturating_sub(e.entry_start_ns),
            abandoned,
            how: if left.len() == 1 && how == "race" {
                "race (the others abandoned)"
            } else {
                how
            },
        });
        Some(best.1)
    }

    /// The fastest version measured in the entry's class that can start at `position` (and,
    /// with `reach`, stop exactly there: its step divides the distance), not one dropped
    /// when another will do; unmeasured ones come last.
    fn fastest_startable(&self, class: u32, position: u64, reach: Option<u64>) -> Option<usize> {
        let class = self.classes.get(class as usize).and_then(|c| c.as_deref());
        let rate = |v: usize| {
            class
                .and_then(|c| c.samples[v].mean())
                .unwrap_or(f64::MAX / 2.0)
        };
        let dropped = |v: usize| class.is_some_and(|c| c.abandoned & (1 << v) != 0);
        (0..self.steps.len())
            .filter(|&v| position.is_multiple_of(self.steps[v]))
            .filter(|&v| reach.is_none_or(|r| (r - position).is_multiple_of(self.steps[v])))
            .min_by(|&a, &b| {
                (dropped(a), rate(a))
                    .partial_cmp(&(dropped(b), rate(b)))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    }

    /// Runs the winner `w` from `position`: directly when it can start here, else first in
    /// the fastest version that can reach a place where it can.
    fn bridge_to(&mut self, e: &mut Entry, position: u64, w: usize) -> Run {
        e.sampled = 0;
        e.rate = 0.0;
        e.checked_rate = 0.0;
        e.slow_checks = 0;
        e.target_ns = 0;
        if position.is_multiple_of(self.steps[w]) {
            e.phase = Phase::Winner as u32;
            return self.winner_run(e, position, w);
        }
        let target = round_up(position, self.steps[w]);
        match self.fastest_startable(e.class, position, Some(target)) {
            Some(b) => {
                e.phase = Phase::Bridge as u32;
                Run {
                    version: b,
                    span: (target - position) as i64,
                }
            }
            None => {
                // Nothing reaches it: the winner's class keeps its decision, this entry ends
                // in the fastest version that can go on.
                e.phase = Phase::Winner as u32;
                let v = self.fastest_startable(e.class, position, None).unwrap_or(0);
                Run {
                    version: v,
                    span: UNBOUNDED,
                }
            }
        }
    }

    /// The winner's next stretch: until the next check of its rate against the rate it won
    /// with.
    fn winner_run(&mut self, e: &mut Entry, position: u64, w: usize) -> Run {
        if e.rate <= 0.0 {
            e.rate = self.classes[e.class as usize]
                .as_deref()
                .and_then(|c| c.winner)
                .map_or(0.0, |(_, r)| r);
            if e.rate <= 0.0 {
                return Run {
                    version: w,
                    span: UNBOUNDED,
                };
            }
        }
        if e.target_ns == 0 {
            e.target_ns = CHECK_NS;
        }
        // Sized by the slower of its winning and its latest rate: a check that found it slow
        // is confirmed (or not) one check's time later.
        let want = (e.target_ns as f64 / e.rate.max(e.checked_rate).max(1e-9)).ceil() as u64;
        Run {
            version: w,
            span: self.span_to(position, want, w, None),
        }
    }

    /// The entry ended (`stop`: what the code wrote, `None` when the loop was left by a
    /// `break` and wrote nothing).
    pub fn exit(&mut self, e: &mut Entry, stop: Option<&Stop>, now: u64) {
        if let Some(stop) = stop {
            self.account(e, stop, now);
        } else {
            self.totals[e.current as usize].chunks += 1;
        }
        self.entries += 1;
        if e.class != NO_CLASS && matches!(e.phase(), Phase::Turn | Phase::Race) {
            self.class(e.class).turns += 1;
            if self.class(e.class).winner.is_none() {
                let e2 = Entry {
                    round: e.round.max(1),
                    ..*e
                };
                self.judge(
                    &e2,
                    now,
                    if e.phase() == Phase::Turn {
                        "turns of short entries"
                    } else {
                        "race"
                    },
                );
            }
        }
        if e.class != NO_CLASS {
            self.last_class = e.class;
            self.last_total = e.total;
        }
        self.last_ns = now.saturating_sub(e.entry_start_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated nest: `cost(version, iteration)` ns per outermost iteration.
    struct Sim<'a> {
        steps: Vec<i64>,
        cost: &'a dyn Fn(usize, u64) -> f64,
        now: u64,
        /// Iterations run, per iteration: how many times (exactness).
        runs: Vec<u32>,
        by_version: Vec<u64>,
    }

    impl Sim<'_> {
        /// One entry over `n` iterations from 0; the total time.
        fn entry(&mut self, policy: &mut NestPolicy, p: &Params, n: u64) -> u64 {
            let begin = self.now;
            let mut e = Entry {
                ..unsafe { std::mem::zeroed() }
            };
            let mut run = policy.enter(&mut e, p, self.now);
            let mut lo = 0i64;
            self.runs = vec![0; n as usize];
            loop {
                let v = run.version;
                let step = self.steps[v] as u64;
                let hi = (lo as i128 + run.span as i128).min(i64::MAX as i128) as i64;
                let mut i = lo as u64;
                // A tiled version runs whole tiles: iterations [i, min(i+step, n)).
                while (i as i64) < hi && i < n {
                    for k in i..(i + step).min(n) {
                        self.runs[k as usize] += 1;
                        self.now += (self.cost)(v, k) as u64;
                        self.by_version[v] += 1;
                    }
                    i += step;
                }
                let stop = Stop {
                    lo,
                    at: i as i64,
                    bound: n as i64,
                    init: 0,
                };
                if i >= n {
                    policy.exit(&mut e, Some(&stop), self.now);
                    break;
                }
                run = policy.next(&mut e, p, &stop, self.now);
                lo = i as i64;
            }
            assert!(
                self.runs.iter().all(|&r| r == 1),
                "every iteration exactly once"
            );
            self.now - begin
        }
    }

    fn sim<'a>(steps: &[i64], cost: &'a dyn Fn(usize, u64) -> f64) -> Sim<'a> {
        Sim {
            steps: steps.to_vec(),
            cost,
            now: 0,
            runs: Vec::new(),
            by_version: vec![0; steps.len()],
        }
    }

    #[test]
    fn a_long_entry_races_and_keeps_the_fastest() {
        // Version 2 is the fastest; 1 is ten times slower; tiled 3 and 4 nearly as good.
        let rates = [3000.0, 20000.0, 1000.0, 1100.0, 1050.0];
        let cost = |v: usize, _| rates[v];
        let steps = [1, 1, 1, 32, 64];
        let mut s = sim(&steps, &cost);
        let mut policy = NestPolicy::new(&steps, &[false; 5]);
        let n = 200_000;
        let t = s.entry(&mut policy, &Params::default(), n);
        let best = n as f64 * 1000.0;
        assert_eq!(policy.winner(63 - (n.leading_zeros())), Some(2));
        let gap = t as f64 / best - 1.0;
        assert!(gap < 0.05, "gap {gap}, by version {:?}", s.by_version);
    }

    #[test]
    fn a_trend_along_the_iterations_does_not_pick_the_last_measured() {
        // A triangular nest: iteration k costs (n - k); versions 0 and 1 equal, 2 is 4% faster.
        let n = 100_000u64;
        let cost = move |v: usize, k: u64| (n - k) as f64 * [1.0, 1.0, 0.96][v] / 10.0 + 100.0;
        let steps = [1, 1, 1];
        let mut s = sim(&steps, &cost);
        let mut policy = NestPolicy::new(&steps, &[false; 3]);
        s.entry(&mut policy, &Params::default(), n);
        assert_eq!(
            policy.winner(63 - n.leading_zeros()),
            Some(2),
            "{:?}",
            policy.decisions
        );
    }

    #[test]
    fn cold_caches_at_the_start_do_not_drop_the_first_version_timed() {
        // Every version pays three times over its first 0.5% of the iterations (cold
        // caches); the original is the fastest.
        let n = 100_000u64;
        let cost = move |v: usize, k: u64| {
            [900.0, 1000.0, 5000.0][v] * if k < n / 200 { 3.0 } else { 1.0 }
        };
        let steps = [1, 1, 1];
        let mut s = sim(&steps, &cost);
        let mut policy = NestPolicy::new(&steps, &[false; 3]);
        s.entry(&mut policy, &Params::default(), n);
        assert_eq!(
            policy.winner(63 - n.leading_zeros()),
            Some(0),
            "{:?}",
            policy.decisions
        );
    }

    #[test]
    fn short_entries_take_turns_and_then_run_the_winner() {
        let rates = [2000.0, 500.0, 4000.0];
        let cost = |v: usize, _| rates[v];
        let steps = [1, 1, 4];
        let mut s = sim(&steps, &cost);
        let mut policy = NestPolicy::new(&steps, &[false; 3]);
        let p = Params::default();
        // 100 iterations of at most 0.4 ms: far too short to race.
        for _ in 0..20 {
            s.entry(&mut policy, &p, 100);
        }
        assert_eq!(policy.winner(6), Some(1), "{:?}", policy.decisions);
        let before = s.by_version.clone();
        for _ in 0..10 {
            s.entry(&mut policy, &p, 100);
        }
        assert_eq!(
            s.by_version[1] - before[1],
            1000,
            "decided entries run the winner"
        );
    }

    #[test]
    fn each_size_class_has_its_own_decision() {
        // Version 1 wins on small entries, version 0 on large ones (a cache effect).
        let small = |v: usize, _| [1000.0, 500.0][v];
        let steps = [1, 1];
        let mut policy = NestPolicy::new(&steps, &[false; 2]);
        let p = Params::default();
        let mut s = sim(&steps, &small);
        for _ in 0..10 {
            s.entry(&mut policy, &p, 64);
        }
        let large = |v: usize, _| [1000.0, 3000.0][v];
        let mut l = sim(&steps, &large);
        l.now = s.now;
        l.entry(&mut policy, &p, 300_000);
        assert_eq!(policy.winner(6), Some(1));
        assert_eq!(policy.winner(18), Some(0), "{:?}", policy.decisions);
    }

    #[test]
    fn a_phase_change_races_again() {
        // Version 0 is best for the first half, then five times slower than version 1.
        let n = 400_000u64;
        let cost = move |v: usize, k: u64| match (v, k < n / 2) {
            (0, true) => 500.0,
            (0, false) => 5000.0,
            (_, _) => 1000.0,
        };
        let steps = [1, 1];
        let mut s = sim(&steps, &cost);
        let mut policy = NestPolicy::new(&steps, &[false; 2]);
        s.entry(&mut policy, &Params::default(), n);
        let last = policy.decisions.last().unwrap();
        assert_eq!(
            last.version, 1,
            "{:?} {:?}",
            policy.decisions, policy.totals
        );
        // Noticed at the first check after the change (its iterations sized by the rate
        // before it), then raced.
        assert!(s.by_version[1] > n / 3, "{:?}", s.by_version);
    }

    #[test]
    fn forced_and_rotating_versions() {
        let cost = |_: usize, _| 10.0;
        let steps = [1, 4, 8];
        let mut s = sim(&steps, &cost);
        let mut policy = NestPolicy::new(&steps, &[false; 3]);
        let p = Params {
            force: Force::Version(1),
            ..Params::default()
        };
        s.entry(&mut policy, &p, 1000);
        assert_eq!(s.by_version, vec![0, 1000, 0]);
        let p = Params {
            force: Force::Rotate,
            ..Params::default()
        };
        s.entry(&mut policy, &p, 1001);
        assert!(
            policy.totals.iter().all(|t| t.chunks > 50),
            "{:?}",
            policy.totals
        );
    }
}
