#!/usr/bin/env bash
# Queries in place over raw ATIF files (issue 20), side by side in one run:
# `pchronicle query DIR` on the generated files, with no import, against the
# DuckDB CLI's `read_json` over the same files. Both read every file on every
# run; the page cache is warm. Writes Markdown to stdout.
#
#   bash benches/raw.sh [RUNS] [STEPS] [REPEATS]   (default 10000 100 3)
source "$(dirname "$0")/common.sh"
RUNS="${1:-10000}"
STEPS="${2:-100}"
REPEATS="${3:-3}"
ensure_tools
build_release
# The corpus of benches/sql.sh.
DIR=$(corpus "atif-${RUNS}x${STEPS}" --runs "$RUNS" --steps "$STEPS" --seed 7)
RAW_BYTES=$(find "$DIR" -name '*.json' -printf '%s\n' | awk '{s+=$1} END {print s}')
find "$DIR" -name '*.json' -print0 | xargs -0 cat > /dev/null
READ="read_json('$DIR/**/*.json', format='auto', maximum_object_size=268435456, union_by_name=true)"

# name | pchronicle SQL | DuckDB SQL. Subagents are documents of their own in
# pChronicle (`parent_document_id` set) and nested in their parent's file in
# ATIF, so both sides count the top-level trajectories and their steps.
QUERIES=(
  "runs by agent|SELECT agent_name, count(*) AS n FROM trajectories WHERE parent_document_id IS NULL GROUP BY agent_name ORDER BY n DESC, agent_name|SELECT agent.name AS agent_name, count(*) AS n FROM $READ GROUP BY 1 ORDER BY 2 DESC, 1"
  "top-level steps by source|SELECT s.step_source, count(*) AS n FROM steps s JOIN trajectories t ON s.source_path = t.source_path AND s.document_id = t.document_id WHERE t.parent_document_id IS NULL GROUP BY s.step_source ORDER BY n DESC, s.step_source|SELECT s.source AS step_source, count(*) AS n FROM (SELECT unnest(steps) AS s FROM $READ) GROUP BY 1 ORDER BY 2 DESC, 1"
)

OUT=$(mktemp -d)
echo "Corpus: $RUNS ATIF files, $(awk -v b="$RAW_BYTES" 'BEGIN{printf "%.0f", b/1e6}') MB, $STEPS steps each (generated, seed 7); warm page cache; $(nproc) cores. pchronicle queries the directory; DuckDB $(duckdb --version | cut -d' ' -f1) runs read_json with union_by_name over the same files. Whole processes, median of $REPEATS runs after a warm-up."
echo
echo "| Query | pchronicle | DuckDB | ratio | pchronicle RSS | DuckDB RSS | rows agree |"
echo "|---|---:|---:|---:|---:|---:|:---:|"
for q in "${QUERIES[@]}"; do
  IFS='|' read -r name ours theirs <<< "$q"
  versus_duckdb "$OUT" "$name" "$DIR" "$ours" "$theirs" 1 "$REPEATS" s
done
echo
echo "ratio = pchronicle time / DuckDB time (the goal is at most 0.8×)."
rm -rf "$OUT"
