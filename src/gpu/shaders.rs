//! WGSL of the GPU kernels, assembled per weight type from one skeleton: the bindings, the
//! byte readers over `array<u32>`, the type's dot product over one 32-weight unit, the row
//! loop that spreads a row's units over a group of threads, and the tree sum.

use crate::tensor::WeightType;

/// The weight types with a matrix-vector kernel.
pub const MATVEC_TYPES: [WeightType; 16] = [
    WeightType::F32,
    WeightType::F16,
    WeightType::BF16,
    WeightType::Q4_0,
    WeightType::Q4_1,
    WeightType::Q5_0,
    WeightType::Q5_1,
    WeightType::Q8_0,
    WeightType::Q2_K,
    WeightType::Q3_K,
    WeightType::Q4_K,
    WeightType::Q5_K,
    WeightType::Q6_K,
    WeightType::IQ4_NL,
    WeightType::IQ4_XS,
    WeightType::MXFP4,
];

/// Bindings and readers every kernel shares. Offsets are byte offsets into the weights.
const HEADER: &str = r#"
// `rows` of this dispatch's slice of the matrix; its outputs go to `row_offset..` of output
// rows of `total_rows` (a matrix larger than one binding is split into slices of rows).
// `batch`: input rows in `x` (and output rows in `y`). The expert kernel's words after it: see
// `EXPERT_MAIN`. `accumulate`: the products are added to what `y` holds (see `store`).
// `split_k`, `split_v`: where the second and third matrices' rows start, `row_bytes_v` the
// third's row bytes (see `qkv_matvec`).
struct Params {
    rows: u32, cols: u32, row_bytes: u32, groups_x: u32, total_rows: u32, row_offset: u32, batch: u32,
    pair_first: u32, expert_bytes: u32, pairs_per_input: u32, expert_first: u32, expert_end: u32,
    accumulate: u32, split_k: u32, split_v: u32, row_bytes_v: u32,
}
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// Where the current input row starts in `x` (a batch's row, set by `main`).
var<private> xbase: u32;

// Output `i` of a product: written, or added to where the dispatch accumulates (a block's last
// projection straight into the residual stream, saving the add's dispatch: `y[i] + v` is the
// sum the add kernel makes, in the same order, so the bits are its).
fn store(i: u32, v: f32) {
    if (p.accumulate != 0u) {
        y[i] = y[i] + v;
    } else {
        y[i] = v;
    }
}
"#;

/// The readers of the weights `w`, a byte, a half, a word at a time.
const READERS: &str = r#"
fn byte_at(i: u32) -> u32 { return (w[i >> 2u] >> ((i & 3u) << 3u)) & 0xffu; }
// An f16 at an even offset: both halves of a word are decoded, the right one kept.
fn half_at(i: u32) -> f32 { let v = unpack2x16float(w[i >> 2u]); return select(v.x, v.y, (i & 2u) != 0u); }
fn i8_at(i: u32) -> f32 { return f32(bitcast<i32>(byte_at(i) << 24u) >> 24u); }
fn u32_at(i: u32) -> u32 {
    return byte_at(i) | (byte_at(i + 1u) << 8u) | (byte_at(i + 2u) << 16u) | (byte_at(i + 3u) << 24u);
}
// A word's four bytes.
fn bytes4(v: u32) -> vec4<u32> { return (vec4<u32>(v) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u); }
// A word's four bytes as signed values.
fn i8x4(v: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(v) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}
"#;

/// `word_at` for any block size: four bytes from an even offset.
const WORD_AT: &str = r#"
// Four bytes from an even offset as one word, without a branch: blocks of 22, 34, 110 or 210
// bytes lie alternately on and halfway past a word boundary, so neighbouring threads would
// split on one. Halfway, the high half of w[k] and the low half of w[k + 1]; on a boundary
// `(hi << 1) << 31` is 0, and w[k] alone remains. In an unrolled loop each load serves two words.
fn word_at(i: u32) -> u32 {
    let k = i >> 2u;
    let s = (i & 2u) << 3u;
    return (w[k] >> s) | ((w[k + 1u] << 1u) << (31u - s));
}
"#;

/// `word_at` where a block is a whole number of words (Q4_1, Q2_K, Q4_K, Q5_K, IQ4_XS) and so
/// every word a kernel reads starts on a boundary: one load instead of two (the same word).
const ALIGNED_WORD_AT: &str = r#"
fn word_at(i: u32) -> u32 { return w[i >> 2u]; }
"#;

/// The inputs `x` as floats, with `x_at(i)` for input `i` and `x4(o)` for the four from `o`:
/// for float rows (any element) and the GEMM (which copies its tile element by element).
const X_FLOATS: &str = r#"
@group(0) @binding(1) var<storage, read> x: array<f32>;
fn x_at(i: u32) -> f32 { return x[i]; }
fn x4(o: u32) -> vec4<f32> { return vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]); }
"#;

/// The same readers over `x` as vectors of four, for the matrix-vector kernels of block rows
/// (a row of whole 32-weight units, so every `x4` starts on a vector): a unit's 32 inputs in 8
/// loads, where they took 32.
const X_VECTORS: &str = r#"
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
fn x_at(i: u32) -> f32 { return x[i >> 2u][i & 3u]; }
fn x4(o: u32) -> vec4<f32> { return x[o >> 2u]; }
"#;

/// The shared bindings and readers for a weight layout, with the inputs read as vectors where
/// `vectors` is asked and the rows are blocks.
fn header(layout: &Layout, vectors: bool) -> String {
    format!("{HEADER}{}{}", inputs(layout, vectors), readers(layout))
}

/// The inputs' readers: as vectors where `vectors` is asked and the rows are blocks.
fn inputs(layout: &Layout, vectors: bool) -> &'static str {
    if vectors && matches!(layout, Layout::Blocks { .. }) { X_VECTORS } else { X_FLOATS }
}

/// The readers of the weights for a layout.
fn readers(layout: &Layout) -> String {
    let aligned = matches!(layout, Layout::Blocks { bytes, .. } if bytes % 4 == 0);
    format!("{READERS}{}", if aligned { ALIGNED_WORD_AT } else { WORD_AT })
}

/// Weight rows a matrix-product workgroup takes, each with `WG / ROWS_PER_GROUP` threads (8 of
/// 64, the 8 a batch tile writes with): a row of Qwen3-0.6B's 1,024 columns has 32 units of 32
/// weights, 4 per thread; Gemma 3's 640 (its 262,144-row output matrix) has 20, 2 or 3 per
/// thread. With 16 threads a row, most of Gemma 3's took one unit and the sum took four halving
/// steps: on lavapipe its decode went from 2.1 to 2.8-3.0 tok/s with 8 (Qwen3 Q4_K_M 1.1 to 1.3).
/// One 64-thread workgroup per row, the first version, left most threads idle.
pub const ROWS_PER_GROUP: u32 = 8;

/// The decode entry point: `ROWS_PER_GROUP` weight rows per workgroup (groups past 65,535 in a
/// second dispatch dimension) and one input row (the third), each row's share summed by its
/// threads in workgroup memory.
const MAIN: &str = r#"
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let lanes = WG / ROWSu;
    let lane = t % lanes;
    let row = (group.y * p.groups_x + group.x) * ROWSu + t / lanes;
    xbase = group.z * p.cols;
    var sum = 0.0;
    if (row < p.rows) {
        sum = row_dot(row * p.row_bytes, lane, lanes);
    }
    partial[t] = sum;
    workgroupBarrier();
    for (var s = lanes / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[t] += partial[t + s];
        }
        workgroupBarrier();
    }
    if (lane == 0u && row < p.rows) {
        store(group.z * p.total_rows + p.row_offset + row, partial[t]);
    }
}
"#;

/// The decode entry point where the adapter has subgroups of at least a row's lanes: each row's
/// lanes sum their shares through register shuffles, with no workgroup memory and no barrier
/// (on lavapipe a barrier splits the whole workgroup's loop in two). The exchanges pair lanes
/// `s` apart, as the tree sum does: the same additions in the same order, the same bits.
const SUBGROUP_MAIN: &str = r#"
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let lanes = WG / ROWSu;
    let lane = t % lanes;
    let row = (group.y * p.groups_x + group.x) * ROWSu + t / lanes;
    xbase = group.z * p.cols;
    var sum = 0.0;
    if (row < p.rows) {
        sum = row_dot(row * p.row_bytes, lane, lanes);
    }
    for (var s = lanes / 2u; s > 0u; s = s >> 1u) {
        sum += subgroupShuffleXor(sum, s);
    }
    if (lane == 0u && row < p.rows) {
        store(group.z * p.total_rows + p.row_offset + row, sum);
    }
}
"#;

/// The gated feed-forward's decode entry point (see `gated_matvec`): `MAIN` with two sums a
/// row, the gate's and the up's, summed side by side, and the activation as the row is stored.
const GATED_MAIN: &str = r#"
var<workgroup> partial: array<vec2<f32>, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let lanes = WG / ROWSu;
    let lane = t % lanes;
    let row = (group.y * p.groups_x + group.x) * ROWSu + t / lanes;
    xbase = 0u;
    var sums = vec2<f32>(0.0);
    if (row < p.rows) {
        sums = vec2<f32>(row_dot(row * p.row_bytes, lane, lanes), row_dot_up(row * p.row_bytes, lane, lanes));
    }
    partial[t] = sums;
    workgroupBarrier();
    for (var s = lanes / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[t] += partial[t + s];
        }
        workgroupBarrier();
    }
    if (lane == 0u && row < p.rows) {
        var gate = partial[t].x;
        let up = partial[t].y;
        ACTIVATION
        y[p.row_offset + row] = gate;
    }
}
"#;

/// `GATED_MAIN` with subgroups (see `SUBGROUP_MAIN`).
const SUBGROUP_GATED_MAIN: &str = r#"
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let lanes = WG / ROWSu;
    let lane = t % lanes;
    let row = (group.y * p.groups_x + group.x) * ROWSu + t / lanes;
    xbase = 0u;
    var sums = vec2<f32>(0.0);
    if (row < p.rows) {
        sums = vec2<f32>(row_dot(row * p.row_bytes, lane, lanes), row_dot_up(row * p.row_bytes, lane, lanes));
    }
    for (var s = lanes / 2u; s > 0u; s = s >> 1u) {
        sums += subgroupShuffleXor(sums, s);
    }
    if (lane == 0u && row < p.rows) {
        var gate = sums.x;
        let up = sums.y;
        ACTIVATION
        y[p.row_offset + row] = gate;
    }
}
"#;

/// Input rows a batched workgroup takes (its third dispatch dimension counts groups of them).
pub const TILE_TOKENS: u32 = 8;

/// The short-batch entry point (longer batches take the GEMM): the decode kernel's rows and
/// threads, with 8 input rows, each weight row read from memory once and from cache for the
/// other seven (where one workgroup per input row streamed the whole matrix again for each),
/// and the eight sums reduced side by side. Each sum is the same arithmetic in the same order as `MAIN`'s, so a
/// batch gives exactly what its rows give one by one.
const TILE_MAIN: &str = r#"
var<workgroup> partial_lo: array<vec4<f32>, WG>;
var<workgroup> partial_hi: array<vec4<f32>, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let lanes = WG / ROWSu;
    let lane = t % lanes;
    let row = (group.y * p.groups_x + group.x) * ROWSu + t / lanes;
    let first = group.z * 8u;
    var sums: array<f32, 8>;
    if (row < p.rows) {
        for (var k = 0u; k < 8u; k++) {
            if (first + k < p.batch) {
                xbase = (first + k) * p.cols;
                sums[k] = row_dot(row * p.row_bytes, lane, lanes);
            }
        }
    }
    partial_lo[t] = vec4<f32>(sums[0], sums[1], sums[2], sums[3]);
    partial_hi[t] = vec4<f32>(sums[4], sums[5], sums[6], sums[7]);
    workgroupBarrier();
    for (var s = lanes / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial_lo[t] += partial_lo[t + s];
            partial_hi[t] += partial_hi[t + s];
        }
        workgroupBarrier();
    }
    // Lane k of a row writes the row's sum for input row `first + k` (lanes ≥ 8).
    if (lane < 8u && row < p.rows && first + lane < p.batch) {
        let sums4 = select(partial_hi[t - lane], partial_lo[t - lane], lane < 4u);
        store((first + lane) * p.total_rows + p.row_offset + row, sums4[lane & 3u]);
    }
}
"#;

/// `TILE_MAIN` with subgroups (see `SUBGROUP_MAIN`): the eight sums exchanged in registers.
const SUBGROUP_TILE_MAIN: &str = r#"
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let lanes = WG / ROWSu;
    let lane = t % lanes;
    let row = (group.y * p.groups_x + group.x) * ROWSu + t / lanes;
    let first = group.z * 8u;
    var sums: array<f32, 8>;
    if (row < p.rows) {
        for (var k = 0u; k < 8u; k++) {
            if (first + k < p.batch) {
                xbase = (first + k) * p.cols;
                sums[k] = row_dot(row * p.row_bytes, lane, lanes);
            }
        }
    }
    var lo = vec4<f32>(sums[0], sums[1], sums[2], sums[3]);
    var hi = vec4<f32>(sums[4], sums[5], sums[6], sums[7]);
    for (var s = lanes / 2u; s > 0u; s = s >> 1u) {
        lo += subgroupShuffleXor(lo, s);
        hi += subgroupShuffleXor(hi, s);
    }
    // Lane k of a row writes the row's sum for input row `first + k` (lanes ≥ 8): every lane
    // holds them all.
    if (lane < 8u && row < p.rows && first + lane < p.batch) {
        let sums4 = select(hi, lo, lane < 4u);
        store((first + lane) * p.total_rows + p.row_offset + row, sums4[lane & 3u]);
    }
}
"#;

/// The experts' matrix-vector entry point (llama.cpp's `MUL_MAT_ID`): a workgroup takes
/// `ROWS_PER_GROUP` rows of the expert that `ids` names for (token, slot) pair
/// `pair_first + z`, from the input row `pair / pairs_per_input` (a token's row for the gate and
/// up projections, the pair's own hidden row for the down projection), into output row `pair`.
/// The binding holds experts `expert_first..expert_end`, `expert_bytes` each (a stack larger
/// than a binding is bound a slice of whole experts at a time): a pair routed elsewhere is
/// left to another slice's dispatch.
const EXPERT_MAIN: &str = r#"
@group(0) @binding(3) var<storage, read> ids: array<u32>;
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let lanes = WG / ROWSu;
    let lane = t % lanes;
    let row = (group.y * p.groups_x + group.x) * ROWSu + t / lanes;
    let pair = p.pair_first + group.z;
    let expert = ids[pair];
    let here = expert >= p.expert_first && expert < p.expert_end;
    xbase = (pair / p.pairs_per_input) * p.cols;
    var sum = 0.0;
    if (row < p.rows && here) {
        sum = row_dot((expert - p.expert_first) * p.expert_bytes + row * p.row_bytes, lane, lanes);
    }
    partial[t] = sum;
    workgroupBarrier();
    for (var s = lanes / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial[t] += partial[t + s];
        }
        workgroupBarrier();
    }
    if (lane == 0u && row < p.rows && here) {
        y[pair * p.rows + row] = partial[t];
    }
}
"#;

/// The experts' entry point for batches: a workgroup takes `ROWS_PER_GROUP` rows of one expert
/// of the binding's slice for eight of the pairs routed to it, as `TILE_MAIN` takes eight input
/// rows: each weight row is read from memory once per eight pairs (not once per pair), and the
/// sums are `EXPERT_MAIN`'s. Along z, `batch` workgroups per expert (eight pairs each, enough
/// for a batch routing every token to it); those past an expert's pairs return at once. `order`
/// lists the pairs expert by expert, `offsets` where each expert's run starts
/// (`GROUP_BY_EXPERT`).
const EXPERT_TILE_MAIN: &str = r#"
@group(0) @binding(3) var<storage, read> order: array<u32>;
@group(0) @binding(4) var<storage, read> offsets: array<u32>;
var<workgroup> partial_lo: array<vec4<f32>, WG>;
var<workgroup> partial_hi: array<vec4<f32>, WG>;
var<workgroup> span: vec2<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let lanes = WG / ROWSu;
    let lane = t % lanes;
    let row = (group.y * p.groups_x + group.x) * ROWSu + t / lanes;
    let local = group.z / p.batch;
    let expert = p.expert_first + local;
    if (t == 0u) {
        span = vec2<u32>(offsets[expert] + 8u * (group.z % p.batch), offsets[expert + 1u]);
    }
    let pairs = workgroupUniformLoad(&span);
    if (pairs.x >= pairs.y) {
        return;
    }
    let first = pairs.x;
    let base = local * p.expert_bytes + row * p.row_bytes;
    var sums = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    if (row < p.rows) {
        for (var k = 0u; k < 8u; k++) {
            if (first + k < pairs.y) {
                xbase = (order[first + k] / p.pairs_per_input) * p.cols;
                sums[k] = row_dot(base, lane, lanes);
            }
        }
    }
    partial_lo[t] = vec4<f32>(sums[0], sums[1], sums[2], sums[3]);
    partial_hi[t] = vec4<f32>(sums[4], sums[5], sums[6], sums[7]);
    workgroupBarrier();
    for (var s = lanes / 2u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            partial_lo[t] += partial_lo[t + s];
            partial_hi[t] += partial_hi[t + s];
        }
        workgroupBarrier();
    }
    if (lane < 8u && row < p.rows && first + lane < pairs.y) {
        let sums4 = select(partial_hi[t - lane], partial_lo[t - lane], lane < 4u);
        y[order[first + lane] * p.rows + row] = sums4[lane & 3u];
    }
}
"#;

/// The (token, slot) pairs of a batch listed expert by expert (`order`, each expert's pairs in
/// pair order) and where each expert's run starts (`offsets`, `count + 1` of them): a thread per
/// expert, which finds its run's start by counting the pairs of the experts before it (no
/// barrier: on lavapipe one workgroup summing counts in workgroup memory took 15 ms a layer).
pub const GROUP_BY_EXPERT: &str = r#"
struct Params { pairs: u32, count: u32, unused0: u32, unused1: u32 }
@group(0) @binding(0) var<storage, read> ids: array<u32>;
@group(0) @binding(1) var<storage, read_write> order: array<u32>;
@group(0) @binding(2) var<storage, read_write> offsets: array<u32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let e = id.x;
    if (e >= p.count) {
        return;
    }
    var at = 0u;
    for (var i = 0u; i < p.pairs; i++) {
        at += select(0u, 1u, ids[i] < e);
    }
    offsets[e] = at;
    if (e + 1u == p.count) {
        offsets[p.count] = p.pairs;
    }
    for (var i = 0u; i < p.pairs; i++) {
        if (ids[i] == e) {
            order[at] = i;
            at += 1u;
        }
    }
}
"#;

/// A float row: thread `t` of `stride` takes elements `t`, `t + stride`, ...; `VALUE` reads
/// element `e`.
const FLOAT_ROW: &str = r#"
fn row_dot(base: u32, t: u32, stride: u32) -> f32 {
    var sum = 0.0;
    for (var e = t; e < p.cols; e += stride) {
        sum += VALUE * x[xbase + e];
    }
    return sum;
}
"#;

/// A row of blocks of `BYTES` bytes, `UNITS` units of 32 weights each: thread `t` of `stride`
/// takes units `t`, `t + stride`, ...; `UNIT` adds unit `g` of the block at byte `at` (its
/// inputs from `xo`) to `sum`.
const UNIT_ROW: &str = r#"
fn row_dot(base: u32, t: u32, stride: u32) -> f32 {
    var sum = 0.0;
    for (var u = t; u < p.cols / 32u; u += stride) {
        let at = base + (u / UNITS) * BYTES;
        let g = u % UNITS;
        let xo = xbase + 32u * u;
        UNIT
    }
    return sum;
}
"#;

/// IQ4_NL's 16 levels (ggml's `kvalues_iq4nl`), for IQ4_NL and IQ4_XS.
const IQ4_LEVELS: &str = r#"
var<private> levels: array<f32, 16> = array<f32, 16>(
    -127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
// The levels of four 4-bit indices.
fn levels4(q: vec4<u32>) -> vec4<f32> { return vec4<f32>(levels[q.x], levels[q.y], levels[q.z], levels[q.w]); }
"#;

/// MXFP4's levels (FP4's values doubled, ggml's `kvalues_mxfp4`), its scale, and words at any
/// byte offset (its blocks are 17 bytes).
const MXFP4_HELPERS: &str = r#"
var<private> levels: array<f32, 16> = array<f32, 16>(
    0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
fn levels4(q: vec4<u32>) -> vec4<f32> { return vec4<f32>(levels[q.x], levels[q.y], levels[q.z], levels[q.w]); }
// Half the E8M0 scale 2^(e - 127) (ggml's ggml_e8m0_to_fp32_half), to match the doubled levels.
fn e8m0_half(e: u32) -> f32 {
    if (e < 2u) { return bitcast<f32>(0x00200000u << e); }
    return bitcast<f32>((e - 1u) << 23u);
}
fn word_any(i: u32) -> u32 {
    let k = i >> 2u;
    let s = (i & 3u) << 3u;
    if (s == 0u) { return w[k]; }
    return (w[k] >> s) | (w[k + 1u] << (32u - s));
}
"#;

/// Q4_K's and Q5_K's 6-bit scale and min of group `g` (0..8), from the 12 bytes at `at`.
const K4_SCALES: &str = r#"
fn k4_scale_min(at: u32, g: u32) -> vec2<f32> {
    if (g < 4u) {
        return vec2<f32>(f32(byte_at(at + g) & 63u), f32(byte_at(at + g + 4u) & 63u));
    }
    let scale = (byte_at(at + g + 4u) & 15u) | ((byte_at(at + g - 4u) >> 6u) << 4u);
    let min = (byte_at(at + g + 4u) >> 4u) | ((byte_at(at + g) >> 6u) << 4u);
    return vec2<f32>(f32(scale), f32(min));
}
"#;

/// How a row of `weight_type` is read: float elements one by one, or blocks of `bytes` bytes
/// holding `units` runs of 32 weights each. A block type's unit is written twice, once per
/// kernel shape: `dot` adds its products with the inputs (from `xo`) to `sum`, in the order
/// that pins the matrix-vector kernels' results; `dequant` writes its 32 weights to workgroup
/// memory from `dst` (`put4`), for the tiled GEMM. Both read block `at`, unit `g`.
enum Layout {
    /// The expression of element `e` of the row at byte `base`.
    Float(&'static str),
    Blocks {
        bytes: u32,
        units: u32,
        helpers: Vec<&'static str>,
        dot: String,
        dequant: String,
        /// The 8-bit GEMM's form ([`gemm_q8`], empty elsewhere): the unit's 32 weights as
        /// signed bytes four to a word into `wq[dst..dst + 8]`, then the scales of its two
        /// halves and its offset's factor (what multiplies the inputs' sum) as f32 bits.
        pack: String,
    },
}

fn layout(weight_type: WeightType) -> Layout {
    let blocks = |bytes, units, helpers: &[&'static str], dot: &str, dequant: &str| Layout::Blocks {
        bytes,
        units,
        helpers: helpers.to_vec(),
        dot: dot.to_string(),
        dequant: dequant.to_string(),
        pack: String::new(),
    };
    match weight_type {
        WeightType::F32 => Layout::Float("bitcast<f32>(w[(base >> 2u) + e])"),
        WeightType::F16 => Layout::Float("half_at(base + 2u * e)"),
        WeightType::BF16 => {
            Layout::Float("bitcast<f32>(((w[(base + 2u * e) >> 2u] >> (((base + 2u * e) & 2u) << 3u)) & 0xffffu) << 16u)")
        }
        WeightType::Q4_0 => blocks(
            18,
            1,
            &[],
            "let d = half_at(at);
        var s = 0.0;
        for (var j = 0u; j < 16u; j += 4u) {
            let q = bytes4(word_at(at + 2u + j));
            s += dot(vec4<f32>(q & vec4<u32>(15u)) - 8.0, x4(xo + j))
                + dot(vec4<f32>(q >> vec4<u32>(4u)) - 8.0, x4(xo + j + 16u));
        }
        sum += d * s;",
            "let d = half_at(at);
    for (var j = 0u; j < 16u; j += 4u) {
        let q = bytes4(word_at(at + 2u + j));
        put4(dst + j, d * (vec4<f32>(q & vec4<u32>(15u)) - 8.0));
        put4(dst + j + 16u, d * (vec4<f32>(q >> vec4<u32>(4u)) - 8.0));
    }",
        ),
        WeightType::Q4_1 => blocks(
            20,
            1,
            &[],
            "let d = half_at(at);
        let m = half_at(at + 2u);
        var s = 0.0;
        var sx = 0.0;
        for (var j = 0u; j < 16u; j += 4u) {
            let q = bytes4(word_at(at + 4u + j));
            let low = x4(xo + j);
            let high = x4(xo + j + 16u);
            s += dot(vec4<f32>(q & vec4<u32>(15u)), low) + dot(vec4<f32>(q >> vec4<u32>(4u)), high);
            sx += dot(low + high, vec4<f32>(1.0));
        }
        sum += d * s + m * sx;",
            "let d = half_at(at);
    let m = half_at(at + 2u);
    for (var j = 0u; j < 16u; j += 4u) {
        let q = bytes4(word_at(at + 4u + j));
        put4(dst + j, d * vec4<f32>(q & vec4<u32>(15u)) + m);
        put4(dst + j + 16u, d * vec4<f32>(q >> vec4<u32>(4u)) + m);
    }",
        ),
        WeightType::Q5_0 => blocks(
            22,
            1,
            &[Q5_BITS],
            "let d = half_at(at);
        let qh = u32_at(at + 2u);
        var s = 0.0;
        for (var j = 0u; j < 16u; j += 4u) {
            let q = q5_pair(word_at(at + 6u + j), qh, j);
            s += dot(vec4<f32>(q[0]) - 16.0, x4(xo + j)) + dot(vec4<f32>(q[1]) - 16.0, x4(xo + j + 16u));
        }
        sum += d * s;",
            "let d = half_at(at);
    let qh = u32_at(at + 2u);
    for (var j = 0u; j < 16u; j += 4u) {
        let q = q5_pair(word_at(at + 6u + j), qh, j);
        put4(dst + j, d * (vec4<f32>(q[0]) - 16.0));
        put4(dst + j + 16u, d * (vec4<f32>(q[1]) - 16.0));
    }",
        ),
        WeightType::Q5_1 => blocks(
            24,
            1,
            &[Q5_BITS],
            "let d = half_at(at);
        let m = half_at(at + 2u);
        let qh = u32_at(at + 4u);
        var s = 0.0;
        var sx = 0.0;
        for (var j = 0u; j < 16u; j += 4u) {
            let q = q5_pair(word_at(at + 8u + j), qh, j);
            let xl = x4(xo + j);
            let xh = x4(xo + j + 16u);
            s += dot(vec4<f32>(q[0]), xl) + dot(vec4<f32>(q[1]), xh);
            sx += dot(xl + xh, vec4<f32>(1.0));
        }
        sum += d * s + m * sx;",
            "let d = half_at(at);
    let m = half_at(at + 2u);
    let qh = u32_at(at + 4u);
    for (var j = 0u; j < 16u; j += 4u) {
        let q = q5_pair(word_at(at + 8u + j), qh, j);
        put4(dst + j, d * vec4<f32>(q[0]) + m);
        put4(dst + j + 16u, d * vec4<f32>(q[1]) + m);
    }",
        ),
        WeightType::Q8_0 => blocks(
            34,
            1,
            &[],
            // The 32 quants as 8 words from 9 loads (every other block starts halfway into a
            // word): each word shares a load with the next, as `word_at` reads them.
            "let d = half_at(at);
        let shift = ((at + 2u) & 2u) << 3u;
        let first = (at + 2u) >> 2u;
        var low = w[first];
        var s = 0.0;
        for (var j = 0u; j < 8u; j++) {
            let high = w[first + j + 1u];
            s += dot(i8x4((low >> shift) | ((high << 1u) << (31u - shift))), x4(xo + 4u * j));
            low = high;
        }
        sum += d * s;",
            "let d = half_at(at);
    for (var j = 0u; j < 32u; j += 4u) {
        put4(dst + j, d * i8x4(word_at(at + 2u + j)));
    }",
        ),
        WeightType::Q2_K => blocks(
            84,
            8,
            &[],
            "let d = half_at(at + 80u);
        let dmin = half_at(at + 82u);
        for (var h = 0u; h < 2u; h++) {
            let group = 2u * g + h;
            let sc = byte_at(at + group);
            let first = at + 16u + 32u * (group / 8u) + 16u * h;
            let shift = 2u * ((group / 2u) % 4u);
            var s = 0.0;
            var sx = 0.0;
            for (var k = 0u; k < 16u; k++) {
                let v = x_at(xo + 16u * h + k);
                s += f32((byte_at(first + k) >> shift) & 3u) * v;
                sx += v;
            }
            sum += d * f32(sc & 15u) * s - dmin * f32(sc >> 4u) * sx;
        }",
            "let d = half_at(at + 80u);
    let dmin = half_at(at + 82u);
    for (var h = 0u; h < 2u; h++) {
        let group = 2u * g + h;
        let sc = byte_at(at + group);
        let first = at + 16u + 32u * (group / 8u) + 16u * h;
        let shift = 2u * ((group / 2u) % 4u);
        let scale = d * f32(sc & 15u);
        let offset = dmin * f32(sc >> 4u);
        for (var k = 0u; k < 16u; k += 4u) {
            let q = (bytes4(word_at(first + k)) >> vec4<u32>(shift)) & vec4<u32>(3u);
            put4(dst + 16u * h + k, scale * vec4<f32>(q) - offset);
        }
    }",
        ),
        WeightType::Q3_K => blocks(
            110,
            8,
            &[Q3_SCALE],
            "let d = half_at(at + 108u);
        let first = at + 32u + 32u * (g / 4u);
        let shift = 2u * (g % 4u);
        for (var half = 0u; half < 2u; half++) {
            let scale = q3_scale(at, 2u * g + half);
            var s = 0.0;
            for (var k = 16u * half; k < 16u * half + 16u; k++) {
                let q = i32((byte_at(first + k) >> shift) & 3u)
                    - select(4, 0, ((byte_at(at + k) >> g) & 1u) != 0u);
                s += f32(q) * x_at(xo + k);
            }
            sum += d * scale * s;
        }",
            "let d = half_at(at + 108u);
    let first = at + 32u + 32u * (g / 4u);
    let shift = 2u * (g % 4u);
    for (var half = 0u; half < 2u; half++) {
        let scale = d * q3_scale(at, 2u * g + half);
        for (var k = 16u * half; k < 16u * half + 16u; k += 4u) {
            let q = (bytes4(word_at(first + k)) >> vec4<u32>(shift)) & vec4<u32>(3u);
            let kept = ((bytes4(word_at(at + k)) >> vec4<u32>(g)) & vec4<u32>(1u)) != vec4<u32>(0u);
            put4(dst + k, scale * (vec4<f32>(q) - select(vec4<f32>(4.0), vec4<f32>(0.0), kept)));
        }
    }",
        ),
        // Q5_K is Q4_K with a fifth bit per weight in `qh` (32 bytes before the nibbles).
        WeightType::Q4_K => k4_layout(144, 16, ""),
        WeightType::Q5_K => k4_layout(
            176,
            48,
            " | (((bytes4(word_at(at + 16u + k)) >> vec4<u32>(g)) & vec4<u32>(1u)) << vec4<u32>(4u))",
        ),
        WeightType::Q6_K => blocks(
            210,
            8,
            &[Q6_BITS],
            "let d = half_at(at + 208u);
        for (var part = 0u; part < 2u; part++) {
            let scale = i8_at(at + 192u + 2u * g + part);
            var s = 0.0;
            for (var k = 16u * part; k < 16u * part + 16u; k += 4u) {
                s += dot(q6x4(at, g, k), x4(xo + k));
            }
            sum += d * scale * s;
        }",
            "let d = half_at(at + 208u);
    for (var part = 0u; part < 2u; part++) {
        let scale = d * i8_at(at + 192u + 2u * g + part);
        for (var k = 16u * part; k < 16u * part + 16u; k += 4u) {
            put4(dst + k, scale * q6x4(at, g, k));
        }
    }",
        ),
        WeightType::IQ4_NL => blocks(
            18,
            1,
            &[IQ4_LEVELS],
            "let d = half_at(at);
        var s = 0.0;
        for (var j = 0u; j < 16u; j += 4u) {
            let q = bytes4(word_at(at + 2u + j));
            s += dot(levels4(q & vec4<u32>(15u)), x4(xo + j)) + dot(levels4(q >> vec4<u32>(4u)), x4(xo + j + 16u));
        }
        sum += d * s;",
            "let d = half_at(at);
    for (var j = 0u; j < 16u; j += 4u) {
        let q = bytes4(word_at(at + 2u + j));
        put4(dst + j, d * levels4(q & vec4<u32>(15u)));
        put4(dst + j + 16u, d * levels4(q >> vec4<u32>(4u)));
    }",
        ),
        WeightType::MXFP4 => blocks(
            17,
            1,
            &[MXFP4_HELPERS],
            "let d = e8m0_half(byte_at(at));
        var s = 0.0;
        for (var j = 0u; j < 16u; j += 4u) {
            let q = bytes4(word_any(at + 1u + j));
            s += dot(levels4(q & vec4<u32>(15u)), x4(xo + j)) + dot(levels4(q >> vec4<u32>(4u)), x4(xo + j + 16u));
        }
        sum += d * s;",
            "let d = e8m0_half(byte_at(at));
    for (var j = 0u; j < 16u; j += 4u) {
        let q = bytes4(word_any(at + 1u + j));
        put4(dst + j, d * levels4(q & vec4<u32>(15u)));
        put4(dst + j + 16u, d * levels4(q >> vec4<u32>(4u)));
    }",
        ),
        WeightType::IQ4_XS => blocks(
            136,
            8,
            &[IQ4_LEVELS, IQ4_XS_SCALE],
            "let d = half_at(at);
        let scale = iq4_xs_scale(at, g);
        var s = 0.0;
        for (var j = 0u; j < 16u; j += 4u) {
            let q = bytes4(word_at(at + 8u + 16u * g + j));
            s += dot(levels4(q & vec4<u32>(15u)), x4(xo + j)) + dot(levels4(q >> vec4<u32>(4u)), x4(xo + j + 16u));
        }
        sum += d * scale * s;",
            "let scale = half_at(at) * iq4_xs_scale(at, g);
    for (var j = 0u; j < 16u; j += 4u) {
        let q = bytes4(word_at(at + 8u + 16u * g + j));
        put4(dst + j, scale * levels4(q & vec4<u32>(15u)));
        put4(dst + j + 16u, scale * levels4(q >> vec4<u32>(4u)));
    }",
        ),
        other => unreachable!("no matrix kernel for {other:?}: not in MATVEC_TYPES"),
    }
}

/// Q4_K and Q5_K: eight groups of 32 with 6-bit scales and mins; nibbles from byte `nibbles`
/// of the block, each widened by `fifth_bit`.
fn k4_layout(bytes: u32, nibbles: u32, fifth_bit: &str) -> Layout {
    let dot = "let d = half_at(at);
        let dmin = half_at(at + 2u);
        let sm = k4_scale_min(at + 4u, g);
        let first = at + NIBBLESu + 32u * (g / 2u);
        let shift = 4u * (g % 2u);
        var s = 0.0;
        var sx = 0.0;
        for (var k = 0u; k < 32u; k += 4u) {
            let v = x4(xo + k);
            let q = (bytes4(word_at(first + k)) >> vec4<u32>(shift)) & vec4<u32>(15u);
            s += dot(vec4<f32>(qFIFTH), v);
            sx += dot(v, vec4<f32>(1.0));
        }
        sum += d * sm.x * s - dmin * sm.y * sx;";
    let dequant = "let sm = k4_scale_min(at + 4u, g);
    let scale = half_at(at) * sm.x;
    let offset = half_at(at + 2u) * sm.y;
    let first = at + NIBBLESu + 32u * (g / 2u);
    let shift = 4u * (g % 2u);
    for (var k = 0u; k < 32u; k += 4u) {
        let q = (bytes4(word_at(first + k)) >> vec4<u32>(shift)) & vec4<u32>(15u);
        put4(dst + k, scale * vec4<f32>(qFIFTH) - offset);
    }";
    let fill = |code: &str| code.replace("NIBBLES", &nibbles.to_string()).replace("FIFTH", fifth_bit);
    Layout::Blocks {
        bytes,
        units: 8,
        helpers: vec![K4_SCALES],
        dot: fill(dot),
        dequant: fill(dequant),
        pack: String::new(),
    }
}

/// The block types whose units also dot with inputs quantized to 8 bits ([`quantize_q8`]),
/// through `dot4I8Packed`: four products of bytes and their sum in one instruction where the
/// adapter has integer dot products (`OpSDot`, DP4A), otherwise as naga writes it out. The
/// other types' rows always read floats.
pub const Q8_DOT_TYPES: [WeightType; 8] = [
    WeightType::Q4_0,
    WeightType::Q4_1,
    WeightType::Q5_0,
    WeightType::Q5_1,
    WeightType::Q8_0,
    WeightType::Q4_K,
    WeightType::Q5_K,
    WeightType::Q6_K,
];

/// The inputs `x` quantized to 8 bits, 32 to a block as ggml's Q8_1 (three vectors a block:
/// the quants four to a word, then the scale `d` and `d · Σq` as floats), and the helpers
/// that make a block's weights signed bytes four to a word.
const X_Q8: &str = r#"
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;
// Block `b`'s quants: words 0..4 hold quants 0..16, words 4..8 quants 16..32.
fn xq(b: u32) -> array<vec4<u32>, 2> { return array<vec4<u32>, 2>(x[3u * b], x[3u * b + 1u]); }
// Block `b`'s scale and its scale times the sum of its quants (the sum of its inputs).
fn xq_scales(b: u32) -> vec2<f32> { return bitcast<vec2<f32>>(x[3u * b + 2u].xy); }
// Unsigned values in each byte, less 8, 16 or 32, as signed bytes (no byte carries into the next).
fn less8(v: u32) -> u32 { return (v + 0x78787878u) ^ 0x80808080u; }
fn less16(v: u32) -> u32 { return (v + 0x70707070u) ^ 0x80808080u; }
fn less32(v: u32) -> u32 { return (v + 0x60606060u) ^ 0x80808080u; }
// Bits 0..4 of `h` as bit 4 of bytes 0..4.
fn fifth_bits(h: u32) -> u32 { return ((h & 1u) | ((h & 2u) << 7u) | ((h & 4u) << 14u) | ((h & 8u) << 21u)) << 4u; }
"#;

/// Q6_K's weights k..k+4 of unit `g` of the block at `at`, less 32, as signed bytes (`q6x4`'s).
const Q6_PACKED: &str = r#"
fn q6_packed(at: u32, g: u32, k: u32) -> u32 {
    let half = g / 4u;
    let quarter = g % 4u;
    let low = at + 64u * half + 32u * (quarter % 2u);
    let high = at + 128u + 32u * half;
    let nibble = (word_at(low + k) >> (4u * (quarter / 2u))) & 0x0f0f0f0fu;
    let top = (word_at(high + k) >> (2u * quarter)) & 0x03030303u;
    return less32(nibble | (top << 4u));
}
"#;

/// `weight_type`'s layout with its unit dotted against 8-bit inputs ([`X_Q8`]): each unit's
/// exact integer sums of products, scaled by the weights' and the inputs' scales (and the
/// offsets' terms through the inputs' sums), as ggml's CPU dots Q4_0 with Q8_0 and Q4_1 with
/// Q8_1. `UNIT_ROW` gives the unit's first input at `xo`, a multiple of 32: its block `xo / 32`.
fn q8_layout(weight_type: WeightType) -> Layout {
    let Layout::Blocks { bytes, units, mut helpers, dequant, .. } = layout(weight_type) else {
        unreachable!("float rows read floats")
    };
    // The GEMM's unit ends with its halves' scales and its offset's factor.
    let scales = |low: &str, high: &str, offset: &str| {
        format!(
            "wq[dst + 8u] = bitcast<u32>({low});
    wq[dst + 9u] = bitcast<u32>({high});
    wq[dst + 10u] = bitcast<u32>({offset});"
        )
    };
    // Q4_0 to Q5_1: word j of the low nibbles and of the high, from the quants at `offset`.
    let legacy = |offset: u32, values: &str, scale: &str, factor: &str| {
        let low = values.replace("HALF", "q & 0x0f0f0f0fu").replace("BITS", "qh >> (4u * j)");
        let high = values.replace("HALF", "(q >> 4u) & 0x0f0f0f0fu").replace("BITS", "qh >> (16u + 4u * j)");
        let dot = format!(
            "let b = xo >> 5u;
        let a = xq(b);
        var si = 0;
        for (var j = 0u; j < 4u; j++) {{
            let q = word_at(at + {offset}u + 4u * j);
            si += dot4I8Packed({low}, a[0][j]) + dot4I8Packed({high}, a[1][j]);
        }}
        {scale}"
        );
        let pack = format!(
            "for (var j = 0u; j < 4u; j++) {{
        let q = word_at(at + {offset}u + 4u * j);
        wq[dst + j] = {low};
        wq[dst + 4u + j] = {high};
    }}
    {}",
            scales("half_at(at)", "half_at(at)", factor)
        );
        (dot, pack)
    };
    let scaled = "sum += half_at(at) * xq_scales(b).x * f32(si);";
    let offset = "let ds = xq_scales(b);
        sum += half_at(at) * ds.x * f32(si) + half_at(at + 2u) * ds.y;";
    let k4 = |nibbles: u32, fifth: &str| {
        let prelude = format!(
            "let sm = k4_scale_min(at + 4u, g);
        let first = at + {nibbles}u + 32u * (g / 2u);
        let shift = 4u * (g % 2u);"
        );
        let word = format!("((word_at(first + 4u * j) >> shift) & 0x0f0f0f0fu){fifth}");
        let dot = format!(
            "let b = xo >> 5u;
        let a = xq(b);
        {prelude}
        var si = 0;
        for (var j = 0u; j < 8u; j++) {{
            si += dot4I8Packed({word}, a[j >> 2u][j & 3u]);
        }}
        let ds = xq_scales(b);
        sum += half_at(at) * sm.x * ds.x * f32(si) - half_at(at + 2u) * sm.y * ds.y;"
        );
        let pack = format!(
            "{prelude}
    for (var j = 0u; j < 8u; j++) {{
        wq[dst + j] = {word};
    }}
    {}",
            scales("half_at(at) * sm.x", "half_at(at) * sm.x", "-half_at(at + 2u) * sm.y")
        );
        (dot, pack)
    };
    let (dot, pack) = match weight_type {
        WeightType::Q4_0 => legacy(2, "less8(HALF)", scaled, "0.0"),
        WeightType::Q4_1 => legacy(4, "HALF", offset, "half_at(at + 2u)"),
        WeightType::Q5_0 => {
            let (dot, pack) = legacy(6, "less16((HALF) | fifth_bits(BITS))", scaled, "0.0");
            let qh = "let qh = u32_at(at + 2u);\n        ";
            (format!("{qh}{dot}"), format!("{qh}{pack}"))
        }
        WeightType::Q5_1 => {
            let (dot, pack) = legacy(8, "(HALF) | fifth_bits(BITS)", offset, "half_at(at + 2u)");
            let qh = "let qh = u32_at(at + 4u);\n        ";
            (format!("{qh}{dot}"), format!("{qh}{pack}"))
        }
        // The 32 quants as 8 words from 9 loads, as the float unit reads them (the GEMM reads
        // each unit once a tile, and takes `word_at`'s two loads a word).
        WeightType::Q8_0 => (
            "let b = xo >> 5u;
        let a = xq(b);
        let shift = ((at + 2u) & 2u) << 3u;
        let first = (at + 2u) >> 2u;
        var low = w[first];
        var si = 0;
        for (var j = 0u; j < 8u; j++) {
            let high = w[first + j + 1u];
            si += dot4I8Packed((low >> shift) | ((high << 1u) << (31u - shift)), a[j >> 2u][j & 3u]);
            low = high;
        }
        sum += half_at(at) * xq_scales(b).x * f32(si);"
                .to_string(),
            format!(
                "for (var j = 0u; j < 8u; j++) {{
        wq[dst + j] = word_at(at + 2u + 4u * j);
    }}
    {}",
                scales("half_at(at)", "half_at(at)", "0.0")
            ),
        ),
        WeightType::Q4_K => k4(16, ""),
        WeightType::Q5_K => k4(48, " | (((word_at(at + 16u + 4u * j) >> g) & 0x01010101u) << 4u)"),
        WeightType::Q6_K => {
            helpers.push(Q6_PACKED);
            let dot = "let b = xo >> 5u;
        let a = xq(b);
        let ds = xq_scales(b);
        let d = half_at(at + 208u);
        for (var part = 0u; part < 2u; part++) {
            let scale = i8_at(at + 192u + 2u * g + part);
            var si = 0;
            for (var j = 0u; j < 4u; j++) {
                si += dot4I8Packed(q6_packed(at, g, 16u * part + 4u * j), a[part][j]);
            }
            sum += d * scale * ds.x * f32(si);
        }"
            .to_string();
            let pack = format!(
                "let d = half_at(at + 208u);
    for (var j = 0u; j < 8u; j++) {{
        wq[dst + j] = q6_packed(at, g, 4u * j);
    }}
    {}",
                scales("d * i8_at(at + 192u + 2u * g)", "d * i8_at(at + 193u + 2u * g)", "0.0")
            );
            (dot, pack)
        }
        other => unreachable!("no 8-bit dot for {other:?}: not in Q8_DOT_TYPES"),
    };
    Layout::Blocks { bytes, units, helpers, dot, dequant, pack }
}

/// The layout a matrix kernel reads `weight_type` with, and its inputs' readers: floats
/// (as vectors of four for block rows), or 8-bit blocks where `q8`.
fn kernel_layout(weight_type: WeightType, q8: bool) -> (Layout, &'static str) {
    if q8 {
        (q8_layout(weight_type), X_Q8)
    } else {
        let layout = layout(weight_type);
        let x = inputs(&layout, true);
        (layout, x)
    }
}

/// Inputs to 8 bits for [`Q8_DOT_TYPES`]' kernels, exactly as ggml's CPU quantizes them for
/// the weight type's dot product (`vec_dot_type`, [`q8_format`]), so that the integer sums are
/// llama.cpp's and only the float arithmetic around them differs: a thread per ggml block (of
/// `blocks` over every input row, each row a whole number of them). Q8_0 and Q8_1: 32 values,
/// `d = max |x| / 127` rounded to f16, quants `round(x · 127 / max |x|)` (to even, as ggml's
/// AVX2 and wasm SIMD code rounds); Q8_1 adds `d · Σq` (with the unrounded `d`) rounded to f16.
/// Q8_K: 256 values, scaled so that the one of largest magnitude (the first) is -127, `d` kept
/// as f32. Stored as blocks of 32 ([`Q8_BLOCK`]), each with its own `d · Σq`. Where an adapter's
/// division is not correctly rounded (WGSL allows 2.5 ULP), a quant on a half may differ.
pub fn quantize_q8() -> String {
    format!(
        "{}{}{}",
        r#"
struct Params { blocks: u32, groups_x: u32, format: u32, unused: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<vec4<u32>>;
@group(0) @binding(2) var<uniform> p: Params;
"#,
        F16_ROUND,
        r#"
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let b = (group.y * p.groups_x + group.x) * 64u + t;
    if (b >= p.blocks) {
        return;
    }
    let block_len = select(32u, 256u, p.format == 2u);
    QUANTIZE
}
"#
        .replace("QUANTIZE", &q8_block("x[i]", "block_len * b", "b * (block_len / 32u)"))
    )
}

/// [`q8_format`]'s codes, as the kernels read them from their parameters.
const Q8_0_FORMAT: u32 = 0;
const Q8_1_FORMAT: u32 = 1;
const Q8_K_FORMAT: u32 = 2;

/// How [`quantize_q8`] quantizes the inputs of a product with `weight_type` (one of
/// [`Q8_DOT_TYPES`]): ggml's `vec_dot_type` for it, as a kernel parameter.
pub fn q8_format(weight_type: WeightType) -> u32 {
    use crate::tensor::ActivationType;
    match weight_type.activation_type() {
        ActivationType::Q8_1 => Q8_1_FORMAT,
        ActivationType::Q8_K => Q8_K_FORMAT,
        _ => Q8_0_FORMAT,
    }
}

/// Values in a block of [`q8_format`] `format`: 32, or Q8_K's 256.
pub fn q8_block_len(format: u32) -> usize {
    if format == Q8_K_FORMAT { 256 } else { 32 }
}

/// f16's rounding (to nearest, ties to even) of a non-negative f32, kept as an f32: written out,
/// because WGSL leaves `pack2x16float`'s rounding to the implementation.
const F16_ROUND: &str = r#"
fn f16_round(v: f32) -> f32 {
    if (v < 6.103515625e-05) {
        // Subnormal halves: steps of 2^-24 (both factors are powers of two: exact).
        return round(v * 16777216.0) * 5.9604644775390625e-08;
    }
    let bits = bitcast<u32>(v);
    let rounded = bitcast<f32>((bits + 0xfffu + ((bits >> 13u) & 1u)) & 0xffffe000u);
    // Past f16's range: infinity (made at run time: Tint refuses an infinite constant).
    return select(rounded, bitcast<f32>(0x7f800000u | (bits & 0u)), rounded > 65504.0);
}
"#;

/// [`F16_ROUND`] for either sign (with it).
const F16_ROUND_SIGNED: &str = r#"
fn f16_round_signed(v: f32) -> f32 {
    let rounded = f16_round(abs(v));
    return select(rounded, -rounded, v < 0.0);
}
"#;

/// WGSL statements that quantize one ggml block of `p.format` ([`quantize_q8`]) whose value
/// `i` is `value` (an expression of `i`), from value `first`, into the 32-value records of `q`
/// from `record`: each the quants four to a word, then the scale and the scale times their
/// sum as f32 bits. The values are read twice (for the scale, then the quants), not held.
fn q8_block(value: &str, first: &str, record: &str) -> String {
    r#"{
        let k_format = p.format == Q8_K_FORMATu;
        let n = select(32u, 256u, k_format);
        let start = FIRST;
        var amax = 0.0;
        var signed_max = 0.0;
        for (var j = 0u; j < n; j++) {
            let i = start + j;
            let v = VALUE;
            if (abs(v) > amax) {
                amax = abs(v);
                signed_max = v;
            }
        }
        var d = amax / 127.0;
        var inverse = select(0.0, 127.0 / amax, amax > 0.0);
        if (k_format) {
            inverse = select(0.0, -127.0 / signed_max, amax > 0.0);
            d = select(0.0, 1.0 / inverse, amax > 0.0);
        }
        let stored_d = select(f16_round(d), d, k_format);
        for (var part = 0u; part < n / 32u; part++) {
            var words = array<u32, 8>();
            var total = 0;
            for (var j = 0u; j < 32u; j++) {
                let i = start + 32u * part + j;
                let v = VALUE;
                let quant = min(i32(round(v * inverse)), 127);
                total += quant;
                words[j / 4u] |= (bitcast<u32>(quant) & 0xffu) << (8u * (j % 4u));
            }
            let at = 3u * (RECORD + part);
            let sum = f32(total) * d;
            q[at] = vec4<u32>(words[0], words[1], words[2], words[3]);
            q[at + 1u] = vec4<u32>(words[4], words[5], words[6], words[7]);
            q[at + 2u] = vec4<u32>(bitcast<u32>(stored_d), bitcast<u32>(select(f16_round(abs(sum)) * sign(sum), sum, k_format)), 0u, 0u);
        }
    }"#
    .replace("Q8_K_FORMAT", &Q8_K_FORMAT.to_string())
    .replace("FIRST", first)
    .replace("RECORD", record)
    .replace("VALUE", value)
}

/// Bytes [`quantize_q8`] writes for `inputs` inputs (a multiple of 32): 48 a block.
pub const fn q8_bytes(inputs: usize) -> usize {
    inputs / 32 * 48
}

/// A row's dot product with the input row at `xbase` (`row_dot`) for a weight layout.
fn row_dot(layout: Layout) -> String {
    match layout {
        Layout::Float(value) => FLOAT_ROW.replace("VALUE", value),
        Layout::Blocks { bytes, units, helpers, dot, .. } => format!(
            "{}{}",
            helpers.concat(),
            UNIT_ROW
                .replace("UNITS", &format!("{units}u"))
                .replace("BYTES", &format!("{bytes}u"))
                .replace("UNIT", &dot)
        ),
    }
}

/// The matrix product kernel for `weight_type`, `workgroup` threads wide (a power of two): one
/// input row per workgroup (decode), or with `tiled` [`TILE_TOKENS`] of them (short batches);
/// rows summed through `subgroups` (whose size must be at least a row's lanes) or workgroup
/// memory.
pub fn matmul(weight_type: WeightType, workgroup: u32, tiled: bool, subgroups: bool, q8: bool) -> String {
    let (layout, x) = kernel_layout(weight_type, q8);
    let header = format!("{HEADER}{x}{}", readers(&layout));
    let row = row_dot(layout);
    // No `enable subgroups;`: naga takes subgroup calls without it (and refuses it), and in a
    // browser wgpu 30 never offers subgroups (its WebGPU backend does not map the feature).
    let main = match (subgroups, tiled) {
        (false, false) => MAIN,
        (false, true) => TILE_MAIN,
        (true, false) => SUBGROUP_MAIN,
        (true, true) => SUBGROUP_TILE_MAIN,
    };
    format!("{header}{row}{main}")
        .replace("WG", &format!("{workgroup}u"))
        .replace("ROWS", &ROWS_PER_GROUP.to_string())
}

/// The gated feed-forward's decode kernel for `weight_type` (gate and up of one type): each
/// row's gate and up products side by side, from the same inputs, and the activation `body`
/// (an element-wise body over `x[i]`, the gate, and `y[i]`, the up) applied as they are
/// stored, where three dispatches made them: each sum is the same additions in the same order
/// as `MAIN`'s (or `SUBGROUP_MAIN`'s), so the bits are the same. Bindings: the gate's
/// weights, `x`, the up's weights (`w_up`, read by a second copy of the readers and the row
/// function: WGSL functions take no storage pointers), `y`, the parameters.
pub fn gated_matvec(
    weight_type: WeightType,
    workgroup: u32,
    subgroups: bool,
    q8: bool,
    body: &str,
) -> String {
    let (layout, x) = kernel_layout(weight_type, q8);
    let reading = format!("{}{}", readers(&layout), row_dot(layout));
    let activation = body.replace("x[i]", "gate").replace("y[i]", "up");
    let main = if subgroups { SUBGROUP_GATED_MAIN } else { GATED_MAIN };
    format!(
        "{HEADER}{x}{reading}{}@group(0) @binding(2) var<storage, read> w_up: array<u32>;\n{main}",
        renamed(&reading, "_up")
    )
    .replace("@binding(3) var<uniform>", "@binding(4) var<uniform>")
    .replace("@binding(2) var<storage, read_write> y", "@binding(3) var<storage, read_write> y")
    .replace("ACTIVATION", &activation)
    .replace("WG", &format!("{workgroup}u"))
    .replace("ROWS", &ROWS_PER_GROUP.to_string())
}

/// A layer's query, key and value projections in one decode dispatch (one slice each; the
/// values' matrix may be of another block type, as Q4_K_M files' Q6_K `attn_v`, with rows of
/// `row_bytes_v`): rows `0..split_k` are the queries' (weights `w`, out to `y`),
/// `split_k..split_v` the keys' (`w_k`, `y_k`), the rest the values' (`w_v`, `y_v`), each row's
/// sum `MAIN`'s (or `SUBGROUP_MAIN`'s), so the bits are the three dispatches'. Bindings: `w`,
/// `x`, `w_k`, `w_v`, `y`, `y_k`, `y_v`, the parameters. None where the two types read their
/// inputs differently (a float type beside a block type; with `q8`, both must have 8-bit units);
/// two float types read them alike and fuse.
pub fn qkv_matvec(
    qk_type: WeightType,
    v_type: WeightType,
    workgroup: u32,
    subgroups: bool,
    q8: bool,
) -> Option<String> {
    let ((layout, x), (v_layout, v_x)) = (kernel_layout(qk_type, q8), kernel_layout(v_type, q8));
    // Both read their inputs alike: one type, or two block types (Q4_K_M's Q6_K values).
    if x != v_x {
        return None;
    }
    let reading = format!("{}{}", readers(&layout), row_dot(layout));
    let v_reading = format!("{}{}", readers(&v_layout), row_dot(v_layout));
    let mut main = String::from(if subgroups { SUBGROUP_MAIN } else { MAIN });
    for (from, to) in [
        ("sum = row_dot(row * p.row_bytes, lane, lanes);", "sum = qkv_dot(row, lane, lanes);"),
        ("store(group.z * p.total_rows + p.row_offset + row, ", "qkv_store(row, "),
    ] {
        debug_assert_eq!(main.matches(from).count(), 1, "{from}");
        main = main.replace(from, to);
    }
    let source = format!(
        "{HEADER}{x}{reading}{}{}{QKV_ROWS}{main}",
        renamed(&reading, "_k"),
        renamed(&v_reading, "_v")
    )
    .replace("@binding(3) var<uniform>", "@binding(7) var<uniform>")
    .replace("@binding(2) var<storage, read_write> y", "@binding(4) var<storage, read_write> y")
    .replace("WG", &format!("{workgroup}u"))
    .replace("ROWS", &ROWS_PER_GROUP.to_string());
    Some(source)
}

/// `qkv_matvec`'s bindings past the header's, and its row's dot product and store.
const QKV_ROWS: &str = r#"
@group(0) @binding(2) var<storage, read> w_k: array<u32>;
@group(0) @binding(3) var<storage, read> w_v: array<u32>;
@group(0) @binding(5) var<storage, read_write> y_k: array<f32>;
@group(0) @binding(6) var<storage, read_write> y_v: array<f32>;

fn qkv_dot(row: u32, lane: u32, lanes: u32) -> f32 {
    if (row < p.split_k) {
        return row_dot(row * p.row_bytes, lane, lanes);
    }
    if (row < p.split_v) {
        return row_dot_k((row - p.split_k) * p.row_bytes, lane, lanes);
    }
    return row_dot_v((row - p.split_v) * p.row_bytes_v, lane, lanes);
}

fn qkv_store(row: u32, v: f32) {
    if (row < p.split_k) {
        y[row] = v;
    } else if (row < p.split_v) {
        y_k[row - p.split_k] = v;
    } else {
        y_v[row - p.split_v] = v;
    }
}
"#;

/// `code` with `suffix` on the names it declares (functions, constants, private variables) and
/// on the weights `w`, wherever they are used in it (not after a `.`: `v.w` is a component).
fn renamed(code: &str, suffix: &str) -> String {
    let mut declared: std::collections::HashSet<&str> = ["w"].into();
    let identifier = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for keyword in ["fn ", "const ", "var<private> "] {
        for (at, _) in code.match_indices(keyword) {
            let rest = &code[at + keyword.len()..];
            let name = &rest[..rest.find(|c| !identifier(c)).unwrap_or(rest.len())];
            declared.insert(name);
        }
    }
    let mut out = String::with_capacity(code.len() + 256);
    let mut rest = code;
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
        let (before, from) = rest.split_at(start);
        let end = from.find(|c| !identifier(c)).unwrap_or(from.len());
        let (name, tail) = from.split_at(end);
        out.push_str(before);
        // After a `.` it is a member; after a digit, a literal's suffix (`0u`).
        let member_or_literal = out.ends_with(|c: char| c == '.' || c.is_ascii_digit());
        out.push_str(name);
        if declared.contains(name) && !member_or_literal {
            out.push_str(suffix);
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// The experts' matrix-vector kernel for `weight_type`, `workgroup` threads wide: a pair per
/// workgroup ([`EXPERT_MAIN`], decode) or an expert's pairs (`grouped`, batches).
pub fn expert_matmul(weight_type: WeightType, workgroup: u32, grouped: bool) -> String {
    let layout = layout(weight_type);
    let (uniform, main) = if grouped { (5, EXPERT_TILE_MAIN) } else { (4, EXPERT_MAIN) };
    let header = header(&layout, true)
        .replace("@binding(3) var<uniform>", &format!("@binding({uniform}) var<uniform>"));
    format!("{header}{}{main}", row_dot(layout))
        .replace("WG", &format!("{workgroup}u"))
        .replace("ROWS", &ROWS_PER_GROUP.to_string())
}

/// The tiled GEMM for `weight_type` (long batches: prefill): 64 threads, a tile of
/// [`GEMM_ROWS`] weight rows by [`GEMM_TOKENS`] input rows per workgroup.
pub fn gemm(weight_type: WeightType) -> String {
    let layout = layout(weight_type);
    let header = header(&layout, false);
    let load = match layout {
        Layout::Float(value) => FLOAT_UNIT.replace("VALUE", value),
        Layout::Blocks { bytes, units, helpers, dequant, .. } => format!(
            "{}{}",
            helpers.concat(),
            BLOCK_UNIT
                .replace("UNITS", &format!("{units}u"))
                .replace("BYTES", &format!("{bytes}u"))
                .replace("DEQUANT", &dequant)
        ),
    };
    format!("{header}{GEMM_TILES}{load}{}", GEMM_MAIN.replace("GEMM_STORE", GEMM_STORE))
        .replace("GEMM_ROWS", &format!("{GEMM_ROWS}u"))
        .replace("GEMM_TOKENS", &format!("{GEMM_TOKENS}u"))
}

/// The GEMM over 8-bit inputs for [`Q8_DOT_TYPES`] (long batches where
/// [`Gpu::integer_dots`](super::Gpu::integer_dots)): [`GEMM_MAIN`]'s tiles and register tile,
/// with each unit's weights packed as signed bytes once a tile (`pack`), the inputs' blocks
/// ([`quantize_q8`]) copied as they are, and each (row, input) pair's unit summed exactly in
/// integers by `dot4I8Packed`, then scaled, as llama.cpp's Vulkan backend multiplies batches.
pub fn gemm_q8(weight_type: WeightType) -> String {
    let layout = q8_layout(weight_type);
    let header = format!("{HEADER}{X_Q8}{}", readers(&layout));
    let Layout::Blocks { bytes, units, helpers, pack, .. } = layout else {
        unreachable!("float rows read floats")
    };
    // The float GEMM's unit reader, packing where it dequantizes.
    let unit = BLOCK_UNIT
        .replace("load_unit", "pack_unit")
        .replace("UNITS", &format!("{units}u"))
        .replace("BYTES", &format!("{bytes}u"))
        .replace("DEQUANT", &pack);
    let main = GEMM_Q8_MAIN.replace("GEMM_STORE", GEMM_STORE);
    format!("{header}{}{GEMM_Q8_TILES}{unit}{main}", helpers.concat())
        .replace("GEMM_ROWS", &format!("{GEMM_ROWS}u"))
        .replace("GEMM_TOKENS", &format!("{GEMM_TOKENS}u"))
}

/// [`gemm_q8`]'s tiles: a unit of each of its 64 weight rows and the same block of each of its
/// 32 input rows, 8 words of quants and three of scales each (11 words apart: an odd stride,
/// so the 16 threads that read one column of rows hit different banks).
const GEMM_Q8_TILES: &str = r#"
var<workgroup> wq: array<u32, 704>;
var<workgroup> xt: array<u32, 352>;
"#;

/// [`gemm_q8`]'s kernel: per unit, every thread packs one weight row's unit, the first 32
/// copy one input row's block each; then each thread sums its 4 rows × 8 inputs over the
/// unit's two halves in integers, and adds them scaled to its totals.
const GEMM_Q8_MAIN: &str = r#"
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let first_row = (group.y * p.groups_x + group.x) * GEMM_ROWS;
    let first = group.z * GEMM_TOKENS;
    let r = t % 16u;
    let c = t / 16u;
    let own_row = first_row + t;
    let units = p.cols / 32u;
    var total: array<vec4<f32>, 8>;
    var low: array<vec4<i32>, 8>;
    var high: array<vec4<i32>, 8>;
    for (var u = 0u; u < units; u++) {
        if (own_row < p.rows) {
            pack_unit(own_row * p.row_bytes, u, t * 11u);
        } else {
            for (var k = 0u; k < 11u; k++) {
                wq[t * 11u + k] = 0u;
            }
        }
        if (t < GEMM_TOKENS) {
            var block = array<vec4<u32>, 3>(vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u));
            if (first + t < p.batch) {
                let b = (first + t) * units + u;
                block = array<vec4<u32>, 3>(x[3u * b], x[3u * b + 1u], x[3u * b + 2u]);
            }
            for (var k = 0u; k < 8u; k++) {
                xt[t * 11u + k] = block[k / 4u][k % 4u];
            }
            xt[t * 11u + 8u] = block[2].x;
            xt[t * 11u + 9u] = block[2].y;
        }
        workgroupBarrier();
        // Zeroed by hand, as GEMM_MAIN's `part` (SwiftShader).
        for (var j = 0u; j < 8u; j++) {
            low[j] = vec4<i32>(0);
            high[j] = vec4<i32>(0);
        }
        for (var k = 0u; k < 4u; k++) {
            let w_low = vec4<u32>(wq[r * 11u + k], wq[(r + 16u) * 11u + k], wq[(r + 32u) * 11u + k], wq[(r + 48u) * 11u + k]);
            let w_high = vec4<u32>(wq[r * 11u + k + 4u], wq[(r + 16u) * 11u + k + 4u], wq[(r + 32u) * 11u + k + 4u], wq[(r + 48u) * 11u + k + 4u]);
            for (var j = 0u; j < 8u; j++) {
                let at = (c + 4u * j) * 11u + k;
                let x_low = xt[at];
                let x_high = xt[at + 4u];
                low[j] += vec4<i32>(dot4I8Packed(w_low.x, x_low), dot4I8Packed(w_low.y, x_low), dot4I8Packed(w_low.z, x_low), dot4I8Packed(w_low.w, x_low));
                high[j] += vec4<i32>(dot4I8Packed(w_high.x, x_high), dot4I8Packed(w_high.y, x_high), dot4I8Packed(w_high.z, x_high), dot4I8Packed(w_high.w, x_high));
            }
        }
        let scale_low = bitcast<vec4<f32>>(vec4<u32>(wq[r * 11u + 8u], wq[(r + 16u) * 11u + 8u], wq[(r + 32u) * 11u + 8u], wq[(r + 48u) * 11u + 8u]));
        let scale_high = bitcast<vec4<f32>>(vec4<u32>(wq[r * 11u + 9u], wq[(r + 16u) * 11u + 9u], wq[(r + 32u) * 11u + 9u], wq[(r + 48u) * 11u + 9u]));
        let factor = bitcast<vec4<f32>>(vec4<u32>(wq[r * 11u + 10u], wq[(r + 16u) * 11u + 10u], wq[(r + 32u) * 11u + 10u], wq[(r + 48u) * 11u + 10u]));
        for (var j = 0u; j < 8u; j++) {
            let at = (c + 4u * j) * 11u;
            let d = bitcast<f32>(xt[at + 8u]);
            let sum = bitcast<f32>(xt[at + 9u]);
            total[j] += d * (scale_low * vec4<f32>(low[j]) + scale_high * vec4<f32>(high[j])) + factor * sum;
        }
        workgroupBarrier();
    }
GEMM_STORE
"#;

/// Rows of a table of `weight_type` looked up by token (the token embedding, where its bytes
/// are on the device only): a workgroup per token, each thread dequantizing units of the row
/// with the GEMM's `load_unit` into its own stretch of the tile, then writing them out scaled.
/// The token ids come in `ids` (where the GEMM reads its inputs); a token whose row lies outside this dispatch's slice
/// (`row_offset..row_offset + rows`) is left for the slice that holds it. `pair_first` holds
/// the scale's bits (Gemma's `√width`; 1 elsewhere).
pub fn get_rows(weight_type: WeightType) -> String {
    let gemm = gemm(weight_type).replace(X_FLOATS, IDS);
    let body = &gemm[..gemm.find(GEMM_MAIN_START).expect("the GEMM's main")];
    format!("{body}{GET_ROWS_MAIN}")
}

/// [`get_rows`]'s token ids, where the GEMM has its inputs.
const IDS: &str = "@group(0) @binding(1) var<storage, read> ids: array<u32>;\n";

/// Where [`GEMM_MAIN`] starts: [`get_rows`] keeps everything before it.
const GEMM_MAIN_START: &str = "@compute @workgroup_size(64)";

const GET_ROWS_MAIN: &str = r#"
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let token = group.y * p.groups_x + group.x;
    if (token >= p.batch) {
        return;
    }
    let id = ids[token];
    if (id < p.row_offset || id - p.row_offset >= p.rows) {
        return;
    }
    let scale = bitcast<f32>(p.pair_first);
    let base = (id - p.row_offset) * p.row_bytes;
    for (var u = t; u < (p.cols + 31u) / 32u; u += 64u) {
        load_unit(base, u, t * STRIDE);
        for (var k = 0u; k < 32u; k++) {
            let e = 32u * u + k;
            if (e < p.cols) {
                y[token * p.cols + e] = wt[t * STRIDE + k] * scale;
            }
        }
    }
}
"#;

/// The experts' GEMM for `weight_type` (long batches): [`GEMM_MAIN`]'s tiles over each expert's
/// pairs, `GEMM_TOKENS` of them per workgroup (`batch` workgroups per expert along z, those past
/// its pairs returning at once), each pair's input row its token's (gate and up) or its own
/// (down), and its output row its own; the pairs listed expert by expert in `order`, each
/// expert's run from `offsets` (`GROUP_BY_EXPERT`).
pub fn expert_gemm(weight_type: WeightType) -> String {
    let dense = gemm(weight_type);
    let mut source = dense.replace("@binding(3) var<uniform>", "@binding(5) var<uniform>");
    for (from, to) in [
        (
            "@compute @workgroup_size(64)",
            "@group(0) @binding(3) var<storage, read> order: array<u32>;
@group(0) @binding(4) var<storage, read> offsets: array<u32>;
var<workgroup> span: vec2<u32>;

@compute @workgroup_size(64)",
        ),
        (
            &format!("let first = group.z * {GEMM_TOKENS}u;"),
            &format!(
                "let local = group.z / p.batch;
    if (t == 0u) {{
        let expert = p.expert_first + local;
        span = vec2<u32>(offsets[expert] + {GEMM_TOKENS}u * (group.z % p.batch), offsets[expert + 1u]);
    }}
    let pairs = workgroupUniformLoad(&span);
    if (pairs.x >= pairs.y) {{
        return;
    }}
    let first = pairs.x;"
            ),
        ),
        ("load_unit(own_row * p.row_bytes,", "load_unit(local * p.expert_bytes + own_row * p.row_bytes,"),
        (
            "if (token < p.batch && e < p.cols) {
                value = x[token * p.cols + e];",
            "if (token < pairs.y && e < p.cols) {
                value = x[(order[token] / p.pairs_per_input) * p.cols + e];",
        ),
        (
            "if (row < p.rows && token < p.batch) {
                store(token * p.total_rows + p.row_offset + row, total[j][i]);",
            "if (row < p.rows && token < pairs.y) {
                y[order[token] * p.rows + row] = total[j][i];",
        ),
    ] {
        debug_assert_eq!(source.matches(from).count(), 1, "{from}");
        source = source.replace(from, to);
    }
    source
}

/// Q5_0's and Q5_1's weights 4j.. of both halves: the nibbles of `word` with their fifth bits
/// from `qh` (bit i for weight i, bit i + 16 for weight i + 16).
const Q5_BITS: &str = r#"
fn q5_pair(word: u32, qh: u32, j: u32) -> array<vec4<u32>, 2> {
    let q = bytes4(word);
    let at_j = vec4<u32>(j, j + 1u, j + 2u, j + 3u);
    let low = (q & vec4<u32>(15u)) | (((vec4<u32>(qh) >> at_j) << vec4<u32>(4u)) & vec4<u32>(16u));
    let high = (q >> vec4<u32>(4u)) | ((vec4<u32>(qh) >> (at_j + vec4<u32>(12u))) & vec4<u32>(16u));
    return array<vec4<u32>, 2>(low, high);
}
"#;

/// Q3_K's signed 6-bit scale of sixteen-weight group `j` (0..16) of the block at `at`.
const Q3_SCALE: &str = r#"
fn q3_scale(at: u32, j: u32) -> f32 {
    let low = (byte_at(at + 96u + j % 8u) >> (4u * (j / 8u))) & 15u;
    let high = (byte_at(at + 104u + j % 4u) >> (2u * (j / 4u))) & 3u;
    return f32(i32(low | (high << 4u)) - 32);
}
"#;

/// Q6_K's weights k..k+4 of unit `g` (0..8) of the block at `at`, less 32: the low nibbles
/// from the first 128 bytes, the top two bits from the next 64.
const Q6_BITS: &str = r#"
fn q6x4(at: u32, g: u32, k: u32) -> vec4<f32> {
    let half = g / 4u;
    let quarter = g % 4u;
    let low = at + 64u * half + 32u * (quarter % 2u);
    let high = at + 128u + 32u * half;
    let nibble = (bytes4(word_at(low + k)) >> vec4<u32>(4u * (quarter / 2u))) & vec4<u32>(15u);
    let top = (bytes4(word_at(high + k)) >> vec4<u32>(2u * quarter)) & vec4<u32>(3u);
    return vec4<f32>(nibble | (top << vec4<u32>(4u))) - 32.0;
}
"#;

/// IQ4_XS's signed 6-bit scale of unit `g` of the block at `at`.
const IQ4_XS_SCALE: &str = r#"
fn iq4_xs_scale(at: u32, g: u32) -> f32 {
    let high_bits = byte_at(at + 2u) | (byte_at(at + 3u) << 8u);
    let low = (byte_at(at + 4u + g / 2u) >> (4u * (g % 2u))) & 15u;
    let high = (high_bits >> (2u * g)) & 3u;
    return f32(i32(low | (high << 4u)) - 32);
}
"#;

/// Weight rows and input rows a GEMM workgroup takes. Its 64 threads each own a register tile
/// of 4 rows × 8 inputs, rows `r + 16i` and inputs `c + 4j`, so that the 16 threads of a `c`
/// read 16 neighbouring rows of the weight tile (the kernel is written for these sizes).
pub const GEMM_ROWS: u32 = 64;
pub const GEMM_TOKENS: u32 = 32;

/// The GEMM's tiles in workgroup memory: one unit (32 weights) of each of its 64 rows, and the
/// same 32 columns of each of its 32 input rows. Rows lie 33 words apart, so that neighbouring
/// threads reading one column hit different memory banks.
const GEMM_TILES: &str = r#"
const STRIDE = 33u;
var<workgroup> wt: array<f32, 2112>;
var<workgroup> xt: array<f32, 1056>;
fn put4(i: u32, v: vec4<f32>) { wt[i] = v.x; wt[i + 1u] = v.y; wt[i + 2u] = v.z; wt[i + 3u] = v.w; }
"#;

/// A float row's unit `u` into the weight tile at `dst` (zeros past the row's end).
const FLOAT_UNIT: &str = r#"
fn load_unit(base: u32, u: u32, dst: u32) {
    for (var k = 0u; k < 32u; k++) {
        let e = 32u * u + k;
        var value = 0.0;
        if (e < p.cols) {
            value = VALUE;
        }
        wt[dst + k] = value;
    }
}
"#;

/// A block row's unit `u` into the weight tile at `dst`.
const BLOCK_UNIT: &str = r#"
fn load_unit(base: u32, u: u32, dst: u32) {
    let at = base + (u / UNITS) * BYTES;
    let g = u % UNITS;
    DEQUANT
}
"#;

/// The GEMMs' last step: each thread stores its 4 × 8 totals.
const GEMM_STORE: &str = r#"    for (var j = 0u; j < 8u; j++) {
        let token = first + c + 4u * j;
        for (var i = 0u; i < 4u; i++) {
            let row = first_row + r + 16u * i;
            if (row < p.rows && token < p.batch) {
                store(token * p.total_rows + p.row_offset + row, total[j][i]);
            }
        }
    }
}
"#;

/// The GEMM: for each unit of 32 columns, every thread dequantizes one weight row's unit into
/// the tile (each weight once per 32 input rows) and copies its share of the inputs; then
/// each thread adds its 4 × 8 products over the 32 columns to a per-unit sum, and that to its
/// total (the sum of a row grows unit by unit, as the matrix-vector kernel's parts do).
const GEMM_MAIN: &str = r#"
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let first_row = (group.y * p.groups_x + group.x) * GEMM_ROWS;
    let first = group.z * GEMM_TOKENS;
    let r = t % 16u;
    let c = t / 16u;
    let own_row = first_row + t;
    var total: array<vec4<f32>, 8>;
    var part: array<vec4<f32>, 8>;
    for (var u = 0u; u < (p.cols + 31u) / 32u; u++) {
        if (own_row < p.rows) {
            load_unit(own_row * p.row_bytes, u, t * STRIDE);
        } else {
            for (var k = 0u; k < 32u; k++) {
                wt[t * STRIDE + k] = 0.0;
            }
        }
        for (var i = t; i < 1024u; i += 64u) {
            let token = first + i / 32u;
            let e = 32u * u + i % 32u;
            var value = 0.0;
            if (token < p.batch && e < p.cols) {
                value = x[token * p.cols + e];
            }
            xt[(i / 32u) * STRIDE + i % 32u] = value;
        }
        workgroupBarrier();
        // Zeroed by hand: Chromium's WebGPU on SwiftShader gave a `var` declared in the loop its
        // zeros on the first pass only (WGSL gives them on every pass), and each unit's sum
        // then carried all the units' before it.
        for (var j = 0u; j < 8u; j++) {
            part[j] = vec4<f32>(0.0);
        }
        for (var k = 0u; k < 32u; k++) {
            let w4 = vec4<f32>(wt[r * STRIDE + k], wt[(r + 16u) * STRIDE + k], wt[(r + 32u) * STRIDE + k], wt[(r + 48u) * STRIDE + k]);
            for (var j = 0u; j < 8u; j++) {
                part[j] = fma(w4, vec4<f32>(xt[(c + 4u * j) * STRIDE + k]), part[j]);
            }
        }
        for (var j = 0u; j < 8u; j++) {
            total[j] += part[j];
        }
        workgroupBarrier();
    }
GEMM_STORE
"#;

/// RMSNorm: one workgroup per row of `width`, the sum of squares reduced in workgroup memory,
/// then each value scaled and multiplied by its weight. Rows lie `per_item` to an item of
/// `stride` floats (the L2-normalized query and key heads at the front of a DeltaNet token's
/// row, or Mamba-2's groups); ordinary rows are one per item, `stride = width`. The weights of
/// the `k`th row of an item start at `k · weight_stride` (0: one weight row for all). With
/// `q8`, for plain rows (one per item, a multiple of 32 wide), the normalized rows are also
/// stored quantized to 8 bits in `q` ([`quantize_q8`]'s blocks), for the products that read
/// them: one dispatch where a decode step took two.
pub fn rms_norm(workgroup: u32, q8: bool) -> String {
    let source = r#"
struct Params { rows: u32, width: u32, eps: u32, groups_x: u32, per_item: u32, stride: u32, weight_stride: u32, format: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = group.y * p.groups_x + group.x;
    let base = (row / p.per_item) * p.stride + (row % p.per_item) * p.width;
    var sum = 0.0;
    if (row < p.rows) {
        for (var i = t; i < p.width; i += WG) {
            sum += x[base + i] * x[base + i];
        }
    }
    partial[t] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (t < s) {
            partial[t] += partial[t + s];
        }
        workgroupBarrier();
    }
    if (row < p.rows) {
        let scale = 1.0 / sqrt(partial[0] / f32(p.width) + bitcast<f32>(p.eps));
        for (var i = t; i < p.width; i += WG) {
            y[base + i] = NORMED(i);
        }
        QUANTIZED
    }
}
"#
    .replace("NORMED(i)", "(x[base + i] * scale) * weight[(row % p.per_item) * p.weight_stride + i]")
    .replace("WG", &format!("{workgroup}u"));
    if !q8 {
        return source.replace("QUANTIZED", "");
    }
    // Plain rows only (one per item, `width` apart, a whole number of `p.format`'s blocks):
    // each thread takes whole blocks and quantizes the values it normalizes again, the same
    // bits as it stored.
    let quantized = format!(
        "let block_len = select(32u, 256u, p.format == {Q8_K_FORMAT}u);
        for (var b = t; b < p.width / block_len; b += {workgroup}u) {}",
        q8_block("(x[base + i] * scale) * weight[i]", "block_len * b", "base / 32u + b * (block_len / 32u)")
    );
    format!(
        "{}{F16_ROUND}",
        source
            .replace("QUANTIZED", &quantized)
            .replace("@group(0) @binding(3) var<uniform> p", "@group(0) @binding(4) var<uniform> p")
            .replace(
                "var<workgroup> partial",
                "@group(0) @binding(3) var<storage, read_write> q: array<vec4<u32>>;\nvar<workgroup> partial"
            )
    )
}

/// `x[i] = f(x[i], y[i])` over `n` elements, 256 per workgroup; `body` is the statement, which
/// may read the kernel's own parameters `p.a`, `p.b` and `p.c`.
pub fn elementwise(body: &str) -> String {
    r#"
struct Params { n: u32, groups_x: u32, a: u32, b: u32, c: u32, unused0: u32, unused1: u32, unused2: u32 }
@group(0) @binding(0) var<storage, read> y: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (group.y * p.groups_x + group.x) * 256u + t;
    if (i < p.n) {
        BODY
    }
}
"#
    .replace("BODY", body)
}

/// SwiGLU's gate: `silu(g) · u`.
pub const SWIGLU: &str = "let g = x[i]; x[i] = g / (1.0 + exp(-g)) * y[i];";

/// gpt-oss's clamped SwiGLU (α 1.702, limit 7): `g · sigmoid(α·g) · (clamp(u, ±7) + 1)`, `g`
/// capped at 7.
pub const SWIGLU_OAI: &str =
    "let g = min(x[i], 7.0); x[i] = g / (1.0 + exp(-1.702 * g)) * (clamp(y[i], -7.0, 7.0) + 1.0);";

/// Mixture-of-experts routing (`model::experts::route`), one thread per token: the router's
/// `count` scores (plus `bias` where `has_bias`) become probabilities in place (gating 0
/// softmax, 1 sigmoid, 2 none: gpt-oss), the `used` best by probability plus `selection`
/// (where `has_selection`) are chosen, best first, ties to the lower index and a NaN never
/// chosen over a number, and their probabilities become the weights: a softmax of them for
/// gating 2, then renormalized to sum to 1 where `normalize` (the sum at least 2^-14, as
/// llama.cpp clamps it).
pub const ROUTE: &str = r#"
struct Params {
    n: u32, count: u32, used: u32, groups_x: u32,
    gating: u32, normalize: u32, has_bias: u32, has_selection: u32,
}
@group(0) @binding(0) var<storage, read> bias: array<f32>;
@group(0) @binding(1) var<storage, read> selection: array<f32>;
@group(0) @binding(2) var<storage, read_write> scores: array<f32>;
@group(0) @binding(3) var<storage, read_write> ids: array<u32>;
@group(0) @binding(4) var<storage, read_write> weights: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

fn key(s0: u32, e: u32) -> f32 {
    var k = scores[s0 + e];
    if (p.has_selection != 0u) {
        k += selection[e];
    }
    // A NaN never wins (compared as bits: a compiler may fold `k != k` away).
    if ((bitcast<u32>(k) & 0x7fffffffu) > 0x7f800000u) {
        k = -3.4e38;
    }
    return k;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let token = (group.y * p.groups_x + group.x) * 64u + t;
    if (token >= p.n) {
        return;
    }
    let s0 = token * p.count;
    if (p.has_bias != 0u) {
        for (var e = 0u; e < p.count; e++) {
            scores[s0 + e] += bias[e];
        }
    }
    if (p.gating == 0u) {
        var top = -3.4e38;
        for (var e = 0u; e < p.count; e++) {
            top = max(top, scores[s0 + e]);
        }
        var sum = 0.0;
        for (var e = 0u; e < p.count; e++) {
            let v = exp(scores[s0 + e] - top);
            scores[s0 + e] = v;
            sum += v;
        }
        let scale = 1.0 / sum;
        for (var e = 0u; e < p.count; e++) {
            scores[s0 + e] *= scale;
        }
    } else if (p.gating == 1u) {
        for (var e = 0u; e < p.count; e++) {
            scores[s0 + e] = 1.0 / (1.0 + exp(-scores[s0 + e]));
        }
    }
    let w0 = token * p.used;
    var filled = 0u;
    for (var e = 0u; e < p.count; e++) {
        let k = key(s0, e);
        if (filled == p.used && k <= key(s0, ids[w0 + filled - 1u])) {
            continue;
        }
        var at = min(filled, p.used - 1u);
        while (at > 0u && k > key(s0, ids[w0 + at - 1u])) {
            ids[w0 + at] = ids[w0 + at - 1u];
            at -= 1u;
        }
        ids[w0 + at] = e;
        filled = min(filled + 1u, p.used);
    }
    for (var s = 0u; s < p.used; s++) {
        weights[w0 + s] = scores[s0 + ids[w0 + s]];
    }
    if (p.gating == 2u) {
        var top = -3.4e38;
        for (var s = 0u; s < p.used; s++) {
            top = max(top, weights[w0 + s]);
        }
        var sum = 0.0;
        for (var s = 0u; s < p.used; s++) {
            let v = exp(weights[w0 + s] - top);
            weights[w0 + s] = v;
            sum += v;
        }
        for (var s = 0u; s < p.used; s++) {
            weights[w0 + s] *= 1.0 / sum;
        }
    }
    if (p.normalize != 0u) {
        var sum = 0.0;
        for (var s = 0u; s < p.used; s++) {
            sum += weights[w0 + s];
        }
        sum = max(sum, 6.1035156e-5);
        for (var s = 0u; s < p.used; s++) {
            weights[w0 + s] /= sum;
        }
    }
}
"#;

/// Each (token, slot) pair's row of `width` plus its expert's row of `bias` (gpt-oss's expert
/// biases), one thread per value.
pub const EXPERT_BIAS: &str = r#"
struct Params { n: u32, width: u32, unused: u32, groups_x: u32 }
@group(0) @binding(0) var<storage, read> ids: array<u32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (group.y * p.groups_x + group.x) * 256u + t;
    if (i < p.n) {
        x[i] += bias[ids[i / p.width] * p.width + i % p.width];
    }
}
"#;

/// A token's output: its `used` experts' output rows (`y`, a row per pair), weighted, added in
/// slot order (best first, as the CPU adds a decode step's), one thread per value.
pub const EXPERT_SUM: &str = r#"
struct Params { n: u32, width: u32, used: u32, groups_x: u32 }
@group(0) @binding(0) var<storage, read> weights: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (group.y * p.groups_x + group.x) * 256u + t;
    if (i >= p.n) {
        return;
    }
    let token = i / p.width;
    let col = i % p.width;
    var sum = 0.0;
    for (var s = 0u; s < p.used; s++) {
        let pair = token * p.used + s;
        sum += y[pair * p.width + col] * weights[pair];
    }
    out[i] = sum;
}
"#;

/// GeGLU's gate: GELU's tanh approximation (ggml's constants), clamped as ggml's CPU GELU is
/// past ±10, times `u`.
pub fn geglu() -> String {
    GELU_TIMES.replace("UP", "y[i]")
}

/// Gemma 4's per-layer gate: GELU of `x` times this layer's slice of the token's per-layer
/// input (rows of `p.a` values in `x`; in `y` rows of `p.b`, this layer's from `p.c`).
pub fn per_layer_gate() -> String {
    GELU_TIMES.replace("UP", "y[p.c + (i / p.a) * p.b + i % p.a]")
}

const GELU_TIMES: &str = "let g = x[i];
        var gelu = 0.5 * g * (1.0 + tanh(0.7978846 * g * (1.0 + 0.044715 * g * g)));
        if (g <= -10.0) { gelu = 0.0; }
        if (g >= 10.0) { gelu = g; }
        x[i] = gelu * UP;";

/// Gemma 4's per-layer inputs: the projection plus the token's scaled per-layer embedding
/// (`y`), scaled: `(x + y · a) · b`, `a` and `b` f32 bits.
pub const MIX_EMBEDDING: &str = "x[i] = (x[i] + y[i] * bitcast<f32>(p.a)) * bitcast<f32>(p.b);";

/// RoPE in place: one thread per (row, head, pair); the pair's angle from its position and
/// the base (divided by the pair's factor where the model has them; a factor of 0 leaves the
/// pair as it is, times the attention factor), `(a, b)` adjacent (normal) or half a rotated
/// span apart (NeoX). Rows of a picture under M-RoPE (`grid_width` > 0) are cells
/// `first_row + row` of its grid: a pair's position is then `start` plus its stream's share (the
/// factors' second half holds each pair's stream: 0 the text's, 1 the cell's row, 2 its
/// column).
pub fn rope() -> String {
    format!("{}{ROTATION}{ROPE_MAIN}", rope_params(""))
}

/// RoPE's uniform, with `extra` fields after its own.
fn rope_params(extra: &str) -> String {
    format!(
        "struct Params {{
    rows: u32, heads: u32, head_dim: u32, rope_dims: u32,
    start: u32, neox: u32, has_factors: u32, groups_x: u32,
    base: u32, freq_scale: u32, attn_factor: u32, yarn: u32,
    ramp_start: u32, ramp_end: u32, grid_width: u32, first_row: u32,{extra}
}}
@group(0) @binding(0) var<storage, read> factors: array<f32>;
"
    )
}

/// RoPE's rotation of pair `i` of batch row `row`: its cosine and sine times the attention
/// factor, and where its two values lie in a head.
const ROTATION: &str = r#"
fn rotation(row: u32, i: u32) -> vec2<f32> {
    let half = p.rope_dims / 2u;
    var position = p.start + row;
    if (p.grid_width != 0u) {
        let cell = p.first_row + row;
        let stream = u32(factors[half + i]);
        position = p.start + select(select(0u, cell / p.grid_width, stream == 1u), cell % p.grid_width, stream == 2u);
    }
    let theta = f32(position) * pow(bitcast<f32>(p.base), -2.0 * f32(i) / f32(p.rope_dims));
    let factor = select(1.0, factors[min(i, arrayLength(&factors) - 1u)], p.has_factors != 0u);
    var angle = bitcast<f32>(p.freq_scale) * (theta / factor);
    if (p.yarn != 0u) {
        // YaRN: the unscaled angle below the ramp, the scaled one past it, blended between.
        let start = bitcast<f32>(p.ramp_start);
        let y = (f32(i) - start) / max(0.001, bitcast<f32>(p.ramp_end) - start);
        let unscaled = 1.0 - clamp(y, 0.0, 1.0);
        angle = angle * (1.0 - unscaled) + (theta / factor) * unscaled;
    }
    // A factor of 0 marks a pair that stays unrotated (interleaved M-RoPE's fourth stream).
    angle = select(angle, 0.0, factor == 0.0);
    return vec2<f32>(cos(angle) * bitcast<f32>(p.attn_factor), sin(angle) * bitcast<f32>(p.attn_factor));
}

fn pair_at(i: u32) -> vec2<u32> {
    return select(vec2<u32>(2u * i, 2u * i + 1u), vec2<u32>(i, i + p.rope_dims / 2u), p.neox != 0u);
}
"#;

const ROPE_MAIN: &str = r#"
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let half = p.rope_dims / 2u;
    let index = (group.y * p.groups_x + group.x) * 256u + t;
    if (index >= p.rows * p.heads * half) {
        return;
    }
    let i = index % half;
    let head = (index / half) % p.heads;
    let row = index / (half * p.heads);
    let cs = rotation(row, i);
    let at = (row * p.heads + head) * p.head_dim + pair_at(i);
    let x0 = x[at.x];
    let x1 = x[at.y];
    x[at.x] = x0 * cs.x - x1 * cs.y;
    x[at.y] = x0 * cs.y + x1 * cs.x;
}
"#;

/// A layer's query and key heads made ready for attention in one dispatch, where they took up
/// to four and two copies: each head RMS-normalized with its weights where the model
/// normalizes them (`norm_q`, `norm_k`: Qwen3's and Gemma 3's Q/K norms), then rotated (RoPE,
/// as above; `rope_dims` 0 where the layer has none). A workgroup per (row, head),
/// the query heads' first: the norm's sum is `rms_norm`'s (the same threads, the same tree) and
/// each rotation `ROPE_MAIN`'s, so the bits are theirs. Where `store` is set the heads also go
/// into the f16 cache from word `first_out` as `pack_f16` puts them: each key head once
/// rotated, and a workgroup per value head (after the key heads') packing it as it is.
pub fn qk_heads(workgroup: u32) -> String {
    format!(
        "{}{ROTATION}{PACKED}{QK_HEADS_MAIN}",
        rope_params("\n    k_heads: u32, eps: u32, norm_q: u32, norm_k: u32, store: u32, first_out: u32,")
    )
    .replace("WG", &format!("{workgroup}u"))
}

const QK_HEADS_MAIN: &str = r#"
@group(0) @binding(1) var<storage, read> q_weight: array<f32>;
@group(0) @binding(2) var<storage, read> k_weight: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> q: array<f32>;
@group(0) @binding(5) var<storage, read_write> k: array<f32>;
@group(0) @binding(6) var<storage, read_write> key_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> value_cache: array<u32>;
@group(0) @binding(8) var<uniform> p: Params;
var<workgroup> partial: array<f32, WG>;

// A workgroup's head lies in `q` or in `k`, the same for all its threads.
fn load(keys: bool, i: u32) -> f32 {
    if (keys) {
        return k[i];
    }
    return q[i];
}

fn put(keys: bool, i: u32, v: f32) {
    if (keys) {
        k[i] = v;
    } else {
        q[i] = v;
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let item = group.y * p.groups_x + group.x;
    let query_items = p.rows * p.heads;
    let key_items = p.rows * p.k_heads;
    if (item >= query_items + key_items + select(0u, key_items, p.store != 0u)) {
        return;
    }
    // A value head goes into the cache as it is.
    if (item >= query_items + key_items) {
        let base = (item - query_items - key_items) * p.head_dim;
        for (var j = t; j < p.head_dim / 2u; j += WG) {
            value_cache[p.first_out + base / 2u + j] = packed(v[base + 2u * j], v[base + 2u * j + 1u]);
        }
        return;
    }
    let keys = item >= query_items;
    let heads = select(p.heads, p.k_heads, keys);
    let local = select(item, item - query_items, keys);
    let row = local / heads;
    let base = local * p.head_dim;
    if (select(p.norm_q, p.norm_k, keys) != 0u) {
        var sum = 0.0;
        for (var i = t; i < p.head_dim; i += WG) {
            let x = load(keys, base + i);
            sum += x * x;
        }
        partial[t] = sum;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s >> 1u) {
            if (t < s) {
                partial[t] += partial[t + s];
            }
            workgroupBarrier();
        }
        let scale = 1.0 / sqrt(partial[0] / f32(p.head_dim) + bitcast<f32>(p.eps));
        for (var i = t; i < p.head_dim; i += WG) {
            var weight = q_weight[i];
            if (keys) {
                weight = k_weight[i];
            }
            put(keys, base + i, (load(keys, base + i) * scale) * weight);
        }
        // The rotation's pairs were normalized by other threads.
        storageBarrier();
    }
    for (var i = t; i < p.rope_dims / 2u; i += WG) {
        let cs = rotation(row, i);
        let at = base + pair_at(i);
        let x0 = load(keys, at.x);
        let x1 = load(keys, at.y);
        put(keys, at.x, x0 * cs.x - x1 * cs.y);
        put(keys, at.y, x0 * cs.y + x1 * cs.x);
    }
    // A key head, finished, goes into the cache.
    if (keys && p.store != 0u) {
        storageBarrier();
        for (var j = t; j < p.head_dim / 2u; j += WG) {
            key_cache[p.first_out + base / 2u + j] = packed(k[base + 2u * j], k[base + 2u * j + 1u]);
        }
    }
}
"#;

/// The attention kernels' uniform, and a sink's share of the softmax (from a `sinks` binding).
/// Where `splits` > 1, the workgroup kernel's workgroups each take `chunk` positions of a
/// (query, head)'s range and leave partial sums for [`ATTENTION_MERGE`].
const ATTENTION_PARAMS: &str = r#"
struct Params {
    n_head: u32, n_kv: u32, head_dim: u32, start: u32,
    queries: u32, window: u32, groups_x: u32, both_ways: u32,
    scale: u32, softcap: u32, has_sinks: u32, has_spans: u32,
    splits: u32, chunk: u32, exact: u32, unused_1: u32,
}

// The softmax's running maximum and total once a sink's score joins, and the factor that
// brings the weighted values' sums to that maximum.
fn with_sink(head: u32, running_max: f32, total: f32) -> vec3<f32> {
    if (p.has_sinks == 0u) {
        return vec3<f32>(running_max, total, 1.0);
    }
    let sink = sinks[head];
    let new_max = max(running_max, sink);
    let correction = exp(running_max - new_max);
    return vec3<f32>(new_max, total * correction + exp(sink - new_max), correction);
}
"#;

/// The attention kernels' bindings: queries `q` (rows of `n_head × head_dim`) at
/// positions `start..`, read as `ROW`s (single values, or vectors of four), and the cache's keys
/// `k` and values `v` (rows of `n_kv × head_dim`) in f16, two to a word, read as `KV_ROW`s (a
/// word, or two). Heads are even.
const ATTENTION_HEADER: &str = r#"
@group(0) @binding(0) var<storage, read> q: array<ROW>;
@group(0) @binding(1) var<storage, read> k: array<KV_ROW>;
@group(0) @binding(2) var<storage, read> v: array<KV_ROW>;
// A sink per head where `has_sinks` (gpt-oss): a score with no value, joined after the last
// position, which takes its share of the softmax.
@group(0) @binding(3) var<storage, read> sinks: array<f32>;
// Where `has_spans` (a vision encoder's windows): each query's first position and the one past
// its last, in place of the window's and the causal or both-ways bounds.
@group(0) @binding(4) var<storage, read> spans: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<ROW>;
@group(0) @binding(6) var<uniform> p: Params;

// Query and head pair `index` of the call: its KV head, the first and last positions it sees
// (from its window's start; to its own, or where the batch attends both ways, to the batch's
// last), and where its query row starts in `q` and `out`.
struct QueryHead { head: u32, kv_head: u32, last: u32, first: u32, qo: u32 }
fn query_head(index: u32) -> QueryHead {
    let query = index / p.n_head;
    let head = index % p.n_head;
    let position = p.start + query;
    var first = 0u;
    if (p.window > 0u && position + 1u > p.window) {
        first = position + 1u - p.window;
    }
    var last = select(position, p.start + p.queries - 1u, p.both_ways != 0u);
    if (p.has_spans != 0u) {
        first = spans[2u * query];
        last = spans[2u * query + 1u] - 1u;
    }
    return QueryHead(head, head / (p.n_head / p.n_kv), last, first, (query * p.n_head + head) * p.head_dim);
}

// The first and last positions split `split` of `splits` takes of the pair's range (none, first
// past last, where the range is shorter).
fn split_span(pair: QueryHead, split: u32, splits: u32) -> vec2<u32> {
    if (splits <= 1u) {
        return vec2<u32>(pair.first, pair.last);
    }
    let first = pair.first + split * p.chunk;
    return vec2<u32>(first, min(pair.last, first + p.chunk - 1u));
}
"#;

/// Causal attention, one 64-thread workgroup per (query, head), over the positions the query
/// sees (the window's, or all before it; the whole batch where it attends both ways) with the keys and values of its KV head (grouped
/// heads). Block by block of 64 positions: each thread scores one position (scaled and, with
/// a soft cap, squashed by `cap · tanh(score / cap)`), the block's maximum is found in
/// workgroup memory, and each thread adds the block's weighted values to its own dimensions
/// (`t`, `t + 64`, ...: neighbouring threads read neighbouring values) under an online
/// softmax. Head size at most 256. For decode and short batches: the thread-per-head kernel ran
/// a decode step on `n_head` threads in all, whatever the cache's length. Where `splits` > 1,
/// workgroup `split` of a (query, head) takes positions `first + split · chunk` on, `chunk` of
/// them, and leaves its partial sums for the merge (a long cache's decode then keeps
/// `n_head · splits` workgroups busy). Where `exact` (attention's exact precision), it computes
/// as llama.cpp's one-pass CPU kernel does: the query rounded to f16, the softmax updated
/// position by position, `Σ p·V` kept in f16 (the scores' sums, and a split's merge, stay f32).
const ATTENTION_GROUP_MAIN: &str = r#"

var<workgroup> query_row: array<f32, 256>;
var<workgroup> weights: array<f32, 64>;
var<workgroup> block_max: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let splits = max(p.splits, 1u);
    let index = (group.y * p.groups_x + group.x) / splits;
    let split = (group.y * p.groups_x + group.x) % splits;
    if (index >= p.queries * p.n_head) {
        return;
    }
    let pair = query_head(index);
    let kv_head = pair.kv_head;
    let span = split_span(pair, split, splits);
    let first = span.x;
    let last = span.y;
    let qo = pair.qo;
    let hd = p.head_dim;
    let row = p.n_kv * hd;
    let cap = bitcast<f32>(p.softcap);
    let scale = select(bitcast<f32>(p.scale), bitcast<f32>(p.scale) / cap, cap > 0.0);
    let exact = p.exact != 0u;
    for (var d = t; d < hd; d += 64u) {
        query_row[d] = select(q[qo + d], f16_round_signed(q[qo + d]), exact);
    }
    workgroupBarrier();
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    var running_max = -3.0e38;
    var total = 0.0;
    for (var j0 = first; j0 <= last; j0 += 64u) {
        let j = j0 + t;
        var score = -3.0e38;
        if (j <= last) {
            let ko = (j * row + kv_head * hd) / 2u;
            var dot = 0.0;
            for (var d = 0u; d < hd; d += 2u) {
                let key = unpack2x16float(k[ko + d / 2u]);
                dot += query_row[d] * key.x + query_row[d + 1u] * key.y;
            }
            score = dot * scale;
            if (cap > 0.0) {
                score = cap * tanh(score);
            }
        }
        if (exact) {
            // llama.cpp's one-pass CPU kernel, position by position: the maximum and total
            // updated at each, and the f16 `Σ p·V` rounded after every scaling and every
            // multiply-add (each thread follows the softmax for its own dimensions).
            weights[t] = score;
            workgroupBarrier();
            let count = min(64u, last + 1u - j0);
            let vo = j0 * row + kv_head * hd;
            for (var i = 0u; i < count; i++) {
                let s = weights[i];
                var rescale = 1.0;
                var weight = 1.0;
                if (s > running_max) {
                    rescale = exp(running_max - s);
                    running_max = s;
                    for (var c = 0u; c < 4u; c++) {
                        acc[c] = f16_round_signed(acc[c] * rescale);
                    }
                } else {
                    weight = exp(s - running_max);
                }
                total = fma(total, rescale, weight);
                for (var c = 0u; c < 4u; c++) {
                    let d = t + 64u * c;
                    if (d < hd) {
                        let at = vo + i * row + d;
                        acc[c] = f16_round_signed(fma(unpack2x16float(v[at / 2u])[at % 2u], weight, acc[c]));
                    }
                }
            }
            // Every thread has read the block's scores before the next block's.
            workgroupBarrier();
            continue;
        }
        block_max[t] = score;
        workgroupBarrier();
        for (var s = 32u; s > 0u; s = s >> 1u) {
            if (t < s) {
                block_max[t] = max(block_max[t], block_max[t + s]);
            }
            workgroupBarrier();
        }
        let new_max = max(running_max, block_max[0]);
        weights[t] = select(0.0, exp(score - new_max), j <= last);
        workgroupBarrier();
        let correction = exp(running_max - new_max);
        let count = min(64u, last + 1u - j0);
        var block_total = 0.0;
        for (var i = 0u; i < count; i++) {
            block_total += weights[i];
        }
        total = total * correction + block_total;
        let vo = j0 * row + kv_head * hd;
        for (var c = 0u; c < 4u; c++) {
            let d = t + 64u * c;
            if (d < hd) {
                var sum = 0.0;
                for (var i = 0u; i < count; i++) {
                    let at = vo + i * row + d;
                    sum += weights[i] * unpack2x16float(v[at / 2u])[at % 2u];
                }
                acc[c] = acc[c] * correction + sum;
            }
        }
        running_max = new_max;
        // Every thread has read the block's maximum and weights before the next block's.
        workgroupBarrier();
    }
    if (splits > 1u) {
        // Partial sums: the weighted values, then the maximum and the total they are under.
        let po = (index * splits + split) * (hd + 2u);
        for (var c = 0u; c < 4u; c++) {
            let d = t + 64u * c;
            if (d < hd) {
                out[po + d] = acc[c];
            }
        }
        if (t == 0u) {
            out[po + hd] = running_max;
            out[po + hd + 1u] = total;
        }
        return;
    }
    let sunk = with_sink(pair.head, running_max, total);
    for (var c = 0u; c < 4u; c++) {
        let d = t + 64u * c;
        if (d < hd) {
            out[qo + d] = acc[c] * sunk.z / sunk.y;
        }
    }
}
"#;

/// Query heads per KV head that [`attention_grouped`] takes, at most.
pub const MAX_ATTENTION_GROUP: usize = 8;

/// [`ATTENTION_GROUP_MAIN`]'s arithmetic for all `GROUP` query heads of a KV head at once
/// (grouped-query attention, decode and short batches in f32): a 64-thread workgroup per
/// (query, KV head), or per split of its range, reads each key and value row once for the
/// group, where the one-head kernel read it once per query head. Thread `t` scores position `t`
/// against every head of the group; one thread a head then takes the block's maximum and total;
/// each thread adds the block's weighted values to its dimensions of every head. Each head's
/// sums are the one-head kernel's, in the same order: the same bits over the same splits.
const ATTENTION_GROUPED_MAIN: &str = r#"

var<workgroup> query_rows: array<f32, GROUP * 256u>;
var<workgroup> weights: array<f32, GROUP * 64u>;
var<workgroup> block_max: array<f32, GROUP>;
var<workgroup> block_total: array<f32, GROUP>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let splits = max(p.splits, 1u);
    let index = (group.y * p.groups_x + group.x) / splits;
    let split = (group.y * p.groups_x + group.x) % splits;
    if (index >= p.queries * p.n_kv) {
        return;
    }
    // The group's first query head: its range is every head's of this query.
    let pair = query_head((index / p.n_kv) * p.n_head + (index % p.n_kv) * GROUP);
    let span = split_span(pair, split, splits);
    let first = span.x;
    let last = span.y;
    let hd = p.head_dim;
    let row = p.n_kv * hd;
    let cap = bitcast<f32>(p.softcap);
    let scale = select(bitcast<f32>(p.scale), bitcast<f32>(p.scale) / cap, cap > 0.0);
    // The group's heads are consecutive in a query's row.
    for (var i = t; i < GROUP * hd; i += 64u) {
        query_rows[i] = q[pair.qo + i];
    }
    workgroupBarrier();
    var acc: array<f32, GROUP * 4u>;
    var running_max: array<f32, GROUP>;
    var total: array<f32, GROUP>;
    for (var h = 0u; h < GROUP; h++) {
        running_max[h] = -3.0e38;
    }
    for (var j0 = first; j0 <= last; j0 += 64u) {
        let j = j0 + t;
        var dots: array<f32, GROUP>;
        if (j <= last) {
            let ko = (j * row + pair.kv_head * hd) / 2u;
            for (var d = 0u; d < hd; d += 2u) {
                let key = unpack2x16float(k[ko + d / 2u]);
                for (var h = 0u; h < GROUP; h++) {
                    dots[h] += query_rows[h * hd + d] * key.x + query_rows[h * hd + d + 1u] * key.y;
                }
            }
        }
        for (var h = 0u; h < GROUP; h++) {
            var score = -3.0e38;
            if (j <= last) {
                score = dots[h] * scale;
                if (cap > 0.0) {
                    score = cap * tanh(score);
                }
            }
            weights[h * 64u + t] = score;
        }
        workgroupBarrier();
        let count = min(64u, last + 1u - j0);
        if (t < GROUP) {
            var most = -3.0e38;
            for (var i = 0u; i < count; i++) {
                most = max(most, weights[t * 64u + i]);
            }
            block_max[t] = max(running_max[t], most);
        }
        workgroupBarrier();
        for (var h = 0u; h < GROUP; h++) {
            weights[h * 64u + t] = select(0.0, exp(weights[h * 64u + t] - block_max[h]), j <= last);
        }
        workgroupBarrier();
        if (t < GROUP) {
            var sum = 0.0;
            for (var i = 0u; i < count; i++) {
                sum += weights[t * 64u + i];
            }
            block_total[t] = sum;
        }
        workgroupBarrier();
        var correction: array<f32, GROUP>;
        for (var h = 0u; h < GROUP; h++) {
            correction[h] = exp(running_max[h] - block_max[h]);
            total[h] = total[h] * correction[h] + block_total[h];
            running_max[h] = block_max[h];
        }
        let vo = j0 * row + pair.kv_head * hd;
        for (var c = 0u; c < 4u; c++) {
            let d = t + 64u * c;
            if (d < hd) {
                var sums: array<f32, GROUP>;
                for (var i = 0u; i < count; i++) {
                    let at = vo + i * row + d;
                    let value = unpack2x16float(v[at / 2u])[at % 2u];
                    for (var h = 0u; h < GROUP; h++) {
                        sums[h] += weights[h * 64u + i] * value;
                    }
                }
                for (var h = 0u; h < GROUP; h++) {
                    acc[h * 4u + c] = acc[h * 4u + c] * correction[h] + sums[h];
                }
            }
        }
        // Every thread has read the block's maxima, totals and weights before the next block's.
        workgroupBarrier();
    }
    for (var h = 0u; h < GROUP; h++) {
        let head_index = (index / p.n_kv) * p.n_head + (index % p.n_kv) * GROUP + h;
        if (splits > 1u) {
            let po = (head_index * splits + split) * (hd + 2u);
            for (var c = 0u; c < 4u; c++) {
                let d = t + 64u * c;
                if (d < hd) {
                    out[po + d] = acc[h * 4u + c];
                }
            }
            if (t == 0u) {
                out[po + hd] = running_max[h];
                out[po + hd + 1u] = total[h];
            }
        } else {
            let sunk = with_sink(pair.head + h, running_max[h], total[h]);
            for (var c = 0u; c < 4u; c++) {
                let d = t + 64u * c;
                if (d < hd) {
                    out[pair.qo + h * hd + d] = acc[h * 4u + c] * sunk.z / sunk.y;
                }
            }
        }
    }
}
"#;

/// The grouped attention kernel for `group` query heads a KV head (2 to
/// [`MAX_ATTENTION_GROUP`]): its loops over the group have a constant count.
pub fn attention_grouped(group: usize) -> String {
    let header = ATTENTION_HEADER.replace("KV_ROW", "u32").replace("ROW", "f32");
    format!("{ATTENTION_PARAMS}{header}const GROUP: u32 = {group}u;\n{ATTENTION_GROUPED_MAIN}")
}

/// Split attention's second half: a 64-thread workgroup per (query, head) brings its splits'
/// partial sums (`parts`, each `head + 2` values: the weighted values, the maximum, the total)
/// under their common maximum, adds them, and divides by the total (with the sink's share).
const ATTENTION_MERGE: &str = r#"
@group(0) @binding(0) var<storage, read> parts: array<f32>;
@group(0) @binding(1) var<storage, read> sinks: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let index = group.y * p.groups_x + group.x;
    if (index >= p.queries * p.n_head) {
        return;
    }
    let hd = p.head_dim;
    let stride = hd + 2u;
    let base = index * p.splits * stride;
    var most = -3.0e38;
    for (var s = 0u; s < p.splits; s++) {
        most = max(most, parts[base + s * stride + hd]);
    }
    var total = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        total += parts[base + s * stride + hd + 1u] * exp(parts[base + s * stride + hd] - most);
    }
    let sunk = with_sink(index % p.n_head, most, total);
    for (var d = t; d < hd; d += 64u) {
        var sum = 0.0;
        for (var s = 0u; s < p.splits; s++) {
            sum += parts[base + s * stride + d] * exp(parts[base + s * stride + hd] - most);
        }
        out[index * hd + d] = sum * sunk.z / sunk.y;
    }
}
"#;

/// Query rows a workgroup of the tiled kernel takes (of one head).
pub const FLASH_QUERIES: usize = 8;

/// Tiled (flash) attention for batches: a 64-thread workgroup takes [`FLASH_QUERIES`]
/// consecutive queries of one head, so that each key and value row it reads from memory serves
/// all of them, and walks their keys in blocks of 64 under an online softmax. Per block:
/// - scores: thread `t` takes key `t` of the block and scores it against the tile's queries
///   (held in workgroup memory), reading the key row once as vectors of four;
/// - the softmax: each query row is eight threads, each over eight of the block's scores,
///   which find the row's new maximum, turn scores into weights, and sum them;
/// - values: the same eight threads each keep a quarter-of-a-row slice (four dimensions in
///   every 32) of their row's output and add the block's weighted value rows to it.
///
/// A thread loops about head / 4 + 112 times per block, so llvmpipe's 65,535 iterations per
/// invocation reach past 23,000 keys at head 256. Heads must be a multiple of 4 and at most 256
/// wide.
const ATTENTION_FLASH_MAIN: &str = r#"

const TILE: u32 = 8u;
// Four f16 of the cache.
fn half4(w: vec2<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)); }
var<workgroup> queries4: array<vec4<f32>, 512>;   // TILE rows of up to 64 vectors
var<workgroup> scores: array<f32, 512>;           // TILE rows of the block's 64 keys
var<workgroup> partial: array<f32, 64>;           // per thread: its eight scores' maximum
var<workgroup> partial_sums: array<f32, 64>;      // per thread: its eight weights' sum

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let index = group.y * p.groups_x + group.x;
    let head = index % p.n_head;
    let tile = index / p.n_head;
    let q0 = tile * TILE;
    if (q0 >= p.queries) {
        return;
    }
    let hd4 = p.head_dim / 4u;
    let kv_head = head / (p.n_head / p.n_kv);
    let row4 = p.n_kv * hd4;
    let cap = bitcast<f32>(p.softcap);
    let scale = select(bitcast<f32>(p.scale), bitcast<f32>(p.scale) / cap, cap > 0.0);
    // The tile's query rows (zeros past the batch) and each one's first and last key.
    for (var e = t; e < TILE * 64u; e += 64u) {
        let i = e / 64u;
        let d4 = e % 64u;
        var value = vec4<f32>(0.0);
        if (q0 + i < p.queries && d4 < hd4) {
            value = q[((q0 + i) * p.n_head + head) * hd4 + d4];
        }
        queries4[e] = value;
    }
    workgroupBarrier();
    // Every thread works out all of them (from the uniform and read-only buffers, so that the
    // block loop's bounds are uniform, as its barriers need).
    var firsts = array<u32, 8>();
    var lasts = array<u32, 8>();
    var lo = 0xffffffffu;
    var hi = 0u;
    for (var i = 0u; i < TILE; i++) {
        if (q0 + i < p.queries) {
            let pair = query_head((q0 + i) * p.n_head + head);
            firsts[i] = pair.first;
            lasts[i] = pair.last;
            lo = min(lo, pair.first);
            hi = max(hi, pair.last);
        } else {
            firsts[i] = 1u; // sees nothing
        }
    }
    let row = t / 8u;
    let lane = t % 8u;
    let row_first = firsts[row];
    let row_last = lasts[row];
    var acc = array<vec4<f32>, 8>();
    var running_max = -3.0e38;
    var total = 0.0;
    for (var j0 = lo; j0 <= hi && lo <= hi; j0 += 64u) {
        // Scores: key j0 + t against every query of the tile.
        let j = j0 + t;
        var s = array<f32, 8>();
        if (j <= hi) {
            let ko = j * row4 + kv_head * hd4;
            for (var d4 = 0u; d4 < hd4; d4++) {
                let key = half4(k[ko + d4]);
                s[0] += dot(queries4[d4], key);
                s[1] += dot(queries4[64u + d4], key);
                s[2] += dot(queries4[128u + d4], key);
                s[3] += dot(queries4[192u + d4], key);
                s[4] += dot(queries4[256u + d4], key);
                s[5] += dot(queries4[320u + d4], key);
                s[6] += dot(queries4[384u + d4], key);
                s[7] += dot(queries4[448u + d4], key);
            }
        }
        for (var i = 0u; i < TILE; i++) {
            var score = -3.0e38;
            if (j >= firsts[i] && j <= lasts[i]) {
                score = s[i] * scale;
                if (cap > 0.0) {
                    score = cap * tanh(score);
                }
            }
            scores[i * 64u + t] = score;
        }
        workgroupBarrier();
        // The softmax: row `row`'s eight threads, each over keys lane, lane + 8, ...
        var most = -3.0e38;
        for (var c = lane; c < 64u; c += 8u) {
            most = max(most, scores[row * 64u + c]);
        }
        partial[t] = most;
        workgroupBarrier();
        var block_max = partial[row * 8u];
        for (var c = 1u; c < 8u; c++) {
            block_max = max(block_max, partial[row * 8u + c]);
        }
        let new_max = max(running_max, block_max);
        var sum = 0.0;
        for (var c = lane; c < 64u; c += 8u) {
            let score = scores[row * 64u + c];
            let weight = select(0.0, exp(score - new_max), score > -1.0e38);
            scores[row * 64u + c] = weight;
            sum += weight;
        }
        partial_sums[t] = sum;
        workgroupBarrier();
        var block_total = 0.0;
        for (var c = 0u; c < 8u; c++) {
            block_total += partial_sums[row * 8u + c];
        }
        let correction = exp(running_max - new_max);
        total = total * correction + block_total;
        running_max = new_max;
        for (var c = 0u; c < 8u; c++) {
            acc[c] = acc[c] * correction;
        }
        // Values: this row's weighted value rows, four dimensions in every 32 per thread.
        let first = max(j0, row_first);
        let last = min(min(j0 + 63u, hi), row_last);
        for (var jj = first; jj <= last && row_first <= row_last; jj++) {
            let weight = scores[row * 64u + jj - j0];
            let vo = jj * row4 + kv_head * hd4 + lane;
            if (lane < hd4) { acc[0] += weight * half4(v[vo]); }
            if (lane + 8u < hd4) { acc[1] += weight * half4(v[vo + 8u]); }
            if (lane + 16u < hd4) { acc[2] += weight * half4(v[vo + 16u]); }
            if (lane + 24u < hd4) { acc[3] += weight * half4(v[vo + 24u]); }
            if (lane + 32u < hd4) { acc[4] += weight * half4(v[vo + 32u]); }
            if (lane + 40u < hd4) { acc[5] += weight * half4(v[vo + 40u]); }
            if (lane + 48u < hd4) { acc[6] += weight * half4(v[vo + 48u]); }
            if (lane + 56u < hd4) { acc[7] += weight * half4(v[vo + 56u]); }
        }
        // Every thread is done with the block's scores before the next block's.
        workgroupBarrier();
    }
    if (q0 + row >= p.queries) {
        return;
    }
    let sunk = with_sink(head, running_max, total);
    let oo = ((q0 + row) * p.n_head + head) * hd4;
    for (var c = 0u; c < 8u; c++) {
        let d4 = lane + 8u * c;
        if (d4 < hd4) {
            out[oo + d4] = acc[c] * sunk.z / sunk.y;
        }
    }
}
"#;

/// The attention kernels: a workgroup per (query, head), and the tiled kernel over
/// [`FLASH_QUERIES`] queries of a head (which reads rows as vectors of four).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttentionKernel {
    Group,
    Flash,
}

pub fn attention(kernel: AttentionKernel) -> String {
    let (row, kv_row, main) = match kernel {
        AttentionKernel::Group => ("f32", "u32", ATTENTION_GROUP_MAIN),
        AttentionKernel::Flash => ("vec4<f32>", "vec2<u32>", ATTENTION_FLASH_MAIN),
    };
    let header = ATTENTION_HEADER.replace("KV_ROW", kv_row).replace("ROW", row);
    let rounding = match kernel {
        AttentionKernel::Group => [F16_ROUND, F16_ROUND_SIGNED].concat(),
        AttentionKernel::Flash => String::new(),
    };
    format!("{ATTENTION_PARAMS}{header}{rounding}{main}")
}

/// The merge of split attention's partial sums.
pub fn attention_merge() -> String {
    format!("{ATTENTION_PARAMS}{ATTENTION_MERGE}")
}

/// Gated attention's queries: each head's first half of its (query, gate) pair (`p.a` the head
/// size), gathered from `y` into `x`.
pub const SPLIT_GATE: &str = "x[i] = y[(i / p.a) * 2u * p.a + i % p.a];";

/// Gated attention's output times `sigmoid(gate)`, the gate each head's second half in `y`.
pub const APPLY_GATE: &str = "x[i] = x[i] * (1.0 / (1.0 + exp(-y[(i / p.a) * 2u * p.a + p.a + i % p.a])));";

/// DeltaNet's gates, one thread per token and value head: `alpha` becomes the log-decay
/// `softplus(alpha + dt_bias) · a`, `beta` becomes `sigmoid(beta)`; `rates` holds `dt_bias`
/// then `a`.
pub const DELTA_GATES: &str = r#"
struct Params { n: u32, heads: u32, unused: u32, groups_x: u32 }
@group(0) @binding(0) var<storage, read> rates: array<f32>;
@group(0) @binding(1) var<storage, read_write> alpha: array<f32>;
@group(0) @binding(2) var<storage, read_write> beta: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (group.y * p.groups_x + group.x) * 256u + t;
    if (i >= p.n) {
        return;
    }
    let head = i % p.heads;
    let x = alpha[i] + rates[head];
    let softplus = select(log(1.0 + exp(x)), x, x > 20.0);
    alpha[i] = softplus * rates[p.heads + head];
    beta[i] = 1.0 / (1.0 + exp(-beta[i]));
}
"#;

/// DeltaNet's causal convolution, one thread per channel through the whole batch: the window is
/// the channel's last `kernel - 1` inputs (`state`, `[tap][channel]`) then the batch's (`x`),
/// each output `silu` of the taps' sum (in tap order, fused multiply-adds, as the CPU's), and
/// the state then keeps the window's last `kernel - 1` inputs (moved up in place: each read
/// lies past the write before it).
pub const DELTA_CONV: &str = r#"
struct Params { n: u32, channels: u32, kernel: u32, groups_x: u32 }
@group(0) @binding(0) var<storage, read> taps: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> state: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

fn window(at: u32, c: u32) -> f32 {
    let held = p.kernel - 1u;
    if (at < held) {
        return state[at * p.channels + c];
    }
    return x[(at - held) * p.channels + c];
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let c = (group.y * p.groups_x + group.x) * 256u + t;
    if (c >= p.channels) {
        return;
    }
    for (var token = 0u; token < p.n; token++) {
        var sum = 0.0;
        for (var i = 0u; i < p.kernel; i++) {
            sum = fma(window(token + i, c), taps[c * p.kernel + i], sum);
        }
        out[token * p.channels + c] = sum / (1.0 + exp(-sum));
    }
    for (var j = 0u; j + 1u < p.kernel; j++) {
        state[j * p.channels + c] = window(p.n + j, c);
    }
}
"#;

/// Mamba-2's selective scan, token after token: one thread per row of the state (a head's
/// dimension: `state` values), as `model::mamba2::scan_step`. Each token's step
/// `Δ = softplus(dt + dt_bias)` decays the row by `exp(Δ·A)` and adds `B·(Δ·x)`; `C` reads it
/// out, plus `D·x`. `xbc` holds the convolved `[x, B, C]` rows, `zxbcdt` the input
/// projection's rows (the time steps after `z` and `xBC`), `heads` the per-head `dt_bias`, `A`
/// and `D` one after the other.
pub const SSM_SCAN: &str = r#"
struct Params { n: u32, inner: u32, state: u32, heads: u32, groups: u32, in_dim: u32, conv_dim: u32, groups_x: u32 }
@group(0) @binding(0) var<storage, read> xbc: array<f32>;
@group(0) @binding(1) var<storage, read> zxbcdt: array<f32>;
@group(0) @binding(2) var<storage, read> heads: array<f32>;
@group(0) @binding(3) var<storage, read_write> state: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = (group.y * p.groups_x + group.x) * 64u + t;
    if (row >= p.inner) {
        return;
    }
    let h = row / (p.inner / p.heads);
    let g = h / (p.heads / p.groups);
    let s0 = row * p.state;
    for (var token = 0u; token < p.n; token++) {
        let dt = zxbcdt[token * p.in_dim + p.inner + p.conv_dim + h] + heads[h];
        let step = select(log(1.0 + exp(dt)), dt, dt > 20.0);
        let decay = exp(step * heads[p.heads + h]);
        let x = xbc[token * p.conv_dim + row];
        let x_step = x * step;
        let b0 = token * p.conv_dim + p.inner + g * p.state;
        let c0 = b0 + p.groups * p.state;
        var sum = 0.0;
        for (var s = 0u; s < p.state; s++) {
            let v = state[s0 + s] * decay + xbc[b0 + s] * x_step;
            state[s0 + s] = v;
            sum += v * xbc[c0 + s];
        }
        y[token * p.inner + row] = sum + x * heads[2u * p.heads + h];
    }
}
"#;

/// Columns `c..c + a` of rows of `b` values in `y`, gathered into rows of `a` in `x` (Mamba-2's
/// `xBC` from its input projection).
pub const GATHER_COLUMNS: &str = "x[i] = y[(i / p.a) * p.b + p.c + i % p.a];";

/// `x ← silu(x + bias)`, the bias a row of `p.a` (Mamba-2's convolution's).
pub const BIAS_SILU: &str = "let v = x[i] + y[i % p.a]; x[i] = v / (1.0 + exp(-v));";

/// `x ← x · silu(z)`, `z` the first `p.a` of each row of `p.b` in `y` (Mamba-2's gate).
pub const GATE_BY_SILU: &str = "let z = y[(i / p.a) * p.b + i % p.a]; x[i] = x[i] * (z / (1.0 + exp(-z)));";

/// LFM2's short convolution: [`DELTA_CONV`] without the SiLU.
pub fn short_conv() -> String {
    let conv = DELTA_CONV.replace("sum / (1.0 + exp(-sum))", "sum");
    debug_assert_ne!(conv, DELTA_CONV);
    conv
}

/// LFM2's gates around its convolution, over rows of `p.a` (`n_embd`) of `x`, `y` holding each
/// row's input projection `[b, c, x]` (three times as wide): before it `x ← b ⊙ x` (the
/// projection's third part), after it `x ← c ⊙ x`.
pub const SHORT_CONV_IN: &str = "let row = i / p.a; let col = i % p.a; x[i] = y[row * 3u * p.a + col] * y[row * 3u * p.a + 2u * p.a + col];";
pub const SHORT_CONV_OUT: &str =
    "let row = i / p.a; let col = i % p.a; x[i] = y[row * 3u * p.a + p.a + col] * x[i];";

/// The gated delta rule, token after token: one workgroup per value head, each thread the
/// state's columns `j` (value dimensions) it owns. Column `j` of a head's state evolves on its
/// own (`S ← e^g·S; δⱼ = β(vⱼ − S[·,j]·k); S[·,j] += δⱼ·k; oⱼ = S[·,j]·q / √d`), so threads
/// share only the token's query and key, staged in workgroup memory. The state is stored
/// `[head][i][j]` (key dimension major), so that neighbouring threads read neighbouring
/// words. A prompt runs the same recurrence inside one dispatch (not the CPU's chunked form:
/// the same values up to rounding).
pub const DELTA_RULE: &str = r#"
struct Params { n: u32, k_heads: u32, v_heads: u32, head_dim: u32 }
@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> beta: array<f32>;
@group(0) @binding(3) var<storage, read_write> state: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;
var<workgroup> q: array<f32, 256>;
var<workgroup> k: array<f32, 256>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let head = group.x;
    let d = p.head_dim;
    let key_dim = p.k_heads * d;
    let row = 2u * key_dim + p.v_heads * d;
    let qk_head = (head % p.k_heads) * d;
    let s0 = head * d * d;
    let scale = 1.0 / sqrt(f32(d));
    for (var token = 0u; token < p.n; token++) {
        let base = token * row;
        for (var i = t; i < d; i += 64u) {
            q[i] = qkv[base + qk_head + i];
            k[i] = qkv[base + key_dim + qk_head + i];
        }
        workgroupBarrier();
        let decay = exp(g[token * p.v_heads + head]);
        let b = beta[token * p.v_heads + head];
        for (var j = t; j < d; j += 64u) {
            var projected = 0.0;
            for (var i = 0u; i < d; i++) {
                projected += state[s0 + i * d + j] * decay * k[i];
            }
            let delta = (qkv[base + 2u * key_dim + head * d + j] - projected) * b;
            var o = 0.0;
            for (var i = 0u; i < d; i++) {
                let s = state[s0 + i * d + j] * decay + delta * k[i];
                state[s0 + i * d + j] = s;
                o += s * q[i];
            }
            out[token * p.v_heads * d + head * d + j] = o * scale;
        }
        workgroupBarrier();
    }
}
"#;

/// The largest DeltaNet head the delta-rule kernel takes (its query and key in workgroup
/// memory).
pub const MAX_DELTA_HEAD: usize = 256;

/// LayerNorm (ggml's `norm`, then its `mul` and `add`): one workgroup per row of `width`, the
/// mean and then the centered values' mean square reduced in workgroup memory, each value
/// `(x − mean) · scale · weight (+ bias where `has_bias`)`.
pub fn layer_norm(workgroup: u32) -> String {
    r#"
struct Params { rows: u32, width: u32, eps: u32, groups_x: u32, has_bias: u32, unused0: u32, unused1: u32, unused2: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;
var<workgroup> partial: array<f32, WG>;

fn row_sum(t: u32, value: f32) -> f32 {
    partial[t] = value;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (t < s) {
            partial[t] += partial[t + s];
        }
        workgroupBarrier();
    }
    let sum = partial[0];
    workgroupBarrier();
    return sum;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = group.y * p.groups_x + group.x;
    let base = row * p.width;
    let live = row < p.rows;
    var sum = 0.0;
    if (live) {
        for (var i = t; i < p.width; i += WG) {
            sum += x[base + i];
        }
    }
    let mean = row_sum(t, sum) / f32(p.width);
    var squares = 0.0;
    if (live) {
        for (var i = t; i < p.width; i += WG) {
            let c = x[base + i] - mean;
            squares += c * c;
        }
    }
    let scale = 1.0 / sqrt(row_sum(t, squares) / f32(p.width) + bitcast<f32>(p.eps));
    if (live) {
        for (var i = t; i < p.width; i += WG) {
            var value = ((x[base + i] - mean) * scale) * weight[i];
            if (p.has_bias != 0u) {
                value += bias[i];
            }
            y[base + i] = value;
        }
    }
}
"#
    .replace("WG", &format!("{workgroup}u"))
}

/// A vision encoder's activation in place (`p.a`: 0 GELU, 1 quick GELU, 2 SiLU), times `y` where
/// `p.b` (a gated feed-forward's up rows). The GELUs as ggml's CPU takes them from its f16
/// tables: the input rounded to f16, the result too (GELU's tanh form, exact past ±10).
pub const VISION_ACTIVATION: &str = "let g = x[i];
        let h = unpack2x16float(pack2x16float(vec2<f32>(g, 0.0))).x;
        var a = g / (1.0 + exp(-g));
        if (p.a == 0u) {
            a = 0.5 * h * (1.0 + tanh(0.7978846 * h * (1.0 + 0.044715 * h * h)));
            a = unpack2x16float(pack2x16float(vec2<f32>(a, 0.0))).x;
            if (g <= -10.0) { a = 0.0; }
            if (g >= 10.0) { a = g; }
        } else if (p.a == 1u) {
            a = unpack2x16float(pack2x16float(vec2<f32>(h * (1.0 / (1.0 + exp(-1.702 * h))), 0.0))).x;
        }
        if (p.b != 0u) { a = a * y[i]; }
        x[i] = a;";

/// ggml's `clamp` between `p.b` and `p.a` (f32 bits): `max(min(x, high), low)`. `y` is bound
/// but unread (the phony read keeps it in the element-wise kernels' layout).
pub const CLAMP: &str = "_ = y[0]; x[i] = max(min(x[i], bitcast<f32>(p.a)), bitcast<f32>(p.b));";

/// Each value rounded to f16 (and back), as llama.cpp rounds activations before an F16 matrix
/// and keys and values before attention; `y` bound but unread.
pub const ROUND_F16: &str = "_ = y[0]; x[i] = unpack2x16float(pack2x16float(vec2<f32>(x[i], 0.0))).x;";

/// Gemma 4's standardization: `(x − bias) · scale`, `y` the bias's `p.a` values then the scale's.
pub const STANDARDIZE: &str = "x[i] = (x[i] - y[i % p.a]) * y[p.a + i % p.a];";

/// A vision encoder's 2D RoPE from a table: one thread per (row, head, pair), each row's pairs'
/// `[cos, sin]` in `table` (`head_dim / 2` pairs a row), pair `j` turning values half a
/// `span` apart within its span (Qwen: one span, the head; Gemma 4: two, its halves), with
/// ggml's rounding (a fused multiply-add).
pub const ROPE_TABLE: &str = r#"
struct Params { rows: u32, heads: u32, head_dim: u32, span: u32, groups_x: u32, unused0: u32, unused1: u32, unused2: u32 }
@group(0) @binding(0) var<storage, read> table: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let pairs = p.head_dim / 2u;
    let index = (group.y * p.groups_x + group.x) * 256u + t;
    if (index >= p.rows * p.heads * pairs) {
        return;
    }
    let j = index % pairs;
    let head = (index / pairs) % p.heads;
    let row = index / (pairs * p.heads);
    let half = p.span / 2u;
    let a = (row * p.heads + head) * p.head_dim + (j / half) * p.span + j % half;
    let b = a + half;
    let c = table[2u * (row * pairs + j)];
    let s = table[2u * (row * pairs + j) + 1u];
    let x0 = x[a];
    let x1 = x[b];
    x[a] = fma(x0, c, -(x1 * s));
    x[b] = fma(x0, s, x1 * c);
}
"#;

/// Chunks of `p.chunk` values: the output's `i`th is `x`'s `sources[i]`th, or zeros where the
/// source is `0xffffffff`; one thread per value.
pub const GATHER: &str = r#"
struct Params { n: u32, chunk: u32, groups_x: u32, unused: u32 }
@group(0) @binding(0) var<storage, read> sources: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (group.y * p.groups_x + group.x) * 256u + t;
    if (i >= p.n) {
        return;
    }
    let source = sources[i / p.chunk];
    out[i] = select(x[source * p.chunk + i % p.chunk], 0.0, source == 0xffffffffu);
}
"#;

/// Keys and values into an f16 cache, as llama.cpp keeps them: `pairs` pairs of each of `k`
/// and `v` from value `2 · first_in` on, each rounded to f16 and packed into a word of `keys`
/// and `values` from word `first_out` on.
pub fn pack_f16() -> String {
    format!("{PACKED}{PACK_F16_MAIN}")
}

/// Two values as an f16 pair. pack2x16float is undefined past f16's range: such values keep
/// its largest.
const PACKED: &str = r#"
fn packed(a: f32, b: f32) -> u32 {
    return pack2x16float(clamp(vec2<f32>(a, b), vec2<f32>(-65504.0), vec2<f32>(65504.0)));
}
"#;

const PACK_F16_MAIN: &str = r#"
struct Params { pairs: u32, first_in: u32, first_out: u32, groups_x: u32 }
@group(0) @binding(0) var<storage, read> k: array<f32>;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read_write> keys: array<u32>;
@group(0) @binding(3) var<storage, read_write> values: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (group.y * p.groups_x + group.x) * 256u + t;
    if (i >= p.pairs) {
        return;
    }
    let at = 2u * (p.first_in + i);
    keys[p.first_out + i] = packed(k[at], k[at + 1u]);
    values[p.first_out + i] = packed(v[at], v[at + 1u]);
}
"#;

/// ggml's `pool_2d` average: each output value the f32 sum of a `merge × merge` square of a
/// `width`-wide grid's rows (`d` wide), in reading order, divided by its count.
pub const AVERAGE_POOL: &str = r#"
struct Params { n: u32, width: u32, d: u32, merge: u32, out_width: u32, groups_x: u32, unused0: u32, unused1: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = (group.y * p.groups_x + group.x) * 256u + t;
    if (i >= p.n) {
        return;
    }
    let c = i % p.d;
    let cell = i / p.d;
    let oy = cell / p.out_width;
    let ox = cell % p.out_width;
    var sum = 0.0;
    for (var ky = 0u; ky < p.merge; ky++) {
        for (var kx = 0u; kx < p.merge; kx++) {
            sum += x[((oy * p.merge + ky) * p.width + ox * p.merge + kx) * p.d + c];
        }
    }
    out[i] = sum / f32(p.merge * p.merge);
}
"#;

/// Logits a workgroup of [`best_logits`] ranks at once.
pub const BEST_SPAN: u32 = 1024;
/// Words of one workgroup's result: its statistics (max, `Σ exp(x)`, `Σ exp(x)·x`, unused),
/// then its best `BEST_LOGITS` as (id, order key) pairs, best first.
pub const BEST_GROUP_WORDS: u32 = 4 + 2 * crate::sampler::BEST_LOGITS as u32;

/// The best `BEST_LOGITS` of the logits, with the softmax statistics of all of them at a
/// temperature, in passes (`crate::sampler::BestLogits`, the CPU's reference). The first pass
/// (`first`) reads the logits, `BEST_SPAN` per workgroup; each later pass reads the results of
/// `BEST_SPAN / BEST_LOGITS` workgroups of the pass before; one workgroup is left at the end.
/// A workgroup bitonic-sorts its span in workgroup memory (higher logit first, then lower id,
/// the sampler's order) and keeps the front; statistics taken against each span's own maximum
/// are rescaled to the larger one as spans merge. Logits are ranked by an order key, a `u32`
/// that sorts as `f32::total_cmp` does (so 0.0 ranks above -0.0, as on the CPU); NaN is read as
/// -inf and +inf as the largest finite value, as the sampler reads them.
pub fn best_logits() -> String {
    r#"
struct Params { n: u32, first: u32, inv_t: f32, groups_in: u32, groups_x: u32, unused0: u32, unused1: u32, unused2: u32 }
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

const SPAN: u32 = SPAN_VALUEu;
const BEST: u32 = BEST_VALUEu;
const GROUP_WORDS: u32 = GROUP_WORDS_VALUEu;
const FAN_IN: u32 = SPAN / BEST;
const THREADS: u32 = 256u;
const NO_ID: u32 = 0xffffffffu;
const NEG_INF_KEY: u32 = 0x007fffffu;

var<workgroup> keys: array<u32, SPAN>;
var<workgroup> ids: array<u32, SPAN>;
var<workgroup> sums: array<vec3<f32>, THREADS>;
var<workgroup> top_keys: array<u32, THREADS>;

// A float's order key: a u32 that sorts as f32::total_cmp does.
fn order_key(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn from_key(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

// The order key of a logit's bits as the sampler ranks it: NaN as -inf, +inf as the largest
// finite value. Compared as bits: a compiler may fold `v != v`, and WGSL has no infinite
// constants.
fn ranked_key(b: u32) -> u32 {
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return NEG_INF_KEY;
    }
    if (b == 0x7f800000u) {
        return 0xff7fffffu; // order_key(f32::MAX)
    }
    return order_key(bitcast<f32>(b));
}

fn better(a: u32, b: u32) -> bool {
    return keys[a] > keys[b] || (keys[a] == keys[b] && ids[a] < ids[b]);
}

// Statistics (max, Σ e, Σ e·x) against `m` instead of their own max: each term times exp(d).
fn rescaled(s: vec3<f32>, m: f32) -> vec3<f32> {
    if (s.y == 0.0) {
        return vec3<f32>(m, 0.0, 0.0);
    }
    // 0 for the span holding the max, even where 1/T overflowed (a temperature under 3e-39).
    let d = select((s.x - m) * p.inv_t, 0.0, s.x == m);
    let c = exp(d);
    if (c == 0.0) {
        return vec3<f32>(m, 0.0, 0.0);
    }
    return vec3<f32>(m, s.y * c, (s.z + s.y * d) * c);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let g = group.y * p.groups_x + group.x;
    // Each thread's four entries, and the largest of their keys.
    var top = 0u;
    for (var r = 0u; r < 4u; r++) {
        let s = t + r * THREADS;
        keys[s] = 0u; // Below every real entry's key (-inf's is NEG_INF_KEY).
        ids[s] = NO_ID;
        if (p.first != 0u) {
            let i = g * SPAN + s;
            if (i < p.n) {
                keys[s] = ranked_key(input[i]);
                ids[s] = i;
                top = max(top, keys[s]);
            }
        } else {
            let source = g * FAN_IN + s / BEST;
            if (source < p.groups_in) {
                let at = source * GROUP_WORDS + 4u + 2u * (s % BEST);
                ids[s] = input[at];
                keys[s] = input[at + 1u];
            }
        }
    }
    // Statistics: in the first pass over the span's logits, in later ones the inputs' merged.
    // (max, Σ e, Σ e·x); a span with no terms has max 0, which no merge reads.
    var mine = vec3<f32>(0.0, 0.0, 0.0);
    if (p.first != 0u) {
        top_keys[t] = top;
        workgroupBarrier();
        for (var half = THREADS / 2u; half > 0u; half >>= 1u) {
            if (t < half) {
                top_keys[t] = max(top_keys[t], top_keys[t + half]);
            }
            workgroupBarrier();
        }
        let m_key = top_keys[0];
        let m = from_key(m_key);
        for (var r = 0u; r < 4u; r++) {
            let s = t + r * THREADS;
            // -inf logits are left out (the CPU's sum leaves out what is not finite), told by
            // their keys: a compiler may assume floats finite. An `x` that overflows to -inf
            // weighs 0 and is left out too.
            if (keys[s] > NEG_INF_KEY && m_key > NEG_INF_KEY) {
                let x = select((from_key(keys[s]) - m) * p.inv_t, 0.0, keys[s] == m_key);
                let e = exp(x);
                if (e > 0.0) {
                    mine.y += e;
                    mine.z += e * x;
                }
            }
        }
        mine.x = m;
    } else if (t < FAN_IN) {
        let source = g * FAN_IN + t;
        if (source < p.groups_in) {
            let at = source * GROUP_WORDS;
            mine = vec3<f32>(bitcast<f32>(input[at]), bitcast<f32>(input[at + 1u]), bitcast<f32>(input[at + 2u]));
        }
    }
    sums[t] = mine;
    workgroupBarrier();
    for (var half = THREADS / 2u; half > 0u; half >>= 1u) {
        if (t < half) {
            let a = sums[t];
            let b = sums[t + half];
            // Both against the larger max of those that hold any terms.
            var m = a.x;
            if (a.y == 0.0 || (b.y != 0.0 && b.x > a.x)) {
                m = b.x;
            }
            let ra = rescaled(a, m);
            let rb = rescaled(b, m);
            sums[t] = vec3<f32>(m, ra.y + rb.y, ra.z + rb.z);
        }
        workgroupBarrier();
    }
    // Bitonic sort of the span, best first: two compare-exchanges per thread per step.
    for (var k = 2u; k <= SPAN; k <<= 1u) {
        for (var j = k >> 1u; j > 0u; j >>= 1u) {
            for (var h = 0u; h < 2u; h++) {
                let q = t + h * THREADS;
                let i = ((q & ~(j - 1u)) << 1u) | (q & (j - 1u));
                let other = i + j;
                let swap = select(better(i, other), better(other, i), (i & k) == 0u);
                if (swap) {
                    let key = keys[i];
                    let id = ids[i];
                    keys[i] = keys[other];
                    ids[i] = ids[other];
                    keys[other] = key;
                    ids[other] = id;
                }
            }
            workgroupBarrier();
        }
    }
    let base = g * GROUP_WORDS;
    if (t < BEST) {
        out[base + 4u + 2u * t] = ids[t];
        out[base + 5u + 2u * t] = keys[t];
    }
    if (t == 0u) {
        let s = sums[0];
        out[base] = bitcast<u32>(s.x);
        out[base + 1u] = bitcast<u32>(s.y);
        out[base + 2u] = bitcast<u32>(s.z);
        out[base + 3u] = 0u;
    }
}
"#
    .replace("SPAN_VALUE", &BEST_SPAN.to_string())
    .replace("BEST_VALUE", &crate::sampler::BEST_LOGITS.to_string())
    .replace("GROUP_WORDS_VALUE", &BEST_GROUP_WORDS.to_string())
}

#[cfg(test)]
mod tests {
    use super::renamed;

    #[test]
    fn renaming_touches_the_declared_names_and_the_weights_only() {
        let code = "var<private> levels: array<f32, 2>;\nfn byte_at(i: u32) -> u32 { return w[i] + levels[0u] + x_at(2u); }\n\
                    fn row_dot(v: vec4<f32>) -> f32 { let w4 = v.w; return f32(byte_at(0u)) + v.w; }\n";
        let want = "var<private> levels_up: array<f32, 2>;\nfn byte_at_up(i: u32) -> u32 { return w_up[i] + levels_up[0u] + x_at(2u); }\n\
                    fn row_dot_up(v: vec4<f32>) -> f32 { let w4 = v.w; return f32(byte_at_up(0u)) + v.w; }\n";
        assert_eq!(renamed(code, "_up"), want);
    }
}
