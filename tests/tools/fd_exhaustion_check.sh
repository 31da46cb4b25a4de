#!/usr/bin/env bash
# The server keeps listening after it runs out of file descriptors
# (tests/tools/fd_exhaustion_check.py; issue 41, item 5).
# Raw TCP connections and grpcio against the real server on loopback.
#   fd_exhaustion_check.sh SERVER [fd_exhaustion_check.py options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/../../scripts/gen-python-stubs" "$work/py" >/dev/null
# Debian's interpreter, which sees python3-grpcio, python3-numpy and python3-h2.
PYTHONPATH="$work/py:$here" /usr/bin/python3 "$here/fd_exhaustion_check.py" "$@"
