#!/bin/sh
# Prints the apt packages (one a line, sorted) that hold the shared libraries BINARY... load, as
# ldd resolves them here. The image's build stage runs it on the installed binaries, and its
# runtime stage installs exactly those packages: the list follows the build (Debian 12's
# libgrpc++1.51 or Ubuntu 24.04's libgrpc++1.51t64, libcudart of the CUDA image, ...) without a
# hand-kept list per distribution. Fails, naming it, on a library ldd does not find or no
# package owns, except with --copy-cuda-libs: then a library of the CUDA toolkit (under
# /usr/local/cuda*) that no package owns, as when the toolkit is given to the build with
# `--volume` (deploy/docker/build-gpu-image), is copied into DIR under the name ldd found
# (its soname, e.g. libcudart.so.13), and a line "NAME SOURCE" is added to the file LIST.
#   runtime-packages.sh [--copy-cuda-libs DIR LIST] BINARY...
set -eu
copy_dir="" copy_list=""
if [ "${1:-}" = --copy-cuda-libs ]; then
  copy_dir=$2 copy_list=$3
  shift 3
fi
deps=$(ldd "$@")
missing=$(echo "$deps" | awk '$2 == "=>" && $3 == "not" { print $1 }' | sort -u)
if [ -n "$missing" ]; then
  echo "runtime-packages: ldd finds no $(echo "$missing" | tr '\n' ' ')" >&2
  exit 1
fi
libs=$(echo "$deps" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)
[ -n "$libs" ] || { echo "runtime-packages: ldd found no libraries in $*" >&2; exit 1; }
# One dpkg-query for every path a library may be known by: each call reads every package's file
# list (a call a path took 40 s of the image build). dpkg knows a file by the path its package
# ships; with merged /usr that may be /usr/lib/... while ldd says /lib/..., or the symlink's
# target. It prints "PACKAGE[:ARCH][, PACKAGE...]: PATH" for each path it knows.
known=$(for lib in $libs; do printf '%s\n%s\n%s\n' "$lib" "/usr$lib" "$(readlink -f "$lib")"; done |
  sort -u | xargs dpkg-query -S 2>/dev/null | grep -v '^diversion') || true
# owner_of PATH: the packages dpkg names for PATH, or nothing.
owner_of() {
  echo "$known" | awk -v path="$1" '{
    n = length($0) - length(path) - 1
    if (n > 0 && substr($0, n) == ": " path) { print substr($0, 1, n - 1); exit }
  }'
}
owners=""
for lib in $libs; do
  owner=""
  for path in "$lib" "/usr$lib" "$(readlink -f "$lib")"; do
    owner=$(owner_of "$path")
    [ -n "$owner" ] && break
  done
  if [ -z "$owner" ] && [ -n "$copy_dir" ]; then
    case $lib in
      /usr/local/cuda*/*)
        mkdir -p "$copy_dir"
        cp -L "$lib" "$copy_dir/$(basename "$lib")"
        echo "$(basename "$lib") $(readlink -f "$lib")" >>"$copy_list"
        echo "runtime-packages: no package owns $lib: copied it to $copy_dir" >&2
        continue
        ;;
    esac
  fi
  [ -n "$owner" ] || { echo "runtime-packages: no package owns $lib" >&2; exit 1; }
  owners="$owners,$owner"
done
# dpkg-query -S names several packages for a file some share, separated by ", ", each maybe
# with its architecture (libc6:amd64).
echo "$owners" | tr ',' '\n' | sed 's/^ *//; s/:.*//' | grep -v '^$' | sort -u
