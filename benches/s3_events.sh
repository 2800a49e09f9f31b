#!/usr/bin/env bash
# Reading back captured traffic stored on S3: an events store written by
# captured_events.py (SESSIONS sessions of CALLS chat calls, ACTIVE running
# at once) is uploaded to moto's S3-protocol server on loopback, then
# `query s3://… "SELECT count(*) FROM dataset.steps"` projects it without a
# cache directory, for one or more builds run alternately: time, peak RSS,
# and the answer (every build must give the same). The same store read from
# local disk is the last row.
#
#   bash benches/s3_events.sh [SESSIONS] [CALLS] [ACTIVE] [RUNS] BIN [BIN...]
#
# CAPTURE_BATCH_ROWS=20000 writes the records in batches of the Gateway's
# largest append (see captured_events.py), so their pages are as small as
# in a store the Gateway wrote.
source "$(dirname "$0")/common.sh"
SESSIONS="${1:-2000}"; CALLS="${2:-25}"; ACTIVE="${3:-2000}"; RUNS="${4:-3}"; shift 4
eval "$(bash "$ROOT/.ci/setup")"
WORK=$(mktemp -d)
start_s3 "$WORK"
trap 'kill $S3_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/ds"
"$PCHRONICLE_PYTHON" "$ROOT/benches/captured_events.py" "$SESSIONS" "$CALLS" "$ACTIVE" 0 \
  "$WORK/ds/events.lance"
"$PCHRONICLE_PYTHON" - "$ENDPOINT" "$WORK/ds" <<'PY' >&2
import os, sys
import boto3
from botocore.config import Config
endpoint, root = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="bench", aws_secret_access_key="bench-secret",
                  config=Config(s3={"addressing_style": "path"}))
s3.create_bucket(Bucket="bench")
n = size = 0
for d, _, fs in os.walk(root):
    for f in fs:
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            body = fh.read()
        s3.put_object(Bucket="bench", Key="ds/" + os.path.relpath(p, root), Body=body)
        n, size = n + 1, size + len(body)
print(f"uploaded {n} objects, {size / 2**20:.0f} MiB", file=sys.stderr)
PY
export AWS_ENDPOINT_URL="$ENDPOINT" AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret \
  PCHRONICLE_S3_ALLOW=127.0.0.1
# No cache directory: every read projects the events in memory.
touch "$WORK/no-cache"
SQL="SELECT count(*) AS steps, sum(length(message_value)) AS text FROM dataset.steps"
read_back() { # BIN [TARGET]
  PCHRONICLE_CACHE_DIR="$WORK/no-cache" /usr/bin/time -f "%e %M" -o "$WORK/t" \
    "$1" query "${2:-s3://bench/ds}" "$SQL" --format csv -q > "$WORK/answer"
  echo "$(cat "$WORK/t") $(tail -n1 "$WORK/answer")"
}
local_read() { read_back "$1" "$WORK/ds"; }
alternate "$RUNS" "$WORK" read_back "$@"
echo "| Build | read from S3 | peak RSS | answer |"
echo "|---|---:|---:|---|"
for bin in "$@"; do
  f=$(runs_of "$WORK" "$bin")
  echo "| \`$bin\` | $(median_of "$f" 1) s | $(( $(median_of "$f" 2) / 1024 )) MiB | $(awk '{print $3}' "$f" | sort -u | tr '\n' ' ')|"
done
last="${*: -1}"
alternate "$RUNS" "$WORK" local_read "$last"
f=$(runs_of "$WORK" "$last")
echo "| \`$last\`, local disk | $(median_of "$f" 1) s | $(( $(median_of "$f" 2) / 1024 )) MiB | $(awk '{print $3}' "$f" | sort -u | tr '\n' ' ')|"
