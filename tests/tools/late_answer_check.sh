#!/usr/bin/env bash
# An answer gRPC could not send before its call's deadline is counted late
# (tests/tools/late_answer_check.py; issue 21, item 6). Raw HTTP/2 from Python's h2 against the
# real server on loopback.
#   late_answer_check.sh SERVER
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/../../scripts/gen-python-stubs" "$work/py" >/dev/null
# Debian's interpreter, which sees python3-grpcio, python3-numpy and python3-h2.
PYTHONPATH="$work/py:$here" /usr/bin/python3 "$here/late_answer_check.py" "$@"
