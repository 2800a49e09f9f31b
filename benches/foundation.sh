#!/usr/bin/env bash
# Foundation benchmarks (issue 2): `ls` over 10,000 files, and ATIF decode
# throughput (status) against `jq -c .` and DuckDB `read_json` on the same
# files, side by side in one run. Writes a Markdown table to stdout.
#
#   bash benches/foundation.sh [RUNS] [STEPS]      (default 10000 100)
source "$(dirname "$0")/common.sh"
RUNS="${1:-10000}"
STEPS="${2:-100}"
ensure_tools
build_release
DIR=$(corpus "atif-${RUNS}x${STEPS}" --runs "$RUNS" --steps "$STEPS" --seed 7)
BYTES=$(find "$DIR" -name '*.json' -printf '%s\n' | awk '{s+=$1} END {print s}')
FILES=$(find "$DIR" -name '*.json' | wc -l)
MB=$(awk -v b="$BYTES" 'BEGIN{printf "%.1f", b/1e6}')
OUT=$(mktemp -d)
cat > "$OUT/duck.sql" <<SQL
SET threads TO 1;
SELECT count(*), sum(len(steps)) FROM read_json('$DIR/**/*.json', format='auto', maximum_object_size=268435456, union_by_name=true);
SQL
cat > "$OUT/duck2.sql" <<SQL
SELECT count(*), sum(len(steps)) FROM read_json('$DIR/**/*.json', format='auto', maximum_object_size=268435456, union_by_name=true);
SQL
sync
hyperfine --warmup 1 --runs 5 --export-json "$OUT/h.json" \
  -n "pchronicle ls" "$PC ls $DIR --format json -q" \
  -n "pchronicle status (2 threads)" "$PC status $DIR --format json -q" \
  -n "pchronicle status (1 thread)" "RAYON_NUM_THREADS=1 $PC status $DIR --format json -q" \
  -n "jq -c . (1 process)" "find $DIR -name '*.json' -print0 | xargs -0 cat | jq -c . > /dev/null" \
  -n "duckdb read_json (1 thread)" "duckdb -c '.read $OUT/duck.sql'" \
  -n "duckdb read_json (2 threads)" "duckdb -c '.read $OUT/duck2.sql'" >&2
echo "Corpus: $FILES ATIF files, $MB MB ($RUNS runs, ~$STEPS steps each, seed 7)."
echo
echo "| Command | Median (s) | MB/s | Peak RSS (MiB) |"
echo "|---|---:|---:|---:|"
python3 - "$OUT/h.json" "$BYTES" <<'PY' > "$OUT/rows"
import json, sys
d = json.load(open(sys.argv[1])); b = int(sys.argv[2])
for r in d["results"]:
    print(f'{r["command"]}\t{r["median"]:.3f}\t{b/1e6/r["median"]:.0f}')
PY
while IFS=$'\t' read -r name med mbs; do
  case "$name" in
    "pchronicle ls") rss=$(peak_rss "$PC" ls "$DIR" --format json -q);;
    "pchronicle status (2 threads)") rss=$(peak_rss "$PC" status "$DIR" --format json -q);;
    "pchronicle status (1 thread)") rss=$(RAYON_NUM_THREADS=1 peak_rss "$PC" status "$DIR" --format json -q);;
    "duckdb read_json (1 thread)") rss=$(peak_rss duckdb -c ".read $OUT/duck.sql");;
    "duckdb read_json (2 threads)") rss=$(peak_rss duckdb -c ".read $OUT/duck2.sql");;
    *) rss="—";;
  esac
  echo "| $name | $med | $mbs | $rss |"
done < "$OUT/rows"
rm -rf "$OUT"
