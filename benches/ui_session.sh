#!/usr/bin/env bash
# The review page of a big session (issue 41: a session of 10,000 files with 50 changed and one
# 1 MB rewrite drawn in under 100 ms of server time): a release `trove serve`, a workspace of
# FILES small text files, a session in which 50 files get a line changed and one 1 MB file is
# rewritten, then ROUNDS loads of `/ui/sessions/{id}` and of `/ui/sessions`, each answer's
# `Server-Timing` printed and their median; then, with the browser test's Playwright and
# Chromium installed, the time Chromium takes to load and draw the session's page (navigation
# start to the load event, ROUNDS loads, the median), and the 1 MB diff's own page: its load,
# and the time from a click that opens the collapsed diff to the next frame drawn.
# Usage: benches/ui_session.sh [FILES] [ROUNDS] [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-10000}
rounds=${2:-21}
work=${3:-$(mktemp -d)}
. benches/server_env.sh
rm -rf "$work/repo" "$work/workspaces"
ws=$work/workspaces/big
python3 - "$ws" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"d{i // 100:03}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:05}.txt"), "w") as f:
        f.write("".join(f"line {j} of file {i}\n" for j in range(40)))
with open(os.path.join(root, "big.txt"), "w") as f:
    f.write("".join(f"row {j} of the table, version one\n" for j in range(30000)))
PY
"$trove" --repo "$work/repo" init >/dev/null
start_server
auth="Authorization: Bearer $token"
id=$(new_session big)
python3 - "$ws" "$files" <<'PY'
import sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(0, n, max(n // 50, 1)):
    p = f"{root}/d{i // 100:03}/f{i:05}.txt"
    lines = open(p).read().splitlines(True)
    lines[20] = "a changed line\n"
    open(p, "w").write("".join(lines))
with open(f"{root}/big.txt", "w") as f:
    f.write("".join(f"row {j} of the table, version two\n" for j in range(30000)))
PY
echo "big.txt: $(stat -c %s "$ws/big.txt") bytes; session $id"
cookie=$(curl -s -i -X POST -d "token=$token" "http://127.0.0.1:$port/ui/login" |
    sed -n 's/^set-cookie: trove_ui=\([0-9a-f]*\);.*/\1/p')
timing() { # URL -> the server's milliseconds
    curl -s -o /dev/null -D - -b "trove_ui=$cookie" "$1" | sed -n 's/^server-timing: total;dur=\([0-9.]*\).*/\1/p'
}
for page in "sessions/$id" "sessions/$id?file=big.txt" "sessions"; do
    url="http://127.0.0.1:$port/ui/$page"
    size=$(curl -s -b "trove_ui=$cookie" "$url" | wc -c)
    ms=()
    for _ in $(seq "$rounds"); do ms+=("$(timing "$url")"); done
    printf '/ui/%s (%s bytes): %s\n' "${page/$id/{id\}}" "$size" "${ms[*]}"
    printf '  median %s ms\n' "$(printf '%s\n' "${ms[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
done
py=target/playwright-1.56.0/bin/python
if [ -x "$py" ] && [ -x /usr/bin/chromium ]; then
    "$py" - "http://127.0.0.1:$port" "$token" "$id" "$rounds" <<'PY'
import statistics, sys
from playwright.sync_api import sync_playwright
base, token, sid, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
with sync_playwright() as p:
    b = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=args)
    page = b.new_page()
    page.goto(base + "/ui/")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_load_state()
    ms = []
    for _ in range(rounds):
        page.goto(f"{base}/ui/sessions/{sid}", wait_until="load")
        ms.append(page.evaluate("() => { const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime; }"))
    print("browser, the session's page loaded and drawn (ms):", " ".join(f"{m:.0f}" for m in ms))
    print(f"  median {statistics.median(ms):.0f} ms")
    # The 1 MB rewrite's own page: loaded (its diff collapsed), then opened by a click, timed
    # from the click to the first frame drawn after it (the layout of every row).
    loads, opens = [], []
    for _ in range(rounds):
        page.goto(f"{base}/ui/sessions/{sid}?file=big.txt", wait_until="load")
        loads.append(page.evaluate("() => { const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime; }"))
        opens.append(page.evaluate("""() => new Promise(done => {
            const d = document.querySelector('section.card details');
            const t0 = performance.now();
            d.querySelector('summary').click();
            requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
        })"""))
        rows = page.locator("section.card tr.add").count()
    print(f"browser, the 1 MB diff's page ({rows} added rows) loaded (ms):", " ".join(f"{m:.0f}" for m in loads))
    print(f"  median {statistics.median(loads):.0f} ms")
    print("browser, the 1 MB diff opened, click to the next frame (ms):", " ".join(f"{m:.0f}" for m in opens))
    print(f"  median {statistics.median(opens):.0f} ms")
    b.close()
PY
fi
