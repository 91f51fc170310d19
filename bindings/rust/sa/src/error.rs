//! `Error` and `Status`: the failures of the C API as Rust values.
use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;

use sa_sys as sys;

/// A failure status of the C API (every `sa_status` except `SA_OK` and `SA_DONE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// `SA_ERR_INVALID_ARG`: an argument is out of range or malformed.
    InvalidArg,
    /// `SA_ERR_MISUSE`: a call in the wrong state (for example sampling before any prefill).
    Misuse,
    /// `SA_ERR_IO`: a file could not be opened, read or mapped.
    Io,
    /// `SA_ERR_FORMAT`: a file is malformed, truncated or inconsistent.
    Format,
    /// `SA_ERR_UNSUPPORTED`: valid input this build cannot handle.
    Unsupported,
    /// `SA_ERR_NOMEM`: an allocation failed.
    NoMem,
    /// `SA_ERR_BACKEND`: the compute backend failed.
    Backend,
    /// `SA_ERR_STORE`: the session store failed or holds foreign or corrupt data.
    Store,
    /// `SA_ERR_CONTEXT_FULL`: the session's memory cannot take more tokens.
    ContextFull,
    /// `SA_ERR_CANCELLED`: a progress callback asked to stop (or panicked).
    Cancelled,
    /// `SA_ERR_BUFFER_TOO_SMALL`: an output buffer was too small (the wrapper retries these).
    BufferTooSmall,
    /// `SA_ERR_INTERNAL`: a bug in sa.
    Internal,
    /// A code this version of the bindings does not know.
    Unknown(i32),
}

impl Status {
    /// The status of a C code; `None` for the successes `SA_OK` and `SA_DONE`.
    pub fn from_code(code: i32) -> Option<Status> {
        Some(match code {
            sys::SA_OK | sys::SA_DONE => return None,
            sys::SA_ERR_INVALID_ARG => Status::InvalidArg,
            sys::SA_ERR_MISUSE => Status::Misuse,
            sys::SA_ERR_IO => Status::Io,
            sys::SA_ERR_FORMAT => Status::Format,
            sys::SA_ERR_UNSUPPORTED => Status::Unsupported,
            sys::SA_ERR_NOMEM => Status::NoMem,
            sys::SA_ERR_BACKEND => Status::Backend,
            sys::SA_ERR_STORE => Status::Store,
            sys::SA_ERR_CONTEXT_FULL => Status::ContextFull,
            sys::SA_ERR_CANCELLED => Status::Cancelled,
            sys::SA_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::SA_ERR_INTERNAL => Status::Internal,
            other => Status::Unknown(other),
        })
    }

    /// The C code (`SA_ERR_*`).
    pub fn code(self) -> i32 {
        match self {
            Status::InvalidArg => sys::SA_ERR_INVALID_ARG,
            Status::Misuse => sys::SA_ERR_MISUSE,
            Status::Io => sys::SA_ERR_IO,
            Status::Format => sys::SA_ERR_FORMAT,
            Status::Unsupported => sys::SA_ERR_UNSUPPORTED,
            Status::NoMem => sys::SA_ERR_NOMEM,
            Status::Backend => sys::SA_ERR_BACKEND,
            Status::Store => sys::SA_ERR_STORE,
            Status::ContextFull => sys::SA_ERR_CONTEXT_FULL,
            Status::Cancelled => sys::SA_ERR_CANCELLED,
            Status::BufferTooSmall => sys::SA_ERR_BUFFER_TOO_SMALL,
            Status::Internal => sys::SA_ERR_INTERNAL,
            Status::Unknown(code) => code,
        }
    }

    /// The library's short description of the status (`sa_errstr`).
    pub fn description(self) -> String {
        // SAFETY: sa_errstr returns static storage, never NULL.
        unsafe { cstr_lossy(sys::sa_errstr(self.code())) }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.description())
    }
}

/// A failed call: the status and the library's message saying what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
    panicked: bool,
}

impl Error {
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
            panicked: false,
        }
    }

    /// An error for `code` with the message of the last failed call on this thread
    /// (`sa_last_error`). Call it right after the failing call, on the same thread.
    pub(crate) fn last(code: i32) -> Error {
        // SAFETY: sa_last_error never returns NULL; the string is copied at once.
        let message = unsafe { cstr_lossy(sys::sa_last_error()) };
        Error::new(Status::from_code(code).unwrap_or(Status::Internal), message)
    }

    pub(crate) fn panicked(what: &str, payload: &(dyn std::any::Any + Send)) -> Error {
        let detail = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "a non-string panic payload".to_string()
        };
        Error {
            status: Status::Cancelled,
            message: format!("{what} panicked: {detail}"),
            panicked: true,
        }
    }

    /// The status the library returned.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The library's message (`sa_last_error` or `sa_session_errmsg` at the time of failure).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether a callback given to the call panicked. The call was then cancelled (status
    /// [`Status::Cancelled`]) and the panic's message is in [`Error::message`].
    pub fn is_panic(&self) -> bool {
        self.panicked
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{}: {}", self.status, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(code)` for `SA_OK` and `SA_DONE`, else the error with this thread's last message.
pub(crate) fn check(code: i32) -> Result<i32> {
    match Status::from_code(code) {
        None => Ok(code),
        Some(_) => Err(Error::last(code)),
    }
}

/// Copies a NUL-terminated C string; `""` for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn cstr_lossy(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// The text of a fixed-size, NUL-terminated `char` array.
pub(crate) fn c_array_lossy(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
