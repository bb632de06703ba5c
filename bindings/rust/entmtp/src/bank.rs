//! TopologyBank: draft trees compiled into verifier buffers.
use std::ffi::CStr;
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::error::{check, Error, Result, Status};
use crate::policy::{Policy, PolicyKind};
use crate::{cstring, defaults, path_cstring, sys, to_i32, versioned};

/// Names of the library's built-in trees ("medusa_vicuna_7b_stage2",
/// "mc_sim_7b_63", "hydra_default", "chain_1".."chain_5", "ar").
pub fn builtin_tree_names() -> impl Iterator<Item = &'static str> {
    (0..).map_while(|i| {
        // SAFETY: static strings, NULL past the end.
        let p = unsafe { sys::entmtp_builtin_tree_name(i) };
        if p.is_null() {
            None
        } else {
            Some(unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("?"))
        }
    })
}

/// `entmtp_bank_params`: limits every tree of a bank must respect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BankParams {
    /// Deepest allowed path (= heads available); default 16.
    pub max_depth: usize,
    /// Candidates per head: ranks must be < topk; default 10.
    pub topk: usize,
    /// Nodes per tree including the root; default 256.
    pub max_nodes: usize,
}

impl Default for BankParams {
    fn default() -> Self {
        let p = defaults!(sys::entmtp_bank_params, sys::entmtp_bank_params_init);
        BankParams {
            max_depth: p.max_depth.max(0) as usize,
            topk: p.topk.max(0) as usize,
            max_nodes: p.max_nodes.max(0) as usize,
        }
    }
}

impl BankParams {
    fn to_c(self) -> Result<sys::entmtp_bank_params> {
        let mut p = defaults!(sys::entmtp_bank_params, sys::entmtp_bank_params_init);
        p.max_depth = to_i32(self.max_depth, "max_depth")?;
        p.topk = to_i32(self.topk, "topk")?;
        p.max_nodes = to_i32(self.max_nodes, "max_nodes")?;
        Ok(p)
    }
}

/// `entmtp_tree_info` of one tree; the name is borrowed from the bank.
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub struct TreeInfo<'b> {
    pub index: usize,
    pub name: &'b str,
    /// Including the root.
    pub n_nodes: usize,
    /// Longest path length (root excluded).
    pub depth: usize,
    pub n_paths: usize,
    /// Rows of retrieve_indices.
    pub n_leaves: usize,
    /// Measured figure, 0 if unknown.
    pub mean_accept_length: f32,
    /// Measured figure, 0 if unknown.
    pub tokens_per_second: f32,
}

/// The compiled verifier buffers of a tree, borrowed from the bank (Medusa
/// reference layout).
#[derive(Debug, Clone, Copy)]
pub struct TreeBuffers<'b> {
    /// N, root included.
    pub n_nodes: usize,
    /// D.
    pub depth: usize,
    /// Stride used by tree_indices.
    pub topk: usize,
    /// Rows of retrieve_indices.
    pub n_leaves: usize,
    /// N*N row-major; `[i][j] = 1` when j is i or an ancestor of i.
    pub attn_mask: &'b [u8],
    /// N; index into [root, head0 top-k, head1 top-k, ...].
    pub tree_indices: &'b [i32],
    /// N; depth of each node.
    pub position_ids: &'b [i32],
    /// n_leaves * (D+1), padded with -1.
    pub retrieve_indices: &'b [i32],
    /// N; parent node index, -1 for the root.
    pub parents: &'b [i32],
    /// N; child rank of each node, -1 for the root.
    pub node_ranks: &'b [i32],
}

impl<'b> TreeBuffers<'b> {
    /// Row `i` of the attention mask.
    pub fn mask_row(&self, i: usize) -> &'b [u8] {
        &self.attn_mask[i * self.n_nodes..(i + 1) * self.n_nodes]
    }
    /// Row `leaf` of retrieve_indices (D+1 entries, -1 padded).
    pub fn retrieve_row(&self, leaf: usize) -> &'b [i32] {
        let w = self.depth + 1;
        &self.retrieve_indices[leaf * w..(leaf + 1) * w]
    }
}

unsafe fn slice<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(p, n)
    }
}

/// A list of draft trees. Building needs `&mut`; a [`crate::Session`]
/// borrows the bank shared, so it cannot change under a running session.
pub struct Bank {
    raw: NonNull<sys::entmtp_bank>,
}

// SAFETY: the C library documents a built bank as immutable and shareable;
// every mutating method here takes &mut self.
unsafe impl Send for Bank {}
unsafe impl Sync for Bank {}

impl Bank {
    /// An empty bank with the default limits.
    pub fn new() -> Result<Bank> {
        Bank::with_params(&BankParams::default())
    }

    /// An empty bank for heads of depth `max_depth` (other limits default).
    pub fn with_max_depth(max_depth: usize) -> Result<Bank> {
        Bank::with_params(&BankParams {
            max_depth,
            ..BankParams::default()
        })
    }

    /// An empty bank with the given limits.
    pub fn with_params(params: &BankParams) -> Result<Bank> {
        let p = params.to_c()?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::entmtp_bank_create(&p, &mut out) })?;
        Bank::from_raw(out)
    }

    fn from_raw(out: *mut sys::entmtp_bank) -> Result<Bank> {
        NonNull::new(out)
            .map(|raw| Bank { raw })
            .ok_or_else(|| Error::new(Status::State, "no bank returned"))
    }

    /// Read a bank file (JSON, docs/bank-format.md); `None` = default limits.
    pub fn load(path: impl AsRef<Path>, params: Option<&BankParams>) -> Result<Bank> {
        let cpath = path_cstring(path.as_ref())?;
        let p = params.map(|p| p.to_c()).transpose()?;
        let mut out = ptr::null_mut();
        let pp = p.as_ref().map_or(ptr::null(), |p| p as *const _);
        check(unsafe { sys::entmtp_bank_load(cpath.as_ptr(), pp, &mut out) })?;
        Bank::from_raw(out)
    }

    /// Write the bank file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let cpath = path_cstring(path.as_ref())?;
        check(unsafe { sys::entmtp_bank_save(self.raw.as_ptr(), cpath.as_ptr()) })
    }

    /// The raw handle (owned by this Bank).
    pub fn as_ptr(&self) -> *mut sys::entmtp_bank {
        self.raw.as_ptr()
    }

    /// Compile a tree from Medusa choices (paths of ranks; no paths = the
    /// root-only tree) and append it; returns its index. Invalid choices are
    /// `Status::InvalidTree` naming the offending path; the bank is unchanged.
    pub fn add_tree<P: AsRef<[i32]>>(&mut self, name: &str, choices: &[P]) -> Result<usize> {
        let cname = cstring(name, "tree name")?;
        let mut ranks = Vec::new();
        let mut lengths = Vec::with_capacity(choices.len());
        for path in choices {
            let path = path.as_ref();
            ranks.extend_from_slice(path);
            lengths.push(to_i32(path.len(), "path length")?);
        }
        let mut idx = -1i32;
        check(unsafe {
            sys::entmtp_bank_add_tree(
                self.raw.as_ptr(),
                cname.as_ptr(),
                ranks.as_ptr(),
                lengths.as_ptr(),
                to_i32(lengths.len(), "n_paths")?,
                &mut idx,
            )
        })?;
        Ok(idx as usize)
    }

    /// Same with choices as JSON text, e.g. `"[[0],[0,0],[1]]"`.
    pub fn add_tree_json(&mut self, name: &str, choices_json: &str) -> Result<usize> {
        let cname = cstring(name, "tree name")?;
        let cjson = cstring(choices_json, "choices_json")?;
        let mut idx = -1i32;
        check(unsafe { sys::entmtp_bank_add_tree_json(self.raw.as_ptr(), cname.as_ptr(), cjson.as_ptr(), &mut idx) })?;
        Ok(idx as usize)
    }

    /// Append a built-in tree (see [`builtin_tree_names`]); returns its index.
    pub fn add_builtin(&mut self, builtin_name: &str) -> Result<usize> {
        let cname = cstring(builtin_name, "built-in tree name")?;
        let mut idx = -1i32;
        check(unsafe { sys::entmtp_bank_add_builtin(self.raw.as_ptr(), cname.as_ptr(), &mut idx) })?;
        Ok(idx as usize)
    }

    /// Number of trees.
    pub fn len(&self) -> usize {
        unsafe { sys::entmtp_bank_size(self.raw.as_ptr()) }.max(0) as usize
    }

    /// No trees yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Index of the tree called `name` (`Status::NotFound` if none).
    pub fn find(&self, name: &str) -> Result<usize> {
        let cname = cstring(name, "tree name")?;
        let mut idx = -1i32;
        check(unsafe { sys::entmtp_bank_find(self.raw.as_ptr(), cname.as_ptr(), &mut idx) })?;
        Ok(idx as usize)
    }

    /// Index of the tree called `name`, if any.
    pub fn get(&self, name: &str) -> Option<usize> {
        let r = self.find(name).ok();
        if r.is_none() {
            crate::clear_error();
        }
        r
    }

    /// Whether a tree called `name` exists.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// `entmtp_bank_tree_info` of tree `index`.
    pub fn tree_info(&self, index: usize) -> Result<TreeInfo<'_>> {
        let mut t = versioned!(sys::entmtp_tree_info);
        check(unsafe { sys::entmtp_bank_tree_info(self.raw.as_ptr(), to_i32(index, "tree index")?, &mut t) })?;
        // SAFETY: the name is owned by the bank, which `&self` keeps alive and unchanged.
        let name = if t.name.is_null() {
            ""
        } else {
            unsafe { CStr::from_ptr(t.name) }.to_str().unwrap_or("?")
        };
        Ok(TreeInfo {
            index,
            name,
            n_nodes: t.n_nodes.max(0) as usize,
            depth: t.depth.max(0) as usize,
            n_paths: t.n_paths.max(0) as usize,
            n_leaves: t.n_leaves.max(0) as usize,
            mean_accept_length: t.mean_accept_length,
            tokens_per_second: t.tokens_per_second,
        })
    }

    /// Iterator over every tree's [`TreeInfo`], in index order.
    pub fn trees(&self) -> Trees<'_> {
        Trees {
            bank: self,
            next: 0,
            len: self.len(),
        }
    }

    /// Iterator over the tree names, in index order.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.trees().map(|t| t.name)
    }

    /// Record measured figures for tree `index` (kept by `save`).
    pub fn set_figures(&mut self, index: usize, mean_accept_length: f32, tokens_per_second: f32) -> Result<()> {
        check(unsafe {
            sys::entmtp_bank_set_figures(
                self.raw.as_ptr(),
                to_i32(index, "tree index")?,
                mean_accept_length,
                tokens_per_second,
            )
        })
    }

    /// The compiled verifier buffers of tree `index`.
    pub fn tree_buffers(&self, index: usize) -> Result<TreeBuffers<'_>> {
        let mut b = versioned!(sys::entmtp_tree_buffers);
        check(unsafe { sys::entmtp_bank_tree_buffers(self.raw.as_ptr(), to_i32(index, "tree index")?, &mut b) })?;
        let n = b.n_nodes.max(0) as usize;
        let d = b.depth.max(0) as usize;
        let leaves = b.n_leaves.max(0) as usize;
        // SAFETY: the bank owns these arrays (of the documented sizes) until it
        // is freed; `&self` keeps it alive and unchanged.
        unsafe {
            Ok(TreeBuffers {
                n_nodes: n,
                depth: d,
                topk: b.topk.max(0) as usize,
                n_leaves: leaves,
                attn_mask: slice(b.attn_mask, n * n),
                tree_indices: slice(b.tree_indices, n),
                position_ids: slice(b.position_ids, n),
                retrieve_indices: slice(b.retrieve_indices, leaves * (d + 1)),
                parents: slice(b.parents, n),
                node_ranks: slice(b.node_ranks, n),
            })
        }
    }

    /// Store a (non-custom) policy's settings in the bank (written by `save`).
    pub fn set_policy_config(&mut self, policy: &Policy) -> Result<()> {
        check(unsafe { sys::entmtp_bank_set_policy_config(self.raw.as_ptr(), policy.config_ptr()) })
    }

    /// A new policy from the settings of `kind` stored in the bank
    /// (`Status::NotFound` when there are none).
    pub fn policy(&self, kind: PolicyKind) -> Result<Policy> {
        Policy::from_bank(self, kind)
    }
}

impl Drop for Bank {
    fn drop(&mut self) {
        unsafe { sys::entmtp_bank_free(self.raw.as_ptr()) }
    }
}

impl std::fmt::Debug for Bank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// Iterator over the trees of a bank.
pub struct Trees<'b> {
    bank: &'b Bank,
    next: usize,
    len: usize,
}

impl<'b> Iterator for Trees<'b> {
    type Item = TreeInfo<'b>;
    fn next(&mut self) -> Option<TreeInfo<'b>> {
        if self.next >= self.len {
            return None;
        }
        let t = self.bank.tree_info(self.next).ok();
        self.next += 1;
        t
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = self.len - self.next;
        (r, Some(r))
    }
}

impl ExactSizeIterator for Trees<'_> {}

impl<'b> IntoIterator for &'b Bank {
    type Item = TreeInfo<'b>;
    type IntoIter = Trees<'b>;
    fn into_iter(self) -> Trees<'b> {
        self.trees()
    }
}
