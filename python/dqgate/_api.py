"""The commands as functions: each runs the bundled `dqgate` binary once.

Arguments become command-line flags, the JSON it prints becomes a `Verdict`
(or a list of diagnostics), and its exit code becomes either a return value
(0 and 1) or an exception (2, 3, 4, or anything unexpected). dqgate's own
stderr (timings, what was published) goes to the ``dqgate`` logger at INFO,
so nothing is printed unless logging is configured to show it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Mapping, NoReturn, Optional, Sequence, Tuple, Union

from ._binary import find_dqgate_bin
from ._errors import (
    AuditError,
    Diagnostic,
    DqgateError,
    PublishConflict,
    RuleError,
    UsageError,
)
from ._verdict import Verdict

__all__ = ["VerifyResult", "check", "lint", "publish", "rollback", "suggest", "verify"]

#: A path as the functions accept it.
PathLike = Union[str, "os.PathLike[str]"]
#: A run key: each ``partitioned by`` column and its value, e.g.
#: ``{"sales_date": "2025-03-05"}``. Values are passed through `str()`, so a
#: `datetime.date` gives its ISO form.
Partition = Mapping[str, Any]

log = logging.getLogger("dqgate")


@dataclass(frozen=True)
class VerifyResult:
    """What `verify` found; truthy when the partition matches its audit record.

    Attributes:
        verified: the published files are the audited ones.
        report: dqgate's report: the version and fingerprint, or each
            difference from the audit record.
    """

    verified: bool
    report: str

    def __bool__(self) -> bool:
        return self.verified


def check(
    rules: PathLike,
    staged: PathLike,
    partition: Optional[Partition] = None,
    table: Optional[PathLike] = None,
    *,
    memory_limit: Union[int, str, None] = None,
    threads: Optional[int] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    failed_rows: Optional[PathLike] = None,
    failed_rows_limit: Union[int, Literal["all"], None] = None,
) -> Verdict:
    """Audit the staged Parquet files against a rule file. Writes nothing
    (but the files of `failed_rows`).

    Args:
        rules: the rule file (``.dq``).
        staged: the staged partition: a directory, or an object-store URL
            (``s3://``, ``gs://``, ``az://``) of a prefix.
        partition: the run key; may be left out when the rule file has no
            ``partitioned by``.
        table: the published table root, to resolve ``published.*``.
        memory_limit: bytes, or a size such as ``"2GiB"``; larger work
            spills to disk.
        threads: scan threads (default: all cores).
        storage_options: object-store settings, e.g.
            ``{"aws_region": "eu-west-1"}``.
        failed_rows: a local directory (never inside `table` or `staged`):
            each check that fails or warns writes its offending rows there,
            one Parquet file per check; ``check.failed_rows.path`` names it
            and ``check.failed_rows.to_arrow()`` reads it. A directory that
            cannot be written changes nothing but the missing files (the
            reason goes to the ``dqgate`` logger).
        failed_rows_limit: at most this many rows per file (dqgate's
            default: 10000), or ``"all"``.

    Returns:
        The verdict; ``passed`` is False when a ``check`` did not hold.

    Raises:
        RuleError: the rule file does not parse or type-check (exit 2).
        UsageError: bad arguments or run key (exit 2).
        AuditError: the data could not be audited (exit 3).
        DqgateError: anything else that is not a verdict.

    >>> v = dqgate.check("rules/daily_sales.dq", "staging/2025-03-05",
    ...                  {"sales_date": "2025-03-05"})       # doctest: +SKIP
    >>> v.passed, [c.name for c in v.failed_checks]          # doctest: +SKIP
    (False, ['unique(order_id)'])
    """
    args = ["check", os.fspath(rules), "--staged", os.fspath(staged), "--format", "json"]
    args += _partition_args(partition or {})
    if table is not None:
        args += ["--table", os.fspath(table)]
    args += _engine_args(memory_limit, threads, storage_options)
    args += _failed_rows_args(failed_rows, failed_rows_limit)
    return _verdict(_run(args), failed_rows)


def publish(
    rules: PathLike,
    staged: PathLike,
    partition: Partition,
    table: PathLike,
    *,
    keep: Optional[int] = None,
    target: Optional[Literal["hive", "delta"]] = None,
    reaudits: Optional[int] = None,
    memory_limit: Union[int, str, None] = None,
    threads: Optional[int] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    failed_rows: Optional[PathLike] = None,
    failed_rows_limit: Union[int, Literal["all"], None] = None,
) -> Verdict:
    """Audit the staged files and, only when the verdict passes, publish
    them atomically as the table's partition.

    When the returned verdict passed, the partition is published (or
    already was, with the same files). When it failed, nothing was
    published and the staged files are untouched.

    Args:
        rules, staged, partition, memory_limit, threads, storage_options,
        failed_rows, failed_rows_limit:
            as for `check`; `partition` is required.
        table: the published table root.
        keep: how many displaced versions to keep for `rollback` (dqgate's
            default: 3).
        target: ``"hive"`` (``ROOT/k=v/`` swapped by rename) or ``"delta"``
            (one Delta Lake commit). Default: delta when the root holds
            ``_delta_log/``, else hive.
        reaudits: how many times to audit again when the rules read other
            partitions (``across published``, ``history(N)``, the table's
            schema) and another publish changed them before the swap
            (dqgate's default: 3).

    Raises:
        RuleError, UsageError, AuditError: as for `check`.
        PublishConflict: the published partition or the staged files
            changed since the audit, or the other partitions it read kept
            changing (exit 4); nothing was published.
    """
    args = ["publish", os.fspath(rules), "--staged", os.fspath(staged),
            "--table", os.fspath(table), "--format", "json"]
    args += _partition_args(partition)
    if keep is not None:
        args += ["--keep", str(keep)]
    if target is not None:
        args += ["--target", target]
    if reaudits is not None:
        args += ["--reaudits", str(reaudits)]
    args += _engine_args(memory_limit, threads, storage_options)
    args += _failed_rows_args(failed_rows, failed_rows_limit)
    return _verdict(_run(args), failed_rows)


def verify(
    table: PathLike,
    partition: Partition,
    *,
    storage_options: Optional[Mapping[str, str]] = None,
) -> VerifyResult:
    """Recompute a published partition's fingerprint and compare it with the
    audit record stored beside it.

    Returns:
        A result that is truthy when the partition is what was audited.

    Raises:
        UsageError: bad run key (exit 2).
        AuditError: the partition or its record cannot be read (exit 3).
    """
    args = ["verify", os.fspath(table), *_partition_args(partition)]
    args += _storage_args(storage_options)
    code, out, err = _run(args)
    if code in (0, 1):
        return VerifyResult(verified=code == 0, report=out)
    _raise(code, out, err)


def rollback(
    table: PathLike,
    partition: Partition,
    *,
    storage_options: Optional[Mapping[str, str]] = None,
) -> str:
    """Atomically restore the version that the last publish displaced.

    Returns:
        dqgate's message, e.g. ``"rolled back sales_date=2025-03-05 to version ..."``.

    Raises:
        UsageError, AuditError, PublishConflict: as the exit code says.
    """
    args = ["rollback", os.fspath(table), *_partition_args(partition)]
    args += _storage_args(storage_options)
    code, out, err = _run(args)
    if code == 0:
        return out.strip()
    _raise(code, out, err)


def lint(
    rules: PathLike,
    staged: Optional[PathLike] = None,
    *,
    storage_options: Optional[Mapping[str, str]] = None,
) -> List[Diagnostic]:
    """Parse and type-check a rule file, against the staged data's schema
    when `staged` is given, without scanning data.

    Returns:
        The diagnostics that do not make the file invalid: every diagnostic
        dqgate has today is an error, so a valid file gives ``[]``.

    Raises:
        RuleError: the file is invalid; ``.diagnostics`` has every problem
            (code, line, column, message) and ``.rendered`` the text.
    """
    args = ["lint", os.fspath(rules), "--format", "json"]
    if staged is not None:
        args += ["--staged", os.fspath(staged)]
    args += _storage_args(storage_options)
    code, out, err = _run(args)
    if code == 0:
        doc = _json_objects(out)
        if doc and "diagnostics" in doc[-1]:
            return [Diagnostic.from_dict(d) for d in doc[-1]["diagnostics"]]
    _raise(code, out, err)


def suggest(
    staged: PathLike,
    partition: Optional[Partition] = None,
    table: Optional[PathLike] = None,
    *,
    name: Optional[str] = None,
    threads: Optional[int] = None,
    storage_options: Optional[Mapping[str, str]] = None,
) -> str:
    """A rule file proposed from the staged data (``dqgate suggest``).

    Every statement of it holds on `staged`, and a comment on each says
    what was observed: edit it, save it, and `check` with it.

    Args:
        staged: the staged partition: a directory or an object-store URL.
        partition: the run key: ``partitioned by`` and a check that every
            row belongs to it.
        table: a published table root: ``history(N)`` baselines from its
            partitions (needs `partition`).
        name: the name on the ``table`` line (default: the table's or the
            staged directory's name).
        threads, storage_options: as for `check`.

    Returns:
        The rule file's text.

    Raises:
        UsageError: bad arguments, or a run-key value of the wrong type (exit 2).
        AuditError: the data could not be read (exit 3).

    >>> text = dqgate.suggest("staging/2025-03-05",
    ...                       {"sales_date": "2025-03-05"})  # doctest: +SKIP
    >>> pathlib.Path("rules/sales.dq").write_text(text)      # doctest: +SKIP
    """
    args = ["suggest", "--staged", os.fspath(staged), *_partition_args(partition or {})]
    if table is not None:
        args += ["--table", os.fspath(table)]
    if name is not None:
        args += ["--name", name]
    args += _engine_args(None, threads, storage_options)
    code, out, err = _run(args)
    if code == 0:
        return out
    _raise(code, out, err)


def _partition_args(partition: Partition) -> List[str]:
    args: List[str] = []
    for key, value in partition.items():
        args += ["--partition", f"{key}={value}"]
    return args


def _storage_args(options: Optional[Mapping[str, str]]) -> List[str]:
    args: List[str] = []
    for key, value in (options or {}).items():
        args += ["--storage-option", f"{key}={value}"]
    return args


def _engine_args(
    memory_limit: Union[int, str, None],
    threads: Optional[int],
    storage_options: Optional[Mapping[str, str]],
) -> List[str]:
    args: List[str] = []
    if memory_limit is not None:
        args += ["--memory-limit", str(memory_limit)]
    if threads is not None:
        args += ["--threads", str(threads)]
    return args + _storage_args(storage_options)


def _failed_rows_args(
    failed_rows: Optional[PathLike],
    limit: Union[int, Literal["all"], None],
) -> List[str]:
    args: List[str] = []
    if failed_rows is not None:
        args += ["--failed-rows", os.fspath(failed_rows)]
    if limit is not None:
        args += ["--failed-rows-limit", str(limit)]
    return args


def _run(args: Sequence[str]) -> Tuple[int, str, str]:
    """Run the binary; its exit code, stdout and stderr."""
    proc = subprocess.run(
        [find_dqgate_bin(), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    for line in proc.stderr.splitlines():
        log.info("%s", line)
    return proc.returncode, proc.stdout, proc.stderr


def _verdict(result: Tuple[int, str, str], failed_rows: Optional[PathLike] = None) -> Verdict:
    """Exit 0 or 1 with the verdict JSON: the verdict (its failed-rows files
    under `failed_rows`); anything else raises."""
    code, out, err = result
    docs = _json_objects(out)
    if code in (0, 1) and len(docs) == 1:
        doc = docs[0]
        # An error is never a pass: the exit code and the JSON must agree.
        if doc.get("verdict") == ("pass" if code == 0 else "fail"):
            return Verdict(doc, out, failed_rows)
    _raise(code, out, err)


def _json_objects(out: str) -> List[Dict[str, Any]]:
    """The JSON objects on stdout, in order (a publish that fails after a
    passing audit prints the verdict, then the error record)."""
    decoder = json.JSONDecoder()
    docs: List[Dict[str, Any]] = []
    i = 0
    while True:
        while i < len(out) and out[i].isspace():
            i += 1
        if i >= len(out):
            return docs
        try:
            doc, i = decoder.raw_decode(out, i)
        except json.JSONDecodeError:
            return docs
        if isinstance(doc, dict):
            docs.append(doc)


def _raise(code: int, out: str, err: str) -> NoReturn:
    """The exception for exit `code`, with the error record if one was printed."""
    records = [d for d in _json_objects(out) if d.get("verdict") == "error"]
    record = records[-1] if records else None
    message = (record or {}).get("error") or _last_error_line(err) or f"dqgate exited with {code}"
    common: Dict[str, Any] = {"exit_code": code, "stderr": err, "record": record}
    if code == 2 and record is not None and "diagnostics" in record:
        raise RuleError(
            message,
            diagnostics=[Diagnostic.from_dict(d) for d in record["diagnostics"]],
            rendered=record.get("rendered", ""),
            **common,
        )
    if code == 2:
        raise UsageError(message, **common)
    if code == 3:
        raise AuditError(message, **common)
    if code == 4:
        raise PublishConflict(message, **common)
    raise DqgateError(message, **common)


def _last_error_line(err: str) -> str:
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("dqgate: error: "):
            return line[len("dqgate: error: "):]
    if lines and lines[0].startswith("error:"):  # clap's usage errors
        return lines[0][len("error: "):]
    return lines[-1] if lines else ""
