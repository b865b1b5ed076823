"""Write-audit-publish of one daily partition from Python.

    python publish_partition.py RULES STAGED_DIR DATE TABLE_ROOT

Exits 0 when the partition is published (or already was), 1 when the gate
failed and nothing was published; an error (invalid rule file, unreadable
data, publish conflict) raises, and Python exits 1 with the traceback.
Needs `pip install dqgate`.
"""

import sys

import dqgate


def main(rules: str, staged: str, day: str, table: str) -> int:
    # An invalid rule file raises dqgate.RuleError: its message shows each
    # problem with file:line:col and a caret (and .diagnostics has them as data).
    verdict = dqgate.publish(rules, staged, {"sales_date": day}, table)
    if not verdict.passed:
        for c in verdict.failed_checks:
            print(f"FAILED {c.name}: {c.metric} = {c.value} (expected {c.expected})")
        print(f"sales_date={day} was not published", file=sys.stderr)
        return 1
    with open(f"verdict-{day}.json", "w") as f:
        f.write(verdict.to_json())  # the archived verdict; `dqgate report` renders it
    print(f"published sales_date={day}: {verdict.summary.checks} checks, "
          f"{verdict.row_count} rows, {verdict.fingerprint}")
    if not dqgate.verify(table, {"sales_date": day}):  # readers see what was audited
        raise RuntimeError(f"sales_date={day} does not match its audit record")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
