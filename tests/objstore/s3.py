"""Audit from a real S3-compatible server: moto in server mode on loopback.

    python tests/objstore/s3.py DQGATE_BINARY WORK_DIR
    python tests/objstore/s3.py DQGATE_BINARY WORK_DIR --measure PARTITION_DIR [--reps N]

Run by .ci/run (which installs `moto[server]` and boto3 in a virtual
environment). moto starts with IAM authentication on
(INITIAL_NO_AUTH_ACTION_COUNT=3: the first three calls create a user, its
access key and a policy; every later request must be signed with that key), so
wrong credentials are rejected for real. The testdata/data fixtures are
uploaded with boto3, then the real dqgate binary audits them from
`s3://...` with AWS_ENDPOINT_URL pointing at moto:

- every golden `check` case gives the same stdout bytes and exit code as on
  local disk (an error message may name the object's URL instead of its path);
- a rule file the footers answer makes exactly two GET requests for its one
  file, counted in moto's own request log (no data page is read);
- a wrong secret key, a missing bucket: exit 3, the URL named, an error
  verdict in JSON;
- publish from S3: refused with exit 2.

With --measure, PARTITION_DIR (e.g. from `cargo bench --bench gen_partition`)
is uploaded and audited from moto and from local disk with
benches/standard.dq; wall times, GET requests and bytes are printed.

Prints "N passed, M failed" and exits 1 on any failure.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time

import boto3

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUCKET = "dqgate-staged"
REGION = "us-east-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    """moto's S3 server on loopback with IAM authentication on."""

    def __init__(self, work):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(work, "moto.log")
        self.log = open(self.log_path, "w")
        env = dict(
            os.environ,
            INITIAL_NO_AUTH_ACTION_COUNT="3",
            PYTHONUNBUFFERED="1",
            MOTO_PORT=str(self.port),
        )
        # moto_server, with conditional puts made atomic (see moto_serial.py).
        server = os.path.join(os.path.dirname(os.path.abspath(__file__)), "moto_serial.py")
        self.proc = subprocess.Popen(
            [sys.executable, server, "127.0.0.1", str(self.port)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"moto_server did not start; see {self.log_path}")
                time.sleep(0.2)

    def setup_user(self):
        iam = boto3.client(
            "iam",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="dqgate")
        key = iam.create_access_key(UserName="dqgate")["AccessKey"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
        }
        iam.put_user_policy(
            UserName="dqgate", PolicyName="s3", PolicyDocument=json.dumps(policy)
        )
        return key["AccessKeyId"], key["SecretAccessKey"]

    def clients(self):
        """The environment a dqgate run against moto gets (the signing user's
        key, nothing from the caller's AWS configuration) and a boto3 client
        with the same key."""
        key, secret = self.setup_user()
        env = dict(
            os.environ,
            AWS_ENDPOINT_URL=self.endpoint,
            AWS_ALLOW_HTTP="true",
            AWS_REGION=REGION,
            AWS_ACCESS_KEY_ID=key,
            AWS_SECRET_ACCESS_KEY=secret,
        )
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_PROFILE", None)
        s3 = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
        )
        return env, s3

    def requests(self):
        """The request lines moto has logged so far."""
        time.sleep(0.5)  # moto logs a request after answering it
        with open(self.log_path) as f:
            # werkzeug colours some lines: strip the escape sequences.
            lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in f]
        return [l for l in lines if '"GET ' in l or '"HEAD ' in l or '"PUT ' in l]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def upload(s3, local_dir, prefix, bucket=BUCKET):
    n = 0
    for d, _, files in os.walk(local_dir):
        for f in sorted(files):
            path = os.path.join(d, f)
            rel = os.path.relpath(path, local_dir).replace(os.sep, "/")
            s3.upload_file(path, bucket, f"{prefix}/{rel}")
            n += 1
    return n


class Run:
    def __init__(self, binary, env):
        self.binary = binary
        self.env = env
        self.passed = 0
        self.failed = 0

    def dqgate(self, args, cwd=REPO, env=None):
        return subprocess.run(
            [self.binary, *args],
            cwd=cwd,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"ok   {what}")
        else:
            self.failed += 1
            print(f"FAIL {what}\n{detail}")


def case_args(case_dir):
    with open(os.path.join(case_dir, "cmd")) as f:
        args = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
    # Cases with a setup (a published table under $TMP) test the local table
    # side; the staged side of their runs is covered by the others.
    if args[0] != "check" or "--staged" not in args or any("$TMP" in a for a in args):
        return None
    if os.path.exists(os.path.join(case_dir, "setup")):
        return None
    i = args.index("--staged") + 1
    staged = os.path.normpath(os.path.join(case_dir, args[i]))
    if not os.path.isdir(staged):
        return None
    return args, i, os.path.relpath(staged, os.path.join(REPO, "testdata/data"))


def golden(run):
    cases_root = os.path.join(REPO, "testdata/cases")
    compared = 0
    for name in sorted(os.listdir(cases_root)):
        case = os.path.join(cases_root, name)
        parsed = case_args(case)
        if parsed is None:
            continue
        args, i, data_name = parsed
        local = run.dqgate(args, cwd=case)
        remote_args = list(args)
        url = f"s3://{BUCKET}/data/{data_name}/"
        remote_args[i] = url
        remote = run.dqgate(remote_args, cwd=case)
        same_code = local.returncode == remote.returncode
        if local.returncode == 3 and local.stdout != remote.stdout:
            # The error names the object by its URL where the local run names
            # the file by its path: otherwise the bytes are the same.
            as_local = remote.stdout.replace(url, args[i].rstrip("/") + "/")
            ok = same_code and as_local == local.stdout and url in remote.stderr
        else:
            ok = same_code and local.stdout == remote.stdout
        if local.returncode <= 1:
            ok = ok and " GET/HEAD request(s), " in remote.stderr
        run.check(
            ok,
            f"golden {name}: s3 verdict equals local (exit {local.returncode})",
            f"local exit {local.returncode}, s3 exit {remote.returncode}\n"
            f"--- local stdout\n{local.stdout}\n--- s3 stdout\n{remote.stdout}\n--- s3 stderr\n{remote.stderr}",
        )
        compared += 1
    run.check(compared >= 10, f"{compared} golden cases compared")


FOOTER_RULES = """table types
check row_count between 1 and 10
check min(i8) = -3
check max(d) = date '2025-03-05'
check null_rate(all_null) = 100%
"""


def footer_fast_path(run, moto, work):
    rules = os.path.join(work, "footers.dq")
    with open(rules, "w") as f:
        f.write(FOOTER_RULES)
    before = len(moto.requests())
    out = run.dqgate(["check", rules, "--staged", f"s3://{BUCKET}/data/types/", "--format", "json"])
    lines = moto.requests()[before:]
    gets = [l for l in lines if "types.parquet" in l and '"GET ' in l]
    verdict = json.loads(out.stdout) if out.returncode == 0 else {}
    sources = [c.get("source") for c in verdict.get("checks", [])]
    run.check(
        out.returncode == 0 and sources == ["metadata"] * 4,
        "footer rule file passes from footers only",
        out.stdout + out.stderr,
    )
    # First 4 and last 8 bytes in one ranged GET (the file is small), then the footer.
    run.check(
        len(gets) == 2 and "2 GET/HEAD request(s)" in out.stderr,
        f"footer fast path: moto saw {len(gets)} GETs of the file (expected 2)",
        "".join(lines) + out.stderr,
    )
    before = len(moto.requests())
    out = run.dqgate(
        ["check", rules, "--staged", f"s3://{BUCKET}/data/types/", "--format", "json", "--scan-only"]
    )
    gets = [l for l in moto.requests()[before:] if "types.parquet" in l]
    run.check(
        out.returncode == 0 and len(gets) > 2 and f" {len(gets)} GET/HEAD request(s)" in out.stderr,
        f"--scan-only reads pages: moto saw {len(gets)} GET/HEAD requests of the file, as dqgate counted",
        out.stderr,
    )


def references(run, work):
    """Rule files whose `reference` tables are on S3: the same bytes as with
    the local reference files (a Hive-partitioned directory and one object)."""
    compared = 0
    for name in ("ref_fail_text", "ref_fail_json", "ref_pass", "ref_type_mismatch"):
        case = os.path.join(REPO, "testdata/cases", name)
        with open(os.path.join(case, "cmd")) as f:
            args = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
        rules_at = args.index("rules.dq")
        with open(os.path.join(case, "rules.dq")) as f:
            text = f.read()
        remote = re.sub(r"'\.\./\.\./data/", f"'s3://{BUCKET}/data/", text)
        if remote == text:
            continue
        os.makedirs(os.path.join(work, name), exist_ok=True)
        moved = os.path.join(work, name, "rules.dq")
        with open(moved, "w") as f:
            f.write(remote)
        local = run.dqgate(args, cwd=case)
        remote_args = list(args)
        remote_args[rules_at] = moved
        out = run.dqgate(remote_args, cwd=case)
        # The rule file is named as given and hashed: its path and its hash
        # (the reference paths differ) are the differences.
        def same(text):
            return re.sub(r'"sha256": "[0-9a-f]{64}"', '"sha256": "..."', text.replace(moved, "rules.dq"))
        ok = local.returncode == out.returncode and same(local.stdout) == same(out.stdout)
        run.check(ok, f"references on S3: {name} gives the local verdict (exit {local.returncode})",
                  f"--- local\n{local.stdout}{local.stderr}\n--- s3\n{out.stdout}{out.stderr}")
        compared += 1
    missing = os.path.join(work, "missing_ref.dq")
    with open(missing, "w") as f:
        f.write(f"table t\nreference r at 's3://{BUCKET}/no/such/prefix/'\n"
                "check values(store_id) in r(store_id)\n")
    out = run.dqgate(["check", missing, "--staged", "testdata/data/sales_ok"])
    run.check(out.returncode == 3 and f"s3://{BUCKET}/no/such/prefix/" in out.stderr,
              "a reference prefix on S3 without files: exit 3, URL named", out.stderr)
    run.check(compared >= 3, f"{compared} reference cases compared")


def failures(run):
    base = ["check", "rules/daily_sales.dq", "--partition", "sales_date=2025-03-05", "--format", "json"]
    url = f"s3://{BUCKET}/data/sales_ok/"
    wrong = dict(run.env, AWS_SECRET_ACCESS_KEY="not-the-secret")
    out = run.dqgate(base + ["--staged", url], env=wrong)
    run.check(
        out.returncode == 3
        and f"cannot read `{url}`" in out.stderr
        and "SignatureDoesNotMatch" in out.stderr
        and json.loads(out.stdout)["verdict"] == "error",
        "wrong secret key: exit 3, URL named, error verdict",
        out.stdout + out.stderr,
    )
    unknown = dict(run.env, AWS_ACCESS_KEY_ID="AKIANOTAKEY000000000")
    out = run.dqgate(base + ["--staged", url], env=unknown)
    run.check(
        out.returncode == 3 and f"cannot read `{url}`" in out.stderr and "403" in out.stderr,
        "unknown access key: exit 3",
        out.stdout + out.stderr,
    )
    missing = "s3://no-such-bucket-dqgate/data/sales_ok/"
    out = run.dqgate(base + ["--staged", missing])
    run.check(
        out.returncode == 3 and f"cannot read `{missing}`" in out.stderr and "NoSuchBucket" in out.stderr,
        "missing bucket: exit 3, URL named",
        out.stdout + out.stderr,
    )
    out = run.dqgate(base + ["--staged", f"s3://{BUCKET}/data/no_such_prefix/"])
    run.check(
        out.returncode == 3 and "no Parquet files under" in out.stderr,
        "empty prefix: exit 3",
        out.stdout + out.stderr,
    )
    out = run.dqgate(
        ["publish", "rules/daily_sales.dq", "--partition", "sales_date=2025-03-05",
         "--staged", url, "--table", os.path.join(REPO, "target-never-created")]
    )
    run.check(
        out.returncode == 2
        and "cannot be swapped atomically" in out.stderr
        and not os.path.exists(os.path.join(REPO, "target-never-created")),
        "publish from S3: refused with exit 2",
        out.stderr,
    )


def summary_numbers(stderr):
    m = re.search(r"(\d+) GET/HEAD request\(s\), ([\d.]+) MiB read in ([\d.]+) s", stderr)
    return (int(m.group(1)), float(m.group(2))) if m else (None, None)


def measure(run, s3, moto, partition, reps):
    started = time.time()
    n = upload(s3, partition, "bench")
    print(f"uploaded {n} objects in {time.time() - started:.1f} s")
    rules = os.path.join(REPO, "benches/standard.dq")
    args = ["check", rules, "--partition", "sales_date=2025-03-05", "--format", "json"]
    rows = []
    for where, staged in (("local", partition), ("moto", f"s3://{BUCKET}/bench/")):
        times = []
        for _ in range(reps + 1):  # the first run warms caches and is dropped
            before = len(moto.requests())
            t = time.time()
            out = run.dqgate(args + ["--staged", staged])
            times.append(time.time() - t)
            served = [l for l in moto.requests()[before:] if '"GET ' in l or '"HEAD ' in l]
            if out.returncode not in (0, 1):
                raise SystemExit(out.stderr)
            verdict = out.stdout
        gets, mib = summary_numbers(out.stderr)
        times = sorted(times[1:])
        rows.append((where, times[len(times) // 2], gets, mib, len(served), verdict))
    print("\n| source | median wall s | GET/HEAD requests (dqgate) | MiB read | GET/HEAD moto served |")
    print("|---|---|---|---|---|")
    for where, t, gets, mib, served, _ in rows:
        print(f"| {where} | {t:.2f} | {gets if gets is not None else '-'} | "
              f"{mib if mib is not None else '-'} | {served if where == 'moto' else '-'} |")
    run.check(rows[0][5] == rows[1][5], "measured partition: s3 verdict equals local")


def main():
    argv = sys.argv[1:]
    if len(argv) < 2:
        raise SystemExit(__doc__)
    binary, work = os.path.abspath(argv[0]), argv[1]
    os.makedirs(work, exist_ok=True)
    moto = Moto(work)
    try:
        env, s3 = moto.clients()
        s3.create_bucket(Bucket=BUCKET)
        run = Run(binary, env)
        if "--measure" in argv:
            reps = int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 3
            measure(run, s3, moto, os.path.abspath(argv[argv.index("--measure") + 1]), reps)
        else:
            n = upload(s3, os.path.join(REPO, "testdata/data"), "data")
            print(f"moto at {moto.endpoint}: uploaded {n} fixture objects")
            golden(run)
            footer_fast_path(run, moto, work)
            references(run, work)
            failures(run)
    finally:
        moto.stop()
    print(f"{run.passed} passed, {run.failed} failed")
    sys.exit(1 if run.failed else 0)


if __name__ == "__main__":
    main()
