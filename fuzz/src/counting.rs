//! A global allocator that counts, so a check can assert that an input never makes the engine
//! allocate more than the bound the README states ("Untrusted input").

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, keeping the bytes live now, the most live since the last
/// [`CountingAllocator::start`], and the largest single request in that time.
pub struct CountingAllocator {
    live: AtomicUsize,
    peak: AtomicUsize,
    largest: AtomicUsize,
}

/// What one fuzz input cost: the most bytes live at once above what was live before it, and
/// the largest single allocation.
#[derive(Clone, Copy, Debug)]
pub struct AllocationReport {
    pub peak: usize,
    pub largest: usize,
}

impl CountingAllocator {
    pub const fn new() -> Self {
        CountingAllocator {
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            largest: AtomicUsize::new(0),
        }
    }

    /// Starts measuring one input; returns the baseline to give [`CountingAllocator::report`].
    pub fn start(&self) -> usize {
        let live = self.live.load(Relaxed);
        self.peak.store(live, Relaxed);
        self.largest.store(0, Relaxed);
        live
    }

    pub fn report(&self, baseline: usize) -> AllocationReport {
        AllocationReport {
            peak: self.peak.load(Relaxed).saturating_sub(baseline),
            largest: self.largest.load(Relaxed),
        }
    }

    fn grew(&self, size: usize) {
        let live = self.live.fetch_add(size, Relaxed) + size;
        self.peak.fetch_max(live, Relaxed);
        self.largest.fetch_max(size, Relaxed);
    }
}

impl Default for CountingAllocator {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            self.grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        self.live.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            // Counted as a new block while the old one is released: a copying realloc briefly
            // holds both, and the bound should not depend on the allocator's luck.
            self.grew(new_size);
            self.live.fetch_sub(layout.size(), Relaxed);
        }
        new
    }
}

/// The bound the README states: for any file of `file_bytes`, the engine's allocations stay
/// within `FILE_MULTIPLE` × the file, plus the session's state (KV cache, scratch, logits,
/// all set by the context the caller asked for), plus `FIXED_BYTES`.
pub const FILE_MULTIPLE: usize = 8;
pub const FIXED_BYTES: usize = 4 << 20;

pub fn allocation_bound(file_bytes: usize, state_bytes: usize) -> usize {
    FILE_MULTIPLE.saturating_mul(file_bytes).saturating_add(state_bytes).saturating_add(FIXED_BYTES)
}
