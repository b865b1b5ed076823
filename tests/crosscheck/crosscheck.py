"""Cross-engine check: Parquet files written by DuckDB and by pyarrow are
audited by dqgate, and every metric value must equal what DuckDB computes with
plain SQL over the same files.

    python tests/crosscheck/crosscheck.py DQGATE_BINARY WORK_DIR

Run by .ci/run (which installs duckdb and pyarrow in a virtual environment).
Exits 1 on any disagreement, naming the metric and both values.

It also checks the joins differentially, on random data with nulls and
composite keys: `values(...) in REF(...)` against DuckDB's `NOT EXISTS` (text
keys in place and spread into radix partitions too), and
`unique(...) across published` (over a table published by `dqgate publish`)
against DuckDB's `EXISTS` over the other partitions' files; the latter on
long text keys of random alphabets and lengths too (the fingerprinted join),
in every Arrow layout of text, published partitions written by pyarrow or
by DuckDB, and again with fingerprints cut to 3 bits and spread into radix
partitions (in memory, and written to disk past a tiny budget). And keys
with one hot value among nearly unique ones, in files whose dictionary
falls back to plain pages and in DELTA_BYTE_ARRAY pages of format 2.0.
And the key checks and `distinct_count` on a key of every column type a
producer may write, by every strategy.
"""

import json
import math
import os
import random
import shutil
import subprocess
import sys
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

RULES = """table crosscheck
check row_count >= 0
check null_count(i) >= 0
check null_rate(s) >= 0
check distinct_count(s) >= 0
check distinct_count(f) >= 0
check duplicate_count(k) >= 0
check min(i) >= -1000000000
check max(i) >= -1000000000
check sum(i) >= -1000000000000
check avg(i) >= -1000000000
check min(dec) >= -1000000
check max(dec) >= -1000000
check sum(dec) >= -1000000000
check min(f) >= -1000000
check max(f) >= -1000000
check min(d) >= date '1900-01-01'
check max(d) >= date '1900-01-01'
check min(ts) >= timestamp '1900-01-01 00:00:00'
check max(ts) >= timestamp '1900-01-01 00:00:00'
check min(s) >= ''
check max(s) >= ''
check count(where i > 10 and s <> 'v3') >= 0
check duplicate_count(i, s) nulls not distinct >= 0
check duplicate_count(i, s) nulls distinct >= 0
"""

# The same metrics in DuckDB SQL, in RULES order.
SQL = [
    "count(*)",
    "count(*) - count(i)",
    "CASE WHEN count(*) = 0 THEN 0.0 ELSE (count(*) - count(s)) / count(*) END",
    "count(DISTINCT s)",
    "count(DISTINCT f)",
    "(SELECT count(*) FROM (SELECT k FROM t WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1))",
    "min(i)",
    "max(i)",
    "sum(i)",
    "avg(i)",
    "min(dec)",
    "max(dec)",
    "sum(dec)",
    "min(f)",
    "max(f)",
    "min(d)",
    "max(d)",
    "min(ts)",
    "max(ts)",
    "min(s)",
    "max(s)",
    "count(*) FILTER (WHERE i > 10 AND s <> 'v3')",
    # GROUP BY puts nulls in one group: a null key part is a value.
    "(SELECT count(*) FROM (SELECT i, s FROM t GROUP BY i, s HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT i, s FROM t WHERE i IS NOT NULL AND s IS NOT NULL"
    " GROUP BY i, s HAVING count(*) > 1))",
]


def write_with_duckdb(dir):
    os.makedirs(dir, exist_ok=True)
    con = duckdb.connect()
    for part, (lo, hi) in enumerate([(0, 2500), (2500, 4000)]):
        con.execute(f"""
            COPY (
              SELECT
                CASE WHEN x % 13 = 0 THEN NULL ELSE (x * 7919) % 5000 - 1000 END::BIGINT AS i,
                (x % 3000)::INTEGER AS k,
                CASE WHEN x % 17 = 0 THEN NULL ELSE 'v' || (x % 40)::VARCHAR END AS s,
                CASE WHEN x % 101 = 0 THEN 'NaN'::DOUBLE WHEN x % 11 = 0 THEN NULL
                     ELSE (x % 997) / 7.0 - 50 END AS f,
                (((x * 31) % 100000 - 20000) / 100)::DECIMAL(12, 2) AS dec,
                DATE '2025-03-05' - (x % 400)::INTEGER AS d,
                TIMESTAMPTZ '2025-03-05 00:00:00+00' + to_microseconds((x * 7777)::BIGINT) AS ts
              FROM range({lo}, {hi}) r(x)
            ) TO '{dir}/part-{part}.parquet' (FORMAT parquet, ROW_GROUP_SIZE 700)
        """)


def sample_table(xs):
    """The cross-check's columns for the row numbers `xs`, as pyarrow types
    them (also the base of the writer corpus, tests/writers/corpus.py)."""
    i = [None if x % 13 == 0 else (x * 7919) % 5000 - 1000 for x in xs]
    k = [x % 2000 for x in xs]
    s = [None if x % 17 == 0 else f"v{x % 40}" for x in xs]
    f = [float("nan") if x % 101 == 0 else (None if x % 11 == 0 else (x % 997) / 7.0 - 50) for x in xs]
    dec = [Decimal((x * 31) % 100000 - 20000) / 100 for x in xs]
    d = [19000 + (x % 400) for x in xs]
    ts = [1741132800000 + x * 7777 for x in xs]
    return pa.table({
        "i": pa.array(i, pa.int64()),
        "k": pa.array(k, pa.int32()),
        "s": pa.array(s, pa.string()).dictionary_encode(),
        "f": pa.array(f, pa.float64()),
        "dec": pa.array(dec, pa.decimal128(12, 2)),
        "d": pa.array(d, pa.date32()),
        "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
    })


def write_with_pyarrow(dir):
    os.makedirs(dir, exist_ok=True)
    for part in range(3):
        n = 1500
        table = sample_table(range(part * n, (part + 1) * n))
        pq.write_table(
            table,
            f"{dir}/part-{part}.parquet",
            row_group_size=400,
            write_statistics=part != 2,
            compression="zstd" if part == 0 else "snappy",
        )


def dqgate_values(binary, rules, staged, extra, strategy=None):
    env = dict(os.environ)
    if strategy:
        # The key engine's test switches: every key check on this strategy
        # (and, if said, no key columns kept for the verification).
        strategy, _, keeping = strategy.partition(", ")
        env["DQGATE_TEST_KEY_STRATEGY"] = strategy
        if keeping == "keeping nothing":
            env["DQGATE_TEST_KEEP_BYTES"] = "0"
    out = subprocess.run(
        [binary, "check", rules, "--staged", staged, "--format", "json", *extra],
        capture_output=True, text=True, env=env,
    )
    if out.returncode not in (0, 1):
        sys.exit(f"dqgate failed on {staged} (exit {out.returncode}): {out.stderr}")
    return [(c["metric"], c["value"]) for c in json.loads(out.stdout)["checks"]]


def duckdb_values(staged, sql=SQL, pattern="*.parquet"):
    """DuckDB's values of the `sql` expressions over the files `pattern`
    matches under `staged` (`**/*.parquet` reads Hive directories as
    columns)."""
    con = duckdb.connect()
    hive = "true" if "**" in pattern else "false"
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{staged}/{pattern}', hive_partitioning = {hive})")
    return list(con.execute("SELECT " + ", ".join(sql) + " FROM t").fetchone())


def same(ours, theirs):
    if theirs is None:
        return ours is None
    if isinstance(theirs, float):
        if isinstance(ours, str):
            return ours == "NaN" and math.isnan(theirs)
        return ours is not None and math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(theirs, Decimal):
        return ours is not None and Decimal(str(ours)) == theirs
    if hasattr(theirs, "isoformat") and hasattr(theirs, "hour"):  # timestamp
        return ours is not None and ours.startswith(theirs.astimezone(__import__("datetime").timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"))
    if hasattr(theirs, "isoformat"):  # date
        return ours == theirs.isoformat()
    return ours == theirs


# Alphabets of the long text keys: base64 ids, business codes, e-mail-like
# text, multi-byte UTF-8.
ALPHABETS = [
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "0123456789-_.#",
    "abcdefghij@.",
    "éß漢字🙂aZ",
]


def text_pool(rng, n=150):
    """Text keys of random alphabets and lengths (0 to 40 characters): a
    column of them packs into no word, so its joins are fingerprinted."""
    pool = ["", "x" * 40]
    while len(pool) < n:
        alphabet = rng.choice(ALPHABETS)
        pool.append("".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 41))))
    return pool


def random_keys(rng, n, null_rate, a_type, texts):
    """Columns a (integers from a small domain), b (a few strings) and t
    (long text from `texts`), with nulls."""
    a = [None if rng.random() < null_rate else rng.randrange(0, 60) for _ in range(n)]
    b = [None if rng.random() < null_rate else rng.choice(["x", "y", "z", "é"]) for _ in range(n)]
    t = [None if rng.random() < null_rate else rng.choice(texts) for _ in range(n)]
    t = pa.array(t, rng.choice([pa.string(), pa.large_string(), pa.string_view()]))
    if rng.random() < 0.25 and t.type != pa.string_view():
        t = t.dictionary_encode()
    return pa.table({"a": pa.array(a, a_type), "b": pa.array(b, pa.string()), "t": t, "c": pa.array(range(n), pa.int64())})


def write_files(rng, dir, table):
    """`table` split into 1-3 files, some without statistics."""
    os.makedirs(dir, exist_ok=True)
    cuts = sorted(rng.sample(range(1, max(2, table.num_rows)), min(2, max(0, table.num_rows - 1))))
    bounds = [0, *cuts[: rng.randrange(0, 3)], table.num_rows]
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        pq.write_table(table.slice(lo, hi - lo), f"{dir}/part-{i}.parquet",
                       row_group_size=max(1, rng.randrange(20, 200)), write_statistics=rng.random() < 0.7)


def write_with_duckdb_copy(rng, dir, table):
    """`table` written by DuckDB's own Parquet writer (its page layout,
    dictionaries and statistics), in row groups of a random size."""
    os.makedirs(dir, exist_ok=True)
    plain = table.cast(pa.schema([pa.field(f.name, pa.string() if f.name == "t" else f.type)
                                  for f in table.schema]))
    con = duckdb.connect()
    con.register("part", plain)
    con.execute(f"COPY part TO '{dir}/part-0.parquet' (FORMAT parquet, ROW_GROUP_SIZE {rng.randrange(20, 200)})")
    con.close()


def run_json(binary, args, cwd, env=None):
    out = subprocess.run([binary, *args, "--format", "json"], capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, **(env or {})})
    if out.returncode not in (0, 1):
        sys.exit(f"dqgate {' '.join(args)} failed (exit {out.returncode}): {out.stderr}")
    return json.loads(out.stdout)


def crosscheck_joins(binary, work, trials=12):
    """Returns (checked, failures)."""
    rng = random.Random(20250305)
    checked = failures = 0

    def compare(what, ours, theirs):
        nonlocal checked, failures
        checked += 1
        if ours != theirs:
            failures += 1
            print(f"MISMATCH {what}: dqgate {ours!r}, duckdb {theirs!r}")

    for trial in range(trials):
        base = os.path.join(work, f"joins-{trial}")
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        null_rate = rng.choice([0.0, 0.05, 0.3])
        texts = text_pool(rng)
        staged = random_keys(rng, rng.randrange(0, 600), null_rate, pa.int32(), texts)
        write_files(rng, f"{base}/staged", staged)
        # A reference partitioned Hive-style, with int64 keys (staged: int32).
        for region in range(rng.randrange(1, 4)):
            ref = random_keys(rng, rng.randrange(1, 80), null_rate, pa.int64(), texts)
            write_files(rng, f"{base}/ref/region=r{region}", ref)
        with open(f"{base}/ref.dq", "w") as fh:
            fh.write("table t\nreference r at 'ref'\n"
                     "check values(a) in r(a)\ncheck values(a, b) in r(a, b)\ncheck values(b, a) in r(b, a)\n"
                     "check values(t) in r(t)\ncheck values(t, a) in r(t, a)\n")
        got = run_json(binary, ["check", "ref.dq", "--staged", "staged"], base)
        # The text lookups again, spread into radix partitions (the lookup
        # of references and staged keys too many for its in-place table).
        spread = run_json(binary, ["check", "ref.dq", "--staged", "staged"], base, {"DQGATE_TEST_LOOKUP_KEYS": "0"})
        compare(f"trial {trial} spread reference lookups", spread["checks"], got["checks"])
        # Spread, the partitions written to disk past 256 bytes.
        spilled = run_json(binary, ["check", "ref.dq", "--staged", "staged"], base,
                           {"DQGATE_TEST_LOOKUP_KEYS": "0", "DQGATE_TEST_SPREAD_BYTES": "256"})
        compare(f"trial {trial} spread reference lookups spilled", spilled["checks"], got["checks"])
        con = duckdb.connect()
        con.execute(f"CREATE VIEW s AS SELECT * FROM read_parquet('{base}/staged/*.parquet')")
        con.execute(f"CREATE VIEW r AS SELECT * FROM read_parquet('{base}/ref/*/*.parquet')")
        one = con.execute("SELECT count(*) FROM s WHERE a IS NOT NULL AND NOT EXISTS (SELECT 1 FROM r WHERE r.a = s.a)").fetchone()[0]
        two = con.execute("SELECT count(*) FROM s WHERE a IS NOT NULL AND b IS NOT NULL AND "
                          "NOT EXISTS (SELECT 1 FROM r WHERE r.a = s.a AND r.b = s.b)").fetchone()[0]
        text = con.execute("SELECT count(*) FROM s WHERE t IS NOT NULL AND NOT EXISTS (SELECT 1 FROM r WHERE r.t = s.t)").fetchone()[0]
        text_int = con.execute("SELECT count(*) FROM s WHERE t IS NOT NULL AND a IS NOT NULL AND "
                               "NOT EXISTS (SELECT 1 FROM r WHERE r.t = s.t AND r.a = s.a)").fetchone()[0]
        for i, want in enumerate([one, two, two, text, text_int]):
            compare(f"trial {trial} {got['checks'][i]['metric']}", got["checks"][i]["value"], want)

        # A table of three days published by dqgate; the staged files replace day 2.
        with open(f"{base}/pub.dq", "w") as fh:
            fh.write("table t\npartitioned by day\ncheck row_count >= 0\n")
        for day in (1, 2, 3):
            part = random_keys(rng, rng.randrange(0, 300), null_rate, rng.choice([pa.int32(), pa.int64()]), texts)
            if rng.random() < 0.5:
                write_with_duckdb_copy(rng, f"{base}/stage-{day}", part)
            else:
                write_files(rng, f"{base}/stage-{day}", part)
            out = subprocess.run([binary, "publish", "pub.dq", "--staged", f"stage-{day}", "--partition", f"day={day}",
                                  "--table", "table"], capture_output=True, text=True, cwd=base)
            if out.returncode != 0:
                sys.exit(f"publish of day {day} failed: {out.stderr}")
        with open(f"{base}/across.dq", "w") as fh:
            fh.write("table t\npartitioned by day\ncheck unique(a) across published\ncheck unique(a, b) across published\n"
                     "check unique(t) across published\ncheck unique(t, a) across published\n")
        across = ["check", "across.dq", "--staged", "staged", "--partition", "day=2", "--table", "table"]
        got = run_json(binary, across, base)
        # Fingerprints cut to 3 bits: nearly every text key collides, and
        # the verdict must not change.
        collided = run_json(binary, across, base, {"DQGATE_TEST_FINGERPRINT_BITS": "3"})
        compare(f"trial {trial} across with colliding fingerprints", collided["checks"], got["checks"])
        # Text keys spread into radix partitions (a staged side too large
        # for the in-place table, forced on these small files).
        spread = run_json(binary, across, base, {"DQGATE_TEST_PROBE_ROWS": "0"})
        compare(f"trial {trial} across spread", spread["checks"], got["checks"])
        spilled = run_json(binary, across, base, {"DQGATE_TEST_PROBE_ROWS": "0", "DQGATE_TEST_SPREAD_BYTES": "256"})
        compare(f"trial {trial} across spread spilled", spilled["checks"], got["checks"])
        # The footers compared with a sample of 8 staged keys first; all of
        # them are read when the sample does not fall within every range.
        sampled = run_json(binary, across, base, {"DQGATE_TEST_SAMPLE_ROWS": "8"})
        compare(f"trial {trial} across sampled", sampled["checks"], got["checks"])
        con.execute(f"CREATE VIEW p AS SELECT * FROM read_parquet('{base}/table/*/*.parquet', hive_partitioning = true, union_by_name = true) WHERE day::VARCHAR <> '2'")
        one = con.execute("SELECT count(*) FROM (SELECT DISTINCT a FROM s WHERE a IS NOT NULL) k "
                          "WHERE EXISTS (SELECT 1 FROM p WHERE p.a = k.a)").fetchone()[0]
        two = con.execute("SELECT count(*) FROM (SELECT DISTINCT a, b FROM s WHERE a IS NOT NULL AND b IS NOT NULL) k "
                          "WHERE EXISTS (SELECT 1 FROM p WHERE p.a = k.a AND p.b = k.b)").fetchone()[0]
        three = con.execute("SELECT count(*) FROM (SELECT DISTINCT t FROM s WHERE t IS NOT NULL) k "
                            "WHERE EXISTS (SELECT 1 FROM p WHERE p.t = k.t)").fetchone()[0]
        four = con.execute("SELECT count(*) FROM (SELECT DISTINCT t, a FROM s WHERE t IS NOT NULL AND a IS NOT NULL) k "
                           "WHERE EXISTS (SELECT 1 FROM p WHERE p.t = k.t AND p.a = k.a)").fetchone()[0]
        for i, want in enumerate([one, two, three, four]):
            check = got["checks"][i]
            compare(f"trial {trial} {check['metric']}", check["value"], want)
            for sample in check.get("samples", []):
                key = sample["key"]
                cond = " AND ".join(f"{c} = ?" for c in key)
                rows = con.execute(f"SELECT count(*) FROM s WHERE {cond}", list(key.values())).fetchone()[0]
                there = con.execute(f"SELECT count(*) FROM p WHERE {cond} AND 'day=' || day::VARCHAR = ?",
                                    [*key.values(), sample["partition"]]).fetchone()[0]
                compare(f"trial {trial} sample {sample}", (sample["rows"], there > 0), (rows, True))
    return checked, failures


def crosscheck_dictionary_lookup(binary, work):
    """A reference lookup of keys typed as an Arrow dictionary that pyarrow
    writes whole into every row group, under a memory limit: the key engine
    must run it (the footers counted each group's dictionary page whole, and
    the pool refused the engine's table), and agree with DuckDB. Returns
    (checked, failures)."""
    rng = random.Random(20261205)
    base = os.path.join(work, "dictionary-lookup")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(f"{base}/staged")
    os.makedirs(f"{base}/ref")
    n = 60_000
    values = [f"order-{i:08d}-{rng.getrandbits(40):010x}" for i in range(n)]
    pq.write_table(pa.table({"k": pa.array(values).dictionary_encode()}), f"{base}/staged/part-0.parquet",
                   row_group_size=n // 4)
    missing = set(rng.sample(range(n), 100))
    pq.write_table(pa.table({"k": [v for i, v in enumerate(values) if i not in missing]}), f"{base}/ref/part-0.parquet")
    with open(f"{base}/ref.dq", "w") as fh:
        fh.write("table t\nreference r at 'ref'\ncheck values(k) in r(k)\n")
    out = subprocess.run([binary, "check", "ref.dq", "--staged", "staged", "--memory-limit", "16MB", "-v",
                          "--format", "json"], capture_output=True, text=True, cwd=base)
    if out.returncode not in (0, 1):
        sys.exit(f"dqgate check of the dictionary lookup failed (exit {out.returncode}): {out.stderr}")
    ours = json.loads(out.stdout)["checks"][0]["value"]
    con = duckdb.connect()
    theirs = con.execute(f"SELECT count(*) FROM read_parquet('{base}/staged/*.parquet') s WHERE NOT EXISTS "
                         f"(SELECT 1 FROM read_parquet('{base}/ref/*.parquet') r WHERE r.k = s.k)").fetchone()[0]
    failures = 0
    if ours != theirs:
        failures += 1
        print(f"MISMATCH dictionary-typed lookup: dqgate {ours!r}, duckdb {theirs!r}")
    if "memory pool refuses" in out.stderr or "anti-join" not in out.stderr:
        failures += 1
        print(f"MISMATCH dictionary-typed lookup left the key engine under 16 MB:\n{out.stderr}")
    return 2, failures


REPEATED_RULES = """table t
check distinct_count(k) >= 0
check duplicate_count(k) >= 0
check duplicate_count(k) nulls not distinct >= 0
"""
REPEATED_SQL = [
    "count(DISTINCT k)",
    "(SELECT count(*) FROM (SELECT k FROM t WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT k FROM t GROUP BY k HAVING count(*) > 1))",
]


def crosscheck_repeated_text(binary, work):
    """Text keys whose values repeat (30,000 values of every alphabet in
    120,000 rows, 4% null), written by DuckDB, by pyarrow with dictionary
    pages, and typed as a dictionary. Four ways: the first pass tables the
    exact values and they are the answer (read once); they turn to bins at
    3,000 values, tabled a bin at a time at the end (and any bin above
    the others' mean tabled in place as it grows); the tables are given
    up at 5,000 values and what they held counted as fingerprints; no
    table, so that more than 16,384 fingerprints repeat and the
    verification, reading the key again page by page, takes the rows by
    value (a dictionary's tallied, plain values in batches). The same rows
    in files each sorted on its own (stretches merged), and in one order
    across the files (counted in order alone, as the footers say; a file
    whose row groups' ranges follow one another but whose rows do not,
    read again by the whole pass). Returns (checked, failures)."""
    rng = random.Random(20261206)
    base = os.path.join(work, "repeated-text")
    shutil.rmtree(base, ignore_errors=True)
    values = ["".join(rng.choice(ALPHABETS[i % 4]) for _ in range(rng.randint(0, 30))) for i in range(30_000)]
    rows = [None if rng.random() < 0.04 else rng.choice(values) for _ in range(120_000)]
    column = pa.array(rows, pa.string())
    # The same values, 19 in 20 of them with a prefix and a suffix: the
    # bins keep them once.
    plain = set(values[::20])
    affixed = pa.array([v if v is None or v in plain else f"order-{v}@shop.example" for v in rows], pa.string())
    layouts = {"pyarrow": column, "dictionary-typed": column.dictionary_encode(), "affixed": affixed}
    for name, col in layouts.items():
        os.makedirs(f"{base}/{name}")
        pq.write_table(pa.table({"k": col}), f"{base}/{name}/part-0.parquet", row_group_size=50_000)
    os.makedirs(f"{base}/duckdb")
    duckdb.connect().execute(f"COPY (SELECT * FROM read_parquet('{base}/pyarrow/*.parquet')) "
                             f"TO '{base}/duckdb/part-0.parquet' (ROW_GROUP_SIZE 40000)")
    with open(f"{base}/k.dq", "w") as fh:
        fh.write(REPEATED_RULES)
    ways = [
        ("tabled", {}, "tabling the exact values"),
        ("given up", {"DQGATE_TEST_EXACT_VALUES": "5000"}, "giving up their table"),
        # Binned from 3,000 values on, tabled a bin at a time at the end.
        ("binned", {"DQGATE_TEST_BIN_VALUES": "3000"}, "binning the exact values"),
        # The same, any bin above the others' mean tabled in place first.
        ("binned in place", {"DQGATE_TEST_BIN_VALUES": "3000", "DQGATE_TEST_OUTSIZED_BIN": "1"},
         "tabled in place"),
        ("verified", {"DQGATE_TEST_EXACT_VALUES": "0"}, "page by page by value"),
        # A memory limit too small for the table: the values repeat, so
        # the runs bin them (written to disk past their share).
        ("binned past the budget", {"--memory-limit": "4MB"}, "binning the exact values"),
        # Rounds whose rows are written to disk in one read.
        ("spilled", {"DQGATE_TEST_EXACT_VALUES": "0", "DQGATE_TEST_SPILL_CANDIDATES": "1"}, "rounds of one read"),
    ]
    # The same rows in 3 files each sorted on its own (a hash-partitioned
    # sorted write), by DuckDB and by pyarrow typed as a dictionary: each
    # run keeps its keys in stretches in order, merged at the end from
    # memory or from disk; or gives them up full (no disk), or keeps none.
    # The affixed rows so too: the stretches keep their keys without the
    # suffix (hashed again, as the walk hashes them, when given up).
    affixed_rows = affixed.to_pylist()
    for name, typed, source in (("duckdb-sorted-files", False, rows), ("dictionary-sorted-files", True, rows),
                                ("affixed-sorted-files", False, affixed_rows)):
        os.makedirs(f"{base}/{name}")
        for p in range(3):
            part = sorted((r for i, r in enumerate(source) if (i * 7919) % 3 == p),
                          key=lambda v: (v is None, v or ""))
            if typed:
                col = pa.array(part, pa.string()).dictionary_encode()
                pq.write_table(pa.table({"k": col}), f"{base}/{name}/part-{p}.parquet", row_group_size=15_000)
            else:
                con = duckdb.connect()
                con.register("s", pa.table({"k": pa.array(part, pa.string())}))
                con.execute(f"COPY (SELECT k FROM s ORDER BY k NULLS LAST) TO '{base}/{name}/part-{p}.parquet' "
                            "(ROW_GROUP_SIZE 15000)")
    # The same rows in one order across the files: DuckDB's one sorted
    # file; pyarrow's three typed as a dictionary, listed out of their order
    # (part-0 holds the greatest keys); and DuckDB's three row groups each
    # holding a range of keys out of order (a range-partitioned write). The
    # footers say the first two are in order, counted so alone; the third,
    # read again after its first value out of order.
    in_order = sorted(rows, key=lambda v: (v is None, v or ""))
    con = duckdb.connect()
    con.register("s", pa.table({"k": pa.array(rows, pa.string())}))
    os.makedirs(f"{base}/duckdb-one-order")
    con.execute(f"COPY (SELECT k FROM s ORDER BY k NULLS FIRST) TO '{base}/duckdb-one-order/part-0.parquet' "
                "(ROW_GROUP_SIZE 20000)")
    os.makedirs(f"{base}/dictionary-one-order")
    third = len(in_order) // 3
    for p in range(3):
        part = in_order[(2 - p) * third:(3 - p) * third if p else None]
        col = pa.array(part, pa.string()).dictionary_encode()
        pq.write_table(pa.table({"k": col}), f"{base}/dictionary-one-order/part-{p}.parquet", row_group_size=15_000)
    os.makedirs(f"{base}/duckdb-ranges")
    con.execute("COPY (SELECT k FROM (SELECT k, row_number() OVER (ORDER BY k NULLS FIRST) - 1 AS n FROM s) "
                f"ORDER BY n // 40960, hash(n)) TO '{base}/duckdb-ranges/part-0.parquet' (ROW_GROUP_SIZE 40960)")
    order_ways = [("footers in order", {}, "as the footers' ranges said (nothing else kept)")]
    # One file not heeding its footers: each run counts its values in
    # order while it keeps its stretches, as before.
    one_way = order_ways + [
        ("footers not heeded", {"DQGATE_TEST_FOOTER_ORDER": "0"}, "the values in order: counted side by side: "),
    ]
    ranges_ways = [("out of order", {}, "each row group's values tabled on their own")]
    sorted_ways = [
        ("merged", {}, "merge the stretches in order"),
        ("to disk", {"DQGATE_TEST_SORTED_KEYS": "2000"}, "written to disk"),
        ("given up full", {"DQGATE_TEST_SORTED_KEYS": "2000", "TMPDIR": os.path.join(base, "nowhere")},
         "giving up their table"),
        ("never kept", {"DQGATE_TEST_SORTED_KEYS": "0"}, "tabling the exact values"),
    ]
    layouts = [(n, ways) for n in ("duckdb", "pyarrow", "dictionary-typed")]
    affixed_ways = [(way, extra, "values stored without a prefix of 6 and a suffix of 13 bytes")
                    for way, extra, _ in ways if "binned" in way]
    layouts += [("affixed", affixed_ways)]
    layouts += [(n, sorted_ways) for n in ("duckdb-sorted-files", "dictionary-sorted-files")]
    layouts += [("affixed-sorted-files", [(way, extra, "without a suffix of 13 bytes" if way == "merged" else said)
                                          for way, extra, said in sorted_ways])]
    layouts += [("duckdb-one-order", one_way), ("dictionary-one-order", order_ways)]
    layouts += [("duckdb-ranges", ranges_ways)]
    return compare_ways(binary, base, "repeated text", layouts, REPEATED_SQL)


def compare_ways(binary, base, what, layouts, sql, forced=True):
    """`dqgate check -v k.dq` (the fingerprint strategy, nothing kept, unless
    not `forced`) of each staged directory `name` under `base`, each way of
    `layouts` (`(name, [(way, env, said)])`), against DuckDB's `sql`; each
    way must say `said` on stderr. A way's `--flag` entries are arguments
    of the check, the rest its environment. Returns (checked, failures)."""
    checked = failures = 0
    for name, ways in layouts:
        theirs = duckdb_values(f"{base}/{name}", sql)
        for way, extra, said in ways:
            args = [f"{k}={v}" for k, v in extra.items() if k.startswith("--")]
            extra = {k: v for k, v in extra.items() if not k.startswith("--")}
            if forced:
                extra = dict(DQGATE_TEST_KEY_STRATEGY="fingerprint", DQGATE_TEST_KEEP_BYTES="0", **extra)
            env = dict(os.environ, **extra)
            out = subprocess.run([binary, "check", "k.dq", "--staged", name, "-v", "--format", "json", *args],
                                 capture_output=True, text=True, cwd=base, env=env)
            if out.returncode not in (0, 1):
                sys.exit(f"dqgate check of {what} ({name}, {way}) failed (exit {out.returncode}): {out.stderr}")
            ours = [c["value"] for c in json.loads(out.stdout)["checks"]]
            for metric, o, t in zip(sql, ours, theirs):
                checked += 1
                if o != t:
                    failures += 1
                    print(f"MISMATCH {what} ({name}, {way}): {metric}: dqgate {o!r}, duckdb {t!r}")
            checked += 1
            if said not in out.stderr:
                failures += 1
                print(f"MISMATCH {what} ({name}, {way}) did not say {said!r}:\n{out.stderr}")
    return checked, failures


def crosscheck_template_text(binary, work):
    """Generated ids of one length whose hex digits sit between bytes every
    value shares (the text strategy's template form), 60,000 rows of 20,000
    values, 4% null: by pyarrow, and uppercase SKUs by DuckDB, each packed
    exactly (typed as a dictionary, left to fingerprints); the same ids with
    a value of the other case now and then (the template falls back to
    fingerprints from the start); and in one sorted file (left to the
    fingerprint's count in order, as the footers say). Returns (checked,
    failures)."""
    rng = random.Random(20261207)
    base = os.path.join(work, "template-text")
    shutil.rmtree(base, ignore_errors=True)
    numbers = [rng.randrange(10**8) for _ in range(20_000)]
    picks = [None if rng.random() < 0.04 else rng.choice(numbers) for _ in range(60_000)]
    ids = [None if n is None else f"cust-{n:08d}@shop.example" for n in picks]
    skus = [None if n is None else f"SKU-{n % 65_536:04X}-{n % 999_983:06d}-EU" for n in picks]
    # Every 500th row a lowercase letter where the digits go (never the
    # least or the greatest value, which the template is read from).
    least, most = min(n for n in picks if n is not None), max(n for n in picks if n is not None)
    misfit = [v if i % 500 or picks[i] in (None, least, most) else v[:-14] + "x" + v[-13:]
              for i, v in enumerate(ids)]
    layouts = {"ids": pa.array(ids, pa.string()), "ids-dictionary": pa.array(ids, pa.string()).dictionary_encode(),
               "ids-misfit": pa.array(misfit, pa.string())}
    for name, col in layouts.items():
        os.makedirs(f"{base}/{name}")
        pq.write_table(pa.table({"k": col}), f"{base}/{name}/part-0.parquet", row_group_size=15_000)
    con = duckdb.connect()
    con.register("s", pa.table({"k": pa.array(skus, pa.string()), "i": pa.array(ids, pa.string())}))
    os.makedirs(f"{base}/skus-duckdb")
    con.execute(f"COPY (SELECT k FROM s) TO '{base}/skus-duckdb/part-0.parquet' (ROW_GROUP_SIZE 20000)")
    os.makedirs(f"{base}/ids-sorted")
    con.execute(f"COPY (SELECT i AS k FROM s ORDER BY i NULLS FIRST) TO '{base}/ids-sorted/part-0.parquet' "
                "(ROW_GROUP_SIZE 15000)")
    with open(f"{base}/k.dq", "w") as fh:
        fh.write(REPEATED_RULES)
    packed = [("packed", {}, "values packed as 26-byte values shaped cust-########@shop.example")]
    # A dictionary-typed column is left to fingerprints (their first pass
    # tallies its pages' dictionaries by index).
    layouts = [("ids", packed), ("ids-dictionary", [("fingerprints", {}, "repeated fingerprint(s)")])]
    layouts += [("skus-duckdb", [("packed", {}, "values packed as 18-byte values shaped SKU-####-######-EU, "
                                  "each # a hex digit (uppercase)")])]
    layouts += [("ids-misfit", [("fallen back", {}, "which is not 26-byte values shaped")])]
    # (Nothing kept, as of large files: small ones keep their key column.)
    layouts += [("ids-sorted", [("in order", {"DQGATE_TEST_KEEP_BYTES": "0"}, "as the footers' ranges said")])]
    return compare_ways(binary, base, "template text", layouts, REPEATED_SQL, forced=False)


PLACED_RULES = """table t
check duplicate_count(u, n) nulls not distinct >= 0
check duplicate_count(n, u, c) nulls distinct >= 0
check distinct_count(u) >= 0
"""

PLACED_SQL = [
    "(SELECT count(*) FROM (SELECT u, n FROM t GROUP BY u, n HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT n, u, c FROM t WHERE n IS NOT NULL AND u IS NOT NULL AND c IS NOT NULL"
    " GROUP BY n, u, c HAVING count(*) > 1))",
    "count(DISTINCT u)",
]


def crosscheck_placed_composites(binary, work):
    """Composite keys of text and integer parts that repeat in a few rows
    (a retried load: 0.4% of the rows copies of earlier ones, 1% of each
    part null), written by DuckDB (one page a row group, no page index)
    and by pyarrow (small pages, a dictionary part): the verification reads
    only the candidates' rows, where the first pass placed them (less
    those told apart by their hashes' other bits: many, with fingerprints
    cut to 24 bits), and agrees with DuckDB; and with the places not kept,
    reading every row again. Returns (checked, failures)."""
    rng = random.Random(20261207)
    base = os.path.join(work, "placed")
    table = composite_table(rng, 90_000, 0.004)
    write_composites(base, table, "(SELECT u, n, c::VARCHAR AS c FROM read_parquet('{base}/pyarrow/*.parquet'))")
    ways = [("placed", {}, "read where the scan placed them"),
            # Fingerprints cut to 24 bits meet: rows told apart by the rest.
            ("placed, cut", {"DQGATE_TEST_FINGERPRINT_BITS": "24"}, "read where the scan placed them"),
            ("not placed", {"DQGATE_TEST_PLACES": "0"}, "the key columns read again")]
    layouts = [(name, ways) for name in ("duckdb", "pyarrow")]
    return compare_ways(binary, base, "placed composites", layouts, PLACED_SQL)


def composite_table(rng, n, copies):
    """`n` rows of composite keys (`u` text of several alphabets, `n` a
    64-bit integer, `c` a dictionary of three values), a share `copies` of
    the rows copies of earlier ones (a retried load), 1% of each part
    null."""
    text = lambda i: "".join(rng.choice(ALPHABETS[i % 4]) for _ in range(rng.randint(0, 24))) + str(i)
    u, num = [text(i) for i in range(n)], [rng.randrange(-2**40, 2**40) for _ in range(n)]
    c = [rng.choice(["EU", "US", "ÅP"]) for _ in range(n)]
    for i in range(1, n):
        if rng.random() < copies:
            j = rng.randrange(i)
            u[i], num[i], c[i] = u[j], num[j], c[j]
    nulled = lambda xs: [None if rng.random() < 0.01 else x for x in xs]
    return pa.table({"u": pa.array(nulled(u), pa.string()), "n": pa.array(nulled(num), pa.int64()),
                     "c": pa.array(nulled(c), pa.string()).dictionary_encode()})


def write_composites(base, table, duckdb_select):
    """`table` under `base` as pyarrow writes it (small pages, row groups of
    30,000 rows) and as DuckDB writes `duckdb_select` (`{base}` filled in;
    row groups of 40,000 rows, a page each), with PLACED_RULES."""
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(f"{base}/pyarrow")
    pq.write_table(table, f"{base}/pyarrow/part-0.parquet", row_group_size=30_000, data_page_size=8192)
    os.makedirs(f"{base}/duckdb")
    duckdb.connect().execute(f"COPY {duckdb_select.format(base=base)} "
                             f"TO '{base}/duckdb/part-0.parquet' (ROW_GROUP_SIZE 40000)")
    with open(f"{base}/k.dq", "w") as fh:
        fh.write(PLACED_RULES)


def crosscheck_binned_composites(binary, work):
    """Composite keys each of whose rows is loaded twice: by pyarrow
    shuffled, and by DuckDB appended twice in order. Their keys are
    binned in the first pass from the first row group on, or from a later
    one (those before read again at the end), and in bins written to
    disk; binned after the count found most rows a candidate's; and
    verified by round with bins off: each agrees with DuckDB. Returns
    (checked, failures)."""
    rng = random.Random(20261208)
    base = os.path.join(work, "binned")
    once = composite_table(rng, 45_000, 0.0)
    twice = pa.concat_tables([once, once])
    order = list(range(twice.num_rows))
    rng.shuffle(order)
    once_sql = ("(SELECT u, n, c::VARCHAR AS c FROM read_parquet('{base}/pyarrow/*.parquet') "
                "QUALIFY row_number() OVER (PARTITION BY u, n, c) = 1 ORDER BY u, n, c)")
    write_composites(base, twice.take(pa.array(order)), f"({once_sql} UNION ALL {once_sql})")
    said = "binning the exact keys from row group"
    ways = [("binned", {"DQGATE_TEST_BIN_ROWS": "1"}, said),
            # A run of one row group never reaches a later one: its keys
            # are binned after the count instead.
            ("binned later", {"DQGATE_TEST_BIN_ROWS": "20000"}, "binning the exact keys"),
            ("binned to disk", {"DQGATE_TEST_BIN_ROWS": "1", "DQGATE_TEST_BIN_BYTES": "65536"}, "written to disk"),
            ("binned after the count", {}, "read every row again, binning"),
            ("verified by round", {"DQGATE_TEST_BIN_ROWS": "0"}, "the key columns read again")]
    layouts = [(name, ways) for name in ("duckdb", "pyarrow")]
    return compare_ways(binary, base, "binned composites", layouts, PLACED_SQL)


HOT_RULES = """table hot
check distinct_count(i) >= 0
check duplicate_count(i) >= 0
check distinct_count(s) >= 0
check duplicate_count(s) >= 0
check distinct_count(l) >= 0
check duplicate_count(l) >= 0
check duplicate_count(s, i) >= 0
check primary_key(l)
"""
HOT_SQL = [
    "count(DISTINCT i)",
    "(SELECT count(*) FROM (SELECT i FROM t WHERE i IS NOT NULL GROUP BY i HAVING count(*) > 1))",
    "count(DISTINCT s)",
    "(SELECT count(*) FROM (SELECT s FROM t WHERE s IS NOT NULL GROUP BY s HAVING count(*) > 1))",
    "count(DISTINCT l)",
    "(SELECT count(*) FROM (SELECT l FROM t WHERE l IS NOT NULL GROUP BY l HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT s, i FROM t WHERE s IS NOT NULL AND i IS NOT NULL GROUP BY s, i"
    " HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT l FROM t WHERE l IS NOT NULL GROUP BY l HAVING count(*) > 1))"
    " + count(*) - count(l)",
]


def crosscheck_hot_keys(binary, work):
    """Keys with one hot value among nearly unique ones (a sentinel such as
    0 or `unknown` in a share of the rows, so that one radix partition
    holds its every row): an int64 key, a short text key, a long text key
    (fingerprinted) and a composite, with nulls. Written by DuckDB, by
    pyarrow with a dictionary that falls back to plain pages within a
    column chunk, and by pyarrow in DELTA_BYTE_ARRAY pages of format 2.0
    (zstd). Each agrees with DuckDB. Returns (checked, failures)."""
    rng = random.Random(20261209)
    base = os.path.join(work, "hot")
    shutil.rmtree(base, ignore_errors=True)
    n = 120_000
    nulled = lambda x: None if rng.random() < 0.02 else x
    i = [nulled(0 if rng.random() < 0.5 else rng.randrange(-2**62, 2**62)) for _ in range(n)]
    s = [nulled("unknown" if rng.random() < 0.3 else f"c{rng.randrange(10**7)}") for _ in range(n)]
    long_text = lambda: "customer-" + "".join(rng.choice(ALPHABETS[rng.randrange(4)]) for _ in range(30))
    pool = [long_text() for _ in range(n)]
    l = [nulled("unknown-customer-placeholder" if rng.random() < 0.3 else rng.choice(pool)) for _ in range(n)]
    table = pa.table({"i": pa.array(i, pa.int64()), "s": pa.array(s, pa.string()), "l": pa.array(l, pa.string())})
    for d in ("pyarrow-fallback", "pyarrow-delta", "duckdb"):
        os.makedirs(f"{base}/{d}")
    pq.write_table(table, f"{base}/pyarrow-fallback/part-0.parquet", row_group_size=50_000,
                   dictionary_pagesize_limit=16_384, data_page_size=8_192)
    pq.write_table(table, f"{base}/pyarrow-delta/part-0.parquet", row_group_size=40_000, use_dictionary=False,
                   column_encoding={"s": "DELTA_BYTE_ARRAY", "l": "DELTA_BYTE_ARRAY", "i": "DELTA_BINARY_PACKED"},
                   data_page_version="2.0", compression="zstd")
    duckdb.connect().execute(f"COPY (SELECT * FROM read_parquet('{base}/pyarrow-fallback/*.parquet')) "
                             f"TO '{base}/duckdb/part-0.parquet' (ROW_GROUP_SIZE 30000)")
    with open(f"{base}/hot.dq", "w") as fh:
        fh.write(HOT_RULES)
    checked = failures = 0
    for name in ("duckdb", "pyarrow-fallback", "pyarrow-delta"):
        theirs = duckdb_values(f"{base}/{name}", HOT_SQL)
        ours = [c["value"] for c in run_json(binary, ["check", "hot.dq", "--staged", name], base)["checks"]]
        for metric, o, t in zip(HOT_SQL, ours, theirs):
            checked += 1
            if o != t:
                failures += 1
                print(f"MISMATCH hot keys ({name}): {metric}: dqgate {o!r}, duckdb {t!r}")
    return checked, failures


LONG_RUN_RULES = """table runs
check distinct_count(d) >= 0
check duplicate_count(d) >= 0
check distinct_count(c) >= 0
check duplicate_count(c) >= 0
check duplicate_count(d, i) >= 0
check duplicate_count(i) >= 0
check unique(j)
check distinct_count(i) >= 0
check distinct_count(n) >= 0
check unique(m)
"""
LONG_RUN_SQL = [
    "count(DISTINCT d)",
    "(SELECT count(*) FROM (SELECT d FROM t WHERE d IS NOT NULL GROUP BY d HAVING count(*) > 1))",
    "count(DISTINCT c)",
    "(SELECT count(*) FROM (SELECT c FROM t WHERE c IS NOT NULL GROUP BY c HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT d, i FROM t GROUP BY d, i HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT i FROM t GROUP BY i HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT j FROM t GROUP BY j HAVING count(*) > 1))",
    "count(DISTINCT i)",
    "count(DISTINCT n)",
    "(SELECT count(*) FROM (SELECT m FROM t GROUP BY m HAVING count(*) > 1))",
]


def crosscheck_long_runs(binary, work):
    """Columns in order with runs of one value longer than the ordered
    scan keeps of different keys (1,048,576 rows): a date column whose
    runs cross the boundary of two DuckDB files and a constant column,
    counted by the ordered scan while streaming, and a composite with the
    date leading, which gives up its ordered scan for the packed one; and
    integer keys in a dense range (the bitmap pass), `i` every key two or
    three times, `j` four keys three times and the rest twice, whose
    samples must be DuckDB's top five, `m` each of 50,000 keys about 50
    times (enough to count repeats in a byte per key) and three keys
    thousands of times (past the byte's 256), and whose distinct counts
    (`n` with nulls, an int32) are the set bits of the same bitmap. Each agrees with
    DuckDB, the ordered scan is the one that counted the single columns in
    order, and the bitmap the one that counted the dense ones. Returns
    (checked, failures)."""
    base = os.path.join(work, "runs")
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(f"{base}/staged")
    con = duckdb.connect()
    rows, cut = 2_600_000, 1_300_000
    keys = ("DATE '2026-01-01' + (i // 1_200_000)::INT AS d, 42::BIGINT AS c, "
            "(i % 1_000_000)::BIGINT AS i, (i % 1_299_998)::BIGINT AS j, "
            "CASE WHEN i % 7 = 0 THEN NULL ELSE (i % 500_000)::INT END AS n, "
            "(CASE WHEN i % 100 = 0 THEN i % 3 ELSE hash(i) % 50_000 END)::BIGINT AS m")
    for n, where in enumerate((f"i < {cut}", f"i >= {cut}")):
        con.execute(f"COPY (SELECT {keys} FROM range({rows}) t(i) WHERE {where} ORDER BY t.i) "
                    f"TO '{base}/staged/part-{n}.parquet'")
    with open(f"{base}/runs.dq", "w") as fh:
        fh.write(LONG_RUN_RULES)
    theirs = duckdb_values(f"{base}/staged", LONG_RUN_SQL)
    out = subprocess.run([binary, "check", "runs.dq", "--staged", "staged", "--format", "json", "-v"],
                         capture_output=True, text=True, cwd=base)
    ours = [c["value"] for c in json.loads(out.stdout)["checks"]]
    checked = failures = 0
    for metric, o, t in zip(LONG_RUN_SQL, ours, theirs):
        checked += 1
        if o != t:
            failures += 1
            print(f"MISMATCH long runs: {metric}: dqgate {o!r}, duckdb {t!r}")
    for column in ("j", "m"):
        check = next(c for c in json.loads(out.stdout)["checks"] if c["name"] == f"unique({column})")
        samples = [(s["key"][column], s["rows"]) for s in check["samples"]]
        top = duckdb.connect().execute(
            f"SELECT {column}, count(*) AS n FROM read_parquet('{base}/staged/*.parquet') "
            f"GROUP BY {column} HAVING n > 1 ORDER BY n DESC, {column} LIMIT 5").fetchall()
        checked += 1
        if samples != [tuple(r) for r in top]:
            failures += 1
            print(f"MISMATCH long runs: unique({column}) samples: dqgate {samples}, duckdb {top}")
    explain = subprocess.run([binary, "explain", "runs.dq", "--staged", "staged"],
                             capture_output=True, text=True, cwd=base).stdout
    for column in ("i", "n"):
        checked += 1
        if f"distinct values of {column}, by a bitmap" not in explain:
            failures += 1
            print(f"MISMATCH long runs: distinct_count({column}) is not counted by the bitmap:\n{explain}")
    for column in ("d", "c"):
        checked += 1
        if f"runs of equal {column} checked while streaming" not in out.stderr:
            failures += 1
            print(f"MISMATCH long runs: {column} was not counted by the ordered scan:\n{out.stderr}")
    return checked, failures


def key_type_columns(rng, n):
    """A key column of every type a producer may write (name -> array of `n`
    rows, values drawn with repeats, 5% null)."""
    def pick(pool):
        return [None if rng.random() < 0.05 else rng.choice(pool) for _ in range(n)]
    m = n // 2
    # No -0.0: `distinct_count` of floats keeps the fused aggregate's
    # semantics, which counts it apart from 0.0 (DuckDB does not); the key
    # checks fold it, and NaN is one value in both engines.
    floats = [float("nan"), 0.0, float("inf"), -float("inf"), 1.5, -2.25] + [i / 8 for i in range(m)]
    texts = ["", " ", "a", "a\x00", "\u00e9", "\u6f22\u5b57\U0001f642"] + [f"k{i:05d}-" + "x" * (i % 70) for i in range(m)]
    raw = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 24))) for _ in range(m)] + [b"", b"\x00"]
    fixed = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(m)]
    cols = {
        "i8": pa.array(pick(list(range(-128, 128))), pa.int8()),
        "u64": pa.array(pick([2**64 - 1 - i for i in range(m)] + [0]), pa.uint64()),
        "u32": pa.array(pick([2**32 - 1 - i for i in range(m)]), pa.uint32()),
        "bool": pa.array(pick([True, False]), pa.bool_()),
        "f64": pa.array(pick(floats), pa.float64()),
        "f32": pa.array(pick(floats), pa.float32()),
        "dec": pa.array(pick([Decimal(i) / 100 for i in range(-100, m)]), pa.decimal128(12, 2)),
        "dec38": pa.array(pick([Decimal(10**37 - i) for i in range(m)]), pa.decimal128(38, 0)),
        "ts_tz": pa.array(pick([1_700_000_000_000_000 + 7 * i for i in range(m)]), pa.timestamp("us", tz="UTC")),
        "ts_ns": pa.array(pick([1_700_000_000_000_000_000 + 13 * i for i in range(m)]), pa.timestamp("ns")),
        "date": pa.array(pick([-25_567 + i for i in range(m)]), pa.date32()),
        "time": pa.array(pick([i * 1_000_003 % 86_400_000_000 for i in range(m)]), pa.time64("us")),
        "bin": pa.array(pick(raw), pa.binary()),
        "lbin": pa.array(pick(raw), pa.large_binary()),
        "fixed16": pa.array(pick(fixed), pa.binary(16)),
        "lstr": pa.array(pick(texts), pa.large_string()),
        "dict8": pa.array(pick(texts[:100]), pa.string()).dictionary_encode().cast(pa.dictionary(pa.int8(), pa.string())),
        "long": pa.array(pick(["x" * 70_000 + str(i) for i in range(30)] + [f"s{i}" for i in range(3_000)]),
                         pa.string()),
    }
    if hasattr(pa, "uuid"):
        cols["uuid"] = pa.array(pick(fixed), pa.uuid())
    if hasattr(pa, "string_view"):
        cols["sview"] = pa.array(pick(texts), pa.string_view())
    return cols


KEY_TYPE_RULES = """table t
check duplicate_count(k) >= 0
check duplicate_count(k) nulls not distinct >= 0
check distinct_count(k) >= 0
check duplicate_count(k, p) >= 0
"""

KEY_TYPE_SQL = [
    "(SELECT count(*) FROM (SELECT k FROM t WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1))",
    "(SELECT count(*) FROM (SELECT k FROM t GROUP BY k HAVING count(*) > 1))",
    "count(DISTINCT k)",
    "(SELECT count(*) FROM (SELECT k, p FROM t WHERE k IS NOT NULL AND p IS NOT NULL"
    " GROUP BY k, p HAVING count(*) > 1))",
]


def crosscheck_key_types(binary, work):
    """The key checks and `distinct_count` on a key of every column type a
    producer may write (integers of every width and sign, bool, floats with
    NaN and infinities, decimals up to 38 digits, timestamps with a zone and
    in nanoseconds, dates, times, binary of the three layouts, a UUID
    extension, text of every layout with empty, NUL and multi-byte values,
    a dictionary of int8 indices, 70 kB values), alone and beside an int32,
    two pyarrow files of 4,000-row row groups, by every strategy of the key
    engine and DataFusion's grouped pass. Returns (checked, failures)."""
    rng = random.Random(20261207)
    base = os.path.join(work, "key-types")
    shutil.rmtree(base, ignore_errors=True)
    n = 12_000
    parts = pa.array([None if rng.random() < 0.05 else rng.randrange(3) for _ in range(n)], pa.int32())
    checked = failures = 0
    for name, col in key_type_columns(rng, n).items():
        d = os.path.join(base, name)
        os.makedirs(d)
        for i in range(2):
            half = pa.table({"k": col.slice(i * n // 2, n // 2), "p": parts.slice(i * n // 2, n // 2)})
            pq.write_table(half, f"{d}/part-{i}.parquet", row_group_size=4_000)
        rules = f"{d}.dq"
        with open(rules, "w") as fh:
            fh.write(KEY_TYPE_RULES)
        want = duckdb_values(d, KEY_TYPE_SQL)
        # (A forced strategy that does not fit a type runs one that does.)
        for strategy in (None, "packed", "text", "fingerprint", "ordered", "grouped"):
            got = dqgate_values(binary, rules, d, [], strategy)
            for (metric, ours), theirs in zip(got, want):
                checked += 1
                if not same(ours, theirs):
                    failures += 1
                    print(f"MISMATCH key types {name} ({col.type}) strategy={strategy}: {metric}: "
                          f"dqgate {ours!r}, duckdb {theirs!r}")
    return checked, failures


def main():
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rules = os.path.join(work, "crosscheck.dq")
    with open(rules, "w") as fh:
        fh.write(RULES)
    write_with_duckdb(os.path.join(work, "duckdb"))
    write_with_pyarrow(os.path.join(work, "pyarrow"))
    failures = 0
    checked = 0
    for writer in ("duckdb", "pyarrow"):
        staged = os.path.join(work, writer)
        want = duckdb_values(staged)
        runs = [([], None), (["--scan-only"], None)]
        # Every strategy of the key engine, and DataFusion's grouped pass.
        runs += [([], s) for s in ("packed", "fingerprint", "ordered", "grouped")]
        # Fingerprints of key columns the scan does not keep (as of large
        # files): a single text key is hashed straight from these writers'
        # pages.
        runs += [([], "fingerprint, keeping nothing")]
        for extra, strategy in runs:
            got = dqgate_values(binary, rules, staged, extra, strategy)
            for (metric, ours), theirs in zip(got, want):
                checked += 1
                if not same(ours, theirs):
                    failures += 1
                    how = " ".join(extra + ([f"strategy={strategy}"] if strategy else []))
                    print(f"MISMATCH {writer} {how}: {metric}: dqgate {ours!r}, duckdb {theirs!r}")
    joins_checked, joins_failed = crosscheck_joins(binary, os.path.abspath(work))
    checked += joins_checked
    failures += joins_failed
    dict_checked, dict_failed = crosscheck_dictionary_lookup(binary, os.path.abspath(work))
    checked += dict_checked
    failures += dict_failed
    rep_checked, rep_failed = crosscheck_repeated_text(binary, os.path.abspath(work))
    checked += rep_checked
    failures += rep_failed
    template_checked, template_failed = crosscheck_template_text(binary, os.path.abspath(work))
    checked += template_checked
    failures += template_failed
    placed_checked, placed_failed = crosscheck_placed_composites(binary, os.path.abspath(work))
    checked += placed_checked
    failures += placed_failed
    binned_checked, binned_failed = crosscheck_binned_composites(binary, os.path.abspath(work))
    checked += binned_checked
    failures += binned_failed
    hot_checked, hot_failed = crosscheck_hot_keys(binary, os.path.abspath(work))
    checked += hot_checked
    failures += hot_failed
    runs_checked, runs_failed = crosscheck_long_runs(binary, os.path.abspath(work))
    checked += runs_checked
    failures += runs_failed
    types_checked, types_failed = crosscheck_key_types(binary, os.path.abspath(work))
    checked += types_checked
    failures += types_failed
    print(f"crosscheck: {checked - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
