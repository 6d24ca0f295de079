//! The element-wise and per-row steps of a transformer layer, written to round like ggml's CPU
//! backend (sums of squares in f64, everything else in f32). Over a prefill batch they run in
//! parallel parts of whole rows (or elements): each value is computed as on one thread.

use crate::parallel;
use crate::tensor::{fma, ggml_expf, sum_lanes, table_over_f16};
use half::f16;

use super::arch::Activation;
use super::config::{Rope, RopeStyle, Yarn};

/// Elements below which a part of an element-wise step is not worth another thread: in a
/// prefill batch these steps took 10 % of a single-threaded step (SmolLM2, pp64), enough to
/// hold two threads well below twice one's speed; a decode step's norms stay whole.
const MIN_PART_ELEMENTS: usize = 4 * 1024;

/// [`MIN_PART_ELEMENTS`] for the gated activations, which cost several nanoseconds per element
/// (an `exp` or a GELU lookup): a decode step's are split too.
const MIN_GATED_PART_ELEMENTS: usize = 512;

/// Runs `step(first element, part)` over `values` cut into parts of whole rows of `width`
/// elements, each at least `min_elements` long, in parallel where that pays.
fn in_row_parts(
    values: &mut [f32],
    width: usize,
    min_elements: usize,
    step: impl Fn(usize, &mut [f32]) + Sync + Send,
) {
    let width = width.max(1);
    parallel::for_each_part(values, width, min_elements.div_ceil(width), |first_row, part| {
        step(first_row * width, part)
    });
}

/// `x[i] = combine(x[i], y[i])` for every element, in parallel parts of at least `min_elements`.
fn combine_in_parts(
    x: &mut [f32],
    y: &[f32],
    min_elements: usize,
    combine: impl Fn(f32, f32) -> f32 + Sync + Send,
) {
    in_row_parts(x, 1, min_elements, |first, x| {
        for (a, &b) in x.iter_mut().zip(&y[first..]) {
            *a = combine(*a, b);
        }
    });
}

/// `out = x / sqrt(mean(x²) + eps) * weight`, row by row over rows of `weight.len()`.
pub fn rms_norm(out: &mut [f32], x: &[f32], weight: &[f32], eps: f32) {
    let n = weight.len();
    in_row_parts(out, n, MIN_PART_ELEMENTS, |first, out| {
        for (out_row, x_row) in out.chunks_exact_mut(n).zip(x[first..].chunks_exact(n)) {
            let scale = rms_scale(x_row, eps);
            for ((o, &v), &w) in out_row.iter_mut().zip(x_row).zip(weight) {
                *o = (v * scale) * w;
            }
        }
    });
}

/// [`rms_norm`] in place, over every `weight.len()`-sized chunk (Q/K norm runs per head).
pub fn rms_norm_in_place(x: &mut [f32], weight: &[f32], eps: f32) {
    in_row_parts(x, weight.len(), MIN_PART_ELEMENTS, |_, x| {
        for row in x.chunks_exact_mut(weight.len()) {
            let scale = rms_scale(row, eps);
            for (v, &w) in row.iter_mut().zip(weight) {
                *v = (*v * scale) * w;
            }
        }
    });
}

/// `x / sqrt(mean(x²) + eps)` in place over every `n`-sized chunk: ggml's `rms_norm` with no
/// weight after it (Gemma 4's vision encoder normalizes its values per head, and its pooled rows).
pub fn rms_norm_unweighted_in_place(x: &mut [f32], n: usize, eps: f32) {
    in_row_parts(x, n, MIN_PART_ELEMENTS, |_, x| {
        for row in x.chunks_exact_mut(n) {
            let scale = rms_scale(row, eps);
            row.iter_mut().for_each(|v| *v *= scale);
        }
    });
}

/// LayerNorm (ggml's `norm`, then its `mul` and `add`): each row of `weight.len()` becomes
/// `(x − mean) / sqrt(variance + eps) · weight (+ bias)`.
pub fn layer_norm_in_place(x: &mut [f32], weight: &[f32], bias: Option<&[f32]>, eps: f32) {
    let n = weight.len();
    in_row_parts(x, n, MIN_PART_ELEMENTS, |_, x| {
        for row in x.chunks_exact_mut(n) {
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            let mean = sum as f32 / n as f32;
            row.iter_mut().for_each(|v| *v -= mean);
            let scale = 1.0 / (centered_variance(row) + eps).sqrt();
            for (v, &w) in row.iter_mut().zip(weight) {
                *v = (*v * scale) * w;
            }
            if let Some(bias) = bias {
                row.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
            }
        }
    });
}

/// The mean of the squares of centered values, summed as ggml's x86 builds (AVX2) sum them:
/// eight at a time, each eight added pairwise in f32 (upper half onto lower, then lanes 0+2
/// and 1+3, then those two), the partial sums in f64.
fn centered_variance(centered: &[f32]) -> f32 {
    let mut chunks = centered.chunks_exact(8);
    let mut sum = 0.0f64;
    for c in &mut chunks {
        let s: [f32; 8] = std::array::from_fn(|i| c[i] * c[i]);
        let half: [f32; 4] = std::array::from_fn(|i| s[i + 4] + s[i]);
        sum += f64::from((half[0] + half[2]) + (half[1] + half[3]));
    }
    sum += chunks.remainder().iter().map(|&v| f64::from(v * v)).sum::<f64>();
    (sum / centered.len() as f64) as f32
}

pub(super) fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// The cos/sin table of one position: `head_dims/2` pairs, built by repeated multiplication
/// like ggml's `rope_yarn_cache_init` so that the angles round the same way.
pub fn rope_table(
    table: &mut Vec<(f32, f32)>,
    position: usize,
    rope: Rope,
    rope_dims: usize,
    freq_factors: Option<&[f32]>,
) {
    table.clear();
    let theta_scale = rope.base.powf(-2.0 / rope_dims as f32);
    let ramp = rope.yarn.map(|yarn| yarn.ramp(rope_dims, rope.base));
    let mut theta = position as f32;
    for i in 0..rope_dims / 2 {
        let factor = freq_factors.map_or(1.0, |f| f[i]);
        let unscaled = theta / factor;
        let mut angle = rope.freq_scale * unscaled;
        if let Some(ramp) = ramp {
            // `scaled·(1 - e) + unscaled·e`, the first product fused as GCC contracts it.
            let extrapolated = Yarn::extrapolation(ramp, i);
            angle = fma(angle, 1.0 - extrapolated, unscaled * extrapolated);
        }
        table.push((angle.cos() * rope.attn_factor, angle.sin() * rope.attn_factor));
        theta *= theta_scale;
    }
}

/// The cos/sin table of a row at M-RoPE positions `[text, row, column]` (ggml's
/// `ggml_mrope_cache_init`, interleaved): each pair's entry from its stream's position
/// (`streams`, one per pair; the fourth stream's position is 0). Without `streams`, plain RoPE at
/// the text position. `other` is working room.
pub fn mrope_table(
    table: &mut Vec<(f32, f32)>,
    other: &mut Vec<(f32, f32)>,
    positions: [usize; 3],
    rope: Rope,
    rope_dims: usize,
    freq_factors: Option<&[f32]>,
    streams: &[u8],
) {
    rope_table(table, positions[0], rope, rope_dims, freq_factors);
    for stream in 1..4u8 {
        let position = positions.get(stream as usize).copied().unwrap_or(0);
        // A stream at the text's position has its table already (every stream of a text row).
        if position == positions[0] || !streams.contains(&stream) {
            continue;
        }
        // Each stream's angles by the same repeated products as the text's, as ggml's cache
        // multiplies all four in step.
        rope_table(other, position, rope, rope_dims, freq_factors);
        for (entry, (&of, &from)) in table.iter_mut().zip(streams.iter().zip(other.iter())) {
            if of == stream {
                *entry = from;
            }
        }
    }
}

/// Rotates the first `2 * table.len()` dimensions of every head in `x` (heads of `head_dim`).
pub fn apply_rope(x: &mut [f32], head_dim: usize, table: &[(f32, f32)], style: RopeStyle) {
    let half = table.len();
    for head in x.chunks_exact_mut(head_dim) {
        for (i, &(cos, sin)) in table.iter().enumerate() {
            let (a, b) = match style {
                RopeStyle::Normal => (2 * i, 2 * i + 1),
                RopeStyle::Neox => (i, i + half),
            };
            let (x0, x1) = (head[a], head[b]);
            // GCC contracts ggml's `x0*cos - x1*sin` and `x0*sin + x1*cos` into FMAs (its
            // default -ffp-contract=fast); rounding the same way keeps RoPE bit-identical.
            head[a] = fma(x0, cos, -(x1 * sin));
            head[b] = fma(x0, sin, x1 * cos);
        }
    }
}

/// `gate = act(gate) * up` with the architecture's gated activation.
pub fn gated(activation: Activation, gate: &mut [f32], up: &[f32]) {
    match activation {
        Activation::GeGlu => geglu(gate, up),
        Activation::SwiGluOai => swiglu_oai(gate, up),
        Activation::SwiGlu | Activation::Gelu => swiglu(gate, up),
    }
}

/// gpt-oss's clamped SwiGLU (ggml's `swiglu_oai`, α 1.702, limit 7): the gate capped at 7,
/// the up projection clamped to ±7, `gate · sigmoid(α · gate) · (up + 1)`. A NaN gate stays NaN
/// as with C++'s `std::min` (Rust's `min` would drop it).
pub fn swiglu_oai(gate: &mut [f32], up: &[f32]) {
    const ALPHA: f32 = 1.702;
    const LIMIT: f32 = 7.0;
    combine_in_parts(gate, up, MIN_GATED_PART_ELEMENTS, |g, u| {
        let x = if LIMIT < g { LIMIT } else { g };
        x / (1.0 + (ALPHA * -x).exp()) * (u.clamp(-LIMIT, LIMIT) + 1.0)
    });
}

/// Each run of `n` values of `rows` (`n` a power of two; 0: none) turned by the orthonormal
/// Walsh-Hadamard matrix as ggml's `fwht` turns it: scaled by 1/√n first, then log2(n)
/// butterfly passes of sums and differences (the matrix is its own inverse). llama.cpp turns
/// queries, keys and values this way around a quantized KV cache, whose blocks then quantize
/// values with their outliers spread out.
pub fn walsh_hadamard(rows: &mut [f32], n: usize) {
    if n == 0 {
        return;
    }
    debug_assert!(n.is_power_of_two() && rows.len().is_multiple_of(n));
    let scale = 1.0 / (n as f32).sqrt();
    for row in rows.chunks_exact_mut(n) {
        row.iter_mut().for_each(|x| *x *= scale);
        let mut len = 1;
        while len < n {
            for pair in row.chunks_exact_mut(2 * len) {
                let (low, high) = pair.split_at_mut(len);
                for (u, v) in low.iter_mut().zip(high) {
                    (*u, *v) = (*u + *v, *u - *v);
                }
            }
            len *= 2;
        }
    }
}

/// `x[i] = exp(x[i] - max)`, returning their sum, as ggml's `ggml_vec_soft_max_f32` on an AVX2
/// host computes both: groups of eight through its vectorized exponential, each group summed
/// in f32 as a 256-bit register reduces and the groups in f64; the rest through libm's.
pub fn exp_and_sum(x: &mut [f32], max: f32) -> f64 {
    let whole = x.len() / 8 * 8;
    let (groups, rest) = x.split_at_mut(whole);
    crate::tensor::exp_shifted(groups, max);
    let mut sum = 0.0f64;
    for group in groups.chunks_exact(8) {
        sum += f64::from(sum_lanes(std::array::from_fn(|i| group[i])));
    }
    for v in rest {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    sum
}

/// ggml's `soft_max` of one row, in place.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let scale = (1.0 / exp_and_sum(x, max)) as f32;
    x.iter_mut().for_each(|v| *v *= scale);
}

/// `gate = silu(gate) * up` (SwiGLU), with ggml's vectorized `expf` so that the product
/// rounds exactly as llama.cpp's (a correctly rounded `exp` differs in the last bit often
/// enough to flip activation quantizations downstream).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    combine_in_parts(gate, up, MIN_GATED_PART_ELEMENTS, |g, u| silu(g) * u);
}

/// `x · sigmoid(x)` with ggml's vectorized exponential (`ggml_v_silu`).
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + ggml_expf(-x))
}

/// `1 / (1 + e^-x)`, as ggml's scalar sigmoid.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `gate = gelu(gate) * up` (GeGLU), with ggml's CPU GELU: the tanh approximation evaluated on
/// the input rounded to f16, result rounded to f16 (ggml reads it from a 64K-entry f16 table).
pub fn geglu(gate: &mut [f32], up: &[f32]) {
    combine_in_parts(gate, up, MIN_GATED_PART_ELEMENTS, |g, u| gelu(g) * u);
}

/// ggml's CPU GELU of one value (its f16 table, exact past ±10).
pub fn gelu(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_table()[usize::from(f16::from_f32(x).to_bits())]
    }
}

/// [`gelu`] between ±10, for every f16 input: ggml's table too, and for the same reason. In
/// wasm a `tanh` costs tens of nanoseconds, and Gemma runs 37,000 GELUs per token.
fn gelu_table() -> &'static [f32; 65536] {
    // Not `OnceLock`: see `once_cell` in Cargo.toml (helper threads race to first use here).
    static TABLE: once_cell::race::OnceBox<[f32; 65536]> = once_cell::race::OnceBox::new();
    TABLE.get_or_init(|| table_over_f16(gelu_of_f16))
}

/// ggml's GELU of an f16 input, rounded to f16.
fn gelu_of_f16(x: f16) -> f32 {
    f16::from_f32(gelu_tanh(x.to_f32())).to_f32()
}

/// ggml's `ggml_gelu_f32` as its x86 build compiles it: GCC contracts `1 + a·x·x` into a fused
/// multiply-add (`-ffp-contract=fast` is its default, and the build has FMA). Without it, a few
/// table entries (x = -1.999 among them) were an f16 ulp off llama.cpp's.
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044_715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (COEF_A * x).mul_add(x, 1.0)).tanh())
}

/// ggml's CPU quick GELU, `x · sigmoid(1.702 x)`, of one value: read from its table over f16
/// inputs (ggml's `GGML_GELU_QUICK_FP16`, which has no exact range as [`gelu`] has). clip.cpp
/// runs it in vision encoders whose files ask for neither GELU nor SiLU (Gemma 4's).
pub fn gelu_quick(x: f32) -> f32 {
    gelu_quick_table()[usize::from(f16::from_f32(x).to_bits())]
}

fn gelu_quick_table() -> &'static [f32; 65536] {
    static TABLE: once_cell::race::OnceBox<[f32; 65536]> = once_cell::race::OnceBox::new();
    TABLE.get_or_init(|| {
        table_over_f16(|x| {
            let x = x.to_f32();
            f16::from_f32(x * (1.0 / (1.0 + (-1.702 * x).exp()))).to_f32()
        })
    })
}

/// `x += y`.
pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    combine_in_parts(x, y, MIN_PART_ELEMENTS, |a, b| a + b);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The butterflies give the Sylvester matrix (entry `(-1)^popcount(i & j) / √n`) times each
    /// run, and turning twice gives the runs back.
    #[test]
    fn the_walsh_hadamard_turn_is_the_orthonormal_matrix_and_its_own_inverse() {
        let n = 64;
        let rows: Vec<f32> = (0..2 * n).map(|i| ((i * 37 % 29) as f32 - 14.0) * 0.37).collect();
        let mut turned = rows.clone();
        walsh_hadamard(&mut turned, n);
        for (run, out) in rows.chunks_exact(n).zip(turned.chunks_exact(n)) {
            for (i, &got) in out.iter().enumerate() {
                let expected: f64 = (0..n)
                    .map(|j| if (i & j).count_ones() % 2 == 0 { 1.0 } else { -1.0 } * f64::from(run[j]))
                    .sum::<f64>()
                    / (n as f64).sqrt();
                assert!((f64::from(got) - expected).abs() < 1e-4, "{i}: {got} vs {expected}");
            }
        }
        walsh_hadamard(&mut turned, n);
        for (back, original) in turned.iter().zip(&rows) {
            assert!((back - original).abs() < 1e-5, "{back} vs {original}");
        }
        let mut untouched = rows.clone();
        walsh_hadamard(&mut untouched, 0);
        assert_eq!(untouched, rows);
    }

    /// The table holds, for every f16 input, what the formula gives.
    #[test]
    fn gelu_reads_the_formula_from_its_table() {
        for bits in 0..=u16::MAX {
            let x = f16::from_bits(bits).to_f32();
            if x.is_nan() || x.abs() >= 10.0 {
                continue;
            }
            assert_eq!(gelu(x).to_bits(), gelu_of_f16(f16::from_bits(bits)).to_bits(), "gelu({x})");
        }
        for x in [0.1234567f32, -3.3333, 9.99, -9.99, 1e-7] {
            assert_eq!(gelu(x).to_bits(), gelu_of_f16(f16::from_f32(x)).to_bits(), "gelu({x})");
        }
        assert_eq!((gelu(-10.5), gelu(12.25)), (0.0, 12.25));
    }

    /// LayerNorm leaves a row of mean 0 and variance 1 before its weight and bias, with the
    /// variance summed in ggml's order within rounding of a plain sum.
    #[test]
    fn layer_norm_centers_and_scales_then_applies_weight_and_bias() {
        let row: Vec<f32> = (0..21).map(|i| (i as f32 * 0.37).sin() * 3.0 + 1.5).collect();
        let mut x = row.clone();
        layer_norm_in_place(&mut x, &[1.0; 21], None, 0.0);
        let mean = x.iter().sum::<f32>() / 21.0;
        let variance = x.iter().map(|v| v * v).sum::<f32>() / 21.0;
        assert!(mean.abs() < 1e-6 && (variance - 1.0).abs() < 1e-5, "{mean} {variance}");
        let mean = row.iter().sum::<f32>() / 21.0;
        let centered: Vec<f32> = row.iter().map(|v| v - mean).collect();
        let plain = centered.iter().map(|v| f64::from(v * v)).sum::<f64>() / 21.0;
        assert!((f64::from(centered_variance(&centered)) - plain).abs() < 1e-6 * plain);
        let (weight, bias) = ([2.0; 21], [0.5; 21]);
        let mut y = row.clone();
        layer_norm_in_place(&mut y, &weight, Some(&bias), 0.0);
        for (a, b) in x.iter().zip(&y) {
            assert_eq!(*b, a * 2.0 + 0.5);
        }
    }

    #[test]
    fn rms_norm_of_a_constant_row_is_the_weight() {
        let mut out = [0.0; 4];
        rms_norm(&mut out, &[3.0; 4], &[1.0, 2.0, 3.0, 4.0], 0.0);
        for (o, w) in out.iter().zip([1.0, 2.0, 3.0, 4.0]) {
            assert!((o - w).abs() < 1e-6, "{out:?}");
        }
    }

    #[test]
    fn rope_at_position_zero_is_identity_and_preserves_norm_elsewhere() {
        let rope = Rope { base: 10_000.0, freq_scale: 1.0, attn_factor: 1.0, yarn: None };
        let mut table = Vec::new();
        let original: Vec<f32> = (0..8).map(|i| i as f32 - 3.5).collect();
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            rope_table(&mut table, 0, rope, 8, None);
            let mut x = original.clone();
            apply_rope(&mut x, 8, &table, style);
            assert_eq!(x, original);
            rope_table(&mut table, 17, rope, 8, None);
            apply_rope(&mut x, 8, &table, style);
            let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
            assert!((norm(&x) - norm(&original)).abs() < 1e-3);
            assert_ne!(x, original);
        }
    }

    #[test]
    fn neox_and_normal_pair_different_dimensions() {
        let rope = Rope { base: 10_000.0, freq_scale: 1.0, attn_factor: 1.0, yarn: None };
        let mut table = Vec::new();
        rope_table(&mut table, 1, rope, 4, None);
        // Only dimension 0 is non-zero: NORM mixes it into dimension 1, NEOX into dimension 2.
        let mut normal = vec![1.0, 0.0, 0.0, 0.0];
        apply_rope(&mut normal, 4, &table, RopeStyle::Normal);
        let mut neox = vec![1.0, 0.0, 0.0, 0.0];
        apply_rope(&mut neox, 4, &table, RopeStyle::Neox);
        assert!(normal[1].abs() > 0.5 && normal[2] == 0.0);
        assert!(neox[2].abs() > 0.5 && neox[1] == 0.0);
    }

    #[test]
    fn ggml_expf_is_a_close_exponential_with_ggml_constants() {
        // The hex constants of ggml_v_expf, spelled as bits above.
        assert_eq!(f32::from_bits(0x3fb8_aa3b), std::f32::consts::LOG2_E);
        assert_eq!(f32::from_bits(0x3f31_7200), 0.693_145_75);
        // Over the normal range of results (subnormal results keep fewer bits).
        for i in -1740..1760 {
            let x = i as f32 * 0.05;
            let (ours, exact) = (ggml_expf(x), (f64::from(x)).exp());
            let relative = ((f64::from(ours) - exact) / exact).abs();
            assert!(relative < 4e-7, "{x}: {ours} vs {exact}");
        }
        assert_eq!(ggml_expf(-200.0), 0.0);
        assert_eq!(ggml_expf(200.0), f32::INFINITY);
        assert_eq!(ggml_expf(0.0), 1.0);
    }

    #[test]
    fn gated_activations_match_their_definitions() {
        let mut g = vec![1.0, -2.0];
        swiglu(&mut g, &[2.0, 1.0]);
        assert!((g[0] - 2.0 * 0.731_058_6).abs() < 1e-5 && (g[1] + 0.238_405_8).abs() < 1e-5);
        let mut g = vec![1.0, 20.0, -20.0];
        geglu(&mut g, &[1.0, 1.0, 1.0]);
        assert!((g[0] - 0.841_192).abs() < 1e-3 && g[1] == 20.0 && g[2] == 0.0);
    }
}
