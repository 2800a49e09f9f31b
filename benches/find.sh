#!/usr/bin/env bash
# Store and find benchmarks (issues 3 and 5), side by side in one run:
#   - import throughput of ~1,000,000 generated steps (mixed Chinese/English
#     ATIF), with the full-text index build reported separately;
#   - find end to end (CLI, warm index) for five query shapes, against
#     `rg -l` over the raw ATIF files and DuckDB LIKE over the same steps in
#     Parquet;
#   - index size relative to the data.
# Writes Markdown to stdout.
#
#   bash benches/find.sh [RUNS] [STEPS]      (default 10000 100)
source "$(dirname "$0")/common.sh"
RUNS="${1:-10000}"
STEPS="${2:-100}"
ensure_tools
build_release
DIR=$(corpus "atif-${RUNS}x${STEPS}" --runs "$RUNS" --steps "$STEPS" --seed 7)
RAW_BYTES=$(find "$DIR" -name '*.json' -printf '%s\n' | awk '{s+=$1} END {print s}')
WORK="$CORPUS_ROOT/find-${RUNS}x${STEPS}-g$CORPUS_VERSION"
STORE="$WORK/store"
mkdir -p "$WORK"
export PCHRONICLE_CACHE_DIR="$WORK/cache"

# --- import (creates the store and its full-text index) -------------------
if [ ! -f "$STORE/CURRENT" ]; then
  rm -rf "$STORE"
  sync
  /usr/bin/time -f '%e %M' -o "$WORK/import.time" "$PC" import --from "$DIR" --output "$STORE" -q > "$WORK/import.json"
fi
read -r IMPORT_S IMPORT_RSS < "$WORK/import.time"
STEPS_N=$(jq .steps "$WORK/import.json")
TEXT_BYTES=$(jq .fts_index.text_bytes "$WORK/import.json")
INDEX_S=$(jq .fts_index.seconds "$WORK/import.json")
INDEX_BYTES=$(du -sb "$STORE/_pchronicle" | cut -f1)
STORE_BYTES=$(du -sb "$STORE" | cut -f1)

# --- the same steps as Parquet for DuckDB ----------------------------------
PARQUET="$WORK/steps.parquet"
if [ ! -f "$PARQUET" ]; then
  # The decoded tool output, the text find searches (not its JSON).
  "$PC" query "$STORE" "SELECT source_path, document_id, step_id, step_source, message_value, observation_text AS observation, prompt, extra FROM steps" --format jsonl -q \
    --max-rows 100000000 --max-output-bytes 100000000000 > "$WORK/steps.jsonl"
  duckdb -c "COPY (SELECT * FROM read_json('$WORK/steps.jsonl', format='newline_delimited', maximum_object_size=268435456)) TO '$PARQUET' (FORMAT parquet)"
  rm -f "$WORK/steps.jsonl"
fi

# name | find --match args | rg args | DuckDB WHERE
QUERIES=(
  "single term (zh)|--match 超时|-F 超时|message_value LIKE '%超时%' OR observation LIKE '%超时%' OR prompt LIKE '%超时%'"
  "single term (en)|--match timeout|-i -w timeout|message_value ILIKE '%timeout%' OR observation ILIKE '%timeout%' OR prompt ILIKE '%timeout%'"
  "term in tool output|--match Traceback|-F Traceback|observation LIKE '%Traceback%'"
  "phrase|--match \"'请求超时'\"|-F 请求超时|message_value LIKE '%请求超时%' OR observation LIKE '%请求超时%' OR prompt LIKE '%请求超时%'"
  "role-scoped term|--match '#user(数据库)'|-F 数据库|step_source = 'user' AND message_value LIKE '%数据库%'"
  "term AND \$.priority>=2|--match '重试 AND \$.priority>=2'|-F 重试|(message_value LIKE '%重试%' OR observation LIKE '%重试%' OR prompt LIKE '%重试%') AND TRY_CAST(json_extract(extra, '\$.priority') AS INT) >= 2"
  "3-way OR|--match '超时 OR 数据库 OR 重试'|-e 超时 -e 数据库 -e 重试|message_value LIKE '%超时%' OR message_value LIKE '%数据库%' OR message_value LIKE '%重试%' OR observation LIKE '%超时%' OR observation LIKE '%数据库%' OR observation LIKE '%重试%' OR prompt LIKE '%超时%' OR prompt LIKE '%数据库%' OR prompt LIKE '%重试%'"
)

# Warm the page cache and every index once.
"$PC" find "$STORE" --match 超时 -q --format json > /dev/null
rg -l -F 超时 "$DIR" > /dev/null || true
sync

OUT=$(mktemp -d)
echo "Corpus: $STEPS_N steps in $RUNS ATIF files ($(awk -v b="$RAW_BYTES" 'BEGIN{printf "%.0f", b/1e6}') MB), mixed Chinese/English, tool output shaped like real terminal sessions (prompts, tracebacks, pytest and compiler output, ANSI colours, CRLF, tabs, printed JSON), seed 7."
echo
echo "## Import and index build"
echo
echo "| What | Value |"
echo "|---|---:|"
echo "| import wall time (files → store + index) | ${IMPORT_S} s |"
echo "| import throughput (raw JSON) | $(awk -v b="$RAW_BYTES" -v s="$IMPORT_S" 'BEGIN{printf "%.0f", b/1e6/s}') MB/s |"
echo "| import peak RSS | $(awk -v k="$IMPORT_RSS" 'BEGIN{printf "%.0f", k/1024}') MiB |"
echo "| index build (part of import) | ${INDEX_S} s |"
echo "| index build throughput (decoded step text, Jieba) | $(awk -v b="$TEXT_BYTES" -v s="$INDEX_S" 'BEGIN{printf "%.1f", b/1e6/s}') MB/s of $(awk -v b="$TEXT_BYTES" 'BEGIN{printf "%.0f", b/1e6}') MB |"
echo "| index size | $(awk -v b="$INDEX_BYTES" 'BEGIN{printf "%.0f", b/1e6}') MB ($(awk -v i="$INDEX_BYTES" -v t="$TEXT_BYTES" 'BEGIN{printf "%.2f", i/t}')× step text, $(awk -v i="$INDEX_BYTES" -v r="$RAW_BYTES" 'BEGIN{printf "%.2f", i/r}')× raw JSON) |"
echo "| store size including index | $(awk -v b="$STORE_BYTES" 'BEGIN{printf "%.0f", b/1e6}') MB |"
echo
echo "## find (warm index) vs rg and DuckDB"
echo
echo "| Query | pchronicle find | matches (total) | rg -l raw ATIF | DuckDB LIKE (Parquet) | vs rg | vs DuckDB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for q in "${QUERIES[@]}"; do
  IFS='|' read -r name fargs rargs where <<< "$q"
  err=$(eval "$PC find \"$STORE\" $fargs --format json" 2>&1 >/dev/null || true)
  total=$(grep -oE '[0-9]+ in total' <<< "$err" | grep -oE '^[0-9]+' || grep -oE '^[0-9]+ match' <<< "$err" | grep -oE '^[0-9]+')
  hyperfine --warmup 3 --runs 20 --export-json "$OUT/h.json" \
    -n find "$PC find $STORE $fargs -q --format json > /dev/null" >&2
  f=$(jq '.results[0].median' "$OUT/h.json")
  hyperfine --warmup 1 --runs 5 --export-json "$OUT/r.json" \
    -n rg "rg -l $rargs $DIR > /dev/null || true" >&2
  r=$(jq '.results[0].median' "$OUT/r.json")
  hyperfine --warmup 1 --runs 5 --export-json "$OUT/d.json" \
    -n duckdb "duckdb -c \"SELECT count(*) FROM '$PARQUET' WHERE $where\" > /dev/null" >&2
  d=$(jq '.results[0].median' "$OUT/d.json")
  awk -v n="$name" -v f="$f" -v r="$r" -v d="$d" -v t="$total" \
    'BEGIN{printf "| %s | %.1f ms | %s | %.0f ms | %.0f ms | %.0f× | %.0f× |\n", n, f*1000, t, r*1000, d*1000, r/f, d/f}'
done
echo
echo "find prints the first 100 matches in Source order and counts the rest; rg lists every matching file; DuckDB counts every matching step."
rm -rf "$OUT"
