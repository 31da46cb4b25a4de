#!/usr/bin/env bash
# The real binary agrees with deploy/k8s: every flag the overlays pass is one that
# `embedding-server --helpfull` lists; the cpu overlay's container command line (flag files from
# its ConfigMap, --table from its environment) starts the server and serves the configured table;
# and every gRPC probe's service is one the server's health service answers SERVING for.
#   k8s_server_check.sh SERVER CLIENT
source "$(dirname "$0")/../tools/lib.sh"
source "$(dirname "$0")/lib.sh"
SERVER=$1 CLIENT=$2
need_kustomize
gpu=$(render overlays/gpu) cpu=$(render overlays/cpu) hardened=$(render overlays/hardened)

"$SERVER" --helpfull >"$WORK/help" 2>&1 || true  # Abseil exits 1 after printing help
sed -n 's/^ *--\([a-z_0-9]*\) (.*/\1/p' "$WORK/help" | sort -u >"$WORK/known"
[[ $(wc -l <"$WORK/known") -ge 20 ]] || fail "could not read the flags from --helpfull"
"$PY" "$ROOT/tests/deploy/k8s_container.py" flags "$gpu" "$cpu" "$hardened" | sort -u >"$WORK/used"
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

mapfile -t services < <("$PY" - "$gpu" "$cpu" "$hardened" <<'PY'
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
# 3 per overlay, and the hardened overlay's proxy sidecar's readiness (through it to the server).
[[ ${#services[@]} -eq 10 ]] || fail "expected 10 gRPC probes in the overlays, found ${#services[@]}"
while IFS= read -r service; do  # "" is a name too: the whole server
  status=$("$CLIENT" --target=127.0.0.1:$GRPC_PORT health "$service" 2>&1) ||
    fail "health Check of probe service '$service': $status"
  echo "health Check '$service': $status"
done < <(printf '%s\n' "${services[@]}" | sort -u)
# The check can tell: a name the health service does not know is an error.
"$CLIENT" --target=127.0.0.1:$GRPC_PORT health no.such.Service >/dev/null 2>&1 &&
  fail "health Check of an unknown service succeeded"
echo "probes: every gRPC probe's service is SERVING on the real server"
