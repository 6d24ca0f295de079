//! Writes the seed corpora of the fuzz targets. `render_template` (`fuzz/corpus/render_template/`)
//! gets real chat templates (Qwen3's from the shared vocabulary file, ChatML, a Gemma-style one)
//! with a message and option bits. `parse_gguf` (`fuzz/corpus/parse_gguf/`) gets
//! a few small valid files from the writer (every value type, nested arrays, several tensor
//! types, versions 2 and 3, a custom alignment), the first 300 KB of a real Qwen3 test model,
//! and a miniature of that model (its real keys and tensor names, arrays cut to 32 elements,
//! tensors shrunk to one block) that fits in the fuzzer's `-max_len`.
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
    let models =
        std::env::args().nth(1).map(PathBuf::from).unwrap_or_else(|| fuzz_dir.join("../../shared/models"));
    let out = fuzz_dir.join("corpus/parse_gguf");
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
    template_seeds(&models, &fuzz_dir.join("corpus/render_template"));
    tokenizer_seeds(&fuzz_dir.join("corpus/tokenize"));
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
    let mut templates = vec![
        (
            "chatml".to_string(),
            "{%- for message in messages -%}{{- '<|im_start|>' + message.role + '\\n' + message.content + \
             '<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
                .to_string(),
        ),
        (
            "gemma-like".to_string(),
            "{%- set ns = namespace(system='') -%}{%- for m in messages -%}{%- if m.role == 'system' -%}\
             {%- set ns.system = ns.system + m.content | trim -%}{%- else -%}<start_of_turn>{{ 'model' if \
             m.role == 'assistant' else m.role }}\\n{{ ns.system }}{{ m.content | trim }}<end_of_turn>\\n{%- endif -%}\
             {%- endfor -%}{%- if add_generation_prompt -%}<start_of_turn>model\\n{%- endif -%}"
                .to_string(),
        ),
    ];
    if let Ok(bytes) = fs::read(models.join("qwen3-vocab.gguf")) {
        if let Ok(file) = gguf::Gguf::parse(&bytes) {
            if let Some(template) = file.metadata().get_str("tokenizer.chat_template") {
                templates.push(("qwen3".into(), template.to_owned()));
            }
        }
    }
    for (name, template) in templates {
        for (suffix, message, switches) in [("hello", "Hello!", 0x21u8), ("think", "<think>x</think>y", 0x2f)] {
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
    let mut bpe_tokens = byte_chars.clone();
    let merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a"];
    for merge in merges {
        bpe_tokens.push(merge.replace(' ', ""));
    }
    let specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"];
    bpe_tokens.extend(specials.iter().map(|s| s.to_string()));
    let mut types = vec![1i32; bpe_tokens.len()];
    for t in types.iter_mut().rev().take(specials.len()) {
        *t = 3;
    }
    let bpe = GgufWriter::new()
        .kv("tokenizer.ggml.model", Value::String("gpt2".into()))
        .kv("tokenizer.ggml.pre", Value::String("qwen2".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(bpe_tokens.clone())))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)))
        .kv("tokenizer.ggml.merges", Value::Array(Array::String(merges.iter().map(|m| m.to_string()).collect())))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(bpe_tokens.len() as u32 - 1))
        .to_bytes();

    let mut spm_tokens = vec!["<unk>".to_string(), "<s>".to_string(), "</s>".to_string()];
    spm_tokens.extend((0..256).map(|b| format!("<0x{b:02X}>")));
    let pieces = ["▁", "▁the", "▁a", "e", "t", "h", "▁th", "in"];
    spm_tokens.extend(pieces.iter().map(|p| p.to_string()));
    let mut spm_types = vec![2, 3, 3];
    spm_types.extend(std::iter::repeat_n(6, 256));
    spm_types.extend(std::iter::repeat_n(1, pieces.len()));
    let scores: Vec<f32> = (0..spm_tokens.len()).map(|i| -(i as f32)).collect();
    let spm = GgufWriter::new()
        .kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(spm_tokens)))
        .kv("tokenizer.ggml.scores", Value::Array(Array::F32(scores)))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(spm_types)))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(1))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(2))
        .to_bytes();

    for (name, file) in [("bpe", bpe), ("spm", spm)] {
        for (suffix, text) in [("plain", "the cat in a hat"), ("chat", "<|im_start|>user\nhé 中文 🙂<|im_end|>")] {
            let mut bytes = (file.len() as u32).to_le_bytes().to_vec();
            bytes.extend_from_slice(&file);
            bytes.extend_from_slice(text.as_bytes());
            fs::write(out.join(format!("{name}-{suffix}.bin")), &bytes).expect("write seed");
        }
        println!("tokenizer seed {name}");
    }
}
