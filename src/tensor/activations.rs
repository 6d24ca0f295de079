//! Activation quantization, as ggml's CPU backend does it before a dot product.
//!
//! Integer dots need the activation vector in an 8-bit block format of the same block length as
//! the weights: Q8_0 (Q4_0, Q5_0, Q8_0, IQ4_NL weights), Q8_1 (Q4_1, Q5_1) or Q8_K (K-quants and
//! the 256-element i-quants). Half weights see activations rounded to their own half type; F32
//! weights see them unchanged.

use half::{bf16, f16};

use super::blocks::{BlockQ8_0, BlockQ8_1, BlockQ8K, F16Le, QK, QK_K};
use super::error::{TensorError, check_len};
use super::format::WeightType;
use super::kernels::active::{Q8_0Extra, Q8KWide, q8_0_extra, q8_k_wide};
use crate::gguf::GgmlType;
use crate::parallel;

/// The formats activations are quantized to, named as in ggml.
#[allow(non_camel_case_types)] // ggml's spelling
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActivationType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q8_1,
    Q8_K,
}

impl ActivationType {
    /// ggml's type of the same name, whose table holds the geometry.
    pub const fn ggml_type(self) -> GgmlType {
        match self {
            Self::F32 => GgmlType::F32,
            Self::F16 => GgmlType::F16,
            Self::BF16 => GgmlType::BF16,
            Self::Q8_0 => GgmlType::Q8_0,
            Self::Q8_1 => GgmlType::Q8_1,
            Self::Q8_K => GgmlType::Q8_K,
        }
    }

    pub const fn name(self) -> &'static str {
        self.ggml_type().name()
    }

    pub const fn block_len(self) -> usize {
        self.ggml_type().block_size() as usize
    }
}

// The activation blocks built in memory are ggml's size (Q8_0's is the weight block's).
const _: () = assert!(std::mem::size_of::<BlockQ8_1>() == GgmlType::Q8_1.block_bytes() as usize);
// (Q8_K's plus what its kernels carry: nothing except in the plain SIMD128 build.)
const _: () = assert!(
    std::mem::size_of::<BlockQ8K>() == GgmlType::Q8_K.block_bytes() as usize + std::mem::size_of::<Q8KWide>()
);

/// An activation rounded to f16 and kept widened to f32: the value ggml's f16 dot sees, without
/// converting it again for every weight row. Held times [`F16_ACTIVATION_SCALE`].
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct F16Activation(f32);

/// What F16 activations are held multiplied by: 2^112 in the SIMD128 builds, whose F16 kernels
/// then take a half's bits placed in an f32 lane (`w · 2^-112`) without the multiply that
/// rebiases its exponent, 2 of 11 operations per 8 weights. Exact both ways: a power of two,
/// and no f16 value times 2^112 overflows f32; each product `(w · 2^-112)(a · 2^112)` is `w · a`.
pub const F16_ACTIVATION_SCALE: f32 = if cfg!(all(target_family = "wasm", target_feature = "simd128")) {
    f32::from_bits(0x7780_0000)
} else {
    1.0
};

impl F16Activation {
    /// The activation of an f16 value (given widened).
    pub fn new(value: f32) -> Self {
        Self(value * F16_ACTIVATION_SCALE)
    }

    /// Its value.
    pub fn value(self) -> f32 {
        self.0 * (1.0 / F16_ACTIVATION_SCALE)
    }

    /// A row's values times [`F16_ACTIVATION_SCALE`], as held, for kernels that load them as
    /// f32 vectors.
    pub fn scaled_values(row: &[Self]) -> &[f32] {
        as_f32s(row)
    }
}

/// An activation rounded to bf16 and kept widened to f32.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BF16Activation(pub f32);

impl BF16Activation {
    /// A row's widened values, for kernels that load them as f32 vectors.
    pub fn values(row: &[Self]) -> &[f32] {
        as_f32s(row)
    }
}

/// The f32s of a row of F16 or BF16 activations, each `repr(transparent)` over one f32.
fn as_f32s<T: WidenedActivation>(row: &[T]) -> &[f32] {
    // SAFETY: `WidenedActivation` types are `repr(transparent)` over f32: one layout.
    unsafe { std::slice::from_raw_parts(row.as_ptr().cast(), row.len()) }
}

/// Activation types that are one f32 each (`repr(transparent)`), for [`as_f32s`].
trait WidenedActivation {}
impl WidenedActivation for F16Activation {}
impl WidenedActivation for BF16Activation {}

/// A Q8_0 activation block: ggml's `block_q8_0` (32 values `d * q`, `q` in -127..=127) plus
/// whatever the build's kernels want derived from it, made here once per matmul rather than by
/// the kernels once per weight row (`Q8_0Extra` in `kernels.rs`: nothing, `()`, except in the
/// SIMD128 builds, whose kernels take the scale widened to f32 lanes, and under relaxed SIMD
/// per-block sums with which the Q4_0 and Q5_0 dots take their weights' offset out). The extra
/// always follows the scale and quants: blocks come from quantizing or [`new`](Self::new).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Q8_0Activation {
    pub d: F16Le,
    pub qs: [i8; QK],
    pub(super) extra: Q8_0Extra,
}

impl Q8_0Activation {
    pub fn new(d: F16Le, qs: [i8; QK]) -> Self {
        Self { d, qs, extra: q8_0_extra(d, &qs) }
    }
}

/// Storage for quantized activation rows, one variant per [`ActivationType`].
#[derive(Debug, Clone, PartialEq)]
pub enum ActivationData {
    F32(Vec<f32>),
    F16(Vec<F16Activation>),
    BF16(Vec<BF16Activation>),
    Q8_0(Vec<Q8_0Activation>),
    Q8_1(Vec<BlockQ8_1>),
    Q8K(Vec<BlockQ8K>),
}

/// One activation encoding: how to make it from f32 and where it lives in [`ActivationData`].
pub trait ActivationFormat: Copy + Default + Send + Sync + 'static {
    const TYPE: ActivationType;
    /// Elements per block.
    const BLOCK_LEN: usize;

    /// Quantizes whole blocks of `src` into `dst` (`BLOCK_LEN` values per block).
    fn quantize_row(src: &[f32], dst: &mut [Self]);

    /// Decodes whole blocks of `src` into `dst`; for tests and reference sums.
    fn decode_row(src: &[Self], dst: &mut [f32]);

    /// The blocks in `data`, if it holds this format.
    fn slice(data: &ActivationData) -> Option<&[Self]>;

    /// The block vector in `data`, if it holds this format (to reuse its allocation).
    fn vec_mut(data: &mut ActivationData) -> Option<&mut Vec<Self>>;

    /// Stores blocks of this format.
    fn wrap(blocks: Vec<Self>) -> ActivationData;
}

/// Elements below which quantizing a part of a batch is not worth another thread.
const MIN_QUANTIZE_PART_ELEMENTS: usize = 4 * 1024;

/// `rows` activation vectors of `row_len` elements each, quantized for one weight type.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedActivations {
    rows: usize,
    row_len: usize,
    data: ActivationData,
}

macro_rules! with_activation_format {
    ($activation_type:expr, $A:ident => $body:expr) => {
        match $activation_type {
            ActivationType::F32 => {
                type $A = f32;
                $body
            }
            ActivationType::F16 => {
                type $A = F16Activation;
                $body
            }
            ActivationType::BF16 => {
                type $A = BF16Activation;
                $body
            }
            ActivationType::Q8_0 => {
                type $A = Q8_0Activation;
                $body
            }
            ActivationType::Q8_1 => {
                type $A = BlockQ8_1;
                $body
            }
            ActivationType::Q8_K => {
                type $A = BlockQ8K;
                $body
            }
        }
    };
}

impl QuantizedActivations {
    /// Quantizes `rows` row-major rows of `row_len` values from `activations` to `activation_type`.
    pub fn quantize(
        activation_type: ActivationType,
        activations: &[f32],
        rows: usize,
        row_len: usize,
    ) -> Result<Self, TensorError> {
        let mut quantized = Self { rows: 0, row_len: 0, data: ActivationData::F32(Vec::new()) };
        quantized.requantize(activation_type, activations, rows, row_len)?;
        Ok(quantized)
    }

    /// Quantizes activations for dot products with `weight_type` weights.
    pub fn for_weights(
        weight_type: WeightType,
        activations: &[f32],
        rows: usize,
        row_len: usize,
    ) -> Result<Self, TensorError> {
        Self::quantize(weight_type.activation_type(), activations, rows, row_len)
    }

    /// Like [`quantize`](Self::quantize), reusing this value's allocation when the type matches
    /// (decode calls this once per token and layer).
    pub fn requantize(
        &mut self,
        activation_type: ActivationType,
        activations: &[f32],
        rows: usize,
        row_len: usize,
    ) -> Result<(), TensorError> {
        with_activation_format!(activation_type, A => self.requantize_as::<A>(activations, rows, row_len))
    }

    fn requantize_as<A: ActivationFormat>(
        &mut self,
        activations: &[f32],
        rows: usize,
        row_len: usize,
    ) -> Result<(), TensorError> {
        if !row_len.is_multiple_of(A::BLOCK_LEN) {
            return Err(TensorError::RowNotBlockAligned {
                format: A::TYPE.name(),
                row_len,
                block_len: A::BLOCK_LEN,
            });
        }
        let elements = rows.checked_mul(row_len).ok_or(TensorError::ShapeOverflow)?;
        check_len("activations (rows * row_len)", elements, activations.len())?;
        let blocks_per_row = row_len / A::BLOCK_LEN;
        // Reuse the old allocation when it holds the same format.
        let mut blocks = A::vec_mut(&mut self.data).map(std::mem::take).unwrap_or_default();
        blocks.clear();
        blocks.resize(rows * blocks_per_row, A::default());
        if row_len > 0 {
            // Rows in parallel parts over a prefill batch (2-3 % of a step on one thread).
            let min_rows = MIN_QUANTIZE_PART_ELEMENTS.div_ceil(row_len);
            parallel::for_each_part(&mut blocks, blocks_per_row, min_rows, |first_row, dst| {
                let src = &activations[first_row * row_len..];
                for (src, dst) in src.chunks_exact(row_len).zip(dst.chunks_exact_mut(blocks_per_row)) {
                    A::quantize_row(src, dst);
                }
            });
        }
        self.data = A::wrap(blocks);
        self.rows = rows;
        self.row_len = row_len;
        Ok(())
    }

    pub fn activation_type(&self) -> ActivationType {
        match self.data {
            ActivationData::F32(_) => ActivationType::F32,
            ActivationData::F16(_) => ActivationType::F16,
            ActivationData::BF16(_) => ActivationType::BF16,
            ActivationData::Q8_0(_) => ActivationType::Q8_0,
            ActivationData::Q8_1(_) => ActivationType::Q8_1,
            ActivationData::Q8K(_) => ActivationType::Q8_K,
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    pub fn data(&self) -> &ActivationData {
        &self.data
    }

    pub(crate) fn check_type(&self, expected: ActivationType) -> Result<(), TensorError> {
        let actual = self.activation_type();
        if actual == expected {
            Ok(())
        } else {
            Err(TensorError::ActivationTypeMismatch { expected, actual })
        }
    }

    /// All rows as one slice of `A` blocks (row `i` is `[i * row_len / A::BLOCK_LEN ..]`).
    pub fn all_rows<A: ActivationFormat>(&self) -> Result<&[A], TensorError> {
        A::slice(&self.data)
            .ok_or(TensorError::ActivationTypeMismatch { expected: A::TYPE, actual: self.activation_type() })
    }

    /// The blocks of row `row`.
    pub fn row<A: ActivationFormat>(&self, row: usize) -> Result<&[A], TensorError> {
        let all = self.all_rows::<A>()?;
        if row >= self.rows {
            return Err(TensorError::RowOutOfRange { row, rows: self.rows });
        }
        let per_row = self.row_len / A::BLOCK_LEN;
        Ok(&all[row * per_row..(row + 1) * per_row])
    }

    /// Decodes row `row` back to f32: exactly the values the dot products multiply with.
    pub fn dequantize_row(&self, row: usize, dst: &mut [f32]) -> Result<(), TensorError> {
        check_len("dequantized activation row", self.row_len, dst.len())?;
        with_activation_format!(self.activation_type(), A => {
            A::decode_row(self.row::<A>(row)?, dst);
        });
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Float activations

/// The three `ActivationFormat` methods that move between a format and its `ActivationData`
/// variant; they differ only in the variant's name.
macro_rules! activation_data_variant {
    ($variant:ident) => {
        fn slice(data: &ActivationData) -> Option<&[Self]> {
            if let ActivationData::$variant(v) = data { Some(v) } else { None }
        }

        fn vec_mut(data: &mut ActivationData) -> Option<&mut Vec<Self>> {
            if let ActivationData::$variant(v) = data { Some(v) } else { None }
        }

        fn wrap(blocks: Vec<Self>) -> ActivationData {
            ActivationData::$variant(blocks)
        }
    };
}

impl ActivationFormat for f32 {
    const TYPE: ActivationType = ActivationType::F32;
    const BLOCK_LEN: usize = 1;

    fn quantize_row(src: &[f32], dst: &mut [Self]) {
        let n = src.len().min(dst.len());
        dst[..n].copy_from_slice(&src[..n]);
    }

    fn decode_row(src: &[Self], dst: &mut [f32]) {
        let n = src.len().min(dst.len());
        dst[..n].copy_from_slice(&src[..n]);
    }

    activation_data_variant!(F32);
}

impl ActivationFormat for F16Activation {
    const TYPE: ActivationType = ActivationType::F16;
    const BLOCK_LEN: usize = 1;

    fn quantize_row(src: &[f32], dst: &mut [Self]) {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = Self::new(f16::from_f32(x).to_f32());
        }
    }

    fn decode_row(src: &[Self], dst: &mut [f32]) {
        for (d, x) in dst.iter_mut().zip(src) {
            *d = x.value();
        }
    }

    activation_data_variant!(F16);
}

impl ActivationFormat for BF16Activation {
    const TYPE: ActivationType = ActivationType::BF16;
    const BLOCK_LEN: usize = 1;

    fn quantize_row(src: &[f32], dst: &mut [Self]) {
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = Self(bf16::from_f32(x).to_f32());
        }
    }

    fn decode_row(src: &[Self], dst: &mut [f32]) {
        for (d, x) in dst.iter_mut().zip(src) {
            *d = x.0;
        }
    }

    activation_data_variant!(BF16);
}

// ---------------------------------------------------------------------------------------------
// 8-bit block activations

/// ggml's `nearest_int`: round half to even (it adds 1.5 * 2^23 and reads the mantissa).
#[inline(always)]
fn nearest_int(x: f32) -> i32 {
    x.round_ties_even() as i32
}

/// Scale and reciprocal of a Q8_0/Q8_1 block as ggml's x86 (AVX2) and wasm SIMD quantizers
/// compute them: `d = amax / 127`, `1/d = 127 / amax`; the quants then round half to even.
/// (The portable `quantize_row_q8_0_ref` uses `1 / d` and `roundf`; the SIMD builds users run,
/// and the goldens come from, differ from it in the last bit of a few quants per block.)
#[inline(always)]
fn q8_scale(block: &[f32]) -> (f32, f32) {
    let amax = block.iter().fold(0.0f32, |amax, &x| if x.abs() > amax { x.abs() } else { amax });
    let d = amax / 127.0;
    let inverse = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    (d, inverse)
}

/// One block of 32 values quantized to Q8_0 as ggml's CPU quantizes activations, and rows
/// stored into a Q8_0 KV cache (`quantize_row_q8_0`: [`q8_scale`]).
#[inline(always)]
fn q8_0_block(x: &[f32]) -> BlockQ8_0 {
    let (d, inverse) = q8_scale(x);
    let mut qs = [0i8; QK];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = nearest_int(v * inverse) as i8;
    }
    BlockQ8_0 { d: F16Le::from_f32(d), qs }
}

/// Whole blocks of `src` quantized into `dst` as plain Q8_0 blocks (a Q8_0 KV cache's rows).
pub fn quantize_q8_0(src: &[f32], dst: &mut [BlockQ8_0]) {
    for (block, x) in dst.iter_mut().zip(src.chunks_exact(QK)) {
        *block = q8_0_block(x);
    }
}

impl ActivationFormat for Q8_0Activation {
    const TYPE: ActivationType = ActivationType::Q8_0;
    const BLOCK_LEN: usize = QK;

    fn quantize_row(src: &[f32], dst: &mut [Self]) {
        for (block, x) in dst.iter_mut().zip(src.chunks_exact(QK)) {
            let BlockQ8_0 { d, qs } = q8_0_block(x);
            *block = Q8_0Activation::new(d, qs);
        }
    }

    fn decode_row(src: &[Self], dst: &mut [f32]) {
        for (block, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
            let d = block.d.to_f32();
            for (out, &q) in y.iter_mut().zip(&block.qs) {
                *out = f32::from(q) * d;
            }
        }
    }

    activation_data_variant!(Q8_0);
}

impl ActivationFormat for BlockQ8_1 {
    const TYPE: ActivationType = ActivationType::Q8_1;
    const BLOCK_LEN: usize = QK;

    fn quantize_row(src: &[f32], dst: &mut [Self]) {
        for (block, x) in dst.iter_mut().zip(src.chunks_exact(QK)) {
            let (d, inverse) = q8_scale(x);
            block.d = F16Le::from_f32(d);
            let mut sum = 0i32;
            for (q, &v) in block.qs.iter_mut().zip(x) {
                *q = nearest_int(v * inverse) as i8;
                sum += i32::from(*q);
            }
            // `s` uses the unrounded f32 `d`, as quantize_row_q8_1_ref does.
            block.s = F16Le::from_f32(sum as f32 * d);
        }
    }

    fn decode_row(src: &[Self], dst: &mut [f32]) {
        for (block, y) in src.iter().zip(dst.chunks_exact_mut(QK)) {
            let d = block.d.to_f32();
            for (out, &q) in y.iter_mut().zip(&block.qs) {
                *out = f32::from(q) * d;
            }
        }
    }

    activation_data_variant!(Q8_1);
}

impl ActivationFormat for BlockQ8K {
    const TYPE: ActivationType = ActivationType::Q8_K;
    const BLOCK_LEN: usize = QK_K;

    /// As `quantize_row_q8_K_ref`: the scale comes from the signed value of largest magnitude
    /// (first one wins), which maps to exactly -127; `d` stays f32.
    fn quantize_row(src: &[f32], dst: &mut [Self]) {
        for (block, x) in dst.iter_mut().zip(src.chunks_exact(QK_K)) {
            let mut amax = 0.0f32;
            let mut max = 0.0f32;
            for &v in x {
                if v.abs() > amax {
                    amax = v.abs();
                    max = v;
                }
            }
            if amax == 0.0 {
                *block = Self::default();
                continue;
            }
            let iscale = -127.0 / max;
            for (q, &v) in block.qs.iter_mut().zip(x) {
                *q = nearest_int(iscale * v).min(127) as i8;
            }
            for (sum, group) in block.bsums.iter_mut().zip(block.qs.chunks_exact(16)) {
                *sum = group.iter().map(|&q| i16::from(q)).sum();
            }
            block.d = 1.0 / iscale;
            block.wide = q8_k_wide(&block.qs);
        }
    }

    fn decode_row(src: &[Self], dst: &mut [f32]) {
        for (block, y) in src.iter().zip(dst.chunks_exact_mut(QK_K)) {
            for (out, &q) in y.iter_mut().zip(&block.qs) {
                *out = block.d * f32::from(q);
            }
        }
    }

    activation_data_variant!(Q8K);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::test_support::{Fixture, Rng};
    use crate::tensor::{BlockQ8_0, cast_blocks};

    #[test]
    fn q8_0_matches_ggml_reference_bytes_except_at_exact_halves() {
        // Golden from gguf.quants.quantize (quantize_row_q8_0_ref: `x / d`, halves away from
        // zero). The SIMD quantizers we follow multiply by `127 / amax` and round halves to
        // even, so a quant may differ by one, and only where `x · 127 / amax` sits on a half.
        let fixture = Fixture::parse(include_bytes!("../../tests/fixtures/tensor/q8_0_quantize.bin"));
        let q = QuantizedActivations::quantize(ActivationType::Q8_0, &fixture.values, 1, fixture.row_len)
            .unwrap();
        let expected: &[BlockQ8_0] = cast_blocks(&fixture.data).unwrap();
        let ours = q.row::<Q8_0Activation>(0).unwrap();
        let mut differing = 0;
        for ((got, want), x) in ours.iter().zip(expected).zip(fixture.values.chunks(32)) {
            assert_eq!(got.d, want.d);
            let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            for ((&a, &b), &v) in got.qs.iter().zip(&want.qs).zip(x) {
                if a != b {
                    differing += 1;
                    let scaled = v * 127.0 / amax;
                    assert!((scaled.abs().fract() - 0.5).abs() < 1e-4, "{a} vs {b} for {scaled}");
                    assert_eq!((i32::from(a) - i32::from(b)).abs(), 1);
                }
            }
        }
        assert!(
            differing * 10 < fixture.values.len(),
            "{differing} of {} quants differ",
            fixture.values.len()
        );
    }

    #[test]
    fn q8_0_rounds_halves_to_even() {
        // amax 127 gives d = 1, so values land exactly on the halves.
        let mut x = [0.0f32; 32];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -2.5;
        x[3] = 3.5;
        let q = QuantizedActivations::quantize(ActivationType::Q8_0, &x, 1, 32).unwrap();
        let block = q.row::<Q8_0Activation>(0).unwrap()[0];
        assert_eq!(block.d.to_f32(), 1.0);
        assert_eq!(&block.qs[..4], &[127, 2, -2, 4]);
    }

    #[test]
    fn q8_1_stores_scaled_sum() {
        let mut rng = Rng::new(7);
        let x: Vec<f32> = (0..64).map(|_| rng.normal()).collect();
        let q = QuantizedActivations::quantize(ActivationType::Q8_1, &x, 1, 64).unwrap();
        for (block, chunk) in q.row::<BlockQ8_1>(0).unwrap().iter().zip(x.chunks(32)) {
            let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            assert_eq!(block.d, F16Le::from_f32(d));
            let sum: i32 = block.qs.iter().map(|&q| i32::from(q)).sum();
            assert_eq!(block.s, F16Le::from_f32(sum as f32 * d));
        }
    }

    #[test]
    fn q8_k_rounds_ties_to_even_and_keeps_the_sign_of_the_max() {
        // max = -127 gives iscale = 1: q = x exactly, ties to even.
        let mut x = [0.0f32; 256];
        x[0] = -127.0;
        x[1] = 2.5;
        x[2] = 3.5;
        x[3] = -0.5;
        x[17] = 100.0;
        let q = QuantizedActivations::quantize(ActivationType::Q8_K, &x, 1, 256).unwrap();
        let block = &q.row::<BlockQ8K>(0).unwrap()[0];
        assert_eq!(block.d, 1.0);
        assert_eq!(&block.qs[..4], &[-127, 2, 4, 0]);
        assert_eq!(block.bsums[0], -127 + 2 + 4);
        assert_eq!(block.bsums[1], 100);

        // A positive max maps to -127 with a negative scale.
        let mut y = [0.0f32; 256];
        y[5] = 2.0;
        y[6] = -1.0;
        let q = QuantizedActivations::quantize(ActivationType::Q8_K, &y, 1, 256).unwrap();
        let block = &q.row::<BlockQ8K>(0).unwrap()[0];
        assert_eq!(block.d, 1.0 / (-127.0 / 2.0));
        assert_eq!((block.qs[5], block.qs[6]), (-127, 64)); // 63.5 rounds to even
    }

    #[test]
    fn q8_k_bsums_and_error_bound_on_random_rows() {
        let mut rng = Rng::new(11);
        let x: Vec<f32> = (0..512).map(|_| rng.normal() * 4.0).collect();
        let q = QuantizedActivations::quantize(ActivationType::Q8_K, &x, 2, 256).unwrap();
        for row in 0..2 {
            let block = &q.row::<BlockQ8K>(row).unwrap()[0];
            for (g, sum) in block.bsums.iter().enumerate() {
                let expect: i16 = block.qs[g * 16..(g + 1) * 16].iter().map(|&v| i16::from(v)).sum();
                assert_eq!(*sum, expect);
            }
            let mut back = [0f32; 256];
            q.dequantize_row(row, &mut back).unwrap();
            for (a, b) in x[row * 256..(row + 1) * 256].iter().zip(&back) {
                assert!((a - b).abs() <= block.d.abs() * 0.5001, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn all_zero_blocks_quantize_to_zero() {
        for t in [ActivationType::Q8_0, ActivationType::Q8_1, ActivationType::Q8_K] {
            let q = QuantizedActivations::quantize(t, &[0.0; 256], 1, 256).unwrap();
            let mut back = [1f32; 256];
            q.dequantize_row(0, &mut back).unwrap();
            assert!(back.iter().all(|&v| v == 0.0), "{t:?}");
        }
    }

    #[test]
    fn half_activations_round_to_nearest_even() {
        let x = [1.0 + 1.0 / 2048.0, 1.0 + 1.0 / 256.0 + 1.0 / 512.0, 3.0];
        let q = QuantizedActivations::quantize(ActivationType::F16, &x, 1, 3).unwrap();
        assert_eq!(
            q.row::<F16Activation>(0).unwrap(),
            &[1.0, 1.0 + 1.0 / 256.0 + 1.0 / 512.0, 3.0].map(F16Activation::new)
        );
        let q = QuantizedActivations::quantize(ActivationType::BF16, &x, 1, 3).unwrap();
        assert_eq!(q.row::<BF16Activation>(0).unwrap()[0], BF16Activation(1.0));
        assert_eq!(q.row::<BF16Activation>(0).unwrap()[1], BF16Activation(1.0 + 1.0 / 128.0));
    }

    #[test]
    fn shape_errors_are_reported() {
        assert!(matches!(
            QuantizedActivations::quantize(ActivationType::Q8_K, &[0.0; 100], 1, 100),
            Err(TensorError::RowNotBlockAligned { format: "Q8_K", .. })
        ));
        assert!(matches!(
            QuantizedActivations::quantize(ActivationType::Q8_0, &[0.0; 64], 3, 32),
            Err(TensorError::LengthMismatch { expected: 96, actual: 64, .. })
        ));
        let q = QuantizedActivations::quantize(ActivationType::Q8_0, &[0.0; 64], 2, 32).unwrap();
        assert!(matches!(q.row::<Q8_0Activation>(2), Err(TensorError::RowOutOfRange { row: 2, rows: 2 })));
        assert!(matches!(q.row::<BlockQ8_1>(0), Err(TensorError::ActivationTypeMismatch { .. })));
    }

    #[test]
    fn requantize_reuses_and_switches_storage() {
        let mut q = QuantizedActivations::quantize(ActivationType::Q8_0, &[1.0; 64], 2, 32).unwrap();
        q.requantize(ActivationType::Q8_0, &[2.0; 32], 1, 32).unwrap();
        assert_eq!((q.rows(), q.row_len()), (1, 32));
        assert_eq!(q.all_rows::<Q8_0Activation>().unwrap().len(), 1);
        q.requantize(ActivationType::Q8_K, &[2.0; 256], 1, 256).unwrap();
        assert_eq!(q.activation_type(), ActivationType::Q8_K);
    }
}
