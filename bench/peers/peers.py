#!/usr/bin/env python3
"""textgen against llama.cpp on the same GGUF files, on this machine, in one run.

    /usr/bin/python3 bench/peers/peers.py --llama_cpp PATH [--threads 1,2] [--rounds 3]
        [--model gpt2-small|smollm2-135m|qwen2.5-0.5b] [--types f32,...,q4_k_m] [--prompt 512]
        [--gen 128] [--quick] [--out FILE.md]

PATH is a llama.cpp source: a checkout (its CMakeLists.txt at the top), a bare git directory
(what the session's `fetch` tool gives: HEAD is exported with `git archive`, without models/),
or an existing build directory holding bin/llama-bench. llama.cpp is never vendored or
downloaded here; it is built outside the source tree, in --work (default build/peers/):

    cmake -S SRC -B WORK/llama.cpp-build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \\
          -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF
    cmake --build WORK/llama.cpp-build -j2 --target llama-bench llama-quantize

(GGML_NATIVE=ON: llama.cpp compiled for this CPU, its fastest form; --portable for OFF.)
A build directory lacking llama-quantize (or, for kl.py, llama-perplexity) gets it built there.

The model: random weights in a Hugging Face layout (tools/make_checkpoint.py --preset MODEL:
gpt2-small, smollm2-135m or qwen2.5-0.5b, drawn with its deep init, whose peaked logits
bench/peers/kl.py needs; timings do not depend on the values), written as GGUF F32, F16,
BF16 and Q8_0 by tools/hf_to_gguf.py (no tokenizer: tokenizer.ggml.model "none", both
engines feed token ids), and as Q4_0, Q4_K_M, Q5_K_M and Q6_K by llama.cpp's llama-quantize
from the F32 file (its own mixes: Q4_K_M keeps some matrices in Q6_K, and a row length that
is not a multiple of 256, Qwen2.5-0.5B's 896, falls back to Q5_0/Q5_1/Q8_0 ... there).
--types picks the files (default all; --quick: the four converted ones). Both engines load
the very same files:

  llama.cpp  llama-bench -m FILE -p P -n 0 / -p 0 -n G -t T -r 1 -o json: prefill = one P-token
             prompt into an empty context; decode = G tokens one at a time at batch 1, from an
             empty context (so about G/2 positions cached on average).
  textgen    build/bench/textgen_model_bench --models=FILE[:bf16|:int8] --threads=T
             --prefill_tokens=P --decode_context=G/2: prefill/<file>/tokens:P and
             decode/<file>/batch:1 (one decode step with G/2 positions cached).

Pairs (textgen weights in memory <- file, llama.cpp file): F32 <- F32 vs F32; BF16 <- BF16 vs
F16 and vs BF16 (textgen holds no F16); INT8 <- Q8_0 vs Q8_0 (textgen's int8 is Q8_0's
numerics: the file's blocks come back unchanged); each quantized file against itself, textgen
holding its block-quantized matrices as stored. A file textgen cannot load yet (it says why
once, at the start) shows "—" in its cells instead of failing the run.

The bandwidth bound: build/bench/textgen_stream_read (beside textgen_model_bench) measures
this machine's read bandwidth at each thread count before the rounds; a batch-1 decode step
reads the bytes bench/peers/gguf_tensors.py counts in the llama.cpp file of the row (every
tensor but the lookup-only embedding tables), so tokens/s <= bandwidth / bytes, and the
table gives each engine's decode as a share of that bound. (textgen's int8 layout holds a
float scale per 32 weights where Q8_0 holds a half: 6 % more bytes than the bound counts.)
Prefill reads the weights once per pass, so it is bound by arithmetic, not by this.

llama.cpp's threads are OpenMP's, and which wait policy suits them depends on the machine:
on one shared with other work its spinning workers (OpenMP's default) collapse at 2 threads on
2 cores (2 tokens/s instead of 57 for Q8_0 decode, measured under load), while on a quiet one
OMP_WAIT_POLICY=PASSIVE made its 2-thread decode 4.4x slower (Q8_0 36 vs 160 tokens/s). So
llama-bench runs with each of --llama_omp_wait_policy's values (default "default,PASSIVE":
the environment's, then PASSIVE) and each figure is the fastest; the page lists which
settings won each one, round by round.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_tensors  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3"  # Debian's, with torch (hf_to_gguf.py needs it).
BUILD_LOCK = "/tmp/textgen-build.lock"  # Every textgen build here goes through it.

# (row label, textgen file type, textgen weights in memory, llama.cpp file type); weights ""
# = as the file stores them (block-quantized matrices are never widened): f32 activations,
# the exact product; "int8" on a quantized file: the same blocks times int8 activations,
# llama.cpp's arithmetic.
PAIRS = [
    ("F32", "f32", "f32", "f32"),
    ("BF16 vs F16", "bf16", "bf16", "f16"),
    ("BF16 vs BF16", "bf16", "bf16", "bf16"),
    ("INT8 vs Q8_0", "q8_0", "int8", "q8_0"),
    ("W8A32 vs Q8_0", "q8_0", "w8a32", "q8_0"),
    ("Q4_0", "q4_0", "", "q4_0"),
    ("Q4_0, int8 activations", "q4_0", "int8", "q4_0"),
    ("Q4_K_M", "q4_k_m", "", "q4_k_m"),
    ("Q4_K_M, int8 activations", "q4_k_m", "int8", "q4_k_m"),
    ("Q5_K_M", "q5_k_m", "", "q5_k_m"),
    ("Q5_K_M, int8 activations", "q5_k_m", "int8", "q5_k_m"),
    ("Q6_K", "q6_k", "", "q6_k"),
    ("Q6_K, int8 activations", "q6_k", "int8", "q6_k"),
]
# Written by tools/hf_to_gguf.py from the checkpoint ...
CONVERTED_TYPES = ["f32", "f16", "bf16", "q8_0"]
# ... and by llama-quantize from the F32 file (its type names).
QUANTIZED_TYPES = {"q4_0": "Q4_0", "q4_k_m": "Q4_K_M", "q5_k_m": "Q5_K_M", "q6_k": "Q6_K"}
FILE_TYPES = CONVERTED_TYPES + list(QUANTIZED_TYPES)
MODELS = ["gpt2-small", "smollm2-135m", "qwen2.5-0.5b"]  # tools/make_checkpoint.py presets
# make_checkpoint.py's init per model, where its defaults will not do. Qwen2.5-0.5B's 24
# SwiGLU layers at the default gains (q/k 1.6, MLP 1.5) are chaotic: bf16 rounding of the
# weights alone moved its next-token distributions by a mean KLD of 0.006 (GPT-2 small's:
# 0.0001) and Q4_K_M by 1.75 (30 % same top), no trained model's regime. At 1.2 / 1.35 its
# distributions are as peaked as GPT-2 small's (3.1 nats mean entropy, top-1 p 0.5) and
# bf16 moves them by 0.001 (bench/README.md, "Quantized files").
MODEL_INIT = {"qwen2.5-0.5b": ["--qk_gain", "1.2", "--fc_gain", "1.35"]}


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


def describe_build_dir(path: str) -> tuple[str, str]:
    """(commit, flags) of a llama.cpp build directory this script did not make: the flags
    from its CMakeCache.txt, the commit from its source's git or our export stamp."""
    cache = {}
    cache_path = os.path.join(path, "CMakeCache.txt")
    if os.path.exists(cache_path):
        for line in open(cache_path, errors="replace"):
            if ":" in line and "=" in line and not line.startswith(("//", "#")):
                key, value = line.split("=", 1)
                cache[key.split(":", 1)[0]] = value.strip()
    keys = ["CMAKE_BUILD_TYPE", "GGML_NATIVE", "BUILD_SHARED_LIBS", "LLAMA_CURL", "GGML_OPENMP"]
    flags = " ".join(f"-D{k}={cache[k]}" for k in keys if k in cache) or "?"
    src = cache.get("CMAKE_HOME_DIRECTORY", "")
    commit = git_commit(src) if src else "unknown"
    stamp = os.path.join(src, ".textgen-peers-commit")
    if commit == "unknown" and src and os.path.exists(stamp):
        commit = open(stamp).read().strip()
    if commit == "unknown" and src:
        commit = f"unknown (source {src})"
    return commit, flags


def llama_binaries(path: str, work: str, native: bool,
                   targets: list[str]) -> tuple[dict[str, str], str, str]:
    """Builds (or finds) llama.cpp's `targets` (llama-bench, llama-quantize, ...); returns
    ({target: binary}, llama.cpp commit, build flags). A build directory (one holding
    bin/llama-bench) is used as it is, building there any target it lacks."""
    path = os.path.abspath(path)
    if os.access(os.path.join(path, "bin", "llama-bench"), os.X_OK):  # A build directory.
        missing = [t for t in targets if not os.access(os.path.join(path, "bin", t), os.X_OK)]
        if missing:
            if not os.path.exists(os.path.join(path, "CMakeCache.txt")):
                raise RuntimeError(f"{path} has no {', '.join(missing)} and is no CMake build "
                                   "directory to build them in")
            run(["cmake", "--build", path, "-j2", "--target", *missing],
                stdout=subprocess.DEVNULL)
        stamp = os.path.join(path, "textgen-peers-source.txt")
        if os.path.exists(stamp):
            info = open(stamp).read().split("\n", 1)
            commit, flags = info[0], info[1].strip() if len(info) > 1 else "?"
        else:
            commit, flags = describe_build_dir(path)
        return {t: os.path.join(path, "bin", t) for t in targets}, commit, flags
    src, commit = llama_source(path, work)
    build = os.path.join(work, "llama.cpp-build")
    flags = build_llama_cpp(src, build, native, targets)
    with open(os.path.join(build, "textgen-peers-source.txt"), "w") as f:
        f.write(f"{commit}\n{flags}\n")
    return {t: os.path.join(build, "bin", t) for t in targets}, commit, flags


def textgen_binaries(build: str, targets: list[str]) -> dict[str, str]:
    """Builds textgen's `targets` (textgen_model_bench, textgen_stream_read, textgen_kl) in
    `build`; returns {target: binary}."""
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        run(["cmake", "-S", REPO, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
            stdout=subprocess.DEVNULL)
    run(["flock", BUILD_LOCK, "cmake", "--build", build, "-j2", "--target", *targets],
        stdout=subprocess.DEVNULL)
    folders = {"textgen_kl": "tools"}
    return {t: os.path.join(build, folders.get(t, "bench"), t) for t in targets}


def make_checkpoint_dir(model: str, quick: bool, work: str) -> tuple[str, str]:
    """(name, Hugging Face directory) of the model's random checkpoint, written once."""
    if quick:
        return "gpt2_learned", os.path.join(REPO, "tests", "golden", "gpt2_learned")
    hf_dir = os.path.join(work, "models", model + "-hf")
    if not os.path.exists(os.path.join(hf_dir, "model.safetensors")):
        run([PYTHON, os.path.join(REPO, "tools", "make_checkpoint.py"), "--preset", model,
             *MODEL_INIT.get(model, []), "--out", hf_dir])
    return model, hf_dir


def make_gguf_files(model: str, quick: bool, work: str, types: list[str],
                    quantize: str | None = None) -> dict[str, str]:
    """The model as GGUF, one file per type in `types`; written once, reused while present.
    Quantized types need llama-quantize (`quantize`), which reads the F32 file."""
    name = "gpt2_learned" if quick else model
    out_dir = os.path.join(work, "models")
    os.makedirs(out_dir, exist_ok=True)
    # Files an older script wrote from another generator (bench/make_gpt2_small.py, another
    # init) go, the checkpoint with them.
    stamp = os.path.join(out_dir, f"{name}.source")
    source = ("tests/golden/gpt2_learned" if quick else
              " ".join(["make_checkpoint.py", model, *MODEL_INIT.get(model, [])])) + "\n"
    if not (os.path.exists(stamp) and open(stamp).read() == source):
        for old in os.listdir(out_dir):
            if old.startswith(name + "-") and old.endswith(".gguf"):
                os.remove(os.path.join(out_dir, old))
        if not quick:
            shutil.rmtree(os.path.join(out_dir, name + "-hf"), ignore_errors=True)
    name, hf_dir = make_checkpoint_dir(model, quick, work)
    with open(stamp, "w") as f:
        f.write(source)
    files = {}
    for t in (["f32"] if any(t in QUANTIZED_TYPES for t in types) else []) + types:
        path = os.path.join(out_dir, f"{name}-{t}.gguf")
        if not os.path.exists(path):
            tmp = path + ".tmp"
            if t in QUANTIZED_TYPES:
                if not quantize:
                    raise RuntimeError(f"{t} needs llama-quantize")
                run([quantize, files["f32"], tmp, QUANTIZED_TYPES[t]], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
            else:
                run([PYTHON, os.path.join(REPO, "tools", "hf_to_gguf.py"), hf_dir, tmp,
                     "--type", t], stdout=subprocess.DEVNULL)
            os.replace(tmp, path)
        files[t] = path
    return files


def llama_round(binary: str, files: dict[str, str], pairs: list[tuple], threads: int, p: int,
                g: int, reps: int, omp_wait_policies: list[str],
                mmap: str) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], str]]:
    """({(file type, "prefill"|"decode"): tokens/s}, {same key: the settings that gave it})
    from llama-bench's JSON: the fastest over the OMP_WAIT_POLICY values ("default": the
    environment's, else OpenMP's own) and the `mmap` settings llama-bench ran (its -mmp
    list), each setting named as "OMP_WAIT_POLICY=..., -mmp N"."""
    types = sorted({pair[3] for pair in pairs})
    out: dict[tuple[str, str], float] = {}
    won: dict[tuple[str, str], str] = {}
    for policy in omp_wait_policies:
        env = dict(os.environ)
        if policy != "default":
            env["OMP_WAIT_POLICY"] = policy
        for kind, pn in (("prefill", ["-p", str(p), "-n", "0"]),
                         ("decode", ["-p", "0", "-n", str(g)])):
            cmd = [binary, *sum((["-m", files[t]] for t in types), []), *pn, "-t",
                   str(threads), "-r", str(reps), "-mmp", mmap, "-o", "json"]
            r = run(cmd, capture_output=True, text=True, env=env)
            for test in json.loads(r.stdout):
                t = next(t for t in types if os.path.samefile(test["model_filename"], files[t]))
                ts = float(test["avg_ts"])
                if ts > out.get((t, kind), 0.0):
                    out[(t, kind)] = ts
                    won[(t, kind)] = (f"OMP_WAIT_POLICY={policy}, "
                                      f"-mmp {int(bool(test.get('use_mmap', True)))}")
    return out, won


def textgen_entry(files: dict[str, str], file_type: str, weights: str) -> str:
    """A textgen_model_bench --models entry: FILE:WEIGHTS, or FILE as the file stores it."""
    return files[file_type] + (f":{weights}" if weights else "")


def textgen_bench_name(files: dict[str, str], file_type: str, weights: str) -> str:
    """textgen_model_bench's name for the entry (its ModelName)."""
    base = os.path.basename(files[file_type])
    return base if weights in ("", "f32") else f"{base}-{weights}"


def textgen_refusals(binary: str, files: dict[str, str],
                     pairs: list[tuple]) -> dict[tuple[str, str], str]:
    """{(file type, weights): why} for each entry textgen cannot load (yet): each is loaded
    once, alone, running no benchmark."""
    refused = {}
    for _, ft, w, _ in pairs:
        if (ft, w) in refused:
            continue
        r = subprocess.run([binary, "--models=" + textgen_entry(files, ft, w),
                            "--benchmark_filter=^$"], capture_output=True, text=True)
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["exit status %d" % r.returncode])[-1]
            refused[(ft, w)] = why
            log(f"textgen cannot load {textgen_entry(files, ft, w)}: {why}")
    return refused


def textgen_round(binary: str, files: dict[str, str], pairs: list[tuple], threads: int, p: int,
                  g: int, quick: bool, work: str) -> dict[tuple[str, str, str], float]:
    """{(file type, textgen weights, "prefill"|"decode"): tokens/s} from
    textgen_model_bench's JSON."""
    entries = sorted({(ft, w) for _, ft, w, _ in pairs})
    json_out = os.path.join(work, "textgen_model_bench.json")
    cmd = [binary, "--models=" + ",".join(textgen_entry(files, ft, w) for ft, w in entries),
           f"--threads={threads}", f"--prefill_tokens={p}", f"--decode_context={max(1, g // 2)}",
           f"--benchmark_filter=^(decode/[^/]*/batch:1|prefill/[^/]*/tokens:{p})(/|$)",
           f"--benchmark_out={json_out}", "--benchmark_out_format=json",
           f"--benchmark_min_time={0.05 if quick else 0.5}"]
    run(cmd, stdout=subprocess.DEVNULL)
    with open(json_out) as f:
        rows = json.load(f)["benchmarks"]
    out = {}
    for ft, w in entries:
        name = textgen_bench_name(files, ft, w)
        for kind, bench in (("prefill", f"prefill/{name}/tokens:{p}"),
                            ("decode", f"decode/{name}/batch:1")):
            # Names end in "/real_time" (the benchmarks time wall clock).
            row = next((r for r in rows if r["name"].split("/real_time")[0] == bench), None)
            if row is None or "items_per_second" not in row:
                raise RuntimeError(f"textgen_model_bench printed no {bench}")
            out[(ft, w, kind)] = float(row["items_per_second"])
    return out


def read_bandwidth(binary: str, threads_list: list[int]) -> dict[int, float]:
    """{threads: median GB/s} from textgen_stream_read (1 GiB, 5 passes)."""
    r = run([binary, "--threads=" + ",".join(map(str, threads_list)), "--size_mib=1024"],
            capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
        if line.startswith("stream_read ") and "threads" in fields:
            out[int(fields["threads"])] = float(fields["median_gbps"])
    if set(out) != set(threads_list):
        raise RuntimeError(f"textgen_stream_read printed {r.stdout!r}")
    return out


def short(commit: str) -> str:
    """A commit's first 12 hex digits; anything else as it is."""
    return commit[:12] if all(c in "0123456789abcdef" for c in commit) else commit


def cpu_model() -> str:
    r = subprocess.run(["lscpu"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def table(results, pairs, refused, bound_bytes, bandwidth, threads_list, p) -> list[str]:
    """The page's table: per thread count and pair, medians and ratios, and decode as a
    share of the bandwidth bound (bandwidth / the llama.cpp file's decode bytes)."""
    def med(key):
        return statistics.median(results[key]) if key in results else None

    def fmt(x, spec=".1f", suffix=""):
        return "—" if x is None else f"{x:{spec}}{suffix}"

    lines = [f"| threads | weights (textgen vs llama.cpp) | prefill {p}: textgen | llama.cpp | "
             f"ratio | decode b1: textgen | llama.cpp | ratio | decode bound | textgen / bound "
             f"| llama.cpp / bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in threads_list:
        for label, ft, w, lt in pairs:
            cells = []
            for kind in ("prefill", "decode"):
                ours, theirs = med(("textgen", t, (ft, w), kind)), med(("llama", t, lt, kind))
                ratio = ours / theirs if ours is not None and theirs else None
                cells += [fmt(ours), fmt(theirs), fmt(ratio, ".2f", "×")]
            bound = bandwidth[t] * 1e9 / bound_bytes[lt] if t in bandwidth else None
            ours, theirs = med(("textgen", t, (ft, w), "decode")), med(("llama", t, lt, "decode"))
            cells += [fmt(bound),
                      fmt(None if bound is None or ours is None else 100 * ours / bound,
                          ".0f", " %"),
                      fmt(None if bound is None or theirs is None else 100 * theirs / bound,
                          ".0f", " %")]
            note = " (textgen: cannot load)" if (ft, w) in refused else ""
            lines.append(f"| {t} | {label}{note} | " + " | ".join(cells) + " |")
        best = []
        for kind in ("prefill", "decode"):
            ours = max((med(("textgen", t, (ft, w), kind)) or 0) for _, ft, w, _ in pairs)
            theirs = max(med(("llama", t, lt, kind)) for _, _, _, lt in pairs)
            best += [fmt(ours or None), f"{theirs:.1f}",
                     fmt(ours / theirs if ours else None, ".2f", "×")]
        lines.append(f"| {t} | **best of each** | " + " | ".join(best) + " | | | |")
    return lines


def files_section(files: dict[str, str], types: list[str], bound_bytes: dict[str, int],
                  bandwidth: dict[int, float]) -> list[str]:
    """What each file holds and what a decode step reads of it, and the bandwidth."""
    lines = ["| file | size | decode reads | matrices (ggml types: count) |", "|---|---|---|---|"]
    for t in types:
        tensors = gguf_tensors.read_tensors(files[t])
        lines.append(f"| {os.path.basename(files[t])} | {os.path.getsize(files[t]) / 1e6:.1f} MB "
                     f"| {bound_bytes[t] / 1e6:.1f} MB | {gguf_tensors.type_summary(tensors)} |")
    if bandwidth:
        measured = ", ".join(f"{bw:.1f} GB/s at {t} thread(s)"
                             for t, bw in sorted(bandwidth.items()))
        lines += ["", "Read bandwidth (textgen_stream_read, median of 5 passes over 1 GiB): "
                  f"{measured}; decode bound = bandwidth / decode reads."]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama_cpp", default=os.environ.get("TEXTGEN_LLAMA_CPP"),
                    help="llama.cpp checkout, git directory or build directory "
                         "(default: $TEXTGEN_LLAMA_CPP)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default="gpt2-small", choices=MODELS)
    ap.add_argument("--types", help="file types, comma-separated, of " + ",".join(FILE_TYPES) +
                    " (default all; --quick: " + ",".join(CONVERTED_TYPES) + "); a pair runs "
                    "when its files are among them")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--portable", action="store_true", help="build llama.cpp with GGML_NATIVE=OFF")
    ap.add_argument("--textgen_build", default=os.environ.get("TEXTGEN_BUILD_DIR",
                                                              os.path.join(REPO, "build")))
    ap.add_argument("--llama_omp_wait_policy", default="default,PASSIVE",
                    help="OMP_WAIT_POLICY values for llama-bench (its threads are "
                         "OpenMP's), comma-separated; each figure is the fastest. 'default' "
                         "leaves the environment's (else OpenMP's own, spinning)")
    ap.add_argument("--llama_mmap", default="0,1",
                    help="llama-bench -mmp values; each row takes the fastest. llama.cpp "
                         "maps the file by default (1); reading it into its own buffers (0) "
                         "decoded F32 ~8 %% faster on one core here")
    ap.add_argument("--textgen_bench", help="a built textgen_model_bench to use as it is "
                                            "(default: build it in --textgen_build); "
                                            "textgen_stream_read is looked for beside it")
    ap.add_argument("--work", help="llama.cpp build, GGUF files (default TEXTGEN_BUILD/peers)")
    ap.add_argument("--out", help="also write the page (markdown) here")
    ap.add_argument("--llama_commit", help="llama.cpp's commit, for the page, when its build "
                                           "directory cannot tell")
    args = ap.parse_args(argv)
    if not args.llama_cpp:
        ap.error("--llama_cpp (or $TEXTGEN_LLAMA_CPP) is required")
    try:
        threads_list = [int(t) for t in args.threads.split(",")]
        if any(t < 1 for t in threads_list) or args.rounds < 1 or args.prompt < 1 or args.gen < 2:
            raise ValueError
    except ValueError:
        ap.error("--threads are positive integers, --rounds >= 1, --prompt >= 1, --gen >= 2")
    types = (args.types.split(",") if args.types else
             CONVERTED_TYPES if args.quick else FILE_TYPES)
    if any(t not in FILE_TYPES for t in types):
        ap.error(f"--types: each of {','.join(FILE_TYPES)}")
    pairs = [pair for pair in PAIRS if pair[1] in types and pair[3] in types]
    if not pairs:
        ap.error(f"--types {','.join(types)}: no pair has both its files there")
    if args.quick:
        args.prompt, args.gen, args.rounds = 64, 16, 1
    textgen_build = os.path.abspath(args.textgen_build)
    work = os.path.abspath(args.work or os.path.join(textgen_build, "peers"))
    os.makedirs(work, exist_ok=True)

    quantized = any(t in QUANTIZED_TYPES for t in types)
    llama, llama_commit, llama_flags = llama_binaries(
        args.llama_cpp, work, not args.portable,
        ["llama-bench"] + (["llama-quantize"] if quantized else []))
    llama_commit = args.llama_commit or llama_commit
    if args.textgen_bench:
        textgen_bin = args.textgen_bench
        stream_read = os.path.join(os.path.dirname(textgen_bin), "textgen_stream_read")
    else:
        built = textgen_binaries(textgen_build, ["textgen_model_bench", "textgen_stream_read"])
        textgen_bin, stream_read = built["textgen_model_bench"], built["textgen_stream_read"]
    files = make_gguf_files(args.model, args.quick, work, types, llama.get("llama-quantize"))
    bound_bytes = {t: gguf_tensors.decode_bytes(gguf_tensors.read_tensors(files[t]))
                   for t in types}
    refused = textgen_refusals(textgen_bin, files, pairs)
    loadable = [pair for pair in pairs if (pair[1], pair[2]) not in refused]
    bandwidth = {}
    if os.access(stream_read, os.X_OK):
        bandwidth = read_bandwidth(stream_read, threads_list)
    else:
        log(f"no {stream_read}: the table has no bandwidth bound")

    results: dict[tuple, list[float]] = {}
    # Which llama.cpp settings won each figure, round by round.
    winners: dict[tuple, list[str]] = {}
    policies = [x for x in args.llama_omp_wait_policy.split(",") if x] or ["default"]
    for r in range(args.rounds):
        for t in threads_list:
            log(f"round {r + 1}/{args.rounds}, {t} thread(s)")
            figures, won = llama_round(llama["llama-bench"], files, pairs, t, args.prompt,
                                       args.gen, 1, policies, args.llama_mmap)
            for (ft, kind), v in figures.items():
                results.setdefault(("llama", t, ft, kind), []).append(v)
                winners.setdefault((t, ft, kind), []).append(won[(ft, kind)])
            if loadable:
                for (ft, w, kind), v in textgen_round(textgen_bin, files, loadable, t,
                                                      args.prompt, args.gen, args.quick,
                                                      work).items():
                    results.setdefault(("textgen", t, (ft, w), kind), []).append(v)

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    model = "gpt2_learned (tests/golden, --quick)" if args.quick else args.model
    page = [f"Peers: textgen vs llama.cpp, {model} (random weights), tokens/s, "
            f"median of {args.rounds} interleaved round(s)", "",
            f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); {now}",
            f"- textgen {git_commit(REPO)[:12]}; llama.cpp {short(llama_commit)} ({llama_flags})",
            f"- prefill: one {args.prompt}-token prompt; decode: batch 1, llama.cpp {args.gen} "
            f"tokens from an empty context, textgen one step with {max(1, args.gen // 2)} "
            "cached",
            f"- each llama.cpp figure the fastest of OMP_WAIT_POLICY {', '.join(policies)} "
            f"(default: {os.environ.get('OMP_WAIT_POLICY', 'unset')}) and -mmp "
            f"{args.llama_mmap}, round by round", ""]
    page += table(results, pairs, refused, bound_bytes, bandwidth, threads_list, args.prompt)
    page += ["", "llama.cpp's winning settings, per figure (each round's):", ""]
    page += [f"- {ft} {kind}, {t} thread(s): " + "; ".join(w)
             for (t, ft, kind), w in sorted(winners.items(), key=str)]
    page += [""] + files_section(files, types, bound_bytes, bandwidth)
    if refused:
        page += [""] + [f"- textgen cannot load {os.path.basename(files[ft])}"
                        f"{':' + w if w else ''} yet: {why}" for (ft, w), why in refused.items()]
    text = "\n".join(page) + "\n"
    # Every round's figure, for the spread the medians hide.
    with open(os.path.join(work, "peers-samples.json"), "w") as f:
        json.dump([{"engine": k[0], "threads": k[1],
                    "weights": k[2] if k[0] == "llama" else "%s:%s" % k[2], "test": k[3],
                    "tokens_per_s": v} for k, v in sorted(results.items(), key=str)], f,
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
            ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"peers: failed: {e}", file=sys.stderr)
        sys.exit(1)
