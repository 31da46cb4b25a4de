#!/usr/bin/env bash
# Calls that their client resets are dropped from the queue before their gather and counted as
# cancelled (tests/tools/rapid_reset_check.py; issue 21, item 5). Raw HTTP/2 from Python's h2
# against the real server on loopback.
#   rapid_reset_check.sh SERVER [rapid_reset_check.py options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/../../scripts/gen-python-stubs" "$work/py" >/dev/null
# Debian's interpreter, which sees python3-grpcio, python3-numpy and python3-h2.
PYTHONPATH="$work/py:$here" /usr/bin/python3 "$here/rapid_reset_check.py" "$@"
