//! The GPU backend in the browser (WebGPU; SwiftShader in the tests' headless Chromium, see
//! webdriver.json), against the CPU engine in the same wasm instance, whose logits match
//! llama.cpp's goldens (tests/parity.rs): every micro file the GPU runs, a prompt in one batch
//! (12 tokens: the GEMM) and decode steps over the GPU's own cache, within the bounds of
//! tests/gpu.rs (the same comparison natively, on lavapipe). In a browser without WebGPU
//! (Firefox ESR) the request for a device must fail as `no_gpu`, not panic.

use inferno::gpu::{Gpu, GpuError, GpuState};
use inferno::model::{LogitsFor, Model};
use inferno::sampler::ReadLogits;
use wasm_bindgen_test::*;

/// How far below the CPU's best logit the GPU's pick may score on the CPU (tests/gpu.rs).
const TIE: f32 = 1.0;
const PROMPT: [u32; 12] = [1, 5, 9, 14, 3, 7, 2, 11, 4, 8, 6, 10];

/// Whether this browser has WebGPU at all (in a page or a worker). Chromium must: the tests
/// start it with SwiftShader's (webdriver.json), so a lost flag fails here, not silently.
fn has_webgpu() -> bool {
    let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).unwrap();
    let has = js_sys::Reflect::get(&navigator, &"gpu".into()).is_ok_and(|gpu| !gpu.is_undefined());
    let agent =
        js_sys::Reflect::get(&navigator, &"userAgent".into()).unwrap().as_string().unwrap_or_default();
    assert!(has || !agent.contains("Chrome/"), "Chromium without WebGPU: check webdriver.json's flags");
    has
}

fn argmax(logits: &[f32]) -> usize {
    logits.iter().enumerate().fold(0, |best, (i, &v)| if v > logits[best] { i } else { best })
}

/// The prompt and then `steps` decode steps on both backends (each fed the CPU's choice).
async fn gpu_follows_cpu(gpu: &Gpu, name: &str, bytes: &[u8], steps: usize, tolerance: f32) {
    let model = Model::load(bytes.to_vec()).unwrap();
    let capacity = PROMPT.len() + steps;
    let mut on_gpu = GpuState::new(gpu, &model, capacity, PROMPT.len()).unwrap();
    let (mut cache, mut scratch) = model.new_state(capacity, PROMPT.len(), Default::default()).unwrap();
    let mut tokens = PROMPT.to_vec();
    for step in 0..steps {
        let fed = if step == 0 { &tokens[..] } else { &tokens[tokens.len() - 1..] };
        let cpu = model.forward(&mut cache, &mut scratch, fed, LogitsFor::Last).unwrap().to_vec();
        on_gpu.submit(gpu, &model, fed, true).unwrap();
        on_gpu.pending().expect("a submission to wait for").await.unwrap();
        let Some(ReadLogits::Every(logits)) = on_gpu.collect(gpu).unwrap() else { panic!("every logit") };
        let delta = cpu.iter().zip(&logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let (best, picked) = (argmax(&cpu), argmax(&logits));
        assert!(delta <= tolerance, "{name} step {step}: max |Δlogit| {delta} > {tolerance}");
        let short = cpu[best] - cpu[picked];
        assert!(short <= TIE, "{name} step {step}: the GPU picked {picked}, {short} below the CPU's {best}");
        tokens.push(best as u32);
    }
}

#[wasm_bindgen_test]
async fn every_micro_family_the_gpu_runs_follows_the_cpu_in_the_browser() {
    if !has_webgpu() {
        return; // The next test checks what happens then.
    }
    let gpu = Gpu::request().await.expect("a WebGPU adapter (Chromium: --enable-unsafe-webgpu)");
    let files: [(&str, &[u8], f32); 15] = [
        ("smollm3 q8_0", include_bytes!("../fixtures/models/smollm3-micro-q8_0.gguf"), 0.15),
        ("qwen3 q4_0", include_bytes!("../fixtures/models/qwen3-micro-q4_0.gguf"), 0.15),
        ("qwen3 q4_k_s", include_bytes!("../fixtures/models/qwen3-micro-q4_k_s.gguf"), 0.15),
        ("qwen3 q6_k", include_bytes!("../fixtures/models/qwen3-micro-q6_k.gguf"), 0.15),
        ("qwen2 q8_0", include_bytes!("../fixtures/models/qwen2-micro-q8_0.gguf"), 0.15),
        ("phi3 q8_0", include_bytes!("../fixtures/models/phi3-micro-q8_0.gguf"), 0.15),
        ("llama 3", include_bytes!("../fixtures/models/llama-micro-llama3.gguf"), 0.15),
        ("gemma2 q8_0", include_bytes!("../fixtures/models/gemma2-micro-q8_0.gguf"), 0.15),
        ("gemma4 q8_0", include_bytes!("../fixtures/models/gemma4-micro-q8_0.gguf"), 0.15),
        ("qwen35 q8_0", include_bytes!("../fixtures/models/qwen35-micro-q8_0.gguf"), 0.15),
        ("lfm2 q8_0", include_bytes!("../fixtures/models/lfm2-micro-q8_0.gguf"), 0.15),
        ("qwen3moe q8_0", include_bytes!("../fixtures/models/qwen3moe-micro-q8_0.gguf"), 0.15),
        // Sinks, YaRN, biased experts in MXFP4 and the clamped SwiGLU.
        ("gpt-oss q8_0", include_bytes!("../fixtures/models/gpt-oss-micro-q8_0.gguf"), 0.15),
        // Mamba-2 layers between attention layers, experts with a shared one.
        ("granitehybrid q8_0", include_bytes!("../fixtures/models/granitehybrid-micro-q8_0.gguf"), 0.02),
        // Interleaved M-RoPE over whole heads (the shader's factors with each pair's stream).
        ("qwen3vl q8_0", include_bytes!("../fixtures/models/qwen3vl-micro-q8_0.gguf"), 0.15),
    ];
    for (name, bytes, tolerance) in files {
        gpu_follows_cpu(&gpu, name, bytes, 3, tolerance).await;
    }
}

#[wasm_bindgen_test]
async fn without_webgpu_the_request_fails_as_no_gpu() {
    if has_webgpu() {
        return;
    }
    match Gpu::request().await {
        Err(error @ (GpuError::NoAdapter(_) | GpuError::Device(_))) => assert_eq!(error.kind(), "no_gpu"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a device without navigator.gpu"),
    }
}

/// The GEMM (a batch of 37 input rows over 70 weight rows) against the one-row kernel, in the
/// browser, within rounding: Q8_0's 34-byte blocks lie alternately on and off a word boundary.
/// (A `var` zeroed in a loop kept its first pass's zeros only here, natively not: 2,590 of
/// 2,590 sums wrong.)
#[wasm_bindgen_test]
async fn the_gemm_agrees_with_the_one_row_kernel_in_the_browser() {
    if !has_webgpu() {
        return;
    }
    let gpu = Gpu::request().await.expect("a WebGPU adapter");
    gpu.set_integer_dots(false); // The one-row kernel over float inputs, as the GEMM reads them.
    let (rows, cols, batch) = (70, 512, 37);
    let mut seed = 7u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as u32
    };
    let mut bytes: Vec<u8> = (0..rows * cols / 32 * 34).map(|_| next() as u8).collect();
    for block in bytes.chunks_exact_mut(34) {
        block[..2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
    }
    let x: Vec<f32> = (0..batch * cols).map(|_| next() as f32 / u32::MAX as f32 - 0.5).collect();
    let all = gpu.matvec(inferno::tensor::WeightType::Q8_0, &bytes, rows, cols, &x).await.unwrap();
    let mut wrong = Vec::new();
    for (token, input) in x.chunks_exact(cols).enumerate() {
        let one = gpu.matvec(inferno::tensor::WeightType::Q8_0, &bytes, rows, cols, input).await.unwrap();
        for row in 0..rows {
            let got = all[token * rows + row];
            if (got - one[row]).abs() > 1e-4 * one[row].abs().max(1.0) {
                wrong.push((token, row, got, one[row]));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} wrong, first: {:?}",
        wrong.len(),
        rows * batch,
        &wrong[..wrong.len().min(12)]
    );
}

/// The fused decode kernels (gate, up and the activation; Q, K and V) compile in the browser's
/// WebGPU for every weight type and give the bits of the kernels they replace, summed without
/// subgroups as a browser sums (natively: `src/gpu/tests.rs`, with and without). The weights
/// are bytes below 0x40, so every f16, bf16 and f32 field in them is finite.
#[wasm_bindgen_test]
async fn the_fused_decode_kernels_give_the_separate_kernels_bits_in_the_browser() {
    use inferno::model::Activation;
    if !has_webgpu() {
        return;
    }
    let gpu = Gpu::request().await.expect("a WebGPU adapter");
    // Chromium's WGSL has dot4I8Packed: the 8-bit inputs' kernels run here too, both ways.
    assert!(gpu.facts().packed_dots, "no packed_4x8_integer_dot_product in this browser's WGSL");
    assert!(gpu.integer_dots(), "8-bit inputs are the default where WGSL has dot4I8Packed");
    let types = inferno::gpu::MATVEC_TYPES.iter().flat_map(|&t| [(t, false), (t, true)]);
    for (t, (weight_type, q8)) in types.enumerate() {
        gpu.set_integer_dots(q8);
        let cols = if weight_type.block_len() == 1 { 96 } else { 256 };
        let row_bytes = weight_type.row_bytes(cols).unwrap();
        let matrix = |rows: usize, salt: usize| -> Vec<u8> {
            (0..rows * row_bytes).map(|i| ((i * 37 + salt * 11 + t) % 64) as u8).collect()
        };
        let x: Vec<f32> = (0..cols).map(|i| ((i * 29 % 17) as f32 - 8.0) / 8.0).collect();
        let rows = [21, 11, 13];
        let [q, k, v] = [0, 1, 2].map(|m| matrix(rows[m], m));
        let mut want = Vec::new();
        for (bytes, &n) in [&q, &k, &v].into_iter().zip(&rows) {
            want.push(gpu.matvec(weight_type, bytes, n, cols, &x).await.unwrap());
        }
        let got = gpu
            .qkv_matvec((weight_type, weight_type), [(&q, 21), (&k, 11), (&v, 13)], cols, &x)
            .await
            .unwrap();
        assert_eq!(got, want, "{weight_type:?}: Q, K and V, 8-bit inputs {q8}");
        let up = matrix(21, 3);
        let u = gpu.matvec(weight_type, &up, 21, cols, &x).await.unwrap();
        let g = &want[0];
        for activation in [Activation::SwiGlu, Activation::GeGlu] {
            let separate = match activation {
                Activation::SwiGlu => gpu.swiglu(g, &u).await.unwrap(),
                _ => gpu.geglu(g, &u).await.unwrap(),
            };
            let fused = gpu.gated_matvec(weight_type, (&q, &up), 21, cols, &x, activation).await.unwrap();
            assert_eq!(fused, separate, "{weight_type:?}: {activation:?}, 8-bit inputs {q8}");
        }
    }
    // Values of another block type, as Q4_K_M files' Q6_K `attn_v`.
    let (qk_type, v_type) = (inferno::tensor::WeightType::Q4_K, inferno::tensor::WeightType::Q6_K);
    let matrix = |weight_type: inferno::tensor::WeightType, rows: usize, salt: usize| -> Vec<u8> {
        let bytes = rows * weight_type.row_bytes(256).unwrap();
        (0..bytes).map(|i| ((i * 37 + salt * 11) % 64) as u8).collect()
    };
    let x: Vec<f32> = (0..256).map(|i| ((i * 29 % 17) as f32 - 8.0) / 8.0).collect();
    let [q, k, v] = [matrix(qk_type, 21, 0), matrix(qk_type, 11, 1), matrix(v_type, 13, 2)];
    let mut want = Vec::new();
    for (weight_type, bytes, rows) in [(qk_type, &q, 21), (qk_type, &k, 11), (v_type, &v, 13)] {
        want.push(gpu.matvec(weight_type, bytes, rows, 256, &x).await.unwrap());
    }
    let got = gpu.qkv_matvec((qk_type, v_type), [(&q, 21), (&k, 11), (&v, 13)], 256, &x).await.unwrap();
    assert_eq!(got, want, "Q4_K queries and keys, Q6_K values");
}

/// The 8-bit inputs' kernels in the browser against the CPU's f64 product of the dequantized
/// weights and the dequantized inputs (as natively, src/gpu/tests.rs, with Q4_1's and Q5_1's
/// offsets times the inputs' sums as ggml's Q8_1 stores them, in f16): decode, a short batch and
/// the GEMM.
#[wasm_bindgen_test]
async fn the_integer_dot_kernels_match_the_cpu_in_the_browser() {
    use inferno::tensor::{WeightType, dequantize_row};
    if !has_webgpu() {
        return;
    }
    let gpu = Gpu::request().await.expect("a WebGPU adapter");
    gpu.set_integer_dots(true);
    let types = [WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_0];
    let types = types.into_iter().chain([WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K]);
    for (t, weight_type) in types.enumerate() {
        let (rows, cols, batch) = (19, 512, [1, 2, 3, 17][t % 4]);
        let row_bytes = weight_type.row_bytes(cols).unwrap();
        // Bytes over the whole range (negative quants of Q8_0 too), each with the exponent
        // bits of an f16's high byte all set moved one lower: every scale stays finite.
        let bytes: Vec<u8> = (0..rows * row_bytes)
            .map(|i| ((i as u32 ^ (t as u32) << 20).wrapping_mul(2_654_435_761) >> 13) as u8)
            .map(|byte| if byte & 0x7c == 0x7c { byte ^ 0x04 } else { byte })
            .collect();
        let x: Vec<f32> = (0..cols * batch).map(|i| ((i * 29 % 37) as f32 - 18.0) / 9.0).collect();
        let got = gpu.matvec(weight_type, &bytes, rows, cols, &x).await.unwrap();
        let quantized = gpu.q8_inputs(&x, weight_type).await.unwrap();
        let offsets = matches!(weight_type, WeightType::Q4_1 | WeightType::Q5_1);
        // Each block's offset `m` times the rounding of the stored `d · Σq`.
        let rounding = |r: usize, b: usize| -> f64 {
            (0..cols / 32 * usize::from(offsets))
                .map(|u| {
                    let at = r * row_bytes + u * weight_type.block_bytes() + 2;
                    let m = half::f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f64();
                    let block = &quantized[(b * cols / 32 + u) * 48..][..48];
                    let float =
                        |at: usize| f64::from(f32::from_le_bytes(block[at..at + 4].try_into().unwrap()));
                    let sum: f64 = (0..32).map(|i| f64::from(block[i] as i8)).sum();
                    m * (float(36) - float(32) * sum)
                })
                .sum()
        };
        let inputs: Vec<f64> = quantized
            .chunks_exact(48)
            .flat_map(|block| {
                let d = f32::from_le_bytes(block[32..36].try_into().unwrap());
                (0..32).map(move |i| f64::from(block[i] as i8) * f64::from(d))
            })
            .collect();
        let mut weights = vec![0.0f32; cols];
        for r in 0..rows {
            dequantize_row(weight_type, &bytes[r * row_bytes..(r + 1) * row_bytes], &mut weights).unwrap();
            for (b, input) in inputs.chunks_exact(cols).enumerate() {
                let (dot, magnitude) = weights.iter().zip(input).fold((0.0, 0.0), |(d, m), (&w, &v)| {
                    (d + f64::from(w) * v, m + (f64::from(w) * v).abs())
                });
                let (g, dot) = (f64::from(got[b * rows + r]), dot + rounding(r, b));
                assert!(
                    (g - dot).abs() <= 1e-5 * magnitude + 1e-6,
                    "{weight_type:?} input row {b}, row {r}: GPU {g}, CPU {dot}"
                );
            }
        }
    }
}

/// The best logits of a Qwen3-sized vocabulary (three passes), ranked on the device as the
/// sampler's reference ranks them, with its softmax sums (as natively, src/gpu/tests.rs).
#[wasm_bindgen_test]
async fn the_best_logits_are_the_samplers_in_the_browser() {
    use inferno::sampler::BestLogits;
    if !has_webgpu() {
        return;
    }
    let gpu = Gpu::request().await.expect("a WebGPU adapter");
    let mut logits: Vec<f32> = (0..151_936u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) >> 8) % 20_000) as f32 / 1000.0 - 10.0)
        .collect();
    logits[151_935] = 11.0;
    logits[3] = 11.0;
    logits[77] = f32::NAN;
    let got = gpu.best_logits(&logits, 0.7).await.unwrap();
    let want = BestLogits::of(&logits, 0.7);
    assert_eq!(got.best, want.best);
    assert!((got.z - want.z).abs() <= 1e-5 * want.z, "{} against {}", got.z, want.z);
    assert!((got.weighted - want.weighted).abs() <= 1e-5 * want.weighted.abs().max(1.0));
}

/// Pictures on the GPU in the browser: the 61 × 47 noise picture through each micro projector,
/// square by square, each square submitted, awaited (`pending`) and collected as the worker does
/// it, against mtmd's embeddings within the 1e-3 (relative to their largest magnitude;
/// natively on lavapipe: 1.6e-4 to 5.7e-4, tests/gpu.rs).
#[wasm_bindgen_test]
async fn pictures_encode_on_the_gpu_in_the_browser_as_mtmd_encodes_them() {
    use inferno::gpu::GpuVision;
    use inferno::model::ModelBytes;
    use inferno::vision::{PicturePart, RgbImage, VisionEncoder};
    if !has_webgpu() {
        return;
    }
    #[allow(clippy::arc_with_non_send_sync, reason = "the engine's type: wasm has one thread here")]
    let gpu = std::sync::Arc::new(Gpu::request().await.expect("a WebGPU adapter"));
    let projectors: [(&str, &[u8], &[u8]); 6] = [
        (
            "gemma3",
            include_bytes!("../fixtures/models/clip-gemma3-micro.gguf"),
            include_bytes!("../fixtures/golden/clip-gemma3-micro.noise-61x47.f32"),
        ),
        (
            "idefics3",
            include_bytes!("../fixtures/models/clip-idefics3-micro.gguf"),
            include_bytes!("../fixtures/golden/clip-idefics3-micro.noise-61x47.f32"),
        ),
        (
            "lfm2",
            include_bytes!("../fixtures/models/clip-lfm2-micro.gguf"),
            include_bytes!("../fixtures/golden/clip-lfm2-micro.noise-61x47.f32"),
        ),
        (
            "gemma4v",
            include_bytes!("../fixtures/models/clip-gemma4v-micro.gguf"),
            include_bytes!("../fixtures/golden/clip-gemma4v-micro.noise-61x47.f32"),
        ),
        (
            "qwen2.5vl",
            include_bytes!("../fixtures/models/clip-qwen25vl-micro.gguf"),
            include_bytes!("../fixtures/golden/clip-qwen25vl-micro.noise-61x47.f32"),
        ),
        (
            "qwen3vl deepstack",
            include_bytes!("../fixtures/models/clip-qwen3vl-deepstack-micro.gguf"),
            include_bytes!("../fixtures/golden/clip-qwen3vl-deepstack-micro.noise-61x47.f32"),
        ),
    ];
    let picture =
        RgbImage::new(61, 47, include_bytes!("../fixtures/images/noise-61x47.rgb").to_vec()).unwrap();
    for (name, mmproj, golden) in projectors {
        let encoder = VisionEncoder::load(ModelBytes::from(mmproj.to_vec())).unwrap();
        let mut vision = GpuVision::new(std::sync::Arc::clone(&gpu));
        let mut ours = Vec::new();
        for part in encoder.layout(&picture).unwrap() {
            let PicturePart::Square(square) = part else { continue };
            let submitted = vision.submit(&encoder, &square).map_err(|e| format!("{name}: {e:?}")).unwrap();
            submitted.pending().await.unwrap();
            ours.extend(submitted.collect().unwrap().values);
        }
        let golden: Vec<f32> =
            golden.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        assert_eq!(ours.len(), golden.len(), "{name}");
        let scale = golden.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let worst = ours.iter().zip(&golden).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / scale;
        web_sys::console::log_1(&format!("{name} on the GPU in the browser: {worst:.2e} from mtmd's").into());
        assert!(worst < 1e-3, "{name}: {worst}");
    }
}
