//! Decoding sessions.
use std::ffi::c_void;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use crate::bank::Bank;
use crate::error::{callback_error, check, panic_message, Error, Pending, Result, Status};
use crate::model::{Heads, Model};
use crate::policy::{Features, Policy};
use crate::{defaults, sys, to_i32, versioned};

/// `entmtp_session_params`. `Default` is the library's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionOptions {
    /// Tokens the KV cache holds; 0 = min(4096, context).
    pub kv_capacity: usize,
    /// 0 = greedy (lossless with respect to greedy autoregressive decoding).
    pub temperature: f32,
    /// Typical acceptance hard threshold.
    pub epsilon: f32,
    /// Typical acceptance entropy factor.
    pub delta: f32,
    /// RNG seed for temperature > 0.
    pub seed: u64,
    /// accept_length_ema = d*ema + (1-d)*last.
    pub ema_decay: f32,
    /// `None` = the model's end-of-generation tokens; `Some(vec![])` = none.
    pub stop_tokens: Option<Vec<i32>>,
    /// Step costs from the bank only, never the clock: the same seed gives
    /// the same sampled text under every policy.
    pub reproducible: bool,
    /// Activation bits of prompt prefill: 16 (default) or 8 (faster prompt
    /// processing on AVX-512 VNNI CPUs, some fidelity lost; steps keep 16).
    pub prompt_activation_bits: i32,
    /// Activation bits of every step (AR and tree verify): 16 (default) or 8
    /// (llama.cpp's precision: faster steps on AVX-512 VNNI CPUs, some
    /// fidelity lost; greedy output equals greedy AR at the same setting).
    pub step_activation_bits: i32,
    /// KV cache element type: 0 the backend's default (F32 on the CPU, BF16
    /// on CUDA), 1 F32, 2 BF16 (K/V rounded to BF16: half the cache's memory;
    /// greedy output equals greedy AR at the same setting). Other values are
    /// refused naming `kv_type`.
    pub kv_type: i32,
}

impl Default for SessionOptions {
    fn default() -> Self {
        let p = defaults!(sys::entmtp_session_params, sys::entmtp_session_params_init);
        SessionOptions {
            kv_capacity: p.kv_capacity.max(0) as usize,
            temperature: p.temperature,
            epsilon: p.epsilon,
            delta: p.delta,
            seed: p.seed,
            ema_decay: p.ema_decay,
            stop_tokens: if p.n_stop_tokens < 0 { None } else { Some(Vec::new()) },
            reproducible: p.reproducible != 0,
            prompt_activation_bits: p.prompt_activation_bits,
            step_activation_bits: p.step_activation_bits,
            kv_type: p.kv_type,
        }
    }
}

impl SessionOptions {
    /// The C params; `stop_tokens` points into `self` (the library copies it
    /// and checks its count against `entmtp_limit`).
    fn to_c(&self) -> Result<sys::entmtp_session_params> {
        let mut p = defaults!(sys::entmtp_session_params, sys::entmtp_session_params_init);
        p.kv_capacity = to_i32(self.kv_capacity, "kv_capacity")?;
        p.temperature = self.temperature;
        p.epsilon = self.epsilon;
        p.delta = self.delta;
        p.seed = self.seed;
        p.ema_decay = self.ema_decay;
        p.reproducible = i32::from(self.reproducible);
        p.prompt_activation_bits = self.prompt_activation_bits;
        p.step_activation_bits = self.step_activation_bits;
        p.kv_type = self.kv_type;
        match &self.stop_tokens {
            None => p.n_stop_tokens = -1,
            Some(t) => {
                p.n_stop_tokens = to_i32(t.len(), "stop_tokens")?;
                p.stop_tokens = if t.is_empty() { std::ptr::null() } else { t.as_ptr() };
            }
        }
        Ok(p)
    }
}

/// What one step produced (`entmtp_step_result`, tokens copied).
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// Emitted tokens.
    pub tokens: Vec<i32>,
    /// Tree used; `None` for a plain autoregressive step.
    pub tree_index: Option<usize>,
    /// Nodes verified.
    pub n_nodes: usize,
    /// Tokens the tree accepted before truncation (>= 1).
    pub accept_length: usize,
    /// Path value the policy saw.
    pub s: f32,
    /// Base top-1 probability.
    pub p0: f32,
    /// Base entropy (nats).
    pub entropy: f32,
    /// Wall time of the step.
    pub seconds: f64,
    /// A stop token was emitted (it is the last token).
    pub stopped: bool,
}

impl StepResult {
    fn from_c(r: &sys::entmtp_step_result) -> StepResult {
        let n = r.n_tokens.max(0) as usize;
        let tokens = if n == 0 || r.tokens.is_null() {
            Vec::new()
        } else {
            // SAFETY: n tokens, valid until the next call on the session.
            unsafe { std::slice::from_raw_parts(r.tokens, n) }.to_vec()
        };
        StepResult {
            tokens,
            tree_index: if r.tree_index >= 0 {
                Some(r.tree_index as usize)
            } else {
                None
            },
            n_nodes: r.n_nodes.max(0) as usize,
            accept_length: r.accept_length.max(0) as usize,
            s: r.s,
            p0: r.p0,
            entropy: r.entropy,
            seconds: r.seconds,
            stopped: r.stopped != 0,
        }
    }
}

/// `entmtp_session_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[allow(missing_docs)]
pub struct SessionStats {
    pub n_prompt_tokens: u64,
    /// Tokens emitted by steps.
    pub n_generated: u64,
    pub n_steps: u64,
    /// n_generated / n_steps.
    pub mean_accept_length: f64,
    pub prefill_seconds: f64,
    pub decode_seconds: f64,
    /// n_generated / decode_seconds.
    pub tokens_per_second: f64,
    /// n_prompt_tokens / prefill_seconds.
    pub prefill_tokens_per_second: f64,
    /// Steps that paid one-time costs (a tree's first use; with CUDA step
    /// graphs its first two), left out of `warm_tokens_per_second`.
    pub n_warmup_steps: u64,
    pub warmup_seconds: f64,
    /// Tokens of the other steps.
    pub n_warm_generated: u64,
    /// The decode rate without the warm-up steps.
    pub warm_tokens_per_second: f64,
    /// The warm rate over plain AR's (0 when unknown).
    pub speedup: f64,
    /// The AR rate the speedup is relative to.
    pub ar_tokens_per_second: f64,
    /// Where `speedup` comes from.
    pub speedup_source: SpeedupSource,
}

/// `entmtp_speedup_source`: where `SessionStats::speedup` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpeedupSource {
    /// Not known: an AR session, a bank without step costs, no steps yet.
    #[default]
    None,
    /// From the bank's per-tree step costs.
    Estimated,
    /// From an AR run of the same prompt (`Session::measure_ar`).
    Measured,
}

/// A decoding session. It borrows its model, heads and bank (shared) and
/// its policy (exclusively) for `'a`, so none of them can be dropped, and the
/// bank not modified, while the session exists.
pub struct Session<'a> {
    raw: NonNull<sys::entmtp_session>,
    model: &'a Model,
    heads: Option<&'a Heads<'a>>,
    bank: Option<&'a Bank>,
    policy: Option<&'a mut Policy>,
}

// SAFETY: a session is a single-threaded object that may move between
// threads; what it borrows is Sync (model, heads, bank) or borrowed
// exclusively and Send (policy).
unsafe impl Send for Session<'_> {}

type TokenFn<'f> = &'f mut dyn FnMut(&[i32]) -> bool;

struct TokenState<'f> {
    f: Option<TokenFn<'f>>,
    tokens: Vec<i32>,
    pending: Option<Pending>,
}

unsafe extern "C" fn tokens_trampoline(tokens: *const i32, n: i32, user_data: *mut c_void) -> c_int {
    // SAFETY: user_data is the TokenState of the running generate call.
    let state = &mut *(user_data as *mut TokenState);
    let batch: &[i32] = if n > 0 && !tokens.is_null() {
        std::slice::from_raw_parts(tokens, n as usize)
    } else {
        &[]
    };
    state.tokens.extend_from_slice(batch);
    let Some(f) = state.f.as_mut() else { return 0 };
    match catch_unwind(AssertUnwindSafe(|| f(batch))) {
        Ok(stop) => c_int::from(stop),
        Err(p) => {
            state.pending = Some(Pending::Panic(panic_message(p)));
            1
        }
    }
}

impl<'a> Session<'a> {
    /// A session with the default options. Without heads or a bank every
    /// step is plain autoregressive decoding.
    pub fn new(model: &'a Model, heads: Option<&'a Heads<'a>>, bank: Option<&'a Bank>) -> Result<Session<'a>> {
        Session::with_options(model, heads, bank, &SessionOptions::default())
    }

    /// A session with the given options.
    pub fn with_options(
        model: &'a Model,
        heads: Option<&'a Heads<'a>>,
        bank: Option<&'a Bank>,
        options: &SessionOptions,
    ) -> Result<Session<'a>> {
        let p = options.to_c()?;
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::entmtp_session_create(
                model.as_ptr(),
                heads.map_or(ptr::null_mut(), |h| h.as_ptr()),
                bank.map_or(ptr::null_mut(), |b| b.as_ptr()),
                &p,
                &mut out,
            )
        })?;
        let raw = NonNull::new(out).ok_or_else(|| Error::new(Status::State, "no session returned"))?;
        Ok(Session {
            raw,
            model,
            heads,
            bank,
            policy: None,
        })
    }

    /// The model.
    pub fn model(&self) -> &'a Model {
        self.model
    }
    /// The heads, if any.
    pub fn heads(&self) -> Option<&'a Heads<'a>> {
        self.heads
    }
    /// The bank, if any.
    pub fn bank(&self) -> Option<&'a Bank> {
        self.bank
    }
    /// The attached policy, if any.
    pub fn policy(&self) -> Option<&Policy> {
        self.policy.as_deref()
    }

    /// The raw handle (owned by this Session).
    pub fn as_ptr(&self) -> *mut sys::entmtp_session {
        self.raw.as_ptr()
    }

    /// Attach a policy (validated against the bank, then reset), or `None`
    /// for the default static policy on tree 0.
    pub fn set_policy(&mut self, policy: Option<&'a mut Policy>) -> Result<()> {
        let st = unsafe {
            sys::entmtp_policy_set(
                self.raw.as_ptr(),
                policy.as_ref().map_or(ptr::null_mut(), |p| p.as_ptr()),
            )
        };
        if st != sys::ENTMTP_OK {
            return check(st);
        }
        self.policy = policy;
        self.finish(sys::ENTMTP_OK, Vec::new())
    }

    fn finish(&mut self, code: sys::entmtp_status, tokens: Vec<i32>) -> Result<()> {
        let r = match self.policy.as_mut() {
            Some(p) => p.finish(code, "the custom policy callback"),
            None => check(code),
        };
        r.map_err(|e| e.with_tokens(tokens))
    }

    /// Append prompt tokens and run them through the model.
    pub fn prefill(&mut self, tokens: &[i32]) -> Result<()> {
        check(unsafe {
            sys::entmtp_session_prefill(self.raw.as_ptr(), tokens.as_ptr(), to_i32(tokens.len(), "n_tokens")?)
        })
    }

    fn run_step(&mut self, ar: bool, max_tokens: usize) -> Result<StepResult> {
        let mut r = versioned!(sys::entmtp_step_result);
        let st = unsafe {
            if ar {
                sys::entmtp_step_ar(self.raw.as_ptr(), &mut r)
            } else {
                sys::entmtp_step(self.raw.as_ptr(), to_i32(max_tokens, "max_tokens")?, &mut r)
            }
        };
        let res = StepResult::from_c(&r);
        self.finish(st, res.tokens.clone())?;
        Ok(res)
    }

    /// One draft-verify-accept step emitting at most `max_tokens` tokens (0:
    /// no limit). On `Status::KvFull` the tokens that fit were committed and
    /// are in [`Error::tokens`].
    pub fn step(&mut self, max_tokens: usize) -> Result<StepResult> {
        self.run_step(false, max_tokens)
    }

    /// One plain autoregressive step (one token).
    pub fn step_ar(&mut self) -> Result<StepResult> {
        self.run_step(true, 1)
    }

    /// Step until a stop token, `max_tokens` tokens or a full KV cache;
    /// returns the emitted tokens. An error carries the tokens emitted before
    /// it in [`Error::tokens`].
    pub fn generate(&mut self, max_tokens: usize, autoregressive: bool) -> Result<Vec<i32>> {
        self.generate_impl(max_tokens, autoregressive, None)
    }

    /// Like [`Session::generate`], calling `on_tokens(batch)` for each emitted
    /// batch; returning `true` stops. A panic in it stops generation and is
    /// returned as a `Status::Callback` error.
    pub fn generate_with<F: FnMut(&[i32]) -> bool>(
        &mut self,
        max_tokens: usize,
        autoregressive: bool,
        mut on_tokens: F,
    ) -> Result<Vec<i32>> {
        self.generate_impl(max_tokens, autoregressive, Some(&mut on_tokens))
    }

    fn generate_impl(&mut self, max_tokens: usize, autoregressive: bool, f: Option<TokenFn<'_>>) -> Result<Vec<i32>> {
        let mut state = TokenState {
            f,
            tokens: Vec::new(),
            pending: None,
        };
        let st = unsafe {
            sys::entmtp_generate(
                self.raw.as_ptr(),
                to_i32(max_tokens, "max_tokens")?,
                c_int::from(autoregressive),
                Some(tokens_trampoline),
                &mut state as *mut TokenState as *mut c_void,
            )
        };
        let TokenState { tokens, pending, .. } = state;
        // on_tokens asking to stop is not an error
        let st = if st == sys::ENTMTP_STOPPED { sys::ENTMTP_OK } else { st };
        if let Some(p) = pending {
            if let Some(pol) = self.policy.as_mut() {
                pol.take_pending(); // the on_tokens failure wins
            }
            return Err(callback_error(st, p, "on_tokens").with_tokens(tokens));
        }
        self.finish(st, tokens.clone())?;
        Ok(tokens)
    }

    /// All tokens of the session (prompt then generated).
    pub fn tokens(&self) -> &[i32] {
        let mut p: *const i32 = ptr::null();
        let mut n = 0i32;
        let st = unsafe { sys::entmtp_session_tokens(self.raw.as_ptr(), &mut p, &mut n) };
        if st != sys::ENTMTP_OK || p.is_null() || n <= 0 {
            return &[];
        }
        // SAFETY: valid until the next call that changes the session, which needs &mut self.
        unsafe { std::slice::from_raw_parts(p, n as usize) }
    }

    /// Session statistics.
    pub fn stats(&self) -> SessionStats {
        let mut s = versioned!(sys::entmtp_session_stats);
        let st = unsafe { sys::entmtp_session_get_stats(self.raw.as_ptr(), &mut s) };
        debug_assert_eq!(st, sys::ENTMTP_OK);
        SessionStats {
            n_prompt_tokens: s.n_prompt_tokens.max(0) as u64,
            n_generated: s.n_generated.max(0) as u64,
            n_steps: s.n_steps.max(0) as u64,
            mean_accept_length: s.mean_accept_length,
            prefill_seconds: s.prefill_seconds,
            decode_seconds: s.decode_seconds,
            tokens_per_second: s.tokens_per_second,
            prefill_tokens_per_second: s.prefill_tokens_per_second,
            n_warmup_steps: s.n_warmup_steps.max(0) as u64,
            warmup_seconds: s.warmup_seconds,
            n_warm_generated: s.n_warm_generated.max(0) as u64,
            warm_tokens_per_second: s.warm_tokens_per_second,
            speedup: s.speedup,
            ar_tokens_per_second: s.ar_tokens_per_second,
            speedup_source: match s.speedup_source {
                sys::ENTMTP_SPEEDUP_ESTIMATED => SpeedupSource::Estimated,
                sys::ENTMTP_SPEEDUP_MEASURED => SpeedupSource::Measured,
                _ => SpeedupSource::None,
            },
        }
    }

    /// Times plain AR on the session's prompt in a scratch session
    /// (`entmtp_session_measure_ar`: `n_tokens` steps, 0 = as many as this
    /// session generated) and returns the stats, now with a measured speedup.
    /// The session's tokens are not changed; `Status::State` before its first step.
    pub fn measure_ar(&mut self, n_tokens: usize) -> Result<SessionStats> {
        let n = i32::try_from(n_tokens).unwrap_or(i32::MAX);
        check(unsafe { sys::entmtp_session_measure_ar(self.raw.as_ptr(), n) })?;
        Ok(self.stats())
    }

    /// Steps that used tree `index` since the last reset.
    pub fn tree_usage(&self, index: usize) -> u64 {
        match i32::try_from(index) {
            Ok(i) => unsafe { sys::entmtp_session_tree_usage(self.raw.as_ptr(), i) }.max(0) as u64,
            Err(_) => 0,
        }
    }

    /// Tree usage for every tree of the bank, in index order.
    pub fn tree_usages(&self) -> Vec<u64> {
        let n = self.bank.map_or(0, |b| b.len());
        (0..n).map(|k| self.tree_usage(k)).collect()
    }

    /// Forget all tokens and KV; reset the attached policy and statistics.
    pub fn reset(&mut self) -> Result<()> {
        unsafe { sys::entmtp_session_reset(self.raw.as_ptr()) };
        self.finish(sys::ENTMTP_OK, Vec::new())
    }

    /// Base-model logits for the next token (experimental in the C API).
    pub fn logits(&self) -> Result<&[f32]> {
        let mut p: *const f32 = ptr::null();
        let mut n = 0i32;
        check(unsafe { sys::entmtp_session_logits(self.raw.as_ptr(), &mut p, &mut n) })?;
        if p.is_null() || n <= 0 {
            return Ok(&[]);
        }
        // SAFETY: owned by the session, unchanged while &self is held.
        Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
    }

    /// The features the policy saw at the last step (experimental).
    pub fn features(&mut self) -> Result<Features> {
        let mut f = versioned!(sys::entmtp_features);
        check(unsafe { sys::entmtp_session_features(self.raw.as_ptr(), &mut f) })?;
        Ok(Features::from_c(&f))
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // SAFETY: owned handle; the borrowed model, heads, bank and policy outlive it.
        unsafe { sys::entmtp_session_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("tokens", &self.tokens().len())
            .field("speculative", &(self.heads.is_some() && self.bank.is_some()))
            .finish()
    }
}
