//! Receiving a model file's bytes in order (chunks of a `File`, a network stream), each copied
//! once, straight to its final place in a [`ModelBytes`].
//!
//! A file that fits in one allocation is reserved whole up front. A larger one (over 2 GiB on
//! wasm32) is held in pieces split between tensors: its header is read first, to learn where
//! the tensors lie ([`piece_starts`]), and each piece is reserved when the bytes reach it.
//! Pieces are reserved, never zeroed (zeroing 2 GiB cost seconds of a 3.4 GB load).

use std::fmt;
use std::mem::MaybeUninit;

use super::bytes::{ModelBytes, piece_starts};
use crate::gguf::{GgufError, HeaderParse, parse_header};

/// Why a file could not be received.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadError {
    /// The file, or a part of it that must be one allocation, does not fit in memory.
    TooLarge(String),
    /// More bytes arrived than the announced size or the planned pieces allow.
    TooManyBytes(&'static str),
    /// [`FileLoader::finish`] before every byte arrived.
    Incomplete { received: u64, expected: u64 },
    /// The header, read to plan the pieces, is malformed.
    Header(GgufError),
}

impl LoadError {
    /// The machine-readable kind (snake_case), as the page shows it.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadError::TooLarge(_) => "too_large",
            LoadError::TooManyBytes(_) => "too_many_bytes",
            LoadError::Incomplete { .. } => "incomplete",
            LoadError::Header(e) => e.kind().name(),
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::TooLarge(why) => f.write_str(why),
            LoadError::TooManyBytes(what) => f.write_str(what),
            LoadError::Incomplete { received, expected } => {
                write!(f, "received {received} of {expected} bytes")
            }
            LoadError::Header(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Header(e) => Some(e),
            _ => None,
        }
    }
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// A model file arriving in order: `new(size, max_piece)`, then [`push_with`](Self::push_with)
/// or [`push_bytes`](Self::push_bytes) until every byte is in, then [`finish`](Self::finish).
pub struct FileLoader {
    /// Pieces so far, each reserved at its planned length; the last one is being filled.
    pieces: Vec<Vec<u8>>,
    /// The planned length of every piece, once known (immediately for a one-piece file).
    plan: Option<Vec<usize>>,
    /// Bytes received before the plan is known (the start of the file, header included).
    head: Vec<u8>,
    /// How long `head` must be before the header can parse (the parser's last `NeedMore`).
    head_needed: u64,
    expected: usize,
    received: usize,
    max_piece: u64,
}

impl FileLoader {
    /// The largest single allocation Rust allows (`isize::MAX`: 2 GiB on wasm32): one piece.
    pub const MAX_PIECE: u64 = isize::MAX as u64;

    /// A loader for a file of `size` bytes held in pieces of at most `max_piece` bytes
    /// ([`MAX_PIECE`](Self::MAX_PIECE) but in tests). A one-piece file is reserved here, so
    /// one too large for this memory fails before anything is copied.
    pub fn new(size: u64, max_piece: u64) -> Result<FileLoader, LoadError> {
        let expected = usize::try_from(size).map_err(|_| {
            LoadError::TooLarge(format!("a {:.2} GiB file is larger than this memory can address", gib(size)))
        })?;
        let mut loader = FileLoader {
            pieces: Vec::new(),
            plan: None,
            head: Vec::new(),
            head_needed: 0,
            expected,
            received: 0,
            max_piece,
        };
        if size <= max_piece {
            loader.plan = Some(vec![expected]);
            loader.start_piece(expected)?;
        }
        Ok(loader)
    }

    /// Bytes received so far.
    pub fn received(&self) -> usize {
        self.received
    }

    /// Pieces allocated so far.
    pub fn piece_count(&self) -> usize {
        self.pieces.len()
    }

    /// Takes the next `length` bytes of the file from a source that copies into uninitialized
    /// memory: `copy(offset, window)` must fill `window` with the source's bytes from `offset`
    /// on and return it, now initialized (as `js_sys::Uint8Array::copy_to_uninit` does). Each
    /// byte is copied once, to its final place.
    pub fn push_with(
        &mut self,
        length: usize,
        mut copy: impl FnMut(usize, &mut [MaybeUninit<u8>]) -> &mut [u8],
    ) -> Result<(), LoadError> {
        if length > self.expected - self.received {
            return Err(LoadError::TooManyBytes("more bytes than the announced file size"));
        }
        let mut offset = 0;
        while offset < length {
            let window = self.open_window(length - offset)?;
            let (address, count) = (window.as_ptr() as usize, window.len());
            let written = copy(offset, window);
            // The copy's answer must be the window itself: only then are its bytes known to be
            // initialized (a `&mut [u8]` of that memory says so).
            if written.as_ptr() as usize != address || written.len() != count {
                return Err(LoadError::TooManyBytes("a window was not filled exactly"));
            }
            self.wrote(count)?;
            offset += count;
        }
        Ok(())
    }

    /// [`push_with`](Self::push_with) for bytes already in memory.
    pub fn push_bytes(&mut self, chunk: &[u8]) -> Result<(), LoadError> {
        self.push_with(chunk.len(), |offset, window| {
            let source = &chunk[offset..offset + window.len()];
            for (slot, &byte) in window.iter_mut().zip(source) {
                slot.write(byte);
            }
            // SAFETY: every byte of `window` was written just above.
            unsafe { &mut *(window as *mut [MaybeUninit<u8>] as *mut [u8]) }
        })
    }

    /// The file, once every byte is in.
    pub fn finish(self) -> Result<ModelBytes, LoadError> {
        if self.received != self.expected || self.plan.is_none() {
            return Err(LoadError::Incomplete {
                received: self.received as u64,
                expected: self.expected as u64,
            });
        }
        Ok(ModelBytes::from_pieces(self.pieces))
    }

    /// The next window: room for up to `wanted` more bytes at the end of the head (before the
    /// plan is known; never past the announced size) or of the current piece, starting the next
    /// piece when this one is full. The room is spare capacity, written before it is counted.
    fn open_window(&mut self, wanted: usize) -> Result<&mut [MaybeUninit<u8>], LoadError> {
        let mut wanted = wanted;
        if self.plan.is_none() {
            wanted = wanted.min(self.expected - self.received);
            self.head.try_reserve(wanted).map_err(|_| self.refused())?;
        } else if self.pieces.last().is_none_or(|piece| piece.len() == piece.capacity()) {
            let next = self.plan.as_deref().and_then(|plan| plan.get(self.pieces.len()));
            let &length = next.ok_or(LoadError::TooManyBytes("more bytes than the planned pieces"))?;
            self.start_piece(length)?;
        }
        let buffer = self.current_buffer();
        let room = buffer.capacity() - buffer.len();
        Ok(&mut buffer.spare_capacity_mut()[..wanted.min(room)])
    }

    /// Records that the `count` bytes after the current buffer's end are the file's next bytes.
    fn wrote(&mut self, count: usize) -> Result<(), LoadError> {
        let buffer = self.current_buffer();
        // SAFETY: `push_with` checked that exactly these `count` bytes of spare capacity (the
        // window `open_window` handed out) came back initialized.
        unsafe { buffer.set_len(buffer.len() + count) };
        self.received += count;
        if self.plan.is_none() {
            return self.plan_pieces();
        }
        Ok(())
    }

    /// The buffer the next bytes go to: the head before the plan is known, then the last piece
    /// (`open_window` has started one).
    fn current_buffer(&mut self) -> &mut Vec<u8> {
        match (&self.plan, self.pieces.last_mut()) {
            (Some(_), Some(piece)) => piece,
            _ => &mut self.head,
        }
    }

    /// Once the header is in, plans the pieces and moves the bytes received so far into them.
    fn plan_pieces(&mut self) -> Result<(), LoadError> {
        let size = self.expected as u64;
        if (self.head.len() as u64) < self.head_needed {
            return Ok(()); // Re-parsing a growing header on every chunk would be quadratic.
        }
        let header = match parse_header(&self.head, size).map_err(LoadError::Header)? {
            HeaderParse::NeedMore { at_least } if at_least > self.max_piece => {
                return Err(self.part_too_large("its header"));
            }
            HeaderParse::NeedMore { at_least } => {
                self.head_needed = at_least;
                return Ok(());
            }
            HeaderParse::Complete(header) => header,
        };
        let starts =
            piece_starts(&header, self.max_piece).ok_or_else(|| self.part_too_large("one of its tensors"))?;
        let mut lengths = Vec::with_capacity(starts.len() + 1);
        let mut previous = 0u64;
        for &start in starts.iter().chain(std::iter::once(&size)) {
            lengths.push((start - previous) as usize);
            previous = start;
        }
        self.plan = Some(lengths);
        // The head's bytes were counted when they came; they only move into the pieces.
        let head = std::mem::take(&mut self.head);
        self.received -= head.len();
        self.push_bytes(&head)
    }

    /// Reserves the next piece at its full length.
    fn start_piece(&mut self, length: usize) -> Result<(), LoadError> {
        let mut piece = Vec::new();
        piece.try_reserve_exact(length).map_err(|_| self.refused())?;
        self.pieces.push(piece);
        Ok(())
    }

    /// An allocation for the file failed: the memory would not grow that far.
    fn refused(&self) -> LoadError {
        LoadError::TooLarge(format!(
            "a {:.2} GiB file does not fit: the memory would not grow that far",
            gib(self.expected as u64)
        ))
    }

    /// Part of the file is larger than one allocation can be.
    fn part_too_large(&self, what: &str) -> LoadError {
        LoadError::TooLarge(format!(
            "the file does not fit: {what} exceeds the {} bytes one allocation can hold here",
            self.max_piece
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::GgufWriter;

    fn three_tensor_file() -> Vec<u8> {
        GgufWriter::new()
            .tensor_f32("a", &[4096], &[1.0; 4096])
            .tensor_f32("b", &[4096], &[2.0; 4096])
            .tensor_f32("c", &[4096], &[3.0; 4096])
            .to_bytes()
    }

    /// Feeds `bytes` in chunks of `chunk` bytes.
    fn load(bytes: &[u8], max_piece: u64, chunk: usize) -> Result<FileLoader, LoadError> {
        let mut loader = FileLoader::new(bytes.len() as u64, max_piece)?;
        for part in bytes.chunks(chunk) {
            loader.push_bytes(part)?;
        }
        Ok(loader)
    }

    #[test]
    fn a_file_arrives_whole_in_one_piece_or_split_between_tensors() {
        let bytes = three_tensor_file();
        for (max_piece, pieces) in [(FileLoader::MAX_PIECE, 1), (34_000, 2), (20_000, 3)] {
            for chunk in [1, 7, 4096, bytes.len()] {
                let loader = load(&bytes, max_piece, chunk).unwrap();
                assert_eq!(loader.received(), bytes.len());
                assert_eq!(loader.piece_count(), pieces, "max piece {max_piece}, chunks of {chunk}");
                let file = loader.finish().unwrap();
                let header = file.header().unwrap();
                for (name, value) in [("a", 1.0f32), ("b", 2.0), ("c", 3.0)] {
                    let start = (header.data_offset + header.tensor(name).unwrap().offset) as usize;
                    let tensor = file.get(start..start + 4 * 4096).expect("one tensor is one slice");
                    assert!(tensor.chunks(4).all(|f| f32::from_le_bytes(f.try_into().unwrap()) == value));
                }
            }
        }
    }

    #[test]
    fn wrong_amounts_and_hostile_headers_are_typed_errors() {
        let bytes = three_tensor_file();
        let kind = |r: Result<FileLoader, LoadError>| r.err().map(|e| e.kind());
        // More than announced, at once or in pieces.
        let mut loader = FileLoader::new(10, FileLoader::MAX_PIECE).unwrap();
        assert_eq!(loader.push_bytes(&[0; 11]).unwrap_err().kind(), "too_many_bytes");
        // Fewer than announced.
        let mut loader = FileLoader::new(bytes.len() as u64 + 1, FileLoader::MAX_PIECE).unwrap();
        loader.push_bytes(&bytes).unwrap();
        assert_eq!(loader.finish().err().map(|e| e.kind()), Some("incomplete"));
        // A tensor larger than a piece, and a header that is not GGUF.
        assert_eq!(kind(load(&bytes, 15_000, 4096)), Some("too_large"));
        let mut junk = bytes.clone();
        junk[..4].copy_from_slice(b"GGUX");
        assert_eq!(kind(load(&junk, 20_000, 4096)), Some("bad_magic"));
        // A size no memory can hold is refused before anything is copied.
        assert_eq!(kind(FileLoader::new(u64::MAX, u64::MAX)), Some("too_large"));
    }

    #[test]
    fn a_copy_that_does_not_fill_its_window_is_refused() {
        let mut loader = FileLoader::new(8, FileLoader::MAX_PIECE).unwrap();
        // Only memory that outlives the loader can be returned instead of the window.
        let mut elsewhere: &'static mut [u8] = Box::leak(Box::new([0u8; 8]));
        let error = loader.push_with(8, |_, _| std::mem::take(&mut elsewhere)).unwrap_err();
        assert_eq!(error.kind(), "too_many_bytes");
        assert_eq!(loader.received(), 0);
    }
}
