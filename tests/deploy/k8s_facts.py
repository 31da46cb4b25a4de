"""Checks what the rendered manifests promise beyond their schemas (tests/deploy/k8s_render_check.sh).

  k8s_facts.py GPU.yaml GPU_FULL_POOL.yaml CPU.yaml HARDENED.yaml SHARDED.yaml ADAPTER.yaml \
              RULES.yml NGHTTPX.conf OPERATIONS.md

Each overlay: the device flag and GPU resource, the probes, the rollout deadline against the
startup probe's budget, the rollout strategy (a surge pod, or on gpu-full-pool none), the zone and
node spread, every image with a registry and a tag (not `latest`), the grace period against the
flags, the security context, the Services, the HPA metric against the prometheus-adapter rule, the
PodMonitor's port, and the PrometheusRule equal to deploy/prometheus's rules. The adapter's
ConfigMap is the one docs/operations.md tells the Helm chart to read. The hardened
overlay (the cpu one behind the nghttpx sidecar) also: the sidecar, its config equal to
deploy/proxy/nghttpx.conf, and the ports that config, the containers, the probes, the Services
and the NetworkPolicy agree on. The sharded overlay: each shard as an overlay of its own (its
Services one headless with the metrics port), passed --shard=K/N, its Service, PodDisruptionBudget,
PodMonitor and spread selecting its pods only, the shards alike but for their index, one
PrometheusRule for all, and the Service names the addresses docs/operations.md gives.
"""
import json
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
    """--name=value pairs in the server's flag files, in its --flagfile order (a later file's
    value wins, as in the server), and the other keys of their ConfigMap."""
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    [c] = pod["containers"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "flags"]
    [mount] = [m for m in c["volumeMounts"] if m["name"] == "flags"]
    data = one(objs, "ConfigMap", volume["configMap"]["name"])["data"]
    [flagfile] = [a for a in c["args"] if a.startswith("--flagfile=")]
    flags = {}
    for path in flagfile.split("=", 1)[1].split(","):
        assert path.startswith(mount["mountPath"] + "/"), f"{path} is not in the flags volume"
        for line in data[path.rsplit("/", 1)[1]].splitlines():
            m = re.match(r"^--([a-z_]+)=(.*)$", line)
            if m:
                flags[m[1]] = m[2]
    return flags, data


def check_overlay(name, objs, rules, adapter_metric, grpc_port=50051, grpc_port_name="grpc",
                  sharded=False):
    """`grpc_port`: the server's gRPC port (the hardened overlay moves it behind the proxy).
    `sharded`: `objs` are one shard's (and the PrometheusRule), whose one Service is headless."""
    deploy = one(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    [c] = pod["containers"]
    flags, _ = flags_of(objs)
    res = c["resources"]
    gpus = res.get("limits", {}).get("nvidia.com/gpu")
    if name.startswith("gpu") or sharded:  # hardened is the cpu one behind the proxy
        check(gpus == 1 and res["requests"].get("nvidia.com/gpu") == 1, "gpu: nvidia.com/gpu: 1")
        check(flags.get("device") == "cuda", f"gpu: --device={flags.get('device')}, want cuda")
    else:
        check(gpus is None, "cpu: asks for a GPU")
        check(flags.get("device") == "cpu", f"cpu: --device={flags.get('device')}, want cpu")
    check("cpu" in res["requests"] and "memory" in res["requests"] and "memory" in res["limits"],
          f"{name}: cpu/memory requests and a memory limit")

    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check(ports.get(grpc_port_name) == grpc_port and "metrics" in ports,
          f"{name}: ports {grpc_port_name} {grpc_port}, metrics")
    check(flags.get("grpc_address", "").endswith(f":{grpc_port}"),
          f"{name}: --grpc_address on {grpc_port}")
    check(flags.get("metrics_address", "").endswith(f":{ports.get('metrics')}"),
          f"{name}: --metrics_address on the metrics port")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check(c[probe]["grpc"]["port"] == grpc_port, f"{name}: {probe} on the gRPC port")
    check(c["readinessProbe"]["grpc"]["service"] == "embedding.v1.EmbeddingService",
          f"{name}: readiness on embedding.v1.EmbeddingService")
    check(c["livenessProbe"]["grpc"]["service"] == "", f'{name}: liveness on ""')
    startup = c["startupProbe"]
    budget = (startup.get("initialDelaySeconds", 0)
              + startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3))
    check(budget >= 600, f"{name}: the startup probe allows at least 10 minutes to load a table")
    # A rollout is reported failed after progressDeadlineSeconds without a new pod available
    # (default 600): it must outlast the startup probe's budget by 300 s, to schedule the pod,
    # pull the image and pass the first readiness check.
    deadline = deploy["spec"].get("progressDeadlineSeconds", 600)
    check(deadline >= budget + 300, f"{name}: progressDeadlineSeconds {deadline} < the startup "
          f"probe's {budget} s + 300 s to schedule, pull and turn ready")

    # Rollouts: a surge pod first (capacity kept; needs room for one more pod), or, on
    # gpu-full-pool, one pod fewer first (no spare GPU needed).
    rolling = deploy["spec"]["strategy"]["rollingUpdate"]
    want = ({"maxSurge": 0, "maxUnavailable": 1} if name == "gpu-full-pool"
            else {"maxSurge": 1, "maxUnavailable": 0})
    check(deploy["spec"]["strategy"]["type"] == "RollingUpdate" and rolling == want,
          f"{name}: rollingUpdate {rolling}, want {want}")

    # Spread over zones and nodes, each selecting the pods.
    spread = {t["topologyKey"]: t for t in pod.get("topologySpreadConstraints", [])}
    for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname"):
        t = spread.get(key)
        check(t is not None and t["maxSkew"] == 1
              and t["labelSelector"]["matchLabels"].items() <= pod_labels(deploy).items(),
              f"{name}: a topology spread over {key} with maxSkew 1 that selects the pods")

    # Images: from a registry (a first path component with a dot or a port, or localhost, as
    # docker and the kubelet tell a registry from a Docker Hub user), with a tag, not `latest`.
    for container in pod["containers"] + pod.get("initContainers", []):
        image = container["image"]
        m = re.fullmatch(r"(?P<registry>[^/]+)/(?P<path>[^:@]+):(?P<tag>[\w][\w.-]{0,127})", image)
        check(m is not None and ("." in m["registry"] or ":" in m["registry"]
                                 or m["registry"] == "localhost"),
              f"{name}: container {container['name']}'s image {image} names no registry and tag")
        check(m is None or m["tag"] != "latest",
              f"{name}: container {container['name']}'s image {image}: `latest` does not roll pods")

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
    cluster_ip = [s for s in services if s["spec"].get("clusterIP") != "None"]
    if sharded:
        check(len(headless) == 1 and not cluster_ip, f"{name}: one Service, headless")
    else:
        check(len(headless) == 1 and len(cluster_ip) == 1,
              f"{name}: a ClusterIP and a headless Service")
    for s in services:
        # A shard's Service also names the metrics port, for what scrapes through Services.
        want = {"grpc": (50051, "grpc")} | ({"metrics": (9464, "http")} if sharded else {})
        got = {p["name"]: (p["port"], p.get("appProtocol")) for p in s["spec"]["ports"]}
        check(got == want, f"{name}: Service {s['metadata']['name']} ports {got}, want {want}")
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


def nghttpx_conf(text):
    """nghttpx's config as {key: [values]} (keys such as frontend and backend may repeat)."""
    conf = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            conf.setdefault(key.strip(), []).append(value.strip())
    return conf


def check_front(objs, conf_text):
    """The hardened overlay's nghttpx sidecar, the config it mounts, and the ports around it."""
    name = "hardened"
    deploy = one(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    [server] = pod["containers"]
    [proxy] = pod.get("initContainers", [])
    check(proxy.get("restartPolicy") == "Always", f"{name}: the proxy is a native sidecar "
          "(an init container with restartPolicy Always, stopped after the server)")
    check(proxy["image"].split(":")[0].rsplit("/", 1)[-1] == "embedding-proxy",
          f"{name}: proxy image embedding-proxy")

    mounts = {m["name"]: m for m in proxy["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    [conf_arg] = [a for a in proxy["args"] if a.startswith("--conf=")]
    conf_path = conf_arg.split("=", 1)[1]
    [(mount, key)] = [(m, conf_path[len(m["mountPath"]) + 1:]) for m in mounts.values()
                      if conf_path.startswith(m["mountPath"] + "/")]
    check(mount.get("readOnly") is True, f"{name}: the proxy's config is mounted read-only")
    config_map = one(objs, "ConfigMap", volumes[mount["name"]]["configMap"]["name"])
    check(config_map["data"].get(key) == conf_text,
          f"{name}: the proxy's {conf_path} is deploy/proxy/nghttpx.conf")

    conf = nghttpx_conf(conf_text)
    [frontend] = conf["frontend"]
    [backend] = conf["backend"]
    front_port = int(frontend.split(";")[0].split(",")[1])
    back_host, back_port = backend.split(";")[0].split(",")
    check("no-tls" in frontend.split(";"), f"{name}: the proxy's frontend is plaintext h2c")
    check("proto=h2" in backend.split(";"), f"{name}: the proxy speaks HTTP/2 to the server")
    flags, _ = flags_of(objs)
    server_ports = {p["name"]: p["containerPort"] for p in server["ports"]}
    check(back_host == "127.0.0.1" and int(back_port) == server_ports.get("grpc-direct")
          and flags["grpc_address"] == f"0.0.0.0:{back_port}",
          f"{name}: the proxy's backend {backend} is the server's port grpc-direct "
          f"({server_ports.get('grpc-direct')}, --grpc_address={flags['grpc_address']})")
    proxy_ports = {p["name"]: p["containerPort"] for p in proxy["ports"]}
    check(proxy_ports == {"grpc": front_port} and front_port == 50051,
          f"{name}: the proxy's port grpc is its frontend, 50051 ({proxy_ports}, {frontend})")
    check(front_port not in server_ports.values(), f"{name}: the server is not on the proxy's port")
    for s in (o for o in objs if o["kind"] == "Service"):
        check(all(p["targetPort"] == front_port for p in s["spec"]["ports"]),
              f"{name}: Service {s['metadata']['name']} targets the proxy's port {front_port}")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check(server[probe]["grpc"]["port"] == int(back_port),
              f"{name}: the server's {probe} goes straight to it (port {back_port})")
    check("startupProbe" not in proxy, f"{name}: the proxy has no startup probe (it would hold "
          "the server's start)")
    ready = proxy.get("readinessProbe", {}).get("grpc", {})
    check(ready.get("port") == front_port and ready.get("service") == "embedding.v1.EmbeddingService",
          f"{name}: the proxy's readiness checks the server's health through the proxy")
    check(proxy.get("livenessProbe", {}).get("tcpSocket", {}).get("port") == front_port,
          f"{name}: the proxy's liveness on its own port")
    res = proxy["resources"]
    check({"cpu", "memory"} <= res["requests"].keys() and {"cpu", "memory"} <= res["limits"].keys(),
          f"{name}: the proxy has cpu/memory requests and limits")
    sc = proxy["securityContext"]
    check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
          and sc.get("capabilities", {}).get("drop") == ["ALL"],
          f"{name}: the proxy: read-only root filesystem, no privilege escalation, no capabilities")

    policy = one(objs, "NetworkPolicy")
    check(policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels(deploy).items(),
          f"{name}: the NetworkPolicy selects the pods")
    allowed = {p["port"] for rule in policy["spec"]["ingress"] for p in rule.get("ports", [])}
    check(policy["spec"]["policyTypes"] == ["Ingress"]
          and all(rule.get("ports") and "from" not in rule for rule in policy["spec"]["ingress"])
          and allowed == {front_port, server_ports["metrics"]},
          f"{name}: the NetworkPolicy admits only the proxy's and the metrics ports ({allowed}), "
          f"not the server's {back_port}")


SHARD_LABEL = "embedding.shard"


def check_sharded(objs, rules, adapter_metric, operations):
    """The sharded overlay: shards 0..N-1, each an overlay of its own that serves its rows and
    selects its own pods only, alike but for the index; one PrometheusRule for all of them."""
    name = "sharded"
    deploys = sorted((o for o in objs if o["kind"] == "Deployment"),
                     key=lambda d: d["metadata"]["name"])
    n = len(deploys)
    check(n >= 2, f"{name}: {n} shards")
    check([d["metadata"]["name"] for d in deploys]
          == sorted(f"embedding-server-shard-{k}" for k in range(n)),
          f"{name}: Deployments {[d['metadata']['name'] for d in deploys]}, want "
          f"embedding-server-shard-0 to -{n - 1}")
    rule = one(objs, "PrometheusRule")  # the same rules twice would record each series twice
    check(rule["metadata"]["name"] == "embedding-server", f"{name}: the PrometheusRule's name")
    alike = {}
    for k in range(n):
        shard = [o for o in objs if o["metadata"].get("labels", {}).get(SHARD_LABEL) == str(k)]
        kinds = sorted(o["kind"] for o in shard)
        want = ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget",
                "PodMonitor", "Service"]
        check(kinds == want, f"{name}: shard {k} has {kinds}, want one each of {want}")
        if kinds != want:
            continue
        check_overlay(f"{name} shard {k}", shard + [rule], rules, adapter_metric, sharded=True)
        deploy = one(shard, "Deployment")
        pod = deploy["spec"]["template"]["spec"]
        [c] = pod["containers"]
        check(pod_labels(deploy).get(SHARD_LABEL) == str(k), f"{name}: shard {k}'s pods' label")
        # --shard=K/N reaches the server: an argument from the flags ConfigMap's `shard` key.
        _, data = flags_of(shard)
        env = {e["name"]: e.get("valueFrom", {}).get("configMapKeyRef", {}) for e in c["env"]}
        [arg] = [a for a in c["args"] if a.startswith("--shard=")] or [""]
        var = re.fullmatch(r"--shard=\$\((\w+)\)", arg)
        ref = env.get(var[1]) if var else None
        flags_map = pod["volumes"][[v["name"] for v in pod["volumes"]].index("flags")]
        check(ref is not None and ref["key"] == "shard"
              and ref["name"] == flags_map["configMap"]["name"] and data.get("shard") == f"{k}/{n}",
              f"{name}: shard {k} is passed --shard={data.get('shard')}, want {k}/{n}")
        # Each shard's objects select its own pods only: not another shard's replicas.
        selectors = {"Deployment": deploy["spec"]["selector"]["matchLabels"]}
        for o in shard:
            if o["kind"] in ("Service", "PodDisruptionBudget", "PodMonitor"):
                selector = o["spec"]["selector"]
                selectors[o["kind"]] = selector.get("matchLabels", selector)
        for t in pod.get("topologySpreadConstraints", []):
            selectors["spread over " + t["topologyKey"]] = t["labelSelector"]["matchLabels"]
        for what, selector in selectors.items():
            check(selector.get(SHARD_LABEL) == str(k), f"{name}: shard {k}'s {what} selects "
                  f"{selector}, not only that shard's pods")
        service = one(shard, "Service")["metadata"]["name"]
        check(service == f"embedding-server-shard-{k}",
              f"{name}: shard {k}'s Service {service}, want embedding-server-shard-{k}")
        relabel = one(shard, "PodMonitor")["spec"]["podMetricsEndpoints"][0]["relabelings"]
        check({"action": "replace", "targetLabel": "shard",
               "sourceLabels": ["__meta_kubernetes_pod_label_embedding_shard"]} in relabel,
              f"{name}: shard {k}'s series do not carry a shard label")
        hpa = one(shard, "HorizontalPodAutoscaler")
        check(hpa["spec"].get("minReplicas", 1) >= 2, f"{name}: shard {k}: fewer than 2 replicas")
        # The shards alike but for their index (and the ConfigMap's hash, of its `shard` key).
        text = json.dumps(shard, sort_keys=True)
        text = re.sub(r"-shard-%d(-[a-z0-9]{10})?\b" % k, "-shard-K", text)
        text = text.replace(f'"{SHARD_LABEL}": "{k}"', f'"{SHARD_LABEL}": "K"')
        alike[k] = text.replace(f'"shard": "{k}/{n}"', '"shard": "K/N"')
    check(len(set(alike.values())) == 1, f"{name}: the shards differ beyond their index")
    check("dns:///embedding-server-shard-0.embedding.svc.cluster.local:50051" in operations,
          f"{name}: docs/operations.md does not give shard 0's address as its Service names it")


def check_adapter(adapter, operations):
    """The adapter's ConfigMap is what docs/operations.md has the Helm chart read (rules.existing),
    in its namespace, under the key an adapter's --config reads."""
    config_map = one(adapter, "ConfigMap")
    name, namespace = config_map["metadata"]["name"], config_map["metadata"].get("namespace")
    check(f"rules.existing={name}" in operations and f"namespace `{namespace}`" in operations,
          f"adapter: docs/operations.md does not say how an adapter reads ConfigMap {name} "
          f"in {namespace} (rules.existing={name})")
    check(list(config_map["data"]) == ["config.yaml"], "adapter: the ConfigMap's key is config.yaml")


def main():
    gpu, gpu_full_pool, cpu, hardened, sharded, adapter, rules_path, conf_path, operations = (
        sys.argv[1:])
    rules = yaml.safe_load(open(rules_path))
    config = yaml.safe_load(one(load(adapter), "ConfigMap")["data"]["config.yaml"])
    [adapter_metric] = [r["name"]["as"] for r in config["rules"]]
    operations = open(operations).read()
    check_adapter(load(adapter), operations)
    check_overlay("gpu", load(gpu), rules, adapter_metric)
    check_overlay("gpu-full-pool", load(gpu_full_pool), rules, adapter_metric)
    check_overlay("cpu", load(cpu), rules, adapter_metric)
    check_overlay("hardened", load(hardened), rules, adapter_metric, 50052, "grpc-direct")
    check_front(load(hardened), open(conf_path).read())
    check_sharded(load(sharded), rules, adapter_metric, operations)
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    if failures:
        sys.exit(1)
    print("rendered overlays: device, probes, rollout deadline and strategy, spread, images, "
          "grace period, security, Services, HPA, PodMonitor and PrometheusRule as promised; the "
          "adapter's ConfigMap as documented; the hardened one's proxy sidecar, config, ports and "
          "NetworkPolicy agree; the sharded one's shards each serve and select their own rows and "
          "pods, alike but for their index, under one PrometheusRule")


main()
