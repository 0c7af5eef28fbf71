#!/usr/bin/env python3
"""textgen_server's resident size when serving a large F32 checkpoint (issue 15, "Memory").

Serves the SmolLM2-135M-shaped F32 checkpoint the ctest fixture writes at test time
(538 MB of weights; tools/make_golden.py --only smollm2_135m) and, once the server says
it is serving, reads its VmRSS from /proc: it must stay within 1.15x the weight bytes
(the file is mapped, each tensor packed once and its pages released: never two copies).
Prints the start-up time and the resident size the server logs, and the ratio.

Usage: server_memory_test.py path/to/textgen_server checkpoint_dir
"""

import os
import re
import subprocess
import sys
import tempfile
import time

MAX_RATIO = 1.15
MIN_WEIGHT_BYTES = 400 * 1000 * 1000


def tensor_bytes(checkpoint: str) -> int:
    """Bytes of tensor data in model.safetensors: the file minus its header."""
    path = os.path.join(checkpoint, "model.safetensors")
    with open(path, "rb") as f:
        header = int.from_bytes(f.read(8), "little")
    return os.path.getsize(path) - 8 - header


def vm_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def main() -> int:
    server, checkpoint = sys.argv[1], sys.argv[2]
    weights = tensor_bytes(checkpoint)
    assert weights >= MIN_WEIGHT_BYTES, f"checkpoint holds only {weights} bytes of weights"
    with tempfile.TemporaryFile(mode="w+") as log:
        # Default flags (8 KV-cache slots of the full 8192-token context, DebugAttention
        # on) except the port: what a user gets.
        proc = subprocess.Popen([server, "--model", checkpoint, "--port", "0",
                                 "--host", "127.0.0.1", "--drain_seconds", "5"],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300  # Against a hang, not a timing requirement.
            text = ""
            while time.monotonic() < deadline and proc.poll() is None:
                log.seek(0)
                text = log.read()
                if "start-up" in text:
                    break
                time.sleep(0.2)
            assert "start-up" in text, f"the server never finished starting:\n{text}"
            time.sleep(1.0)  # Let the engine thread settle.
            rss = vm_rss(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            log.seek(0)
            text = log.read()
    print(text)
    startup = re.search(r"start-up ([0-9.]+) s; resident ([0-9.]+) MiB", text)
    assert startup, "no start-up line in the log"
    ratio = rss / weights
    print(f"[memory] smollm2_135m F32: weights {weights / 1048576:.1f} MiB, server resident "
          f"{rss / 1048576:.1f} MiB = {ratio:.3f}x (limit {MAX_RATIO}x); start-up "
          f"{startup.group(1)} s")
    if ratio > MAX_RATIO:
        print(f"FAIL: resident size {ratio:.3f}x the weight bytes exceeds {MAX_RATIO}x")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
