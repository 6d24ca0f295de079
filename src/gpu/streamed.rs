//! A model's weights streamed straight into GPU buffers as its file arrives, for a file larger
//! than the wasm memory that receives it (a 5 GB model in a 32-bit build: Safari, which has
//! WebGPU but no Memory64).
//!
//! The header comes first and says where every tensor lies. Each matrix the forward pass
//! multiplies by, the expert stacks and the token embedding go to the device, a few rows at a
//! time, through a staging buffer of about one chunk; only the rest (the header, norms, biases,
//! small tables) is kept in memory, as a [`ModelBytes`] with those ranges marked as on the
//! device. The model then runs on that GPU only: the CPU has no copy of its weights.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use super::backend::{Slices, plan_slices};
use super::{Gpu, GpuError};
use crate::gguf::{GgmlType, GgufHeader, HeaderParse, parse_header};
use crate::model::{LoadError, Model, ModelBytes, ModelError, Weights};
use crate::tensor::{clamp_q8_0_quants, first_non_finite_f16};

/// Weights that are on the device already, by where they lie in the file (what
/// [`super::GpuState::with_weights`] starts from instead of uploading them).
pub struct DeviceWeights {
    pub(super) matrices: HashMap<usize, Slices>,
    pub(super) stacks: HashMap<usize, Slices>,
    pub(super) bytes: u64,
}

impl DeviceWeights {
    /// Bytes of weights on the device.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Why a streamed load failed.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamError {
    Load(LoadError),
    Model(ModelError),
    Gpu(GpuError),
}

impl StreamError {
    /// The machine-readable kind, as the page shows it.
    pub fn kind(&self) -> &'static str {
        match self {
            StreamError::Load(e) => e.kind(),
            StreamError::Model(e) => e.kind(),
            StreamError::Gpu(e) => e.kind(),
        }
    }
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Load(e) => e.fmt(f),
            StreamError::Model(e) => e.fmt(f),
            StreamError::Gpu(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StreamError {}

impl From<LoadError> for StreamError {
    fn from(e: LoadError) -> Self {
        StreamError::Load(e)
    }
}

impl From<ModelError> for StreamError {
    fn from(e: ModelError) -> Self {
        StreamError::Model(e)
    }
}

impl From<GpuError> for StreamError {
    fn from(e: GpuError) -> Self {
        StreamError::Gpu(e)
    }
}

/// Bytes written between two (empty) submissions: natively wgpu keeps each write's staging
/// copy until the next submission, which would otherwise hold the whole model in memory.
const SUBMIT_EVERY: usize = 64 << 20;

/// A tensor on its way to the device.
struct Planned {
    name: String,
    /// Where it lies in the file.
    range: Range<u64>,
    ggml_type: GgmlType,
    /// A slice holds whole units: a matrix's rows, a stack's experts.
    unit_bytes: usize,
    /// An expert stack (kept in [`DeviceWeights::stacks`]), else a matrix or table.
    stack: bool,
    slices: Slices,
}

/// A stretch of the file kept in memory: where it lies in the file, and where in the bytes the
/// model holds (`ModelBytes`), which leave out what went to the device.
struct Kept {
    file_start: u64,
    held_start: usize,
    bytes: Vec<u8>,
}

/// A model file arriving in order, its weights going straight to a GPU: `new(gpu, size)`, then
/// [`push`](Self::push) until every byte is in, then [`finish`](Self::finish).
///
/// Positions in the file are `u64`: the file may be larger than this memory can address (the
/// point of streaming), so the model holds its kept stretches closed up, one after another
/// (each at its file offset modulo the file's alignment), and its header's tensor offsets
/// renumbered to match; the tensors on the device get places past them, which only name
/// them.
pub struct WeightStream {
    gpu: Arc<Gpu>,
    expected: u64,
    received: u64,
    /// Bytes received before the header could be read.
    head: Vec<u8>,
    head_needed: u64,
    /// The header, once read.
    header: Option<GgufHeader>,
    /// The tensors that go to the device, in file order, once the header is read.
    plan: Vec<Planned>,
    /// The first planned tensor not yet complete.
    next: usize,
    /// The stretches kept in memory; the last is being filled.
    kept: Vec<Kept>,
    /// The current tensor's bytes from `staged_at` (relative to its start) on, not yet written;
    /// the first `checked` of them have been checked (whole blocks).
    staging: Vec<u8>,
    staged_at: usize,
    checked: usize,
    since_submit: usize,
    bytes_on_device: u64,
}

impl WeightStream {
    /// A stream for a file of `size` bytes, whose weights go to `gpu`.
    pub fn new(gpu: Arc<Gpu>, size: u64) -> Result<WeightStream, StreamError> {
        Ok(WeightStream {
            gpu,
            expected: size,
            received: 0,
            head: Vec::new(),
            head_needed: 0,
            header: None,
            plan: Vec::new(),
            next: 0,
            kept: Vec::new(),
            staging: Vec::new(),
            staged_at: 0,
            checked: 0,
            since_submit: 0,
            bytes_on_device: 0,
        })
    }

    /// The GPU the weights go to.
    pub fn gpu(&self) -> Arc<Gpu> {
        Arc::clone(&self.gpu)
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Bytes held in memory so far (the kept stretches and the staging), not on the device.
    pub fn held_bytes(&self) -> usize {
        self.head.capacity()
            + self.staging.capacity()
            + self.kept.iter().map(|kept| kept.bytes.capacity()).sum::<usize>()
    }

    /// The file's next bytes.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), StreamError> {
        if chunk.len() as u64 > self.expected - self.received {
            return Err(LoadError::TooManyBytes("more bytes than the announced file size").into());
        }
        if self.header.is_some() {
            self.route(chunk)?;
        } else {
            self.head.try_reserve(chunk.len()).map_err(|_| too_large("its header"))?;
            self.head.extend_from_slice(chunk);
            self.received += chunk.len() as u64;
            self.plan_from_head()?;
        }
        if self.since_submit >= SUBMIT_EVERY {
            self.since_submit = 0;
            self.gpu.queue.submit([]);
        }
        self.gpu.fault().map_or(Ok(()), |e| Err(e.into()))
    }

    /// The model, once every byte is in: its kept bytes, and the weights on the device.
    pub fn finish(mut self) -> Result<(Model, DeviceWeights), StreamError> {
        let header = self.header.take();
        let (Some(mut header), true) = (header, self.received == self.expected) else {
            return Err(LoadError::Incomplete { received: self.received, expected: self.expected }.into());
        };
        self.gpu.queue.submit([]);
        if let Some(fault) = self.gpu.fault() {
            return Err(fault.into());
        }
        // The tensors on the device get places past the kept bytes, a word apart: distinct
        // starts (what the device's weights are found by) with their own lengths.
        let held_end = self.kept.last().map_or(0, |kept| kept.held_start + kept.bytes.len());
        let past = u64::from(u32::MAX); // Within any build's usize.
        let mut device_starts = Vec::with_capacity(self.plan.len());
        for (i, tensor) in self.plan.iter().enumerate() {
            let start = held_end.div_ceil(32) * 32 + 32 * i;
            let end = start as u64 + (tensor.range.end - tensor.range.start);
            if end > past {
                return Err(too_large(&format!("{} (with the file's other tensors)", tensor.name)).into());
            }
            device_starts.push(start);
        }
        let data_offset = header.data_offset;
        let held_len = self
            .plan
            .iter()
            .zip(&device_starts)
            .map(|(t, &start)| start + (t.range.end - t.range.start) as usize)
            .fold(held_end, usize::max);
        // Every tensor's offset as the held bytes have it.
        for info in &mut header.tensors {
            let file_start = data_offset + info.offset;
            let held = match self.plan.binary_search_by_key(&file_start, |t| t.range.start) {
                Ok(i) => device_starts[i],
                Err(_) => self.held_offset(file_start).ok_or_else(|| ModelError::BadTensor {
                    name: info.name.clone(),
                    reason: "lies across a tensor that went to the GPU".into(),
                })?,
            };
            info.offset = held as u64 - data_offset;
        }
        header.file_size = held_len as u64;
        let on_device = self
            .plan
            .iter()
            .zip(&device_starts)
            .map(|(t, &start)| start..start + (t.range.end - t.range.start) as usize);
        let pieces = std::mem::take(&mut self.kept).into_iter().map(|kept| (kept.held_start, kept.bytes));
        let file = ModelBytes::with_ranges_on_device(pieces.collect(), on_device.collect(), held_len)
            .ok_or(LoadError::TooManyBytes("the kept pieces and the device's ranges do not fit together"))?;
        let model = Model::with_header(header, file)?;
        let mut weights =
            DeviceWeights { matrices: HashMap::new(), stacks: HashMap::new(), bytes: self.bytes_on_device };
        for (tensor, start) in std::mem::take(&mut self.plan).into_iter().zip(device_starts) {
            let map = if tensor.stack { &mut weights.stacks } else { &mut weights.matrices };
            map.insert(start, tensor.slices);
        }
        Ok((model, weights))
    }

    /// Where the file's byte `file_start` is in the held bytes, if it was kept.
    fn held_offset(&self, file_start: u64) -> Option<usize> {
        let i = self.kept.partition_point(|kept| kept.file_start <= file_start).checked_sub(1)?;
        let kept = &self.kept[i];
        let within = usize::try_from(file_start - kept.file_start).ok()?;
        (within <= kept.bytes.len()).then_some(kept.held_start + within)
    }

    /// Once the header is in: plans the tensors, makes their buffers, and routes the bytes
    /// received so far.
    fn plan_from_head(&mut self) -> Result<(), StreamError> {
        if (self.head.len() as u64) < self.head_needed {
            return Ok(());
        }
        let header = match parse_header(&self.head, self.expected).map_err(LoadError::Header)? {
            HeaderParse::NeedMore { at_least } => {
                self.head_needed = at_least;
                return Ok(());
            }
            HeaderParse::Complete(header) => header,
        };
        let mut plan = plan(&self.gpu, &header)?;
        for tensor in &mut plan {
            let bytes = usize::try_from(tensor.range.end - tensor.range.start)
                .map_err(|_| too_large(&format!("its tensor {}", tensor.name)))?;
            let mut slices = Vec::new();
            for (first, count) in plan_slices(&self.gpu, bytes, tensor.unit_bytes, "a weight row")? {
                let size = (count * tensor.unit_bytes).div_ceil(4) * 4;
                self.bytes_on_device += size as u64;
                slices.push((first, count, self.gpu.storage_buffer(size as u64)));
            }
            tensor.slices = slices;
        }
        self.plan = plan;
        self.header = Some(header);
        let head = std::mem::take(&mut self.head);
        self.received -= head.len() as u64;
        self.route(&head)
    }

    /// Sends `bytes` (the file's from `received` on) to the tensors and stretches they belong to.
    fn route(&mut self, mut bytes: &[u8]) -> Result<(), StreamError> {
        while !bytes.is_empty() {
            let at = self.received;
            // At most what is left of the tensor or stretch `at` is in (a count of bytes that
            // fits `bytes.len()`).
            let take_until = |end: u64| bytes.len().min(usize::try_from(end - at).unwrap_or(usize::MAX));
            let taken = match self.plan.get(self.next) {
                Some(tensor) if at >= tensor.range.start => {
                    let take = take_until(tensor.range.end);
                    self.stage(&bytes[..take])?;
                    take
                }
                next => {
                    let take = take_until(next.map_or(self.expected, |t| t.range.start));
                    self.keep(&bytes[..take], at)?;
                    take
                }
            };
            self.received += taken as u64;
            bytes = &bytes[taken..];
            if self.plan.get(self.next).is_some_and(|t| self.received == t.range.end) {
                self.write(true)?;
                self.next += 1;
            }
        }
        Ok(())
    }

    /// Bytes of a stretch kept in memory, from file offset `at`: a new stretch where the last
    /// one does not end there, placed after it at `at`'s offset modulo 32 (the file's blocks
    /// keep their alignment), reserved whole up to the next tensor that goes to the device.
    fn keep(&mut self, bytes: &[u8], at: u64) -> Result<(), StreamError> {
        let last = self.kept.last();
        let continues = last.is_some_and(|kept| kept.file_start + kept.bytes.len() as u64 == at);
        if !continues {
            let held_end = last.map_or(0, |kept| kept.held_start + kept.bytes.len());
            let held_start = held_end + ((at % 32) as usize + 32 - held_end % 32) % 32;
            let end = self.plan.get(self.next).map_or(self.expected, |t| t.range.start);
            let length = usize::try_from(end - at).map_err(|_| too_large("the part of it kept in memory"))?;
            let mut piece = Vec::new();
            piece.try_reserve_exact(length).map_err(|_| too_large("the part of it kept in memory"))?;
            self.kept.push(Kept { file_start: at, held_start, bytes: piece });
        }
        let kept = self.kept.last_mut().expect("a stretch was started");
        kept.bytes.extend_from_slice(bytes);
        Ok(())
    }

    /// Bytes of the current tensor, through the staging: checked and written.
    fn stage(&mut self, bytes: &[u8]) -> Result<(), StreamError> {
        self.staging.try_reserve(bytes.len()).map_err(|_| too_large("a chunk of it"))?;
        self.staging.extend_from_slice(bytes);
        // Written at once: the staging never holds more than a chunk (and a block's remainder).
        self.write(false)
    }

    /// Checks the staged whole blocks as [`Model::load`] checks a file in memory (Q8_0's quants
    /// clamped, F16's refused where not finite), then writes every staged byte it can: whole
    /// words within one slice, and at the tensor's end (`last`) the rest, padded to a word.
    fn write(&mut self, last: bool) -> Result<(), StreamError> {
        let tensor = &self.plan[self.next];
        let block = match tensor.ggml_type {
            GgmlType::Q8_0 => 34,
            GgmlType::F16 => 2,
            _ => 1,
        };
        // Blocks lie from the tensor's start; the staging starts wherever the last write ended.
        let whole = (self.staged_at + self.staging.len()) / block * block - self.staged_at;
        let unchecked = &mut self.staging[self.checked..whole];
        match tensor.ggml_type {
            GgmlType::Q8_0 => clamp_q8_0_quants(unchecked),
            GgmlType::F16 => {
                if let Some(element) = first_non_finite_f16(unchecked) {
                    let element = (self.staged_at + self.checked) / 2 + element;
                    return Err(crate::model::non_finite_f16(&tensor.name, element).into());
                }
            }
            _ => {}
        }
        self.checked = whole;
        let mut done = 0;
        while done < self.checked {
            let offset = self.staged_at + done;
            let unit = offset / tensor.unit_bytes;
            let Some((first, count, buffer)) = tensor.slices.iter().find(|(f, c, _)| unit < f + c) else {
                break;
            };
            let (slice_start, slice_end) = (first * tensor.unit_bytes, (first + count) * tensor.unit_bytes);
            let available = self.checked - done;
            let completes = available >= slice_end - offset;
            let take = if completes { slice_end - offset } else { available & !3 };
            if take == 0 {
                break;
            }
            let mut words = &self.staging[done..done + take];
            let padded;
            if take % 4 != 0 {
                padded = [words, &[0u8; 3][..4 - take % 4]].concat();
                words = &padded;
            }
            self.gpu.queue.write_buffer(buffer, (offset - slice_start) as u64, words);
            self.since_submit += take;
            done += take;
        }
        self.staging.drain(..done);
        self.staged_at += done;
        self.checked -= done;
        if last {
            if !self.staging.is_empty() {
                return Err(LoadError::TooManyBytes("a tensor's bytes did not fill whole slices").into());
            }
            self.staging = Vec::new();
            self.staged_at = 0;
            self.checked = 0;
        }
        Ok(())
    }
}

/// The tensors a model streamed to `gpu` keeps there, in file order: every matrix the forward
/// pass multiplies by (a stack of experts as one), and the token embedding where the device
/// can look its rows up. The model's checks run on the header first, so a file the GPU cannot
/// run fails before any weight is sent.
fn plan(gpu: &Gpu, header: &GgufHeader) -> Result<Vec<Planned>, StreamError> {
    if header.shards > 1 {
        return Err(GpuError::Refused("split models streamed to the GPU").into());
    }
    let config = Model::check_header(header)?;
    let weights = Weights::load(header, None, &config)?;
    super::GpuState::check_parts(gpu, &config, &weights)?;
    let mut names: Vec<(&str, usize, bool)> = Vec::new();
    let mut seen = HashSet::new();
    let embedding = gpu.looks_up(weights.token_embd.weight_type).then_some(&weights.token_embd);
    for matrix in weights.decode_matrices().chain(embedding) {
        // An expert's view is named `stack[e]`: the stack goes up whole, in slices of experts.
        let (name, stack) = match matrix.name.find('[') {
            Some(at) => (&matrix.name[..at], true),
            None => (matrix.name.as_str(), false),
        };
        let row_bytes = matrix.weight_type.row_bytes(matrix.cols).map_err(ModelError::from)?;
        let unit = if stack { matrix.rows.checked_mul(row_bytes) } else { Some(row_bytes) };
        let unit = unit.ok_or_else(|| too_large(&format!("one expert of {name}")))?;
        if seen.insert(name) {
            names.push((name, unit, stack));
        }
    }
    let mut plan = Vec::with_capacity(names.len());
    for (name, unit_bytes, stack) in names {
        let info = header.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.into()))?;
        if info.n_bytes == 0 {
            continue; // Nothing to send (and the model refuses such a matrix when it loads).
        }
        // The parser has placed every tensor inside the file.
        let start = header.data_offset + info.offset;
        let range = start..start + info.n_bytes;
        plan.push(Planned {
            name: name.into(),
            range,
            ggml_type: info.ggml_type,
            unit_bytes: unit_bytes.max(1),
            stack,
            slices: Vec::new(),
        });
    }
    plan.sort_by_key(|t| t.range.start);
    if plan.windows(2).any(|pair| pair[0].range.end > pair[1].range.start) {
        return Err(
            ModelError::BadTensor { name: "(tensor data)".into(), reason: "tensors overlap".into() }.into()
        );
    }
    Ok(plan)
}

fn too_large(what: &str) -> LoadError {
    LoadError::TooLarge(format!("{what} does not fit in this memory"))
}
