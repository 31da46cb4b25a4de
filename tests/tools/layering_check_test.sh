#!/usr/bin/env bash
# The layering is enforced twice, and this shows that both catch a wrong-way include:
#  1. layering_check.py fails on a copy of the sources with a bad include added (kernels/ ->
#     service/, kernels/ -> gRPC, batch/ -> rpc/, anything -> bench/), naming the file, line and
#     rule;
#  2. the build: compiled with a library's include directories (build/layers/, emb_expose), a
#     header of a layer above is not found.
#   layering_check_test.sh SOURCE_ROOT BUILD_DIR
set -euo pipefail
root=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check=$root/tests/tools/layering_check.py

python3 "$check" "$root"

cases=("kernels/cpu_gather.cc|service/store/embedding_store.h|kernels/ may not include store"
       "kernels/cpu_gather.cc|grpcpp/grpcpp.h|kernels/ may not include grpc"
       "service/batch/batcher.cc|service/rpc/embedding_service.h|service/batch/ may not include rpc"
       "service/metrics/metrics.h|grpcpp/support/server_interceptor.h|may not include grpc"
       "client/embedding_client.cc|service/rpc/grpc_status.h|client/ may not include validation"
       "service/store/store_factory.cc|bench/kernels/gather_variant.h|service/store/ may not include bench"
       "kernels/lookup.cc|bench/kernels/gather_variant.h|kernels/ may not include bench"
       "service/store/gpu/gpu_store.cc|kernels/gather_plan.h|service/store/ may not include kernels_testing"
       "service/store/gpu/gpu_store.cc|kernels/bags/bag_tuning.cuh|service/store/ may not include kernels_testing"
       "bench/reference/reference_server_main.cc|tests/testing/status_matchers.h|bench/ may not include tests")
for c in "${cases[@]}"; do
  IFS='|' read -r file include rule <<<"$c"
  rm -rf "$tmp/src" && mkdir "$tmp/src"
  cp -r "$root/kernels" "$root/client" "$root/service" "$root/proto" "$root/bench" "$tmp/src/"
  echo "#include \"$include\"" >>"$tmp/src/$file"
  if out=$(python3 "$check" "$tmp/src"); then
    echo "FAIL: layering_check.py accepted $file including $include" >&2
    exit 1
  fi
  grep -qF "$file:" <<<"$out" && grep -qF "$rule" <<<"$out" || {
    echo "FAIL: for $file including $include, expected '$rule' in:" >&2
    echo "$out" >&2
    exit 1
  }
  echo "ok: layering_check.py rejects $file -> $include"
done

# The build: kernels/ sees only kernels/ (and the data_type header), batch/ nothing of rpc/, store/
# nothing of the lookup's insides (emb::kernels_testing).
compile_with() {  # LIBRARY... : compile $tmp/probe.cc with those libraries' include trees
  local flags=()
  for lib in "$@"; do flags+=("-I$build/layers/$lib"); done
  c++ -std=c++17 -fsyntax-only "${flags[@]}" "$tmp/probe.cc" 2>&1
}
for c in "emb_kernels emb_data_type|service/store/embedding_store.h" \
         "emb_batch emb_store emb_tables emb_metrics emb_common emb_ids emb_kernels emb_data_type|service/rpc/embedding_service.h" \
         "emb_client emb_data_type|kernels/cpu_gather.h" \
         "emb_store emb_tables emb_common emb_ids emb_kernels emb_data_type|kernels/gather_plan.h" \
         "emb_store emb_tables emb_common emb_ids emb_kernels emb_data_type|kernels/bags/bag_tuning.cuh"; do
  IFS='|' read -r libs include <<<"$c"
  echo "#include \"$include\"" >"$tmp/probe.cc"
  # shellcheck disable=SC2086
  if out=$(compile_with $libs); then
    echo "FAIL: $include compiled with the include directories of $libs" >&2
    exit 1
  fi
  grep -q "No such file" <<<"$out" || { echo "FAIL: unexpected compiler output: $out" >&2; exit 1; }
  echo "ok: the build does not find $include from ${libs%% *}"
done
# ... while the right way round compiles.
echo '#include "service/store/embedding_store.h"' >"$tmp/probe.cc"
compile_with emb_batch emb_store emb_tables emb_metrics emb_common emb_ids emb_kernels emb_data_type \
  >/dev/null || { echo "FAIL: batch/ cannot include store/" >&2; exit 1; }
echo "ok: batch/ includes store/"
