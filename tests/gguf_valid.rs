//! Files the parser must accept: version 2, every value type, alignments, metadata-only files,
//! edge-of-limit names and nesting, and exact tensor data.

use inferno::gguf::writer::GgufWriter;
use inferno::gguf::{
    self, Array, DEFAULT_ALIGNMENT, GgmlType, Gguf, GgufHeader, HeaderParse, MAX_ALIGNMENT,
    MAX_ARRAY_NESTING, MAX_TENSOR_NAME_LEN, Value, ValueType,
};

fn parse(bytes: &[u8]) -> Gguf<'_> {
    Gguf::parse(bytes).unwrap_or_else(|e| panic!("rejected a valid file: {e}"))
}

/// The metadata exactly as the writer was given it.
fn assert_round_trip(writer: &GgufWriter, header: &GgufHeader) {
    let read: Vec<(&str, &Value)> = header.metadata.iter().collect();
    let written: Vec<(&str, &Value)> = writer.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    assert_eq!(read, written);
}

/// Checks that every tensor's data starts on the alignment and is exactly what was written.
fn assert_tensors_as_written(writer: &GgufWriter, gguf: &Gguf, alignment: u64) {
    let header = &gguf.header;
    assert_eq!(header.alignment, alignment);
    assert_eq!(header.data_offset % alignment, 0);
    assert_eq!(header.tensors.len(), writer.tensors.len());
    for spec in &writer.tensors {
        let t = gguf.tensor(&spec.name).unwrap_or_else(|| panic!("no tensor {:?}", spec.name));
        assert_eq!((&t.dims, t.ggml_type), (&spec.dims, spec.ggml_type), "{}", spec.name);
        assert_eq!(t.offset % alignment, 0, "{} at {}", spec.name, t.offset);
        assert_eq!(t.n_bytes, spec.data.len() as u64, "{}", spec.name);
        assert_eq!(gguf.tensor_data(t), &spec.data[..], "{}", spec.name);
    }
}

/// Distinct bytes per tensor, so a wrong offset shows.
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn with_tensors(writer: GgufWriter) -> GgufWriter {
    writer
        .tensor_f32("token_embd.weight", &[4, 3], &[1.5; 12])
        .tensor("blk.0.attn_q.weight", &[256, 2], GgmlType::Q4_K, pattern(1, 2 * 144))
        .tensor("blk.0.attn_k.weight", &[32, 3], GgmlType::Q8_0, pattern(2, 3 * 34))
        .tensor("output_norm.weight", &[5], GgmlType::F16, pattern(3, 10))
        .tensor("blk.0.ffn.weight", &[64, 1, 1, 2], GgmlType::Q4_0, pattern(4, 4 * 18))
}

/// One array of every element type; `empty` gives each of them length 0.
fn arrays(empty: bool) -> Vec<(String, Value)> {
    let n = if empty { 0 } else { 3 };
    let all = vec![
        Array::U8(vec![0, 1, 255][..n].to_vec()),
        Array::I8(vec![-128, 0, 127][..n].to_vec()),
        Array::U16(vec![0, 1, u16::MAX][..n].to_vec()),
        Array::I16(vec![i16::MIN, 0, i16::MAX][..n].to_vec()),
        Array::U32(vec![0, 1, u32::MAX][..n].to_vec()),
        Array::I32(vec![i32::MIN, 0, i32::MAX][..n].to_vec()),
        Array::F32(vec![-1.5, 0.0, f32::MAX][..n].to_vec()),
        Array::Bool(vec![true, false, true][..n].to_vec()),
        Array::String(vec!["".into(), "héllo".into(), "日本".into()][..n].to_vec()),
        Array::Array(vec![Array::U8(vec![1]), Array::String(vec![]), Array::Array(vec![])][..n].to_vec()),
        Array::U64(vec![0, 1, u64::MAX][..n].to_vec()),
        Array::I64(vec![i64::MIN, 0, i64::MAX][..n].to_vec()),
        Array::F64(vec![-0.25, 1e300, f64::MIN_POSITIVE][..n].to_vec()),
    ];
    let prefix = if empty { "empty" } else { "array" };
    all.into_iter().map(|a| (format!("{prefix}.{}", a.element_type()), Value::Array(a))).collect()
}

#[test]
fn all_thirteen_value_types_round_trip() {
    let scalars = [
        Value::U8(255),
        Value::I8(-128),
        Value::U16(65_535),
        Value::I16(-32_768),
        Value::U32(u32::MAX),
        Value::I32(i32::MIN),
        Value::F32(3.25),
        Value::Bool(false),
        Value::String("a string with ünïcode and \"quotes\"".into()),
        Value::Array(Array::U8(vec![])),
        Value::U64(u64::MAX),
        Value::I64(i64::MIN),
        Value::F64(-1.0e-300),
    ];
    let mut writer = GgufWriter::new();
    for (id, value) in scalars.iter().enumerate() {
        assert_eq!(value.value_type(), ValueType::from_id(id as u32).unwrap(), "type ids in order");
        writer = writer.kv(&format!("scalar.{}", value.value_type()), value.clone());
    }
    writer = writer.kv("scalar.empty_string", Value::String(String::new()));
    writer.metadata.extend(arrays(false));
    writer.metadata.extend(arrays(true));
    let bytes = writer.to_bytes();
    let gguf = parse(&bytes);
    assert_round_trip(&writer, &gguf.header);
    assert_eq!(gguf.metadata().get_str("scalar.empty_string"), Some(""));
    assert_eq!(gguf.metadata().get_u64("scalar.u64"), Some(u64::MAX));
}

#[test]
fn arrays_nested_up_to_the_cap_are_read() {
    let mut deepest = Array::String(vec!["leaf".into()]);
    for _ in 1..MAX_ARRAY_NESTING {
        deepest = Array::Array(vec![deepest.clone(), Array::Array(vec![])]);
    }
    let writer = GgufWriter::new()
        .kv("nested.deepest", Value::Array(deepest))
        .kv("nested.two", Value::Array(Array::Array(vec![Array::I32(vec![1, 2]), Array::I32(vec![])])))
        .kv("nested.empty", Value::Array(Array::Array(vec![])));
    let bytes = writer.to_bytes();
    assert_round_trip(&writer, &parse(&bytes).header);
}

#[test]
fn version_2_files_are_read() {
    let mut writer =
        with_tensors(GgufWriter::new().kv("general.architecture", Value::String("llama".into())));
    writer.version = 2;
    let bytes = writer.to_bytes();
    let gguf = parse(&bytes);
    assert_eq!(gguf.header.version, 2);
    assert_round_trip(&writer, &gguf.header);
    assert_tensors_as_written(&writer, &gguf, DEFAULT_ALIGNMENT);
}

#[test]
fn default_alignment_is_32() {
    let writer = with_tensors(GgufWriter::new().kv("general.architecture", Value::String("llama".into())));
    let bytes = writer.to_bytes();
    let gguf = parse(&bytes);
    assert_eq!(DEFAULT_ALIGNMENT, 32);
    assert_tensors_as_written(&writer, &gguf, 32);
}

#[test]
fn custom_alignments_are_honoured() {
    for alignment in [1u64, 8, 64, 4096, MAX_ALIGNMENT] {
        let mut writer =
            with_tensors(GgufWriter::new().kv("general.alignment", Value::U32(alignment as u32)));
        writer.alignment = alignment;
        let bytes = writer.to_bytes();
        let gguf = parse(&bytes);
        assert_tensors_as_written(&writer, &gguf, alignment);
        if alignment == 64 {
            // With 64, the tensors really sit where 32 would not have put them.
            let offsets: Vec<u64> = gguf.header.tensors.iter().map(|t| t.offset).collect();
            assert_eq!(offsets, [0, 64, 384, 512, 576]);
        }
    }
}

#[test]
fn metadata_only_files_are_read() {
    let writer = GgufWriter::new()
        .kv("general.architecture", Value::String("qwen3".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(vec!["a".into(), "b".into()])));
    let bytes = writer.to_bytes();
    let gguf = parse(&bytes);
    assert!(gguf.header.tensors.is_empty());
    assert_eq!(gguf.header.data_offset, bytes.len() as u64);
    assert_round_trip(&writer, &gguf.header);

    // Without the padding after the header (nothing follows it) the file is still complete.
    let unpadded = &bytes[..bytes.len() - 1];
    assert!(Gguf::parse(unpadded).unwrap().header.tensors.is_empty());
    // A file with neither metadata nor tensors is just the 24-byte preamble.
    assert!(Gguf::parse(&GgufWriter::new().to_bytes()[..24]).is_ok());
}

#[test]
fn tensor_data_is_exactly_what_was_written() {
    let writer = with_tensors(GgufWriter::new());
    let bytes = writer.to_bytes();
    let gguf = parse(&bytes);
    assert_tensors_as_written(&writer, &gguf, DEFAULT_ALIGNMENT);
    let total: u64 = writer.tensors.iter().map(|t| t.data.len() as u64).sum();
    assert_eq!(gguf.header.tensor_bytes(), total);
    assert_eq!(gguf.header.parameter_count(), 12 + 512 + 96 + 5 + 128);
}

#[test]
fn limits_are_inclusive() {
    let name = "n".repeat(MAX_TENSOR_NAME_LEN);
    let writer = GgufWriter::new()
        .kv(&"k".repeat(1000), Value::Bool(true)) // keys have no length limit
        .tensor_f32(&name, &[1, 1, 1, 2], &[1.0, 2.0]);
    let bytes = writer.to_bytes();
    let gguf = parse(&bytes);
    assert_eq!(gguf.tensor(&name).unwrap().dims, [1, 1, 1, 2]);
}

#[test]
fn the_prefix_api_reads_valid_files_from_any_split() {
    let writer = with_tensors(GgufWriter::new().kv("general.name", Value::String("split".into())));
    let bytes = writer.to_bytes();
    let whole = parse(&bytes).header;
    let mut len = 0;
    let header = loop {
        match gguf::parse_header(&bytes[..len], bytes.len() as u64).unwrap() {
            HeaderParse::Complete(header) => break header,
            HeaderParse::NeedMore { at_least } => len = at_least as usize,
        }
    };
    assert_eq!(header, whole);
    assert!(len < whole.data_offset as usize, "read only the header");
}

/// The file format's type table (`gguf::GgmlType`, every id a file may name) and the kernels'
/// (`tensor::WeightType`, the ids that run) restate ids, names and block geometry: every type
/// that runs must agree with the file format on all three, and every GGML type with the same
/// name must run.
#[test]
fn weight_types_agree_with_the_ggml_type_table() {
    use inferno::tensor::WeightType;
    for weight_type in WeightType::ALL {
        let ggml = GgmlType::from_id(weight_type.ggml_type_id()).expect("a weight type is a GGML type");
        assert_eq!(ggml.name(), weight_type.name(), "id {}", weight_type.ggml_type_id());
        assert_eq!(ggml.block_size(), weight_type.block_len() as u64, "{}", weight_type.name());
        assert_eq!(ggml.block_bytes(), weight_type.block_bytes() as u64, "{}", weight_type.name());
    }
    let running: Vec<&str> = WeightType::ALL.iter().map(|t| t.name()).collect();
    for ggml in GgmlType::all() {
        if let Some(weight_type) = WeightType::from_ggml_type_id(ggml.id()) {
            assert!(running.contains(&weight_type.name()));
        } else {
            assert!(!running.contains(&ggml.name()), "{} runs under another id", ggml.name());
        }
    }
}
