#!/usr/bin/env bash
# Installs, with apt-get, the Debian packages textgen needs, skipping what is already there.
# Run as root on Debian bookworm. This is the single list of dependencies, in three groups:
#
#   run    what the built server and clients load at run time (the CLI's font, the Python client)
#   build  what configuring and compiling every target needs (compiler, CMake, -dev packages)
#   test   what only the tests, training and references need (PyTorch, nginx, node, ...)
#
#   scripts/setup.sh                 # all three groups (scripts/test.sh, i.e. CI)
#   scripts/setup.sh run build       # scripts/run.sh: build and run, nothing test-only
#   scripts/setup.sh build           # the container image's build stage
#   scripts/setup.sh --list GROUP..  # print the packages of those groups, install nothing
#
# Adding a dependency: append it to the one group that needs it, with a comment saying why.
# apt's and dpkg's output goes to a log file (its path is printed); only progress and errors
# reach the terminal.
set -euo pipefail

run_packages=(
  # The command-line client's attention heatmaps label tokens with this font.
  fonts-dejavu-core
  # The Python client (client/python): stubs generated at build time, run with these; its
  # attention maps are numpy arrays.
  python3-grpcio python3-protobuf python3-numpy
)

build_packages=(
  # Build toolchain.
  build-essential cmake ninja-build pkg-config
  # C++ libraries (see README "Dependencies").
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libeigen3-dev libabsl-dev nlohmann-json3-dev libspdlog-dev
  # The server's HTTP API and Prometheus metrics over HTTP: Boost.Beast over Asio, header-only
  # (with OpenSSL for HTTPS); the tests' and load generator's HTTP client: cpp-httplib.
  libboost1.81-dev libssl-dev libcpp-httplib-dev
  # The metrics' Prometheus exposition format (server/api/metrics.h), core library only.
  prometheus-cpp-dev
  # gRPC's standard protos: server reflection v1 (gRPC 1.51's library serves only v1alpha)
  # and the health-check proto the clients are generated from.
  grpc-proto
  # GPT-2's pre-tokenizer regex (Unicode properties, lookahead).
  libpcre2-dev
  # tokenizer.json's NFC normalizer (Qwen2/3): Unicode normalization.
  libutf8proc-dev
  # The command-line client's attention heatmaps: PNG encoding, token labels drawn with FreeType.
  libpng-dev libfreetype-dev
  # The test and benchmark targets are part of every configure (CMake finds them); small.
  libgtest-dev libgmock-dev libbenchmark-dev
)

test_packages=(
  # Deployment tests: nginx's grpc_pass in front of two servers on loopback (and in front of
  # one under an HTTP/2 rapid-reset flood, tests/server/front_door/rapid_reset_test.py); YAML.
  nginx python3-yaml
  # Fuzzing (fuzz/, ctest label fuzz): clang with libFuzzer and the sanitizer runtimes.
  clang libclang-rt-14-dev
  # TLS tests: throwaway CA and certificates made at test time (tests/testing/make_test_certs.sh).
  openssl
  # Training and reference outputs for tests (never used at serving time).
  python3 python3-torch
  # The chat template engine's reference (tests/model/text/chat_template_fidelity_test): jinja2
  # renders the real templates as transformers does.
  python3-jinja2
  libopenblas0-pthread  # bench/ PyTorch reference: OpenBLAS behind libblas.so.3 (reference BLAS: ~25x slower GEMM)
  # The attention explorer's browser test (tests/browser, label browser): headless Chromium,
  # driven by puppeteer-core from tests/npm.
  chromium
)

list_only=0
groups=()
for arg in "$@"; do
  case $arg in
    --list) list_only=1 ;;
    run | build | test) groups+=("$arg") ;;
    *) echo "usage: $0 [--list] [run] [build] [test]   (no group: all three)" >&2; exit 2 ;;
  esac
done
[ ${#groups[@]} -gt 0 ] || groups=(run build test)

packages=()
with_node=0
for group in "${groups[@]}"; do
  case $group in
    run) packages+=("${run_packages[@]}") ;;
    build) packages+=("${build_packages[@]}") ;;
    # Node.js and npm run the reference encoders the tokenizer and manifest tests compare
    # against (tests/npm). Any node counts: Debian's npm over another nodejs would replace it.
    test) packages+=("${test_packages[@]}"); with_node=1 ;;
  esac
done

if [ "$list_only" = 1 ]; then
  printf '%s\n' "${packages[@]}"
  [ "$with_node" = 0 ] || printf '%s\n' nodejs npm
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
if [ "$with_node" = 1 ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages of ${groups[*]} present"
  exit 0
fi

echo "setup (${groups[*]}): installing ${#missing[@]} packages and their dependencies: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages and not root; run as root or install them yourself" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
log=${TMPDIR:-/tmp}/textgen-setup.log
echo "setup: apt-get's output goes to $log"
# On failure the log's tail says why.
apt_quiet() {
  if ! "$@" >>"$log" 2>&1; then
    echo "setup: '$*' failed; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}
: >"$log"
echo "setup: apt-get update"
apt_quiet apt-get update
echo "setup: apt-get install (a few minutes on a fresh machine)"
apt_quiet apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}"
echo "setup: installed $(grep -c '^Setting up ' "$log") packages"
