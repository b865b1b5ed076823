"""What `--failed-rows` costs: dqgate's check with and without it, and DuckDB
writing the same rows with COPY ... TO parquet.

    python benches/failed_rows/bench.py --dqgate BIN --data DIR [--threads T] [--reps N]

DIR is a partition from benches/gen_partition.rs with --dup-rate (see
benches/README.md, "Failed rows"). Each command runs N times after one
warm-up, alternating dqgate and DuckDB; the table shows median wall times.
The row counts of dqgate's files are compared with DuckDB's; a difference
exits 1.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import duckdb

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "failing.dq")

# The offending rows of each check of failing.dq, as a DuckDB user selects them.
WHERE = [
    ("values(currency)", "currency IS NOT NULL AND currency NOT IN ('EUR', 'USD', 'GBP', 'CHF')"),
    ("null_rate(customer_id)", "customer_id IS NULL"),
    ("count(where amount > 100000)", "amount > 100000"),
    ("unique(order_id)", "order_id IN (SELECT order_id FROM read_parquet('{glob}') "
                         "GROUP BY order_id HAVING count(*) > 1)"),
]


def timed(cmd):
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - start, out


def dqgate(args, extra, work):
    cmd = [args.dqgate, "check", RULES, "--staged", args.data, "--partition", "sales_date=2025-03-05",
           "--format", "json", "--threads", str(args.threads), *extra]
    seconds, out = timed(cmd)
    if out.returncode != 1:
        sys.exit(f"dqgate exit {out.returncode}: {out.stderr}")
    return seconds, json.loads(out.stdout)


def duck(args, limit, out_dir):
    """Every check's rows written by DuckDB, one COPY per check (as a user would)."""
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    glob = os.path.join(args.data, "**", "*.parquet")
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    counts = []
    start = time.perf_counter()
    for i, (_, where) in enumerate(WHERE):
        cut = "" if limit == "all" else f"LIMIT {limit}"
        target = os.path.join(out_dir, f"{i}.parquet")
        con.execute(
            f"COPY (SELECT *, filename AS _file, file_row_number AS _row "
            f"FROM read_parquet('{glob}', filename = true, file_row_number = true) "
            f"WHERE {where.format(glob=glob)} ORDER BY filename, file_row_number {cut}) "
            f"TO '{target}' (FORMAT parquet)")
    seconds = time.perf_counter() - start
    for i in range(len(WHERE)):
        counts.append(con.execute(f"SELECT count(*) FROM '{out_dir}/{i}.parquet'").fetchone()[0])
    return seconds, counts


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dqgate", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--limits", default="10000,all")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="dqgate-failed-rows-bench-")
    times = {}
    mismatches = 0

    def note(key, s):
        times.setdefault(key, []).append(s)

    for rep in range(args.reps + 1):
        s, _ = dqgate(args, [], work)
        if rep:
            note("check", s)
        for limit in args.limits.split(","):
            out_dir = os.path.join(work, f"dq-{limit}")
            shutil.rmtree(out_dir, ignore_errors=True)
            runs = [("dq", lambda: dqgate(args, ["--failed-rows", out_dir, "--failed-rows-limit", limit], work)),
                    ("duck", lambda: duck(args, limit, os.path.join(work, f"duck-{limit}")))]
            if rep % 2:
                runs.reverse()
            results = {}
            for name, run in runs:
                results[name] = run()
            (s_dq, verdict), (s_duck, counts) = results["dq"], results["duck"]
            if rep:
                note(f"check --failed-rows (limit {limit})", s_dq)
                note(f"DuckDB COPY (limit {limit})", s_duck)
            ours = [c.get("failed_rows", {}).get("rows", 0) for c in verdict["checks"]]
            if ours != counts:
                mismatches += 1
                print(f"!!!!!! MISMATCH limit {limit}: dqgate rows {ours}, DuckDB {counts}")
            if rep == 0:
                print(f"limit {limit}: rows per check {ours} (DuckDB {counts}); "
                      f"offending rows {[c['value'] for c in verdict['checks']]}")
    med = {k: statistics.median(v) for k, v in times.items()}
    print("\n| run | median s |\n|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.2f} |")
    for limit in args.limits.split(","):
        extra = med[f"check --failed-rows (limit {limit})"] - med["check"]
        duck_s = med[f"DuckDB COPY (limit {limit})"]
        print(f"limit {limit}: extra cost of --failed-rows {extra:.2f} s "
              f"({extra / med['check'] * 100:.0f}% of the check); DuckDB COPY of the same rows {duck_s:.2f} s; "
              f"ratio extra / DuckDB {extra / duck_s:.2f}")
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
