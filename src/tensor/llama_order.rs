//! llama.cpp's own summation orders where its x86 CPU backend leaves `vec_dot`: native builds
//! only, where the kernels are ggml's and reproducing its order makes logits agree with
//! llama.cpp to the last bit. (In wasm the SIMD128 kernels reorder the sums anyway and win on
//! speed, so none of this is built there.)
//!
//! Two departures, both decided per matrix when a model loads ([`WeightLayout`]):
//! - **Repacking.** llama.cpp's AVX2 backend repacks a matrix of Q4_0, Q4_K or IQ4_NL whose row
//!   count is a multiple of [`REPACK_ROWS`] into interleaved blocks (`ggml-cpu/repack.cpp`),
//!   and multiplies it only with its repacked GEMM (whole groups of [`REPACK_GEMM_ROWS`]
//!   activation rows) and GEMV (the rest), whatever the batch.
//! - **Tiling.** From [`BATCHED_FROM_ROWS`] activation rows, a plain matrix of Q2_K, Q5_K,
//!   Q6_K, IQ4_XS or a lattice i-quant is multiplied by its tiled kernel (`ggml-cpu/tiled`),
//!   and from two an F32 matrix by llamafile's GEMM.
//!
//! [`WeightLayout`]: super::WeightLayout

use super::activations::Q8_0Activation;
use super::blocks::{
    BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl, BlockIq4Xs,
    BlockMxfp4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, BlockQ8K, whole_blocks,
};
use super::format::Dot;
use super::{iq_lattice, iquants, kquants, legacy};
use half::{bf16, f16};

/// Weight rows interleaved by llama.cpp's repacked formats ([`LlamaOrder::REPACKED`]); a
/// matrix whose row count is not a multiple of this is left as it is.
pub const REPACK_ROWS: usize = 8;

/// Activation rows per call of llama.cpp's repacked GEMM; the `n % 4` rows left over go
/// through its GEMV.
pub const REPACK_GEMM_ROWS: usize = 4;

/// Activation rows from which llama.cpp's CPU matmul takes its tiled kernel.
pub const BATCHED_FROM_ROWS: usize = 8;

/// A format's dots in llama.cpp's orders; each defaults to [`Dot::vec_dot`].
pub trait LlamaOrder: Dot {
    /// Whether llama.cpp's AVX2 backend repacks matrices of this format.
    const REPACKED: bool = false;

    /// Activation rows from which a plain matrix of this format takes
    /// [`vec_dot_batched`](Self::vec_dot_batched).
    const BATCHED_FROM: usize = BATCHED_FROM_ROWS;

    /// The dot inside a matmul of [`BATCHED_FROM`](Self::BATCHED_FROM) or more activation rows.
    fn vec_dot_batched(src: &[u8], activations: &[Self::Activation]) -> f32 {
        Self::vec_dot(src, activations)
    }

    /// A plain matrix (`row_bytes` a row) times `n` activation rows, from
    /// [`BATCHED_FROM`](Self::BATCHED_FROM) rows: `out[i][r]` is
    /// [`vec_dot_batched`](Self::vec_dot_batched) of weight row `r` with activation row `i`. A
    /// format may compute the same sums as a tiled GEMM.
    fn matmul_batched<'a>(
        weights: &[u8],
        row_bytes: usize,
        activation_row: impl Fn(usize) -> &'a [Self::Activation],
        out: &mut [&mut [f32]],
    ) where
        Self::Activation: 'a,
    {
        dots_one_by_one(weights, row_bytes, activation_row, out, Self::vec_dot_batched)
    }

    /// A plain matrix times `n` activation rows, every dot [`vec_dot`](Dot::vec_dot)'s
    /// ([`WeightLayout::VecDot`](super::WeightLayout::VecDot)). A format may compute the same
    /// sums as a GEMM.
    fn matmul_vec_dot<'a>(
        weights: &[u8],
        row_bytes: usize,
        activation_row: impl Fn(usize) -> &'a [Self::Activation],
        out: &mut [&mut [f32]],
    ) where
        Self::Activation: 'a,
    {
        dots_one_by_one(weights, row_bytes, activation_row, out, Self::vec_dot)
    }

    /// The dot as the repacked GEMM computes it.
    fn vec_dot_gemm(src: &[u8], activations: &[Self::Activation]) -> f32 {
        Self::vec_dot(src, activations)
    }

    /// The dot as the repacked GEMV computes it.
    fn vec_dot_gemv(src: &[u8], activations: &[Self::Activation]) -> f32 {
        Self::vec_dot(src, activations)
    }
}

/// `out[i][r] = dot(weight row r, activation row i)`, one dot at a time: the matmuls' default.
fn dots_one_by_one<'a, A: 'a>(
    weights: &[u8],
    row_bytes: usize,
    activation_row: impl Fn(usize) -> &'a [A],
    out: &mut [&mut [f32]],
    dot: impl Fn(&[u8], &[A]) -> f32,
) {
    for (r, weight_row) in weights.chunks_exact(row_bytes).enumerate() {
        for (i, out_row) in out.iter_mut().enumerate() {
            out_row[r] = dot(weight_row, activation_row(i));
        }
    }
}

/// Formats llama.cpp multiplies with `vec_dot` in every case.
macro_rules! vec_dot_only {
    ($($format:ty),* $(,)?) => {$( impl LlamaOrder for $format {} )*};
}
vec_dot_only!(bf16, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ3K);

/// F16 matrices go through llamafile's GEMM from two activation rows, where the row length is a
/// multiple of 8 (a vision encoder's; llama.cpp's converter writes text models' matrices F16 only
/// when asked).
impl LlamaOrder for f16 {
    const BATCHED_FROM: usize = 2;
    fn vec_dot_batched(src: &[u8], activations: &[super::activations::F16Activation]) -> f32 {
        super::float::dot_f16_sgemm_order(src, activations)
    }

    fn matmul_batched<'a>(
        weights: &[u8],
        row_bytes: usize,
        activation_row: impl Fn(usize) -> &'a [super::activations::F16Activation],
        out: &mut [&mut [f32]],
    ) {
        super::float::matmul_f16_sgemm_order(weights, row_bytes, activation_row, out)
    }

    fn matmul_vec_dot<'a>(
        weights: &[u8],
        row_bytes: usize,
        activation_row: impl Fn(usize) -> &'a [super::activations::F16Activation],
        out: &mut [&mut [f32]],
    ) {
        super::float::matmul_f16_vec_dot_order(weights, row_bytes, activation_row, out)
    }
}

/// F32 matrices go through llamafile's GEMM from two activation rows (MoE routers, which
/// llama.cpp's converter leaves in F32).
impl LlamaOrder for f32 {
    const BATCHED_FROM: usize = 2;

    fn vec_dot_batched(src: &[u8], activations: &[f32]) -> f32 {
        super::float::dot_f32_sgemm_order(src, activations)
    }
}

/// Formats llama.cpp multiplies with its tiled kernel from [`BATCHED_FROM_ROWS`] rows.
macro_rules! tiled {
    ($($format:ty => $tiled:path;)*) => {$(
        impl LlamaOrder for $format {
            fn vec_dot_batched(src: &[u8], activations: &[BlockQ8K]) -> f32 {
                $tiled(whole_blocks(src), activations)
            }
        }
    )*};
}
tiled! {
    BlockQ2K => kquants::dot_q2_k_tiled;
    BlockQ5K => kquants::dot_q5_k_tiled;
    BlockQ6K => kquants::dot_q6_k_tiled;
    BlockIq4Xs => iquants::dot_iq4_xs_tiled;
    BlockIq2Xxs => iq_lattice::dot_tiled_order::<BlockIq2Xxs>;
    BlockIq3Xxs => iq_lattice::dot_tiled_order::<BlockIq3Xxs>;
    BlockIq3S => iq_lattice::dot_tiled_order::<BlockIq3S>;
    BlockIq2Xs => iq_lattice::dot_tiled_order::<BlockIq2Xs>;
    BlockIq2S => iq_lattice::dot_tiled_order::<BlockIq2S>;
    BlockIq1S => iq_lattice::dot_tiled_order::<BlockIq1S>;
    BlockIq1M => iq_lattice::dot_tiled_order::<BlockIq1M>;
}

/// Formats llama.cpp repacks: (activation, GEMM kernel, GEMV kernel).
macro_rules! repacked {
    ($($format:ty: $activation:ty => $gemm:path, $gemv:path;)*) => {$(
        impl LlamaOrder for $format {
            const REPACKED: bool = true;

            fn vec_dot_gemm(src: &[u8], activations: &[$activation]) -> f32 {
                $gemm(whole_blocks(src), activations)
            }

            fn vec_dot_gemv(src: &[u8], activations: &[$activation]) -> f32 {
                $gemv(whole_blocks(src), activations)
            }
        }
    )*};
}
repacked! {
    // `block_q4_0x8`, `q4_0_8x8_q8_0`: GEMM and GEMV agree on the order.
    BlockQ4_0: Q8_0Activation => legacy::dot_q4_0_repacked, legacy::dot_q4_0_repacked;
    // `block_q4_Kx8`.
    BlockQ4K: BlockQ8K => kquants::dot_q4_k_gemm, kquants::dot_q4_k_gemv;
    // `block_iq4_nlx8`, `iq4_nl_8x8_q8_0`: Q4_0's kernels with the levels as their table.
    BlockIq4Nl: Q8_0Activation => iquants::dot_table_repacked::<BlockIq4Nl>, iquants::dot_table_repacked::<BlockIq4Nl>;
    // `block_mxfp4x8`, `mxfp4_8x8_q8_0`: IQ4_NL's template with E8M0 scales.
    BlockMxfp4: Q8_0Activation => iquants::dot_table_repacked::<BlockMxfp4>, iquants::dot_table_repacked::<BlockMxfp4>;
}
