#!/bin/sh
# The nginx image's entrypoint (deploy/docker/Dockerfile, target nginx): renders the template
# for $UPSTREAMS and $LISTEN_PORT into a writable prefix and runs nginx in the foreground,
# logging to the container's stdout and stderr. Runs as a non-root user. NGINX overrides the
# binary (tests pass the one CMake found; /usr/sbin is not on every user's PATH).
set -eu
here=$(dirname "$0")
prefix=${NGINX_PREFIX:-/tmp/nginx}
# RESOLVER=auto: the container's own DNS server (compose's, which answers the service name
# with every replica's current address), from /etc/resolv.conf.
if [ "${RESOLVER:-}" = auto ]; then
  RESOLVER=$(awk '$1 == "nameserver" { print $2; exit }' /etc/resolv.conf)
  [ -n "$RESOLVER" ] || { echo "$0: RESOLVER=auto but /etc/resolv.conf names no nameserver" >&2; exit 2; }
  case $RESOLVER in *:*) RESOLVER="[$RESOLVER]" ;; esac  # An IPv6 address.
  export RESOLVER
  echo "$0: replicas $UPSTREAMS, looked up through $RESOLVER" >&2
fi
"$here/render.sh" "$here/nginx.conf.template" "$prefix"
ln -sf /dev/stderr "$prefix/logs/error.log"
ln -sf /dev/stdout "$prefix/logs/access.log"
# -e: nginx's log before the config is read (its default, /var/log/nginx, is root's).
exec "${NGINX:-nginx}" -e stderr -p "$prefix" -c nginx.conf -g "daemon off; pid $prefix/nginx.pid;"
