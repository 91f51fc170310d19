//! `Session`: one conversation on a model, its generation iterator and its statistics.
use std::cell::Cell;
use std::fmt;
use std::iter::FusedIterator;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::os::raw::c_void;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use sa_sys as sys;

use crate::error::{cstr_lossy, Error, Result, Status};
use crate::model::{Detokenizer, Model, Token};
pub use crate::params::SessionParams;
use crate::params::{Backend, KvType};

/// A token drawn by the sampler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampled {
    /// The token.
    pub token: Token,
    /// The token ends generation (the C call returned `SA_DONE`). Nothing is ended: the caller
    /// decides whether to stop.
    pub end: bool,
}

/// Counters of a session (`sa_stats`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Tokens appended so far.
    pub n_tokens: u64,
    /// Tokens whose K/V the memory holds now.
    pub n_kv_tokens: u64,
    /// Bytes of K/V memory in use (all layers).
    pub kv_bytes_held: u64,
    /// Bytes of K/V memory allocated (all layers).
    pub kv_bytes_capacity: u64,
    /// K/V bytes attention read in the last prefill or decode call.
    pub kv_bytes_read_last_step: u64,
    /// Bytes of weights the backend holds.
    pub weight_bytes: u64,
    /// Wall time of the last prefill or decode call, in milliseconds.
    pub last_call_ms: f64,
    /// Tokens processed by that call.
    pub last_call_tokens: u64,
    /// Keys read in the last decode step, over the (layer, query head) pairs that ran sparse.
    pub sparse_keys_attended: u64,
    /// Keys dense attention would have read for those pairs.
    pub sparse_keys_total: u64,
    /// Tokens rewritten by ReSA rectification so far.
    pub n_rectified: u64,
    /// Where the session runs.
    pub backend: Option<Backend>,
    /// The device index within that backend kind.
    pub device: i32,
    /// Element type of the KV cache.
    pub kv_type: Option<KvType>,
    /// RetroAttention's effective budget (see sa.h); 0 without it.
    pub retro_effective_budget: f64,
    /// PRR: share of the selected pages that were predicted.
    pub prr_hit_rate: f64,
    /// PRR: pages attended after the selection, per (sparse layer, ranker) and step.
    pub prr_missed_pages: f64,
    /// PRR: the last prefill's calibration time, in milliseconds.
    pub prr_calibration_ms: f64,
    /// PRR: the r of the last decode step ([`SessionParams::prr_ratio`], or the profile's
    /// choice with [`SessionParams::prr_profile`]); 0 before one.
    pub prr_ratio: f64,
}

/// What one (layer, query head) did in the last decode step (`sa_head_stat`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadStat {
    /// Layer index.
    pub layer: usize,
    /// Query head index.
    pub head: usize,
    /// Keys its attention read (sampled keys included).
    pub keys_attended: usize,
    /// Keys the memory held for it (what dense attention reads).
    pub keys_total: usize,
    /// vAttention: sampled keys the error bound asked for; `None` for other methods and dense
    /// heads.
    pub sample_budget: Option<i32>,
    /// With [`SessionParams::check_error`]: |o - o_dense| / |o_dense| (0 for dense heads);
    /// `None` without it.
    pub rel_error: Option<f32>,
}

/// One conversation: token history, KV memory and sampler state (`sa_session`).
///
/// `Send` (it may move to another thread) but not `Sync` (one thread uses it at a time, as
/// sa.h requires). It holds a clone of its [`Model`], so the two may be dropped in any order.
pub struct Session {
    ptr: NonNull<sys::sa_session>,
    model: Model,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: sa.h: a session must be used by one thread at a time, any thread; `&mut self` on
// every changing call and the missing `Sync` enforce that.
unsafe impl Send for Session {}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("model", &self.model)
            .field("n_tokens", &self.n_tokens())
            .finish()
    }
}

struct Progress<F> {
    f: F,
    panic: Option<Box<dyn std::any::Any + Send>>,
}

extern "C" fn progress_trampoline<F>(done: usize, total: usize, user_data: *mut c_void) -> i32
where
    F: FnMut(usize, usize) -> ControlFlow<()>,
{
    // SAFETY: user_data is the &mut Progress<F> that `prefill` passed, alive during the call.
    let state = unsafe { &mut *user_data.cast::<Progress<F>>() };
    if state.panic.is_some() {
        return 1;
    }
    // No panic may unwind into C: catch it, cancel the prefill, report it when the call returns.
    match panic::catch_unwind(AssertUnwindSafe(|| (state.f)(done, total))) {
        Ok(ControlFlow::Continue(())) => 0,
        Ok(ControlFlow::Break(())) => 1,
        Err(payload) => {
            state.panic = Some(payload);
            1
        }
    }
}

impl Session {
    fn wrap(model: &Model, code: i32, out: *mut sys::sa_session, what: &str) -> Result<Session> {
        crate::error::check(code)?;
        let ptr = NonNull::new(out).ok_or_else(|| {
            Error::new(Status::Internal, format!("{what} returned SA_OK and NULL"))
        })?;
        Ok(Session {
            ptr,
            model: model.clone(),
            _not_sync: PhantomData,
        })
    }

    /// Starts a conversation on `model` (`sa_session_create`).
    pub fn new(model: &Model, params: &SessionParams) -> Result<Session> {
        let mut out = ptr::null_mut();
        // SAFETY: live model, valid params (strings alive during the call) and out-pointer.
        let code = params
            .with_raw(|raw| unsafe { sys::sa_session_create(model.as_ptr(), raw, &mut out) })?;
        Session::wrap(model, code, out, "sa_session_create")
    }

    /// Re-creates a session saved in the store `params` names (`sa_session_resume`). Backend,
    /// threads, store, autosave and PRR profile come from `params`; every other setting is the
    /// stored session's. No such file or session is [`Status::InvalidArg`].
    pub fn resume(model: &Model, params: &SessionParams) -> Result<Session> {
        if params.store_location().is_none() {
            return Err(Error::new(
                Status::InvalidArg,
                "resume needs SessionParams::store",
            ));
        }
        let mut out = ptr::null_mut();
        // SAFETY: as in `new`.
        let code = params
            .with_raw(|raw| unsafe { sys::sa_session_resume(model.as_ptr(), raw, &mut out) })?;
        Session::wrap(model, code, out, "sa_session_resume")
    }

    /// The model the session runs.
    pub fn model(&self) -> &Model {
        &self.model
    }

    fn error(&self, code: i32) -> Error {
        // SAFETY: the session is live; the message is copied at once.
        let message = unsafe { cstr_lossy(sys::sa_session_errmsg(self.ptr.as_ptr())) };
        Error::new(Status::from_code(code).unwrap_or(Status::Internal), message)
    }

    fn check(&self, code: i32) -> Result<i32> {
        match Status::from_code(code) {
            None => Ok(code),
            Some(_) => Err(self.error(code)),
        }
    }

    /// Appends `tokens` and computes the logits after the last one (`sa_prefill`), calling
    /// `progress(done, total)` after each chunk of `n_batch` tokens. Returning
    /// `ControlFlow::Break(())` cancels: the call fails with [`Status::Cancelled`] and the
    /// session is exactly as before. A panic in `progress` also cancels; it is reported as a
    /// [`Status::Cancelled`] error whose [`Error::is_panic`] is true.
    pub fn prefill<F>(&mut self, tokens: &[Token], progress: F) -> Result<()>
    where
        F: FnMut(usize, usize) -> ControlFlow<()>,
    {
        let mut state = Progress {
            f: progress,
            panic: None,
        };
        // SAFETY: live session; tokens valid for its length; the callback and its state outlive
        // the call and are only used during it.
        let code = unsafe {
            sys::sa_prefill(
                self.ptr.as_ptr(),
                tokens.as_ptr(),
                tokens.len(),
                Some(progress_trampoline::<F>),
                (&mut state as *mut Progress<F>).cast::<c_void>(),
            )
        };
        if let Some(payload) = state.panic.take() {
            return Err(Error::panicked("the progress callback", payload.as_ref()));
        }
        self.check(code).map(drop)
    }

    /// [`Session::prefill`] without a progress callback.
    pub fn prefill_all(&mut self, tokens: &[Token]) -> Result<()> {
        // SAFETY: live session; tokens valid for its length.
        let code = unsafe {
            sys::sa_prefill(
                self.ptr.as_ptr(),
                tokens.as_ptr(),
                tokens.len(),
                None,
                ptr::null_mut(),
            )
        };
        self.check(code).map(drop)
    }

    /// Draws the next token from the current logits (`sa_sample`). Before any prefill:
    /// [`Status::Misuse`].
    pub fn sample(&mut self) -> Result<Sampled> {
        let mut token = -1;
        // SAFETY: live session, valid out-pointer.
        let code = self.check(unsafe { sys::sa_sample(self.ptr.as_ptr(), &mut token) })?;
        Ok(Sampled {
            token,
            end: code == sys::SA_DONE,
        })
    }

    /// Appends `token`, computes the logits after it and samples the next token
    /// (`sa_decode_step`).
    pub fn decode_step(&mut self, token: Token) -> Result<Sampled> {
        let mut next = -1;
        // SAFETY: live session, valid out-pointer.
        let code =
            self.check(unsafe { sys::sa_decode_step(self.ptr.as_ptr(), token, &mut next) })?;
        Ok(Sampled {
            token: next,
            end: code == sys::SA_DONE,
        })
    }

    /// Appends `token` and computes the logits after it without sampling
    /// (`sa_decode_step` with no output token).
    pub fn append(&mut self, token: Token) -> Result<()> {
        // SAFETY: live session; NULL out_token is allowed.
        self.check(unsafe { sys::sa_decode_step(self.ptr.as_ptr(), token, ptr::null_mut()) })
            .map(drop)
    }

    /// The logits after the last processed token, `n_vocab` values; `None` before any prefill
    /// (or when a GPU could not read them back) (`sa_session_logits`).
    pub fn logits(&mut self) -> Option<&[f32]> {
        let mut n = 0i32;
        // SAFETY: live session; the array stays valid until the next call on the session,
        // which the `&mut self` borrow of the result rules out.
        unsafe {
            let p = sys::sa_session_logits(self.ptr.as_ptr(), &mut n);
            if p.is_null() {
                None
            } else {
                Some(std::slice::from_raw_parts(
                    p,
                    usize::try_from(n).unwrap_or(0),
                ))
            }
        }
    }

    /// The token history: every token appended so far, in order (`sa_session_tokens`).
    pub fn tokens(&self) -> Vec<Token> {
        let mut p: *const i32 = ptr::null();
        let mut n = 0usize;
        // SAFETY: live session; the array is copied before any other call.
        unsafe {
            if sys::sa_session_tokens(self.ptr.as_ptr(), &mut p, &mut n) != sys::SA_OK
                || p.is_null()
            {
                return Vec::new();
            }
            std::slice::from_raw_parts(p, n).to_vec()
        }
    }

    /// The number of tokens in the history.
    pub fn n_tokens(&self) -> usize {
        let mut p: *const i32 = ptr::null();
        let mut n = 0usize;
        // SAFETY: live session, valid out-pointers.
        unsafe { sys::sa_session_tokens(self.ptr.as_ptr(), &mut p, &mut n) };
        n
    }

    /// Forgets every token; the sampler's seed sequence goes on (`sa_session_reset`).
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: live session.
        self.check(unsafe { sys::sa_session_reset(self.ptr.as_ptr()) })
            .map(drop)
    }

    /// The history positions whose K/V the memory holds, ascending, for one layer and KV head;
    /// `None` for the union over layers or heads (`sa_session_memory_positions`). Dense memory
    /// holds every position; streaming and cascade memories what they have not evicted.
    pub fn memory_positions(&self, layer: Option<u32>, kv_head: Option<u32>) -> Result<Vec<u64>> {
        let layer = layer.map_or(-1, |l| l.min(i32::MAX as u32) as i32);
        let kv_head = kv_head.map_or(-1, |h| h.min(i32::MAX as u32) as i32);
        let mut count = 0usize;
        // SAFETY: live session; a NULL buffer with capacity 0 asks for the count.
        let st = unsafe {
            sys::sa_session_memory_positions(
                self.ptr.as_ptr(),
                layer,
                kv_head,
                ptr::null_mut(),
                0,
                &mut count,
            )
        };
        if st != sys::SA_ERR_BUFFER_TOO_SMALL {
            self.check(st)?;
        }
        let mut out = vec![0u64; count];
        // SAFETY: live session; out has room for count positions.
        self.check(unsafe {
            sys::sa_session_memory_positions(
                self.ptr.as_ptr(),
                layer,
                kv_head,
                out.as_mut_ptr(),
                out.len(),
                &mut count,
            )
        })?;
        out.truncate(count);
        Ok(out)
    }

    /// The session's counters (`sa_session_stats`).
    pub fn stats(&self) -> Result<Stats> {
        // SAFETY: plain data; zeroes are valid.
        let mut s: sys::sa_stats = unsafe { std::mem::zeroed() };
        s.struct_size = std::mem::size_of::<sys::sa_stats>() as u32;
        // SAFETY: live session, valid out struct.
        self.check(unsafe { sys::sa_session_stats(self.ptr.as_ptr(), &mut s) })?;
        Ok(Stats {
            n_tokens: s.n_tokens,
            n_kv_tokens: s.n_kv_tokens,
            kv_bytes_held: s.kv_bytes_held,
            kv_bytes_capacity: s.kv_bytes_capacity,
            kv_bytes_read_last_step: s.kv_bytes_read_last_step,
            weight_bytes: s.weight_bytes,
            last_call_ms: s.last_call_ms,
            last_call_tokens: s.last_call_tokens,
            sparse_keys_attended: s.sparse_keys_attended,
            sparse_keys_total: s.sparse_keys_total,
            n_rectified: s.n_rectified,
            backend: Backend::from_raw(s.backend),
            device: s.device,
            kv_type: KvType::from_raw(s.kv_type),
            retro_effective_budget: s.retro_effective_budget,
            prr_hit_rate: s.prr_hit_rate,
            prr_missed_pages: s.prr_missed_pages,
            prr_calibration_ms: s.prr_calibration_ms,
            prr_ratio: s.prr_ratio,
        })
    }

    /// Per (layer, query head) figures of the last decode step, layer-major; empty before the
    /// first decode step and after a prefill (`sa_session_head_stats`).
    pub fn head_stats(&self) -> Result<Vec<HeadStat>> {
        let mut n = 0usize;
        // SAFETY: live session; NULL output asks for the count.
        self.check(unsafe {
            sys::sa_session_head_stats(self.ptr.as_ptr(), ptr::null_mut(), 0, &mut n)
        })?;
        let zero = sys::sa_head_stat {
            layer: 0,
            head: 0,
            keys_attended: 0,
            keys_total: 0,
            sample_budget: 0,
            rel_error: 0.0,
        };
        let mut raw = vec![zero; n];
        // SAFETY: raw holds n records.
        self.check(unsafe {
            sys::sa_session_head_stats(self.ptr.as_ptr(), raw.as_mut_ptr(), n, &mut n)
        })?;
        raw.truncate(n);
        let size = |v: i32| usize::try_from(v).unwrap_or(0);
        Ok(raw
            .iter()
            .map(|h| HeadStat {
                layer: size(h.layer),
                head: size(h.head),
                keys_attended: size(h.keys_attended),
                keys_total: size(h.keys_total),
                sample_budget: if h.sample_budget < 0 {
                    None
                } else {
                    Some(h.sample_budget)
                },
                rel_error: if h.rel_error < 0.0 {
                    None
                } else {
                    Some(h.rel_error)
                },
            })
            .collect())
    }

    /// Saves the session into its store under its id (`sa_session_save`). A new session whose
    /// id names an existing stored session gets [`Status::Store`].
    pub fn save(&mut self) -> Result<()> {
        // SAFETY: live session.
        self.check(unsafe { sys::sa_session_save(self.ptr.as_ptr()) })
            .map(drop)
    }

    /// Generates up to `max_tokens` tokens and returns their text as an iterator of UTF-8
    /// pieces (through the library's streaming detokenizer; control tokens render as "").
    /// Sampling starts from the current logits, so prefill a prompt first.
    ///
    /// Each token's text is yielded before the token is decoded; the iterator appends it to
    /// the history when asked for the next piece. Once it returns `None`, every token it
    /// produced is in the history, except an end-of-generation token, which it stops at
    /// without appending ([`Generate::end_token`]). An error is yielded once, then `None`.
    pub fn generate(&mut self, max_tokens: usize) -> Result<Generate<'_>> {
        let detokenizer = self.model.detokenizer(false)?;
        Ok(Generate {
            session: self,
            detokenizer,
            max_tokens,
            produced: Vec::new(),
            pending: None,
            end: None,
            finished: false,
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: live handle, destroyed once.
        unsafe { sys::sa_session_destroy(self.ptr.as_ptr()) }
    }
}

/// The iterator of [`Session::generate`]: UTF-8 text pieces, each `Result<String>`.
pub struct Generate<'a> {
    session: &'a mut Session,
    detokenizer: Detokenizer,
    max_tokens: usize,
    produced: Vec<Token>,
    pending: Option<Token>, // yielded, not yet appended
    end: Option<Token>,
    finished: bool,
}

impl fmt::Debug for Generate<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generate")
            .field("produced", &self.produced)
            .field("end", &self.end)
            .field("finished", &self.finished)
            .finish()
    }
}

impl Generate<'_> {
    /// The tokens yielded so far (not the end-of-generation token).
    pub fn tokens(&self) -> &[Token] {
        &self.produced
    }

    /// The end-of-generation token generation stopped at, if it did (not in the history).
    pub fn end_token(&self) -> Option<Token> {
        self.end
    }

    /// Appends the last yielded token if the iterator has not done so yet (when it is dropped
    /// before returning `None`), so the history holds every token shown.
    pub fn commit(mut self) -> Result<()> {
        match self.pending.take() {
            Some(t) => self.session.append(t),
            None => Ok(()),
        }
    }

    fn close(&mut self) -> Result<String> {
        self.finished = true;
        self.detokenizer.flush()
    }

    // One token: the text it completes (may be ""), or the flushed rest at the end.
    fn step(&mut self) -> Result<String> {
        let next = match self.pending.take() {
            Some(p) if self.produced.len() >= self.max_tokens => {
                self.session.append(p)?;
                return self.close();
            }
            Some(p) => self.session.decode_step(p)?,
            None if self.produced.len() >= self.max_tokens => return self.close(),
            None => self.session.sample()?,
        };
        if next.end {
            self.end = Some(next.token);
            return self.close();
        }
        let text = self.detokenizer.push(next.token)?;
        self.produced.push(next.token);
        self.pending = Some(next.token);
        Ok(text)
    }
}

impl Iterator for Generate<'_> {
    type Item = Result<String>;

    fn next(&mut self) -> Option<Result<String>> {
        while !self.finished {
            match self.step() {
                Ok(text) if text.is_empty() => {}
                Ok(text) => return Some(Ok(text)),
                Err(e) => {
                    self.finished = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

impl FusedIterator for Generate<'_> {}
