//! Safe Rust bindings of `sa`, an SDK that runs Llama-family GGUF models with sparse
//! long-context decoding. The C header `include/sa/sa.h` is the contract; this crate maps it
//! to Rust types:
//!
//! - [`Model`] (`sa_model`): shared, `Send + Sync`, cheap to clone.
//! - [`Session`] (`sa_session`): one conversation, `Send` but not `Sync`, made from
//!   [`SessionParams`]. It keeps its model alive, so drop order is free.
//! - [`Error`]: every failure, with its [`Status`] and the library's message.
//! - [`store`]: list and delete the sessions of an SQLite session store.
//!
//! ```no_run
//! # fn main() -> sa::Result<()> {
//! use sa::{Model, SessionParams, TokenizeFlags};
//!
//! let model = Model::load("models/sa-default-q8_0.gguf")?;
//! let mut session = model.session(&SessionParams::new())?;
//! let prompt = model.tokenize("Once upon a time", TokenizeFlags::ADD_SPECIAL)?;
//! session.prefill_all(&prompt)?;
//! for piece in session.generate(32)? {
//!     print!("{}", piece?);
//! }
//! # Ok(()) }
//! ```
//!
//! No panic crosses into C: a panic in a callback cancels the call and comes back as an
//! [`Error`] (see [`Session::prefill`]).
//!
//! A session is used by one thread at a time, so it is not `Sync`:
//!
//! ```compile_fail,E0277
//! fn shared_between_threads<T: Sync>() {}
//! shared_between_threads::<sa::Session>();
//! ```
#![warn(missing_docs)]

mod backend;
mod error;
mod model;
mod params;
mod session;
pub mod store;

pub use backend::{backends, BackendInfo};
pub use error::{Error, Result, Status};
pub use model::{Detokenizer, Model, ModelInfo, ModelParams, Token, TokenizeFlags};
pub use params::{
    Autosave, Backend, CascadeReduction, Correction, KvType, Memory, PrrMode, SelectGranularity,
    SessionParams, Sparse, Speculation, VattTopK,
};
pub use session::{Generate, HeadStat, Sampled, Session, Stats};

/// The raw C declarations, for what this crate does not wrap.
pub use sa_sys as sys;

/// The version of the header these bindings were generated from, as
/// major * 1000000 + minor * 1000 + patch.
pub const HEADER_VERSION_NUMBER: i32 = sa_sys::SA_VERSION_NUMBER;

/// The linked library's version as major * 1000000 + minor * 1000 + patch
/// (`sa_version_number`). Its major version should equal the header's.
pub fn version_number() -> i32 {
    // SAFETY: no arguments.
    unsafe { sa_sys::sa_version_number() }
}

/// The linked library's version as "MAJOR.MINOR.PATCH" (`sa_version_string`).
pub fn version_string() -> String {
    // SAFETY: static storage.
    unsafe { error::cstr_lossy(sa_sys::sa_version_string()) }
}
