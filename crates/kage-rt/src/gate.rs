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

use crate::inline;
use crate::stack::RegionStack;
use crate::tool::ThreadTool;
use std::cell::{Cell, UnsafeCell};
use std::ptr::null;
use std::sync::atomic::{
    compiler_fence, AtomicBool, AtomicI32, AtomicU32,
    Ordering::{Acquire, Relaxed, Release, SeqCst},
};

extern "C" {
    /// `__kage_gate` (csrc/tls.c), which count instrumentation reads inline.
    static __kage_gate: AtomicU32;
}

/// Gate bits: any set bit stops memory-access delivery; FINISHED stops every event. The
/// exported `__kage_gate`, so that inline counting stops with the calls.
// SAFETY: a C global of the runtime, never freed; only accessed atomically.
pub static GATE: &AtomicU32 = unsafe { &__kage_gate };
pub const DISABLED: u32 = 1;
pub const FINISHED: u32 = 2;

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
    /// The kernel's id of the thread, to signal it (`thread::close_others`): it changes
    /// when a new thread takes over the state of one that ended (`thread::current_or_create`).
    pub tid: AtomicI32,
    /// A coroutine's context on that thread (`contexts`), not the thread itself.
    pub context: bool,
    /// Every region of the thread has been exited and its tool told that it ended: set by
    /// the thread itself, read by the thread that writes the report.
    pub closed: AtomicBool,
    /// The thread runs the handler of `thread::close_signal` (which blocks the signal while
    /// it runs): set and cleared by the thread itself.
    pub closing: AtomicBool,
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

/// Whether the runtime is busy on the calling thread (for [`crate::handlers`]: a signal's
/// handler then waits).
pub fn runtime_busy() -> bool {
    let ts = current();
    SETTING_UP.with(|s| s.get())
        // SAFETY: the calling thread's own state.
        || (!ts.is_null() && unsafe { (*ts).busy.get() } & IN_RUNTIME != 0)
}

/// The thread leaves the runtime (clears [`IN_RUNTIME`]), then runs the program's handlers
/// of the signals that came meanwhile ([`crate::handlers`]): none runs inside the runtime.
///
/// # Safety
/// On the thread that owns `state`, at the end of a span it marked [`IN_RUNTIME`].
#[inline(always)]
pub unsafe fn leave_runtime(state: &ThreadState) {
    // Keep the compiler from moving the runtime's writes out of the busy span (no
    // instruction is emitted): the handlers run on this thread.
    compiler_fence(SeqCst);
    state.busy.set(state.busy.get() & !IN_RUNTIME);
    compiler_fence(SeqCst);
    if crate::handlers::pending() {
        crate::handlers::deliver_pending();
    }
}

impl ThreadState {
    /// The state of the calling thread (a coroutine's context on it when `context`), with
    /// the tool part `tool`, before its first event.
    pub fn new(tool: Box<dyn ThreadTool>, context: bool) -> Self {
        ThreadState {
            busy: Cell::new(0),
            stack: UnsafeCell::new(RegionStack::new()),
            tool: UnsafeCell::new(tool),
            // SAFETY: gettid has no preconditions.
            tid: AtomicI32::new(unsafe { libc::gettid() }),
            context,
            closed: AtomicBool::new(false),
            closing: AtomicBool::new(false),
        }
    }

    /// Runs `f` with exclusive access to the stack and tool, marking the thread as inside
    /// the runtime so nested events (signal handlers) are ignored. Returns `None` when the
    /// thread is busy. The thread's innermost region is published after (`inline`).
    ///
    /// # Safety
    /// Only on the owning thread (or the sole thread of a forked child).
    pub unsafe fn with<R>(
        &self,
        f: impl FnOnce(&mut RegionStack, &mut dyn ThreadTool) -> R,
    ) -> Option<R> {
        self.busy_with(|| {
            let (stack, tool) = (&mut *self.stack.get(), &mut **self.tool.get());
            let r = f(stack, tool);
            inline::publish(stack, tool.measures_iterations());
            r
        })
    }

    /// [`with`](Self::with) for an event of the tool's own that leaves the region stack as
    /// it is (a footprint leaf's end): nothing to publish.
    ///
    /// # Safety
    /// As for [`with`](Self::with).
    pub unsafe fn with_tool<R>(&self, f: impl FnOnce(&mut dyn ThreadTool) -> R) -> Option<R> {
        self.busy_with(|| f(&mut **self.tool.get()))
    }

    /// Runs `f` with the thread marked inside the runtime, unless it already is.
    ///
    /// # Safety
    /// Only on the owning thread (or the sole thread of a forked child).
    #[inline(always)]
    unsafe fn busy_with<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        if self.busy.get() != 0 {
            return None;
        }
        self.busy.set(IN_RUNTIME);
        compiler_fence(SeqCst);
        let r = f();
        leave_runtime(self);
        Some(r)
    }

    /// The program ends on this thread: exits every open frame and tells the tool, which
    /// frees what the report does not need before the report is built. False when the
    /// thread is inside the runtime: nothing is done.
    ///
    /// # Safety
    /// As for [`ThreadState::with`].
    pub unsafe fn end_program(&self) -> bool {
        self.with(|s, t| {
            s.exit_all(t);
            t.program_end();
        })
        .is_some()
    }

    /// The thread ends, or the program does: exits every open frame and tells the tool the
    /// thread ended, once. False when the thread is inside the runtime (a signal handler
    /// interrupted it there): nothing is done, try again later.
    ///
    /// # Safety
    /// As for [`ThreadState::with`].
    pub unsafe fn close(&self) -> bool {
        if self.closed.load(Acquire) {
            return true;
        }
        let done = self
            .with(|s, t| {
                s.exit_all(t);
                t.thread_exit();
            })
            .is_some();
        if done {
            self.closed.store(true, Release);
        }
        done
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

thread_local! {
    /// The runtime or the calling thread's state is being set up (no state is in force yet,
    /// and the runtime holds its locks): the program's signal handlers wait meanwhile.
    static SETTING_UP: Cell<bool> = const { Cell::new(false) };
}

/// The thread's first event: set up the runtime and the thread first. A signal that comes
/// meanwhile has its handler run after (its code would need the locks the set-up holds).
///
/// # Safety
/// Called from a hook, on the calling thread.
#[cold]
#[inline(never)]
pub unsafe fn first_event() -> *const ThreadState {
    SETTING_UP.with(|s| s.set(true));
    compiler_fence(SeqCst);
    let ts = kage_rt_first_event();
    compiler_fence(SeqCst);
    SETTING_UP.with(|s| s.set(false));
    if crate::handlers::pending() {
        crate::handlers::deliver_pending();
    }
    ts
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

/// Runs a region event on the calling thread: `f` with its region stack and tool part (see
/// [`ThreadState::with`]), unless the analysis has finished or the thread is busy; sets up
/// the runtime and the thread on their first event.
///
/// # Safety
/// Called from a hook, on the calling thread.
#[inline(always)]
pub unsafe fn region_event(f: impl FnOnce(&mut RegionStack, &mut dyn ThreadTool)) {
    let ts = event_thread();
    if ts.is_null() || finished() {
        return;
    }
    (*ts).with(f);
}

/// [`region_event`] for an event of the tool's own that leaves the region stack as it is
/// ([`ThreadState::with_tool`]).
///
/// # Safety
/// Called from a hook, on the calling thread.
#[inline(always)]
pub unsafe fn tool_event(f: impl FnOnce(&mut dyn ThreadTool)) {
    let ts = event_thread();
    if ts.is_null() || finished() {
        return;
    }
    (*ts).with_tool(f);
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
    (*ts).busy_with(|| f(ts))
}

/// Runs `f` on the calling thread's tool unless accesses are off (the gate, or the runtime
/// busy on this thread); sets up the runtime and the thread on its first event. The hot
/// path of every access hook: no allocation, no lock, no system call once the thread is set
/// up. The thread is marked busy meanwhile, so that a signal handler interrupting `f` (an
/// instrumented one, or the runtime's own at the end of the program) leaves the tool alone.
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
    let state = &*ts;
    if GATE.load(Relaxed) != 0 || state.busy.get() != 0 {
        return;
    }
    state.busy.set(IN_RUNTIME);
    // The handler runs on this thread: keep the compiler from moving the tool's writes
    // out of the busy span (no instruction is emitted).
    compiler_fence(SeqCst);
    f(&mut **state.tool.get());
    leave_runtime(state);
}
