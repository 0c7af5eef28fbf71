#!/usr/bin/env bash
# Makes a throwaway certificate authority and certificates signed by it, for the TLS tests
# (never committed: every run makes its own). P-256 keys, valid for one day.
#   OUTDIR/ca.pem ca.key          the CA
#   OUTDIR/server.pem server.key  CN=localhost, SAN localhost and 127.0.0.1 (serverAuth)
#   OUTDIR/client.pem client.key  CN=textgen-test-client (clientAuth)
# Usage: tests/testing/make_test_certs.sh OUTDIR [CA_NAME]
set -euo pipefail
out=$1
ca_name=${2:-textgen-test-ca}
mkdir -p "$out"
cd "$out"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 1 -subj "/CN=$ca_name" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign

leaf() {  # leaf NAME CN EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2"
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" \
    -days 1 -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
leaf server localhost "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf client textgen-test-client "extendedKeyUsage=clientAuth"
rm -f ca.srl
