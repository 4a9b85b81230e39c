//! The 8-lane paths: with at most 8 analysed levels (small kernels; real programs run at 9
//! to 40), a time is one AVX-512 register of 8 `u64` lanes, or two AVX2 registers of 4
//! (lane ℓ: level ℓ; lanes from the number of levels on are ignored), and every per-level
//! loop of the timestamp calls is one instruction or two: a slot's valid prefix is its
//! whole first chunk, loaded and masked (levels after the prefix read 0), a granule's is
//! its VCache line's first 8 words, loaded whole and masked, a maximum is `vpmaxuq` (with
//! AVX2, a signed comparison of the values with their sign bits flipped, and a blend). With
//! up to 48 levels a time is up to six such vectors, still in registers (`ts::<N>`: `N`
//! vectors; one more level past a multiple of 8 costs one more vector per operation, not a
//! trip through memory); with more, the same 8 at a time through memory (`*_wide`). The
//! times are exactly the scalar path's (`tests.rs` runs the model comparison on every path
//! the processor has, at every number of vectors).
//!
//! Slots and VCache lines are stored and loaded whole (a slot's `pitch` is whole chunks; a
//! line of fewer than 8 tags is the exception), because a processor forwards a store only
//! to a load of the same bytes, and a masked load to none (measured on AMD Zen 5; on an
//! AVX2 EPYC, gemm's loads spent a third of their time waiting): a time written by one call
//! and read by the next would otherwise wait for the store to reach the cache. A whole
//! store also writes the slot's times past the levels it was written at, which are never
//! read: a slot written at `width` levels with the version `v` of level `width − 1` is
//! valid at `width` levels at most, since a level open later at an index of `width` or more
//! was entered after `v`'s instance (it is not one of `v`'s ancestors), so its version is
//! greater.
//!
//! One body serves both (`lane_path!`): the primitives of [`avx512`] and [`avx2`] have the
//! same names and meaning, and each path's functions are compiled for its feature.

#![cfg(target_arch = "x86_64")]

use super::{frame_slots, offset_floor, valid_levels, Engine, Frame};
use kage_abi::{Candidate, NONE};
use kage_vsm::AnyVsm;

pub mod avx512 {
    use std::arch::x86_64::*;

    pub const LANES: usize = 8;
    /// A time: 8 levels.
    pub type V = __m512i;

    /// The processor (and the system) run AVX-512F.
    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
    }

    // The helpers are inlined into the `#[target_feature(enable = "avx512f")]` functions
    // that use them (`lane_path!`'s), where the intrinsics inline in turn.

    /// The first `n` (≤ 8) lanes.
    #[inline(always)]
    fn mask(n: usize) -> __mmask8 {
        debug_assert!(n <= LANES);
        ((1u32 << n) - 1) as __mmask8
    }

    /// The first `min(n, 8)` times from `p`, the other lanes 0.
    ///
    /// A masked load is not forwarded the older stores to its 64 bytes, masked lanes
    /// included (measured: AMD Zen 5), so it waits for them to reach the cache: with no lane
    /// to load (a granule never stored to), none is made.
    ///
    /// # Safety
    /// AVX-512F; `p` points to `min(n, 8)` readable `u64`s.
    #[inline(always)]
    pub unsafe fn load(p: *const u64, n: usize) -> __m512i {
        let n = n.min(LANES);
        if n == 0 {
            _mm512_setzero_si512()
        } else {
            _mm512_maskz_loadu_epi64(mask(n), p as *const i64)
        }
    }

    /// The first `min(n, 8)` of the 8 words at `p`, the other lanes 0: a whole load, which
    /// an older whole store to the same 8 words forwards to (where a masked load would wait
    /// for it to reach the cache), then masked.
    ///
    /// # Safety
    /// AVX-512F; `p` points to 8 readable `u64`s.
    #[inline(always)]
    pub unsafe fn load_chunk_prefix(p: *const u64, n: usize) -> __m512i {
        _mm512_maskz_mov_epi64(mask(n.min(LANES)), _mm512_loadu_si512(p as *const __m512i))
    }

    /// `v` to the 8 words at `p`.
    ///
    /// # Safety
    /// AVX-512F; `p` points to 8 writable `u64`s.
    #[inline(always)]
    pub unsafe fn store_whole(p: *mut u64, v: __m512i) {
        _mm512_storeu_si512(p as *mut __m512i, v)
    }

    /// The first `min(n, 8)` lanes of `v` to `p`.
    ///
    /// # Safety
    /// AVX-512F; `p` points to `min(n, 8)` writable `u64`s.
    #[inline(always)]
    pub unsafe fn store(p: *mut u64, n: usize, v: __m512i) {
        _mm512_mask_storeu_epi64(p as *mut i64, mask(n.min(LANES)), v)
    }

    /// The 8 words at `p`, a chunk of a `Words`.
    ///
    /// # Safety
    /// AVX-512F; `p` is 64-byte aligned, 8 readable `u64`s.
    #[inline(always)]
    pub unsafe fn load_chunk(p: *const u64) -> __m512i {
        _mm512_load_si512(p as *const __m512i)
    }

    /// `v` to the 8 words at `p`, a chunk of a `Words`.
    ///
    /// # Safety
    /// AVX-512F; `p` is 64-byte aligned, 8 writable `u64`s.
    #[inline(always)]
    pub unsafe fn store_chunk(p: *mut u64, v: __m512i) {
        _mm512_store_si512(p as *mut __m512i, v)
    }

    /// `v + x` in every lane, saturating as `u64::saturating_add`.
    ///
    /// # Safety
    /// AVX-512F.
    #[inline(always)]
    pub unsafe fn saturating_add(v: __m512i, x: u64) -> __m512i {
        let sum = _mm512_add_epi64(v, _mm512_set1_epi64(x as i64));
        let overflow = _mm512_cmplt_epu64_mask(sum, v);
        _mm512_mask_mov_epi64(sum, overflow, _mm512_set1_epi64(-1))
    }

    ///
    /// # Safety
    /// AVX-512F.
    #[inline(always)]
    pub unsafe fn max(a: __m512i, b: __m512i) -> __m512i {
        _mm512_max_epu64(a, b)
    }

    ///
    /// # Safety
    /// AVX-512F.
    #[inline(always)]
    pub unsafe fn splat(x: u64) -> __m512i {
        _mm512_set1_epi64(x as i64)
    }
}

pub mod avx2 {
    use std::arch::x86_64::*;

    pub const LANES: usize = 8;
    /// A time: 8 levels, two registers of 4.
    pub type V = [__m256i; 2];

    /// The processor (and the system) run AVX2.
    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx2")
    }

    // As in `avx512`, inlined into the `#[target_feature(enable = "avx2")]` functions.

    /// Every lane's sign bit: unsigned comparisons are signed ones of `x ^ SIGN`.
    #[inline(always)]
    unsafe fn sign() -> __m256i {
        _mm256_set1_epi64x(i64::MIN)
    }

    /// The first `n` (≤ 8) lanes all ones, the others 0.
    #[inline(always)]
    unsafe fn mask(n: usize) -> V {
        let n = _mm256_set1_epi64x(n as i64);
        [
            _mm256_cmpgt_epi64(n, _mm256_setr_epi64x(0, 1, 2, 3)),
            _mm256_cmpgt_epi64(n, _mm256_setr_epi64x(4, 5, 6, 7)),
        ]
    }

    /// The first `min(n, 8)` times from `p`, the other lanes 0 (no load at all for none:
    /// see `avx512::load`).
    ///
    /// # Safety
    /// AVX2; `p` points to `min(n, 8)` readable `u64`s.
    #[inline(always)]
    pub unsafe fn load(p: *const u64, n: usize) -> V {
        let n = n.min(LANES);
        let zero = _mm256_setzero_si256();
        if n == 0 {
            return [zero, zero];
        }
        let m = mask(n);
        let low = _mm256_maskload_epi64(p as *const i64, m[0]);
        if n <= 4 {
            [low, zero]
        } else {
            [low, _mm256_maskload_epi64(p.add(4) as *const i64, m[1])]
        }
    }

    /// The first `min(n, 8)` of the 8 words at `p`, the other lanes 0: whole loads (which
    /// older whole stores forward to), then masked.
    ///
    /// # Safety
    /// AVX2; `p` points to 8 readable `u64`s.
    #[inline(always)]
    pub unsafe fn load_chunk_prefix(p: *const u64, n: usize) -> V {
        let m = mask(n.min(LANES));
        [
            _mm256_and_si256(_mm256_loadu_si256(p as *const __m256i), m[0]),
            _mm256_and_si256(_mm256_loadu_si256(p.add(4) as *const __m256i), m[1]),
        ]
    }

    /// `v` to the 8 words at `p`.
    ///
    /// # Safety
    /// AVX2; `p` points to 8 writable `u64`s.
    #[inline(always)]
    pub unsafe fn store_whole(p: *mut u64, v: V) {
        _mm256_storeu_si256(p as *mut __m256i, v[0]);
        _mm256_storeu_si256(p.add(4) as *mut __m256i, v[1]);
    }

    /// The first `min(n, 8)` lanes of `v` to `p`.
    ///
    /// # Safety
    /// AVX2; `p` points to `min(n, 8)` writable `u64`s.
    #[inline(always)]
    pub unsafe fn store(p: *mut u64, n: usize, v: V) {
        let n = n.min(LANES);
        if n == 0 {
            return;
        }
        let m = mask(n);
        _mm256_maskstore_epi64(p as *mut i64, m[0], v[0]);
        if n > 4 {
            _mm256_maskstore_epi64(p.add(4) as *mut i64, m[1], v[1]);
        }
    }

    /// The 8 words at `p`, a chunk of a `Words`.
    ///
    /// # Safety
    /// AVX2; `p` is 64-byte aligned, 8 readable `u64`s.
    #[inline(always)]
    pub unsafe fn load_chunk(p: *const u64) -> V {
        [
            _mm256_load_si256(p as *const __m256i),
            _mm256_load_si256(p.add(4) as *const __m256i),
        ]
    }

    /// `v` to the 8 words at `p`, a chunk of a `Words`.
    ///
    /// # Safety
    /// AVX2; `p` is 64-byte aligned, 8 writable `u64`s.
    #[inline(always)]
    pub unsafe fn store_chunk(p: *mut u64, v: V) {
        _mm256_store_si256(p as *mut __m256i, v[0]);
        _mm256_store_si256(p.add(4) as *mut __m256i, v[1]);
    }

    /// `v + x` in every lane, saturating as `u64::saturating_add`.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    pub unsafe fn saturating_add(v: V, x: u64) -> V {
        let x = _mm256_set1_epi64x(x as i64);
        let half = |v: __m256i| {
            let sum = _mm256_add_epi64(v, x);
            // Overflowed where v > sum, unsigned: all ones there.
            let overflow =
                _mm256_cmpgt_epi64(_mm256_xor_si256(v, sign()), _mm256_xor_si256(sum, sign()));
            _mm256_or_si256(sum, overflow)
        };
        [half(v[0]), half(v[1])]
    }

    /// The unsigned maximum in every lane.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    pub unsafe fn max(a: V, b: V) -> V {
        let half = |a: __m256i, b: __m256i| {
            let a_greater =
                _mm256_cmpgt_epi64(_mm256_xor_si256(a, sign()), _mm256_xor_si256(b, sign()));
            _mm256_blendv_epi8(b, a, a_greater)
        };
        [half(a[0], b[0]), half(a[1], b[1])]
    }

    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    pub unsafe fn splat(x: u64) -> V {
        let x = _mm256_set1_epi64x(x as i64);
        [x, x]
    }
}

/// The timestamp calls of one 8-lane path, as functions of the engine: `ts`, `load` and
/// `store` with at most `8 N` analysed levels (the time in `N` registers), `ts_wide`,
/// `load_wide` and `store_wide` 8 levels at a time through memory.
macro_rules! lane_path {
    ($path:ident, $v:ident, $feature:literal) => {
        pub mod $path {
            use super::$v as v;
            use super::*;

            /// [`ts`](Engine::ts) for more than 48 levels, 8 at a time through memory.
            ///
            /// # Safety
            /// The path's processor feature.
            #[target_feature(enable = $feature)]
            pub unsafe fn ts_wide(e: &mut Engine, dst: u32, cands: &[Candidate]) {
                let frame = e.current_frame();
                let a = gather_wide(e, frame, cands);
                finish_wide(e, dst, frame, a, 0);
            }

            /// [`load`](Engine::load) for more than 48 levels, 8 at a time through memory.
            ///
            /// # Safety
            /// The path's processor feature.
            #[target_feature(enable = $feature)]
            pub unsafe fn load_wide(
                e: &mut Engine,
                dst: u32,
                addr: u64,
                size: u64,
                cost: u32,
                cands: &[Candidate],
            ) {
                let frame = e.current_frame();
                let a = gather_wide(e, frame, cands);
                if a > 0 && size > 0 {
                    let granules = e.memory.granules(addr, size);
                    let t = e.t.as_mut_ptr();
                    match &mut e.memory.vsm {
                        AnyVsm::Cached(vsm) => {
                            for g in granules {
                                // At most `a` valid times: within `t`'s chunks.
                                let (line, valid) = vsm.read_line(g);
                                for k in (0..valid).step_by(v::LANES) {
                                    let s = load_line(line, k, valid);
                                    v::store_chunk(t.add(k), v::max(v::load_chunk(t.add(k)), s));
                                }
                            }
                        }
                        _ => e.memory.max_into(addr, size, &mut e.t[..a]),
                    }
                }
                finish_wide(e, dst, frame, a, cost as u64);
            }

            /// [`store`](Engine::store) for more than 48 levels, 8 at a time through memory.
            ///
            /// # Safety
            /// The path's processor feature.
            #[target_feature(enable = $feature)]
            pub unsafe fn store_wide(
                e: &mut Engine,
                addr: u64,
                size: u64,
                cost: u32,
                cands: &[Candidate],
            ) {
                let frame = e.current_frame();
                let a = gather_wide(e, frame, cands);
                finish_wide(e, NONE, frame, a, cost as u64);
                if a > 0 && size > 0 {
                    let granules = e.memory.granules(addr, size);
                    let t = e.t.as_ptr();
                    match &mut e.memory.vsm {
                        AnyVsm::Cached(vsm) => {
                            for g in granules {
                                // Every level, as `write_levels` with `a` (the depth) times.
                                let line = vsm.overwrite_line(g);
                                for k in (0..a).step_by(v::LANES) {
                                    store_line(line, k, a, v::load_chunk(t.add(k)));
                                }
                            }
                        }
                        _ => e.memory.store(addr, size, &e.t[..a]),
                    }
                }
            }

            /// [`hoist`](Engine::hoist) for more than 48 levels, 8 at a time through memory.
            ///
            /// # Safety
            /// The path's processor feature.
            #[target_feature(enable = $feature)]
            pub unsafe fn hoist_wide(e: &mut Engine, dst: u32, cands: &[Candidate]) {
                let frame = e.current_frame();
                let a = gather_wide(e, frame, cands);
                e.mark_hoisted(a);
                write_slot_wide(e, dst, frame, a);
            }

            /// Slot `dst` of the current `frame` gets `e.t[..a]` (whole chunks: see the
            /// module docs).
            ///
            /// # Safety
            /// As for [`ts_wide`](Engine::ts_wide).
            #[inline(always)]
            unsafe fn write_slot_wide(
                e: &mut Engine,
                dst: u32,
                frame: Option<(usize, Frame)>,
                a: usize,
            ) {
                let Some((out, width)) = e.slot_out(dst, frame, a) else {
                    return;
                };
                let t = e.t.as_ptr();
                for k in (0..width).step_by(v::LANES) {
                    v::store_whole(out.add(k), v::load_chunk(t.add(k)));
                }
            }

            /// [`gather`](Engine::gather) 8 levels at a time, into `t`; returns `a`.
            ///
            /// # Safety
            /// As for [`ts_wide`](Engine::ts_wide).
            #[inline(always)]
            pub unsafe fn gather_wide(
                e: &mut Engine,
                frame: Option<(usize, Frame)>,
                cands: &[Candidate],
            ) -> usize {
                let a = e.width;
                let floor = offset_floor(cands);
                // `t` has whole chunks up to `a` rounded up.
                let t = e.t.as_mut_ptr();
                for k in (0..a).step_by(v::LANES) {
                    v::store_chunk(t.add(k), v::splat(floor));
                }
                let Some((_, frame)) = frame else {
                    return a;
                };
                let Some((metas, times)) = frame_slots(&e.slot_meta, &e.slot_times, &frame) else {
                    return a;
                };
                let versions = e.versions.as_slice();
                let stride = frame.stride as usize;
                for c in cands {
                    let Some(m) = metas.get(c.slot as usize) else {
                        continue;
                    };
                    let valid = valid_levels(m.version, m.hint, versions).min(stride);
                    // The slot's `pitch` words: whole chunks, `valid` ≤ `stride` ≤ `pitch`.
                    let from = times.as_ptr().add(c.slot as usize * frame.pitch as usize);
                    for k in (0..valid).step_by(v::LANES) {
                        // Lanes past `valid` read 0: plus the offset, at most `floor`.
                        let s = v::load_chunk_prefix(from.add(k), valid - k);
                        let s = if c.offset == 0 {
                            s
                        } else {
                            v::saturating_add(s, c.offset as u64)
                        };
                        v::store_chunk(t.add(k), v::max(v::load_chunk(t.add(k)), s));
                    }
                }
                a
            }

            /// [`finish`](Engine::finish) 8 levels at a time.
            ///
            /// # Safety
            /// As for [`ts_wide`](Engine::ts_wide).
            #[inline(always)]
            pub unsafe fn finish_wide(
                e: &mut Engine,
                dst: u32,
                frame: Option<(usize, Frame)>,
                a: usize,
                cost: u64,
            ) {
                // `t` and `cps` have whole chunks up to `a` rounded up; the lanes past `a` are left
                // over (`enter` sets a level's critical path).
                let t = e.t.as_mut_ptr();
                let cps = e.cps.as_mut_ptr();
                for k in (0..a).step_by(v::LANES) {
                    let mut v = v::load_chunk(t.add(k));
                    if cost != 0 {
                        v = v::saturating_add(v, cost);
                        v::store_chunk(t.add(k), v);
                    }
                    v::store_chunk(cps.add(k), v::max(v::load_chunk(cps.add(k)), v));
                }
                write_slot_wide(e, dst, frame, a);
            }

            /// [`ts`](Engine::ts) with at most `8 N` analysed levels, the time in `N`
            /// registers.
            ///
            /// # Safety
            /// The path's processor feature; at most `8 N` analysed levels.
            #[target_feature(enable = $feature)]
            pub unsafe fn ts<const N: usize>(e: &mut Engine, dst: u32, cands: &[Candidate]) {
                let frame = e.current_frame();
                let t = gather::<N>(e, frame, cands);
                finish::<N>(e, dst, frame, t, 0);
            }

            /// [`hoist`](Engine::hoist) with the time in `N` registers.
            ///
            /// # Safety
            /// As for [`ts`](Engine::ts).
            #[target_feature(enable = $feature)]
            pub unsafe fn hoist<const N: usize>(e: &mut Engine, dst: u32, cands: &[Candidate]) {
                let frame = e.current_frame();
                let t = gather::<N>(e, frame, cands);
                let a = e.width;
                // `t` has whole chunks up to `a` rounded up, at least one: `N`.
                let out = e.t.as_mut_ptr();
                for (k, chunk) in t.iter().enumerate() {
                    v::store_chunk(out.add(k * v::LANES), *chunk);
                }
                e.mark_hoisted(a);
                write_slot::<N>(e, dst, frame, &t);
            }

            /// [`load`](Engine::load) with the time in `N` registers.
            ///
            /// # Safety
            /// As for [`ts`](Engine::ts).
            #[target_feature(enable = $feature)]
            pub unsafe fn load<const N: usize>(
                e: &mut Engine,
                dst: u32,
                addr: u64,
                size: u64,
                cost: u32,
                cands: &[Candidate],
            ) {
                let frame = e.current_frame();
                let mut t = gather::<N>(e, frame, cands);
                let a = e.width;
                if a > 0 && size > 0 {
                    let granules = e.memory.granules(addr, size);
                    match &mut e.memory.vsm {
                        AnyVsm::Cached(vsm) => {
                            for g in granules {
                                // At most the shadow's depth, `a`: the levels after the prefix read 0.
                                let (line, valid) = vsm.read_line(g);
                                for (k, chunk) in t.iter_mut().enumerate() {
                                    let from = k * v::LANES;
                                    if from >= valid {
                                        break;
                                    }
                                    *chunk = v::max(*chunk, load_line(line, from, valid));
                                }
                            }
                        }
                        _ => {
                            // `t` has whole chunks up to `a` rounded up: `N` of them.
                            let p = e.t.as_mut_ptr();
                            for (k, chunk) in t.iter().enumerate() {
                                v::store_chunk(p.add(k * v::LANES), *chunk);
                            }
                            e.memory.max_into(addr, size, &mut e.t[..a]);
                            let p = e.t.as_ptr();
                            for (k, chunk) in t.iter_mut().enumerate() {
                                *chunk = v::load_chunk(p.add(k * v::LANES));
                            }
                        }
                    }
                }
                finish::<N>(e, dst, frame, t, cost as u64);
            }

            /// [`store`](Engine::store) with the time in `N` registers.
            ///
            /// # Safety
            /// As for [`ts`](Engine::ts).
            #[target_feature(enable = $feature)]
            pub unsafe fn store<const N: usize>(
                e: &mut Engine,
                addr: u64,
                size: u64,
                cost: u32,
                cands: &[Candidate],
            ) {
                let frame = e.current_frame();
                let t = gather::<N>(e, frame, cands);
                let t = finish::<N>(e, NONE, frame, t, cost as u64);
                let a = e.width;
                if a > 0 && size > 0 {
                    let granules = e.memory.granules(addr, size);
                    match &mut e.memory.vsm {
                        AnyVsm::Cached(vsm) => {
                            for g in granules {
                                // Every level, as `write_levels` with `a` (the depth) times.
                                let line = vsm.overwrite_line(g);
                                for (k, chunk) in t.iter().enumerate() {
                                    let from = k * v::LANES;
                                    if from >= a {
                                        break;
                                    }
                                    store_line(line, from, a, *chunk);
                                }
                            }
                        }
                        _ => e.memory.store(addr, size, &e.t[..a]),
                    }
                }
            }

            /// The times `k..valid` of a VCache line (at most 8, the other lanes 0): a
            /// whole 8-word load where the line has the room, which a processor forwards
            /// an earlier whole store (`store_line`) to, where a masked load would wait
            /// for it to reach the cache.
            ///
            /// # Safety
            /// The path's processor feature; `k <= valid <= line.len()`.
            #[inline(always)]
            unsafe fn load_line(line: &[u64], k: usize, valid: usize) -> v::V {
                if line.len() - k >= v::LANES {
                    v::load_chunk_prefix(line.as_ptr().add(k), valid - k)
                } else {
                    v::load(line.as_ptr().add(k), valid - k)
                }
            }

            /// Lanes `k..depth` of a VCache line get `chunk`: 8 whole words where the line
            /// has the room (its words past `depth` are never read).
            ///
            /// # Safety
            /// The path's processor feature; `k < depth <= line.len()`.
            #[inline(always)]
            unsafe fn store_line(line: &mut [u64], k: usize, depth: usize, chunk: v::V) {
                if line.len() - k >= v::LANES {
                    v::store_whole(line.as_mut_ptr().add(k), chunk)
                } else {
                    v::store(line.as_mut_ptr().add(k), depth - k, chunk)
                }
            }

            /// [`gather`](Engine::gather) into `N` registers (lane `8 k + i` of the result:
            /// level `8 k + i`).
            ///
            /// # Safety
            /// As for [`ts`](Engine::ts).
            #[inline(always)]
            pub unsafe fn gather<const N: usize>(
                e: &mut Engine,
                frame: Option<(usize, Frame)>,
                cands: &[Candidate],
            ) -> [v::V; N] {
                // Every offset is at most `floor`: a lane a slot does not cover (read as 0) plus its
                // offset changes nothing.
                let floor = offset_floor(cands);
                let mut t = [v::splat(floor); N];
                let Some((_, frame)) = frame else {
                    return t;
                };
                let Some((metas, times)) = frame_slots(&e.slot_meta, &e.slot_times, &frame) else {
                    return t;
                };
                let versions = e.versions.as_slice();
                let stride = frame.stride as usize;
                for c in cands {
                    let Some(m) = metas.get(c.slot as usize) else {
                        continue;
                    };
                    // At most `a` ≤ `8 N`; the slot's `pitch` words are whole chunks, at least
                    // `valid` rounded up.
                    let valid = valid_levels(m.version, m.hint, versions).min(stride);
                    let from = times.as_ptr().add(c.slot as usize * frame.pitch as usize);
                    for (k, chunk) in t.iter_mut().enumerate() {
                        let at = k * v::LANES;
                        if at >= valid {
                            break;
                        }
                        let s = v::load_chunk_prefix(from.add(at), valid - at);
                        let s = if c.offset == 0 {
                            s
                        } else {
                            v::saturating_add(s, c.offset as u64)
                        };
                        *chunk = v::max(*chunk, s);
                    }
                }
                t
            }

            /// [`finish`](Engine::finish) of a time in `N` registers; returns the complete
            /// time (also left in `e.t`).
            ///
            /// # Safety
            /// As for [`ts`](Engine::ts).
            #[inline(always)]
            pub unsafe fn finish<const N: usize>(
                e: &mut Engine,
                dst: u32,
                frame: Option<(usize, Frame)>,
                mut t: [v::V; N],
                cost: u64,
            ) -> [v::V; N] {
                if cost != 0 {
                    for chunk in t.iter_mut() {
                        *chunk = v::saturating_add(*chunk, cost);
                    }
                }
                // `t` and `cps` have whole chunks up to `a` rounded up, at least one: `N`; the
                // lanes past `a` are left over.
                let (out, cps) = (e.t.as_mut_ptr(), e.cps.as_mut_ptr());
                for (k, chunk) in t.iter().enumerate() {
                    let at = k * v::LANES;
                    v::store_chunk(out.add(at), *chunk);
                    v::store_chunk(cps.add(at), v::max(v::load_chunk(cps.add(at)), *chunk));
                }
                write_slot::<N>(e, dst, frame, &t);
                t
            }

            /// Slot `dst` of the current `frame` gets the time `t` at the levels open (its
            /// chunks whole: see the module docs, the times past the levels written are
            /// never read).
            ///
            /// # Safety
            /// As for [`ts`](Engine::ts).
            #[inline(always)]
            unsafe fn write_slot<const N: usize>(
                e: &mut Engine,
                dst: u32,
                frame: Option<(usize, Frame)>,
                t: &[v::V; N],
            ) {
                let Some((out, width)) = e.slot_out(dst, frame, e.width) else {
                    return;
                };
                for (k, chunk) in t.iter().enumerate() {
                    if k * v::LANES >= width {
                        break;
                    }
                    v::store_whole(out.add(k * v::LANES), *chunk);
                }
            }
        }
    };
}

lane_path!(avx512_path, avx512, "avx512f");
lane_path!(avx2_path, avx2, "avx2");

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::{avx2, avx512};

    macro_rules! lanes_match_the_scalar_code {
        ($name:ident, $v:ident) => {
            #[test]
            fn $name() {
                if !$v::available() {
                    return;
                }
                let a = [0, 1, u64::MAX, u64::MAX - 3, 1 << 63, 7, 5, 9];
                let b = [3, 0, 1, u64::MAX - 2, (1 << 63) - 1, 7, 6, 2];
                for n in 0..=8 {
                    for x in [0, 1, 4, u64::MAX] {
                        let mut out = [42u64; 8];
                        // SAFETY: the processor has the feature; 8-word arrays.
                        unsafe {
                            let v: $v::V = $v::load(a.as_ptr(), n);
                            let w = $v::max($v::saturating_add(v, x), $v::load(b.as_ptr(), n));
                            $v::store(out.as_mut_ptr(), n, w);
                        }
                        for l in 0..8 {
                            let expected = if l < n {
                                a[l].saturating_add(x).max(b[l])
                            } else {
                                42
                            };
                            assert_eq!(out[l], expected, "n {n} x {x} lane {l}");
                        }
                    }
                }
            }
        };
    }

    lanes_match_the_scalar_code!(
        avx512_lanes_saturate_and_take_the_maximum_as_the_scalar_code,
        avx512
    );
    lanes_match_the_scalar_code!(
        avx2_lanes_saturate_and_take_the_maximum_as_the_scalar_code,
        avx2
    );
}
