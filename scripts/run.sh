#!/usr/bin/env bash
# Sets up, builds and runs the main job. For now: the Eigen decoder loads a checkpoint and
# streams a greedy continuation (token ids) to stdout. The gRPC server replaces this once
# it exists.
# Usage: scripts/run.sh [--model DIR] [--prompt_ids 1,2,3] [--max_new_tokens N]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)" --target textgen_generate

if [ $# -eq 0 ]; then
  set -- --model tests/golden/llama_gqa --prompt_ids 1,2,3,4 --max_new_tokens 48
fi
exec build/model/textgen_generate "$@"
