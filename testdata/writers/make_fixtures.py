"""Writes the pyarrow/pandas fixtures of testdata/data/{pyarrow_empty,pyarrow_empty_only,pandas_empty,float_nan_stats}.

    python testdata/writers/make_fixtures.py   # pyarrow 26, pandas 3

pyarrow writes a zero-row file as one row group of zero rows whose boolean
chunk has offset 0 and length 0 (there is no dictionary page to point at);
dqgate used to refuse that as a chunk "outside the file's data".
"""

import datetime
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

root = os.path.join(os.path.dirname(__file__), "..", "data")
table = pa.table(
    {
        "order_id": pa.array([1, 2, 2], pa.int64()),
        "flag": pa.array([True, False, None]),
        "s": pa.array(["a", "b", None]),
        "d": pa.array([datetime.date(2025, 3, 5)] * 3),
        "x": pa.array([1.5, 2.5, None]),
    }
)
for name in ("pyarrow_empty", "pyarrow_empty_only", "pandas_empty"):
    os.makedirs(os.path.join(root, name), exist_ok=True)
pq.write_table(table, os.path.join(root, "pyarrow_empty", "part-0.parquet"))
pq.write_table(table.slice(0, 0), os.path.join(root, "pyarrow_empty", "part-1.parquet"))
pq.write_table(table.slice(0, 0), os.path.join(root, "pyarrow_empty_only", "part-0.parquet"))
pd.DataFrame(
    {
        "order_id": pd.Series([], dtype="int64"),
        "flag": pd.Series([], dtype="bool"),
        "x": pd.Series([], dtype="float64"),
    }
).to_parquet(os.path.join(root, "pandas_empty", "part-0.parquet"))

# A float column holding one value and NaN: writers leave NaN out of the
# min/max statistics (here min = max = 4.25, no nulls), which DataFusion 55
# took for a constant column (testdata/cases/writer_float_nan_stats).
os.makedirs(os.path.join(root, "float_nan_stats"), exist_ok=True)
pq.write_table(
    pa.table({"f": pa.array([4.25, float("nan"), float("nan")]), "i": pa.array([1, 2, 3])}),
    os.path.join(root, "float_nan_stats", "part-0.parquet"),
)
