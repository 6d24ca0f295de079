//! `inferno`: the native command line over the same library the page uses.

mod args;
mod bench;
mod embed;
mod generate;
mod inspect;
mod logits;
mod tokenize;

use std::process::ExitCode;

const USAGE: &str = "\
usage: inferno <command> MODEL.gguf [options]

commands:
  inspect MODEL [--json]            describe a GGUF file: header, metadata, tensors, tokenizer,
                                    chat template (reads only the header)
  tokenize MODEL --text TEXT [--json] [--no-special] [--no-parse-special]
                                    token ids and pieces, as llama.cpp would produce them
  generate MODEL --prompt TEXT [--chat [--system TEXT] [--think|--no-think]
           [--reasoning-effort low|medium|high]] [-n 24]
           [--temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 --repeat-penalty 1.0
            --repeat-last-n 64 --seed N] [--trace N] [--context N] [--ignore-eos] [--json]
           [--stop TEXT]... [--json-schema FILE [--strict] | --grammar FILE]
           [--tools FILE [--tool-choice auto] [--one-call]]
           [--mmproj FILE --image PICTURE... [--image-min-tokens N] [--image-max-tokens N]]
                                    stream a continuation; --trace N explains each step with
                                    its N best candidates; --json prints one object per token
                                    and a last one with the whole answer (for --chat: its
                                    content, reasoning_content and tool_calls); --stop ends it
                                    before the first stop string to appear (repeatable);
                                    --json-schema (a JSON schema: keywords it cannot enforce
                                    are left out with a warning, or with --strict refused) or
                                    --grammar (a Lark grammar) constrains it; --tools (an
                                    OpenAI tools array, with --chat) offers functions,
                                    --tool-choice auto|none|required|NAME, --one-call without
                                    parallel calls; --reasoning-effort sets the template's
                                    reasoning_effort (gpt-oss); --mmproj loads the model's
                                    vision projector and --image (PNG, JPEG, WebP, GIF;
                                    repeatable) puts a picture where the prompt has
                                    <__media__>, or before it, in the user's turn with --chat;
                                    --image-min/max-tokens bound a picture's rows where the
                                    projector sizes pictures by aspect (Gemma 4, LFM2-VL), as
                                    llama.cpp's options of those names do
  logits MODEL --tokens 1,2,3 [--top 20] [--json]
                                    the top logits after each position (teacher-forced)
  logits MODEL --golden FILE [--tolerance 0.1] [--json]
                                    follows a llama.cpp golden file (tests/fixtures/golden):
                                    each prompt in one batch, then its continuation token by
                                    token; prints max |Δlogit| and top-1 agreement, and fails
                                    beyond the tolerance or on a top-1 miss that is no near tie
  embed MODEL TEXT... [--pooling mean|cls|last] [--dimensions N] [--raw] [--json]
                                    a sentence embedding per TEXT, pooled as the file says
                                    (or --pooling), unit length unless --raw, cut to the first
                                    N values with --dimensions; more than one TEXT also prints
                                    their cosine similarities; --json prints OpenAI's shape
  bench MODEL [--pp 64] [--tg 32] [--runs 5] [--json]
                                    prompt and decode tokens per second (median of the runs)
  bench MMPROJ --image PICTURE [--runs 5] [--json]
                                    a vision projector's time from a picture to its embeddings

generate, logits, embed and bench take --threads N (default: the machine's cores, at most 8); the
results do not depend on it. generate, logits and bench take --device gpu (a build with the gpu
feature: cargo build --release --features gpu), which runs the model through wgpu (Vulkan,
Metal or DX12); there a decode step's products quantize their inputs to 8 bits for integer dot
products where the weights' type has them (--device gpu-q8 forces that, --device gpu-float
keeps floats); bench then also prints the adapter's copy bandwidth, the weight bandwidth decode
reached, and decode both ways.
  help                              show this text";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("inferno: {}", terminal_safe(&message));
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let (command, rest) = args.split_first().ok_or_else(|| USAGE.to_owned())?;
    match command.as_str() {
        "inspect" => inspect::run(rest),
        "tokenize" => tokenize::run(rest),
        "generate" => generate::run(rest),
        "logits" => logits::run(rest),
        "bench" => bench::run(rest),
        "embed" => embed::run(rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    }
}

/// `text` with every character that a terminal would act on instead of print written as an
/// escape (`\u{1b}`): control characters other than newline and tab, and the bidirectional
/// overrides that reorder what is shown. A file's metadata is untrusted; printed raw, an
/// `ESC[2J` in a key would clear the user's terminal.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        if (c.is_control() && c != '\n' && c != '\t') || bidi {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    #[test]
    fn terminal_safe_escapes_what_a_terminal_would_act_on() {
        assert_eq!(terminal_safe("a\tb\nc"), "a\tb\nc");
        assert_eq!(terminal_safe("\u{1b}[2Jx\r\u{7}"), "\\u{1b}[2Jx\\u{d}\\u{7}");
        assert_eq!(terminal_safe("\u{9b}\u{202e}é"), "\\u{9b}\\u{202e}é");
    }
}
