//! Writes the seed corpora of the fuzz targets. `render_template` (`fuzz/seeds/render_template/`)
//! gets real chat templates (Qwen3's from the shared vocabulary file, ChatML, a Gemma-style one)
//! with a message and option bits. `parse_gguf` (`fuzz/seeds/parse_gguf/`) gets
//! a few small valid files from the writer (every value type, nested arrays, several tensor
//! types, versions 2 and 3, a custom alignment), the first 300 KB of a real Qwen3 test model,
//! and a miniature of that model (its real keys and tensor names, arrays cut to 32 elements,
//! tensors shrunk to one block) that fits in the fuzzer's `-max_len`.
//!
//! `vision` (`fuzz/seeds/vision/`) gets the micro projector and the test pictures.
//!
//!     cargo run --example seed_corpus [-- SHARED_MODELS_DIR]   (from fuzz/)

use std::fs;
use std::path::{Path, PathBuf};

use inferno::gguf::writer::GgufWriter;
use inferno::gguf::{self, Array, GgmlType, HeaderParse, Value};

const REAL_MODEL: &str = "qwen3-micro-q4_0.gguf";
const REAL_PREFIX: usize = 300 * 1024;
const MINI_ARRAY_LEN: usize = 32;

fn main() {
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let models = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| fuzz_dir.join("../tests/fixtures/models"));
    let out = fuzz_dir.join("seeds/parse_gguf");
    fs::create_dir_all(&out).expect("create corpus dir");

    let mut seeds = synthetic_seeds();
    match fs::read(models.join(REAL_MODEL)) {
        Ok(bytes) => {
            seeds.push(("qwen3-micro-q4_0-head".into(), bytes[..bytes.len().min(REAL_PREFIX)].to_vec()));
            seeds.push(("qwen3-micro-miniature".into(), miniature(&bytes)));
        }
        Err(e) => {
            eprintln!("note: {}: {e}; writing the synthetic seeds only", models.join(REAL_MODEL).display())
        }
    }
    template_seeds(&models, &fuzz_dir.join("seeds/render_template"));
    tokenizer_seeds(&fuzz_dir.join("seeds/tokenize"));
    generate_seeds(&models, &fuzz_dir.join("seeds/generate"));
    vision_seeds(&models, &fuzz_dir.join("seeds/vision"));
    for (name, bytes) in &seeds {
        gguf::Gguf::parse(bytes).map(drop).unwrap_or_else(|e| {
            // The truncated real header is expected to fail; every other seed must be valid.
            assert!(name.ends_with("-head"), "seed {name} does not parse: {e}");
        });
        fs::write(out.join(format!("{name}.gguf")), bytes).expect("write seed");
        println!("{:>8} bytes  {name}", bytes.len());
    }
}

fn synthetic_seeds() -> Vec<(String, Vec<u8>)> {
    let nested = Array::Array(vec![Array::Array(vec![Array::U8(vec![1, 2]), Array::U8(vec![])])]);
    let every_type = GgufWriter::new()
        .kv("general.architecture", Value::String("llama".into()))
        .kv("general.name", Value::String(String::new()))
        .kv("t.u8", Value::U8(7))
        .kv("t.i8", Value::I8(-7))
        .kv("t.u16", Value::U16(700))
        .kv("t.i16", Value::I16(-700))
        .kv("t.u32", Value::U32(70_000))
        .kv("t.i32", Value::I32(-70_000))
        .kv("t.f32", Value::F32(0.5))
        .kv("t.bool", Value::Bool(true))
        .kv("t.u64", Value::U64(u64::MAX))
        .kv("t.i64", Value::I64(i64::MIN))
        .kv("t.f64", Value::F64(-2.25))
        .kv("t.strings", Value::Array(Array::String(vec!["a".into(), "ü".into()])))
        .kv("t.bools", Value::Array(Array::Bool(vec![true, false])))
        .kv("t.f32s", Value::Array(Array::F32(vec![1.0, -1.0])))
        .kv("t.nested", Value::Array(nested))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(vec!["<s>".into(), "x".into()])))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(0))
        .tensor_f32("token_embd.weight", &[4, 2], &[0.25; 8])
        .tensor("blk.0.attn_q.weight", &[32, 2], GgmlType::Q4_0, vec![0x55; 36])
        .tensor("blk.0.ffn_up.weight", &[256], GgmlType::Q4_K, vec![0xAA; 144])
        .tensor("output_norm.weight", &[16], GgmlType::F16, vec![0x3C; 32]);

    let mut v2 = every_type.clone();
    v2.version = 2;
    let mut aligned64 = GgufWriter::new()
        .kv("general.alignment", Value::U32(64))
        .tensor_f32("a", &[3], &[1.0, 2.0, 3.0])
        .tensor("b", &[32], GgmlType::Q8_0, vec![1; 34]);
    aligned64.alignment = 64;
    let metadata_only = GgufWriter::new().kv("general.architecture", Value::String("qwen3".into()));

    vec![
        ("every-type".into(), every_type.to_bytes()),
        ("version-2".into(), v2.to_bytes()),
        ("aligned-64".into(), aligned64.to_bytes()),
        ("metadata-only".into(), metadata_only.to_bytes()),
        ("empty".into(), GgufWriter::new().to_bytes()),
    ]
}

/// The real model's header rewritten small: same keys, types and tensor names.
fn miniature(real: &[u8]) -> Vec<u8> {
    let header = match gguf::parse_header(&real[..real.len().min(1 << 20)], real.len() as u64) {
        Ok(HeaderParse::Complete(header)) => header,
        other => panic!("{REAL_MODEL}: cannot read its header: {other:?}"),
    };
    let mut w = GgufWriter::new();
    for (key, value) in header.metadata.iter() {
        let value = match value {
            Value::Array(a) => Value::Array(shorten(a)),
            scalar => scalar.clone(),
        };
        w = w.kv(key, value);
    }
    for t in header.tensors.iter().take(12) {
        let n = t.ggml_type.block_size();
        w = w.tensor(&t.name, &[n], t.ggml_type, vec![0x11; t.ggml_type.block_bytes() as usize]);
    }
    w.to_bytes()
}

fn shorten(a: &Array) -> Array {
    let n = a.len().min(MINI_ARRAY_LEN);
    match a {
        Array::String(v) => Array::String(v[..n].to_vec()),
        Array::I32(v) => Array::I32(v[..n].to_vec()),
        Array::F32(v) => Array::F32(v[..n].to_vec()),
        Array::U32(v) => Array::U32(v[..n].to_vec()),
        other => other.clone(),
    }
}

/// `template NUL message NUL switches` inputs for `render_template`.
fn template_seeds(models: &Path, out: &Path) {
    fs::create_dir_all(out).expect("create corpus dir");
    let mut templates =
        vec![("chatml".to_string(), CHATML.to_string()), ("gemma-like".to_string(), GEMMA_LIKE.to_string())];
    if let Ok(bytes) = fs::read(models.join("qwen3-vocab.gguf")) {
        if let Ok(file) = gguf::Gguf::parse(&bytes) {
            if let Some(template) = file.metadata().get_str("tokenizer.chat_template") {
                templates.push(("qwen3".into(), template.to_owned()));
            }
        }
    }
    for (name, template) in templates {
        for (suffix, message, switches) in [("hello", "Hello!", 0x21u8), ("think", "<think>x</think>y", 0x2f)]
        {
            let mut bytes = template.clone().into_bytes();
            bytes.push(0);
            bytes.extend_from_slice(message.as_bytes());
            bytes.push(0);
            bytes.push(switches);
            fs::write(out.join(format!("{name}-{suffix}.txt")), &bytes).expect("write seed");
        }
        println!("template seed {name}");
    }
}

/// `u32 length, GGUF file, text` inputs for `tokenize`: a byte-level BPE vocabulary (GPT-2's
/// byte characters, a few merges, ChatML control tokens) and a SentencePiece one (byte
/// fallback, scored pieces), each with a few texts.
fn tokenizer_seeds(out: &Path) {
    fs::create_dir_all(out).expect("create corpus dir");
    for (name, keys) in [("bpe", bpe_tokenizer()), ("spm", spm_tokenizer())] {
        let file = with_keys(GgufWriter::new(), keys).to_bytes();
        for (suffix, text) in
            [("plain", "the cat in a hat"), ("chat", "<|im_start|>user\nhé 中文 🙂<|im_end|>")]
        {
            let mut bytes = (file.len() as u32).to_le_bytes().to_vec();
            bytes.extend_from_slice(&file);
            bytes.extend_from_slice(text.as_bytes());
            fs::write(out.join(format!("{name}-{suffix}.bin")), &bytes).expect("write seed");
        }
        println!("tokenizer seed {name}");
    }
}

type Keys = Vec<(&'static str, Value)>;

fn with_keys(mut writer: GgufWriter, keys: Keys) -> GgufWriter {
    for (key, value) in keys {
        writer = writer.kv(key, value);
    }
    writer
}

/// Qwen-style byte-level BPE: GPT-2's byte characters, five merges, ChatML control tokens last
/// (`<|im_end|>` ends generation).
fn bpe_tokenizer() -> Keys {
    // GPT-2's bytes-to-characters map: printable Latin-1 stays, the rest moves past 255.
    let mut next = 256u32;
    let byte_chars: Vec<String> = (0u32..256)
        .map(|b| {
            let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
            let c = if printable {
                b
            } else {
                next += 1;
                next - 1
            };
            char::from_u32(c).expect("valid char").to_string()
        })
        .collect();
    let mut tokens = byte_chars;
    let merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a"];
    tokens.extend(merges.iter().map(|merge| merge.replace(' ', "")));
    let specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
    tokens.extend(specials.iter().map(|s| s.to_string()));
    let mut types = vec![1i32; tokens.len()];
    for t in types.iter_mut().rev().take(specials.len()) {
        *t = 3;
    }
    let last = tokens.len() as u32 - 1;
    vec![
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("qwen2".into())),
        ("tokenizer.ggml.tokens", Value::Array(Array::String(tokens))),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
        (
            "tokenizer.ggml.merges",
            Value::Array(Array::String(merges.iter().map(|m| m.to_string()).collect())),
        ),
        ("tokenizer.ggml.eos_token_id", Value::U32(last)),
        ("tokenizer.ggml.bos_token_id", Value::U32(last - 2)),
    ]
}

/// Llama-style SentencePiece: `<unk>`, `<s>`, `</s>`, 256 byte tokens, a few scored pieces.
fn spm_tokenizer() -> Keys {
    let mut tokens = vec!["<unk>".to_string(), "<s>".to_string(), "</s>".to_string()];
    tokens.extend((0..256).map(|b| format!("<0x{b:02X}>")));
    let pieces = ["▁", "▁the", "▁a", "e", "t", "h", "▁th", "in", "<start_of_turn>", "<end_of_turn>"];
    tokens.extend(pieces.iter().map(|p| p.to_string()));
    let mut types = vec![2, 3, 3];
    types.extend(std::iter::repeat_n(6, 256));
    types.extend(std::iter::repeat_n(1, pieces.len() - 2));
    types.extend([3, 3]);
    let scores: Vec<f32> = (0..tokens.len()).map(|i| -(i as f32)).collect();
    vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", Value::Array(Array::String(tokens))),
        ("tokenizer.ggml.scores", Value::Array(Array::F32(scores))),
        ("tokenizer.ggml.token_type", Value::Array(Array::I32(types))),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
    ]
}

/// Whole small models for `generate`, one per architecture, with their tensors spread over
/// every weight type the engine reads (random codes, small scales): Qwen3 with BPE and the
/// real Qwen3 chat template (when the shared vocabulary file is there), Llama with
/// SentencePiece and ChatML, Gemma 3 with its post-norms, sliding window and its template, and
/// a Qwen3 one 256 wide so the K-quants fit a row.
fn generate_seeds(models: &Path, out: &Path) {
    fs::create_dir_all(out).expect("create corpus dir");
    let qwen_template = fs::read(models.join("qwen3-vocab.gguf"))
        .ok()
        .and_then(|bytes| {
            gguf::Gguf::parse(&bytes).ok()?.metadata().get_str("tokenizer.chat_template").map(str::to_owned)
        })
        .unwrap_or_else(|| CHATML.to_string());
    let specs = [
        MiniModel {
            name: "qwen3",
            arch: "qwen3",
            dim: 64,
            ff: 96,
            heads: 2,
            kv_heads: 1,
            head_dim: 32,
            layers: 2,
            types: [GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::BF16],
            tied: true,
        },
        MiniModel {
            name: "llama",
            arch: "llama",
            dim: 64,
            ff: 128,
            heads: 4,
            kv_heads: 2,
            head_dim: 16,
            layers: 2,
            types: [GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::F32, GgmlType::Q8_0, GgmlType::Q4_0],
            tied: false,
        },
        MiniModel {
            name: "gemma3",
            arch: "gemma3",
            dim: 64,
            ff: 64,
            heads: 2,
            kv_heads: 1,
            head_dim: 32,
            layers: 3,
            types: [GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F16, GgmlType::Q5_1, GgmlType::Q8_0],
            tied: true,
        },
        MiniModel {
            name: "qwen3-kquants",
            arch: "qwen3",
            dim: 256,
            ff: 256,
            heads: 8,
            kv_heads: 2,
            head_dim: 32,
            layers: 1,
            types: [GgmlType::Q6_K, GgmlType::Q3_K, GgmlType::Q5_K, GgmlType::Q4_K, GgmlType::Q2_K],
            tied: true,
        },
    ];
    for spec in specs {
        let (tokenizer, template) = match spec.arch {
            "qwen3" => (bpe_tokenizer(), qwen_template.clone()),
            "gemma3" => (spm_tokenizer(), GEMMA_LIKE.to_string()),
            _ => (spm_tokenizer(), CHATML.to_string()),
        };
        let bytes = spec.build(tokenizer, &template);
        let engine = inferno::engine::Engine::load(bytes.clone())
            .unwrap_or_else(|e| panic!("generate seed {} does not load: {e}", spec.name));
        drop(engine);
        fs::write(out.join(format!("{}.gguf", spec.name)), &bytes).expect("write seed");
        println!("{:>8} bytes  generate seed {}", bytes.len(), spec.name);
    }
}

const CHATML: &str = "{%- for message in messages -%}{{- '<|im_start|>' + message.role + '\\n' + message.content + \
    '<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

const GEMMA_LIKE: &str = "{%- set ns = namespace(system='') -%}{%- for m in messages -%}{%- if m.role == 'system' -%}\
    {%- set ns.system = ns.system + m.content | trim -%}{%- else -%}<start_of_turn>{{ 'model' if \
    m.role == 'assistant' else m.role }}\\n{{ ns.system }}{{ m.content | trim }}<end_of_turn>\\n{%- endif -%}\
    {%- endfor -%}{%- if add_generation_prompt -%}<start_of_turn>model\\n{%- endif -%}";

struct MiniModel {
    name: &'static str,
    arch: &'static str,
    dim: u64,
    ff: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    layers: u64,
    /// Weight types of: the embedding, attention Q/K/V, attention output, FFN gate/up, FFN down.
    types: [GgmlType; 5],
    tied: bool,
}

impl MiniModel {
    fn build(&self, tokenizer: Keys, template: &str) -> Vec<u8> {
        let vocab = match &tokenizer.iter().find(|(k, _)| *k == "tokenizer.ggml.tokens").expect("tokens").1 {
            Value::Array(tokens) => tokens.len() as u64,
            _ => unreachable!("tokens are an array"),
        };
        let key =
            |name: &str| -> &'static str { Box::leak(format!("{}.{name}", self.arch).into_boxed_str()) };
        let mut keys: Keys = vec![
            ("general.architecture", Value::String(self.arch.into())),
            ("general.name", Value::String(format!("fuzz-seed-{}", self.name))),
            (key("block_count"), Value::U32(self.layers as u32)),
            (key("context_length"), Value::U32(256)),
            (key("embedding_length"), Value::U32(self.dim as u32)),
            (key("feed_forward_length"), Value::U32(self.ff as u32)),
            (key("attention.head_count"), Value::U32(self.heads as u32)),
            (key("attention.head_count_kv"), Value::U32(self.kv_heads as u32)),
            (key("attention.key_length"), Value::U32(self.head_dim as u32)),
            (key("attention.value_length"), Value::U32(self.head_dim as u32)),
            (key("attention.layer_norm_rms_epsilon"), Value::F32(1e-6)),
            (key("rope.freq_base"), Value::F32(10_000.0)),
            ("tokenizer.chat_template", Value::String(template.into())),
        ];
        if self.arch == "gemma3" {
            keys.push((key("attention.sliding_window"), Value::U32(8)));
        }
        keys.extend(tokenizer);
        let mut w = with_keys(GgufWriter::new(), keys);
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let [embd, qkv, out, up, down] = self.types;
        let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let mut matrix = |w: GgufWriter, name: &str, rows: u64, cols: u64, ty: GgmlType| {
            w.tensor(name, &[cols, rows], ty, random_blocks(ty, rows * cols, &mut rng))
        };
        let norm = |w: GgufWriter, name: &str, len: u64| w.tensor_f32(name, &[len], &vec![1.0; len as usize]);
        w = matrix(w, "token_embd.weight", vocab, self.dim, embd);
        if !self.tied {
            w = matrix(w, "output.weight", vocab, self.dim, embd);
        }
        w = norm(w, "output_norm.weight", self.dim);
        for i in 0..self.layers {
            let n = |s: &str| format!("blk.{i}.{s}.weight");
            w = norm(w, &n("attn_norm"), self.dim);
            w = matrix(w, &n("attn_q"), q, self.dim, qkv);
            w = matrix(w, &n("attn_k"), kv, self.dim, qkv);
            w = matrix(w, &n("attn_v"), kv, self.dim, qkv);
            w = matrix(w, &n("attn_output"), self.dim, q, out);
            if self.arch != "llama" {
                w = norm(w, &n("attn_q_norm"), self.head_dim);
                w = norm(w, &n("attn_k_norm"), self.head_dim);
            }
            if self.arch == "gemma3" {
                w = norm(w, &n("post_attention_norm"), self.dim);
                w = norm(w, &n("post_ffw_norm"), self.dim);
            }
            w = norm(w, &n("ffn_norm"), self.dim);
            w = matrix(w, &n("ffn_gate"), self.ff, self.dim, up);
            w = matrix(w, &n("ffn_up"), self.ff, self.dim, up);
            w = matrix(w, &n("ffn_down"), self.dim, self.ff, down);
        }
        w.to_bytes()
    }
}

/// `values` weights of type `ty`: random codes, every scale a small positive half float (so
/// the seed computes finite logits; the fuzzer's mutations take care of the rest).
fn random_blocks(ty: GgmlType, values: u64, rng: &mut u64) -> Vec<u8> {
    let mut next = || {
        *rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (*rng >> 33) as u8
    };
    const SMALL_F16: [u8; 2] = 0x2400u16.to_le_bytes(); // 2^-6
    const SMALL_BF16: [u8; 2] = 0x3C80u16.to_le_bytes(); // 2^-6
    let blocks = (values / ty.block_size()) as usize;
    let block_bytes = ty.block_bytes() as usize;
    let scales: &[usize] = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q6_K => &[208],
        _ => &[],
    };
    let mut data = Vec::with_capacity(blocks * block_bytes);
    for _ in 0..blocks {
        let start = data.len();
        match ty {
            GgmlType::F32 => data.extend_from_slice(&(f32::from(next()) / 4096.0 - 0.03).to_le_bytes()),
            GgmlType::F16 => data.extend_from_slice(&[next(), SMALL_F16[1] | (next() & 0x80)]),
            GgmlType::BF16 => data.extend_from_slice(&[next(), SMALL_BF16[1] | (next() & 0x80)]),
            _ => data.extend((0..block_bytes).map(|_| next())),
        }
        for &at in scales {
            data[start + at..start + at + 2].copy_from_slice(&SMALL_F16);
        }
    }
    data
}

/// `vision` (`fuzz/seeds/vision/`): the micro Gemma 3, Gemma 4, SmolVLM, LFM2-VL, Qwen3.5, Qwen3-VL, Qwen2-VL and Qwen2.5-VL projectors (mode byte 0) and the PNG test
/// pictures (mode byte 1) from the fixtures, and a file that is no picture.
fn vision_seeds(models: &Path, out: &Path) {
    fs::create_dir_all(out).expect("create corpus dir");
    let seed = |name: &str, mode: u8, bytes: &[u8]| {
        fs::write(out.join(name), [&[mode][..], bytes].concat()).expect("write seed");
    };
    for projector in ["gemma3", "gemma4v", "idefics3", "lfm2", "qwen3vl", "qwen3vl-deepstack", "qwen2vl", "qwen25vl"] {
        match fs::read(models.join(format!("clip-{projector}-micro.gguf"))) {
            Ok(bytes) => seed(&format!("projector-{projector}-micro"), 0, &bytes),
            Err(e) => eprintln!("note: no {projector} projector seed: {e}"),
        }
    }
    let pictures = models.join("../images");
    for name in ["noise-61x47", "stripes-300x200", "tower-90x250"] {
        match fs::read(pictures.join(format!("{name}.png"))) {
            Ok(bytes) => seed(&format!("picture-{name}-png"), 1, &bytes),
            Err(e) => eprintln!("note: no {name} seed: {e}"),
        }
    }
    seed("picture-not-one", 1, b"GIF89a not really");
}
