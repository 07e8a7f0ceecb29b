#!/usr/bin/env python3
"""test_hostile.py - a generated corpus of malformed and hostile requests against `infer serve`.

Every request must get a 4xx (or, for bytes that are not HTTP at all, a closed connection),
never a 5xx, a hang or a crash, and the server must keep serving: a normal request is made
after every group, and slow or truncated bodies are sent while other requests go through.
Run by tests/server/run.sh, also under an --enable-asan build (the server exits non-zero on
an ASan or UBSan report, which fails the suite).
"""
import json
import os
import random
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from harness import Server  # noqa: E402

S = None
MAX_BODY = 64 * 1024
CHAT = "/v1/chat/completions"
COMPL = "/v1/completions"
GOOD = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0}


def http_request(method, path, body=b"", headers=None, content_length=None):
    h = {"Host": "127.0.0.1", "Content-Type": "application/json"}
    h.update(headers or {})
    if content_length is None:
        content_length = len(body)
    if content_length is not False:
        h["Content-Length"] = str(content_length)
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode() + body


def still_serving():
    st, data = S.post(CHAT, GOOD, timeout=60)
    assert st == 200 and data["usage"]["completion_tokens"] >= 0, (st, data)


def expect_4xx(raw, what, allow_close=False):
    resp = S.raw(raw, timeout=15)
    st = harness.status_of(resp)
    if st is None and allow_close:
        return None
    assert st is not None and 400 <= st < 500, f"{what}: got {resp[:200]!r}"
    return st


# ---------------------------------------------------------------- corpus

def broken_json():
    good = json.dumps(GOOD)
    cases = [b"", b"{", b"}", b"[", b"null", b"true", b"0", b'"str"', b"[]", b"{}", b"{,}", b'{"messages"}',
             b"{'messages': []}", b'{"messages": [}', b'{"messages": []} trailing', b"NaN", b'{"a": NaN}',
             b'{"a": Infinity}', b'{"a": -}', b'{"a": 01}', b'{"a": .5}', b'{"a": "\\x41"}', b'{"a": "\\u12"}',
             b"\xef\xbb\xbf" + good.encode(), good[:-1].encode(), good.encode()[: len(good) // 2]]
    rnd = random.Random(7)
    base = good.encode()
    for _ in range(40):  # random byte mutations of a good request
        b = bytearray(base)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            b[i] = rnd.choice(b'{}[]",:\\\x00\xff 0a')
        cases.append(bytes(b))
    return cases


def deep_nesting():
    return [b"[" * 100000, b'{"a":' * 50000 + b"1" + b"}" * 50000, b"[" * 3000 + b"]" * 3000,
            json.dumps({"messages": [{"role": "user", "content": "x"}], "extra": [[[[[[[[[[[]]]]]]]]]]]}).encode()
            .replace(b"[[[[[[[[[[[]]]]]]]]]]]", b"[" * 2500 + b"]" * 2500)]


HUGE_VALUES = ("1e400", "-1e400", "99999999999999999999999999", "-99999999999999999999999", "1e-400",
               "18446744073709551616", "-1", "1.5", "0.0000001", "123456789012")
# (field, value) pairs that are in range (everything else is a 400)
HUGE_OK = {("temperature", "1e-400"), ("top_p", "1e-400"), ("min_p", "1e-400"), ("seed", "-1"),
           ("temperature", "1.5"), ("temperature", "0.0000001"), ("top_p", "0.0000001"), ("min_p", "0.0000001"),
           ("seed", "123456789012")}


def huge_numbers():
    m = json.dumps([{"role": "user", "content": "hi"}])
    out = []
    for field in ("max_tokens", "temperature", "top_p", "top_k", "min_p", "seed"):
        for v in HUGE_VALUES:
            extra = "" if field == "max_tokens" else ', "max_tokens": 1'
            out.append((field, v, f'{{"messages": {m}, "{field}": {v}{extra}}}'.encode()))
    return out


def wrong_types():
    m = [{"role": "user", "content": "hi"}]
    bodies = []
    for field, values in {
        "messages": [None, 1, "hi", {}, [], [1], [None], [{}], [{"role": 1, "content": "x"}],
                     [{"role": "user"}], [{"role": "user", "content": 1}], [{"role": "user", "content": [1]}],
                     [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}],
                     [{"role": "tool", "content": "x"}], [{"role": "wizard", "content": "x"}],
                     [{"role": "user", "content": {"text": "x"}}]],
        "max_tokens": ["8", True, [], {}, 0, -5],
        "temperature": ["hot", [], {}, True, -0.5, 3],
        "top_p": ["x", -1, 2], "top_k": [1.5, "x", -1], "min_p": [2, "x"], "seed": ["x", 1.5, []],
        "stop": [1, [1], {}, [["a"]], ["x"] * 40, ["y" * 1000]],
        "stream": ["yes", 1, []], "stream_options": ["x", 1, [], {"include_usage": "yes"}],
        "cache_salt": [1, [], "s" * 10000], "model": [1, [], {}], "n": [2, "1", 0],
        "tools": [[{"type": "function"}]], "logprobs": [True], "response_format": [{"type": "xml"}, "json", {"type": "json_schema"},
                            {"type": "json_schema", "json_schema": {"schema": {"pattern": "a"}}}],
        "tool_choice": ["sometimes", {"type": "function", "function": {"name": "nope"}}, "required", 3],
    }.items():
        for v in values:
            b = {"messages": m, field: v}
            bodies.append((CHAT, json.dumps(b).encode()))
    for p in [None, 1, {}, [], [[1, 2]], [-1], [2 ** 40], ["a", "b"], [1.5], [True]]:
        bodies.append((COMPL, json.dumps({"prompt": p}).encode()))
    bodies.append((COMPL, json.dumps({"prompt": [10 ** 9]}).encode()))  # outside the vocabulary
    return bodies


def bad_utf8():
    return [b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}',
            b'{"messages": [{"role": "user", "content": "\xc0\xaf"}]}',            # overlong
            b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}',        # surrogate
            b'{"messages": [{"role": "user", "content": "\xf4\x90\x80\x80"}]}',    # > U+10FFFF
            b'{"messages": [{"role": "user", "content": "\xe2\x82"}]}',            # truncated
            b'{"messages": [{"role": "user", "content": "\\ud800"}]}',             # lone surrogate escape
            b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}',           # NUL
            b'{"prompt": "\x00"}', b'{"pr\xffompt": "x"}']


# ----------------------------------------------------------------- tests

def valid_json(b):
    try:
        json.loads(b)
        return True
    except ValueError:
        return False


def test_broken_json():
    for body in broken_json():
        st, h, resp = S.request("POST", CHAT, body)
        if st == 200 and valid_json(body):
            continue  # a random mutation that left the request valid
        assert 400 <= st < 500, (st, body[:80], resp[:200])
        assert "error" in json.loads(resp)
    still_serving()


def test_deep_nesting():
    for body in deep_nesting():
        st, h, resp = S.request("POST", CHAT, body)
        assert st in (400, 413), (st, resp[:200])
    still_serving()


def test_huge_numbers():
    for field, v, body in huge_numbers():
        st, h, resp = S.request("POST", CHAT, body)
        if (field, v) in HUGE_OK:
            assert st == 200 and "choices" in json.loads(resp), (st, body, resp[:200])
        else:
            assert st == 400 and json.loads(resp)["error"]["type"] == "invalid_request_error", (st, body, resp[:200])
    still_serving()


def test_wrong_types():
    for path, body in wrong_types():
        st, h, resp = S.request("POST", path, body)
        assert 400 <= st < 500, (st, body[:120], resp[:200])
        e = json.loads(resp)["error"]
        assert e["message"] and e["type"], e
    still_serving()


def test_invalid_utf8():
    for body in bad_utf8():
        st, h, resp = S.request("POST", CHAT if b"messages" in body else COMPL, body)
        assert st == 400, (st, body, resp[:200])
    still_serving()


def test_oversized():
    big = b'{"messages": [{"role": "user", "content": "' + b"a" * (MAX_BODY + 10) + b'"}]}'
    assert expect_4xx(http_request("POST", CHAT, big), "body over the limit") == 413
    # chunked, no Content-Length: the limit applies as the body streams in
    chunked = (b"POST " + CHAT.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
               b"".join(b"%x\r\n%s\r\n" % (8192, b"a" * 8192) for _ in range(MAX_BODY // 8192 + 2)) + b"0\r\n\r\n")
    assert expect_4xx(chunked, "chunked body over the limit") == 413
    # absurd Content-Length values
    for cl in ("99999999999999999999999", "-1", "abc", str(MAX_BODY + 1)):
        expect_4xx(http_request("POST", CHAT, b"{}", content_length=cl), f"Content-Length {cl}", allow_close=True)
    # a prompt within the body limit but longer than the context
    st, data = S.post(COMPL, {"prompt": "hello " * 3000, "max_tokens": 1})
    assert st == 400 and data["error"]["code"] == "context_length_exceeded", data
    still_serving()


def test_oversized_headers():
    expect_4xx(http_request("GET", "/health", headers={"X-Big": "a" * 100000}), "one huge header",
               allow_close=True)
    many = {f"X-H{i}": "v" * 50 for i in range(2000)}
    expect_4xx(http_request("GET", "/health", headers=many), "many headers", allow_close=True)
    expect_4xx(http_request("GET", "/" + "a" * 100000), "huge URL", allow_close=True)
    still_serving()


def test_bad_http():
    for raw in [b"GARBAGE\r\n\r\n", b"\x00\x01\x02\x03" * 100, b"GET / HTTP/9.9\r\n\r\n",
                b"GET /health HTTP/1.1\r\n\r\n",  # no Host in HTTP/1.1
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                b"GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
                b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
                b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header Without Colon\r\n\r\n",
                bytes(random.Random(3).randrange(256) for _ in range(4096))]:
        resp = S.raw(raw, timeout=10)
        st = harness.status_of(resp)
        # 505 is libmicrohttpd's (correct) answer to an unknown HTTP version
        assert st is None or 400 <= st < 500 or st == 505 and b"HTTP/9.9" in raw or \
            (st == 200 and b"/health" in raw), (raw[:60], resp[:200])
    still_serving()


def test_truncated_body():
    """Announce 1000 bytes, send 20, hang up: the server drops it and goes on."""
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
        s.sendall(http_request("POST", CHAT, b'{"messages": [{"rol', content_length=1000))
        s.close()
    still_serving()


def test_slow_body_does_not_block_others():
    """A body trickling in (slowloris) is cut off by --timeout; meanwhile requests go through."""
    done = {}

    def slow():
        s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
        body = json.dumps(GOOD).encode()
        try:
            s.sendall(http_request("POST", CHAT, b"", content_length=len(body)))
            t0 = time.monotonic()
            for i in range(len(body)):
                s.sendall(body[i:i + 1])
                time.sleep(0.4)
                if time.monotonic() - t0 > 12:
                    break
            s.settimeout(15)
            done["resp"] = s.recv(4096)
        except OSError as e:
            done["error"] = repr(e)
        finally:
            s.close()

    def stalled():
        s = socket.create_connection(("127.0.0.1", S.port), timeout=30)
        try:
            s.sendall(http_request("POST", CHAT, b"{", content_length=100))
            s.settimeout(20)
            t0 = time.monotonic()
            r = s.recv(4096)  # the server closes it after --timeout idle seconds
            done["stalled"] = (time.monotonic() - t0, r)
        except OSError as e:
            done["stalled"] = (None, repr(e))
        finally:
            s.close()

    threads = [threading.Thread(target=slow), threading.Thread(target=stalled)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    t0 = time.monotonic()
    still_serving()
    assert time.monotonic() - t0 < 10, "a slow client blocked the others"
    for t in threads:
        t.join(40)
    waited, r = done["stalled"]
    assert waited is not None and waited < 15, done["stalled"]
    # the trickling body is cut off (408 after 2 x --timeout) or closed
    resp = done.get("resp", b"")
    st = harness.status_of(resp) if isinstance(resp, bytes) else None
    assert st in (None, 408, 400), resp
    still_serving()


def test_many_connections():
    """More idle connections than --max-connections: extra ones are refused, service resumes."""
    socks = []
    try:
        for _ in range(40):
            try:
                socks.append(socket.create_connection(("127.0.0.1", S.port), timeout=5))
            except OSError:
                break
    finally:
        for s in socks:
            s.close()
    time.sleep(0.5)
    still_serving()


def test_metrics_after_abuse():
    m = S.metrics()
    assert m['infer_requests_total{endpoint="chat",code="400"}'] > 50
    assert not any(k.startswith("infer_requests_total") and 'code="5' in k for k in m), \
        [k for k in m if 'code="5' in k]


def main():
    global S
    model = harness.test_model()
    if not model:
        print("SKIP: no model")
        return 77
    S = Server(model, ["-c", "512", "--max-tokens", "16", "--max-body", str(MAX_BODY), "--timeout", "3",
                       "--max-connections", "32",
                       "-np", "2"], name="hostile")
    tests = [test_broken_json, test_deep_nesting, test_huge_numbers, test_wrong_types, test_invalid_utf8,
             test_oversized, test_oversized_headers, test_bad_http, test_truncated_body,
             test_slow_body_does_not_block_others, test_many_connections, test_metrics_after_abuse]
    if len(sys.argv) > 1:
        tests = [t for t in tests if t.__name__ in sys.argv[1:]]
    try:
        rc = harness.run_tests(tests, "test_hostile")
    finally:
        alive = S.alive()
        code = S.stop()
        if not alive or code != 0:
            print(f"FAIL: the server {'died' if not alive else 'exited with %d' % code}:\n{S.log()[-6000:]}")
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
