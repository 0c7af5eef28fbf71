#!/bin/sh
# Renders nginx.conf.template into a runnable nginx prefix directory (the one substitution
# used by compose's nginx container and by tests/deploy/nginx_lb_test.py).
#
#   UPSTREAMS="10.0.0.5:50051 10.0.0.6:50051" LISTEN_PORT=50051 render.sh TEMPLATE PREFIX_DIR
#
# Writes PREFIX_DIR/nginx.conf and creates PREFIX_DIR/logs and PREFIX_DIR/tmp; then run
#   nginx -p PREFIX_DIR -c nginx.conf -g 'daemon off;'
# UPSTREAMS: replica addresses, separated by spaces or commas; a host name that resolves to
# several addresses (compose's service name with replicas) counts as all of them.
# MAX_FAILS (default 1) and FAIL_TIMEOUT (default 10s) go on every server line.
set -eu

if [ $# -ne 2 ]; then
  echo "usage: UPSTREAMS='host:port ...' LISTEN_PORT=N $0 TEMPLATE PREFIX_DIR" >&2
  exit 2
fi
template=$1
prefix=$2
: "${LISTEN_PORT:=50051}"
: "${MAX_FAILS:=1}"
: "${FAIL_TIMEOUT:=10s}"
upstreams=$(printf '%s' "${UPSTREAMS:-}" | tr ',' ' ')
if [ -z "$(printf '%s' "$upstreams" | tr -d ' ')" ]; then
  echo "$0: UPSTREAMS is empty: name at least one replica address (host:port)" >&2
  exit 2
fi
case $LISTEN_PORT in
  '' | *[!0-9]*) echo "$0: LISTEN_PORT must be a port number, not '$LISTEN_PORT'" >&2; exit 2 ;;
esac

mkdir -p "$prefix/logs" "$prefix/tmp"
servers=""
for address in $upstreams; do
  case $address in
    *:*) ;;
    *) echo "$0: upstream '$address' has no port (want host:port)" >&2; exit 2 ;;
  esac
  servers="${servers}    server ${address} max_fails=${MAX_FAILS} fail_timeout=${FAIL_TIMEOUT};
"
done

# awk rather than envsubst (gettext-base is not in every image) and rather than sed (the
# server lines hold newlines); only these two placeholders are replaced, nginx's own $vars stay.
SERVERS=$servers awk -v port="$LISTEN_PORT" '
  /^\$\{UPSTREAM_SERVERS\}$/ { printf "%s", ENVIRON["SERVERS"]; next }
  { gsub(/\$\{LISTEN_PORT\}/, port); print }
' "$template" > "$prefix/nginx.conf"
if grep -n '^[^#]*\${' "$prefix/nginx.conf" >&2; then
  echo "$0: placeholders left unreplaced in $prefix/nginx.conf" >&2
  exit 1
fi
