//! Models split with llama.cpp's `gguf-split`: several GGUF files ("shards") named
//! `NAME-00001-of-00003.gguf`..., each a whole GGUF file holding some of the tensors, with
//! `split.no` (from 0), `split.count` and, in the first, `split.tensors.count` and the model's
//! metadata. [`merge`] makes one header of them, as if the shards' bytes were one file laid end
//! to end, after checking that they are exactly one model's shards.

use std::collections::HashMap;

use super::{GgufError, GgufHeader, Metadata};

pub const SPLIT_NO: &str = "split.no";
pub const SPLIT_COUNT: &str = "split.count";
pub const SPLIT_TENSORS: &str = "split.tensors.count";

/// The most shards a model may come in (gguf-split's names have five digits).
pub const MAX_SHARDS: u64 = 99_999;

/// `(split.no, split.count)` of a shard's metadata; `None` for a file that is not a shard (no
/// `split.count`, or a count of 1).
pub fn shard_of(metadata: &Metadata) -> Option<(u64, u64)> {
    let count = metadata.get_u64(SPLIT_COUNT).filter(|&count| count > 1)?;
    Some((metadata.get_u64(SPLIT_NO).unwrap_or(0), count))
}

/// The file names of every shard of the split model that `name` (a path or URL ending in
/// `-NNNNN-of-MMMMM.gguf`) is one shard of, in order; `None` for a name not of that form.
pub fn shard_names(name: &str) -> Option<Vec<String>> {
    let stem = name.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(count) || !digits(no) {
        return None;
    }
    let count: u64 = count.parse().ok()?;
    let no: u64 = no.parse().ok()?;
    if count < 1 || no < 1 || no > count {
        return None;
    }
    Some((1..=count).map(|i| format!("{prefix}-{i:05}-of-{count:05}.gguf")).collect())
}

/// One header for the shards `headers` (each with the offset where its bytes start when the
/// files are laid end to end, in the order given, which need not be shard order): shard 0's
/// metadata and version, every shard's tensors with their offsets made absolute. Refuses a
/// file that is not a shard, shards of different counts, a missing or repeated shard, a tensor
/// in two shards, and a tensor count other than `split.tensors.count`.
pub fn merge(headers: Vec<(u64, GgufHeader)>, total_size: u64) -> Result<GgufHeader, GgufError> {
    let mismatch = |file: usize, reason: String| GgufError::ShardMismatch { file, reason };
    let mut by_no: Vec<Option<usize>> = Vec::new();
    let mut count = None;
    for (file, (_, header)) in headers.iter().enumerate() {
        let Some((no, its_count)) = shard_of(&header.metadata) else {
            return Err(mismatch(
                file,
                "is not a shard of a split model (it has no split.count above 1)".into(),
            ));
        };
        if its_count > MAX_SHARDS {
            return Err(mismatch(
                file,
                format!("says the model has {its_count} shards, more than {MAX_SHARDS}"),
            ));
        }
        match count {
            None => {
                count = Some(its_count);
                by_no = vec![None; its_count as usize];
            }
            Some(count) if count != its_count => {
                return Err(mismatch(file, format!("is a shard of {its_count}, the first file of {count}")));
            }
            Some(_) => {}
        }
        let slot = by_no.get_mut(no as usize).ok_or_else(|| {
            mismatch(file, format!("is shard {} of only {its_count}", no.saturating_add(1)))
        })?;
        if let Some(first) = slot.replace(file) {
            return Err(GgufError::DuplicateShard { no, first, second: file });
        }
    }
    let count = count.unwrap_or(0);
    if let Some(no) = by_no.iter().position(Option::is_none) {
        return Err(GgufError::MissingShard { no: no as u64, count });
    }
    let order: Vec<usize> = by_no.into_iter().flatten().collect();
    let first = &headers[order[0]].1;
    let mut tensors = Vec::new();
    let mut holder: HashMap<String, usize> = HashMap::new();
    for &file in &order {
        let (start, header) = &headers[file];
        for tensor in &header.tensors {
            if let Some(other) = holder.insert(tensor.name.clone(), file) {
                let reason = format!("holds tensor `{}`, which file {} holds too", tensor.name, other + 1);
                return Err(mismatch(file, reason));
            }
            let mut tensor = tensor.clone();
            tensor.offset = start.saturating_add(header.data_offset).saturating_add(tensor.offset);
            tensors.push(tensor);
        }
    }
    if let Some(expected) = first.metadata.get_u64(SPLIT_TENSORS)
        && expected != tensors.len() as u64
    {
        let reason = format!("says the model has {expected} tensors, but its shards hold {}", tensors.len());
        return Err(mismatch(order[0], reason));
    }
    Ok(GgufHeader {
        version: first.version,
        metadata: first.metadata.clone(),
        tensors,
        alignment: first.alignment,
        data_offset: 0,
        file_size: total_size,
        shards: count as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_follow_gguf_splits_rule() {
        let names = shard_names("https://host/m/Qwen3-0.6B-Q4_K_M-00002-of-00003.gguf").unwrap();
        assert_eq!(names.len(), 3);
        assert_eq!(names[0], "https://host/m/Qwen3-0.6B-Q4_K_M-00001-of-00003.gguf");
        assert_eq!(names[2], "https://host/m/Qwen3-0.6B-Q4_K_M-00003-of-00003.gguf");
        for name in [
            "model.gguf",
            "m-1-of-3.gguf",
            "m-00004-of-00003.gguf",
            "m-00000-of-00003.gguf",
            "m-00001-of-00003.bin",
        ] {
            assert_eq!(shard_names(name), None, "{name}");
        }
    }
}
