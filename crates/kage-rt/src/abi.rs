//! The common C ABI: the hooks of `docs/abi.md` that every tool is fed through (module
//! registration, region events, the per-access calls), plus the program-facing control API
//! of `include/kage.h`. Each is a thin shim over the Rust modules; each definition is
//! checked against its `kage_abi::symbols` type at compile time. The entry points that only
//! one tool's instrumentation calls are that tool's (`tools/working_set/entry.rs`,
//! `tools/footprint.rs`).

use crate::gate;
use crate::registry;
use crate::registry::{frame_kind, Tree};
use crate::runtime;
use crate::stack::{FrameKind, RegionStack};
use crate::tool::ThreadTool;
use kage_abi::{symbols, Module, Region, RegionKind};
use std::ffi::c_void;

const _: symbols::RegisterModule = __kage_register_module;
// `__kage_unregister_module`: `__kage_register_module`'s type.
const _: symbols::RegisterModule = __kage_unregister_module;
const _: symbols::FuncEnter = __kage_func_enter;
const _: symbols::RegionHook = __kage_func_exit;
const _: symbols::RegionHook = __kage_loop_iter;
const _: symbols::RegionHook = __kage_settle;
// `__kage_resume_at(struct kage_region *r, const void *frame)`: `__kage_func_enter`'s type.
const _: symbols::FuncEnter = __kage_resume_at;
const _: symbols::Access = __kage_load;
const _: symbols::Access = __kage_store;
const _: symbols::CmpXchg = __kage_cmpxchg;

/// Runs a region event on the calling thread with the region's global id. The fast path,
/// once the thread is set up, is a thread-local read, two flag tests and the id's load; the
/// region's metadata is read by the hooks that need it (settling back to the innermost
/// region, the common case, does not).
#[inline(always)]
unsafe fn region_event(r: *mut Region, f: impl FnOnce(&mut RegionStack, &mut dyn ThreadTool, u32)) {
    if gate::current().is_null() && !r.is_null() {
        // The thread's first event, which may start the runtime before any module's
        // constructor ran (a function of the program's `.preinit_array`): its module's
        // build decides the tool, as registration would have.
        registry::note_module((*r).module);
    }
    gate::region_event(|stack, tool| {
        if let Some(gid) = registry::global_id(r) {
            f(stack, tool, gid)
        }
    });
}

/// Registers a module's static region table (idempotent; a bad table is reported on stderr
/// and ignored). Initialises the runtime on first use.
///
/// # Safety
/// `m` is null or points to a `struct kage_module` laid out as in `docs/abi.md`, whose
/// region array and strings stay readable and whose `global_id` fields are writable.
#[no_mangle]
pub unsafe extern "C" fn __kage_register_module(m: *mut Module) {
    if m.is_null() {
        return;
    }
    // Before initialisation: the build decides the default tool and line size.
    registry::note_module(m);
    if (*m).abi_version == kage_abi::VERSION {
        crate::tools::working_set::require_shadow((*m).instrumentation);
    }
    let in_executable = registry::announce(m);
    // A shared library announces itself before the executable does: the runtime waits for
    // the executable's build (or the first event, or the start-up check before main).
    if registry::waits_for_the_executable(in_executable) && !runtime::initialized() {
        return;
    }
    let Some(rt) = runtime::ensure_init() else {
        return;
    };
    let ts = gate::current();
    if !ts.is_null() && (*ts).busy.get() != 0 {
        return;
    }
    registry::register_announced();
    runtime::warn_about_other_builds(rt);
}

/// Module `m` is being unloaded (its destructor): the runtime keeps copies of what it still
/// needs of the table ([`registry::unregister`]). Nothing is done once the analysis
/// finished: the program's end runs every module's destructor, after the report.
///
/// # Safety
/// `m` is null or points to a `struct kage_module` laid out as in `docs/abi.md`, still
/// mapped for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn __kage_unregister_module(m: *mut Module) {
    if m.is_null() || gate::finished() {
        return;
    }
    let ts = gate::current();
    if !ts.is_null() && (*ts).busy.get() != 0 {
        return;
    }
    registry::unregister(m);
}

/// A function starts. `frame` is where its return address lives (the stack pointer at its
/// entry): function frames at or below it are dead and exited first (see `docs/abi.md`).
///
/// # Safety
/// `f` is null or points to a function entry of a module table (see `__kage_register_module`).
/// Must be called from the entry block of the function itself, with its
/// `llvm.addressofreturnaddress`; `frame` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_func_enter(f: *mut Region, frame: *const c_void) {
    let sp = frame as usize;
    region_event(f, |stack, tool, gid| {
        if is_function(f) {
            stack.func_enter(gid, f as usize, sp, tool);
        }
    });
}

/// Control may have arrived from a `longjmp` or an unwinding exception (after a call to a
/// `returns_twice` function, or in a landing pad): function frames strictly below `frame`
/// (the current activation's return-address slot) are dead and exited, then `r` becomes the
/// innermost region as with [`__kage_settle`].
///
/// # Safety
/// `r` is null or points to a function, loop-body or inlined-call entry of a module table;
/// `frame` is the calling function's `llvm.addressofreturnaddress`, only compared, never
/// dereferenced.
#[no_mangle]
pub unsafe extern "C" fn __kage_resume_at(r: *mut Region, frame: *const c_void) {
    let sp = frame as usize;
    region_event(r, |stack, tool, gid| {
        let Some(meta) = registry::meta(gid) else {
            return;
        };
        if meta.kind != RegionKind::Loop {
            let kind = frame_kind(meta.kind).unwrap_or(FrameKind::Function);
            stack.resume_at(gid, kind, r as usize, meta.func, &Tree, sp, tool);
        }
    });
}

/// A function returns (or an exception leaves it through `resume`).
///
/// # Safety
/// As for [`__kage_func_enter`].
#[no_mangle]
pub unsafe extern "C" fn __kage_func_exit(f: *mut Region) {
    region_event(f, |stack, tool, gid| {
        if is_function(f) {
            stack.func_exit(gid, tool);
        }
    });
}

/// A loop header runs: a new iteration, or the loop is entered.
///
/// # Safety
/// `l` is null or points to a loop entry of a module table.
#[no_mangle]
pub unsafe extern "C" fn __kage_loop_iter(l: *mut Region) {
    region_event(l, |stack, tool, gid| {
        let Some(meta) = registry::meta(gid) else {
            return;
        };
        if meta.kind == RegionKind::Loop {
            // Validation guarantees the body is the next entry.
            let entry = l as usize;
            stack.loop_iter(gid, entry, gid + 1, meta.parent, meta.func, &Tree, tool);
        }
    });
}

/// The set of open regions changes other than at a loop header (a loop exit, an inlined
/// call's code starts or ends): `r` (a loop body, an inlined call or the function) becomes
/// the innermost region, inlined calls around it entered when they are not open.
///
/// # Safety
/// `r` is null or points to a function, loop-body or inlined-call entry of a module table.
#[no_mangle]
pub unsafe extern "C" fn __kage_settle(r: *mut Region) {
    region_event(r, |stack, tool, gid| {
        // Already the innermost region (most settle points): nothing to read or do.
        if stack.innermost() == Some(gid) {
            return;
        }
        let Some(meta) = registry::meta(gid) else {
            return;
        };
        if meta.kind != RegionKind::Loop {
            let kind = frame_kind(meta.kind).unwrap_or(FrameKind::Function);
            stack.settle(gid, kind, r as usize, meta.func, &Tree, tool);
        }
    });
}

/// Whether the entry `r`, of a registered module (its table was validated), is a function's:
/// read from the entry itself, without the registry's metadata.
///
/// # Safety
/// `r` points to an entry of a registered module's table.
#[inline(always)]
unsafe fn is_function(r: *const Region) -> bool {
    (*r).kind == RegionKind::Function as u32
}

/// The hot path: no allocation, no lock, no system call once the thread is set up.
#[inline(always)]
unsafe fn access(addr: *const c_void, size: u64, write: bool) {
    if size == 0 {
        return;
    }
    gate::with_access_tool(|tool| tool.access(addr as usize, size, write));
}

/// How many bytes a comparison of `a` and `b` of at most `n` bytes reads: up to and including
/// the first that differs or, when `nul` is not 0, the first NUL; 0 when either is null
/// (`symbols::LIBRARY_COMPARED`). Reads the program's memory, as the library function that
/// ran just before it did.
///
/// # Safety
/// `a` and `b` must be null or readable up to the first difference (or NUL) or `n` bytes, as
/// they were for the library function the call follows.
#[no_mangle]
pub unsafe extern "C" fn __kage_library_compared(
    a: *const c_void,
    b: *const c_void,
    n: u64,
    nul: u32,
) -> u64 {
    let (a, b) = (a.cast::<u8>(), b.cast::<u8>());
    if a.is_null() || b.is_null() {
        return 0;
    }
    if a == b && nul != 0 {
        // A string's length: the C library's own (vectorised) scan.
        let len = libc::strnlen(a.cast(), usize::try_from(n).unwrap_or(usize::MAX)) as u64;
        return (len + 1).min(n);
    }
    if nul == 0 && n >= 4 {
        // Both objects have `n` bytes (memcmp's contract): whole words, the last one ending
        // at `n` (it overlaps the one before, whose bytes were equal).
        return if n >= 8 {
            first_difference::<u64>(a, b, n)
        } else {
            first_difference::<u32>(a, b, n)
        };
    }
    let mut read = 0;
    while read < n {
        let (x, y) = (*a.add(read as usize), *b.add(read as usize));
        read += 1;
        if x != y || (nul != 0 && x == 0) {
            break;
        }
    }
    read
}
const _: symbols::LibraryCompared = __kage_library_compared;

/// How many bytes of `a` and `b` a comparison reads: through the first that differs, else
/// `n` (at least one word of `W`), a word of `W` at a time.
///
/// # Safety
/// `a` and `b` readable for `n` bytes.
#[inline]
unsafe fn first_difference<W: Word>(a: *const u8, b: *const u8, n: u64) -> u64 {
    let size = std::mem::size_of::<W>() as u64;
    let mut next = 0;
    loop {
        let at = next.min(n - size);
        let x = std::ptr::read_unaligned(a.add(at as usize).cast::<W>());
        let y = std::ptr::read_unaligned(b.add(at as usize).cast::<W>());
        if let Some(byte) = W::first_differing_byte(x, y) {
            return at + byte + 1;
        }
        if at == n - size {
            return n;
        }
        next += size;
    }
}

/// An unsigned word, compared byte by byte in memory order.
trait Word: Copy {
    /// The index of the first byte (in memory) where `x` and `y` differ.
    fn first_differing_byte(x: Self, y: Self) -> Option<u64>;
}

impl Word for u64 {
    fn first_differing_byte(x: u64, y: u64) -> Option<u64> {
        let diff = u64::from_le(x) ^ u64::from_le(y);
        (diff != 0).then(|| u64::from(diff.trailing_zeros() / 8))
    }
}

impl Word for u32 {
    fn first_differing_byte(x: u32, y: u32) -> Option<u64> {
        let diff = u32::from_le(x) ^ u32::from_le(y);
        (diff != 0).then(|| u64::from(diff.trailing_zeros() / 8))
    }
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

#[cfg(test)]
mod tests {
    use super::__kage_library_compared as compared;

    fn measure(a: &[u8], b: &[u8], n: u64, nul: bool) -> u64 {
        unsafe { compared(a.as_ptr().cast(), b.as_ptr().cast(), n, u32::from(nul)) }
    }

    #[test]
    fn comparisons_read_through_the_byte_that_decides() {
        let a: Vec<u8> = (0..100).collect();
        // memcmp: equal buffers are read whole; a difference at any place, in the words or
        // in the tail, is the last byte read.
        assert_eq!(measure(&a, &a.clone(), 100, false), 100);
        for at in [0usize, 7, 8, 13, 91, 92, 95, 99] {
            let mut b = a.clone();
            b[at] ^= 1;
            assert_eq!(measure(&a, &b, 100, false), at as u64 + 1, "{at}");
            assert_eq!(measure(&a, &b, at as u64, false), at as u64, "{at}");
            for n in [at as u64 + 1, at as u64 + 5, at as u64 + 9] {
                assert_eq!(
                    measure(&a, &b, n.min(100), false),
                    at as u64 + 1,
                    "{at} {n}"
                );
            }
        }
        for n in [3, 4, 5, 7, 8, 13] {
            assert_eq!(measure(&a, &a.clone(), n, false), n);
            for at in 0..n as usize {
                let mut b = a.clone();
                b[at] ^= 0x80;
                assert_eq!(measure(&a, &b, n, false), at as u64 + 1, "{n} {at}");
            }
        }
        // strcmp: the NUL ends it too; strncmp: at most n.
        assert_eq!(measure(b"kage-alpha\0", b"kage-beta\0", u64::MAX, true), 6);
        assert_eq!(measure(b"same\0xx", b"same\0yy", u64::MAX, true), 5);
        assert_eq!(measure(b"same\0", b"same\0", 3, true), 3);
        // A string's length with its NUL, at most n; nothing for a null pointer.
        let s = b"hello, world\0";
        assert_eq!(measure(s, s, u64::MAX, true), 13);
        assert_eq!(measure(s, s, 5, true), 5);
        assert_eq!(
            unsafe { compared(std::ptr::null(), s.as_ptr().cast(), 9, 1) },
            0
        );
    }
}
