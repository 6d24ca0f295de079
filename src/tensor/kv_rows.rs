//! The f16 rows of the KV cache, as attention reads them: widened to f32, dotted with a query,
//! and added into a buffer that is rounded to F16 after every operation, as llama.cpp's
//! one-pass flash-attention kernel keeps its `Σ p·V` in F16 (see `model/attention.rs`), or
//! kept in f32 (attention's `'fast'` precision).
//!
//! The functions here are the entry points; each calls this build's kernel from the table
//! (`kernels.rs`). The scalar references below are the default; the SIMD128 kernels give the
//! same bits (checked in headless Chromium by `kernel_checks.rs`), so decoding from the cache
//! without widening it first changes no logit.

use half::f16;

use super::activations::Q8_0Activation;
use super::blocks::BlockQ8_0;
use super::kernels::{Active, Tile, active};

/// `dst[i] = src[i]` as f32.
pub fn widen(src: &[f16], dst: &mut [f32]) {
    active::widen_kv_row(src, dst)
}

/// `query · key` in ggml's F16 summing order ([`dot_in_ggml_order`]), over the shorter length.
pub fn dot_with_key(query: &[f32], key: &[f16]) -> f32 {
    active::dot_kv_row(query, key)
}

/// [`dot_with_key`] of each query head in `queries` (rows of `key.len()`, one per score) with
/// one key: the heads of a GQA group, which share their keys; the key is read once for all.
pub fn dot_with_key_heads(queries: &[f32], key: &[f16], scores: &mut [f32]) {
    active::dot_kv_row_heads(queries, key, scores)
}

/// [`add_weighted_rounded`] of one value row into each head's accumulator in `accs` (rows of
/// `values.len()`, one per weight): the heads of a GQA group; the values are read once for all.
pub fn add_weighted_rounded_heads(accs: &mut [f32], values: &[f16], weights: &[f32]) {
    active::mad_kv_row_rounded_heads(accs, values, weights)
}

/// [`add_weighted`] of one value row into each head's accumulator in `accs`, kept in f32
/// (attention's `'fast'` precision): the heads of a GQA group; the values are read once for all.
pub fn add_weighted_heads(accs: &mut [f32], values: &[f16], weights: &[f32]) {
    active::mad_kv_row_heads(accs, values, weights)
}

/// Each query head's Q8_0 blocks in `queries` (rows of `key.len()` blocks, one per score) ·
/// one Q8_0 key row: llama.cpp's `vec_dot_q8_0_q8_0`, which its attention runs on a Q8_0
/// cache (`-ctk q8_0`), here the same tile kernel as a Q8_0 weight row's.
pub fn dot_q8_0_key_heads(queries: &[Q8_0Activation], key: &[BlockQ8_0], scores: &mut [f32]) {
    for (score, query) in scores.iter_mut().zip(queries.chunks_exact(key.len().max(1))) {
        *score = <Active as Tile<BlockQ8_0>>::dot(key, query);
    }
}

/// Each query head in `queries` (rows of `key.len()`) · one f32 key row: `ggml_vec_dot_f32`,
/// what llama.cpp's attention runs on an F32 cache, here the F32 weight rows' tile kernel.
pub fn dot_f32_key_heads(queries: &[f32], key: &[f32], scores: &mut [f32]) {
    // SAFETY: any f32 is four plain bytes; u8 has alignment 1.
    let key_bytes =
        unsafe { std::slice::from_raw_parts(key.as_ptr().cast::<u8>(), std::mem::size_of_val(key)) };
    for (score, query) in scores.iter_mut().zip(queries.chunks_exact(key.len().max(1))) {
        *score = <Active as Tile<f32>>::dot(key_bytes, query);
    }
}

/// `query · keys[k]` for four f32 keys of the query's length ([`dot_in_4_lanes`] each): the
/// tiled kernel's scores in wasm, where one key's sum in ggml's lanes spends as much on its
/// reduction as on its products, and four keys side by side reduce together.
pub fn dot_with_keys4(query: &[f32], keys: [&[f32]; 4]) -> [f32; 4] {
    active::dot_f32_keys4(query, keys)
}

/// Positions per tile of keys laid out dimension by dimension (`[d][KEY_TILE]`: attention's
/// `keys_in_tiles`).
pub const KEY_TILE: usize = 64;

/// The dots of `query` with a tile of [`KEY_TILE`] keys laid out dimension by dimension
/// (`tile[d * KEY_TILE + j]` is key `j`'s element `d`): each a chain of [`mul_add`] over the
/// dimensions in order, as one key at a time, side by side.
pub fn dot_with_tiled_keys(query: &[f32], tile: &[f32]) -> [f32; KEY_TILE] {
    active::dot_tiled_keys(query, tile)
}

/// The scalar reference of [`dot_with_tiled_keys`] (natively the kernel: 64 sums are eight
/// AVX2 registers).
pub(super) fn dot_tiled_keys(query: &[f32], tile: &[f32]) -> [f32; KEY_TILE] {
    let mut dots = [0.0f32; KEY_TILE];
    for (&q, keys) in query.iter().zip(tile.chunks_exact(KEY_TILE)) {
        for (dot, &k) in dots.iter_mut().zip(keys) {
            *dot = mul_add(q, k, *dot);
        }
    }
    dots
}

/// `out[j] = Σ weights[i] · value(i)[j] + out[j]`, a chain of [`mul_add`] over the rows in
/// order for each output; a row whose weight is 0 is skipped, never read (attention's masked
/// positions, which may lie past the cache's end).
pub fn add_weighted_rows<'a>(out: &mut [f32], weights: &[f32], value: impl Fn(usize) -> &'a [f32]) {
    active::add_weighted_rows(out, weights, value)
}

/// The scalar reference of [`add_weighted_rows`] (natively the kernel): 64 outputs at a time
/// held in registers rather than loaded and stored for every row.
pub(super) fn add_weighted_rows_scalar<'a>(
    out: &mut [f32],
    weights: &[f32],
    value: impl Fn(usize) -> &'a [f32],
) {
    const CHUNK: usize = 64;
    for (c, chunk) in out.chunks_mut(CHUNK).enumerate() {
        let mut sums = [0.0f32; CHUNK];
        sums[..chunk.len()].copy_from_slice(chunk);
        for (i, &w) in weights.iter().enumerate() {
            if w != 0.0 {
                for (o, &v) in sums.iter_mut().zip(&value(i)[c * CHUNK..]) {
                    *o = mul_add(w, v, *o);
                }
            }
        }
        chunk.copy_from_slice(&sums[..chunk.len()]);
    }
}

/// `query · key` in 4 lanes (lane `l` sums the elements `l mod 4` in order, by [`mul_add`]),
/// reduced `(0 + 2) + (1 + 3)`, the elements past the whole 4s added after.
pub fn dot_in_4_lanes(query: &[f32], key: &[f32]) -> f32 {
    let n = query.len().min(key.len());
    let whole = n & !3;
    let mut lanes = [0.0f32; 4];
    for (q, k) in query[..whole].chunks_exact(4).zip(key[..whole].chunks_exact(4)) {
        for l in 0..4 {
            lanes[l] = mul_add(q[l], k[l], lanes[l]);
        }
    }
    let mut sum = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
    for i in whole..n {
        sum = mul_add(query[i], key[i], sum);
    }
    sum
}

/// `accs[h][i] += values[i] · weights[h]` for each head's accumulator in `accs` (rows of
/// `values.len()`), one multiply-add each: `ggml_vec_mad_f32`, how llama.cpp adds value rows
/// that are not F16 (an F32 cache's, or a Q8_0 one's decoded) into its f32 sums. The loop is
/// left to the compiler's vectorizer: no lane order to keep.
pub fn add_weighted_f32_heads(accs: &mut [f32], values: &[f32], weights: &[f32]) {
    for (acc, &weight) in accs.chunks_exact_mut(values.len().max(1)).zip(weights) {
        for (a, &v) in acc.iter_mut().zip(values) {
            *a = mul_add(v, weight, *a);
        }
    }
}

/// A Q8_0 row decoded to f32, `q · d` (`dequantize_row_q8_0`).
pub fn widen_q8_0(blocks: &[BlockQ8_0], dst: &mut [f32]) {
    super::legacy::decode_q8_0(blocks, dst)
}

/// `acc[i] = round_to_f16(values[i] · weight + acc[i])`, the product and the sum each rounded
/// in f32 (see [`mul_add`]).
pub fn add_weighted_rounded(acc: &mut [f32], values: &[f16], weight: f32) {
    active::mad_kv_row_rounded(acc, values, weight)
}

/// `row[i] = round_to_f16(row[i] · factor)`.
pub fn scale_rounded(row: &mut [f32], factor: f32) {
    active::scale_rounded_to_f16(row, factor)
}

/// The multiply-add of attention's inner loops: the fused instruction natively, where it
/// reproduces llama.cpp's GCC build bit for bit; a plain multiply and add in wasm, which has no
/// FMA instruction (exact emulation made attention a third of the prefill time there) and whose
/// SIMD128 matmuls sum in their own order anyway.
#[inline(always)]
pub fn mul_add(a: f32, b: f32, c: f32) -> f32 {
    if cfg!(target_family = "wasm") { a * b + c } else { a.mul_add(b, c) }
}

/// Dot product summed in ggml's AVX2 order for F16 rows (`ggml_vec_dot_f16`): 4 × 8 lane
/// accumulators over steps of 32, reduced pairwise, the tail in double. For products that are
/// exact in f32 (two halves), only this order decides the bits, and it is the same here.
pub fn dot_in_ggml_order<T: Copy>(x: &[f32], y: &[T], to_f32: impl Fn(T) -> f32) -> f32 {
    let n = x.len().min(y.len());
    let whole = n & !31;
    let mut acc = [[0.0f32; 8]; 4];
    for (xs, ys) in x[..whole].chunks_exact(32).zip(y[..whole].chunks_exact(32)) {
        for (a, lanes) in acc.iter_mut().enumerate() {
            for (l, lane) in lanes.iter_mut().enumerate() {
                *lane += xs[a * 8 + l] * to_f32(ys[a * 8 + l]);
            }
        }
    }
    let mut sum = f64::from(super::float::reduce_accumulators(acc));
    for i in whole..n {
        sum += f64::from(x[i] * to_f32(y[i]));
    }
    sum as f32
}

/// Rounds to the nearest F16 value (ties to even) and returns it as f32: what storing into
/// an F16 buffer does, without leaving f32 arithmetic.
#[inline(always)]
pub fn round_to_f16(x: f32) -> f32 {
    let magnitude = x.abs();
    if magnitude.is_nan() {
        return x;
    }
    if magnitude >= F16_ROUNDS_TO_INFINITY {
        return f32::INFINITY.copysign(x);
    }
    if magnitude < F16_MIN_NORMAL {
        // Subnormal F16 values are multiples of 2^-24; scaling by a power of two is exact.
        return (x * F16_SUBNORMAL_STEPS).round_ties_even() * (1.0 / F16_SUBNORMAL_STEPS);
    }
    // Keep 10 of f32's 23 mantissa bits, rounding to nearest even; a carry bumps the exponent.
    let bits = x.to_bits();
    f32::from_bits((bits + 0x0FFF + ((bits >> 13) & 1)) & !0x1FFF)
}

/// The smallest normal F16, 2^-14.
pub(super) const F16_MIN_NORMAL: f32 = 6.103_515_6e-5;
/// Halfway between F16's largest finite value (65504) and the next step: from here up, rounding
/// gives infinity.
pub(super) const F16_ROUNDS_TO_INFINITY: f32 = 65520.0;
/// 2^24: F16's subnormals are whole multiples of its inverse.
pub(super) const F16_SUBNORMAL_STEPS: f32 = 16_777_216.0;

// Scalar reference kernels (the table's defaults).

pub(super) fn widen_kv_row(src: &[f16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

pub(super) fn dot_kv_row(query: &[f32], key: &[f16]) -> f32 {
    dot_in_ggml_order(query, key, f16::to_f32)
}

pub(super) fn dot_f32_keys4(query: &[f32], keys: [&[f32]; 4]) -> [f32; 4] {
    keys.map(|key| dot_in_4_lanes(query, key))
}

pub(super) fn mad_kv_row_rounded(acc: &mut [f32], values: &[f16], weight: f32) {
    for (a, v) in acc.iter_mut().zip(values) {
        *a = round_to_f16(mul_add(v.to_f32(), weight, *a));
    }
}

pub(super) fn dot_kv_row_heads(queries: &[f32], key: &[f16], scores: &mut [f32]) {
    for (score, query) in scores.iter_mut().zip(queries.chunks_exact(key.len().max(1))) {
        *score = dot_kv_row(query, key);
    }
}

pub(super) fn mad_kv_row_heads(accs: &mut [f32], values: &[f16], weights: &[f32]) {
    for (acc, &weight) in accs.chunks_exact_mut(values.len().max(1)).zip(weights) {
        for (a, v) in acc.iter_mut().zip(values) {
            *a = mul_add(v.to_f32(), weight, *a);
        }
    }
}

pub(super) fn mad_kv_row_rounded_heads(accs: &mut [f32], values: &[f16], weights: &[f32]) {
    for (acc, &weight) in accs.chunks_exact_mut(values.len().max(1)).zip(weights) {
        mad_kv_row_rounded(acc, values, weight);
    }
}

pub(super) fn scale_rounded_to_f16(row: &mut [f32], factor: f32) {
    for a in row.iter_mut() {
        *a = round_to_f16(*a * factor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_dot_sums_in_ggml_lane_order() {
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
        assert_eq!(dot_in_ggml_order(&x, &y, |v| v), expected);
        // The same values stored as halves.
        let y16: Vec<f16> = y.iter().map(|&v| f16::from_f32(v)).collect();
        assert_eq!(dot_with_key(&x, &y16), expected);
    }

    #[test]
    fn the_weighted_add_rounds_every_sum_to_a_half() {
        let mut acc = vec![1.0f32; 3];
        let values = [f16::from_f32(1.0 / 4096.0), f16::from_f32(1.0 / 1024.0), f16::from_f32(-2.0)];
        add_weighted_rounded(&mut acc, &values, 1.0);
        // 1 + 2^-12 rounds back to 1 in F16 (its step at 1 is 2^-10); 1 + 2^-10 is a half.
        assert_eq!(acc, [1.0, 1.0 + 1.0 / 1024.0, -1.0]);
        scale_rounded(&mut acc, -1.0 / 3.0);
        let third = f16::from_f32(1.0 / 3.0).to_f32();
        assert_eq!(acc, [-third, f16::from_f32(-(1.0 + 1.0 / 1024.0) / 3.0).to_f32(), third]);
    }
}
