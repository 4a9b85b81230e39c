//! The C entry points only hcpa instrumentation (`KAGE_TOOL=hcpa`) calls: the timestamp
//! calls of docs/hcpa.md, "The instrumentation", each a thin shim over the calling thread's
//! [`Engine`]. Each definition is checked against its `kage_abi::symbols` type.
//!
//! They are ignored (but `__kage_hcpa_leaf`, a region event, which then carries no work)
//! while accesses are off (`kage_set_enabled(0)`), once the analysis has
//! finished, and while the runtime is busy on the thread (a signal handler interrupting it);
//! they mark the thread busy while they run, so an instrumented signal handler never sees
//! the engine half-updated. A thread whose tool is not hcpa ignores them.

use super::engine::Engine;
use super::trace::{self, event, Cands};
use super::HcpaThread;
use crate::gate::{self, ThreadState};
use crate::registry;
use kage_abi::{symbols, Candidate, Region};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;

const _: symbols::HcpaFrame = __kage_hcpa_frame;
const _: symbols::HcpaWork = __kage_hcpa_work;
const _: symbols::HcpaLeaf = __kage_hcpa_leaf;
const _: symbols::HcpaTs = __kage_hcpa_ts;
// `__kage_hcpa_hoist`: `__kage_hcpa_ts`'s type.
const _: symbols::HcpaTs = __kage_hcpa_hoist;
const _: symbols::HcpaPhi = __kage_hcpa_phi;
const _: symbols::HcpaLoad = __kage_hcpa_load;
const _: symbols::HcpaStore = __kage_hcpa_store;
const _: symbols::HcpaMem = __kage_hcpa_mem;
const _: symbols::HcpaCall = __kage_hcpa_call;
// `__kage_hcpa_arg(uint32_t index, const struct kage_candidate *cands, uint32_t n)`:
// `__kage_hcpa_ts`'s type.
const _: symbols::HcpaTs = __kage_hcpa_arg;
const _: symbols::HcpaReturn = __kage_hcpa_return;
const _: symbols::HcpaResult = __kage_hcpa_result;

thread_local! {
    /// The thread state whose hcpa thread was last looked up on this thread, and that
    /// thread (null when its tool is not hcpa). A thread state is never freed and its tool
    /// never replaced (`thread::current_or_create`), so the pointer stays valid: the
    /// downcast is made once per thread, not per event.
    static THREAD: Cell<(*const ThreadState, *mut HcpaThread)> =
        const { Cell::new((std::ptr::null(), std::ptr::null_mut())) };
}

/// The hcpa thread of `ts`'s tool, null when it is not hcpa.
///
/// # Safety
/// `ts` is the calling thread's state, marked busy.
#[inline(always)]
unsafe fn thread_of(ts: *const ThreadState) -> *mut HcpaThread {
    let (cached, thread) = THREAD.get();
    if cached == ts {
        thread
    } else {
        look_up_thread(ts)
    }
}

#[cold]
#[inline(never)]
unsafe fn look_up_thread(ts: *const ThreadState) -> *mut HcpaThread {
    let tool = &mut **(*ts).tool.get();
    let thread = tool
        .as_any_mut()
        .and_then(|any| any.downcast_mut::<HcpaThread>())
        .map_or(std::ptr::null_mut(), |thread| thread as *mut HcpaThread);
    THREAD.set((ts, thread));
    thread
}

/// Runs `f` on the calling thread's hcpa thread, unless the event is to be ignored (see the
/// module docs); sets up the runtime and the thread on its first event. No allocation, lock
/// or system call once the thread is set up. As `ThreadState::with`, inlined, with the
/// thread found through [`THREAD`].
///
/// `f` gets whether accesses are on: a region event (`region_event`) runs while they are
/// off too, as the region hooks do until the analysis has finished.
#[inline(always)]
unsafe fn with_thread(region_event: bool, f: impl FnOnce(&mut HcpaThread, bool)) {
    let ts = gate::event_thread();
    if ts.is_null() {
        return;
    }
    let on = gate::GATE.load(Relaxed) == 0;
    let delivered = on || (region_event && !gate::finished());
    if !delivered {
        return;
    }
    let state = &*ts;
    if state.busy.get() != 0 {
        return;
    }
    state.busy.set(gate::IN_RUNTIME);
    let thread = thread_of(ts);
    if !thread.is_null() {
        f(&mut *thread, on);
    }
    gate::leave_runtime(state);
}

/// [`with_thread`] on the thread's engine, for a timestamp call.
#[inline(always)]
unsafe fn with_engine(f: impl FnOnce(&mut Engine)) {
    with_thread(false, |thread, _| f(&mut thread.engine));
}

/// The `n` candidates at `cands`.
///
/// # Safety
/// `cands` is null, or `n` is 0, or it points to `n` readable candidates that outlive the
/// call.
#[inline(always)]
pub(super) unsafe fn candidates<'a>(cands: *const Candidate, n: u32) -> &'a [Candidate] {
    if cands.is_null() || n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(cands, n as usize)
    }
}

/// The function `function` starts (right after its `__kage_func_enter`): its activation
/// gets `slots` shadow registers; when the innermost pending call was made to `function`,
/// its argument times fill slots `0..`.
///
/// # Safety
/// Always safe to call; `function` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_frame(slots: u32, function: *const c_void) {
    with_engine(|e| {
        event!("frame {slots} {:x}", function as usize);
        e.frame(slots, function as usize)
    });
}

/// A block's static `cost` is added to the work of every open region instance.
///
/// # Safety
/// Always safe to call.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_work(cost: u64) {
    with_engine(|e| {
        event!("work {cost}");
        e.work(cost)
    });
}

/// An instance of each of the inlined calls `r[0..n]`, a static leaf `r[n - 1]` inside
/// calls that hold nothing but it, each the only child of the one before (docs/hcpa.md,
/// "Static leaves"): `work` is added to the work of every open level, and each instance
/// recorded with that work and critical path `cp`, as if entered one inside the other and
/// left with nothing else in between. While accesses are off they are recorded with
/// neither, as their region hooks and the ignored timestamp calls would have.
///
/// # Safety
/// `r` points to `n` ≥ 1 consecutive entries of the calling module's region table.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_leaf(r: *mut Region, n: u32, work: u64, cp: u64) {
    let n = n.max(1);
    with_thread(true, |thread, on| {
        let (work, cp) = if on { (work, cp) } else { (0, 0) };
        // The module's regions are registered, or rejected, together.
        let Some(first) = registry::global_id(r) else {
            thread.engine.work(work);
            return;
        };
        let region = |i: u32| {
            if i == 0 {
                first
            } else {
                registry::global_id(r.add(i as usize)).unwrap_or(first)
            }
        };
        event!("leaf {work} {cp}{}", trace::Regions((0..n).map(region)));
        thread.leaf(n, region, work, cp)
    });
}

/// `t = max(cands)`, written to slot `dst` unless it is `NONE`.
///
/// # Safety
/// `cands` points to `n` candidates (or `n` is 0).
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_ts(dst: u32, cands: *const Candidate, n: u32) {
    with_engine(|e| {
        let cands = candidates(cands, n);
        event!("ts {dst} {}", Cands(cands));
        e.ts(dst, cands)
    });
}

/// `t = max(cands)`, written to slot `dst`, without raising any critical path: the
/// candidates a loop's calls share, computed once as the loop is entered (docs/hcpa.md).
///
/// # Safety
/// `cands` points to `n` candidates (or `n` is 0).
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_hoist(dst: u32, cands: *const Candidate, n: u32) {
    with_engine(|e| {
        let cands = candidates(cands, n);
        event!("hoist {dst} {}", Cands(cands));
        e.hoist(dst, cands)
    });
}

/// A phi: `t = max(t(src) + offset, t(cond))` → slot `dst`.
///
/// # Safety
/// Always safe to call; bad slots read 0 and are not written.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_phi(dst: u32, src: u32, offset: u32, cond: u32) {
    with_engine(|e| {
        event!("phi {dst} {src} {offset} {cond}");
        e.phi(dst, src, offset, cond)
    });
}

/// Before a load of `size` bytes at `addr`: `t = max(cands, the granules read) + cost` →
/// slot `dst`.
///
/// # Safety
/// `cands` points to `n` candidates (or `n` is 0); `addr` is only recorded, never
/// dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_load(
    dst: u32,
    addr: *const c_void,
    size: u64,
    cost: u32,
    cands: *const Candidate,
    n: u32,
) {
    with_engine(|e| {
        let cands = candidates(cands, n);
        event!(
            "load {dst} {:x} {size} {cost} {}",
            addr as u64,
            Cands(cands)
        );
        e.load(dst, addr as u64, size, cost, cands)
    });
}

/// Before a store of `size` bytes at `addr`: `t = max(cands) + cost` → the granules
/// written.
///
/// # Safety
/// `cands` points to `n` candidates (or `n` is 0); `addr` is only recorded, never
/// dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_store(
    addr: *const c_void,
    size: u64,
    cost: u32,
    cands: *const Candidate,
    n: u32,
) {
    with_engine(|e| {
        let cands = candidates(cands, n);
        event!("store {:x} {size} {cost} {}", addr as u64, Cands(cands));
        e.store(addr as u64, size, cost, cands)
    });
}

/// Before `memcpy`/`memmove` (`src` null: `memset`) of `len` bytes: `c = cost_per_8_bytes ×
/// ⌈len / 8⌉` is added to the work; `t = max(cands, granules of src) + c` → the granules of
/// `dst`.
///
/// # Safety
/// `cands` points to `n` candidates (or `n` is 0); `dst` and `src` are only recorded, never
/// dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_mem(
    dst: *const c_void,
    src: *const c_void,
    len: u64,
    cost_per_8_bytes: u32,
    cands: *const Candidate,
    n: u32,
) {
    let src = (!src.is_null()).then_some(src as u64);
    with_engine(|e| {
        let cands = candidates(cands, n);
        let from = src.unwrap_or(0);
        event!(
            "mem {:x} {from:x} {len} {cost_per_8_bytes} {}",
            dst as u64,
            Cands(cands)
        );
        e.mem(dst as u64, src, len, cost_per_8_bytes, cands)
    });
}

/// Before a call that may reach instrumented code: opens a pending call to `callee`.
///
/// # Safety
/// Always safe to call; `callee` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_call(callee: *const c_void) {
    with_engine(|e| {
        event!("call {:x}", callee as usize);
        e.call(callee as usize)
    });
}

/// Argument `index` of the pending call just opened has the time `max(cands)`.
///
/// # Safety
/// `cands` points to `n` candidates (or `n` is 0).
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_arg(index: u32, cands: *const Candidate, n: u32) {
    with_engine(|e| {
        let cands = candidates(cands, n);
        event!("arg {index} {}", Cands(cands));
        e.arg(index, cands)
    });
}

/// Before the function returns: the returned value's time, `max(cands)`, for its caller.
///
/// # Safety
/// `cands` points to `n` candidates (or `n` is 0).
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_return(cands: *const Candidate, n: u32) {
    with_engine(|e| {
        let cands = candidates(cands, n);
        event!("ret {}", Cands(cands));
        e.ret(cands)
    });
}

/// After the call: closes the pending call; slot `dst` gets the callee's returned time, or
/// (code that is not instrumented) the arguments' times + `cost`, `cost` then added to the
/// work.
///
/// # Safety
/// Always safe to call; a bad slot is not written.
#[no_mangle]
pub unsafe extern "C" fn __kage_hcpa_result(dst: u32, cost: u32) {
    with_engine(|e| {
        event!("result {dst} {cost}");
        e.result(dst, cost)
    });
}
