#!/usr/bin/env bash
# The real binary agrees with deploy/k8s: every flag the overlays pass is one that
# `embedding-server --helpfull` lists; the cpu overlay's container command line (flag files from
# its ConfigMap, --table from its environment) starts the server and serves the configured table;
# a shard's of the sharded overlay (--shard from its environment too) serves that shard's rows
# only; and every gRPC probe's service is one the server's health service answers SERVING for.
#   k8s_server_check.sh SERVER CLIENT
source "$(dirname "$0")/../tools/lib.sh"
source "$(dirname "$0")/lib.sh"
SERVER=$1 CLIENT=$2
need_kustomize
gpu=$(render overlays/gpu) cpu=$(render overlays/cpu) hardened=$(render overlays/hardened)
sharded=$(render overlays/sharded) shard1=$(render overlays/sharded/shard-1)  # one Deployment
shards=$(grep -c '^kind: Deployment$' "$sharded")

"$SERVER" --helpfull >"$WORK/help" 2>&1 || true  # Abseil exits 1 after printing help
sed -n 's/^ *--\([a-z_0-9]*\) (.*/\1/p' "$WORK/help" | sort -u >"$WORK/known"
[[ $(wc -l <"$WORK/known") -ge 20 ]] || fail "could not read the flags from --helpfull"
"$PY" "$ROOT/tests/deploy/k8s_container.py" flags "$gpu" "$cpu" "$hardened" "$shard1" |
  sort -u >"$WORK/used"
unknown=$(comm -23 "$WORK/used" "$WORK/known")
[[ -z $unknown ]] || fail "flags in deploy/k8s that embedding-server does not define: $unknown"
echo "flags: the $(wc -l <"$WORK/used") that deploy/k8s passes are all in embedding-server --helpfull"

# The cpu overlay's command line, its volumes under $WORK/pod, on loopback ports and with no drain
# at the end (given last, these win over the flag file's).
mapfile -t args < <("$PY" "$ROOT/tests/deploy/k8s_container.py" args "$cpu" "$WORK/pod")
table=$(printf '%s\n' "${args[@]}" | sed -n 's/^--table=\([^=]*\)=\(.*\)/\1 \2/p')
read -r table_name table_path <<<"$table"
[[ -n $table_path ]] || fail "the cpu overlay passes no --table"
"$PY" -c 'import numpy, sys; numpy.save(sys.argv[1], numpy.ones((1000, 16), numpy.float32))' "$table_path"
start_server "$SERVER" "${args[@]}" --grpc_address=127.0.0.1:0 --metrics_address=127.0.0.1:0 \
  --drain_seconds=0
grep -q "table '$table_name' loaded: 1000 rows x 16 dims" "$SERVER_LOG" ||
  { cat "$SERVER_LOG"; fail "the server did not load table '$table_name' from $table_path"; }
echo "cpu overlay's command line: the server serves table '$table_name'"

mapfile -t services < <("$PY" - "$gpu" "$cpu" "$hardened" "$sharded" <<'PY'
import sys, yaml
for path in sys.argv[1:]:
    for o in yaml.safe_load_all(open(path)):
        if o and o["kind"] == "Deployment":
            pod = o["spec"]["template"]["spec"]
            for c in pod["containers"] + pod.get("initContainers", []):
                for p in ("startupProbe", "readinessProbe", "livenessProbe"):
                    if "grpc" in c.get(p, {}):
                        print(c[p]["grpc"].get("service", ""))
PY
)
# 3 per Deployment (one each in gpu, cpu and hardened, one a shard in sharded), and the hardened
# overlay's proxy sidecar's readiness (through it to the server).
probes=$((3 * (3 + shards) + 1))
[[ ${#services[@]} -eq $probes ]] ||
  fail "expected $probes gRPC probes in the overlays, found ${#services[@]}"
while IFS= read -r service; do  # "" is a name too: the whole server
  status=$("$CLIENT" --target=127.0.0.1:$GRPC_PORT health "$service" 2>&1) ||
    fail "health Check of probe service '$service': $status"
  echo "health Check '$service': $status"
done < <(printf '%s\n' "${services[@]}" | sort -u)
# The check can tell: a name the health service does not know is an error.
"$CLIENT" --target=127.0.0.1:$GRPC_PORT health no.such.Service >/dev/null 2>&1 &&
  fail "health Check of an unknown service succeeded"
echo "probes: every gRPC probe's service is SERVING on the real server"

# Shard 1 of the sharded overlay (on the gpu overlay: --device=cpu given last), its table 1000
# rows: it serves rows [334, 668) of 3 shards (ceil(1000 / 3) = 334 a shard); ids stay global.
mapfile -t args < <("$PY" "$ROOT/tests/deploy/k8s_container.py" args "$shard1" "$WORK/shard-pod")
printf '%s\n' "${args[@]}" | grep -qx -- "--shard=1/$shards" ||
  fail "shard-1's command line has no --shard=1/$shards: ${args[*]}"
shard_table=$(printf '%s\n' "${args[@]}" | sed -n 's/^--table=[^=]*=\(.*\)/\1/p')
cp "$table_path" "$shard_table"  # the cpu overlay's, 1000 rows
start_server "$SERVER" "${args[@]}" --device=cpu --grpc_address=127.0.0.1:0 \
  --metrics_address=127.0.0.1:0 --drain_seconds=0
first=$(((1000 + shards - 1) / shards))
end=$((2 * first < 1000 ? 2 * first : 1000))
for id in "$first" $((end - 1)); do
  "$CLIENT" --target=127.0.0.1:$GRPC_PORT lookup "$id" >/dev/null 2>"$WORK/lookup.err" ||
    fail "shard 1 refused id $id of its rows [$first, $end): $(cat "$WORK/lookup.err")"
done
for id in $((first - 1)) "$end"; do
  "$CLIENT" --target=127.0.0.1:$GRPC_PORT lookup "$id" >/dev/null 2>"$WORK/lookup.err" &&
    fail "shard 1 answered id $id, outside its rows [$first, $end)"
  grep -q OUT_OF_RANGE "$WORK/lookup.err" ||
    fail "shard 1 did not answer OUT_OF_RANGE for id $id: $(cat "$WORK/lookup.err")"
done
echo "sharded overlay's shard-1 command line: the server serves rows [$first, $end)" \
  "of $shards shards"
