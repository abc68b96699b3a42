#!/usr/bin/env python3
"""Full restore against `zstd -d | tar -x` of the same tree (issue 18, item 5), run alternately.

trove makes every restored byte durable before it returns (`syncfs`); tar leaves its writes to
the kernel. Run back to back, each would pay for the other's dirty pages (trove's sync writes
tar's output too), so `sync` runs, untimed, before every timed run: each command is charged
for its own work only. Prints the median of the pair-by-pair wall and CPU ratios (min-max) and
each side's median wall, CPU and peak memory.

Usage: benches/restore_vs_tar.py [PAIRS] DIR...   (release build; zstd, GNU tar)
Each DIR is snapshotted into a fresh repository (`--no-default-excludes`) and archived with
`tar | zstd -3`; restores go to scratch directories, all deleted once every tree is measured:
ext4 without a journal does not reuse an inode freed in the last one to six minutes, and until
then every file creation scans past the freed ones (`recently_deleted` in a kernel profile),
slowing trove and tar alike by 3-10x. For the same reason, start a sitting six minutes after
deleting many files.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TROVE = os.environ.get("TROVE") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "trove")


def timed(cmd):
    """Wall seconds, CPU seconds and peak RSS (MiB) of `sh -c cmd`, after an untimed sync."""
    subprocess.run(["sync"], check=True)
    start = time.monotonic()
    child = subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    if status != 0:
        sys.exit(f"failed ({status}): {cmd}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def spread(xs):
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main():
    args = sys.argv[1:]
    pairs = int(args.pop(0)) if args and args[0].isdigit() else 9
    if not args:
        sys.exit(__doc__)
    works = []
    try:
        for tree in args:
            work = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
            works.append(work)
            repo, archive, out = f"{work}/repo", f"{work}/tree.tar.zst", f"{work}/out"
            os.mkdir(out)
            subprocess.run([TROVE, "init", "--repo", repo], check=True, stdout=subprocess.DEVNULL)
            snap = subprocess.run(
                [TROVE, "snapshot", "--repo", repo, "--no-default-excludes", "--workspace", "bench", "--json", tree],
                check=True, capture_output=True, text=True)
            snap_id = json.loads(snap.stdout)["id"]
            subprocess.run(f"tar -C '{tree}' -cf - . | zstd -3 -T0 -q -o '{archive}'", shell=True, check=True)
            a = f"'{TROVE}' restore --repo '{repo}' --to \"$(mktemp -u -p '{out}')\" {snap_id} >/dev/null"
            b = f"d=$(mktemp -d -p '{out}'); zstd -d -q -c '{archive}' | tar -C \"$d\" -xf -"
            timed(a), timed(b)  # warm-up, not counted
            runs = [(timed(a), timed(b)) for _ in range(pairs)]
            wall = [x[0] / y[0] for x, y in runs]
            cpu = [x[1] / y[1] for x, y in runs]
            print(f"{tree}: {pairs} pairs, sync before each run")
            for name, side in (("trove restore", 0), ("zstd -d | tar -x", 1)):
                print(f"  {name}: wall {spread([r[side][0] for r in runs])} s, cpu {spread([r[side][1] for r in runs])} s, "
                      f"peak {statistics.median([r[side][2] for r in runs]):.1f} MiB")
            print(f"  trove / tar: wall {spread(wall)}, cpu {spread(cpu)}")
    finally:
        for work in works:
            shutil.rmtree(work, ignore_errors=True)


main()
