#!/usr/bin/env bash
# Sets up, builds and runs the main job: the shipped model (models/shakespeare-char) streams a
# sampled continuation to the terminal as it is decoded. Any other arguments are passed to
# textgen_generate (see README "Try a real model"), e.g. a llama2.c model:
#   scripts/run.sh --model ../shared/models/stories260K/stories260K.bin --prompt "Once"
# The gRPC server is build/server/textgen_server (README "The server").
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)" --target textgen_generate

if [ $# -eq 0 ]; then
  set -- --prompt "ROMEO:" --temperature 0.8 --seed 1338 --max_new_tokens 250
fi
exec build/model/textgen_generate "$@"
