#!/usr/bin/env python3
"""Turns one bench/run_all.sh run directory into the markdown results page.

    /usr/bin/python3 bench/report.py RUN_DIR > bench/results/<date>-<commit>.md

RUN_DIR holds what run_all.sh recorded:
    env.txt                   key=value: commit, date, cpu, blas, load, threads, quick, ...
    stream.txt                textgen_stream_read lines
    model_bench_t<T>.json     textgen_model_bench --benchmark_format=json, T threads
    model_bench_families_t<T>.json  the same for the SmolLM2/Qwen2.5-shaped models (optional)
    torch_t<T>.txt            bench/torch_reference.py lines, T threads
    loadgen_t<T>.txt          textgen_loadgen lines, T threads

Figures are medians of the repetitions each tool ran. Targets come from issue 8; a figure
that was not measured shows as "—" and its target as "not measured".
"""

from __future__ import annotations

import json
import os
import sys


def key_values(line: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in line.split()[1:] if "=" in p)


def read_lines(path: str, prefix: str) -> list[dict[str, str]]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [key_values(line) for line in f if line.startswith(prefix + " ")]


def model_bench(path: str) -> dict[str, float]:
    """benchmark name (without /real_time) -> median tokens/s."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        report = json.load(f)
    out: dict[str, float] = {}
    medians = [b for b in report["benchmarks"] if b.get("aggregate_name") == "median"]
    rows = medians or [b for b in report["benchmarks"] if b.get("run_type") != "aggregate"]
    for b in rows:
        if b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"]).removesuffix("/real_time")
        out[name] = b["items_per_second"]
    return out


def fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "—"
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def main() -> int:
    run = sys.argv[1]
    env = {}
    with open(os.path.join(run, "env.txt")) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    threads = [int(t) for t in env.get("threads", "1").split()]
    stream = {int(kv["threads"]): float(kv["median_gbps"])
              for kv in read_lines(os.path.join(run, "stream.txt"), "stream_read")}
    ours = {t: {**model_bench(os.path.join(run, f"model_bench_t{t}.json")),
                **model_bench(os.path.join(run, f"model_bench_families_t{t}.json"))}
            for t in threads}
    torch: dict[int, dict[tuple[str, str], float]] = {}
    for t in threads:
        torch[t] = {(kv["config"], kv["bench"]): float(kv["tokens_per_s"])
                    for kv in read_lines(os.path.join(run, f"torch_t{t}.txt"), "torch")}
    loadgen = {t: read_lines(os.path.join(run, f"loadgen_t{t}.txt"), "loadgen") for t in threads}

    o = []
    o.append(f"# Benchmark results {env.get('date', '?')} — commit {env.get('commit', '?')}\n")
    o.append(f"Machine: {env.get('cpu', '?')}, {env.get('cores', '?')} cores; "
             f"load average at start {env.get('load', '?')}. PyTorch {env.get('torch', '?')}, "
             f"BLAS behind libblas.so.3: {env.get('blas', '?')}. "
             f"{'`--quick` run (short timings, fewer repetitions). ' if env.get('quick') == '1' else ''}"
             f"Decoder threads: {env.get('decoder_threads', '?')}.\n")
    o.append("Command: `bench/run_all.sh" + (f" --threads \"{env['threads']}\"" if env.get("threads") else "")
             + (" --quick" if env.get("quick") == "1" else "") + "`. All figures are tokens/s "
             "(medians), higher is better.\n")

    # --- memory bandwidth
    o.append("## Memory bandwidth (STREAM-style read of a "
             f"{env.get('stream_mib', '?')} MiB buffer)\n")
    o.append("| threads | GB/s (median) | GPT-2 small F32 decode bound (tok/s) | BF16 bound |")
    o.append("|---|---|---|---|")
    gpt2_bytes = float(env.get("gpt2_stream_bytes_f32", "0"))
    for t in sorted(stream):
        bound = stream[t] * 1e9 / gpt2_bytes if gpt2_bytes else None
        o.append(f"| {t} | {stream[t]:.2f} | {fmt(bound)} | {fmt(bound * 2 if bound else None)} |")
    o.append("\nThe bound: batch-1 decode reads every weight once per token "
             f"({gpt2_bytes / 1e6:.0f} MB for GPT-2 small in F32, without the position table), "
             "so tokens/s ≤ bandwidth / weight bytes.\n")

    # --- model core
    o.append("## Model core: ours vs PyTorch eager, same weights and shapes\n")
    names: list[str] = []
    for t in threads:
        for n in ours[t]:
            if n not in names:
                names.append(n)
        for (_, n) in torch[t]:
            if n not in names:
                names.append(n)
    header = "| benchmark |"
    sep = "|---|"
    for t in threads:
        header += f" ours {t}t | torch linear {t}t | torch mv {t}t | ours / best torch {t}t |"
        sep += "---|---|---|---|"
    o.append(header)
    o.append(sep)
    for n in names:
        row = f"| `{n}` |"
        for t in threads:
            us = ours[t].get(n)
            lin = torch[t].get(("linear", n))
            mv = torch[t].get(("mv", n))
            best = max([v for v in (lin, mv) if v is not None], default=None)
            ratio = f"{us / best:.2f}×" if us and best else "—"
            row += f" {fmt(us)} | {fmt(lin)} | {fmt(mv)} | {ratio} |"
        o.append(row)
    o.append("\n`decode/…/batch:B`: one decode step of B sequences with "
             f"{env.get('decode_context', '128')} positions cached (tokens/s = B / step time); "
             "`prefill/…/tokens:T`: a T-token prompt; `full_context/…/cache:C`: one decode step "
             "with C − 1 positions cached (GPT-2 small: 1024; the shipped model's context is 256). "
             "torch mv runs batch-1 shapes only.\n")

    # --- load generator
    o.append("## Load generator (textgen_loadgen)\n")
    o.append("| threads | model | mode | streams | requests | TTFT p50 / p99 ms | TPOT p50 / p99 ms "
             "| tokens/s | rejections | errors | RSS MiB (budget) |")
    o.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for t in threads:
        for kv in loadgen[t]:
            rss = kv.get("rss_mib", "—")
            if "rss_budget_mib" in kv:
                rss += f" ({kv['rss_budget_mib']})"
            o.append(f"| {t} | {kv['model']} | {kv['mode']} | {kv['streams']} | "
                     f"{kv['requests_total']} | {kv['ttft_p50_ms']} / {kv['ttft_p99_ms']} | "
                     f"{kv['tpot_p50_ms']} / {kv['tpot_p99_ms']} | {kv['tokens_per_s']} | "
                     f"{kv['rejections']} | {kv['errors']} | {rss} |")
    o.append("\nThe lines as printed (comparable across commits):\n")
    o.append("```")
    for t in threads:
        path = os.path.join(run, f"loadgen_t{t}.txt")
        if os.path.exists(path):
            with open(path) as f:
                o.extend(line.rstrip("\n") for line in f if line.startswith("loadgen "))
    o.append("```\n")

    # --- targets
    o.append("## Targets (issue 8)\n")
    o.append("| target | threads | measured | goal | met |")
    o.append("|---|---|---|---|---|")

    def target(what: str, t: int, value: float | None, goal: float | None, text: str = "") -> None:
        if value is None or goal is None:
            o.append(f"| {what} | {t} | — | {text or fmt(goal)} | not measured |")
        else:
            o.append(f"| {what} | {t} | {fmt(value)} | ≥ {text or fmt(goal)} | "
                     f"{'yes' if value >= goal else '**no**'} |")

    def lg(t: int, model: str, mode: str, streams: int) -> dict[str, str] | None:
        for kv in loadgen[t]:
            if kv["model"] == model and kv["mode"] == mode and kv["streams"] == str(streams):
                return kv
        return None

    goals = {"decode": {1: 15.3, 2: 25.8}, "bf16": {1: 26, 2: 46}, "prefill": {1: 250, 2: 390}}
    for t in threads:
        d = ours[t].get("decode/gpt2-small/batch:1")
        target("GPT-2 small decode batch 1, F32", t, d, goals["decode"].get(t))
        bound = stream.get(t, 0) * 1e9 / gpt2_bytes if gpt2_bytes and t in stream else None
        target("… as a share of the bandwidth bound", t,
               100 * d / bound if d and bound else None, 90, "90 %")
        target("GPT-2 small decode batch 1, BF16 weights", t,
               ours[t].get("decode/gpt2-small-bf16/batch:1"), goals["bf16"].get(t))
        target("GPT-2 small prefill 512", t, ours[t].get("prefill/gpt2-small/tokens:512"),
               goals["prefill"].get(t))
        one, sixteen = lg(t, "gpt2-small", "grpc", 1), lg(t, "gpt2-small", "grpc", 16)
        target("16 streams / 1 stream aggregate tokens/s (GPT-2 small, gRPC)", t,
               float(sixteen["tokens_per_s"]) / float(one["tokens_per_s"]) if one and sixteen else None,
               6, "6×")
        s = ours[t].get("decode/shakespeare-char/batch:1")
        if t == 1:
            target("shipped model decode batch 1", t, s, 900)
        best = max([v for (c, n), v in torch[t].items() if n == "decode/shakespeare-char/batch:1"],
                   default=None)
        target("shipped model batch 1 / best PyTorch eager", t,
               s / best if s and best else None, 5, "5×")
        for model in ("gpt2-small", "shakespeare-char"):
            g, i = lg(t, model, "grpc", 1), lg(t, model, "in_process", 1)
            target(f"one gRPC stream / in-process engine, % ({model})", t,
                   100 * float(g["tokens_per_s"]) / float(i["tokens_per_s"]) if g and i else None,
                   95, "95 %")
        rss = [kv for kv in loadgen[t] if kv["model"] == "gpt2-small" and "rss_budget_mib" in kv]
        if rss:
            worst = max(rss, key=lambda kv: float(kv["rss_mib"]) - float(kv["rss_budget_mib"]))
            ok = float(worst["rss_mib"]) <= float(worst["rss_budget_mib"])
            o.append(f"| server RSS with GPT-2 small ≤ weights + KV of all slots + 100 MiB | {t} | "
                     f"{worst['rss_mib']} MiB | ≤ {worst['rss_budget_mib']} MiB | "
                     f"{'yes' if ok else '**no**'} |")
        else:
            o.append(f"| server RSS with GPT-2 small | {t} | — | — | not measured |")
    o.append("")
    print("\n".join(o))
    return 0


if __name__ == "__main__":
    sys.exit(main())
