//! Version, errors, banks and every policy in isolation (no model needed).
use entmtp::{builtin_tree_names, sys, Bank, BankParams, CustomPolicy, Features, Outcome, Policy, PolicyKind, Status};

mod common;

fn picks(p: &mut Policy, s: &[f32], n_trees: usize) -> Vec<usize> {
    s.iter()
        .map(|&s| p.select(&Features::with_s(s), n_trees).unwrap())
        .collect()
}

fn next_f32(x: f32) -> f32 {
    f32::from_bits(x.to_bits() + 1)
}

// ------------------------------------------------------------- basics

#[test]
fn version_matches_header() {
    let (ma, mi, pa) = entmtp::HEADER_VERSION;
    assert_eq!(entmtp::version(), format!("{ma}.{mi}.{pa}"));
    assert_eq!(entmtp::version_number(), ma * 10000 + mi * 100 + pa);
    assert_eq!(entmtp::ABI_VERSION, 1);
    // run-time limits of the loaded library (entmtp_limit), not ABI constants
    use entmtp::{limit, Limit};
    assert_eq!(
        (limit(Limit::MaxHeads), limit(Limit::MaxLadder), limit(Limit::MaxStopTokens)),
        (16, 16, 64)
    );
    assert!(limit(Limit::MaxTreeNodes) >= 256 && limit(Limit::MaxTopk) >= 10);
}

#[test]
fn status_codes_roundtrip() {
    assert_eq!(Status::from_code(sys::ENTMTP_OK), None);
    for code in 1..=15u32 {
        let s = Status::from_code(code).unwrap();
        assert!(!matches!(s, Status::Unknown(_)), "{code}");
        assert_eq!(s.code(), code);
        assert!(s.name().starts_with("ENTMTP_ERR_"), "{}", s.name());
    }
    assert_eq!(Status::Format.name(), "ENTMTP_ERR_FORMAT");
    assert_eq!(Status::from_code(99), Some(Status::Unknown(99)));
}

#[test]
fn errors_carry_status_and_message() {
    entmtp::clear_error();
    assert_eq!(entmtp::last_error(), "");
    let b = Bank::new().unwrap();
    let e = b.find("nope").unwrap_err();
    assert_eq!(e.status(), Status::NotFound);
    assert!(e.message().contains("nope"));
    assert_eq!(e.message(), entmtp::last_error());
    assert_eq!(e.to_string(), format!("{} [ENTMTP_ERR_NOT_FOUND]", e.message()));
    assert!(e.tokens().is_empty());
    entmtp::clear_error();
    assert_eq!(entmtp::last_error(), "");
}

#[test]
fn builtin_names() {
    let names: Vec<&str> = builtin_tree_names().collect();
    for n in [
        "medusa_vicuna_7b_stage2",
        "mc_sim_7b_63",
        "hydra_default",
        "chain_1",
        "chain_5",
        "ar",
    ] {
        assert!(names.contains(&n), "{n}");
    }
}

// --------------------------------------------------------------- bank

#[test]
fn bank_build_and_query() {
    let mut b = Bank::with_params(&BankParams {
        max_depth: 4,
        topk: 10,
        max_nodes: 64,
    })
    .unwrap();
    assert!(b.is_empty());
    assert_eq!(b.add_tree("small", &[vec![0], vec![0, 0], vec![1]]).unwrap(), 0);
    assert_eq!(b.add_builtin("chain_2").unwrap(), 1);
    assert_eq!(b.add_tree_json("json_tree", "[[0],[1],[2],[0,0]]").unwrap(), 2);
    let none: [&[i32]; 0] = [];
    assert_eq!(b.add_tree("root_only", &none).unwrap(), 3);
    assert_eq!(b.len(), 4);
    assert_eq!(
        b.names().collect::<Vec<_>>(),
        ["small", "chain_2", "json_tree", "root_only"]
    );
    assert_eq!(b.find("chain_2").unwrap(), 1);
    assert_eq!(b.get("zzz"), None);
    assert!(b.contains("json_tree") && !b.contains("zzz"));
    let t = b.tree_info(0).unwrap();
    assert_eq!(
        (t.index, t.name, t.n_nodes, t.depth, t.n_paths, t.n_leaves),
        (0, "small", 4, 2, 3, 2)
    );
    let r = b.tree_info(3).unwrap();
    assert_eq!((r.n_nodes, r.depth), (1, 0));
    let iter: Vec<usize> = (&b).into_iter().map(|t| t.index).collect();
    assert_eq!(iter, [0, 1, 2, 3]);
    assert_eq!(b.trees().len(), 4);
    b.set_figures(0, 2.5, 120.0).unwrap();
    let t = b.tree_info(0).unwrap();
    assert_eq!((t.mean_accept_length, t.tokens_per_second), (2.5, 120.0));
    assert_eq!(format!("{b:?}"), r#"["small", "chain_2", "json_tree", "root_only"]"#);
}

#[test]
fn tree_buffers() {
    let mut b = Bank::new().unwrap();
    b.add_tree("small", &[&[0][..], &[0, 0], &[1]]).unwrap();
    let tb = b.tree_buffers(0).unwrap();
    assert_eq!((tb.n_nodes, tb.depth, tb.n_leaves, tb.topk), (4, 2, 2, 10));
    assert_eq!(tb.attn_mask, [1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1]);
    assert_eq!(tb.mask_row(3), [1, 1, 0, 1]);
    assert_eq!(tb.position_ids, [0, 1, 1, 2]);
    assert_eq!(tb.parents, [-1, 0, 0, 1]);
    assert_eq!(tb.node_ranks, [-1, 0, 1, 0]);
    assert_eq!(tb.tree_indices, [0, 1, 2, 11]);
    assert_eq!(tb.retrieve_row(0), [0, 1, 3]);
    assert_eq!(tb.retrieve_row(1), [0, 2, -1]);
    let mc = {
        b.add_builtin("mc_sim_7b_63").unwrap();
        b.tree_buffers(1).unwrap()
    };
    assert_eq!((mc.n_nodes, mc.depth), (64, 4));
    assert_eq!(mc.retrieve_indices.len(), mc.n_leaves * 5);
}

#[test]
fn invalid_trees_name_the_path() {
    let cases: &[(&[&[i32]], &str)] = &[
        (&[&[0], &[1, 2]], "[1,2]"),
        (&[&[0], &[0]], "[0]"),
        (&[&[0], &[10]], "[10]"),
        (&[&[0], &[-1]], "[-1]"),
    ];
    let mut b = Bank::new().unwrap();
    b.add_builtin("chain_1").unwrap();
    for (choices, needle) in cases {
        let e = b.add_tree("bad", choices).unwrap_err();
        assert_eq!(e.status(), Status::InvalidTree);
        assert!(
            e.message().contains(needle) && e.message().contains("bad"),
            "{}",
            e.message()
        );
    }
    assert_eq!(b.len(), 1);
    let mut small = Bank::with_params(&BankParams {
        max_depth: 2,
        max_nodes: 4,
        ..BankParams::default()
    })
    .unwrap();
    let e = small.add_tree("deep", &[&[0][..], &[0, 0], &[0, 0, 0]]).unwrap_err();
    assert!(e.message().contains("[0,0,0]"), "{}", e.message());
    let e = small.add_tree("wide", &[[0], [1], [2], [3]]).unwrap_err();
    assert_eq!(e.status(), Status::InvalidTree);
    assert!(small.add_tree("", &[[0]]).is_err());
    small.add_tree("ok", &[[0]]).unwrap();
    assert!(small.add_tree("ok", &[[1]]).unwrap_err().message().contains("ok"));
    assert_eq!(
        small.add_tree_json("j", "[[0],[0,").unwrap_err().status(),
        Status::InvalidTree
    );
    assert_eq!(
        small.add_tree("nul\0name", &[[0]]).unwrap_err().status(),
        Status::InvalidArgument
    );
}

#[test]
fn bank_lookup_errors() {
    let mut b = Bank::new().unwrap();
    b.add_builtin("chain_3").unwrap();
    assert_eq!(b.add_builtin("nope").unwrap_err().status(), Status::NotFound);
    assert_eq!(b.tree_info(99).unwrap_err().status(), Status::OutOfRange);
    assert_eq!(b.tree_buffers(5).unwrap_err().status(), Status::OutOfRange);
    assert_eq!(b.set_figures(5, 1.0, 1.0).unwrap_err().status(), Status::OutOfRange);
    assert_eq!(b.tree_info(usize::MAX).unwrap_err().status(), Status::OutOfRange);
}

#[test]
fn bank_files_and_stored_policies() {
    let dir = common::scratch_dir();
    let mut b = Bank::new().unwrap();
    b.add_tree("small", &[&[0][..], &[0, 0], &[1]]).unwrap();
    b.add_builtin("mc_sim_7b_63").unwrap();
    b.set_figures(1, 3.25, 42.0).unwrap();
    b.set_policy_config(&Policy::hysteresis(0.3, 0.1).unwrap()).unwrap();
    b.set_policy_config(&Policy::ladder(&[0.2], Some(&[1, 0])).unwrap())
        .unwrap();
    let path = dir.join("bank.json");
    b.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"mc_sim_7b_63\"") && text.contains("hysteresis"));
    let c = Bank::load(&path, None).unwrap();
    assert_eq!(c.names().collect::<Vec<_>>(), b.names().collect::<Vec<_>>());
    assert_eq!(c.tree_info(1).unwrap().mean_accept_length, 3.25);
    let h = c.policy(PolicyKind::Hysteresis).unwrap();
    assert_eq!(h.kind(), PolicyKind::Hysteresis);
    assert!((h.config().tau_on - 0.3).abs() < 1e-6 && (h.config().tau_off - 0.1).abs() < 1e-6);
    let l = Policy::from_bank(&c, PolicyKind::Ladder).unwrap();
    assert_eq!(l.ladder_trees(), &[1, 0]);
    assert_eq!(c.policy(PolicyKind::Ucb).unwrap_err().status(), Status::NotFound);
    drop(c); // the policy keeps its own copy of the bank's arrays
    assert_eq!(l.ladder_trees(), &[1, 0]);
    assert_eq!(l.thresholds(), &[0.2]);
    // errors
    let mut d = Bank::new().unwrap();
    d.add_builtin("chain_1").unwrap();
    assert_eq!(
        d.set_policy_config(&Policy::custom(|_, _| 0).unwrap())
            .unwrap_err()
            .status(),
        Status::InvalidConfig
    );
    assert_eq!(
        d.set_policy_config(&Policy::static_tree(3).unwrap())
            .unwrap_err()
            .status(),
        Status::OutOfRange
    );
    let e = Bank::load(dir.join("missing.json"), None).unwrap_err();
    assert_eq!(e.status(), Status::Io);
    assert!(e.message().contains("missing.json"));
    std::fs::write(dir.join("bad.json"), "{\"trees\": [").unwrap();
    assert_eq!(
        Bank::load(dir.join("bad.json"), None).unwrap_err().status(),
        Status::Format
    );
    assert_eq!(d.save(dir.join("no/such/dir.json")).unwrap_err().status(), Status::Io);
    let limited = Bank::load(
        &path,
        Some(&BankParams {
            max_depth: 2,
            ..BankParams::default()
        }),
    );
    assert!(limited.is_err(), "mc_sim_7b_63 is deeper than 2");
}

// ------------------------------------------------------------ policies

#[test]
fn policy_kind_names() {
    for k in PolicyKind::ALL {
        assert_eq!(PolicyKind::from_name(k.name()).unwrap(), k);
    }
    assert_eq!(PolicyKind::Ucb.name(), "ucb");
    let e = PolicyKind::from_name("bandit").unwrap_err();
    assert_eq!(e.status(), Status::NotFound);
    assert!(e.message().contains("bandit"));
}

#[test]
fn static_policy() {
    let mut p = Policy::static_tree(2).unwrap();
    assert_eq!(p.kind(), PolicyKind::Static);
    assert_eq!(picks(&mut p, &[0.0, 0.5, 1.0], 3), [2, 2, 2]);
    p.validate(3).unwrap();
    assert_eq!(p.validate(2).unwrap_err().status(), Status::OutOfRange);
    let e = p.select(&Features::with_s(0.5), 2).unwrap_err();
    assert_eq!(e.status(), Status::OutOfRange);
}

#[test]
fn ladder_bin_edges() {
    let mut p = Policy::ladder(&[0.1, 0.5], None).unwrap();
    let s = [-1.0, 0.0, 0.1, next_f32(0.1), 0.3, 0.5, next_f32(0.5), 1.0];
    assert_eq!(picks(&mut p, &s, 3), [0, 0, 0, 1, 1, 1, 2, 2]);
    let mut q = Policy::ladder(&[0.1, 0.5], Some(&[2, 0, 1])).unwrap();
    assert_eq!(picks(&mut q, &[0.05, 0.2, 0.9], 3), [2, 0, 1]);
    assert!(q.validate(2).unwrap_err().message().contains("ladder_trees[0]"));
    assert_eq!(
        p.select(&Features::with_s(f32::NAN), 3).unwrap_err().status(),
        Status::InvalidArgument
    );
    let mut one = Policy::ladder(&[], None).unwrap();
    assert_eq!(picks(&mut one, &[0.0, 1.0], 1), [0, 0]);
}

#[test]
fn ladder_bad_configs() {
    for (th, needle) in [
        (&[0.5f32, 0.1][..], "thresholds[1]"),
        (&[0.1, 0.1], "thresholds[1]"),
        (&[f32::INFINITY], "not finite"),
    ] {
        let e = Policy::ladder(th, None).unwrap_err();
        assert_eq!(e.status(), Status::InvalidConfig);
        assert!(e.message().contains(needle), "{}", e.message());
    }
    let many: Vec<f32> = (0..16).map(|i| i as f32 / 100.0).collect();
    assert_eq!(Policy::ladder(&many, None).unwrap_err().status(), Status::InvalidConfig);
    assert_eq!(
        Policy::ladder(&[0.1, 0.2], Some(&[0, 1])).unwrap_err().status(),
        Status::InvalidConfig
    );
}

#[test]
fn hysteresis_does_not_flap() {
    let mut p = Policy::hysteresis(0.3, 0.1).unwrap();
    let s = [
        0.05, 0.2, 0.3, 0.35, 0.2, 0.15, 0.11, 0.31, 0.1, 0.2, 0.29, 0.3, 0.31, 0.0,
    ];
    assert_eq!(picks(&mut p, &s, 2), [0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0]);
    p.reset().unwrap();
    let osc: Vec<f32> = (0..40).map(|i| if i % 2 == 0 { 0.12 } else { 0.28 }).collect();
    assert_eq!(picks(&mut p, &osc, 2), vec![0; 40]);
    assert_eq!(p.select(&Features::with_s(0.5), 2).unwrap(), 1);
    assert_eq!(picks(&mut p, &osc, 2), vec![1; 40]);
    let mut q = Policy::hysteresis_trees(0.5, 0.5, 2, 0).unwrap();
    assert_eq!(picks(&mut q, &[0.4, 0.6, 0.5, 0.51], 3), [2, 0, 2, 0]);
    let e = Policy::hysteresis(0.1, 0.3).unwrap_err();
    assert_eq!(e.status(), Status::InvalidConfig);
    assert!(e.message().contains("tau_off"));
    assert_eq!(
        Policy::hysteresis(f32::NAN, 0.1).unwrap_err().status(),
        Status::InvalidConfig
    );
    assert!(Policy::hysteresis(0.3, 0.1)
        .unwrap()
        .validate(1)
        .unwrap_err()
        .message()
        .contains("aggressive_tree"));
}

#[test]
fn ucb_tries_every_arm_then_settles() {
    let mut p = Policy::ucb(0.5, 0.0).unwrap();
    let accept = [1usize, 4, 2];
    let mut first = Vec::new();
    let mut counts = [0usize; 3];
    for step in 0..300 {
        let k = p.select(&Features::default(), 3).unwrap();
        if step < 3 {
            first.push(k);
        }
        if step >= 200 {
            counts[k] += 1;
        }
        p.observe(&Outcome {
            tree_index: k,
            accept_length: accept[k],
            draft_length: 2,
            ..Outcome::default()
        })
        .unwrap();
    }
    first.sort();
    assert_eq!(first, [0, 1, 2]);
    assert!(counts[1] >= 90, "{counts:?}");
    p.reset().unwrap();
    let mut again = Vec::new();
    for _ in 0..3 {
        let k = p.select(&Features::default(), 3).unwrap();
        again.push(k);
        p.observe(&Outcome::new(k, 1)).unwrap();
    }
    again.sort();
    assert_eq!(again, [0, 1, 2]);
}

#[test]
fn ucb_length_penalty_and_errors() {
    let mut p = Policy::ucb(0.0, 1.0).unwrap();
    let draft = [1usize, 8];
    for _ in 0..50 {
        let k = p.select(&Features::default(), 2).unwrap();
        p.observe(&Outcome {
            tree_index: k,
            accept_length: 2,
            draft_length: draft[k],
            ..Outcome::default()
        })
        .unwrap();
    }
    assert_eq!(p.select(&Features::default(), 2).unwrap(), 0);
    let mut q = Policy::ucb(1.0, 0.0).unwrap();
    assert!(q
        .observe(&Outcome::new(0, 1))
        .unwrap_err()
        .message()
        .contains("never selected"));
    q.select(&Features::default(), 2).unwrap();
    assert_eq!(
        q.observe(&Outcome::new(0, 0)).unwrap_err().status(),
        Status::InvalidArgument
    );
    assert_eq!(Policy::ucb(-1.0, 0.0).unwrap_err().status(), Status::InvalidConfig);
    assert_eq!(
        Policy::ucb(1.0, f32::INFINITY).unwrap_err().status(),
        Status::InvalidConfig
    );
}

struct Recorder {
    selects: std::sync::Arc<std::sync::Mutex<Vec<(Features, usize)>>>,
    outcomes: std::sync::Arc<std::sync::Mutex<Vec<Outcome>>>,
    resets: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl CustomPolicy for Recorder {
    fn select(&mut self, f: &Features, n: usize) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
        self.selects.lock().unwrap().push((f.clone(), n));
        if f.s < 0.0 {
            return Err("negative s".into());
        }
        Ok(if f.s > 0.5 { 1 } else { 0 })
    }
    fn observe(&mut self, o: &Outcome) {
        self.outcomes.lock().unwrap().push(*o);
    }
    fn reset(&mut self) {
        self.resets.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn custom_policy_sees_features_and_outcomes() {
    let selects = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let outcomes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let resets = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut p = Policy::custom_with(Recorder {
        selects: selects.clone(),
        outcomes: outcomes.clone(),
        resets: resets.clone(),
    })
    .unwrap();
    assert_eq!(p.kind(), PolicyKind::Custom);
    let mut f = Features {
        s: 0.7,
        p0: 0.9,
        entropy: 1.5,
        last_accept_length: 3,
        accept_length_ema: 2.5,
        step: 7,
        ..Features::default()
    };
    f.head_p = vec![0.8, 0.6];
    f.g = vec![0.72, 0.432];
    assert_eq!(p.select(&f, 4).unwrap(), 1);
    let (got, n) = selects.lock().unwrap()[0].clone();
    assert_eq!(n, 4);
    assert_eq!(got, f);
    assert_eq!(got.head_p(), [0.8, 0.6]);
    assert_eq!(p.select(&Features::with_s(0.2), 4).unwrap(), 0);
    let o = Outcome {
        tree_index: 1,
        n_nodes: 10,
        draft_length: 4,
        accept_length: 3,
        seconds: 0.5,
    };
    p.observe(&o).unwrap();
    assert_eq!(*outcomes.lock().unwrap(), [o]);
    p.reset().unwrap();
    assert_eq!(resets.load(std::sync::atomic::Ordering::SeqCst), 1);
    // an Err from select is a Callback error with the error as source
    let e = p.select(&Features::with_s(-1.0), 4).unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(e.message().contains("negative s"), "{}", e.message());
    assert_eq!(std::error::Error::source(&e).unwrap().to_string(), "negative s");
    assert_eq!(p.select(&Features::with_s(0.9), 4).unwrap(), 1);
}

#[test]
fn custom_policy_panics_do_not_unwind_into_c() {
    let mut p = Policy::custom(|f, _| {
        if f.s > 0.5 {
            panic!("no tree for s = {}", f.s)
        } else {
            0
        }
    })
    .unwrap();
    let e = p.select(&Features::with_s(0.75), 2).unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(
        e.message().contains("panicked: no tree for s = 0.75"),
        "{}",
        e.message()
    );
    assert!(std::error::Error::source(&e).is_some());
    // usable afterwards
    assert_eq!(p.select(&Features::with_s(0.1), 2).unwrap(), 0);
}

#[test]
fn custom_policy_bad_indices() {
    let e = Policy::custom(|_, _| 5)
        .unwrap()
        .select(&Features::default(), 2)
        .unwrap_err();
    assert_eq!(e.status(), Status::OutOfRange);
    assert!(e.message().contains("chose tree 5"));
    let e = Policy::custom(|_, _| usize::MAX)
        .unwrap()
        .select(&Features::default(), 2)
        .unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(e.message().contains("does not fit"));
}

#[test]
fn custom_policy_observe_and_reset_panics() {
    struct Bad;
    impl CustomPolicy for Bad {
        fn select(&mut self, _: &Features, _: usize) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
            Ok(0)
        }
        fn observe(&mut self, _: &Outcome) {
            panic!("observe failed")
        }
        fn reset(&mut self) {
            panic!("reset failed")
        }
    }
    let mut p = Policy::custom_with(Bad).unwrap();
    let e = p.observe(&Outcome::new(0, 1)).unwrap_err();
    assert_eq!(e.status(), Status::Callback);
    assert!(e.message().contains("observe failed"));
    assert!(p.reset().unwrap_err().message().contains("reset failed"));
    assert_eq!(p.select(&Features::default(), 1).unwrap(), 0);
}

#[test]
fn custom_policy_state_lives_with_the_policy() {
    let mut p = {
        let mut calls = 0usize;
        Policy::custom(move |_, n| {
            calls += 1;
            calls % n
        })
        .unwrap()
    };
    let got: Vec<usize> = (0..4).map(|_| p.select(&Features::default(), 3).unwrap()).collect();
    assert_eq!(got, [1, 2, 0, 1]);
    // moved to another thread and used there
    let h = std::thread::spawn(move || p.select(&Features::default(), 3).unwrap());
    assert_eq!(h.join().unwrap(), 2);
}

#[test]
fn custom_config_without_select_is_invalid() {
    // the safe API cannot build one; check the library's validation through sys
    let mut c: sys::entmtp_policy_config = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<sys::entmtp_policy_config>();
    assert_eq!(unsafe { sys::entmtp_policy_config_init(&mut c, size, sys::ENTMTP_POLICY_CUSTOM) }, sys::ENTMTP_OK);
    let mut out = std::ptr::null_mut();
    let st = unsafe { sys::entmtp_policy_create(&c, &mut out) };
    assert_eq!(st, sys::ENTMTP_ERR_INVALID_CONFIG);
    assert!(out.is_null());
    assert!(entmtp::last_error().contains("select"));
}

#[test]
fn features_limits() {
    let f = Features {
        head_p: vec![0.5; 17],
        g: vec![0.5; 17],
        ..Features::default()
    };
    assert_eq!(
        Policy::static_tree(0).unwrap().select(&f, 1).unwrap_err().status(),
        Status::InvalidArgument
    );
}

#[test]
fn custom_policy_sees_every_rank_and_the_outlook() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut p = Policy::custom(move |f, _| {
        log.lock().unwrap().push(f.clone());
        0
    })
    .unwrap();
    let f = Features {
        p0: 0.5,
        head_p: vec![0.6, 0.3],
        g: vec![0.3, 0.09],
        head_topk_p: vec![vec![0.6, 0.2, 0.1], vec![0.3, 0.25, 0.2]],
        expected_accept: Some(vec![1.0, 1.5]),
        expected_seconds: Some(vec![0.01, 0.02]),
        ..Features::default()
    };
    assert_eq!((f.topk(), f.n_heads()), (3, 2));
    assert_eq!(p.select(&f, 2).unwrap(), 0);
    let got = seen.lock().unwrap().last().unwrap().clone();
    assert_eq!((got.topk(), got.n_trees), (3, 2));
    assert_eq!(got.head_topk(1), &[0.3, 0.25, 0.2]);
    assert!(got.head_topk(2).is_empty());
    assert_eq!(got.expected_accept, Some(vec![1.0, 1.5]));
    assert_eq!(got.outlook(1), Some((1.5, 0.02)));
    assert_eq!(got.outlook(2), None);
    // without them: no ranks, no outlook
    p.select(&Features::with_s(0.5), 2).unwrap();
    let got = seen.lock().unwrap().last().unwrap().clone();
    assert!(got.head_topk_p.is_empty() && got.expected_accept.is_none() && got.outlook(0).is_none());
}

#[test]
fn throughput_reads_the_outlook_of_the_features() {
    let mut p = Policy::throughput().unwrap();
    assert_eq!(p.kind(), PolicyKind::Throughput);
    // 1.0, 1.333 and 1.0 tokens per second: the middle tree
    let f = Features {
        expected_accept: Some(vec![1.0, 2.0, 3.0]),
        expected_seconds: Some(vec![1.0, 1.5, 3.0]),
        ..Features::default()
    };
    assert_eq!(p.select(&f, 3).unwrap(), 1);
    let e = p.select(&f, 2).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("features.n_trees = 3"), "{}", e.message());
    assert_eq!(p.select(&Features::with_s(0.5), 3).unwrap_err().status(), Status::State);
    assert_eq!(Policy::dynamic().unwrap().kind(), PolicyKind::Dynamic);
}

#[test]
fn features_outlook_errors() {
    let mut p = Policy::static_tree(0).unwrap();
    let cases = [
        Features {
            head_topk_p: vec![vec![0.5]],
            ..Features::default()
        },
        Features {
            head_p: vec![0.5],
            g: vec![0.5],
            head_topk_p: vec![vec![0.1; 65]],
            ..Features::default()
        },
        Features {
            expected_accept: Some(vec![1.0]),
            ..Features::default()
        },
        Features {
            expected_accept: Some(vec![1.0]),
            expected_seconds: Some(vec![0.1]),
            n_trees: 2,
            ..Features::default()
        },
    ];
    for f in &cases {
        assert_eq!(p.select(f, 1).unwrap_err().status(), Status::InvalidArgument, "{f:?}");
    }
}
