"""dqgate.airflow with the real Airflow 3: the recipe DAG run by `dag.test()`
on a SQLite metadata database.

Airflow reads its configuration when first imported, so this module sets
AIRFLOW_HOME (a fresh directory with the DAG file in its dags folder) and
the SQLite URL before importing it, and migrates the database once."""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

if importlib.util.find_spec("airflow") is None and not os.environ.get("DQGATE_TESTS_REQUIRE_ALL"):
    pytest.skip("apache-airflow is not installed", allow_module_level=True)

from conftest import RECIPES, RULES, published_files, write_sales  # noqa: E402

HOME = pathlib.Path(tempfile.mkdtemp(prefix="dqgate-airflow-"))
DATA = HOME / "data"
os.environ.update({
    "AIRFLOW_HOME": str(HOME),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
    "AIRFLOW__CORE__DAGS_FOLDER": str(HOME / "dags"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "DAILY_SALES_RULES": str(RULES),
    "DAILY_SALES_STAGING": str(DATA / "staging"),
    "DAILY_SALES_TABLE": str(DATA / "warehouse" / "daily_sales"),
})
TABLE = DATA / "warehouse" / "daily_sales"


@pytest.fixture(scope="module")
def dag():
    (HOME / "dags").mkdir(parents=True)
    shutil.copy(RECIPES / "airflow_dag.py", HOME / "dags" / "daily_sales.py")
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True,
                   capture_output=True)
    spec = importlib.util.spec_from_file_location("daily_sales_dag", HOME / "dags" / "daily_sales.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module.dag
    shutil.rmtree(HOME, ignore_errors=True)


def run_day(dag, day: str, *, bad: bool):
    """Stage the day (the recipe's `write` task stands for the real job and
    is marked successful), then run the DAG for it."""
    write_sales(DATA / "staging" / day, day, bad=bad)
    run = dag.test(logical_date=dt.datetime.fromisoformat(f"{day}T00:00:00+00:00"),
                   mark_success_pattern="^write$")
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    return run, states


def verdict_xcom(run) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (session.query(XComModel)
               .filter(XComModel.run_id == run.run_id, XComModel.dag_id == run.dag_id,
                       XComModel.task_id == "audit_publish", XComModel.key == "verdict")
               .one())
        return XComModel.deserialize_value(row)


def test_a_pass_publishes_and_a_fail_fails_the_task_and_publishes_nothing(dag):
    good, bad = "2025-03-05", "2025-03-06"

    run, states = run_day(dag, good, bad=False)
    assert states["audit_publish"] == "success"
    assert states["refresh_dashboards"] == "success"
    assert states["alert_data_team"] == "skipped"
    assert (TABLE / f"sales_date={good}").is_dir()
    doc = verdict_xcom(run)
    assert doc["format"] == "dqgate.verdict/v1" and doc["verdict"] == "pass"
    assert doc["partition"] == {"sales_date": good}

    before = published_files(TABLE)
    run, states = run_day(dag, bad, bad=True)
    assert states["audit_publish"] == "failed"
    assert states["refresh_dashboards"] == "upstream_failed"
    assert states["alert_data_team"] == "success"
    assert str(run.state) in ("failed", "DagRunState.FAILED")
    assert published_files(TABLE) == before
    assert not (TABLE / f"sales_date={bad}").exists()
    doc = verdict_xcom(run)
    assert doc["verdict"] == "fail"
    failed = {c["name"]: c["value"] for c in doc["checks"] if c["status"] == "fail"}
    assert failed == {"unique(order_id)": 2, "values(currency) in ('EUR', 'USD', 'GBP')": 1}


def test_the_check_operator_writes_failed_rows_and_logs_them(tmp_path):
    from dqgate.airflow import XCOM_KEY, DqgateCheckOperator

    try:
        from airflow.sdk.exceptions import AirflowFailException
    except ImportError:  # Airflow 3.0
        from airflow.exceptions import AirflowFailException

    day = "2025-03-07"
    staged = write_sales(tmp_path / "staging" / day, day, bad=True)
    op = DqgateCheckOperator(task_id="audit", rules=RULES, staged=staged,
                             partition={"sales_date": day}, failed_rows=tmp_path / "failed",
                             failed_rows_limit=3)
    assert "failed_rows" in op.template_fields
    pushed = {}

    class TaskInstance:
        def xcom_push(self, key, value):
            pushed[key] = value

    with pytest.raises(AirflowFailException):
        op.execute({"ti": TaskInstance()})
    checks = {c["name"]: c for c in pushed[XCOM_KEY]["checks"]}
    assert checks["unique(order_id)"]["failed_rows"] == {
        "path": "line-0008-unique_order_id.parquet", "rows": 3, "cut": True}
    assert (tmp_path / "failed" / "line-0008-unique_order_id.parquet").is_file()
