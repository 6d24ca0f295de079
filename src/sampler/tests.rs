use super::*;

fn settings(temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> SamplerSettings {
    SamplerSettings { temperature, top_k, top_p, min_p, repeat_penalty: 1.0, repeat_last_n: 64, seed: 1 }
}

/// Logits whose temperature-1 probabilities are exactly `probs`.
fn logits_of(probs: &[f32]) -> Vec<f32> {
    probs.iter().map(|p| p.ln()).collect()
}

fn nucleus(s: SamplerSettings, logits: &[f32]) -> usize {
    let mut sampler = Sampler::new(s).unwrap();
    sampler.sample(logits, &[], 4).unwrap().trace.unwrap().nucleus_size
}

#[test]
fn greedy_takes_the_highest_logit_and_the_lowest_id_on_ties() {
    let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
    assert_eq!(sampler.sample(&[0.1, 2.0, -1.0, 2.0], &[], 0).unwrap().token, 1);
    assert_eq!(sampler.sample(&[3.0, 2.0, 5.0], &[], 0).unwrap().token, 2);
}

#[test]
fn top_p_keeps_the_shortest_prefix_reaching_p() {
    let logits = logits_of(&[0.5, 0.3, 0.15, 0.05]);
    assert_eq!(nucleus(settings(1.0, 0, 0.79, 0.0), &logits), 2);
    assert_eq!(nucleus(settings(1.0, 0, 0.81, 0.0), &logits), 3);
    assert_eq!(nucleus(settings(1.0, 0, 0.1, 0.0), &logits), 1);
    assert_eq!(nucleus(settings(1.0, 0, 1.0, 0.0), &logits), 4);
}

#[test]
fn top_p_normalizes_over_what_top_k_kept() {
    // Over the best two, probabilities are 0.625 and 0.375: p = 0.6 keeps one, 0.7 keeps both.
    let logits = logits_of(&[0.5, 0.3, 0.15, 0.05]);
    assert_eq!(nucleus(settings(1.0, 2, 0.6, 0.0), &logits), 1);
    assert_eq!(nucleus(settings(1.0, 2, 0.7, 0.0), &logits), 2);
}

#[test]
fn min_p_is_relative_to_the_best_token() {
    let logits = logits_of(&[0.5, 0.3, 0.15, 0.05]);
    assert_eq!(nucleus(settings(1.0, 0, 1.0, 0.5), &logits), 2); // keeps p ≥ 0.25
    assert_eq!(nucleus(settings(1.0, 0, 1.0, 0.25), &logits), 3); // keeps p ≥ 0.125
}

#[test]
fn repeat_penalty_divides_positive_and_multiplies_negative_logits_once_per_token() {
    let s = SamplerSettings { repeat_penalty: 2.0, ..SamplerSettings::greedy() };
    let mut sampler = Sampler::new(s).unwrap();
    // Token 0 (4.0) is repeated three times but penalized once: 2.0 < 3.0 of token 1.
    let sampled = sampler.sample(&[4.0, 3.0, -1.0], &[0, 0, 0, 2], 3).unwrap();
    assert_eq!(sampled.token, 1);
    assert_eq!(sampler.logits, vec![2.0, 3.0, -2.0]);
    // Only the last `repeat_last_n` tokens count.
    let s = SamplerSettings { repeat_penalty: 2.0, repeat_last_n: 1, ..SamplerSettings::greedy() };
    let mut sampler = Sampler::new(s).unwrap();
    assert_eq!(sampler.sample(&[4.0, 3.0, -1.0], &[0, 2], 0).unwrap().token, 0);
}

#[test]
fn draws_follow_the_tempered_distribution() {
    let logits = logits_of(&[0.5, 0.3, 0.15, 0.05]);
    for temperature in [1.0f32, 0.5] {
        let mut sampler = Sampler::new(settings(temperature, 0, 1.0, 0.0)).unwrap();
        let mut counts = [0usize; 4];
        let n = 40_000;
        for _ in 0..n {
            counts[sampler.sample(&logits, &[], 0).unwrap().token as usize] += 1;
        }
        let weights: Vec<f64> =
            [0.5f64, 0.3, 0.15, 0.05].iter().map(|p| p.powf(1.0 / f64::from(temperature))).collect();
        let total: f64 = weights.iter().sum();
        for (count, w) in counts.iter().zip(&weights) {
            let expected = w / total;
            let seen = *count as f64 / n as f64;
            assert!((seen - expected).abs() < 0.01, "T={temperature}: {seen} vs {expected}");
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_tokens() {
    let logits: Vec<f32> = (0..1000).map(|i| ((i * 7919) % 1000) as f32 / 200.0).collect();
    let run = |seed| {
        let mut sampler = Sampler::new(SamplerSettings { seed, ..SamplerSettings::default() }).unwrap();
        (0..50).map(|_| sampler.sample(&logits, &[], 0).unwrap().token).collect::<Vec<_>>()
    };
    assert_eq!(run(9), run(9));
    assert_ne!(run(9), run(10));
}

#[test]
fn partial_selection_agrees_with_a_full_sort() {
    let mut rng = Rng::new(3);
    let logits: Vec<f32> = (0..50_000).map(|_| (rng.next_f64() * 12.0) as f32).collect();
    let mut sorted = logits.clone();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let max = sorted[0];
    for (top_k, top_p) in [(0usize, 0.9f32), (0, 0.5), (2000, 0.95), (10, 0.99)] {
        let k = if top_k == 0 { sorted.len() } else { top_k };
        let weights: Vec<f64> = sorted[..k].iter().map(|&l| f64::from((l - max).exp())).collect();
        let total: f64 = weights.iter().sum();
        let mut cumulative = 0.0;
        let expected = weights.iter().take_while(|&&w| {
            let below = cumulative < f64::from(top_p) * total;
            cumulative += w;
            below
        });
        let expected = expected.count();
        assert_eq!(
            nucleus(settings(1.0, top_k, top_p, 0.0), &logits),
            expected,
            "top_k {top_k} top_p {top_p}"
        );
    }
}

#[test]
fn the_best_candidates_come_out_sorted_whatever_the_vocabulary_order() {
    // Random logits with many ties (the scan), and logits rising along the vocabulary, where
    // the scan gives up and quickselect finishes.
    let mut rng = Rng::new(11);
    let tied: Vec<f32> = (0..20_000).map(|_| (rng.next_f64() * 50.0).floor() as f32).collect();
    let rising: Vec<f32> = (0..20_000).map(|i| i as f32 * 1e-3).collect();
    for logits in [tied, rising] {
        let mut expected: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
        expected.sort_by(better);
        for top in [1usize, 10, 64] {
            let mut sampler = Sampler::new(SamplerSettings::greedy()).unwrap();
            let sampled = sampler.sample(&logits, &[], top).unwrap();
            assert_eq!(sampled.token, expected[0].0);
            let ids: Vec<u32> = sampled.trace.unwrap().candidates.iter().map(|c| c.id).collect();
            let wanted: Vec<u32> = expected[..top].iter().map(|&(id, _)| id).collect();
            assert_eq!(ids, wanted, "top {top}");
        }
    }
}

#[test]
fn trace_reports_probabilities_nucleus_and_entropy() {
    let logits = logits_of(&[0.25, 0.25, 0.25, 0.25]);
    let mut sampler = Sampler::new(settings(1.0, 0, 0.5, 0.0)).unwrap();
    let trace = sampler.sample(&logits, &[], 10).unwrap().trace.unwrap();
    assert_eq!(trace.candidates.len(), 4);
    assert!((trace.entropy_bits - 2.0).abs() < 1e-5);
    assert_eq!(trace.nucleus_size, 2);
    assert_eq!(trace.excluded, 2);
    assert!((trace.nucleus_mass - 0.5).abs() < 1e-6);
    let in_nucleus: Vec<bool> = trace.candidates.iter().map(|c| c.in_nucleus).collect();
    assert_eq!(in_nucleus, [true, true, false, false]);
    let drawn: f32 = trace.candidates.iter().map(|c| c.sample_probability).sum();
    assert!((drawn - 1.0).abs() < 1e-6);
    assert!(trace.candidates[..2].iter().any(|c| c.id == trace.chosen));
    assert!((trace.chosen_probability - 0.25).abs() < 1e-6);

    // At temperature 0.5 the whole-vocabulary probabilities sharpen.
    let logits = logits_of(&[0.6, 0.4]);
    let mut sampler = Sampler::new(settings(0.5, 0, 1.0, 0.0)).unwrap();
    let trace = sampler.sample(&logits, &[], 2).unwrap().trace.unwrap();
    let expected = 0.36 / (0.36 + 0.16);
    assert!((trace.candidates[0].probability - expected).abs() < 1e-6);
    assert_eq!(trace.candidates[0].logit, 0.6f32.ln());
}

#[test]
fn forcing_a_token_explains_the_step_without_advancing_the_random_stream() {
    let logits = logits_of(&[0.4, 0.3, 0.2, 0.1]);
    let mut plain = Sampler::new(settings(1.0, 0, 1.0, 0.0)).unwrap();
    let mut forced = Sampler::new(settings(1.0, 0, 1.0, 0.0)).unwrap();
    let sampled = forced.force(&logits, &[], 3, 4).unwrap();
    assert_eq!(sampled.token, 3);
    assert_eq!(sampled.trace.unwrap().chosen_rank, Some(3));
    for _ in 0..10 {
        assert_eq!(
            plain.sample(&logits, &[], 0).unwrap().token,
            forced.sample(&logits, &[], 0).unwrap().token
        );
    }
    assert_eq!(
        forced.force(&logits, &[], 4, 0).unwrap_err(),
        SamplerError::TokenOutOfRange { token: 4, vocab_size: 4 }
    );
}

#[test]
fn hostile_logits_and_settings_are_errors_not_panics() {
    let mut sampler = Sampler::new(SamplerSettings::default()).unwrap();
    assert_eq!(sampler.sample(&[], &[], 0).unwrap_err(), SamplerError::EmptyLogits);
    assert_eq!(
        sampler.sample(&[f32::NAN, f32::NEG_INFINITY], &[], 0).unwrap_err(),
        SamplerError::NoFiniteLogit
    );
    for _ in 0..100 {
        let token = sampler.sample(&[f32::NAN, 1.0, f32::INFINITY, 0.5], &[7, 900], 4).unwrap().token;
        assert_eq!(token, 2, "+inf dominates and NaN is never drawn");
    }
    for bad in [
        SamplerSettings { temperature: f32::NAN, ..SamplerSettings::default() },
        SamplerSettings { top_p: 0.0, ..SamplerSettings::default() },
        SamplerSettings { min_p: 1.5, ..SamplerSettings::default() },
        SamplerSettings { repeat_penalty: 0.0, ..SamplerSettings::default() },
    ] {
        assert!(matches!(Sampler::new(bad), Err(SamplerError::BadSetting { .. })));
    }
}

/// The first draws for seed 9 over a fixed logit vector. `tests/web/` asserts the same
/// sequence inside the browser: the same seed gives the same tokens natively and in wasm.
fn pinned_logits() -> Vec<f32> {
    (0..1000).map(|i| ((i * 7919) % 1000) as f32 / 200.0).collect()
}

#[test]
fn seeded_draws_are_pinned() {
    let mut sampler = Sampler::new(SamplerSettings { seed: 9, ..SamplerSettings::default() }).unwrap();
    let tokens: Vec<u32> = (0..12).map(|_| sampler.sample(&pinned_logits(), &[], 0).unwrap().token).collect();
    assert_eq!(tokens, PINNED_SEED_9);
}

const PINNED_SEED_9: [u32; 12] = [321, 889, 605, 667, 235, 988, 25, 99, 926, 457, 988, 198];

/// Logits with ties, a NaN and an infinity among ordinary values, as a model may give.
fn awkward_logits(vocab: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut logits: Vec<f32> = (0..vocab).map(|_| (rng.next_f64() * 12.0 - 6.0) as f32).collect();
    logits[7] = logits[3]; // A tie, settled by the lower id.
    logits[11] = f32::NAN;
    logits[13] = f32::NEG_INFINITY;
    logits
}

#[test]
fn the_best_logits_draw_what_every_logit_draws_and_explain_it_alike() {
    let settings = [
        SamplerSettings::greedy(),
        settings(0.7, 40, 0.95, 0.05),
        settings(1.5, BEST_LOGITS, 1.0, 0.0),
        settings(1.0, 1, 0.5, 0.0),
        // Past the 64 the full path sorts before top-p: its sum must run in the same order.
        settings(1.2, 100, 0.9, 0.0),
    ];
    for (case, s) in settings.into_iter().enumerate() {
        let (mut every, mut best) = (Sampler::new(s.clone()).unwrap(), Sampler::new(s.clone()).unwrap());
        let LogitsRead::Best { temperature } = every.logits_read(None, 20) else {
            panic!("settings {case} read the best logits")
        };
        for step in 0..40 {
            let logits = awkward_logits(1000, (case * 100 + step) as u64);
            let a = every.sample(&logits, &[], 20).unwrap();
            let b = best.sample_best(&BestLogits::of(&logits, temperature), 20).unwrap();
            assert_eq!(a.token, b.token, "settings {case}, step {step}");
            let (a, b) = (a.trace.unwrap(), b.trace.unwrap());
            let ids = |t: &StepTrace| t.candidates.iter().map(|c| (c.id, c.in_nucleus)).collect::<Vec<_>>();
            assert_eq!(ids(&a), ids(&b));
            assert_eq!(
                (a.chosen_rank, a.nucleus_size, a.excluded),
                (b.chosen_rank, b.nucleus_size, b.excluded)
            );
            for (x, y) in a.candidates.iter().zip(&b.candidates) {
                assert_eq!(x.logit.to_bits(), y.logit.to_bits());
                assert!((x.probability - y.probability).abs() <= 1e-6 * x.probability.max(1e-3));
                assert!((x.sample_probability - y.sample_probability).abs() <= 1e-6);
            }
            assert!((a.entropy_bits - b.entropy_bits).abs() < 1e-4, "{} {}", a.entropy_bits, b.entropy_bits);
            assert!((a.chosen_probability - b.chosen_probability).abs() <= 1e-6);
        }
    }
}

#[test]
fn the_best_logits_are_refused_where_the_step_needs_every_one() {
    let logits = awkward_logits(1000, 1);
    let needs_every = [
        SamplerSettings { repeat_penalty: 1.1, ..SamplerSettings::default() },
        settings(0.8, 0, 0.95, 0.0),
        settings(0.8, BEST_LOGITS + 1, 0.95, 0.0),
    ];
    for s in needs_every {
        let mut sampler = Sampler::new(s.clone()).unwrap();
        assert_eq!(sampler.logits_read(None, 20), LogitsRead::Every, "{s:?}");
        let best = BestLogits::of(&logits, s.temperature);
        assert_eq!(sampler.sample_best(&best, 20).unwrap_err(), SamplerError::PartialLogits);
    }
    let mut sampler = Sampler::new(SamplerSettings::default()).unwrap();
    assert_eq!(sampler.logits_read(Some(5), 20), LogitsRead::Every, "a forced token may be any");
    assert_eq!(sampler.logits_read(None, BEST_LOGITS + 1), LogitsRead::Every, "a trace longer than the best");
    assert_eq!(sampler.logits_read(None, 20), LogitsRead::Best { temperature: 0.8 });
    // Statistics at another temperature, or a list cut short, are not what it asked for.
    assert_eq!(
        sampler.sample_best(&BestLogits::of(&logits, 1.0), 20).unwrap_err(),
        SamplerError::PartialLogits
    );
    let mut short = BestLogits::of(&logits, 0.8);
    short.best.pop();
    assert_eq!(sampler.sample_best(&short, 20).unwrap_err(), SamplerError::PartialLogits);
}
