//! Mixture-of-experts routing, as llama.cpp's `build_moe_ffn` does it: the router's scores
//! (plus a bias where the family has one) become probabilities (softmax or sigmoid, or stay
//! as they are for gpt-oss), the top `used` experts are chosen (by the probabilities plus a
//! selection bias where the family has one, which moves the choice but not the weights), and
//! the chosen probabilities become the weights of the experts' outputs: renormalized to sum to
//! 1 where the family does, or for gpt-oss the softmax of the chosen scores. Backends run the
//! experts themselves.

use super::arch::Gating;
use super::config::Experts;
use super::ops::{sigmoid, softmax};

/// llama.cpp clamps the sum of the chosen weights to the smallest normal F16 before dividing by
/// it, so a token whose chosen experts all have probability 0 gets weights of 0, not NaN.
const MIN_WEIGHT_SUM: f32 = 1.0 / 16384.0; // 2^-14 = 6.1035156e-5

/// One token's choice: `(expert, weight)` for each of its `used` experts, best first.
pub type Choice = (u32, f32);

/// The router's biases, one per expert, where the family has them.
#[derive(Clone, Copy, Debug, Default)]
pub struct RouterBiases<'a> {
    /// Added to the router's scores (`ffn_gate_inp.bias`, gpt-oss).
    pub scores: Option<&'a [f32]>,
    /// Added to the probabilities for the choice alone (`exp_probs_b`, LFM2-MoE).
    pub selection: Option<&'a [f32]>,
}

/// Routes one token. `scores` (the router's `count` outputs for the token) become its
/// probabilities in place; `chosen` (`used` long) receives the experts, best first, with their
/// weights.
///
/// Ties choose the lower expert index, and a NaN score never wins over a number, so the choice
/// is the same on every backend and thread count whatever the router gives.
pub fn route(experts: &Experts, scores: &mut [f32], biases: RouterBiases, chosen: &mut [Choice]) {
    debug_assert_eq!(scores.len(), experts.count);
    debug_assert_eq!(chosen.len(), experts.used);
    if let Some(bias) = biases.scores {
        scores.iter_mut().zip(bias).for_each(|(s, &b)| *s += b);
    }
    match experts.gating {
        Gating::Softmax => softmax(scores),
        Gating::Sigmoid => scores.iter_mut().for_each(|s| *s = sigmoid(*s)),
        Gating::SoftmaxWeight => {}
    }
    let selection_bias = biases.selection;
    let key = |e: usize| {
        let p = scores[e] + selection_bias.map_or(0.0, |b| b[e]);
        if p.is_nan() { f32::NEG_INFINITY } else { p }
    };
    // Insertion into the best `used` so far: `used` is small (2 to 8 in real models).
    let mut filled = 0;
    for (e, &score) in scores.iter().enumerate() {
        let p = key(e);
        // Strictly better than the last kept one: an equal score keeps the lower index.
        if filled == chosen.len() && p <= key(chosen[filled - 1].0 as usize) {
            continue;
        }
        let mut at = filled.min(chosen.len() - 1);
        while at > 0 && p > key(chosen[at - 1].0 as usize) {
            chosen[at] = chosen[at - 1];
            at -= 1;
        }
        chosen[at] = (e as u32, score);
        filled = (filled + 1).min(chosen.len());
    }
    if experts.gating == Gating::SoftmaxWeight {
        let mut weights = [0.0f32; MAX_USED];
        let weights = &mut weights[..chosen.len()];
        weights.iter_mut().zip(chosen.iter()).for_each(|(w, &(_, score))| *w = score);
        softmax(weights);
        chosen.iter_mut().zip(weights.iter()).for_each(|((_, w), &weight)| *w = weight);
    }
    if experts.normalize {
        let sum = chosen.iter().map(|&(_, w)| f64::from(w)).sum::<f64>() as f32;
        let sum = sum.max(MIN_WEIGHT_SUM);
        chosen.iter_mut().for_each(|(_, w)| *w /= sum);
    }
}

/// Experts a token may use at most ([`super::config`] refuses more).
pub const MAX_USED: usize = super::config::MAX_EXPERTS as usize;

#[cfg(test)]
mod tests {
    use super::*;

    fn experts(count: usize, used: usize, gating: Gating, normalize: bool) -> Experts {
        Experts::routing(count, used, gating, normalize)
    }

    fn routed(e: &Experts, scores: &[f32], bias: Option<&[f32]>) -> Vec<Choice> {
        let mut scores = scores.to_vec();
        let mut chosen = vec![(u32::MAX, f32::NAN); e.used];
        route(e, &mut scores, RouterBiases { scores: None, selection: bias }, &mut chosen);
        chosen
    }

    fn ids(chosen: &[Choice]) -> Vec<u32> {
        chosen.iter().map(|&(e, _)| e).collect()
    }

    #[test]
    fn the_best_experts_come_first_with_their_softmax_weights() {
        let e = experts(4, 2, Gating::Softmax, false);
        let chosen = routed(&e, &[0.0, 2.0, -1.0, 1.0], None);
        assert_eq!(ids(&chosen), [1, 3]);
        let total: f32 = [0.0f32, 2.0, -1.0, 1.0].iter().map(|s| s.exp()).sum();
        assert!((chosen[0].1 - 2f32.exp() / total).abs() < 1e-6);
        assert!((chosen[1].1 - 1f32.exp() / total).abs() < 1e-6);
    }

    #[test]
    fn renormalized_weights_sum_to_one() {
        let e = experts(6, 3, Gating::Softmax, true);
        let chosen = routed(&e, &[0.3, -2.0, 1.5, 0.9, 0.1, 1.1], None);
        assert_eq!(ids(&chosen), [2, 5, 3]);
        let sum: f32 = chosen.iter().map(|&(_, w)| w).sum();
        assert!((sum - 1.0).abs() < 1e-6, "{sum}");
    }

    #[test]
    fn ties_choose_the_lower_index_and_a_uniform_router_weighs_equally() {
        // Every expert scored alike (a token every expert refuses equally): the first `used`.
        let e = experts(8, 3, Gating::Softmax, true);
        let chosen = routed(&e, &[-5.0; 8], None);
        assert_eq!(ids(&chosen), [0, 1, 2]);
        assert!(chosen.iter().all(|&(_, w)| (w - 1.0 / 3.0).abs() < 1e-6));
        // A tie below the best: the lower of the tied ones.
        let chosen = routed(&experts(4, 2, Gating::Softmax, false), &[0.0, 1.0, 3.0, 1.0], None);
        assert_eq!(ids(&chosen), [2, 1]);
    }

    #[test]
    fn every_expert_used_keeps_them_all_in_order() {
        let e = experts(4, 4, Gating::Softmax, true);
        let chosen = routed(&e, &[0.5, -0.5, 2.0, 1.0], None);
        assert_eq!(ids(&chosen), [2, 3, 0, 1]);
        let sum: f32 = chosen.iter().map(|&(_, w)| w).sum();
        assert!((sum - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_selection_bias_moves_the_choice_but_not_the_weights() {
        let e = experts(3, 1, Gating::Sigmoid, false);
        let chosen = routed(&e, &[1.0, 0.0, -1.0], Some(&[0.0, 0.0, 5.0]));
        assert_eq!(ids(&chosen), [2]);
        assert!((chosen[0].1 - 1.0 / (1.0 + 1f32.exp())).abs() < 1e-6);
    }

    #[test]
    fn sigmoid_weights_that_sum_to_zero_stay_finite() {
        // Every chosen probability 0: llama.cpp's clamped sum gives weights of 0, not NaN.
        let e = experts(3, 2, Gating::Sigmoid, true);
        let chosen = routed(&e, &[-1e4, -1e4, -1e4], None);
        assert_eq!(ids(&chosen), [0, 1]);
        assert!(chosen.iter().all(|&(_, w)| w == 0.0));
    }

    #[test]
    fn gpt_oss_chooses_by_biased_scores_and_weighs_by_their_softmax() {
        let e = experts(4, 2, Gating::SoftmaxWeight, false);
        let mut scores = [0.5, 1.0, -2.0, 0.9];
        let mut chosen = vec![(u32::MAX, f32::NAN); 2];
        let bias = [0.0, 0.0, 3.0, 0.0];
        route(&e, &mut scores, RouterBiases { scores: Some(&bias), selection: None }, &mut chosen);
        // Biased scores 0.5, 1.0, 1.0, 0.9: the tie goes to the lower index.
        assert_eq!(ids(&chosen), [1, 2]);
        assert!(chosen.iter().all(|&(_, w)| (w - 0.5).abs() < 1e-7), "{chosen:?}");
        let mut scores = [0.0, 2.0, 1.0];
        let mut chosen = vec![(u32::MAX, f32::NAN); 2];
        route(
            &experts(3, 2, Gating::SoftmaxWeight, false),
            &mut scores,
            RouterBiases::default(),
            &mut chosen,
        );
        assert_eq!(ids(&chosen), [1, 2]);
        let e1 = 1f32.exp();
        assert!(
            (chosen[0].1 - e1 / (e1 + 1.0)).abs() < 1e-6 && (chosen[1].1 - 1.0 / (e1 + 1.0)).abs() < 1e-6
        );
    }

    #[test]
    fn nan_scores_never_win() {
        let e = experts(4, 2, Gating::Sigmoid, false);
        let chosen = routed(&e, &[f32::NAN, -3.0, f32::NAN, -4.0], None);
        assert_eq!(ids(&chosen), [1, 3]);
        // All NaN: still `used` distinct experts, in index order.
        let chosen = routed(&e, &[f32::NAN; 4], None);
        assert_eq!(ids(&chosen), [0, 1]);
    }
}
