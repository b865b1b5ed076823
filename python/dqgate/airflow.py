"""Airflow: operators that gate a partition with dqgate.

``pip install dqgate[airflow]`` (Airflow 3). `DqgateCheckOperator` audits
the staged files (`dqgate.check`); `DqgatePublishOperator` audits them and
publishes atomically only on pass (`dqgate.publish`). Both push the verdict
JSON to XCom under the key ``verdict`` (on pass it is also the task's return
value) and fail the task when the verdict fails, without retries: the same
files would fail again. A dqgate error (bad rule file, unreadable data,
publish conflict) fails the task as an ordinary error, with the task's
retries. ``rules``, ``staged``, ``partition`` and ``table`` are templated::

    from dqgate.airflow import DqgatePublishOperator

    DqgatePublishOperator(
        task_id="audit_publish",
        rules="/opt/rules/daily_sales.dq",
        staged="/data/staging/daily_sales/{{ ds }}",
        partition={"sales_date": "{{ ds }}"},
        table="/data/warehouse/daily_sales",
    )
"""

from __future__ import annotations

import os
from typing import Any, Dict, Literal, Mapping, Optional, Sequence, Union

from airflow.sdk import BaseOperator

try:
    from airflow.sdk.exceptions import AirflowFailException
except ImportError:  # Airflow 3.0
    from airflow.exceptions import AirflowFailException  # type: ignore[no-redef]

from ._api import check as _check
from ._api import publish as _publish
from ._verdict import Verdict

__all__ = ["DqgateCheckOperator", "DqgatePublishOperator", "XCOM_KEY"]

#: The XCom key under which both operators push the verdict JSON.
XCOM_KEY = "verdict"

PathArg = Union[str, "os.PathLike[str]"]


class _DqgateOperator(BaseOperator):
    template_fields: Sequence[str] = ("rules", "staged", "partition", "table", "failed_rows")

    def __init__(
        self,
        *,
        rules: PathArg,
        staged: PathArg,
        partition: Optional[Mapping[str, Any]] = None,
        table: Optional[PathArg] = None,
        memory_limit: Union[int, str, None] = None,
        threads: Optional[int] = None,
        storage_options: Optional[Mapping[str, str]] = None,
        failed_rows: Optional[PathArg] = None,
        failed_rows_limit: Union[int, Literal["all"], None] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.rules = os.fspath(rules)
        self.staged = os.fspath(staged)
        self.partition = dict(partition) if partition is not None else None
        self.table = os.fspath(table) if table is not None else None
        self.memory_limit = memory_limit
        self.threads = threads
        self.storage_options = storage_options
        self.failed_rows = os.fspath(failed_rows) if failed_rows is not None else None
        self.failed_rows_limit = failed_rows_limit

    def _audit(self) -> Verdict:
        raise NotImplementedError

    def execute(self, context: Any) -> Dict[str, Any]:
        verdict = self._audit()
        doc = verdict.to_dict()
        context["ti"].xcom_push(key=XCOM_KEY, value=doc)
        s = verdict.summary
        self.log.info(
            "dqgate %s: %s %s, %d check(s): %d passed, %d failed, %d warned, %d skipped",
            verdict.verdict, verdict.table, verdict.partition,
            s.checks, s.passed, s.failed, s.warned, s.skipped,
        )
        for c in verdict.failed_checks + verdict.warned_checks:
            self.log.warning("%s %s: %s = %r (expected %s)", c.severity, c.name, c.metric,
                             c.value, c.expected)
            if c.failed_rows is not None:
                self.log.warning("  failed rows: %s (%d rows%s)", c.failed_rows.path,
                                 c.failed_rows.rows, ", cut at the limit" if c.failed_rows.cut else "")
        if not verdict.passed:
            raise AirflowFailException(self._failure(verdict))
        return doc

    def _failure(self, verdict: Verdict) -> str:
        names = ", ".join(c.name for c in verdict.failed_checks)
        return f"dqgate verdict failed for {verdict.table} {verdict.partition}: {names}"


class DqgateCheckOperator(_DqgateOperator):
    """Audit the staged files (`dqgate.check`); fail the task when the verdict fails.

    Args:
        rules: the rule file.
        staged: the staged partition (directory or object-store URL).
        partition: the run key, e.g. ``{"sales_date": "{{ ds }}"}``.
        table: the published table root, for ``published.*`` references.
        memory_limit, threads, storage_options: as for `dqgate.check`.
        failed_rows: a directory (templated) where each failing or warning
            check writes its offending rows as Parquet; the verdict in XCom
            names each file (``failed_rows`` of its check).
        failed_rows_limit: rows per file at most, or ``"all"``.
    """

    def _audit(self) -> Verdict:
        return _check(self.rules, self.staged, self.partition, self.table,
                      memory_limit=self.memory_limit, threads=self.threads,
                      storage_options=self.storage_options,
                      failed_rows=self.failed_rows, failed_rows_limit=self.failed_rows_limit)


class DqgatePublishOperator(_DqgateOperator):
    """Audit the staged files and publish them only on pass (`dqgate.publish`).

    When the task fails on a failing verdict, nothing was published.

    Args:
        rules, staged, partition, memory_limit, threads, storage_options,
        failed_rows, failed_rows_limit:
            as for `DqgateCheckOperator`; `partition` is required.
        table: the published table root.
        keep: displaced versions kept for rollback.
        target: ``"hive"`` or ``"delta"`` (default: what the root holds).
    """

    def __init__(
        self,
        *,
        rules: PathArg,
        staged: PathArg,
        partition: Mapping[str, Any],
        table: PathArg,
        keep: Optional[int] = None,
        target: Optional[Literal["hive", "delta"]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(rules=rules, staged=staged, partition=partition, table=table, **kwargs)
        self.keep = keep
        self.target = target

    def _audit(self) -> Verdict:
        assert self.table is not None and self.partition is not None
        return _publish(self.rules, self.staged, self.partition, self.table,
                        keep=self.keep, target=self.target,
                        memory_limit=self.memory_limit, threads=self.threads,
                        storage_options=self.storage_options,
                        failed_rows=self.failed_rows, failed_rows_limit=self.failed_rows_limit)

    def _failure(self, verdict: Verdict) -> str:
        return super()._failure(verdict) + "; nothing was published"
