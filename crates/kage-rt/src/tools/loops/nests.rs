//! The loop nests the program's modules selected (`kage_abi::Nest`), as the runtime learns
//! them: a descriptor is first seen at one of the `__kage_loops_*` entry points (there is
//! no table to register ahead), validated, given a dense global id written back into its
//! `global_id`, and copied for the report. A descriptor that fails validation gets
//! [`REJECTED`] and every later event on it is ignored, without a word and without a retry.
//!
//! Each nest's levels get consecutive *level slots* (global across nests), the index of
//! their per-thread statistics; each nest gets a process-wide claim counter for sampling.
//! Both are read on the hot path without a lock, from [`Chunked`] records written before
//! the id is published.

use super::analysis::{AccessInfo, ScalarInfo};
use crate::chunked::Chunked;
use crate::registry::REGISTRY;
use crate::sync::{locks_held, SpinLock};
use kage_abi::loops::{ScalarKind, Selection};
use kage_abi::{LoopLevel, Nest, NONE, REJECTED};
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

/// More levels than any real nest has: a descriptor claiming more is corrupt.
pub const MAX_LEVELS: u32 = 1024;

/// Level slots in all: the per-thread statistics are `Chunked` records by level slot.
pub const MAX_LEVEL_SLOTS: usize = Chunked::<1>::CAPACITY;

/// Every selection kind the ABI defines, to read `kage_nest.selected_by`.
const SELECTIONS: [Selection; 3] = [Selection::Line, Selection::Pragma, Selection::Report];

/// What the report says about a nest, copied from its descriptor at registration (the
/// module holding the descriptor may be unloaded before the report is written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestInfo {
    pub function: String,
    pub file: String,
    pub selected_by: Selection,
    /// In pre-order, level 0 the outermost loop (validated: see [`validate`]).
    pub levels: Vec<LoopLevel>,
    /// Its memory instructions (interpolate and dependences builds), levels validated.
    pub accesses: Vec<AccessInfo>,
    pub scalars: Vec<ScalarInfo>,
}

// Lock-free record per nest id.
/// The nest's first level slot.
const LEVEL_BASE: usize = 0;
/// Entries that claimed a sample since the start or the last reset (may pass the limit
/// while threads race: see [`NestRegistry::claim_sample`]).
const SAMPLE_CLAIMS: usize = 1;
/// The descriptor's address: the runtime writes its `sampling_over` and reads its
/// `unsampled` counters.
const DESCRIPTOR: usize = 2;
/// `unsampled[0]` (the entries that skipped the runtime) at the last restart of sampling.
const ENTRIES_BASELINE: usize = 3;
const W: usize = 4;

/// The nests seen so far. The runtime has one ([`NESTS`]); tests make their own.
pub struct NestRegistry {
    /// Registered nests by id. Taken only with the runtime's `REGISTRY` lock held or from
    /// `Tool::finish` (under the thread list's lock), both of which the fork handlers hold
    /// across `fork()`, so no forked child inherits it held.
    nests: SpinLock<Nests>,
    /// By nest id: `[LEVEL_BASE, SAMPLE_CLAIMS, DESCRIPTOR, ENTRIES_BASELINE]`. Chunks are
    /// allocated under `nests`' lock.
    slots: Chunked<W>,
    /// By level slot: the level's `unsampled` iteration counter at the last restart of
    /// sampling.
    iteration_baselines: Chunked<1>,
}

struct Nests {
    info: Vec<NestInfo>,
    /// Level slots handed out so far.
    level_slots: usize,
}

/// The runtime's nests.
pub static NESTS: std::sync::LazyLock<NestRegistry> = std::sync::LazyLock::new(NestRegistry::new);

impl Default for NestRegistry {
    fn default() -> Self {
        Self::new()
    }
}

/// A nest's id and where its lock-free state is.
#[derive(Debug, Clone, Copy)]
pub struct Registered {
    pub id: u32,
    /// The first of its levels' slots.
    pub level_base: usize,
    /// Its `level_count` (validated: 1 to [`MAX_LEVELS`]).
    pub level_count: usize,
}

impl NestRegistry {
    pub fn new() -> Self {
        NestRegistry {
            nests: SpinLock::new(Nests {
                info: Vec::new(),
                level_slots: 0,
            }),
            slots: Chunked::new(),
            iteration_baselines: Chunked::new(),
        }
    }

    /// The nest behind a descriptor, registering it the first time; `None` for a null or
    /// rejected descriptor, or while it cannot be registered now (see [`Self::register`]).
    ///
    /// # Safety
    /// `nest` is null or points to a `kage_nest` whose `global_id` is writable and whose
    /// other fields stay as they are (docs/abi.md).
    #[inline(always)]
    pub unsafe fn look_up(&self, nest: *mut Nest) -> Option<Registered> {
        if nest.is_null() {
            return None;
        }
        let id = match id_cell(nest).load(Acquire) {
            REJECTED => return None,
            NONE => self.register(nest)?,
            id => id,
        };
        let record = self.slots.get(id as usize)?;
        Some(Registered {
            id,
            level_base: record[LEVEL_BASE].load(Relaxed) as usize,
            level_count: (*nest).level_count as usize,
        })
    }

    /// Validates and registers a descriptor seen for the first time. Takes the runtime's
    /// module registry lock, so that registration and `fork()` exclude each other; while
    /// the calling thread holds a runtime lock (a signal handler that interrupted the
    /// runtime), nothing is registered and the event is ignored.
    #[cold]
    #[inline(never)]
    unsafe fn register(&self, nest: *mut Nest) -> Option<u32> {
        if locks_held() > 0 {
            return None;
        }
        let _modules = REGISTRY.lock();
        let mut nests = self.nests.lock();
        let cell = id_cell(nest);
        match cell.load(Acquire) {
            NONE => {}
            REJECTED => return None,
            // Another thread registered it while this one waited.
            id => return Some(id),
        }
        let id = nests.info.len();
        let info = validate(nest)
            .ok()
            .filter(|info| nests.level_slots + info.levels.len() <= MAX_LEVEL_SLOTS)
            .filter(|_| id < REJECTED as usize);
        let Some(info) = info else {
            cell.store(REJECTED, Release);
            return None;
        };
        // Allocation failure leaves the nest unregistered: a later event tries again.
        let record = self.slots.get_or_alloc(id)?;
        for k in 0..info.levels.len() {
            self.iteration_baselines
                .get_or_alloc(nests.level_slots + k)?;
        }
        record[LEVEL_BASE].store(nests.level_slots as u64, Relaxed);
        record[SAMPLE_CLAIMS].store(0, Relaxed);
        record[DESCRIPTOR].store(nest as u64, Relaxed);
        // Counted from here on (a module loaded after a reset may have counted already).
        let counters = unsampled_counters(nest);
        record[ENTRIES_BASELINE].store(counters[0].load(Relaxed), Relaxed);
        for (k, counter) in counters[1..].iter().enumerate() {
            if let Some(baseline) = self.iteration_baselines.get(nests.level_slots + k) {
                baseline[0].store(counter.load(Relaxed), Relaxed);
            }
        }
        sampling_over(nest).store(0, Relaxed);
        nests.level_slots += info.levels.len();
        nests.info.push(info);
        // Published last: whoever reads the id finds the record written.
        cell.store(id as u32, Release);
        Some(id as u32)
    }

    /// Claims one of the first `limit` sampled entries of nest `id` (since the start or the
    /// last reset); false once they are taken. After that, one shared read per entry.
    #[inline(always)]
    pub fn claim_sample(&self, id: u32, limit: u64) -> bool {
        let Some(record) = self.slots.get(id as usize) else {
            return false;
        };
        let claims = &record[SAMPLE_CLAIMS];
        let mut taken = claims.load(Relaxed);
        while taken < limit {
            match claims.compare_exchange_weak(taken, taken + 1, Relaxed, Relaxed) {
                Ok(_) => return true,
                Err(now) => taken = now,
            }
        }
        false
    }

    /// Nest `id`'s sampled entries are all taken: its entries skip the runtime from now on
    /// and count themselves (`kage_nest.sampling_over`).
    pub fn end_sampling(&self, id: u32) {
        if let Some(record) = self.slots.get(id as usize) {
            let nest = record[DESCRIPTOR].load(Relaxed) as *mut Nest;
            if !nest.is_null() {
                // SAFETY: a registered descriptor (validated; docs/abi.md: writable).
                unsafe { sampling_over(nest) }.store(1, Relaxed);
            }
        }
    }

    /// Sampling starts again for every nest (`kage_reset`, a forked child): the claims, the
    /// descriptors' `sampling_over`, and the baselines of their own counters.
    pub fn restart_sampling(&self) {
        self.slots.for_each(|_, record| {
            record[SAMPLE_CLAIMS].store(0, Relaxed);
            let nest = record[DESCRIPTOR].load(Relaxed) as *mut Nest;
            if nest.is_null() {
                return;
            }
            // SAFETY: a registered descriptor (validated at registration).
            let counters = unsafe { unsampled_counters(nest) };
            record[ENTRIES_BASELINE].store(counters[0].load(Relaxed), Relaxed);
            let base = record[LEVEL_BASE].load(Relaxed) as usize;
            for (k, counter) in counters[1..].iter().enumerate() {
                if let Some(baseline) = self.iteration_baselines.get(base + k) {
                    baseline[0].store(counter.load(Relaxed), Relaxed);
                }
            }
            // SAFETY: as above.
            unsafe { sampling_over(nest) }.store(0, Relaxed);
        });
    }

    /// What nest `id`'s code counted itself since the last restart of sampling: its
    /// entries, then each level's iterations (`level_count` of them).
    pub fn unsampled(&self, id: u32, level_count: usize) -> Vec<u64> {
        let mut out = vec![0; 1 + level_count];
        let Some(record) = self.slots.get(id as usize) else {
            return out;
        };
        let nest = record[DESCRIPTOR].load(Relaxed) as *mut Nest;
        if nest.is_null() {
            return out;
        }
        // SAFETY: a registered descriptor (validated at registration).
        let counters = unsafe { unsampled_counters(nest) };
        out[0] = (counters[0].load(Relaxed)).wrapping_sub(record[ENTRIES_BASELINE].load(Relaxed));
        let base = record[LEVEL_BASE].load(Relaxed) as usize;
        for k in 0..level_count.min(counters.len() - 1) {
            let baseline =
                (self.iteration_baselines.get(base + k)).map_or(0, |b| b[0].load(Relaxed));
            out[1 + k] = counters[1 + k].load(Relaxed).wrapping_sub(baseline);
        }
        out
    }

    /// Every registered nest, by id, with its first level slot.
    pub fn snapshot(&self) -> Vec<(NestInfo, usize)> {
        let nests = self.nests.lock();
        let mut base = 0;
        (nests.info.iter())
            .map(|info| {
                let at = base;
                base += info.levels.len();
                (info.clone(), at)
            })
            .collect()
    }
}

/// The id of a registered descriptor, without registering it: what the calls after
/// `__kage_loops_enter` need (a nest entered is registered, or its entry was ignored).
///
/// # Safety
/// As for [`NestRegistry::look_up`].
#[inline(always)]
pub unsafe fn registered_id(nest: *mut Nest) -> Option<u32> {
    if nest.is_null() {
        return None;
    }
    let id = id_cell(nest).load(Acquire);
    (id < REJECTED).then_some(id)
}

/// The descriptor's `sampling_over` flag.
///
/// # Safety
/// `nest` points to a registered (validated) `kage_nest` in writable memory.
unsafe fn sampling_over(nest: *mut Nest) -> &'static AtomicU32 {
    AtomicU32::from_ptr(std::ptr::addr_of_mut!((*nest).sampling_over))
}

/// The descriptor's `unsampled` counters: entries, then each level's iterations.
///
/// # Safety
/// `nest` points to a validated `kage_nest` (non-null `unsampled` of `1 + level_count`
/// counters, 8-byte aligned, writable).
unsafe fn unsampled_counters(nest: *mut Nest) -> &'static [AtomicU64] {
    let n = 1 + (*nest).level_count as usize;
    std::slice::from_raw_parts((*nest).unsampled as *const AtomicU64, n)
}

fn id_cell(nest: *mut Nest) -> &'static AtomicU32 {
    // SAFETY: `global_id` is the first field, 4-byte aligned, in writable memory (abi.md).
    unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*nest).global_id)) }
}

unsafe fn c_string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Checks a descriptor and copies what the report needs: 1 to [`MAX_LEVELS`] levels, a
/// known `selected_by`, and levels in pre-order (level 0 without parent at depth 0; every
/// other level's parent is the level before it or one of that level's ancestors, one
/// deeper than it), which is what lets the entry points walk enclosing levels safely.
///
/// # Safety
/// `nest` points to a `kage_nest`; when its level count is in range, `levels` is null or
/// points to that many levels; `function` and `file` are null or NUL-terminated.
pub unsafe fn validate(nest: *const Nest) -> Result<NestInfo, String> {
    let n = &*nest;
    if n.level_count == 0 || n.level_count > MAX_LEVELS {
        return Err(format!(
            "{} levels (expected 1 to {MAX_LEVELS})",
            n.level_count
        ));
    }
    if n.levels.is_null() {
        return Err("no level array".into());
    }
    if n.unsampled.is_null() || !(n.unsampled as usize).is_multiple_of(8) {
        return Err("no counters of unsampled entries".into());
    }
    let selected_by = (SELECTIONS.iter())
        .find(|s| **s as u32 == n.selected_by)
        .copied()
        .ok_or_else(|| format!("unknown selection {}", n.selected_by))?;
    let levels = std::slice::from_raw_parts(n.levels, n.level_count as usize).to_vec();
    check_pre_order(&levels)?;
    let name = |p: *const c_char| (!p.is_null()).then(|| c_string(p));
    if n.access_count > 0 && n.accesses.is_null() || n.scalar_count > 0 && n.scalars.is_null() {
        return Err("no access or scalar array".into());
    }
    let accesses: Vec<AccessInfo> = if n.access_count == 0 {
        Vec::new()
    } else {
        (std::slice::from_raw_parts(n.accesses, n.access_count as usize).iter())
            .map(|a| AccessInfo {
                level: a.level,
                writes: a.writes != 0,
                size: a.size,
                line: a.line,
                column: a.column,
                name: name(a.name),
            })
            .collect()
    };
    if accesses.iter().any(|a| a.level >= n.level_count) {
        return Err("an access names no level of the nest".into());
    }
    let mut scalars = Vec::new();
    if n.scalar_count > 0 {
        for s in std::slice::from_raw_parts(n.scalars, n.scalar_count as usize) {
            let kind = ScalarKind::from_u32(s.kind)
                .ok_or_else(|| format!("unknown scalar kind {}", s.kind))?;
            if s.level >= n.level_count {
                return Err("a scalar names no level of the nest".into());
            }
            scalars.push(ScalarInfo {
                level: s.level,
                kind,
                line: s.line,
                operator: s.operator,
                step: s.step,
                name: name(s.name),
            });
        }
    }
    Ok(NestInfo {
        function: c_string(n.function),
        file: c_string(n.file),
        selected_by,
        levels,
        accesses,
        scalars,
    })
}

/// See [`validate`].
fn check_pre_order(levels: &[LoopLevel]) -> Result<(), String> {
    for (k, level) in levels.iter().enumerate() {
        if k == 0 {
            if level.parent != NONE || level.depth != 0 {
                return Err("level 0 has a parent or a depth".into());
            }
            continue;
        }
        // The levels a pre-order may go back to: the previous level and its ancestors.
        let mut open = Some(k - 1);
        while let Some(at) = open.filter(|&at| at != level.parent as usize) {
            open = (levels[at].parent != NONE).then_some(levels[at].parent as usize);
        }
        let Some(parent) = open else {
            return Err(format!("level {k}'s parent is not an open level"));
        };
        if level.depth != levels[parent].depth + 1 {
            return Err(format!("level {k}'s depth is not its parent's + 1"));
        }
    }
    Ok(())
}
