#!/usr/bin/env bash
# `cmake --install` into a fresh prefix gives a working package: a project of its own
# (tests/install/consumer/) finds it with find_package(embedding), links emb::client alone, and
# against the installed embedding-server gets the demo table's rows, checked value by value
# against tests/tools/demo_table.py; the installed embedding-client answers health.
#   install_check.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../tools/lib.sh"
BUILD=$1 SRC=$2
PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" || { cat "$WORK/install.log"; fail "cmake --install"; }
for f in bin/embedding-server bin/embedding-client lib/cmake/embedding/embeddingConfig.cmake \
         lib/cmake/embedding/embeddingTargets.cmake include/emb/client/embedding_client.h \
         include/emb/kernels/data_type.h include/emb/proto/convert/data_type_proto.h \
         include/emb/embedding/v1/embedding_service.pb.h \
         include/emb/embedding/v1/embedding_service.grpc.pb.h \
         include/emb/grpc/health/v1/health.grpc.pb.h include/emb/embedding/v1/embedding_service.proto; do
  [[ -e $PREFIX/$f ]] || fail "not installed: $f"
done
[[ ! -e $PREFIX/bin/embedding-reference-server ]] || fail "the benchmark component was installed by default"
# Nothing installed points back into the build or source tree.
if grep -rlF -e "$(cd "$BUILD" && pwd)" -e "$(cd "$SRC" && pwd)" "$PREFIX/lib/cmake"; then
  fail "the package config names the build or source tree (above)"
fi

cmake -S "$SRC/tests/install/consumer" -B "$WORK/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" >"$WORK/consumer.log" 2>&1 &&
  cmake --build "$WORK/consumer" >>"$WORK/consumer.log" 2>&1 ||
  { cat "$WORK/consumer.log"; fail "the consumer project does not build against the prefix"; }

start_server "$PREFIX/bin/embedding-server" --demo_table=1000x24 --demo_seed=7
target=127.0.0.1:$GRPC_PORT
[[ $("$PREFIX/bin/embedding-client" --target="$target" health) == *SERVING* ]] ||
  fail "the installed embedding-client does not see the server SERVING"
ids=(0 999 5 17 5 640)
"$WORK/consumer/consumer" "$target" "$WORK/rows.f32" "${ids[@]}" || fail "the consumer failed"
/usr/bin/python3 - "$SRC/tests/tools" "$WORK/rows.f32" "${ids[@]}" <<'PY' ||
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from demo_table import demo_table
ids = [int(i) for i in sys.argv[3:]]
rows = np.fromfile(sys.argv[2], dtype="<f4").reshape(len(ids), 24)
assert np.array_equal(rows, demo_table(1000, 24, 7)[ids]), "rows differ from the demo table"
print(f"install: the consumer's {len(ids)} rows equal the demo table's")
PY
  fail "the consumer's rows are not the demo table's"
echo "install: find_package(embedding) + emb::client built and called the installed server"
