//! WGSL of the GPU kernels, assembled per weight type from one skeleton: the bindings, the
//! byte readers over `array<u32>`, the type's row dot product, and the workgroup's tree sum.

use crate::tensor::WeightType;

/// The weight types with a matrix-vector kernel.
pub const MATVEC_TYPES: [WeightType; 8] = [
    WeightType::F32,
    WeightType::F16,
    WeightType::BF16,
    WeightType::Q4_0,
    WeightType::Q4_1,
    WeightType::Q5_0,
    WeightType::Q5_1,
    WeightType::Q8_0,
];

/// Bindings and readers every kernel shares. Offsets are byte offsets into the weights.
const HEADER: &str = r#"
struct Params { rows: u32, cols: u32, row_bytes: u32, groups_x: u32 }
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn byte_at(i: u32) -> u32 { return (w[i >> 2u] >> ((i & 3u) << 3u)) & 0xffu; }
// An f16 at an even offset: both halves of a word are decoded, the right one kept.
fn half_at(i: u32) -> f32 { let v = unpack2x16float(w[i >> 2u]); return select(v.x, v.y, (i & 2u) != 0u); }
fn i8_at(i: u32) -> f32 { return f32(bitcast<i32>(byte_at(i) << 24u) >> 24u); }
fn u32_at(i: u32) -> u32 {
    return byte_at(i) | (byte_at(i + 1u) << 8u) | (byte_at(i + 2u) << 16u) | (byte_at(i + 3u) << 24u);
}
"#;

/// The entry point: one workgroup per row (rows past 65,535 in a second dispatch dimension),
/// each thread's share of the row summed in workgroup memory.
const MAIN: &str = r#"
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let row = group.y * p.groups_x + group.x;
    var sum = 0.0;
    if (row < p.rows) {
        sum = row_dot(row * p.row_bytes, t);
    }
    partial[t] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (t < s) {
            partial[t] += partial[t + s];
        }
        workgroupBarrier();
    }
    if (t == 0u && row < p.rows) {
        y[row] = partial[0];
    }
}
"#;

/// A float row: thread `t` takes elements `t`, `t + WG`, ...; `VALUE` reads element `e`.
const FLOAT_ROW: &str = r#"
fn row_dot(base: u32, t: u32) -> f32 {
    var sum = 0.0;
    for (var e = t; e < p.cols; e += WG) {
        sum += VALUE * x[e];
    }
    return sum;
}
"#;

/// A row of 32-element blocks of `BYTES` bytes: thread `t` takes blocks `t`, `t + WG`, ...;
/// `BLOCK` adds the block at byte `at` (inputs from `xo`) to `sum`.
const BLOCK_ROW: &str = r#"
fn row_dot(base: u32, t: u32) -> f32 {
    var sum = 0.0;
    for (var b = t; b < p.cols / 32u; b += WG) {
        let at = base + b * BYTES;
        let xo = b * 32u;
        BLOCK
    }
    return sum;
}
"#;

/// The matrix-vector kernel for `weight_type`, `workgroup` threads wide (a power of two).
pub fn matvec(weight_type: WeightType, workgroup: u32) -> String {
    let row = match weight_type {
        WeightType::F32 => FLOAT_ROW.replace("VALUE", "bitcast<f32>(w[(base >> 2u) + e])"),
        WeightType::F16 => FLOAT_ROW.replace("VALUE", "half_at(base + 2u * e)"),
        WeightType::BF16 => FLOAT_ROW.replace(
            "VALUE",
            "bitcast<f32>(((w[(base + 2u * e) >> 2u] >> (((base + 2u * e) & 2u) << 3u)) & 0xffffu) << 16u)",
        ),
        WeightType::Q4_0 => block_row(
            18,
            "let d = half_at(at);
        var s = 0.0;
        for (var j = 0u; j < 16u; j++) {
            let q = byte_at(at + 2u + j);
            s += f32(i32(q & 15u) - 8) * x[xo + j] + f32(i32(q >> 4u) - 8) * x[xo + j + 16u];
        }
        sum += d * s;",
        ),
        WeightType::Q4_1 => block_row(
            20,
            "let d = half_at(at);
        let m = half_at(at + 2u);
        var s = 0.0;
        var sx = 0.0;
        for (var j = 0u; j < 16u; j++) {
            let q = byte_at(at + 4u + j);
            s += f32(q & 15u) * x[xo + j] + f32(q >> 4u) * x[xo + j + 16u];
            sx += x[xo + j] + x[xo + j + 16u];
        }
        sum += d * s + m * sx;",
        ),
        WeightType::Q5_0 => block_row(
            22,
            "let d = half_at(at);
        let qh = u32_at(at + 2u);
        var s = 0.0;
        for (var j = 0u; j < 16u; j++) {
            let q = byte_at(at + 6u + j);
            let low = (q & 15u) | (((qh >> j) << 4u) & 16u);
            let high = (q >> 4u) | ((qh >> (j + 12u)) & 16u);
            s += f32(i32(low) - 16) * x[xo + j] + f32(i32(high) - 16) * x[xo + j + 16u];
        }
        sum += d * s;",
        ),
        WeightType::Q5_1 => block_row(
            24,
            "let d = half_at(at);
        let m = half_at(at + 2u);
        let qh = u32_at(at + 4u);
        var s = 0.0;
        var sx = 0.0;
        for (var j = 0u; j < 16u; j++) {
            let q = byte_at(at + 8u + j);
            let low = (q & 15u) | (((qh >> j) << 4u) & 16u);
            let high = (q >> 4u) | ((qh >> (j + 12u)) & 16u);
            s += f32(low) * x[xo + j] + f32(high) * x[xo + j + 16u];
            sx += x[xo + j] + x[xo + j + 16u];
        }
        sum += d * s + m * sx;",
        ),
        WeightType::Q8_0 => block_row(
            34,
            "let d = half_at(at);
        var s = 0.0;
        for (var j = 0u; j < 32u; j++) {
            s += i8_at(at + 2u + j) * x[xo + j];
        }
        sum += d * s;",
        ),
        other => unreachable!("no matrix-vector kernel for {other:?}: not in MATVEC_TYPES"),
    };
    format!("{HEADER}{row}{MAIN}").replace("WG", &format!("{workgroup}u"))
}

fn block_row(bytes: u32, block: &str) -> String {
    BLOCK_ROW.replace("BYTES", &format!("{bytes}u")).replace("BLOCK", block)
}
