"""The verdict as Python objects over the verdict JSON (`dqgate.verdict/v1`).

Nothing here judges: every field is read from the JSON that the binary
printed, and `Verdict.to_dict()` gives that JSON back unchanged.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Literal, Mapping, Optional, Union

if TYPE_CHECKING:  # pyarrow is needed only by FailedRows.to_arrow
    import pyarrow

__all__ = ["Check", "FailedRows", "Summary", "Value", "Verdict"]

#: A measured value as the verdict JSON carries it: counts and integer
#: min/max/sum as exact ints, rates and floats as floats, decimals, dates,
#: timestamps and text as strings, a null metric as None.
Value = Union[int, float, str, bool, None]


@dataclass(frozen=True)
class FailedRows:
    """The Parquet file of a check's offending rows, written with
    ``failed_rows=DIR``: every column of the staged files, plus
    ``_dqgate_file`` (the file, relative to the staged directory) and
    ``_dqgate_row`` (the 0-based row in it), in that order; for
    ``across published`` also ``_dqgate_partition``.

    Attributes:
        path: the file: DIR joined with the name the verdict JSON gives
            (just that name when the verdict was read without DIR).
        rows: rows in the file.
        cut: True when more rows offended than ``failed_rows_limit`` let
            into the file (it holds the first ones by file, then row).
    """

    path: str
    rows: int
    cut: bool

    def to_arrow(self) -> "pyarrow.Table":
        """The rows as a `pyarrow.Table` (needs ``pip install pyarrow``)."""
        try:
            import pyarrow.parquet as pq
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("FailedRows.to_arrow needs pyarrow: pip install pyarrow") from e
        return pq.read_table(self.path)


@dataclass(frozen=True)
class Check:
    """One statement of the rule file and what the audit measured for it.

    Attributes:
        line: 1-based line where the statement starts.
        name: the ``as`` text, else the statement's source text.
        severity: ``"check"`` (blocks) or ``"warn"`` (does not).
        metric: the measured metric, e.g. ``"null_rate(customer_id)"``.
        value: the measured value.
        expected: the expectation, e.g. ``"< 0.02"``.
        status: ``"pass"``, ``"fail"`` or ``"skipped"``.
        samples: for failing ``unique``, ``values``, ``all``... checks, at
            most 5 offending keys or rows (dicts as in the JSON).
        failed_rows: with ``failed_rows=DIR``, the file of the check's
            offending rows, when it did not hold and had some; else None.
    """

    line: int
    name: str
    severity: Literal["check", "warn"]
    metric: str
    value: Value
    expected: str
    status: Literal["pass", "fail", "skipped"]
    samples: List[Dict[str, Any]] = field(default_factory=list)
    failed_rows: Optional[FailedRows] = None

    @property
    def failed(self) -> bool:
        """True when the statement did not hold (blocking or not)."""
        return self.status == "fail"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any],
                  failed_rows_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> "Check":
        rows = d.get("failed_rows")
        failed = None
        if rows is not None:
            path = rows["path"]
            if failed_rows_dir is not None:
                path = os.path.join(os.fspath(failed_rows_dir), path)
            failed = FailedRows(path=path, rows=rows["rows"], cut=rows["cut"])
        return cls(
            line=d["line"],
            name=d["name"],
            severity=d["severity"],
            metric=d["metric"],
            value=d.get("value"),
            expected=d["expected"],
            status=d["status"],
            samples=list(d.get("samples", [])),
            failed_rows=failed,
        )


@dataclass(frozen=True)
class Summary:
    """Disjoint counts that add up to `checks`."""

    checks: int
    passed: int
    failed: int
    warned: int
    skipped: int


class Verdict:
    """The outcome of an audit: what `dqgate check --format json` prints.

    A failing verdict is a value, not an exception: test `passed`.

    Attributes:
        verdict: ``"pass"`` or ``"fail"``.
        passed: True when every ``check`` statement held (``warn``
            failures alone still pass).
        table: the rule file's table name.
        partition: the run key, e.g. ``{"sales_date": "2025-03-05"}``
            (``{}`` when the rule file has no ``partitioned by``).
        row_count: rows in the staged files.
        fingerprint: ``"sha256:..."`` over the staged files' paths, sizes
            and Parquet footers; `verify` compares it after publishing.
        checks: every statement, in rule-file order.
        summary: the counts.
        failed_rows: the `FailedRows` of every check that has a file
            (``failed_rows=DIR``), in rule-file order.
    """

    __slots__ = ("_doc", "_text", "verdict", "passed", "table", "partition",
                 "row_count", "fingerprint", "checks", "summary")

    def __init__(self, doc: Mapping[str, Any], text: Optional[str] = None,
                 failed_rows_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        if doc.get("verdict") not in ("pass", "fail"):
            raise ValueError(f"not a verdict: {doc.get('verdict')!r}")
        self._doc: Dict[str, Any] = copy.deepcopy(dict(doc))
        self._text = text
        self.verdict: Literal["pass", "fail"] = doc["verdict"]
        self.passed: bool = doc["verdict"] == "pass"
        self.table: str = doc["table"]
        self.partition: Dict[str, str] = dict(doc["partition"])
        self.row_count: int = doc["input"]["row_count"]
        self.fingerprint: str = doc["input"]["fingerprint"]
        self.checks: List[Check] = [Check.from_dict(c, failed_rows_dir) for c in doc["checks"]]
        self.summary = Summary(**{k: doc["summary"][k] for k in
                                  ("checks", "passed", "failed", "warned", "skipped")})

    @classmethod
    def from_json(cls, text: str,
                  failed_rows_dir: Optional[Union[str, "os.PathLike[str]"]] = None) -> "Verdict":
        """Read a verdict archived from ``--format json`` (or `to_json`);
        `failed_rows_dir` is the ``--failed-rows`` DIR its files are in."""
        return cls(json.loads(text), text, failed_rows_dir)

    @property
    def failed_rows(self) -> List[FailedRows]:
        """The files of offending rows, one per check that has one."""
        return [c.failed_rows for c in self.checks if c.failed_rows is not None]

    @property
    def failed_checks(self) -> List[Check]:
        """The ``check`` statements that did not hold (those that block)."""
        return [c for c in self.checks if c.severity == "check" and c.status == "fail"]

    @property
    def warned_checks(self) -> List[Check]:
        """The ``warn`` statements that did not hold (those that do not block)."""
        return [c for c in self.checks if c.severity == "warn" and c.status == "fail"]

    def to_dict(self) -> Dict[str, Any]:
        """The verdict JSON as data, exactly as dqgate printed it."""
        return copy.deepcopy(self._doc)

    def to_json(self) -> str:
        """The verdict JSON text, byte for byte as dqgate printed it."""
        if self._text is not None:
            return self._text
        return json.dumps(self._doc, indent=2, ensure_ascii=False) + "\n"

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        s = self.summary
        return (f"<Verdict {self.verdict} {self.table} {self.partition} "
                f"checks={s.checks} failed={s.failed} warned={s.warned}>")
