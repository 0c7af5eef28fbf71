"""Test helpers: podman as this project's machines run it (../shared/containers), the images
the container tests share, and the skip rule.

Every container test runs podman through ../shared/containers/podman.sh (vfs storage, runc,
cgroupfs) and makes the Debian base image with make-base-image.sh, the scripts a user of
these machines runs. ../shared is $TEXTGEN_SHARED_DIR, else beside the repository root.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import List, Optional, Tuple

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests (tests/deploy/CMakeLists.txt).

# The tags the images get; the Kubernetes base deploys IMAGE_TAG (deploy/k8s/kustomization.yaml).
IMAGE_TAG = "0.1.0"
SERVER_IMAGE = f"localhost/textgen:{IMAGE_TAG}"
NGINX_IMAGE = f"localhost/textgen-nginx:{IMAGE_TAG}"


def shared_dir(repo: str) -> str:
    return os.environ.get("TEXTGEN_SHARED_DIR") or os.path.join(repo, "..", "shared")


def skip_or_fail(reason: str) -> int:
    """Where podman or ../shared is absent a user's clone skips; CI must run these tests."""
    if os.environ.get("CI") == "true":
        print(f"FAIL (CI=true, so not skipped): {reason}", file=sys.stderr)
        return 1
    print(f"SKIP: {reason}")
    return SKIP


def missing_reason(repo: str) -> Optional[str]:
    """Why the container tests cannot run here, or None."""
    containers = os.path.join(shared_dir(repo), "containers")
    for script in ("podman.sh", "make-base-image.sh"):
        if not os.path.isfile(os.path.join(containers, script)):
            return f"{containers}/{script} is absent (../shared is not beside this clone)"
    if shutil.which("podman") is None and os.geteuid() != 0:
        return "podman is not installed and make-base-image.sh needs root to install it"
    return None


class Podman:
    """Runs ../shared/containers/podman.sh; every command echoed, output captured."""

    def __init__(self, repo: str):
        self.containers = os.path.join(shared_dir(repo), "containers")
        self.script = os.path.join(self.containers, "podman.sh")
        # podman-compose calls podman itself: it needs the same settings (podman.sh's comment).
        os.environ["CONTAINERS_CONF"] = os.path.join(self.containers, "containers.conf")

    def make_base_image(self) -> float:
        """make-base-image.sh (installs podman if needed); returns its seconds."""
        start = time.monotonic()
        out = subprocess.run(["bash", os.path.join(self.containers, "make-base-image.sh")],
                             capture_output=True, text=True, timeout=900)
        print(out.stdout + out.stderr, end="")
        if out.returncode != 0:
            raise RuntimeError("make-base-image.sh failed")
        return time.monotonic() - start

    def run(self, *args: str, check: bool = True, timeout: float = 120,
            quiet: bool = False) -> subprocess.CompletedProcess:
        if not quiet:
            print("$ podman " + " ".join(args), flush=True)
        out = subprocess.run([self.script, *args], capture_output=True, text=True,
                             timeout=timeout)
        if check and out.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)} exited {out.returncode}:\n"
                               f"{out.stdout[-2000:]}{out.stderr[-3000:]}")
        return out

    def build(self, *args: str):
        """podman build ARGS, its output read as it comes: (exit code, [(STEP line, seconds
        until the next step)], the output's last 80 lines)."""
        print("$ podman build " + " ".join(args), flush=True)
        proc = subprocess.Popen([self.script, "build", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        steps, tail = [], []
        step, step_start = None, time.monotonic()
        for line in proc.stdout:
            tail = (tail + [line])[-80:]
            # A multi-stage build prefixes its stage: "[5/7] STEP 3/3: RUN ...".
            if re.match(r"(\[\d+/\d+\] )?(STEP|COMMIT) ", line):
                now = time.monotonic()
                if step:
                    steps.append((step, now - step_start))
                step, step_start = line.strip(), now
        if step:
            steps.append((step, time.monotonic() - step_start))
        return proc.wait(), steps, tail

    def inspect(self, what: str, name: str) -> dict:
        return json.loads(self.run(what, "inspect", name, quiet=True).stdout)[0]

    def layers(self, image: str) -> List[Tuple[int, List[str]]]:
        """The image's layers, bottom first, as podman saves them: (bytes, [the paths of the
        files in it, directories left out, without the leading ./ or /])."""
        with tempfile.TemporaryDirectory(prefix="textgen-layers-") as tmp:
            out = os.path.join(tmp, "image")
            # Uncompressed: seconds instead of half a minute, and sizes as `history` gives them.
            self.run("save", "--uncompressed", "--format", "oci-dir", "-o", out, image,
                     timeout=600, quiet=True)

            def blob(digest):
                return os.path.join(out, "blobs", *digest.split(":", 1))

            with open(os.path.join(out, "index.json")) as f:
                manifest_digest = json.load(f)["manifests"][0]["digest"]
            with open(blob(manifest_digest)) as f:
                manifest = json.load(f)
            layers = []
            for layer in manifest["layers"]:
                with tarfile.open(blob(layer["digest"])) as tar:
                    files = [m.name[2:] if m.name.startswith("./") else m.name.lstrip("/")
                             for m in tar if not m.isdir()]
                layers.append((layer["size"], files))
            return layers

    def image_exists(self, image: str) -> bool:
        return self.run("image", "exists", image, check=False, quiet=True).returncode == 0

    def ip(self, container: str) -> str:
        networks = self.inspect("container", container)["NetworkSettings"]["Networks"]
        return next(iter(networks.values()))["IPAddress"]

    def remove(self, *containers: str) -> None:
        for c in containers:
            self.run("rm", "-f", "-t", "0", c, check=False, quiet=True)

    def logs(self, container: str) -> str:
        out = self.run("logs", container, check=False, quiet=True)
        return out.stdout + out.stderr


def require_images(podman: Podman, images: List[str]) -> None:
    """The fixture test container_images builds these; a test run alone says so."""
    for image in images:
        if not podman.image_exists(image):
            raise RuntimeError(f"{image} is missing: run the container_images test first "
                               "(ctest's fixture does)")
