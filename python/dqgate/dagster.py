"""Dagster: dqgate as a blocking asset check, and a publish asset behind it.

``pip install dqgate[dagster]``. A staged asset writes a partition's Parquet
files; `build_dqgate_check` audits them in a *blocking* asset check, so a
failing verdict stops every downstream asset of the run; the asset from
`build_dqgate_publish_asset` is downstream and publishes atomically with
`dqgate.publish` (which audits again: the check is the early, visible
verdict, the publish is the guarantee)::

    from dagster import DailyPartitionsDefinition, Definitions, asset
    from dqgate.dagster import build_dqgate_check, build_dqgate_publish_asset

    days = DailyPartitionsDefinition(start_date="2025-03-01")

    @asset(partitions_def=days)
    def daily_sales_staged(context): ...   # writes /data/staging/<day>/

    gate = build_dqgate_check(daily_sales_staged, rules="daily_sales.dq",
                              staged="/data/staging/{partition_key}",
                              partition="sales_date", table="/data/warehouse/daily_sales")
    daily_sales = build_dqgate_publish_asset("daily_sales", daily_sales_staged,
                                             rules="daily_sales.dq",
                                             staged="/data/staging/{partition_key}",
                                             partition="sales_date",
                                             table="/data/warehouse/daily_sales")
    defs = Definitions(assets=[daily_sales_staged, daily_sales], asset_checks=[gate])

Paths and the run key can depend on the run: ``{partition_key}`` in a string
path is replaced by the run's partition key; a callable receives the Dagster context.
"""


import os
from typing import Any, Callable, Dict, Literal, Mapping, Optional, Union

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetChecksDefinition,
    AssetExecutionContext,
    AssetsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    PartitionsDefinition,
    asset,
    asset_check,
)

from ._api import check as _check
from ._api import publish as _publish
from ._verdict import Verdict

__all__ = ["build_dqgate_check", "build_dqgate_publish_asset", "verdict_metadata"]

Context = Union[AssetCheckExecutionContext, AssetExecutionContext]
#: A path, or a function of the run's context that gives one. In a string,
#: ``{partition_key}`` is replaced by the run's partition key.
PathSpec = Union[str, "os.PathLike[str]", Callable[[Any], Union[str, "os.PathLike[str]"]]]
#: The run key: a ``partitioned by`` column that takes the Dagster partition
#: key, a fixed mapping, or a function of the context giving the mapping.
PartitionSpec = Union[str, Mapping[str, Any], Callable[[Any], Mapping[str, Any]], None]


def build_dqgate_check(
    asset: AssetsDefinition,
    *,
    rules: PathSpec,
    staged: PathSpec,
    partition: PartitionSpec = None,
    table: Optional[PathSpec] = None,
    name: str = "dqgate",
    blocking: bool = True,
    memory_limit: Union[int, str, None] = None,
    threads: Optional[int] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    failed_rows: Optional[PathSpec] = None,
    failed_rows_limit: Union[int, Literal["all"], None] = None,
) -> AssetChecksDefinition:
    """A blocking asset check that audits `asset`'s staged files with `dqgate.check`.

    The check passes when the verdict passes; when it fails (severity
    ERROR) the downstream assets of the run are not materialized. Its
    metadata carries the verdict (`verdict_metadata`): the summary, each
    failed and warned check with its value and expectation, and the
    fingerprint. A dqgate error (bad rule file, unreadable data) raises, so
    the check step fails: an error is never a pass.

    With `failed_rows` (a directory, or a path with ``{partition_key}``, or
    a function of the context), each failing or warning check writes its
    offending rows there as Parquet (`dqgate.check`'s ``failed_rows``), and
    the metadata names each file (``failed_rows`` of each check row).
    """

    @asset_check(
        asset=asset,
        name=name,
        blocking=blocking,
        description="dqgate: audits the staged files against the rule file; blocks downstream on fail",
    )
    def _dqgate_check(context: AssetCheckExecutionContext) -> AssetCheckResult:
        verdict = _check(
            _path(rules, context),
            _path(staged, context),
            _partition(partition, context),
            _path(table, context) if table is not None else None,
            memory_limit=memory_limit,
            threads=threads,
            storage_options=storage_options,
            failed_rows=_path(failed_rows, context) if failed_rows is not None else None,
            failed_rows_limit=failed_rows_limit,
        )
        return AssetCheckResult(
            passed=verdict.passed,
            severity=AssetCheckSeverity.ERROR,
            metadata=verdict_metadata(verdict),
        )

    return _dqgate_check


def build_dqgate_publish_asset(
    name: str,
    staged_asset: AssetsDefinition,
    *,
    rules: PathSpec,
    staged: PathSpec,
    table: PathSpec,
    partition: PartitionSpec = None,
    partitions_def: Optional[PartitionsDefinition] = None,
    keep: Optional[int] = None,
    target: Optional[Literal["hive", "delta"]] = None,
    memory_limit: Union[int, str, None] = None,
    threads: Optional[int] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    group_name: Optional[str] = None,
    failed_rows: Optional[PathSpec] = None,
    failed_rows_limit: Union[int, Literal["all"], None] = None,
) -> AssetsDefinition:
    """An asset downstream of `staged_asset` that publishes with `dqgate.publish`.

    Put `build_dqgate_check` on `staged_asset` so that a failing verdict
    stops the run before this asset. If the verdict fails here anyway (the
    staged files changed since the check), nothing is published and the
    asset fails with the verdict as metadata. `failed_rows` and
    `failed_rows_limit` are as for `build_dqgate_check`.
    """

    @asset(
        name=name,
        deps=[staged_asset],
        partitions_def=partitions_def or staged_asset.partitions_def,
        group_name=group_name,
        description=f"{name}: the partition dqgate published after the audit passed",
    )
    def _dqgate_publish(context: AssetExecutionContext) -> MaterializeResult:  # type: ignore[type-arg]
        verdict = _publish(
            _path(rules, context),
            _path(staged, context),
            _partition(partition, context) or {},
            _path(table, context),
            keep=keep,
            target=target,
            memory_limit=memory_limit,
            threads=threads,
            storage_options=storage_options,
            failed_rows=_path(failed_rows, context) if failed_rows is not None else None,
            failed_rows_limit=failed_rows_limit,
        )
        metadata = verdict_metadata(verdict)
        if not verdict.passed:
            raise Failure(
                description=f"dqgate verdict failed; nothing was published: "
                f"{', '.join(c.name for c in verdict.failed_checks)}",
                metadata=metadata,
            )
        return MaterializeResult(metadata=metadata)

    return _dqgate_publish


def verdict_metadata(verdict: Verdict) -> Dict[str, Any]:
    """Dagster metadata for a verdict: the outcome, the summary, the failed
    and warned checks (name, metric, measured value, expectation, samples,
    and the file of their failed rows when one was written), the row count
    and the fingerprint."""

    def row(c: Any) -> Dict[str, Any]:
        d = {"line": c.line, "name": c.name, "metric": c.metric, "value": c.value,
             "expected": c.expected}
        if c.samples:
            d["samples"] = c.samples
        if c.failed_rows is not None:
            d["failed_rows"] = {"path": c.failed_rows.path, "rows": c.failed_rows.rows,
                                "cut": c.failed_rows.cut}
        return d

    s = verdict.summary
    return {
        "verdict": MetadataValue.text(verdict.verdict),
        "summary": MetadataValue.json({"checks": s.checks, "passed": s.passed,
                                       "failed": s.failed, "warned": s.warned,
                                       "skipped": s.skipped}),
        "failed_checks": MetadataValue.json([row(c) for c in verdict.failed_checks]),
        "warned_checks": MetadataValue.json([row(c) for c in verdict.warned_checks]),
        "row_count": MetadataValue.int(verdict.row_count),
        "fingerprint": MetadataValue.text(verdict.fingerprint),
    }


def _path(spec: PathSpec, context: Context) -> Union[str, "os.PathLike[str]"]:
    if callable(spec):
        return spec(context)
    if isinstance(spec, str) and "{partition_key}" in spec:
        return spec.replace("{partition_key}", context.partition_key)
    return spec


def _partition(spec: PartitionSpec, context: Context) -> Optional[Mapping[str, Any]]:
    if spec is None:
        return None
    if isinstance(spec, str):
        return {spec: context.partition_key}
    if callable(spec):
        return spec(context)
    return spec
