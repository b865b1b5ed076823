"""A daily_sales partition for the --failed-rows benchmark, written by DuckDB:
the columns, types and rates of benches/gen_partition.rs with --dup-rate
0.0001 (see benches/README.md), as 8 Snappy files with row groups of
1,048,576 rows. Deterministic (hashes of the row index).

    python benches/failed_rows/gen.py ROWS OUT_DIR
"""

import os
import shutil
import sys

import duckdb


def main():
    rows, out = int(sys.argv[1]), sys.argv[2]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    files = 8
    per = -(-rows // files)
    con = duckdb.connect()
    for f in range(files):
        lo, hi = f * per, min(rows, (f + 1) * per)
        con.execute(f"""
        COPY (
          SELECT
            DATE '2025-03-05' AS sales_date,
            (hash(k, 'store') % 1000 + 1)::INTEGER AS store_id,
            -- About 0.01% of rows repeat the order id of the row before.
            (k + 1)::BIGINT AS order_id,
            CASE WHEN hash(i, 'cnull') % 10000 < 200 THEN NULL
                 ELSE (hash(i, 'cust') % 5000000 + 1)::BIGINT END AS customer_id,
            CASE WHEN hash(i, 'snull') % 10000 < 50 THEN NULL
                 ELSE 'SKU-' || lpad((hash(i, 'sku') % 97)::VARCHAR, 2, '0') || '-'
                      || lpad((hash(i, 'sku') % 100000)::VARCHAR, 6, '0') END AS sku,
            CASE WHEN hash(i, 'big') % 1000000 = 0
                 THEN ((10000001 + hash(i, 'amt') % 90000000) / 100)::DECIMAL(12, 2)
                 ELSE ((hash(i, 'amt') % 100000) / 100)::DECIMAL(12, 2) END AS amount,
            CASE WHEN hash(i, 'cur') % 1000 < 500 THEN 'EUR'
                 WHEN hash(i, 'cur') % 1000 < 750 THEN 'USD'
                 WHEN hash(i, 'cur') % 1000 < 870 THEN 'GBP'
                 WHEN hash(i, 'cur') % 1000 < 950 THEN 'CHF'
                 ELSE 'JPY' END AS currency,
            TIMESTAMPTZ '2025-03-05 00:00:00+00' + to_microseconds((i * 86400000000 // {rows})::BIGINT)
              AS order_ts
          FROM (SELECT i, CASE WHEN i > 0 AND hash(i, 'dup') % 10000 = 0 THEN i - 1 ELSE i END AS k
                FROM range({lo}, {hi}) t(i))
          ORDER BY i
        ) TO '{out}/part-{f:03d}.parquet' (FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 1048576)
        """)
    open(os.path.join(out, "_generated"), "w").close()


if __name__ == "__main__":
    main()
