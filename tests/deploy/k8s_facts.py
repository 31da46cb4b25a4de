"""Checks what the rendered manifests promise beyond their schemas (tests/deploy/k8s_render_check.sh).

  k8s_facts.py GPU.yaml CPU.yaml ADAPTER.yaml RULES.yml

Each overlay: the device flag and GPU resource, the probes, the grace period against the flags,
the security context, the Services, the HPA metric against the prometheus-adapter rule, the
PodMonitor's port, and the PrometheusRule equal to deploy/prometheus's rules.
"""
import re
import sys

import yaml

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def one(objs, kind, name=None):
    found = [o for o in objs if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def flags_of(objs):
    """--name=value pairs in the ConfigMap's flag files, in order, and its other keys."""
    data = one(objs, "ConfigMap")["data"]
    flags = {}
    for key, text in data.items():
        if key.endswith(".flags"):
            for line in text.splitlines():
                m = re.match(r"^--([a-z_]+)=(.*)$", line)
                if m:
                    flags[m[1]] = m[2]
    return flags, data


def check_overlay(name, objs, rules, adapter_metric):
    deploy = one(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    [c] = pod["containers"]
    flags, _ = flags_of(objs)
    res = c["resources"]
    gpus = res.get("limits", {}).get("nvidia.com/gpu")
    if name == "gpu":
        check(gpus == 1 and res["requests"].get("nvidia.com/gpu") == 1, "gpu: nvidia.com/gpu: 1")
        check(flags.get("device") == "cuda", f"gpu: --device={flags.get('device')}, want cuda")
    else:
        check(gpus is None, "cpu: asks for a GPU")
        check(flags.get("device") == "cpu", f"cpu: --device={flags.get('device')}, want cpu")
    check("cpu" in res["requests"] and "memory" in res["requests"] and "memory" in res["limits"],
          f"{name}: cpu/memory requests and a memory limit")

    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check(ports.get("grpc") == 50051 and "metrics" in ports, f"{name}: ports grpc 50051, metrics")
    check(flags.get("grpc_address", "").endswith(":50051"), f"{name}: --grpc_address on 50051")
    check(flags.get("metrics_address", "").endswith(f":{ports.get('metrics')}"),
          f"{name}: --metrics_address on the metrics port")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check(c[probe]["grpc"]["port"] == 50051, f"{name}: {probe} on the gRPC port")
    check(c["readinessProbe"]["grpc"]["service"] == "embedding.v1.EmbeddingService",
          f"{name}: readiness on embedding.v1.EmbeddingService")
    check(c["livenessProbe"]["grpc"]["service"] == "", f'{name}: liveness on ""')
    startup = c["startupProbe"]
    check(startup["periodSeconds"] * startup["failureThreshold"] >= 600,
          f"{name}: the startup probe allows at least 10 minutes to load a table")

    # SIGTERM: --drain_seconds, then at most --shutdown_timeout_seconds, then the table is freed.
    drain = float(flags["drain_seconds"]) + float(flags["shutdown_timeout_seconds"])
    grace = pod["terminationGracePeriodSeconds"]
    check(grace >= drain + 5, f"{name}: grace {grace} s < drain + shutdown timeout {drain} s + 5 s")
    check("lifecycle" not in c, f"{name}: a preStop hook, which the in-process drain makes moot")

    sc, psc = c["securityContext"], pod["securityContext"]
    check(psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) != 0, f"{name}: non-root")
    check(sc.get("readOnlyRootFilesystem") is True, f"{name}: read-only root filesystem")
    check(sc.get("allowPrivilegeEscalation") is False, f"{name}: no privilege escalation")
    check(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{name}: drops all capabilities")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    check("persistentVolumeClaim" in volumes["tables"] and mounts["tables"].get("readOnly"),
          f"{name}: the tables from a read-only PVC")

    services = [o for o in objs if o["kind"] == "Service"]
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    cluster_ip = [s for s in services if s["spec"].get("type") == "ClusterIP"]
    check(len(headless) == 1 and len(cluster_ip) == 1, f"{name}: a ClusterIP and a headless Service")
    for s in services:
        check(all(p.get("appProtocol") == "grpc" for p in s["spec"]["ports"]),
              f"{name}: Service {s['metadata']['name']} ports have appProtocol grpc")
        check(s["spec"]["selector"].items() <= pod_labels(deploy).items(),
              f"{name}: Service {s['metadata']['name']} selects the pods")

    hpa = one(objs, "HorizontalPodAutoscaler")
    check(hpa["spec"]["scaleTargetRef"]["name"] == deploy["metadata"]["name"], f"{name}: HPA target")
    metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    check(metric == adapter_metric, f"{name}: HPA metric {metric}, adapter serves {adapter_metric}")
    pdb = one(objs, "PodDisruptionBudget")
    check(pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels(deploy).items(),
          f"{name}: the PodDisruptionBudget selects the pods")

    monitor = one(objs, "PodMonitor")
    check(all(e["port"] in ports for e in monitor["spec"]["podMetricsEndpoints"]),
          f"{name}: PodMonitor port")
    rule = one(objs, "PrometheusRule")
    check(rule["spec"] == rules, f"{name}: the PrometheusRule differs from deploy/prometheus's "
          "rules (run deploy/k8s/generate-prometheus-rule)")


def pod_labels(deploy):
    return deploy["spec"]["template"]["metadata"]["labels"]


def main():
    gpu, cpu, adapter, rules_path = sys.argv[1:]
    rules = yaml.safe_load(open(rules_path))
    config = yaml.safe_load(one(load(adapter), "ConfigMap")["data"]["config.yaml"])
    [adapter_metric] = [r["name"]["as"] for r in config["rules"]]
    check_overlay("gpu", load(gpu), rules, adapter_metric)
    check_overlay("cpu", load(cpu), rules, adapter_metric)
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    if failures:
        sys.exit(1)
    print("rendered overlays: device, probes, grace period, security, Services, HPA, "
          "PodMonitor and PrometheusRule as promised")


main()
