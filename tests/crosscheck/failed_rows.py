"""Failed rows against DuckDB: for each check kind, the rows dqgate writes
with `--failed-rows DIR` must be exactly DuckDB's `SELECT` of the offending
rows, every column and each row's file and position
(`read_parquet(..., filename = true, file_row_number = true)`), in (file,
row) order, cut at the limit.

    python tests/crosscheck/failed_rows.py DQGATE_BINARY WORK_DIR

Run by .ci/run (duckdb and pyarrow in a virtual environment). Also: a
read-only DIR and a full DIR (a small tmpfs, mounted in a user namespace
when not root) leave the verdict and the exit code as they were.
Exits 1 on any disagreement, naming the check and the first differing row.
"""

import json
import os
import random
import shutil
import subprocess
import sys
from datetime import date, timedelta

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

# One check per kind; the DuckDB predicate of its offending rows over the
# view `s` (the staged files, with `f` and `r`: file and row), or a query
# for the kinds that need one.
CHECKS = [
    ("check values(cur) in ('EUR', 'USD')",
     "cur IS NOT NULL AND cur NOT IN ('EUR', 'USD')"),
    ("check all(amount >= 0 or cur = 'GBP')",
     "(amount >= 0 OR cur = 'GBP') IS FALSE"),
    ("check count(where amount > 900) <= 3",
     "amount > 900"),
    ("check rate(where note like '%x%') < 1%",
     "note LIKE '%x%'"),
    ("check null_rate(note) < 1%",
     "note IS NULL"),
    ("check null_count(amount) = 0",
     "amount IS NULL"),
    ("check column note is string not null",
     "note IS NULL"),
    ("check unique(id)",
     "id IN (SELECT id FROM s WHERE id IS NOT NULL GROUP BY id HAVING count(*) > 1)"),
    ("check unique(rare)",
     "rare IN (SELECT rare FROM s WHERE rare IS NOT NULL GROUP BY rare HAVING count(*) > 1)"),
    # Text typed as an Arrow dictionary (grouped and joined as its values).
    ("check unique(code)",
     "code IN (SELECT code FROM s WHERE code IS NOT NULL GROUP BY code HAVING count(*) > 1)"),
    ("check primary_key(k1, k2)",
     "k1 IS NULL OR k2 IS NULL OR (k1, k2) IN (SELECT (k1, k2) FROM s WHERE k1 IS NOT NULL AND k2 IS NOT NULL "
     "GROUP BY k1, k2 HAVING count(*) > 1)"),
    ("check duplicate_count(k1, k2) nulls not distinct = 0",
     "EXISTS (SELECT 1 FROM s t WHERE t.k1 IS NOT DISTINCT FROM s.k1 AND t.k2 IS NOT DISTINCT FROM s.k2 "
     "AND (t.f, t.r) <> (s.f, s.r))"),
    ("check values(store) in stores(store_id)",
     "store IS NOT NULL AND store NOT IN (SELECT store_id FROM ref WHERE store_id IS NOT NULL)"),
    # A text key (dictionary-typed): the key engine's exact missing keys
    # select the rows.
    ("check values(code) in codes(code)",
     "code IS NOT NULL AND code NOT IN (SELECT code FROM codes WHERE code IS NOT NULL)"),
    ("check unique(id) across published",
     "id IN (SELECT id FROM p)"),
    # Failing because it counts too few rows: no offending row, no file.
    ("warn count(where amount > 0) >= 1000000", None),
]

HEADER = "table fr\npartitioned by day\nreference stores at 'ref'\nreference codes at 'codes'\n"


def write_staged(rng, dir, n, day):
    """Three files of several row groups each (positions must count across
    row groups), in Hive-style subdirectories (their key is a column)."""
    os.makedirs(f"{dir}/batch=7", exist_ok=True)
    os.makedirs(f"{dir}/batch=1", exist_ok=True)
    start = 0
    for i, rows in enumerate([n // 2, n // 3, n - n // 2 - n // 3]):
        ids = [rng.randrange(0, n * 4) for _ in range(rows)]
        table = pa.table({
            "day": pa.array([day] * rows, pa.date32()),
            "id": pa.array(ids, pa.int64()),
            "rare": pa.array([(start + j) if rng.random() > 0.01 else 7 for j in range(rows)], pa.int64()),
            "k1": pa.array([None if rng.random() < 0.02 else rng.randrange(0, 40) for _ in range(rows)], pa.int32()),
            "k2": pa.array([None if rng.random() < 0.02 else rng.choice("abcdefgh") * 3 for _ in range(rows)]),
            "cur": pa.array([rng.choice(["EUR", "USD", "USD", "EUR", "GBP", None, "JPY"] if rng.random() < 0.1
                                        else ["EUR", "USD"]) for _ in range(rows)]),
            "amount": pa.array([None if rng.random() < 0.01 else round(rng.uniform(-20, 1000), 2)
                                for _ in range(rows)], pa.float64()),
            "note": pa.array([None if rng.random() < 0.03 else rng.choice(["ok", "fine", "xx", "good"])
                              for _ in range(rows)]),
            "store": pa.array([rng.randrange(0, 60) if rng.random() > 0.02 else None for _ in range(rows)], pa.int32()),
            "code": pa.array([None if rng.random() < 0.02 else f"C-{(start + j) if rng.random() > 0.02 else 3}-é"
                              for j in range(rows)]).dictionary_encode(),
        })
        where = f"{dir}/batch={7 if i == 2 else 1}/part-{i}.parquet"
        pq.write_table(table, where, row_group_size=rng.choice([64, 100, 333]))
        start += rows


def run(binary, args, cwd):
    return subprocess.run([binary, *args], capture_output=True, text=True, cwd=cwd)


def rows_of(con, path):
    return con.execute(f"SELECT * EXCLUDE (_dqgate_file, _dqgate_row), _dqgate_file, _dqgate_row "
                       f"FROM read_parquet('{path}') ").fetchall()


def main():
    binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = random.Random(20250305)
    failures = checked = 0

    def fail(msg):
        nonlocal failures
        failures += 1
        print(f"MISMATCH {msg}")

    # The reference: stores 0..49 (staged stores go to 59).
    os.makedirs(f"{work}/ref")
    pq.write_table(pa.table({"store_id": pa.array(range(50), pa.int32())}), f"{work}/ref/stores.parquet")
    # The codes: C-0-é .. C-2499-é without every seventh (staged codes go
    # to about 3,000).
    os.makedirs(f"{work}/codes")
    codes = [f"C-{i}-é" for i in range(2500) if i % 7 != 0] + ["C-3-é", None]
    pq.write_table(pa.table({"code": pa.array(codes)}), f"{work}/codes/codes.parquet")
    # Two published days; the staged day is the third.
    rules = HEADER + "\n".join(c for c, _ in CHECKS) + "\n"
    with open(f"{work}/fr.dq", "w") as fh:
        fh.write(rules)
    with open(f"{work}/pub.dq", "w") as fh:
        fh.write("table fr\npartitioned by day\ncheck row_count >= 0\n")
    for d in (1, 2):
        day = date(2025, 3, d)
        write_staged(rng, f"{work}/stage-{d}", 300, day)
        out = run(binary, ["publish", "pub.dq", "--staged", f"stage-{d}", "--partition", f"day={day}",
                           "--table", "table"], work)
        if out.returncode != 0:
            sys.exit(f"publish of {day} failed: {out.stderr}")
    day = date(2025, 3, 3)
    write_staged(rng, f"{work}/staged", 3000, day)

    con = duckdb.connect()
    con.execute(f"CREATE VIEW s AS SELECT * EXCLUDE (filename, file_row_number), "
                f"substr(filename, {len(work + '/staged/') + 1}) AS f, file_row_number AS r "
                f"FROM read_parquet('{work}/staged/**/*.parquet', filename = true, file_row_number = true, "
                f"hive_partitioning = true, hive_types = {{'batch': BIGINT}})")
    con.execute(f"CREATE VIEW ref AS SELECT * FROM read_parquet('{work}/ref/*.parquet')")
    con.execute(f"CREATE VIEW codes AS SELECT * FROM read_parquet('{work}/codes/*.parquet')")
    con.execute(f"CREATE VIEW p AS SELECT * FROM read_parquet('{work}/table/*/*/*.parquet', hive_partitioning = false)")
    columns = [r[0] for r in con.execute("DESCRIBE SELECT * EXCLUDE (f, r) FROM s").fetchall()]

    for limit in ("all", "7"):
        out_dir = f"{work}/out-{limit}"
        got = run(binary, ["check", "fr.dq", "--staged", "staged", "--partition", f"day={day}", "--table", "table",
                           "--format", "json", "--failed-rows", out_dir, "--failed-rows-limit", limit], work)
        if got.returncode != 1:
            sys.exit(f"check exited {got.returncode}: {got.stderr}")
        verdict = json.loads(got.stdout)
        for (statement, where), check in zip(CHECKS, verdict["checks"]):
            checked += 1
            if where is None:
                if "failed_rows" in check or check["status"] != "fail":
                    fail(f"{statement}: expected a failing check without rows, got {check}")
                continue
            if check["status"] != "fail":
                fail(f"{statement}: the data was meant to break it, status {check['status']}")
                continue
            select = f"SELECT {', '.join(columns)}, f, r FROM s WHERE {where} ORDER BY f, r"
            want = con.execute(select).fetchall()
            if statement.endswith("across published"):
                want = con.execute(
                    f"SELECT {', '.join('s.' + c for c in columns)}, s.f, s.r, min('day=' || p.day::VARCHAR) "
                    f"FROM s JOIN p ON s.id = p.id GROUP BY ALL ORDER BY s.f, s.r").fetchall()
            shown = want if limit == "all" else want[:int(limit)]
            entry = check.get("failed_rows")
            if entry is None:
                fail(f"{statement}: no failed rows named in the verdict (DuckDB finds {len(want)})")
                continue
            have = rows_of(con, f"{out_dir}/{entry['path']}")
            if statement.endswith("across published"):
                have = con.execute(f"SELECT * EXCLUDE (_dqgate_file, _dqgate_row, _dqgate_partition), "
                                   f"_dqgate_file, _dqgate_row, _dqgate_partition "
                                   f"FROM read_parquet('{out_dir}/{entry['path']}')").fetchall()
            if have != shown:
                first = next((i for i, (a, b) in enumerate(zip(have, shown)) if a != b), min(len(have), len(shown)))
                fail(f"{statement} (limit {limit}): {len(have)} rows, DuckDB {len(shown)}; first difference at "
                     f"{first}: dqgate {have[first] if first < len(have) else None}, "
                     f"DuckDB {shown[first] if first < len(shown) else None}")
            if entry["rows"] != len(shown) or entry["cut"] != (len(want) > len(shown)):
                fail(f"{statement} (limit {limit}): verdict says {entry}, DuckDB {len(want)} rows")
        # Two runs: the same bytes. And under a memory limit, with the
        # missing keys' lookup written to disk past 256 bytes: the same
        # verdict and the same bytes.
        for suffix, extra, env in [("-again", ["--threads", "1"], {}),
                                   ("-limited", ["--memory-limit", "16MiB"], {"DQGATE_TEST_SPREAD_BYTES": "256"})]:
            again = subprocess.run(
                [binary, "check", "fr.dq", "--staged", "staged", "--partition", f"day={day}", "--table", "table",
                 "--format", "json", "--failed-rows", out_dir + suffix, "--failed-rows-limit", limit, *extra],
                capture_output=True, text=True, cwd=work, env={**os.environ, **env})
            checked += 1
            if again.stdout != got.stdout:
                fail(f"limit {limit}: the verdict of the run {extra} differs: {again.stderr}")
            for name in sorted(os.listdir(out_dir)):
                with open(f"{out_dir}/{name}", "rb") as a, open(f"{out_dir}{suffix}/{name}", "rb") as b:
                    if a.read() != b.read():
                        fail(f"limit {limit}: {name} differs in the run {extra}")

    checked += unwritable(binary, work, day, fail)
    print(f"failed rows: {checked} checks compared with DuckDB, {failures} mismatches")
    sys.exit(1 if failures else 0)


def unwritable(binary, work, day, fail):
    """A read-only DIR and a full DIR: the same verdict and exit code as
    without --failed-rows, and the reason on stderr."""
    base = ["check", "fr.dq", "--staged", "staged", "--partition", f"day={day}", "--table", "table",
            "--format", "json"]
    plain = run(binary, base, work)
    script = (
        "set -e; mkdir -p ro full; "
        "mount -t tmpfs -o size=1m,ro tmpfs ro; "
        "mount -t tmpfs -o size=12k tmpfs full; "
        f"{binary} {' '.join(base)} --failed-rows ro > ro.out 2> ro.err || echo $? > ro.code; "
        f"{binary} {' '.join(base)} --failed-rows full > full.out 2> full.err || echo $? > full.code; "
        "umount ro; umount full"
    )
    shell = ["sh", "-c", script] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount",
                                                            "sh", "-c", script]
    done = subprocess.run(shell, capture_output=True, text=True, cwd=work)
    if done.returncode != 0:
        sys.exit(f"cannot mount the read-only and the full tmpfs: {done.stderr}")
    for what, reason in (("ro", "Read-only file system"), ("full", "No space left on device")):
        with open(f"{work}/{what}.out") as fh:
            out = fh.read()
        with open(f"{work}/{what}.err") as fh:
            err = fh.read()
        code = open(f"{work}/{what}.code").read().strip() if os.path.exists(f"{work}/{what}.code") else "0"
        if code != str(plain.returncode):
            fail(f"{what} DIR: exit {code}, without --failed-rows {plain.returncode}")
        if reason not in err or "the verdict and the exit code are unchanged" not in err:
            fail(f"{what} DIR: stderr does not say why: {err}")
        verdict, want = json.loads(out), json.loads(plain.stdout)
        for c in verdict["checks"]:
            c.pop("failed_rows", None)
        if verdict != want:
            fail(f"{what} DIR: the verdict changed")
    return 2


if __name__ == "__main__":
    main()
