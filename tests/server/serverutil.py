"""Shared by the server tests: start `entmtp serve` on 127.0.0.1 with a free
port, talk to it, stop it with SIGTERM. Each test is a plain script whose exit
code CTest reads: 0 pass, 1 fail, 77 skipped (a tool or the model missing)."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import http.client

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def cli():
    path = os.environ.get("ENTMTP_CLI") or os.path.join(ROOT, "build", "dev", "entmtp")
    if not os.access(path, os.X_OK):
        skip(f"no entmtp binary at {path} (set ENTMTP_CLI)")
    if subprocess.run([path, "serve", "--help"], capture_output=True).returncode != 0:
        skip("entmtp was built without libmicrohttpd (no serve command)")
    return path


def model():
    path = os.environ.get("ENTMTP_MODEL") or os.path.join(ROOT, ".cache", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        skip(f"model not fetched: {path} (scripts/fetch-model.sh)")
    return path


class Server:
    def __init__(self, *args):
        self.log = tempfile.NamedTemporaryFile(prefix="entmtp-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([cli(), "serve", "--model", model(), "--port", "0", "--threads", "1", *args],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        self.port = None
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.output()}")
            m = re.search(r"listening on http://[^:]+:(\d+)", self.output())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.2)
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("server did not start: " + self.output())
        self.url = f"http://127.0.0.1:{self.port}"

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def request(self, method, path, body=None, headers=None, timeout=300):
        """(status, parsed JSON or text) over a fresh connection"""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read().decode("utf-8", "replace")
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data

    def health(self):
        return self.request("GET", "/health")[1]

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self, timeout=120):
        """SIGTERM, then the exit code (the server drains first)"""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None
        finally:
            if os.path.exists(self.log.name):
                os.unlink(self.log.name)


def generate_text(prompt, max_tokens, raw=False):
    """What `entmtp generate` prints for the same prompt (greedy)"""
    return generate_json(prompt, max_tokens, raw)["text"]


def generate_json(prompt, max_tokens, raw=False):
    """`entmtp generate --json` for the same prompt (greedy)"""
    args = [cli(), "generate", "--model", model(), "--prompt", prompt, "--max-tokens", str(max_tokens),
            "--json", "--threads", "1"] + (["--raw"] if raw else [])
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)
