#!/usr/bin/env python3
"""DuckDB's equivalent of the benchmark's rule files, and the value check.

`run` computes, for one family (or `standard`, all of them), the same metrics
dqgate reports, written the way a DuckDB user would: one statement with every
scalar metric, plus one GROUP BY ... HAVING count(*) > 1 per key check. It
prints {"metrics": {name: value}, "query_s": seconds} on stdout.

`compare` reads dqgate's verdict JSON and that output, and exits 1 with a loud
message when a metric's value differs.
"""

import argparse
import json
import math
import sys
import time

# Metric names as dqgate's verdict spells them -> scalar SQL expression.
NULL_RATE = "coalesce(count(*) FILTER (WHERE {c} IS NULL)::DOUBLE / nullif(count(*), 0), 0)"
CURRENCIES = "('EUR', 'USD', 'GBP', 'CHF', 'JPY')"
PK = ("sales_date", "store_id", "order_id")

SCALAR = {
    "row_count": {"row_count": "count(*)"},
    "null_rate": {
        f"null_rate({c})": NULL_RATE.format(c=c) for c in ("store_id", "customer_id", "sku")
    },
    "min_max": {"min(amount)": "min(amount)", "max(amount)": "max(amount)"},
    # values(c) in (...) is reported as count(where c not in (...)).
    "values_in": {
        f"count(where currency not in {CURRENCIES})":
            f"count(*) FILTER (WHERE currency IS NOT NULL AND currency NOT IN {CURRENCIES})"
    },
    "count_where": {"count(where amount > 100000)": "count(*) FILTER (WHERE amount > 100000)"},
    # primary_key = duplicated keys + rows with a null key part; the null part
    # rides along in the scalar statement.
    "primary_key": {"__pk_nulls": "count(*) FILTER (WHERE " + " OR ".join(f"{c} IS NULL" for c in PK) + ")"},
}


def duplicates(keys):
    """Distinct non-null key tuples that occur in more than one row."""
    cols = ", ".join(keys)
    not_null = " AND ".join(f"{c} IS NOT NULL" for c in keys)
    return f"SELECT count(*) FROM (SELECT {cols} FROM t WHERE {not_null} GROUP BY {cols} HAVING count(*) > 1)"


KEYED = {
    "unique": {"duplicate_count(order_id)": duplicates(["order_id"])},
    "primary_key": {f"primary_key_violations({', '.join(PK)})": duplicates(list(PK))},
}
FAMILIES = sorted(set(SCALAR) | set(KEYED))


def plain(v):
    """A DuckDB value as dqgate's JSON writes it (decimals as strings)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def run(args):
    import duckdb

    families = FAMILIES if args.family == "standard" else [args.family]
    scalar = {k: v for f in families for k, v in SCALAR.get(f, {}).items()}
    keyed = {k: v for f in families for k, v in KEYED.get(f, {}).items()}
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute(f"SET threads = {int(args.threads)}")
    glob = args.data.rstrip("/") + "/**/*.parquet"
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{glob}')")
    metrics = {}
    if scalar:
        sql = "SELECT " + ", ".join(f'{e} AS "{n}"' for n, e in scalar.items()) + " FROM t"
        row = con.execute(sql).fetchone()
        metrics.update({n: plain(v) for n, v in zip(scalar, row)})
    for name, sql in keyed.items():
        metrics[name] = con.execute(sql).fetchone()[0]
    if "__pk_nulls" in metrics:
        nulls = metrics.pop("__pk_nulls")
        metrics[next(k for k in metrics if k.startswith("primary_key_violations"))] += nulls
    elapsed = time.perf_counter() - started
    json.dump({"metrics": metrics, "query_s": round(elapsed, 4)}, sys.stdout)
    print()


def same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    return a == b


def compare(args):
    with open(args.verdict) as f:
        verdict = json.load(f)
    with open(args.duckdb) as f:
        duck = json.load(f)["metrics"]
    ours = {c["metric"]: c["value"] for c in verdict.get("checks", [])}
    bad = []
    for name in sorted(set(ours) | set(duck)):
        if name not in ours or name not in duck or not same(ours[name], duck[name]):
            bad.append(f"  {name}: dqgate={ours.get(name, '<missing>')!r} duckdb={duck.get(name, '<missing>')!r}")
    if bad:
        print(f"!!!!!! MISMATCH ({args.label}) !!!!!!", file=sys.stderr)
        print("\n".join(bad), file=sys.stderr)
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="compute one family's metrics with DuckDB")
    r.add_argument("--data", required=True, help="directory of Parquet files")
    r.add_argument("--family", required=True, choices=FAMILIES + ["standard"])
    r.add_argument("--threads", type=int, required=True)
    c = sub.add_parser("compare", help="check dqgate's values against DuckDB's")
    c.add_argument("--verdict", required=True)
    c.add_argument("--duckdb", required=True)
    c.add_argument("--label", default="")
    args = p.parse_args()
    {"run": run, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()
