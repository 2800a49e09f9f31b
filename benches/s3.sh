#!/usr/bin/env bash
# S3 benchmarks (issue 6): the same Dataset read from an S3-protocol server
# on loopback (moto) and from local disk, in one run — listing 10,000
# objects, `status`, a `query` and a `find` — with the ratio and the bytes
# each S3 command received. Writes a Markdown table to stdout.
#
#   bash benches/s3.sh [RUNS] [STEPS]      (default 10000 10)
source "$(dirname "$0")/common.sh"
RUNS="${1:-10000}"
STEPS="${2:-10}"
ensure_tools
build_release
PC="${PCHRONICLE_BENCH_BIN:-$PC}"
VENV="${PCHRONICLE_VENV:-$HOME/.cache/pchronicle-venv}"
eval "$(bash "$ROOT/.ci/setup")"
DIR=$(corpus "atif-${RUNS}x${STEPS}" --runs "$RUNS" --steps "$STEPS" --seed 5)
BYTES=$(find "$DIR" -name '*.json' -printf '%s\n' | awk '{s+=$1} END {print s}')
FILES=$(find "$DIR" -name '*.json' | wc -l)
OUT=$(mktemp -d)
start_s3 "$OUT"
trap 'kill $S3_PID 2>/dev/null || true; rm -rf "$OUT"' EXIT
export AWS_ENDPOINT_URL="$ENDPOINT" AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret \
  PCHRONICLE_S3_ALLOW=127.0.0.1 PCHRONICLE_CACHE_DIR="$OUT/cache"
"$PCHRONICLE_PYTHON" - "$ENDPOINT" "$DIR" <<'PY' >&2
import os, sys, concurrent.futures as cf
import boto3
from botocore.config import Config
endpoint, root = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="bench", aws_secret_access_key="bench-secret",
                  config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
s3.create_bucket(Bucket="bench")
paths = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".json")]
def put(p):
    with open(p, "rb") as fh:
        s3.put_object(Bucket="bench", Key="corpus/" + os.path.relpath(p, root), Body=fh.read())
with cf.ThreadPoolExecutor(16) as ex:
    list(ex.map(put, paths))
print(f"uploaded {len(paths)} objects", file=sys.stderr)
PY
S3="s3://bench/corpus"
SQL="SELECT step_source, count(*) AS steps, sum(length(message_value)) AS chars, sum(tool_call_count) AS calls FROM steps GROUP BY 1 ORDER BY 1"
TERM="timeout"
# Build both find indexes once (the cache is warm for the timed runs).
$PC find "$DIR" --match "$TERM" --format json -q > /dev/null || true
$PC find "$S3" --match "$TERM" --format json -q > /dev/null || true
hyperfine --warmup 0 --runs 3 --export-json "$OUT/h.json" \
  -n "ls local" "$PC ls $DIR --format json -q" \
  -n "ls s3" "$PC ls $S3 --format json -q" \
  -n "status local" "$PC status $DIR --format json -q" \
  -n "status s3" "$PC status $S3 --format json -q" \
  -n "query local" "$PC query $DIR \"$SQL\" --format csv -q" \
  -n "query s3" "$PC query $S3 \"$SQL\" --format csv -q" \
  -n "find local" "$PC find $DIR --match $TERM --format json -q" \
  -n "find s3" "$PC find $S3 --match $TERM --format json -q" >&2
# Cold listing (no sniff cache: every candidate object is sniffed once), and
# the server's own ceiling: boto3 fetching every object with 16 threads.
rm -rf "$OUT/cold-cache"
COLD_START=$(date +%s.%N)
COLD=$(PCHRONICLE_CACHE_DIR="$OUT/cold-cache" "$PC" ls "$S3" --format json 2>&1 >/dev/null | sed -n 's/^S3: //p' | tail -1)
COLD_S=$(awk -v a="$COLD_START" -v b="$(date +%s.%N)" 'BEGIN{printf "%.3f", b-a}')
BOTO_S=$("$PCHRONICLE_PYTHON" - "$ENDPOINT" <<'PY'
import sys, time, concurrent.futures as cf
import boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                  aws_access_key_id="bench", aws_secret_access_key="bench-secret",
                  config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))
t = time.time()
keys = [o["Key"] for p in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix="corpus/") for o in p.get("Contents", [])]
with cf.ThreadPoolExecutor(16) as ex:
    n = sum(ex.map(lambda k: len(s3.get_object(Bucket="bench", Key=k)["Body"].read()), keys))
print(f"{time.time() - t:.3f}")
PY
)
traffic() { "$PC" "$@" 2>&1 >/dev/null | sed -n 's/^S3: \([0-9]*\) requests\?, \([0-9]*\) bytes received$/\1 \2/p' | tail -1; }
echo "Corpus: $FILES ATIF files, $(awk -v b="$BYTES" 'BEGIN{printf "%.1f", b/1e6}') MB ($RUNS runs, ~$STEPS steps each, seed 5); S3 = moto $("$PCHRONICLE_PYTHON" -c 'import moto; print(moto.__version__)') on 127.0.0.1."
echo
echo "| Command | Local median (s) | S3 median (s) | S3 / local | S3 requests | S3 bytes received |"
echo "|---|---:|---:|---:|---:|---:|"
for cmd in ls status query find; do
  case "$cmd" in
    ls) t=$(traffic ls "$S3" --format json);;
    status) t=$(traffic status "$S3" --format json);;
    query) t=$(traffic query "$S3" "$SQL" --format csv);;
    find) t=$(traffic find "$S3" --match "$TERM" --format json);;
  esac
  python3 - "$OUT/h.json" "$cmd" "$t" <<'PY'
import json, sys
d = {r["command"]: r["median"] for r in json.load(open(sys.argv[1]))["results"]}
cmd, t = sys.argv[2], sys.argv[3].split()
loc, s3 = d[f"{cmd} local"], d[f"{cmd} s3"]
req, b = (t + ["?", "?"])[:2]
print(f"| `{cmd}` | {loc:.3f} | {s3:.3f} | {s3/loc:.1f}× | {req} | {b} |")
PY
done
echo
echo "Cold \`ls\` of the S3 Dataset (empty sniff cache, every candidate sniffed once): ${COLD_S} s, ${COLD}."
echo "The server's ceiling on the same data: boto3 listing and fetching every object with 16 threads took ${BOTO_S} s."
