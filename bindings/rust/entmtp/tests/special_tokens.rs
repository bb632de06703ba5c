//! `Model::tokenize_special(.., TokenizeSpecial::AddSpecial, ..)` gives
//! llama.cpp's ids (its tokenizer with add_special, recorded by
//! scripts/record-special-fixtures.sh from llama.cpp-py0.3.16's llama-server
//! into tests/data/llamacpp/special-tokens.json) for a random-weight model
//! of each family whose tokenizer asks for a BOS (Gemma 2/3, Llama 3, Llama
//! 2/Mistral SentencePiece, Phi-3), one that does not (Qwen2/SmolLM2 style),
//! one with add_eos_token and add_sep_token, one with add_bos_token off: the
//! plain prompt and the chat template's text, never two BOS. The models
//! (llama.cpp's real vocabularies, from the pinned source) are written by
//! tests/python/special_tokens.py export; skipped, saying why, without
//! python3 + gguf + numpy or the llama.cpp source.
use std::path::PathBuf;
use std::process::Command;

use entmtp::{Backend, LoadOptions, Model, TokenizeSpecial};

fn hex(s: &str) -> String {
    let b: Vec<u8> = (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect();
    String::from_utf8(b).unwrap()
}

fn ids(s: &str) -> Vec<i32> {
    s.split_whitespace().map(|x| x.parse().unwrap()).collect()
}

#[test]
fn add_special_matches_llamacpp() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let writer = root.join("tests/python/special_tokens.py");
    if !writer.exists() {
        eprintln!("skipped: not in a source checkout ({})", writer.display());
        return;
    }
    let out = std::env::temp_dir().join(format!("entmtp-special-{}", std::process::id()));
    let st = Command::new("python3").arg(&writer).arg("export").arg(&out).status();
    match st {
        Ok(s) if s.success() => {}
        Ok(s) => {
            eprintln!("skipped: special_tokens.py export exited with {s} (llama.cpp source, gguf, numpy?)");
            let _ = std::fs::remove_dir_all(&out);
            return;
        }
        Err(e) => {
            eprintln!("skipped: python3: {e}");
            return;
        }
    }
    let text = std::fs::read_to_string(out.join("cases.txt")).unwrap();
    let (mut prompt, mut user) = (String::new(), String::new());
    let mut model: Option<(Model, String, i32)> = None;
    let mut n_checked = 0;
    for line in text.lines() {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "prompt" => prompt = hex(rest),
            "user" => user = hex(rest),
            "case" => {
                let mut f = rest.splitn(3, ' ');
                let (name, bos, path) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
                let opts = LoadOptions { backend: Backend::Cpu, threads: 1, ..LoadOptions::default() };
                let m = Model::load_with(path, &opts).unwrap();
                model = Some((m, name.to_string(), bos.parse().unwrap()));
            }
            _ => {
                let (m, name, bos) = model.as_ref().unwrap();
                let want = ids(rest);
                let got = match key {
                    "plain" => m.tokenize_special(&prompt, TokenizeSpecial::AddSpecial, true).unwrap(),
                    "chat" => {
                        let chat = m.chat_prompt(&user, None).unwrap();
                        let got = m.tokenize_special(&chat, TokenizeSpecial::AddSpecial, true).unwrap();
                        assert!(got.len() < 2 || got[..2] != [*bos, *bos], "{name}: two BOS");
                        got
                    }
                    "empty" => m.tokenize_special("", TokenizeSpecial::AddSpecial, true).unwrap(),
                    _ => panic!("cases.txt: unknown line {line}"),
                };
                assert_eq!(got, want, "{name}: {key}");
                if key == "plain" {
                    // the old boolean keeps its meaning: off = the text's tokens only, on = one BOS first
                    let bare = m.tokenize(&prompt, false, true).unwrap();
                    assert_eq!(bare, m.tokenize_special(&prompt, TokenizeSpecial::None, true).unwrap());
                    let forced = m.tokenize(&prompt, true, true).unwrap();
                    assert_eq!(forced[0], *bos, "{name}");
                    assert_eq!(&forced[1..], &bare[..], "{name}");
                }
                n_checked += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(n_checked >= 3, "cases.txt held {n_checked} checks");
}
