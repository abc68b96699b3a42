# Shared by the HTTP benchmark scripts (sourced, after `work` is set): the server's pid and its
# clean-up on exit, a free loopback port and a random operator token.
mkdir -p "$work"
pid=
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=bench-$(python3 -c 'import secrets; print(secrets.token_hex(8))')
