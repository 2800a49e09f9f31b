"""Events stores in the Gateway's layout, written with pylance, for the
benchmarks of reading captured traffic back (projection.sh, extend.sh).

SESSIONS sessions of CALLS chat calls each, a request and a response event
per call, every request carrying the conversation so far and every answer
a line of coloured terminal output. ACTIVE sessions run at once, their calls
interleaved; a new one starts when one ends (ACTIVE = SESSIONS interleaves
them all). FIRST gets all events but the last NEW; SECOND, when given, is a
copy of FIRST with those NEW events appended as a second version.

    python captured_events.py SESSIONS CALLS ACTIVE NEW FIRST [SECOND]

With CAPTURE_BATCH_ROWS=N in the environment the records reach the writer
in batches of at most N rows, as the Gateway's appends do (at most 20,000
events each): Lance writes a page per batch of a long column at most, so
the records are then in pages of a few MB instead of one page of them all.
"""
import json
import os
import shutil
import sys

import lance
import pyarrow as pa

TEXT = ["event_id", "run_id", "session_id", "agent_id", "call_id", "trace_id",
        "parent_call_id", "kind", "source", "producer", "model"]
FIELDS = [pa.field("seq", pa.int64(), False), pa.field("timestamp_unix_ms", pa.int64(), False)]
FIELDS += [pa.field(c, pa.string(), c not in ("kind", "source")) for c in TEXT]
FIELDS.append(pa.field("payload_json", pa.string(), False))
SCHEMA = pa.schema(FIELDS)


def answer(c):
    return f"ran them: {c} passed\n\u001b[32mok\u001b[0m"


def events(sessions, calls, active):
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
    rows = {f.name: [] for f in FIELDS}
    for r in records:
        for col in TEXT:
            rows[col].append(r.get(col))
        rows["seq"].append(r["seq"])
        rows["timestamp_unix_ms"].append(r["timestamp_unix_ms"])
        rows["payload_json"].append(json.dumps(r))
    return pa.Table.from_pydict(rows, schema=SCHEMA)


def batched(t):
    rows = int(os.environ.get("CAPTURE_BATCH_ROWS", "0"))
    if rows <= 0:
        return t
    return pa.RecordBatchReader.from_batches(SCHEMA, t.to_batches(max_chunksize=rows))


def main():
    sessions, calls, active, new = map(int, sys.argv[1:5])
    first_path = sys.argv[5]
    second_path = sys.argv[6] if len(sys.argv) > 6 else None
    records = list(events(sessions, calls, active))
    cut = len(records) - new
    lance.write_dataset(batched(table(records[:cut])), first_path, max_rows_per_file=1 << 20)
    if second_path:
        shutil.copytree(first_path, second_path)
        lance.write_dataset(batched(table(records[cut:])), second_path, mode="append")
    print(f"{cut} events, then {new} more; {sessions} sessions, {active} at a time",
          file=sys.stderr)


main()
