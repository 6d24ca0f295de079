//! WebAssembly SIMD128 dot products, compiled when the target has `simd128` enabled; the scalar
//! kernels are used otherwise (and remain the reference).
//!
//! The integer part of every block is computed exactly, as in the scalar code; only the order in
//! which per-block float terms are summed differs (four f32 lanes instead of one running sum), so
//! results agree with the scalar kernels to within a few ulps of `Σ|wᵢ·aᵢ|`
//! (`kernel_checks.rs` verifies that on random blocks, in headless Chromium).
//!
//! Built with `+relaxed-simd` as well (the `pkg-relaxed*` builds), the same kernels take
//! `i16x8.relaxed_dot_i8x16_i7x16_s` for every integer dot (see [`Quants16`]), which is
//! exact for 7-bit codes; float multiply-adds stay unfused (see [`mul_add4`]).

use half::f16;

use super::wasm_simd::*;

use super::activations::{BF16Activation, F16_ACTIVATION_SCALE, F16Activation, Q8_0Activation};
use super::blocks::{BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs};
use super::blocks::{
    BlockIq4Nl, BlockIq4Xs, BlockMxfp4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0,
    BlockQ5_1, BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, F16Le, KVALUES_IQ4NL, KVALUES_MXFP4, QK_K,
    e8m0_half,
};
use super::format::ROW_GROUP;
use super::iq_grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use super::iq_lattice::Lattice;

// ---------------------------------------------------------------------------------------------
// Loads and small helpers

/// f16 → f32 for every bit pattern. Wasm has no conversion instruction and the bit-twiddling
/// fallback costs more than a block's integer dot, so block scales go through a 256 KiB table,
/// as ggml does on CPUs without one.
fn f16_table() -> &'static [f32; 65536] {
    // Not `OnceLock`: see `once_cell` in Cargo.toml (helper threads race to first use here).
    static TABLE: once_cell::race::OnceBox<[f32; 65536]> = once_cell::race::OnceBox::new();
    TABLE.get_or_init(|| super::float::table_over_f16(half::f16::to_f32))
}

/// A block scale in f32, through [`f16_table`].
#[inline(always)]
fn f32_of(table: &[f32; 65536], half: F16Le) -> f32 {
    table[usize::from(u16::from_le_bytes(half.0))]
}

/// Loads the first 16 bytes of `bytes` (any alignment).
#[inline(always)]
fn load_u8(bytes: &[u8]) -> v128 {
    let bytes = &bytes[..16];
    // SAFETY: `bytes` has 16 readable bytes; wasm's v128.load has no alignment requirement.
    unsafe { v128_load(bytes.as_ptr().cast()) }
}

/// Loads the first 8 values of `values`.
#[cfg(not(target_feature = "relaxed-simd"))]
#[inline(always)]
fn load_i16(values: &[i16]) -> v128 {
    let values = &values[..8];
    // SAFETY: as in `load_u8`: 16 readable bytes, no alignment requirement.
    unsafe { v128_load(values.as_ptr().cast()) }
}

/// Loads the first 16 values of `values`.
#[inline(always)]
fn load_i8(values: &[i8]) -> v128 {
    let values = &values[..16];
    // SAFETY: as in `load_u8`: 16 readable bytes, no alignment requirement.
    unsafe { v128_load(values.as_ptr().cast()) }
}

/// Loads the first 4 values of `values`.
#[inline(always)]
fn load_f32(values: &[f32]) -> v128 {
    let values = &values[..4];
    // SAFETY: as in `load_u8`: 4 f32 are 16 readable bytes, no alignment requirement.
    unsafe { v128_load(values.as_ptr().cast()) }
}

// Integer dots of 16 weight quants with 16 activation bytes, as four i32 partial sums. The
// weight side is prepared once ([`signed_quants`] / [`unsigned_quants`]) and then dotted with
// any number of activation rows ([`dot16`]). Which lanes hold which products depends on the
// instruction set, the total never does.

/// 16 prepared weight quants. Plain SIMD128: widened to two i16x8 halves, multiplied pairwise
/// by `i32x4.dot_i16x8_s`.
#[cfg(not(target_feature = "relaxed-simd"))]
#[derive(Clone, Copy)]
struct Quants16([v128; 2]);

/// 16 prepared weight quants. Relaxed SIMD: magnitudes 0..=127, the 7-bit operand of
/// `i16x8.relaxed_dot_i8x16_i7x16_s` (deterministic in that range), and for signed quants
/// the lanes whose sign moves onto the activation (as ggml's AVX2 kernels do with `sign`).
/// No weight is -128, which has no 7-bit magnitude: loading reads a Q8_0 quant of -128 (only a
/// hostile file has one) as -127 (`clamp_q8_0_quants`), and no other format's quants reach it.
#[cfg(target_feature = "relaxed-simd")]
#[derive(Clone, Copy)]
struct Quants16 {
    magnitude: v128,
    negative: Option<v128>,
}

/// Prepares 16 signed quants.
#[inline(always)]
fn signed_quants(q: v128) -> Quants16 {
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        Quants16([i16x8_extend_low_i8x16(q), i16x8_extend_high_i8x16(q)])
    }
    #[cfg(target_feature = "relaxed-simd")]
    {
        Quants16 { magnitude: i8x16_abs(q), negative: Some(i8x16_lt(q, i8x16_splat(0))) }
    }
}

/// Prepares 16 quants in 0..=127 (4-, 5- and 6-bit codes before their offset).
#[inline(always)]
fn unsigned_quants(q: v128) -> Quants16 {
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        Quants16([i16x8_extend_low_u8x16(q), i16x8_extend_high_u8x16(q)])
    }
    #[cfg(target_feature = "relaxed-simd")]
    {
        Quants16 { magnitude: q, negative: None }
    }
}

/// Vector constants of the kernels' loops, made once per loop ([`Held::new`]) and hidden from
/// LLVM so that they stay values: V8 rebuilds a v128 constant at every use (a 64-bit
/// immediate, a move into the vector and an insert: up to four instructions), which in the Q5
/// decoding cost more than its arithmetic, and LLVM would fold them back into constants.
/// Held values stay in registers or come back from the stack in one load.
#[derive(Clone, Copy)]
pub(super) struct Held {
    /// i16 ones: relaxed SIMD widens its i16 pair sums to i32 with `i32x4.dot_i16x8_s`
    /// against them (`extadd_pairwise` and the i32 relaxed dot make the constant per use).
    #[cfg_attr(not(target_feature = "relaxed-simd"), allow(dead_code))]
    ones: v128,
    /// 0x0F in every byte: the low nibble of packed 4-bit codes.
    low_nibble: v128,
    /// Byte indices that spread bytes 0, 1 (and 2, 3) of a Q5 block's `qh` over 8 lanes each.
    spread_fifth_bits: [v128; 2],
    /// Each lane's bit within its spread byte.
    bit_of_lane: v128,
    /// 0x10 in every byte: the fifth bit of a Q5 code.
    fifth_bit: v128,
    /// 0x30 in every byte: bits 4-5, the top two bits of a 6-bit code.
    bits_45: v128,
    /// The same three masks in 16-bit lanes (0x000F, 0x0010, 0x0030): plain SIMD128's K-quant
    /// codes go straight into i16 lanes ([`KCodes16`]).
    #[cfg_attr(target_feature = "relaxed-simd", allow(dead_code))]
    wide_masks: [v128; 3],
    /// What [`k4_scales_and_mins`] keeps of each gathered byte: six bits, then a nibble.
    k4_low_bits: v128,
    /// 0x8FFF in every i16 lane: what [`widen_f16x8`] keeps of a half shifted right by 3.
    f16_upper_bits: v128,
    /// 2^112 in every f32 lane: rebiases a half's exponent to f32's.
    f16_rebias: v128,
    /// Zero: the low halves of widened bf16 values.
    zero: v128,
}

impl Held {
    #[inline(always)]
    pub(super) fn new() -> Self {
        let spread = |first: u8| {
            let (a, b) = (first, first + 1);
            u8x16(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b)
        };
        std::hint::black_box(Held {
            ones: i16x8_splat(1),
            low_nibble: u8x16_splat(0x0F),
            spread_fifth_bits: [spread(0), spread(2)],
            bit_of_lane: u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128),
            fifth_bit: u8x16_splat(0x10),
            bits_45: u8x16_splat(0x30),
            wide_masks: [u16x8_splat(0x000F), u16x8_splat(0x0010), u16x8_splat(0x0030)],
            k4_low_bits: u8x16(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15),
            f16_upper_bits: u16x8_splat(0x8FFF),
            f16_rebias: f32x4_splat(f32::from_bits(0x7780_0000)), // 2^112
            zero: u16x8_splat(0),
        })
    }
}

/// `acc` + Σ quants × activations over 16 lanes, as four i32 partial sums.
#[inline(always)]
fn dot16_add(quants: Quants16, activations: v128, acc: v128, held: Held) -> v128 {
    i32x4_add(acc, dot16(quants, activations, held))
}

/// Σ quants × activations over 16 lanes, as four i32 partial sums: lane `i` sums elements
/// `4i..4i + 4` under relaxed SIMD, and `2i, 2i + 1, 8 + 2i, 9 + 2i` in plain SIMD128 (whose
/// Q4_K, Q5_K and Q6_K dots, [`add_scaled_k_codes`], sum relaxed SIMD's lanes, and so its bits).
#[inline(always)]
fn dot16(quants: Quants16, activations: v128, held: Held) -> v128 {
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        let _ = held;
        let low = i32x4_dot_i16x8(quants.0[0], i16x8_extend_low_i8x16(activations));
        let high = i32x4_dot_i16x8(quants.0[1], i16x8_extend_high_i8x16(activations));
        i32x4_add(low, high)
    }
    #[cfg(target_feature = "relaxed-simd")]
    {
        // The sign moves by `(a ^ m) − m` (m all ones where the weight is negative): two plain
        // operations, where neg + laneselect take three on x86-64. Same bits as `i8x16.neg`,
        // wrapping included (a Q8_K activation of −128 stays −128, as ggml's `sign` leaves it).
        let activations = match quants.negative {
            Some(negative) => i8x16_sub(v128_xor(activations, negative), negative),
            None => activations,
        };
        // Byte pairs into i16 (|sum| ≤ 2·128·127, exact), then i16 pairs into i32.
        i32x4_dot_i16x8(i16x8_relaxed_dot_i8x16_i7x16(activations, quants.magnitude), held.ones)
    }
}

/// A K-quant sub-block scale, prepared for [`add_scaled_dots`]: an i16 splat for relaxed SIMD's
/// i16 dot, an i32 splat otherwise.
#[inline(always)]
fn sub_block_scale(scale: i32) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        i16x8_splat(scale as i16)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        i32x4_splat(scale)
    }
}

/// Lane `LANE` of eight i16 sub-block scales, prepared as [`sub_block_scale`] prepares one:
/// a 16-bit splat shuffle (two instructions in V8) where splatting a scalar costs a byte load,
/// a move and two shuffles.
#[inline(always)]
fn scale_lane<const LANE: usize>(scales: v128) -> v128 {
    let splat = i16x8_shuffle::<LANE, LANE, LANE, LANE, LANE, LANE, LANE, LANE>(scales, scales);
    #[cfg(target_feature = "relaxed-simd")]
    {
        splat
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        i32x4_extend_low_i16x8(splat)
    }
}

/// `acc + scale × Σ codes × activations` over N × 16 lanes, as four i32 partial sums; codes are
/// 0..=63 (K-quant codes before their offset or min), `scale` from [`sub_block_scale`].
/// Relaxed SIMD sums byte pairs into i16 lanes (`i16x8.relaxed_dot_i8x16_i7x16_s`, exact: at
/// most 2 × 63 × 128 per lane and pair, so two of them still fit) and multiplies by the scale
/// while widening (`i32x4.dot_i16x8_s`): 3 operations per 16 codes where the i32 route takes 5.
#[inline(always)]
fn add_scaled_dots<const N: usize>(
    acc: v128,
    codes: [v128; N],
    activations: [v128; N],
    scale: v128,
    held: Held,
) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        let _ = held;
        let mut pairs = i16x8_relaxed_dot_i8x16_i7x16(activations[0], codes[0]);
        for i in 1..N {
            pairs = i16x8_add(pairs, i16x8_relaxed_dot_i8x16_i7x16(activations[i], codes[i]));
        }
        i32x4_add(acc, i32x4_dot_i16x8(pairs, scale))
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        let mut sums = dot16(unsigned_quants(codes[0]), activations[0], held);
        for i in 1..N {
            sums = dot16_add(unsigned_quants(codes[i]), activations[i], sums, held);
        }
        i32x4_add(acc, i32x4_mul(sums, scale))
    }
}

/// `acc + a * b` in four f32 lanes, as a multiply and an add. Not `f32x4.relaxed_madd`: V8
/// fuses it in optimized code but not always in its baseline tier, so the same build could give
/// different bits before and after tier-up (seen as greedy answers that differ between runs).
#[inline(always)]
fn mul_add4(a: v128, b: v128, acc: v128) -> v128 {
    f32x4_add(acc, f32x4_mul(a, b))
}

/// `acc + a * b` where every product `a * b` is exact in f32, as the product of two halves is
/// (11 × 11 significant bits, inside f32's exponent range): then rounding once or twice gives
/// the same bits, so relaxed SIMD may fuse it (`f32x4.relaxed_madd`, one instruction where
/// the FMA exists) without making results depend on V8's tier. bf16 × bf16 products are exact
/// too (8 × 8 bits) unless they fall below f32's normal range, which only a hostile file's
/// weights do (then the last bit may depend on the tier; nothing else).
#[inline(always)]
fn exact_mul_add4(a: v128, b: v128, acc: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        f32x4_relaxed_madd(a, b, acc)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        mul_add4(a, b, acc)
    }
}

#[inline(always)]
fn sum_f32x4(v: v128) -> f32 {
    (f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<1>(v))
        + (f32x4_extract_lane::<2>(v) + f32x4_extract_lane::<3>(v))
}

/// `acc + scale * i32 lanes`, in f32.
#[inline(always)]
fn add_scaled(acc: v128, int_sums: v128, scale: f32) -> v128 {
    mul_add4(f32x4_convert_i32x4(int_sums), f32x4_splat(scale), acc)
}

/// `f(0)`, …, `f(N - 1)` written out rather than looped, for the tiles' loops over their weight
/// and activation rows (N ≤ [`ROW_GROUP`]). LLVM unrolls such loops only below a size it
/// guesses, and where it kept one rolled (the plain SIMD128 build's decode pairs, whose
/// widening makes the body longer) the accumulators lived in memory: those pairs ran at a
/// third of the relaxed build's speed.
#[inline(always)]
fn unrolled<const N: usize>(mut f: impl FnMut(usize)) {
    const { assert!(N <= ROW_GROUP) };
    macro_rules! calls {
        ($($i:literal)*) => {$(
            if $i < N {
                f($i);
            }
        )*};
    }
    calls!(0 1 2 3 4 5 6 7);
}

// ---------------------------------------------------------------------------------------------
// 32-element formats
//
// One loop per activation format serves a single row and a row group alike (`R` activation rows
// per weight block decoded), so a row's operations, and its bits, never depend on the group.

/// A weight block's 32 codes, prepared once for any number of activation rows.
#[derive(Clone, Copy)]
enum Weights32 {
    /// Two halves of prepared quants.
    Quants(Quants16, Quants16),
    /// Relaxed SIMD: codes 0..=31 from which `offset` is to be taken (Q4_0: 8, Q5_0: 16).
    /// Σ (c − o)·a is summed as Σ c·a − o·Σa in i16 pairs, with no sign transfer; the −o·Σa
    /// come with the activation block ([`Q8_0Extra`], made once per matmul, not once per weight
    /// row). Per i16 lane at most 4·31·128 + 16·4·128 = 24,064, inside i16; the i32 lanes cover
    /// the elements [`Quants16`]' lanes do, so the sums are those of signed quants, bit for bit.
    #[cfg(target_feature = "relaxed-simd")]
    Offset { low: v128, high: v128, offset: i8 },
    /// Signed quants as loaded (Q8_0, IQ4_NL's levels), elements 0..16 and 16..32, which the
    /// tile prepares for its row count ([`Weights32::for_rows`]). Left as they are for one
    /// activation row under relaxed SIMD: then the activation's sign moves onto the weights
    /// and its magnitude is the 7-bit operand, made once for both rows of a decode pair,
    /// which spares each weight row's absolute value and sign mask. The integer sums are the
    /// same.
    Signed(v128, v128),
}

impl Weights32 {
    /// The weights prepared for a tile of `rows` activation rows: signed quants are prepared
    /// once when several rows share them.
    #[inline(always)]
    fn for_rows(self, rows: usize) -> Self {
        match self {
            Weights32::Signed(low, high) if rows > 1 => {
                Weights32::Quants(signed_quants(low), signed_quants(high))
            }
            weights => weights,
        }
    }
}

/// Codes 0..=31 with an offset to take off each (the signed formats Q4_0 and Q5_0).
#[inline(always)]
fn offset_codes(low: v128, high: v128, offset: i8) -> Weights32 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        Weights32::Offset { low, high, offset }
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        let offset = i8x16_splat(offset);
        Weights32::Quants(signed_quants(i8x16_sub(low, offset)), signed_quants(i8x16_sub(high, offset)))
    }
}

/// What a Q8_0 activation block carries for these kernels, made once per matmul rather than
/// once per weight row:
/// - its scale widened to f32 in all four lanes (as bits, so that blocks stay `Eq`): one load
///   per block and activation row, where the f16 table took a load of the half, a lookup and a
///   broadcast (V8 does not fold the load into the multiply: one machine instruction fewer);
/// - relaxed SIMD, for the Q4_0 and Q5_0 dots: for i16 lane `j` of their dot (elements `2j`,
///   `2j + 1`, `16 + 2j` and `17 + 2j`), the sum of those 4 quants times −8 and times −16,
///   what the offset of 8 (Q4_0) or 16 (Q5_0) takes from it, at most 16·4·128 in magnitude.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Q8_0Extra {
    scale: [u32; 4],
    #[cfg(target_feature = "relaxed-simd")]
    minus_8: [i16; 8],
    #[cfg(target_feature = "relaxed-simd")]
    minus_16: [i16; 8],
}

impl Q8_0Extra {
    /// The block's scale in four f32 lanes.
    #[inline(always)]
    fn scale(&self) -> v128 {
        // SAFETY: 4 u32 are 16 readable bytes; wasm's v128.load has no alignment requirement.
        unsafe { v128_load(self.scale.as_ptr().cast()) }
    }

    /// The lanes of `−offset · Σa`, for an offset of 8 or 16.
    #[cfg(target_feature = "relaxed-simd")]
    #[inline(always)]
    fn offsets(&self, offset: i8) -> v128 {
        debug_assert!(offset == 8 || offset == 16);
        let lanes = if offset == 8 { &self.minus_8 } else { &self.minus_16 };
        // SAFETY: 8 i16 are 16 readable bytes; wasm's v128.load has no alignment requirement.
        unsafe { v128_load(lanes.as_ptr().cast()) }
    }
}

/// The [`Q8_0Extra`] of a block with scale `d` and quants `qs`.
#[cfg_attr(not(target_feature = "relaxed-simd"), allow(unused_variables))]
#[inline(always)]
pub(super) fn q8_0_extra(d: F16Le, qs: &[i8; 32]) -> Q8_0Extra {
    Q8_0Extra {
        scale: [f32_of(f16_table(), d).to_bits(); 4],
        #[cfg(target_feature = "relaxed-simd")]
        minus_8: offset_sums(qs, -8),
        #[cfg(target_feature = "relaxed-simd")]
        minus_16: offset_sums(qs, -16),
    }
}

/// Relaxed SIMD: `factor` times the sum of quants `2j`, `2j + 1`, `16 + 2j` and `17 + 2j`, for
/// each i16 lane `j`.
#[cfg(target_feature = "relaxed-simd")]
fn offset_sums(qs: &[i8; 32], factor: i16) -> [i16; 8] {
    std::array::from_fn(|j| {
        factor * [qs[2 * j], qs[2 * j + 1], qs[16 + 2 * j], qs[17 + 2 * j]].map(i16::from).iter().sum::<i16>()
    })
}

/// Σ quants × activations over a 32-element block, as four i32 partial sums.
#[inline(always)]
fn dot32([low, high]: [Quants16; 2], activations: &[i8; 32], held: Held) -> v128 {
    dot16_add(high, load_i8(&activations[16..]), dot16(low, load_i8(activations), held), held)
}

/// Σ weights × activations over a 32-element block with a Q8_0 activation block, as four i32
/// partial sums.
#[inline(always)]
fn dot32_q8_0(weights: Weights32, activations: &Q8_0Activation, held: Held) -> v128 {
    match weights {
        Weights32::Quants(low, high) => dot32([low, high], &activations.qs, held),
        #[cfg(not(target_feature = "relaxed-simd"))]
        Weights32::Signed(low, high) => {
            dot32([signed_quants(low), signed_quants(high)], &activations.qs, held)
        }
        #[cfg(target_feature = "relaxed-simd")]
        Weights32::Signed(low, high) => {
            // The activation's quants stop at −127 (our quantizer's), so every magnitude is a
            // 7-bit operand. Made here, not once per matmul: stored, they made activation
            // blocks 64 bytes longer, and the prefill loops slower on the cache misses
            // (docs/benchmarks.md, "Kernel choices").
            // The sign moves by a lane select on a whole-lane mask (exact, one `pblendvb`):
            // LLVM turns `(w ^ m) − m` with a compare's `m` into a plain select, which V8
            // expands to three operations.
            let half = |weights: v128, half: usize| {
                let activations = load_i8(&activations.qs[16 * half..]);
                let negative = i8x16_lt(activations, held.zero);
                let signed = i8x16_relaxed_laneselect(i8x16_sub(held.zero, weights), weights, negative);
                i32x4_dot_i16x8(i16x8_relaxed_dot_i8x16_i7x16(signed, i8x16_abs(activations)), held.ones)
            };
            i32x4_add(half(low, 0), half(high, 1))
        }
        #[cfg(target_feature = "relaxed-simd")]
        Weights32::Offset { low, high, offset } => {
            let qs = &activations.qs;
            let pairs = i16x8_add(
                i16x8_relaxed_dot_i8x16_i7x16(load_i8(qs), low),
                i16x8_relaxed_dot_i8x16_i7x16(load_i8(&qs[16..]), high),
            );
            i32x4_dot_i16x8(i16x8_add(pairs, activations.extra.offsets(offset)), held.ones)
        }
    }
}

/// The loop of the formats dotted with Q8_0 activations, over a tile of `W` weight rows and
/// `R` activation rows: one row (1 × 1), a row group for prefill (1 × [`ROW_GROUP`]) and a
/// weight pair for decode (2 × 1), where each activation block is loaded and its scale looked
/// up once for both weight rows. `decode` gives a weight block's prepared codes and its scale.
/// Every pair of rows gets the same operations in the same order in any tile, so its bits
/// never depend on the tile.
#[inline(always)]
fn q8_0_activation_tile<B, const W: usize, const R: usize>(
    x: [&[B]; W],
    rows: [&[Q8_0Activation]; R],
    decode: impl Fn(&B, Held) -> (Weights32, f32),
) -> [[f32; R]; W] {
    let len = shortest_row(&x).min(shortest_row(&rows));
    let (x, rows) = (x.map(|x| &x[..len]), rows.map(|row| &row[..len]));
    let held = Held::new();
    let mut acc = [[f32x4_splat(0.0); R]; W];
    // With two weight rows, LLVM loads each activation block and scale once for both.
    for b in 0..len {
        unrolled::<W>(|w| {
            let (weights, xd) = decode(&x[w][b], held);
            let weights = weights.for_rows(R);
            let xd = f32x4_splat(xd);
            unrolled::<R>(|r| {
                let yb = &rows[r][b];
                // xd · yd in each lane: the product `add_scaled` would splat, bit for bit.
                let scale = f32x4_mul(xd, yb.extra.scale());
                acc[w][r] = mul_add4(f32x4_convert_i32x4(dot32_q8_0(weights, yb, held)), scale, acc[w][r]);
            });
        });
    }
    acc.map(|acc| acc.map(sum_f32x4))
}

/// [`q8_0_activation_tile`] for the formats dotted with Q8_1 activations (a scale and a min
/// per block); `decode` gives a weight block's prepared codes, its scale and its min.
#[inline(always)]
fn q8_1_activation_tile<B, const W: usize, const R: usize>(
    x: [&[B]; W],
    rows: [&[BlockQ8_1]; R],
    decode: impl Fn(&B, Held) -> ([Quants16; 2], f32, f32),
) -> [[f32; R]; W] {
    let len = shortest_row(&x).min(shortest_row(&rows));
    let (x, rows) = (x.map(|x| &x[..len]), rows.map(|row| &row[..len]));
    let table = f16_table();
    let held = Held::new();
    let mut acc = [[f32x4_splat(0.0); R]; W];
    let mut offsets = [[0.0f32; R]; W];
    for b in 0..len {
        unrolled::<W>(|w| {
            let (weights, xd, xm) = decode(&x[w][b], held);
            unrolled::<R>(|r| {
                let yb = &rows[r][b];
                acc[w][r] = add_scaled(acc[w][r], dot32(weights, &yb.qs, held), xd * f32_of(table, yb.d));
                offsets[w][r] += xm * f32_of(table, yb.s);
            });
        });
    }
    std::array::from_fn(|w| std::array::from_fn(|r| sum_f32x4(acc[w][r]) + offsets[w][r]))
}

/// `table[indices[i]]` in each byte lane, for indices 0..=15. Relaxed SIMD's swizzle is one
/// `pshufb` on x86-64 and exact in that range; the plain one must send indices of 16 and up to
/// zero, which V8 does by a saturating add of a constant it materializes at every use.
#[inline(always)]
fn lookup16(table: v128, indices: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        i8x16_relaxed_swizzle(table, indices)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        i8x16_swizzle(table, indices)
    }
}

/// The low and high nibbles of 16 packed bytes, as two vectors of values 0..=15, with the 0x0F
/// mask held ([`Held::low_nibble`]). The high nibbles shift in 16-bit lanes: wasm's byte
/// shift is no x86 instruction, and V8 builds it from a 16-bit shift and a fresh mask.
#[inline(always)]
fn nibbles(packed: v128, low_nibble: v128) -> (v128, v128) {
    (v128_and(packed, low_nibble), v128_and(u16x8_shr(packed, 4), low_nibble))
}

/// Expands 16 bits of `bits` (bytes 0, 1 for `half` 0; bytes 2, 3 for `half` 1) to 16 bytes of
/// 0x10 (bit set) or 0.
#[inline(always)]
fn fifth_bits(bits: v128, half: usize, held: Held) -> v128 {
    let spread = lookup16(bits, held.spread_fifth_bits[half]);
    let set = i8x16_eq(v128_and(spread, held.bit_of_lane), held.bit_of_lane);
    v128_and(set, held.fifth_bit)
}

/// The 32 five-bit codes (0..=31) of a Q5_0/Q5_1 block, elements 0..16 and 16..32: nibbles
/// from `qs`, fifth bits from `qh`.
#[inline(always)]
fn q5_codes(qs: &[u8; 16], qh: [u8; 4], held: Held) -> (v128, v128) {
    let bits = u32x4_splat(u32::from_le_bytes(qh));
    let (low, high) = nibbles(load_u8(qs), held.low_nibble);
    (v128_or(low, fifth_bits(bits, 0, held)), v128_or(high, fifth_bits(bits, 1, held)))
}

#[inline(always)]
fn q8_0_tile<const W: usize, const R: usize>(
    x: [&[BlockQ8_0]; W],
    rows: [&[Q8_0Activation]; R],
) -> [[f32; R]; W] {
    let table = f16_table();
    q8_0_activation_tile(x, rows, |xb, _| {
        (Weights32::Signed(load_i8(&xb.qs), load_i8(&xb.qs[16..])), f32_of(table, xb.d))
    })
}

#[inline(always)]
fn q4_0_tile<const W: usize, const R: usize>(
    x: [&[BlockQ4_0]; W],
    rows: [&[Q8_0Activation]; R],
) -> [[f32; R]; W] {
    let table = f16_table();
    q8_0_activation_tile(x, rows, |xb, held| {
        let (low, high) = nibbles(load_u8(&xb.qs), held.low_nibble);
        (offset_codes(low, high, 8), f32_of(table, xb.d))
    })
}

#[inline(always)]
fn q5_0_tile<const W: usize, const R: usize>(
    x: [&[BlockQ5_0]; W],
    rows: [&[Q8_0Activation]; R],
) -> [[f32; R]; W] {
    let table = f16_table();
    q8_0_activation_tile(x, rows, |xb, held| {
        let (low, high) = q5_codes(&xb.qs, xb.qh, held);
        (offset_codes(low, high, 16), f32_of(table, xb.d))
    })
}

#[inline(always)]
fn q4_1_tile<const W: usize, const R: usize>(x: [&[BlockQ4_1]; W], rows: [&[BlockQ8_1]; R]) -> [[f32; R]; W] {
    let table = f16_table();
    q8_1_activation_tile(x, rows, |xb, held| {
        let (low, high) = nibbles(load_u8(&xb.qs), held.low_nibble);
        ([unsigned_quants(low), unsigned_quants(high)], f32_of(table, xb.d), f32_of(table, xb.m))
    })
}

#[inline(always)]
fn q5_1_tile<const W: usize, const R: usize>(x: [&[BlockQ5_1]; W], rows: [&[BlockQ8_1]; R]) -> [[f32; R]; W] {
    let table = f16_table();
    q8_1_activation_tile(x, rows, |xb, held| {
        let (low, high) = q5_codes(&xb.qs, xb.qh, held);
        ([unsigned_quants(low), unsigned_quants(high)], f32_of(table, xb.d), f32_of(table, xb.m))
    })
}

#[inline(always)]
fn iq4_nl_tile<const W: usize, const R: usize>(
    x: [&[BlockIq4Nl]; W],
    rows: [&[Q8_0Activation]; R],
) -> [[f32; R]; W] {
    let table = f16_table();
    let levels = load_i8(&KVALUES_IQ4NL);
    q8_0_activation_tile(x, rows, |xb, held| {
        let (low, high) = nibbles(load_u8(&xb.qs), held.low_nibble);
        (Weights32::Signed(lookup16(levels, low), lookup16(levels, high)), f32_of(table, xb.d))
    })
}

#[inline(always)]
fn mxfp4_tile<const W: usize, const R: usize>(
    x: [&[BlockMxfp4]; W],
    rows: [&[Q8_0Activation]; R],
) -> [[f32; R]; W] {
    let levels = load_i8(&KVALUES_MXFP4);
    q8_0_activation_tile(x, rows, |xb, held| {
        let (low, high) = nibbles(load_u8(&xb.qs), held.low_nibble);
        (Weights32::Signed(lookup16(levels, low), lookup16(levels, high)), e8m0_half(xb.e))
    })
}

/// Half a row group.
const HALF_GROUP: usize = ROW_GROUP / 2;

/// A row group taken as two tiles of [`HALF_GROUP`] rows. Decoding a weight block once for
/// all [`ROW_GROUP`] rows pays where decoding is dear (Q5_0, the K-quants: 6-18 % fewer
/// instructions per block and row); where it is cheap, the tile's accumulators spill instead
/// (docs/benchmarks.md, "Kernel choices"). A row's operations do not depend on its tile, so neither do its bits.
#[inline(always)]
fn in_halves<A>(
    rows: [&[A]; ROW_GROUP],
    tile: impl Fn([&[A]; HALF_GROUP]) -> [f32; HALF_GROUP],
) -> [f32; ROW_GROUP] {
    let first = tile(std::array::from_fn(|i| rows[i]));
    let second = tile(std::array::from_fn(|i| rows[HALF_GROUP + i]));
    std::array::from_fn(|i| if i < HALF_GROUP { first[i] } else { second[i - HALF_GROUP] })
}

/// The table entries of a format with a rows loop: one row, and a row group (in one loop of
/// [`ROW_GROUP`] rows, `whole`, or [`in_halves`]).
macro_rules! single_and_group {
    ($($rows:ident($group_rows:ident): $single:ident, $group:ident ($block:ty, $activation:ty);)*) => {$(
        pub(super) fn $single(x: &[$block], y: &[$activation]) -> f32 {
            let [sum] = $rows(x, [y]);
            sum
        }

        pub(super) fn $group(x: &[$block], rows: [&[$activation]; ROW_GROUP]) -> [f32; ROW_GROUP] {
            group_rows!($group_rows, $rows, x, rows)
        }
    )*};
}

/// A row group through a rows loop: `whole` or `halves`.
macro_rules! group_rows {
    (whole, $rows:ident, $x:ident, $group:ident) => {
        $rows($x, $group)
    };
    (halves, $rows:ident, $x:ident, $group:ident) => {
        in_halves($group, |rows| $rows($x, rows))
    };
}

/// The table entries of a format with a tile loop: one row, a row group (in one tile, or
/// [`in_halves`]), and a weight pair.
macro_rules! single_group_and_pair {
    ($($tile:ident($group_tile:ident): $single:ident, $group:ident, $pair:ident ($block:ty, $activation:ty);)*) => {$(
        pub(super) fn $single(x: &[$block], y: &[$activation]) -> f32 {
            let [[sum]] = $tile([x], [y]);
            sum
        }

        pub(super) fn $group(x: &[$block], rows: [&[$activation]; ROW_GROUP]) -> [f32; ROW_GROUP] {
            group_tile!($group_tile, $tile, x, rows)
        }

        pub(super) fn $pair(x: [&[$block]; 2], y: &[$activation]) -> [f32; 2] {
            $tile(x, [y]).map(|[sum]| sum)
        }
    )*};
}

/// A row group through `tile`: `whole` in one tile of [`ROW_GROUP`] rows, or `halves`.
macro_rules! group_tile {
    (whole, $tile:ident, $x:ident, $rows:ident) => {{
        let [sums] = $tile([$x], $rows);
        sums
    }};
    (halves, $tile:ident, $x:ident, $rows:ident) => {
        in_halves($rows, |rows| {
            let [sums] = $tile([$x], rows);
            sums
        })
    };
}

single_group_and_pair! {
    q8_0_tile(halves): dot_q8_0, dot_q8_0_group, dot_q8_0_pair(BlockQ8_0, Q8_0Activation);
    q4_0_tile(halves): dot_q4_0, dot_q4_0_group, dot_q4_0_pair(BlockQ4_0, Q8_0Activation);
    q5_0_tile(whole): dot_q5_0, dot_q5_0_group, dot_q5_0_pair(BlockQ5_0, Q8_0Activation);
    q4_1_tile(halves): dot_q4_1, dot_q4_1_group, dot_q4_1_pair(BlockQ4_1, BlockQ8_1);
    q5_1_tile(halves): dot_q5_1, dot_q5_1_group, dot_q5_1_pair(BlockQ5_1, BlockQ8_1);
    iq4_nl_tile(halves): dot_iq4_nl, dot_iq4_nl_group, dot_iq4_nl_pair(BlockIq4Nl, Q8_0Activation);
    mxfp4_tile(halves): dot_mxfp4, dot_mxfp4_group, dot_mxfp4_pair(BlockMxfp4, Q8_0Activation);
}

/// IQ4_XS: per super-block, each group's levels (as IQ4_NL's) dotted with its 32 activations,
/// times the group's 6-bit scale, summed exactly in i32 lanes, then scaled once by `d·d_y`.
#[inline(always)]
fn iq4_xs_rows<const R: usize>(x: &[BlockIq4Xs], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    let x = &x[..x.len().min(shortest_row(&rows))];
    let table = f16_table();
    let levels = load_i8(&KVALUES_IQ4NL);
    let held = Held::new();
    let mut acc = [f32x4_splat(0.0); R];
    for (b, xb) in x.iter().enumerate() {
        let mut ints = [i32x4_splat(0); R];
        for (g, codes) in xb.qs.chunks_exact(16).enumerate() {
            let (low, high) = nibbles(load_u8(codes), held.low_nibble);
            let weights = [signed_quants(lookup16(levels, low)), signed_quants(lookup16(levels, high))];
            let scale = i32x4_splat(xb.group_scale(g));
            unrolled::<R>(|r| {
                let activations: &[i8; 32] =
                    rows[r][b].qs[32 * g..32 * g + 32].try_into().expect("32 activations");
                ints[r] = i32x4_add(ints[r], i32x4_mul(dot32(weights, activations, held), scale));
            });
        }
        let xd = f32_of(table, xb.d);
        for ((lane, int), row) in acc.iter_mut().zip(ints).zip(rows) {
            *lane = add_scaled(*lane, int, xd * row[b].d);
        }
    }
    acc.map(sum_f32x4)
}

single_and_group! {
    iq4_xs_rows(halves): dot_iq4_xs, dot_iq4_xs_group(BlockIq4Xs, BlockQ8K);
}

// ---------------------------------------------------------------------------------------------
// Lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M)
//
// Per 32 weights: four grid entries of 8 levels (or eight of 4) loaded as two vectors, the
// sign bits spread into lane masks, the dot of each 16 with the activations exact in i32
// lanes times its odd scale; per block one f32 multiply-add with `d·d_y`, and the type's
// constant factor once at the end. IQ1_S/IQ1_M levels are taken as `8g ± 1` (factor 1/8).

/// 16 bytes of 0xFF where bit `j % 8` of `low` (lanes 0..8) or `high` (lanes 8..16) is set.
#[inline(always)]
fn sign_mask(low: u8, high: u8) -> v128 {
    const SPREAD: u64 = 0x0101_0101_0101_0101;
    let bits = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    let spread = u64x2(u64::from(low) * SPREAD, u64::from(high) * SPREAD);
    i8x16_eq(v128_and(spread, bits), bits)
}

/// 16 grid levels (0..=127) with the lanes of `negative` negated, prepared for [`dot16`].
#[inline(always)]
fn lattice_quants(levels: v128, negative: v128) -> Quants16 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        Quants16 { magnitude: levels, negative: Some(negative) }
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        signed_quants(i8x16_sub(v128_xor(levels, negative), negative))
    }
}

/// 32 weights from four 8-level grid entries and four sign bytes, as two halves of 16.
#[inline(always)]
fn lattice32(entries: [u64; 4], signs: [u8; 4]) -> [Quants16; 2] {
    [
        lattice_quants(u64x2(entries[0], entries[1]), sign_mask(signs[0], signs[1])),
        lattice_quants(u64x2(entries[2], entries[3]), sign_mask(signs[2], signs[3])),
    ]
}

/// The four sign bytes of a group whose u32 holds four 7-bit indices into `KSIGNS_IQ2XS`.
#[inline(always)]
fn ksigns4(packed: u32) -> [u8; 4] {
    std::array::from_fn(|l| KSIGNS_IQ2XS[((packed >> (7 * l)) & 127) as usize])
}

#[inline(always)]
fn u32_le(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// The rows loop of the lattice formats; `decode(block, g)` gives group `g`'s 32 weights and
/// the odd scales of its two halves.
#[inline(always)]
fn lattice_rows<B: Lattice, const R: usize>(
    x: &[B],
    rows: [&[BlockQ8K]; R],
    decode: impl Fn(&B, usize) -> ([Quants16; 2], [i32; 2]),
) -> [f32; R] {
    let x = &x[..x.len().min(shortest_row(&rows))];
    let table = f16_table();
    let held = Held::new();
    let mut acc = [f32x4_splat(0.0); R];
    for (b, xb) in x.iter().enumerate() {
        let mut ints = [i32x4_splat(0); R];
        for g in 0..8 {
            let ([low, high], [low_scale, high_scale]) = decode(xb, g);
            unrolled::<R>(|r| {
                let activations = &rows[r][b].qs[32 * g..][..32];
                let (a_low, a_high) = (load_i8(activations), load_i8(&activations[16..]));
                ints[r] = if low_scale == high_scale {
                    let sums = dot16_add(high, a_high, dot16(low, a_low, held), held);
                    i32x4_add(ints[r], i32x4_mul(sums, i32x4_splat(low_scale)))
                } else {
                    let low_sums = i32x4_mul(dot16(low, a_low, held), i32x4_splat(low_scale));
                    let high_sums = i32x4_mul(dot16(high, a_high, held), i32x4_splat(high_scale));
                    i32x4_add(ints[r], i32x4_add(low_sums, high_sums))
                };
            });
        }
        let xd = f32_of(table, xb.d());
        for ((lane, int), row) in acc.iter_mut().zip(ints).zip(rows) {
            *lane = add_scaled(*lane, int, xd * row[b].d);
        }
    }
    acc.map(|lanes| B::FACTOR * sum_f32x4(lanes))
}

#[inline(always)]
fn iq2_xxs_rows<const R: usize>(x: &[BlockIq2Xxs], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    lattice_rows(x, rows, |xb, g| {
        let group = &xb.qs[8 * g..][..8];
        let packed = u32_le(&group[4..]);
        let entries = std::array::from_fn(|l| IQ2XXS_GRID[usize::from(group[l])]);
        (lattice32(entries, ksigns4(packed)), [2 * (packed >> 28) as i32 + 1; 2])
    })
}

#[inline(always)]
fn iq2_xs_rows<const R: usize>(x: &[BlockIq2Xs], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    lattice_rows(x, rows, |xb, g| {
        let packed: [u16; 4] =
            std::array::from_fn(|l| u16::from_le_bytes([xb.qs[8 * g + 2 * l], xb.qs[8 * g + 2 * l + 1]]));
        let entries = packed.map(|p| IQ2XS_GRID[usize::from(p & 511)]);
        let signs = packed.map(|p| KSIGNS_IQ2XS[usize::from(p >> 9)]);
        let byte = xb.scales[g];
        (lattice32(entries, signs), [2 * i32::from(byte & 0x0F) + 1, 2 * i32::from(byte >> 4) + 1])
    })
}

#[inline(always)]
fn iq2_s_rows<const R: usize>(x: &[BlockIq2S], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    lattice_rows(x, rows, |xb, g| {
        let high = usize::from(xb.qh[g]);
        let entries =
            std::array::from_fn(|l| IQ2S_GRID[usize::from(xb.qs[4 * g + l]) | (high << (8 - 2 * l)) & 0x300]);
        let signs = std::array::from_fn(|l| xb.signs[4 * g + l]);
        let byte = xb.scales[g];
        (lattice32(entries, signs), [2 * i32::from(byte & 0x0F) + 1, 2 * i32::from(byte >> 4) + 1])
    })
}

#[inline(always)]
fn iq3_xxs_rows<const R: usize>(x: &[BlockIq3Xxs], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    lattice_rows(x, rows, |xb, g| {
        let indices = &xb.qs[8 * g..][..8];
        let packed = u32_le(&xb.qs[64 + 4 * g..]);
        let entries = std::array::from_fn(|l| {
            let (low, high) =
                (IQ3XXS_GRID[usize::from(indices[2 * l])], IQ3XXS_GRID[usize::from(indices[2 * l + 1])]);
            u64::from(low) | u64::from(high) << 32
        });
        (lattice32(entries, ksigns4(packed)), [2 * (packed >> 28) as i32 + 1; 2])
    })
}

#[inline(always)]
fn iq3_s_rows<const R: usize>(x: &[BlockIq3S], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    lattice_rows(x, rows, |xb, g| {
        let indices = &xb.qs[8 * g..][..8];
        let high = usize::from(xb.qh[g]);
        let index = |i: usize| usize::from(indices[i]) | (high << (8 - i)) & 256;
        let entries = std::array::from_fn(|l| {
            u64::from(IQ3S_GRID[index(2 * l)]) | u64::from(IQ3S_GRID[index(2 * l + 1)]) << 32
        });
        let signs = std::array::from_fn(|l| xb.signs[4 * g + l]);
        let scale = 2 * i32::from((xb.scales[g / 2] >> (4 * (g % 2))) & 0x0F) + 1;
        (lattice32(entries, signs), [scale; 2])
    })
}

/// 16 IQ1 levels `8g + δ` from two ternary grid entries and their shifts (±1).
#[inline(always)]
fn ternary16(entries: [u64; 2], deltas: [i8; 2]) -> Quants16 {
    let spread = |delta: i8| u64::from_le_bytes([delta as u8; 8]);
    let grid = u64x2(entries[0], entries[1]);
    signed_quants(i8x16_add(i8x16_shl(grid, 3), u64x2(spread(deltas[0]), spread(deltas[1]))))
}

#[inline(always)]
fn iq1_s_rows<const R: usize>(x: &[BlockIq1S], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    lattice_rows(x, rows, |xb, g| {
        let high = u16::from_le_bytes([xb.qh[2 * g], xb.qh[2 * g + 1]]);
        let delta = if high & 0x8000 != 0 { -1 } else { 1 };
        let entries: [u64; 4] = std::array::from_fn(|l| {
            IQ1S_GRID[usize::from(xb.qs[4 * g + l]) | usize::from((high >> (3 * l)) & 7) << 8]
        });
        let halves = [
            ternary16([entries[0], entries[1]], [delta; 2]),
            ternary16([entries[2], entries[3]], [delta; 2]),
        ];
        (halves, [2 * i32::from((high >> 12) & 7) + 1; 2])
    })
}

#[inline(always)]
fn iq1_m_rows<const R: usize>(x: &[BlockIq1M], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    lattice_rows(x, rows, |xb, g| {
        let words = xb.scale_words();
        let word = words[g / 2] >> (6 * (g % 2));
        let nibbles: [u8; 4] = std::array::from_fn(|l| xb.qh[2 * g + l / 2] >> (4 * (l % 2)));
        let entries: [u64; 4] = std::array::from_fn(|l| {
            IQ1S_GRID[usize::from(xb.qs[4 * g + l]) | usize::from(nibbles[l] & 7) << 8]
        });
        let deltas: [i8; 4] = nibbles.map(|n| if n & 8 != 0 { -1 } else { 1 });
        let halves = [
            ternary16([entries[0], entries[1]], [deltas[0], deltas[1]]),
            ternary16([entries[2], entries[3]], [deltas[2], deltas[3]]),
        ];
        (halves, [2 * i32::from(word & 7) + 1, 2 * i32::from((word >> 3) & 7) + 1])
    })
}

single_and_group! {
    iq2_xxs_rows(halves): dot_iq2_xxs, dot_iq2_xxs_group(BlockIq2Xxs, BlockQ8K);
    iq3_xxs_rows(halves): dot_iq3_xxs, dot_iq3_xxs_group(BlockIq3Xxs, BlockQ8K);
    iq3_s_rows(halves): dot_iq3_s, dot_iq3_s_group(BlockIq3S, BlockQ8K);
    iq2_xs_rows(halves): dot_iq2_xs, dot_iq2_xs_group(BlockIq2Xs, BlockQ8K);
    iq2_s_rows(halves): dot_iq2_s, dot_iq2_s_group(BlockIq2S, BlockQ8K);
    iq1_s_rows(halves): dot_iq1_s, dot_iq1_s_group(BlockIq1S, BlockQ8K);
    iq1_m_rows(halves): dot_iq1_m, dot_iq1_m_group(BlockIq1M, BlockQ8K);
}

// ---------------------------------------------------------------------------------------------
// K-quants

// Codes meet activations in each instruction set's own way. Relaxed SIMD multiplies bytes
// (`i16x8.relaxed_dot_i8x16_i7x16_s`): codes stay 16 bytes per vector and the activations are
// Q8_K's quants as they are. Plain SIMD128 multiplies i16 (`i32x4.dot_i16x8_s`): rather than
// widen both sides per weight row, the activations are widened once per matmul ([`Q8KWide`]) in
// the order that packed codes fall into 16-bit lanes, and the codes are shifted and masked
// straight into i16 lanes. Q4_K, Q5_K and Q6_K take this route; Q2_K and Q3_K keep widening
// both sides (`add_scaled_dots`).

/// What a Q8_K activation block carries for plain SIMD128's kernels: its quants widened to i16,
/// each 16 as their 8 even-indexed then their 8 odd-indexed elements. A 16-bit lane of packed
/// codes holds two neighbouring elements' bytes; a mask gives the even one's code and a shift
/// the odd one's, each in the lane where [`add_scaled_k_codes`] finds its activation.
#[cfg(not(target_feature = "relaxed-simd"))]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Q8KWide([i16; QK_K]);

#[cfg(not(target_feature = "relaxed-simd"))]
impl Default for Q8KWide {
    fn default() -> Self {
        Q8KWide([0; QK_K])
    }
}

/// Relaxed SIMD's byte dots take Q8_K's quants as they are: nothing more to carry.
#[cfg(target_feature = "relaxed-simd")]
pub(super) type Q8KWide = ();

/// The [`Q8KWide`] of a block's quants.
#[cfg(not(target_feature = "relaxed-simd"))]
pub(super) fn q8_k_wide(qs: &[i8; QK_K]) -> Q8KWide {
    let mut wide = Q8KWide::default();
    for (quants, out) in qs.chunks_exact(16).zip(wide.0.chunks_exact_mut(16)) {
        let q = load_i8(quants);
        let split = i8x16_shuffle::<0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15>(q, q);
        // SAFETY: `out` holds 16 i16, 32 writable bytes; no alignment requirement.
        unsafe {
            v128_store(out.as_mut_ptr().cast(), i16x8_extend_low_i8x16(split));
            v128_store(out.as_mut_ptr().add(8).cast(), i16x8_extend_high_i8x16(split));
        }
    }
    wide
}

/// The [`Q8KWide`] of a block's quants: nothing.
#[cfg(target_feature = "relaxed-simd")]
pub(super) fn q8_k_wide(_qs: &[i8; QK_K]) -> Q8KWide {}

/// 16 K-quant codes (0..=63, before any offset or min) as the instruction set's dots take them:
/// relaxed SIMD, one byte each; plain SIMD128, two i16 vectors, the even-indexed codes and the
/// odd-indexed ones (the order of [`Q8KWide`]).
#[cfg(target_feature = "relaxed-simd")]
type KCodes16 = v128;
#[cfg(not(target_feature = "relaxed-simd"))]
type KCodes16 = [v128; 2];

/// The low and high nibbles of 16 packed bytes as [`KCodes16`]: 16 elements of two groups.
#[inline(always)]
fn nibble_codes(packed: v128, held: Held) -> (KCodes16, KCodes16) {
    #[cfg(target_feature = "relaxed-simd")]
    {
        nibbles(packed, held.low_nibble)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        let [low_nibble, ..] = held.wide_masks;
        let low = [v128_and(packed, low_nibble), v128_and(u16x8_shr(packed, 8), low_nibble)];
        let high = [v128_and(u16x8_shr(packed, 4), low_nibble), u16x8_shr(packed, 12)];
        (low, high)
    }
}

/// Bits `from..from + width` of 16 bytes (one per element) moved to bits `4..4 + width`, the
/// rest cleared, as [`KCodes16`] to OR into codes: `width` 1 for Q5_K's fifth bit, 2 for Q6_K's
/// top two bits.
#[inline(always)]
fn moved_bits(bits: v128, from: u32, width: usize, held: Held) -> KCodes16 {
    // 16-bit shifts: once masked, the same bytes as byte shifts, without V8's byte-shift masks.
    let moved = |v: v128| if from <= 4 { i16x8_shl(v, 4 - from) } else { u16x8_shr(v, from - 4) };
    #[cfg(target_feature = "relaxed-simd")]
    {
        v128_and(moved(bits), if width == 1 { held.fifth_bit } else { held.bits_45 })
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        // An even element's bits are the low byte of its lane, an odd one's the high byte.
        let mask = held.wide_masks[width];
        [v128_and(moved(bits), mask), v128_and(u16x8_shr(bits, from + 4), mask)]
    }
}

/// Codes with more bits ORed in.
#[inline(always)]
fn or_codes(codes: KCodes16, bits: KCodes16) -> KCodes16 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        v128_or(codes, bits)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        [v128_or(codes[0], bits[0]), v128_or(codes[1], bits[1])]
    }
}

/// `acc + scale × Σ codes × activations` over the N × 16 elements of `yb` from `first`, as
/// four i32 partial sums; `scale` from [`sub_block_scale`] or [`scale_lane`].
#[inline(always)]
fn add_scaled_k_codes<const N: usize>(
    acc: v128,
    codes: [KCodes16; N],
    yb: &BlockQ8K,
    first: usize,
    scale: v128,
    held: Held,
) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        let activations = std::array::from_fn(|i| load_i8(&yb.qs[first + 16 * i..]));
        add_scaled_dots(acc, codes, activations, scale, held)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        // At most 32 · 63 · 128 per lane: exact in i32, and so is its product with the scale.
        let _ = held;
        let wide = &yb.wide.0[first..][..16 * N];
        let mut sums = i32x4_splat(0);
        for (i, [even, odd]) in codes.into_iter().enumerate() {
            let pair = i32x4_add(
                i32x4_dot_i16x8(even, load_i16(&wide[16 * i..])),
                i32x4_dot_i16x8(odd, load_i16(&wide[16 * i + 8..])),
            );
            sums = if i == 0 { pair } else { i32x4_add(sums, pair) };
        }
        i32x4_add(acc, i32x4_mul(sums, scale))
    }
}

/// `Σ bsums[j] × weights[j]` over a Q8_K block's 16 group sums, as four i32 partial sums;
/// `weights` holds 16 i16 in two vectors (K-quant mins, or Q6_K scales).
#[inline(always)]
fn bsums_dot(bsums: &[i16; 16], weights: [v128; 2]) -> v128 {
    // SAFETY: 16 i16 are 32 readable bytes; wasm's v128.load has no alignment requirement.
    let (low, high) = unsafe { (v128_load(bsums.as_ptr().cast()), v128_load(bsums.as_ptr().add(8).cast())) };
    i32x4_add(i32x4_dot_i16x8(low, weights[0]), i32x4_dot_i16x8(high, weights[1]))
}

/// The 12 packed scale bytes of a Q3_K, Q4_K or Q5_K block in lanes 0-11 of a vector (lanes
/// 12-15 zero).
#[inline(always)]
fn load_scale_bytes(packed: &[u8; 12]) -> v128 {
    let [low, high] = [&packed[..8], &packed[8..]];
    let low = u64::from_le_bytes([low[0], low[1], low[2], low[3], low[4], low[5], low[6], low[7]]);
    u64x2(low, u64::from(u32::from_le_bytes([high[0], high[1], high[2], high[3]])))
}

/// A Q4_K/Q5_K block's 8 scales and 8 mins (what `scales_and_mins_k4` gives) as i16, unpacked
/// in vectors: the scalar unpack took about 50 operations per block and row in decode. Scale j
/// (j < 4) is packed[j] & 63 and min j is packed[j + 4] & 63; scale j + 4 takes the low nibble
/// of packed[j + 8] and min j + 4 its high nibble, each with bits 6-7 of scale j's (min j's)
/// byte as bits 4-5.
#[inline(always)]
pub(super) fn k4_scales_and_mins(packed: &[u8; 12], held: Held) -> [v128; 2] {
    let bytes = load_scale_bytes(packed);
    // 16-bit shifts: each mask keeps bits that never cross a byte.
    let shifted_4 = u16x8_shr(bytes, 4);
    // Lanes 0-7 scales, 8-15 mins: low six bits, then a nibble of bytes 8-11.
    let lows = i8x16_shuffle::<0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 24, 25, 26, 27>(bytes, shifted_4);
    let lows = v128_and(lows, held.k4_low_bits);
    let tops = v128_and(u16x8_shr(bytes, 2), held.bits_45);
    let tops = i8x16_shuffle::<16, 16, 16, 16, 0, 1, 2, 3, 16, 16, 16, 16, 4, 5, 6, 7>(tops, held.zero);
    let both = v128_or(lows, tops);
    [u16x8_extend_low_u8x16(both), u16x8_extend_high_u8x16(both)]
}

/// The 8 mins of a Q4_K/Q5_K block (i16, one per 32 elements) as 16 i16, one per Q8_K bsum.
#[inline(always)]
fn mins_per_bsum(mins: v128) -> [v128; 2] {
    [i16x8_shuffle::<0, 0, 1, 1, 2, 2, 3, 3>(mins, mins), i16x8_shuffle::<4, 4, 5, 5, 6, 6, 7, 7>(mins, mins)]
}

// One loop per K-quant format serves a single row and a row group alike (`R` activation rows
// per weight block decoded), so a row's operations, and its bits, never depend on the group.
// No weight pairs for decode, unlike the 32-element formats: two rows' codes and sums spill
// registers here (slower decode: docs/benchmarks.md, "Kernel choices").

/// Q4_K and Q5_K: codes 0..=31 per 32-element sub-block with 6-bit scales and mins; `decode`
/// gives a block's codes for sub-blocks `2·pair` and `2·pair + 1`, 16 per vector.
#[inline(always)]
fn k4_rows<B: KQuant4, const R: usize>(
    x: &[B],
    rows: [&[BlockQ8K]; R],
    decode: impl Fn(&B, usize, Held) -> [[KCodes16; 2]; 2],
) -> [f32; R] {
    let (x, rows) = common_length(x, rows);
    let held = Held::new();
    let table = f16_table();
    let mut acc = [f32x4_splat(0.0); R];
    let mut mins_acc = [f32x4_splat(0.0); R];
    for (b, xb) in x.iter().enumerate() {
        let [scales, mins] = k4_scales_and_mins(xb.packed_scales(), held);
        let mins = mins_per_bsum(mins);
        let scales = [
            scale_lane::<0>(scales),
            scale_lane::<1>(scales),
            scale_lane::<2>(scales),
            scale_lane::<3>(scales),
            scale_lane::<4>(scales),
            scale_lane::<5>(scales),
            scale_lane::<6>(scales),
            scale_lane::<7>(scales),
        ];
        let mut sums = [i32x4_splat(0); R];
        let mut sub_block_pair = |pair: usize| {
            let [low, high] = decode(xb, pair, held);
            let (low_scale, high_scale) = (scales[2 * pair], scales[2 * pair + 1]);
            unrolled::<R>(|r| {
                let yb = &rows[r][b];
                let low_sums = add_scaled_k_codes(sums[r], low, yb, 64 * pair, low_scale, held);
                sums[r] = add_scaled_k_codes(low_sums, high, yb, 64 * pair + 32, high_scale, held);
            });
        };
        if R == 1 {
            // Unrolled by hand for decode: LLVM kept this a loop, whose variable shifts and
            // addresses made Q5_K decode slower (docs/benchmarks.md, "Kernel choices").
            sub_block_pair(0);
            sub_block_pair(1);
            sub_block_pair(2);
            sub_block_pair(3);
        } else {
            (0..4).for_each(sub_block_pair);
        }
        let (xd, xdmin) = (f32_of(table, xb.d()), f32_of(table, xb.dmin()));
        for r in 0..R {
            let yb = &rows[r][b];
            acc[r] = add_scaled(acc[r], sums[r], xd * yb.d);
            mins_acc[r] = add_scaled(mins_acc[r], bsums_dot(&yb.bsums, mins), xdmin * yb.d);
        }
    }
    std::array::from_fn(|r| sum_f32x4(acc[r]) - sum_f32x4(mins_acc[r]))
}

/// What [`k4_rows`] reads of a Q4_K or Q5_K block besides its codes.
trait KQuant4 {
    fn d(&self) -> F16Le;
    fn dmin(&self) -> F16Le;
    fn packed_scales(&self) -> &[u8; 12];
}

macro_rules! k_quant_4 {
    ($($block:ty),*) => {$(
        impl KQuant4 for $block {
            #[inline(always)]
            fn d(&self) -> F16Le {
                self.d
            }
            #[inline(always)]
            fn dmin(&self) -> F16Le {
                self.dmin
            }
            #[inline(always)]
            fn packed_scales(&self) -> &[u8; 12] {
                &self.scales
            }
        }
    )*};
}

k_quant_4!(BlockQ4K, BlockQ5K);

#[inline(always)]
fn q4_k_rows<const R: usize>(x: &[BlockQ4K], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    // Each 32 bytes of qs hold 64 quants: low nibbles for one 32-group, high for the next.
    k4_rows(x, rows, |xb, pair, held| {
        let packed = &xb.qs[32 * pair..][..32];
        let (low0, high0) = nibble_codes(load_u8(packed), held);
        let (low1, high1) = nibble_codes(load_u8(&packed[16..]), held);
        [[low0, low1], [high0, high1]]
    })
}

#[inline(always)]
fn q5_k_rows<const R: usize>(x: &[BlockQ5K], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    k4_rows(x, rows, |xb, pair, held| {
        let packed = &xb.qs[32 * pair..][..32];
        let high_bits = [load_u8(&xb.qh), load_u8(&xb.qh[16..])];
        // Fifth bit of element l of 32-element row r: bit r of qh[l], moved to bit 4.
        let fifth = |row: u32, piece: usize| moved_bits(high_bits[piece], row, 1, held);
        let (low_row, high_row) = (2 * pair as u32, 2 * pair as u32 + 1);
        let (low0, high0) = nibble_codes(load_u8(packed), held);
        let (low1, high1) = nibble_codes(load_u8(&packed[16..]), held);
        [
            [or_codes(low0, fifth(low_row, 0)), or_codes(low1, fifth(low_row, 1))],
            [or_codes(high0, fifth(high_row, 0)), or_codes(high1, fifth(high_row, 1))],
        ]
    })
}

/// Walks a Q6_K block's codes (0..=63, before the offset of 32) 16 at a time: `f(codes,
/// first, scale)` for elements `first..first + 16`, with their sub-block scale. Two halves of
/// 128: 64 ql bytes and 32 qh bytes each; element 32r + l of a half takes nibble r / 2 of
/// ql[l + 32 (r % 2)] and bits 2r..2r+2 of qh[l]. `unrolled` (decode) walks the block with
/// constant shifts, lanes and addresses, the scales taken from `scales` (the block's 16 as
/// i16, [`q6_k_scales`]) by lane shuffles; a row group walks it in a loop, one scalar splat per
/// scale, as there the 16 calls of `f` unrolled spilled its accumulators (prefill 2.4x slower).
#[inline(always)]
fn q6_k_codes(
    xb: &BlockQ6K,
    scales: [v128; 2],
    unrolled: bool,
    held: Held,
    mut f: impl FnMut(KCodes16, usize, v128),
) {
    if unrolled {
        // Scale 8·half + 2r + piece is lane 2r + piece of scales[half].
        let even = |s| [scale_lane::<0>(s), scale_lane::<2>(s), scale_lane::<4>(s), scale_lane::<6>(s)];
        let odd = |s| [scale_lane::<1>(s), scale_lane::<3>(s), scale_lane::<5>(s), scale_lane::<7>(s)];
        let [s0, s1] = scales;
        q6_k_quarter(xb, 0, 0, even(s0), held, &mut f);
        q6_k_quarter(xb, 0, 1, odd(s0), held, &mut f);
        q6_k_quarter(xb, 1, 0, even(s1), held, &mut f);
        q6_k_quarter(xb, 1, 1, odd(s1), held, &mut f);
    } else {
        for half in 0..2 {
            for piece in 0..2 {
                let group_scales = std::array::from_fn(|row| {
                    sub_block_scale(i32::from(xb.scales[8 * half + 2 * row + piece]))
                });
                q6_k_quarter(xb, half, piece, group_scales, held, &mut f);
            }
        }
    }
}

/// The 64 codes of a Q6_K block that share qh[16·piece..][..16] of `half`: elements
/// 128·half + 32r + 16·piece.. + 16 for r in 0..4, with their scales `group_scales[r]`.
#[inline(always)]
fn q6_k_quarter(
    xb: &BlockQ6K,
    half: usize,
    piece: usize,
    group_scales: [v128; 4],
    held: Held,
    f: &mut impl FnMut(KCodes16, usize, v128),
) {
    let l = 16 * piece;
    let (ql, qh) = (&xb.ql[64 * half..][..64], &xb.qh[32 * half..][..32]);
    let high_bits = load_u8(&qh[l..]);
    let (n0, n2) = nibble_codes(load_u8(&ql[l..]), held);
    let (n1, n3) = nibble_codes(load_u8(&ql[l + 32..]), held);
    for (row, nibble) in [n0, n1, n2, n3].into_iter().enumerate() {
        // Bits 2r, 2r + 1 of qh moved to bits 4, 5.
        let codes = or_codes(nibble, moved_bits(high_bits, 2 * row as u32, 2, held));
        f(codes, 128 * half + 32 * row + l, group_scales[row]);
    }
}

/// The 16 scales of a Q6_K block as i16, in two vectors, for [`q6_k_codes`] and
/// [`q6_k_offset`].
#[inline(always)]
fn q6_k_scales(xb: &BlockQ6K) -> [v128; 2] {
    // SAFETY: 16 i8 are 16 readable bytes; no alignment requirement.
    let scales = unsafe { v128_load(xb.scales.as_ptr().cast()) };
    [i16x8_extend_low_i8x16(scales), i16x8_extend_high_i8x16(scales)]
}

/// `32 × Σ scales[j] × bsums[j]` as four i32 partial sums: what the offset of 32 takes from a
/// Q6_K block's code dots (scale j covers elements 16j..16j + 16, whose activations sum to
/// bsums[j]).
#[inline(always)]
fn q6_k_offset(scales: [v128; 2], bsums: &[i16; 16]) -> v128 {
    i32x4_shl(bsums_dot(bsums, scales), 5)
}

#[inline(always)]
fn q6_k_rows<const R: usize>(x: &[BlockQ6K], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    let (x, rows) = common_length(x, rows);
    let held = Held::new();
    let table = f16_table();
    let mut acc = [f32x4_splat(0.0); R];
    for (b, xb) in x.iter().enumerate() {
        let mut sums = [i32x4_splat(0); R];
        let scales = q6_k_scales(xb);
        q6_k_codes(xb, scales, R == 1, held, |codes, first, scale| {
            unrolled::<R>(|r| {
                sums[r] = add_scaled_k_codes(sums[r], [codes], &rows[r][b], first, scale, held);
            });
        });
        let xd = f32_of(table, xb.d);
        for r in 0..R {
            let yb = &rows[r][b];
            acc[r] = add_scaled(acc[r], i32x4_sub(sums[r], q6_k_offset(scales, &yb.bsums)), xd * yb.d);
        }
    }
    acc.map(sum_f32x4)
}

/// Walks the 2-bit codes of a Q2_K or Q3_K block (two low bits of each quant) 16 at a time:
/// `f(codes, group)` for elements `16·group..16·group + 16`, `row` = group / 2 being the
/// 32-element row, whose bits 2·(row % 4) of `qs[32·(row / 4)..][..32]` they are.
#[inline(always)]
fn two_bit_codes(qs: &[u8; 64], unrolled: bool, mut f: impl FnMut(v128, usize)) {
    let two_bits = u8x16_splat(0x03);
    let mut row = |half: usize, shift: usize| {
        let bytes = &qs[32 * half..][..32];
        for (piece, packed) in [load_u8(bytes), load_u8(&bytes[16..])].into_iter().enumerate() {
            // 16-bit shifts give the same bytes here (the mask keeps bits that never cross a
            // byte) without V8's byte-shift masks.
            let codes = v128_and(u16x8_shr(packed, 2 * shift as u32), two_bits);
            f(codes, 8 * half + 2 * shift + piece);
        }
    };
    if unrolled {
        // Decode: constant shifts and offsets, as for the other K-quants' single rows.
        row(0, 0);
        row(0, 1);
        row(0, 2);
        row(0, 3);
        row(1, 0);
        row(1, 1);
        row(1, 2);
        row(1, 3);
    } else {
        for half in 0..2 {
            for shift in 0..4 {
                row(half, shift);
            }
        }
    }
}

/// Q2_K: codes 0..=3 with a 4-bit scale (low nibble) and min (high nibble) per 16 elements.
#[inline(always)]
fn q2_k_rows<const R: usize>(x: &[BlockQ2K], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    let (x, rows) = common_length(x, rows);
    let held = Held::new();
    let table = f16_table();
    let mut acc = [f32x4_splat(0.0); R];
    let mut mins_acc = [f32x4_splat(0.0); R];
    for (b, xb) in x.iter().enumerate() {
        let mut sums = [i32x4_splat(0); R];
        two_bit_codes(&xb.qs, R == 1, |codes, group| {
            let scale = sub_block_scale(i32::from(xb.scales[group] & 0x0F));
            unrolled::<R>(|r| {
                sums[r] =
                    add_scaled_dots(sums[r], [codes], [load_i8(&rows[r][b].qs[16 * group..])], scale, held);
            });
        });
        // SAFETY: 16 bytes are readable; no alignment requirement.
        let packed = unsafe { v128_load(xb.scales.as_ptr().cast()) };
        let mins = u8x16_shr(packed, 4);
        let mins = [u16x8_extend_low_u8x16(mins), u16x8_extend_high_u8x16(mins)];
        let (xd, xdmin) = (f32_of(table, xb.d), f32_of(table, xb.dmin));
        for r in 0..R {
            let yb = &rows[r][b];
            acc[r] = add_scaled(acc[r], sums[r], xd * yb.d);
            mins_acc[r] = add_scaled(mins_acc[r], bsums_dot(&yb.bsums, mins), xdmin * yb.d);
        }
    }
    std::array::from_fn(|r| sum_f32x4(acc[r]) - sum_f32x4(mins_acc[r]))
}

/// A Q3_K block's 16 signed scales (what `scales_q3_k` gives), unpacked in vectors: the scalar
/// unpack cost about 8 operations per scale, per block and row in decode. Scale j takes nibble
/// j / 8 of byte j % 8 and, as bits 4-5, bits 2·(j / 4) of byte 8 + j % 4; less 32.
#[inline(always)]
fn q3_k_scales(packed: &[u8; 12], held: Held) -> [i8; 16] {
    let bytes = load_scale_bytes(packed);
    let nibble_mask = held.low_nibble;
    let low_nibbles = v128_and(bytes, nibble_mask);
    let high_nibbles = v128_and(u16x8_shr(bytes, 4), nibble_mask);
    let lows =
        i8x16_shuffle::<0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23>(low_nibbles, high_nibbles);
    // Bytes 8-11 four times over; group g of four lanes keeps bits 2g, 2g + 1 moved to 4, 5
    // (16-bit shifts: the mask keeps bits that never cross a byte).
    let top = i8x16_shuffle::<8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 10, 11>(bytes, bytes);
    let bits_45 = held.bits_45;
    let by_group = [
        v128_and(i16x8_shl(top, 4), bits_45),
        v128_and(i16x8_shl(top, 2), bits_45),
        v128_and(top, bits_45),
        v128_and(u16x8_shr(top, 2), bits_45),
    ];
    let first = i8x16_shuffle::<0, 1, 2, 3, 20, 21, 22, 23, 0, 0, 0, 0, 0, 0, 0, 0>(by_group[0], by_group[1]);
    let second =
        i8x16_shuffle::<8, 9, 10, 11, 28, 29, 30, 31, 0, 0, 0, 0, 0, 0, 0, 0>(by_group[2], by_group[3]);
    let highs = i8x16_shuffle::<0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23>(first, second);
    let scales = i8x16_sub(v128_or(lows, highs), i8x16_splat(32));
    let mut out = [0i8; 16];
    // SAFETY: 16 writable bytes; wasm's v128.store has no alignment requirement.
    unsafe { v128_store(out.as_mut_ptr().cast(), scales) };
    out
}

/// Q3_K: codes 0..=7 (two low bits from `qs`, 4 where the `hmask` bit is set) less 4, with a
/// signed 6-bit scale per 16 elements. Σ scale·(c − 4)·a is summed as Σ scale·c·a less
/// 4·Σ scale·bsum, so the dots stay on non-negative codes.
#[inline(always)]
fn q3_k_rows<const R: usize>(x: &[BlockQ3K], rows: [&[BlockQ8K]; R]) -> [f32; R] {
    let (x, rows) = common_length(x, rows);
    let held = Held::new();
    let table = f16_table();
    let one = u8x16_splat(1);
    let mut acc = [f32x4_splat(0.0); R];
    for (b, xb) in x.iter().enumerate() {
        let scales = q3_k_scales(&xb.scales, held);
        let high_bits = [load_u8(&xb.hmask), load_u8(&xb.hmask[16..])];
        let mut sums = [i32x4_splat(0); R];
        two_bit_codes(&xb.qs, R == 1, |low, group| {
            // Bit `row` of hmask[l] is the high bit of element l of 32-element row `row`,
            // moved to 0x04 (16-bit shifts: the same bytes once masked).
            let (row, piece) = (group / 2, group % 2);
            let high = i16x8_shl(v128_and(u16x8_shr(high_bits[piece], row as u32), one), 2);
            let codes = v128_or(low, high);
            let scale = sub_block_scale(i32::from(scales[group]));
            unrolled::<R>(|r| {
                sums[r] =
                    add_scaled_dots(sums[r], [codes], [load_i8(&rows[r][b].qs[16 * group..])], scale, held);
            });
        });
        // SAFETY: 16 i8 are 16 readable bytes; no alignment requirement.
        let wide = unsafe { v128_load(scales.as_ptr().cast()) };
        let wide = [i16x8_extend_low_i8x16(wide), i16x8_extend_high_i8x16(wide)];
        let xd = f32_of(table, xb.d);
        for r in 0..R {
            let yb = &rows[r][b];
            let offset = i32x4_shl(bsums_dot(&yb.bsums, wide), 2);
            acc[r] = add_scaled(acc[r], i32x4_sub(sums[r], offset), xd * yb.d);
        }
    }
    acc.map(sum_f32x4)
}

single_and_group! {
    q2_k_rows(whole): dot_q2_k, dot_q2_k_group(BlockQ2K, BlockQ8K);
    q3_k_rows(whole): dot_q3_k, dot_q3_k_group(BlockQ3K, BlockQ8K);
    q4_k_rows(whole): dot_q4_k, dot_q4_k_group(BlockQ4K, BlockQ8K);
    q5_k_rows(whole): dot_q5_k, dot_q5_k_group(BlockQ5K, BlockQ8K);
    q6_k_rows(whole): dot_q6_k, dot_q6_k_group(BlockQ6K, BlockQ8K);
}

// ---------------------------------------------------------------------------------------------
// Float rows
//
// One weight row widened 8 elements at a time and dotted with 1 or ROW_GROUP activation rows,
// two f32x4 accumulators per row: a single row and a row group do the same operations per row,
// so grouped results equal single-row ones bit for bit. The activations are f32 (F16 and BF16
// activations are held widened), loaded 4 at a time.

/// Widens 8 f16 bit patterns to f32, exactly for every finite half (subnormals included). A
/// half's f32 bits, exponent left at the half's bias, are its sign on top, three zeros, then its
/// exponent and mantissa: the upper 16 bits of each f32 lane are the half shifted right by 3
/// (arithmetically, so the sign stays on top) with the sign's copies cleared, the lower 16 are
/// the half shifted left by 13 (its mantissa's last 3 bits). Both shifts work on all 8 halves
/// at once, an interleave pairs them into f32 lanes, and multiplying by 2^112 rebiases the
/// exponent: 7 operations for 8 halves, where widening each half to 32 bits first took 9 (and
/// V8 rebuilt the two constants at every use before they were held). Infinities and NaNs come
/// out finite: callers see that there are none (the KV rows with [`F16Specials`]; a model's
/// F16 weights are checked when it loads).
#[inline(always)]
pub(super) fn widen_f16x8(bits: v128, held: Held) -> [v128; 2] {
    place_f16x8(bits, held).map(|placed| f32x4_mul(placed, held.f16_rebias))
}

/// The first steps of [`widen_f16x8`]: 8 halves placed in f32 lanes, exponent left at the
/// half's bias, which is each half times 2^-112, exactly for every finite half (the halves'
/// subnormals become f32 subnormals, with all their bits).
#[inline(always)]
fn place_f16x8(bits: v128, held: Held) -> [v128; 2] {
    let lower = i16x8_shl(bits, 13);
    let upper = v128_and(i16x8_shr(bits, 3), held.f16_upper_bits);
    interleave_halves(lower, upper)
}

/// Widens 8 bf16 bit patterns to f32 (the half on top of a 32-bit lane is the f32): one
/// interleave with zero per 4.
#[inline(always)]
fn widen_bf16x8(bits: v128, held: Held) -> [v128; 2] {
    interleave_halves(held.zero, bits)
}

/// Eight 32-bit lanes from 16-bit halves: lane `i` has `lower`'s lane `i` below and `upper`'s on
/// top, lanes 0..4 in the first vector (one x86 unpack each).
#[inline(always)]
fn interleave_halves(lower: v128, upper: v128) -> [v128; 2] {
    [
        i16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(lower, upper),
        i16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(lower, upper),
    ]
}

/// Whether any of the halves seen had the all-ones exponent (infinity or NaN), tracked as the
/// largest magnitude (shifted left past the sign) at two operations per 8 halves.
struct F16Specials(v128);

impl F16Specials {
    fn new() -> Self {
        Self(u16x8_splat(0))
    }

    #[inline(always)]
    fn see(&mut self, bits: v128) {
        self.0 = u16x8_max(self.0, i16x8_shl(bits, 1));
    }

    fn any(&self) -> bool {
        v128_any_true(u16x8_ge(self.0, u16x8_splat(0x7C00 << 1)))
    }
}

/// The dots of a tile of `W` weight rows (`ELEMENT_BYTES` per element) and `R` activation rows
/// over their first `len` elements: one row (1 × 1), a row group for prefill (1 ×
/// [`ROW_GROUP`]) and a weight pair for decode (2 × 1, each activation vector loaded once for
/// both). `widen(w, bytes)` turns the bytes of 8 weights of row `w` into two f32x4 and
/// `weight(src, i)` gives one (the tail past the last whole 8, summed after the vectors). Every
/// pair of rows gets the same operations in the same order in any tile.
#[inline(always)]
fn float_tile<const W: usize, const R: usize, const ELEMENT_BYTES: usize, const EXACT_PRODUCTS: bool>(
    src: [&[u8]; W],
    rows: [&[f32]; R],
    mut widen: impl FnMut(usize, &[u8]) -> [v128; 2],
    weight: impl Fn(&[u8], usize) -> f32,
) -> [[f32; R]; W] {
    let len = src.iter().map(|src| src.len() / ELEMENT_BYTES).min().unwrap_or(0).min(shortest_row(&rows));
    let (src, rows) = (src.map(|src| &src[..len * ELEMENT_BYTES]), rows.map(|row| &row[..len]));
    let whole = len - len % 8;
    let mut acc = [[[f32x4_splat(0.0); 2]; R]; W];
    for i in (0..whole).step_by(8) {
        for (w, (acc, src)) in acc.iter_mut().zip(src).enumerate() {
            // SAFETY: i + 8 <= len, and src holds len elements and every row len values.
            // Unchecked because the bounds checks cost as much as the widening (measured).
            let [low, high] =
                widen(w, unsafe { src.get_unchecked(i * ELEMENT_BYTES..(i + 8) * ELEMENT_BYTES) });
            for (lanes, row) in acc.iter_mut().zip(rows) {
                // SAFETY: as above, i + 8 <= len = row.len().
                let (a_low, a_high) =
                    unsafe { (row.get_unchecked(i..i + 4), row.get_unchecked(i + 4..i + 8)) };
                if EXACT_PRODUCTS {
                    lanes[0] = exact_mul_add4(low, load_f32(a_low), lanes[0]);
                    lanes[1] = exact_mul_add4(high, load_f32(a_high), lanes[1]);
                } else {
                    lanes[0] = mul_add4(low, load_f32(a_low), lanes[0]);
                    lanes[1] = mul_add4(high, load_f32(a_high), lanes[1]);
                }
            }
        }
    }
    std::array::from_fn(|w| {
        std::array::from_fn(|r| {
            let [low, high] = acc[w][r];
            let mut sum = sum_f32x4(f32x4_add(low, high));
            for (i, &a) in rows[r].iter().enumerate().skip(whole) {
                sum += weight(src[w], i) * a;
            }
            sum
        })
    })
}

/// Elements (or blocks) in the shortest of `rows` (the rows of a matmul are all the same length).
fn shortest_row<T, const R: usize>(rows: &[&[T]; R]) -> usize {
    rows.iter().map(|row| row.len()).min().unwrap_or(0)
}

/// A weight row and `R` activation rows cut to the blocks they all have, so that a rows loop
/// indexes them without bounds checks.
#[inline(always)]
fn common_length<'a, B, A, const R: usize>(x: &'a [B], rows: [&'a [A]; R]) -> (&'a [B], [&'a [A]; R]) {
    let len = x.len().min(shortest_row(&rows));
    (&x[..len], rows.map(|row| &row[..len]))
}

#[inline(always)]
fn f32_tile<const W: usize, const R: usize>(src: [&[u8]; W], rows: [&[f32]; R]) -> [[f32; R]; W] {
    let weight = |src: &[u8], i: usize| {
        f32::from_le_bytes([src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3]])
    };
    float_tile::<W, R, 4, false>(src, rows, |_, bytes| [load_u8(bytes), load_u8(&bytes[16..])], weight)
}

/// The F16 weight `i` of a row times 2^-112, as [`place_f16x8`] gives it (exact), for tails.
fn f16_weight_placed(src: &[u8], i: usize) -> f32 {
    half::f16::from_le_bytes([src[2 * i], src[2 * i + 1]]).to_f32() * (1.0 / F16_ACTIVATION_SCALE)
}

/// Whether whole halves in `bytes` include an infinity or NaN: the scalar kernel's carry test
/// (exponent bits plus 0x0400 reach the top bit only when all ones), 8 halves per vector, so
/// that scanning a model's F16 tensors runs at the speed of the loads.
pub(super) fn any_non_finite_f16(bytes: &[u8]) -> bool {
    let exponents = std::hint::black_box(u16x8_splat(0x7C00));
    let one_past = std::hint::black_box(u16x8_splat(0x0400));
    let mut found = u16x8_splat(0);
    let mut vectors = bytes.chunks_exact(16);
    for vector in &mut vectors {
        found = v128_or(found, i16x8_add(v128_and(load_u8(vector), exponents), one_past));
    }
    i16x8_bitmask(found) != 0 || super::float::any_non_finite_f16(vectors.remainder())
}

/// [`read_checksum`](super::float::read_checksum) in four i32x4 accumulators, 64 bytes per
/// round: wrapping sums in any order give the same word sum, and four independent chains keep
/// the loop bound by its loads.
pub(super) fn sum_words(bytes: &[u8]) -> u32 {
    let mut acc = [u32x4_splat(0); 4];
    let mut rounds = bytes.chunks_exact(64);
    for round in &mut rounds {
        for (i, lane) in acc.iter_mut().enumerate() {
            *lane = i32x4_add(*lane, load_u8(&round[16 * i..]));
        }
    }
    let sum = i32x4_add(i32x4_add(acc[0], acc[1]), i32x4_add(acc[2], acc[3]));
    let lanes = [
        u32x4_extract_lane::<0>(sum),
        u32x4_extract_lane::<1>(sum),
        u32x4_extract_lane::<2>(sum),
        u32x4_extract_lane::<3>(sum),
    ];
    lanes.into_iter().fold(super::float::sum_words(rounds.remainder()), u32::wrapping_add)
}

/// F16 weights times F16 activations, which are held times 2^112 ([`F16_ACTIVATION_SCALE`]):
/// the weights are only placed ([`place_f16x8`]), and each product is `w · a`, bit for bit.
/// The weights must be finite, as a model's are (checked when it loads): an infinity or NaN
/// would count as a finite number.
#[inline(always)]
fn f16_tile<const W: usize, const R: usize>(src: [&[u8]; W], rows: [&[F16Activation]; R]) -> [[f32; R]; W] {
    let held = Held::new();
    let place = |_, bytes: &[u8]| place_f16x8(load_u8(bytes), held);
    float_tile::<W, R, 2, true>(src, rows.map(F16Activation::scaled_values), place, f16_weight_placed)
}

/// F16 weight rows times many activation rows as a GEMM, each output with [`dot_f16`]'s bits:
/// a tile of weight rows placed in f32 lanes once ([`place_f16x8`], which every row group
/// repeated for each of its halves), then two weight rows by two activation rows per pass of
/// [`float_tile`] (8 accumulators: the same lanes, operations and tail as one row's), over a
/// block of activation rows that stays in cache while the tile's weight rows pass over it.
pub(super) fn matmul_f16<'a>(
    weights: &[u8],
    row_bytes: usize,
    activation_row: impl Fn(usize) -> &'a [F16Activation],
    out: &mut [&mut [f32]],
) {
    /// Bytes of placed weights, and of activation rows, handled at a time.
    const WEIGHT_TILE_BYTES: usize = 64 << 10;
    const ACTIVATION_BLOCK_BYTES: usize = 128 << 10;
    let k = row_bytes / 2;
    if k == 0 {
        return;
    }
    let (rows, n) = (weights.len() / row_bytes, out.len());
    let tile_rows = (WEIGHT_TILE_BYTES / (4 * k)).max(2) / 2 * 2;
    let block_rows = (ACTIVATION_BLOCK_BYTES / (4 * k)).max(2);
    let whole = k - k % 8;
    let held = Held::new();
    let mut placed = vec![0.0f32; tile_rows.min(rows) * k];
    for first_row in (0..rows).step_by(tile_rows) {
        let tile = tile_rows.min(rows - first_row);
        let tile_weights = &weights[first_row * row_bytes..][..tile * row_bytes];
        for (row, src) in placed.chunks_exact_mut(k).zip(tile_weights.chunks_exact(row_bytes)) {
            for i in (0..whole).step_by(8) {
                let [low, high] = place_f16x8(load_u8(&src[2 * i..]), held);
                store_f32(&mut row[i..], low);
                store_f32(&mut row[i + 4..], high);
            }
            for (i, value) in row.iter_mut().enumerate().skip(whole) {
                *value = f16_weight_placed(src, i);
            }
        }
        let placed_bytes = f32_bytes(&placed[..tile * k]);
        for block in (0..n).step_by(block_rows) {
            let block_end = n.min(block + block_rows);
            for (pair, w) in placed_bytes.chunks(8 * k).enumerate() {
                let r = first_row + 2 * pair;
                let two_rows = w.len() == 8 * k;
                let mut i = block;
                while i < block_end {
                    let a0 = F16Activation::scaled_values(activation_row(i));
                    if i + 1 < block_end {
                        let a1 = F16Activation::scaled_values(activation_row(i + 1));
                        if two_rows {
                            let [first, second] = placed_tile::<2, 2>([&w[..4 * k], &w[4 * k..]], [a0, a1]);
                            [out[i][r], out[i + 1][r]] = first;
                            [out[i][r + 1], out[i + 1][r + 1]] = second;
                        } else {
                            [[out[i][r], out[i + 1][r]]] = placed_tile::<1, 2>([w], [a0, a1]);
                        }
                        i += 2;
                    } else {
                        if two_rows {
                            [[out[i][r]], [out[i][r + 1]]] =
                                placed_tile::<2, 1>([&w[..4 * k], &w[4 * k..]], [a0]);
                        } else {
                            [[out[i][r]]] = placed_tile::<1, 1>([w], [a0]);
                        }
                        i += 1;
                    }
                }
            }
        }
    }
}

/// [`f16_tile`] over weight rows already placed in f32 lanes (as bytes): the same sums.
#[inline(always)]
fn placed_tile<const W: usize, const R: usize>(src: [&[u8]; W], rows: [&[f32]; R]) -> [[f32; R]; W] {
    let weight = |src: &[u8], i: usize| {
        f32::from_le_bytes([src[4 * i], src[4 * i + 1], src[4 * i + 2], src[4 * i + 3]])
    };
    float_tile::<W, R, 4, true>(src, rows, |_, bytes| [load_u8(bytes), load_u8(&bytes[16..])], weight)
}

/// The bytes of f32 values, for the kernels that read weights as bytes.
fn f32_bytes(values: &[f32]) -> &[u8] {
    // SAFETY: any f32 is four plain bytes, and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

/// The F16 dot's vector part summed with [`exact_mul_add4`] and with [`mul_add4`], for the
/// check that fusing never changes a bit (`kernel_checks.rs`); finite weights only.
pub(super) fn f16_dot_fused_and_unfused(src: &[u8], activations: &[F16Activation]) -> (f32, f32) {
    let rows = [F16Activation::scaled_values(activations)];
    let held = Held::new();
    let place = |_, bytes: &[u8]| place_f16x8(load_u8(bytes), held);
    let [[fused]] = float_tile::<1, 1, 2, true>([src], rows, place, f16_weight_placed);
    let [[unfused]] = float_tile::<1, 1, 2, false>([src], rows, place, f16_weight_placed);
    (fused, unfused)
}

#[inline(always)]
fn bf16_tile<const W: usize, const R: usize>(src: [&[u8]; W], rows: [&[BF16Activation]; R]) -> [[f32; R]; W] {
    let weight = |src: &[u8], i: usize| half::bf16::from_le_bytes([src[2 * i], src[2 * i + 1]]).to_f32();
    let held = Held::new();
    float_tile::<W, R, 2, true>(
        src,
        rows.map(BF16Activation::values),
        |_, bytes| widen_bf16x8(load_u8(bytes), held),
        weight,
    )
}

single_group_and_pair! {
    f32_tile(halves): dot_f32, dot_f32_group, dot_f32_pair(u8, f32);
    f16_tile(halves): dot_f16, dot_f16_group, dot_f16_pair(u8, F16Activation);
    bf16_tile(halves): dot_bf16, dot_bf16_group, dot_bf16_pair(u8, BF16Activation);
}

// ---------------------------------------------------------------------------------------------
// KV cache rows (attention)
//
// The same bits as the scalar references in `kv_rows.rs`: widening is exact, the dot sums in
// the same lanes and order, and the rounded multiply-add rounds its product, its sum and then
// to F16 as the scalar code does (never fused: a weight times a half is not exact in f32).
// Halves with the all-ones exponent (infinity, NaN) take the scalar path: per 8 elements where
// results are per element, for the whole row in the dot, whose sum order spans the row.

/// Loads the first 8 halves of `halves` as bits.
#[inline(always)]
fn load_f16x8(halves: &[f16]) -> v128 {
    let halves = &halves[..8];
    // SAFETY: 8 halves are 16 readable bytes; wasm's v128.load has no alignment requirement.
    unsafe { v128_load(halves.as_ptr().cast()) }
}

/// Stores 4 f32 lanes into the first 4 values of `dst`.
#[inline(always)]
fn store_f32(dst: &mut [f32], lanes: v128) {
    let dst = &mut dst[..4];
    // SAFETY: 4 f32 are 16 writable bytes; wasm's v128.store has no alignment requirement.
    unsafe { v128_store(dst.as_mut_ptr().cast(), lanes) }
}

/// Whether any of 8 halves is an infinity or a NaN.
#[inline(always)]
fn any_f16_special(bits: v128) -> bool {
    let mut specials = F16Specials::new();
    specials.see(bits);
    specials.any()
}

/// All-ones lanes where `x` rounds to a normal, finite F16 (no NaN): the lanes
/// [`round_normal_to_f16x4`] rounds correctly. One unsigned comparison of the magnitude's bits.
#[inline(always)]
fn in_f16_normal_range(x: v128) -> v128 {
    use super::kv_rows::{F16_MIN_NORMAL, F16_ROUNDS_TO_INFINITY};
    let offset = i32x4_sub(v128_and(x, u32x4_splat(0x7FFF_FFFF)), u32x4_splat(F16_MIN_NORMAL.to_bits()));
    let width = F16_ROUNDS_TO_INFINITY.to_bits() - F16_MIN_NORMAL.to_bits();
    u32x4_lt(offset, u32x4_splat(width))
}

/// Rounds lanes in [`in_f16_normal_range`] to F16: keeps 10 of f32's 23 mantissa bits,
/// nearest even, a carry bumping the exponent.
#[inline(always)]
fn round_normal_to_f16x4(x: v128) -> v128 {
    let odd = v128_and(u32x4_shr(x, 13), u32x4_splat(1));
    v128_and(i32x4_add(i32x4_add(x, u32x4_splat(0x0FFF)), odd), u32x4_splat(!0x1FFF))
}

/// [`round_to_f16`](super::kv_rows::round_to_f16) of 4 lanes, with the same bit arithmetic.
#[inline(always)]
fn round_to_f16x4(x: v128) -> v128 {
    use super::kv_rows::{F16_MIN_NORMAL, F16_ROUNDS_TO_INFINITY, F16_SUBNORMAL_STEPS};
    let magnitude = f32x4_abs(x);
    let normal = round_normal_to_f16x4(x);
    let steps = f32x4_nearest(f32x4_mul(x, f32x4_splat(F16_SUBNORMAL_STEPS)));
    let subnormal = f32x4_mul(steps, f32x4_splat(1.0 / F16_SUBNORMAL_STEPS));
    let rounded = v128_bitselect(subnormal, normal, f32x4_lt(magnitude, f32x4_splat(F16_MIN_NORMAL)));
    let infinity = v128_or(v128_and(x, u32x4_splat(0x8000_0000)), f32x4_splat(f32::INFINITY));
    let rounded = v128_bitselect(infinity, rounded, f32x4_ge(magnitude, f32x4_splat(F16_ROUNDS_TO_INFINITY)));
    v128_bitselect(x, rounded, f32x4_ne(x, x))
}

/// [`super::float::scan_state_row`] four lanes at a time: each accumulator of eight lanes is two
/// vectors, and every lane's operations (a multiply and an add, unfused as in the scalar wasm
/// build) are the scalar kernel's, so the bits are too.
pub(super) fn scan_state_row(s: &mut [f32], b: &[f32], c: &[f32], decay: f32, x_dt: f32) -> f32 {
    let whole = s.len() / 32 * 32;
    let (decay_v, x_dt_v) = (f32x4_splat(decay), f32x4_splat(x_dt));
    let mut sums = [f32x4_splat(0.0); 8];
    for i in (0..whole).step_by(32) {
        for (q, sum) in sums.iter_mut().enumerate() {
            let k = i + 4 * q;
            let state =
                f32x4_add(f32x4_mul(load_f32(&s[k..]), decay_v), f32x4_mul(load_f32(&b[k..]), x_dt_v));
            store_f32(&mut s[k..], state);
            *sum = f32x4_add(f32x4_mul(state, load_f32(&c[k..])), *sum);
        }
    }
    let lane = |q: usize, l: usize| f32x4_extract_lane_dyn(sums[q], l);
    let accumulators: [[f32; 8]; 4] =
        std::array::from_fn(|a| std::array::from_fn(|l| lane(2 * a + l / 4, l % 4)));
    let head = super::float::reduce_accumulators(accumulators);
    let (s_rest, b_rest, c_rest) = (&mut s[whole..], &b[whole..], &c[whole..]);
    // The values past the last 32: the scalar kernel's loop, continued from `head`.
    let mut sum = head;
    for ((s, &b), &c) in s_rest.iter_mut().zip(b_rest).zip(c_rest) {
        *s = *s * decay + b * x_dt;
        sum += *s * c;
    }
    sum
}

/// Lane `l` (0..4) of a vector of four f32.
fn f32x4_extract_lane_dyn(v: v128, l: usize) -> f32 {
    match l {
        0 => f32x4_extract_lane::<0>(v),
        1 => f32x4_extract_lane::<1>(v),
        2 => f32x4_extract_lane::<2>(v),
        _ => f32x4_extract_lane::<3>(v),
    }
}

pub(super) fn widen_kv_row(src: &[f16], dst: &mut [f32]) {
    let len = src.len().min(dst.len());
    let whole = len - len % 8;
    let held = Held::new();
    for i in (0..whole).step_by(8) {
        let bits = load_f16x8(&src[i..]);
        if any_f16_special(bits) {
            super::kv_rows::widen_kv_row(&src[i..i + 8], &mut dst[i..i + 8]);
            continue;
        }
        let [low, high] = widen_f16x8(bits, held);
        store_f32(&mut dst[i..], low);
        store_f32(&mut dst[i + 4..], high);
    }
    super::kv_rows::widen_kv_row(&src[whole..len], &mut dst[whole..len]);
}

pub(super) fn dot_kv_row(query: &[f32], key: &[f16]) -> f32 {
    let n = query.len().min(key.len());
    let mut specials = F16Specials::new();
    let held = Held::new();
    let sum = dot_in_ggml_lanes(query, n, |i| {
        let bits = load_f16x8(&key[i..]);
        specials.see(bits);
        widen_f16x8(bits, held)
    });
    if specials.any() {
        return super::kv_rows::dot_kv_row(query, key);
    }
    finish_dot(sum, query, key, n)
}

/// [`dot_in_4_lanes`](super::kv_rows::dot_in_4_lanes) of four f32 keys: each key's lanes in a
/// vector, the four reduced together by two interleaves (the same additions as the scalar
/// reduction), the tails added after as there.
pub(super) fn dot_f32_keys4(query: &[f32], keys: [&[f32]; 4]) -> [f32; 4] {
    let n = keys.iter().fold(query.len(), |n, key| n.min(key.len()));
    if keys.iter().any(|key| key.len() != n) || query.len() != n {
        return super::kv_rows::dot_f32_keys4(query, keys);
    }
    let whole = n & !3;
    let mut acc = [f32x4_splat(0.0); 4];
    for i in (0..whole).step_by(4) {
        let q = load_f32(&query[i..]);
        for (a, key) in acc.iter_mut().zip(keys) {
            *a = mul_add4(q, load_f32(&key[i..]), *a);
        }
    }
    // [k0 l0+l2, k1 l0+l2, k0 l1+l3, k1 l1+l3] and the same for keys 2 and 3.
    let pair =
        |a: v128, b: v128| f32x4_add(i32x4_shuffle::<0, 4, 1, 5>(a, b), i32x4_shuffle::<2, 6, 3, 7>(a, b));
    let (first, second) = (pair(acc[0], acc[1]), pair(acc[2], acc[3]));
    let sums =
        f32x4_add(i32x4_shuffle::<0, 1, 4, 5>(first, second), i32x4_shuffle::<2, 3, 6, 7>(first, second));
    let mut out = [
        f32x4_extract_lane::<0>(sums),
        f32x4_extract_lane::<1>(sums),
        f32x4_extract_lane::<2>(sums),
        f32x4_extract_lane::<3>(sums),
    ];
    for (sum, key) in out.iter_mut().zip(keys) {
        for i in whole..n {
            *sum = super::kv_rows::mul_add(query[i], key[i], *sum);
        }
    }
    out
}

/// The vector part of a KV dot over the first `n` elements (whole 32s) in ggml's 4 × 8 lanes,
/// reduced in its order; `key8(i)` gives key elements `i..i + 8` as f32.
#[inline(always)]
fn dot_in_ggml_lanes(query: &[f32], n: usize, mut key8: impl FnMut(usize) -> [v128; 2]) -> f32 {
    let whole = n & !31;
    // ggml's 4 × 8 lanes: accumulator 2a holds lanes 0..4 of its group a, 2a + 1 lanes 4..8.
    let mut acc = [f32x4_splat(0.0); 8];
    for i in (0..whole).step_by(32) {
        for a in 0..4 {
            let [low, high] = key8(i + 8 * a);
            acc[2 * a] = mul_add4(load_f32(&query[i + 8 * a..]), low, acc[2 * a]);
            acc[2 * a + 1] = mul_add4(load_f32(&query[i + 8 * a + 4..]), high, acc[2 * a + 1]);
        }
    }
    let low = f32x4_add(f32x4_add(acc[0], acc[4]), f32x4_add(acc[2], acc[6]));
    let high = f32x4_add(f32x4_add(acc[1], acc[5]), f32x4_add(acc[3], acc[7]));
    sum_f32x4(f32x4_add(low, high))
}

/// A KV dot's vector part plus its tail past the whole 32s, summed in f64 as ggml does.
#[inline(always)]
fn finish_dot(vector_part: f32, query: &[f32], key: &[f16], n: usize) -> f32 {
    let mut sum = f64::from(vector_part);
    for i in (n & !31)..n {
        sum += f64::from(query[i] * key[i].to_f32());
    }
    sum as f32
}

/// KV rows up to this long are widened once for all the query heads that read them.
const SHARED_ROW_MAX: usize = 512;

/// A KV row widened once for several heads: vector `k` holds elements `4k..4k + 4` of the
/// row's whole 8s.
struct SharedRow {
    vectors: [std::mem::MaybeUninit<v128>; SHARED_ROW_MAX / 4],
    /// Elements in whole 8s, all widened.
    whole: usize,
}

impl SharedRow {
    /// Nothing widened yet (no bytes written: uninitialized vectors cost nothing).
    #[inline(always)]
    fn new() -> SharedRow {
        SharedRow { vectors: [std::mem::MaybeUninit::uninit(); SHARED_ROW_MAX / 4], whole: 0 }
    }

    /// `row` widened, in place: the row is 2 KiB, which a return by value copies (a `memmove`
    /// per KV row, 6 % of a decode step). False, for the scalar kernels to take it, if the row
    /// is empty or over [`SHARED_ROW_MAX`] halves, or one of its whole 8s holds an infinity or
    /// NaN.
    #[inline(always)]
    fn widen(&mut self, row: &[f16], held: Held) -> bool {
        if row.is_empty() || row.len() > SHARED_ROW_MAX {
            return false;
        }
        self.whole = row.len() - row.len() % 8;
        let mut specials = F16Specials::new();
        for i in (0..self.whole).step_by(8) {
            let bits = load_f16x8(&row[i..]);
            specials.see(bits);
            let [low, high] = widen_f16x8(bits, held);
            self.vectors[i / 4].write(low);
            self.vectors[i / 4 + 1].write(high);
        }
        !specials.any()
    }

    /// Elements `i..i + 8` (`i` a multiple of 8 below `whole`).
    #[inline(always)]
    fn eight(&self, i: usize) -> [v128; 2] {
        assert!(i + 8 <= self.whole);
        // SAFETY: `widen` wrote vectors 0..whole / 4, and i / 4 + 1 < whole / 4.
        unsafe { [self.vectors[i / 4].assume_init(), self.vectors[i / 4 + 1].assume_init()] }
    }
}

/// [`dot_kv_row`] of every query head in `queries` (rows of `key.len()`) with one key, the key
/// widened once: each score has the single-head kernel's bits.
pub(super) fn dot_kv_row_heads(queries: &[f32], key: &[f16], scores: &mut [f32]) {
    let n = key.len();
    let mut shared = SharedRow::new();
    if !shared.widen(key, Held::new()) {
        return super::kv_rows::dot_kv_row_heads(queries, key, scores);
    }
    for (score, query) in scores.iter_mut().zip(queries.chunks_exact(n)) {
        *score = finish_dot(dot_in_ggml_lanes(query, n, |i| shared.eight(i)), query, key, n);
    }
}

pub(super) fn mad_kv_row_rounded(acc: &mut [f32], values: &[f16], weight: f32) {
    let len = acc.len().min(values.len());
    let whole = len - len % 8;
    let weights = f32x4_splat(weight);
    let held = Held::new();
    for i in (0..whole).step_by(8) {
        let bits = load_f16x8(&values[i..]);
        if any_f16_special(bits) {
            super::kv_rows::mad_kv_row_rounded(&mut acc[i..i + 8], &values[i..i + 8], weight);
            continue;
        }
        mad_rounded8(&mut acc[i..], widen_f16x8(bits, held), weights);
    }
    super::kv_rows::mad_kv_row_rounded(&mut acc[whole..len], &values[whole..len], weight);
}

/// `acc[i] = round_to_f16(value[i] · weight + acc[i])` for 8 values, widened, and `weight` in
/// four lanes.
#[inline(always)]
fn mad_rounded8(acc: &mut [f32], [low, high]: [v128; 2], weights: v128) {
    let sum_low = mul_add4(low, weights, load_f32(acc));
    let sum_high = mul_add4(high, weights, load_f32(&acc[4..]));
    let (rounded_low, rounded_high) =
        if i32x4_all_true(v128_and(in_f16_normal_range(sum_low), in_f16_normal_range(sum_high))) {
            (round_normal_to_f16x4(sum_low), round_normal_to_f16x4(sum_high))
        } else {
            (round_to_f16x4(sum_low), round_to_f16x4(sum_high))
        };
    store_f32(acc, rounded_low);
    store_f32(&mut acc[4..], rounded_high);
}

/// [`mad_kv_row_rounded`] of one value row into every head's accumulator in `accs` (rows of
/// `values.len()`), each with its weight, the values widened once: each head gets the
/// single-head kernel's bits.
pub(super) fn mad_kv_row_rounded_heads(accs: &mut [f32], values: &[f16], weights: &[f32]) {
    let n = values.len();
    let mut shared = SharedRow::new();
    if !shared.widen(values, Held::new()) {
        return super::kv_rows::mad_kv_row_rounded_heads(accs, values, weights);
    }
    for (acc, &weight) in accs.chunks_exact_mut(n).zip(weights) {
        let lanes = f32x4_splat(weight);
        for i in (0..shared.whole).step_by(8) {
            mad_rounded8(&mut acc[i..], shared.eight(i), lanes);
        }
        super::kv_rows::mad_kv_row_rounded(&mut acc[shared.whole..], &values[shared.whole..], weight);
    }
}

/// The f32 accumulation of [`mad_kv_row_rounded_heads`] (attention's `'fast'` precision): the
/// values widened once, each head's `acc + value · weight` in four lanes, nothing rounded.
pub(super) fn mad_kv_row_heads(accs: &mut [f32], values: &[f16], weights: &[f32]) {
    let n = values.len();
    let mut shared = SharedRow::new();
    if !shared.widen(values, Held::new()) {
        return super::kv_rows::mad_kv_row_heads(accs, values, weights);
    }
    for (acc, &weight) in accs.chunks_exact_mut(n).zip(weights) {
        let lanes = f32x4_splat(weight);
        for i in (0..shared.whole).step_by(8) {
            let [low, high] = shared.eight(i);
            let sums =
                [mul_add4(low, lanes, load_f32(&acc[i..])), mul_add4(high, lanes, load_f32(&acc[i + 4..]))];
            store_f32(&mut acc[i..], sums[0]);
            store_f32(&mut acc[i + 4..], sums[1]);
        }
        let rest = shared.whole..n;
        super::kv_rows::mad_kv_row_heads(&mut acc[rest.clone()], &values[rest], &[weight]);
    }
}

pub(super) fn scale_rounded_to_f16(row: &mut [f32], factor: f32) {
    let whole = row.len() - row.len() % 4;
    let factors = f32x4_splat(factor);
    for i in (0..whole).step_by(4) {
        let scaled = round_to_f16x4(f32x4_mul(load_f32(&row[i..]), factors));
        store_f32(&mut row[i..], scaled);
    }
    super::kv_rows::scale_rounded_to_f16(&mut row[whole..], factor);
}

// ---------------------------------------------------------------------------------------------
// Attention's tiles of keys and values, and softmax's exponentials
//
// The same bits as the scalar references (`kv_rows.rs`, `float.rs`): each output is the same
// chain of operations, several chains side by side. Thirty-two sums at a time (8 registers):
// x86 has 16 vector registers, and 64 sums as 16 of them made V8 spill them at every step.

/// [`super::kv_rows::dot_tiled_keys`] 32 keys at a time.
pub(super) fn dot_tiled_keys(query: &[f32], tile: &[f32]) -> [f32; super::kv_rows::KEY_TILE] {
    const TILE: usize = super::kv_rows::KEY_TILE;
    let mut out = [0.0f32; TILE];
    if tile.len() < query.len() * TILE {
        return super::kv_rows::dot_tiled_keys(query, tile);
    }
    for half in 0..2 {
        let mut acc = [f32x4_splat(0.0); 8];
        for (d, &q) in query.iter().enumerate() {
            let q = f32x4_splat(q);
            let keys = &tile[d * TILE + half * 32..][..32];
            for (j, a) in acc.iter_mut().enumerate() {
                *a = mul_add4(q, load_f32(&keys[4 * j..]), *a);
            }
        }
        for (j, a) in acc.into_iter().enumerate() {
            store_f32(&mut out[half * 32 + 4 * j..], a);
        }
    }
    out
}

/// [`super::kv_rows::add_weighted_rows`] 32 outputs at a time, then 4, then one by one.
pub(super) fn add_weighted_rows<'a>(out: &mut [f32], weights: &[f32], value: impl Fn(usize) -> &'a [f32]) {
    let n = out.len();
    let mut start = 0;
    while start + 32 <= n {
        let mut acc: [v128; 8] = std::array::from_fn(|j| load_f32(&out[start + 4 * j..]));
        for (i, &w) in weights.iter().enumerate() {
            if w != 0.0 {
                let (w, row) = (f32x4_splat(w), &value(i)[start..start + 32]);
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = mul_add4(w, load_f32(&row[4 * j..]), *a);
                }
            }
        }
        for (j, a) in acc.into_iter().enumerate() {
            store_f32(&mut out[start + 4 * j..], a);
        }
        start += 32;
    }
    while start + 4 <= n {
        let mut acc = load_f32(&out[start..]);
        for (i, &w) in weights.iter().enumerate() {
            if w != 0.0 {
                acc = mul_add4(f32x4_splat(w), load_f32(&value(i)[start..]), acc);
            }
        }
        store_f32(&mut out[start..], acc);
        start += 4;
    }
    super::kv_rows::add_weighted_rows_scalar(&mut out[start..], weights, |i| &value(i)[start..]);
}

/// [`super::float::fma`] in 4 lanes: wasm's route, each product exact in f64 and the sum
/// rounded there, then to f32.
#[inline(always)]
fn fma4(a: v128, b: v128, c: v128) -> v128 {
    let wide =
        |v: v128| [f64x2_promote_low_f32x4(v), f64x2_promote_low_f32x4(i32x4_shuffle::<2, 3, 2, 3>(v, v))];
    let (a, b, c) = (wide(a), wide(b), wide(c));
    let low = f32x4_demote_f64x2_zero(f64x2_add(f64x2_mul(a[0], b[0]), c[0]));
    let high = f32x4_demote_f64x2_zero(f64x2_add(f64x2_mul(a[1], b[1]), c[1]));
    i32x4_shuffle::<0, 1, 4, 5>(low, high)
}

/// [`super::float::exp_shifted`] four at a time: [`super::float::ggml_expf`]'s steps in 4 lanes
/// where every lane takes its common path (`|n| <= 126`), the scalar function otherwise.
pub(super) fn exp_shifted(x: &mut [f32], max: f32) {
    use super::float::{EXP_LN2_HIGH, EXP_LN2_LOW, EXP_LOG2_E, EXP_POLYNOMIAL, EXP_SHIFTER};
    let whole = x.len() - x.len() % 4;
    let (shifter, maxes) = (f32x4_splat(EXP_SHIFTER), f32x4_splat(max));
    let [c1, c2, c3, c4, c5] = EXP_POLYNOMIAL.map(|c| f32x4_splat(c));
    for i in (0..whole).step_by(4) {
        let v = f32x4_sub(load_f32(&x[i..]), maxes);
        let z = fma4(v, f32x4_splat(EXP_LOG2_E), shifter);
        let n = f32x4_sub(z, shifter);
        let minus_n = f32x4_neg(n);
        let b = fma4(minus_n, f32x4_splat(EXP_LN2_LOW), fma4(minus_n, f32x4_splat(EXP_LN2_HIGH), v));
        let k = i32x4_add(i32x4_shl(z, 23), i32x4_splat(1.0f32.to_bits() as i32));
        let u = f32x4_mul(b, b);
        let j = fma4(c1, b, c2);
        let j = fma4(j, u, fma4(c3, b, c4));
        let j = fma4(j, u, f32x4_mul(c5, b));
        if i32x4_all_true(f32x4_le(f32x4_abs(n), f32x4_splat(126.0))) {
            store_f32(&mut x[i..], fma4(j, k, k));
        } else {
            super::float::exp_shifted(&mut x[i..i + 4], max);
        }
    }
    super::float::exp_shifted(&mut x[whole..], max);
}
