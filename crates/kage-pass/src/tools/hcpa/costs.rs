//! The cost of each instruction (docs/hcpa.md, "Costs"): `kage_abi::hcpa::COSTS` with the
//! build's overrides from `KAGE_HCPA_COSTS`.

use kage_abi::hcpa::{self, CostClass, COSTS};
use llvm_sys::core::*;
use llvm_sys::prelude::LLVMValueRef;
use llvm_sys::LLVMOpcode::{self, *};

use super::super::Settings;
use crate::ir;

/// The cost of each class, in `COSTS` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Costs([u32; COSTS.len()]);

impl Default for Costs {
    fn default() -> Self {
        Costs(COSTS.map(|c| c.default))
    }
}

impl Costs {
    /// The defaults with `KAGE_HCPA_COSTS` (`load=4,div=20`) applied; a malformed item is a
    /// warning and keeps its default.
    pub fn from_settings(settings: &mut Settings) -> Self {
        let mut costs = Costs::default();
        let Some(spec) = settings.get(hcpa::COSTS_VARIABLE) else {
            return costs;
        };
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let parsed = item.split_once('=').and_then(|(name, value)| {
                let k = COSTS.iter().position(|c| c.name == name.trim())?;
                Some((k, value.trim().parse::<u32>().ok()?))
            });
            match parsed {
                Some((k, value)) => costs.0[k] = value,
                None => settings.warn(format!(
                    "kage-pass: ignoring '{item}' in {}: expected class=cost with a class among {}",
                    hcpa::COSTS_VARIABLE,
                    COSTS.map(|c| c.name).join(", ")
                )),
            }
        }
        costs
    }

    pub fn of(&self, class: CostClass) -> u32 {
        let k = COSTS.iter().position(|c| *c == class).unwrap_or(0);
        self.0[k]
    }

    /// The cost of a value-computing instruction that is neither a memory access nor a
    /// call into other code: its class by opcode (and by name for intrinsics).
    ///
    /// # Safety
    /// `inst` must be a valid instruction.
    pub unsafe fn of_instruction(&self, inst: LLVMValueRef) -> u32 {
        self.class_of(inst).map_or(0, |c| self.of(c))
    }

    unsafe fn class_of(&self, inst: LLVMValueRef) -> Option<CostClass> {
        Some(match ir::opcode(inst) {
            LLVMAdd | LLVMSub | LLVMAnd | LLVMOr | LLVMXor | LLVMShl | LLVMLShr | LLVMAShr
            | LLVMICmp | LLVMSelect | LLVMExtractElement | LLVMInsertElement
            | LLVMShuffleVector => hcpa::SIMPLE,
            LLVMMul => hcpa::MUL,
            LLVMUDiv | LLVMSDiv | LLVMURem | LLVMSRem => hcpa::DIV,
            LLVMFAdd | LLVMFSub | LLVMFCmp | LLVMFNeg | LLVMFPToUI | LLVMFPToSI | LLVMUIToFP
            | LLVMSIToFP | LLVMFPTrunc | LLVMFPExt => hcpa::FADD,
            LLVMFMul => hcpa::FMUL,
            LLVMFDiv | LLVMFRem => hcpa::FDIV,
            LLVMCall => return intrinsic_class(inst),
            _ => return None,
        })
    }
}

/// The class of an intrinsic's computation (`None`: free, or not an intrinsic).
unsafe fn intrinsic_class(call: LLVMValueRef) -> Option<CostClass> {
    let name = intrinsic_name(call)?;
    let name = name.strip_prefix("llvm.")?;
    let base = name.split('.').next().unwrap_or("");
    Some(match base {
        "fmuladd" | "fma" => hcpa::FMUL,
        "sqrt" | "pow" | "exp" | "exp2" | "log" | "log2" | "log10" | "sin" | "cos" => hcpa::FDIV,
        "fabs" | "copysign" | "floor" | "ceil" | "trunc" | "rint" | "nearbyint" | "round"
        | "roundeven" | "minnum" | "maxnum" | "minimum" | "maximum" | "lrint" | "llrint"
        | "lround" | "llround" => hcpa::FADD,
        "smul" | "umul" => hcpa::MUL,
        "smax" | "smin" | "umax" | "umin" | "abs" | "ctpop" | "ctlz" | "cttz" | "bswap"
        | "bitreverse" | "fshl" | "fshr" | "sadd" | "uadd" | "ssub" | "usub" | "scmp" | "ucmp" => {
            hcpa::SIMPLE
        }
        "vector" => {
            if name.contains("fadd") || name.contains("fmax") || name.contains("fmin") {
                hcpa::FADD
            } else if name.contains("fmul") {
                hcpa::FMUL
            } else if name.contains(".mul") {
                hcpa::MUL
            } else {
                hcpa::SIMPLE
            }
        }
        _ => return None,
    })
}

/// The name of the intrinsic `call` calls, if it calls one.
///
/// # Safety
/// `call` must be a valid call site.
pub unsafe fn intrinsic_name(call: LLVMValueRef) -> Option<String> {
    let callee = ir::direct_callee(call)?;
    (LLVMGetIntrinsicID(callee) != 0).then(|| ir::value_name(callee))
}

/// Whether an opcode computes a value the analysis folds (rather than a memory access, a
/// call, a phi or control flow).
pub fn is_computation(op: LLVMOpcode) -> bool {
    !matches!(
        op,
        LLVMLoad
            | LLVMStore
            | LLVMAtomicRMW
            | LLVMAtomicCmpXchg
            | LLVMFence
            | LLVMCall
            | LLVMInvoke
            | LLVMCallBr
            | LLVMPHI
            | LLVMRet
            | LLVMBr
            | LLVMSwitch
            | LLVMIndirectBr
            | LLVMUnreachable
            | LLVMResume
            | LLVMLandingPad
            | LLVMVAArg
            | LLVMCatchPad
            | LLVMCleanupPad
            | LLVMCatchSwitch
            | LLVMCatchRet
            | LLVMCleanupRet
            | LLVMAlloca
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(vars: &[(&str, &str)]) -> (Costs, Vec<String>) {
        let read = |name: &str| {
            (vars.iter())
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        let mut settings = Settings::new(&read);
        let costs = Costs::from_settings(&mut settings);
        (costs, settings.warnings().to_vec())
    }

    #[test]
    fn defaults_and_overrides() {
        let (costs, warnings) = with(&[]);
        assert!(warnings.is_empty());
        assert_eq!(costs.of(hcpa::LOAD), 4);
        assert_eq!(costs.of(hcpa::SIMPLE), 1);
        let (costs, warnings) = with(&[("KAGE_HCPA_COSTS", "load=7, div=3,bogus=1,store=x")]);
        assert_eq!((costs.of(hcpa::LOAD), costs.of(hcpa::DIV)), (7, 3));
        assert_eq!(costs.of(hcpa::STORE), 1);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
    }
}
