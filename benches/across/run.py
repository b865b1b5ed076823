"""`unique(k) across published` as a table grows: dqgate vs DuckDB vs the floor.

    python benches/across/run.py --bin target/release/dqgate [--data /work/benchdata]
        [--days 30 90 365] [--rows-per-day 1000000] [--reps 3] [--threads 2]

A Hive table of DAYS published days (`day=1` ... `day=DAYS`, each one
pyarrow-written file of ROWS int64 keys, one row group, no page index: the
writers' defaults) is published by dqgate itself, one `dqgate publish` a
day. The staged day holds ROWS new keys and 100 keys already published.
Key shapes, and for the rising ones two kinds of stale keys:

- `scattered`: a bijective mix of the global row number (hashed ids):
  every row group's range spans nearly all int64, nothing can be pruned;
- `rising`: the global row number itself (an identity column, a ULID's
  time prefix), with the 100 stale keys either from the last two days
  (`recent`, a retry of yesterday's load) or all from one day a third of
  the way back (`old`, a replayed archive);
- `ulid-scattered` and `ulid-rising`: 26-character ULID-like text (13
  Crockford base32 digits of the mixed or the plain row number, then 13
  random-looking ones): text keys that are neither hex nor short, the
  second time-prefixed as ULIDs are;
- `composite`: the key `(k, n)`, `k` the scattered ULID-like text and `n`
  a small int32 (a store number): a composite with a text part, which the
  key engine compares in Arrow's row format;
- `region-rising`: region-prefixed order numbers, `eu-warehouse-orders-`
  or `us-` the same, then the row number in 13 digits, in files sorted by
  key with row groups of 128Ki rows (8 a day, as a sorted DuckDB or Spark
  write makes them). The staged keys' least and greatest differ in their
  first byte, so all of them share the 16 bytes after their common prefix
  (`eu-warehouse-ord`, or `us-`): the shape that sorting the staged keys
  by those 16 bytes fits worst. A day's one row group that holds both
  regions' keys spans every later `eu-` key, so a staged day reads it;
- `region-aligned`: the same keys, with each day's first half of rows
  `eu-` and the second `us-`, in row groups of 125,000: no row group holds
  both regions, as when a writer splits files by region.

For each, in one run on the same files (warm page cache, one warm-up run
discarded, median of --reps whole processes under /usr/bin/time):

- dqgate: `dqgate check across.dq --staged STAGED --partition day=NEW
  --table TABLE --format json -v`;
- DuckDB: its fastest form, the staged keys as the build side of a semi
  join over `TABLE/*/*.parquet`, in a fresh `python -c` process;
- the staged day's own `unique(k)` (what the check guards), and the floor:
  dqgate decoding the published key column (`count(where ...)` over the
  whole table with `--scan-only`).

dqgate's value is compared with DuckDB's (100 each time); a difference
prints MISMATCH and the script exits 1.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "keys"))
from run import duckdb_cmd, median_runs  # noqa: E402  (benches/keys/run.py)

STALE = 100
MIX = 0x9E3779B97F4A7C15


CROCKFORD = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def mix(np, i):
    """splitmix64's finalizer: a bijection of u64, so keys stay unique."""
    with np.errstate(over="ignore"):
        z = (i + np.uint64(1)) * np.uint64(MIX)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def base32(np, z):
    """13 Crockford base32 digits of each u64, most significant first: text
    that sorts as the numbers do."""
    alphabet = np.frombuffer(CROCKFORD, dtype=np.uint8)
    digits = np.empty((len(z), 13), dtype=np.uint8)
    for d in range(13):
        digits[:, 12 - d] = alphabet[((z >> np.uint64(5 * d)) & np.uint64(31)).astype(np.intp)]
    return digits


def ulids(np, first, second):
    """26-character ULID-like text: 13 digits of `first`, 13 of `second`."""
    text = np.concatenate([base32(np, first), base32(np, second)], axis=1)
    return np.ascontiguousarray(text).view("S26").ravel()


def keys_of(np, shape, start, n):
    """Keys of global rows start..start+n."""
    return keys_at(np, shape, np.arange(start, start + n, dtype=np.uint64))


def region_orders(np, i, aligned):
    """`eu-warehouse-orders-` or `us-warehouse-orders-` (by a mix of the
    row number, or `aligned`, by which half of a million rows it is in),
    then the row number in 13 decimal digits."""
    us = (i // np.uint64(500_000)) % np.uint64(2) if aligned else mix(np, i) & np.uint64(1)
    head = np.where(us.astype(bool), b"us", b"eu").astype("S2")
    head = np.frombuffer(head.tobytes(), dtype=np.uint8).reshape(len(i), 2)
    middle = np.tile(np.frombuffer(b"-warehouse-orders-", dtype=np.uint8), (len(i), 1))
    digits = np.empty((len(i), 13), dtype=np.uint8)
    for d in range(13):
        digits[:, 12 - d] = ((i // np.uint64(10 ** d)) % np.uint64(10)).astype(np.uint8) + ord("0")
    text = np.concatenate([head, middle, digits], axis=1)
    return np.ascontiguousarray(text).view(f"S{text.shape[1]}").ravel()


def keys_at(np, shape, i):
    """Keys of the global rows `i` (uint64): one array, or for `composite`
    a tuple of two."""
    if shape.startswith("region-"):
        return region_orders(np, i, shape == "region-aligned")
    if shape == "composite":
        return (keys_at(np, "ulid-scattered", i), (i % np.uint64(97)).astype(np.int32))
    if shape == "rising":
        return i.astype(np.int64)
    if shape == "scattered":
        return mix(np, i).view(np.int64)
    # ULID-like text: `ulid-rising` leads with the row number (a ULID's time
    # prefix), `ulid-scattered` with its mix; the rest is random-looking.
    tail = mix(np, i ^ np.uint64(0x5DEECE66D))
    return ulids(np, i if shape == "ulid-rising" else mix(np, i), tail)


def write(path, keys, row_group_size=None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    columns = {}
    for name, values in zip(["k", "n"], keys if isinstance(keys, tuple) else (keys,)):
        column = pa.array(values)
        if pa.types.is_binary(column.type) or pa.types.is_fixed_size_binary(column.type):
            column = column.cast(pa.binary()).cast(pa.string())
        columns[name] = column
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)


def day_files(np, root, shape, days, rows):
    """DIR/across/SHAPE/days/day-N.parquet for days 1..days."""
    d = os.path.join(root, shape, "days")
    for day in range(1, days + 1):
        f = os.path.join(d, f"day-{day:03}.parquet")
        if not os.path.exists(f):
            keys = keys_of(np, shape, (day - 1) * rows, rows)
            if shape.startswith("region-"):
                group = 125_000 if shape == "region-aligned" else 128 * 1024
                write(f, np.sort(keys), row_group_size=group)
            else:
                write(f, keys)
    return d


def staged_dir(np, root, shape, days, rows, stale):
    """The staged day days+1: its own keys and 100 published ones."""
    d = os.path.join(root, shape, f"staged-{days}-{stale}")
    f = os.path.join(d, "part-0.parquet")
    if os.path.exists(f):
        return d
    rng = np.random.default_rng(days)
    if stale == "recent":
        rows_back = rng.choice(2 * rows, STALE, replace=False) + (days - 2) * rows
    elif stale == "old":
        day = max(1, days // 3)
        rows_back = rng.choice(rows, STALE, replace=False) + (day - 1) * rows
    else:
        rows_back = rng.choice(days * rows, STALE, replace=False)
    rows_all = np.concatenate([np.arange(days * rows, (days + 1) * rows), rows_back]).astype(np.uint64)
    rng.shuffle(rows_all)
    write(f, keys_at(np, shape, rows_all))
    return d


def table_dir(dqgate, root, shape, days, source, indexed=False, most=None):
    """A table of days 1..days, each published by dqgate (hard links).

    `indexed`: published with the rule file's `unique(...) across published`
    check, so that each version has its key index; a table of fewer days
    than `most` is then the first days of the largest one, linked."""
    name = f"table-{days}" + ("-indexed" if indexed else "")
    t = os.path.join(root, shape, name)
    ready = os.path.join(root, shape, f"{name}.ready")
    if os.path.exists(ready):
        return t
    shutil.rmtree(t, ignore_errors=True)
    if indexed and most and days < most:
        whole = table_dir(dqgate, root, shape, most, source, True)
        for day in range(1, days + 1):
            src, dst = os.path.join(whole, f"day={day}"), os.path.join(t, f"day={day}")
            os.makedirs(dst)
            for f in os.listdir(src):
                os.link(os.path.join(src, f), os.path.join(dst, f))
        open(ready, "w").write("")
        return t
    work = tempfile.mkdtemp(dir=os.path.join(root, shape))
    rules = os.path.join(work, "publish.dq")
    key = "k, n" if shape == "composite" else "k"
    check = f"warn unique({key}) across published\n" if indexed else ""
    open(rules, "w").write(f"table t\npartitioned by day\ncheck row_count > 0\n{check}")
    for day in range(1, days + 1):
        d = os.path.join(work, f"d{day}")
        os.makedirs(d)
        os.link(os.path.join(source, f"day-{day:03}.parquet"), os.path.join(d, "part-0.parquet"))
        subprocess.run([dqgate, "publish", rules, "--staged", d, "--partition", f"day={day}",
                        "--table", t], check=True, capture_output=True)
    shutil.rmtree(work)
    open(ready, "w").write("")
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--data", default=os.environ.get("DQGATE_BENCH_DATA", "/work/benchdata"))
    ap.add_argument("--days", nargs="*", type=int, default=[30, 90, 365])
    ap.add_argument("--rows-per-day", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shapes", nargs="*", default=["scattered/any", "rising/recent", "rising/old"])
    ap.add_argument("--prepare", help="only write and publish the tables, with this dqgate binary")
    ap.add_argument("--indexed", action="store_true",
                    help="tables published with their key indexes (each version's `_dqgate_keys_*.idx`)")
    a = ap.parse_args()
    import numpy as np

    python = os.path.join(a.data, "venv", "bin", "python")
    root = os.path.join(a.data, f"across-{a.rows_per_day}")
    work = tempfile.mkdtemp()
    rules = {}
    for name, text in [
        ("across", "table t\npartitioned by day\ncheck unique(k) across published\n"),
        ("own", "table t\ncheck unique(k)\n"),
        ("floor", "table t\ncheck count(where k = 7) = 0\n"),
        ("floor-text", "table t\ncheck count(where k = '7') = 0\n"),
        ("across-composite", "table t\npartitioned by day\ncheck unique(k, n) across published\n"),
        ("own-composite", "table t\ncheck unique(k, n)\n"),
        ("floor-composite", "table t\ncheck count(where k = '7' and n = 7) = 0\n"),
    ]:
        rules[name] = os.path.join(work, f"{name}.dq")
        open(rules[name], "w").write(text)
    threads = ["--threads", str(a.threads)]
    print(f"{a.rows_per_day} rows a day, threads {a.threads}, median of {a.reps} after {a.warmup} warm-up")
    print()
    print("| keys, stale from | days | dqgate | DuckDB semi join | own unique(k) | floor (decode published) "
          "| x DuckDB | x own | x floor |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = False
    for spec in a.shapes:
        shape, stale = spec.split("/")
        source = day_files(np, root, shape, max(a.days), a.rows_per_day)
        for days in a.days:
            table = table_dir(a.prepare or a.bin, root, shape, days, source, a.indexed, max(a.days))
            staged = staged_dir(np, root, shape, days, a.rows_per_day, stale)
            if a.prepare:
                continue
            pair = shape == "composite"
            across = rules["across-composite" if pair else "across"]
            ours = median_runs([a.bin, "check", across, "--staged", staged, "--partition",
                                f"day={days + 1}", "--table", table, "--format", "json", "-v"] + threads,
                               a.reps, a.warmup)
            own = median_runs([a.bin, "check", rules["own-composite" if pair else "own"], "--staged", staged]
                              + threads, a.reps, a.warmup)
            text = shape.startswith(("ulid", "region"))
            floor = rules["floor-composite" if pair else "floor-text" if text else "floor"]
            low = median_runs([a.bin, "check", floor, "--staged", table, "--scan-only"] + threads,
                              a.reps, a.warmup)
            if pair:
                sql = (f"SELECT count(*) FROM (SELECT DISTINCT p.k, p.n FROM read_parquet('{table}/*/*.parquet') p "
                       f"SEMI JOIN read_parquet('{staged}/*.parquet') s ON p.k = s.k AND p.n = s.n)")
            else:
                sql = (f"SELECT count(DISTINCT p.k) FROM read_parquet('{table}/*/*.parquet') p "
                       f"SEMI JOIN read_parquet('{staged}/*.parquet') s ON p.k = s.k")
            theirs = median_runs(duckdb_cmd(python, sql, a.threads), a.reps, a.warmup)
            value = json.loads(ours[2])["checks"][0]["value"]
            want = json.loads(theirs[2])
            if value != want:
                print(f"!!!!!! MISMATCH {spec} at {days} days: dqgate {value}, DuckDB {want}", file=sys.stderr)
                failed = True
            print(f"| {shape}, {stale} | {days} | {ours[0]:.2f} s / {ours[1]:.0f} MB "
                  f"| {theirs[0]:.2f} s / {theirs[1]:.0f} MB | {own[0]:.2f} s | {low[0]:.2f} s "
                  f"| {ours[0] / theirs[0]:.2f} | {ours[0] / own[0]:.1f} | {ours[0] / low[0]:.2f} |",
                  flush=True)
            for line in ours[3].splitlines():
                if "across" in line or "prune" in line or "audited" in line:
                    print(f"  <!-- {line.strip()} -->", file=sys.stderr)
    shutil.rmtree(work)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
