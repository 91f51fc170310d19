//! Helpers shared by the integration tests.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The model the tests run: `SA_MODEL`, else the repository's shipped model.
pub fn model_path() -> PathBuf {
    match std::env::var_os("SA_MODEL") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../models/sa-default-q8_0.gguf"),
    }
}

pub fn model() -> sa::Model {
    sa::Model::load(model_path()).expect("load the test model")
}

/// Deterministic settings: the CPU (bitwise reproducible), greedy sampling.
pub fn cpu() -> sa::SessionParams {
    sa::SessionParams::new()
        .backend(sa::Backend::Cpu)
        .n_threads(2)
}

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "sa-rust-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("create a scratch directory");
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Words for filler text (deterministic choice by an LCG).
const WORDS: &[&str] = &[
    "apple", "river", "stone", "garden", "window", "silver", "market", "candle", "forest", "paper",
    "bridge", "winter", "copper", "harbor", "meadow", "lantern", "pocket", "thunder", "valley",
    "orange", "saddle", "kettle", "island", "mirror", "basket", "feather", "ladder", "anchor",
    "blanket", "cotton",
];

pub fn filler(n_words: usize, seed: u64) -> String {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut s = String::new();
    for _ in 0..n_words {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push(' ');
        s.push_str(WORDS[(state >> 33) as usize % WORDS.len()]);
    }
    s
}

/// A passkey-retrieval prompt in the format the shipped model was trained on.
pub fn passkey_prompt(key: &str, words_before: usize, words_after: usize) -> String {
    format!(
        "There is an important pass key hidden inside a lot of irrelevant text. Find it and \
         memorize it. I will quiz you about the pass key later.{} The pass key is {key}. \
         Remember it. {key} is the pass key.{}\nWhat is the pass key? The pass key is",
        filler(words_before, 1),
        filler(words_after, 2)
    )
}

/// FNV-1a over the bit patterns of some floats.
pub fn hash_f32(values: &[f32]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for v in values {
        for b in v.to_bits().to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}
