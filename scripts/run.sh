#!/usr/bin/env bash
# Sets up, builds and runs the main job: the gRPC server with the shipped model
# (models/shakespeare-char) on port 50051 (or $TEXTGEN_PORT), and the command-line client
# streaming a sampled continuation of "ROMEO:" to the terminal as it is decoded. Then the
# server keeps serving in the foreground until Ctrl-C, e.g. for
#   build/client/textgen --server localhost:50051 attention --prompt "ROMEO:" --out a.png
#   /usr/bin/python3 client/python/example.py --target localhost:50051
#
#   scripts/run.sh                      # sample, then serve until Ctrl-C
#   scripts/run.sh --sample-only        # sample and exit (also TEXTGEN_RUN_ONCE=1)
#   scripts/run.sh --prompt "JULIET:"   # other arguments go to `textgen generate`
#
# The decoder without a server is build/model/textgen_generate (README "Try a real model").
set -euo pipefail
cd "$(dirname "$0")/.."

once=${TEXTGEN_RUN_ONCE:-0}
args=()
for arg in "$@"; do
  if [ "$arg" = "--sample-only" ]; then once=1; else args+=("$arg"); fi
done
port=${TEXTGEN_PORT:-50051}

# Run and build dependencies only: no nginx, PyTorch or node (those are test-only).
scripts/setup.sh run build
# Quiet on purpose: a newcomer's log shows progress and warnings, not every compile line (in a
# terminal ninja keeps one status line; in a log, --quiet drops its [n/N] lines).
echo "run.sh: configuring and building textgen_server, textgen and the Python stubs in build/"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release --log-level=WARNING
ninja_quiet=()
[ -t 1 ] || ninja_quiet=(-- --quiet)
cmake --build build -j"$(nproc)" --target textgen_server textgen textgen_python_stubs "${ninja_quiet[@]}"

build/server/textgen_server --model models/shakespeare-char --port "$port" &
server=$!
stop_server() {
  if kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# Wait (bounded) until the server says SERVING.
client=(build/client/textgen --server "localhost:$port")
for _ in $(seq 300); do
  "${client[@]}" --timeout_ms 1000 health >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { echo "run.sh: textgen_server exited (port $port in use?)" >&2; exit 1; }
  sleep 0.2
done
"${client[@]}" health >/dev/null

echo "--- textgen generate --prompt \"ROMEO:\" (sampled, seed 1338) ---"
printf 'ROMEO:'
# The summary (tokens, time to first token, tokens/s) goes under the text, not into it.
summary=$(mktemp)
rc=0
"${client[@]}" generate --prompt "ROMEO:" --temperature 0.8 --seed 1338 \
  --max_new_tokens 250 "${args[@]}" 2>"$summary" || rc=$?
echo
cat "$summary" >&2
rm -f "$summary"
[ "$rc" -eq 0 ] || exit "$rc"

if [ "$once" = 1 ]; then exit 0; fi
echo "--- serving on localhost:$port; Ctrl-C to stop ---"
wait "$server"
