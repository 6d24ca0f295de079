//! The one place that picks kernels, as ggml's `arch-fallback.h` does: for each instruction
//! set, one tile entry per weight format naming its dot kernels ([`Tile`]), and one explicit
//! fallback line for the formats it has none for. [`Active`] is the instruction set this
//! build targets:
//!
//! | table | built when | kernels from |
//! |---|---|---|
//! | [`Scalar`] | always (the reference; the kernels of any other target) | `legacy.rs`, `kquants.rs`, `iquants.rs`, `iq_lattice.rs`, `float.rs` (ggml's summing order) |
//! | `Simd128` | `wasm32`/`wasm64` + `simd128` | `simd128.rs`, whose integer dots and multiply-adds switch to relaxed SIMD's instructions where the build has them |
//! | `Avx2` | `x86_64` + `avx2` + `fma` (native) | `avx2.rs` for four 32-element formats, [`Scalar`] for the rest |
//!
//! A tile entry names the single-row dot, and where the instruction set has them a row-group
//! kernel (one weight row with [`ROW_GROUP`] activation rows, each weight block decoded once:
//! prefill) and a weight-pair kernel (two weight rows with one activation row: decode).
//! Missing ones run the entry's own single-row dot a row at a time, so groups and pairs
//! always equal single rows bit for bit. A table without an entry for a format fails to
//! compile: the fallback line is the only way to leave one out.
//!
//! A new weight type adds a tile entry to [`Scalar`] and to each table that has a kernel for
//! it, or its name to that table's fallback line. A new instruction set adds its kernel file,
//! a marker type here with its entries and fallback line, and its `Active` line.
//!
//! Besides the per-format dots, each instruction set has a few kernels that are no format's
//! dot, in its [`active`] module: what a Q8_0 activation block carries for its kernels
//! (`Q8_0Extra`, made by `q8_0_extra` when the activations are quantized: nothing, except for
//! SIMD128, whose kernels take the block's scale widened to f32 lanes, and relaxed SIMD's Q4_0
//! and Q5_0 dots, which take their weights' offset out with per-block activation sums); what a
//! Q8_K block carries (`Q8KWide`, by `q8_k_wide`: nothing, except for plain SIMD128, whose
//! Q4_K, Q5_K and Q6_K dots take its quants widened to i16 once per matmul);
//! attention's work on the KV cache's rows (`*kv_row*` and `scale_rounded_to_f16` on F16 rows;
//! `dot_f32_keys4`, the tiled kernel's scores over f32 rows; `kv_rows.rs`: they must give the
//! scalar bits exactly); `any_non_finite_f16`, the scan of F16 tensors
//! when a model loads; and `sum_words`, the benchmark's memory read probe. Tests compare every
//! table with [`Scalar`] (`kernel_checks.rs`).

use super::blocks::{
    BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl, BlockIq4Xs,
    BlockMxfp4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0,
};
use super::format::{QuantFormat, ROW_GROUP};
use half::{bf16, f16};

/// One weight format's dot products on one instruction set. Blocks arrive typed and whole;
/// the activations are in the format's activation type.
pub trait Tile<W: QuantFormat> {
    /// One weight row with one activation row of the same length.
    fn dot(x: &[W::Block], y: &[W::Activation]) -> f32;

    /// One weight row with [`ROW_GROUP`] activation rows; must equal [`dot`](Self::dot) bit for bit.
    #[inline(always)]
    fn group(x: &[W::Block], rows: [&[W::Activation]; ROW_GROUP]) -> [f32; ROW_GROUP] {
        rows.map(|y| Self::dot(x, y))
    }

    /// Two weight rows with one activation row; must equal [`dot`](Self::dot) bit for bit.
    #[inline(always)]
    fn pair(x: [&[W::Block]; 2], y: &[W::Activation]) -> [f32; 2] {
        x.map(|x| Self::dot(x, y))
    }

    /// A matrix (`row_bytes` a row) times `out.len()` activation rows: `out[i][r]` is
    /// [`dot`](Self::dot) of weight row `r` with activation row `i`, by [`group`](Self::group)
    /// and then one by one; a kernel may compute the same sums as a GEMM.
    fn matmul<'a>(
        weights: &[u8],
        row_bytes: usize,
        activation_row: impl Fn(usize) -> &'a [W::Activation],
        out: &mut [&mut [f32]],
    ) where
        W::Activation: 'a,
    {
        let n = out.len();
        let grouped = n - n % ROW_GROUP;
        for (r, weight_row) in weights.chunks_exact(row_bytes).enumerate() {
            let blocks = super::blocks::whole_blocks(weight_row);
            for first in (0..grouped).step_by(ROW_GROUP) {
                let dots = Self::group(blocks, std::array::from_fn(|j| activation_row(first + j)));
                for (j, dot) in dots.into_iter().enumerate() {
                    out[first + j][r] = dot;
                }
            }
            for (i, out_row) in out.iter_mut().enumerate().skip(grouped) {
                out_row[r] = Self::dot(blocks, activation_row(i));
            }
        }
    }
}

/// Tile entries: `format => dot[, group kernel][, pair kernel];` for one instruction set.
macro_rules! tiles {
    ($isa:ty: $($format:ty => $dot:path $(, group $group:path)? $(, pair $pair:path)? $(, matmul $matmul:path)?;)*) => {$(
        impl Tile<$format> for $isa {
            #[inline(always)]
            fn dot(x: &[<$format as QuantFormat>::Block], y: &[<$format as QuantFormat>::Activation]) -> f32 {
                $dot(x, y)
            }
            $(
                #[inline(always)]
                fn group(
                    x: &[<$format as QuantFormat>::Block],
                    rows: [&[<$format as QuantFormat>::Activation]; ROW_GROUP],
                ) -> [f32; ROW_GROUP] {
                    $group(x, rows)
                }
            )?
            $(
                #[inline(always)]
                fn pair(
                    x: [&[<$format as QuantFormat>::Block]; 2],
                    y: &[<$format as QuantFormat>::Activation],
                ) -> [f32; 2] {
                    $pair(x, y)
                }
            )?
            $(
                fn matmul<'a>(
                    weights: &[u8],
                    row_bytes: usize,
                    activation_row: impl Fn(usize) -> &'a [<$format as QuantFormat>::Activation],
                    out: &mut [&mut [f32]],
                ) where
                    <$format as QuantFormat>::Activation: 'a,
                {
                    $matmul(weights, row_bytes, activation_row, out)
                }
            )?
        }
    )*};
}

/// The fallback line: these formats run on `$isa` with `$to`'s kernels, all three slots.
#[allow(unused_macros)]
macro_rules! falls_back {
    ($isa:ty => $to:ty: $($format:ty),* $(,)?) => {$(
        impl Tile<$format> for $isa {
            #[inline(always)]
            fn dot(x: &[<$format as QuantFormat>::Block], y: &[<$format as QuantFormat>::Activation]) -> f32 {
                <$to as Tile<$format>>::dot(x, y)
            }
            #[inline(always)]
            fn group(
                x: &[<$format as QuantFormat>::Block],
                rows: [&[<$format as QuantFormat>::Activation]; ROW_GROUP],
            ) -> [f32; ROW_GROUP] {
                <$to as Tile<$format>>::group(x, rows)
            }
            #[inline(always)]
            fn pair(
                x: [&[<$format as QuantFormat>::Block]; 2],
                y: &[<$format as QuantFormat>::Activation],
            ) -> [f32; 2] {
                <$to as Tile<$format>>::pair(x, y)
            }
        }
    )*};
}

/// The scalar reference: ggml's summing order, every format. A table with its own kernel for a
/// format leaves that entry to the kernel checks; in wasm, where SIMD128 has them all, only the
/// kernel checks use it.
pub enum Scalar {}

tiles! { Scalar:
    f32 => super::float::dot_f32;
    f16 => super::float::dot_f16;
    bf16 => super::float::dot_bf16;
    BlockQ4_0 => super::legacy::dot_q4_0;
    BlockQ4_1 => super::legacy::dot_q4_1;
    BlockQ5_0 => super::legacy::dot_q5_0;
    BlockQ5_1 => super::legacy::dot_q5_1;
    BlockQ8_0 => super::legacy::dot_q8_0;
    BlockQ2K => super::kquants::dot_q2_k;
    BlockQ3K => super::kquants::dot_q3_k;
    BlockQ4K => super::kquants::dot_q4_k;
    BlockQ5K => super::kquants::dot_q5_k;
    BlockQ6K => super::kquants::dot_q6_k;
    BlockIq4Nl => super::iquants::dot_table::<BlockIq4Nl>;
    BlockMxfp4 => super::iquants::dot_table::<BlockMxfp4>;
    BlockIq4Xs => super::iquants::dot_iq4_xs;
    BlockIq2Xxs => super::iq_lattice::dot_iq2_xxs;
    BlockIq3Xxs => super::iq_lattice::dot_iq3_xxs;
    BlockIq3S => super::iq_lattice::dot_iq3_s;
    BlockIq2Xs => super::iq_lattice::dot_iq2_xs;
    BlockIq2S => super::iq_lattice::dot_iq2_s;
    BlockIq1S => super::iq_lattice::dot_iq1_s;
    BlockIq1M => super::iq_lattice::dot_iq1_m;
}

/// WebAssembly SIMD128, with or without relaxed SIMD: a kernel for every format.
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
pub enum Simd128 {}

#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
tiles! { Simd128:
    f32 => simd::dot_f32, group simd::dot_f32_group, pair simd::dot_f32_pair;
    f16 => simd::dot_f16, group simd::dot_f16_group, pair simd::dot_f16_pair, matmul simd::matmul_f16;
    bf16 => simd::dot_bf16, group simd::dot_bf16_group, pair simd::dot_bf16_pair;
    BlockQ4_0 => simd::dot_q4_0, group simd::dot_q4_0_group, pair simd::dot_q4_0_pair;
    BlockQ4_1 => simd::dot_q4_1, group simd::dot_q4_1_group, pair simd::dot_q4_1_pair;
    BlockQ5_0 => simd::dot_q5_0, group simd::dot_q5_0_group, pair simd::dot_q5_0_pair;
    BlockQ5_1 => simd::dot_q5_1, group simd::dot_q5_1_group, pair simd::dot_q5_1_pair;
    BlockQ8_0 => simd::dot_q8_0, group simd::dot_q8_0_group, pair simd::dot_q8_0_pair;
    BlockQ2K => simd::dot_q2_k, group simd::dot_q2_k_group;
    BlockQ3K => simd::dot_q3_k, group simd::dot_q3_k_group;
    BlockQ4K => simd::dot_q4_k, group simd::dot_q4_k_group;
    BlockQ5K => simd::dot_q5_k, group simd::dot_q5_k_group;
    BlockQ6K => simd::dot_q6_k, group simd::dot_q6_k_group;
    BlockIq4Nl => simd::dot_iq4_nl, group simd::dot_iq4_nl_group, pair simd::dot_iq4_nl_pair;
    BlockMxfp4 => simd::dot_mxfp4, group simd::dot_mxfp4_group, pair simd::dot_mxfp4_pair;
    BlockIq4Xs => simd::dot_iq4_xs, group simd::dot_iq4_xs_group;
    BlockIq2Xxs => simd::dot_iq2_xxs, group simd::dot_iq2_xxs_group;
    BlockIq3Xxs => simd::dot_iq3_xxs, group simd::dot_iq3_xxs_group;
    BlockIq3S => simd::dot_iq3_s, group simd::dot_iq3_s_group;
    BlockIq2Xs => simd::dot_iq2_xs, group simd::dot_iq2_xs_group;
    BlockIq2S => simd::dot_iq2_s, group simd::dot_iq2_s_group;
    BlockIq1S => simd::dot_iq1_s, group simd::dot_iq1_s_group;
    BlockIq1M => simd::dot_iq1_m, group simd::dot_iq1_m_group;
}
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
use super::simd128 as simd;

/// Native x86-64 with AVX2 and FMA: ggml's own AVX2 sums for F32 and four 32-element formats.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub enum Avx2 {}

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
tiles! { Avx2:
    f32 => super::float::dot_f32_ggml_order;
    BlockQ4_0 => super::avx2::dot_q4_0;
    BlockQ4_1 => super::avx2::dot_q4_1;
    BlockQ5_0 => super::avx2::dot_q5_0;
    BlockQ8_0 => super::avx2::dot_q8_0;
}
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
falls_back! { Avx2 => Scalar:
    f16, bf16, BlockQ5_1, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockIq4Nl, BlockIq4Xs,
    BlockIq2Xxs, BlockIq3Xxs, BlockIq3S, BlockIq2Xs, BlockIq2S, BlockIq1S, BlockIq1M, BlockMxfp4,
}

/// The instruction set this build's kernels run on.
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
pub type Active = Simd128;
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub type Active = Avx2;
#[cfg(not(any(
    all(target_family = "wasm", target_feature = "simd128"),
    all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")
)))]
pub type Active = Scalar;

/// The scalar reference of the kernels that are no format's dot. A table that has its own
/// leaves these to the kernel checks.
pub(super) mod scalar {
    pub(in crate::tensor) use super::super::float::exp_shifted;
    pub(in crate::tensor) use super::super::float::{any_non_finite_f16, scan_state_row, sum_words};
    #[cfg_attr(target_feature = "simd128", allow(unused_imports))] // SIMD128 has its own
    pub(in crate::tensor) use super::super::kquants::{Q8KWide, q8_k_wide};
    pub(in crate::tensor) use super::super::kv_rows::{
        add_weighted_rows_scalar as add_weighted_rows, dot_f32_keys4, dot_kv_row, dot_kv_row_heads,
        dot_tiled_keys, mad_kv_row_heads, mad_kv_row_rounded, mad_kv_row_rounded_heads, scale_rounded_to_f16,
        widen_kv_row,
    };
    #[cfg_attr(target_feature = "simd128", allow(unused_imports))] // SIMD128 has its own
    pub(in crate::tensor) use super::super::legacy::{Q8_0Extra, q8_0_extra};
}

/// WebAssembly SIMD128's kernels that are no format's dot.
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
pub(super) mod active {
    pub(in crate::tensor) use super::super::simd128::{
        Q8_0Extra, Q8KWide, add_weighted_rows, any_non_finite_f16, dot_f32_keys4, dot_kv_row,
        dot_kv_row_heads, dot_tiled_keys, exp_shifted, mad_kv_row_heads, mad_kv_row_rounded,
        mad_kv_row_rounded_heads, q8_0_extra, q8_k_wide, scale_rounded_to_f16, scan_state_row, sum_words,
        widen_kv_row,
    };
}

/// Every other target: the scalar ones.
#[cfg(not(all(target_family = "wasm", target_feature = "simd128")))]
pub(super) mod active {
    pub(in crate::tensor) use super::scalar::*;
}
