//! Malformed GGUF files: each case writes a valid file with the crate's own writer, corrupts
//! exactly one thing, and checks that the parser rejects it with the right error kind and a
//! message that names the field. Then: every truncation of a valid file, the prefix API on
//! every prefix, and 20,000 seeded random mutations (no panic, no out-of-file tensor).

use std::panic::{AssertUnwindSafe, catch_unwind};

use inferno::gguf::writer::{GgufWriter, Layout};
use inferno::gguf::{
    self, Array, GgmlType, Gguf, GgufErrorKind, GgufHeader, HeaderParse, MAX_ARRAY_NESTING, Value,
};
use inferno::inspect::Report;

// ---------------------------------------------------------------------------------------------
// The valid file every case starts from.

/// Seven metadata entries and three tensors; the last tensor ends exactly at the end of the file
/// (no trailing padding), so every strict prefix of it is missing something.
fn base() -> GgufWriter {
    GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into())) // kv[0]
        .kv("general.alignment", Value::U32(32)) // kv[1]
        .kv("test.bytes", Value::Array(Array::U8(vec![1, 2, 3, 4]))) // kv[2]
        .kv("test.u64s", Value::Array(Array::U64(vec![7, 8, 9]))) // kv[3]
        .kv("test.strings", Value::Array(Array::String(vec!["ab".into(), "cd".into()]))) // kv[4]
        .kv("test.flag", Value::Bool(true)) // kv[5]
        .kv("test.flags", Value::Array(Array::Bool(vec![true, false, true]))) // kv[6]
        .tensor_f32("a.weight", &[8, 4], &[0.5; 32]) // tensor[0]: data 0..128
        .tensor("b.weight", &[256], GgmlType::Q4_K, vec![0x11; 144]) // tensor[1]: 128..272
        .tensor("c.weight", &[16], GgmlType::F16, vec![0x3c; 32]) // tensor[2]: 288..320
}

/// An array value: element type (4 bytes), length (8), then the elements.
const ARRAY_ELEMENTS: usize = 12;

/// `levels` arrays inside each other around one u8 array (`levels` = 1 is a plain u8 array).
fn nested(levels: usize) -> Array {
    (1..levels).fold(Array::U8(vec![1, 2]), |inner, _| Array::Array(vec![inner]))
}

fn with_kv(key: &str, value: Value) -> GgufWriter {
    GgufWriter::new().kv(key, value).tensor_f32("t", &[8], &[1.0; 8])
}

fn nested_past_cap() -> GgufWriter {
    with_kv("test.nested", Value::Array(nested(MAX_ARRAY_NESTING + 1)))
}
fn nested_64() -> GgufWriter {
    with_kv("test.nested", Value::Array(nested(64)))
}
fn empty_key() -> GgufWriter {
    with_kv("", Value::U8(1))
}
fn empty_tensor_name() -> GgufWriter {
    GgufWriter::new().tensor_f32("", &[8], &[1.0; 8])
}
fn long_tensor_name() -> GgufWriter {
    GgufWriter::new().tensor_f32(&"x".repeat(64), &[8], &[1.0; 8])
}
fn duplicate_key() -> GgufWriter {
    base().kv("test.flag", Value::Bool(false))
}
fn duplicate_tensor() -> GgufWriter {
    base().tensor_f32("a.weight", &[8], &[1.0; 8])
}
fn dims_product_overflow() -> GgufWriter {
    GgufWriter::new().tensor("huge", &[1 << 32, 1 << 32, 1 << 32], GgmlType::F32, vec![])
}
fn alignment_u64() -> GgufWriter {
    with_kv("general.alignment", Value::U64(32))
}
fn alignment_string() -> GgufWriter {
    with_kv("general.alignment", Value::String("32".into()))
}

// ---------------------------------------------------------------------------------------------
// Corrupting one field.

/// One change to a written file, at `field` (a [`Layout`] label, or `"magic"` for offset 0)
/// plus a byte offset inside that field.
#[derive(Clone, Copy, Debug)]
enum Edit {
    /// The writer itself produced the invalid file (duplicate keys, empty names, …).
    None,
    U8(&'static str, usize, u8),
    U32(&'static str, usize, u32),
    U64(&'static str, usize, u64),
    Bytes(&'static str, usize, &'static [u8]),
    /// Keeps only the bytes before the position.
    CutAt(&'static str, usize),
}

fn field_at(layout: &Layout, label: &str) -> usize {
    if label == "magic" { 0 } else { layout.at(label) }
}

fn put(bytes: &mut [u8], at: usize, new: &[u8]) {
    bytes[at..at + new.len()].copy_from_slice(new);
}

/// Writes `file` and applies `edit` to it.
fn corrupt(file: &GgufWriter, edit: Edit) -> Vec<u8> {
    let (mut bytes, layout) = file.to_bytes_with_layout();
    let at = |label, delta| field_at(&layout, label) + delta;
    match edit {
        Edit::None => {}
        Edit::U8(label, delta, v) => put(&mut bytes, at(label, delta), &[v]),
        Edit::U32(label, delta, v) => put(&mut bytes, at(label, delta), &v.to_le_bytes()),
        Edit::U64(label, delta, v) => put(&mut bytes, at(label, delta), &v.to_le_bytes()),
        Edit::Bytes(label, delta, new) => put(&mut bytes, at(label, delta), new),
        Edit::CutAt(label, delta) => bytes.truncate(at(label, delta)),
    }
    bytes
}

struct Case {
    name: &'static str,
    file: fn() -> GgufWriter,
    edit: Edit,
    kind: GgufErrorKind,
    /// Part of the error's message (the field or offset it must name).
    says: &'static str,
}

fn case(
    name: &'static str,
    file: fn() -> GgufWriter,
    edit: Edit,
    kind: GgufErrorKind,
    says: &'static str,
) -> Case {
    Case { name, file, edit, kind, says }
}

fn cases() -> Vec<Case> {
    use Edit::*;
    use GgufErrorKind::*;
    const MAX: u64 = u64::MAX;
    const STRINGS: usize = ARRAY_ELEMENTS; // first element of "test.strings": length 2, "ab"
    vec![
        // Magic and version.
        case("magic GGUf", base, Bytes("magic", 0, b"GGUf"), BadMagic, "expected \"GGUF\""),
        case("magic of a legacy GGJT file", base, Bytes("magic", 0, b"tjgg"), BadMagic, "\"tjgg\""),
        case("magic all zero", base, Bytes("magic", 0, &[0; 4]), BadMagic, "[00, 00, 00, 00]"),
        case("version 0", base, U32("version", 0, 0), UnsupportedVersion, "version 0"),
        case("version 1 (u32 counts)", base, U32("version", 0, 1), UnsupportedVersion, "version 1"),
        case("version 4", base, U32("version", 0, 4), UnsupportedVersion, "version 4"),
        case("big-endian version 3", base, U32("version", 0, 0x0300_0000), UnsupportedVersion, "big-endian"),
        case("big-endian version 2", base, U32("version", 0, 0x0200_0000), UnsupportedVersion, "big-endian"),
        // Counts that cannot fit in the bytes that remain.
        case(
            "tensor count u64::MAX",
            base,
            U64("tensor_count", 0, MAX),
            TooManyTensors,
            "tensor count at offset 8",
        ),
        case("tensor count 2^32", base, U64("tensor_count", 0, 1 << 32), TooManyTensors, "4294967296"),
        case(
            "tensor count 2^16 + 1",
            base,
            U64("tensor_count", 0, (1 << 16) + 1),
            TooManyTensors,
            "more than the 65536 accepted",
        ),
        case(
            "metadata count u64::MAX",
            base,
            U64("kv_count", 0, MAX),
            CountTooLarge,
            "metadata count at offset 16",
        ),
        case("metadata count 1000", base, U64("kv_count", 0, 1000), CountTooLarge, "is 1000, more than"),
        // String lengths past the end.
        case(
            "key length u64::MAX",
            base,
            U64("kv[0].key", 0, MAX),
            LengthPastEnd,
            "metadata key #0 at offset 24",
        ),
        case("key length 1 MiB", base, U64("kv[3].key", 0, 1 << 20), LengthPastEnd, "metadata key #3"),
        case(
            "string value length 2^40",
            base,
            U64("kv[0].value", 0, 1 << 40),
            LengthPastEnd,
            "metadata \"general.architecture\"",
        ),
        case(
            "tensor name length u64::MAX",
            base,
            U64("tensor[1].name", 0, MAX),
            LengthPastEnd,
            "tensor #1 name",
        ),
        case(
            "string array element length u64::MAX",
            base,
            U64("kv[4].value", STRINGS + 8 + 2, MAX),
            LengthPastEnd,
            "metadata \"test.strings\"[1]",
        ),
        // Array lengths.
        case(
            "u8 array length past the end",
            base,
            U64("kv[2].value", 4, 1 << 20),
            CountTooLarge,
            "length of metadata \"test.bytes\"",
        ),
        case(
            "u64 array of 200 (fits as bytes, not as u64s)",
            base,
            U64("kv[3].value", 4, 200),
            CountTooLarge,
            "is 200",
        ),
        case(
            "u64 array length 2^61 (x8 wraps to 0)",
            base,
            U64("kv[3].value", 4, 1 << 61),
            CountTooLarge,
            "test.u64s",
        ),
        case("u64 array length u64::MAX", base, U64("kv[3].value", 4, MAX), CountTooLarge, "test.u64s"),
        case("string array length u64::MAX", base, U64("kv[4].value", 4, MAX), CountTooLarge, "test.strings"),
        case("bool array length 2^40", base, U64("kv[6].value", 4, 1 << 40), CountTooLarge, "test.flags"),
        // Nesting.
        case("arrays nested one past the cap", nested_past_cap, None, NestingTooDeep, "deeper than 3 levels"),
        case("arrays nested 64 deep", nested_64, None, NestingTooDeep, "\"test.nested\""),
        // Unknown value types.
        case("value type 13", base, U32("kv[5].type", 0, 13), UnknownValueType, "unknown value type id 13"),
        case("value type u32::MAX", base, U32("kv[5].type", 0, u32::MAX), UnknownValueType, "4294967295"),
        case(
            "array element type 13",
            base,
            U32("kv[2].value", 0, 13),
            UnknownValueType,
            "element type of metadata \"test.bytes\"",
        ),
        case(
            "array element type u32::MAX",
            base,
            U32("kv[2].value", 0, u32::MAX),
            UnknownValueType,
            "4294967295",
        ),
        // Bools.
        case("bool byte 2", base, U8("kv[5].value", 0, 2), InvalidBool, "bool byte is 2"),
        case("bool byte 0xFF", base, U8("kv[5].value", 0, 0xff), InvalidBool, "bool byte is 255"),
        case(
            "bool array element 2",
            base,
            U8("kv[6].value", ARRAY_ELEMENTS + 1, 2),
            InvalidBool,
            "metadata \"test.flags\"[1]",
        ),
        // UTF-8.
        case("key not UTF-8", base, U8("kv[0].key", 8, 0xff), InvalidUtf8, "metadata key #0 at offset 24"),
        case(
            "key with overlong '/'",
            base,
            Bytes("kv[0].key", 8, &[0xc0, 0xaf]),
            InvalidUtf8,
            "metadata key #0",
        ),
        case("key with a surrogate", base, Bytes("kv[0].key", 8, &[0xed, 0xa0, 0x80]), InvalidUtf8, "key #0"),
        case(
            "tensor name ends mid-character",
            base,
            U8("tensor[1].name", 15, 0xc3),
            InvalidUtf8,
            "tensor #1 name",
        ),
        case(
            "string value not UTF-8",
            base,
            U8("kv[0].value", 8, 0xff),
            InvalidUtf8,
            "metadata \"general.architecture\"",
        ),
        case(
            "string array element not UTF-8",
            base,
            U8("kv[4].value", STRINGS + 8, 0xfe),
            InvalidUtf8,
            "metadata \"test.strings\"[0]",
        ),
        // Names.
        case("empty key", empty_key, None, InvalidName, "metadata key #0 at offset 24 is empty"),
        case(
            "empty tensor name",
            empty_tensor_name,
            None,
            InvalidName,
            "tensor #0 name at offset 24 is empty",
        ),
        case("tensor name of 64 bytes", long_tensor_name, None, InvalidName, "longer than 63 bytes"),
        case("duplicate key", duplicate_key, None, DuplicateKey, "\"test.flag\""),
        case("duplicate tensor name", duplicate_tensor, None, DuplicateTensorName, "\"a.weight\""),
        // Dimensions.
        case("n_dims 0", base, U32("tensor[0].n_dims", 0, 0), InvalidDimensionCount, "is 0, expected 1 to 4"),
        case("n_dims 5", base, U32("tensor[0].n_dims", 0, 5), InvalidDimensionCount, "is 5"),
        case(
            "n_dims u32::MAX",
            base,
            U32("tensor[0].n_dims", 0, u32::MAX),
            InvalidDimensionCount,
            "a.weight",
        ),
        case("zero dimension", base, U64("tensor[0].dim[1]", 0, 0), ZeroDimension, "dimension 1"),
        case("dims 2^32 x 2^32 x 2^32", dims_product_overflow, None, SizeOverflow, "\"huge\""),
        case("F32 byte size 2^65", base, U64("tensor[0].dim[0]", 0, 1 << 61), SizeOverflow, "a.weight"),
        // Tensor types.
        case(
            "tensor type 40",
            base,
            U32("tensor[0].type", 0, 40),
            UnknownTensorType,
            "unknown ggml type id 40",
        ),
        case("tensor type 1000", base, U32("tensor[0].type", 0, 1000), UnknownTensorType, "1000"),
        case(
            "tensor type u32::MAX",
            base,
            U32("tensor[0].type", 0, u32::MAX),
            UnknownTensorType,
            "4294967295",
        ),
        case("removed type 4 (Q4_2)", base, U32("tensor[0].type", 0, 4), RemovedTensorType, "4 (Q4_2)"),
        case("removed type 31 (Q4_0_4_4)", base, U32("tensor[0].type", 0, 31), RemovedTensorType, "Q4_0_4_4"),
        case(
            "Q4_K row of 100",
            base,
            U64("tensor[1].dim[0]", 0, 100),
            RowNotBlockAligned,
            "first dimension 100 at offset",
        ),
        case(
            "F32 [8, 4] retyped Q8_0",
            base,
            U32("tensor[0].type", 0, 8),
            RowNotBlockAligned,
            "Q8_0's block size 32",
        ),
        // general.alignment.
        case("alignment 0", base, U32("kv[1].value", 0, 0), InvalidAlignment, "is 0"),
        case("alignment 3", base, U32("kv[1].value", 0, 3), InvalidAlignment, "is 3"),
        case("alignment 2^30", base, U32("kv[1].value", 0, 1 << 30), InvalidAlignment, "is 1073741824"),
        case(
            "alignment 2^21 (cap is 2^20)",
            base,
            U32("kv[1].value", 0, 1 << 21),
            InvalidAlignment,
            "2097152",
        ),
        case("alignment typed i32", base, U32("kv[1].type", 0, 5), AlignmentWrongType, "has type i32"),
        case("alignment u64", alignment_u64, None, AlignmentWrongType, "has type u64"),
        case("alignment string", alignment_string, None, AlignmentWrongType, "has type string"),
        // Tensor data layout.
        case(
            "alignment 256 misaligns tensor 1",
            base,
            U32("kv[1].value", 0, 256),
            MisalignedTensor,
            "data offset 128 is not a multiple of the alignment 256",
        ),
        case("tensor offset +1", base, U64("tensor[1].offset", 0, 129), MisalignedTensor, "\"b.weight\""),
        case(
            "tensors overlap partly",
            base,
            U64("tensor[1].offset", 0, 64),
            OverlappingTensors,
            "\"a.weight\" and \"b.weight\" overlap at data offset 64",
        ),
        case(
            "tensors at the same offset",
            base,
            U64("tensor[2].offset", 0, 128),
            OverlappingTensors,
            "\"c.weight\"",
        ),
        case("tensor offset 1 MiB", base, U64("tensor[1].offset", 0, 1 << 20), TensorPastEnd, "\"b.weight\""),
        case(
            "tensor offset u64::MAX - 31",
            base,
            U64("tensor[1].offset", 0, MAX - 31),
            TensorPastEnd,
            "b.weight",
        ),
        case(
            "tensor dims past the end",
            base,
            U64("tensor[1].dim[0]", 0, 256 * 64),
            TensorPastEnd,
            "b.weight",
        ),
        case("file cut inside the last tensor", base, CutAt("data", 319), TensorPastEnd, "\"c.weight\""),
        // Truncation inside fixed-size fields.
        case(
            "file cut in the version",
            base,
            CutAt("version", 2),
            Truncated,
            "version at offset 4 needs 4 bytes",
        ),
        case("file cut in the metadata count", base, CutAt("kv_count", 3), Truncated, "metadata count"),
        case("file cut at a bool value", base, CutAt("kv[5].value", 0), Truncated, "metadata \"test.flag\""),
        case(
            "file cut in a dimension",
            base,
            CutAt("tensor[2].dim[0]", 5),
            Truncated,
            "dimension 0 of tensor",
        ),
        case(
            "file cut in a tensor type",
            base,
            CutAt("tensor[2].type", 2),
            Truncated,
            "type of tensor \"c.weight\"",
        ),
    ]
}

#[test]
fn the_base_file_is_valid() {
    let (bytes, layout) = base().to_bytes_with_layout();
    let gguf = Gguf::parse(&bytes).unwrap();
    assert_eq!(gguf.header.tensors.len(), 3);
    assert_eq!(gguf.metadata().len(), 7);
    let last = gguf.tensor("c.weight").unwrap();
    assert_eq!(
        gguf.header.data_offset + last.offset + last.n_bytes,
        bytes.len() as u64,
        "no trailing padding"
    );
    // "u64 array of 200": 200 bytes remain after its length field, 200 u64s do not.
    let after_length = layout.at("kv[3].value") + ARRAY_ELEMENTS;
    assert!((200..1600).contains(&(bytes.len() - after_length)));
}

#[test]
fn every_malformed_case_is_rejected_with_its_kind() {
    let cases = cases();
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for c in &cases {
        let file = (c.file)();
        let bytes = corrupt(&file, c.edit);
        if !matches!(c.edit, Edit::None) {
            assert_ne!(bytes, file.to_bytes(), "{}: the edit changed nothing", c.name);
        }
        match Gguf::parse(&bytes) {
            Ok(_) => failures.push(format!("{}: parsed, expected {:?}", c.name, c.kind)),
            Err(e) if e.kind() != c.kind => {
                failures.push(format!("{}: {:?} ({e}), expected {:?}", c.name, e.kind(), c.kind))
            }
            Err(e) if !e.to_string().contains(c.says) => {
                failures.push(format!("{}: message {:?} lacks {:?}", c.name, e.to_string(), c.says))
            }
            Err(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn the_prefix_parser_reports_the_same_errors() {
    // Given the true file size, a header error is found from the bytes before it alone.
    for c in cases() {
        let bytes = corrupt(&(c.file)(), c.edit);
        let whole = Gguf::parse(&bytes).unwrap_err();
        let result = gguf::parse_header(&bytes, bytes.len() as u64);
        assert_eq!(result, Err(whole), "{}", c.name);
    }
}

// ---------------------------------------------------------------------------------------------
// Truncation at every byte.

/// The kinds a file that ends early may be reported as: a fixed-size field cut short
/// (`Truncated`), a count or length checked against the bytes that remain (`CountTooLarge`,
/// `LengthPastEnd`), or tensor data that does not fit (`TensorPastEnd`).
const TRUNCATION_KINDS: [GgufErrorKind; 4] = [
    GgufErrorKind::Truncated,
    GgufErrorKind::CountTooLarge,
    GgufErrorKind::LengthPastEnd,
    GgufErrorKind::TensorPastEnd,
];

#[test]
fn every_truncation_is_an_error_never_a_panic() {
    let (bytes, layout) = base().to_bytes_with_layout();
    let counts_end = layout.at("kv_count") + 8;
    let data = layout.at("data");
    let mut seen = std::collections::BTreeMap::new();
    for len in 0..bytes.len() {
        let err = match Gguf::parse(&bytes[..len]) {
            Ok(_) => panic!("a prefix of {len} of {} bytes parsed", bytes.len()),
            Err(e) => e,
        };
        assert!(TRUNCATION_KINDS.contains(&err.kind()), "prefix {len}: {err}");
        if len < counts_end {
            assert_eq!(err.kind(), GgufErrorKind::Truncated, "prefix {len}: {err}");
        }
        if len >= data {
            assert_eq!(err.kind(), GgufErrorKind::TensorPastEnd, "prefix {len}: {err}");
        }
        *seen.entry(err.kind().name()).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), TRUNCATION_KINDS.len(), "every kind occurs: {seen:?}");
}

#[test]
fn the_prefix_api_asks_for_more_until_the_header_is_complete() {
    let (bytes, layout) = base().to_bytes_with_layout();
    let full_len = bytes.len() as u64;
    let header_end = layout.at("tensor[2].offset") + 8;
    let whole = Gguf::parse(&bytes).unwrap().header;
    for len in 0..=bytes.len() {
        match gguf::parse_header(&bytes[..len], full_len) {
            Ok(HeaderParse::NeedMore { at_least }) => {
                assert!(len < header_end, "prefix {len}: NeedMore although the header is complete");
                assert!(at_least > len as u64 && at_least <= header_end as u64, "prefix {len}: {at_least}");
            }
            Ok(HeaderParse::Complete(header)) => {
                assert!(len >= header_end, "prefix {len}: complete before the header ends");
                assert_eq!(header, whole, "prefix {len}");
            }
            Err(e) => panic!("prefix {len}: {e}"),
        }
    }
    // Reading what it asks for, like the CLI and the page do, gets there in a few steps.
    let mut len = 0;
    let mut steps = 0;
    while let HeaderParse::NeedMore { at_least } = gguf::parse_header(&bytes[..len], full_len).unwrap() {
        len = at_least as usize;
        steps += 1;
        assert!(steps <= 100, "too many steps");
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile sizes that only a declared (not real) file size lets through.

/// Two TQ1_0 tensors of 2^63 elements each: every size fits in 64 bits and a declared file size
/// of u64::MAX (parse_header lets a caller declare any size) holds both, but 2^63 + 2^63
/// elements do not fit in a u64.
fn two_huge_tensors() -> GgufHeader {
    let n = 1u64 << 63;
    let bytes_each = GgmlType::TQ1_0.bytes_for(n).unwrap();
    let file = GgufWriter::new().tensor("x", &[n], GgmlType::TQ1_0, vec![]).tensor(
        "y",
        &[n],
        GgmlType::TQ1_0,
        vec![],
    );
    let (mut bytes, layout) = file.to_bytes_with_layout();
    put(&mut bytes, layout.at("tensor[1].offset"), &bytes_each.to_le_bytes());
    match gguf::parse_header(&bytes, u64::MAX).unwrap() {
        HeaderParse::Complete(header) => header,
        other => panic!("{other:?}"),
    }
}

#[test]
fn parameter_count_saturates_instead_of_overflowing() {
    let header = two_huge_tensors();
    let count = catch_unwind(|| header.parameter_count());
    assert_eq!(count.ok(), Some(u64::MAX), "GgufHeader::parameter_count overflowed");
}

#[test]
fn report_totals_do_not_overflow() {
    // With overflow checks (debug) an unchecked `+=` panics; without them (release) it wraps to 0.
    let header = two_huge_tensors();
    let report = catch_unwind(|| Report::new(&header))
        .expect("Report::new overflowed adding up 2 x 2^63 elements (src/inspect.rs, type_totals)");
    assert_eq!(report.summary.parameter_count, u64::MAX);
    assert_eq!(report.types[0].elements, u64::MAX, "type_totals wrapped around");
    serde_json::to_string(&report).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Random mutations.

/// xorshift64*: deterministic, tiny, good enough to pick bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// A richer file than `base`: every scalar type, nested arrays, several tensor types.
fn mutation_source() -> GgufWriter {
    base()
        .kv("general.name", Value::String("mutant".into()))
        .kv("test.i8", Value::I8(-1))
        .kv("test.u16", Value::U16(7))
        .kv("test.i16", Value::I16(-7))
        .kv("test.i32", Value::I32(-70))
        .kv("test.f32", Value::F32(0.5))
        .kv("test.u64", Value::U64(1 << 60))
        .kv("test.i64", Value::I64(-1))
        .kv("test.f64", Value::F64(1e300))
        .kv("test.nested", Value::Array(nested(MAX_ARRAY_NESTING)))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(vec!["<s>".into(), "hi".into()])))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(1))
        .tensor("blk.0.q.weight", &[32, 2], GgmlType::Q8_0, vec![7; 68])
        .tensor("blk.0.k.weight", &[32], GgmlType::Q4_0, vec![9; 18])
}

/// Values that sit on the parser's boundaries.
fn interesting(rng: &mut Rng, file_len: u64) -> u64 {
    let table = [
        0,
        1,
        2,
        3,
        4,
        5,
        8,
        9,
        12,
        13,
        31,
        32,
        33,
        63,
        64,
        100,
        255,
        256,
        1 << 20,
        u64::from(u32::MAX),
        1 << 32,
        1 << 61,
        1 << 63,
        u64::MAX - 31,
        u64::MAX,
        file_len,
        file_len - 1,
        file_len / 8 + 1,
    ];
    if rng.below(4) == 0 { rng.next() >> rng.below(64) } else { rng.pick(&table) }
}

/// One random change: a byte, a 4- or 8-byte field of the layout, a cut, or a removed byte.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>, fields: &[usize]) {
    let len = bytes.len() as u64;
    match rng.below(6) {
        0 => {
            let at = rng.below(bytes.len());
            bytes[at] = rng.next() as u8;
        }
        1 | 2 => {
            let at = rng.pick(fields).min(bytes.len() - 1);
            let value = interesting(rng, len);
            let width = if rng.below(2) == 0 { 4 } else { 8 };
            let end = (at + width).min(bytes.len());
            bytes[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
        }
        3 => {
            let at = rng.below(bytes.len());
            bytes[at] ^= 1 << rng.below(8);
        }
        4 => bytes.truncate(rng.below(bytes.len())),
        _ => {
            bytes.remove(rng.below(bytes.len()));
        }
    }
}

/// What must hold for any file the parser accepts.
fn check_accepted(gguf: &Gguf, bytes: &[u8]) {
    let header: &GgufHeader = &gguf.header;
    assert!(header.alignment.is_power_of_two());
    for t in &header.tensors {
        let end = header.data_offset + t.offset + t.n_bytes;
        assert!(end <= bytes.len() as u64, "tensor {:?} ends at {end} of {}", t.name, bytes.len());
        assert_eq!(gguf.tensor_data(t).len() as u64, t.n_bytes);
    }
    serde_json::to_string(&Report::new(header)).unwrap();
}

/// A header's whole content as text: mutated floats may be NaN, which is not `==` itself.
fn fingerprint(h: &GgufHeader) -> String {
    let metadata: Vec<_> = h.metadata.iter().collect();
    format!("{} {} {} {} {metadata:?} {:?}", h.version, h.alignment, h.data_offset, h.file_size, h.tensors)
}

#[test]
fn random_mutations_never_panic_and_accepted_files_are_sound() {
    const ROUNDS: usize = 20_000;
    let (original, layout) = mutation_source().to_bytes_with_layout();
    let fields: Vec<usize> = layout.0.values().copied().filter(|&at| at < original.len()).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    let mut kinds = std::collections::BTreeSet::new();
    for round in 0..ROUNDS {
        let mut bytes = original.clone();
        for _ in 0..=rng.below(3) {
            if !bytes.is_empty() {
                mutate(&mut rng, &mut bytes, &fields);
            }
        }
        let split = rng.below(bytes.len() + 1);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let whole = Gguf::parse(&bytes);
            match &whole {
                Ok(gguf) => check_accepted(gguf, &bytes),
                Err(e) => assert!(!e.to_string().is_empty()),
            }
            // The prefix parser agrees with the whole-file parser.
            match (gguf::parse_header(&bytes[..split], bytes.len() as u64), &whole) {
                (Ok(HeaderParse::Complete(h)), Ok(g)) => assert_eq!(fingerprint(&h), fingerprint(&g.header)),
                (Ok(HeaderParse::NeedMore { at_least }), _) => assert!(at_least > split as u64),
                (Err(e), Err(w)) => assert_eq!(&e, w),
                (prefix, whole) => panic!("prefix {prefix:?} vs whole {:?}", whole.as_ref().err()),
            }
            whole.map(drop).map_err(|e| e.kind())
        }));
        match outcome {
            Ok(Ok(())) => accepted += 1,
            Ok(Err(kind)) => {
                kinds.insert(kind.name());
            }
            Err(_) => panic!("round {round}: panicked on {} bytes: {bytes:02x?}", bytes.len()),
        }
    }
    println!("{ROUNDS} mutants: {accepted} parsed; errors of kinds {kinds:?}");
    // The mutations reach deep into the format, not just the magic.
    assert!(accepted > 100, "only {accepted} mutants parsed");
    assert!(kinds.len() >= 15, "only these error kinds were reached: {kinds:?}");
}
