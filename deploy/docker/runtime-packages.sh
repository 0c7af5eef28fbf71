#!/bin/sh
# Prints, one per line, the Debian packages that hold the shared libraries the given
# binaries load (ldd), so that the image's runtime stage installs exactly those and none of
# the -dev packages. Run in the build stage, on the binaries just built:
#   deploy/docker/runtime-packages.sh build/server/textgen_server build/client/textgen
# Fails, naming it, on a library no package owns or that ldd cannot find.
set -eu
if [ $# -eq 0 ]; then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi
for binary in "$@"; do
  if [ ! -x "$binary" ]; then
    echo "$0: $binary is not an executable file" >&2
    exit 1
  fi
done
missing=$(ldd "$@" | awk '/=> not found/ { print $1 }' | sort -u)
if [ -n "$missing" ]; then
  echo "$0: ldd finds no file for: $missing" >&2
  exit 1
fi
packages=""
for lib in $(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
  # dpkg records a library under the path the package ships (/lib or /usr/lib, before and
  # after merged /usr), so try the path as ldd prints it, then the resolved one, then both
  # with /usr added or removed.
  real=$(readlink -f "$lib")
  owner=""
  for path in "$lib" "$real" "/usr$lib" "/usr$real" "${lib#/usr}" "${real#/usr}"; do
    owner=$(dpkg-query -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$owner" ] && break
  done
  if [ -z "$owner" ]; then
    echo "$0: no Debian package owns $lib" >&2
    exit 1
  fi
  packages="$packages $owner"
done
printf '%s\n' $packages | sort -u
