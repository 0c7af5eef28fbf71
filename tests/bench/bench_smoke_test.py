#!/usr/bin/env python3
"""Smoke tests of bench/: each benchmark runs and prints what it should. Never a timing.

    bench_smoke_test.py model_bench BINARY MODEL_DIR
    bench_smoke_test.py stream_read BINARY
    bench_smoke_test.py peak BINARY
    bench_smoke_test.py block_kernel BINARY
    bench_smoke_test.py sampler BINARY
    bench_smoke_test.py spec BINARY MODEL_DIR DRAFT_DIR
    bench_smoke_test.py loadgen_in_process LOADGEN MODEL_DIR
    bench_smoke_test.py loadgen_grpc LOADGEN SERVER MODEL_DIR
    bench_smoke_test.py torch_reference SCRIPT MODEL_DIR
    bench_smoke_test.py report REPORT_SCRIPT

Each asserts on the output's structure: the benchmark names, that every figure parses as a
positive number, and for the load generator streams=2 with every request answered in full
(ok=2, errors=0, rejections=0, generated_tokens = 2 x max_new_tokens). Exit 0 = pass.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

TIMEOUT = 120  # Per command: against a hang, not a performance requirement.


def fail(msg: str, output: str = "") -> None:
    print(f"FAIL: {msg}\n--- output ---\n{output}", file=sys.stderr)
    sys.exit(1)


def run(cmd: list[str]) -> str:
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=TIMEOUT)
    if p.returncode != 0:
        fail(f"exit status {p.returncode}", p.stdout + p.stderr)
    return p.stdout


def key_values(line: str, prefix: str) -> dict[str, str]:
    if not line.startswith(prefix + " "):
        fail(f"line does not start with {prefix!r}", line)
    pairs = line.split()[1:]
    kv = dict(p.split("=", 1) for p in pairs if "=" in p)
    if len(kv) != len(pairs):
        fail("not all fields are key=value", line)
    return kv


def positive(kv: dict[str, str], key: str, line: str) -> float:
    try:
        v = float(kv[key])
    except (KeyError, ValueError):
        fail(f"missing or non-numeric {key}", line)
    if not v > 0:
        fail(f"{key} = {v} is not positive", line)
    return v


def model_bench(binary: str, model: str) -> None:
    # The model twice: as stored (F32) and with bf16 weights in memory, on 2 threads.
    out = run([binary, f"--models={model},{model}:bf16:kvbf16", "--threads=2",
               "--benchmark_min_time=0.01", "--benchmark_format=json"])
    report = json.loads(out)
    if report["context"].get("decoder_threads") != "2":
        fail("decoder_threads is not 2", out)
    base_name = os.path.basename(os.path.normpath(model))
    with open(os.path.join(model, "config.json")) as f:
        ctx = json.load(f)["n_positions"]
    expected = set()
    for name in (base_name, base_name + "-bf16-kvbf16"):
        expected |= {f"decode/{name}/batch:1", f"decode/{name}/batch:8",
                     f"decode/{name}/batch:16", f"decode/{name}/batch:32", f"prefill/{name}/tokens:{min(128, ctx)}",
                     f"prefill/{name}/tokens:{min(512, ctx)}", f"full_context/{name}/cache:{ctx}"}
        expected |= {f"verify/{name}/chunk:{chunk}" for chunk in (2, 3, 4, 5, 6, 9)}
    got = {}
    for b in report["benchmarks"]:
        base = b["name"].removesuffix("/real_time")
        if "error_occurred" in b and b["error_occurred"]:
            fail(f"{base}: {b.get('error_message')}", out)
        got[base] = b
    if set(got) != expected:
        fail(f"benchmarks {sorted(got)} != {sorted(expected)}", out)
    for base, b in got.items():
        if not b.get("items_per_second", 0) > 0:
            fail(f"{base}: no items_per_second", out)
    print(f"ok: {len(got)} benchmarks")


def stream_read(binary: str) -> None:
    out = run([binary, "--threads=1,2", "--size_mib=16", "--repetitions=1"])
    lines = out.strip().splitlines()
    if len(lines) != 2:
        fail("expected one line per thread count", out)
    for line, threads in zip(lines, ("1", "2")):
        kv = key_values(line, "stream_read")
        if kv.get("threads") != threads or kv.get("size_mib") != "16":
            fail(f"expected threads={threads} size_mib=16", line)
        positive(kv, "best_gbps", line)
        positive(kv, "median_gbps", line)
    print("ok: stream_read")


def peak(binary: str) -> None:
    out = run([binary, "--threads=1,2", "--seconds=0.02", "--repetitions=1"])
    lines = out.strip().splitlines()
    if not lines or not re.match(r'^peak cpu=".*" nominal_mhz=\d+ flags=\S*$', lines[0]):
        fail("expected the CPU line first", out)
    seen = {}
    for line in lines[1:]:
        kv = key_values(line, "peak")
        seen.setdefault(kv.get("family"), []).append(kv.get("threads"))
        if "skipped" in kv:
            if not kv["skipped"].startswith("no_"):
                fail("a skipped family names the flag it lacks", line)
            continue
        positive(kv, "gops", line)
        positive(kv, "ops_per_instruction", line)
    want = ["f32_fma256", "f32_fma512", "int8_vnni512", "bf16_dp512", "amx_int8", "amx_bf16"]
    if sorted(seen) != sorted(want) or any(t != ["1", "2"] for t in seen.values()):
        fail(f"expected each of {want} at threads 1 and 2", out)
    print("ok: peak")


def sampler(binary: str) -> None:
    out = run([binary, "--benchmark_min_time=0.01", "--benchmark_format=json"])
    rows = json.loads(out[out.index("{"):])["benchmarks"]
    names = sorted(r["name"] for r in rows)
    if names != ["norm/libm", "norm/textgen"]:
        fail("expected norm/libm and norm/textgen", out)
    for r in rows:
        if not r.get("items_per_second", 0) > 0:
            fail("expected a positive items_per_second", json.dumps(r))
    print("ok: sampler")


def spec(binary: str, model: str, draft: str) -> None:
    out = run([binary, "--model", model, "--draft_model", draft, "--rounds", "1",
               "--prompts", "2", "--max_new_tokens", "24"])
    if "outputs identical to off in every mode and round: yes" not in out:
        fail("expected every mode's outputs to equal off's", out)
    for mode in ("off", "ngram", "draft"):
        row = re.search(rf"^{mode}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x", out, re.M)
        if row is None or not float(row.group(2)) > 0:
            fail(f"expected a row for {mode} with a positive median", out)
    if not re.search(r"^cpu \"[^\"]+\"", out, re.M):
        fail("expected the CPU model on the first line", out)
    print("ok: spec")


def block_kernel(binary: str) -> None:
    # The hot single-row products only: the streamed ones pack ~100 MB per type.
    out = run([binary, "--benchmark_filter=rows:1/hot", "--benchmark_min_time=0.01",
               "--benchmark_format=json"])
    rows = json.loads(out[out.index("{"):])["benchmarks"]
    names = sorted(r["name"].split("/real_time")[0] for r in rows)
    want = sorted(f"block/{t}/{a}/rows:1/hot" for t in ("Q4_0", "Q5_0", "Q8_0", "Q4_K", "Q5_K",
                                                       "Q6_K") for a in ("f32", "int8"))
    if names != want:
        fail(f"expected {want}", out)
    for r in rows:
        if not r.get("bytes_per_second", 0) > 0 or not r.get("items_per_second", 0) > 0:
            fail("expected positive bytes_per_second and items_per_second", json.dumps(r))
    print("ok: block_kernel")


def check_loadgen_line(out: str, mode: str, max_new_tokens: int, want_rss: bool) -> None:
    lines = [line for line in out.splitlines() if line.startswith("loadgen ")]
    if len(lines) != 1:
        fail("expected exactly one loadgen line", out)
    line = lines[0]
    kv = key_values(line, "loadgen")
    for key in ("commit", "date", "model", "threads"):
        if not kv.get(key):
            fail(f"missing {key}", line)
    want = {"mode": mode, "streams": "2", "requests_total": "2", "ok": "2", "errors": "0",
            "rejections": "0", "generated_tokens": str(2 * max_new_tokens),
            "max_new_tokens": str(max_new_tokens)}
    for key, value in want.items():
        if kv.get(key) != value:
            fail(f"expected {key}={value}, got {kv.get(key)}", line)
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", kv["date"]):
        fail("date is not ISO 8601 UTC", line)
    for key in ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
                "wall_s"):
        positive(kv, key, line)
    if float(kv["ttft_p99_ms"]) < float(kv["ttft_p50_ms"]):
        fail("p99 below p50", line)
    if want_rss:
        positive(kv, "rss_mib", line)
        positive(kv, "rss_budget_mib", line)
    print(f"ok: {line}")


def loadgen_in_process(loadgen: str, model: str) -> None:
    out = run([loadgen, "--in_process", f"--model={model}", "--streams=2", "--requests=1",
               "--prompt_tokens=16", "--max_new_tokens=16", "--threads=2",
               "--weights_dtype=bf16"])
    check_loadgen_line(out, "in_process", 16, want_rss=False)
    if " threads=2 " not in out:
        fail("expected threads=2", out)


def loadgen_grpc(loadgen: str, server: str, model: str) -> None:
    log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"bench_smoke_server_{os.getpid()}.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([server, f"--model={model}", "--port=0", "--host=127.0.0.1",
                                 "--num_slots=4", "--debug_attention=false"],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        deadline = time.monotonic() + 60  # Bounded wait for the port, not a timing.
        while time.monotonic() < deadline and port is None and proc.poll() is None:
            m = re.search(r"serving on port (\d+)", open(log_path).read())
            port = m.group(1) if m else None
            time.sleep(0.05)
        if port is None:
            fail("the server never listened", open(log_path).read())
        out = run([loadgen, f"--target=127.0.0.1:{port}", "--streams=2", "--requests=1",
                   "--prompt_tokens=16", "--max_new_tokens=16", f"--server_pid={proc.pid}"])
        check_loadgen_line(out, "grpc", 16, want_rss=True)
        # Bad input is a clear error with a non-zero exit, not a hang or a crash.
        p = subprocess.run([loadgen, f"--target=127.0.0.1:{port}", "--streams=0"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=TIMEOUT)
        if p.returncode != 2 or "--streams" not in p.stderr:
            fail(f"--streams=0: exit {p.returncode}", p.stderr)
        p = subprocess.run([loadgen, f"--target=127.0.0.1:{port}", "--prompt_tokens=250",
                            "--max_new_tokens=250"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
        if p.returncode != 2 or "context" not in p.stderr:
            fail(f"prompt + output beyond the context: exit {p.returncode}", p.stderr)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.unlink(log_path)


def torch_reference(script: str, model: str) -> None:
    out = run([sys.executable, script, f"--models={model}", "--filter=batch:1",
               "--min_time=0.01", "--repetitions=1"])
    name = os.path.basename(os.path.normpath(model))
    seen = set()
    for line in out.strip().splitlines():
        kv = key_values(line, "torch")
        positive(kv, "tokens_per_s", line)
        positive(kv, "ms", line)
        seen.add((kv["config"], kv["bench"]))
    want = {("linear", f"decode/{name}/batch:1"), ("mv", f"decode/{name}/batch:1")}
    if seen != want:
        fail(f"benchmarks {sorted(seen)} != {sorted(want)}", out)
    print("ok: torch_reference")


def report(script: str) -> None:
    """bench/report.py on a synthetic run directory: ratios, bounds and verdicts."""
    import tempfile

    with tempfile.TemporaryDirectory() as run_dir:
        def write(name: str, text: str) -> None:
            with open(os.path.join(run_dir, name), "w") as f:
                f.write(text)

        write("env.txt", "commit=abc1234\ndate=2026-01-01T00:00:00Z\nthreads=1\nquick=0\n"
                         "stream_mib=1024\ngpt2_stream_bytes_f32=500000000\n")
        write("stream.txt", "stream_read threads=1 size_mib=1024 repetitions=5 "
                            "best_gbps=11.00 median_gbps=10.00\n")
        bench = lambda name, v: {"name": name + "/real_time", "run_name": name + "/real_time",
                                 "run_type": "aggregate", "aggregate_name": "median",
                                 "items_per_second": v}
        write("model_bench_t1.json", json.dumps({"benchmarks": [
            bench("decode/gpt2-small/batch:1", 19.0),          # bound 20 tok/s: 95 %
            bench("decode/shakespeare-char/batch:1", 2500.0),  # torch best 500: 5.00x
            bench("prefill/gpt2-small/tokens:512", 200.0),     # goal 250: no
            {"name": "decode/x/batch:1/real_time", "run_type": "iteration",
             "items_per_second": 1.0}]}))
        write("torch_t1.txt",
              "torch config=linear model=shakespeare-char threads=1 "
              "bench=decode/shakespeare-char/batch:1 ms=4 tokens_per_s=250.0\n"
              "torch config=mv model=shakespeare-char threads=1 "
              "bench=decode/shakespeare-char/batch:1 ms=2 tokens_per_s=500.0\n")
        line = ("loadgen commit=abc1234 date=2026-01-01T00:00:00Z mode={mode} model=gpt2-small "
                "threads=1 streams={s} requests_total={s} prompt_tokens=32 max_new_tokens=32 "
                "num_slots=64 ok={s} rejections=0 errors=0 generated_tokens=32 wall_s=1 "
                "tokens_per_s={tps} ttft_p50_ms=1 ttft_p99_ms=2 tpot_p50_ms=1 tpot_p99_ms=2"
                "{rss}\n")
        write("loadgen_t1.txt",
              line.format(mode="grpc", s=1, tps=20.0, rss=" rss_mib=600 rss_budget_mib=700")
              + line.format(mode="grpc", s=16, tps=130.0, rss=" rss_mib=800 rss_budget_mib=700")
              + line.format(mode="in_process", s=1, tps=20.5, rss=" rss_mib=500"))
        out = run([sys.executable, script, run_dir])
    want = [
        "| 1 | 10.00 | 20.0 | 40.0 |",                               # bound = 10 GB/s / 500 MB
        "| `decode/shakespeare-char/batch:1` | 2,500 | 250.0 | 500.0 | 5.00× |",
        "| … as a share of the bandwidth bound | 1 | 95.0 | ≥ 90 % | yes |",
        "| GPT-2 small prefill 512 | 1 | 200.0 | ≥ 250.0 | **no** |",
        "| 16 streams / 1 stream aggregate tokens/s (GPT-2 small, gRPC) | 1 | 6.5 | ≥ 6× | yes |",
        "| shipped model batch 1 / best PyTorch eager | 1 | 5.0 | ≥ 5× | yes |",
        "| one gRPC stream / in-process engine, % (gpt2-small) | 1 | 97.6 | ≥ 95 % | yes |",
        "| 800 MiB | ≤ 700 MiB | **no** |",                        # the worst RSS line
        "| GPT-2 small decode batch 1, BF16 weights | 1 | — | 26.0 | not measured |",
    ]
    for w in want:
        if w not in out:
            fail(f"report lacks {w!r}", out)
    if "decode/x/" in out:
        fail("a non-median row of a repeated benchmark was reported", out)
    print("ok: report")


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    {"model_bench": model_bench, "stream_read": stream_read, "peak": peak,
     "block_kernel": block_kernel, "sampler": sampler, "spec": spec,
     "loadgen_in_process": loadgen_in_process, "loadgen_grpc": loadgen_grpc,
     "torch_reference": torch_reference, "report": report}[mode](*args)


if __name__ == "__main__":
    main()
