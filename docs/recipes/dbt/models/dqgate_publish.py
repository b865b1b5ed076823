"""dbt Python model (dbt-duckdb runs it in-process): the gate step.

Depends on `daily_sales_staged`, whose post-hook staged the partition as
Parquet. Publishes it with `dqgate.publish`; a failing verdict raises, so
`dbt run` fails and nothing is published. The model's table records the
verdict summary. Needs `pip install dqgate` beside dbt-duckdb.

    dbt run --select daily_sales_staged+ \
      --vars '{sales_date: 2025-03-05, staging: /data/staging/daily_sales/2025-03-05, table: /data/warehouse/daily_sales}'
"""

import dqgate


def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("daily_sales_staged")  # runs after the staging model and its post-hook
    day = dbt.config.get("sales_date")  # set from vars in schema.yml
    verdict = dqgate.publish(
        dbt.config.get("rules"),
        dbt.config.get("staging"),
        {"sales_date": day},
        dbt.config.get("table"),
    )
    if not verdict.passed:
        failed = "; ".join(f"{c.name}: {c.value} (expected {c.expected})" for c in verdict.failed_checks)
        raise RuntimeError(f"dqgate: sales_date={day} failed the gate, nothing was published: {failed}")
    s = verdict.summary
    return session.sql(
        "select ?::date as sales_date, ? as checks, ? as passed, ? as warned, ? as fingerprint",
        params=[day, s.checks, s.passed, s.warned, verdict.fingerprint],
    )
