//! The C entry points only loops instrumentation (`KAGE_TOOL=loops`) calls: the decision
//! protocol of a selected nest's versions (docs/abi.md, "Loop nests"), each a thin shim over
//! the calling thread's [`LoopsThread`]. Each definition is checked against its
//! `kage_abi::symbols` type.
//!
//! They are ignored once the analysis has finished and while the runtime is busy on the
//! thread (a signal handler interrupting it, or the runtime initialising on it); they mark
//! the thread busy while they run, so an instrumented signal handler never sees the entry
//! stack half-updated. A thread whose tool is not loops ignores them. An ignored call gets
//! the answer that keeps the nest in its original version: no chunk end for an entry, the
//! original code to the end of the loop for a decision. Unlike the access hooks they are
//! not stopped by `kage_set_enabled(0)`: entries and iterations are tracked as regions
//! are, and the tool stops sampling instead.

use super::{LoopsThread, ORIGINAL_TO_THE_END};
use crate::gate::{self, ThreadState};
use crate::registry;
use kage_abi::loops::NEVER;
use kage_abi::{symbols, Instrumentation, Nest};
use std::cell::Cell;
use std::ffi::c_void;

const _: symbols::LoopsEnter = __kage_loops_enter;
const _: symbols::LoopsDecide = __kage_loops_decide;
const _: symbols::LoopsIter = __kage_loops_iter;
const _: symbols::LoopsExit = __kage_loops_exit;
const _: symbols::LoopsAccess = __kage_loops_access;
const _: symbols::LoopsTrip = __kage_loops_trip;

thread_local! {
    /// The thread state whose loops part was last looked up on this thread, and that part
    /// (null when its tool is not loops). A thread state is never freed and its tool never
    /// replaced (`thread::current_or_create`), so the pointer stays valid: the downcast is
    /// made once per thread, not per event.
    static LOOPS: Cell<(*const ThreadState, *mut LoopsThread)> =
        const { Cell::new((std::ptr::null(), std::ptr::null_mut())) };
}

/// The loops part of `ts`'s tool, null when it is not loops.
///
/// # Safety
/// `ts` is the calling thread's state, marked busy.
#[inline(always)]
unsafe fn loops_of(ts: *const ThreadState) -> *mut LoopsThread {
    let (cached, loops) = LOOPS.get();
    if cached == ts {
        loops
    } else {
        look_up_loops(ts)
    }
}

#[cold]
#[inline(never)]
unsafe fn look_up_loops(ts: *const ThreadState) -> *mut LoopsThread {
    let tool = &mut **(*ts).tool.get();
    let loops = tool
        .as_any_mut()
        .and_then(|any| any.downcast_mut::<LoopsThread>())
        .map_or(std::ptr::null_mut(), |thread| thread as *mut LoopsThread);
    LOOPS.set((ts, loops));
    loops
}

/// Runs `f` on the calling thread's loops part and returns its answer, or `ignored` when
/// the event is to be ignored (see the module docs); sets up the runtime and the thread on
/// its first event. No allocation, lock or system call once the thread is set up, except when
/// a nest is seen for the first time, or more levels are open on the thread than ever before.
#[inline(always)]
unsafe fn with_loops<R>(ignored: R, f: impl FnOnce(&mut LoopsThread) -> R) -> R {
    gate::in_runtime(|ts| {
        let loops = loops_of(ts);
        (!loops.is_null()).then(|| f(&mut *loops))
    })
    .flatten()
    .unwrap_or(ignored)
}

/// The outermost loop of `nest` is entered by the function whose return-address slot is
/// `frame`; returns the chunk end of its first iteration (`DECIDE_NOW` for a sampled entry,
/// `NEVER` otherwise). Entries this thread has open below `frame`, and one of the same nest
/// at `frame`, are dropped: they were left by a `longjmp` or an exception (another nest's
/// entry at `frame` stays: the new nest may be inlined into its body).
///
/// # Safety
/// `nest` is null or points to a `struct kage_nest` (docs/abi.md) whose `global_id` is
/// writable and whose other fields and arrays stay as they are; `frame` is only compared,
/// never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_loops_enter(nest: *mut Nest, frame: *const c_void) -> u64 {
    if gate::current().is_null() && !nest.is_null() && (*nest).access_count == 0 {
        // This thread's first event: only loops code calls this (nests with accesses are
        // the analyses', which announce themselves through their modules), so the runtime
        // is told what the program was built for even when no module announced it yet.
        registry::note_instrumentation(Instrumentation::Loops);
    }
    with_loops(NEVER, |loops| loops.enter(nest, frame as usize))
}

/// Level `level` of `nest` reached the end of its chunk before iteration `vi`; returns the
/// decision for the next chunk (`kage_abi::loops::decision`).
///
/// # Safety
/// As for [`__kage_loops_enter`].
#[no_mangle]
pub unsafe extern "C" fn __kage_loops_decide(nest: *mut Nest, level: u32, vi: u64) -> u64 {
    with_loops(ORIGINAL_TO_THE_END, |loops| loops.decide(nest, level, vi))
}

/// Iteration `vi` of level `level` of `nest` starts in the instrumented version.
///
/// # Safety
/// As for [`__kage_loops_enter`].
#[no_mangle]
pub unsafe extern "C" fn __kage_loops_iter(nest: *mut Nest, level: u32, vi: u64) {
    with_loops((), |loops| loops.iter(nest, level, vi));
}

/// The outermost loop of `nest` is left normally; `iterations[k]` is the number of
/// iterations level `k` ran in this entry (over every entry of that level inside it).
///
/// # Safety
/// As for [`__kage_loops_enter`]; `iterations` is null or points to the nest's
/// `level_count` counts.
#[no_mangle]
pub unsafe extern "C" fn __kage_loops_exit(nest: *mut Nest, iterations: *const u64) {
    with_loops((), |loops| loops.exit(nest, iterations));
}

/// The nest's memory instruction `access` touches `address`, in the instrumented version.
///
/// # Safety
/// As for [`__kage_loops_enter`]; `address` is only recorded, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_loops_access(nest: *mut Nest, access: u32, address: *const c_void) {
    with_loops((), |loops| loops.access(nest, access, address as usize));
}

/// An entry of inner level `level` of `nest`, made in an instrumented iteration of the
/// level around it, ran `iterations` iterations.
///
/// # Safety
/// As for [`__kage_loops_enter`].
#[no_mangle]
pub unsafe extern "C" fn __kage_loops_trip(nest: *mut Nest, level: u32, iterations: u64) {
    with_loops((), |loops| loops.trip(nest, level, iterations));
}
