#!/usr/bin/python3
"""scripts/setup.sh's dependency groups, who installs which, and how quietly.

  setup_groups_test.py --repo .

- run + build (scripts/run.sh's list) has no nginx, no PyTorch, no node/npm; the full
  list (scripts/test.sh, CI) has them; every package is in exactly one group;
- scripts/run.sh calls `scripts/setup.sh run build`, scripts/test.sh `scripts/setup.sh` (all),
  the Dockerfile's build stage `setup.sh build`;
- on a "fresh machine" (fake dpkg-query saying nothing is installed, fake apt-get printing
  800 lines of unpacking) setup.sh prints a handful of lines, names its log, and installs
  exactly the groups' packages; when apt-get fails it exits non-zero with the log's tail.
"""

import argparse
import os
import re
import stat
import subprocess
import sys
import tempfile

# numpy is not here: the Python client's attention maps are numpy arrays (issue 33), so it is
# in the run group.
FORBIDDEN_TO_RUN = {"nginx", "python3-torch", "nodejs", "npm", "libopenblas0-pthread"}


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    print(f"ok   {message}")


def listed(setup, *groups):
    out = subprocess.run([setup, "--list", *groups], capture_output=True, text=True, check=True)
    return out.stdout.split()


def fake_bin(tmp, apt_fails=False):
    """A PATH dir whose dpkg-query finds nothing, apt-get logs its arguments and floods
    stdout like a real install, and id says root."""
    d = os.path.join(tmp, "bin")
    os.makedirs(d, exist_ok=True)
    scripts = {
        "dpkg-query": "#!/bin/sh\nexit 1\n",
        "id": "#!/bin/sh\necho 0\n",
        "apt-get": f"""#!/bin/sh
echo "$@" >> {tmp}/apt-calls
i=0
while [ $i -lt 400 ]; do echo "Unpacking pkg$i ..."; echo "Setting up pkg$i ..."; i=$((i+1)); done
{'echo "E: Unable to locate package nope" >&2; exit 100' if apt_fails else 'exit 0'}
""",
    }
    for name, text in scripts.items():
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return d


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", required=True)
    args = parser.parse_args()
    setup = os.path.join(args.repo, "scripts", "setup.sh")

    groups = {g: listed(setup, g) for g in ("run", "build", "test")}
    everything = listed(setup)
    run_install = listed(setup, "run", "build")
    print("run + build:", " ".join(run_install))
    check(not FORBIDDEN_TO_RUN & set(run_install),
          f"run + build installs none of {sorted(FORBIDDEN_TO_RUN)}")
    check(FORBIDDEN_TO_RUN <= set(everything), "all groups (test.sh, CI) install them")
    check(sorted(everything) == sorted(groups["run"] + groups["build"] + groups["test"]),
          "no group: all three")
    seen = [p for g in groups.values() for p in g]
    check(len(seen) == len(set(seen)), "every package is in exactly one group")
    check(not any(p.endswith("-dev") or p in ("cmake", "build-essential")
                  for p in groups["run"]), "the run group has no build tools or -dev packages")
    check(subprocess.run([setup, "bogus"], capture_output=True).returncode == 2,
          "an unknown group is refused")

    def read(*parts):
        with open(os.path.join(args.repo, *parts)) as f:
            return f.read()

    check(re.search(r"^scripts/setup\.sh run build$", read("scripts", "run.sh"), re.M),
          "scripts/run.sh installs run + build")
    check(re.search(r"^scripts/setup\.sh$", read("scripts", "test.sh"), re.M),
          "scripts/test.sh installs every group")
    check(re.search(r"^RUN /src/scripts/setup\.sh build ", read("deploy", "docker", "Dockerfile"),
                    re.M), "the image's build stage installs build only")

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PATH=fake_bin(tmp) + ":/usr/bin:/bin", TMPDIR=tmp)
        out = subprocess.run([setup, "run", "build"], capture_output=True, text=True, env=env)
        lines = (out.stdout + out.stderr).splitlines()
        print("\n".join("  | " + l for l in lines))
        check(out.returncode == 0, "a fresh run + build install succeeds")
        check(len(lines) <= 8, f"and prints {len(lines)} lines, not apt's 800")
        check(any(os.path.join(tmp, "textgen-setup.log") in l for l in lines),
              "it names the log apt's output went to")
        with open(os.path.join(tmp, "apt-calls")) as f:
            install = [l.split() for l in f if l.startswith("install")][0]
        check(sorted(p for p in install[1:] if not p.startswith("-") and "=" not in p)
              == sorted(run_install), "apt-get installs exactly the run + build packages")

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PATH=fake_bin(tmp, apt_fails=True) + ":/usr/bin:/bin",
                   TMPDIR=tmp)
        out = subprocess.run([setup, "build"], capture_output=True, text=True, env=env)
        check(out.returncode != 0 and "Unable to locate package nope" in out.stderr,
              "a failing apt-get fails setup.sh, with the log's tail on stderr")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
