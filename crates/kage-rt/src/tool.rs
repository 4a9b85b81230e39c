//! The tool interface: one process-wide [`Tool`] and one [`ThreadTool`] per thread.
//!
//! Lifecycle (VMAD-style modules): the runtime selects a tool from `tools::TOOLS` with
//! `tool=`, calls [`Tool::init`] once, creates a [`ThreadTool`] for every thread on its first
//! event, delivers a strictly balanced enter/exit sequence (repaired by `stack.rs`) and the
//! memory accesses to it, and at the end calls [`Tool::finish`] for the report's tool fields.
//!
//! Threading contract: a `ThreadTool` is only called by its own thread (or, in a forked child,
//! by the one surviving thread for threads that no longer exist). Whatever `finish` reads
//! across threads must be made of atomics written by their owner.
//!
//! Below the tools and the thread state (`gate`), above nothing but options and registry:
//! the tools implement it, the runtime drives it.

use crate::options::Options;
use crate::registry::Instrumentations;
use kage_report::CountStats;
use serde_json::{Map, Value};

/// The fields flattened into a region's entry, by global region id: made as the report is
/// written, from the tool's own compact per-region data (a JSON map for each of thousands
/// of regions, all at once, would be megabytes of the program's peak memory).
pub type RegionFields = Box<dyn Fn(usize) -> RegionMembers>;

/// The members a tool adds to one region's entry.
pub enum RegionMembers {
    /// The count tool's counters, written as members directly: the default tool's report
    /// has an entry for every registered region (SQLite's 18,500), and making a JSON map
    /// for each was most of the time its report took.
    Count(CountStats),
    /// Any other tool's members (none: an empty map).
    Map(Map<String, Value>),
}

impl RegionMembers {
    /// The members as a JSON map, as the report model holds them.
    pub fn into_map(self) -> Map<String, Value> {
        match self {
            RegionMembers::Count(stats) => to_map(stats),
            RegionMembers::Map(map) => map,
        }
    }
}

/// `v` as a JSON map (empty when it does not serialise to an object).
pub fn to_map<T: serde::Serialize>(v: T) -> Map<String, Value> {
    match serde_json::to_value(v) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// What a tool adds to the report.
pub struct ToolResults {
    /// Each region's fields.
    pub regions: RegionFields,
    /// Top-level fields.
    pub top: Map<String, Value>,
}

impl Default for ToolResults {
    /// No field in any region, none at the top.
    fn default() -> Self {
        ToolResults {
            regions: Box::new(|_| RegionMembers::Map(Map::new())),
            top: Map::new(),
        }
    }
}

pub trait Tool: Sync + Send {
    fn name(&self) -> &'static str;
    /// Called once, before any thread is created, with the options in force (the common
    /// ones and this tool's: `Options::get` with the tool's own `OptionDef`s) and the
    /// instrumentations the program's modules were built with, as far as registered. A tool
    /// may correct an option the build cannot serve (`Options::set`): the report shows the
    /// corrected value.
    fn init(&self, _opts: &mut Options, _built: Instrumentations) {}
    /// The per-thread part, for a thread's first event.
    fn new_thread(&'static self) -> Box<dyn ThreadTool>;
    /// The part for a coroutine's context (`swapcontext`), made on the thread that first
    /// runs it, which it shares with that thread's own part and its other contexts: the
    /// thread's inline state (thread-locals instrumented code updates) stays the thread's.
    /// By default, as for a thread.
    fn new_context(&'static self) -> Box<dyn ThreadTool> {
        self.new_thread()
    }
    /// Memory-access delivery was switched on or off (the runtime gates delivery itself).
    fn set_enabled(&self, _on: bool) {}
    /// Discard all statistics gathered so far, on every thread. Each thread applies it
    /// itself at its next region event (or now, via [`ThreadTool::reset`], for the caller).
    fn reset(&self);
    /// In a forked child: every other thread is gone. Followed by
    /// [`ThreadTool::fork_survivor`] on the calling thread.
    fn fork_child(&self);
    /// Results for the report, over `region_count` regions; all threads are summed.
    fn finish(&self, region_count: usize) -> ToolResults;
}

pub trait ThreadTool {
    /// A region instance starts (balanced with `exit`).
    fn enter(&mut self, region: u32);
    /// The innermost open region ends.
    fn exit(&mut self, region: u32);
    /// A memory access of `size` > 0 bytes (hot path: no allocation, no locks, no syscalls).
    fn access(&mut self, addr: usize, size: u64, write: bool);
    /// `count` > 0 ranges of `width` > 0 bytes at `addr`, `addr + stride`, ... accessed in
    /// any order, which footprint instrumentation reports for groups of accesses (it counts
    /// them itself). By default, one read access per range.
    fn access_strided(&mut self, addr: usize, width: u64, stride: u64, count: u64) {
        for k in 0..count {
            self.access(addr.wrapping_add((k * stride) as usize), width, false);
        }
    }
    /// Whether the tool tells a loop's iterations apart (a new iteration exits the loop's
    /// body and enters it again). When it does not, the runtime publishes the body as the
    /// innermost region and instrumented code leaves out `__kage_loop_iter` while the body
    /// is innermost: the iteration would change nothing (`inline::publish`).
    fn measures_iterations(&self) -> bool {
        true
    }
    /// Apply a pending [`Tool::reset`] now.
    fn reset(&mut self);
    /// This thread is the only one left in a forked child: start from zero.
    fn fork_survivor(&mut self);
    /// The thread ends; every region has been exited.
    fn thread_exit(&mut self) {}
    /// The thread this part belonged to has ended (`thread_exit` was called) and a thread
    /// that starts now, the calling one, takes the part over: it binds itself to the calling
    /// thread (its thread-locals) and goes on as a new thread's part would, keeping the
    /// statistics it holds (the report sums every part's, so one part counting for thread
    /// after thread counts what as many parts would). Called under the runtime's thread list
    /// lock. False when the part cannot go on: the thread gets a new part.
    fn adopt(&mut self) -> bool {
        false
    }
    /// The program ends on this thread (`exit`, `main` returned, a fatal signal) and every
    /// region has been exited; the report is built next and later events are ignored. A
    /// tool frees here what its report does not need, so that the report's memory does not
    /// come on top of it in the program's peak.
    fn program_end(&mut self) {}
    /// The thread switches to another coroutine context: whatever inline state the thread
    /// shares with its contexts holds this part's events until now; take them.
    fn suspend(&mut self) {}
    /// The thread switched back to this part's context.
    fn resume(&mut self) {}
    /// The thread part as its own type, for the C entry points a tool defines for its own
    /// instrumentation: they reach it through `gate` as a `dyn ThreadTool` and downcast.
    /// `None` (the default) for tools without such entry points.
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
}

/// Region events go straight to the thread's tool.
impl crate::stack::Sink for dyn ThreadTool + '_ {
    fn enter(&mut self, region: u32) {
        ThreadTool::enter(self, region)
    }
    fn exit(&mut self, region: u32) {
        ThreadTool::exit(self, region)
    }
}
