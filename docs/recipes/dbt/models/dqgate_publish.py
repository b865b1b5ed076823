"""dbt Python model (dbt-duckdb runs it in-process): the gate step.

Depends on `daily_sales_staged`, whose post-hook staged the partition as
Parquet. Runs `dqgate publish`; a failing verdict raises, so `dbt run` fails
and nothing is published. The model's table records the verdict summary.

    dbt run --select daily_sales_staged+ \
      --vars '{sales_date: 2025-03-05, staging: /data/staging/daily_sales/2025-03-05}'
"""

import json
import os
import subprocess

import pandas as pd


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("daily_sales_staged")  # runs after the staging model and its post-hook
    day = dbt.config.get("sales_date")  # set from vars in schema.yml
    staging = dbt.config.get("staging")
    run = subprocess.run(
        [os.environ.get("DQGATE", "dqgate"), "publish", "rules/daily_sales.dq",
         "--staged", staging, "--partition", f"sales_date={day}",
         "--table", "/data/warehouse/daily_sales", "--format", "json"],
        capture_output=True, text=True,
    )
    if run.returncode != 0:
        raise RuntimeError(f"dqgate publish exit {run.returncode}; nothing was published\n{run.stdout}{run.stderr}")
    verdict = json.loads(run.stdout)
    return pd.DataFrame([{"sales_date": day, **verdict["summary"], "fingerprint": verdict["input"]["fingerprint"]}])
