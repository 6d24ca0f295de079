//! `inferno logits`: the highest logits after each position of a given token sequence
//! (teacher-forced), for comparing with llama.cpp.

use inferno::model::LogitsFor;
use serde::Serialize;

use crate::args::Args;
use crate::generate::load_engine;

pub fn run(args: &[String]) -> Result<(), String> {
    let args = Args::parse("logits", args, &["--tokens", "--top", "--threads"], &["--json"])?;
    let path = args.model()?;
    let list = args.text("--tokens").ok_or("logits: missing --tokens (comma-separated ids)")?;
    let tokens: Vec<u32> = list
        .split(',')
        .map(|t| t.trim().parse().map_err(|_| format!("logits: {t:?} is not a token id")))
        .collect::<Result<_, _>>()?;
    if tokens.is_empty() {
        return Err("logits: --tokens is empty".into());
    }
    args.start_threads()?;
    let top: usize = args.number("--top", 20)?;
    let engine = load_engine(path)?;
    let model = engine.model();
    let (mut cache, mut scratch) =
        model.new_state(tokens.len(), tokens.len()).map_err(|e| format!("logits: {e}"))?;
    let logits = model
        .forward(&mut cache, &mut scratch, &tokens, LogitsFor::All)
        .map_err(|e| format!("logits: {e}"))?;
    let vocab = model.config().vocab_size;

    #[derive(Serialize)]
    struct Logit {
        id: u32,
        logit: f32,
    }
    #[derive(Serialize)]
    struct Position {
        position: usize,
        token: u32,
        top: Vec<Logit>,
    }
    let positions: Vec<Position> = tokens
        .iter()
        .zip(logits.chunks_exact(vocab))
        .enumerate()
        .map(|(position, (&token, row))| {
            let mut ranked: Vec<(u32, f32)> = row.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
            let n = top.min(ranked.len());
            if n > 0 && n < ranked.len() {
                ranked.select_nth_unstable_by(n - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            }
            ranked.truncate(n);
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            Position {
                position,
                token,
                top: ranked.into_iter().map(|(id, logit)| Logit { id, logit }).collect(),
            }
        })
        .collect();
    if args.switch("--json") {
        println!("{}", serde_json::to_string(&positions).map_err(|e| e.to_string())?);
    } else {
        for p in &positions {
            let best: Vec<String> =
                p.top.iter().map(|l| format!("{} {:?} {:.4}", l.id, engine.piece(l.id), l.logit)).collect();
            println!("{:>4} after {:>7}: {}", p.position, p.token, best.join(" | "));
        }
    }
    Ok(())
}
