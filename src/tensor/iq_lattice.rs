//! The lattice i-quants: 256 weights per block, each run of 4 or 8 weights one entry of a fixed
//! grid of level vectors (`iq_grids.rs`), with signs and small odd sub-block scales. Here:
//! IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M, with their dequantization (bit-exact with ggml's
//! `dequantize_row_*`) and scalar dots with Q8_K activations in two orders:
//!
//! * ggml's AVX2 kernels (`ggml_vec_dot_*_q8_K`, one activation row): per block eight exact
//!   i32 lanes, lane `k` summing `scale × Σ` over elements `4k..4k+4` of every 32 (with the
//!   scale of the 16 those elements lie in, where a type has one per 16); the lanes
//!   converted and fused into eight f32 lanes with `d·d_y`, reduced once at the end and times
//!   the type's constant factor (1/8, 1/4 or 1);
//! * ggml's tiled kernel (`ggml-cpu/tiled`, 8 or more activation rows): per block the exact
//!   integer `Σ scale·level·a`, times `d` (with the factor folded in), fused into the running sum
//!   with `d_y`.
//!
//! Every block is first unpacked to its 256 signed integer levels and 16 per-16 scales
//! ([`Unpacked`]); the integer sums of both orders are exact, so they differ only in where the
//! float multiply-adds happen. IQ1_S and IQ1_M, whose levels are a ternary grid value `g` plus
//! a shift `δ = ±1/8`, unpack to the integers `8g ± 1` (as the tiled kernel stores them, `d/8`
//! scaling them); their AVX2 kernels sum the grid and the shifts apart ([`dot_iq1_s`],
//! [`dot_iq1_m`]).

use super::blocks::{
    BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockQ8K, F16Le, QK_K,
    whole_blocks,
};
use super::float::fma;
use super::format::{QuantFormat, WeightType};
use super::iq_grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use super::legacy::hsum8;

/// A block's weights as integers: `levels[e]` (grid level with its sign) and the odd scale of
/// each 16 elements, so that weight `e` is `d · factor · scales[e / 16] · levels[e]`.
pub(super) struct Unpacked {
    pub levels: [i8; QK_K],
    pub scales: [i32; QK_K / 16],
}

/// The lattice formats' common shape: how a block unpacks and the constant ggml's dots scale by.
pub(super) trait Lattice: Copy {
    /// The constant factor of the dot products (ggml's `0.125f`, `0.25f` or none).
    const FACTOR: f32;
    fn d(&self) -> F16Le;
    fn unpack(&self) -> Unpacked;
}

/// Eight values of `grid` entry `index`, with the signs of `sign_bits` (bit `j` negates value
/// `j`) applied.
#[inline(always)]
fn signed8(entry: u64, sign_bits: u8) -> [i8; 8] {
    let bytes = entry.to_le_bytes();
    std::array::from_fn(|j| {
        let level = bytes[j] as i8;
        if sign_bits & (1 << j) != 0 { -level } else { level }
    })
}

/// Two 4-level entries as one 8-level one (the first in the low bytes).
#[inline(always)]
fn pair4(low: u32, high: u32) -> u64 {
    u64::from(low) | u64::from(high) << 32
}

/// The u32 at `bytes[at..at + 4]`, little-endian.
#[inline(always)]
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

impl Lattice for BlockIq2Xxs {
    const FACTOR: f32 = 0.125;

    fn d(&self) -> F16Le {
        self.d
    }

    #[inline(always)]
    fn unpack(&self) -> Unpacked {
        let mut out = Unpacked { levels: [0; QK_K], scales: [0; QK_K / 16] };
        for (g, (levels, group)) in out.levels.chunks_exact_mut(32).zip(self.qs.chunks_exact(8)).enumerate() {
            let signs_and_scale = u32_at(group, 4);
            let scale = 2 * (signs_and_scale >> 28) as i32 + 1;
            out.scales[2 * g] = scale;
            out.scales[2 * g + 1] = scale;
            for (l, eight) in levels.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((signs_and_scale >> (7 * l)) & 127) as usize];
                eight.copy_from_slice(&signed8(IQ2XXS_GRID[usize::from(group[l])], signs));
            }
        }
        out
    }
}

/// The two odd scales of a byte holding one 4-bit scale per 16 weights (low nibble first).
#[inline(always)]
fn odd_scales(byte: u8) -> [i32; 2] {
    [2 * i32::from(byte & 0x0F) + 1, 2 * i32::from(byte >> 4) + 1]
}

impl Lattice for BlockIq2Xs {
    const FACTOR: f32 = 0.125;

    fn d(&self) -> F16Le {
        self.d
    }

    #[inline(always)]
    fn unpack(&self) -> Unpacked {
        let mut out = Unpacked { levels: [0; QK_K], scales: [0; QK_K / 16] };
        for (eight, packed) in out.levels.chunks_exact_mut(8).zip(self.qs.chunks_exact(2)) {
            let packed = u16::from_le_bytes([packed[0], packed[1]]);
            let signs = KSIGNS_IQ2XS[usize::from(packed >> 9)];
            eight.copy_from_slice(&signed8(IQ2XS_GRID[usize::from(packed & 511)], signs));
        }
        for (pair, &byte) in out.scales.chunks_exact_mut(2).zip(&self.scales) {
            pair.copy_from_slice(&odd_scales(byte));
        }
        out
    }
}

impl Lattice for BlockIq2S {
    const FACTOR: f32 = 0.125;

    fn d(&self) -> F16Le {
        self.d
    }

    #[inline(always)]
    fn unpack(&self) -> Unpacked {
        let mut out = Unpacked { levels: [0; QK_K], scales: [0; QK_K / 16] };
        for (i, eight) in out.levels.chunks_exact_mut(8).enumerate() {
            let high = (usize::from(self.qh[i / 4]) << (8 - 2 * (i % 4))) & 0x300;
            let entry = IQ2S_GRID[usize::from(self.qs[i]) | high];
            eight.copy_from_slice(&signed8(entry, self.signs[i]));
        }
        for (pair, &byte) in out.scales.chunks_exact_mut(2).zip(&self.scales) {
            pair.copy_from_slice(&odd_scales(byte));
        }
        out
    }
}

/// The 8 ternary levels of IQ1S_GRID entry `index` as `8g + δ` with `δ = delta` (±1).
#[inline(always)]
fn ternary8(index: usize, delta: i8) -> [i8; 8] {
    IQ1S_GRID[index].to_le_bytes().map(|g| 8 * (g as i8) + delta)
}

impl Lattice for BlockIq1S {
    const FACTOR: f32 = 0.125;

    fn d(&self) -> F16Le {
        self.d
    }

    #[inline(always)]
    fn unpack(&self) -> Unpacked {
        let mut out = Unpacked { levels: [0; QK_K], scales: [0; QK_K / 16] };
        for (g, levels) in out.levels.chunks_exact_mut(32).enumerate() {
            let (high, delta) = iq1_s_group(self, g);
            let scale = 2 * i32::from((high >> 12) & 7) + 1;
            out.scales[2 * g] = scale;
            out.scales[2 * g + 1] = scale;
            for (l, eight) in levels.chunks_exact_mut(8).enumerate() {
                let index = usize::from(self.qs[4 * g + l]) | usize::from((high >> (3 * l)) & 7) << 8;
                eight.copy_from_slice(&ternary8(index, delta));
            }
        }
        out
    }
}

/// Group `g`'s u16 of IQ1_S's `qh` (3 high index bits per 8, scale, shift sign) and its shift.
#[inline(always)]
fn iq1_s_group(block: &BlockIq1S, g: usize) -> (u16, i8) {
    let high = u16::from_le_bytes([block.qh[2 * g], block.qh[2 * g + 1]]);
    (high, if high & 0x8000 != 0 { -1 } else { 1 })
}

/// IQ1_M's grid index and shift sign of each 8 weights of group `g` (one nibble of `qh` each).
#[inline(always)]
fn iq1_m_indices(block: &BlockIq1M, g: usize) -> [(usize, i8); 4] {
    std::array::from_fn(|l| {
        let nibble = block.qh[2 * g + l / 2] >> (4 * (l % 2));
        let index = usize::from(block.qs[4 * g + l]) | usize::from(nibble & 7) << 8;
        (index, if nibble & 8 != 0 { -1 } else { 1 })
    })
}

/// IQ1_M's odd scales, one per 16 weights: 3 bits each, four to a u16 of `scales`.
#[inline(always)]
fn iq1_m_scales(block: &BlockIq1M) -> [i32; QK_K / 16] {
    let words = block.scale_words();
    std::array::from_fn(|i| 2 * i32::from((words[i / 4] >> (3 * (i % 4))) & 7) + 1)
}

impl Lattice for BlockIq1M {
    const FACTOR: f32 = 0.125;

    fn d(&self) -> F16Le {
        BlockIq1M::d(self)
    }

    #[inline(always)]
    fn unpack(&self) -> Unpacked {
        let mut out = Unpacked { levels: [0; QK_K], scales: iq1_m_scales(self) };
        for (g, levels) in out.levels.chunks_exact_mut(32).enumerate() {
            for (eight, (index, delta)) in levels.chunks_exact_mut(8).zip(iq1_m_indices(self, g)) {
                eight.copy_from_slice(&ternary8(index, delta));
            }
        }
        out
    }
}

impl Lattice for BlockIq3Xxs {
    const FACTOR: f32 = 0.25;

    fn d(&self) -> F16Le {
        self.d
    }

    #[inline(always)]
    fn unpack(&self) -> Unpacked {
        let mut out = Unpacked { levels: [0; QK_K], scales: [0; QK_K / 16] };
        let (indices, signs_and_scales) = self.qs.split_at(QK_K / 4);
        for (g, (levels, group)) in out.levels.chunks_exact_mut(32).zip(indices.chunks_exact(8)).enumerate() {
            let signs_and_scale = u32_at(signs_and_scales, 4 * g);
            let scale = 2 * (signs_and_scale >> 28) as i32 + 1;
            out.scales[2 * g] = scale;
            out.scales[2 * g + 1] = scale;
            for (l, eight) in levels.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((signs_and_scale >> (7 * l)) & 127) as usize];
                let entry =
                    pair4(IQ3XXS_GRID[usize::from(group[2 * l])], IQ3XXS_GRID[usize::from(group[2 * l + 1])]);
                eight.copy_from_slice(&signed8(entry, signs));
            }
        }
        out
    }
}

impl Lattice for BlockIq3S {
    const FACTOR: f32 = 1.0;

    fn d(&self) -> F16Le {
        self.d
    }

    #[inline(always)]
    fn unpack(&self) -> Unpacked {
        let mut out = Unpacked { levels: [0; QK_K], scales: [0; QK_K / 16] };
        for (g, (levels, group)) in out.levels.chunks_exact_mut(32).zip(self.qs.chunks_exact(8)).enumerate() {
            let scale = 2 * i32::from((self.scales[g / 2] >> (4 * (g % 2))) & 0x0F) + 1;
            out.scales[2 * g] = scale;
            out.scales[2 * g + 1] = scale;
            let high = usize::from(self.qh[g]);
            for (l, eight) in levels.chunks_exact_mut(8).enumerate() {
                let index = |i: usize| usize::from(group[i]) | (high << (8 - i)) & 256;
                let entry = pair4(IQ3S_GRID[index(2 * l)], IQ3S_GRID[index(2 * l + 1)]);
                eight.copy_from_slice(&signed8(entry, self.signs[4 * g + l]));
            }
        }
        out
    }
}

/// The scale ggml's dequantizers give each 16 weights of a block, in their own float order, and
/// what one unit of an unpacked level is worth (1/8 for IQ1's `8g ± 1`: `g ± 1/8` exactly).
trait DequantScale: Lattice {
    const LEVEL_UNIT: f32 = 1.0;
    fn dequant_scale(d: f32, odd_scale: i32) -> f32;
}

impl DequantScale for BlockIq1S {
    const LEVEL_UNIT: f32 = 0.125;
    // d · (2s + 1)
    fn dequant_scale(d: f32, odd_scale: i32) -> f32 {
        d * odd_scale as f32
    }
}

impl DequantScale for BlockIq1M {
    const LEVEL_UNIT: f32 = 0.125;
    fn dequant_scale(d: f32, odd_scale: i32) -> f32 {
        d * odd_scale as f32
    }
}

impl DequantScale for BlockIq2Xxs {
    // d · (0.5 + ls) · 0.25, with odd_scale = 2·ls + 1
    fn dequant_scale(d: f32, odd_scale: i32) -> f32 {
        d * (0.5 + (odd_scale / 2) as f32) * 0.25
    }
}

impl DequantScale for BlockIq2Xs {
    fn dequant_scale(d: f32, odd_scale: i32) -> f32 {
        BlockIq2Xxs::dequant_scale(d, odd_scale)
    }
}

impl DequantScale for BlockIq2S {
    fn dequant_scale(d: f32, odd_scale: i32) -> f32 {
        BlockIq2Xxs::dequant_scale(d, odd_scale)
    }
}

impl DequantScale for BlockIq3Xxs {
    // d · (0.5 + ls) · 0.5
    fn dequant_scale(d: f32, odd_scale: i32) -> f32 {
        d * (0.5 + (odd_scale / 2) as f32) * 0.5
    }
}

impl DequantScale for BlockIq3S {
    // d · (1 + 2·s)
    fn dequant_scale(d: f32, odd_scale: i32) -> f32 {
        d * odd_scale as f32
    }
}

fn dequantize_lattice<B: DequantScale + super::PlainBytes>(src: &[u8], dst: &mut [f32]) {
    for (block, y) in whole_blocks::<B>(src).iter().zip(dst.chunks_exact_mut(QK_K)) {
        let d = block.d().to_f32();
        let unpacked = block.unpack();
        for ((out, levels), &scale) in
            y.chunks_exact_mut(16).zip(unpacked.levels.chunks_exact(16)).zip(&unpacked.scales)
        {
            let db = B::dequant_scale(d, scale);
            for (o, &level) in out.iter_mut().zip(levels) {
                *o = db * (f32::from(level) * B::LEVEL_UNIT);
            }
        }
    }
}

/// ggml's AVX2 lanes of one block: lane `k` sums `scale × Σ level·a` over elements
/// `4k..4k+4` of every 32 (the first four lanes lie in a 32's first 16 elements).
#[inline(always)]
pub(super) fn avx2_lanes(unpacked: &Unpacked, activations: &[i8; QK_K]) -> [i32; 8] {
    let mut lanes = [0i32; 8];
    for (c, (levels, acts)) in unpacked.levels.chunks_exact(32).zip(activations.chunks_exact(32)).enumerate()
    {
        for (k, lane) in lanes.iter_mut().enumerate() {
            let sum: i32 = (4 * k..4 * k + 4).map(|e| i32::from(levels[e]) * i32::from(acts[e])).sum();
            *lane += unpacked.scales[2 * c + k / 4] * sum;
        }
    }
    lanes
}

/// The exact integer `Σ scale·level·a` of one block.
#[inline(always)]
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
fn exact_sum(unpacked: &Unpacked, activations: &[i8; QK_K]) -> i32 {
    let mut sum = 0i32;
    for ((levels, acts), &scale) in
        unpacked.levels.chunks_exact(16).zip(activations.chunks_exact(16)).zip(&unpacked.scales)
    {
        let raw: i32 = levels.iter().zip(acts).map(|(&w, &a)| i32::from(w) * i32::from(a)).sum();
        sum += scale * raw;
    }
    sum
}

/// ggml's AVX2 order (see the module notes).
#[inline(always)]
fn dot_avx2_order<B: Lattice>(x: &[B], y: &[BlockQ8K]) -> f32 {
    let mut lanes = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let ints = avx2_lanes(&xb.unpack(), &yb.qs);
        let d = xb.d().to_f32() * yb.d;
        for (lane, int) in lanes.iter_mut().zip(ints) {
            *lane = fma(d, int as f32, *lane);
        }
    }
    B::FACTOR * hsum8(&lanes)
}

/// ggml's tiled order (see the module notes).
#[inline(always)]
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_tiled_order<B: Lattice>(x: &[B], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let exact = exact_sum(&xb.unpack(), &yb.qs);
        sum = fma(xb.d().to_f32() * B::FACTOR * exact as f32, yb.d, sum);
    }
    sum
}

pub(super) fn dot_iq2_xxs(x: &[BlockIq2Xxs], y: &[BlockQ8K]) -> f32 {
    dot_avx2_order(x, y)
}

pub(super) fn dot_iq2_xs(x: &[BlockIq2Xs], y: &[BlockQ8K]) -> f32 {
    dot_avx2_order(x, y)
}

pub(super) fn dot_iq2_s(x: &[BlockIq2S], y: &[BlockQ8K]) -> f32 {
    dot_avx2_order(x, y)
}

/// ggml's `ggml_vec_dot_iq1_s_q8_K` (AVX2): the ternary grid values in eight exact i32 lanes
/// (scaled per 32) fused with `d·d_y` into eight f32 lanes; the shifts' sum `Σ_g ±s_g · Σ a` from
/// the Q8_K group sums, fused with `d·d_y` into one f32; at the end `hsum + (1/8) · shifts`.
pub(super) fn dot_iq1_s(x: &[BlockIq1S], y: &[BlockQ8K]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let mut shifts = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut grid = xb.unpack();
        let mut shift_sum = 0i32;
        for g in 0..8 {
            let (_, delta) = iq1_s_group(xb, g);
            let a_sum = i32::from(yb.bsums[2 * g]) + i32::from(yb.bsums[2 * g + 1]);
            shift_sum += a_sum * i32::from(delta) * grid.scales[2 * g];
            for level in &mut grid.levels[32 * g..32 * g + 32] {
                *level = (*level - delta) / 8; // back to the grid value g
            }
        }
        let ints = avx2_lanes(&grid, &yb.qs);
        let d = yb.d * xb.d.to_f32();
        for (lane, int) in lanes.iter_mut().zip(ints) {
            *lane = fma(d, int as f32, *lane);
        }
        shifts = fma(d, shift_sum as f32, shifts);
    }
    hsum8(&lanes) + 0.125 * shifts
}

/// ggml's `ggml_vec_dot_iq1_m_q8_K` (AVX2): the grid values and the shifts (±1 per 8) in two
/// sets of eight exact i32 lanes (scaled per 16), each fused with `d·d_y` into its own eight f32
/// lanes; at the end `hsum(grid) + hsum(shifts) · 1/8`, fused.
pub(super) fn dot_iq1_m(x: &[BlockIq1M], y: &[BlockQ8K]) -> f32 {
    let mut grid_lanes = [0.0f32; 8];
    let mut shift_lanes = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let mut grid = Unpacked { levels: [0; QK_K], scales: iq1_m_scales(xb) };
        let mut shifts = Unpacked { levels: [0; QK_K], scales: grid.scales };
        for g in 0..8 {
            for (l, (index, delta)) in iq1_m_indices(xb, g).into_iter().enumerate() {
                let at = 32 * g + 8 * l;
                grid.levels[at..at + 8].copy_from_slice(&IQ1S_GRID[index].to_le_bytes().map(|v| v as i8));
                shifts.levels[at..at + 8].fill(delta);
            }
        }
        let d = yb.d * xb.d().to_f32();
        for (lanes, ints) in
            [(&mut grid_lanes, avx2_lanes(&grid, &yb.qs)), (&mut shift_lanes, avx2_lanes(&shifts, &yb.qs))]
        {
            for (lane, int) in lanes.iter_mut().zip(ints) {
                *lane = fma(d, int as f32, *lane);
            }
        }
    }
    fma(hsum8(&shift_lanes), 0.125, hsum8(&grid_lanes))
}

pub(super) fn dot_iq3_xxs(x: &[BlockIq3Xxs], y: &[BlockQ8K]) -> f32 {
    dot_avx2_order(x, y)
}

pub(super) fn dot_iq3_s(x: &[BlockIq3S], y: &[BlockQ8K]) -> f32 {
    dot_avx2_order(x, y)
}

/// One `QuantFormat` impl per lattice type (its dots are tile entries in `kernels.rs`; the tiled
/// order llama.cpp takes for batches of 8 rows or more is in `llama_order.rs`).
macro_rules! lattice_format {
    ($($block:ty: $type:ident;)*) => {$(
        impl QuantFormat for $block {
            const TYPE: WeightType = WeightType::$type;
            type Block = Self;
            type Activation = BlockQ8K;

            fn dequantize_row(src: &[u8], dst: &mut [f32]) {
                dequantize_lattice::<Self>(src, dst)
            }
        }
    )*};
}

lattice_format! {
    BlockIq2Xxs: IQ2_XXS;
    BlockIq3Xxs: IQ3_XXS;
    BlockIq3S: IQ3_S;
    BlockIq2Xs: IQ2_XS;
    BlockIq2S: IQ2_S;
    BlockIq1S: IQ1_S;
    BlockIq1M: IQ1_M;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Block bytes with the f16 scale `d` and everything else from `fill`.
    fn block_bytes<B>(d: f32, fill: impl Fn(usize) -> u8) -> Vec<u8> {
        let mut bytes: Vec<u8> = (0..size_of::<B>()).map(fill).collect();
        bytes[..2].copy_from_slice(&half::f16::from_f32(d).to_le_bytes());
        bytes
    }

    #[test]
    fn iq2_xxs_hand_decoded_group() {
        // Group 0: indices 0, 1, 2, 3; sign index 1 for the first 8 (ksigns 0x81: values 0 and
        // 7 negated), 0 elsewhere; ls = 3 (odd scale 7).
        let mut bytes = block_bytes::<BlockIq2Xxs>(1.0, |_| 0);
        bytes[2..6].copy_from_slice(&[0, 1, 2, 3]);
        bytes[6..10].copy_from_slice(&(1u32 | 3 << 28).to_le_bytes());
        let block = crate::tensor::cast_blocks::<BlockIq2Xxs>(&bytes).unwrap()[0];
        let unpacked = block.unpack();
        assert_eq!(&unpacked.levels[..8], &[-8, 8, 8, 8, 8, 8, 8, -8]);
        assert_eq!(&unpacked.levels[8..16], &[43, 8, 8, 8, 8, 8, 8, 8]); // grid 1 = 0x...082b
        assert_eq!(unpacked.scales[0], 7);
        let mut out = [0f32; QK_K];
        BlockIq2Xxs::dequantize_row(&bytes, &mut out);
        assert_eq!(out[0], -8.0 * 3.5 / 4.0);
        assert_eq!(out[8], 43.0 * 3.5 / 4.0);
    }

    #[test]
    fn lattice_orders_agree_on_the_exact_sum() {
        let mut rng = crate::tensor::test_support::Rng::new(7);
        let bytes = rng.bytes(3 * size_of::<BlockIq3S>());
        let x = crate::tensor::cast_blocks::<BlockIq3S>(&bytes).unwrap();
        let y: Vec<BlockQ8K> = (0..3)
            .map(|_| {
                let mut b = BlockQ8K { d: 1.0, ..Default::default() };
                for q in b.qs.iter_mut() {
                    *q = (rng.next_u64() % 255) as i8;
                }
                b
            })
            .collect();
        for (xb, yb) in x.iter().zip(&y) {
            let unpacked = xb.unpack();
            let lanes: i32 = avx2_lanes(&unpacked, &yb.qs).iter().sum();
            assert_eq!(lanes, exact_sum(&unpacked, &yb.qs));
            let reference: i32 = (0..QK_K)
                .map(|e| unpacked.scales[e / 16] * i32::from(unpacked.levels[e]) * i32::from(yb.qs[e]))
                .sum();
            assert_eq!(lanes, reference);
        }
    }
}
