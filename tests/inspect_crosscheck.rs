//! `inferno inspect --json` against llama.cpp's own Python reader (`gguf.GGUFReader`, through
//! scripts/gguf_facts.py) on real files: the shared Qwen3 test models and two real models.
//! Both must see the same metadata (keys in order, types, values) and the same tensors (name,
//! type, dims in ggml order, absolute data offset, size).
//!
//! The files: the committed fixtures, the micro Qwen3 quantizations and real models that
//! `./build.sh models` makes into `.cache/models`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const GEMMA3: &str = "gemma3-270m-q4_k_m.gguf";

mod common;

use common::repo;

/// The committed fixtures, and the micro Qwen3 quantizations made from the committed F32 file
/// (all thirteen types between the two folders).
fn synthetic_models() -> Vec<PathBuf> {
    let mut files = gguf_files(&common::fixture("models"));
    assert!(!files.is_empty(), "no committed .gguf fixtures");
    let made = gguf_files(&common::made("models"));
    files.extend(
        made.into_iter().filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("qwen3-micro-")),
    );
    let micro = files.iter().filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("qwen3-micro-"));
    assert_eq!(
        micro.count(),
        13,
        "the micro Qwen3 file in each of 13 types (./build.sh models makes 5 of them)"
    );
    files
}

fn gguf_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|ext| ext == "gguf"))
        .collect();
    files.sort();
    files
}

fn real_model(name: &str) -> PathBuf {
    common::model(name)
}

/// Whether python3 with the `gguf` package is here; says so when not.
fn gguf_py_available() -> bool {
    let ok =
        Command::new("python3").args(["-c", "import gguf"]).output().is_ok_and(|out| out.status.success());
    // A cross-check that silently skips proves nothing: `./build.sh test` installs the package.
    assert!(ok, "python3 with the `gguf` package is needed (./build.sh setup, or pip install gguf==0.19.0)");
    ok
}

fn run_json(command: &mut Command) -> Json {
    let out = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(out.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{command:?}: output is not JSON: {e}"))
}

fn gguf_py_facts(model: &Path) -> Json {
    run_json(Command::new("python3").arg(repo().join("scripts/gguf_facts.py")).arg(model))
}

/// The facts of several files from one Python process: `{path: facts}`.
fn gguf_py_facts_of(models: &[PathBuf]) -> Json {
    run_json(Command::new("python3").arg(repo().join("scripts/gguf_facts.py")).args(models))
}

fn inferno_report(model: &Path) -> Json {
    run_json(Command::new(env!("CARGO_BIN_EXE_inferno")).arg("inspect").arg(model).arg("--json"))
}

/// Two JSON scalars that mean the same value: numbers compare as numbers, and a report's big
/// integer (a string, for JavaScript) equals the reader's number with the same digits.
fn same_scalar(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            x == y || (x.is_f64() || y.is_f64()) && x.as_f64() == y.as_f64()
        }
        (Json::String(s), Json::Number(n)) | (Json::Number(n), Json::String(s)) => *s == n.to_string(),
        _ => a == b,
    }
}

/// Collects the differences between what the reader saw and what the report says.
struct Diff(Vec<String>);

impl Diff {
    fn check(&mut self, what: impl FnOnce() -> String, ok: bool) {
        if !ok {
            self.0.push(what());
        }
    }

    fn same(&mut self, what: &str, py: &Json, ours: &Json) {
        self.check(|| format!("{what}: gguf-py {py}, inferno {ours}"), same_scalar(py, ours));
    }
}

/// Compares everything the two sides report about one file; returns (facts, report).
fn crosscheck(model: &Path) -> (Json, Json) {
    crosscheck_with(model, gguf_py_facts(model))
}

/// `crosscheck` with the Python side's facts already read.
fn crosscheck_with(model: &Path, py: Json) -> (Json, Json) {
    let ours = inferno_report(model);
    let mut d = Diff(Vec::new());

    d.same("version", &py["version"], &ours["gguf"]["version"]);
    d.same("alignment", &py["alignment"], &ours["gguf"]["alignment"]);
    d.same("data offset", &py["data_offset"], &ours["gguf"]["data_offset"]);
    d.same("tensor count", &py["tensor_count"], &ours["gguf"]["tensor_count"]);
    d.same("metadata count", &py["metadata_count"], &ours["gguf"]["metadata_count"]);
    d.same("architecture", &py["architecture"], &ours["summary"]["architecture"]);

    let py_meta = py["metadata"].as_array().expect("facts.metadata");
    let our_meta = ours["metadata"].as_array().expect("report.metadata");
    let keys = |list: &[Json]| list.iter().map(|m| m["key"].clone()).collect::<Vec<_>>();
    d.check(|| "metadata keys or their order differ".into(), keys(py_meta) == keys(our_meta));
    for (p, o) in py_meta.iter().zip(our_meta) {
        let key = p["key"].as_str().unwrap_or("?");
        d.same(&format!("{key}: type"), &p["type"], &o["type"]);
        if p["type"] == "array" {
            let a = &o["array"];
            d.same(&format!("{key}: element type"), &p["element_type"], &a["element_type"]);
            d.same(&format!("{key}: length"), &p["length"], &a["length"]);
            if let Some(preview) = p["preview"].as_array() {
                let ours = a["preview"].as_array().map_or(&[][..], Vec::as_slice);
                let equal =
                    preview.len() == ours.len() && preview.iter().zip(ours).all(|(x, y)| same_scalar(x, y));
                d.check(|| format!("{key}: first elements differ"), equal);
            }
        } else {
            d.same(&format!("{key}: value"), &p["value"], &o["value"]);
        }
    }

    let py_tensors = py["tensors"].as_array().expect("facts.tensors");
    let our_tensors = ours["tensors"].as_array().expect("report.tensors");
    d.check(|| "tensor lists differ in length".into(), py_tensors.len() == our_tensors.len());
    for (p, o) in py_tensors.iter().zip(our_tensors) {
        let name = p["name"].as_str().unwrap_or("?");
        d.same(&format!("tensor {name}: name"), &p["name"], &o["name"]);
        d.same(&format!("tensor {name}: type"), &p["type"], &o["type"]);
        d.check(|| format!("tensor {name}: dims {} vs {}", p["dims"], o["dims"]), p["dims"] == o["dims"]);
        d.same(&format!("tensor {name}: data offset"), &p["data_offset"], &o["file_offset"]);
        d.same(&format!("tensor {name}: bytes"), &p["n_bytes"], &o["bytes"]);
        d.same(&format!("tensor {name}: elements"), &p["n_elements"], &o["elements"]);
    }

    let shown: Vec<&String> = d.0.iter().take(30).collect();
    assert!(d.0.is_empty(), "{}: {} differences, e.g.\n{shown:#?}", model.display(), d.0.len());
    (py, ours)
}

#[test]
fn synthetic_models_agree_with_gguf_py() {
    if !gguf_py_available() {
        return;
    }
    let models = synthetic_models();
    let mut facts = gguf_py_facts_of(&models);
    for model in models {
        let py = facts[model.to_str().expect("a UTF-8 path")].take();
        assert!(!py.is_null(), "{}: no facts from gguf_facts.py", model.display());
        let (_, report) = crosscheck_with(&model, py);
        let name = model.file_name().unwrap().to_string_lossy();
        // The micro files of other architectures (scripts/make_micro_models.py,
        // make_embedding_goldens.py) are named after theirs; every file here can run but the
        // tensorless vocabulary and the vision projectors (`clip-*`, scripts/make_micro_mmproj.py),
        // which go beside a model.
        let architecture = report["summary"]["architecture"].as_str().unwrap_or("?");
        assert!(name.starts_with(&format!("{architecture}-")), "{name}: architecture {architecture}");
        let runs = name != "qwen3-vocab.gguf" && architecture != "clip";
        assert_eq!(report["runs"]["ok"], runs, "{name}: {}", report["runs"]);
        assert_eq!(report["vision"].is_null(), architecture != "clip", "{name}: {}", report["vision"]);
        if architecture != "qwen3" {
            continue;
        }
        let tensors = report["gguf"]["tensor_count"].as_u64().unwrap();
        if name == "qwen3-vocab.gguf" {
            assert_eq!(tensors, 0, "the vocabulary file has no tensors");
            assert_eq!(report["tokenizer"]["vocab_size"], 151_936);
        } else {
            // 2 layers x 11 tensors + token_embd, output_norm, output.
            assert_eq!(tensors, 25, "{name}");
        }
    }
}

#[test]
fn smollm2_agrees_with_gguf_py() {
    let model = real_model(SMOLLM2);
    if !gguf_py_available() {
        return;
    }
    let (_, report) = crosscheck(&model);
    assert_eq!(report["summary"]["architecture"], "llama");
    assert_eq!(report["gguf"]["tensor_count"], 272);
    assert_eq!(report["gguf"]["metadata_count"], 33);
}

#[test]
fn gemma3_agrees_with_gguf_py() {
    let model = real_model(GEMMA3);
    if !gguf_py_available() {
        return;
    }
    let (_, report) = crosscheck(&model);
    assert_eq!(report["summary"]["architecture"], "gemma3");
    assert_eq!(report["gguf"]["tensor_count"], 236);
    assert_eq!(report["gguf"]["metadata_count"], 33);
}
