//! Batched matrix-vector products: `out[i][r] = dot(weight row r, activation row i)`.
//!
//! Activations are quantized once per call; each weight row is then dotted with every activation
//! row while its blocks are hot in cache, which is what makes prefill (many rows) cheap. The outer
//! loop runs over weight rows, so a caller can split the work across threads by handing each one
//! a contiguous range of weight rows (and its own output buffer).

use super::activations::{ActivationFormat, QuantizedActivations};
use super::error::{TensorError, check_len};
use super::format::{Dot, QuantFormat, WeightType, with_weight_format};
#[cfg(not(target_family = "wasm"))]
use super::llama_order::{LlamaOrder, REPACK_GEMM_ROWS, REPACK_ROWS};
use crate::parallel;

/// Parts of a matmul start at multiples of this many weight rows: llama.cpp's repacked block
/// height natively (a repacked block must not be cut), and decode's weight pairs like it too.
const PART_ROWS: usize = 8;
#[cfg(not(target_family = "wasm"))]
const _: () = assert!(PART_ROWS.is_multiple_of(REPACK_ROWS));

/// What a matmul needs of a format: its dots, and natively llama.cpp's orders too.
#[cfg(not(target_family = "wasm"))]
trait MatmulFormat: LlamaOrder {}
#[cfg(not(target_family = "wasm"))]
impl<W: LlamaOrder> MatmulFormat for W {}
#[cfg(target_family = "wasm")]
trait MatmulFormat: Dot {}
#[cfg(target_family = "wasm")]
impl<W: Dot> MatmulFormat for W {}

/// How llama.cpp's CPU backend holds a weight matrix, which decides the order its matmuls sum
/// in (`llama_order.rs`; native builds only: in wasm every matrix is [`Plain`](Self::Plain) and
/// the kernels are our own). A property of the matrix, decided when the model is loaded:
/// llama.cpp repacks only the
/// tensors it places in its repack buffer, which are those first used by a matmul, and leaves
/// the others (`token_embd`, first used by GET_ROWS, and so also an output projection tied to
/// it) in the plain CPU buffer, where matmuls take the plain kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightLayout {
    /// As stored in the file, multiplied by the plain kernels ([`Dot::vec_dot`], or natively
    /// llama.cpp's tiled order from 8 activation rows).
    Plain,
    /// Repacked into interleaved blocks of 8 rows and multiplied only by llama.cpp's repacked
    /// GEMM/GEMV (native builds). A matrix that cannot be repacked (its format has no repacked
    /// kernels or its row count is not a multiple of 8) is multiplied as [`Plain`](Self::Plain)
    /// whatever its layout says.
    Repacked,
    /// Repacked, and multiplied one activation row at a time through its GEMV: llama.cpp's
    /// repacked `MUL_MAT_ID` (an expert's rows), which never takes the GEMM.
    RepackedRowByRow,
    /// As stored, multiplied natively in `vec_dot`'s order whatever the batch: llama.cpp's order
    /// where llamafile's GEMM declines a product (it takes none whose other side's row count is
    /// not a multiple of 4, such as a patch convolution over an odd number of patches).
    VecDot,
}

impl WeightLayout {
    /// The layout llama.cpp's x86 AVX2 CPU backend gives a matrix of `rows` rows of
    /// `weight_type` that it first meets in a matmul (every projection except a tied output).
    /// In wasm, always [`Plain`](Self::Plain).
    pub fn for_matmul(weight_type: WeightType, rows: usize) -> Self {
        #[cfg(not(target_family = "wasm"))]
        if with_weight_format!(weight_type, W => <W as LlamaOrder>::REPACKED)
            && rows.is_multiple_of(REPACK_ROWS)
        {
            return Self::Repacked;
        }
        let _ = (weight_type, rows);
        Self::Plain
    }

    /// The layout llama.cpp gives one expert's `rows` rows of `weight_type` in a stack of
    /// experts (which it repacks as it would a matrix).
    pub fn for_expert(weight_type: WeightType, rows: usize) -> Self {
        match Self::for_matmul(weight_type, rows) {
            Self::Repacked => Self::RepackedRowByRow,
            plain => plain,
        }
    }

    /// The layout of `rows` consecutive rows cut from a matrix of this layout (a fused
    /// tensor's part): llama.cpp repacks the fused tensor whole, so a part stays repacked
    /// where its rows are whole repacked blocks.
    pub fn of_part(self, rows: usize) -> Self {
        #[cfg(not(target_family = "wasm"))]
        if self != Self::Plain && !rows.is_multiple_of(REPACK_ROWS) {
            return Self::Plain;
        }
        let _ = rows;
        self
    }
}

/// `out (n × rows_out) = acts (n × k) · weightsᵀ`, where `weights` holds `rows_out` rows of `k`
/// elements encoded as `weight_type`, and both `acts` and `out` are row-major. The weights are
/// summed as llama.cpp sums a matrix it meets first in a matmul
/// ([`WeightLayout::for_matmul`]).
pub fn matmul(
    weights: &[u8],
    weight_type: WeightType,
    rows_out: usize,
    k: usize,
    acts: &[f32],
    n: usize,
    out: &mut [f32],
) -> Result<(), TensorError> {
    let quantized = QuantizedActivations::for_weights(weight_type, acts, n, k)?;
    matmul_quantized(weights, weight_type, rows_out, &quantized, out)
}

/// [`matmul`] with activations that are already quantized, so that several weight matrices of
/// the same type (Q, K and V; gate and up) share one quantization of their input.
/// `out` is `activations.rows() × rows_out`, row-major.
pub fn matmul_quantized(
    weights: &[u8],
    weight_type: WeightType,
    rows_out: usize,
    activations: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), TensorError> {
    let layout = WeightLayout::for_matmul(weight_type, rows_out);
    matmul_quantized_with_layout(weights, weight_type, layout, rows_out, activations, out)
}

/// [`matmul_quantized`] for a matrix whose [`WeightLayout`] the caller decided (a model keeps it
/// with each matrix; a tied output projection is [`WeightLayout::Plain`]).
pub fn matmul_quantized_with_layout(
    weights: &[u8],
    weight_type: WeightType,
    layout: WeightLayout,
    rows_out: usize,
    activations: &QuantizedActivations,
    out: &mut [f32],
) -> Result<(), TensorError> {
    matmul_many(vec![MatmulOperand { weights, weight_type, layout, rows_out, out }], activations)
}

/// One matrix of a [`matmul_many`]: `out (n × rows_out) = activations · weightsᵀ`.
pub struct MatmulOperand<'a> {
    pub weights: &'a [u8],
    pub weight_type: WeightType,
    pub layout: WeightLayout,
    pub rows_out: usize,
    pub out: &'a mut [f32],
}

/// Several matrices multiplied by the same quantized activations (Q, K and V; gate and up) as
/// one parallel job, so threads meet once for all of them instead of once per matrix.
pub fn matmul_many(
    operands: Vec<MatmulOperand<'_>>,
    activations: &QuantizedActivations,
) -> Result<(), TensorError> {
    matmul_groups(vec![(operands, activations)])
}

/// Groups of matrices, each group multiplied by its own activations (the experts of a mixture,
/// each by the rows routed to it), as one parallel job.
pub fn matmul_groups<'a>(
    groups: Vec<(Vec<MatmulOperand<'a>>, &'a QuantizedActivations)>,
) -> Result<(), TensorError> {
    let mut parts: Vec<Box<dyn FnOnce() + Send + 'a>> = Vec::new();
    for (operands, activations) in groups {
        for operand in operands {
            plan_parts(operand, activations, &mut parts)?;
        }
    }
    parallel::for_each(parts, |part| part());
    Ok(())
}

/// Checks one matrix's shapes and adds its parts: contiguous ranges of weight rows, cut at
/// multiples of the repacked block height, each big enough that handing it to a thread costs
/// little next to its work.
fn plan_parts<'a>(
    operand: MatmulOperand<'a>,
    activations: &'a QuantizedActivations,
    parts: &mut Vec<Box<dyn FnOnce() + Send + 'a>>,
) -> Result<(), TensorError> {
    let MatmulOperand { weights, weight_type, layout, rows_out, out } = operand;
    activations.check_type(weight_type.activation_type())?;
    let (n, k) = (activations.rows(), activations.row_len());
    let row_bytes = weight_type.row_bytes(k)?;
    let weight_bytes = rows_out.checked_mul(row_bytes).ok_or(TensorError::ShapeOverflow)?;
    check_len("weights (rows_out * row bytes)", weight_bytes, weights.len())?;
    let out_len = n.checked_mul(rows_out).ok_or(TensorError::ShapeOverflow)?;
    check_len("output (n * rows_out)", out_len, out.len())?;
    if out.is_empty() {
        return Ok(());
    }
    if k == 0 {
        out.fill(0.0);
        return Ok(());
    }
    let min_rows = (MIN_PART_BYTES / row_bytes.saturating_mul(n).max(1)).max(PART_ROWS);
    let bounds = parallel::split_bounds(rows_out, parallel::part_count(rows_out, min_rows), PART_ROWS);
    with_weight_format!(weight_type, W => {
        let rows = activations.all_rows::<<W as QuantFormat>::Activation>()?;
        #[cfg(not(target_family = "wasm"))]
        let repacked = match layout {
            WeightLayout::VecDot => Repacked::VecDot,
            _ if !W::REPACKED || rows_out % REPACK_ROWS != 0 => Repacked::No,
            WeightLayout::Plain => Repacked::No,
            WeightLayout::Repacked => Repacked::Gemm,
            WeightLayout::RepackedRowByRow => Repacked::GemvOnly,
        };
        #[cfg(target_family = "wasm")]
        let repacked = { let _ = layout; Repacked::No };
        for (first_row, mut out_columns) in split_columns(out, rows_out, &bounds) {
            parts.push(Box::new(move || {
                let part_rows = out_columns[0].len();
                let part_weights = &weights[first_row * row_bytes..][..part_rows * row_bytes];
                dot_all_rows::<W>(part_weights, row_bytes, rows, k, repacked, &mut out_columns);
            }));
        }
    });
    Ok(())
}

/// Weight bytes times activation rows below which a matmul part is not worth a thread.
const MIN_PART_BYTES: usize = 24 * 1024;

/// For each range `bounds[p]..bounds[p + 1]` of weight rows: its first row and, for every
/// activation row, the slice of `out` (row-major, `rows_out` wide) that range writes.
#[allow(clippy::type_complexity)]
fn split_columns<'a>(
    out: &'a mut [f32],
    rows_out: usize,
    bounds: &[usize],
) -> Vec<(usize, Vec<&'a mut [f32]>)> {
    let n = out.len() / rows_out;
    let mut parts: Vec<(usize, Vec<&mut [f32]>)> =
        bounds.windows(2).map(|pair| (pair[0], Vec::with_capacity(n))).collect();
    for out_row in out.chunks_exact_mut(rows_out) {
        for ((_, columns), (_, mine)) in parts.iter_mut().zip(parallel::split_mut(out_row, bounds, 1)) {
            columns.push(mine);
        }
    }
    parts
}

/// Whether a matrix is held as llama.cpp repacks it (native only), and which of its repacked
/// kernels llama.cpp multiplies it with.
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(target_family = "wasm", allow(dead_code))] // In wasm every matrix is `No`.
enum Repacked {
    No,
    /// The GEMM for whole groups of 4 activation rows, the GEMV for the rest.
    Gemm,
    /// The GEMV for every activation row.
    GemvOnly,
    /// Not repacked, and in `vec_dot`'s order for every activation row ([`WeightLayout::VecDot`]).
    #[cfg(not(target_family = "wasm"))]
    VecDot,
}

/// The kernel loop over the weight rows of one part: `out[i][r]` is the dot of weight row `r`
/// with activation row `i`. All lengths are checked and non-zero.
fn dot_all_rows<W: MatmulFormat>(
    weights: &[u8],
    row_bytes: usize,
    activations: &[W::Activation],
    k: usize,
    repacked: Repacked,
    out: &mut [&mut [f32]],
) {
    let blocks_per_activation_row = k / <W::Activation as ActivationFormat>::BLOCK_LEN;
    let n = activations.len() / blocks_per_activation_row;
    let activation_row =
        |i: usize| &activations[i * blocks_per_activation_row..][..blocks_per_activation_row];
    #[cfg(not(target_family = "wasm"))]
    if repacked == Repacked::VecDot {
        W::matmul_vec_dot(weights, row_bytes, activation_row, out);
        return;
    }
    #[cfg(not(target_family = "wasm"))]
    if repacked != Repacked::No || n >= W::BATCHED_FROM {
        llama_order_rows::<W>(weights, row_bytes, n, repacked, activation_row, out);
        return;
    }
    let _ = repacked;
    if n == 1 {
        dot_one_activation_row::<W>(weights, row_bytes, activation_row(0), out[0]);
        return;
    }
    W::matmul_rows(weights, row_bytes, activation_row, out);
}

/// The rows of a part in llama.cpp's orders: a repacked matrix through its GEMM for whole
/// groups of 4 activation rows and its GEMV for the rest; a plain one, from 8 activation rows,
/// through its tiled order.
#[cfg(not(target_family = "wasm"))]
fn llama_order_rows<'a, W: LlamaOrder>(
    weights: &[u8],
    row_bytes: usize,
    n: usize,
    repacked: Repacked,
    activation_row: impl Fn(usize) -> &'a [W::Activation],
    out: &mut [&mut [f32]],
) {
    if repacked == Repacked::No {
        W::matmul_batched(weights, row_bytes, activation_row, out);
        return;
    }
    let gemm_rows = if repacked == Repacked::Gemm { n - n % REPACK_GEMM_ROWS } else { 0 };
    for (r, weight_row) in weights.chunks_exact(row_bytes).enumerate() {
        for (i, out_row) in out.iter_mut().enumerate() {
            let y = activation_row(i);
            out_row[r] =
                if i < gemm_rows { W::vec_dot_gemm(weight_row, y) } else { W::vec_dot_gemv(weight_row, y) };
        }
    }
}

/// Decode: every weight row dotted with the one activation row, two weight rows per kernel call
/// so that each activation block is loaded once for both ([`Dot::vec_dot_pair`]). The
/// pairs are row `r` of the first half with row `r` of the second: two long sequential streams,
/// which the hardware prefetchers follow; neighbouring rows would make a short stream of one
/// row each, and are much slower (docs/benchmarks.md, "Kernel choices").
fn dot_one_activation_row<W: Dot>(
    weights: &[u8],
    row_bytes: usize,
    activations: &[W::Activation],
    out: &mut [f32],
) {
    let half = out.len() / 2;
    let (first_weights, second_weights) = weights.split_at(half * row_bytes);
    let (first_out, second_out) = out.split_at_mut(half);
    for (((first, second), first_dot), second_dot) in first_weights
        .chunks_exact(row_bytes)
        .zip(second_weights.chunks_exact(row_bytes))
        .zip(first_out)
        .zip(second_out.iter_mut())
    {
        [*first_dot, *second_dot] = W::vec_dot_pair([first, second], activations);
    }
    // An odd row count leaves the second half's last row unpaired.
    if let Some(last_dot) = second_out.get_mut(half) {
        *last_dot = W::vec_dot(&second_weights[half * row_bytes..], activations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_support::Rng;
    use crate::tensor::{ActivationType, vec_dot};

    /// Random rows of `weight_type` (sane scales for the block formats).
    fn random_weights(weight_type: WeightType, rows: usize, k: usize, rng: &mut Rng) -> Vec<u8> {
        let row_bytes = weight_type.row_bytes(k).unwrap();
        let floats = |rng: &mut Rng, n: usize| -> Vec<f32> { (0..n).map(|_| rng.normal()).collect() };
        match weight_type {
            WeightType::F32 => floats(rng, rows * k).iter().flat_map(|v| v.to_le_bytes()).collect(),
            WeightType::F16 => {
                floats(rng, rows * k).iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect()
            }
            WeightType::BF16 => {
                floats(rng, rows * k).iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect()
            }
            WeightType::MXFP4 => {
                // Random codes, and E8M0 scales 2^(e - 127) of a sane size.
                let blocks = rows * row_bytes / weight_type.block_bytes();
                let mut bytes = rng.blocks(blocks, weight_type.block_bytes(), &[]);
                for block in bytes.chunks_exact_mut(weight_type.block_bytes()) {
                    block[0] = 120 + (rng.next_u64() % 6) as u8;
                }
                bytes
            }
            _ => {
                let offsets: &[usize] = match weight_type {
                    WeightType::Q4_1 | WeightType::Q5_1 => &[0, 2],
                    WeightType::Q2_K => &[80, 82],
                    WeightType::Q3_K => &[108],
                    WeightType::Q4_K | WeightType::Q5_K => &[0, 2],
                    WeightType::Q6_K => &[208],
                    _ => &[0],
                };
                let blocks = rows * row_bytes / weight_type.block_bytes();
                rng.blocks(blocks, weight_type.block_bytes(), offsets)
            }
        }
    }

    /// What a matmul of a plain matrix gives for weight row `w` and activation row `i`: the
    /// single-row dot, or natively from the format's batch size llama.cpp's batched order.
    fn plain_matmul_dot(
        weight_type: WeightType,
        w: &[u8],
        quantized: &QuantizedActivations,
        i: usize,
    ) -> f32 {
        #[cfg(not(target_family = "wasm"))]
        if let Some(dot) = with_weight_format!(weight_type, W => {
            (quantized.rows() >= W::BATCHED_FROM)
                .then(|| W::vec_dot_batched(w, quantized.row::<<W as QuantFormat>::Activation>(i).unwrap()))
        }) {
            return dot;
        }
        vec_dot(weight_type, w, quantized, i).unwrap()
    }

    #[test]
    fn matmul_equals_row_by_row_vec_dot_for_every_type() {
        let mut rng = Rng::new(3);
        let (rows_out, k, n) = (5, 512, 6); // one row group of 4 and two single rows
        for weight_type in WeightType::ALL {
            let weights = random_weights(weight_type, rows_out, k, &mut rng);
            let acts: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
            let mut out = vec![f32::NAN; n * rows_out];
            matmul(&weights, weight_type, rows_out, k, &acts, n, &mut out).unwrap();

            let quantized = QuantizedActivations::for_weights(weight_type, &acts, n, k).unwrap();
            let row_bytes = weight_type.row_bytes(k).unwrap();
            for i in 0..n {
                for r in 0..rows_out {
                    let weight_row = &weights[r * row_bytes..(r + 1) * row_bytes];
                    let expected = plain_matmul_dot(weight_type, weight_row, &quantized, i);
                    assert_eq!(
                        out[i * rows_out + r].to_bits(),
                        expected.to_bits(),
                        "{weight_type:?} [{i}][{r}]"
                    );
                }
            }
            assert!(out.iter().all(|v| v.is_finite() && *v != 0.0), "{weight_type:?}: {out:?}");
        }
    }

    /// A matrix large enough to be split across threads gives every output the single-row
    /// dot gives, whatever the part boundaries.
    #[test]
    fn split_matmul_equals_unsplit_dots() {
        let mut rng = Rng::new(13);
        let (rows_out, k) = (1004, 1024); // not a multiple of the parts, nor of the repacked height
        for weight_type in [WeightType::Q8_0, WeightType::Q4_K, WeightType::F16] {
            let weights = random_weights(weight_type, rows_out, k, &mut rng);
            for n in [1, 3, 9] {
                let acts: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
                let mut out = vec![f32::NAN; n * rows_out];
                matmul(&weights, weight_type, rows_out, k, &acts, n, &mut out).unwrap();
                let quantized = QuantizedActivations::for_weights(weight_type, &acts, n, k).unwrap();
                let row_bytes = weight_type.row_bytes(k).unwrap();
                let min_rows = (MIN_PART_BYTES / (row_bytes * n)).max(PART_ROWS);
                assert!(
                    rows_out / min_rows > 1 || crate::parallel::threads() == 1,
                    "the test matrix must split"
                );
                for i in 0..n {
                    for r in [0, 7, 8, 123, 500, 1003] {
                        let w = &weights[r * row_bytes..][..row_bytes];
                        let expected = plain_matmul_dot(weight_type, w, &quantized, i);
                        assert_eq!(
                            out[i * rows_out + r].to_bits(),
                            expected.to_bits(),
                            "{weight_type:?} n={n} [{i}][{r}]"
                        );
                    }
                }
            }
        }
    }

    /// From 8 activation rows on, K-quants sum in llama.cpp's tiled order: the same value up to
    /// float rounding, never a different computation.
    #[test]
    fn batched_order_agrees_with_single_rows() {
        let mut rng = Rng::new(5);
        let (rows_out, k, n) = (4, 512, 8);
        for weight_type in WeightType::ALL {
            let weights = random_weights(weight_type, rows_out, k, &mut rng);
            let acts: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
            let mut batched = vec![0.0; n * rows_out];
            matmul(&weights, weight_type, rows_out, k, &acts, n, &mut batched).unwrap();
            let row_bytes = weight_type.row_bytes(k).unwrap();
            let quantized = QuantizedActivations::for_weights(weight_type, &acts, n, k).unwrap();
            for i in 0..n {
                for r in 0..rows_out {
                    let single =
                        vec_dot(weight_type, &weights[r * row_bytes..][..row_bytes], &quantized, i).unwrap();
                    let got = batched[i * rows_out + r];
                    let scale = single.abs().max(1e-3);
                    assert!(
                        (got - single).abs() / scale < 1e-4,
                        "{weight_type:?} [{i}][{r}]: {got} vs {single}"
                    );
                }
            }
        }
    }

    /// A Q4_0 or Q4_K matrix of a multiple of 8 rows goes through llama.cpp's repacked kernels:
    /// GEMM for the activation rows in whole groups of 4, GEMV for the rest; other row counts
    /// keep the plain dot.
    #[cfg(not(target_family = "wasm"))]
    #[test]
    fn repacked_matrices_take_gemm_for_groups_of_four_and_gemv_for_the_rest() {
        let mut rng = Rng::new(9);
        let k = 512;
        for weight_type in [WeightType::Q4_0, WeightType::Q4_K] {
            for (rows_out, n) in [(8, 1), (8, 3), (16, 6), (8, 9), (12, 6)] {
                let weights = random_weights(weight_type, rows_out, k, &mut rng);
                let acts: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
                let quantized = QuantizedActivations::for_weights(weight_type, &acts, n, k).unwrap();
                let mut out = vec![f32::NAN; n * rows_out];
                matmul(&weights, weight_type, rows_out, k, &acts, n, &mut out).unwrap();
                let mut with_layout = vec![f32::NAN; n * rows_out];
                let layout = WeightLayout::for_matmul(weight_type, rows_out);
                assert_eq!(layout == WeightLayout::Repacked, rows_out % 8 == 0);
                matmul_quantized_with_layout(
                    &weights,
                    weight_type,
                    layout,
                    rows_out,
                    &quantized,
                    &mut with_layout,
                )
                .unwrap();
                assert_eq!(out, with_layout);
                let row_bytes = weight_type.row_bytes(k).unwrap();
                for i in 0..n {
                    for r in 0..rows_out {
                        let w = &weights[r * row_bytes..][..row_bytes];
                        let expected = with_weight_format!(weight_type, W => {
                            let y = quantized.row::<<W as QuantFormat>::Activation>(i).unwrap();
                            if rows_out % 8 != 0 {
                                W::vec_dot(w, y)
                            } else if i < n - n % 4 {
                                W::vec_dot_gemm(w, y)
                            } else {
                                W::vec_dot_gemv(w, y)
                            }
                        });
                        assert_eq!(
                            out[i * rows_out + r].to_bits(),
                            expected.to_bits(),
                            "{weight_type:?} {rows_out}×{n} [{i}][{r}]"
                        );
                    }
                }
            }
        }
    }

    /// A matrix held plain (a tied `token_embd` used as the output projection) takes the plain
    /// kernels even where its type and row count would be repacked: its results are the plain
    /// `vec_dot`s (below 8 activation rows), which differ from the repacked ones.
    #[test]
    fn plain_layout_uses_the_plain_kernels() {
        let mut rng = Rng::new(11);
        let (rows_out, k) = (16, 512);
        for weight_type in [WeightType::Q4_0, WeightType::Q4_K] {
            let weights = random_weights(weight_type, rows_out, k, &mut rng);
            let mut differs = 0;
            for n in [1, 4, 6] {
                let acts: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
                let quantized = QuantizedActivations::for_weights(weight_type, &acts, n, k).unwrap();
                let mut plain = vec![f32::NAN; n * rows_out];
                let layout = WeightLayout::Plain;
                matmul_quantized_with_layout(&weights, weight_type, layout, rows_out, &quantized, &mut plain)
                    .unwrap();
                let mut repacked = vec![f32::NAN; n * rows_out];
                matmul_quantized(&weights, weight_type, rows_out, &quantized, &mut repacked).unwrap();
                let row_bytes = weight_type.row_bytes(k).unwrap();
                for i in 0..n {
                    for r in 0..rows_out {
                        let w = &weights[r * row_bytes..][..row_bytes];
                        let expected = vec_dot(weight_type, w, &quantized, i).unwrap();
                        let got = plain[i * rows_out + r];
                        assert_eq!(got.to_bits(), expected.to_bits(), "{weight_type:?} n={n} [{i}][{r}]");
                        differs += usize::from(got.to_bits() != repacked[i * rows_out + r].to_bits());
                    }
                }
            }
            // Natively the two layouts sum in different orders (wasm keeps its own kernels).
            if !cfg!(all(target_family = "wasm", target_feature = "simd128")) {
                assert!(differs > 0, "{weight_type:?}");
            }
        }
    }

    #[test]
    fn shared_quantized_activations_give_the_same_result() {
        let mut rng = Rng::new(5);
        let (rows_out, k, n) = (4, 256, 2);
        let weights = random_weights(WeightType::Q4_K, rows_out, k, &mut rng);
        let acts: Vec<f32> = (0..n * k).map(|_| rng.normal()).collect();
        let mut direct = vec![0.0; n * rows_out];
        matmul(&weights, WeightType::Q4_K, rows_out, k, &acts, n, &mut direct).unwrap();
        let quantized = QuantizedActivations::for_weights(WeightType::Q6_K, &acts, n, k).unwrap();
        let mut shared = vec![0.0; n * rows_out];
        matmul_quantized(&weights, WeightType::Q4_K, rows_out, &quantized, &mut shared).unwrap();
        assert_eq!(direct, shared);
    }

    #[test]
    fn shape_errors_are_reported_not_panicked() {
        let weights = vec![0u8; 2 * 144];
        let acts = vec![0.0f32; 256];
        let mut out = vec![0.0f32; 2];
        let q4k = WeightType::Q4_K;
        assert!(matches!(
            matmul(&weights[1..], q4k, 2, 256, &acts, 1, &mut out),
            Err(TensorError::LengthMismatch { expected: 288, actual: 287, .. })
        ));
        assert!(matches!(
            matmul(&weights, q4k, 2, 256, &acts, 1, &mut out[..1]),
            Err(TensorError::LengthMismatch { expected: 2, actual: 1, .. })
        ));
        assert!(matches!(
            matmul(&weights, q4k, 2, 256, &acts[..255], 1, &mut out),
            Err(TensorError::LengthMismatch { expected: 256, actual: 255, .. })
        ));
        assert!(matches!(
            matmul(&weights, q4k, 2, 128, &acts[..128], 1, &mut out),
            Err(TensorError::RowNotBlockAligned { .. })
        ));
        assert!(matches!(
            matmul(&weights, q4k, usize::MAX, 256, &acts, 1, &mut out),
            Err(TensorError::ShapeOverflow)
        ));
        let q8_0 = QuantizedActivations::quantize(ActivationType::Q8_0, &acts, 1, 256).unwrap();
        assert!(matches!(
            matmul_quantized(&weights, q4k, 2, &q8_0, &mut out),
            Err(TensorError::ActivationTypeMismatch { .. })
        ));
    }

    #[test]
    fn empty_shapes_are_fine() {
        let mut out = vec![1.0f32; 3];
        matmul(&[], WeightType::F32, 3, 0, &[], 1, &mut out).unwrap();
        assert_eq!(out, [0.0; 3]);
        matmul(&[], WeightType::Q8_0, 0, 32, &[0.0; 32], 1, &mut []).unwrap();
        matmul(&[0; 34], WeightType::Q8_0, 1, 32, &[], 0, &mut []).unwrap();
    }
}
