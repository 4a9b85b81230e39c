//! Affine functions of loop iterators, the mathematics of the `interpolate` and
//! `dependences` analyses (VMAD §5.1–5.2, issue 18), kept apart from the runtime so that it
//! can be tested exhaustively: no unsafe code, no allocation-free constraints, no LLVM.
//!
//! - [`fit`]: fits `address = base + Σ stride_k × vi_k` to the addresses a memory
//!   instruction touched in sampled iterations, online, and says when they do not fit.
//! - [`dependence`]: whether two affine references can touch a common byte in iterations
//!   that differ first at a given loop level (a dependence that level carries).

pub mod dependence;
pub mod fit;

/// `constant + Σ coefficients[k] × v[k]`, over the iterators of a chain of loops (outermost
/// first).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Affine {
    pub constant: i64,
    pub coefficients: Vec<i64>,
}

impl Affine {
    /// Its value at `v` (missing iterators count as 0), in 128 bits: no overflow for the
    /// values a 64-bit address space and iteration counts can produce.
    pub fn at(&self, v: &[i64]) -> i128 {
        self.constant as i128
            + (self.coefficients.iter().zip(v))
                .map(|(&c, &x)| c as i128 * x as i128)
                .sum::<i128>()
    }
}
