//! Writers of a tiny random Llama (GGUF v3, F32) and of Medusa / Hydra heads
//! (safetensors), byte by byte, so the Rust tests need nothing but the
//! library. Same shapes as bindings/python/tests/tinymodel.py: hidden 32,
//! 2 layers, 4 heads, 2 KV heads, FFN 48, context 256; with a byte-level BPE
//! tokenizer (3 special tokens, 256 byte tokens, a few merges) and vocab 272,
//! or without one and vocab 32.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub const HIDDEN: usize = 32;
pub const FFN: usize = 48;
pub const LAYERS: usize = 2;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const CTX: u32 = 256;
pub const VOCAB: usize = 272;

pub const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
pub const MERGES: [(&str, &str); 6] = [
    ("Ġ", "t"),
    ("h", "e"),
    ("Ġt", "he"),
    ("l", "l"),
    ("ll", "o"),
    ("Ġ", "w"),
];
const CHATML: &str = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// splitmix64: deterministic uniform numbers in [-1, 1).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 11) as f64 * (2.0 / (1u64 << 53) as f64) - 1.0) as f32
    }
    pub fn vec(&mut self, n: usize, scale: f32, offset: f32) -> Vec<f32> {
        (0..n).map(|_| offset + scale * self.uniform()).collect()
    }
}

// ------------------------------------------------------------------ GGUF

enum Value {
    U32(u32),
    F32(f32),
    Str(String),
    StrArray(Vec<String>),
    I32Array(Vec<i32>),
}

struct Tensor {
    name: String,
    shape: Vec<usize>, // outermost first, as in numpy
    data: Vec<f32>,
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

fn write_gguf_file(path: &Path, kv: &[(&str, Value)], tensors: &[Tensor]) {
    const ALIGN: usize = 32;
    let mut b = Vec::new();
    b.extend_from_slice(b"GGUF");
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&(kv.len() as u64 + 1).to_le_bytes());
    put_str(&mut b, "general.alignment");
    b.extend_from_slice(&4u32.to_le_bytes());
    b.extend_from_slice(&(ALIGN as u32).to_le_bytes());
    for (k, v) in kv {
        put_str(&mut b, k);
        match v {
            Value::U32(x) => {
                b.extend_from_slice(&4u32.to_le_bytes());
                b.extend_from_slice(&x.to_le_bytes());
            }
            Value::F32(x) => {
                b.extend_from_slice(&6u32.to_le_bytes());
                b.extend_from_slice(&x.to_le_bytes());
            }
            Value::Str(s) => {
                b.extend_from_slice(&8u32.to_le_bytes());
                put_str(&mut b, s);
            }
            Value::StrArray(a) => {
                b.extend_from_slice(&9u32.to_le_bytes());
                b.extend_from_slice(&8u32.to_le_bytes());
                b.extend_from_slice(&(a.len() as u64).to_le_bytes());
                for s in a {
                    put_str(&mut b, s);
                }
            }
            Value::I32Array(a) => {
                b.extend_from_slice(&9u32.to_le_bytes());
                b.extend_from_slice(&5u32.to_le_bytes());
                b.extend_from_slice(&(a.len() as u64).to_le_bytes());
                for x in a {
                    b.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
    }
    let mut offset = 0usize;
    for t in tensors {
        put_str(&mut b, &t.name);
        b.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
        for d in t.shape.iter().rev() {
            b.extend_from_slice(&(*d as u64).to_le_bytes()); // innermost first
        }
        b.extend_from_slice(&0u32.to_le_bytes()); // F32
        b.extend_from_slice(&(offset as u64).to_le_bytes());
        offset += (t.data.len() * 4).div_ceil(ALIGN) * ALIGN;
    }
    b.resize(b.len().div_ceil(ALIGN) * ALIGN, 0);
    for t in tensors {
        for x in &t.data {
            b.extend_from_slice(&x.to_le_bytes());
        }
        b.resize(b.len().div_ceil(ALIGN) * ALIGN, 0);
    }
    std::fs::write(path, b).expect("write gguf");
}

/// GPT-2's byte-level alphabet: printable bytes stand for themselves, the
/// others are shifted to code points from 256 up, in byte order.
fn byte_symbols() -> Vec<String> {
    let keep = |b: u32| (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    let mut shift = 0;
    (0u32..256)
        .map(|b| {
            let cp = if keep(b) {
                b
            } else {
                shift += 1;
                255 + shift
            };
            char::from_u32(cp).unwrap().to_string()
        })
        .collect()
}

/// A tiny random Llama. With `echo`, the token embeddings all have the same
/// norm, lm_head equals them, the final norm is 1 and the blocks barely touch
/// the residual stream: the greedy next token is the current one, so greedy
/// output repeats the last prompt token and drafts (which default to the same
/// guess) are accepted whole. That exercises multi-token acceptance for sure.
pub fn write_model(path: &Path, vocab: usize, tokenizer: bool, seed: u64, echo: bool) {
    let mut rng = Rng::new(seed);
    let (h, f, hd) = (HIDDEN, FFN, HIDDEN / HEADS);
    let s_h = 1.5 / (h as f32).sqrt();
    let s_f = 1.5 / (f as f32).sqrt();
    let mut kv: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::Str("llama".into())),
        ("general.name", Value::Str("tiny-rust-llama".into())),
        ("llama.context_length", Value::U32(CTX)),
        ("llama.embedding_length", Value::U32(h as u32)),
        ("llama.feed_forward_length", Value::U32(f as u32)),
        ("llama.block_count", Value::U32(LAYERS as u32)),
        ("llama.attention.head_count", Value::U32(HEADS as u32)),
        ("llama.attention.head_count_kv", Value::U32(KV_HEADS as u32)),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.rope.dimension_count", Value::U32(hd as u32)),
        ("llama.vocab_size", Value::U32(vocab as u32)),
    ];
    if tokenizer {
        let mut tokens: Vec<String> = SPECIALS.iter().map(|s| s.to_string()).collect();
        tokens.extend(byte_symbols());
        tokens.extend(MERGES.iter().map(|(a, b)| format!("{a}{b}")));
        assert!(vocab >= tokens.len());
        let n_real = tokens.len();
        tokens.extend((n_real..vocab).map(|i| format!("<pad_{i}>")));
        let types = (0..vocab).map(|i| if i < 3 || i >= n_real { 3 } else { 1 }).collect();
        kv.push(("tokenizer.ggml.model", Value::Str("gpt2".into())));
        kv.push(("tokenizer.ggml.pre", Value::Str("default".into())));
        kv.push(("tokenizer.ggml.tokens", Value::StrArray(tokens)));
        kv.push(("tokenizer.ggml.token_type", Value::I32Array(types)));
        kv.push((
            "tokenizer.ggml.merges",
            Value::StrArray(MERGES.iter().map(|(a, b)| format!("{a} {b}")).collect()),
        ));
        kv.push(("tokenizer.ggml.bos_token_id", Value::U32(0)));
        kv.push(("tokenizer.ggml.eos_token_id", Value::U32(2)));
        kv.push(("tokenizer.chat_template", Value::Str(CHATML.into())));
    }
    let mut t = Vec::new();
    let quiet = if echo { 0.01 } else { 1.0 }; // scale of what the blocks write back
    let mut add = |name: String, shape: Vec<usize>, scale: f32, offset: f32, rng: &mut Rng| {
        let n = shape.iter().product();
        t.push(Tensor {
            name,
            data: rng.vec(n, scale, offset),
            shape,
        });
    };
    add("token_embd.weight".into(), vec![vocab, h], 1.0, 0.0, &mut rng);
    for i in 0..LAYERS {
        let p = |s: &str| format!("blk.{i}.{s}");
        add(p("attn_norm.weight"), vec![h], 0.1, 1.0, &mut rng);
        add(p("attn_q.weight"), vec![HEADS * hd, h], s_h, 0.0, &mut rng);
        add(p("attn_k.weight"), vec![KV_HEADS * hd, h], s_h, 0.0, &mut rng);
        add(p("attn_v.weight"), vec![KV_HEADS * hd, h], s_h, 0.0, &mut rng);
        add(p("attn_output.weight"), vec![h, HEADS * hd], s_h * quiet, 0.0, &mut rng);
        add(p("ffn_norm.weight"), vec![h], 0.1, 1.0, &mut rng);
        add(p("ffn_gate.weight"), vec![f, h], s_h, 0.0, &mut rng);
        add(p("ffn_up.weight"), vec![f, h], s_h, 0.0, &mut rng);
        add(p("ffn_down.weight"), vec![h, f], s_f * quiet, 0.0, &mut rng);
    }
    add(
        "output_norm.weight".into(),
        vec![h],
        if echo { 0.0 } else { 0.1 },
        1.0,
        &mut rng,
    );
    add("output.weight".into(), vec![vocab, h], 4.0 * s_h, 0.0, &mut rng);
    if echo {
        let mut emb = t[0].data.clone();
        for row in emb.chunks_mut(h) {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            row.iter_mut().for_each(|x| *x *= (h as f32).sqrt() / norm);
        }
        t[0].data = emb.clone();
        t.last_mut().unwrap().data = emb;
    }
    write_gguf_file(path, &kv, &t);
}

// ----------------------------------------------------------- safetensors

pub fn write_safetensors(path: &Path, tensors: &BTreeMap<String, (Vec<usize>, Vec<f32>)>) {
    let mut header = String::from("{\"__metadata__\":{\"format\":\"pt\"}");
    let mut offset = 0usize;
    for (name, (shape, data)) in tensors {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        header += &format!(
            ",\"{name}\":{{\"dtype\":\"F32\",\"shape\":[{}],\"data_offsets\":[{offset},{}]}}",
            dims.join(","),
            offset + data.len() * 4
        );
        offset += data.len() * 4;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut b = Vec::new();
    b.extend_from_slice(&(header.len() as u64).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    for (_, data) in tensors.values() {
        for x in data {
            b.extend_from_slice(&x.to_le_bytes());
        }
    }
    std::fs::write(path, b).expect("write safetensors");
}

/// Medusa heads, one ResBlock each, sharing the model's lm_head.
pub fn write_medusa(path: &Path, n_heads: usize, hidden: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let s = 1.0 / (hidden as f32).sqrt();
    let mut t = BTreeMap::new();
    for h in 0..n_heads {
        t.insert(
            format!("{h}.0.linear.weight"),
            (vec![hidden, hidden], rng.vec(hidden * hidden, s, 0.0)),
        );
        t.insert(format!("{h}.0.linear.bias"), (vec![hidden], rng.vec(hidden, 0.1, 0.0)));
    }
    write_safetensors(path, &t);
}

/// Grounded Hydra heads ('mlp' architecture), sharing the model's lm_head.
pub fn write_hydra(path: &Path, n_heads: usize, hidden: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut t = BTreeMap::new();
    for i in 0..n_heads {
        let n_in = hidden * (i + 2);
        let s0 = 1.0 / (n_in as f32).sqrt();
        let p = format!("hydra_mlp.{i}.0.");
        t.insert(
            format!("{p}linear.weight"),
            (vec![hidden, n_in], rng.vec(hidden * n_in, s0, 0.0)),
        );
        t.insert(format!("{p}linear.bias"), (vec![hidden], rng.vec(hidden, 0.1, 0.0)));
        t.insert(
            format!("{p}res_connection.weight"),
            (vec![hidden, n_in], rng.vec(hidden * n_in, s0, 0.0)),
        );
        t.insert(
            format!("{p}res_connection.bias"),
            (vec![hidden], rng.vec(hidden, 0.1, 0.0)),
        );
    }
    write_safetensors(path, &t);
}

// ---------------------------------------------------------------- files

pub struct Files {
    pub dir: PathBuf,
    pub model: PathBuf,
    pub model_notok: PathBuf,
    pub echo: PathBuf,
    pub medusa: PathBuf,
    pub hydra: PathBuf,
}

/// A scratch directory for this test binary: target/tmp/entmtp-tests-NAME
/// (NAME = the test file, e.g. "engine"); run_tests.sh runs the examples on
/// the files the engine tests leave there.
pub fn scratch_dir() -> PathBuf {
    // Cargo sets CARGO_TARGET_TMPDIR when it compiles integration tests
    let base = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_ref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "entmtp".into());
    let name = stem.rsplit_once('-').map_or(stem.as_str(), |(n, _hash)| n);
    let d = base.join(format!("entmtp-tests-{name}"));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The tiny model files, written once per test binary.
pub fn files() -> &'static Files {
    static FILES: OnceLock<Files> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = scratch_dir();
        let f = Files {
            model: dir.join("tiny.gguf"),
            model_notok: dir.join("tiny_notok.gguf"),
            echo: dir.join("tiny_echo.gguf"),
            medusa: dir.join("medusa.safetensors"),
            hydra: dir.join("hydra.safetensors"),
            dir,
        };
        write_model(&f.model, VOCAB, true, 1, false);
        write_model(&f.model_notok, 32, false, 5, false);
        write_model(&f.echo, 64, false, 6, true);
        write_medusa(&f.medusa, 4, HIDDEN, 2);
        write_hydra(&f.hydra, 4, HIDDEN, 3);
        f
    })
}
