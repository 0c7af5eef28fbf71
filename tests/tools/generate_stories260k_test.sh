#!/usr/bin/env bash
# The README's one-line command on stories260K: textgen_generate must stream the story that
# ../shared/models/SOURCES.md documents for greedy generation from BOS (empty prompt), and
# continue a given prompt. Skips (exit 77) when ../shared is absent.
# Usage: tests/tools/generate_stories260k_test.sh path/to/textgen_generate
set -euo pipefail
generate=$1
shared=${TEXTGEN_SHARED_DIR:-$(dirname "$0")/../../../shared}
model=$shared/models/stories260K
if [ ! -f "$model/stories260K.bin" ]; then
  echo "SKIP: stories260K is not at $model (set TEXTGEN_SHARED_DIR)"
  exit 77
fi

expected="Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
out=$("$generate" --model "$model/stories260K.bin" --tokenizer "$model/tok512.bin" \
  --max_new_tokens 40 2>/tmp/generate_stories260k.$$.err)
cat /tmp/generate_stories260k.$$.err && rm -f /tmp/generate_stories260k.$$.err
echo "$out"
case "$out" in
  "$expected"*) ;;
  *) echo "FAIL: expected the output to start with: $expected"; exit 1 ;;
esac

# A prompt is echoed and continued; the tokenizer is found beside the model (tok512.bin).
out=$("$generate" --model "$model/stories260K.bin" --prompt "Once upon a time, there was a boy" \
  --max_new_tokens 20 --temperature 0.8 --seed 7 2>/dev/null)
echo "$out"
case "$out" in
  "Once upon a time, there was a boy"?*) ;;
  *) echo "FAIL: the prompt was not echoed and continued"; exit 1 ;;
esac
echo "PASS"
