#!/bin/sh
# Prints the apt packages (one a line, sorted) that hold the shared libraries BINARY... load, as
# ldd resolves them here. The image's build stage runs it on the installed binaries, and its
# runtime stage installs exactly those packages: the list follows the build (Debian 12's
# libgrpc++1.51 or Ubuntu 24.04's libgrpc++1.51t64, libcudart of the CUDA image, ...) without a
# hand-kept list per distribution. Fails, naming it, on a library no package owns.
#   runtime-packages.sh BINARY...
set -eu
libs=$(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)
[ -n "$libs" ] || { echo "runtime-packages: ldd found no libraries in $*" >&2; exit 1; }
for lib in $libs; do
  # dpkg knows a file by the path its package ships; with merged /usr that may be /usr/lib/...
  # while ldd says /lib/..., or the symlink's target.
  owner=""
  for path in "$lib" "/usr$lib" "$(readlink -f "$lib")"; do
    owner=$(dpkg-query -S "$path" 2>/dev/null | grep -v '^diversion' | head -n1 | cut -d: -f1) || true
    [ -n "$owner" ] && break
  done
  [ -n "$owner" ] || { echo "runtime-packages: no package owns $lib" >&2; exit 1; }
  echo "$owner"
done | tr ',' '\n' | sed 's/^ *//' | sort -u
