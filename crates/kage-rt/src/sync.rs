//! A minimal spin lock. The runtime's locks must be takeable in `pthread_atfork`'s prepare
//! handler and released in the parent/child handlers (a guard cannot cross those calls), and
//! must not depend on anything the program may interpose.

use std::cell::Cell;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    /// Runtime locks held by this thread: a fatal-signal handler must not build a report
    /// (which allocates and locks) when it interrupted the runtime holding one.
    static HELD: Cell<u32> = const { Cell::new(0) };
}

/// Number of [`SpinLock`]s the calling thread holds.
pub fn locks_held() -> u32 {
    HELD.with(|h| h.get())
}

thread_local! {
    /// A signal that ends the process, which came while this thread held a lock
    /// ([`defer_while_locked`]); 0: none.
    static DEFERRED: Cell<i32> = const { Cell::new(0) };
}

/// Keeps `sig`, a signal that is to end the process, until the calling thread releases its
/// last lock, which raises it again: the report cannot be built while a lock is held, and
/// is once it is released. False when the thread holds no lock.
pub fn defer_while_locked(sig: i32) -> bool {
    if locks_held() == 0 {
        return false;
    }
    DEFERRED.with(|d| d.set(sig));
    true
}

pub struct SpinLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by `locked`.
unsafe impl<T: Send> Sync for SpinLock<T> {}
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub const fn new(v: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            data: UnsafeCell::new(v),
        }
    }

    /// Takes the lock without a guard (fork handlers); pair with [`SpinLock::raw_unlock`].
    pub fn raw_lock(&self) {
        HELD.with(|h| h.set(h.get() + 1));
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                // Let the holder run (2 cores shared by many threads in practice).
                unsafe { libc::sched_yield() };
            }
        }
    }

    /// # Safety
    /// The caller holds the lock (via `raw_lock`), or is the only thread left (fork child).
    pub unsafe fn raw_unlock(&self) {
        let held = HELD.with(|h| {
            h.set(h.get().saturating_sub(1));
            h.get()
        });
        self.locked.store(false, Ordering::Release);
        if held == 0 {
            let sig = DEFERRED.with(|d| d.replace(0));
            if sig != 0 {
                libc::raise(sig);
            }
        }
    }

    /// Frees the lock whoever held it: in a forked child, a lock another thread of the
    /// parent held at the fork would stay taken forever.
    ///
    /// # Safety
    /// Only in a forked child, before anything else uses the lock.
    pub unsafe fn release_in_fork_child(&self) {
        self.locked.store(false, Ordering::Release);
    }

    pub fn lock(&self) -> SpinGuard<'_, T> {
        self.raw_lock();
        SpinGuard { lock: self }
    }

    /// Takes the lock if it is free within `spins` attempts (signal handlers must not wait
    /// forever for a lock the interrupted code may hold).
    pub fn try_lock_for(&self, spins: u32) -> Option<SpinGuard<'_, T>> {
        for i in 0..spins {
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                HELD.with(|h| h.set(h.get() + 1));
                return Some(SpinGuard { lock: self });
            }
            if i % 64 == 63 {
                unsafe { libc::sched_yield() };
            }
        }
        None
    }
}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        unsafe { self.lock.raw_unlock() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI32, Ordering::Relaxed};

    static RAISED: AtomicI32 = AtomicI32::new(0);

    extern "C" fn note(sig: libc::c_int) {
        RAISED.store(sig, Relaxed);
    }

    #[test]
    fn a_deferred_signal_is_raised_when_the_last_lock_is_released() {
        // A real-time signal no other test uses, with a handler that only notes it.
        let sig = libc::SIGRTMIN() + 7;
        unsafe { libc::signal(sig, note as *const () as libc::sighandler_t) };
        let (outer, inner) = (SpinLock::new(()), SpinLock::new(()));
        assert!(
            !defer_while_locked(sig),
            "no lock held: nothing to wait for"
        );
        let outer_guard = outer.lock();
        let inner_guard = inner.lock();
        assert!(defer_while_locked(sig));
        drop(inner_guard);
        assert_eq!(RAISED.load(Relaxed), 0, "a lock is still held");
        drop(outer_guard);
        assert_eq!(RAISED.load(Relaxed), sig);
        assert_eq!(DEFERRED.with(|d| d.get()), 0, "raised once");
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}
