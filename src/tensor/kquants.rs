//! The 256-element K-quants Q2_K … Q6_K: dequantization and scalar dots against Q8_K.
//!
//! The dots follow ggml's `ggml_vec_dot_q*_K_q8_K_generic`: weights are unpacked to small signed
//! integers, multiplied with the activation quants and accumulated exactly into eight integer
//! lanes (lane `l` takes elements `l, l + 8, …`); each super-block then adds `d * lane` into eight
//! float lanes, which are summed only at the very end. Q2_K instead keeps one integer sum per
//! super-block. The mins of Q2_K/Q4_K/Q5_K use the Q8_K group sums (`bsums`).
//!
//! Natively, Q4_K matrices of a multiple of 8 rows follow llama.cpp's repacked x86 kernels
//! instead (`dot_q4_k_gemm`, `dot_q4_k_gemv`), and Q2_K/Q5_K/Q6_K matmuls of 8+ rows its
//! tiled kernel (`*_tiled`); see `matmul.rs` for when each applies.

use super::float::fma;

use super::blocks::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, QK_K, whole_blocks};
use super::format::{QuantFormat, WeightType};
use super::legacy::hsum8;

/// What a Q8_K activation block carries for these kernels besides ggml's fields: nothing. (The
/// plain SIMD128 kernels have theirs.)
#[cfg_attr(target_feature = "simd128", allow(dead_code))]
pub(super) type Q8KWide = ();

/// The [`Q8KWide`] of a block's quants.
#[cfg_attr(target_feature = "simd128", allow(dead_code))]
#[inline(always)]
pub(super) fn q8_k_wide(_qs: &[i8; QK_K]) -> Q8KWide {}

/// Unpacks the twelve bytes of Q4_K/Q5_K scales into eight 6-bit scales and eight 6-bit mins
/// (ggml's `get_scale_min_k4`): groups 0-3 sit in the low six bits of bytes 0-3 (scales) and
/// 4-7 (mins); groups 4-7 take a nibble from bytes 8-11 and their top two bits from the spare
/// high bits of bytes 0-7.
#[inline(always)]
pub(super) fn scales_and_mins_k4(packed: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for j in 0..4 {
        scales[j] = packed[j] & 63;
        mins[j] = packed[j + 4] & 63;
        scales[j + 4] = (packed[j + 8] & 0x0F) | ((packed[j] >> 6) << 4);
        mins[j + 4] = (packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4);
    }
    (scales, mins)
}

/// Unpacks the twelve bytes of Q3_K scales into sixteen signed scales (stored 6-bit, offset 32):
/// the low nibble of group `j` is nibble `j / 8` of byte `j % 8`; its top two bits are bits
/// `2 * (j / 4)` of byte `8 + j % 4`.
#[inline(always)]
pub(super) fn scales_q3_k(packed: &[u8; 12]) -> [i8; 16] {
    let mut scales = [0i8; 16];
    for (j, scale) in scales.iter_mut().enumerate() {
        let low = (packed[j % 8] >> (4 * (j / 8))) & 0x0F;
        let high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        *scale = (low | (high << 4)) as i8 - 32;
    }
    scales
}

/// Sums `scale(group) * q * a` into eight integer lanes by element index mod 8, as ggml's
/// generic K-quant dots do; `GROUP` is the number of elements sharing one scale.
#[inline(always)]
fn lane_sums<const GROUP: usize>(q: &[i8; QK_K], a: &[i8; QK_K], scales: &[i32]) -> [i32; 8] {
    let mut lanes = [0i32; 8];
    for ((q_group, a_group), &scale) in q.chunks_exact(GROUP).zip(a.chunks_exact(GROUP)).zip(scales) {
        for (q8, a8) in q_group.chunks_exact(8).zip(a_group.chunks_exact(8)) {
            for ((lane, &qv), &av) in lanes.iter_mut().zip(q8).zip(a8) {
                *lane += scale * i32::from(i16::from(qv) * i16::from(av));
            }
        }
    }
    lanes
}

/// Adds `d * lanes` into the running float lanes.
#[inline(always)]
fn accumulate_lanes(float_lanes: &mut [f32; 8], d: f32, lanes: &[i32; 8]) {
    for (sum, &lane) in float_lanes.iter_mut().zip(lanes) {
        *sum += d * lane as f32;
    }
}

/// Sum of the Q8_K group sums weighted by the (per 32) mins.
#[inline(always)]
fn min_correction(bsums: &[i16; 16], mins: &[u8; 8]) -> i32 {
    bsums.iter().enumerate().map(|(j, &b)| i32::from(b) * i32::from(mins[j / 2])).sum()
}

/// One block of ggml's tiled K-quant kernel (`ggml-cpu/tiled`, batches of 8+ rows): the exact
/// integer dots scaled by the block's `d` (minus `dmin` times the min term, fused), then fused
/// into the running sum with the activation scale.
#[inline(always)]
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
fn tiled_block(sum: f32, d: f32, exact: i32, dmin: f32, min_exact: i32, activation_d: f32) -> f32 {
    let block = fma(-dmin, min_exact as f32, d * exact as f32);
    fma(block, activation_d, sum)
}

// ---------------------------------------------------------------------------------------------
// Q2_K

impl QuantFormat for BlockQ2K {
    const TYPE: WeightType = WeightType::Q2_K;
    type Block = Self;
    type Activation = BlockQ8K;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK_K)) {
            let (d, dmin) = (block.d.to_f32(), block.dmin.to_f32());
            // Each 32 bytes of qs hold four 32-element rows, two bits apiece; each 16 elements
            // have their own scale/min byte.
            for (group, (out, &scale)) in y.chunks_exact_mut(16).zip(&block.scales).enumerate() {
                let bytes = &block.qs[32 * (group / 8) + 16 * (group % 2)..][..16];
                let shift = 2 * ((group / 2) % 4);
                let dl = d * f32::from(scale & 0x0F);
                let ml = dmin * f32::from(scale >> 4);
                for (value, &q) in out.iter_mut().zip(bytes) {
                    *value = dl * f32::from((q >> shift) & 3) - ml;
                }
            }
        }
    }
}

pub(super) fn dot_q2_k(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let (int_sum, min_sum) = q2_k_sums(xb, yb);
        let d_all = yb.d * xb.d.to_f32();
        let d_min = yb.d * xb.dmin.to_f32();
        sum += d_all * int_sum as f32 - d_min * min_sum as f32;
    }
    sum
}

#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_q2_k_tiled(x: &[BlockQ2K], y: &[BlockQ8K]) -> f32 {
    x.iter().zip(y).fold(0.0, |sum, (xb, yb)| {
        let (int_sum, min_sum) = q2_k_sums(xb, yb);
        tiled_block(sum, xb.d.to_f32(), int_sum, xb.dmin.to_f32(), min_sum, yb.d)
    })
}

/// Exact `(Σ scale·q·a, Σ min·bsum)` of one Q2_K block.
#[inline(always)]
fn q2_k_sums(xb: &BlockQ2K, yb: &BlockQ8K) -> (i32, i32) {
    let min_sum: i32 =
        yb.bsums.iter().zip(&xb.scales).map(|(&b, &sc)| i32::from(b) * i32::from(sc >> 4)).sum();
    let mut int_sum = 0i32;
    for (group, (a, &scale)) in yb.qs.chunks_exact(16).zip(&xb.scales).enumerate() {
        let bytes = &xb.qs[32 * (group / 8) + 16 * (group % 2)..][..16];
        let shift = 2 * ((group / 2) % 4);
        let group_sum: i32 =
            bytes.iter().zip(a).map(|(&q, &av)| i32::from(av) * i32::from((q >> shift) & 3)).sum();
        int_sum += i32::from(scale & 0x0F) * group_sum;
    }
    (int_sum, min_sum)
}

// ---------------------------------------------------------------------------------------------
// Q3_K

/// Signed 3-bit quants of a Q3_K block, -4..=3: two low bits from `qs`, minus 4 unless the
/// `hmask` bit is set.
#[inline(always)]
fn unpack_q3_k(block: &BlockQ3K) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for (row, out) in q.chunks_exact_mut(32).enumerate() {
        let bytes = &block.qs[32 * (row / 4)..][..32];
        let shift = 2 * (row % 4);
        for ((value, &b), &h) in out.iter_mut().zip(bytes).zip(&block.hmask) {
            let low = ((b >> shift) & 3) as i8;
            *value = if h & (1 << row) != 0 { low } else { low - 4 };
        }
    }
    q
}

impl QuantFormat for BlockQ3K {
    const TYPE: WeightType = WeightType::Q3_K;
    type Block = Self;
    type Activation = BlockQ8K;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK_K)) {
            let d = block.d.to_f32();
            let scales = scales_q3_k(&block.scales);
            let q = unpack_q3_k(block);
            for ((out, q_group), &scale) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).zip(&scales) {
                let dl = d * f32::from(scale);
                for (value, &qv) in out.iter_mut().zip(q_group) {
                    *value = dl * f32::from(qv);
                }
            }
        }
    }
}

pub(super) fn dot_q3_k(x: &[BlockQ3K], y: &[BlockQ8K]) -> f32 {
    let mut float_lanes = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let q = unpack_q3_k(xb);
        let scales = scales_q3_k(&xb.scales).map(i32::from);
        let lanes = lane_sums::<16>(&q, &yb.qs, &scales);
        accumulate_lanes(&mut float_lanes, xb.d.to_f32() * yb.d, &lanes);
    }
    float_lanes.iter().fold(0.0f32, |sum, &lane| sum + lane)
}

// ---------------------------------------------------------------------------------------------
// Q4_K

/// 4-bit quants of a Q4_K block: each 32 bytes give 32 elements from low nibbles, then 32 from
/// high nibbles.
#[inline(always)]
fn unpack_q4_k(qs: &[u8; QK_K / 2]) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for (out, bytes) in q.chunks_exact_mut(64).zip(qs.chunks_exact(32)) {
        let (low, high) = out.split_at_mut(32);
        for ((l, h), &b) in low.iter_mut().zip(high).zip(bytes) {
            *l = (b & 0x0F) as i8;
            *h = (b >> 4) as i8;
        }
    }
    q
}

impl QuantFormat for BlockQ4K {
    const TYPE: WeightType = WeightType::Q4_K;
    type Block = Self;
    type Activation = BlockQ8K;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK_K)) {
            let (d, dmin) = (block.d.to_f32(), block.dmin.to_f32());
            let (scales, mins) = scales_and_mins_k4(&block.scales);
            let q = unpack_q4_k(&block.qs);
            for (((out, q_group), &scale), &min) in
                y.chunks_exact_mut(32).zip(q.chunks_exact(32)).zip(&scales).zip(&mins)
            {
                let (dl, ml) = (d * f32::from(scale), dmin * f32::from(min));
                for (value, &qv) in out.iter_mut().zip(q_group) {
                    *value = dl * f32::from(qv) - ml;
                }
            }
        }
    }
}

/// The exact integer dots `Σ q·a` of the eight 32-element sub-blocks of a Q4_K block with the
/// Q8_K quants (sub-block `2j` is the low nibbles of `qs[32j..32j + 32]`, `2j + 1` the high ones).
#[inline(always)]
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
fn q4_k_sub_block_dots(xb: &BlockQ4K, yb: &BlockQ8K) -> [i32; 8] {
    let mut dots = [0i32; 8];
    for (pair, (bytes, a64)) in xb.qs.chunks_exact(32).zip(yb.qs.chunks_exact(64)).enumerate() {
        let (a_low, a_high) = a64.split_at(32);
        let (mut low, mut high) = (0i32, 0i32);
        for ((&b, &al), &ah) in bytes.iter().zip(a_low).zip(a_high) {
            low += i32::from(b & 0x0F) * i32::from(al);
            high += i32::from(b >> 4) * i32::from(ah);
        }
        dots[2 * pair] = low;
        dots[2 * pair + 1] = high;
    }
    dots
}

/// The Q8_K sums of the eight 32-element sub-blocks (pairs of `bsums`).
#[inline(always)]
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
fn q8_k_sub_block_sums(yb: &BlockQ8K) -> [i32; 8] {
    std::array::from_fn(|j| i32::from(yb.bsums[2 * j]) + i32::from(yb.bsums[2 * j + 1]))
}

/// llama.cpp's repacked Q4_K GEMV (`ggml_gemv_q4_K_8x8_q8_K`, x86 AVX2), used for the
/// activation rows of a matmul outside whole groups of 4. Per super-block: the exact integer
/// `Σ scale·q·a` over all eight sub-blocks and the exact `Σ min·bsum`; each, converted to f32, is
/// fused-multiply-added into its own accumulator with `d·d_y` (resp. `dmin·d_y`), an f32 product.
/// The result is the first accumulator minus the second.
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_q4_k_gemv(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let (mut sum, mut min_sum) = (0.0f32, 0.0f32);
    for (xb, yb) in x.iter().zip(y) {
        let (scales, mins) = scales_and_mins_k4(&xb.scales);
        let dots = q4_k_sub_block_dots(xb, yb);
        let sums = q8_k_sub_block_sums(yb);
        let exact: i32 = dots.iter().zip(&scales).map(|(&dot, &sc)| i32::from(sc) * dot).sum();
        let min_exact: i32 = sums.iter().zip(&mins).map(|(&s, &m)| i32::from(m) * s).sum();
        sum = fma(exact as f32, xb.d.to_f32() * yb.d, sum);
        min_sum = fma(min_exact as f32, xb.dmin.to_f32() * yb.d, min_sum);
    }
    sum - min_sum
}

/// llama.cpp's repacked Q4_K GEMM (`ggml_gemm_q4_K_8x8_q8_K`, x86 AVX2), used for the
/// activation rows of a matmul in whole groups of 4. As [`dot_q4_k_gemv`], except that the float
/// accumulation runs per pair of sub-blocks (64 elements): four fused multiply-adds per
/// super-block into each accumulator, of `scale·Σq·a` (resp. `min·bsum`) summed over the pair.
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_q4_k_gemm(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let (mut sum, mut min_sum) = (0.0f32, 0.0f32);
    for (xb, yb) in x.iter().zip(y) {
        let (scales, mins) = scales_and_mins_k4(&xb.scales);
        let dots = q4_k_sub_block_dots(xb, yb);
        let sums = q8_k_sub_block_sums(yb);
        let (d, dmin) = (xb.d.to_f32() * yb.d, xb.dmin.to_f32() * yb.d);
        for pair in 0..4 {
            let (a, b) = (2 * pair, 2 * pair + 1);
            let exact = i32::from(scales[a]) * dots[a] + i32::from(scales[b]) * dots[b];
            let min_exact = i32::from(mins[a]) * sums[a] + i32::from(mins[b]) * sums[b];
            sum = fma(exact as f32, d, sum);
            min_sum = fma(min_exact as f32, dmin, min_sum);
        }
    }
    sum - min_sum
}

pub(super) fn dot_q4_k(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    let mut float_lanes = [0.0f32; 8];
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let q = unpack_q4_k(&xb.qs);
        let (scales, mins) = scales_and_mins_k4(&xb.scales);
        let lanes = lane_sums::<32>(&q, &yb.qs, &scales.map(i32::from));
        accumulate_lanes(&mut float_lanes, xb.d.to_f32() * yb.d, &lanes);
        sum -= xb.dmin.to_f32() * yb.d * min_correction(&yb.bsums, &mins) as f32;
    }
    float_lanes.iter().fold(sum, |sum, &lane| sum + lane)
}

// ---------------------------------------------------------------------------------------------
// Q5_K

/// 5-bit quants of a Q5_K block: Q4_K's nibbles plus 16 where bit `row` of `qh` is set.
#[inline(always)]
fn unpack_q5_k(block: &BlockQ5K) -> [i8; QK_K] {
    let mut q = unpack_q4_k(&block.qs);
    for (row, out) in q.chunks_exact_mut(32).enumerate() {
        for (value, &h) in out.iter_mut().zip(&block.qh) {
            if h & (1 << row) != 0 {
                *value += 16;
            }
        }
    }
    q
}

impl QuantFormat for BlockQ5K {
    const TYPE: WeightType = WeightType::Q5_K;
    type Block = Self;
    type Activation = BlockQ8K;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK_K)) {
            let (d, dmin) = (block.d.to_f32(), block.dmin.to_f32());
            let (scales, mins) = scales_and_mins_k4(&block.scales);
            let q = unpack_q5_k(block);
            for (((out, q_group), &scale), &min) in
                y.chunks_exact_mut(32).zip(q.chunks_exact(32)).zip(&scales).zip(&mins)
            {
                let (dl, ml) = (d * f32::from(scale), dmin * f32::from(min));
                for (value, &qv) in out.iter_mut().zip(q_group) {
                    *value = dl * f32::from(qv) - ml;
                }
            }
        }
    }
}

#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_q5_k_tiled(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    x.iter().zip(y).fold(0.0, |sum, (xb, yb)| {
        let q = unpack_q5_k(xb);
        let (scales, mins) = scales_and_mins_k4(&xb.scales);
        let exact: i32 = q
            .chunks_exact(32)
            .zip(yb.qs.chunks_exact(32))
            .zip(&scales)
            .map(|((q32, a32), &scale)| {
                i32::from(scale)
                    * q32.iter().zip(a32).map(|(&qv, &av)| i32::from(qv) * i32::from(av)).sum::<i32>()
            })
            .sum();
        tiled_block(sum, xb.d.to_f32(), exact, xb.dmin.to_f32(), min_correction(&yb.bsums, &mins), yb.d)
    })
}

pub(super) fn dot_q5_k(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    let mut float_lanes = [0.0f32; 8];
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let q = unpack_q5_k(xb);
        let (scales, mins) = scales_and_mins_k4(&xb.scales);
        let lanes = lane_sums::<32>(&q, &yb.qs, &scales.map(i32::from));
        accumulate_lanes(&mut float_lanes, xb.d.to_f32() * yb.d, &lanes);
        sum -= xb.dmin.to_f32() * yb.d * min_correction(&yb.bsums, &mins) as f32;
    }
    float_lanes.iter().fold(sum, |sum, &lane| sum + lane)
}

// ---------------------------------------------------------------------------------------------
// Q6_K

/// Signed 6-bit quants of a Q6_K block, -32..=31. Each 128 elements use 64 `ql` bytes and 32 `qh`
/// bytes: element `32 * r + l` takes nibble `r / 2` of `ql[l + 32 * (r % 2)]` and bits `2 * r`
/// of `qh[l]`.
#[inline(always)]
pub(super) fn unpack_q6_k(block: &BlockQ6K) -> [i8; QK_K] {
    let mut q = [0i8; QK_K];
    for (half, out) in q.chunks_exact_mut(128).enumerate() {
        let ql = &block.ql[64 * half..][..64];
        let qh = &block.qh[32 * half..][..32];
        for (row, out_row) in out.chunks_exact_mut(32).enumerate() {
            let low_bytes = &ql[32 * (row % 2)..][..32];
            for ((value, &low), &high) in out_row.iter_mut().zip(low_bytes).zip(qh) {
                let nibble = (low >> (4 * (row / 2))) & 0x0F;
                let top = (high >> (2 * row)) & 3;
                *value = (nibble | (top << 4)) as i8 - 32;
            }
        }
    }
    q
}

impl QuantFormat for BlockQ6K {
    const TYPE: WeightType = WeightType::Q6_K;
    type Block = Self;
    type Activation = BlockQ8K;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK_K)) {
            let d = block.d.to_f32();
            let q = unpack_q6_k(block);
            for ((out, q_group), &scale) in y.chunks_exact_mut(16).zip(q.chunks_exact(16)).zip(&block.scales)
            {
                let dl = d * f32::from(scale);
                for (value, &qv) in out.iter_mut().zip(q_group) {
                    *value = dl * f32::from(qv);
                }
            }
        }
    }
}

/// ggml's tiled K-quant kernel (`ggml-cpu/tiled`, batches of 8+ rows): per block the exact
/// integer dot `Σ scale·q·a`, times the block scale, then fused into the sum with the
/// activation scale.
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_q6_k_tiled(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let q = unpack_q6_k(xb);
        let mut exact = 0i32;
        for ((q16, a16), &scale) in q.chunks_exact(16).zip(yb.qs.chunks_exact(16)).zip(&xb.scales) {
            let raw: i32 = q16.iter().zip(a16).map(|(&qv, &av)| i32::from(qv) * i32::from(av)).sum();
            exact += i32::from(scale) * raw;
        }
        let block = xb.d.to_f32() * exact as f32;
        sum = fma(block, yb.d, sum);
    }
    sum
}

/// In the lane order of ggml's AVX2 `ggml_vec_dot_q6_K_q8_K`: lane `k` sums, over the eight
/// 32-element chunks of a block, the scaled products of chunk elements `4k..4k+4`, with the
/// quants unsigned (0..63) and the offset of 32 removed through the Q8_K group sums of groups
/// `2k` and `2k+1`; each lane is then fused-multiply-added with the block scale.
pub(super) fn dot_q6_k(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let q = unpack_q6_k(xb);
        let mut lanes = [0i32; 8];
        for (c, (q_chunk, a_chunk)) in q.chunks_exact(32).zip(yb.qs.chunks_exact(32)).enumerate() {
            let (first, second) = (i32::from(xb.scales[2 * c]), i32::from(xb.scales[2 * c + 1]));
            for (k, (q4, a4)) in q_chunk.chunks_exact(4).zip(a_chunk.chunks_exact(4)).enumerate() {
                let sum: i32 = q4.iter().zip(a4).map(|(&qv, &av)| (i32::from(qv) + 32) * i32::from(av)).sum();
                lanes[k % 8] += if k < 4 { first } else { second } * sum;
            }
        }
        for (k, lane) in lanes.iter_mut().enumerate() {
            let offset = i32::from(yb.bsums[2 * k]) * i32::from(xb.scales[2 * k])
                + i32::from(yb.bsums[2 * k + 1]) * i32::from(xb.scales[2 * k + 1]);
            *lane -= 32 * offset;
        }
        let d = yb.d * xb.d.to_f32();
        for (a, &lane) in acc.iter_mut().zip(&lanes) {
            *a = fma(d, lane as f32, *a);
        }
    }
    hsum8(&acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_support::Rng;
    use crate::tensor::{ActivationType, QuantizedActivations, cast_blocks};

    /// Random Q4_K rows of `blocks` blocks and Q8_K activations of the same length.
    fn q4_k_case(blocks: usize, rng: &mut Rng) -> (Vec<BlockQ4K>, Vec<BlockQ8K>) {
        let bytes = rng.blocks(blocks, size_of::<BlockQ4K>(), &[0, 2]);
        let x = cast_blocks::<BlockQ4K>(&bytes).unwrap().to_vec();
        let acts: Vec<f32> = (0..blocks * QK_K).map(|_| rng.normal() * 2.0).collect();
        let q = QuantizedActivations::quantize(ActivationType::Q8_K, &acts, 1, blocks * QK_K).unwrap();
        (x, q.row::<BlockQ8K>(0).unwrap().to_vec())
    }

    /// The 6-bit scale and min of sub-block `j`, read bit by bit from ggml's description of the
    /// packing (independently of `scales_and_mins_k4`).
    fn scale_and_min(packed: &[u8; 12], j: usize) -> (i32, i32) {
        let (scale, min) = if j < 4 {
            (packed[j] & 63, packed[j + 4] & 63)
        } else {
            (
                (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4),
                (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4),
            )
        };
        (i32::from(scale), i32::from(min))
    }

    /// A plain element-by-element statement of the repacked kernels' arithmetic: per group of
    /// `group` sub-blocks (8 for the GEMV, 2 for the GEMM), the exact integers
    /// `Σ scale·q·a` and `Σ min·a` (the activation sum taken from the quants, not `bsums`),
    /// each fused into its own f32 accumulator with `d·d_y` / `dmin·d_y`; then their difference.
    fn repacked_reference(x: &[BlockQ4K], y: &[BlockQ8K], group: usize) -> f32 {
        let (mut sum, mut min_sum) = (0.0f32, 0.0f32);
        for (xb, yb) in x.iter().zip(y) {
            let d = xb.d.to_f32() * yb.d;
            let dmin = xb.dmin.to_f32() * yb.d;
            for first in (0..8).step_by(group) {
                let (mut exact, mut min_exact) = (0i32, 0i32);
                for j in first..first + group {
                    let (scale, min) = scale_and_min(&xb.scales, j);
                    for e in 32 * j..32 * (j + 1) {
                        let byte = xb.qs[32 * (e / 64) + e % 32];
                        let q = if (e / 32) % 2 == 0 { byte & 0x0F } else { byte >> 4 };
                        let a = i32::from(yb.qs[e]);
                        exact += scale * i32::from(q) * a;
                        min_exact += min * a;
                    }
                }
                sum = (exact as f32).mul_add(d, sum);
                min_sum = (min_exact as f32).mul_add(dmin, min_sum);
            }
        }
        sum - min_sum
    }

    #[test]
    fn repacked_q4_k_kernels_follow_llama_cpp_order() {
        let mut rng = Rng::new(41);
        let (mut gemv_differs, mut gemm_differs) = (0, 0);
        for blocks in [1, 2, 3, 5] {
            for _ in 0..200 {
                let (x, y) = q4_k_case(blocks, &mut rng);
                let (gemv, gemm) = (dot_q4_k_gemv(&x, &y), dot_q4_k_gemm(&x, &y));
                assert_eq!(gemv.to_bits(), repacked_reference(&x, &y, 8).to_bits(), "GEMV, {blocks} blocks");
                assert_eq!(gemm.to_bits(), repacked_reference(&x, &y, 2).to_bits(), "GEMM, {blocks} blocks");
                // The same value up to rounding as the generic order.
                let generic = dot_q4_k(&x, &y);
                let scale = generic.abs().max(1e-2);
                assert!((gemv - generic).abs() / scale < 1e-4, "{gemv} vs {generic}");
                assert!((gemm - generic).abs() / scale < 1e-4, "{gemm} vs {generic}");
                gemv_differs += usize::from(gemv.to_bits() != gemm.to_bits());
                gemm_differs += usize::from(gemm.to_bits() != generic.to_bits());
            }
        }
        // The orders are distinct, so the tests above pin each one.
        assert!(gemv_differs > 0 && gemm_differs > 0, "{gemv_differs} {gemm_differs}");
    }

    /// A hand-computed block: every nibble 1 and every activation quant 1 (so each sub-block's
    /// dot and activation sum are 32), scales 1 and mins 1 for sub-blocks 0-3, 0 for 4-7;
    /// `d = 1`, `dmin = 0.5`, `d_y = 2⁻²⁴`. Exactly: Σ scale·32 = 128, Σ min·32 = 128, so the
    /// GEMV gives 128·2⁻²⁴ - 128·2⁻²⁵ = 2⁻¹⁸, and so does the GEMM, whose sub-block pairs 0
    /// and 1 each add 64·2⁻²⁴ and 64·2⁻²⁵ (pairs 2 and 3 add zero).
    #[test]
    fn repacked_q4_k_hand_computed_block() {
        let mut x: BlockQ4K = cast_blocks::<BlockQ4K>(&[0u8; 144]).unwrap()[0];
        x.d = crate::tensor::F16Le::from_f32(1.0);
        x.dmin = crate::tensor::F16Le::from_f32(0.5);
        x.scales = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0];
        x.qs = [0x11; QK_K / 2];
        let y = BlockQ8K { d: 2f32.powi(-24), qs: [1; QK_K], bsums: [16; QK_K / 16], ..Default::default() };
        assert_eq!(dot_q4_k_gemv(&[x], &[y]), 2f32.powi(-18));
        assert_eq!(dot_q4_k_gemm(&[x], &[y]), 2f32.powi(-18));
    }
}
