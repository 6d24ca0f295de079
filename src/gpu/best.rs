//! The best logits on the device: [`shaders::best_logits`] in passes over the logits buffer,
//! so that a decode step reads back `BEST_LOGITS` pairs and three sums instead of the whole
//! vocabulary (608 kB for Qwen3's 151,936 logits; 528 kB of them a mapped copy in a browser).
//! Which steps may is the sampler's call ([`crate::sampler::Sampler::logits_read`]).

use super::backend::{Encoder, Recording};
use super::shaders::{BEST_GROUP_WORDS, BEST_SPAN};
use super::{Gpu, GpuError, groups_2d, map_for_reading, mapped_words};
use crate::sampler::{BEST_LOGITS, BestLogits};

/// Inputs each later pass merges into one workgroup's result.
const FAN_IN: usize = BEST_SPAN as usize / BEST_LOGITS;

/// Workgroups of the first pass over `vocab` logits: the most results a pass writes.
pub(super) fn first_pass_groups(vocab: usize) -> usize {
    vocab.div_ceil(BEST_SPAN as usize).max(1)
}

/// Bytes of one pass's results over `vocab` logits (each of the two scratch buffers).
pub(super) fn scratch_bytes(vocab: usize) -> u64 {
    (first_pass_groups(vocab) * BEST_GROUP_WORDS as usize * 4) as u64
}

/// Bytes of the result read back.
pub(super) const RESULT_BYTES: u64 = BEST_GROUP_WORDS as u64 * 4;

/// Records the passes over `vocab` logits in `logits` at `temperature`, through `scratch`, and
/// a copy of the result to `result` (at least [`RESULT_BYTES`]).
pub(super) fn record(
    recording: &mut Recording,
    gpu: &Gpu,
    logits: &wgpu::Buffer,
    vocab: usize,
    temperature: f32,
    scratch: &[wgpu::Buffer; 2],
    result: &wgpu::Buffer,
) {
    let inv_t = (1.0 / temperature).to_bits();
    let mut groups = first_pass_groups(vocab);
    // The first pass reads the logits; each later one the last pass's results.
    let (mut input, mut groups_in) = (logits, 0);
    for pass in 0.. {
        let out = &scratch[pass % 2];
        let [groups_x, groups_y] = groups_2d(groups as u32);
        let params = [vocab as u32, u32::from(pass == 0), inv_t, groups_in as u32, groups_x, 0, 0, 0];
        recording.dispatch(&gpu.best_logits, &[input, out], &params, [groups_x, groups_y, 1]);
        input = out;
        if groups == 1 {
            break;
        }
        groups_in = groups;
        groups = groups.div_ceil(FAN_IN);
    }
    recording.copy_bytes(input, 0, result, 0, RESULT_BYTES);
}

/// The best logits from the words of a result: the statistics, then (id, order key) pairs;
/// padding past a vocabulary smaller than `BEST_LOGITS` is dropped.
pub(super) fn decode(words: &[u32], vocab: usize, temperature: f32) -> Result<BestLogits, GpuError> {
    if words.len() < BEST_GROUP_WORDS as usize {
        return Err(GpuError::Failed(format!("{} words of best logits", words.len())));
    }
    let best = words[4..BEST_GROUP_WORDS as usize]
        .chunks_exact(2)
        .filter(|pair| (pair[0] as usize) < vocab)
        .map(|pair| (pair[0], from_order_key(pair[1])))
        .collect();
    Ok(BestLogits {
        vocab,
        best,
        temperature,
        z: f64::from(f32::from_bits(words[1])),
        weighted: f64::from(f32::from_bits(words[2])),
    })
}

/// The float whose order key (`shaders::best_logits`) `key` is.
fn from_order_key(key: u32) -> f32 {
    f32::from_bits(if key & 0x8000_0000 != 0 { key & 0x7fff_ffff } else { !key })
}

impl Gpu {
    /// A buffer a pass writes and the next reads or the result is copied from.
    pub(super) fn scratch_buffer(&self, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("best logits scratch"),
            size: bytes.max(4),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }

    /// The best logits of `logits` at `temperature`, computed on the device as a decode step
    /// does: the check of the kernel against [`BestLogits::of`].
    pub async fn best_logits(&self, logits: &[f32], temperature: f32) -> Result<BestLogits, GpuError> {
        if logits.is_empty() {
            return Err(GpuError::Shape("no logits".into()));
        }
        let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
        let input = self.buffer_with(&super::f32_bytes(logits), storage);
        let scratch = [0, 1].map(|_| self.scratch_buffer(scratch_bytes(logits.len())));
        let result = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("best logits"),
            size: RESULT_BYTES,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut recording = Recording::default();
        record(&mut recording, self, &input, logits.len(), temperature, &scratch, &result);
        let commands = Encoder::new(self).encode(self, &recording, &mut None);
        self.queue.submit([commands]);
        self.settle(map_for_reading(&result)).await?;
        decode(&mapped_words(&result, BEST_GROUP_WORDS as usize)?, logits.len(), temperature)
    }
}
