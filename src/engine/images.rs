//! Pictures in a conversation. A picture is encoded once and kept by its content hash; in a
//! prompt its embeddings stand as runs of ids no token has (one per row, from [`IMAGE_IDS`] up;
//! a picture cut in tiles has a run per tile, with its projector's marker tokens between), so
//! the session's prefix reuse, rollback and branching work on prompts with pictures as on text:
//! the same picture gives the same ids, and a follow-up question reuses its cache.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::model::Placement;
use crate::vision::ImageEmbeddings;

/// Ids from here up stand for rows of a picture's embeddings, never for tokens (no vocabulary
/// comes near 2^31 entries): `IMAGE_IDS + slot × ROWS_PER_SLOT + row`.
pub const IMAGE_IDS: u32 = 1 << 31;
/// Rows one picture may have (Gemma 3's have 256; SmolVLM's at most 17 squares of 64).
const ROWS_PER_SLOT: u32 = 1 << 16;
/// Pictures one engine encodes in its life: 32,768 slots fit above [`IMAGE_IDS`]. A slot is
/// never given twice, so a session's cached rows of a forgotten picture can never pass for
/// another picture's.
const SLOTS: usize = ((u32::MAX - IMAGE_IDS) / ROWS_PER_SLOT) as usize;
/// The embeddings an engine keeps (256 MiB: about a hundred Gemma 3 4B pictures, a dozen
/// tiled LFM2-VL ones). Past it the pictures used longest ago are forgotten, and encoded again
/// if a later prompt holds them; those of the prompt being built are kept whatever their size.
const HELD_BYTES: usize = 256 << 20;

/// The pictures an engine has encoded, by content hash.
pub(super) struct ImageTable {
    held: Mutex<Held>,
    budget: usize,
}

#[derive(Default)]
struct Held {
    pictures: Vec<HeldImage>,
    next_slot: usize,
    /// Counts prompts built ([`ImageTable::begin_prompt`]); a picture remembers the last it
    /// was used in.
    prompt: u64,
    /// The grid (columns, rows) of each slot whose picture has one (M-RoPE's), kept after the
    /// picture is forgotten: a session's cached rows still need their places.
    grids: Vec<(usize, [usize; 2])>,
}

impl Held {
    fn grid(&self, slot: usize) -> Option<[usize; 2]> {
        self.grids.iter().find(|(s, _)| *s == slot).map(|(_, grid)| *grid)
    }
}

struct HeldImage {
    hash: String,
    slot: usize,
    embeddings: Arc<ImageEmbeddings>,
    /// The picture's place in a prompt: its rows' ids and the marker tokens between them.
    prompt_ids: Vec<u32>,
    last_prompt: u64,
}

impl HeldImage {
    fn bytes(&self) -> usize {
        self.embeddings.values.len() * 4
    }
}

impl Default for ImageTable {
    fn default() -> Self {
        ImageTable::with_budget(HELD_BYTES)
    }
}

/// Whether `id` stands for a picture's row.
pub fn is_image_id(id: u32) -> bool {
    id >= IMAGE_IDS
}

fn slot_of(id: u32) -> usize {
    debug_assert!(is_image_id(id), "{id} is a token, not a picture's row");
    ((id - IMAGE_IDS) / ROWS_PER_SLOT) as usize
}

fn row_of(id: u32) -> usize {
    debug_assert!(is_image_id(id), "{id} is a token, not a picture's row");
    ((id - IMAGE_IDS) % ROWS_PER_SLOT) as usize
}

impl ImageTable {
    /// A table that keeps at most `budget` bytes of embeddings besides the current prompt's.
    pub fn with_budget(budget: usize) -> ImageTable {
        ImageTable { held: Mutex::new(Held::default()), budget }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new prompt's pictures are about to be found or encoded: those used from now on are
    /// its own, and kept while it is built.
    pub fn begin_prompt(&self) {
        self.lock().prompt += 1;
    }

    /// Forgets every picture (another projector, or other limits on a picture's rows, would
    /// encode them otherwise). Slots are still never given twice.
    pub fn forget_all(&self) {
        self.lock().pictures.clear();
    }

    /// The prompt ids of the picture with this hash, if it is held.
    pub fn ids_of(&self, hash: &str) -> Option<Vec<u32>> {
        let mut held = self.lock();
        let prompt = held.prompt;
        let picture = held.pictures.iter_mut().find(|h| h.hash == hash)?;
        picture.last_prompt = prompt;
        Some(picture.prompt_ids.clone())
    }

    /// Keeps a picture's embeddings; its prompt ids, which `place` makes from its rows' ids (in
    /// order) by putting its marker tokens among them. Pictures of earlier prompts are forgotten,
    /// those used longest ago first, while the table is over its budget. `None` when the engine
    /// has used all its slots or the picture has more rows than a slot.
    pub fn hold(
        &self,
        hash: String,
        embeddings: ImageEmbeddings,
        place: impl FnOnce(&[u32]) -> Vec<u32>,
    ) -> Option<Vec<u32>> {
        let mut held = self.lock();
        let prompt = held.prompt;
        if let Some(known) = held.pictures.iter_mut().find(|h| h.hash == hash) {
            known.last_prompt = prompt;
            return Some(known.prompt_ids.clone());
        }
        if held.next_slot >= SLOTS || embeddings.tokens > ROWS_PER_SLOT as usize {
            return None;
        }
        let slot = held.next_slot;
        held.next_slot += 1;
        if let Some(grid) = embeddings.grid {
            held.grids.push((slot, grid));
        }
        let prompt_ids = place(&ids(slot, embeddings.tokens));
        let picture = HeldImage {
            hash,
            slot,
            embeddings: Arc::new(embeddings),
            prompt_ids: prompt_ids.clone(),
            last_prompt: prompt,
        };
        held.pictures.push(picture);
        while held.pictures.iter().map(HeldImage::bytes).sum::<usize>() > self.budget {
            let oldest = held
                .pictures
                .iter()
                .enumerate()
                .filter(|(_, h)| h.last_prompt < prompt)
                .min_by_key(|(_, h)| h.last_prompt)
                .map(|(i, _)| i);
            match oldest {
                Some(i) => drop(held.pictures.remove(i)),
                None => break,
            }
        }
        Some(prompt_ids)
    }

    /// The embeddings of the picture whose rows `ids` are (all of them, in order), or `None`
    /// if they are not one held picture's rows.
    pub fn rows_of(&self, ids: &[u32]) -> Option<(Arc<ImageEmbeddings>, Range<usize>)> {
        let &first = ids.first()?;
        if !ids.iter().all(|&id| is_image_id(id)) {
            return None;
        }
        let held = self.lock();
        let embeddings = &held.pictures.iter().find(|h| h.slot == slot_of(first))?.embeddings;
        let rows = row_of(first)..row_of(first) + ids.len();
        let whole =
            ids.iter().zip(rows.clone()).all(|(&id, row)| slot_of(id) == slot_of(first) && row_of(id) == row);
        (whole && rows.end <= embeddings.tokens).then(|| (embeddings.clone(), rows))
    }
}

impl ImageTable {
    /// Where a run of `run` (text, or one picture's rows) stands under M-RoPE after `before`,
    /// the ids ahead of it (see [`Placement`]).
    pub fn placement(&self, before: &[u32], run: &[u32]) -> Placement {
        match run.first() {
            Some(&id) if is_image_id(id) => {
                // A picture resumed midway: its rows ahead of the run count from its start.
                let row = row_of(id);
                let start = self.position_after(&before[..before.len().saturating_sub(row)]);
                match self.lock().grid(slot_of(id)) {
                    Some([width, _]) => Placement::Grid { start, width, first_row: row },
                    None => Placement::Text { start: start + row },
                }
            }
            _ => Placement::Text { start: self.position_after(before) },
        }
    }

    /// The M-RoPE position after `ids`: one per token, and for each picture the longer side of
    /// its grid (mtmd's `mtmd_image_tokens_get_n_pos`; one per row for a picture without one).
    pub fn position_after(&self, ids: &[u32]) -> usize {
        let held = self.lock();
        runs(ids)
            .into_iter()
            .map(|run| {
                let first = ids[run.start];
                // A slot is worked out only from a picture's id (a token's would underflow).
                let grid = if is_image_id(first) { held.grid(slot_of(first)) } else { None };
                grid.map_or(run.len(), |[width, height]| width.max(height))
            })
            .sum()
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

/// Where a run of a picture's rows begins, if position `at` of `tokens` falls inside it (after
/// its first): rows that attend both ways must be evaluated whole, so a cut there moves back to
/// the run's start.
pub fn start_of_image_at(tokens: &[u32], at: usize) -> Option<usize> {
    if at == 0 || at >= tokens.len() || !is_image_id(tokens[at]) {
        return None;
    }
    let follows = |i: usize| {
        is_image_id(tokens[i - 1])
            && slot_of(tokens[i - 1]) == slot_of(tokens[i])
            && row_of(tokens[i - 1]) + 1 == row_of(tokens[i])
    };
    let start = (1..=at).rev().find(|&i| !follows(i)).unwrap_or(0);
    (start < at).then_some(start)
}

/// Where the picture whose rows include position `at - 1` ends, if `at` falls inside it.
pub fn end_of_image_at(tokens: &[u32], at: usize) -> Option<usize> {
    let start = start_of_image_at(tokens, at)?;
    runs(&tokens[start..]).first().map(|run| start + run.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A picture in two runs of rows (a tile, then the whole picture) with marker tokens around
    /// and between them, as SmolVLM's are placed.
    #[test]
    fn runs_and_cuts_follow_each_run_of_rows() {
        let table = ImageTable::default();
        let embeddings = ImageEmbeddings { tokens: 5, width: 1, values: vec![0.0; 5], grid: None };
        let place = |rows: &[u32]| [&[7][..], &rows[..3], &[8, 9], &rows[3..], &[7]].concat();
        let ids = table.hold("picture".into(), embeddings.clone(), place).unwrap();
        let tokens = [&[1][..], &ids, &[2]].concat();
        // [1, 7, r0, r1, r2, 8, 9, r3, r4, 7, 2]
        assert_eq!(runs(&tokens), [0..2, 2..5, 5..7, 7..9, 9..11]);
        assert_eq!(start_of_image_at(&tokens, 3), Some(2));
        assert_eq!(start_of_image_at(&tokens, 4), Some(2));
        assert_eq!(start_of_image_at(&tokens, 8), Some(7));
        for at in [0, 1, 2, 5, 6, 7, 9, 10, 11] {
            assert_eq!(start_of_image_at(&tokens, at), None, "at {at}");
        }
        assert_eq!(end_of_image_at(&tokens, 3), Some(5));
        assert_eq!(end_of_image_at(&tokens, 8), Some(9));
        // The same picture again is found with the same ids, and its rows read back by run.
        assert_eq!(table.ids_of("picture"), Some(ids.clone()));
        assert_eq!(table.hold("picture".into(), embeddings, |_| unreachable!()), Some(ids));
        let (held, rows) = table.rows_of(&tokens[7..9]).unwrap();
        assert_eq!((held.tokens, rows), (5, 3..5));
        assert!(table.rows_of(&tokens[4..8]).is_none(), "rows and text are not one run");
    }

    /// Past its budget the table forgets the pictures used longest ago, never the current
    /// prompt's, and never gives a forgotten picture's slot to another: the same picture comes
    /// back under new ids, so no session's cached rows can pass for it.
    #[test]
    fn pictures_of_earlier_prompts_are_forgotten_past_the_budget() {
        let rows = |n: usize| ImageEmbeddings { tokens: n, width: 1, values: vec![0.0; n], grid: None };
        let place = |rows: &[u32]| rows.to_vec();
        // Room for 10 rows of 4 bytes.
        let table = ImageTable::with_budget(40);
        table.begin_prompt();
        let a = table.hold("a".into(), rows(4), place).unwrap();
        let b = table.hold("b".into(), rows(4), place).unwrap();
        // A prompt larger than the budget keeps all its pictures.
        let c = table.hold("c".into(), rows(4), place).unwrap();
        assert!(table.ids_of("a").is_some() && table.rows_of(&a).is_some());
        table.begin_prompt();
        assert_eq!(table.ids_of("b"), Some(b.clone()));
        // The next prompt's new picture makes room: a and c (unused in it) go, a first.
        let d = table.hold("d".into(), rows(2), place).unwrap();
        assert_eq!(table.ids_of("a"), None);
        assert!(table.rows_of(&a).is_none());
        assert!(table.rows_of(&b).is_some() && table.rows_of(&d).is_some());
        assert!(table.rows_of(&c).is_some(), "12 - 4 + 2 = 10 rows fit: c stays");
        // Encoded again, a comes back under a slot never used before.
        let again = table.hold("a".into(), rows(4), place).unwrap();
        assert!(
            again.iter().all(|id| !a.contains(id) && !b.contains(id) && !c.contains(id) && !d.contains(id))
        );
        assert_eq!(table.ids_of("c"), None, "c was the oldest left");
    }
}
