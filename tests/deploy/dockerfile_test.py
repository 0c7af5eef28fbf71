#!/usr/bin/python3
"""deploy/docker/Dockerfile without a container engine: what it says, and its commands run.

  dockerfile_test.py --repo . --build_dir build --server build/server/textgen_server
      --cli build/client/textgen

- the stages are build first and runtime last (the default target); runtime and nginx are a
  Debian layer (FINAL-root copied onto scratch as FINAL-base) with the application added in
  layers of its own, not one squashed layer; every RUN that installs packages cleans apt's
  lists and caches (apt-get clean, /var/lib/apt/lists/*, /var/cache/apt/*.bin) in the same
  RUN; the build stage is Debian
  bookworm and installs its dependencies with `scripts/setup.sh build` alone (the list the
  README's set-up and scripts/test.sh, i.e. CI, install from), so the image
  cannot drift from what CI tests; it passes TEXTGEN_NATIVE from a build argument whose
  default is OFF (explicit, whatever CMake's default), and builds targets that exist;
- runtime-packages.sh, run here on the binaries the image ships, names only runtime library
  packages (no -dev) that are installed, and covers every library they load;
- the runtime stage runs as a numeric non-root user, bakes in the shipped model (named in the
  ENTRYPOINT, CMD empty), and its HEALTHCHECK is the project's client (`textgen ... health`);
- the image's ENTRYPOINT + CMD, run here with the paths and ports mapped to this checkout,
  serve the model, and the HEALTHCHECK command exits 0 against it, non-zero once it is gone;
- .dockerignore keeps build trees, node_modules and .git out of the context, and nothing
  the Dockerfile copies.
"""

import argparse
import fnmatch
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

from replicas import free_port, stop_and_show_log, wait_for_port


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    print(f"ok   {message}")


def parse_dockerfile(path):
    """[(stage name, [(INSTRUCTION, arguments), ...]), ...]; global ARGs in stage None."""
    with open(path) as f:
        text = re.sub(r"\\\n", " ", f.read())  # Continuation lines.
    stages = [(None, [])]
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        rest = " ".join(rest.split())
        if instruction == "FROM":
            m = re.match(r"(\S+)(?: AS (\S+))?$", rest, re.I)
            stages.append((m.group(2), [("FROM", m.group(1))]))
        else:
            stages[-1][1].append((instruction, rest))
    return stages


def exec_form(rest):
    """The JSON array of an exec-form instruction (CMD, ENTRYPOINT, HEALTHCHECK's CMD)."""
    return json.loads(rest[rest.index("["):])


def dockerignored(patterns, path):
    """Whether Docker's .dockerignore patterns exclude path or a directory above it."""
    parts = path.split("/")
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        p = pattern.lstrip("!").strip("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            # Docker's `**` matches any number of directories; fnmatch's `*` crosses `/`.
            if fnmatch.fnmatch(prefix, p) or (p.startswith("**/") and
                                              fnmatch.fnmatch(parts[i - 1], p[3:])):
                excluded = not negate
                break
    return excluded


def main() -> int:
    parser = argparse.ArgumentParser()
    for flag in ("repo", "build_dir", "server", "cli"):
        parser.add_argument(f"--{flag}", required=True)
    args = parser.parse_args()
    dockerfile = os.path.join(args.repo, "deploy", "docker", "Dockerfile")
    stages = parse_dockerfile(dockerfile)
    names = [name for name, _ in stages[1:]]
    check(names[0] == "build" and names[-1] == "runtime",
          f"stages {names}: build first, runtime LAST (a build without --target builds the "
          "last stage: the default image is the server)")
    global_args = dict(rest.split("=", 1) for i, rest in stages[0][1] if i == "ARG")
    base = global_args.get("DEBIAN_IMAGE", "")
    check(base.startswith("debian:bookworm"), f"the base image is Debian bookworm: {base}")
    by_name = dict(stages)
    build = by_name["build"]
    for final in ("runtime", "nginx"):
        # The Debian layer: packages installed on the Debian base in FINAL-root, copied whole
        # onto scratch in FINAL-base (so that / is traversable whatever the base's root mode).
        # FINAL adds the application on top in layers of its own, so that new code reuses the
        # base layer: not one squashed layer.
        root, base_stage = by_name[f"{final}-root"], by_name[f"{final}-base"]
        check(base_stage[:2] == [("FROM", "scratch"), ("COPY", f"--from={final}-root / /")]
              and not any(i in ("COPY", "ADD", "RUN") for i, _ in base_stage[2:]),
              f"stage {final}-base is {final}-root copied onto scratch, nothing else")
        app_copies = [rest for i, rest in by_name[final] if i in ("COPY", "ADD")]
        check(by_name[final][0] == ("FROM", f"{final}-base") and app_copies
              and not any(rest.endswith(" / /") for rest in app_copies),
              f"stage {final} adds the application to {final}-base in layers of its own: "
              f"{app_copies}")
        root_copies = [rest for i, rest in root if i in ("COPY", "ADD")]
        check(not any("/out/bin" in c or "models/" in c or "deploy/nginx" in c
                      for c in root_copies),
              f"{final}-root (the base layer) holds no application files: {root_copies}")
    runtime = by_name["runtime-root"] + by_name["runtime-base"] + by_name["runtime"]
    earlier = {"${DEBIAN_IMAGE}", "scratch"}
    for name, instructions in stages[1:]:
        check(dict(instructions)["FROM"] in earlier,
              f"stage {name} starts from that image, scratch or an earlier stage")
        earlier.add(name)

    # --- apt leaves nothing in a layer: each RUN that installs packages (apt-get install,
    # or setup.sh, which runs it) cleans apt's caches in the same RUN, after the install. ---
    cleaning = ("apt-get clean", "rm -rf", "/var/lib/apt/lists/*", "/var/cache/apt/*.bin")
    for name, instructions in stages[1:]:
        for i, rest in instructions:
            install = re.search(r"apt-get install|apt install|setup\.sh", rest)
            if i != "RUN" or not install:
                continue
            tail = rest[install.start():]
            check(all(c in tail for c in cleaning),
                  f"stage {name}: the RUN that installs packages then runs apt-get clean "
                  "(/var/cache/apt/archives/*.deb) and removes /var/lib/apt/lists/* and "
                  f"/var/cache/apt/*.bin: {rest[:70]}...")

    # --- Build stage: scripts/setup.sh is the only source of packages. ---
    runs = [rest for i, rest in build if i == "RUN"]
    copies = [rest for i, rest in build if i == "COPY"]
    check(any(c.split()[0] == "scripts/setup.sh" for c in copies),
          "the build stage copies scripts/setup.sh in")
    setup_dest = next(c.split()[1] for c in copies if c.split()[0] == "scripts/setup.sh")
    check(any(r.split()[:2] == [setup_dest, "build"] for r in runs),
          f"and runs it for the build group only ({setup_dest} build)")
    check(not any(re.search(r"apt-get install|apt install|pip install|npm ", r) for r in runs),
          "no other package installs in the build stage")
    with open(os.path.join(args.repo, "README.md")) as f:
        readme = f.read()
    with open(os.path.join(args.repo, "scripts", "test.sh")) as f:
        test_sh = f.read()
    check("scripts/setup.sh" in readme and re.search(r"^scripts/setup\.sh$", test_sh, re.M),
          "the README's set-up and scripts/test.sh (CI) run the same scripts/setup.sh")
    build_args = dict(rest.split("=", 1) for i, rest in build if i == "ARG" and "=" in rest)
    check(build_args.get("TEXTGEN_NATIVE") == "OFF",
          "build argument TEXTGEN_NATIVE defaults to OFF (portable)")
    cmake_run = next(r for r in runs if "cmake -S" in r)
    check("-DTEXTGEN_NATIVE=${TEXTGEN_NATIVE}" in cmake_run, "cmake gets -DTEXTGEN_NATIVE from it")
    with open(os.path.join(args.repo, "CMakeLists.txt")) as f:
        check(re.search(r"option\(TEXTGEN_NATIVE .*\)", f.read()),
              "CMake's TEXTGEN_NATIVE option exists (the image says OFF whatever its default)")
    targets = re.search(r"--target ([\w ]+?) &&", cmake_run).group(1).split()
    help_out = subprocess.run(["cmake", "--build", args.build_dir, "--target", "help"],
                              capture_output=True, text=True, timeout=300).stdout
    known = {line.split(":")[0] for line in help_out.splitlines()}
    check(targets and all(t in known for t in targets), f"the targets it builds exist: {targets}")

    # --- Runtime packages: what the binaries load, and nothing for building. ---
    out = subprocess.run([os.path.join(args.repo, "deploy", "docker", "runtime-packages.sh"),
                          args.server, args.cli], capture_output=True, text=True, timeout=300)
    check(out.returncode == 0, f"runtime-packages.sh resolves every library {out.stderr}")
    packages = out.stdout.split()
    print(f"     runtime packages: {' '.join(packages)}")
    check(packages and not any(p.endswith("-dev") for p in packages),
          "no -dev package in the runtime stage")
    for p in packages:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p],
                                capture_output=True, text=True).stdout
        check(status == "install ok installed", f"{p} is a Debian package installed here")
    check({"libgrpc++1.51", "libprotobuf32", "libspdlog1.10"} <= set(packages),
          "it includes gRPC, Protobuf and spdlog's runtime libraries")
    # A library that no package installed (here: a copy found through LD_LIBRARY_PATH)
    # cannot be left out silently: the image build stops, naming it.
    with tempfile.TemporaryDirectory() as tmp:
        lib = next(line.split()[2] for line in subprocess.run(
            ["ldd", args.server], capture_output=True, text=True).stdout.splitlines()
            if "libspdlog" in line)
        shutil.copy(lib, tmp)
        out = subprocess.run(
            [os.path.join(args.repo, "deploy", "docker", "runtime-packages.sh"), args.server],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, LD_LIBRARY_PATH=tmp))
        check(out.returncode != 0 and "no Debian package owns" in out.stderr,
              f"runtime-packages.sh refuses a library no package owns: {out.stderr.strip()}")
    runtime_runs = " ".join(rest for i, rest in runtime if i == "RUN")
    check("runtime-packages.txt" in runtime_runs and "-dev" not in runtime_runs,
          "the runtime stage installs that list")

    # --- Runtime stage: user, model, health check. ---
    users = [rest for i, rest in runtime if i == "USER"]
    check(users and users[-1].split(":")[0].isdigit() and int(users[-1].split(":")[0]) > 0,
          f"runs as a numeric non-root user: {users}")
    model_copy = [rest.split() for i, rest in runtime
                  if i == "COPY" and rest.startswith("models/")]
    check(model_copy and model_copy[0][0] == "models/shakespeare-char",
          f"bakes in the shipped model at {model_copy[0][1]}")
    model_in_image = model_copy[0][1]
    healthcheck = next(rest for i, rest in runtime if i == "HEALTHCHECK")
    health_cmd = exec_form(healthcheck)
    check(health_cmd[0] == "textgen" and health_cmd[-1] == "health",
          f"HEALTHCHECK is the project's client: {health_cmd}")
    entrypoint = exec_form(next(rest for i, rest in runtime if i == "ENTRYPOINT"))
    cmd = exec_form(next(rest for i, rest in runtime if i == "CMD"))
    check(entrypoint[0] == "textgen_server" and f"--model={model_in_image}" in entrypoint
          and cmd == [],
          f"ENTRYPOINT {entrypoint} serves the baked-in model and CMD {cmd} is empty, so "
          "arguments after the image name are appended and keep the model")

    # --- Run the image's command line and health check here. ---
    port, metrics_port, http_port = free_port(), free_port(), free_port()
    image_port = next(a for a in entrypoint if a.startswith("--port=")).split("=")[1]
    image_metrics = next(a for a in entrypoint if a.startswith("--metrics_port=")).split("=")[1]
    image_http = next(a for a in entrypoint if a.startswith("--http_port=")).split("=")[1]
    mapped = [args.server] + [
        a.replace("--host=0.0.0.0", "--host=127.0.0.1")
         .replace("--metrics_host=0.0.0.0", "--metrics_host=127.0.0.1")
         .replace(f"--port={image_port}", f"--port={port}")
         .replace(f"--metrics_port={image_metrics}", f"--metrics_port={metrics_port}")
         .replace(f"--http_port={image_http}", f"--http_port={http_port}")
         .replace(model_in_image, os.path.join(args.repo, "models", "shakespeare-char"))
        for a in entrypoint[1:] + cmd]
    health = [args.cli] + [a.replace(f":{image_port}", f":{port}") for a in health_cmd[1:]]
    print(f"     running {shlex.join(mapped)}")
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(mapped, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, proc, "the image's command line")
            h = subprocess.run(health, capture_output=True, text=True, timeout=30)
            check(h.returncode == 0 and "SERVING" in h.stdout,
                  f"the HEALTHCHECK command passes against it: {shlex.join(health)}")
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                        timeout=10) as r:
                check(b"textgen_kv_slots_total" in r.read(), "its metrics port serves metrics")
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/health",
                                        timeout=10) as r:
                check(b"SERVING" in r.read(), "its HTTP port answers GET /health")
            proc.send_signal(signal.SIGTERM)
            check(proc.wait(timeout=300) == 0, "SIGTERM drains and exits 0")
            h = subprocess.run(health, capture_output=True, text=True, timeout=30)
            check(h.returncode != 0, f"the HEALTHCHECK fails once it is gone ({h.returncode})")
        finally:
            stop_and_show_log(proc, log)

    # Scripts the image runs keep their execute bit (COPY preserves the mode).
    for script in ("deploy/docker/runtime-packages.sh", "deploy/nginx/render.sh",
                   "deploy/nginx/entrypoint.sh", "scripts/setup.sh"):
        check(os.access(os.path.join(args.repo, script), os.X_OK), f"{script} is executable")
    nginx_stage = by_name["nginx-root"] + by_name["nginx-base"] + by_name["nginx"]
    nginx_entry = exec_form(next(rest for i, rest in nginx_stage if i == "ENTRYPOINT"))
    check(nginx_entry == ["/etc/textgen-nginx/entrypoint.sh"]
          and any("deploy/nginx/entrypoint.sh" in rest for i, rest in nginx_stage if i == "COPY"),
          "the nginx stage runs deploy/nginx/entrypoint.sh (what deploy_nginx_lb runs)")

    # --- .dockerignore ---
    with open(os.path.join(args.repo, ".dockerignore")) as f:
        patterns = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    for path in ("build", "build-asan", ".git", "tests/npm/node_modules",
                 "client/__pycache__"):
        check(dockerignored(patterns, path), f".dockerignore excludes {path}")
    needed = ["scripts/setup.sh", "models/shakespeare-char/model.safetensors",
              "deploy/docker/runtime-packages.sh", "deploy/nginx/nginx.conf.template",
              "CMakeLists.txt", "server/main.cc", "client/main.cc", "proto/textgen/v1/textgen.proto"]
    for stage_name, instructions in stages[1:]:
        for i, rest in instructions:
            if i == "COPY" and not rest.startswith("--from"):
                needed.extend(src for src in rest.split()[:-1] if src != ".")
    for path in needed:
        check(os.path.exists(os.path.join(args.repo, path)) and not dockerignored(patterns, path),
              f"the context keeps {path}")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
