#!/usr/bin/env bash
# An independent client (buf curl) finds the API through server reflection, with no proto file,
# and gets the same rows as our own client.
#   reflection_check.sh SERVER CLIENT
source "$(dirname "$0")/lib.sh"
SERVER=$1 CLIENT=$2
BUF=$(find_buf)
[[ -n $BUF ]] || fail "buf is not installed (scripts/install-deps installs it into .tools/)"
start_server "$SERVER" --demo_table=100x4
url=http://127.0.0.1:$GRPC_PORT
"$BUF" curl --protocol grpc --http2-prior-knowledge --list-methods "$url" >"$WORK/methods" 2>&1 || true
grep -q "embedding.v1.EmbeddingService/LookUp" "$WORK/methods" ||
  { cat "$WORK/methods"; fail "reflection does not list LookUp"; }
"$BUF" curl --protocol grpc --http2-prior-knowledge -d '{"ids":["7","9"],"dtype":"DATA_TYPE_FLOAT32"}' \
  "$url/embedding.v1.EmbeddingService/LookUp" >"$WORK/answer.json" ||
  fail "buf curl LookUp failed"
python3 - "$WORK/answer.json" <<'PY' || fail "buf curl answer has the wrong shape"
import base64, json, sys
a = json.load(open(sys.argv[1]))
assert [int(x) for x in a["shape"]] == [2, 4], a
assert len(base64.b64decode(a["embeddings"])) == 2 * 4 * 4, a
PY
"$BUF" curl --protocol grpc --http2-prior-knowledge -d '{"ids":["100"]}' \
  "$url/embedding.v1.EmbeddingService/LookUp" >"$WORK/err.json" 2>&1 && fail "id 100 accepted"
grep -qi "out of range" "$WORK/err.json" || { cat "$WORK/err.json"; fail "no OUT_OF_RANGE message"; }
echo "reflection: buf curl listed and called LookUp without the proto file"
