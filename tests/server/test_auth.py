"""entmtp serve's access and bookkeeping (issue 33): a "model" that is not the
served one is 404 model_not_found (raw HTTP and the openai client's
NotFoundError); --api-key makes every endpoint but /health and the page
answer 401 without "Authorization: Bearer KEY"; a non-loopback --host is
refused without a key; one log line per request with its status and the
generation's figures; -c/--ctx-size, --temp and --chat-template; --top-k and
--tree bogus refused at parse time."""
import re
import subprocess
import sys
import time

from serverutil import Server, check, cli, model, skip

KEY = "test-key-5f3a"


def parse_refusal(args, needle):
    r = subprocess.run([cli(), "serve", "--model", model(), *args], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and needle in r.stderr, f"serve {' '.join(args)}: exit 2 naming {needle!r} ({r.returncode}: {r.stderr.strip()[:160]!r})")


def main():
    try:
        import openai
    except ImportError:
        skip("the openai package is not installed (scripts/setup-deps.sh)")
    parse_refusal(["--host", "0.0.0.0"], "--api-key")
    parse_refusal(["--top-k", "40"], "typical acceptance")
    parse_refusal(["--tree", "bogus"], "mc_sim_7b_63")
    parse_refusal(["--temp", "-1"], "--temp")

    # model_not_found, the log lines, the aliases (-c, --temp)
    srv = Server("-c", "256", "--temp", "0", "--max-tokens", "8")
    try:
        check("ctx 256" in srv.output(), "-c sets the context (the listening line says ctx 256)")
        status, body = srv.request("GET", "/v1/models")
        mid = body["data"][0]["id"]
        status, body = srv.request("POST", "/v1/chat/completions", {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
        err = body.get("error", {}) if isinstance(body, dict) else {}
        check(status == 404 and err.get("code") == "model_not_found" and err.get("param") == "model" and mid in err.get("message", ""),
              f"another model's name: 404 model_not_found naming the served one ({status} {body})")
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused")
        try:
            client.completions.create(model="no-such-model", prompt="hi", max_tokens=2)
            check(False, "the openai client raises NotFoundError")
        except openai.NotFoundError as e:
            check(e.status_code == 404 and getattr(e, "code", None) == "model_not_found", f"the openai client raises NotFoundError ({e.code})")
        for name in (mid, mid + ".gguf"):
            status, body = srv.request("POST", "/v1/chat/completions", {"model": name, "messages": [{"role": "user", "content": "hi"}]})
            check(status == 200, f"model {name!r} is served ({status})")
        usage = body["usage"]
        status, _ = srv.request("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 5, "stream": True})
        check(status == 200, "a streamed completion")
        status, _ = srv.request("GET", "/nowhere")
        n_requests = 1 + 1 + 1 + 2 + 1 + 1  # models, 404, client's 404, two served, stream, nowhere
        deadline = time.time() + 10  # a stream's line comes when the server lets go of it
        while True:
            lines = [l for l in srv.output().splitlines() if l.startswith("entmtp serve: ") and re.search(r" \d{3} [\d.]+ s", l)]
            if len(lines) >= n_requests or time.time() > deadline:
                break
            time.sleep(0.2)
        check(any(l.startswith("entmtp serve: GET /v1/models 200 ") for l in lines), "a line for GET /v1/models 200")
        check(any(" POST /v1/chat/completions 404 " in l and "model_not_found" in l for l in lines), "a line for the 404 with its code")
        want = f"prompt {usage['prompt_tokens']}, completion {usage['completion_tokens']} tokens"
        ok = [l for l in lines if " POST /v1/chat/completions 200 " in l and want in l and "tokens/s" in l and "accept length" in l]
        check(len(ok) >= 1, f"a line for the generation with its tokens, tokens/s and accept length ({want})")
        check(any(" POST /v1/completions 200 " in l and "completion 5 tokens" in l for l in lines), "a line for the streamed one, when it ends")
        check(any(" GET /nowhere 404 " in l for l in lines), "a line for an unknown path")
        check(len(lines) == n_requests, f"one line per request ({len(lines)} lines for {n_requests} requests)")
    finally:
        code = srv.stop()
    check(code == 0, "the server exits 0 on SIGTERM")

    # --api-key
    srv = Server("--api-key", KEY, "--max-tokens", "4")
    try:
        check("API key required" in srv.output(), "the listening line says a key is required")
        status, body = srv.request("GET", "/health")
        check(status == 200, "/health stays open")
        status, body = srv.request("GET", "/")
        check(status == 200 and "<html" in body, "the chat page stays open")
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
            status, body = srv.request("GET", "/v1/models", headers=headers)
            check(status == 401 and body["error"]["code"] == "invalid_api_key", f"401 invalid_api_key with {headers}")
        status, body = srv.request("POST", "/v1/completions", {"prompt": "hi"}, headers={"Content-Type": "application/json"})
        check(status == 401, "generation without the key: 401")
        status, body = srv.request("GET", "/v1/models", headers={"Authorization": "Bearer " + KEY})
        check(status == 200, "the key opens /v1/models")
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key=KEY)
        r = client.chat.completions.create(model=body["data"][0]["id"], messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        check(r.usage.completion_tokens >= 1, "the openai client with api_key generates")
        try:
            openai.OpenAI(base_url=srv.url + "/v1", api_key="nope").models.list()
            check(False, "a wrong key raises AuthenticationError")
        except openai.AuthenticationError:
            check(True, "a wrong key raises AuthenticationError")
    finally:
        code = srv.stop()
    check(code == 0, "the server exits 0 on SIGTERM")

    # a non-loopback address with the explicit opt-out: a warning, and it serves
    srv = Server("--host", "0.0.0.0", "--allow-no-api-key")
    try:
        check("warning: no API key on 0.0.0.0" in srv.output(), "--allow-no-api-key on 0.0.0.0 warns")
        check(srv.request("GET", "/health")[0] == 200, "and serves")
    finally:
        code = srv.stop()
    check(code == 0, "the server exits 0 on SIGTERM")

    # --chat-template: the model's family by name renders the same prompt (a
    # system message given: the plain family has no default one); another does not
    counts = {}
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    for tmpl in (None, "chatml", "llama3"):
        srv = Server(*(["--chat-template", tmpl] if tmpl else []))
        try:
            status, body = srv.request("POST", "/v1/chat/completions", {"messages": turns, "max_tokens": 1})
            counts[tmpl] = body["usage"]["prompt_tokens"]
        finally:
            code = srv.stop()
        check(code == 0, f"the server with --chat-template {tmpl} exits 0")
    check(counts[None] == counts["chatml"] != counts["llama3"], f"--chat-template chatml is the model's, llama3 another ({counts})")
    r = subprocess.run([cli(), "serve", "--model", model(), "--port", "0", "--chat-template", "{{ no markers }}"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode != 0 and "not recognised" in r.stderr, "a template of no known family fails at start-up")


if __name__ == "__main__":
    sys.exit(main())
