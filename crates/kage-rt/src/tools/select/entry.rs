//! The C entry points only select instrumentation (`KAGE_TOOL=select`) calls: one at each
//! chunk boundary of a versioned nest (docs/abi.md, "Versioned nests"). Each definition is
//! checked against its `kage_abi::symbols` type.
//!
//! They write the entry's `struct kage_select_state`: the version and span of the next
//! chunk, and where it starts. A call to ignore (the analysis has finished, or the runtime is
//! busy on this thread: a signal handler interrupting it) answers what keeps the program
//! right without Kage's help: the running version to the end of the loop (version 0 for a
//! new entry), and the entry is not measured.

use super::policy::{Entry, Run, Stop};
use super::{now_ns, params, with_nest};
use crate::gate;
use crate::registry;
use kage_abi::select::UNBOUNDED;
use kage_abi::{symbols, Instrumentation, SelectState, VersionedNest};

const _: symbols::SelectCall = __kage_select_enter;
const _: symbols::SelectCall = __kage_select_next;
const _: symbols::SelectCall = __kage_select_exit;

const _: () = assert!(std::mem::size_of::<Entry>() <= std::mem::size_of::<[u64; 56]>());

/// `state.reserved` of an entry the runtime measures.
const MANAGED: u32 = 0x6b61_6765;
/// `state.at` until the code writes it: an entry left by a `break` writes nothing.
const UNWRITTEN: i64 = i64::MIN;

/// The policy's part of the state.
///
/// # Safety
/// `state` points to a live `struct kage_select_state`.
unsafe fn entry_of(state: *mut SelectState) -> &'static mut Entry {
    &mut *((*state).runtime.as_mut_ptr() as *mut Entry)
}

unsafe fn apply(state: *mut SelectState, run: Run) {
    (*state).version = run.version as u32;
    (*state).span = run.span.max(1);
    (*state).at = UNWRITTEN;
}

/// The switch of `nest` is reached: the first chunk's version and span.
///
/// # Safety
/// `nest` is null or points to a `struct kage_versioned_nest` whose `global_id` is
/// writable and whose other fields and versions stay as they are; `state` points to the
/// entry's `struct kage_select_state`, which the code does not touch during the call.
#[no_mangle]
pub unsafe extern "C" fn __kage_select_enter(nest: *mut VersionedNest, state: *mut SelectState) {
    if gate::current().is_null() {
        // This thread's first event: only select code calls this, so the runtime is told
        // what the program was built for even when no module announced it yet.
        registry::note_instrumentation(Instrumentation::Select);
    }
    (*state).resume = 0;
    (*state).reserved = 0;
    apply(
        state,
        Run {
            version: 0,
            span: UNBOUNDED,
        },
    );
    let p = params();
    let run =
        gate::in_runtime(|_| with_nest(nest, |policy| policy.enter(entry_of(state), &p, now_ns())))
            .flatten();
    if let Some(run) = run {
        (*state).reserved = MANAGED;
        apply(state, run);
    }
}

/// A chunk of `nest` stopped at its bound with iterations left: the next chunk's version,
/// span and start.
///
/// # Safety
/// As for [`__kage_select_enter`], with the state of an entry it began.
#[no_mangle]
pub unsafe extern "C" fn __kage_select_next(nest: *mut VersionedNest, state: *mut SelectState) {
    let s = &mut *state;
    let stop = Stop {
        lo: s.lo,
        at: s.at,
        bound: s.bound,
        init: s.init,
    };
    s.resume = 1;
    s.lo = s.at;
    let run = if s.reserved == MANAGED {
        let p = params();
        gate::in_runtime(|_| {
            with_nest(nest, |policy| {
                policy.next(entry_of(state), &p, &stop, now_ns())
            })
        })
        .flatten()
    } else {
        None
    };
    match run {
        Some(run) => apply(state, run),
        None => {
            let version = s.version as usize;
            s.reserved = 0;
            apply(
                state,
                Run {
                    version,
                    span: UNBOUNDED,
                },
            );
        }
    }
}

/// The outermost loop of `nest` ended: its own test failed, or a `break` left it.
///
/// # Safety
/// As for [`__kage_select_next`].
#[no_mangle]
pub unsafe extern "C" fn __kage_select_exit(nest: *mut VersionedNest, state: *mut SelectState) {
    let s = &*state;
    if s.reserved != MANAGED {
        return;
    }
    let stop = (s.at != UNWRITTEN).then_some(Stop {
        lo: s.lo,
        at: s.at,
        bound: s.bound,
        init: s.init,
    });
    gate::in_runtime(|_| {
        with_nest(nest, |policy| {
            policy.exit(entry_of(state), stop.as_ref(), now_ns())
        })
    });
}
