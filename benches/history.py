#!/usr/bin/env python3
"""An agent's long session against git (issue 38, item 1): repository growth for the same edits.

A workspace of source files (20 of this project's own at a pinned commit, plus its 66 KB
`tests/file_api.rs` unless `--files 20`) is edited EDITS times, one line inserted per edit: half
of the edits go to the big file when there is one, the rest round-robin over the others. trove
makes each edit through its tool path (`trove tool edit_file` in a session, the stale-file
protocol included) and snapshots the workspace every 20 edits; git gets the same edit written to
its own copy and a commit per edit. Printed: each side's growth over its state right after the
first snapshot / the first commit (packed by `git gc`), before and after `trove gc` / `git gc`,
and the ratio.

With `--via write` the edits are written to the files directly (as an agent's shell command would)
and only the snapshots store them.

With `--bucket HOST:PORT` the repository is in a bucket on the S3 server there (one that takes
unsigned requests for buckets and listings, as the tests' moto does): its growth is the bytes of
the objects under its prefix (sealed packs and log segments), the host's cache directory apart;
`trove gc` is skipped (a bucket refuses it).

With `--layout log` the repository is a directory keeping its manifest as a record log (`trove
init --layout log`): its growth is the directory's (config, packs, log segments, signing key),
and the replica of the log in the host's cache directory is printed apart.

Usage: benches/history.py [--edits N] [--files 20|21] [--snapshot-every N] [--via tool|write]
[--bucket HOST:PORT | --layout sqlite|log] (release build: cargo build --release)
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
TROVE = os.environ.get("TROVE") or os.path.join(ROOT, "target", "release", "trove")
# Sources as they were at a fixed commit, so every sitting edits the same bytes.
COMMIT = "076bf9f"
SMALL = """src/ops/audit/proof.rs src/cli/commands/grep.rs src/cli/mod.rs src/fs/notify.rs src/fs/lock.rs
src/server/guard.rs src/cli/commands/demo.rs src/cli/commands/export.rs src/cli/commands/check.rs
src/model/snapshot.rs src/cli/logging.rs src/cli/commands/gc.rs src/ops/workspace.rs src/cli/format.rs
src/ops/audit/mod.rs src/cli/commands/mcp.rs src/lib.rs src/ops/check/affected.rs src/tools/edit.rs
src/server/auth.rs""".split()
BIG = "tests/file_api.rs"


def du(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def bucket_bytes(endpoint, bucket, prefix):
    """The bytes of every object under `prefix` in `bucket`, by ListObjectsV2 (unsigned)."""
    total, token = 0, None
    while True:
        url = "http://%s/%s?list-type=2&prefix=%s/" % (endpoint, bucket, prefix)
        if token:
            url += "&continuation-token=" + urllib.parse.quote(token)
        root = ET.fromstring(urllib.request.urlopen(url).read())
        ns = {"s3": root.tag.split("}")[0].strip("{")} if root.tag.startswith("{") else {}
        q = (lambda t: "s3:" + t) if ns else (lambda t: t)
        for c in root.findall(q("Contents"), ns):
            total += int(c.find(q("Size"), ns).text)
        if (root.find(q("IsTruncated"), ns).text or "false") != "true":
            return total
        token = root.find(q("NextContinuationToken"), ns).text


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def edit(text, rng, k):
    """The file with one comment line inserted before a line that occurs once: (old, new) text."""
    lines = text.split("\n")
    while True:
        i = rng.randrange(len(lines) - 1)
        if lines[i].strip() and text.count(lines[i] + "\n") == 1:
            return lines[i] + "\n", "    // edit %d: keep this in range\n%s\n" % (k, lines[i])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=200)
    ap.add_argument("--files", type=int, default=21, choices=[20, 21])
    ap.add_argument("--snapshot-every", type=int, default=20)
    ap.add_argument("--via", default="tool", choices=["tool", "write"],
                    help="edit through `trove tool edit_file` (default), or write the file directly so that only snapshots store it")
    ap.add_argument("--bucket", help="HOST:PORT of an S3 server: keep the repository in a bucket there")
    ap.add_argument("--layout", default="sqlite", choices=["sqlite", "log"],
                    help="how a repository in a directory keeps its manifest (trove init --layout)")
    args = ap.parse_args()
    if not os.access(TROVE, os.X_OK):
        sys.exit("needs %s: cargo build --release" % TROVE)
    tmp = tempfile.mkdtemp()
    try:
        ws, gitws, repo = (os.path.join(tmp, n) for n in ("ws", "git", "repo"))
        names = SMALL + ([BIG] if args.files == 21 else [])
        for d in (ws, gitws):
            for n in names:
                p = os.path.join(d, n)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "wb") as f:
                    f.write(subprocess.run(["git", "-C", ROOT, "show", "%s:%s" % (COMMIT, n)], check=True, capture_output=True).stdout)
        # The node-local cache (not part of the repository, so not in its growth) beside it.
        env = dict(os.environ, TROVE_REPO=repo, TROVE_CACHE_DIR=os.path.join(tmp, "cache"))
        size = lambda: du(repo)
        if args.bucket:
            bucket = "history-%d" % os.getpid()
            urllib.request.urlopen(urllib.request.Request("http://%s/%s" % (args.bucket, bucket), method="PUT")).read()
            env.update(TROVE_REPO="s3://%s/repo" % bucket, TROVE_PASSWORD="bench", AWS_ENDPOINT_URL="http://" + args.bucket,
                       AWS_ALLOW_HTTP="true", AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")
            size = lambda: bucket_bytes(args.bucket, bucket, "repo")
        run([TROVE, "init"] + ([] if args.bucket else ["--layout", args.layout]), env=env)
        sid = json.loads(run([TROVE, "--json", "session", "create", "--dir", ws, "--workspace", "hist", "--persistent", "--ttl", "86400"], env=env))["id"]
        genv = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@b",
                    GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
        run(["git", "init", "-q", gitws], env=genv)
        run(["git", "-C", gitws, "add", "-A"], env=genv)
        run(["git", "-C", gitws, "commit", "-qm", "start"], env=genv)
        run(["git", "-C", gitws, "gc", "-q"], env=genv)
        run([TROVE, "snapshot", "--workspace", "hist", ws], env=env)
        base_trove, base_git = size(), du(os.path.join(gitws, ".git"))
        rng = random.Random(38)
        for k in range(args.edits):
            n = BIG if (args.files == 21 and k % 2 == 0) else SMALL[(k if args.files == 20 else k // 2) % len(SMALL)]
            with open(os.path.join(ws, n)) as f:
                text = f.read()
            old, new = edit(text, rng, k)
            sha = hashlib.sha256(text.encode()).hexdigest()
            if args.via == "tool":
                call = {"path": n, "expectedSha256": sha, "edits": [{"oldText": old, "newText": new}]}
                run([TROVE, "tool", "edit_file", "--session", sid, json.dumps(call)], env=env)
            else:
                # An edit trove does not see (an agent's shell command): only snapshots store it.
                with open(os.path.join(ws, n), "w") as f:
                    f.write(text.replace(old, new, 1))
            with open(os.path.join(gitws, n), "w") as f:
                f.write(text.replace(old, new, 1))
            run(["git", "-C", gitws, "commit", "-qam", "edit %d" % k], env=genv)
            if (k + 1) % args.snapshot_every == 0:
                run([TROVE, "snapshot", "--workspace", "hist", ws], env=env)
        # The two trees agree, so both stored the same history.
        for n in names:
            with open(os.path.join(ws, n), "rb") as a, open(os.path.join(gitws, n), "rb") as b:
                assert a.read() == b.read(), n
        grow_trove, grow_git = size() - base_trove, du(os.path.join(gitws, ".git")) - base_git
        if not args.bucket:
            run([TROVE, "gc"], env=env)
        run(["git", "-C", gitws, "gc", "-q"], env=genv)
        gc_trove, gc_git = size() - base_trove, du(os.path.join(gitws, ".git")) - base_git
        total_git = du(os.path.join(gitws, ".git"))
        print("%d edits over %d files (%s) through %s, a snapshot every %d" % (args.edits, len(names), "one of 66 KB" if args.files == 21 else "none over 12 KB", "edit_file" if args.via == "tool" else "direct writes", args.snapshot_every))
        print("growth before gc: trove %d B, git %d B (loose objects)" % (grow_trove, grow_git))
        print("growth after gc:  trove %d B, git %d B; trove/git %.2f" % (gc_trove, gc_git, gc_trove / max(gc_git, 1)))
        print("whole repository after gc: trove %d B, git %d B" % (size(), total_git))
        if args.bucket or args.layout == "log":
            print("this host's replica of the log (cache directory, not in the repository): %d B" % du(os.path.join(tmp, "cache")))
    finally:
        if os.environ.get("KEEP"):
            print("kept in", tmp)
        else:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
