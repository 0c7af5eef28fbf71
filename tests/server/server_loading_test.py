#!/usr/bin/env python3
"""textgen_server refusing hostile checkpoints at start-up (issue 14 item 3).

Each case is a model a hostile or careless operator could point the server at;
each must end in exit code 1 with a message naming the problem, promptly and
without allocating what the file claims:
  - /dev/zero as the model (it never ends: reading it exhausted memory);
  - a FIFO as the model (opening it to look for GGUF's magic waited forever
    for a writer): refused from stat() alone, before any open();
  - a checkpoint with a NaN weight (it used to load and generate garbage);
  - a sinusoidal config with n_positions 10,000,000 (the table and KV caches it
    implies are refused against the memory budget before any allocation);
and SIGTERM while a (large, sparse) checkpoint loads ends the process at once
instead of waiting for the load, then serving, then draining.

Usage: server_loading_test.py path/to/textgen_server path/to/shakespeare-char
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

server, shipped = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="server_loading_")
failures = []


def run(args, timeout=60):
    """Runs the server to exit; returns (exit code, log, seconds)."""
    start = time.monotonic()
    p = subprocess.run([server, "--port", "0", "--host", "127.0.0.1"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, text=True)
    return p.returncode, p.stdout, time.monotonic() - start


def expect(name, ok, detail):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failures.append(name)


def copy_shipped(name):
    d = os.path.join(work, name)
    shutil.copytree(shipped, d)
    return d


def peak_rss_mb_of_children():
    import resource
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


# /dev/zero as the model.
rc, log, _ = run(["--model", "/dev/zero"])
expect("dev_zero_refused", rc == 1 and "not a regular file" in log, log)

# A FIFO as the model: no writer ever comes, so an open() or read() would block.
fifo = os.path.join(work, "model.fifo")
os.mkfifo(fifo)
try:
    rc, log, seconds = run(["--model", fifo], timeout=30)
    expect("fifo_refused", rc == 1 and "not a regular file" in log and fifo in log, log)
    expect("fifo_refused_promptly", seconds < 10, f"{seconds:.1f} s")
except subprocess.TimeoutExpired:
    expect("fifo_refused", False, "the server blocked on the FIFO for 30 s")

# A NaN in one weight, in the shipped checkpoint (F32).
d = copy_shipped("nan")
path = os.path.join(d, "model.safetensors")
with open(path, "r+b") as f:
    header_len = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(header_len))
    tensor = next(n for n in sorted(header) if n.endswith("mlp.c_proj.weight"))
    begin = header[tensor]["data_offsets"][0]
    assert header[tensor]["dtype"] == "F32", header[tensor]
    f.seek(8 + header_len + begin + 4 * 3)
    f.write(struct.pack("<f", float("nan")))
rc, log, _ = run(["--model", d])
expect("nan_weight_refused",
       rc == 1 and f"tensor '{tensor}'" in log and "element 3 is nan" in log, log)

# Ten million sinusoidal positions: refused from the config, without
# allocating (the child's peak resident memory stays small).
d = copy_shipped("huge_context")
config_path = os.path.join(d, "config.json")
config = json.load(open(config_path))
assert config["position_embedding_type"] == "sinusoidal"
config["n_positions"] = 10_000_000
json.dump(config, open(config_path, "w"))
rc, log, seconds = run(["--model", d])
peak = peak_rss_mb_of_children()
expect("huge_context_refused",
       rc == 1 and "memory budget" in log and "position table" in log
       and "RESOURCE_EXHAUSTED" in log and peak < 500,
       f"rc {rc}, peak of children {peak:.0f} MB, {seconds:.1f} s: {log}")

# --kv_cache_dtype: an unknown dtype is refused by name. The memory budget
# counts bf16 keys and values at 2 bytes: a pool of 25,600 positions of the
# shipped model (6 layers, d_model 192) is 236 MB in f32, over a 200 MB budget,
# and 118 MB in bf16, which starts and says so.
rc, log, _ = run(["--model", shipped, "--kv_cache_dtype", "fp8"])
expect("kv_cache_dtype_unknown_refused",
       rc == 1 and "--kv_cache_dtype" in log and "unknown KV-cache dtype" in log,
       log)
pool = ["--model", shipped, "--kv_cache_tokens", "25600",
        "--memory_budget_mb", "200"]
rc, log, _ = run(pool + ["--kv_cache_dtype", "f32"])
expect("kv_cache_f32_over_budget",
       rc == 1 and "memory budget" in log and "25600 positions" in log, log)
log_path = os.path.join(work, "kv_bf16.log")
with open(log_path, "w") as log_file:
    p = subprocess.Popen([server, "--port", "0", "--host", "127.0.0.1"] + pool
                         + ["--kv_cache_dtype", "bf16"],
                         stdout=log_file, stderr=subprocess.STDOUT)
    for _ in range(600):  # Up to 30 s.
        if "serving on port" in open(log_path).read() or p.poll() is not None:
            break
        time.sleep(0.05)
    p.terminate()
    rc = p.wait(timeout=30)
log = open(log_path).read()
expect("kv_cache_bf16_fits_the_budget",
       "serving on port" in log and "KV cache bf16" in log and rc == 0, log)

# SIGTERM while loading. A GPT-2-small-shaped checkpoint of zeros (500 MB, a
# sparse file: no disk used) takes seconds to convert and pack; once loading
# is under way (resident memory growing) SIGTERM must end the process at once:
# it must never reach "serving on port".
d = os.path.join(work, "big")
os.makedirs(d)
V, T, C, L = 50257, 1024, 768, 12
json.dump({"model_type": "gpt2", "vocab_size": V, "n_positions": T,
           "n_embd": C, "n_layer": L, "n_head": 12,
           "activation_function": "gelu_new"},
          open(os.path.join(d, "config.json"), "w"))
shapes = {"wte.weight": [V, C], "wpe.weight": [T, C], "ln_f.weight": [C],
          "ln_f.bias": [C]}
for i in range(L):
    h = f"h.{i}."
    shapes.update({
        h + "ln_1.weight": [C], h + "ln_1.bias": [C],
        h + "attn.c_attn.weight": [C, 3 * C], h + "attn.c_attn.bias": [3 * C],
        h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
        h + "ln_2.weight": [C], h + "ln_2.bias": [C],
        h + "mlp.c_fc.weight": [C, 4 * C], h + "mlp.c_fc.bias": [4 * C],
        h + "mlp.c_proj.weight": [4 * C, C], h + "mlp.c_proj.bias": [C]})
header, offset = {}, 0
for name, shape in shapes.items():
    n = 4
    for s in shape:
        n *= s
    header[name] = {"dtype": "F32", "shape": shape,
                    "data_offsets": [offset, offset + n]}
    offset += n
header_bytes = json.dumps(header).encode()
with open(os.path.join(d, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(header_bytes)) + header_bytes)
    f.truncate(8 + len(header_bytes) + offset)
log_path = os.path.join(work, "big.log")
with open(log_path, "w") as log_file:
    p = subprocess.Popen([server, "--model", d, "--port", "0", "--host",
                          "127.0.0.1", "--weights_dtype", "bf16"],
                         stdout=log_file, stderr=subprocess.STDOUT)
    # Bounded wait (against a hang) for loading to be under way.
    rss_kb = 0
    for _ in range(600):
        try:
            with open(f"/proc/{p.pid}/status") as status:
                rss_kb = next(int(line.split()[1]) for line in status
                              if line.startswith("VmRSS:"))
        except (FileNotFoundError, StopIteration):
            break
        if rss_kb > 100 * 1024:
            break
        time.sleep(0.02)
    signalled = time.monotonic()
    p.terminate()
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    took = time.monotonic() - signalled
log = open(log_path).read()
expect("sigterm_while_loading",
       rc == -15 and took < 2.0 and "serving on port" not in log,
       f"exit {rc} {took:.2f} s after SIGTERM (at {rss_kb} kB resident): {log}")

shutil.rmtree(work)
sys.exit(1 if failures else 0)
