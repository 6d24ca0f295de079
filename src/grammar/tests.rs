use super::*;
use crate::engine::Engine;
use crate::sampler::{Rng, Sampler, SamplerError, SamplerSettings};
use crate::tokenizer::Tokenizer;

fn engine() -> Engine {
    let path = crate::test_files::model("qwen3-micro-q4_0.gguf");
    Engine::load(std::fs::read(path).unwrap()).unwrap()
}

fn allowed_ids(mask: &TokenMask, vocab: usize) -> Vec<u32> {
    (0..vocab as u32).filter(|&id| mask.allows(id)).collect()
}

/// Walks `constraint` with uniformly random allowed tokens until it ends: the text it spelled.
fn random_walk(engine: &Engine, constraint: Constraint, seed: u64) -> String {
    walk(engine.tokenizer(), constraint, seed)
}

fn walk(tokenizer: &Tokenizer, mut constraint: Constraint, seed: u64) -> String {
    let vocab = tokenizer.vocab_size();
    let mut rng = Rng::new(seed);
    let mut tokens = Vec::new();
    for _ in 0..2000 {
        let mask = constraint.mask().unwrap();
        let allowed = allowed_ids(&mask, vocab);
        assert!(!allowed.is_empty(), "the grammar allows nothing after {tokens:?}");
        let token = allowed[(rng.next_f64() * allowed.len() as f64) as usize % allowed.len()];
        constraint.accept(token).unwrap();
        if tokenizer.is_end_of_generation(token) {
            return tokenizer.decode(&tokens);
        }
        tokens.push(token);
    }
    panic!("no end after 2000 tokens: {}", tokenizer.decode(&tokens));
}

/// Real vocabularies, whose masks llguidance sizes in its own way (SmolLM2's once failed an
/// assertion in it): Qwen3's 151,669 entries, and SmolLM2's 49,152.
#[test]
fn real_vocabularies_compile_and_walk() {
    let qwen3 = crate::test_files::model("qwen3-vocab.gguf");
    let smollm2 = crate::test_files::model("SmolLM2-135M-Instruct.Q4_1.gguf");
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["ok", "n"],
        "additionalProperties": false
    });
    for path in [qwen3, smollm2] {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let gguf = crate::gguf::Gguf::parse(&bytes).unwrap();
        let tokenizer = Tokenizer::from_metadata(gguf.metadata()).unwrap();
        let compiler = GrammarCompiler::new(&tokenizer).unwrap();
        for seed in 0..3 {
            let text =
                walk(&tokenizer, compiler.compile(&GrammarSpec::JsonSchema(schema.clone())).unwrap(), seed);
            let value: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert!(value["ok"].is_boolean(), "{}: {text}", path.display());
        }
    }
}

#[test]
fn random_walks_through_a_schema_spell_valid_json() {
    let engine = engine();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 6},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "colour": {"enum": ["red", "green", "blue"]},
            "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 3}
        },
        "required": ["name", "age", "colour"],
        "additionalProperties": false
    });
    for seed in 0..5 {
        let constraint = engine.constraint(&GrammarSpec::JsonSchema(schema.clone())).unwrap();
        let text = random_walk(&engine, constraint, seed);
        let value: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}: {text}"));
        let object = value.as_object().unwrap_or_else(|| panic!("seed {seed}: not an object: {text}"));
        assert!(object.keys().all(|k| ["name", "age", "colour", "scores"].contains(&k.as_str())), "{text}");
        assert!(object["name"].as_str().is_some_and(|s| s.chars().count() <= 6), "{text}");
        assert!(object["age"].as_u64().is_some_and(|age| age <= 150), "{text}");
        assert!(["red", "green", "blue"].contains(&object["colour"].as_str().unwrap_or("")), "{text}");
        if let Some(scores) = object.get("scores") {
            let scores = scores.as_array().unwrap();
            assert!(scores.len() <= 3 && scores.iter().all(serde_json::Value::is_number), "{text}");
        }
    }
}

#[test]
fn json_object_starts_with_a_brace_and_a_lark_grammar_spells_only_its_words() {
    let engine = engine();
    let tokenizer = engine.tokenizer();
    let vocab = tokenizer.vocab_size();
    let mut object = engine.constraint(&GrammarSpec::JsonObject).unwrap();
    let first = object.mask().unwrap();
    for id in allowed_ids(&first, vocab) {
        let text = String::from_utf8_lossy(tokenizer.token_bytes(id, false)).into_owned();
        assert!(text.trim_start().starts_with('{') || text.trim().is_empty(), "{id} {text:?} may start it");
    }
    assert!(first.allowed() > 0);
    for id in tokenizer.end_of_generation_tokens() {
        assert!(!first.allows(*id), "an empty answer is not a JSON object");
    }
    let lark = GrammarSpec::Lark(r#"start: ("yes" | "no") " please""#.into());
    for seed in 0..4 {
        let text = random_walk(&engine, engine.constraint(&lark).unwrap(), seed);
        assert!(text == "yes please" || text == "no please", "{text:?}");
    }
}

/// A control token named in a grammar (llguidance's `<|…|>`) is that token and only it, while
/// the same text quoted can be spelled only with text tokens: harmony's call grammar names its
/// markers so where the vocabulary has them as control tokens (gpt-oss's).
#[test]
fn a_control_token_named_in_a_grammar_is_the_token_and_quoted_is_text() {
    let engine = engine();
    let tokenizer = engine.tokenizer();
    let im_start = tokenizer.token_id("<|im_start|>").unwrap();
    let mut named = engine.constraint(&GrammarSpec::Lark(r#"start: <|im_start|> "x""#.into())).unwrap();
    assert_eq!(allowed_ids(&named.mask().unwrap(), tokenizer.vocab_size()), [im_start]);
    let mut quoted = engine.constraint(&GrammarSpec::Lark(r#"start: "<|im_start|>" "x""#.into())).unwrap();
    let allowed = allowed_ids(&quoted.mask().unwrap(), tokenizer.vocab_size());
    assert!(!allowed.is_empty() && !allowed.contains(&im_start), "{allowed:?}");
}

#[test]
fn schemas_and_grammars_that_cannot_be_used_are_typed_errors() {
    let engine = engine();
    let kind = |spec: GrammarSpec| engine.constraint(&spec).err().map(|e| e.kind());
    assert_eq!(kind(GrammarSpec::JsonSchema(serde_json::json!({"type": "not-a-type"}))), Some("bad_schema"));
    assert_eq!(kind(GrammarSpec::JsonSchema(serde_json::json!({"$ref": "#/nowhere"}))), Some("bad_schema"));
    assert_eq!(kind(GrammarSpec::Lark("start: (".into())), Some("bad_grammar"));
    assert_eq!(kind(GrammarSpec::Lark("start: missing_rule".into())), Some("bad_grammar"));
    // A grammar no string satisfies.
    let empty =
        kind(GrammarSpec::JsonSchema(serde_json::json!({"type": "integer", "minimum": 5, "maximum": 1})));
    assert_eq!(empty, Some("bad_schema"));
}

#[test]
fn a_rolled_back_constraint_allows_what_it_allowed_then() {
    let engine = engine();
    let spec = GrammarSpec::JsonSchema(serde_json::json!({"type": "array", "items": {"type": "integer"}}));
    let mut constraint = engine.constraint(&spec).unwrap();
    let vocab = engine.tokenizer().vocab_size();
    let mut rng = Rng::new(9);
    let mut masks = Vec::new();
    for _ in 0..6 {
        let mask = constraint.mask().unwrap();
        let allowed: Vec<u32> = allowed_ids(&mask, vocab)
            .into_iter()
            .filter(|id| !engine.tokenizer().is_end_of_generation(*id))
            .collect();
        masks.push(mask);
        constraint.accept(allowed[(rng.next_f64() * allowed.len() as f64) as usize % allowed.len()]).unwrap();
    }
    constraint.rollback(4).unwrap();
    assert_eq!(constraint.consumed(), 2);
    assert_eq!(constraint.mask().unwrap(), masks[2]);
}

/// The mask comes first: a forbidden token never wins however high its logit, the trace
/// names what the grammar took and how much of the model's probability that was, and a
/// branch to a forbidden token is refused.
#[test]
fn the_sampler_applies_the_mask_first_and_traces_what_it_forbade() {
    let engine = engine();
    let tokenizer = engine.tokenizer();
    let vocab = tokenizer.vocab_size();
    let plain = crate::tokenizer::EncodeOptions { add_special: false, parse_special: false };
    let (yes, no) = (tokenizer.encode("the", plain), tokenizer.encode("and", plain));
    assert_eq!((yes.len(), no.len()), (1, 1), "one token each in this vocabulary");
    let spec = GrammarSpec::Lark(r#"start: "the""#.into());
    let mut logits = vec![0.0f32; vocab];
    logits[no[0] as usize] = 20.0;
    logits[yes[0] as usize] = 1.0;
    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    sampler.set_constraint(Some(engine.constraint(&spec).unwrap()));
    let sampled = sampler.sample(&logits, &[], 5).unwrap();
    assert_eq!(sampled.token, yes[0]);
    let trace = sampled.trace.unwrap();
    assert!(trace.candidates.iter().all(|c| c.id != no[0]), "forbidden tokens are not candidates");
    let grammar = trace.grammar.unwrap();
    assert_eq!(grammar.forbidden[0].id, no[0]);
    assert!(grammar.forbidden[0].probability > 0.99 && grammar.forbidden_mass > 0.99, "{grammar:?}");
    assert!(grammar.allowed >= 1 && grammar.allowed < vocab);

    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    sampler.set_constraint(Some(engine.constraint(&spec).unwrap()));
    let refused = sampler.force(&logits, &[], no[0], 0).unwrap_err();
    assert_eq!(refused, SamplerError::Grammar(GrammarError::Forbidden { token: no[0] }));
}

#[test]
fn a_schema_keyword_the_engine_cannot_enforce_is_refused_when_strict_and_named_when_lenient() {
    let engine = engine();
    let schema = serde_json::json!({"type": "array", "items": {"type": "integer"}, "uniqueItems": true});
    let strict = engine.constraint(&GrammarSpec::JsonSchema(schema.clone())).err().unwrap();
    assert_eq!(strict.kind(), "bad_schema");
    assert!(strict.to_string().contains("uniqueItems"), "{strict}");
    let lenient = engine.constraint(&GrammarSpec::LenientJsonSchema(schema.clone())).unwrap();
    assert!(lenient.warnings().iter().any(|w| w.contains("uniqueItems")), "{:?}", lenient.warnings());
    // What it can enforce, it still does: an array of integers.
    for seed in 0..3 {
        let constraint = engine.constraint(&GrammarSpec::LenientJsonSchema(schema.clone())).unwrap();
        let text = random_walk(&engine, constraint, seed);
        let value: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(value.as_array().unwrap().iter().all(serde_json::Value::is_i64), "{text}");
    }
    let fully = serde_json::json!({"type": "array", "items": {"type": "integer"}});
    assert!(engine.constraint(&GrammarSpec::LenientJsonSchema(fully)).unwrap().warnings().is_empty());
}
