#!/usr/bin/env bash
# The first read of captured traffic after an append, with the projection of
# the version before it in the cache: time and peak RSS of `query … count(*)
# FROM dataset.steps`, for one or more builds run alternately, next to the
# same read with an empty cache (the whole projection).
#
# The events store is written by captured_events.py (pylance, installed by
# .ci/setup) in the Gateway's layout, as a Gateway serving ACTIVE agents at
# a time writes it: SESSIONS sessions of CALLS chat calls each, a request and a response event
# per call, every request carrying the conversation so far; ACTIVE sessions
# run at once, their calls interleaved, and a new one starts when one ends.
# The first version holds all but the last NEW events; the second appends
# those.
#
#   bash benches/extend.sh [SESSIONS] [CALLS] [ACTIVE] [NEW] [RUNS] BIN [BIN...]
source "$(dirname "$0")/common.sh"
SESSIONS="${1:-4000}"; CALLS="${2:-25}"; ACTIVE="${3:-20}"; NEW="${4:-10000}"; RUNS="${5:-3}"
shift 5
VENV="${PCHRONICLE_VENV:-$HOME/.cache/pchronicle-venv}"
[ -x "$VENV/bin/python" ] || bash "$ROOT/.ci/setup" >&2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/v1" "$WORK/v2"
"$VENV/bin/python" "$ROOT/benches/captured_events.py" "$SESSIONS" "$CALLS" "$ACTIVE" "$NEW" \
  "$WORK/v1/events.lance" "$WORK/v2/events.lance"
# One read of the second version: with the first version's projection in
# the cache (`after`), then with an empty cache (`whole`). Seconds and peak
# RSS (KiB) of each.
read_after_append() {
  local bin="$1" cache="$WORK/cache" line=""
  for mode in after whole; do
    rm -rf "$cache" "$WORK/ds"
    mkdir -p "$cache"
    if [ "$mode" = after ]; then
      cp -r "$WORK/v1" "$WORK/ds"
      PCHRONICLE_CACHE_DIR="$cache" "$bin" query "$WORK/ds" "SELECT count(*) FROM dataset.steps" -q > /dev/null
      rm -rf "$WORK/ds"
    fi
    cp -r "$WORK/v2" "$WORK/ds"
    PCHRONICLE_CACHE_DIR="$cache" /usr/bin/time -f "%e %M" -o "$WORK/t" \
      "$bin" query "$WORK/ds" "SELECT count(*) FROM dataset.steps" -q > /dev/null
    line="$line $(cat "$WORK/t")"
  done
  echo "$line"
}
alternate "$RUNS" "$WORK" read_after_append "$@"
echo "| Build | first read after the append | peak RSS | whole projection | peak RSS |"
echo "|---|---:|---:|---:|---:|"
for bin in "$@"; do
  f=$(runs_of "$WORK" "$bin")
  med() { median_of "$f" "$1"; }
  echo "| \`$bin\` | $(med 1) s | $(( $(med 2) / 1024 )) MiB | $(med 3) s | $(( $(med 4) / 1024 )) MiB |"
done
