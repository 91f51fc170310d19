//! A terminal chat with streaming output, in the model's ChatML template.
//!
//!   cargo run --example chat -- [--model PATH] [--store FILE --session ID] [--max 128]
//!
//! Each line typed is a user turn; the reply streams as it is generated. With --store, the
//! conversation is saved after every turn and resumed when started again. Commands: /reset,
//! /quit (end of input also quits).
use std::error::Error;
use std::io::{self, BufRead, Write};

use sa::{Model, Session, SessionParams, Status, TokenizeFlags};

fn main() -> Result<(), Box<dyn Error>> {
    let mut model_path = std::env::var("SA_MODEL").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../models/sa-default-q8_0.gguf"
        )
        .to_string()
    });
    let mut store: Option<String> = None;
    let mut id = "default".to_string();
    let mut max_reply = 128usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("chat: {flag} needs a value"))?;
        match flag.as_str() {
            "--model" => model_path = value,
            "--store" => store = Some(value),
            "--session" => id = value,
            "--max" => max_reply = value.parse()?,
            _ => return Err(format!("chat: unknown argument {flag}").into()),
        }
    }

    let model = Model::load(&model_path)?;
    let mut params = SessionParams::new();
    if let Some(path) = &store {
        params = params.store(path, id.as_str());
    }
    // A stored conversation is resumed; otherwise (or without a store) a new one starts.
    let mut session = match store {
        Some(_) => match Session::resume(&model, &params) {
            Ok(s) => {
                eprintln!("[resumed '{id}': {} tokens]", s.n_tokens());
                s
            }
            Err(e) if e.status() == Status::InvalidArg => model.session(&params)?,
            Err(e) => return Err(e.into()),
        },
        None => model.session(&params)?,
    };

    let parse = TokenizeFlags::PARSE_SPECIAL;
    let stdin = io::stdin();
    let mut out = io::stdout();
    print!("> ");
    out.flush()?;
    for line in stdin.lock().lines() {
        let line = line?;
        let user = line.trim();
        match user {
            "" => {}
            "/quit" => break,
            "/reset" => {
                session.reset()?;
                println!("[conversation cleared]");
            }
            _ => {
                let flags = if session.n_tokens() == 0 {
                    parse | TokenizeFlags::ADD_SPECIAL
                } else {
                    parse
                };
                let turn = format!("<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n");
                session.prefill_all(&model.tokenize(&turn, flags)?)?;
                print!("assistant: ");
                // The iterator appends every token it shows; the end marker it stops at is
                // not appended, so the turn is closed below as the template does.
                for piece in session.generate(max_reply)? {
                    print!("{}", piece?);
                    out.flush()?;
                }
                println!();
                session.prefill_all(&model.tokenize("<|im_end|>\n", parse)?)?;
                if store.is_some() {
                    session.save()?;
                }
            }
        }
        print!("> ");
        out.flush()?;
    }
    println!();
    Ok(())
}
