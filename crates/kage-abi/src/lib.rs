//! The contract between `kage-pass` (which writes calls and tables into the program) and
//! `kage-rt` (which implements them), as `docs/abi.md` describes it, written once so that
//! both sides, and the compiler wrapper, use the same definitions.
//!
//! - [`Region`], [`Module`]: the C layout of the static region table;
//! - [`RegionKind`]: `enum kage_region_kind`;
//! - [`Instrumentation`]: `enum kage_instrumentation`, and [`BUILD_TOOLS`], the `KAGE_TOOL`
//!   values that select one;
//! - [`symbols`]: every function and global the instrumented code and the runtime share,
//!   with its C signature as data ([`Symbol`]); the pass declares from it, and a test of the
//!   pass checks that what it emits matches it, while the runtime's definitions are checked
//!   against [`symbols`]'s function-pointer types at compile time.
//!
//! `no_std` and dependency-free: the runtime links it into every instrumented program, and
//! the pass loads it into clang.

#![no_std]

use core::ffi::{c_char, c_void};

/// `kage_module.abi_version`: bumped whenever anything in this crate changes meaning.
pub const VERSION: u32 = 16;

/// `kage_region.global_id` before registration, and `parent` for none.
pub const NONE: u32 = 0xFFFF_FFFF;
/// `global_id` the runtime writes into a region whose module was rejected, so later hooks
/// skip it without retrying the registration.
pub const REJECTED: u32 = 0xFFFF_FFFE;

/// The name of a module's `struct kage_module` global: its presence also tells the pass that
/// a module is already instrumented.
pub const MODULE_GLOBAL: &str = "__kage_module";
/// Priority of the constructor that registers a module's table (`llvm.global_ctors`).
pub const CTOR_PRIORITY: u64 = 1;

/// `enum kage_region_kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum RegionKind {
    Function = 0,
    Loop = 1,
    /// One iteration of a loop; always the entry right after its loop's.
    LoopBody = 2,
    /// A call the optimiser inlined: the callee's code inside its caller, an instance per
    /// time it runs. Its name, symbol, file and lines are the callee's; `call_*` say where
    /// the call is.
    Inlined = 3,
}

impl RegionKind {
    /// The kind a table's `kind` field holds, if it is one.
    pub const fn from_u32(value: u32) -> Option<RegionKind> {
        match value {
            0 => Some(RegionKind::Function),
            1 => Some(RegionKind::Loop),
            2 => Some(RegionKind::LoopBody),
            3 => Some(RegionKind::Inlined),
            _ => None,
        }
    }
}

/// What makes two regions one source region (copies of it: a function and its inlined
/// calls, a loop the optimiser split or versioned): the views join regions with equal keys,
/// and the tools count a recursion once per key (the pass per module, through
/// [`Region::source_cell`]; the runtime's registry across modules). `S` is how the key
/// holds its strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SourceKey<S> {
    /// A function (or an inlined call of it), by [`key_function`] and file.
    Function { symbol: S, file: S },
    /// A loop of source region `parent`, by its first line.
    Loop { parent: u32, line: u32 },
    /// The body of source loop `lp`.
    Body { lp: u32 },
}

impl<S> SourceKey<S> {
    /// The key of a region of `kind` (an inlined call is its function) with this first
    /// `line`, [`key_function`] and file, whose parent's source region is `parent_source`
    /// (`None` without a parent).
    pub fn new(
        kind: RegionKind,
        parent_source: Option<u32>,
        line: u32,
        function: S,
        file: S,
    ) -> Self {
        let parent = parent_source.unwrap_or(u32::MAX);
        match kind {
            RegionKind::Function | RegionKind::Inlined => SourceKey::Function {
                symbol: function,
                file,
            },
            RegionKind::Loop => SourceKey::Loop { parent, line },
            RegionKind::LoopBody => SourceKey::Body { lp: parent },
        }
    }
}

/// What names a region's function in its [`SourceKey`]: the linkage name, or the name when
/// it has none.
pub fn key_function<'a, T: AsRef<str> + ?Sized>(name: &'a T, symbol: &'a T) -> &'a T {
    if symbol.as_ref().is_empty() {
        name
    } else {
        symbol
    }
}

/// `struct kage_region`: one entry of a module's region table (88 bytes, align 8).
#[repr(C)]
pub struct Region {
    /// Written by the runtime at registration; [`NONE`] before, [`REJECTED`] for a rejected
    /// module.
    pub global_id: u32,
    /// A [`RegionKind`].
    pub kind: u32,
    /// Local index of the static parent; [`NONE`] for a function.
    pub parent: u32,
    /// First and last source line (0 = unknown).
    pub first_line: u32,
    pub last_line: u32,
    /// This entry's own index in the module's array.
    pub local_index: u32,
    /// The function's name, demangled where it is C++.
    pub name: *const c_char,
    /// The function's linkage name.
    pub symbol: *const c_char,
    /// The source file, absolute where known, "" when unknown.
    pub file: *const c_char,
    pub module: *mut Module,
    /// A function entry's code address; null for loops and bodies.
    pub code: *const c_void,
    /// An inlined call's source file (of the code that makes the call); null otherwise.
    pub call_file: *const c_char,
    /// An inlined call's line and column in `call_file` (0 = unknown, and for other kinds).
    pub call_line: u32,
    pub call_column: u32,
    /// When other regions of the module are copies of the same source region
    /// ([`SourceKey`]): the index of that source region's cell among the module's source
    /// cells ([`count`]); [`NONE`] otherwise.
    pub source_cell: u32,
    /// [`count::IN_LOCALS`] (count builds), a leaf chain's length in
    /// [`footprint::CHAIN_MASK`] (footprint builds), or 0.
    pub flags: u32,
}

/// `struct kage_module` (40 bytes, align 8).
#[repr(C)]
pub struct Module {
    /// [`VERSION`].
    pub abi_version: u32,
    pub region_count: u32,
    pub regions: *mut Region,
    /// The module's source file name.
    pub module_name: *const c_char,
    /// An [`Instrumentation`].
    pub instrumentation: u32,
    /// Working-set instrumentation: log2 of the line size built into its marks; 0 otherwise.
    pub line_shift: u32,
    /// Written by the runtime at registration: the module's index among the registered ones,
    /// from 1 (0 before). Count instrumentation finds the thread's records of the module's
    /// regions at this index of the thread's directory ([`count`]).
    pub slot: u32,
    /// How many of the module's source regions have several copies in it (cells, [`count`]).
    pub source_cells: u32,
}

/// Byte offsets of the fields of [`Region`] and [`Module`], in field order: the pass lays
/// out its constant tables by them (`regions.rs`), and the layout assertions below tie them
/// to the Rust structs the runtime reads.
pub mod layout {
    pub const REGION_SIZE: usize = 88;
    /// `global_id, kind, parent, first_line, last_line, local_index` (i32 each), then
    /// `name, symbol, file, module, code, call_file` (pointers), `call_line, call_column,
    /// source_cell, flags` (i32).
    pub const REGION_FIELDS: [usize; 16] =
        [0, 4, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 72, 76, 80, 84];
    pub const MODULE_SIZE: usize = 40;
    /// `abi_version, region_count` (i32), `regions, module_name` (pointers),
    /// `instrumentation, line_shift, slot, source_cells` (i32).
    pub const MODULE_FIELDS: [usize; 8] = [0, 4, 8, 16, 24, 28, 32, 36];
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Region>() == layout::REGION_SIZE);
    let r = layout::REGION_FIELDS;
    assert!(offset_of!(Region, global_id) == r[0] && offset_of!(Region, kind) == r[1]);
    assert!(offset_of!(Region, parent) == r[2] && offset_of!(Region, first_line) == r[3]);
    assert!(offset_of!(Region, last_line) == r[4] && offset_of!(Region, local_index) == r[5]);
    assert!(offset_of!(Region, name) == r[6] && offset_of!(Region, symbol) == r[7]);
    assert!(offset_of!(Region, file) == r[8] && offset_of!(Region, module) == r[9]);
    assert!(offset_of!(Region, code) == r[10] && offset_of!(Region, call_file) == r[11]);
    assert!(offset_of!(Region, call_line) == r[12] && offset_of!(Region, call_column) == r[13]);
    assert!(offset_of!(Region, source_cell) == r[14] && offset_of!(Region, flags) == r[15]);
    assert!(size_of::<Module>() == layout::MODULE_SIZE);
    let m = layout::MODULE_FIELDS;
    assert!(offset_of!(Module, abi_version) == m[0] && offset_of!(Module, region_count) == m[1]);
    assert!(offset_of!(Module, regions) == m[2] && offset_of!(Module, module_name) == m[3]);
    assert!(offset_of!(Module, instrumentation) == m[4] && offset_of!(Module, line_shift) == m[5]);
    assert!(offset_of!(Module, slot) == m[6] && offset_of!(Module, source_cells) == m[7]);
};

/// `struct kage_candidate`, hierarchical critical path analysis (docs/hcpa.md): a source of
/// a timestamp, `slot`'s time plus `offset` (the cost of the instructions folded between
/// it and the value computed). `slot` [`NONE`] is a constant: time 0, plus `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Candidate {
    pub slot: u32,
    pub offset: u32,
}

/// `struct kage_loop_level`: one loop of a selected nest (16 bytes). A nest's levels are
/// in pre-order: level 0 is its outermost loop, every level after its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct LoopLevel {
    /// The index of the enclosing loop's level; [`NONE`] for level 0.
    pub parent: u32,
    /// 0 for the outermost loop, its parent's depth + 1 otherwise.
    pub depth: u32,
    /// The loop's first and last source line (0 = unknown).
    pub first_line: u32,
    pub last_line: u32,
}

/// `struct kage_nest`: a loop nest the build selected and versioned (`KAGE_TOOL=loops`,
/// docs/abi.md "Loop nests"): its levels, where it is in the source, and what the program
/// counts itself once sampling is over (48 bytes).
#[repr(C)]
pub struct Nest {
    /// Written by the runtime when it first sees the nest; [`NONE`] before.
    pub global_id: u32,
    pub level_count: u32,
    /// `level_count` levels.
    pub levels: *const LoopLevel,
    /// The function whose source holds the nest (demangled), "" when unknown.
    pub function: *const c_char,
    /// The source file, absolute where known, "" when unknown.
    pub file: *const c_char,
    /// A [`loops::Selection`].
    pub selected_by: u32,
    /// Written by the runtime: 1 once the nest's sampled entries are taken (entries then
    /// skip the runtime and count into `unsampled`), 0 while sampling goes on. Read by the
    /// program with relaxed atomic loads.
    pub sampling_over: u32,
    /// `1 + level_count` counters the program adds to (relaxed atomic adds) for the entries
    /// that skipped the runtime: entries, then each level's iterations.
    pub unsampled: *mut u64,
    /// The memory instructions the instrumented version reports (`__kage_loops_access`):
    /// 0 and null unless the build is for interpolation or dependences.
    pub access_count: u32,
    /// The nest's scalar variables, as the build classified them per level.
    pub scalar_count: u32,
    pub accesses: *const NestAccess,
    pub scalars: *const NestScalar,
}

/// `struct kage_nest_access`: a memory instruction of a selected nest (32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct NestAccess {
    /// The innermost level around it.
    pub level: u32,
    /// 1: it writes (a store, an atomic read-modify-write); 0: it reads.
    pub writes: u32,
    /// Bytes accessed.
    pub size: u32,
    pub line: u32,
    pub column: u32,
    pub reserved: u32,
    /// The variable whose memory it reaches (debug information, or a global's name); null
    /// when unknown.
    pub name: *const c_char,
}

/// `struct kage_nest_scalar`: a scalar variable (a stack slot the optimiser keeps in a
/// register) that a level of a selected nest writes, and what it is to that level (32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct NestScalar {
    pub level: u32,
    /// A [`loops::ScalarKind`].
    pub kind: u32,
    /// Where it is written in the level (its first store), 0 when unknown.
    pub line: u32,
    /// For a reduction, its operator as an ASCII character (`+`, `*`, `&`, `|`, `^`).
    pub operator: u32,
    /// For an induction or linear variable, its step per iteration (bytes for a pointer).
    pub step: i64,
    /// Its source name (debug information); null when unknown.
    pub name: *const c_char,
}

pub mod nest_layout {
    pub const LEVEL_SIZE: usize = 16;
    pub const NEST_SIZE: usize = 72;
    pub const ACCESS_SIZE: usize = 32;
    pub const SCALAR_SIZE: usize = 32;
    /// `global_id, level_count` (i32), `levels, function, file` (pointers), `selected_by,
    /// sampling_over` (i32), `unsampled` (pointer), `access_count, scalar_count` (i32),
    /// `accesses, scalars` (pointers).
    pub const NEST_FIELDS: [usize; 12] = [0, 4, 8, 16, 24, 32, 36, 40, 48, 52, 56, 64];
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<LoopLevel>() == nest_layout::LEVEL_SIZE);
    assert!(size_of::<Nest>() == nest_layout::NEST_SIZE);
    let f = nest_layout::NEST_FIELDS;
    assert!(offset_of!(Nest, global_id) == f[0] && offset_of!(Nest, level_count) == f[1]);
    assert!(offset_of!(Nest, levels) == f[2] && offset_of!(Nest, function) == f[3]);
    assert!(offset_of!(Nest, file) == f[4] && offset_of!(Nest, selected_by) == f[5]);
    assert!(offset_of!(Nest, sampling_over) == f[6] && offset_of!(Nest, unsampled) == f[7]);
    assert!(offset_of!(Nest, access_count) == f[8] && offset_of!(Nest, scalar_count) == f[9]);
    assert!(offset_of!(Nest, accesses) == f[10] && offset_of!(Nest, scalars) == f[11]);
    assert!(size_of::<NestAccess>() == nest_layout::ACCESS_SIZE);
    assert!(size_of::<NestScalar>() == nest_layout::SCALAR_SIZE);
};

/// `struct kage_select_version`: one version of a versioned loop nest, a case of its
/// `#pragma kage versions` switch (40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct SelectVersion {
    /// The case's value in the switch.
    pub case_value: i64,
    /// The outermost loop's step, in values of its iterator (negative when it counts down).
    pub step: i64,
    /// The outermost loop's first and last source line (0 = unknown).
    pub first_line: u32,
    pub last_line: u32,
    /// [`select::SIGNED`], [`select::INCLUSIVE`].
    pub flags: u32,
    pub reserved: u32,
    /// The version's name from the pragma, null when it has none.
    pub name: *const c_char,
}

/// `struct kage_versioned_nest`: a loop nest written in several versions (`#pragma kage
/// versions`, docs/abi.md "Versioned nests"), whose chunks of outermost iterations the
/// runtime gives to the version it measures fastest (40 bytes; writable: the runtime writes
/// `global_id`).
#[repr(C)]
pub struct VersionedNest {
    /// Written by the runtime when it first sees the nest; [`NONE`] before.
    pub global_id: u32,
    pub version_count: u32,
    /// `version_count` versions, in the switch's order.
    pub versions: *const SelectVersion,
    /// The function whose source holds the switch (demangled), "" when unknown.
    pub function: *const c_char,
    /// The source file, absolute where known, "" when unknown.
    pub file: *const c_char,
    /// The line of the switch.
    pub line: u32,
    pub reserved: u32,
}

/// `struct kage_select_state`: one entry of a versioned nest, on the stack of the function
/// that holds it (512 bytes, align 8). The code and the runtime share the first 64 bytes;
/// the rest is the runtime's.
#[repr(C)]
pub struct SelectState {
    /// Runtime: how many iterator values the next chunk may cover.
    pub span: i64,
    /// Code: where the chunk began (the version's own initial value for the entry's first
    /// chunk, `lo` as the runtime left it after); runtime: where the next chunk begins.
    pub lo: i64,
    /// Code: the chunk's bound, `lo + span` (or `lo - span` counting down), saturated; the
    /// outermost loop goes on while its own test holds and its iterator is short of it.
    pub hi: i64,
    /// Code: the iterator's value when the loop stopped.
    pub at: i64,
    /// Code: the other operand of the loop's own test when it stopped.
    pub bound: i64,
    /// Code: the running version's own initial value of the iterator.
    pub init: i64,
    /// Runtime: the index (into `versions`) of the version that runs the next chunk.
    pub version: u32,
    /// Code: 1 when the loop stopped at `hi` with its own test still true (more to do).
    pub more: u32,
    /// Runtime: 1 once a chunk has run (the next begins at `lo`).
    pub resume: u32,
    pub reserved: u32,
    /// The runtime's own.
    pub runtime: [u64; 56],
}

/// Versioned loop nests (`#pragma kage versions`, `KAGE_TOOL=select`).
pub mod select {
    /// The string the pragma plugin marks a versions switch with (`__builtin_annotation`);
    /// the names the pragma gives follow it after a `:`, separated by commas.
    pub const MARK: &str = "kage.versions";
    /// `kage_select_version.flags`: the loop's test compares signed values.
    pub const SIGNED: u32 = 1;
    /// `kage_select_version.flags`: the loop's test includes its bound (`<=`, `>=`).
    pub const INCLUSIVE: u32 = 2;
    /// The most versions a nest may have.
    pub const MAX_VERSIONS: usize = 16;
    pub const VERSION_SIZE: usize = 40;
    pub const NEST_SIZE: usize = 40;
    pub const STATE_SIZE: usize = 512;
    /// Byte offsets of `span, lo, hi, at, bound, init` (i64), `version, more, resume` (i32)
    /// in `struct kage_select_state`.
    pub const STATE_FIELDS: [usize; 9] = [0, 8, 16, 24, 32, 40, 48, 52, 56];
    /// A span with no bound: the chunk runs to the loop's own end.
    pub const UNBOUNDED: i64 = i64::MAX;
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<SelectVersion>() == select::VERSION_SIZE);
    assert!(size_of::<VersionedNest>() == select::NEST_SIZE);
    assert!(size_of::<SelectState>() == select::STATE_SIZE);
    let f = select::STATE_FIELDS;
    assert!(offset_of!(SelectState, span) == f[0] && offset_of!(SelectState, lo) == f[1]);
    assert!(offset_of!(SelectState, hi) == f[2] && offset_of!(SelectState, at) == f[3]);
    assert!(offset_of!(SelectState, bound) == f[4] && offset_of!(SelectState, init) == f[5]);
    assert!(offset_of!(SelectState, version) == f[6] && offset_of!(SelectState, more) == f[7]);
    assert!(offset_of!(SelectState, resume) == f[8]);
    assert!(offset_of!(VersionedNest, versions) == 8 && offset_of!(VersionedNest, line) == 32);
    assert!(offset_of!(SelectVersion, flags) == 24 && offset_of!(SelectVersion, name) == 32);
};

/// Loop nests (`KAGE_TOOL=loops`): how a nest is selected, and the decision protocol
/// between a nest's versions and the runtime (docs/abi.md, "Loop nests").
pub mod loops {
    /// Build time: the loops to select by source line, `file.c:42,other.c:7`.
    pub const LOOPS_VARIABLE: &str = "KAGE_LOOPS";

    /// How a nest was selected (`kage_nest.selected_by`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[repr(u32)]
    pub enum Selection {
        /// A `file:line` of `KAGE_LOOPS`.
        Line = 0,
        /// `#pragma kage profile`.
        Pragma = 1,
        /// `KAGE_LOOPS=@report.json`: one of the hottest loops of a count report.
        Report = 2,
    }

    /// What a scalar variable is to a loop level (`kage_nest_scalar.kind`), as OpenMP would
    /// declare it to run the level's iterations in parallel.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[repr(u32)]
    pub enum ScalarKind {
        /// The level's own iterator (private to each iteration, no clause needed).
        Induction = 0,
        /// Written before it is read in every iteration, and not read after the loop:
        /// `private`.
        Private = 1,
        /// As `Private`, but read after the loop: `lastprivate`.
        LastPrivate = 2,
        /// Only combined with itself by one associative operator: `reduction(op:x)`.
        Reduction = 3,
        /// Stepped by a constant once in every iteration: `linear(x:step)`.
        Linear = 4,
        /// Read in an iteration before that iteration writes it: a dependence the level
        /// carries from one iteration to the next.
        Carried = 5,
        /// Not a scalar: a call in the level to a function whose memory accesses the
        /// instrumented version does not see (`name` is the callee, null for an indirect
        /// call); the level is not proved to carry no dependence.
        Call = 6,
        /// Not a scalar: a stack array or structure whose address never escapes (not
        /// instrumented: the optimiser keeps it apart from memory) that the level writes;
        /// the level is not proved to carry no dependence.
        LocalArray = 7,
    }

    impl ScalarKind {
        pub const fn from_u32(value: u32) -> Option<ScalarKind> {
            Some(match value {
                0 => ScalarKind::Induction,
                1 => ScalarKind::Private,
                2 => ScalarKind::LastPrivate,
                3 => ScalarKind::Reduction,
                4 => ScalarKind::Linear,
                5 => ScalarKind::Carried,
                6 => ScalarKind::Call,
                7 => ScalarKind::LocalArray,
                _ => return None,
            })
        }
    }

    /// The versions of a nest: the program's own code, optimised as it asked.
    pub const ORIGINAL: u64 = 0;
    /// The version that reports every iteration to the runtime (kept from vectorisation
    /// and unrolling: one call per source iteration).
    pub const INSTRUMENTED: u64 = 1;
    /// Decision bit: the enclosing levels decide again at their next iteration (a level
    /// left the version its enclosing iteration runs in).
    pub const RESYNC: u64 = 2;
    /// A decision's chunk length is its bits from here up.
    pub const CHUNK_SHIFT: u32 = 2;
    /// The chunk length that means "to the end of this entry of the loop".
    pub const UNBOUNDED: u64 = u64::MAX >> CHUNK_SHIFT;
    /// The chunk end that makes the next iteration ask for a decision.
    pub const DECIDE_NOW: u64 = 0;
    /// The chunk end that never asks (the virtual iterator never reaches it).
    pub const NEVER: u64 = u64::MAX;

    /// `__kage_loops_decide`'s result: run `version` for `chunk` iterations (or
    /// [`UNBOUNDED`]), telling the enclosing levels to decide again when `resync`.
    pub const fn decision(version: u64, resync: bool, chunk: u64) -> u64 {
        let chunk = if chunk > UNBOUNDED { UNBOUNDED } else { chunk };
        (chunk << CHUNK_SHIFT) | if resync { RESYNC } else { 0 } | (version & 1)
    }

    /// A decision's version, resync flag and chunk length.
    pub const fn decode(decision: u64) -> (u64, bool, u64) {
        (
            decision & 1,
            decision & RESYNC != 0,
            decision >> CHUNK_SHIFT,
        )
    }

    /// The chunk end a decision taken at virtual iterator `vi` sets.
    pub const fn chunk_end(vi: u64, decision: u64) -> u64 {
        let chunk = decision >> CHUNK_SHIFT;
        if chunk == UNBOUNDED {
            NEVER
        } else {
            vi.saturating_add(chunk)
        }
    }
}

/// `enum kage_instrumentation`: what a module's code reports, chosen at build time
/// (`KAGE_TOOL`). Which runtime tools can read it is [`Instrumentation::only_tool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Instrumentation {
    /// Region hooks and a call per access: works with every runtime tool
    /// (`KAGE_TOOL=count-calls`).
    Calls = 0,
    /// Inline working-set marking, budget checks per segment, no region hooks.
    WorkingSet = 1,
    /// As `WorkingSet`, plus a `__kage_ws_trace` call before every access (tests only).
    WorkingSetTrace = 2,
    /// The region hooks of `Calls`, accesses reported in groups (`__kage_fp_range`,
    /// `__kage_fp_strided`) and counted inline: the footprint tool only.
    Footprint = 3,
    /// The region hooks of `Calls` and the timestamp calls of hierarchical critical path
    /// analysis (`__kage_hcpa_*`, docs/hcpa.md): the hcpa tool only.
    Hcpa = 4,
    /// Selected loop nests versioned (original and instrumented), their decision calls
    /// (`__kage_loops_*`); nothing else instrumented: the loops tool only.
    Loops = 5,
    /// As `Loops`, plus, in the instrumented version, a call per memory access
    /// (`__kage_loops_access`) and per inner loop's end (`__kage_loops_trip`): the interpolate
    /// tool only.
    Interpolate = 6,
    /// The code of `Interpolate`, for the dependences tool.
    Dependences = 7,
    /// `#pragma kage versions` switches made into versioned nests whose chunks go to the
    /// fastest version (`__kage_select_*`); nothing else instrumented: the select tool only.
    Select = 8,
    /// The region hooks of `Calls`, each segment's loads, stores and bytes added inline to the
    /// thread's `__kage_count` (docs/abi.md, "Count instrumentation"): the count tool only.
    Counts = 9,
}

impl Instrumentation {
    pub const ALL: [Instrumentation; 10] = [
        Instrumentation::Calls,
        Instrumentation::WorkingSet,
        Instrumentation::WorkingSetTrace,
        Instrumentation::Footprint,
        Instrumentation::Hcpa,
        Instrumentation::Loops,
        Instrumentation::Interpolate,
        Instrumentation::Dependences,
        Instrumentation::Select,
        Instrumentation::Counts,
    ];

    /// The value of `kage_module.instrumentation`.
    pub const fn value(self) -> u32 {
        self as u32
    }

    /// The instrumentation a table's field holds, if it is one.
    pub const fn from_u32(value: u32) -> Option<Instrumentation> {
        match value {
            0 => Some(Instrumentation::Calls),
            1 => Some(Instrumentation::WorkingSet),
            2 => Some(Instrumentation::WorkingSetTrace),
            3 => Some(Instrumentation::Footprint),
            4 => Some(Instrumentation::Hcpa),
            5 => Some(Instrumentation::Loops),
            6 => Some(Instrumentation::Interpolate),
            7 => Some(Instrumentation::Dependences),
            8 => Some(Instrumentation::Select),
            9 => Some(Instrumentation::Counts),
            _ => None,
        }
    }

    /// The one runtime tool (`tool=`) that understands this instrumentation; `None` when
    /// every tool does.
    pub const fn only_tool(self) -> Option<&'static str> {
        match self {
            Instrumentation::Calls => None,
            Instrumentation::WorkingSet | Instrumentation::WorkingSetTrace => Some("working-set"),
            Instrumentation::Footprint => Some("footprint"),
            Instrumentation::Hcpa => Some("hcpa"),
            Instrumentation::Loops => Some("loops"),
            Instrumentation::Interpolate => Some("interpolate"),
            Instrumentation::Dependences => Some("dependences"),
            Instrumentation::Select => Some("select"),
            Instrumentation::Counts => Some("count"),
        }
    }

    /// Whether the build versions selected loop nests (docs/abi.md, "Loop nests").
    pub const fn versions_loops(self) -> bool {
        matches!(
            self,
            Instrumentation::Loops | Instrumentation::Interpolate | Instrumentation::Dependences
        )
    }

    /// Whether the build reads `#pragma kage` (the plugin) and runs the early pass: loop
    /// nests to profile, or versioned nests to select from.
    pub const fn reads_pragmas(self) -> bool {
        self.versions_loops() || matches!(self, Instrumentation::Select)
    }

    /// Whether the instrumented versions report memory accesses and inner trip counts.
    pub const fn reports_loop_accesses(self) -> bool {
        matches!(
            self,
            Instrumentation::Interpolate | Instrumentation::Dependences
        )
    }

    /// Whether the build has a line size (`kage_module.line_shift`, `KAGE_WS_LINE_SIZE`).
    pub const fn has_line_size(self) -> bool {
        matches!(
            self,
            Instrumentation::WorkingSet | Instrumentation::WorkingSetTrace
        )
    }
}

/// Footprint instrumentation's region flags (docs/abi.md, "Footprint instrumentation").
pub mod footprint {
    /// [`crate::Region::flags`] bits 8 to 15 of a leaf inlined call counted with the inlined
    /// calls of its chain: how many regions follow it in the module's array (its chain, in
    /// pre-order, the leaf last), whose instances and footprints are its own.
    pub const CHAIN_SHIFT: u32 = 8;
    pub const CHAIN_MASK: u32 = 0xff << CHAIN_SHIFT;

    /// [`crate::Region::flags`] bit of a leaf, an inlined call (the outermost call of its
    /// chain, if it has one) or a loop: its instances are counted by the footprint tool
    /// from its leaf hooks, and a region inside it that is a leaf too (inside its body, for
    /// a loop) has it as its parent leaf.
    pub const LEAF: u32 = 1 << 16;

    /// [`crate::Region::flags`] bit of a leaf inlined call (with [`LEAF`]) whose every
    /// instance is the one range it reports: it has no leaf hooks, its instances are counted
    /// by `__kage_fp_leaf_range` (docs/abi.md, "One-range leaves").
    pub const ONE_RANGE: u32 = 1 << 17;

    /// How many regions follow a region with `flags` in its chain.
    pub const fn chain_length(flags: u32) -> u32 {
        (flags & CHAIN_MASK) >> CHAIN_SHIFT
    }
}

/// Count instrumentation's per-thread data (docs/abi.md, "Count instrumentation"): what
/// instrumented code reads and writes inline, laid out as data for both sides.
pub mod count {
    /// A region's record, `WORDS` `u64`s; a module's records are an array indexed by
    /// `local_index`: instances, then the accesses made while it was the innermost region
    /// (loads, stores, bytes read, bytes written), then the inclusive accesses of its closed
    /// outermost instances minus the thread's totals at the start of its open outermost
    /// instance (if any), then `DEPTH`: the open instances of its source region on the
    /// thread, or, for a region with copies in its module ([`crate::Region::source_cell`]),
    /// 1 while its instance is the source region's outermost open one (it took the
    /// totals), else 0. "Outermost" is per source region: an instance of a copy opened
    /// inside another copy's is not, and adds no inclusive counts. A region counted in
    /// locals ([`IN_LOCALS`]) adds none either: the report derives them, and its inclusive
    /// counts hold a correction (minus what its instances made inside another copy of its
    /// source region, which counts it).
    pub const INSTANCES: usize = 0;
    pub const SELF: usize = 1;
    pub const INCLUSIVE: usize = 5;
    pub const DEPTH: usize = 9;
    pub const WORDS: usize = 10;
    /// [`crate::Region::flags`]: a count build keeps the region's counts in locals (a
    /// promoted tree's region, docs/abi.md): the report derives its inclusive counts.
    pub const IN_LOCALS: u32 = 1;

    /// `u64`s in a module's records: a record per region, then a cell per source region
    /// with copies ([`crate::Module::source_cells`]) counting its open instances.
    pub const fn record_words(region_count: u32, source_cells: u32) -> usize {
        region_count as usize * WORDS + source_cells as usize
    }

    /// Byte offset, in a module's records, of the word counting the open instances of
    /// region `local_index`'s source region: its record's `DEPTH` when `source_cell` is
    /// [`crate::NONE`], else that cell after the records.
    pub const fn open_offset(region_count: u32, local_index: u32, source_cell: u32) -> usize {
        if source_cell == crate::NONE {
            (local_index as usize * WORDS + DEPTH) * 8
        } else {
            (region_count as usize * WORDS + source_cell as usize) * 8
        }
    }
    /// `__kage_count_thread`'s fields (byte offsets): the directory of record arrays
    /// (pointer, indexed by `kage_module.slot`; a reset empties it), the open activations
    /// (pointer), their number and capacity (`u32`s), and the runtime's own word (which of
    /// the thread's contexts they are).
    pub const RECORDS: usize = 0;
    pub const ACTIVATIONS: usize = 8;
    pub const TOP: usize = 16;
    pub const CAPACITY: usize = 20;
    pub const OWNER: usize = 24;
    /// Its size in `u64`s.
    pub const THREAD_WORDS: usize = 4;
    /// An open function activation: the table entry of its innermost open region, then its
    /// frame address (`llvm.addressofreturnaddress`).
    pub const CURRENT: usize = 0;
    pub const FRAME: usize = 8;
    pub const ACTIVATION_SIZE: usize = 16;
    /// The module slots a thread's directory has room for.
    pub const MAX_MODULES: usize = 1 << 16;
}

/// The environment variable that names the tool a program is built for.
pub const TOOL_VARIABLE: &str = "KAGE_TOOL";
/// With `KAGE_TOOL=working-set`, `1` selects [`Instrumentation::WorkingSetTrace`].
pub const TRACE_VARIABLE: &str = "KAGE_WS_TRACE";
/// With `KAGE_TOOL=working-set`: the cache line size built into the marks, in bytes.
pub const LINE_SIZE_VARIABLE: &str = "KAGE_WS_LINE_SIZE";
/// `0` when compiling: calls the optimiser inlined are not regions of their own (their code
/// counts as their caller's, their loops are named at the call's line), as before inlined
/// regions were reported; kept to measure what reporting them costs (`bench/README.md`).
pub const INLINED_REGIONS_VARIABLE: &str = "KAGE_INLINED_REGIONS";
/// `1` when compiling code that goes into a shared library: set by `kage-cc` on a call that
/// compiles sources and links them with `-shared` or `-r`, which position-independent
/// executable code (`-fPIE`, the default) may be, and which may not reach the runtime's
/// thread-locals at an offset fixed when linking (docs/abi.md).
pub const SHARED_LIBRARY_CODE_VARIABLE: &str = "KAGE_SHARED_LIBRARY_CODE";
/// The line size when [`LINE_SIZE_VARIABLE`] (or the runtime's `line_size=`) is unset.
pub const DEFAULT_LINE_SIZE: u64 = 64;
/// The line sizes a build and the runtime accept: powers of two in this range.
pub const LINE_SIZES: core::ops::RangeInclusive<u64> = 16..=4096;

/// Where the working-set shadow starts: line `L`'s shadow byte is at this address plus
/// `L`. A constant of the ABI, so that a mark is a shift and a byte test with the base in
/// the instruction's displacement (it fits in 32 bits), as AddressSanitizer's shadow offset
/// on x86-64 (the same address). The runtime reserves one byte per 16-byte line of the
/// lower 2^47 bytes from here at start-up, or stops a program with working-set marks with
/// an error. The range lies between a non-PIE executable's image and the addresses the
/// kernel gives PIE executables, their heaps, libraries and stacks.
pub const WS_SHADOW_BASE: u64 = 0x7fff_8000;

/// Whether `size` is a line size Kage accepts.
pub fn is_line_size(size: u64) -> bool {
    size.is_power_of_two() && LINE_SIZES.start() <= &size && &size <= LINE_SIZES.end()
}

/// A `KAGE_TOOL` value and the instrumentation it builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildTool {
    pub name: &'static str,
    pub instrumentation: Instrumentation,
}

/// Every `KAGE_TOOL` value (unset and empty mean `count`). `KAGE_WS_TRACE=1` turns
/// `working-set` into [`Instrumentation::WorkingSetTrace`].
pub const BUILD_TOOLS: &[BuildTool] = &[
    BuildTool {
        name: "count",
        instrumentation: Instrumentation::Counts,
    },
    BuildTool {
        name: "count-calls",
        instrumentation: Instrumentation::Calls,
    },
    BuildTool {
        name: "working-set",
        instrumentation: Instrumentation::WorkingSet,
    },
    BuildTool {
        name: "footprint",
        instrumentation: Instrumentation::Footprint,
    },
    BuildTool {
        name: "hcpa",
        instrumentation: Instrumentation::Hcpa,
    },
    BuildTool {
        name: "loops",
        instrumentation: Instrumentation::Loops,
    },
    BuildTool {
        name: "interpolate",
        instrumentation: Instrumentation::Interpolate,
    },
    BuildTool {
        name: "dependences",
        instrumentation: Instrumentation::Dependences,
    },
    BuildTool {
        name: "select",
        instrumentation: Instrumentation::Select,
    },
];

/// The C type of a parameter, a return value or a global.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CType {
    Void,
    /// Any pointer (`const void *`, `struct kage_region *`...).
    Ptr,
    I32,
    I64,
    /// `uint64_t[N]`.
    I64Array(usize),
}

/// How a function is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallingConvention {
    C,
    /// LLVM's `preserve_most` on x86-64 (the C convention elsewhere): the callee saves every
    /// general-purpose register but r11.
    PreserveMostOnX86_64,
}

/// A symbol shared by instrumented code and the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symbol {
    /// A runtime function that instrumented code calls.
    Function {
        name: &'static str,
        params: &'static [CType],
        returns: CType,
        convention: CallingConvention,
        /// Which instrumentations call it.
        called_by: &'static [Instrumentation],
    },
    /// A runtime global that instrumented code reads or updates inline.
    Global {
        name: &'static str,
        ty: CType,
        /// A `__thread` variable (local-exec in code for an executable, else initial-exec).
        thread_local: bool,
        used_by: &'static [Instrumentation],
    },
}

impl Symbol {
    pub const fn name(&self) -> &'static str {
        match self {
            Symbol::Function { name, .. } | Symbol::Global { name, .. } => name,
        }
    }
}

/// Hierarchical critical path analysis: the one cost table (docs/hcpa.md, "Costs").
pub mod hcpa {
    /// A class of instructions with one cost.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CostClass {
        /// Its name in `KAGE_HCPA_COSTS` (`load=4,div=20`).
        pub name: &'static str,
        pub default: u32,
        pub help: &'static str,
    }

    /// The variable the build reads cost overrides from.
    pub const COSTS_VARIABLE: &str = "KAGE_HCPA_COSTS";
    /// `0` builds without folding: every computed value gets its own slot and `ts` call (the
    /// same results, slower; tests compare the two).
    pub const FOLD_VARIABLE: &str = "KAGE_HCPA_FOLD";
    /// For measuring what the analysis costs, not for answers: a list of kinds of timestamp
    /// calls the build leaves out (`ts`: `ts`, `phi` and `hoist`; `work`; `memory`: `load`,
    /// `store` and `mem`), separated by `,` or `+`. The program's times are then wrong; the
    /// build says so.
    pub const OMIT_VARIABLE: &str = "KAGE_HCPA_OMIT";
    /// `0` builds without static leaves (docs/hcpa.md, "Static leaves"): every inlined call
    /// keeps its region hooks (the same results, slower; tests compare the two).
    pub const LEAVES_VARIABLE: &str = "KAGE_HCPA_LEAVES";

    pub const SIMPLE: CostClass = CostClass {
        name: "simple",
        default: 1,
        help: "integer add, sub, logic, shifts, compares, select, casts that are not free",
    };
    pub const MUL: CostClass = CostClass {
        name: "mul",
        default: 2,
        help: "integer multiply",
    };
    pub const DIV: CostClass = CostClass {
        name: "div",
        default: 10,
        help: "integer division and remainder",
    };
    pub const FADD: CostClass = CostClass {
        name: "fadd",
        default: 2,
        help: "floating add, sub, compare, negation, conversions",
    };
    pub const FMUL: CostClass = CostClass {
        name: "fmul",
        default: 5,
        help: "floating multiply, fused multiply-add",
    };
    pub const FDIV: CostClass = CostClass {
        name: "fdiv",
        default: 20,
        help: "floating division, remainder, square root",
    };
    pub const LOAD: CostClass = CostClass {
        name: "load",
        default: 4,
        help: "each load",
    };
    pub const STORE: CostClass = CostClass {
        name: "store",
        default: 1,
        help: "each store",
    };
    pub const CALL: CostClass = CostClass {
        name: "call",
        default: 10,
        help: "a call into code that is not instrumented",
    };
    pub const MEM8: CostClass = CostClass {
        name: "mem8",
        default: 1,
        help: "per 8 bytes (rounded up) of memcpy, memmove, memset",
    };

    /// Every class; anything else (phi, getelementptr, free casts, alloca, branches, calls
    /// to instrumented code, debug and lifetime intrinsics) costs 0.
    pub const COSTS: [CostClass; 10] =
        [SIMPLE, MUL, DIV, FADD, FMUL, FDIV, LOAD, STORE, CALL, MEM8];
}

/// Every symbol of the runtime that instrumented code uses, with its C signature.
/// The function-pointer types beside each are what the runtime's definitions are checked
/// against at compile time (`const _: symbols::FuncEnter = __kage_func_enter;`).
pub mod symbols {
    use super::CType::{self, *};
    use super::CallingConvention::*;
    use super::Instrumentation::{self, *};
    use super::Symbol;
    use super::{Candidate, Module, Nest, Region, SelectState, VersionedNest};
    use core::ffi::c_void;

    const fn function(
        name: &'static str,
        params: &'static [CType],
        called_by: &'static [Instrumentation],
    ) -> Symbol {
        Symbol::Function {
            name,
            params,
            returns: Void,
            convention: C,
            called_by,
        }
    }

    const REGION_HOOKS: &[Instrumentation] = &[Calls, Footprint, Hcpa];
    const EVERY: &[Instrumentation] = &[
        Calls,
        Counts,
        WorkingSet,
        WorkingSetTrace,
        Footprint,
        Hcpa,
        Loops,
        Interpolate,
        Dependences,
        Select,
    ];
    const NESTS: &[Instrumentation] = &[Loops, Interpolate, Dependences];
    const NEST_ACCESSES: &[Instrumentation] = &[Interpolate, Dependences];
    const WORKING_SET: &[Instrumentation] = &[WorkingSet, WorkingSetTrace];
    /// The builds that see the memory effects of C library functions (docs/abi.md, "C library
    /// functions").
    pub const LIBRARY_EFFECTS: &[Instrumentation] =
        &[Calls, Counts, WorkingSet, WorkingSetTrace, Footprint];

    /// `void __kage_register_module(struct kage_module *m)`.
    pub const REGISTER_MODULE: Symbol = function("__kage_register_module", &[Ptr], EVERY);
    pub type RegisterModule = unsafe extern "C" fn(*mut Module);
    /// `void __kage_unregister_module(struct kage_module *m)`, from the module's destructor
    /// (a `dlclose` that unloads it; the program's end).
    pub const UNREGISTER_MODULE: Symbol = function("__kage_unregister_module", &[Ptr], EVERY);

    /// `void __kage_func_enter(struct kage_region *fn, const void *frame)`.
    pub const FUNC_ENTER: Symbol = function("__kage_func_enter", &[Ptr, Ptr], REGION_HOOKS);
    pub type FuncEnter = unsafe extern "C" fn(*mut Region, *const c_void);
    /// `void __kage_func_exit(struct kage_region *fn)`.
    pub const FUNC_EXIT: Symbol = function("__kage_func_exit", &[Ptr], REGION_HOOKS);
    /// `void __kage_loop_iter(struct kage_region *loop)`.
    pub const LOOP_ITER: Symbol = function("__kage_loop_iter", &[Ptr], REGION_HOOKS);
    /// `void __kage_settle(struct kage_region *r)`.
    pub const SETTLE: Symbol = function("__kage_settle", &[Ptr], REGION_HOOKS);
    /// `void __kage_resume_at(struct kage_region *r, const void *frame)`.
    pub const RESUME_AT: Symbol = function("__kage_resume_at", &[Ptr, Ptr], REGION_HOOKS);
    /// The type of every region hook that takes only its region.
    pub type RegionHook = unsafe extern "C" fn(*mut Region);
    /// `__thread const void *__kage_innermost`: the region entry of the thread's innermost
    /// open region as of its last region event (null before it): a `__kage_settle` to it
    /// would change nothing, and instrumented code leaves it out (relaxed atomic load).
    pub const INNERMOST: Symbol = Symbol::Global {
        name: "__kage_innermost",
        ty: Ptr,
        thread_local: true,
        used_by: REGION_HOOKS,
    };

    /// `void __kage_load(const void *addr, uint64_t size)`.
    pub const LOAD: Symbol = function("__kage_load", &[Ptr, I64], &[Calls]);
    /// `void __kage_store(const void *addr, uint64_t size)`.
    pub const STORE: Symbol = function("__kage_store", &[Ptr, I64], &[Calls]);
    pub type Access = unsafe extern "C" fn(*const c_void, u64);
    /// `void __kage_cmpxchg(const void *addr, uint64_t size, uint32_t stored)`.
    pub const CMPXCHG: Symbol = function("__kage_cmpxchg", &[Ptr, I64, I32], REGION_HOOKS);
    pub type CmpXchg = unsafe extern "C" fn(*const c_void, u64, u32);

    /// `uint64_t __kage_library_compared(const void *a, const void *b, uint64_t n, uint32_t
    /// nul)`: how many bytes a comparison of `a` and `b` of at most `n` bytes reads: up to and
    /// including the first that differs or, when `nul` is not 0, the first NUL (with `a == b`,
    /// a string's length and its NUL); 0 when either is null. Called after a C library function whose result does
    /// not say how much it read (docs/abi.md, "C library functions").
    pub const LIBRARY_COMPARED: Symbol = Symbol::Function {
        name: "__kage_library_compared",
        params: &[Ptr, Ptr, I64, I32],
        returns: I64,
        convention: C,
        called_by: LIBRARY_EFFECTS,
    };
    pub type LibraryCompared = unsafe extern "C" fn(*const c_void, *const c_void, u64, u32) -> u64;

    /// `__thread uint64_t __kage_count[4]`: the thread's loads, stores, bytes read and bytes
    /// written so far, which count instrumentation adds each segment's to inline (relaxed
    /// atomic loads and stores: other threads only read them).
    pub const COUNT_TOTALS: Symbol = Symbol::Global {
        name: "__kage_count",
        ty: I64Array(4),
        thread_local: true,
        used_by: &[Counts],
    };
    /// `__thread uint64_t __kage_count_thread[4]`: the thread's records and open function
    /// activations, laid out as [`crate::count`] says.
    pub const COUNT_THREAD: Symbol = Symbol::Global {
        name: "__kage_count_thread",
        ty: I64Array(crate::count::THREAD_WORDS),
        thread_local: true,
        used_by: &[Counts],
    };
    /// `__thread const void *__kage_count_running`: the root entry of the promoted tree
    /// (counted in locals) that the thread is running (set where an instance of the root
    /// starts, cleared by its report), else null. Only a fatal signal's report reads it: the
    /// region that faulted is reported with an instance, its counts in locals lost (relaxed
    /// atomic stores).
    pub const COUNT_RUNNING: Symbol = Symbol::Global {
        name: "__kage_count_running",
        ty: Ptr,
        thread_local: true,
        used_by: &[Counts],
    };
    /// `uint64_t *__kage_count_prepare(struct kage_module *m, const void *frame)`: at a
    /// function's entry, when the inline checks fail: sets the thread up, applies a reset,
    /// makes room for one more activation and, `frame` not null, closes the activations
    /// that are not live callers of the one starting at `frame`. Returns the thread's
    /// records of `m`'s regions.
    pub const COUNT_PREPARE: Symbol = Symbol::Function {
        name: "__kage_count_prepare",
        params: &[Ptr, Ptr],
        returns: Ptr,
        convention: C,
        called_by: &[Counts],
    };
    pub type CountPrepare = unsafe extern "C" fn(*mut Module, *const c_void) -> *mut u64;
    /// `void __kage_count_unwind(uint32_t activation)`: a function returns while activations
    /// above its own remain open (left by an exception or a `longjmp` through code that is
    /// not instrumented): they are closed.
    pub const COUNT_UNWIND: Symbol = function("__kage_count_unwind", &[I32], &[Counts]);
    pub type CountUnwind = unsafe extern "C" fn(u32);
    /// `void __kage_count_resume(struct kage_region *r, uint32_t activation)`: control may
    /// have arrived from a `longjmp` or an exception (a landing pad, after a `returns_twice`
    /// call): the activations above `activation` are closed, and `r` becomes its innermost
    /// region as `__kage_settle(r)` would make it.
    pub const COUNT_RESUME: Symbol = function("__kage_count_resume", &[Ptr, I32], &[Counts]);
    pub type CountResume = unsafe extern "C" fn(*mut Region, u32);
    /// `void __kage_count_arrive(struct kage_region *r, struct kage_region *loop, uint32_t
    /// activation)`: a block whose way in could not carry its region changes: as
    /// `__kage_loop_iter(loop)` (when not null) and then `__kage_settle(r)` would.
    pub const COUNT_ARRIVE: Symbol = function("__kage_count_arrive", &[Ptr, Ptr, I32], &[Counts]);
    pub type CountArrive = unsafe extern "C" fn(*mut Region, *mut Region, u32);
    /// `uint32_t __kage_gate`: non-zero while accesses are not counted (`kage_set_enabled(0)`,
    /// or the analysis has ended); count instrumentation masks what it adds with it.
    pub const GATE: Symbol = Symbol::Global {
        name: "__kage_gate",
        ty: I32,
        thread_local: false,
        used_by: &[Counts],
    };

    /// `void __kage_fp_strided(const void *addr, uint64_t width, uint64_t stride,
    /// uint64_t count)`.
    pub const FP_STRIDED: Symbol =
        function("__kage_fp_strided", &[Ptr, I64, I64, I64], &[Footprint]);
    pub type FpStrided = unsafe extern "C" fn(*const c_void, u64, u64, u64);
    /// `void __kage_fp_range(const void *addr, uint64_t len)` (the runtime's C part).
    pub const FP_RANGE: Symbol = function("__kage_fp_range", &[Ptr, I64], &[Footprint]);
    /// `void __kage_fp_leaf_enter(struct kage_region *r, struct kage_region *parent, void
    /// *frame)` (the runtime's C part): control is in a block of the leaf `r`,
    /// inside the leaf `parent` (null: `r` is the outermost leaf of its tree), of the
    /// activation whose return address is at `frame` (docs/abi.md, "Footprint
    /// instrumentation"); a new instance unless that activation's instance of `r` is the one
    /// open.
    pub const FP_LEAF_ENTER: Symbol =
        function("__kage_fp_leaf_enter", &[Ptr, Ptr, Ptr], &[Footprint]);
    /// `void __kage_fp_leaf_end(void *frame, struct kage_region *keep, struct kage_region
    /// *keep_parent)` (the runtime's C part): the activation's open leaves that
    /// are not `keep` or a leaf around it (null: none is kept), whose block this is, have
    /// ended; `keep_parent` is the leaf around `keep` (null: none).
    pub const FP_LEAF_END: Symbol = function("__kage_fp_leaf_end", &[Ptr, Ptr, Ptr], &[Footprint]);
    /// `void __kage_fp_leaf_range(const void *addr, uint64_t len, struct kage_region *r)`
    /// (the runtime's C part): `len` bytes at `addr` are accessed, and they are the whole of
    /// an instance of the one-range leaf `r` (docs/abi.md, "One-range leaves"): the range
    /// is reported as `__kage_fp_range` reports it, and the instance counted.
    pub const FP_LEAF_RANGE: Symbol =
        function("__kage_fp_leaf_range", &[Ptr, I64, Ptr], &[Footprint]);
    /// `__thread uint64_t __kage_fp_accesses`.
    pub const FP_ACCESSES: Symbol = Symbol::Global {
        name: "__kage_fp_accesses",
        ty: I64,
        thread_local: true,
        used_by: &[Footprint],
    };

    /// `__thread int64_t __kage_ws_budget`.
    pub const WS_BUDGET: Symbol = Symbol::Global {
        name: "__kage_ws_budget",
        ty: I64,
        thread_local: true,
        used_by: WORKING_SET,
    };
    /// `void __kage_ws_mark_lines(uint64_t first_line, uint64_t last_line)`.
    pub const WS_MARK_LINES: Symbol = function("__kage_ws_mark_lines", &[I64, I64], WORKING_SET);
    pub type WsMarkLines = unsafe extern "C" fn(u64, u64);
    /// `void __kage_ws_tick(struct kage_region *innermost)`, `preserve_most` on x86-64.
    pub const WS_TICK: Symbol = Symbol::Function {
        name: "__kage_ws_tick",
        params: &[Ptr],
        returns: Void,
        convention: PreserveMostOnX86_64,
        called_by: WORKING_SET,
    };
    /// `void __kage_ws_trace(const void *addr, uint64_t size)` (mode 2 only).
    pub const WS_TRACE: Symbol = function("__kage_ws_trace", &[Ptr, I64], &[WorkingSetTrace]);

    // Hierarchical critical path analysis (docs/hcpa.md, "The instrumentation"). A `cands`
    // argument points to `n` [`Candidate`]s in constant memory; slots index the current
    // activation's shadow registers, `NONE` for none.

    /// `void __kage_hcpa_frame(uint32_t slots, const void *function)`.
    pub const HCPA_FRAME: Symbol = function("__kage_hcpa_frame", &[I32, Ptr], &[Hcpa]);
    pub type HcpaFrame = unsafe extern "C" fn(u32, *const c_void);
    /// `void __kage_hcpa_work(uint64_t cost)`.
    pub const HCPA_WORK: Symbol = function("__kage_hcpa_work", &[I64], &[Hcpa]);
    pub type HcpaWork = unsafe extern "C" fn(u64);
    /// `void __kage_hcpa_leaf(struct kage_region *r, uint32_t n, uint64_t work, uint64_t
    /// cp)`: an instance of each of the inlined calls `r[0..n]`, a static leaf `r[n - 1]`
    /// and the calls around it that hold nothing else, each the only child of the one
    /// before (docs/hcpa.md, "Static leaves"), all with the work and critical path the
    /// build computed; its block's work is `work`.
    pub const HCPA_LEAF: Symbol = function("__kage_hcpa_leaf", &[Ptr, I32, I64, I64], &[Hcpa]);
    pub type HcpaLeaf = unsafe extern "C" fn(*mut Region, u32, u64, u64);
    /// `void __kage_hcpa_ts(uint32_t dst, const struct kage_candidate *cands, uint32_t n)`.
    pub const HCPA_TS: Symbol = function("__kage_hcpa_ts", &[I32, Ptr, I32], &[Hcpa]);
    pub type HcpaTs = unsafe extern "C" fn(u32, *const Candidate, u32);
    /// `void __kage_hcpa_hoist(uint32_t dst, const struct kage_candidate *cands, uint32_t
    /// n)`: as `__kage_hcpa_ts`, without raising the critical paths.
    pub const HCPA_HOIST: Symbol = function("__kage_hcpa_hoist", &[I32, Ptr, I32], &[Hcpa]);
    /// `void __kage_hcpa_phi(uint32_t dst, uint32_t src, uint32_t offset, uint32_t cond)`.
    pub const HCPA_PHI: Symbol = function("__kage_hcpa_phi", &[I32, I32, I32, I32], &[Hcpa]);
    pub type HcpaPhi = unsafe extern "C" fn(u32, u32, u32, u32);
    /// `void __kage_hcpa_load(uint32_t dst, const void *addr, uint64_t size, uint32_t cost,
    /// const struct kage_candidate *cands, uint32_t n)`.
    pub const HCPA_LOAD: Symbol =
        function("__kage_hcpa_load", &[I32, Ptr, I64, I32, Ptr, I32], &[Hcpa]);
    pub type HcpaLoad = unsafe extern "C" fn(u32, *const c_void, u64, u32, *const Candidate, u32);
    /// `void __kage_hcpa_store(const void *addr, uint64_t size, uint32_t cost,
    /// const struct kage_candidate *cands, uint32_t n)`.
    pub const HCPA_STORE: Symbol =
        function("__kage_hcpa_store", &[Ptr, I64, I32, Ptr, I32], &[Hcpa]);
    pub type HcpaStore = unsafe extern "C" fn(*const c_void, u64, u32, *const Candidate, u32);
    /// `void __kage_hcpa_mem(const void *dst, const void *src, uint64_t len,
    /// uint32_t cost_per_8_bytes, const struct kage_candidate *cands, uint32_t n)`: `src` null
    /// for `memset`.
    pub const HCPA_MEM: Symbol =
        function("__kage_hcpa_mem", &[Ptr, Ptr, I64, I32, Ptr, I32], &[Hcpa]);
    pub type HcpaMem =
        unsafe extern "C" fn(*const c_void, *const c_void, u64, u32, *const Candidate, u32);
    /// `void __kage_hcpa_call(const void *callee)`.
    pub const HCPA_CALL: Symbol = function("__kage_hcpa_call", &[Ptr], &[Hcpa]);
    pub type HcpaCall = unsafe extern "C" fn(*const c_void);
    /// `void __kage_hcpa_arg(uint32_t index, const struct kage_candidate *cands, uint32_t n)`.
    pub const HCPA_ARG: Symbol = function("__kage_hcpa_arg", &[I32, Ptr, I32], &[Hcpa]);
    /// `void __kage_hcpa_return(const struct kage_candidate *cands, uint32_t n)`.
    pub const HCPA_RETURN: Symbol = function("__kage_hcpa_return", &[Ptr, I32], &[Hcpa]);
    pub type HcpaReturn = unsafe extern "C" fn(*const Candidate, u32);
    /// `void __kage_hcpa_result(uint32_t dst, uint32_t cost)`.
    pub const HCPA_RESULT: Symbol = function("__kage_hcpa_result", &[I32, I32], &[Hcpa]);
    pub type HcpaResult = unsafe extern "C" fn(u32, u32);

    // Loop nests (docs/abi.md, "Loop nests"): `frame` is the calling function's
    // `llvm.addressofreturnaddress` (only compared: entries of frames below it are dead).

    /// `uint64_t __kage_loops_enter(struct kage_nest *n, const void *frame)`: the nest's
    /// outermost loop is entered; returns its first chunk end ([`crate::loops::DECIDE_NOW`]
    /// or [`crate::loops::NEVER`]).
    pub const LOOPS_ENTER: Symbol = Symbol::Function {
        name: "__kage_loops_enter",
        params: &[Ptr, Ptr],
        returns: I64,
        convention: C,
        called_by: NESTS,
    };
    pub type LoopsEnter = unsafe extern "C" fn(*mut Nest, *const c_void) -> u64;
    /// `uint64_t __kage_loops_decide(struct kage_nest *n, uint32_t level, uint64_t vi)`: the
    /// level's chunk ended before iteration `vi`; returns a decision
    /// ([`crate::loops::decision`]).
    pub const LOOPS_DECIDE: Symbol = Symbol::Function {
        name: "__kage_loops_decide",
        params: &[Ptr, I32, I64],
        returns: I64,
        convention: C,
        called_by: NESTS,
    };
    pub type LoopsDecide = unsafe extern "C" fn(*mut Nest, u32, u64) -> u64;
    /// `void __kage_loops_iter(struct kage_nest *n, uint32_t level, uint64_t vi)`: iteration
    /// `vi` of the level begins in the instrumented version.
    pub const LOOPS_ITER: Symbol = function("__kage_loops_iter", &[Ptr, I32, I64], NESTS);
    pub type LoopsIter = unsafe extern "C" fn(*mut Nest, u32, u64);
    /// `void __kage_loops_exit(struct kage_nest *n, const uint64_t *iterations)`: the nest's
    /// outermost loop is left; `iterations[k]`: level k's iterations in this entry.
    pub const LOOPS_EXIT: Symbol = function("__kage_loops_exit", &[Ptr, Ptr], NESTS);
    pub type LoopsExit = unsafe extern "C" fn(*mut Nest, *const u64);
    /// `void __kage_loops_access(struct kage_nest *n, uint32_t access, const void *addr)`:
    /// the nest's memory instruction `access` (an index into its `accesses`) touches `addr`,
    /// in the instrumented version.
    pub const LOOPS_ACCESS: Symbol =
        function("__kage_loops_access", &[Ptr, I32, Ptr], NEST_ACCESSES);
    pub type LoopsAccess = unsafe extern "C" fn(*mut Nest, u32, *const c_void);
    /// `void __kage_loops_trip(struct kage_nest *n, uint32_t level, uint64_t iterations)`:
    /// an entry of the inner level `level`, made in an iteration of its enclosing level that
    /// runs instrumented, ended after `iterations` iterations.
    pub const LOOPS_TRIP: Symbol = function("__kage_loops_trip", &[Ptr, I32, I64], NEST_ACCESSES);
    pub type LoopsTrip = unsafe extern "C" fn(*mut Nest, u32, u64);

    // Versioned nests (docs/abi.md, "Versioned nests"): the runtime reads and writes the
    // entry's `struct kage_select_state`; the code runs `state->version` next.

    /// `void __kage_select_enter(struct kage_versioned_nest *n, struct kage_select_state *s)`:
    /// the switch is reached; sets the first chunk's version and span.
    pub const SELECT_ENTER: Symbol = function("__kage_select_enter", &[Ptr, Ptr], &[Select]);
    /// `void __kage_select_next(struct kage_versioned_nest *n, struct kage_select_state *s)`:
    /// a chunk stopped at its bound; sets the next chunk's version, span and start.
    pub const SELECT_NEXT: Symbol = function("__kage_select_next", &[Ptr, Ptr], &[Select]);
    /// `void __kage_select_exit(struct kage_versioned_nest *n, struct kage_select_state *s)`:
    /// the outermost loop ended (its own test, or a `break`).
    pub const SELECT_EXIT: Symbol = function("__kage_select_exit", &[Ptr, Ptr], &[Select]);
    pub type SelectCall = unsafe extern "C" fn(*mut VersionedNest, *mut SelectState);

    /// `int __kage_swapcontext(ucontext_t *oucp, const ucontext_t *ucp)`: `swapcontext`,
    /// with the calling context's regions kept for when it is resumed and `ucp`'s (a new
    /// stack for a context made anew) in force meanwhile.
    pub const SWAPCONTEXT: Symbol = Symbol::Function {
        name: "__kage_swapcontext",
        params: &[Ptr, Ptr],
        returns: I32,
        convention: C,
        called_by: EVERY,
    };
    pub type SwapContext = unsafe extern "C" fn(*mut c_void, *const c_void) -> i32;
    /// `int __kage_setcontext(const ucontext_t *ucp)`: `setcontext`, with `ucp`'s regions in
    /// force.
    pub const SETCONTEXT: Symbol = Symbol::Function {
        name: "__kage_setcontext",
        params: &[Ptr],
        returns: I32,
        convention: C,
        called_by: EVERY,
    };
    pub type SetContext = unsafe extern "C" fn(*const c_void) -> i32;
    /// `void __kage_context_made(ucontext_t *ucp)`, after `makecontext(ucp, ...)`: the
    /// context's next run starts from a new stack of regions.
    pub const CONTEXT_MADE: Symbol = function("__kage_context_made", &[Ptr], EVERY);
    pub type ContextMade = unsafe extern "C" fn(*mut c_void);

    /// Every symbol above.
    pub const ALL: &[Symbol] = &[
        REGISTER_MODULE,
        UNREGISTER_MODULE,
        SWAPCONTEXT,
        SETCONTEXT,
        CONTEXT_MADE,
        FUNC_ENTER,
        FUNC_EXIT,
        LOOP_ITER,
        SETTLE,
        RESUME_AT,
        INNERMOST,
        LOAD,
        STORE,
        CMPXCHG,
        LIBRARY_COMPARED,
        COUNT_TOTALS,
        COUNT_THREAD,
        COUNT_RUNNING,
        COUNT_PREPARE,
        COUNT_UNWIND,
        COUNT_RESUME,
        COUNT_ARRIVE,
        GATE,
        FP_STRIDED,
        FP_RANGE,
        FP_LEAF_ENTER,
        FP_LEAF_END,
        FP_LEAF_RANGE,
        FP_ACCESSES,
        WS_BUDGET,
        WS_MARK_LINES,
        WS_TICK,
        WS_TRACE,
        HCPA_FRAME,
        HCPA_WORK,
        HCPA_LEAF,
        HCPA_TS,
        HCPA_HOIST,
        HCPA_PHI,
        HCPA_LOAD,
        HCPA_STORE,
        HCPA_MEM,
        HCPA_CALL,
        HCPA_ARG,
        HCPA_RETURN,
        HCPA_RESULT,
        LOOPS_ENTER,
        LOOPS_DECIDE,
        LOOPS_ITER,
        LOOPS_EXIT,
        LOOPS_ACCESS,
        LOOPS_TRIP,
        SELECT_ENTER,
        SELECT_NEXT,
        SELECT_EXIT,
    ];

    /// The symbol called `name`, if the runtime defines one.
    pub fn find(name: &str) -> Option<&'static Symbol> {
        ALL.iter().find(|s| s.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_round_trip_and_bound_their_chunks() {
        use loops::*;
        assert_eq!(
            decode(decision(INSTRUMENTED, false, 7)),
            (INSTRUMENTED, false, 7)
        );
        assert_eq!(
            decode(decision(ORIGINAL, true, UNBOUNDED)),
            (ORIGINAL, true, UNBOUNDED)
        );
        assert_eq!(decode(decision(ORIGINAL, false, u64::MAX)).2, UNBOUNDED);
        assert_eq!(chunk_end(5, decision(INSTRUMENTED, false, 7)), 12);
        assert_eq!(chunk_end(5, decision(ORIGINAL, false, UNBOUNDED)), NEVER);
    }

    #[test]
    fn values_round_trip() {
        for i in Instrumentation::ALL {
            assert_eq!(Instrumentation::from_u32(i.value()), Some(i));
        }
        assert_eq!(Instrumentation::from_u32(10), None);
        for k in [
            RegionKind::Function,
            RegionKind::Loop,
            RegionKind::LoopBody,
            RegionKind::Inlined,
        ] {
            assert_eq!(RegionKind::from_u32(k as u32), Some(k));
        }
        assert_eq!(RegionKind::from_u32(4), None);
    }

    #[test]
    fn build_tools() {
        use Instrumentation::*;
        // What KAGE_TOOL selects (unset or empty: count; working-set with KAGE_WS_TRACE=1:
        // the trace build) is the pass's registry's, tested there against this table.
        let names = [
            "count",
            "count-calls",
            "working-set",
            "footprint",
            "hcpa",
            "loops",
            "interpolate",
            "dependences",
            "select",
        ];
        assert!(BUILD_TOOLS.iter().map(|t| t.name).eq(names));
        assert_eq!(BUILD_TOOLS[2].instrumentation, WorkingSet);
        // Every instrumentation but the trace one is some KAGE_TOOL's; `count-calls` is read
        // by every runtime tool, each other build tool by the runtime tool of its own name.
        for t in BUILD_TOOLS {
            match t.instrumentation.only_tool() {
                Some(tool) => assert_eq!(tool, t.name),
                None => assert_eq!((t.name, t.instrumentation), ("count-calls", Calls)),
            }
        }
    }

    #[test]
    fn line_sizes() {
        assert!(is_line_size(16) && is_line_size(64) && is_line_size(4096));
        assert!(!is_line_size(8) && !is_line_size(48) && !is_line_size(8192) && !is_line_size(0));
        assert!(is_line_size(DEFAULT_LINE_SIZE));
    }

    #[test]
    fn symbols_are_named_once_and_prefixed() {
        for (i, a) in symbols::ALL.iter().enumerate() {
            assert!(a.name().starts_with("__kage_"), "{}", a.name());
            for b in &symbols::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
            }
            assert_eq!(symbols::find(a.name()), Some(a));
        }
    }
}
