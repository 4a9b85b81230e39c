//! What every hook reads first: the process-wide gate (accesses off, runtime finished) and
//! the calling thread's state (its region stack and its tool part), found through a
//! const-initialised thread-local pointer (no lazy init, no destructor registration, which
//! could call the program's `malloc`).
//!
//! It sits below the tools, so that the C entry points a tool defines for its own
//! instrumentation (`tools/*`) reach the thread state the way the common hooks (`abi`) do.
//! The one thing it needs from above, setting the runtime and the thread up on a thread's
//! first event, is [`kage_rt_first_event`], which `runtime` defines: a link-time
//! declaration, checked against [`FirstEvent`] on both sides, rather than an import.

use crate::stack::RegionStack;
use crate::tool::ThreadTool;
use std::cell::{Cell, UnsafeCell};
use std::ptr::null;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Gate bits: any set bit stops memory-access delivery; FINISHED stops every event.
pub static GATE: AtomicU8 = AtomicU8::new(0);
pub const DISABLED: u8 = 1;
pub const FINISHED: u8 = 2;

/// The analysis has ended (report written or being written): later events are ignored.
pub fn finished() -> bool {
    GATE.load(Relaxed) & FINISHED != 0
}

/// `busy` bits.
pub const IN_RUNTIME: u8 = 1;
pub const DEAD: u8 = 2;

pub struct ThreadState {
    /// Non-zero: events on this thread are ignored (the runtime is running on this thread,
    /// or the thread has ended).
    pub busy: Cell<u8>,
    pub stack: UnsafeCell<RegionStack>,
    pub tool: UnsafeCell<Box<dyn ThreadTool>>,
}

thread_local! {
    static CURRENT: Cell<*const ThreadState> = const { Cell::new(null()) };
}

/// The calling thread's state; null before its first event.
#[inline(always)]
pub fn current() -> *const ThreadState {
    CURRENT.with(|c| c.get())
}

/// Makes `ts` the calling thread's state (`thread::current_or_create`).
pub fn set_current(ts: &'static ThreadState) {
    CURRENT.with(|c| c.set(ts));
}

impl ThreadState {
    /// Runs `f` with exclusive access to the stack and tool, marking the thread as inside
    /// the runtime so nested events (signal handlers) are ignored. Returns `None` when the
    /// thread is busy.
    ///
    /// # Safety
    /// Only on the owning thread (or the sole thread of a forked child).
    pub unsafe fn with<R>(
        &self,
        f: impl FnOnce(&mut RegionStack, &mut dyn ThreadTool) -> R,
    ) -> Option<R> {
        if self.busy.get() != 0 {
            return None;
        }
        self.busy.set(IN_RUNTIME);
        let r = f(&mut *self.stack.get(), &mut **self.tool.get());
        self.busy.set(self.busy.get() & !IN_RUNTIME);
        Some(r)
    }

    /// Exits every open frame (thread end, process end).
    ///
    /// # Safety
    /// As for [`ThreadState::with`].
    pub unsafe fn exit_all(&self) {
        self.with(|s, t| s.exit_all(t));
    }
}

/// The type of [`kage_rt_first_event`].
pub type FirstEvent = unsafe fn() -> *const ThreadState;

extern "Rust" {
    /// Defined by `runtime`: the calling thread's state for its first event, initialising
    /// the runtime and creating the state as needed; null while events are ignored (the
    /// runtime initialising on this thread, or finished).
    fn kage_rt_first_event() -> *const ThreadState;
}

const _: FirstEvent = kage_rt_first_event;

/// The thread's first event: set up the runtime and the thread first.
///
/// # Safety
/// Called from a hook, on the calling thread.
#[cold]
#[inline(never)]
pub unsafe fn first_event() -> *const ThreadState {
    kage_rt_first_event()
}

/// The calling thread's state, set up (runtime and thread) on its first event; null while
/// events are ignored.
///
/// # Safety
/// Called from a hook, on the calling thread.
#[inline(always)]
pub unsafe fn event_thread() -> *const ThreadState {
    let ts = current();
    if ts.is_null() {
        first_event()
    } else {
        ts
    }
}

/// Runs `f` with the calling thread's state marked busy (so an instrumented signal handler
/// interrupting it is ignored), unless the analysis has finished or the runtime is already
/// busy on this thread: then `None`. Sets up the runtime and the thread on their first
/// event. For the entry points a tool defines for its own instrumentation.
///
/// # Safety
/// Called from a hook, on the calling thread.
#[inline(always)]
pub unsafe fn in_runtime<R>(f: impl FnOnce(*const ThreadState) -> R) -> Option<R> {
    let ts = event_thread();
    if ts.is_null() || finished() {
        return None;
    }
    let state = &*ts;
    if state.busy.get() != 0 {
        return None;
    }
    state.busy.set(IN_RUNTIME);
    let answer = f(ts);
    state.busy.set(state.busy.get() & !IN_RUNTIME);
    Some(answer)
}

/// Runs `f` on the calling thread's tool unless accesses are off (the gate, or the runtime
/// busy on this thread); sets up the runtime and the thread on its first event. The hot
/// path of every access hook: no allocation, no lock, no system call once the thread is set
/// up.
///
/// # Safety
/// Called from a hook, on the calling thread.
#[inline(always)]
pub unsafe fn with_access_tool(f: impl FnOnce(&mut dyn ThreadTool)) {
    let mut ts = current();
    if ts.is_null() {
        ts = first_event();
        if ts.is_null() {
            return;
        }
    }
    if GATE.load(Relaxed) != 0 || (*ts).busy.get() != 0 {
        return;
    }
    f(&mut **(*ts).tool.get());
}
