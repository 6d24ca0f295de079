//! Tensor kernels: ggml's block formats, dequantization, activation quantization, dot products
//! and a batched matrix-vector product.
//!
//! The numbers follow llama.cpp's CPU backend. Before an integer dot product, ggml quantizes the
//! activation vector with the weight type's `vec_dot_type` (Q8_0, Q8_1 or Q8_K; F16/BF16 for half
//! weights), then runs a per-block integer sum and a float multiply-add per block. The scalar code
//! keeps ggml's summing order (for the 32-element formats, the lane order of its AVX2 kernels,
//! which is what llama.cpp runs on x86; for the others, its `*_generic` order), so results agree
//! with llama.cpp to the last bits; `avx2` runs those same sums with intrinsics in native x86-64
//! builds and is tested for exact equality. The WebAssembly SIMD128 kernels (`simd128`)
//! reorder only the float sums of the dots and agree to within a few ulps; attention's KV-row
//! kernels give the scalar bits exactly. Which kernel serves each format on each instruction
//! set, and what falls back to what, is one table: `kernels.rs`. Natively, where llama.cpp's
//! x86 backend sums some matrices in other orders (repacked, tiled), `llama_order.rs` holds
//! those orders; wasm builds leave them out.
//!
//! Weights arrive as `&[u8]` views into the model file, at any alignment. Block structs are
//! `#[repr(C)]` with alignment 1 (f16 fields are stored as bytes), so a byte slice is viewed as
//! a slice of blocks without copying (see [`cast_blocks`]).
//!
//! Entry points: [`matmul`] / [`matmul_quantized`] for projections ([`matmul_quantized_with_layout`]
//! for a matrix whose [`WeightLayout`] the caller decided), [`vec_dot`] for one row,
//! [`dequantize_row`] for embeddings and tests; [`QuantizedActivations`] holds activations in
//! the right format for a weight type. Errors are [`TensorError`]s, never panics.
//!
//! Self-contained: this module uses nothing outside `crate::tensor` except the `half` crate and
//! [`crate::parallel`], which hands ranges of a matmul's weight rows to threads.

mod activations;
mod blocks;
mod error;
mod format;
mod kernels;
pub mod kv_rows;
// The scalar kernels are the reference: in a SIMD128 build, where the table has its own kernel
// for every slot, only the kernel checks call them.
mod float;
mod iq_grids;
mod iq_lattice;
mod iquants;
mod kquants;
mod legacy;
#[cfg(not(target_family = "wasm"))]
mod llama_order;
mod matmul;

#[cfg(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "fma"))]
mod avx2;
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
mod simd128;
/// The SIMD128 intrinsics, under the name of whichever wasm the build targets (wasm64 is the
/// 64-bit-memory build for files over 4 GiB; its module re-exports the same intrinsics).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use core::arch::wasm32 as wasm_simd;
#[cfg(all(target_arch = "wasm64", target_feature = "simd128"))]
use core::arch::wasm64 as wasm_simd;

/// Every kernel against its scalar reference, for the tests (native, and tests/web/ in the browsers).
#[doc(hidden)]
pub mod kernel_checks;

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod test_support;

pub use activations::{
    ActivationData, ActivationFormat, ActivationType, BF16Activation, F16Activation, Q8_0Activation,
    QuantizedActivations, quantize_q8_0,
};
pub use blocks::{
    BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4Nl, BlockIq4Xs,
    BlockMxfp4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, BlockQ8_1, BlockQ8K, F16Le, PlainBytes, QK, QK_K, cast_blocks,
};
pub use error::TensorError;
pub use float::{
    first_non_finite_f16, fma, ggml_expf, read_checksum, reduce_accumulators, sum_lanes, table_over_f16,
};

/// `x[i] = ggml_expf(x[i] - max)`, four at a time where the build has SIMD128 (the same bits).
pub fn exp_shifted(x: &mut [f32], max: f32) {
    kernels::active::exp_shifted(x, max)
}
pub use format::{Dot, QuantFormat, WeightType, dequantize_row, vec_dot};
pub use legacy::clamp_q8_0_quants;
pub use matmul::{
    MatmulOperand, WeightLayout, matmul, matmul_groups, matmul_many, matmul_quantized,
    matmul_quantized_with_layout,
};

/// Mamba-2's scan of one state row of `s.len()` values: `s = s·decay + b·x_dt` each, returning
/// `Σ s·c` in ggml's AVX2 summing order (`float.rs`'s scalar reference; SIMD128 in the browser,
/// with the same bits).
pub fn scan_row(s: &mut [f32], b: &[f32], c: &[f32], decay: f32, x_dt: f32) -> f32 {
    kernels::active::scan_state_row(s, b, c, decay, x_dt)
}
