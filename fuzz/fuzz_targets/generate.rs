//! A whole mutated model through the engine: `Engine::load` (header, config, weights, the
//! vocabulary-versus-embedding check, tokenizer, chat template), the chat prompt rendered and
//! tokenized for a 64-token context, a session prefilled with it, and two sampled tokens (the
//! second runs the first through the model). Besides "never panics": every sampled id is in
//! the vocabulary, and no input makes the engine allocate more than the bound the README
//! states (`inferno_fuzz::allocation_bound`), in total or in one allocation.

#![no_main]

use inferno::chat::ChatMessage;
use inferno::engine::Engine;
use inferno::sampler::{Sampler, SamplerSettings};
use inferno_fuzz::{CountingAllocator, allocation_bound};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator::new();

const CONTEXT: usize = 64;

fuzz_target!(|data: &[u8]| {
    let baseline = ALLOCATOR.start();
    let state_bytes = run(data);
    let report = ALLOCATOR.report(baseline);
    let bound = allocation_bound(data.len(), state_bytes);
    assert!(
        report.peak <= bound,
        "{} bytes live at once for a {}-byte file (bound {bound})",
        report.peak,
        data.len()
    );
    assert!(report.largest <= bound, "one allocation of {} bytes (bound {bound})", report.largest);
});

/// Loads and generates; returns the session's state bytes (0 when it never got that far).
fn run(data: &[u8]) -> usize {
    let Ok(engine) = Engine::load(data.to_vec()) else { return 0 };
    let messages = [ChatMessage { role: "user".into(), content: "Hi there".into() }];
    let Ok(prompt) = engine.chat_prompt(&messages, None, CONTEXT) else { return 0 };
    let Ok(mut session) = engine.new_session(CONTEXT) else { return 0 };
    let state_bytes = session.state_bytes(&engine);
    if session.sync(&engine, &prompt).is_err() {
        return state_bytes;
    }
    let settings = SamplerSettings { seed: 7, ..SamplerSettings::default() };
    let mut sampler = Sampler::new(settings).expect("the default settings are valid");
    let vocab = engine.model().config().vocab_size;
    for _ in 0..2 {
        let Ok(step) = session.step(&engine, &mut sampler, None, 8) else { break };
        assert!((step.token as usize) < vocab, "sampled {} from a vocabulary of {vocab}", step.token);
        let _ = engine.piece(step.token);
    }
    state_bytes
}
