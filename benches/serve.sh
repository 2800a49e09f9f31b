#!/usr/bin/env bash
# Warehouse server benchmarks (issue 7): `pchronicle serve` on loopback
# under wrk, over the 1,000,000-step Storyline store of the SQL/find
# benchmarks, and the time to the first page of a 100,000-step trajectory
# (cold server: Catalog open, runs read, trajectory decoded), with DuckDB
# answering the same first page from Parquet for scale. Writes Markdown.
#
#   bash benches/serve.sh [DURATION_SECONDS]     (default 10)
source "$(dirname "$0")/common.sh"
DURATION="${1:-10}"
ensure_tools
command -v wrk >/dev/null 2>&1 || { as_root apt-get update -qq; as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
build_release
DIR=$(corpus "atif-10000x100" --runs 10000 --steps 100 --seed 7)
STORE="$CORPUS_ROOT/find-10000x100-g$CORPUS_VERSION/store"
if [ ! -f "$STORE/CURRENT" ]; then
  rm -rf "$STORE"; mkdir -p "$(dirname "$STORE")"
  "$PC" import --from "$DIR" --output "$STORE" -q > /dev/null
fi
BIG=$(corpus "atif-1x100000" --runs 1 --steps 100000 --seed 11)
BIGSTORE="$CORPUS_ROOT/serve-1x100000-g$CORPUS_VERSION/store"
if [ ! -f "$BIGSTORE/CURRENT" ]; then
  rm -rf "$BIGSTORE"; mkdir -p "$(dirname "$BIGSTORE")"
  "$PC" import --from "$BIG" --output "$BIGSTORE" -q > /dev/null
fi
WORK=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
cat > "$WORK/warehouse.toml" <<TOML
[[datasets]]
name = "steps1m"
uri = "$STORE"

[[datasets]]
name = "big"
uri = "$BIG"

[[datasets]]
name = "bigstore"
uri = "$BIGSTORE"
TOML

start_server() {
  "$PC" serve --config "$WORK/warehouse.toml" --listen 127.0.0.1:0 -q 2> "$WORK/server.log" &
  SERVER=$!
  URL=$(wait_line "$WORK/server.log" "listening: ")
}
stop_server() { kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; }
now() { date +%s.%N; }

# Time to first page, cold: start, then the first steps page of the one
# trajectory (which reads the runs of the Dataset and decodes the trajectory).
first_page() { # DATASET
  local t0 doc t1
  start_server
  t0=$(now)
  doc=$(curl -sf "$URL/api/v1/datasets/$1/runs?limit=1" | jq -r '.runs[0].root_document_id')
  curl -sf "$URL/api/v1/datasets/$1/trajectories/$doc/steps?limit=100" | jq -e '.steps | length == 100' > /dev/null
  t1=$(ms_since "$t0")
  local t2
  t2=$(now)
  local total
  total=$(curl -sf "$URL/api/v1/datasets/$1/trajectories/$doc/steps?limit=1" | jq '.total')
  curl -sf "$URL/api/v1/datasets/$1/trajectories/$doc/steps?offset=$((total - 100))&limit=100" | jq -e '.steps | length == 100' > /dev/null
  local t3
  t3=$(ms_since "$t2")
  # Then page through the whole trajectory, as a reader scrolling it would.
  local off=0
  while [ "$off" -lt "$total" ]; do
    curl -sf "$URL/api/v1/datasets/$1/trajectories/$doc/steps?offset=$off&limit=500" > /dev/null
    off=$((off + 500))
  done
  echo "$t1 $t3 $(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$SERVER/status")"
  stop_server
}
# Cold starts vary with how fast the machine hands out fresh memory: the
# median of three, each field on its own.
median3() { # DATASET
  local runs
  runs=$(for _ in 1 2 3; do first_page "$1"; done)
  for f in 1 2 3; do
    echo "$runs" | awk -v f="$f" '{print $f}' | sort -n | sed -n 2p
  done | paste -sd' '
}
read -r BIG_FIRST BIG_LAST BIG_RSS <<< "$(median3 big)"
read -r BIGSTORE_FIRST BIGSTORE_LAST BIGSTORE_RSS <<< "$(median3 bigstore)"
# The same first page from DuckDB: read the 100,000-step file, sort, take 100.
BIGFILE=$(find "$BIG" -name '*.json' | head -1)
DUCK_FIRST=$( { /usr/bin/time -f '%e' duckdb -c "SELECT s.step_id, s.source, s.message FROM (SELECT unnest(steps) AS s FROM read_json('$BIGFILE', maximum_object_size=1073741824)) ORDER BY s.step_id LIMIT 100" > /dev/null; } 2>&1 | tail -1)

start_server
DOC=$(curl -sf "$URL/api/v1/datasets/steps1m/runs?limit=1&offset=5000" | jq -r '.runs[0].root_document_id')
SRC=$(curl -sf "$URL/api/v1/datasets/steps1m/runs?limit=1&offset=5000" | jq -r '.runs[0].source_path')
# Warm the caches the way a user's first click does.
curl -sf "$URL/api/v1/datasets/steps1m/trajectories/$DOC/steps?limit=100&source=$SRC" > /dev/null
RSS_WARM=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$SERVER/status")
bench() { # LABEL PATH
  local out rps p50 p99
  out=$(wrk -t2 -c16 -d"${DURATION}s" --latency "$URL$2")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  echo "| $1 | \`$2\` | $rps | $p50 | $p99 |"
}
echo "Server: \`pchronicle serve\` (4 workers) on 127.0.0.1; load: wrk, 2 threads, 16 connections, ${DURATION} s per route, on the same 2-core machine."
echo "Dataset \`steps1m\`: the imported Storyline store of 10,000 generated trajectories, $(curl -sf "$URL/api/v1/query?sql=SELECT%20count(*)%20FROM%20steps1m.steps" | jq '.rows[0][0]') steps."
echo
echo "| Route | Path | requests/s | p50 | p99 |"
echo "|---|---|---:|---:|---:|"
bench "catalog" "/api/v1/catalog"
bench "runs list (page of 50, sorted by cost)" "/api/v1/datasets/steps1m/runs?limit=50&sort=total_cost_usd&order=desc"
bench "trajectory page (100 steps)" "/api/v1/datasets/steps1m/trajectories/$DOC/steps?limit=100&source=$SRC"
bench "health" "/api/v1/health"
RSS_AFTER=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$SERVER/status")
stop_server
echo
echo "Server RSS: $RSS_WARM MiB after the first trajectory page, $RSS_AFTER MiB after the load."
echo
echo "Time to the first page of a 100,000-step trajectory, cold server (runs list + first 100 steps), then the last page, and the server's RSS after paging through the whole trajectory (500 steps a page); medians of three cold starts:"
echo
echo "| Source | first page | last page | RSS after paging |"
echo "|---|---:|---:|---:|"
echo "| one ATIF file ($(du -m "$BIGFILE" | cut -f1) MB) | ${BIG_FIRST} ms | ${BIG_LAST} ms | ${BIG_RSS} MiB |"
echo "| imported Storyline store | ${BIGSTORE_FIRST} ms | ${BIGSTORE_LAST} ms | ${BIGSTORE_RSS} MiB |"
echo "| DuckDB $(duckdb --version | cut -d' ' -f1), same file, \`read_json\` + unnest + ORDER BY + LIMIT 100 | $(echo "$DUCK_FIRST" | awk '{printf "%.0f", $1*1000}') ms | — | — |"
