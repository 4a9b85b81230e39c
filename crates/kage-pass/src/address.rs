//! Addresses as "base value + constant byte offset", and merging of byte ranges: what lets
//! the working-set instrumentation mark several accesses with one call.

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMTypeRef, LLVMValueRef};
use llvm_sys::target::{LLVMABISizeOfType, LLVMOffsetOfElement, LLVMTargetDataRef};
use llvm_sys::{LLVMOpcode, LLVMTypeKind};

use crate::ir;

/// Ranges closer than this are merged: the smallest line size the runtime uses, so no whole
/// line lies in a smaller gap and marking across it never marks a line nothing touched.
pub const MERGE_GAP: i64 = 16;

/// `ptr` as `base + offset` bytes, peeling `getelementptr`s whose indices are all constant
/// (instructions and constant expressions) and pointer-to-pointer bitcasts. A GEP with a
/// variable index is a base itself.
///
/// # Safety
/// `ptr` must be a valid pointer value of a module with data layout `data_layout`.
pub unsafe fn split_constant_offset(
    data_layout: LLVMTargetDataRef,
    ptr: LLVMValueRef,
) -> (LLVMValueRef, i64) {
    let mut base = ptr;
    let mut offset = 0i64;
    // The bound only guards against malformed IR; real chains are short.
    for _ in 0..64 {
        match peel_constant_step(data_layout, base) {
            Some((inner, step)) => match offset.checked_add(step) {
                Some(sum) => {
                    base = inner;
                    offset = sum;
                }
                None => break,
            },
            None => break,
        }
    }
    (base, offset)
}

/// One step of [`split_constant_offset`]: `value` = `inner` + `step` bytes.
unsafe fn peel_constant_step(
    data_layout: LLVMTargetDataRef,
    value: LLVMValueRef,
) -> Option<(LLVMValueRef, i64)> {
    match value_opcode(value)? {
        LLVMOpcode::LLVMBitCast => {
            let inner = LLVMGetOperand(value, 0);
            let is_pointer =
                |v| LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMTypeKind::LLVMPointerTypeKind;
            (is_pointer(inner) && is_pointer(value)).then_some((inner, 0))
        }
        LLVMOpcode::LLVMGetElementPtr => {
            let mut offset = 0i64;
            for (index, step) in gep_steps(data_layout, value)? {
                let constant = ir::constant_i64(index)?;
                offset = offset.checked_add(step.offset_of(constant)?)?;
            }
            Some((LLVMGetOperand(value, 0), offset))
        }
        _ => None,
    }
}

/// The opcode of an instruction or constant expression.
///
/// # Safety
/// `value` must be a valid value.
pub unsafe fn value_opcode(value: LLVMValueRef) -> Option<LLVMOpcode> {
    if !LLVMIsAInstruction(value).is_null() {
        Some(LLVMGetInstructionOpcode(value))
    } else if !LLVMIsAConstantExpr(value).is_null() {
        Some(LLVMGetConstOpcode(value))
    } else {
        None
    }
}

/// What one GEP index does to the address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GepStep {
    /// Adds `index * size` bytes (pointer and array indices).
    Scaled { size: i64 },
    /// Selects a field of `struct_type` (the index is always a constant); its offset comes
    /// from the data layout.
    Field {
        struct_type: LLVMTypeRef,
        data_layout: LLVMTargetDataRef,
    },
}

impl GepStep {
    /// The byte offset this step adds for the constant index `index`.
    ///
    /// # Safety
    /// A `Field` step's type and layout must be valid.
    pub unsafe fn offset_of(self, index: i64) -> Option<i64> {
        match self {
            GepStep::Scaled { size } => index.checked_mul(size),
            GepStep::Field {
                struct_type,
                data_layout,
            } => {
                let field = u32::try_from(index).ok()?;
                if field >= LLVMCountStructElementTypes(struct_type) {
                    return None;
                }
                i64::try_from(LLVMOffsetOfElement(data_layout, struct_type, field)).ok()
            }
        }
    }
}

/// The indices of GEP `gep` (instruction or constant expression), each with what it does.
/// `None` for GEPs the pass does not model: vector indices or vector-of-pointer results,
/// scalable or unsized types.
///
/// # Safety
/// `gep` must be a valid GEP of a module with data layout `data_layout`.
pub unsafe fn gep_steps(
    data_layout: LLVMTargetDataRef,
    gep: LLVMValueRef,
) -> Option<Vec<(LLVMValueRef, GepStep)>> {
    if LLVMGetTypeKind(LLVMTypeOf(gep)) != LLVMTypeKind::LLVMPointerTypeKind {
        return None; // a vector of pointers
    }
    let mut ty = LLVMGetGEPSourceElementType(gep);
    let operand_count = LLVMGetNumOperands(gep) as u32;
    let mut steps = Vec::with_capacity(operand_count.saturating_sub(1) as usize);
    for i in 1..operand_count {
        let index = LLVMGetOperand(gep, i);
        if LLVMGetTypeKind(LLVMTypeOf(index)) != LLVMTypeKind::LLVMIntegerTypeKind {
            return None;
        }
        let step = if i == 1 {
            GepStep::Scaled {
                size: sized_bytes(data_layout, ty)?,
            }
        } else {
            match LLVMGetTypeKind(ty) {
                LLVMTypeKind::LLVMStructTypeKind => {
                    let step = GepStep::Field {
                        struct_type: ty,
                        data_layout,
                    };
                    let field = u32::try_from(ir::constant_i64(index)?).ok()?;
                    if field >= LLVMCountStructElementTypes(ty) {
                        return None;
                    }
                    ty = LLVMStructGetTypeAtIndex(ty, field);
                    step
                }
                LLVMTypeKind::LLVMArrayTypeKind => {
                    ty = LLVMGetElementType(ty);
                    GepStep::Scaled {
                        size: sized_bytes(data_layout, ty)?,
                    }
                }
                _ => return None, // vectors: element offsets are not plain multiples
            }
        };
        steps.push((index, step));
    }
    Some(steps)
}

/// The allocation size of a sized, fixed-size type, as GEP scales indices by it.
unsafe fn sized_bytes(data_layout: LLVMTargetDataRef, ty: LLVMTypeRef) -> Option<i64> {
    if LLVMTypeIsSized(ty) == 0 || LLVMGetTypeKind(ty) == LLVMTypeKind::LLVMScalableVectorTypeKind {
        return None;
    }
    i64::try_from(LLVMABISizeOfType(data_layout, ty)).ok()
}

/// Byte ranges `[lo, hi)` relative to one base, merged when they overlap or the gap between
/// them is below [`MERGE_GAP`]; the result is sorted and disjoint. Empty ranges are dropped.
pub fn merge_ranges(ranges: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    merge_ranges_within(ranges, MERGE_GAP)
}

/// As [`merge_ranges`], merging across gaps below `gap` bytes (1: only ranges that overlap
/// or touch, which keeps the bytes covered exactly).
pub fn merge_ranges_within(mut ranges: Vec<(i64, i64)>, gap: i64) -> Vec<(i64, i64)> {
    ranges.retain(|&(lo, hi)| hi > lo);
    ranges.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match merged.last_mut() {
            Some(last) if lo.saturating_sub(last.1) < gap => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::{merge_ranges, merge_ranges_within};

    #[test]
    fn exact_merging_keeps_every_gap() {
        assert_eq!(
            merge_ranges_within(vec![(0, 4), (4, 8), (9, 10), (2, 3)], 1),
            vec![(0, 8), (9, 10)]
        );
    }

    #[test]
    fn adjacent_and_overlapping_ranges_merge() {
        // p[0..4] as i32: one 16-byte range.
        assert_eq!(
            merge_ranges(vec![(8, 12), (0, 4), (12, 16), (4, 8)]),
            vec![(0, 16)]
        );
        assert_eq!(merge_ranges(vec![(0, 8), (4, 6)]), vec![(0, 8)]);
        assert_eq!(merge_ranges(vec![(0, 8), (0, 8)]), vec![(0, 8)]);
    }

    #[test]
    fn gaps_below_sixteen_bytes_merge_and_larger_ones_do_not() {
        assert_eq!(merge_ranges(vec![(0, 4), (19, 20)]), vec![(0, 20)]); // gap 15
        assert_eq!(merge_ranges(vec![(0, 4), (20, 24)]), vec![(0, 4), (20, 24)]); // gap 16
                                                                                  // p[0] and p[10] as i64: gap 72.
        assert_eq!(merge_ranges(vec![(80, 88), (0, 8)]), vec![(0, 8), (80, 88)]);
    }

    #[test]
    fn negative_offsets_and_empty_ranges() {
        assert_eq!(merge_ranges(vec![(-8, 0), (0, 4)]), vec![(-8, 4)]);
        assert_eq!(merge_ranges(vec![(5, 5), (0, 0)]), vec![]);
        assert_eq!(
            merge_ranges(vec![(i64::MIN, i64::MIN + 1), (i64::MAX - 1, i64::MAX)]),
            vec![(i64::MIN, i64::MIN + 1), (i64::MAX - 1, i64::MAX)]
        );
    }
}
