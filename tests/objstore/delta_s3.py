"""Publish into a Delta table on a real S3-compatible server (moto, loopback).

    python tests/objstore/delta_s3.py DQGATE_BINARY WORK_DIR [--kills N] [--rounds N] [--only isolation|pruning]
    python tests/objstore/delta_s3.py DQGATE_BINARY WORK_DIR --measure PARTITION_DIR

Run by .ci/run in a virtual environment with moto[server], boto3, deltalake
and pyarrow. moto runs with IAM authentication on and with its conditional
puts made atomic (moto_serial.py). The real dqgate binary publishes; the
table is read back with the `deltalake` Python package (delta-rs' Python
bindings, a reader dqgate does not use) and with plain S3 listings:

- staged on local disk, staged in another bucket, staged in the table's
  own bucket (server-side copy): each publish is one commit, and the reader
  sees exactly the audited rows; `verify` agrees;
- a retry of the same files commits nothing; a failing verdict commits
  nothing and writes no object;
- two publishers of one partition racing for the same log entry: exit codes
  {0, 4}, one commit, the winner's rows; of two partitions: both commit;
- isolation (invariant 10): 50 rounds of two publishers of different days
  (1 and 2, each replacing its older version) sharing a key, each checking
  `unique(id) across published`, meeting after their first audit: one wins
  each round, the other audits again and fails (exit 1), and no key is ever
  in two partitions (read back by `deltalake`);
- `unique(t) across published` against the table on S3 reads only the
  published row groups whose footer ranges hold a staged key (counted in
  moto's request log), with the local table's verdict;
  publishes SIGKILLed while they check the winning commits leave the table
  as it was, and a retry converges;
- publishes killed at each step (before the copies, before the commit, after
  the commit) and at random moments with SIGKILL: the table is at the old
  or the new version, never between, and a retry converges;
- wrong credentials: exit 3, nothing written; a tampered object: `verify`
  exits 1; `rollback` is a new commit that restores the previous rows;
- `gc` removes the copies of killed publishes, never a file the log names;
- `report --table s3://...` shows the partitions and their rollbacks;
- `--target hive` on an object store is refused (exit 2) pointing to Delta;
- a Ballista cluster (scheduler and two executors, real processes) whose
  executors read the staged objects from moto gives the local verdict byte
  for byte, and a publish audited on it commits.

With --measure, PARTITION_DIR (e.g. from `cargo bench --bench gen_partition`)
is published with benches/standard.dq into a Delta table on moto from local
disk, from the table's bucket (server-side copies) and from another bucket
(streamed), and retried; wall times are printed beside the audit alone.

Prints "N passed, M failed" and exits 1 on any failure.
"""

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3 import REGION, REPO, Moto, Run, upload  # noqa: E402

LAKE = "dqgate-lake"
STAGING = "dqgate-staging"
TABLE = f"s3://{LAKE}/events/"

RULES = """table events
partitioned by d
check row_count > 0
check distinct_count(version) = 1
check unique(id)
"""


def stage(directory, version, files=2, rows=50):
    """Writes `files` Parquet files whose rows all carry `version`."""
    os.makedirs(directory, exist_ok=True)
    for f in range(files):
        n0 = version * 100000 + f * rows
        batch = pa.table(
            {
                "id": pa.array(range(n0, n0 + rows), pa.int64()),
                "version": pa.array([version] * rows, pa.int64()),
                "note": pa.array([f"v{version} f{f} r{i}" for i in range(rows)], pa.string()),
            }
        )
        pq.write_table(batch, os.path.join(directory, f"part-{f:05d}.parquet"))
    return directory


class Lake:
    def __init__(self, run, s3, env, work):
        self.run, self.s3, self.env, self.work = run, s3, env, work
        self.rules = os.path.join(work, "events.dq")
        with open(self.rules, "w") as f:
            f.write(RULES)
        self.storage = {
            "AWS_ENDPOINT_URL": env["AWS_ENDPOINT_URL"],
            "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def publish_args(self, staged, d, *extra):
        return ["publish", self.rules, "--staged", staged, "--partition", f"d={d}",
                "--table", TABLE, "--format", "json", *extra]

    def publish(self, staged, d, env=None):
        return self.run.dqgate(self.publish_args(staged, d), env=env)

    def keys(self, prefix):
        out = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=LAKE, Prefix=prefix):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return sorted(out)

    def commits(self):
        return [k for k in self.keys("events/_delta_log/") if k.endswith(".json")]

    def versions(self, d):
        """The `version` values the independent reader sees in partition d."""
        table = DeltaTable(TABLE, storage_options=self.storage)
        rows = table.to_pyarrow_table(filters=[("d", "=", str(d))])
        return rows.column("version").to_pylist(), rows.num_rows

    def verify(self, d, env=None):
        return self.run.dqgate(["verify", TABLE, "--partition", f"d={d}"], env=env)


def code(out):
    return out.returncode


def publishes(lake, work):
    run = lake.run
    # 1. Staged on local disk: the first publish creates the table.
    v1 = stage(os.path.join(work, "local-v1"), 1)
    out = lake.publish(v1, 1)
    seen, n = lake.versions(1)
    run.check(
        code(out) == 0 and len(lake.commits()) == 1 and n == 100 and set(seen) == {1},
        "local staged -> Delta on S3: one commit creates the table, reader sees the 100 audited rows",
        out.stdout + out.stderr,
    )
    run.check(code(lake.verify(1)) == 0, "verify on S3 after the first publish")

    # 2. Staged in another bucket: streamed into the table.
    upload(lake.s3, stage(os.path.join(work, "s3-v2"), 2), "d2-v2", bucket=STAGING)
    out = lake.publish(f"s3://{STAGING}/d2-v2/", 2)
    seen, n = lake.versions(2)
    run.check(
        code(out) == 0 and len(lake.commits()) == 2 and n == 100 and set(seen) == {2},
        "staged in another bucket -> second partition, one more commit",
        out.stdout + out.stderr,
    )

    # 3. Staged in the table's own bucket: server-side copies replace d=1.
    upload(lake.s3, stage(os.path.join(work, "s3-v3"), 3), "staging/d1-v3", bucket=LAKE)
    before = set(lake.keys("events/d=1/"))
    out = lake.publish(f"s3://{LAKE}/staging/d1-v3/", 1)
    seen, n = lake.versions(1)
    run.check(
        code(out) == 0 and len(lake.commits()) == 3 and n == 100 and set(seen) == {3}
        and lake.versions(2)[1] == 100,
        "same-bucket staged -> re-publish replaces exactly d=1",
        out.stdout + out.stderr,
    )
    after = set(lake.keys("events/d=1/"))
    run.check(
        before < after,
        "the replaced files stay (invisible, for rollback); new copies were added",
        f"{sorted(before)}\n{sorted(after)}",
    )
    verdict = json.loads(out.stdout)
    run.check(
        verdict.get("verdict") == "pass" and code(lake.verify(1)) == 0,
        "verdict JSON on stdout and verify agree",
        out.stdout,
    )

    # The published side of the rules, read from the table on S3 through
    # its snapshot: the secret only as a --storage-option, the staged
    # files local.
    sides = os.path.join(work, "published-side.dq")
    with open(sides, "w") as f:
        f.write("table events\npartitioned by d\ncheck row_count >= published.row_count\n"
                "check schema matches published\ncheck unique(id) across published\n"
                "check row_count >= min(history(5).row_count)\n")
    no_secret = {k: v for k, v in lake.env.items() if k != "AWS_SECRET_ACCESS_KEY"}
    out = run.dqgate(["check", sides, "--staged", stage(os.path.join(work, "side"), 2, files=1),
                      "--partition", "d=1", "--table", TABLE, "--format", "json",
                      "--storage-option", f"aws_secret_access_key={lake.env['AWS_SECRET_ACCESS_KEY']}"],
                     env=no_secret)
    checks = {c["name"]: c for c in json.loads(out.stdout).get("checks", [])} if out.stdout else {}
    statuses = {n: c["status"] for n, c in checks.items()}
    across = next((c for n, c in checks.items() if "across" in n), {})
    run.check(
        code(out) == 1 and list(statuses.values()) == ["fail", "pass", "fail", "skipped"]
        and across.get("value") == 50 and "d=2" in json.dumps(across.get("samples")),
        "check --table s3://: published.row_count (100), schema, across published (50 clashes in d=2)",
        out.stdout + out.stderr,
    )
    out = run.dqgate(["check", sides, "--staged", stage(os.path.join(work, "side3"), 6, files=1),
                      "--partition", "d=3", "--table", TABLE, "--format", "json"])
    checks = json.loads(out.stdout).get("checks", []) if out.stdout else []
    history = checks[-1] if checks else {}
    run.check(
        code(out) == 1 and history.get("status") == "fail" and "from 2 of 5 partitions (d=1 .. d=2)" in history.get("note", ""),
        "history(5) on S3: the audit records of d=1 and d=2 (100 rows each) against 50 staged rows",
        out.stdout + out.stderr,
    )

    # Files larger than one upload buffer (10 MiB): a multipart upload from
    # local disk, and a streamed multipart copy from the other bucket.
    big = os.path.join(work, "big")
    os.makedirs(big, exist_ok=True)
    rows = 3000
    blob = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "version": pa.array([40] * rows, pa.int64()),
            "note": pa.array([os.urandom(2048).hex() for _ in range(rows)], pa.string()),
        }
    )
    pq.write_table(blob, os.path.join(big, "part-00000.parquet"), compression="none")
    size = os.path.getsize(os.path.join(big, "part-00000.parquet"))
    out = lake.publish(big, 3)
    seen, n = lake.versions(3)
    run.check(
        code(out) == 0 and n == rows and set(seen) == {40} and code(lake.verify(3)) == 0,
        f"a {size / 2**20:.1f} MiB file uploaded in parts from local disk: published and verified",
        out.stdout + out.stderr,
    )
    upload(lake.s3, big, "big", bucket=STAGING)
    out = lake.publish(f"s3://{STAGING}/big/", 4)
    seen, n = lake.versions(4)
    run.check(
        code(out) == 0 and n == rows and set(seen) == {40} and code(lake.verify(4)) == 0,
        f"the same {size / 2**20:.1f} MiB object streamed from another bucket: published and verified",
        out.stdout + out.stderr,
    )

    # 4. A retry of the same files commits nothing.
    commits = len(lake.commits())
    out = lake.publish(f"s3://{LAKE}/staging/d1-v3/", 1)
    run.check(
        code(out) == 0 and "already published" in out.stderr and len(lake.commits()) == commits,
        "retry of the same staged files: exit 0, already published, no commit",
        out.stderr,
    )

    # 5. A failing verdict commits nothing and writes nothing.
    bad = os.path.join(work, "mixed")
    stage(bad, 4, files=1)
    stage(os.path.join(work, "mixed-b"), 5, files=1)
    os.replace(os.path.join(work, "mixed-b", "part-00000.parquet"), os.path.join(bad, "part-00001.parquet"))
    objects = lake.keys("events/")
    out = lake.publish(bad, 1)
    run.check(
        code(out) == 1 and lake.keys("events/") == objects and set(lake.versions(1)[0]) == {3},
        "failing verdict: exit 1, not one object written",
        out.stdout + out.stderr,
    )


def races(lake, work):
    run = lake.run
    a = stage(os.path.join(work, "race-a"), 10)
    b = stage(os.path.join(work, "race-b"), 11)
    commits = len(lake.commits())
    env = dict(lake.env, DQGATE_TEST_DELTA_PAUSE_MS="1500")
    procs = [
        subprocess.Popen([run.binary, *lake.publish_args(s, 1)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for s in (a, b)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    seen, _ = lake.versions(1)
    winner = 10 if procs[0].returncode == 0 else 11
    run.check(
        codes == [0, 4] and len(lake.commits()) == commits + 1 and set(seen) == {winner}
        and code(lake.verify(1)) == 0,
        f"two publishers of d=1: exit codes {codes}, one commit, the winner's rows",
        "\n".join(o[1] for o in outs),
    )
    loser = outs[0][1] if procs[0].returncode == 4 else outs[1][1]
    run.check("changed since the audit" in loser, "the loser says why", loser)

    c = stage(os.path.join(work, "race-c"), 12)
    d = stage(os.path.join(work, "race-d"), 13)
    commits = len(lake.commits())
    procs = [
        subprocess.Popen([run.binary, *lake.publish_args(s, p)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for s, p in ((c, 7), (d, 8))
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    run.check(
        [p.returncode for p in procs] == [0, 0] and len(lake.commits()) == commits + 2
        and set(lake.versions(7)[0]) == {12} and set(lake.versions(8)[0]) == {13},
        "two publishers of different partitions: both commit (the loser of the log entry re-plans)",
        "\n".join(o[1] for o in outs),
    )


ISOLATION_TABLE = f"s3://{LAKE}/isolation/"
ACROSS_RULES = """table orders
partitioned by d
check unique(id) across published
"""


def stage_ids(directory, ids):
    os.makedirs(directory, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}),
                   os.path.join(directory, "part-00000.parquet"))
    return directory


def pruning(lake, moto, work):
    """`unique(t) across published` against a Delta table on S3 reads only
    the published row groups whose footer ranges hold a staged key: four
    days of rising text ids in row groups of 1,000, and a staged day with
    two stale ids of day 1's third row group. `explain` says so; the other
    days' objects get no request beyond their footers (as many as day 1's
    own footer reads, which the check's ranged reads of its row group
    then exceed); the verdict equals that of the same days published into
    a local Delta table."""
    run = lake.run
    table = f"s3://{LAKE}/pruned/"
    local = os.path.join(work, "pruned-local")
    rules = os.path.join(work, "pruned.dq")
    with open(rules, "w") as f:
        f.write("table pruned\npartitioned by d\ncheck row_count > 0\n")

    def write(directory, ids):
        os.makedirs(directory, exist_ok=True)
        keys = pa.array([f"order-{i:09d}" for i in ids], pa.string())
        pq.write_table(pa.table({"t": keys}), os.path.join(directory, "part-00000.parquet"),
                       row_group_size=1000)
        return directory

    for d in range(4):
        ids = range(d * 10000, (d + 1) * 10000)
        for where in (table, local):
            staged = write(os.path.join(work, f"pruned-{d}-{len(where)}"), ids)
            out = run.dqgate(["publish", rules, "--staged", staged, "--partition", f"d={d}",
                              "--table", where, "--target", "delta"])
            if code(out) != 0:
                run.check(False, f"publish day {d} into {where}", out.stdout + out.stderr)
                return
    with open(rules, "w") as f:
        f.write("table pruned\npartitioned by d\ncheck unique(t) across published\n")
    staged = write(os.path.join(work, "pruned-new"), list(range(40000, 50000)) + [12345, 12999])
    args = [rules, "--staged", staged, "--partition", "d=9", "--table"]
    objects = [k for k in lake.keys("pruned/") if k.endswith(".parquet")]

    def gets_of(argv):
        before = len(moto.requests())
        out = run.dqgate(argv)
        after = moto.requests()[before:]
        return out, {k: sum(1 for l in after if '"GET ' in l and k.split("/")[-1] in l) for k in objects}

    # `explain` reads the footers alone: what every object costs before
    # any data is read.
    out, footers = gets_of(["explain", *args, table])
    run.check(
        code(out) == 0 and "reads 1 of 4 file(s), 1 of 40 row group(s), 1000 of 40000 row(s)" in out.stdout,
        "explain --table s3://: the footers leave one row group of day 1 to read",
        out.stdout + out.stderr,
    )
    out, gets = gets_of(["check", *args, table, "--format", "json", "-v"])
    past = {k: gets[k] - footers[k] for k in objects}
    run.check(
        all(n == 0 for k, n in past.items() if "d=1/" not in k)
        and all(n > 0 for k, n in past.items() if "d=1/" in k) and len(objects) == 4,
        "check --table s3://: only day 1's object is read past its footer",
        f"{footers}\n{gets}\n{out.stderr}",
    )
    mine = run.dqgate(["check", *args, local, "--format", "json"])
    verdict = json.loads(out.stdout) if out.stdout else {}
    value = (verdict.get("checks") or [{}])[0].get("value")
    run.check(
        code(out) == 1 and value == 2 and out.stdout == mine.stdout,
        "check --table s3://: the two stale ids of day 1, the local table's verdict byte for byte",
        out.stdout + out.stderr + mine.stdout,
    )


def isolation(lake, work, rounds):
    """Two publishers of different days that share a key, both checking
    `across published`, race `rounds` times on S3: never both win."""
    run = lake.run
    rules = os.path.join(work, "orders.dq")
    with open(rules, "w") as f:
        f.write(ACROSS_RULES)

    def args(staged, d):
        return ["publish", rules, "--staged", staged, "--partition", f"d={d}",
                "--table", ISOLATION_TABLE]

    out = run.dqgate(args(stage_ids(os.path.join(work, "iso-seed"), [0, 1, 2]), 0))
    run.check(code(out) == 0, "isolation: the seed day is published", out.stderr)
    started = time.time()
    bad = []
    for r in range(rounds):
        base, shared = 1000 * (r + 1), 1000 * (r + 1) + 999
        a = stage_ids(os.path.join(work, f"iso-a{r}"), [base + 1, shared])
        b = stage_ids(os.path.join(work, f"iso-b{r}"), [base + 501, shared])
        env = dict(lake.env, DQGATE_TEST_BARRIER=os.path.join(work, f"iso-barrier-{r}"))
        # The same two days every round (the table stays small, so rounds
        # cost the same): each publish replaces its day's older version.
        procs = [subprocess.Popen([run.binary, *args(s, d)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for s, d in ((a, 1), (b, 2))]
        outs = [p.communicate(timeout=300) for p in procs]
        codes = sorted(p.returncode for p in procs)
        loser = outs[0][1] if procs[0].returncode != 0 else outs[1][1]
        if codes != [0, 1] or "auditing again" not in loser:
            bad.append(f"round {r}: exit codes {codes}\n" + "\n".join(o[1] for o in outs))
    elapsed = time.time() - started
    run.check(not bad, f"isolation: {rounds} rounds of two publishers sharing a key with `across published`: "
              f"one wins, the other audits again and fails, every round ({elapsed:.1f} s)",
              "\n".join(bad[:3]))
    table = DeltaTable(ISOLATION_TABLE, storage_options=lake.storage).to_pyarrow_table()
    ids = table.column("id").to_pylist()
    days = set(table.column("d").to_pylist())
    run.check(len(ids) == len(set(ids)) and days == {"0", "1", "2"},
              f"isolation: the deltalake reader sees {len(days)} days and no key in two partitions",
              f"{len(ids)} ids, {len(set(ids))} distinct")

    # SIGKILL while the publish reads the winning commits: nothing changes,
    # and a plain retry converges.
    for k in range(3):
        day = 3 + k
        staged = stage_ids(os.path.join(work, f"iso-kill{k}"), [900000 + k])
        log = os.path.join(work, f"iso-kill{k}.phases")
        commits = len(lake.keys("isolation/_delta_log/"))
        env = dict(lake.env, DQGATE_TEST_PHASE_LOG=log, DQGATE_TEST_PAUSE_AT="validate:3000")
        p = subprocess.Popen([run.binary, *args(staged, day)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            if os.path.exists(log) and "validate" in open(log).read().split():
                break
            time.sleep(0.01)
        time.sleep(0.01 * k)
        p.send_signal(signal.SIGKILL)
        p.wait()
        unchanged = len(lake.keys("isolation/_delta_log/")) == commits
        retry = run.dqgate(args(staged, day))
        seen = DeltaTable(ISOLATION_TABLE, storage_options=lake.storage).to_pyarrow_table(
            filters=[("d", "=", str(day))]).column("id").to_pylist()
        run.check(unchanged and code(retry) == 0 and seen == [900000 + k],
                  f"isolation: SIGKILL while checking the winning commits leaves the log as it was; "
                  f"the retry commits (kill {k + 1}/3)", retry.stderr)


def kills(lake, work, random_kills):
    run = lake.run
    phases = os.path.join(work, "phases.log")
    version = 20
    old = set(lake.versions(1)[0])
    # Deterministic crash points first, then SIGKILL at random moments.
    plans = [("crash", p) for p in ("copy", "commit", "record")]
    plans += [("kill", None)] * random_kills
    rng = random.Random(7)
    # How long a publish takes here: the window random kills fall into.
    t = time.time()
    timing = stage(os.path.join(work, "kill-timing"), 99)
    out = lake.publish(timing, 9)
    window = max(time.time() - t, 0.2)
    run.check(code(out) == 0, f"timing publish ({window:.2f} s)", out.stderr)
    where = {}
    for how, point in plans:
        version += 1
        staged = stage(os.path.join(work, f"kill-{version}"), version)
        env = dict(lake.env, DQGATE_TEST_PHASE_LOG=phases)
        if how == "crash":
            env["DQGATE_TEST_CRASH_AT"] = point
        if os.path.exists(phases):
            os.remove(phases)
        proc = subprocess.Popen([run.binary, *lake.publish_args(staged, 1)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if how == "kill":
            # Once the copies have started (the audit before them writes
            # nothing), within a random share of a publish's duration.
            deadline = time.time() + 120
            while proc.poll() is None and time.time() < deadline:
                if os.path.exists(phases) and "copy" in open(phases).read():
                    break
                time.sleep(0.001)
            time.sleep(rng.uniform(0, window / 3))
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=300)
        last = "finished"
        if proc.returncode != 0 and os.path.exists(phases):
            with open(phases) as f:
                steps = f.read().split()
            last = steps[-1] if steps else "audit"
        elif proc.returncode != 0:
            last = "audit"
        where[last] = where.get(last, 0) + 1
        seen = set(lake.versions(1)[0])
        run.check(
            seen in (old, {version}),
            f"{how} at {point or 'random'} (stopped in: {last}): reader sees version {sorted(seen)}, old {sorted(old)} or new {version}",
        )
        out = lake.publish(staged, 1)
        seen = set(lake.versions(1)[0])
        run.check(
            code(out) == 0 and seen == {version} and code(lake.verify(1)) == 0,
            f"retry after {how} at {point or 'random'} converges on version {version}",
            out.stdout + out.stderr,
        )
        old = seen
    print(f"kills stopped publishes in: {json.dumps(where, sort_keys=True)}")

    # The copies of the publishes killed before their commit are leftovers
    # no log entry names: gc removes them (and nothing a commit named).
    before = set(lake.keys("events/"))
    out = run.dqgate(["gc", TABLE, "--min-age", "0s"])
    gone = before - set(lake.keys("events/"))
    seen = set(lake.versions(1)[0])
    run.check(
        code(out) == 0 and len(gone) >= 2 and all(k.endswith(".parquet") for k in gone)
        and f"{len(gone)} leftover(s) removed" in out.stdout
        and seen == {version} and code(lake.verify(1)) == 0 and code(lake.verify(2)) == 0,
        f"gc on S3 removed {len(gone)} orphaned copies; the reader and verify are unaffected",
        out.stdout + out.stderr,
    )


def failures(lake, work):
    run = lake.run
    staged = stage(os.path.join(work, "creds"), 30)
    objects = lake.keys("events/")
    wrong = dict(lake.env, AWS_SECRET_ACCESS_KEY="not-the-secret")
    out = lake.publish(staged, 1, env=wrong)
    run.check(
        code(out) == 3 and "SignatureDoesNotMatch" in out.stderr and lake.keys("events/") == objects,
        "wrong secret key on publish: exit 3, the store's reason named, nothing written",
        out.stdout + out.stderr,
    )
    out = lake.verify(1, env=wrong)
    run.check(code(out) == 3, "wrong secret key on verify: exit 3", out.stdout + out.stderr)

    out = run.dqgate(lake.publish_args(staged, 1, "--target", "hive"))
    run.check(
        code(out) == 2 and "cannot be swapped atomically" in out.stderr and "--target delta" in out.stderr
        and lake.keys("events/") == objects,
        "--target hive on S3: refused with exit 2, pointing to the Delta target",
        out.stderr,
    )

    # rollback: a new commit restoring the previous version of d=1.
    before = set(lake.versions(1)[0])
    staged = stage(os.path.join(work, "rollback"), 31)
    out = lake.publish(staged, 1)
    commits = len(lake.commits())
    rb = run.dqgate(["rollback", TABLE, "--partition", "d=1"])
    run.check(
        code(out) == 0 and code(rb) == 0 and len(lake.commits()) == commits + 1
        and set(lake.versions(1)[0]) == before and code(lake.verify(1)) == 0,
        f"rollback on S3: one new commit, the reader sees version {sorted(before)} again, verify passes",
        out.stderr + rb.stdout + rb.stderr,
    )

    # The report charts the table's history from its snapshot and its log.
    verdict = run.dqgate(["check", lake.rules, "--staged", staged, "--partition", "d=1",
                          "--format", "json"])
    saved = os.path.join(work, "verdict.json")
    with open(saved, "w") as f:
        f.write(verdict.stdout)
    page = os.path.join(work, "report.html")
    out = run.dqgate(["report", saved, "--table", TABLE, "-o", page])
    html = open(page).read() if os.path.exists(page) else ""
    rows = [l for l in html.splitlines() if l.startswith("<tr><td><code>d=")]
    d1 = next((l for l in rows if l.startswith("<tr><td><code>d=1</code>")), "")
    run.check(
        code(out) == 0 and len(rows) >= 4 and d1.endswith('<td class="num">1</td></tr>'),
        f"report --table s3://: {len(rows)} published partitions from the snapshot, d=1's rollback counted",
        out.stderr + "\n".join(rows),
    )

    # A published object replaced behind dqgate's back: verify finds it.
    record = json.loads(lake.s3.get_object(Bucket=LAKE, Key="events/d=2/_dqgate_audit.json")["Body"].read())
    current = [f"events/d=2/{f['path']}" for f in record["published"]["files"]]
    tampered = os.path.join(work, "tampered.parquet")
    stage(os.path.join(work, "tamper"), 2, files=1, rows=49)
    os.replace(os.path.join(work, "tamper", "part-00000.parquet"), tampered)
    lake.s3.upload_file(tampered, LAKE, current[0])
    checkpoints = [k for k in lake.keys("events/_delta_log/") if k.endswith(".checkpoint.parquet")]
    run.check(
        len(checkpoints) >= 1 and "events/_delta_log/_last_checkpoint" in lake.keys("events/_delta_log/"),
        f"checkpoints every 10 commits on S3 ({len(checkpoints)}), read by the reader above",
    )
    out = lake.verify(2)
    run.check(
        code(out) == 1 and "NOT verified" in out.stdout,
        "a published object replaced behind dqgate's back: verify exits 1",
        out.stdout + out.stderr,
    )


def measure(lake, partition):
    run = lake.run
    rules = os.path.join(REPO, "benches/standard.dq")
    n = upload(lake.s3, partition, "bench", bucket=STAGING)
    upload(lake.s3, partition, "staging/bench", bucket=LAKE)
    print(f"uploaded {n} objects twice")
    rows = []

    def timed(what, args):
        t = time.time()
        out = run.dqgate(args)
        rows.append((what, time.time() - t, out.returncode))
        run.check(out.returncode == 0, what, out.stderr)

    base = ["--partition", "sales_date=2025-03-05", "--format", "json"]
    timed("check only, staged local", ["check", rules, "--staged", partition, *base])
    timed("check only, staged on S3", ["check", rules, "--staged", f"s3://{STAGING}/bench/", *base])
    for where, staged, table in (
        ("local disk", partition, f"s3://{LAKE}/from-local/"),
        ("the table's bucket (server-side copy)", f"s3://{LAKE}/staging/bench/", f"s3://{LAKE}/same-bucket/"),
        ("another bucket (streamed)", f"s3://{STAGING}/bench/", f"s3://{LAKE}/other-bucket/"),
    ):
        timed(f"publish from {where}", ["publish", rules, "--staged", staged, *base, "--table", table])
    timed("retry (already published)", ["publish", rules, "--staged", partition, *base,
                                          "--table", f"s3://{LAKE}/from-local/"])
    print("\n| step | wall s |\n|---|---:|")
    for what, t, _ in rows:
        print(f"| {what} | {t:.2f} |")


def ballista(lake, moto, work):
    """A Ballista cluster (a `dqgate ballista scheduler` and two executors,
    real processes on loopback) whose executors read the staged objects from
    moto with their own environment: the verdict equals the local engine's,
    and a publish audited on the cluster lands in the Delta table."""
    run = lake.run
    procs = []
    try:
        sched = subprocess.Popen([run.binary, "ballista", "scheduler", "--bind", "127.0.0.1:0"],
                                 env=lake.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        procs.append(sched)
        first = sched.stderr.readline().strip()
        address = first.rsplit(" ", 1)[-1]
        logs = []
        for i in range(2):
            flight, grpc = free_port(), free_port()
            log = open(os.path.join(work, f"executor{i}.log"), "w")
            logs.append(log)
            wd = os.path.join(work, f"executor{i}")
            os.makedirs(wd, exist_ok=True)
            procs.append(subprocess.Popen(
                [run.binary, "ballista", "executor", "--scheduler", address,
                 "--bind", f"127.0.0.1:{flight}", "--grpc-port", str(grpc),
                 "--concurrent-tasks", "2", "--work-dir", wd],
                env=lake.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log))
            deadline = time.time() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", flight), timeout=1).close()
                    break
                except OSError:
                    if procs[-1].poll() is not None or time.time() > deadline:
                        raise SystemExit(f"executor {i} did not start; see {log.name}")
                    time.sleep(0.1)
        engine = f"ballista://{address}"
        staged = f"s3://{STAGING}/ballista/"
        upload(lake.s3, stage(os.path.join(work, "ballista"), 50, files=4), "ballista", bucket=STAGING)
        rules = os.path.join(work, "ballista.dq")
        with open(rules, "w") as f:
            f.write(RULES + "check sum(id) > 0\ncheck count(where note like 'v50%') = 200\n"
                    "check row_count >= published.row_count\n")
        args = ["check", rules, "--staged", staged, "--partition", "d=1", "--table", TABLE,
                "--format", "json", "--scan-only"]
        local = run.dqgate(args)
        before = len(moto.requests())
        remote = run.dqgate(args + ["--engine", engine])
        served = [l for l in moto.requests()[before:] if '"GET /dqgate-staging/ballista/' in l]
        client = re.search(r"(\d+) GET/HEAD request\(s\)", remote.stderr)
        client = int(client.group(1)) if client else None
        run.check(
            client is not None and len(served) > client,
            f"the executors read the pages from moto: moto served {len(served)} GETs of the staged "
            f"objects, the client made {client} (footers)",
            remote.stderr,
        )
        run.check(
            local.returncode in (0, 1) and local.returncode == remote.returncode
            and local.stdout == remote.stdout,
            f"Ballista cluster reading s3:// staged files: the local engine's verdict, byte for byte "
            f"(exit {local.returncode})",
            f"--- local\n{local.stdout}{local.stderr}\n--- ballista\n{remote.stdout}{remote.stderr}",
        )
        commits = len(lake.commits())
        out = run.dqgate(["publish", rules, "--staged", staged, "--partition", "d=5", "--table", TABLE,
                          "--engine", engine])
        seen, n = lake.versions(5)
        run.check(
            code(out) == 0 and len(lake.commits()) == commits + 1 and n == 200 and set(seen) == {50}
            and code(lake.verify(5)) == 0,
            "publish audited on the Ballista cluster: one commit, the reader sees the 200 audited rows",
            out.stdout + out.stderr,
        )
    finally:
        for p in procs:
            p.kill()
            p.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    argv = sys.argv[1:]
    if len(argv) < 2:
        raise SystemExit(__doc__)
    binary, work = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    random_kills = int(argv[argv.index("--kills") + 1]) if "--kills" in argv else 10
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 50
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    os.makedirs(work, exist_ok=True)
    moto = Moto(work)
    started = time.time()
    try:
        env, s3 = moto.clients()
        s3.create_bucket(Bucket=LAKE)
        s3.create_bucket(Bucket=STAGING)
        run = Run(binary, env)
        lake = Lake(run, s3, env, work)
        if "--measure" in argv:
            measure(lake, os.path.abspath(argv[argv.index("--measure") + 1]))
        elif only == "isolation":
            isolation(lake, work, rounds)
        elif only == "pruning":
            pruning(lake, moto, work)
        else:
            isolation(lake, work, rounds)
            publishes(lake, work)
            pruning(lake, moto, work)
            races(lake, work)
            kills(lake, work, random_kills)
            failures(lake, work)
            ballista(lake, moto, work)
            puts = [l for l in moto.requests() if '"PUT ' in l and "_delta_log/" in l]
            print(f"moto served {len(moto.requests())} GET/HEAD/PUT requests, "
                  f"{len(puts)} log-entry PUTs, in {time.time() - started:.1f} s")
    finally:
        moto.stop()
    print(f"{run.passed} passed, {run.failed} failed")
    sys.exit(1 if run.failed else 0)


if __name__ == "__main__":
    main()
