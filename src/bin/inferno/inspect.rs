//! `inferno inspect`: the facts of a GGUF file, read from its header only.

use inferno::embedding::Purpose;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use inferno::gguf::{self, GgufHeader, HeaderParse};
use inferno::inspect::Report;

use crate::args::Args;

pub fn run(args: &[String]) -> Result<(), String> {
    let args = Args::parse("inspect", args, &[], &["--json"])?;
    let path = args.model()?;
    let json = args.switch("--json");
    let (header, bytes_read) = read_model_header(path)?;
    let report = Report::new(&header);
    if json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        // Names, strings and the template come from the file: nothing in them may drive the terminal.
        print!("{}", crate::terminal_safe(&render(&report, bytes_read)));
    }
    Ok(())
}

/// Reads only as much of the file as the header needs, growing the prefix like the page does.
/// The header of the model at `path`: for a shard of a split model whose shards lie beside it
/// (gguf-split's names), all of their headers merged into one model's.
fn read_model_header(path: &str) -> Result<(GgufHeader, u64), String> {
    let Some(names) = gguf::split::shard_names(path).filter(|names| names.len() > 1) else {
        return read_header(path);
    };
    let (mut headers, mut start, mut read) = (Vec::new(), 0u64, 0u64);
    for name in &names {
        let (header, bytes) = read_header(name)?;
        let size = header.file_size;
        headers.push((start, header));
        (start, read) = (start + size, read + bytes);
    }
    let header = gguf::split::merge(headers, start).map_err(|e| format!("{path}: {e}"))?;
    Ok((header, read))
}

fn read_header(path: &str) -> Result<(GgufHeader, u64), String> {
    let mut file = File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let file_size = file.metadata().map_err(|e| format!("{path}: {e}"))?.len();
    let mut prefix = Vec::new();
    let mut want = (1u64 << 20).min(file_size);
    loop {
        let have = prefix.len() as u64;
        file.seek(SeekFrom::Start(have)).map_err(|e| format!("{path}: {e}"))?;
        (&mut file).take(want - have).read_to_end(&mut prefix).map_err(|e| format!("{path}: {e}"))?;
        match gguf::parse_header(&prefix, file_size).map_err(|e| format!("{path}: {e}"))? {
            HeaderParse::Complete(header) => return Ok((header, prefix.len() as u64)),
            HeaderParse::NeedMore { at_least } => {
                if prefix.len() as u64 != want {
                    return Err(format!("{path}: file shrank while reading"));
                }
                want = at_least.max(want.saturating_mul(2)).min(file_size);
            }
        }
    }
}

fn render(report: &Report, bytes_read: u64) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let g = &report.gguf;
    let s = &report.summary;
    let where_data = match g.shards {
        1 => format!("data at offset {}", thousands(g.data_offset)),
        n => format!("{n} files (gguf-split), offsets across them laid end to end"),
    };
    let _ = writeln!(
        out,
        "GGUF v{} · {} tensors · {} metadata keys · alignment {} · {where_data}",
        g.version, g.tensor_count, g.metadata_count, g.alignment,
    );
    let _ = writeln!(
        out,
        "file {} bytes · tensor data {} bytes · header read {} bytes",
        thousands(report.file.size),
        thousands(report.file.tensor_bytes),
        thousands(bytes_read)
    );

    let _ = writeln!(out, "\nSummary");
    let field = |out: &mut String, name: &str, value: Option<&str>| {
        let _ = writeln!(out, "  {name:<16} {}", value.unwrap_or("-"));
    };
    field(&mut out, "architecture", s.architecture.as_deref());
    field(&mut out, "name", s.name.as_deref());
    field(&mut out, "size label", s.size_label.as_deref());
    field(&mut out, "file type", s.file_type.as_deref());
    field(
        &mut out,
        "parameters",
        Some(&format!("{} ({})", thousands(s.parameter_count), short(s.parameter_count))),
    );
    let mix: Vec<String> =
        s.quantization_mix.iter().map(|q| format!("{} {:.1}%", q.type_name, q.share * 100.0)).collect();
    field(&mut out, "quantization", Some(&mix.join(", ")));
    let runs = match &report.runs.reason {
        None if report.runs.embeds_only => {
            "no, it embeds: Inferno can load this encoder to embed text; it has no output layer to chat with"
                .to_string()
        }
        None => "yes: Inferno can load this file and chat with it".to_string(),
        Some(reason) => format!("no: {reason}"),
    };
    field(&mut out, "chat", Some(&runs));
    let pooling = s.pooling.unwrap_or("none");
    let purpose = match s.purpose {
        Purpose::Chat => "chat (declares no pooling; embeds when told how)".to_string(),
        Purpose::Embedding => format!("embedding (pooling {pooling})"),
        Purpose::ChatAndEmbedding => format!("chat and embedding (pooling {pooling}, and a chat template)"),
        Purpose::Reranker => "reranker (pooling rank): scores pairs of texts; Inferno does not".to_string(),
    };
    let purpose = match &report.vision {
        Some(_) => "vision projector: turns images into a language model's embeddings".to_string(),
        None => purpose,
    };
    field(&mut out, "purpose", Some(&purpose));
    if let Some(vision) = &report.vision {
        render_vision(&mut out, vision);
    }

    if !report.hyperparameters.is_empty() {
        let arch = s.architecture.as_deref().unwrap_or("");
        let _ = writeln!(out, "\nHyperparameters ({arch}.*)");
        for h in &report.hyperparameters {
            let _ = writeln!(out, "  {:<40} {}", h.key, compact_json(&h.value));
        }
    }

    if let Some(t) = &report.tokenizer {
        let _ = writeln!(out, "\nTokenizer");
        field(&mut out, "model", t.model.as_deref());
        field(&mut out, "pre-tokenizer", t.pre.as_deref());
        field(&mut out, "vocabulary", Some(&thousands(t.vocab_size as u64)));
        field(&mut out, "merges", Some(&thousands(t.merges_count as u64)));
        let flag = |v: Option<bool>| v.map_or("unset", |b| if b { "yes" } else { "no" });
        field(&mut out, "add bos / eos", Some(&format!("{} / {}", flag(t.add_bos), flag(t.add_eos))));
        for sp in &t.special {
            let text = sp.text.as_deref().map_or("(outside vocabulary)".to_owned(), |t| format!("{t:?}"));
            let _ = writeln!(out, "  {:<16} {} {}", sp.role, sp.id, text);
        }
    }

    let _ = writeln!(out, "\nMetadata ({})", report.metadata.len());
    for m in &report.metadata {
        let value = match &m.array {
            Some(a) => {
                let items: Vec<String> = a.preview.iter().take(4).map(compact_json).collect();
                let more = if a.length > items.len() { ", …" } else { "" };
                format!("[{} × {}] [{}{more}]", a.element_type, a.length, items.join(", "))
            }
            None => compact_json(&m.value),
        };
        let _ = writeln!(out, "  {:<44} {:<7} {}", m.key, m.value_type, clip(&value, 100));
    }

    let _ = writeln!(out, "\nTensors ({})", report.tensors.len());
    let _ = writeln!(out, "  {:<40} {:<24} {:<8} {:>14} {:>14}", "name", "dims", "type", "bytes", "offset");
    for t in &report.tensors {
        let dims: Vec<String> = t.dims.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "  {:<40} {:<24} {:<8} {:>14} {:>14}",
            t.name,
            dims.join(" × "),
            t.type_name,
            thousands(t.bytes),
            thousands(t.offset)
        );
    }

    let _ = writeln!(out, "\nTotals by type");
    for t in &report.types {
        let _ = writeln!(
            out,
            "  {:<8} {:>5} tensors {:>16} elements {:>16} bytes",
            t.type_name,
            t.tensors,
            thousands(t.elements),
            thousands(t.bytes)
        );
    }
    let _ = writeln!(
        out,
        "  total parameters {} · tensor bytes {} of file {}",
        thousands(s.parameter_count),
        thousands(report.file.tensor_bytes),
        thousands(report.file.size)
    );

    if let Some(template) = &report.chat_template {
        let _ = writeln!(out, "\nChat template\n{template}");
    }
    out
}

/// Three channel values as the file stores them (f32: printed at f32's precision).
fn rgb(values: [f64; 3]) -> String {
    values.map(|v| (v as f32).to_string()).join(", ")
}

/// The projector card: what image it takes, what it gives, and what it fits.
fn render_vision(out: &mut String, v: &inferno::vision::ProjectorFacts) {
    use std::fmt::Write;
    let _ = writeln!(out, "\nVision projector");
    let known = |n: Option<u64>| n.map_or("-".to_string(), thousands);
    let rows = [
        ("projector", if v.projector.is_empty() { "-".to_string() } else { v.projector.clone() }),
        ("fits", v.family.unwrap_or("a family this table does not know").to_string()),
        (
            "model arch",
            if v.model_architectures.is_empty() { "-".into() } else { v.model_architectures.join(", ") },
        ),
        (
            "encoders",
            match (v.has_vision, v.has_audio) {
                (true, true) => "image and audio",
                (true, false) => "image",
                (false, true) => "audio only",
                (false, false) => "none",
            }
            .to_string(),
        ),
        (
            "image",
            match (v.image_size, v.patch_size, v.patches_per_side) {
                // Projectors that size pictures at their own aspect ignore the image size.
                (_, patch, _) if v.image_tokens.is_some() => {
                    format!("each picture at its own aspect, patches of {} px", known(patch))
                }
                (Some(size), Some(patch), Some(side)) => {
                    format!("{size} x {size} px, patches of {patch} px ({side} x {side})")
                }
                (size, patch, _) => format!("{} px, patches of {} px", known(size), known(patch)),
            },
        ),
        ("mean (RGB)", v.image_mean.map_or("-".into(), rgb)),
        ("std (RGB)", v.image_std.map_or("-".into(), rgb)),
        (
            "encoder",
            format!(
                "width {}, {} layers, {} heads, feed-forward {}",
                known(v.encoder_width),
                known(v.encoder_layers),
                known(v.encoder_heads),
                known(v.encoder_feed_forward)
            ),
        ),
        ("output width", known(v.output_width)),
    ];
    let rows_per_picture = v.image_tokens.map(|[min, max]| ("rows a picture", format!("{min} to {max}")));
    let rows = rows.into_iter().chain(rows_per_picture);
    for (name, value) in rows {
        let _ = writeln!(out, "  {name:<16} {value}");
    }
    for problem in &v.problems {
        let _ = writeln!(out, "  problem          {problem}");
    }
}

fn compact_json(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// 268098176 → "268.1 M".
fn short(n: u64) -> String {
    let n = n as f64;
    match n {
        n if n >= 1e9 => format!("{:.2} B", n / 1e9),
        n if n >= 1e6 => format!("{:.1} M", n / 1e6),
        n if n >= 1e3 => format!("{:.1} K", n / 1e3),
        n => format!("{n}"),
    }
}
