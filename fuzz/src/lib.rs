//! What the fuzz targets share, and what `tests/hostile_input.rs` includes to replay their
//! inputs: the counting allocator behind the allocation bound, and each target's checks.

pub mod counting;
pub mod targets;

/// Every allocation of a binary that links this crate is counted (the fuzz targets, and the
/// main crate's `tests/hostile_input.rs`, which includes this file).
#[global_allocator]
pub static ALLOCATOR: counting::CountingAllocator = counting::CountingAllocator::new();
