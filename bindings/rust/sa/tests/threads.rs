//! One `Model` shared by sessions on several threads; sessions moved between threads.
mod common;

use std::sync::Arc;
use std::thread;

use sa::{Model, Session, Token, TokenizeFlags};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

fn greedy(model: &Model, prompt: &str, n: usize) -> Vec<Token> {
    let mut s = model.session(&common::cpu().n_threads(1)).unwrap();
    s.prefill_all(&model.tokenize(prompt, TokenizeFlags::ADD_SPECIAL).unwrap())
        .unwrap();
    let mut gen = s.generate(n).unwrap();
    for piece in &mut gen {
        piece.unwrap();
    }
    gen.tokens().to_vec()
}

#[test]
fn types_are_send_and_sync_as_documented() {
    assert_send_sync::<Model>();
    assert_send_sync::<sa::SessionParams>();
    assert_send_sync::<sa::Error>();
    assert_send::<Session>();
    assert_send::<sa::Detokenizer>();
}

#[test]
fn one_model_many_threads() {
    let model = common::model();
    let prompts = [
        "Once upon a time",
        "The river",
        "In the beginning",
        "A list of words:",
    ];
    let expected: Vec<Vec<Token>> = prompts.iter().map(|p| greedy(&model, p, 12)).collect();

    // Two sessions per prompt at once, each on its own thread, all sharing `model` by clone;
    // the main thread's handle is dropped while they run.
    let shared = model.clone();
    drop(model);
    let results: Vec<(usize, Vec<Token>)> = thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let m = shared.clone();
                let prompt = prompts[i % prompts.len()];
                scope.spawn(move || (i % prompts.len(), greedy(&m, prompt, 12)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, tokens) in results {
        assert_eq!(tokens, expected[i], "thread result for prompt {i} differs");
    }

    // Tokenizing from many threads through one Arc'd model.
    let shared = Arc::new(shared);
    let reference = shared
        .tokenize(prompts[0], TokenizeFlags::ADD_SPECIAL)
        .unwrap();
    let all: Vec<Vec<Token>> = (0..4)
        .map(|_| {
            let m = Arc::clone(&shared);
            thread::spawn(move || m.tokenize(prompts[0], TokenizeFlags::ADD_SPECIAL).unwrap())
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert!(all.iter().all(|t| *t == reference));
}

#[test]
fn a_session_moves_between_threads() {
    let model = common::model();
    let expected = greedy(&model, "The river", 8);
    let mut s = model.session(&common::cpu().n_threads(1)).unwrap();
    s.prefill_all(
        &model
            .tokenize("The river", TokenizeFlags::ADD_SPECIAL)
            .unwrap(),
    )
    .unwrap();
    drop(model);
    // Prefilled here, generated on another thread, dropped on a third.
    let (s, tokens) = thread::spawn(move || {
        let mut gen = s.generate(8).unwrap();
        for piece in &mut gen {
            piece.unwrap();
        }
        let tokens = gen.tokens().to_vec();
        drop(gen);
        (s, tokens)
    })
    .join()
    .unwrap();
    assert_eq!(tokens, expected);
    thread::spawn(move || drop(s)).join().unwrap();
}
