"""Key checks on production-shaped keys: dqgate vs DuckDB vs the decode floor.

    python benches/keys/run.py --bin target/release/dqgate [--data /work/benchdata]
        [--sizes 10M 50M] [--tpch] [--across] [--text] [--reps 3] [--threads 2] [--memory-limit 256MiB]

For every workload, in one run and on the same files (warm page cache, one
warm-up run discarded, median of --reps whole processes under /usr/bin/time):

- dqgate: `dqgate check RULES --staged DIR --format json --threads T`;
- DuckDB: the fastest plain SQL a DuckDB user writes for the same answer
  (`GROUP BY key HAVING count(*) > 1`, `count(DISTINCT ...)`, `NOT EXISTS`),
  in a fresh `python -c` process with `SET threads = T`;
- the floor: dqgate reading only the key columns (`count(where ...)` over
  them with `--scan-only`): what decoding the keys costs.

Each dqgate value is compared with DuckDB's; a difference prints MISMATCH and
the script exits 1. Data comes from benches/keys/gen.py (DIR/keys-SIZE),
benches/keys/gen_text.py (DIR/text-SIZE, with --text) and from tpchgen-cli
(DIR/tpch-sf10, with --tpch).

With --across, `unique(order_id) across published` for each size: the
first seven of the eight files of DIR/keys-SIZE are published by dqgate as
seven days of a Hive table (hard links, DIR/across-SIZE/table), and the last
file is the staged day checked against them (DuckDB: a semi-join of the
staged file with the seven published files).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

KEYS = [
    # name, rules, floor rules, DuckDB SQL over {t}, verdict line whose value DuckDB gives
    ("unique(order_id), scattered int64", "unique_scattered.dq", "floor_order_id.dq",
     "SELECT count(*) FROM (SELECT order_id FROM {t} WHERE order_id IS NOT NULL GROUP BY order_id HAVING count(*) > 1)"),
    ("primary_key(store_id, order_id)", "pk_composite.dq", "floor_store_order.dq",
     "SELECT (SELECT count(*) FROM (SELECT 1 FROM {t} WHERE store_id IS NOT NULL AND order_id IS NOT NULL "
     "GROUP BY store_id, order_id HAVING count(*) > 1)) + (SELECT count(*) FROM {t} WHERE store_id IS NULL OR order_id IS NULL)"),
    ("unique(event_id), 32-char hex strings", "unique_string.dq", "floor_event_id.dq",
     "SELECT count(*) FROM (SELECT event_id FROM {t} WHERE event_id IS NOT NULL GROUP BY event_id HAVING count(*) > 1)"),
    ("unique(event_uuid), UUID text", "unique_uuid.dq", "floor_event_uuid.dq",
     "SELECT count(*) FROM (SELECT event_uuid FROM {t} WHERE event_uuid IS NOT NULL GROUP BY event_uuid HAVING count(*) > 1)"),
    ("unique(tenant_id, event_ts), time order", "unique_time.dq", "floor_tenant_ts.dq",
     "SELECT count(*) FROM (SELECT 1 FROM {t} WHERE tenant_id IS NOT NULL AND event_ts IS NOT NULL "
     "GROUP BY tenant_id, event_ts HAVING count(*) > 1)"),
    ("unique(event_uuid, store_id), UUID text and int32", "unique_uuid_store.dq", "floor_uuid_store.dq",
     "SELECT count(*) FROM (SELECT 1 FROM {t} WHERE event_uuid IS NOT NULL AND store_id IS NOT NULL "
     "GROUP BY event_uuid, store_id HAVING count(*) > 1)"),
    ("distinct_count(order_id)", "distinct_scattered.dq", "floor_order_id.dq",
     "SELECT count(DISTINCT order_id) FROM {t}"),
    ("distinct_count(event_id), 32-char hex strings", "distinct_string.dq", "floor_event_id.dq",
     "SELECT count(DISTINCT event_id) FROM {t}"),
]

TPCH = [
    ("TPC-H SF10 primary_key(l_orderkey, l_linenumber), key order", "tpch_pk.dq", "floor_tpch_pk.dq",
     "SELECT (SELECT count(*) FROM (SELECT 1 FROM {t} GROUP BY l_orderkey, l_linenumber HAVING count(*) > 1)) "
     "+ (SELECT count(*) FROM {t} WHERE l_orderkey IS NULL OR l_linenumber IS NULL)"),
    ("TPC-H SF10 values(l_orderkey) in orders(o_orderkey)", "tpch_ref.dq", "floor_tpch_ref.dq",
     "SELECT count(*) FROM {t} l WHERE l_orderkey IS NOT NULL AND NOT EXISTS "
     "(SELECT 1 FROM {o} o WHERE o.o_orderkey = l.l_orderkey)"),
]


# Text keys that are neither hex nor short (benches/keys/gen_text.py,
# DIR/text-SIZE): the fingerprint strategy and its verification pass.
TEXT = [
    w
    for c, shape in [("ref_id", "22 random letters and digits"), ("b64_id", "base64 of 16 bytes"),
                     ("code", "business code, 6-28 chars"), ("email", "e-mail address"),
                     ("path", "URL path")]
    for w in [
        (f"unique({c}), {shape}", f"text_unique_{c}.dq", f"floor_{c}.dq",
         f"SELECT count(*) FROM (SELECT {c} FROM {{t}} WHERE {c} IS NOT NULL GROUP BY {c} HAVING count(*) > 1)"),
        (f"distinct_count({c}), {shape}", f"text_distinct_{c}.dq", f"floor_{c}.dq",
         f"SELECT count(DISTINCT {c}) FROM {{t}}"),
    ]
] + [
    # A composite of two text parts.
    ("unique(ref_id, path), two text parts", "text_unique_ref_id_path.dq", "floor_ref_id_path.dq",
     "SELECT count(*) FROM (SELECT 1 FROM {t} WHERE ref_id IS NOT NULL AND path IS NOT NULL "
     "GROUP BY ref_id, path HAVING count(*) > 1)"),
]


# The ref_id column typed as an Arrow dictionary (pandas categoricals,
# pyarrow's dictionary_encode), written once by pyarrow from DIR/text-SIZE.
TEXT_DICT = [
    ("unique(ref_id), dictionary-typed", "text_unique_ref_id.dq", "floor_ref_id.dq",
     "SELECT count(*) FROM (SELECT ref_id FROM {t} WHERE ref_id IS NOT NULL GROUP BY ref_id HAVING count(*) > 1)"),
    ("distinct_count(ref_id), dictionary-typed", "text_distinct_ref_id.dq", "floor_ref_id.dq",
     "SELECT count(DISTINCT ref_id) FROM {t}"),
]


def dictionary_typed(python, data, size):
    """DIR/text-SIZE-dict: ref_id of DIR/text-SIZE as a dictionary of text."""
    src = os.path.join(data, f"text-{size}")
    out = os.path.join(data, f"text-{size}-dict")
    if not os.path.exists(os.path.join(out, "_generated")):
        os.makedirs(out, exist_ok=True)
        code = (
            "import glob, os, sys, pyarrow.parquet as pq\n"
            "src, out = sys.argv[1], sys.argv[2]\n"
            "for f in sorted(glob.glob(src + '/*.parquet')):\n"
            "    t = pq.read_table(f, columns=['ref_id'])\n"
            "    t = t.set_column(0, 'ref_id', t.column(0).dictionary_encode())\n"
            "    pq.write_table(t, os.path.join(out, os.path.basename(f)))\n"
            "open(os.path.join(out, '_generated'), 'w').write('')\n"
        )
        subprocess.run([python, "-c", code, src, out], check=True)
    return out


# A lookup of a text key in a reference that lacks 1% of it (DuckDB-written:
# the staged ref_id values, deduplicated, without those whose hash ends 00).
TEXT_REF = ("values(ref_id) in known(ref_id), text, 1% of keys missing", "text_ref.dq", "floor_ref_id.dq",
            "SELECT count(*) FROM {t} s WHERE s.ref_id IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM {o} r WHERE r.ref_id = s.ref_id)")


# The same lookup with the staged ref_id typed as an Arrow dictionary.
TEXT_REF_DICT = ("values(ref_id) in known(ref_id), dictionary-typed, 1% of keys missing",) + TEXT_REF[1:]
# The same lookup of the e-mail column (text-50M and text-100M hold no
# ref_id since session 52): 50M nearly distinct addresses against 49.5M.
EMAIL_KNOWN = ("values(email) in known(email), text, 1% of keys missing", "email_known.dq", "floor_email.dq",
               "SELECT count(*) FROM {t} s WHERE s.email IS NOT NULL AND NOT EXISTS "
               "(SELECT 1 FROM {o} r WHERE r.email = s.email)")


def has_column(python, d, column):
    """Whether the Parquet files of DIR d have `column` (text-50M and
    text-100M have had no ref_id since session 52)."""
    files = sorted(f for f in os.listdir(d) if f.endswith(".parquet")) if os.path.isdir(d) else []
    if not files:
        return False
    code = f"import pyarrow.parquet as pq; print({column!r} in pq.read_schema({os.path.join(d, files[0])!r}).names)"
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return out.stdout.strip() == "True"


def rows_of(size):
    """The rows of a size such as `10M` or `500K`."""
    return int(size[:-1]) * {"K": 1000, "M": 1000_000}[size[-1]]


def duckdb_sql(python, sql):
    """Runs `sql` in DuckDB, in a fresh `python -c` process."""
    subprocess.run([python, "-c", f"import duckdb; duckdb.sql({sql!r})"], check=True)


# Every key of the pairs layouts, each twice: `customer-NNNNNNNN@example-mail.com`.
PAIR_KEY = "'customer-' || lpad((i // 2)::VARCHAR, 8, '0') || '@example-mail.com'"
# The e-mail ids fit the text strategy's template (hex digits between
# shared bytes), which packs them exactly; the same layouts with base64 ids
# of the same numbers (`z80ghJXVZe9m59/5+Ydk2g==`, which fit no form) keep
# measuring the fingerprint path: `b64` beside the layout's name.
B64_KEY = "to_base64(unhex(md5((i // 2)::VARCHAR)))"


def text_reference(python, data, size, column="ref_id"):
    """DIR/text-SIZE-ref (DIR/text-SIZE-emailref): the reference of TEXT_REF
    (EMAIL_KNOWN), written once by DuckDB."""
    src = os.path.join(data, f"text-{size}")
    out = os.path.join(data, f"text-{size}-ref" if column == "ref_id" else f"text-{size}-{column}ref")
    if not os.path.exists(os.path.join(out, "part-0.parquet")):
        os.makedirs(out, exist_ok=True)
        sql = (f"COPY (SELECT DISTINCT {column} FROM read_parquet('{src}/*.parquet') "
               f"WHERE {column} IS NOT NULL AND hash({column}) % 100 <> 0) TO '{out}/part-0.parquet'")
        duckdb_sql(python, sql)
    return out


# A fact table's text key looked up in a dimension (DuckDB-written: SIZE rows
# of 200,000 SKUs such as `SKU-8HQ2-031977`; the dimension lacks 1% of them).
DIM_REF = ("values(sku) in dim(sku), text, 200k SKUs, 1% missing", "dim_ref.dq", "floor_sku.dq",
           "SELECT count(*) FROM {t} s WHERE s.sku IS NOT NULL AND NOT EXISTS "
           "(SELECT 1 FROM {o} r WHERE r.sku = s.sku)")


def dimension(python, data, size):
    """(DIR/sku-SIZE, DIR/sku-SIZE-dim) for DIM_REF, written once by DuckDB."""
    rows = rows_of(size)
    fact, dim = os.path.join(data, f"sku-{size}"), os.path.join(data, f"sku-{size}-dim")
    if not os.path.exists(os.path.join(dim, "part-0.parquet")):
        os.makedirs(fact, exist_ok=True)
        os.makedirs(dim, exist_ok=True)
        sku = "'SKU-' || upper(substr(md5(h::VARCHAR), 1, 4)) || '-' || lpad(h::VARCHAR, 6, '0')"
        sql = (f"COPY (SELECT {sku} AS sku FROM (SELECT hash(i) % 200000 AS h FROM range({rows}) t(i))) "
               f"TO '{fact}/part-0.parquet'; "
               f"COPY (SELECT DISTINCT {sku} AS sku FROM range(200000) t(h) WHERE h % 100 <> 7) "
               f"TO '{dim}/part-0.parquet'")
        duckdb_sql(python, sql)
    return fact, dim


# A fact table's e-mail column (too long to pack) looked up in a dimension
# small enough for the in-place table (DuckDB-written: SIZE rows of 150,000
# addresses; the dimension lacks 1% of them), and the same column typed as
# an Arrow dictionary (pyarrow).
EMAIL_REF = ("values(email) in dim(email), 150k e-mail addresses, 1% missing", "email_ref.dq", "floor_email.dq",
             "SELECT count(*) FROM {t} s WHERE s.email IS NOT NULL AND NOT EXISTS "
             "(SELECT 1 FROM {o} r WHERE r.email = s.email)")
EMAIL_REF_DICT = ("values(email) in dim(email), dictionary-typed, 150k e-mail addresses, 1% missing",) + EMAIL_REF[1:]
def email_dimension(python, data, size):
    """(DIR/email-SIZE, DIR/email-SIZE-dict, DIR/email-SIZE-dim) for EMAIL_REF, written once."""
    rows = rows_of(size)
    fact, typed, dim = (os.path.join(data, f"email-{size}{s}") for s in ("", "-dict", "-dim"))
    if not os.path.exists(os.path.join(typed, "part-0.parquet")):
        for d in (fact, typed, dim):
            os.makedirs(d, exist_ok=True)
        e = ("'user.' || lpad((h % 150000)::VARCHAR, 6, '0') || '.' || substr(md5((h % 150000)::VARCHAR), 1, 10) "
             "|| '@example-mail.com'")
        code = (
            "import duckdb, pyarrow.parquet as pq, sys\n"
            "fact, typed, dim, rows, e = sys.argv[1:]\n"
            "duckdb.sql(f\"COPY (SELECT {e} AS email FROM (SELECT hash(i) AS h FROM range({rows}) t(i))) "
            "TO '{fact}/part-0.parquet'\")\n"
            "duckdb.sql(f\"COPY (SELECT {e} AS email FROM (SELECT i AS h FROM range(150000) t(i)) WHERE h % 100 <> 7) "
            "TO '{dim}/part-0.parquet'\")\n"
            "t = pq.read_table(f'{fact}/part-0.parquet')\n"
            "pq.write_table(t.set_column(0, 'email', t.column(0).dictionary_encode()), f'{typed}/part-0.parquet')\n"
        )
        subprocess.run([python, "-c", code, fact, typed, dim, str(rows), e], check=True)
    return fact, typed, dim
# The e-mail column's own key checks: 150,000 addresses repeated in SIZE
# rows, so that every row's fingerprint repeats and the verification files
# every row (plain, as DuckDB writes it, and typed as a dictionary).
EMAIL_REPEATED = [
    ("distinct_count(email), 150k addresses repeated", "text_distinct_email.dq", "floor_email.dq",
     "SELECT count(DISTINCT email) FROM {t}"),
    ("unique(email), 150k addresses repeated", "text_unique_email.dq", "floor_email.dq",
     "SELECT count(*) FROM (SELECT email FROM {t} WHERE email IS NOT NULL GROUP BY email HAVING count(*) > 1)"),
]
EMAIL_REPEATED_DICT = [(w[0] + ", dictionary-typed",) + w[1:] for w in EMAIL_REPEATED]
# Every key twice (`customer-NNNNNNNN@example-mail.com`, SIZE/2 of them),
# DuckDB-written: in key order, where each run's table of exact values
# holds every key and answers in one read; and scattered, where too few
# keys have repeated when a run's table grows past 65,536 of them, so it
# is given up and the key verified in a second read.
PAIRS = [
    ("distinct_count(k), every key twice, in key order", "text_distinct_pairs.dq", "floor_pairs.dq",
     "SELECT count(DISTINCT k) FROM {t}"),
    ("unique(k), every key twice, in key order", "text_unique_pairs.dq", "floor_pairs.dq",
     "SELECT count(*) FROM (SELECT k FROM {t} WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1)"),
]
PAIRS_SCATTERED = [(w[0].replace("in key order", "scattered"),) + w[1:] for w in PAIRS]
# Every key twice, in row groups of 122,880 rows each holding a range of
# keys in no order (a range-partitioned write not sorted within: Spark's
# `repartitionByRange`): the footers' ranges follow one another, the rows do
# not. And in key order but for the last 2% of rows, reversed: the order
# breaks near the end.
PAIRS_RANGES = [(w[0].replace("in key order", "row groups of key ranges, unsorted within"),) + w[1:]
                for w in PAIRS]
PAIRS_LATE = [(w[0].replace("in key order", "in key order but the last 2% reversed"),) + w[1:] for w in PAIRS]
# Every key twice, in FILES files each sorted by the key on its own, each row
# in a file drawn by hash (Spark's `repartition(FILES)` then
# `sortWithinPartitions("k")`, a hash-partitioned sorted write): the files'
# ranges overlap, so no one order runs across them.
SORTED_FILES = [2, 16, 200]
PAIRS_FILES = [(w[0].replace("in key order", f"{n} files each sorted"),) + w[1:] + (n,)
               for n in SORTED_FILES for w in PAIRS]
# A tenth of the keys twice, scattered (9/10 of SIZE keys, the first ninth
# of them twice): too few rows repeat for a run to keep its table of exact
# values, so the first pass counts fingerprints and the verification files
# a tenth of the rows' keys (1M candidates at 10M rows).
TENTH = [(w[0].replace("every key twice, in key order", "a tenth of the keys twice, scattered"),) + w[1:]
         for w in PAIRS]

# A hot value among unique keys (DuckDB-written, scattered by hash): an
# int64 key of which half the rows are 0 (a sentinel), a short text key
# (exactly packed) of which 30% of the rows are `unknown`, and a longer
# text key (fingerprinted) of which 30% are `unknown-customer-placeholder`.
# One radix partition then holds the hot value's every row.
HOT_LAYOUTS = [
    ("int", "int64, half the rows one value", "floor_hot_int.dq",
     "CASE WHEN hash(i) % 2 = 0 THEN 0 ELSE hash(i) // 3 END::BIGINT"),
    ("text", "short text, 30% of the rows one value", "floor_pairs.dq",
     "CASE WHEN hash(i) % 10 < 3 THEN 'unknown' ELSE 'c' || (hash(i) % 100000000)::VARCHAR END"),
    ("long", "long text, 30% of the rows one value", "floor_pairs.dq",
     "CASE WHEN hash(i) % 10 < 3 THEN 'unknown-customer-placeholder' ELSE 'customer-' || md5(i::VARCHAR) END"),
]
HOT = [(w[0].replace("every key twice, in key order", shape), w[1], floor, w[3])
       for _, shape, floor, _ in HOT_LAYOUTS for w in PAIRS]


def hot(python, data, size):
    """DIR/hot-SIZE-LAYOUT for each layout of HOT_LAYOUTS (two rows of HOT
    each), written once by DuckDB."""
    dirs = []
    for layout, _, _, k in HOT_LAYOUTS:
        d = os.path.join(data, f"hot-{size}-{layout}")
        if not os.path.exists(os.path.join(d, "part-0.parquet")):
            os.makedirs(d, exist_ok=True)
            duckdb_sql(python, f"COPY (SELECT {k} AS k FROM range({rows_of(size)}) t(i)) TO '{d}/part-0.parquet'")
        dirs += [d, d]
    return dirs


def pairs(python, data, size):
    """(DIR/pairs-SIZE-sorted, DIR/pairs-SIZE-scattered) for PAIRS, written once."""
    return pairs_in_orders(python, data, size, [("sorted", "i"), ("scattered", "hash(i)")])


def ranges_and_late(python, data, size):
    """(DIR/pairs-SIZE-ranges, DIR/pairs-SIZE-late) for PAIRS_RANGES and
    PAIRS_LATE, written once."""
    cut = rows_of(size) * 98 // 100
    late = f"CASE WHEN i >= {cut} THEN {cut + rows_of(size) - 1} - i ELSE i END"
    return pairs_in_orders(python, data, size, [("ranges", "i // 122880, hash(i)"), ("late", late)],
                           " (ROW_GROUP_SIZE 122880)")


def pairs_in_orders(python, data, size, orders, options="", key=PAIR_KEY, prefix="pairs"):
    """DIR/PREFIX-SIZE-NAME for each (NAME, ORDER) of `orders`: every key of
    `key` twice, in that order, one DuckDB file (COPY `options`),
    written once."""
    dirs = []
    for name, order in orders:
        d = os.path.join(data, f"{prefix}-{size}-{name}")
        if not os.path.exists(os.path.join(d, "part-0.parquet")):
            os.makedirs(d, exist_ok=True)
            duckdb_sql(python, f"COPY (SELECT {key} AS k FROM range({rows_of(size)}) t(i) "
                               f"ORDER BY {order}) TO '{d}/part-0.parquet'{options}")
        dirs.append(d)
    return dirs


def sorted_files(python, data, size, files, key=PAIR_KEY, prefix="pairs"):
    """DIR/PREFIX-SIZE-files-FILES for PAIRS_FILES, written once."""
    rows = rows_of(size)
    d = os.path.join(data, f"{prefix}-{size}-files-{files}")
    if not os.path.exists(os.path.join(d, f"part-{files - 1}.parquet")):
        os.makedirs(d, exist_ok=True)
        table = f"CREATE TABLE t AS SELECT {key} AS k, hash(i) % {files} AS p FROM range({rows}) t(i)"
        copy = f"COPY (SELECT k FROM t WHERE p = {{p}} ORDER BY k) TO '{d}/part-{{p}}.parquet'"
        code = f"import duckdb\nduckdb.sql({table!r})\nfor p in range({files}):\n    duckdb.sql({copy!r}.format(p=p))"
        subprocess.run([python, "-c", code], check=True)
    return d


def tenth(python, data, size, key=PAIR_KEY, prefix="tenth"):
    """DIR/PREFIX-SIZE-scattered for TENTH, written once."""
    rows = rows_of(size)
    d = os.path.join(data, f"{prefix}-{size}-scattered")
    if not os.path.exists(os.path.join(d, "part-0.parquet")):
        k = key.replace("i // 2", f"i % {rows * 9 // 10}")
        os.makedirs(d, exist_ok=True)
        sql = f"COPY (SELECT {k} AS k FROM range({rows}) t(i) ORDER BY hash(i)) TO '{d}/part-0.parquet'"
        duckdb_sql(python, sql)
    return d


# A composite key (the UUID text and int32 of DIR/keys-SIZE, SIZE/2 rows of
# it) loaded twice (`--twice`): appended twice in order (a retried load),
# shuffled, and in DuckDB's `ORDER BY hash(event_uuid, r)`, which puts the
# two rows of every key 2 to 3 million rows apart at 10M rows; and, the
# shape binning does not fit, a tenth of the keys twice (SIZE*9/10 keys),
# scattered.
UUID_STORE = KEYS[5]
TWICE_LAYOUTS = [
    ("appended", "every key twice, a batch appended twice"),
    ("shuffled", "every key twice, shuffled"),
    ("apart", "every key twice, the two rows 2-3M rows apart"),
    ("tenth", "a tenth of the keys twice, scattered"),
]
TWICE = [(f"unique(event_uuid, store_id), {shape}",) + UUID_STORE[1:] for _, shape in TWICE_LAYOUTS]


def twice(python, data, size):
    """DIR/uuid-SIZE-LAYOUT for each layout of TWICE_LAYOUTS, written once
    by DuckDB from DIR/keys-SIZE."""
    rows = rows_of(size)
    src = os.path.join(data, f"keys-{size}")
    dirs = [os.path.join(data, f"uuid-{size}-{layout}") for layout, _ in TWICE_LAYOUTS]
    if not all(os.path.exists(os.path.join(d, "part-0.parquet")) for d in dirs):
        for d in dirs:
            os.makedirs(d, exist_ok=True)
        k = f"SELECT event_uuid, store_id FROM read_parquet('{src}/*.parquet') LIMIT {rows // 2}"
        tenth = (f"SELECT event_uuid, store_id FROM (SELECT event_uuid, store_id, row_number() OVER () AS i "
                 f"FROM read_parquet('{src}/*.parquet') LIMIT {rows * 9 // 10}), range(2) t(r) "
                 f"WHERE r = 0 OR i <= {rows // 10} ORDER BY hash(event_uuid || '-' || r::VARCHAR)")
        code = (
            "import duckdb, sys\n"
            "c = duckdb.connect(); c.execute('SET preserve_insertion_order = true')\n"
            "c.execute('SET enable_progress_bar = false')\n"
            f"c.execute({('CREATE TABLE k AS ' + k)!r})\n"
            f"c.execute(\"COPY (SELECT * FROM k UNION ALL SELECT * FROM k) TO '{dirs[0]}/part-0.parquet'\")\n"
            f"c.execute(\"COPY (SELECT event_uuid, store_id FROM k, range(2) t(r) ORDER BY "
            f"hash(event_uuid || '-' || r::VARCHAR)) TO '{dirs[1]}/part-0.parquet'\")\n"
            f"c.execute(\"COPY (SELECT event_uuid, store_id FROM k, range(2) t(r) ORDER BY "
            f"hash(event_uuid, r)) TO '{dirs[2]}/part-0.parquet'\")\n"
            f"c.execute({('COPY (' + tenth + f') TO {chr(39)}{dirs[3]}/part-0.parquet{chr(39)}')!r})\n"
        )
        subprocess.run([python, "-c", code], check=True)
    return dirs


ACROSS = ("unique(order_id) across 7 published days", "across.dq", "floor_order_id.dq",
          "SELECT count(DISTINCT s.order_id) FROM {t} s WHERE s.order_id IS NOT NULL AND EXISTS "
          "(SELECT 1 FROM {o} p WHERE p.order_id = s.order_id)")


def across_table(dqgate, data, size):
    """(staged dir, published files glob dir): publishes days 1..7 once."""
    src = os.path.join(data, f"keys-{size}")
    files = sorted(f for f in os.listdir(src) if f.endswith(".parquet"))
    root = os.path.join(data, f"across-{size}")
    table, staged = os.path.join(root, "table"), os.path.join(root, "staged")
    if not os.path.exists(os.path.join(root, "_ready")):
        subprocess.run(["rm", "-rf", root], check=True)
        os.makedirs(staged)
        os.link(os.path.join(src, files[-1]), os.path.join(staged, files[-1]))
        rules = os.path.join(root, "publish.dq")
        open(rules, "w").write("table keys\npartitioned by day\ncheck row_count > 0\n")
        for day, f in enumerate(files[:-1], start=1):
            d = os.path.join(root, f"day{day}")
            os.makedirs(d)
            os.link(os.path.join(src, f), os.path.join(d, f))
            subprocess.run([dqgate, "publish", rules, "--staged", d, "--partition", f"day={day}",
                            "--table", table], check=True, capture_output=True)
        open(os.path.join(root, "_ready"), "w").write("")
    return staged, table


def timed(cmd, env=None):
    """Runs cmd under /usr/bin/time: (seconds, peak RSS in MB, stdout)."""
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name] + cmd,
                           capture_output=True, text=True, env=env)
        wall, rss = t.read().split()[-2:]
    if p.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr}")
    return float(wall), int(rss) / 1024, p.stdout, p.stderr


def duckdb_cmd(python, sql, threads, memory_limit=None):
    """DuckDB running `sql` on `threads` threads, under `memory_limit`
    (dqgate's spelling, e.g. 256MiB) when given, spilling to its default
    temporary directory."""
    limit = f"c.execute(\"SET memory_limit = '{memory_limit}'\"); " if memory_limit else ""
    code = (
        "import duckdb, json; c = duckdb.connect(); "
        f"c.execute('SET threads = {threads}'); c.execute('SET enable_progress_bar = false'); {limit}"
        f"print(json.dumps(c.execute({sql!r}).fetchone()[0]))"
    )
    return [python, "-c", code]


def median_runs(cmd, reps, warmup):
    runs = [timed(cmd) for _ in range(warmup + reps)][warmup:]
    wall = statistics.median(r[0] for r in runs)
    rss = statistics.median(r[1] for r in runs)
    return wall, rss, runs[-1][2], runs[-1][3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--data", default=os.environ.get("DQGATE_BENCH_DATA", "/work/benchdata"))
    ap.add_argument("--sizes", nargs="*", default=["10M"])
    ap.add_argument("--tpch", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--across", action="store_true")
    ap.add_argument("--text", action="store_true", help="text keys of DIR/text-SIZE (gen_text.py)")
    ap.add_argument("--twice", action="store_true", help="a composite key loaded twice (from DIR/keys-SIZE)")
    ap.add_argument("--memory-limit")
    ap.add_argument("--only", help="run workloads whose name contains this")
    a = ap.parse_args()
    python = os.path.join(a.data, "venv", "bin", "python")
    jobs = []
    for size in a.sizes:
        d = os.path.join(a.data, f"keys-{size}")
        if os.path.isdir(d):
            jobs += [(size, w, d, None) for w in KEYS]
        if a.text:
            t = os.path.join(a.data, f"text-{size}")
            jobs += [(size, w, t, None) for w in TEXT]
            if not a.only or any(a.only in w[0] for w in TEXT_DICT):
                td = dictionary_typed(python, a.data, size)
                jobs += [(size, w, td, None) for w in TEXT_DICT]
            # The references are written only when their rows are run.
            wants_ref = not a.only or a.only in TEXT_REF[0] or a.only in TEXT_REF_DICT[0]
            if wants_ref and not has_column(python, t, "ref_id"):
                print(f"(no ref_id in {t}: the values(ref_id) rows are left out)", file=sys.stderr)
                wants_ref = False
            if wants_ref and (not a.only or a.only in TEXT_REF[0]):
                jobs.append((size, TEXT_REF, t, text_reference(python, a.data, size)))
            if a.only and a.only in EMAIL_KNOWN[0]:
                jobs.append((size, EMAIL_KNOWN, t, text_reference(python, a.data, size, "email")))
            if wants_ref and (not a.only or a.only in TEXT_REF_DICT[0]):
                td = dictionary_typed(python, a.data, size)
                jobs.append((size, TEXT_REF_DICT, td, text_reference(python, a.data, size)))
            if not a.only or a.only in DIM_REF[0]:
                jobs.append((size, DIM_REF, *dimension(python, a.data, size)))
            if not a.only or a.only in EMAIL_REF[0] or a.only in EMAIL_REF_DICT[0]:
                fact, typed, dim = email_dimension(python, a.data, size)
                jobs += [(size, EMAIL_REF, fact, dim), (size, EMAIL_REF_DICT, typed, dim)]
            if not a.only or any(a.only in w[0] for w in EMAIL_REPEATED + EMAIL_REPEATED_DICT):
                fact, typed, _ = email_dimension(python, a.data, size)
                jobs += [(size, w, fact, None) for w in EMAIL_REPEATED]
                jobs += [(size, w, typed, None) for w in EMAIL_REPEATED_DICT]
            if not a.only or any(a.only in w[0] for w in PAIRS + PAIRS_SCATTERED):
                ordered, scattered = pairs(python, a.data, size)
                jobs += [(size, w, ordered, None) for w in PAIRS]
                jobs += [(size, w, scattered, None) for w in PAIRS_SCATTERED]
            if not a.only or any(a.only in w[0] for w in PAIRS_RANGES + PAIRS_LATE):
                ranges, late = ranges_and_late(python, a.data, size)
                jobs += [(size, w, ranges, None) for w in PAIRS_RANGES]
                jobs += [(size, w, late, None) for w in PAIRS_LATE]
            for w in PAIRS_FILES:
                if not a.only or a.only in w[0]:
                    jobs.append((size, w[:4], sorted_files(python, a.data, size, w[4]), None))
            if not a.only or any(a.only in w[0] for w in TENTH):
                jobs += [(size, w, tenth(python, a.data, size), None) for w in TENTH]
            # The shapes the template does not fit: base64 ids.
            b64 = [(w[0] + ", base64 ids",) + w[1:] for w in PAIRS_SCATTERED + TENTH]
            if not a.only or any(a.only in w[0] for w in b64):
                scattered = pairs_in_orders(python, a.data, size, [("scattered", "hash(i)")], key=B64_KEY,
                                            prefix="b64pairs")[0]
                jobs += [(size, w, scattered, None) for w in b64[:2]]
                jobs += [(size, w, tenth(python, a.data, size, B64_KEY, "b64tenth"), None) for w in b64[2:]]
            b64_files = [(w[0] + ", base64 ids",) + w[1:] for w in PAIRS_FILES if w[4] == 200]
            if not a.only or any(a.only in w[0] for w in b64_files):
                d = sorted_files(python, a.data, size, 200, B64_KEY, "b64pairs")
                jobs += [(size, w[:4], d, None) for w in b64_files]
            if not a.only or any(a.only in w[0] for w in HOT):
                jobs += [(size, w, d, None) for w, d in zip(HOT, hot(python, a.data, size))]
        if a.twice and (not a.only or any(a.only in w[0] for w in TWICE)):
            jobs += [(size, w, t, None) for w, t in zip(TWICE, twice(python, a.data, size))]
        if a.across:
            jobs.append((size, ACROSS, *across_table(a.bin, a.data, size)))
    if a.tpch:
        d = os.path.join(a.data, "tpch-sf10", "lineitem")
        o = os.path.join(a.data, "tpch-sf10", "orders")
        jobs += [("60M", w, d, o) for w in TPCH]
    print(f"threads {a.threads}, median of {a.reps} after {a.warmup} warm-up"
          + (f", --memory-limit {a.memory_limit}" if a.memory_limit else ""))
    print()
    print("| workload | rows | dqgate | DuckDB | floor | x DuckDB | x floor | bytes/row |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    work = tempfile.mkdtemp()
    for size, (name, rules, floor, sql), d, orders in jobs:
        if a.only and a.only not in name:
            continue
        rules_path = os.path.join(HERE, rules)
        table_args = []
        if rules == "across.dq":
            table_args = ["--table", orders, "--partition", "day=8"]
        if rules in ("tpch_ref.dq", "text_ref.dq", "dim_ref.dq", "email_ref.dq", "email_known.dq"):
            text = open(os.path.join(HERE, rules + ".in")).read()
            text = text.replace("ORDERS", orders).replace("REFERENCE", orders)
            rules_path = os.path.join(work, rules)
            open(rules_path, "w").write(text)
        extra = ["--threads", str(a.threads)]
        if a.memory_limit:
            extra += ["--memory-limit", a.memory_limit]
        # -v: the key passes' timing lines, printed below the table.
        ours = median_runs([a.bin, "check", rules_path, "--staged", d, "--format", "json", "-v"] + extra + table_args,
                           a.reps, a.warmup)
        # The floor of a join reads the key columns of both sides.
        both = {"across.dq": os.path.join(a.data, f"keys-{size}"), "tpch_ref.dq": None, "text_ref.dq": None,
                "dim_ref.dq": None, "email_ref.dq": None, "email_known.dq": None}
        floor_dir = both.get(rules) or d
        low = median_runs([a.bin, "check", os.path.join(HERE, floor), "--staged", floor_dir, "--scan-only"]
                          + ["--threads", str(a.threads)], a.reps, a.warmup)
        t = f"read_parquet('{d}/*.parquet')"
        o = f"read_parquet('{orders}/*.parquet')" if orders else ""
        if table_args:
            o = f"read_parquet('{orders}/**/*.parquet')"
        theirs = median_runs(duckdb_cmd(python, sql.format(t=t, o=o), a.threads, a.memory_limit), a.reps, a.warmup)
        verdict = json.loads(ours[2])
        value = verdict["checks"][0]["value"]
        want = json.loads(theirs[2])
        if value != want:
            print(f"!!!!!! MISMATCH {name} at {size}: dqgate {value}, DuckDB {want}", file=sys.stderr)
            failed = True
        rows = verdict["input"]["row_count"]
        print(f"| {name} | {size} | {ours[0]:.2f} s / {ours[1]:.0f} MB | {theirs[0]:.2f} s / {theirs[1]:.0f} MB "
              f"| {low[0]:.2f} s | {ours[0] / theirs[0]:.2f} | {ours[0] / low[0]:.2f} "
              f"| {ours[1] * 1024 * 1024 / rows:.1f} |", flush=True)
        for line in ours[3].splitlines():
            if "keys" in line or "audited" in line:
                print(f"  <!-- {line.strip()} -->", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
