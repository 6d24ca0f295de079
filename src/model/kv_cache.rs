//! Keys and values of every processed position, stored in F16 like llama.cpp's CPU default, and
//! sized to the context a session asks for rather than the model's maximum.

use half::f16;

use super::config::Config;
use super::error::{ModelError, try_zeroed};

pub struct KvCache {
    capacity: usize,
    kv_dim: usize,
    /// `[layer][position][kv_dim]`.
    keys: Vec<f16>,
    values: Vec<f16>,
    /// Positions `0..len` hold valid entries.
    len: usize,
}

impl KvCache {
    pub fn new(config: &Config, capacity: usize) -> Result<KvCache, ModelError> {
        if capacity == 0 || capacity > config.context_length {
            return Err(ModelError::BadContextSize { requested: capacity, maximum: config.context_length });
        }
        let kv_dim = config.kv_dim();
        let elements = config
            .n_layer
            .checked_mul(capacity)
            .and_then(|n| n.checked_mul(kv_dim))
            .ok_or(ModelError::OutOfMemory { what: "KV cache", bytes: usize::MAX })?;
        Ok(KvCache {
            capacity,
            kv_dim,
            keys: try_zeroed("KV cache (keys)", elements)?,
            values: try_zeroed("KV cache (values)", elements)?,
            len: 0,
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

    /// Bytes held by keys and values together.
    pub fn bytes(&self) -> usize {
        (self.keys.len() + self.values.len()) * std::mem::size_of::<f16>()
    }

    /// Forgets positions `len..`; rolling back is free.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
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

    fn offset(&self, layer: usize, position: usize) -> usize {
        (layer * self.capacity + position) * self.kv_dim
    }

    /// Stores rows of keys and values (each `kv_dim` long) for positions `start..`.
    pub(crate) fn store(&mut self, layer: usize, start: usize, keys: &[f32], values: &[f32]) {
        let begin = self.offset(layer, start);
        let end = begin + keys.len();
        for (dst, &src) in self.keys[begin..end].iter_mut().zip(keys) {
            *dst = f16::from_f32(src);
        }
        for (dst, &src) in self.values[begin..end].iter_mut().zip(values) {
            *dst = f16::from_f32(src);
        }
    }

    /// Keys and values of `layer` for positions `0..len` (`len * kv_dim` each).
    pub(crate) fn layer(&self, layer: usize, len: usize) -> (&[f16], &[f16]) {
        let begin = self.offset(layer, 0);
        let end = begin + len * self.kv_dim;
        (&self.keys[begin..end], &self.values[begin..end])
    }
}
