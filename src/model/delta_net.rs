//! The steps of a gated DeltaNet layer (Qwen3.5's "linear attention"), as llama.cpp computes
//! them: a causal convolution over the projected queries, keys and values, L2-normalized
//! queries and keys, and the gated delta rule, a recurrence on one `d × d` state per value
//! head:
//!
//! ```text
//! S ← exp(g)·S;   δ = β·(v − Sᵀk);   S ← S + k·δᵀ;   o = Sᵀq / √d
//! ```
//!
//! One token at a time (decode) follows that recurrence exactly as ggml's CPU op does. A
//! prompt goes through in chunks instead (the chunked delta rule): within a chunk the δs solve
//! a small triangular system, so the state is read and written once per chunk rather than
//! once per token, and the work becomes dot products and row updates over the chunk.

use super::config::DeltaNet;
use super::ops::{rms_scale, sigmoid, silu};
use crate::parallel;

/// Tokens per chunk of the chunked delta rule (llama.cpp's chunk size for scalar gates).
pub const CHUNK: usize = 64;

/// The causal convolution of the DeltaNet's projected queries, keys and values, each output
/// through SiLU: [`causal_conv`] of the layer's `conv_dim` channels.
pub fn causal_conv_silu(
    shape: &DeltaNet,
    state: &mut [f32],
    taps: &[f32],
    x: &[f32],
    out: &mut [f32],
    window: &mut Vec<f32>,
) {
    causal_conv(shape.conv_dim(), shape.conv_kernel, state, taps, x, out, window, silu);
}

/// A causal convolution of each of `channels` channels over its last `kernel` inputs (ggml's
/// `ssm_conv`), then `activation`: the window is the previous batch's last `kernel - 1`
/// inputs (`state`) followed by `x` (`n` rows of `channels`); `state` then takes the window's
/// last rows. The sum runs over the taps in order with fused multiply-adds, as ggml's
/// `ssm_conv` compiles. `taps` holds each channel's `kernel` taps together.
#[allow(clippy::too_many_arguments)]
pub fn causal_conv(
    channels: usize,
    kernel: usize,
    state: &mut [f32],
    taps: &[f32],
    x: &[f32],
    out: &mut [f32],
    window: &mut Vec<f32>,
    activation: impl Fn(f32) -> f32,
) {
    window.clear();
    window.extend_from_slice(state);
    window.extend_from_slice(x);
    for (t, out_row) in out.chunks_exact_mut(channels).enumerate() {
        let rows = &window[t * channels..(t + kernel) * channels];
        for (c, o) in out_row.iter_mut().enumerate() {
            let channel_taps = &taps[c * kernel..(c + 1) * kernel];
            let sum = channel_taps
                .iter()
                .enumerate()
                .fold(0.0, |sum, (i, &w)| crate::tensor::fma(rows[i * channels + c], w, sum));
            *o = activation(sum);
        }
    }
    let n = x.len() / channels;
    state.copy_from_slice(&window[n * channels..]);
}

/// The per-token, per-value-head gates: `alpha` becomes the log-decay
/// `g = softplus(alpha + dt_bias) · a` (`a < 0`, so `g < 0`), `beta` becomes `sigmoid(beta)`.
pub fn gates(dt_bias: &[f32], a: &[f32], alpha: &mut [f32], beta: &mut [f32]) {
    let heads = a.len();
    for row in alpha.chunks_exact_mut(heads) {
        for ((g, &bias), &rate) in row.iter_mut().zip(dt_bias).zip(a) {
            let x = *g + bias;
            let softplus = if x > 20.0 { x } else { (1.0 + x.exp()).ln() };
            *g = softplus * rate;
        }
    }
    beta.iter_mut().for_each(|b| *b = sigmoid(*b));
}

/// Scales every `head_dim`-sized head of `x` to unit length, as llama.cpp spells it: an
/// RMSNorm with `eps / d`, then a factor `1 / √d`.
pub fn l2_normalize_heads(x: &mut [f32], head_dim: usize, eps: f32) {
    let d = head_dim as f32;
    let (eps, inverse_sqrt) = (eps / d, 1.0 / d.sqrt());
    for head in x.chunks_exact_mut(head_dim) {
        let scale = rms_scale(head, eps);
        head.iter_mut().for_each(|v| *v = (*v * scale) * inverse_sqrt);
    }
}

/// The tokens of one batch, laid out as the convolution leaves them.
pub struct DeltaInputs<'a> {
    /// `n` rows of `conv_dim`: queries (`k_heads` heads), keys (`k_heads`), values
    /// (`v_heads`), each head `head_dim` long, queries and keys already L2-normalized.
    pub qkv: &'a [f32],
    /// `n` rows of `v_heads`: log-decays and betas.
    pub g: &'a [f32],
    pub beta: &'a [f32],
}

impl DeltaInputs<'_> {
    fn query(&self, shape: &DeltaNet, t: usize, head: usize) -> &[f32] {
        let d = shape.head_dim;
        &self.qkv[t * shape.conv_dim() + (head % shape.k_heads) * d..][..d]
    }

    fn key(&self, shape: &DeltaNet, t: usize, head: usize) -> &[f32] {
        let d = shape.head_dim;
        &self.qkv[t * shape.conv_dim() + shape.key_dim() + (head % shape.k_heads) * d..][..d]
    }

    fn value(&self, shape: &DeltaNet, t: usize, head: usize) -> &[f32] {
        let d = shape.head_dim;
        &self.qkv[t * shape.conv_dim() + 2 * shape.key_dim() + head * d..][..d]
    }

    fn gate(&self, shape: &DeltaNet, t: usize, head: usize) -> (f32, f32) {
        let i = t * shape.v_heads + head;
        (self.g[i], self.beta[i])
    }
}

/// Runs the delta rule for every value head over the batch, from and into `states` (per head,
/// the state's transpose: `head_dim` rows, one per value dimension). `out` receives `n` rows
/// of `value_dim`; `by_head` is working space. One token goes the sequential way, more go by
/// chunks. Heads are independent and run in parallel.
pub fn delta_rule(
    shape: &DeltaNet,
    inputs: &DeltaInputs,
    states: &mut [f32],
    out: &mut [f32],
    by_head: &mut Vec<f32>,
) {
    let d = shape.head_dim;
    let n = inputs.g.len() / shape.v_heads;
    by_head.clear();
    by_head.resize(n * shape.value_dim(), 0.0);
    let parts: Vec<_> =
        states.chunks_exact_mut(d * d).zip(by_head.chunks_exact_mut(n * d)).enumerate().collect();
    parallel::for_each(parts, |(head, (state, head_out))| {
        if n == 1 {
            sequential_head(shape, inputs, head, state, head_out);
        } else {
            chunked_head(shape, inputs, head, state, head_out);
        }
    });
    for (head, head_out) in by_head.chunks_exact(n * d).enumerate() {
        for (t, o) in head_out.chunks_exact(d).enumerate() {
            out[t * shape.value_dim() + head * d..][..d].copy_from_slice(o);
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `y += a · x`.
fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    y.iter_mut().zip(x).for_each(|(y, &x)| *y += a * x);
}

/// ggml's `gated_delta_net` for one head, token after token.
fn sequential_head(shape: &DeltaNet, inputs: &DeltaInputs, head: usize, state: &mut [f32], out: &mut [f32]) {
    let d = shape.head_dim;
    let scale = 1.0 / (d as f32).sqrt();
    let mut delta = vec![0.0f32; d];
    for (t, out) in out.chunks_exact_mut(d).enumerate() {
        let (q, k, v) =
            (inputs.query(shape, t, head), inputs.key(shape, t, head), inputs.value(shape, t, head));
        let (g, beta) = inputs.gate(shape, t, head);
        let decay = g.exp();
        state.iter_mut().for_each(|s| *s *= decay);
        for ((delta, row), &v) in delta.iter_mut().zip(state.chunks_exact(d)).zip(v) {
            *delta = (v - dot(row, k)) * beta;
        }
        for (row, &delta) in state.chunks_exact_mut(d).zip(&delta) {
            axpy(row, delta, k);
        }
        for (o, row) in out.iter_mut().zip(state.chunks_exact(d)) {
            *o = dot(row, q) * scale;
        }
    }
}

/// The same recurrence, `CHUNK` tokens at a time. With `S₀` the state before a chunk and
/// `Gₜ` the running sum of the chunk's log-decays (so `e^(Gₜ−Gₛ) ≤ 1` for `s ≤ t`):
///
/// ```text
/// δₜ  = βₜ·(vₜ − e^Gₜ·S₀ᵀkₜ) − βₜ·Σ_{s<t} e^(Gₜ−Gₛ)(kₜ·kₛ)·δₛ        (forward substitution)
/// oₜ  = e^Gₜ·S₀ᵀqₜ + Σ_{s≤t} e^(Gₜ−Gₛ)(qₜ·kₛ)·δₛ
/// S_C = e^G_C·S₀ + Σₛ e^(G_C−Gₛ)·kₛ·δₛᵀ
/// ```
///
/// Only differences of `G` are exponentiated besides `e^Gₜ` itself, so nothing overflows.
fn chunked_head(shape: &DeltaNet, inputs: &DeltaInputs, head: usize, state: &mut [f32], out: &mut [f32]) {
    let d = shape.head_dim;
    let n = out.len() / d;
    let scale = 1.0 / (d as f32).sqrt();
    let mut cumulative = [0.0f32; CHUNK];
    let mut deltas = vec![0.0f32; CHUNK * d];
    let mut projected = vec![0.0f32; CHUNK * d];
    for first in (0..n).step_by(CHUNK) {
        let len = CHUNK.min(n - first);
        let token = |i: usize| first + i;
        let mut running = 0.0f32;
        for (i, g) in cumulative[..len].iter_mut().enumerate() {
            running += inputs.gate(shape, token(i), head).0;
            *g = running;
        }
        let cumulative = &cumulative[..len];
        // S₀ᵀkₜ for every token, one state row (value dimension j) at a time.
        for (j, row) in state.chunks_exact(d).enumerate() {
            for i in 0..len {
                projected[i * d + j] = dot(row, inputs.key(shape, token(i), head));
            }
        }
        for i in 0..len {
            let (k, v) = (inputs.key(shape, token(i), head), inputs.value(shape, token(i), head));
            let beta = inputs.gate(shape, token(i), head).1;
            let decay = cumulative[i].exp();
            let (earlier, rest) = deltas.split_at_mut(i * d);
            let delta = &mut rest[..d];
            for ((x, &v), &p) in delta.iter_mut().zip(v).zip(&projected[i * d..(i + 1) * d]) {
                *x = beta * (v - decay * p);
            }
            for (s, earlier) in earlier.chunks_exact(d).enumerate() {
                let weight =
                    beta * (cumulative[i] - cumulative[s]).exp() * dot(k, inputs.key(shape, token(s), head));
                axpy(delta, -weight, earlier);
            }
        }
        // S₀ᵀqₜ, then the chunk's own contributions.
        for (j, row) in state.chunks_exact(d).enumerate() {
            for i in 0..len {
                projected[i * d + j] = dot(row, inputs.query(shape, token(i), head));
            }
        }
        for i in 0..len {
            let q = inputs.query(shape, token(i), head);
            let o = &mut out[token(i) * d..][..d];
            let decay = cumulative[i].exp();
            for (o, &p) in o.iter_mut().zip(&projected[i * d..(i + 1) * d]) {
                *o = decay * p;
            }
            for (s, delta) in deltas[..(i + 1) * d].chunks_exact(d).enumerate() {
                let weight =
                    (cumulative[i] - cumulative[s]).exp() * dot(q, inputs.key(shape, token(s), head));
                axpy(o, weight, delta);
            }
            o.iter_mut().for_each(|o| *o *= scale);
        }
        let last = cumulative[len - 1];
        let decay = last.exp();
        for (j, row) in state.chunks_exact_mut(d).enumerate() {
            row.iter_mut().for_each(|s| *s *= decay);
            for s in 0..len {
                let weight = (last - cumulative[s]).exp() * deltas[s * d + j];
                axpy(row, weight, inputs.key(shape, token(s), head));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> DeltaNet {
        DeltaNet { conv_kernel: 4, k_heads: 2, v_heads: 4, head_dim: 8 }
    }

    /// Inputs of `n` tokens with unit-length queries and keys and decays in (0.3, 1).
    fn inputs(shape: &DeltaNet, n: usize, seed: u32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mut rng = crate::sampler::Rng::new(u64::from(seed));
        let mut qkv: Vec<f32> = (0..n * shape.conv_dim()).map(|_| (rng.next_f64() as f32) - 0.5).collect();
        for row in qkv.chunks_exact_mut(shape.conv_dim()) {
            l2_normalize_heads(&mut row[..2 * shape.key_dim()], shape.head_dim, 1e-6);
        }
        let g = (0..n * shape.v_heads).map(|_| -1.2 * (rng.next_f64() as f32)).collect();
        let beta = (0..n * shape.v_heads).map(|_| rng.next_f64() as f32).collect();
        (qkv, g, beta)
    }

    #[test]
    fn chunks_compute_the_recurrence() {
        let shape = shape();
        let d = shape.head_dim;
        // Shorter than a chunk, exactly one, and several with a ragged end.
        for n in [2, CHUNK, 2 * CHUNK + 7] {
            let (qkv, g, beta) = inputs(&shape, n, n as u32);
            let inputs = DeltaInputs { qkv: &qkv, g: &g, beta: &beta };
            let start: Vec<f32> =
                (0..shape.ssm_state_len()).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.05).collect();
            let mut by_chunks = start.clone();
            let mut chunked_out = vec![0.0; n * shape.value_dim()];
            let mut scratch = Vec::new();
            delta_rule(&shape, &inputs, &mut by_chunks, &mut chunked_out, &mut scratch);
            // The same tokens one at a time.
            let mut by_tokens = start.clone();
            let mut token_out = vec![0.0; n * shape.value_dim()];
            for t in 0..n {
                let one = DeltaInputs {
                    qkv: &qkv[t * shape.conv_dim()..(t + 1) * shape.conv_dim()],
                    g: &g[t * shape.v_heads..(t + 1) * shape.v_heads],
                    beta: &beta[t * shape.v_heads..(t + 1) * shape.v_heads],
                };
                let out = &mut token_out[t * shape.value_dim()..(t + 1) * shape.value_dim()];
                delta_rule(&shape, &one, &mut by_tokens, out, &mut scratch);
            }
            let worst =
                |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
            assert!(
                worst(&chunked_out, &token_out) < 1e-5,
                "n={n}: outputs differ by {}",
                worst(&chunked_out, &token_out)
            );
            assert!(
                worst(&by_chunks, &by_tokens) < 1e-5,
                "n={n}: states differ by {}",
                worst(&by_chunks, &by_tokens)
            );
            assert!(by_tokens.iter().zip(&start).any(|(a, b)| (a - b).abs() > 1e-3), "the state moved");
            assert!(token_out[..d].iter().any(|&o| o.abs() > 1e-3));
        }
    }

    #[test]
    fn one_token_follows_the_definition() {
        // One head of size 2, state zero: δ = β·v, S = k·δᵀ, o = Sᵀq/√2 = (k·q)·β·v/√2.
        let shape = DeltaNet { conv_kernel: 2, k_heads: 1, v_heads: 1, head_dim: 2 };
        let qkv = [0.6, 0.8, 1.0, 0.0, 2.0, -4.0];
        let (g, beta) = ([-0.5], [0.5]);
        let mut state = vec![0.0; 4];
        let mut out = vec![0.0; 2];
        delta_rule(
            &shape,
            &DeltaInputs { qkv: &qkv, g: &g, beta: &beta },
            &mut state,
            &mut out,
            &mut Vec::new(),
        );
        let expected = [0.6 * 0.5 * 2.0 / 2f32.sqrt(), 0.6 * 0.5 * -4.0 / 2f32.sqrt()];
        assert!((out[0] - expected[0]).abs() < 1e-6 && (out[1] - expected[1]).abs() < 1e-6, "{out:?}");
        // Rows are value dimensions: row j = δⱼ·k.
        assert_eq!(state, [1.0, 0.0, -2.0, 0.0]);
    }

    #[test]
    fn convolution_slides_over_the_state_then_the_batch() {
        let shape = DeltaNet { conv_kernel: 3, k_heads: 1, v_heads: 1, head_dim: 1 };
        // Three channels; channel c's taps are [1, 10, 100] · (c + 1).
        let taps: Vec<f32> = (0..3).flat_map(|c| [1.0, 10.0, 100.0].map(|w| w * (c + 1) as f32)).collect();
        let mut state = vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // two earlier inputs
        let x = [0.01, 0.01, 0.01, 0.02, 0.02, 0.02];
        let mut out = vec![0.0; 6];
        causal_conv_silu(&shape, &mut state, &taps, &x, &mut out, &mut Vec::new());
        let sum0 = 0.0 + 10.0 + 100.0 * 0.01;
        let sum1 = 1.0 + 10.0 * 0.01 + 100.0 * 0.02;
        assert!((out[0] - silu(sum0)).abs() < 1e-5 && (out[2] - silu(3.0 * sum0)).abs() < 1e-4);
        assert!((out[3] - silu(sum1)).abs() < 1e-5);
        assert_eq!(state, x, "the state keeps the last two inputs");
    }
}
