//! The one copy of a model file, in one piece or in several.
//!
//! Tensors are zero-copy views into the file's bytes, so those bytes must stay put — but Rust
//! caps a single allocation (and slice) at `isize::MAX` bytes, 2 GiB on wasm32, while a wasm
//! memory grows to 4 GiB. A larger file is therefore held as consecutive pieces that split
//! only at tensor boundaries: every tensor is still one slice, and nothing is copied twice.

use std::ops::Range;

use crate::gguf::{GgufError, GgufHeader, HeaderParse, parse_header, split};

/// A model file's bytes: consecutive pieces, the first of which holds the whole header; or
/// the files of a model split with gguf-split, laid end to end, each starting a piece.
pub struct ModelBytes {
    /// `(absolute start, bytes)`, in file order, without gaps.
    pieces: Vec<(usize, Vec<u8>)>,
    len: usize,
    /// Where each file starts (`[0]` for one file).
    files: Vec<usize>,
    /// Ranges whose bytes went straight to a GPU as they arrived and are not held here (a
    /// model too large for this memory: `gpu::WeightStream`), sorted; the pieces lie between.
    on_device: Vec<Range<usize>>,
}

impl From<Vec<u8>> for ModelBytes {
    fn from(bytes: Vec<u8>) -> Self {
        ModelBytes { len: bytes.len(), pieces: vec![(0, bytes)], files: vec![0], on_device: Vec::new() }
    }
}

impl ModelBytes {
    /// Consecutive pieces of one file (the first must contain the header).
    pub fn from_pieces(pieces: Vec<Vec<u8>>) -> Self {
        let mut start = 0;
        let pieces: Vec<(usize, Vec<u8>)> = pieces
            .into_iter()
            .map(|piece| {
                let at = start;
                start += piece.len();
                (at, piece)
            })
            .collect();
        ModelBytes { pieces, len: start, files: vec![0], on_device: Vec::new() }
    }

    /// A file of `len` bytes of which only `pieces` (`(start, bytes)`, in order, not
    /// overlapping, the first from 0 with the header) are held; `on_device` (sorted by their
    /// distinct starts, all past the pieces, and within `len`) went to a GPU. Those ranges may
    /// overlap one another: they only name a tensor's place and length, and nothing is read
    /// from them here.
    pub fn with_ranges_on_device(
        pieces: Vec<(usize, Vec<u8>)>,
        on_device: Vec<Range<usize>>,
        len: usize,
    ) -> Option<Self> {
        let mut end = 0;
        for (start, bytes) in &pieces {
            if *start < end {
                return None;
            }
            end = start.checked_add(bytes.len())?;
        }
        let first_at_zero = pieces.first().is_some_and(|(start, _)| *start == 0);
        let sorted = on_device.windows(2).all(|pair| pair[0].start < pair[1].start);
        let placed = on_device.iter().all(|r| r.start >= end && r.start <= r.end && r.end <= len);
        (first_at_zero && sorted && placed && end <= len).then_some(ModelBytes {
            pieces,
            len,
            files: vec![0],
            on_device,
        })
    }

    /// Whether `range` is exactly one of the ranges that went to a GPU.
    pub fn is_on_device(&self, range: &Range<usize>) -> bool {
        self.on_device
            .binary_search_by_key(&range.start, |r| r.start)
            .is_ok_and(|i| self.on_device[i] == *range)
    }

    /// Whether some of the file's bytes are held on a GPU only.
    pub fn has_ranges_on_device(&self) -> bool {
        !self.on_device.is_empty()
    }

    /// Bytes held here (not on a GPU).
    pub fn held_bytes(&self) -> usize {
        self.pieces.iter().map(|(_, bytes)| bytes.len()).sum()
    }

    /// The files of a split model (each as loaded, in any order), laid end to end: what
    /// [`ModelBytes::header`] then reads as one model.
    pub fn from_files(files: Vec<ModelBytes>) -> Self {
        let mut joined = ModelBytes { pieces: Vec::new(), len: 0, files: Vec::new(), on_device: Vec::new() };
        for file in files {
            joined.files.push(joined.len);
            let base = joined.len;
            joined.pieces.extend(file.pieces.into_iter().map(|(start, bytes)| (base + start, bytes)));
            joined.len += file.len;
        }
        joined
    }

    /// How many files these bytes are.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes at `range`, when they lie inside one piece (tensor ranges always do, see
    /// [`piece_starts`]); `None` outside the file or across a piece boundary.
    pub fn get(&self, range: Range<usize>) -> Option<&[u8]> {
        let index = self.pieces.partition_point(|(start, _)| *start <= range.start).checked_sub(1)?;
        let (start, bytes) = &self.pieces[index];
        bytes.get(range.start - start..range.end.checked_sub(*start)?)
    }

    /// [`get`](Self::get), writable.
    pub fn get_mut(&mut self, range: Range<usize>) -> Option<&mut [u8]> {
        let index = self.pieces.partition_point(|(start, _)| *start <= range.start).checked_sub(1)?;
        let (start, bytes) = &mut self.pieces[index];
        bytes.get_mut(range.start - *start..range.end.checked_sub(*start)?)
    }

    /// Parses the header from the first piece; for a split model, every file's, merged into
    /// one ([`split::merge`]).
    pub fn header(&self) -> Result<GgufHeader, GgufError> {
        if self.files.len() <= 1 {
            let first = self.pieces.first().map_or(&[][..], |(_, bytes)| bytes.as_slice());
            return parse_one(first, self.len as u64);
        }
        let mut headers = Vec::with_capacity(self.files.len());
        for (i, &start) in self.files.iter().enumerate() {
            let end = self.files.get(i + 1).copied().unwrap_or(self.len);
            let index = self.pieces.partition_point(|(at, _)| *at < start);
            let first =
                self.pieces.get(index).filter(|(at, _)| *at == start).map_or(&[][..], |(_, b)| b.as_slice());
            let header = parse_one(first, (end - start) as u64).map_err(|e| GgufError::ShardMismatch {
                file: i,
                reason: format!("is not a valid GGUF file: {e}"),
            })?;
            headers.push((start as u64, header));
        }
        split::merge(headers, self.len as u64)
    }
}

/// The header of one file from its first piece, which must hold all of it.
fn parse_one(first: &[u8], file_size: u64) -> Result<GgufHeader, GgufError> {
    match parse_header(first, file_size)? {
        HeaderParse::Complete(header) => Ok(header),
        HeaderParse::NeedMore { at_least } => Err(GgufError::Truncated {
            field: "header (it must fit in the first piece of the file)".into(),
            offset: 0,
            needed: at_least,
            file_size: first.len() as u64,
        }),
    }
}

/// Where to start new pieces so that none exceeds `max_piece` bytes and no tensor is split:
/// the absolute offsets of the pieces after the first. `None` when some tensor (or the header)
/// alone is larger than `max_piece`.
pub fn piece_starts(header: &GgufHeader, max_piece: u64) -> Option<Vec<u64>> {
    if header.data_offset > max_piece {
        return None;
    }
    let mut tensors: Vec<(u64, u64)> =
        header.tensors.iter().map(|t| (header.data_offset.saturating_add(t.offset), t.n_bytes)).collect();
    tensors.sort_unstable();
    let mut starts = Vec::new();
    let mut piece_start = 0u64;
    for (start, n_bytes) in tensors {
        let end = start.saturating_add(n_bytes);
        if end - piece_start > max_piece {
            if n_bytes > max_piece {
                return None; // One tensor larger than a piece can be.
            }
            starts.push(start);
            piece_start = start;
        }
    }
    // What follows the last tensor is padding, which belongs to the last piece.
    (header.file_size.saturating_sub(piece_start) <= max_piece).then_some(starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_only_between_tensors() {
        use crate::gguf::writer::GgufWriter;
        let bytes = GgufWriter::new()
            .tensor_f32("a", &[64], &[1.0; 64])
            .tensor_f32("b", &[64], &[2.0; 64])
            .tensor_f32("c", &[64], &[3.0; 64])
            .to_bytes();
        let header = ModelBytes::from(bytes.clone()).header().unwrap();
        let start = |name: &str| header.data_offset + header.tensor(name).unwrap().offset;
        assert_eq!(piece_starts(&header, bytes.len() as u64), Some(vec![]), "fits in one piece");
        let max = start("b") + 256; // header, a and b fit; c starts a new piece
        assert_eq!(piece_starts(&header, max), Some(vec![start("c")]));
        assert_eq!(piece_starts(&header, 200), None, "a tensor alone is larger than a piece");
    }

    #[test]
    fn ranges_inside_one_piece_are_found_and_ranges_across_pieces_are_not() {
        let bytes = ModelBytes::from_pieces(vec![vec![0, 1, 2], vec![3, 4], vec![5, 6, 7, 8]]);
        assert_eq!(bytes.len(), 9);
        assert_eq!(bytes.get(0..3), Some(&[0, 1, 2][..]));
        assert_eq!(bytes.get(3..5), Some(&[3, 4][..]));
        assert_eq!(bytes.get(6..8), Some(&[6, 7][..]));
        assert_eq!(bytes.get(5..5), Some(&[][..]));
        assert_eq!(bytes.get(2..4), None, "spans two pieces");
        assert_eq!(bytes.get(8..10), None, "past the end");
    }
}
