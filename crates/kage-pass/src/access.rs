//! The memory accesses the pass reports (the table of docs/abi.md), found before any
//! insertion, and the byte ranges they touch.

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMTypeRef, LLVMValueRef};
use llvm_sys::target::{LLVMStoreSizeOfType, LLVMTargetDataRef};
use llvm_sys::{LLVMOpcode, LLVMTypeKind};

use crate::{ir, library};

/// One memory access to report, found before any insertion.
pub enum Access {
    /// `__kage_load` then/or `__kage_store` before `at`, each of `size` bytes (an
    /// `atomicrmw` has both).
    Plain {
        at: LLVMValueRef,
        ptr: LLVMValueRef,
        size: u64,
        load: bool,
        store: bool,
    },
    /// `__kage_cmpxchg` right after the instruction.
    CmpXchg {
        inst: LLVMValueRef,
        ptr: LLVMValueRef,
        size: u64,
    },
    /// A run of `len` bytes read from `src` and/or written to `dst`, before `at`: an
    /// `llvm.mem*` (`dst` always), or a C library function's effect, marked after its call
    /// ([`crate::library`]).
    Bulk {
        at: LLVMValueRef,
        dst: Option<LLVMValueRef>,
        src: Option<LLVMValueRef>,
        len: LLVMValueRef,
    },
}

/// How many bytes a range covers.
#[derive(Debug, Clone, Copy)]
pub enum Length {
    Constant(u64),
    /// A run-time value (an `llvm.mem*` length), of any integer type.
    Dynamic(LLVMValueRef),
}

/// One contiguous byte range an access touches.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub ptr: LLVMValueRef,
    pub len: Length,
    /// A power of two `ptr` is known to be a multiple of (the access's `align`; 1 when
    /// unknown).
    pub align: u64,
}

impl Access {
    /// The instruction making the access.
    pub fn instruction(&self) -> LLVMValueRef {
        match *self {
            Access::Plain { at, .. } | Access::Bulk { at, .. } => at,
            Access::CmpXchg { inst, .. } => inst,
        }
    }

    /// The byte ranges the access touches: the source before the destination of a copy.
    ///
    /// # Safety
    /// The access's values must still be valid.
    pub unsafe fn ranges(&self) -> Vec<Range> {
        match *self {
            Access::Plain { ptr, size, .. } | Access::CmpXchg { ptr, size, .. } => vec![Range {
                ptr,
                len: Length::Constant(size),
                align: u64::from(LLVMGetAlignment(self.instruction())).max(1),
            }],
            Access::Bulk { dst, src, len, .. } => {
                let len = match ir::constant_u64(len) {
                    Some(n) => Length::Constant(n),
                    None => Length::Dynamic(len),
                };
                src.into_iter()
                    .chain(dst)
                    .map(|ptr| Range { ptr, len, align: 1 })
                    .collect()
            }
        }
    }
}

/// The access `inst` makes, if it is one the ABI reports.
///
/// # Safety
/// `inst` must be a valid instruction of a module with data layout `data_layout`.
pub unsafe fn classify_access(
    inst: LLVMValueRef,
    data_layout: LLVMTargetDataRef,
) -> Option<Access> {
    let operand = |i| LLVMGetOperand(inst, i);
    match ir::opcode(inst) {
        LLVMOpcode::LLVMLoad => {
            let size = access_size(data_layout, LLVMTypeOf(inst))?;
            Some(Access::Plain {
                at: inst,
                ptr: pointer(operand(0))?,
                size,
                load: true,
                store: false,
            })
        }
        LLVMOpcode::LLVMStore => {
            let size = access_size(data_layout, LLVMTypeOf(operand(0)))?;
            Some(Access::Plain {
                at: inst,
                ptr: pointer(operand(1))?,
                size,
                load: false,
                store: true,
            })
        }
        LLVMOpcode::LLVMAtomicRMW => {
            let size = access_size(data_layout, LLVMTypeOf(operand(1)))?;
            Some(Access::Plain {
                at: inst,
                ptr: pointer(operand(0))?,
                size,
                load: true,
                store: true,
            })
        }
        LLVMOpcode::LLVMAtomicCmpXchg => {
            let size = access_size(data_layout, LLVMTypeOf(operand(1)))?;
            Some(Access::CmpXchg {
                inst,
                ptr: pointer(operand(0))?,
                size,
            })
        }
        LLVMOpcode::LLVMCall => {
            let callee = LLVMGetCalledValue(inst);
            if callee.is_null() || LLVMIsAFunction(callee).is_null() {
                return None;
            }
            let name = ir::value_name(callee);
            if let Some(write) = library::marker_writes(&name) {
                let (ptr, len) = (pointer(operand(0))?, operand(1));
                return Some(Access::Bulk {
                    at: inst,
                    dst: write.then_some(ptr),
                    src: (!write).then_some(ptr),
                    len,
                });
            }
            // memcpy/memmove (dst, src, len, ...) and memset (dst, val, len, ...), including
            // `.inline` and `.element.unordered.atomic`, which keep those argument positions.
            let transfer = name.starts_with("llvm.memcpy") || name.starts_with("llvm.memmove");
            if !transfer && !name.starts_with("llvm.memset") {
                return None;
            }
            if LLVMGetNumArgOperands(inst) < 3 {
                return None;
            }
            let len = operand(2);
            if LLVMGetTypeKind(LLVMTypeOf(len)) != LLVMTypeKind::LLVMIntegerTypeKind {
                return None;
            }
            let dst = pointer(operand(0))?;
            let src = if transfer {
                Some(pointer(operand(1))?)
            } else {
                None
            };
            Some(Access::Bulk {
                at: inst,
                dst: Some(dst),
                src,
                len,
            })
        }
        _ => None,
    }
}

/// The store size of `ty`; `None` for scalable vectors (size unknown at compile time) and
/// zero-sized types (nothing is touched).
unsafe fn access_size(data_layout: LLVMTargetDataRef, ty: LLVMTypeRef) -> Option<u64> {
    if LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMScalableVectorTypeKind || LLVMTypeIsSized(ty) == 0 {
        return None;
    }
    Some(LLVMStoreSizeOfType(data_layout, ty)).filter(|&size| size > 0)
}

/// `value` if it is a pointer in address space 0. Other address spaces (x86 `fs`/`gs`
/// segments, GPU memories) are not plain addresses the runtime could shadow.
unsafe fn pointer(value: LLVMValueRef) -> Option<LLVMValueRef> {
    let ty = LLVMTypeOf(value);
    (LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMPointerTypeKind
        && LLVMGetPointerAddressSpace(ty) == 0)
        .then_some(value)
}
