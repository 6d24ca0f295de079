//! GGUF: a hardened reader of untrusted model files.
//!
//! The file is `magic, version, tensor count, metadata count, metadata, tensor infos,
//! padding, tensor data` (see ggml's `docs/gguf.md`). Everything read from the file is checked
//! before use: counts against the bytes that remain, lengths against the end of the file, type
//! ids against the known tables, sizes with checked 64-bit arithmetic. No count from the file
//! ever sizes an allocation on its own.
//!
//! [`parse_header`] works on a prefix of the file and says how many more bytes it needs, so
//! the page can inspect a multi-gigabyte `File` by reading only its header.

mod error;
mod ggml_type;
pub mod split;
mod value;
pub mod writer;

use std::collections::HashSet;

pub use error::{GgufError, GgufErrorKind};
pub use ggml_type::{GgmlType, TypeIdError};
pub use value::{Array, Metadata, Value, ValueType};

pub const MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of the tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Largest `general.alignment` accepted (real files use 32; anything near this is hostile).
pub const MAX_ALIGNMENT: u64 = 1 << 20;
/// Arrays of arrays are allowed this deep (llama.cpp itself reads no nested arrays).
pub const MAX_ARRAY_NESTING: usize = 3;
/// ggml's `GGML_MAX_NAME` is 64 including the terminating NUL.
pub const MAX_TENSOR_NAME_LEN: usize = 63;
pub const MAX_DIMS: u32 = 4;
/// The most tensors a file may hold: real models have hundreds to a few thousand (a model
/// with every MoE expert stored apart, tens of thousands); a million tiny ones made a 231 MB
/// inspection report from a 72 MB file.
pub const MAX_TENSORS: u64 = 1 << 16;

/// Smallest possible metadata entry: key length (8) + 1-byte key + type (4) + 1-byte value.
const MIN_KV_LEN: u64 = 8 + 1 + 4 + 1;
/// Smallest possible tensor info: name length + 1-byte name + n_dims + one dim + type + offset.
const MIN_TENSOR_INFO_LEN: u64 = 8 + 1 + 4 + 8 + 4 + 8;

/// One entry of the tensor index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the row length (the fastest-moving index).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the tensor data section.
    pub offset: u64,
    pub n_elements: u64,
    pub n_bytes: u64,
    /// Where this tensor's info starts in the file.
    pub info_offset: u64,
}

/// Everything before the tensor data.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute file offset of the tensor data section.
    pub data_offset: u64,
    pub file_size: u64,
    /// How many gguf-split shards this header describes: 1 for a file, `split.count` for the
    /// header [`split::merge`] makes of a whole split model (then `data_offset` is 0 and every
    /// tensor's offset counts from the start of the shards' bytes laid end to end).
    pub shards: usize,
}

impl GgufHeader {
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Where a tensor's bytes lie in the file (the parser has checked that they do); `None`
    /// where the offsets do not fit a `usize` (a 32-bit build and a file over 4 GiB).
    pub fn tensor_range(&self, tensor: &TensorInfo) -> Option<std::ops::Range<usize>> {
        let start = self.data_offset.saturating_add(tensor.offset);
        let end = start.saturating_add(tensor.n_bytes);
        Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }

    /// Sum of all tensors' data sizes.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.n_bytes).sum()
    }

    pub fn parameter_count(&self) -> u64 {
        self.tensors.iter().fold(0, |sum, t| sum.saturating_add(t.n_elements))
    }
}

/// Result of parsing a prefix of a file.
#[derive(Clone, Debug, PartialEq)]
pub enum HeaderParse {
    Complete(GgufHeader),
    /// The prefix ends inside the header: read at least this many bytes from the start.
    NeedMore {
        at_least: u64,
    },
}

/// Parses the header from the first `prefix.len()` bytes of a file of `file_size` bytes.
///
/// Bounds (tensor data ranges, lengths, counts) are checked against `file_size`, so a header
/// that claims more than the file holds is an error even when only a prefix is at hand.
pub fn parse_header(prefix: &[u8], file_size: u64) -> Result<HeaderParse, GgufError> {
    let file_size = file_size.max(prefix.len() as u64);
    let mut cursor = Cursor { bytes: prefix, pos: 0, file_size };
    match read_header(&mut cursor) {
        Ok(header) => Ok(HeaderParse::Complete(header)),
        Err(Stop::NeedMore(at_least)) => Ok(HeaderParse::NeedMore { at_least }),
        Err(Stop::Error(e)) => Err(e),
    }
}

/// A whole GGUF file in memory: the header plus zero-copy access to tensor data.
#[derive(Debug)]
pub struct Gguf<'a> {
    pub header: GgufHeader,
    bytes: &'a [u8],
}

impl<'a> Gguf<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Gguf<'a>, GgufError> {
        match parse_header(bytes, bytes.len() as u64)? {
            HeaderParse::Complete(header) => Ok(Gguf { header, bytes }),
            // Cannot happen when the prefix is the whole file; reported as truncation anyway.
            HeaderParse::NeedMore { at_least } => Err(GgufError::Truncated {
                field: "header".into(),
                offset: 0,
                needed: at_least,
                file_size: bytes.len() as u64,
            }),
        }
    }

    pub fn metadata(&self) -> &Metadata {
        &self.header.metadata
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensor(name)
    }

    /// The bytes of a tensor of this file (bounds were validated by the parser).
    pub fn tensor_data(&self, tensor: &TensorInfo) -> &'a [u8] {
        self.header.tensor_range(tensor).and_then(|range| self.bytes.get(range)).unwrap_or(&[])
    }
}

/// Why reading stopped.
enum Stop {
    /// The bytes at hand end before the header does; the file has at least this many.
    NeedMore(u64),
    Error(GgufError),
}

impl From<GgufError> for Stop {
    fn from(e: GgufError) -> Stop {
        Stop::Error(e)
    }
}

type Read<T> = Result<T, Stop>;

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: u64,
    file_size: u64,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        self.file_size - self.pos
    }

    /// The next `n` bytes; `field` names them in the error if the file is too short.
    fn take(&mut self, n: u64, field: &dyn Fn() -> String) -> Read<&'a [u8]> {
        let start = self.pos;
        let end = match start.checked_add(n) {
            Some(end) if end <= self.file_size => end,
            _ => {
                return Err(Stop::Error(GgufError::Truncated {
                    field: field(),
                    offset: start,
                    needed: n,
                    file_size: self.file_size,
                }));
            }
        };
        if end > self.bytes.len() as u64 {
            return Err(Stop::NeedMore(end));
        }
        self.pos = end;
        // Both bounds are ≤ bytes.len(), so they fit in usize.
        Ok(&self.bytes[start as usize..end as usize])
    }

    fn array<const N: usize>(&mut self, field: &dyn Fn() -> String) -> Read<[u8; N]> {
        let bytes = self.take(N as u64, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u32(&mut self, field: &dyn Fn() -> String) -> Read<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &dyn Fn() -> String) -> Read<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A length-prefixed UTF-8 string.
    fn string(&mut self, field: &dyn Fn() -> String) -> Read<String> {
        let len_offset = self.pos;
        let len = self.u64(&|| format!("length of {}", field()))?;
        if len > self.remaining() {
            return Err(Stop::Error(GgufError::LengthPastEnd {
                field: field(),
                offset: len_offset,
                length: len,
                remaining: self.remaining(),
            }));
        }
        let bytes = self.take(len, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(Stop::Error(GgufError::InvalidUtf8 { field: field(), offset: len_offset })),
        }
    }

    /// Fails with `CountTooLarge` unless `count` items of at least `min_len` bytes fit in the rest.
    fn check_count(&self, count: u64, min_len: u64, field: &dyn Fn() -> String, at: u64) -> Read<()> {
        match count.checked_mul(min_len) {
            Some(total) if total <= self.remaining() => Ok(()),
            _ => Err(Stop::Error(GgufError::CountTooLarge {
                field: field(),
                offset: at,
                count,
                remaining: self.remaining(),
            })),
        }
    }
}

fn read_header(c: &mut Cursor) -> Read<GgufHeader> {
    let magic: [u8; 4] = c.array(&|| "magic".into())?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic { found: magic }.into());
    }
    let version = c.u32(&|| "version".into())?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { version }.into());
    }

    let tensor_count_at = c.pos;
    let tensor_count = c.u64(&|| "tensor count".into())?;
    if tensor_count > MAX_TENSORS {
        return Err(GgufError::TooManyTensors { offset: tensor_count_at, count: tensor_count }.into());
    }
    let kv_count_at = c.pos;
    let kv_count = c.u64(&|| "metadata count".into())?;
    c.check_count(kv_count, MIN_KV_LEN, &|| "metadata count".into(), kv_count_at)?;
    c.check_count(tensor_count, MIN_TENSOR_INFO_LEN, &|| "tensor count".into(), tensor_count_at)?;

    let mut metadata = Metadata::default();
    let mut alignment_at = None;
    for index in 0..kv_count {
        let key_at = c.pos;
        let key = read_name(c, &|| format!("metadata key #{index}"), usize::MAX)?;
        let type_at = c.pos;
        let type_id = c.u32(&|| format!("type of metadata {key:?}"))?;
        let field = || format!("metadata {key:?}");
        let value_type = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            field: field(),
            offset: type_at,
            type_id,
        })?;
        let value_at = c.pos;
        let value = read_value(c, value_type, &key, 0)?;
        if key == "general.alignment" {
            alignment_at = Some(value_at);
        }
        if metadata.insert(key.clone(), value).is_err() {
            return Err(GgufError::DuplicateKey { key, offset: key_at }.into());
        }
    }

    let alignment = match (metadata.get("general.alignment"), alignment_at) {
        (Some(Value::U32(a)), Some(offset)) => {
            let a = u64::from(*a);
            if a == 0 || !a.is_power_of_two() || a > MAX_ALIGNMENT {
                return Err(GgufError::InvalidAlignment { offset, value: a }.into());
            }
            a
        }
        (Some(other), Some(offset)) => {
            return Err(GgufError::AlignmentWrongType { offset, found: other.value_type() }.into());
        }
        _ => DEFAULT_ALIGNMENT,
    };

    let mut tensors = Vec::new();
    let mut names = HashSet::new();
    for index in 0..tensor_count {
        let tensor = read_tensor_info(c, index)?;
        if !names.insert(tensor.name.clone()) {
            return Err(
                GgufError::DuplicateTensorName { name: tensor.name, offset: tensor.info_offset }.into()
            );
        }
        tensors.push(tensor);
    }

    // The data section starts at the next multiple of the alignment.
    let data_offset = c
        .pos
        .checked_next_multiple_of(alignment)
        .ok_or(GgufError::SizeOverflow { tensor: "(data section)".into(), offset: c.pos })?;
    check_tensor_layout(&tensors, alignment, data_offset, c.file_size)?;

    Ok(GgufHeader { version, metadata, tensors, alignment, data_offset, file_size: c.file_size, shards: 1 })
}

/// A key or tensor name: non-empty UTF-8 of at most `max_len` bytes.
fn read_name(c: &mut Cursor, field: &dyn Fn() -> String, max_len: usize) -> Read<String> {
    let at = c.pos;
    let name = c.string(field)?;
    let reason = if name.is_empty() {
        "is empty"
    } else if name.len() > max_len {
        "is longer than 63 bytes (ggml's limit)"
    } else {
        return Ok(name);
    };
    Err(GgufError::InvalidName { field: field(), offset: at, reason }.into())
}

fn read_value(c: &mut Cursor, value_type: ValueType, key: &str, depth: usize) -> Read<Value> {
    let field = || format!("metadata {key:?}");
    Ok(match value_type {
        ValueType::U8 => Value::U8(u8::from_le_bytes(c.array(&field)?)),
        ValueType::I8 => Value::I8(i8::from_le_bytes(c.array(&field)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(c.array(&field)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(c.array(&field)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(c.array(&field)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(c.array(&field)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(c.array(&field)?)),
        ValueType::U64 => Value::U64(u64::from_le_bytes(c.array(&field)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(c.array(&field)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(c.array(&field)?)),
        ValueType::Bool => {
            let at = c.pos;
            let [byte] = c.array(&field)?;
            Value::Bool(decode_bool(byte).ok_or_else(|| GgufError::InvalidBool {
                field: field(),
                offset: at,
                byte,
            })?)
        }
        ValueType::String => Value::String(c.string(&field)?),
        ValueType::Array => Value::Array(read_array(c, key, depth + 1)?),
    })
}

fn decode_bool(byte: u8) -> Option<bool> {
    match byte {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// Decodes `len` fixed-size little-endian elements in one bounds check.
fn fixed<const N: usize, T>(
    c: &mut Cursor,
    len: u64,
    field: &dyn Fn() -> String,
    decode: fn([u8; N]) -> T,
) -> Read<Vec<T>> {
    let bytes = c.take(len * N as u64, field)?;
    Ok(bytes
        .chunks_exact(N)
        .map(|chunk| {
            let mut raw = [0u8; N];
            raw.copy_from_slice(chunk);
            decode(raw)
        })
        .collect())
}

fn read_array(c: &mut Cursor, key: &str, depth: usize) -> Read<Array> {
    let field = || format!("metadata {key:?}");
    let header_at = c.pos;
    if depth > MAX_ARRAY_NESTING {
        return Err(GgufError::NestingTooDeep { key: key.into(), offset: header_at }.into());
    }
    let type_id = c.u32(&|| format!("element type of {}", field()))?;
    let element_type = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        field: format!("element type of {}", field()),
        offset: header_at,
        type_id,
    })?;
    let len_at = c.pos;
    let len = c.u64(&|| format!("length of {}", field()))?;
    c.check_count(len, element_type.min_encoded_len(), &|| format!("length of {}", field()), len_at)?;
    // `len * element size` cannot overflow now: it is at most the remaining file size.
    Ok(match element_type {
        ValueType::U8 => Array::U8(fixed(c, len, &field, u8::from_le_bytes)?),
        ValueType::I8 => Array::I8(fixed(c, len, &field, i8::from_le_bytes)?),
        ValueType::U16 => Array::U16(fixed(c, len, &field, u16::from_le_bytes)?),
        ValueType::I16 => Array::I16(fixed(c, len, &field, i16::from_le_bytes)?),
        ValueType::U32 => Array::U32(fixed(c, len, &field, u32::from_le_bytes)?),
        ValueType::I32 => Array::I32(fixed(c, len, &field, i32::from_le_bytes)?),
        ValueType::F32 => Array::F32(fixed(c, len, &field, f32::from_le_bytes)?),
        ValueType::U64 => Array::U64(fixed(c, len, &field, u64::from_le_bytes)?),
        ValueType::I64 => Array::I64(fixed(c, len, &field, i64::from_le_bytes)?),
        ValueType::F64 => Array::F64(fixed(c, len, &field, f64::from_le_bytes)?),
        ValueType::Bool => {
            let at = c.pos;
            let bytes = c.take(len, &field)?;
            let mut out = Vec::with_capacity(bytes.len());
            for (i, &byte) in bytes.iter().enumerate() {
                out.push(decode_bool(byte).ok_or_else(|| GgufError::InvalidBool {
                    field: format!("{}[{i}]", field()),
                    offset: at + i as u64,
                    byte,
                })?);
            }
            Array::Bool(out)
        }
        ValueType::String => {
            let mut out = Vec::new();
            for i in 0..len {
                out.push(c.string(&|| format!("{}[{i}]", field()))?);
            }
            Array::String(out)
        }
        ValueType::Array => {
            let mut out = Vec::new();
            for _ in 0..len {
                out.push(read_array(c, key, depth + 1)?);
            }
            Array::Array(out)
        }
    })
}

fn read_tensor_info(c: &mut Cursor, index: u64) -> Read<TensorInfo> {
    let info_offset = c.pos;
    let name = read_name(c, &|| format!("tensor #{index} name"), MAX_TENSOR_NAME_LEN)?;
    let field = || format!("tensor {name:?}");

    let dims_at = c.pos;
    let n_dims = c.u32(&|| format!("dimension count of {}", field()))?;
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(GgufError::InvalidDimensionCount { tensor: name, offset: dims_at, n_dims }.into());
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    let mut n_elements: u64 = 1;
    for axis in 0..n_dims as usize {
        let at = c.pos;
        let dim = c.u64(&|| format!("dimension {axis} of {}", field()))?;
        if dim == 0 {
            return Err(GgufError::ZeroDimension { tensor: name, offset: at, axis }.into());
        }
        n_elements = n_elements
            .checked_mul(dim)
            .ok_or_else(|| GgufError::SizeOverflow { tensor: name.clone(), offset: dims_at })?;
        dims.push(dim);
    }

    let type_at = c.pos;
    let type_id = c.u32(&|| format!("type of {}", field()))?;
    let ggml_type = GgmlType::from_id(type_id).map_err(|e| match e {
        TypeIdError::Removed(type_name) => {
            GgufError::RemovedTensorType { tensor: name.clone(), offset: type_at, type_id, name: type_name }
        }
        TypeIdError::Unknown => {
            GgufError::UnknownTensorType { tensor: name.clone(), offset: type_at, type_id }
        }
    })?;
    if dims[0] % ggml_type.block_size() != 0 {
        return Err(GgufError::RowNotBlockAligned {
            tensor: name,
            offset: dims_at + 4,
            row_len: dims[0],
            block_size: ggml_type.block_size(),
            type_name: ggml_type.name(),
        }
        .into());
    }
    let n_bytes = ggml_type
        .bytes_for(n_elements)
        .ok_or_else(|| GgufError::SizeOverflow { tensor: name.clone(), offset: dims_at })?;
    let offset = c.u64(&|| format!("data offset of {}", field()))?;

    Ok(TensorInfo { name, dims, ggml_type, offset, n_elements, n_bytes, info_offset })
}

/// Every tensor's data must be aligned, inside the file and disjoint from the others.
fn check_tensor_layout(
    tensors: &[TensorInfo],
    alignment: u64,
    data_offset: u64,
    file_size: u64,
) -> Result<(), GgufError> {
    for t in tensors {
        if t.offset % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                tensor: t.name.clone(),
                data_offset: t.offset,
                alignment,
            });
        }
        let end = data_offset.checked_add(t.offset).and_then(|start| start.checked_add(t.n_bytes));
        match end {
            Some(end) if end <= file_size => {}
            _ => {
                return Err(GgufError::TensorPastEnd {
                    tensor: t.name.clone(),
                    end: end.unwrap_or(u64::MAX),
                    file_size,
                });
            }
        }
    }
    let mut by_offset: Vec<&TensorInfo> = tensors.iter().collect();
    by_offset.sort_by_key(|t| t.offset);
    for pair in by_offset.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // Both ends were checked against the file size above, so this cannot overflow.
        if a.offset + a.n_bytes > b.offset {
            return Err(GgufError::OverlappingTensors {
                first: a.name.clone(),
                second: b.name.clone(),
                at: b.offset,
            });
        }
    }
    Ok(())
}
