//! Helpers for the tests: golden fixture files and a small deterministic random generator.

use super::blocks::F16Le;

/// A fixture written by scripts/make_tensor_fixtures.py: quantized bytes plus expected f32 values.
pub struct Fixture {
    pub ggml_type_id: u32,
    pub rows: usize,
    pub row_len: usize,
    pub data: Vec<u8>,
    pub values: Vec<f32>,
}

impl Fixture {
    pub fn parse(bytes: &[u8]) -> Self {
        assert_eq!(&bytes[..4], b"IFXT", "not a tensor fixture");
        let word = |i: usize| u32::from_le_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().unwrap());
        let (ggml_type_id, rows, row_len, data_len) =
            (word(0), word(1) as usize, word(2) as usize, word(3) as usize);
        let data = bytes[20..20 + data_len].to_vec();
        let values: Vec<f32> = bytes[20 + data_len..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(values.len(), rows * row_len, "fixture value count");
        Self { ggml_type_id, rows, row_len, data, values }
    }
}

/// splitmix64: deterministic, dependency-free randomness for tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// Random blocks of `block_bytes` bytes whose f16 fields at `scale_offsets` hold sane scales
    /// (magnitude 1e-3..0.1, random sign) instead of random bits that could be NaN or huge.
    pub fn blocks(&mut self, count: usize, block_bytes: usize, scale_offsets: &[usize]) -> Vec<u8> {
        let mut out = self.bytes(count * block_bytes);
        for block in out.chunks_exact_mut(block_bytes) {
            for &offset in scale_offsets {
                let magnitude = 1e-3 + self.uniform() * 0.1;
                let value = if self.next_u64() & 1 == 0 { magnitude } else { -magnitude };
                block[offset..offset + 2].copy_from_slice(&F16Le::from_f32(value).0);
            }
        }
        out
    }
}
