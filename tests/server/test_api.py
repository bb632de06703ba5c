"""entmtp serve through real clients: the official `openai` package and curl.
Greedy replies must equal `entmtp generate`'s text for the same prompt."""
import json
import socket
import subprocess
import tempfile
import time

from serverutil import Server, check, generate_json, generate_text, skip

try:
    import openai
except ImportError:
    skip("the openai package is not installed (scripts/setup-deps.sh)")

PROMPTS = ["What is 2+2?", "Name three colours."]
N = 24


def curl(*args):
    r = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", *args], capture_output=True, text=True)
    body, _, code = r.stdout.rpartition("\n")
    return int(code), body


def stream_lines(port, body):
    """A raw streaming request: the socket and a reader of SSE lines"""
    s = socket.create_connection(("127.0.0.1", port))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    return s, s.makefile("rb")


def main():
    srv = Server("--parallel", "2")
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
        models = client.models.list().data
        check(len(models) == 1 and models[0].id == "SmolLM2-135M-Instruct.Q4_1", f"GET /v1/models lists the model ({models[0].id})")
        mid = models[0].id

        for p in PROMPTS:
            gen = generate_json(p, N)
            want = gen["text"]
            r = client.chat.completions.create(model=mid, messages=[{"role": "user", "content": p}],
                                               max_tokens=N, temperature=0)
            got = r.choices[0].message.content
            check(got == want, f"chat greedy equals entmtp generate for {p!r}: {got!r}")
            check(r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0, "usage block filled")
            x = r.model_extra["entmtp"]
            # trees picked by a deterministic policy must match too; time-driven
            # ones (throughput, dynamic, ucb) may pick differently from run to run
            same_trees = x["policy"] not in ("static", "ladder", "hysteresis") or (
                x["steps"] == gen["steps"] and x["tree_usage"] == gen["tree_usage"])
            check(x["mode"] == "entmtp" and x["policy"] == gen["policy"] and same_trees,
                  f"same policy as generate: {x['policy']}, {x['steps']} steps, accept {x['mean_accept_length']:.2f}")
            pieces, steps, final = [], [], None
            for chunk in client.chat.completions.create(model=mid, messages=[{"role": "user", "content": p}],
                                                        max_tokens=N, temperature=0, stream=True):
                c = chunk.choices[0]
                if c.delta.content:
                    pieces.append(c.delta.content)
                if c.finish_reason is None:
                    steps.append(chunk.model_extra["entmtp"])
                else:
                    final = chunk
            check("".join(pieces) == want, "streamed chat deltas join to the same text")
            check([s["step"] for s in steps] == list(range(1, len(steps) + 1)) and all(s["tree"] and s["accept_length"] >= 1 for s in steps),
                  f"each chunk names its step, tree and accept length ({len(steps)} steps)")
            check(final is not None and final.usage.completion_tokens == r.usage.completion_tokens, "closing chunk carries usage")

        # per-request decoding knobs: plain AR and another policy give the same greedy text
        p = PROMPTS[0]
        want = generate_text(p, N)
        for knobs, mode in [({"autoregressive": True}, "ar"), ({"policy": "hysteresis"}, "entmtp"), ({"policy": "ucb"}, "entmtp")]:
            r = client.chat.completions.create(model=mid, messages=[{"role": "user", "content": p}], max_tokens=N,
                                               temperature=0, extra_body={"entmtp": knobs})
            x = r.model_extra["entmtp"]
            check(r.choices[0].message.content == want and x["mode"] == mode, f"entmtp {knobs}: same greedy text, mode {x['mode']}, policy {x['policy']}")
        check(x["policy"] == "ucb", "the request's policy is the one used")

        raw = "The capital of France is"
        want = generate_text(raw, 12, raw=True)
        r = client.completions.create(model=mid, prompt=raw, max_tokens=12, temperature=0)
        check(r.choices[0].text == want and r.choices[0].finish_reason == "length", f"completions greedy equals generate --raw: {want!r}")
        streamed = "".join(c.choices[0].text for c in client.completions.create(model=mid, prompt=raw, max_tokens=12, temperature=0, stream=True))
        check(streamed == want, "streamed completion joins to the same text")
        stop = want.strip()[3:6]
        r = client.completions.create(model=mid, prompt=raw, max_tokens=12, temperature=0, stop=[stop])
        check(r.choices[0].text == want[:want.index(stop)] and r.choices[0].finish_reason == "stop", f"stop string {stop!r} cuts the text")
        # sampled text depends on the trees drawn from: pin a deterministic policy
        same = dict(model=mid, prompt=raw, max_tokens=12, temperature=0.8, seed=7, extra_body={"entmtp": {"policy": "static"}})
        r1, r2 = client.completions.create(**same), client.completions.create(**same)
        check(r1.choices[0].text == r2.choices[0].text, "same seed and policy, same sampled text")

        for kwargs, field in [({"max_tokens": 0}, "max_tokens"), ({"temperature": 5}, "temperature"),
                              ({"max_tokens": 100000}, "max_tokens"),
                              ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                             {"role": "user", "content": "c"}]}, "messages"),
                              ({"messages": [{"role": "robot", "content": "a"}]}, "messages"),
                              ({"extra_body": {"entmtp": {"policy": "fastest"}}}, "entmtp.policy")]:
            args = {"model": mid, "messages": [{"role": "user", "content": "hi"}], **kwargs}
            try:
                client.chat.completions.create(**args)
                check(False, f"{field} refused")
            except openai.BadRequestError as e:
                check(e.status_code == 400 and e.body["param"] == field, f"400 naming {field}: {e.body['message']}")

        code, body = curl("-X", "POST", srv.url + "/v1/chat/completions", "-d", '{"messages": [')
        check(code == 400 and json.loads(body)["error"]["param"] == "body", "curl: malformed JSON -> 400 naming body")
        with tempfile.NamedTemporaryFile("w", suffix=".json") as big:
            json.dump({"prompt": "x" * (1 << 21)}, big)
            big.flush()
            code, body = curl("-X", "POST", srv.url + "/v1/completions", "-H", "Content-Type: application/json",
                              "--data-binary", "@" + big.name)
        check(code == 413 and json.loads(body)["error"]["param"] == "body", "curl: 2 MiB body -> 413")
        code, body = curl(srv.url + "/v1/completions")
        check(code == 405, "curl: GET on a POST endpoint -> 405")
        code, body = curl(srv.url + "/nope")
        check(code == 404 and "error" in json.loads(body), "curl: unknown path -> 404 JSON")
        code, body = curl(srv.url + "/health")
        check(code == 200 and json.loads(body)["status"] == "ok", "curl: /health")
        code, body = curl("-N", srv.url + "/v1/completions", "-d", json.dumps({"prompt": raw, "max_tokens": 12, "temperature": 0, "stream": True}))
        events = [l[6:] for l in body.split("\n") if l.startswith("data: ")]
        check(code == 200 and events[-1] == "[DONE]" and "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]) == want,
              "curl: SSE stream ends with [DONE] and carries the greedy text")

        # a client that leaves mid-stream frees its slot and session
        s, f = stream_lines(srv.port, {"messages": [{"role": "user", "content": "Count to one thousand."}], "max_tokens": 1500, "stream": True})
        while b"data:" not in f.readline():
            pass
        check(srv.health()["active"] == 1, "a stream holds a slot")
        f.close()
        s.close()
        deadline = time.time() + 30
        while srv.health()["active"] != 0 and time.time() < deadline:
            time.sleep(0.1)
        check(srv.health()["active"] == 0, "the slot is free again after the client disconnects")

        # SIGTERM while a stream runs: it finishes, then the server exits 0
        s, f = stream_lines(srv.port, {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 16, "stream": True})
        while b"data:" not in f.readline():
            pass
        code = srv.stop()
        rest = f.read()
        check(b"data: [DONE]" in rest, "SIGTERM: the running stream is finished first")
        check(code == 0, f"SIGTERM: the server exits 0 (got {code})")
        s.close()
    finally:
        srv.stop()

    # one slot, no queue: a second request while the first streams gets 503
    srv = Server("--parallel", "1", "--queue", "0")
    try:
        s, f = stream_lines(srv.port, {"messages": [{"role": "user", "content": "Count to one thousand."}], "max_tokens": 1500, "stream": True})
        while b"data:" not in f.readline():
            pass
        status, body = srv.request("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
        check(status == 503 and body["error"]["code"] == "server_busy", f"busy -> 503 with a JSON error: {body['error']['message']}")
        f.close()
        s.close()
    finally:
        check(srv.stop() == 0, "second server exits 0 on SIGTERM")


if __name__ == "__main__":
    main()
