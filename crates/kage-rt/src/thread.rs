//! The threads: every thread's state ([`gate::ThreadState`]) is allocated on its first
//! event, registered in a global list and never freed; a pthread key destructor exits the
//! thread's open regions when it ends.
//!
//! Below the runtime: it is given what it needs (the tool, the pthread key).

use crate::gate::{self, ThreadState};
use crate::stack::RegionStack;
use crate::sync::SpinLock;
use crate::tool::Tool;
use std::cell::{Cell, UnsafeCell};

/// Every thread state of this process (pointers to leaked states).
pub static THREADS: SpinLock<Vec<usize>> = SpinLock::new(Vec::new());

/// The calling thread's state, created on its first event with `tool`'s per-thread part;
/// `key` is the pthread key whose destructor ([`thread_end`]) ends it.
pub fn current_or_create(tool: &'static dyn Tool, key: libc::pthread_key_t) -> *const ThreadState {
    let p = gate::current();
    if !p.is_null() {
        return p;
    }
    let mut threads = THREADS.lock();
    // Tools take their own locks only while THREADS is held (see runtime's fork handlers).
    let ts: &'static ThreadState = Box::leak(Box::new(ThreadState {
        busy: Cell::new(0),
        stack: UnsafeCell::new(RegionStack::new()),
        tool: UnsafeCell::new(tool.new_thread()),
    }));
    threads.push(ts as *const _ as usize);
    drop(threads);
    gate::set_current(ts);
    unsafe { libc::pthread_setspecific(key, ts as *const ThreadState as *const libc::c_void) };
    ts
}

/// pthread key destructor: the thread ends.
///
/// # Safety
/// Called by libc with the pointer stored by [`current_or_create`], on the ending thread.
pub unsafe extern "C" fn thread_end(p: *mut libc::c_void) {
    let ts = &*(p as *const ThreadState);
    if !gate::finished() {
        ts.with(|s, t| {
            s.exit_all(t);
            t.thread_exit();
        });
    }
    ts.busy.set(gate::DEAD);
}

/// Number of threads that ran instrumented code.
pub fn count() -> usize {
    THREADS.lock().len()
}
