#!/usr/bin/env bash
# deploy/k8s renders with `kubectl kustomize` (the overlays and the prometheus-adapter rules), and
# what it renders is valid offline: Kubernetes schemas with unknown fields (kubernetes-models and
# @kubernetes/client-node), the PodMonitor and PrometheusRule CRD schemas (plus tsc for their
# unknown fields), yamllint (duplicate keys); the PrometheusRule is deploy/prometheus's rules, and
# the overlays keep their promises (k8s_facts.py; the hardened overlay's proxy sidecar mounts
# deploy/proxy/nghttpx.conf and agrees with it).
#   k8s_render_check.sh
source "$(dirname "$0")/../tools/lib.sh"
source "$(dirname "$0")/lib.sh"
need_kustomize
command -v yamllint >/dev/null || fail "yamllint is not installed (scripts/install-deps)"
command -v node >/dev/null || fail "node is not installed (scripts/install-deps)"
need_npm kubernetes-models @kubernetes/client-node @kubernetes-models/prometheus-operator yaml typescript

yamllint -c "$ROOT/tests/deploy/yamllint.yaml" "$ROOT"/deploy/{k8s,prometheus,grafana,proxy} ||
  fail "yamllint found problems in deploy/ (above)"
echo "yamllint: deploy/k8s, deploy/prometheus, deploy/grafana and deploy/proxy clean"

gpu=$(render overlays/gpu) gpu_full_pool=$(render overlays/gpu-full-pool) cpu=$(render overlays/cpu)
hardened=$(render overlays/hardened) adapter=$(render prometheus-adapter)
overlays=$(cd "$ROOT/deploy/k8s/overlays" && echo *)
[[ $overlays == "cpu gpu gpu-full-pool hardened" ]] ||
  fail "deploy/k8s/overlays holds $overlays: check each new overlay here and in k8s_facts.py"
echo "kubectl kustomize: overlays ${overlays// /, } and prometheus-adapter render"

dir=$(node_dir)
cp "$ROOT/tests/deploy/k8s_validate.mjs" "$dir/"
(cd "$dir" && node k8s_validate.mjs crds.ts "$gpu" "$gpu_full_pool" "$cpu" "$hardened" "$adapter") ||
  fail "the rendered manifests are not valid (above)"
typecheck "$dir" crds.ts || fail "a PodMonitor or PrometheusRule has a field its CRD lacks (above)"
echo "tsc: the PodMonitor and PrometheusRule have only their CRDs' fields"

"$ROOT/deploy/k8s/generate-prometheus-rule" "$WORK/prometheus-rule.yaml"
diff -u "$ROOT/deploy/k8s/base/prometheus-rule.yaml" "$WORK/prometheus-rule.yaml" ||
  fail "deploy/k8s/base/prometheus-rule.yaml is stale: run deploy/k8s/generate-prometheus-rule"
"$PY" "$ROOT/tests/deploy/k8s_facts.py" "$gpu" "$gpu_full_pool" "$cpu" "$hardened" "$adapter" \
  "$ROOT/deploy/prometheus/rules/embedding-server.rules.yml" "$ROOT/deploy/proxy/nghttpx.conf" \
  "$ROOT/docs/operations.md" || fail "see above"
