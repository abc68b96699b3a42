"""The review pages as a reviewer uses them, in Chromium driven by Playwright, JavaScript off.

Run by tests/ui.rs, which starts the server and the agent's session and passes, in the
environment: BASE_URL, UI_TOKEN (an operator token), REVOCABLE_TOKEN and REVOCABLE_ID (a token
this script revokes), SID (the session), CHROMIUM, TROVE_BIN and REPO (to revoke with the CLI).
Any failed check raises, and the process exits non-zero.
"""

import hashlib
import http.server
import json
import os
import subprocess
import threading
import urllib.request

from playwright.sync_api import sync_playwright

BASE = os.environ["BASE_URL"]
TOKEN = os.environ["UI_TOKEN"]
SID = os.environ["SID"]

# The machine's closed network: no background requests of the browser's own.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


SHOTS = os.environ.get("TROVE_SCREENSHOTS")


def shot(page, name):
    """With TROVE_SCREENSHOTS set, the page as the manual shows it (docs/src/images/)."""
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, name + ".png"), full_page=False)


# Every page the walk opened, for the accessibility check at its end.
SEEN = []


def accessible(browser, cookies):
    """axe-core on every page seen, light and dark: no serious or critical WCAG 2 A/AA violation.
    It runs as a script the page itself would refuse (its CSP allows none), so this context
    bypasses the policy; the pages themselves are the same."""
    axe = open(os.environ["AXE"]).read()
    found = []
    pages = [u for u in dict.fromkeys(SEEN) if u.startswith(BASE) and not u.endswith(("/restore", "/login", "/logout"))]
    for scheme in ["light", "dark"]:
        ctx = browser.new_context(bypass_csp=True, color_scheme=scheme)
        ctx.add_cookies(cookies)
        page = ctx.new_page()
        for url in pages:
            page.goto(url)
            page.add_script_tag(content=axe)
            result = page.evaluate(
                "async () => await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}})"
            )
            for v in result["violations"]:
                if v["impact"] in ("serious", "critical"):
                    nodes = [n["target"] for n in v["nodes"][:3]]
                    found.append(f"{scheme} {url}: {v['id']} ({v['impact']}): {v['help']} at {nodes}")
        ctx.close()
    check(not found, "accessibility:\n" + "\n".join(found))
    check(len(pages) >= 8, f"every kind of page was checked: {pages}")


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def log_in(page, token):
    page.goto(BASE + "/ui/")
    page.fill("input[type=password]#token", token)
    page.click("button[type=submit]")
    page.wait_for_load_state()


# What the other site's forms carry: the real form token once the script has read it, as a
# page that stole it would.
STOLEN = {"formToken": "guessed"}


class OtherSite(http.server.BaseHTTPRequestHandler):
    """Another site (another port of the same host): pages whose forms post to trove."""

    def do_GET(self):
        forms = {
            "/restore": (f"/ui/sessions/{SID}/restore", {"formToken": STOLEN["formToken"], "id": STOLEN.get("id", "")}),
            "/login": ("/ui/login", {"token": TOKEN}),
            "/logout": ("/ui/logout", {"formToken": STOLEN["formToken"]}),
        }
        action, fields = forms.get(self.path, forms["/restore"])
        inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
        body = f"""<!doctype html><title>elsewhere</title>
<form method="post" action="{BASE}{action}">{inputs}<button type="submit">Win a prize</button></form>""".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def posted_from(page, url, path):
    """Opens `url` (another site's page) and sends its form; the answer to the post."""
    page.goto(url)
    with page.expect_response(lambda r: r.url.endswith(path)) as answer:
        page.click("button")
        page.wait_for_load_state()
    return answer.value


def main():
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OtherSite)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{site.server_address[1]}/"

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ["CHROMIUM"], headless=True, args=ARGS)
        ctx = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 800})
        page = ctx.new_page()
        # Every page loaded, by URL (the big file's own page left out: thirty thousand rows).
        page.on("load", lambda: SEEN.append(page.url) if "file=" not in page.url else None)
        asked, console = [], []
        page.on("request", lambda r: asked.append(r.url))
        page.on("console", lambda m: console.append(m.text))

        # Not logged in: a page sends the browser to the login form, under a strict policy.
        resp = page.goto(BASE + "/ui/sessions")
        check(page.url == BASE + "/ui/", f"sent to log in, at {page.url}")
        check("default-src 'none'" in resp.headers["content-security-policy"], "a strict CSP")
        check(page.locator("input#token").get_attribute("type") == "password", "a password field")

        shot(page, "login")
        # A wrong token: refused, said so, no cookie.
        log_in(page, "not-a-token")
        check("not a live operator token" in page.content(), "a wrong token is refused")
        check(not ctx.cookies(), "no cookie for a wrong token")

        # The right one: the sessions, and a cookie that scripts cannot read and other sites
        # cannot send; the token itself is nowhere in the browser.
        log_in(page, TOKEN)
        check(page.url.startswith(BASE + "/ui/sessions"), f"the sessions after logging in, at {page.url}")
        cookies = ctx.cookies()
        check(len(cookies) == 1, f"one cookie: {cookies}")
        c = cookies[0]
        check(c["httpOnly"] and c["sameSite"] == "Strict" and c["path"] == "/ui", f"cookie attributes: {c}")
        check(TOKEN not in json.dumps(ctx.storage_state()), "the token is not stored in the browser")

        # The list: the session with what it changed and what it was refused.
        row = page.locator("table.sessions tbody tr", has=page.locator(f"a[href='/ui/sessions/{SID}']"))
        check(row.count() == 1, "the session is listed")
        text = row.inner_text()
        check("1 refused" in text, f"its refusal is counted: {text}")
        # Its totals are the command line's: every path, every line (not the first file's).
        listed = json.loads(os.environ["CHANGES"])["stats"]
        for n in [f"+{listed['linesAdded']}", f"−{listed['linesRemoved']}", str(listed["changed"])]:
            check(n in text, f"{n} in the list's row: {text}")
        check("ready" in text and "app" in text, f"its status and workspace: {text}")
        shot(page, "sessions")
        # Filters live in the URL.
        page.goto(BASE + "/ui/sessions?status=ended")
        check(page.locator(f"a[href='/ui/sessions/{SID}']").count() == 0, "a running session is not an ended one")
        check(page.locator("select#status option[selected]").inner_text() == "Ended", "the filter shown as chosen")
        page.goto(BASE + "/ui/sessions?status=running&workspace=app")
        page.click(f"a[href='/ui/sessions/{SID}']")
        page.wait_for_load_state()
        check(page.url == f"{BASE}/ui/sessions/{SID}", f"the session's page, at {page.url}")
        timing = page.goto(page.url).headers.get("server-timing", "")
        check(timing.startswith("total;dur="), f"the server's time is given: {timing!r}")

        auth_card = page.locator("section.card", has=page.locator("h2.path", has_text="src/auth.rs"))
        auth_card.scroll_into_view_if_needed()
        shot(page, "session")
        # The page says what `trove session changes --json` says: the same paths, each with the
        # same status, and the same totals.
        cli = json.loads(os.environ["CHANGES"])
        want = sorted(
            ((e["oldPath"] + " → " if e.get("oldPath") else "") + e["path"], e["status"]) for e in cli["entries"]
        )
        cards = page.locator("section.card")
        got = sorted(
            (c.locator("h2.path").inner_text(), c.locator("header .badge").first.inner_text())
            for c in cards.all()
        )
        check(len(want) >= 8 and got == want, f"the page's changes {got} are the command line's {want}")
        summary = page.locator("p.summary").inner_text()
        st = cli["stats"]
        for n, what in [(st["changed"], "changed"), (st["added"], "added"), (st["deleted"], "deleted")]:
            check(f"{n} {what}" in summary, f"{n} {what} in {summary!r}")
        check(f"+{st['linesAdded']}" in summary and f"−{st['linesRemoved']}" in summary, f"lines: {summary!r}")
        # A tree of the changed files, each with its status spelled out, not only coloured.
        tree = page.locator("nav.tree").inner_text()
        for path in ["src/auth.rs", "src/main.rs", "docs/table.txt", "logo.bin"]:
            check(path in tree, f"{path} in the tree: {tree}")
        auth = page.locator("section.card", has=page.locator("h2.path", has_text="src/auth.rs"))
        check("modified" in auth.locator("header").inner_text(), "the status in words")
        # A rename says where from, and a mode change says both modes.
        moved = page.locator("section.card", has=page.locator("h2.path", has_text="src/helpers.rs"))
        header = moved.locator("header").inner_text()
        check("renamed" in header and "src/util.rs → src/helpers.rs" in header, f"the rename: {header}")
        same = moved.locator("dl.facts").inner_text()
        check("content is the same" in same and moved.locator("table.diff").count() == 0, f"no empty diff: {same}")
        check(moved.locator("p.expand").count() == 0, "and nothing to expand")
        script = page.locator("section.card", has=page.locator("h2.path", has_text="deploy.sh"))
        mode = script.locator("span.mode").inner_text()
        check(mode.startswith("mode ") and "644 → " in mode and mode.endswith("755"), f"the mode change: {mode}")
        # The diff: the changed words marked, line numbers beside the code but not part of it.
        check(auth.locator("tr.add mark").inner_text() == "true", "the new word marked")
        check("8" in auth.locator("tr.del mark").inner_text(), "the old words marked")
        first = auth.locator("table.diff tr.ctx").first
        check(first.locator("td.n").first.get_attribute("data-n") == "1", "line numbers are given")
        check(not any(ch.isdigit() for ch in first.locator("td.n").first.inner_text()), "and not copied")
        check("edit_file" in auth.locator("details.who").inner_text(), "who changed it, shown")
        # Three lines of context, and every line on demand.
        lib = page.locator("section.card", has=page.locator("h2.path", has_text="src/lib.rs"))
        check(lib.locator("tr.ctx").count() == 6, f"3 lines of context each side: {lib.locator('tr.ctx').count()}")
        lib.locator("p.expand a").click()
        page.wait_for_load_state()
        check("expand=src%2Flib.rs" in page.url, f"the expanded file in the URL: {page.url}")
        lib = page.locator("section.card", has=page.locator("h2.path", has_text="src/lib.rs"))
        check(lib.locator("tr.ctx").count() == 19, "every other line of the file once expanded")
        check(lib.locator("p.expand").count() == 0, "and nothing more to expand")
        page.goto(BASE + f"/ui/sessions/{SID}")
        # Side by side: the line before on the left, after on the right, words marked.
        page.click("p.views a")
        page.wait_for_load_state()
        check("view=split" in page.url, f"side by side, in the URL: {page.url}")
        auth = page.locator("section.card", has=page.locator("h2.path", has_text="src/auth.rs"))
        changed = auth.locator("table.split tr", has=page.locator("td.del"))
        check(changed.count() == 1, f"one changed pair: {changed.all_inner_texts()}")
        check(changed.locator("td.del mark").inner_text() == "token.len() > 8", "the old words on the left")
        check(changed.locator("td.add mark").inner_text() == "true", "the new word on the right")
        page.goto(BASE + f"/ui/sessions/{SID}")
        auth = page.locator("section.card", has=page.locator("h2.path", has_text="src/auth.rs"))
        # A 1 MB rewrite: too long to draw with the others; it opens on a page of its own,
        # collapsed, and opens there whole.
        table = page.locator("section.card", has=page.locator("h2.path", has_text="docs/table.txt"))
        check("too long to draw with the others" in table.inner_text(), f"not drawn here: {table.inner_text()}")
        table.locator("p.open-alone a").click()
        page.wait_for_load_state()
        check("file=docs%2Ftable.txt" in page.url, f"its own page: {page.url}")
        check(page.locator("section.card").count() == 1, "with that file alone")
        details = page.locator("section.card details").first
        check(details.get_attribute("open") is None, "a large diff starts collapsed")
        check("Large diff" in details.locator("summary").inner_text(), "and says so")
        details.locator("summary").click()
        check(details.get_attribute("open") is not None, "and opens")
        check(page.locator("section.card tr.add").count() == 30000, "every added line is there once open")
        shot(page, "file")
        # A session that does not exist: a page that says so and what to do, not a bare status.
        missing = page.goto(BASE + "/ui/sessions/no-such-session")
        check(missing.status == 404, f"an unknown session is a 404: {missing.status}")
        said = page.locator("main").inner_text()
        check("no-such-session" in said, f"the error names the id: {said}")
        shot(page, "error")
        page.goto(BASE + f"/ui/sessions/{SID}")
        # Binary content: sizes and hashes instead of a diff.
        logo = page.locator("section.card", has=page.locator("h2.path", has_text="logo.bin"))
        check("Binary" in logo.inner_text() and "sha256" in logo.inner_text(), f"binary: {logo.inner_text()}")
        # The version before is in the repository (the session's start); the live one is not
        # stored yet, so it has no link.
        before = logo.locator("p.downloads a", has_text="before").get_attribute("href")
        check(logo.locator("p.downloads a", has_text="after").count() == 0, "no link to content not stored")
        got = ctx.request.get(BASE + before)
        check(got.body() == bytes([0, 1, 2, 3, 255, 0, 7]), f"the old version downloads: {got.status}")
        check("attachment" in got.headers["content-disposition"], "as a download")
        check(ctx.request.get(BASE + "/ui/content/" + "0" * 64).status == 404, "an unknown id is a 404")

        # The deleted file comes back from its card.
        main_rs = page.locator("section.card", has=page.locator("h2.path", has_text="src/main.rs"))
        check("deleted" in main_rs.locator("header").inner_text(), "the deletion in words")
        form = main_rs.locator("form.restore")
        check("Restore src/main.rs" in form.inner_text() and "file" in form.inner_text(), "what comes back")
        STOLEN["formToken"] = form.locator("input[name=formToken]").get_attribute("value")
        STOLEN["id"] = form.locator("input[name=id]").get_attribute("value")
        form.locator("button").click()
        page.wait_for_load_state()
        results = page.locator("section.results").inner_text()
        check("Restored" in results and "src/main.rs" in results, f"the outcome is shown: {results}")
        # Sent again (a reload, an old tab): refused, nothing changed.
        again = ctx.request.post(
            f"{BASE}/ui/sessions/{SID}/restore",
            form={"formToken": STOLEN["formToken"], "id": STOLEN["id"]},
            headers={"Origin": BASE},
        )
        check(again.status == 409 and "restored already" in again.text(), f"a second restore: {again.status}")

        # The trash: search, choose several, restore; every outcome shown.
        page.goto(BASE + "/ui/trash")
        listed = page.locator("table.trash").inner_text()
        for path in ["notes/a.md", "notes/b.md", "config.toml"]:
            check(path in listed, f"{path} in the trash: {listed}")
        check("src/main.rs" not in listed, "a restored item is not in the trash")
        page.goto(BASE + "/ui/trash?restored=yes")
        check("src/main.rs" in page.locator("table.trash").inner_text(), "but among the restored")
        shot(page, "trash")
        page.goto(BASE + "/ui/trash?prefix=notes")
        rows = page.locator("table.trash tbody tr")
        check(rows.count() == 2, f"the search: {rows.all_inner_texts()}")
        check(page.locator("input#prefix").get_attribute("value") == "notes", "the search shown")
        for box in page.locator("input[type=checkbox][name=id]").all():
            box.check()
        page.click("form.bulk button[type=submit]")
        page.wait_for_load_state()
        outcomes = page.locator("section.results li")
        check(outcomes.count() == 2 and all("Restored" in t for t in outcomes.all_inner_texts()), f"{outcomes.all_inner_texts()}")
        # The old config meets the new one: refused by default, nothing changed.
        page.locator("tr", has=page.locator("code", has_text="config.toml")).locator("input[type=checkbox]").check()
        page.click("form.bulk button[type=submit]")
        page.wait_for_load_state()
        refusal = page.locator("section.results li").inner_text()
        check("Not restored" in refusal and "already exists" in refusal, f"refused: {refusal}")
        # Rename: the old readme beside the new one; merge: the deleted directory's files into
        # the directory there now.
        for prefix, choice, said in [("readme.txt", "rename", "readme (restored).txt"), ("assets", "merge", "assets")]:
            page.goto(BASE + f"/ui/trash?prefix={prefix}")
            page.wait_for_load_state()
            boxes = page.locator("input[type=checkbox][name=id]")
            check(boxes.count() == 1, f"one item under {prefix}")
            boxes.first.check()
            page.check(f"input[name=onConflict][value={choice}]")
            page.click("form.bulk button[type=submit]")
            page.wait_for_load_state()
            done = page.locator("section.results li").inner_text()
            check("Restored" in done and said in done, f"{choice}: {done}")
        # The old config's preview: its content, and the file there now with the hash an
        # overwrite names.
        page.goto(BASE + "/ui/trash?prefix=config.toml")
        page.wait_for_load_state()
        page.locator("table.trash a", has_text="preview").first.click()
        page.wait_for_load_state()
        check("port = 3000" in page.locator("pre.preview").inner_text(), "the preview shows what comes back")
        shot(page, "trash-item")
        now = hashlib.sha256(b"port = 4000\n").hexdigest()
        check(page.locator("code.current").inner_text() == now, "the file there now, by hash")
        page.check("input[name=onConflict][value=overwrite]")
        page.click("form.restore-one button[type=submit]")
        page.wait_for_load_state()
        check("Restored" in page.locator("section.results").inner_text(), "overwritten, after seeing it")

        # The audit timeline: newest first, filters in the URL, a badge of what proves each
        # record, a permalink each, and the signed bundle to check offline.
        page.goto(BASE + "/ui/audit")
        timeline = page.locator("ol.timeline")
        shot(page, "audit")
        check("trash_restore" in timeline.inner_text(), "the restore is in the log")
        check(page.locator(".proof-verified").count() > 0, "records a checkpoint covers say so")
        check(page.locator(".proof-unsigned").count() > 0, "records after the last checkpoint say so")
        check(page.locator(".proof-failed").count() == 0, "nothing failed verification")
        page.goto(BASE + f"/ui/audit?session={SID}&outcome=stale_file")
        refused = page.locator("ol.timeline li")
        check(refused.count() == 1 and "write_file" in refused.inner_text(), f"filtered: {refused.all_inner_texts()}")
        check(page.locator("input#outcome").get_attribute("value") == "stale_file", "the filter shown")
        refused.locator("a.permalink").click()
        page.wait_for_load_state()
        check("/ui/audit/" in page.url and "stale_file" in page.locator("pre.record").inner_text(), "a record's own page")
        shot(page, "audit-record")
        # Following: with scripts on, a new record appears without a reload.
        live = browser.new_context()
        live.add_cookies(ctx.cookies())
        tail = live.new_page()
        tail.goto(BASE + "/ui/audit?follow=1")
        newest = int(tail.locator("ol.timeline li").first.get_attribute("id").split("-")[1])
        # A record's details, opened by the reader, stay open when the list is swapped.
        tail.locator(f"#seq-{newest} summary").click()
        made = urllib.request.Request(
            BASE + "/v1/sessions", data=b'{"workspace": "elsewhere"}', headers={"Authorization": "Bearer " + TOKEN}
        )
        urllib.request.urlopen(made).read()
        tail.locator(f"#seq-{newest + 1}").wait_for(timeout=15000)
        check("session_create" in tail.locator(f"#seq-{newest + 1}").inner_text(), "the new record, in place")
        check(tail.evaluate("() => performance.getEntriesByType('navigation').length") == 1, "without a reload")
        check(tail.locator(f"#seq-{newest} details").get_attribute("open") is not None, "opened details stay open")
        live.close()
        bundle = ctx.request.get(BASE + "/ui/audit/bundle")
        check(bundle.status == 200 and len(bundle.body()) > 100, f"the bundle downloads: {bundle.status}")
        check(bundle.headers["content-security-policy"].startswith("default-src 'none'"), "under the same policy")
        out = os.path.join(os.environ["WORK"], "audit.bundle")
        with open(out, "wb") as f:
            f.write(bundle.body())

        # A file's history, and an earlier version back over the agent's edit, after seeing both.
        page.goto(BASE + f"/ui/sessions/{SID}")
        page.locator("section.card", has=page.locator("h2.path", has_text="src/auth.rs")).locator("a.history").click()
        page.wait_for_load_state()
        versions = page.locator("table.history tbody tr")
        check(versions.count() == 1 and "added" in versions.inner_text(), f"its versions: {versions.all_inner_texts()}")
        shot(page, "history")
        versions.locator("a").last.click()
        page.wait_for_load_state()
        check("token.len() > 8" in page.locator("pre.preview").inner_text(), "the version's text")
        shot(page, "version")
        edited = hashlib.sha256(b"pub fn check(token: &str) -> bool {\n    true\n}\n").hexdigest()
        check(page.locator("code.current").inner_text() == edited, "the file now, by hash")
        page.click("form.restore-version button[type=submit]")
        page.wait_for_load_state()
        result = page.locator("section.results").inner_text()
        check("Restored" in result and "trash" in result, f"the version is back: {result}")
        # The same form again: the file is no longer the one it names, so nothing is written.
        form = {"formToken": STOLEN["formToken"], "path": "src/auth.rs", "expectedSha256": edited}
        versions = page.locator("table.history tbody tr")
        check("the file now" in versions.inner_text(), "the restored version is the file now")
        href = versions.locator("a").last.get_attribute("href")
        form["content"] = href.split("content=")[1]
        again = ctx.request.post(f"{BASE}/ui/sessions/{SID}/history/restore", form=form, headers={"Origin": BASE})
        check(again.status == 200 and "Not restored" in again.text(), f"a stale restore changes nothing: {again.status}")

        # Nothing was asked of anywhere but the server.
        check(all(u.startswith(BASE) for u in asked), f"only the server was asked: {set(asked)}")
        check(not any(TOKEN in u for u in asked), "the token is never in a URL")
        check(not [m for m in console if "Content Security Policy" in m], f"no CSP violation: {console}")

        # From this server's own origin but without the login's form token: 403.
        forged = ctx.request.post(
            f"{BASE}/ui/sessions/{SID}/restore", form={"formToken": "0" * 64, "id": STOLEN["id"]}, headers={"Origin": BASE}
        )
        check(forged.status == 403, f"a post without the form token is refused: {forged.status}")
        # From another site, with the browser's cookie and even the real form token: 403, for
        # a restore, a login (no cookie set by it) and a logout (the login goes on).
        for path, target in [("/restore", "/restore"), ("/login", "/ui/login"), ("/logout", "/ui/logout")]:
            answer = posted_from(page, elsewhere + path.lstrip("/"), target)
            check(answer.status == 403, f"a cross-site post to {target} is refused: {answer.status}")
            check("not sent from this server's own page" in page.content(), "and says why")
        check(len(ctx.cookies()) == 1, "the cross-site login set no cookie")
        page.goto(BASE + "/ui/sessions")
        check(page.url.startswith(BASE + "/ui/sessions"), "the cross-site logout ended nothing")

        # Every page, light and dark, as assistive technology reads it.
        accessible(browser, ctx.cookies())

        # Logging out ends it, on the server too: the old cookie, sent again, no longer opens a page.
        old_cookie = ctx.cookies()[0]
        page.click("header.top button[type=submit]")
        page.wait_for_load_state()
        check(page.url == BASE + "/ui/", f"logged out, at {page.url}")
        page.goto(BASE + "/ui/sessions")
        check(page.url == BASE + "/ui/", "a page after logging out asks to log in")
        ctx.add_cookies([old_cookie])
        page.goto(BASE + "/ui/sessions")
        check(page.url == BASE + "/ui/", "the old cookie is dead on the server")

        # Revoking the token a browser logged in with logs that browser out.
        other_ctx = browser.new_context(java_script_enabled=False)
        other = other_ctx.new_page()
        log_in(other, os.environ["REVOCABLE_TOKEN"])
        check(other.url.startswith(BASE + "/ui/sessions"), "logged in with a second token")
        subprocess.run(
            [os.environ["TROVE_BIN"], "--repo", os.environ["REPO"], "token", "revoke", os.environ["REVOCABLE_ID"]],
            check=True,
            capture_output=True,
        )
        other.goto(BASE + "/ui/sessions")
        check(other.url == BASE + "/ui/", f"a revoked token's browser is logged out, at {other.url}")

        browser.close()
    site.shutdown()
    print("every check passed")


if __name__ == "__main__":
    main()
