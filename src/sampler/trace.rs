//! The explanation of one sampling step, for the page's visualizer and `generate --trace`.

use serde::Serialize;

/// One of the highest-ranked tokens of a step.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    pub id: u32,
    /// The model's raw logit (before the repetition penalty).
    pub logit: f32,
    /// Probability over the whole vocabulary at the step's temperature (after the penalty),
    /// before any truncation: what the model "believes".
    pub probability: f32,
    /// Probability of being drawn: renormalized over the nucleus, 0 outside it.
    pub sample_probability: f32,
    /// Survived top-k, top-p and min-p.
    pub in_nucleus: bool,
}

#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepTrace {
    /// Best first (penalized logit, ties to the lower id).
    pub candidates: Vec<Candidate>,
    pub chosen: u32,
    /// Rank of the chosen token when it is among the ranked candidates.
    pub chosen_rank: Option<usize>,
    /// Its probability over the whole vocabulary at the step's temperature.
    pub chosen_probability: f32,
    /// Tokens that survived the truncation samplers.
    pub nucleus_size: usize,
    /// Their share of the whole-vocabulary probability at the step's temperature.
    pub nucleus_mass: f32,
    /// Vocabulary entries the truncation removed.
    pub excluded: usize,
    /// Entropy of the whole-vocabulary distribution at the step's temperature, in bits.
    pub entropy_bits: f32,
    /// 0 for greedy steps (whose probabilities are shown at temperature 1).
    pub temperature: f32,
    /// With a grammar: what it allowed and what it took from the model.
    pub grammar: Option<GrammarTrace>,
}

/// What the answer's grammar did at a step.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GrammarTrace {
    /// Vocabulary entries it allowed.
    pub allowed: usize,
    /// The model's best tokens that it forbade (best first), each with the probability the
    /// model gave it before the mask (`sample_probability` 0, `in_nucleus` false).
    pub forbidden: Vec<Candidate>,
    /// The share of the model's probability that went to forbidden tokens.
    pub forbidden_mass: f32,
}
