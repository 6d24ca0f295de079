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
//!
//! The one-pass kernel reads whatever types the cache keeps (llama.cpp's `-ctk`/`-ctv`:
//! [`CachedKey`], [`CachedValue`]), as llama.cpp reads them: the query converted to the keys'
//! dot type, F16 values summed in F16 where exact, every other type's values decoded and summed
//! in f32. llama.cpp runs its tiled kernel only over F16 or F32 keys and values of one type.

use half::f16;

use super::ops::exp_and_sum;
use crate::tensor::kv_rows::{self, mul_add};
use crate::tensor::{ActivationFormat, BlockQ8_0, Q8_0Activation, QK};

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

/// A type the cache keeps keys or values in, by how many values one stored unit holds.
pub trait KvUnit: Copy + Sync {
    const VALUES: usize;
}

impl KvUnit for f16 {
    const VALUES: usize = 1;
}

impl KvUnit for f32 {
    const VALUES: usize = 1;
}

impl KvUnit for BlockQ8_0 {
    const VALUES: usize = QK;
}

/// Where the keys and values of one KV head live: rows of `stride` values (straight from the
/// cache, or f32 widened from it), this head's `head_dim` values starting at `offset` in each
/// row; all three are whole units of both types.
pub struct HeadView<'a, K, V = K> {
    pub keys: &'a [K],
    pub values: &'a [V],
    pub stride: usize,
    pub offset: usize,
    pub head_dim: usize,
}

impl<K: KvUnit, V: KvUnit> HeadView<'_, K, V> {
    fn key(&self, position: usize) -> &[K] {
        &self.keys[(position * self.stride + self.offset) / K::VALUES..][..self.head_dim / K::VALUES]
    }

    fn value(&self, position: usize) -> &[V] {
        &self.values[(position * self.stride + self.offset) / V::VALUES..][..self.head_dim / V::VALUES]
    }
}

/// The queries of a group of heads as a key type's dot product takes them.
#[derive(Default)]
pub struct PreparedQueries {
    floats: Vec<f32>,
    blocks: Vec<Q8_0Activation>,
}

/// A type cached keys are kept in: how a query meets them. llama.cpp converts the query to the
/// key type's `vec_dot_type` and dots it with that type's kernel: F16 for F16 keys, f32 for
/// F32 keys, Q8_0 blocks for Q8_0 keys.
pub trait CachedKey: KvUnit {
    /// The group's queries (rows of the head size), converted; `exact`: as llama.cpp's bits
    /// need (an F16 key's query rounded to F16).
    fn prepare(queries: &[f32], exact: bool, prepared: &mut PreparedQueries);

    /// Each head's prepared query · `key`, one score per head.
    fn scores(prepared: &PreparedQueries, key: &[Self], scores: &mut [f32]);
}

impl CachedKey for f16 {
    fn prepare(queries: &[f32], exact: bool, prepared: &mut PreparedQueries) {
        prepared.floats.clear();
        prepared.floats.extend_from_slice(queries);
        if exact {
            kv_rows::scale_rounded(&mut prepared.floats, 1.0);
        }
    }

    #[inline(always)]
    fn scores(prepared: &PreparedQueries, key: &[f16], scores: &mut [f32]) {
        match scores {
            // One head reads its row in place, without widening it first.
            [score] => *score = kv_rows::dot_with_key(&prepared.floats, key),
            _ => kv_rows::dot_with_key_heads(&prepared.floats, key, scores),
        }
    }
}

impl CachedKey for f32 {
    fn prepare(queries: &[f32], _exact: bool, prepared: &mut PreparedQueries) {
        prepared.floats.clear();
        prepared.floats.extend_from_slice(queries);
    }

    #[inline(always)]
    fn scores(prepared: &PreparedQueries, key: &[f32], scores: &mut [f32]) {
        kv_rows::dot_f32_key_heads(&prepared.floats, key, scores)
    }
}

impl CachedKey for BlockQ8_0 {
    fn prepare(queries: &[f32], _exact: bool, prepared: &mut PreparedQueries) {
        // Heads are whole blocks (the cache checks it), so the group quantizes as one row.
        prepared.blocks.resize(queries.len() / QK, Q8_0Activation::default());
        Q8_0Activation::quantize_row(queries, &mut prepared.blocks);
    }

    #[inline(always)]
    fn scores(prepared: &PreparedQueries, key: &[BlockQ8_0], scores: &mut [f32]) {
        kv_rows::dot_q8_0_key_heads(&prepared.blocks, key, scores)
    }
}

/// A type cached values are kept in: how a weighted row joins each head's `Σ p·V`.
pub trait CachedValue: KvUnit {
    /// Whether llama.cpp keeps `Σ p·V` in F16 over rows of this type (only F16 rows: it sums
    /// every other type's rows, decoded, in f32), so that the exact precision rounds it.
    const F16_SUMS: bool;

    /// `accs[h] += weights[h] · value` for each head, rounded to F16 after every operation
    /// where `rounded`; `widened` holds at least one decoded row.
    fn add_weighted(accs: &mut [f32], value: &[Self], weights: &[f32], rounded: bool, widened: &mut [f32]);
}

impl CachedValue for f16 {
    const F16_SUMS: bool = true;

    #[inline(always)]
    fn add_weighted(accs: &mut [f32], value: &[f16], weights: &[f32], rounded: bool, _widened: &mut [f32]) {
        match (rounded, weights) {
            (true, [weight]) => kv_rows::add_weighted_rounded(accs, value, *weight),
            (true, _) => kv_rows::add_weighted_rounded_heads(accs, value, weights),
            (false, _) => kv_rows::add_weighted_heads(accs, value, weights),
        }
    }
}

impl CachedValue for f32 {
    const F16_SUMS: bool = false;

    #[inline(always)]
    fn add_weighted(accs: &mut [f32], value: &[f32], weights: &[f32], _rounded: bool, _widened: &mut [f32]) {
        kv_rows::add_weighted_f32_heads(accs, value, weights)
    }
}

impl CachedValue for BlockQ8_0 {
    const F16_SUMS: bool = false;

    #[inline(always)]
    fn add_weighted(
        accs: &mut [f32],
        value: &[BlockQ8_0],
        weights: &[f32],
        _rounded: bool,
        widened: &mut [f32],
    ) {
        let row = &mut widened[..value.len() * QK];
        kv_rows::widen_q8_0(value, row);
        kv_rows::add_weighted_f32_heads(accs, row, weights)
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

/// One position of one head's online softmax: the running max and sum updated, the
/// accumulator rescaled (rounded to F16 where `rounded`) when the max grows; returns the
/// position's weight.
#[inline(always)]
fn online_softmax_step(
    score: f32,
    max: &mut f32,
    sum: &mut f32,
    accumulator: &mut [f32],
    rounded: bool,
) -> f32 {
    let (mut rescale, mut weight) = (1.0f32, 1.0f32);
    if score > *max {
        rescale = (*max - score).exp();
        *max = score;
        if rounded {
            kv_rows::scale_rounded(accumulator, rescale);
        } else {
            accumulator.iter_mut().for_each(|a| *a *= rescale);
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

/// llama.cpp's one-pass kernel (`flash_attn_ext_f16_one_chunk`) for the query heads of one
/// GQA group at once (`queries` and `out` hold rows of the view's `head_dim`, one per head;
/// `sinks`, where the model has them, one per head): each key and value row is read (and
/// decoded) once for all of them, and every head's operations, so its bits, are those of the
/// kernel run for that head alone. The query and `Σ p·V` are kept as llama.cpp keeps them for
/// these key and value types where `precision` is exact (F16 for F16 rows), else in f32.
#[allow(clippy::too_many_arguments)]
pub fn attend_group_one_pass<K: CachedKey, V: CachedValue>(
    queries: &[f32],
    kv: &HeadView<'_, K, V>,
    positions: std::ops::Range<usize>,
    scoring: Scoring,
    sinks: Option<&[f32]>,
    precision: AttentionPrecision,
    scratch: &mut GroupScratch,
    out: &mut [f32],
) {
    let head_dim = kv.head_dim;
    let heads = queries.len() / head_dim;
    let exact = precision == AttentionPrecision::Exact;
    let rounded = exact && V::F16_SUMS;
    let GroupScratch { prepared, accumulators, widened, per_head } = scratch;
    K::prepare(queries, exact, prepared);
    accumulators.clear();
    accumulators.resize(queries.len(), 0.0);
    widened.resize(head_dim, 0.0);
    per_head.clear();
    per_head.resize(4 * heads, 0.0);
    let (scores, rest) = per_head.split_at_mut(heads);
    let (weights, rest) = rest.split_at_mut(heads);
    let (max, sum) = rest.split_at_mut(heads);
    max.fill(f32::NEG_INFINITY);
    for j in positions {
        K::scores(prepared, kv.key(j), scores);
        for (h, accumulator) in accumulators.chunks_exact_mut(head_dim).enumerate() {
            let score = scoring.score(scores[h]);
            weights[h] = online_softmax_step(score, &mut max[h], &mut sum[h], accumulator, rounded);
        }
        V::add_weighted(accumulators, kv.value(j), weights, rounded, widened);
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

/// Working memory of [`attend_group_one_pass`], grown to the group it is given and kept for the
/// next: the prepared queries, each head's `Σ p·V`, one decoded value row, and each head's
/// score, weight, running max and sum.
#[derive(Default)]
pub struct GroupScratch {
    prepared: PreparedQueries,
    accumulators: Vec<f32>,
    widened: Vec<f32>,
    per_head: Vec<f32>,
}

/// The scores of the tile of positions from `tile_start` (a multiple of 4), those outside
/// `positions` masked (-inf, weight exactly 0). Natively each is a serial FMA chain, as
/// llama.cpp's GEMM sums it; in wasm, where such a chain is latency-bound, four keys at a time
/// in 4 lanes each (`kv_rows::dot_with_keys4`), a key at the span's edges alone in the same lanes.
fn tile_scores(
    query: &[f32],
    kv: &HeadView<'_, f32>,
    tile_start: usize,
    positions: &std::ops::Range<usize>,
    scoring: Scoring,
    weights: &mut [f32; KV_TILE],
) {
    let score = |j: usize| -> f32 {
        if !positions.contains(&j) {
            return f32::NEG_INFINITY;
        }
        let key = kv.key(j);
        scoring.score(if cfg!(target_family = "wasm") {
            kv_rows::dot_in_4_lanes(query, key)
        } else {
            query.iter().zip(key).fold(0.0f32, |acc, (&q, &k)| mul_add(q, k, acc))
        })
    };
    for (quad, w) in weights.chunks_exact_mut(4).enumerate() {
        let first = tile_start + 4 * quad;
        if cfg!(target_family = "wasm") && positions.contains(&first) && positions.contains(&(first + 3)) {
            let dots = kv_rows::dot_with_keys4(query, std::array::from_fn(|k| kv.key(first + k)));
            for (w, dot) in w.iter_mut().zip(dots) {
                *w = scoring.score(dot);
            }
        } else {
            for (k, w) in w.iter_mut().enumerate() {
                *w = score(first + k);
            }
        }
    }
}

/// KV positions per tile of the F32 kernel (`GGML_FA_TILE_KV`); tiles start at multiples of it.
const KV_TILE: usize = kv_rows::KEY_TILE;

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
    attend_tiles(kv, positions.clone(), sink, out, |tile_start, weights| {
        tile_scores(query, kv, tile_start, &positions, scoring, weights)
    });
}

/// One head's keys (rows `stride` apart, from `offset`, `head_dim` wide; `len` of them) laid out
/// for [`attend_head_f32_tiled_keys`]: tile by tile of 64 positions, each tile dimension by
/// dimension (`[tile][d][64]`, the last tile padded with zeros).
pub fn keys_in_tiles(keys: &[f32], stride: usize, offset: usize, head_dim: usize, len: usize) -> Vec<f32> {
    let tiles = len.div_ceil(KV_TILE);
    let mut out = vec![0.0; tiles * head_dim * KV_TILE];
    for j in 0..len {
        let key = &keys[j * stride + offset..][..head_dim];
        let tile = &mut out[j / KV_TILE * head_dim * KV_TILE..][..head_dim * KV_TILE];
        for (d, &value) in key.iter().enumerate() {
            tile[d * KV_TILE + j % KV_TILE] = value;
        }
    }
    out
}

/// [`attend_head_f32`] with keys laid out once for many queries ([`keys_in_tiles`]), so that a
/// tile's 64 dots run side by side in registers, each the same FMA chain over the dimensions as
/// one at a time: the same bits, without a dot's latency for every key. A vision encoder's every
/// patch attends to every patch, and one dot at a time its attention took as long as all its
/// matmuls. Positions before `positions.start` are skipped as there; `kv` gives the values.
pub fn attend_head_f32_tiled_keys(
    query: &[f32],
    tiled_keys: &[f32],
    kv: &HeadView<'_, f32>,
    positions: std::ops::Range<usize>,
    scoring: Scoring,
    sink: Option<f32>,
    out: &mut [f32],
) {
    let head_dim = query.len();
    attend_tiles(kv, positions.clone(), sink, out, |tile_start, weights| {
        let tile = &tiled_keys[tile_start / KV_TILE * head_dim * KV_TILE..][..head_dim * KV_TILE];
        let dots = kv_rows::dot_with_tiled_keys(query, tile);
        for (j, (w, dot)) in weights.iter_mut().zip(dots).enumerate() {
            let position = tile_start + j;
            *w = if positions.contains(&position) { scoring.score(dot) } else { f32::NEG_INFINITY };
        }
    });
}

/// The F32 kernel's tiles over `positions`: `fill(tile_start, weights)` scores a tile's 64 cache
/// positions (−∞ for those outside), then the online softmax takes the tile and its values.
fn attend_tiles(
    kv: &HeadView<'_, f32>,
    positions: std::ops::Range<usize>,
    sink: Option<f32>,
    out: &mut [f32],
    mut fill: impl FnMut(usize, &mut [f32; KV_TILE]),
) {
    out.fill(0.0);
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    let mut weights = [0.0f32; KV_TILE];
    let mut tile_start = positions.start / KV_TILE * KV_TILE;
    while tile_start < positions.end {
        fill(tile_start, &mut weights);
        // Not f32::max, which wasm has only as a call to libm's fmaxf (NaNs are skipped alike).
        let tile_max = weights.iter().fold(f32::NEG_INFINITY, |max, &w| if w > max { w } else { max });
        if tile_max > max {
            let rescale = (max - tile_max).exp();
            out.iter_mut().for_each(|o| *o *= rescale);
            sum *= rescale;
            max = tile_max;
        }
        // ggml_vec_soft_max_f32 over the tile.
        sum = (f64::from(sum) + exp_and_sum(&mut weights, max)) as f32;
        // Σ w·v, each output an FMA chain over the tile's positions in order.
        kv_rows::add_weighted_rows(out, &weights, |i| kv.value(tile_start + i));
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
    /// values), the sink an extra term without a value: the tiled F32 kernel within 1e-5, the
    /// one-pass kernel as below for each cache type.
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
        // The one-pass kernel over each cache type. F16 rows summed in F16 as llama.cpp's are
        // within 2e-3; summed in f32, or F32 rows, as close as the tiled kernel (nearer the exact
        // result than llama.cpp's own); a Q8_0 row's quantization error (at most half a step of
        // 1/127 of its largest value) stays within 1e-2 here.
        let (keys16, values16) = (to_f16(keys), to_f16(values));
        let (keys8, values8) = (to_q8_0(keys), to_q8_0(values));
        let exact = AttentionPrecision::Exact;
        let check = |name: &str, got: Vec<f32>, bound: f64| {
            for (o, e) in got.iter().zip(&expected) {
                assert!((f64::from(*o) - e).abs() < bound, "{name}, sink {sink:?}: {o} vs {e}");
            }
        };
        let one_pass = |precision| OnePass { query, positions, scoring, sink, precision };
        for precision in [AttentionPrecision::Exact, AttentionPrecision::Fast] {
            // What rounding to F16 (a query for F16 keys, or the sums over F16 values) costs.
            let (run, f16_sums) = (one_pass(precision), if precision == exact { 2e-3 } else { 1e-5 });
            let check = |types: &str, got, bound| check(&format!("{precision:?}, {types}"), got, bound);
            check("f16", run.run(&keys16, &values16), f16_sums);
            check("f32", run.run(keys, values), 1e-5);
            check("f32 keys, f16 values", run.run(keys, &values16), f16_sums);
            check("f16 keys, f32 values", run.run(&keys16, values), f16_sums);
            if head_dim.is_multiple_of(QK) {
                check("q8_0", run.run(&keys8, &values8), 1e-2);
                check("q8_0 keys, f16 values", run.run(&keys8, &values16), 1e-2);
                check("f32 keys, q8_0 values", run.run(keys, &values8), 1e-2);
            }
        }
    }

    fn to_f16(values: &[f32]) -> Vec<f16> {
        values.iter().map(|&v| f16::from_f32(v)).collect()
    }

    fn to_q8_0(values: &[f32]) -> Vec<BlockQ8_0> {
        let mut blocks = vec![BlockQ8_0::default(); values.len() / QK];
        crate::tensor::quantize_q8_0(values, &mut blocks);
        blocks
    }

    /// One head's one-pass attention over rows of any cache types.
    #[derive(Clone, Copy)]
    struct OnePass<'a> {
        query: &'a [f32],
        positions: usize,
        scoring: Scoring,
        sink: Option<f32>,
        precision: AttentionPrecision,
    }

    impl OnePass<'_> {
        fn run<K: CachedKey, V: CachedValue>(self, keys: &[K], values: &[V]) -> Vec<f32> {
            let head_dim = self.query.len();
            let kv = HeadView { keys, values, stride: head_dim, offset: 0, head_dim };
            let mut out = vec![0.0; head_dim];
            let sinks = self.sink.as_ref().map(std::slice::from_ref);
            let mut scratch = GroupScratch::default();
            let (query, positions) = (self.query, 0..self.positions);
            attend_group_one_pass(
                query,
                &kv,
                positions,
                self.scoring,
                sinks,
                self.precision,
                &mut scratch,
                &mut out,
            );
            out
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
        let (head_dim, heads, positions) = (64, 3, 9);
        let value = |i: usize, m: usize, scale: f32| ((i * m % 29) as f32 - 14.0) * scale;
        let keys: Vec<f32> = (0..positions * head_dim).map(|i| value(i, 7, 0.05)).collect();
        let values: Vec<f32> = (0..positions * head_dim).map(|i| value(i, 11, 0.3)).collect();
        let queries: Vec<f32> = (0..heads * head_dim).map(|i| (i as f32 * 0.37).sin() * 2.0).collect();
        group_equals_heads(&queries, &to_f16(&keys), &to_f16(&values));
        group_equals_heads(&queries, &keys, &values);
        group_equals_heads(&queries, &to_q8_0(&keys), &to_q8_0(&values));
        group_equals_heads(&queries, &to_q8_0(&keys), &to_f16(&values));
    }

    fn group_equals_heads<K: CachedKey, V: CachedValue>(queries: &[f32], keys: &[K], values: &[V]) {
        let head_dim = 64;
        let heads = queries.len() / head_dim;
        let positions = keys.len() * K::VALUES / head_dim;
        let kv = HeadView { keys, values, stride: head_dim, offset: 0, head_dim };
        let scoring = Scoring::new(0.2, Some(30.0));
        // One sink above every score (it rescales what was summed), the others below.
        let sinks = [40.0, -3.0, 0.5];
        for precision in [AttentionPrecision::Exact, AttentionPrecision::Fast] {
            let mut scratch = GroupScratch::default();
            let mut together = vec![0.0; heads * head_dim];
            let range = 2..positions;
            let sinks = Some(&sinks[..]);
            attend_group_one_pass(
                queries,
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
                let mut alone = vec![0.0; head_dim];
                let sink = sinks.map(|s| &s[h..h + 1]);
                let range = 2..positions;
                attend_group_one_pass(query, &kv, range, scoring, sink, precision, &mut scratch, &mut alone);
                assert_eq!(
                    got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    alone.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    "{} keys, {} values, {precision:?} head {h}",
                    std::any::type_name::<K>(),
                    std::any::type_name::<V>()
                );
            }
        }
    }
}
