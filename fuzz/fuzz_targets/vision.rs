//! Untrusted vision projectors (mmproj) and picture files through the image encoder: a
//! projector loaded and made to encode, or a picture decoded, fitted and encoded. Besides "never
//! panics": the embeddings' shape, and the allocation bound (the input's, plus what the picture
//! and the encoder's shape warrant).
//!
//! The checks live in `inferno_fuzz::targets::vision`, shared with the replay test.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| inferno_fuzz::targets::vision(data));
