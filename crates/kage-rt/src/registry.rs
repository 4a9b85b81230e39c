//! Static region tables (their C layout is `kage_abi`'s, as `docs/abi.md` describes it):
//! their validation, the global region registry (global ids, runtime-owned copies of names
//! and files), and what the program's modules were built with (instrumentations, line size).

use crate::chunked::Chunked;
use crate::collections::FastMap;
use crate::stack::{Ancestors, FrameKind};
use crate::sync::SpinLock;
use kage_abi::{Instrumentation, Module, Region, RegionKind, SourceKey, NONE, REJECTED};
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A set of instrumentations (`kage_abi::Instrumentation`), one bit each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Instrumentations(u32);

impl Instrumentations {
    pub const fn with(self, i: Instrumentation) -> Instrumentations {
        Instrumentations(self.0 | 1 << i.value())
    }

    pub const fn contains(self, i: Instrumentation) -> bool {
        self.0 & 1 << i.value() != 0
    }

    /// In the order of `Instrumentation::ALL`.
    pub fn iter(self) -> impl Iterator<Item = Instrumentation> {
        Instrumentation::ALL
            .into_iter()
            .filter(move |&i| self.contains(i))
    }
}

/// Bit `1 << instrumentation` for every instrumentation seen in a registered module (or
/// announced by a hook that only such code calls).
static INSTRUMENTATIONS_SEEN: AtomicU32 = AtomicU32::new(0);

pub fn note_instrumentation(i: Instrumentation) {
    INSTRUMENTATIONS_SEEN.fetch_or(Instrumentations::default().with(i).0, Ordering::Relaxed);
}

/// What the program's modules were built with, as far as seen so far.
pub fn instrumentations_seen() -> Instrumentations {
    Instrumentations(INSTRUMENTATIONS_SEEN.load(Ordering::Relaxed))
}

/// Whether a table's `instrumentation` field is a build with a line size in its marks.
fn has_line_size(instrumentation: u32) -> bool {
    Instrumentation::from_u32(instrumentation).is_some_and(Instrumentation::has_line_size)
}

/// The line shifts a module table may carry: lines of 16 to 4096 bytes, as `line_size=`.
const LINE_SHIFTS: std::ops::RangeInclusive<u32> =
    kage_abi::LINE_SIZES.start().trailing_zeros()..=kage_abi::LINE_SIZES.end().trailing_zeros();

/// log2 of the line size built into the first working-set module seen; 0 before one.
static BUILT_LINE_SHIFT: AtomicU32 = AtomicU32::new(0);

/// Notes what module `m` was built for, before the runtime initialises: its
/// instrumentation decides the default tool, and a working-set build's line size the
/// default `line_size=` (and the smallest possible one).
///
/// # Safety
/// `m` is null or points to a `struct kage_module`.
pub unsafe fn note_module(m: *const Module) {
    if m.is_null() || (*m).abi_version != kage_abi::VERSION {
        return;
    }
    let m = &*m;
    if let Some(i) = Instrumentation::from_u32(m.instrumentation) {
        note_instrumentation(i);
    }
    if has_line_size(m.instrumentation) && LINE_SHIFTS.contains(&m.line_shift) {
        let _ = BUILT_LINE_SHIFT.compare_exchange(
            0,
            m.line_shift,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

/// A module table the program announced (`__kage_register_module`): what it was built
/// for and which object holds it. The runtime starts when the executable's first module
/// announces itself (or at the first event): the shared libraries' constructors run first,
/// and the executable's build, not a library's, decides the default tool.
#[derive(Debug, Clone)]
pub struct AnnouncedModule {
    table: usize,
    pub instrumentation: Option<Instrumentation>,
    /// In the program's executable, not a shared library.
    pub in_executable: bool,
    /// The object's path (executable or shared library), as the loader has it.
    pub object: String,
    /// The module's source file (its `module_name`).
    pub name: String,
    registered: bool,
    /// Said on stderr to be built for another tool than the one running.
    warned: bool,
}

static ANNOUNCED: SpinLock<Vec<AnnouncedModule>> = SpinLock::new(Vec::new());

/// The path and load base of the object holding `addr`; ("", 0) when the loader does not
/// know (a static program).
fn object_of(addr: *const std::ffi::c_void) -> (String, usize) {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads its argument's address.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 {
        return (String::new(), 0);
    }
    // SAFETY: a NUL-terminated path owned by the loader, or null.
    let path = unsafe { cstr(info.dli_fname) };
    (path, info.dli_fbase as usize)
}

/// The load base of the program's executable (0 when the loader does not know).
fn executable_base() -> usize {
    // SAFETY: reads the auxiliary vector.
    let program_headers = unsafe { libc::getauxval(libc::AT_PHDR) } as *const std::ffi::c_void;
    object_of(program_headers).1
}

/// The load base of the object this copy of the runtime is in.
fn own_base() -> usize {
    object_of(own_base as *const std::ffi::c_void).1
}

/// Whether this copy of the runtime is the program's, the one its `__kage_*` references
/// bind to. A preloaded copy (`libkage_rt.so`, which `kage run` preloads into programs not
/// linked by kage-cc, and so into all their children) stands down in a program linked with
/// its own: its start-up code does nothing.
pub fn is_the_programs_runtime() -> bool {
    // SAFETY: a lookup by a NUL-terminated name.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__kage_register_module".as_ptr()) };
    // A static program has no dynamic symbols: its runtime is the only one.
    found.is_null() || object_of(found).1 == own_base()
}

/// Whether this runtime was loaded as a shared object (preloaded), not linked into the
/// executable.
pub fn runtime_is_preloaded() -> bool {
    executable_base() != own_base()
}

/// Records module `m` (once) and says whether it is the executable's.
///
/// # Safety
/// `m` points to a `struct kage_module` laid out as in `docs/abi.md`.
pub unsafe fn announce(m: *mut Module) -> bool {
    let mut announced = ANNOUNCED.lock();
    if let Some(known) = announced.iter().find(|a| a.table == m as usize) {
        return known.in_executable;
    }
    let (object, base) = object_of(m as *const std::ffi::c_void);
    let in_executable = base == executable_base();
    announced.push(AnnouncedModule {
        table: m as usize,
        instrumentation: ((*m).abi_version == kage_abi::VERSION)
            .then(|| Instrumentation::from_u32((*m).instrumentation))
            .flatten(),
        in_executable,
        object,
        name: cstr((*m).module_name),
        registered: false,
        warned: false,
    });
    in_executable
}

/// Set when the program's start-up check ran (before `main`): no executable module can
/// announce itself after it, so a shared library's module no longer waits.
static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The start-up check ran.
pub fn note_started() {
    STARTED.store(true, Ordering::Relaxed);
}

/// Whether a module announced now must wait for the executable's (see [`AnnouncedModule`]).
pub fn waits_for_the_executable(in_executable: bool) -> bool {
    !in_executable && !STARTED.load(Ordering::Relaxed)
}

/// Whether any module announced itself.
pub fn any_announced() -> bool {
    !ANNOUNCED.lock().is_empty()
}

/// Registers every announced module not registered yet, in the order they were announced.
/// Once the runtime is set up.
pub fn register_announced() {
    let waiting: Vec<usize> = {
        let mut announced = ANNOUNCED.lock();
        (announced.iter_mut())
            .filter_map(|a| (!std::mem::replace(&mut a.registered, true)).then_some(a.table))
            .collect()
    };
    for table in waiting {
        // SAFETY: announced by the module itself (`__kage_register_module`).
        unsafe { register(table as *mut Module) };
    }
}

/// Module `m` is being unloaded (its destructor: a `dlclose`). Its table goes with it, so
/// the runtime moves what it still reads after the module's code is gone (the report's
/// counts are found through the table: the module's header and region entries) to copies
/// of its own, and forgets that the table's address was announced: a module loaded there
/// later is another, registered anew.
///
/// # Safety
/// `m` points to a registered or announced `struct kage_module`, still mapped.
pub unsafe fn unregister(m: *mut Module) {
    ANNOUNCED.lock().retain(|a| a.table != m as usize);
    let reg = REGISTRY.lock();
    let Some(slot) = (1..=last_slot())
        .find(|&slot| slot_module(slot).is_some_and(|found| std::ptr::eq(found.module, m)))
    else {
        return;
    };
    let count = (*m).region_count as usize;
    let copy: &'static mut Module = Box::leak(Box::new(std::ptr::read(m)));
    let entries: &'static mut [Region] = Box::leak(
        std::slice::from_raw_parts((*m).regions, count)
            .iter()
            .map(|r| Region {
                module: copy as *mut Module,
                // The strings go with the module; the registry has its own.
                name: std::ptr::null(),
                symbol: std::ptr::null(),
                file: std::ptr::null(),
                call_file: std::ptr::null(),
                code: std::ptr::null(),
                ..std::ptr::read(r)
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    copy.regions = entries.as_mut_ptr();
    copy.module_name = std::ptr::null();
    let base = slot_module(slot).map_or(0, |found| found.base) as usize;
    for (i, entry) in entries.iter().enumerate() {
        if let Some(w) = meta_table().get((base + i) as usize) {
            w[2].store(entry as *const Region as u64, Ordering::Relaxed);
        }
    }
    if let Some(w) = slot_table().get(slot as usize) {
        w[0].store(copy as *mut Module as u64, Ordering::Release);
    }
    drop(reg);
}

/// The announced modules built for one tool other than `tool` that were not named yet
/// (each is named once).
pub fn built_for_other_tools(tool: &str) -> Vec<AnnouncedModule> {
    let mut announced = ANNOUNCED.lock();
    (announced.iter_mut())
        .filter_map(|a| {
            let other = a.instrumentation.and_then(Instrumentation::only_tool);
            let named = other.is_some_and(|t| t != tool) && !std::mem::replace(&mut a.warned, true);
            named.then(|| a.clone())
        })
        .collect()
}

/// The tool the executable's code was built for, when one tool only.
pub fn executable_tool() -> Option<&'static str> {
    (ANNOUNCED.lock().iter())
        .filter(|a| a.in_executable)
        .find_map(|a| a.instrumentation.and_then(Instrumentation::only_tool))
}

/// Modules registered so far (valid or not).
static MODULES: AtomicU32 = AtomicU32::new(0);

/// How many modules have registered so far.
pub fn modules_registered() -> u32 {
    MODULES.load(Ordering::Relaxed)
}

/// The line shift working-set code was built with (the first module's), if any ran.
pub fn built_line_shift() -> Option<u32> {
    Some(BUILT_LINE_SHIFT.load(Ordering::Relaxed)).filter(|&s| s != 0)
}

/// A registered region, with runtime-owned strings (a `dlclose`d module must not leave
/// dangling pointers behind for the report), shared where the module's table shares them
/// (a function's loops have its name, symbol and file; a module has few files).
#[derive(Debug, Clone, PartialEq)]
pub struct RegionInfo {
    pub kind: kage_report::RegionKind,
    pub name: Arc<str>,
    pub symbol: Arc<str>,
    pub file: Arc<str>,
    pub line: u32,
    pub end_line: u32,
    pub parent: Option<u32>,
    /// Global id of the function the region belongs to (itself for a function).
    pub func: u32,
    /// A function's code address (0 for loops and bodies).
    pub code: usize,
    /// An inlined call's site.
    pub inlined_at: Option<InlinedAt>,
}

/// Where an inlined call is.
#[derive(Debug, Clone, PartialEq)]
pub struct InlinedAt {
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
}

/// What the hooks need about a region without taking a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub kind: RegionKind,
    pub func: u32,
    pub parent: u32,
    /// The parent's kind (`None` without a parent), so that walking up needs one read per
    /// level.
    pub parent_kind: Option<RegionKind>,
}

#[derive(Default)]
pub struct Registry {
    pub regions: Vec<RegionInfo>,
    /// Addresses of modules whose table was rejected (each reported once).
    rejected: Vec<usize>,
    /// The first region registered of each source region (see [`source_of`]), by the key
    /// the report's source view joins regions by, over every registered module.
    sources: Option<FastMap<SourceKey<Arc<str>>, u32>>,
}

pub static REGISTRY: SpinLock<Registry> = SpinLock::new(Registry {
    regions: Vec::new(),
    rejected: Vec::new(),
    sources: None,
});

/// Per global id: `[kind | func << 32, parent | (parent kind + 1) << 32, the region's table
/// entry, its source region]` (0 for no parent kind), written before the id is published.
static META: std::sync::OnceLock<Chunked<4>> = std::sync::OnceLock::new();

fn meta_table() -> &'static Chunked<4> {
    META.get_or_init(Chunked::new)
}

/// Valid modules registered so far: the last slot given (`kage_module.slot`).
static SLOTS: AtomicU32 = AtomicU32::new(0);

/// Per slot: `[the module's address, its first global id | its region count << 32]`,
/// written before the slot is published.
static SLOT_TABLE: std::sync::OnceLock<Chunked<2>> = std::sync::OnceLock::new();

fn slot_table() -> &'static Chunked<2> {
    SLOT_TABLE.get_or_init(Chunked::new)
}

/// The last module slot given.
pub fn last_slot() -> u32 {
    SLOTS.load(Ordering::Acquire)
}

/// A registered module: its table, first global id and region count.
#[derive(Debug, Clone, Copy)]
pub struct SlotModule {
    pub module: *mut Module,
    pub base: u32,
    pub count: u32,
}

/// The module of `slot` (from 1), once registered.
pub fn slot_module(slot: u32) -> Option<SlotModule> {
    let w = slot_table().get(slot as usize)?;
    let module = w[0].load(Ordering::Relaxed) as *mut Module;
    let v = w[1].load(Ordering::Relaxed);
    (!module.is_null()).then_some(SlotModule {
        module,
        base: v as u32,
        count: (v >> 32) as u32,
    })
}

pub fn meta(gid: u32) -> Option<Meta> {
    let r = meta_table().get(gid as usize)?;
    let w = r[0].load(Ordering::Relaxed);
    let up = r[1].load(Ordering::Relaxed);
    Some(Meta {
        kind: RegionKind::from_u32(w as u32)?,
        func: (w >> 32) as u32,
        parent: up as u32,
        parent_kind: ((up >> 32) as u32)
            .checked_sub(1)
            .and_then(RegionKind::from_u32),
    })
}

/// The source region of region `gid`: the first region registered of those the source view
/// joins with it (the compiler's copies of one function or loop: a function and its inlined
/// calls, a loop split or versioned, a loop in each copy of an inlined function); itself for
/// a region without copies. Tools that count recursion once count it per source region, so
/// that the copies' sums the view makes count every instance once.
pub fn source_of(gid: u32) -> u32 {
    match meta_table().get(gid as usize) {
        // Registered: its table entry is set, with the rest, before the id is published.
        Some(r) if r[2].load(Ordering::Relaxed) != 0 => r[3].load(Ordering::Relaxed) as u32,
        _ => gid,
    }
}

/// The table entry of region `gid` (what instrumented code passes to the hooks), if it is
/// registered.
pub fn region_entry(gid: u32) -> Option<*const Region> {
    let r = meta_table().get(gid as usize)?;
    let entry = r[2].load(Ordering::Relaxed) as *const Region;
    (!entry.is_null()).then_some(entry)
}

/// The static region tree of the registered modules (their lock-free metadata), as the
/// region stack settles through it.
pub struct Tree;

impl Ancestors for Tree {
    fn parent(&self, region: u32) -> Option<(u32, FrameKind)> {
        let meta = meta(region)?;
        Some((meta.parent, frame_kind(meta.parent_kind?)?))
    }

    fn kind(&self, region: u32) -> FrameKind {
        (meta(region))
            .and_then(|meta| frame_kind(meta.kind))
            .unwrap_or(FrameKind::Function)
    }

    fn entry(&self, region: u32) -> usize {
        region_entry(region).map_or(0, |entry| entry as usize)
    }
}

/// The frame kind of a region kind; `None` for a function (the end of an ancestry).
pub fn frame_kind(kind: RegionKind) -> Option<FrameKind> {
    match kind {
        RegionKind::Function => None,
        RegionKind::Loop => Some(FrameKind::Loop),
        RegionKind::LoopBody => Some(FrameKind::Body),
        RegionKind::Inlined => Some(FrameKind::Inlined),
    }
}

fn gid_cell(r: *mut Region) -> &'static AtomicU32 {
    // SAFETY: `global_id` is the first field, 4-byte aligned, in writable memory (abi.md).
    unsafe { &*(std::ptr::addr_of_mut!((*r).global_id) as *const AtomicU32) }
}

unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// One copy of each string of a module's table, by address (the pass emits each distinct
/// string once per module).
#[derive(Default)]
struct Interned(FastMap<*const c_char, Arc<str>>);

impl Interned {
    /// # Safety
    /// `p` is null or points to a NUL-terminated string.
    unsafe fn get(&mut self, p: *const c_char) -> Arc<str> {
        self.0.entry(p).or_insert_with(|| cstr(p).into()).clone()
    }
}

/// Checks a table against the rules of `docs/abi.md`.
///
/// # Safety
/// `m` points to a module whose `regions` array has `region_count` readable entries.
pub unsafe fn validate(m: *const Module) -> Result<(), String> {
    let m = &*m;
    if Instrumentation::from_u32(m.instrumentation).is_none() && m.abi_version == kage_abi::VERSION
    {
        return Err(format!("unknown instrumentation {}", m.instrumentation));
    }
    if m.abi_version != kage_abi::VERSION {
        return Err(format!(
            "ABI version {} (this runtime implements version {}; rebuild with a matching kage)",
            m.abi_version,
            kage_abi::VERSION
        ));
    }
    if has_line_size(m.instrumentation) && !LINE_SHIFTS.contains(&m.line_shift) {
        return Err(format!(
            "line shift {} (working-set code marks lines of 2^{} to 2^{} bytes)",
            m.line_shift,
            LINE_SHIFTS.start(),
            LINE_SHIFTS.end()
        ));
    }
    let n = m.region_count as usize;
    if n == 0 {
        return Ok(());
    }
    if m.regions.is_null() {
        return Err(format!("{n} regions but a null region array"));
    }
    let t = std::slice::from_raw_parts(m.regions as *const Region, n);
    // Indices of the open path in the pre-order walk: parents must be on it.
    let mut path: Vec<usize> = Vec::new();
    for (i, r) in t.iter().enumerate() {
        let bad = |what: String| Err(format!("region {i}: {what}"));
        if r.local_index as usize != i {
            return bad(format!("local_index is {}", r.local_index));
        }
        if !std::ptr::eq(r.module as *const Module, m) {
            return bad("module pointer does not point to its module".into());
        }
        let known = kage_abi::count::IN_LOCALS
            | kage_abi::footprint::CHAIN_MASK
            | kage_abi::footprint::LEAF
            | kage_abi::footprint::ONE_RANGE;
        if r.flags & !known != 0 {
            return bad(format!("unknown flags {:#x}", r.flags));
        }
        let one_range = kage_abi::footprint::LEAF | kage_abi::footprint::ONE_RANGE;
        if r.flags & one_range == kage_abi::footprint::ONE_RANGE
            || (r.flags & kage_abi::footprint::ONE_RANGE != 0
                && r.kind != RegionKind::Inlined as u32)
        {
            return bad("a one-range leaf that is not a leaf inlined call".into());
        }
        // The footprint tool walks a leaf's parents in its hooks.
        let leaf_kind = r.kind == RegionKind::Inlined as u32 || r.kind == RegionKind::Loop as u32;
        if r.flags & kage_abi::footprint::LEAF != 0 && (!leaf_kind || r.parent == NONE) {
            return bad("a leaf that is not an inlined call or a loop".into());
        }
        if r.source_cell != NONE && r.source_cell >= m.source_cells {
            return bad(format!(
                "source cell {} of {}",
                r.source_cell, m.source_cells
            ));
        }
        match RegionKind::from_u32(r.kind) {
            Some(RegionKind::Function) => {
                if r.parent != NONE {
                    return bad("a function has a parent".into());
                }
                path.clear();
            }
            Some(RegionKind::Loop | RegionKind::LoopBody | RegionKind::Inlined) => {
                let p = r.parent as usize;
                if r.parent == NONE || p >= i {
                    return bad(format!("parent {} is not before it", r.parent as i64));
                }
                let (kind, pk) = (r.kind, t[p].kind);
                let (loop_, body) = (RegionKind::Loop as u32, RegionKind::LoopBody as u32);
                if kind != body && pk == loop_ {
                    return bad(
                        "a loop's or inlined call's parent is a loop, not a loop body, an \
                         inlined call or a function"
                            .into(),
                    );
                }
                if kind == body && (p != i - 1 || pk != loop_) {
                    return bad("a loop body does not directly follow its loop".into());
                }
                while path.last().is_some_and(|&top| top != p) {
                    path.pop();
                }
                if path.is_empty() {
                    return bad(format!(
                        "parent {p} is not an enclosing region (not pre-order)"
                    ));
                }
            }
            None => return bad(format!("unknown kind {}", r.kind)),
        }
        if r.kind == RegionKind::Loop as u32
            && t.get(i + 1)
                .is_none_or(|b| b.kind != RegionKind::LoopBody as u32)
        {
            return bad("a loop is not followed by its loop body".into());
        }
        path.push(i);
    }
    Ok(())
}

/// `verbosity=`: 2 and above print every registration.
static VERBOSITY: AtomicU32 = AtomicU32::new(0);

/// Set once the options are read (before any module is registered).
pub fn set_verbosity(verbosity: u32) {
    VERBOSITY.store(verbosity, Ordering::Relaxed);
}

/// Registers a module: validates it, assigns global ids, copies its strings.
/// Registering the same module again is a no-op; a bad table is reported once and ignored.
///
/// # Safety
/// `m` is null or points to a module table as described in `docs/abi.md`.
pub unsafe fn register(m: *mut Module) {
    if m.is_null() {
        return;
    }
    let mut reg = REGISTRY.lock();
    let count = (*m).region_count as usize;
    if count > 0
        && !(*m).regions.is_null()
        && gid_cell((*m).regions).load(Ordering::Acquire) != NONE
    {
        return; // already registered (or rejected)
    }
    if reg.rejected.contains(&(m as usize)) {
        return;
    }
    MODULES.fetch_add(1, Ordering::Relaxed);
    let name = cstr((*m).module_name);
    if let Err(e) = validate(m) {
        eprintln!("kage: ignoring the region table of module '{name}': {e}");
        reg.rejected.push(m as usize);
        return;
    }
    let built = built_line_shift();
    if has_line_size((*m).instrumentation) && built.is_some_and(|b| b != (*m).line_shift) {
        eprintln!(
            "kage: warning: module '{name}' was built with KAGE_WS_LINE_SIZE={} but the \
             program's other working-set code with {}: its accesses are counted in lines of \
             the wrong size; build every file with the same KAGE_WS_LINE_SIZE",
            1u64 << (*m).line_shift,
            1u64 << built.unwrap_or(0)
        );
    }
    let base = reg.regions.len();
    if base + count >= REJECTED as usize || base + count > Chunked::<2>::CAPACITY {
        eprintln!("kage: ignoring module '{name}': too many regions");
        reg.rejected.push(m as usize);
        return;
    }
    let t = std::slice::from_raw_parts((*m).regions, count);
    let mut strings = Interned::default();
    reg.regions.reserve(count);
    for (i, r) in t.iter().enumerate() {
        let gid = (base + i) as u32;
        let parent = (r.parent != NONE).then(|| base as u32 + r.parent);
        let func = match parent {
            None => gid,
            Some(p) => reg.regions[p as usize].func,
        };
        // An inlined call is reported as the function it calls, with where it was inlined.
        let kind = match RegionKind::from_u32(r.kind) {
            Some(RegionKind::Function | RegionKind::Inlined) => kage_report::RegionKind::Function,
            Some(RegionKind::Loop) => kage_report::RegionKind::Loop,
            _ => kage_report::RegionKind::LoopBody,
        };
        let inlined_at = (r.kind == RegionKind::Inlined as u32).then(|| InlinedAt {
            file: strings.get(r.call_file),
            line: r.call_line,
            column: r.call_column,
        });
        let name = strings.get(r.name);
        let symbol = strings.get(r.symbol);
        let file = strings.get(r.file);
        let source_key = SourceKey::new(
            kind.abi(),
            parent.map(source_of),
            r.first_line,
            kage_abi::key_function(&name, &symbol).clone(),
            file.clone(),
        );
        let source = *reg
            .sources
            .get_or_insert_with(FastMap::default)
            .entry(source_key)
            .or_insert(gid);
        reg.regions.push(RegionInfo {
            kind,
            name,
            symbol,
            file,
            line: r.first_line,
            end_line: r.last_line,
            parent,
            func,
            code: r.code as usize,
            inlined_at,
        });
        // The registry lock makes us the only writer of META.
        if let Some(w) = meta_table().get_or_alloc(gid as usize) {
            w[0].store(r.kind as u64 | (func as u64) << 32, Ordering::Relaxed);
            // Validation: a parent comes before its children, with a known kind.
            let parent_kind = (r.parent != NONE).then(|| t[r.parent as usize].kind + 1);
            w[1].store(
                parent.unwrap_or(NONE) as u64 | (parent_kind.unwrap_or(0) as u64) << 32,
                Ordering::Relaxed,
            );
            w[2].store(r as *const Region as u64, Ordering::Relaxed);
            w[3].store(source as u64, Ordering::Relaxed);
        }
    }
    // The module's slot (count instrumentation's records are found by it).
    let slot = SLOTS.fetch_add(1, Ordering::Relaxed) + 1;
    if let Some(w) = slot_table().get_or_alloc(slot as usize) {
        w[0].store(m as u64, Ordering::Relaxed);
        w[1].store(base as u64 | (count as u64) << 32, Ordering::Relaxed);
    }
    // Beyond the threads' directories, the module keeps slot 0: its code counts nowhere
    // (and calls the runtime at every entry), rather than reading past a directory.
    let published = if (slot as usize) < kage_abi::count::MAX_MODULES {
        slot
    } else {
        0
    };
    if published == 0 {
        eprintln!("kage: module '{name}' is past the count tool's limit of modules: not counted");
    }
    std::ptr::write_volatile(std::ptr::addr_of_mut!((*m).slot), published);
    // Publish the ids last: a hook that sees an id also sees its META entry.
    for (i, r) in t.iter().enumerate() {
        gid_cell(r as *const _ as *mut Region).store((base + i) as u32, Ordering::Release);
    }
    if VERBOSITY.load(Ordering::Relaxed) >= 2 {
        eprintln!(
            "kage: registered module '{name}': {count} regions, ids {base}..{}",
            base + count
        );
    }
}

/// The global id of a region for a hook, registering its module lazily (another module's
/// constructor may call into this module before this module's constructor ran).
/// `None` for a region of a rejected module.
///
/// # Safety
/// `r` is null or points to a region of a module table.
#[inline]
pub unsafe fn global_id(r: *mut Region) -> Option<u32> {
    if r.is_null() {
        return None;
    }
    let cell = gid_cell(r);
    let g = cell.load(Ordering::Acquire);
    if g < REJECTED {
        return Some(g);
    }
    if g == REJECTED {
        return None;
    }
    register((*r).module);
    let g = cell.load(Ordering::Acquire);
    if g < REJECTED {
        Some(g)
    } else {
        cell.store(REJECTED, Ordering::Release);
        None
    }
}

/// Number of registered regions.
pub fn region_count() -> usize {
    REGISTRY.lock().regions.len()
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A heap-allocated C table for tests (leaked: registration keeps pointers into it).
    pub fn table(entries: &[(u32, u32)], name: &str) -> *mut Module {
        let s = |x: &str| std::ffi::CString::new(x).unwrap().into_raw() as *const c_char;
        let m = Box::into_raw(Box::new(Module {
            abi_version: kage_abi::VERSION,
            region_count: entries.len() as u32,
            regions: std::ptr::null_mut(),
            module_name: s(name),
            instrumentation: Instrumentation::Calls.value(),
            line_shift: 0,
            slot: 0,
            source_cells: 0,
        }));
        let regions: Vec<Region> = entries
            .iter()
            .enumerate()
            .map(|(i, &(kind, parent))| Region {
                global_id: NONE,
                kind,
                parent,
                first_line: 10 + i as u32,
                last_line: 20 + i as u32,
                local_index: i as u32,
                name: s(&format!("f{i}")),
                symbol: s(&format!("_Z2f{i}")),
                file: s("/src/a.c"),
                module: m,
                code: std::ptr::null(),
                call_file: s("/src/b.c"),
                call_line: 30 + i as u32,
                call_column: 5,
                source_cell: NONE,
                flags: 0,
            })
            .collect();
        unsafe { (*m).regions = Box::leak(regions.into_boxed_slice()).as_mut_ptr() };
        m
    }

    const F: u32 = RegionKind::Function as u32;
    const L: u32 = RegionKind::Loop as u32;
    const B: u32 = RegionKind::LoopBody as u32;
    const I: u32 = RegionKind::Inlined as u32;

    #[test]
    fn instrumentation_sets() {
        use Instrumentation::*;
        let set = Instrumentations::default().with(Footprint).with(Calls);
        assert!(set.contains(Calls) && set.contains(Footprint) && !set.contains(WorkingSet));
        assert_eq!(set.iter().collect::<Vec<_>>(), [Calls, Footprint]);
        assert_eq!(Instrumentations::default().iter().count(), 0);
    }

    #[test]
    fn valid_tables() {
        let ok = [
            vec![],
            vec![(F, NONE)],
            vec![
                (F, NONE),
                (L, 0),
                (B, 1),
                (L, 2),
                (B, 3),
                (L, 0),
                (B, 5),
                (F, NONE),
                (L, 7),
                (B, 8),
            ],
            // Inlined calls: in a function, in a loop body, in each other; loops in them.
            vec![
                (F, NONE),
                (I, 0),
                (L, 1),
                (B, 2),
                (I, 3),
                (I, 4),
                (L, 0),
                (B, 6),
            ],
        ];
        for t in ok {
            assert_eq!(unsafe { validate(table(&t, "ok")) }, Ok(()), "{t:?}");
        }
    }

    #[test]
    fn invalid_tables() {
        let bad: &[(&[(u32, u32)], &str)] = &[
            (&[(F, 0)], "function has a parent"),
            (&[(F, NONE), (L, 0)], "not followed by its loop body"),
            (
                &[(F, NONE), (L, 0), (F, NONE)],
                "not followed by its loop body",
            ),
            (&[(F, NONE), (B, 0)], "does not directly follow"),
            (
                &[(F, NONE), (L, 0), (B, 1), (L, 1), (B, 3)],
                "parent is a loop",
            ),
            (&[(F, NONE), (L, 5), (B, 1)], "not before it"),
            (&[(F, NONE), (7, NONE)], "unknown kind"),
            (&[(F, NONE), (L, 0), (B, 1), (I, 1)], "parent is a loop"),
            (&[(I, NONE)], "not before it"),
            (&[(L, NONE), (B, 0)], "not before it"),
            // Loop 5 claims body 2 as parent, but body 2's loop was closed by loop 3 at body 2's
            // level... path is [0,1,2,3,4]; here 3's parent is 0 so 1,2 are off the path.
            (
                &[(F, NONE), (L, 0), (B, 1), (L, 0), (B, 3), (L, 2), (B, 5)],
                "not pre-order",
            ),
        ];
        for (t, why) in bad {
            let e = unsafe { validate(table(t, "bad")) }.unwrap_err();
            assert!(e.contains(why), "{t:?}: {e}");
        }
        let m = table(&[(F, NONE)], "v2");
        unsafe { (*m).abi_version = 1 };
        assert!(unsafe { validate(m) }
            .unwrap_err()
            .contains("ABI version 1"));
        let m = table(&[(F, NONE)], "mode");
        unsafe { (*m).instrumentation = 99 };
        assert!(unsafe { validate(m) }
            .unwrap_err()
            .contains("unknown instrumentation 99"));
        let m = table(&[(F, NONE)], "shift");
        unsafe { (*m).instrumentation = Instrumentation::WorkingSet.value() };
        for (shift, ok) in [
            (0, false),
            (3, false),
            (4, true),
            (6, true),
            (12, true),
            (13, false),
        ] {
            unsafe { (*m).line_shift = shift };
            let result = unsafe { validate(m) };
            assert_eq!(result.is_ok(), ok, "line shift {shift}: {result:?}");
        }
        let m = table(&[(F, NONE), (F, NONE)], "cells");
        unsafe { (*(*m).regions.add(1)).source_cell = 0 };
        assert!(unsafe { validate(m) }
            .unwrap_err()
            .contains("region 1: source cell 0 of 0"));
        unsafe { (*m).source_cells = 1 };
        assert_eq!(unsafe { validate(m) }, Ok(()));
        unsafe { (*(*m).regions).flags = 2 };
        assert!(unsafe { validate(m) }
            .unwrap_err()
            .contains("region 0: unknown flags 0x2"));
        let m = table(&[(F, NONE), (F, NONE)], "idx");
        unsafe { (*(*m).regions.add(1)).local_index = 0 };
        assert!(unsafe { validate(m) }.unwrap_err().contains("local_index"));
    }

    #[test]
    fn copies_of_a_source_region_name_its_first_region() {
        // f0 with a loop; in the loop's body a call of f0 inlined into itself, with its copy
        // of the loop; then a function of its own.
        let m = table(
            &[(F, NONE), (L, 0), (B, 1), (I, 2), (L, 3), (B, 4), (F, NONE)],
            "copies",
        );
        // SAFETY: the table is ours, not registered yet.
        unsafe {
            let r = |i: usize| &mut *(*m).regions.add(i);
            (r(3).name, r(3).symbol) = (r(0).name, r(0).symbol);
            r(4).first_line = r(1).first_line;
            register(m);
            let id = |i: usize| global_id((*m).regions.add(i)).unwrap();
            assert_eq!(source_of(id(3)), id(0));
            assert_eq!(source_of(id(4)), id(1));
            assert_eq!(source_of(id(5)), id(2));
            for i in [0, 1, 2, 6] {
                assert_eq!(source_of(id(i)), id(i), "region {i}");
            }
        }
    }

    #[test]
    fn register_assigns_ids_once_and_lazily() {
        // The registry is global; other tests may register too, so work relative to a base.
        let m1 = table(&[(F, NONE), (L, 0), (B, 1), (I, 2)], "m1");
        let m2 = table(&[(F, NONE)], "m2");
        let bad = table(&[(F, 3)], "bad");
        unsafe {
            register(m1);
            let base = (*(*m1).regions).global_id;
            register(m1); // idempotent
            let r = |m: *mut Module, i| (*m).regions.add(i);
            assert_eq!((*r(m1, 2)).global_id, base + 2);
            // Lazy: a hook sees m2's region first.
            let g = global_id(r(m2, 0)).unwrap();
            assert!(g >= base + 4);
            assert_eq!(global_id(r(m2, 0)), Some(g));
            assert_eq!(global_id(r(bad, 0)), None);
            assert_eq!((*r(bad, 0)).global_id, REJECTED);
            let reg = REGISTRY.lock();
            let body = &reg.regions[(base + 2) as usize];
            assert_eq!(body.kind, kage_report::RegionKind::LoopBody);
            assert_eq!(body.parent, Some(base + 1));
            assert_eq!(body.func, base);
            assert_eq!(&*body.name, "f2");
            assert_eq!(&*body.file, "/src/a.c");
            assert_eq!((body.line, body.end_line), (12, 22));
            assert_eq!(body.inlined_at, None);
            // An inlined call: a function region with its site.
            let call = &reg.regions[(base + 3) as usize];
            assert_eq!(call.kind, kage_report::RegionKind::Function);
            assert_eq!((call.parent, call.func), (Some(base + 2), base));
            let at = call.inlined_at.as_ref().unwrap();
            assert_eq!((&*at.file, at.line, at.column), ("/src/b.c", 33, 5));
            drop(reg);
            assert_eq!(
                meta(base + 2),
                Some(Meta {
                    kind: RegionKind::LoopBody,
                    func: base,
                    parent: base + 1,
                    parent_kind: Some(RegionKind::Loop),
                })
            );
            assert_eq!(
                meta(base),
                Some(Meta {
                    kind: RegionKind::Function,
                    func: base,
                    parent: NONE,
                    parent_kind: None,
                })
            );
        }
    }
}
