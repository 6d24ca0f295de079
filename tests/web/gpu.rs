//! The GPU backend in the browser (WebGPU; SwiftShader in the tests' headless Chromium, see
//! webdriver.json), against the CPU engine in the same wasm instance, whose logits match
//! llama.cpp's goldens (tests/parity.rs): every micro file the GPU runs, a prompt in one batch
//! (12 tokens: the GEMM) and decode steps over the GPU's own cache, within the bounds of
//! tests/gpu.rs (the same comparison natively, on lavapipe). In a browser without WebGPU
//! (Firefox ESR) the request for a device must fail as `no_gpu`, not panic.

use inferno::gpu::{Gpu, GpuError, GpuState};
use inferno::model::{LogitsFor, Model};
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
        let logits = on_gpu.collect(gpu).unwrap().expect("logits");
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
