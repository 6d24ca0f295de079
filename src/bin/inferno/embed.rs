//! `inferno embed`: sentence embeddings, as the page's `engine.embeddings.create` gives them.

use inferno::embedding::{EmbedOptions, Pooling, cosine};
use serde::Serialize;

use crate::args::Args;
use crate::generate::load_engine;

/// Values of each vector shown without `--json`.
const SHOWN: usize = 8;

pub fn run(args: &[String]) -> Result<(), String> {
    let args = Args::parse("embed", args, &["--pooling", "--dimensions", "--threads"], &["--json", "--raw"])?;
    let (path, texts) = args.model_and_rest()?;
    if texts.is_empty() {
        return Err("embed: give the texts to embed after MODEL".into());
    }
    let pooling = match args.text("--pooling") {
        None => None,
        Some(name) => match Pooling::from_name(name).filter(|p| p.gives_one_vector()) {
            Some(pooling) => Some(pooling),
            None => return Err(format!("embed: --pooling {name:?} is not mean, cls or last")),
        },
    };
    let dimensions = args.text("--dimensions").map(|_| args.number("--dimensions", 0)).transpose()?;
    args.start_threads()?;
    let engine = load_engine(path)?;
    let options = EmbedOptions { pooling, dimensions, raw: args.switch("--raw") };
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let result = engine.embed(&texts, options).map_err(|e| format!("{path}: {e}"))?;

    if args.switch("--json") {
        #[derive(Serialize)]
        struct Item<'a> {
            object: &'static str,
            index: usize,
            embedding: &'a [f32],
        }
        #[derive(Serialize)]
        struct Usage {
            prompt_tokens: usize,
            total_tokens: usize,
        }
        #[derive(Serialize)]
        struct Output<'a> {
            object: &'static str,
            data: Vec<Item<'a>>,
            model: &'a str,
            pooling: &'static str,
            usage: Usage,
        }
        let data = result
            .vectors
            .iter()
            .enumerate()
            .map(|(index, embedding)| Item { object: "embedding", index, embedding })
            .collect();
        let usage = Usage { prompt_tokens: result.prompt_tokens, total_tokens: result.prompt_tokens };
        let output = Output { object: "list", data, model: path, pooling: result.pooling.name(), usage };
        println!("{}", serde_json::to_string(&output).map_err(|e| e.to_string())?);
        return Ok(());
    }
    println!(
        "{} pooling, {} values each{}, {} tokens in all",
        result.pooling.name(),
        result.vectors.first().map_or(0, Vec::len),
        if options.raw { "" } else { ", unit length" },
        result.prompt_tokens
    );
    for (i, vector) in result.vectors.iter().enumerate() {
        let shown: Vec<String> = vector.iter().take(SHOWN).map(|v| format!("{v:9.6}")).collect();
        let more = if vector.len() > SHOWN { " …" } else { "" };
        println!("{i:>3}: {}{more}", shown.join(" "));
    }
    if result.vectors.len() > 1 {
        println!("cosine similarities:");
        for (i, a) in result.vectors.iter().enumerate() {
            let row: Vec<String> = result.vectors.iter().map(|b| format!("{:7.4}", cosine(a, b))).collect();
            println!("{i:>3}: {}", row.join(" "));
        }
    }
    Ok(())
}
