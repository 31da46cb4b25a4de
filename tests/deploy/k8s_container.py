"""The server's command line as a rendered overlay gives it (tests/deploy/k8s_server_check.sh).

  k8s_container.py flags RENDERED.yaml...
      every flag name the manifests pass: in the container's args and in the ConfigMap's flag
      files, one a line
  k8s_container.py args RENDERED.yaml LOCAL_DIR
      the container's args, one a line, as the kubelet would run them, with each volume's mount
      path moved under LOCAL_DIR; writes the ConfigMap's keys where its volume is mounted
"""
import os
import re
import sys

import yaml

FLAG = re.compile(r"^--?([A-Za-z0-9_]+)(=|$)")


def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def container_and_configmaps(objs):
    [deploy] = [o for o in objs if o["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    [container] = pod["containers"]
    maps = {o["metadata"]["name"]: o["data"] for o in objs if o["kind"] == "ConfigMap"}
    return pod, container, maps


def flag_names(path):
    _, container, maps = container_and_configmaps(load(path))
    lines = list(container.get("args", []))
    for data in maps.values():
        for key, text in data.items():
            if key.endswith(".flags"):
                lines += [l for l in text.splitlines() if l.strip() and not l.startswith("#")]
    names = []
    for line in lines:
        m = FLAG.match(line)
        if not m:
            sys.exit(f"{path}: not a --flag: {line!r}")
        names.append(m[1])
    return names


def local_args(path, local):
    pod, container, maps = container_and_configmaps(load(path))
    env = {}
    for e in container.get("env", []):
        ref = e.get("valueFrom", {}).get("configMapKeyRef")
        env[e["name"]] = maps[ref["name"]][ref["key"]] if ref else e["value"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    moves = []
    for m in container["volumeMounts"]:
        target = os.path.join(local, m["mountPath"].lstrip("/"))
        os.makedirs(target, exist_ok=True)
        moves.append((m["mountPath"], target))
        config = volumes[m["name"]].get("configMap")
        for key, text in (maps[config["name"]] if config else {}).items():
            with open(os.path.join(target, key), "w") as f:
                f.write(text)
    args = []
    for arg in container.get("args", []):
        arg = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env[m[1]], arg)
        for mount, target in moves:
            arg = arg.replace(mount, target)
        args.append(arg)
    return args


def main():
    if sys.argv[1] == "flags":
        for path in sys.argv[2:]:
            print("\n".join(flag_names(path)))
    else:
        print("\n".join(local_args(sys.argv[2], sys.argv[3])))


main()
