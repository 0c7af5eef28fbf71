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
libs=$(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)

# dpkg records a library under the path its package ships (/lib or /usr/lib, before and
# after merged /usr), so ask for each path as ldd prints it, resolved, and with /usr added or
# removed: one dpkg-query for all (each call reads the whole package database).
candidates() {
  real=$(readlink -f "$1")
  printf '%s\n' "$1" "$real" "/usr$1" "/usr$real" "${1#/usr}" "${real#/usr}"
}
all=$(for lib in $libs; do candidates "$lib"; done | sort -u)
# "package[:arch]: path" per path that some package owns; unowned paths only go to stderr.
owners=$(dpkg-query -S $all 2>/dev/null || true)

packages=""
for lib in $libs; do
  owner=""
  for path in $(candidates "$lib"); do
    owner=$(printf '%s\n' "$owners" | awk -v p="$path" '$NF == p { sub(/:.*/, "", $1); print $1; exit }')
    [ -n "$owner" ] && break
  done
  if [ -z "$owner" ]; then
    echo "$0: no Debian package owns $lib" >&2
    exit 1
  fi
  packages="$packages $owner"
done
printf '%s\n' $packages | sort -u
