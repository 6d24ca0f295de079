//! Typed parse errors. Every variant names the field it is about and the byte offset in the
//! file where that field starts, so a user can find the problem with a hex editor.

use std::fmt;

use super::value::ValueType;

/// Why a GGUF file was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GgufError {
    /// Shard `no` (from 0) of a split model of `count` was not given.
    MissingShard {
        no: u64,
        count: u64,
    },
    /// Shard `no` was given twice (as files `first` and `second`, from 0).
    DuplicateShard {
        no: u64,
        first: usize,
        second: usize,
    },
    /// File `file` (from 0, in the order given) does not belong with the others.
    ShardMismatch {
        file: usize,
        reason: String,
    },
    /// The first four bytes are not `GGUF`.
    BadMagic {
        found: [u8; 4],
    },
    /// Only versions 2 and 3 (little-endian) are read.
    UnsupportedVersion {
        version: u32,
    },
    /// The file ends before `field` (starting at `offset`) is complete.
    Truncated {
        field: String,
        offset: u64,
        needed: u64,
        file_size: u64,
    },
    /// A count is larger than the rest of the file could possibly hold.
    CountTooLarge {
        field: String,
        offset: u64,
        count: u64,
        remaining: u64,
    },
    /// More tensors than [`super::MAX_TENSORS`].
    TooManyTensors {
        offset: u64,
        count: u64,
    },
    /// A string's or array's declared length runs past the end of the file.
    LengthPastEnd {
        field: String,
        offset: u64,
        length: u64,
        remaining: u64,
    },
    /// Arrays nested deeper than [`super::MAX_ARRAY_NESTING`].
    NestingTooDeep {
        key: String,
        offset: u64,
    },
    /// A value type id outside 0..=12.
    UnknownValueType {
        field: String,
        offset: u64,
        type_id: u32,
    },
    /// A bool stored as something other than 0 or 1.
    InvalidBool {
        field: String,
        offset: u64,
        byte: u8,
    },
    /// A key, tensor name or string value that is not UTF-8.
    InvalidUtf8 {
        field: String,
        offset: u64,
    },
    /// A key or tensor name that is empty or too long.
    InvalidName {
        field: String,
        offset: u64,
        reason: &'static str,
    },
    DuplicateKey {
        key: String,
        offset: u64,
    },
    DuplicateTensorName {
        name: String,
        offset: u64,
    },
    /// Tensors have 1 to 4 dimensions.
    InvalidDimensionCount {
        tensor: String,
        offset: u64,
        n_dims: u32,
    },
    /// A dimension of zero (rejected: no real model has an empty tensor, and ggml's own
    /// overflow checks divide by dimensions).
    ZeroDimension {
        tensor: String,
        offset: u64,
        axis: usize,
    },
    /// The element count or byte size does not fit in 64 bits.
    SizeOverflow {
        tensor: String,
        offset: u64,
    },
    UnknownTensorType {
        tensor: String,
        offset: u64,
        type_id: u32,
    },
    /// A type id ggml used once and removed.
    RemovedTensorType {
        tensor: String,
        offset: u64,
        type_id: u32,
        name: &'static str,
    },
    /// The first dimension (the row) is not a whole number of the type's blocks.
    RowNotBlockAligned {
        tensor: String,
        offset: u64,
        row_len: u64,
        block_size: u64,
        type_name: &'static str,
    },
    /// `general.alignment` has the wrong type.
    AlignmentWrongType {
        offset: u64,
        found: ValueType,
    },
    /// `general.alignment` is zero, not a power of two, or larger than [`super::MAX_ALIGNMENT`].
    InvalidAlignment {
        offset: u64,
        value: u64,
    },
    /// A tensor's data offset is not a multiple of the alignment.
    MisalignedTensor {
        tensor: String,
        data_offset: u64,
        alignment: u64,
    },
    /// Two tensors' data ranges overlap.
    OverlappingTensors {
        first: String,
        second: String,
        at: u64,
    },
    /// A tensor's data runs past the end of the file.
    TensorPastEnd {
        tensor: String,
        end: u64,
        file_size: u64,
    },
}

/// The variant of a [`GgufError`] without its details: stable names for tests, scripts and JS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgufErrorKind {
    MissingShard,
    DuplicateShard,
    ShardMismatch,
    BadMagic,
    UnsupportedVersion,
    Truncated,
    CountTooLarge,
    TooManyTensors,
    LengthPastEnd,
    NestingTooDeep,
    UnknownValueType,
    InvalidBool,
    InvalidUtf8,
    InvalidName,
    DuplicateKey,
    DuplicateTensorName,
    InvalidDimensionCount,
    ZeroDimension,
    SizeOverflow,
    UnknownTensorType,
    RemovedTensorType,
    RowNotBlockAligned,
    AlignmentWrongType,
    InvalidAlignment,
    MisalignedTensor,
    OverlappingTensors,
    TensorPastEnd,
}

impl GgufErrorKind {
    /// snake_case name, e.g. `"bad_magic"`.
    pub fn name(self) -> &'static str {
        use GgufErrorKind::*;
        match self {
            MissingShard => "missing_shard",
            DuplicateShard => "duplicate_shard",
            ShardMismatch => "shard_mismatch",
            BadMagic => "bad_magic",
            UnsupportedVersion => "unsupported_version",
            Truncated => "truncated",
            CountTooLarge => "count_too_large",
            TooManyTensors => "too_many_tensors",
            LengthPastEnd => "length_past_end",
            NestingTooDeep => "nesting_too_deep",
            UnknownValueType => "unknown_value_type",
            InvalidBool => "invalid_bool",
            InvalidUtf8 => "invalid_utf8",
            InvalidName => "invalid_name",
            DuplicateKey => "duplicate_key",
            DuplicateTensorName => "duplicate_tensor_name",
            InvalidDimensionCount => "invalid_dimension_count",
            ZeroDimension => "zero_dimension",
            SizeOverflow => "size_overflow",
            UnknownTensorType => "unknown_tensor_type",
            RemovedTensorType => "removed_tensor_type",
            RowNotBlockAligned => "row_not_block_aligned",
            AlignmentWrongType => "alignment_wrong_type",
            InvalidAlignment => "invalid_alignment",
            MisalignedTensor => "misaligned_tensor",
            OverlappingTensors => "overlapping_tensors",
            TensorPastEnd => "tensor_past_end",
        }
    }
}

impl GgufError {
    pub fn kind(&self) -> GgufErrorKind {
        use GgufErrorKind as K;
        match self {
            GgufError::MissingShard { .. } => K::MissingShard,
            GgufError::DuplicateShard { .. } => K::DuplicateShard,
            GgufError::ShardMismatch { .. } => K::ShardMismatch,
            GgufError::BadMagic { .. } => K::BadMagic,
            GgufError::UnsupportedVersion { .. } => K::UnsupportedVersion,
            GgufError::Truncated { .. } => K::Truncated,
            GgufError::CountTooLarge { .. } => K::CountTooLarge,
            GgufError::TooManyTensors { .. } => K::TooManyTensors,
            GgufError::LengthPastEnd { .. } => K::LengthPastEnd,
            GgufError::NestingTooDeep { .. } => K::NestingTooDeep,
            GgufError::UnknownValueType { .. } => K::UnknownValueType,
            GgufError::InvalidBool { .. } => K::InvalidBool,
            GgufError::InvalidUtf8 { .. } => K::InvalidUtf8,
            GgufError::InvalidName { .. } => K::InvalidName,
            GgufError::DuplicateKey { .. } => K::DuplicateKey,
            GgufError::DuplicateTensorName { .. } => K::DuplicateTensorName,
            GgufError::InvalidDimensionCount { .. } => K::InvalidDimensionCount,
            GgufError::ZeroDimension { .. } => K::ZeroDimension,
            GgufError::SizeOverflow { .. } => K::SizeOverflow,
            GgufError::UnknownTensorType { .. } => K::UnknownTensorType,
            GgufError::RemovedTensorType { .. } => K::RemovedTensorType,
            GgufError::RowNotBlockAligned { .. } => K::RowNotBlockAligned,
            GgufError::AlignmentWrongType { .. } => K::AlignmentWrongType,
            GgufError::InvalidAlignment { .. } => K::InvalidAlignment,
            GgufError::MisalignedTensor { .. } => K::MisalignedTensor,
            GgufError::OverlappingTensors { .. } => K::OverlappingTensors,
            GgufError::TensorPastEnd { .. } => K::TensorPastEnd,
        }
    }
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError::*;
        match self {
            MissingShard { no, count } => {
                write!(f, "shard {} of {count} of this split model is missing", no.saturating_add(1))
            }
            DuplicateShard { no, first, second } => write!(
                f,
                "shard {} was given twice (files {} and {})",
                no.saturating_add(1),
                first + 1,
                second + 1
            ),
            ShardMismatch { file, reason } => write!(f, "file {} {reason}", file + 1),
            BadMagic { found } => write!(
                f,
                "not a GGUF file: the first 4 bytes are {:02x?} ({:?}), expected \"GGUF\"",
                found,
                String::from_utf8_lossy(found)
            ),
            UnsupportedVersion { version } => {
                if version.swap_bytes() == 2 || version.swap_bytes() == 3 {
                    write!(f, "big-endian GGUF files are not supported (version field {version:#x})")
                } else {
                    write!(f, "unsupported GGUF version {version} (versions 2 and 3 are supported)")
                }
            }
            Truncated { field, offset, needed, file_size } => write!(
                f,
                "file truncated: {field} at offset {offset} needs {needed} bytes but the file ends at {file_size}"
            ),
            CountTooLarge { field, offset, count, remaining } => write!(
                f,
                "{field} at offset {offset} is {count}, more than the remaining {remaining} bytes can hold"
            ),
            TooManyTensors { offset, count } => write!(
                f,
                "tensor count at offset {offset} is {count}, more than the {} accepted",
                super::MAX_TENSORS
            ),
            LengthPastEnd { field, offset, length, remaining } => write!(
                f,
                "{field} at offset {offset} declares length {length}, past the end of the file ({remaining} bytes remain)"
            ),
            NestingTooDeep { key, offset } => write!(
                f,
                "metadata {key:?}: arrays nested deeper than {} levels at offset {offset}",
                super::MAX_ARRAY_NESTING
            ),
            UnknownValueType { field, offset, type_id } => {
                write!(f, "{field} at offset {offset}: unknown value type id {type_id}")
            }
            InvalidBool { field, offset, byte } => {
                write!(f, "{field} at offset {offset}: bool byte is {byte}, expected 0 or 1")
            }
            InvalidUtf8 { field, offset } => write!(f, "{field} at offset {offset} is not valid UTF-8"),
            InvalidName { field, offset, reason } => write!(f, "{field} at offset {offset} {reason}"),
            DuplicateKey { key, offset } => {
                write!(f, "metadata key {key:?} at offset {offset} appears twice")
            }
            DuplicateTensorName { name, offset } => {
                write!(f, "tensor name {name:?} at offset {offset} appears twice")
            }
            InvalidDimensionCount { tensor, offset, n_dims } => write!(
                f,
                "tensor {tensor:?}: dimension count at offset {offset} is {n_dims}, expected 1 to 4"
            ),
            ZeroDimension { tensor, offset, axis } => {
                write!(f, "tensor {tensor:?}: dimension {axis} at offset {offset} is zero")
            }
            SizeOverflow { tensor, offset } => write!(
                f,
                "tensor {tensor:?}: element count or byte size of the dimensions at offset {offset} overflows 64 bits"
            ),
            UnknownTensorType { tensor, offset, type_id } => {
                write!(f, "tensor {tensor:?}: unknown ggml type id {type_id} at offset {offset}")
            }
            RemovedTensorType { tensor, offset, type_id, name } => write!(
                f,
                "tensor {tensor:?}: ggml type id {type_id} ({name}) at offset {offset} was removed from ggml"
            ),
            RowNotBlockAligned { tensor, offset, row_len, block_size, type_name } => write!(
                f,
                "tensor {tensor:?}: first dimension {row_len} at offset {offset} is not a multiple of {type_name}'s block size {block_size}"
            ),
            AlignmentWrongType { offset, found } => {
                write!(f, "general.alignment at offset {offset} has type {found}, expected u32")
            }
            InvalidAlignment { offset, value } => write!(
                f,
                "general.alignment at offset {offset} is {value}: it must be a power of two from 1 to {}",
                super::MAX_ALIGNMENT
            ),
            MisalignedTensor { tensor, data_offset, alignment } => write!(
                f,
                "tensor {tensor:?}: data offset {data_offset} is not a multiple of the alignment {alignment}"
            ),
            OverlappingTensors { first, second, at } => {
                write!(f, "tensors {first:?} and {second:?} overlap at data offset {at}")
            }
            TensorPastEnd { tensor, end, file_size } => write!(
                f,
                "tensor {tensor:?}: data ends at byte {end}, past the end of the file ({file_size} bytes)"
            ),
        }
    }
}

impl std::error::Error for GgufError {}
