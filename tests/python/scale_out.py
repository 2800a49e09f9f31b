"""Read a pChronicle store from Python, as docs/scale-out.md describes.

usage: scale_out.py STORE [STORAGE_OPTIONS_JSON]

STORE is a store directory or an s3:// URI of one. Prints JSON: the pinned
versions, the answers of a few questions asked with DuckDB over the Lance
tables, and for every step the length and SHA-256 of
its `observation` once large cells are resolved, so a test can compare all
of it with `pchronicle query` on the same store.
"""

import hashlib
import json
import sys

import duckdb
import lance
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

# A cell of 64 KiB or more is stored once in `objects.lance` and replaced in
# its row by "\x1epco1:<content_id>:<length>".
DESCRIPTOR = "\x1epco1:"


def read_current(store, storage_options=None):
    """The `committed` snapshot of the store's CURRENT pointer."""
    fs, path = pafs.FileSystem.from_uri(store.rstrip("/") + "/CURRENT")
    if storage_options and isinstance(fs, pafs.S3FileSystem):
        fs = pafs.S3FileSystem(
            endpoint_override=storage_options.get("aws_endpoint"),
            access_key=storage_options.get("aws_access_key_id"),
            secret_key=storage_options.get("aws_secret_access_key"),
            region=storage_options.get("aws_region", "us-east-1"),
            scheme="http" if storage_options.get("allow_http") == "true" else "https",
        )
    with fs.open_input_stream(path) as f:
        return json.loads(f.read())["committed"]


def open_store(store, storage_options=None):
    """The store's tables at the versions CURRENT pins: a dict of
    `lance.LanceDataset` for runs, steps, tool_calls and objects."""
    committed = read_current(store, storage_options)
    base = store.rstrip("/")
    gen = f"{base}/generations/{committed['table_generation']}"
    tables = {
        name: lance.dataset(
            f"{gen}/{name}.lance",
            version=committed[f"{name}_version"],
            storage_options=storage_options,
        )
        for name in ("runs", "steps", "tool_calls")
    }
    if "objects_version" in committed:
        tables["objects"] = lance.dataset(
            f"{base}/objects.lance",
            version=committed["objects_version"],
            storage_options=storage_options,
        )
    return tables


def resolve(column, objects):
    """A string column with its large-cell descriptors replaced by the text
    they stand for (read from the objects table)."""
    values = column.to_pylist()
    wanted = {v.split(":")[1] for v in values if v and v.startswith(DESCRIPTOR)}
    if not wanted:
        return column
    found = objects.to_table(
        columns=["content_id", "payload"],
        filter=pc.field("content_id").isin(list(wanted)),
    )
    text = {
        cid: bytes(payload).decode("utf-8")
        for cid, payload in zip(
            found.column("content_id").to_pylist(), found.column("payload").to_pylist()
        )
    }
    return pa.array(
        [text[v.split(":")[1]] if v and v.startswith(DESCRIPTOR) else v for v in values],
        type=pa.string(),
    )


def main():
    store = sys.argv[1]
    options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    t = open_store(store, options)
    # DuckDB scans the Lance datasets in place (Python variables by name).
    runs, steps, tool_calls = t["runs"], t["steps"], t["tool_calls"]
    out = {
        "versions": {name: ds.version for name, ds in t.items()},
        "steps_by_role": duckdb.sql(
            "SELECT step_source, count(*) FROM steps GROUP BY 1 ORDER BY 1"
        ).fetchall(),
        "prompt_tokens_by_model": duckdb.sql(
            "SELECT model_name, sum(prompt_tokens) FROM steps "
            "WHERE model_name IS NOT NULL GROUP BY 1 ORDER BY 1"
        ).fetchall(),
        "documents_by_agent": duckdb.sql(
            "SELECT agent_name, count(*) FROM runs GROUP BY 1 ORDER BY 1"
        ).fetchall(),
        "calls_by_function": duckdb.sql(
            "SELECT function_name, count(*) FROM tool_calls GROUP BY 1 ORDER BY 1"
        ).fetchall(),
    }
    table = steps.to_table(columns=["document_id", "turn_ordinal", "observation"])
    observation = resolve(table.column("observation"), t.get("objects"))
    out["observations"] = sorted(
        [
            d,
            o,
            None if v is None else len(v.encode("utf-8")),
            None if v is None else hashlib.sha256(v.encode("utf-8")).hexdigest(),
        ]
        for d, o, v in zip(
            table.column("document_id").to_pylist(),
            table.column("turn_ordinal").to_pylist(),
            observation.to_pylist(),
        )
    )
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
