//! Model, heads and sessions on a tiny random model written by tests/common:
//! the lossless invariant, every call, callbacks and errors.
use entmtp::{
    Backend, Bank, CustomPolicy, Features, Heads, HeadsKind, LoadOptions, Model, Outcome, Policy, Session,
    SessionOptions, Status,
};

mod common;
use common::files;

const PROMPTS: [&[i32]; 3] = [&[1, 5, 9, 3], &[7, 8], &[100, 200, 31]];

fn cpu() -> LoadOptions {
    LoadOptions {
        backend: Backend::Cpu,
        threads: 1,
        ..LoadOptions::default()
    }
}

fn model() -> Model {
    Model::load_with(&files().model, &cpu()).unwrap()
}

fn no_stop() -> SessionOptions {
    SessionOptions {
        stop_tokens: Some(vec![]),
        ..SessionOptions::default()
    }
}

fn bank2() -> Bank {
    let mut b = Bank::with_max_depth(4).unwrap();
    b.add_builtin("chain_2").unwrap();
    b.add_builtin("mc_sim_7b_63").unwrap();
    b
}

fn ar_reference(m: &Model, prompt: &[i32], n: usize) -> Vec<i32> {
    let mut s = Session::with_options(m, None, None, &no_stop()).unwrap();
    s.prefill(prompt).unwrap();
    s.generate(n, true).unwrap()
}

// ---------------------------------------------------------------- model

#[test]
fn model_info() {
    let m = model();
    let i = m.info();
    assert_eq!((i.architecture.as_str(), i.name.as_str()), ("llama", "tiny-rust-llama"));
    assert_eq!((i.vocab_size, i.hidden_size, i.intermediate_size), (272, 32, 48));
    assert_eq!(
        (i.n_layers, i.n_heads, i.n_kv_heads, i.head_dim, i.context_length),
        (2, 4, 2, 8, 256)
    );
    assert_eq!(i.rope_theta, 10000.0);
    assert!((i.rms_norm_eps - 1e-5).abs() < 1e-9);
    assert!(!i.tied_embeddings);
    assert_eq!((i.bos_token, i.eos_token), (Some(0), Some(2)));
    assert!(i.n_params > 0);
    assert_eq!(i.backend, Backend::Cpu);
    assert_eq!(m.vocab_size(), 272);
    assert!(format!("{m:?}").contains("tiny-rust-llama"));
    let auto = Model::load(&files().model).unwrap();
    assert_ne!(auto.info().backend, Backend::Auto);
}

#[test]
fn tokenizer() {
    let m = model();
    let toks = m.tokenize("Hello the world", false, false).unwrap();
    assert_eq!(m.detokenize(&toks).unwrap(), "Hello the world");
    let with_bos = m.tokenize("Hello", true, false).unwrap();
    assert_eq!(with_bos[0], 0);
    assert_eq!(&with_bos[1..], &m.tokenize("Hello", false, false).unwrap()[..]);
    let long = "héllo wörld ".repeat(200);
    assert_eq!(m.detokenize(&m.tokenize(&long, false, false).unwrap()).unwrap(), long);
    assert!(m.tokenize("", false, false).unwrap().is_empty());
    assert_eq!(m.tokenize("<|im_end|>", false, true).unwrap(), [2]);
    assert!(m.tokenize("<|im_end|>", false, false).unwrap().len() > 1);
    assert!(m.is_eog(2) && !m.is_eog(100));
    let e = m.tokenize("é", false, false).unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(m.detokenize_bytes(&e[..1]).unwrap(), &"é".as_bytes()[..1]);
    assert_eq!(m.detokenize(&e[..1]).unwrap(), "\u{FFFD}");
    assert_eq!(m.detokenize(&[100000]).unwrap_err().status(), Status::OutOfRange);
    // text with an embedded NUL goes through as bytes
    assert_eq!(
        m.detokenize(&m.tokenize("a\0b", false, false).unwrap()).unwrap(),
        "a\0b"
    );
}

#[test]
fn chat_prompt() {
    let m = model();
    assert_eq!(
        m.chat_prompt("hi there", None).unwrap(),
        "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n"
    );
    assert!(m
        .chat_prompt("hi", Some("be brief"))
        .unwrap()
        .starts_with("<|im_start|>system\nbe brief<|im_end|>\n"));
    assert_eq!(
        m.chat_prompt(&"x".repeat(1000), None).unwrap().matches('x').count(),
        1000
    );
    assert_eq!(
        m.chat_prompt_messages(&[("user", "hi"), ("assistant", "yo"), ("user", "bye")])
            .unwrap(),
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n\
         <|im_start|>user\nbye<|im_end|>\n<|im_start|>assistant\n"
    );
    let e = m
        .chat_prompt_messages(&[("user", "hi"), ("assistant", "yo")])
        .unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e
        .message()
        .contains("the last of the 2 messages must be a user message"));
    let n = Model::load(&files().model_notok).unwrap();
    assert_eq!(n.vocab_size(), 32);
    let e = n.tokenize("hello", false, false).unwrap_err();
    assert_eq!(e.status(), Status::Unsupported);
    assert!(e.message().contains("no tokenizer"));
    assert_eq!(n.chat_prompt("x", None).unwrap_err().status(), Status::Unsupported);
}

#[test]
fn progress_callback() {
    let mut calls = Vec::new();
    Model::load_with_progress(&files().model, &cpu(), |f, what| {
        calls.push((f, what.to_string()));
        false
    })
    .unwrap();
    assert!(!calls.is_empty());
    assert!((calls.last().unwrap().0 - 1.0).abs() < 1e-6);
    assert!(calls.iter().all(|(f, _)| (0.0..=1.0).contains(f)));
    let e = Model::load_with_progress(&files().model, &cpu(), |_, _| true).unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(e.message().contains("cancelled"));
    let e = Model::load_with_progress(&files().model, &cpu(), |_, _| panic!("stop loading")).unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(e.message().contains("panicked: stop loading"), "{}", e.message());
}

#[test]
fn model_file_errors() {
    let dir = common::scratch_dir();
    let e = Model::load(dir.join("missing.gguf")).unwrap_err();
    assert_eq!(e.status(), Status::Io);
    assert!(e.message().contains("missing.gguf"));
    let data = std::fs::read(&files().model).unwrap();
    for n in [3, 100, 5000, data.len() / 2, data.len() - 4] {
        let p = dir.join(format!("truncated_{n}.gguf"));
        std::fs::write(&p, &data[..n]).unwrap();
        let e = Model::load(&p).unwrap_err();
        assert_eq!(e.status(), Status::Format, "{n}: {e}");
        assert!(e.message().contains(p.to_str().unwrap()), "{}", e.message());
    }
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"NOTAGGUF".repeat(100)).unwrap();
    assert_eq!(Model::load(&junk).unwrap_err().status(), Status::Format);
    let e = Model::load(&dir).unwrap_err();
    assert_eq!(e.status(), Status::Io);
    assert!(e.message().contains("config.json"));
}

#[test]
fn heads_info_and_errors() {
    let m = model();
    let h = m.load_heads(&files().medusa).unwrap();
    assert_eq!(
        h.info(),
        entmtp::HeadsInfo {
            kind: HeadsKind::Medusa,
            n_heads: 4,
            n_layers: 1,
            shares_lm_head: true
        }
    );
    assert_eq!(h.n_heads(), 4);
    assert!(std::ptr::eq(h.model(), &m));
    let y = Heads::load(&m, &files().hydra).unwrap();
    assert_eq!(y.info().kind, HeadsKind::Hydra);
    let dir = common::scratch_dir();
    assert_eq!(
        m.load_heads(dir.join("missing.safetensors")).unwrap_err().status(),
        Status::Io
    );
    let data = std::fs::read(&files().medusa).unwrap();
    for n in [4, 12, 200, data.len() - 8] {
        let p = dir.join(format!("truncated_{n}.safetensors"));
        std::fs::write(&p, &data[..n]).unwrap();
        let e = m.load_heads(&p).unwrap_err();
        assert_eq!(e.status(), Status::Format, "{n}: {e}");
        assert!(e.message().contains(p.to_str().unwrap()));
    }
    let other = dir.join("h16.safetensors");
    common::write_medusa(&other, 2, 16, 9);
    let e = m.load_heads(&other).unwrap_err();
    assert_eq!(e.status(), Status::Mismatch);
    assert!(e.message().contains("hidden"));
    assert_eq!(m.load_heads(&files().model).unwrap_err().status(), Status::Format);
}

// -------------------------------------------------------------- sessions

fn policies() -> Vec<(&'static str, Option<Policy>)> {
    vec![
        ("default", None),
        ("static", Some(Policy::static_tree(1).unwrap())),
        ("ladder", Some(Policy::ladder(&[0.05], Some(&[0, 1])).unwrap())),
        ("hysteresis", Some(Policy::hysteresis(0.3, 0.1).unwrap())),
        ("ucb", Some(Policy::ucb(1.0, 0.0).unwrap())),
        (
            "custom",
            Some(Policy::custom(|f, _| if f.s > 0.01 { 1 } else { 0 }).unwrap()),
        ),
    ]
}

#[test]
fn greedy_generation_is_lossless() {
    let m = model();
    let bank = bank2();
    let medusa = m.load_heads(&files().medusa).unwrap();
    let hydra = m.load_heads(&files().hydra).unwrap();
    for prompt in PROMPTS {
        let want = ar_reference(&m, prompt, 60);
        for heads in [&medusa, &hydra] {
            for (name, mut policy) in policies() {
                let mut s = Session::with_options(&m, Some(heads), Some(&bank), &no_stop()).unwrap();
                if let Some(p) = policy.as_mut() {
                    s.set_policy(Some(p)).unwrap();
                }
                s.prefill(prompt).unwrap();
                let got = s.generate(60, false).unwrap();
                assert_eq!(got, want, "{prompt:?} {name} {:?}", heads.info().kind);
                let mut all = prompt.to_vec();
                all.extend_from_slice(&want);
                assert_eq!(s.tokens(), &all[..]);
                let st = s.stats();
                assert_eq!((st.n_generated, st.n_prompt_tokens), (60, prompt.len() as u64));
                assert_eq!(s.tree_usages().iter().sum::<u64>(), st.n_steps);
            }
        }
    }
}

#[test]
fn echo_model_accepts_whole_drafts_losslessly() {
    // the echo model repeats the last token: with Medusa heads every draft of
    // mc_sim_7b_63 (depth 4) is accepted, 5 tokens per step
    let m = Model::load_with(&files().echo, &cpu()).unwrap();
    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let y = m.load_heads(&files().hydra).unwrap();
    for heads in [&h, &y] {
        for prompt in [&[1, 2, 3][..], &[40, 41], &[63]] {
            let want = ar_reference(&m, prompt, 40);
            assert!(want.iter().all(|&t| t == *prompt.last().unwrap()), "{want:?}");
            let mut policy = Policy::static_tree(1).unwrap();
            let mut s = Session::with_options(&m, Some(heads), Some(&bank), &no_stop()).unwrap();
            s.set_policy(Some(&mut policy)).unwrap();
            s.prefill(prompt).unwrap();
            assert_eq!(s.generate(40, false).unwrap(), want);
            let st = s.stats();
            // Medusa heads (small residual blocks) keep the hidden state's
            // guess; random Hydra heads do not, so only losslessness is checked
            if heads.info().kind == HeadsKind::Medusa {
                assert_eq!((st.n_generated, st.n_steps), (40, 8));
                assert_eq!(st.mean_accept_length, 5.0);
            }
        }
    }
}

#[test]
fn step_by_step_equals_generate() {
    let m = model();
    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let want = ar_reference(&m, PROMPTS[2], 40);
    let mut policy = Policy::static_tree(1).unwrap();
    let mut s = Session::with_options(&m, Some(&h), Some(&bank), &no_stop()).unwrap();
    s.set_policy(Some(&mut policy)).unwrap();
    assert_eq!(s.policy().unwrap().kind(), entmtp::PolicyKind::Static);
    s.prefill(PROMPTS[2]).unwrap();
    let mut got = Vec::new();
    let mut steps = Vec::new();
    while got.len() < 40 {
        let r = s.step(40 - got.len()).unwrap();
        got.extend_from_slice(&r.tokens);
        steps.push(r);
    }
    assert_eq!(got, want);
    for r in &steps {
        assert_eq!((r.tree_index, r.n_nodes), (Some(1), 64));
        assert!(!r.tokens.is_empty() && r.tokens.len() <= r.accept_length);
        assert!((0.0..=1.0).contains(&r.p0) && r.entropy >= 0.0 && r.seconds >= 0.0 && !r.stopped);
    }
    assert!(steps.iter().any(|r| r.tokens.len() > 1));
    assert_eq!(s.tree_usage(1), steps.len() as u64);
    assert_eq!(s.tree_usages(), [0, steps.len() as u64]);
    assert_eq!(s.step(1).unwrap().tokens.len(), 1);
    let f = s.features().unwrap();
    assert_eq!(f.n_heads(), 4);
    assert_eq!(f.step, steps.len() as i64);
    assert!((0.0..=1.0).contains(&f.s));
    assert_eq!(f.head_p().len(), 4);
}

/// A custom policy reading expected_accept / expected_seconds makes the
/// built-in throughput policy's choice at every step; both are lossless.
#[test]
fn custom_throughput_rule_matches_the_throughput_policy() {
    let m = model();
    let mut bank = Bank::with_max_depth(4).unwrap();
    for name in ["chain_1", "chain_2", "chain_4", "mc_sim_7b_63"] {
        bank.add_builtin(name).unwrap();
    }
    let want = ar_reference(&m, PROMPTS[0], 40);
    for heads in [&files().medusa, &files().hydra] {
        let h = m.load_heads(heads).unwrap();
        let run = |policy: &mut Policy| {
            let opts = SessionOptions {
                reproducible: true,
                ..no_stop()
            };
            let mut s = Session::with_options(&m, Some(&h), Some(&bank), &opts).unwrap();
            s.set_policy(Some(policy)).unwrap();
            s.prefill(PROMPTS[0]).unwrap();
            let (mut out, mut trees) = (Vec::new(), Vec::new());
            while out.len() < 40 {
                let r = s.step(40 - out.len()).unwrap();
                trees.push(r.tree_index);
                out.extend_from_slice(&r.tokens);
            }
            let f = s.features().unwrap();
            assert_eq!((f.n_trees, f.topk(), f.head_topk_p.len()), (4, 10, f.n_heads()));
            (out, trees, f.expected_accept.is_some() && f.n_heads() == 4)
        };
        // (the throughput policy may stop Hydra's chain before the last head)
        let (out_t, trees_t, _) = run(&mut Policy::throughput().unwrap());
        let mut custom = Policy::custom(|f, n| {
            assert!(f.n_trees == n && f.topk() == 10 && f.head_topk_p.len() == f.n_heads());
            assert!(f.head_topk_p.iter().zip(&f.head_p).all(|(r, &p)| r[0] == p));
            let rate = |k: usize| f.outlook(k).map(|(a, t)| a as f64 / t).unwrap();
            (0..n).fold(0, |best, k| if rate(k) > rate(best) { k } else { best })
        })
        .unwrap();
        let (out_c, trees_c, shown) = run(&mut custom);
        assert_eq!(out_t, want);
        assert_eq!(out_c, want);
        assert_eq!(trees_c, trees_t);
        assert!(shown, "the session keeps the outlook and every head level a custom policy saw");
    }
}

#[test]
fn ar_steps_logits_and_plain_sessions() {
    let m = model();
    let mut s = Session::new(&m, None, None).unwrap();
    assert_eq!(s.logits().unwrap_err().status(), Status::State);
    s.prefill(&[1, 2, 3]).unwrap();
    let lg = s.logits().unwrap().to_vec();
    assert_eq!(lg.len(), 272);
    let argmax = (0..lg.len()).max_by(|&a, &b| lg[a].total_cmp(&lg[b])).unwrap() as i32;
    let r = s.step_ar().unwrap();
    assert_eq!(
        (r.tree_index, r.tokens.clone(), r.accept_length),
        (None, vec![argmax], 1)
    );
    let r2 = s.step(0).unwrap();
    assert_eq!((r2.tree_index, r2.tokens.len()), (None, 1));
    assert_eq!(s.tokens(), &[1, 2, 3, r.tokens[0], r2.tokens[0]]);
    assert!(s.tree_usages().is_empty());
    assert!(format!("{s:?}").contains("tokens: 5"));
}

#[test]
fn on_tokens_callback() {
    let m = model();
    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let mut policy = Policy::static_tree(1).unwrap();
    let mut s = Session::with_options(&m, Some(&h), Some(&bank), &no_stop()).unwrap();
    s.set_policy(Some(&mut policy)).unwrap();
    s.prefill(PROMPTS[2]).unwrap();
    let mut batches: Vec<Vec<i32>> = Vec::new();
    let out = s
        .generate_with(30, false, |b| {
            batches.push(b.to_vec());
            false
        })
        .unwrap();
    assert_eq!(out.len(), 30);
    assert_eq!(batches.concat(), out);
    s.reset().unwrap();
    s.prefill(PROMPTS[2]).unwrap();
    let mut n = 0;
    let out = s.generate_with(30, false, |_| {
        n += 1;
        true
    });
    assert_eq!(n, 1);
    assert!(!out.unwrap().is_empty());
    // a panic stops generation and becomes a Callback error with the tokens so far
    let before = s.tokens().len();
    let e = s.generate_with(20, true, |_| panic!("enough")).unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(e.message().contains("on_tokens panicked: enough"), "{}", e.message());
    assert_eq!(e.tokens().len(), 1);
    assert_eq!(s.tokens().len(), before + 1);
    assert_eq!(s.generate(2, true).unwrap().len(), 2);
}

#[test]
fn stop_tokens_and_sampling() {
    let m = model();
    let first = ar_reference(&m, &[1, 5, 9, 3], 3);
    let opts = SessionOptions {
        stop_tokens: Some(vec![first[1]]),
        ..SessionOptions::default()
    };
    let mut s = Session::with_options(&m, None, None, &opts).unwrap();
    s.prefill(&[1, 5, 9, 3]).unwrap();
    assert_eq!(s.generate(20, false).unwrap(), &first[..2]);
    s.reset().unwrap();
    s.prefill(&[1, 5, 9, 3]).unwrap();
    s.step_ar().unwrap();
    let r = s.step_ar().unwrap();
    assert!(r.stopped);
    assert_eq!(r.tokens, [first[1]]);

    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let run = |seed| {
        let o = SessionOptions {
            temperature: 0.8,
            seed,
            stop_tokens: Some(vec![]),
            ..SessionOptions::default()
        };
        let mut s = Session::with_options(&m, Some(&h), Some(&bank), &o).unwrap();
        s.prefill(&[1, 2, 3]).unwrap();
        s.generate(30, false).unwrap()
    };
    let (a, b, c) = (run(7), run(7), run(8));
    assert_eq!(a, b);
    assert_eq!(a.len(), 30);
    assert_ne!(a, c);
}

#[test]
fn kv_full() {
    let m = model();
    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let o = SessionOptions {
        kv_capacity: 8,
        ..no_stop()
    };
    let mut s = Session::with_options(&m, Some(&h), Some(&bank), &o).unwrap();
    let e = s.prefill(&(1..10).collect::<Vec<i32>>()).unwrap_err();
    assert_eq!(e.status(), Status::KvFull);
    s.prefill(&[1, 2, 3, 4]).unwrap();
    let e = s.generate(100, false).unwrap_err();
    assert_eq!(e.status(), Status::KvFull);
    assert_eq!(e.tokens().len(), 4);
    assert_eq!(s.tokens().len(), 8);
    let e = s.step(0).unwrap_err();
    assert_eq!((e.status(), e.tokens().len()), (Status::KvFull, 0));

    let mut policy = Policy::static_tree(1).unwrap();
    let o = SessionOptions {
        kv_capacity: 6,
        ..no_stop()
    };
    let mut s = Session::with_options(&m, Some(&h), Some(&bank), &o).unwrap();
    s.set_policy(Some(&mut policy)).unwrap();
    s.prefill(PROMPTS[2]).unwrap();
    let mut got = Vec::new();
    loop {
        match s.step(0) {
            Ok(r) => got.extend(r.tokens),
            Err(e) => {
                assert_eq!(e.status(), Status::KvFull);
                got.extend_from_slice(e.tokens()); // the tokens that fit were committed
                break;
            }
        }
    }
    assert_eq!(got.len(), 3);
    assert_eq!(&s.tokens()[3..], &got[..]);
}

#[test]
fn reset_and_stats() {
    let m = model();
    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let mut s = Session::with_options(&m, Some(&h), Some(&bank), &no_stop()).unwrap();
    s.prefill(&[1, 2, 3]).unwrap();
    s.generate(10, false).unwrap();
    let st = s.stats();
    assert_eq!((st.n_prompt_tokens, st.n_generated), (3, 10));
    assert!(st.n_steps >= 1);
    assert!((st.mean_accept_length - 10.0 / st.n_steps as f64).abs() < 1e-9);
    s.reset().unwrap();
    assert!(s.tokens().is_empty());
    assert_eq!(s.stats().n_generated, 0);
    assert_eq!(s.tree_usages(), [0, 0]);
    assert_eq!(s.step(0).unwrap_err().status(), Status::State);
}

#[test]
fn session_errors() {
    let m = model();
    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let mut p2 = Policy::static_tree(2).unwrap(); // a policy must outlive the session using it
    let mut s = Session::new(&m, Some(&h), Some(&bank)).unwrap();
    assert!(s.step(0).unwrap_err().message().contains("prefill"));
    assert_eq!(s.prefill(&[]).unwrap_err().status(), Status::InvalidArgument);
    let e = s.prefill(&[1, 272]).unwrap_err();
    assert_eq!(e.status(), Status::OutOfRange);
    assert!(e.message().contains("272"));
    assert_eq!(s.prefill(&[-1]).unwrap_err().status(), Status::OutOfRange);
    s.prefill(&[1]).unwrap();
    assert_eq!(s.generate(0, false).unwrap_err().status(), Status::InvalidArgument);
    assert!(s
        .set_policy(Some(&mut p2))
        .unwrap_err()
        .message()
        .contains("static_tree"));
    assert!(s.policy().is_none());
    drop(s);

    let bad = |o: SessionOptions| {
        Session::with_options(&m, None, None, &o)
            .map(|_| ())
            .unwrap_err()
            .status()
    };
    assert_eq!(
        bad(SessionOptions {
            temperature: -1.0,
            ..SessionOptions::default()
        }),
        Status::InvalidConfig
    );
    assert_eq!(
        bad(SessionOptions {
            stop_tokens: Some((0..entmtp::limit(entmtp::Limit::MaxStopTokens) as i32 + 1).collect()),
            ..SessionOptions::default()
        }),
        Status::InvalidConfig
    );
    assert_eq!(
        bad(SessionOptions {
            stop_tokens: Some(vec![5000]),
            ..SessionOptions::default()
        }),
        Status::OutOfRange
    );
    assert_eq!(
        bad(SessionOptions {
            kv_type: 3,
            ..SessionOptions::default()
        }),
        Status::InvalidConfig
    );
    // a BF16 KV cache (kv_type 2) reaches the library: greedy AR runs on it
    let mut s16 = Session::with_options(
        &m,
        None,
        None,
        &SessionOptions {
            kv_type: 2,
            stop_tokens: Some(Vec::new()),
            ..SessionOptions::default()
        },
    )
    .unwrap();
    s16.prefill(&[1, 2, 3]).unwrap();
    assert_eq!(s16.generate(4, true).unwrap().len(), 4);
    drop(s16);

    let mut p = Policy::static_tree(0).unwrap();
    let mut plain = Session::new(&m, None, None).unwrap();
    assert_eq!(plain.set_policy(Some(&mut p)).unwrap_err().status(), Status::State);
    drop(plain);

    let two = common::scratch_dir().join("two_heads.safetensors");
    common::write_medusa(&two, 2, 32, 4);
    let h2 = m.load_heads(&two).unwrap();
    let e = Session::new(&m, Some(&h2), Some(&bank)).map(|_| ()).unwrap_err();
    assert_eq!(e.status(), Status::Mismatch);
    assert!(e.message().contains("mc_sim_7b_63"));
    let other = model();
    let oh = other.load_heads(&files().medusa).unwrap();
    let e = Session::new(&m, Some(&oh), Some(&bank)).map(|_| ()).unwrap_err();
    assert_eq!(e.status(), Status::Mismatch);
    assert!(e.message().contains("different model"));
}

struct Counting {
    selects: usize,
    observed: Vec<Outcome>,
    resets: usize,
    log: std::sync::Arc<std::sync::Mutex<(usize, usize, usize)>>,
}

impl CustomPolicy for Counting {
    fn select(&mut self, f: &Features, n: usize) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
        assert_eq!((n, f.n_heads()), (2, 4));
        self.selects += 1;
        self.log.lock().unwrap().0 = self.selects;
        Ok(1)
    }
    fn observe(&mut self, o: &Outcome) {
        assert_eq!((o.tree_index, o.n_nodes, o.draft_length), (1, 64, 4));
        self.observed.push(*o);
        self.log.lock().unwrap().1 = self.observed.len();
    }
    fn reset(&mut self) {
        self.resets += 1;
        self.log.lock().unwrap().2 = self.resets;
    }
}

#[test]
fn custom_policy_in_a_session() {
    let m = model();
    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new((0, 0, 0)));
    let mut pol = Policy::custom_with(Counting {
        selects: 0,
        observed: vec![],
        resets: 0,
        log: log.clone(),
    })
    .unwrap();
    let want = ar_reference(&m, PROMPTS[2], 20);
    {
        let mut s = Session::with_options(&m, Some(&h), Some(&bank), &no_stop()).unwrap();
        s.set_policy(Some(&mut pol)).unwrap();
        assert_eq!(log.lock().unwrap().2, 1, "attaching resets the policy");
        s.prefill(PROMPTS[2]).unwrap();
        assert_eq!(s.generate(20, false).unwrap(), want);
        let n = s.stats().n_steps as usize;
        assert_eq!(*log.lock().unwrap(), (n, n, 1));
        s.reset().unwrap();
        assert_eq!(log.lock().unwrap().2, 2);
    }
    // the session is gone: the policy is usable on its own again
    assert_eq!(
        pol.select(
            &Features {
                head_p: vec![0.0; 4],
                g: vec![0.0; 4],
                ..Features::default()
            },
            2
        )
        .unwrap(),
        1
    );
}

#[test]
fn custom_policy_panic_fails_the_step() {
    let m = model();
    let bank = bank2();
    let h = m.load_heads(&files().medusa).unwrap();
    let mut pol = Policy::custom(|_, _| panic!("policy crashed")).unwrap();
    let mut s = Session::new(&m, Some(&h), Some(&bank)).unwrap();
    s.set_policy(Some(&mut pol)).unwrap();
    s.prefill(&[1, 2, 3]).unwrap();
    let e = s.step(0).unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(e.message().contains("policy crashed"), "{}", e.message());
    assert!(e.tokens().is_empty());
    assert_eq!(s.tokens(), &[1, 2, 3]);
    let e = s.generate(5, false).unwrap_err();
    assert_eq!((e.status(), e.tokens().len()), (Status::Callback, 0));
    s.set_policy(None).unwrap();
    assert!(s.policy().is_none());
    assert_eq!(s.generate(3, false).unwrap().len(), 3);

    struct BadObserver;
    impl CustomPolicy for BadObserver {
        fn select(&mut self, _: &Features, _: usize) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
            Ok(0)
        }
        fn observe(&mut self, _: &Outcome) {
            panic!("observer crashed")
        }
    }
    let mut pol = Policy::custom_with(BadObserver).unwrap();
    let mut s = Session::new(&m, Some(&h), Some(&bank)).unwrap();
    s.set_policy(Some(&mut pol)).unwrap();
    s.prefill(&[1, 2, 3]).unwrap();
    let e = s.step(0).unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(e.message().contains("observer crashed"));
    assert!(!e.tokens().is_empty(), "the step itself went through");
    assert_eq!(s.tokens().len(), 3 + e.tokens().len());
}

#[test]
fn sessions_on_several_threads_share_a_model() {
    let m = model();
    let bank = bank2();
    let h = m.load_heads(&files().hydra).unwrap();
    let want = ar_reference(&m, PROMPTS[0], 30);
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                sc.spawn(|| {
                    let mut s = Session::with_options(&m, Some(&h), Some(&bank), &no_stop()).unwrap();
                    s.prefill(PROMPTS[0]).unwrap();
                    s.generate(30, false).unwrap()
                })
            })
            .collect();
        for t in handles {
            assert_eq!(t.join().unwrap(), want);
        }
    });
    // a session moves to another thread
    let mut s = Session::with_options(&m, Some(&h), Some(&bank), &no_stop()).unwrap();
    s.prefill(PROMPTS[0]).unwrap();
    let got = std::thread::scope(|sc| sc.spawn(move || s.generate(30, false).unwrap()).join().unwrap());
    assert_eq!(got, want);
}

/// The lossless invariant on files named by ENTMTP_TINY_MODEL and
/// ENTMTP_TINY_HEADS (e.g. CTest's build/tests/tmp/lossless_tiny.gguf and
/// lossless_medusa.safetensors). Ignored unless requested
/// (`cargo test -- --ignored`, which run_tests.sh does when both are set);
/// fails, rather than passing silently, when requested without them.
#[test]
#[ignore = "needs ENTMTP_TINY_MODEL and ENTMTP_TINY_HEADS"]
fn external_model_is_lossless() {
    let model_path = std::env::var("ENTMTP_TINY_MODEL").expect("ENTMTP_TINY_MODEL is not set");
    let heads_path = std::env::var("ENTMTP_TINY_HEADS").expect("ENTMTP_TINY_HEADS is not set");
    let m = Model::load_with(&model_path, &cpu()).unwrap();
    let h = m.load_heads(&heads_path).unwrap();
    let mut bank = Bank::with_max_depth(h.n_heads()).unwrap();
    bank.add_builtin(if h.n_heads() >= 2 { "chain_2" } else { "chain_1" })
        .unwrap();
    if h.n_heads() >= 4 {
        bank.add_builtin("mc_sim_7b_63").unwrap();
    }
    let want = ar_reference(&m, &[1, 5, 9, 3], 48);
    for k in 0..bank.len() {
        let mut p = Policy::static_tree(k).unwrap();
        let mut s = Session::with_options(&m, Some(&h), Some(&bank), &no_stop()).unwrap();
        s.set_policy(Some(&mut p)).unwrap();
        s.prefill(&[1, 5, 9, 3]).unwrap();
        assert_eq!(
            s.generate(48, false).unwrap(),
            want,
            "{}",
            bank.tree_info(k).unwrap().name
        );
    }
}
