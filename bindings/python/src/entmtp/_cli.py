"""The `entmtp` console command of the Python package: `entmtp generate`
as the C CLI runs it (the shipped drafter matched by the model's identity,
the bank's default policy, the chat template), with the same summary. A thin
front end: it parses and prints; the library decides and measures.

The C CLI (built with CMake) has more commands (search, bench, serve, tree,
info); this one has `generate` and `version`.
"""
import argparse
import json
import sys

from . import __version__, version
from .errors import EntmtpError
from .model import Model
from .session import Session

_DEFAULT_PROMPT = "Write a Python function that checks whether a number is prime."


def _generate_parser(sub):
    g = sub.add_parser("generate", help="text in, text out, with EntMTP or plain AR",
                       description="Generate with the drafter shipped for the model (matched by its identity), "
                                   "or plain AR, and print what speculation bought.")
    g.add_argument("--model", required=True, help="GGUF file or Hugging Face directory")
    g.add_argument("--heads", help="Medusa/Hydra heads (.safetensors); default: the drafter shipped for the model")
    g.add_argument("--no-heads", action="store_true", help="plain AR even when heads are shipped")
    g.add_argument("--heads-path", help="directories to look for drafters in, ':'-separated "
                                        "(default: $ENTMTP_HEADS_DIR, the package's heads, <prefix>/share/entmtp/heads)")
    g.add_argument("--bank", help="bank JSON (default: the one shipped with the heads)")
    g.add_argument("--policy", help="static | ladder | hysteresis | ucb | throughput | dynamic (default: the bank's)")
    g.add_argument("--prompt", help="user message (chat template applied)")
    g.add_argument("--prompt-file", help="file holding the user message")
    g.add_argument("--system", help="system prompt for the chat template")
    g.add_argument("--raw", action="store_true", help="do not apply the chat template")
    g.add_argument("--max-tokens", type=int, default=128, help="tokens to generate (default 128)")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--seed", type=int, default=None, help="RNG seed for temperature > 0")
    g.add_argument("--ar", action="store_true", help="plain autoregressive decoding")
    g.add_argument("--compare-ar", action="store_true",
                   help="also time plain AR on the same prompt: the speedup is measured, not estimated")
    g.add_argument("--backend", default="auto", help="auto | cpu | cuda")
    g.add_argument("--threads", type=int, default=0, help="CPU threads (default: all cores)")
    g.add_argument("--compute", default="native", help="native | f32")
    g.add_argument("--kv", type=int, default=None, help="KV cache capacity in tokens")
    g.add_argument("--json", action="store_true", help="print one JSON object instead of text + summary")
    g.add_argument("--quiet", action="store_true", help="no streaming text, summary only")
    return g


def _prompt_tokens(model, args):
    text = args.prompt if args.prompt is not None else _DEFAULT_PROMPT
    if args.prompt_file:
        with open(args.prompt_file, encoding="utf-8") as f:
            text = f.read()
    if not args.raw:
        text = model.chat_prompt(text, args.system)
    return model.tokenize(text, add_special=True, parse_special=True)


def _summary(model, session, stats, args, ar):
    err = sys.stderr
    info = model.info
    backend = info.backend.name.lower()
    err.write("\n-- %s on %s: %d prompt tokens, %d generated in %d steps, mean accept length %.3f, %.2f tokens/s\n" % (
        "AR" if ar else "EntMTP", backend, stats.n_prompt_tokens, stats.n_generated, stats.n_steps,
        stats.mean_accept_length, stats.warm_tokens_per_second))
    err.write("-- decode: %.2f tokens/s without %d warm-up steps (first uses of each tree, %.3f s; all steps %.2f tokens/s)\n" % (
        stats.warm_tokens_per_second, stats.n_warmup_steps, stats.warmup_seconds, stats.tokens_per_second))
    if stats.speedup_source == "measured":
        err.write("-- speedup: %.2fx over AR (measured: AR %.2f tokens/s on the same prompt)\n" % (
            stats.speedup, stats.ar_tokens_per_second))
    elif stats.speedup_source == "estimated":
        err.write("-- speedup: %.2fx over AR (estimated from the bank's step costs: AR about %.2f tokens/s; "
                  "--compare-ar measures it)\n" % (stats.speedup, stats.ar_tokens_per_second))
    else:
        err.write("-- speedup: none (%s)\n" % (
            "plain AR decoding" if ar else "the bank has no step costs; --compare-ar measures AR"))
    err.write("-- load %.3f s; prefill %d tokens in %.3f s (%.1f tokens/s)\n" % (
        info.load_seconds, stats.n_prompt_tokens, stats.prefill_seconds, stats.prefill_tokens_per_second))
    if ar:
        err.write("-- drafter: none (%s)\n" % session.heads_reason)
        return
    h = session.heads.info
    pol = session.policy
    err.write("-- drafter: heads %s (%s, %d heads): %s\n" % (session.heads.path, h.kind.name.lower(), h.n_heads,
                                                          session.heads_reason))
    usage = " ".join("%s=%d" % (name, n) for name, n in zip(session.bank.names(), session.tree_usage()))
    err.write("-- bank: %s (%s); policy %s; tree usage: %s\n" % (
        session.bank_path or "built-in", session.bank_reason, pol.kind_name if pol is not None else "static", usage))


def _generate(args):
    model = Model(args.model, backend=args.backend, threads=args.threads, compute=args.compute)
    params = {"temperature": args.temperature}
    if args.seed is not None:
        params["seed"] = args.seed
    if args.kv is not None:
        params["kv_capacity"] = args.kv
    if args.ar or args.no_heads:
        session = Session(model, **params)
        session.drafter, session.bank_reason = None, ""
        session.heads_reason = "--ar" if args.ar else "--no-heads"
    else:
        session = Session.for_model(model, heads=args.heads, bank=args.bank, policy=args.policy,
                                    search_path=args.heads_path, **params)
        if session.heads is None and not args.json:
            sys.stderr.write("entmtp generate: no heads given (--heads) or shipped for this model: decoding plain AR "
                             "(%s)\n" % session.heads_reason)
    session.bank_path = args.bank or (session.drafter.bank_path if session.drafter else None)
    ar = session.heads is None
    pieces = []
    for piece in session.stream(_prompt_tokens(model, args), args.max_tokens, autoregressive=ar):
        pieces.append(piece)
        if not args.json and not args.quiet:
            sys.stdout.write(piece)
            sys.stdout.flush()
    if args.compare_ar and not ar:
        session.measure_ar()
    stats = session.stats()
    if args.json:
        out = dict(stats.__dict__, text="".join(pieces), mode="ar" if ar else "entmtp",
                   heads=session.heads.path if not ar else "", heads_reason=session.heads_reason,
                   bank=session.bank_path or "", bank_reason=session.bank_reason,
                   load_seconds=model.info.load_seconds, tokens=session.tokens()[stats.n_prompt_tokens:])
        print(json.dumps(out))
    else:
        if not args.quiet:
            sys.stdout.write("\n")
        _summary(model, session, stats, args, ar)
    session.close()
    model.close()
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="entmtp", description="EntMTP speculative decoding (Python front end)")
    sub = parser.add_subparsers(dest="command", required=True)
    _generate_parser(sub)
    sub.add_parser("version", help="print the version")
    args = parser.parse_args(argv)
    if args.command == "version":
        print("entmtp %s (library %s)" % (__version__, version()))
        return 0
    if args.max_tokens <= 0:
        parser.error("--max-tokens must be positive (got %d)" % args.max_tokens)
    if args.prompt is not None and args.prompt_file:
        parser.error("give --prompt or --prompt-file, not both")
    try:
        return _generate(args)
    except (EntmtpError, OSError) as e:
        sys.stderr.write("entmtp: %s\n" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
