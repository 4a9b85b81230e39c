//! Tool `loops`: the runtime side of the loop nests a build selected and versioned
//! (`KAGE_TOOL=loops`, docs/abi.md "Loop nests"), and the test module of that framework
//! (issue 17, after VMAD §3–5).
//!
//! Each selected nest runs in one of two versions, the program's own code or an
//! instrumented clone, and asks the runtime at the start of each chunk of iterations which
//! one runs the next chunk. The rule is VMAD's sampling: the first `sample_entries=`
//! entries of each nest (over the whole process, since the start or the last `kage_reset`)
//! are *sampled*; in a sampled entry the first `sample_iterations=` iterations of each
//! level, in every entry of that level made from the instrumented version, run
//! instrumented, the rest runs the original code. The report gives per nest its entries
//! and sampled entries, and per level its iterations, the iterations that ran instrumented
//! and the chunks each version ran.
//!
//! Layout: `nests.rs` learns the nests (descriptors seen at the entry points, global ids,
//! level slots, sampling claims); `entry.rs` the `__kage_loops_*` entry points, which reach
//! the calling thread's [`LoopsThread`] through `gate`; this file the options, the `Tool`
//! and `ThreadTool`, the decisions and the statistics.
//!
//! Each thread keeps a stack of the nest entries it has open (a nest's code may call a
//! function holding another nest, or itself) with each level's version and virtual
//! iterator, so the decision and iteration calls touch only thread-local data plus the
//! thread's own statistics: `Chunked` records of `AtomicU64`s written by their owner, read by
//! `finish`, restarted by resets and forks as the count tool's are. The only shared write is
//! a nest's sampling claim, made by its first `sample_entries` entries.
//!
//! A tool: imports only the layer below (`tool`, `gate`, `options`, `registry`, `sync`,
//! `chunked`).

pub mod analysis;
mod entry;
pub mod nests;
#[cfg(test)]
mod tests;

use crate::chunked::{bump, Chunked};
use crate::options::{OptionDef, Options};
use crate::registry::Instrumentations;
use crate::sync::SpinLock;
use crate::tool::{ThreadTool, Tool, ToolResults};
use analysis::{Analysis, EntryAnalysis, NestAnalysis};
use kage_abi::loops::{decision, Selection, DECIDE_NOW, INSTRUMENTED, NEVER, ORIGINAL, UNBOUNDED};
use kage_abi::{Instrumentation, LoopLevel, Nest, NONE};
use kage_report::{LevelChunks, LoopNest, Loops, NestLevel, NestSelection, LOOPS_KEY, NESTS_KEY};
use nests::{NestInfo, NestRegistry, Registered, NESTS};
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::OnceLock;

/// A count option: any non-negative integer, given back in its plain form.
fn parse_count(v: &str) -> Result<String, String> {
    v.parse::<u64>()
        .map(|n| n.to_string())
        .map_err(|_| "expected a non-negative integer".into())
}

const SAMPLE_ITERATIONS: OptionDef = OptionDef {
    name: "sample_iterations",
    default: "10",
    help: "loops: in a sampled entry of a nest, the first iterations of each loop level that \
           run in the instrumented version (0: none; VMAD's 10, at least 3 to fit an affine \
           function)",
    parse: parse_count,
};

const SAMPLE_ENTRIES: OptionDef = OptionDef {
    name: "sample_entries",
    default: "8",
    help: "loops: the first entries of each nest that are sampled, counted over the whole \
           process since the start or the last kage_reset() (VMAD's 8 at -O3); later entries \
           run the original code only",
    parse: parse_count,
};

/// The loops tool's options (`tools::TOOLS`).
pub static OPTIONS: &[OptionDef] = &[SAMPLE_ITERATIONS, SAMPLE_ENTRIES];

/// The sampling rule's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampling {
    /// `sample_iterations=`.
    pub iterations: u64,
    /// `sample_entries=`.
    pub entries: u64,
}

impl Sampling {
    fn from_options(opts: &Options) -> Sampling {
        Sampling {
            iterations: opts.get(&SAMPLE_ITERATIONS).parse().unwrap_or(10),
            entries: opts.get(&SAMPLE_ENTRIES).parse().unwrap_or(8),
        }
    }
}

// Per-thread record by nest id.
const ENTRIES: usize = 0;
const SAMPLED_ENTRIES: usize = 1;
const NEST_WORDS: usize = 2;

// Per-thread record by level slot (`nests.rs`).
/// Iterations of the level in entries of its nest that exited (`__kage_loops_exit`).
const ITERATIONS: usize = 0;
/// Iterations that started in the instrumented version (`__kage_loops_iter`).
const INSTRUMENTED_ITERATIONS: usize = 1;
/// Decisions taken for the level, by version.
const CHUNKS_ORIGINAL: usize = 2;
const CHUNKS_INSTRUMENTED: usize = 3;
const LEVEL_WORDS: usize = 4;

/// The decision outside any sampled entry: the original code to the end of the loop's entry.
const ORIGINAL_TO_THE_END: u64 = decision(ORIGINAL, false, UNBOUNDED);

pub struct LoopsTool {
    nests: &'static NestRegistry,
    /// The analysis on the framework (`tool=interpolate`, `dependences`), if any.
    analysis: Option<Analysis>,
    /// Its results by nest id, merged as sampled entries end.
    results: SpinLock<Vec<NestAnalysis>>,
    sampling: OnceLock<Sampling>,
    /// `enabled=`, `kage_set_enabled`: while off, no entry is sampled and no chunk runs
    /// instrumented (entries and iterations are still counted, as regions are tracked).
    enabled: AtomicBool,
    epoch: AtomicU64,
    threads: SpinLock<Vec<&'static ThreadStats>>,
}

/// One thread's statistics, readable by the report writer at any time.
struct ThreadStats {
    /// The reset epoch these statistics belong to.
    epoch: AtomicU64,
    /// The thread does not exist in this process (forked child).
    retired: AtomicBool,
    /// By nest id: `[ENTRIES, SAMPLED_ENTRIES]`.
    nests: Chunked<NEST_WORDS>,
    /// By level slot: `[ITERATIONS, INSTRUMENTED_ITERATIONS, CHUNKS_ORIGINAL,
    /// CHUNKS_INSTRUMENTED]`.
    levels: Chunked<LEVEL_WORDS>,
}

/// A level of an open nest entry, as far as the runtime knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LevelState {
    /// The virtual iterator of the level's latest iteration the runtime saw start (in the
    /// instrumented version, or at a decision); 0 before any.
    pub vi: u64,
    /// The version the level's latest decision chose ([`ORIGINAL`] before any).
    pub version: u64,
    /// The enclosing level ([`NONE`] for level 0), from the nest's descriptor.
    pub parent: u32,
}

/// A nest entry this thread has open.
#[derive(Debug, Clone, Copy)]
struct OpenEntry {
    nest: u32,
    /// The `frame` of its `__kage_loops_enter`: the calling function's return-address slot.
    frame: usize,
    sampled: bool,
    /// Its levels' slots (statistics) start here.
    level_base: usize,
    /// Its levels' states are `levels[first_level..][..level_count]`.
    first_level: usize,
    level_count: usize,
}

/// The instrumentation each tool built on the framework reads.
fn instrumentation_of(analysis: Option<Analysis>) -> Instrumentation {
    match analysis {
        None => Instrumentation::Loops,
        Some(Analysis::Interpolate) => Instrumentation::Interpolate,
        Some(Analysis::Dependences) => Instrumentation::Dependences,
    }
}

/// The innermost nest entry a thread has open, for the analyses built on the framework.
#[derive(Debug, Clone, Copy)]
pub struct ActiveEntry<'a> {
    /// The nest's global id.
    pub nest: u32,
    pub sampled: bool,
    /// Per level (pre-order, level 0 the outermost), its version and virtual iterator.
    pub levels: &'a [LevelState],
}

pub struct LoopsThread {
    tool: &'static LoopsTool,
    sampling: Sampling,
    stats: &'static ThreadStats,
    /// Open entries, outermost first; their frames never increase (see `drop_dead`).
    entries: Vec<OpenEntry>,
    /// The levels of every open entry, in the same order.
    levels: Vec<LevelState>,
    /// The analyses of the open sampled entries: (index in `entries`, analysis).
    analyses: Vec<(usize, EntryAnalysis)>,
}

pub fn make() -> &'static dyn Tool {
    Box::leak(Box::new(LoopsTool::new(&NESTS, None)))
}

/// Tool `interpolate`.
pub fn make_interpolate() -> &'static dyn Tool {
    Box::leak(Box::new(LoopsTool::new(
        &NESTS,
        Some(Analysis::Interpolate),
    )))
}

/// Tool `dependences`.
pub fn make_dependences() -> &'static dyn Tool {
    Box::leak(Box::new(LoopsTool::new(
        &NESTS,
        Some(Analysis::Dependences),
    )))
}

impl LoopsTool {
    /// A tool over the nests of `nests` (the runtime's are [`NESTS`]), running `analysis`.
    pub fn new(nests: &'static NestRegistry, analysis: Option<Analysis>) -> Self {
        LoopsTool {
            nests,
            analysis,
            results: SpinLock::new(Vec::new()),
            sampling: OnceLock::new(),
            enabled: AtomicBool::new(true),
            epoch: AtomicU64::new(0),
            threads: SpinLock::new(Vec::new()),
        }
    }

    fn sampling(&self) -> Sampling {
        *self
            .sampling
            .get_or_init(|| Sampling::from_options(&Options::default()))
    }

    /// Per nest (by id) `[entries, sampled_entries]` and per level slot its counters, summed
    /// over the threads that applied the latest reset.
    fn collect(
        &self,
        nest_count: usize,
        level_slots: usize,
    ) -> (Vec<[u64; NEST_WORDS]>, Vec<[u64; LEVEL_WORDS]>) {
        let mut nests = vec![[0; NEST_WORDS]; nest_count];
        let mut levels = vec![[0; LEVEL_WORDS]; level_slots];
        let epoch = self.epoch.load(Acquire);
        let threads = self.threads.lock().clone();
        for t in threads {
            // A thread that has not applied the latest reset has nothing after it yet.
            if t.retired.load(Relaxed) || t.epoch.load(Acquire) != epoch {
                continue;
            }
            add_records(&t.nests, &mut nests);
            add_records(&t.levels, &mut levels);
        }
        (nests, levels)
    }

    /// The report's `"loops"` object.
    fn report(&self) -> Loops {
        let sampling = self.sampling();
        let registered = self.nests.snapshot();
        let level_slots = (registered.last()).map_or(0, |(info, base)| base + info.levels.len());
        let (nest_counts, level_counts) = self.collect(registered.len(), level_slots);
        let nests = (registered.iter().zip(nest_counts).enumerate())
            .map(|(id, ((info, base), [entries, sampled_entries]))| {
                // Entries after sampling counted themselves, in the program.
                let unsampled = self.nests.unsampled(id as u32, info.levels.len());
                let mut counts: Vec<[u64; LEVEL_WORDS]> =
                    level_counts[*base..][..info.levels.len()].to_vec();
                for (k, level) in counts.iter_mut().enumerate() {
                    level[ITERATIONS] += unsampled[1 + k];
                }
                LoopNest {
                    id: id as u32,
                    function: info.function.clone(),
                    file: info.file.clone(),
                    line: info.levels[0].first_line,
                    end_line: info.levels[0].last_line,
                    selected_by: selection(info),
                    entries: entries + unsampled[0],
                    sampled_entries,
                    levels: (info.levels.iter().enumerate())
                        .map(|(k, level)| level_report(k, level, counts[k]))
                        .collect(),
                }
            })
            .collect();
        Loops {
            sample_iterations: sampling.iterations,
            sample_entries: sampling.entries,
            nests,
        }
    }
}

/// Level `k` of a nest in the report, with its counts summed over the threads.
fn level_report(k: usize, level: &LoopLevel, counts: [u64; LEVEL_WORDS]) -> NestLevel {
    NestLevel {
        level: k as u32,
        parent: (level.parent != NONE).then_some(level.parent),
        depth: level.depth,
        line: level.first_line,
        end_line: level.last_line,
        iterations: counts[ITERATIONS],
        instrumented_iterations: counts[INSTRUMENTED_ITERATIONS],
        chunks: LevelChunks {
            original: counts[CHUNKS_ORIGINAL],
            instrumented: counts[CHUNKS_INSTRUMENTED],
        },
    }
}

/// Adds every record of `chunked` that has a place in `sums`.
fn add_records<const W: usize>(chunked: &Chunked<W>, sums: &mut [[u64; W]]) {
    chunked.for_each(|i, record| {
        if let Some(sum) = sums.get_mut(i) {
            for (s, word) in sum.iter_mut().zip(record) {
                *s += word.load(Relaxed);
            }
        }
    });
}

fn selection(info: &NestInfo) -> NestSelection {
    match info.selected_by {
        Selection::Line => NestSelection::Line,
        Selection::Pragma => NestSelection::Pragma,
        Selection::Report => NestSelection::Report,
    }
}

impl Tool for LoopsTool {
    fn name(&self) -> &'static str {
        instrumentation_of(self.analysis)
            .only_tool()
            .unwrap_or("loops")
    }

    /// Nests exist only in code built with `KAGE_TOOL=loops` (or the tool's own name): says
    /// so when the modules registered so far were all built otherwise.
    fn init(&self, opts: &mut Options, built: Instrumentations) {
        let others: Vec<_> = built.iter().collect();
        let needed = instrumentation_of(self.analysis);
        if !others.is_empty() && !built.contains(needed) {
            let name = self.name();
            eprintln!(
                "kage: warning: tool {name} needs a program built with KAGE_TOOL={name} and \
                 loops selected (KAGE_LOOPS=file.c:line or #pragma kage profile); this one was \
                 built for {others:?}: the report will hold no loop nest"
            );
        }
        let _ = self.sampling.set(Sampling::from_options(opts));
        self.enabled.store(opts.enabled(), Relaxed);
    }

    fn new_thread(&'static self) -> Box<dyn ThreadTool> {
        let stats: &'static ThreadStats = Box::leak(Box::new(ThreadStats {
            epoch: AtomicU64::new(self.epoch.load(Acquire)),
            retired: AtomicBool::new(false),
            nests: Chunked::new(),
            levels: Chunked::new(),
        }));
        self.threads.lock().push(stats);
        Box::new(LoopsThread {
            tool: self,
            sampling: self.sampling(),
            stats,
            entries: Vec::with_capacity(16),
            levels: Vec::with_capacity(64),
            analyses: Vec::new(),
        })
    }

    fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Relaxed);
    }

    /// Statistics start anew and so does sampling: the claims first, so that a thread
    /// applying the new epoch claims against zero.
    fn reset(&self) {
        self.nests.restart_sampling();
        self.results.lock().clear();
        self.epoch.fetch_add(1, AcqRel);
    }

    /// The child's report covers what it does from the fork on, sampling included.
    fn fork_child(&self) {
        for t in self.threads.lock().iter() {
            t.retired.store(true, Relaxed);
        }
        self.results.lock().clear();
        self.nests.restart_sampling();
    }

    fn finish(&self, _region_count: usize) -> ToolResults {
        let mut top = Map::new();
        top.insert(
            LOOPS_KEY.into(),
            serde_json::to_value(self.report()).unwrap_or(Value::Null),
        );
        if let Some(analysis) = self.analysis {
            let results = self.results.lock().clone();
            let nests: Vec<_> = (self.nests.snapshot().iter().enumerate())
                .filter_map(|(id, (info, _))| {
                    let result = results.get(id).filter(|r| r.entries() > 0)?;
                    Some(result.report(id as u32, info, analysis))
                })
                .collect();
            top.insert(
                NESTS_KEY.into(),
                serde_json::to_value(nests).unwrap_or(Value::Null),
            );
        }
        ToolResults {
            top,
            ..ToolResults::default()
        }
    }
}

impl LoopsThread {
    /// The innermost open entry: its nest, whether it is sampled, its levels.
    pub fn active(&self) -> Option<ActiveEntry<'_>> {
        let e = self.entries.last()?;
        Some(ActiveEntry {
            nest: e.nest,
            sampled: e.sampled,
            levels: &self.levels[e.first_level..][..e.level_count],
        })
    }

    /// `__kage_loops_enter`: the outermost loop of `nest` is entered by the function whose
    /// return-address slot is `frame`. Returns the first chunk end: [`DECIDE_NOW`] for a
    /// sampled entry, [`NEVER`] otherwise (and for a nest that is not registered).
    ///
    /// # Safety
    /// `nest` is null or points to a `kage_nest` (see `NestRegistry::look_up`).
    pub unsafe fn enter(&mut self, nest: *mut Nest, frame: usize) -> u64 {
        self.sync_epoch();
        let Some(Registered {
            id,
            level_base,
            level_count,
        }) = self.tool.nests.look_up(nest)
        else {
            return NEVER;
        };
        self.drop_dead(id, frame);
        let enabled = self.tool.enabled.load(Relaxed);
        let sampled = enabled && self.tool.nests.claim_sample(id, self.sampling.entries);
        if enabled && !sampled {
            // The samples are taken: the next entries count themselves, without a call.
            self.tool.nests.end_sampling(id);
        }
        let first_level = self.levels.len();
        // Validated at registration: `levels` holds `level_count` levels.
        let descriptor = std::slice::from_raw_parts((*nest).levels, level_count);
        self.levels
            .extend(descriptor.iter().map(|level| LevelState {
                vi: 0,
                version: ORIGINAL,
                parent: level.parent,
            }));
        self.entries.push(OpenEntry {
            nest: id,
            frame,
            sampled,
            level_base,
            first_level,
            level_count,
        });
        if let Some(record) = self.nest_record(id) {
            bump(&record[ENTRIES], 1);
            bump(&record[SAMPLED_ENTRIES], sampled as u64);
        }
        if let (true, Some(analysis)) = (sampled, self.tool.analysis) {
            let entry = EntryAnalysis::new(analysis, id, nest, &self.levels[first_level..]);
            self.analyses.push((self.entries.len() - 1, entry));
        }
        if sampled {
            DECIDE_NOW
        } else {
            NEVER
        }
    }

    /// `__kage_loops_decide`: level `level` of `nest` reached the end of its chunk before
    /// iteration `vi`. In a sampled entry, the first `sample_iterations` iterations run
    /// instrumented when the enclosing level runs instrumented (or for level 0); otherwise
    /// the original code runs to the end of the loop's entry, and the enclosing levels
    /// decide again at their next iteration when the enclosing one ran instrumented (so that
    /// its next iteration is instrumented again).
    ///
    /// # Safety
    /// As for [`Self::enter`].
    pub unsafe fn decide(&mut self, nest: *mut Nest, level: u32, vi: u64) -> u64 {
        self.sync_epoch();
        let Some(at) = self.open_entry(nest) else {
            return ORIGINAL_TO_THE_END;
        };
        let e = self.entries[at];
        let level = level as usize;
        if level >= e.level_count {
            return ORIGINAL_TO_THE_END;
        }
        let levels = &mut self.levels[e.first_level..][..e.level_count];
        let parent = levels[level].parent;
        let parent_instrumented = parent != NONE && levels[parent as usize].version == INSTRUMENTED;
        let iterations = self.sampling.iterations;
        let instrument = e.sampled
            && self.tool.enabled.load(Relaxed)
            && vi < iterations
            && (parent == NONE || parent_instrumented);
        let (version, d) = if instrument {
            (INSTRUMENTED, decision(INSTRUMENTED, false, iterations - vi))
        } else {
            (ORIGINAL, decision(ORIGINAL, parent_instrumented, UNBOUNDED))
        };
        levels[level] = LevelState {
            vi,
            version,
            parent,
        };
        if let Some(record) = self.level_record(e.level_base + level) {
            let chunks = if instrument {
                CHUNKS_INSTRUMENTED
            } else {
                CHUNKS_ORIGINAL
            };
            bump(&record[chunks], 1);
        }
        d
    }

    /// `__kage_loops_iter`: iteration `vi` of level `level` of `nest` starts in the
    /// instrumented version.
    ///
    /// # Safety
    /// As for [`Self::enter`].
    pub unsafe fn iter(&mut self, nest: *mut Nest, level: u32, vi: u64) {
        self.sync_epoch();
        let Some(at) = self.open_entry(nest) else {
            return;
        };
        let e = self.entries[at];
        let level = level as usize;
        if level >= e.level_count {
            return;
        }
        self.levels[e.first_level + level].vi = vi;
        if let Some(record) = self.level_record(e.level_base + level) {
            bump(&record[INSTRUMENTED_ITERATIONS], 1);
        }
    }

    /// `__kage_loops_exit`: the outermost loop of `nest` is left normally, its levels having
    /// run `iterations[k]` iterations in this entry. Ignored when the nest has no open entry
    /// on this thread (its entry was not seen).
    ///
    /// # Safety
    /// As for [`Self::enter`]; `iterations` is null or points to the nest's `level_count`
    /// counts.
    pub unsafe fn exit(&mut self, nest: *mut Nest, iterations: *const u64) {
        self.sync_epoch();
        let Some(at) = self.open_entry(nest) else {
            return;
        };
        let e = self.entries[at];
        if !iterations.is_null() {
            let counts = std::slice::from_raw_parts(iterations, e.level_count);
            for (k, &n) in counts.iter().enumerate() {
                if let Some(record) = self.level_record(e.level_base + k) {
                    bump(&record[ITERATIONS], n);
                }
            }
            self.close_analyses(at, Some(counts[0]));
        }
        self.truncate(at);
    }

    /// `__kage_loops_access`: access `index` of `nest` touches `address` (instrumented
    /// version, so in a sampled entry).
    ///
    /// # Safety
    /// As for [`Self::enter`].
    pub unsafe fn access(&mut self, nest: *mut Nest, index: u32, address: usize) {
        let Some(at) = self.open_entry(nest) else {
            return;
        };
        let e = self.entries[at];
        if let Some((_, analysis)) = self.analyses.last_mut().filter(|(i, _)| *i == at) {
            analysis.access(
                &self.levels[e.first_level..][..e.level_count],
                index,
                address,
            );
        }
    }

    /// `__kage_loops_trip`: an entry of inner level `level` of `nest` ran `trips` iterations.
    ///
    /// # Safety
    /// As for [`Self::enter`].
    pub unsafe fn trip(&mut self, nest: *mut Nest, level: u32, trips: u64) {
        let Some(at) = self.open_entry(nest) else {
            return;
        };
        let e = self.entries[at];
        if let Some((_, analysis)) = self.analyses.last_mut().filter(|(i, _)| *i == at) {
            analysis.trip(&self.levels[e.first_level..][..e.level_count], level, trips);
        }
    }

    /// Ends the analyses of the entries from `at` on, the entry at `at` having run
    /// `root_trips` iterations (`None`: left without its exit).
    fn close_analyses(&mut self, at: usize, mut root_trips: Option<u64>) {
        while self.analyses.last().is_some_and(|(i, _)| *i >= at) {
            let Some((i, analysis)) = self.analyses.pop() else {
                break;
            };
            let trips = if i == at { root_trips.take() } else { None };
            let mut results = self.tool.results.lock();
            let id = analysis.nest as usize;
            if results.len() <= id {
                results.resize_with(id + 1, NestAnalysis::default);
            }
            analysis.finish(trips, &mut results[id]);
        }
    }

    /// The innermost open entry of `nest`, dropping the entries above it: they were left
    /// without their exit (a `longjmp` or an exception out of a callee), since control is
    /// back in the code of an entry below them.
    #[inline(always)]
    unsafe fn open_entry(&mut self, nest: *mut Nest) -> Option<usize> {
        let id = nests::registered_id(nest)?;
        let at = self.entries.iter().rposition(|e| e.nest == id)?;
        if at + 1 < self.entries.len() {
            self.truncate(at + 1);
        }
        Some(at)
    }

    /// Drops the entries a new entry of `nest` from the function whose return-address slot
    /// is `frame` shows were left without their exit (by a `longjmp` or an exception). The
    /// stack grows down: entries below `frame` belong to activations that are gone. At
    /// `frame` itself, an entry of the same nest is dead (a nest's code cannot be entered
    /// again inside itself in one activation), and so is everything entered after it; an
    /// entry of another nest is not, as the new nest may be a function's nest inlined into
    /// its body, whose calls carry the same frame.
    fn drop_dead(&mut self, nest: u32, frame: usize) {
        let shallower = self.entries.partition_point(|e| e.frame > frame);
        let mut live = self.entries.partition_point(|e| e.frame >= frame);
        if let Some(k) = self.entries[shallower..live]
            .iter()
            .position(|e| e.nest == nest)
        {
            live = shallower + k;
        }
        if live < self.entries.len() {
            self.truncate(live);
        }
    }

    /// Closes the entries from `at` on.
    fn truncate(&mut self, at: usize) {
        self.close_analyses(at, None);
        if let Some(e) = self.entries.get(at) {
            self.levels.truncate(e.first_level);
            self.entries.truncate(at);
        }
    }

    fn nest_record(&self, id: u32) -> Option<&'static [AtomicU64; NEST_WORDS]> {
        // SAFETY: only the owner thread allocates this thread's chunks.
        unsafe { self.stats.nests.get_or_alloc(id as usize) }
    }

    fn level_record(&self, slot: usize) -> Option<&'static [AtomicU64; LEVEL_WORDS]> {
        // SAFETY: as in `nest_record`.
        unsafe { self.stats.levels.get_or_alloc(slot) }
    }

    /// Applies the tool's latest reset if this thread has not yet.
    #[inline(always)]
    fn sync_epoch(&mut self) {
        let e = self.tool.epoch.load(Acquire);
        if self.stats.epoch.load(Relaxed) != e {
            self.zero();
            self.stats.epoch.store(e, Release);
        }
    }

    /// Statistics start anew. Each entry open at this moment counts as an entry (its exit
    /// adds its iterations), and stays sampled only if it claims one of the new samples, so
    /// that no nest has more sampled entries than `sample_entries`.
    fn zero(&mut self) {
        self.stats.nests.zero();
        self.stats.levels.zero();
        let enabled = self.tool.enabled.load(Relaxed);
        for k in 0..self.entries.len() {
            let e = self.entries[k];
            let sampled =
                e.sampled && enabled && self.tool.nests.claim_sample(e.nest, self.sampling.entries);
            self.entries[k].sampled = sampled;
            if let Some(record) = self.nest_record(e.nest) {
                bump(&record[ENTRIES], 1);
                bump(&record[SAMPLED_ENTRIES], sampled as u64);
            }
        }
    }
}

impl ThreadTool for LoopsThread {
    /// Loop nests come through `__kage_loops_*`; loops builds have no region hooks, and
    /// regions of other builds do not concern the tool.
    fn enter(&mut self, _region: u32) {}

    fn exit(&mut self, _region: u32) {}

    fn access(&mut self, _addr: usize, _size: u64, _write: bool) {}

    fn reset(&mut self) {
        self.sync_epoch();
    }

    /// The forking thread's open entries stay open (it is inside them); their samples were
    /// the parent's, so they stay sampled only if they claim the child's.
    fn fork_survivor(&mut self) {
        self.zero();
        self.stats
            .epoch
            .store(self.tool.epoch.load(Acquire), Release);
        self.stats.retired.store(false, Relaxed);
    }

    fn thread_exit(&mut self) {
        self.close_analyses(0, None);
        self.entries.clear();
        self.levels.clear();
    }

    /// Its statistics go on; its entries and analyses ended with the thread.
    fn adopt(&mut self) -> bool {
        self.thread_exit();
        true
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}
