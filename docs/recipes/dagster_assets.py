"""Dagster: a blocking asset check that runs `dqgate check` on the staged
partition, and a publish step that runs only when the check passed.

`daily_sales_staged` writes the day's Parquet files to a staging directory.
The asset check audits them with `dqgate check --format json` and reports
each failing check as metadata; being blocking, a failure stops the
downstream `daily_sales` asset, which publishes with `dqgate publish`
(the publish audits again and publishes atomically only on pass).
"""

import json
import os
import subprocess

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    DailyPartitionsDefinition,
    Definitions,
    asset,
    asset_check,
)

DQGATE = os.environ.get("DQGATE", "dqgate")
RULES = "/opt/rules/daily_sales.dq"
STAGING = "/data/staging/daily_sales"
TABLE = "/data/warehouse/daily_sales"
days = DailyPartitionsDefinition(start_date="2025-03-01")


def staged_dir(day: str) -> str:
    return os.path.join(STAGING, day)


@asset(partitions_def=days)
def daily_sales_staged(context: AssetExecutionContext) -> None:
    day = context.partition_key
    os.makedirs(staged_dir(day), exist_ok=True)
    # ... write the day's Parquet files into staged_dir(day) ...


@asset_check(asset=daily_sales_staged, blocking=True)
def dqgate_gate(context) -> AssetCheckResult:
    day = context.partition_key
    run = subprocess.run(
        [DQGATE, "check", RULES, "--staged", staged_dir(day),
         "--partition", f"sales_date={day}", "--table", TABLE, "--format", "json"],
        capture_output=True, text=True,
    )
    if run.returncode not in (0, 1):
        # 2: bad rules or run key, 3: unreadable data. Not a verdict: an error.
        raise RuntimeError(f"dqgate exit {run.returncode}: {run.stderr.strip()}")
    verdict = json.loads(run.stdout)
    failed = [c for c in verdict["checks"] if c["status"] == "fail" and c["severity"] == "check"]
    warned = [c for c in verdict["checks"] if c["status"] == "fail" and c["severity"] == "warn"]
    return AssetCheckResult(
        passed=run.returncode == 0,
        severity=AssetCheckSeverity.ERROR,
        metadata={
            "summary": verdict["summary"],
            "failed": [f"{c['name']}: {c['metric']} = {c['value']} (expected {c['expected']})" for c in failed],
            "warned": [c["name"] for c in warned],
            "fingerprint": verdict["input"]["fingerprint"],
        },
    )


@asset(partitions_def=days, deps=[daily_sales_staged])
def daily_sales(context: AssetExecutionContext) -> None:
    day = context.partition_key
    run = subprocess.run(
        [DQGATE, "publish", RULES, "--staged", staged_dir(day),
         "--partition", f"sales_date={day}", "--table", TABLE],
        capture_output=True, text=True,
    )
    context.log.info(run.stdout + run.stderr)
    if run.returncode != 0:
        raise RuntimeError(f"dqgate publish exit {run.returncode}: nothing was published")


defs = Definitions(
    assets=[daily_sales_staged, daily_sales],
    asset_checks=[dqgate_gate],
)
