#!/usr/bin/env bash
# What callers see when the server is stopped under load (tests/tools/shutdown_check.py): only
# OK with the right rows, or UNAVAILABLE; never CANCELLED or a reset. Python grpcio, a client we
# did not write, 24 callers on 4 connections.
#   shutdown_check.sh SERVER [shutdown_check.py options, e.g. --repeats=20]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/../../scripts/gen-python-stubs" "$work/py" >/dev/null
# Debian's interpreter, which sees python3-grpcio and python3-numpy.
PYTHONPATH="$work/py:$here" /usr/bin/python3 "$here/shutdown_check.py" "$@"
