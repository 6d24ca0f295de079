//! The one error type of the tensor kernels: every length or type mismatch is reported, never
//! panicked on.

use std::fmt;

use super::ActivationType;

/// What went wrong in a tensor kernel call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorError {
    /// A row length that is not a whole number of blocks of `format` (a weight or activation type).
    RowNotBlockAligned { format: &'static str, row_len: usize, block_len: usize },
    /// A buffer whose length does not match the shape it is used with.
    LengthMismatch { what: &'static str, expected: usize, actual: usize },
    /// Activations quantized for a different weight type than the one they are dotted with.
    ActivationTypeMismatch { expected: ActivationType, actual: ActivationType },
    /// An activation row index past the end.
    RowOutOfRange { row: usize, rows: usize },
    /// A shape whose element or byte count does not fit in `usize`.
    ShapeOverflow,
}

impl TensorError {
    /// A stable snake_case name for the kind of problem.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RowNotBlockAligned { .. } => "row_not_block_aligned",
            Self::LengthMismatch { .. } => "length_mismatch",
            Self::ActivationTypeMismatch { .. } => "activation_type_mismatch",
            Self::RowOutOfRange { .. } => "row_out_of_range",
            Self::ShapeOverflow => "shape_overflow",
        }
    }
}

impl fmt::Display for TensorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RowNotBlockAligned { format, row_len, block_len } => {
                write!(f, "row length {row_len} is not a multiple of the {format} block length {block_len}")
            }
            Self::LengthMismatch { what, expected, actual } => {
                write!(f, "{what}: expected length {expected}, got {actual}")
            }
            Self::ActivationTypeMismatch { expected, actual } => {
                write!(f, "activations are {actual:?}, but the weight type needs {expected:?}")
            }
            Self::RowOutOfRange { row, rows } => write!(f, "activation row {row} out of range ({rows} rows)"),
            Self::ShapeOverflow => write!(f, "tensor shape overflows usize"),
        }
    }
}

impl std::error::Error for TensorError {}

/// Checks that `actual == expected`, naming the buffer in the error.
pub(crate) fn check_len(what: &'static str, expected: usize, actual: usize) -> Result<(), TensorError> {
    if expected == actual { Ok(()) } else { Err(TensorError::LengthMismatch { what, expected, actual }) }
}
