//! The C entry points only working-set instrumentation calls (docs/abi.md, "Working-set
//! instrumentation"): the tick when a thread's budget runs out (with its x86-64
//! `preserve_most` trampoline), the out-of-line marking of many lines, and the test-only
//! trace. Each definition is checked against its `kage_abi::symbols` type.

use super::{grant_while_unavailable, shadow, tool, StackAt};
use crate::{gate, registry};
use kage_abi::{symbols, Instrumentation, Region};
use std::ffi::c_void;

// The trampoline `__kage_ws_tick` (x86-64) has no Rust type: `kage_ws_tick` is what it calls
// with the C convention, and is `__kage_ws_tick` itself elsewhere.
const _: symbols::RegionHook = kage_ws_tick;
const _: symbols::WsMarkLines = __kage_ws_mark_lines;
// `__kage_ws_trace(const void *addr, uint64_t size)`: an access hook's type.
const _: symbols::Access = __kage_ws_trace;

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
pub unsafe extern "C" fn kage_ws_tick(innermost: *mut Region) {
    // Only working-set code calls this: it decides the default tool (and its region's module
    // the line size) if nothing registered yet.
    registry::note_instrumentation(Instrumentation::WorkingSet);
    if !innermost.is_null() {
        registry::note_module((*innermost).module);
    }
    // Sets the runtime up first if needed (null while it initialises on this thread, or
    // once it finished).
    let ts = gate::event_thread();
    if ts.is_null() || gate::finished() {
        return grant_while_unavailable();
    }
    let Some(ws) = tool() else {
        return grant_while_unavailable();
    };
    if (*ts).busy.get() != 0 {
        // A signal handler interrupted the runtime on this thread: retry at the next segment.
        return grant_while_unavailable();
    }
    let innermost = registry::global_id(innermost);
    (*ts).busy.set(gate::IN_RUNTIME);
    ws.tick(StackAt::Innermost(innermost));
    gate::leave_runtime(&*ts);
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
    if let Some(shadow) = shadow() {
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
    registry::note_instrumentation(Instrumentation::WorkingSetTrace);
    if size == 0 || gate::finished() {
        return;
    }
    let ts = gate::current();
    if !ts.is_null() && (*ts).busy.get() != 0 {
        return;
    }
    if let Some(ws) = tool() {
        ws.trace(addr as u64, size);
    }
}
