//! The thread pool: built for the hundreds of small jobs of one forward pass (a decode step of
//! a small model is ~200 matmuls of tens of microseconds each).
//!
//! The caller works on its own job's parts too, and helpers spin on a counter for a while
//! between jobs, so handing a job over costs an atomic increment instead of waking a sleeping
//! thread, which costs tens of microseconds in a browser and made rayon's pool slower on two
//! threads than on one for decode. Both sides park after a bounded spin: a caller whose parts
//! are held by a descheduled helper leaves its core to that helper instead of spinning against
//! it (what makes a spinning pool collapse when another process holds a core), and an idle
//! engine sleeps.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::Thread;

/// Rounds an idle helper spins before it parks: enough to bridge the gaps between the matmuls
/// of a forward pass, few enough that an idle engine sleeps within a millisecond or so.
const HELPER_SPIN_ROUNDS: u32 = 1 << 17;
/// Rounds a caller spins on parts that helpers still hold before it parks.
const CALLER_SPIN_ROUNDS: u32 = 1 << 12;

/// A published job. `task` has its lifetime erased: the caller clears the job before its
/// borrow ends, and a helper calls `task` only for a part it claimed, which keeps
/// `Pool::unfinished` above zero (and so the caller waiting) until that call returns.
struct Job {
    task: *const (dyn Fn(usize) + Sync + 'static),
    parts: usize,
    next: usize,
    caller: Thread,
}

// SAFETY: `task` points to a `Sync` closure, and the pointer is only used as described above.
unsafe impl Send for Job {}

pub struct Pool {
    job: Mutex<Option<Job>>,
    /// Parts of the current job not finished yet.
    unfinished: AtomicUsize,
    /// Bumped for every job: what idle helpers watch.
    epoch: AtomicUsize,
    /// A caller is running a job; another caller (or a task's own nested call) runs its parts
    /// itself instead of waiting.
    busy: AtomicBool,
    panicked: AtomicBool,
    helpers: Mutex<Vec<Thread>>,
    helper_count: usize,
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
            busy: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            helpers: Mutex::new(Vec::new()),
            helper_count,
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
        // SAFETY: only the lifetime is erased; see `Job`.
        let task: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(task) };
        self.unfinished.store(parts, Ordering::Release);
        *lock(&self.job) = Some(Job { task, parts, next: 0, caller: std::thread::current() });
        self.epoch.fetch_add(1, Ordering::Release);
        for helper in lock(&self.helpers).iter() {
            helper.unpark();
        }
        self.work();
        let mut spins = 0;
        while self.unfinished.load(Ordering::Acquire) != 0 {
            if spins < CALLER_SPIN_ROUNDS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::park();
            }
        }
        *lock(&self.job) = None;
        let panicked = self.panicked.swap(false, Ordering::Relaxed);
        self.busy.store(false, Ordering::Release);
        if panicked {
            panic!("a parallel task panicked");
        }
    }

    /// Claims and runs parts of the current job until none is left.
    fn work(&self) {
        loop {
            let (part, task, caller) = {
                let mut job = lock(&self.job);
                match job.as_mut() {
                    Some(job) if job.next < job.parts => {
                        job.next += 1;
                        (job.next - 1, job.task, job.caller.clone())
                    }
                    _ => return,
                }
            };
            // SAFETY: this part is claimed and unfinished, so the caller is still waiting
            // inside `run` and the closure behind `task` is alive.
            let task = unsafe { &*task };
            if catch_unwind(AssertUnwindSafe(|| task(part))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            if self.unfinished.fetch_sub(1, Ordering::AcqRel) == 1 {
                caller.unpark();
            }
        }
    }

    /// A helper's life: take parts of every job, spin a while between jobs, then sleep until
    /// the next one.
    pub fn help(&self) -> ! {
        lock(&self.helpers).push(std::thread::current());
        let mut seen = self.epoch.load(Ordering::Acquire);
        loop {
            self.work();
            let mut spins = 0;
            loop {
                let epoch = self.epoch.load(Ordering::Acquire);
                if epoch != seen {
                    seen = epoch;
                    break;
                }
                if spins < HELPER_SPIN_ROUNDS {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    // An unpark that came before this park makes it return at once.
                    std::thread::park();
                }
            }
        }
    }
}
