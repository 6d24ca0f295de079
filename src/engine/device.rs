//! Where a session's forward passes run, and the memory they keep there: the CPU's cache and
//! scratch ([`CpuDevice`]) or a GPU's state ([`GpuDevice`]). A [`Session`](super::Session) is
//! written once over [`Device`]: it decides what to keep, roll back and checkpoint; a device
//! only does it where its memory is.

use super::{Engine, EngineError};
use crate::model::{AttentionPrecision, BatchInput, Cache, KvTypes, LogitsFor, Model, Placement, Scratch};
use crate::sampler::{LogitsRead, ReadLogits};

/// A new session's device, with a cache of `context` positions and batches of up to `batch`
/// tokens: the engine's GPU where it has one, else the CPU.
pub(super) fn for_engine(
    engine: &Engine,
    context: usize,
    batch: usize,
) -> Result<Box<dyn Device>, EngineError> {
    #[cfg(feature = "gpu")]
    if let Some(gpu) = &engine.gpu {
        let weights = engine.weights_on_gpu.as_ref();
        return Ok(Box::new(GpuDevice::new(gpu, &engine.model, weights, context, batch)?));
    }
    Ok(Box::new(CpuDevice::new(&engine.model, context, batch, engine.cache_types)?))
}

/// What a session asks of the machine its conversation runs on.
pub(super) trait Device {
    /// Positions the cache holds at most.
    fn capacity(&self) -> usize;

    /// Rolls back to at most `len` positions (a recurrent state to a checkpoint): the
    /// positions kept.
    fn truncate(&mut self, len: usize) -> usize;

    /// Saves a recurrent state's checkpoint at the current length (with `logits`, where they
    /// are known already).
    fn checkpoint(&mut self, logits: &[f32]) -> Result<(), EngineError>;

    /// A checkpoint if enough positions have passed since the last.
    fn checkpoint_if_due(&mut self) -> Result<(), EngineError>;

    /// Goes back to the checkpoint at exactly `len` if it kept logits: those logits.
    fn restore_with_logits(&mut self, len: usize) -> Option<&[f32]>;

    /// Checkpoints held now, the most kept, and bytes each (all 0 without recurrent layers).
    fn checkpoints(&self) -> (usize, usize, usize);

    /// Runs `tokens` after the positions held, at `placement` (`None`: at their cache slots).
    /// The CPU appends the logits asked for to `logits` at once; the GPU submits, and its
    /// logits come from [`Device::collect`], the last row's read as `read` says (the CPU's
    /// are in its memory, and always read whole). After a failure the device holds what it
    /// held before. `precision` is how attention keeps its query and `Σ p·V`.
    fn evaluate(
        &mut self,
        model: &Model,
        input: BatchInput,
        placement: Option<Placement>,
        wanted: (LogitsFor, LogitsRead),
        precision: AttentionPrecision,
        logits: &mut Vec<f32>,
    ) -> Result<(), EngineError>;

    /// What the last submission produced, once it is done: its logits as read (`None`: it
    /// asked for none, or nothing was submitted). `len` is the positions it brings the cache
    /// to (a checkpoint taken there gets these logits, when read whole).
    fn collect(&mut self, len: usize) -> Result<Option<ReadLogits>, EngineError>;

    /// Memory besides the model's weights and the logits: cache, checkpoints, scratch.
    fn state_bytes(&self, model: &Model) -> usize;

    /// Bytes of the KV cache and the current recurrent state in CPU memory (0 on the GPU, which
    /// counts its own in `gpu_bytes`).
    fn cache_bytes(&self) -> usize;

    /// The GPU this device is, if any.
    #[cfg(feature = "gpu")]
    fn gpu(&self) -> Option<&std::sync::Arc<crate::gpu::Gpu>>;

    /// Fires when the GPU has finished what the last call submitted (never on the CPU).
    #[cfg(feature = "gpu")]
    fn pending(&self) -> Option<crate::gpu::Signal>;

    /// Bytes held on the GPU: weights, cache, activations (0 on the CPU).
    #[cfg(feature = "gpu")]
    fn gpu_bytes(&self) -> u64;
}

/// The CPU: the cache and the scratch memory of its forward passes, in the wasm memory.
pub(super) struct CpuDevice {
    cache: Cache,
    scratch: Scratch,
}

impl CpuDevice {
    pub(super) fn new(
        model: &Model,
        context: usize,
        batch: usize,
        types: KvTypes,
    ) -> Result<CpuDevice, EngineError> {
        #[cfg(feature = "gpu")]
        if model.file().has_ranges_on_device() {
            return Err(crate::gpu::GpuError::WeightsOnDevice.into());
        }
        let (cache, scratch) = model.new_state(context, batch, types)?;
        Ok(CpuDevice { cache, scratch })
    }
}

impl Device for CpuDevice {
    fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    fn truncate(&mut self, len: usize) -> usize {
        self.cache.truncate(len)
    }

    fn checkpoint(&mut self, logits: &[f32]) -> Result<(), EngineError> {
        Ok(self.cache.checkpoint(logits)?)
    }

    fn checkpoint_if_due(&mut self) -> Result<(), EngineError> {
        Ok(self.cache.checkpoint_if_due()?)
    }

    fn restore_with_logits(&mut self, len: usize) -> Option<&[f32]> {
        self.cache.restore_with_logits(len)
    }

    fn checkpoints(&self) -> (usize, usize, usize) {
        let (held, most) = self.cache.checkpoints();
        (held, most, self.cache.checkpoint_bytes())
    }

    fn evaluate(
        &mut self,
        model: &Model,
        input: BatchInput,
        placement: Option<Placement>,
        (logits_for, _): (LogitsFor, LogitsRead),
        precision: AttentionPrecision,
        logits: &mut Vec<f32>,
    ) -> Result<(), EngineError> {
        self.scratch.set_attention_precision(precision);
        let (cache, scratch) = (&mut self.cache, &mut self.scratch);
        let result = model.forward_placed(cache, scratch, input, placement, logits_for);
        match result {
            Ok(out) => {
                logits.extend_from_slice(out);
                Ok(())
            }
            Err(error) => {
                // A batch that failed midway may have appended to the cache, or left a
                // recurrent state part-way through it.
                self.cache.discard_partial();
                Err(error.into())
            }
        }
    }

    fn collect(&mut self, _: usize) -> Result<Option<ReadLogits>, EngineError> {
        Ok(None) // The CPU's logits came with `evaluate`.
    }

    fn state_bytes(&self, model: &Model) -> usize {
        let cache = &self.cache;
        let checkpoints = cache.checkpoint_bytes().saturating_mul(cache.checkpoints().1);
        cache
            .bytes()
            .saturating_add(checkpoints)
            .saturating_add(cache.checkpoint_logits_bytes())
            .saturating_add(self.scratch.bytes(model.config()))
    }

    fn cache_bytes(&self) -> usize {
        self.cache.bytes()
    }

    #[cfg(feature = "gpu")]
    fn gpu(&self) -> Option<&std::sync::Arc<crate::gpu::Gpu>> {
        None
    }

    #[cfg(feature = "gpu")]
    fn pending(&self) -> Option<crate::gpu::Signal> {
        None
    }

    #[cfg(feature = "gpu")]
    fn gpu_bytes(&self) -> u64 {
        0
    }
}

/// A GPU: the model's weights, the cache and the activations in its memory.
#[cfg(feature = "gpu")]
pub(super) struct GpuDevice {
    gpu: std::sync::Arc<crate::gpu::Gpu>,
    state: crate::gpu::GpuState,
}

#[cfg(feature = "gpu")]
impl GpuDevice {
    pub(super) fn new(
        gpu: &std::sync::Arc<crate::gpu::Gpu>,
        model: &Model,
        weights: Option<&crate::gpu::DeviceWeights>,
        context: usize,
        batch: usize,
    ) -> Result<GpuDevice, EngineError> {
        let state = crate::gpu::GpuState::with_weights(gpu, model, weights, context, batch)?;
        Ok(GpuDevice { gpu: gpu.clone(), state })
    }
}

#[cfg(feature = "gpu")]
impl Device for GpuDevice {
    fn capacity(&self) -> usize {
        self.state.capacity()
    }

    fn truncate(&mut self, len: usize) -> usize {
        self.state.truncate(&self.gpu, len)
    }

    fn checkpoint(&mut self, logits: &[f32]) -> Result<(), EngineError> {
        Ok(self.state.checkpoint(&self.gpu, logits)?)
    }

    fn checkpoint_if_due(&mut self) -> Result<(), EngineError> {
        Ok(self.state.checkpoint_if_due(&self.gpu)?)
    }

    fn restore_with_logits(&mut self, len: usize) -> Option<&[f32]> {
        self.state.restore_with_logits(&self.gpu, len)
    }

    fn checkpoints(&self) -> (usize, usize, usize) {
        self.state.checkpoints()
    }

    fn evaluate(
        &mut self,
        model: &Model,
        input: BatchInput,
        placement: Option<Placement>,
        (logits_for, read): (LogitsFor, LogitsRead),
        precision: AttentionPrecision,
        _: &mut Vec<f32>,
    ) -> Result<(), EngineError> {
        self.state.set_attention_precision(precision);
        let start = self.state.len();
        let read = (logits_for != LogitsFor::None).then_some(read);
        self.state.submit_input(&self.gpu, model, input, placement, read).map_err(|error| {
            self.state.truncate(&self.gpu, start);
            error.into()
        })
    }

    fn collect(&mut self, len: usize) -> Result<Option<ReadLogits>, EngineError> {
        let Some(logits) = self.state.collect(&self.gpu)? else { return Ok(None) };
        // A checkpoint taken at the end of this submission gets its logits now (the best alone
        // would not serve every step that may restore it).
        if let ReadLogits::Every(every) = &logits {
            self.state.attach_logits(len, every)?;
        }
        Ok(Some(logits))
    }

    fn state_bytes(&self, _: &Model) -> usize {
        self.state.checkpoint_logits_bytes()
    }

    fn cache_bytes(&self) -> usize {
        0
    }

    fn gpu(&self) -> Option<&std::sync::Arc<crate::gpu::Gpu>> {
        Some(&self.gpu)
    }

    fn pending(&self) -> Option<crate::gpu::Signal> {
        self.state.pending()
    }

    fn gpu_bytes(&self) -> u64 {
        self.state.bytes()
    }
}
