//! The engine's side of the JS contract as TypeScript: `www/lib/engine-types.d.ts` holds the
//! declarations ts-rs makes from the Rust types the engine takes (the answer requests, the
//! sampling settings) and sends (an answer's events, its steps and traces). This test checks the committed file is
//! what the types say; `INFERNO_BLESS=1 cargo test --lib contract` rewrites it. The JS side
//! (`protocol.js`, `inferno.d.ts`, `defaults.js`) is typed from that file, so `tsc -p www`
//! fails when a field changes here and is not followed there.

use ts_rs::{Config, TS};

use super::answer::{CallDelta, Delta};
use super::generation::{Checkpoints, Event, Finish, PromptFacts, Stats, StepRecord, TracedStep, Usage};
use super::request::{AnswerRequest, BranchRequest, ChatRequest, GrammarRequest, LimitsRequest, TextRequest};
use crate::chat::{CallSyntax, ChatMessage, FunctionCall, FunctionSpec, ReasoningEffort, Tool, ToolCall};
use crate::sampler::{Candidate, GrammarTrace, SamplerSettings, StepTrace};
use crate::vision::ProjectorFacts;

const HEADER: &str = "\
// Generated from the engine's Rust types by ts-rs (src/engine/contract.rs): do not edit.
// `INFERNO_BLESS=1 cargo test --lib contract` rewrites it after a change there.
";

/// One declaration, exported, with its doc comment.
fn declaration<T: TS + ?Sized + 'static>(cfg: &Config) -> String {
    let docs = T::docs().unwrap_or_default();
    format!("{docs}export {}\n", T::decl(cfg))
}

fn declarations() -> String {
    // serde_json writes 64-bit integers as numbers (seeds stay below 2^53).
    let cfg = Config::new().with_large_int("number");
    let all = [
        declaration::<ChatRequest>(&cfg),
        declaration::<TextRequest>(&cfg),
        declaration::<BranchRequest>(&cfg),
        declaration::<AnswerRequest>(&cfg),
        declaration::<LimitsRequest>(&cfg),
        declaration::<GrammarRequest>(&cfg),
        declaration::<ReasoningEffort>(&cfg),
        declaration::<ChatMessage>(&cfg),
        declaration::<Tool>(&cfg),
        declaration::<FunctionSpec>(&cfg),
        declaration::<ToolCall>(&cfg),
        declaration::<FunctionCall>(&cfg),
        declaration::<Event>(&cfg),
        declaration::<Finish>(&cfg),
        declaration::<PromptFacts>(&cfg),
        declaration::<StepRecord>(&cfg),
        declaration::<TracedStep>(&cfg),
        declaration::<StepTrace>(&cfg),
        declaration::<Candidate>(&cfg),
        declaration::<GrammarTrace>(&cfg),
        declaration::<Delta>(&cfg),
        declaration::<CallDelta>(&cfg),
        declaration::<Usage>(&cfg),
        declaration::<Stats>(&cfg),
        declaration::<Checkpoints>(&cfg),
        declaration::<CallSyntax>(&cfg),
        declaration::<SamplerSettings>(&cfg),
        declaration::<ProjectorFacts>(&cfg),
    ];
    format!("{HEADER}\n{}", all.join("\n"))
}

#[test]
fn the_committed_typescript_declarations_are_the_engines_types() {
    // Found at run time (`test_files::repo`): a test binary reused by another clone from the
    // shared build cache would otherwise read the checkout it was built in.
    let path = crate::test_files::repo().join("www/lib/engine-types.d.ts");
    let want = declarations();
    if std::env::var_os("INFERNO_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is not what the engine's types say: `INFERNO_BLESS=1 cargo test --lib contract` rewrites it",
        path.display()
    );
}
