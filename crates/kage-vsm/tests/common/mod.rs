//! Test support: the naive model of the observable semantics, op programs and a driver that
//! runs a program on every implementation and the model in lockstep.
#![allow(dead_code)]

use std::collections::HashMap;
use std::ops::Range;

use kage_vsm::{AnyVsm, Config, Granularity, Stats, Tag, VectorShadow, VersionStack, VsmKind};

/// The specification: a map from (shadowed address, region instance version) to tag.
pub struct Model<T> {
    shift: u32,
    versions: VersionStack,
    tags: HashMap<(u64, u64), T>,
}

impl<T: Tag> Model<T> {
    pub fn new(granularity: Granularity) -> Self {
        Self {
            shift: granularity.shift(),
            versions: VersionStack::new(),
            tags: HashMap::new(),
        }
    }
}

impl<T: Tag> VectorShadow<T> for Model<T> {
    fn enter(&mut self) {
        self.versions.enter();
    }
    fn exit(&mut self) {
        self.versions.exit();
    }
    fn depth(&self) -> usize {
        self.versions.depth()
    }
    fn versions(&self) -> &VersionStack {
        &self.versions
    }
    fn read(&mut self, addr: u64, out: &mut Vec<T>) {
        let unit = addr >> self.shift;
        out.clear();
        out.extend(
            self.versions
                .as_slice()
                .iter()
                .map(|&v| self.tags.get(&(unit, v)).copied().unwrap_or_default()),
        );
    }
    fn write_with(
        &mut self,
        addr: u64,
        levels: Range<usize>,
        tag: T,
        on_set: &mut impl FnMut(usize),
    ) {
        let unit = addr >> self.shift;
        for level in levels {
            let key = (unit, self.versions.as_slice()[level]);
            let old = self.tags.get(&key).copied().unwrap_or_default();
            if old == T::default() && tag != T::default() {
                on_set(level);
            }
            self.tags.insert(key, tag);
        }
    }
    fn update(&mut self, addr: u64, f: impl FnOnce(&mut [T])) {
        let mut vector = Vec::new();
        self.read(addr, &mut vector);
        f(&mut vector);
        let unit = addr >> self.shift;
        for (&version, tag) in self.versions.as_slice().iter().zip(vector) {
            self.tags.insert((unit, version), tag);
        }
    }
    fn heap_bytes(&self) -> usize {
        0
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
}

/// Tags the tests can make from numbers.
pub trait TestTag: Tag {
    fn from_u64(x: u64) -> Self;
    /// A deterministic change for `update`.
    fn bump(self, level: usize, by: u64) -> Self;
}

impl TestTag for u64 {
    fn from_u64(x: u64) -> Self {
        x
    }
    fn bump(self, level: usize, by: u64) -> Self {
        self.wrapping_mul(3).wrapping_add(by + level as u64)
    }
}

impl TestTag for u8 {
    fn from_u64(x: u64) -> Self {
        x as u8
    }
    fn bump(self, level: usize, by: u64) -> Self {
        self.wrapping_add((by as u8).wrapping_add(level as u8))
    }
}

impl TestTag for bool {
    fn from_u64(x: u64) -> Self {
        x & 1 == 1
    }
    fn bump(self, level: usize, by: u64) -> Self {
        self ^ (by + level as u64).is_multiple_of(3)
    }
}

/// Bases of the address regions programs touch: low memory, a typical heap, a stack, the
/// very top of the 64-bit space, and a far mapping.
pub const BASES: [u64; 5] = [
    0,
    0x5555_0000_0000,
    0x7fff_ffff_0000,
    u64::MAX - 0xffff,
    1 << 44,
];

/// A program step. Level ranges and counts are relative, resolved against the state.
#[derive(Clone, Debug)]
pub enum Op {
    /// Enters `n` regions (up to the program's depth limit).
    Enter(u8),
    /// Exits up to `n` regions.
    Exit(u8),
    /// `n` times: exit the innermost region and enter again (a fresh instance).
    Cycle(u8),
    /// Writes `count` addresses from `at`, `stride` bytes apart, at the levels `levels`
    /// (fractions of the depth, in 256ths), with the tag `tag`; `hook`: through `write_with`.
    Write {
        at: (u8, u64),
        count: u8,
        stride: u64,
        levels: (u8, u8),
        tag: u64,
        hook: bool,
    },
    /// Reads `count` addresses.
    Read {
        at: (u8, u64),
        count: u8,
        stride: u64,
    },
    /// Read-modify-writes `count` addresses.
    Update {
        at: (u8, u64),
        count: u8,
        stride: u64,
        by: u64,
    },
    /// Writes `count` addresses a different tag per level (`tag + level`) with
    /// `write_levels`, at the levels from 0 to `levels` (256ths of the depth + 1; 255: all).
    WriteLevels {
        at: (u8, u64),
        count: u8,
        stride: u64,
        levels: u8,
        tag: u64,
    },
    /// Reads back (up to 512 of) the addresses touched so far.
    Sweep,
}

pub fn address(at: (u8, u64), i: u64, stride: u64) -> u64 {
    BASES[at.0 as usize % BASES.len()]
        .wrapping_add(at.1)
        .wrapping_add(i.wrapping_mul(stride))
}

/// `levels` (256ths of depth + 1) as a range within `0..depth`.
pub fn resolve_levels(levels: (u8, u8), depth: usize) -> Range<usize> {
    let a = levels.0 as usize * (depth + 1) / 256;
    let b = levels.1 as usize * (depth + 1) / 256;
    if levels.0 == 255 {
        return 0..depth; // "all levels", HCPA's store
    }
    a.min(b)..a.max(b)
}

/// The number of levels a `WriteLevels` writes at `depth`: 255 is all of them.
pub fn resolve_level_count(levels: u8, depth: usize) -> usize {
    if levels == 255 {
        depth
    } else {
        levels as usize * (depth + 1) / 256
    }
}

/// What an operation made visible.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen<T> {
    Read(u64, Vec<T>),
    Set(u64, usize),
    Before(u64, Vec<T>),
}

/// Runs one op on `vsm`, appending what it shows to `seen`; `touched` collects addresses.
pub fn apply<T: TestTag, V: VectorShadow<T>>(
    vsm: &mut V,
    op: &Op,
    max_depth: usize,
    touched: &mut Vec<u64>,
    seen: &mut Vec<Seen<T>>,
) {
    match *op {
        Op::Enter(n) => {
            for _ in 0..n {
                if vsm.depth() < max_depth {
                    vsm.enter();
                }
            }
        }
        Op::Exit(n) => {
            for _ in 0..n {
                if vsm.depth() > 0 {
                    vsm.exit();
                }
            }
        }
        Op::Cycle(n) => {
            for _ in 0..n {
                if vsm.depth() > 0 {
                    vsm.exit();
                    vsm.enter();
                }
            }
        }
        Op::Write {
            at,
            count,
            stride,
            levels,
            tag,
            hook,
        } => {
            let levels = resolve_levels(levels, vsm.depth());
            for i in 0..count as u64 {
                let addr = address(at, i, stride);
                touched.push(addr);
                if hook {
                    vsm.write_with(addr, levels.clone(), T::from_u64(tag), &mut |level| {
                        seen.push(Seen::Set(addr, level))
                    });
                } else {
                    vsm.write(addr, levels.clone(), T::from_u64(tag));
                }
            }
        }
        Op::Read { at, count, stride } => {
            for i in 0..count as u64 {
                let addr = address(at, i, stride);
                let mut out = vec![T::from_u64(99); 3];
                vsm.read(addr, &mut out);
                seen.push(Seen::Read(addr, out));
            }
        }
        Op::Update {
            at,
            count,
            stride,
            by,
        } => {
            for i in 0..count as u64 {
                let addr = address(at, i, stride);
                touched.push(addr);
                vsm.update(addr, |tags| {
                    seen.push(Seen::Before(addr, tags.to_vec()));
                    for (level, tag) in tags.iter_mut().enumerate() {
                        *tag = tag.bump(level, by);
                    }
                });
            }
        }
        Op::WriteLevels {
            at,
            count,
            stride,
            levels,
            tag,
        } => {
            let n = resolve_level_count(levels, vsm.depth());
            let tags: Vec<T> = (0..n as u64)
                .map(|level| T::from_u64(tag.wrapping_add(level)))
                .collect();
            for i in 0..count as u64 {
                let addr = address(at, i, stride);
                touched.push(addr);
                vsm.write_levels(addr, &tags);
            }
        }
        Op::Sweep => {
            let from = touched.len().saturating_sub(512);
            for &addr in &touched[from..] {
                let mut out = Vec::new();
                vsm.read(addr, &mut out);
                seen.push(Seen::Read(addr, out));
            }
        }
    }
}

/// Runs `program` on the model and every kind in lockstep; panics at the first difference.
pub fn check_program<T: TestTag>(config: &Config, program: &[Op], max_depth: usize) {
    let mut model = Model::<T>::new(config.granularity);
    let mut vsms: Vec<AnyVsm<T>> = VsmKind::ALL
        .iter()
        .map(|&kind| AnyVsm::new(kind, config))
        .collect();
    let mut touched = Vec::new();
    let mut expected = Vec::new();
    let mut got = Vec::new();
    for (step, op) in program.iter().enumerate() {
        let before = touched.len();
        expected.clear();
        apply(&mut model, op, max_depth, &mut touched, &mut expected);
        for vsm in &mut vsms {
            touched.truncate(before);
            got.clear();
            apply(vsm, op, max_depth, &mut touched, &mut got);
            if got != expected {
                let at = got
                    .iter()
                    .zip(&expected)
                    .position(|(a, b)| a != b)
                    .unwrap_or(got.len().min(expected.len()));
                panic!(
                    "{} differs from the model at op {step} ({op:?}), depth {}, observation {at}:\n  got      {:?}\n  expected {:?}\nconfig {config:?}",
                    vsm.kind(),
                    model.depth(),
                    got.get(at),
                    expected.get(at),
                );
            }
            assert_eq!(vsm.depth(), model.depth());
        }
    }
    // Finally every touched address, at the final depth and after unwinding to depth 1.
    let mut touched_all = touched.clone();
    touched_all.sort_unstable();
    touched_all.dedup();
    for unwind in [false, true] {
        if unwind {
            while model.depth() > 1 {
                model.exit();
                vsms.iter_mut().for_each(|vsm| vsm.exit());
            }
        }
        for &addr in &touched_all {
            let mut expected = Vec::new();
            model.read(addr, &mut expected);
            for vsm in &mut vsms {
                let mut out = Vec::new();
                vsm.read(addr, &mut out);
                assert_eq!(out, expected, "{} final read of {addr:#x}", vsm.kind());
            }
        }
    }
}

/// Tiny structures over tag tables that LZ4 can halve (64 words): a two-line VCache and a
/// clock list that adapts from 1 level table, so that compression works all the time.
pub fn compressible_config() -> Config {
    Config {
        granularity: Granularity::Word,
        table_bits: 6,
        segment_bits: 2,
        vcache_lines: 2,
        vcache_bytes: 0,
        victim_tables: 1,
        free_tables: 2,
    }
}

/// A xorshift64* generator, so long runs need no dependency and repeat exactly.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random program of `len` ops: deep dives and climbs, re-entries, dense, strided and
/// random accesses over a few regions of the 64-bit space.
pub fn random_program(rng: &mut Rng, len: usize, span: u64) -> Vec<Op> {
    let at = |rng: &mut Rng| ((rng.below(5)) as u8, rng.below(span));
    let count = |rng: &mut Rng| {
        let most = if rng.below(8) == 0 { 40 } else { 3 };
        1 + rng.below(most) as u8
    };
    (0..len)
        .map(|_| match rng.below(20) {
            19 if rng.below(8) != 0 => Op::Read {
                at: at(rng),
                count: 1,
                stride: 8,
            },
            0..=2 => Op::Enter(count(rng)),
            3..=4 => Op::Exit(count(rng)),
            5 => Op::Cycle(1 + rng.below(4) as u8),
            6..=11 => {
                let levels = if rng.below(3) == 0 {
                    (255, 255)
                } else {
                    (rng.below(256) as u8, rng.below(256) as u8)
                };
                let tag = match rng.below(4) {
                    0 => 0,
                    1 => rng.below(4),
                    _ => rng.next(),
                };
                Op::Write {
                    at: at(rng),
                    count: 1 + rng.below(16) as u8,
                    stride: [1, 8, 24, 64, 4096][rng.below(5) as usize],
                    levels,
                    tag,
                    hook: rng.below(2) == 0,
                }
            }
            12..=15 => Op::Read {
                at: at(rng),
                count: 1 + rng.below(8) as u8,
                stride: [1, 8, 64][rng.below(3) as usize],
            },
            16..=18 => Op::Update {
                at: at(rng),
                count: 1 + rng.below(4) as u8,
                stride: 8,
                by: rng.below(1000),
            },
            _ => Op::Sweep,
        })
        .collect()
}
