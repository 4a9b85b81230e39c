//! The working-set runtime as the instrumented code sees it (docs/abi.md, "Working-set
//! instrumentation"): its globals and entry points, and the pass's own `alwaysinline` helpers
//! that hold the fast path. Everything is declared or defined on first use, so a module
//! without accesses gets none of it.
//!
//! Helpers (internal, `alwaysinline nounwind`; clang's `AlwaysInlinerPass` inlines them):
//! - `void __kage_ws_budget_check(ptr innermost, i64 k, ptr local)`: `b = *local - k;
//!   *local = b; if (b < 0) { budget = b; __kage_ws_tick(innermost); *local = budget; }`.
//!   `local` is the function's own copy of the budget (see [`super`]).
//! - `void __kage_ws_budget_spend(i64 k, ptr local)`: `*local -= k` (segments that are
//!   not checkpoints, see [`crate::checkpoints`]).
//! - `void __kage_ws_budget_load(ptr local)`: `*local = budget`; and
//!   `void __kage_ws_budget_store(ptr local)`: `budget = *local`.
//! - `void __kage_ws_mark_range(ptr p, i64 len)`: marks every line of `[p, p + len)`: the
//!   first and last lines inline (check before set), the lines between them through
//!   `__kage_ws_mark_lines`; nothing at all when `len` is 0.
//! - `void __kage_ws_mark_pair(ptr p, i64 len)`: the same for `0 < len <=` the line size,
//!   which touches at most two lines: no middle, no call; and first a test of both lines'
//!   bytes with one 16-bit load, which most pairs find marked.
//! - `void __kage_ws_mark_line(ptr p, i64 len)`: the one line of a range known not to
//!   cross a line boundary (see [`LineSpan`]).
//! - `void __kage_ws_trace_range(ptr p, i64 len)` (mode 2): `__kage_ws_trace(p, len)` unless
//!   `len` is 0, for `llvm.mem*` lengths only known at run time.
//! - `void __kage_ws_chunk(iN iv, iN start, i64 trips_after_first, ptr range_start...,
//!   ptr local)`:
//!   one per hoisted loop, its body built by [`super::hoisted`] (a chunk's check and marks).

use llvm_sys::core::*;
use llvm_sys::prelude::{
    LLVMBasicBlockRef, LLVMBuilderRef, LLVMContextRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef,
};
use llvm_sys::LLVMIntPredicate;

use kage_abi::{symbols, Symbol};

use crate::ir::{self, c_string, RuntimeFunction};

pub const BUDGET_CHECK: &str = "__kage_ws_budget_check";
pub const BUDGET_SPEND: &str = "__kage_ws_budget_spend";
pub const BUDGET_LOAD: &str = "__kage_ws_budget_load";
pub const BUDGET_STORE: &str = "__kage_ws_budget_store";
pub const MARK_RANGE: &str = "__kage_ws_mark_range";
pub const MARK_PAIR: &str = "__kage_ws_mark_pair";
pub const MARK_LINE: &str = "__kage_ws_mark_line";

/// How many lines of the built line size (and so of any larger one the runtime may
/// report in) a byte range can touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineSpan {
    /// One: the range starts at a multiple of a power of two `b <=` the line size and is at
    /// most `b` long, so it lies inside one `b`-aligned block, which lies inside one line.
    One,
    /// At most two: at most a line long.
    Two,
    /// Any number.
    Many,
}

impl LineSpan {
    /// The span of `len` bytes starting at a multiple of `align` (a power of two), with
    /// lines of `line_size` bytes.
    pub fn of(len: u64, align: u64, line_size: u64) -> LineSpan {
        if len <= align.min(line_size) {
            LineSpan::One
        } else if len <= line_size {
            LineSpan::Two
        } else {
            LineSpan::Many
        }
    }
}
pub const TRACE_RANGE: &str = "__kage_ws_trace_range";
pub const CHUNK: &str = "__kage_ws_chunk";

/// Declarations and helpers of one module, made on demand.
pub struct WsRuntime {
    module: LLVMModuleRef,
    /// Bytes per line built into the marks (`KAGE_WS_LINE_SIZE`): a power of two.
    pub line_size: u64,
    pub context: LLVMContextRef,
    void_type: LLVMTypeRef,
    i8_type: LLVMTypeRef,
    pub i64_type: LLVMTypeRef,
    pub ptr_type: LLVMTypeRef,
    /// `void (ptr, i64)`: every helper and `__kage_ws_trace`.
    pub pointer_length_type: LLVMTypeRef,
    /// `void (ptr, i64, ptr)`: the budget check.
    pub budget_check_type: LLVMTypeRef,
    /// `void (ptr)`: the budget's load and store.
    pub budget_copy_type: LLVMTypeRef,
    /// `void (i64, ptr)`: spending without a check.
    pub budget_spend_type: LLVMTypeRef,
    budget_check: Option<LLVMValueRef>,
    budget_spend: Option<LLVMValueRef>,
    /// `__kage_ws_budget_load` and `__kage_ws_budget_store`.
    budget_copies: [Option<LLVMValueRef>; 2],
    /// The mark helpers, by [`LineSpan`] (one, two, many).
    marks: [Option<LLVMValueRef>; 3],
    trace: Option<LLVMValueRef>,
    trace_range: Option<LLVMValueRef>,
}

impl WsRuntime {
    /// Marks lines of `line_size` bytes (a power of two).
    ///
    /// # Safety
    /// `module` must be a valid module that outlives the result.
    pub unsafe fn new(module: LLVMModuleRef, line_size: u64) -> Self {
        assert!(line_size.is_power_of_two());
        let context = LLVMGetModuleContext(module);
        let void_type = LLVMVoidTypeInContext(context);
        let i64_type = LLVMInt64TypeInContext(context);
        let ptr_type = LLVMPointerTypeInContext(context, 0);
        let mut params = [ptr_type, i64_type];
        WsRuntime {
            module,
            line_size,
            context,
            void_type,
            i8_type: LLVMInt8TypeInContext(context),
            i64_type,
            ptr_type,
            pointer_length_type: LLVMFunctionType(void_type, params.as_mut_ptr(), 2, 0),
            budget_check_type: {
                let mut params = [ptr_type, i64_type, ptr_type];
                LLVMFunctionType(void_type, params.as_mut_ptr(), 3, 0)
            },
            budget_copy_type: {
                let mut params = [ptr_type];
                LLVMFunctionType(void_type, params.as_mut_ptr(), 1, 0)
            },
            budget_spend_type: {
                let mut params = [i64_type, ptr_type];
                LLVMFunctionType(void_type, params.as_mut_ptr(), 2, 0)
            },
            budget_check: None,
            budget_spend: None,
            budget_copies: [None; 2],
            marks: [None; 3],
            trace: None,
            trace_range: None,
        }
    }

    /// `__kage_ws_budget_check(ptr innermost, i64 k, ptr local)`.
    ///
    /// # Safety
    /// The module must still be alive.
    pub unsafe fn budget_check(&mut self) -> LLVMValueRef {
        if let Some(f) = self.budget_check {
            return f;
        }
        let f = self.define_function(BUDGET_CHECK, self.budget_check_type);
        self.build_budget_check(f);
        self.budget_check = Some(f);
        f
    }

    /// `__kage_ws_budget_spend(i64 k, ptr local)`: `*local -= k`.
    ///
    /// # Safety
    /// The module must still be alive.
    pub unsafe fn budget_spend(&mut self) -> LLVMValueRef {
        if let Some(f) = self.budget_spend {
            return f;
        }
        let f = self.define_function(BUDGET_SPEND, self.budget_spend_type);
        let builder = LLVMCreateBuilderInContext(self.context);
        LLVMPositionBuilderAtEnd(builder, self.append_block(f, "entry"));
        let local = LLVMGetParam(f, 1);
        let old = LLVMBuildLoad2(builder, self.i64_type, local, c"".as_ptr());
        LLVMSetAlignment(old, 8);
        let new = LLVMBuildSub(builder, old, LLVMGetParam(f, 0), c"".as_ptr());
        LLVMSetAlignment(LLVMBuildStore(builder, new, local), 8);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
        self.budget_spend = Some(f);
        f
    }

    /// `__kage_ws_budget_load(ptr local)` (`*local = budget`) when `to_local`, else
    /// `__kage_ws_budget_store(ptr local)` (`budget = *local`).
    ///
    /// # Safety
    /// The module must still be alive.
    pub unsafe fn budget_copy(&mut self, to_local: bool) -> LLVMValueRef {
        let (slot, name) = if to_local {
            (0, BUDGET_LOAD)
        } else {
            (1, BUDGET_STORE)
        };
        if let Some(f) = self.budget_copies[slot] {
            return f;
        }
        let f = self.define_function(name, self.budget_copy_type);
        let builder = LLVMCreateBuilderInContext(self.context);
        LLVMPositionBuilderAtEnd(builder, self.append_block(f, "entry"));
        let budget = ir::thread_local_address(
            self.module,
            builder,
            self.runtime_global(&symbols::WS_BUDGET),
        );
        let local = LLVMGetParam(f, 0);
        let (from, to) = if to_local {
            (budget, local)
        } else {
            (local, budget)
        };
        let value = LLVMBuildLoad2(builder, self.i64_type, from, c"".as_ptr());
        LLVMSetAlignment(value, 8);
        LLVMSetAlignment(LLVMBuildStore(builder, value, to), 8);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
        self.budget_copies[slot] = Some(f);
        f
    }

    /// The helper marking a range of `span`: `__kage_ws_mark_line`, `__kage_ws_mark_pair`
    /// or `__kage_ws_mark_range(ptr p, i64 len)`.
    ///
    /// # Safety
    /// The module must still be alive.
    pub unsafe fn mark(&mut self, span: LineSpan) -> LLVMValueRef {
        let (slot, name) = match span {
            LineSpan::One => (0, MARK_LINE),
            LineSpan::Two => (1, MARK_PAIR),
            LineSpan::Many => (2, MARK_RANGE),
        };
        if let Some(f) = self.marks[slot] {
            return f;
        }
        let f = self.define_helper(name);
        self.build_mark(f, span);
        self.marks[slot] = Some(f);
        f
    }

    /// The runtime's `__kage_ws_trace(ptr addr, i64 size)` (mode 2).
    ///
    /// # Safety
    /// The module must still be alive.
    pub unsafe fn trace(&mut self) -> LLVMValueRef {
        if let Some(f) = self.trace {
            return f;
        }
        let f = RuntimeFunction::declare(self.module, &symbols::WS_TRACE).value;
        self.trace = Some(f);
        f
    }

    /// `__kage_ws_trace_range(ptr p, i64 len)` (mode 2).
    ///
    /// # Safety
    /// The module must still be alive.
    pub unsafe fn trace_range(&mut self) -> LLVMValueRef {
        if let Some(f) = self.trace_range {
            return f;
        }
        let trace = self.trace();
        let f = self.define_helper(TRACE_RANGE);
        let builder = LLVMCreateBuilderInContext(self.context);
        let entry = self.append_block(f, "entry");
        let call = self.append_block(f, "trace");
        let done = self.append_block(f, "done");
        LLVMPositionBuilderAtEnd(builder, entry);
        let (p, len) = (LLVMGetParam(f, 0), LLVMGetParam(f, 1));
        let empty = self.is_zero(builder, len);
        LLVMBuildCondBr(builder, empty, done, call);
        LLVMPositionBuilderAtEnd(builder, call);
        let mut args = [p, len];
        LLVMBuildCall2(
            builder,
            self.pointer_length_type,
            trace,
            args.as_mut_ptr(),
            2,
            c"".as_ptr(),
        );
        LLVMBuildBr(builder, done);
        LLVMPositionBuilderAtEnd(builder, done);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
        self.trace_range = Some(f);
        f
    }

    /// A new `__kage_ws_chunk(iN iv, iN start, i64 trips_after_first, ptr..., ptr local)`
    /// with one `ptr` per range and the local budget last, without a body yet (LLVM makes the names of later ones unique), and
    /// its type.
    ///
    /// # Safety
    /// The module must still be alive; `counter_type` an integer type of its context.
    pub unsafe fn define_chunk_helper(
        &mut self,
        counter_type: LLVMTypeRef,
        ranges: usize,
    ) -> (LLVMValueRef, LLVMTypeRef) {
        // The ranges' starts, then the function's local budget.
        let mut params = vec![counter_type, counter_type, self.i64_type];
        params.resize(params.len() + ranges + 1, self.ptr_type);
        let ty = LLVMFunctionType(self.void_type, params.as_mut_ptr(), params.len() as u32, 0);
        (self.define_function(CHUNK, ty), ty)
    }

    /// An internal `alwaysinline nounwind void (ptr, i64)` function without a body yet.
    unsafe fn define_helper(&self, name: &str) -> LLVMValueRef {
        self.define_function(name, self.pointer_length_type)
    }

    /// An internal `alwaysinline nounwind` function of type `ty` without a body yet.
    unsafe fn define_function(&self, name: &str, ty: LLVMTypeRef) -> LLVMValueRef {
        ir::define_inline_helper(self.module, name, ty)
    }

    /// Appends a block named `name` to `f`.
    ///
    /// # Safety
    /// `f` must be a function of the module.
    pub unsafe fn append_block(&self, f: LLVMValueRef, name: &str) -> LLVMBasicBlockRef {
        LLVMAppendBasicBlockInContext(self.context, f, c_string(name).as_ptr())
    }

    unsafe fn is_zero(&self, builder: LLVMBuilderRef, value: LLVMValueRef) -> LLVMValueRef {
        let zero = LLVMConstInt(LLVMTypeOf(value), 0, 0);
        LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntEQ,
            value,
            zero,
            c"".as_ptr(),
        )
    }

    /// The runtime's global `symbol`.
    unsafe fn runtime_global(&self, symbol: &Symbol) -> LLVMValueRef {
        ir::declare_runtime_global(self.module, symbol)
    }

    unsafe fn build_budget_check(&self, f: LLVMValueRef) {
        // `preserve_most` on x86-64 (the runtime's trampoline saves the registers), so the
        // cold call does not make the caller save callee-saved registers.
        let tick = RuntimeFunction::declare(self.module, &symbols::WS_TICK);
        let budget = self.runtime_global(&symbols::WS_BUDGET);
        let builder = LLVMCreateBuilderInContext(self.context);
        let entry = self.append_block(f, "entry");
        let tick_block = self.append_block(f, "tick");
        let done = self.append_block(f, "done");
        LLVMPositionBuilderAtEnd(builder, entry);
        let local = LLVMGetParam(f, 2);
        let old = LLVMBuildLoad2(builder, self.i64_type, local, c"".as_ptr());
        LLVMSetAlignment(old, 8);
        let new = LLVMBuildSub(builder, old, LLVMGetParam(f, 1), c"".as_ptr());
        LLVMSetAlignment(LLVMBuildStore(builder, new, local), 8);
        let zero = LLVMConstInt(self.i64_type, 0, 0);
        let spent = LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntSLT,
            new,
            zero,
            c"".as_ptr(),
        );
        let branch = LLVMBuildCondBr(builder, spent, tick_block, done);
        ir::set_branch_weights(branch, 1, 1 << 20);
        LLVMPositionBuilderAtEnd(builder, tick_block);
        // The tick reads the spent budget and sets the next interval's.
        let shared = ir::thread_local_address(self.module, builder, budget);
        LLVMSetAlignment(LLVMBuildStore(builder, new, shared), 8);
        tick.call(builder, &mut [LLVMGetParam(f, 0)]);
        let next = LLVMBuildLoad2(builder, self.i64_type, shared, c"".as_ptr());
        LLVMSetAlignment(next, 8);
        LLVMSetAlignment(LLVMBuildStore(builder, next, local), 8);
        LLVMBuildBr(builder, done);
        LLVMPositionBuilderAtEnd(builder, done);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
    }

    unsafe fn build_mark(&self, f: LLVMValueRef, span: LineSpan) {
        let builder = LLVMCreateBuilderInContext(self.context);
        let entry = self.append_block(f, "entry");
        let mark_first = self.append_block(f, "mark.first");
        let done = self.append_block(f, "done");
        let (p, len) = (LLVMGetParam(f, 0), LLVMGetParam(f, 1));

        LLVMPositionBuilderAtEnd(builder, entry);
        if span == LineSpan::Many {
            let empty = self.is_zero(builder, len);
            LLVMBuildCondBr(builder, empty, done, mark_first);
        } else {
            LLVMBuildBr(builder, mark_first); // lengths of the small spans are never 0
        }

        LLVMPositionBuilderAtEnd(builder, mark_first);
        let offset = LLVMConstInt(self.i64_type, kage_abi::WS_SHADOW_BASE, 0);
        let address = LLVMBuildPtrToInt(builder, p, self.i64_type, c"".as_ptr());
        let first = self.line_of(builder, address);
        if span == LineSpan::Two {
            // Most pairs find both bytes marked: one 16-bit load and a compare instead of
            // a load and a compare per line plus the test of whether there is a second.
            let exact = LLVMInsertBasicBlockInContext(self.context, done, c"exact".as_ptr());
            let marked = self.pair_marked(builder, offset, first);
            let branch = LLVMBuildCondBr(builder, marked, done, exact);
            ir::set_branch_weights(branch, 1 << 10, 1);
            LLVMPositionBuilderAtEnd(builder, exact);
        }
        self.mark_line(builder, offset, first, done);
        if span == LineSpan::One {
            LLVMBuildBr(builder, done);
        } else {
            let mark_last =
                LLVMInsertBasicBlockInContext(self.context, done, c"mark.last".as_ptr());
            let one = LLVMConstInt(self.i64_type, 1, 0);
            let end = LLVMBuildAdd(builder, address, len, c"".as_ptr());
            let last_address = LLVMBuildSub(builder, end, one, c"".as_ptr());
            let last = self.line_of(builder, last_address);
            let single = LLVMBuildICmp(
                builder,
                LLVMIntPredicate::LLVMIntEQ,
                last,
                first,
                c"".as_ptr(),
            );
            LLVMBuildCondBr(builder, single, done, mark_last);

            LLVMPositionBuilderAtEnd(builder, mark_last);
            self.mark_line(builder, offset, last, done);
            if span == LineSpan::Two {
                LLVMBuildBr(builder, done);
            } else {
                let mark_middle =
                    LLVMInsertBasicBlockInContext(self.context, done, c"mark.middle".as_ptr());
                let after_first = LLVMBuildAdd(builder, first, one, c"".as_ptr());
                let has_middle = LLVMBuildICmp(
                    builder,
                    LLVMIntPredicate::LLVMIntUGT,
                    last,
                    after_first,
                    c"".as_ptr(),
                );
                LLVMBuildCondBr(builder, has_middle, mark_middle, done);

                LLVMPositionBuilderAtEnd(builder, mark_middle);
                let mark_lines = RuntimeFunction::declare(self.module, &symbols::WS_MARK_LINES);
                let before_last = LLVMBuildSub(builder, last, one, c"".as_ptr());
                mark_lines.call(builder, &mut [after_first, before_last]);
                LLVMBuildBr(builder, done);
            }
        }

        LLVMPositionBuilderAtEnd(builder, done);
        LLVMBuildRetVoid(builder);
        LLVMDisposeBuilder(builder);
    }

    /// `address >> log2(line size)`: a constant shift and no mask, so a mark needs no
    /// register beyond the address and the shadow offset (docs/abi.md says why no mask).
    unsafe fn line_of(&self, builder: LLVMBuilderRef, address: LLVMValueRef) -> LLVMValueRef {
        let shift = LLVMConstInt(self.i64_type, self.line_size.trailing_zeros() as u64, 0);
        LLVMBuildLShr(builder, address, shift, c"".as_ptr())
    }

    /// The address of line `line`'s shadow byte: `offset + line`.
    unsafe fn shadow_byte(
        &self,
        builder: LLVMBuilderRef,
        offset: LLVMValueRef,
        line: LLVMValueRef,
    ) -> LLVMValueRef {
        let address = LLVMBuildAdd(builder, offset, line, c"".as_ptr());
        LLVMBuildIntToPtr(builder, address, self.ptr_type, c"".as_ptr())
    }

    /// Whether bit 0 is set in the shadow bytes of both `line` and `line + 1` (one unaligned
    /// 16-bit load: the byte after a line's is always in the reservation, docs/abi.md). A
    /// range of two lines at most is then marked whether it ends in `line` or the next.
    unsafe fn pair_marked(
        &self,
        builder: LLVMBuilderRef,
        offset: LLVMValueRef,
        line: LLVMValueRef,
    ) -> LLVMValueRef {
        let i16_type = LLVMInt16TypeInContext(self.context);
        let shadow = self.shadow_byte(builder, offset, line);
        let pair = LLVMBuildLoad2(builder, i16_type, shadow, c"".as_ptr());
        LLVMSetAlignment(pair, 1);
        let both_bits = LLVMConstInt(i16_type, 0x0101, 0);
        let bits = LLVMBuildAnd(builder, pair, both_bits, c"".as_ptr());
        LLVMBuildICmp(
            builder,
            LLVMIntPredicate::LLVMIntEQ,
            bits,
            both_bits,
            c"".as_ptr(),
        )
    }

    /// `s = (uint8_t *)(offset + line); if (!(*s & 1)) *s |= 1;` — check before set, so a
    /// line already marked costs a load and no store. The set path reads the byte again
    /// (a volatile load, which nothing merges with the check's), so that the check's load
    /// has no other use and folds into the test: `testb $1, 0x7fff8000(%reg)` and a branch
    /// on x86-64. Its blocks go before `next`; leaves the builder at the end of the block
    /// after the mark.
    unsafe fn mark_line(
        &self,
        builder: LLVMBuilderRef,
        offset: LLVMValueRef,
        line: LLVMValueRef,
        next: LLVMBasicBlockRef,
    ) {
        let insert =
            |name: &str| LLVMInsertBasicBlockInContext(self.context, next, c_string(name).as_ptr());
        let set = insert("set");
        let marked = insert("marked");
        let shadow = self.shadow_byte(builder, offset, line);
        let byte = LLVMBuildLoad2(builder, self.i8_type, shadow, c"".as_ptr());
        let bit_one = LLVMConstInt(self.i8_type, 1, 0);
        let bit = LLVMBuildAnd(builder, byte, bit_one, c"".as_ptr());
        let unset = self.is_zero(builder, bit);
        LLVMBuildCondBr(builder, unset, set, marked);
        LLVMPositionBuilderAtEnd(builder, set);
        let again = LLVMBuildLoad2(builder, self.i8_type, shadow, c"".as_ptr());
        LLVMSetVolatile(again, 1);
        let with_bit = LLVMBuildOr(builder, again, bit_one, c"".as_ptr());
        LLVMBuildStore(builder, with_bit, shadow);
        LLVMBuildBr(builder, marked);
        LLVMPositionBuilderAtEnd(builder, marked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_spans() {
        // Naturally aligned accesses up to a line long stay in one line.
        for size in [1, 2, 4, 8, 16] {
            assert_eq!(LineSpan::of(size, size, 16), LineSpan::One);
        }
        assert_eq!(
            LineSpan::of(32, 32, 16),
            LineSpan::Many,
            "longer than the line"
        );
        assert_eq!(LineSpan::of(32, 32, 64), LineSpan::One);
        assert_eq!(LineSpan::of(64, 64, 64), LineSpan::One);
        assert_eq!(LineSpan::of(64, 128, 64), LineSpan::One);
        assert_eq!(LineSpan::of(8, 64, 16), LineSpan::One);
        assert_eq!(
            LineSpan::of(16, 8, 16),
            LineSpan::Two,
            "two 8-byte words from an 8-aligned base"
        );
        assert_eq!(LineSpan::of(4, 1, 64), LineSpan::Two, "unaligned");
        assert_eq!(LineSpan::of(17, 64, 16), LineSpan::Many);
        assert_eq!(LineSpan::of(24, 8, 16), LineSpan::Many);
        assert_eq!(LineSpan::of(24, 8, 64), LineSpan::Two);
        assert_eq!(LineSpan::of(65, 64, 64), LineSpan::Many);
    }
}
