"""harness.py - start `infer serve` on a loopback port and talk to it.

Shared by the server tests (test_api.py, test_hostile.py), the load test (load.py) and
contrib/bench/serve-vs-llamacpp.  Only 127.0.0.1 is ever contacted; every wait is bounded.

A tiny test runner lives here too: `run_tests(functions)` runs each, prints one line per test
and a closing 'N passed, N failed' line, and returns the exit status.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HOST = "127.0.0.1"


def builddir():
    return os.environ.get("INFER_BUILDDIR", os.getcwd())


def srcdir():
    return os.environ.get("INFER_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def infer_binary():
    return os.path.join(builddir(), "infer")


def test_model():
    """The model the API tests run on: $INFER_SERVE_TEST_MODEL, else the small synthetic gemma3
    model `make check` generates (fast even with scalar kernels), else the default model."""
    env = os.environ.get("INFER_SERVE_TEST_MODEL")
    if env:
        return env if os.path.exists(env) else None
    gen = os.path.join(builddir(), "models", "gen", "gemma3-q8_0.gguf")
    if os.path.exists(gen):
        return gen
    return default_model()


def default_model():
    p = os.path.join(srcdir(), "models", "gemma-3-270m-q4_k_m.gguf")
    return p if os.path.exists(p) else None


class Server:
    """`infer serve` in a child process, on a free loopback port (--port 0, read back from its log)."""

    def __init__(self, model, args=(), env=None, ready_timeout=300, name="serve", wait_ready=True, preexec_fn=None):
        self.log_file = tempfile.NamedTemporaryFile(prefix=f"infer-{name}-", suffix=".log", delete=False)
        self.log_path = self.log_file.name
        args = list(args)
        if "-t" not in args and "--threads" not in args:
            args += ["-t", os.environ.get("INFER_SERVE_THREADS", "1")]  # the machine is shared
        cmd = [infer_binary(), "serve", "-m", model, "--host", HOST, "--port", "0", *args]
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=e, preexec_fn=preexec_fn)
        self.port = None
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            text = self.log()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", text)
            if m:
                self.port = int(m.group(1))
            if self.port and (not wait_ready or "serve: ready" in text):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"infer serve exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"infer serve not ready after {ready_timeout} s:\n{self.log()}")

    @property
    def base_url(self):
        return f"http://{HOST}:{self.port}/v1"

    def log(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def rss_kib(self, field="VmRSS"):
        """Resident KiB now (VmHWM: the peak)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def under_asan(self):
        """Is the server built with AddressSanitizer (its allocator keeps freed memory in quarantine)?"""
        try:
            with open(f"/proc/{self.proc.pid}/maps") as f:
                return "libasan" in f.read()
        except OSError:
            return False

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=60):
        """SIGINT (shut down now; SIGTERM would drain for a few seconds first), wait; returns the exit status (an ASan report makes it non-zero).  The log
        file is removed after a clean exit (kept, and named on stdout, otherwise or with
        INFER_SERVE_KEEP_LOGS set)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.returncode != 0:  # negative: the signal that ended it (none was handled)
            print(f"server exit status: {self.proc.returncode}", flush=True)
        if not self.log_file.closed:
            self.log_file.close()
            if self.proc.returncode == 0 and not os.environ.get("INFER_SERVE_KEEP_LOGS"):
                os.unlink(self.log_path)
            else:
                print(f"server log: {self.log_path}", flush=True)
        return self.proc.returncode

    # ---- plain HTTP (http.client): exact status codes and headers ----

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict, body bytes)."""
        c = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode()
            h = {"Content-Type": "application/json"} if body is not None else {}
            h.update(headers or {})
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def post(self, path, obj, headers=None, timeout=120):
        status, h, body = self.request("POST", path, obj, headers, timeout)
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        return status, data

    def get_json(self, path, headers=None):
        status, h, body = self.request("GET", path, None, headers)
        return status, json.loads(body)

    def metrics(self, headers=None):
        """/metrics parsed into {name or name{labels}: float}."""
        status, h, body = self.request("GET", "/metrics", None, headers)
        assert status == 200, status
        out = {}
        for line in body.decode().splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)', line)
            assert m, f"bad metrics line: {line!r}"
            out[m.group(1)] = float(m.group(2))
        return out

    def raw(self, data, timeout=10, close_write=False):
        """Send raw bytes; return what came back (until close or timeout)."""
        s = socket.create_connection((HOST, self.port), timeout=timeout)
        try:
            s.sendall(data)
            if close_write:
                s.shutdown(socket.SHUT_WR)
            chunks = []
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    break
                except ConnectionResetError:
                    break
                if not b:
                    break
                chunks.append(b)
                if b"\r\n\r\n" in b"".join(chunks) and not close_write:
                    # a complete response header: read what is announced, then stop
                    whole = b"".join(chunks)
                    head, _, rest = whole.partition(b"\r\n\r\n")
                    m = re.search(rb"content-length: *(\d+)", head, re.I)
                    if m and len(rest) >= int(m.group(1)):
                        break
            return b"".join(chunks)
        finally:
            s.close()


def status_of(raw_response):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw_response)
    return int(m.group(1)) if m else None


def sse_events(body):
    """The data: payloads of an SSE body (bytes), in order."""
    out = []
    for block in body.decode().split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                out.append(line[6:])
    return out


class Skip(Exception):
    pass


def run_tests(tests, title):
    """Run test functions; print results and 'N passed, N failed'; return the exit status."""
    passed = failed = skipped = 0
    t_all = time.monotonic()
    for fn in tests:
        t0 = time.monotonic()
        try:
            fn()
            passed += 1
            print(f"PASS {title}: {fn.__name__} ({time.monotonic() - t0:.1f} s)", flush=True)
        except Skip as e:
            skipped += 1
            print(f"SKIP {title}: {fn.__name__}: {e}", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {title}: {fn.__name__} ({time.monotonic() - t0:.1f} s)", flush=True)
            traceback.print_exc(file=sys.stdout)
    print(f"{title}: {time.monotonic() - t_all:.1f} s", flush=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped", flush=True)
    return 1 if failed else 0


def run_with_server(srv, tests, title, setup=None, cleanup_dir=None):
    """The main of a suite around one server: keep the tests named on the command line (all when
    none are), run setup() then the tests, stop the server (a non-zero exit, e.g. an ASan report,
    fails the suite) and remove cleanup_dir.  Returns the exit status."""
    import shutil
    if len(sys.argv) > 1:
        tests = [t for t in tests if t.__name__ in sys.argv[1:]]
    rc = 1
    try:
        if setup:
            setup()
        rc = run_tests(tests, title)
    finally:
        code = srv.stop()
        if code != 0:
            print(f"FAIL: the server exited with {code}:\n{srv.log()[-4000:]}")
            rc = 1
        if cleanup_dir:
            shutil.rmtree(cleanup_dir, ignore_errors=True)
    return rc


def find_stop(srv, content):
    """A stop string inside the greedy answer to content (not stored), so that asking it again with
    that stop ends with finish_reason "stop" (what the response cache stores)."""
    st, h, raw = srv.request("POST", "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": content}], "max_tokens": 12,
                              "temperature": 0, "cache": {"no-store": True}})
    r = json.loads(raw)
    assert st == 200, r
    text = r["choices"][0]["message"]["content"]
    assert len(text) >= 4, repr(text)
    return text[2:4]
