"""The official MCP Python SDK (PyPI `mcp`) against trove, as an agent framework runs it: over
streamable HTTP under `trove serve` (the session's own token on /v1/mcp) and over stdio through
`trove mcp` in another process, each working in a session for several of the server's idle
timeouts.

What must hold:
- every tool is listed with an input schema, an output schema and annotations (read-only tools
  `readOnlyHint`, deleting ones `destructiveHint`), and every structured answer validates against
  its output schema (the SDK checks each `tools/call` result against it and raises otherwise);
- the work, through either transport, keeps the session from ending as idle, and once the agent
  stops the session does end;
- closing the HTTP session gets the answer the SDK expects: the SDK logs no warning at all.

Run by .ci/mcp-sdk: python mcp_sdk.py BASE_URL OPERATOR_TOKEN TROVE_BINARY REPO IDLE_SECONDS.
"""

import json
import logging
import os
import sys
import time
import urllib.error
import urllib.request

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

READ_ONLY = {"read_file", "list_directory", "search_files", "glob"}
DESTRUCTIVE = {"delete_file"}


class Warnings(logging.Handler):
    """Every warning or error any logger of the SDK (or its HTTP client) emits."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.seen = []

    def emit(self, record):
        self.seen.append(f"{record.name}: {record.getMessage()}")


def fail(what):
    raise SystemExit(f"mcp_sdk: {what}")


class Operator:
    """The operator's plain HTTP calls: create sessions, see whether they are alive."""

    def __init__(self, base, token):
        self.base, self.token = base, token

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def session(self, workspace):
        status, s = self.call("POST", "/v1/sessions", {"workspace": workspace})
        if status != 201:
            fail(f"creating a session answered {status}: {s}")
        return s

    def alive(self, session_id):
        status, s = self.call("GET", f"/v1/sessions/{session_id}")
        return status == 200 and s.get("status") != "ended"


def check_listing(tools):
    names = {t.name for t in tools}
    for must in ("read_file", "write_file", "delete_file", "files"):
        if must not in names:
            fail(f"tools/list lacks {must}: {sorted(names)}")
    for t in tools:
        # The unified `files` tool answers each command in its own shape: text, not a schema.
        if not t.input_schema or (t.name != "files" and not t.output_schema):
            fail(f"{t.name} is listed without an input or output schema")
        a = t.annotations
        if a is None:
            fail(f"{t.name} has no annotations")
        if t.name in READ_ONLY and a.read_only_hint is not True:
            fail(f"{t.name} reads only but is not marked readOnlyHint: {a}")
        if t.name in DESTRUCTIVE and a.destructive_hint is not True:
            fail(f"{t.name} deletes but is not marked destructiveHint: {a}")


def data(result):
    """A tool answer's data, from its structured content."""
    content = result.structured_content or {}
    return content.get("data", content)


async def work(session, seconds, tag):
    """Calls tools for `seconds`, a few a second, each write under the stale-file protocol (the
    sha256 last read); the SDK validates each structured answer against the tool's schema."""
    until = time.monotonic() + seconds
    shas = {}
    n = 0
    while time.monotonic() < until:
        n += 1
        path = f"{tag}/note-{n % 3}.md"
        wrote = await session.call_tool(
            "write_file", {"path": path, "content": f"# {tag} {n}\n", "expectedSha256": shas.get(path, "")}
        )
        if wrote.is_error:
            fail(f"write_file {path}: {wrote.content}")
        read = await session.call_tool("read_file", {"path": path})
        if read.is_error or f"{tag} {n}" not in json.dumps(data(read)):
            fail(f"read_file {path} did not give what was written: {read.structured_content}")
        shas[path] = data(read)["sha256"]
        await anyio.sleep(0.4)
    listed = await session.call_tool("list_directory", {"path": tag})
    if listed.is_error:
        fail(f"list_directory {tag}: {listed.content}")
    gone = await session.call_tool("delete_file", {"path": f"{tag}/note-0.md"})
    if gone.is_error:
        fail(f"delete_file: {gone.content}")
    return n


async def agent(read, write, op, s, idle, how):
    """An agent's MCP session: initialize, list the tools, work for 3.5 idle timeouts; the
    trove session must still be alive at the end."""
    async with ClientSession(read, write) as session:
        await session.initialize()
        check_listing((await session.list_tools()).tools)
        calls = await work(session, idle * 3.5, how.split()[-1])
        if not op.alive(s["id"]):
            fail(f"the session ended as idle after {calls} calls {how}")
    return calls


async def over_http(base, op, idle):
    s = op.session("sdk-http")
    headers = {"Authorization": f"Bearer {s['session_token']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with streamable_http_client(f"{base}/v1/mcp", http_client=http) as (read, write):
            calls = await agent(read, write, op, s, idle, "over http")
    return s["id"], calls


async def over_stdio(trove, repo, op, idle):
    s = op.session("sdk-stdio")
    # The SDK starts a stdio server with a few safe variables only; a repository in a bucket
    # also needs its passphrase, cache directory and store, as an agent framework's MCP
    # configuration would give them.
    env = {k: v for k, v in os.environ.items() if k.startswith(("TROVE_", "AWS_"))}
    params = StdioServerParameters(
        command=trove, args=["--repo", repo, "mcp", "--session", s["id"]], env={**get_default_environment(), **env}
    )
    async with stdio_client(params) as (read, write):
        calls = await agent(read, write, op, s, idle, "through stdio")
    return s["id"], calls


async def main(base, token, trove, repo, idle):
    op = Operator(base, token)
    ended_http, http_calls = await over_http(base, op, idle)
    ended_stdio, stdio_calls = await over_stdio(trove, repo, op, idle)
    # Left alone, both end: the timeout really was short, and the reaper ran throughout.
    deadline = time.monotonic() + idle * 10
    while time.monotonic() < deadline and (op.alive(ended_http) or op.alive(ended_stdio)):
        await anyio.sleep(0.2)
    if op.alive(ended_http) or op.alive(ended_stdio):
        fail("a session nobody uses did not end as idle")
    print(f"mcp_sdk: {http_calls} rounds over streamable HTTP and {stdio_calls} over stdio, "
          f"each for {idle * 3.5:.0f} s against a {idle:.0f} s idle timeout")


if __name__ == "__main__":
    warnings = Warnings()
    logging.getLogger().addHandler(warnings)
    base_url, operator_token, trove_bin, repo_dir, idle_s = sys.argv[1:6]
    anyio.run(main, base_url, operator_token, trove_bin, repo_dir, float(idle_s))
    if warnings.seen:
        fail("the SDK warned:\n" + "\n".join(warnings.seen))
