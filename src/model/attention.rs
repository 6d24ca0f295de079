//! Attention of one query head over cached keys and values, computed the way llama.cpp's CPU
//! backend computes it, so that our logits agree with its to the bits that matter.
//!
//! llama.cpp runs attention with its flash-attention kernels by default on CPU, and which
//! kernel runs depends on the batch: fewer than 64 queries (decode, short prompts) go through
//! a one-pass kernel that converts the query to F16 and accumulates `Σ p·V` in an **F16**
//! buffer with an online softmax; 64 or more go through a tiled kernel that works in F32.
//! The F16 accumulator rounds every partial sum to 11 bits, and models such as SmolLM2 move
//! their logits by up to 1.0 depending on whether that rounding happens (measured against
//! llama.cpp built with and without flash attention), so we reproduce both kernels rather
//! than compute attention "more exactly" than the reference.

use super::ops::ggml_expf;

/// The multiply-add of attention's inner loops: the fused instruction natively, where it
/// reproduces llama.cpp's GCC build bit for bit; a plain multiply and add in wasm, which has no
/// FMA instruction (exact emulation made attention a third of the prefill time there) and whose
/// SIMD128 matmuls sum in their own order anyway.
#[inline(always)]
fn mul_add(a: f32, b: f32, c: f32) -> f32 {
    if cfg!(target_family = "wasm") { a * b + c } else { a.mul_add(b, c) }
}

/// Query count from which llama.cpp switches to its tiled F32 kernel (`GGML_FA_TILE_Q`).
pub const TILED_MIN_QUERIES: usize = 64;

/// Where the keys and values of one KV head live: rows of `stride` floats, this head's
/// `head_dim` values starting at `offset` in each row.
pub struct HeadView<'a> {
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub stride: usize,
    pub offset: usize,
}

impl HeadView<'_> {
    fn key(&self, position: usize, head_dim: usize) -> &[f32] {
        &self.keys[position * self.stride + self.offset..][..head_dim]
    }

    fn value(&self, position: usize, head_dim: usize) -> &[f32] {
        &self.values[position * self.stride + self.offset..][..head_dim]
    }
}

/// How a query-key dot product becomes a score: scaled, and with a soft cap (Gemma 2) squashed
/// by `cap · tanh(score / cap)`, where ggml folds `1/cap` into the scale.
#[derive(Clone, Copy, Debug)]
pub struct Scoring {
    scale: f32,
    /// 0: no cap.
    softcap: f32,
}

impl Scoring {
    pub fn new(scale: f32, softcap: Option<f32>) -> Scoring {
        match softcap {
            Some(cap) => Scoring { scale: scale / cap, softcap: cap },
            None => Scoring { scale, softcap: 0.0 },
        }
    }

    #[inline]
    fn score(self, dot: f32) -> f32 {
        let scaled = dot * self.scale;
        if self.softcap != 0.0 { self.softcap * scaled.tanh() } else { scaled }
    }
}

/// The one-pass kernel with an F16 accumulator (`flash_attn_ext_f16_one_chunk`).
/// `query16` and `accumulator` are scratch of `head_dim` floats.
pub fn attend_head_f16_accumulator(
    query: &[f32],
    kv: &HeadView<'_>,
    positions: std::ops::Range<usize>,
    scoring: Scoring,
    query16: &mut [f32],
    accumulator: &mut [f32],
    out: &mut [f32],
) {
    let head_dim = query.len();
    for (dst, &src) in query16.iter_mut().zip(query) {
        *dst = round_to_f16(src);
    }
    accumulator.fill(0.0);
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    for j in positions {
        let score = scoring.score(dot_f16_values(query16, kv.key(j, head_dim)));
        let (mut rescale, mut weight) = (1.0f32, 1.0f32);
        if score > max {
            rescale = (max - score).exp();
            max = score;
            for a in accumulator.iter_mut() {
                *a = round_to_f16(*a * rescale);
            }
        } else {
            weight = (score - max).exp();
        }
        for (a, &v) in accumulator.iter_mut().zip(kv.value(j, head_dim)) {
            *a = round_to_f16(mul_add(v, weight, *a));
        }
        // `S = S*ms + vs`, which GCC contracts into one FMA in llama.cpp's build.
        sum = mul_add(sum, rescale, weight);
    }
    let inverse = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    for (o, &a) in out.iter_mut().zip(accumulator.iter()) {
        *o = a * inverse;
    }
}

/// KV positions per tile of the F32 kernel (`GGML_FA_TILE_KV`); tiles start at multiples of it.
const KV_TILE: usize = 64;

/// The F32 kernel of large batches (`flash_attn_ext_tiled`): full-precision query, an online
/// softmax updated once per tile of 64 cache positions, every sum an FMA chain in ggml's order.
pub fn attend_head_f32(
    query: &[f32],
    kv: &HeadView<'_>,
    positions: std::ops::Range<usize>,
    scoring: Scoring,
    out: &mut [f32],
) {
    let head_dim = query.len();
    out.fill(0.0);
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    let mut weights = [0.0f32; KV_TILE];
    let mut tile_start = positions.start / KV_TILE * KV_TILE;
    while tile_start < positions.end {
        // Scores; positions outside the span are masked (-inf, weight exactly 0).
        let mut tile_max = f32::NEG_INFINITY;
        for (i, w) in weights.iter_mut().enumerate() {
            let j = tile_start + i;
            *w = if positions.contains(&j) {
                let key = kv.key(j, head_dim);
                let dot = if cfg!(target_family = "wasm") {
                    // A serial chain of 64 adds is latency-bound; the lanes vectorize.
                    dot_f16_values(query, key)
                } else {
                    query.iter().zip(key).fold(0.0f32, |acc, (&q, &k)| mul_add(q, k, acc))
                };
                scoring.score(dot)
            } else {
                f32::NEG_INFINITY
            };
            tile_max = tile_max.max(*w);
        }
        if tile_max > max {
            let rescale = (max - tile_max).exp();
            out.iter_mut().for_each(|o| *o *= rescale);
            sum *= rescale;
            max = tile_max;
        }
        // ggml_vec_soft_max_f32: ggml's exp, summed in groups of eight, groups summed in f64.
        let mut tile_sum = 0.0f64;
        for group in weights.chunks_exact_mut(8) {
            for w in group.iter_mut() {
                *w = ggml_expf(*w - max);
            }
            let r = [group[0] + group[4], group[1] + group[5], group[2] + group[6], group[3] + group[7]];
            tile_sum += f64::from((r[0] + r[2]) + (r[1] + r[3]));
        }
        sum = (f64::from(sum) + tile_sum) as f32;
        for (i, &w) in weights.iter().enumerate() {
            if w != 0.0 {
                for (o, &v) in out.iter_mut().zip(kv.value(tile_start + i, head_dim)) {
                    *o = mul_add(w, v, *o);
                }
            }
        }
        tile_start += KV_TILE;
    }
    let inverse = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    out.iter_mut().for_each(|o| *o *= inverse);
}

/// Rounds to the nearest F16 value (ties to even) and returns it as f32: what storing into
/// an F16 buffer does, without leaving f32 arithmetic.
#[inline(always)]
pub fn round_to_f16(x: f32) -> f32 {
    let magnitude = x.abs();
    if magnitude.is_nan() {
        return x;
    }
    if magnitude >= 65520.0 {
        return f32::INFINITY.copysign(x);
    }
    if magnitude < F16_MIN_NORMAL {
        // Subnormal F16 values are multiples of 2^-24; scaling by a power of two is exact.
        return (x * 16_777_216.0).round_ties_even() * (1.0 / 16_777_216.0);
    }
    // Keep 10 of f32's 23 mantissa bits, rounding to nearest even; a carry bumps the exponent.
    let bits = x.to_bits();
    f32::from_bits((bits + 0x0FFF + ((bits >> 13) & 1)) & !0x1FFF)
}

const F16_MIN_NORMAL: f32 = 6.103_515_6e-5;

/// Dot product of F16 values held in f32, summed in ggml's AVX2 order (`ggml_vec_dot_f16`):
/// 4 × 8 lane accumulators over steps of 32, reduced pairwise, the tail in double. The
/// products are exact, so only the order of the additions matters, and here it is the same.
pub fn dot_f16_values(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let whole = n & !31;
    let mut acc = [[0.0f32; 8]; 4];
    for (xs, ys) in x[..whole].chunks_exact(32).zip(y[..whole].chunks_exact(32)) {
        for (a, lanes) in acc.iter_mut().enumerate() {
            for (l, lane) in lanes.iter_mut().enumerate() {
                *lane += xs[a * 8 + l] * ys[a * 8 + l];
            }
        }
    }
    let mut r = [0.0f32; 8];
    for (l, lane) in r.iter_mut().enumerate() {
        *lane = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    }
    let halves = [r[0] + r[4], r[1] + r[5], r[2] + r[6], r[3] + r[7]];
    let mut sum = f64::from((halves[0] + halves[1]) + (halves[2] + halves[3]));
    for i in whole..n {
        sum += f64::from(x[i] * y[i]);
    }
    sum as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn rounding_to_f16_matches_a_real_conversion() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let check = |x: f32| {
            let expected = f16::from_f32(x).to_f32();
            let got = round_to_f16(x);
            assert!(got == expected || (got.is_nan() && expected.is_nan()), "{x:e}: {got:e} vs {expected:e}");
        };
        for _ in 0..1_000_000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            check(f32::from_bits((state >> 32) as u32));
        }
        // Ties, subnormals, the overflow edge.
        for x in [
            0.0,
            -0.0,
            1.0 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
            5.96e-8,
            2.98e-8,
            6.1e-5,
            65504.0,
            65519.0,
            65520.0,
            -70000.0,
        ] {
            check(x);
        }
    }

    #[test]
    fn f16_dot_sums_in_ggml_lane_order() {
        // Values whose sum depends on the order: the reference below adds in ggml's order.
        let x: Vec<f32> = (0..70).map(|i| round_to_f16(((i * 37 % 23) as f32 - 11.0) * 1.37e3)).collect();
        let y: Vec<f32> = (0..70).map(|i| round_to_f16(((i * 11 % 19) as f32 - 9.0) * 3.1e-3)).collect();
        let mut lanes = [0.0f32; 32];
        for i in 0..64 {
            lanes[i % 32] += x[i] * y[i];
        }
        let r: Vec<f32> =
            (0..8).map(|l| (lanes[l] + lanes[16 + l]) + (lanes[8 + l] + lanes[24 + l])).collect();
        let reduced = ((r[0] + r[4]) + (r[1] + r[5])) + ((r[2] + r[6]) + (r[3] + r[7]));
        let expected = (f64::from(reduced)
            + f64::from(x[64] * y[64])
            + f64::from(x[65] * y[65])
            + f64::from(x[66] * y[66])
            + f64::from(x[67] * y[67])
            + f64::from(x[68] * y[68])
            + f64::from(x[69] * y[69])) as f32;
        assert_eq!(dot_f16_values(&x, &y), expected);
    }

    #[test]
    fn both_kernels_compute_softmax_weighted_values() {
        let head_dim = 32;
        let keys: Vec<f32> = (0..5 * head_dim).map(|i| round_to_f16(((i % 7) as f32 - 3.0) * 0.25)).collect();
        let values: Vec<f32> =
            (0..5 * head_dim).map(|i| round_to_f16(((i % 5) as f32 - 2.0) * 0.5)).collect();
        let query: Vec<f32> = (0..head_dim).map(|i| (i as f32 * 0.1).sin()).collect();
        let kv = HeadView { keys: &keys, values: &values, stride: head_dim, offset: 0 };
        // Reference in f64.
        let scores: Vec<f64> = (0..5)
            .map(|j| {
                (0..head_dim).map(|d| f64::from(query[d]) * f64::from(keys[j * head_dim + d])).sum::<f64>()
                    * 0.3
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        let expected: Vec<f64> = (0..head_dim)
            .map(|d| (0..5).map(|j| weights[j] * f64::from(values[j * head_dim + d])).sum::<f64>() / total)
            .collect();
        let mut out = vec![0.0; head_dim];
        attend_head_f32(&query, &kv, 0..5, Scoring::new(0.3, None), &mut out);
        for (o, e) in out.iter().zip(&expected) {
            assert!((f64::from(*o) - e).abs() < 1e-5, "{o} vs {e}");
        }
        let (mut q16, mut acc) = (vec![0.0; head_dim], vec![0.0; head_dim]);
        attend_head_f16_accumulator(&query, &kv, 0..5, Scoring::new(0.3, None), &mut q16, &mut acc, &mut out);
        for (o, e) in out.iter().zip(&expected) {
            assert!((f64::from(*o) - e).abs() < 2e-3, "{o} vs {e}");
        }
    }
}
