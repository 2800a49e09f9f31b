#!/usr/bin/env bash
# The first read of a captured-traffic store with many sessions: time and
# peak RSS of `query … count(*) FROM dataset.steps` with an empty cache
# directory (so the events are projected and the projection written), for
# one or more builds run alternately. The events store is written by
# captured_events.py (pylance, installed by .ci/setup) in the Gateway's
# layout: SESSIONS sessions of CALLS chat calls each, all interleaved, a
# request and a response event per call, every request carrying the
# conversation so far.
#
#   bash benches/projection.sh [SESSIONS] [CALLS] [RUNS] BIN [BIN...]
source "$(dirname "$0")/common.sh"
SESSIONS="${1:-2000}"; CALLS="${2:-25}"; RUNS="${3:-3}"; shift 3
VENV="${PCHRONICLE_VENV:-$HOME/.cache/pchronicle-venv}"
[ -x "$VENV/bin/python" ] || bash "$ROOT/.ci/setup" >&2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/ds"
"$VENV/bin/python" "$ROOT/benches/captured_events.py" "$SESSIONS" "$CALLS" "$SESSIONS" 0 \
  "$WORK/ds/events.lance"
# One first read with an empty cache: seconds and peak RSS (KiB).
first_read() {
  local cache
  cache=$(mktemp -d)
  PCHRONICLE_CACHE_DIR="$cache" /usr/bin/time -f "%e %M" -o "$WORK/t" \
    "$1" query "$WORK/ds" "SELECT count(*) FROM dataset.steps" -q > /dev/null
  cat "$WORK/t"
  rm -rf "$cache"
}
alternate "$RUNS" "$WORK" first_read "$@"
echo "| Build | first read | peak RSS |"
echo "|---|---:|---:|"
for bin in "$@"; do
  f=$(runs_of "$WORK" "$bin")
  med() { median_of "$f" "$1"; }
  echo "| \`$bin\` | $(med 1) s | $(( $(med 2) / 1024 )) MiB |"
done
