"""Key shapes the other benches do not write, by DuckDB and pyarrow: long
and very long values, a skewed key, nulls and empty strings, multi-byte
UTF-8, composites, near duplicates, windows, one value, all nulls, files
each sorted, a dictionary that falls back to plain pages, DELTA_BYTE_ARRAY
and DELTA_LENGTH_BYTE_ARRAY pages, large_string and string_view, tiny row
groups, a dictionary-typed column with nulls.

    python benches/shapes/gen.py OUT_DIR [ROWS]      # ROWS: 4,000,000
    python benches/shapes/run.py DQGATE OUT_DIR [dqgate options]
"""
import os, sys, random, string
import duckdb, pyarrow as pa, pyarrow.parquet as pq
OUT = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 4_000_000
def ddb(name, sql, opts=""):
    d = os.path.join(OUT, name); os.makedirs(d, exist_ok=True)
    f = os.path.join(d, "part-0.parquet")
    if not os.path.exists(f):
        duckdb.sql(f"COPY ({sql}) TO '{f}' {opts}")
def rng_of(i): return f"hash({i})"
# A: long values, every key twice scattered
ddb("long_pairs", f"SELECT repeat(md5((i//2)::VARCHAR), 4) AS k FROM range({N}) t(i) ORDER BY hash(i)")
# A2: very long values, a tenth twice
ddb("very_long", f"SELECT repeat(md5((i % {N//20*9//10})::VARCHAR), 60) AS k FROM range({N//20}) t(i) ORDER BY hash(i+7)")
# B: skewed (zipf-like)
ddb("skewed", f"SELECT 'user_' || floor(pow((hash(i) % 1000000) / 1000000.0, 3) * 1000000)::BIGINT AS k FROM range({N}) t(i)")
# C: nulls and empties, keys repeated far apart
ddb("nulls_empty", f"SELECT CASE hash(i) % 10 WHEN 0 THEN NULL WHEN 1 THEN '' ELSE 'id' || (i % {N*3//4}) END AS k FROM range({N}) t(i)")
# D: multibyte, Poisson repeats
ddb("multibyte", f"SELECT '键-' || (hash(i) % {N//2}) || '-ü🙂' AS k FROM range({N}) t(i)")
# H: composite text+int, each combo 3 times scattered
ddb("comp_text_int", f"SELECT 'store-' || ((i//3) % 97) AS a, ((i//3) // 97)::INT AS b FROM range({N}) t(i) ORDER BY hash(i)")
# H2: composite text+text, Poisson
ddb("comp_text_text", f"SELECT md5((hash(i) % {N//3})::VARCHAR)[1:6] AS a, chr(65 + (hash(i*7) % 3)::INT) || ((hash(i) % {N//3}) % 1000)::VARCHAR AS b FROM range({N}) t(i)")
# K: near duplicates, same length, 10% dups
ddb("near_dups", f"SELECT repeat('x', 50) || lpad(printf('%x', CASE WHEN i % 10 = 0 THEN i + 1 ELSE i END), 12, '0') AS k FROM range({N}) t(i) ORDER BY hash(i)")
# M: every key 3 times, shuffled in windows of 10k
ddb("windows", f"SELECT 'w' || (i // 3)::VARCHAR AS k FROM range({N}) t(i) ORDER BY i // 10000, hash(i)")
# N: one value, and all null
ddb("one_value", f"SELECT 'same' AS k FROM range({N}) t(i)")
ddb("all_null", f"SELECT NULL::VARCHAR AS k FROM range({N}) t(i)")
# J: 5 files each sorted, each key 3 times overall
d = os.path.join(OUT, "files_sorted"); os.makedirs(d, exist_ok=True)
if not os.path.exists(os.path.join(d, "part-4.parquet")):
    duckdb.sql(f"CREATE TABLE j AS SELECT 'k' || lpad((i // 3)::VARCHAR, 9, '0') AS k, hash(i) % 5 AS p FROM range({N}) t(i)")
    for p in range(5):
        duckdb.sql(f"COPY (SELECT k FROM j WHERE p = {p} ORDER BY k) TO '{d}/part-{p}.parquet'")
# pyarrow shapes
def pa_write(name, table, files=1, **kw):
    d = os.path.join(OUT, name); os.makedirs(d, exist_ok=True)
    if os.path.exists(os.path.join(d, f"part-{files-1}.parquet")): return
    n = table.num_rows
    for f in range(files):
        pq.write_table(table.slice(f * n // files, (f + 1) * n // files - f * n // files), os.path.join(d, f"part-{f}.parquet"), **kw)
r = random.Random(7)
alpha = "ABCDEFGHJKMNPQRSTVWXYZ0123456789"
def ids(n, distinct, length=(10, 26)):
    base = ["acct-" + "".join(r.choices(alpha, k=r.randint(*length))) for _ in range(distinct)]
    return [base[r.randrange(distinct)] for _ in range(n)]
M = N // 2
# E: dictionary that falls back to plain mid row group
vals = ids(M, M // 3)
pa_write("dict_fallback", pa.table({"k": vals}), row_group_size=M // 2)
# F: DELTA_BYTE_ARRAY, data page v2, zstd, paths with 1% dups
paths = [f"/api/v2/customers/{r.randrange(M*100)}/orders/{j}" for j in range(M)]
for j in range(0, M, 100): paths[j] = paths[(j * 7919) % M]
pa_write("delta_v2", pa.table({"k": paths}), use_dictionary=False, column_encoding={"k": "DELTA_BYTE_ARRAY"},
         data_page_version="2.0", compression="zstd", row_group_size=M // 3)
pa_write("delta_len", pa.table({"k": paths}), use_dictionary=False, column_encoding={"k": "DELTA_LENGTH_BYTE_ARRAY"},
         compression="gzip", row_group_size=M // 4, files=2)
# G: large_string and string_view, pairs shuffled
pairs = [f"order-{x//2:08d}" for x in range(M)]; r.shuffle(pairs)
pa_write("large_string", pa.table({"k": pa.array(pairs, pa.large_string())}), compression="lz4")
pa_write("string_view", pa.table({"k": pa.array(pairs, pa.string_view())}), compression="none", files=3)
# I: many tiny row groups and small pages, 3 files, 5000 dups
u = [f"evt_{r.getrandbits(60):015x}" for _ in range(M)]
for j in range(5000): u[r.randrange(M)] = u[r.randrange(M)]
pa_write("tiny_groups", pa.table({"k": u}), row_group_size=1000, data_page_size=1024, files=3, write_statistics=False)
# dictionary-typed with nulls, pyarrow
dk = pa.array([None if r.random() < 0.2 else v for v in ids(M, 5000)]).dictionary_encode()
pa_write("dict_nulls", pa.table({"k": dk}), row_group_size=M // 5)
print("ok")
