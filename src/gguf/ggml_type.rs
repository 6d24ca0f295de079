//! The table of ggml tensor types: every id ggml has ever assigned, with the block geometry
//! needed to size a tensor even when we cannot compute with it.

use std::fmt;

/// A tensor element type that ggml currently defines (ids removed from ggml are not
/// representable; see [`GgmlType::from_id`]).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
}

/// Why a type id from a file cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeIdError {
    /// ggml once used this id and then removed the format.
    Removed(&'static str),
    /// ggml never assigned this id.
    Unknown,
}

/// (type, id, name, elements per block, bytes per block), from ggml's `type_traits`.
const TABLE: [(GgmlType, u32, &str, u64, u64); 32] = [
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 18),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 22),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 34),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 36),
    (GgmlType::Q2_K, 10, "Q2_K", 256, 84),
    (GgmlType::Q3_K, 11, "Q3_K", 256, 110),
    (GgmlType::Q4_K, 12, "Q4_K", 256, 144),
    (GgmlType::Q5_K, 13, "Q5_K", 256, 176),
    (GgmlType::Q6_K, 14, "Q6_K", 256, 210),
    (GgmlType::Q8_K, 15, "Q8_K", 256, 292),
    (GgmlType::IQ2_XXS, 16, "IQ2_XXS", 256, 66),
    (GgmlType::IQ2_XS, 17, "IQ2_XS", 256, 74),
    (GgmlType::IQ3_XXS, 18, "IQ3_XXS", 256, 98),
    (GgmlType::IQ1_S, 19, "IQ1_S", 256, 50),
    (GgmlType::IQ4_NL, 20, "IQ4_NL", 32, 18),
    (GgmlType::IQ3_S, 21, "IQ3_S", 256, 110),
    (GgmlType::IQ2_S, 22, "IQ2_S", 256, 82),
    (GgmlType::IQ4_XS, 23, "IQ4_XS", 256, 136),
    (GgmlType::I8, 24, "I8", 1, 1),
    (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),
    (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),
    (GgmlType::IQ1_M, 29, "IQ1_M", 256, 56),
    (GgmlType::BF16, 30, "BF16", 1, 2),
    (GgmlType::TQ1_0, 34, "TQ1_0", 256, 54),
    (GgmlType::TQ2_0, 35, "TQ2_0", 256, 66),
    (GgmlType::MXFP4, 39, "MXFP4", 32, 17),
];

/// Ids ggml assigned and later removed (files using them cannot be loaded by llama.cpp either).
const REMOVED: [(u32, &str); 8] = [
    (4, "Q4_2"),
    (5, "Q4_3"),
    (31, "Q4_0_4_4"),
    (32, "Q4_0_4_8"),
    (33, "Q4_0_8_8"),
    (36, "IQ4_NL_4_4"),
    (37, "IQ4_NL_4_8"),
    (38, "IQ4_NL_8_8"),
];

impl GgmlType {
    /// Every type, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TABLE.iter().map(|row| row.0)
    }

    pub const fn from_id(id: u32) -> Result<GgmlType, TypeIdError> {
        // Loops, not iterators: const fns cannot call them.
        let mut i = 0;
        while i < TABLE.len() {
            if TABLE[i].1 == id {
                return Ok(TABLE[i].0);
            }
            i += 1;
        }
        let mut i = 0;
        while i < REMOVED.len() {
            if REMOVED[i].0 == id {
                return Err(TypeIdError::Removed(REMOVED[i].1));
            }
            i += 1;
        }
        Err(TypeIdError::Unknown)
    }

    const fn row(self) -> &'static (GgmlType, u32, &'static str, u64, u64) {
        // The table is indexed by declaration order of the enum.
        &TABLE[self as usize]
    }

    pub const fn id(self) -> u32 {
        self.row().1
    }

    /// ggml's name, e.g. `"Q4_K"`.
    pub const fn name(self) -> &'static str {
        self.row().2
    }

    /// Elements per block (1 for plain scalar types).
    pub const fn block_size(self) -> u64 {
        self.row().3
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> u64 {
        self.row().4
    }

    /// Bytes taken by `n_elements` elements, or `None` when `n_elements` is not a whole number
    /// of blocks or the size overflows.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        if !n_elements.is_multiple_of(self.block_size()) {
            return None;
        }
        (n_elements / self.block_size()).checked_mul(self.block_bytes())
    }

    /// Whether values are stored in quantized blocks (as opposed to plain numbers).
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_enum_order() {
        for (index, row) in TABLE.iter().enumerate() {
            assert_eq!(row.0 as usize, index, "{}", row.2);
            assert_eq!(GgmlType::from_id(row.1), Ok(row.0));
        }
    }

    #[test]
    fn removed_and_unknown_ids_are_told_apart() {
        assert_eq!(GgmlType::from_id(4), Err(TypeIdError::Removed("Q4_2")));
        assert_eq!(GgmlType::from_id(36), Err(TypeIdError::Removed("IQ4_NL_4_4")));
        assert_eq!(GgmlType::from_id(40), Err(TypeIdError::Unknown));
        assert_eq!(GgmlType::from_id(u32::MAX), Err(TypeIdError::Unknown));
    }

    #[test]
    fn sizes_follow_block_geometry() {
        assert_eq!(GgmlType::Q4_K.bytes_for(1024), Some(4 * 144));
        assert_eq!(GgmlType::Q8_0.bytes_for(64), Some(68));
        assert_eq!(GgmlType::Q8_0.bytes_for(33), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX), None);
    }
}
