//! The memory effects of the C library functions a program calls (`strlen`, `memcmp`,
//! `strcpy`, `fread`...), whose own code is not instrumented: after each call of one, the
//! pass computes the runs of bytes it read and wrote, from its arguments and its result (or,
//! where the result does not say, a scan by `__kage_library_compared`), and marks each run
//! with a call of a marker, `__kage_effect_read(ptr, len)` or `__kage_effect_write(ptr, len)`.
//! [`crate::access::classify_access`] reads a marker as a bulk access like an `llvm.memcpy`'s,
//! so every tool that sees library effects ([`crate::tools::Tool::sees_library_effects`])
//! instruments it as one; [`remove_markers`] deletes the markers once they have. What each
//! function reads and writes is the table of docs/abi.md, "C library functions": what the C
//! standard says it must (up to the byte that decides a comparison, the string and its NUL),
//! not what an implementation happens to read beyond.

use kage_abi::symbols;
use llvm_sys::core::*;
use llvm_sys::debuginfo::LLVMInstructionGetDebugLoc;
use llvm_sys::prelude::*;
use llvm_sys::{LLVMIntPredicate, LLVMOpcode, LLVMTypeKind};

use crate::ir::{self, RuntimeFunction};

const READ_MARKER: &str = "__kage_effect_read";
const WRITE_MARKER: &str = "__kage_effect_write";

/// Whether `name` is a marker of a write (`Some(true)`), of a read (`Some(false)`), or no
/// marker.
pub fn marker_writes(name: &str) -> Option<bool> {
    match name {
        READ_MARKER => Some(false),
        WRITE_MARKER => Some(true),
        _ => None,
    }
}

/// How a function's effects follow from its arguments (`a[i]`) and result (`r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// `strlen(s)`: reads `r + 1` at `s`.
    Strlen,
    /// `strnlen(s, n)`: reads `min(r + 1, n)` at `s`.
    Strnlen,
    /// `memchr(s, c, n)`: reads up to the byte found (`r - s + 1`), else `n`.
    Memchr,
    /// `strchr(s, c)`: up to the byte found, else the string and its NUL.
    Strchr,
    /// `strrchr(s, c)`, `fputs(s, f)`, `puts(s)`: the string and its NUL.
    WholeString,
    /// `memcmp(a, b, n)`, `bcmp`: both up to the first byte that differs, at most `n`.
    Memcmp,
    /// `strcmp(a, b)`: both up to the first byte that differs or the NUL.
    Strcmp,
    /// `strncmp(a, b, n)`: as `strcmp`, at most `n`.
    Strncmp,
    /// `strcpy(d, s)` (and `__strcpy_chk`): the string and its NUL read at `s`, written at `d`.
    Strcpy,
    /// `stpcpy(d, s)` (and `__stpcpy_chk`): as `strcpy`, its length from the result.
    Stpcpy,
    /// `strncpy(d, s, n)` (and `__strncpy_chk`): `n` bytes written at `d`; the string read
    /// at `s` up to its NUL or `n`.
    Strncpy,
    /// `strcat(d, s)` (and `__strcat_chk`): `d`'s string read up to its NUL, `s`'s string
    /// and NUL read and written at that NUL.
    Strcat,
    /// `memcpy(d, s, n)`, `memmove`, `mempcpy` called (and their `__*_chk`): `n` read at
    /// `s` and written at `d`.
    Copy,
    /// `memset(d, c, n)` called (and `__memset_chk`): `n` written at `d`.
    Set,
    /// `strdup(s)`: the string and its NUL read at `s` and written at `r` (when not null).
    Strdup,
    /// `fread(p, size, n, f)`: `r * size` written at `p`.
    Fread,
    /// `fwrite(p, size, n, f)`: `r * size` read at `p`.
    Fwrite,
    /// `read(fd, p, n)`, `pread`: `r` written at `p` when positive.
    Read,
    /// `write(fd, p, n)`, `pwrite`: `r` read at `p` when positive.
    Write,
    /// `fgets(p, n, f)`: the string and its NUL written at `p` when `r` is not null.
    Fgets,
    /// `strspn(s, set)`, `strcspn`: `s` through the byte that stopped it (`r + 1`), `set`'s
    /// string and NUL.
    Span,
    /// `strpbrk(s, set)`: `s` through the byte found, else its string and NUL; `set`'s.
    Strpbrk,
    /// `strstr(h, n)`: `h` through the end of the match, else its string and NUL; `n`'s
    /// string and NUL.
    Strstr,
    /// `sprintf(p, format, ...)`, `vsprintf` (and `__*_chk`, `p` first): `r + 1` written at
    /// `p` when `r` is not negative. What the format reads (`%s` arguments) is not seen.
    Sprintf,
    /// `snprintf(p, n, format, ...)`, `vsnprintf` (and `__*_chk`): `min(r + 1, n)` written at
    /// `p` when `r` is not negative.
    Snprintf,
}

/// The functions, by name, with their number of parameters (a declaration with another
/// number is not the C library's; a variadic one's calls may pass more).
const FUNCTIONS: &[(&str, usize, Effect)] = &[
    ("strlen", 1, Effect::Strlen),
    ("strnlen", 2, Effect::Strnlen),
    ("memchr", 3, Effect::Memchr),
    ("strchr", 2, Effect::Strchr),
    ("strrchr", 2, Effect::WholeString),
    ("fputs", 2, Effect::WholeString),
    ("fputs_unlocked", 2, Effect::WholeString),
    ("puts", 1, Effect::WholeString),
    ("memcmp", 3, Effect::Memcmp),
    ("bcmp", 3, Effect::Memcmp),
    ("strcmp", 2, Effect::Strcmp),
    ("strncmp", 3, Effect::Strncmp),
    ("strcpy", 2, Effect::Strcpy),
    ("__strcpy_chk", 3, Effect::Strcpy),
    ("stpcpy", 2, Effect::Stpcpy),
    ("__stpcpy_chk", 3, Effect::Stpcpy),
    ("strncpy", 3, Effect::Strncpy),
    ("__strncpy_chk", 4, Effect::Strncpy),
    ("strcat", 2, Effect::Strcat),
    ("__strcat_chk", 3, Effect::Strcat),
    ("memcpy", 3, Effect::Copy),
    ("__memcpy_chk", 4, Effect::Copy),
    ("memmove", 3, Effect::Copy),
    ("__memmove_chk", 4, Effect::Copy),
    ("mempcpy", 3, Effect::Copy),
    ("__mempcpy_chk", 4, Effect::Copy),
    ("memset", 3, Effect::Set),
    ("__memset_chk", 4, Effect::Set),
    ("strdup", 1, Effect::Strdup),
    ("fread", 4, Effect::Fread),
    ("fread_unlocked", 4, Effect::Fread),
    ("fwrite", 4, Effect::Fwrite),
    ("fwrite_unlocked", 4, Effect::Fwrite),
    ("read", 3, Effect::Read),
    ("pread", 4, Effect::Read),
    ("pread64", 4, Effect::Read),
    ("write", 3, Effect::Write),
    ("pwrite", 4, Effect::Write),
    ("pwrite64", 4, Effect::Write),
    ("fgets", 3, Effect::Fgets),
    ("fgets_unlocked", 3, Effect::Fgets),
    ("strspn", 2, Effect::Span),
    ("strcspn", 2, Effect::Span),
    ("strpbrk", 2, Effect::Strpbrk),
    ("strstr", 2, Effect::Strstr),
    ("sprintf", 2, Effect::Sprintf),
    ("vsprintf", 3, Effect::Sprintf),
    ("__sprintf_chk", 4, Effect::Sprintf),
    ("__vsprintf_chk", 5, Effect::Sprintf),
    ("snprintf", 3, Effect::Snprintf),
    ("vsnprintf", 4, Effect::Snprintf),
    ("__snprintf_chk", 5, Effect::Snprintf),
    ("__vsnprintf_chk", 6, Effect::Snprintf),
];

/// The effect of `call`, a direct call (not `musttail`) of a declared function of
/// [`FUNCTIONS`] whose parameters have the types the table expects (pointers where it reads
/// or writes, integers for lengths).
unsafe fn effect_of(call: LLVMValueRef) -> Option<Effect> {
    // Nothing may come between a `musttail` call and its `ret`: its effects are not seen.
    if ir::opcode(call) != LLVMOpcode::LLVMCall || ir::is_musttail_call(call) {
        return None;
    }
    let callee = ir::direct_callee(call)?;
    if LLVMIsDeclaration(callee) == 0 {
        return None; // the program's own function of that name, instrumented as such
    }
    let name = ir::value_name(callee);
    let &(_, params, effect) = FUNCTIONS.iter().find(|(n, ..)| *n == name)?;
    let declared = LLVMCountParams(callee) as usize;
    let variadic = LLVMIsFunctionVarArg(LLVMGlobalGetValueType(callee)) != 0;
    if declared != params || (!variadic && LLVMGetNumArgOperands(call) as usize != params) {
        return None;
    }
    let kind = |i: u32| LLVMGetTypeKind(LLVMTypeOf(LLVMGetOperand(call, i)));
    let pointer = |i| kind(i) == LLVMTypeKind::LLVMPointerTypeKind;
    let integer = |i| kind(i) == LLVMTypeKind::LLVMIntegerTypeKind;
    let result = LLVMGetTypeKind(LLVMTypeOf(call));
    use Effect::*;
    let shaped = match effect {
        Strlen | WholeString | Strdup => pointer(0),
        Strnlen => pointer(0) && integer(1),
        Memchr => pointer(0) && integer(2),
        Strchr => pointer(0),
        Memcmp | Strncmp => pointer(0) && pointer(1) && integer(2),
        Strcmp | Strcpy | Stpcpy | Strcat => pointer(0) && pointer(1),
        Strncpy | Copy => pointer(0) && pointer(1) && integer(2),
        Set => pointer(0) && integer(2),
        Fread | Fwrite => pointer(0) && integer(1),
        Read | Write => pointer(1),
        Fgets => pointer(0),
        Span | Strpbrk | Strstr => pointer(0) && pointer(1),
        Sprintf => pointer(0),
        Snprintf => pointer(0) && integer(1),
    };
    let returns = match effect {
        Strlen | Strnlen | Fread | Fwrite | Read | Write | Span | Sprintf | Snprintf => {
            result == LLVMTypeKind::LLVMIntegerTypeKind
        }
        Memchr | Strchr | Stpcpy | Strdup | Fgets | Strpbrk | Strstr => {
            result == LLVMTypeKind::LLVMPointerTypeKind
        }
        _ => true,
    };
    (shaped && returns).then_some(effect)
}

/// Marks the memory effects of every C library call in `func` (see the module's text).
///
/// # Safety
/// `func` must be a live function of `module` that nothing else mutates meanwhile.
pub unsafe fn mark_effects(module: LLVMModuleRef, func: LLVMValueRef) {
    let calls: Vec<(LLVMValueRef, Effect)> = ir::FunctionCfg::new(func)
        .blocks
        .into_iter()
        .flat_map(|b| ir::instructions(b))
        .filter_map(|inst| Some((inst, effect_of(inst)?)))
        .collect();
    if calls.is_empty() {
        return;
    }
    let context = LLVMGetModuleContext(module);
    let builder = LLVMCreateBuilderInContext(context);
    let mut marks = Marks {
        builder,
        i64_type: LLVMInt64TypeInContext(context),
        i32_type: LLVMInt32TypeInContext(context),
        compared: RuntimeFunction::declare(module, &symbols::LIBRARY_COMPARED),
        read: marker(module, READ_MARKER),
        write: marker(module, WRITE_MARKER),
    };
    for (call, effect) in calls {
        LLVMPositionBuilderBefore(builder, LLVMGetNextInstruction(call));
        LLVMSetCurrentDebugLocation2(builder, LLVMInstructionGetDebugLoc(call));
        marks.effect(call, effect);
    }
    LLVMDisposeBuilder(builder);
}

/// Deletes every marker call, and the markers, once the tool has instrumented them.
///
/// # Safety
/// `module` must be live and nothing else mutate it meanwhile.
pub unsafe fn remove_markers(module: LLVMModuleRef) {
    for name in [READ_MARKER, WRITE_MARKER] {
        let func = LLVMGetNamedFunction(module, ir::c_string(name).as_ptr());
        if func.is_null() {
            continue;
        }
        let mut users = Vec::new();
        let mut using = LLVMGetFirstUse(func);
        while !using.is_null() {
            users.push(LLVMGetUser(using));
            using = LLVMGetNextUse(using);
        }
        for call in users {
            LLVMInstructionEraseFromParent(call);
        }
        LLVMDeleteFunction(func);
    }
}

/// `void name(ptr, i64)`, declared when missing.
unsafe fn marker(module: LLVMModuleRef, name: &str) -> (LLVMTypeRef, LLVMValueRef) {
    let context = LLVMGetModuleContext(module);
    let mut params = [
        LLVMPointerTypeInContext(context, 0),
        LLVMInt64TypeInContext(context),
    ];
    let ty = LLVMFunctionType(LLVMVoidTypeInContext(context), params.as_mut_ptr(), 2, 0);
    let name = ir::c_string(name);
    let mut func = LLVMGetNamedFunction(module, name.as_ptr());
    if func.is_null() {
        func = LLVMAddFunction(module, name.as_ptr(), ty);
    }
    (ty, func)
}

/// The builder and what the marks call.
struct Marks {
    builder: LLVMBuilderRef,
    i64_type: LLVMTypeRef,
    i32_type: LLVMTypeRef,
    compared: RuntimeFunction,
    read: (LLVMTypeRef, LLVMValueRef),
    write: (LLVMTypeRef, LLVMValueRef),
}

impl Marks {
    /// The marks of one call's effect, at the builder's position (right after the call).
    unsafe fn effect(&mut self, call: LLVMValueRef, effect: Effect) {
        let arg = |i| LLVMGetOperand(call, i);
        let one = self.constant(1);
        use Effect::*;
        match effect {
            Strlen => {
                let len = LLVMBuildAdd(self.builder, self.i64(call), one, c"".as_ptr());
                self.read(arg(0), len);
            }
            Strnlen => {
                let len = LLVMBuildAdd(self.builder, self.i64(call), one, c"".as_ptr());
                let len = self.min(len, self.i64(arg(1)));
                self.read(arg(0), len);
            }
            Memchr => {
                let found = self.through(arg(0), call);
                let len = self.unless_null(call, found, self.i64(arg(2)));
                self.read(arg(0), len);
            }
            Strchr => {
                let found = self.through(arg(0), call);
                let whole = self.string_if_missed(arg(0), call);
                let len = self.unless_null(call, found, whole);
                self.read(arg(0), len);
            }
            WholeString => {
                let len = self.string(arg(0), None);
                self.read(arg(0), len);
            }
            Memcmp | Strcmp | Strncmp => {
                let limit = match effect {
                    Strcmp => self.constant(u64::MAX),
                    _ => self.i64(arg(2)),
                };
                let nul = LLVMConstInt(self.i32_type, u64::from(effect != Memcmp), 0);
                let mut args = [arg(0), arg(1), limit, nul];
                let len = self.compared.call(self.builder, &mut args);
                self.read(arg(0), len);
                self.read(arg(1), len);
            }
            Strcpy => {
                let len = self.string(arg(0), None);
                self.read(arg(1), len);
                self.write(arg(0), len);
            }
            Stpcpy => {
                let len = self.through(arg(0), call);
                self.read(arg(1), len);
                self.write(arg(0), len);
            }
            Strncpy => {
                let n = self.i64(arg(2));
                let len = self.string(arg(1), Some(n));
                self.read(arg(1), len);
                self.write(arg(0), n);
            }
            Strcat => {
                // After the call, d's string is its old one followed by s's.
                let total = self.string(arg(0), None);
                let added = self.string(arg(1), None);
                let old = LLVMBuildSub(self.builder, total, added, c"".as_ptr());
                let end = LLVMBuildGEP2(
                    self.builder,
                    LLVMInt8TypeInContext(LLVMGetTypeContext(self.i64_type)),
                    arg(0),
                    [old].as_mut_ptr(),
                    1,
                    c"".as_ptr(),
                );
                let old_with_nul = LLVMBuildAdd(self.builder, old, one, c"".as_ptr());
                self.read(arg(0), old_with_nul);
                self.read(arg(1), added);
                self.write(end, added);
            }
            Copy => {
                let n = self.i64(arg(2));
                self.read(arg(1), n);
                self.write(arg(0), n);
            }
            Set => self.write(arg(0), self.i64(arg(2))),
            Strdup => {
                self.read(arg(0), self.string(arg(0), None));
                self.write(call, self.string(call, None));
            }
            Fread | Fwrite => {
                let size = self.i64(arg(1));
                let len = LLVMBuildMul(self.builder, self.i64(call), size, c"".as_ptr());
                if effect == Fread {
                    self.write(arg(0), len);
                } else {
                    self.read(arg(0), len);
                }
            }
            Read | Write => {
                let len = self.unless_negative(call, self.i64(call));
                if effect == Read {
                    self.write(arg(1), len);
                } else {
                    self.read(arg(1), len);
                }
            }
            Fgets => self.write(arg(0), self.string(call, None)),
            Span => {
                let len = LLVMBuildAdd(self.builder, self.i64(call), one, c"".as_ptr());
                self.read(arg(0), len);
                self.read(arg(1), self.string(arg(1), None));
            }
            Strpbrk => {
                let found = self.through(arg(0), call);
                let whole = self.string_if_missed(arg(0), call);
                self.read(arg(0), self.unless_null(call, found, whole));
                self.read(arg(1), self.string(arg(1), None));
            }
            Strstr => {
                let needle = self.string(arg(1), None);
                // The match's start, its length (without the NUL) and the one before it.
                let matched = self.through(arg(0), call);
                let through_match = LLVMBuildAdd(self.builder, matched, needle, c"".as_ptr());
                let through_match =
                    LLVMBuildSub(self.builder, through_match, self.constant(2), c"".as_ptr());
                let whole = self.string_if_missed(arg(0), call);
                self.read(arg(0), self.unless_null(call, through_match, whole));
                self.read(arg(1), needle);
            }
            Sprintf | Snprintf => {
                let len = LLVMBuildAdd(self.builder, self.i64(call), one, c"".as_ptr());
                let len = match effect {
                    Snprintf => self.min(len, self.i64(arg(1))),
                    _ => len,
                };
                self.write(arg(0), self.unless_negative(call, len));
            }
        }
    }

    unsafe fn read(&self, ptr: LLVMValueRef, len: LLVMValueRef) {
        self.mark(self.read, ptr, len);
    }

    unsafe fn write(&self, ptr: LLVMValueRef, len: LLVMValueRef) {
        self.mark(self.write, ptr, len);
    }

    unsafe fn mark(
        &self,
        (ty, func): (LLVMTypeRef, LLVMValueRef),
        ptr: LLVMValueRef,
        len: LLVMValueRef,
    ) {
        let mut args = [ptr, len];
        LLVMBuildCall2(self.builder, ty, func, args.as_mut_ptr(), 2, c"".as_ptr());
    }

    unsafe fn constant(&self, v: u64) -> LLVMValueRef {
        LLVMConstInt(self.i64_type, v, 0)
    }

    /// An unsigned integer as an `i64`.
    unsafe fn i64(&self, v: LLVMValueRef) -> LLVMValueRef {
        LLVMBuildIntCast2(self.builder, v, self.i64_type, 0, c"".as_ptr())
    }

    unsafe fn min(&self, a: LLVMValueRef, b: LLVMValueRef) -> LLVMValueRef {
        let less = LLVMBuildICmp(
            self.builder,
            LLVMIntPredicate::LLVMIntULT,
            a,
            b,
            c"".as_ptr(),
        );
        LLVMBuildSelect(self.builder, less, a, b, c"".as_ptr())
    }

    /// `end - start + 1`: the bytes from `start` through the one `end` points at.
    unsafe fn through(&self, start: LLVMValueRef, end: LLVMValueRef) -> LLVMValueRef {
        let start = LLVMBuildPtrToInt(self.builder, start, self.i64_type, c"".as_ptr());
        let end = LLVMBuildPtrToInt(self.builder, end, self.i64_type, c"".as_ptr());
        let diff = LLVMBuildSub(self.builder, end, start, c"".as_ptr());
        LLVMBuildAdd(self.builder, diff, self.constant(1), c"".as_ptr())
    }

    /// `value` unless `pointer` is null, else `otherwise`.
    unsafe fn unless_null(
        &self,
        pointer: LLVMValueRef,
        value: LLVMValueRef,
        otherwise: LLVMValueRef,
    ) -> LLVMValueRef {
        let null = LLVMBuildIsNull(self.builder, pointer, c"".as_ptr());
        LLVMBuildSelect(self.builder, null, otherwise, value, c"".as_ptr())
    }

    /// `value` unless `result` (a signed count, -1 for an error) is negative, else 0.
    unsafe fn unless_negative(&self, result: LLVMValueRef, value: LLVMValueRef) -> LLVMValueRef {
        let zero = LLVMConstInt(LLVMTypeOf(result), 0, 0);
        let negative = LLVMBuildICmp(
            self.builder,
            LLVMIntPredicate::LLVMIntSLT,
            result,
            zero,
            c"".as_ptr(),
        );
        LLVMBuildSelect(
            self.builder,
            negative,
            self.constant(0),
            value,
            c"".as_ptr(),
        )
    }

    /// The length of the string at `s` with its NUL when a search of it found nothing
    /// (`result` is null), else 0 without scanning: the scan is given a null pointer.
    unsafe fn string_if_missed(&self, s: LLVMValueRef, result: LLVMValueRef) -> LLVMValueRef {
        let missed = LLVMBuildIsNull(self.builder, result, c"".as_ptr());
        let null = LLVMConstNull(LLVMTypeOf(s));
        let s = LLVMBuildSelect(self.builder, missed, s, null, c"".as_ptr());
        self.string(s, None)
    }

    /// The length of the string at `s` with its NUL, at most `limit`; 0 when `s` is null (a
    /// failed `strdup` or `fgets`: no string to measure).
    unsafe fn string(&self, s: LLVMValueRef, limit: Option<LLVMValueRef>) -> LLVMValueRef {
        let limit = limit.unwrap_or_else(|| self.constant(u64::MAX));
        let mut args = [s, s, limit, LLVMConstInt(self.i32_type, 1, 0)];
        self.compared.call(self.builder, &mut args)
    }
}
