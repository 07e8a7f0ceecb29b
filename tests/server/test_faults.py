#!/usr/bin/env python3
"""test_faults.py - the persistent cache layers survive kills and full disks.

Kill at any moment: `infer serve --cache-dir DIR` (a small KV budget, so that eviction writes
blocks to disk while requests run) is sent requests with several long shared prefixes and
SIGKILLed at random points -- while it answers, right after it starts, during the shutdown's
writes after SIGINT (SIGTERM drains first) -- INFER_FAULT_KILLS times (default 50).  After every restart the server
comes up, every greedy answer equals a cache-less run (--no-prefix-cache), and no file of the disk
tier was ever found damaged (a torn or half-written block would be counted as ignored, never
served); the kills did hit blocks being written and blocks being read.  The repack cache gets
the same treatment: SIGKILL during its first write at random points, then a start must map a
good file (or make one), and answer as before.

Full disk: the cache directory on a 256 KiB tmpfs (needs root and mount; skipped with the
reason otherwise): writes fail with one warning, the server keeps answering correctly, the write
errors are counted in /metrics, and a restart reads back only whole blocks.

Memory pressure: the server in a 4 GiB memory cgroup the test makes under its own (v2 when the
memory controller is delegated, else v1; skipped with the reason when neither is writable), the
default model, long prompts, then a second process in the group takes nearly all that is left:
the KV budget shrinks, blocks are evicted, requests are answered, nothing is OOM-killed, and the
budget comes back when the pressure goes.

Run by tests/server/run.sh.
"""
import json
import os
import random
import shutil
import signal
import subprocess
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
KILLS = int(os.environ.get("INFER_FAULT_KILLS", "50"))
ROOMS = ["kitchen", "garage", "hall", "attic", "garden", "office", "bathroom", "basement"]
PREFIXES = [f"You are assistant number {k} of the Ortega home. Keep answers short. " +
            " ".join(f"Rule {i}: the {ROOMS[(i + k) % 8]} heater runs at {10 + (i * k) % 13}:00." for i in range(24))
            for k in range(3)]
QUESTIONS = ["When does the kitchen heater run?", "What about the attic?", "Summarise the rules."]
PROMPTS = [(p, q) for p in range(len(PREFIXES)) for q in range(len(QUESTIONS))]
# a budget of a few prompts' KV: other prefixes evict (and write) the older ones
SERVE_ARGS = ["-c", "512", "--cache-high", "1M", "--parallel", "1"]


def body(p, q):
    return {"messages": [{"role": "system", "content": PREFIXES[p]}, {"role": "user", "content": QUESTIONS[q]}],
            "max_tokens": 6, "temperature": 0}


def answer(srv, p, q, timeout=120):
    st, h, raw = srv.request("POST", "/v1/chat/completions", body(p, q), timeout=timeout)
    assert st == 200, (st, raw)
    r = json.loads(raw)
    return r["choices"][0]["message"]["content"], r


def reference():
    srv = Server(MODEL, SERVE_ARGS + ["--no-prefix-cache"], name="faults-ref")
    try:
        return {pq: answer(srv, *pq)[0] for pq in PROMPTS}
    finally:
        assert srv.stop() == 0


def kill(srv):
    """SIGKILL and forget the log (the harness keeps logs of unclean exits)."""
    if srv.proc.poll() is None:
        srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait(timeout=30)
    if not srv.log_file.closed:
        srv.log_file.close()
    os.unlink(srv.log_path)


def disk_counters(srv):
    m = srv.metrics()
    return {k: m.get(f"infer_prefix_cache_disk_{k}_total", 0) for k in ("reads", "writes", "errors", "write_errors")}


def test_kill_at_any_moment():
    ref = reference()
    d = os.path.join(TMP, "kv")
    rng = random.Random(16)
    totals = {"reads": 0, "writes": 0, "answered": 0, "killed_mid_request": 0, "killed_in_shutdown": 0}
    for i in range(KILLS):
        srv = Server(MODEL, SERVE_ARGS + ["--cache-dir", d], name=f"faults-kill{i}")
        c0 = disk_counters(srv)
        assert c0["errors"] == 0, f"restart {i}: a damaged cache file was found: {srv.log()}"
        # one checked answer first (blocks from disk after the first round), then a burst to kill into
        pq = PROMPTS[rng.randrange(len(PROMPTS))]
        text, r = answer(srv, *pq)
        assert text == ref[pq], (i, pq, text, ref[pq])
        totals["reads"] += disk_counters(srv)["reads"]
        results = []

        def burst():
            for _ in range(6):
                pq2 = PROMPTS[rng.randrange(len(PROMPTS))]
                try:
                    results.append((pq2, answer(srv, *pq2, timeout=30)[0]))
                except Exception:
                    return  # the kill

        t = threading.Thread(target=burst)
        t.start()
        mode = i % 5
        if mode == 4:  # during the shutdown's writes
            time.sleep(rng.uniform(0.0, 0.3))
            srv.proc.send_signal(signal.SIGINT)  # shut down now (SIGTERM would drain first)
            time.sleep(rng.uniform(0.0, 0.05))
            totals["killed_in_shutdown"] += 1
        else:
            time.sleep(rng.uniform(0.0, 0.6))
            totals["killed_mid_request"] += 1
        c = None
        try:
            c = disk_counters(srv) if mode != 4 else None
        except Exception:
            pass
        if c:
            totals["writes"] += c["writes"]
        kill(srv)
        t.join(timeout=60)
        for pq2, text2 in results:
            assert text2 == ref[pq2], (i, pq2, text2, ref[pq2])
        totals["answered"] += len(results)
    # the last word: a clean start answers everything right from what the kills left
    srv = Server(MODEL, SERVE_ARGS + ["--cache-dir", d], name="faults-final")
    try:
        for pq in PROMPTS:
            assert answer(srv, *pq)[0] == ref[pq], pq
        c = disk_counters(srv)
        assert c["errors"] == 0, srv.log()
        totals["reads"] += c["reads"]
    finally:
        assert srv.stop() == 0
    print(f"  {KILLS} kills: {totals}", flush=True)
    assert totals["reads"] > 0, "no block was ever served from disk: the test did not test the disk tier"
    assert totals["writes"] > 0, "no block was written while requests ran: the kills hit no writes"
    assert not [f for f in os.listdir(d) if ".kvb.tmp." in f and not os.path.isdir(os.path.join(d, f))]


def q4_model():
    for name in ("gemma3-q4_0.gguf", "llama-q4_0.gguf"):
        p = os.path.join(harness.builddir(), "models", "gen", name)
        if os.path.exists(p):
            return p
    return None


def test_kill_during_repack_cache_write():
    model = q4_model()
    if not model:
        raise harness.Skip("no synthetic Q4_0 model (make check builds models/gen)")
    rdir = os.path.join(TMP, "repack")
    env = {"INFER_REPACK_DIR": rdir}
    ref_srv = Server(model, ["--no-prefix-cache"], env={"INFER_REPACK_DIR": os.path.join(TMP, "repack-ref")},
                     name="faults-rref")
    try:
        if "repack:" not in ref_srv.log():
            raise harness.Skip("this kernel variant repacks nothing (no repack cache to kill)")
        ref = answer(ref_srv, 0, 0)[0]
    finally:
        assert ref_srv.stop() == 0
    rng = random.Random(7)
    for i in range(12):
        shutil.rmtree(rdir, ignore_errors=True) if i % 3 == 0 else None
        p = subprocess.Popen([harness.infer_binary(), "serve", "-m", model, "--port", "0", "-t", "1",
                              "--no-prefix-cache"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, **env})
        time.sleep(rng.uniform(0.0, 0.25))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    srv = Server(model, ["--no-prefix-cache"], env=env, name="faults-repack")
    try:
        log = srv.log()
        assert "repack:" in log and "failed" not in log, log
        assert answer(srv, 0, 0)[0] == ref
    finally:
        assert srv.stop() == 0
    srv = Server(model, ["--no-prefix-cache"], env=env, name="faults-repack2")
    try:
        assert "cache hit" in srv.log(), srv.log()
        assert answer(srv, 0, 0)[0] == ref
    finally:
        assert srv.stop() == 0


def test_full_disk():
    mnt = os.path.join(TMP, "small")
    os.makedirs(mnt)
    if os.geteuid() != 0:
        raise harness.Skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt], capture_output=True, text=True)
    if r.returncode != 0:
        raise harness.Skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        ref = reference()
        srv = Server(MODEL, SERVE_ARGS + ["--cache-dir", mnt], name="faults-full")
        try:
            for rnd in range(3):
                for pq in PROMPTS:
                    assert answer(srv, *pq)[0] == ref[pq], (rnd, pq)
            c = disk_counters(srv)
            assert c["write_errors"] > 0, f"the 256 KiB disk never filled: {c}"
            assert c["writes"] > 0, c
            log = srv.log()
            assert log.count("KV cache disk tier: cannot write") == 1, log
            assert "No space left on device" in log, log
        finally:
            assert srv.stop() == 0
        assert not [f for f in os.listdir(mnt) if ".tmp." in f]
        srv = Server(MODEL, SERVE_ARGS + ["--cache-dir", mnt], name="faults-full2")
        try:
            for pq in PROMPTS:
                assert answer(srv, *pq)[0] == ref[pq], pq
            c = disk_counters(srv)
            assert c["errors"] == 0, srv.log()  # nothing half-written was ever read back
        finally:
            assert srv.stop() == 0
    finally:
        subprocess.run(["umount", mnt])


class MemoryCgroup:
    """A memory cgroup made by the test as a child of this process's own memory cgroup (so the
    machine's limits on that one still apply), with a limit like a small board's; processes are
    put in it from their preexec hook.  cgroup v2 where the memory controller is delegated to us,
    else v1's memory hierarchy; Skip with the reason when neither can be written."""

    def __init__(self, limit):
        self.path = self.version = None
        why = []
        own = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                hid, ctl, path = line.rstrip("\n").split(":", 2)
                if hid == "0" and ctl == "":
                    own[2] = path
                elif "memory" in ctl.split(","):
                    own[1] = path
        for version, mount in ((2, "/sys/fs/cgroup"), (2, "/sys/fs/cgroup/unified"), (1, "/sys/fs/cgroup/memory")):
            if version not in own:
                continue
            parent = mount + own[version].rstrip("/")
            if version == 2:
                try:
                    ctl = open(os.path.join(parent, "cgroup.subtree_control")).read().split()
                except OSError as e:
                    why.append(f"cgroup v2 at {mount}: {e.strerror}")
                    continue
                if "memory" not in ctl:
                    why.append(f"cgroup v2 at {mount}: the memory controller is not delegated to {own[2]}")
                    continue
            child = os.path.join(parent, f"infer-test-memory-{os.getpid()}")
            try:
                os.mkdir(child)
            except OSError as e:
                why.append(f"cgroup v{version}: cannot make {child}: {e.strerror}")
                continue
            try:
                name = "memory.max" if version == 2 else "memory.limit_in_bytes"
                with open(os.path.join(child, name), "w") as f:
                    f.write(str(limit))
            except OSError as e:
                os.rmdir(child)
                why.append(f"cgroup v{version}: cannot set its limit: {e.strerror}")
                continue
            self.path, self.version = child, version
            return
        raise harness.Skip("; ".join(why) or "no memory cgroup hierarchy here")

    def enter(self):
        """preexec_fn: move the starting child into the group before it runs anything."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def read(self, name):
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def usage(self):
        return int(self.read("memory.current" if self.version == 2 else "memory.usage_in_bytes"))

    def oom_kills(self):
        """OOM kills inside the group (v2 memory.events, v1 memory.oom_control on kernels that count them)."""
        for line in self.read("memory.events" if self.version == 2 else "memory.oom_control").splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return None

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)  # the last member is still exiting


BALLOON = """
import os, sys
n = int(sys.argv[1])
b = bytearray(n)
for i in range(0, n, 4096):  # touch every page: it is charged now, not at first use
    b[i] = 1
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
"""


def test_memory_pressure():
    """A 4 GiB cgroup (a small board), the default model, long prompts; then another process in the
    group takes all but ~128 MiB of what is left: the KV budget shrinks below what is cached, blocks
    are evicted and their memory handed back, every request is still answered, nothing is OOM-killed;
    when the pressure goes away the budget is back."""
    model = harness.default_model() or MODEL
    limit = 4 << 30
    cg = MemoryCgroup(limit)
    srv = balloon = None
    try:
        srv = Server(model, ["-c", "2048", "--parallel", "1"], name="faults-mem", preexec_fn=cg.enter)
        m0 = srv.metrics()
        assert m0["infer_memory_cgroup_limit_bytes"] == limit, m0
        assert m0["infer_memory_total_bytes"] == limit, m0
        high0 = m0["infer_kv_cache_high_bytes"]
        assert 0 < high0 <= limit / 4, high0  # the budget follows the group's limit, not the machine's RAM
        assert "the cgroup memory limit (v%d, 4096 MiB) sizes the KV cache" % cg.version in srv.log(), srv.log()
        floor = m0["infer_memory_floor_bytes"]
        assert floor == 256 << 20, floor  # min(limit / 16, 512 MiB)

        def ask(k, n_rules=95):
            text = f"Household notebook {k}. " + " ".join(
                f"Note {i}: the {ROOMS[(i * 3 + k) % 8]} shelf {k}-{i} holds {i * 7 % 31} jars." for i in range(n_rules))
            st, h, raw = srv.request("POST", "/v1/chat/completions", {
                "messages": [{"role": "system", "content": text}, {"role": "user", "content": "Which shelf is full?"}],
                "max_tokens": 4, "temperature": 0}, timeout=600)
            assert st == 200, (k, st, raw[:300])
            return json.loads(raw)

        for k in range(4):  # fill the prefix cache
            ask(k)
        m1 = srv.metrics()
        cached1 = m1["infer_kv_bytes_cached"]
        assert cached1 > 64 << 20, m1  # more than the deficit the balloon makes below
        rss1 = srv.rss_kib()

        # the pressure: another member of the group holds all but ~floor/2 of what the group has left
        st = cg.read("memory.stat").split()
        stat = dict(zip(st[0::2], st[1::2]))
        inactive = int(stat.get("total_inactive_file", stat.get("inactive_file", 0)))
        take = int(limit - (cg.usage() - inactive) - floor // 2)
        assert take > 0, (cg.usage(), inactive)
        balloon = subprocess.Popen([sys.executable, "-c", BALLOON, str(take)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, preexec_fn=cg.enter)
        assert balloon.stdout.readline().strip() == "held", "the balloon could not take its memory"
        time.sleep(1.2)  # the engine reads the memory at most once a second
        for k in range(4, 6):  # new prompts need blocks: the shrunk budget evicts instead of growing
            ask(k)
        m2 = srv.metrics()
        assert srv.alive(), srv.log()
        assert m2["infer_memory_available_bytes"] < floor, m2
        assert m2["infer_memory_pressure_checks_total"] > 0, m2
        assert m2["infer_kv_cache_high_bytes"] < high0, (high0, m2["infer_kv_cache_high_bytes"])
        evicted = m2["infer_prefix_cache_evictions_total"] - m1["infer_prefix_cache_evictions_total"]
        assert evicted > 0, "nothing was evicted under pressure"
        assert m2["infer_kv_bytes_cached"] < cached1, (cached1, m2["infer_kv_bytes_cached"])
        rss2 = srv.rss_kib()
        assert rss2 < rss1, f"evicted blocks were not handed back: RSS {rss1} -> {rss2} KiB"

        # the pressure goes away: the budget is back, and the cache grows again
        balloon.stdin.close()
        balloon.wait(timeout=30)
        balloon = None
        time.sleep(1.2)
        ask(6)
        m3 = srv.metrics()
        assert m3["infer_kv_cache_high_bytes"] == high0, (high0, m3["infer_kv_cache_high_bytes"])
        assert m3["infer_memory_available_bytes"] >= floor, m3
        assert m3["infer_kv_bytes_cached"] > m2["infer_kv_bytes_cached"], (m2, m3)
        oom = cg.oom_kills()
        assert oom in (None, 0), f"{oom} OOM kills in the group"
        assert srv.alive()
        peak = srv.rss_kib("VmHWM")
        print(f"  cgroup v{cg.version} limit {limit >> 20} MiB: KV high {high0 / 2**20:.0f} MiB -> "
              f"{m2['infer_kv_cache_high_bytes'] / 2**20:.0f} MiB under pressure -> "
              f"{m3['infer_kv_cache_high_bytes'] / 2**20:.0f} MiB after; cached {cached1 / 2**20:.0f} -> "
              f"{m2['infer_kv_bytes_cached'] / 2**20:.0f} -> {m3['infer_kv_bytes_cached'] / 2**20:.0f} MiB; "
              f"{evicted:.0f} blocks evicted under pressure; server RSS {rss1 >> 10} -> {rss2 >> 10} MiB"
              f", peak {peak >> 10} MiB; balloon {take >> 20} MiB; "
              f"OOM kills {oom}", flush=True)
    finally:
        if balloon:
            balloon.kill()
            balloon.wait()
        if srv:
            assert srv.stop() == 0
        cg.remove()


def main():
    global TMP
    if not MODEL:
        print("SKIP: no model")
        return 77
    TMP = tempfile.mkdtemp(prefix="infer-faults-test-")
    try:
        return harness.run_tests([test_kill_at_any_moment, test_kill_during_repack_cache_write, test_full_disk,
                                  test_memory_pressure], "faults")
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
