//! Safe Rust bindings for EntMTP, an embeddable library for speculative LLM
//! decoding with Medusa/Hydra heads, tree attention, typical acceptance and a
//! per-step tree-scheduling policy over a TopologyBank.
//!
//! The raw declarations live in [`sys`] (the `entmtp-sys` crate, generated
//! from `include/entmtp.h` by bindgen). This crate wraps them:
//!
//! * every handle is an owning type released by `Drop`;
//! * every failing call returns [`Error`] with the [`Status`] and the
//!   library's message;
//! * borrowing encodes the C lifetimes: [`Heads`] borrow their [`Model`], a
//!   [`Session`] borrows its model, heads, bank and (exclusively) its policy,
//!   so none of them can be dropped or modified while the session exists;
//! * a custom [`Policy`] runs a Rust closure or [`CustomPolicy`]; a panic in
//!   it never unwinds into C: it becomes a `Status::Callback` error.
//!
//! ```no_run
//! use entmtp::{Bank, Model, Policy, Session, TokenizeSpecial};
//! let model = Model::load("model.gguf")?;
//! let heads = model.load_heads("medusa.safetensors")?;
//! let mut bank = Bank::with_max_depth(heads.n_heads())?;
//! bank.add_builtin("chain_2")?;
//! bank.add_builtin("mc_sim_7b_63")?;
//! let mut policy = Policy::hysteresis(0.3, 0.1)?;
//! let mut session = Session::new(&model, Some(&heads), Some(&bank))?;
//! session.set_policy(Some(&mut policy))?;
//! session.prefill(&model.tokenize_special("Hello", TokenizeSpecial::AddSpecial, false)?)?;
//! let out = session.generate(64, false)?;
//! println!("{}", model.detokenize(&out)?);
//! # Ok::<(), entmtp::Error>(())
//! ```
#![warn(missing_docs)]

use std::ffi::{CStr, CString};
use std::path::Path;

pub use entmtp_sys as sys;

mod bank;
mod error;
mod model;
mod policy;
mod session;

pub use bank::{builtin_tree_names, Bank, BankParams, TreeBuffers, TreeInfo, Trees};
pub use error::{clear_error, last_error, Error, Result, Status};
pub use model::{Backend, Drafter, Heads, HeadsInfo, HeadsKind, LoadOptions, Model, ModelInfo, TokenizeSpecial};
pub use policy::{CustomPolicy, Features, Outcome, Policy, PolicyKind};
pub use session::{Session, SessionOptions, SessionStats, SpeedupSource, StepResult};

/// Header version the bindings were generated from (MAJOR, MINOR, PATCH).
pub const HEADER_VERSION: (u32, u32, u32) = (
    sys::ENTMTP_VERSION_MAJOR,
    sys::ENTMTP_VERSION_MINOR,
    sys::ENTMTP_VERSION_PATCH,
);
/// The ABI major version (the number in libentmtp.so.N).
pub const ABI_VERSION: u32 = sys::ENTMTP_ABI_VERSION;
/// A limit of the library actually loaded (`entmtp_limit`); they are run-time
/// values, not part of the ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Drafting depth (heads per model, tree depth).
    MaxHeads,
    /// Trees in a threshold ladder (thresholds + 1).
    MaxLadder,
    /// Stop tokens of a session.
    MaxStopTokens,
    /// Nodes of a bank tree (`BankParams::max_nodes`).
    MaxTreeNodes,
    /// Candidates per head (`BankParams::topk`).
    MaxTopk,
}

/// The value of `limit` in the loaded library.
pub fn limit(limit: Limit) -> usize {
    let kind = match limit {
        Limit::MaxHeads => sys::ENTMTP_LIMIT_MAX_HEADS,
        Limit::MaxLadder => sys::ENTMTP_LIMIT_MAX_LADDER,
        Limit::MaxStopTokens => sys::ENTMTP_LIMIT_MAX_STOP_TOKENS,
        Limit::MaxTreeNodes => sys::ENTMTP_LIMIT_MAX_TREE_NODES,
        Limit::MaxTopk => sys::ENTMTP_LIMIT_MAX_TOPK,
    };
    unsafe { sys::entmtp_limit(kind) }.max(0) as usize
}

/// "MAJOR.MINOR.PATCH" of the library actually loaded.
pub fn version() -> &'static str {
    // SAFETY: static storage in the library.
    unsafe { CStr::from_ptr(sys::entmtp_version_string()) }
        .to_str()
        .unwrap_or("?")
}

/// ENTMTP_VERSION_NUMBER of the library actually loaded.
pub fn version_number() -> u32 {
    unsafe { sys::entmtp_version_number() }
}

// ------------------------------------------------------------ helpers

pub(crate) fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(Status::InvalidArgument, format!("{what}: {s:?} contains a NUL byte")))
}

pub(crate) fn path_cstring(p: &Path) -> Result<CString> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        p.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = p
        .to_str()
        .ok_or_else(|| Error::new(Status::InvalidArgument, format!("{}: not UTF-8", p.display())))?
        .as_bytes()
        .to_vec();
    CString::new(bytes).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!("{}: the path contains a NUL byte", p.display()),
        )
    })
}

pub(crate) fn to_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::new(Status::OutOfRange, format!("{what} = {v} does not fit int32_t")))
}

pub(crate) fn c_chars(a: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A versioned struct holding the library's defaults, from its
/// `entmtp_*_init(ptr, size, ...)` initialiser.
macro_rules! defaults {
    ($t:ty, $init:expr $(, $arg:expr)*) => {{
        // SAFETY: all-zero bytes are a valid value of these C structs; the
        // initialiser writes size_of::<$t>() bytes and cannot fail for them.
        let mut v: $t = unsafe { std::mem::zeroed() };
        let st = unsafe { $init(&mut v, std::mem::size_of::<$t>() $(, $arg)*) };
        debug_assert_eq!(st, sys::ENTMTP_OK);
        v
    }};
}
pub(crate) use defaults;

/// A zeroed versioned struct with `struct_size` set. Only for the plain-data
/// `entmtp_*` structs (integers, floats, pointers that may be NULL).
macro_rules! versioned {
    ($t:ty) => {{
        // SAFETY: all-zero bytes are a valid value of these C structs.
        let mut v: $t = unsafe { std::mem::zeroed() };
        v.struct_size = std::mem::size_of::<$t>();
        v
    }};
}
pub(crate) use versioned;
