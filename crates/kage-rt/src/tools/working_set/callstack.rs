//! The region stack at an interval boundary, without any per-call instrumentation: the
//! static chain of loops around the code that ended the interval (from the region the pass
//! passed to `__kage_ws_tick`), under the instrumented functions found on the thread's call
//! stack by unwinding it (`_Unwind_Backtrace`, from the program's unwind tables).

use crate::registry::{self, RegionInfo};
use kage_abi::{RegionKind as AbiKind, NONE};
use kage_report::RegionKind;
use std::ffi::{c_int, c_void};

extern "C" {
    fn _Unwind_Backtrace(
        trace: unsafe extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
}

const MAX_FRAMES: usize = 256;
const URC_NO_REASON: c_int = 0;
const URC_END_OF_STACK: c_int = 5;

struct Frames {
    pcs: [usize; MAX_FRAMES],
    len: usize,
}

unsafe extern "C" fn collect(ctx: *mut c_void, arg: *mut c_void) -> c_int {
    let frames = &mut *(arg as *mut Frames);
    if frames.len == MAX_FRAMES {
        return URC_END_OF_STACK;
    }
    frames.pcs[frames.len] = _Unwind_GetIP(ctx);
    frames.len += 1;
    URC_NO_REASON
}

/// Return addresses of the calling thread, innermost first.
fn backtrace() -> Vec<usize> {
    let mut frames = Frames {
        pcs: [0; MAX_FRAMES],
        len: 0,
    };
    // SAFETY: `collect` only writes into `frames`, which outlives the call.
    unsafe { _Unwind_Backtrace(collect, &mut frames as *mut Frames as *mut c_void) };
    frames.pcs[..frames.len].to_vec()
}

/// Maps code addresses to instrumented functions.
#[derive(Default)]
pub struct FunctionMap {
    /// (code address, global id), sorted by address.
    starts: Vec<(usize, u32)>,
    /// Number of registered regions when `starts` was built.
    built_for: usize,
}

impl FunctionMap {
    fn refresh(&mut self, regions: &[RegionInfo]) {
        if self.built_for == regions.len() {
            return;
        }
        self.starts = (regions.iter().enumerate())
            .filter(|(_, r)| r.kind == RegionKind::Function && r.code != 0)
            .map(|(id, r)| (r.code, id as u32))
            .collect();
        self.starts.sort_unstable();
        self.built_for = regions.len();
    }

    /// The instrumented function containing `pc`: the closest start at or below it, unless
    /// the dynamic linker knows a nearer symbol in between or `pc` is in another object
    /// (an uninstrumented function).
    fn function_at(&self, pc: usize) -> Option<u32> {
        let i = self.starts.partition_point(|&(start, _)| start <= pc);
        let (start, id) = *self.starts.get(i.checked_sub(1)?)?;
        let mut at_pc: libc::Dl_info = unsafe { std::mem::zeroed() };
        let mut at_start: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: dladdr only reads the loader's tables and fills the out-structs.
        let known = unsafe {
            libc::dladdr(pc as *const c_void, &mut at_pc) != 0
                && libc::dladdr(start as *const c_void, &mut at_start) != 0
        };
        if known {
            if at_pc.dli_fbase != at_start.dli_fbase {
                return None;
            }
            if !at_pc.dli_saddr.is_null() && (at_pc.dli_saddr as usize) > start {
                return None;
            }
        }
        Some(id)
    }
}

/// The region stack, outermost first: instrumented callers from the call stack, then the
/// function and loops (not loop bodies) of `innermost`.
/// Without `innermost` (the end of the run) there is no stack to report.
pub fn region_stack(map: &mut FunctionMap, innermost: Option<u32>) -> Vec<u32> {
    if innermost.is_none() {
        return Vec::new();
    }
    let pcs = backtrace();
    let reg = registry::REGISTRY.lock();
    map.refresh(&reg.regions);
    let mut chain = Vec::new();
    let mut r = innermost.unwrap_or(NONE);
    while let Some(meta) = (r != NONE).then(|| registry::meta(r)).flatten() {
        if meta.kind != AbiKind::LoopBody {
            chain.push(r);
        }
        r = meta.parent;
    }
    let own_function = innermost.and_then(registry::meta).map(|m| m.func);
    // Frames below the one that called into the runtime are the runtime's own.
    let functions: Vec<u32> = pcs
        .iter()
        // A return address points after the call: step back into it.
        .map(|&pc| map.function_at(pc.saturating_sub(1)))
        .collect::<Vec<_>>()
        .into_iter()
        .flatten()
        .collect();
    let callers = match own_function {
        Some(f) => match functions.iter().position(|&g| g == f) {
            Some(i) => &functions[i + 1..],
            None => &functions[..0],
        },
        None => &functions[..0],
    };
    drop(reg);
    let mut stack: Vec<u32> = callers.iter().rev().copied().collect();
    stack.extend(chain.iter().rev());
    stack
}
