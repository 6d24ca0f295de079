//! Mamba-2's selective scan (Granite 4.0-H's recurrent layers), as ggml's CPU `ssm_scan` runs it
//! for a scalar decay per head: for each token and head, the step `Δ = softplus(dt + bias)`
//! decays the head's state by `exp(Δ·A)` and adds `B ⊗ (Δ·x)`; `C` reads each state row out.
//! The convolution before it is `delta_net::causal_conv`'s, the gate and norm after it are the
//! CPU backend's, and a state row's step is a kernel of `tensor` ([`scan_row`]).

use super::config::Mamba2;
use crate::parallel;
use crate::tensor::scan_row;

/// State values below which a part of the heads is not worth a thread.
const MIN_STATE_PER_PART: usize = 32 * 1024;

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
/// (`inner`) receives each row's read-out plus `D·x`. Heads are independent: threads take
/// parts of them, and the bits do not depend on how many.
pub fn scan_step(
    shape: &Mamba2,
    weights: &ScanWeights,
    inputs: &ScanInputs,
    state: &mut [f32],
    y: &mut [f32],
) {
    let (n, head_dim) = (shape.state, shape.head_dim());
    let heads_per_group = shape.heads / shape.groups;
    let parts = parallel::part_count(shape.heads, MIN_STATE_PER_PART.div_ceil(head_dim * n));
    let bounds = parallel::split_bounds(shape.heads, parts, 1);
    let states = parallel::split_mut(state, &bounds, head_dim * n);
    let outputs = parallel::split_mut(y, &bounds, head_dim);
    let parts: Vec<_> = states.into_iter().zip(outputs).collect();
    parallel::for_each(parts, |((first, state), (_, y))| {
        for (j, (state, y)) in
            state.chunks_exact_mut(head_dim * n).zip(y.chunks_exact_mut(head_dim)).enumerate()
        {
            let h = first + j;
            let step = softplus(inputs.dt[h] + weights.dt_bias[h]);
            let decay = (step * weights.a[h]).exp();
            let g = h / heads_per_group;
            let (b, c) = (&inputs.b[g * n..(g + 1) * n], &inputs.c[g * n..(g + 1) * n]);
            for ((state, y), &x) in state.chunks_exact_mut(n).zip(y).zip(&inputs.x[h * head_dim..]) {
                // `y + x·D`, two rounded operations as ggml's graph has them.
                *y = scan_row(state, b, c, decay, x * step) + x * weights.d[h];
            }
        }
    });
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
