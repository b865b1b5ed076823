"""Each shape of gen.py, each key check alone, against DuckDB's value of
it (exits 1 on a mismatch). Times are whole dqgate processes against
DuckDB's query in this process (a warm connection, no start-up).

    python benches/shapes/run.py DQGATE OUT_DIR [dqgate options, e.g. --threads 2]
"""
import glob, json, os, subprocess, sys, tempfile, time
import duckdb
BIN, BASE = sys.argv[1], sys.argv[2]
EXTRA = sys.argv[3:]
SINGLE = [("distinct_count(k) >= 0", "count(DISTINCT k)"),
          ("duplicate_count(k) >= 0", "(SELECT count(*) FROM (SELECT k FROM t WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1))"),
          ("unique(k)", "(SELECT count(*) FROM (SELECT k FROM t WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1))"), ("primary_key(k)", "(SELECT count(*) FROM (SELECT k FROM t WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1)) + (SELECT count(*) - count(k) FROM t)")]
COMP = [("duplicate_count(a, b) >= 0", "(SELECT count(*) FROM (SELECT a, b FROM t WHERE a IS NOT NULL AND b IS NOT NULL GROUP BY a, b HAVING count(*) > 1))"),
        ("duplicate_count(a, b) nulls not distinct >= 0", "(SELECT count(*) FROM (SELECT a, b FROM t GROUP BY a, b HAVING count(*) > 1))"),
        ("unique(a, b)", "(SELECT count(*) FROM (SELECT a, b FROM t WHERE a IS NOT NULL AND b IS NOT NULL GROUP BY a, b HAVING count(*) > 1))"), ("primary_key(a, b)", "(SELECT count(*) FROM (SELECT a, b FROM t WHERE a IS NOT NULL AND b IS NOT NULL GROUP BY a, b HAVING count(*) > 1)) + (SELECT count(*) FROM t WHERE a IS NULL OR b IS NULL)")]
bad = 0
RULES = os.path.join(tempfile.mkdtemp(), "shape.dq")
for d in sorted(glob.glob(os.path.join(BASE, "*"))):
    name = os.path.basename(d)
    con = duckdb.connect()
    con.sql(f"CREATE VIEW t AS SELECT * FROM read_parquet('{d}/*.parquet')")
    cols = [c[0] for c in con.sql("DESCRIBE t").fetchall()]
    checks = COMP if "a" in cols else SINGLE
    for rule, sql in checks:
        open(RULES, "w").write(f"table t\ncheck {rule}\n")
        t0 = time.time()
        out = subprocess.run([BIN, "check", RULES, "--staged", d, "--format", "json", *EXTRA],
                             capture_output=True, text=True)
        el = time.time() - t0
        if out.returncode not in (0, 1):
            print(f"ERROR {name} {rule}: exit {out.returncode}: {out.stderr[-500:]}"); bad += 1; continue
        got = json.loads(out.stdout)["checks"][0]
        if sql is None:
            print(f"{name:16} {rule:45} {el:6.2f}s dqgate {got.get('value')!r} {got.get('status')}")
            continue
        t0 = time.time(); want = con.sql(f"SELECT {sql} FROM t" if not sql.startswith("(") else f"SELECT {sql}").fetchall()[0][0]; dt = time.time() - t0
        ok = got["value"] == want
        bad += not ok
        print(f"{name:16} {rule:45} {el:6.2f}s duckdb {dt:6.2f}s {'ok' if ok else 'MISMATCH'} dqgate {got['value']!r} duckdb {want!r}")
print("mismatches", bad)
sys.exit(1 if bad else 0)
