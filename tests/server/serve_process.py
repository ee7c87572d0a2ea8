"""Starts `magicpig serve` on a free loopback port for a test and stops it afterwards."""
import os
import re
import signal
import subprocess
import sys
import time


class Server:
    def __init__(self, magicpig, model, *extra):
        self.proc = subprocess.Popen(
            [magicpig, "serve", "-m", model, "--port", "0", "-t", "2", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "OMP_WAIT_POLICY": "passive"})
        self.port = None
        deadline = time.time() + 60
        lines = []
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.stop()
            sys.exit("magicpig serve did not start:\n" + "".join(lines))
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise RuntimeError("magicpig serve did not stop on SIGTERM")
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
