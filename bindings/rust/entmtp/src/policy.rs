//! Tree-scheduling policies: static, ladder, hysteresis, UCB and custom
//! (Rust closures or [`CustomPolicy`] implementations).
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use crate::bank::Bank;
use crate::error::{callback_error, check, panic_message, Error, Pending, Result, Status};
use crate::{cstring, defaults, limit, sys, to_i32, versioned, Limit};

/// The kind of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    /// Always one tree.
    Static,
    /// K-1 ascending thresholds on s pick one of K trees.
    Ladder,
    /// EntMTP-tau: conservative/aggressive with tau_off <= tau_on.
    Hysteresis,
    /// UCB1 bandit over the whole bank.
    Ucb,
    /// The caller's callbacks.
    Custom,
    /// Expected accepted tokens per expected second, over the bank's trees.
    Throughput,
    /// The same over node budgets, with a tree built each step from the heads.
    Dynamic,
}

impl PolicyKind {
    /// Every kind, in C order.
    pub const ALL: [PolicyKind; 7] = [
        PolicyKind::Static,
        PolicyKind::Ladder,
        PolicyKind::Hysteresis,
        PolicyKind::Ucb,
        PolicyKind::Custom,
        PolicyKind::Throughput,
        PolicyKind::Dynamic,
    ];

    pub(crate) fn code(self) -> sys::entmtp_policy_kind {
        match self {
            PolicyKind::Static => sys::ENTMTP_POLICY_STATIC,
            PolicyKind::Ladder => sys::ENTMTP_POLICY_LADDER,
            PolicyKind::Hysteresis => sys::ENTMTP_POLICY_HYSTERESIS,
            PolicyKind::Ucb => sys::ENTMTP_POLICY_UCB,
            PolicyKind::Custom => sys::ENTMTP_POLICY_CUSTOM,
            PolicyKind::Throughput => sys::ENTMTP_POLICY_THROUGHPUT,
            PolicyKind::Dynamic => sys::ENTMTP_POLICY_DYNAMIC,
        }
    }

    pub(crate) fn from_code(c: sys::entmtp_policy_kind) -> Option<PolicyKind> {
        PolicyKind::ALL.iter().copied().find(|k| k.code() == c)
    }

    /// "static", "ladder", "hysteresis", "ucb", "custom", "throughput" or
    /// "dynamic" (from the library).
    pub fn name(self) -> &'static str {
        let p = unsafe { sys::entmtp_policy_kind_name(self.code()) };
        if p.is_null() {
            "?"
        } else {
            unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("?")
        }
    }

    /// The kind called `name` (`Status::NotFound` if none).
    pub fn from_name(name: &str) -> Result<PolicyKind> {
        let c = cstring(name, "policy kind")?;
        let mut k: sys::entmtp_policy_kind = 0;
        check(unsafe { sys::entmtp_policy_kind_from_name(c.as_ptr(), &mut k) })?;
        PolicyKind::from_code(k).ok_or_else(|| Error::new(Status::Unknown(k), format!("policy kind {k}")))
    }
}

/// `entmtp_features`: what a policy sees at each step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Features {
    /// Base model top-1 probability.
    pub p0: f32,
    /// Top-1 probability of head d (one entry per head).
    pub head_p: Vec<f32>,
    /// g_d = p0 * p1 * ... * pd (as many entries as `head_p`).
    pub g: Vec<f32>,
    /// max(p0, g_1..g_D): the value thresholds apply to.
    pub s: f32,
    /// Base distribution entropy, nats.
    pub entropy: f32,
    /// Tokens emitted by the previous step (0 at start).
    pub last_accept_length: i32,
    /// Exponential moving average of it.
    pub accept_length_ema: f32,
    /// Steps taken in this session so far.
    pub step: i64,
    /// Every rank of every head: `head_topk_p[d][r]` is head d's rank-r
    /// probability, ranks in descending order (`head_topk_p[d][0] ==
    /// head_p[d]`); empty without heads. One row per head, rows of equal length.
    pub head_topk_p: Vec<Vec<f32>>,
    /// The bank's tree count (a session sets it even without an outlook).
    pub n_trees: usize,
    /// Per bank tree: tokens a step with it is expected to emit (>= 1).
    /// `None` when the session shows no outlook (static, ladder, hysteresis
    /// and UCB policies); custom, throughput and dynamic policies see it.
    pub expected_accept: Option<Vec<f32>>,
    /// Per bank tree: seconds a step with it is expected to take (with
    /// `expected_accept`).
    pub expected_seconds: Option<Vec<f64>>,
}

/// `struct_size` of an `entmtp_features` that carries every field.
fn features_full() -> usize {
    let f = std::mem::MaybeUninit::<sys::entmtp_features>::uninit();
    let base = f.as_ptr();
    // SAFETY: the address of a field, nothing read.
    let last = unsafe { ptr::addr_of!((*base).expected_seconds) };
    last as usize - base as usize + std::mem::size_of::<*const f64>()
}

impl Features {
    /// Features with only `s` set.
    pub fn with_s(s: f32) -> Features {
        Features {
            s,
            ..Features::default()
        }
    }

    /// Heads the features describe.
    pub fn n_heads(&self) -> usize {
        self.head_p.len()
    }

    /// The head probabilities.
    pub fn head_p(&self) -> &[f32] {
        &self.head_p
    }

    /// The path values g.
    pub fn g(&self) -> &[f32] {
        &self.g
    }

    /// Ranks per head in `head_topk_p` (0 without them).
    pub fn topk(&self) -> usize {
        self.head_topk_p.first().map_or(0, |r| r.len())
    }

    /// Head `d`'s top-k probabilities in rank order (empty for a head the
    /// features do not have).
    pub fn head_topk(&self, d: usize) -> &[f32] {
        self.head_topk_p.get(d).map_or(&[], |r| r.as_slice())
    }

    /// Tree `k`'s expected accept length and step seconds, when the
    /// features carry the outlook and the bank has tree `k`.
    pub fn outlook(&self, k: usize) -> Option<(f32, f64)> {
        let a = self.expected_accept.as_ref()?.get(k)?;
        let t = self.expected_seconds.as_ref()?.get(k)?;
        Some((*a, *t))
    }

    pub(crate) fn from_c(f: &sys::entmtp_features) -> Features {
        let n = f.n_heads.max(0) as usize;
        let copy = |p: *const f32| {
            if n == 0 || p.is_null() {
                Vec::new()
            } else {
                // SAFETY: the library's features hold n_heads values at each array.
                unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
            }
        };
        let mut out = Features {
            p0: f.p0,
            head_p: copy(f.head_p),
            g: copy(f.g),
            s: f.s,
            entropy: f.entropy,
            last_accept_length: f.last_accept_length,
            accept_length_ema: f.accept_length_ema,
            step: f.step,
            ..Features::default()
        };
        // the appended fields, only when the library that filled the struct has them
        if f.struct_size >= features_full() {
            let k = (f.topk.max(0) as usize).min(limit(Limit::MaxTopk));
            if n > 0 && k > 0 && !f.head_topk_p.is_null() {
                // SAFETY: n_heads rows of topk values.
                let flat = unsafe { std::slice::from_raw_parts(f.head_topk_p, n * k) };
                out.head_topk_p = flat.chunks(k).map(|r| r.to_vec()).collect();
            }
            out.n_trees = f.n_trees.max(0) as usize;
            if out.n_trees > 0 && !f.expected_accept.is_null() && !f.expected_seconds.is_null() {
                // SAFETY: n_trees values each.
                unsafe {
                    out.expected_accept = Some(std::slice::from_raw_parts(f.expected_accept, out.n_trees).to_vec());
                    out.expected_seconds = Some(std::slice::from_raw_parts(f.expected_seconds, out.n_trees).to_vec());
                }
            }
        }
        out
    }

    /// The C struct, pointing into `self`'s vectors and into the returned
    /// flat copy of `head_topk_p` (valid while both are).
    fn to_c(&self) -> Result<(sys::entmtp_features, Vec<f32>)> {
        let bad = |msg: String| Err(Error::new(Status::InvalidArgument, format!("features: {msg}")));
        let max = limit(Limit::MaxHeads);
        if self.head_p.len() > max || self.g.len() != self.head_p.len() {
            return bad(format!(
                "{} head_p and {} g values; they need the same count, at most {max}",
                self.head_p.len(),
                self.g.len()
            ));
        }
        let k = self.topk();
        if !self.head_topk_p.is_empty()
            && (self.head_topk_p.len() != self.head_p.len()
                || self.head_topk_p.iter().any(|r| r.len() != k)
                || k == 0
                || k > limit(Limit::MaxTopk))
        {
            return bad(format!(
                "head_topk_p needs one row per head ({}), each of the same length 1..{}",
                self.head_p.len(),
                limit(Limit::MaxTopk)
            ));
        }
        let mut n_trees = self.n_trees;
        match (&self.expected_accept, &self.expected_seconds) {
            (None, None) => {}
            (Some(a), Some(t)) if a.len() == t.len() && (n_trees == 0 || n_trees == a.len()) => n_trees = a.len(),
            (Some(a), Some(t)) => {
                return bad(format!(
                    "expected_accept ({}), expected_seconds ({}) and n_trees ({n_trees}) need the same count",
                    a.len(),
                    t.len()
                ))
            }
            _ => return bad("expected_accept and expected_seconds go together (both or neither)".into()),
        }
        let flat: Vec<f32> = self.head_topk_p.iter().flatten().copied().collect();
        let mut f = versioned!(sys::entmtp_features);
        f.p0 = self.p0;
        f.n_heads = self.head_p.len() as i32;
        f.head_p = if self.head_p.is_empty() { std::ptr::null() } else { self.head_p.as_ptr() };
        f.g = if self.g.is_empty() { std::ptr::null() } else { self.g.as_ptr() };
        f.s = self.s;
        f.entropy = self.entropy;
        f.last_accept_length = self.last_accept_length;
        f.accept_length_ema = self.accept_length_ema;
        f.step = self.step;
        f.topk = k as i32;
        f.head_topk_p = if flat.is_empty() { std::ptr::null() } else { flat.as_ptr() };
        f.n_trees = to_i32(n_trees, "n_trees")?;
        if let (Some(a), Some(t)) = (&self.expected_accept, &self.expected_seconds) {
            f.expected_accept = a.as_ptr();
            f.expected_seconds = t.as_ptr();
        }
        Ok((f, flat))
    }
}

/// `entmtp_outcome`: what a step produced, shown to `observe`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Outcome {
    /// Tree used.
    pub tree_index: usize,
    /// Its node count (root included).
    pub n_nodes: usize,
    /// Its depth (gamma in the UCB reward).
    pub draft_length: usize,
    /// Tokens emitted, root included (>= 1).
    pub accept_length: usize,
    /// Wall time of the step.
    pub seconds: f64,
}

impl Outcome {
    /// An outcome with only the tree and the accept length set.
    pub fn new(tree_index: usize, accept_length: usize) -> Outcome {
        Outcome {
            tree_index,
            accept_length,
            ..Outcome::default()
        }
    }

    fn from_c(o: &sys::entmtp_outcome) -> Outcome {
        Outcome {
            tree_index: o.tree_index.max(0) as usize,
            n_nodes: o.n_nodes.max(0) as usize,
            draft_length: o.draft_length.max(0) as usize,
            accept_length: o.accept_length.max(0) as usize,
            seconds: o.seconds,
        }
    }

    fn to_c(self) -> Result<sys::entmtp_outcome> {
        let mut o = versioned!(sys::entmtp_outcome);
        o.tree_index = to_i32(self.tree_index, "tree_index")?;
        o.n_nodes = to_i32(self.n_nodes, "n_nodes")?;
        o.draft_length = to_i32(self.draft_length, "draft_length")?;
        o.accept_length = to_i32(self.accept_length, "accept_length")?;
        o.seconds = self.seconds;
        Ok(o)
    }
}

/// A policy implemented in Rust. `select` returns the tree for the next
/// step; an `Err` (or a panic) fails the step with `Status::Callback`, the
/// error being the `source()` of the returned [`Error`].
pub trait CustomPolicy {
    /// The tree for the next step, in `0..n_trees`.
    fn select(
        &mut self,
        features: &Features,
        n_trees: usize,
    ) -> std::result::Result<usize, Box<dyn std::error::Error + Send + Sync>>;
    /// What the step produced (default: nothing).
    fn observe(&mut self, _outcome: &Outcome) {}
    /// The session was reset or the policy attached (default: nothing).
    fn reset(&mut self) {}
}

struct FnPolicy<F>(F);

impl<F: FnMut(&Features, usize) -> usize> CustomPolicy for FnPolicy<F> {
    fn select(
        &mut self,
        features: &Features,
        n_trees: usize,
    ) -> std::result::Result<usize, Box<dyn std::error::Error + Send + Sync>> {
        Ok((self.0)(features, n_trees))
    }
}

/// The trait object behind `user_data`, and what a callback left behind.
pub(crate) struct Callbacks {
    policy: Box<dyn CustomPolicy + Send>,
    pending: Option<Pending>,
}

unsafe fn callbacks<'a>(user_data: *mut c_void) -> &'a mut Callbacks {
    // SAFETY (callers): user_data is the Box<Callbacks> owned by the Policy
    // whose C object is calling; no other reference to it is live during a call.
    &mut *(user_data as *mut Callbacks)
}

unsafe extern "C" fn select_trampoline(
    user_data: *mut c_void,
    features: *const sys::entmtp_features,
    n_trees: i32,
    out_index: *mut i32,
) -> sys::entmtp_status {
    let cb = callbacks(user_data);
    let f = Features::from_c(&*features);
    let r = catch_unwind(AssertUnwindSafe(|| cb.policy.select(&f, n_trees.max(0) as usize)));
    match r {
        Ok(Ok(k)) => match i32::try_from(k) {
            Ok(k) => {
                *out_index = k;
                sys::ENTMTP_OK
            }
            Err(_) => {
                cb.pending = Some(Pending::Failed(
                    format!("returned tree {k}, which does not fit int32_t").into(),
                ));
                sys::ENTMTP_ERR_CALLBACK
            }
        },
        Ok(Err(e)) => {
            cb.pending = Some(Pending::Failed(e));
            sys::ENTMTP_ERR_CALLBACK
        }
        Err(p) => {
            cb.pending = Some(Pending::Panic(panic_message(p)));
            sys::ENTMTP_ERR_CALLBACK
        }
    }
}

unsafe extern "C" fn observe_trampoline(user_data: *mut c_void, outcome: *const sys::entmtp_outcome) {
    let cb = callbacks(user_data);
    let o = Outcome::from_c(&*outcome);
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| cb.policy.observe(&o))) {
        cb.pending.get_or_insert(Pending::Panic(panic_message(p)));
    }
}

unsafe extern "C" fn reset_trampoline(user_data: *mut c_void) {
    let cb = callbacks(user_data);
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| cb.policy.reset())) {
        cb.pending.get_or_insert(Pending::Panic(panic_message(p)));
    }
}

/// A tree-scheduling policy. Attach it to a session with
/// [`crate::Session::set_policy`], which borrows it exclusively for the
/// session's lifetime.
pub struct Policy {
    raw: NonNull<sys::entmtp_policy>,
    config: sys::entmtp_policy_config, // its arrays point into the vectors below
    thresholds: Vec<f32>,
    ladder_trees: Vec<i32>,
    callbacks: *mut Callbacks, // Box::into_raw; null unless custom
}

// SAFETY: a policy is a single-threaded object; moving it to another thread
// is fine (custom callbacks are required to be Send). It is not Sync.
unsafe impl Send for Policy {}

impl Policy {
    fn create(config: sys::entmtp_policy_config, callbacks: *mut Callbacks) -> Result<Policy> {
        Policy::create_with_arrays(config, Vec::new(), Vec::new(), callbacks)
    }

    /// Create from `config` with a ladder's arrays; the config kept by the
    /// Policy points into its own copies (a Vec's buffer does not move).
    fn create_with_arrays(
        mut config: sys::entmtp_policy_config,
        thresholds: Vec<f32>,
        ladder_trees: Vec<i32>,
        callbacks: *mut Callbacks,
    ) -> Result<Policy> {
        config.thresholds = if thresholds.is_empty() { ptr::null() } else { thresholds.as_ptr() };
        config.ladder_trees = if ladder_trees.is_empty() { ptr::null() } else { ladder_trees.as_ptr() };
        let mut out = ptr::null_mut();
        let st = unsafe { sys::entmtp_policy_create(&config, &mut out) };
        if st != sys::ENTMTP_OK || out.is_null() {
            if !callbacks.is_null() {
                drop(unsafe { Box::from_raw(callbacks) });
            }
            check(st)?;
            return Err(Error::new(Status::State, "entmtp_policy_create returned no policy"));
        }
        Ok(Policy {
            raw: NonNull::new(out).unwrap(),
            config,
            thresholds,
            ladder_trees,
            callbacks,
        })
    }

    fn default_config(kind: PolicyKind) -> sys::entmtp_policy_config {
        defaults!(sys::entmtp_policy_config, sys::entmtp_policy_config_init, kind.code())
    }

    /// Always tree `tree`.
    pub fn static_tree(tree: usize) -> Result<Policy> {
        let mut c = Policy::default_config(PolicyKind::Static);
        c.static_tree = to_i32(tree, "static_tree")?;
        Policy::create(c, ptr::null_mut())
    }

    /// K-1 strictly ascending `thresholds` on s pick one of K trees: bin b =
    /// number of thresholds t with s > t; tree = `trees[b]` (default b).
    pub fn ladder(thresholds: &[f32], trees: Option<&[usize]>) -> Result<Policy> {
        let mut c = Policy::default_config(PolicyKind::Ladder);
        let max = limit(Limit::MaxLadder).saturating_sub(1);
        if thresholds.len() > max {
            return Err(Error::new(
                Status::InvalidConfig,
                format!("ladder: {} thresholds; at most {max} (entmtp_limit)", thresholds.len()),
            ));
        }
        c.n_thresholds = thresholds.len() as i32;
        let mut ladder_trees: Vec<i32> = (0..=thresholds.len() as i32).collect();
        if let Some(trees) = trees {
            if trees.len() != thresholds.len() + 1 {
                return Err(Error::new(
                    Status::InvalidConfig,
                    format!(
                        "ladder: {} thresholds need {} trees, got {}",
                        thresholds.len(),
                        thresholds.len() + 1,
                        trees.len()
                    ),
                ));
            }
            for (b, &t) in trees.iter().enumerate() {
                ladder_trees[b] = to_i32(t, "ladder tree")?;
            }
        }
        Policy::create_with_arrays(c, thresholds.to_vec(), ladder_trees, ptr::null_mut())
    }

    /// EntMTP-tau: tree 1 (aggressive) when s > tau_on, back to tree 0
    /// (conservative) when s <= tau_off.
    pub fn hysteresis(tau_on: f32, tau_off: f32) -> Result<Policy> {
        Policy::hysteresis_trees(tau_on, tau_off, 0, 1)
    }

    /// Hysteresis between the given conservative and aggressive trees.
    pub fn hysteresis_trees(tau_on: f32, tau_off: f32, conservative: usize, aggressive: usize) -> Result<Policy> {
        let mut c = Policy::default_config(PolicyKind::Hysteresis);
        c.tau_on = tau_on;
        c.tau_off = tau_off;
        c.conservative_tree = to_i32(conservative, "conservative_tree")?;
        c.aggressive_tree = to_i32(aggressive, "aggressive_tree")?;
        Policy::create(c, ptr::null_mut())
    }

    /// UCB1 over the whole bank: reward -(1 + length_penalty * draft_length) / accept_length.
    pub fn ucb(exploration: f32, length_penalty: f32) -> Result<Policy> {
        let mut c = Policy::default_config(PolicyKind::Ucb);
        c.ucb_exploration = exploration;
        c.ucb_length_penalty = length_penalty;
        Policy::create(c, ptr::null_mut())
    }

    /// Expected throughput: the tree with the most expected accepted tokens
    /// per expected step second (the session's outlook, or the features'
    /// `expected_accept` and `expected_seconds` when called directly).
    pub fn throughput() -> Result<Policy> {
        Policy::create(Policy::default_config(PolicyKind::Throughput), ptr::null_mut())
    }

    /// The throughput rule over node budgets, drafting each step the tree of
    /// that size built from the heads' probabilities.
    pub fn dynamic() -> Result<Policy> {
        Policy::create(Policy::default_config(PolicyKind::Dynamic), ptr::null_mut())
    }

    /// A policy whose select is a closure `(features, n_trees) -> tree`.
    pub fn custom<F>(select: F) -> Result<Policy>
    where
        F: FnMut(&Features, usize) -> usize + Send + 'static,
    {
        Policy::custom_with(FnPolicy(select))
    }

    /// A policy implemented by a [`CustomPolicy`].
    pub fn custom_with<P: CustomPolicy + Send + 'static>(policy: P) -> Result<Policy> {
        let mut c = Policy::default_config(PolicyKind::Custom);
        let cb = Box::into_raw(Box::new(Callbacks {
            policy: Box::new(policy),
            pending: None,
        }));
        c.select = Some(select_trampoline);
        c.observe = Some(observe_trampoline);
        c.reset = Some(reset_trampoline);
        c.user_data = cb as *mut c_void;
        Policy::create(c, cb)
    }

    /// The settings of `kind` stored in a bank file.
    pub fn from_bank(bank: &Bank, kind: PolicyKind) -> Result<Policy> {
        let mut c = versioned!(sys::entmtp_policy_config);
        check(unsafe { sys::entmtp_bank_policy_config(bank.as_ptr(), kind.code(), &mut c) })?;
        // copy the bank's arrays: the Policy must not point into the bank
        let n = c.n_thresholds.max(0) as usize;
        let (thresholds, ladder_trees) = if c.kind == sys::ENTMTP_POLICY_LADDER && !c.ladder_trees.is_null() {
            // SAFETY: a ladder config from the bank holds n thresholds and n + 1 trees.
            unsafe {
                let th = if n == 0 || c.thresholds.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(c.thresholds, n).to_vec()
                };
                (th, std::slice::from_raw_parts(c.ladder_trees, n + 1).to_vec())
            }
        } else {
            (Vec::new(), Vec::new())
        };
        Policy::create_with_arrays(c, thresholds, ladder_trees, ptr::null_mut())
    }

    pub(crate) fn config_ptr(&self) -> *const sys::entmtp_policy_config {
        &self.config
    }

    /// The raw handle (owned by this Policy).
    pub fn as_ptr(&self) -> *mut sys::entmtp_policy {
        self.raw.as_ptr()
    }

    /// The policy's kind.
    pub fn kind(&self) -> PolicyKind {
        PolicyKind::from_code(unsafe { sys::entmtp_policy_get_kind(self.raw.as_ptr()) }).unwrap_or(PolicyKind::Static)
    }

    /// The configuration it was created with (`entmtp_policy_config`; its
    /// arrays point into this Policy).
    pub fn config(&self) -> &sys::entmtp_policy_config {
        &self.config
    }

    /// A ladder's thresholds (empty for other kinds).
    pub fn thresholds(&self) -> &[f32] {
        &self.thresholds
    }

    /// A ladder's tree per bin (empty for other kinds).
    pub fn ladder_trees(&self) -> &[i32] {
        &self.ladder_trees
    }

    /// Check every tree index the policy can return against `n_trees`.
    pub fn validate(&self, n_trees: usize) -> Result<()> {
        check(unsafe { sys::entmtp_policy_validate(self.raw.as_ptr(), to_i32(n_trees, "n_trees")?) })
    }

    /// The error for a C call during which this policy's callbacks ran.
    pub(crate) fn finish(&mut self, code: sys::entmtp_status, what: &str) -> Result<()> {
        if let Some(p) = self.take_pending() {
            return Err(callback_error(code, p, what));
        }
        check(code)
    }

    pub(crate) fn take_pending(&mut self) -> Option<Pending> {
        if self.callbacks.is_null() {
            None
        } else {
            // SAFETY: owned box, no C call in progress.
            unsafe { (*self.callbacks).pending.take() }
        }
    }

    /// The tree for the next step.
    pub fn select(&mut self, features: &Features, n_trees: usize) -> Result<usize> {
        let (f, _ranks) = features.to_c()?;
        let mut k = -1i32;
        let st = unsafe { sys::entmtp_policy_select(self.raw.as_ptr(), &f, to_i32(n_trees, "n_trees")?, &mut k) };
        self.finish(st, "the custom policy's select callback")?;
        Ok(k as usize)
    }

    /// Report a step's outcome.
    pub fn observe(&mut self, outcome: &Outcome) -> Result<()> {
        let o = outcome.to_c()?;
        let st = unsafe { sys::entmtp_policy_observe(self.raw.as_ptr(), &o) };
        self.finish(st, "the custom policy's observe callback")
    }

    /// Reset the policy's state (hysteresis mode, UCB statistics, custom reset).
    pub fn reset(&mut self) -> Result<()> {
        unsafe { sys::entmtp_policy_reset(self.raw.as_ptr()) };
        self.finish(sys::ENTMTP_OK, "the custom policy's reset callback")
    }
}

impl Drop for Policy {
    fn drop(&mut self) {
        // SAFETY: no session can still use it: sessions borrow their policy.
        unsafe { sys::entmtp_policy_free(self.raw.as_ptr()) };
        if !self.callbacks.is_null() {
            drop(unsafe { Box::from_raw(self.callbacks) });
        }
    }
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy").field("kind", &self.kind()).finish()
    }
}
