#!/usr/bin/env python3
"""test_think.py - a thinking model through `infer serve`, end to end.

The model is qwen3think-f32 (contrib/mkmodel.py --think-script, built by `make check`): after any
chat prompt its greedy output is "<think>\\nSome reasoning.\\n</think>\\n\\nThe answer." and
<|im_end|>, the same in llama.cpp (tests/golden/qwen3think-f32.txt).  Checks, as llama.cpp's
server and Ollama return a reasoning model's output:
  - /v1/chat/completions: message.reasoning_content is the reasoning, message.content the answer;
    streamed, the deltas' reasoning_content and content add up to the same, and the stream ends
    with a finish chunk and [DONE] (several requests: chunking depends on timing);
  - an assistant turn sent back whole (reasoning included) is rendered as its answer alone (the
    model notices <think> in its context and would then skip its opening marker);
  - with tools offered (the text is held to the end, as it could be a call): the same split,
    whole and streamed, OpenAI and Ollama;
  - /v1/completions (raw): the text verbatim, markers included;
  - a template whose generation prompt opens the reasoning (--chat-template, Qwen3-Thinking-2507's
    shape): the prompt ends with "<think>\n", the output (no opening marker) is still split;
  - Ollama /api/chat: message.thinking and message.content, streamed and not; /api/generate:
    thinking and response; /api/show names the capability;
  - asked not to think (Ollama's "think": false, chat_template_kwargs.enable_thinking false,
    `serve --reasoning-budget 0`): the prompt ends with the template's no-thinking text, as
    llama.cpp renders it ('<think>\n\n</think>\n\n' of Qwen3's switch; '<think>\n</think>'
    after a template that opens the reasoning itself), so the model answers at once.
Skipped (77) when the model was not built.  Run by tests/server/run.sh.
"""
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from harness import Server  # noqa: E402

MODEL = os.path.join(harness.builddir(), "models", "gen", "qwen3think-f32.gguf")
NAME = "qwen3think-f32"
REASONING, ANSWER = "Some reasoning.", "The answer."
RAW = "<think>\nSome reasoning.\n</think>\n\nThe answer."
S = None


def chat(messages, **kw):
    st, o = S.post("/v1/chat/completions", {"messages": messages, "temperature": 0, **kw})
    assert st == 200, (st, o)
    return o


def user(text):
    return [{"role": "user", "content": text}]


def test_chat_split():
    o = chat(user("Hello"))
    m = o["choices"][0]["message"]
    assert m["content"] == ANSWER, m
    assert m["reasoning_content"] == REASONING, m
    assert o["choices"][0]["finish_reason"] == "stop", o
    assert o["usage"]["completion_tokens"] == 10, o["usage"]


def test_chat_stream_split():
    for i in range(8):
        st, h, body = S.request("POST", "/v1/chat/completions",
                                {"messages": user(f"Question {i}"), "temperature": 0, "stream": True})
        assert st == 200, (st, body)
        events = harness.sse_events(body)
        assert events and events[-1] == "[DONE]", body
        chunks = [json.loads(e) for e in events[:-1]]
        deltas = [c["choices"][0]["delta"] for c in chunks]
        reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
        content = "".join(d.get("content", "") for d in deltas)
        assert reasoning == REASONING and content == ANSWER, (i, reasoning, content, body)
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop", body
        # no marker in any delta (one delta may carry both sides, as llama.cpp's diffs do)
        for d in deltas:
            assert "think>" not in d.get("content", "") + d.get("reasoning_content", ""), d


def test_history_drops_reasoning():
    # the second turn with the first answer sent back alone, then whole: the same split, the same
    # prompt (a <think> left in the context makes this model skip its opening marker, and its
    # reasoning would come back as content)
    n_prompt = set()
    for first in (ANSWER, RAW, "<think>\nOther.\n</think>\n" + ANSWER):
        msgs = user("Hi") + [{"role": "assistant", "content": first}] + user("And?")
        o = chat(msgs)
        m = o["choices"][0]["message"]
        assert m["content"] == ANSWER and m.get("reasoning_content") == REASONING, (first, m)
        n_prompt.add(o["usage"]["prompt_tokens"])
    assert len(n_prompt) == 1, n_prompt


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}}}}}]


def test_tools_offered():
    # tools offered, a text answer: the text is held to the end (it could be a call), then split
    o = chat(user("Hello"), tools=TOOLS)
    m = o["choices"][0]["message"]
    assert m["content"] == ANSWER and m.get("reasoning_content") == REASONING, m
    st, h, body = S.request("POST", "/v1/chat/completions",
                            {"messages": user("Hello"), "temperature": 0, "stream": True, "tools": TOOLS})
    assert st == 200, (st, body)
    deltas = [json.loads(e)["choices"][0]["delta"] for e in harness.sse_events(body)[:-1]]
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    content = "".join(d.get("content", "") for d in deltas)
    assert reasoning == REASONING and content == ANSWER, (reasoning, content, body)
    st, h, body = S.request("POST", "/api/chat", {"model": NAME, "messages": user("Hello"), "tools": TOOLS,
                                                  "options": {"temperature": 0}})
    lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
    thinking = "".join(x["message"].get("thinking", "") for x in lines)
    content = "".join(x["message"]["content"] for x in lines)
    assert thinking == REASONING and content == ANSWER, (thinking, content, body)


def test_completion_raw():
    st, o = S.post("/v1/completions", {"prompt": "Once upon a time", "temperature": 0})
    assert st == 200, (st, o)
    assert o["choices"][0]["text"] == RAW, o


def ollama(path, body):
    st, o = S.post(path, {"model": NAME, "options": {"temperature": 0}, **body})
    assert st == 200, (st, o)
    return o


def test_ollama_chat():
    for think in (None, True):
        body = {"messages": user("Hello"), "stream": False}
        if think is not None:
            body["think"] = think
        m = ollama("/api/chat", body)["message"]
        assert m["content"] == ANSWER and m["thinking"] == REASONING, (think, m)
    o = ollama("/api/chat", {"messages": user("Hello"), "stream": False, "think": True})
    n_think = o["prompt_eval_count"]
    o = ollama("/api/chat", {"messages": user("Hello"), "stream": False, "think": False})
    m = o["message"]
    assert m["content"] == ANSWER and "thinking" not in m, m
    # the empty reasoning block (4 tokens) is in the prompt, the answer comes at once: "The",
    # " answer", "." (and <|im_end|>, not counted)
    assert o["prompt_eval_count"] == n_think + 4 and o["eval_count"] == 3, o
    o = ollama("/api/generate", {"prompt": "Hello", "stream": False, "think": True})
    assert o["response"] == ANSWER and o["thinking"] == REASONING, o


def test_no_think_openai():
    on = chat(user("Hello"), chat_template_kwargs={"enable_thinking": True})
    assert on["choices"][0]["message"]["reasoning_content"] == REASONING, on
    o = chat(user("Hello"), chat_template_kwargs={"enable_thinking": False})
    m = o["choices"][0]["message"]
    assert m["content"] == ANSWER and not m.get("reasoning_content"), m
    assert o["usage"]["completion_tokens"] == 3, o["usage"]
    assert o["usage"]["prompt_tokens"] == on["usage"]["prompt_tokens"] + 4, (o["usage"], on["usage"])
    st, h, body = S.request("POST", "/v1/chat/completions",
                            {"messages": user("Hello"), "temperature": 0, "stream": True,
                             "chat_template_kwargs": {"enable_thinking": False}})
    deltas = [json.loads(e)["choices"][0]["delta"] for e in harness.sse_events(body)[:-1]]
    content = "".join(d.get("content", "") for d in deltas)
    assert content == ANSWER and not any(d.get("reasoning_content") for d in deltas), body
    for bad in ({"chat_template_kwargs": []}, {"chat_template_kwargs": {"enable_thinking": "no"}}):
        st, e = S.post("/v1/chat/completions", {"messages": user("Hello"), **bad})
        assert st == 400 and "chat_template_kwargs" in e["error"]["message"], (bad, st, e)


def test_ollama_chat_stream():
    for i in range(4):
        st, h, body = S.request("POST", "/api/chat", {"model": NAME, "messages": user(f"Question {i}"),
                                                      "options": {"temperature": 0}, "think": True})
        assert st == 200, (st, body)
        lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
        assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop", body
        thinking = "".join(x["message"].get("thinking", "") for x in lines)
        content = "".join(x["message"]["content"] for x in lines)
        assert thinking == REASONING and content == ANSWER, (i, thinking, content, body)


def test_ollama_show():
    o = ollama("/api/show", {})
    assert "thinking" in o["capabilities"], o["capabilities"]


FORCED = ("{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
          "'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
          "{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}")


def test_forced_open():
    # a template whose generation prompt opens the reasoning (Qwen3-*-Thinking-2507): the prompt
    # ends with "<think>\n" and the output, which has no opening marker, starts as reasoning
    srv = Server(MODEL, ["-c", "256", "--max-tokens", "32", "--chat-template", FORCED], name="think-forced")
    try:
        st, o = srv.post("/v1/chat/completions", {"messages": user("Hello"), "temperature": 0})
        assert st == 200, (st, o)
        m = o["choices"][0]["message"]
        assert m["content"] == ANSWER and m.get("reasoning_content") == REASONING, m
        assert o["usage"]["completion_tokens"] == 8, o["usage"]  # no <think> nor its "\n" generated
        st, h, body = srv.request("POST", "/v1/chat/completions",
                                  {"messages": user("Hello"), "temperature": 0, "stream": True})
        deltas = [json.loads(e)["choices"][0]["delta"] for e in harness.sse_events(body)[:-1]]
        reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
        content = "".join(d.get("content", "") for d in deltas)
        assert reasoning == REASONING and content == ANSWER, (reasoning, content, body)
        st, o = srv.post("/api/chat", {"model": NAME, "messages": user("Hello"), "stream": False,
                                       "options": {"temperature": 0}})
        assert o["message"]["content"] == ANSWER and o["message"]["thinking"] == REASONING, o
        n_think = o["prompt_eval_count"]
        # think false: the prompt ends "<think>\n</think>" (llama.cpp appends the closing marker),
        # the model goes on with "\n\n" and the answer, all of it content
        st, o = srv.post("/api/chat", {"model": NAME, "messages": user("Hello"), "stream": False,
                                       "options": {"temperature": 0}, "think": False})
        assert o["message"]["content"] == ANSWER and "thinking" not in o["message"], o
        assert o["prompt_eval_count"] == n_think + 1 and o["eval_count"] == 4, o
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]


def test_reasoning_budget():
    # serve --reasoning-budget 0: no thinking unless a request asks for it
    srv = Server(MODEL, ["-c", "256", "--max-tokens", "32", "--reasoning-budget", "0"], name="think-budget")
    try:
        st, o = srv.post("/v1/chat/completions", {"messages": user("Hello"), "temperature": 0})
        m = o["choices"][0]["message"]
        assert st == 200 and m["content"] == ANSWER and not m.get("reasoning_content"), (st, o)
        assert o["usage"]["completion_tokens"] == 3, o["usage"]
        st, o = srv.post("/v1/chat/completions", {"messages": user("Hello"), "temperature": 0,
                                                  "chat_template_kwargs": {"enable_thinking": True}})
        assert st == 200 and o["choices"][0]["message"]["reasoning_content"] == REASONING, (st, o)
        st, o = srv.post("/api/chat", {"model": NAME, "messages": user("Hello"), "stream": False,
                                       "options": {"temperature": 0}, "think": True})
        assert st == 200 and o["message"]["thinking"] == REASONING, (st, o)
    finally:
        assert srv.stop() == 0, srv.log()[-3000:]


def main():
    global S
    if not os.path.exists(MODEL):
        print(f"SKIP: {MODEL} not built (make check builds it)")
        return 77
    S = Server(MODEL, ["-c", "256", "--max-tokens", "32"], name="think")
    tests = [test_chat_split, test_chat_stream_split, test_history_drops_reasoning, test_tools_offered,
             test_completion_raw, test_forced_open, test_no_think_openai, test_reasoning_budget,
             test_ollama_chat, test_ollama_chat_stream, test_ollama_show]
    return harness.run_with_server(S, tests, "test_think")


if __name__ == "__main__":
    sys.exit(main())
