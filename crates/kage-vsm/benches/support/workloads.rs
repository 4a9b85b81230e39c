//! Synthetic access patterns, shared by the criterion bench (`benches/vsm.rs`) and the
//! table example (`examples/vsm_table.rs`, which includes this file by path).
//!
//! Addresses are 8-byte words from a heap-like base; every pattern makes `4 × words`
//! accesses. Stores write every active level (HCPA's store, or the footprint profiler's
//! mark through the first-touch hook for `bool` tags), reads read the whole vector.
#![allow(dead_code)]

use kage_vsm::{Tag, VectorShadow};

const BASE: u64 = 0x5555_5555_0000;

/// How a benchmark tag is stored.
pub trait BenchTag: Tag {
    /// Whether stores go through `write_with` (first-touch counting) instead of `write`.
    const HOOK: bool;
    /// The tag stored at logical time `time` and level `level`.
    fn stamp(time: u64, level: usize) -> Self;
}

impl BenchTag for u64 {
    const HOOK: bool = false;
    fn stamp(time: u64, _level: usize) -> Self {
        time
    }
}

impl BenchTag for bool {
    const HOOK: bool = true;
    fn stamp(_time: u64, _level: usize) -> Self {
        true
    }
}

/// xorshift64*.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }
    #[inline]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// A loop nest at depth 8 (6 enclosing functions, an outer loop, its body): four sweeps
    /// over the array, one outer iteration each, a body instance per 1024 words; every
    /// access stores all levels.
    Stream,
    /// Depth 8; uniformly random words of the array, half loads, half stores of all levels;
    /// the innermost region is exited and re-entered every 64 accesses.
    Random,
    /// Recursion between depth 1 and 64: the depth zig-zags between a random target in
    /// 32..=64 and one in 1..=16, one level per step, with a run of 16 stores of all levels
    /// at every step, from a random word of the array's first eighth (3 runs in 4: hot
    /// data) or of the whole array.
    Deep,
}

impl Pattern {
    pub const ALL: [Pattern; 3] = [Pattern::Stream, Pattern::Random, Pattern::Deep];

    pub fn name(self) -> &'static str {
        match self {
            Pattern::Stream => "stream",
            Pattern::Random => "random",
            Pattern::Deep => "deep",
        }
    }

    /// Runs the pattern over an array of `words` words (a multiple of 1024); calls `probe`
    /// every 4096 accesses and at the end. Returns the number of accesses.
    pub fn run<T: BenchTag, V: VectorShadow<T>>(
        self,
        vsm: &mut V,
        words: u64,
        probe: &mut impl FnMut(&V),
    ) -> u64 {
        let mut time = 0u64;
        let mut out = Vec::with_capacity(80);
        let mut first_touches = 0u64;
        let mut store = |vsm: &mut V, word: u64, time: u64| {
            let depth = vsm.depth();
            if T::HOOK {
                vsm.write_with(BASE + word * 8, 0..depth, T::stamp(time, 0), &mut |_| {
                    first_touches += 1
                });
            } else {
                vsm.write(BASE + word * 8, 0..depth, T::stamp(time, 0));
            }
        };
        let accesses = 4 * words;
        match self {
            Pattern::Stream => {
                (0..6).for_each(|_| vsm.enter());
                for _sweep in 0..4 {
                    vsm.enter();
                    for chunk in (0..words).step_by(1024) {
                        vsm.enter();
                        for word in chunk..chunk + 1024 {
                            time += 1;
                            store(vsm, word, time);
                            if time.is_multiple_of(4096) {
                                probe(vsm);
                            }
                        }
                        vsm.exit();
                    }
                    vsm.exit();
                }
            }
            Pattern::Random => {
                let mut rng = Rng::new(0x5eed_0001);
                (0..8).for_each(|_| vsm.enter());
                while time < accesses {
                    time += 1;
                    if time.is_multiple_of(64) {
                        vsm.exit();
                        vsm.enter();
                    }
                    let r = rng.next();
                    let word = ((r >> 32) * words) >> 32;
                    if r & 1 == 0 {
                        vsm.read(BASE + word * 8, &mut out);
                    } else {
                        store(vsm, word, time);
                    }
                    if time.is_multiple_of(4096) {
                        probe(vsm);
                    }
                }
            }
            Pattern::Deep => {
                let mut rng = Rng::new(0x5eed_0002);
                vsm.enter();
                let mut target = 32 + rng.below(33) as usize;
                while time < accesses {
                    if vsm.depth() < target {
                        vsm.enter();
                        if vsm.depth() == target {
                            target = 1 + rng.below(16) as usize;
                        }
                    } else {
                        vsm.exit();
                        if vsm.depth() == target {
                            target = 32 + rng.below(33) as usize;
                        }
                    }
                    // Hot and cold data: 3 runs in 4 start in the first eighth of the array.
                    let range = if rng.below(4) == 0 { words } else { words / 8 };
                    let start = rng.below(range - 16);
                    for word in start..start + 16 {
                        time += 1;
                        store(vsm, word, time);
                        if time.is_multiple_of(4096) {
                            probe(vsm);
                        }
                    }
                }
            }
        }
        while vsm.depth() > 0 {
            vsm.exit();
        }
        probe(vsm);
        std::hint::black_box((first_touches, out));
        time
    }
}
