#!/usr/bin/env bash
# Time to the first page of the 100,000-step ATIF file of benches/serve.sh on
# a cold server, for one or more builds run alternately (so each sees the
# same machine): the runs list, the first 100 steps, then the last 100; the
# server's RSS then, and after two idle seconds; then every page of 500
# steps, and the RSS after them. Prints the median of RUNS cold starts per
# build.
#
#   bash benches/first_page.sh [RUNS] BIN [BIN...]
source "$(dirname "$0")/common.sh"
RUNS="${1:-3}"; shift
ensure_tools
PCHRONICLE_BENCH_NO_BUILD=1 build_release
BIG=$(corpus "atif-1x100000" --runs 1 --steps 100000 --seed 11)
WORK=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
printf '[[datasets]]\nname = "big"\nuri = "%s"\n' "$BIG" > "$WORK/warehouse.toml"
cold() { # BIN -> "first_ms last_ms rss_mib idle_rss_mib all_ms paged_rss_mib"
  "$1" serve --config "$WORK/warehouse.toml" --listen 127.0.0.1:0 -q 2> "$WORK/log" &
  SERVER=$!
  local url
  url=$(wait_line "$WORK/log" "listening: ")
  local t0 doc total first t1
  t0=$(date +%s.%N)
  doc=$(curl -sf "$url/api/v1/datasets/big/runs?limit=1" | jq -r '.runs[0].root_document_id')
  total=$(curl -sf "$url/api/v1/datasets/big/trajectories/$doc/steps?limit=100" | jq '.total')
  first=$(ms_since "$t0")
  t1=$(date +%s.%N)
  curl -sf "$url/api/v1/datasets/big/trajectories/$doc/steps?offset=$((total - 100))&limit=100" > /dev/null
  local last rss idle t2 all
  last=$(ms_since "$t1")
  rss=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$SERVER/status")
  sleep 2
  idle=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$SERVER/status")
  t2=$(date +%s.%N)
  for off in $(seq 0 500 "$total"); do
    curl -sf "$url/api/v1/datasets/big/trajectories/$doc/steps?offset=$off&limit=500" > /dev/null
  done
  all=$(ms_since "$t2")
  echo "$first $last $rss $idle $all $(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$SERVER/status")"
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
}
alternate "$RUNS" "$WORK" cold "$@"
echo "| Build | first page | last page | RSS | RSS after 2 s idle | every page of 500 | RSS after them |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for bin in "$@"; do
  f=$(runs_of "$WORK" "$bin")
  med() { median_of "$f" "$1"; }
  echo "| \`$bin\` | $(med 1) ms | $(med 2) ms | $(med 3) MiB | $(med 4) MiB | $(med 5) ms | $(med 6) MiB |"
done
