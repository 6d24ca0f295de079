//! Splitting work across threads, above the kernels: a matmul by weight rows, attention by
//! heads, a prefill batch's element-wise steps by rows. Each task runs the same single-threaded
//! kernel on its own part and writes only its own outputs, so no sum changes with the thread
//! count (parity with llama.cpp holds for any).
//!
//! With the `threads` feature, parts run on [`pool::Pool`]: the calling thread plus helper
//! threads. Natively the helpers are plain threads (`--threads N` starts N - 1 of them); in the
//! browser's shared-memory build each runs on a Web Worker of its own that `initThreadPool(N - 1)`
//! starts (`src/web/pool_helpers.js`). Without the feature parts run one after another.
//!
//! Why several parts per thread: a thread that the OS deschedules (another process holding a
//! core) holds back only one small part, and the others take the rest.
//!
//! Decode steps go through [`decode_step`], which times them and lets [`tuner`] decide whether
//! their jobs are split at all: on a machine where another process holds a core, one thread
//! decodes a small model faster than two.

#[cfg(feature = "threads")]
mod pool;
#[cfg(feature = "threads")]
mod tuner;

#[cfg(feature = "threads")]
static TUNER: tuner::Tuner = tuner::Tuner::new();

/// Cleared while the tuner has a decode step run its jobs on the calling thread alone.
#[cfg(feature = "threads")]
static SPLITTING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether jobs are split across threads now.
fn splitting() -> bool {
    #[cfg(feature = "threads")]
    {
        SPLITTING.load(std::sync::atomic::Ordering::Relaxed) && threads() > 1
    }
    #[cfg(not(feature = "threads"))]
    {
        false
    }
}

/// Decode steps run on one thread so far although the pool has more (see [`decode_step`]):
/// what tells a user why two threads decode no faster than one on a busy machine.
pub fn solo_steps() -> u64 {
    #[cfg(feature = "threads")]
    {
        TUNER.solo_steps()
    }
    #[cfg(not(feature = "threads"))]
    {
        0
    }
}

/// Runs one decode step (a single-token forward pass), split across threads or not as the
/// tuner has found faster on this machine lately, and gives it the step's time.
pub fn decode_step<R>(step: impl FnOnce() -> R) -> R {
    #[cfg(feature = "threads")]
    if threads() > 1 {
        use std::sync::atomic::Ordering::Relaxed;
        let split = TUNER.next_step_splits();
        SPLITTING.store(split, Relaxed);
        let start = tuner::now_ms();
        let result = step();
        TUNER.record(split, tuner::now_ms() - start);
        SPLITTING.store(true, Relaxed);
        return result;
    }
    step()
}

/// Parts per thread when a job is split (see the module comment).
const TASKS_PER_THREAD: usize = 4;

/// The thread count a native program uses unless told otherwise: the machine's cores, at most
/// [`MAX_DEFAULT_THREADS`] (past that, decode is bound by memory bandwidth, not cores).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_DEFAULT_THREADS)
}

/// The most threads used by default, natively and in the page.
pub const MAX_DEFAULT_THREADS: usize = 8;

/// The thread count [`start_pool`] set; 0 until then (the default applies).
#[cfg(feature = "threads")]
static CONFIGURED_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

#[cfg(feature = "threads")]
static POOL: std::sync::OnceLock<pool::Pool> = std::sync::OnceLock::new();

/// The pool, made on first use with the configured number of helpers. Natively its helpers are
/// started here; in the browser each is a Web Worker that calls [`help`] (`src/web/pool_helpers.js`).
#[cfg(feature = "threads")]
fn pool() -> &'static pool::Pool {
    let pool = POOL.get_or_init(|| {
        let threads = match CONFIGURED_THREADS.load(std::sync::atomic::Ordering::Relaxed) {
            0 => default_threads(),
            threads => threads,
        };
        pool::Pool::new(threads - 1)
    });
    #[cfg(not(target_family = "wasm"))]
    START_HELPERS.call_once(|| {
        for i in 0..pool.threads() - 1 {
            std::thread::Builder::new()
                .name(format!("inferno-helper-{i}"))
                .spawn(move || pool.help())
                .expect("cannot start a helper thread");
        }
    });
    pool
}

#[cfg(all(feature = "threads", not(target_family = "wasm")))]
static START_HELPERS: std::sync::Once = std::sync::Once::new();

/// Runs the pool's parts on the calling thread forever: what each helper Web Worker of the
/// browser's shared-memory build does once it has instantiated the module.
#[cfg(all(feature = "threads", target_family = "wasm"))]
pub fn help() -> ! {
    pool().help()
}

/// How many threads parallel work runs on.
pub fn threads() -> usize {
    #[cfg(feature = "threads")]
    {
        pool().threads()
    }
    #[cfg(not(feature = "threads"))]
    {
        1
    }
}

/// Sets how many threads parallel work runs on. Must run before any parallel work, once per
/// process. In the browser, helpers that have not arrived yet cost nothing but speed: the
/// caller runs every part no helper has taken.
#[cfg(feature = "threads")]
pub fn start_pool(threads: usize) -> Result<(), String> {
    if threads == 0 {
        return Err("the thread count must be at least 1".into());
    }
    CONFIGURED_THREADS.store(threads, std::sync::atomic::Ordering::Relaxed);
    let started = pool().threads();
    if started != threads {
        return Err(format!("the pool already runs {started} threads"));
    }
    Ok(())
}

/// [`start_pool`] in a build without threads: one thread is all there is.
#[cfg(not(feature = "threads"))]
pub fn start_pool(threads: usize) -> Result<(), String> {
    match threads {
        1 => Ok(()),
        _ => Err(format!("this build runs on one thread, not {threads}")),
    }
}

/// How many parts to cut `units` units of work into, for parts of at least `min_units` each:
/// one part on one thread (or while jobs are not split), otherwise up to [`TASKS_PER_THREAD`]
/// per thread.
pub fn part_count(units: usize, min_units: usize) -> usize {
    if !splitting() {
        return 1;
    }
    (units / min_units.max(1)).clamp(1, threads() * TASKS_PER_THREAD)
}

/// Runs `task` on each of `parts`, in parallel where threads are available.
pub fn for_each<T: Send>(parts: Vec<T>, task: impl Fn(T) + Sync + Send) {
    #[cfg(feature = "threads")]
    if parts.len() > 1 && splitting() {
        // Each part is taken by exactly one thread; the mutex only makes that safe to say.
        let parts: Vec<std::sync::Mutex<Option<T>>> =
            parts.into_iter().map(|p| std::sync::Mutex::new(Some(p))).collect();
        pool().run(parts.len(), &|i| {
            let part = parts[i].lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            if let Some(part) = part {
                task(part);
            }
        });
        return;
    }
    parts.into_iter().for_each(task);
}

/// Cuts `slice` (units of `unit` elements) into parts of at least `min_units` units, as many as
/// the threads warrant, and runs `task(first unit, part)` on each, in parallel where possible.
pub fn for_each_part<T: Send>(
    slice: &mut [T],
    unit: usize,
    min_units: usize,
    task: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    let units = slice.len() / unit.max(1);
    let parts = part_count(units, min_units);
    if parts == 1 {
        // One part, as `split_mut` would cut it, without the two allocations (decode's steps).
        if units > 0 {
            task(0, &mut slice[..units * unit.max(1)]);
        }
        return;
    }
    let bounds = split_bounds(units, parts, 1);
    for_each(split_mut(slice, &bounds, unit), |(first, part)| task(first, part));
}

/// Cuts `0..len` into `parts` contiguous ranges whose bounds (except `len`) are multiples of
/// `align`, as even as that allows. Returns the `parts + 1` bounds; empty ranges are dropped.
pub fn split_bounds(len: usize, parts: usize, align: usize) -> Vec<usize> {
    let align = align.max(1);
    let units = len.div_ceil(align);
    let parts = parts.clamp(1, units.max(1));
    let mut bounds = Vec::with_capacity(parts + 1);
    for p in 0..=parts {
        let bound = (units * p / parts * align).min(len);
        if bounds.last() != Some(&bound) || p == 0 {
            bounds.push(bound);
        }
    }
    bounds
}

/// Cuts `slice` at `bounds` (from [`split_bounds`], counted in units of `unit` elements) into
/// `(first unit, part)` pairs.
pub fn split_mut<'a, T>(slice: &'a mut [T], bounds: &[usize], unit: usize) -> Vec<(usize, &'a mut [T])> {
    let mut parts = Vec::with_capacity(bounds.len());
    let mut rest = slice;
    for pair in bounds.windows(2) {
        let (mine, after) = std::mem::take(&mut rest).split_at_mut((pair[1] - pair[0]) * unit);
        parts.push((pair[0], mine));
        rest = after;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn bounds_cover_the_range_with_aligned_cuts() {
        for (len, parts, align) in [(100, 4, 8), (7, 3, 1), (64, 64, 8), (5, 10, 1), (0, 3, 8), (9, 1, 4)] {
            let bounds = split_bounds(len, parts, align);
            assert_eq!(bounds[0], 0, "{len} {parts} {align}");
            assert_eq!(*bounds.last().unwrap(), len, "{len} {parts} {align}");
            assert!(bounds.len() - 1 <= parts.max(1));
            for pair in bounds.windows(2) {
                assert!(pair[0] < pair[1] || len == 0, "{bounds:?}");
                assert_eq!(pair[0] % align, 0, "{bounds:?}");
            }
        }
        assert_eq!(split_bounds(100, 4, 8), [0, 24, 48, 72, 100]);
    }

    #[test]
    fn every_part_runs_once() {
        let hits: Vec<AtomicUsize> = (0..37).map(|_| AtomicUsize::new(0)).collect();
        for_each((0..37).collect(), |i: usize| {
            hits[i].fetch_add(1, Ordering::Relaxed);
        });
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }

    /// Several callers at once (the test harness runs tests on many threads): each job still
    /// runs every part exactly once, whether it got the pool or ran its parts itself.
    #[test]
    fn concurrent_callers_each_finish_their_parts() {
        let callers: Vec<_> = (0..4)
            .map(|c| {
                std::thread::spawn(move || {
                    for round in 0..200 {
                        let hits: Vec<AtomicUsize> = (0..9).map(|_| AtomicUsize::new(0)).collect();
                        for_each((0..9).collect(), |i: usize| {
                            hits[i].fetch_add(c + round, Ordering::Relaxed);
                        });
                        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == c + round));
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
    }

    /// A panicking part reaches the caller as a panic, and the pool keeps working.
    #[cfg(feature = "threads")]
    #[test]
    fn a_panicking_part_panics_the_caller_and_the_pool_survives() {
        let outcome = std::panic::catch_unwind(|| {
            for_each((0..8).collect(), |i: usize| assert!(i != 5, "part five fails"));
        });
        assert!(outcome.is_err());
        every_part_runs_once();
    }

    #[test]
    fn part_counts_respect_the_minimum_size() {
        assert_eq!(part_count(0, 8), 1);
        assert_eq!(part_count(7, 8), 1);
        assert!(part_count(1 << 20, 8) <= threads() * TASKS_PER_THREAD);
        if threads() > 1 {
            assert!(part_count(1 << 20, 8) > 1);
        }
    }
}
