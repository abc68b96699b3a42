"""The soak's load (driven by benches/soak.sh): sessions of agents working at once on loopback
against a running `trove serve`, each a thread looping over a mix of calls, plus a watcher
poller, MCP clients, an operator, session churn and a few intended refusals, while the server's
RSS is sampled every 10 s. Prints nothing but a summary; writes it as JSON to --out.

Every answer is checked: an unexpected status or a failed tool call is an error (counted, the
first 20 kept). Intended refusals (a stale write, a read out of scope, a request without a
token) must be refused exactly as documented, and are counted apart.
"""

import argparse
import base64
import hashlib
import http.client
import json
import os
import random
import threading
import time
import uuid

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--token", required=True)
p.add_argument("--pid", type=int, required=True)
p.add_argument("--seconds", type=int, default=1800)
p.add_argument("--workspaces", required=True)
p.add_argument("--out", required=True)
p.add_argument("--agents", type=int, default=4)
args = p.parse_args()

lock = threading.Lock()
counts = {}
errors = []
refusals = {}
stop = threading.Event()


def count(name, n=1):
    with lock:
        counts[name] = counts.get(name, 0) + n


def error(what):
    with lock:
        counts["errors"] = counts.get("errors", 0) + 1
        if len(errors) < 20:
            errors.append(what)


def refused(what):
    with lock:
        refusals[what] = refusals.get(what, 0) + 1


class Client:
    """One keep-alive connection, reopened when the server closes it."""

    def __init__(self, token):
        self.token = token
        self.conn = None

    def call(self, method, path, body=None, headers=None, raw=False):
        h = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if body is not None and not raw:
            body = json.dumps(body)
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=120)
                self.conn.request(method, path, body=body, headers=h)
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, data, r
            except (ConnectionError, http.client.HTTPException, OSError):
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt == 1:
                    raise
        raise RuntimeError("unreachable")


def expect(what, status, data, want=(200,)):
    if status not in want:
        error(f"{what}: {status} {data[:300]!r}")
        return None
    count(what)
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


def sha(b):
    return hashlib.sha256(b).hexdigest()


_local = threading.local()


def op():
    """The operator's client of this thread (a connection is one thread's at a time)."""
    if not hasattr(_local, "client"):
        _local.client = Client(args.token)
    return _local.client


def new_session(name, scoped=False):
    body = {"workspace": name, "persistent": True}
    if scoped:
        body["file_access"] = {"read": ["pub"], "write": ["pub"]}
    s, d, _ = op().call("POST", "/v1/sessions", body)
    v = expect("session_create", s, d, (201,))
    return v["id"], v["session_token"]


def tool(cl, sid, name, params):
    s, d, _ = cl.call("POST", f"/v1/sessions/{sid}/tools/{name}", params)
    v = expect(f"tool_{name}", s, d)
    if v is None:
        return None
    if not v.get("ok"):
        error(f"tool {name}: {json.dumps(v)[:300]}")
        return None
    return v.get("data") or v.get("result")


def file_op(cl, op, body):
    s, d, _ = cl.call("POST", f"/v1/file/{op}", body)
    v = expect(f"file_{op}", s, d)
    if v is not None and not v.get("success"):
        error(f"file {op}: {json.dumps(v)[:300]}")
        return None
    return v and v.get("data")


def multipart(path, content):
    b = uuid.uuid4().hex
    body = (
        f"--{b}\r\nContent-Disposition: form-data; name=\"path\"\r\n\r\n{path}\r\n"
        f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\n"
    ).encode() + content + f"\r\n--{b}--\r\n".encode()
    return body, f"multipart/form-data; boundary={b}"


def agent(n):
    """An agent working in its own session, ended and replaced every few minutes."""
    rng = random.Random(n)
    while not stop.is_set():
        sid, st = new_session(f"agent{n}-{uuid.uuid4().hex[:6]}")
        cl = Client(st)
        files = {}
        ended_at = time.time() + rng.uniform(120, 240)
        while not stop.is_set() and time.time() < ended_at:
            k = rng.random()
            name = f"src/m{rng.randrange(40)}.py"
            try:
                if k < 0.25 or name not in files:
                    content = "".join(f"line {i} {rng.random()}\n" for i in range(rng.randrange(5, 400)))
                    if file_op(cl, "write", {"file": name, "content": content}) is not None:
                        files[name] = content
                elif k < 0.45:
                    d = file_op(cl, "read", {"file": name})
                    if d is not None and d.get("content") != files[name]:
                        error(f"read {name}: content differs")
                elif k < 0.55:
                    cur = files[name]
                    new = cur.replace("line 1 ", "line one ", 1)
                    r = tool(op(), sid, "edit_file", {
                        "path": name, "expectedSha256": sha(cur.encode()),
                        "edits": [{"oldText": cur.splitlines(True)[0], "newText": "# edited\n"}]})
                    if r is not None:
                        files[name] = cur.replace(cur.splitlines(True)[0], "# edited\n", 1)
                elif k < 0.62:
                    body, ctype = multipart(f"data/u{rng.randrange(10)}.bin", os.urandom(rng.randrange(1, 3 << 20)))
                    s, d, _ = cl.call("POST", "/v1/file/upload", body, {"Content-Type": ctype}, raw=True)
                    v = expect("file_upload", s, d)
                    if v is not None and not v.get("success"):
                        error(f"upload: {d[:300]!r}")
                elif k < 0.68:
                    r = tool(op(), sid, "delete_file", {"path": name})
                    if r is not None:
                        tid = r.get("trashId") or r.get("trash_id")
                        if tool(op(), sid, "restore_file", {"trashId": tid}) is None:
                            files.pop(name, None)
                elif k < 0.74:
                    file_op(cl, "grep", {"path": "src", "pattern": "line 3"})
                elif k < 0.78:
                    file_op(cl, "list", {"path": "", "recursive": True})
                elif k < 0.81:
                    s, d, _ = op().call("POST", f"/v1/sessions/{sid}/snapshots", {})
                    expect("snapshot", s, d, (200, 201))
                elif k < 0.84:
                    s, d, _ = cl.call("GET", f"/v1/file/download?path={name}")
                    if s == 200 and d != files[name].encode():
                        error(f"download {name}: content differs")
                    count("file_download")
                elif k < 0.87:
                    # Intended refusal: a write with a stale sha256.
                    s, d, _ = op().call("POST", f"/v1/sessions/{sid}/tools/write_file",
                                            {"path": name, "content": "x", "expectedSha256": "0" * 64})
                    v = json.loads(d) if s == 200 else None
                    if v and not v.get("ok") and v["error"]["kind"] == "stale_file":
                        refused("stale_file")
                    else:
                        error(f"stale write not refused: {s} {d[:200]!r}")
                elif k < 0.89:
                    # Intended refusal: no token.
                    s, d, _ = Client(None).call("GET", "/v1/sessions")
                    if s == 401:
                        refused("unauthorized")
                    else:
                        error(f"no token: {s}")
                else:
                    s, d, _ = op().call("GET", f"/v1/sessions/{sid}/changes")
                    expect("session_changes", s, d)
            except Exception as e:  # noqa: BLE001 - every failure is counted
                error(f"agent {n}: {type(e).__name__}: {e}")
                time.sleep(0.5)
        s, d, _ = op().call("DELETE", f"/v1/sessions/{sid}")
        expect("session_end", s, d, (200, 204))


def scoped():
    """A scoped session reading out of its scope: refused every time, as documented."""
    sid, st = new_session("scoped", scoped=True)
    ws = os.path.join(args.workspaces, "scoped")
    os.makedirs(os.path.join(ws, "secret"), exist_ok=True)
    open(os.path.join(ws, "secret", "key.txt"), "w").write("key\n")
    cl = Client(st)
    while not stop.is_set():
        s, d, _ = cl.call("POST", "/v1/file/read", {"file": "secret/key.txt"})
        v = json.loads(d) if s == 200 else None
        if v and not v["success"] and v["data"]["error_type"] == "permission_denied":
            refused("permission_denied")
        else:
            error(f"out-of-scope read: {s} {d[:200]!r}")
        file_op(cl, "write", {"file": "pub/ok.txt", "content": str(time.time())})
        time.sleep(0.5)


def watcher():
    """A watcher per round on a live session, polled until the session goes, then another."""
    while not stop.is_set():
        sid, st = new_session(f"watched-{uuid.uuid4().hex[:6]}")
        cl = Client(st)
        s, d, _ = cl.call("POST", "/v1/file/watch", {"path": ""})
        v = expect("watch_create", s, d, (201,))
        if v is None:
            time.sleep(1)
            continue
        wid = v["data"]["watcher_id"]
        cursor = 0
        until = time.time() + 90
        i = 0
        while not stop.is_set() and time.time() < until:
            file_op(cl, "write", {"file": f"w/f{i % 50}.txt", "content": "x" * (i % 500)})
            i += 1
            s, d, _ = cl.call("POST", f"/v1/file/watch/{wid}/poll", {"cursor": cursor, "limit": 1000, "timeout": 1})
            v = expect("watch_poll", s, d)
            if v:
                v = v.get("data", v)
                cursor = v["cursor"]
                count("watch_events", len(v["events"]))
        s, d, _ = op().call("DELETE", f"/v1/sessions/{sid}")
        expect("session_end", s, d, (200, 204))


def mcp():
    """MCP clients: a new MCP session now and then (most never closed, as clients do), calls."""
    sid, st = new_session("mcp")
    cl = Client(st)
    hdr = {"Accept": "application/json, text/event-stream"}
    sessions = []
    while not stop.is_set():
        s, d, r = cl.call("POST", "/v1/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}}, hdr)
        if expect("mcp_initialize", s, d) is None and s != 200:
            time.sleep(1)
            continue
        m = r.getheader("mcp-session-id")
        sessions.append(m)
        h = dict(hdr, **{"Mcp-Session-Id": m, "MCP-Protocol-Version": "2025-06-18"})
        cl.call("POST", "/v1/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, h)
        for _ in range(5):
            s, d, _ = cl.call("POST", "/v1/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                  "params": {"name": "list_directory", "arguments": {"path": ""}}}, h)
            expect("mcp_call", s, d)
        time.sleep(0.2)


def sample():
    rss = []
    start = time.time()
    while not stop.is_set():
        try:
            status = open(f"/proc/{args.pid}/status").read()
            field = lambda name: int([l for l in status.splitlines() if l.startswith(name)][0].split()[1])
            # Anonymous memory is the server's own; file-backed pages are the manifest's memory
            # map (SQLite's mmap), which grows with the manifest and the kernel may drop.
            rss.append((round(time.time() - start), field("VmRSS:"), field("RssAnon:"), field("RssFile:")))
        except OSError as e:
            error(f"sampling RSS: {e}")
        # The operator's request and /healthz, timed: answered within a second whatever sessions do.
        t = time.time()
        s, d, _ = Client(None).call("GET", "/healthz")
        ms = (time.time() - t) * 1000
        with lock:
            counts["healthz_max_ms"] = max(counts.get("healthz_max_ms", 0), round(ms))
        t = time.time()
        s2, d2, _ = op().call("GET", "/v1/sessions")
        ms = (time.time() - t) * 1000
        with lock:
            counts["operator_max_ms"] = max(counts.get("operator_max_ms", 0), round(ms))
        if s != 200 or s2 != 200:
            error(f"healthz {s} / operator {s2}")
        stop.wait(10)
    return rss


def guarded(f, *a):
    """Runs `f` until the soak stops, counting what it raises and starting it again."""
    def run():
        while not stop.is_set():
            try:
                f(*a)
            except Exception as e:  # noqa: BLE001 - every failure is counted
                error(f"{f.__name__}: {type(e).__name__}: {e}")
                time.sleep(1)
    return run


threads = [threading.Thread(target=guarded(agent, i), daemon=True) for i in range(args.agents)]
threads += [threading.Thread(target=guarded(f), daemon=True) for f in (scoped, watcher, mcp)]
rss_box = {}
sampler = threading.Thread(target=lambda: rss_box.update(rss=sample()), daemon=True)
sampler.start()
for t in threads:
    t.start()
time.sleep(args.seconds)
stop.set()
for t in threads:
    t.join(timeout=180)
sampler.join(timeout=30)
rss = rss_box.get("rss", [])
warm = [r for r in rss if r[0] >= min(300, args.seconds // 3)]
summary = {
    "seconds": args.seconds,
    "counts": counts,
    "refusals": refusals,
    "errors": errors,
    "rss_kib_first": rss[0][1] if rss else None,
    "rss_kib_after_warmup_min": min(r[1] for r in warm) if warm else None,
    "rss_kib_after_warmup_max": max(r[1] for r in warm) if warm else None,
    "anon_kib_after_warmup_min": min(r[2] for r in warm) if warm else None,
    "anon_kib_after_warmup_max": max(r[2] for r in warm) if warm else None,
    "file_kib_after_warmup_max": max(r[3] for r in warm) if warm else None,
    "rss_kib_last": rss[-1][1] if rss else None,
    "rss_samples": rss,
}
json.dump(summary, open(args.out, "w"))
print(json.dumps({k: v for k, v in summary.items() if k != "rss_samples"}, indent=1))
