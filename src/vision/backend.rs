//! The operations a vision encoder is built from, and the CPU's. [`super::vit`] runs a square
//! through the encoder once, as one sequence of these operations, on either device: here every
//! operation runs at once on the CPU (rounding as llama.cpp's CPU backend rounds, so that the
//! embeddings agree with mtmd's bit for bit), and `gpu::vision` records the same sequence into
//! one command buffer per square.

use std::ops::Range;

use half::f16;

use super::vit::{FeedForward, Linear, NormKind, PatchRope, clamp_all};
use crate::model::attention::{
    AttentionPrecision, GroupScratch, HeadView, Scoring, attend_group_one_pass, attend_head_f32_tiled_keys,
    keys_in_tiles,
};
use crate::model::ops::{add_in_place, layer_norm_in_place, rms_norm_in_place, rms_norm_unweighted_in_place};
use crate::model::{ModelBytes, ModelError};
use crate::parallel;
use crate::tensor::{QuantizedActivations, WeightLayout, WeightType, matmul_quantized_with_layout};

/// A matrix held by the encoder itself rather than read from the file (the patch kernel in
/// F16, Gemma 3's transposed projection): `rows` rows of `cols`, one row per output.
#[derive(Clone, Copy)]
pub(crate) struct OwnMatrix<'a> {
    pub bytes: &'a [u8],
    pub weight_type: WeightType,
    pub layout: WeightLayout,
    pub rows: usize,
    pub cols: usize,
}

/// Where a [`VisionBackend::gather`]'s chunk comes from: a chunk of its input, or zeros.
pub(crate) const ZEROS: u32 = u32::MAX;

/// The operations of an encoder, over `Rows`: a square's rows of activations, row after row.
/// Operations that cannot fail on the CPU return nothing; the GPU keeps its first failure
/// for the end of the square.
pub(crate) trait VisionBackend {
    type Rows;

    /// Rows computed on the CPU (positions for the encoder to add).
    fn rows(&mut self, values: Vec<f32>) -> Result<Self::Rows, ModelError>;
    /// `n` rows of `x` times an encoder-held matrix.
    fn matmul(&mut self, matrix: OwnMatrix, x: &Self::Rows, n: usize) -> Result<Self::Rows, ModelError>;
    /// Several linears of the same `n` rows, each clamped and biased as it says.
    fn linears<const N: usize>(
        &mut self,
        linears: [&Linear; N],
        x: &Self::Rows,
        n: usize,
    ) -> Result<[Self::Rows; N], ModelError>;
    fn copy(&mut self, x: &Self::Rows) -> Self::Rows;
    /// `x += y`, element by element.
    fn add(&mut self, x: &mut Self::Rows, y: &Self::Rows);
    /// `x += bias` in every row of `bias.len()`.
    fn add_bias(&mut self, x: &mut Self::Rows, bias: &[f32]);
    fn scale(&mut self, x: &mut Self::Rows, factor: f32);
    /// `(x − bias) · scale` in every row of `bias.len()` (Gemma 4's standardization).
    fn standardize(&mut self, x: &mut Self::Rows, bias: &[f32], scale: &[f32]);
    /// Every row of `weight.len()` normalized (LayerNorm or RMS norm), times `weight`, plus `bias`.
    fn norm(&mut self, x: &mut Self::Rows, kind: NormKind, weight: &[f32], bias: Option<&[f32]>, eps: f32);
    /// Every row of `width` RMS-normalized, with no weight.
    fn rms_unweighted(&mut self, x: &mut Self::Rows, width: usize, eps: f32);
    /// `x = act(x)`.
    fn activate(&mut self, x: &mut Self::Rows, activation: FeedForward);
    /// `gate = act(gate) · up`, rows `width` wide.
    fn gated(&mut self, gate: &mut Self::Rows, up: &Self::Rows, activation: FeedForward, width: usize);
    /// Each head of each row turned by its patch's place.
    fn rope(&mut self, x: &mut Self::Rows, rope: &PatchRope);
    /// Every row's heads attend to every row's (or, with `spans`, to those of its own span),
    /// `heads` heads over rows `d` wide, scores scaled by `kq_scale`.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &mut self,
        q: &Self::Rows,
        k: &Self::Rows,
        v: &Self::Rows,
        shape: (usize, usize, usize),
        kq_scale: f32,
        spans: Option<&[Range<usize>]>,
    ) -> Self::Rows;
    /// Chunks of `chunk` values: the `i`th of the output is the `sources[i]`th of `x`, or zeros
    /// where it is [`ZEROS`] (reorders, pixel shuffles, a fused projection's parts).
    fn gather(&mut self, x: &Self::Rows, chunk: usize, sources: &[u32]) -> Self::Rows;
    /// `x` (a `width × height` grid of rows `d` wide) averaged over squares of `merge × merge`,
    /// as ggml's `pool_2d` does it (an f32 sum in reading order, then divided).
    fn average_pool(&mut self, x: &Self::Rows, grid: (usize, usize, usize), merge: usize) -> Self::Rows;
}

/// The CPU's operations, each run at once; `bytes` is the projector file's.
pub(crate) struct CpuVision<'a> {
    pub bytes: &'a ModelBytes,
}

impl VisionBackend for CpuVision<'_> {
    type Rows = Vec<f32>;

    fn rows(&mut self, values: Vec<f32>) -> Result<Vec<f32>, ModelError> {
        Ok(values)
    }

    fn matmul(&mut self, matrix: OwnMatrix, x: &Vec<f32>, n: usize) -> Result<Vec<f32>, ModelError> {
        let activations = QuantizedActivations::for_weights(matrix.weight_type, x, n, matrix.cols)?;
        let mut out = vec![0.0; n * matrix.rows];
        matmul_quantized_with_layout(
            matrix.bytes,
            matrix.weight_type,
            matrix.layout,
            matrix.rows,
            &activations,
            &mut out,
        )?;
        Ok(out)
    }

    /// The activations quantized once for all the linears that take them alike (the same
    /// weight type and input clamp): Q, K and V.
    fn linears<const N: usize>(
        &mut self,
        linears: [&Linear; N],
        x: &Vec<f32>,
        n: usize,
    ) -> Result<[Vec<f32>; N], ModelError> {
        let mut outs: [Vec<f32>; N] = std::array::from_fn(|i| vec![0.0; n * linears[i].matrix.rows]);
        type Input = (WeightType, Option<(f32, f32)>);
        let mut quantized: Option<(Input, QuantizedActivations)> = None;
        for (linear, out) in linears.iter().zip(outs.iter_mut()) {
            let (matrix, bias) = (&linear.matrix, linear.bias.as_deref());
            let input: Input = (matrix.weight_type, linear.clamp.map(|c| c.input));
            if quantized.as_ref().is_none_or(|(taken, _)| *taken != input) {
                let activations = match input.1 {
                    Some(bounds) => {
                        let mut clamped = x.to_vec();
                        clamp_all(&mut clamped, bounds);
                        QuantizedActivations::for_weights(matrix.weight_type, &clamped, n, matrix.cols)?
                    }
                    None => QuantizedActivations::for_weights(matrix.weight_type, x, n, matrix.cols)?,
                };
                quantized = Some((input, activations));
            }
            let Some((_, activations)) = &quantized else { unreachable!() };
            matmul_quantized_with_layout(
                matrix.bytes(self.bytes),
                matrix.weight_type,
                matrix.layout,
                matrix.rows,
                activations,
                out,
            )?;
            // clip.cpp clamps inside its matmul (`build_mm`) and adds a bias after it.
            if let Some(clamp) = linear.clamp {
                clamp_all(out, clamp.output);
            }
            if let Some(bias) = bias {
                out.chunks_exact_mut(matrix.rows).for_each(|row| add_in_place(row, bias));
            }
        }
        Ok(outs)
    }

    fn copy(&mut self, x: &Vec<f32>) -> Vec<f32> {
        x.clone()
    }

    fn add(&mut self, x: &mut Vec<f32>, y: &Vec<f32>) {
        add_in_place(x, y);
    }

    fn add_bias(&mut self, x: &mut Vec<f32>, bias: &[f32]) {
        x.chunks_exact_mut(bias.len()).for_each(|row| add_in_place(row, bias));
    }

    fn scale(&mut self, x: &mut Vec<f32>, factor: f32) {
        x.iter_mut().for_each(|v| *v *= factor);
    }

    fn standardize(&mut self, x: &mut Vec<f32>, bias: &[f32], scale: &[f32]) {
        for row in x.chunks_exact_mut(bias.len()) {
            for ((v, b), s) in row.iter_mut().zip(bias).zip(scale) {
                *v = (*v - b) * s;
            }
        }
    }

    fn norm(&mut self, x: &mut Vec<f32>, kind: NormKind, weight: &[f32], bias: Option<&[f32]>, eps: f32) {
        match kind {
            NormKind::Rms => {
                rms_norm_in_place(x, weight, eps);
                if let Some(bias) = bias {
                    self.add_bias(x, bias);
                }
            }
            NormKind::Layer => layer_norm_in_place(x, weight, bias, eps),
        }
    }

    fn rms_unweighted(&mut self, x: &mut Vec<f32>, width: usize, eps: f32) {
        rms_norm_unweighted_in_place(x, width, eps);
    }

    fn activate(&mut self, x: &mut Vec<f32>, activation: FeedForward) {
        x.iter_mut().for_each(|v| *v = activation.apply(*v));
    }

    fn gated(&mut self, gate: &mut Vec<f32>, up: &Vec<f32>, activation: FeedForward, width: usize) {
        activation.gated(gate, up, width);
    }

    fn rope(&mut self, x: &mut Vec<f32>, rope: &PatchRope) {
        rope.apply(x);
    }

    /// llama.cpp's flash attention on the CPU, keys and values rounded to f16 (`ggml_cast`):
    /// its one-pass kernel below [`ONE_PASS_BELOW`] queries, its tiled kernel from there (a
    /// masked tile it skips is one this never reaches, the spans being runs of patches).
    fn attention(
        &mut self,
        q: &Vec<f32>,
        k: &Vec<f32>,
        v: &Vec<f32>,
        (n, d, heads): (usize, usize, usize),
        kq_scale: f32,
        spans: Option<&[Range<usize>]>,
    ) -> Vec<f32> {
        if n < ONE_PASS_BELOW {
            attention_one_pass(q, k, v, (n, d, heads), kq_scale, spans)
        } else {
            attention_tiled(q, k, v, (n, d, heads), kq_scale, spans)
        }
    }

    fn gather(&mut self, x: &Vec<f32>, chunk: usize, sources: &[u32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(sources.len() * chunk);
        for &source in sources {
            match source {
                ZEROS => out.extend(std::iter::repeat_n(0.0, chunk)),
                _ => out.extend_from_slice(&x[source as usize * chunk..][..chunk]),
            }
        }
        out
    }

    fn average_pool(
        &mut self,
        x: &Vec<f32>,
        (width, height, d): (usize, usize, usize),
        merge: usize,
    ) -> Vec<f32> {
        let (out_width, out_height) = (width / merge, height / merge);
        let count = (merge * merge) as f32;
        let mut out = vec![0.0; out_width * out_height * d];
        for (cell, row) in out.chunks_exact_mut(d).enumerate() {
            let (oy, ox) = (cell / out_width, cell % out_width);
            for (c, value) in row.iter_mut().enumerate() {
                let mut sum = 0.0f32;
                for ky in 0..merge {
                    for kx in 0..merge {
                        sum += x[((oy * merge + ky) * width + ox * merge + kx) * d + c];
                    }
                }
                *value = sum / count;
            }
        }
        out
    }
}

/// Below this many queries (`GGML_FA_TILE_Q`) llama.cpp's CPU flash attention runs its one-pass
/// kernel, keeping the query and `Σ p·V` in f16, instead of the tiled one.
const ONE_PASS_BELOW: usize = 64;

/// llama.cpp's one-pass kernel over f16 keys and values, query by query and head by head.
fn attention_one_pass(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    (n, d, heads): (usize, usize, usize),
    kq_scale: f32,
    spans: Option<&[Range<usize>]>,
) -> Vec<f32> {
    let head_dim = d / heads;
    let round = |x: &[f32]| -> Vec<f16> { x.iter().map(|&x| f16::from_f32(x)).collect() };
    let (keys, values) = (round(k), round(v));
    let scoring = Scoring::new(kq_scale, None);
    let mut scratch = GroupScratch::default();
    let mut out = vec![0.0; n * d];
    for h in 0..heads {
        let kv = HeadView { keys: &keys[..], values: &values[..], stride: d, offset: h * head_dim, head_dim };
        for t in 0..n {
            let span = t * d + h * head_dim..t * d + (h + 1) * head_dim;
            attend_group_one_pass(
                &q[span.clone()],
                &kv,
                spans.map_or(0..n, |spans| spans[t].clone()),
                scoring,
                None,
                AttentionPrecision::Exact,
                &mut scratch,
                &mut out[span],
            );
        }
    }
    out
}

/// llama.cpp's tiled kernel: each head's keys in the kernel's layout and its values side by
/// side, once for all the queries; a part of the queries then takes head after head, so that
/// one head's keys and values stay in cache for all of them.
fn attention_tiled(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    (n, d, heads): (usize, usize, usize),
    kq_scale: f32,
    spans: Option<&[Range<usize>]>,
) -> Vec<f32> {
    let head_dim = d / heads;
    let round = |x: &[f32]| -> Vec<f32> { x.iter().map(|&x| f16::from_f32(x).to_f32()).collect() };
    let (keys, values) = (round(k), round(v));
    let scoring = Scoring::new(kq_scale, None);
    let tiled: Vec<Vec<f32>> =
        (0..heads).map(|h| keys_in_tiles(&keys, d, h * head_dim, head_dim, n)).collect();
    let head_values: Vec<Vec<f32>> = (0..heads)
        .map(|h| values.chunks_exact(d).flat_map(|row| &row[h * head_dim..][..head_dim]).copied().collect())
        .collect();
    let mut out = vec![0.0; n * d];
    parallel::for_each_part(&mut out, d, 8, |first, rows| {
        for h in 0..heads {
            let values = &head_values[h];
            let kv = HeadView { keys: values, values, stride: head_dim, offset: 0, head_dim };
            let span = h * head_dim..(h + 1) * head_dim;
            for (i, row) in rows.chunks_exact_mut(d).enumerate() {
                let query = &q[(first + i) * d..][span.clone()];
                attend_head_f32_tiled_keys(
                    query,
                    &tiled[h],
                    &kv,
                    spans.map_or(0..n, |spans| spans[first + i].clone()),
                    scoring,
                    None,
                    &mut row[span.clone()],
                );
            }
        }
    });
    out
}
