#!/usr/bin/python3
"""The container images built and run with podman (../shared/containers), as CI runs them.

  container_test.py images|server|compose|kube --repo . --cli build/client/textgen
      --client_dir client/python --stubs build/client/python

images   make-base-image.sh, then the Dockerfile's DEFAULT target (no --target: it must be the
         server) and its nginx stage; with --prebuilt_server/--prebuilt_cli (ctest passes a
         Release tree's, so CI's) the build stage takes those binaries (TEXTGEN_PREBUILT)
         instead of compiling them again, and still configures the sources; reports seconds and sizes; the default image's
         entrypoint is textgen_server, its user numeric non-root, and it carries no compiler,
         no Python and no npm/node; both images are more than one layer, Debian's first (no
         application file in it), and no layer holds apt's lists or caches (podman save).
         The other three reuse these images (ctest fixture).
server   the server image with --network=host on free loopback ports, flags after the image
         name (the baked-in model stays), read-only root, no capabilities: the CLI and the
         Python client stream generations and read health through it; `podman healthcheck
         run` (the image's HEALTHCHECK); `podman stop` during a stream drains it (stream
         finishes, exit 0, seconds reported).
compose  podman-compose up of deploy/compose.yaml (2 replicas + nginx): 40 calls through
         nginx reach both replicas (each replica's textgen_requests_total); one replica
         stopped mid-run loses only calls that reached it while it drained, as UNAVAILABLE;
         that replica restarted (a new address) and the other stopped: calls still succeed
         (nginx looks the name up again); nginx's access log has grpc-status=0 for OK calls.
kube     podman kube play of the rendered kustomize base (kubectl kustomize, else
         manifests_test.py's renderer): the Deployment's pod runs as 10001 with a read-only
         root and the flags ConfigMap, and answers health SERVING.
Exit 77 (skipped) where ../shared/containers or podman is absent, unless CI=true.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import grpc

from containers import (NGINX_IMAGE, SERVER_IMAGE, Podman, missing_reason, require_images,
                        skip_or_fail)
from replicas import free_port, import_client, parse_requests_total

MODEL_IN_IMAGE = "/opt/textgen/models/shakespeare-char"
WAIT_SECONDS = 90


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    print(f"ok   {message}", flush=True)


def wait_serving(cli: str, target: str, what: str) -> float:
    """Polls `textgen health` (the project's CLI) until SERVING; returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < WAIT_SECONDS:
        out = subprocess.run([cli, "--server", target, "--timeout_ms", "1000", "health"],
                             capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip() == "SERVING":
            return time.monotonic() - start
        time.sleep(0.3)
    raise AssertionError(f"{what} at {target} not SERVING within {WAIT_SECONDS} s")


def cli_generate(cli: str, target: str) -> int:
    """One streamed generation with the CLI; returns the tokens its summary reports."""
    out = subprocess.run([cli, "--server", target, "generate", "--prompt", "ROMEO:",
                          "--max_new_tokens", "40", "--temperature", "0.8", "--seed", "7"],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 0 and out.stdout.strip(), f"the CLI streams text: {out.stderr!r}")
    m = re.search(r"(\d+) tokens in", out.stderr)
    check(m and int(m.group(1)) == 40, f"the CLI's summary: {out.stderr.strip()}")
    return int(m.group(1))


def python_generate(client, max_new_tokens: int = 40, seed: int = 1) -> int:
    stream = client.generate("ROMEO:", max_new_tokens=max_new_tokens, temperature=0.8,
                             seed=seed, timeout=120)
    tokens = [t for t in stream if not t.is_prompt]
    if stream.finished is None or stream.finished.usage.generated_tokens != len(tokens):
        raise AssertionError(f"seed {seed}: stream ended without a whole Finished message")
    return len(tokens)


# --- images -----------------------------------------------------------------------------------
def prebuilt_args(args, tmp: str) -> list:
    """The server image's build arguments for this tree's binaries (the Dockerfile's
    TEXTGEN_PREBUILT): copied into TMP, mounted at /prebuilt, named by their sha256 sums."""
    if not args.prebuilt_server:
        print("the build stage compiles the binaries (no --prebuilt_server)")
        return []
    sums = []
    for source, name in ((args.prebuilt_server, "textgen_server"),
                         (args.prebuilt_cli, "textgen")):
        with open(source, "rb") as f:
            sums.append(f"{hashlib.sha256(f.read()).hexdigest()}  {name}")
        # A copy, not the build tree itself: only these two files are visible to the build.
        subprocess.run(["cp", source, os.path.join(tmp, name)], check=True)
    print(f"the build stage takes this tree's binaries: {args.prebuilt_server}, "
          f"{args.prebuilt_cli}")
    return ["-v", f"{tmp}:/prebuilt:ro", "--build-arg", f"TEXTGEN_PREBUILT={','.join(sums)}"]


def test_images(args, podman: Podman) -> None:
    seconds = podman.make_base_image()
    print(f"base image: {seconds:.0f} s")
    dockerfile = os.path.join(args.repo, "deploy", "docker", "Dockerfile")
    built = {}
    prebuilt_dir = tempfile.TemporaryDirectory(prefix="textgen-prebuilt-")
    prebuilt = prebuilt_args(args, prebuilt_dir.name)
    # --format docker keeps HEALTHCHECK (OCI images drop it). No --target: the default.
    for image, target in ((SERVER_IMAGE, prebuilt), (NGINX_IMAGE, ["--target", "nginx"])):
        start = time.monotonic()
        returncode, steps, tail = podman.build(
            "--network=host", "--format", "docker", "-f", dockerfile, *target, "-t", image,
            args.repo)
        seconds = time.monotonic() - start
        if returncode != 0:
            print("".join(tail))
            raise AssertionError(f"podman build {image} failed")
        # Where the time goes: every step that took more than a few seconds.
        for step, step_seconds in steps:
            if step_seconds >= 3:
                print(f"  {step_seconds:6.0f} s  {step[:110]}")
        size = podman.inspect("image", image)["Size"]
        built[image] = (seconds, size)
        print(f"image built: {image} {size / 1e6:.0f} MB in {seconds:.0f} s", flush=True)
    prebuilt_dir.cleanup()

    config = podman.inspect("image", SERVER_IMAGE)["Config"]
    check(config["Entrypoint"][0] == "textgen_server",
          f"the default target (no --target) is the server: entrypoint {config['Entrypoint']}")
    check(f"--model={MODEL_IN_IMAGE}" in config["Entrypoint"] and not config.get("Cmd"),
          "the default model is in the ENTRYPOINT, CMD is empty (arguments append)")
    check(re.fullmatch(r"[1-9]\d*:[1-9]\d*", config.get("User", "")) is not None,
          f"the server image runs as a numeric non-root user: {config.get('User')}")
    inspected = podman.inspect("image", SERVER_IMAGE)
    healthcheck = (inspected.get("Healthcheck") or config.get("Healthcheck") or {}).get("Test")
    check(healthcheck and "health" in healthcheck, f"HEALTHCHECK kept: {healthcheck}")
    # No compiler, Python or npm in the runtime stage: not on PATH, not installed by dpkg.
    probe = ("for c in cc gcc g++ c++ clang cmake python python3 node nodejs npm; do "
             "command -v $c; done; dpkg-query -W -f='${Package}\\n' | "
             "grep -E '^(gcc|g\\+\\+|cpp|clang)(-[0-9]+)?$|^(python3|libpython3|nodejs|npm)' || true")
    out = podman.run("run", "--rm", "--network=none", "--entrypoint", "sh", SERVER_IMAGE,
                     "-c", probe)
    check(out.stdout.strip() == "", f"no compiler, Python or npm in the server image: "
                                    f"{out.stdout.split()}")
    out = podman.run("run", "--rm", "--network=none", "--entrypoint", "id", SERVER_IMAGE)
    check(out.stdout.startswith("uid=10001"), f"it runs as {out.stdout.strip()}")

    # Layers: the Debian one (packages, user) first, the application's after it, so that new
    # code reuses the base layer; apt's lists and caches in none of them (a file deleted by a
    # later layer would still be shipped in its own).
    for image, app_file in ((SERVER_IMAGE, "usr/local/bin/textgen_server"),
                            (NGINX_IMAGE, "etc/textgen-nginx/entrypoint.sh")):
        print(podman.run("image", "history", image).stdout, end="")
        layers = podman.layers(image)
        check(len(layers) == len(podman.inspect("image", image)["RootFS"]["Layers"]) > 1,
              f"{image} has {len(layers)} layers (MB: "
              f"{', '.join(f'{size / 1e6:.1f}' for size, _ in layers)})")
        base_size, base_files = layers[0]
        app = [i for i, (_, files) in enumerate(layers) if app_file in files]
        check("usr/bin/dpkg" in base_files and app and app[0] > 0
              and not any(f.startswith(("usr/local/bin/", "opt/textgen/", "etc/textgen-nginx/"))
                          for f in base_files),
              f"its first layer is Debian's ({base_size / 1e6:.0f} MB, no application file); "
              f"{app_file} is in layer {app[0] + 1 if app else None} of its own")
        leftovers = [(i + 1, f) for i, (_, files) in enumerate(layers) for f in files
                     if f.startswith(("var/lib/apt/lists/", "var/cache/apt/"))
                     and os.path.basename(f) != "lock"
                     and not os.path.basename(f).startswith(".wh.")]
        check(not leftovers, f"no layer of {image} holds apt's lists or caches (.deb, .bin): "
                             f"{leftovers[:5]}{' ...' if len(leftovers) > 5 else ''}")
        out = podman.run("run", "--rm", "--network=none", "--entrypoint", "stat", image,
                         "-c", "%a", "/")
        check(int(out.stdout.strip(), 8) & 0o001, f"/ is traversable for the non-root user: "
                                                  f"mode {out.stdout.strip()}")


# --- server -----------------------------------------------------------------------------------
def test_server(args, podman: Podman) -> None:
    require_images(podman, [SERVER_IMAGE])
    textgen_client = import_client(args.client_dir, args.stubs)
    port, metrics_port = free_port(), free_port()
    name = f"textgen-test-{os.getpid()}"
    target = f"127.0.0.1:{port}"
    podman.remove(name)
    try:
        # Flags after the image name: loopback only, free ports, a short drain. The model
        # is not named: the image's default must stay.
        # The image's HEALTHCHECK asks port 50051; on a moved port the same command is
        # given that port (deploy/README.md says so too).
        podman.run("run", "-d", "--name", name, "--network=host", "--read-only",
                   "--cap-drop=ALL", "--security-opt=no-new-privileges",
                   f'--health-cmd=["textgen", "--server", "{target}", "health"]', SERVER_IMAGE,
                   "--host=127.0.0.1", f"--port={port}", f"--metrics_port={metrics_port}",
                   f"--http_port={free_port()}", "--drain_seconds=20")
        waited = wait_serving(args.cli, target, "the server container")
        print(f"container SERVING after {waited:.1f} s")
        tokens = cli_generate(args.cli, target)
        print(f"container served {tokens} tokens through the CLI")
        with textgen_client.TextgenClient(target, timeout=30) as client:
            check(client.health() == "SERVING", "the Python client reads health: SERVING")
            # GetModelInfo names the model by its base name, never the path.
            check(client.info().name == os.path.basename(MODEL_IN_IMAGE),
                  f"flags after the image name keep the baked-in model ({client.info().name})")
            tokens = sum(python_generate(client, seed=s) for s in range(3))
            print(f"container served {tokens} tokens through the Python client")
            check(tokens == 120, "3 x 40 tokens")
        health = podman.run("healthcheck", "run", name, check=False)
        check(health.returncode == 0, "podman healthcheck run (`textgen health` in the image) "
                                      f"passes {health.stdout}{health.stderr}")
        out = podman.run("exec", name, "sh", "-c", "id -u; touch /probe 2>&1 || true")
        uid, *touch = out.stdout.splitlines()
        check(uid == "10001" and any("Read-only file system" in l for l in touch),
              f"uid {uid}, root filesystem read-only: {touch}")

        # podman stop while a long stream runs: the stream finishes, the server exits 0.
        with textgen_client.TextgenClient(target, timeout=60) as client:
            result = {}
            first = threading.Event()

            def stream():
                s = client.generate("ROMEO:", max_new_tokens=250, temperature=0.8, seed=3,
                                    timeout=60)
                n = 0
                for t in s:
                    n += not t.is_prompt
                    first.set()
                result["tokens"] = n
                result["finished"] = s.finished

            thread = threading.Thread(target=stream)
            thread.start()
            check(first.wait(30), "a long stream started")
            start = time.monotonic()
            podman.run("stop", "-t", "40", name, timeout=60)
            drain = time.monotonic() - start
            thread.join(30)
        state = podman.inspect("container", name)["State"]
        print(f"drain: podman stop returned after {drain:.1f} s, exit code {state['ExitCode']}")
        check(result.get("finished") is not None and result["tokens"] > 0,
              f"the stream running at SIGTERM finished ({result.get('tokens')} tokens)")
        check(state["ExitCode"] == 0 and drain < 40, "the server drained and exited 0 "
                                                     "before podman's timeout")
    except BaseException:
        print(podman.logs(name)[-3000:])
        raise
    finally:
        podman.remove(name)


# --- compose ----------------------------------------------------------------------------------
class Compose:
    def __init__(self, args, podman: Podman, project: str, port: int):
        self.podman, self.project = podman, project
        self.base = ["podman-compose", "--podman-path", podman.script, "-p", project,
                     "-f", os.path.join(args.repo, "deploy", "compose.yaml")]
        # The per-client rate limit out of reach: this test checks balancing and draining
        # (frontdoor_rapid_reset checks the limit), and on a fast CPU its 4 callers' short calls
        # pass the default 200 a second, which nginx answers with 429 by design.
        self.env = dict(os.environ, TEXTGEN_PORT=str(port), TEXTGEN_CALLS_PER_SECOND="100000")

    def __call__(self, *args: str, check: bool = True) -> str:
        print("$ podman-compose " + " ".join(args), flush=True)
        out = subprocess.run(self.base + list(args), capture_output=True, text=True,
                             env=self.env, timeout=300)
        if check and out.returncode != 0:
            raise RuntimeError(f"podman-compose {' '.join(args)}: {out.stdout[-3000:]}"
                               f"{out.stderr[-3000:]}")
        return out.stdout

    def containers(self, service: str):
        out = self.podman.run("ps", "-a", "--format", "json", "--filter",
                              f"label=io.podman.compose.project={self.project}", quiet=True)
        return sorted(c["Names"][0] for c in json.loads(out.stdout)
                      if c["Labels"].get("com.docker.compose.service") == service)


def scrape_requests(podman: Podman, container: str):
    import urllib.request
    url = f"http://{podman.ip(container)}:9090/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        return parse_requests_total(r.read().decode())


def call_outcome(client, seed):
    """(start, end, 'OK' or the status code's name, details) of one generation."""
    start = time.monotonic()
    try:
        python_generate(client, max_new_tokens=60, seed=seed)
        outcome, details = "OK", ""
    except grpc.RpcError as e:
        outcome, details = e.code().name, e.details()
    return start, time.monotonic(), outcome, details


# How a call cut while its replica stops reaches a client through nginx: UNAVAILABLE (the
# drain's refusal, or nginx's 502 when the replica closed before answering), INTERNAL (nginx
# reset a stream it had begun answering) or CANCELLED (an HTTP/2 CANCEL on the way).
CUT_CALL_CODES = ("UNAVAILABLE", "INTERNAL", "CANCELLED")


def wait_routed_to(podman: Podman, client, replica: str, seconds: float = 20) -> int:
    """Calls through nginx until one reaches `replica` (its OK count grows): nginx looks the
    service name up again only when its cached answer is RESOLVE_VALID old. Returns the
    number of calls that succeeded on the way."""
    before = scrape_requests(podman, replica).get("OK", 0)
    deadline, ok = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        ok += call_outcome(client, 0)[2] == "OK"
        if scrape_requests(podman, replica).get("OK", 0) > before:
            return ok
        time.sleep(0.2)
    raise AssertionError(f"nginx sent no call to {replica} within {seconds:.0f} s")


def test_compose(args, podman: Podman) -> None:
    require_images(podman, [SERVER_IMAGE, NGINX_IMAGE])
    textgen_client = import_client(args.client_dir, args.stubs)
    port = free_port()
    target = f"127.0.0.1:{port}"
    compose = Compose(args, podman, f"textgentest{os.getpid()}", port)
    try:
        start = time.monotonic()
        compose("up", "-d", "--no-build")
        replicas = compose.containers("textgen")
        (nginx,) = compose.containers("nginx")
        check(len(replicas) == 2, f"compose started 2 replicas: {replicas}")
        for r in replicas:
            wait_serving(args.cli, f"{podman.ip(r)}:50051", r)
        wait_serving(args.cli, target, "nginx")
        print(f"compose up: replicas and nginx SERVING after {time.monotonic() - start:.1f} s")

        with textgen_client.TextgenClient(target, timeout=60) as client:
            # --- 40 calls over one channel reach every replica. ---
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                tokens = list(pool.map(lambda s: python_generate(client, 20, s), range(40)))
            check(all(t == 20 for t in tokens), "40 calls through nginx, 20 tokens each")
            counts = {r: scrape_requests(podman, r).get("OK", 0) for r in replicas}
            print(f"compose: requests per replica {counts}")
            check(all(c > 0 for c in counts.values()) and sum(counts.values()) == 40,
                  "every replica served calls, 40 in all (each replica's metrics)")

            # --- One replica stopped mid-run (podman stop: SIGTERM, drain). ---
            stopped, survivor = replicas[1], replicas[0]
            old_ip = podman.ip(stopped)
            results, t_stop, t_gone = [], [0.0], [0.0]

            def stop_later():
                time.sleep(1.0)
                t_stop[0] = time.monotonic()
                podman.run("stop", "-t", "40", stopped, timeout=60)
                t_gone[0] = time.monotonic()

            stopper = threading.Thread(target=stop_later)
            stopper.start()
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                futures, seed, deadline = [], 1000, None
                while deadline is None or time.monotonic() < deadline:
                    if len(futures) - sum(f.done() for f in futures) < 4:
                        futures.append(pool.submit(call_outcome, client, seed))
                        seed += 1
                    else:
                        time.sleep(0.01)
                    if deadline is None and t_gone[0]:
                        deadline = time.monotonic() + 3
                results = [f.result() for f in futures]
            stopper.join()
            failed = [r for r in results if r[2] != "OK"]
            after = [o for s, e, o, _ in results if s > t_gone[0]]
            print(f"stop {stopped}: {len(results)} calls, podman stop took "
                  f"{t_gone[0] - t_stop[0]:.1f} s; {len(after)} started after it exited; "
                  f"failed (start, end from the stop; code; details): "
                  f"{[(round(s - t_stop[0], 3), round(e - t_stop[0], 3), o, d) for s, e, o, d in failed]}")
            check(all(o in CUT_CALL_CODES and s <= t_gone[0] and e >= t_stop[0]
                      for s, e, o, _ in failed),
                  f"the only calls lost were in flight while it stopped ({', '.join(CUT_CALL_CODES)})")
            check(len(failed) <= 4, "at most the calls in flight (4 at a time) were lost")
            check(after and all(o == "OK" for o in after),
                  "every call started after it exited succeeded")

            # --- Restart it (a new address), stop the other: nginx follows the name. ---
            podman.run("start", stopped)
            new_ip = podman.ip(stopped)
            check(new_ip != old_ip, f"{stopped} came back on a new address: {old_ip} -> {new_ip}")
            wait_serving(args.cli, f"{new_ip}:50051", stopped)
            # nginx may still hold the answer it cached while only the survivor was up.
            routing_calls = wait_routed_to(podman, client, stopped)
            podman.run("stop", "-t", "40", survivor, timeout=60)
            print(f"{stopped} restarted on {new_ip}; {survivor} stopped")
            outcomes = [call_outcome(client, 2000 + s)[2:] for s in range(10)]
            check(all(o == "OK" for o, _ in outcomes),
                  f"with only the restarted replica up, 10 of 10 calls succeed: {outcomes}")

        ok_calls = 40 + sum(o == "OK" for _, _, o, _ in results) + routing_calls + 10
        log = podman.logs(nginx)
        calls = [l for l in log.splitlines() if '"POST /textgen.v1.' in l]
        logged_ok = [l for l in calls if " 200 grpc-status=0 " in l]
        print(f"nginx access log: {len(calls)} calls, {len(logged_ok)} with grpc-status=0, "
              f"e.g. {logged_ok[:1]}; others: {[l for l in calls if l not in logged_ok][:3]}")
        check(len(logged_ok) == ok_calls,
              f"nginx's access log records grpc-status=0 (from the trailers) for each of the "
              f"{ok_calls} OK calls")
    except BaseException:
        for c in compose.containers("textgen") + compose.containers("nginx"):
            print(f"--- {c} ---\n{podman.logs(c)[-2000:]}")
        raise
    finally:
        compose("down", "-t", "5", check=False)


# --- kube -------------------------------------------------------------------------------------
def test_kube(args, podman: Podman) -> None:
    require_images(podman, [SERVER_IMAGE])
    base = os.path.join(args.repo, "deploy", "k8s")
    if args.kubectl:
        rendered = subprocess.run([args.kubectl, "kustomize", base], capture_output=True,
                                  text=True, check=True).stdout
        print("rendered with kubectl kustomize")
    else:
        import yaml
        from manifests_test import render_kustomize
        rendered = yaml.safe_dump_all(render_kustomize(base))
        print("no kubectl: rendered with manifests_test.py's renderer")
    check(f"image: {SERVER_IMAGE.split('/', 1)[1]}" in rendered,
          f"the Deployment runs the image this test built ({SERVER_IMAGE})")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "textgen.yaml")
        with open(path, "w") as f:
            f.write(rendered)
        podman.run("kube", "down", path, check=False, quiet=True)
        try:
            start = time.monotonic()
            out = podman.run("kube", "play", path, timeout=300)
            print(out.stdout.strip()[-800:])
            pods = json.loads(podman.run("pod", "ps", "--format", "json", "--filter",
                                         "name=textgen", quiet=True).stdout)
            check(pods, f"podman kube play started the Deployment's pods: "
                        f"{[p['Name'] for p in pods]}")
            containers = [c["Names"] for p in pods for c in p["Containers"]
                          if not c["Names"].endswith("-infra")]
            for c in containers:
                ip = podman.ip(c) or podman.ip(pods[0]["InfraId"])
                waited = wait_serving(args.cli, f"{ip}:50051", c)
                print(f"kube play: pod container {c} ready and SERVING at {ip}:50051 after "
                      f"{time.monotonic() - start:.1f} s")
                out = podman.run("exec", c, "sh", "-c",
                                 "id -u; cat /etc/textgen/server.flags | head -1; "
                                 "touch /probe 2>&1 || true")
                lines = out.stdout.splitlines()
                check(lines[0] == "10001" and lines[1].startswith("--model=")
                      and "Read-only file system" in lines[-1],
                      f"runs as 10001, flags ConfigMap mounted, read-only root: {lines}")
        finally:
            podman.run("kube", "down", path, check=False)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["images", "server", "compose", "kube"])
    for flag in ("repo", "cli", "client_dir", "stubs"):
        parser.add_argument(f"--{flag}", required=True)
    parser.add_argument("--kubectl")
    parser.add_argument("--prebuilt_server", help="images: this textgen_server, not compiled")
    parser.add_argument("--prebuilt_cli", help="images: this textgen, with --prebuilt_server")
    args = parser.parse_args()
    if bool(args.prebuilt_server) != bool(args.prebuilt_cli):
        parser.error("--prebuilt_server and --prebuilt_cli go together")
    reason = missing_reason(args.repo)
    if reason:
        return skip_or_fail(reason)
    podman = Podman(args.repo)
    start = time.monotonic()
    {"images": test_images, "server": test_server, "compose": test_compose,
     "kube": test_kube}[args.what](args, podman)
    print(f"PASS container {args.what} in {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
