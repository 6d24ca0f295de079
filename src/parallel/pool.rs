//! The thread pool: built for the hundreds of small jobs of one forward pass (a decode step of
//! a small model is ~200 matmuls of tens of microseconds each).
//!
//! The caller works on its own job's parts too, and helpers spin on a counter for a while
//! between jobs, so handing a job over costs an atomic increment instead of waking a sleeping
//! thread, which costs tens of microseconds in a browser and made rayon's pool slower on two
//! threads than on one for decode. Both sides park after a bounded spin: a caller whose parts
//! are held by a descheduled helper leaves its core to that helper instead of spinning against
//! it (what makes a spinning pool collapse when another process holds a core), and an idle
//! engine sleeps. When helpers keep arriving late all the same, the caller runs the next jobs
//! alone for a while (see [`LATE_LIMIT`]): on a machine whose other core is taken, one thread
//! is all there is, and the pool should cost nothing on top.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Rounds an idle helper spins before it parks: enough to bridge the gaps between the matmuls
/// of a forward pass, few enough that an idle engine sleeps within a millisecond or so.
const HELPER_SPIN_ROUNDS: u32 = 1 << 14;
/// Rounds a caller spins on parts that helpers still hold before it parks.
const CALLER_SPIN_ROUNDS: u32 = 1 << 15;
/// How late the helpers may prove before the pool runs jobs on the caller alone: a job where
/// they did at most one part while the caller did the rest and then still had to wait for
/// them adds 2, any other job takes 1 away.
const LATE_LIMIT: usize = 16;
/// Jobs run on the caller alone once helpers proved late (a few dozen decode steps), after
/// which the helpers get another chance. Meanwhile they park, which leaves their cores to the
/// caller and to whatever else keeps the machine busy.
const SOLO_JOBS: usize = 8192;

/// A published job. `task` has its lifetime erased: the caller clears the job before its
/// borrow ends, and a helper calls `task` only for a part it claimed, which keeps
/// `Pool::unfinished` above zero (and so the caller waiting) until that call returns.
struct Job {
    task: *const (dyn Fn(usize) + Sync + 'static),
    parts: usize,
    next: usize,
}

// SAFETY: `task` points to a `Sync` closure, and the pointer is only used as described above.
unsafe impl Send for Job {}

pub struct Pool {
    job: Mutex<Option<Job>>,
    /// Parts of the current job not finished yet.
    unfinished: AtomicUsize,
    /// Bumped for every job: what idle helpers watch, and sleep on (`new_job`).
    epoch: AtomicUsize,
    new_job: Signal,
    /// What a caller whose parts are still held sleeps on.
    job_done: Signal,
    /// A caller is running a job; another caller (or a task's own nested call) runs its parts
    /// itself instead of waiting.
    busy: AtomicBool,
    panicked: AtomicBool,
    helper_count: usize,
    /// See [`LATE_LIMIT`] and [`SOLO_JOBS`]; only the caller holding `busy` touches these.
    lateness: AtomicUsize,
    solo_jobs_left: AtomicUsize,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a task panicked; the state it guards stays consistent.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Pool {
    /// A pool whose helpers the caller must start, each running [`Pool::help`] forever.
    pub const fn new(helper_count: usize) -> Pool {
        Pool {
            job: Mutex::new(None),
            unfinished: AtomicUsize::new(0),
            epoch: AtomicUsize::new(0),
            new_job: Signal::new(),
            job_done: Signal::new(),
            busy: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            helper_count,
            lateness: AtomicUsize::new(0),
            solo_jobs_left: AtomicUsize::new(0),
        }
    }

    /// Threads a job runs on: the helpers and the caller.
    pub fn threads(&self) -> usize {
        self.helper_count + 1
    }

    /// Calls `task(i)` for every `i` in `0..parts`, on the caller and the helpers, and returns
    /// when all calls have returned. Panics if a task panicked.
    pub fn run(&self, parts: usize, task: &(dyn Fn(usize) + Sync)) {
        if parts <= 1
            || self.helper_count == 0
            || self.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            (0..parts).for_each(task);
            return;
        }
        let solo_jobs_left = self.solo_jobs_left.load(Ordering::Relaxed);
        if solo_jobs_left > 0 {
            self.solo_jobs_left.store(solo_jobs_left - 1, Ordering::Relaxed);
            (0..parts).for_each(task);
            self.busy.store(false, Ordering::Release);
            return;
        }
        // SAFETY: only the lifetime is erased; see `Job`.
        let task: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(task) };
        self.unfinished.store(parts, Ordering::SeqCst);
        *lock(&self.job) = Some(Job { task, parts, next: 0 });
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.new_job.wake();
        let done_here = self.work();
        let (mut spins, mut parked) = (0, false);
        while self.unfinished.load(Ordering::SeqCst) != 0 {
            if spins < CALLER_SPIN_ROUNDS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                parked = true;
                self.job_done.sleep_while(|| self.unfinished.load(Ordering::SeqCst) != 0);
            }
        }
        *lock(&self.job) = None;
        self.note_punctuality(parked && parts - done_here <= 1 && parts >= 4);
        let panicked = self.panicked.swap(false, Ordering::Relaxed);
        self.busy.store(false, Ordering::Release);
        if panicked {
            panic!("a parallel task panicked");
        }
    }

    /// Keeps score of jobs where the helpers were late (most likely descheduled: another
    /// process holds their core), and switches to running jobs on the caller alone when they
    /// keep being late, so that the pool never makes a busy machine slower than one thread.
    fn note_punctuality(&self, late: bool) {
        let lateness = self.lateness.load(Ordering::Relaxed);
        let lateness = if late { lateness + 2 } else { lateness.saturating_sub(1) };
        if lateness >= LATE_LIMIT {
            self.solo_jobs_left.store(SOLO_JOBS, Ordering::Relaxed);
            self.lateness.store(0, Ordering::Relaxed);
        } else {
            self.lateness.store(lateness, Ordering::Relaxed);
        }
    }

    /// Claims and runs parts of the current job until none is left; returns how many it ran.
    fn work(&self) -> usize {
        let mut done = 0;
        loop {
            let (part, task) = {
                let mut job = lock(&self.job);
                match job.as_mut() {
                    Some(job) if job.next < job.parts => {
                        job.next += 1;
                        (job.next - 1, job.task)
                    }
                    _ => return done,
                }
            };
            done += 1;
            // SAFETY: this part is claimed and unfinished, so the caller is still waiting
            // inside `run` and the closure behind `task` is alive.
            let task = unsafe { &*task };
            if catch_unwind(AssertUnwindSafe(|| task(part))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            if self.unfinished.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.job_done.wake();
            }
        }
    }

    /// A helper's life: take parts of every job, spin a while between jobs, then sleep until
    /// the next one.
    pub fn help(&self) -> ! {
        let mut seen = self.epoch.load(Ordering::SeqCst);
        loop {
            self.work();
            let mut spins = 0;
            loop {
                let epoch = self.epoch.load(Ordering::SeqCst);
                if epoch != seen {
                    seen = epoch;
                    break;
                }
                if spins < HELPER_SPIN_ROUNDS {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    self.new_job.sleep_while(|| self.epoch.load(Ordering::SeqCst) == seen);
                }
            }
        }
    }
}

/// Where pool threads sleep until what they wait for has happened: std's `Mutex` and `Condvar`,
/// which are futexes on every target this runs on. Not `thread::park`: on wasm64 with threads
/// std's parker is a no-op (its cfg names only wasm32), so waits became spins there.
struct Signal {
    mutex: Mutex<()>,
    changed: Condvar,
    /// Threads inside [`Signal::sleep_while`]: a wake with none skips the lock and the notify.
    sleepers: AtomicUsize,
}

impl Signal {
    const fn new() -> Signal {
        Signal { mutex: Mutex::new(()), changed: Condvar::new(), sleepers: AtomicUsize::new(0) }
    }

    /// Sleeps while `waiting()` holds. `waiting` must read with `SeqCst` what the waker changes
    /// with `SeqCst` before its [`Signal::wake`]: either the waker then sees this sleeper
    /// counted and notifies under the lock (which this thread holds until it waits), or this
    /// thread's check comes after the change and does not sleep.
    fn sleep_while(&self, waiting: impl Fn() -> bool) {
        let mut guard = lock(&self.mutex);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        while waiting() {
            guard = self.changed.wait(guard).unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes every sleeper, after a `SeqCst` change of what they wait for.
    fn wake(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            drop(lock(&self.mutex));
            self.changed.notify_all();
        }
    }
}
