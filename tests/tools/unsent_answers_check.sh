#!/usr/bin/env bash
# A client that never acknowledges SETTINGS nor reads its answers cannot make the server hold
# more than the bound on unsent answers (tests/tools/unsent_answers_check.py; issue 21, item 1).
# Raw HTTP/2 from Python's h2 against the real server on loopback.
#   unsent_answers_check.sh SERVER [unsent_answers_check.py options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/../../scripts/gen-python-stubs" "$work/py" >/dev/null
# Debian's interpreter, which sees python3-grpcio, python3-numpy and python3-h2.
PYTHONPATH="$work/py:$here" /usr/bin/python3 "$here/unsent_answers_check.py" "$@"
