//! What instrumented code reads inline about its thread's regions, published by the runtime
//! at the end of each of the thread's region events ([`publish`]): `__kage_innermost`, the
//! innermost open region's table entry. A `__kage_settle` to it would change nothing, and
//! instrumented code leaves it out (docs/abi.md, "Hooks the pass inserts"). A handler
//! interrupting the runtime may read it stale: it then leaves out a settle the busy runtime
//! would ignore anyway.

use crate::stack::{Frame, FrameKind, RegionStack};
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

/// At the end of an event on the calling thread: publishes the innermost open region. A
/// loop body is published as itself only when the tool does not tell iterations apart
/// (`iterations` false): instrumented code then leaves out the loop's `__kage_loop_iter`
/// while the body is innermost. Otherwise its entry's address with the low bit set, which
/// no entry has (entries are aligned), so that every iteration calls the runtime (a settle
/// to the body calls it too, and changes nothing).
pub fn publish(stack: &RegionStack, iterations: bool) {
    innermost().store(
        published(stack.frames().last(), iterations) as *mut c_void,
        Relaxed,
    );
}

/// What [`publish`] stores for the innermost frame `top`.
fn published(top: Option<&Frame>, iterations: bool) -> usize {
    match top {
        None => 0,
        Some(f) if iterations && f.kind == FrameKind::Body => f.entry | 1,
        Some(f) => f.entry,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: FrameKind, entry: usize) -> Frame {
        Frame {
            region: 1,
            kind,
            sp: 0,
            entry,
        }
    }

    /// A body is published as itself only for tools that do not tell iterations apart;
    /// other frames always are.
    #[test]
    fn a_body_is_published_as_itself_only_when_iterations_do_not_matter() {
        let body = frame(FrameKind::Body, 0x1040);
        assert_eq!(published(Some(&body), false), 0x1040);
        assert_eq!(published(Some(&body), true), 0x1041);
        for kind in [FrameKind::Function, FrameKind::Loop, FrameKind::Inlined] {
            let f = frame(kind, 0x2000);
            assert_eq!(published(Some(&f), true), 0x2000);
            assert_eq!(published(Some(&f), false), 0x2000);
        }
        assert_eq!(published(None, true), 0);
    }
}
