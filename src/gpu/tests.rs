//! Every GPU kernel against its CPU twin: random blocks (finite f16 scales, any quant bits),
//! the CPU's `dequantize_row` dotted with the input in f64, and the GPU's product within
//! `1e-5 · Σ|w·x|` of it (f32 sums in another order; the blocks' values are exact in f32).
//! They need an adapter: natively Mesa's lavapipe, which `./build.sh setup` installs.

use half::{bf16, f16};

use super::{GEMM_MIN_BATCH, Gpu, GpuError, shaders::MATVEC_TYPES};

/// The kernels' checks are async (the browser's GPU answers through its event loop); natively
/// they are simply waited for.
trait Wait: std::future::Future + Sized {
    fn wait(self) -> Self::Output {
        pollster::block_on(self)
    }
}

impl<F: std::future::Future> Wait for F {}
use crate::tensor::{WeightType, dequantize_row};

/// A small deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// `rows × cols` weights of `weight_type`: random bytes, with every f16 scale (and min)
/// replaced by a finite value, and float types drawn as values.
fn random_matrix(weight_type: WeightType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let row_bytes = weight_type.row_bytes(cols).unwrap();
    let mut bytes: Vec<u8> = (0..rows * row_bytes).map(|_| rng.next() as u8).collect();
    let half_offsets: &[usize] = match weight_type {
        WeightType::F32 => {
            return (0..rows * cols).flat_map(|_| rng.unit().to_le_bytes()).collect();
        }
        WeightType::F16 => {
            return (0..rows * cols).flat_map(|_| f16::from_f32(rng.unit()).to_le_bytes()).collect();
        }
        WeightType::BF16 => {
            return (0..rows * cols).flat_map(|_| bf16::from_f32(rng.unit()).to_le_bytes()).collect();
        }
        WeightType::Q4_0 | WeightType::Q5_0 | WeightType::Q8_0 | WeightType::IQ4_NL | WeightType::IQ4_XS => {
            &[0]
        }
        WeightType::Q4_1 | WeightType::Q5_1 | WeightType::Q4_K | WeightType::Q5_K => &[0, 2],
        WeightType::Q2_K => &[80, 82],
        WeightType::Q3_K => &[108],
        WeightType::Q6_K => &[208],
        WeightType::MXFP4 => {
            // Its E8M0 scale, 2^(e - 127), near the others' f16 scales.
            let block_bytes = weight_type.block_bytes();
            bytes.chunks_exact_mut(block_bytes).for_each(|block| block[0] = 117 + (rng.next() % 6) as u8);
            return bytes;
        }
        other => unreachable!("{other:?} has no GPU kernel"),
    };
    let block_bytes = row_bytes / (cols / weight_type.block_len());
    for block in bytes.chunks_exact_mut(block_bytes) {
        for &at in half_offsets {
            let value = f16::from_f32(rng.unit() * 0.05);
            block[at..at + 2].copy_from_slice(&value.to_le_bytes());
        }
    }
    bytes
}

/// The CPU twin: each row dequantized, dotted with `x` in f64; and each row's Σ|w·x|.
fn cpu_matvec(weight_type: WeightType, bytes: &[u8], rows: usize, cols: usize, x: &[f32]) -> Vec<(f64, f64)> {
    let row_bytes = weight_type.row_bytes(cols).unwrap();
    let mut row = vec![0.0f32; cols];
    (0..rows)
        .map(|r| {
            dequantize_row(weight_type, &bytes[r * row_bytes..(r + 1) * row_bytes], &mut row).unwrap();
            row.iter().zip(x).fold((0.0, 0.0), |(dot, magnitude), (&w, &v)| {
                let product = f64::from(w) * f64::from(v);
                (dot + product, magnitude + product.abs())
            })
        })
        .collect()
}

/// The adapter, its products over float inputs: the tests of the 8-bit inputs' kernels turn
/// [`Gpu::integer_dots`] on themselves.
fn gpu() -> Gpu {
    let gpu = Gpu::new().unwrap_or_else(|e| {
        panic!("{e}: the GPU tests need an adapter (natively Mesa's lavapipe: apt-get install mesa-vulkan-drivers)")
    });
    assert!(gpu.integer_dots(), "8-bit inputs are the default where WGSL has dot4I8Packed (natively always)");
    gpu.set_integer_dots(false);
    gpu
}

fn check(gpu: &Gpu, weight_type: WeightType, rows: usize, cols: usize, seed: u64) {
    let mut rng = Rng(seed);
    let bytes = random_matrix(weight_type, rows, cols, &mut rng);
    let x: Vec<f32> = (0..cols).map(|_| rng.unit()).collect();
    let got = gpu.matvec(weight_type, &bytes, rows, cols, &x).wait().unwrap();
    let want = cpu_matvec(weight_type, &bytes, rows, cols, &x);
    assert_eq!(got.len(), rows);
    for (r, (&g, &(dot, magnitude))) in got.iter().zip(&want).enumerate() {
        let error = (f64::from(g) - dot).abs();
        assert!(
            error <= 1e-5 * magnitude + 1e-6,
            "{weight_type:?} {rows}×{cols} row {r}: GPU {g}, CPU {dot} (error {error:.3e}, Σ|w·x| {magnitude:.3e})"
        );
    }
}

#[test]
fn every_matvec_kernel_matches_its_cpu_twin() {
    let gpu = gpu();
    for (i, &weight_type) in MATVEC_TYPES.iter().enumerate() {
        // One block per row, a row of more blocks than the workgroup has threads, and more rows.
        let block = weight_type.block_len();
        for (j, &(rows, cols)) in [(3, block), (17, block * 70), (96, block * 18)].iter().enumerate() {
            check(&gpu, weight_type, rows, cols, 1 + (i * 8 + j) as u64);
        }
    }
}

#[test]
fn more_rows_than_one_dispatch_dimension_holds() {
    // 65,535 workgroups per dimension: the rest go to the second (a vocabulary's output rows).
    check(&gpu(), WeightType::Q4_0, 70_001, 32, 99);
}

#[test]
fn shapes_and_types_are_checked_before_anything_runs() {
    let gpu = gpu();
    let x = vec![0.0; 32];
    let error = gpu.matvec(WeightType::Q4_0, &[0; 17], 1, 32, &x).wait().unwrap_err();
    assert!(matches!(error, GpuError::Shape(_)), "{error}");
    let error = gpu.matvec(WeightType::Q4_0, &[0; 18], 1, 32, &x[..31]).wait().unwrap_err();
    assert!(matches!(error, GpuError::Shape(_)), "{error}");
    let error = gpu.matvec(WeightType::Q4_0, &[0; 18], 1, 33, &x).wait().unwrap_err();
    assert!(matches!(error, GpuError::Shape(_)), "{error}");
    let lattice = WeightType::IQ2_XXS;
    let bytes = vec![0; lattice.row_bytes(256).unwrap()];
    let error = gpu.matvec(lattice, &bytes, 1, 256, &[0.0; 256]).wait().unwrap_err();
    assert_eq!(error, GpuError::Unsupported(lattice));
    assert!(!gpu.facts().name.is_empty());
}

/// Values within `tolerance` (absolute, and relative to each CPU value) of the CPU's.
fn assert_close(what: &str, got: &[f32], want: &[f32], tolerance: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tolerance * (1.0 + w.abs()), "{what}[{i}]: GPU {g}, CPU {w}");
    }
}

fn random(n: usize, scale: f32, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.unit() * scale).collect()
}

#[test]
fn rms_norm_add_and_gated_activations_match_the_cpu() {
    use crate::model::ops::{add_in_place, geglu, rms_norm, swiglu};
    let gpu = gpu();
    let mut rng = Rng(7);
    // Rows of a model's width, and per-head rows (Q/K norm), each wider or narrower than a workgroup.
    for (rows, width) in [(5, 576), (48, 64), (3, 1)] {
        let (x, weight) = (random(rows * width, 4.0, &mut rng), random(width, 2.0, &mut rng));
        let mut want = vec![0.0; x.len()];
        rms_norm(&mut want, &x, &weight, 1e-6);
        assert_close("rms_norm", &gpu.rms_norm(&x, &weight, 1e-6).wait().unwrap(), &want, 1e-5);
    }
    // Past one dispatch row of workgroups for the element-wise kernels: 65,535 × 256 < n.
    for n in [1, 1000, 65_535 * 256 + 1000] {
        let (x, y) = (random(n, 12.0, &mut rng), random(n, 3.0, &mut rng));
        let mut want = x.clone();
        add_in_place(&mut want, &y);
        assert_close("add", &gpu.add(&x, &y).wait().unwrap(), &want, 1e-6);
        let mut want = x.clone();
        swiglu(&mut want, &y);
        assert_close("swiglu", &gpu.swiglu(&x, &y).wait().unwrap(), &want, 1e-5);
        // The CPU's GELU rounds its input and output to f16 (ggml's table): 2^-10 relative.
        let mut want = x.clone();
        geglu(&mut want, &y);
        assert_close("geglu", &gpu.geglu(&x, &y).wait().unwrap(), &want, 4e-3);
    }
}

#[test]
fn routing_chooses_the_cpus_experts_with_its_weights() {
    use crate::model::Gating;
    use crate::model::experts::{RouterBiases, route};
    let gpu = gpu();
    let mut rng = Rng(29);
    let shape = crate::model::Experts::routing;
    let random_rows = random(7 * 64, 3.0, &mut rng);
    let bias = random(64, 1.0, &mut rng);
    let cases: Vec<(crate::model::Experts, Vec<f32>, RouterBiases)> = vec![
        // Random scores under every gating, with and without biases (more tokens than a workgroup
        // takes would need 65 rows; seven cover the kernel's per-token loop).
        (shape(64, 8, Gating::Softmax, true), random_rows.clone(), RouterBiases::default()),
        (shape(64, 8, Gating::Softmax, false), random_rows.clone(), RouterBiases::default()),
        (
            shape(64, 4, Gating::Sigmoid, true),
            random_rows.clone(),
            RouterBiases { scores: None, selection: Some(&bias) },
        ),
        (
            shape(64, 4, Gating::SoftmaxWeight, false),
            random_rows.clone(),
            RouterBiases { scores: Some(&bias), selection: None },
        ),
        // Ties: every expert scored alike (the first `used`), and a tie below the best.
        (shape(8, 3, Gating::Softmax, true), vec![-5.0; 8], RouterBiases::default()),
        (shape(4, 2, Gating::Softmax, false), vec![0.0, 1.0, 3.0, 1.0], RouterBiases::default()),
        // `used` equal to the count: every expert, best first.
        (shape(4, 4, Gating::Softmax, true), vec![0.5, -0.5, 2.0, 1.0], RouterBiases::default()),
        // Sigmoid probabilities that all underflow: the clamped sum keeps the weights 0.
        (shape(3, 2, Gating::Sigmoid, true), vec![-1e4; 3], RouterBiases::default()),
        // NaN scores never win over numbers.
        (shape(4, 2, Gating::Sigmoid, false), vec![f32::NAN, -3.0, f32::NAN, -4.0], RouterBiases::default()),
    ];
    for (shape, scores, biases) in cases {
        let got = gpu.route(&shape, &scores, biases).wait().unwrap();
        let mut want = vec![(0u32, 0.0f32); got.len()];
        for (row, chosen) in scores.chunks_exact(shape.count).zip(want.chunks_exact_mut(shape.used)) {
            route(&shape, &mut row.to_vec(), biases, chosen);
        }
        let ids = |pairs: &[(u32, f32)]| pairs.iter().map(|&(e, _)| e).collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want), "{shape:?} {scores:?}");
        let weights = |pairs: &[(u32, f32)]| pairs.iter().map(|&(_, w)| w).collect::<Vec<_>>();
        assert_close(&format!("routing weights {shape:?}"), &weights(&got), &weights(&want), 1e-6);
    }
    let bad = shape(4, 5, Gating::Softmax, true);
    assert!(matches!(gpu.route(&bad, &[0.0; 4], RouterBiases::default()).wait(), Err(GpuError::Shape(_))));
}

#[test]
fn rope_matches_the_cpu_in_both_pairings_with_and_without_factors() {
    use super::RopeParams;
    use crate::model::ops::{apply_rope, rope_table};
    use crate::model::{Rope, RopeStyle, Yarn};
    let gpu = gpu();
    let mut rng = Rng(11);
    let (rows, heads, head_dim, start) = (7, 3, 64, 40);
    // gpt-oss's YaRN: its ramp runs from pair 8 to 18 of 32 at this base.
    let yarn = Some(Yarn { original_context: 4096 });
    for (style, rope_dims, factors, yarn) in [
        (RopeStyle::Normal, 64, None, None),
        (
            RopeStyle::Neox,
            64,
            Some(random(32, 1.0, &mut rng).iter().map(|f| 1.0 + f.abs()).collect::<Vec<_>>()),
            None,
        ),
        (RopeStyle::Neox, 32, None, None),
        (RopeStyle::Neox, 64, None, yarn),
    ] {
        let base = if yarn.is_some() { 150_000.0 } else { 10_000.0 };
        let rope = Rope { base, freq_scale: 0.5, attn_factor: 1.25, yarn };
        let x = random(rows * heads * head_dim, 2.0, &mut rng);
        let mut want = x.clone();
        let mut table = Vec::new();
        for (t, row) in want.chunks_exact_mut(heads * head_dim).enumerate() {
            rope_table(&mut table, start + t, rope, rope_dims, factors.as_deref());
            apply_rope(row, head_dim, &table, style);
        }
        let params = RopeParams {
            heads,
            head_dim,
            rope_dims,
            start,
            neox: style == RopeStyle::Neox,
            base: rope.base,
            freq_scale: rope.freq_scale,
            attn_factor: rope.attn_factor,
            yarn_ramp: yarn.map(|yarn| yarn.ramp(rope_dims, base)),
            grid: None,
        };
        let got = gpu.rope(&x, params, factors.as_deref()).wait().unwrap();
        assert_close(&format!("rope {style:?} {rope_dims} yarn {}", yarn.is_some()), &got, &want, 2e-5);
    }
}

#[test]
fn query_and_key_heads_in_one_dispatch_give_the_norms_and_ropes_bits() {
    use super::RopeParams;
    let gpu = gpu();
    let mut rng = Rng(17);
    let rope_params = |heads, head_dim, rope_dims, neox| RopeParams {
        heads,
        head_dim,
        rope_dims,
        start: 37,
        neox,
        base: 1_000_000.0,
        freq_scale: 1.0,
        attn_factor: 1.0,
        yarn_ramp: None,
        grid: None,
    };
    // Qwen3's (both norms, NeoX), a head past the workgroup's width, RoPE alone (SmolLM2's),
    // the norms alone (a layer without RoPE), a partial rotation with the query's norm only.
    for (head_dim, rope_dims, neox, q_norm, k_norm) in [
        (128, 128, true, true, true),
        (256, 256, true, true, true),
        (64, 64, false, false, false),
        (64, 0, true, true, true),
        (96, 32, true, true, false),
    ] {
        let (rows, heads, k_heads) = (3, 4, 2);
        let q = random(rows * heads * head_dim, 3.0, &mut rng);
        let k = random(rows * k_heads * head_dim, 3.0, &mut rng);
        let q_weight = q_norm.then(|| random(head_dim, 2.0, &mut rng));
        let k_weight = k_norm.then(|| random(head_dim, 2.0, &mut rng));
        let mut want = Vec::new();
        for (x, n, weight) in [(&q, heads, &q_weight), (&k, k_heads, &k_weight)] {
            let mut x = x.clone();
            if let Some(weight) = weight {
                x = gpu.rms_norm(&x, weight, 1e-6).wait().unwrap();
            }
            if rope_dims > 0 {
                x = gpu.rope(&x, rope_params(n, head_dim, rope_dims, neox), None).wait().unwrap();
            }
            want.push(x);
        }
        let rope = (rope_dims > 0).then(|| rope_params(heads, head_dim, rope_dims, neox));
        let norms = (q_weight.as_deref(), k_weight.as_deref());
        let shape = (heads, k_heads, head_dim);
        let case = format!("head {head_dim}, rope {rope_dims}, norms {q_norm} {k_norm}");
        let [got_q, got_k, ..] =
            gpu.qk_heads((&q, &k, None), shape, norms, 1e-6, rope, None, (0, 0)).wait().unwrap();
        assert_eq!(got_q, want[0], "queries: {case}");
        assert_eq!(got_k, want[1], "keys: {case}");
        // Stored too: the keys once rotated and the values as they are, as f16 pairs from a
        // cache position past the start, the words before it untouched.
        let v = random(k.len(), 3.0, &mut rng);
        let (first_out, words) = (5 * k_heads * head_dim / 2, 9 * k_heads * head_dim / 2);
        let [got_q, got_k, keys, values] = gpu
            .qk_heads((&q, &k, Some(&v)), shape, norms, 1e-6, rope, None, (first_out, words))
            .wait()
            .unwrap();
        assert_eq!((&got_q, &got_k), (&want[0], &want[1]), "stored: {case}");
        let f16_pairs = |x: &[f32]| -> Vec<u32> {
            let half = |x: f32| u32::from(f16::from_f32(x.clamp(-65504.0, 65504.0)).to_bits());
            x.chunks_exact(2).map(|pair| half(pair[0]) | (half(pair[1]) << 16)).collect()
        };
        for (what, cache, x) in [("keys", &keys, &want[1]), ("values", &values, &v)] {
            let bits: Vec<u32> = cache.iter().map(|w| w.to_bits()).collect();
            assert!(bits[..first_out].iter().all(|&w| w == 0), "{what} before the start: {case}");
            assert_eq!(bits[first_out..first_out + x.len() / 2], f16_pairs(x)[..], "{what}: {case}");
        }
    }
}

#[test]
fn subgroup_sums_give_the_workgroup_sums_bits() {
    let with = gpu();
    assert!(
        with.facts().subgroups,
        "this adapter ({}) has no subgroups of 8 or more: the kernels that use them went untested",
        with.facts().name
    );
    let without = Wait::wait(Gpu::request_with(false)).unwrap();
    assert!(!without.facts().subgroups);
    let mut rng = Rng(11);
    // Decode (one input row) and a short batch, over a row of many units and rows past a
    // workgroup's eight; float inputs, and 8-bit ones where a type reads them.
    for (weight_type, q8) in MATVEC_TYPES.iter().flat_map(|&t| [(t, false), (t, true)]) {
        with.set_integer_dots(q8);
        without.set_integer_dots(q8);
        let cols = if weight_type.block_len() == 1 { 200 } else { 1024 };
        for batch in [1, 5] {
            let rows = 21;
            let bytes = random_matrix(weight_type, rows, cols, &mut rng);
            let x = random(cols * batch, 1.0, &mut rng);
            let a = with.matvec(weight_type, &bytes, rows, cols, &x).wait().unwrap();
            let b = without.matvec(weight_type, &bytes, rows, cols, &x).wait().unwrap();
            assert_eq!(a, b, "{weight_type:?} batch of {batch}, 8-bit inputs {q8}");
        }
    }
}

#[test]
fn the_fused_gated_kernel_gives_the_three_kernels_bits() {
    use crate::model::Activation;
    // With subgroups and without (the browser's case), every type, both activations: gate and
    // up in one dispatch equal the two products and the element-wise activation exactly, over
    // rows past a workgroup's eight.
    let with = gpu();
    let without = Wait::wait(Gpu::request_with(false)).unwrap();
    let mut rng = Rng(13);
    for (gpu, q8) in [(&with, false), (&without, false), (&with, true), (&without, true)] {
        gpu.set_integer_dots(q8);
        for &weight_type in &MATVEC_TYPES {
            let (rows, cols) = (19, if weight_type.block_len() == 1 { 200 } else { 512 });
            let gate = random_matrix(weight_type, rows, cols, &mut rng);
            let up = random_matrix(weight_type, rows, cols, &mut rng);
            let x = random(cols, 1.0, &mut rng);
            let g = gpu.matvec(weight_type, &gate, rows, cols, &x).wait().unwrap();
            let u = gpu.matvec(weight_type, &up, rows, cols, &x).wait().unwrap();
            for activation in [Activation::SwiGlu, Activation::GeGlu] {
                let want = match activation {
                    Activation::SwiGlu => gpu.swiglu(&g, &u).wait().unwrap(),
                    _ => gpu.geglu(&g, &u).wait().unwrap(),
                };
                let got =
                    gpu.gated_matvec(weight_type, (&gate, &up), rows, cols, &x, activation).wait().unwrap();
                let subgroups = gpu.facts().subgroups;
                assert_eq!(
                    got, want,
                    "{weight_type:?} {activation:?}, subgroups {subgroups}, 8-bit inputs {q8}"
                );
            }
        }
    }
    let refused = with.gated_matvec(WeightType::Q8_0, (&[], &[]), 1, 32, &[0.0; 32], Activation::SwiGlu);
    assert!(matches!(refused.wait(), Err(GpuError::Shape(_))));
}

#[test]
fn queries_keys_and_values_in_one_dispatch_give_three_dispatches_bits() {
    // Rows that are not whole workgroups (eight rows each), so that groups straddle two of
    // the matrices; with subgroups and without. Every type for all three, and values of
    // another block type (Q4_K_M files' Q6_K `attn_v`; Q5_0's blocks are not whole words).
    let with = gpu();
    let without = Wait::wait(Gpu::request_with(false)).unwrap();
    let mut rng = Rng(19);
    let same = MATVEC_TYPES.map(|t| (t, t));
    let mixed = [
        (WeightType::Q4_K, WeightType::Q6_K),
        (WeightType::Q5_K, WeightType::Q6_K),
        (WeightType::Q4_K, WeightType::Q8_0),
        (WeightType::Q4_0, WeightType::Q5_0),
        (WeightType::Q2_K, WeightType::Q3_K),
    ];
    for (gpu, q8) in [(&with, false), (&without, false), (&with, true), (&without, true)] {
        gpu.set_integer_dots(q8);
        for &(qk_type, v_type) in same.iter().chain(&mixed) {
            let cols = if qk_type.block_len() == 1 { 200 } else { 512 };
            let rows = [21, 11, 13];
            let types = [qk_type, qk_type, v_type];
            let bytes: Vec<Vec<u8>> =
                (0..3).map(|m| random_matrix(types[m], rows[m], cols, &mut rng)).collect();
            let x = random(cols, 1.0, &mut rng);
            // The fused kernel reads 8 bits only where both types quantize their inputs alike.
            use super::shaders::{Q8_DOT_TYPES, q8_format};
            let alike = Q8_DOT_TYPES.contains(&qk_type)
                && Q8_DOT_TYPES.contains(&v_type)
                && q8_format(qk_type) == q8_format(v_type);
            gpu.set_integer_dots(q8 && alike);
            let want: Vec<Vec<f32>> =
                (0..3).map(|m| gpu.matvec(types[m], &bytes[m], rows[m], cols, &x).wait().unwrap()).collect();
            gpu.set_integer_dots(q8);
            let matrices = [0, 1, 2].map(|m| (&bytes[m][..], rows[m]));
            let got = gpu.qkv_matvec((qk_type, v_type), matrices, cols, &x).wait().unwrap();
            let subgroups = gpu.facts().subgroups;
            assert_eq!(got, want, "{qk_type:?}+{v_type:?}, subgroups {subgroups}, 8-bit inputs {q8}");
        }
    }
    // Float values beside block queries read their inputs otherwise: refused, not fused.
    let bytes =
        [random_matrix(WeightType::Q4_K, 8, 256, &mut rng), random_matrix(WeightType::F16, 8, 256, &mut rng)];
    let matrices = [(&bytes[0][..], 8), (&bytes[0][..], 8), (&bytes[1][..], 8)];
    let refused = with.qkv_matvec((WeightType::Q4_K, WeightType::F16), matrices, 256, &[0.0; 256]);
    assert!(matches!(refused.wait(), Err(GpuError::Refused(_))));
}

#[test]
fn a_batch_of_input_rows_gives_a_row_of_outputs_each() {
    let gpu = gpu();
    let mut rng = Rng(5);
    // Every type through both batch kernels: the short batch's (eight input rows a tile, one
    // and two of them) gives
    // exactly what each row gives alone; the GEMM's (64 weight rows by 32 input rows a tile)
    // adds the same products in another order. Both within the CPU twin's bounds, over one
    // tile each way and a bit, and a float row that ends inside a 32-column unit.
    for &weight_type in &MATVEC_TYPES {
        let cols = if weight_type.block_len() == 1 { 40 } else { 512 };
        for batch in [3, 12, GEMM_MIN_BATCH, 37] {
            let rows = 70;
            let bytes = random_matrix(weight_type, rows, cols, &mut rng);
            let x = random(cols * batch, 1.0, &mut rng);
            let got = gpu.matvec(weight_type, &bytes, rows, cols, &x).wait().unwrap();
            assert_eq!(got.len(), rows * batch);
            for (r, input) in x.chunks_exact(cols).enumerate() {
                let got = &got[r * rows..(r + 1) * rows];
                if batch < GEMM_MIN_BATCH {
                    let one = gpu.matvec(weight_type, &bytes, rows, cols, input).wait().unwrap();
                    assert_eq!(got, &one[..], "{weight_type:?} batch of {batch}, row {r}");
                }
                let want = cpu_matvec(weight_type, &bytes, rows, cols, input);
                for (&g, &(dot, magnitude)) in got.iter().zip(&want) {
                    assert!(
                        (f64::from(g) - dot).abs() <= 1e-5 * magnitude + 1e-6,
                        "{weight_type:?} batch of {batch}, row {r}: GPU {g}, CPU {dot}"
                    );
                }
            }
        }
    }
}

#[test]
fn attention_matches_the_cpu_with_groups_windows_soft_caps_and_sinks() {
    use super::AttentionParams;
    use crate::model::attention::{HeadView, Scoring, attend_head_f32};
    let gpu = gpu();
    let mut rng = Rng(13);
    // Both kernels (a workgroup per head below 8 queries, the tiled kernel from 8): decode
    // (one query deep in the context) and prefill (queries from position 0), plain,
    // grouped, windowed (Gemma's local layers) and soft-capped (Gemma 2); contexts of several
    // of the kernel's 64-position blocks, ending on and past a block's edge, a window that
    // starts inside one, and a head that is no multiple of the 64 threads; with sinks per head
    // (gpt-oss), some below every score and some above.
    // Rows attended both ways (a picture's): every query sees the whole batch, with a window too.
    // Long calls: a picture's patches, and queries deep in a prompt.
    for (queries, start, n_head, n_kv, head_dim, window, softcap, sinks, causal) in [
        (1, 37, 4, 4, 64, 0, 0.0, false, true),
        (9, 0, 6, 2, 32, 0, 0.0, false, true),
        (5, 20, 8, 2, 128, 8, 0.0, false, true),
        (3, 12, 2, 1, 256, 0, 50.0, false, true),
        (1, 63, 2, 2, 64, 0, 0.0, false, true),
        (2, 150, 4, 2, 64, 0, 0.0, false, true),
        (4, 200, 2, 1, 128, 70, 0.0, false, true),
        (1, 100, 2, 2, 80, 0, 30.0, false, true),
        (12, 140, 4, 2, 64, 0, 0.0, false, true),
        (10, 90, 2, 1, 128, 70, 20.0, false, true),
        (1, 70, 4, 2, 64, 0, 0.0, true, true),
        (3, 9, 4, 4, 64, 8, 0.0, true, true),
        (11, 80, 4, 1, 64, 0, 0.0, true, true),
        (16, 5, 4, 2, 64, 0, 0.0, false, false),
        (70, 30, 2, 1, 64, 0, 0.0, false, false),
        (9, 40, 4, 4, 32, 12, 0.0, false, false),
        // Past llvmpipe's 65,535 loop iterations per invocation for a thread per (query, head)
        // (a kernel this project had, which gave wrong values on lavapipe there): a picture's
        // 2,048 patches, and a prefill 2,000 positions deep; and tiles cut short by the batch.
        (2048, 0, 2, 2, 16, 0, 0.0, false, false),
        (16, 2000, 2, 1, 64, 0, 0.0, false, true),
        (21, 300, 4, 1, 128, 0, 0.0, false, true),
        (13, 0, 2, 2, 256, 0, 0.0, true, false),
        // Decode over long ranges, split into workgroups whose partial sums are merged: with
        // sinks, a window longer than the split's threshold, a soft cap, several queries, a
        // range that leaves the last splits empty for the earlier queries, and the most splits.
        (1, 2000, 4, 2, 64, 0, 0.0, true, true),
        (1, 1500, 2, 1, 128, 700, 0.0, false, true),
        (1, 600, 2, 2, 80, 0, 30.0, false, true),
        (5, 900, 4, 4, 64, 0, 0.0, true, true),
        (5, 1020, 2, 1, 64, 0, 0.0, false, true),
        (2, 5000, 2, 1, 256, 0, 0.0, false, true),
        // A batch whose heads are no multiple of 4 takes the workgroup kernel.
        (9, 20, 4, 2, 6, 0, 0.0, false, true),
    ] {
        let positions = start + queries;
        let q = random(queries * n_head * head_dim, 1.0, &mut rng);
        // The cache keeps keys and values in f16: the CPU's reference reads the same values.
        let f16_values = |values: Vec<f32>| -> Vec<f32> {
            values.into_iter().map(|x| half::f16::from_f32(x).to_f32()).collect()
        };
        let k = f16_values(random(positions * n_kv * head_dim, 1.0, &mut rng));
        let v = f16_values(random(positions * n_kv * head_dim, 1.0, &mut rng));
        let scale = 1.0 / (head_dim as f32).sqrt();
        let params =
            AttentionParams { n_head, n_kv, head_dim, start, window, scale, softcap, causal, exact: false };
        // Alternately far below and above the scores.
        let sink_values: Vec<f32> = (0..n_head).map(|h| if h % 2 == 0 { -4.0 } else { 6.0 }).collect();
        let sinks = sinks.then_some(sink_values.as_slice());
        let got = gpu.attention(&q, &k, &v, sinks, params).wait().unwrap();
        // Grouped query heads in one workgroup a KV head (decode and short batches) give each
        // head's values run alone (the bits where both split the range alike; a group's range
        // splits into as many parts as its heads).
        let group = n_head / n_kv;
        if queries < 8 && group > 1 {
            let columns = |rows: &[f32], width: usize, offset: usize| -> Vec<f32> {
                rows.chunks_exact(width).flat_map(|row| row[offset..offset + head_dim].to_vec()).collect()
            };
            for h in 0..n_head {
                let (q_row, kv_row, kv_at) = (n_head * head_dim, n_kv * head_dim, (h / group) * head_dim);
                let alone = gpu
                    .attention(
                        &columns(&q, q_row, h * head_dim),
                        &columns(&k, kv_row, kv_at),
                        &columns(&v, kv_row, kv_at),
                        sinks.map(|s| &s[h..h + 1]),
                        AttentionParams { n_head: 1, n_kv: 1, ..params },
                    )
                    .wait()
                    .unwrap();
                let what = format!("head {h} of {n_head} over {n_kv} alone, {queries} from {start}");
                assert_close(&what, &columns(&got, q_row, h * head_dim), &alone, 1e-6);
            }
        }
        let mut want = vec![0.0; q.len()];
        let scoring = Scoring::new(scale, (softcap > 0.0).then_some(softcap));
        for (index, out) in want.chunks_exact_mut(head_dim).enumerate() {
            let (t, h) = (index / n_head, index % n_head);
            let position = start + t;
            let first = if window > 0 { (position + 1).saturating_sub(window) } else { 0 };
            let last = if causal { position } else { start + queries - 1 };
            let view = HeadView {
                keys: &k[..],
                values: &v[..],
                stride: n_kv * head_dim,
                offset: (h / (n_head / n_kv)) * head_dim,
                head_dim,
            };
            attend_head_f32(
                &q[index * head_dim..][..head_dim],
                &view,
                first..last + 1,
                scoring,
                sinks.map(|s| s[h]),
                out,
            );
        }
        assert_close(
            &format!(
                "attention {queries}×{n_head}/{n_kv}×{head_dim} window {window} cap {softcap} sinks {} causal {causal}",
                sinks.is_some()
            ),
            &got,
            &want,
            2e-5,
        );
    }
    let bad = AttentionParams {
        n_head: 3,
        n_kv: 2,
        head_dim: 8,
        start: 0,
        window: 0,
        scale: 1.0,
        softcap: 0.0,
        causal: true,
        exact: false,
    };
    assert!(matches!(
        gpu.attention(&[0.0; 24], &[0.0; 16], &[0.0; 16], None, bad).wait(),
        Err(GpuError::Shape(_))
    ));
}

#[test]
fn exact_attention_computes_as_llama_cpps_one_pass_cpu_kernel() {
    use super::AttentionParams;
    use crate::model::AttentionPrecision;
    use crate::model::attention::{GroupScratch, HeadView, Scoring, attend_group_one_pass, attend_head_f32};
    let gpu = gpu();
    let mut rng = Rng(41);
    // Decode and short batches (which the f32 path sends to the tiled kernel from 8 queries)
    // take the one-pass arithmetic: f16 query, per-position softmax, `Σ p·V` rounded to f16
    // after each step. Grouped heads, a window and a soft cap, sinks, several 64-position
    // blocks, a range long enough to split; 64 queries and more stay f32 (the tiled kernel), as
    // on llama.cpp's CPU. Values large enough that f16 sums round visibly.
    for (queries, start, n_head, n_kv, head_dim, window, softcap, sinks) in [
        (1, 37, 4, 4, 64, 0, 0.0, false),
        (1, 300, 4, 2, 128, 0, 0.0, true),
        (12, 40, 4, 2, 64, 0, 0.0, false),
        (3, 20, 2, 1, 256, 8, 30.0, false),
        (1, 700, 2, 1, 64, 0, 0.0, false),
        (70, 10, 2, 1, 64, 0, 0.0, false),
        // Past 4,096 positions: decode splits and batches take the tiled kernel (f32 there),
        // within llvmpipe's loop limit.
        (1, 5000, 2, 1, 64, 0, 0.0, false),
        (9, 4500, 2, 1, 64, 0, 0.0, false),
    ] {
        let positions = start + queries;
        let f16_values = |values: Vec<f32>| -> Vec<f16> { values.into_iter().map(f16::from_f32).collect() };
        let q = random(queries * n_head * head_dim, 3.0, &mut rng);
        let k = f16_values(random(positions * n_kv * head_dim, 1.0, &mut rng));
        let v = f16_values(random(positions * n_kv * head_dim, 40.0, &mut rng));
        let widened = |values: &[f16]| -> Vec<f32> { values.iter().map(|x| x.to_f32()).collect() };
        let (k32, v32) = (widened(&k), widened(&v));
        let scale = 1.0 / (head_dim as f32).sqrt();
        let params = AttentionParams {
            n_head,
            n_kv,
            head_dim,
            start,
            window,
            scale,
            softcap,
            causal: true,
            exact: true,
        };
        let sink_values: Vec<f32> = (0..n_head).map(|h| if h % 2 == 0 { -4.0 } else { 6.0 }).collect();
        let sinks = sinks.then_some(sink_values.as_slice());
        let got = gpu.attention(&q, &k32, &v32, sinks, params).wait().unwrap();
        let scoring = Scoring::new(scale, (softcap > 0.0).then_some(softcap));
        // The CPU's kernel, and whether the GPU computes as it does (not past 4,096 positions).
        let one_pass = queries < crate::model::attention::TILED_MIN_QUERIES;
        let alike = one_pass && positions <= 4096;
        let reference = |precision: AttentionPrecision| -> Vec<f32> {
            let mut out = vec![0.0; q.len()];
            let mut scratch = GroupScratch::default();
            for (index, out) in out.chunks_exact_mut(head_dim).enumerate() {
                let (t, h) = (index / n_head, index % n_head);
                let position = start + t;
                let first = if window > 0 { (position + 1).saturating_sub(window) } else { 0 };
                let offset = (h / (n_head / n_kv)) * head_dim;
                let stride = n_kv * head_dim;
                let query = &q[index * head_dim..][..head_dim];
                let sink = sinks.map(|s| &s[h..h + 1]);
                if one_pass {
                    let view = HeadView { keys: &k[..], values: &v[..], stride, offset, head_dim };
                    let span = first..position + 1;
                    attend_group_one_pass(query, &view, span, scoring, sink, precision, &mut scratch, out);
                } else {
                    let view = HeadView { keys: &k32[..], values: &v32[..], stride, offset, head_dim };
                    attend_head_f32(query, &view, first..position + 1, scoring, sink.map(|s| s[0]), out);
                }
            }
            out
        };
        let (exact, fast) = (reference(AttentionPrecision::Exact), reference(AttentionPrecision::Fast));
        // The largest and the mean difference, relative to 1 + |value|.
        let differences = |want: &[f32]| -> (f32, f32) {
            let relative: Vec<f32> =
                got.iter().zip(want).map(|(g, w)| (g - w).abs() / (1.0 + w.abs())).collect();
            (
                relative.iter().copied().fold(0.0, f32::max),
                relative.iter().sum::<f32>() / relative.len() as f32,
            )
        };
        let ((from_exact, mean_exact), (_, mean_fast)) = (differences(&exact), differences(&fast));
        let what = format!(
            "exact attention {queries}×{n_head}/{n_kv}×{head_dim} from {start} window {window} cap {softcap}"
        );
        eprintln!(
            "{what}: {from_exact:e} at most from the exact CPU (mean {mean_exact:e}), mean {mean_fast:e} from the f32 CPU"
        );
        if alike {
            // Most values are the CPU's to the bit; where a score's last bit tips a rounding, the
            // sums part by an f16 step or a few. Sums kept in f32 part everywhere.
            assert!(from_exact <= 5e-3, "{what}: {from_exact} from the CPU's exact kernel");
            assert!(
                mean_fast >= 10.0 * mean_exact,
                "{what}: {mean_fast} from f32 sums, {mean_exact} from f16 ones"
            );
        } else if one_pass {
            // Split decode (each split's sums f16, merged in f32), or the tiled kernel in f32.
            assert!(from_exact <= 2e-2, "{what}: {from_exact} from the CPU's exact kernel");
        } else {
            assert!(from_exact <= 2e-5, "{what}: {from_exact} from the CPU's f32 kernel");
        }
    }
}

#[test]
fn delta_net_kernels_match_the_cpu() {
    use crate::model::DeltaNet;
    use crate::model::delta_net::{DeltaInputs, causal_conv_silu, delta_rule, gates, l2_normalize_heads};
    let gpu = gpu();
    let mut rng = Rng(35);
    // Heads narrower and wider than the delta rule's 64 threads, GQA-like key heads, one token
    // (decode) and a prompt longer than the CPU's chunk (which then runs the chunked rule).
    for (shape, n) in [
        (DeltaNet { conv_kernel: 4, k_heads: 2, v_heads: 4, head_dim: 16 }, 1),
        (DeltaNet { conv_kernel: 4, k_heads: 1, v_heads: 2, head_dim: 96 }, 70),
        (DeltaNet { conv_kernel: 2, k_heads: 2, v_heads: 2, head_dim: 8 }, 3),
    ] {
        let heads = shape.v_heads;
        let (dt_bias, a) = (random(heads, 1.0, &mut rng), random(heads, 1.0, &mut rng));
        let a: Vec<f32> = a.iter().map(|a| -a.abs() - 0.1).collect();
        let (alpha, beta) = (random(n * heads, 25.0, &mut rng), random(n * heads, 4.0, &mut rng));
        let (mut want_alpha, mut want_beta) = (alpha.clone(), beta.clone());
        gates(&dt_bias, &a, &mut want_alpha, &mut want_beta);
        let (got_alpha, got_beta) = gpu.delta_gates(&dt_bias, &a, &alpha, &beta).wait().unwrap();
        assert_close("delta gates (decay)", &got_alpha, &want_alpha, 1e-5);
        assert_close("delta gates (beta)", &got_beta, &want_beta, 1e-6);

        let channels = shape.conv_dim();
        let taps = random(channels * shape.conv_kernel, 1.0, &mut rng);
        let (state, x) = (random(shape.conv_state_len(), 2.0, &mut rng), random(n * channels, 2.0, &mut rng));
        let (mut want_state, mut want_out) = (state.clone(), vec![0.0; x.len()]);
        causal_conv_silu(&shape, &mut want_state, &taps, &x, &mut want_out, &mut Vec::new());
        let (got_out, got_state) = gpu.causal_conv(&shape, &state, &taps, &x).wait().unwrap();
        assert_close("causal conv", &got_out, &want_out, 1e-5);
        assert_eq!(got_state, want_state, "the convolution's state keeps the last inputs");

        // The delta rule on unit-length queries and keys, as the layer gives it.
        let mut qkv = random(n * channels, 1.0, &mut rng);
        for row in qkv.chunks_exact_mut(channels) {
            l2_normalize_heads(&mut row[..2 * shape.key_dim()], shape.head_dim, 1e-6);
        }
        let inputs = DeltaInputs { qkv: &qkv, g: &want_alpha, beta: &want_beta };
        let state = random(shape.ssm_state_len(), 0.5, &mut rng);
        let (mut want_state, mut want_out) = (state.clone(), vec![0.0; n * shape.value_dim()]);
        delta_rule(&shape, &inputs, &mut want_state, &mut want_out, &mut Vec::new());
        let (got_out, got_state) = gpu.delta_rule(&shape, &inputs, &state).wait().unwrap();
        assert_close("delta rule (outputs)", &got_out, &want_out, 1e-4);
        assert_close("delta rule (state)", &got_state, &want_state, 1e-4);
    }
}

#[test]
fn the_best_logits_and_their_statistics_match_the_samplers_reference() {
    use crate::sampler::BestLogits;
    let gpu = gpu();
    let mut rng = Rng(17);
    // One workgroup, a span and one more, a merge of merges (Qwen3's and Gemma 3's sizes take
    // three passes; 150,000 does too), a vocabulary smaller than the best list, and a
    // temperature whose reciprocal overflows f32 (the sums then count the top logits alone).
    let cases =
        [(1000, 1.0), (1024, 0.7), (1025, 1.5), (70_000, 0.8), (150_000, 1.0), (50, 1.0), (9000, 1e-39)];
    for (vocab, temperature) in cases {
        let mut logits = random(vocab, 8.0, &mut rng);
        // What a model may give: ties (settled by the lower id), signed zeros (0.0 ranks above
        // -0.0, as f32::total_cmp says), NaN (never chosen), ±inf.
        let top = logits.iter().copied().fold(f32::MIN, f32::max);
        logits[vocab - 1] = top + 1.0;
        logits[3] = top + 1.0;
        logits[vocab / 2] = f32::NAN;
        logits[vocab / 3] = f32::NEG_INFINITY;
        logits[vocab / 4] = 0.0;
        logits[vocab / 5] = -0.0;
        let got = gpu.best_logits(&logits, temperature).wait().unwrap();
        let want = BestLogits::of(&logits, temperature);
        assert_eq!(got.best, want.best, "vocabulary {vocab}");
        assert_eq!((got.vocab, got.temperature), (want.vocab, want.temperature));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * b.abs().max(1.0);
        assert!(close(got.z, want.z), "vocabulary {vocab}: z {} against {}", got.z, want.z);
        assert!(close(got.weighted, want.weighted), "{} against {}", got.weighted, want.weighted);
    }
    // A +inf logit is the largest finite value, and the one best; all -inf leaves no terms.
    let mut logits = vec![1.0; 3000];
    logits[2500] = f32::INFINITY;
    let got = gpu.best_logits(&logits, 1.0).wait().unwrap();
    assert_eq!(got.best[0], (2500, f32::MAX));
    assert_eq!(got.best[1..], BestLogits::of(&logits, 1.0).best[1..]);
    let got = gpu.best_logits(&[f32::NEG_INFINITY; 2000], 1.0).wait().unwrap();
    assert_eq!((got.best[0], got.z, got.weighted), ((0, f32::NEG_INFINITY), 0.0, 0.0));
}

/// Blocks of [`Gpu::q8_inputs`] read back as their quants, scale and scaled sum each.
fn q8_blocks(bytes: &[u8]) -> Vec<([i8; 32], f32, f32)> {
    let float = |b: &[u8]| f32::from_le_bytes(b.try_into().unwrap());
    bytes
        .chunks_exact(48)
        .map(|block| (std::array::from_fn(|i| block[i] as i8), float(&block[32..36]), float(&block[36..40])))
        .collect()
}

#[test]
fn inputs_are_quantized_to_8_bits_as_ggmls_cpu_quantizes_them() {
    use crate::tensor::{ActivationType, QuantizedActivations};
    // For each weight type's `vec_dot_type` (Q8_0, Q8_1, Q8_K): the quants and scales our CPU
    // path gives (ggml's, tested against its bytes in tensor::activations), bit for bit, so the
    // integer sums are llama.cpp's; Q8_1's f16 `d · Σq` too; a block of zeros, one of one
    // value, tiny values (f16's subnormals), and a value past f16's range as Q8_K's f32 scale.
    let gpu = gpu();
    let mut rng = Rng(23);
    let mut x = random(256 * 9, 3.0, &mut rng);
    x[256..512].fill(0.0);
    x[512..544].fill(-2.5);
    x[768..1024].iter_mut().for_each(|v| *v *= 1e-6);
    x[1100] = 1e7;
    for weight_type in [WeightType::Q4_0, WeightType::Q4_1, WeightType::Q4_K] {
        let blocks = q8_blocks(&gpu.q8_inputs(&x, weight_type).wait().unwrap());
        let format = weight_type.activation_type();
        let cpu = QuantizedActivations::quantize(format, &x, 1, x.len()).unwrap();
        let mut want = vec![0.0; x.len()];
        cpu.dequantize_row(0, &mut want).unwrap();
        let got: Vec<f32> =
            blocks.iter().flat_map(|(quants, d, _)| quants.map(|q| f32::from(q) * d)).collect();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{format:?}, value {i} ({}): GPU {g}, CPU {w}", x[i]);
        }
        for (b, (quants, d, scaled_sum)) in blocks.iter().enumerate() {
            assert!(quants.iter().all(|&q| q != i8::MIN), "{format:?} block {b}: -128 is outside the range");
            let sum: i32 = quants.iter().map(|&q| i32::from(q)).sum();
            if format == ActivationType::Q8_1 {
                let s = cpu.row::<crate::tensor::BlockQ8_1>(0).unwrap()[b].s.to_f32();
                assert_eq!(scaled_sum.to_bits(), s.to_bits(), "Q8_1 block {b}: d·Σq");
            } else if format == ActivationType::Q8_K {
                assert_eq!(*scaled_sum, d * sum as f32, "Q8_K block {b}");
            }
        }
        assert_eq!(blocks[8], ([0; 32], 0.0, 0.0), "{format:?}: zeros");
    }
    assert!(matches!(gpu.q8_inputs(&[1.0; 33], WeightType::Q4_0).wait(), Err(GpuError::Shape(_))));
    assert!(matches!(gpu.q8_inputs(&[1.0; 64], WeightType::Q6_K).wait(), Err(GpuError::Shape(_))));
}

#[test]
fn every_8_bit_matrix_kernel_matches_its_cpu_twin_over_the_quantized_inputs() {
    use super::shaders::Q8_DOT_TYPES;
    // Decode, a short batch and the GEMM (two tiles of rows, then of inputs), with subgroups
    // and without: the exact integer sums, scaled, equal the CPU's f64 product of the
    // dequantized weights with the dequantized inputs within the float kernels' bound (Q4_1's
    // and Q5_1's offsets times the inputs' sums as ggml's Q8_1 stores them, rounded to f16);
    // each short batch's row equals that row alone. Off again, the float kernels run (their
    // outputs differ).
    let with = gpu();
    let without = Wait::wait(Gpu::request_with(false)).unwrap();
    let mut rng = Rng(29);
    for gpu in [&with, &without] {
        gpu.set_integer_dots(true);
        for &weight_type in &Q8_DOT_TYPES {
            let block = weight_type.block_len();
            let gemm = [(70, 512, GEMM_MIN_BATCH), (21, 1024, 37)];
            for (rows, cols, batch) in
                [(3, block, 1), (17, block * 9, 1), (21, 1024, 3), (21, 1024, 12)].into_iter().chain(gemm)
            {
                let bytes = random_matrix(weight_type, rows, cols, &mut rng);
                let x = random(cols * batch, 2.0, &mut rng);
                let got = gpu.matvec(weight_type, &bytes, rows, cols, &x).wait().unwrap();
                let blocks = q8_blocks(&gpu.q8_inputs(&x, weight_type).wait().unwrap());
                let quantized: Vec<f32> =
                    blocks.iter().flat_map(|(quants, d, _)| quants.map(|q| f32::from(q) * d)).collect();
                // What the stored sums add past the exact ones: each block's offset `m` times
                // the rounding of `d · Σq`.
                let offsets = matches!(weight_type, WeightType::Q4_1 | WeightType::Q5_1);
                let row_bytes = weight_type.row_bytes(cols).unwrap();
                let rounding = |row: usize, input: usize| -> f64 {
                    let units = cols / 32;
                    (0..units * usize::from(offsets))
                        .map(|u| {
                            let at = row * row_bytes + u * weight_type.block_bytes() + 2;
                            let m = f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f64();
                            let (quants, d, s) = blocks[input * units + u];
                            let exact = f64::from(d) * quants.iter().map(|&q| f64::from(q)).sum::<f64>();
                            m * (f64::from(s) - exact)
                        })
                        .sum()
                };
                for (r, input) in quantized.chunks_exact(cols).enumerate() {
                    let got = &got[r * rows..(r + 1) * rows];
                    if batch > 1 && batch < GEMM_MIN_BATCH {
                        let alone = &x[r * cols..(r + 1) * cols];
                        assert_eq!(got, gpu.matvec(weight_type, &bytes, rows, cols, alone).wait().unwrap());
                    }
                    for (i, (&g, &(dot, magnitude))) in
                        got.iter().zip(&cpu_matvec(weight_type, &bytes, rows, cols, input)).enumerate()
                    {
                        let dot = dot + rounding(i, r);
                        let error = (f64::from(g) - dot).abs();
                        assert!(
                            error <= 1e-5 * magnitude + 1e-6,
                            "{weight_type:?} {rows}×{cols}, input row {r}, row {i}: GPU {g}, CPU {dot}, subgroups {}",
                            gpu.facts().subgroups
                        );
                    }
                }
                gpu.set_integer_dots(false);
                assert_ne!(got, gpu.matvec(weight_type, &bytes, rows, cols, &x).wait().unwrap());
                gpu.set_integer_dots(true);
            }
        }
    }
}

#[test]
fn rms_norm_stores_its_rows_in_8_bits_as_the_quantizer_would() {
    // A decode step's norm before products over 8-bit inputs: the same rows, bit for bit, and
    // their blocks exactly what quantizing those rows separately gives (three rows: a batch),
    // for each of the three formats (Q8_K's blocks of 256: rows of 768).
    let gpu = gpu();
    let mut rng = Rng(31);
    let (x, weight) = (random(3 * 768, 4.0, &mut rng), random(768, 1.5, &mut rng));
    for weight_type in [WeightType::Q4_0, WeightType::Q4_1, WeightType::Q6_K] {
        let (rows, blocks) = gpu.rms_norm_q8(&x, &weight, 1e-6, weight_type).wait().unwrap();
        assert_eq!(rows, gpu.rms_norm(&x, &weight, 1e-6).wait().unwrap());
        assert_eq!(blocks, gpu.q8_inputs(&rows, weight_type).wait().unwrap(), "{weight_type:?}");
    }
    let short = gpu.rms_norm_q8(&x[..3 * 640], &weight[..640], 1e-6, WeightType::Q4_K).wait();
    assert!(matches!(short, Err(GpuError::Shape(_))), "rows of 640 are not blocks of 256");
}
