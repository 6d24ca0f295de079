//! The i-quants: IQ4_NL (32 weights per block on a non-linear table of 16 levels) and IQ4_XS
//! (the same levels, 256 weights per block with a 6-bit scale per 32), and MXFP4 (IQ4_NL's
//! layout on FP4's levels, with a power-of-two scale), with their dequantization and scalar
//! dots in the order of ggml's AVX2 kernels (which treat IQ4_NL and MXFP4 alike).

use super::activations::Q8_0Activation;
use super::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockQ8K, KVALUES_IQ4NL, KVALUES_MXFP4, QK, QK_K, e8m0_half,
    whole_blocks,
};
use super::float::fma;
use super::format::{QuantFormat, WeightType};
use super::legacy::{Lanes, hsum8};

const HALF: usize = QK / 2;

/// The 32 levels of a block in element order (low nibbles, then high) on IQ4_NL's table.
#[inline(always)]
fn levels(qs: &[u8; HALF]) -> [i8; QK] {
    levels_of(&KVALUES_IQ4NL, qs)
}

/// The 32 levels of a block on `table`.
#[inline(always)]
fn levels_of(table: &[i8; 16], qs: &[u8; HALF]) -> [i8; QK] {
    let mut x = [0i8; QK];
    let (low, high) = x.split_at_mut(HALF);
    for ((&q, l), h) in qs.iter().zip(low).zip(high) {
        *l = table[usize::from(q & 0x0F)];
        *h = table[usize::from(q >> 4)];
    }
    x
}

/// The exact integer dot of 32 levels with 32 activation quants.
#[inline(always)]
fn exact_dot(levels: &[i8; QK], activations: &[i8]) -> i32 {
    levels.iter().zip(activations).map(|(&w, &a)| i32::from(w) * i32::from(a)).sum()
}

/// A block of 32 weights as 16 bytes of 4-bit indices into a table of levels, with a scale:
/// IQ4_NL and MXFP4, which ggml's kernels treat alike.
pub(super) trait TableBlock: Copy {
    const LEVELS: [i8; 16];
    fn scale(&self) -> f32;
    fn quants(&self) -> &[u8; HALF];
}

impl TableBlock for BlockIq4Nl {
    const LEVELS: [i8; 16] = KVALUES_IQ4NL;
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
    fn quants(&self) -> &[u8; HALF] {
        &self.qs
    }
}

impl TableBlock for BlockMxfp4 {
    const LEVELS: [i8; 16] = KVALUES_MXFP4;
    fn scale(&self) -> f32 {
        e8m0_half(self.e)
    }
    fn quants(&self) -> &[u8; HALF] {
        &self.qs
    }
}

fn dequantize_table_row<B: TableBlock + super::blocks::PlainBytes>(src: &[u8], dst: &mut [f32]) {
    for (block, y) in whole_blocks::<B>(src).iter().zip(dst.chunks_exact_mut(QK)) {
        let d = block.scale();
        for (out, level) in y.iter_mut().zip(levels_of(&B::LEVELS, block.quants())) {
            *out = f32::from(level) * d;
        }
    }
}

impl QuantFormat for BlockIq4Nl {
    const TYPE: WeightType = WeightType::IQ4_NL;
    type Block = Self;
    type Activation = Q8_0Activation;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        dequantize_table_row::<Self>(src, dst);
    }
}

impl QuantFormat for BlockMxfp4 {
    const TYPE: WeightType = WeightType::MXFP4;
    type Block = Self;
    type Activation = Q8_0Activation;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        dequantize_table_row::<Self>(src, dst);
    }
}

/// ggml's `ggml_vec_dot_iq4_nl_q8_0` and `ggml_vec_dot_mxfp4_q8_0` (AVX2): blocks in pairs, the
/// even ones into one set of eight lanes and the odd ones into another (each lane a fused
/// `d_y·d × Σ` of four products), the two added lane by lane and reduced; a last unpaired block
/// is added as `d_y·d × Σ` in scalar.
pub(super) fn dot_table<B: TableBlock>(x: &[B], y: &[Q8_0Activation]) -> f32 {
    let blocks = x.len().min(y.len());
    let (mut even, mut odd) = (Lanes::default(), Lanes::default());
    for pair in 0..blocks / 2 {
        for (lanes, b) in [(&mut even, 2 * pair), (&mut odd, 2 * pair + 1)] {
            lanes.add_block(y[b].d.to_f32() * x[b].scale(), &levels_of(&B::LEVELS, x[b].quants()), &y[b].qs);
        }
    }
    let mut sum = even.plus(&odd).sum();
    if blocks % 2 == 1 {
        let b = blocks - 1;
        let exact = exact_dot(&levels_of(&B::LEVELS, x[b].quants()), &y[b].qs);
        sum += y[b].d.to_f32() * x[b].scale() * exact as f32;
    }
    sum
}

/// llama.cpp's repacked IQ4_NL and MXFP4 kernels (one template), in the order of the Q4_0 ones
/// ([`dot_q4_0_repacked`](super::legacy::dot_q4_0_repacked)): per block, the exact integer
/// `Σ level·a` fused into one f32 accumulator with `d·d_y`.
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_table_repacked<B: TableBlock>(x: &[B], y: &[Q8_0Activation]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let exact = exact_dot(&levels_of(&B::LEVELS, xb.quants()), &yb.qs);
        sum = fma(exact as f32, xb.scale() * yb.d.to_f32(), sum);
    }
    sum
}

impl QuantFormat for BlockIq4Xs {
    const TYPE: WeightType = WeightType::IQ4_XS;
    type Block = Self;
    type Activation = BlockQ8K;

    fn dequantize_row(src: &[u8], dst: &mut [f32]) {
        for (block, y) in whole_blocks::<Self>(src).iter().zip(dst.chunks_exact_mut(QK_K)) {
            let d = block.d.to_f32();
            for (g, (codes, out)) in block.qs.chunks_exact(HALF).zip(y.chunks_exact_mut(QK)).enumerate() {
                let dl = d * block.group_scale(g) as f32;
                for (o, level) in out.iter_mut().zip(levels(codes.try_into().expect("16 bytes"))) {
                    *o = dl * f32::from(level);
                }
            }
        }
    }
}

/// ggml's tiled kernel (`ggml-cpu/tiled`, batches of 8+ rows) for IQ4_XS: per block, the exact
/// integer `Σ_g ls_g · Σ level·a`, times `d`, fused into the running sum with the activation
/// scale.
#[cfg_attr(target_family = "wasm", allow(dead_code))] // llama.cpp's CPU order: native checks only
pub(super) fn dot_iq4_xs_tiled(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    let mut sum = 0.0f32;
    for (xb, yb) in x.iter().zip(y) {
        let mut exact = 0i32;
        for (g, (codes, acts)) in xb.qs.chunks_exact(HALF).zip(yb.qs.chunks_exact(QK)).enumerate() {
            exact += xb.group_scale(g) * exact_dot(&levels(codes.try_into().expect("16 bytes")), acts);
        }
        sum = fma(xb.d.to_f32() * exact as f32, yb.d, sum);
    }
    sum
}

/// ggml's `ggml_vec_dot_iq4_xs_q8_K` (AVX2): per super-block, eight exact integer lanes (lane
/// `k` sums `ls_g × Σ` of elements `4k..4k+4` of every group `g`), converted and fused into
/// eight f32 lanes with `d·d_y`; the lanes are reduced once at the end.
pub(super) fn dot_iq4_xs(x: &[BlockIq4Xs], y: &[BlockQ8K]) -> f32 {
    let mut lanes = [0.0f32; 8];
    for (xb, yb) in x.iter().zip(y) {
        let mut ints = [0i32; 8];
        for (g, (codes, acts)) in xb.qs.chunks_exact(HALF).zip(yb.qs.chunks_exact(QK)).enumerate() {
            let scale = xb.group_scale(g);
            let w = levels(codes.try_into().expect("16 bytes"));
            for (k, int) in ints.iter_mut().enumerate() {
                let sum: i32 = (4 * k..4 * k + 4).map(|e| i32::from(w[e]) * i32::from(acts[e])).sum();
                *int += scale * sum;
            }
        }
        let d = xb.d.to_f32() * yb.d;
        for (lane, int) in lanes.iter_mut().zip(ints) {
            *lane = fma(d, int as f32, *lane);
        }
    }
    hsum8(&lanes)
}
