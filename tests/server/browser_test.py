"""The page at "/" in headless Chromium: a message sent from the page streams a reply in
(more than one delta), and the reply's stats line shows the policy and the keys-read fraction.
Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: fd 3 in,
fd 4 out, NUL-terminated JSON), so nothing but the standard library is needed."""
import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

from serve_process import Server


class DevTools:
    def __init__(self, chromium, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # The child sees the pipes as fds 3 and 4: moved above 10 first so that neither dup2
        # overwrites the other end, and made inheritable (dup2 onto itself would keep CLOEXEC).
        to_chrome_r, from_chrome_w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w))

        def wire():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-pipe", "--user-data-dir=" + profile, "about:blank"],
            preexec_fn=wire, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.next_id = 0
        self.buf = b""

    def call(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while time.time() < deadline:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            chunk = os.read(self.from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buf += chunk
        raise TimeoutError(method)

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--magicpig", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    a = p.parse_args()
    with Server(a.magicpig, a.model) as srv, tempfile.TemporaryDirectory() as profile:
        dt = DevTools(a.chromium, profile)
        try:
            query = urllib.parse.urlencode({"autotest": "Tell me a story about a cat.", "policy": "magicpig", "max": "24"})
            target = dt.call("Target.createTarget", {"url": f"{srv.url}/?{query}"})["targetId"]
            session = dt.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            probe = ("(() => { const r = document.querySelector('.reply');"
                     " const s = document.querySelector('.stats');"
                     " return r ? JSON.stringify({cls: r.className, chunks: Number(r.dataset.chunks),"
                     " text: r.textContent, stats: s ? s.textContent : ''}) : null; })()")
            state = None
            deadline = time.time() + 60
            while time.time() < deadline:
                v = dt.call("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session)
                value = v["result"].get("value")
                state = json.loads(value) if value else None
                if state and "done" in state["cls"].split():
                    break
                time.sleep(0.2)
        finally:
            dt.close()
    print(f"reply: {state}")
    if not state or "done" not in state["cls"].split() or "error" in state["cls"].split():
        sys.exit("the reply did not finish cleanly")
    if state["chunks"] < 2 or not state["text"].strip():
        sys.exit("the reply did not stream in (fewer than 2 deltas)")
    if "magicpig" not in state["stats"] or "keys read" not in state["stats"]:
        sys.exit("the stats line lacks the policy or the keys-read fraction")
    print("browser test passed")


if __name__ == "__main__":
    main()
