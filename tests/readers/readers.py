"""Readers of the published table: tables published by the real dqgate
binary are read with the calls the README documents, and every reader must
see exactly the rows of the staged files that were published, with the run
key typed as a date.

    python tests/readers/readers.py DQGATE_BINARY WORK_DIR [--no-spark]

Run by .ci/run in the writer corpus' venv (pyspark, DuckDB, Polars,
pyarrow) plus `deltalake`, with Java 17 from Debian. Three tables:

- `flat`: one day written by Spark (with its `_SUCCESS` and `.crc` files),
  one by pyarrow, then the Spark day published again (a second version, its
  files renamed); the files carry `sales_date` as a date column.
- `nested`: both days written by Spark's `partitionBy("store_id")`, so
  `store_id` exists only in the directory names below the run key.
- `delta`: the same days published with `--target delta`.

Hive tables are read by Spark (`spark.read.parquet(ROOT)`), DuckDB
(`read_parquet('ROOT/**/*.parquet', hive_partitioning = true)`), Polars
(`pl.scan_parquet('ROOT/**/*.parquet', hive_partitioning=True)`) and pyarrow
(`ds.dataset(ROOT, partitioning=ds.partitioning(KEYS, flavor='hive'))`); the
Delta table by `deltalake.DeltaTable(ROOT)` and Polars' `pl.scan_delta`.
The calls that do not work on a dqgate table are printed as notes, with the
reason the README gives. Exits 1 on any disagreement, naming the reader.
"""

import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from decimal import Decimal

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

RULES = """table sales
partitioned by sales_date

check row_count > 0
check unique(order_id)
check all(sales_date = partition.sales_date)
"""

# The nested table's files do not hold sales_date; its rows hold it from the
# run key only, as the readers see it.
NESTED_RULES = """table sales
partitioned by sales_date

check row_count > 0
check unique(order_id)
check null_count(store_id) = 0
"""

DAYS = (datetime.date(2025, 3, 4), datetime.date(2025, 3, 5))
FAILED = []


def fail(msg):
    print(f"FAIL: {msg}")
    FAILED.append(msg)


def day_table(day, seed, rows=400):
    """One day's rows: the run key as a date column, and a store column that
    the nested table moves into directory names."""
    n0 = seed * 100000
    return pa.table({
        "sales_date": pa.array([day] * rows, pa.date32()),
        "store_id": pa.array([1 + i % 3 for i in range(rows)], pa.int32()),
        "order_id": pa.array(range(n0, n0 + rows), pa.int64()),
        "amount": pa.array([Decimal(i * 7 + seed).scaleb(-2) for i in range(rows)], pa.decimal128(12, 2)),
        "sku": pa.array([None if i % 11 == 0 else f"sku-{i % 17}" for i in range(rows)], pa.string()),
    })


def canonical(rows):
    """Rows as comparable tuples: (date, store, order, amount, sku)."""
    out = []
    for r in rows:
        d = r["sales_date"]
        if not isinstance(d, datetime.date):
            raise TypeError(f"sales_date is {type(d).__name__} ({d!r}), not a date")
        amount = r["amount"]
        out.append((d.isoformat(), int(r["store_id"]), int(r["order_id"]),
                    f"{Decimal(amount):.2f}", r["sku"]))
    return sorted(out)


def run(cmd, expect=0):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != expect:
        fail(f"{' '.join(cmd)}: exit {p.returncode}, expected {expect}\n{p.stdout}\n{p.stderr}")
    return p


def publish(binary, rules, staged, day, root, target="hive"):
    run([binary, "publish", rules, "--staged", staged, "--partition", f"sales_date={day}",
         "--table", root, "--target", target, "--format", "json"])


def check_partition_files(root, rel):
    """A published Hive partition holds its manifest's data files and the
    audit record, nothing a writer left beside them."""
    part = os.path.join(root, rel)
    record = json.load(open(os.path.join(part, "_dqgate_audit.json")))
    listed = {f["path"] for f in record["published"]["files"]}
    found = set()
    for dirpath, _, files in os.walk(part):
        for f in files:
            found.add(os.path.relpath(os.path.join(dirpath, f), part))
    extra = found - listed - {"_dqgate_audit.json"}
    if extra:
        fail(f"{rel}: files beside the published data: {sorted(extra)}")
    if listed - found:
        fail(f"{rel}: manifest files missing: {sorted(listed - found)}")


# ---- the readers, called as the README documents them --------------------

def read_spark(spark, root):
    return [r.asDict() for r in spark.read.parquet(root).collect()]


def read_duckdb(root):
    con = duckdb.connect()
    cur = con.execute(f"SELECT * FROM read_parquet('{root}/**/*.parquet', hive_partitioning = true)")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def read_polars(root):
    return pl.scan_parquet(f"{root}/**/*.parquet", hive_partitioning=True).collect().to_dicts()


def read_pyarrow(root, keys):
    dataset = ds.dataset(root, format="parquet", partitioning=ds.partitioning(pa.schema(keys), flavor="hive"))
    return dataset.to_table().to_pylist()


def read_deltalake(root):
    from deltalake import DeltaTable
    return DeltaTable(root).to_pyarrow_table().to_pylist()


def read_polars_delta(root):
    return pl.scan_delta(root).collect().to_dicts()


HIVE_KEYS = {
    "flat": [("sales_date", pa.date32())],
    "nested": [("sales_date", pa.date32()), ("store_id", pa.int32())],
}


def compare(table, reader, expected, read):
    started = time.monotonic()
    try:
        got = canonical(read())
    except Exception as e:  # noqa: BLE001  (any reader error is a finding)
        fail(f"{table}: {reader}: {type(e).__name__}: {str(e)[:400]}")
        return
    if got != expected:
        missing = sorted(set(expected) - set(got))[:3]
        extra = sorted(set(got) - set(expected))[:3]
        fail(f"{table}: {reader}: {len(got)} rows, expected {len(expected)}; missing {missing}, extra {extra}")
    else:
        print(f"{table}: {reader}: {len(got)} rows as published ({time.monotonic() - started:.2f} s)")


def notes(root):
    """The calls that do not work on a dqgate Hive table, and why (README)."""
    for call, read in [
        ("pl.scan_parquet(ROOT)", lambda: pl.scan_parquet(root).collect()),
        ("ds.dataset(ROOT, partitioning='hive')", lambda: ds.dataset(root, partitioning="hive").to_table()),
    ]:
        try:
            read()
            print(f"note: {call} works now; the README says it does not")
        except Exception as e:  # noqa: BLE001
            print(f"note: {call}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")


# ---- staging ---------------------------------------------------------------

def spark_session():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "writers"))
    from local_spark import local_session
    return local_session("dqgate-readers")


def spark_write(spark, table, out, partition_by=None):
    src = out + ".source"
    os.makedirs(src)
    pq.write_table(table, f"{src}/part.parquet")
    df = spark.read.parquet(src)
    if partition_by:
        df.drop("sales_date").coalesce(1).write.partitionBy(partition_by).parquet(out)
    else:
        df.repartition(2).write.parquet(out)
    shutil.rmtree(src)
    names = set(os.listdir(out))
    if "_SUCCESS" not in names or not any(n.endswith(".crc") for n in names):
        fail(f"Spark wrote no _SUCCESS or .crc files into {out}: {sorted(names)}")


def pyarrow_write(table, out):
    os.makedirs(out)
    pq.write_table(table.slice(0, 200), f"{out}/part-00000.parquet")
    pq.write_table(table.slice(200), f"{out}/part-00001.parquet")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    use_spark = "--no-spark" not in sys.argv[3:]
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    rules = os.path.join(work, "sales.dq")
    nested_rules = os.path.join(work, "nested.dq")
    open(rules, "w").write(RULES)
    open(nested_rules, "w").write(NESTED_RULES)
    spark = spark_session() if use_spark else None

    def stage(name, table, spark_layout=None):
        out = os.path.join(work, "staging", name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if spark is not None:
            spark_write(spark, table, out, spark_layout)
        elif spark_layout:
            os.makedirs(out)
            for store in sorted(set(table["store_id"].to_pylist())):
                rows = table.filter(pc.equal(table["store_id"], store))
                os.makedirs(f"{out}/store_id={store}")
                pq.write_table(rows.drop_columns(["sales_date", "store_id"]), f"{out}/store_id={store}/part-0.parquet")
        else:
            pyarrow_write(table, out)
        return out

    started = time.monotonic()
    tables = {}
    # flat: day 1 by Spark, day 2 by pyarrow, day 1 again (second version).
    root = os.path.join(work, "tables", "flat")
    first = day_table(DAYS[0], 1)
    publish(binary, rules, stage("flat-1", first), DAYS[0], root)
    second = day_table(DAYS[1], 2)
    pyarrow_write(second, os.path.join(work, "staging", "flat-2"))
    publish(binary, rules, os.path.join(work, "staging", "flat-2"), DAYS[1], root)
    again = day_table(DAYS[0], 3)
    publish(binary, rules, stage("flat-1b", again), DAYS[0], root)
    tables["flat"] = (root, canonical(again.to_pylist() + second.to_pylist()))
    # nested: both days by Spark's partitionBy(store_id).
    root = os.path.join(work, "tables", "nested")
    nested = [day_table(DAYS[0], 4), day_table(DAYS[1], 5)]
    for n, (day, t) in enumerate(zip(DAYS, nested)):
        publish(binary, nested_rules, stage(f"nested-{n}", t, "store_id"), day, root)
    tables["nested"] = (root, canonical(nested[0].to_pylist() + nested[1].to_pylist()))
    # delta: both days, then day 1 again.
    root = os.path.join(work, "tables", "delta")
    for n, (day, t) in enumerate([(DAYS[0], day_table(DAYS[0], 6)), (DAYS[1], second), (DAYS[0], again)]):
        out = os.path.join(work, "staging", f"delta-{n}")
        pyarrow_write(t, out)
        publish(binary, rules, out, day, root, target="delta")
    tables["delta"] = (root, canonical(again.to_pylist() + second.to_pylist()))
    print(f"published 3 tables in {time.monotonic() - started:.1f} s")

    for name in ("flat", "nested"):
        root, expected = tables[name]
        for dirpath, dirs, _ in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith("_")]
            if os.path.exists(os.path.join(dirpath, "_dqgate_audit.json")):
                check_partition_files(root, os.path.relpath(dirpath, root))
        if spark is not None:
            compare(name, "spark.read.parquet(ROOT)", expected, lambda: read_spark(spark, root))
        compare(name, "duckdb read_parquet('ROOT/**/*.parquet', hive_partitioning = true)", expected,
                lambda: read_duckdb(root))
        compare(name, "pl.scan_parquet('ROOT/**/*.parquet', hive_partitioning=True)", expected,
                lambda: read_polars(root))
        compare(name, "ds.dataset(ROOT, partitioning=ds.partitioning(KEYS, flavor='hive'))", expected,
                lambda: read_pyarrow(root, HIVE_KEYS[name]))
    notes(tables["flat"][0])
    root, expected = tables["delta"]
    compare("delta", "deltalake.DeltaTable(ROOT).to_pyarrow_table()", expected, lambda: read_deltalake(root))
    compare("delta", "pl.scan_delta(ROOT)", expected, lambda: read_polars_delta(root))
    if spark is not None:
        spark.stop()
    if FAILED:
        print(f"{len(FAILED)} failure(s)")
        sys.exit(1)
    print("every reader sees the published rows")


if __name__ == "__main__":
    main()
