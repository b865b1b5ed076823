"""dqgate: a columnar data-quality gate for staged Parquet partitions.

Audit a partition against a rule file, and publish it atomically only when
the verdict passes (write-audit-publish)::

    import dqgate

    verdict = dqgate.publish(
        "rules/daily_sales.dq",
        staged="/data/staging/daily_sales/2025-03-05",
        partition={"sales_date": "2025-03-05"},
        table="/data/warehouse/daily_sales",
    )
    if not verdict.passed:
        for c in verdict.failed_checks:
            print(c.name, c.value, c.expected)

The package carries the `dqgate` binary; each call runs it once and reads
its JSON output. A failing verdict is returned; errors raise a subclass of
`DqgateError` (`RuleError`, `UsageError`, `AuditError`, `PublishConflict`),
so an error is never a pass. Orchestrator helpers: `dqgate.dagster`
(``pip install dqgate[dagster]``) and `dqgate.airflow`
(``pip install dqgate[airflow]``).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from ._api import VerifyResult, check, lint, publish, rollback, suggest, verify
from ._binary import find_dqgate_bin
from ._errors import (
    AuditError,
    Diagnostic,
    DqgateError,
    PublishConflict,
    RuleError,
    UsageError,
)
from ._verdict import Check, FailedRows, Summary, Value, Verdict

try:
    __version__ = _version("dqgate")
except PackageNotFoundError:  # imported from a checkout without installing
    __version__ = "0+unknown"

# Shown as dqgate.RuleError (not dqgate._errors.RuleError) in tracebacks.
for _cls in (AuditError, Check, Diagnostic, DqgateError, FailedRows, PublishConflict, RuleError,
             Summary, UsageError, Verdict, VerifyResult):
    _cls.__module__ = "dqgate"
del _cls

__all__ = [
    "AuditError",
    "Check",
    "Diagnostic",
    "DqgateError",
    "FailedRows",
    "PublishConflict",
    "RuleError",
    "Summary",
    "UsageError",
    "Value",
    "Verdict",
    "VerifyResult",
    "check",
    "find_dqgate_bin",
    "lint",
    "publish",
    "rollback",
    "suggest",
    "verify",
]
