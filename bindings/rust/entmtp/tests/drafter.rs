//! The drafter shipped for a model, matched by its identity (not its file
//! name), and what a session reports about what speculation bought.
use entmtp::{Backend, Bank, LoadOptions, Model, Policy, Session, SessionOptions, SpeedupSource, Status};

mod common;
use common::{files, scratch_dir};

fn cpu() -> LoadOptions {
    LoadOptions {
        backend: Backend::Cpu,
        threads: 1,
        ..LoadOptions::default()
    }
}

/// X.train.json recording `m`'s identity, optionally with another vocabulary hash.
fn write_train_json(stem: &std::path::Path, m: &Model, vocab_hash: u64) {
    let i = m.info();
    let text = format!(
        "{{\"kind\": \"hydra\", \"model\": {{\"architecture\": \"{}\", \"hidden_size\": {}, \"n_layers\": {}, \
         \"vocab_size\": {}, \"vocab_hash\": \"fnv1a64:{:016x}\"}}}}",
        i.architecture, i.hidden_size, i.n_layers, i.vocab_size, vocab_hash
    );
    std::fs::write(format!("{}.train.json", stem.display()), text).unwrap();
}

#[test]
fn renamed_model_finds_its_drafter_and_another_vocabulary_does_not() {
    let dir = scratch_dir().join("drafters");
    let other = scratch_dir().join("other-drafters");
    for d in [&dir, &other] {
        let _ = std::fs::remove_dir_all(d);
        std::fs::create_dir_all(d).unwrap();
    }
    let renamed = scratch_dir().join("renamed-model.gguf");
    std::fs::copy(&files().model, &renamed).unwrap();
    let m = Model::load_with(&renamed, &cpu()).unwrap();
    assert_ne!(m.info().vocab_hash, 0);
    assert!(m.info().load_seconds > 0.0);
    std::fs::copy(&files().hydra, dir.join("x.hydra.safetensors")).unwrap();
    write_train_json(&dir.join("x.hydra"), &m, m.info().vocab_hash);
    let d = m.find_drafter(dir.to_str().unwrap()).unwrap();
    assert!(d.heads_path.ends_with("x.hydra.safetensors"));
    assert_eq!(d.bank_path, None);
    assert!(d.reason.contains("matched by identity"), "{}", d.reason);

    std::fs::copy(&files().hydra, other.join("y.hydra.safetensors")).unwrap();
    write_train_json(&other.join("y.hydra"), &m, m.info().vocab_hash ^ 1);
    let e = m.find_drafter(other.to_str().unwrap()).unwrap_err();
    assert_eq!(e.status(), Status::NotFound);
    assert!(e.message().contains("vocabulary hash"), "{}", e.message());
}

#[test]
fn stats_report_warm_rate_and_speedup() {
    let m = Model::load_with(&files().model, &cpu()).unwrap();
    let h = m.load_heads(&files().hydra).unwrap();
    let mut b = Bank::with_max_depth(4).unwrap();
    for (i, (name, mal, tps)) in [("ar", 1.0, 100.0), ("chain_1", 1.5, 120.0), ("chain_3", 2.2, 110.0)]
        .iter()
        .enumerate()
    {
        b.add_builtin(name).unwrap();
        b.set_figures(i, *mal, *tps).unwrap();
    }
    let mut p = Policy::ucb(1.0, 0.0).unwrap();
    let opts = SessionOptions {
        stop_tokens: Some(vec![]),
        ..SessionOptions::default()
    };
    let mut s = Session::with_options(&m, Some(&h), Some(&b), &opts).unwrap();
    s.set_policy(Some(&mut p)).unwrap();
    assert_eq!(s.measure_ar(0).unwrap_err().status(), Status::State);
    s.prefill(&[1, 5, 9, 3]).unwrap();
    let out = s.generate(40, false).unwrap();
    let st = s.stats();
    assert_eq!(out.len() as u64, st.n_generated);
    assert_eq!(st.speedup_source, SpeedupSource::Estimated);
    // an AR step costs the "ar" tree's 10 ms: chain_1 1.25 AR steps, chain_3 2
    let usage = s.tree_usages();
    let spent: f64 = usage.iter().zip([1.0, 1.25, 2.0]).map(|(&n, c)| n as f64 * c).sum();
    assert!((st.speedup - st.n_generated as f64 / spent).abs() < 1e-5 * st.speedup);
    assert_eq!(st.n_warmup_steps, usage.iter().filter(|&&n| n > 0).count() as u64);
    let mt = s.measure_ar(16).unwrap();
    assert_eq!(mt.speedup_source, SpeedupSource::Measured);
    assert!((mt.speedup - mt.warm_tokens_per_second / mt.ar_tokens_per_second).abs() < 1e-9 * mt.speedup);
}
