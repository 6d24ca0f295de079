//! F32, F16 and BF16 rows. The scalar dots follow ggml's non-SIMD `ggml_vec_dot_f32/f16/bf16`:
//! each product is formed in f32 (exact for two halves) and summed in f64.

use half::{bf16, f16};

use super::activations::{BF16Activation, F16Activation};
use super::format::{QuantFormat, WeightType};

use super::kernels::active;

/// `a · b + c` rounded once, as the FMA instructions in ggml's GCC build compute it. Native
/// targets use the hardware instruction. Wasm has none and libm's software `fmaf` is slow, so
/// there the f64 route is taken: the f32 product is exact in f64 and the sum rounds once in
/// f64, so the result is the fused one except for rare double-rounding ties.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    if cfg!(target_family = "wasm") {
        (f64::from(a) * f64::from(b) + f64::from(c)) as f32
    } else {
        a.mul_add(b, c)
    }
}

/// `f` of every f16 value, indexed by its bits: for functions cheaper to look up than to
/// compute where the input is (or is rounded to) a half, as ggml's CPU tables are.
pub fn table_over_f16(f: impl Fn(f16) -> f32) -> Box<[f32; 65536]> {
    let values: Vec<f32> = (0..=u16::MAX).map(|bits| f(f16::from_bits(bits))).collect();
    values.into_boxed_slice().try_into().expect("65536 entries")
}

/// The index of the first infinity or NaN (an all-ones exponent) among little-endian halves, if
/// any. The SIMD128 F16 kernels widen halves without looking for them, so a model's F16 tensors
/// are checked once, when it loads: 3.4 GB of them, so the scan must run near memory speed.
pub fn first_non_finite_f16(bytes: &[u8]) -> Option<usize> {
    const CHUNK_HALVES: usize = 4096;
    for (c, chunk) in bytes.chunks(2 * CHUNK_HALVES).enumerate() {
        if active::any_non_finite_f16(chunk) {
            let special = |bits: u16| bits & 0x7C00 == 0x7C00;
            return u16s(chunk).position(special).map(|i| c * CHUNK_HALVES + i);
        }
    }
    None
}

/// The wrapping sum of `bytes` read as little-endian u32 words (a last partial word padded
/// with zeros). No model needs it: it is the cheapest pass that reads every byte, so timing it
/// on a buffer larger than the caches measures the read bandwidth a kernel could reach at best
/// (the benchmark's memory probe).
pub fn read_checksum(bytes: &[u8]) -> u32 {
    active::sum_words(bytes)
}

/// [`read_checksum`], a word at a time.
pub(super) fn sum_words(bytes: &[u8]) -> u32 {
    let words = bytes.chunks_exact(4);
    let tail = words.remainder();
    let mut last = [0u8; 4];
    last[..tail.len()].copy_from_slice(tail);
    words
        .map(|word| u32::from_le_bytes(word.try_into().expect("4 bytes")))
        .fold(u32::from_le_bytes(last), u32::wrapping_add)
}

/// Whether whole halves in `bytes` include an infinity or NaN, four halves per u64: a half's
/// exponent bits plus 0x0400 carry into its top bit only when they are all ones, and never
/// into the next half.
pub(super) fn any_non_finite_f16(bytes: &[u8]) -> bool {
    const EXPONENTS: u64 = 0x7C00_7C00_7C00_7C00;
    const ONE_PAST: u64 = 0x0400_0400_0400_0400;
    const TOPS: u64 = 0x8000_8000_8000_8000;
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    let found = words.fold(0, |found, word| {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        found | ((word & EXPONENTS) + ONE_PAST)
    });
    found & TOPS != 0 || u16s(tail).any(|bits| bits & 0x7C00 == 0x7C00)
}

/// Little-endian f32s of an unaligned byte row.
#[inline(always)]
fn f32s(src: &[u8]) -> impl Iterator<Item = f32> + '_ {
    src.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

/// Little-endian halves of an unaligned byte row, as raw bits.
#[inline(always)]
fn u16s(src: &[u8]) -> impl Iterator<Item = u16> + '_ {
    src.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]))
}

impl QuantFormat for f32 {
    const TYPE: WeightType = WeightType::F32;
    type Block = u8;
    type Activation = f32;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (out, value) in dst.iter_mut().zip(f32s(src)) {
            *out = value;
        }
    }
}

pub(super) fn dot_f32(src: &[u8], activations: &[f32]) -> f32 {
    f32s(src).zip(activations).fold(0.0f64, |sum, (w, &a)| sum + f64::from(w * a)) as f32
}

/// The eight lanes of a 256-bit register summed as ggml and llamafile reduce one: the halves
/// added (`lane i + lane i+4`), then `(0 + 2) + (1 + 3)`.
#[inline(always)]
pub fn sum_lanes(lanes: [f32; 8]) -> f32 {
    let r: [f32; 4] = std::array::from_fn(|i| lanes[i] + lanes[i + 4]);
    (r[0] + r[2]) + (r[1] + r[3])
}

/// ggml's four AVX2 accumulators of eight lanes (`GGML_F32_ARR`), reduced as
/// `GGML_F32_VEC_REDUCE` does: added 0+2, 1+3, then together, and the lanes summed
/// `(0+4 + 1+5) + (2+6 + 3+7)`.
pub fn reduce_accumulators(sums: [[f32; 8]; 4]) -> f32 {
    let pair: [[f32; 8]; 2] = std::array::from_fn(|j| std::array::from_fn(|i| sums[j][i] + sums[j + 2][i]));
    let all: [f32; 8] = std::array::from_fn(|i| pair[0][i] + pair[1][i]);
    let half: [f32; 4] = std::array::from_fn(|i| all[i] + all[i + 4]);
    (half[0] + half[1]) + (half[2] + half[3])
}

/// Mamba-2's scan of one state row (the scalar reference of [`super::scan_row`]):
/// `s = s·decay + b·x_dt` for each value, returning `Σ s·c` summed as ggml's AVX2 `ssm_scan`
/// does: four accumulators of eight lanes over each 32 values ([`reduce_accumulators`]), then
/// the values past the last 32 one by one. Fused multiply-adds natively, where they give
/// ggml's bits; plain ones in wasm, which has no FMA instruction.
pub(super) fn scan_state_row(s: &mut [f32], b: &[f32], c: &[f32], decay: f32, x_dt: f32) -> f32 {
    use super::kv_rows::mul_add;
    let whole = s.len() / 32 * 32;
    let (s32, rest) = s.split_at_mut(whole);
    let mut sums = [[0.0f32; 8]; 4];
    for ((s, b), c) in s32.chunks_exact_mut(32).zip(b.chunks_exact(32)).zip(c.chunks_exact(32)) {
        for (a, lanes) in sums.iter_mut().enumerate() {
            for (l, lane) in lanes.iter_mut().enumerate() {
                let k = 8 * a + l;
                s[k] = s[k] * decay + b[k] * x_dt;
                *lane = mul_add(s[k], c[k], *lane);
            }
        }
    }
    let mut sum = reduce_accumulators(sums);
    for ((s, &b), &c) in rest.iter_mut().zip(&b[whole..]).zip(&c[whole..]) {
        *s = mul_add(*s, decay, b * x_dt);
        sum = mul_add(*s, c, sum);
    }
    sum
}

/// ggml's `ggml_vec_dot_f32` on an AVX2 host (one activation row): four accumulators of
/// eight lanes take each 32 elements by FMA ([`reduce_accumulators`]); the elements past the
/// last 32 are added one by one.
#[cfg(not(target_family = "wasm"))]
pub(super) fn dot_f32_ggml_order(src: &[u8], activations: &[f32]) -> f32 {
    let n = activations.len() / 32 * 32;
    let mut sums = [[0.0f32; 8]; 4];
    for (i, (w, &a)) in f32s(src).zip(&activations[..n]).enumerate() {
        let lane = &mut sums[i / 8 % 4][i % 8];
        *lane = fma(w, a, *lane);
    }
    let mut sum = reduce_accumulators(sums);
    for (w, &a) in f32s(&src[4 * n..]).zip(&activations[n..]) {
        sum = fma(w, a, sum);
    }
    sum
}

/// llamafile's `tinyBLAS` F32 GEMM on an AVX2 host, which llama.cpp runs for F32 matrices
/// from two activation rows on: one accumulator of eight lanes takes the row by FMA and is
/// reduced by [`sum_lanes`]. (A row whose length is not a multiple of 8 makes llama.cpp fall
/// back to [`dot_f32_ggml_order`].)
#[cfg(not(target_family = "wasm"))]
pub(super) fn dot_f32_sgemm_order(src: &[u8], activations: &[f32]) -> f32 {
    if !activations.len().is_multiple_of(8) {
        return dot_f32_ggml_order(src, activations);
    }
    let mut lanes = [0.0f32; 8];
    for (i, (w, &a)) in f32s(src).zip(activations).enumerate() {
        lanes[i % 8] = fma(w, a, lanes[i % 8]);
    }
    sum_lanes(lanes)
}

/// F16 weights must be finite: the SIMD128 kernels would count an infinity or NaN as a finite
/// number ([`first_non_finite_f16`] finds one; a model's tensors are checked when it loads).
impl QuantFormat for f16 {
    const TYPE: WeightType = WeightType::F16;
    type Block = u8;
    type Activation = F16Activation;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (out, bits) in dst.iter_mut().zip(u16s(src)) {
            *out = f16::from_bits(bits).to_f32();
        }
    }
}

/// `ggml_vec_dot_f16` on an AVX2 host: four accumulators of eight lanes over each 32 values
/// ([`reduce_accumulators`]), the rest added one by one in double. (Two halves' product is exact
/// in f32, so only the order decides the bits.)
pub(super) fn dot_f16(src: &[u8], activations: &[F16Activation]) -> f32 {
    let n = activations.len() / 32 * 32;
    let mut sums = [[0.0f32; 8]; 4];
    for (i, (w, a)) in u16s(src).zip(&activations[..n]).enumerate() {
        sums[i / 8 % 4][i % 8] += f16::from_bits(w).to_f32() * a.value();
    }
    let head = f64::from(reduce_accumulators(sums));
    let tail = u16s(&src[2 * n..]).zip(&activations[n..]);
    tail.fold(head, |sum, (w, a)| sum + f64::from(f16::from_bits(w).to_f32() * a.value())) as f32
}

/// llamafile's `tinyBLAS` F16 GEMM on an AVX2 host with F16C, which llama.cpp runs for F16
/// matrices from two activation rows on (the activations converted to F16 first): as
/// [`dot_f32_sgemm_order`], one accumulator of eight lanes reduced by [`sum_lanes`]; a row
/// whose length is not a multiple of 8 falls back to [`dot_f16`], as llama.cpp's does.
#[cfg(not(target_family = "wasm"))]
pub(super) fn dot_f16_sgemm_order(src: &[u8], activations: &[F16Activation]) -> f32 {
    if !activations.len().is_multiple_of(8) {
        return dot_f16(src, activations);
    }
    let mut lanes = [0.0f32; 8];
    for (i, (w, a)) in u16s(src).zip(activations).enumerate() {
        lanes[i % 8] += f16::from_bits(w).to_f32() * a.value();
    }
    sum_lanes(lanes)
}

impl QuantFormat for bf16 {
    const TYPE: WeightType = WeightType::BF16;
    type Block = u8;
    type Activation = BF16Activation;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (out, bits) in dst.iter_mut().zip(u16s(src)) {
            *out = bf16::from_bits(bits).to_f32();
        }
    }
}

pub(super) fn dot_bf16(src: &[u8], activations: &[BF16Activation]) -> f32 {
    u16s(src).zip(activations).fold(0.0f64, |sum, (w, a)| sum + f64::from(bf16::from_bits(w).to_f32() * a.0))
        as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_checksum_sums_little_endian_words_and_pads_the_last() {
        assert_eq!(read_checksum(&[]), 0);
        assert_eq!(read_checksum(&[1, 0, 0, 0, 2, 1, 0, 0, 3]), 1 + 0x0102 + 3);
        // Wrapping, past u32::MAX.
        assert_eq!(read_checksum(&[0xFF, 0xFF, 0xFF, 0xFF, 2, 0, 0, 0]), 1);
    }

    #[test]
    fn the_first_infinity_or_nan_among_halves_is_found_wherever_it_lies() {
        let finite: Vec<u16> = (0..10_000u16).map(|i| i.wrapping_mul(40_503) & !0x4000).collect();
        let bytes = |halves: &[u16]| halves.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(first_non_finite_f16(&bytes(&finite)), None);
        for special in [0x7C00u16, 0xFC00, 0x7E00, 0x7C01, 0xFFFF] {
            for at in [0, 4095, 4096, 4099, 9_999] {
                let mut halves = finite.clone();
                halves[at] = special;
                assert_eq!(first_non_finite_f16(&bytes(&halves)), Some(at), "{special:#06x} at {at}");
            }
        }
        // The largest finite halves are not specials; an odd trailing byte is no half.
        let largest = bytes(&[0x7BFF, 0xFBFF]);
        assert_eq!(first_non_finite_f16(&largest), None);
        assert_eq!(first_non_finite_f16(&[0x00, 0x7C, 0xFF]), Some(0));
        assert_eq!(first_non_finite_f16(&[0x00, 0x3C, 0x7C]), None);
    }
}
