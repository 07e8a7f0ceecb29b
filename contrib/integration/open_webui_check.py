"""open_webui_check.py - Open WebUI, the real program, chatting through a real `infer serve`.

Run by contrib/integration/open-webui with the python of its cached venv (open-webui and selenium
from PyPI); Debian's chromium and chromedriver drive the page.  What it does:

  1. `infer serve` on the default model (models/gemma-3-270m-q4_k_m.gguf, --alias MODEL_ALIAS) on a
     free loopback port, with -v so that its log names every request.
  2. Twice, each with a throw-away DATA_DIR and no login (WEBUI_AUTH=False): Open WebUI on a free
     loopback port, pointed at infer
       - as an Ollama server:          OLLAMA_BASE_URL=http://127.0.0.1:PORT, OpenAI API off;
       - as an OpenAI-compatible one:  OPENAI_API_BASE_URL=http://127.0.0.1:PORT/v1, a key, Ollama off;
     then
       - through Open WebUI's own backend API (signed in as its no-auth admin): /api/models lists
         infer's model, and its proxy (/ollama/api/tags or /openai/models) answers with it;
       - in headless Chromium, like a user: the page loads, the model selector lists infer's model,
         a message typed into the chat box and sent gets an answer that streams in (the text is seen
         growing, then complete and non-empty), infer's log shows the chat request, and a screenshot
         of the answered chat is written to the output directory;
       - where Open WebUI sends its tool catalogue (native function calling: always on the OpenAI
         connection) and so makes the prompt long, a second message is answered too, and infer
         takes the first prompt from its prefix cache.
  Each check prints PASS or FAIL; the exit status is 1 if any failed, 77 if a program could not be
  started here (the message says what), else 0.

Nothing leaves the machine: Open WebUI's downloads are turned off (OFFLINE_ENV below), its Python
side and Chromium are given a proxy on loopback that refuses and records every request for a host
outside loopback (Chromium reaches loopback directly); a request of Open WebUI's recorded there
fails the check, Chromium's own (Google services) are printed.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("INFER_SRCDIR", os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRCDIR, "tests", "server"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import harness  # noqa: E402  (infer serve on a free port, read back from its log)

HOST = "127.0.0.1"
MODEL_ALIAS = "gemma3-270m"
QUESTION = "Write two sentences about a cat who lives in a lighthouse."
FOLLOW_UP = "And one more about its friend, a seagull."
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

# Open WebUI's settings for a machine that reaches nothing but loopback (read from open-webui
# 0.12.4's open_webui/env.py and config.py):
OFFLINE_ENV = {
    # HF_HUB_OFFLINE=1 for huggingface_hub, RAG/reranking/whisper model auto-update off, and no
    # GitHub release check (/api/version/updates).
    "OFFLINE_MODE": "True",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "ENABLE_VERSION_UPDATE_CHECK": "False",
    "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "False",
    "RAG_RERANKING_MODEL_AUTO_UPDATE": "False",
    "WHISPER_MODEL_AUTO_UPDATE": "False",
    # At start Open WebUI loads its document-embedding model (sentence-transformers/all-MiniLM-L6-v2)
    # from the Hugging Face hub; with no model named it loads none (documents/RAG are not tested).
    "RAG_EMBEDDING_MODEL": "",
    # Telemetry off (chromadb's is off in Open WebUI already; say so anyway), no OpenTelemetry.
    "ANONYMIZED_TELEMETRY": "False",
    "SCARF_NO_ANALYTICS": "true",
    "DO_NOT_TRACK": "true",
    "ENABLE_OTEL": "False",
}

# After each answer Open WebUI asks the model again for a title, tags and follow-up questions.
# Those are extra requests of the same kind; off here so that the check waits for one answer only on
# this shared two-core machine (so they are not checked).
TASKS_OFF_ENV = {
    "ENABLE_TITLE_GENERATION": "False",
    "ENABLE_TAGS_GENERATION": "False",
    "ENABLE_FOLLOW_UP_GENERATION": "False",
    "ENABLE_AUTOCOMPLETE_GENERATION": "False",
}


class CannotRun(Exception):
    """A real program could not be installed or started here: exit 77 with the reason."""


results = []  # (name, ok)


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print(f"{'PASS' if ok else 'FAIL'}: {name}{(' - ' + detail) if detail else ''}", flush=True)
    return bool(ok)


def info(msg):
    print(f"      {msg}", flush=True)


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RefusingProxy:
    """An HTTP proxy on loopback that answers every request 403 and records the host asked for.
    Open WebUI's Python side (HTTP(S)_PROXY) and Chromium (--proxy-server) are pointed at it, so a
    request for any host outside loopback fails at once and is listed, instead of leaving."""

    def __init__(self):
        self.hosts = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                c.settimeout(5)
                line = c.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                parts = line.split()
                if len(parts) >= 2:
                    target = parts[1]
                    m = re.match(r"(?:\w+://)?([^/:]+)", target)
                    self.hosts.append(m.group(1) if m else target)
                c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            except OSError:
                pass
            finally:
                c.close()

    @property
    def url(self):
        return f"http://{HOST}:{self.port}"


class OpenWebUI:
    """`open-webui serve` on a free loopback port with a throw-away DATA_DIR."""

    def __init__(self, name, env_extra, out_dir, proxy, timeout=900):
        self.name = name
        self.port = free_port()
        self.data_dir = tempfile.mkdtemp(prefix=f"open-webui-{name}-")
        self.log_path = os.path.join(out_dir, f"open-webui-{name}.log")
        exe = os.path.join(os.path.dirname(sys.executable), "open-webui")
        env = dict(os.environ)
        env.update(OFFLINE_ENV)
        env.update(TASKS_OFF_ENV)
        env.update({
            "DATA_DIR": self.data_dir,
            "WEBUI_AUTH": "False",
            "WEBUI_SECRET_KEY": "infer-integration-check",  # else it writes .webui_secret_key in cwd
            "WEBUI_URL": f"http://{HOST}:{self.port}",
            "HTTP_PROXY": proxy.url, "HTTPS_PROXY": proxy.url,
            "http_proxy": proxy.url, "https_proxy": proxy.url,
            "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
            "GLOBAL_LOG_LEVEL": "INFO",
        })
        env.update(env_extra)
        self.log_file = open(self.log_path, "w")
        t0 = time.monotonic()
        self.proc = subprocess.Popen([exe, "serve", "--host", HOST, "--port", str(self.port)], cwd=self.data_dir,
                                     env=env, stdin=subprocess.DEVNULL, stdout=self.log_file,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise CannotRun(f"open-webui serve exited with {self.proc.returncode} at start; "
                                f"last lines of {self.log_path}:\n{self.tail()}")
            try:
                status, _ = self.get("/ready", timeout=5)
                if status == 200:
                    self.start_s = time.monotonic() - t0
                    return
            except OSError:
                pass
            time.sleep(1)
        self.stop()
        raise CannotRun(f"open-webui not ready after {timeout} s; last lines of {self.log_path}:\n{self.tail()}")

    def tail(self, n=30):
        with open(self.log_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def request(self, method, path, body=None, token=None, timeout=120):
        c = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            h = {"Content-Type": "application/json"} if body is not None else {}
            if token:
                h["Authorization"] = f"Bearer {token}"
            c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
            r = c.getresponse()
            data = r.read()
            try:
                return r.status, json.loads(data)
            except ValueError:
                return r.status, data
        finally:
            c.close()

    def get(self, path, token=None, timeout=120):
        return self.request("GET", path, token=token, timeout=timeout)

    @property
    def url(self):
        return f"http://{HOST}:{self.port}/"

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.log_file.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def backend_checks(ui, kind, model_id):
    """Open WebUI's own API sees infer's model: /api/models and its proxy of infer's listing."""
    status, body = ui.request("POST", "/api/v1/auths/signin", {"email": "", "password": ""})
    token = body.get("token") if status == 200 and isinstance(body, dict) else None
    if not check(f"[{kind}] Open WebUI backend: no-auth sign-in gives a token", token, f"HTTP {status}"):
        return
    status, body = ui.get("/api/models", token=token)
    ids = [m.get("id") for m in body.get("data", [])] if status == 200 and isinstance(body, dict) else []
    check(f"[{kind}] Open WebUI backend: /api/models lists infer's model", model_id in ids,
          f"HTTP {status}, ids {ids}")
    if kind == "ollama":
        status, body = ui.get("/ollama/api/tags", token=token)
        names = [m.get("name") for m in body.get("models", [])] if status == 200 and isinstance(body, dict) else []
        check(f"[{kind}] Open WebUI backend: /ollama/api/tags (its proxy of infer's /api/tags) lists it",
              model_id in names, f"HTTP {status}, names {names}")
    else:
        status, body = ui.get("/openai/models", token=token)
        ids = [m.get("id") for m in body.get("data", [])] if status == 200 and isinstance(body, dict) else []
        check(f"[{kind}] Open WebUI backend: /openai/models (its proxy of infer's /v1/models) lists it",
              model_id in ids, f"HTTP {status}, ids {ids}")


def browser(proxy):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        raise CannotRun(f"selenium is not importable in the venv: {e}")
    for p in (CHROMIUM, CHROMEDRIVER):
        if not os.access(p, os.X_OK):
            raise CannotRun(f"{p} missing: apt-get install chromium chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1280,860", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-default-apps",
              "--disable-client-side-phishing-detection", "--disable-domain-reliability", "--no-pings",
              "--disable-features=OptimizationGuideModelDownloading,OptimizationHintsFetching,"
              "OptimizationTargetPrediction,OptimizationHints,Translate,MediaRouter",
              f"--proxy-server={proxy.url}", "--lang=en-US"):
        opts.add_argument(a)
    # the driver path is given, so Selenium Manager (which would download a driver) never runs
    try:
        return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    except Exception as e:  # noqa: BLE001 - any failure to start the browser is "cannot run here"
        raise CannotRun(f"headless chromium did not start through chromedriver: {e}")


def ui_checks(driver, ui, kind, model_id, server, out_dir, tools_sent):
    """Drive the chat page like a user; returns the screenshot path (or None)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(ui.url)
    try:
        box = WebDriverWait(driver, 180).until(EC.element_to_be_clickable((By.ID, "chat-input")))
    except Exception:  # noqa: BLE001
        driver.save_screenshot(os.path.join(out_dir, f"open-webui-{kind}-no-input.png"))
        check(f"[{kind}] browser: the chat page loads (chat box present)", False)
        return None
    check(f"[{kind}] browser: the chat page loads (chat box present)", True, driver.title)
    # a first visit may open the "what's new" dialog over the page: close it like a user would
    time.sleep(2)
    for b in driver.find_elements(By.XPATH, "//button[contains(., \"Okay, Let's Go\")]"):
        if b.is_displayed():
            b.click()
            time.sleep(0.5)

    # the model selector lists infer's model; choose it
    driver.find_element(By.ID, "model-selector-model-button").click()
    try:
        WebDriverWait(driver, 30).until(EC.visibility_of_element_located((By.ID, "model-selector-list")))
        options = driver.find_elements(By.CSS_SELECTOR, "#model-selector-list [role='option'][data-value]")
        values = [o.get_attribute("data-value") for o in options]
    except Exception:  # noqa: BLE001
        options, values = [], []
    match = [o for o, v in zip(options, values) if v == model_id]
    check(f"[{kind}] browser: the model selector lists infer's model '{model_id}'", match,
          f"options {values}, shown as {[o.text.strip() for o in match]}")
    if not match:
        driver.save_screenshot(os.path.join(out_dir, f"open-webui-{kind}-models.png"))
        return None
    match[0].click()
    time.sleep(0.5)
    label = driver.find_element(By.ID, "model-selector-model-button").get_attribute("aria-label") or ""
    check(f"[{kind}] browser: infer's model is selected", model_id in label, label)

    # type the question, send it, watch the answer stream in
    log_before = server.log()
    m0 = server.metrics()
    box = driver.find_element(By.ID, "chat-input")
    box.click()
    box.send_keys(QUESTION)
    time.sleep(0.3)
    box.send_keys(Keys.ENTER)
    t0 = time.monotonic()
    lengths, text, done, error = [], "", False, ""
    while time.monotonic() - t0 < 600:
        try:
            els = driver.find_elements(By.CSS_SELECTOR, ".chat-assistant #response-content-container")
            text = els[-1].text.strip() if els else ""
            done = bool(driver.find_elements(By.CSS_SELECTOR, ".copy-response-button"))  # shown once done
            # Open WebUI logs a failed upstream request (and shows it as a grey note in the chat)
            error = "; ".join(line.split(" - ", 1)[-1] for line in ui.tail(200).splitlines()[-200:]
                              if "request failed" in line or "Error processing chat payload" in line)
        except Exception:  # noqa: BLE001 - the DOM changes under us while streaming: read again
            time.sleep(0.1)
            continue
        if not lengths or lengths[-1] != len(text):
            lengths.append(len(text))
        if done or error:
            break
        time.sleep(0.1)
    elapsed = time.monotonic() - t0
    time.sleep(1)  # let the last frame paint
    shot = os.path.join(out_dir, f"open-webui-{kind}.png")
    driver.save_screenshot(shot)
    seen = [n for n in lengths if n > 0]
    check(f"[{kind}] browser: the question appears as the user's message",
          QUESTION in " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, ".user-message, .chat-user"))
          or QUESTION in driver.page_source)
    check(f"[{kind}] browser: an answer streamed in (text seen growing)", len(set(seen)) >= 2,
          f"lengths seen while streaming: {seen[:12]}{' ...' if len(seen) > 12 else ''}")
    check(f"[{kind}] browser: the answer completed, non-empty, no error shown", done and text and not error,
          f"{len(text)} characters in {elapsed:.1f} s{'; error: ' + error if error else ''}")
    info(f"answer: {text[:300]!r}")
    m1 = server.metrics()
    d = {k: m1.get(k, 0) - m0.get(k, 0) for k in ("infer_prompt_tokens_total", "infer_prompt_tokens_cached_total",
                                                  "infer_prefill_seconds_total", "infer_generated_tokens_total")}
    info(f"infer for this message: {d['infer_prompt_tokens_total']:.0f} prompt tokens "
         f"({d['infer_prompt_tokens_cached_total']:.0f} from the prefix cache, prefill "
         f"{d['infer_prefill_seconds_total']:.1f} s), {d['infer_generated_tokens_total']:.0f} generated")
    path = "/api/chat" if kind == "ollama" else "/v1/chat/completions"
    new_log = server.log()[len(log_before):]
    hits = [line for line in new_log.splitlines() if path in line]
    check(f"[{kind}] infer's log shows the chat request ({path})", hits, hits[0] if hits else "no such line")
    check(f"[{kind}] screenshot written", os.path.getsize(shot) > 10000, shot)
    if tools_sent and done:
        follow_up(driver, kind, server, d["infer_prompt_tokens_total"])
    return shot


def follow_up(driver, kind, server, first_prompt):
    """A second message in the same chat: its prompt starts with the first one (system turn and
    Open WebUI's tool catalogue), which infer's prefix cache must not compute again."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    m0 = server.metrics()
    box = driver.find_element(By.ID, "chat-input")
    box.click()
    box.send_keys(FOLLOW_UP)
    time.sleep(0.3)
    box.send_keys(Keys.ENTER)
    t0 = time.monotonic()
    done = False
    while time.monotonic() - t0 < 600 and not done:
        time.sleep(0.5)
        try:
            done = len(driver.find_elements(By.CSS_SELECTOR, ".copy-response-button")) >= 2
        except Exception:  # noqa: BLE001 - the DOM changes while streaming
            pass
    m1 = server.metrics()
    prompt = m1.get("infer_prompt_tokens_total", 0) - m0.get("infer_prompt_tokens_total", 0)
    cached = m1.get("infer_prompt_tokens_cached_total", 0) - m0.get("infer_prompt_tokens_cached_total", 0)
    prefill = m1.get("infer_prefill_seconds_total", 0) - m0.get("infer_prefill_seconds_total", 0)
    check(f"[{kind}] browser: a second message is answered, and infer takes the first prompt (system turn, "
          "tool catalogue) from its prefix cache", done and cached >= 0.9 * first_prompt,
          f"{prompt:.0f} prompt tokens, {cached:.0f} from the prefix cache, prefill {prefill:.1f} s, "
          f"in {time.monotonic() - t0:.1f} s")


def run_one(kind, server, out_dir, proxy, browser_proxy):
    port = server.port
    if kind == "ollama":
        env = {"OLLAMA_BASE_URL": f"http://{HOST}:{port}", "ENABLE_OLLAMA_API": "True", "ENABLE_OPENAI_API": "False"}
        # Open WebUI sends its built-in tools with every chat message ("native" function calling,
        # its default, which the OpenAI connection below checks); here its "legacy" mode, which
        # sends none and keeps prompts short on a small board, is checked.
        # INFER_OPEN_WEBUI_OLLAMA_FUNCTION_CALLING=native checks the default through /api/chat too.
        fc = os.environ.get("INFER_OPEN_WEBUI_OLLAMA_FUNCTION_CALLING", "legacy")
        if fc != "native":
            env["DEFAULT_MODEL_PARAMS"] = json.dumps({"function_calling": fc})
        model_id = f"{MODEL_ALIAS}:latest"  # Ollama names carry a tag; /api/tags says which
    else:
        env = {"OPENAI_API_BASE_URL": f"http://{HOST}:{port}/v1", "OPENAI_API_KEY": "anything",
               "ENABLE_OPENAI_API": "True", "ENABLE_OLLAMA_API": "False"}
        model_id = MODEL_ALIAS
    print(f"== Open WebUI -> infer as an {'Ollama' if kind == 'ollama' else 'OpenAI-compatible'} server "
          f"({'its default native function calling: built-in tools with every message' if 'DEFAULT_MODEL_PARAMS' not in env else 'function calling ' + json.loads(env['DEFAULT_MODEL_PARAMS'])['function_calling'] + ': no tools sent'}): "
          + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    ui = OpenWebUI(kind, env, out_dir, proxy)
    try:
        info(f"open-webui ready on {ui.url} after {ui.start_s:.0f} s (log: {ui.log_path})")
        backend_checks(ui, kind, model_id)
        # a new browser each time: the two Open WebUIs share the host 127.0.0.1, hence its cookies,
        # and the first one's session cookie makes the second page show "Backend Required"
        driver = browser(browser_proxy)
        try:
            return ui_checks(driver, ui, kind, model_id, server, out_dir, "DEFAULT_MODEL_PARAMS" not in env)
        finally:
            driver.quit()
    finally:
        ui.stop()


def main():
    out_dir = os.environ.get("INFER_INTEGRATION_OUT") or tempfile.mkdtemp(prefix="infer-open-webui-")
    os.makedirs(out_dir, exist_ok=True)
    print(f"open-webui: artefacts (screenshots, logs) in {out_dir}", flush=True)
    try:
        import importlib.metadata as md
        info(f"open-webui {md.version('open-webui')}, selenium {md.version('selenium')}, "
             f"{subprocess.run([CHROMIUM, '--version'], capture_output=True, text=True).stdout.strip()}")
    except Exception:  # noqa: BLE001 - versions are informative only
        pass
    model = harness.default_model()
    if not model:
        print("open-webui: no models/gemma-3-270m-q4_k_m.gguf (models/fetch-default)", file=sys.stderr)
        return 2
    proxy = RefusingProxy()  # for Open WebUI's Python side
    browser_proxy = RefusingProxy()  # for Chromium (its own background requests land here)
    threads = os.environ.get("INFER_SERVE_THREADS", "2")
    # -c 8192: Open WebUI's built-in tools (native function calling, its default) make every chat
    # prompt ~5,600 tokens, more than the default 4096-token context per sequence
    server = harness.Server(model, ["--alias", MODEL_ALIAS, "-v", "-t", threads, "-c", "8192", "-np", "2",
                                    "--max-tokens", "96"], name="open-webui")
    info(f"infer serve on http://{HOST}:{server.port} ({os.path.basename(model)} as '{MODEL_ALIAS}'; "
         f"log {server.log_path})")
    shots = []
    rc = 0
    try:
        for kind in os.environ.get("INFER_OPEN_WEBUI_KINDS", "ollama openai").split():
            shot = run_one(kind, server, out_dir, proxy, browser_proxy)
            if shot:
                shots.append(shot)
    except CannotRun as e:
        print(f"open-webui: CANNOT RUN HERE: {e}", file=sys.stderr, flush=True)
        rc = 77
    except Exception:  # noqa: BLE001 - a crash of the check itself is a failure, with its trace
        traceback.print_exc()
        check("the check ran to the end", False)
    finally:
        with open(os.path.join(out_dir, "infer-serve.log"), "w") as f:
            f.write(server.log())
        status = server.stop()
        check("infer serve exited cleanly", status == 0, f"exit status {status}")
    hosts = sorted(set(proxy.hosts))
    check("Open WebUI asked for no host outside loopback (its proxy refused and recorded: "
          f"{', '.join(hosts) if hosts else 'none'})", not hosts)
    hosts = sorted(set(browser_proxy.hosts))
    info(f"Chromium's own background requests, refused by its proxy: {', '.join(hosts) if hosts else 'none'}")
    for s in shots:
        info(f"screenshot: {s}")
    failed = [n for n, ok in results if not ok]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed", flush=True)
    if rc:
        return rc
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
