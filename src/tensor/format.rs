//! The weight types, the per-format trait, and the checked entry points that dispatch on a
//! runtime [`WeightType`].

use super::activations::{ActivationFormat, ActivationType, QuantizedActivations};
use super::blocks::{QK, QK_K};
use super::error::{TensorError, check_len};

/// The weight encodings the kernels handle, named as in ggml.
#[allow(non_camel_case_types)] // keep ggml's spelling (Q4_K, not Q4K) so names match the file format
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    IQ4_NL,
    IQ4_XS,
    IQ2_XXS,
    IQ3_XXS,
    IQ3_S,
    IQ2_XS,
    IQ2_S,
    IQ1_S,
    IQ1_M,
}

impl WeightType {
    pub const ALL: [WeightType; 22] = [
        Self::F32,
        Self::F16,
        Self::BF16,
        Self::Q4_0,
        Self::Q4_1,
        Self::Q5_0,
        Self::Q5_1,
        Self::Q8_0,
        Self::Q2_K,
        Self::Q3_K,
        Self::Q4_K,
        Self::Q5_K,
        Self::Q6_K,
        Self::IQ4_NL,
        Self::IQ4_XS,
        Self::IQ2_XXS,
        Self::IQ3_XXS,
        Self::IQ3_S,
        Self::IQ2_XS,
        Self::IQ2_S,
        Self::IQ1_S,
        Self::IQ1_M,
    ];

    /// The `ggml_type` number used in GGUF tensor infos.
    pub const fn ggml_type_id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q2_K => 10,
            Self::Q3_K => 11,
            Self::Q4_K => 12,
            Self::Q5_K => 13,
            Self::Q6_K => 14,
            Self::IQ4_NL => 20,
            Self::IQ4_XS => 23,
            Self::IQ2_XXS => 16,
            Self::IQ3_XXS => 18,
            Self::IQ3_S => 21,
            Self::IQ2_XS => 17,
            Self::IQ2_S => 22,
            Self::IQ1_S => 19,
            Self::IQ1_M => 29,
            Self::BF16 => 30,
        }
    }

    /// The weight type for a GGUF `ggml_type` number, if the kernels support it.
    pub const fn from_ggml_type_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            10 => Self::Q2_K,
            11 => Self::Q3_K,
            12 => Self::Q4_K,
            13 => Self::Q5_K,
            14 => Self::Q6_K,
            16 => Self::IQ2_XXS,
            17 => Self::IQ2_XS,
            18 => Self::IQ3_XXS,
            19 => Self::IQ1_S,
            20 => Self::IQ4_NL,
            21 => Self::IQ3_S,
            22 => Self::IQ2_S,
            23 => Self::IQ4_XS,
            29 => Self::IQ1_M,
            30 => Self::BF16,
            _ => return None,
        })
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::BF16 => "BF16",
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q8_0 => "Q8_0",
            Self::Q2_K => "Q2_K",
            Self::Q3_K => "Q3_K",
            Self::Q4_K => "Q4_K",
            Self::Q5_K => "Q5_K",
            Self::Q6_K => "Q6_K",
            Self::IQ4_NL => "IQ4_NL",
            Self::IQ4_XS => "IQ4_XS",
            Self::IQ2_XXS => "IQ2_XXS",
            Self::IQ3_XXS => "IQ3_XXS",
            Self::IQ3_S => "IQ3_S",
            Self::IQ2_XS => "IQ2_XS",
            Self::IQ2_S => "IQ2_S",
            Self::IQ1_S => "IQ1_S",
            Self::IQ1_M => "IQ1_M",
        }
    }

    /// Elements per block.
    pub const fn block_len(self) -> usize {
        match self {
            Self::F32 | Self::F16 | Self::BF16 => 1,
            Self::Q4_0 | Self::Q4_1 | Self::Q5_0 | Self::Q5_1 | Self::Q8_0 | Self::IQ4_NL => QK,
            Self::Q2_K
            | Self::Q3_K
            | Self::Q4_K
            | Self::Q5_K
            | Self::Q6_K
            | Self::IQ4_XS
            | Self::IQ2_XXS
            | Self::IQ3_XXS
            | Self::IQ3_S
            | Self::IQ2_XS
            | Self::IQ2_S
            | Self::IQ1_S
            | Self::IQ1_M => QK_K,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::BF16 => 2,
            Self::Q4_0 | Self::IQ4_NL => 18,
            Self::Q4_1 => 20,
            Self::Q5_0 => 22,
            Self::Q5_1 => 24,
            Self::Q8_0 => 34,
            Self::Q2_K => 84,
            Self::Q3_K => 110,
            Self::Q4_K => 144,
            Self::Q5_K => 176,
            Self::Q6_K => 210,
            Self::IQ4_XS => 136,
            Self::IQ2_XXS => 66,
            Self::IQ3_XXS => 98,
            Self::IQ3_S => 110,
            Self::IQ2_XS => 74,
            Self::IQ2_S => 82,
            Self::IQ1_S => 50,
            Self::IQ1_M => 56,
        }
    }

    /// The format ggml quantizes activations to before dotting them with this weight type
    /// (its `vec_dot_type`).
    pub const fn activation_type(self) -> ActivationType {
        match self {
            Self::F32 => ActivationType::F32,
            Self::F16 => ActivationType::F16,
            Self::BF16 => ActivationType::BF16,
            Self::Q4_0 | Self::Q5_0 | Self::Q8_0 | Self::IQ4_NL => ActivationType::Q8_0,
            Self::Q4_1 | Self::Q5_1 => ActivationType::Q8_1,
            // The rest are the super-block formats (K- and i-quants, QK_K elements), all dotted with Q8_K.
            _ => ActivationType::Q8_K,
        }
    }

    /// Bytes in one row of `row_len` elements; the row must be a whole number of blocks.
    pub fn row_bytes(self, row_len: usize) -> Result<usize, TensorError> {
        let block_len = self.block_len();
        if !row_len.is_multiple_of(block_len) {
            return Err(TensorError::RowNotBlockAligned { format: self.name(), row_len, block_len });
        }
        (row_len / block_len).checked_mul(self.block_bytes()).ok_or(TensorError::ShapeOverflow)
    }
}

/// One weight encoding: its block geometry, its activation format and its kernels.
///
/// The kernels are infallible and panic-free: they work on as many whole blocks as both inputs
/// hold. Lengths are checked by the public functions ([`dequantize_row`], [`vec_dot`],
/// [`matmul`](super::matmul)) before they get here.
pub trait QuantFormat {
    const TYPE: WeightType;
    /// Elements per block.
    const BLOCK_LEN: usize;
    /// Bytes per block in the file.
    const BLOCK_BYTES: usize;
    /// What activations are quantized to before the dot product (ggml's `vec_dot_type`).
    type Activation: ActivationFormat;

    /// Decodes the blocks of `src` into `dst` (`BLOCK_LEN` values per `BLOCK_BYTES` bytes).
    fn dequantize_row(src: &[u8], dst: &mut [f32]);

    /// Dot product of one weight row with one activation row of the same length.
    fn vec_dot(src: &[u8], activations: &[Self::Activation]) -> f32;

    /// The dot product as llama.cpp computes it inside a matmul of [`BATCHED_FROM_ROWS`] or
    /// more activation rows, where its CPU backend switches some formats to a tiled kernel
    /// with a different summation order. The same as [`vec_dot`](Self::vec_dot) elsewhere.
    fn vec_dot_batched(src: &[u8], activations: &[Self::Activation]) -> f32 {
        Self::vec_dot(src, activations)
    }

    /// Whether llama.cpp's x86 CPU backend repacks a matrix of this format into interleaved
    /// blocks of [`REPACK_ROWS`] weight rows when its row count is a multiple of that
    /// (`ggml-cpu/repack.cpp`) and it sits in the repack buffer (see
    /// [`WeightLayout`](super::WeightLayout)). Such a matrix is multiplied only by the repacked
    /// kernels, for any number of activation rows: [`vec_dot_gemm`](Self::vec_dot_gemm) for the
    /// activation rows in whole groups of [`REPACK_GEMM_ROWS`], [`vec_dot_gemv`](Self::vec_dot_gemv)
    /// for the rest.
    const REPACKED: bool = false;

    /// The dot product as llama.cpp's repacked GEMM computes it (see [`REPACKED`](Self::REPACKED)).
    fn vec_dot_gemm(src: &[u8], activations: &[Self::Activation]) -> f32 {
        Self::vec_dot(src, activations)
    }

    /// The dot product as llama.cpp's repacked GEMV computes it (see [`REPACKED`](Self::REPACKED)).
    fn vec_dot_gemv(src: &[u8], activations: &[Self::Activation]) -> f32 {
        Self::vec_dot(src, activations)
    }

    /// [`vec_dot`](Self::vec_dot) of two weight rows with one activation row (decode), so a
    /// kernel can load each activation block once for both. Must equal the single-row results
    /// bit for bit.
    fn vec_dot_pair(src: [&[u8]; 2], activations: &[Self::Activation]) -> [f32; 2] {
        src.map(|src| Self::vec_dot(src, activations))
    }

    /// [`vec_dot`](Self::vec_dot) of one weight row with [`ROW_GROUP`] activation rows, so a
    /// kernel can decode each weight block once for all of them (prefill). Must equal the
    /// single-row results bit for bit: batching never changes a logit.
    fn vec_dot_group(src: &[u8], rows: [&[Self::Activation]; ROW_GROUP]) -> [f32; ROW_GROUP] {
        rows.map(|activations| Self::vec_dot(src, activations))
    }
}

/// Activation rows a weight row is dotted with at once by [`QuantFormat::vec_dot_group`].
pub const ROW_GROUP: usize = 8;

/// Weight rows interleaved by llama.cpp's repacked formats ([`QuantFormat::REPACKED`]); a
/// matrix whose row count is not a multiple of this is left as it is.
pub const REPACK_ROWS: usize = 8;

/// Activation rows per call of llama.cpp's repacked GEMM; the `n % 4` rows left over go
/// through its GEMV.
pub const REPACK_GEMM_ROWS: usize = 4;

/// Activation rows from which llama.cpp's CPU matmul takes its tiled K-quant kernel.
pub const BATCHED_FROM_ROWS: usize = 8;

/// Runs `$body` with `$W` bound to the [`QuantFormat`] type of the runtime weight type.
macro_rules! with_weight_format {
    ($weight_type:expr, $W:ident => $body:expr) => {{
        use $crate::tensor::WeightType as Wt;
        match $weight_type {
            Wt::F32 => {
                type $W = f32;
                $body
            }
            Wt::F16 => {
                type $W = half::f16;
                $body
            }
            Wt::BF16 => {
                type $W = half::bf16;
                $body
            }
            Wt::Q4_0 => {
                type $W = $crate::tensor::BlockQ4_0;
                $body
            }
            Wt::Q4_1 => {
                type $W = $crate::tensor::BlockQ4_1;
                $body
            }
            Wt::Q5_0 => {
                type $W = $crate::tensor::BlockQ5_0;
                $body
            }
            Wt::Q5_1 => {
                type $W = $crate::tensor::BlockQ5_1;
                $body
            }
            Wt::Q8_0 => {
                type $W = $crate::tensor::BlockQ8_0;
                $body
            }
            Wt::Q2_K => {
                type $W = $crate::tensor::BlockQ2K;
                $body
            }
            Wt::Q3_K => {
                type $W = $crate::tensor::BlockQ3K;
                $body
            }
            Wt::Q4_K => {
                type $W = $crate::tensor::BlockQ4K;
                $body
            }
            Wt::Q5_K => {
                type $W = $crate::tensor::BlockQ5K;
                $body
            }
            Wt::Q6_K => {
                type $W = $crate::tensor::BlockQ6K;
                $body
            }
            Wt::IQ4_NL => {
                type $W = $crate::tensor::BlockIq4Nl;
                $body
            }
            Wt::IQ4_XS => {
                type $W = $crate::tensor::BlockIq4Xs;
                $body
            }
            Wt::IQ2_XXS => {
                type $W = $crate::tensor::BlockIq2Xxs;
                $body
            }
            Wt::IQ3_XXS => {
                type $W = $crate::tensor::BlockIq3Xxs;
                $body
            }
            Wt::IQ3_S => {
                type $W = $crate::tensor::BlockIq3S;
                $body
            }
            Wt::IQ2_XS => {
                type $W = $crate::tensor::BlockIq2Xs;
                $body
            }
            Wt::IQ2_S => {
                type $W = $crate::tensor::BlockIq2S;
                $body
            }
            Wt::IQ1_S => {
                type $W = $crate::tensor::BlockIq1S;
                $body
            }
            Wt::IQ1_M => {
                type $W = $crate::tensor::BlockIq1M;
                $body
            }
        }
    }};
}
pub(crate) use with_weight_format;

/// Decodes one row of `dst.len()` elements stored as `weight_type` in `src`.
pub fn dequantize_row(weight_type: WeightType, src: &[u8], dst: &mut [f32]) -> Result<(), TensorError> {
    check_len("weight row bytes", weight_type.row_bytes(dst.len())?, src.len())?;
    with_weight_format!(weight_type, W => <W as QuantFormat>::dequantize_row(src, dst));
    Ok(())
}

/// Dot product of one weight row with row `activation_row` of `activations`, which must have
/// been quantized for this weight type ([`QuantizedActivations::for_weights`]).
pub fn vec_dot(
    weight_type: WeightType,
    weight_row: &[u8],
    activations: &QuantizedActivations,
    activation_row: usize,
) -> Result<f32, TensorError> {
    activations.check_type(weight_type.activation_type())?;
    check_len("weight row bytes", weight_type.row_bytes(activations.row_len())?, weight_row.len())?;
    with_weight_format!(weight_type, W => {
        let row = activations.row::<<W as QuantFormat>::Activation>(activation_row)?;
        Ok(W::vec_dot(weight_row, row))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_matches_the_block_structs() {
        for weight_type in WeightType::ALL {
            with_weight_format!(weight_type, W => {
                assert_eq!(<W as QuantFormat>::TYPE, weight_type);
                assert_eq!(<W as QuantFormat>::BLOCK_LEN, weight_type.block_len());
                assert_eq!(<W as QuantFormat>::BLOCK_BYTES, weight_type.block_bytes());
                type A = <W as QuantFormat>::Activation;
                assert_eq!(<A as ActivationFormat>::TYPE, weight_type.activation_type());
                assert_eq!(<A as ActivationFormat>::BLOCK_LEN, weight_type.activation_type().block_len());
            });
            assert_eq!(WeightType::from_ggml_type_id(weight_type.ggml_type_id()), Some(weight_type));
        }
        assert_eq!(WeightType::from_ggml_type_id(9), None); // Q8_1 is never a weight type here
    }

    #[test]
    fn row_bytes_rejects_partial_blocks() {
        assert_eq!(WeightType::Q4_K.row_bytes(512), Ok(288));
        assert_eq!(WeightType::F16.row_bytes(3), Ok(6));
        assert_eq!(
            WeightType::Q4_K.row_bytes(100),
            Err(TensorError::RowNotBlockAligned { format: "Q4_K", row_len: 100, block_len: 256 })
        );
        assert_eq!(WeightType::Q8_0.row_bytes(usize::MAX - 31), Err(TensorError::ShapeOverflow));
    }

    #[test]
    fn dequantize_row_checks_lengths() {
        let mut out = [0f32; 32];
        assert!(matches!(
            dequantize_row(WeightType::Q4_0, &[0; 17], &mut out),
            Err(TensorError::LengthMismatch { expected: 18, actual: 17, .. })
        ));
        assert!(dequantize_row(WeightType::Q4_0, &[0; 18], &mut out).is_ok());
    }
}
