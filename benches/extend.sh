#!/usr/bin/env bash
# The first read of captured traffic after an append, with the projection of
# the version before it in the cache: time and peak RSS of `query … count(*)
# FROM dataset.steps`, for one or more builds run alternately, next to the
# same read with an empty cache (the whole projection).
#
# The events store is written with pylance (installed by .ci/setup) in the
# Gateway's layout, as a Gateway serving ACTIVE agents at a time writes it:
# SESSIONS sessions of CALLS chat calls each, a request and a response event
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
"$VENV/bin/python" - "$WORK" "$SESSIONS" "$CALLS" "$ACTIVE" "$NEW" <<'PY'
import json, shutil, sys
import lance, pyarrow as pa
work, sessions, calls, active, new = sys.argv[1], *map(int, sys.argv[2:])
text = ["event_id", "run_id", "session_id", "agent_id", "call_id", "trace_id",
        "parent_call_id", "kind", "source", "producer", "model"]
fields = [pa.field("seq", pa.int64(), False), pa.field("timestamp_unix_ms", pa.int64(), False)]
fields += [pa.field(c, pa.string(), c not in ("kind", "source")) for c in text]
fields.append(pa.field("payload_json", pa.string(), False))
schema = pa.schema(fields)

def answer(c):
    return f"ran them: {c} passed\n\u001b[32mok\u001b[0m"

def events():
    seq, started, running = 0, 0, []
    while running or started < sessions:
        while len(running) < active and started < sessions:
            running.append([f"session-{started:05d}", 0])
            started += 1
        for s in list(running):
            sid, c = s
            history = []
            for k in range(c):
                history.append({"role": "user", "content": f"step {k}: run the tests in /app"})
                history.append({"role": "assistant", "content": answer(k)})
            history.append({"role": "user", "content": f"step {c}: run the tests in /app"})
            for kind in ("http.request", "http.response"):
                seq += 1
                if kind == "http.request":
                    payload = {"protocol": "chat.completions",
                               "http": {"request_body": {"model": "m", "messages": history}}}
                else:
                    payload = {"http": {"status": 200, "response_body": {"model": "m",
                               "choices": [{"message": {"role": "assistant", "content": answer(c)}}],
                               "usage": {"prompt_tokens": 40 * (c + 1), "completion_tokens": 9}}}}
                yield {"seq": seq, "event_id": f"e{seq}", "run_id": sid, "session_id": sid,
                       "call_id": f"{sid}-{c}", "kind": kind, "source": "gateway",
                       "producer": "bench", "model": "m",
                       "timestamp_unix_ms": 1700000000000 + seq, "payload": payload}
            s[1] += 1
            if s[1] == calls:
                running.remove(s)

def table(records):
    rows = {f.name: [] for f in fields}
    for r in records:
        for col in text:
            rows[col].append(r.get(col))
        rows["seq"].append(r["seq"])
        rows["timestamp_unix_ms"].append(r["timestamp_unix_ms"])
        rows["payload_json"].append(json.dumps(r))
    return pa.Table.from_pydict(rows, schema=schema)

records = list(events())
first, later = records[:-new], records[-new:]
lance.write_dataset(table(first), f"{work}/v1/events.lance", max_rows_per_file=1 << 20)
shutil.copytree(f"{work}/v1/events.lance", f"{work}/v2/events.lance")
lance.write_dataset(table(later), f"{work}/v2/events.lance", mode="append")
print(f"{len(first)} events, then {len(later)} more; {sessions} sessions, {active} at a time",
      file=sys.stderr)
PY
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
