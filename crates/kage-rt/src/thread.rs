//! Per-thread state: the region stack and the thread's tool part.
//!
//! The hot path finds it through a const-initialised thread-local pointer (no lazy init,
//! no destructor registration, which could call the program's `malloc`). The state is
//! allocated on the thread's first event, registered in a global list and never freed; a
//! pthread key destructor exits the thread's open regions when it ends.

use crate::runtime;
use crate::stack::RegionStack;
use crate::sync::SpinLock;
use crate::tools::ThreadTool;
use std::cell::{Cell, UnsafeCell};
use std::ptr::null;

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

/// Every thread state of this process (pointers to leaked states).
pub static THREADS: SpinLock<Vec<usize>> = SpinLock::new(Vec::new());

#[inline(always)]
pub fn current() -> *const ThreadState {
    CURRENT.with(|c| c.get())
}

/// The calling thread's state, created on its first event (the runtime must be initialised).
pub fn current_or_create(rt: &'static runtime::Runtime) -> *const ThreadState {
    let p = current();
    if !p.is_null() {
        return p;
    }
    let mut threads = THREADS.lock();
    // Tools take their own locks only while THREADS is held (see runtime's fork handlers).
    let ts: &'static ThreadState = Box::leak(Box::new(ThreadState {
        busy: Cell::new(0),
        stack: UnsafeCell::new(RegionStack::new()),
        tool: UnsafeCell::new(rt.tool.new_thread()),
    }));
    threads.push(ts as *const _ as usize);
    drop(threads);
    CURRENT.with(|c| c.set(ts));
    runtime::set_thread_key(ts as *const _ as *mut _);
    ts
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

/// pthread key destructor: the thread ends.
///
/// # Safety
/// Called by libc with the pointer stored by `set_thread_key`, on the ending thread.
pub unsafe extern "C" fn thread_end(p: *mut libc::c_void) {
    let ts = &*(p as *const ThreadState);
    if !runtime::finished() {
        ts.with(|s, t| {
            s.exit_all(t);
            t.thread_exit();
        });
    }
    ts.busy.set(DEAD);
}

/// Number of threads that ran instrumented code.
pub fn count() -> usize {
    THREADS.lock().len()
}
