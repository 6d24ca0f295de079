//! The 32-element formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: dequantization and scalar dots.
//!
//! Each dot sums in the order of ggml's AVX2 kernels (what llama.cpp runs on x86, and what
//! the goldens come from): per block, eight exact integer sums of four consecutive products,
//! each fused-multiply-added with the block's scale into its own f32 lane; the lanes are
//! reduced pairwise at the end. Matching the order makes our logits bit-identical to
//! llama.cpp's on short prompts instead of 1e-7 apart (which random-weight models amplify).
//!
//! Natively, Q4_0 matrices held repacked (a multiple of 8 rows, see `WeightLayout`) follow
//! llama.cpp's repacked x86 kernels instead (`dot_q4_0_repacked`).

use super::float::fma;
use std::mem::size_of;

use super::activations::Q8_0Activation;
use super::blocks::{
    BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, F16Le, QK, whole_blocks,
};
use super::format::{QuantFormat, WeightType};

const HALF: usize = QK / 2;

/// What a Q8_0 activation block carries for these kernels (and the AVX2 ones) besides its
/// scale and quants: nothing. (The SIMD128 kernels have theirs.)
#[cfg_attr(target_feature = "simd128", allow(dead_code))]
pub(super) type Q8_0Extra = ();

/// The [`Q8_0Extra`] of a block.
#[cfg_attr(target_feature = "simd128", allow(dead_code))]
#[inline(always)]
pub(super) fn q8_0_extra(_d: F16Le, _qs: &[i8; QK]) -> Q8_0Extra {}

/// Reads a Q8_0 tensor's quants of −128 as −127, in place (its scales untouched). ggml's
/// quantizer never writes −128 (its quants are `round(x / (amax / 127))`), so only a hostile
/// file has one; clamping it when the file loads gives every kernel the same values. Relaxed
/// SIMD's decode dot moves the activation's sign onto the weight, which −128 cannot take, and
/// its prefill dot takes the weight's magnitude as a 7-bit operand, which 128 is not.
pub fn clamp_q8_0_quants(tensor: &mut [u8]) {
    for block in tensor.chunks_exact_mut(size_of::<BlockQ8_0>()) {
        for q in &mut block[size_of::<F16Le>()..] {
            *q = (*q as i8).max(-127) as u8;
        }
    }
}

/// The eight per-lane float accumulators of one dot product.
#[derive(Default)]
pub(super) struct Lanes([f32; 8]);

impl Lanes {
    /// Adds `scale × (Σ x·y over elements 4k..4k+4)` to lane `k` (`x` in element order).
    #[inline(always)]
    pub(super) fn add_block(&mut self, scale: f32, x: &[i8; QK], y: &[i8; QK]) {
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
    pub(super) fn sum(&self) -> f32 {
        hsum8(&self.0)
    }

    /// Lane-by-lane sum with another set (`_mm256_add_ps`).
    pub(super) fn plus(&self, other: &Lanes) -> Lanes {
        Lanes(std::array::from_fn(|k| self.0[k] + other.0[k]))
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
    type Block = Self;
    type Activation = Q8_0Activation;

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
}

/// llama.cpp's repacked Q4_0 kernels (`ggml_gemm_q4_0_8x8_q8_0` and `ggml_gemv_q4_0_8x8_q8_0`,
/// x86 AVX2), which agree on the order: per 32-element block, the exact integer `Σ (q - 8)·a`
/// over the whole block, converted to f32 and fused-multiply-added into one f32 accumulator
/// with `d·d_y` (an f32 product of the two f16 scales). No lanes, no final reduction.
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_q4_0_repacked(x: &[BlockQ4_0], y: &[Q8_0Activation]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let (a_low, a_high) = yb.qs.split_at(HALF);
        let mut exact = 0i32;
        for ((&q, &al), &ah) in xb.qs.iter().zip(a_low).zip(a_high) {
            exact += (i32::from(q & 0x0F) - 8) * i32::from(al) + (i32::from(q >> 4) - 8) * i32::from(ah);
        }
        sum = fma(exact as f32, xb.d.to_f32() * yb.d.to_f32(), sum);
    }
    sum
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(test)), allow(dead_code))] // the AVX2 twin runs instead
pub(super) fn dot_q4_0(x: &[BlockQ4_0], y: &[Q8_0Activation]) -> f32 {
    let mut lanes = Lanes::default();
    for (xb, yb) in x.iter().zip(y) {
        lanes.add_block(xb.d.to_f32() * yb.d.to_f32(), &unpack_nibbles(&xb.qs, 8), &yb.qs);
    }
    lanes.sum()
}

impl QuantFormat for BlockQ4_1 {
    const TYPE: WeightType = WeightType::Q4_1;
    type Block = Self;
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
    type Block = Self;
    type Activation = Q8_0Activation;

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
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(test)), allow(dead_code))] // the AVX2 twin runs instead
pub(super) fn dot_q5_0(x: &[BlockQ5_0], y: &[Q8_0Activation]) -> f32 {
    let mut lanes = Lanes::default();
    for (xb, yb) in x.iter().zip(y) {
        lanes.add_block(xb.d.to_f32() * yb.d.to_f32(), &unpack_q5(&xb.qs, xb.qh, 16), &yb.qs);
    }
    lanes.sum()
}

impl QuantFormat for BlockQ5_1 {
    const TYPE: WeightType = WeightType::Q5_1;
    type Block = Self;
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
    type Block = Self;
    type Activation = Q8_0Activation;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        decode_q8_0(whole_blocks(src), dst)
    }
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(test)), allow(dead_code))] // the AVX2 twin runs instead
/// Q8_0 blocks decoded, `q · d` (ggml's `dequantize_row_q8_0`): a weight row's, or a row of a
/// Q8_0 KV cache.
pub(super) fn decode_q8_0(blocks: &[BlockQ8_0], dst: &mut [f32]) {
    for (block, y) in blocks.iter().zip(dst.chunks_exact_mut(QK)) {
        let d = block.d.to_f32();
        for (out, &q) in y.iter_mut().zip(&block.qs) {
            *out = f32::from(q) * d;
        }
    }
}

pub(super) fn dot_q8_0(x: &[BlockQ8_0], y: &[Q8_0Activation]) -> f32 {
    let mut lanes = Lanes::default();
    for (xb, yb) in x.iter().zip(y) {
        lanes.add_block(xb.d.to_f32() * yb.d.to_f32(), &xb.qs, &yb.qs);
    }
    lanes.sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_support::Rng;
    use crate::tensor::{ActivationType, F16Le, QuantizedActivations, cast_blocks};

    /// A random Q4_0 row of `blocks` blocks (as bytes) and Q8_0 activations of the same length.
    fn q4_0_case(blocks: usize, rng: &mut Rng) -> (Vec<u8>, Vec<Q8_0Activation>) {
        let bytes = rng.blocks(blocks, size_of::<BlockQ4_0>(), &[0]);
        let acts: Vec<f32> = (0..blocks * QK).map(|_| rng.normal() * 2.0).collect();
        let q = QuantizedActivations::quantize(ActivationType::Q8_0, &acts, 1, blocks * QK).unwrap();
        (bytes, q.row::<Q8_0Activation>(0).unwrap().to_vec())
    }

    /// An element-by-element statement of the repacked kernels' arithmetic: per block, the exact
    /// integer dot of the dequantized nibbles (element `e < 16` is the low nibble of byte `e`,
    /// `e ≥ 16` the high nibble of byte `e - 16`, both minus 8) with the activation quants,
    /// fused into one f32 accumulator with `d·d_y`.
    fn repacked_reference(x: &[BlockQ4_0], y: &[Q8_0Activation]) -> f32 {
        let mut sum = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            let mut exact = 0i32;
            for e in 0..QK {
                let byte = xb.qs[e % HALF];
                let q = if e < HALF { byte & 0x0F } else { byte >> 4 };
                exact += (i32::from(q) - 8) * i32::from(yb.qs[e]);
            }
            sum = (exact as f32).mul_add(xb.d.to_f32() * yb.d.to_f32(), sum);
        }
        sum
    }

    #[cfg(not(target_family = "wasm"))]
    #[test]
    fn repacked_q4_0_kernels_follow_llama_cpp_order() {
        use crate::tensor::Dot;
        use crate::tensor::llama_order::LlamaOrder;
        let mut rng = Rng::new(43);
        let mut differs = 0;
        for blocks in [1, 2, 3, 8, 17] {
            for _ in 0..200 {
                let (src, y) = q4_0_case(blocks, &mut rng);
                let x = cast_blocks::<BlockQ4_0>(&src).unwrap();
                let gemv = <BlockQ4_0 as LlamaOrder>::vec_dot_gemv(&src, &y);
                let gemm = <BlockQ4_0 as LlamaOrder>::vec_dot_gemm(&src, &y);
                let expected = repacked_reference(x, &y);
                assert_eq!(gemv.to_bits(), expected.to_bits(), "GEMV, {blocks} blocks");
                assert_eq!(gemm.to_bits(), expected.to_bits(), "GEMM, {blocks} blocks");
                // The same value up to rounding as the plain (8-lane) order.
                let plain = <BlockQ4_0 as Dot>::vec_dot(&src, &y);
                assert!((gemv - plain).abs() / plain.abs().max(1e-2) < 1e-4, "{gemv} vs {plain}");
                differs += usize::from(gemv.to_bits() != plain.to_bits());
            }
        }
        // The orders are distinct, so the test above pins the repacked one.
        assert!(differs > 0);
    }

    /// A hand-computed pair of blocks: nibbles 9 (q = 1) against activation quants 1 give an
    /// exact block dot of 32; `d = 1` and `d_y = 2⁻¹⁴` (exact in f16), so each block adds
    /// 32·2⁻¹⁴ = 2⁻⁹ and two blocks give 2⁻⁸. A second block of `d = -1` cancels it exactly.
    #[test]
    fn repacked_q4_0_hand_computed_blocks() {
        let block = |d: f32| BlockQ4_0 { d: F16Le::from_f32(d), qs: [0x99; HALF] };
        let a = Q8_0Activation::new(F16Le::from_f32(2f32.powi(-14)), [1; QK]);
        assert_eq!(dot_q4_0_repacked(&[block(1.0), block(1.0)], &[a, a]), 2f32.powi(-8));
        assert_eq!(dot_q4_0_repacked(&[block(1.0), block(-1.0)], &[a, a]), 0.0);
    }
}
