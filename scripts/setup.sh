#!/usr/bin/env bash
# Installs, with apt-get, every Debian package textgen needs to build, test and train, skipping
# what is already there. Run as root on Debian bookworm (CI and the README commands call it).
# This is the single list of dependencies: the container image runs this same script.
set -euo pipefail

packages=(
  # Build toolchain.
  build-essential cmake ninja-build pkg-config
  # C++ libraries (see README "Dependencies").
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libeigen3-dev libabsl-dev nlohmann-json3-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # The server's Prometheus metrics over HTTP.
  libcpp-httplib-dev
  # GPT-2's pre-tokenizer regex (Unicode properties, lookahead).
  libpcre2-dev
  # The command-line client's attention heatmaps: PNG encoding, token labels drawn with FreeType.
  libpng-dev libfreetype-dev fonts-dejavu-core
  # The Python client: stubs from grpc_python_plugin (protobuf-compiler-grpc), run with these.
  python3-grpcio python3-protobuf
  # Deployment tests: nginx's grpc_pass in front of two servers on loopback; YAML parsing.
  nginx python3-yaml
  # TLS tests: throwaway CA and certificates made at test time (tests/make_test_certs.sh).
  openssl
  # Training and reference outputs for tests (never used at serving time).
  python3 python3-torch python3-numpy
  libopenblas0-pthread  # bench/ PyTorch reference: OpenBLAS behind libblas.so.3 (reference BLAS: ~25x slower GEMM)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

# Node.js and npm run the reference GPT-2 encoder the tokenizer tests compare against
# (tests/npm). Any node counts: installing Debian's npm over another nodejs would replace it.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages and not root; run as root or install them yourself" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
