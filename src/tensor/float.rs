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

/// `ggml_v_expf` (ggml's AVX2/NEON exponential), one lane: range reduction by
/// `n = round(x / ln 2)`, a degree-5 polynomial, and scaling by `2^n` with care at the ends.
/// Accurate to ~1.5 ulp; what matters here is that it is the same function.
pub fn ggml_expf(x: f32) -> f32 {
    let z = fma(x, EXP_LOG2_E, EXP_SHIFTER);
    let n = z - EXP_SHIFTER;
    let b = fma(-n, EXP_LN2_LOW, fma(-n, EXP_LN2_HIGH, x));
    let e = z.to_bits() << 23;
    let k = f32::from_bits(e.wrapping_add(1.0f32.to_bits()));
    let u = b * b;
    let [c1, c2, c3, c4, c5] = EXP_POLYNOMIAL;
    let j = fma(c1, b, c2);
    let j = fma(j, u, fma(c3, b, c4));
    let j = fma(j, u, c5 * b);
    if n.abs() <= 126.0 {
        return fma(j, k, k);
    }
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
    let s2 = f32::from_bits(e.wrapping_sub(g));
    if n.abs() > 192.0 { s1 * s1 } else { fma(s2, j, s2) * s1 }
}

/// [`ggml_expf`]'s constants: 0x1.8p23, which rounds to an integer when added; 1/ln 2; ln 2 in
/// two parts; the polynomial's coefficients (ggml's hex constants, as bits).
pub(super) const EXP_SHIFTER: f32 = 12_582_912.0;
pub(super) const EXP_LOG2_E: f32 = f32::from_bits(0x3fb8_aa3b);
pub(super) const EXP_LN2_HIGH: f32 = f32::from_bits(0x3f31_7200);
pub(super) const EXP_LN2_LOW: f32 = f32::from_bits(0x35bf_be8e);
pub(super) const EXP_POLYNOMIAL: [f32; 5] = [
    f32::from_bits(0x3c07_2010),
    f32::from_bits(0x3d2b_9f17),
    f32::from_bits(0x3e2a_af33),
    f32::from_bits(0x3eff_fedb),
    f32::from_bits(0x3f7f_fff6),
];

/// `x[i] = ggml_expf(x[i] - max)`: softmax's exponentials (attention's, a trace's), whose
/// SIMD128 kernel gives the same bits four at a time; this is its scalar reference.
pub fn exp_shifted(x: &mut [f32], max: f32) {
    for v in x {
        *v = ggml_expf(*v - max);
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

/// An F16 matrix times `out.len()` activation rows, every dot in [`dot_f16`]'s order (ggml's
/// `vec_dot_f16`), each weight row widened once for all the activation rows.
#[cfg(not(target_family = "wasm"))]
pub(super) fn matmul_f16_vec_dot_order<'a>(
    weights: &[u8],
    row_bytes: usize,
    activation_row: impl Fn(usize) -> &'a [F16Activation],
    out: &mut [&mut [f32]],
) {
    let k = row_bytes / 2;
    for (r, row) in weights.chunks_exact(row_bytes).enumerate() {
        let widened: Vec<f32> = u16s(row).map(|w| f16::from_bits(w).to_f32()).collect();
        for (i, out_row) in out.iter_mut().enumerate() {
            out_row[r] =
                dot_f32_in_f16_order(&widened, &F16Activation::scaled_values(activation_row(i))[..k]);
        }
    }
}

/// An F16 matrix times `out.len()` activation rows in llamafile's GEMM order ([`dot_f16_sgemm_order`]
/// for each output; [`dot_f16`]'s for a row length that is not a multiple of 8), `out[i][r]`
/// the dot of weight row `r` with activation row `i`. The same sums as calling those dots one
/// by one, computed as a GEMM: weights widened to f32 once, a tile of weight rows against a
/// tile of activation rows that both stay in cache, four activation rows and two weight rows
/// per pass over a row's values. A vision encoder's matmuls are a thousand rows deep: one dot
/// at a time, widening every weight for every row and streaming every activation row from
/// memory for every weight row, made them 20 times slower than llama.cpp's.
#[cfg(not(target_family = "wasm"))]
pub(super) fn matmul_f16_sgemm_order<'a>(
    weights: &[u8],
    row_bytes: usize,
    activation_row: impl Fn(usize) -> &'a [F16Activation],
    out: &mut [&mut [f32]],
) {
    let (k, n) = (row_bytes / 2, out.len());
    let values = |i: usize| &F16Activation::scaled_values(activation_row(i))[..k];
    if !k.is_multiple_of(8) {
        matmul_f16_vec_dot_order(weights, row_bytes, activation_row, out);
        return;
    }
    // Tiles of about 128 KiB of f32 each: two of them fit the L2 of every x86 core in use.
    let tile_rows = ((128 << 10) / (4 * k)).max(4) / 2 * 2;
    let rows = weights.len() / row_bytes;
    let mut widened = vec![0.0f32; tile_rows.min(rows) * k];
    for first_row in (0..rows).step_by(tile_rows) {
        let tile = tile_rows.min(rows - first_row);
        let tile_weights = &weights[first_row * row_bytes..][..tile * row_bytes];
        for (w, bits) in widened.iter_mut().zip(u16s(tile_weights)) {
            *w = f16::from_bits(bits).to_f32();
        }
        let widened = &widened[..tile * k];
        for first in (0..n).step_by(tile_rows) {
            let count = tile_rows.min(n - first);
            let grouped = count - count % 4;
            for (pair, w) in widened.chunks(2 * k).enumerate() {
                let r = first_row + 2 * pair;
                for i in (first..first + grouped).step_by(4) {
                    let a: [&[f32]; 4] = std::array::from_fn(|j| values(i + j));
                    let dots = lanes_4x2_of(w, k, a);
                    for (j, dots) in dots.into_iter().enumerate() {
                        out[i + j][r] = sum_lanes(dots[0]);
                        if w.len() == 2 * k {
                            out[i + j][r + 1] = sum_lanes(dots[1]);
                        }
                    }
                }
                for (i, out_row) in out.iter_mut().enumerate().take(first + count).skip(first + grouped) {
                    for (half, w) in w.chunks_exact(k).enumerate() {
                        out_row[r + half] = sum_lanes(lanes_1x1(w, values(i)));
                    }
                }
            }
        }
    }
}

/// Four activation rows times one or two widened weight rows (`w` holds one or two rows of
/// `k`): each output's eight lanes, accumulated in order; AVX2 where the build has it.
#[cfg(not(target_family = "wasm"))]
#[inline(always)]
fn lanes_4x2_of(w: &[f32], k: usize, a: [&[f32]; 4]) -> [[[f32; 8]; 2]; 4] {
    let (w0, w1) = if w.len() == 2 * k { w.split_at(k) } else { (w, w) };
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    return super::avx2::lanes_4x2(w0, w1, a, k);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")))]
    lanes_4x2(w0, w1, a, k)
}

/// The scalar reference of [`lanes_4x2_of`]'s kernel: rows `w0` and `w1` times four rows of `a`.
/// (Where the AVX2 kernel runs, only the tests call it.)
#[cfg(not(target_family = "wasm"))]
#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"), allow(dead_code))]
pub(super) fn lanes_4x2(w0: &[f32], w1: &[f32], a: [&[f32]; 4], k: usize) -> [[[f32; 8]; 2]; 4] {
    let mut l = [[[0.0f32; 8]; 2]; 4];
    for c in (0..k).step_by(8) {
        for (lanes, row) in l.iter_mut().zip(&a) {
            for j in 0..8 {
                lanes[0][j] += w0[c + j] * row[c + j];
                lanes[1][j] += w1[c + j] * row[c + j];
            }
        }
    }
    l
}

/// One activation row times one widened weight row: its eight lanes, accumulated in order.
#[cfg(not(target_family = "wasm"))]
fn lanes_1x1(w: &[f32], a: &[f32]) -> [f32; 8] {
    let mut lane = [0.0f32; 8];
    for (w, a) in w.chunks_exact(8).zip(a.chunks_exact(8)) {
        for j in 0..8 {
            lane[j] += w[j] * a[j];
        }
    }
    lane
}

/// [`dot_f16`]'s order over a weight row already widened: four accumulators of eight lanes over
/// each 32 values, reduced as ggml reduces them, then the tail one by one in f64.
#[cfg(not(target_family = "wasm"))]
fn dot_f32_in_f16_order(weights: &[f32], activations: &[f32]) -> f32 {
    let n = activations.len() / 32 * 32;
    let mut sums = [[0.0f32; 8]; 4];
    for (w, a) in weights[..n].chunks_exact(32).zip(activations[..n].chunks_exact(32)) {
        for (s, sum) in sums.iter_mut().enumerate() {
            for j in 0..8 {
                sum[j] += w[8 * s + j] * a[8 * s + j];
            }
        }
    }
    let head = f64::from(reduce_accumulators(sums));
    let tail = weights[n..].iter().zip(&activations[n..]);
    tail.fold(head, |sum, (w, a)| sum + f64::from(w * a)) as f32
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

    /// The F16 GEMMs give the bits of one dot at a time in llama.cpp's orders: for
    /// row lengths that are and are not a multiple of 8, batches of 2 to 11 rows (whole and
    /// partial groups of 4), odd and even weight row counts and more rows than one tile.
    #[test]
    fn the_f16_gemm_sums_each_dot_as_the_single_dots_do() {
        let half = |i: usize| f16::from_f32(((i * 7919 % 1999) as f32 / 1999.0 - 0.5) * 3.0);
        for (k, rows, n) in [(64, 3, 2), (64, 70, 11), (40, 5, 7), (44, 4, 5), (3072, 23, 6)] {
            let weights: Vec<u8> = (0..rows * k).flat_map(|i| half(i).to_le_bytes()).collect();
            let activations: Vec<Vec<F16Activation>> = (0..n)
                .map(|row| (0..k).map(|i| F16Activation::new(half(31 * row + 7 * i + 1).to_f32())).collect())
                .collect();
            let mut out = vec![vec![f32::NAN; rows]; n];
            let mut views: Vec<&mut [f32]> = out.iter_mut().map(|row| &mut row[..]).collect();
            matmul_f16_sgemm_order(&weights, 2 * k, |i| &activations[i], &mut views);
            for (i, out_row) in out.iter().enumerate() {
                for (r, &got) in out_row.iter().enumerate() {
                    let want = dot_f16_sgemm_order(&weights[r * 2 * k..][..2 * k], &activations[i]);
                    assert_eq!(got.to_bits(), want.to_bits(), "k {k}, weight row {r}, activation row {i}");
                }
            }
            // And where llamafile declines the product: every dot in `vec_dot_f16`'s order.
            let mut views: Vec<&mut [f32]> = out.iter_mut().map(|row| &mut row[..]).collect();
            matmul_f16_vec_dot_order(&weights, 2 * k, |i| &activations[i], &mut views);
            for (i, out_row) in out.iter().enumerate() {
                for (r, &got) in out_row.iter().enumerate() {
                    let want = dot_f16(&weights[r * 2 * k..][..2 * k], &activations[i]);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "vec_dot: k {k}, weight row {r}, activation row {i}"
                    );
                }
            }
        }
    }

    /// The AVX2 tile kernel against its scalar reference, bit for bit.
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
    #[test]
    fn the_avx2_tile_kernel_is_its_scalar_reference() {
        let k = 96;
        let value = |i: usize| ((i * 2654435761) % 1000) as f32 / 37.0 - 13.0;
        let w0: Vec<f32> = (0..k).map(value).collect();
        let w1: Vec<f32> = (0..k).map(|i| value(i + 500)).collect();
        let rows: Vec<Vec<f32>> = (0..4).map(|r| (0..k).map(|i| value(i * 3 + r * 101)).collect()).collect();
        let a: [&[f32]; 4] = std::array::from_fn(|r| &rows[r][..]);
        let scalar = lanes_4x2(&w0, &w1, a, k);
        let simd = super::super::avx2::lanes_4x2(&w0, &w1, a, k);
        assert_eq!(format!("{scalar:?}"), format!("{simd:?}"));
    }

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
