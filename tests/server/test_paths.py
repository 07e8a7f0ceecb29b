#!/usr/bin/env python3
"""test_paths.py - every response of `infer serve` says which layers it hit.

Checks, through the HTTP API of the real server: the X-Infer-Path header and timings.path of
a request with an empty prefix cache (warm+miss: the whole prompt computed), of another question
after the same system prompt (warm+ram: fewer tokens computed), after a restart on the same
--cache-dir (warm+disk: blocks read from the disk tier), of a request that waited for the load
at start (load+...) and after --keep-alive unloaded the model (reload+...); /metrics has a TTFT
histogram per class with exactly the requests of each; the log has one line per request with its
class, TTFT and tokens; --warm-prompts makes the first request after a start a prefix hit and
reports a bad line without stopping.  Two simultaneous requests with the same cold ~1,800-token
prefix cost one prefill: the second waits for the first's blocks (coalescing) and computes only
its question; it reports those tokens as RAM hits (prefix_coalesced_tokens, X-Infer-Path
coalesced=N, X-Infer-Cached-Tokens on its stream) and answers what it answers with --no-coalesce.
Run by tests/server/run.sh.
"""
import json
import os
import shutil
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from harness import Server  # noqa: E402

MODEL = harness.test_model()
TMP = None
SYSTEM = ("You are the home assistant of the Ortega family. Answer in one short sentence. " +
          " ".join(f"Note {i}: the {room} lights turn off at {10 + i % 12}:00 on weekdays." for i, room in
                   enumerate(["kitchen", "garage", "hall", "attic", "garden", "office"] * 4)))


def body(question, **kw):
    b = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
         "max_tokens": 4, "temperature": 0}
    b.update(kw)
    return b


def ask(srv, question, **kw):
    st, h, raw = srv.request("POST", "/v1/chat/completions", body(question, **kw))
    assert st == 200, (st, raw)
    return h, json.loads(raw)


def header_fields(h):
    """X-Infer-Path "class=warm+ram; model=warm; ram=N; disk=N; computed=N" -> dict."""
    v = h.get("x-infer-path")
    assert v, f"no X-Infer-Path header: {h}"
    out = {}
    for part in v.split(";"):
        k, _, val = part.strip().partition("=")
        out[k] = int(val) if val.isdigit() else val
    return out


def check_consistent(h, r):
    """Header, timings.path and usage tell the same story."""
    f = header_fields(h)
    p = r["timings"]["path"]
    u = r["usage"]
    assert f["class"] == p["class"], (f, p)
    assert f["ram"] == p["prefix_ram_tokens"] and f["disk"] == p["prefix_disk_tokens"], (f, p)
    assert f["computed"] == p["computed_tokens"] == r["timings"]["prompt_n"], (f, p, r["timings"])
    assert f["ram"] + f["disk"] + f["computed"] == u["prompt_tokens"], (f, u)
    assert f["ram"] + f["disk"] == u["prompt_tokens_details"]["cached_tokens"], (f, u)
    assert p["ttft_ms"] > 0
    return f, p


def path_counts(srv):
    m = srv.metrics()
    pre = 'infer_time_to_first_token_by_path_seconds_count{class="'
    return {k[len(pre):-2]: v for k, v in m.items() if k.startswith(pre)}


def test_miss_then_ram_hit_and_metrics():
    srv = Server(MODEL, ["--parallel", "1"], name="paths")
    try:
        h1, r1 = ask(srv, "When do the kitchen lights turn off?")
        f1, p1 = check_consistent(h1, r1)
        assert f1["class"] == "warm+miss" and f1["model"] == "warm", f1
        assert f1["ram"] == 0 and f1["disk"] == 0 and f1["computed"] == r1["usage"]["prompt_tokens"], f1
        h2, r2 = ask(srv, "Who lives in this house?")
        f2, p2 = check_consistent(h2, r2)
        assert f2["class"] == "warm+ram", f2
        assert f2["ram"] >= 64 and f2["computed"] < f1["computed"], (f1, f2)
        c = path_counts(srv)
        assert len(c) == 9, c  # every class is exported, also the empty ones
        assert c["warm+miss"] == 1 and c["warm+ram"] == 1, c
        assert sum(c.values()) == 2, c
        m = srv.metrics()
        assert m['infer_time_to_first_token_by_path_seconds_bucket{class="warm+ram",le="+Inf"}'] == 1
        log = srv.log()
        lines = [ln for ln in log.splitlines() if " ttft=" in ln and ln.startswith("serve: chatcmpl-")]
        assert len(lines) == 2, log
        assert "warm+miss" in lines[0] and "warm+ram" in lines[1], lines
        assert f"computed {f2['computed']})" in lines[1] and "gen=" in lines[1], lines
    finally:
        assert srv.stop() == 0


def test_stream_final_chunk_has_path():
    srv = Server(MODEL, [], name="paths-stream")
    try:
        st, h, raw = srv.request("POST", "/v1/chat/completions", body("Hello?", stream=True))
        assert st == 200
        events = [json.loads(e) for e in harness.sse_events(raw) if e != "[DONE]"]
        with_t = [e for e in events if "timings" in e]
        assert with_t, events[-1]
        assert with_t[-1]["timings"]["path"]["class"] == "warm+miss", with_t[-1]
        # the header goes out before the first SSE byte: the class is known once the job has its slot
        f = header_fields(h)
        assert f["class"] == "warm+miss" and f["computed"] == with_t[-1]["timings"]["path"]["computed_tokens"], (h, f)
        st, h, raw = srv.request("POST", "/v1/chat/completions", body("Hello?", stream=True))
        assert st == 200 and header_fields(h)["class"] == "warm+ram", h
    finally:
        assert srv.stop() == 0


def test_restart_reads_prefix_from_disk():
    d = os.path.join(TMP, "kv")
    srv = Server(MODEL, ["--cache-dir", d], name="paths-disk")
    try:
        h, r = ask(srv, "When do the garage lights turn off?")
        assert header_fields(h)["class"] == "warm+miss"
    finally:
        assert srv.stop() == 0  # a clean exit writes the cached blocks
    srv = Server(MODEL, ["--cache-dir", d], name="paths-disk2")
    try:
        h, r = ask(srv, "When do the garage lights turn off?")
        f, p = check_consistent(h, r)
        assert f["class"] == "warm+disk" and f["disk"] >= 64, f
        assert path_counts(srv)["warm+disk"] == 1
    finally:
        assert srv.stop() == 0


def test_load_and_keep_alive_reload():
    # a request that arrives while the model loads waits for it: class load+...
    srv = Server(MODEL, ["--keep-alive", "1s"], env={"INFER_TEST_LOAD_DELAY_MS": "1500"}, name="paths-ka",
                 wait_ready=False)
    try:
        h, r = ask(srv, "When do the attic lights turn off?")
        f, p = check_consistent(h, r)
        assert f["model"] == "load" and f["class"] == "load+miss", f
        assert p["load_ms"] >= 1500, p
        deadline = time.monotonic() + 60
        while srv.metrics().get("infer_model_unloads_total", 0) < 1:
            assert time.monotonic() < deadline, "the model was not unloaded after --keep-alive 1s"
            time.sleep(0.2)
        h, r = ask(srv, "When do the attic lights turn off?")
        f, p = check_consistent(h, r)
        assert f["model"] == "reload" and f["class"] == "reload+miss", f  # RAM prefix gone with the engine
        assert p["load_ms"] > 0
        c = path_counts(srv)
        assert c["load+miss"] == 1 and c["reload+miss"] == 1 and sum(c.values()) == 2, c
        assert "(waited for the model load)" in srv.log()
    finally:
        assert srv.stop() == 0


def test_warm_prompts():
    wp = os.path.join(TMP, "warm.txt")
    with open(wp, "w") as f:
        f.write("# the household's system prompt\n")
        f.write(json.dumps(SYSTEM) + "\n")
        f.write("{not json\n")
        f.write(json.dumps({"messages": [{"role": "user"}]}) + "\n")
    srv = Server(MODEL, ["--warm-prompts", wp], name="paths-warm")
    try:
        log = srv.log()
        assert "warm prompt 2:" in log, log
        assert f"{wp}:3: not valid; skipped" in log, log
        assert f"{wp}:4: \"messages\" needs role and content strings; skipped" in log, log
        assert "1 warm prompt prefilled" in log, log
        h, r = ask(srv, "When do the hall lights turn off?")
        f, p = check_consistent(h, r)
        assert f["class"] == "warm+ram" and f["ram"] >= 64, f  # the first request after start hits
    finally:
        assert srv.stop() == 0
    st = os.system(f"'{harness.infer_binary()}' serve -m '{MODEL}' --warm-prompts '{TMP}/missing' "
                   f"--port 0 >/dev/null 2>&1")
    assert os.WEXITSTATUS(st) != 0, "a missing --warm-prompts file must be refused at start"


LONG = ("You are the archivist of the Ortega family. Answer in one short sentence. " +
        " ".join(f"Entry {i}: the {room} box {i * 7 % 31} holds {thing}." for i, (room, thing) in
                 enumerate([("attic", "letters"), ("garage", "tools"), ("cellar", "jars"), ("hall", "maps")] * 30)))


def concurrent_pair(args):
    """Two requests with the system prompt LONG sent while the model loads (so that the engine takes
    both in the same admission, the first prepared first: no timing involved): the first plain, the
    second streamed.  Returns (first's headers and body, second's headers and final usage chunk, the
    second's text, /metrics)."""
    srv = Server(MODEL, ["--parallel", "2"] + args, env={"INFER_TEST_LOAD_DELAY_MS": "3000"},
                 name="paths-coalesce", wait_ready=False)
    try:
        out = [None, None]

        def one(i):
            b = body(["Where are the letters?", "Where are the maps?"][i], max_tokens=6)
            b["messages"][0]["content"] = LONG
            if i == 1:
                b.update(stream=True, stream_options={"include_usage": True})
            out[i] = srv.request("POST", "/v1/chat/completions", b, timeout=600)

        threads = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
        threads[0].start()
        time.sleep(0.5)  # arrival order: the first is prepared first
        threads[1].start()
        for t in threads:
            t.join()
        assert srv.metrics().get("infer_model_loads_total") == 1
        (st0, h0, raw0), (st1, h1, raw1) = out
        assert st0 == 200 and st1 == 200, (st0, raw0[:300], st1, raw1[:300])
        events = [json.loads(e) for e in harness.sse_events(raw1) if e != "[DONE]"]
        last = dict([e for e in events if e.get("usage")][-1])
        last["timings"] = [e for e in events if "timings" in e][-1]["timings"]
        text = "".join((c.get("delta") or {}).get("content") or "" for e in events for c in e.get("choices") or [])
        return (h0, json.loads(raw0)), (h1, last), text, srv.metrics()
    finally:
        assert srv.stop() == 0


def test_coalesced_concurrent_prefix():
    (h0, r0), (h1, e1), text1, m = concurrent_pair([])
    f0, _ = check_consistent(h0, r0)
    n0, n1 = r0["usage"]["prompt_tokens"], e1["usage"]["prompt_tokens"]
    assert n0 > 1500 and n1 > 1500, (n0, n1)
    assert f0["computed"] == n0 and f0["coalesced"] == 0, f0  # the first computes it all
    p1 = e1["timings"]["path"]
    cached1 = e1["usage"]["prompt_tokens_details"]["cached_tokens"]
    # the second waited for the first's prefill: it computed its question (and the rest of the
    # last shared block), not the system prompt
    assert p1["prefix_coalesced_tokens"] >= n1 - 64, p1
    assert cached1 == p1["prefix_ram_tokens"] >= p1["prefix_coalesced_tokens"], (cached1, p1)
    assert p1["computed_tokens"] == n1 - cached1 <= 64, p1
    assert int(h1["x-infer-cached-tokens"]) == cached1, h1  # its stream's header counts them too
    # both together: one prefill plus the two questions, not two prefills
    assert f0["computed"] + p1["computed_tokens"] <= n0 + 64, (f0, p1)
    assert m["infer_prefix_coalesced_requests_total"] == 1, m
    assert m["infer_prefix_coalesced_tokens_total"] == p1["prefix_coalesced_tokens"], m
    assert m["infer_prefix_coalesce_fallbacks_total"] == 0, m
    print(f"  coalesced: prompts {n0} and {n1} tokens; computed {f0['computed']} + {p1['computed_tokens']}, "
          f"{p1['prefix_coalesced_tokens']} attached from the first's prefill", flush=True)
    # without coalescing: two prefills, the same answers
    (g0, s0), (g1, t1), text1_off, m_off = concurrent_pair(["--no-coalesce"])
    assert t1["timings"]["path"]["computed_tokens"] == n1, t1["timings"]["path"]
    assert m_off["infer_prefix_coalesced_requests_total"] == 0, m_off
    assert s0["choices"][0]["message"]["content"] == r0["choices"][0]["message"]["content"]
    assert text1_off == text1, (text1_off, text1)


def main():
    global TMP
    if not MODEL:
        print("SKIP: no model")
        return 77
    TMP = tempfile.mkdtemp(prefix="infer-paths-test-")
    try:
        return harness.run_tests([test_miss_then_ram_hit_and_metrics, test_stream_final_chunk_has_path,
                                  test_restart_reads_prefix_from_disk, test_load_and_keep_alive_reload,
                                  test_warm_prompts, test_coalesced_concurrent_prefix], "paths")
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
