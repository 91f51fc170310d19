//! Tokenization and greedy generation through the safe API, compared with the same calls made
//! on the raw C API (`sa::sys`), plus the shipped model's passkey retrieval.
mod common;

use std::ffi::CString;
use std::ptr;

use sa::{sys, Backend, SessionParams, Token, TokenizeFlags};

/// What the C API gives for a prompt: its tokens, the logits after the prefill, the greedy
/// continuation (at most `n` tokens, stopping at end-of-generation) and its text through
/// sa_detokenizer, as apps/sa-run does.
struct Reference {
    prompt: Vec<i32>,
    logits: Vec<f32>,
    generated: Vec<i32>,
    text: String,
}

fn c_ok(st: i32) {
    assert!(
        st == sys::SA_OK || st == sys::SA_DONE,
        "C call failed with status {st}"
    );
}

fn c_reference(prompt: &str, n: usize) -> Reference {
    let path = CString::new(common::model_path().to_str().unwrap()).unwrap();
    // SAFETY: plain use of the C API as sa.h documents it.
    unsafe {
        let mut model = ptr::null_mut();
        c_ok(sys::sa_model_load(path.as_ptr(), ptr::null(), &mut model));
        let flags = sys::SA_TOKENIZE_ADD_SPECIAL as u32;
        let mut count = 0usize;
        let st = sys::sa_tokenize(
            model,
            prompt.as_ptr().cast(),
            prompt.len(),
            flags,
            ptr::null_mut(),
            0,
            &mut count,
        );
        assert!(st == sys::SA_ERR_BUFFER_TOO_SMALL || st == sys::SA_OK);
        let mut tokens = vec![0i32; count];
        c_ok(sys::sa_tokenize(
            model,
            prompt.as_ptr().cast(),
            prompt.len(),
            flags,
            tokens.as_mut_ptr(),
            count,
            &mut count,
        ));

        let mut params: sys::sa_session_params = std::mem::zeroed();
        sys::sa_session_params_init(&mut params);
        params.backend = sys::SA_BACKEND_CPU;
        params.n_threads = 2;
        let mut session = ptr::null_mut();
        c_ok(sys::sa_session_create(model, &params, &mut session));
        c_ok(sys::sa_prefill(
            session,
            tokens.as_ptr(),
            tokens.len(),
            None,
            ptr::null_mut(),
        ));
        let mut n_vocab = 0;
        let l = sys::sa_session_logits(session, &mut n_vocab);
        assert!(!l.is_null());
        let logits = std::slice::from_raw_parts(l, n_vocab as usize).to_vec();

        let mut detok = ptr::null_mut();
        c_ok(sys::sa_detokenizer_create(model, 0, &mut detok));
        let mut buf = vec![0u8; 4096];
        let mut text = Vec::new();
        let mut generated = Vec::new();
        let mut t = -1;
        let mut st = sys::sa_sample(session, &mut t);
        while st == sys::SA_OK && generated.len() < n {
            let mut len = 0usize;
            c_ok(sys::sa_detokenizer_push(
                detok,
                t,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut len,
            ));
            text.extend_from_slice(&buf[..len]);
            generated.push(t);
            if generated.len() == n {
                break;
            }
            st = sys::sa_decode_step(session, t, &mut t);
        }
        assert!(st == sys::SA_OK || st == sys::SA_DONE);
        let mut len = 0usize;
        c_ok(sys::sa_detokenizer_flush(
            detok,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut len,
        ));
        text.extend_from_slice(&buf[..len]);
        sys::sa_detokenizer_destroy(detok);
        sys::sa_session_destroy(session);
        sys::sa_model_destroy(model);
        Reference {
            prompt: tokens,
            logits,
            generated,
            text: String::from_utf8(text).unwrap(),
        }
    }
}

fn check_against_reference(prompt: &str, n: usize) {
    let reference = c_reference(prompt, n);
    let model = common::model();
    let tokens = model.tokenize(prompt, TokenizeFlags::ADD_SPECIAL).unwrap();
    assert_eq!(
        tokens, reference.prompt,
        "tokenize differs from sa_tokenize"
    );

    let mut session = model.session(&common::cpu()).unwrap();
    session.prefill_all(&tokens).unwrap();
    let logits = session.logits().expect("logits after a prefill").to_vec();
    assert_eq!(logits.len(), model.n_vocab());
    assert!(
        logits
            .iter()
            .zip(&reference.logits)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "logits differ"
    );

    let mut text = String::new();
    let mut gen = session.generate(n).unwrap();
    for piece in &mut gen {
        text.push_str(&piece.unwrap());
    }
    let generated = gen.tokens().to_vec();
    drop(gen);
    assert!(!reference.generated.is_empty());
    assert_eq!(
        generated, reference.generated,
        "generated tokens differ from the C loop's"
    );
    assert_eq!(
        text, reference.text,
        "generated text differs from the C detokenizer's"
    );
    // Every token shown joined the history.
    let mut history = reference.prompt.clone();
    history.extend_from_slice(&reference.generated);
    assert_eq!(session.tokens(), history);
}

#[test]
fn greedy_generation_equals_the_c_api() {
    check_against_reference("Once upon a time", 24);
}

#[test]
fn passkey_is_retrieved_and_equals_the_c_api() {
    let prompt = common::passkey_prompt("48213", 60, 40);
    check_against_reference(&prompt, 6);
    let model = common::model();
    let mut session = model.session(&common::cpu()).unwrap();
    session
        .prefill_all(&model.tokenize(&prompt, TokenizeFlags::ADD_SPECIAL).unwrap())
        .unwrap();
    let answer: String = session.generate(6).unwrap().map(Result::unwrap).collect();
    assert_eq!(answer, " 48213");
}

#[test]
fn tokenize_matches_the_c_api_and_round_trips() {
    let model = common::model();
    let text = "héllo wörld — ✓ 12345\n<|im_start|>";
    let plain = model.tokenize(text, TokenizeFlags::NONE).unwrap();
    let special = model
        .tokenize(
            text,
            TokenizeFlags::PARSE_SPECIAL | TokenizeFlags::ADD_SPECIAL,
        )
        .unwrap();
    assert_eq!(special[0], model.info().bos_token.unwrap());
    assert_eq!(
        *special.last().unwrap(),
        2,
        "<|im_start|> is control token 2"
    );
    assert!(
        plain.len() > special.len() - 1,
        "without PARSE_SPECIAL the marker is text"
    );
    assert_eq!(model.detokenize(&plain).unwrap(), text);

    // The same call on the C API.
    let c_tokens = unsafe {
        let mut out = vec![0i32; 256];
        let mut n = 0usize;
        let path = CString::new(common::model_path().to_str().unwrap()).unwrap();
        let mut m = ptr::null_mut();
        c_ok(sys::sa_model_load(path.as_ptr(), ptr::null(), &mut m));
        c_ok(sys::sa_tokenize(
            m,
            text.as_ptr().cast(),
            text.len(),
            0,
            out.as_mut_ptr(),
            out.len(),
            &mut n,
        ));
        sys::sa_model_destroy(m);
        out.truncate(n);
        out
    };
    assert_eq!(plain, c_tokens);

    // Streaming: one token at a time never splits a character, and the pieces add up.
    let mut d = model.detokenizer(false).unwrap();
    let mut streamed = String::new();
    for &t in &plain {
        streamed.push_str(&d.push(t).unwrap());
    }
    streamed.push_str(&d.flush().unwrap());
    assert_eq!(streamed, text);
    // Piece bytes add up to the text too.
    let bytes: Vec<u8> = plain
        .iter()
        .flat_map(|&t| model.token_to_piece(t, false).unwrap())
        .collect();
    assert_eq!(bytes, text.as_bytes());
    // A control token renders only on request.
    assert_eq!(model.token_to_piece(2, false).unwrap(), b"");
    assert_eq!(model.token_to_piece(2, true).unwrap(), b"<|im_start|>");
    assert!(model.is_eog(3) && !model.is_eog(37) && !model.is_eog(-1));
}

#[test]
fn generate_edges_and_commit() {
    let model = common::model();
    let prompt: Vec<Token> = model.tokenize("The", TokenizeFlags::ADD_SPECIAL).unwrap();

    let mut s = model.session(&common::cpu()).unwrap();
    // Sampling needs logits: the iterator reports the library's misuse error once.
    let mut gen = s.generate(4).unwrap();
    let err = gen.next().unwrap().unwrap_err();
    assert_eq!(err.status(), sa::Status::Misuse);
    assert!(gen.next().is_none());
    drop(gen);

    s.prefill_all(&prompt).unwrap();
    assert_eq!(s.generate(0).unwrap().count(), 0);
    assert_eq!(s.n_tokens(), prompt.len());

    // Dropped early, the last token shown is not in the history until commit().
    let mut gen = s.generate(10).unwrap();
    let first = gen.next().unwrap().unwrap();
    assert!(!first.is_empty());
    let shown = gen.tokens().to_vec();
    gen.commit().unwrap();
    let mut expected = prompt.clone();
    expected.extend_from_slice(&shown);
    assert_eq!(s.tokens(), expected);

    // The same continuation through the explicit calls: sample, decode_step, append.
    let mut t = model.session(&common::cpu()).unwrap();
    t.prefill_all(&prompt).unwrap();
    let a = t.sample().unwrap();
    assert_eq!(vec![a.token], shown[..1].to_vec());
    let b = t.decode_step(a.token).unwrap();
    t.append(b.token).unwrap();
    assert_eq!(t.n_tokens(), prompt.len() + 2);
    t.reset().unwrap();
    assert_eq!(t.n_tokens(), 0);
}

#[test]
fn sessions_and_models_drop_in_any_order() {
    let model = common::model();
    let detok = model.detokenizer(false).unwrap();
    let mut session = model
        .session(&SessionParams::new().backend(Backend::Cpu))
        .unwrap();
    let prompt = model.tokenize("The", TokenizeFlags::ADD_SPECIAL).unwrap();
    drop(model); // the session holds its own clone
    session.prefill_all(&prompt).unwrap();
    assert!(session.generate(3).unwrap().all(|p| p.is_ok()));
    let model_again = session.model().clone();
    drop(session);
    drop(detok);
    assert_eq!(model_again.info().architecture, "llama");
}
