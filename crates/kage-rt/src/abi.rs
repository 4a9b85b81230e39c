//! The C ABI: exactly the symbols of `docs/abi.md`, plus the program-facing control API of
//! `include/kage.h`. Each is a thin shim over the Rust modules.

use crate::registry::{self, KageModule, KageRegion, KIND_FUNCTION, KIND_LOOP, KIND_LOOP_BODY};
use crate::runtime::{self, GATE};
use crate::thread;
use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;

/// Runs a region event on the calling thread with the region's global id and metadata.
#[inline(always)]
unsafe fn region_event(
    r: *mut KageRegion,
    f: impl FnOnce(
        &mut crate::stack::RegionStack,
        &mut dyn crate::tools::ThreadTool,
        u32,
        registry::Meta,
    ),
) {
    let Some(rt) = runtime::ensure_init() else {
        return;
    };
    if runtime::finished() {
        return;
    }
    let ts = thread::current_or_create(rt);
    if ts.is_null() {
        return;
    }
    (*ts).with(|stack, tool| {
        let Some(gid) = registry::global_id(r, rt.opts.verbosity) else {
            return;
        };
        let Some(meta) = registry::meta(gid) else {
            return;
        };
        f(stack, tool, gid, meta)
    });
}

/// Registers a module's static region table (idempotent; a bad table is reported on stderr
/// and ignored). Initialises the runtime on first use.
///
/// # Safety
/// `m` is null or points to a `struct kage_module` laid out as in `docs/abi.md`, whose
/// region array and strings stay readable and whose `global_id` fields are writable.
#[no_mangle]
pub unsafe extern "C" fn __kage_register_module(m: *mut KageModule) {
    // Before initialisation: the build decides the default tool and line size.
    registry::note_module(m);
    let Some(rt) = runtime::ensure_init() else {
        return;
    };
    let ts = thread::current();
    if !ts.is_null() && (*ts).busy.get() != 0 {
        return;
    }
    registry::register(m, rt.opts.verbosity);
}

/// A function starts. `frame` is where its return address lives (the stack pointer at its
/// entry): function frames at or below it are dead and exited first (see `docs/abi.md`).
///
/// # Safety
/// `f` is null or points to a function entry of a module table (see `__kage_register_module`).
/// Must be called from the entry block of the function itself, with its
/// `llvm.addressofreturnaddress`; `frame` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_func_enter(f: *mut KageRegion, frame: *const c_void) {
    let sp = frame as usize;
    region_event(f, |stack, tool, gid, meta| {
        if meta.kind == KIND_FUNCTION {
            stack.func_enter(gid, sp, tool);
        }
    });
}

/// Control may have arrived from a `longjmp` or an unwinding exception (after a call to a
/// `returns_twice` function, or in a landing pad): function frames strictly below `frame`
/// (the current activation's return-address slot) are dead and exited, then `r` becomes the
/// innermost region as with [`__kage_settle`].
///
/// # Safety
/// `r` is null or points to a function or loop-body entry of a module table; `frame` is the
/// calling function's `llvm.addressofreturnaddress`, only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_resume_at(r: *mut KageRegion, frame: *const c_void) {
    let sp = frame as usize;
    region_event(r, |stack, tool, gid, meta| {
        if meta.kind == KIND_FUNCTION || meta.kind == KIND_LOOP_BODY {
            stack.resume_at(gid, meta.func, sp, tool);
        }
    });
}

/// A function returns (or an exception leaves it through `resume`).
///
/// # Safety
/// As for [`__kage_func_enter`].
#[no_mangle]
pub unsafe extern "C" fn __kage_func_exit(f: *mut KageRegion) {
    region_event(f, |stack, tool, gid, meta| {
        if meta.kind == KIND_FUNCTION {
            stack.func_exit(gid, tool);
        }
    });
}

/// A loop header runs: a new iteration, or the loop is entered.
///
/// # Safety
/// `l` is null or points to a loop entry of a module table.
#[no_mangle]
pub unsafe extern "C" fn __kage_loop_iter(l: *mut KageRegion) {
    region_event(l, |stack, tool, gid, meta| {
        if meta.kind == KIND_LOOP {
            // Validation guarantees the body is the next entry.
            stack.loop_iter(gid, gid + 1, meta.parent, meta.func, tool);
        }
    });
}

/// A loop exit block runs: `r` (a loop body or the function) becomes the innermost region.
///
/// # Safety
/// `r` is null or points to a function or loop-body entry of a module table.
#[no_mangle]
pub unsafe extern "C" fn __kage_settle(r: *mut KageRegion) {
    region_event(r, |stack, tool, gid, meta| {
        if meta.kind == KIND_FUNCTION || meta.kind == KIND_LOOP_BODY {
            stack.settle(gid, meta.func, tool);
        }
    });
}

/// The hot path: no allocation, no lock, no system call once the thread is set up.
#[inline(always)]
unsafe fn access(addr: *const c_void, size: u64, write: bool) {
    if size == 0 {
        return;
    }
    with_access_tool(|tool| tool.access(addr as usize, size, write));
}

/// Runs `f` on the calling thread's tool unless accesses are off (the gate, or the runtime
/// busy on this thread); sets up the runtime and the thread on its first event.
#[inline(always)]
unsafe fn with_access_tool(f: impl FnOnce(&mut dyn crate::tools::ThreadTool)) {
    let mut ts = thread::current();
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

/// The thread's first event is an access: set up the runtime and the thread first.
#[cold]
#[inline(never)]
unsafe fn first_event() -> *const thread::ThreadState {
    let Some(rt) = runtime::ensure_init() else {
        return std::ptr::null();
    };
    if runtime::finished() {
        return std::ptr::null();
    }
    thread::current_or_create(rt)
}

/// `size` bytes are about to be read at `addr`.
///
/// # Safety
/// Always safe to call; `addr` is only recorded, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_load(addr: *const c_void, size: u64) {
    access(addr, size, false);
}

/// `size` bytes are about to be written at `addr`.
///
/// # Safety
/// Always safe to call; `addr` is only recorded, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_store(addr: *const c_void, size: u64) {
    access(addr, size, true);
}

/// A compare-exchange ran: it read `size` bytes, and wrote them when `stored` is non-zero.
///
/// # Safety
/// Always safe to call; `addr` is only recorded, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_cmpxchg(addr: *const c_void, size: u64, stored: u32) {
    access(addr, size, false);
    if stored != 0 {
        access(addr, size, true);
    }
}

/// Footprint instrumentation: `width` bytes at `addr`, `addr + stride`, ...,
/// `addr + (count - 1) * stride` are accessed (a segment's merged range, or a chunk of a
/// hoisted loop's iterations; see `docs/abi.md`). The accesses are counted inline.
///
/// # Safety
/// Always safe to call; the addresses are only recorded, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_fp_strided(
    addr: *const c_void,
    width: u64,
    stride: u64,
    count: u64,
) {
    if width == 0 || count == 0 {
        return;
    }
    with_access_tool(|tool| tool.access_strided(addr as usize, width, stride, count));
}

/// Program control (`kage.h`): deliver memory accesses to the tool (`on` != 0) or not.
/// Region tracking continues either way.
///
/// # Safety
/// Always safe to call.
#[no_mangle]
pub unsafe extern "C" fn kage_set_enabled(on: libc::c_int) {
    runtime::set_enabled(on != 0);
}

/// Program control (`kage.h`): discard every statistic gathered so far, on all threads.
/// Other threads apply it at their next region event.
///
/// # Safety
/// Always safe to call.
#[no_mangle]
pub unsafe extern "C" fn kage_reset() {
    runtime::reset();
}

/// Working-set instrumentation: the calling thread's access budget ran out (or the thread
/// is new). `innermost` is the innermost region of the code that was about to run.
///
/// On x86-64 the instrumented code calls it with LLVM's `preserve_most` convention (every
/// general-purpose register but r11 survives the call), so a function whose only call is
/// this cold one keeps its values in scratch registers instead of saving callee-saved ones
/// in its prologue: the `__kage_ws_tick` trampoline below saves them and calls this with
/// the C convention.
///
/// # Safety
/// `innermost` is null or points to a function or loop-body entry of a module table.
#[cfg_attr(not(target_arch = "x86_64"), export_name = "__kage_ws_tick")]
pub unsafe extern "C" fn kage_ws_tick(innermost: *mut KageRegion) {
    use crate::tools::working_set::{self, StackAt};
    // Only working-set code calls this: it decides the default tool (and its region's module
    // the line size) if nothing registered yet.
    registry::note_instrumentation(registry::INSTRUMENTATION_WORKING_SET);
    if !innermost.is_null() {
        registry::note_module((*innermost).module);
    }
    let Some(rt) = runtime::ensure_init() else {
        return working_set::grant_while_unavailable();
    };
    if runtime::finished() {
        return working_set::grant_while_unavailable();
    }
    let ts = thread::current_or_create(rt);
    let (Some(ws), false) = (working_set::tool(), ts.is_null()) else {
        return working_set::grant_while_unavailable();
    };
    if (*ts).busy.get() != 0 {
        // A signal handler interrupted the runtime on this thread: retry at the next segment.
        return working_set::grant_while_unavailable();
    }
    let innermost = registry::global_id(innermost, rt.opts.verbosity);
    (*ts).busy.set(thread::IN_RUNTIME);
    ws.tick(StackAt::Innermost(innermost));
    (*ts).busy.set((*ts).busy.get() & !thread::IN_RUNTIME);
}

// `__kage_ws_tick` for x86-64: `preserve_most` around `kage_ws_tick`. It saves the
// general-purpose registers the C convention lets the callee clobber (r11 is scratch in
// `preserve_most`), keeps the stack 16-byte aligned for the call, and describes its frame in
// CFI so that unwinding from inside the tick (the region stack of a boundary) reaches the
// instrumented callers.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".globl __kage_ws_tick",
    ".type __kage_ws_tick,@function",
    ".p2align 4",
    "__kage_ws_tick:",
    ".cfi_startproc",
    "push rax",
    ".cfi_adjust_cfa_offset 8",
    "push rcx",
    ".cfi_adjust_cfa_offset 8",
    "push rdx",
    ".cfi_adjust_cfa_offset 8",
    "push rsi",
    ".cfi_adjust_cfa_offset 8",
    "push rdi",
    ".cfi_adjust_cfa_offset 8",
    "push r8",
    ".cfi_adjust_cfa_offset 8",
    "push r9",
    ".cfi_adjust_cfa_offset 8",
    "push r10",
    ".cfi_adjust_cfa_offset 8",
    "sub rsp, 8",
    ".cfi_adjust_cfa_offset 8",
    "call {tick}",
    "add rsp, 8",
    ".cfi_adjust_cfa_offset -8",
    "pop r10",
    ".cfi_adjust_cfa_offset -8",
    "pop r9",
    ".cfi_adjust_cfa_offset -8",
    "pop r8",
    ".cfi_adjust_cfa_offset -8",
    "pop rdi",
    ".cfi_adjust_cfa_offset -8",
    "pop rsi",
    ".cfi_adjust_cfa_offset -8",
    "pop rdx",
    ".cfi_adjust_cfa_offset -8",
    "pop rcx",
    ".cfi_adjust_cfa_offset -8",
    "pop rax",
    ".cfi_adjust_cfa_offset -8",
    "ret",
    ".cfi_endproc",
    ".size __kage_ws_tick, .-__kage_ws_tick",
    tick = sym kage_ws_tick,
);

/// Working-set instrumentation: marks every line from `first_line` to `last_line`
/// (inclusive) as touched; the out-of-line part of the inline fast path.
///
/// # Safety
/// Always safe to call: line indices beyond the shadow are clamped.
#[no_mangle]
pub unsafe extern "C" fn __kage_ws_mark_lines(first_line: u64, last_line: u64) {
    if let Some(shadow) = crate::tools::working_set::shadow() {
        if first_line <= last_line {
            shadow.mark_lines(first_line, last_line);
        }
    }
}

/// Test-only working-set trace mode: `size` bytes at `addr` are about to be accessed.
///
/// # Safety
/// Always safe to call; `addr` is only recorded, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_ws_trace(addr: *const c_void, size: u64) {
    registry::note_instrumentation(registry::INSTRUMENTATION_WORKING_SET_TRACE);
    if size == 0 || runtime::finished() {
        return;
    }
    let ts = thread::current();
    if !ts.is_null() && (*ts).busy.get() != 0 {
        return;
    }
    if let Some(ws) = crate::tools::working_set::tool() {
        ws.trace(addr as u64, size);
    }
}
