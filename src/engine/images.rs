//! Pictures in a conversation. A picture is encoded once and kept by its content hash; in a
//! prompt its embeddings stand as a run of ids no token has (one per row, from [`IMAGE_IDS`] up),
//! so the session's prefix reuse, rollback and branching work on prompts with pictures as on
//! text: the same picture gives the same ids, and a follow-up question reuses its cache.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::vision::ImageEmbeddings;

/// Ids from here up stand for rows of a picture's embeddings, never for tokens (no vocabulary
/// comes near 2^31 entries): `IMAGE_IDS + slot × ROWS_PER_SLOT + row`.
pub const IMAGE_IDS: u32 = 1 << 31;
/// Rows one picture may have (Gemma 3's have 256).
const ROWS_PER_SLOT: u32 = 1 << 16;
/// Pictures one engine keeps (each a few MB at most): 32,768 slots fit above [`IMAGE_IDS`].
const SLOTS: usize = ((u32::MAX - IMAGE_IDS) / ROWS_PER_SLOT) as usize;

/// The pictures an engine has encoded, by content hash.
#[derive(Default)]
pub(super) struct ImageTable {
    held: Mutex<Vec<HeldImage>>,
}

struct HeldImage {
    hash: String,
    embeddings: Arc<ImageEmbeddings>,
}

/// Whether `id` stands for a picture's row.
pub fn is_image_id(id: u32) -> bool {
    id >= IMAGE_IDS
}

fn slot_of(id: u32) -> usize {
    ((id - IMAGE_IDS) / ROWS_PER_SLOT) as usize
}

fn row_of(id: u32) -> usize {
    ((id - IMAGE_IDS) % ROWS_PER_SLOT) as usize
}

impl ImageTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<HeldImage>> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The ids of the picture with this hash, if it was encoded before.
    pub fn ids_of(&self, hash: &str) -> Option<Vec<u32>> {
        let held = self.lock();
        let slot = held.iter().position(|h| h.hash == hash)?;
        Some(ids(slot, held[slot].embeddings.tokens))
    }

    /// Keeps a picture's embeddings; its ids. `None` when the table is full or the picture has
    /// more rows than a slot.
    pub fn hold(&self, hash: String, embeddings: ImageEmbeddings) -> Option<Vec<u32>> {
        let mut held = self.lock();
        if let Some(slot) = held.iter().position(|h| h.hash == hash) {
            return Some(ids(slot, held[slot].embeddings.tokens));
        }
        if held.len() >= SLOTS || embeddings.tokens > ROWS_PER_SLOT as usize {
            return None;
        }
        let tokens = embeddings.tokens;
        held.push(HeldImage { hash, embeddings: Arc::new(embeddings) });
        Some(ids(held.len() - 1, tokens))
    }

    /// The embeddings of the picture whose rows `ids` are (all of them, in order), or `None`
    /// if they are not one held picture's rows.
    pub fn rows_of(&self, ids: &[u32]) -> Option<(Arc<ImageEmbeddings>, Range<usize>)> {
        let &first = ids.first()?;
        let held = self.lock();
        let embeddings = &held.get(slot_of(first))?.embeddings;
        let rows = row_of(first)..row_of(first) + ids.len();
        let whole =
            ids.iter().zip(rows.clone()).all(|(&id, row)| slot_of(id) == slot_of(first) && row_of(id) == row);
        (whole && rows.end <= embeddings.tokens).then(|| (embeddings.clone(), rows))
    }
}

fn ids(slot: usize, tokens: usize) -> Vec<u32> {
    let base = IMAGE_IDS + slot as u32 * ROWS_PER_SLOT;
    (0..tokens as u32).map(|row| base + row).collect()
}

/// `tokens` cut into runs of text and runs of one picture's rows, in order.
pub fn runs(tokens: &[u32]) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for (i, &id) in tokens.iter().enumerate() {
        let continues = i > 0 && {
            let prev = tokens[i - 1];
            match (is_image_id(prev), is_image_id(id)) {
                (false, false) => true,
                (true, true) => slot_of(prev) == slot_of(id) && row_of(prev) + 1 == row_of(id),
                _ => false,
            }
        };
        match runs.last_mut() {
            Some(run) if continues => run.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    runs
}

/// Where a picture's rows begin, if position `at` of `tokens` falls inside them (after their
/// first): a picture whose rows attend both ways must be evaluated whole, so a cut there moves
/// back to its start.
pub fn start_of_image_at(tokens: &[u32], at: usize) -> Option<usize> {
    if at == 0 || at >= tokens.len() || !is_image_id(tokens[at]) {
        return None;
    }
    let row = row_of(tokens[at]);
    (row > 0).then(|| at.saturating_sub(row))
}

/// Where the picture whose rows include position `at - 1` ends, if `at` falls inside it.
pub fn end_of_image_at(tokens: &[u32], at: usize) -> Option<usize> {
    let start = start_of_image_at(tokens, at)?;
    runs(&tokens[start..]).first().map(|run| start + run.end)
}
