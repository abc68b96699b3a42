# Sourced, not run: `start_moto DIR` starts moto's S3 server (from the virtualenv the tests
# install under target/, installed here when missing; launched by tests/moto_server.py, which
# makes its conditional create atomic) on a free port of 127.0.0.1, with its
# FIFO and output in DIR, and exports the AWS variables that reach it (AWS_ENDPOINT_URL and the
# test credentials). moto serves until its standard input closes: descriptor 3 of the sourcing
# shell holds the FIFO open until that shell exits (or runs `exec 3>&-`).
start_moto() {
    local dir=$1 version=5.2.5 venv port
    venv=$PWD/target/moto-$version
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import moto.server' 2>/dev/null; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$version"
    fi
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    mkfifo "$dir/moto.in"
    "$venv/bin/python" "$PWD/tests/moto_server.py" "$port" <"$dir/moto.in" >"$dir/moto.out" 2>&1 &
    exec 3>"$dir/moto.in"
    for _ in $(seq 600); do grep -q ready "$dir/moto.out" 2>/dev/null && break; sleep 0.05; done
    grep -q ready "$dir/moto.out" || { echo "moto did not start:" >&2; cat "$dir/moto.out" >&2; return 1; }
    export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=test \
        AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
}
