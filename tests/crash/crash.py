"""Power cuts and disk faults under the real dqgate binary (issue 23).

    python crash.py DQGATE CRASHFS WORK [--random N] [--only NAME,...] [--no-faults]

Each scenario seeds a directory on the plain disk, mounts crashfs (our
crash-simulating FUSE file system, tests/crashfs) over it, runs the real
`dqgate` there and unmounts, which leaves a trace of every mutating
operation. Then:

- power cuts: for every crash point k (a cut after the k-th operation) the
  strict crash state is written into the same directory (paths are the
  same as during the run, as the journals name absolute paths). Durable
  state changes only at syncs, so each distinct state is checked once
  (the number of crash points and of distinct states are both reported).
  Checks: the table holds the old or the new version of each partition,
  complete, never a mix, never an empty or torn file under a published name
  (`dqgate verify`, and the files read back), nothing but published files
  under ROOT/**/*.parquet (Hive), the table reads with DuckDB (Hive) or the
  `deltalake` package (Delta); then `dqgate gc`, the same checks, the
  operation retried, and it must converge to the new version. At the last
  crash point of a run that exited 0 the new version must be there
  (acknowledged = durable). A seeded sample of randomized crash states
  (an arbitrary subset of the unsynced operations survives, writes torn)
  gets the same checks.
- faults: for every k, the k-th write, sync, rename, create, link and unlink
  fails (ENOSPC and EIO alternately): dqgate must exit non-zero naming the
  operation's path and the error, or, when it exits 0, have made its result
  durable; nothing half-published, no published version lost; after the
  fault is gone the retry converges.

The last line is `crash: N passed, M failed`.
"""

import datetime
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

DAY1 = datetime.date(2025, 3, 4)
DAY2 = datetime.date(2025, 3, 5)
RULES = """table sales
partitioned by sales_date

check row_count > 0
check unique(order_id)
"""
NESTED_RULES = """table sales
partitioned by sales_date

check row_count > 0
check unique(order_id)
check null_count(store_id) = 0
"""
ACROSS_RULES = """table sales
partitioned by sales_date

check row_count > 0
check unique(order_id) across published
"""
DUCKDB = duckdb.connect()
ERRNO_TEXT = {"ENOSPC": "No space left on device", "EIO": "Input/output error"}


class Ctx:
    def __init__(self, dqgate, crashfs, work):
        self.dqgate, self.crashfs, self.work = dqgate, crashfs, work
        self.mnt = os.path.join(work, "m")
        self.root = os.path.join(self.mnt, "table")
        self.staging = os.path.join(self.mnt, "staging")
        self.seed = os.path.join(work, "seed")
        self.trace = os.path.join(work, "trace")
        self.fault_log = os.path.join(work, "faults.log")
        self.rules = {}
        for name, text in (("plain", RULES), ("nested", NESTED_RULES), ("across", ACROSS_RULES)):
            path = os.path.join(work, f"{name}.dq")
            with open(path, "w") as f:
                f.write(text)
            self.rules[name] = path
        self.passed = 0
        self.failed = 0
        self.failures = []

    def dq(self, *args, env=None, check=None):
        full = dict(os.environ)
        full.update(env or {})
        p = subprocess.run([self.dqgate, *args], capture_output=True, text=True, env=full, timeout=120)
        if check is not None and p.returncode not in check:
            raise Violation(f"dqgate {' '.join(args)}: exit {p.returncode} (expected {check})\n"
                            f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
        return p

    def clear(self):
        for name in os.listdir(self.mnt):
            path = os.path.join(self.mnt, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)

    def save_seed(self):
        if os.path.exists(self.seed):
            shutil.rmtree(self.seed)
        shutil.copytree(self.mnt, self.seed, symlinks=True)

    def restore_seed(self):
        self.clear()
        shutil.copytree(self.seed, self.mnt, symlinks=True, dirs_exist_ok=True)

    def mount(self, fault=None):
        if os.path.exists(self.fault_log):
            os.remove(self.fault_log)
        args = [self.crashfs, "mount", self.mnt, "--trace", self.trace]
        if fault:
            args += ["--fault", fault, "--fault-log", self.fault_log]
        proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while not mounted(self.mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"crashfs did not mount: {proc.stderr.read()}")
            time.sleep(0.01)
        return proc

    def unmount(self, proc):
        for _ in range(100):
            if subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        else:
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)
        proc.wait(timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"crashfs exited {proc.returncode}: {proc.stderr.read()}")

    def info(self):
        out = subprocess.run([self.crashfs, "info", self.trace], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    def materialize(self, k, seed=None, full=False):
        args = [self.crashfs, "materialize", self.trace, "--after", str(k)]
        if seed is not None:
            args += ["--random", str(seed)]
        if full:
            args += ["--full"]
        out = subprocess.run(args + [self.mnt], capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def record(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.failures.append(what)
            print(f"FAIL: {what}", flush=True)


class Violation(Exception):
    pass


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


# ---- staged data ----------------------------------------------------------

def rows_of(day, seed, n=40):
    base = seed * 1000
    return pa.table({
        "sales_date": pa.array([day] * n, pa.date32()),
        "store_id": pa.array([1 + i % 2 for i in range(n)], pa.int32()),
        "order_id": pa.array(range(base, base + n), pa.int64()),
    })


def stage(ctx, name, day, seed, nested=False, files=2):
    """Writes a staged directory of version `seed`; returns (path, order ids)."""
    out = os.path.join(ctx.staging, name)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    table = rows_of(day, seed)
    if nested:
        for store in (1, 2):
            part = table.filter(pa.compute.equal(table["store_id"], store))
            os.makedirs(os.path.join(out, f"store_id={store}"))
            pq.write_table(part.drop_columns(["sales_date", "store_id"]),
                           os.path.join(out, f"store_id={store}", "part-00000.parquet"))
    else:
        step = (table.num_rows + files - 1) // files
        for i in range(files):
            pq.write_table(table.slice(i * step, step), os.path.join(out, f"part-{i:05d}.parquet"))
    return out, frozenset(table["order_id"].to_pylist())


def part_rel(day):
    return f"sales_date={day.isoformat()}"


# ---- what a table holds -----------------------------------------------------

def hive_partition(ctx, day, verify):
    """The order ids of the partition's version, read through its audit
    record's manifest (and checked by `dqgate verify` when `verify`); None
    when nothing is there."""
    part = os.path.join(ctx.root, part_rel(day))
    if not os.path.lexists(part):
        return None
    v = ctx.dq("verify", ctx.root, "--partition", part_rel(day)) if verify else None
    if v is not None and v.returncode != 0:
        raise Violation(f"verify {part_rel(day)}: exit {v.returncode}: {v.stdout.strip()} {v.stderr.strip()}")
    with open(os.path.join(part, "_dqgate_audit.json")) as f:
        record = json.load(f)
    ids = set()
    for entry in record["published"]["files"]:
        path = os.path.join(part, entry["path"])
        if os.path.getsize(path) != entry["bytes"]:
            raise Violation(f"{path}: size {os.path.getsize(path)}, record says {entry['bytes']}")
        ids.update(pq.read_table(path, columns=["order_id"])["order_id"].to_pylist())
    return frozenset(ids)


def hive_published_files(ctx):
    """Every data file the partitions' records list."""
    listed = set()
    for dirpath, dirs, files in os.walk(ctx.root):
        dirs[:] = [d for d in dirs if not d.startswith("_")]
        if "_dqgate_audit.json" in files:
            with open(os.path.join(dirpath, "_dqgate_audit.json")) as f:
                record = json.load(f)
            listed.update(os.path.join(dirpath, e["path"]) for e in record["published"]["files"])
            dirs[:] = []
    return listed


def hive_glob_only_published(ctx):
    found = set()
    for dirpath, _, files in os.walk(ctx.root):
        found.update(os.path.join(dirpath, f) for f in files if f.endswith(".parquet"))
    extra = found - hive_published_files(ctx)
    if extra:
        raise Violation(f"ROOT/**/*.parquet matches files no record lists: {sorted(extra)}")


def duckdb_read(ctx):
    """The table as DuckDB reads it (the README's call): order ids by day."""
    if not os.path.isdir(ctx.root):
        return {}
    con = DUCKDB.cursor()
    try:
        rows = con.execute(
            "SELECT sales_date, order_id FROM read_parquet(?, hive_partitioning = true)",
            [os.path.join(ctx.root, "**", "*.parquet")]).fetchall()
    except duckdb.IOException as e:
        if "No files found" in str(e):
            return {}
        raise Violation(f"DuckDB cannot read the table: {e}")
    except duckdb.Error as e:
        raise Violation(f"DuckDB cannot read the table: {e}")
    out = {}
    for d, oid in rows:
        out.setdefault(d, set()).add(oid)
    return {d: frozenset(v) for d, v in out.items()}


def delta_read(ctx):
    from deltalake import DeltaTable
    log = os.path.join(ctx.root, "_delta_log")
    # No commit yet (a first publish stopped before it): no table.
    if not os.path.isdir(log) or not any(n.endswith(".json") and n[:20].isdigit() for n in os.listdir(log)):
        return {}
    try:
        t = DeltaTable(ctx.root).to_pyarrow_table(columns=["sales_date", "order_id"])
    except Exception as e:  # the deltalake package raises several types
        raise Violation(f"deltalake cannot read the table: {type(e).__name__}: {e}")
    out = {}
    for d, oid in zip(t["sales_date"].to_pylist(), t["order_id"].to_pylist()):
        out.setdefault(d, set()).add(oid)
    return {d: frozenset(v) for d, v in out.items()}


# ---- scenarios --------------------------------------------------------------

class Scenario:
    """`seed` prepares the table on the plain disk and sets `old` and `new`:
    per day, the order ids of the version before and after the operation
    (None: nothing published). `run` is the traced operation (returns the
    commands' results). `retry` redoes it on a recovered crash state."""
    target = "hive"
    faults = True
    # The days whose publish or rollback (exit 0) must leave a trail line.
    trail_days = ()
    trail_action = "publish"

    def __init__(self, ctx):
        self.ctx = ctx
        self.old, self.new = {}, {}
        self.staged = {}

    def publish(self, day, staged, rules="plain", env=None, check=None):
        args = ["publish", self.ctx.rules[rules], "--staged", staged, "--partition", part_rel(day),
                "--table", self.ctx.root, "--keep", "2"]
        if self.target == "delta":
            args += ["--target", "delta"]
        return self.ctx.dq(*args, env=env, check=check)

    def read(self):
        return delta_read(self.ctx) if self.target == "delta" else duckdb_read(self.ctx)

    def state(self, full=True):
        """Per day: the order ids published now (None: nothing). `full`
        adds `dqgate verify` and DuckDB's read of the Hive table."""
        if self.target == "delta":
            got = self.read()
            return {d: got.get(d) for d in self.new}
        # `verify` for the partitions the operation changes; the others are
        # still read back through their records.
        out = {d: hive_partition(self.ctx, d, full and self.old[d] != self.new[d]) for d in self.new}
        hive_glob_only_published(self.ctx)
        if not full:
            return out
        read = self.read()
        for d in self.new:
            if read.get(d) != out[d]:
                raise Violation(f"DuckDB reads {part_rel(d)} as {describe(read.get(d))}, "
                                f"its record lists {describe(out[d])}")
        return out

    def retry_publish(self, day, rules="plain"):
        """Publishes the day's new version again: from its staged directory
        when it is still there with data, else from a fresh copy (as a
        pipeline re-run writes it)."""
        name, seed, nested = self.staged[day]
        path = os.path.join(self.ctx.staging, name)
        has_data = os.path.isdir(path) and any(f.endswith(".parquet") for _, _, fs in os.walk(path) for f in fs)
        if not has_data:
            path, _ = stage(self.ctx, name + "-again", day, seed, nested=nested)
        self.publish(day, path, rules=rules, check=(0,))

    def stage(self, name, day, seed, nested=False):
        path, ids = stage(self.ctx, name, day, seed, nested=nested)
        self.staged[day] = (name, seed, nested)
        return path, ids


def describe(ids):
    if ids is None:
        return "nothing"
    return f"{len(ids)} rows, order ids {min(ids)}..{max(ids)}" if ids else "0 rows"


class FirstPublish(Scenario):
    name = "first publish"
    trail_days = (DAY1,)

    def seed(self):
        self.path, ids = self.stage("s1", DAY1, 1)
        self.old, self.new = {DAY1: None}, {DAY1: ids}

    def run(self):
        return [self.publish(DAY1, self.path)]

    def retry(self):
        self.retry_publish(DAY1)


class Replacement(Scenario):
    name = "replacement"
    trail_days = (DAY1,)

    def seed(self):
        p1, v1 = stage(self.ctx, "s1", DAY1, 1)
        p2, v2 = stage(self.ctx, "s2", DAY2, 2)
        self.publish(DAY1, p1, check=(0,))
        self.publish(DAY2, p2, check=(0,))
        self.path, v3 = self.stage("s3", DAY1, 3)
        self.old, self.new = {DAY1: v1, DAY2: v2}, {DAY1: v3, DAY2: v2}

    def run(self):
        return [self.publish(DAY1, self.path)]

    def retry(self):
        self.retry_publish(DAY1)


class Subdirectories(Replacement):
    name = "publish with subdirectories"

    def seed(self):
        p1, v1 = stage(self.ctx, "s1", DAY1, 1, nested=True)
        self.publish(DAY1, p1, rules="nested", check=(0,))
        self.path, v2 = self.stage("s2", DAY1, 2, nested=True)
        self.old, self.new = {DAY1: v1}, {DAY1: v2}

    def run(self):
        return [self.publish(DAY1, self.path, rules="nested")]

    def retry(self):
        self.retry_publish(DAY1, rules="nested")


class Rollback(Scenario):
    name = "rollback"
    trail_days = (DAY1,)
    trail_action = "rollback"

    def seed(self):
        p1, v1 = stage(self.ctx, "s1", DAY1, 1)
        p2, v2 = stage(self.ctx, "s2", DAY1, 2)
        self.publish(DAY1, p1, check=(0,))
        self.publish(DAY1, p2, check=(0,))
        self.old, self.new = {DAY1: v2}, {DAY1: v1}

    def run(self):
        return [self.ctx.dq("rollback", self.ctx.root, "--partition", part_rel(DAY1))]

    def retry(self):
        # Rolling back again once the rollback is done would undo it: retry
        # only when the old version is still published.
        if self.state()[DAY1] == self.old[DAY1]:
            self.ctx.dq("rollback", self.ctx.root, "--partition", part_rel(DAY1), check=(0,))

    def converged(self):
        # The displaced version is kept: a second rollback brings it back.
        self.ctx.dq("rollback", self.ctx.root, "--partition", part_rel(DAY1), check=(0,))
        if self.state()[DAY1] != self.old[DAY1]:
            raise Violation("after the rollback, the version it displaced was lost")


class Gc(Scenario):
    name = "gc"

    def seed(self):
        p1, v1 = stage(self.ctx, "s1", DAY1, 1)
        self.publish(DAY1, p1, check=(0,))
        p2, v2 = self.stage("s2", DAY1, 2)
        # A publish killed right after its swap: the journal is left, the
        # displaced version still sits at the staged path.
        self.publish(DAY1, p2, env={"DQGATE_TEST_CRASH_AT": "displace"})
        self.old, self.new = {DAY1: v2}, {DAY1: v2}
        self.v1 = v1

    def run(self):
        return [self.ctx.dq("gc", self.ctx.root)]

    def retry(self):
        self.ctx.dq("gc", self.ctx.root, check=(0,))

    def converged(self):
        if os.listdir(os.path.join(self.ctx.root, "_dqgate", "tx")):
            raise Violation("gc left a journal")
        self.ctx.dq("rollback", self.ctx.root, "--partition", part_rel(DAY1), check=(0,))
        if self.state()[DAY1] != self.v1:
            raise Violation("the version the interrupted publish displaced was lost")


class Reaudit(Scenario):
    """Two publishers of different days, each checking `unique(order_id)
    across published`, meet after their first audit: one wins, the other
    finds the table changed, audits again and publishes."""
    name = "re-audit after a conflict"
    trail_days = (DAY1, DAY2)
    # Two racing processes: "the k-th write" is not one operation from run
    # to run. The other scenarios inject faults into the same code paths.
    faults = False

    def seed(self):
        p0, v0 = stage(self.ctx, "s0", DAY1, 0)
        self.publish(DAY1, p0, rules="across", check=(0,))
        self.p1, v1 = self.stage("s1", DAY1, 1)
        self.p2, v2 = self.stage("s2", DAY2, 2)
        self.old, self.new = {DAY1: v0, DAY2: None}, {DAY1: v1, DAY2: v2}

    def run(self):
        barrier = os.path.join(self.ctx.work, "barrier")
        shutil.rmtree(barrier, ignore_errors=True)
        env = {"DQGATE_TEST_BARRIER": barrier}
        out = [None, None]

        def go(i, day, path):
            out[i] = self.publish(day, path, rules="across", env=env)
        threads = [threading.Thread(target=go, args=(0, DAY1, self.p1)),
                   threading.Thread(target=go, args=(1, DAY2, self.p2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if not any("again" in (p.stderr or "") for p in out):
            raise Violation("neither publisher audited again: " + " | ".join(p.stderr.strip() for p in out))
        return out

    def retry(self):
        self.retry_publish(DAY1, rules="across")
        self.retry_publish(DAY2, rules="across")


class DeltaCommit(Replacement):
    """The replacement, as one Delta commit on the local file system."""
    name = "Delta local commit"
    target = "delta"
    trail_days = ()

    def converged(self):
        self.ctx.dq("verify", self.ctx.root, "--partition", part_rel(DAY1), check=(0,))


class DeltaFirst(DeltaCommit):
    name = "Delta first commit"

    def seed(self):
        FirstPublish.seed(self)


def resolved_read(ctx, day):
    """The partition read as a reader that resolves it once: open the
    directory, list it and open its files relative to that handle. It sees
    one version, whatever the swap does meanwhile (None: no directory)."""
    try:
        fd = os.open(os.path.join(ctx.root, part_rel(day)), os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    try:
        ids = set()
        for name in sorted(os.listdir(fd)):
            if not name.endswith(".parquet"):
                continue
            with os.fdopen(os.open(name, os.O_RDONLY, dir_fd=fd), "rb") as f:
                ids.update(pq.read_table(f, columns=["order_id"]).column("order_id").to_pylist())
        return frozenset(ids)
    finally:
        os.close(fd)


class RacingReader(Replacement):
    """A replacement while readers keep reading the table through the mount.

    One resolves the partition once (the spec's strong reader): every read
    sees the old or the new rows, never a mix, never nothing. The other is
    DuckDB's glob, the README's call: it lists a directory and then stats
    each name by path, and skips a name it cannot stat without an error
    (`LocalFileSystem::ListFilesExtended`). A glob that listed the old
    version just before the swap therefore finds no file of the partition,
    the silent form of "a file gone under a lister": counted, never a mix,
    and most reads must see the partition."""
    name = "publish racing a reader"
    faults = False

    def run(self):
        stop = threading.Event()
        seen = {"reads": 0, "skipped": 0, "bad": [], "resolved": 0}

        def reader():
            while not stop.is_set():
                try:
                    got = duckdb_read(self.ctx)
                except Violation:
                    # A file listed, then swapped away before it was opened:
                    # the README's lister retries.
                    continue
                seen["reads"] += 1
                if got.get(DAY1) is None and got.get(DAY2) == self.old.get(DAY2):
                    seen["skipped"] += 1
                elif got.get(DAY1) not in (self.old[DAY1], self.new[DAY1]):
                    seen["bad"].append(f"DuckDB: {describe(got.get(DAY1))}")

        def resolver():
            while not stop.is_set():
                got = resolved_read(self.ctx, DAY1)
                seen["resolved"] += 1
                if got not in (self.old[DAY1], self.new[DAY1]):
                    seen["bad"].append(f"resolved once: {describe(got)}")
        threads = [threading.Thread(target=reader), threading.Thread(target=resolver)]
        for t in threads:
            t.start()
        time.sleep(0.2)
        out = [self.publish(DAY1, self.path)]
        time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join()
        counts = f"{seen['reads']} DuckDB reads, {seen['skipped']} of them without the partition; " \
                 f"{seen['resolved']} resolved reads"
        if seen["bad"] or seen["resolved"] == 0 or seen["reads"] <= 2 * seen["skipped"]:
            raise Violation(f"the readers saw a mix: {seen['bad'][:3]} ({counts})")
        print(f"{self.name}: {counts}", flush=True)
        return out


SCENARIOS = [FirstPublish, Replacement, Subdirectories, Rollback, Gc, Reaudit, DeltaFirst, DeltaCommit,
             RacingReader]


# ---- checks -----------------------------------------------------------------

def check_between(sc, where, full=True):
    """Each partition holds the old or the new version, complete."""
    got = sc.state(full)
    for d in sc.new:
        if got.get(d) not in (sc.old[d], sc.new[d]):
            raise Violation(f"{where}: {part_rel(d)} holds {describe(got.get(d))}, "
                            f"neither the old ({describe(sc.old[d])}) nor the new ({describe(sc.new[d])}) version")
    return got


def check_new(sc, where):
    got = sc.state()
    for d in sc.new:
        if got.get(d) != sc.new[d]:
            raise Violation(f"{where}: {part_rel(d)} holds {describe(got.get(d))}, "
                            f"not the new version ({describe(sc.new[d])})")


def check_acknowledged(sc, where):
    """What an exit 0 reported survives: the new versions, and (Hive) the
    audit trail's line for each publish or rollback it made."""
    check_new(sc, where)
    for d in sc.trail_days:
        path = os.path.join(sc.ctx.root, "_dqgate", "trail", part_rel(d) + ".jsonl")
        with open(os.path.join(sc.ctx.root, part_rel(d), "_dqgate_audit.json")) as f:
            version = json.load(f)["published"]["version"]
        lines = open(path).read().splitlines() if os.path.exists(path) else []
        last = json.loads(lines[-1]) if lines else {}
        if last.get("version") != version:
            raise Violation(f"{where}: the audit trail {path} does not end with the {sc.trail_action} "
                            f"of {version} (it holds {len(lines)} line(s))")


def recover_and_retry(sc, where):
    """A crash state: old or new; gc; old or new; retry; new."""
    ctx = sc.ctx
    check_between(sc, where + ", as the power cut left it")
    gc_args = ["gc", ctx.root] + (["--min-age", "0s"] if sc.target == "delta" else [])
    ctx.dq(*gc_args, check=(0,))
    check_between(sc, where + ", after gc", full=False)
    sc.retry()
    check_new(sc, where + ", after the retry")
    if hasattr(sc, "converged"):
        sc.converged()


def attempt(ctx, what, fn):
    try:
        fn()
        ctx.record(True, what)
    except Violation as e:
        ctx.record(False, f"{what}: {e}")
    except (subprocess.SubprocessError, RuntimeError, OSError) as e:
        ctx.record(False, f"{what}: {type(e).__name__}: {e}")


def traced_run(sc, fault=None):
    ctx = sc.ctx
    ctx.restore_seed()
    proc = ctx.mount(fault)
    try:
        try:
            results = sc.run()
        except Violation as e:
            results = e
    finally:
        ctx.unmount(proc)
    return results


def crash_points(sc, n_random, rng_base):
    ctx = sc.ctx
    results = traced_run(sc)
    if isinstance(results, Violation):
        ctx.record(False, f"{sc.name}: the traced run: {results}")
        return
    ok = all(p.returncode == 0 for p in results)
    if not ok:
        ctx.record(False, f"{sc.name}: the traced run failed: " +
                   " | ".join(f"exit {p.returncode}: {p.stderr.strip()[-500:]}" for p in results))
    info = ctx.info()
    n = info["ops"]
    ks = sorted({0, n} | {s + 1 for s in info["syncs"]})
    seen = set()
    distinct = 0
    for k in ks:
        digest = ctx.materialize(k)
        last = k == n
        if digest in seen and not last:
            continue
        if digest not in seen:
            distinct += 1
        seen.add(digest)
        where = f"{sc.name}: power cut after operation {k} of {n} (strict)"
        if last and ok:
            # Acknowledged = durable: what the run reported survives.
            attempt(ctx, where + ", acknowledged", lambda: check_acknowledged(sc, where + " (exit 0)"))
            ctx.materialize(k)
        attempt(ctx, where, lambda: recover_and_retry(sc, where))
    rand = 0
    for i in range(n_random):
        seed = rng_base + i
        k = 1 + (seed * 7919) % max(n, 1)
        ctx.materialize(k, seed=seed)
        where = f"{sc.name}: random crash state after operation {k} of {n}, seed {seed}"
        attempt(ctx, where, lambda: recover_and_retry(sc, where))
        rand += 1
    print(f"{sc.name}: {n} operations, {len(info['syncs'])} syncs: {n + 1} crash points, "
          f"{distinct} distinct strict states checked, {rand} random states", flush=True)
    return info


def faults(sc, info):
    ctx = sc.ctx
    classes = ["write", "sync", "rename", "create", "link", "unlink", "truncate"]
    total = 0
    for cls in classes:
        for k in range(1, info["counts"].get(cls, 0) + 1):
            errno = "ENOSPC" if k % 2 else "EIO"
            total += 1
            where = f"{sc.name}: {cls} #{k} fails with {errno}"
            attempt(ctx, where, lambda: one_fault(sc, cls, k, errno, where))
    print(f"{sc.name}: {total} injected faults", flush=True)


def one_fault(sc, cls, k, errno, where):
    ctx = sc.ctx
    results = traced_run(sc, fault=f"{cls}:{k}:{errno}")
    if isinstance(results, Violation):
        raise results
    fired = open(ctx.fault_log).read().split("\t") if os.path.exists(ctx.fault_log) else None
    codes = [p.returncode for p in results]
    if fired is None:
        # The run did fewer operations of this class (another order of
        # racing processes): nothing was injected.
        return
    path = fired[2].strip()
    if all(c == 0 for c in codes):
        # It went on despite the fault: then what it reported must be durable.
        ctx.materialize(10 ** 9)
        check_acknowledged(sc, where + " (exit 0, the power cut right after)")
    else:
        err = " ".join(p.stderr for p in results if p.returncode != 0)
        named = any(x in err for x in (path, os.path.dirname(path)))
        if ERRNO_TEXT[errno] not in err or not named:
            raise Violation(f"exit {codes}, but the message does not name the error and the path {path}: "
                            f"{err.strip()[-600:]}")
        if any(c == 101 for c in codes):
            raise Violation(f"dqgate panicked: {err.strip()[-600:]}")
    ctx.materialize(10 ** 9, full=True)
    recover_and_retry(sc, where + ", the fault gone")


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    dqgate, crashfs, work = (os.path.abspath(a) for a in args[:3])
    n_random = int(args[args.index("--random") + 1]) if "--random" in args else 16
    only = args[args.index("--only") + 1].split(",") if "--only" in args else None
    with_faults = "--no-faults" not in args
    mnt = os.path.join(work, "m")
    if mounted(mnt):
        # A mount a killed run left behind.
        subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(os.path.join(work, "m"))
    ctx = Ctx(dqgate, crashfs, work)
    started = time.monotonic()
    for i, cls in enumerate(SCENARIOS):
        sc = cls(ctx)
        if only and not any(o.lower() in sc.name.lower() for o in only):
            continue
        t0 = time.monotonic()
        ctx.clear()
        os.makedirs(ctx.staging)
        sc.seed()
        ctx.save_seed()
        info = crash_points(sc, n_random, 1000 * (i + 1))
        if info and with_faults and sc.faults:
            faults(sc, info)
        print(f"{sc.name}: {time.monotonic() - t0:.1f} s", flush=True)
    print(f"crash: {time.monotonic() - started:.0f} s in all")
    if ctx.failures:
        print(f"{len(ctx.failures)} violation(s); the first ones:")
        for f in ctx.failures[:20]:
            print(f"  {f[:1500]}")
    print(f"crash: {ctx.passed} passed, {ctx.failed} failed", flush=True)
    # Not sys.exit: the native readers' runtimes can abort while the
    # interpreter tears down.
    os._exit(1 if ctx.failed else 0)


if __name__ == "__main__":
    main()
