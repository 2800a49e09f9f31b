#!/usr/bin/env bash
# SQL benchmarks (issue 4): six query shapes over ~1,000,000 generated steps,
# `pchronicle query` on the Storyline Lance store against the DuckDB CLI on
# the same rows in Parquet, side by side in one run. End-to-end CLI time
# (median of hyperfine runs) and peak RSS. Writes Markdown to stdout.
#
#   bash benches/sql.sh [RUNS] [STEPS]      (default 10000 100)
source "$(dirname "$0")/common.sh"
RUNS="${1:-10000}"
STEPS="${2:-100}"
ensure_tools
build_release
DIR=$(corpus "atif-${RUNS}x${STEPS}" --runs "$RUNS" --steps "$STEPS" --seed 7)
WORK="$CORPUS_ROOT/sql-${RUNS}x${STEPS}-g$CORPUS_VERSION"
STORE="$CORPUS_ROOT/find-${RUNS}x${STEPS}-g$CORPUS_VERSION/store"
mkdir -p "$WORK"
# A store imported by another binary is imported again: the benchmark measures
# the store this build writes, and a build may change how columns are laid out
# without changing the layout number (the text views' mini-blocks did).
BUILT_BY="$(sha256sum "$PC" | cut -d' ' -f1)"
if [ ! -f "$STORE/CURRENT" ] || [ "$(cat "$STORE.imported-by" 2>/dev/null)" != "$BUILT_BY" ]; then
  rm -rf "$STORE"
  mkdir -p "$(dirname "$STORE")"
  "$PC" import --from "$DIR" --output "$STORE" -q > /dev/null
  echo "$BUILT_BY" > "$STORE.imported-by"
fi

# The same rows as Parquet, exported through our own engine.
export_parquet() { # NAME SQL DUCKDB-COLUMN-TYPES
  local name="$1" sql="$2" types="$3"
  if [ ! -f "$WORK/$name.parquet" ]; then
    "$PC" query "$STORE" "$sql" --format jsonl -q --max-rows 100000000 --max-output-bytes 100000000000 > "$WORK/$name.jsonl"
    duckdb -c "COPY (SELECT * FROM read_json('$WORK/$name.jsonl', format='newline_delimited', maximum_object_size=268435456, columns={$types})) TO '$WORK/$name.parquet' (FORMAT parquet)"
    rm -f "$WORK/$name.jsonl"
  fi
}
# (metrics and observation_text as text, as DuckDB keeps JSON in Parquet.)
export_parquet steps-v2 "SELECT source_path, document_id, run_id, session_id, step_id, step_source, model_name, prompt_tokens, completion_tokens, cost_usd, extra, CAST(metrics AS TEXT) AS metrics, observation_text FROM steps" \
  "source_path: 'VARCHAR', document_id: 'VARCHAR', run_id: 'VARCHAR', session_id: 'VARCHAR', step_id: 'BIGINT', step_source: 'VARCHAR', model_name: 'VARCHAR', prompt_tokens: 'BIGINT', completion_tokens: 'BIGINT', cost_usd: 'DOUBLE', extra: 'VARCHAR', metrics: 'VARCHAR', observation_text: 'VARCHAR'"
# One row per trajectory document (`runs` has one row per Run).
export_parquet runs "SELECT source_path, document_id, run_id, session_id, agent_name, agent_version, agent_model_name FROM trajectories" \
  "source_path: 'VARCHAR', document_id: 'VARCHAR', run_id: 'VARCHAR', session_id: 'VARCHAR', agent_name: 'VARCHAR', agent_version: 'VARCHAR', agent_model_name: 'VARCHAR'"
STEPS_N=$(duckdb -noheader -list -c "SELECT count(*) FROM '$WORK/steps-v2.parquet'")
P_STEPS="'$WORK/steps-v2.parquet'"
P_RUNS="'$WORK/runs.parquet'"

# name | SQL with {steps} and {runs} placeholders ({runs}: one row per
# trajectory document, our `trajectories`)
QUERIES=(
  "(a) steps by agent|SELECT r.agent_name, count(*) AS steps FROM {steps} s JOIN {runs} r ON s.source_path = r.source_path AND s.document_id = r.document_id GROUP BY r.agent_name ORDER BY steps DESC"
  "(b) tokens and cost by model|SELECT model_name, sum(prompt_tokens) AS p, sum(completion_tokens) AS c, sum(cost_usd) AS usd FROM {steps} GROUP BY model_name ORDER BY usd DESC"
  "(c) filter + ORDER BY + LIMIT 20|SELECT source_path, step_id, cost_usd FROM {steps} WHERE step_source = 'agent' AND model_name LIKE 'claude%' ORDER BY cost_usd DESC, source_path, step_id LIMIT 20"
  "(d) runs ⋈ steps, filter on runs|SELECT count(*) AS steps, sum(s.completion_tokens) AS c FROM {runs} r JOIN {steps} s ON s.source_path = r.source_path AND s.document_id = r.document_id WHERE r.agent_name = 'openhands'"
  "(e) JSON path filter on extra|SELECT count(*) FROM {steps} WHERE CAST(extra ->> 'priority' AS BIGINT) >= 2"
  "(f) COUNT(DISTINCT session_id)|SELECT count(DISTINCT session_id) FROM {steps}"
  "(g) JSON path in metrics, by model|SELECT model_name, sum(CAST(json_extract_string(metrics, '\$.prompt_tokens') AS BIGINT)) AS p FROM {steps} GROUP BY model_name ORDER BY p DESC"
  "(h) top 10 sessions by steps|SELECT session_id, count(*) AS n FROM {steps} GROUP BY session_id ORDER BY n DESC, session_id LIMIT 10"
  "(i) LIKE '%超时%' in tool output|SELECT count(*) FROM {steps} WHERE observation_text LIKE '%超时%'"
)

sync
OUT=$(mktemp -d)
echo "Corpus: $STEPS_N steps in $RUNS trajectories (generated, seed 7). pchronicle reads the Storyline Lance store; DuckDB $(duckdb --version | cut -d' ' -f1) reads the same rows as Parquet. End-to-end CLI time, median of 10 runs after 2 warm-ups."
echo
echo "| Query | pchronicle | DuckDB | ratio | pchronicle RSS | DuckDB RSS | rows agree |"
echo "|---|---:|---:|---:|---:|---:|:---:|"
for q in "${QUERIES[@]}"; do
  IFS='|' read -r name sql <<< "$q"
  ours="${sql//\{steps\}/steps}"; ours="${ours//\{runs\}/trajectories}"
  theirs="${sql//\{steps\}/$P_STEPS}"; theirs="${theirs//\{runs\}/$P_RUNS}"
  versus_duckdb "$OUT" "$name" "$STORE" "$ours" "$theirs" 2 10 ms
done
echo
echo "ratio = pchronicle time / DuckDB time (below 1 means pchronicle is faster)."
rm -rf "$OUT"
