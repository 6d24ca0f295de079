//! The weight types, the per-format trait, and the checked entry points that dispatch on a
//! runtime [`WeightType`].

use super::activations::{ActivationFormat, ActivationType, QuantizedActivations};
use super::blocks::{PlainBytes, whole_blocks};
use super::error::{TensorError, check_len};
use super::kernels::{Active, Tile};
use crate::gguf::GgmlType;

/// The weight types the kernels handle: one row each, the ggml type and the Rust type whose
/// [`QuantFormat`] holds its kernels (a block struct, or a float format's scalar type).
/// Everything else is read from elsewhere, one source per fact: the id, name and block
/// geometry from ggml's table ([`GgmlType`]), the activation format from the kernel trait.
/// The macro makes [`WeightType`], its conversions, a compile-time check that each struct is
/// as large as ggml's block, and [`with_weight_format!`], which dispatches on a runtime type.
macro_rules! weight_types {
    ($d:tt $($name:ident => $format:ty,)*) => {
        /// The weight encodings the kernels handle, named as in ggml.
        #[allow(non_camel_case_types)] // keep ggml's spelling (Q4_K, not Q4K) so names match the file format
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum WeightType {
            $($name,)*
        }

        impl WeightType {
            pub const ALL: [WeightType; [$(stringify!($name)),*].len()] = [$(Self::$name,)*];

            /// ggml's type of the same name.
            pub const fn ggml_type(self) -> GgmlType {
                match self {
                    $(Self::$name => GgmlType::$name,)*
                }
            }

            /// The weight type of a ggml type, if the kernels support it.
            pub const fn from_ggml_type(ggml_type: GgmlType) -> Option<Self> {
                match ggml_type {
                    $(GgmlType::$name => Some(Self::$name),)*
                    _ => None,
                }
            }
        }

        $(const _: () = assert!(
            std::mem::size_of::<$format>() == WeightType::$name.block_bytes(),
            concat!("the block struct of ", stringify!($name), " is not ggml's size")
        );)*

        /// Runs `$body` with `$W` bound to the [`QuantFormat`] type of the runtime weight type.
        macro_rules! with_weight_format {
            ($d weight_type:expr, $d W:ident => $d body:expr) => {{
                match $d weight_type {
                    $($crate::tensor::WeightType::$name => {
                        type $d W = $format;
                        $d body
                    })*
                }
            }};
        }
    };
}

weight_types! {$
    F32 => f32,
    F16 => half::f16,
    BF16 => half::bf16,
    Q4_0 => crate::tensor::BlockQ4_0,
    Q4_1 => crate::tensor::BlockQ4_1,
    Q5_0 => crate::tensor::BlockQ5_0,
    Q5_1 => crate::tensor::BlockQ5_1,
    Q8_0 => crate::tensor::BlockQ8_0,
    Q2_K => crate::tensor::BlockQ2K,
    Q3_K => crate::tensor::BlockQ3K,
    Q4_K => crate::tensor::BlockQ4K,
    Q5_K => crate::tensor::BlockQ5K,
    Q6_K => crate::tensor::BlockQ6K,
    IQ4_NL => crate::tensor::BlockIq4Nl,
    IQ4_XS => crate::tensor::BlockIq4Xs,
    IQ2_XXS => crate::tensor::BlockIq2Xxs,
    IQ3_XXS => crate::tensor::BlockIq3Xxs,
    IQ3_S => crate::tensor::BlockIq3S,
    IQ2_XS => crate::tensor::BlockIq2Xs,
    IQ2_S => crate::tensor::BlockIq2S,
    IQ1_S => crate::tensor::BlockIq1S,
    IQ1_M => crate::tensor::BlockIq1M,
    MXFP4 => crate::tensor::BlockMxfp4,
}
pub(crate) use with_weight_format;

impl WeightType {
    /// The `ggml_type` number used in GGUF tensor infos.
    pub const fn ggml_type_id(self) -> u32 {
        self.ggml_type().id()
    }

    /// The weight type for a GGUF `ggml_type` number, if the kernels support it.
    pub const fn from_ggml_type_id(id: u32) -> Option<Self> {
        match GgmlType::from_id(id) {
            Ok(ggml_type) => Self::from_ggml_type(ggml_type),
            Err(_) => None,
        }
    }

    pub const fn name(self) -> &'static str {
        self.ggml_type().name()
    }

    /// Elements per block.
    pub const fn block_len(self) -> usize {
        self.ggml_type().block_size() as usize
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        self.ggml_type().block_bytes() as usize
    }

    /// The format ggml quantizes activations to before dotting them with this weight type
    /// (its `vec_dot_type`).
    pub const fn activation_type(self) -> ActivationType {
        with_weight_format!(self, W => <<W as QuantFormat>::Activation as ActivationFormat>::TYPE)
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

/// One weight encoding: its block type, its activation format and its decoding. Its geometry
/// is ggml's ([`WeightType`]); its dot products are the active instruction set's tile
/// entries, reached through [`Dot`].
pub trait QuantFormat: Sized {
    const TYPE: WeightType;
    /// Elements per block.
    const BLOCK_LEN: usize = Self::TYPE.block_len();
    /// Bytes per block in the file.
    const BLOCK_BYTES: usize = Self::TYPE.block_bytes();
    /// What the kernels view the bytes as: the block struct (`Self`), or bytes for the float
    /// formats, whose values are read unaligned.
    type Block: PlainBytes;
    /// What activations are quantized to before the dot product (ggml's `vec_dot_type`).
    type Activation: ActivationFormat;

    /// Decodes the blocks of `src` into `dst` (`BLOCK_LEN` values per `BLOCK_BYTES` bytes).
    /// Infallible and panic-free: it decodes as many whole blocks as both hold (lengths are
    /// checked by [`dequantize_row`]).
    fn dequantize_row(src: &[u8], dst: &mut [f32]);
}

/// A weight format's dot products on the instruction set this build targets ([`Active`]'s
/// tile entry). Infallible and panic-free: they work on as many whole blocks as both inputs
/// hold; lengths are checked by [`vec_dot`] and [`matmul`](super::matmul) before they get here.
pub trait Dot: QuantFormat {
    /// Dot product of one weight row with one activation row of the same length.
    fn vec_dot(src: &[u8], activations: &[Self::Activation]) -> f32;

    /// [`vec_dot`](Self::vec_dot) of two weight rows with one activation row (decode), so a
    /// kernel can load each activation block once for both. Equals the single-row results bit
    /// for bit.
    fn vec_dot_pair(src: [&[u8]; 2], activations: &[Self::Activation]) -> [f32; 2];

    /// [`vec_dot`](Self::vec_dot) of one weight row with [`ROW_GROUP`] activation rows, so a
    /// kernel can decode each weight block once for all of them (prefill). Equals the
    /// single-row results bit for bit: batching never changes a logit.
    fn vec_dot_group(src: &[u8], rows: [&[Self::Activation]; ROW_GROUP]) -> [f32; ROW_GROUP];

    /// A matrix (`row_bytes` a row) times `out.len()` activation rows: `out[i][r]` is
    /// [`vec_dot`](Self::vec_dot) of weight row `r` with activation row `i`, bit for bit, by
    /// [`vec_dot_group`](Self::vec_dot_group) or by a kernel's GEMM (prefill, an encoder).
    fn matmul_rows<'a>(
        weights: &[u8],
        row_bytes: usize,
        activation_row: impl Fn(usize) -> &'a [Self::Activation],
        out: &mut [&mut [f32]],
    ) where
        Self::Activation: 'a;
}

impl<W: QuantFormat> Dot for W
where
    Active: Tile<W>,
{
    #[inline(always)]
    fn vec_dot(src: &[u8], activations: &[W::Activation]) -> f32 {
        <Active as Tile<W>>::dot(whole_blocks(src), activations)
    }

    #[inline(always)]
    fn vec_dot_pair(src: [&[u8]; 2], activations: &[W::Activation]) -> [f32; 2] {
        <Active as Tile<W>>::pair(src.map(whole_blocks), activations)
    }

    #[inline(always)]
    fn vec_dot_group(src: &[u8], rows: [&[W::Activation]; ROW_GROUP]) -> [f32; ROW_GROUP] {
        <Active as Tile<W>>::group(whole_blocks(src), rows)
    }

    fn matmul_rows<'a>(
        weights: &[u8],
        row_bytes: usize,
        activation_row: impl Fn(usize) -> &'a [W::Activation],
        out: &mut [&mut [f32]],
    ) where
        W::Activation: 'a,
    {
        <Active as Tile<W>>::matmul(weights, row_bytes, activation_row, out)
    }
}

/// Activation rows a weight row is dotted with at once by [`Dot::vec_dot_group`].
pub const ROW_GROUP: usize = 8;

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
