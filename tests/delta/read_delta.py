"""Independent reader: a Delta table published by `dqgate publish --target
delta` is read with the `deltalake` Python package (delta-rs' Python
bindings, which dqgate does not use), and every partition must hold exactly
the rows of the staged files that were audited (read with pyarrow).

    python tests/delta/read_delta.py DQGATE_BINARY WORK_DIR

Run by .ci/run (which installs deltalake and pyarrow in a virtual
environment). Covers two partitions, a re-publish of one of them, a retry
that must commit nothing, a failing verdict that must commit nothing, and a
rollback.
Exits 1 on any disagreement.
"""

import datetime
import os
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

RULES = """table sales
partitioned by sales_date
check row_count > 0
check unique(order_id)
check null_rate(customer) < 50%
"""

FAILED = []


def fail(msg):
    print(f"FAIL: {msg}")
    FAILED.append(msg)


def stage(directory, seed, files, rows):
    """Writes `files` Parquet files of `rows` rows; returns their rows."""
    os.makedirs(directory, exist_ok=True)
    out = []
    for f in range(files):
        n0 = seed * 100000 + f * rows
        batch = pa.table(
            {
                "order_id": pa.array(range(n0, n0 + rows), pa.int64()),
                "customer": pa.array(
                    [None if i % 7 == 0 else f"c{i % 13}" for i in range(rows)],
                    pa.string(),
                ),
                "amount": pa.array(
                    [Decimal(i * 3 + seed).scaleb(-2) for i in range(rows)],
                    pa.decimal128(12, 2),
                ),
                "shipped": pa.array(
                    [datetime.date(2025, 3, 1) + datetime.timedelta(days=i % 5) for i in range(rows)],
                    pa.date32(),
                ),
                "at": pa.array(
                    [
                        datetime.datetime(2025, 3, 4, tzinfo=datetime.timezone.utc)
                        + datetime.timedelta(seconds=i * 61)
                        for i in range(rows)
                    ],
                    pa.timestamp("us", tz="UTC"),
                ),
                # Without a time zone: the table needs the timestampNtz feature.
                "local": pa.array(
                    [datetime.datetime(2025, 3, 4, 8) + datetime.timedelta(minutes=i) for i in range(rows)],
                    pa.timestamp("us"),
                ),
            }
        )
        pq.write_table(batch, os.path.join(directory, f"part-{f:05d}.parquet"))
        out.extend(batch.to_pylist())
    return out


def publish(dqgate, rules, staged, day, table):
    r = subprocess.run(
        [dqgate, "publish", rules, "--staged", staged, "--partition", f"sales_date={day}",
         "--table", table, "--target", "delta"],
        capture_output=True,
        text=True,
    )
    return r.returncode, r.stderr


def key(row):
    return row["order_id"]


def check_partition(table, day, expected):
    dt = DeltaTable(table)
    got = dt.to_pyarrow_table(filters=[("sales_date", "=", day)]).to_pylist()
    for row in got:
        if row.pop("sales_date") != day:
            fail(f"{day}: a row with another sales_date")
    got = sorted(got, key=key)
    want = sorted(expected, key=key)
    if got != want:
        fail(f"{day}: the Delta reader sees {len(got)} row(s), the audited files hold {len(want)}"
             + (f"; first difference: {next((g, w) for g, w in zip(got, want) if g != w)}"
                if len(got) == len(want) else ""))
    else:
        print(f"ok: {day}: {len(got)} row(s), exactly the audited ones")


OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    "=": lambda a, b: a == b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
}


def check_skipping(table, day, expected):
    """dqgate writes column bounds into each `add` action's stats; a reader
    that skips files by them must still find every matching row. Filters at
    every file's boundaries, on every column type with bounds."""
    dt = DeltaTable(table)
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    mine = [a for a in actions if a.get("partition.sales_date", a.get("sales_date")) == day
            or day in str(a.get("path"))]
    with_bounds = [a for a in mine if a.get("min.order_id") is not None and a.get("null_count.customer") is not None]
    if not mine or len(with_bounds) != len(mine):
        fail(f"{day}: add actions without order_id bounds or customer null counts: {mine}")
        return
    values = {c: sorted({r[c] for r in expected if r[c] is not None})
              for c in ("order_id", "customer", "amount", "shipped", "at")}
    probes = []
    for a in mine:
        probes += [("order_id", a["min.order_id"]), ("order_id", a["max.order_id"])]
    for c, vs in values.items():
        probes += [(c, vs[0]), (c, vs[len(vs) // 2]), (c, vs[-1])]
    checked = 0
    for column, value in probes:
        for op, test in OPS.items():
            got = dt.to_pyarrow_table(
                filters=[("sales_date", "=", day), (column, op, value)]
            ).num_rows
            want = sum(1 for r in expected if r[column] is not None and test(r[column], value))
            if got != want:
                fail(f"{day}: {column} {op} {value!r}: the reader found {got} row(s), the files hold {want}")
            checked += 1
    print(f"ok: {day}: {checked} filtered reads over file bounds agree with the audited rows")


def main():
    dqgate, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rules = os.path.join(work, "sales.dq")
    with open(rules, "w") as f:
        f.write(RULES)
    table = os.path.join(work, "lake")

    a = stage(os.path.join(work, "staged", "a"), 1, 3, 50)
    b = stage(os.path.join(work, "staged", "b"), 2, 2, 40)
    for staged, day in (("a", "2025-03-04"), ("b", "2025-03-05")):
        code, err = publish(dqgate, rules, os.path.join(work, "staged", staged), day, table)
        if code != 0:
            fail(f"publish {day} exited {code}: {err}")
    check_partition(table, "2025-03-04", a)
    check_partition(table, "2025-03-05", b)
    check_skipping(table, "2025-03-04", a)

    # Re-publish of one partition: it is replaced, the other is untouched.
    c = stage(os.path.join(work, "staged", "c"), 3, 1, 25)
    code, err = publish(dqgate, rules, os.path.join(work, "staged", "c"), "2025-03-04", table)
    if code != 0:
        fail(f"re-publish exited {code}: {err}")
    check_partition(table, "2025-03-04", c)
    check_partition(table, "2025-03-05", b)
    version = DeltaTable(table).version()

    # A retry of the same staged files commits nothing.
    code, err = publish(dqgate, rules, os.path.join(work, "staged", "c"), "2025-03-04", table)
    if code != 0 or "already published" not in err:
        fail(f"retry exited {code}: {err}")
    if DeltaTable(table).version() != version:
        fail("a retry of the same files made a commit")

    # A failing verdict (duplicate order ids) commits nothing.
    bad = os.path.join(work, "staged", "bad")
    stage(bad, 4, 1, 10)
    stage(os.path.join(bad, "again"), 4, 1, 10)
    code, err = publish(dqgate, rules, bad, "2025-03-05", table)
    if code != 1:
        fail(f"a failing verdict exited {code}: {err}")
    if DeltaTable(table).version() != version:
        fail("a failing verdict made a commit")
    check_partition(table, "2025-03-05", b)

    # Rollback: a new commit restoring the previous files of the partition.
    r = subprocess.run([dqgate, "rollback", table, "--partition", "sales_date=2025-03-04"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"rollback exited {r.returncode}: {r.stderr}")
    if DeltaTable(table).version() != version + 1:
        fail("rollback did not make exactly one new commit")
    check_partition(table, "2025-03-04", a)
    check_partition(table, "2025-03-05", b)

    # The audit record travels in the commit: the history has it.
    history = DeltaTable(table).history()
    audits = [h.get("dqgateAudit") for h in history]
    if not all(isinstance(x, dict) and x.get("verdict") == "pass" for x in audits):
        fail(f"commitInfo without a passing dqgateAudit: {audits}")
    else:
        print(f"ok: {len(audits)} commit(s), each with its audit record")

    if FAILED:
        sys.exit(1)
    print("delta reader: all partitions agree with the audited files")


if __name__ == "__main__":
    main()
