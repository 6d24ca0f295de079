//! Whether splitting jobs pays right now, learned from the decode steps themselves.
//!
//! A decode step of a small model is a few hundred jobs of tens of microseconds, and two
//! threads beat one only while both have a core. When another process holds one of them, the
//! threads take turns on the other and every meeting waits for a descheduled one, and two
//! threads decode much slower than one (docs/benchmarks.md, "Kernel choices"). No per-job sign shows it
//! reliably (the helpers keep taking parts, just slowly), but the steps' own times do: decode
//! steps of one session do the same work, so a few timed each way say which way is faster.
//!
//! So the tuner runs trials: [`TRIAL_STEPS`] steps split and as many not split, alternating,
//! and then the faster way (by median) for a run of steps, after which it tries again. A run
//! doubles, up to [`MAX_RUN_STEPS`], while the same way keeps winning, so a steady machine
//! spends few steps on the slower way. Splitting is what the user asked for, so not splitting
//! must win clearly ([`SOLO_MARGIN`]) and is checked again sooner: a trial can be misled (in
//! the browser, V8 compiling the hot code on the other core early in a session makes split
//! steps look slow), and a wrong choice of solo steps costs most. Only single-token forward
//! passes are steps: prefill's jobs are large enough to split well even on a busy machine.

use std::sync::Mutex;

/// Decode steps a trial times each way: the median of three ignores one step that a garbage
/// collection or a page fault slowed.
const TRIAL_STEPS: usize = 3;
/// Split steps run after the first trial, or one whose winner differs from the last one's.
/// Long enough that a trial's slower steps cost a few percent at most: two threads on an idle
/// machine give up about a third of three steps in 67.
const FIRST_SPLIT_RUN_STEPS: usize = 64;
/// The same for solo steps.
const FIRST_SOLO_RUN_STEPS: usize = 16;
/// Solo steps win a trial only with a median below this share of the split steps' median.
const SOLO_MARGIN: f64 = 0.95;
/// The longest run between trials.
const MAX_RUN_STEPS: usize = 512;

#[derive(Debug)]
pub struct Tuner {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The times of the current trial's steps so far, in milliseconds (a trial runs until
    /// each way has [`TRIAL_STEPS`]).
    split_times: Vec<f64>,
    solo_times: Vec<f64>,
    /// The way the last trial chose, how many steps it still runs before the next trial, and
    /// how many it was given.
    split: bool,
    run_left: usize,
    run_len: usize,
    /// Steps run solo since the start, trials included: what the page reports.
    solo_steps: u64,
}

impl Tuner {
    pub const fn new() -> Tuner {
        Tuner {
            state: Mutex::new(State {
                split_times: Vec::new(),
                solo_times: Vec::new(),
                split: true,
                run_left: 0,
                run_len: FIRST_SPLIT_RUN_STEPS / 2,
                solo_steps: 0,
            }),
        }
    }

    /// Whether the next step splits its jobs. A trial alternates, starting with a split step.
    pub fn next_step_splits(&self) -> bool {
        let state = self.lock();
        if state.run_left > 0 { state.split } else { state.split_times.len() <= state.solo_times.len() }
    }

    /// Takes the time of a step run the way [`Tuner::next_step_splits`] said.
    pub fn record(&self, split: bool, milliseconds: f64) {
        let mut state = self.lock();
        state.solo_steps += u64::from(!split);
        if state.run_left > 0 {
            state.run_left -= 1;
            return;
        }
        if split { &mut state.split_times } else { &mut state.solo_times }.push(milliseconds);
        // Both ways are timed enough before a trial ends, even if two sessions' steps interleave.
        if state.split_times.len().min(state.solo_times.len()) < TRIAL_STEPS {
            return;
        }
        let split_wins = median(&mut state.solo_times) >= SOLO_MARGIN * median(&mut state.split_times);
        state.run_len = match (split_wins == state.split, split_wins) {
            (true, _) => (state.run_len * 2).min(MAX_RUN_STEPS),
            (false, true) => FIRST_SPLIT_RUN_STEPS,
            (false, false) => FIRST_SOLO_RUN_STEPS,
        };
        state.split = split_wins;
        state.run_left = state.run_len;
        state.split_times.clear();
        state.solo_times.clear();
    }

    /// Decode steps run on the calling thread alone so far.
    pub fn solo_steps(&self) -> u64 {
        self.lock().solo_steps
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a step panicked; the state stays consistent.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let middle = times.len() / 2;
    if times.len().is_multiple_of(2) { (times[middle - 1] + times[middle]) / 2.0 } else { times[middle] }
}

/// Milliseconds from some fixed start, for timing steps.
pub fn now_ms() -> f64 {
    #[cfg(target_family = "wasm")]
    {
        performance_now()
    }
    #[cfg(not(target_family = "wasm"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1000.0
    }
}

#[cfg(target_family = "wasm")]
#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    // `performance` exists in windows and workers alike; the threaded build runs only where
    // the page is cross-origin isolated, which gives it microsecond resolution.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `steps` steps whose split and solo times are given, returns how many split.
    fn split_steps(tuner: &Tuner, steps: usize, split_ms: f64, solo_ms: f64) -> usize {
        (0..steps)
            .filter(|_| {
                let split = tuner.next_step_splits();
                tuner.record(split, if split { split_ms } else { solo_ms });
                split
            })
            .count()
    }

    #[test]
    fn the_faster_way_wins_and_runs_longer_while_it_keeps_winning() {
        let tuner = Tuner::new();
        // The first trial: alternating, starting split.
        let ways: Vec<bool> = (0..2 * TRIAL_STEPS)
            .map(|_| {
                let split = tuner.next_step_splits();
                tuner.record(split, if split { 10.0 } else { 20.0 });
                split
            })
            .collect();
        assert_eq!(ways, [true, false].repeat(TRIAL_STEPS));
        // Split won: a run of FIRST_SPLIT_RUN_STEPS split steps, then a trial.
        assert_eq!(split_steps(&tuner, FIRST_SPLIT_RUN_STEPS, 10.0, 20.0), FIRST_SPLIT_RUN_STEPS);
        assert_eq!(split_steps(&tuner, 2 * TRIAL_STEPS, 10.0, 20.0), TRIAL_STEPS);
        // Split won again: the run doubles.
        assert_eq!(split_steps(&tuner, 2 * FIRST_SPLIT_RUN_STEPS, 10.0, 20.0), 2 * FIRST_SPLIT_RUN_STEPS);
        // The machine gets busy: the next trial picks solo steps and starts a short run.
        assert_eq!(split_steps(&tuner, 2 * TRIAL_STEPS, 30.0, 20.0), TRIAL_STEPS);
        assert_eq!(split_steps(&tuner, FIRST_SOLO_RUN_STEPS, 30.0, 20.0), 0);
        assert_eq!(tuner.solo_steps(), (3 * TRIAL_STEPS + FIRST_SOLO_RUN_STEPS) as u64);
        // Solo keeps winning: its run doubles too.
        assert_eq!(split_steps(&tuner, 2 * TRIAL_STEPS, 30.0, 20.0), TRIAL_STEPS);
        assert_eq!(split_steps(&tuner, 2 * FIRST_SOLO_RUN_STEPS, 30.0, 20.0), 0);
        // The machine is idle again: split steps win back a long run.
        assert_eq!(split_steps(&tuner, 2 * TRIAL_STEPS, 10.0, 20.0), TRIAL_STEPS);
        assert_eq!(split_steps(&tuner, FIRST_SPLIT_RUN_STEPS, 10.0, 20.0), FIRST_SPLIT_RUN_STEPS);
    }

    #[test]
    fn solo_steps_must_win_clearly() {
        let tuner = Tuner::new();
        assert_eq!(split_steps(&tuner, 2 * TRIAL_STEPS, 20.0, 19.5), TRIAL_STEPS);
        assert_eq!(split_steps(&tuner, FIRST_SPLIT_RUN_STEPS, 20.0, 19.5), FIRST_SPLIT_RUN_STEPS);
        assert_eq!(split_steps(&tuner, 2 * TRIAL_STEPS, 20.0, 18.0), TRIAL_STEPS);
        assert_eq!(split_steps(&tuner, FIRST_SOLO_RUN_STEPS, 20.0, 18.0), 0);
    }

    /// Steps of two sessions that interleave may both run the same way in a trial; the
    /// trial then goes on until both ways have their steps.
    #[test]
    fn a_trial_ends_only_when_both_ways_are_timed() {
        let tuner = Tuner::new();
        for _ in 0..2 * TRIAL_STEPS {
            tuner.record(true, 10.0);
        }
        assert!(!tuner.next_step_splits(), "the trial must time solo steps now");
        assert_eq!(split_steps(&tuner, TRIAL_STEPS, 10.0, 20.0), 0);
        assert_eq!(split_steps(&tuner, FIRST_SPLIT_RUN_STEPS, 10.0, 20.0), FIRST_SPLIT_RUN_STEPS);
    }

    #[test]
    fn one_slow_step_does_not_decide_a_trial() {
        let tuner = Tuner::new();
        let mut times = [10.0, 20.0, 500.0, 20.0, 10.0, 20.0].into_iter();
        for _ in 0..2 * TRIAL_STEPS {
            let split = tuner.next_step_splits();
            tuner.record(split, times.next().unwrap());
        }
        assert!(tuner.next_step_splits(), "a garbage collection in one split step made it lose");
        assert_eq!(split_steps(&tuner, FIRST_SPLIT_RUN_STEPS, 10.0, 20.0), FIRST_SPLIT_RUN_STEPS);
    }
}
