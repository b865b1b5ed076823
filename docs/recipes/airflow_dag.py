"""Airflow: dqgate as the gate between writing a partition and using it.

The write task stages the day's Parquet files; `audit_publish` runs
`dqgate publish`, which publishes only when the verdict passes. Exit codes
branch the DAG: 0 publishes and downstream tasks run; 1 (the gate failed,
nothing published) is mapped to Airflow's "skipped" so downstream tasks skip
and the alert task runs; 2, 3, 4 (usage, unreadable data, publish conflict)
fail the task like any error. The JUnit file is for CI-style test reporting,
the JSON verdict for `dqgate report`.
"""

from datetime import datetime

from airflow import DAG
from airflow.operators.bash import BashOperator
from airflow.utils.trigger_rule import TriggerRule

RULES = "/opt/rules/daily_sales.dq"
STAGING = "/data/staging/daily_sales/{{ ds }}"
TABLE = "/data/warehouse/daily_sales"
REPORTS = "/data/reports/daily_sales"
GATE_FAILED = 99  # what exit code 1 becomes, so that Airflow skips

with DAG(
    dag_id="daily_sales",
    schedule="@daily",
    start_date=datetime(2025, 3, 1),
    catchup=False,
) as dag:
    write = BashOperator(
        task_id="write",
        bash_command=f"spark-submit /opt/jobs/daily_sales.py --date {{{{ ds }}}} --out {STAGING}",
    )

    audit_publish = BashOperator(
        task_id="audit_publish",
        bash_command=(
            f"mkdir -p {REPORTS} && "
            f"dqgate publish {RULES} --staged {STAGING} --partition sales_date={{{{ ds }}}} "
            f"--table {TABLE} --format json > {REPORTS}/{{{{ ds }}}}.json; rc=$?; "
            f"dqgate report {REPORTS}/{{{{ ds }}}}.json --table {TABLE} -o {REPORTS}/{{{{ ds }}}}.html; "
            f"if [ $rc -eq 1 ]; then exit {GATE_FAILED}; fi; exit $rc"
        ),
        skip_on_exit_code=GATE_FAILED,
    )

    refresh_dashboards = BashOperator(
        task_id="refresh_dashboards",
        bash_command="echo refreshing dashboards for {{ ds }}",
    )

    alert = BashOperator(
        task_id="alert_data_team",
        bash_command=f"echo 'daily_sales {{{{ ds }}}} failed the gate: {REPORTS}/{{{{ ds }}}}.html'",
        trigger_rule=TriggerRule.ALL_SKIPPED,
    )

    write >> audit_publish >> [refresh_dashboards, alert]
