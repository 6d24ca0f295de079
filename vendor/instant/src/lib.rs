//! The `instant` crate's `Instant`, for llguidance's timing of its own work. The real crate
//! reads JavaScript's clock on wasm32 only and falls back to std's there without its
//! `wasm-bindgen` feature; std's clock panics on wasm32-unknown-unknown and on wasm64 (our
//! 64-bit-memory build). This one uses std's natively and `Date.now()` in every wasm build
//! (a page and a Web Worker alike): milliseconds, which is all those timings need.

pub use std::time::Duration;

#[cfg(not(target_family = "wasm"))]
pub use std::time::Instant;

/// A point in time, in milliseconds since the epoch.
#[cfg(target_family = "wasm")]
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Instant(f64);

#[cfg(target_family = "wasm")]
impl Instant {
    pub fn now() -> Instant {
        Instant(js_sys::Date::now())
    }

    /// Time since `earlier` (zero if the clock went back).
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        Duration::from_secs_f64(((self.0 - earlier.0) / 1e3).max(0.0))
    }

    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }
}

#[cfg(target_family = "wasm")]
impl std::ops::Sub for Instant {
    type Output = Duration;

    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}
