#!/usr/bin/env bash
# Import and export benchmarks (issue 3), side by side in one run:
#   - `pchronicle import` of >= 1 GB of generated ATIF into a new Storyline
#     Lance store (wall time, MB/s, peak RSS; the full-text index build is
#     reported separately and subtracted for the store-only figure);
#   - DuckDB `read_json` -> Parquet on the same files;
#   - `pchronicle export` of the whole store back to ATIF JSON Lines, with
#     `--stream` and without (to a file).
# Writes Markdown to stdout.
#
#   bash benches/import.sh [RUNS] [STEPS]      (default 20000 100)
source "$(dirname "$0")/common.sh"
RUNS="${1:-20000}"
STEPS="${2:-100}"
ensure_tools
build_release
# The corpus of the other benchmarks of this size (one cache directory per name,
# so the same seed).
DIR=$(corpus "atif-${RUNS}x${STEPS}" --runs "$RUNS" --steps "$STEPS" --seed 7)
RAW_BYTES=$(find "$DIR" -name '*.json' -printf '%s\n' | awk '{s+=$1} END {print s}')
LARGEST=$(find "$DIR" -name '*.json' -printf '%s\n' | sort -n | tail -1)
WORK="$CORPUS_ROOT/import-${RUNS}x${STEPS}-g$CORPUS_VERSION"
rm -rf "$WORK"
mkdir -p "$WORK"
mb() { awk -v b="$1" 'BEGIN{printf "%.0f", b/1e6}'; }
rate() { awk -v b="$1" -v s="$2" 'BEGIN{printf "%.0f", b/1e6/s}'; }

# Read every file once so all three runs start from a warm page cache.
find "$DIR" -name '*.json' -print0 | xargs -0 cat > /dev/null

/usr/bin/time -f '%e %M' -o "$WORK/import.time" \
  "$PC" import --from "$DIR" --output "$WORK/store" -q > "$WORK/import.json"
read -r IMPORT_S IMPORT_RSS < "$WORK/import.time"
INDEX_S=$(jq .fts_index.seconds "$WORK/import.json")
STORE_ONLY_S=$(awk -v a="$IMPORT_S" -v b="$INDEX_S" 'BEGIN{printf "%.2f", a-b}')

cat > "$WORK/duck.sql" <<SQL
COPY (SELECT * FROM read_json('$DIR/**/*.json', format='auto', maximum_object_size=268435456, union_by_name=true))
  TO '$WORK/duck.parquet' (FORMAT parquet);
SQL
/usr/bin/time -f '%e %M' -o "$WORK/duck.time" duckdb -c ".read $WORK/duck.sql" > /dev/null
read -r DUCK_S DUCK_RSS < "$WORK/duck.time"

/usr/bin/time -f '%e %M' -o "$WORK/export.time" \
  "$PC" export --from "$WORK/store" --format atif --stream --output "$WORK/export.jsonl" -q
read -r EXPORT_S EXPORT_RSS < "$WORK/export.time"
EXPORT_BYTES=$(stat -c %s "$WORK/export.jsonl")
rm -f "$WORK/export.jsonl"
# Without --stream: the same JSON Lines, published by one link at the end.
/usr/bin/time -f '%e %M' -o "$WORK/export-file.time" \
  "$PC" export --from "$WORK/store" --format atif --output "$WORK/export.jsonl" -q
read -r EXPORT_FILE_S EXPORT_FILE_RSS < "$WORK/export-file.time"

echo "Corpus: $(jq .trajectories "$WORK/import.json") trajectories, $(jq .steps "$WORK/import.json") steps in $RUNS ATIF files, $(mb "$RAW_BYTES") MB (largest file $(awk -v b="$LARGEST" 'BEGIN{printf "%.1f", b/1e6}') MB), seed 7; warm page cache; $(nproc) cores."
echo
echo "| Run | Wall time | Throughput (raw JSON) | Peak RSS |"
echo "|---|---:|---:|---:|"
echo "| pchronicle import (store + full-text index) | ${IMPORT_S} s | $(rate "$RAW_BYTES" "$IMPORT_S") MB/s | $((IMPORT_RSS / 1024)) MiB |"
echo "| of which full-text index build | ${INDEX_S} s | | |"
echo "| pchronicle import without the index build | ${STORE_ONLY_S} s | $(rate "$RAW_BYTES" "$STORE_ONLY_S") MB/s | |"
echo "| DuckDB read_json → Parquet | ${DUCK_S} s | $(rate "$RAW_BYTES" "$DUCK_S") MB/s | $((DUCK_RSS / 1024)) MiB |"
echo "| pchronicle export --format atif --stream | ${EXPORT_S} s | $(rate "$EXPORT_BYTES" "$EXPORT_S") MB/s written ($(mb "$EXPORT_BYTES") MB) | $((EXPORT_RSS / 1024)) MiB |"
echo "| pchronicle export --format atif (to a file) | ${EXPORT_FILE_S} s | $(rate "$EXPORT_BYTES" "$EXPORT_FILE_S") MB/s written | $((EXPORT_FILE_RSS / 1024)) MiB |"
echo
echo "Sizes: store $(du -sb "$WORK/store" | cut -f1 | xargs -I{} awk -v b={} 'BEGIN{printf "%.0f", b/1e6}') MB (of which index $(du -sb "$WORK/store/_pchronicle" | cut -f1 | xargs -I{} awk -v b={} 'BEGIN{printf "%.0f", b/1e6}') MB); DuckDB Parquet $(mb "$(stat -c %s "$WORK/duck.parquet")") MB."
echo "RSS goal: ≤ 2 × largest trajectory + 256 MiB = $(awk -v b="$LARGEST" 'BEGIN{printf "%.0f", 2*b/1048576+256}') MiB."
rm -rf "$WORK/export.jsonl" "$WORK/duck.parquet"
