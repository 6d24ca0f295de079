//! `inferno tokenize`: the ids and pieces of a text.

use inferno::gguf::Gguf;
use inferno::tokenizer::{EncodeOptions, Tokenizer};
use serde::Serialize;

use crate::args::Args;

pub fn run(args: &[String]) -> Result<(), String> {
    let args = Args::parse("tokenize", args, &["--text"], &["--json", "--no-special", "--no-parse-special"])?;
    let path = args.model()?;
    let text = args.text("--text").ok_or("tokenize: missing --text")?;
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let tokenizer = load_tokenizer(path, &bytes)?;
    let options = EncodeOptions {
        add_special: !args.switch("--no-special"),
        parse_special: !args.switch("--no-parse-special"),
    };
    let ids = tokenizer.encode(text, options);

    #[derive(Serialize)]
    struct Token {
        id: u32,
        piece: String,
    }
    let tokens: Vec<Token> = ids.iter().map(|&id| Token { id, piece: tokenizer.token_text(id) }).collect();
    if args.switch("--json") {
        #[derive(Serialize)]
        struct Output<'a> {
            ids: &'a [u32],
            tokens: &'a [Token],
        }
        let json =
            serde_json::to_string(&Output { ids: &ids, tokens: &tokens }).map_err(|e| e.to_string())?;
        println!("{json}");
    } else {
        println!("{} tokens", tokens.len());
        for token in &tokens {
            println!("{:>8}  {}", token.id, escaped(tokenizer.token_bytes(token.id, true)));
        }
    }
    Ok(())
}

pub fn load_tokenizer(path: &str, bytes: &[u8]) -> Result<Tokenizer, String> {
    let gguf = Gguf::parse(bytes).map_err(|e| format!("{path}: {e}"))?;
    Tokenizer::from_metadata(gguf.metadata()).map_err(|e| format!("{path}: tokenizer: {e}"))
}

/// A piece as text, with bytes that are not whole UTF-8 characters written as `\xNN`.
fn escaped(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        out.extend(chunk.valid().escape_debug());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02X}"));
        }
    }
    out.push('"');
    out
}
