#!/usr/bin/env bash
# Builds a variant of libemb_bag_capi.so whose bag kernels are compiled with other tuning macros
# (kernels/bags/bag_tuning.cuh and bag_launch.cu name them), for bag_benchmark.py to measure beside
# the default build in one device call.
#
#   bench/kernels/build_bag_variant.sh BUILD_DIR OUT.so -DEMB_BAG_MIN_BLOCKS=1 -DEMB_BAG_UNROLL_1=16
#
# BUILD_DIR is a configured CUDA build (Ninja or Unix Makefiles) in which emb_bag_capi is already
# built.
set -euo pipefail
build=$(realpath "$1")
out=$(realpath -m "$2")
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
object=kernels/CMakeFiles/emb_kernels.dir/bags/bag_launch.cu.o
if [[ -f $build/build.ninja ]]; then  # Ninja: the flags from the object's own command
  flags=$(ninja -C "$build" -t commands "$object" | tail -n 1 | sed -e 's/^.*nvcc //' -e 's/ -MD .*//' \
    -e 's/-forward-unknown-to-host-compiler //' -e 's/-DEMB_HAVE_CUDA=1 //')
else  # Unix Makefiles
  flags=$(sed -n 's/^CUDA_FLAGS = //p' "$build/kernels/CMakeFiles/emb_kernels.dir/flags.make")
fi
# shellcheck disable=SC2086
/usr/local/cuda/bin/nvcc $flags -DEMB_HAVE_CUDA=1 -I"$root" "$@" \
  -c "$root/kernels/bags/bag_launch.cu" -o "$work/bag_launch.cu.o"
# The kernels library with the variant's bag_launch in place of the default's.
cp "$build/kernels/libemb_kernels.a" "$work/libemb_kernels.a"
member=$(ar t "$work/libemb_kernels.a" | grep -x 'bag_launch.cu.o')
ar d "$work/libemb_kernels.a" "$member"
ar q "$work/libemb_kernels.a" "$work/bag_launch.cu.o"
# The default's link line, with that library and the output renamed.
if [[ -f $build/build.ninja ]]; then  # run from the build folder
  link=$(ninja -C "$build" -t commands bench/kernels/libemb_bag_capi.so | tail -n 1)
  link=${link#: && }
  link=${link// kernels\/libemb_kernels.a / $work/libemb_kernels.a }
  link=${link/-o bench\/kernels\/libemb_bag_capi.so/-o $out}
  (cd "$build" && eval "$link")
else  # run from the library's folder
  link=$(cat "$build/bench/kernels/CMakeFiles/emb_bag_capi.dir/link.txt")
  link=${link//..\/..\/kernels\/libemb_kernels.a/$work/libemb_kernels.a}
  link=${link/-o libemb_bag_capi.so/-o $out}
  (cd "$build/bench/kernels" && eval "$link")
fi
echo "built $out ($*)"
