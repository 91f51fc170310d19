//! The session store: save in this process, resume in a child process (this test binary run
//! again with SA_RUST_TEST_STORE set), list and delete.
mod common;

use std::process::Command;

use sa::{Memory, Session, Status, TokenizeFlags};

const STEPS: usize = 12;
const CHILD_ENV: &str = "SA_RUST_TEST_STORE";

fn params(store: &std::path::Path, id: &str) -> sa::SessionParams {
    common::cpu().store(store, id)
}

/// Runs only as the child: resumes the session, prints its logits' hash and its greedy
/// continuation. In a normal test run it does nothing.
#[test]
fn child_resume_and_generate() {
    let store = match std::env::var_os(CHILD_ENV) {
        Some(s) => std::path::PathBuf::from(s),
        None => return,
    };
    let model = common::model();
    let mut s = Session::resume(&model, &params(&store, "cross")).unwrap();
    let hash = common::hash_f32(s.logits().expect("resumed logits"));
    let mut gen = s.generate(STEPS).unwrap();
    for piece in &mut gen {
        piece.unwrap();
    }
    let tokens: Vec<String> = gen.tokens().iter().map(|t| t.to_string()).collect();
    drop(gen);
    println!("HISTORY: {}", s.n_tokens() - STEPS);
    println!("LOGITS: {hash:016x}");
    println!("TOKENS: {}", tokens.join(" "));
}

fn field<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.find(key).map(|i| &l[i + key.len()..]))
        .unwrap_or_else(|| panic!("no {key} in the child's output:\n{stdout}"))
        .trim()
}

#[test]
fn save_in_one_process_resume_in_another() {
    let dir = common::TempDir::new("store");
    let store = dir.path("sessions.db");
    let model = common::model();
    let prompt = model
        .tokenize(
            &common::passkey_prompt("90417", 30, 20),
            TokenizeFlags::ADD_SPECIAL,
        )
        .unwrap();

    let mut s = model.session(&params(&store, "cross")).unwrap();
    s.prefill_all(&prompt).unwrap();
    s.save().unwrap();
    let hash = common::hash_f32(s.logits().unwrap());
    let mut gen = s.generate(STEPS).unwrap();
    for piece in &mut gen {
        piece.unwrap();
    }
    let expected: Vec<String> = gen.tokens().iter().map(|t| t.to_string()).collect();
    drop(gen);

    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_resume_and_generate",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &store)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(field(&stdout, "HISTORY:"), prompt.len().to_string());
    assert_eq!(
        field(&stdout, "LOGITS:"),
        format!("{hash:016x}"),
        "resumed logits are bitwise the saved ones"
    );
    assert_eq!(
        field(&stdout, "TOKENS:"),
        expected.join(" "),
        "the resumed session continues identically"
    );
}

#[test]
fn list_delete_and_conflicts() {
    let dir = common::TempDir::new("list");
    let store = dir.path("sessions.db");
    assert!(
        sa::store::list(&store).unwrap().is_empty(),
        "no file: no sessions"
    );
    let model = common::model();
    let prompt = model.tokenize("Hello", TokenizeFlags::ADD_SPECIAL).unwrap();

    let mut a = model.session(&params(&store, "alpha")).unwrap();
    a.prefill_all(&prompt).unwrap();
    a.save().unwrap();
    let mut b = model
        .session(
            &params(&store, "beta")
                .memory(Memory::Streaming)
                .cache_tokens(128)
                .n_sinks(8),
        )
        .unwrap();
    b.prefill_all(&prompt).unwrap();
    b.prefill_all(&prompt[1..]).unwrap();
    b.save().unwrap();

    let listed = sa::store::list(&store).unwrap();
    assert_eq!(listed.len(), 2);
    let alpha = listed.iter().find(|s| s.id == "alpha").unwrap();
    let beta = listed.iter().find(|s| s.id == "beta").unwrap();
    assert_eq!(
        (alpha.n_tokens, alpha.memory),
        (prompt.len() as u64, Some(Memory::Dense))
    );
    assert_eq!(
        (beta.n_tokens, beta.memory),
        ((2 * prompt.len() - 1) as u64, Some(Memory::Streaming))
    );
    assert_eq!(alpha.model_name, model.info().name);
    assert!(alpha.bytes > 0 && alpha.created > 0 && alpha.updated >= alpha.created);
    assert_eq!(alpha.model_fingerprint, beta.model_fingerprint);

    // A new session may not take over a stored id.
    let mut intruder = model.session(&params(&store, "alpha")).unwrap();
    intruder.prefill_all(&prompt).unwrap();
    let err = intruder.save().unwrap_err();
    assert_eq!(err.status(), Status::Store);
    assert!(!err.message().is_empty());

    // Resuming keeps the stored settings: the streaming session stays streaming.
    let resumed = Session::resume(&model, &params(&store, "beta")).unwrap();
    assert_eq!(resumed.tokens(), b.tokens());

    sa::store::delete(&store, "alpha").unwrap();
    assert_eq!(sa::store::list(&store).unwrap().len(), 1);
    assert_eq!(
        sa::store::delete(&store, "alpha").unwrap_err().status(),
        Status::InvalidArg
    );
    assert_eq!(
        Session::resume(&model, &params(&store, "alpha"))
            .unwrap_err()
            .status(),
        Status::InvalidArg
    );
    // The intruder may save now that the id is free; the live session keeps working.
    intruder.save().unwrap();
    a.prefill_all(&prompt).unwrap();

    // A file that is not a store.
    let junk = dir.path("junk.db");
    std::fs::write(
        &junk,
        b"this is not an SQLite database, just some bytes....",
    )
    .unwrap();
    assert_eq!(sa::store::list(&junk).unwrap_err().status(), Status::Store);
}

#[test]
fn autosave_after_prefill() {
    let dir = common::TempDir::new("autosave");
    let store = dir.path("auto.db");
    let model = common::model();
    let prompt = model
        .tokenize("Hello there", TokenizeFlags::ADD_SPECIAL)
        .unwrap();
    let mut s = model
        .session(&params(&store, "auto").autosave(sa::Autosave::Prefill))
        .unwrap();
    s.prefill_all(&prompt).unwrap();
    let listed = sa::store::list(&store).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].n_tokens, prompt.len() as u64);
}
