//! Segments: the runs of a block's instructions that no call into instrumented code
//! interrupts, and the coalescing of their accesses into one call per merged byte range.
//! Shared by the instrumentations that delay and group accesses (the working set marks a
//! segment's lines after the last access of each merged range, the footprint reports its
//! ranges at the segment's end): nothing between a
//! segment's start and its end can run other instrumented code, so delaying is invisible
//! to the runtime.

use std::collections::HashMap;

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMValueRef};
use llvm_sys::target::LLVMTargetDataRef;
use llvm_sys::LLVMOpcode;

use crate::access::{classify_access, Access, Length, Range};
#[cfg(doc)]
use crate::address::MERGE_GAP;
use crate::address::{merge_ranges_within, split_constant_offset};
use crate::ir::{self, FunctionCfg};

/// Constant-length `llvm.mem*` ranges up to this size are coalesced like ordinary accesses;
/// longer ones get a mark call of their own.
pub const COALESCED_LENGTH_LIMIT: u64 = 4096;

/// Intrinsics that can run arbitrary code: calls to them end a segment like other calls.
const CALLING_INTRINSICS: &[&str] = &[
    "llvm.experimental.gc.statepoint",
    "llvm.experimental.patchpoint",
    "llvm.coro.",
    "llvm.icall.branch.funnel",
];

/// A run of instructions of one block that no call into instrumented code interrupts.
pub struct Segment {
    /// Index of the block in the function's CFG.
    pub block: usize,
    /// The segment's first instruction: the budget check goes right before it.
    pub start: LLVMValueRef,
    /// The cutting call or the block's terminator: the marks go right before it.
    pub end: LLVMValueRef,
    pub accesses: Vec<Access>,
}

/// Every segment of every block, in layout order.
///
/// # Safety
/// `cfg` must describe a live function of a module with `data_layout`.
pub unsafe fn function_segments(cfg: &FunctionCfg, data_layout: LLVMTargetDataRef) -> Vec<Segment> {
    let mut out = Vec::new();
    for (b, &block) in cfg.blocks.iter().enumerate() {
        out.extend(block_segments(b, block, b == 0, data_layout));
    }
    out
}

/// The segments of `block`. None for blocks starting with a Windows EH pad (no insertion
/// point, see [`ir::first_insertion_point`]).
unsafe fn block_segments(
    index: usize,
    block: LLVMBasicBlockRef,
    is_entry: bool,
    data_layout: LLVMTargetDataRef,
) -> Vec<Segment> {
    let Some(mut start) = ir::first_insertion_point(block) else {
        return Vec::new();
    };
    if is_entry {
        // Static allocas stay first: once the inlined budget check splits the entry block,
        // allocas after it would become dynamic.
        while ir::opcode(start) == LLVMOpcode::LLVMAlloca {
            start = LLVMGetNextInstruction(start);
        }
    }
    let mut segments = Vec::new();
    let mut accesses = Vec::new();
    for inst in ir::instructions(block) {
        if let Some(access) = classify_access(inst, data_layout) {
            accesses.push(access);
        }
        let is_terminator = !LLVMIsATerminatorInst(inst).is_null();
        if is_terminator || is_cut(inst) {
            segments.push(Segment {
                block: index,
                start,
                end: inst,
                accesses: std::mem::take(&mut accesses),
            });
            if is_terminator {
                break;
            }
            start = LLVMGetNextInstruction(inst);
        }
    }
    segments
}

/// Whether `inst` ends a segment: a call, invoke or callbr that may run instrumented code.
/// That is every call that [`calls_other_code`] except a call that surely returns without
/// running code of the program ([`returns_without_callbacks`]: `memcmp`, `strlen`).
///
/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn is_cut(inst: LLVMValueRef) -> bool {
    calls_other_code(inst)
        && !ir::direct_callee(inst).is_some_and(|callee| returns_without_callbacks(inst, callee))
}

/// Whether `inst` is a call, invoke or callbr of code other than the pass's own `__kage_*`
/// functions, intrinsics other than those in [`CALLING_INTRINSICS`], and inline assembly
/// whose text has no instruction that calls, jumps or enters the kernel ([`asm_may_call`];
/// a branchless `cmov`, a `bswap` or a `pause` does not run other code). A `callbr` (`asm
/// goto`) always is.
///
/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn calls_other_code(inst: LLVMValueRef) -> bool {
    if !ir::is_call_site(inst) {
        return false;
    }
    let Some(callee) = ir::direct_callee(inst) else {
        let called = LLVMGetCalledValue(inst);
        if ir::opcode(inst) != LLVMOpcode::LLVMCallBr && !LLVMIsAInlineAsm(called).is_null() {
            let mut len = 0;
            let text = LLVMGetInlineAsmAsmString(called, &mut len);
            let text = std::slice::from_raw_parts(text.cast::<u8>(), len);
            return asm_may_call(&String::from_utf8_lossy(text));
        }
        return true; // an indirect call
    };
    let name = ir::value_name(callee);
    if name.starts_with("__kage_") {
        false
    } else if name.starts_with("llvm.") {
        CALLING_INTRINSICS
            .iter()
            .any(|prefix| name.starts_with(prefix))
    } else {
        true
    }
}

/// Whether `call` (a `call` of `callee`) surely returns to its caller without running code
/// of the program: `callee` is a function of the C library (only declared here, and known
/// to LLVM as one: not the program's own, which is instrumented), and LLVM knows that it
/// calls nothing back (`nocallback`), throws nothing (`nounwind`), returns (`willreturn`),
/// and writes no memory but what its arguments point to and `errno` (`memory`): `memcmp`,
/// `strlen`, `strtol`, `sqrt`; not `strdup`, which calls the allocator (that the program
/// may define), nor `qsort`. Such a call ends no segment: nothing instrumented runs while it
/// does, and every access after it in its block is made. (A program that defines such a
/// function itself, a `memcmp` of its own, breaks this: see docs/abi.md.)
///
/// # Safety
/// `call` must be a call instruction of `callee`.
unsafe fn returns_without_callbacks(call: LLVMValueRef, callee: LLVMValueRef) -> bool {
    // The attributes first: few declarations have them, and the library's table costs more.
    ir::opcode(call) == LLVMOpcode::LLVMCall
        && LLVMIsDeclaration(callee) != 0
        && ["nocallback", "nounwind", "willreturn"]
            .iter()
            .all(|attribute| ir::call_has_function_attribute(call, callee, attribute))
        && ir::call_memory_effects(call, callee).is_some_and(writes_only_arguments_and_errno)
        && kage_calls_library_function(call)
}

extern "C" {
    /// Whether the call calls a function of the C library that the target has, as LLVM's
    /// TargetLibraryInfo knows them (shim.cpp).
    fn kage_calls_library_function(call: LLVMValueRef) -> bool;
}

/// Whether LLVM memory effects (the `memory` attribute's value: two bits per location, read
/// and write, locations numbered argument memory 0, inaccessible memory 1, `errno` 2, other
/// memory 3, and any added later above) write nothing but argument memory and `errno`.
fn writes_only_arguments_and_errno(effects: u64) -> bool {
    const WRITE: u64 = 0b10;
    let writes_elsewhere = (0..32)
        .filter(|&location| location != 0 && location != 2)
        .any(|location| effects >> (2 * location) & WRITE != 0);
    !writes_elsewhere
}

/// Whether inline assembly `text` may run other code: it names a call, a jump (to a label
/// of its own or not: it cannot be told), or a system call (x86-64 and AArch64 mnemonics).
pub fn asm_may_call(text: &str) -> bool {
    const MNEMONICS: &[&str] = &[
        "call", "callq", "calll", "jmp", "jmpq", "syscall", "sysenter", "int", "bl", "blr", "br",
        "b", "svc",
    ];
    // Operands such as `%0` or `%b1` split off as `0` and `b1`; `{att|intel}` dialect
    // alternatives and `;`/newline-separated instructions split into words too.
    text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .any(|word| MNEMONICS.contains(&word.to_ascii_lowercase().as_str()))
}

/// One mark (or report) call for a range of bytes. `last` is the index, in the ranges
/// [`plan_marks`] was given, of the last one it covers.
pub enum Mark {
    /// `[base + lo, base + hi)`; `exact` is an access pointer equal to `base + lo`, if any;
    /// `align` what `base + lo` is known to be a multiple of.
    Bytes {
        base: LLVMValueRef,
        lo: i64,
        hi: i64,
        exact: Option<LLVMValueRef>,
        align: u64,
        last: usize,
    },
    /// A range marked on its own: long or run-time-sized `llvm.mem*` ranges.
    Whole {
        ptr: LLVMValueRef,
        len: Length,
        last: usize,
    },
}

/// Bytes `[lo, hi)` from a base, accessed through `ptr`, a multiple of `align`; range
/// `index` of those given.
struct Piece {
    lo: i64,
    hi: i64,
    ptr: LLVMValueRef,
    align: u64,
    index: usize,
}

/// The marks for `ranges`, coalesced per base pointer (merged across gaps below `gap`
/// bytes: [`MERGE_GAP`] for lines, 1 for exact bytes), in order of first appearance.
///
/// # Safety
/// The ranges' pointers must be live values of a module with `data_layout`.
pub unsafe fn plan_marks(data_layout: LLVMTargetDataRef, ranges: &[Range], gap: i64) -> Vec<Mark> {
    enum Item {
        Group(usize),
        Whole(LLVMValueRef, Length, usize),
    }
    let mut groups: Vec<(LLVMValueRef, Vec<Piece>)> = Vec::new();
    let mut group_of: HashMap<LLVMValueRef, usize> = HashMap::new();
    let mut items = Vec::new();
    for (index, range) in ranges.iter().enumerate() {
        let size = match range.len {
            Length::Constant(0) => continue,
            Length::Constant(n) if n <= COALESCED_LENGTH_LIMIT => n as i64,
            len => {
                items.push(Item::Whole(range.ptr, len, index));
                continue;
            }
        };
        let (base, offset) = split_constant_offset(data_layout, range.ptr);
        let Some(end) = offset.checked_add(size) else {
            items.push(Item::Whole(range.ptr, range.len, index));
            continue;
        };
        let group = *group_of.entry(base).or_insert_with(|| {
            groups.push((base, Vec::new()));
            items.push(Item::Group(groups.len() - 1));
            groups.len() - 1
        });
        groups[group].1.push(Piece {
            lo: offset,
            hi: end,
            ptr: range.ptr,
            align: range.align,
            index,
        });
    }
    let mut marks = Vec::new();
    for item in items {
        match item {
            Item::Whole(ptr, len, last) => marks.push(Mark::Whole { ptr, len, last }),
            Item::Group(g) => {
                let (base, pieces) = &groups[g];
                let merged =
                    merge_ranges_within(pieces.iter().map(|p| (p.lo, p.hi)).collect(), gap);
                for (lo, hi) in merged {
                    let starting = || pieces.iter().filter(|p| p.lo == lo);
                    let exact = starting().next().map(|p| p.ptr);
                    let align = starting().map(|p| p.align).max().unwrap_or(1);
                    let last = (pieces.iter())
                        .filter(|p| lo <= p.lo && p.hi <= hi)
                        .map(|p| p.index)
                        .max()
                        .unwrap_or(0);
                    marks.push(Mark::Bytes {
                        base: *base,
                        lo,
                        hi,
                        exact,
                        align,
                        last,
                    });
                }
            }
        }
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::{asm_may_call, writes_only_arguments_and_errno};

    #[test]
    fn library_calls_may_write_their_arguments_and_errno_only() {
        // Two bits per location (1 read, 2 write): argument memory 0, inaccessible 1, errno
        // 2, other 3, the target's 4 and 5 (llvm/Support/ModRef.h, LLVM 22).
        let effects = |location: u32, bits: u64| bits << (2 * location);
        for quiet in [
            0,                                // memory(none): sqrt without errno
            effects(0, 1),                    // memory(argmem: read): memcmp, strlen
            effects(0, 3) | effects(2, 2),    // strtol: *endptr and errno
            effects(0, 1) | 0b0101_0101 << 2, // memory(read)
        ] {
            assert!(writes_only_arguments_and_errno(quiet), "{quiet:#b}");
        }
        for writing in [effects(1, 2), effects(3, 3), effects(4, 2), effects(5, 2)] {
            assert!(!writes_only_arguments_and_errno(writing), "{writing:#b}");
        }
    }

    #[test]
    fn inline_assembly_that_calls_jumps_or_enters_the_kernel_may_call() {
        // zstd's ZSTD_selectAddr, a byte swap, a spin-wait hint, a fence: no other code runs.
        for quiet in [
            "cmp $1, $2\n\tcmova $3, $0",
            "bswap $0",
            "pause",
            "mfence",
            "rep; nop",
        ] {
            assert!(!asm_may_call(quiet), "{quiet}");
        }
        for calling in [
            "call ${1:P}",
            "callq *$0",
            "jmp 1f\n1:",
            "syscall",
            "int $$0x80",
            "bl foo",
            "svc #0",
            "{call|call} $0",
        ] {
            assert!(asm_may_call(calling), "{calling}");
        }
    }
}
