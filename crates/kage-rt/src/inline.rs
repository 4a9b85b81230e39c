//! What instrumented code reads inline about its thread's regions, published by the runtime
//! at the end of each of the thread's region events ([`publish`]):
//!
//! - `__kage_innermost`, the innermost open region's table entry, for every tool: a
//!   `__kage_settle` to it would change nothing, and instrumented code leaves it out
//!   (docs/abi.md, "Hooks the pass inserts"). A handler interrupting the runtime may read
//!   it stale: it then leaves out a settle the busy runtime would ignore anyway.
//! - Loop iterations counted inline (docs/abi.md, "Count instrumentation"). A new iteration
//!   of the loop whose body is the innermost open region changes nothing on the region
//!   stack: its body is exited and entered again. For a tool that takes such iterations in
//!   bulk ([`ThreadTool::iterations_in_bulk`]), the runtime *arms* the thread after each
//!   event: it sets the thread's `__kage_fast_loop` to that loop's table entry, and the
//!   loop's header then adds 1 to `__kage_iterations` instead of calling
//!   `__kage_loop_iter`. At the thread's next event, before anything else, the counter's
//!   growth goes to the tool as iterations of that body ([`ThreadTool::iterations`]).
//!
//! Signal safety: the counter only grows (the runtime remembers what it has taken), so an
//! increment interrupted by a handler whose events take the counter loses nothing; and the
//! thread is disarmed while the runtime runs on it, so a handler that runs the same loop then
//! calls the (ignored) hook rather than counting.

use crate::stack::{FrameKind, RegionStack, ENTRY_SIZE};
use crate::tool::ThreadTool;
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::null;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Relaxed};

extern "C" {
    /// The calling thread's `__kage_fast_loop` and `__kage_iterations` (csrc/tls.c).
    fn kage_fast_loop_slot() -> *const AtomicPtr<c_void>;
    fn kage_iterations_slot() -> *const AtomicU64;
    /// The calling thread's `__kage_innermost` (csrc/tls.c).
    fn kage_innermost_slot() -> *const AtomicPtr<c_void>;
}

thread_local! {
    /// The calling thread's `__kage_fast_loop` and `__kage_iterations`, once asked for.
    static SLOTS: Cell<(*const AtomicPtr<c_void>, *const AtomicU64)> =
        const { Cell::new((null(), null())) };
    /// `__kage_iterations` when the runtime last took it.
    static TAKEN: Cell<u64> = const { Cell::new(0) };
    /// The state the thread was armed for (its own, or a coroutine context's), with the body
    /// that was innermost; null when disarmed.
    static ARMED: Cell<(*const (), u32)> = const { Cell::new((null(), 0)) };
    /// The calling thread's `__kage_innermost`, once asked for.
    static INNERMOST: Cell<*const AtomicPtr<c_void>> = const { Cell::new(null()) };
}

/// The calling thread's `__kage_fast_loop` and `__kage_iterations`.
#[inline(always)]
fn slots() -> (&'static AtomicPtr<c_void>, &'static AtomicU64) {
    let (mut fast_loop, mut counter) = SLOTS.with(|s| s.get());
    if fast_loop.is_null() {
        // SAFETY: the calling thread's thread-locals, which live as long as it.
        (fast_loop, counter) = unsafe { (kage_fast_loop_slot(), kage_iterations_slot()) };
        SLOTS.with(|s| s.set((fast_loop, counter)));
    }
    // SAFETY: as above; only read by this thread.
    unsafe { (&*fast_loop, &*counter) }
}

/// At the start of an event of `state` (a thread state's address: its identity), on its
/// thread: disarms the thread, and gives the
/// tool the iterations counted inline since the thread was armed for `state` (none if it was
/// armed for another context: they were taken when that context's events ran).
///
/// # Safety
/// On the thread `state` runs on, with its stack and tool borrowed for the event.
pub unsafe fn take(state: *const (), tool: &mut dyn ThreadTool) {
    let (armed_for, body) = ARMED.with(|a| a.replace((null(), 0)));
    if armed_for.is_null() {
        return;
    }
    let (fast_loop, counter) = slots();
    fast_loop.store(std::ptr::null_mut(), Relaxed);
    let now = counter.load(Relaxed);
    let n = now.wrapping_sub(TAKEN.with(|t| t.replace(now)));
    if n != 0 && std::ptr::eq(armed_for, state) {
        tool.iterations(body, n);
    }
}

/// At the end of an event of `state`, on its thread: publishes the innermost open region,
/// and when `in_bulk` (the tool takes iterations in bulk) arms the thread when that region is
/// a loop body.
///
/// # Safety
/// As for [`take`].
pub unsafe fn publish(state: *const (), stack: &RegionStack, in_bulk: bool) {
    let top = stack.frames().last();
    innermost().store(top.map_or(0, |f| f.entry) as *mut c_void, Relaxed);
    let Some(top) = top.filter(|f| in_bulk && f.kind == FrameKind::Body && f.entry != 0) else {
        return;
    };
    let (fast_loop, counter) = slots();
    TAKEN.with(|t| t.set(counter.load(Relaxed)));
    ARMED.with(|a| a.set((state, top.region)));
    // The loop's entry comes right before its body's (docs/abi.md).
    fast_loop.store((top.entry - ENTRY_SIZE) as *mut c_void, Relaxed);
}

/// The calling thread's `__kage_innermost`.
#[inline(always)]
fn innermost() -> &'static AtomicPtr<c_void> {
    let mut slot = INNERMOST.with(|s| s.get());
    if slot.is_null() {
        // SAFETY: the calling thread's thread-local, which lives as long as it.
        slot = unsafe { kage_innermost_slot() };
        INNERMOST.with(|s| s.set(slot));
    }
    // SAFETY: as above.
    unsafe { &*slot }
}
