#!/usr/bin/env bash
# The API passes `buf lint` (STANDARD) and is formatted as `buf format` writes it.
#   buf_check.sh SOURCE_DIR
source "$(dirname "$0")/lib.sh"
cd "$1"
BUF=$(find_buf)
[[ -n $BUF ]] || fail "buf is not installed (scripts/install-deps installs it into .tools/)"
"$BUF" lint || fail "buf lint found problems"
"$BUF" format --diff --exit-code || fail "buf format would change the protos"
echo "buf lint and format: clean"
