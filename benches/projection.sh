#!/usr/bin/env bash
# The first read of a captured-traffic store with many sessions: time and
# peak RSS of `query … count(*) FROM dataset.steps` with an empty cache
# directory (so the events are projected and the projection written), for
# one or more builds run alternately. The events store is written with
# pylance (installed by .ci/setup) in the Gateway's layout: SESSIONS
# sessions of CALLS chat calls each, a request and a response event per
# call, every request carrying the conversation so far.
#
#   bash benches/projection.sh [SESSIONS] [CALLS] [RUNS] BIN [BIN...]
source "$(dirname "$0")/common.sh"
SESSIONS="${1:-2000}"; CALLS="${2:-25}"; RUNS="${3:-3}"; shift 3
VENV="${PCHRONICLE_VENV:-$HOME/.cache/pchronicle-venv}"
[ -x "$VENV/bin/python" ] || bash "$ROOT/.ci/setup" >&2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/ds"
"$VENV/bin/python" - "$WORK/ds/events.lance" "$SESSIONS" "$CALLS" <<'PY'
import json, sys
import lance, pyarrow as pa
path, sessions, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
text = ["event_id", "run_id", "session_id", "agent_id", "call_id", "trace_id",
        "parent_call_id", "kind", "source", "producer", "model"]
fields = [pa.field("seq", pa.int64(), False), pa.field("timestamp_unix_ms", pa.int64(), False)]
fields += [pa.field(c, pa.string(), c not in ("kind", "source")) for c in text]
fields.append(pa.field("payload_json", pa.string(), False))
schema = pa.schema(fields)
rows = {f.name: [] for f in fields}
seq = 0
for c in range(calls):
    for s in range(sessions):
        sid = f"session-{s:05d}"
        history = []
        for k in range(c):
            history.append({"role": "user", "content": f"step {k}: run the tests in /app"})
            history.append({"role": "assistant", "content": f"ran them: {k} passed\n\u001b[32mok\u001b[0m"})
        history.append({"role": "user", "content": f"step {c}: run the tests in /app"})
        for kind in ("http.request", "http.response"):
            seq += 1
            if kind == "http.request":
                payload = {"protocol": "chat.completions",
                           "http": {"request_body": {"model": "m", "messages": history}}}
            else:
                payload = {"http": {"status": 200, "response_body": {"model": "m",
                           "choices": [{"message": {"role": "assistant", "content": f"ran them: {c} passed\n\u001b[32mok\u001b[0m"}}],
                           "usage": {"prompt_tokens": 40 * (c + 1), "completion_tokens": 9}}}}
            record = {"seq": seq, "event_id": f"e{seq}", "run_id": sid, "session_id": sid,
                      "call_id": f"{sid}-{c}", "kind": kind, "source": "gateway",
                      "producer": "bench", "model": "m", "timestamp_unix_ms": 1700000000000 + seq,
                      "payload": payload}
            for col in text:
                rows[col].append(record.get(col))
            rows["seq"].append(seq)
            rows["timestamp_unix_ms"].append(record["timestamp_unix_ms"])
            rows["payload_json"].append(json.dumps(record))
table = pa.Table.from_pydict(rows, schema=schema)
lance.write_dataset(table, path, max_rows_per_file=1 << 20)
print(f"{table.num_rows} events, {sessions} sessions", file=sys.stderr)
PY
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
