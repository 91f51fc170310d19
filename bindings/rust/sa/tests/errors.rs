//! Load failures and misuse come back as `Error` values with the library's status and message.
mod common;

use sa::{Model, SessionParams, Sparse, Status, TokenizeFlags};

#[test]
fn missing_file_is_io() {
    let dir = common::TempDir::new("missing");
    let err = Model::load(dir.path("does-not-exist.gguf")).unwrap_err();
    assert_eq!(err.status(), Status::Io);
    assert!(!err.message().is_empty());
    assert!(err.to_string().contains(err.message()));
    // It is a std error, usable with `?` into Box<dyn Error>.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
    assert!(!boxed.to_string().is_empty());
}

#[test]
fn garbage_is_format() {
    let dir = common::TempDir::new("garbage");
    let path = dir.path("garbage.gguf");
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(Model::load(&path).unwrap_err().status(), Status::Format);
    assert_eq!(
        Model::from_bytes(&bytes).unwrap_err().status(),
        Status::Format
    );
    assert_eq!(Model::from_bytes(&[]).unwrap_err().status(), Status::Format);
    // A truncated real model.
    let real = std::fs::read(common::model_path()).unwrap();
    assert_eq!(
        Model::from_bytes(&real[..real.len() / 2])
            .unwrap_err()
            .status(),
        Status::Format
    );
    // A path with a NUL byte never reaches C.
    assert_eq!(
        Model::load("bad\0path").unwrap_err().status(),
        Status::InvalidArg
    );
}

#[test]
fn from_bytes_and_no_mmap_equal_load() {
    let a = common::model();
    let b = Model::from_bytes(&std::fs::read(common::model_path()).unwrap()).unwrap();
    let c = Model::load_with(common::model_path(), sa::ModelParams { use_mmap: false }).unwrap();
    assert_eq!(a.info(), b.info());
    assert_eq!(a.info(), c.info());
    let i = a.info();
    assert_eq!(
        (
            i.architecture.as_str(),
            i.n_layers,
            i.n_heads,
            i.n_kv_heads,
            i.n_vocab
        ),
        ("llama", 6, 6, 2, 4096)
    );
    assert_eq!(a.meta("general.architecture").unwrap(), "llama");
    assert!(a
        .meta("tokenizer.chat_template")
        .unwrap()
        .contains("<|im_start|>"));
    assert_eq!(
        a.meta("no.such.key").unwrap_err().status(),
        Status::InvalidArg
    );
}

#[test]
fn out_of_range_tokens_are_invalid_arg_and_change_nothing() {
    let model = common::model();
    let n_vocab = model.n_vocab() as i32;
    let mut s = model.session(&common::cpu()).unwrap();
    let good = model
        .tokenize("Hello there", TokenizeFlags::ADD_SPECIAL)
        .unwrap();
    s.prefill_all(&good).unwrap();
    let before = s.logits().unwrap().to_vec();

    let mut bad = good.clone();
    bad.push(n_vocab);
    let err = s.prefill_all(&bad).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArg);
    assert!(
        err.message().contains(&good.len().to_string()),
        "the message gives the index: {err}"
    );
    assert_eq!(s.tokens(), good);
    assert_eq!(s.decode_step(-1).unwrap_err().status(), Status::InvalidArg);
    assert_eq!(s.append(n_vocab).unwrap_err().status(), Status::InvalidArg);
    assert_eq!(s.tokens(), good);
    assert_eq!(s.logits().unwrap(), &before[..]);

    assert_eq!(
        model.token_to_piece(n_vocab, false).unwrap_err().status(),
        Status::InvalidArg
    );
    assert_eq!(
        model.token_to_piece(-5, false).unwrap_err().status(),
        Status::InvalidArg
    );
    let mut d = model.detokenizer(false).unwrap();
    assert_eq!(d.push(n_vocab).unwrap_err().status(), Status::InvalidArg);
}

#[test]
fn wrong_state_and_bad_params() {
    let model = common::model();
    let mut s = model.session(&common::cpu()).unwrap();
    assert_eq!(
        s.sample().unwrap_err().status(),
        Status::Misuse,
        "no logits before a prefill"
    );
    assert!(s.logits().is_none());
    assert_eq!(
        s.save().unwrap_err().status(),
        Status::Misuse,
        "no store configured"
    );
    assert_eq!(
        sa::Session::resume(&model, &common::cpu())
            .unwrap_err()
            .status(),
        Status::InvalidArg
    );

    let err = model
        .session(&common::cpu().sparse(Sparse::Quest).page_size(0))
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArg);
    assert!(
        err.message().contains("page_size"),
        "the message names the param: {err}"
    );
    let err = model.session(&common::cpu().top_p(2.0)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArg);
    let err = model
        .session(&SessionParams::new().store("x.db", "bad\0id"))
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArg);

    let mut small = model.session(&common::cpu().n_ctx(8)).unwrap();
    let long = model
        .tokenize(&common::filler(20, 3), TokenizeFlags::NONE)
        .unwrap();
    assert!(long.len() > 8);
    assert_eq!(
        small.prefill_all(&long).unwrap_err().status(),
        Status::ContextFull
    );
    assert_eq!(small.n_tokens(), 0);
}

#[test]
fn status_codes_round_trip() {
    for code in 2..=13 {
        let s = Status::from_code(code).unwrap();
        assert_eq!(s.code(), code);
        assert!(!matches!(s, Status::Unknown(_)));
        assert!(!s.description().is_empty());
    }
    assert_eq!(Status::from_code(0), None);
    assert_eq!(Status::from_code(1), None);
    assert_eq!(Status::from_code(99), Some(Status::Unknown(99)));
    assert_eq!(Status::Unknown(99).description(), "unknown status");
}

#[test]
fn version_and_backends() {
    assert_eq!(sa::version_number(), sa::HEADER_VERSION_NUMBER);
    assert!(
        sa::version_string().starts_with(&format!("{}.", sa::HEADER_VERSION_NUMBER / 1_000_000))
    );
    let devices = sa::backends().unwrap();
    assert_eq!(devices[0].kind, Some(sa::Backend::Cpu));
    assert!(devices[0].memory_bytes > 0);
}
