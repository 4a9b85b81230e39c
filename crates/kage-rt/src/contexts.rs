//! Coroutines: the contexts a program switches between with `swapcontext` and `setcontext`
//! (the pass sends those calls here) each run with a thread state of their own (region
//! stack and tool part), as threads do, so that what a coroutine does is charged to its own
//! regions, and its regions stay open while it is suspended.
//!
//! Which state runs a context: the one that saved it (`swapcontext`'s first argument), or a
//! new one for a context made anew (`makecontext`, after which the pass calls
//! `__kage_context_made`) when it first runs. A context the runtime never saw (captured with
//! `getcontext`, or switched to by code that is not instrumented) runs with the state
//! already in force. A thread's contexts are closed with it (`thread::close_suspended`).
//!
//! At the top, beside `abi`: it makes thread states with the runtime's tool.

use crate::gate::{self, ThreadState};
use crate::runtime;
use crate::sync::SpinLock;
use crate::thread;
use kage_abi::symbols;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};

/// What runs a context the runtime saw, by its `ucontext_t` address.
#[derive(Clone, Copy)]
enum Runs {
    /// Made anew: a new state when it runs.
    Made,
    /// This thread state (an address).
    State(usize),
}

static CONTEXTS: SpinLock<Option<HashMap<usize, Runs>>> = SpinLock::new(None);

extern "C" {
    fn swapcontext(oucp: *mut c_void, ucp: *const c_void) -> c_int;
    fn setcontext(ucp: *const c_void) -> c_int;
}

fn note(ucp: usize, runs: Runs) {
    static FORK_HANDLER: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain function.
    FORK_HANDLER.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(fork_child));
    });
    CONTEXTS
        .lock()
        .get_or_insert_with(HashMap::new)
        .insert(ucp, runs);
}

/// The state to run `ucp` with: the one that saved it, a new one when it was made anew,
/// `None` when the runtime never saw it (keep the state in force) or has finished.
fn state_for(ucp: usize) -> Option<&'static ThreadState> {
    let runs = CONTEXTS
        .lock()
        .as_ref()
        .and_then(|m| m.get(&ucp).copied())?;
    match runs {
        // SAFETY: states are never freed.
        Runs::State(ts) => Some(unsafe { &*(ts as *const ThreadState) }),
        Runs::Made => {
            let rt = runtime::ensure_init()?;
            if gate::finished() {
                return None;
            }
            // Made outside the map's lock: making a state takes the thread list's.
            let ts = thread::new_context(rt.tool);
            note(ucp, Runs::State(ts as *const ThreadState as usize));
            Some(ts)
        }
    }
}

/// Leaves the calling thread's state in force, `me`, for `ucp`'s: `me`'s tool takes what
/// the thread's inline state holds for it.
///
/// # Safety
/// `me` is the calling thread's state in force.
unsafe fn switch_from(me: &'static ThreadState, ucp: *const c_void) {
    me.with(|_, tool| tool.suspend());
    let target = state_for(ucp as usize).unwrap_or(me);
    target.with(|_, tool| tool.resume());
    gate::set_current(target);
}

/// The calling context was resumed: `me`'s state is in force again.
///
/// # Safety
/// `me` is the state the calling context runs with.
unsafe fn resumed(me: &'static ThreadState) {
    gate::set_current(me);
    me.with(|_, tool| tool.resume());
}

/// `swapcontext(oucp, ucp)` with `ucp`'s state in force until the calling context is
/// resumed.
///
/// # Safety
/// As `swapcontext`: `oucp` and `ucp` are valid contexts.
#[no_mangle]
pub unsafe extern "C" fn __kage_swapcontext(oucp: *mut c_void, ucp: *const c_void) -> c_int {
    let me = gate::current();
    if me.is_null() || (*me).busy.get() != 0 {
        return swapcontext(oucp, ucp);
    }
    let me: &'static ThreadState = &*me;
    note(
        oucp as usize,
        Runs::State(me as *const ThreadState as usize),
    );
    switch_from(me, ucp);
    let result = swapcontext(oucp, ucp);
    // Resumed: by a switch to `oucp`, or at the end of a context `oucp` was the link of
    // (which the C library makes, not instrumented code).
    resumed(me);
    result
}

/// `setcontext(ucp)` with `ucp`'s state in force.
///
/// # Safety
/// As `setcontext`: `ucp` is a valid context.
#[no_mangle]
pub unsafe extern "C" fn __kage_setcontext(ucp: *const c_void) -> c_int {
    let me = gate::current();
    if me.is_null() || (*me).busy.get() != 0 {
        return setcontext(ucp);
    }
    let me: &'static ThreadState = &*me;
    switch_from(me, ucp);
    // Returns only when it fails.
    let result = setcontext(ucp);
    resumed(me);
    result
}

/// `makecontext(ucp, ...)` was called: `ucp` starts a new coroutine when it next runs.
///
/// # Safety
/// `ucp` is only recorded, never read.
#[no_mangle]
pub unsafe extern "C" fn __kage_context_made(ucp: *mut c_void) {
    note(ucp as usize, Runs::Made);
}

const _: symbols::SwapContext = __kage_swapcontext;
const _: symbols::SetContext = __kage_setcontext;
const _: symbols::ContextMade = __kage_context_made;

/// In a forked child: the lock may have been held by a thread that is gone.
unsafe extern "C" fn fork_child() {
    CONTEXTS.release_in_fork_child();
}
