#!/usr/bin/env bash
# textgen_server as a process: it loads a model, opens a port the system picks, logs it, and on
# SIGTERM drains and exits 0; it logs the CPU kernels it chose; a model that does not load, or
# a --cpu_kernels value it cannot use, is exit 1 with the reason. The gRPC
# behaviour itself is tests/server/e2e_test.cc's (the same TextgenServer, in-process).
# Usage: tests/server/server_main_test.sh path/to/textgen_server path/to/a/checkpoint_dir
set -euo pipefail
server=$1
model=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$server" --model "$model" --port 0 --host 127.0.0.1 --drain_seconds 5 >"$log" 2>&1 &
pid=$!
# Bounded wait for the port (against a hang, not a timing requirement).
for _ in $(seq 600); do
  grep -q "serving on port" "$log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "serving on port" "$log" || { cat "$log"; echo "FAIL: the server never listened"; kill "$pid"; exit 1; }
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
cat "$log"
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc after SIGTERM"; exit 1; }
grep -q "drained" "$log" || { echo "FAIL: no drain logged"; exit 1; }
grep -q "CPU kernels: .* (--cpu_kernels=auto)" "$log" || { echo "FAIL: no kernels logged"; exit 1; }

rc=0
"$server" --model "$model" --port 0 --cpu_kernels=avx1024 >"$log" 2>&1 || rc=$?
cat "$log"
[ "$rc" -eq 1 ] || { echo "FAIL: --cpu_kernels=avx1024 gave exit code $rc, not 1"; exit 1; }
grep -q "auto|generic|avx2|avx512" "$log" || { echo "FAIL: the error does not list the families"; exit 1; }
help=$("$server" --helpfull 2>&1 || true)  # absl exits 1 after help.
grep -q "auto|generic|avx2|avx512" <<<"$help" || { echo "FAIL: --helpfull lacks the families"; exit 1; }

rc=0
"$server" --model /nonexistent/model --port 0 >"$log" 2>&1 || rc=$?
cat "$log"
[ "$rc" -eq 1 ] || { echo "FAIL: a missing model gave exit code $rc, not 1"; exit 1; }
grep -q "/nonexistent/model" "$log" || { echo "FAIL: the error does not name the model"; exit 1; }
echo "PASS"
