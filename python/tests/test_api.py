"""The Python API against the bundled binary: verdicts are values, exit
codes are exceptions, and the JSON is the CLI's own."""

from __future__ import annotations

import fcntl
import json
import os
import pickle
import pathlib
import subprocess

import pytest

import dqgate
from conftest import published_files

DAY = "2025-03-05"
KEY = {"sales_date": DAY}


def cli_json(*args: str) -> tuple[int, dict]:
    run = subprocess.run([dqgate.find_dqgate_bin(), *args, "--format", "json"],
                         capture_output=True, text=True)
    return run.returncode, json.loads(run.stdout)


def test_a_good_partition_passes(rules, stage):
    staged = stage(DAY)
    v = dqgate.check(rules, staged, KEY)
    assert isinstance(v, dqgate.Verdict)
    assert v.passed and v.verdict == "pass" and bool(v)
    assert v.failed_checks == []
    assert v.partition == KEY and v.table == "daily_sales" and v.row_count == 2000
    assert v.fingerprint.startswith("sha256:")
    assert v.summary.checks == len(v.checks) == 7
    assert v.summary.passed + v.summary.failed + v.summary.warned + v.summary.skipped == 7
    first = v.checks[0]
    assert isinstance(first, dqgate.Check)
    assert (first.line, first.severity, first.metric, first.status) == (
        6, "check", "row_count", "pass")
    assert first.value == 2000


def test_a_failing_verdict_is_returned_not_raised(rules, stage):
    v = dqgate.check(rules, str(stage(DAY, bad=True)), KEY)
    assert not v.passed and v.verdict == "fail" and not bool(v)
    failed = {c.name: c for c in v.failed_checks}
    assert set(failed) == {"unique(order_id)", "values(currency) in ('EUR', 'USD', 'GBP')"}
    dup = failed["unique(order_id)"]
    assert dup.metric == "duplicate_count(order_id)" and dup.value == 2
    assert dup.expected == "= 0" and dup.status == "fail"
    assert dup.samples == [{"key": {"order_id": 7}, "rows": 3}, {"key": {"order_id": 9}, "rows": 2}]
    assert v.summary.failed == 2


@pytest.mark.parametrize("bad", [False, True])
def test_to_dict_is_the_cli_json(rules, stage, table, bad):
    staged = stage(DAY, bad=bad)
    code, doc = cli_json("check", str(rules), "--staged", str(staged),
                         "--partition", f"sales_date={DAY}", "--table", str(table))
    v = dqgate.check(rules, staged, KEY, table)
    assert code == (1 if bad else 0)
    assert v.to_dict() == doc
    assert json.loads(v.to_json()) == doc
    assert dqgate.Verdict.from_json(v.to_json()).to_dict() == doc
    # to_dict gives a copy: changing it changes nothing.
    v.to_dict()["verdict"] = "pass"
    assert v.to_dict() == doc


def test_paths_may_be_pathlike_and_options_reach_the_binary(rules, stage):
    v = dqgate.check(pathlib.Path(rules), pathlib.Path(stage(DAY)), KEY,
                     memory_limit="256MiB", threads=1)
    assert v.passed
    assert dqgate.check(rules, stage(DAY), KEY, memory_limit=256 << 20).passed


def test_publish_on_pass_then_verify_and_rollback(rules, stage, table):
    v = dqgate.publish(rules, stage(DAY), KEY, table)
    assert v.passed
    assert (table / f"sales_date={DAY}").is_dir()
    ok = dqgate.verify(table, KEY)
    assert isinstance(ok, dqgate.VerifyResult) and ok and ok.verified
    # A second day-version displaces the first; rollback restores it.
    first = published_files(table / f"sales_date={DAY}")
    assert dqgate.publish(rules, stage(DAY, rows=3000), KEY, table, keep=2).passed
    assert published_files(table / f"sales_date={DAY}") != first
    message = dqgate.rollback(table, KEY)
    assert message.startswith(f"rolled back sales_date={DAY}")
    assert dqgate.verify(table, KEY)


def test_publish_on_fail_publishes_nothing(rules, stage, table):
    assert dqgate.publish(rules, stage("2025-03-04"), {"sales_date": "2025-03-04"}, table).passed
    before = published_files(table)
    staged = stage(DAY, bad=True)
    v = dqgate.publish(rules, staged, KEY, table)
    assert not v.passed
    assert published_files(table) == before
    assert sorted(p.name for p in staged.iterdir()) == ["part-00000.parquet", "part-00001.parquet"]


def test_verify_is_falsy_when_the_published_files_changed(rules, stage, table):
    assert dqgate.publish(rules, stage(DAY), KEY, table).passed
    part = next((table / f"sales_date={DAY}").rglob("*.parquet"))
    part.write_bytes(part.read_bytes() + b"x")
    result = dqgate.verify(table, KEY)
    assert not result and not result.verified
    assert "NOT verified" in result.report


def test_lint(rules, stage, tmp_path):
    assert dqgate.lint(rules) == []
    assert dqgate.lint(rules, stage(DAY)) == []
    bad = tmp_path / "bad.dq"
    bad.write_text("table t\ncheck null_rate(custmer_id) < 1%\ncheck min(amout) >= 0\n")
    with pytest.raises(dqgate.RuleError) as e:
        dqgate.lint(bad, stage(DAY))
    assert e.value.exit_code == 2
    d = e.value.diagnostics
    assert [(x.line, x.column, x.code) for x in d] == [(2, 17, "E201"), (3, 11, "E201")]
    assert all(isinstance(x, dqgate.Diagnostic) and x.message for x in d)
    assert d[1].help == "did you mean `amount`?"
    assert "--> " in e.value.rendered and "^^^^^" in e.value.rendered
    assert str(e.value) == e.value.rendered
    copy = pickle.loads(pickle.dumps(e.value))
    assert type(copy) is dqgate.RuleError and copy.diagnostics == d and str(copy) == str(e.value)
    with pytest.raises(dqgate.RuleError) as e:
        dqgate.lint(_write(tmp_path / "syntax.dq", "table t\ncheck nul_rate(a) < 1%\n"))
    assert [(x.line, x.column, x.code) for x in e.value.diagnostics] == [(2, 7, "E110")]
    assert e.value.diagnostics[0].help == "did you mean `null_rate`?"


def _write(path: pathlib.Path, text: str) -> pathlib.Path:
    path.write_text(text)
    return path


def test_an_invalid_rule_file_raises_rule_error_on_check(stage, tmp_path):
    bad = tmp_path / "bad.dq"
    bad.write_text("table t\ncheck min(amout) >= 0\n")
    with pytest.raises(dqgate.RuleError) as e:
        dqgate.check(bad, stage(DAY))
    assert [(x.line, x.column, x.code) for x in e.value.diagnostics] == [(2, 11, "E201")]
    assert isinstance(e.value, dqgate.DqgateError)


def test_usage_errors(rules, stage, table):
    with pytest.raises(dqgate.UsageError) as e:
        dqgate.check(rules, stage(DAY), {"sales_date": "../x"})
    assert e.value.exit_code == 2 and not isinstance(e.value, dqgate.RuleError)
    with pytest.raises(dqgate.UsageError):
        dqgate.publish(rules, stage(DAY), {}, table)


def test_unreadable_data_raises_audit_error(rules, tmp_path):
    with pytest.raises(dqgate.AuditError) as e:
        dqgate.check(rules, tmp_path / "missing", KEY)
    assert e.value.exit_code == 3 and e.value.record["verdict"] == "error"
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "part-0.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(dqgate.AuditError):
        dqgate.check(rules, tmp_path / "corrupt", KEY)


def test_a_held_partition_lock_raises_publish_conflict(rules, stage, table):
    lock = table / "_dqgate" / "locks" / f"sales_date={DAY}.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(dqgate.PublishConflict) as e:
            dqgate.publish(rules, stage(DAY), KEY, table)
    assert e.value.exit_code == 4
    assert not (table / f"sales_date={DAY}").exists()


def test_the_package_is_typed_and_versioned():
    pkg = pathlib.Path(dqgate.__file__).parent
    assert (pkg / "py.typed").is_file()
    out = subprocess.run([dqgate.find_dqgate_bin(), "--version"], capture_output=True, text=True)
    assert out.stdout.split() == ["dqgate", dqgate.__version__]
    for name in ("check", "publish", "verify", "rollback", "lint", "suggest"):
        assert getattr(dqgate, name).__doc__


def test_the_package_is_the_installed_one():
    if os.environ.get("PYTHONPATH"):
        pytest.skip("PYTHONPATH points at a checkout")
    assert "site-packages" in pathlib.Path(dqgate.__file__).parts


def test_the_binary_is_the_wheels():
    # Installed as a script of this environment, not found elsewhere on PATH.
    if os.environ.get("DQGATE_BIN"):
        pytest.skip("DQGATE_BIN overrides the bundled binary")
    import sysconfig
    assert os.path.dirname(dqgate.find_dqgate_bin()) == sysconfig.get_path("scripts")


def test_failed_rows_are_parquet_files_named_in_the_verdict(rules, stage, tmp_path):
    staged = stage(DAY, bad=True)
    out = tmp_path / "failed"
    v = dqgate.check(rules, staged, KEY, failed_rows=out)
    assert not v.passed
    files = {c.name: c.failed_rows for c in v.checks if c.failed_rows is not None}
    assert set(files) == {"unique(order_id)", "values(currency) in ('EUR', 'USD', 'GBP')"}
    assert v.failed_rows == [c.failed_rows for c in v.checks if c.failed_rows is not None]
    dup = files["unique(order_id)"]
    assert isinstance(dup, dqgate.FailedRows)
    assert dup.path == os.path.join(str(out), "line-0008-unique_order_id.parquet")
    assert (dup.rows, dup.cut) == (5, False)
    table = dup.to_arrow()
    # Every row of each duplicated key, whole, in (file, row) order.
    assert table.column_names == ["sales_date", "order_id", "customer_id", "sku", "amount",
                                  "currency", "_dqgate_file", "_dqgate_row"]
    assert table.column("order_id").to_pylist() == [7, 9, 7, 7, 9]
    assert table.column("_dqgate_row").to_pylist() == [6, 8, 10, 11, 20]
    assert set(table.column("_dqgate_file").to_pylist()) == {"part-00000.parquet"}
    cur = files["values(currency) in ('EUR', 'USD', 'GBP')"].to_arrow()
    assert cur.column("currency").to_pylist() == ["JPY"]
    assert cur.column("_dqgate_row").to_pylist() == [5]
    # The JSON is the CLI's, with the file's name relative to the directory.
    doc = v.to_dict()
    entry = next(c for c in doc["checks"] if c["name"] == "unique(order_id)")["failed_rows"]
    assert entry == {"path": "line-0008-unique_order_id.parquet", "rows": 5, "cut": False}
    again = dqgate.Verdict.from_json(v.to_json(), failed_rows_dir=out)
    assert again.failed_rows == v.failed_rows
    # The limit, and the flag that says the file was cut.
    cut = dqgate.check(rules, staged, KEY, failed_rows=tmp_path / "two", failed_rows_limit=2)
    dup = next(c.failed_rows for c in cut.checks if c.name == "unique(order_id)")
    assert (dup.rows, dup.cut) == (2, True)
    assert dup.to_arrow().column("_dqgate_row").to_pylist() == [6, 8]


def test_failed_rows_inside_the_staged_directory_is_a_usage_error(rules, stage):
    staged = stage(DAY, bad=True)
    with pytest.raises(dqgate.UsageError, match="inside the staged directory"):
        dqgate.check(rules, staged, KEY, failed_rows=staged / "failed")
    assert not (staged / "failed").exists()
