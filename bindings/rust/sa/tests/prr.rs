//! PRR's r: `prr_ratio`, or a profile file (`prr_profile`) the library reads at create and
//! resume, and the r of the last decode step in `Stats::prr_ratio`.
mod common;

use std::path::Path;

use sa::{Session, SessionParams, Sparse, Speculation, Status, TokenizeFlags};

fn prompt(model: &sa::Model, words: usize) -> Vec<sa::Token> {
    model
        .tokenize(&common::filler(words, 5), TokenizeFlags::ADD_SPECIAL)
        .unwrap()
}

/// PRR over Quest on the CPU, 4 pages of 16 per head and step.
fn prr() -> SessionParams {
    common::cpu()
        .sparse(Sparse::Quest)
        .page_size(16)
        .budget_tokens(64)
        .speculation(Speculation::Prr)
        .prr_ratio(0.75)
}

/// A profile in the library's format (see `sa-bench gpu prr-profile`) for the settings of
/// [`prr`] on the CPU, whose times let every r of its grid fit: r is the grid's largest, 2.
fn profile_for(model: &sa::Model, fingerprint: u64, device: &str) -> String {
    let i = model.info();
    format!(
        "sa-prr-profile 1\n\
         profile\n\
         model {fingerprint:016x} heads {} kv_heads {} head_dim {}\n\
         device cpu {device}\n\
         select head page 16 budget_tokens 64 budget_ratio 0 sink 1 local 1 min 3 kv f32\n\
         ratios 0.5 1 2\n\
         keys 256 select 100 speculate 1 2 3\n\
         keys 4096 select 100 speculate 1 2 3\n\
         end\n",
        i.n_heads, i.n_kv_heads, i.head_dim
    )
}

fn one_step(s: &mut Session) {
    let t = s.sample().unwrap();
    s.decode_step(t.token).unwrap();
}

#[test]
fn the_step_uses_prr_ratio_without_a_profile() {
    assert_eq!(
        SessionParams::new().prr_profile_path(),
        None,
        "no profile by default"
    );
    assert_eq!(
        prr().prr_profile("x.prr").prr_profile_path(),
        Some(Path::new("x.prr"))
    );

    let model = common::model();
    let mut s = model.session(&prr()).unwrap();
    s.prefill_all(&prompt(&model, 300)).unwrap();
    assert_eq!(s.stats().unwrap().prr_ratio, 0.0, "0 before a decode step");
    one_step(&mut s);
    assert_eq!(s.stats().unwrap().prr_ratio, 0.75);
}

#[test]
fn profile_errors() {
    let dir = common::TempDir::new("prr-errors");
    let model = common::model();
    let missing = dir.path("missing.prr");

    let err = model.session(&prr().prr_profile(&missing)).unwrap_err();
    assert_eq!(err.status(), Status::Io);
    assert!(
        err.message().contains("missing.prr"),
        "the message names the file: {err}"
    );

    // Without PRR a profile is refused before the file is looked at.
    let err = model
        .session(&common::cpu().sparse(Sparse::Quest).prr_profile(&missing))
        .unwrap_err();
    assert_eq!(err.status(), Status::InvalidArg);
    assert!(err.message().contains("prr_profile"), "{err}");
    assert_eq!(
        model.session(&prr().prr_profile("")).unwrap_err().status(),
        Status::InvalidArg,
        "an empty path"
    );
    // A path with a NUL byte never reaches C.
    assert_eq!(
        model
            .session(&prr().prr_profile("bad\0path.prr"))
            .unwrap_err()
            .status(),
        Status::InvalidArg
    );

    let garbage = dir.path("garbage.prr");
    std::fs::write(&garbage, "not a profile\n").unwrap();
    let err = model.session(&prr().prr_profile(&garbage)).unwrap_err();
    assert_eq!(err.status(), Status::Format);

    // Well formed, but for another model.
    let other = dir.path("other.prr");
    std::fs::write(&other, profile_for(&model, 1, "some device")).unwrap();
    let err = model.session(&prr().prr_profile(&other)).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArg);
    assert!(
        err.message().contains("0000000000000001"),
        "the message lists what the file holds: {err}"
    );
}

#[test]
fn the_step_uses_the_profiles_r_also_after_resume() {
    let dir = common::TempDir::new("prr-profile");
    let store = dir.path("sessions.db");
    let model = common::model();
    let tokens = prompt(&model, 300);

    // The profile's key: the model's fingerprint (as the store lists it) and the CPU's name.
    let mut plain = model.session(&prr().store(&store, "plain")).unwrap();
    plain.prefill_all(&tokens).unwrap();
    plain.save().unwrap();
    let fingerprint = sa::store::list(&store).unwrap()[0].model_fingerprint;
    let cpu = sa::backends().unwrap().remove(0);
    assert_eq!(cpu.kind, Some(sa::Backend::Cpu));
    let file = dir.path("cpu.prr");
    std::fs::write(&file, profile_for(&model, fingerprint, &cpu.name)).unwrap();

    let mut s = model.session(&prr().prr_profile(&file)).unwrap();
    s.prefill_all(&tokens).unwrap();
    one_step(&mut s);
    assert_eq!(
        s.stats().unwrap().prr_ratio,
        2.0,
        "the profile's r, not prr_ratio"
    );

    // Resume takes the profile from the params: none, this one, or a missing file.
    let at = |p: SessionParams| p.store(&store, "plain");
    let mut r = Session::resume(&model, &at(common::cpu())).unwrap();
    one_step(&mut r);
    assert_eq!(r.stats().unwrap().prr_ratio, 0.75);
    let mut r = Session::resume(&model, &at(common::cpu().prr_profile(&file))).unwrap();
    one_step(&mut r);
    assert_eq!(r.stats().unwrap().prr_ratio, 2.0);
    let err =
        Session::resume(&model, &at(common::cpu().prr_profile(dir.path("gone.prr")))).unwrap_err();
    assert_eq!(err.status(), Status::Io);
}
