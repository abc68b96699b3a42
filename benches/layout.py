#!/usr/bin/env python3
"""A directory repository of each layout (`trove init --layout sqlite|log`), timed side by side.

One workspace of FILES small files with a session on it in each repository; after a first
snapshot, each measure runs its command on the SQLite layout and on the log layout in turn,
PAIRS times, whole processes timed from outside, and prints both medians and the median of the
pair-by-pair ratios (log / sqlite):

- a no-change snapshot of the workspace;
- one `trove tool edit_file` (a line inserted; the stale-file hash read first, not timed);
- `trove snapshots` (open and list);
- a new host's first command (`trove snapshots` with an empty cache directory): the log layout
  replays its log, the SQLite one opens its file; after the edits above.

Usage: benches/layout.py [FILES] [PAIRS] (release build: cargo build --release)
"""
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TROVE = os.environ.get("TROVE") or os.path.join(HERE, "..", "target", "release", "trove")


def run(cmd, env):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def timed(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def main():
    files = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    tmp = tempfile.mkdtemp()
    try:
        sides = {}
        for layout in ("sqlite", "log"):
            ws = os.path.join(tmp, "ws-" + layout)
            for i in range(files):
                d = os.path.join(ws, "d%03d" % (i // 100))
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "f%05d.txt" % i), "w") as f:
                    f.write("file %d\n" % i * 20)
            with open(os.path.join(ws, "notes.txt"), "w") as f:
                f.write("start\nend\n")
            env = dict(os.environ, TROVE_REPO=os.path.join(tmp, "repo-" + layout),
                       TROVE_CACHE_DIR=os.path.join(tmp, "cache-" + layout))
            run([TROVE, "init", "--layout", layout], env)
            sid = json.loads(run([TROVE, "--json", "session", "create", "--dir", ws, "--workspace", "w", "--persistent"], env))["id"]
            run([TROVE, "snapshot", "--workspace", "w", ws], env)
            sides[layout] = (ws, env, sid)

        def edit_cmd(layout, k):
            ws, env, sid = sides[layout]
            with open(os.path.join(ws, "notes.txt"), "rb") as f:
                sha = hashlib.sha256(f.read()).hexdigest()
            call = {"path": "notes.txt", "expectedSha256": sha,
                    "edits": [{"oldText": "end\n", "newText": "edit %d\nend\n" % k}]}
            return [TROVE, "tool", "edit_file", "--session", sid, json.dumps(call)], env

        def fresh_cmd(layout, k):
            ws, env, sid = sides[layout]
            return [TROVE, "snapshots"], dict(env, TROVE_CACHE_DIR=os.path.join(tmp, "new-host-%s-%d" % (layout, k)))

        measures = [
            ("no-change snapshot", lambda layout, k: ([TROVE, "snapshot", "--workspace", "w", sides[layout][0]], sides[layout][1])),
            ("one edit_file", edit_cmd),
            ("snapshots (open and list)", lambda layout, k: ([TROVE, "snapshots"], sides[layout][1])),
            ("a new host's first command", fresh_cmd),
        ]
        print("%d files, %d pairs, each pair sqlite then log" % (files, pairs))
        for name, make in measures:
            times = {"sqlite": [], "log": []}
            for k in range(pairs + 1):
                for layout in ("sqlite", "log"):
                    cmd, env = make(layout, k)
                    t = timed(cmd, env)
                    if k > 0:  # the first pair warms up
                        times[layout].append(t)
            ratios = [b / a for a, b in zip(times["sqlite"], times["log"])]
            print("%-28s sqlite %7.1f ms  log %7.1f ms  log/sqlite %.2f (%.2f-%.2f)" % (
                name, statistics.median(times["sqlite"]) * 1e3, statistics.median(times["log"]) * 1e3,
                statistics.median(ratios), min(ratios), max(ratios)))
        for layout in ("sqlite", "log"):
            print("%s: log segments %d" % (layout, len(os.listdir(os.path.join(tmp, "repo-" + layout, "log")))
                                           if layout == "log" else 0))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
