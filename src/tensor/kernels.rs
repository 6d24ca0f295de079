//! The one place that picks kernels. Every dot product the block formats use is a slot; each
//! instruction set has a table naming its kernel for every slot, with the scalar reference as
//! the default, and [`active`] is the table of the instruction set this build targets:
//!
//! | table | built when | kernels from |
//! |---|---|---|
//! | [`scalar`] | any other target | `legacy.rs`, `kquants.rs`, `float.rs` (ggml's summing order), `kv_rows.rs` |
//! | SIMD128 | `wasm32` + `simd128` | `simd128.rs` |
//! | relaxed SIMD | `wasm32` + `simd128` + `relaxed-simd` | `simd128.rs`, whose integer dots and multiply-adds switch to the relaxed instructions |
//! | AVX2 | `x86_64` + `avx2` + `fma` (native) | `avx2.rs` for the 32-element formats, scalar elsewhere |
//!
//! A new block type adds its struct (`blocks.rs`), its scalar kernel, a kernel in the files of
//! the instruction sets that have one, and a row in each table below. Besides kernels, a table
//! names what a Q8_0 activation block carries for them (`Q8_0Extra`, made by `q8_0_extra`
//! when the activations are quantized): nothing, except for SIMD128, whose kernels take the
//! block's scale widened to f32 lanes, and relaxed SIMD's Q4_0 and Q5_0 dots, which take their
//! weights' offset out with per-block activation sums. Row-group slots
//! (`*_group`: one weight row dotted with `ROW_GROUP` activation rows, each weight block
//! decoded once) fall back to the table's own single-row kernel, so they always equal it bit
//! for bit. The KV-row slots (`*kv_row*`, `scale_rounded_to_f16`) are attention's work on
//! the F16 cache (`kv_rows.rs`); they must give the scalar bits exactly. Weight-pair slots
//! (`*_pair`: two weight rows dotted with one activation row, for decode) likewise fall back
//! to the single-row kernel and must equal it bit for bit. Two slots are no dots:
//! `any_non_finite_f16`, the scan of F16 tensors when a model loads, and `sum_words`, the
//! benchmark's memory read probe. Tests compare every
//! table with [`scalar`] (`kernel_checks.rs`).

/// The scalar reference kernels: the default of every slot. Outside test builds a table that
/// has its own kernel for a slot leaves that entry unused.
#[cfg_attr(not(any(test, feature = "kernel-checks")), allow(unused_imports))]
pub(super) mod scalar {
    pub(in crate::tensor) use super::super::float::{
        any_non_finite_f16, dot_bf16, dot_f16, dot_f32, sum_words,
    };
    pub(in crate::tensor) use super::super::iq_lattice::{
        dot_iq1_m, dot_iq1_s, dot_iq2_s, dot_iq2_xs, dot_iq2_xxs, dot_iq3_s, dot_iq3_xxs,
    };
    pub(in crate::tensor) use super::super::iquants::{dot_iq4_nl, dot_iq4_xs};
    pub(in crate::tensor) use super::super::kquants::{dot_q2_k, dot_q3_k, dot_q4_k, dot_q5_k, dot_q6_k};
    pub(in crate::tensor) use super::super::kv_rows::{
        dot_kv_row, dot_kv_row_heads, mad_kv_row_rounded, mad_kv_row_rounded_heads, scale_rounded_to_f16,
        widen_kv_row,
    };
    #[cfg_attr(target_feature = "simd128", allow(unused_imports))] // SIMD128 has its own
    pub(in crate::tensor) use super::super::legacy::{Q8_0Extra, q8_0_extra};
    pub(in crate::tensor) use super::super::legacy::{dot_q4_0, dot_q4_1, dot_q5_0, dot_q5_1, dot_q8_0};
}

/// Defines the row-group slots of a table without row-group kernels: each row in turn through
/// the table's own single-row kernel. (Unused by the SIMD128 table, which has them all.)
#[allow(unused_macros)]
macro_rules! one_row_at_a_time {
    ($($group:ident = $dot:ident($block:ty, $activation:ty);)*) => {$(
        #[inline(always)]
        pub fn $group(x: &[$block], rows: [&[$activation]; ROW_GROUP]) -> [f32; ROW_GROUP] {
            rows.map(|activations| $dot(x, activations))
        }
    )*};
}

/// Defines the weight-pair slots of a table without pair kernels: each weight row in turn
/// through the table's own single-row kernel.
#[allow(unused_macros)]
macro_rules! one_weight_row_at_a_time {
    ($($pair:ident = $dot:ident($block:ty, $activation:ty);)*) => {$(
        #[inline(always)]
        pub fn $pair(x: [&[$block]; 2], activations: &[$activation]) -> [f32; 2] {
            x.map(|x| $dot(x, activations))
        }
    )*};
}

/// Row-group and weight-pair slots defined one row at a time, for the tables below that lack
/// their kernels.
#[allow(unused_macros)]
macro_rules! single_row_groups {
    () => {
        use super::super::activations::{BF16Activation, F16Activation, Q8_0Activation};
        use super::super::blocks::{
            BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl,
            BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K,
            BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K,
        };
        use super::super::format::ROW_GROUP;
        one_row_at_a_time! {
            dot_f32_group = dot_f32(u8, f32);
            dot_f16_group = dot_f16(u8, F16Activation);
            dot_bf16_group = dot_bf16(u8, BF16Activation);
            dot_q8_0_group = dot_q8_0(BlockQ8_0, Q8_0Activation);
            dot_q4_0_group = dot_q4_0(BlockQ4_0, Q8_0Activation);
            dot_q4_1_group = dot_q4_1(BlockQ4_1, BlockQ8_1);
            dot_q5_0_group = dot_q5_0(BlockQ5_0, Q8_0Activation);
            dot_q5_1_group = dot_q5_1(BlockQ5_1, BlockQ8_1);
            dot_q2_k_group = dot_q2_k(BlockQ2K, BlockQ8K);
            dot_q3_k_group = dot_q3_k(BlockQ3K, BlockQ8K);
            dot_q4_k_group = dot_q4_k(BlockQ4K, BlockQ8K);
            dot_q5_k_group = dot_q5_k(BlockQ5K, BlockQ8K);
            dot_q6_k_group = dot_q6_k(BlockQ6K, BlockQ8K);
            dot_iq4_nl_group = dot_iq4_nl(BlockIq4Nl, Q8_0Activation);
            dot_iq4_xs_group = dot_iq4_xs(BlockIq4Xs, BlockQ8K);
            dot_iq2_xxs_group = dot_iq2_xxs(BlockIq2Xxs, BlockQ8K);
            dot_iq3_xxs_group = dot_iq3_xxs(BlockIq3Xxs, BlockQ8K);
            dot_iq3_s_group = dot_iq3_s(BlockIq3S, BlockQ8K);
            dot_iq2_xs_group = dot_iq2_xs(BlockIq2Xs, BlockQ8K);
            dot_iq2_s_group = dot_iq2_s(BlockIq2S, BlockQ8K);
            dot_iq1_s_group = dot_iq1_s(BlockIq1S, BlockQ8K);
            dot_iq1_m_group = dot_iq1_m(BlockIq1M, BlockQ8K);
        }
        one_weight_row_at_a_time! {
            dot_f32_pair = dot_f32(u8, f32);
            dot_f16_pair = dot_f16(u8, F16Activation);
            dot_bf16_pair = dot_bf16(u8, BF16Activation);
            dot_q8_0_pair = dot_q8_0(BlockQ8_0, Q8_0Activation);
            dot_q4_0_pair = dot_q4_0(BlockQ4_0, Q8_0Activation);
            dot_q5_0_pair = dot_q5_0(BlockQ5_0, Q8_0Activation);
            dot_q4_1_pair = dot_q4_1(BlockQ4_1, BlockQ8_1);
            dot_q5_1_pair = dot_q5_1(BlockQ5_1, BlockQ8_1);
            dot_iq4_nl_pair = dot_iq4_nl(BlockIq4Nl, Q8_0Activation);
        }
    };
}

/// WebAssembly SIMD128, with or without relaxed SIMD: every slot.
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
pub(super) mod active {
    /// Widened activation scales, and for relaxed SIMD's Q4_0 and Q5_0 dots per-block sums.
    pub(in crate::tensor) use super::super::simd128::{Q8_0Extra, q8_0_extra};
    pub(in crate::tensor) use super::super::simd128::{any_non_finite_f16, sum_words};
    pub(in crate::tensor) use super::super::simd128::{
        dot_bf16, dot_bf16_group, dot_f16, dot_f16_group, dot_f32, dot_f32_group, dot_iq4_nl,
        dot_iq4_nl_group, dot_iq4_xs, dot_iq4_xs_group, dot_q2_k, dot_q2_k_group, dot_q3_k, dot_q3_k_group,
        dot_q4_0, dot_q4_0_group, dot_q4_1, dot_q4_1_group, dot_q4_k, dot_q4_k_group, dot_q5_0,
        dot_q5_0_group, dot_q5_1, dot_q5_1_group, dot_q5_k, dot_q5_k_group, dot_q6_k, dot_q6_k_group,
        dot_q8_0, dot_q8_0_group,
    };
    pub(in crate::tensor) use super::super::simd128::{
        dot_bf16_pair, dot_f16_pair, dot_f32_pair, dot_iq4_nl_pair, dot_q4_0_pair, dot_q4_1_pair,
        dot_q5_0_pair, dot_q5_1_pair, dot_q8_0_pair,
    };
    pub(in crate::tensor) use super::super::simd128::{
        dot_iq1_m, dot_iq1_m_group, dot_iq1_s, dot_iq1_s_group, dot_iq2_s, dot_iq2_s_group, dot_iq2_xs,
        dot_iq2_xs_group, dot_iq2_xxs, dot_iq2_xxs_group, dot_iq3_s, dot_iq3_s_group, dot_iq3_xxs,
        dot_iq3_xxs_group,
    };
    pub(in crate::tensor) use super::super::simd128::{
        dot_kv_row, dot_kv_row_heads, mad_kv_row_rounded, mad_kv_row_rounded_heads, scale_rounded_to_f16,
        widen_kv_row,
    };
}

/// Native x86-64 with AVX2 and FMA: ggml's own AVX2 sums for the 32-element formats.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
pub(super) mod active {
    pub(in crate::tensor) use super::super::avx2::{dot_q4_0, dot_q4_1, dot_q5_0, dot_q8_0};
    pub(in crate::tensor) use super::scalar::{Q8_0Extra, q8_0_extra};
    pub(in crate::tensor) use super::scalar::{
        any_non_finite_f16, dot_bf16, dot_f16, dot_f32, dot_iq4_nl, dot_iq4_xs, dot_q2_k, dot_q3_k, dot_q4_k,
        dot_q5_1, dot_q5_k, dot_q6_k, sum_words,
    };
    pub(in crate::tensor) use super::scalar::{
        dot_iq1_m, dot_iq1_s, dot_iq2_s, dot_iq2_xs, dot_iq2_xxs, dot_iq3_s, dot_iq3_xxs,
    };
    pub(in crate::tensor) use super::scalar::{
        dot_kv_row, dot_kv_row_heads, mad_kv_row_rounded, mad_kv_row_rounded_heads, scale_rounded_to_f16,
        widen_kv_row,
    };
    single_row_groups!();
}

/// Everything else: the scalar reference.
#[cfg(not(any(
    all(target_family = "wasm", target_feature = "simd128"),
    all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma")
)))]
pub(super) mod active {
    pub(in crate::tensor) use super::scalar::*;
    single_row_groups!();
}
