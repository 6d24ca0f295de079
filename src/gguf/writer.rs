//! A small GGUF writer: builds test files, and records where each field landed so tests can
//! corrupt exactly one field.

use std::collections::BTreeMap;

use super::{Array, DEFAULT_ALIGNMENT, GgmlType, MAGIC, Value};

/// Tensor data plus its declared geometry.
#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug)]
pub struct GgufWriter {
    pub version: u32,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorSpec>,
    /// Used for padding; write `general.alignment` yourself to declare it.
    pub alignment: u64,
}

/// Where each field of a written file starts, by label: `"version"`, `"tensor_count"`,
/// `"kv_count"`, `"kv[i].key"`, `"kv[i].type"`, `"kv[i].value"`, `"tensor[i].name"`,
/// `"tensor[i].n_dims"`, `"tensor[i].dim[j]"`, `"tensor[i].type"`, `"tensor[i].offset"`,
/// `"data"`. String fields point at their 8-byte length.
#[derive(Clone, Debug, Default)]
pub struct Layout(pub BTreeMap<String, usize>);

impl Layout {
    /// Offset of a field; panics on an unknown label (a bug in the calling test).
    pub fn at(&self, label: &str) -> usize {
        *self.0.get(label).unwrap_or_else(|| panic!("no field {label:?} in layout"))
    }
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter { version: 3, metadata: Vec::new(), tensors: Vec::new(), alignment: DEFAULT_ALIGNMENT }
    }
}

impl GgufWriter {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn kv(mut self, key: &str, value: Value) -> Self {
        self.metadata.push((key.into(), value));
        self
    }

    /// Adds a tensor whose data is `data` (its length is not checked against the geometry,
    /// so tests can write inconsistent files on purpose).
    pub fn tensor(mut self, name: &str, dims: &[u64], ggml_type: GgmlType, data: Vec<u8>) -> Self {
        self.tensors.push(TensorSpec { name: name.into(), dims: dims.to_vec(), ggml_type, data });
        self
    }

    /// Adds an F32 tensor.
    pub fn tensor_f32(self, name: &str, dims: &[u64], values: &[f32]) -> Self {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensor(name, dims, GgmlType::F32, data)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_with_layout().0
    }

    pub fn to_bytes_with_layout(&self) -> (Vec<u8>, Layout) {
        let mut out = Vec::new();
        let mut layout = Layout::default();
        let mut mark = |label: String, out: &Vec<u8>| {
            layout.0.insert(label, out.len());
        };
        out.extend_from_slice(&MAGIC);
        mark("version".into(), &out);
        out.extend_from_slice(&self.version.to_le_bytes());
        mark("tensor_count".into(), &out);
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        mark("kv_count".into(), &out);
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (i, (key, value)) in self.metadata.iter().enumerate() {
            mark(format!("kv[{i}].key"), &out);
            write_string(&mut out, key);
            mark(format!("kv[{i}].type"), &out);
            out.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
            mark(format!("kv[{i}].value"), &out);
            write_value(&mut out, value);
        }
        let align = |n: u64| n.next_multiple_of(self.alignment);
        let mut data_offset = 0u64;
        for (i, t) in self.tensors.iter().enumerate() {
            mark(format!("tensor[{i}].name"), &out);
            write_string(&mut out, &t.name);
            mark(format!("tensor[{i}].n_dims"), &out);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for (j, d) in t.dims.iter().enumerate() {
                mark(format!("tensor[{i}].dim[{j}]"), &out);
                out.extend_from_slice(&d.to_le_bytes());
            }
            mark(format!("tensor[{i}].type"), &out);
            out.extend_from_slice(&t.ggml_type.id().to_le_bytes());
            mark(format!("tensor[{i}].offset"), &out);
            out.extend_from_slice(&data_offset.to_le_bytes());
            data_offset = align(data_offset + t.data.len() as u64);
        }
        out.resize(align(out.len() as u64) as usize, 0);
        mark("data".into(), &out);
        let data_start = out.len();
        for t in &self.tensors {
            out.extend_from_slice(&t.data);
            let padded = data_start + align((out.len() - data_start) as u64) as usize;
            out.resize(padded, 0);
        }
        (out, layout)
    }
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.push(*v),
        Value::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(u8::from(*v)),
        Value::String(s) => write_string(out, s),
        Value::Array(a) => write_array(out, a),
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

fn write_array(out: &mut Vec<u8>, array: &Array) {
    out.extend_from_slice(&(array.element_type() as u32).to_le_bytes());
    out.extend_from_slice(&(array.len() as u64).to_le_bytes());
    for i in 0..array.len() {
        if let Some(item) = array.get(i) {
            write_value(out, &item);
        }
    }
}
