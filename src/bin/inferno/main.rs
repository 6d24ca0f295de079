//! `inferno`: the native command line over the same library the page uses.

mod args;
mod inspect;
mod tokenize;

use std::process::ExitCode;

const USAGE: &str = "\
usage: inferno <command> MODEL.gguf [options]

commands:
  inspect MODEL [--json]            describe a GGUF file: header, metadata, tensors, tokenizer,
                                    chat template (reads only the header)
  tokenize MODEL --text TEXT [--json] [--no-special] [--no-parse-special]
                                    token ids and pieces, as llama.cpp would produce them
  help                              show this text";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("inferno: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let (command, rest) = args.split_first().ok_or_else(|| USAGE.to_owned())?;
    match command.as_str() {
        "inspect" => inspect::run(rest),
        "tokenize" => tokenize::run(rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    }
}
