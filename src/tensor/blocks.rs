//! ggml's block layouts (ggml-common.h), byte for byte.
//!
//! Weight blocks hold only byte-sized fields (f16 scales as [`F16Le`]), so they have alignment 1
//! and can be viewed in place inside an unaligned file mapping. The Q8_K activation block keeps
//! ggml's `f32`/`i16` fields: it is only ever built in memory by this crate.

use std::mem::{align_of, size_of};

use half::f16;

use super::TensorError;
use super::kernels::active::Q8KWide;

/// Elements in a K-quant super-block.
pub const QK_K: usize = 256;
/// Elements in a legacy (Q4_0 … Q8_1) block.
pub const QK: usize = 32;

/// A little-endian IEEE half stored as two bytes, so that blocks keep alignment 1.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct F16Le(pub [u8; 2]);

impl F16Le {
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        f16::from_le_bytes(self.0).to_f32()
    }

    /// Rounds to nearest even, as ggml's `GGML_FP32_TO_FP16`.
    #[inline]
    pub fn from_f32(value: f32) -> Self {
        Self(f16::from_f32(value).to_le_bytes())
    }
}

/// Q4_0: 32 weights `d * (q - 8)`, 4-bit `q`; element `j` in the low nibble of `qs[j]`,
/// element `j + 16` in the high nibble.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4_0 {
    pub d: F16Le,
    pub qs: [u8; QK / 2],
}

/// Q4_1: 32 weights `d * q + m`, nibbles laid out as in Q4_0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4_1 {
    pub d: F16Le,
    pub m: F16Le,
    pub qs: [u8; QK / 2],
}

/// Q5_0: 32 weights `d * (q - 16)`, 5-bit `q`: low nibbles as in Q4_0, fifth bit of element `j`
/// in bit `j` of the little-endian `qh`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5_0 {
    pub d: F16Le,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

/// Q5_1: 32 weights `d * q + m`, bits laid out as in Q5_0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5_1 {
    pub d: F16Le,
    pub m: F16Le,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

/// Q8_0: 32 values `d * q`, `q` in -127..=127. A weight format; the activations of Q4_0, Q5_0,
/// Q8_0 and IQ4_NL weights are these blocks too, held as
/// [`Q8_0Activation`](super::Q8_0Activation)s.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockQ8_0 {
    pub d: F16Le,
    pub qs: [i8; QK],
}

/// Q8_1: Q8_0 plus `s = d * sum(qs)`; the activation format of Q4_1 and Q5_1 weights, whose
/// offset `m` multiplies the sum of the activations.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockQ8_1 {
    pub d: F16Le,
    pub s: F16Le,
    pub qs: [i8; QK],
}

/// Q2_K: 16 groups of 16, `d * (scales & 15) * q - dmin * (scales >> 4)`, 2-bit `q`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: F16Le,
    pub dmin: F16Le,
}

/// Q3_K: 16 groups of 16, `d * (scale - 32) * (q - 4 * !high_bit)`, 6-bit scales packed in 12 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: F16Le,
}

/// Q4_K: 8 groups of 32, `d * scale * q - dmin * min`, 6-bit scales and mins packed in 12 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ4K {
    pub d: F16Le,
    pub dmin: F16Le,
    pub scales: [u8; 12],
    pub qs: [u8; QK_K / 2],
}

/// Q5_K: Q4_K plus a fifth bit per weight in `qh`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ5K {
    pub d: F16Le,
    pub dmin: F16Le,
    pub scales: [u8; 12],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

/// Q6_K: 16 groups of 16, `d * scale * (q - 32)`, 6-bit `q` split in low nibbles and high pairs,
/// signed 8-bit scales.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: F16Le,
}

/// Q8_K: the activation format of every K-quant. `d` is a full f32 (not f16), and `bsums` holds
/// the sums of each 16 quants so that K-quant mins cost one multiply per group. Built in
/// memory, never read from a file: besides ggml's fields it carries what the instruction set's
/// kernels want of it once per matmul (`Q8KWide` in `kernels.rs`: nothing, except for plain
/// SIMD128), made when it is quantized.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
    pub(super) wide: Q8KWide,
}

impl Default for BlockQ8K {
    fn default() -> Self {
        Self { d: 0.0, qs: [0; QK_K], bsums: [0; QK_K / 16], wide: Default::default() }
    }
}

/// IQ4_NL: 32 weights `d * KVALUES_IQ4NL[q]`, 4-bit `q` laid out as in Q4_0: a non-linear
/// table of 16 levels instead of Q4_0's evenly spaced ones.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq4Nl {
    pub d: F16Le,
    pub qs: [u8; QK / 2],
}

/// The 16 levels of IQ4_NL (ggml's `kvalues_iq4nl`).
pub const KVALUES_IQ4NL: [i8; 16] =
    [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/// MXFP4 (the OCP microscaling 4-bit float, gpt-oss's experts): 32 weights
/// `e8m0_half(e) * KVALUES_MXFP4[q]`, 4-bit `q` laid out as in IQ4_NL, one power-of-two
/// scale (E8M0) for the block.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockMxfp4 {
    pub e: u8,
    pub qs: [u8; QK / 2],
}

/// FP4 (E2M1)'s 16 values doubled, so that they are integers (ggml's `kvalues_mxfp4`); the
/// block's scale is halved to match ([`e8m0_half`]).
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half the E8M0 scale `2^(e - 127)`, exactly (ggml's `ggml_e8m0_to_fp32_half`: denormal for
/// `e` below 2).
#[inline(always)]
pub fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { u32::from(e - 1) << 23 };
    f32::from_bits(bits)
}

/// IQ4_XS: 256 weights in eight groups of 32, group `g` scaled by `d * (ls_g - 32)` with a
/// 6-bit `ls_g` (low 4 bits in `scales_l`, high 2 in `scales_h`), on IQ4_NL's levels; codes
/// laid out per group as in IQ4_NL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq4Xs {
    pub d: F16Le,
    pub scales_h: [u8; 2],
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

impl BlockIq4Xs {
    /// The signed scale `ls - 32` of group `g` (0..8).
    #[inline(always)]
    pub fn group_scale(&self, g: usize) -> i32 {
        let low = (self.scales_l[g / 2] >> (4 * (g % 2))) & 0x0F;
        let high = (u16::from_le_bytes(self.scales_h) >> (2 * g)) & 3;
        i32::from(low | (high as u8) << 4) - 32
    }
}

/// IQ2_XXS: 256 weights in eight groups of 32. Per group, 8 bytes of `qs`: four indices into
/// [`IQ2XXS_GRID`](super::iq_grids::IQ2XXS_GRID) (8 levels each), then a little-endian u32 of
/// four 7-bit sign indices into `KSIGNS_IQ2XS` and a 4-bit scale `ls` in its top bits; weight
/// `d · (0.5 + ls) / 4 · level · sign`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq2Xxs {
    pub d: F16Le,
    pub qs: [u8; QK_K / 4],
}

/// IQ2_XS: 256 weights in eight groups of 32. Each 8 weights are one little-endian u16 of
/// `qs`: a 9-bit index into [`IQ2XS_GRID`](super::iq_grids::IQ2XS_GRID) (8 levels) and a 7-bit
/// index into `KSIGNS_IQ2XS`; one 4-bit scale `ls` per 16 weights (two per byte of `scales`);
/// weight `d · (0.5 + ls) / 4 · level · sign`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq2Xs {
    pub d: F16Le,
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; QK_K / 32],
}

/// IQ2_S: 256 weights in eight groups of 32. Each 8 weights: index `qs[i]` plus two high bits
/// from `qh[i / 4]` into [`IQ2S_GRID`](super::iq_grids::IQ2S_GRID) (8 levels), and an explicit
/// sign byte `signs[i]`; one 4-bit scale `ls` per 16 weights; weight
/// `d · (0.5 + ls) / 4 · level · sign`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq2S {
    pub d: F16Le,
    pub qs: [u8; QK_K / 8],
    pub signs: [u8; QK_K / 8],
    pub qh: [u8; QK_K / 32],
    pub scales: [u8; QK_K / 32],
}

/// IQ1_S: 256 weights in eight groups of 32, each run of 8 one entry of the ternary
/// [`IQ1S_GRID`](super::iq_grids::IQ1S_GRID) (levels -1, 0, 1): index `qs[i]` plus 3 high bits
/// from the group's little-endian u16 `qh[g]`, whose bits 12..15 also hold a 3-bit scale `s` and
/// the sign of a shift `δ = ±1/8`; weight `d · (2s + 1) · (level + δ)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq1S {
    pub d: F16Le,
    pub qs: [u8; QK_K / 8],
    pub qh: [u8; QK_K / 16],
}

/// IQ1_M: IQ1_S's grid with 3 high index bits and the shift's sign per 8 weights (a nibble of
/// `qh`), a 3-bit scale per 16 weights in `scales`, and the block's f16 `d` spread over the top
/// nibbles of the four u16 of `scales`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq1M {
    pub qs: [u8; QK_K / 8],
    pub qh: [u8; QK_K / 16],
    pub scales: [u8; QK_K / 32],
}

impl BlockIq1M {
    /// The four little-endian u16 of `scales`.
    #[inline(always)]
    pub fn scale_words(&self) -> [u16; 4] {
        std::array::from_fn(|w| u16::from_le_bytes([self.scales[2 * w], self.scales[2 * w + 1]]))
    }

    /// The block's f16 scale, assembled from the top nibbles of the scale words.
    #[inline(always)]
    pub fn d(&self) -> F16Le {
        let [s0, s1, s2, s3] = self.scale_words();
        let bits = (s0 >> 12) | ((s1 >> 8) & 0x00F0) | ((s2 >> 4) & 0x0F00) | (s3 & 0xF000);
        F16Le(bits.to_le_bytes())
    }
}

/// IQ3_XXS: 256 weights in eight groups of 32. `qs` holds 64 indices into
/// [`IQ3XXS_GRID`](super::iq_grids::IQ3XXS_GRID) (4 levels each, 8 per group), then one
/// little-endian u32 per group: four 7-bit sign indices and a 4-bit scale `ls` on top; weight
/// `d · (0.5 + ls) / 2 · level · sign`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq3Xxs {
    pub d: F16Le,
    pub qs: [u8; 3 * QK_K / 8],
}

/// IQ3_S: 256 weights in eight groups of 32. Index `i` of group `g` is `qs[8g + i]` plus bit
/// `i` of `qh[g]` as its 9th bit, into [`IQ3S_GRID`](super::iq_grids::IQ3S_GRID) (4 levels
/// each); one explicit sign bit per weight in `signs`; 4-bit scales `s`, two per byte; weight
/// `d · (1 + 2s) · level · sign`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockIq3S {
    pub d: F16Le,
    pub qs: [u8; QK_K / 4],
    pub qh: [u8; QK_K / 32],
    pub signs: [u8; QK_K / 8],
    pub scales: [u8; QK_K / 64],
}

// Each weight block's size is checked against ggml's table where the weight types are
// listed (`format.rs`), and the activation blocks' where theirs are (`activations.rs`).

/// Types that are nothing but bytes: a byte slice of the right length is a valid value.
///
/// # Safety
/// Implementors must be `#[repr(C)]` (or transparent) structs whose fields are all `u8`, `i8`,
/// arrays of them or other `PlainBytes` types: alignment 1, no padding, every bit pattern valid.
pub unsafe trait PlainBytes: Copy {}

// SAFETY: a byte: alignment 1, every bit pattern valid (the float formats' kernels view their
// weights as bytes, read unaligned).
unsafe impl PlainBytes for u8 {}
// SAFETY: each is repr(C) of u8/i8 arrays and F16Le ([u8; 2]); the size asserts against ggml's
// table confirm there is no padding, and the asserts below confirm alignment 1.
unsafe impl PlainBytes for F16Le {}
unsafe impl PlainBytes for BlockQ4_0 {}
unsafe impl PlainBytes for BlockIq4Nl {}
unsafe impl PlainBytes for BlockMxfp4 {}
unsafe impl PlainBytes for BlockIq4Xs {}
unsafe impl PlainBytes for BlockIq2Xxs {}
unsafe impl PlainBytes for BlockIq3Xxs {}
unsafe impl PlainBytes for BlockIq3S {}
unsafe impl PlainBytes for BlockIq2Xs {}
unsafe impl PlainBytes for BlockIq2S {}
unsafe impl PlainBytes for BlockIq1S {}
unsafe impl PlainBytes for BlockIq1M {}
unsafe impl PlainBytes for BlockQ4_1 {}
unsafe impl PlainBytes for BlockQ5_0 {}
unsafe impl PlainBytes for BlockQ5_1 {}
unsafe impl PlainBytes for BlockQ8_0 {}
unsafe impl PlainBytes for BlockQ8_1 {}
unsafe impl PlainBytes for BlockQ2K {}
unsafe impl PlainBytes for BlockQ3K {}
unsafe impl PlainBytes for BlockQ4K {}
unsafe impl PlainBytes for BlockQ5K {}
unsafe impl PlainBytes for BlockQ6K {}

const _: () = assert!(align_of::<BlockQ4_0>() == 1 && align_of::<BlockQ4_1>() == 1);
const _: () = assert!(align_of::<BlockQ5_0>() == 1 && align_of::<BlockQ5_1>() == 1);
const _: () = assert!(align_of::<BlockQ8_0>() == 1 && align_of::<BlockQ8_1>() == 1);
const _: () = assert!(align_of::<BlockQ2K>() == 1 && align_of::<BlockQ3K>() == 1);
const _: () = assert!(align_of::<BlockQ4K>() == 1 && align_of::<BlockQ5K>() == 1);
const _: () = assert!(align_of::<BlockQ6K>() == 1);
const _: () =
    assert!(align_of::<BlockIq2Xxs>() == 1 && align_of::<BlockIq3Xxs>() == 1 && align_of::<BlockIq3S>() == 1);
const _: () = assert!(align_of::<BlockIq2Xs>() == 1 && align_of::<BlockIq2S>() == 1);
const _: () = assert!(align_of::<BlockIq1S>() == 1 && align_of::<BlockIq1M>() == 1);
const _: () = assert!(align_of::<BlockMxfp4>() == 1 && size_of::<BlockMxfp4>() == 17);

/// Views `bytes` as whole blocks without copying; the length must be a multiple of the block size.
pub fn cast_blocks<B: PlainBytes>(bytes: &[u8]) -> Result<&[B], TensorError> {
    const { assert!(align_of::<B>() == 1 && size_of::<B>() > 0) };
    let block_size = size_of::<B>();
    if !bytes.len().is_multiple_of(block_size) {
        return Err(TensorError::LengthMismatch {
            what: "block bytes (not a whole number of blocks)",
            expected: bytes.len() - bytes.len() % block_size,
            actual: bytes.len(),
        });
    }
    // SAFETY: `B: PlainBytes` has alignment 1 (checked at compile time above), no padding and no
    // invalid bit patterns, so any initialized bytes of length `n * size_of::<B>()` form `n`
    // valid `B`s; the returned slice borrows `bytes`, so the memory outlives it and stays shared.
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<B>(), bytes.len() / block_size) })
}

/// Like [`cast_blocks`] for callers that already checked the length: any trailing partial block
/// is ignored instead of reported.
#[inline]
pub(crate) fn whole_blocks<B: PlainBytes>(bytes: &[u8]) -> &[B] {
    let whole = bytes.len() - bytes.len() % size_of::<B>();
    match cast_blocks(&bytes[..whole]) {
        Ok(blocks) => blocks,
        Err(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_unaligned_bytes_without_copying() {
        let mut storage = [0u8; 1 + 2 * 18];
        storage[1..3].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        storage[3] = 0xAB;
        storage[19..21].copy_from_slice(&f16::from_f32(-2.0).to_le_bytes());
        let view = &storage[1..]; // deliberately odd address
        let blocks: &[BlockQ4_0] = cast_blocks(view).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].d.to_f32(), 0.5);
        assert_eq!(blocks[0].qs[0], 0xAB);
        assert_eq!(blocks[1].d.to_f32(), -2.0);
        assert_eq!(blocks.as_ptr() as usize, view.as_ptr() as usize);
    }

    #[test]
    fn rejects_partial_blocks() {
        let bytes = [0u8; 145];
        assert!(matches!(
            cast_blocks::<BlockQ4K>(&bytes),
            Err(TensorError::LengthMismatch { expected: 144, actual: 145, .. })
        ));
        assert_eq!(whole_blocks::<BlockQ4K>(&bytes).len(), 1);
    }

    #[test]
    fn f16_fields_round_to_nearest_even() {
        // 1 + 2^-11 is halfway between two f16 values: ties go to the even mantissa (1.0).
        assert_eq!(F16Le::from_f32(1.0 + 1.0 / 2048.0).to_f32(), 1.0);
        assert_eq!(F16Le::from_f32(1.0 + 3.0 / 2048.0).to_f32(), 1.0 + 2.0 / 1024.0);
    }
}
