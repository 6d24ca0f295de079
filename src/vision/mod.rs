//! Vision projector files ("mmproj"): llama.cpp's `clip` GGUF, which holds an image encoder (a
//! ViT) and the projector that maps its output into a language model's token embeddings. Such
//! a file goes beside the language model it was made for; on its own it cannot chat.
//!
//! This module reads what the file says about itself, as llama.cpp's `tools/mtmd/clip.cpp`
//! reads it: the projector type, the encoder's shape, the image it expects (size, patch,
//! normalization), the width of the embeddings it produces, and which model family it fits.
//! [`image`] holds pictures and resizes them as mtmd does; [`vit`] encodes them (SigLIP with
//! Gemma 3's, SmolVLM's or LFM2-VL's projector, Gemma 4's encoder and projector, and Qwen's
//! encoders (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) and merger: the types encoded so far,
//! [`ENCODED_PROJECTORS`]).

use serde::Serialize;

pub(crate) mod backend;
#[cfg(not(target_family = "wasm"))]
mod decode;
mod header;
pub mod image;
pub mod vit;

#[cfg(not(target_family = "wasm"))]
pub use decode::{decode, dimensions};

/// In the browser the page decodes pictures (`createImageBitmap`) and hands over their pixels;
/// the crate built for it carries no decoder.
#[cfg(target_family = "wasm")]
pub fn decode(_: &[u8]) -> Result<RgbImage, crate::model::ModelError> {
    Err(crate::model::ModelError::BadImage(
        "this build decodes no picture files: the page decodes them and passes their pixels".into(),
    ))
}

pub use header::{PICTURE_FORMATS, PictureHeader, picture_header};
pub use image::{Filter, MAX_PIXELS, RgbImage};
pub use vit::{
    EncodedPicture, EncoderShape, ImageEmbeddings, PictureEncoding, PicturePart, PromptPart, VisionEncoder,
};

use crate::gguf::{GgufHeader, Metadata, Value};

/// The projector types [`VisionEncoder`] encodes.
pub const ENCODED_PROJECTORS: &[&str] = &[
    "gemma3",
    "gemma4v",
    "idefics3",
    "lfm2",
    "qwen2vl_merger",
    "qwen2.5vl_merger",
    "qwen2.5o",
    "qwen3vl_merger",
];

/// The projector type whose graph encodes a file's pictures: its own, but Qwen2.5-Omni's
/// (`qwen2.5o`, a file with both an image and an audio encoder), whose pictures clip.cpp encodes
/// as Qwen2.5-VL's.
pub fn vision_type(projector: &str) -> &str {
    match projector {
        "qwen2.5o" => "qwen2.5vl_merger",
        other => other,
    }
}

/// `general.architecture` of a projector file.
pub const ARCHITECTURE: &str = "clip";

/// What a projector file says about itself (the inspector's "Vision projector" card, and a
/// loaded model's `vision` in the JS API).
#[cfg_attr(test, derive(ts_rs::TS))]
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProjectorFacts {
    /// `clip.vision.projector_type`, else `clip.projector_type` (llama.cpp's name).
    pub projector: String,
    /// The model family it was made for, where the projector type names one.
    pub family: Option<&'static str>,
    /// The language model architectures (`general.architecture`) that family's files carry.
    pub model_architectures: &'static [&'static str],
    /// Whether the file has an image encoder, and an audio one.
    pub has_vision: bool,
    pub has_audio: bool,
    /// The square image the encoder takes, in pixels, and its patch side.
    pub image_size: Option<u64>,
    pub patch_size: Option<u64>,
    /// Patches per image side (`image_size / patch_size`), before any merging.
    pub patches_per_side: Option<u64>,
    /// Per-channel (R, G, B) normalization of pixels in 0..=1: `(x - mean) / std`.
    pub image_mean: Option<[f64; 3]>,
    pub image_std: Option<[f64; 3]>,
    /// The encoder: width, layers, heads and feed-forward width.
    pub encoder_width: Option<u64>,
    pub encoder_layers: Option<u64>,
    pub encoder_heads: Option<u64>,
    pub encoder_feed_forward: Option<u64>,
    /// The width of the embeddings it puts into the language model, from its last projection
    /// tensor as llama.cpp's `clip_n_mmproj_embd` takes it: the language model's embedding
    /// length must equal it.
    pub output_width: Option<u64>,
    /// The least and most rows of embeddings a picture takes, where the projector sizes
    /// pictures at their own aspect (Gemma 4, LFM2-VL): clip.cpp's bounds, or those a loaded
    /// engine was given (`image_min_tokens`, `image_max_tokens`). None where every picture
    /// takes the same rows.
    pub image_tokens: Option<[u64; 2]>,
    /// What the file gets wrong, in words (a value of the wrong type or out of range); the
    /// facts above leave such a value out.
    pub problems: Vec<String>,
}

/// Whether a header is a projector file's.
pub fn is_projector(header: &GgufHeader) -> bool {
    header.metadata.architecture() == Some(ARCHITECTURE)
}

/// One row of the table of known projector types: llama.cpp's name, the family it serves,
/// the language model architectures of that family, and the tensor (with the dimension) whose
/// length is the projector's output width (`clip_n_mmproj_embd`).
struct KnownProjector {
    name: &'static str,
    family: &'static str,
    model_architectures: &'static [&'static str],
    output: Option<(&'static str, usize)>,
}

/// The projector types of the small vision models a browser can run, and of the families
/// people most often meet; llama.cpp knows more, which the report names without a family.
const KNOWN_PROJECTORS: &[KnownProjector] = &[
    KnownProjector {
        name: "gemma3",
        family: "Gemma 3 (4B and up)",
        model_architectures: &["gemma3"],
        output: Some(("mm.input_projection.weight", 0)),
    },
    KnownProjector {
        name: "gemma4v",
        family: "Gemma 4",
        model_architectures: &["gemma4"],
        output: Some(("mm.input_projection.weight", 1)),
    },
    KnownProjector {
        name: "gemma3nv",
        family: "Gemma 3n",
        model_architectures: &["gemma3n"],
        output: Some(("mm.input_projection.weight", 0)),
    },
    KnownProjector {
        name: "idefics3",
        family: "SmolVLM / Idefics3",
        model_architectures: &["llama"],
        output: Some(("mm.model.fc.weight", 1)),
    },
    KnownProjector {
        name: "lfm2",
        family: "LFM2-VL",
        model_architectures: &["lfm2"],
        output: Some(("mm.2.weight", 1)),
    },
    KnownProjector {
        name: "qwen2vl_merger",
        family: "Qwen2-VL",
        model_architectures: &["qwen2vl"],
        output: Some(("mm.2.bias", 0)),
    },
    KnownProjector {
        name: "qwen2.5vl_merger",
        family: "Qwen2.5-VL",
        model_architectures: &["qwen2vl"],
        output: Some(("mm.2.bias", 0)),
    },
    KnownProjector {
        name: "qwen2.5o",
        family: "Qwen2.5-Omni (its pictures; its audio is not heard)",
        model_architectures: &["qwen2vl"],
        output: Some(("mm.2.bias", 0)),
    },
    KnownProjector {
        name: "qwen3vl_merger",
        family: "Qwen3-VL / Qwen3.5",
        model_architectures: &["qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe"],
        // Times (1 + deepstack layers): see `output_width`.
        output: Some(("mm.2.bias", 0)),
    },
    KnownProjector {
        name: "pixtral",
        family: "Pixtral / Mistral Small 3.1",
        model_architectures: &["llama"],
        output: Some(("mm.2.weight", 1)),
    },
    KnownProjector {
        name: "internvl",
        family: "InternVL",
        model_architectures: &["qwen2", "qwen3", "llama"],
        output: Some(("mm.model.mlp.3.weight", 1)),
    },
    KnownProjector {
        name: "llama4",
        family: "Llama 4",
        model_architectures: &["llama4"],
        output: Some(("mm.model.fc.weight", 1)),
    },
    KnownProjector {
        name: "mlp",
        family: "LLaVA 1.5 / 1.6",
        model_architectures: &["llama"],
        output: Some(("mm.2.weight", 1)),
    },
    KnownProjector {
        name: "resampler",
        family: "MiniCPM-V",
        model_architectures: &["qwen2", "qwen3", "llama"],
        output: None,
    },
    KnownProjector {
        name: "kimivl",
        family: "Kimi-VL",
        model_architectures: &["deepseek2"],
        output: Some(("mm.2.weight", 1)),
    },
];

/// The Qwen3-VL merger's extra outputs: one per encoder layer with deepstack tensors.
const DEEPSTACK_PREFIX: &str = "v.deepstack.";

impl ProjectorFacts {
    /// The facts of a projector file's header; `None` for any other file. Never fails: a bad
    /// or missing value is left out, and a bad one is named in [`problems`](Self::problems).
    pub fn of(header: &GgufHeader) -> Option<ProjectorFacts> {
        if !is_projector(header) {
            return None;
        }
        let metadata = &header.metadata;
        let mut problems = Vec::new();
        let projector = text(metadata, "clip.vision.projector_type", &mut problems)
            .or_else(|| text(metadata, "clip.projector_type", &mut problems))
            .unwrap_or_default();
        if projector.is_empty() {
            problems.push("names no projector type (clip.projector_type)".into());
        }
        let known = KNOWN_PROJECTORS.iter().find(|known| known.name == projector);
        let has_vision = flag(metadata, "clip.has_vision_encoder", &mut problems).unwrap_or(false);
        let has_audio = flag(metadata, "clip.has_audio_encoder", &mut problems).unwrap_or(false);
        let image_size = count(metadata, "clip.vision.image_size", &mut problems);
        let patch_size = count(metadata, "clip.vision.patch_size", &mut problems);
        let patches_per_side = match (image_size, patch_size) {
            (Some(image), Some(patch)) if image % patch == 0 => Some(image / patch),
            (Some(image), Some(patch)) => {
                problems.push(format!("image size {image} is not a whole number of {patch}-pixel patches"));
                None
            }
            _ => None,
        };
        if !has_vision {
            problems.push(if has_audio {
                "has an audio encoder and no image encoder".into()
            } else {
                "has no image encoder (clip.has_vision_encoder)".into()
            });
        }
        let encoder_width = count(metadata, "clip.vision.embedding_length", &mut problems);
        // Qwen2-VL's converter writes the language model's width as the encoder's feed-forward
        // (older ones 0), and clip.cpp's graph for these types never reads it: their width is
        // the first up matrix's.
        let encoder_feed_forward = match vision_type(&projector) {
            "qwen2vl_merger" | "qwen2.5vl_merger" => encoder_width
                .and_then(|width| feed_forward_of(header, vision_type(&projector), width, &mut problems)),
            _ => count(metadata, "clip.vision.feed_forward_length", &mut problems),
        };
        Some(ProjectorFacts {
            family: known.map(|known| known.family),
            model_architectures: known.map_or(&[], |known| known.model_architectures),
            has_vision,
            has_audio,
            image_size,
            patch_size,
            patches_per_side,
            image_mean: channels(metadata, "clip.vision.image_mean", false, &mut problems),
            image_std: channels(metadata, "clip.vision.image_std", true, &mut problems),
            encoder_width,
            encoder_layers: count(metadata, "clip.vision.block_count", &mut problems),
            encoder_heads: count(metadata, "clip.vision.attention.head_count", &mut problems),
            encoder_feed_forward,
            output_width: known.and_then(|known| output_width(header, known, &mut problems)),
            image_tokens: vit::own_image_tokens(vision_type(&projector))
                .map(|(min, max)| [min as u64, max as u64]),
            projector,
            problems,
        })
    }

    /// Why the engine does not load this file, in a person's words.
    pub fn refusal(&self) -> String {
        let fits = match self.family {
            Some(family) => format!("a vision projector (mmproj) for {family}"),
            None if self.projector.is_empty() => "a vision projector (mmproj)".to_string(),
            None => format!("a vision projector (mmproj, type {})", self.projector),
        };
        let how = if ENCODED_PROJECTORS.contains(&self.projector.as_str()) {
            "Load it with that model: drop both files on the page together (or this one onto \
             the loaded model), or inferno generate MODEL --mmproj FILE"
        } else {
            "Inferno does not encode this type yet (it encodes Gemma 3's, Gemma 4's, SmolVLM's, LFM2-VL's, \
             Qwen2-VL's, Qwen2.5-VL's, Qwen2.5-Omni's pictures, Qwen3.5's and Qwen3-VL's)"
        };
        format!("{fits}: not a model on its own but the picture encoder beside its language model. {how}")
    }
}

/// The value at `key` as `read` takes it, or a problem naming `wanted` if it holds something
/// else; `None` without a problem when the key is absent.
fn typed<T>(
    metadata: &Metadata,
    key: &str,
    wanted: &str,
    read: impl Fn(&Value) -> Option<T>,
    problems: &mut Vec<String>,
) -> Option<T> {
    let value = metadata.get(key)?;
    let read = read(value);
    if read.is_none() {
        problems.push(format!("{key} is a {}, not {wanted}", value.value_type().name()));
    }
    read
}

fn text(metadata: &Metadata, key: &str, problems: &mut Vec<String>) -> Option<String> {
    typed(metadata, key, "a string", |v| v.as_str().map(str::to_string), problems)
}

fn flag(metadata: &Metadata, key: &str, problems: &mut Vec<String>) -> Option<bool> {
    typed(metadata, key, "a bool", Value::as_bool, problems)
}

/// Sizes and counts above this are no real encoder's; a file that claims one is refused it.
const LARGEST_SIZE: u64 = 1 << 20;

/// A positive integer of a sane size.
fn count(metadata: &Metadata, key: &str, problems: &mut Vec<String>) -> Option<u64> {
    let n = typed(metadata, key, "a whole number", Value::as_u64, problems)?;
    if !(1..=LARGEST_SIZE).contains(&n) {
        problems.push(format!("{key} is {n}, outside 1..={LARGEST_SIZE}"));
        return None;
    }
    Some(n)
}

/// Three finite numbers, one per colour channel (positive where `positive`: a divisor).
fn channels(metadata: &Metadata, key: &str, positive: bool, problems: &mut Vec<String>) -> Option<[f64; 3]> {
    let array = match metadata.get(key)? {
        Value::Array(array) => array,
        other => {
            problems.push(format!("{key} is a {}, not an array of 3 numbers", other.value_type().name()));
            return None;
        }
    };
    if array.len() != 3 {
        problems.push(format!("{key} has {} values, not 3 (R, G, B)", array.len()));
        return None;
    }
    let mut values = [0.0; 3];
    for (i, slot) in values.iter_mut().enumerate() {
        match array.get(i).as_ref().and_then(Value::as_f64) {
            Some(v) if v.is_finite() && (!positive || v > 0.0) => *slot = v,
            _ => {
                let want = if positive { "positive finite numbers" } else { "finite numbers" };
                problems.push(format!("{key} must hold {want}"));
                return None;
            }
        }
    }
    Some(values)
}

/// The feed-forward width of an encoder whose file's key is not to be trusted: the rows of its
/// first layer's up matrix, which maps from the encoder's `width`.
fn feed_forward_of(
    header: &GgufHeader,
    projector: &str,
    width: u64,
    problems: &mut Vec<String>,
) -> Option<u64> {
    let up = vit::feed_forward_names(header, projector, 0, width as usize).0;
    let name = format!("v.blk.0.{up}.weight");
    match header.tensor(&name).map(|t| t.dims.as_slice()) {
        Some(&[cols, rows]) if cols == width && (1..=LARGEST_SIZE).contains(&rows) => Some(rows),
        _ => {
            problems.push(format!("{name} is not a matrix from the encoder's width {width}"));
            None
        }
    }
}

/// The projector's output width: a dimension of its last projection tensor, as llama.cpp's
/// `clip_n_mmproj_embd` takes it.
fn output_width(header: &GgufHeader, known: &KnownProjector, problems: &mut Vec<String>) -> Option<u64> {
    let (name, dim) = known.output?;
    let Some(tensor) = header.tensor(name) else {
        problems.push(format!("lacks {name}, the projection whose width the language model must have"));
        return None;
    };
    let width = *tensor.dims.get(dim)?;
    if known.name != "qwen3vl_merger" {
        return Some(width);
    }
    // Qwen3-VL stacks the outputs of its deepstack layers beside the main one.
    let deepstack_layers = header
        .tensors
        .iter()
        .filter(|t| t.name.starts_with(DEEPSTACK_PREFIX) && t.name.ends_with(".fc2.weight"))
        .count() as u64;
    width.checked_mul(1 + deepstack_layers)
}

#[cfg(test)]
mod tests;
