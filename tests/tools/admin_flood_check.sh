#!/usr/bin/env bash
# The admin listener under a flood from callers it must refuse (tests/tools/admin_flood_check.py;
# issue 41, item 1). Raw HTTP/2 over TLS from Python's h2 against the real server on loopback.
#   admin_flood_check.sh SERVER CLIENT [admin_flood_check.py options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/certs"
"$here/../testing/make_test_certs.sh" "$work/certs" >/dev/null
server=$1 client=$2
shift 2
# Debian's interpreter, which sees python3-numpy and python3-h2.
PYTHONPATH="$here" /usr/bin/python3 "$here/admin_flood_check.py" "$server" "$client" "$work/certs" "$@"
