#!/usr/bin/env python3
"""boards.py - several `infer serve` boards behind Debian's HAProxy with the shipped configuration
(contrib/haproxy/infer.cfg and infer_key.lua), against the same boards behind round-robin.

Four real boards (the default model, two sequences each, a KV budget that holds about four of the
workload's eight system prompts) on loopback ports, behind the shipped configuration (its
`default-server` line: weight 100 on every board) with maxconn = -np; a workload of K distinct
~1,500-token system prompts x M questions from 4 concurrent streaming clients, in a fixed shuffled
order.  For each balancer:
the prefix hit rate (X-Infer-Cached-Tokens over the prompt tokens), TTFT p50/p99 to the first SSE
chunk with generated text (infer's first chunk, the role, can go out before the prefill), requests
per board.  Then the faults, behind the hash balancer: one board SIGKILLed while a stream runs on
it (the stream ends at once without [DONE], the client is not left hanging; only its keys move to
other boards; plain requests are retried and none fails) and one board drained by
SIGTERM while requests run (none fails).

Prints the table; exit 0 when the checks hold (no failed request, under the hash balancer every
system prompt's requests on one board, only the killed board's keys move, the drain fails nothing,
the restarted board's first requests hit its disk tier), 1 otherwise, 77 when haproxy or the model
is missing.  The hit rates and TTFT are printed, not checked: round-robin's hit rate depends on
which board happens to be free (8% and 25% in two runs), and tests make no timing assertions; the
issue's targets are judged from the printed table.
Environment: INFER_BUILDDIR, INFER_SRCDIR; BOARDS_K, BOARDS_M (default 8 and 3); BOARDS_NP (-np and
maxconn of each board, default 2); BOARDS_KV (--cache-high of each board, default 128M);
BOARDS_BALANCE_FACTOR=N adds `hash-balance-factor N` (bounded loads) to the hash balancer.
"""
import http.client
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.environ.get("INFER_BUILDDIR", os.getcwd())
SRC = os.environ.get("INFER_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
INFER = os.path.join(BUILD, "infer")
MODEL = os.path.join(SRC, "models", "gemma-3-270m-q4_k_m.gguf")
HOST = "127.0.0.1"
N_BOARDS = 4
K = int(os.environ.get("BOARDS_K", "8"))
M = int(os.environ.get("BOARDS_M", "3"))
NP = int(os.environ.get("BOARDS_NP", "2"))
# ~1,500-token prompts take ~26 MiB of F16 KV each with this model: 128 MiB holds about four of them
# (with the running sequences' blocks), fewer than the workload's K = 8, but as many as the busiest
# board draws on average when 8 keys fall on 4 boards (3.5-4 over ten sets of 8 keys)
KV_BUDGET = os.environ.get("BOARDS_KV", "128M")


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_http(port, path, want, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            c = http.client.HTTPConnection(HOST, port, timeout=5)
            c.request("GET", path)
            if c.getresponse().status == want:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


class Board:
    def __init__(self, i, tmp):
        self.i, self.name, self.port = i, f"board{i + 1}", free_port()
        self.log = os.path.join(tmp, f"{self.name}.log")
        self.cache_dir = os.path.join(tmp, f"{self.name}-cache")
        self.proc = None

    def start(self, cache_dir=False, may_move=False):
        """Start the board and wait until /health says ready.  may_move (no balancer knows the port
        yet): when it cannot start on its port (another program on this shared machine may have
        taken it since free_port()), try once more on a new one."""
        for attempt in range(2 if may_move else 1):
            if attempt:
                self.stop(signal.SIGKILL)
                self.port = free_port()
            args = [INFER, "serve", "-m", MODEL, "--host", HOST, "--port", str(self.port), "-np", str(NP), "-t",
                    "1", "-c", "2048", "--cache-high", KV_BUDGET, "--board-name", self.name]
            if cache_dir:
                args += ["--cache-dir", self.cache_dir]
            self.proc = subprocess.Popen(args, stdout=open(self.log, "a"), stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
            end = time.time() + 300
            while time.time() < end and self.proc.poll() is None:
                if wait_http(self.port, "/health", 200, 2):
                    return
        raise RuntimeError(f"{self.name} not ready on port {self.port} (exit {self.proc.poll()}): "
                           f"{open(self.log).read()[-2000:]}")

    def stop(self, sig=signal.SIGINT):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def haproxy_config(boards, port, roundrobin, tmp):
    src = open(os.path.join(SRC, "contrib", "haproxy", "infer.cfg")).read()
    lua = os.path.join(SRC, "contrib", "haproxy", "infer_key.lua")
    out = []
    for line in src.splitlines():
        t = line.strip()
        if t.startswith("server board") or t.startswith("log ") or t in ("option httplog", "log global"):
            continue
        if t.startswith("lua-load"):
            line = f"    lua-load {lua}"
        if t.startswith("bind "):
            line = f"    bind {HOST}:{port}"
        if roundrobin and t.startswith("balance "):
            line = "    balance roundrobin"
        if not roundrobin and t.startswith("hash-type") and os.environ.get("BOARDS_BALANCE_FACTOR"):
            out.append(line)
            line = f"    hash-balance-factor {int(os.environ['BOARDS_BALANCE_FACTOR'])}"
        out.append(line)
        if t == "backend boards":
            pass
    # checks every 0.5 s here (2 s in the shipped file) to keep the test short
    out = [l.replace("inter 2s", "inter 500ms") for l in out]
    # the shipped server lines' options (weight and the rest come from its default-server line);
    # maxconn = the board's -np
    out += [f"    server {b.name} {HOST}:{b.port} id {b.i + 1} check maxconn {NP}" for b in boards]
    path = os.path.join(tmp, "rr.cfg" if roundrobin else "hash.cfg")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path


class Balancer:
    def __init__(self, cfg, port, tmp):
        self.port = port
        self.pidfile = os.path.join(tmp, "haproxy.pid")
        r = subprocess.run(["haproxy", "-c", "-f", cfg], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"haproxy -c: {r.stdout}{r.stderr}")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(tmp, "haproxy.log"), "a"))
        time.sleep(1.5)  # first health checks

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def system_prompt(k):
    rnd = random.Random(1000 + k)
    words = ["light", "kitchen", "garden", "timer", "heating", "window", "weather", "music", "door", "calendar",
             "shopping", "recipe", "battery", "sensor", "camera", "alarm", "bedroom", "garage", "solar", "water"]
    body = " ".join(rnd.choice(words) for _ in range(1400))
    return f"Household {k}. You are the home assistant of this family. Rules and notes: {body}"


def ask(port, sysp, q, stream=True, timeout=600):
    """(board, cached tokens, prompt tokens, ttft seconds, ok)."""
    body = {"messages": [{"role": "system", "content": sysp}, {"role": "user", "content": q}],
            "max_tokens": 4, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    t0 = time.time()
    try:
        c = http.client.HTTPConnection(HOST, port, timeout=timeout)
        c.request("POST", "/v1/chat/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        board, cached = r.getheader("X-Infer-Board"), int(r.getheader("X-Infer-Cached-Tokens") or -1)
        if r.status != 200:
            return board, cached, 0, 0, False
        if not stream:
            u = json.loads(r.read())["usage"]
            return board, cached, u["prompt_tokens"], time.time() - t0, True
        ttft, prompt, done = None, 0, False
        while True:
            line = r.readline()
            if not line:
                break
            if line.startswith(b"data: {"):
                d = json.loads(line[6:])
                if d.get("usage"):
                    prompt = d["usage"]["prompt_tokens"]
                # the first generated text (the role-only first chunk can precede the prefill)
                if ttft is None and any((ch.get("delta") or {}).get("content") for ch in d.get("choices") or []):
                    ttft = time.time() - t0
            if line.strip() == b"data: [DONE]":
                done = True
        return board, cached, prompt, ttft or 0, done
    except (OSError, http.client.HTTPException, ValueError):
        return None, -1, 0, 0, False


def stream_through_kill(port, sysp, kill):
    """A long stream through the balancer, kill() called once its first chunk has arrived (the board
    is working on it).  Returns (kill called, saw [DONE], seconds from the kill to the end of the
    client's read): a stream on a killed board must end, not hang, and never claim completion."""
    body = {"messages": [{"role": "system", "content": sysp}, {"role": "user", "content": "a long answer"}],
            "max_tokens": 512, "temperature": 0, "stream": True}
    killed_at, done = None, False
    try:
        c = http.client.HTTPConnection(HOST, port, timeout=60)
        c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        while True:
            line = r.readline()
            if not line:
                break
            if line.startswith(b"data: {") and killed_at is None:
                kill()
                killed_at = time.time()
            if line.strip() == b"data: [DONE]":
                done = True
    except (OSError, http.client.HTTPException):
        pass  # the connection broke: that is the clean failure
    return killed_at is not None, done, (time.time() - killed_at) if killed_at else 0.0


def workload(port, prompts, pairs, clients=4):
    results, lock, it = [], threading.Lock(), iter(pairs)

    def client():
        while True:
            with lock:
                try:
                    k, q = next(it)
                except StopIteration:
                    return
            res = ask(port, prompts[k], q)
            with lock:
                results.append((k,) + res)

    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return results


def summary(name, results):
    ok = [r for r in results if r[5]]
    cached = sum(max(r[2], 0) for r in ok)
    prompt = sum(r[3] for r in ok)
    ttfts = sorted(r[4] for r in ok)
    per_board = {}
    for r in ok:
        per_board[r[1]] = per_board.get(r[1], 0) + 1
    p99 = ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))] if ttfts else 0
    boards_of = {}
    for r in ok:
        boards_of.setdefault(r[0], set()).add(r[1])
    return {"name": name, "requests": len(results), "failed": len(results) - len(ok),
            "one_board": all(len(b) == 1 for b in boards_of.values()),
            "hit_rate": cached / prompt if prompt else 0.0, "p50": statistics.median(ttfts) if ttfts else 0,
            "p99": p99, "per_board": dict(sorted(per_board.items()))}


def main():
    if not shutil.which("haproxy"):
        print("SKIP: haproxy not installed (contrib/quickstart.sh installs it)")
        return 77
    if not os.path.exists(MODEL) or not os.access(INFER, os.X_OK):
        print(f"SKIP: {MODEL} or {INFER} missing")
        return 77
    tmp = tempfile.mkdtemp(prefix="infer-boards-")
    boards = [Board(i, tmp) for i in range(N_BOARDS)]
    prompts = [system_prompt(k) for k in range(K)]
    rnd = random.Random(7)
    pairs = [(k, f"Question {q} about household {k}: what should I do first?") for k in range(K) for q in range(M)]
    rnd.shuffle(pairs)
    rows, rc, bal = [], 0, None
    try:
        for roundrobin in (False, True):
            for b in boards:  # fresh boards: empty caches
                b.stop()
                b.start(may_move=True)
            port = free_port()
            bal = Balancer(haproxy_config(boards, port, roundrobin, tmp), port, tmp)
            rows.append(summary("round-robin" if roundrobin else "hash (infer.cfg)", workload(port, prompts, pairs)))
            bal.stop()
            bal = None
        # faults behind the hash balancer, with the boards warm from nothing again
        for b in boards:
            b.stop()
            b.start(cache_dir=True, may_move=True)
        port = free_port()
        bal = Balancer(haproxy_config(boards, port, False, tmp), port, tmp)
        short = [system_prompt(100 + k)[:600] for k in range(12)]
        before = {k: ask(port, short[k], "map", stream=False)[0] for k in range(12)}
        victim = next(b for b in boards if b.name in before.values())
        # a stream in flight on the board when it is killed fails cleanly (ends, no [DONE]), no hang
        k0 = next(k for k in range(12) if before[k] == victim.name)
        s_killed, s_done, s_end = stream_through_kill(port, short[k0], victim.proc.kill)
        if not s_killed:
            victim.proc.kill()
        victim.proc.wait()
        stream_ok = s_killed and not s_done and s_end < 30
        # plain requests right after the kill: retried elsewhere, none fails
        killed = [ask(port, short[k], f"after kill {k}", stream=False) for k in range(12)]
        time.sleep(2.0)  # the health checks take it out
        after = {k: ask(port, short[k], "map again", stream=False)[0] for k in range(12)}
        moved = [k for k in range(12) if before[k] != after[k]]
        kill_ok = all(r[4] for r in killed) and all(before[k] == victim.name for k in moved) and \
            all(after[k] != victim.name for k in range(12)) and stream_ok
        # drain another board while a load runs: no request fails
        drained = next(b for b in boards if b is not victim)
        stop_at = time.time() + 8
        drain_results = []

        def drain_load():
            n = 0
            while time.time() < stop_at:
                drain_results.append(ask(port, short[n % 12], f"during drain {n}", stream=False))
                n += 1

        ts = [threading.Thread(target=drain_load) for _ in range(3)]
        for t in ts:
            t.start()
        time.sleep(1.0)
        drained.proc.send_signal(signal.SIGTERM)
        for t in ts:
            t.join()
        drained_exit = drained.proc.wait(timeout=120)
        drain_ok = drain_results and all(r[4] for r in drain_results) and drained_exit == 0
        # the drained board comes back with its disk tier: its first requests are prefix hits
        drained.start(cache_dir=True)
        time.sleep(3.0)  # haproxy's checks (every 0.5 s, up after 2) put it back in
        back = [ask(port, short[k], "map again", stream=False) for k in range(12) if after[k] == drained.name]
        back_ok = all(r[4] and r[1] > 0 for r in back)
        bal.stop()
        bal = None
    finally:
        if bal:
            bal.stop()
        for b in boards:
            b.stop()
    print(f"boards: {N_BOARDS} x `infer serve` (default model, -np {NP}, --cache-high {KV_BUDGET}); workload {K} "
          f"system prompts x {M} questions, 4 streaming clients")
    print("| balancer | requests | failed | prefix hit rate | TTFT p50 | TTFT p99 | requests per board |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['name']} | {r['requests']} | {r['failed']} | {100 * r['hit_rate']:.1f}% | {r['p50']:.2f} s | "
              f"{r['p99']:.2f} s | {r['per_board']} |")
    h, rr = rows
    print(f"hash / round-robin: hit rate {h['hit_rate'] / rr['hit_rate'] if rr['hit_rate'] else float('inf'):.2f}x, "
          f"p50 TTFT {h['p50'] / rr['p50'] if rr['p50'] else 0:.2f}x")
    print(f"SIGKILL {victim.name}: the stream in flight on it ended {s_end:.2f} s after the kill, "
          f"{'with' if s_done else 'without'} [DONE]; {len(killed)} plain requests right after, "
          f"{sum(1 for r in killed if not r[4])} failed; {len(moved)} of 12 keys moved, all from the killed board: "
          f"{kill_ok}")
    print(f"SIGTERM {drained.name} under load: {len(drain_results)} requests, "
          f"{sum(1 for r in drain_results if not r[4])} failed, exit {drained_exit}")
    print(f"{drained.name} restarted with --cache-dir: {len(back)} of its keys, cached tokens "
          f"{[r[1] for r in back]}")
    checks = [("no failed request in either workload", h["failed"] == 0 and rr["failed"] == 0),
              # (bounded loads move requests off a busy board on purpose)
              ("hash routing: every system prompt's requests all went to one board",
               h["one_board"] or bool(os.environ.get("BOARDS_BALANCE_FACTOR"))),
              ("SIGKILL: its stream in flight failed cleanly, no plain request failed, only its keys moved", kill_ok),
              ("SIGTERM: drained with no failed request, exit 0", drain_ok),
              ("restart with --cache-dir: its first requests are prefix hits", back_ok)]
    for name, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}: {name}")
        rc |= 0 if ok else 1
    shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
