#!/usr/bin/env python3
"""DuckDB oracle for the SQL differential suite.

Usage: python3 oracle.py DATA_DIR QUERIES_JSON OUT_JSON

DATA_DIR holds, for each relation, `<relation>.jsonl` (one JSON object per
row) and `<relation>.schema.json` (a list of [column_name, sql_type], with
sql_type one of TEXT, JSON, BIGINT, DOUBLE, BOOLEAN, TIMESTAMP).
QUERIES_JSON is a list of {"label": ..., "sql": ...}.
OUT_JSON receives {label: {"rows": [[...], ...]}} or {label: {"error": "..."}}.

Each relation becomes the table `dataset.<relation>` with exactly the given
columns and types; the session time zone is UTC and the search path is
`dataset`, so unqualified names resolve as in pChronicle. Result values are
converted to JSON: timestamps as RFC 3339 UTC with `Z` (fractional seconds
only when non-zero, microsecond precision, trailing zeros trimmed), JSON
values as their text, DECIMAL as float (DuckDB types `1.5` as DECIMAL where
pChronicle has DOUBLE), HUGEINT as int, non-finite floats as strings.
"""

import datetime as _dt
import decimal
import json
import math
import os
import re
import sys
import tempfile
import uuid

import duckdb

DUCK_TYPES = {
    "TEXT": "VARCHAR",
    "JSON": "JSON",
    "BIGINT": "BIGINT",
    "DOUBLE": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    "TIMESTAMP": "TIMESTAMPTZ",
}

# How a column is staged in the temporary JSONL that DuckDB reads: JSON and
# TIMESTAMP columns travel as text and are cast when the table is filled.
STAGE_TYPES = {
    "TEXT": "VARCHAR",
    "JSON": "VARCHAR",
    "BIGINT": "BIGINT",
    "DOUBLE": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    "TIMESTAMP": "VARCHAR",
}

_TS_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(Z|z|[+-]\d{2}(?::?\d{2})?)?$"
)


def qident(name):
    return '"' + name.replace('"', '""') + '"'


def norm_timestamp(v):
    """RFC 3339 text -> 'YYYY-MM-DD HH:MM:SS.ffffff+00' (UTC, microseconds,
    extra digits truncated) for DuckDB to cast."""
    if v is None:
        return None
    if not isinstance(v, str):
        raise ValueError("timestamp value is not a string: %r" % (v,))
    m = _TS_RE.match(v.strip())
    if not m:
        raise ValueError("not an RFC 3339 timestamp: %r" % (v,))
    y, mo, d, h, mi, s, frac, tz = m.groups()
    micros = int((frac or "0")[:6].ljust(6, "0"))
    t = _dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), micros)
    if tz and tz not in ("Z", "z"):
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        off = _dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
        t = t - sign * off
    return t.strftime("%Y-%m-%d %H:%M:%S.%f") + "+00"


def stage_value(v, ty):
    if v is None:
        return None
    if ty == "JSON":
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    if ty == "TIMESTAMP":
        return norm_timestamp(v)
    if ty == "DOUBLE" and isinstance(v, str):
        # Non-finite floats may be exported as strings.
        return float(v)
    return v


def load_relation(con, data_dir, relation, tmp_dir):
    with open(os.path.join(data_dir, relation + ".schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    cols = [(str(name), str(ty).upper()) for name, ty in schema]
    for _, ty in cols:
        if ty not in DUCK_TYPES:
            raise ValueError("%s: unknown column type %s" % (relation, ty))
    table = "dataset." + qident(relation)
    con.execute(
        "CREATE TABLE %s (%s)" % (table, ", ".join("%s %s" % (qident(n), DUCK_TYPES[t]) for n, t in cols))
    )
    staged = os.path.join(tmp_dir, relation + ".staged.jsonl")
    rows = 0
    data = os.path.join(data_dir, relation + ".jsonl")
    if not os.path.exists(data):
        return
    with open(data, encoding="utf-8") as src, open(staged, "w", encoding="utf-8") as dst:
        for line in src:
            if not line.strip():
                continue
            obj = json.loads(line)
            out = {n: stage_value(obj.get(n), t) for n, t in cols}
            dst.write(json.dumps(out, ensure_ascii=False, allow_nan=True))
            dst.write("\n")
            rows += 1
    if rows == 0:
        return
    spec = "{" + ", ".join("%s: '%s'" % (sql_string(n), STAGE_TYPES[t]) for n, t in cols) + "}"
    select = ", ".join(
        "CAST(%s AS %s)" % (qident(n), DUCK_TYPES[t]) if t in ("JSON", "TIMESTAMP") else qident(n) for n, t in cols
    )
    con.execute(
        "INSERT INTO %s SELECT %s FROM read_json(%s, format = 'newline_delimited', columns = %s, "
        "maximum_object_size = 1073741824)" % (table, select, sql_string(staged), spec)
    )


def sql_string(s):
    return "'" + s.replace("'", "''") + "'"


def ts_text(t):
    """A datetime as RFC 3339 UTC with Z; naive values are taken as UTC."""
    if t.tzinfo is not None:
        t = t.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        s += ("." + "%06d" % t.microsecond).rstrip("0")
    return s + "Z"


def nonfinite(f):
    """Spelled as pChronicle prints them: inf, -inf, NaN."""
    return "NaN" if math.isnan(f) else ("inf" if f > 0 else "-inf")


def to_json(v):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else nonfinite(v)
    if isinstance(v, decimal.Decimal):
        if not v.is_finite():
            return nonfinite(float(v))
        # pChronicle has no DECIMAL: its decimal literals are DOUBLE.
        return float(v)
    if isinstance(v, _dt.datetime):
        return ts_text(v)
    if isinstance(v, _dt.date):
        return ts_text(_dt.datetime(v.year, v.month, v.day))
    if isinstance(v, (_dt.time, _dt.timedelta, uuid.UUID)):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return json.dumps([to_json(x) for x in v], ensure_ascii=False, separators=(",", ":"))
    if isinstance(v, dict):
        return json.dumps({str(k): to_json(x) for k, x in v.items()}, ensure_ascii=False, separators=(",", ":"))
    return str(v)


def run_query(con, sql):
    """Run `sql` and fetch its rows. TIMESTAMPTZ columns are cast to plain
    TIMESTAMP (UTC wall time, as the session zone is UTC) by wrapping the
    query, since fetching zoned values would need pytz."""
    cur = con.execute(sql)
    desc = cur.description or []
    zoned = {i for i, d in enumerate(desc) if str(d[1]).upper().startswith("TIMESTAMP WITH TIME ZONE")}
    if not zoned:
        return cur.fetchall()
    names = ["c%d" % i for i in range(len(desc))]
    select = ", ".join(("CAST(%s AS TIMESTAMP)" if i in zoned else "%s") % n for i, n in enumerate(names))
    body = sql.strip().rstrip(";")
    wrapped = "SELECT %s FROM (\n%s\n) AS pchronicle_q(%s)" % (select, body, ", ".join(names))
    return con.execute(wrapped).fetchall()


def main(argv):
    if len(argv) != 4:
        sys.stderr.write("usage: oracle.py DATA_DIR QUERIES_JSON OUT_JSON\n")
        return 2
    data_dir, queries_path, out_path = argv[1:]
    with open(queries_path, encoding="utf-8") as f:
        queries = json.load(f)
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE SCHEMA dataset")
    relations = sorted(n[: -len(".schema.json")] for n in os.listdir(data_dir) if n.endswith(".schema.json"))
    with tempfile.TemporaryDirectory(prefix="pchronicle-oracle-") as tmp:
        for rel in relations:
            load_relation(con, data_dir, rel, tmp)
    con.execute("SET search_path = 'dataset'")
    results = {}
    for q in queries:
        label, sql = q["label"], q["sql"]
        try:
            rows = run_query(con, sql)
            results[label] = {"rows": [[to_json(v) for v in row] for row in rows]}
        except Exception as e:  # noqa: BLE001 - any DuckDB failure is a result
            results[label] = {"error": "%s: %s" % (type(e).__name__, e)}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
