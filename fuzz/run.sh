#!/usr/bin/env bash
# Run every fuzz target for SECONDS (default 600) each, FUZZ_JOBS (default 2)
# at a time, then minimise each corpus in place. Corpora grow in corpus/TARGET/
# (not kept in git), started from the hand-kept seeds/TARGET/. A crash, a hang (an input
# over 10 s) or an out-of-memory input stops its target and is written to
# artifacts/TARGET/; minimise it with `cargo +nightly fuzz tmin` and keep it
# under regressions/TARGET/, where `cargo test --test it fuzz_corpus::` runs it.
#
#   bash fuzz/run.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")"
SECS=${1:-600}
shift || true
JOBS=${FUZZ_JOBS:-2}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/pchronicle-fuzz-target}
FLAGS=(-O -a -s none --codegen-units 16)
cargo +nightly fuzz build "${FLAGS[@]}" || exit 1
if [ $# -gt 0 ]; then targets=("$@"); else mapfile -t targets < <(cargo +nightly fuzz list); fi
mkdir -p logs
run_one() {
  local t=$1
  mkdir -p "corpus/$t"
  cp -n "seeds/$t/"* "corpus/$t/" 2>/dev/null || true
  cargo +nightly fuzz run "${FLAGS[@]}" "$t" "corpus/$t" -- \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    > "logs/$t.log" 2>&1
  local rc=$?
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -1)
  echo "$t: exit $rc, ${execs:-?} runs in ${SECS} s"
}
export -f run_one
export SECS
export FLAGS_STR="${FLAGS[*]}"
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'FLAGS=($FLAGS_STR); run_one "$@"' _ {}
for t in "${targets[@]}"; do
  before=$(find "corpus/$t" -type f | wc -l)
  cargo +nightly fuzz cmin "${FLAGS[@]}" "$t" "corpus/$t" > "logs/$t.cmin.log" 2>&1
  echo "$t: corpus $before -> $(find "corpus/$t" -type f | wc -l) inputs after cmin"
done
ls artifacts 2>/dev/null | while read -r t; do
  ls "artifacts/$t" | sed "s|^|artifact: $t/|"
done
