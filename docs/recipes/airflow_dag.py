"""Airflow 3: dqgate as the gate between writing a partition and using it.

`write` stages the day's Parquet files; `audit_publish` audits them and
publishes the partition atomically only when the verdict passes. On a
failing verdict the task fails (without retries: the same files would fail
again), nothing is published, `refresh_dashboards` does not run and
`alert_data_team` does. Errors (an invalid rule file, unreadable data, a
publish conflict) fail the task too, with the task's retries. The verdict
JSON is in XCom under the key "verdict".

Needs `pip install dqgate[airflow]`. The paths come from the environment so
that the same file runs in the test of this recipe.
"""

import os
from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

from dqgate.airflow import DqgatePublishOperator

RULES = os.environ.get("DAILY_SALES_RULES", "/opt/rules/daily_sales.dq")
STAGING = os.environ.get("DAILY_SALES_STAGING", "/data/staging/daily_sales")
TABLE = os.environ.get("DAILY_SALES_TABLE", "/data/warehouse/daily_sales")

with DAG(
    dag_id="daily_sales",
    schedule="@daily",
    start_date=datetime(2025, 3, 1),
    catchup=False,
) as dag:
    write = BashOperator(
        task_id="write",
        bash_command=f"spark-submit /opt/jobs/daily_sales.py --date {{{{ ds }}}} --out {STAGING}/{{{{ ds }}}}",
    )

    audit_publish = DqgatePublishOperator(
        task_id="audit_publish",
        rules=RULES,
        staged=f"{STAGING}/{{{{ ds }}}}",
        partition={"sales_date": "{{ ds }}"},
        table=TABLE,
    )

    refresh_dashboards = BashOperator(
        task_id="refresh_dashboards",
        bash_command="echo refreshing dashboards for {{ ds }}",
    )

    alert_data_team = BashOperator(
        task_id="alert_data_team",
        bash_command="echo 'daily_sales {{ ds }} was not published: see the log of audit_publish'",
        trigger_rule="one_failed",
    )

    write >> audit_publish >> [refresh_dashboards, alert_data_team]
