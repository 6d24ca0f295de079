//! What a session remembers of the tokens it has run: the keys and values of attention layers
//! (F16 unless asked otherwise, like llama.cpp's default; Q8_0 or F32 as its `-ctk`/`-ctv`;
//! sized to the context a session asks for rather than the model's maximum) and, for recurrent
//! layers (Qwen3.5's gated DeltaNet, LFM2's short convolutions), their state.
//!
//! Keys and values roll back for free: forgetting positions is a length change. A recurrent
//! state cannot be rolled back; it is overwritten by every token. So the cache also keeps
//! checkpoints, copies of the recurrent state at chosen positions, and rolling back restores
//! the nearest one at or before the wanted length: the caller replays the tokens between.

use half::f16;

use super::config::Config;
use super::error::{ModelError, try_zeroed};
use crate::tensor::{BlockQ8_0, quantize_q8_0};

/// How the cache keeps keys or values: llama.cpp's `-ctk`/`-ctv` types that its CPU attention
/// reads. F16 is the default; Q8_0 takes 34 bytes per 32 values (53 % of F16), F32 twice F16.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvType {
    #[default]
    F16,
    Q8_0,
    F32,
}

impl KvType {
    pub const ALL: [KvType; 3] = [KvType::F16, KvType::Q8_0, KvType::F32];

    /// Its name in the API, the CLI and the page, as llama.cpp spells it: `f16`, `q8_0`, `f32`.
    pub fn name(self) -> &'static str {
        match self {
            KvType::F16 => "f16",
            KvType::Q8_0 => "q8_0",
            KvType::F32 => "f32",
        }
    }

    /// The type called `name`, if any.
    pub fn from_name(name: &str) -> Option<KvType> {
        KvType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Values per stored unit (a Q8_0 block holds 32); rows must be whole units.
    pub fn unit_len(self) -> usize {
        match self {
            KvType::Q8_0 => crate::tensor::QK,
            KvType::F16 | KvType::F32 => 1,
        }
    }

    /// Whether values are kept in blocks with a shared scale (llama.cpp turns them first).
    pub fn is_quantized(self) -> bool {
        self == KvType::Q8_0
    }
}

/// The types of the cached keys and of the cached values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvTypes {
    pub keys: KvType,
    pub values: KvType,
}

impl KvTypes {
    /// Whether both are the default F16 (what the GPU backend keeps).
    pub fn is_default(self) -> bool {
        self == KvTypes::default()
    }
}

/// Cached keys or values of every attention layer, in one of the [`KvType`]s.
enum KvStore {
    F16(Vec<f16>),
    F32(Vec<f32>),
    Q8_0(Vec<BlockQ8_0>),
}

/// Rows of cached keys or values as attention reads them: a run of positions of one layer.
#[derive(Clone, Copy)]
pub enum KvRows<'a> {
    F16(&'a [f16]),
    F32(&'a [f32]),
    Q8_0(&'a [BlockQ8_0]),
}

impl KvStore {
    fn zeroed(kind: KvType, values: usize, what: &'static str) -> Result<KvStore, ModelError> {
        Ok(match kind {
            KvType::F16 => KvStore::F16(try_zeroed(what, values)?),
            KvType::F32 => KvStore::F32(try_zeroed(what, values)?),
            KvType::Q8_0 => KvStore::Q8_0(try_zeroed(what, values / kind.unit_len())?),
        })
    }

    fn bytes(&self) -> usize {
        match self {
            KvStore::F16(v) => std::mem::size_of_val(&v[..]),
            KvStore::F32(v) => std::mem::size_of_val(&v[..]),
            KvStore::Q8_0(v) => std::mem::size_of_val(&v[..]),
        }
    }

    /// Stores `rows` from value `begin` on (a whole number of units, as is `begin`), converted
    /// as llama.cpp's copy into its cache converts them.
    fn store(&mut self, begin: usize, rows: &[f32]) {
        match self {
            KvStore::F16(v) => {
                for (dst, &src) in v[begin..begin + rows.len()].iter_mut().zip(rows) {
                    *dst = f16::from_f32(src);
                }
            }
            KvStore::F32(v) => v[begin..begin + rows.len()].copy_from_slice(rows),
            KvStore::Q8_0(v) => {
                let unit = KvType::Q8_0.unit_len();
                quantize_q8_0(rows, &mut v[begin / unit..(begin + rows.len()) / unit]);
            }
        }
    }

    /// Values `begin..end` (whole units).
    fn rows(&self, begin: usize, end: usize) -> KvRows<'_> {
        match self {
            KvStore::F16(v) => KvRows::F16(&v[begin..end]),
            KvStore::F32(v) => KvRows::F32(&v[begin..end]),
            KvStore::Q8_0(v) => {
                let unit = KvType::Q8_0.unit_len();
                KvRows::Q8_0(&v[begin / unit..end / unit])
            }
        }
    }
}

/// Generated positions between two checkpoints. Replaying up to this many tokens is one short
/// batched forward pass.
pub const CHECKPOINT_INTERVAL: usize = 32;

/// What checkpoints may cost together, beyond at least [`MIN_CHECKPOINTS`] of them.
const CHECKPOINT_BUDGET_BYTES: usize = 96 << 20;
const MIN_CHECKPOINTS: usize = 2;
const MAX_CHECKPOINTS: usize = 8;

pub struct Cache {
    capacity: usize,
    /// Where each layer's keys and values start in `keys`/`values`, and their width per
    /// position (attention layers only; a layer that shares another's points at that one's).
    kv_slot: Vec<Option<KvSlot>>,
    /// Per attention layer that keeps its own, `[position][kv_dim]`.
    keys: KvStore,
    values: KvStore,
    types: KvTypes,
    /// Positions `0..len` have been run.
    len: usize,
    /// Each recurrent layer's place in `recurrent` (`None` for attention layers).
    state_slot: Vec<Option<usize>>,
    /// The recurrent state after position `len - 1` (zero when `len` is 0).
    recurrent: RecurrentState,
    checkpoints: Checkpoints<RecurrentState>,
}

/// Refuses cache types the model's heads cannot be kept in: a Q8_0 block must not straddle two
/// heads, so each attention layer's head size must be a multiple of 32 (llama.cpp asks the same
/// of its quantized caches).
pub(super) fn check_types(config: &Config, types: KvTypes) -> Result<(), ModelError> {
    for kind in [types.keys, types.values] {
        let unit = kind.unit_len();
        let unfit = (0..config.n_layer)
            .filter(|&l| !config.is_recurrent(l))
            .map(|l| config.layer(l).head_dim)
            .find(|head_dim| !head_dim.is_multiple_of(unit));
        if let Some(head_dim) = unfit {
            return Err(ModelError::UnfitCacheType { cache_type: kind.name(), head_dim, unit });
        }
    }
    Ok(())
}

/// Every recurrent layer's convolution and delta-rule state, one after another.
struct RecurrentState {
    /// Per recurrent layer, the last `conv_kernel - 1` convolution inputs, `[tap][channel]`.
    conv: Vec<f32>,
    /// Per recurrent layer, per value head, `head_dim` rows (one per value dimension) of
    /// `head_dim` (key dimensions): the transpose of the state matrix, as ggml stores it.
    ssm: Vec<f32>,
    conv_len: usize,
    ssm_len: usize,
}

impl RecurrentState {
    fn zeroed(config: &Config, layers: usize) -> Result<RecurrentState, ModelError> {
        let (conv_len, ssm_len) = config.recurrent_state_lens();
        Ok(RecurrentState {
            conv: try_zeroed("recurrent state", layers.saturating_mul(conv_len))?,
            ssm: try_zeroed("recurrent state", layers.saturating_mul(ssm_len))?,
            conv_len,
            ssm_len,
        })
    }

    fn bytes(&self) -> usize {
        (self.conv.len() + self.ssm.len()) * std::mem::size_of::<f32>()
    }

    /// Layer slot `slot`'s convolution and delta-rule state.
    fn layer_mut(&mut self, slot: usize) -> (&mut [f32], &mut [f32]) {
        (
            &mut self.conv[slot * self.conv_len..][..self.conv_len],
            &mut self.ssm[slot * self.ssm_len..][..self.ssm_len],
        )
    }

    fn copy_from(&mut self, other: &RecurrentState) {
        self.conv.copy_from_slice(&other.conv);
        self.ssm.copy_from_slice(&other.ssm);
    }
}

#[derive(Clone, Copy)]
struct KvSlot {
    start: usize,
    kv_dim: usize,
    rotations: Rotations,
}

/// The Walsh-Hadamard turns llama.cpp gives a layer's queries and keys, and its values (undone
/// on the output), when its cache keeps them quantized: runs of this many values (0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rotations {
    pub keys: usize,
    pub values: usize,
}

impl Rotations {
    /// llama.cpp's rule (`llama_kv_cache`'s `attn_rot_k`/`attn_rot_v`): a quantized type, and
    /// heads of one size throughout the cache (sliding-window layers keep a cache of their own)
    /// that is a multiple of 64; keys turn in runs of the largest power of two that divides
    /// it, values in runs of 64.
    fn of_layer(config: &Config, types: KvTypes, layer: usize) -> Rotations {
        let sliding = config.is_sliding(layer);
        let mut head_dims = (0..config.n_layer)
            .filter(|&l| !config.is_recurrent(l) && config.keeps_kv(l) && config.is_sliding(l) == sliding)
            .map(|l| config.layer(l).head_dim);
        let first = head_dims.next().unwrap_or(0);
        let head_dim = if head_dims.all(|d| d == first) { first } else { 0 };
        if head_dim == 0 || !head_dim.is_multiple_of(64) {
            return Rotations::default();
        }
        Rotations {
            keys: if types.keys.is_quantized() { 1 << head_dim.trailing_zeros() } else { 0 },
            values: if types.values.is_quantized() { 64 } else { 0 },
        }
    }
}

/// Saved copies of a recurrent state (`S`: in CPU memory here, on the device for the GPU's),
/// oldest first, at distinct positions (never 0: that state is all zeros), and which to keep
/// when they are all taken: one policy for both backends.
pub struct Checkpoints<S> {
    list: Vec<Checkpoint<S>>,
    max: usize,
}

pub struct Checkpoint<S> {
    pub position: usize,
    pub state: S,
    /// The logits after the checkpoint's last token, where the caller kept them (at a
    /// prompt's end: regenerating then needs no forward pass at all).
    pub logits: Vec<f32>,
}

impl<S> Checkpoints<S> {
    /// Room for as many states of `bytes_each` as [`CHECKPOINT_BUDGET_BYTES`] allows, within
    /// [`MIN_CHECKPOINTS`]..=[`MAX_CHECKPOINTS`] (none for a state of 0 bytes).
    pub fn new(bytes_each: usize) -> Checkpoints<S> {
        let max = match bytes_each {
            0 => 0,
            each => (CHECKPOINT_BUDGET_BYTES / each).clamp(MIN_CHECKPOINTS, MAX_CHECKPOINTS),
        };
        Checkpoints { list: Vec::new(), max }
    }

    /// Held now, and the most kept.
    pub fn counts(&self) -> (usize, usize) {
        (self.list.len(), self.max)
    }

    /// Drops the checkpoints past `len` and gives the newest left, if any: where a rollback
    /// to `len` restarts.
    pub fn back_to(&mut self, len: usize) -> Option<&Checkpoint<S>> {
        self.list.retain(|c| c.position <= len);
        self.list.last()
    }

    /// The checkpoint at exactly `len` if it kept logits, with those after it dropped: a
    /// rollback that needs no replay. Nothing changes when there is none.
    pub fn with_logits_at(&mut self, len: usize) -> Option<&Checkpoint<S>> {
        let at = self.list.iter().position(|c| c.position == len && !c.logits.is_empty())?;
        self.list.truncate(at + 1);
        self.list.last()
    }

    /// Whether [`CHECKPOINT_INTERVAL`] positions have passed since the last checkpoint.
    pub fn due(&self, len: usize) -> bool {
        len >= self.list.last().map_or(0, |c| c.position) + CHECKPOINT_INTERVAL
    }

    /// Gives logits to a checkpoint at `position` that has none (the GPU's logits arrive
    /// after its checkpoint was taken).
    pub fn attach_logits(&mut self, position: usize, logits: &[f32]) -> Result<(), ModelError> {
        match self.list.last_mut().filter(|c| c.position == position && c.logits.is_empty()) {
            Some(last) if !logits.is_empty() => last.logits = copy_of(logits)?,
            _ => {}
        }
        Ok(())
    }

    /// Saves the state at `position` with `logits` (the last token's, or none), unless it is
    /// saved already. `copy` fills a state: the evicted one's, reused, when the checkpoints
    /// are all taken (the one whose loss costs least goes: the one closest to its predecessor,
    /// the oldest among equals, never the newest), else a new one. Nothing changes on failure.
    pub fn save(
        &mut self,
        position: usize,
        logits: &[f32],
        copy: impl FnOnce(Option<S>) -> Result<S, ModelError>,
    ) -> Result<(), ModelError> {
        if self.max == 0 || position == 0 {
            return Ok(());
        }
        if self.list.last().is_some_and(|c| c.position == position) {
            return self.attach_logits(position, logits);
        }
        let logits = copy_of(logits)?;
        let state = if self.list.len() >= self.max {
            let evicted = self.cheapest();
            copy(Some(self.list.remove(evicted).state))?
        } else {
            copy(None)?
        };
        self.list.push(Checkpoint { position, state, logits });
        Ok(())
    }

    fn cheapest(&self) -> usize {
        let keep_newest = self.list.len() - 1;
        (0..keep_newest)
            .min_by_key(|&i| {
                let before = if i == 0 { 0 } else { self.list[i - 1].position };
                self.list[i].position - before
            })
            .unwrap_or(0)
    }

    /// Bytes of logits the checkpoints hold.
    pub fn logits_bytes(&self) -> usize {
        self.list.iter().map(|c| c.logits.len() * std::mem::size_of::<f32>()).sum()
    }
}

impl Cache {
    pub fn new(config: &Config, capacity: usize, types: KvTypes) -> Result<Cache, ModelError> {
        if capacity == 0 || capacity > config.context_length {
            return Err(ModelError::BadContextSize { requested: capacity, maximum: config.context_length });
        }
        check_types(config, types)?;
        let too_big = ModelError::OutOfMemory { what: "KV cache", bytes: usize::MAX };
        let mut kv_slot: Vec<Option<KvSlot>> = Vec::with_capacity(config.n_layer);
        let mut elements = 0usize;
        for l in 0..config.n_layer {
            let slot = if config.is_recurrent(l) {
                None
            } else if config.keeps_kv(l) {
                let kv_dim = config.layer(l).kv_dim();
                let slot =
                    KvSlot { start: elements, kv_dim, rotations: Rotations::of_layer(config, types, l) };
                elements = capacity
                    .checked_mul(kv_dim)
                    .and_then(|n| n.checked_add(elements))
                    .ok_or_else(|| too_big.clone())?;
                Some(slot)
            } else {
                kv_slot[config.layer(l).kv_from]
            };
            kv_slot.push(slot);
        }
        let mut recurrent_layers = 0;
        let state_slot = (0..config.n_layer)
            .map(|l| {
                config.is_recurrent(l).then(|| {
                    recurrent_layers += 1;
                    recurrent_layers - 1
                })
            })
            .collect();
        let recurrent = RecurrentState::zeroed(config, recurrent_layers)?;
        let checkpoints = Checkpoints::new(recurrent.bytes());
        Ok(Cache {
            capacity,
            kv_slot,
            keys: KvStore::zeroed(types.keys, elements, "KV cache (keys)")?,
            values: KvStore::zeroed(types.values, elements, "KV cache (values)")?,
            types,
            len: 0,
            state_slot,
            recurrent,
            checkpoints,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes held by keys, values and the current recurrent state (checkpoints apart).
    pub fn bytes(&self) -> usize {
        self.keys.bytes() + self.values.bytes() + self.recurrent.bytes()
    }

    /// How keys and values are kept.
    pub fn types(&self) -> KvTypes {
        self.types
    }

    /// Whether some layers keep a recurrent state (rolling back then costs a replay).
    pub fn is_recurrent(&self) -> bool {
        self.recurrent.bytes() > 0
    }

    /// Bytes of one checkpoint (0 without recurrent layers).
    pub fn checkpoint_bytes(&self) -> usize {
        self.recurrent.bytes()
    }

    /// Checkpoints held now, and the most that are kept.
    pub fn checkpoints(&self) -> (usize, usize) {
        self.checkpoints.counts()
    }

    /// Forgets positions `len..`. Keys and values just shorten; a recurrent state goes back to
    /// the newest checkpoint at or before `len` (or to the start). Returns the length kept:
    /// the caller replays the tokens from there to `len`.
    pub fn truncate(&mut self, len: usize) -> usize {
        if len >= self.len {
            return self.len;
        }
        if !self.is_recurrent() {
            self.len = len;
            return len;
        }
        self.restore(len)
    }

    /// After a forward pass that failed midway: keys and values past `len` are ignored
    /// anyway, but a recurrent state may hold part of the failed batch, so it goes back to a
    /// checkpoint. Returns the length kept, as [`Cache::truncate`].
    pub fn discard_partial(&mut self) -> usize {
        if self.is_recurrent() { self.restore(self.len) } else { self.len }
    }

    fn restore(&mut self, len: usize) -> usize {
        match self.checkpoints.back_to(len) {
            Some(checkpoint) => {
                self.recurrent.copy_from(&checkpoint.state);
                self.len = checkpoint.position;
            }
            None => {
                self.recurrent.conv.fill(0.0);
                self.recurrent.ssm.fill(0.0);
                self.len = 0;
            }
        }
        self.len
    }

    /// Saves the recurrent state at the current length, with `logits` (the last token's, or
    /// none), unless there is nothing to save or it is saved already ([`Checkpoints::save`]).
    /// Fails only when memory for a new one cannot be had; the cache is unchanged then.
    pub fn checkpoint(&mut self, logits: &[f32]) -> Result<(), ModelError> {
        let current = &self.recurrent;
        self.checkpoints.save(self.len, logits, |reused| {
            let mut state = match reused {
                Some(state) => state,
                None => RecurrentState {
                    conv: try_zeroed("recurrent checkpoint", current.conv.len())?,
                    ssm: try_zeroed("recurrent checkpoint", current.ssm.len())?,
                    ..*current
                },
            };
            state.copy_from(current);
            Ok(state)
        })
    }

    /// Saves a checkpoint (without logits) if [`CHECKPOINT_INTERVAL`] positions have passed
    /// since the last.
    pub fn checkpoint_if_due(&mut self) -> Result<(), ModelError> {
        if self.checkpoints.due(self.len) { self.checkpoint(&[]) } else { Ok(()) }
    }

    /// Goes back to the checkpoint at exactly `len` if it kept logits, and returns them: a
    /// rollback that needs no replay at all. `None` (and nothing changed) otherwise.
    pub fn restore_with_logits(&mut self, len: usize) -> Option<&[f32]> {
        if len > self.len {
            return None;
        }
        let checkpoint = self.checkpoints.with_logits_at(len)?;
        self.recurrent.copy_from(&checkpoint.state);
        self.len = len;
        Some(&checkpoint.logits)
    }

    /// Bytes of logits the checkpoints hold.
    pub fn checkpoint_logits_bytes(&self) -> usize {
        self.checkpoints.logits_bytes()
    }

    /// Checks that `n` more positions fit.
    pub fn check_room(&self, n: usize) -> Result<(), ModelError> {
        let needed = self.len.saturating_add(n);
        if needed > self.capacity {
            return Err(ModelError::ContextFull { needed, capacity: self.capacity });
        }
        Ok(())
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        debug_assert!(len <= self.capacity);
        self.len = len;
    }

    fn kv_slot(&self, layer: usize) -> KvSlot {
        self.kv_slot[layer].expect("keys and values are kept for attention layers only")
    }

    /// Stores rows of keys and values (each the layer's `kv_dim` long) for positions `start..`.
    pub(crate) fn store(&mut self, layer: usize, start: usize, keys: &[f32], values: &[f32]) {
        let slot = self.kv_slot(layer);
        let begin = slot.start + start * slot.kv_dim;
        self.keys.store(begin, keys);
        self.values.store(begin, values);
    }

    /// The turns `layer`'s queries, keys and values take around its cache ([`Rotations`]).
    pub(crate) fn rotations(&self, layer: usize) -> Rotations {
        self.kv_slot(layer).rotations
    }

    /// Keys and values of `layer` (the layer it shares them with, if so) for positions
    /// `0..len` (`len * kv_dim` values each).
    pub(crate) fn layer(&self, layer: usize, len: usize) -> (KvRows<'_>, KvRows<'_>) {
        let slot = self.kv_slot(layer);
        let begin = slot.start;
        let end = begin + len * slot.kv_dim;
        (self.keys.rows(begin, end), self.values.rows(begin, end))
    }

    /// Recurrent layer `layer`'s convolution and delta-rule state.
    pub(crate) fn recurrent_layer(&mut self, layer: usize) -> (&mut [f32], &mut [f32]) {
        let slot = self.state_slot[layer].expect("recurrent state is kept for recurrent layers only");
        self.recurrent.layer_mut(slot)
    }
}

fn copy_of(values: &[f32]) -> Result<Vec<f32>, ModelError> {
    let mut copy = Vec::new();
    copy.try_reserve_exact(values.len())
        .map_err(|_| ModelError::OutOfMemory { what: "checkpoint logits", bytes: values.len() * 4 })?;
    copy.extend_from_slice(values);
    Ok(copy)
}
