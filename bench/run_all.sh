#!/usr/bin/env bash
# Runs every benchmark of issue 8 and prints the results page (also written to
# bench/results/<date>-<commit>.md):
#
#   bench/run_all.sh [--threads "1 2"] [--quick] [--readme]
#
# --readme also puts the page into bench/README.md's "Results" section (between its
# results:begin/end markers), replacing what was there.
#
#   1. builds the benchmark targets (through the shared build lock) and makes the GPT-2-small
#      checkpoints (bench/make_gpt2_small.py) if missing;
#   2. STREAM-style read bandwidth, 1 and 2 threads (textgen_stream_read);
#   3. per thread count: the model-core Google Benchmarks (textgen_model_bench; also decode
#      batch 1 and prefill 512 of SmolLM2-135M- and Qwen2.5-0.5B-shaped random checkpoints from
#      tools/make_checkpoint.py, model_bench_families_t<T>.json), the PyTorch
#      reference on the same weights and shapes (bench/torch_reference.py), and the load
#      generator at 1/4/16/64 streams against a textgen_server it starts, for the shipped
#      model and GPT-2 small, plus one in-process stream of each (textgen_loadgen);
#   4. bench/report.py turns the raw outputs (kept in build/bench-runs/<stamp>/) into markdown.
#
# A full run takes ~6 minutes on a quiet 2-core machine; --quick (short timings, one repetition,
# the shipped model only through the load generator) under 2. Run it on a quiet machine:
# everything here is timing.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${TEXTGEN_BUILD_DIR:-$repo/build}
python=/usr/bin/python3  # Debian's, with torch (another python3 may come first on PATH).
threads="1 2"
quick=0
readme=0
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --threads=*) threads="${1#--threads=}"; shift ;;
    --quick) quick=1; shift ;;
    --readme) readme=1; shift ;;
    -h|--help) sed -n 2,21p "$0"; exit 0 ;;
    *) echo "run_all: unknown argument '$1' (--threads \"1 2\", --quick, --readme)" >&2; exit 2 ;;
  esac
done
for t in $threads; do
  [[ "$t" =~ ^[1-9][0-9]*$ ]] || { echo "run_all: bad thread count '$t'" >&2; exit 2; }
done

echo "run_all: building benchmark targets" >&2
[ -f "$build/CMakeCache.txt" ] || cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
flock /tmp/textgen-build.lock cmake --build "$build" -j2 --target \
  textgen_model_bench textgen_stream_read textgen_loadgen textgen_server >&2

shipped=$repo/models/shakespeare-char
gpt2=$build/bench-models/gpt2-small
gpt2_bf16=$build/bench-models/gpt2-small-bf16
[ -f "$gpt2/model.safetensors" ] || "$python" "$repo/bench/make_gpt2_small.py" --out "$gpt2"
[ -f "$gpt2_bf16/model.safetensors" ] ||
  "$python" "$repo/bench/make_gpt2_small.py" --dtype bf16 --out "$gpt2_bf16"
# Issue 15's families at the shapes people serve (random weights, Hugging Face layout).
smollm2=$build/bench-models/smollm2-135m
qwen25=$build/bench-models/qwen2.5-0.5b
[ -f "$smollm2/model.safetensors" ] ||
  "$python" "$repo/tools/make_checkpoint.py" --preset smollm2-135m --out "$smollm2" >&2
[ -f "$qwen25/model.safetensors" ] ||
  "$python" "$repo/tools/make_checkpoint.py" --preset qwen2.5-0.5b --out "$qwen25" >&2

commit=$(git -C "$repo" rev-parse --short HEAD)
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
run=$build/bench-runs/$stamp-$commit
mkdir -p "$run"
bin=$build/bench

if [ "$quick" = 1 ]; then
  stream_mib=256; stream_reps=2
  gbench=(--benchmark_min_time=0.05)
  torch_args=(--min_time 0.05 --repetitions 1)
else
  stream_mib=1024; stream_reps=5
  gbench=(--benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
  torch_args=(--min_time 0.5 --repetitions 3)
fi

{
  echo "commit=$commit"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "cores=$(nproc)"
  echo "load=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)"
  echo "torch=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
  echo "threads=$threads"
  echo "quick=$quick"
  echo "stream_mib=$stream_mib"
  echo "decode_context=128"
  echo "decoder_threads=as --threads (DecoderOptions::threads; the server's --threads)"
  # Bytes a batch-1 decode step streams: every weight but the position table, as F32.
  "$python" - "$gpt2/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
C, L, V, I = c["n_embd"], c["n_layer"], c["vocab_size"], c.get("n_inner") or 4 * c["n_embd"]
params = V * C + L * (4 * C + 3 * C * C + 3 * C + C * C + C + 2 * C * I + I + C) + 2 * C
print(f"gpt2_stream_bytes_f32={4 * params}")
PY
} > "$run/env.txt"

echo "run_all: STREAM read ($stream_mib MiB)" >&2
stream_threads=$(echo 1 2 $threads | tr ' ' '\n' | sort -nu | paste -sd,)
"$bin/textgen_stream_read" --threads="$stream_threads" --size_mib=$stream_mib \
  --repetitions=$stream_reps | tee "$run/stream.txt" >&2

server_pid=
# Starts textgen_server on a free port; sets server_pid and server_port.
start_server() {
  local model=$1 t=$2 log=$run/server.log
  "$build/server/textgen_server" --model="$model" --host=127.0.0.1 --port=0 --threads="$t" \
    --num_slots=64 --max_queue=256 >"$log" 2>&1 &
  server_pid=$!
  server_port=
  for _ in $(seq 1200); do  # Up to 60 s to load the model.
    server_port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$server_port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  cat "$log" >&2
  echo "run_all: textgen_server did not start" >&2
  exit 1
}
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}
trap 'stop_server 2>/dev/null || true' EXIT

# loadgen MODEL_DIR THREADS PROMPT NEW "STREAMS:REQUESTS ..."
loadgen() {
  local model=$1 t=$2 prompt=$3 new=$4 plan=$5 name
  name=$(basename "$model")
  start_server "$model" "$t"
  for entry in $plan; do
    "$bin/textgen_loadgen" --target="127.0.0.1:$server_port" --model="$name" --threads="$t" \
      --streams="${entry%%:*}" --requests="${entry##*:}" --prompt_tokens="$prompt" \
      --max_new_tokens="$new" --server_pid="$server_pid" --commit="$commit" \
      | tee -a "$run/loadgen_t$t.txt" >&2
  done
  stop_server
  "$bin/textgen_loadgen" --in_process --model="$model" --threads="$t" --num_slots=64 \
    --streams=1 --requests="$(echo $plan | cut -d' ' -f1 | cut -d: -f2)" \
    --prompt_tokens="$prompt" --max_new_tokens="$new" --commit="$commit" \
    | tee -a "$run/loadgen_t$t.txt" >&2
}

# Only the rows issue 15 asks of the large families: their full-context and batch-32 cases
# would hold a full-context KV cache per sequence (32768 positions for Qwen2.5).
families_filter='^(decode/[^/]*/batch:1|prefill/[^/]*/tokens:512)(/|$)'
for t in $threads; do
  echo "run_all: model core, $t thread(s)" >&2
  "$bin/textgen_model_bench" --models="$shipped,$gpt2,$gpt2_bf16:bf16" --threads="$t" "${gbench[@]}" \
    --benchmark_format=json --benchmark_out="$run/model_bench_t$t.json" \
    --benchmark_out_format=json >/dev/null
  echo "run_all: SmolLM2-135M and Qwen2.5-0.5B shapes (decode batch 1, prefill 512), $t thread(s)" >&2
  "$bin/textgen_model_bench" --models="$smollm2,$qwen25" --threads="$t" "${gbench[@]}" \
    --benchmark_filter="$families_filter" \
    --benchmark_format=json --benchmark_out="$run/model_bench_families_t$t.json" \
    --benchmark_out_format=json >/dev/null
  echo "run_all: PyTorch reference, $t thread(s)" >&2
  env -u OPENBLAS_CORETYPE "$python" "$repo/bench/torch_reference.py" \
    --models="$shipped,$gpt2" --threads="$t" "${torch_args[@]}" | tee "$run/torch_t$t.txt" >&2
  echo "run_all: load generator, $t thread(s)" >&2
  : > "$run/loadgen_t$t.txt"
  if [ "$quick" = 1 ]; then
    loadgen "$shipped" "$t" 32 32 "1:2 4:1 16:1 64:1"
  else
    loadgen "$shipped" "$t" 64 128 "1:4 4:2 16:1 64:1"
    loadgen "$gpt2" "$t" 64 64 "1:4 4:2 16:1 64:1"
  fi
done

mkdir -p "$repo/bench/results"
out=$repo/bench/results/$(date -u +%Y-%m-%d)-$commit.md
"$python" "$repo/bench/report.py" "$run" > "$out"
cat "$out"
if [ "$readme" = 1 ]; then
  "$python" - "$repo/bench/README.md" "$out" <<'PY'
import re, sys
readme, page = sys.argv[1], open(sys.argv[2]).read()
# One heading level down: the page's "# …" becomes "### …" under README's "## Results".
page = re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 2) + " ", page, flags=re.M)
text = open(readme).read()
begin, end = "<!-- results:begin -->", "<!-- results:end -->"
if begin not in text or end not in text:
    sys.exit(f"run_all: {readme} has no {begin} ... {end} section")
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(readme, "w").write(head + begin + "\n" + page.strip() + "\n" + end + tail)
PY
  echo "run_all: bench/README.md results section updated" >&2
fi
echo "run_all: raw outputs in $run; results page $out" >&2
