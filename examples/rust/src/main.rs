//! A complete EntMTP program in Rust: load a model and heads, build a bank of
//! two trees, attach the hysteresis policy and generate (the same as
//! examples/c/generate.c).
//!
//! usage: generate MODEL HEADS [PROMPT_IDS...]
//!        generate MODEL HEADS --prompt TEXT   (needs a model with a tokenizer)
//!        generate --bank-demo                 (no model: shows trees and a policy)
use std::io::Write;
use std::process::ExitCode;

use entmtp::{Bank, Features, Model, Policy, Session, TokenizeSpecial};

fn bank_demo() -> entmtp::Result<()> {
    let mut bank = Bank::new()?;
    bank.add_tree("small", &[&[0][..], &[0, 0], &[1]])?;
    bank.add_builtin("mc_sim_7b_63")?;
    for t in &bank {
        println!(
            "tree {}: {:<14} {:3} nodes, depth {}, {} leaves",
            t.index, t.name, t.n_nodes, t.depth, t.n_leaves
        );
    }
    // an invalid tree is an error value with the library's message, never a crash
    if let Err(e) = bank.add_tree("bad", &[&[0][..], &[1, 2]]) {
        println!("invalid tree -> {}: {}", e.status().name(), e.message());
    }
    let mut policy = Policy::hysteresis(0.2, 0.05)?;
    for s in [0.01f32, 0.3, 0.1, 0.04] {
        println!("s = {s:.2} -> tree {}", policy.select(&Features::with_s(s), bank.len())?);
    }
    Ok(())
}

fn generate(model_path: &str, heads_path: &str, args: &[String]) -> entmtp::Result<()> {
    let model = Model::load(model_path)?;
    let heads = model.load_heads(heads_path)?;
    let mut bank = Bank::with_max_depth(heads.n_heads())?;
    bank.add_builtin("chain_2")?;
    bank.add_builtin("mc_sim_7b_63")?;
    let mut policy = Policy::hysteresis(0.3, 0.1)?;
    // the session borrows the model, heads, bank and policy: none of them can
    // be dropped (or the bank changed) while it exists
    let mut session = Session::new(&model, Some(&heads), Some(&bank))?;
    session.set_policy(Some(&mut policy))?;
    let text = args.first().map(|a| a == "--prompt").unwrap_or(false);
    let prompt: Vec<i32> = if text {
        model.tokenize_special(args.get(1).map(String::as_str).unwrap_or(""), TokenizeSpecial::AddSpecial, false)?
    } else if args.is_empty() {
        vec![1, 2, 3, 4]
    } else {
        args.iter().map(|a| a.parse().unwrap_or(0)).collect()
    };
    session.prefill(&prompt)?;
    print!("tokens:");
    let out = session.generate_with(32, false, |batch| {
        for t in batch {
            print!(" {t}");
        }
        let _ = std::io::stdout().flush();
        false
    })?;
    println!();
    if text {
        println!("text: {:?}", model.detokenize(&out)?);
    }
    let st = session.stats();
    let usage: Vec<String> = bank.names().zip(session.tree_usages()).map(|(n, u)| format!("{n}: {u}")).collect();
    println!(
        "{} tokens in {} steps, mean accept length {:.2}, tree usage {{{}}}",
        st.n_generated,
        st.n_steps,
        st.mean_accept_length,
        usage.join(", ")
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (ma, mi, pa) = entmtp::HEADER_VERSION;
    println!("EntMTP {} (bindings generated from header {ma}.{mi}.{pa})", entmtp::version());
    let r = if args.len() == 2 && args[1] == "--bank-demo" {
        bank_demo()
    } else if args.len() >= 3 {
        generate(&args[1], &args[2], &args[3..])
    } else {
        eprintln!("usage: {} MODEL HEADS [PROMPT_IDS...] | MODEL HEADS --prompt TEXT | --bank-demo", args[0]);
        return ExitCode::from(2);
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}: {}", e.status().name(), e.message());
            ExitCode::FAILURE
        }
    }
}
