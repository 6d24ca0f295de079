//! Mamba-2's selective scan (Granite 4.0-H's recurrent layers), as ggml's CPU `ssm_scan` runs it
//! for a scalar decay per head: for each token and head, the step `Δ = softplus(dt + bias)`
//! decays the head's state by `exp(Δ·A)` and adds `B ⊗ (Δ·x)`; `C` reads each state row out.
//! The convolution before it is `delta_net::causal_conv`'s, and the gate and norm after it are
//! the CPU backend's.

use super::config::Mamba2;
use crate::tensor::{fma, reduce_accumulators};

/// One token's inputs to the scan: the convolved `x` (`inner`), `B` and `C` (`groups × state`
/// each), and the time step per head (before its bias).
pub struct ScanInputs<'a> {
    pub x: &'a [f32],
    pub b: &'a [f32],
    pub c: &'a [f32],
    pub dt: &'a [f32],
}

/// The per-head parameters: time-step bias, decay rate `A` (negative) and skip weight `D`.
pub struct ScanWeights<'a> {
    pub dt_bias: &'a [f32],
    pub a: &'a [f32],
    pub d: &'a [f32],
}

/// One token's step: `state` (`inner × state`, head by head, row by row) moves on, and `y`
/// (`inner`) receives each row's read-out plus `D·x`.
pub fn scan_step(
    shape: &Mamba2,
    weights: &ScanWeights,
    inputs: &ScanInputs,
    state: &mut [f32],
    y: &mut [f32],
) {
    let (n, head_dim) = (shape.state, shape.head_dim());
    let heads_per_group = shape.heads / shape.groups;
    for h in 0..shape.heads {
        let step = softplus(inputs.dt[h] + weights.dt_bias[h]);
        let decay = (step * weights.a[h]).exp();
        let g = h / heads_per_group;
        let (b, c) = (&inputs.b[g * n..(g + 1) * n], &inputs.c[g * n..(g + 1) * n]);
        for i in 0..head_dim {
            let row = h * head_dim + i;
            let x = inputs.x[row];
            let read = scan_row(&mut state[row * n..(row + 1) * n], b, c, decay, x * step);
            // `y + x·D`, two rounded operations as ggml's graph has them.
            y[row] = read + x * weights.d[h];
        }
    }
}

/// `s = s·decay + b·x_dt` for each of the row's state values, returning `Σ s·c` summed as
/// ggml's AVX2 loop does: four accumulators of eight lanes over each 32 values, reduced as
/// `GGML_F32_VEC_REDUCE`, then the values past the last 32 one by one.
fn scan_row(s: &mut [f32], b: &[f32], c: &[f32], decay: f32, x_dt: f32) -> f32 {
    let whole = s.len() / 32 * 32;
    let mut sums = [[0.0f32; 8]; 4];
    for (i, ((s, &b), &c)) in s[..whole].iter_mut().zip(b).zip(c).enumerate() {
        *s = *s * decay + b * x_dt;
        let lane = &mut sums[i / 8 % 4][i % 8];
        *lane = fma(*s, c, *lane);
    }
    let mut sum = reduce_accumulators(sums);
    for ((s, &b), &c) in s[whole..].iter_mut().zip(&b[whole..]).zip(&c[whole..]) {
        *s = fma(*s, decay, b * x_dt);
        sum = fma(*s, c, sum);
    }
    sum
}

/// ggml's `softplus`: `ln(1 + e^x)`, or `x` past 20.
fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { (1.0 + x.exp()).ln() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_decays_the_state_adds_the_input_and_reads_it_out() {
        // Two heads of 2 values in one group, states of 40 values (a whole 32 and a remainder).
        let shape = Mamba2 { conv_kernel: 4, inner: 4, state: 40, heads: 2, groups: 1 };
        let weights = ScanWeights { dt_bias: &[0.5, -1.0], a: &[-0.8, -0.1], d: &[0.3, 2.0] };
        let b: Vec<f32> = (0..40).map(|i| (i as f32 * 0.37).sin()).collect();
        let c: Vec<f32> = (0..40).map(|i| (i as f32 * 0.11).cos()).collect();
        let inputs = ScanInputs { x: &[1.0, -2.0, 0.5, 3.0], b: &b, c: &c, dt: &[0.2, 25.0] };
        let mut state: Vec<f32> = (0..4 * 40).map(|i| (i % 7) as f32 * 0.1).collect();
        let before = state.clone();
        let mut y = vec![0.0; 4];
        scan_step(&shape, &weights, &inputs, &mut state, &mut y);
        for (row, &x) in inputs.x.iter().enumerate() {
            let h = row / 2;
            let dt = f64::from(inputs.dt[h] + weights.dt_bias[h]);
            let step = if dt > 20.0 { dt } else { dt.exp().ln_1p() };
            let decay = (step * f64::from(weights.a[h])).exp();
            let mut read = 0.0;
            for s in 0..40 {
                let expected =
                    f64::from(before[row * 40 + s]) * decay + f64::from(b[s]) * f64::from(x) * step;
                assert!((f64::from(state[row * 40 + s]) - expected).abs() < 1e-5 * expected.abs().max(1.0));
                read += expected * f64::from(c[s]);
            }
            let expected_y = read + f64::from(x) * f64::from(weights.d[h]);
            assert!((f64::from(y[row]) - expected_y).abs() < 1e-4 * expected_y.abs().max(1.0), "{row}");
        }
    }
}
