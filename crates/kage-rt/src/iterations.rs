//! Loop iterations counted inline (docs/abi.md, "Count instrumentation"). A new iteration of
//! the loop whose body is the innermost open region changes nothing on the region stack: its
//! body is exited and entered again. For a tool that takes such iterations in bulk
//! ([`ThreadTool::iterations_in_bulk`]), the runtime *arms* the thread after each event: it
//! sets the thread's `__kage_fast_loop` to that loop's table entry, and the loop's header
//! then adds 1 to `__kage_iterations` instead of calling `__kage_loop_iter`. At the thread's
//! next event, before anything else, the counter's growth goes to the tool as iterations of
//! that body ([`ThreadTool::iterations`]).
//!
//! Signal safety: the counter only grows (the runtime remembers what it has taken), so an
//! increment interrupted by a handler whose events take the counter loses nothing; and the
//! thread is disarmed while the runtime runs on it, so a handler that runs the same loop then
//! calls the (ignored) hook rather than counting.

use crate::registry;
use crate::stack::{FrameKind, RegionStack};
use crate::tool::ThreadTool;
use kage_abi::Region;
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::null;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Relaxed};

extern "C" {
    /// The calling thread's `__kage_fast_loop` and `__kage_iterations` (csrc/tls.c).
    fn kage_fast_loop_slot() -> *const AtomicPtr<c_void>;
    fn kage_iterations_slot() -> *const AtomicU64;
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
    /// The last body armed for and its loop's table entry (most events leave the innermost
    /// body as it was: no registry lookup for them).
    static LAST_ENTRY: Cell<(u32, *const Region)> = const { Cell::new((u32::MAX, null())) };
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

/// At the end of an event of `state`, whose tool takes iterations in bulk: arms the thread
/// when the innermost open region is a loop body.
///
/// # Safety
/// As for [`take`].
pub unsafe fn arm(state: *const (), stack: &RegionStack) {
    let Some(top) = stack.frames().last() else {
        return;
    };
    if top.kind != FrameKind::Body {
        return;
    }
    let (last_body, last_entry) = LAST_ENTRY.with(|l| l.get());
    let entry = if last_body == top.region {
        last_entry
    } else {
        // The loop's entry comes right before its body's (docs/abi.md).
        let Some(entry) = registry::region_entry(top.region.wrapping_sub(1)) else {
            return;
        };
        LAST_ENTRY.with(|l| l.set((top.region, entry)));
        entry
    };
    let (fast_loop, counter) = slots();
    TAKEN.with(|t| t.set(counter.load(Relaxed)));
    ARMED.with(|a| a.set((state, top.region)));
    fast_loop.store(entry as *mut c_void, Relaxed);
}
