"""Read a pChronicle Storyline store with the `pylance` package.

usage: lance_read.py STORE_DIR
Prints JSON: for each table, the pinned version, the row count and the
sorted (document_id, step or call position) keys, read at the versions the
store's CURRENT pointer names.
"""
import json
import os
import sys

import lance

root = sys.argv[1]
with open(os.path.join(root, "CURRENT")) as f:
    committed = json.load(f)["committed"]
gen = os.path.join(root, "generations", committed["table_generation"])
out = {}
for name, key_cols in [
    ("runs", ["document_id"]),
    ("steps", ["document_id", "turn_ordinal"]),
    ("tool_calls", ["document_id", "turn_ordinal", "call_index"]),
]:
    version = committed[f"{name}_version"]
    ds = lance.dataset(os.path.join(gen, f"{name}.lance"), version=version)
    table = ds.to_table(columns=key_cols)
    keys = sorted(zip(*[table.column(c).to_pylist() for c in key_cols]))
    out[name] = {"version": ds.version, "rows": ds.count_rows(), "keys": keys}
json.dump(out, sys.stdout)
