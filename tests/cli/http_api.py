#!/usr/bin/python3
"""http_api.py - the head's HTTP front as its users reach it (issue 24, docs/http.md).

Starts real clusters with `sparsecp launch --http 127.0.0.1:0` (a free port) and talks to
them with the real `openai` Python client (the vendored PyPI wheel, tests/vendor), curl,
raw sockets and http.client: completions streamed and not, token-identical to `sparsecp
submit` for the same prompt and seed; concurrent clients; a client that vanishes
mid-stream (its request is canceled); malformed JSON, wrong types, huge bodies, unknown
routes, slow-loris headers, a full queue (429), API keys; text prompts, text output and
stop strings with a tokenizer; and /metrics parsed by prometheus_client's parser, its
counters matched against what the test itself sent and received; a model with an
end-of-sequence token (its eos_token_id) ending completions with finish_reason "stop", its
text whole, and ignore_eos running past it. The cluster must keep serving throughout:
every refusal is followed by a request that succeeds.

usage: http_api.py SPARSECP_BINARY SOURCE_DIR
Run by /usr/bin/python3 (Debian's, whose packages the Makefile installs).
"""
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

BIN, SRC = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="sparsecp-http-test-")
PROCS = []


def fail(msg):
    raise AssertionError(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


# ---- the vendored openai client ----

def load_openai():
    vendor = os.path.join(SRC, "tests", "vendor")
    sums = {}
    for line in open(os.path.join(vendor, "SHA256SUMS")):
        digest, name = line.split()
        sums[name] = digest
    dest = os.path.join(WORK, "py")
    for name, digest in sums.items():
        data = open(os.path.join(vendor, name), "rb").read()
        check(hashlib.sha256(data).hexdigest() == digest, f"{name}: checksum mismatch")
        zipfile.ZipFile(os.path.join(vendor, name)).extractall(dest)
    sys.path.insert(0, dest)
    import openai  # noqa: E402
    return openai


# ---- a cluster ----

class Cluster:
    def __init__(self, *extra):
        args = [BIN, "launch", "--http", "127.0.0.1:0", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        PROCS.append(self.proc)
        line = self.proc.stdout.readline()
        if '"launched"' not in line:
            self.proc.kill()
            fail(f"launch printed no launched line: {line!r} {self.proc.stderr.read()}")
        self.info = json.loads(line)
        self.port = int(self.info["http"].rsplit(":", 1)[1])
        self.listen = self.info["listen"]
        deadline = time.time() + 60
        while time.time() < deadline:  # ready: every node joined
            if self.get("/health")[0] == 200:
                return
            if self.proc.poll() is not None:
                fail(f"launch exited {self.proc.returncode}: {self.proc.stderr.read()[-2000:]}")
            time.sleep(0.1)
        fail("the cluster never became healthy")

    def conn(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        c = self.conn()
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        h = {"Content-Type": "application/json", **(headers or {})}
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        out = r.status, dict(r.getheaders()), r.read()
        c.close()
        return out

    def get(self, path, headers=None):
        try:
            return self.request("GET", path, headers=headers)
        except OSError as e:
            return 0, {}, str(e).encode()

    def complete(self, body, headers=None):
        status, hdrs, data = self.request("POST", "/v1/completions", body, headers)
        return status, json.loads(data) if data else None

    def stream(self, body):
        """(status, events): events are the decoded data: lines, "[DONE]" as is."""
        c = self.conn()
        c.request("POST", "/v1/completions", body=json.dumps({**body, "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            out = r.status, [json.loads(r.read())]
            c.close()
            return out
        check(r.getheader("Content-Type", "").startswith("text/event-stream"),
              f"stream content type {r.getheader('Content-Type')}")
        events = []
        for raw in r.read().decode().split("\n\n"):
            if not raw.strip():
                continue
            check(raw.startswith("data: "), f"not an SSE data line: {raw!r}")
            payload = raw[6:]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
        c.close()
        return 200, events

    def metrics(self):
        from prometheus_client.parser import text_string_to_metric_families
        status, hdrs, data = self.get("/metrics")
        check(status == 200, f"/metrics answered {status}: {data[:200]!r}")
        check(hdrs.get("Content-Type", "").startswith("text/plain"), "metrics content type")
        samples = {}
        for fam in text_string_to_metric_families(data.decode()):
            for s in fam.samples:
                key = s.name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items())) + "}"
                                if s.labels else "")
                samples[key] = s.value
        return samples

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("launch did not stop within 20 s of SIGTERM")


def serves(c, prompt=(1, 2, 3)):
    """The cluster still serves: a small completion succeeds."""
    status, body = c.complete({"prompt": list(prompt), "max_tokens": 2, "temperature": 0})
    check(status == 200 and len(body["choices"][0]["token_ids"]) == 2,
          f"the cluster stopped serving: {status} {body}")


def submit_tokens(c, prompt, max_tokens, temperature=None, seed=None):
    path = os.path.join(WORK, "prompt.json")
    json.dump(list(prompt), open(path, "w"))
    args = [BIN, "submit", "--connect", c.listen, "--prompt-file", path, "--max-tokens",
            str(max_tokens), "--json", "--timeout", "60"]
    if temperature is not None:
        args += ["--temperature", str(temperature)]
    if seed is not None:
        args += ["--seed", str(seed)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=90)
    check(out.returncode == 0, f"submit failed: {out.stdout} {out.stderr}")
    return json.loads(out.stdout)["tokens"]


# ---- without a tokenizer: token ids ----

def test_token_ids(c, openai):
    prompt = [11, 22, 33, 44, 55, 66, 77]
    status, models = c.request("GET", "/v1/models")[0], json.loads(c.request("GET", "/v1/models")[2])
    check(status == 200 and models["data"][0]["id"], f"/v1/models: {models}")
    model = models["data"][0]["id"]
    # not streamed, greedy and sampled, against `sparsecp submit`
    for temperature, seed in ((0, 5), (0.8, 1234)):
        status, body = c.complete({"model": model, "prompt": prompt, "max_tokens": 6,
                                   "temperature": temperature, "seed": seed})
        check(status == 200, f"completion: {status} {body}")
        ch = body["choices"][0]
        check(ch["finish_reason"] == "length" and ch["text"] == "", f"choice {ch}")
        check(body["usage"] == {"prompt_tokens": 7, "completion_tokens": 6, "total_tokens": 13},
              f"usage {body['usage']}")
        ref = submit_tokens(c, prompt, 6, temperature if temperature else None, seed)
        check(ch["token_ids"] == ref, f"HTTP tokens {ch['token_ids']} != submit's {ref}")
        # streamed: one chunk per token, the same tokens, [DONE] last
        status, events = c.stream({"prompt": prompt, "max_tokens": 6, "temperature": temperature,
                                   "seed": seed})
        check(status == 200 and events[-1] == "[DONE]", f"stream: {status} {events[-2:]}")
        chunks = events[:-1]
        ids = [t for e in chunks for t in e["choices"][0]["token_ids"]]
        check(ids == ref, f"streamed tokens {ids} != {ref}")
        check(all(len(e["choices"][0]["token_ids"]) == 1 for e in chunks[:-1]),
              "one token per chunk")
        check(chunks[-1]["choices"][0]["finish_reason"] == "length", f"last chunk {chunks[-1]}")
    # the openai client, streamed and not
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{c.port}/v1", api_key="unused",
                           max_retries=0)
    ref = submit_tokens(c, prompt, 5, None, 9)
    r = client.completions.create(model=model, prompt=prompt, max_tokens=5, temperature=0,
                                  seed=9)
    check(json.loads(r.to_json())["choices"][0]["token_ids"] == ref,
          f"openai client: {r.to_json()} != {ref}")
    check(r.usage.completion_tokens == 5 and r.choices[0].finish_reason == "length", str(r))
    ids = []
    for chunk in client.completions.create(model=model, prompt=prompt, max_tokens=5,
                                           temperature=0, seed=9, stream=True,
                                           stream_options={"include_usage": True}):
        d = json.loads(chunk.to_json())
        if d["choices"]:
            ids += d["choices"][0]["token_ids"]
        else:
            check(d["usage"]["completion_tokens"] == 5, f"usage chunk {d}")
    check(ids == ref, f"openai stream {ids} != {ref}")
    # the API's errors through the client
    try:
        client.completions.create(model="no-such-model", prompt=prompt, max_tokens=2)
        fail("a wrong model was served")
    except openai.NotFoundError:
        pass
    # curl, as a user would
    out = subprocess.run(["curl", "-sS", "-N", f"http://127.0.0.1:{c.port}/v1/completions",
                          "-H", "Content-Type: application/json", "-d",
                          json.dumps({"prompt": prompt, "max_tokens": 5, "temperature": 0,
                                      "seed": 9, "stream": True})],
                         capture_output=True, text=True, timeout=60)
    lines = [l[6:] for l in out.stdout.split("\n") if l.startswith("data: ")]
    check(lines[-1] == "[DONE]", f"curl stream: {out.stdout[-200:]}")
    check([t for l in lines[:-1] for t in json.loads(l)["choices"][0]["token_ids"]] == ref,
          "curl stream tokens")


def test_malformed(c):
    """Every refusal has the API's error object and status; the cluster serves after each."""
    cases = [
        (b"{not json", 400, ""),
        (b"[1,2]", 400, ""),
        ({"max_tokens": 3}, 400, "prompt"),
        ({"prompt": 5}, 400, "prompt"),
        ({"prompt": []}, 400, "prompt"),
        ({"prompt": [1, -2]}, 400, "prompt"),
        ({"prompt": [1, 2.5]}, 400, "prompt"),
        ({"prompt": [[1], [2]]}, 400, "prompt"),
        ({"prompt": [1, 99999999]}, 400, ""),          # beyond the vocabulary
        ({"prompt": [1], "max_tokens": "x"}, 400, "max_tokens"),
        ({"prompt": [1], "max_tokens": 0}, 400, "max_tokens"),
        ({"prompt": [1], "max_tokens": 10 ** 9}, 400, ""),  # beyond the generation limit
        ({"prompt": [1], "temperature": 3}, 400, "temperature"),
        ({"prompt": [1], "temperature": "hot"}, 400, "temperature"),
        ({"prompt": [1], "stream": "yes"}, 400, "stream"),
        ({"prompt": [1], "n": 2}, 400, "n"),
        ({"prompt": [1], "logprobs": 3}, 400, "logprobs"),
        ({"prompt": [1], "seed": "s"}, 400, "seed"),
        ({"prompt": "text without a tokenizer"}, 400, "prompt"),
        ({"prompt": [1], "stop": ["x"]}, 400, "stop"),
        ({"prompt": [1], "model": 7}, 400, "model"),
        ({"prompt": [1], "model": "other"}, 404, "model"),
        ({"prompt": [1] * 5000, "max_tokens": 1}, 413, ""),  # beyond the prompt limit (4095)
    ]
    for body, want, param in cases:
        status, _, data = c.request("POST", "/v1/completions", body)
        check(status == want, f"{str(body)[:80]}: status {status}, expected {want}: {data[:300]!r}")
        err = json.loads(data)["error"]
        check(err["message"] and err["type"] and err["code"] == want, f"error object {err}")
        if param:
            check(err["param"] == param, f"{str(body)[:60]}: param {err['param']}, expected {param}")
    serves(c)
    for method, path, want in (("GET", "/v1/completions", 405), ("GET", "/nowhere", 404),
                               ("POST", "/health", 405), ("DELETE", "/v1/models", 405)):
        status, _, data = c.request(method, path, b"" if method != "GET" else None)
        check(status == want, f"{method} {path}: {status}, expected {want}")
    # a body larger than the server takes, announced or chunked, is refused unread
    s = socket.create_connection(("127.0.0.1", c.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000000000\r\n\r\n" + b"[" * 65536)
    check(b" 413 " in s.recv(4096).split(b"\r\n")[0], "a 1 GB body was not refused with 413")
    s.close()
    # chunked: libmicrohttpd takes no answer during an upload, so it is read and dropped
    s = socket.create_connection(("127.0.0.1", c.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    for _ in range(8):
        s.sendall(b"100000\r\n" + b" " * 0x100000 + b"\r\n")
    s.sendall(b"0\r\n\r\n")
    check(b" 413 " in s.recv(4096).split(b"\r\n")[0], "an 8 MB chunked body was not refused")
    s.close()
    serves(c)


def test_concurrent(c):
    """16 streaming clients at once get exactly what each gets alone (greedy tokens do not
    depend on the batch: SPEC §7-8)."""
    prompts = [[(i * 7 + k) % 4000 + 1 for k in range(5 + i)] for i in range(16)]
    alone = []
    for p in prompts[:4]:
        status, body = c.complete({"prompt": p, "max_tokens": 8, "temperature": 0})
        alone.append(body["choices"][0]["token_ids"])
    results = [None] * 16

    def one(i):
        results[i] = c.stream({"prompt": prompts[i], "max_tokens": 8, "temperature": 0})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for i, r in enumerate(results):
        check(r and r[0] == 200 and r[1][-1] == "[DONE]", f"client {i}: {r}")
        ids = [t for e in r[1][:-1] for t in e["choices"][0]["token_ids"]]
        check(len(ids) == 8, f"client {i}: {len(ids)} tokens")
        if i < 4:
            check(ids == alone[i], f"client {i} batched {ids} != alone {alone[i]}")


def test_vanishing_client(c):
    before = c.metrics()
    s = socket.create_connection(("127.0.0.1", c.port), timeout=30)
    body = json.dumps({"prompt": [5, 6, 7], "max_tokens": 4000, "temperature": 0,
                       "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while b"data: " not in got:
        got += s.recv(4096)
    s.close()  # gone mid-stream
    key = 'sparsecp_requests_total{outcome="canceled"}'
    deadline = time.time() + 10
    while time.time() < deadline:
        m = c.metrics()
        if m[key] > before[key] and m["sparsecp_requests_running"] == 0:
            break
        time.sleep(0.1)
    else:
        fail(f"a vanished client's request was not canceled: {m[key]} {m['sparsecp_requests_running']}")
    serves(c)


def test_slow_loris(c):
    """Connections that dribble their headers do not hold up other clients, and an idle one
    is closed after --http-timeout-s (2 here)."""
    slow = []
    for _ in range(32):
        s = socket.create_connection(("127.0.0.1", c.port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    t0 = time.time()
    for k in range(3):
        for s in slow[:16]:
            s.sendall(b"X-%d: y\r\n" % k)
        serves(c)
    check(time.time() - t0 < 30, "clients were held up by slow ones")
    idle = slow[16]
    idle.settimeout(15)
    t0 = time.time()
    try:
        check(idle.recv(1024) is not None, "")
    except OSError:
        pass
    check(time.time() - t0 < 12, "an idle connection was not closed")
    for s in slow:
        s.close()
    serves(c)


def test_metrics(c, submitted_by_zmq):
    """The counters move by exactly what this test did."""
    before = c.metrics()
    sent_prompt, got_tokens, n = 0, 0, 0
    for i in range(5):
        p = [100 + i] * (3 + i)
        status, body = c.complete({"prompt": p, "max_tokens": 4 + i, "temperature": 0})
        check(status == 200, f"{status} {body}")
        sent_prompt += len(p)
        got_tokens += len(body["choices"][0]["token_ids"])
        n += 1
    toks = submitted_by_zmq(c)
    sent_prompt += 4
    got_tokens += len(toks)
    n += 1
    status, _ = c.complete({"prompt": [1, 2], "n": 3})  # refused by the front
    check(status == 400, "n = 3 was served")
    after = c.metrics()

    def delta(k):
        return after[k] - before[k]

    check(delta('sparsecp_requests_total{outcome="length"}') == n, "finished requests")
    check(delta('sparsecp_requests_total{outcome="rejected"}') == 1, "refused requests")
    check(delta("sparsecp_prompt_tokens_total") == sent_prompt, "prompt tokens")
    check(delta("sparsecp_generation_tokens_total") == got_tokens, "generated tokens")
    check(delta("sparsecp_time_to_first_token_seconds_count") == n, "TTFT observations")
    check(delta("sparsecp_time_per_output_token_seconds_count") == got_tokens - n,
          "TPOT observations")
    check(delta('sparsecp_scheduler_requests_total{event="admitted"}') == n, "admitted")
    check(delta('sparsecp_scheduler_requests_total{event="finished"}') == n, "finished")
    check(delta("sparsecp_steps_total") > 0 and
          delta("sparsecp_step_seconds_count") == delta("sparsecp_steps_total"), "steps")
    check(after["sparsecp_kv_blocks_in_use"] == 0 and after["sparsecp_requests_running"] == 0,
          "idle cluster holds blocks")
    check(any(k.startswith("sparsecp_planned_collectives_total") and v > 0
              for k, v in after.items()) or c.info["nodes"] == 1, "planned collectives")
    check(after["sparsecp_ready"] == 1, "ready gauge")


def wait_held(c, n):
    """Waits until the scheduler holds n requests (waiting + running); its metrics then."""
    deadline = time.time() + 60
    while time.time() < deadline:
        m = c.metrics()
        if m["sparsecp_requests_waiting"] + m["sparsecp_requests_running"] == n:
            return m
        time.sleep(0.1)
    fail(f"the scheduler holds {m['sparsecp_requests_waiting']} + "
         f"{m['sparsecp_requests_running']} requests, expected {n}")


def flood(c, n, source):
    """n streamed requests of 4096 tokens (prompt + max_tokens) from address source, each
    on its own connection; the connections, and the statuses of those already answered."""
    body = json.dumps({"prompt": [3] * 8, "max_tokens": 4088, "temperature": 0,
                       "stream": True}).encode()
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body))
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", c.port), timeout=60,
                                     source_address=(source, 0))
        s.sendall(head + body)
        socks.append(s)
    return socks


def statuses(socks, known):
    """The statuses of the responses come so far (known: what earlier calls read)."""
    for i, s in enumerate(socks):
        if i in known:
            continue
        s.setblocking(False)
        try:
            line = s.recv(4096).split(b"\r\n")[0]
            if line:
                known[i] = int(line.split()[1])
        except BlockingIOError:
            pass
        finally:
            s.setblocking(True)
    return [known.get(i) for i in range(len(socks))]


def test_queue_full(c):
    """One client holds at most half of what the scheduler holds (SC_SCHED_HELD_MIN
    tokens of prompt + max_tokens): past it that client gets 429 at once while another
    is still taken; past the whole bound everyone gets 429. Requests of clients that go
    away are canceled, and the cluster serves again. (Clients are told apart by address:
    127.0.0.1, .2 and .3 are all loopback.)"""
    before = c.metrics()
    a = flood(c, 256, "127.0.0.1")       # 128 fit its share
    m = wait_held(c, 128)
    deadline, known = time.time() + 30, {}
    while time.time() < deadline and statuses(a, known).count(429) < 128:
        time.sleep(0.1)
    got = statuses(a, known)
    check(got.count(429) == 128, f"{got.count(429)} of 256 got 429, expected 128")
    b = flood(c, 128, "127.0.0.2")       # another client: taken, up to the whole bound
    wait_held(c, 256)
    check(429 not in statuses(b, {}), "the second client was refused")
    status, err = c.complete({"prompt": [4] * 8, "max_tokens": 4088, "temperature": 0})
    check(status == 429 and err["error"]["type"] == "rate_limit_error" and
          "the cluster holds" in err["error"]["message"], f"{status} {err}")
    for s in a + b:
        s.close()
    m = wait_held(c, 0)  # every request of a client that went away is canceled
    key = 'sparsecp_requests_total{outcome="canceled"}'
    check(m[key] - before[key] == 256, f"canceled {m[key] - before[key]}, expected 256")
    check(m['sparsecp_requests_total{outcome="rejected"}'] -
          before['sparsecp_requests_total{outcome="rejected"}'] == 129, "the 429s are rejections")
    serves(c)


def test_api_key(c):
    for headers, want in (({}, 401), ({"Authorization": "Bearer nope"}, 401),
                          ({"Authorization": "Bearer sesame-123"}, 200)):
        status, _, data = c.request("POST", "/v1/completions",
                                    {"prompt": [1, 2], "max_tokens": 1}, headers)
        check(status == want, f"key {headers}: {status} {data[:200]!r}")
    check(c.get("/health")[0] == 200, "/health needs no key")
    check(c.get("/metrics")[0] == 401, "/metrics without the key")


def test_stopping(c):
    """A cluster told to stop answers what it holds: a waiting request gets 503, a stream
    that has started ends with an error event and [DONE]."""
    stream = socket.create_connection(("127.0.0.1", c.port), timeout=60)
    body = json.dumps({"prompt": [5] * 8, "max_tokens": 4000, "temperature": 0,
                       "stream": True}).encode()
    stream.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Authorization: Bearer sesame-123\r\nContent-Length: %d\r\n\r\n" % len(body)
                   + body)
    got = b""
    while b"data: " not in got:
        got += stream.recv(65536)
    result = {}

    def whole():
        result["r"] = c.request("POST", "/v1/completions",
                                {"prompt": [6] * 8, "max_tokens": 4000, "temperature": 0},
                                {"Authorization": "Bearer sesame-123"})

    t = threading.Thread(target=whole)
    t.start()
    time.sleep(0.3)
    c.proc.send_signal(signal.SIGTERM)
    while True:
        chunk = stream.recv(65536)
        if not chunk:
            break
        got += chunk
    t.join(30)
    check(b'"error"' in got and b"data: [DONE]" in got,
          f"a stream cut by the stop has no error event: ...{got[-300:]!r}")
    status, _, data = result.get("r", (0, {}, b""))
    check(status == 503, f"a waiting request at the stop got {status}: {data[:200]!r}")
    c.proc.wait(timeout=20)


# ---- with a tokenizer: text ----

def byte_decoder():
    """GPT-2's byte <-> unicode table, inverted: how a byte-level BPE token's text maps
    back to bytes (written from the published algorithm, for an independent decode)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def text_decoder(tok_path):
    """A Hugging Face-style decode of ids by tokenizer.json (special tokens left out),
    written from the byte-level BPE algorithm: an independent check of the front's."""
    tok = json.load(open(tok_path))
    id_to_token = {v: k for k, v in tok["model"]["vocab"].items()}
    special = {a["id"] for a in tok["added_tokens"] if a.get("special")}
    for a in tok["added_tokens"]:
        id_to_token[a["id"]] = a["content"]
    bd = byte_decoder()

    def decode(ids):
        out = b""
        for i in ids:
            if i in special:
                continue
            t = id_to_token.get(i)
            if t is None:
                continue
            out += bytes(bd[ch] for ch in t) if all(ch in bd for ch in t) else t.encode()
        return out.decode("utf-8", errors="replace")
    return decode


def test_text(c, tok_path, reference):
    decode = text_decoder(tok_path)
    # the prompt is tokenized as Hugging Face does it (the reference's ids, specials added)
    for ref in reference[:6]:
        status, body = c.complete({"prompt": ref["text"], "max_tokens": 12, "temperature": 0})
        check(status == 200, f"text prompt: {status} {body}")
        check(body["usage"]["prompt_tokens"] == len(ref["ids_special"]),
              f"{ref['text']!r}: {body['usage']['prompt_tokens']} prompt tokens, HF has "
              f"{len(ref['ids_special'])}")
        ch = body["choices"][0]
        check(ch["text"] == decode(ch["token_ids"]), f"text {ch['text']!r} != decode "
              f"{decode(ch['token_ids'])!r}")
        ids = submit_tokens(c, ref["ids_special"], 12)
        check(ids == ch["token_ids"], "text prompt tokens != submit of HF's ids")
        status, events = c.stream({"prompt": ref["text"], "max_tokens": 12, "temperature": 0})
        text = "".join(e["choices"][0]["text"] for e in events[:-1])
        check(text == ch["text"], f"streamed text {text!r} != {ch['text']!r}")
    # a stop string ends the text before it, with finish_reason "stop"
    prompt = reference[1]["text"]
    status, body = c.complete({"prompt": prompt, "max_tokens": 40, "temperature": 0})
    full = body["choices"][0]["text"]
    check(len(full) >= 8, f"too little text to test stop strings: {full!r}")
    stop = full[4:7]
    want = full[:full.index(stop)]
    before = c.metrics()
    for stream in (False, True):
        if stream:
            status, events = c.stream({"prompt": prompt, "max_tokens": 40, "temperature": 0,
                                       "stop": [stop, "never appears \u00e9"]})
            text = "".join(e["choices"][0]["text"] for e in events[:-1])
            reason = events[-2]["choices"][0]["finish_reason"]
        else:
            status, body = c.complete({"prompt": prompt, "max_tokens": 40, "temperature": 0,
                                       "stop": stop})
            text, reason = body["choices"][0]["text"], body["choices"][0]["finish_reason"]
        check(status == 200 and text == want and reason == "stop",
              f"stop {stop!r} (stream {stream}): {text!r} {reason}, expected {want!r}")
    after = c.metrics()
    check(after['sparsecp_requests_total{outcome="stop"}'] -
          before['sparsecp_requests_total{outcome="stop"}'] == 2, "stop outcomes")


def greedy_tokens(model_path, prompt, max_tokens):
    """What one rank of `sparsecp run` generates for prompt (greedy): the reference."""
    req = os.path.join(WORK, "eos-req.jsonl")
    with open(req, "w") as f:
        f.write(json.dumps({"prompt": list(prompt), "max_tokens": max_tokens}) + "\n")
    out = subprocess.run([BIN, "run", "--pcp", "1", "--dcp", "1", "--model", model_path,
                          "--requests", req, "--json", "--quiet"],
                         capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, f"run: {out.stdout} {out.stderr[-2000:]}")
    r = json.loads(out.stdout)["results"][0]
    check(r["finish_reason"] == "length" and len(r["tokens"]) == max_tokens, f"run: {r}")
    return r["tokens"]


def test_eos(c, tok_path, prompt, ref, k):
    """The model's eos_token_id is ref[k] (its first appearance in ref, what one rank
    generates without it): completions end with it, finish_reason "stop", over HTTP
    (whole and streamed, the text of every id up to it flushed) and ZeroMQ; ignore_eos
    runs to max_tokens, "length"."""
    decode = text_decoder(tok_path)
    want = ref[:k + 1]
    # a stop string that the text's end begins: the front holds that end back until it
    # cannot become the stop string, and the end of sequence must release it (the
    # decoder's own held-back bytes are not exercised: this text ends on a whole character)
    tail = decode(want)[-2:]
    check(len(tail) == 2, f"too little text before the end of sequence: {decode(want)!r}")
    stop = [tail + "\u00e9 never"]
    before = c.metrics()
    status, body = c.complete({"prompt": prompt, "max_tokens": len(ref), "temperature": 0,
                               "stop": stop})
    ch = body["choices"][0] if status == 200 else None
    check(ch and ch["token_ids"] == want and ch["finish_reason"] == "stop",
          f"eos: {status} {body}, expected {want} and stop")
    check(ch["text"] == decode(want), f"eos text {ch['text']!r} != {decode(want)!r}")
    check(body["usage"]["completion_tokens"] == k + 1, f"eos usage {body['usage']}")
    status, events = c.stream({"prompt": prompt, "max_tokens": len(ref), "temperature": 0,
                               "stop": stop})
    ids = [t for e in events[:-1] for t in e["choices"][0]["token_ids"]]
    text = "".join(e["choices"][0]["text"] for e in events[:-1])
    check(status == 200 and ids == want and text == decode(want) and
          events[-2]["choices"][0]["finish_reason"] == "stop", f"eos stream: {events[-3:]}")
    after = c.metrics()
    check(after['sparsecp_requests_total{outcome="stop"}'] -
          before['sparsecp_requests_total{outcome="stop"}'] == 2, "eos stop outcomes")
    status, body = c.complete({"prompt": prompt, "max_tokens": len(ref), "temperature": 0,
                               "ignore_eos": True})
    ch = body["choices"][0]
    check(ch["token_ids"] == ref and ch["finish_reason"] == "length", f"ignore_eos: {body}")
    path = os.path.join(WORK, "prompt.json")
    json.dump(list(prompt), open(path, "w"))
    for extra, tokens, reason in (([], want, "stop"), (["--ignore-eos"], ref, "length")):
        out = subprocess.run([BIN, "submit", "--connect", c.listen, "--prompt-file", path,
                              "--max-tokens", str(len(ref)), "--json", "--timeout", "60",
                              *extra], capture_output=True, text=True, timeout=90)
        r = json.loads(out.stdout) if out.returncode == 0 else {}
        check(r.get("tokens") == tokens and r.get("finish_reason") == reason,
              f"submit {extra}: {out.stdout} {out.stderr}")


def main():
    openai = load_openai()
    small = os.path.join(SRC, "examples", "model-small.json")

    def by_zmq(c):
        return submit_tokens(c, [9, 8, 7, 6], 3)

    c = Cluster("--pcp", "2", "--dcp", "2", "--model", small, "--http-timeout-s", "2")
    try:
        test_token_ids(c, openai)
        test_malformed(c)
        test_concurrent(c)
        test_vanishing_client(c)
        test_slow_loris(c)
        test_metrics(c, by_zmq)
    finally:
        c.stop()
    print("ok: token ids, malformed input, concurrency, vanishing client, slow loris, metrics")

    c = Cluster("--model", small)
    try:
        test_queue_full(c)
    finally:
        c.stop()
    print("ok: queue full")

    key = os.path.join(WORK, "api.key")
    with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write("sesame-123\n")
    c = Cluster("--model", small, "--http-api-key-file", key)
    try:
        test_api_key(c)
        test_stopping(c)
    finally:
        c.stop()
    print("ok: API key, answers at the stop")

    data = os.path.join(SRC, "tests", "data", "tokenizer")
    tok_path = os.path.join(data, "tokenizer.json")
    tok = json.load(open(tok_path))
    vocab = max(list(tok["model"]["vocab"].values()) + [a["id"] for a in tok["added_tokens"]]) + 1
    model = json.load(open(small))
    model["vocab"] = vocab  # every token the model makes has a text
    model_path = os.path.join(WORK, "model-text.json")
    json.dump(model, open(model_path, "w"))
    reference = [r for r in map(json.loads, open(os.path.join(data, "reference.jsonl")))
                 if r["tokenizer"] == "tokenizer.json"]
    c = Cluster("--model", model_path, "--tokenizer", tok_path)
    try:
        test_text(c, tok_path, reference)
    finally:
        c.stop()
    print("ok: text prompts, text output, stop strings")

    # the model with an end-of-sequence token: the first of one rank's greedy tokens for
    # the prompt that is not among those before it, past the second
    prompt = reference[1]["ids_special"]
    ref = greedy_tokens(model_path, prompt, 12)
    k = next((i for i in range(2, len(ref)) if ref[i] not in ref[:i]), None)
    check(k is not None, f"no new token past the second in {ref}")
    model["eos_token_id"] = ref[k]
    eos_path = os.path.join(WORK, "model-eos.json")
    json.dump(model, open(eos_path, "w"))
    c = Cluster("--pcp", "2", "--dcp", "2", "--model", eos_path, "--tokenizer", tok_path)
    try:
        test_eos(c, tok_path, prompt, ref, k)
    finally:
        c.stop()
    print("ok: the model's end-of-sequence token, ignore_eos")


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(WORK, ignore_errors=True)
