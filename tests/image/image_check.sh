#!/usr/bin/env bash
# The container image (deploy/docker/Dockerfile), cpu flavour, built and run with Debian's podman
# (daemonless, runc) on a Debian 12 base made here with debootstrap, since no registry is
# reachable: the Dockerfile lints clean (dockerfile-utils), the image builds with
# --pull=never --network=host, and the containerised server, on the host's network, answers the
# host's embedding-client (health), a lookup whose rows equal the demo table's (Python client,
# numpy) and /metrics; it runs as uid 65532 and exits 0 on SIGTERM. Then the image's exported
# root filesystem passes deploy/docker/run-gpu-rootfs --device=cpu (the script that runs the gpu
# image on a GPU host without podman: all of it but the GPU and its driver). Prints the image's
# size and the time each step took.
#   image_check.sh SOURCE_DIR BUILD_DIR CLIENT
# The base tarball and podman's storage (with its layer cache) are kept in BUILD_DIR/image-cache,
# so a second run rebuilds only what changed; EMB_IMAGE_CACHE=0 uses a fresh one, deleted after.
source "$(dirname "$0")/../tools/lib.sh"
SRC=$(cd "$1" && pwd) BUILD=$(cd "$2" && pwd) CLIENT=$3
for tool in podman runc debootstrap curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps installs it)"
done
if [[ ${EMB_IMAGE_CACHE:-1} == 0 ]]; then CACHE=$WORK/cache; else CACHE=$BUILD/image-cache; fi
mkdir -p "$CACHE"
BASE=docker.io/library/debian:12-slim  # the name deploy/docker/Dockerfile starts from
IMAGE=localhost/embedding-server:cpu-check
NAME=emb-image-check-$$
# The default runtime (crun) and ulimits fail on our machines (shared/TOOLING.md).
cat >"$WORK/containers.conf" <<'CONF'
[engine]
runtime = "runc"
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
CONF
export CONTAINERS_CONF=$WORK/containers.conf
# Podman records its run and tmp folders in its database and refuses another one later: both
# live in the cache, beside the storage they belong to.
P=(podman --root "$CACHE/storage" --runroot "$CACHE/run" --tmpdir "$CACHE/tmp")
# Remove the container, then lib.sh's cleanup with the script's status (set +e: `(exit 1)` must
# not end the trap before it).
trap 'status=$?; set +e; "${P[@]}" rm -f -t 0 "$NAME" "$NAME-rootfs" >/dev/null 2>&1; (exit $status); cleanup' EXIT
t0=$SECONDS
step() { echo "image: $1 ($((SECONDS - t0)) s)"; }

# 1. Lint.
LINT=$SRC/.tools/node_modules/.bin/dockerfile-utils
[[ -x $LINT ]] || fail "dockerfile-utils is not installed (scripts/install-deps installs it into .tools/)"
"$LINT" lint "$SRC/deploy/docker/Dockerfile" >"$WORK/lint" 2>&1 || { cat "$WORK/lint"; fail "dockerfile-utils lint"; }
[[ ! -s $WORK/lint ]] || { cat "$WORK/lint"; fail "dockerfile-utils lint reported the above"; }
step "Dockerfile lints clean"

# 2. The base: debootstrap --variant=minbase from the mirror apt uses, trimmed as debian:12-slim
# is (deploy/docker/debian-base), imported under the name the Dockerfile uses.
if ! "${P[@]}" image exists "$BASE"; then
  tarball=$CACHE/debian-12-minbase.tar
  if [[ ! -f $tarball ]]; then
    "$SRC/deploy/docker/debian-base" "$tarball" || fail "deploy/docker/debian-base"
    step "debootstrap'ed the base"
  fi
  "${P[@]}" import "$tarball" "$BASE" >"$WORK/import.log" 2>&1 || { cat "$WORK/import.log"; fail "podman import"; }
  step "imported the base as $BASE"
fi

# 3. The cpu image, as deploy/docker/README.md says to build it.
# Its log, each line with the seconds since the build started, stays in BUILD_DIR/image_check.log.
build_start=$SECONDS
LOG=$BUILD/image_check.log
"${P[@]}" build --pull=never --network=host --build-arg FLAVOR=cpu -t "$IMAGE" \
  -f "$SRC/deploy/docker/Dockerfile" "$SRC" 2>&1 |
  while IFS= read -r line; do printf '%4d %s\n' $((SECONDS - build_start)) "$line"; done >"$LOG" ||
  { tail -40 "$LOG"; fail "podman build (log: $LOG)"; }
step "built $IMAGE in $((SECONDS - build_start)) s"
packages=$("${P[@]}" run --rm --entrypoint cat "$IMAGE" /usr/local/share/embedding-server/runtime-packages) ||
  fail "the image holds no list of its runtime packages"
echo "image: runtime packages (from ldd of the installed binaries):" $packages
[[ $packages == *libgrpc++* ]] || fail "libgrpc++ is not among the runtime packages"
size=$("${P[@]}" image inspect --format '{{.Size}}' "$IMAGE")
echo "image: $IMAGE is $((size / 1000000)) MB ($size bytes)"
[[ $("${P[@]}" image inspect --format '{{.Config.User}}' "$IMAGE") == 65532:65532 ]] ||
  fail "the image's user is not 65532:65532"
"${P[@]}" image inspect --format '{{json .Config.ExposedPorts}}' "$IMAGE" | grep -q '50051/tcp' ||
  fail "the image does not expose 50051"

# 4. Run it on the host's network, any free ports (the server logs them), and call it.
"${P[@]}" run -d --name "$NAME" --network=host "$IMAGE" --grpc_address=127.0.0.1:0 \
  --metrics_address=127.0.0.1:0 --device=cpu --demo_table=2000x32 --demo_seed=3 \
  --drain_seconds=0 >/dev/null || fail "podman run"
for _ in $(seq 600); do
  "${P[@]}" logs "$NAME" >"$WORK/server.log" 2>&1 || true
  grep -q "health SERVING" "$WORK/server.log" && break
  [[ $("${P[@]}" inspect --format '{{.State.Running}}' "$NAME") == true ]] ||
    { cat "$WORK/server.log"; fail "the container exited"; }
  sleep 0.1
done
grep -q "health SERVING" "$WORK/server.log" || { cat "$WORK/server.log"; fail "not serving"; }
GRPC_PORT=$(sed -n 's/.*gRPC listening on [^ ]*:\([0-9]*\).*/\1/p' "$WORK/server.log")
METRICS_PORT=$(sed -n 's#.*metrics on http://[^ ]*:\([0-9]*\)/metrics.*#\1#p' "$WORK/server.log")
target=127.0.0.1:$GRPC_PORT
step "the container serves on $target, metrics on $METRICS_PORT"
pid=$("${P[@]}" inspect --format '{{.State.Pid}}' "$NAME")
[[ $(ps -o uid= -p "$pid" | tr -d ' ') == 65532 ]] || fail "the server does not run as uid 65532"

health=$("$CLIENT" --target="$target" health embedding.v1.EmbeddingService) || fail "health check"
[[ $health == *SERVING* && $health != *NOT_SERVING* ]] || fail "health: $health"
# The image's own client too, from a second container on the same network.
"${P[@]}" run --rm --network=host --entrypoint embedding-client "$IMAGE" --target="$target" \
  tables >"$WORK/tables" 2>&1 || { cat "$WORK/tables"; fail "the image's embedding-client"; }
grep -q demo "$WORK/tables" || { cat "$WORK/tables"; fail "the image's client lists no demo table"; }

"$SRC/scripts/gen-python-stubs" "$WORK/py" >/dev/null
PYTHONPATH="$WORK/py:$SRC/client/python:$SRC/tests/tools" /usr/bin/python3 - "$target" <<'PY' ||
import sys
import numpy as np
from demo_table import demo_table
from embedding_client import EmbeddingClient
ids = np.array([[0, 1999, 7], [1000, 7, 3]])
with EmbeddingClient(sys.argv[1]) as c:
    rows = c.look_up(ids)
assert rows.shape == (2, 3, 32), rows.shape
assert np.array_equal(rows, demo_table(2000, 32, 3)[ids]), "rows differ from the demo table"
print("image: LookUp rows equal the demo table's")
PY
  fail "the containerised server's rows are not the demo table's"

# The ids are counted as their batch is answered: poll until /metrics shows them.
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" >"$WORK/metrics" || fail "GET /metrics"
  grep -q '^embedding_ids_total{table="demo"} 6$' "$WORK/metrics" && break
  sleep 0.1
done
grep -q '^embedding_ids_total{table="demo"} 6$' "$WORK/metrics" ||
  { grep embedding_ids_total "$WORK/metrics"; fail "/metrics does not count the 6 ids"; }
grep -q '^embedding_table_rows{table="demo"} 2000$' "$WORK/metrics" ||
  { grep embedding_table_rows "$WORK/metrics"; fail "/metrics lacks the demo table's rows"; }
step "health SERVING, rows checked, /metrics served"

"${P[@]}" stop -t 30 "$NAME" >/dev/null || fail "podman stop"
code=$("${P[@]}" inspect --format '{{.State.ExitCode}}' "$NAME")
[[ $code == 0 ]] || { "${P[@]}" logs "$NAME" | tail -20; fail "exit status $code after SIGTERM"; }
step "SIGTERM: the server exited 0"

# 5. deploy/docker/run-gpu-rootfs on this image's root filesystem, without a GPU: unpacks it,
# mounts /dev, /sys and /proc, runs the entrypoint in a chroot as the image's user, checks a
# LookUp made by the image's client, SIGTERM. Its folder is its own under /tmp (not WORK, which
# lib.sh removes with a plain rm -rf), and it removes it only once nothing is mounted there.
"${P[@]}" create --name "$NAME-rootfs" "$IMAGE" >/dev/null || fail "podman create"
"${P[@]}" export -o "$WORK/rootfs.tar" "$NAME-rootfs" || fail "podman export"
"${P[@]}" rm "$NAME-rootfs" >/dev/null || fail "podman rm"
"$SRC/deploy/docker/run-gpu-rootfs" --device=cpu --demo_table=2000x32 "$WORK/rootfs.tar" \
  >"$WORK/run-gpu-rootfs.log" 2>&1 ||
  { cat "$WORK/run-gpu-rootfs.log"; fail "deploy/docker/run-gpu-rootfs --device=cpu"; }
grep "LookUp" "$WORK/run-gpu-rootfs.log"
step "deploy/docker/run-gpu-rootfs --device=cpu passed on its root filesystem; image check passed"
