//! One kernel at a time, for checking: inputs uploaded, the kernel run, its output read back.
//! The tests (here, `tests/gpu.rs` and the browser's `tests/web/gpu.rs`) hold each kernel to
//! its CPU twin this way; the forward pass (`backend.rs`) records the same kernels into one
//! command buffer per batch and keeps everything on the device.

use super::*;

impl Gpu {
    /// Waits for `signal` (set by a callback of this device's): natively the device is polled
    /// until its queue is done, which runs the callbacks; in the browser its event loop does.
    pub(super) async fn settle(&self, signal: Signal) -> Result<(), GpuError> {
        #[cfg(not(target_family = "wasm"))]
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| GpuError::Failed(e.to_string()))?;
        let result = signal.await;
        self.fault().map_or(result, Err)
    }

    /// `y = W · x` for a `rows × cols` matrix of `weight_type` stored as `bytes` (the file's
    /// blocks, row after row), and `x` one or more input rows of `cols` (then `y` holds as
    /// many rows of `rows`). Uploads, runs and reads back in one go: a check of the kernels
    /// against the CPU's; the forward pass will keep weights and activations on the device.
    pub async fn matvec(
        &self,
        weight_type: WeightType,
        bytes: &[u8],
        rows: usize,
        cols: usize,
        x: &[f32],
    ) -> Result<Vec<f32>, GpuError> {
        self.matmul_kernel(weight_type, 1, true)?;
        let row_bytes = weight_type.row_bytes(cols).map_err(|e| GpuError::Shape(e.to_string()))?;
        if x.is_empty() || !x.len().is_multiple_of(cols) || rows.checked_mul(row_bytes) != Some(bytes.len()) {
            return Err(GpuError::Shape(format!(
                "{rows} × {cols} {weight_type:?} needs {rows} rows of {row_bytes} bytes and {cols} inputs, got {} bytes and {}",
                bytes.len(),
                x.len()
            )));
        }
        if rows == 0 {
            return Ok(Vec::new());
        }
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().div_ceil(4) * 4, 0);
        let batch = x.len() / cols;
        let kernel = self.matmul_kernel(weight_type, batch, true)?;
        let groups = kernel.groups(rows);
        let x = if kernel.q8 { self.q8_inputs(x, weight_type).await? } else { f32_bytes(x) };
        let mut params = [0; 13];
        params[..7].copy_from_slice(&[
            rows as u32,
            cols as u32,
            row_bytes as u32,
            groups[0],
            rows as u32,
            0,
            batch as u32,
        ]);
        self.run(&kernel.pipeline, &[&padded, &x], &vec![0.0; rows * batch], &params, groups).await
    }

    /// `x` quantized to 8 bits by [`shaders::quantize_q8`] for a product with `weight_type`
    /// (rows of whole blocks of its [`shaders::q8_format`]), as the forward pass quantizes a
    /// product's inputs where [`Gpu::integer_dots`] is on: 48 bytes a record of 32 values (its
    /// quants, then its scale and its scale times their sum as f32, then 8 bytes of padding).
    pub async fn q8_inputs(&self, x: &[f32], weight_type: WeightType) -> Result<Vec<u8>, GpuError> {
        let format = shaders::q8_format(weight_type);
        let block_len = shaders::q8_block_len(format);
        if !x.len().is_multiple_of(block_len) {
            return Err(GpuError::Shape(format!("{} inputs are not whole blocks of {block_len}", x.len())));
        }
        let blocks = (x.len() / block_len) as u32;
        let [groups_x, groups_y] = groups_2d(blocks.div_ceil(64));
        let out = vec![0.0; shaders::q8_bytes(x.len()) / 4];
        let params = [blocks, groups_x, format, 0];
        let words =
            self.run(&self.quantize_q8, &[&f32_bytes(x)], &out, &params, [groups_x, groups_y, 1]).await?;
        Ok(words.iter().flat_map(|w| w.to_bits().to_le_bytes()).collect())
    }

    /// `act(W_gate · x) ⊙ (W_up · x)` for one input row through the fused decode kernel
    /// ([`shaders::gated_matvec`]), the two `rows × cols` matrices of `weight_type` as `gate`
    /// and `up` (as in [`Gpu::matvec`]); `activation` SwiGLU or GeGLU.
    pub async fn gated_matvec(
        &self,
        weight_type: WeightType,
        (gate, up): (&[u8], &[u8]),
        rows: usize,
        cols: usize,
        x: &[f32],
        activation: Activation,
    ) -> Result<Vec<f32>, GpuError> {
        let row_bytes = weight_type.row_bytes(cols).map_err(|e| GpuError::Shape(e.to_string()))?;
        let fits = |bytes: &[u8]| rows.checked_mul(row_bytes) == Some(bytes.len());
        if x.len() != cols || rows == 0 || !fits(gate) || !fits(up) {
            return Err(GpuError::Shape(format!(
                "{rows} × {cols} {weight_type:?} gate and up need {rows} rows of {row_bytes} bytes each and {cols} inputs"
            )));
        }
        let (pipeline, q8) = self
            .gated_matvec_pipeline(weight_type, activation)
            .ok_or(GpuError::Refused("a fused gated kernel for this activation"))?;
        let x = if q8 { self.q8_inputs(x, weight_type).await? } else { f32_bytes(x) };
        let padded = |bytes: &[u8]| {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().div_ceil(4) * 4, 0);
            padded
        };
        let [x_groups, y_groups] = groups_2d((rows as u32).div_ceil(shaders::ROWS_PER_GROUP));
        let params =
            [rows as u32, cols as u32, row_bytes as u32, x_groups, rows as u32, 0, 1, 0, 0, 0, 0, 0, 0];
        let inputs: [&[u8]; 3] = [&padded(gate), &x, &padded(up)];
        self.run(pipeline, &inputs, &vec![0.0; rows], &params, [x_groups, y_groups, 1]).await
    }

    /// Three products of one input row through the fused decode kernel
    /// ([`shaders::qkv_matvec`]): `matrices` (bytes and rows each, as in [`Gpu::matvec`]), `cols`
    /// wide, the first two of `qk_type` and the third of `v_type`.
    pub async fn qkv_matvec(
        &self,
        (qk_type, v_type): (WeightType, WeightType),
        matrices: [(&[u8], usize); 3],
        cols: usize,
        x: &[f32],
    ) -> Result<Vec<Vec<f32>>, GpuError> {
        let row_bytes = |t: WeightType| t.row_bytes(cols).map_err(|e| GpuError::Shape(e.to_string()));
        let (qk_bytes, v_bytes) = (row_bytes(qk_type)?, row_bytes(v_type)?);
        let fits = |(bytes, rows): (&[u8], usize), row_bytes: usize| {
            rows > 0 && rows.checked_mul(row_bytes) == Some(bytes.len())
        };
        let [q, k, v] = matrices;
        if x.len() != cols || !fits(q, qk_bytes) || !fits(k, qk_bytes) || !fits(v, v_bytes) {
            return Err(GpuError::Shape(format!(
                "{qk_type:?}, {qk_type:?} and {v_type:?} matrices of {cols} columns need rows of {qk_bytes}, {qk_bytes} and {v_bytes} bytes and {cols} inputs"
            )));
        }
        let (pipeline, q8) = self
            .qkv_matvec_pipeline(qk_type, v_type)
            .ok_or(GpuError::Refused("a fused kernel for these types"))?;
        let x = if q8 { self.q8_inputs(x, qk_type).await? } else { f32_bytes(x) };
        let padded = |bytes: &[u8]| {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().div_ceil(4) * 4, 0);
            padded
        };
        let [(q, q_rows), (k, k_rows), (v, v_rows)] = matrices;
        let rows = q_rows + k_rows + v_rows;
        let [x_groups, y_groups] = groups_2d((rows as u32).div_ceil(shaders::ROWS_PER_GROUP));
        let mut params = [0; 16];
        params[..7].copy_from_slice(&[
            rows as u32,
            cols as u32,
            qk_bytes as u32,
            x_groups,
            rows as u32,
            0,
            1,
        ]);
        params[13] = q_rows as u32;
        params[14] = (q_rows + k_rows) as u32;
        params[15] = v_bytes as u32;
        let inputs: [&[u8]; 4] = [&padded(q), &x, &padded(k), &padded(v)];
        let zeros = [vec![0.0; q_rows], vec![0.0; k_rows], vec![0.0; v_rows]];
        let outputs: [&[f32]; 3] = [&zeros[0], &zeros[1], &zeros[2]];
        self.run_many(&pipeline, &inputs, &outputs, &params, [x_groups, y_groups, 1]).await
    }

    /// Each token's experts and weights from the router's `scores` (rows of `shape.count`),
    /// as `model::experts::route`: `shape.used` (expert, weight) pairs per token, best first.
    pub async fn route(
        &self,
        shape: &crate::model::Experts,
        scores: &[f32],
        biases: crate::model::experts::RouterBiases<'_>,
    ) -> Result<Vec<(u32, f32)>, GpuError> {
        let (count, used) = (shape.count, shape.used);
        let fits = |bias: Option<&[f32]>| bias.is_none_or(|b| b.len() == count);
        if count == 0
            || used == 0
            || used > count
            || !scores.len().is_multiple_of(count)
            || !fits(biases.scores)
            || !fits(biases.selection)
        {
            return Err(GpuError::Shape(format!(
                "{} scores to route {used} of {count} experts",
                scores.len()
            )));
        }
        let n = scores.len() / count;
        let [groups_x, groups_y] = groups_2d((n as u32).div_ceil(64));
        let params = [
            n as u32,
            count as u32,
            used as u32,
            groups_x,
            gating_code(shape.gating),
            u32::from(shape.normalize),
            u32::from(biases.scores.is_some()),
            u32::from(biases.selection.is_some()),
        ];
        let inputs: [&[u8]; 2] =
            [&f32_bytes(biases.scores.unwrap_or(&[0.0])), &f32_bytes(biases.selection.unwrap_or(&[0.0]))];
        let zeros = vec![0.0; n * used];
        let outputs: [&[f32]; 3] = [scores, &zeros, &zeros];
        let out = self.run_many(&self.route, &inputs, &outputs, &params, [groups_x, groups_y, 1]).await?;
        Ok(out[1].iter().map(|id| id.to_bits()).zip(out[2].iter().copied()).collect())
    }

    /// `out` ← RMSNorm of each `width` values of `x`, times `weight` (`width` long).
    pub async fn rms_norm(&self, x: &[f32], weight: &[f32], eps: f32) -> Result<Vec<f32>, GpuError> {
        let width = weight.len();
        if width == 0 || !x.len().is_multiple_of(width) {
            return Err(GpuError::Shape(format!("{} values are not rows of {width}", x.len())));
        }
        let rows = (x.len() / width) as u32;
        let [groups_x, groups_y] = groups_2d(rows);
        let params = [rows, width as u32, eps.to_bits(), groups_x, 1, width as u32];
        let groups = [groups_x, groups_y, 1];
        let inputs: [&[u8]; 2] = [&f32_bytes(x), &f32_bytes(weight)];
        self.run(&self.rms_norm, &inputs, &vec![0.0; x.len()], &params, groups).await
    }

    /// [`Gpu::rms_norm`] through the kernel that also stores its rows quantized to 8 bits (a
    /// decode step's norm before products over 8-bit inputs): the rows and their blocks for a
    /// product with `weight_type` (as [`Gpu::q8_inputs`] gives them).
    pub async fn rms_norm_q8(
        &self,
        x: &[f32],
        weight: &[f32],
        eps: f32,
        weight_type: WeightType,
    ) -> Result<(Vec<f32>, Vec<u8>), GpuError> {
        let (width, format) = (weight.len(), shaders::q8_format(weight_type));
        let block_len = shaders::q8_block_len(format);
        if width == 0 || !width.is_multiple_of(block_len) || !x.len().is_multiple_of(width) {
            return Err(GpuError::Shape(format!(
                "{} values are not rows of {width}, a multiple of {block_len}",
                x.len()
            )));
        }
        let rows = (x.len() / width) as u32;
        let [groups_x, groups_y] = groups_2d(rows);
        let params = [rows, width as u32, eps.to_bits(), groups_x, 1, width as u32, 0, format];
        let inputs: [&[u8]; 2] = [&f32_bytes(x), &f32_bytes(weight)];
        let outputs: [&[f32]; 2] = [&vec![0.0; x.len()], &vec![0.0; shaders::q8_bytes(x.len()) / 4]];
        let mut out =
            self.run_many(&self.rms_norm_q8, &inputs, &outputs, &params, [groups_x, groups_y, 1]).await?;
        let words = out.pop().expect("two outputs");
        Ok((out.pop().expect("two outputs"), words.iter().flat_map(|w| w.to_bits().to_le_bytes()).collect()))
    }

    /// `x + y`.
    pub async fn add(&self, x: &[f32], y: &[f32]) -> Result<Vec<f32>, GpuError> {
        self.elementwise(&self.add, x, y).await
    }

    /// `silu(gate) · up`.
    pub async fn swiglu(&self, gate: &[f32], up: &[f32]) -> Result<Vec<f32>, GpuError> {
        self.elementwise(&self.swiglu, gate, up).await
    }

    /// `gelu(gate) · up` (tanh approximation).
    pub async fn geglu(&self, gate: &[f32], up: &[f32]) -> Result<Vec<f32>, GpuError> {
        self.elementwise(&self.geglu, gate, up).await
    }

    /// RoPE on `x`, rows of `heads × head_dim` at positions `start..`, with per-pair frequency
    /// divisors `factors` where the model has them.
    pub async fn rope(
        &self,
        x: &[f32],
        rope: RopeParams,
        factors: Option<&[f32]>,
    ) -> Result<Vec<f32>, GpuError> {
        let RopeParams { heads, head_dim, rope_dims, .. } = rope;
        let row = heads * head_dim;
        if row == 0 || !x.len().is_multiple_of(row) || rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(GpuError::Shape(format!(
                "{} values are not rows of {heads} heads of {head_dim}",
                x.len()
            )));
        }
        if factors.is_some_and(|f| f.len() < rope_dims / 2) {
            return Err(GpuError::Shape(format!("fewer frequency factors than {} pairs", rope_dims / 2)));
        }
        let rows = x.len() / row;
        let threads = (rows * heads * (rope_dims / 2)) as u32;
        let [groups_x, groups_y] = groups_2d(threads.div_ceil(ELEMENTWISE_WORKGROUP));
        let groups = [groups_x, groups_y, 1];
        let params = rope_params(&rope, rows, factors.is_some(), groups_x);
        let factors = f32_bytes(factors.unwrap_or(&[1.0]));
        self.run(&self.rope, &[&factors], x, &params, groups).await
    }

    /// Query and key heads readied in one dispatch ([`shaders::qk_heads`]): `q` in rows of
    /// `heads` heads and `k` of `k_heads`, `head_dim` wide, each head normalized with `q_norm`
    /// or `k_norm` (`head_dim` weights) where given, then rotated where `rope` is given (its
    /// `heads` and `head_dim` are these), with its factors. With values `v` (rows like `k`'s),
    /// the keys and values are also stored, as the cache's f16 words from `first_out`, into
    /// caches of `cache_words` words: those are returned after `q` and `k` (as the words'
    /// bits), else two empty ones.
    #[allow(clippy::too_many_arguments)]
    pub async fn qk_heads(
        &self,
        (q, k, v): (&[f32], &[f32], Option<&[f32]>),
        (heads, k_heads, head_dim): (usize, usize, usize),
        (q_norm, k_norm): (Option<&[f32]>, Option<&[f32]>),
        eps: f32,
        rope: Option<RopeParams>,
        factors: Option<&[f32]>,
        (first_out, cache_words): (usize, usize),
    ) -> Result<[Vec<f32>; 4], GpuError> {
        let rows = q.len() / (heads * head_dim).max(1);
        let fits = |w: Option<&[f32]>| w.is_none_or(|w| w.len() == head_dim);
        let key_words = rows * k_heads * head_dim / 2;
        if head_dim == 0
            || head_dim % 2 != 0
            || q.len() != rows * heads * head_dim
            || k.len() != rows * k_heads * head_dim
            || v.is_some_and(|v| v.len() != k.len() || first_out + key_words > cache_words)
            || !fits(q_norm)
            || !fits(k_norm)
            || rope.is_some_and(|r| r.rope_dims > head_dim || r.rope_dims % 2 != 0)
        {
            return Err(GpuError::Shape(format!(
                "{} and {} values are not rows of {heads} and {k_heads} heads of {head_dim}",
                q.len(),
                k.len()
            )));
        }
        let store = v.is_some();
        let items = rows * (heads + k_heads + if store { k_heads } else { 0 });
        let [groups_x, groups_y] = groups_2d(items as u32);
        let rope = RopeParams { heads, head_dim, ..rope.unwrap_or(RopeParams::none(heads, head_dim)) };
        let mut params = rope_params(&rope, rows, factors.is_some(), groups_x).to_vec();
        params.extend([
            k_heads as u32,
            eps.to_bits(),
            u32::from(q_norm.is_some()),
            u32::from(k_norm.is_some()),
            u32::from(store),
            first_out as u32,
        ]);
        let inputs: [&[u8]; 4] = [
            &f32_bytes(factors.unwrap_or(&[1.0])),
            &f32_bytes(q_norm.unwrap_or(&[1.0])),
            &f32_bytes(k_norm.unwrap_or(&[1.0])),
            &f32_bytes(v.unwrap_or(&[0.0])),
        ];
        let cache = vec![0.0; if store { cache_words } else { 1 }];
        let outputs: [&[f32]; 4] = [q, k, &cache, &cache];
        let pipeline = self
            .qk_heads
            .as_ref()
            .ok_or(GpuError::Refused("fused heads on an adapter binding fewer than 8 buffers"))?;
        let out = self.run_many(pipeline, &inputs, &outputs, &params, [groups_x, groups_y, 1]).await?;
        let [q, k, keys, values]: [Vec<f32>; 4] =
            out.try_into().map_err(|_| GpuError::Failed("four outputs expected".into()))?;
        Ok(if store { [q, k, keys, values] } else { [q, k, Vec::new(), Vec::new()] })
    }

    /// Causal attention of `q` (rows of `n_head × head_dim`, at positions `start..`) over the
    /// keys `k` and values `v` of positions `0..start + rows` (rows of `n_kv × head_dim`, kept
    /// in f16 as the cache keeps them), with a sink per head where `sinks` are given.
    pub async fn attention(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        sinks: Option<&[f32]>,
        a: AttentionParams,
    ) -> Result<Vec<f32>, GpuError> {
        let q_row = a.n_head * a.head_dim;
        let kv_row = a.n_kv * a.head_dim;
        let fits = q_row > 0
            && kv_row > 0
            && a.n_head.is_multiple_of(a.n_kv)
            && a.head_dim <= MAX_ATTENTION_HEAD
            && a.head_dim.is_multiple_of(2)
            && q.len().is_multiple_of(q_row);
        let queries = if fits { q.len() / q_row } else { 0 };
        if !fits
            || queries == 0
            || k.len() != (a.start + queries) * kv_row
            || v.len() != k.len()
            || sinks.is_some_and(|sinks| sinks.len() != a.n_head)
        {
            return Err(GpuError::Shape(format!(
                "{} query values, {} keys and {} values for {} heads of {} over {} KV heads from position {}",
                q.len(),
                k.len(),
                v.len(),
                a.n_head,
                a.head_dim,
                a.n_kv,
                a.start
            )));
        }
        let plan = self.attention_plan(queries, &a, sinks.is_some(), true);
        let sinks = f32_bytes(sinks.unwrap_or(&[0.0]));
        let f16_bytes = |values: &[f32]| -> Vec<u8> {
            values.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect()
        };
        let inputs: [&[u8]; 5] = [&f32_bytes(q), &f16_bytes(k), &f16_bytes(v), &sinks, &u32_bytes(&[0, 0])];
        let (pipeline, params, groups) = plan.main;
        match plan.merge {
            None => self.run(pipeline, &inputs, &vec![0.0; q.len()], &params, groups).await,
            Some((merge, merge_params, merge_groups)) => {
                let splits = params[12] as usize;
                let parts = vec![0.0; queries * a.n_head * (a.head_dim + 2) * splits];
                let parts = self.run(pipeline, &inputs, &parts, &params, groups).await?;
                let inputs: [&[u8]; 2] = [&f32_bytes(&parts), &sinks];
                self.run(merge, &inputs, &vec![0.0; q.len()], &merge_params, merge_groups).await
            }
        }
    }

    /// DeltaNet's gates: `alpha` (rows of `a.len()` value heads) to log-decays, `beta` through
    /// a sigmoid, as `model::delta_net::gates`.
    pub async fn delta_gates(
        &self,
        dt_bias: &[f32],
        a: &[f32],
        alpha: &[f32],
        beta: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>), GpuError> {
        let heads = a.len();
        if heads == 0
            || dt_bias.len() != heads
            || !alpha.len().is_multiple_of(heads)
            || beta.len() != alpha.len()
        {
            return Err(GpuError::Shape(format!("{} gates for {heads} heads", alpha.len())));
        }
        let [groups_x, groups_y] = groups_2d((alpha.len() as u32).div_ceil(ELEMENTWISE_WORKGROUP));
        let params = [alpha.len() as u32, heads as u32, 0, groups_x];
        let rates = f32_bytes(&[dt_bias, a].concat());
        let mut out = self
            .run_many(&self.delta_gates, &[&rates], &[alpha, beta], &params, [groups_x, groups_y, 1])
            .await?;
        let beta = out.pop().unwrap_or_default();
        Ok((out.pop().unwrap_or_default(), beta))
    }

    /// DeltaNet's convolution of `x` (rows of `shape.conv_dim()`) after `state`, as
    /// `model::delta_net::causal_conv_silu`: the outputs and the state after them.
    pub async fn causal_conv(
        &self,
        shape: &DeltaNet,
        state: &[f32],
        taps: &[f32],
        x: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>), GpuError> {
        let channels = shape.conv_dim();
        if channels == 0
            || shape.conv_kernel == 0
            || state.len() != shape.conv_state_len()
            || taps.len() != channels * shape.conv_kernel
            || !x.len().is_multiple_of(channels)
        {
            return Err(GpuError::Shape(format!("{} inputs for a convolution of {shape:?}", x.len())));
        }
        let [groups_x, groups_y] = groups_2d((channels as u32).div_ceil(ELEMENTWISE_WORKGROUP));
        let params = [(x.len() / channels) as u32, channels as u32, shape.conv_kernel as u32, groups_x];
        let inputs: [&[u8]; 2] = [&f32_bytes(taps), &f32_bytes(x)];
        let outputs = [state, &vec![0.0; x.len()]];
        let mut out =
            self.run_many(&self.delta_conv, &inputs, &outputs, &params, [groups_x, groups_y, 1]).await?;
        let convolved = out.pop().unwrap_or_default();
        Ok((convolved, out.pop().unwrap_or_default()))
    }

    /// The gated delta rule over the tokens of `inputs` from `state` (the CPU's layout: per
    /// value head, one row per value dimension), as `model::delta_net::delta_rule`: the outputs
    /// (rows of `shape.value_dim()`) and the state after them, in the same layout.
    pub async fn delta_rule(
        &self,
        shape: &DeltaNet,
        inputs: &DeltaInputs<'_>,
        state: &[f32],
    ) -> Result<(Vec<f32>, Vec<f32>), GpuError> {
        let (d, heads) = (shape.head_dim, shape.v_heads);
        let n = inputs.g.len() / heads.max(1);
        if d == 0
            || d > shaders::MAX_DELTA_HEAD
            || shape.k_heads == 0
            || state.len() != shape.ssm_state_len()
            || inputs.beta.len() != inputs.g.len()
            || inputs.qkv.len() != n * shape.conv_dim()
        {
            return Err(GpuError::Shape(format!("{n} tokens for a delta rule of {shape:?}")));
        }
        let params = [n as u32, shape.k_heads as u32, heads as u32, d as u32];
        let inputs: [&[u8]; 3] = [&f32_bytes(inputs.qkv), &f32_bytes(inputs.g), &f32_bytes(inputs.beta)];
        let state = transpose_heads(state, d);
        let outputs = [&state[..], &vec![0.0; n * shape.value_dim()]];
        let mut out =
            self.run_many(&self.delta_rule, &inputs, &outputs, &params, [heads as u32, 1, 1]).await?;
        let values = out.pop().unwrap_or_default();
        Ok((values, transpose_heads(&out.pop().unwrap_or_default(), d)))
    }

    /// `f(x, y)` element by element: `x` is updated in place on the device.
    async fn elementwise(
        &self,
        pipeline: &wgpu::ComputePipeline,
        x: &[f32],
        y: &[f32],
    ) -> Result<Vec<f32>, GpuError> {
        if x.len() != y.len() {
            return Err(GpuError::Shape(format!("{} and {} values", x.len(), y.len())));
        }
        let [groups_x, groups_y] = groups_2d((x.len() as u32).div_ceil(ELEMENTWISE_WORKGROUP));
        let params = [x.len() as u32, groups_x, 0, 0, 0, 0, 0, 0];
        let groups = [groups_x, groups_y, 1];
        self.run(pipeline, &[&f32_bytes(y)], x, &params, groups).await
    }

    /// [`Gpu::run_many`] with one output.
    async fn run(
        &self,
        pipeline: &wgpu::ComputePipeline,
        inputs: &[&[u8]],
        output: &[f32],
        params: &[u32],
        groups: [u32; 3],
    ) -> Result<Vec<f32>, GpuError> {
        let mut outputs = self.run_many(pipeline, inputs, &[output], params, groups).await?;
        Ok(outputs.remove(0))
    }

    /// One dispatch of `pipeline` over bindings `inputs...` (read-only), then the outputs (their
    /// initial contents `outputs`), then the uniform `params`; the outputs read back. The
    /// forward pass encodes many dispatches per submit over buffers that stay on the device;
    /// this serves the kernels' checks.
    async fn run_many(
        &self,
        pipeline: &wgpu::ComputePipeline,
        inputs: &[&[u8]],
        outputs: &[&[f32]],
        params: &[u32],
        groups: [u32; 3],
    ) -> Result<Vec<Vec<f32>>, GpuError> {
        let storage = |_label: &str, contents: &[u8], usage| self.buffer_with(contents, usage);
        let mut buffers: Vec<wgpu::Buffer> = inputs
            .iter()
            .map(|bytes| {
                if bytes.len() as u64 > self.facts.max_binding {
                    return Err(GpuError::TooLarge {
                        what: "an input",
                        bytes: bytes.len() as u64,
                        limit: self.facts.max_binding,
                    });
                }
                Ok(storage("input", bytes, wgpu::BufferUsages::STORAGE))
            })
            .collect::<Result<_, _>>()?;
        for output in outputs {
            let bytes = (4 * output.len()) as u64;
            if bytes > self.facts.max_binding {
                return Err(GpuError::TooLarge { what: "an output", bytes, limit: self.facts.max_binding });
            }
            let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC;
            buffers.push(storage("output", &f32_bytes(output), usage));
        }
        let mut words = params.to_vec();
        words.resize(params.len().div_ceil(4) * 4, 0); // Uniforms come in 16-byte rows.
        buffers.push(storage("params", &u32_bytes(&words), wgpu::BufferUsages::UNIFORM));
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(binding, buffer)| wgpu::BindGroupEntry {
                binding: binding as u32,
                resource: buffer.as_entire_binding(),
            })
            .collect();
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        }
        let mut readbacks = Vec::new();
        for output in &buffers[inputs.len()..inputs.len() + outputs.len()] {
            let readback = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size: output.size(),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            encoder.copy_buffer_to_buffer(output, 0, &readback, 0, output.size());
            readbacks.push(readback);
        }
        self.queue.submit([encoder.finish()]);
        let mut values = Vec::new();
        for (readback, output) in readbacks.iter().zip(outputs) {
            self.settle(map_for_reading(readback)).await?;
            values.push(mapped_floats(readback, output.len())?);
        }
        Ok(values)
    }
}

/// Each `d × d` head of a DeltaNet state transposed: the CPU keeps one row per value
/// dimension, the GPU's kernel one per key dimension.
fn transpose_heads(state: &[f32], d: usize) -> Vec<f32> {
    let mut out = vec![0.0; state.len()];
    for (head, transposed) in state.chunks_exact(d * d).zip(out.chunks_exact_mut(d * d)) {
        for (j, row) in head.chunks_exact(d).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                transposed[i * d + j] = v;
            }
        }
    }
    out
}
