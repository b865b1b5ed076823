"""Writer-compatibility corpus: the cross-check's table written by every
producer and in every variant that pipelines meet, each audited by the real
dqgate binary (with and without --scan-only, and with fingerprinted keys read
as large files are), every metric compared with
DuckDB's value over the same files. Each variant is also the input of
`dqgate suggest`: the suggested rule file must lint and pass `check` on it
(tests/suggest/roundtrip.py).

    python tests/writers/corpus.py DQGATE_BINARY WORK_DIR [--no-spark]

Run by .ci/run, which installs pyarrow, DuckDB, Polars, pandas, fastparquet
and pyspark in a venv and Java 17 from Debian. All Spark variants share one
local JVM session. Exits 1 on any disagreement or refusal, naming the
variant and the metric; prints each variant's file count and the time taken.
"""

import datetime
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crosscheck"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "suggest"))
import crosscheck as cc  # noqa: E402  (the same metrics, SQL and comparison)
from roundtrip import round_trip  # noqa: E402  (dqgate suggest -> lint -> check)

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

ROWS = 1500
COLUMNS = ("i", "k", "s", "f", "dec", "d", "ts", "g")

# (rule, DuckDB SQL): the cross-check's metrics, plus a low-cardinality
# column `g` that the partitioned writers use as their Hive key.
METRICS = list(zip(cc.RULES.splitlines()[1:], cc.SQL)) + [
    ("check null_count(g) >= 0", "count(*) - count(g)"),
    ("check min(g) >= -1", "min(g)"),
    ("check max(g) >= -1", "max(g)"),
    ("check distinct_count(g) >= 0", "count(DISTINCT g)"),
    ("check count(where g = 1) >= 0", "count(*) FILTER (WHERE g = 1)"),
]


def base(lo=0, hi=ROWS):
    t = cc.sample_table(range(lo, hi))
    g = [None if x % 7 == 0 else x % 3 for x in range(lo, hi)]
    return t.append_column("g", pa.array(g, pa.int32()))


def all_null(n=200):
    t = base(0, n)
    return pa.table({c: pa.nulls(n, t.schema.field(c).type) for c in t.column_names})


# ---- writers: each takes the staged directory and writes its files --------

def pyarrow_variant(string_view=False, **options):
    def write(dir):
        t = base()
        if string_view:
            s = pc.cast(pc.cast(t["s"], pa.string()), pa.string_view())
            t = t.set_column(2, "s", s)
        pq.write_table(t.slice(0, 900), f"{dir}/part-0.parquet", row_group_size=300, **options)
        pq.write_table(t.slice(900), f"{dir}/part-1.parquet", row_group_size=300, **options)
    return write


def pyarrow_tables(*tables):
    def write(dir):
        for n, t in enumerate(tables):
            pq.write_table(t() if callable(t) else t, f"{dir}/part-{n}.parquet")
    return write


def duckdb_variant(where="true", partition=False):
    def write(dir):
        con = duckdb.connect()
        t = base()  # noqa: F841  (DuckDB reads the Arrow table by name)
        target = dir if partition else f"{dir}/data_0.parquet"
        extra = ", PARTITION_BY (g)" if partition else ", ROW_GROUP_SIZE 500"
        con.execute(f"COPY (SELECT * FROM t WHERE {where}) TO '{target}' (FORMAT parquet{extra}"
                    + (", OVERWRITE_OR_IGNORE" if partition else "") + ")")
    return write


def polars_variant(rows=ROWS):
    def write(dir):
        import polars as pl
        pl.from_arrow(base(0, rows)).write_parquet(f"{dir}/part-0.parquet", row_group_size=400)
    return write


def pandas_variant(rows=ROWS):
    def write(dir):
        # An empty result keeps the frame's dtypes; pandas (through pyarrow)
        # writes its object columns (text, dates, decimals) as type null.
        base().to_pandas().iloc[:rows].to_parquet(f"{dir}/part-0.parquet")
    return write


def fastparquet_variant(*row_ranges):
    def write(dir):
        import fastparquet
        # fastparquet writes no decimal or date objects: those columns stay
        # out of its files (and so out of the compared metrics).
        df = base().drop_columns(["dec", "d"]).to_pandas()
        df["s"] = df["s"].astype(object)
        for n, (lo, hi) in enumerate(row_ranges):
            fastparquet.write(f"{dir}/part-{n}.parquet", df.iloc[lo:hi], row_group_offsets=500)
    return write


VARIANTS = {
    **{f"pyarrow-{c}": pyarrow_variant(compression=c)
       for c in ("none", "snappy", "gzip", "brotli", "zstd", "lz4")},
    "pyarrow-dictionary-off": pyarrow_variant(use_dictionary=False),
    "pyarrow-data-page-v2": pyarrow_variant(data_page_version="2.0"),
    "pyarrow-no-statistics": pyarrow_variant(write_statistics=False),
    "pyarrow-page-index": pyarrow_variant(write_page_index=True),
    "pyarrow-int96": pyarrow_variant(use_deprecated_int96_timestamps=True),
    "pyarrow-byte-stream-split": pyarrow_variant(use_dictionary=["s"], use_byte_stream_split=["f", "i"]),
    "pyarrow-page-crc": pyarrow_variant(write_page_checksum=True),
    "pyarrow-bloom-filters": pyarrow_variant(bloom_filter_options={"i": True, "s": {"ndv": 64, "fpp": 0.05}}),
    "pyarrow-tiny-row-groups": pyarrow_tables(lambda: base(0, 40)),
    "pyarrow-zero-rows": pyarrow_tables(lambda: base().slice(0, 0)),
    "pyarrow-zero-rows-beside-rows": pyarrow_tables(lambda: base().slice(0, 0), base),
    "pyarrow-all-null": pyarrow_tables(all_null),
    "pyarrow-string-view": pyarrow_variant(string_view=True),
    "duckdb": duckdb_variant(),
    "duckdb-empty": duckdb_variant(where="false"),
    "duckdb-partition-by": duckdb_variant(partition=True),
    "polars": polars_variant(),
    "polars-empty": polars_variant(rows=0),
    "pandas": pandas_variant(),
    "pandas-empty": pandas_variant(rows=0),
    "fastparquet": fastparquet_variant((0, ROWS)),
    "fastparquet-empty": fastparquet_variant((0, 0)),
    "fastparquet-empty-beside-rows": fastparquet_variant((0, 0), (0, ROWS)),
}

# pyarrow's tiny row groups: one row per group.
VARIANTS["pyarrow-tiny-row-groups"] = lambda dir: pq.write_table(base(0, 40), f"{dir}/part-0.parquet", row_group_size=1)

SPARK = {
    # name: (session settings, how the frame is written)
    "spark": ({}, lambda df, out: df.repartition(2).write.parquet(out)),
    "spark-legacy-format": ({"spark.sql.parquet.writeLegacyFormat": "true"},
                            lambda df, out: df.coalesce(2).write.parquet(out)),
    "spark-int96": ({"spark.sql.parquet.outputTimestampType": "INT96"},
                    lambda df, out: df.coalesce(2).write.parquet(out)),
    "spark-empty": ({}, lambda df, out: df.filter("false").write.parquet(out)),
    "spark-partition-by": ({}, lambda df, out: df.coalesce(1).write.partitionBy("g").parquet(out)),
}


def write_spark(work, dirs):
    """Every Spark variant in one local session: the base table is read from
    a pyarrow file and written with each variant's settings."""
    from local_spark import local_session
    spark = local_session("dqgate-corpus")
    src = os.path.join(work, "spark-source")
    os.makedirs(src, exist_ok=True)
    pq.write_table(base(), f"{src}/base.parquet")
    df = spark.read.parquet(src).cache()
    for name, (conf, write) in SPARK.items():
        for k, v in conf.items():
            spark.conf.set(k, v)
        write(df, dirs[name])
        for k in conf:
            spark.conf.unset(k)
    spark.stop()


# Metrics a variant cannot have: an empty pandas frame's decimal column is
# written with type null, and the sum of a column without a type is a rule
# error (exit 2, the message says why), not a value.
SKIP = {"pandas-empty": {"check sum(dec) >= -1000000000"}}


def columns_of(staged, pattern):
    con = duckdb.connect()
    hive = "true" if "**" in pattern else "false"
    rows = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{staged}/{pattern}', hive_partitioning = {hive})").fetchall()
    return {r[0] for r in rows}


def audit(binary, work, name, staged):
    """Returns (compared, failures) for one variant."""
    pattern = "**/*.parquet"
    present = columns_of(staged, pattern)
    metrics = [(rule, sql) for rule, sql in METRICS
               if set(re.findall(r"\b(" + "|".join(COLUMNS) + r")\b", rule)) <= present
               and rule not in SKIP.get(name, ())]
    rules = os.path.join(work, f"{name}.dq")
    with open(rules, "w") as fh:
        fh.write("table corpus\n" + "".join(r + "\n" for r, _ in metrics))
    try:
        want = cc.duckdb_values(staged, [sql for _, sql in metrics], pattern)
    except duckdb.Error as e:
        print(f"FAIL {name}: DuckDB cannot read it: {e}")
        return 0, 1
    compared = failures = 0
    # The default plan, the scan-only one, and fingerprinted keys whose
    # columns the scan does not keep (a text key hashed from the pages).
    for extra, strategy in (([], None), (["--scan-only"], None), ([], "fingerprint, keeping nothing")):
        how = " ".join(extra + ([strategy] if strategy else []))
        try:
            got = cc.dqgate_values(binary, rules, staged, extra, strategy)
        except SystemExit as e:  # dqgate refused the files: a failure, keep going
            print(f"FAIL {name} {how}: {e}")
            failures += 1
            continue
        for (metric, ours), theirs in zip(got, want):
            compared += 1
            if not cc.same(ours, theirs):
                failures += 1
                print(f"MISMATCH {name} {how}: {metric}: dqgate {ours!r}, duckdb {theirs!r}")
    return compared, failures


def main():
    binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    spark = "--no-spark" not in sys.argv[3:]
    os.environ["TZ"] = "UTC"
    time.tzset()
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    started = time.monotonic()
    dirs = {}
    for name, write in VARIANTS.items():
        dirs[name] = os.path.join(work, name)
        os.makedirs(dirs[name])
        write(dirs[name])
    if spark:
        spark_started = time.monotonic()
        for name in SPARK:
            dirs[name] = os.path.join(work, name)
        write_spark(work, dirs)
        print(f"spark: {len(SPARK)} variants written in {time.monotonic() - spark_started:.1f} s")
    compared = failures = 0
    for name, staged in dirs.items():
        files = sum(1 for _, _, fs in os.walk(staged) for f in fs if f.endswith(".parquet"))
        c, f = audit(binary, work, name, staged)
        problems, text = round_trip(binary, staged, work, name)
        for p in problems:
            print(f"SUGGEST {p}")
        f += len(problems)
        compared += c
        failures += f
        statements = sum(1 for line in text.splitlines() if line.startswith("check "))
        print(f"{'ok  ' if not f else 'FAIL'} {name}: {files} files, {c} values compared, "
              f"suggest: {statements} statements hold")
    print(f"writer corpus: {len(dirs)} variants, {compared} values compared, {failures} failures, "
          f"{time.monotonic() - started:.1f} s ({datetime.datetime.now(datetime.timezone.utc):%H:%M:%S} UTC)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
