"""dqgate.dagster with the real dagster package: assets materialized in-process."""

from __future__ import annotations

import pathlib

import pytest

from conftest import require

dagster = require("dagster")

from dagster import DagsterInstance, DailyPartitionsDefinition, asset, materialize  # noqa: E402

from conftest import RULES, published_files, write_sales  # noqa: E402
from dqgate.dagster import build_dqgate_check, build_dqgate_publish_asset  # noqa: E402

GOOD, BAD = "2025-03-05", "2025-03-06"


def definitions(tmp: pathlib.Path, rules: pathlib.Path = RULES):
    days = DailyPartitionsDefinition(start_date="2025-03-01")
    staging = tmp / "staging"
    table = tmp / "warehouse" / "daily_sales"
    used = tmp / "dashboard"

    @asset(partitions_def=days)
    def daily_sales_staged(context) -> None:
        day = context.partition_key
        write_sales(staging / day, day, bad=day == BAD)

    gate = build_dqgate_check(daily_sales_staged, rules=rules,
                              staged=str(staging / "{partition_key}"),
                              partition="sales_date", table=table,
                              failed_rows=str(tmp / "failed" / "{partition_key}"))
    daily_sales = build_dqgate_publish_asset("daily_sales", daily_sales_staged, rules=rules,
                                             staged=lambda c: staging / c.partition_key,
                                             partition="sales_date", table=table)

    @asset(partitions_def=days, deps=[daily_sales])
    def dashboard(context) -> None:
        used.mkdir(exist_ok=True)
        (used / context.partition_key).touch()

    return [daily_sales_staged, daily_sales, dashboard, gate], table, used


def run(defs, day: str):
    return materialize(defs, partition_key=day, instance=DagsterInstance.ephemeral(),
                       raise_on_error=False)


def test_a_good_partition_passes_and_is_published(tmp_path):
    defs, table, used = definitions(tmp_path)
    result = run(defs, GOOD)
    assert result.success
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.check_name == "dqgate"
    assert evaluation.metadata["verdict"].value == "pass"
    assert evaluation.metadata["failed_checks"].value == []
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"daily_sales_staged", "daily_sales", "dashboard"}
    assert (table / f"sales_date={GOOD}").is_dir()
    assert (used / GOOD).exists()


def test_a_bad_partition_fails_the_check_blocks_downstream_and_publishes_nothing(tmp_path):
    defs, table, used = definitions(tmp_path)
    assert run(defs, GOOD).success
    before = published_files(table)
    result = run(defs, BAD)
    assert not result.success
    [evaluation] = result.get_asset_check_evaluations()
    assert not evaluation.passed
    assert evaluation.severity == dagster.AssetCheckSeverity.ERROR
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"daily_sales_staged"}
    assert published_files(table) == before
    assert not (table / f"sales_date={BAD}").exists()
    assert not (used / BAD).exists()
    # The metadata names each failing check with its value and expectation.
    meta = evaluation.metadata
    assert meta["verdict"].value == "fail"
    failed = {c["name"]: c for c in meta["failed_checks"].value}
    assert set(failed) == {"unique(order_id)", "values(currency) in ('EUR', 'USD', 'GBP')"}
    assert failed["unique(order_id)"]["value"] == 2
    assert failed["unique(order_id)"]["expected"] == "= 0"
    assert failed["unique(order_id)"]["samples"] == [
        {"key": {"order_id": 7}, "rows": 3}, {"key": {"order_id": 9}, "rows": 2}]
    assert failed["values(currency) in ('EUR', 'USD', 'GBP')"]["value"] == 1
    assert meta["summary"].value["failed"] == 2
    assert meta["fingerprint"].value.startswith("sha256:")
    # Each failing check's rows, as a Parquet file the metadata names.
    rows = failed["unique(order_id)"]["failed_rows"]
    assert rows == {"path": str(tmp_path / "failed" / BAD / "line-0008-unique_order_id.parquet"),
                    "rows": 5, "cut": False}
    import pyarrow.parquet as pq
    assert pq.read_table(rows["path"]).column("order_id").to_pylist() == [7, 9, 7, 7, 9]
    assert not (tmp_path / "failed" / GOOD).exists()


def test_an_invalid_rule_file_is_an_error_not_a_pass(tmp_path):
    bad = tmp_path / "bad.dq"
    bad.write_text("table daily_sales\npartitioned by sales_date\ncheck min(amout) >= 0\n")
    defs, table, used = definitions(tmp_path, rules=bad)
    result = run(defs, GOOD)
    assert not result.success
    assert [e for e in result.get_asset_check_evaluations() if e.passed] == []
    assert not table.exists() and not used.exists()
