use super::*;
use crate::chat::ReplyFormat;
use crate::sampler::SamplerSettings;

fn fixture(path: &str) -> Vec<u8> {
    let path = crate::test_files::fixture(path);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn engine() -> Engine {
    Engine::load(fixture("models/qwen3-micro-q4_0.gguf")).unwrap()
}

/// llama.cpp's prompt ids and greedy continuation for the "capital" prompt.
fn golden_capital() -> (Vec<u32>, Vec<u32>) {
    let golden: serde_json::Value = serde_json::from_slice(&fixture("golden/qwen3-micro-q4_0.json")).unwrap();
    let ids = |key: &str| -> Vec<u32> {
        golden["prompts"]["capital"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect()
    };
    (ids("prompt_ids"), ids("generated_ids"))
}

fn greedy() -> Sampler {
    Sampler::new(SamplerSettings::greedy()).unwrap()
}

/// Greedy steps follow llama.cpp's continuation; they may part only at a near-tie (llama.cpp's
/// token within the 4-bit logit tolerance, 0.1, of ours), after which the texts differ anyway.
fn assert_follows_golden(generated: &[(u32, Vec<(u32, f32)>)], expected: &[u32]) {
    let same = generated.iter().zip(expected).take_while(|((ours, _), theirs)| ours == *theirs).count();
    if let Some((ours, top)) = generated.get(same) {
        let theirs = expected[same];
        let logit = |id: u32| top.iter().find(|(t, _)| *t == id).map(|&(_, l)| l);
        let margin = logit(*ours).unwrap() - logit(theirs).unwrap_or(f32::NEG_INFINITY);
        assert!(
            margin < 0.1,
            "parted from llama.cpp at step {same} ({ours} vs {theirs}) by a margin of {margin}"
        );
    }
    assert!(same >= 16, "only {same} steps agree");
}

#[test]
fn greedy_steps_reproduce_llama_cpp_continuation() {
    let engine = engine();
    let (prompt, expected) = golden_capital();
    assert_eq!(engine.encode("The capital of France is"), prompt);
    let mut session = engine.new_session(64).unwrap();
    assert_eq!(
        session.sync(&engine, &prompt).unwrap(),
        SyncReport { reused: 0, evaluated: prompt.len(), replayed: 0 }
    );
    let mut sampler = greedy();
    let generated: Vec<(u32, Vec<(u32, f32)>)> = (0..expected.len())
        .map(|_| {
            let step = session.step(&engine, &mut sampler, None, 3).unwrap();
            let top = step.trace.unwrap().candidates.iter().map(|c| (c.id, c.logit)).collect();
            (step.token, top)
        })
        .collect();
    assert_follows_golden(&generated, &expected);
    let ids: Vec<u32> = generated.iter().map(|(t, _)| *t).collect();
    assert_eq!(session.tokens(), [prompt, ids].concat());
}

#[test]
fn sync_evaluates_only_what_the_cache_does_not_hold() {
    let engine = engine();
    let (prompt, _) = golden_capital();
    let mut session = engine.new_session(64).unwrap();
    session.sync(&engine, &prompt).unwrap();
    // Same tokens: nothing to do.
    assert_eq!(
        session.sync(&engine, &prompt).unwrap(),
        SyncReport { reused: prompt.len(), evaluated: 0, replayed: 0 }
    );
    // A longer conversation: only the new tokens.
    let longer = [prompt.clone(), vec![11, 12, 13]].concat();
    assert_eq!(
        session.sync(&engine, &longer).unwrap(),
        SyncReport { reused: prompt.len(), evaluated: 3, replayed: 0 }
    );
    // Going back to a prefix re-runs its last token to get its logits.
    assert_eq!(
        session.sync(&engine, &prompt).unwrap(),
        SyncReport { reused: prompt.len() - 1, evaluated: 1, replayed: 0 }
    );
    // A different continuation after a shared prefix.
    let branch = [prompt[..3].to_vec(), vec![40, 41]].concat();
    assert_eq!(session.sync(&engine, &branch).unwrap(), SyncReport { reused: 3, evaluated: 2, replayed: 0 });
    // The logits equal those of evaluating the branch from scratch.
    let mut fresh = engine.new_session(64).unwrap();
    fresh.sync(&engine, &branch).unwrap();
    assert_eq!(session.logits, fresh.logits);
}

#[test]
fn a_prefill_in_parts_ends_where_one_in_a_single_call_does() {
    let engine = engine();
    let (prompt, _) = golden_capital();
    let mut whole = engine.new_session(64).unwrap();
    whole.sync(&engine, &prompt).unwrap();

    let mut parts = engine.new_session(64).unwrap();
    let mut progress = Vec::new();
    loop {
        let part = parts.sync_some(&engine, &prompt, 2).unwrap();
        progress.push(part);
        assert!(part.evaluated <= 2);
        if part.remaining == 0 {
            break;
        }
        assert!(parts.logits.is_empty(), "no logits before the last part");
    }
    assert_eq!(
        progress[0],
        SyncProgress { reused: 0, evaluated: 2, replayed: 0, remaining: prompt.len() - 2 }
    );
    assert_eq!(progress.iter().map(|p| p.evaluated).sum::<usize>(), prompt.len());
    assert_eq!(parts.len(), prompt.len());
    assert_eq!(parts.logits, whole.logits);
    // A stopped prefill is a prefix like any other: syncing to another prompt keeps it.
    let mut stopped = engine.new_session(64).unwrap();
    stopped.sync_some(&engine, &prompt, 3).unwrap();
    let other = [prompt[..2].to_vec(), vec![40, 41]].concat();
    assert_eq!(stopped.sync(&engine, &other).unwrap(), SyncReport { reused: 2, evaluated: 2, replayed: 0 });
}

#[test]
fn a_sampled_token_is_evaluated_only_when_generation_continues() {
    let engine = engine();
    let (prompt, expected) = golden_capital();
    let mut session = engine.new_session(64).unwrap();
    session.sync(&engine, &prompt).unwrap();
    let mut sampler = greedy();
    session.step(&engine, &mut sampler, None, 0).unwrap();
    assert_eq!(session.evaluated.len(), prompt.len());
    assert_eq!(session.len(), prompt.len() + 1);
    // The next turn's prompt contains the pending token: it is evaluated, not re-sampled.
    let next = [prompt.clone(), vec![expected[0], 5]].concat();
    assert_eq!(
        session.sync(&engine, &next).unwrap(),
        SyncReport { reused: prompt.len(), evaluated: 2, replayed: 0 }
    );
}

#[test]
fn branching_rolls_back_and_forces_a_token() {
    let engine = engine();
    let (prompt, expected) = golden_capital();
    let mut session = engine.new_session(64).unwrap();
    session.sync(&engine, &prompt).unwrap();
    let mut sampler = greedy();
    for _ in 0..5 {
        session.step(&engine, &mut sampler, None, 0).unwrap();
    }
    session.truncate(prompt.len() + 2);
    let forced = (expected[2] + 1) % 8000;
    let step = session.step(&engine, &mut sampler, Some(forced), 5).unwrap();
    assert_eq!(step.token, forced);
    let trace = step.trace.unwrap();
    assert_eq!(trace.chosen, forced);
    assert_eq!(trace.candidates[0].id, expected[2], "the trace still shows what greedy would take");
    assert_eq!(session.tokens(), [prompt.clone(), expected[..2].to_vec(), vec![forced]].concat());
}

#[test]
fn a_full_context_is_a_clear_error() {
    let engine = engine();
    let (prompt, _) = golden_capital();
    let mut session = engine.new_session(prompt.len() + 2).unwrap();
    session.sync(&engine, &prompt).unwrap();
    let mut sampler = greedy();
    // The cache holds the prompt and two generated tokens; a third can still be sampled
    // from the last logits, a fourth cannot.
    for _ in 0..3 {
        session.step(&engine, &mut sampler, None, 0).unwrap();
    }
    assert_eq!(session.room(), 0);
    let error = session.step(&engine, &mut sampler, None, 0).unwrap_err();
    assert!(error.is_context_full(), "{error}");
    let too_long = vec![1; prompt.len() + 3];
    assert!(matches!(session.sync(&engine, &too_long), Err(EngineError::PromptTooLong { .. })));
    assert!(matches!(session.sync(&engine, &[]), Err(EngineError::EmptyPrompt)));
    assert!(matches!(session.sync(&engine, &[9_999_999]), Err(EngineError::Model(_))));
}

/// Each cache type holds what its blocks take (Q8_0: 34 bytes per 32 values) and continues the
/// golden prompt as llama.cpp does with the same cache (`scripts/make_goldens.py
/// --cache-type-k/-v`; F32 against its attention without flash attention, which reads F32 rows
/// as they are); a type the heads do not fit is refused with its kind.
#[test]
fn sessions_keep_their_cache_in_the_types_asked_for() {
    use crate::model::{KvType, KvTypes};
    let mut engine = Engine::load(fixture("models/qwen3-micro-q8_0.gguf")).unwrap();
    // llama.cpp's bits: its F16 values' sums rounded to F16.
    engine.set_attention_precision(AttentionPrecision::Exact);
    let f16_bytes = engine.new_session(64).unwrap().cache_bytes();
    // Keys and values of E values each: F16 4E bytes in all; Q8_0 E / 32 blocks of 34 bytes each.
    let q8_0_bytes = f16_bytes / 4 / 32 * 34;
    for (keys, values, bytes, golden) in [
        (KvType::Q8_0, KvType::Q8_0, 2 * q8_0_bytes, "q8_0"),
        (KvType::F32, KvType::F32, 2 * f16_bytes, "f32"),
        (KvType::Q8_0, KvType::F16, q8_0_bytes + f16_bytes / 2, "q8_0-f16"),
    ] {
        let golden: serde_json::Value =
            serde_json::from_slice(&fixture(&format!("golden/kv-cache/qwen3-micro-q8_0.{golden}.json")))
                .unwrap();
        let ids = |key: &str| -> Vec<u32> {
            let list = golden["prompts"]["capital"][key].as_array().unwrap();
            list.iter().map(|v| v.as_u64().unwrap() as u32).collect()
        };
        engine.set_cache_types(KvTypes { keys, values }).unwrap();
        let mut session = engine.new_session(64).unwrap();
        assert_eq!(session.cache_bytes(), bytes, "{keys:?} keys, {values:?} values");
        session.sync(&engine, &ids("prompt_ids")).unwrap();
        let mut sampler = greedy();
        let expected = ids("generated_ids");
        let generated: Vec<u32> =
            expected.iter().map(|_| session.step(&engine, &mut sampler, None, 0).unwrap().token).collect();
        assert_eq!(generated, expected, "{keys:?} keys, {values:?} values");
    }
    assert_eq!(engine.cache_types(), KvTypes { keys: KvType::Q8_0, values: KvType::F16 });

    // The BERT micro file has heads of 16: not whole Q8_0 blocks.
    let mut bert = Engine::load(fixture("models/bert-micro-q8_0.gguf")).unwrap();
    let error = bert.set_cache_types(KvTypes { keys: KvType::F16, values: KvType::Q8_0 }).unwrap_err();
    assert_eq!(error.kind(), "unfit_cache_type", "{error}");
    assert_eq!(bert.cache_types(), KvTypes::default(), "a refused type leaves the last one");
    bert.set_cache_types(KvTypes { keys: KvType::F32, values: KvType::F32 }).unwrap();
}

#[test]
fn streamed_text_joins_into_the_decoded_text() {
    let engine = engine();
    let prompt =
        engine.chat_prompt(&[ChatMessage::new("user", "Write ü and 中文")], Some(false), 256).unwrap();
    let mut session = engine.new_session(128).unwrap();
    session.sync(&engine, &prompt).unwrap();
    let mut sampler = Sampler::new(SamplerSettings {
        seed: 3,
        temperature: 1.5,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        ..Default::default()
    })
    .unwrap();
    let (mut text, mut ids) = (String::new(), Vec::new());
    for _ in 0..40 {
        let step = session.step(&engine, &mut sampler, None, 0).unwrap();
        if step.end_of_generation {
            break;
        }
        text.push_str(&step.text);
        ids.push(step.token);
    }
    let mut detokenizer = engine.tokenizer().detokenizer(false);
    let mut expected: String = ids.iter().map(|&id| detokenizer.push(id)).collect();
    expected.push_str(&detokenizer.finish());
    assert!(expected.starts_with(&text) && expected.len() - text.len() <= 3, "{text:?} vs {expected:?}");
}

/// The micro model with extra metadata entries (for the keys llama.cpp reads beyond the
/// architecture's own).
fn micro_with_metadata(extra: &[(&str, crate::gguf::Value)]) -> Engine {
    load_micro_with_metadata(extra).unwrap()
}

/// [`micro_with_metadata`] as `Engine::load` answers it; `extra` entries replace the file's.
fn load_micro_with_metadata(extra: &[(&str, crate::gguf::Value)]) -> Result<Engine, EngineError> {
    load_with_metadata("models/qwen3-micro-q4_0.gguf", extra)
}

/// A fixture file with `extra` metadata entries replacing or joining its own, as loaded.
fn load_with_metadata(
    fixture_path: &str,
    extra: &[(&str, crate::gguf::Value)],
) -> Result<Engine, EngineError> {
    use crate::gguf::{Gguf, writer::GgufWriter};
    let bytes = fixture(fixture_path);
    let file = Gguf::parse(&bytes).unwrap();
    let mut writer = GgufWriter::new();
    for (key, value) in file.metadata().iter() {
        if extra.iter().all(|(replaced, _)| *replaced != key) {
            writer = writer.kv(key, value.clone());
        }
    }
    for (key, value) in extra {
        writer = writer.kv(key, value.clone());
    }
    for tensor in &file.header.tensors {
        let data = file.tensor_data(tensor).to_vec();
        writer = writer.tensor(&tensor.name, &tensor.dims, tensor.ggml_type, data);
    }
    let bytes = writer.to_bytes();
    // The inspector's header-only verdict must agree with loading, whatever the file.
    let verdict = Engine::check_header(&crate::gguf::Gguf::parse(&bytes).unwrap().header);
    let loaded = Engine::load(bytes);
    assert_eq!(
        verdict.as_ref().map_err(ToString::to_string).err(),
        loaded.as_ref().map(drop).map_err(ToString::to_string).err(),
        "check_header and load disagree"
    );
    loaded
}

/// The inspector's "can it chat" answers what loading would, from the header alone.
#[test]
fn the_header_check_gives_loadings_verdict() {
    use crate::gguf::Value;
    assert!(load_micro_with_metadata(&[]).is_ok());
    let unknown =
        load_micro_with_metadata(&[("general.architecture", Value::String("phi3".into()))]).err().unwrap();
    assert!(unknown.to_string().contains("phi3"), "{unknown}");
    let no_heads = load_micro_with_metadata(&[("qwen3.attention.head_count", Value::U32(3))]).err().unwrap();
    assert!(no_heads.to_string().contains("head_count"), "{no_heads}");
    let template = load_micro_with_metadata(&[("tokenizer.chat_template", Value::String("{% if %}".into()))]);
    assert!(template.is_err());
}

/// A vocabulary that does not match the embedding is refused before a tokenizer is built for
/// it (here the tokenizer could not even be built: its model is unknown, which used to be the
/// error reported, after building).
#[test]
fn a_vocabulary_the_embedding_does_not_match_is_refused_before_the_tokenizer_is_built() {
    use crate::gguf::{Array, Value};
    let tokens = Value::Array(Array::String(vec![String::new(); 9000]));
    let error = load_micro_with_metadata(&[
        ("tokenizer.ggml.tokens", tokens),
        ("tokenizer.ggml.model", Value::String("no-such-tokenizer".into())),
    ])
    .err()
    .expect("refused");
    assert!(matches!(error, EngineError::VocabularyMismatch { tokenizer: 9000, model: 8026 }), "{error}");
}

#[test]
fn recommended_sampling_reads_the_files_keys_and_defaults_the_rest() {
    use crate::gguf::Value;
    assert_eq!(engine().recommended_sampling(), SamplerSettings::default());
    let engine = micro_with_metadata(&[
        ("general.sampling.temp", Value::F32(0.6)),
        ("general.sampling.top_k", Value::I32(20)),
        ("general.sampling.top_p", Value::F32(0.9)),
    ]);
    let settings = engine.recommended_sampling();
    assert_eq!((settings.temperature, settings.top_k, settings.top_p), (0.6, 20, 0.9));
    assert_eq!(settings.min_p, SamplerSettings::default().min_p);
    // A nonsensical recommendation is ignored as a whole rather than half-applied.
    let engine = micro_with_metadata(&[("general.sampling.top_p", Value::F32(-1.0))]);
    assert_eq!(engine.recommended_sampling(), SamplerSettings::default());
}

#[test]
fn a_file_held_in_pieces_runs_exactly_like_one_piece() {
    use crate::model::{ModelBytes, piece_starts};
    let bytes = fixture("models/qwen3-micro-q4_0.gguf");
    let header = ModelBytes::from(bytes.clone()).header().unwrap();
    let largest = header.tensors.iter().map(|t| t.n_bytes).max().unwrap();
    let starts = piece_starts(&header, header.data_offset.max(largest) + 64).unwrap();
    assert!(starts.len() >= 2, "the limit should force several pieces");
    let mut pieces = Vec::new();
    let mut previous = 0;
    for &start in starts.iter().chain(std::iter::once(&(bytes.len() as u64))) {
        pieces.push(bytes[previous as usize..start as usize].to_vec());
        previous = start;
    }
    let run = |engine: &Engine| -> Vec<u32> {
        let mut session = engine.new_session(64).unwrap();
        session.sync(engine, &engine.encode("The capital of France is")).unwrap();
        let mut sampler = greedy();
        (0..8).map(|_| session.step(engine, &mut sampler, None, 0).unwrap().token).collect()
    };
    let whole = Engine::load(bytes.clone()).unwrap();
    let split = Engine::load(ModelBytes::from_pieces(pieces)).unwrap();
    assert_eq!(run(&split), run(&whole));

    // Pieces that cut through a tensor are refused, not read across.
    let cut = (header.data_offset + header.tensors[0].offset + 1) as usize;
    let broken = ModelBytes::from_pieces(vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]);
    assert!(Engine::load(broken).is_err());
}

/// A template that renders far more text than the context can hold is refused before the
/// text is tokenized (10 MB here; 100 MB took 9.5 s and 2.26 GB to tokenize and then refuse).
#[test]
fn a_rendered_prompt_longer_than_the_context_can_spell_is_refused_before_tokenizing() {
    use crate::gguf::Value;
    let engine = load_micro_with_metadata(&[(
        "tokenizer.chat_template",
        Value::String("{{ 'a ' * 5000000 }}{{ messages[0].content }}".into()),
    )])
    .unwrap();
    let messages = [ChatMessage::new("user", "hi")];
    let error = engine.chat_prompt(&messages, None, 4096).expect_err("refused");
    assert!(
        matches!(error, EngineError::RenderedPromptTooLong { bytes: 10_000_002, context: 4096 }),
        "{error}"
    );
    // The bound is what the context can spell, not a guess: a prompt that fits is accepted.
    let engine = load_micro_with_metadata(&[(
        "tokenizer.chat_template",
        Value::String("{{ 'a ' * 100 }}{{ messages[0].content }}".into()),
    )])
    .unwrap();
    assert!(engine.chat_prompt(&messages, None, 4096).unwrap().len() > 100);
}

/// One convention for errors: every type names its kind, and a wrapping error keeps its cause
/// as `source()` while the page sees the family or the inner kind.
#[test]
fn errors_name_their_kind_and_keep_their_cause() {
    use crate::model::ModelError;
    use crate::tensor::TensorError;
    use crate::tokenizer::TokenizerError;
    use std::error::Error;

    let missing = EngineError::Model(ModelError::MissingKey("llama.block_count".into()));
    assert_eq!(missing.kind(), "missing_key", "a model error keeps its own kind");
    assert!(missing.source().unwrap().to_string().contains("llama.block_count"));

    let tokenizer = EngineError::Tokenizer(TokenizerError::EmptyVocabulary);
    assert_eq!(tokenizer.kind(), "tokenizer");
    let cause = tokenizer.source().unwrap().downcast_ref::<TokenizerError>().unwrap();
    assert_eq!(cause.kind(), "empty_vocabulary");

    let kernel = ModelError::Tensor(TensorError::ShapeOverflow);
    assert_eq!(kernel.kind(), "tensor");
    assert_eq!(kernel.source().unwrap().downcast_ref::<TensorError>().unwrap().kind(), "shape_overflow");
    assert!(EngineError::EmptyPrompt.source().is_none());
}

/// Qwen3.5's recurrent state cannot be truncated: rolling back restores a checkpoint and
/// replays from there. Branching, regenerating and a next turn still give what a fresh
/// session computes for the same tokens (within the rounding of a batched replay against
/// token-by-token decoding), and the replays are counted.
#[test]
fn a_recurrent_session_rolls_back_through_checkpoints() {
    rolls_back_through_checkpoints("models/qwen35-micro-q8_0.gguf");
}

/// LFM2's short convolutions keep their last inputs as a recurrent state: the same rollbacks.
#[test]
fn a_short_convolution_session_rolls_back_through_checkpoints() {
    rolls_back_through_checkpoints("models/lfm2-micro-q8_0.gguf");
}

/// Granite 4.0-H's Mamba-2 layers keep their convolution's inputs and their scan's state.
#[test]
fn a_mamba2_session_rolls_back_through_checkpoints() {
    rolls_back_through_checkpoints("models/granitehybrid-micro-q8_0.gguf");
}

fn rolls_back_through_checkpoints(file: &str) {
    let engine = Engine::load(fixture(file)).unwrap();
    let prompt = engine.encode("The capital of France is");
    let mut session = engine.new_session(128).unwrap();
    session.sync(&engine, &prompt).unwrap();
    let (_, most, each) = session.checkpoints();
    assert!(most >= 2 && each > 0, "{most} checkpoints of {each} bytes");
    let mut sampler = greedy();
    let mut top_logits = Vec::new();
    for _ in 0..40 {
        let step = session.step(&engine, &mut sampler, None, 3).unwrap();
        top_logits.push(step.trace.unwrap().candidates.iter().map(|c| (c.id, c.logit)).collect::<Vec<_>>());
    }
    let tokens = session.tokens();
    // The prompt's end and one generated stretch of CHECKPOINT_INTERVAL.
    assert_eq!(session.checkpoints().0, 2);
    assert_eq!(session.replayed(), 0);

    // Branch from generated step 20: the cache goes back to the prompt's end and replays 20
    // tokens; the step's logits are those step 20 saw.
    session.truncate(prompt.len() + 20);
    let forced = (tokens[prompt.len() + 20] + 1) % 8000;
    let step = session.step(&engine, &mut sampler, Some(forced), 3).unwrap();
    assert_eq!(session.replayed(), 20);
    let close = |a: &[(u32, f32)], b: &[(u32, f32)]| {
        a.iter().zip(b).all(|((ia, la), (ib, lb))| ia == ib && (la - lb).abs() < 1e-3)
    };
    let branch_top: Vec<_> = step.trace.unwrap().candidates.iter().map(|c| (c.id, c.logit)).collect();
    assert!(close(&branch_top, &top_logits[20]), "{branch_top:?} vs {:?}", top_logits[20]);
    let after_branch = session.step(&engine, &mut sampler, None, 3).unwrap();

    // A fresh session fed the same tokens takes the same next token.
    let branched = [&tokens[..prompt.len() + 20], &[forced]].concat();
    let mut fresh = engine.new_session(128).unwrap();
    fresh.sync(&engine, &branched).unwrap();
    let fresh_step = fresh.step(&engine, &mut greedy(), None, 3).unwrap();
    assert_eq!(fresh_step.token, after_branch.token);

    // The next turn extends the conversation: nothing is rolled back or replayed.
    let next_turn = [session.tokens(), vec![11, 12, 13]].concat();
    let report = session.sync(&engine, &next_turn).unwrap();
    assert_eq!((report.reused, report.evaluated, report.replayed), (next_turn.len() - 4, 4, 0));
    // A prompt that parts from the conversation 4 tokens after the first prompt: back to
    // the prompt's checkpoint, 4 tokens replayed, then the new ones.
    let parted = [&tokens[..prompt.len() + 4], &[7, 8][..]].concat();
    let report = session.sync(&engine, &parted).unwrap();
    assert_eq!((report.reused, report.evaluated, report.replayed), (prompt.len(), 6, 4));
    let mut fresh = engine.new_session(128).unwrap();
    fresh.sync(&engine, &parted).unwrap();
    let worst = session.logits.iter().zip(&fresh.logits).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(worst < 1e-3, "replayed logits differ by {worst}");
    // Regenerating the first answer: the prompt's checkpoint kept its logits, so nothing runs.
    let report = session.sync(&engine, &prompt).unwrap();
    assert_eq!((report.reused, report.evaluated, report.replayed), (prompt.len(), 0, 0));
    let mut fresh = engine.new_session(128).unwrap();
    fresh.sync(&engine, &prompt).unwrap();
    assert_eq!(session.logits, fresh.logits);
    let replayed = session.replayed();
    let mut sampler = greedy();
    for generated in &tokens[prompt.len()..prompt.len() + 8] {
        assert_eq!(session.step(&engine, &mut sampler, None, 0).unwrap().token, *generated);
    }
    // The new answer's tokens are new work, not replays of the earlier branch's.
    assert_eq!(session.replayed(), replayed);
}

/// Gemma 4's mixture-of-experts size is refused by name, not run as if it were dense; so is a
/// file whose shared layers have no layer to share with.
#[test]
fn a_gemma4_with_experts_or_impossible_sharing_is_refused() {
    use crate::gguf::Value;
    assert!(load_with_metadata("models/gemma4-micro-q8_0.gguf", &[]).is_ok());
    let error =
        load_with_metadata("models/gemma4-micro-q8_0.gguf", &[("gemma4.expert_count", Value::U32(8))])
            .err()
            .expect("refused");
    assert!(error.to_string().contains("mixture-of-experts"), "{error}");
    // Four shared layers of five leave the first shared (sliding) layer nothing to read.
    let error = load_with_metadata(
        "models/gemma4-micro-q8_0.gguf",
        &[("gemma4.attention.shared_kv_layers", Value::U32(4))],
    )
    .err()
    .expect("refused");
    assert!(error.to_string().contains("no earlier layer of its kind"), "{error}");
}

/// A Q8_0 quant of −128 (which ggml's quantizer never writes) is read as −127 when the file
/// loads, so every kernel, SIMD or not, prefill or decode, sees the same weight.
#[test]
fn a_q8_0_quant_of_minus_128_reads_as_minus_127() {
    use crate::model::ModelBytes;
    let bytes = fixture("models/qwen3-micro-q8_0.gguf");
    let header = ModelBytes::from(bytes.clone()).header().unwrap();
    let down = header.tensor("blk.0.ffn_down.weight").unwrap();
    assert_eq!(down.ggml_type, crate::gguf::GgmlType::Q8_0);
    // The first quant of block 0 (after its two scale bytes).
    let at = (header.data_offset + down.offset) as usize + 2;
    let with_quant = |q: i8| {
        let mut file = bytes.clone();
        file[at] = q as u8;
        let engine = Engine::load(file).unwrap();
        let mut session = engine.new_session(64).unwrap();
        session.sync(&engine, &engine.encode("The capital of France is")).unwrap();
        let mut sampler = greedy();
        (0..4).map(|_| session.step(&engine, &mut sampler, None, 5).unwrap().trace).collect::<Vec<_>>()
    };
    assert_eq!(with_quant(-128), with_quant(-127));
    assert_ne!(with_quant(-128), with_quant(127), "the quant should move the logits");
}

/// A model's F16 tensors are checked when it loads: an infinity or a NaN among the weights is
/// refused, naming the tensor (the SIMD128 kernels would count it as a finite number).
#[test]
fn an_f16_tensor_holding_an_infinity_or_nan_is_refused() {
    use crate::gguf::{GgmlType, Gguf, writer::GgufWriter};
    use crate::tensor::{WeightType, dequantize_row};
    let bytes = fixture("models/qwen3-micro-q8_0.gguf");
    let file = Gguf::parse(&bytes).unwrap();
    // The micro model with its first FFN down-projection in F16, one half of it replaced.
    let with_f16_down = |replaced: Option<u16>| {
        let mut writer = GgufWriter::new();
        for (key, value) in file.metadata().iter() {
            writer = writer.kv(key, value.clone());
        }
        for tensor in &file.header.tensors {
            let mut data = file.tensor_data(tensor).to_vec();
            let mut ggml_type = tensor.ggml_type;
            if tensor.name == "blk.0.ffn_down.weight" {
                let mut values = vec![0.0f32; tensor.dims.iter().product::<u64>() as usize];
                dequantize_row(WeightType::Q8_0, &data, &mut values).unwrap();
                data = values.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect();
                if let Some(bits) = replaced {
                    data[2 * 37..2 * 38].copy_from_slice(&bits.to_le_bytes());
                }
                ggml_type = GgmlType::F16;
            }
            writer = writer.tensor(&tensor.name, &tensor.dims, ggml_type, data);
        }
        Engine::load(writer.to_bytes())
    };
    let engine = with_f16_down(None).unwrap();
    let mut session = engine.new_session(64).unwrap();
    session.sync(&engine, &engine.encode("The capital of France is")).unwrap();
    session.step(&engine, &mut greedy(), None, 5).unwrap();
    for bits in [0x7C00u16, 0xFC00, 0x7E00, 0xFFFF] {
        let error = with_f16_down(Some(bits)).err().expect("refused").to_string();
        assert!(error.contains("blk.0.ffn_down.weight") && error.contains("element 37"), "{error}");
    }
}

/// A shard of a model split with gguf-split is refused with a typed error that says which
/// shard it is and what to do, before any key or tensor it lacks is named.
#[test]
fn a_shard_of_a_split_model_says_so() {
    use crate::gguf::{Gguf, Value, writer::GgufWriter};
    let bytes = fixture("models/qwen3-micro-q8_0.gguf");
    let file = Gguf::parse(&bytes).unwrap();
    let shard = |no: u16, with_model: bool| {
        let mut writer = GgufWriter::new()
            .kv("split.no", Value::U16(no))
            .kv("split.count", Value::U16(3))
            .kv("split.tensors.count", Value::I32(25));
        if with_model {
            for (key, value) in file.metadata().iter() {
                writer = writer.kv(key, value.clone());
            }
        }
        for tensor in file.header.tensors.iter().take(5) {
            writer = writer.tensor(
                &tensor.name,
                &tensor.dims,
                tensor.ggml_type,
                file.tensor_data(tensor).to_vec(),
            );
        }
        Engine::load(writer.to_bytes()).err().expect("refused")
    };
    for (no, with_model) in [(0, true), (2, false)] {
        let error = shard(no, with_model);
        assert_eq!(error.kind(), "split_file");
        assert!(error.to_string().starts_with(&format!("this file is shard {} of 3", no + 1)), "{error}");
    }
}

/// Milliseconds on the test machine's monotonic clock.
fn native_clock() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
}

/// Runs `answer` to its end: every event, in order.
fn run_to_end(answer: &mut Generation, engine: &Engine, session: &mut Session) -> Vec<Event> {
    let mut events = Vec::new();
    while !answer.is_done() {
        events.extend(answer.next(engine, session).unwrap());
    }
    events
}

fn greedy_answer(session: &Session, prompt: &[u32], limits: AnswerLimits) -> Generation {
    Generation::new(prompt.to_vec(), ReplyFormat::default(), greedy(), limits, session, native_clock).unwrap()
}

/// The content the deltas of `events` add up to.
fn joined_content(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Branched { delta, .. } | Event::Token { delta, .. } | Event::Done { delta, .. } => {
                Some(delta.content.as_str())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_generation_prefills_in_parts_then_streams_llama_cpps_greedy_continuation() {
    let engine = engine();
    let (prompt, expected) = golden_capital();
    let mut session = engine.new_session(64).unwrap();
    let limits =
        AnswerLimits { max_tokens: expected.len(), trace_top: 3, prefill_part: 2, ..AnswerLimits::default() };
    let mut answer = greedy_answer(&session, &prompt, limits);
    let events = run_to_end(&mut answer, &engine, &mut session);
    let parts = prompt.len().div_ceil(2);
    for (i, event) in events[..parts - 1].iter().enumerate() {
        assert!(
            matches!(event, Event::Prefill { evaluated, total } if *evaluated == 2 * (i + 1) && *total == prompt.len())
        );
    }
    let Event::Prepared { prompt: facts, structured: false, .. } = &events[parts - 1] else {
        panic!("{:?}", events[parts - 1])
    };
    assert_eq!((facts.prompt_tokens, facts.reused, facts.evaluated), (prompt.len(), 0, prompt.len()));
    let steps: Vec<(u32, Vec<(u32, f32)>)> = answer
        .steps()
        .iter()
        .map(|s| {
            (s.token, s.trace.as_ref().unwrap().trace.candidates.iter().map(|c| (c.id, c.logit)).collect())
        })
        .collect();
    assert_follows_golden(&steps, &expected);
    let Some(Event::Done { finish: Finish::MaxTokens, finish_reason: "length", usage, stats, .. }) =
        events.last()
    else {
        panic!("{:?}", events.last())
    };
    assert_eq!(
        (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens),
        (prompt.len(), expected.len(), 0)
    );
    assert_eq!(stats.generated, expected.len());
    assert_eq!(joined_content(&events), answer.text());
    let texts: String = answer.steps().iter().map(|s| s.text.as_str()).collect();
    assert_eq!(answer.text(), texts);
}

#[test]
fn a_stop_string_ends_decoding_at_the_token_that_completes_it() {
    let engine = engine();
    let (prompt, _) = golden_capital();
    let mut session = engine.new_session(64).unwrap();
    let mut free =
        greedy_answer(&session, &prompt, AnswerLimits { max_tokens: 24, ..AnswerLimits::default() });
    run_to_end(&mut free, &engine, &mut session);
    // A stop string across two steps' texts, from the middle of the answer.
    let texts: Vec<&str> = free.steps().iter().map(|s| s.text.as_str()).collect();
    let k = (texts.len() / 2..texts.len() - 1)
        .find(|&k| !texts[k].is_empty() && !texts[k + 1].is_empty())
        .unwrap();
    let stop = format!("{}{}", texts[k].chars().last().unwrap(), texts[k + 1].chars().next().unwrap());
    let whole: String = texts.concat();
    let at = whole.find(&stop).unwrap();
    // The step whose text completes the stop string's first appearance.
    let mut end = 0;
    let completing = texts.iter().position(|t| {
        end += t.len();
        end >= at + stop.len()
    });
    let completing = completing.unwrap();

    let mut session = engine.new_session(64).unwrap();
    let limits = AnswerLimits { max_tokens: 24, stops: vec![stop.clone()], ..AnswerLimits::default() };
    let mut answer = greedy_answer(&session, &prompt, limits);
    let events = run_to_end(&mut answer, &engine, &mut session);
    assert_eq!(answer.steps().len(), completing + 1, "steps up to the one that completes {stop:?}");
    // The step that completed it was sampled, never run through the model.
    assert_eq!(session.evaluated.len(), prompt.len() + completing);
    assert_eq!(answer.text(), &whole[..at]);
    assert_eq!(joined_content(&events), &whole[..at]);
    let Some(Event::Done { finish: Finish::StopString, finish_reason: "stop", stop_string: Some(s), .. }) =
        events.last()
    else {
        panic!("{:?}", events.last())
    };
    assert_eq!(s, &stop);
}

#[test]
fn a_branch_keeps_the_steps_before_it_forces_its_token_and_samples_on() {
    let engine = engine();
    let (prompt, expected) = golden_capital();
    let mut session = engine.new_session(64).unwrap();
    let mut answer =
        greedy_answer(&session, &prompt, AnswerLimits { max_tokens: 6, ..AnswerLimits::default() });
    run_to_end(&mut answer, &engine, &mut session);
    let forced = (expected[2] + 1) % 8000;
    let limits = AnswerLimits { max_tokens: 5, trace_top: 4, ..AnswerLimits::default() };
    let error = answer.branch(6, forced, limits.clone(), &engine, &mut session).unwrap_err();
    assert_eq!(error.kind(), "bad_request", "step 6 of 6 steps is refused");
    let kept: Vec<StepRecord> = answer.steps()[..2].to_vec();
    let mut branch = answer;
    branch.branch(2, forced, limits, &engine, &mut session).unwrap();
    let events = run_to_end(&mut branch, &engine, &mut session);
    let Event::Branched { step: 2, kept: kept_now, delta, .. } = &events[0] else {
        panic!("{:?}", events[0])
    };
    assert_eq!(
        kept_now.iter().map(|s| s.token).collect::<Vec<_>>(),
        kept.iter().map(|s| s.token).collect::<Vec<_>>()
    );
    assert_eq!(delta.content, kept.iter().map(|s| s.text.as_str()).collect::<String>());
    let Event::Token { step, .. } = &events[1] else { panic!("{:?}", events[1]) };
    assert!(step.forced && step.token == forced && step.index == 2 && step.position == prompt.len() + 2);
    assert_eq!(
        step.trace.as_ref().unwrap().trace.candidates[0].id,
        expected[2],
        "the trace shows greedy's choice"
    );
    assert_eq!(branch.steps().len(), 5, "max_tokens counts the kept steps");
    let Some(Event::Done { usage, stats, .. }) = events.last() else { panic!() };
    assert_eq!((usage.completion_tokens, usage.cached_tokens, stats.generated), (5, prompt.len(), 3));
    let tokens: Vec<u32> = branch.steps().iter().map(|s| s.token).collect();
    assert_eq!(session.tokens(), [prompt, tokens].concat());
}
