//! The 32-element formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: dequantization and scalar dots.
//!
//! Each dot follows ggml's `ggml_vec_dot_*_generic`: exact integer sums over the block (first
//! and second half separately), then one float multiply-add per block in ggml's operand order.

use std::mem::size_of;

use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK, whole_blocks};
use super::format::{QuantFormat, WeightType};

// `*_best`: the SIMD128 kernel where the target has it, else the scalar one below.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::simd128::{
    dot_q4_0 as dot_q4_0_best, dot_q4_1 as dot_q4_1_best, dot_q5_0 as dot_q5_0_best,
    dot_q5_1 as dot_q5_1_best, dot_q8_0 as dot_q8_0_best,
};
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
use {
    dot_q4_0 as dot_q4_0_best, dot_q4_1 as dot_q4_1_best, dot_q5_0 as dot_q5_0_best,
    dot_q5_1 as dot_q5_1_best, dot_q8_0 as dot_q8_0_best,
};

const HALF: usize = QK / 2;

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
}

pub(super) fn dot_q4_0(x: &[BlockQ4_0], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let (y_low, y_high) = yb.qs.split_at(HALF);
        let (mut sum_low, mut sum_high) = (0i32, 0i32);
        for ((&q, &a), &b) in xb.qs.iter().zip(y_low).zip(y_high) {
            sum_low += (i32::from(q & 0x0F) - 8) * i32::from(a);
            sum_high += (i32::from(q >> 4) - 8) * i32::from(b);
        }
        sum += (sum_low + sum_high) as f32 * xb.d.to_f32() * yb.d.to_f32();
    }
    sum
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
}

pub(super) fn dot_q4_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let (y_low, y_high) = yb.qs.split_at(HALF);
        let (mut sum_low, mut sum_high) = (0i32, 0i32);
        for ((&q, &a), &b) in xb.qs.iter().zip(y_low).zip(y_high) {
            sum_low += i32::from(q & 0x0F) * i32::from(a);
            sum_high += i32::from(q >> 4) * i32::from(b);
        }
        // The offset m times the activation sum (stored as s = d * sum(q)) covers the min.
        sum += (xb.d.to_f32() * yb.d.to_f32()) * (sum_low + sum_high) as f32 + xb.m.to_f32() * yb.s.to_f32();
    }
    sum
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

pub(super) fn dot_q5_0(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let qh = high_bits(xb.qh);
        let (y_low, y_high) = yb.qs.split_at(HALF);
        let (mut sum_low, mut sum_high) = (0i32, 0i32);
        for (j, ((&q, &a), &b)) in xb.qs.iter().zip(y_low).zip(y_high).enumerate() {
            let (q_low, q_high) = q5_pair(q, qh, j);
            sum_low += (q_low - 16) * i32::from(a);
            sum_high += (q_high - 16) * i32::from(b);
        }
        sum += (xb.d.to_f32() * yb.d.to_f32()) * (sum_low + sum_high) as f32;
    }
    sum
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
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let qh = high_bits(xb.qh);
        let (y_low, y_high) = yb.qs.split_at(HALF);
        let (mut sum_low, mut sum_high) = (0i32, 0i32);
        for (j, ((&q, &a), &b)) in xb.qs.iter().zip(y_low).zip(y_high).enumerate() {
            let (q_low, q_high) = q5_pair(q, qh, j);
            sum_low += q_low * i32::from(a);
            sum_high += q_high * i32::from(b);
        }
        sum += (xb.d.to_f32() * yb.d.to_f32()) * (sum_low + sum_high) as f32 + xb.m.to_f32() * yb.s.to_f32();
    }
    sum
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
}

pub(super) fn dot_q8_0(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let sum_int: i32 = xb.qs.iter().zip(&yb.qs).map(|(&a, &b)| i32::from(a) * i32::from(b)).sum();
        sum += sum_int as f32 * (xb.d.to_f32() * yb.d.to_f32());
    }
    sum
}
