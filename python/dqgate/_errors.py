"""The exceptions: one per exit code of the command line's contract.

A failing verdict (exit 1) is not an exception: `check` and `publish`
return it with `passed` False. Everything else that stops dqgate raises a
subclass of `DqgateError`, so that an error can never be taken for a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence

__all__ = [
    "AuditError",
    "Diagnostic",
    "DqgateError",
    "PublishConflict",
    "RuleError",
    "UsageError",
]


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a rule file, as `dqgate lint --format json` gives it.

    Attributes:
        code: the stable code, e.g. ``"E201"`` (unknown column).
        line: 1-based line of the start of the problem.
        column: 1-based column (in characters) of the start.
        message: what is wrong.
        help: a suggestion such as "did you mean `amount`?", if any.
    """

    code: str
    line: int
    column: int
    message: str
    help: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Diagnostic":
        return cls(
            code=d["code"],
            line=d["line"],
            column=d["column"],
            message=d["message"],
            help=d.get("help"),
        )


class DqgateError(Exception):
    """dqgate could not give a verdict or could not carry out the command.

    Attributes:
        exit_code: the exit code of the `dqgate` process (negative: killed
            by that signal).
        message: dqgate's error message.
        stderr: everything the process wrote on stderr.
        record: the error record printed with ``--format json``, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        exit_code: int,
        stderr: str = "",
        record: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.stderr = stderr
        self.record = dict(record) if record is not None else None

    def __reduce__(self) -> Any:
        # Picklable (for process pools and orchestrators) despite keyword-only fields.
        return (_restore, (type(self), self.message, dict(self.__dict__)))


def _restore(cls: "type[DqgateError]", message: str, state: Dict[str, Any]) -> "DqgateError":
    e = cls.__new__(cls)
    Exception.__init__(e, message)
    e.__dict__.update(state)
    return e


class UsageError(DqgateError):
    """Exit 2 without rule-file diagnostics: bad arguments or run key."""


class RuleError(DqgateError):
    """Exit 2: the rule file does not parse or type-check. Nothing was scanned.

    Attributes:
        diagnostics: every problem found, in file order.
        rendered: the diagnostics as dqgate prints them for people, with
            ``file:line:col``, the source line and a caret.
    """

    def __init__(
        self,
        message: str,
        *,
        exit_code: int,
        diagnostics: Sequence[Diagnostic],
        rendered: str,
        stderr: str = "",
        record: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(message, exit_code=exit_code, stderr=stderr, record=record)
        self.diagnostics = list(diagnostics)
        self.rendered = rendered

    def __str__(self) -> str:
        return self.rendered or self.message


class AuditError(DqgateError):
    """Exit 3: the data could not be audited (missing or unreadable files,
    corrupt Parquet, schemas that disagree). Nothing was published."""


class PublishConflict(DqgateError):
    """Exit 4: the published partition or the staged files changed since the
    audit. Nothing was published."""
