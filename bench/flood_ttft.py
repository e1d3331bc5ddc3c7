#!/usr/bin/python3
"""flood_ttft.py - what one flooding client does to another client's time to first token
(issue 22, point 2: "a flooding client cannot raise another client's TTFT beyond 2x its
idle value").

Starts `sparsecp launch` (CPU, the embedded default model unless --model) with its HTTP
front on loopback, then:
  1. idle: the victim, a ZeroMQ client (`sparsecp submit`, one process per request),
     sends --probes short requests one after the other; each one's TTFT is the time
     from submission to its first token, read from `submit`'s streamed output;
  2. flood: one HTTP client (every connection from 127.0.0.1: one client to the
     scheduler's fair shares) keeps --flood-conns long completions in flight, refilling
     each as it ends (429s are counted and retried after 50 ms), while the victim sends
     the same probes again.
Prints one JSON object: idle and flooded TTFT (median, min, max, ms), their ratio, and
the flooder's completed / refused counts. Standard library only (/usr/bin/python3).

    bench/flood_ttft.py --sparsecp build/tools/sparsecp [--probes 7] [--flood-conns 48]
"""
import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time


def launch(exe, model):
    cmd = [exe, "launch", "--http", "127.0.0.1:0"]
    if model:
        cmd += ["--model", model]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "launched":
            return p, ev["listen"], ev["http"]
    p.kill()
    sys.exit("launch did not print its launched line")


def probe_ttft(exe, listen, seed):
    """One victim request through the ZeroMQ front: ms from start to its first token."""
    t0 = time.monotonic()
    p = subprocess.Popen([exe, "submit", "--connect", listen, "--prompt-len", "16",
                          "--max-tokens", "4", "--seed", str(seed), "--timeout", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    first = None  # submit prints each token as it arrives ("%d ", flushed), no newline
    while True:
        ch = p.stdout.read(1)
        if not ch:
            break
        if first is None and ch.isdigit():
            first = time.monotonic()
    rc = p.wait()
    if rc != 0 or first is None:
        raise RuntimeError(f"probe failed (exit {rc})")
    return (first - t0) * 1e3


def probes(exe, listen, n, base):
    out = []
    for i in range(n):
        out.append(probe_ttft(exe, listen, base + i))
        time.sleep(0.2)
    return out


class Flooder:
    def __init__(self, http_addr, conns, prompt_len, max_tokens):
        host, port = http_addr.rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.body = json.dumps({"model": "sparsecp", "prompt": list(range(1, prompt_len + 1)),
                                "max_tokens": max_tokens, "temperature": 0})
        self.stop = threading.Event()
        self.done = self.refused = self.failed = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(conns)]

    def run(self):
        while not self.stop.is_set():
            try:
                c = http.client.HTTPConnection(self.host, self.port, timeout=300)
                c.request("POST", "/v1/completions", self.body,
                          {"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                c.close()
                with self.lock:
                    if r.status == 200:
                        self.done += 1
                    elif r.status == 429:
                        self.refused += 1
                    else:
                        self.failed += 1
                if r.status == 429:
                    time.sleep(0.05)
            except OSError:
                with self.lock:
                    self.failed += 1
                time.sleep(0.05)

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()


def summary(v):
    return {"median_ms": round(statistics.median(v), 2), "min_ms": round(min(v), 2),
            "max_ms": round(max(v), 2), "n": len(v)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sparsecp", default="build/tools/sparsecp")
    ap.add_argument("--model", default=None)
    ap.add_argument("--probes", type=int, default=7)
    ap.add_argument("--flood-conns", type=int, default=48)
    ap.add_argument("--flood-prompt", type=int, default=256)
    ap.add_argument("--flood-tokens", type=int, default=256)
    ap.add_argument("--settle-s", type=float, default=3.0)
    a = ap.parse_args()
    p, listen, http_addr = launch(a.sparsecp, a.model)
    try:
        probe_ttft(a.sparsecp, listen, 1)  # warm-up
        idle = probes(a.sparsecp, listen, a.probes, 100)
        f = Flooder(http_addr, a.flood_conns, a.flood_prompt, a.flood_tokens)
        f.start()
        time.sleep(a.settle_s)  # the flooder's requests fill the batch first
        flooded = probes(a.sparsecp, listen, a.probes, 200)
        f.finish()
        res = {"idle": summary(idle), "flooded": summary(flooded),
               "ratio_of_medians": round(statistics.median(flooded) / statistics.median(idle), 2),
               "flooder": {"conns": a.flood_conns, "prompt": a.flood_prompt,
                           "max_tokens": a.flood_tokens, "completed": f.done,
                           "refused_429": f.refused, "failed": f.failed},
               "load_1m": os.getloadavg()[0]}
        print(json.dumps(res))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()


if __name__ == "__main__":
    main()
