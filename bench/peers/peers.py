#!/usr/bin/env python3
"""textgen against llama.cpp on the same GGUF files, on this machine, in one run.

    /usr/bin/python3 bench/peers/peers.py --llama_cpp PATH [--threads 1,2] [--rounds 3]
        [--model gpt2-small|smollm2-135m] [--prompt 512] [--gen 128] [--quick] [--out FILE.md]

PATH is a llama.cpp source: a checkout (its CMakeLists.txt at the top), a bare git directory
(what the session's `fetch` tool gives: HEAD is exported with `git archive`, without models/),
or an existing build directory holding bin/llama-bench. llama.cpp is never vendored or
downloaded here; it is built outside the source tree, in --work (default build/peers/):

    cmake -S SRC -B WORK/llama.cpp-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \\
          -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF
    cmake --build WORK/llama.cpp-build -j2 --target llama-bench

(GGML_NATIVE=ON: llama.cpp compiled for this CPU, its fastest form; --portable for OFF.)

The model: random weights in a Hugging Face layout (bench/make_gpt2_small.py, or
tools/make_checkpoint.py --preset smollm2-135m), written as GGUF F32, F16, BF16 and Q8_0 by
tools/hf_to_gguf.py (no tokenizer: tokenizer.ggml.model "none", both engines feed token ids).
Both engines load the very same files:

  llama.cpp  llama-bench -m FILE -p P -n 0 / -p 0 -n G -t T -r 1 -o json: prefill = one P-token
             prompt into an empty context; decode = G tokens one at a time at batch 1, from an
             empty context (so about G/2 positions cached on average).
  textgen    build/bench/textgen_model_bench --models=FILE[:bf16|:int8] --threads=T
             --prefill_tokens=P --decode_context=G/2: prefill/<file>/tokens:P and
             decode/<file>/batch:1 (one decode step with G/2 positions cached).

Pairs (textgen weights in memory <- file, llama.cpp file): F32 <- F32 vs F32; BF16 <- BF16 vs
F16 and vs BF16 (textgen holds no F16); INT8 <- Q8_0 vs Q8_0 (textgen's int8 is Q8_0's
numerics: the file's blocks come back unchanged).

llama.cpp's threads are OpenMP's: on a machine shared with other work its spinning workers
(OMP_WAIT_POLICY ACTIVE, the default) collapse at 2 threads on 2 cores (2 tokens/s instead of
57 for Q8_0 decode, measured here under load), so llama-bench runs with OMP_WAIT_POLICY=PASSIVE
unless --llama_omp_wait_policy says otherwise, as bench/torch_reference.py does for torch.
llama.cpp reads its weights through mmap by default; with -mmp 0 it copies them into its own
buffers, which decoded F32 ~8 % faster on one core here, so each llama.cpp figure is the
fastest of --llama_mmap (default "0,1": both).

Rounds interleave the engines (round r: for each thread count, llama.cpp then textgen), and
the table shows each figure's median over the rounds and the ratio textgen / llama.cpp, with
the CPU model, the date, both commits and llama.cpp's build flags; every round's figure is
kept in WORK/peers-samples.json. Timing only: run it on a
quiet machine and compare figures within one run.

--quick: the tiny golden GPT-2 (tests/golden/gpt2_learned), P = 64, G = 16, one round, short
timings: a check that the whole pipeline runs (ctest peers_smoke, label bench), not figures.
Exit status: 0, 2 on bad arguments, 1 on any failure (a build, a conversion, a bench).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3"  # Debian's, with torch (hf_to_gguf.py needs it).
BUILD_LOCK = "/tmp/textgen-build.lock"  # Every textgen build here goes through it.

# (row label, textgen file type, textgen weights in memory, llama.cpp file type)
PAIRS = [
    ("F32", "f32", "f32", "f32"),
    ("BF16 vs F16", "bf16", "bf16", "f16"),
    ("BF16 vs BF16", "bf16", "bf16", "bf16"),
    ("INT8 vs Q8_0", "q8_0", "int8", "q8_0"),
    ("W8A32 vs Q8_0", "q8_0", "w8a32", "q8_0"),
]
FILE_TYPES = ["f32", "f16", "bf16", "q8_0"]


def log(msg: str) -> None:
    print(f"peers: {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, **kw)


def git_commit(git_dir_or_tree: str) -> str:
    for args in (["--git-dir", git_dir_or_tree], ["-C", git_dir_or_tree]):
        r = subprocess.run(["git", *args, "rev-parse", "HEAD"], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.strip()
    return "unknown"


def llama_source(path: str, work: str) -> tuple[str, str]:
    """(llama.cpp source tree, commit) for a checkout or a bare git directory; a bare git
    directory's HEAD is exported into WORK/llama.cpp-src (once per commit)."""
    if os.path.exists(os.path.join(path, "CMakeLists.txt")):  # A checkout.
        return path, git_commit(path)
    if not os.path.exists(os.path.join(path, "HEAD")):
        raise SystemExit(f"peers: {path} is neither a llama.cpp checkout, a git directory nor a "
                         "build directory")
    commit = git_commit(path)
    src = os.path.join(work, "llama.cpp-src")
    stamp = os.path.join(src, ".textgen-peers-commit")
    if not (os.path.exists(stamp) and open(stamp).read().strip() == commit):
        shutil.rmtree(src, ignore_errors=True)
        os.makedirs(src)
        # models/ holds large vocabulary files a snapshot may lack; the build needs none.
        top = subprocess.run(["git", "--git-dir", path, "ls-tree", "--name-only", "HEAD"],
                             check=True, capture_output=True, text=True).stdout.split()
        archive = subprocess.Popen(["git", "--git-dir", path, "archive", "HEAD", "--",
                                    *[t for t in top if t != "models"]],
                                   stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise RuntimeError(f"git archive of {path} failed")
        with open(stamp, "w") as f:
            f.write(commit + "\n")
    return src, commit


def build_llama_cpp(src: str, build: str, native: bool, targets: list[str]) -> str:
    """Configures (Release, static) and builds `targets` in `build`; returns the flags."""
    flags = ["-DCMAKE_BUILD_TYPE=Release", f"-DGGML_NATIVE={'ON' if native else 'OFF'}",
             "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
             "-DLLAMA_BUILD_SERVER=OFF"]
    launcher = (["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
                if shutil.which("ccache") else [])
    run(["cmake", "-S", src, "-B", build, "-G", "Ninja", *flags, *launcher],
        stdout=subprocess.DEVNULL)
    run(["cmake", "--build", build, "-j2", "--target", *targets], stdout=subprocess.DEVNULL)
    return " ".join(flags)


def llama_bench_binary(path: str, work: str, native: bool) -> tuple[str, str, str]:
    """Builds (or finds) llama-bench; returns (binary, llama.cpp commit, build flags)."""
    path = os.path.abspath(path)
    built = os.path.join(path, "bin", "llama-bench")
    if os.access(built, os.X_OK):  # A build directory.
        stamp = os.path.join(path, "textgen-peers-source.txt")
        info = open(stamp).read().split("\n", 1) if os.path.exists(stamp) else ["unknown", "?"]
        return built, info[0], info[1].strip() if len(info) > 1 else "?"
    src, commit = llama_source(path, work)
    build = os.path.join(work, "llama.cpp-build")
    flags = build_llama_cpp(src, build, native, ["llama-bench"])
    with open(os.path.join(build, "textgen-peers-source.txt"), "w") as f:
        f.write(f"{commit}\n{flags}\n")
    return os.path.join(build, "bin", "llama-bench"), commit, flags


def textgen_bench_binary(build: str) -> str:
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        run(["cmake", "-S", REPO, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
            stdout=subprocess.DEVNULL)
    run(["flock", BUILD_LOCK, "cmake", "--build", build, "-j2", "--target",
         "textgen_model_bench"], stdout=subprocess.DEVNULL)
    return os.path.join(build, "bench", "textgen_model_bench")


def make_gguf_files(model: str, quick: bool, work: str, textgen_build: str) -> dict[str, str]:
    """The model as GGUF, one file per type; written once, reused while present."""
    if quick:
        name, hf_dir = "gpt2_learned", os.path.join(REPO, "tests", "golden", "gpt2_learned")
    else:
        name = model
        hf_dir = os.path.join(textgen_build, "bench-models", model)
        if not os.path.exists(os.path.join(hf_dir, "model.safetensors")):
            if model == "gpt2-small":
                run([PYTHON, os.path.join(REPO, "bench", "make_gpt2_small.py"), "--out", hf_dir])
            else:
                run([PYTHON, os.path.join(REPO, "tools", "make_checkpoint.py"), "--preset", model,
                     "--out", hf_dir])
    out_dir = os.path.join(work, "models")
    os.makedirs(out_dir, exist_ok=True)
    files = {}
    for t in FILE_TYPES:
        path = os.path.join(out_dir, f"{name}-{t}.gguf")
        if not os.path.exists(path):
            tmp = path + ".tmp"
            run([PYTHON, os.path.join(REPO, "tools", "hf_to_gguf.py"), hf_dir, tmp, "--type", t],
                stdout=subprocess.DEVNULL)
            os.replace(tmp, path)
        files[t] = path
    return files


def llama_round(binary: str, files: dict[str, str], threads: int, p: int, g: int,
                reps: int, omp_wait_policy: str, mmap: str) -> dict[tuple[str, str], float]:
    """{(file type, "prefill"|"decode"): tokens/s} from llama-bench's JSON: the fastest of
    the `mmap` settings llama-bench ran (its -mmp list)."""
    types = sorted({pair[3] for pair in PAIRS})
    out = {}
    for kind, pn in (("prefill", ["-p", str(p), "-n", "0"]), ("decode", ["-p", "0", "-n", str(g)])):
        cmd = [binary, *sum((["-m", files[t]] for t in types), []), *pn, "-t", str(threads),
               "-r", str(reps), "-mmp", mmap, "-o", "json"]
        env = dict(os.environ)
        if omp_wait_policy:
            env["OMP_WAIT_POLICY"] = omp_wait_policy
        r = run(cmd, capture_output=True, text=True, env=env)
        for test in json.loads(r.stdout):
            t = next(t for t in types if os.path.samefile(test["model_filename"], files[t]))
            out[(t, kind)] = max(out.get((t, kind), 0.0), float(test["avg_ts"]))
    return out


def textgen_round(binary: str, files: dict[str, str], threads: int, p: int, g: int,
                  quick: bool, work: str) -> dict[tuple[str, str], float]:
    """{(textgen weights, "prefill"|"decode"): tokens/s} from textgen_model_bench's JSON."""
    entries = {w: f"{files[ft]}:{w}" for _, ft, w, _ in PAIRS}
    json_out = os.path.join(work, "textgen_model_bench.json")
    names = {w: os.path.basename(files[ft]) + ("" if w == "f32" else f"-{w}")
             for _, ft, w, _ in PAIRS}
    cmd = [binary, "--models=" + ",".join(entries[w] for w in sorted(entries)),
           f"--threads={threads}", f"--prefill_tokens={p}", f"--decode_context={max(1, g // 2)}",
           f"--benchmark_filter=^(decode/[^/]*/batch:1|prefill/[^/]*/tokens:{p})(/|$)",
           f"--benchmark_out={json_out}", "--benchmark_out_format=json",
           f"--benchmark_min_time={0.05 if quick else 0.5}"]
    run(cmd, stdout=subprocess.DEVNULL)
    with open(json_out) as f:
        rows = json.load(f)["benchmarks"]
    out = {}
    for w, name in names.items():
        for kind, bench in (("prefill", f"prefill/{name}/tokens:{p}"),
                            ("decode", f"decode/{name}/batch:1")):
            # Names end in "/real_time" (the benchmarks time wall clock).
            row = next((r for r in rows if r["name"].split("/real_time")[0] == bench), None)
            if row is None or "items_per_second" not in row:
                raise RuntimeError(f"textgen_model_bench printed no {bench}")
            out[(w, kind)] = float(row["items_per_second"])
    return out


def cpu_model() -> str:
    r = subprocess.run(["lscpu"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def table(results, threads_list, p, g, rounds) -> list[str]:
    def med(key):
        return statistics.median(results[key])

    lines = [f"| threads | weights (textgen vs llama.cpp) | prefill {p}: textgen | llama.cpp | "
             f"ratio | decode b1: textgen | llama.cpp | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for t in threads_list:
        for label, _, w, lt in PAIRS:
            cells = []
            for kind in ("prefill", "decode"):
                ours, theirs = med(("textgen", t, w, kind)), med(("llama", t, lt, kind))
                cells += [f"{ours:.1f}", f"{theirs:.1f}", f"{ours / theirs:.2f}×"]
            lines.append(f"| {t} | {label} | " + " | ".join(cells) + " |")
        best = []
        for kind in ("prefill", "decode"):
            ours = max(med(("textgen", t, w, kind)) for _, _, w, _ in PAIRS)
            theirs = max(med(("llama", t, lt, kind)) for _, _, _, lt in PAIRS)
            best += [f"{ours:.1f}", f"{theirs:.1f}", f"{ours / theirs:.2f}×"]
        lines.append(f"| {t} | **best of each** | " + " | ".join(best) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama_cpp", default=os.environ.get("TEXTGEN_LLAMA_CPP"),
                    help="llama.cpp checkout, git directory or build directory "
                         "(default: $TEXTGEN_LLAMA_CPP)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default="gpt2-small", choices=["gpt2-small", "smollm2-135m"])
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--portable", action="store_true", help="build llama.cpp with GGML_NATIVE=OFF")
    ap.add_argument("--textgen_build", default=os.environ.get("TEXTGEN_BUILD_DIR",
                                                              os.path.join(REPO, "build")))
    ap.add_argument("--llama_omp_wait_policy", default="PASSIVE",
                    help="OMP_WAIT_POLICY for llama-bench (its threads are OpenMP's); '' "
                         "leaves the environment's")
    ap.add_argument("--llama_mmap", default="0,1",
                    help="llama-bench -mmp values; each row takes the fastest. llama.cpp "
                         "maps the file by default (1); reading it into its own buffers (0) "
                         "decoded F32 ~8 %% faster on one core here")
    ap.add_argument("--textgen_bench", help="a built textgen_model_bench to use as it is "
                                            "(default: build it in --textgen_build)")
    ap.add_argument("--work", help="llama.cpp build, GGUF files (default TEXTGEN_BUILD/peers)")
    ap.add_argument("--out", help="also write the page (markdown) here")
    args = ap.parse_args(argv)
    if not args.llama_cpp:
        ap.error("--llama_cpp (or $TEXTGEN_LLAMA_CPP) is required")
    try:
        threads_list = [int(t) for t in args.threads.split(",")]
        if any(t < 1 for t in threads_list) or args.rounds < 1 or args.prompt < 1 or args.gen < 2:
            raise ValueError
    except ValueError:
        ap.error("--threads are positive integers, --rounds >= 1, --prompt >= 1, --gen >= 2")
    if args.quick:
        args.prompt, args.gen, args.rounds = 64, 16, 1
    textgen_build = os.path.abspath(args.textgen_build)
    work = os.path.abspath(args.work or os.path.join(textgen_build, "peers"))
    os.makedirs(work, exist_ok=True)

    llama_bin, llama_commit, llama_flags = llama_bench_binary(args.llama_cpp, work,
                                                              not args.portable)
    textgen_bin = args.textgen_bench or textgen_bench_binary(textgen_build)
    files = make_gguf_files(args.model, args.quick, work, textgen_build)

    results: dict[tuple, list[float]] = {}
    for r in range(args.rounds):
        for t in threads_list:
            log(f"round {r + 1}/{args.rounds}, {t} thread(s)")
            for (ft, kind), v in llama_round(llama_bin, files, t, args.prompt, args.gen, 1,
                                             args.llama_omp_wait_policy,
                                             args.llama_mmap).items():
                results.setdefault(("llama", t, ft, kind), []).append(v)
            for (w, kind), v in textgen_round(textgen_bin, files, t, args.prompt, args.gen,
                                              args.quick, work).items():
                results.setdefault(("textgen", t, w, kind), []).append(v)

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    model = "gpt2_learned (tests/golden, --quick)" if args.quick else args.model
    page = [f"Peers: textgen vs llama.cpp, {model} (random weights), tokens/s, "
            f"median of {args.rounds} interleaved round(s)", "",
            f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); {now}",
            f"- textgen {git_commit(REPO)[:12]}; llama.cpp {llama_commit[:12]} ({llama_flags})",
            f"- prefill: one {args.prompt}-token prompt; decode: batch 1, llama.cpp {args.gen} "
            f"tokens from an empty context, textgen one step with {max(1, args.gen // 2)} "
            "cached",
            f"- llama.cpp's OMP_WAIT_POLICY: {args.llama_omp_wait_policy or 'as inherited'}; "
            f"each llama.cpp figure the fastest of -mmp {args.llama_mmap}", ""]
    page += table(results, threads_list, args.prompt, args.gen, args.rounds)
    text = "\n".join(page) + "\n"
    # Every round's figure, for the spread the medians hide.
    with open(os.path.join(work, "peers-samples.json"), "w") as f:
        json.dump([{"engine": k[0], "threads": k[1], "weights": k[2], "test": k[3],
                    "tokens_per_s": v} for k, v in sorted(results.items())], f, indent=1)
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
        print(f"peers: failed: {e}", file=sys.stderr)
        sys.exit(1)
