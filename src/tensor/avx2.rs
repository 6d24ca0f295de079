//! x86-64 AVX2 kernels for native builds (the CLI, tests, benchmarks): the 32-element formats,
//! instruction for instruction the sums of ggml's AVX2 `ggml_vec_dot_*` so that results are
//! bit-identical to both ggml and our scalar reference (`legacy.rs` sums in the same order;
//! the tests compare them exactly).

use core::arch::x86_64::*;

use super::activations::Q8_0Activation;
use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ8_0, BlockQ8_1};

/// Eight lanes of exact integer sums of four byte products, as floats (`ax` unsigned).
#[inline(always)]
unsafe fn mul_sum_us8_pairs_float(ax: __m256i, sy: __m256i) -> __m256 {
    unsafe {
        let dot = _mm256_maddubs_epi16(ax, sy);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), dot))
    }
}

/// Signed × signed bytes through the unsigned × signed instruction.
#[inline(always)]
unsafe fn mul_sum_i8_pairs_float(x: __m256i, y: __m256i) -> __m256 {
    unsafe { mul_sum_us8_pairs_float(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)) }
}

/// 16 bytes of nibbles → 32 bytes: low nibbles first, then high nibbles.
#[inline(always)]
unsafe fn bytes_from_nibbles_32(qs: &[u8; 16]) -> __m256i {
    unsafe {
        let tmp = _mm_loadu_si128(qs.as_ptr().cast());
        let bytes = _mm256_insertf128_si256(_mm256_castsi128_si256(tmp), _mm_srli_epi16(tmp, 4), 1);
        _mm256_and_si256(_mm256_set1_epi8(0x0F), bytes)
    }
}

/// 32 bits → 32 bytes of 0xFF (bit set) or 0x00.
#[inline(always)]
unsafe fn bytes_from_bits_32(qh: [u8; 4]) -> __m256i {
    unsafe {
        let shuffle = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
        let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(i32::from_le_bytes(qh)), shuffle);
        let bits = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
        _mm256_cmpeq_epi8(bits, _mm256_set1_epi64x(-1))
    }
}

#[inline(always)]
unsafe fn hsum_float_8(x: __m256) -> f32 {
    unsafe {
        let mut res = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
        res = _mm_add_ps(res, _mm_movehl_ps(res, res));
        res = _mm_add_ss(res, _mm_movehdup_ps(res));
        _mm_cvtss_f32(res)
    }
}

#[inline(always)]
unsafe fn load(qs: &[i8; 32]) -> __m256i {
    unsafe { _mm256_loadu_si256(qs.as_ptr().cast()) }
}

pub fn dot_q8_0(x: &[BlockQ8_0], y: &[Q8_0Activation]) -> f32 {
    // SAFETY: this module is compiled only when the target has AVX2 and FMA.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = _mm256_set1_ps(xb.d.to_f32() * yb.d.to_f32());
            acc = _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(load(&xb.qs), load(&yb.qs)), acc);
        }
        hsum_float_8(acc)
    }
}

pub fn dot_q4_0(x: &[BlockQ4_0], y: &[Q8_0Activation]) -> f32 {
    // SAFETY: as above.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = _mm256_set1_ps(xb.d.to_f32() * yb.d.to_f32());
            let qx = _mm256_sub_epi8(bytes_from_nibbles_32(&xb.qs), _mm256_set1_epi8(8));
            acc = _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(qx, load(&yb.qs)), acc);
        }
        hsum_float_8(acc)
    }
}

pub fn dot_q4_1(x: &[BlockQ4_1], y: &[BlockQ8_1]) -> f32 {
    // SAFETY: as above.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        let mut offsets = 0.0f32;
        for (xb, yb) in x.iter().zip(y) {
            offsets = xb.m.to_f32().mul_add(yb.s.to_f32(), offsets);
            let d = _mm256_set1_ps(xb.d.to_f32() * yb.d.to_f32());
            let xy = mul_sum_us8_pairs_float(bytes_from_nibbles_32(&xb.qs), load(&yb.qs));
            acc = _mm256_fmadd_ps(d, xy, acc);
        }
        hsum_float_8(acc) + offsets
    }
}

pub fn dot_q5_0(x: &[BlockQ5_0], y: &[Q8_0Activation]) -> f32 {
    // SAFETY: as above.
    unsafe {
        let mut acc = _mm256_setzero_ps();
        for (xb, yb) in x.iter().zip(y) {
            let d = _mm256_set1_ps(xb.d.to_f32() * yb.d.to_f32());
            let high = _mm256_andnot_si256(bytes_from_bits_32(xb.qh), _mm256_set1_epi8(0xF0u8 as i8));
            let qx = _mm256_or_si256(bytes_from_nibbles_32(&xb.qs), high);
            acc = _mm256_fmadd_ps(d, mul_sum_i8_pairs_float(qx, load(&yb.qs)), acc);
        }
        hsum_float_8(acc)
    }
}

/// Four rows of `a` times the rows `w0` and `w1` (all at least `k` long, `k` a multiple of 8):
/// each of the eight dots' eight lanes, accumulated in order with a multiply and then an add
/// (llamafile's F16 GEMM, whose fused multiply-adds round the same way here: the products of
/// two halves are exact in f32). [`super::float::lanes_4x2`] is its scalar reference.
pub(super) fn lanes_4x2(w0: &[f32], w1: &[f32], a: [&[f32]; 4], k: usize) -> [[[f32; 8]; 2]; 4] {
    assert!(k.is_multiple_of(8) && w0.len() >= k && w1.len() >= k && a.iter().all(|row| row.len() >= k));
    let mut out = [[[0.0f32; 8]; 2]; 4];
    // SAFETY: every load reads 8 floats at `c < k` from a slice at least `k` long (asserted),
    // and the build has AVX (this module is compiled only with AVX2).
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 2]; 4];
        for c in (0..k).step_by(8) {
            let x0 = _mm256_loadu_ps(w0.as_ptr().add(c));
            let x1 = _mm256_loadu_ps(w1.as_ptr().add(c));
            for (sums, row) in acc.iter_mut().zip(&a) {
                let y = _mm256_loadu_ps(row.as_ptr().add(c));
                sums[0] = _mm256_add_ps(sums[0], _mm256_mul_ps(x0, y));
                sums[1] = _mm256_add_ps(sums[1], _mm256_mul_ps(x1, y));
            }
        }
        for (lanes, sums) in out.iter_mut().zip(acc) {
            _mm256_storeu_ps(lanes[0].as_mut_ptr(), sums[0]);
            _mm256_storeu_ps(lanes[1].as_mut_ptr(), sums[1]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::legacy;
    use crate::tensor::test_support::Rng;
    use crate::tensor::{ActivationType, QuantizedActivations, cast_blocks};

    fn case<X: Copy + crate::tensor::PlainBytes>(
        block_bytes: usize,
        scale_offsets: &[usize],
        rng: &mut Rng,
    ) -> Vec<X> {
        let bytes = rng.blocks(8, block_bytes, scale_offsets);
        cast_blocks::<X>(&bytes).unwrap().to_vec()
    }

    #[test]
    fn avx2_dots_equal_the_scalar_reference_exactly() {
        let mut rng = Rng::new(17);
        for _ in 0..200 {
            let acts: Vec<f32> = (0..256).map(|_| rng.normal() * 3.0).collect();
            let q8_0 = QuantizedActivations::quantize(ActivationType::Q8_0, &acts, 1, 256).unwrap();
            let q8_1 = QuantizedActivations::quantize(ActivationType::Q8_1, &acts, 1, 256).unwrap();
            let (y0, y1) = (q8_0.row::<Q8_0Activation>(0).unwrap(), q8_1.row::<BlockQ8_1>(0).unwrap());
            let x: Vec<BlockQ8_0> = case(34, &[0], &mut rng);
            assert_eq!(dot_q8_0(&x, y0).to_bits(), legacy::dot_q8_0(&x, y0).to_bits());
            let x: Vec<BlockQ4_0> = case(18, &[0], &mut rng);
            assert_eq!(dot_q4_0(&x, y0).to_bits(), legacy::dot_q4_0(&x, y0).to_bits());
            let x: Vec<BlockQ5_0> = case(22, &[0], &mut rng);
            assert_eq!(dot_q5_0(&x, y0).to_bits(), legacy::dot_q5_0(&x, y0).to_bits());
            let x: Vec<BlockQ4_1> = case(20, &[0, 2], &mut rng);
            assert_eq!(dot_q4_1(&x, y1).to_bits(), legacy::dot_q4_1(&x, y1).to_bits());
        }
    }
}
