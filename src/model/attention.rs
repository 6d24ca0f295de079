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
//!
//! That reproduction costs: wasm has no half-precision conversion, and rounding every partial
//! sum to F16 takes about 26 operations per 8 values and head. [`AttentionPrecision::Fast`]
//! keeps the one-pass kernel's order but its query and accumulator in f32: closer to exact
//! arithmetic than llama.cpp's own, and what the engine runs unless told otherwise. The parity
//! tests and `inferno logits` ask for [`AttentionPrecision::Exact`].

use half::f16;

use super::ops::exp_and_sum;
use crate::tensor::kv_rows::{self, dot_in_ggml_order, mul_add};

/// How the one-pass kernel (decode and short batches) keeps its query and `Σ p·V`: as llama.cpp's
/// CPU does, in F16 (the same bits as its logits), or in f32 (faster in wasm, and nearer exact
/// arithmetic). The tiled kernel of long batches is f32 either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionPrecision {
    #[default]
    Exact,
    Fast,
}

impl AttentionPrecision {
    /// Its name in the API, the CLI and the page: `exact` or `fast`.
    pub fn name(self) -> &'static str {
        match self {
            AttentionPrecision::Exact => "exact",
            AttentionPrecision::Fast => "fast",
        }
    }

    /// The precision called `name`, if any.
    pub fn from_name(name: &str) -> Option<AttentionPrecision> {
        [AttentionPrecision::Exact, AttentionPrecision::Fast].into_iter().find(|p| p.name() == name)
    }
}

/// Query count from which llama.cpp switches to its tiled F32 kernel (`GGML_FA_TILE_Q`).
pub const TILED_MIN_QUERIES: usize = 64;

/// Where the keys and values of one KV head live: rows of `stride` elements (halves straight
/// from the cache, or f32 widened from it), this head's `head_dim` values starting at `offset`
/// in each row.
pub struct HeadView<'a, T> {
    pub keys: &'a [T],
    pub values: &'a [T],
    pub stride: usize,
    pub offset: usize,
    pub head_dim: usize,
}

impl<T> HeadView<'_, T> {
    fn key(&self, position: usize) -> &[T] {
        &self.keys[position * self.stride + self.offset..][..self.head_dim]
    }

    fn value(&self, position: usize) -> &[T] {
        &self.values[position * self.stride + self.offset..][..self.head_dim]
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

/// The one-pass kernel (`flash_attn_ext_f16_one_chunk`), reading the cached halves directly
/// (cheaper than widening the whole cache per layer first): its query and accumulator in F16
/// as llama.cpp's, or in f32 (`precision`). `scratch` holds at least twice `head_dim` floats.
#[allow(clippy::too_many_arguments)]
pub fn attend_head_one_pass(
    query: &[f32],
    kv: &HeadView<'_, f16>,
    positions: std::ops::Range<usize>,
    scoring: Scoring,
    sink: Option<f32>,
    precision: AttentionPrecision,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    let (query16, rest) = scratch.split_at_mut(query.len());
    let accumulator = &mut rest[..query.len()];
    take_query(query, query16, precision);
    accumulator.fill(0.0);
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    for j in positions {
        let score = scoring.score(kv_rows::dot_with_key(query16, kv.key(j)));
        let weight = online_softmax_step(score, &mut max, &mut sum, accumulator, precision);
        match precision {
            AttentionPrecision::Exact => kv_rows::add_weighted_rounded(accumulator, kv.value(j), weight),
            AttentionPrecision::Fast => kv_rows::add_weighted_heads(accumulator, kv.value(j), &[weight]),
        }
    }
    if let Some(sink) = sink {
        add_sink(sink, max, &mut sum, accumulator);
    }
    normalize(accumulator, sum, out);
}

/// A head's sink logit joins its softmax once every position is in, as one more score whose
/// value row is zero (ggml adds it after the last position, the accumulator already in f32).
#[inline]
fn add_sink(sink: f32, max: f32, sum: &mut f32, accumulator: &mut [f32]) {
    let (mut rescale, mut weight) = (1.0f32, 1.0f32);
    if sink > max {
        rescale = (max - sink).exp();
        accumulator.iter_mut().for_each(|a| *a *= rescale);
    } else {
        weight = (sink - max).exp();
    }
    *sum = mul_add(*sum, rescale, weight);
}

/// The query as the one-pass kernel takes it: converted to F16 where it is exact.
fn take_query(query: &[f32], query16: &mut [f32], precision: AttentionPrecision) {
    query16.copy_from_slice(query);
    if precision == AttentionPrecision::Exact {
        kv_rows::scale_rounded(query16, 1.0);
    }
}

/// One position of one head's online softmax: the running max and sum updated, the
/// accumulator rescaled (rounded to F16 where exact) when the max grows; returns the
/// position's weight.
#[inline(always)]
fn online_softmax_step(
    score: f32,
    max: &mut f32,
    sum: &mut f32,
    accumulator: &mut [f32],
    precision: AttentionPrecision,
) -> f32 {
    let (mut rescale, mut weight) = (1.0f32, 1.0f32);
    if score > *max {
        rescale = (*max - score).exp();
        *max = score;
        match precision {
            AttentionPrecision::Exact => kv_rows::scale_rounded(accumulator, rescale),
            AttentionPrecision::Fast => accumulator.iter_mut().for_each(|a| *a *= rescale),
        }
    } else {
        weight = (score - *max).exp();
    }
    // `S = S*ms + vs`, which GCC contracts into one FMA in llama.cpp's build.
    *sum = mul_add(*sum, rescale, weight);
    weight
}

/// `out = accumulator / sum` (zero where nothing was attended).
fn normalize(accumulator: &[f32], sum: f32, out: &mut [f32]) {
    let inverse = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    for (o, &a) in out.iter_mut().zip(accumulator) {
        *o = a * inverse;
    }
}

/// [`attend_head_one_pass`] for the query heads of one GQA group at once (`queries` and `out`
/// hold rows of the view's `head_dim`, one per head; `sinks`, where the model has them, one per
/// head): each key and value row is read and widened once for all of them, and every head's
/// operations, so its bits, are the single-head kernel's. `scratch` holds at least
/// [`group_scratch_len`] floats.
#[allow(clippy::too_many_arguments)]
pub fn attend_group_one_pass(
    queries: &[f32],
    kv: &HeadView<'_, f16>,
    positions: std::ops::Range<usize>,
    scoring: Scoring,
    sinks: Option<&[f32]>,
    precision: AttentionPrecision,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    let head_dim = kv.head_dim;
    let (width, heads) = (queries.len(), queries.len() / head_dim);
    if heads == 1 {
        // One head reads its rows in place, without widening them first.
        let sink = sinks.map(|s| s[0]);
        return attend_head_one_pass(queries, kv, positions, scoring, sink, precision, scratch, out);
    }
    let (query16, rest) = scratch.split_at_mut(width);
    let (accumulators, rest) = rest.split_at_mut(width);
    let (scores, rest) = rest.split_at_mut(heads);
    let (weights, rest) = rest.split_at_mut(heads);
    let (max_and_sum, _) = rest.split_at_mut(2 * heads);
    take_query(queries, query16, precision);
    accumulators.fill(0.0);
    let (max, sum) = max_and_sum.split_at_mut(heads);
    max.fill(f32::NEG_INFINITY);
    sum.fill(0.0);
    for j in positions {
        kv_rows::dot_with_key_heads(query16, kv.key(j), scores);
        for (h, accumulator) in accumulators.chunks_exact_mut(head_dim).enumerate() {
            let score = scoring.score(scores[h]);
            weights[h] = online_softmax_step(score, &mut max[h], &mut sum[h], accumulator, precision);
        }
        match precision {
            AttentionPrecision::Exact => {
                kv_rows::add_weighted_rounded_heads(accumulators, kv.value(j), weights)
            }
            AttentionPrecision::Fast => kv_rows::add_weighted_heads(accumulators, kv.value(j), weights),
        }
    }
    for (h, (accumulator, out)) in
        accumulators.chunks_exact_mut(head_dim).zip(out.chunks_exact_mut(head_dim)).enumerate()
    {
        if let Some(sinks) = sinks {
            add_sink(sinks[h], max[h], &mut sum[h], accumulator);
        }
        normalize(accumulator, sum[h], out);
    }
}

/// Floats of scratch [`attend_group_one_pass`] needs for `heads` heads of `head_dim`.
pub fn group_scratch_len(heads: usize, head_dim: usize) -> usize {
    2 * heads * head_dim + 4 * heads
}

/// KV positions per tile of the F32 kernel (`GGML_FA_TILE_KV`); tiles start at multiples of it.
const KV_TILE: usize = 64;

/// The F32 kernel of large batches (`flash_attn_ext_tiled`): full-precision query, an online
/// softmax updated once per tile of 64 cache positions, every sum an FMA chain in ggml's order.
pub fn attend_head_f32(
    query: &[f32],
    kv: &HeadView<'_, f32>,
    positions: std::ops::Range<usize>,
    scoring: Scoring,
    sink: Option<f32>,
    out: &mut [f32],
) {
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
                let key = kv.key(j);
                let dot = if cfg!(target_family = "wasm") {
                    // A serial chain of 64 adds is latency-bound; the lanes vectorize.
                    dot_in_ggml_order(query, key, |k| k)
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
        // ggml_vec_soft_max_f32 over the tile.
        sum = (f64::from(sum) + exp_and_sum(&mut weights, max)) as f32;
        for (i, &w) in weights.iter().enumerate() {
            if w != 0.0 {
                for (o, &v) in out.iter_mut().zip(kv.value(tile_start + i)) {
                    *o = mul_add(w, v, *o);
                }
            }
        }
        tile_start += KV_TILE;
    }
    if let Some(sink) = sink {
        add_sink(sink, max, &mut sum, out);
    }
    let inverse = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    out.iter_mut().for_each(|o| *o *= inverse);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::kv_rows::round_to_f16;

    /// Both kernels against an f64 softmax over `keys` (rows of the query's width, already F16
    /// values), the sink an extra term without a value: the F32 kernel within 1e-5, the F16
    /// accumulator's within 2e-3.
    fn both_kernels_match_f64(keys: &[f32], values: &[f32], query: &[f32], scale: f32, sink: Option<f32>) {
        let head_dim = query.len();
        let positions = keys.len() / head_dim;
        let scores: Vec<f64> = (0..positions)
            .map(|j| {
                let dot: f64 =
                    (0..head_dim).map(|d| f64::from(query[d]) * f64::from(keys[j * head_dim + d])).sum();
                dot * f64::from(scale)
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total = weights.iter().sum::<f64>() + sink.map_or(0.0, |s| (f64::from(s) - max).exp());
        let expected: Vec<f64> = (0..head_dim)
            .map(|d| {
                (0..positions).map(|j| weights[j] * f64::from(values[j * head_dim + d])).sum::<f64>() / total
            })
            .collect();
        let scoring = Scoring::new(scale, None);
        let kv = HeadView { keys, values, stride: head_dim, offset: 0, head_dim };
        let mut out = vec![0.0; head_dim];
        attend_head_f32(query, &kv, 0..positions, scoring, sink, &mut out);
        for (o, e) in out.iter().zip(&expected) {
            assert!((f64::from(*o) - e).abs() < 1e-5, "f32 kernel, sink {sink:?}: {o} vs {e}");
        }
        let (keys16, values16): (Vec<f16>, Vec<f16>) = (
            keys.iter().map(|&k| f16::from_f32(k)).collect(),
            values.iter().map(|&v| f16::from_f32(v)).collect(),
        );
        let kv16 =
            HeadView { keys: &keys16[..], values: &values16[..], stride: head_dim, offset: 0, head_dim };
        let mut scratch = vec![0.0; 2 * head_dim];
        // The one-pass kernel: F16 as llama.cpp's (within 2e-3), or f32 (as close as the tiled
        // kernel: nearer the exact result than llama.cpp's own).
        for (precision, bound) in [(AttentionPrecision::Exact, 2e-3), (AttentionPrecision::Fast, 1e-5)] {
            let one_pass = |out: &mut [f32], scratch: &mut [f32]| {
                attend_head_one_pass(query, &kv16, 0..positions, scoring, sink, precision, scratch, out)
            };
            one_pass(&mut out, &mut scratch);
            for (o, e) in out.iter().zip(&expected) {
                assert!((f64::from(*o) - e).abs() < bound, "{precision:?} kernel, sink {sink:?}: {o} vs {e}");
            }
        }
    }

    #[test]
    fn both_kernels_compute_softmax_weighted_values() {
        let head_dim = 32;
        let keys: Vec<f32> = (0..5 * head_dim).map(|i| round_to_f16(((i % 7) as f32 - 3.0) * 0.25)).collect();
        let values: Vec<f32> =
            (0..5 * head_dim).map(|i| round_to_f16(((i % 5) as f32 - 2.0) * 0.5)).collect();
        let query: Vec<f32> = (0..head_dim).map(|i| (i as f32 * 0.1).sin()).collect();
        both_kernels_match_f64(&keys, &values, &query, 0.3, None);
    }

    #[test]
    fn a_sink_takes_its_share_of_the_softmax_in_both_kernels() {
        let (head_dim, positions) = (16, 6);
        let keys: Vec<f32> =
            (0..positions * head_dim).map(|i| round_to_f16(((i % 9) as f32 - 4.0) * 0.2)).collect();
        let values: Vec<f32> =
            (0..positions * head_dim).map(|i| round_to_f16(((i % 7) as f32 - 3.0) * 0.5)).collect();
        let query: Vec<f32> = (0..head_dim).map(|i| round_to_f16((i as f32 * 0.7).cos())).collect();
        // A sink below every score, and one above them all (it rescales what was summed).
        for sink in [-2.0f32, 9.0] {
            both_kernels_match_f64(&keys, &values, &query, 0.5, Some(sink));
        }
    }

    #[test]
    fn a_group_of_heads_gets_each_single_heads_bits() {
        let (head_dim, heads, positions) = (40, 3, 9);
        let half = |i: usize, m: usize, scale: f32| f16::from_f32(((i * m % 29) as f32 - 14.0) * scale);
        let keys: Vec<f16> = (0..positions * head_dim).map(|i| half(i, 7, 0.05)).collect();
        let values: Vec<f16> = (0..positions * head_dim).map(|i| half(i, 11, 0.3)).collect();
        let queries: Vec<f32> = (0..heads * head_dim).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
        let kv = HeadView { keys: &keys[..], values: &values[..], stride: head_dim, offset: 0, head_dim };
        let scoring = Scoring::new(0.2, Some(30.0));
        // One sink above every score (it rescales what was summed), the others below.
        let sinks = [40.0, -3.0, 0.5];
        for precision in [AttentionPrecision::Exact, AttentionPrecision::Fast] {
            let mut scratch = vec![0.0; group_scratch_len(heads, head_dim)];
            let mut together = vec![0.0; heads * head_dim];
            let sinks = Some(&sinks[..]);
            let range = 2..positions;
            attend_group_one_pass(
                &queries,
                &kv,
                range,
                scoring,
                sinks,
                precision,
                &mut scratch,
                &mut together,
            );
            for (h, (query, got)) in
                queries.chunks_exact(head_dim).zip(together.chunks_exact(head_dim)).enumerate()
            {
                let (mut single_scratch, mut alone) = (vec![0.0; 2 * head_dim], vec![0.0; head_dim]);
                let sink = sinks.map(|s| s[h]);
                let range = 2..positions;
                attend_head_one_pass(
                    query,
                    &kv,
                    range,
                    scoring,
                    sink,
                    precision,
                    &mut single_scratch,
                    &mut alone,
                );
                assert_eq!(
                    got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    alone.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "{precision:?} head {h}"
                );
            }
        }
    }
}
