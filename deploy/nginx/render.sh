#!/bin/sh
# Renders nginx.conf.template into a runnable nginx prefix directory (the one substitution
# used by compose's nginx container and by tests/deploy/nginx_lb_test.py).
#
#   UPSTREAMS="10.0.0.5:50051 10.0.0.6:50051" LISTEN_PORT=50051 render.sh TEMPLATE PREFIX_DIR
#   UPSTREAMS=textgen:50051 RESOLVER=10.89.0.1 LISTEN_PORT=50051 render.sh TEMPLATE PREFIX_DIR
#
# Writes PREFIX_DIR/nginx.conf and creates PREFIX_DIR/logs and PREFIX_DIR/tmp; then run
#   nginx -p PREFIX_DIR -c nginx.conf -g 'daemon off;'
# Two ways to name the replicas:
# - static (RESOLVER unset): UPSTREAMS lists addresses, separated by spaces or commas, each a
#   `server` of an upstream block (a host name there is resolved ONCE, when nginx starts:
#   open-source nginx 1.22 never looks it up again). MAX_FAILS (default 1) and FAIL_TIMEOUT
#   (default 10s) go on every server line.
# - resolved (RESOLVER set, compose and any DNS-named replicas): UPSTREAMS is one NAME:PORT,
#   which nginx looks up through the DNS server RESOLVER again once an answer is
#   RESOLVE_VALID (default 2s) old, and every call goes to one of the addresses it answers
#   (passed on to another if that one refuses). So a replica that comes back on a new
#   address, or a new replica, gets calls within seconds, with no nginx restart.
# UPSTREAM_SCHEME: grpc (default, plaintext HTTP/2 to the replicas) or grpcs (TLS; add the
# grpc_ssl_* directives to the template's location).
set -eu

if [ $# -ne 2 ]; then
  echo "usage: UPSTREAMS='host:port ...' LISTEN_PORT=N $0 TEMPLATE PREFIX_DIR" >&2
  exit 2
fi
template=$1
prefix=$2
: "${LISTEN_PORT:=50051}"
# New calls a second per client address (and as many again at once), the rapid-reset bound
# (see the template).
: "${CALLS_PER_SECOND:=200}"
: "${MAX_FAILS:=1}"
: "${FAIL_TIMEOUT:=10s}"
upstreams=$(printf '%s' "${UPSTREAMS:-}" | tr ',' ' ')
if [ -z "$(printf '%s' "$upstreams" | tr -d ' ')" ]; then
  echo "$0: UPSTREAMS is empty: name at least one replica address (host:port)" >&2
  exit 2
fi
case $CALLS_PER_SECOND in
  '' | *[!0-9]* | 0) echo "$0: CALLS_PER_SECOND must be a positive number, not '$CALLS_PER_SECOND'" >&2; exit 2 ;;
esac
case $LISTEN_PORT in
  '' | *[!0-9]*) echo "$0: LISTEN_PORT must be a port number, not '$LISTEN_PORT'" >&2; exit 2 ;;
esac

: "${UPSTREAM_SCHEME:=grpc}"
: "${RESOLVE_VALID:=2s}"
case $UPSTREAM_SCHEME in
  grpc | grpcs) ;;
  *) echo "$0: UPSTREAM_SCHEME must be grpc or grpcs, not '$UPSTREAM_SCHEME'" >&2; exit 2 ;;
esac
for address in $upstreams; do
  case $address in
    *:*) ;;
    *) echo "$0: upstream '$address' has no port (want host:port)" >&2; exit 2 ;;
  esac
done

if [ -n "${RESOLVER:-}" ]; then
  set -- $upstreams
  if [ $# -ne 1 ]; then
    echo "$0: with RESOLVER, UPSTREAMS is one NAME:PORT (got: $upstreams)" >&2
    exit 2
  fi
  # A variable in grpc_pass makes nginx resolve the name at run time, through `resolver`.
  config="  resolver ${RESOLVER} valid=${RESOLVE_VALID} ipv6=off;
  resolver_timeout 2s;"
  pass="      set \$textgen_replicas ${1};
      grpc_pass ${UPSTREAM_SCHEME}://\$textgen_replicas;"
else
  servers=""
  for address in $upstreams; do
    servers="${servers}    server ${address} max_fails=${MAX_FAILS} fail_timeout=${FAIL_TIMEOUT};
"
  done
  # A replica that fails (connection refused or reset) max_fails times is skipped for
  # fail_timeout, then tried again. keepalive reuses HTTP/2 connections to the replicas.
  config="  upstream textgen {
${servers}    keepalive 16;
  }"
  pass="      grpc_pass ${UPSTREAM_SCHEME}://textgen;"
fi

mkdir -p "$prefix/logs" "$prefix/tmp"
# awk rather than envsubst (gettext-base is not in every image) and rather than sed (the
# replacements hold newlines); only these placeholders are replaced, nginx's own $vars stay.
CONFIG=$config PASS=$pass awk -v port="$LISTEN_PORT" -v rate="$CALLS_PER_SECOND" '
  /^\$\{UPSTREAMS_CONFIG\}$/ { print ENVIRON["CONFIG"]; next }
  /^\$\{GRPC_PASS\}$/ { print ENVIRON["PASS"]; next }
  { gsub(/\$\{LISTEN_PORT\}/, port); gsub(/\$\{CALLS_PER_SECOND\}/, rate); print }
' "$template" > "$prefix/nginx.conf"
if grep -n '^[^#]*\${' "$prefix/nginx.conf" >&2; then
  echo "$0: placeholders left unreplaced in $prefix/nginx.conf" >&2
  exit 1
fi
