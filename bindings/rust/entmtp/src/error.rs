//! Errors: every failing call returns an [`Error`] with the library's status
//! and message (`entmtp_last_error()`).
use std::ffi::CStr;
use std::fmt;

use entmtp_sys as sys;

/// An `entmtp_status` other than `ENTMTP_OK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// NULL pointer, bad size, bad flag value.
    InvalidArgument,
    /// Memory allocation failed.
    OutOfMemory,
    /// A file cannot be opened, read, written or mapped.
    Io,
    /// The file is present but malformed or corrupt.
    Format,
    /// Valid input the library does not support (architecture, dtype).
    Unsupported,
    /// Tree choices fail validation (the message names the offending path).
    InvalidTree,
    /// Policy, session or bank settings are inconsistent.
    InvalidConfig,
    /// An index or token id outside its range.
    OutOfRange,
    /// The KV cache is full.
    KvFull,
    /// Heads or bank do not fit the model.
    Mismatch,
    /// The backend (CUDA) is unavailable or failed.
    Backend,
    /// A callback reported failure (or panicked).
    Callback,
    /// The call is not valid in the object's state.
    State,
    /// A named object (tree, key) does not exist.
    NotFound,
    /// An output buffer was too small (handled inside the bindings).
    BufferTooSmall,
    /// A code this version of the bindings does not know.
    Unknown(u32),
}

impl Status {
    /// The status for a C code; `None` for `ENTMTP_OK`.
    pub fn from_code(code: sys::entmtp_status) -> Option<Status> {
        Some(match code {
            sys::ENTMTP_OK => return None,
            sys::ENTMTP_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::ENTMTP_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::ENTMTP_ERR_IO => Status::Io,
            sys::ENTMTP_ERR_FORMAT => Status::Format,
            sys::ENTMTP_ERR_UNSUPPORTED => Status::Unsupported,
            sys::ENTMTP_ERR_INVALID_TREE => Status::InvalidTree,
            sys::ENTMTP_ERR_INVALID_CONFIG => Status::InvalidConfig,
            sys::ENTMTP_ERR_OUT_OF_RANGE => Status::OutOfRange,
            sys::ENTMTP_ERR_KV_FULL => Status::KvFull,
            sys::ENTMTP_ERR_MISMATCH => Status::Mismatch,
            sys::ENTMTP_ERR_BACKEND => Status::Backend,
            sys::ENTMTP_ERR_CALLBACK => Status::Callback,
            sys::ENTMTP_ERR_STATE => Status::State,
            sys::ENTMTP_ERR_NOT_FOUND => Status::NotFound,
            sys::ENTMTP_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            other => Status::Unknown(other),
        })
    }

    /// The C code (`ENTMTP_ERR_*`).
    pub fn code(self) -> sys::entmtp_status {
        match self {
            Status::InvalidArgument => sys::ENTMTP_ERR_INVALID_ARGUMENT,
            Status::OutOfMemory => sys::ENTMTP_ERR_OUT_OF_MEMORY,
            Status::Io => sys::ENTMTP_ERR_IO,
            Status::Format => sys::ENTMTP_ERR_FORMAT,
            Status::Unsupported => sys::ENTMTP_ERR_UNSUPPORTED,
            Status::InvalidTree => sys::ENTMTP_ERR_INVALID_TREE,
            Status::InvalidConfig => sys::ENTMTP_ERR_INVALID_CONFIG,
            Status::OutOfRange => sys::ENTMTP_ERR_OUT_OF_RANGE,
            Status::KvFull => sys::ENTMTP_ERR_KV_FULL,
            Status::Mismatch => sys::ENTMTP_ERR_MISMATCH,
            Status::Backend => sys::ENTMTP_ERR_BACKEND,
            Status::Callback => sys::ENTMTP_ERR_CALLBACK,
            Status::State => sys::ENTMTP_ERR_STATE,
            Status::NotFound => sys::ENTMTP_ERR_NOT_FOUND,
            Status::BufferTooSmall => sys::ENTMTP_ERR_BUFFER_TOO_SMALL,
            Status::Unknown(c) => c,
        }
    }

    /// The library's short description, e.g. "ENTMTP_ERR_FORMAT: malformed file".
    pub fn description(self) -> String {
        status_string(self.code())
    }

    /// The C name, e.g. "ENTMTP_ERR_FORMAT".
    pub fn name(self) -> String {
        let d = self.description();
        d.split(':').next().unwrap_or("").to_string()
    }
}

pub(crate) fn status_string(code: sys::entmtp_status) -> String {
    // SAFETY: returns a static string (or NULL for nothing).
    let p = unsafe { sys::entmtp_status_string(code) };
    if p.is_null() {
        return format!("ENTMTP_STATUS_{code}");
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The calling thread's last-error message ("" if none).
pub fn last_error() -> String {
    // SAFETY: a NUL-terminated per-thread string, valid until the next failing call.
    let p = unsafe { sys::entmtp_last_error() };
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Clear the calling thread's last-error message.
pub fn clear_error() {
    unsafe { sys::entmtp_clear_error() }
}

/// A failing EntMTP call.
pub struct Error {
    status: Status,
    message: String,
    tokens: Vec<i32>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// `Result<T, entmtp::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with the given status and message.
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
            tokens: Vec::new(),
            source: None,
        }
    }

    /// The status and this thread's last-error message.
    pub(crate) fn last(code: sys::entmtp_status) -> Error {
        let status = Status::from_code(code).unwrap_or(Status::Unknown(code));
        Error::new(status, last_error())
    }

    pub(crate) fn with_tokens(mut self, tokens: Vec<i32>) -> Error {
        self.tokens = tokens;
        self
    }

    pub(crate) fn with_source(mut self, source: Box<dyn std::error::Error + Send + Sync>) -> Error {
        self.source = Some(source);
        self
    }

    /// The status (`ENTMTP_ERR_*`).
    pub fn status(&self) -> Status {
        self.status
    }

    /// The library's message naming the file, field, index or value at fault.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Tokens that were emitted (and committed) before the failure: the part
    /// of a step that fit a full KV cache, or what `generate` produced before
    /// stopping on an error. Empty for most errors.
    pub fn tokens(&self) -> &[i32] {
        &self.tokens
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.message, self.status.name())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("status", &self.status)
            .field("message", &self.message)
            .field("tokens", &self.tokens)
            .field("source", &self.source.as_ref().map(|s| s.to_string()))
            .finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|s| &**s as &(dyn std::error::Error + 'static))
    }
}

/// `Ok(())` for `ENTMTP_OK`, else the error with this thread's message.
pub(crate) fn check(code: sys::entmtp_status) -> Result<()> {
    if code == sys::ENTMTP_OK {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}

/// What a callback did wrong, kept until the C call returns.
pub(crate) enum Pending {
    Panic(String),
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// A message for a panic payload.
pub(crate) fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

#[derive(Debug)]
struct CallbackPanic(String);

impl fmt::Display for CallbackPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "panicked: {}", self.0)
    }
}

impl std::error::Error for CallbackPanic {}

/// The error for a C call during which a callback failed: status
/// `Callback`, the library's message (if the call failed) plus what the
/// callback did, and the callback's error as `source()`.
pub(crate) fn callback_error(code: sys::entmtp_status, pending: Pending, what: &str) -> Error {
    let lib = if code != sys::ENTMTP_OK {
        last_error()
    } else {
        String::new()
    };
    let (detail, source): (String, Box<dyn std::error::Error + Send + Sync>) = match pending {
        Pending::Panic(m) => (format!("{what} panicked: {m}"), Box::new(CallbackPanic(m))),
        Pending::Failed(e) => (format!("{what} failed: {e}"), e),
    };
    let message = if lib.is_empty() {
        detail
    } else {
        format!("{lib} ({detail})")
    };
    Error::new(Status::Callback, message).with_source(source)
}
