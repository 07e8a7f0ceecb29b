#!/usr/bin/env python3
"""test_ollama.py - `infer serve` as an Ollama server, driven by the official `ollama` Python
client from PyPI (pinned in contrib/quickstart.sh) and plain HTTP.

Checks: chat and generate, streamed (NDJSON) and not, give the same greedy text; the fields
clients read (model, created_at, message/response, done, done_reason and durations that add
up and fit in the client's own wall time); /api/tags, /api/show, /api/ps, /api/version and
the "Ollama is running" probe; names (--alias, NAME:latest, the file name); options taking
effect (num_predict bounds eval_count, seed repeats a sampled answer, stop cuts it, num_ctx
bounds the context, unknown and unsupported options refused); keep_alive loading and
unloading the model; the prefix cache under /api/chat; embeddings (/api/embed,
/api/embeddings, equal to /v1/embeddings; skipped without models/fetch-embedder); Ollama-
shaped errors (unknown model: ollama.ResponseError 404; malformed bodies: 400; model
management: 501) and a hostile corpus (broken JSON, NDJSON bodies, wrong types, deep
nesting) that must get 4xx, never a 5xx or a crash; tool calls (test_tools*: the client's
round trip call -> tool result -> answer, whole and streamed, a second server with
--tool-choice required on the default model, hostile tool bodies).  Run by tests/server/run.sh
(also under the ASan build: the server's exit status is checked).
"""
import datetime
import json
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from harness import Server  # noqa: E402

try:
    import ollama  # noqa: E402
except ImportError:
    ollama = None
try:
    import jsonschema  # noqa: E402
except ImportError:
    jsonschema = None

MODEL = harness.test_model()
EMBEDDER = os.path.join(harness.srcdir(), "models", "all-minilm-l6-v2-f16.gguf")
EMBED = "all-minilm-l6-v2-f16"
ALIAS = "tiny"
S = None
HAVE_EMBEDDER = os.path.exists(EMBEDDER)
HELLO = [{"role": "user", "content": "Hello, who are you?"}]


def client():
    return ollama.Client(host=f"http://127.0.0.1:{S.port}", timeout=120)


def expect_error(status, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except ollama.ResponseError as e:
        assert e.status_code == status, (e.status_code, e.error)
        return e.error
    raise AssertionError(f"expected ResponseError {status}")


def parse_time(s):
    assert s.endswith("Z"), s
    return datetime.datetime.fromisoformat(s[:26] + "+00:00")  # Python takes microseconds


def check_stats(r, wall_ns, prompt=True):
    """The durations are measured: all positive, nested, and within the client's wall time."""
    assert r.done is True
    assert r.total_duration > 0 and r.total_duration <= wall_ns, (r.total_duration, wall_ns)
    assert r.load_duration >= 0
    if prompt:
        assert r.prompt_eval_count > 0 and r.eval_count > 0, r
        assert r.prompt_eval_duration > 0 and r.eval_duration > 0, r
        assert r.prompt_eval_duration + r.eval_duration <= r.total_duration, r
    age = datetime.datetime.now(datetime.timezone.utc) - parse_time(r.created_at)
    assert abs(age.total_seconds()) < 600, r.created_at


# ---------------------------------------------------------------- generation

def test_probe_and_version():
    st, h, body = S.request("GET", "/")
    assert st == 200 and body == b"Ollama is running", (st, body)
    st, h, body = S.request("HEAD", "/")
    assert st == 200 and body == b"", (st, body)
    st, v = S.get_json("/api/version")
    assert st == 200 and v["version"].count(".") == 2, v


def test_chat():
    t0 = time.monotonic_ns()
    r = client().chat(model=ALIAS, messages=HELLO, options={"temperature": 0, "num_predict": 12})
    wall = time.monotonic_ns() - t0
    assert r.model == ALIAS and r.message.role == "assistant" and r.message.content, r
    assert r.done_reason in ("stop", "length"), r
    check_stats(r, wall)
    assert r.eval_count <= 12


def test_streaming_chat_equals_whole():
    opts = {"temperature": 0, "num_predict": 12}
    whole = client().chat(model=ALIAS, messages=HELLO, options=opts)
    parts = list(client().chat(model=ALIAS, messages=HELLO, options=opts, stream=True))
    assert len(parts) >= 2 and all(not p.done for p in parts[:-1]) and parts[-1].done, parts
    text = "".join(p.message.content for p in parts)
    assert text == whole.message.content, (text, whole.message.content)
    assert parts[-1].eval_count == whole.eval_count and parts[-1].done_reason == whole.done_reason
    assert parts[-1].prompt_eval_count == whole.prompt_eval_count
    # the raw stream is NDJSON: one JSON object per line
    st, h, body = S.request("POST", "/api/chat", {"model": ALIAS, "messages": HELLO, "options": opts})
    assert st == 200 and h["content-type"] == "application/x-ndjson", (st, h)
    lines = body.decode().splitlines()
    assert all(json.loads(line) for line in lines) and json.loads(lines[-1])["done"] is True


def test_generate():
    opts = {"temperature": 0, "num_predict": 10}
    t0 = time.monotonic_ns()
    r = client().generate(model=ALIAS, prompt="Once upon a time", options=opts)
    check_stats(r, time.monotonic_ns() - t0)
    assert r.response and r.model == ALIAS
    parts = list(client().generate(model=ALIAS, prompt="Once upon a time", options=opts, stream=True))
    assert "".join(p.response for p in parts) == r.response
    # raw: no template, so fewer prompt tokens than the templated turn
    raw = client().generate(model=ALIAS, prompt="Once upon a time", options=opts, raw=True)
    assert raw.prompt_eval_count < r.prompt_eval_count, (raw.prompt_eval_count, r.prompt_eval_count)
    # a system prompt is part of the templated prompt
    sys_r = client().generate(model=ALIAS, prompt="Once upon a time", system="Be brief.", options=opts)
    assert sys_r.prompt_eval_count > r.prompt_eval_count


def test_names():
    base = os.path.basename(MODEL)[:-5]
    for name in (ALIAS, ALIAS + ":latest", base, base + ".gguf"):
        r = client().generate(model=name, prompt="Hi", options={"num_predict": 1, "temperature": 0})
        assert r.model == name and r.done, name
    err = expect_error(404, client().chat, model="llama3.2", messages=HELLO)
    assert 'model "llama3.2" not found' in err, err
    expect_error(404, client().generate, model="nope:7b", prompt="x")
    expect_error(404, client().show, "nope")


# ---------------------------------------------------------------- options

def test_num_predict_limits_eval_count():
    for n in (1, 3, 7):
        r = client().generate(model=ALIAS, prompt="Count: one, two,", options={"num_predict": n, "temperature": 0})
        assert r.eval_count <= n, (n, r.eval_count)
        if r.done_reason == "length":
            assert r.eval_count == n, (n, r)


def test_seed_repeats_sampled_answer():
    def run(seed):
        o = {"temperature": 1.5, "top_k": 0, "top_p": 1, "min_p": 0, "seed": seed, "num_predict": 16}
        return client().generate(model=ALIAS, prompt="The weather today", options=o, raw=True).response
    a, b = run(1234), run(1234)
    assert a == b, (a, b)
    others = {run(s) for s in (1, 2, 3)}
    assert len(others | {a}) > 1, others  # the seed is what fixes it, not greedy decoding


def test_stop_cuts():
    o = {"temperature": 0, "num_predict": 16}
    full = client().generate(model=ALIAS, prompt="Once upon a time", options=o, raw=True).response
    assert len(full) >= 6, full
    stop = full[3:6]
    cut = client().generate(model=ALIAS, prompt="Once upon a time", options={**o, "stop": [stop]}, raw=True)
    assert cut.response == full[: full.index(stop)], (cut.response, full, stop)
    assert cut.done_reason == "stop"


def test_num_ctx_bounds_the_context():
    r = client().generate(model=ALIAS, prompt="Once upon a time", raw=True, options={"temperature": 0})
    n_prompt = r.prompt_eval_count
    r = client().generate(model=ALIAS, prompt="Once upon a time", raw=True,
                          options={"temperature": 0, "num_ctx": n_prompt + 3, "num_predict": 100})
    assert r.eval_count <= 3 and (r.done_reason == "stop" or r.eval_count == 3), r
    err = expect_error(400, client().generate, model=ALIAS, prompt="Once upon a time " * 20, raw=True,
                       options={"num_ctx": 8})
    assert "context" in err, err


def test_options_refused():
    for opts, word in (({"temperature": "hot"}, "temperature"), ({"top_k": 1.5}, "top_k"),
                       ({"top_p": 3}, "top_p"), ({"seed": "x"}, "seed"), ({"stop": [1]}, "stop"),
                       ({"num_predict": "8"}, "num_predict"), ({"mirostat": 2}, "mirostat"),
                       ({"frobnicate": 1}, "frobnicate"), ({"num_ctx": 0}, "num_ctx")):
        err = expect_error(400, client().generate, model=ALIAS, prompt="x", options=opts)
        assert word in err, (opts, err)
    # hardware options change nothing here: accepted; a neutral mirostat too
    r = client().generate(model=ALIAS, prompt="x", options={"num_gpu": 99, "num_thread": 2, "use_mmap": True,
                                                           "mirostat": 0, "num_predict": 1})
    assert r.done
    err = expect_error(400, client().chat, model=ALIAS, messages=HELLO, think=True)
    assert "thinking" in err, err
    expect_error(400, client().generate, model=ALIAS, prompt="x", images=[b"\x89PNG"])


def test_format():
    """format "json" or a JSON schema holds the answer to it (the grammar of response_format)."""
    r = client().generate(model=ALIAS, prompt="A JSON object:", format="json", options={"num_predict": 24,
                                                                                        "temperature": 0})
    assert isinstance(json.loads(r.response), dict), r.response
    schema = {"type": "object", "properties": {"room": {"type": "string", "maxLength": 12},
                                               "on": {"type": "boolean"}}, "required": ["room", "on"]}
    for temp in (0, 1):
        c = client().chat(model=ALIAS, messages=HELLO, format=schema,
                          options={"num_predict": 40, "temperature": temp, "seed": 3})
        v = json.loads(c.message.content)
        assert isinstance(v, dict) and set(v) == {"room", "on"} and isinstance(v["on"], bool), c.message.content
    err = expect_error(400, client().chat, model=ALIAS, messages=HELLO, format={"type": "string", "pattern": "a+"})
    assert "pattern" in err, err


# ---------------------------------------------------------------- tool calls

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a given city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}},
                   "required": ["city"]}}}
# shaped like Home Assistant's intent tools (voluptuous schemas converted to JSON schema)
TURN_ON = {"type": "function", "function": {
    "name": "HassTurnOn", "description": "Turns on/opens a device or entity",
    "parameters": {"type": "object", "properties": {
        "name": {"type": "string"}, "area": {"type": "string"},
        "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch", "fan"]}}},
        "required": []}}}
TOOLS = [WEATHER, TURN_ON]


def check_calls(calls):
    """Ollama's shape: function.name one of the tools, function.arguments an object valid against
    its parameters; returns [(name, arguments)]."""
    spec = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    out = []
    assert calls, calls
    for c in calls:
        f = c.function
        assert f.name in spec, f.name
        assert isinstance(f.arguments, dict), f.arguments  # an object, not OpenAI's JSON string
        if jsonschema:
            jsonschema.validate(f.arguments, spec[f.name])
        out.append((f.name, f.arguments))
    return out


def test_tools_auto():
    """--tool-choice auto (the default): a tools request is the model's choice; whole and streamed
    give the same answer, and whatever comes back is a valid call or text, never both missing."""
    opts = {"temperature": 0, "num_predict": 48}
    msgs = [{"role": "user", "content": "What is the weather in Tokyo?"}]
    whole = client().chat(model=ALIAS, messages=msgs, tools=TOOLS, options=opts)
    parts = list(client().chat(model=ALIAS, messages=msgs, tools=TOOLS, options=opts, stream=True))
    assert parts[-1].done and all(not p.done for p in parts[:-1]), parts
    text = "".join(p.message.content or "" for p in parts)
    streamed_calls = [c for p in parts for c in (p.message.tool_calls or [])]
    if whole.message.tool_calls:
        assert check_calls(whole.message.tool_calls) == check_calls(streamed_calls)
    else:
        assert whole.message.content and text == whole.message.content and not streamed_calls, (whole, parts)
        if whole.message.content.lstrip()[:1] not in "{[<":
            # text that cannot be a call streams as it is generated, not in one line at the end
            # (Open WebUI offers tools with every message): one line per token or so
            lines = [p for p in parts[:-1] if p.message.content]
            assert len(lines) >= min(5, whole.eval_count // 2), (len(lines), whole.eval_count, parts)
    assert parts[-1].eval_count == whole.eval_count and parts[-1].done_reason == whole.done_reason


def test_tools_required_round_trip():
    """A server started with --tool-choice required, on the default model (Ollama requests have no
    tool_choice): the user's turn gets a valid call, whole and streamed, through the official client;
    the call and the tool's result go back (the client's own Message, tool_name) and the answer is
    text; the catalogue is a cached prefix by then."""
    # the default model in make check; the ASan run's synthetic model there (INFER_SERVE_TEST_MODEL)
    model = os.environ.get("INFER_SERVE_TEST_MODEL") or harness.default_model() or MODEL
    real = model == harness.default_model()
    srv = Server(model, ["-c", "2048", "-np", "2", "--alias", ALIAS, "--max-tokens", "256",
                         "--tool-choice", "required"], name="ollama-tools")
    try:
        c = ollama.Client(host=f"http://127.0.0.1:{srv.port}", timeout=300)
        opts = {"temperature": 0, "num_predict": 96}
        question = {"role": "user", "content": "What is the weather in Toronto?"}
        first = c.chat(model=ALIAS, messages=[question], tools=TOOLS, options=opts)
        # (a call cut by num_predict is closed by the grammar: "length", still a call)
        assert first.done and first.done_reason in (("stop",) if real else ("stop", "length")), first
        assert first.message.role == "assistant" and first.message.tool_calls, first.message
        calls = check_calls(first.message.tool_calls)
        assert len(calls) == 1, calls  # a forced call is one call
        raw = first.message.tool_calls[0]
        assert first.message.content == "", first.message
        # streamed: one line (not done) carries the calls, then the final line; same greedy call
        parts = list(c.chat(model=ALIAS, messages=[question], tools=TOOLS, options=opts, stream=True))
        carrying = [p for p in parts if p.message.tool_calls]
        assert len(carrying) == 1 and not carrying[0].done, parts
        assert parts[-1].done and parts[-1].done_reason == first.done_reason, parts[-1]
        assert not parts[-1].message.tool_calls, parts[-1]
        assert check_calls(carrying[0].message.tool_calls) == calls
        assert parts[-1].eval_count == first.eval_count
        # the raw line: Ollama's fields (id, function.index), arguments an object
        st, h, body = srv.request("POST", "/api/chat", {"model": ALIAS, "messages": [question], "tools": TOOLS,
                                                       "options": opts, "stream": False})
        m = json.loads(body)["message"]
        assert st == 200 and m["tool_calls"][0]["id"].startswith("call_"), (st, body)
        assert m["tool_calls"][0]["function"]["index"] == 0 and isinstance(m["tool_calls"][0]["function"]["arguments"],
                                                                           dict), m
        # every tool and a few questions: always a valid call
        for q in ("Turn on the kitchen light", "Switch on the fan in the bedroom", "Is it raining in Rome?"):
            r = c.chat(model=ALIAS, messages=[{"role": "user", "content": q}], tools=TOOLS,
                       options={"temperature": 1.0, "seed": 7, "num_predict": 96})
            check_calls(r.message.tool_calls)
        # the round trip: the client's Message with the call, then the result with tool_name
        name, args = calls[0]
        msgs = [question, first.message, {"role": "tool", "content": "11 degrees celsius", "tool_name": name}]
        second = c.chat(model=ALIAS, messages=msgs, tools=TOOLS, options={"temperature": 0, "num_predict": 32})
        assert not second.message.tool_calls and isinstance(second.message.content, str), second.message
        assert second.message.content or not real, second.message
        assert second.done_reason in ("stop", "length"), second
        assert second.prompt_eval_count > first.prompt_eval_count
        parts = list(c.chat(model=ALIAS, messages=msgs, tools=TOOLS, stream=True,
                            options={"temperature": 0, "num_predict": 32}))
        assert "".join(p.message.content or "" for p in parts) == second.message.content
        assert not any(p.message.tool_calls for p in parts)
        # the call's arguments as the client sends them back (an object) or as JSON text: same prompt
        msgs_text = [question, {"role": "assistant", "content": "",
                                "tool_calls": [{"function": {"name": raw.function.name,
                                                             "arguments": json.dumps(raw.function.arguments)}}]},
                     msgs[2]]
        st, h, body = srv.request("POST", "/api/chat", {"model": ALIAS, "messages": msgs_text, "tools": TOOLS,
                                                       "stream": False,
                                                       "options": {"temperature": 0, "num_predict": 32}})
        assert st == 200 and json.loads(body)["prompt_eval_count"] == second.prompt_eval_count, body
        # infer's prompt_cache_count (the client drops it): the whole conversation was computed before
        assert json.loads(body)["prompt_cache_count"] >= second.prompt_eval_count - 32, body
        # /api/show says so
        assert "tools" in c.show(ALIAS).capabilities
    finally:
        assert srv.stop() == 0, srv.log()


def test_tools_hostile():
    """Malformed tool definitions and tool turns: 400 in Ollama's shape, naming the field."""
    call = {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather",
                                                                            "arguments": {"city": "Oslo"}}}]}
    user = {"role": "user", "content": "Weather?"}
    for extra, word in (
            ({"tools": {"type": "function"}}, "tools"),
            ({"tools": [1]}, "tools[0]"),
            ({"tools": [{"type": "function", "function": {"name": ""}}]}, "tools[0]"),
            ({"tools": [{"type": "function", "function": {"name": "x" * 65}}]}, "tools[0]"),
            ({"tools": [{"type": "function", "function": {"name": "rm -rf"}}]}, "tools[0]"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "object"}}]}, "tools[0]"),
            ({"tools": [{"type": "function", "function": {"name": "f", "description": 3}}]}, "tools[0]"),
            ({"tools": [WEATHER, WEATHER]}, "used twice"),
            ({"tools": [WEATHER] * 129}, "tools"),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"a": {"type": "string", "pattern": "x+"}}}}}],
              "tool_choice": "required"}, "pattern"),
            ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
            ({"tools": [WEATHER], "messages": [user, {**call, "tool_calls": {}}]}, "messages[1].tool_calls"),
            ({"tools": [WEATHER], "messages": [user, {**call, "tool_calls": [{"function": {"arguments": {}}}]}]},
             "messages[1].tool_calls[0]"),
            ({"tools": [WEATHER], "messages": [user, {**call, "tool_calls": [
                {"function": {"name": "get_weather", "arguments": 42}}]}]}, "messages[1].tool_calls[0]"),
            ({"tools": [WEATHER], "messages": [user, call, {"role": "tool", "content": "r", "tool_name": []}]},
             "messages[2].tool_name"),
            ({"tools": [WEATHER], "messages": [user, {"role": "tool", "content": "r"}]}, "messages[1]"),
    ):
        b = {"model": ALIAS, "messages": [user], "stream": False, "options": {"num_predict": 4}}
        b.update(extra)
        st, h, body = S.request("POST", "/api/chat", b)
        assert st == 400, (st, body, extra)
        err = json.loads(body)["error"]
        assert isinstance(err, str) and word in err, (word, err)
    # a deep parameters schema and a huge one are refused or answered, never a crash
    deep = {"type": "object"}
    for _ in range(300):
        deep = {"type": "object", "properties": {"a": deep}}
    for params in (deep, {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(3000)}}):
        st, h, body = S.request("POST", "/api/chat", {
            "model": ALIAS, "messages": [user], "stream": False, "tool_choice": "required",
            "options": {"num_predict": 4},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}]})
        assert st in (200, 400), (st, body[:200])
    # /api/generate has no tools
    st, h, body = S.request("POST", "/api/generate", {"model": ALIAS, "prompt": "x", "tools": [WEATHER]})
    assert st == 400 and "tools" in json.loads(body)["error"]
    still_serving()


def test_prefix_cache_under_chat():
    system = {"role": "system", "content": "You are a careful assistant for a house. " * 12}
    o = {"temperature": 0, "num_predict": 2}
    client().chat(model=ALIAS, messages=[system, {"role": "user", "content": "first"}], options=o)
    st, data = S.post("/api/chat", {"model": ALIAS, "stream": False, "options": o,
                                    "messages": [system, {"role": "user", "content": "second"}]})
    assert st == 200 and data["prompt_cache_count"] >= 64, data
    assert data["prompt_eval_count"] > data["prompt_cache_count"]


# ---------------------------------------------------------------- models

def test_tags_show_ps():
    tags = client().list()
    names = [m.model for m in tags.models]
    assert names[0] == ALIAS + ":latest" and len(names) == (2 if HAVE_EMBEDDER else 1), names
    m = tags.models[0]
    assert m.size == os.path.getsize(MODEL) and len(m.digest) == 64, m
    assert m.details.format == "gguf" and m.details.family == "gemma3", m.details
    assert m.details.parameter_size and m.details.quantization_level, m.details
    assert m.modified_at.year >= 2020
    with open(MODEL, "rb") as f:
        import hashlib
        assert m.digest == hashlib.sha256(f.read()).hexdigest()
    s = client().show(ALIAS)
    assert s.details.family == "gemma3" and "completion" in s.capabilities, s
    assert s.modelinfo["general.architecture"] == "gemma3", s.modelinfo
    assert s.modelinfo["general.parameter_count"] > 0
    client().generate(model=ALIAS, prompt="x", options={"num_predict": 1})
    ps = client().ps()
    running = {p.model: p for p in ps.models}
    assert ALIAS + ":latest" in running, ps
    p = running[ALIAS + ":latest"]
    assert p.size == m.size and p.digest == m.digest and p.context_length == 512, p
    assert p.expires_at.year > 2100, p.expires_at  # the server's --keep-alive default: forever


def test_keep_alive_unload_and_load():
    r = client().generate(model=ALIAS, prompt="", keep_alive=0)
    assert r.done and r.done_reason == "unload", r
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(p.model.startswith(ALIAS) for p in client().ps().models):
        time.sleep(0.1)
    assert not any(p.model.startswith(ALIAS) for p in client().ps().models)
    r = client().chat(model=ALIAS, messages=[], keep_alive="30s")
    assert r.done and r.done_reason == "load" and r.load_duration > 0, r
    p = [p for p in client().ps().models if p.model.startswith(ALIAS)][0]
    left = (p.expires_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    assert 0 < left <= 31, left
    # a generation with keep_alive 1s: unloaded after it, without another request
    client().generate(model=ALIAS, prompt="x", keep_alive="1s", options={"num_predict": 1})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(p.model.startswith(ALIAS) for p in client().ps().models):
        time.sleep(0.2)
    assert not any(p.model.startswith(ALIAS) for p in client().ps().models)
    r = client().generate(model=ALIAS, prompt="x", keep_alive=-1, options={"num_predict": 1})  # loads again
    assert r.load_duration > 0, r
    assert client().ps().models[0].expires_at.year > 2100


def test_model_management_refused():
    for fn, args in ((client().pull, ("llama3.2",)), (client().delete, (ALIAS,)), (client().copy, (ALIAS, "b")),
                     (client().push, (ALIAS,)), (client().create, ("x",))):
        err = expect_error(501, fn, *args)
        assert "not supported" in err, err


def test_embed():
    if not HAVE_EMBEDDER:
        raise harness.Skip(f"{EMBEDDER} not fetched (models/fetch-embedder)")
    texts = ["will it rain tomorrow?", "turn on the kitchen light"]
    r = client().embed(model=EMBED, input=texts)
    assert len(r.embeddings) == 2 and len(r.embeddings[0]) == 384, r
    assert r.prompt_eval_count > 0 and r.total_duration > 0
    one = client().embed(model=EMBED + ":latest", input=texts[1])
    assert one.embeddings[0] == r.embeddings[1]  # batched == alone
    legacy = client().embeddings(model=EMBED, prompt=texts[0])
    assert list(legacy.embedding) == r.embeddings[0]
    st, v1 = S.post("/v1/embeddings", {"model": EMBED, "input": texts, "encoding_format": "float"})
    assert st == 200 and [d["embedding"] for d in v1["data"]] == r.embeddings
    err = expect_error(400, client().embed, model=EMBED, input="word " * 400, truncate=False)
    assert "context" in err, err
    assert len(client().embed(model=EMBED, input="word " * 400).embeddings[0]) == 384  # truncated
    expect_error(400, client().embed, model=EMBED, input=texts, dimensions=3)
    expect_error(400, client().embed, model=ALIAS, input="x")  # the chat model does not embed
    expect_error(400, client().chat, model=EMBED, messages=HELLO)  # nor does the embedder chat
    expect_error(404, client().embed, model="nomic-embed-text", input="x")


# ---------------------------------------------------------------- errors and hostile input

def ollama_error(st, h, body, what):
    assert 400 <= st < 500, (what, st, body[:200])
    assert h.get("content-type") == "application/json", (what, h)
    data = json.loads(body)
    assert isinstance(data, dict) and isinstance(data.get("error"), str) and data["error"], (what, body[:200])


def still_serving():
    st, data = S.post("/api/generate", {"model": ALIAS, "prompt": "x", "stream": False, "options": {"num_predict": 1}})
    assert st == 200 and data["done"] is True, (st, data)


def test_malformed_bodies():
    good = json.dumps({"model": ALIAS, "messages": HELLO, "stream": False}).encode()
    cases = [b"", b"{", b"null", b"[]", b'"x"', b"{}", b"{,}", good[:-1], good[: len(good) // 2],
             good + b"\n" + good,  # NDJSON is not a request body
             b'{"model": "tiny"}\n{"model": "tiny"}\n', b"\xef\xbb\xbf" + good, b'{"a": NaN}',
             b"[" * 100000, b'{"a":' * 50000 + b"1" + b"}" * 50000, b'{"model": "\xff\xfe"}']
    rnd = random.Random(17)
    for _ in range(30):
        b = bytearray(good)
        for _ in range(rnd.randint(1, 3)):
            b[rnd.randrange(len(b))] = rnd.choice(b'{}[]",:\\\x00\xff 0a')
        cases.append(bytes(b))
    for path in ("/api/chat", "/api/generate", "/api/show", "/api/embed", "/api/embeddings"):
        for body in cases:
            st, h, resp = S.request("POST", path, body)
            if st == 200:  # a mutation that is still a valid request (/api/show needs only "model")
                assert path in ("/api/chat", "/api/generate", "/api/show") or HAVE_EMBEDDER, (path, body)
                continue
            if st == 501 and not HAVE_EMBEDDER and path in ("/api/embed", "/api/embeddings"):
                continue  # a valid embed request to a server without an embedding model
            if st == 404 and b'not found' in resp:  # a mutation of the model name
                continue
            ollama_error(st, h, resp, (path, body[:80]))
        still_serving()
    # a malformed body through the client's own transport: ResponseError with 400
    st, h, body = S.request("POST", "/api/chat", b'{"model": "tiny", "messages": [}')
    assert st == 400 and "not valid JSON" in json.loads(body)["error"]


def test_wrong_types():
    bodies = []
    for field, values in {
        # (a message without content is an empty one, as Ollama takes it: its clients leave "" out)
        "model": [None, 1, [], {}, ""], "messages": [1, "hi", {}, [1], [None], [{}], [{"role": 1}],
                                                    [{"role": "user", "content": 1}],
                                                    [{"role": "wizard", "content": "x"}],
                                                    [{"role": "user", "content": "x", "images": ["aGk="]}]],
        "stream": ["yes", 1, []], "keep_alive": ["soon", [], {}, "5 minutes", True], "options": [1, "x", []],
        "think": ["maybe", 1, []], "format": ["yaml", 1, [], {"type": "object", "pattern": "x"}], "tools": [{}, [{}]],
        "prompt": [1, [], {}], "system": [1], "raw": ["yes"], "template": ["{{ .Prompt }}"], "suffix": ["end"],
        "context": [[1, 2, 3]], "logprobs": [True],
    }.items():
        for v in values:
            for path in ("/api/chat", "/api/generate"):
                b = {"model": ALIAS, "stream": False, "options": {"num_predict": 1}}
                if path == "/api/chat":
                    b["messages"] = HELLO
                else:
                    b["prompt"] = "hi"
                b[field] = v
                bodies.append((path, b))
    for path, b in bodies:
        st, h, resp = S.request("POST", path, b)
        if st == 200:  # fields one of the endpoints does not read (prompt/system/raw in chat, messages in generate)
            assert (path == "/api/chat" and list(b)[-1] in ("prompt", "system", "raw", "template", "suffix", "context")) \
                or (path == "/api/generate" and list(b)[-1] == "messages"), (path, b)
            continue
        ollama_error(st, h, resp, (path, b))
    for path in ("/api/show", "/api/embed", "/api/embeddings"):
        for b in ({"model": 1}, {"name": []}, {}, {"model": ALIAS, "input": 1}, {"model": EMBED, "input": [1]},
                  {"model": EMBED, "truncate": "no", "input": "x"}, {"model": EMBED, "prompt": 1},
                  {"model": EMBED, "input": "x", "keep_alive": "later"}, {"model": EMBED, "options": 1, "input": "x"}):
            st, h, resp = S.request("POST", path, b)
            if st == 200 or (st == 404 and path == "/api/show") or (st == 501 and not HAVE_EMBEDDER):
                continue
            ollama_error(st, h, resp, (path, b))
    still_serving()


def test_methods_and_paths():
    for method, path, status in (("GET", "/api/chat", 405), ("POST", "/api/tags", 405), ("GET", "/api/nothing", 404),
                                 ("PUT", "/api/generate", 405), ("POST", "/api/blobs/sha256:00", 501),
                                 ("HEAD", "/api/blobs/sha256:00", 501)):
        st, h, body = S.request(method, path, b"{}" if method in ("POST", "PUT") else None)
        assert st == status, (method, path, st, body)
        if method != "HEAD":
            assert "error" in json.loads(body), body
    # an OpenAI path keeps OpenAI's error shape
    st, h, body = S.request("GET", "/v1/nothing")
    assert st == 404 and isinstance(json.loads(body)["error"], dict)


def test_disconnect_mid_stream():
    """A client that leaves a stream frees its sequence; the server keeps serving."""
    import socket
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
        body = json.dumps({"model": ALIAS, "prompt": "Once upon a time", "options": {"num_predict": 200}}).encode()
        s.sendall(b"POST /api/generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        s.recv(200)
        s.close()
    still_serving()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if S.metrics().get("infer_requests_running", 0) == 0:
            break
        time.sleep(0.1)
    assert S.metrics().get("infer_requests_running", 0) == 0


def test_broken_model_still_answers():
    """A model file that does not load: the server still starts, lists it, and answers chat with a
    503 in Ollama's shape (as /v1 answers it in OpenAI's)."""
    import tempfile
    tmp = tempfile.mkdtemp(prefix="infer-ollama-bad-")
    bad = os.path.join(tmp, "broken.gguf")
    with open(MODEL, "rb") as f, open(bad, "wb") as g:
        g.write(f.read(4096))
    srv = Server(bad, ["-c", "256"], name="ollama-bad", wait_ready=False)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and srv.get_json("/health")[1]["model_state"] != "failed":
            time.sleep(0.05)
        st, tags = srv.get_json("/api/tags")
        assert st == 200 and tags["models"][0]["name"] == "broken:latest", tags
        assert tags["models"][0]["size"] == 4096
        st, data = srv.post("/api/chat", {"model": "broken", "messages": HELLO, "stream": False})
        assert st == 503 and "broken.gguf" in data["error"], (st, data)
    finally:
        assert srv.stop() == 0, srv.log()
        os.unlink(bad)
        os.rmdir(tmp)


def main():
    global S
    if ollama is None:
        print("SKIP: the ollama Python client is not installed (contrib/quickstart.sh installs it in .venv)")
        return 77
    if not MODEL:
        print("SKIP: no model")
        return 77
    args = ["-c", "512", "-np", "2", "--alias", ALIAS, "--max-tokens", "256"]
    if HAVE_EMBEDDER:
        args += ["--embedding-model", EMBEDDER]
    import importlib.metadata
    print(f"test_ollama: ollama {importlib.metadata.version('ollama')}, model {MODEL}, "
          f"embedder {EMBEDDER if HAVE_EMBEDDER else 'none'}", flush=True)
    S = Server(MODEL, args, name="ollama")
    tests = [test_probe_and_version, test_chat, test_streaming_chat_equals_whole, test_generate, test_names,
             test_num_predict_limits_eval_count, test_seed_repeats_sampled_answer, test_stop_cuts,
             test_num_ctx_bounds_the_context, test_options_refused, test_format, test_tools_auto,
             test_tools_required_round_trip, test_tools_hostile, test_prefix_cache_under_chat, test_tags_show_ps,
             test_model_management_refused, test_embed, test_malformed_bodies, test_wrong_types,
             test_methods_and_paths, test_disconnect_mid_stream, test_broken_model_still_answers,
             test_keep_alive_unload_and_load]
    if len(sys.argv) > 1:
        tests = [t for t in tests if t.__name__ in sys.argv[1:]]
    try:
        rc = harness.run_tests(tests, "test_ollama")
    finally:
        code = S.stop()
        if code != 0:
            print(f"FAIL test_ollama: the server exited with {code}")
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
