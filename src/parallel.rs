//! Splitting work across threads, above the kernels: a matmul by weight rows, attention by
//! heads. Each task runs the same single-threaded kernel on its own part and writes only its
//! own outputs, so no sum changes with the thread count (parity with llama.cpp holds for any).
//!
//! With the `threads` feature (native builds, and the wasm build with shared memory) tasks run
//! on rayon's global pool: the CLI sizes it with `--threads`, the browser with
//! `initThreadPool(n)` from `wasm-bindgen-rayon`. Without it they run one after another.
//!
//! Why several tasks per thread: a thread that the OS deschedules (another process holding a
//! core) holds back only one small task, and the others take the rest instead of waiting for
//! it. A caller blocked on the pool sleeps rather than spins, which leaves the core to the
//! descheduled thread.

/// Tasks per thread when a job is split (see the module comment).
const TASKS_PER_THREAD: usize = 4;

/// How many threads parallel work runs on.
pub fn threads() -> usize {
    #[cfg(feature = "threads")]
    {
        rayon::current_num_threads()
    }
    #[cfg(not(feature = "threads"))]
    {
        1
    }
}

/// The thread count a native program uses unless told otherwise: the machine's cores, at most
/// [`MAX_DEFAULT_THREADS`] (past that, decode is bound by memory bandwidth, not cores).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_DEFAULT_THREADS)
}

/// The most threads used by default, natively and in the page.
pub const MAX_DEFAULT_THREADS: usize = 8;

/// Sizes the global pool (native only: the browser's pool comes from `initThreadPool`).
/// Must run before any parallel work, once per process.
#[cfg(all(feature = "threads", not(target_arch = "wasm32")))]
pub fn start_pool(threads: usize) -> Result<(), String> {
    if threads == 0 {
        return Err("the thread count must be at least 1".into());
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("inferno-{i}"))
        .build_global()
        .map_err(|e| format!("cannot start {threads} threads: {e}"))
}

/// How many parts to cut `units` units of work into, for parts of at least `min_units` each:
/// one part on one thread, otherwise up to [`TASKS_PER_THREAD`] per thread.
pub fn part_count(units: usize, min_units: usize) -> usize {
    let threads = threads();
    if threads <= 1 {
        return 1;
    }
    (units / min_units.max(1)).clamp(1, threads * TASKS_PER_THREAD)
}

/// Runs `work` on a thread of the pool, and returns its result. Parallel calls made from a
/// pool thread start at once on that thread while the others are woken to help, instead of
/// the caller sleeping until a pool thread wakes for every call: one forward pass makes
/// hundreds of such calls.
pub fn in_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    #[cfg(feature = "threads")]
    if threads() > 1 && rayon::current_thread_index().is_none() {
        return rayon::scope(|_| work());
    }
    work()
}

/// Runs `task` on each of `parts`, in parallel where threads are available.
pub fn for_each<T: Send>(parts: Vec<T>, task: impl Fn(T) + Sync + Send) {
    #[cfg(feature = "threads")]
    if parts.len() > 1 {
        use rayon::prelude::*;
        // One part per rayon job, so an idle thread can take any part that is left.
        parts.into_par_iter().with_max_len(1).for_each(task);
        return;
    }
    parts.into_iter().for_each(task);
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
