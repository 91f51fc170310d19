//! The SQLite session store: list and delete stored sessions. Saving and resuming are
//! [`crate::Session::save`] and [`crate::Session::resume`].
use std::mem::{size_of, MaybeUninit};
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, addr_of};

use sa_sys as sys;

use crate::error::{check, cstr_lossy, Error, Result};
use crate::model::{path_to_cstring, str_to_cstring};
use crate::params::Memory;

/// One stored session, as [`list`] reports it (`sa_stored_session`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredSession {
    /// The session's id in the store.
    pub id: String,
    /// `general.name` of the model it was saved with.
    pub model_name: String,
    /// Fingerprint of that model's GGUF metadata and tensor table.
    pub model_fingerprint: u64,
    /// Its KV memory.
    pub memory: Option<Memory>,
    /// Tokens in its history.
    pub n_tokens: u64,
    /// Bytes of state stored (before SQLite's own overhead).
    pub bytes: u64,
    /// Unix time of the first save, in seconds.
    pub created: i64,
    /// Unix time of the last save, in seconds.
    pub updated: i64,
}

/// Reads field `$f` of `*$p` when it lies within the library's `struct_size` bytes, else the
/// default: a library older than these bindings may report fewer fields.
macro_rules! field {
    ($p:expr, $size:expr, $f:ident: $ty:ty) => {{
        let probe = MaybeUninit::<sys::sa_stored_session>::uninit();
        let base = probe.as_ptr();
        // SAFETY: only the address of a field of a local is computed, nothing is read.
        let offset = unsafe { addr_of!((*base).$f) as usize - base as usize };
        let len = size_of::<$ty>();
        if offset + len <= $size {
            // SAFETY: within the struct the library reported; unaligned-safe read.
            Some(unsafe { $p.cast::<u8>().add(offset).cast::<$ty>().read_unaligned() })
        } else {
            None
        }
    }};
}

struct Listing {
    sessions: Vec<StoredSession>,
    panicked: Option<Box<dyn std::any::Any + Send>>,
}

extern "C" fn list_callback(s: *const sys::sa_stored_session, user_data: *mut c_void) -> i32 {
    // SAFETY: user_data is the &mut Listing `list` passed; alive during sa_store_list.
    let listing = unsafe { &mut *user_data.cast::<Listing>() };
    let read = AssertUnwindSafe(|| {
        // SAFETY: the library passes a valid record whose struct_size says how long it is.
        let size = unsafe { (*s).struct_size } as usize;
        let id = field!(s, size, session_id: *const c_char).unwrap_or(ptr::null());
        let name = field!(s, size, model_name: *const c_char).unwrap_or(ptr::null());
        StoredSession {
            // SAFETY: NULL or NUL-terminated strings valid during the callback.
            id: unsafe { cstr_lossy(id) },
            model_name: unsafe { cstr_lossy(name) },
            model_fingerprint: field!(s, size, model_fingerprint: u64).unwrap_or(0),
            memory: field!(s, size, memory: i32).and_then(Memory::from_raw),
            n_tokens: field!(s, size, n_tokens: u64).unwrap_or(0),
            bytes: field!(s, size, bytes: u64).unwrap_or(0),
            created: field!(s, size, created: i64).unwrap_or(0),
            updated: field!(s, size, updated: i64).unwrap_or(0),
        }
    });
    match panic::catch_unwind(read) {
        Ok(session) => {
            listing.sessions.push(session);
            0
        }
        Err(payload) => {
            listing.panicked = Some(payload);
            1
        }
    }
}

/// The sessions of the store file at `path`, most recently saved first (`sa_store_list`).
/// A path where no file exists holds no sessions.
pub fn list(path: impl AsRef<Path>) -> Result<Vec<StoredSession>> {
    let path = path_to_cstring(path.as_ref())?;
    let mut listing = Listing {
        sessions: Vec::new(),
        panicked: None,
    };
    // SAFETY: valid path; the callback and its state are used only during the call.
    let code = unsafe {
        sys::sa_store_list(
            path.as_ptr(),
            Some(list_callback),
            (&mut listing as *mut Listing).cast(),
        )
    };
    if let Some(payload) = listing.panicked {
        return Err(Error::panicked(
            "reading a stored session",
            payload.as_ref(),
        ));
    }
    check(code)?;
    Ok(listing.sessions)
}

/// Removes a stored session (`sa_store_delete`). No such file or session is
/// [`crate::Status::InvalidArg`].
pub fn delete(path: impl AsRef<Path>, session_id: &str) -> Result<()> {
    let path = path_to_cstring(path.as_ref())?;
    let id = str_to_cstring(session_id, "the session id")?;
    // SAFETY: valid C strings.
    check(unsafe { sys::sa_store_delete(path.as_ptr(), id.as_ptr()) }).map(drop)
}
