#!/usr/bin/env python3
"""test_semcache.py - the response cache's semantic tier (`infer serve --semantic-cache
--embedding-model`), against the real embedding model (models/fetch-embedder).

Checks: a paraphrase of a stored question is a hit-semantic with the stored answer, a fresh id, the
similarity and Age headers; a question the content gate refuses (other polarity, number, day,
room) is a miss that still names the nearest similarity and the rule; bucket isolation (another
cache_salt, API key, system prompt or earlier turn never hits); "cache": {"threshold"} raises the
threshold and never lowers it; a streamed request on a paraphrase is replayed as chunks the openai
SDK parses; temperature above --semantic-cache-max-temp bypasses tier 2; length-cut answers and
errors are never stored; DELETE /v1/cache empties the tenant's semantic rows; TTL expiry; capacity
eviction (LRU); restart persistence; rows of another embedding model are dropped at start; a
damaged row is dropped, never used; a layout-1 (exact tier only) file is extended in place; GET
/v1/cache/stats and /metrics.  Run by tests/server/run.sh.
"""
import json
import os
import sqlite3
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from harness import Server  # noqa: E402

import openai  # noqa: E402

MODEL = harness.test_model()
EMB = os.path.join(harness.srcdir(), "models", "all-minilm-l6-v2-f16.gguf")
EMB_Q8 = os.path.join(harness.srcdir(), "models", "all-minilm-l6-v2-q8_0.gguf")
TMP = None
S = None
# stop strings nearly every first token contains: answers end with finish_reason "stop" (what is
# stored) whatever the model and the question
STOPS = ["\n", " ", "e", "a", "o", "i", "t", "n", "s", "r", ".", ",", "*", "I", "T", "A"]

# stored question, a paraphrase the gate accepts (cosine ~0.93 with all-MiniLM-L6-v2)
Q = "Turn on the kitchen lights please"
PARA = "Could you switch the kitchen lights on?"
# near questions the gate must refuse, and the rule that refuses each
REFUSED = [("Turn off the kitchen lights", "polarity"), ("Turn on the bedroom lights", "content words"),
           ("Turn on the kitchen lights at 7 pm", "numbers"), ("Don't turn on the kitchen lights", "negation")]


def body(content, system=None, history=(), **kw):
    msgs = ([{"role": "system", "content": system}] if system else []) + list(history)
    msgs.append({"role": "user", "content": content})
    b = {"messages": msgs, "max_tokens": 16, "temperature": 0, "stop": STOPS}
    b.update(kw)
    return b


def post(srv, b, headers=None):
    st, h, raw = srv.request("POST", "/v1/chat/completions", b, headers)
    return st, h, json.loads(raw) if raw else None


def start(name, db, *extra, emb=EMB):
    return Server(MODEL, ["-c", "256", "-np", "1", "--max-tokens", "64", "--embedding-model", emb,
                          "--semantic-cache-db", os.path.join(TMP, db), *extra], name=name)


def test_paraphrase_hits():
    st, h, a = post(S, body(Q))
    assert st == 200 and h.get("x-infer-cache") == "miss" and a["choices"][0]["finish_reason"] == "stop", h
    assert "x-infer-cache-similarity" not in h  # an empty bucket has no nearest question
    st, h, b = post(S, body(PARA))
    assert h.get("x-infer-cache") == "hit-semantic", h
    assert 0.8 <= float(h["x-infer-cache-similarity"]) < 1.0, h
    assert h.get("x-infer-cache-gate") == "pass" and "age" in h, h
    assert b["choices"] == a["choices"] and b["id"] != a["id"] and "timings" not in b
    # fillers and punctuation are normalised away before embedding: the same vector
    st, h, b = post(S, body("Hey, turn on the kitchen lights, please!"))
    assert h.get("x-infer-cache") == "hit-semantic" and float(h["x-infer-cache-similarity"]) > 0.999, h


def test_gate_refuses():
    post(S, body(Q))
    for q, rule in REFUSED:
        st, h, r = post(S, body(q, cache={"no-store": True}))  # Q stays the only row
        assert st == 200 and h.get("x-infer-cache") == "miss", (q, h)
        assert float(h["x-infer-cache-similarity"]) > 0.5, (q, h)  # the nearest, also on a miss
        assert h.get("x-infer-cache-gate", "").startswith(rule), (q, h)
        assert r["choices"][0]["message"]["content"] is not None


def test_bucket_isolation():
    post(S, body(Q))
    st, h, r = post(S, body(PARA))
    assert h.get("x-infer-cache") == "hit-semantic", h
    history = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there"}]
    for variant in (body(PARA, cache_salt="tenant-b"), body(PARA, system="You are a pirate."),
                    body(PARA, history=history), body(PARA, max_tokens=15), body(PARA, stop=STOPS[:-1])):
        st, h, r = post(S, variant)
        assert h.get("x-infer-cache") == "miss", (variant, h)
        assert "x-infer-cache-similarity" not in h, (variant, h)  # another bucket: nothing to compare with
    # an earlier turn that differs: the follow-up is never answered from the other conversation
    h1 = [{"role": "user", "content": "What's the weather in Berlin?"}, {"role": "assistant", "content": "Sunny."}]
    h2 = [{"role": "user", "content": "What's the weather in Paris?"}, {"role": "assistant", "content": "Sunny."}]
    post(S, body("And tomorrow?", history=h1))
    st, h, r = post(S, body("and tomorrow", history=h1))
    assert h.get("x-infer-cache") == "hit-semantic", h
    st, h, r = post(S, body("and tomorrow", history=h2))
    assert h.get("x-infer-cache") == "miss" and "x-infer-cache-similarity" not in h, h


def test_tenants_by_api_key():
    srv = start("sc-keys", "keys.sqlite", "--api-key", "alpha", "--api-key", "beta")
    try:
        ka, kb = {"Authorization": "Bearer alpha"}, {"Authorization": "Bearer beta"}
        post(srv, body(Q), ka)
        st, h, r = post(srv, body(PARA), ka)
        assert h.get("x-infer-cache") == "hit-semantic", h
        st, h, r = post(srv, body(PARA), kb)
        assert h.get("x-infer-cache") == "miss" and "x-infer-cache-similarity" not in h, h
        st, h, raw = srv.request("DELETE", "/v1/cache", None, ka)  # alpha's rows leave the index too
        assert st == 200 and json.loads(raw)["deleted"] >= 1, raw
        st, h, r = post(srv, body("Switch the kitchen lights on"), ka)
        assert h.get("x-infer-cache") == "miss" and "x-infer-cache-similarity" not in h, h
    finally:
        assert srv.stop() == 0, srv.log()


def test_threshold_raise_only():
    post(S, body(Q))
    st, h, r = post(S, body(PARA, cache={"threshold": 0.999}))
    assert h.get("x-infer-cache") == "miss" and float(h["x-infer-cache-similarity"]) < 0.999, h
    srv = start("sc-th", "th.sqlite", "--semantic-cache-threshold", "0.99")
    try:
        post(srv, body(Q))
        st, h, r = post(srv, body(PARA, cache={"threshold": 0.5}))  # a request cannot lower it
        assert h.get("x-infer-cache") == "miss", h
        st, s = srv.get_json("/v1/cache/stats")
        assert abs(s["semantic"]["threshold"] - 0.99) < 1e-6, s
    finally:
        assert srv.stop() == 0, srv.log()


def test_streamed_replay():
    qs = "Please, could you switch the kitchen lights on"
    post(S, body(Q))
    st, h, a = post(S, body(qs))  # the stored answer it gets ...
    assert h.get("x-infer-cache") == "hit-semantic", h
    c = openai.OpenAI(base_url=S.base_url, api_key="none", max_retries=0)
    raw = c.chat.completions.with_raw_response.create(
        model=c.models.list().data[0].id, messages=body(qs)["messages"],
        max_tokens=16, temperature=0,
        stop=STOPS, stream=True, stream_options={"include_usage": True})
    assert raw.headers.get("x-infer-cache") == "hit-semantic", raw.headers  # ... streamed
    chunks = list(raw.parse())
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == a["choices"][0]["message"]["content"]
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "stop"
    assert chunks[-1].usage.total_tokens == a["usage"]["total_tokens"]


def test_bypass_and_not_stored():
    srv = start("sc-temp", "temp.sqlite", "--semantic-cache-max-temp", "0.5")
    try:
        post(srv, body(Q))
        st, h, r = post(srv, body(PARA, temperature=0.9))  # sampled above the limit: neither tier
        assert h.get("x-infer-cache") == "bypass" and "x-infer-cache-similarity" not in h, h
        st, h, r = post(srv, body(PARA, temperature=0.9, seed=3))  # tier 1 only (a fixed seed)
        assert h.get("x-infer-cache") == "miss" and "x-infer-cache-similarity" not in h, h
        # unseeded at or below the limit: no tier 1 (no one answer), but tier 2 looks (another
        # temperature is another bucket, empty here: a miss, not a bypass)
        st, h, r = post(srv, body(PARA, temperature=0.3))
        assert h.get("x-infer-cache") == "miss", h
        # a length-cut answer is never stored
        post(srv, body("Count the sheep in the field", max_tokens=1, stop=[]))
        st, h, r = post(srv, body("count the sheep in the field", max_tokens=1, stop=[]))
        assert h.get("x-infer-cache") == "miss" and "x-infer-cache-similarity" not in h, h
        m = srv.metrics()
        assert m['infer_response_cache_skipped_total{reason="not-complete"}'] >= 2, m
        assert m['infer_response_cache_lookups_total{result="bypass"}'] >= 1
    finally:
        assert srv.stop() == 0, srv.log()


def test_capacity_restart_and_model_change():
    db = "persist.sqlite"
    srv = start("sc-p1", db, "--semantic-cache-max-entries", "2")
    try:
        post(srv, body(Q))
        post(srv, body("What is the weather tomorrow?"))
        post(srv, body("Set a timer for five minutes"))  # the third: the least recently hit goes
        st, h, r = post(srv, body(PARA))
        assert h.get("x-infer-cache") == "miss", h
        m = srv.metrics()
        assert m['infer_response_cache_evictions_total{reason="capacity"}'] >= 1, m
        st, h, r = post(srv, body("Set a timer for 5 minutes please"))
        assert h.get("x-infer-cache") == "hit-semantic", h
        st, s = srv.get_json("/v1/cache/stats")
        assert s["semantic"]["rows"] == 2 and s["entries"] == 2, s
    finally:
        assert srv.stop() == 0, srv.log()
    srv = start("sc-p2", db)
    try:
        assert "2 semantic rows loaded" in srv.log(), srv.log()
        st, h, r = post(srv, body("set a timer for 5 minutes"))
        assert h.get("x-infer-cache") == "hit-semantic", h  # survived the restart
    finally:
        assert srv.stop() == 0, srv.log()
    # those rows were embedded by the F16 model: another embedding model drops them
    srv = start("sc-p3", db, emb=EMB_Q8)
    try:
        assert "of another embedding model dropped" in srv.log()
        m = srv.metrics()
        assert m['infer_response_cache_evictions_total{reason="embedding-model"}'] >= 2, (m, srv.log())
        st, s = srv.get_json("/v1/cache/stats")
        assert s["semantic"]["rows"] == 0, s
    finally:
        assert srv.stop() == 0, srv.log()


def test_ttl():
    srv = start("sc-ttl", "ttl.sqlite", "--semantic-cache-ttl", "2s")
    try:
        post(srv, body(Q))
        st, s = srv.get_json("/v1/cache/stats")
        assert s["semantic"]["rows"] == 1, s  # stored (expired or not, it is in the index)
        time.sleep(2.5)
        st, h, r = post(srv, body(PARA))
        assert h.get("x-infer-cache") == "miss" and "x-infer-cache-similarity" not in h, h  # expired
    finally:
        assert srv.stop() == 0, srv.log()


def test_damaged_rows():
    db = "damaged.sqlite"
    srv = start("sc-d1", db)
    try:
        post(srv, body(Q))
    finally:
        assert srv.stop() == 0, srv.log()
    con = sqlite3.connect(os.path.join(TMP, db))
    con.execute("UPDATE entries SET emb = x'0102'")  # a vector of the wrong size
    con.commit()
    con.close()
    srv = start("sc-d2", db)
    try:
        st, h, r = post(srv, body(PARA))
        assert st == 200 and h.get("x-infer-cache") == "miss", h  # dropped at start, never compared
        st, s = srv.get_json("/v1/cache/stats")
        assert s["semantic"]["rows"] == 1, s  # only the row stored just now
    finally:
        assert srv.stop() == 0, srv.log()


def test_layout1_file_extended():
    """A tier-1-only file (layout 1) is extended in place, its rows kept, not set aside."""
    path = os.path.join(TMP, "layout1.sqlite")
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE entries(key BLOB PRIMARY KEY, tenant TEXT NOT NULL, created REAL NOT NULL,"
                " expires REAL NOT NULL, last_hit REAL NOT NULL, hits INTEGER NOT NULL, answer BLOB NOT NULL)")
    con.execute("INSERT INTO entries VALUES(?, '', ?, ?, ?, 0, '{}')",
                (b"k" * 32, time.time(), time.time() + 3600, time.time()))
    con.execute("PRAGMA user_version=1919090689")
    con.commit()
    con.close()
    srv = start("sc-l1", "layout1.sqlite")
    try:
        assert "foreign or corrupt" not in srv.log(), srv.log()
        post(srv, body(Q))
        st, h, r = post(srv, body(PARA))
        assert h.get("x-infer-cache") == "hit-semantic", h
    finally:
        assert srv.stop() == 0, srv.log()
    con = sqlite3.connect(path)
    cols = [c[1] for c in con.execute("PRAGMA table_info(entries)")]
    n = con.execute("SELECT count(*) FROM entries WHERE key = ?", (b"k" * 32,)).fetchone()[0]
    con.close()
    assert "emb" in cols and "bucket" in cols and n == 1, (cols, n)


def test_stats_and_metrics():
    st, s = S.get_json("/v1/cache/stats")
    assert st == 200 and s["tiers"] == ["exact", "semantic"] and s["lookups"]["hit-semantic"] >= 3, s
    assert s["semantic"]["embedding_model"] == "all-minilm-l6-v2-f16" and len(s["semantic"]["embedding_sha256"]) == 64
    m = S.metrics()
    assert m['infer_response_cache_lookups_total{result="hit-semantic"}'] >= 3, m
    assert m["infer_response_cache_embeds_total"] >= 5 and m["infer_response_cache_searches_total"] >= 5
    assert m['infer_response_cache_nearest_similarity_bucket{le="+Inf"}'] >= 5
    assert m['infer_response_cache_tokens_saved_total{kind="completion"}'] >= 1


def main():
    global S, TMP
    if not MODEL:
        print("SKIP: no model")
        return 77
    if not (os.path.exists(EMB) and os.path.exists(EMB_Q8)):
        print("SKIP: no embedding model (models/fetch-embedder)")
        return 77
    TMP = tempfile.mkdtemp(prefix="infer-sc-")
    print(f"test_semcache: model {MODEL}, embedder {EMB}", flush=True)
    S = start("sc", "main.sqlite")
    tests = [test_paraphrase_hits, test_gate_refuses, test_bucket_isolation, test_tenants_by_api_key,
             test_threshold_raise_only, test_streamed_replay, test_bypass_and_not_stored,
             test_capacity_restart_and_model_change, test_ttl, test_damaged_rows, test_layout1_file_extended,
             test_stats_and_metrics]
    return harness.run_with_server(S, tests, "test_semcache", cleanup_dir=TMP)


if __name__ == "__main__":
    sys.exit(main())
