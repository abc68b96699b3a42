# Shared by the HTTP benchmark scripts (sourced from the checkout's root, after `work` is set):
# the release `trove` built ($trove), the server's pid and its clean-up on exit, a free loopback
# port and a random operator token.
cargo build --release --quiet --bin trove
trove=$PWD/target/release/trove
mkdir -p "$work"
pid=
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=bench-$(python3 -c 'import secrets; print(secrets.token_hex(8))')
# Starts the release `trove` ($trove) serving $work/repo over $work/workspaces, and waits for it.
start_server() {
    TROVE_API_TOKEN=$token "$trove" --repo "$work/repo" serve --listen "127.0.0.1:$port" \
        --workspaces "$work/workspaces" --log-level warn >"$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.05; done
}
# A new persistent session on workspace $1: its id.
new_session() {
    curl -sf -X POST -H "Authorization: Bearer $token" -d "{\"workspace\": \"$1\", \"persistent\": true}" \
        "http://127.0.0.1:$port/v1/sessions" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}
