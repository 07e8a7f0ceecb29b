#!/usr/bin/env python3
"""test_structured.py - structured outputs and tool calls through the official openai SDK.

Runs the real `infer serve` on the default model (Gemma 3 270M, a base model that has never
seen a schema or a tool): every answer constrained by response_format must parse and validate
with jsonschema, at temperature 0 and 1, also when max_tokens cuts it (finish_reason
"length"); a schema keyword the compiler lacks is a 400 naming it; a required tool call
produces a call whose arguments validate against the tool's parameters, streamed or not; the
round trip (call -> tool result -> answer) works; a second request with the same tools
reuses the cached prefix.  Run by tests/server/run.sh; skipped (77) without the default
model or python's jsonschema.
"""
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from harness import Server  # noqa: E402

try:
    import jsonschema
    import openai
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

# the default model; INFER_SERVE_TEST_MODEL (the ASan run's small synthetic model) overrides:
# every check holds for any model, since the grammar, not the model, makes the output valid
MODEL = os.environ.get("INFER_SERVE_TEST_MODEL") or harness.default_model()
S = None

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 24},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string"},
        "tags": {"type": "array", "items": {"enum": ["friend", "work", "family"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
SCHEMAS = {
    "person": PERSON,
    "list": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 2, "maxItems": 4,
             "$defs": {"item": {"type": "object", "properties": {"title": {"type": "string", "maxLength": 30},
                                                                  "done": {"type": "boolean"}},
                                "required": ["title", "done"]}}},
    "choice": {"type": "object", "properties": {
        "answer": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "unit": {"type": ["string", "null"], "maxLength": 8},
        "lang": {"const": "fr"},
        "word": {"type": "string", "minLength": 3, "maxLength": 6}},
        "required": ["answer", "unit", "lang", "word"]},
}


def client():
    return openai.OpenAI(base_url=S.base_url, api_key="none", max_retries=0, timeout=300)


def model_id():
    return client().models.list().data[0].id


def ask(prompt, schema, **kw):
    kw.setdefault("max_tokens", 120)
    kw.setdefault("temperature", 0)
    rf = {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}
    return client().chat.completions.create(model=model_id(), messages=[{"role": "user", "content": prompt}],
                                            response_format=rf, **kw)


def check_valid(text, schema):
    value = json.loads(text)
    jsonschema.validate(value, schema)
    return value


# ----------------------------------------------------------- structured outputs

def test_schemas_validate_greedy_and_sampled():
    prompts = {"person": "Describe a person as JSON.", "list": "My todo list, as JSON:",
               "choice": "Answer in French: how far is the moon?"}
    for name, schema in SCHEMAS.items():
        for temp, seed in ((0, None), (1.0, 7), (1.0, 11)):
            r = ask(prompts[name], schema, temperature=temp, seed=seed)
            c = r.choices[0]
            assert c.finish_reason in ("stop", "length"), (name, c.finish_reason)
            check_valid(c.message.content, schema)


def test_json_object():
    for temp in (0, 1.0):
        r = client().chat.completions.create(model=model_id(), temperature=temp, seed=3, max_tokens=60,
                                             messages=[{"role": "user", "content": "A JSON object about cats:"}],
                                             response_format={"type": "json_object"})
        assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_cut_by_max_tokens_still_valid():
    for mt in (1, 3, 7):
        r = ask("Describe a person as JSON.", SCHEMAS["list"], max_tokens=mt)
        c = r.choices[0]
        assert c.finish_reason == "length", c.finish_reason
        assert r.usage.completion_tokens <= mt
        check_valid(c.message.content, SCHEMAS["list"])


def test_streamed_is_valid():
    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}
    stream = client().chat.completions.create(model=model_id(), temperature=0, max_tokens=80, stream=True,
                                              messages=[{"role": "user", "content": "A person:"}],
                                              response_format=rf)
    text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    check_valid(text, PERSON)


def test_unsupported_keyword_is_400():
    for schema, word in (({"type": "string", "pattern": "^a+$"}, "pattern"),
                         ({"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}},
                          "uniqueItems"),
                         ({"$ref": "#"}, "cycle")):
        try:
            ask("x", schema, max_tokens=4)
        except openai.BadRequestError as e:
            assert word in str(e), str(e)
        else:
            raise AssertionError(f"{schema} was accepted")
    status, body = S.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                   "response_format": {"type": "xml"}})
    assert status == 400, body


# ------------------------------------------------------------------ tool calls

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}}
LIGHT = {"type": "function", "function": {
    "name": "set_light", "description": "Turn a light on or off",
    "parameters": {"type": "object", "properties": {
        "room": {"type": "string", "maxLength": 30}, "on": {"type": "boolean"}}, "required": ["room", "on"]}}}
TOOLS = [WEATHER, LIGHT]
SYSTEM = "You are the assistant of a smart home. Use the tools when they help."


def tool_request(user, **kw):
    kw.setdefault("max_tokens", 80)
    kw.setdefault("temperature", 0)
    msgs = kw.pop("messages", None) or [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    return client().chat.completions.create(model=model_id(), messages=msgs, tools=kw.pop("tools", TOOLS), **kw)


def check_call(call):
    spec = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    assert call.type == "function" and call.id.startswith("call_"), call
    assert call.function.name in spec, call.function.name
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, spec[call.function.name])
    return args


def test_required_tool_call():
    for temp, seed in ((0, None), (1.0, 5)):
        r = tool_request("What is the weather in Paris?", tool_choice="required", temperature=temp, seed=seed)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls", (c.finish_reason, c.message)
        assert c.message.tool_calls, c.message
        for call in c.message.tool_calls:
            check_call(call)


def test_named_tool_call():
    r = tool_request("Kitchen, please.", tool_choice={"type": "function", "function": {"name": "set_light"}})
    calls = r.choices[0].message.tool_calls
    assert calls and all(c.function.name == "set_light" for c in calls), r.choices[0].message
    for c in calls:
        check_call(c)


def test_streamed_tool_call():
    stream = client().chat.completions.create(
        model=model_id(), temperature=0, max_tokens=80, stream=True, tools=TOOLS, tool_choice="required",
        messages=[{"role": "user", "content": "Turn on the kitchen light"}])
    calls, finish = {}, None
    for ch in stream:
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        for tc in d.tool_calls or []:
            e = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            e["id"] = tc.id or e["id"]
            if tc.function:
                e["name"] += tc.function.name or ""
                e["arguments"] += tc.function.arguments or ""
        finish = ch.choices[0].finish_reason or finish
    assert finish == "tool_calls" and calls, (finish, calls)
    spec = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for e in calls.values():
        jsonschema.validate(json.loads(e["arguments"]), spec[e["name"]])


def test_streamed_text_with_tools_streams():
    """Chat pages (Open WebUI) offer tools with every message: an answer that is text, not a
    call, must still stream as it is generated, not arrive whole at the end."""
    kw = dict(tool_choice="auto", max_tokens=40, seed=3)
    whole = tool_request("Write a short poem about the sea.", **kw).choices[0]
    assert whole.message.tool_calls is None and whole.message.content, whole.message
    assert whole.message.content.lstrip()[:1] not in "{[<", f"the model answered with a call: {whole.message}"
    stream = tool_request("Write a short poem about the sea.", stream=True, **kw)
    parts, finish, calls = [], None, []
    for ch in stream:
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        if d.content:
            parts.append(d.content)
        calls += d.tool_calls or []
        finish = ch.choices[0].finish_reason or finish
    assert not calls and finish in ("stop", "length"), (calls, finish)
    assert "".join(parts) == whole.message.content, (parts, whole.message.content)
    # streamed: many deltas (one per token or so), not one chunk at the end
    assert len(parts) >= min(5, len(whole.message.content.split())), parts


def test_round_trip_and_cached_catalogue():
    first = tool_request("What is the weather in Oslo?", tool_choice="required")
    call = first.choices[0].message.tool_calls[0]
    check_call(call)
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is the weather in Oslo?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": call.id, "type": "function",
                             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": "{\"temperature\": 3, \"sky\": \"snow\"}"}]
    second = tool_request(None, messages=msgs, tool_choice="none", max_tokens=24)
    c = second.choices[0]
    assert c.message.tool_calls is None and isinstance(c.message.content, str), c.message
    assert c.finish_reason in ("stop", "length")
    # the system turn and the catalogue were computed by the first request
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert cached > 0, second.usage
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    # and a third request with the same catalogue, another question
    third = tool_request("Is it raining in Rome?", tool_choice="auto", max_tokens=8)
    assert third.usage.prompt_tokens_details.cached_tokens > 0, third.usage


def test_bad_tools_are_400():
    for tools, choice in (([{"type": "function", "function": {"name": "bad name!"}}], None),
                          (TOOLS, {"type": "function", "function": {"name": "nope"}}),
                          (TOOLS, "sometimes"),
                          ([{"type": "function", "function": {"name": "f", "parameters": {
                              "type": "object", "properties": {"x": {"type": "string", "pattern": "a"}}}}}],
                           "required")):
        body = {"messages": [{"role": "user", "content": "x"}], "tools": tools, "max_tokens": 4}
        if choice is not None:
            body["tool_choice"] = choice
        status, out = S.post("/v1/chat/completions", body)
        assert status == 400, (tools, choice, out)


def test_serve_tool_choice_required():
    srv = Server(MODEL, ["--tool-choice", "required", "-np", "1"], name="serve-tools")
    try:
        status, out = srv.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "turn on the kitchen light"}], "tools": TOOLS,
            "max_tokens": 60, "temperature": 0})
        assert status == 200, out
        m = out["choices"][0]["message"]
        assert out["choices"][0]["finish_reason"] == "tool_calls" and m["tool_calls"], out
        spec = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
        for tc in m["tool_calls"]:
            jsonschema.validate(json.loads(tc["function"]["arguments"]), spec[tc["function"]["name"]])
    finally:
        srv.stop()


def main():
    global S
    if not MODEL:
        print("SKIP: no default model (models/fetch-default)")
        return 77
    S = Server(MODEL, ["-np", "2", "-c", "2048"], name="serve-structured")
    try:
        return harness.run_tests([v for k, v in globals().items() if k.startswith("test_") and callable(v)],
                                 "structured")
    finally:
        S.stop()


if __name__ == "__main__":
    sys.exit(main())
