//! Choosing the next token from a logit vector, and explaining the choice.
//!
//! The chain runs in llama.cpp's order: grammar mask → repetition penalty → top-k → top-p →
//! min-p → temperature → draw. Top-p sees probabilities at temperature 1 over what top-k kept, and
//! min-p compares against the best surviving logit, exactly as llama.cpp's samplers do; the
//! temperature only reshapes the distribution the final draw is made from. A temperature of 0
//! (or below) is greedy: the highest logit, ties to the lowest id.
//!
//! Only as much of the vocabulary is sorted as the chain (or the trace) needs: candidates are
//! selected in growing prefixes, never a full sort per step.

mod rng;
mod trace;

/// How many of a step's best logits a device reads back in place of the whole vector
/// ([`BestLogits`]): enough for the page's largest trace (100) and any top-k up to it.
pub const BEST_LOGITS: usize = 128;

/// The best of a step's logits and the whole vocabulary's softmax statistics: what a GPU
/// reads back instead of every logit (151,936 of them for Qwen3) when the step's settings need
/// no more ([`Sampler::logits_read`]). The step then draws exactly the token the whole vector
/// would have given; only the trace's whole-vocabulary figures (probabilities, entropy) come
/// from sums taken on the device in f32 rather than here in f64.
#[derive(Clone, Debug, PartialEq)]
pub struct BestLogits {
    /// Entries of the whole vector.
    pub vocab: usize,
    /// `(id, logit)`, best first as the sampler ranks them (higher logit, then lower id), NaN
    /// read as -inf and +inf as the largest finite value; `BEST_LOGITS` of them, or the whole
    /// vocabulary where it is smaller.
    pub best: Vec<(u32, f32)>,
    /// The temperature of the statistics (1 for a greedy step).
    pub temperature: f32,
    /// `Σ exp(x)` over the vocabulary with `x = (l − max) / temperature`, non-finite `x` left out.
    pub z: f64,
    /// `Σ exp(x) · x` over the same terms (the entropy's).
    pub weighted: f64,
}

impl BestLogits {
    /// What a device reads back of `logits` at `temperature`, computed here: the reference
    /// the GPU's kernel is held to.
    pub fn of(logits: &[f32], temperature: f32) -> BestLogits {
        let mut ranked: Vec<(u32, f32)> =
            logits.iter().enumerate().map(|(id, &l)| (id as u32, ranked_logit(l))).collect();
        let n = BEST_LOGITS.min(ranked.len());
        if n > 0 && n < ranked.len() {
            ranked.select_nth_unstable_by(n - 1, better);
        }
        ranked.truncate(n);
        ranked.sort_unstable_by(better);
        let max = ranked.first().map_or(f32::NEG_INFINITY, |&(_, l)| l);
        let (mut z, mut weighted) = (0.0f64, 0.0f64);
        for &l in logits {
            let x = (ranked_logit(l) - max) / temperature;
            if x.is_finite() {
                let w = f64::from(x).exp();
                z += w;
                weighted += w * f64::from(x);
            }
        }
        BestLogits { vocab: logits.len(), best: ranked, temperature, z, weighted }
    }
}

/// A logit as the chain ranks it: NaN can never be chosen, +inf stays finite in arithmetic.
fn ranked_logit(l: f32) -> f32 {
    match l {
        l if l.is_nan() => f32::NEG_INFINITY,
        f32::INFINITY => f32::MAX,
        l => l,
    }
}

/// What a step needs read back of the logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LogitsRead {
    Every,
    /// [`BestLogits`] with statistics at this temperature.
    Best {
        temperature: f32,
    },
}

/// A step's logits as read back.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadLogits {
    Every(Vec<f32>),
    Best(BestLogits),
}

/// What a step samples from.
#[derive(Clone, Copy)]
enum StepLogits<'a> {
    Every(&'a [f32]),
    Best(&'a BestLogits),
}

pub use rng::Rng;
pub use trace::{Candidate, GrammarTrace, StepTrace};

use crate::grammar::{Constraint, GrammarError, TokenMask};

use serde::{Deserialize, Serialize};

/// The knobs of the chain. Defaults are llama.cpp's.
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplerSettings {
    /// ≤ 0 means greedy.
    pub temperature: f32,
    /// 0 disables.
    pub top_k: usize,
    /// ≥ 1 disables.
    pub top_p: f32,
    /// ≤ 0 disables.
    pub min_p: f32,
    /// 1 disables. Logits of recently seen tokens are divided by it (multiplied when negative).
    pub repeat_penalty: f32,
    /// How many of the most recent tokens the penalty looks at.
    pub repeat_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerSettings {
    fn default() -> Self {
        SamplerSettings {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 0x5EED,
        }
    }
}

impl SamplerSettings {
    pub fn greedy() -> Self {
        SamplerSettings { temperature: 0.0, ..Self::default() }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// Settings that cannot mean anything are an error rather than a silent clamp.
    pub fn validate(&self) -> Result<(), SamplerError> {
        let bad = |name: &'static str, value: f32| Err(SamplerError::BadSetting { name, value });
        if !self.temperature.is_finite() {
            return bad("temperature", self.temperature);
        }
        if !(self.top_p.is_finite() && self.top_p > 0.0) {
            return bad("top_p", self.top_p);
        }
        if !(self.min_p.is_finite() && self.min_p <= 1.0) {
            return bad("min_p", self.min_p);
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return bad("repeat_penalty", self.repeat_penalty);
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SamplerError {
    EmptyLogits,
    /// Every logit was NaN or -inf: there is nothing to choose from.
    NoFiniteLogit,
    BadSetting {
        name: &'static str,
        value: f32,
    },
    TokenOutOfRange {
        token: u32,
        vocab_size: usize,
    },
    /// The answer's grammar forbids the token asked for, or its engine failed.
    Grammar(GrammarError),
    /// The step needs every logit and only the best were read ([`Sampler::logits_read`]), or
    /// the best read back are not all there.
    PartialLogits,
}

impl From<GrammarError> for SamplerError {
    fn from(error: GrammarError) -> Self {
        SamplerError::Grammar(error)
    }
}

impl SamplerError {
    /// A stable snake_case name for the kind of problem.
    pub fn kind(&self) -> &'static str {
        match self {
            SamplerError::EmptyLogits => "empty_logits",
            SamplerError::NoFiniteLogit => "no_finite_logit",
            SamplerError::BadSetting { .. } => "bad_setting",
            SamplerError::TokenOutOfRange { .. } => "token_out_of_range",
            SamplerError::Grammar(error) => error.kind(),
            SamplerError::PartialLogits => "partial_logits",
        }
    }
}

impl std::fmt::Display for SamplerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SamplerError::EmptyLogits => write!(f, "no logits to sample from"),
            SamplerError::NoFiniteLogit => write!(f, "every logit is NaN or -inf"),
            SamplerError::BadSetting { name, value } => {
                write!(f, "sampling setting {name} = {value} is out of range")
            }
            SamplerError::TokenOutOfRange { token, vocab_size } => {
                write!(f, "token {token} is outside the vocabulary of {vocab_size}")
            }
            SamplerError::Grammar(error) => error.fmt(f),
            SamplerError::PartialLogits => {
                write!(f, "the step's settings need every logit, and only the best {BEST_LOGITS} were read")
            }
        }
    }
}

impl std::error::Error for SamplerError {}

/// What one step chose, with the explanation when one was asked for.
#[derive(Clone, Debug)]
pub struct Sampled {
    pub token: u32,
    pub trace: Option<StepTrace>,
}

pub struct Sampler {
    settings: SamplerSettings,
    rng: Rng,
    /// Penalized logits of the current step.
    logits: Vec<f32>,
    /// `(id, logit)`; the first `sorted` entries are the best, in order.
    candidates: Vec<(u32, f32)>,
    sorted: usize,
    /// The grammar the answer follows, if any, and this step's mask from it.
    constraint: Option<Constraint>,
    mask: Option<TokenMask>,
}

impl Sampler {
    pub fn new(settings: SamplerSettings) -> Result<Sampler, SamplerError> {
        settings.validate()?;
        Ok(Sampler {
            rng: Rng::new(settings.seed),
            settings,
            logits: Vec::new(),
            candidates: Vec::new(),
            sorted: 0,
            constraint: None,
            mask: None,
        })
    }

    /// Makes every later token follow `constraint` (None: no grammar).
    pub fn set_constraint(&mut self, constraint: Option<Constraint>) {
        self.constraint = constraint;
    }

    /// The grammar the answer follows, if any.
    pub fn constraint(&self) -> Option<&Constraint> {
        self.constraint.as_ref()
    }

    /// The grammar the answer follows (to roll it back with the conversation).
    pub fn constraint_mut(&mut self) -> Option<&mut Constraint> {
        self.constraint.as_mut()
    }

    pub fn settings(&self) -> &SamplerSettings {
        &self.settings
    }

    /// Replaces the settings; a new seed restarts the random stream.
    pub fn set_settings(&mut self, settings: SamplerSettings) -> Result<(), SamplerError> {
        settings.validate()?;
        if settings.seed != self.settings.seed {
            self.rng = Rng::new(settings.seed);
        }
        self.settings = settings;
        Ok(())
    }

    /// Chooses a token from `logits`. `history` is the context so far (the penalty reads its
    /// tail); `trace_top` > 0 asks for a trace with that many candidates.
    pub fn sample(
        &mut self,
        logits: &[f32],
        history: &[u32],
        trace_top: usize,
    ) -> Result<Sampled, SamplerError> {
        self.run_chain(StepLogits::Every(logits), history, None, trace_top)
    }

    /// What the next step, taking `forced` (or drawing) with a trace of `trace_top` candidates,
    /// needs of the logits: the best [`BEST_LOGITS`] suffice where nothing outside them can
    /// matter. That is: no grammar (its mask may allow only tokens further down), no repetition
    /// penalty (a penalized token may fall out of them), a greedy step or a top-k within them,
    /// a trace within them, and no forced token (which may be any).
    pub fn logits_read(&self, forced: Option<u32>, trace_top: usize) -> LogitsRead {
        let s = &self.settings;
        let penalty = s.repeat_penalty != 1.0 && s.repeat_last_n > 0;
        let truncated = s.is_greedy() || (1..=BEST_LOGITS).contains(&s.top_k);
        let fits = forced.is_none() && self.constraint.is_none() && !penalty && trace_top <= BEST_LOGITS;
        if fits && truncated {
            LogitsRead::Best { temperature: if s.is_greedy() { 1.0 } else { s.temperature } }
        } else {
            LogitsRead::Every
        }
    }

    /// [`Sampler::sample`] from the best logits a device read back, which must be what
    /// [`Sampler::logits_read`] asks for ([`SamplerError::PartialLogits`] otherwise).
    pub fn sample_best(&mut self, best: &BestLogits, trace_top: usize) -> Result<Sampled, SamplerError> {
        let whole = best.best.len() == BEST_LOGITS.min(best.vocab)
            && best.best.iter().all(|&(id, _)| (id as usize) < best.vocab);
        let asked = LogitsRead::Best { temperature: best.temperature };
        if !whole || self.logits_read(None, trace_top) != asked {
            return Err(SamplerError::PartialLogits);
        }
        self.run_chain(StepLogits::Best(best), &[], None, trace_top)
    }

    /// Runs the chain for the explanation but takes `token` instead of drawing (branching from
    /// a chosen candidate). The random stream does not advance.
    pub fn force(
        &mut self,
        logits: &[f32],
        history: &[u32],
        token: u32,
        trace_top: usize,
    ) -> Result<Sampled, SamplerError> {
        if token as usize >= logits.len() {
            return Err(SamplerError::TokenOutOfRange { token, vocab_size: logits.len() });
        }
        self.run_chain(StepLogits::Every(logits), history, Some(token), trace_top)
    }

    fn run_chain(
        &mut self,
        input: StepLogits,
        history: &[u32],
        forced: Option<u32>,
        trace_top: usize,
    ) -> Result<Sampled, SamplerError> {
        let empty = match input {
            StepLogits::Every(raw) => raw.is_empty(),
            StepLogits::Best(best) => best.best.is_empty(),
        };
        if empty {
            return Err(SamplerError::EmptyLogits);
        }
        self.mask = self.constraint.as_mut().map(Constraint::mask).transpose()?;
        if let (Some(token), Some(mask)) = (forced, &self.mask)
            && !mask.allows(token)
        {
            return Err(GrammarError::Forbidden { token }.into());
        }
        let finite = match input {
            StepLogits::Every(raw) => {
                self.load_penalized(raw, history);
                self.logits.iter().any(|l| l.is_finite())
            }
            StepLogits::Best(best) => {
                // Sorted already: the chain reads no further than its first entries.
                self.logits.clear();
                self.candidates.clear();
                self.candidates.extend_from_slice(&best.best);
                self.sorted = self.candidates.len();
                self.candidates[0].1.is_finite()
            }
        };
        if !finite {
            return Err(SamplerError::NoFiniteLogit);
        }
        let s = self.settings.clone();
        let vocab = vocab_of(input);
        let kept = if s.is_greedy() {
            self.ensure_sorted(1);
            1
        } else {
            let k = if s.top_k == 0 { vocab } else { s.top_k.min(vocab) };
            let after_top_p = self.top_p(k, s.top_p);
            self.min_p(after_top_p, s.min_p)
        };
        let temperature = if s.is_greedy() { 1.0 } else { s.temperature };
        let token = match forced {
            Some(token) => token,
            None if s.is_greedy() => self.candidates[0].0,
            None => self.draw(kept, temperature),
        };
        let trace = (trace_top > 0).then(|| self.trace(input, kept, temperature, token, trace_top));
        if let Some(constraint) = &mut self.constraint {
            constraint.accept(token)?;
        }
        Ok(Sampled { token, trace })
    }

    /// Copies `raw` into `self.logits`, what the grammar forbids at -inf, with the repetition
    /// penalty applied once per distinct recent token (llama.cpp's rule: positive logits
    /// divided, negative multiplied), and resets the candidate list. NaN becomes -inf so it can
    /// never be chosen, +inf the largest finite value so the arithmetic stays finite.
    fn load_penalized(&mut self, raw: &[f32], history: &[u32]) {
        self.logits.clear();
        self.logits.extend(raw.iter().map(|&l| ranked_logit(l)));
        if let Some(mask) = &self.mask {
            for (id, l) in self.logits.iter_mut().enumerate() {
                if !mask.allows(id as u32) {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        let penalty = self.settings.repeat_penalty;
        if penalty != 1.0 && self.settings.repeat_last_n > 0 {
            let mut recent: Vec<u32> =
                history[history.len().saturating_sub(self.settings.repeat_last_n)..].to_vec();
            recent.sort_unstable();
            recent.dedup();
            for token in recent {
                if let Some(l) = self.logits.get_mut(token as usize) {
                    *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
                }
            }
        }
        self.candidates.clear();
        self.candidates.extend(self.logits.iter().enumerate().map(|(i, &l)| (i as u32, l)));
        self.sorted = 0;
    }

    /// Makes the best `n` candidates sorted at the front (higher logit first, then lower id),
    /// selecting only the part not already sorted.
    fn ensure_sorted(&mut self, n: usize) {
        let n = n.min(self.candidates.len());
        if n <= self.sorted {
            return;
        }
        let rest = &mut self.candidates[self.sorted..];
        let want = n - self.sorted;
        let scanned = want <= SCAN_SELECT_MAX && want < rest.len() && select_best_by_scan(rest, want);
        if !scanned {
            if want < rest.len() {
                rest.select_nth_unstable_by(want - 1, better);
            }
            rest[..want].sort_unstable_by(better);
        }
        self.sorted = n;
    }

    /// Top-k then top-p: of the best `k`, keeps the shortest prefix whose probability (softmax
    /// at temperature 1 over those `k`) reaches `p`.
    fn top_p(&mut self, k: usize, p: f32) -> usize {
        if p >= 1.0 {
            self.ensure_sorted(k);
            return k;
        }
        // Everything outside the top k is gone before top-p normalizes. The sum below runs in
        // the candidates' order, so where the best logits could serve (k within them) they are
        // summed sorted, as the best logits come: the same f64 rounding, the same cutoff.
        self.ensure_sorted(if k <= BEST_LOGITS { k } else { k.min(64) });
        if k < self.candidates.len() && self.sorted < k {
            let rest = &mut self.candidates[self.sorted..];
            rest.select_nth_unstable_by(k - self.sorted - 1, better);
        }
        let max = self.candidates[0].1;
        let total: f64 = self.candidates[..k].iter().map(|&(_, l)| f64::from(libm::expf(l - max))).sum();
        let target = f64::from(p) * total;
        let mut cumulative = 0.0f64;
        let mut i = 0;
        while i < k {
            if i == self.sorted {
                self.ensure_sorted((2 * self.sorted).max(64).min(k));
            }
            cumulative += f64::from(libm::expf(self.candidates[i].1 - max));
            i += 1;
            if cumulative >= target {
                break;
            }
        }
        i
    }

    /// Keeps candidates whose probability is at least `min_p` times the best one's.
    fn min_p(&self, kept: usize, min_p: f32) -> usize {
        if min_p <= 0.0 {
            return kept;
        }
        let threshold = self.candidates[0].1 + libm::logf(min_p);
        self.candidates[..kept].iter().take_while(|&&(_, l)| l >= threshold).count().max(1)
    }

    /// Draws from the first `kept` (sorted) candidates with probabilities `softmax(l / T)`.
    fn draw(&mut self, kept: usize, temperature: f32) -> u32 {
        let max = self.candidates[0].1;
        let weight = |l: f32| f64::from(libm::expf((l - max) / temperature));
        let total: f64 = self.candidates[..kept].iter().map(|&(_, l)| weight(l)).sum();
        let target = self.rng.next_f64() * total;
        let mut cumulative = 0.0;
        for &(id, l) in &self.candidates[..kept] {
            cumulative += weight(l);
            if cumulative > target {
                return id;
            }
        }
        self.candidates[kept - 1].0
    }

    fn trace(
        &mut self,
        input: StepLogits,
        kept: usize,
        temperature: f32,
        chosen: u32,
        top: usize,
    ) -> StepTrace {
        self.ensure_sorted(top.max(kept));
        let max = self.candidates[0].1;
        let (z, weighted) = match input {
            StepLogits::Every(_) => {
                // One pass over the whole vocabulary for the normalizer and the entropy: each
                // weight in f32 (a few ulps; an f64 exponential per entry cost ~5 % of a Gemma 3
                // step with its 262,144 entries), summed in f64.
                let (mut z, mut weighted) = (0.0f64, 0.0f64);
                for &l in &self.logits {
                    let x = (l - max) / temperature;
                    if x.is_finite() {
                        let w = libm::expf(x);
                        z += f64::from(w);
                        weighted += f64::from(w * x);
                    }
                }
                (z, weighted)
            }
            StepLogits::Best(best) => (best.z, best.weighted),
        };
        // The best logits carry the ranked value (no penalty or mask applies to them; +inf
        // shows as f32::MAX and NaN as -inf, as they were ranked).
        let raw_logit = |id: u32, ranked: f32| match input {
            StepLogits::Every(raw) => raw[id as usize],
            StepLogits::Best(_) => ranked,
        };
        let entropy_nats = z.ln() - weighted / z;
        let probability = |l: f32| (f64::from((l - max) / temperature).exp() / z) as f32;
        let kept_weight: f64 = self.candidates[..kept].iter().map(|&(_, l)| f64::from(probability(l))).sum();
        let candidates = self.candidates[..top.min(self.candidates.len())]
            .iter()
            .filter(|&&(_, l)| self.mask.is_none() || l > f32::NEG_INFINITY)
            .enumerate()
            .map(|(rank, &(id, l))| Candidate {
                id,
                logit: raw_logit(id, l),
                probability: probability(l),
                sample_probability: if rank < kept {
                    (f64::from(probability(l)) / kept_weight) as f32
                } else {
                    0.0
                },
                in_nucleus: rank < kept,
            })
            .collect();
        let chosen_rank = self.candidates.iter().position(|&(id, _)| id == chosen);
        let chosen_logit = match input {
            StepLogits::Every(_) => self.logits[chosen as usize],
            // Drawn from the kept candidates, so among them.
            StepLogits::Best(_) => chosen_rank.map_or(f32::NEG_INFINITY, |rank| self.candidates[rank].1),
        };
        StepTrace {
            candidates,
            chosen,
            chosen_rank: chosen_rank.filter(|&r| r < self.sorted),
            chosen_probability: probability(chosen_logit),
            nucleus_size: kept,
            nucleus_mass: kept_weight as f32,
            excluded: vocab_of(input) - kept,
            entropy_bits: (entropy_nats / std::f64::consts::LN_2) as f32,
            temperature: if self.settings.is_greedy() { 0.0 } else { temperature },
            grammar: match (input, &self.mask) {
                (StepLogits::Every(raw), Some(mask)) => Some(grammar_trace(raw, mask, temperature, top)),
                _ => None,
            },
        }
    }
}

/// Entries of the whole logit vector.
fn vocab_of(input: StepLogits) -> usize {
    match input {
        StepLogits::Every(raw) => raw.len(),
        StepLogits::Best(best) => best.vocab,
    }
}

/// What the grammar took from the model at a step: its `top` best tokens (by raw logit) that
/// the mask forbade, with the probability the model gave each (over the whole vocabulary at
/// the step's temperature, before penalty and mask), and their share of it all.
fn grammar_trace(raw: &[f32], mask: &TokenMask, temperature: f32, top: usize) -> GrammarTrace {
    let finite = |l: f32| if l.is_finite() { l } else { f32::NEG_INFINITY };
    let max = raw.iter().copied().map(finite).fold(f32::NEG_INFINITY, f32::max);
    let weight = |l: f32| f64::from(libm::expf((finite(l) - max) / temperature));
    let (mut z, mut forbidden_weight) = (0.0f64, 0.0f64);
    let mut forbidden: Vec<(u32, f32)> = Vec::new();
    for (id, &l) in raw.iter().enumerate() {
        let w = weight(l);
        z += w;
        if !mask.allows(id as u32) {
            forbidden_weight += w;
            forbidden.push((id as u32, finite(l)));
        }
    }
    let want = top.min(forbidden.len());
    if want > 0 && want < forbidden.len() {
        forbidden.select_nth_unstable_by(want - 1, better);
    }
    forbidden.truncate(want);
    forbidden.sort_unstable_by(better);
    GrammarTrace {
        allowed: mask.allowed(),
        forbidden_mass: (forbidden_weight / z) as f32,
        forbidden: forbidden
            .into_iter()
            .map(|(id, l)| Candidate {
                id,
                logit: l,
                probability: (weight(l) / z) as f32,
                sample_probability: 0.0,
                in_nucleus: false,
            })
            .collect(),
    }
}

/// Up to this many candidates are selected by [`select_best_by_scan`]; more by quickselect.
const SCAN_SELECT_MAX: usize = 64;

/// Moves the best `want` of `candidates` to its front, sorted, in one pass: the front is kept
/// sorted and an entry enters it only when it beats the worst kept one. Over a vocabulary,
/// with few candidates wanted, almost every entry costs one comparison, several times cheaper
/// than quickselect's repeated partitioning (which took 2–4 % of a Gemma 3 decode step).
/// Gives up (false, `candidates` merely permuted) when entries keep entering, as they do in
/// logits that rise along the vocabulary, before that costs more than quickselect.
fn select_best_by_scan(candidates: &mut [(u32, f32)], want: usize) -> bool {
    candidates[..want].sort_unstable_by(better);
    let mut entries_left = candidates.len() / 16 + want;
    for i in want..candidates.len() {
        if better(&candidates[i], &candidates[want - 1]).is_lt() {
            if entries_left == 0 {
                return false;
            }
            entries_left -= 1;
            candidates.swap(i, want - 1);
            let mut j = want - 1;
            while j > 0 && better(&candidates[j], &candidates[j - 1]).is_lt() {
                candidates.swap(j, j - 1);
                j -= 1;
            }
        }
    }
    true
}

/// Higher logit first; among equal logits the lower id (llama.cpp's greedy tie rule).
fn better(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests;
