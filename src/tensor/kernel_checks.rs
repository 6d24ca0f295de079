//! Every kernel of this build's tables (`kernels.rs`: each format's tile entry, and the kernels
//! that are no format's dot) against its scalar reference on random blocks, and row groups
//! against single rows. Test code only, called by the unit tests and by `tests/web/`, which
//! runs it in the browsers on the SIMD128, relaxed-SIMD and Memory64 builds (`./build.sh test`).
//! It is in every build so that those tests link the release library as it is, with no feature
//! of their own; nothing else calls it, so link-time optimization leaves it out of the shipped
//! module.

/// Compares every kernel of this build's table with its scalar reference on random blocks (several lengths, an
/// unaligned weight buffer); the difference must stay within
/// `64 · f32::EPSILON · Σ|wᵢ·aᵢ|`. Returns a description of the first mismatch.
pub fn check_kernels_match_scalar() -> Result<(), String> {
    use super::format::with_weight_format;
    use super::{QuantizedActivations, WeightType};

    #[cfg(all(target_family = "wasm", target_feature = "simd128"))]
    check_f16_conversion()?;
    #[cfg(all(target_family = "wasm", target_feature = "simd128"))]
    check_f16_fusing()?;
    #[cfg(all(target_family = "wasm", target_feature = "simd128"))]
    check_k4_scale_unpack()?;
    check_kv_rows()?;
    check_attention_tiles()?;
    check_scan_rows()?;
    check_f16_scan()?;
    check_read_checksum()?;
    check_row_groups()?;
    check_offset_formats_as_q8_0()?;

    let mut rng = SplitMix(0x5EED);
    for weight_type in WeightType::ALL {
        for blocks in [1usize, 3, 8] {
            let k = blocks * weight_type.block_len().max(256);
            let row_bytes = weight_type.row_bytes(k).map_err(|e| e.to_string())?;
            // One spare byte in front so that the weights start at an odd address.
            let mut buffer = rng.weights(weight_type, row_bytes + 1);
            if weight_type == WeightType::F16 {
                // Subnormals and the smallest normal must convert like the scalar path.
                for (slot, bits) in [0x0001u16, 0x83FF, 0x0400, 0x8000].iter().enumerate() {
                    buffer[1 + 2 * slot..3 + 2 * slot].copy_from_slice(&bits.to_le_bytes());
                }
            }
            let weights = &buffer[1..];
            let x: Vec<f32> = (0..k).map(|_| rng.normal()).collect();
            let q = QuantizedActivations::for_weights(weight_type, &x, 1, k).map_err(|e| e.to_string())?;
            let (scalar, simd) = with_weight_format!(weight_type, W => scalar_and_active::<W>(weights, &q));

            let mut w = vec![0.0f32; k];
            super::dequantize_row(weight_type, weights, &mut w).map_err(|e| e.to_string())?;
            let mut a = vec![0.0f32; k];
            q.dequantize_row(0, &mut a).map_err(|e| e.to_string())?;
            let abs_sum: f32 = w.iter().zip(&a).map(|(w, a)| (w * a).abs()).sum();
            let tolerance = 64.0 * f32::EPSILON * abs_sum;
            let difference = (scalar - simd).abs();
            if difference.is_nan() || difference > tolerance {
                return Err(format!(
                    "{weight_type:?} with {k} elements: scalar {scalar}, simd {simd}, tolerance {tolerance}"
                ));
            }
        }
    }
    Ok(())
}

/// The SIMD128 f16 widening must agree with `half` on every finite bit pattern (infinities and
/// NaNs are kept out of it: the KV rows' kernels check for them, and a model's F16 weights are
/// checked when it loads).
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
fn check_f16_conversion() -> Result<(), String> {
    use super::simd128::{Held, widen_f16x8};
    use super::wasm_simd::*;
    let held = Held::new();
    for first in (0..=u16::MAX).step_by(8) {
        let bits: [u16; 8] = std::array::from_fn(|i| first + i as u16);
        let [low, high] =
            widen_f16x8(u16x8(bits[0], bits[1], bits[2], bits[3], bits[4], bits[5], bits[6], bits[7]), held);
        let ours = [
            f32x4_extract_lane::<0>(low),
            f32x4_extract_lane::<1>(low),
            f32x4_extract_lane::<2>(low),
            f32x4_extract_lane::<3>(low),
            f32x4_extract_lane::<0>(high),
            f32x4_extract_lane::<1>(high),
            f32x4_extract_lane::<2>(high),
            f32x4_extract_lane::<3>(high),
        ];
        for (&h, &got) in bits.iter().zip(&ours) {
            let expected = half::f16::from_bits(h).to_f32();
            if expected.is_finite() && got.to_bits() != expected.to_bits() {
                return Err(format!("f16 {h:#06x}: simd {got:e} ({:#x}), half {expected:e}", got.to_bits()));
            }
        }
    }
    Ok(())
}

/// The F16 dots may fuse their multiply-adds (relaxed SIMD) only because the product of two
/// halves is exact in f32: fused and unfused sums must be the same bits, on rows of normal,
/// tiny and subnormal halves and large activations.
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
fn check_f16_fusing() -> Result<(), String> {
    use super::F16Activation;
    use super::simd128::f16_dot_fused_and_unfused;
    let mut rng = SplitMix(0xF0A);
    for round in 0..64 {
        let k = 256 + 8 * round;
        let scale = [1.0f32, 1e-3, 6e-5, 3e3][round % 4];
        let weights: Vec<u8> =
            (0..k).flat_map(|_| half::f16::from_f32(rng.normal() * scale).to_le_bytes()).collect();
        let activations: Vec<F16Activation> =
            (0..k).map(|_| F16Activation::new(half::f16::from_f32(rng.normal() * scale).to_f32())).collect();
        let (fused, unfused) = f16_dot_fused_and_unfused(&weights, &activations);
        if fused.to_bits() != unfused.to_bits() {
            return Err(format!("F16 dot of {k} at scale {scale}: fused {fused:e}, unfused {unfused:e}"));
        }
    }
    Ok(())
}

/// The vector unpack of Q4_K/Q5_K scales and mins must give `scales_and_mins_k4`'s values on
/// every byte pattern it is fed (random packings, and every byte value in every position).
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
fn check_k4_scale_unpack() -> Result<(), String> {
    use super::kquants::scales_and_mins_k4;
    use super::simd128::{Held, k4_scales_and_mins};
    use super::wasm_simd::*;
    let held = Held::new();
    let mut rng = SplitMix(0x4B4);
    let random = (0..2048).map(|_| std::array::from_fn(|_| rng.next() as u8));
    let single = (0..12 * 256).map(|i| std::array::from_fn(|j| if j == i / 256 { i as u8 } else { 0xA5 }));
    for packed in random.chain(single) {
        let [scales, mins] = k4_scales_and_mins(&packed, held);
        let lanes = |v: v128| -> [u16; 8] {
            let mut bytes = [0u8; 16];
            // SAFETY: 16 writable bytes; v128.store has no alignment requirement.
            unsafe { v128_store(bytes.as_mut_ptr().cast(), v) };
            std::array::from_fn(|i| u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]))
        };
        let (scales_u8, mins_u8) = scales_and_mins_k4(&packed);
        let expected = (scales_u8.map(u16::from), mins_u8.map(u16::from));
        if (lanes(scales), lanes(mins)) != expected {
            return Err(format!(
                "K-quant scales {packed:02x?}: simd {:?}, scalar {expected:?}",
                (lanes(scales), lanes(mins))
            ));
        }
    }
    Ok(())
}

/// The scan for infinities and NaNs among halves must answer as the scalar one on every length
/// (vectors and a tail), wherever a special lies, whatever its sign and mantissa.
fn check_f16_scan() -> Result<(), String> {
    use super::kernels::{active, scalar};
    let mut rng = SplitMix(0x5CA7);
    for round in 0..400 {
        let halves = round % 70;
        let mut bytes: Vec<u8> = (0..2 * halves + round % 2).map(|_| rng.next() as u8).collect();
        // Clear every exponent's top bit: finite halves, unless one is put back below.
        bytes.iter_mut().skip(1).step_by(2).for_each(|high| *high &= !0x40);
        if halves > 0 && round % 3 != 0 {
            let at = (rng.next() as usize) % halves;
            let special = [0x7C00u16, 0xFC00, 0x7E01, 0xFFFF][round % 4];
            bytes[2 * at..2 * at + 2].copy_from_slice(&special.to_le_bytes());
        }
        let (expected, got) = (scalar::any_non_finite_f16(&bytes), active::any_non_finite_f16(&bytes));
        if expected != got {
            return Err(format!("f16 scan of {} bytes: scalar {expected}, simd {got}", bytes.len()));
        }
    }
    Ok(())
}

/// Mamba-2's state-row scan must give the scalar reference's bits: the new state and the
/// read-out, for rows of whole 32s and with a tail.
/// Attention's tile kernels and softmax's exponentials against their scalar references, bit for
/// bit: a tile of keys laid out by dimension, weighted value rows (zero weights skipped), and
/// `ggml_expf` of shifted scores over its whole range (both ends, infinities and NaN included).
fn check_attention_tiles() -> Result<(), String> {
    use super::kernels::{active, scalar};
    use super::kv_rows::KEY_TILE;
    let same = |a: &[f32], b: &[f32]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
    };
    let mut rng = SplitMix(0xA77E);
    for (round, &len) in [64usize, 72, 7, 128, 3, 37, 1].iter().enumerate() {
        let scale = [1.0f32, 3e-3, 40.0][round % 3];
        let query: Vec<f32> = (0..len).map(|_| rng.normal() * scale).collect();
        let tile: Vec<f32> = (0..len * KEY_TILE).map(|_| rng.normal()).collect();
        let (expected, got) = (scalar::dot_tiled_keys(&query, &tile), active::dot_tiled_keys(&query, &tile));
        if !same(&expected, &got) {
            return Err(format!("tiled key dots of {len} dimensions: scalar {expected:?}, simd {got:?}"));
        }
        let weights: Vec<f32> =
            (0..KEY_TILE).map(|i| if i % 7 == 3 { 0.0 } else { rng.uniform() * scale }).collect();
        let rows: Vec<Vec<f32>> = (0..KEY_TILE)
            .map(
                |i| if weights[i] == 0.0 { Vec::new() } else { (0..len + 5).map(|_| rng.normal()).collect() },
            )
            .collect();
        let start: Vec<f32> = (0..len).map(|_| rng.normal()).collect();
        let (mut expected, mut got) = (start.clone(), start);
        scalar::add_weighted_rows(&mut expected, &weights, |i| &rows[i]);
        active::add_weighted_rows(&mut got, &weights, |i| &rows[i]);
        if !same(&expected, &got) {
            return Err(format!("weighted value rows of {len}: scalar {expected:?}, simd {got:?}"));
        }
    }
    let mut scores: Vec<f32> = (0..997).map(|_| (rng.uniform() - 0.9) * 250.0).collect();
    scores.extend([0.0, -0.0, 88.0, 89.0, -87.0, -104.0, -150.0, f32::NEG_INFINITY, f32::INFINITY, f32::NAN]);
    for max in [0.0f32, 12.5, -3.0] {
        let (mut expected, mut got) = (scores.clone(), scores.clone());
        scalar::exp_shifted(&mut expected, max);
        active::exp_shifted(&mut got, max);
        if let Some(i) = (0..scores.len()).find(|&i| !same(&expected[i..=i], &got[i..=i])) {
            return Err(format!("exp({} - {max}): scalar {:e}, simd {:e}", scores[i], expected[i], got[i]));
        }
    }
    Ok(())
}

fn check_scan_rows() -> Result<(), String> {
    use super::kernels::{active, scalar};
    let mut rng = SplitMix(0x55A2);
    for len in [32usize, 128, 64 + 7, 5] {
        let mut random = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.normal()).collect() };
        let (start, b, c) = (random(len), random(len), random(len));
        let (decay, x_dt) = (0.83, -0.41);
        let (mut expected, mut got) = (start.clone(), start);
        let expected_read = scalar::scan_state_row(&mut expected, &b, &c, decay, x_dt);
        let read = active::scan_state_row(&mut got, &b, &c, decay, x_dt);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        if expected_read.to_bits() != read.to_bits() || bits(&expected) != bits(&got) {
            return Err(format!("scan of a state row of {len}: read {read:e}, scalar {expected_read:e}"));
        }
    }
    Ok(())
}

/// The KV-row kernels attention uses must give the scalar references' bits (NaN for NaN):
/// rows of several lengths (tails included) at scales from subnormal to overflowing, with an
/// infinity or a NaN in some, and rounding on arbitrary f32 bit patterns.
fn check_kv_rows() -> Result<(), String> {
    use super::kernels::{active, scalar};
    use half::f16;
    let same = |a: &[f32], b: &[f32]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
    };
    let mut rng = SplitMix(0x4B56);
    for round in 0..96 {
        let len = [64usize, 128, 256, 70, 7, 33, 520][round % 7];
        let scale = [1.0f32, 3e-3, 2e-6, 2e4][round / 6 % 4];
        let mut values: Vec<f16> = (0..len).map(|_| f16::from_f32(rng.normal() * scale)).collect();
        if round % 5 == 4 {
            let special = [0x7C00u16, 0xFC00, 0x7E01][round % 3];
            values[(rng.next() as usize) % len] = f16::from_bits(special);
        }
        let query: Vec<f32> = (0..len).map(|_| f16::from_f32(rng.normal()).to_f32()).collect();
        let what = format!("{len} halves at scale {scale} (round {round})");

        // Four f32 keys at once (an F32 cache's, or F16 ones widened), each as alone.
        let keys: Vec<Vec<f32>> = (0..4).map(|_| (0..len).map(|_| rng.normal() * scale).collect()).collect();
        let keys4: [&[f32]; 4] = std::array::from_fn(|k| &keys[k][..]);
        let (expected, got) = (scalar::dot_f32_keys4(&query, keys4), active::dot_f32_keys4(&query, keys4));
        let alone = keys4.map(|key| super::kv_rows::dot_in_4_lanes(&query, key));
        if !same(&expected, &got) || !same(&alone, &got) {
            return Err(format!("four f32 key dots of {what}: scalar {expected:?}, simd {got:?}"));
        }
        let (expected, got) = (scalar::dot_kv_row(&query, &values), active::dot_kv_row(&query, &values));
        if !same(&[expected], &[got]) {
            return Err(format!("KV dot of {what}: scalar {expected:e}, simd {got:e}"));
        }
        let (mut expected, mut got) = (vec![0.0f32; len], vec![0.0f32; len]);
        scalar::widen_kv_row(&values, &mut expected);
        active::widen_kv_row(&values, &mut got);
        if !same(&expected, &got) {
            return Err(format!("KV widening of {what} differs"));
        }
        let weight = rng.uniform() * [1.0, 300.0][round % 2];
        let start: Vec<f32> = (0..len).map(|_| f16::from_f32(rng.normal() * scale).to_f32()).collect();
        let (mut expected, mut got) = (start.clone(), start.clone());
        scalar::mad_kv_row_rounded(&mut expected, &values, weight);
        active::mad_kv_row_rounded(&mut got, &values, weight);
        if !same(&expected, &got) {
            return Err(format!("KV rounded multiply-add of {what}, weight {weight}, differs"));
        }
        // Three heads sharing the row: each as the scalar single-head kernel gives it.
        let heads = 3;
        let queries: Vec<f32> = (0..heads * len).map(|_| f16::from_f32(rng.normal()).to_f32()).collect();
        let (mut expected_scores, mut scores) = (vec![0.0f32; heads], vec![0.0f32; heads]);
        scalar::dot_kv_row_heads(&queries, &values, &mut expected_scores);
        active::dot_kv_row_heads(&queries, &values, &mut scores);
        let singles: Vec<f32> = queries.chunks_exact(len).map(|q| scalar::dot_kv_row(q, &values)).collect();
        if !same(&expected_scores, &scores) || !same(&singles, &scores) {
            return Err(format!("KV dots of {heads} heads with {what}: {scores:?}, expected {singles:?}"));
        }
        let weights: Vec<f32> = (0..heads).map(|_| rng.uniform() * [1.0, 300.0][round % 2]).collect();
        let starts: Vec<f32> =
            (0..heads * len).map(|_| f16::from_f32(rng.normal() * scale).to_f32()).collect();
        let (mut expected_accs, mut accs) = (starts.clone(), starts.clone());
        scalar::mad_kv_row_rounded_heads(&mut expected_accs, &values, &weights);
        active::mad_kv_row_rounded_heads(&mut accs, &values, &weights);
        let mut singles = starts;
        for (acc, &weight) in singles.chunks_exact_mut(len).zip(&weights) {
            scalar::mad_kv_row_rounded(acc, &values, weight);
        }
        if !same(&expected_accs, &accs) || !same(&singles, &accs) {
            return Err(format!("KV rounded multiply-adds of {heads} heads with {what} differ"));
        }
        let (mut expected_accs, mut accs) = (expected_accs.clone(), expected_accs);
        scalar::mad_kv_row_heads(&mut expected_accs, &values, &weights);
        active::mad_kv_row_heads(&mut accs, &values, &weights);
        if !same(&expected_accs, &accs) {
            return Err(format!("KV f32 multiply-adds of {heads} heads with {what} differ"));
        }
        let factor = rng.uniform() * [1.0, 1e-4, 5e3][round % 3];
        scalar::scale_rounded_to_f16(&mut expected, factor);
        active::scale_rounded_to_f16(&mut got, factor);
        if !same(&expected, &got) {
            return Err(format!("KV rounded scaling of {what}, factor {factor}, differs"));
        }
    }
    // Rounding itself, on any bits: normal, subnormal, overflowing, infinite and NaN inputs.
    let mut bits: Vec<f32> = (0..1 << 16).map(|_| f32::from_bits(rng.next() as u32)).collect();
    bits.extend([0.0, -0.0, 65519.0, 65520.0, -65520.0, 6.1e-5, 2.98e-8, 1.0 + 1.0 / 2048.0, f32::INFINITY]);
    let (mut expected, mut got) = (bits.clone(), bits.clone());
    scalar::scale_rounded_to_f16(&mut expected, 1.0);
    active::scale_rounded_to_f16(&mut got, 1.0);
    if let Some(i) = (0..got.len()).find(|&i| !same(&expected[i..i + 1], &got[i..i + 1])) {
        return Err(format!("rounding {:e} to f16: scalar {:e}, simd {:e}", bits[i], expected[i], got[i]));
    }
    Ok(())
}

/// A matmul must give every row the same bits as a single-row dot, batched or not: batching may
/// never change a logit. In wasm, `ROW_GROUP + 1` activation rows take a row group and a single row
/// (natively, from `BATCHED_FROM_ROWS` rows on, and for F32 and F16 from 2, matmuls take llama.cpp's
/// batched order, which may differ, so there the check stays below it); 1 activation row
/// (decode) takes weight pairs, and with 3 weight rows one row alone.
fn check_row_groups() -> Result<(), String> {
    use super::WeightType;
    let mut rng = SplitMix(0x6A0);
    let (rows_out, k) = (3usize, 256usize);
    use super::format::ROW_GROUP;
    // Natively, from 8 rows on, matmuls take llama.cpp's tiled order (`llama_order.rs`).
    let group_and_one = if cfg!(target_family = "wasm") { ROW_GROUP + 1 } else { 7 };
    for n in [group_and_one, 1] {
        for weight_type in WeightType::ALL {
            // llama.cpp's GEMM for F32 and F16 from 2 rows (`llama_order.rs`).
            let gemm = matches!(weight_type, WeightType::F32 | WeightType::F16);
            if n > 1 && gemm && cfg!(not(target_family = "wasm")) {
                continue;
            }
            matmul_equals_single_dots(&mut rng, weight_type, rows_out, k, n)?;
        }
    }
    // SIMD128's F16 GEMM (`simd128::matmul_f16`): weight tiles and activation blocks of every
    // kind of edge (an odd last row or pair, rows past a tile, a row length with a tail).
    #[cfg(all(target_family = "wasm", target_feature = "simd128"))]
    for (k, rows_out, n) in [(76usize, 300usize, 500usize), (8, 5, 3), (3, 2, 2), (1024, 3, 70)] {
        matmul_equals_single_dots(&mut rng, WeightType::F16, rows_out, k, n)?;
    }
    Ok(())
}

/// A matmul of `rows_out` random weight rows of `k` (starting at an odd address) with `n`
/// activation rows against each output's single `vec_dot`, bit for bit.
fn matmul_equals_single_dots(
    rng: &mut SplitMix,
    weight_type: super::WeightType,
    rows_out: usize,
    k: usize,
    n: usize,
) -> Result<(), String> {
    use super::{QuantizedActivations, matmul_quantized, vec_dot};
    let row_bytes = weight_type.row_bytes(k).map_err(|e| e.to_string())?;
    let buffer = rng.weights(weight_type, rows_out * row_bytes + 1);
    let weights = &buffer[1..];
    let x: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
    let q = QuantizedActivations::for_weights(weight_type, &x, n, k).map_err(|e| e.to_string())?;
    let mut out = vec![0.0f32; n * rows_out];
    matmul_quantized(weights, weight_type, rows_out, &q, &mut out).map_err(|e| e.to_string())?;
    for i in 0..n {
        for r in 0..rows_out {
            let single = vec_dot(weight_type, &weights[r * row_bytes..][..row_bytes], &q, i)
                .map_err(|e| e.to_string())?;
            if single.to_bits() != out[i * rows_out + r].to_bits() {
                return Err(format!(
                    "{weight_type:?} of {n} rows of {k}, row {i}, weight row {r}: matmul {} vs single {single}",
                    out[i * rows_out + r]
                ));
            }
        }
    }
    Ok(())
}

/// Q4_0 and Q5_0 weights `d·(c − o)` are Q8_0 weights with quants `c − o`: each table must give
/// them the same bits as its Q8_0 dot of those quants, in single rows and row groups. That pins
/// what the checks against the scalar kernels leave a tolerance for: the offset (taken out with
/// per-block activation sums in relaxed SIMD) may change no integer sum and no lane.
fn check_offset_formats_as_q8_0() -> Result<(), String> {
    use super::format::ROW_GROUP;
    use super::kernels::{Active, Tile};
    use super::{
        BlockQ4_0, BlockQ5_0, BlockQ8_0, Q8_0Activation, QuantizedActivations, WeightType, cast_blocks,
    };
    let mut rng = SplitMix(0x0FF5E7);
    let blocks = 8;
    let k = 32 * blocks;
    for round in 0..16 {
        let x: Vec<f32> = (0..ROW_GROUP * k).map(|_| rng.normal() * (1 + round % 3) as f32).collect();
        let q = QuantizedActivations::for_weights(WeightType::Q4_0, &x, ROW_GROUP, k)
            .map_err(|e| e.to_string())?;
        let rows: [&[Q8_0Activation]; ROW_GROUP] =
            std::array::from_fn(|r| q.row::<Q8_0Activation>(r).unwrap_or(&[]));

        let q4_0_bytes = rng.weights(WeightType::Q4_0, 1 + blocks * WeightType::Q4_0.block_bytes());
        let q4_0: &[BlockQ4_0] = cast_blocks(&q4_0_bytes[1..]).map_err(|e| e.to_string())?;
        let q5_0_bytes = rng.weights(WeightType::Q5_0, 1 + blocks * WeightType::Q5_0.block_bytes());
        let q5_0: &[BlockQ5_0] = cast_blocks(&q5_0_bytes[1..]).map_err(|e| e.to_string())?;
        let as_q8_0 = |d, code: &dyn Fn(usize) -> i8| BlockQ8_0 { d, qs: std::array::from_fn(code) };
        let q4_0_as_q8_0: Vec<BlockQ8_0> = q4_0
            .iter()
            .map(|b| as_q8_0(b.d, &|e| (if e < 16 { b.qs[e] & 0x0F } else { b.qs[e - 16] >> 4 }) as i8 - 8))
            .collect();
        let q5_0_as_q8_0: Vec<BlockQ8_0> = q5_0
            .iter()
            .map(|b| {
                as_q8_0(b.d, &|e| {
                    let nibble = if e < 16 { b.qs[e] & 0x0F } else { b.qs[e - 16] >> 4 };
                    let fifth = (u32::from_le_bytes(b.qh) >> e) & 1;
                    (nibble | (fifth as u8) << 4) as i8 - 16
                })
            })
            .collect();

        let cases = [
            (
                "Q4_0",
                rows.map(|row| <Active as Tile<BlockQ4_0>>::dot(q4_0, row)),
                <Active as Tile<BlockQ4_0>>::group(q4_0, rows),
                <Active as Tile<BlockQ8_0>>::group(&q4_0_as_q8_0, rows),
            ),
            (
                "Q5_0",
                rows.map(|row| <Active as Tile<BlockQ5_0>>::dot(q5_0, row)),
                <Active as Tile<BlockQ5_0>>::group(q5_0, rows),
                <Active as Tile<BlockQ8_0>>::group(&q5_0_as_q8_0, rows),
            ),
        ];
        for (name, single, grouped, expected) in cases {
            for r in 0..ROW_GROUP {
                for got in [single[r], grouped[r]] {
                    if got.to_bits() != expected[r].to_bits() {
                        return Err(format!("{name} row {r}: {got:e}, as Q8_0 {:e}", expected[r]));
                    }
                }
            }
        }
    }
    Ok(())
}

/// One row of `W` through the scalar reference and through this build's table, on the same
/// typed blocks.
fn scalar_and_active<W: super::QuantFormat>(
    weights: &[u8],
    activations: &super::QuantizedActivations,
) -> (f32, f32)
where
    super::kernels::Scalar: super::kernels::Tile<W>,
    super::kernels::Active: super::kernels::Tile<W>,
{
    use super::kernels::{Active, Scalar, Tile};
    let blocks = super::cast_blocks::<W::Block>(weights).unwrap_or(&[]);
    let a = activations.row::<W::Activation>(0).unwrap_or(&[]);
    (<Scalar as Tile<W>>::dot(blocks, a), <Active as Tile<W>>::dot(blocks, a))
}

/// splitmix64, so the check needs no test-only helpers.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }

    fn normal(&mut self) -> f32 {
        let u1 = 1.0 - self.uniform();
        (-2.0 * u1.ln()).sqrt() * (core::f32::consts::TAU * self.uniform()).cos()
    }

    /// `len` bytes of random weights; the f16 scales of block formats get sane values. The
    /// buffer starts with one spare byte, so block `b` starts at `1 + b * block_bytes`.
    fn weights(&mut self, weight_type: super::WeightType, len: usize) -> Vec<u8> {
        use super::WeightType as W;
        let mut out: Vec<u8> = (0..len).map(|_| self.next() as u8).collect();
        let scale_offsets: &[usize] = match weight_type {
            W::Q8_0 | W::Q4_0 | W::Q5_0 | W::Q4_1 | W::Q5_1 | W::Q4_K | W::Q5_K | W::IQ4_NL => &[0, 2],
            W::IQ4_XS | W::IQ2_XXS | W::IQ3_XXS | W::IQ3_S | W::IQ2_XS | W::IQ2_S | W::IQ1_S => &[0],
            W::Q2_K => &[80, 82],
            W::Q3_K => &[108],
            W::Q6_K => &[208],
            _ => &[],
        };
        if weight_type == W::F32 {
            for (i, chunk) in out[1..].chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&(self.normal() * (1.0 + (i % 7) as f32)).to_le_bytes());
            }
        } else if weight_type == W::F16 {
            for chunk in out[1..].chunks_exact_mut(2) {
                chunk.copy_from_slice(&half::f16::from_f32(self.normal()).to_le_bytes());
            }
        } else if weight_type == W::BF16 {
            for chunk in out[1..].chunks_exact_mut(2) {
                chunk.copy_from_slice(&half::bf16::from_f32(self.normal()).to_le_bytes());
            }
        }
        if weight_type == W::MXFP4 {
            // Its E8M0 scale, 2^(e - 127): near the f16 scales of the other formats.
            for block in out[1..].chunks_exact_mut(weight_type.block_bytes()) {
                block[0] = 112 + (self.next() % 10) as u8;
            }
        }
        if weight_type == W::IQ1_M {
            // Its f16 scale is the top nibble of each of the four u16 at bytes 48..56.
            for block in out[1..].chunks_exact_mut(weight_type.block_bytes()) {
                let value = (0.001 + 0.05 * self.uniform()) * if self.next() & 1 == 0 { 1.0 } else { -1.0 };
                let bits = half::f16::from_f32(value).to_bits();
                for (w, word) in block[48..56].chunks_exact_mut(2).enumerate() {
                    let low = u16::from_le_bytes([word[0], word[1]]) & 0x0FFF;
                    word.copy_from_slice(&(low | ((bits >> (4 * w)) & 0xF) << 12).to_le_bytes());
                }
            }
        }
        for block in out[1..].chunks_exact_mut(weight_type.block_bytes()) {
            for &offset in scale_offsets {
                // Q4_0/Q5_0/Q8_0 have one scale; writing at offset 2 too only changes quants.
                let value = (0.001 + 0.05 * self.uniform()) * if self.next() & 1 == 0 { 1.0 } else { -1.0 };
                block[offset..offset + 2].copy_from_slice(&half::f16::from_f32(value).to_le_bytes());
            }
        }
        if weight_type == W::Q8_0 {
            // As loading leaves them: quants of −128 read as −127.
            super::clamp_q8_0_quants(&mut out[1..]);
        }
        out
    }
}

/// The memory probe's word sum, at every length around its 64-byte rounds and from an
/// unaligned start.
fn check_read_checksum() -> Result<(), String> {
    use super::kernels::{active, scalar};
    let mut rng = SplitMix(0x0DD5);
    let bytes: Vec<u8> = (0..1031).map(|_| rng.next() as u8).collect();
    for start in [0, 1, 3] {
        for len in (0..200).chain([1024, 1027]) {
            let slice = &bytes[start..start + len];
            let (expected, got) = (scalar::sum_words(slice), active::sum_words(slice));
            if expected != got {
                return Err(format!(
                    "sum_words of {len} bytes from {start}: {got:#x}, expected {expected:#x}"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Natively: the AVX2 table (or the scalar one) against the scalar reference.
    #[test]
    fn this_builds_kernels_match_the_scalar_reference() {
        super::check_kernels_match_scalar().unwrap();
    }
}
