"""Dagster: a blocking asset check audits the staged partition; the
published asset is downstream of it and runs only when the check passed.

`daily_sales_staged` stages the day's Parquet files (here: copies the files
an upstream export landed; in your code, the job that writes them).
`dqgate_gate` is a blocking asset check (`dqgate.check`): on a failing
verdict it fails with the failed checks, their values and expectations as
metadata, and the downstream `daily_sales` and `sales_dashboard` are not
materialized. `daily_sales` publishes with `dqgate.publish`, atomically and
only on pass. Needs `pip install dqgate[dagster]`; the paths come from the
environment so that the same file runs in the test of this recipe.
"""

import os
import shutil

from dagster import DailyPartitionsDefinition, Definitions, asset

from dqgate.dagster import build_dqgate_check, build_dqgate_publish_asset

RULES = os.environ.get("DAILY_SALES_RULES", "/opt/rules/daily_sales.dq")
LANDING = os.environ.get("DAILY_SALES_LANDING", "/data/landing/daily_sales")
STAGING = os.environ.get("DAILY_SALES_STAGING", "/data/staging/daily_sales")
TABLE = os.environ.get("DAILY_SALES_TABLE", "/data/warehouse/daily_sales")
days = DailyPartitionsDefinition(start_date="2025-03-01")


@asset(partitions_def=days)
def daily_sales_staged(context) -> None:
    day = context.partition_key
    shutil.copytree(os.path.join(LANDING, day), os.path.join(STAGING, day), dirs_exist_ok=True)


dqgate_gate = build_dqgate_check(
    daily_sales_staged,
    rules=RULES,
    staged=STAGING + "/{partition_key}",
    partition="sales_date",
    table=TABLE,
)

daily_sales = build_dqgate_publish_asset(
    "daily_sales",
    daily_sales_staged,
    rules=RULES,
    staged=STAGING + "/{partition_key}",
    partition="sales_date",
    table=TABLE,
)


@asset(partitions_def=days, deps=[daily_sales])
def sales_dashboard(context) -> None:
    context.log.info(f"refreshing the dashboard from {TABLE}/sales_date={context.partition_key}")


defs = Definitions(
    assets=[daily_sales_staged, daily_sales, sales_dashboard],
    asset_checks=[dqgate_gate],
)
