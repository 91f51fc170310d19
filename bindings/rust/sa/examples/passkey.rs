//! Passkey retrieval: hide a five-digit number in a long filler text, ask for it, print the
//! answer the model gives.
//!
//!   cargo run --example passkey -- [--length 1500] [--depth 0.5] [--key 12345] [--seed 1]
//!                                  [--memory dense|streaming|cascade] [--quest BUDGET]
//!                                  [--model PATH]
//!
//! The prompt follows the format the shipped model was trained on (models/README.md).
use std::error::Error;
use std::io::Write;
use std::ops::ControlFlow;
use std::time::Instant;

use sa::{Memory, Model, SessionParams, Sparse, Token, TokenizeFlags};

const PREFIX: &str = "There is an important pass key hidden inside a lot of irrelevant text. \
                      Find it and memorize it. I will quiz you about the pass key later.";
const QUESTION: &str = "\nWhat is the pass key? The pass key is";
const WORDS: &[&str] = &[
    "apple", "river", "stone", "garden", "window", "silver", "market", "candle", "forest", "paper",
    "bridge", "winter", "copper", "harbor", "meadow", "lantern", "pocket", "thunder", "valley",
    "orange", "saddle", "kettle", "island", "mirror", "basket", "feather", "ladder", "anchor",
    "blanket", "cotton", "quiet", "yellow", "marble", "timber", "violet", "engine", "pepper",
    "rabbit", "silent", "tunnel", "velvet", "wander", "bottle", "castle", "desert", "falcon",
    "glacier", "hollow", "insect", "jungle", "kernel", "lemon", "monkey", "needle",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

struct Args {
    model: String,
    length: usize,
    depth: f64,
    key: Option<String>,
    seed: u64,
    memory: Memory,
    quest_budget: Option<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        model: std::env::var("SA_MODEL").unwrap_or_else(|_| {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../models/sa-default-q8_0.gguf"
            )
            .to_string()
        }),
        length: 1500,
        depth: 0.5,
        key: None,
        seed: 1,
        memory: Memory::Dense,
        quest_budget: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--model" => a.model = value()?,
            "--length" => a.length = value()?.parse().map_err(|e| format!("--length: {e}"))?,
            "--depth" => a.depth = value()?.parse().map_err(|e| format!("--depth: {e}"))?,
            "--key" => a.key = Some(value()?),
            "--seed" => a.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--quest" => {
                a.quest_budget = Some(value()?.parse().map_err(|e| format!("--quest: {e}"))?)
            }
            "--memory" => {
                a.memory = match value()?.as_str() {
                    "dense" => Memory::Dense,
                    "streaming" => Memory::Streaming,
                    "cascade" => Memory::Cascade,
                    other => return Err(format!("unknown memory {other}")),
                }
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(a)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args =
        parse_args().map_err(|e| format!("passkey: {e} (see the top of examples/passkey.rs)"))?;
    let mut rng = Rng(args.seed);
    let key = match &args.key {
        Some(k) => k.clone(),
        None => (0..5)
            .map(|_| char::from(b'0' + (rng.next() % 10) as u8))
            .collect(),
    };

    let model = Model::load(&args.model)?;
    let tok = |text: &str, flags| model.tokenize(text, flags);
    let prefix = tok(PREFIX, TokenizeFlags::ADD_SPECIAL)?;
    let needle = tok(
        &format!(" The pass key is {key}. Remember it. {key} is the pass key."),
        TokenizeFlags::NONE,
    )?;
    let question = tok(QUESTION, TokenizeFlags::NONE)?;

    // Filler words while they fit in the length (the 6 answer tokens included), the needle at
    // the chosen depth.
    let fixed = prefix.len() + needle.len() + question.len() + 6;
    let mut filler: Vec<Vec<Token>> = Vec::new();
    let mut used = fixed;
    loop {
        let word = tok(
            &format!(" {}", WORDS[rng.next() as usize % WORDS.len()]),
            TokenizeFlags::NONE,
        )?;
        if used + word.len() > args.length {
            break;
        }
        used += word.len();
        filler.push(word);
    }
    let cut = (args.depth.clamp(0.0, 1.0) * filler.len() as f64).round() as usize;
    let mut prompt = prefix;
    for (i, word) in filler.iter().enumerate() {
        if i == cut {
            prompt.extend_from_slice(&needle);
        }
        prompt.extend_from_slice(word);
    }
    if cut >= filler.len() {
        prompt.extend_from_slice(&needle);
    }
    prompt.extend_from_slice(&question);

    let mut params = SessionParams::new()
        .memory(args.memory)
        .n_ctx(prompt.len() + 16);
    if args.memory != Memory::Dense {
        params = params.cache_tokens(512).n_sinks(64);
    }
    if let Some(budget) = args.quest_budget {
        params = params.sparse(Sparse::Quest).budget_tokens(budget);
    }
    let mut session = model.session(&params)?;

    eprintln!(
        "prompt: {} tokens, key {key} at depth {:.2}",
        prompt.len(),
        args.depth
    );
    let start = Instant::now();
    session.prefill(&prompt, |done, total| {
        eprint!("\rprefill {done}/{total}");
        ControlFlow::Continue(())
    })?;
    eprintln!(" ({:.2} s)", start.elapsed().as_secs_f64());

    let mut answer = String::new();
    print!("answer:");
    for piece in session.generate(6)? {
        let piece = piece?;
        print!("{piece}");
        std::io::stdout().flush()?;
        answer.push_str(&piece);
    }
    println!();
    let stats = session.stats()?;
    let found = answer.trim() == key;
    println!(
        "{} (expected {key}; {} tokens held, backend {:?})",
        if found { "retrieved" } else { "missed" },
        stats.n_kv_tokens,
        stats.backend.unwrap_or(sa::Backend::Auto)
    );
    std::process::exit(if found { 0 } else { 1 });
}
