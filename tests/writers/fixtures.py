"""Writes testdata/data/writers/: small files from real writers that the Rust
integration tests (tests/it/producers.rs) read. Run once by hand when they
must change, from the repository root, in a venv with pandas, fastparquet and
duckdb:

    python tests/writers/fixtures.py testdata/data/writers
"""

import os
import shutil
import sys

import duckdb
import fastparquet
import pandas as pd


def main(out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(f"{out}/fastparquet_mixed")
    os.makedirs(f"{out}/fastparquet_empty")
    # fastparquet: an empty frame is a file without row groups.
    empty = pd.DataFrame({"id": pd.Series([], dtype="int64"), "name": pd.Series([], dtype="object")})
    fastparquet.write(f"{out}/fastparquet_mixed/part-0.parquet", empty)
    fastparquet.write(f"{out}/fastparquet_empty/part-0.parquet", empty)
    full = pd.DataFrame({"id": pd.Series([1, 2, 3], dtype="int64"), "name": ["a", None, "c"]})
    fastparquet.write(f"{out}/fastparquet_mixed/part-1.parquet", full)
    # DuckDB PARTITION_BY: integer, date and text keys, a null and escapes.
    duckdb.connect().execute(f"""COPY (SELECT x AS id, 'v' || (x % 3) AS v,
        CASE WHEN x % 5 = 0 THEN NULL ELSE (x % 2) + 1 END AS store_id,
        DATE '2025-03-05' + (x % 2)::INTEGER AS day,
        CASE x % 3 WHEN 0 THEN 'a b' WHEN 1 THEN 'x:y' ELSE 'plain' END AS region
        FROM range(0, 30) r(x)) TO '{out}/duckdb_hive' (FORMAT parquet, PARTITION_BY (store_id, day, region))""")


if __name__ == "__main__":
    main(sys.argv[1])
