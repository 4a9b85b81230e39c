//! Induction variables of a loop and addresses as linear forms over one of them.

use std::collections::HashSet;

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMBasicBlockRef, LLVMValueRef};
use llvm_sys::target::LLVMTargetDataRef;
use llvm_sys::{LLVMOpcode, LLVMTypeKind};

use crate::address::{gep_steps, value_opcode, GepStep};
use crate::ir::{self, FunctionCfg};

/// A header PHI `iv = phi [S, P], [iv.next, E]` with `iv.next = add iv, C`: `S + j * C`
/// in iteration `j`.
#[derive(Debug, Clone, Copy)]
pub struct Induction {
    pub phi: LLVMValueRef,
    pub next: LLVMValueRef,
    /// `S`, available at the end of the preheader.
    pub start: LLVMValueRef,
    /// `C`.
    pub step: i64,
    /// Flags of `iv.next`: what makes extensions of `iv` affine (see the module docs).
    pub nsw: bool,
    pub nuw: bool,
}

/// The header's induction variables (integers of at most 64 bits).
///
/// # Safety
/// `cfg` must describe a live function; the blocks must be the loop's.
pub unsafe fn inductions(
    cfg: &FunctionCfg,
    header: usize,
    preheader: usize,
    latch: usize,
) -> Vec<Induction> {
    let mut out = Vec::new();
    for phi in ir::instructions(cfg.blocks[header]) {
        if LLVMIsAPHINode(phi).is_null() {
            break;
        }
        let ty = LLVMTypeOf(phi);
        if LLVMGetTypeKind(ty) != LLVMTypeKind::LLVMIntegerTypeKind
            || LLVMGetIntTypeWidth(ty) > 64
            || LLVMCountIncoming(phi) != 2
        {
            continue;
        }
        let incoming = |block: usize| {
            (0..2)
                .find(|&i| LLVMGetIncomingBlock(phi, i) == cfg.blocks[block])
                .map(|i| LLVMGetIncomingValue(phi, i))
        };
        let (Some(start), Some(next)) = (incoming(preheader), incoming(latch)) else {
            continue;
        };
        match add_operand_and_constant(next) {
            Some((operand, step)) if operand == phi => out.push(Induction {
                phi,
                next,
                start,
                step,
                nsw: LLVMGetNSW(next) != 0,
                nuw: LLVMGetNUW(next) != 0,
            }),
            _ => {}
        }
    }
    out
}

/// `(x, c)` when `value` is the instruction `add x, c` (either order) with a constant `c`.
unsafe fn add_operand_and_constant(value: LLVMValueRef) -> Option<(LLVMValueRef, i64)> {
    if LLVMIsAInstruction(value).is_null() || ir::opcode(value) != LLVMOpcode::LLVMAdd {
        return None;
    }
    let (a, b) = (LLVMGetOperand(value, 0), LLVMGetOperand(value, 1));
    if let Some(c) = ir::constant_i64(b) {
        return Some((a, c));
    }
    ir::constant_i64(a).map(|c| (b, c))
}

/// Whether `value` is the same in every iteration: not an instruction of the loop.
///
/// # Safety
/// `value` must be a valid value.
pub unsafe fn is_loop_invariant(
    loop_blocks: &HashSet<LLVMBasicBlockRef>,
    value: LLVMValueRef,
) -> bool {
    LLVMIsAInstruction(value).is_null() || !loop_blocks.contains(&ir::parent_block(value))
}

/// How a narrower integer becomes 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Extension {
    /// Already 64 bits wide.
    None,
    /// `sext`, or a narrower GEP index (GEPs sign-extend their indices).
    Sign,
    Zero,
}

/// `coefficient * ext(value)` for a loop-invariant `value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InvariantTerm {
    pub value: LLVMValueRef,
    pub extension: Extension,
    pub coefficient: i64,
}

/// `iv_coefficient * ext(iv) + Σ invariant + constant`, all modulo 2^64: an i64 value (or a
/// byte offset) as a linear function of at most one induction variable (an index into the
/// loop's [`Induction`]s).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Linear {
    pub iv: Option<(usize, Extension)>,
    pub iv_coefficient: i64,
    /// In order of first appearance (never by address: the output must not depend on
    /// where LLVM allocated its values), one per (value, extension), none with coefficient 0.
    pub invariant: Vec<InvariantTerm>,
    pub constant: i64,
}

impl Linear {
    fn constant(constant: i64) -> Self {
        Linear {
            constant,
            ..Linear::default()
        }
    }

    fn invariant(value: LLVMValueRef, extension: Extension) -> Self {
        Linear {
            invariant: vec![InvariantTerm {
                value,
                extension,
                coefficient: 1,
            }],
            ..Linear::default()
        }
    }

    fn induction(index: usize, extension: Extension) -> Self {
        Linear {
            iv: Some((index, extension)),
            iv_coefficient: 1,
            ..Linear::default()
        }
    }

    /// The sum; `None` when it would involve two induction variables (or two extensions
    /// of one) or a coefficient overflows.
    pub fn plus(mut self, other: Linear) -> Option<Linear> {
        if other.iv.is_some() && other.iv_coefficient != 0 {
            if self.iv.is_some() && self.iv_coefficient != 0 && self.iv != other.iv {
                return None;
            }
            self.iv = other.iv;
        }
        self.iv_coefficient = self.iv_coefficient.checked_add(other.iv_coefficient)?;
        if self.iv_coefficient == 0 {
            self.iv = None;
        }
        self.constant = self.constant.checked_add(other.constant)?;
        for term in other.invariant {
            match (self.invariant.iter_mut())
                .find(|t| (t.value, t.extension) == (term.value, term.extension))
            {
                Some(existing) => {
                    existing.coefficient = existing.coefficient.checked_add(term.coefficient)?
                }
                None => self.invariant.push(term),
            }
        }
        self.invariant.retain(|t| t.coefficient != 0);
        Some(self)
    }

    /// The product with a constant.
    pub fn times(mut self, factor: i64) -> Option<Linear> {
        self.iv_coefficient = self.iv_coefficient.checked_mul(factor)?;
        if self.iv_coefficient == 0 {
            self.iv = None;
        }
        self.constant = self.constant.checked_mul(factor)?;
        for term in &mut self.invariant {
            term.coefficient = term.coefficient.checked_mul(factor)?;
        }
        self.invariant.retain(|t| t.coefficient != 0);
        Some(self)
    }
}

/// An address `base + offset` bytes.
#[derive(Debug, Clone)]
pub struct Affine {
    /// Loop-invariant.
    pub base: LLVMValueRef,
    pub offset: Linear,
}

/// What an address is analysed against.
pub struct LoopContext<'a> {
    pub blocks: &'a HashSet<LLVMBasicBlockRef>,
    pub inductions: &'a [Induction],
    pub data_layout: LLVMTargetDataRef,
}

impl LoopContext<'_> {
    /// `ptr` as `base + linear` bytes: loop-invariant pointers, and GEPs (and no-op casts)
    /// inside the loop whose indices are linear in one induction variable over such a
    /// pointer.
    ///
    /// # Safety
    /// `ptr` must be a valid pointer value of the loop's function.
    pub unsafe fn affine(&self, ptr: LLVMValueRef) -> Option<Affine> {
        if is_loop_invariant(self.blocks, ptr) {
            return Some(Affine {
                base: ptr,
                offset: Linear::default(),
            });
        }
        match value_opcode(ptr)? {
            LLVMOpcode::LLVMBitCast => self.affine(LLVMGetOperand(ptr, 0)),
            LLVMOpcode::LLVMGetElementPtr => {
                let mut address = self.affine(LLVMGetOperand(ptr, 0))?;
                for (index, step) in gep_steps(self.data_layout, ptr)? {
                    let bytes = match ir::constant_i64(index) {
                        Some(constant) => Linear::constant(step.offset_of(constant)?),
                        None => {
                            let GepStep::Scaled { size } = step else {
                                return None; // struct field indices are constants
                            };
                            self.gep_index(index)?.times(size)?
                        }
                    };
                    address.offset = address.offset.plus(bytes)?;
                }
                Some(address)
            }
            _ => None,
        }
    }

    /// A GEP index, which the GEP sign-extends to 64 bits when it is narrower.
    unsafe fn gep_index(&self, index: LLVMValueRef) -> Option<Linear> {
        match LLVMGetIntTypeWidth(LLVMTypeOf(index)) {
            64 => self.linear64(index),
            width if width < 64 => self.extended(index, Extension::Sign, false),
            _ => None,
        }
    }

    /// An i64 value as a linear form: constants, invariants, 64-bit induction variables,
    /// and `add`, `sub`, `or disjoint`, `mul`/`shl` by a constant, `sext`, `zext` of such.
    /// All of these are exact modulo 2^64, like the GEP arithmetic using them.
    unsafe fn linear64(&self, value: LLVMValueRef) -> Option<Linear> {
        if let Some(constant) = ir::constant_i64(value) {
            return Some(Linear::constant(constant));
        }
        if is_loop_invariant(self.blocks, value) {
            return Some(Linear::invariant(value, Extension::None));
        }
        if let Some(k) = self.induction_index(value) {
            return Some(Linear::induction(k, Extension::None));
        }
        let operand = |i| LLVMGetOperand(value, i);
        match ir::opcode(value) {
            LLVMOpcode::LLVMAdd => self.linear64(operand(0))?.plus(self.linear64(operand(1))?),
            LLVMOpcode::LLVMOr if LLVMGetIsDisjoint(value) != 0 => {
                self.linear64(operand(0))?.plus(self.linear64(operand(1))?)
            }
            LLVMOpcode::LLVMSub => {
                let negated = self.linear64(operand(1))?.times(-1)?;
                self.linear64(operand(0))?.plus(negated)
            }
            LLVMOpcode::LLVMMul => {
                let (x, factor) = match ir::constant_i64(operand(1)) {
                    Some(c) => (operand(0), c),
                    None => (operand(1), ir::constant_i64(operand(0))?),
                };
                self.linear64(x)?.times(factor)
            }
            LLVMOpcode::LLVMShl => {
                let shift = ir::constant_u64(operand(1)).filter(|&s| s < 63)?;
                self.linear64(operand(0))?.times(1 << shift)
            }
            LLVMOpcode::LLVMSExt => self.extended(operand(0), Extension::Sign, false),
            LLVMOpcode::LLVMZExt => {
                self.extended(operand(0), Extension::Zero, LLVMGetNNeg(value) != 0)
            }
            _ => None,
        }
    }

    /// `ext(value)` for a value narrower than 64 bits: a constant, an invariant, or an
    /// induction variable whose sequence provably does not wrap before the extension
    /// (`non_negative`: the extension is a `zext nneg`).
    unsafe fn extended(
        &self,
        value: LLVMValueRef,
        extension: Extension,
        non_negative: bool,
    ) -> Option<Linear> {
        if !LLVMIsAConstantInt(value).is_null() {
            let constant = match extension {
                Extension::Zero => i64::try_from(ir::constant_u64(value)?).ok()?,
                _ => ir::constant_i64(value)?,
            };
            return Some(Linear::constant(constant));
        }
        if is_loop_invariant(self.blocks, value) {
            return Some(Linear::invariant(value, extension));
        }
        let k = self.induction_index(value)?;
        let induction = &self.inductions[k];
        let exact = match extension {
            Extension::Sign => induction.nsw,
            Extension::Zero => {
                (induction.nuw && induction.step > 0) || (non_negative && induction.nsw)
            }
            Extension::None => true,
        };
        exact.then(|| Linear::induction(k, extension))
    }

    fn induction_index(&self, value: LLVMValueRef) -> Option<usize> {
        self.inductions.iter().position(|i| i.phi == value)
    }
}
