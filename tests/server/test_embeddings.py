#!/usr/bin/env python3
"""test_embeddings.py - POST /v1/embeddings of `infer serve --embedding-model`, through the
official openai SDK (embeddings.create) and plain HTTP.

Checks: the chat model and the embedding model served together (/v1/models lists both, a chat
and an embedding request run at the same time); embeddings.create with a string and with a
list (one batch, indexes in order, usage), in the SDK's default base64 encoding and in floats
(the same bits); agreement with llama.cpp's vectors of the same file (tests/data/embed);
truncation of a long input reported ("truncated" and X-Infer-Truncated), never an error;
OpenAI-shaped errors (token inputs, empty list, unknown model, other dimensions, too many
inputs, wrong types); 501 without --embedding-model; /metrics counters.  Skips when
models/fetch-embedder has not been run.  Run by tests/server/run.sh.
"""
import base64
import math
import os
import struct
import subprocess
import sys
import threading

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from harness import Server  # noqa: E402

import openai  # noqa: E402

MODEL = harness.test_model()
EMBEDDER = os.path.join(harness.srcdir(), "models", "all-minilm-l6-v2-f16.gguf")
EMBED_ID = "all-minilm-l6-v2-f16"
S = None


def client(server=None):
    return openai.OpenAI(base_url=(server or S).base_url, api_key="none", max_retries=0, timeout=120)


def reference():
    """llama.cpp's embeddings of tests/data/embed/sentences.txt (contrib/golden/embed-ref)."""
    d = os.path.join(harness.srcdir(), "tests", "data", "embed")
    with open(os.path.join(d, "sentences.txt"), encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f if line.strip()]
    with open(os.path.join(d, "all-minilm-l6-v2-f16.out"), encoding="utf-8") as f:
        vectors = [[float(x) for x in line.split()] for line in f]
    return sentences, vectors


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def test_models_listed():
    ids = [m.id for m in client().models.list().data]
    assert EMBED_ID in ids and len(ids) == 2, ids
    assert client().models.retrieve(EMBED_ID).id == EMBED_ID


def test_sdk_string_and_reference():
    sentences, ref = reference()
    r = client().embeddings.create(model=EMBED_ID, input=sentences[1])  # the SDK asks for base64
    assert r.object == "list" and r.model == EMBED_ID and len(r.data) == 1
    v = r.data[0].embedding
    assert len(v) == 384 and abs(dot(v, v) - 1.0) < 1e-5
    assert dot(v, ref[1]) >= 0.9999, dot(v, ref[1])
    assert r.usage.prompt_tokens == 9 and r.usage.total_tokens == 9, r.usage


def test_sdk_batch_float_equals_base64():
    sentences, ref = reference()
    short = sentences[:-1]  # the long one is truncated at the server's default 256 tokens
    rf = client().embeddings.create(model=EMBED_ID, input=short, encoding_format="float")
    rb = client().embeddings.create(model=EMBED_ID, input=short)
    assert [d.index for d in rf.data] == list(range(len(short)))
    for i, (a, b) in enumerate(zip(rf.data, rb.data)):
        assert a.embedding == b.embedding, i  # float32 either way: the same bits
        assert dot(a.embedding, ref[i]) >= 0.9999, (i, dot(a.embedding, ref[i]))
    single = client().embeddings.create(model=EMBED_ID, input=short[3], encoding_format="float")
    assert single.data[0].embedding == rf.data[3].embedding  # batched == alone
    assert rf.usage.prompt_tokens == sum(
        client().embeddings.create(model=EMBED_ID, input=s).usage.prompt_tokens for s in short[:3]) + sum(
        client().embeddings.create(model=EMBED_ID, input=s).usage.prompt_tokens for s in short[3:])


def test_raw_base64_shape():
    st, body = S.post("/v1/embeddings", {"input": ["Hello world", ""], "encoding_format": "base64"})
    assert st == 200, body
    for item in body["data"]:
        raw = base64.b64decode(item["embedding"])
        v = struct.unpack("<384f", raw)
        assert abs(math.fsum(x * x for x in v) - 1.0) < 1e-5
        assert item["object"] == "embedding" and "truncated" not in item
    assert body["usage"] == {"prompt_tokens": 6, "total_tokens": 6}, body["usage"]  # 4 + [CLS] [SEP]


def test_truncation_reported():
    sentences, ref = reference()
    long = sentences[-1] + " " + sentences[-1]
    st, h, raw = S.request("POST", "/v1/embeddings", {"model": EMBED_ID, "input": [long, "short one"]})
    assert st == 200, raw[:300]
    assert h.get("x-infer-truncated") == "1", h
    r = client().embeddings.create(model=EMBED_ID, input=[long, "short one"], encoding_format="float")
    assert r.data[0].model_extra.get("truncated") is True, r.data[0].model_extra
    assert not r.data[1].model_extra.get("truncated")
    assert r.usage.prompt_tokens == 256 + 4, r.usage


def expect_error(status, body, code=None):
    st, data = S.post("/v1/embeddings", body)
    assert st == status, (st, data)
    assert "error" in data and data["error"]["message"], data
    if code:
        assert data["error"]["code"] == code, data


def test_errors():
    expect_error(400, {"input": [1, 2, 3]}, "invalid_value")          # token ids
    expect_error(400, {"input": [[1, 2], [3]]}, "invalid_value")
    expect_error(400, {"input": []}, "invalid_value")
    expect_error(400, {}, "invalid_value")
    expect_error(400, {"input": 5}, "invalid_value")
    expect_error(400, {"input": ["a", None]}, "invalid_value")
    expect_error(400, {"input": "a", "encoding_format": "int8"}, "invalid_value")
    expect_error(400, {"input": "a", "dimensions": 128}, "invalid_value")
    expect_error(400, {"input": ["a"] * 2049}, "invalid_value")
    expect_error(404, {"input": "a", "model": "no-such-model"}, "model_not_found")
    expect_error(404, {"input": "a", "model": os.path.basename(MODEL)[:-5]}, "model_not_found")
    st, h, raw = S.request("POST", "/v1/embeddings", b"{not json")
    assert st == 400, raw
    try:
        client().embeddings.create(model="no-such-model", input="x")
        raise AssertionError("no error")
    except openai.NotFoundError:
        pass
    st, data = S.post("/v1/embeddings", {"input": "ok", "dimensions": 384, "user": "u1"})
    assert st == 200, data


def test_chat_and_embeddings_together():
    """Both models in one process: requests to each at the same time both succeed."""
    chat_id = [m.id for m in client().models.list().data if m.id != EMBED_ID][0]
    out = {}

    def chat():
        r = client().chat.completions.create(model=chat_id, messages=[{"role": "user", "content": "Hi"}],
                                             max_tokens=8, temperature=0)
        out["chat"] = r.usage.completion_tokens

    t = threading.Thread(target=chat)
    t.start()
    for _ in range(3):
        r = client().embeddings.create(model=EMBED_ID, input=["will it rain tomorrow?"] * 8)
        assert len(r.data) == 8
    t.join(120)
    assert out.get("chat", 0) >= 1, out


def test_metrics():
    m = S.metrics()
    assert m["infer_embedding_inputs_total"] >= 10, m
    assert m["infer_embedding_tokens_total"] > m["infer_embedding_inputs_total"]
    assert m["infer_embedding_truncated_total"] >= 1
    assert m['infer_requests_total{endpoint="embeddings",code="200"}'] >= 5, \
        {k: v for k, v in m.items() if "embeddings" in k}


def test_no_embedding_model():
    srv = Server(MODEL, ["-c", "256", "-np", "1"], name="noembed")
    try:
        st, data = srv.post("/v1/embeddings", {"input": "a"})
        assert st == 501 and "--embedding-model" in data["error"]["message"], (st, data)
    finally:
        assert srv.stop() == 0, srv.log()


def test_bad_embedding_model():
    """A decoder model given as the embedding model: a clear error at start, exit status 1."""
    p = subprocess.run([harness.infer_binary(), "serve", "-m", MODEL, "--host", "127.0.0.1", "--port", "0",
                        "--embedding-model", MODEL], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "not an embedding model" in p.stderr, (p.returncode, p.stderr[-500:])


def main():
    global S
    if not MODEL:
        print("SKIP: no model")
        return 77
    if not os.path.exists(EMBEDDER):
        print(f"SKIP: {EMBEDDER} not fetched (models/fetch-embedder)")
        return 77
    print(f"test_embeddings: model {MODEL}, embedder {EMBEDDER}", flush=True)
    S = Server(MODEL, ["-c", "512", "-np", "2", "--embedding-model", EMBEDDER], name="embed")
    tests = [test_models_listed, test_sdk_string_and_reference, test_sdk_batch_float_equals_base64,
             test_raw_base64_shape, test_truncation_reported, test_errors, test_chat_and_embeddings_together,
             test_metrics, test_no_embedding_model, test_bad_embedding_model]
    return harness.run_with_server(S, tests, "test_embeddings")


if __name__ == "__main__":
    sys.exit(main())
