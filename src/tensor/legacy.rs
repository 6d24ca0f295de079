//! The 32-element formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: dequantization and scalar dots.
//!
//! Each dot sums in the order of ggml's AVX2 kernels (what llama.cpp runs on x86, and what
//! the goldens come from): per block, eight exact integer sums of four consecutive products,
//! each fused-multiply-added with the block's scale into its own f32 lane; the lanes are
//! reduced pairwise at the end. Matching the order makes our logits bit-identical to
//! llama.cpp's on short prompts instead of 1e-7 apart (which random-weight models amplify).

use super::float::fma;
use std::mem::size_of;

use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK, whole_blocks};
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::format::ROW_GROUP;
use super::format::{QuantFormat, WeightType};

// `*_best`: the SIMD kernel where the target has one (wasm SIMD128, x86-64 AVX2), else the
// scalar one below.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::simd128::{
    dot_q4_0 as dot_q4_0_best, dot_q4_1 as dot_q4_1_best, dot_q5_0 as dot_q5_0_best,
    dot_q5_1 as dot_q5_1_best, dot_q8_0 as dot_q8_0_best,
};
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
use {
    super::avx2::{
        dot_q4_0 as dot_q4_0_best, dot_q4_1 as dot_q4_1_best, dot_q5_0 as dot_q5_0_best,
        dot_q8_0 as dot_q8_0_best,
    },
    dot_q5_1 as dot_q5_1_best,
};
#[cfg(not(any(
    all(target_arch = "wasm32", target_feature = "simd128"),
    all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")
)))]
use {
    dot_q4_0 as dot_q4_0_best, dot_q4_1 as dot_q4_1_best, dot_q5_0 as dot_q5_0_best,
    dot_q5_1 as dot_q5_1_best, dot_q8_0 as dot_q8_0_best,
};

const HALF: usize = QK / 2;

/// The eight per-lane float accumulators of one dot product.
#[derive(Default)]
struct Lanes([f32; 8]);

impl Lanes {
    /// Adds `scale × (Σ x·y over elements 4k..4k+4)` to lane `k` (`x` in element order).
    #[inline(always)]
    fn add_block(&mut self, scale: f32, x: &[i8; QK], y: &[i8; QK]) {
        let mut sums = [0i32; 8];
        for (k, sum) in sums.iter_mut().enumerate() {
            for e in 4 * k..4 * k + 4 {
                *sum += i32::from(x[e]) * i32::from(y[e]);
            }
        }
        for (lane, sum) in self.0.iter_mut().zip(sums) {
            *lane = fma(scale, sum as f32, *lane);
        }
    }

    #[inline(always)]
    fn sum(&self) -> f32 {
        hsum8(&self.0)
    }
}

/// ggml's `hsum_float_8`: high half onto low half, then pairwise.
#[inline(always)]
pub(super) fn hsum8(l: &[f32; 8]) -> f32 {
    let r = [l[0] + l[4], l[1] + l[5], l[2] + l[6], l[3] + l[7]];
    (r[0] + r[2]) + (r[1] + r[3])
}

/// The 32 quants of a 4-bit block in element order (low nibbles, then high), minus `offset`.
#[inline(always)]
#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(test)), allow(dead_code))] // the AVX2 twin runs instead
fn unpack_nibbles(qs: &[u8; HALF], offset: i8) -> [i8; QK] {
    let mut x = [0i8; QK];
    let (low, high) = x.split_at_mut(HALF);
    for ((&q, l), h) in qs.iter().zip(low).zip(high) {
        *l = (q & 0x0F) as i8 - offset;
        *h = (q >> 4) as i8 - offset;
    }
    x
}

/// The 32 quants of a 5-bit block in element order, minus `offset`.
#[inline(always)]
fn unpack_q5(qs: &[u8; HALF], qh: [u8; 4], offset: i8) -> [i8; QK] {
    let qh = high_bits(qh);
    let mut x = [0i8; QK];
    for (j, &q) in qs.iter().enumerate() {
        let (low, high) = q5_pair(q, qh, j);
        x[j] = low as i8 - offset;
        x[j + HALF] = high as i8 - offset;
    }
    x
}

/// The 5th bits of a Q5 block: bit `j` of `qh` belongs to element `j`.
#[inline(always)]
fn high_bits(qh: [u8; 4]) -> u32 {
    u32::from_le_bytes(qh)
}

/// 5-bit quant of element `j` (< 16) and of element `j + 16`, before any offset.
#[inline(always)]
fn q5_pair(qs: u8, qh: u32, j: usize) -> (i32, i32) {
    let low = i32::from(qs & 0x0F) | (((qh >> j) & 1) << 4) as i32;
    let high = i32::from(qs >> 4) | (((qh >> (j + HALF)) & 1) << 4) as i32;
    (low, high)
}

impl QuantFormat for BlockQ4_0 {
    const TYPE: WeightType = WeightType::Q4_0;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = size_of::<Self>();
    type Activation = BlockQ8_0;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK)) {
            let d = block.d.to_f32();
            let (y_low, y_high) = y.split_at_mut(HALF);
            for ((&q, low), high) in block.qs.iter().zip(y_low).zip(y_high) {
                *low = (i32::from(q & 0x0F) - 8) as f32 * d;
                *high = (i32::from(q >> 4) - 8) as f32 * d;
            }
        }
    }

    fn vec_dot(src: &[u8], activations: &[BlockQ8_0]) -> f32 {
        dot_q4_0_best(whole_blocks(src), activations)
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn vec_dot_group(src: &[u8], rows: [&[BlockQ8_0]; ROW_GROUP]) -> [f32; ROW_GROUP] {
        super::simd128::dot_q4_0_group(whole_blocks(src), rows)
    }
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(test)), allow(dead_code))] // the AVX2 twin runs instead
pub(super) fn dot_q4_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut lanes = Lanes::default();
    for (xb, yb) in x.iter().zip(y) {
        lanes.add_block(xb.d.to_f32() * yb.d.to_f32(), &unpack_nibbles(&xb.qs, 8), &yb.qs);
    }
    lanes.sum()
}

impl QuantFormat for BlockQ4_1 {
    const TYPE: WeightType = WeightType::Q4_1;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = size_of::<Self>();
    type Activation = BlockQ8_1;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK)) {
            let (d, m) = (block.d.to_f32(), block.m.to_f32());
            let (y_low, y_high) = y.split_at_mut(HALF);
            for ((&q, low), high) in block.qs.iter().zip(y_low).zip(y_high) {
                *low = f32::from(q & 0x0F) * d + m;
                *high = f32::from(q >> 4) * d + m;
            }
        }
    }

    fn vec_dot(src: &[u8], activations: &[BlockQ8_1]) -> f32 {
        dot_q4_1_best(whole_blocks(src), activations)
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn vec_dot_group(src: &[u8], rows: [&[BlockQ8_1]; ROW_GROUP]) -> [f32; ROW_GROUP] {
        super::simd128::dot_q4_1_group(whole_blocks(src), rows)
    }
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(test)), allow(dead_code))] // the AVX2 twin runs instead
pub(super) fn dot_q4_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let (mut lanes, mut offsets) = (Lanes::default(), 0.0f32);
    for (xb, yb) in x.iter().zip(y) {
        // The offset m times the activation sum (stored as s = d * sum(q)) covers the min.
        offsets = fma(xb.m.to_f32(), yb.s.to_f32(), offsets);
        lanes.add_block(xb.d.to_f32() * yb.d.to_f32(), &unpack_nibbles(&xb.qs, 0), &yb.qs);
    }
    lanes.sum() + offsets
}

impl QuantFormat for BlockQ5_0 {
    const TYPE: WeightType = WeightType::Q5_0;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = size_of::<Self>();
    type Activation = BlockQ8_0;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK)) {
            let d = block.d.to_f32();
            let qh = high_bits(block.qh);
            let (y_low, y_high) = y.split_at_mut(HALF);
            for (j, ((&q, low), high)) in block.qs.iter().zip(y_low).zip(y_high).enumerate() {
                let (q_low, q_high) = q5_pair(q, qh, j);
                *low = (q_low - 16) as f32 * d;
                *high = (q_high - 16) as f32 * d;
            }
        }
    }

    fn vec_dot(src: &[u8], activations: &[BlockQ8_0]) -> f32 {
        dot_q5_0_best(whole_blocks(src), activations)
    }
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(test)), allow(dead_code))] // the AVX2 twin runs instead
pub(super) fn dot_q5_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let mut lanes = Lanes::default();
    for (xb, yb) in x.iter().zip(y) {
        lanes.add_block(xb.d.to_f32() * yb.d.to_f32(), &unpack_q5(&xb.qs, xb.qh, 16), &yb.qs);
    }
    lanes.sum()
}

impl QuantFormat for BlockQ5_1 {
    const TYPE: WeightType = WeightType::Q5_1;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = size_of::<Self>();
    type Activation = BlockQ8_1;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK)) {
            let (d, m) = (block.d.to_f32(), block.m.to_f32());
            let qh = high_bits(block.qh);
            let (y_low, y_high) = y.split_at_mut(HALF);
            for (j, ((&q, low), high)) in block.qs.iter().zip(y_low).zip(y_high).enumerate() {
                let (q_low, q_high) = q5_pair(q, qh, j);
                *low = q_low as f32 * d + m;
                *high = q_high as f32 * d + m;
            }
        }
    }

    fn vec_dot(src: &[u8], activations: &[BlockQ8_1]) -> f32 {
        dot_q5_1_best(whole_blocks(src), activations)
    }
}

pub(super) fn dot_q5_1(x: &[BlockQ5_1], y: &[BlockQ8_1]) -> f32 {
    let (mut lanes, mut offsets) = (Lanes::default(), 0.0f32);
    for (xb, yb) in x.iter().zip(y) {
        offsets = fma(xb.m.to_f32(), yb.s.to_f32(), offsets);
        lanes.add_block(xb.d.to_f32() * yb.d.to_f32(), &unpack_q5(&xb.qs, xb.qh, 0), &yb.qs);
    }
    lanes.sum() + offsets
}

impl QuantFormat for BlockQ8_0 {
    const TYPE: WeightType = WeightType::Q8_0;
    const BLOCK_LEN: usize = QK;
    const BLOCK_BYTES: usize = size_of::<Self>();
    type Activation = BlockQ8_0;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK)) {
            let d = block.d.to_f32();
            for (out, &q) in y.iter_mut().zip(&block.qs) {
                *out = f32::from(q) * d;
            }
        }
    }

    fn vec_dot(src: &[u8], activations: &[BlockQ8_0]) -> f32 {
        dot_q8_0_best(whole_blocks(src), activations)
    }

    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn vec_dot_group(src: &[u8], rows: [&[BlockQ8_0]; ROW_GROUP]) -> [f32; ROW_GROUP] {
        super::simd128::dot_q8_0_group(whole_blocks(src), rows)
    }
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(test)), allow(dead_code))] // the AVX2 twin runs instead
pub(super) fn dot_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut lanes = Lanes::default();
    for (xb, yb) in x.iter().zip(y) {
        lanes.add_block(xb.d.to_f32() * yb.d.to_f32(), &xb.qs, &yb.qs);
    }
    lanes.sum()
}
