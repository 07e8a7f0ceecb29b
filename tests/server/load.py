#!/usr/bin/env python3
"""load.py - a bounded load test of `infer serve` with the openai SDK.

C concurrent clients each send R streamed chat requests that share one system prompt
(different user questions), with a bounded max_tokens.  Reports requests/s, aggregate
completion tok/s, p50/p99 time to first token (first streamed content), the prefix-cache
hit rate (cached / prompt tokens, from usage), errors, and the server's resident memory
after a warm-up run of the same load (which fills the prefix cache with every block the
measured run uses) and after the measured run: it must not grow.

  load.py [--clients 8] [--requests 25] [--max-tokens 8] [--system-tokens N] [--model FILE]
          [--server-args "..."] [--url http://127.0.0.1:PORT/v1] [--json] [--check]

Without --url it starts its own server (tests/server/harness.py).  --check makes the exit
status say whether there were zero errors and no memory growth (used by run.sh).
Every loop is bounded: C x R requests, each with a 300 s timeout.
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import openai  # noqa: E402

QUESTIONS = ["What is a router?", "How do I back up a disk?", "Explain DNS briefly.", "What is a VPN for?",
             "How much RAM does a Pi 5 have?", "What is ZFS?", "Why use a UPS?", "What is a NAS?",
             "How do I update Debian?", "What is SSH?", "What does a firewall do?", "What is IPv6?"]


def system_prompt(n_words):
    words = ("You are the assistant of a home server. You answer questions about networking, storage, "
             "backups and Linux administration, briefly and precisely. ").split()
    return " ".join(words[i % len(words)] for i in range(n_words))


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def run_load(base_url, clients, requests, max_tokens, system, api_key="none", salt=None, need_usage=True):
    """Returns a dict of figures; errors are counted, never raised.  need_usage=False accepts a
    server that sends no usage chunk (llama-cpp-python's): completion tokens are then the content
    chunks counted, and prompt and cached tokens are unknown (0)."""
    c = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=300)
    model = c.models.list().data[0].id
    lock = threading.Lock()
    ttfts, errors, usage = [], [], []
    n_done = [0]

    def worker(w):
        cl = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=300)
        for r in range(requests):
            q = QUESTIONS[(w * requests + r) % len(QUESTIONS)] + f" (client {w}, request {r})"
            t0 = time.monotonic()
            first = None
            try:
                extra = {"cache_salt": salt} if salt else None
                stream = cl.chat.completions.create(
                    model=model, messages=[{"role": "system", "content": system}, {"role": "user", "content": q}],
                    max_tokens=max_tokens, temperature=0, stream=True, stream_options={"include_usage": True},
                    extra_body=extra)
                u, n_content = None, 0
                for chunk in stream:
                    if first is None and chunk.choices and (chunk.choices[0].delta.content or
                                                            chunk.choices[0].finish_reason):
                        first = time.monotonic() - t0
                    if chunk.choices and chunk.choices[0].delta.content:
                        n_content += 1
                    if chunk.usage:
                        u = chunk.usage
                if u is None and need_usage:
                    raise RuntimeError("no usage chunk")
                with lock:
                    ttfts.append(first if first is not None else time.monotonic() - t0)
                    if u is None:
                        usage.append((0, 0, n_content))
                    else:
                        usage.append((u.prompt_tokens, u.prompt_tokens_details.cached_tokens, u.completion_tokens))
                    n_done[0] += 1
            except Exception as e:  # counted, reported
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300 * requests + 60)
    wall = time.monotonic() - t0
    prompt = sum(u[0] for u in usage)
    cached = sum(u[1] for u in usage)
    completion = sum(u[2] for u in usage)
    return {
        "clients": clients, "requests": clients * requests, "ok": n_done[0], "errors": len(errors),
        "error_samples": errors[:5], "wall_s": wall, "requests_per_s": n_done[0] / wall if wall else 0,
        "completion_tokens": completion, "aggregate_tok_s": completion / wall if wall else 0,
        "ttft_p50_s": percentile(ttfts, 50), "ttft_p99_s": percentile(ttfts, 99),
        "prompt_tokens": prompt, "cached_tokens": cached, "cache_hit_rate": cached / prompt if prompt else 0,
    }


def report(name, r):
    print(f"{name}: {r['ok']}/{r['requests']} ok, {r['errors']} errors, {r['wall_s']:.1f} s, "
          f"{r['requests_per_s']:.2f} req/s, {r['aggregate_tok_s']:.1f} completion tok/s aggregate, "
          f"TTFT p50 {r['ttft_p50_s'] * 1e3:.0f} ms p99 {r['ttft_p99_s'] * 1e3:.0f} ms, "
          f"cache hit rate {100 * r['cache_hit_rate']:.1f}% ({r['cached_tokens']}/{r['prompt_tokens']} prompt tokens)",
          flush=True)
    for e in r["error_samples"]:
        print(f"  error: {e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=25)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--system-words", type=int, default=120)
    ap.add_argument("--model")
    ap.add_argument("--server-args", default="-np 4")
    ap.add_argument("--url")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if not 1 <= a.clients <= 64 or not 1 <= a.requests <= 1000:
        ap.error("--clients 1..64, --requests 1..1000")
    system = system_prompt(a.system_words)
    srv = None
    if a.url:
        url = a.url
    else:
        model = a.model or harness.test_model()
        if not model:
            print("SKIP: no model")
            return 77
        srv = harness.Server(model, a.server_args.split(), name="load")
        url = srv.base_url
        print(f"load: model {model}, server {' '.join(a.server_args.split())}", flush=True)
    ok = True
    try:
        # warm-up: the very same load once (same prompts, temperature 0), so that the prefix cache
        # already holds every block the measured run will use; what grows after that is a leak
        warm = run_load(url, a.clients, a.requests, a.max_tokens, system)
        report("warm-up", warm)
        rss0 = srv.rss_kib() if srv else 0
        r = run_load(url, a.clients, a.requests, a.max_tokens, system)
        time.sleep(0.5)
        rss1 = srv.rss_kib() if srv else 0
        r["warmup_errors"] = warm["errors"]
        r["rss_after_warmup_kib"], r["rss_after_load_kib"] = rss0, rss1
        report(f"load {a.clients} clients x {a.requests} requests, max_tokens {a.max_tokens}", r)
        if srv:
            growth = rss1 - rss0
            print(f"server RSS: {rss0 / 1024:.1f} MiB after warm-up, {rss1 / 1024:.1f} MiB after the load "
                  f"({growth / 1024:+.1f} MiB)")
            if srv.under_asan():
                # ASan's quarantine holds freed memory, so RSS grows anyway; LeakSanitizer
                # checks for leaks when the server exits (a report fails its exit status)
                print("server RSS check skipped under ASan (LeakSanitizer runs at exit)")
            else:
                # allowed: allocator noise, not growth with the number of requests
                ok = ok and growth < max(8 * 1024, rss0 // 20)
        ok = ok and r["errors"] == 0 and warm["errors"] == 0 and r["ok"] == r["requests"]
        if a.json:
            print(json.dumps(r, indent=1))
    finally:
        if srv:
            code = srv.stop()
            if code != 0:
                print(f"server exited with {code}:\n{srv.log()[-3000:]}")
                ok = False
    if a.check:
        print(f"{1 if ok else 0} passed, {0 if ok else 1} failed")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
