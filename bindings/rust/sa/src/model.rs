//! `Model`: a loaded GGUF model, its tokenizer and the streaming detokenizer.
use std::cell::Cell;
use std::ffi::CString;
use std::fmt;
use std::marker::PhantomData;
use std::ops::BitOr;
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use sa_sys as sys;

use crate::error::{c_array_lossy, check, Error, Result, Status};
use crate::session::{Session, SessionParams};

/// A token id, in `[0, n_vocab)`.
pub type Token = i32;

/// How a model file is read (`sa_model_params`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelParams {
    /// Map the file (the default) instead of reading it into memory.
    pub use_mmap: bool,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams { use_mmap: true }
    }
}

impl ModelParams {
    fn to_raw(self) -> sys::sa_model_params {
        let mut raw = sys::sa_model_params {
            struct_size: 0,
            use_mmap: 0,
        };
        // SAFETY: raw is a valid sa_model_params.
        unsafe { sys::sa_model_params_init(&mut raw) };
        raw.use_mmap = i32::from(self.use_mmap);
        raw
    }
}

/// What a model is (`sa_model_desc`).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// `general.architecture`: "llama", "qwen2" or "qwen3".
    pub architecture: String,
    /// `general.name`, or "".
    pub name: String,
    /// Decoder blocks.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (GQA when fewer than `n_heads`).
    pub n_kv_heads: usize,
    /// Dimension of one head.
    pub head_dim: usize,
    /// Residual stream width.
    pub n_embd: usize,
    /// Feed-forward hidden width.
    pub n_ff: usize,
    /// Context length the model was trained with.
    pub n_ctx_train: usize,
    /// Tokens in the vocabulary (the length of the logits).
    pub n_vocab: usize,
    /// Beginning-of-sequence token.
    pub bos_token: Option<Token>,
    /// End-of-sequence token.
    pub eos_token: Option<Token>,
    /// RoPE base frequency.
    pub rope_freq_base: f32,
    /// Parameters in all weight tensors.
    pub n_params: u64,
    /// Bytes of all weight tensors as stored.
    pub weight_bytes: u64,
    /// Whether [`Model::tokenize`] normalizes text to Unicode NFC unless told not to
    /// ([`TokenizeFlags::NO_NORMALIZE`]); see `sa_tokenize` in sa.h for which models do.
    pub tokenizer_nfc: bool,
}

fn count(v: i32) -> usize {
    usize::try_from(v).unwrap_or(0)
}

fn token_or_none(t: i32) -> Option<Token> {
    if t < 0 {
        None
    } else {
        Some(t)
    }
}

/// Flags of [`Model::tokenize`] (`SA_TOKENIZE_*`); combine them with `|`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TokenizeFlags(u32);

impl TokenizeFlags {
    /// Plain text, no added tokens.
    pub const NONE: TokenizeFlags = TokenizeFlags(0);
    /// Add BOS/EOS where the model's metadata asks for them.
    pub const ADD_SPECIAL: TokenizeFlags = TokenizeFlags(sys::SA_TOKENIZE_ADD_SPECIAL as u32);
    /// Text such as `<|im_start|>` becomes its control token.
    pub const PARSE_SPECIAL: TokenizeFlags = TokenizeFlags(sys::SA_TOKENIZE_PARSE_SPECIAL as u32);
    /// Normalize the text to Unicode NFC whatever the model's metadata says.
    pub const NFC: TokenizeFlags = TokenizeFlags(sys::SA_TOKENIZE_NFC as u32);
    /// Never normalize: the text is tokenized exactly as given.
    pub const NO_NORMALIZE: TokenizeFlags = TokenizeFlags(sys::SA_TOKENIZE_NO_NORMALIZE as u32);
    /// SentencePiece vocabularies: only text at the start of the input gets the leading-space
    /// marker, not the text after each special token (Hugging Face's `legacy=False`).
    pub const SPM_NON_LEGACY: TokenizeFlags = TokenizeFlags(sys::SA_TOKENIZE_SPM_NON_LEGACY as u32);

    /// The C flag bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: TokenizeFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for TokenizeFlags {
    type Output = TokenizeFlags;
    fn bitor(self, rhs: TokenizeFlags) -> TokenizeFlags {
        TokenizeFlags(self.0 | rhs.0)
    }
}

struct ModelHandle {
    ptr: NonNull<sys::sa_model>,
    info: ModelInfo,
}

// SAFETY: sa.h: an sa_model is immutable after load and its const functions may be called from
// any number of threads; sessions on different threads may share it.
unsafe impl Send for ModelHandle {}
// SAFETY: as above.
unsafe impl Sync for ModelHandle {}

impl Drop for ModelHandle {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed once; sessions keep the weights alive.
        unsafe { sys::sa_model_destroy(self.ptr.as_ptr()) }
    }
}

/// A loaded model: weights and tokenizer. Cheap to clone (a reference count) and shareable
/// between threads; the C handle is destroyed when the last clone and the last
/// [`Session`] made from it are dropped.
#[derive(Clone)]
pub struct Model {
    inner: Arc<ModelHandle>,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("architecture", &self.inner.info.architecture)
            .field("name", &self.inner.info.name)
            .field("n_params", &self.inner.info.n_params)
            .finish()
    }
}

#[cfg(unix)]
pub(crate) fn path_to_cstring(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::new(Status::InvalidArg, "the path contains a NUL byte"))
}

#[cfg(not(unix))]
pub(crate) fn path_to_cstring(path: &Path) -> Result<CString> {
    let s = path
        .to_str()
        .ok_or_else(|| Error::new(Status::InvalidArg, "the path is not valid Unicode"))?;
    str_to_cstring(s, "the path")
}

pub(crate) fn str_to_cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s)
        .map_err(|_| Error::new(Status::InvalidArg, format!("{what} contains a NUL byte")))
}

impl Model {
    /// Loads a GGUF file with the default parameters (`sa_model_load`).
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        Model::load_with(path, ModelParams::default())
    }

    /// Loads a GGUF file (`sa_model_load`).
    pub fn load_with(path: impl AsRef<Path>, params: ModelParams) -> Result<Model> {
        let path = path_to_cstring(path.as_ref())?;
        let raw = params.to_raw();
        let mut out = ptr::null_mut();
        // SAFETY: valid C string, params and out-pointer.
        check(unsafe { sys::sa_model_load(path.as_ptr(), &raw, &mut out) })?;
        Model::from_raw(out)
    }

    /// Loads a GGUF model from bytes; the library copies them (`sa_model_load_from_memory`).
    pub fn from_bytes(data: &[u8]) -> Result<Model> {
        let raw = ModelParams::default().to_raw();
        let mut out = ptr::null_mut();
        // SAFETY: data is valid for data.len() bytes and copied before the call returns.
        check(unsafe {
            sys::sa_model_load_from_memory(data.as_ptr().cast(), data.len(), &raw, &mut out)
        })?;
        Model::from_raw(out)
    }

    fn from_raw(ptr: *mut sys::sa_model) -> Result<Model> {
        let ptr = NonNull::new(ptr)
            .ok_or_else(|| Error::new(Status::Internal, "sa_model_load returned SA_OK and NULL"))?;
        // SAFETY: sa_model_desc is plain data; all zeroes is a valid value.
        let mut d: sys::sa_model_desc = unsafe { std::mem::zeroed() };
        d.struct_size = std::mem::size_of::<sys::sa_model_desc>() as u32;
        // SAFETY: live handle, valid out struct.
        let st = unsafe { sys::sa_model_info(ptr.as_ptr(), &mut d) };
        if let Err(e) = check(st) {
            // SAFETY: the handle is live and not used again.
            unsafe { sys::sa_model_destroy(ptr.as_ptr()) };
            return Err(e);
        }
        let info = ModelInfo {
            architecture: c_array_lossy(&d.architecture),
            name: c_array_lossy(&d.name),
            n_layers: count(d.n_layers),
            n_heads: count(d.n_heads),
            n_kv_heads: count(d.n_kv_heads),
            head_dim: count(d.head_dim),
            n_embd: count(d.n_embd),
            n_ff: count(d.n_ff),
            n_ctx_train: count(d.n_ctx_train),
            n_vocab: count(d.n_vocab),
            bos_token: token_or_none(d.bos_token),
            eos_token: token_or_none(d.eos_token),
            rope_freq_base: d.rope_freq_base,
            n_params: d.n_params,
            weight_bytes: d.weight_bytes,
            tokenizer_nfc: d.tokenizer_nfc != 0,
        };
        Ok(Model {
            inner: Arc::new(ModelHandle { ptr, info }),
        })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::sa_model {
        self.inner.ptr.as_ptr()
    }

    /// What the model is (`sa_model_info`, read once at load).
    pub fn info(&self) -> &ModelInfo {
        &self.inner.info
    }

    /// Tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.inner.info.n_vocab
    }

    /// A GGUF metadata value as text, e.g. `"tokenizer.chat_template"`
    /// (`sa_model_meta_string`). An absent key is [`Status::InvalidArg`].
    pub fn meta(&self, key: &str) -> Result<String> {
        let key = str_to_cstring(key, "the key")?;
        let mut buf: Vec<u8> = vec![0; 256];
        loop {
            let mut len = 0usize;
            // SAFETY: buf holds buf.len() bytes; the model is live.
            let st = unsafe {
                sys::sa_model_meta_string(
                    self.as_ptr(),
                    key.as_ptr(),
                    buf.as_mut_ptr().cast::<c_char>(),
                    buf.len(),
                    &mut len,
                )
            };
            if st == sys::SA_ERR_BUFFER_TOO_SMALL && len >= buf.len() {
                buf.resize(len + 1, 0);
                continue;
            }
            check(st)?;
            buf.truncate(len);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
    }

    /// Splits UTF-8 text into tokens (`sa_tokenize`).
    pub fn tokenize(&self, text: &str, flags: TokenizeFlags) -> Result<Vec<Token>> {
        self.tokenize_bytes(text.as_bytes(), flags)
    }

    /// Splits bytes into tokens; bytes that are not valid UTF-8 are tokenized as bytes
    /// (`sa_tokenize`).
    pub fn tokenize_bytes(&self, text: &[u8], flags: TokenizeFlags) -> Result<Vec<Token>> {
        let mut tokens: Vec<Token> = vec![0; text.len() + 4];
        loop {
            let mut n = 0usize;
            // SAFETY: text and tokens are valid for their lengths; the model is live.
            let st = unsafe {
                sys::sa_tokenize(
                    self.as_ptr(),
                    text.as_ptr().cast::<c_char>(),
                    text.len(),
                    flags.bits(),
                    tokens.as_mut_ptr(),
                    tokens.len(),
                    &mut n,
                )
            };
            if st == sys::SA_ERR_BUFFER_TOO_SMALL && n > tokens.len() {
                tokens.resize(n, 0);
                continue;
            }
            check(st)?;
            tokens.truncate(n);
            return Ok(tokens);
        }
    }

    /// The raw bytes of one token, possibly part of a UTF-8 character (`sa_token_to_piece`).
    pub fn token_to_piece(&self, token: Token, render_special: bool) -> Result<Vec<u8>> {
        let flags = if render_special {
            sys::SA_PIECE_RENDER_SPECIAL as u32
        } else {
            0
        };
        let mut buf: Vec<u8> = vec![0; 64];
        loop {
            let mut len = 0usize;
            // SAFETY: buf holds buf.len() bytes; the model is live.
            let st = unsafe {
                sys::sa_token_to_piece(
                    self.as_ptr(),
                    token,
                    flags,
                    buf.as_mut_ptr().cast::<c_char>(),
                    buf.len(),
                    &mut len,
                )
            };
            if st == sys::SA_ERR_BUFFER_TOO_SMALL && len > buf.len() {
                buf.resize(len, 0);
                continue;
            }
            check(st)?;
            buf.truncate(len);
            return Ok(buf);
        }
    }

    /// Whether the token ends generation: EOS, EOT or a template end marker
    /// (`sa_token_is_eog`). False for tokens out of range.
    pub fn is_eog(&self, token: Token) -> bool {
        // SAFETY: the model is live; any token value is accepted.
        unsafe { sys::sa_token_is_eog(self.as_ptr(), token) != 0 }
    }

    /// A streaming detokenizer (`sa_detokenizer_create`). With `render_special`, control tokens
    /// render as their text instead of "".
    pub fn detokenizer(&self, render_special: bool) -> Result<Detokenizer> {
        let flags = if render_special {
            sys::SA_PIECE_RENDER_SPECIAL as u32
        } else {
            0
        };
        let mut out = ptr::null_mut();
        // SAFETY: live model, valid out-pointer.
        check(unsafe { sys::sa_detokenizer_create(self.as_ptr(), flags, &mut out) })?;
        let ptr = NonNull::new(out).ok_or_else(|| {
            Error::new(
                Status::Internal,
                "sa_detokenizer_create returned SA_OK and NULL",
            )
        })?;
        Ok(Detokenizer {
            ptr,
            buf: vec![0; 256],
            _not_sync: PhantomData,
        })
    }

    /// The text of a token sequence, through a detokenizer (control tokens render as "").
    pub fn detokenize(&self, tokens: &[Token]) -> Result<String> {
        let mut d = self.detokenizer(false)?;
        let mut text = String::new();
        for &t in tokens {
            text.push_str(&d.push(t)?);
        }
        text.push_str(&d.flush()?);
        Ok(text)
    }

    /// A new session on this model (`sa_session_create`); the same as [`Session::new`].
    pub fn session(&self, params: &SessionParams) -> Result<Session> {
        Session::new(self, params)
    }
}

/// Turns a token stream into UTF-8 text that never splits a character (`sa_detokenizer`).
/// `Send` but not `Sync`: one thread at a time.
pub struct Detokenizer {
    ptr: NonNull<sys::sa_detokenizer>,
    buf: Vec<u8>,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: sa.h: a detokenizer may be used by one thread at a time (any thread); it keeps the
// model's data alive by itself.
unsafe impl Send for Detokenizer {}

impl fmt::Debug for Detokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Detokenizer").finish_non_exhaustive()
    }
}

impl Detokenizer {
    fn call(&mut self, token: Option<Token>) -> Result<String> {
        loop {
            let mut len = 0usize;
            let p = self.buf.as_mut_ptr().cast::<c_char>();
            // SAFETY: the handle is live; buf holds buf.len() bytes.
            let st = unsafe {
                match token {
                    Some(t) => {
                        sys::sa_detokenizer_push(self.ptr.as_ptr(), t, p, self.buf.len(), &mut len)
                    }
                    None => {
                        sys::sa_detokenizer_flush(self.ptr.as_ptr(), p, self.buf.len(), &mut len)
                    }
                }
            };
            if st == sys::SA_ERR_BUFFER_TOO_SMALL && len > self.buf.len() {
                self.buf.resize(len, 0); // the state is unchanged: call again
                continue;
            }
            check(st)?;
            return String::from_utf8(self.buf[..len].to_vec()).map_err(|_| {
                Error::new(
                    Status::Internal,
                    "the detokenizer wrote bytes that are not UTF-8",
                )
            });
        }
    }

    /// Adds a token; returns the text that is now complete (may be "")
    /// (`sa_detokenizer_push`).
    pub fn push(&mut self, token: Token) -> Result<String> {
        self.call(Some(token))
    }

    /// Returns the held-back bytes (an incomplete character becomes U+FFFD) and resets
    /// (`sa_detokenizer_flush`).
    pub fn flush(&mut self) -> Result<String> {
        self.call(None)
    }
}

impl Drop for Detokenizer {
    fn drop(&mut self) {
        // SAFETY: live handle, destroyed once.
        unsafe { sys::sa_detokenizer_destroy(self.ptr.as_ptr()) }
    }
}
