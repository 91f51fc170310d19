//! Progress callbacks: cancellation, a panicking callback, and the statistics after a prefill
//! and a decode step.
mod common;

use std::ops::ControlFlow;

use sa::{Memory, Sparse, Status, TokenizeFlags};

fn prompt(model: &sa::Model, words: usize) -> Vec<sa::Token> {
    model
        .tokenize(&common::filler(words, 7), TokenizeFlags::ADD_SPECIAL)
        .unwrap()
}

#[test]
fn progress_reports_every_chunk_and_cancels() {
    let model = common::model();
    let tokens = prompt(&model, 120);
    let n = tokens.len();
    assert!(n > 100);
    let mut s = model.session(&common::cpu().n_batch(32)).unwrap();

    // Cancel after the second chunk.
    let mut calls = Vec::new();
    let err = s
        .prefill(&tokens, |done, total| {
            calls.push((done, total));
            if done >= 64 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap_err();
    assert_eq!(err.status(), Status::Cancelled);
    assert!(!err.is_panic());
    assert_eq!(calls, vec![(32, n), (64, n)]);
    assert_eq!(s.n_tokens(), 0, "a cancelled prefill appends nothing");
    assert!(s.logits().is_none());

    // Uncancelled: every chunk is reported, ending at the total.
    let mut calls = Vec::new();
    s.prefill(&tokens, |done, total| {
        calls.push((done, total));
        ControlFlow::Continue(())
    })
    .unwrap();
    let expected: Vec<(usize, usize)> = (1..=(n + 31) / 32).map(|i| ((i * 32).min(n), n)).collect();
    assert_eq!(calls, expected);
    assert_eq!(s.tokens(), tokens);

    // Cancelling a later prefill leaves the session exactly as it was.
    let before = s.logits().unwrap().to_vec();
    let more = model
        .tokenize(&common::filler(50, 8), TokenizeFlags::NONE)
        .unwrap();
    let err = s.prefill(&more, |_, _| ControlFlow::Break(())).unwrap_err();
    assert_eq!(err.status(), Status::Cancelled);
    assert_eq!(s.tokens(), tokens);
    assert!(s
        .logits()
        .unwrap()
        .iter()
        .zip(&before)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn a_panicking_callback_cancels_and_comes_back_as_an_error() {
    let model = common::model();
    let tokens = prompt(&model, 60);
    let mut s = model.session(&common::cpu().n_batch(16)).unwrap();
    let mut calls = 0;
    let err = s
        .prefill(&tokens, |done, _| {
            calls += 1;
            if done >= 32 {
                panic!("boom at {done}");
            }
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(err.status(), Status::Cancelled);
    assert!(err.message().contains("boom at 32"), "{err}");
    assert_eq!(
        calls, 2,
        "the callback is not called again after it panicked"
    );
    assert_eq!(s.n_tokens(), 0);
    // The session is still usable.
    s.prefill_all(&tokens).unwrap();
    assert_eq!(s.tokens(), tokens);
    // A non-string payload too.
    let err = s
        .prefill(&tokens, |_, _| std::panic::panic_any(42u32))
        .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(s.tokens(), tokens);
}

#[test]
fn stats_and_head_stats() {
    let model = common::model();
    let info = model.info().clone();
    let tokens = prompt(&model, 40);
    let n = tokens.len();

    let mut dense = model.session(&common::cpu().memory(Memory::Dense)).unwrap();
    dense.prefill_all(&tokens).unwrap();
    let st = dense.stats().unwrap();
    assert_eq!(
        (st.n_tokens, st.n_kv_tokens, st.last_call_tokens),
        (n as u64, n as u64, n as u64)
    );
    assert_eq!(st.backend, Some(sa::Backend::Cpu));
    assert_eq!(st.kv_type, Some(sa::KvType::F32));
    assert!(st.kv_bytes_held > 0 && st.kv_bytes_held <= st.kv_bytes_capacity);
    assert!(
        dense.head_stats().unwrap().is_empty(),
        "none after a prefill"
    );
    let next = dense.sample().unwrap();
    dense.decode_step(next.token).unwrap();
    let heads = dense.head_stats().unwrap();
    assert_eq!(heads.len(), info.n_layers * info.n_heads);
    for (i, h) in heads.iter().enumerate() {
        assert_eq!(
            (h.layer, h.head),
            (i / info.n_heads, i % info.n_heads),
            "layer-major"
        );
        assert_eq!(h.keys_total, n + 1);
        assert_eq!(h.keys_attended, h.keys_total);
        assert_eq!(h.sample_budget, None);
        assert_eq!(h.rel_error, None);
    }

    // Quest over 4 pages of 16 with 2 dense layers: the other layers read fewer keys.
    let long = prompt(&model, 300);
    let params = common::cpu()
        .sparse(Sparse::Quest)
        .page_size(16)
        .budget_tokens(64)
        .dense_layers(2)
        .check_error(true);
    let mut quest = model.session(&params).unwrap();
    quest.prefill_all(&long).unwrap();
    let t = quest.sample().unwrap();
    quest.decode_step(t.token).unwrap();
    let st = quest.stats().unwrap();
    let heads = quest.head_stats().unwrap();
    let sparse: Vec<_> = heads.iter().filter(|h| h.layer >= 2).collect();
    assert!(sparse
        .iter()
        .all(|h| h.keys_attended < h.keys_total && h.keys_total == long.len() + 1));
    assert!(sparse
        .iter()
        .all(|h| h.rel_error.map_or(false, |e| (0.0..1.0).contains(&e))));
    assert!(heads
        .iter()
        .filter(|h| h.layer < 2)
        .all(|h| h.keys_attended == h.keys_total));
    let attended: usize = sparse.iter().map(|h| h.keys_attended).sum();
    let total: usize = sparse.iter().map(|h| h.keys_total).sum();
    assert_eq!(
        (st.sparse_keys_attended, st.sparse_keys_total),
        (attended as u64, total as u64)
    );
}
