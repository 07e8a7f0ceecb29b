#!/usr/bin/env python3
"""test_respcache.py - the response cache's exact tier (`infer serve --semantic-cache`).

Checks: off by default (no X-Infer-Cache header); a repeated request is a hit-exact with the same
answer, a fresh id and an Age header, through the openai SDK too; any other parameter, message,
cache_salt or API key is a miss (tenants never share answers); only complete answers
(finish_reason "stop") are stored, never length-cut ones or errors; streamed and randomly
sampled requests bypass it, and so do requests with tools or tool turns; Cache-Control no-store / no-cache and the body's "cache" object;
restart persistence; TTL expiry; DELETE /v1/cache purges the caller's tenant only; a corrupt or
foreign database file is set aside and the server answers; GET /v1/cache/stats and /metrics.
Run by tests/server/run.sh.
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
TMP = None
S = None
STOP = None  # a stop string the greedy continuation of PROMPT reaches
PROMPT = "The kitchen lights"


def chat_body(content=PROMPT, **kw):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 16, "temperature": 0}
    if STOP:
        body["stop"] = [STOP]
    body.update(kw)
    return body


def post(srv, body, headers=None):
    st, h, raw = srv.request("POST", "/v1/chat/completions", body, headers)
    return st, h, json.loads(raw) if raw else None


def find_stop():
    global STOP
    STOP = harness.find_stop(S, PROMPT)


def test_hit_after_miss():
    st, h, a = post(S, chat_body())
    assert st == 200 and h.get("x-infer-cache") == "miss", (st, h)
    assert a["choices"][0]["finish_reason"] == "stop", a
    st, h, b = post(S, chat_body())
    assert st == 200 and h.get("x-infer-cache") == "hit-exact", h
    assert b["choices"] == a["choices"] and b["usage"] == a["usage"]
    assert b["id"] != a["id"] and "age" in h and "timings" not in b
    c = openai.OpenAI(base_url=S.base_url, api_key="none", max_retries=0)
    raw = c.chat.completions.with_raw_response.create(
        model=c.models.list().data[0].id, messages=chat_body()["messages"], max_tokens=16,
        temperature=0, stop=[STOP])
    assert raw.headers.get("x-infer-cache") == "hit-exact", raw.headers
    assert raw.parse().choices[0].message.content == a["choices"][0]["message"]["content"]


def test_any_difference_misses():
    post(S, chat_body())  # stored by the test before, or now
    for kw in ({"max_tokens": 15}, {"temperature": 0.5, "seed": 7}, {"top_k": 3}, {"stop": [STOP, "zz"]},
               {"cache_salt": "tenant-b"}):
        st, h, r = post(S, chat_body(**kw))
        assert st == 200 and h.get("x-infer-cache") == "miss", (kw, h)
    st, h, r = post(S, chat_body(content=PROMPT + " "))
    assert h.get("x-infer-cache") == "miss", h
    st, h, r = post(S, {"messages": [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": PROMPT}], "max_tokens": 16, "temperature": 0,
                        "stop": [STOP]})
    assert h.get("x-infer-cache") == "miss", h
    # the seeded sampled request is now stored: the same seed hits, another seed does not
    st, h, r = post(S, chat_body(temperature=0.5, seed=7))
    assert h.get("x-infer-cache") == "hit-exact", h
    st, h, r = post(S, chat_body(temperature=0.5, seed=8))
    assert h.get("x-infer-cache") == "miss", h


def test_bypass():
    st, h, r = post(S, chat_body(temperature=0.7))  # random seed: no one answer to repeat
    assert h.get("x-infer-cache") == "bypass", h


def test_tools_bypass():
    """Requests with tools or tool turns bypass both tiers (an answer that is a call asks the client
    to act; its ids and its streamed shape are not replayed): never stored, never answered from the
    store, whole or streamed, through /v1/chat/completions."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    body = chat_body(content="What is the weather in Oslo?", tools=tools, tool_choice="required", max_tokens=40)
    body.pop("stop", None)
    for stream in (False, False, True, True):
        st, h, raw = S.request("POST", "/v1/chat/completions", dict(body, stream=stream))
        assert st == 200 and h.get("x-infer-cache") == "bypass", (stream, st, h, raw[:200])
        if stream:
            events, done = sse_events(raw)
            assert done and any(e["choices"] and e["choices"][0]["delta"].get("tool_calls") for e in events), raw
        else:
            assert json.loads(raw)["choices"][0]["message"]["tool_calls"], raw
    # a conversation with a call and its result, without tools this time
    call = json.loads(S.request("POST", "/v1/chat/completions", body)[2])["choices"][0]["message"]["tool_calls"][0]
    turns = {"messages": [{"role": "user", "content": "What is the weather in Oslo?"},
                          {"role": "assistant", "content": None, "tool_calls": [call]},
                          {"role": "tool", "tool_call_id": call["id"], "content": "3 degrees, snow"}],
             "max_tokens": 8, "temperature": 0}
    for _ in range(2):
        st, h, r = post(S, turns)
        assert st == 200 and h.get("x-infer-cache") == "bypass", h
    m = S.metrics()
    assert m['infer_response_cache_lookups_total{result="bypass"}'] >= 6, m


def sse_events(raw):
    """The JSON objects of an SSE body, and whether it ended with [DONE]."""
    events, done = [], False
    for block in raw.decode().split("\n\n"):
        if not block.startswith("data: "):
            continue
        data = block[len("data: "):]
        if data == "[DONE]":
            done = True
        else:
            events.append(json.loads(data))
    return events, done


def test_streamed_store_and_replay():
    # a streamed answer is stored once its stream completes ...
    body = chat_body(content="Is the back door locked?")
    st, h, raw = S.request("POST", "/v1/chat/completions", dict(body, stream=True))
    assert st == 200 and h.get("x-infer-cache") == "miss", h
    events, done = sse_events(raw)
    assert done and events[-1]["choices"][0]["finish_reason"] == "stop", events[-1]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    st, h, r = post(S, body)
    assert h.get("x-infer-cache") == "hit-exact", h
    assert r["choices"][0]["message"]["content"] == text
    # ... and a hit on a streamed request is replayed as chunks, parsed by the openai SDK
    c = openai.OpenAI(base_url=S.base_url, api_key="none", max_retries=0)
    raw = c.chat.completions.with_raw_response.create(
        model=c.models.list().data[0].id, messages=body["messages"], max_tokens=16, temperature=0,
        stop=[STOP], stream=True, stream_options={"include_usage": True})
    assert raw.headers.get("x-infer-cache") == "hit-exact", raw.headers
    assert raw.headers.get("content-type", "").startswith("text/event-stream")
    chunks = list(raw.parse())
    assert chunks[0].object == "chat.completion.chunk" and chunks[0].choices[0].delta.role == "assistant"
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == text
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == r["usage"]["completion_tokens"]
    assert len({ch.id for ch in chunks}) == 1 and chunks[0].id != r["id"]


def test_only_complete_answers_stored():
    body = {"messages": [{"role": "user", "content": "Count: one two"}], "max_tokens": 2, "temperature": 0}
    st, h, r = post(S, body)
    assert r["choices"][0]["finish_reason"] == "length" and h.get("x-infer-cache") == "miss"
    st, h, r = post(S, body)
    assert h.get("x-infer-cache") == "miss", h  # a length-cut answer is not stored
    st, h, r = post(S, chat_body(max_tokens=10 ** 7))  # an error (over --max-tokens)
    assert st == 400
    st, h, r = post(S, chat_body(max_tokens=10 ** 7))
    assert st == 400


def test_controls():
    body = chat_body(content="Open the garage door")
    st, h, r = post(S, body, {"Cache-Control": "no-store"})
    assert h.get("x-infer-cache") == "miss"
    st, h, r = post(S, body)
    assert h.get("x-infer-cache") == "miss", h  # not stored before: stored now
    st, h, r = post(S, body, {"Cache-Control": "no-cache"})
    assert h.get("x-infer-cache") == "miss", h  # not looked up
    st, h, r = post(S, body)
    assert h.get("x-infer-cache") == "hit-exact", h
    b2 = dict(body, cache={"no-cache": True})
    st, h, r = post(S, b2)
    assert h.get("x-infer-cache") == "miss", h
    b3 = chat_body(content="Close the garage door", cache={"no-store": True})
    post(S, b3)
    st, h, r = post(S, chat_body(content="Close the garage door"))
    assert h.get("x-infer-cache") == "miss", h


def test_stats_and_metrics():
    st, s = S.get_json("/v1/cache/stats")
    assert st == 200 and s["entries"] >= 3 and s["lookups"]["hit-exact"] >= 3 and s["tiers"] == ["exact"], s
    m = S.metrics()
    assert m['infer_response_cache_lookups_total{result="hit-exact"}'] >= 3, m
    assert m['infer_response_cache_skipped_total{reason="not-complete"}'] >= 1
    assert m["infer_response_cache_stores_total"] >= 3


def test_restart_ttl_and_purge():
    db = os.path.join(TMP, "persist.sqlite")
    srv = Server(MODEL, ["-c", "256", "-np", "1", "--semantic-cache-db", db, "--semantic-cache-ttl", "3s"],
                 name="rc1")
    try:
        st, h, a = post(srv, chat_body())
        assert h.get("x-infer-cache") == "miss"
    finally:
        assert srv.stop() == 0, srv.log()
    srv = Server(MODEL, ["-c", "256", "-np", "1", "--semantic-cache-db", db, "--semantic-cache-ttl", "3s"],
                 name="rc2")
    try:
        st, h, b = post(srv, chat_body())
        assert h.get("x-infer-cache") == "hit-exact", h  # survived the restart
        assert b["choices"] == a["choices"]
        time.sleep(3.5)
        st, h, b = post(srv, chat_body())
        assert h.get("x-infer-cache") == "miss", h  # expired: TTL from creation
        st, h, b = post(srv, chat_body())
        assert h.get("x-infer-cache") == "hit-exact", h
        st, h, raw = srv.request("DELETE", "/v1/cache")
        assert st == 200 and b'"deleted":1' in raw, raw
        st, h, b = post(srv, chat_body())
        assert h.get("x-infer-cache") == "miss", h
    finally:
        assert srv.stop() == 0, srv.log()


def test_tenants_by_api_key():
    db = os.path.join(TMP, "tenants.sqlite")
    srv = Server(MODEL, ["-c", "256", "-np", "1", "--semantic-cache-db", db, "--api-key", "alpha",
                         "--api-key", "beta"], name="rc3")
    try:
        ka, kb = {"Authorization": "Bearer alpha"}, {"Authorization": "Bearer beta"}
        st, h, r = post(srv, chat_body(), ka)
        assert h.get("x-infer-cache") == "miss"
        st, h, r = post(srv, chat_body(), ka)
        assert h.get("x-infer-cache") == "hit-exact"
        st, h, r = post(srv, chat_body(), kb)
        assert h.get("x-infer-cache") == "miss", h  # another tenant never sees alpha's answers
        st, h, r = post(srv, chat_body(), kb)
        assert h.get("x-infer-cache") == "hit-exact"
        st, h, raw = srv.request("DELETE", "/v1/cache", None, kb)  # beta purges beta only
        assert st == 200 and b'"deleted":1' in raw, raw
        st, h, r = post(srv, chat_body(), ka)
        assert h.get("x-infer-cache") == "hit-exact", h
        st, h, r = post(srv, chat_body(), kb)
        assert h.get("x-infer-cache") == "miss", h
    finally:
        assert srv.stop() == 0, srv.log()


def test_corrupt_and_foreign_files():
    for name, make in (("garbage.sqlite", lambda p: open(p, "wb").write(b"not a database" * 100)),
                       ("foreign.sqlite", lambda p: sqlite3.connect(p).execute("CREATE TABLE t(x)").connection
                        .commit())):
        db = os.path.join(TMP, name)
        make(db)
        srv = Server(MODEL, ["-c", "256", "-np", "1", "--semantic-cache-db", db], name="rc4")
        try:
            assert "foreign or corrupt" in srv.log(), srv.log()
            st, h, r = post(srv, chat_body())
            assert st == 200 and h.get("x-infer-cache") == "miss"
            st, h, r = post(srv, chat_body())
            assert h.get("x-infer-cache") == "hit-exact"
        finally:
            assert srv.stop() == 0, srv.log()
        assert any(f.startswith(name + ".bad-") for f in os.listdir(TMP)), os.listdir(TMP)


def test_unwritable_path():
    d = os.path.join(TMP, "ro")
    os.mkdir(d)
    db = os.path.join(d, "x.sqlite")
    sqlite3.connect(db).close()  # an empty file is a valid, empty database
    os.chmod(db, 0o444)
    os.chmod(d, 0o555)
    try:
        if os.access(db, os.W_OK):
            raise harness.Skip("running as root: cannot make a read-only file")
        srv = Server(MODEL, ["-c", "256", "-np", "1", "--semantic-cache-db", db], name="rc5")
        try:
            st, h, r = post(srv, chat_body())
            assert st == 200, r  # the server keeps answering
        finally:
            assert srv.stop() == 0, srv.log()
    finally:
        os.chmod(d, 0o755)
        os.chmod(db, 0o644)


def test_off_by_default():
    srv = Server(MODEL, ["-c", "256", "-np", "1"], name="rc6")
    try:
        st, h, r = post(srv, chat_body())
        assert st == 200 and "x-infer-cache" not in h, h
        st, h, raw = srv.request("GET", "/v1/cache/stats")
        assert st == 501, raw
    finally:
        assert srv.stop() == 0, srv.log()


def main():
    global S, TMP
    if not MODEL:
        print("SKIP: no model")
        return 77
    TMP = tempfile.mkdtemp(prefix="infer-rc-")
    print(f"test_respcache: model {MODEL}", flush=True)
    S = Server(MODEL, ["-c", "256", "-np", "2", "--max-tokens", "64", "--semantic-cache-db",
                       os.path.join(TMP, "main.sqlite")], name="rc")
    tests = [test_hit_after_miss, test_any_difference_misses, test_bypass, test_tools_bypass,
             test_streamed_store_and_replay,
             test_only_complete_answers_stored,
             test_controls, test_stats_and_metrics, test_restart_ttl_and_purge, test_tenants_by_api_key,
             test_corrupt_and_foreign_files, test_unwritable_path, test_off_by_default]
    return harness.run_with_server(S, tests, "test_respcache", setup=find_stop, cleanup_dir=TMP)


if __name__ == "__main__":
    sys.exit(main())
