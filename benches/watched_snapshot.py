#!/usr/bin/env python3
"""Snapshots of a running session over HTTP against `git status --porcelain` (issue 38, item 3).

A workspace of FILES small source files (100 to a directory, directories under 10 parents, all
older than the racy window) is served by a release `trove serve`, a session runs on it, and
`git` holds a commit of the same files (its directory outside the workspace, so the snapshot
does not see it). Then ROUNDS pairs of each kind, the two commands alternating (which goes first
flips each pair), each timed as a whole process (`curl` asking `POST /v1/sessions/{id}/snapshots`,
`git status --porcelain`):

  no-change        nothing written since the last snapshot
  one-file-changed one line appended to one file (a different one each pair) just before

Printed: each pair, then the median of the pair-by-pair ratios (trove / git) with its range,
and whether the server's log says every snapshot came from its change feed.

Usage: benches/watched_snapshot.py [--files N] [--rounds N] [--work DIR]
(release build: cargo build --release)
"""
import argparse
import json
import os
import random
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TROVE = os.environ.get("TROVE") or os.path.join(HERE, "..", "target", "release", "trove")


def make_tree(ws, files):
    rnd = random.Random(38)
    old = time.time() - 3600
    for i in range(files):
        d = os.path.join(ws, f"pkg{i // 10000}", f"mod{(i // 100) % 100}")
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        p = os.path.join(d, f"file{i}.rs")
        with open(p, "w") as f:
            f.write("".join(f"fn f{i}_{k}() -> u64 {{ {rnd.randrange(1 << 30)} }}\n" for k in range(rnd.randrange(3, 12))))
        os.utime(p, (old, old))


def timed(cmd, env=None):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--work")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="watched-")
    wss = os.path.join(work, "workspaces")
    ws = os.path.join(wss, "bench")
    repo = os.path.join(work, "repo")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(ws)
    make_tree(ws, a.files)
    genv = dict(os.environ, GIT_DIR=os.path.join(work, "git"), GIT_WORK_TREE=ws)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "tree"]):
        subprocess.run(cmd, check=True, env=genv, stdout=subprocess.DEVNULL)
    subprocess.run([TROVE, "--repo", repo, "init"], check=True, stdout=subprocess.DEVNULL)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    token = "bench-" + secrets.token_hex(8)
    log = open(os.path.join(work, "server.log"), "w")
    server = subprocess.Popen(
        [TROVE, "--repo", repo, "serve", "--listen", f"127.0.0.1:{port}", "--workspaces", wss, "--log-level", "debug"],
        env=dict(os.environ, TROVE_API_TOKEN=token, TROVE_CACHE_DIR=os.path.join(work, "cache")),
        stdout=subprocess.DEVNULL, stderr=log)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(base + "/healthz")
                break
            except OSError:
                time.sleep(0.05)
        req = urllib.request.Request(base + "/v1/sessions", data=b'{"workspace": "bench"}', method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
        sid = json.load(urllib.request.urlopen(req))["id"]
        snap = ["curl", "-sf", "-X", "POST", "-H", f"Authorization: Bearer {token}", f"{base}/v1/sessions/{sid}/snapshots"]
        # The first reads the tree whole and starts the feed; git's first status fills its index.
        first = timed(snap)
        timed(["git", "status", "--porcelain"], genv)
        print(f"{a.files} files; first snapshot through the server (feed started): {first * 1000:.1f} ms")
        paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(ws) for f in fs)
        rnd = random.Random(7)
        for kind in ("no-change", "one-file-changed"):
            ratios, ts, gs = [], [], []
            for i in range(a.rounds):
                if kind == "one-file-changed":
                    with open(rnd.choice(paths), "a") as f:
                        f.write(f"// edit {i}\n")
                if i % 2 == 0:
                    t, g = timed(snap), timed(["git", "status", "--porcelain"], genv)
                else:
                    g, t = timed(["git", "status", "--porcelain"], genv), timed(snap)
                ratios.append(t / g)
                ts.append(t)
                gs.append(g)
                print(f"  {kind} pair {i + 1}: trove {t * 1000:.1f} ms, git {g * 1000:.1f} ms, ratio {t / g:.3f}")
            print(f"{kind}: trove median {statistics.median(ts) * 1000:.1f} ms, git status median "
                  f"{statistics.median(gs) * 1000:.1f} ms; median pair ratio {statistics.median(ratios):.3f} "
                  f"({min(ratios):.3f}-{max(ratios):.3f})")
    finally:
        server.terminate()
        server.wait()
        log.close()
    logged = open(os.path.join(work, "server.log")).read()
    fed = logged.count("snapshot taken from the change feed")
    print(f"snapshots taken from the change feed: {fed} of {1 + 2 * a.rounds}")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
