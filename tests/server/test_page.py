"""The chat page in headless Chromium (Debian's package), driven over the
DevTools protocol on a pipe: load /?prompt=...&send=1, wait for the streamed
reply, check it equals the greedy API answer, that it is split into coloured
per-step bands with a drawn tree and live statistics, and take a screenshot
that must show those colours. Then a second turn: the page sends the history
(its reply equals the API's answer to the two-turn conversation), and after a
reload the conversation is still there (localStorage)."""
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

from serverutil import Server, check, skip

PROMPT = "What is 2+2?"
PROMPT2 = "And times 3?"
N = 24


class Browser:
    """Chromium with --remote-debugging-pipe: JSON messages, NUL-terminated,
    written to its fd 3 and read from its fd 4."""

    def __init__(self, exe):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        self.profile = tempfile.mkdtemp(prefix="entmtp-chromium-")
        # fd 3 and 4 of the child: dup the pipe ends there in the child
        def fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)
        self.proc = subprocess.Popen([exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                                      f"--user-data-dir={self.profile}", "--window-size=1200,800", "about:blank"],
                                     preexec_fn=fds, close_fds=False,  # fds 3 and 4 must survive
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buf:
                chunk = os.read(self.from_chrome, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        skip("chromium is not installed (scripts/setup-deps.sh)")
    try:
        from PIL import Image
    except ImportError:
        skip("Pillow is not installed (scripts/setup-deps.sh)")
    srv = Server("--parallel", "2")
    browser = None
    try:
        status, want = srv.request("POST", "/v1/chat/completions",
                                   {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": N, "temperature": 0})
        want = want["choices"][0]["message"]["content"]
        browser = Browser(exe)
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        url = f"{srv.url}/?send=1&max_tokens={N}&prompt={urllib.parse.quote(PROMPT)}"
        browser.call("Page.navigate", session, url=url)

        def js(expr):
            r = browser.call("Runtime.evaluate", session, expression=expr, returnByValue=True)
            return r["result"].get("value")

        deadline = time.time() + 120
        state = None
        while time.time() < deadline and state not in ("done", "error"):
            time.sleep(0.25)
            state = js("document.body && document.body.dataset.state")
        error = js("document.getElementById('error').textContent")
        check(state == "done", f"the page streamed a reply (state {state}, error {error!r})")
        got = js("document.getElementById('reply').textContent")
        check(got == want, f"rendered reply equals the greedy API answer: {got!r}")
        bands = js("[...document.querySelectorAll('#reply span')].map(s => [s.dataset.step, s.style.backgroundColor, s.title])")
        check(len(bands) >= 2 and [int(b[0]) for b in bands] == list(range(1, len(bands) + 1)),
              f"one coloured band per step ({len(bands)} steps)")
        check(len({b[1] for b in bands}) > 1 and all("tree n" in b[2] for b in bands), f"bands differ in colour and name their tree: {bands[0][2]!r}")
        drawn = js("[document.querySelectorAll('#tree circle').length, +[...document.querySelectorAll('#reply span')].pop().dataset.nodes]")
        check(drawn[0] >= 1 and drawn[0] == drawn[1], f"the last step's tree is drawn ({drawn[0]} nodes of {drawn[1]})")
        stats = js("['accept','mean_accept','tps','treename'].map(i => document.getElementById(i).textContent)")
        check(all(s not in ("", "–") for s in stats) and float(stats[2]) > 0, f"live accept length, mean, tokens/s, tree: {stats}")

        shot = base64.b64decode(browser.call("Page.captureScreenshot", session, format="png")["data"])
        out = os.environ.get("ENTMTP_SCREENSHOT") or os.path.join(tempfile.gettempdir(), "entmtp-chat-page.png")
        with open(out, "wb") as f:
            f.write(shot)
        img = Image.open(io.BytesIO(shot)).convert("RGB")
        colours = {c for _, c in img.getcolors(maxcolors=1 << 24)}
        palette = {(0xff, 0xe0, 0x8a), (0xa8, 0xe6, 0xcf), (0xff, 0xb3, 0xba), (0xba, 0xe1, 0xff), (0xd5, 0xba, 0xff), (0xff, 0xdf, 0xba)}
        shown = palette & colours
        check(img.size[0] >= 800 and len(shown) >= 2, f"screenshot {out} ({img.size[0]}x{img.size[1]}) shows {len(shown)} step colours")

        # turn two: the page sends the whole conversation
        status, want2 = srv.request("POST", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": PROMPT}, {"role": "assistant", "content": want},
                                                  {"role": "user", "content": PROMPT2}], "max_tokens": N, "temperature": 0})
        want2 = want2["choices"][0]["message"]["content"]
        check(js("document.getElementById('prompt').value") == "", "the box is emptied after a reply")
        js(f"document.getElementById('prompt').value = {json.dumps(PROMPT2)}; document.getElementById('send').click(); 1")
        state, deadline = None, time.time() + 120
        while time.time() < deadline and state not in ("done", "error"):
            time.sleep(0.25)
            state = js("document.body.dataset.state")
        got2 = js("document.getElementById('reply').textContent")
        check(state == "done" and got2 == want2, f"turn two answers the two-turn conversation: {got2!r} == {want2!r}")
        history = js("[...document.querySelectorAll('#history .turn')].map(d => [d.className, d.textContent])")
        check(history == [["turn user", PROMPT], ["turn assistant", want]], f"turn one moved into the history: {history}")
        # a reload keeps the conversation
        browser.call("Page.navigate", session, url=srv.url + "/")
        deadline, turns = time.time() + 30, None
        while time.time() < deadline and not turns:
            time.sleep(0.25)
            turns = js("document.getElementById('history') && [...document.querySelectorAll('#history .turn')].map(d => d.textContent)")
        check(turns == [PROMPT, want, PROMPT2, want2], f"the conversation survives a reload: {turns}")
        js("document.getElementById('new').click(); 1")
        check(js("[document.querySelectorAll('#history .turn').length, localStorage.getItem('entmtp-chat-messages')]") == [0, "[]"],
              "New chat clears the conversation and its stored copy")
    finally:
        if browser:
            browser.close()
        code = srv.stop()
    check(code == 0, "server exits 0 on SIGTERM")


if __name__ == "__main__":
    sys.exit(main())
