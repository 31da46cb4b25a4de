# Shared by the deploy checks (tests/deploy/*.sh). Source it after tests/tools/lib.sh.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS=$ROOT/.tools/node_modules
PY=/usr/bin/python3  # Debian's interpreter, which sees python3-yaml, -numpy and -matplotlib

# skip REASON: CTest counts exit 77 as skipped (SKIP_RETURN_CODE in CMakeLists.txt). Only for a
# tool that cannot be installed on this machine; a missing one that can fails instead.
skip() { echo "SKIP: $*"; exit 77; }

# need_npm PACKAGE...: fails unless scripts/install-deps has put each into .tools/.
need_npm() {
  local p
  for p in "$@"; do
    [[ -d $TOOLS/$p ]] || fail "npm package $p is not in .tools/ (scripts/install-deps installs it)"
  done
}

# node_dir: a folder in $WORK whose node_modules is .tools' (ES modules resolve packages from the
# script's folder, so the scripts run from copies there).
node_dir() {
  mkdir -p "$WORK/node"
  ln -sfn "$TOOLS" "$WORK/node/node_modules"
  echo "$WORK/node"
}

# render OVERLAY: `kubectl kustomize` of deploy/k8s/OVERLAY into $WORK/OVERLAY.yaml (e.g. overlays/gpu).
render() {
  local out=$WORK/${1//\//_}.yaml
  kubectl kustomize "$ROOT/deploy/k8s/$1" >"$out" || fail "kubectl kustomize deploy/k8s/$1 failed"
  echo "$out"
}

# need_kustomize: kubectl with kustomize 4 or later built in (the kustomizations use `labels` and
# `patches`). Debian's kubernetes-client (1.20) carries kustomize 2, which can't read them.
need_kustomize() {
  command -v kubectl >/dev/null || fail "kubectl is not installed (scripts/install-deps)"
  local v
  v=$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')
  [[ -n $v && $v -ge 4 ]] ||
    skip "kubectl's built-in kustomize is older than v4 (kubectl $(kubectl version --client 2>&1 | head -1)); no newer kubectl is packaged in Debian 12"
}

# typecheck DIR FILE.ts: `tsc --noEmit` (strict) on DIR/FILE.ts, whose imports resolve in .tools
# (DIR from node_dir). Returns tsc's status; its findings go to the output.
typecheck() {
  cat >"$1/tsconfig.json" <<JSON
{"compilerOptions": {"strict": true, "noEmit": true, "module": "nodenext",
                     "moduleResolution": "nodenext", "target": "es2022", "skipLibCheck": true},
 "files": ["$2"]}
JSON
  "$TOOLS/.bin/tsc" -p "$1"
}
