"""Normalise CSV rows for comparison: round floats, sort rows."""
import csv
import sys

rows = []
for row in csv.reader(sys.stdin):
    out = []
    for cell in row:
        if cell == "NULL":  # DuckDB's CSV spelling of NULL; ours is empty
            cell = ""
        try:
            f = float(cell)
            out.append(f"{f:.6g}")
        except ValueError:
            out.append(cell)
    rows.append(",".join(out))
for r in sorted(rows):
    print(r)
