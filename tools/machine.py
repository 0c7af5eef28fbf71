"""What a training script records of the machine it ran on (metrics.json "hardware")."""

import platform
import subprocess


def cpu_model() -> str:
    """lscpu's "Model name", as every figure in the project names its CPU."""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
