//! What instrumented code reads inline about its thread's regions, published by the runtime
//! at the end of each of the thread's region events ([`publish`]): `__kage_innermost`, the
//! innermost open region's table entry. A `__kage_settle` to it would change nothing, and
//! instrumented code leaves it out (docs/abi.md, "Hooks the pass inserts"). A handler
//! interrupting the runtime may read it stale: it then leaves out a settle the busy runtime
//! would ignore anyway.

use crate::stack::RegionStack;
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::null;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

extern "C" {
    /// The calling thread's `__kage_innermost` (csrc/tls.c).
    fn kage_innermost_slot() -> *const AtomicPtr<c_void>;
}

thread_local! {
    /// The calling thread's `__kage_innermost`, once asked for.
    static INNERMOST: Cell<*const AtomicPtr<c_void>> = const { Cell::new(null()) };
}

/// At the end of an event on the calling thread: publishes the innermost open region.
pub fn publish(stack: &RegionStack) {
    let top = stack.frames().last();
    innermost().store(top.map_or(0, |f| f.entry) as *mut c_void, Relaxed);
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
