#!/usr/bin/env bash
# The Python client as a package (client/python), installed as README.md says, without network.
# Its build backend (client/python/build_backend.py) needs no setuptools and no `wheel`, so the
# same `pip install` works in any venv of Python 3.9+ (issue 40, item 3: `--no-use-pep517` failed
# where the venv had no setuptools or wheel, e.g. a python3 on PATH that is not Debian's). Three
# fresh venvs: Debian's interpreter with --system-site-packages (grpcio, protobuf and numpy from
# Debian); Debian's interpreter, a plain venv with setuptools removed (as Python 3.12 makes them)
# and no wheel, which sees Debian's grpcio, protobuf and numpy alone through a .pth file (a venv
# into which a user installed them); and the first python3 on PATH where it is another install of
# the same minor version (whose venvs see Debian's compiled grpcio the same way; skipped, saying
# so, where there is none). In each, the build generates the stubs, and the installed package,
# imported from the venv and not from the source tree, gets the demo table's rows from the real
# server.
#   python_package_check.sh SERVER
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-grpcio and python3-numpy
"$PY" -m venv --help >/dev/null 2>&1 || fail "python3-venv is not installed"
# The README's commands, as written there (checked, then run with Debian's python3).
make_venv='/usr/bin/python3 -m venv --system-site-packages venv'
install='venv/bin/pip install client/python'
for line in "$make_venv" "$install"; do
  grep -qxF "$line" "$ROOT/README.md" || fail "README.md no longer says: $line"
  grep -qxF "$line" "$ROOT/client/python/README.md" ||
    fail "client/python/README.md no longer says: $line"
done
# A fresh pip must not reach for an index (there is none here): fail fast if it tries.
export PIP_RETRIES=0 PIP_DEFAULT_TIMEOUT=5

# deps_pth VENV: a .pth in VENV's site-packages that shows it Debian's grpc, google.protobuf and
# numpy (with their metadata, so pip counts them installed), and nothing else of Debian's.
deps_pth() {
  local site dist=/usr/lib/python3/dist-packages p
  site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$WORK/debian-deps"
  for p in "$dist"/grpc "$dist"/grpcio-*-info "$dist"/google "$dist"/protobuf-*-info \
    "$dist"/numpy "$dist"/numpy-*-info; do
    [[ -e $p ]] || fail "$p is missing (python3-grpcio, python3-protobuf, python3-numpy)"
    ln -sfn "$p" "$WORK/debian-deps/"
  done
  echo "$WORK/debian-deps" >"$site/debian-deps.pth"
}

# OTHER: the first python3 on PATH, if it is not Debian's and has Debian's minor version.
OTHER=$(command -v python3 || true)
minor() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
prefix() { "$1" -c 'import sys; print(sys.prefix)'; }
if [[ -z $OTHER || $(prefix "$OTHER") == "$(prefix "$PY")" ||
      $(minor "$OTHER") != "$(minor "$PY")" ]]; then
  echo "python package: no other python3 $(minor "$PY") on PATH; that venv is skipped"
  OTHER=""
fi
kinds=(system-site-packages bare)
[[ -z $OTHER ]] || kinds+=(other-python)

start_server "$1" --demo_table=3000x20 --demo_seed=11 --drain_seconds=0
for kind in "${kinds[@]}"; do
  # A copy with the same layout (client/python next to proto/): pip builds in the tree it is
  # given, and the source tree stays as it is.
  src=$WORK/$kind/src
  mkdir -p "$src/client"
  cp -r "$ROOT/client/python" "$src/client/"
  cp -r "$ROOT/proto" "$src/"
  rm -rf "$src/client/python/build" "$src"/client/python/*.egg-info
  [[ ! -e $src/client/python/embedding ]] || fail "generated stubs are in the source tree"
  cd "$src"
  if [[ $kind == system-site-packages ]]; then
    $make_venv || fail "$make_venv failed"
  else
    [[ $kind == bare ]] && python=$PY || python=$OTHER
    "$python" -m venv venv || fail "$python -m venv venv failed"
    deps_pth venv
    if [[ $kind == bare ]]; then
      venv/bin/pip uninstall -q -y setuptools >/dev/null 2>&1 || true
      ! venv/bin/python -c 'import setuptools' 2>/dev/null || fail "setuptools is in the $kind venv"
    fi
    ! venv/bin/python -c 'import wheel' 2>/dev/null || fail "wheel is in the $kind venv"
  fi
  venv/bin/python -c 'import grpc, google.protobuf, numpy' || fail "$kind venv misses a dependency"
  $install >"$WORK/$kind/pip.log" 2>&1 ||
    { cat "$WORK/$kind/pip.log"; fail "$install failed in the $kind venv"; }
  cd "$WORK"  # nothing here shadows the installed modules
  "$src/venv/bin/python" - "$GRPC_PORT" "$src/venv" "$ROOT/tests/tools" <<'PY' || fail "$kind venv"
import os
import sys
port, venv, tools = sys.argv[1:]
import embedding_client
from embedding.v1 import embedding_service_pb2, embedding_service_pb2_grpc
for module in (embedding_client, embedding_service_pb2, embedding_service_pb2_grpc):
    assert os.path.realpath(module.__file__).startswith(os.path.realpath(venv)), module.__file__
sys.path.append(tools)
import grpc
import numpy as np
from demo_table import demo_table  # the server's demo values, computed independently

table = demo_table(3000, 20, 11)
ids = np.array([[0, 2999, 17], [5, 5, 1234]])
with embedding_client.EmbeddingClient("127.0.0.1:" + port) as c:
    [info] = c.list_tables()
    assert (info["name"], info["rows"], info["dim"]) == ("demo", 3000, 20), info
    rows = c.look_up(ids)
    assert rows.shape == (2, 3, 20) and np.array_equal(rows, table[ids]), "float32 rows differ"
    half = c.look_up(ids, dtype="float16")
    assert np.array_equal(half, table[ids].astype(np.float16)), "float16 rows differ"
    try:
        c.look_up([3000])
        raise SystemExit("id 3000 accepted")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.OUT_OF_RANGE, e
PY
  echo "python package ($kind venv): installed as README.md says, stubs built, rows match"
done
