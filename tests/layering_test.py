#!/usr/bin/env python3
"""The folders' arrows point down only (README "Layout"; ../shared/DESIGN.md "Layout").

Reads every project #include in the source folders and fails, naming the file, the line and
the rule, when a folder includes one it may not stand on. Also follows the project headers
that server/http/ reaches: none of them may include a gRPC header (grpcpp, grpc/,
*.grpc.pb.h), so the HTTP port is not built on gRPC. Protobuf messages (textgen.pb.h) are
allowed there: server/api/ speaks the API's messages.

Usage: layering_test.py [--repo DIR]   (label unit; no build needed)
"""

import argparse
import os
import re
import sys

# Each folder (longest prefix wins) and the project folders it may include, itself
# included. "model" means the files directly in model/ (the run-time core). Generated
# protobuf headers are named by their own prefix: "textgen/v1" (messages, and the gRPC
# stubs), "grpc_health", "grpc/reflection".
ALLOWED = {
    "base": {"base"},
    "model/kernels": {"base", "model/kernels"},
    "model": {"base", "model/kernels", "model"},
    "model/text": {"base", "model/text"},
    # Structured output: grammars compiled against a tokenizer's vocabulary.
    "model/constraint": {"base", "model/text", "model/constraint"},
    "model/formats": {"base", "model/kernels", "model", "model/text", "model/formats"},
    "engine": {"base", "model/kernels", "model", "model/text", "model/constraint",
               "engine"},
    "explorer": {"base", "explorer"},
    "server/front_door": {"base", "server/front_door"},
    "server/api": {"base", "model/kernels", "model", "model/text", "model/constraint",
                   "engine", "explorer",
                   "server/front_door", "server/api", "textgen/v1"},
    "server/grpc": {"base", "model/kernels", "model", "model/text", "model/constraint",
                    "engine", "explorer",
                    "server/front_door", "server/api", "server/grpc", "textgen/v1",
                    "grpc/reflection"},
    "server/http": {"base", "model/kernels", "model", "model/text", "model/constraint",
                    "engine", "explorer",
                    "server/front_door", "server/api", "server/http", "textgen/v1"},
    # The composition root and main.cc: every server layer, and the loader.
    "server": {"base", "model/kernels", "model", "model/text", "model/constraint",
               "model/formats", "engine",
               "explorer", "server/front_door", "server/api", "server/grpc", "server/http",
               "server", "textgen/v1", "grpc/reflection"},
    "client": {"base", "explorer", "client", "textgen/v1", "grpc_health"},
}
PROJECT_FOLDERS = ["base", "model", "engine", "explorer", "server", "client", "tests",
                   "bench", "tools", "fuzz", "textgen", "grpc_health", "grpc"]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
GRPC_HEADER = re.compile(r"^(grpcpp/|grpc/|grpc\+\+/)|\.grpc\.pb\.h$")


def folder_of(path):
    """The ALLOWED key that owns `path` (a repo-relative file), or None."""
    parts = path.split("/")[:-1]
    while parts:
        key = "/".join(parts)
        if key in ALLOWED:
            return key
        parts.pop()
    return None


def target_folder(include):
    """The folder an include names, as ALLOWED spells folders; None if not the project's."""
    if include.startswith("textgen/v1/"):
        return "textgen/v1"
    if include.startswith("grpc/reflection/"):
        return "grpc/reflection"
    if include.startswith("grpc_health/"):
        return "grpc_health"
    if include.split("/")[0] not in PROJECT_FOLDERS or "/" not in include:
        return None
    return folder_of(include) or include.rsplit("/", 1)[0]


def includes(repo, path):
    """(line number, quote or angle, header) for each #include of `path`."""
    with open(os.path.join(repo, path), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1), m.group(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    repo = parser.parse_args().repo

    sources = []
    for top in ALLOWED:
        for root, _, files in os.walk(os.path.join(repo, top)):
            for name in files:
                if name.endswith((".h", ".cc")):
                    sources.append(os.path.relpath(os.path.join(root, name), repo))
    sources = sorted(set(sources))

    problems = []
    arrows = set()
    for path in sources:
        owner = folder_of(path)
        for number, _, header in includes(repo, path):
            target = target_folder(header)
            if target is None:
                continue
            if target not in ALLOWED[owner]:
                problems.append(f"{path}:{number}: {owner}/ may not include {header} "
                                f"({target}/ is not below it)")
            elif target != owner:
                arrows.add((owner, target))

    # server/http/: nothing it reaches through project headers includes gRPC.
    for path in sources:
        if folder_of(path) != "server/http":
            continue
        seen, stack = set(), [(path, [path])]
        while stack:
            current, chain = stack.pop()
            for number, _, header in includes(repo, current):
                if GRPC_HEADER.search(header) and not header.startswith("textgen/v1/textgen.pb"):
                    problems.append(f"{path}: reaches the gRPC header {header} through "
                                    f"{' -> '.join(chain)}:{number}")
                    continue
                if header in seen or not os.path.isfile(os.path.join(repo, header)):
                    continue
                seen.add(header)
                stack.append((header, chain + [header]))

    print(f"[layering] {len(sources)} files in {len(ALLOWED)} folders, "
          f"{len(arrows)} arrows between folders, {len(problems)} against the layout")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
