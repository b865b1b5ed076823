"""Key layouts like real producers write them, for benches/keys/run.sh.

    python benches/keys/gen.py ROWS OUT_DIR [--files 8]

Writes OUT_DIR/*.parquet with DuckDB (its default writer: Snappy, row groups
of 122,880 rows), one file per contiguous slice of rows:

| column    | type      | values |
|-----------|-----------|--------|
| order_id  | BIGINT    | unique ids scattered over 2^40 (an odd multiplier modulo 2^40: a bijection, no dense range) |
| store_id  | INTEGER   | 1..1000, hashed from the row |
| event_id  | VARCHAR   | md5 of the row: 32 hex characters |
| event_uuid | VARCHAR  | the same md5 as a UUID's text: 8-4-4-4-12 hex digits |
| tenant_id | INTEGER   | row mod 10 |
| event_ts  | TIMESTAMP | one millisecond per 10 rows: files in time order, 10 tenants a timestamp |

1,000 rows (one every ROWS/1000) repeat the row before them entirely, as a
retried write does: each key set above then has exactly 1,000 duplicated keys,
and none of the composites is implied unique by a unique part.
"""

import argparse
import os

import duckdb

p = argparse.ArgumentParser()
p.add_argument("rows", type=int)
p.add_argument("out")
p.add_argument("--files", type=int, default=8)
p.add_argument("--dups", type=int, default=1000)
a = p.parse_args()
os.makedirs(a.out, exist_ok=True)
con = duckdb.connect()
con.execute("SET threads = 2")
step = a.rows // a.dups
per = -(-a.rows // a.files)
for f in range(a.files):
    lo, hi = f * per, min(a.rows, (f + 1) * per)
    con.execute(
        f"""
        COPY (
          WITH r AS (
            SELECT i, CASE WHEN i % {step} = 1 THEN i - 1 ELSE i END AS src
            FROM range({lo}, {hi}) t(i)
          )
          SELECT
            ((src::HUGEINT * 11400714819323198485::HUGEINT) % 1099511627776)::BIGINT AS order_id,
            (1 + hash(src) % 1000)::INTEGER AS store_id,
            md5(src::VARCHAR) AS event_id,
            concat_ws('-', substr(md5(src::VARCHAR), 1, 8), substr(md5(src::VARCHAR), 9, 4),
                      substr(md5(src::VARCHAR), 13, 4), substr(md5(src::VARCHAR), 17, 4),
                      substr(md5(src::VARCHAR), 21, 12)) AS event_uuid,
            (src % 10)::INTEGER AS tenant_id,
            TIMESTAMP '2025-03-05' + to_milliseconds(src // 10) AS event_ts
          FROM r ORDER BY i
        ) TO '{a.out}/part-{f:03d}.parquet' (FORMAT parquet)
        """
    )
open(os.path.join(a.out, "_generated"), "w").write(f"{a.rows} rows, {a.files} files\n")
