#!/usr/bin/env bash
# Spilling (issue 20): a GROUP BY over about 10,000,000 distinct keys and
# an ORDER BY of as many rows, with a 256 MiB memory budget, against DuckDB
# with the same memory limit on the same rows, side by side. The rows are
# every trajectory of the 1,000,000-step corpus crossed with 910 numbers
# (11,000 × 910 = 10,010,000). Writes Markdown to stdout.
#
#   bash benches/spill.sh [RUNS] [STEPS]      (default 10000 100)
source "$(dirname "$0")/common.sh"
RUNS="${1:-10000}"
STEPS="${2:-100}"
ensure_tools
build_release
STORE="$CORPUS_ROOT/find-${RUNS}x${STEPS}-g$CORPUS_VERSION/store"
WORK="$CORPUS_ROOT/sql-${RUNS}x${STEPS}-g$CORPUS_VERSION"
[ -f "$STORE/CURRENT" ] && [ -f "$WORK/runs.parquet" ] || {
  echo "run benches/sql.sh first: it makes the store and the Parquet files" >&2
  exit 1
}
P_RUNS="'$WORK/runs.parquet'"
VALUES=$(seq 0 909 | sed 's/.*/(&)/' | paste -sd, -)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# name | SQL with {runs} and {values}
QUERIES=(
  "GROUP BY 10M keys|SELECT count(*) AS groups, sum(n) AS rows FROM (SELECT t.document_id, v.k, count(*) AS n FROM {runs} t CROSS JOIN (VALUES {values}) v(k) GROUP BY t.document_id, v.k) g"
  "ORDER BY 10M rows|SELECT t.document_id, v.k FROM {runs} t CROSS JOIN (VALUES {values}) v(k) ORDER BY v.k DESC, t.document_id LIMIT 5 OFFSET 10000000"
)
echo "Rows: 10,010,000 (11,000 trajectories × 910). pchronicle: \`--memory-budget 268435456\`, spill files under TMPDIR; DuckDB $(duckdb --version | cut -d' ' -f1): \`SET memory_limit='256MB'; SET threads=2\` over the same trajectories in Parquet. One run each, whole process."
echo
echo "| Query | pchronicle | peak RSS | spilled | DuckDB | DuckDB peak RSS | same rows |"
echo "|---|---:|---:|---:|---:|---:|:---:|"
for q in "${QUERIES[@]}"; do
  IFS='|' read -r name sql <<< "$q"
  ours="${sql//\{runs\}/trajectories}"; ours="${ours//\{values\}/$VALUES}"
  theirs="${sql//\{runs\}/$P_RUNS}"; theirs="${theirs//\{values\}/$VALUES}"
  printf "SET memory_limit='256MB'; SET threads=2; %s;" "$theirs" > "$OUT/theirs.sql"
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$OUT/rss" "$PC" query "$STORE" "$ours" --format csv -q \
    --memory-budget 268435456 --timeout 3600 --stats > "$OUT/a.csv" 2> "$OUT/stats"
  p_ms=$(ms_since "$start")
  p_rss=$(( $(tail -1 "$OUT/rss") / 1024 ))
  spilled=$(grep -o 'spilled [0-9]* bytes' "$OUT/stats" | awk '{printf "%.0f MiB", $2/1048576}')
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$OUT/rss" duckdb -csv -c ".read $OUT/theirs.sql" > "$OUT/b.csv"
  d_ms=$(ms_since "$start")
  d_rss=$(( $(tail -1 "$OUT/rss") / 1024 ))
  tail -n +2 "$OUT/a.csv" | python3 "$(dirname "$0")/normalize_csv.py" > "$OUT/a"
  tail -n +2 "$OUT/b.csv" | python3 "$(dirname "$0")/normalize_csv.py" > "$OUT/b"
  if cmp -s "$OUT/a" "$OUT/b"; then agree=yes; else agree=NO; fi
  echo "| $name | $p_ms ms | $p_rss MiB | $spilled | $d_ms ms | $d_rss MiB | $agree |"
done
