//! Model and Heads.
use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::error::{callback_error, check, panic_message, Error, Pending, Result, Status};
use crate::{c_chars, cstring, defaults, path_cstring, sys, to_i32, versioned};

/// Where the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// CUDA when a usable GPU and the CUDA plugin exist, else CPU.
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// The CUDA backend plugin.
    Cuda,
}

impl Backend {
    fn code(self) -> sys::entmtp_backend {
        match self {
            Backend::Auto => sys::ENTMTP_BACKEND_AUTO,
            Backend::Cpu => sys::ENTMTP_BACKEND_CPU,
            Backend::Cuda => sys::ENTMTP_BACKEND_CUDA,
        }
    }
    fn from_code(c: sys::entmtp_backend) -> Backend {
        match c {
            sys::ENTMTP_BACKEND_CPU => Backend::Cpu,
            sys::ENTMTP_BACKEND_CUDA => Backend::Cuda,
            _ => Backend::Auto,
        }
    }
}

/// How to load a model (`entmtp_model_params` without the callback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Backend; default `Auto`.
    pub backend: Backend,
    /// CPU threads; 0 = all online cores.
    pub threads: usize,
    /// CUDA device ordinal.
    pub device: usize,
    /// Compute with every weight converted to F32 (`ENTMTP_COMPUTE_F32`)
    /// instead of in its stored type (`ENTMTP_COMPUTE_NATIVE`, default).
    pub compute_f32: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        // SAFETY: plain function returning a struct.
        let p = defaults!(sys::entmtp_model_params, sys::entmtp_model_params_init);
        LoadOptions {
            backend: Backend::from_code(p.backend),
            threads: p.n_threads.max(0) as usize,
            device: p.device.max(0) as usize,
            compute_f32: p.compute_type == sys::ENTMTP_COMPUTE_F32,
        }
    }
}

/// `entmtp_model_info`.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct ModelInfo {
    pub architecture: String,
    pub name: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub context_length: usize,
    pub rope_theta: f32,
    pub rms_norm_eps: f32,
    pub tied_embeddings: bool,
    /// None if the model has none.
    pub bos_token: Option<i32>,
    /// None if the model has none.
    pub eos_token: Option<i32>,
    pub n_params: u64,
    /// The backend actually in use (never `Auto`).
    pub backend: Backend,
}

/// A loaded Llama-family model (GGUF file or Hugging Face directory).
/// Immutable once loaded: `Send + Sync`, shareable by sessions on any thread.
pub struct Model {
    raw: NonNull<sys::entmtp_model>,
}

// SAFETY: the C library documents a loaded model as immutable and shareable
// by any number of sessions on any number of threads.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

type ProgressFn<'f> = &'f mut dyn FnMut(f32, &str) -> bool;

struct ProgressState<'f> {
    f: ProgressFn<'f>,
    pending: Option<Pending>,
}

unsafe extern "C" fn progress_trampoline(fraction: f32, what: *const c_char, user_data: *mut c_void) -> c_int {
    // SAFETY: user_data is the &mut ProgressState passed by load_with_progress,
    // alive for the whole entmtp_model_load call.
    let state = &mut *(user_data as *mut ProgressState);
    let text = if what.is_null() {
        String::new()
    } else {
        CStr::from_ptr(what).to_string_lossy().into_owned()
    };
    match catch_unwind(AssertUnwindSafe(|| (state.f)(fraction, &text))) {
        Ok(cancel) => c_int::from(cancel),
        Err(p) => {
            state.pending = Some(Pending::Panic(panic_message(p)));
            1
        }
    }
}

impl Model {
    /// Load with default options.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        Model::load_impl(path.as_ref(), &LoadOptions::default(), None)
    }

    /// Load with the given options.
    pub fn load_with(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Model> {
        Model::load_impl(path.as_ref(), options, None)
    }

    /// Load, calling `progress(fraction, what)` along the way; returning
    /// `true` cancels (a `Status::Callback` error), and so does a panic.
    pub fn load_with_progress<F: FnMut(f32, &str) -> bool>(
        path: impl AsRef<Path>,
        options: &LoadOptions,
        mut progress: F,
    ) -> Result<Model> {
        Model::load_impl(path.as_ref(), options, Some(&mut progress))
    }

    fn load_impl(path: &Path, options: &LoadOptions, progress: Option<ProgressFn<'_>>) -> Result<Model> {
        let cpath = path_cstring(path)?;
        let mut p = defaults!(sys::entmtp_model_params, sys::entmtp_model_params_init);
        p.backend = options.backend.code();
        p.n_threads = to_i32(options.threads, "threads")?;
        p.device = to_i32(options.device, "device")?;
        p.compute_type = if options.compute_f32 { sys::ENTMTP_COMPUTE_F32 } else { sys::ENTMTP_COMPUTE_NATIVE };
        let mut state = progress.map(|f| ProgressState { f, pending: None });
        if let Some(s) = state.as_mut() {
            p.progress = Some(progress_trampoline);
            p.progress_user_data = s as *mut ProgressState as *mut c_void;
        }
        let mut out = ptr::null_mut();
        // SAFETY: valid params and out pointer; the callback state outlives the call.
        let st = unsafe { sys::entmtp_model_load(cpath.as_ptr(), &p, &mut out) };
        if let Some(pending) = state.and_then(|s| s.pending) {
            if !out.is_null() {
                unsafe { sys::entmtp_model_free(out) };
            }
            return Err(callback_error(st, pending, "the progress callback"));
        }
        check(st)?;
        NonNull::new(out)
            .map(|raw| Model { raw })
            .ok_or_else(|| Error::new(Status::State, "entmtp_model_load returned no model"))
    }

    /// The raw handle (owned by this Model).
    pub fn as_ptr(&self) -> *mut sys::entmtp_model {
        self.raw.as_ptr()
    }

    /// `entmtp_model_get_info`.
    pub fn info(&self) -> ModelInfo {
        let mut i = versioned!(sys::entmtp_model_info);
        // SAFETY: a live model and a correctly sized struct; cannot fail then.
        let st = unsafe { sys::entmtp_model_get_info(self.raw.as_ptr(), &mut i) };
        debug_assert_eq!(st, sys::ENTMTP_OK);
        let opt = |t: i32| if t >= 0 { Some(t) } else { None };
        ModelInfo {
            architecture: c_chars(&i.architecture),
            name: c_chars(&i.name),
            vocab_size: i.vocab_size.max(0) as usize,
            hidden_size: i.hidden_size.max(0) as usize,
            intermediate_size: i.intermediate_size.max(0) as usize,
            n_layers: i.n_layers.max(0) as usize,
            n_heads: i.n_heads.max(0) as usize,
            n_kv_heads: i.n_kv_heads.max(0) as usize,
            head_dim: i.head_dim.max(0) as usize,
            context_length: i.context_length.max(0) as usize,
            rope_theta: i.rope_theta,
            rms_norm_eps: i.rms_norm_eps,
            tied_embeddings: i.tied_embeddings != 0,
            bos_token: opt(i.bos_token),
            eos_token: opt(i.eos_token),
            n_params: i.n_params.max(0) as u64,
            backend: Backend::from_code(i.backend),
        }
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.info().vocab_size
    }

    /// Text -> token ids with the model's tokenizer.
    pub fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<i32>> {
        let mut cap = text.len() + 8;
        for _ in 0..2 {
            let mut buf = vec![0i32; cap];
            let mut n = 0i32;
            let st = unsafe {
                sys::entmtp_tokenize(
                    self.raw.as_ptr(),
                    text.as_ptr() as *const c_char,
                    text.len() as i64,
                    c_int::from(add_bos),
                    c_int::from(parse_special),
                    buf.as_mut_ptr(),
                    to_i32(cap, "capacity")?,
                    &mut n,
                )
            };
            if st == sys::ENTMTP_ERR_BUFFER_TOO_SMALL && n as usize > cap {
                cap = n as usize;
                continue;
            }
            check(st)?;
            buf.truncate(n.max(0) as usize);
            return Ok(buf);
        }
        Err(Error::new(
            Status::BufferTooSmall,
            "entmtp_tokenize: the size kept growing",
        ))
    }

    fn text_call(&self, mut f: impl FnMut(*mut c_char, usize, *mut usize) -> sys::entmtp_status) -> Result<Vec<u8>> {
        let mut cap = 256usize;
        for _ in 0..2 {
            let mut buf = vec![0u8; cap];
            let mut n = 0usize;
            let st = f(buf.as_mut_ptr() as *mut c_char, cap, &mut n);
            if st == sys::ENTMTP_ERR_BUFFER_TOO_SMALL && n + 1 > cap {
                cap = n + 1;
                continue;
            }
            check(st)?;
            buf.truncate(n);
            return Ok(buf);
        }
        Err(Error::new(Status::BufferTooSmall, "the text size kept growing"))
    }

    /// Tokens -> the raw UTF-8 bytes (a partial character stays partial).
    pub fn detokenize_bytes(&self, tokens: &[i32]) -> Result<Vec<u8>> {
        let n = to_i32(tokens.len(), "n_tokens")?;
        self.text_call(|buf, cap, len| unsafe {
            sys::entmtp_detokenize(self.raw.as_ptr(), tokens.as_ptr(), n, buf, cap, len)
        })
    }

    /// Tokens -> text (invalid UTF-8 replaced by U+FFFD).
    pub fn detokenize(&self, tokens: &[i32]) -> Result<String> {
        Ok(String::from_utf8_lossy(&self.detokenize_bytes(tokens)?).into_owned())
    }

    /// A single-turn chat prompt in the model's chat template.
    pub fn chat_prompt(&self, user_message: &str, system_prompt: Option<&str>) -> Result<String> {
        let user = cstring(user_message, "user_message")?;
        let system = system_prompt.map(|s| cstring(s, "system_prompt")).transpose()?;
        let sys_ptr = system.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        let bytes = self.text_call(|buf, cap, len| unsafe {
            sys::entmtp_chat_prompt(self.raw.as_ptr(), sys_ptr, user.as_ptr(), buf, cap, len)
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A conversation in the model's chat template: `(role, content)` turns,
    /// role "system" (first only), "user" or "assistant", the last the user's.
    pub fn chat_prompt_messages(&self, messages: &[(&str, &str)]) -> Result<String> {
        let mut owned = Vec::with_capacity(2 * messages.len());
        for (i, (role, content)) in messages.iter().enumerate() {
            owned.push(cstring(role, &format!("messages[{i}].role"))?);
            owned.push(cstring(content, &format!("messages[{i}].content"))?);
        }
        let roles: Vec<_> = owned.iter().step_by(2).map(|s| s.as_ptr()).collect();
        let contents: Vec<_> = owned.iter().skip(1).step_by(2).map(|s| s.as_ptr()).collect();
        let n = to_i32(messages.len(), "chat_prompt_messages: the number of messages")?;
        let bytes = self.text_call(|buf, cap, len| unsafe {
            sys::entmtp_chat_prompt_messages(self.raw.as_ptr(), roles.as_ptr(), contents.as_ptr(), n, buf, cap, len)
        })?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// True when `token` ends generation (eos, eot, im_end...).
    pub fn is_eog(&self, token: i32) -> bool {
        unsafe { sys::entmtp_token_is_eog(self.raw.as_ptr(), token) != 0 }
    }

    /// Load MTP heads for this model (`Heads::load`).
    pub fn load_heads(&self, path: impl AsRef<Path>) -> Result<Heads<'_>> {
        Heads::load(self, path)
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: owned handle; every Heads and Session borrowing it is gone.
        unsafe { sys::entmtp_model_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.info();
        f.debug_struct("Model")
            .field("name", &i.name)
            .field("vocab_size", &i.vocab_size)
            .field("n_layers", &i.n_layers)
            .field("backend", &i.backend)
            .finish()
    }
}

/// The kind of MTP heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeadsKind {
    /// Independent ResBlock heads on the last hidden state.
    Medusa,
    /// Head d also sees the tokens drafted before it.
    Hydra,
    /// EAGLE-3: one decoder layer over the target's low, mid and high hidden
    /// states, drafting autoregressively.
    Eagle3,
}

/// `entmtp_heads_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadsInfo {
    /// Medusa or Hydra.
    pub kind: HeadsKind,
    /// Drafting depth the heads support.
    pub n_heads: usize,
    /// ResBlocks per head.
    pub n_layers: usize,
    /// The base model's lm_head is reused.
    pub shares_lm_head: bool,
}

/// Medusa or Hydra heads, borrowing the model they were loaded for.
pub struct Heads<'m> {
    raw: NonNull<sys::entmtp_heads>,
    model: &'m Model,
}

// SAFETY: loaded heads are immutable weights, read by sessions on any thread.
unsafe impl Send for Heads<'_> {}
unsafe impl Sync for Heads<'_> {}

impl<'m> Heads<'m> {
    /// Load heads (safetensors, Medusa or Hydra layout) for `model`.
    pub fn load(model: &'m Model, path: impl AsRef<Path>) -> Result<Heads<'m>> {
        let cpath = path_cstring(path.as_ref())?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::entmtp_heads_load(model.raw.as_ptr(), cpath.as_ptr(), &mut out) })?;
        NonNull::new(out)
            .map(|raw| Heads { raw, model })
            .ok_or_else(|| Error::new(Status::State, "entmtp_heads_load returned no heads"))
    }

    /// The model the heads belong to.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// The raw handle (owned by these Heads).
    pub fn as_ptr(&self) -> *mut sys::entmtp_heads {
        self.raw.as_ptr()
    }

    /// `entmtp_heads_get_info`.
    pub fn info(&self) -> HeadsInfo {
        let mut i = versioned!(sys::entmtp_heads_info);
        let st = unsafe { sys::entmtp_heads_get_info(self.raw.as_ptr(), &mut i) };
        debug_assert_eq!(st, sys::ENTMTP_OK);
        HeadsInfo {
            kind: match i.kind {
                sys::ENTMTP_HEADS_HYDRA => HeadsKind::Hydra,
                sys::ENTMTP_HEADS_EAGLE3 => HeadsKind::Eagle3,
                _ => HeadsKind::Medusa,
            },
            n_heads: i.n_heads.max(0) as usize,
            n_layers: i.n_layers.max(0) as usize,
            shares_lm_head: i.shares_lm_head != 0,
        }
    }

    /// Drafting depth.
    pub fn n_heads(&self) -> usize {
        self.info().n_heads
    }
}

impl Drop for Heads<'_> {
    fn drop(&mut self) {
        unsafe { sys::entmtp_heads_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Heads<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Heads").field(&self.info()).finish()
    }
}
