//! Sentence embeddings: one vector per text, pooled from the model's final hidden states as the
//! file says (`{arch}.pooling_type`, llama.cpp's `llama_pooling_type`), then optionally cut to
//! fewer dimensions and scaled to unit length, in the OpenAI `embeddings.create` shape.
//!
//! The hidden states are the output norm's rows, which llama.cpp calls `t_embd`: what its
//! pooling reads for a decoder model (Qwen3-Embedding: the last token's row).

use serde::Serialize;

use crate::gguf::Metadata;

/// How a sequence's per-token hidden states become one vector (llama.cpp's
/// `LLAMA_POOLING_TYPE_*`, the numbers a GGUF file stores).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// No pooling: a vector per token (not an OpenAI-shaped embedding).
    None,
    /// The mean of every token's row.
    Mean,
    /// The first token's row (BERT's `[CLS]`).
    Cls,
    /// The last token's row (decoder embedding models: Qwen3-Embedding).
    Last,
    /// A reranker's score through a classifier head (not an embedding).
    Rank,
}

impl Pooling {
    /// The pooling a GGUF `pooling_type` number names.
    pub fn from_id(id: u64) -> Option<Pooling> {
        Some(match id {
            0 => Pooling::None,
            1 => Pooling::Mean,
            2 => Pooling::Cls,
            3 => Pooling::Last,
            4 => Pooling::Rank,
            _ => return None,
        })
    }

    /// The pooling `{arch}.pooling_type` names, if the file has a valid one (loading checks
    /// it with a typed error; the inspector only reports it).
    pub fn declared(metadata: &Metadata) -> Option<Pooling> {
        let arch = metadata.architecture()?;
        metadata.get_u64(&format!("{arch}.pooling_type")).and_then(Pooling::from_id)
    }

    /// The name the API and the inspector use.
    pub fn name(self) -> &'static str {
        match self {
            Pooling::None => "none",
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
            Pooling::Rank => "rank",
        }
    }

    pub fn from_name(name: &str) -> Option<Pooling> {
        [Pooling::None, Pooling::Mean, Pooling::Cls, Pooling::Last, Pooling::Rank]
            .into_iter()
            .find(|p| p.name() == name)
    }

    /// Whether this pooling gives one vector per text.
    pub fn gives_one_vector(self) -> bool {
        matches!(self, Pooling::Mean | Pooling::Cls | Pooling::Last)
    }
}

/// What a model file is for, from its metadata: a declared pooling makes it an embedding
/// model; one with a chat template as well can do both (it is a decoder with its output head).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// Text generation; it embeds only when told how to pool.
    Chat,
    Embedding,
    ChatAndEmbedding,
    /// Scores pairs of texts (pooling `rank`): neither chat nor embeddings here.
    Reranker,
}

impl Purpose {
    /// From `{arch}.pooling_type` (an invalid value counts as none: loading reports it) and
    /// whether the file has `tokenizer.chat_template`.
    pub fn of(metadata: &Metadata) -> Purpose {
        let pooling = Pooling::declared(metadata);
        let chat_template = metadata.get_str("tokenizer.chat_template").is_some();
        match pooling {
            Some(Pooling::Rank) => Purpose::Reranker,
            Some(pooling) if pooling.gives_one_vector() && chat_template => Purpose::ChatAndEmbedding,
            Some(pooling) if pooling.gives_one_vector() => Purpose::Embedding,
            _ => Purpose::Chat,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Purpose::Chat => "chat",
            Purpose::Embedding => "embedding",
            Purpose::ChatAndEmbedding => "chat_and_embedding",
            Purpose::Reranker => "reranker",
        }
    }
}

/// What an embedding is asked for beyond its text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmbedOptions {
    /// The pooling to use instead of the file's (a chat model declares none).
    pub pooling: Option<Pooling>,
    /// Keep only the first `dimensions` values (Matryoshka-trained models), before scaling.
    pub dimensions: Option<usize>,
    /// Leave the vectors as pooled instead of scaling them to unit length (OpenAI's vectors,
    /// and llama.cpp's server's by default, have length 1).
    pub raw: bool,
}

/// `rows` (a sequence's rows of `width`: every one, or for last-token pooling only the last)
/// pooled into one vector of `width`.
pub fn pool(pooling: Pooling, rows: &[f32], width: usize) -> Vec<f32> {
    let n = rows.len() / width.max(1);
    match pooling {
        Pooling::Cls => rows[..width].to_vec(),
        Pooling::Last => rows[(n - 1) * width..n * width].to_vec(),
        _ => {
            // llama.cpp sums in f32 through a matrix product with 1/n weights: the same
            // value to a few ulps, which a cosine of 0.9999 does not see.
            let mut mean = vec![0f32; width];
            for row in rows.chunks_exact(width) {
                mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
            }
            let scale = 1.0 / n as f32;
            mean.iter_mut().for_each(|m| *m *= scale);
            mean
        }
    }
}

/// `v` scaled to Euclidean length 1 (llama.cpp's `common_embd_normalize` with norm 2); a zero
/// vector stays zero.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if norm > 0.0 {
        let scale = (1.0 / norm) as f32;
        v.iter_mut().for_each(|x| *x *= scale);
    }
}

/// The cosine of the angle between `a` and `b` (1 for the same direction), in f64.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(&p, &q)| f64::from(p) * f64::from(q)).sum::<f64>();
    let norms = (dot(a, a) * dot(b, b)).sqrt();
    if norms == 0.0 { 0.0 } else { dot(a, b) / norms }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_picks_the_rows_it_names() {
        let rows = [1.0, 2.0, 3.0, 6.0, 5.0, 10.0];
        assert_eq!(pool(Pooling::Cls, &rows, 2), vec![1.0, 2.0]);
        assert_eq!(pool(Pooling::Last, &rows, 2), vec![5.0, 10.0]);
        assert_eq!(pool(Pooling::Mean, &rows, 2), vec![3.0, 6.0]);
        assert_eq!(pool(Pooling::Last, &[7.0, 8.0], 2), vec![7.0, 8.0]);
    }

    #[test]
    fn normalized_vectors_have_unit_length_and_zero_stays_zero() {
        let mut v = [3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut zero = [0.0; 3];
        normalize(&mut zero);
        assert_eq!(zero, [0.0; 3]);
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-12);
        assert!(cosine(&[1.0, 0.0], &[0.0, 2.0]).abs() < 1e-12);
    }

    #[test]
    fn pooling_ids_and_names_are_llama_cpps() {
        for (id, name) in [(0, "none"), (1, "mean"), (2, "cls"), (3, "last"), (4, "rank")] {
            let pooling = Pooling::from_id(id).unwrap();
            assert_eq!(pooling.name(), name);
            assert_eq!(Pooling::from_name(name), Some(pooling));
        }
        assert_eq!(Pooling::from_id(5), None);
        assert_eq!(Pooling::from_name("max"), None);
    }
}
