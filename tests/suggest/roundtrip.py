"""The round trip of `dqgate suggest`, shared by the writer corpus and the
public data sets: suggest a rule file for a staged directory (with the run
key it proposes, when it proposes one), then `lint` it against the files and
`check` them with it. Every statement must hold: `check` exits 0 and its
verdict counts as many passed checks as the file has statements (none
failed, warned or skipped). Two suggestions must be byte-identical.
"""

import json
import os
import subprocess

CANDIDATE = "# run key candidate: "


def _run(args):
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def round_trip(binary, staged, work, name):
    """Problems found for `staged` (an empty list when the round trip holds),
    and the suggested text."""
    code, first, err = _run([binary, "suggest", "--staged", staged])
    if code != 0:
        return [f"{name}: suggest exited {code}: {err.strip()}"], ""
    key = []
    for line in first.splitlines():
        if line.startswith(CANDIDATE):
            key = line[len(CANDIDATE):].split(" ")
    args = [binary, "suggest", "--staged", staged] + key
    code, text, err = _run(args)
    if code != 0:
        return [f"{name}: suggest {' '.join(key)} exited {code}: {err.strip()}"], ""
    problems = []
    if _run(args)[1] != text:
        problems.append(f"{name}: two suggestions differ")
    rules = os.path.join(work, f"{name}.suggested.dq")
    with open(rules, "w") as fh:
        fh.write(text)
    code, out, err = _run([binary, "lint", rules, "--staged", staged])
    if code != 0:
        problems.append(f"{name}: lint exited {code}:\n{out}{err}")
        return problems, text
    code, out, err = _run([binary, "check", rules, "--staged", staged, "--format", "json"] + key)
    statements = sum(1 for line in text.splitlines() if line.startswith(("check ", "warn ")))
    try:
        summary = json.loads(out)["summary"]
    except (ValueError, KeyError):
        problems.append(f"{name}: check exited {code} without a verdict: {out}{err}")
        return problems, text
    if code != 0 or summary["passed"] != statements or summary["checks"] != statements:
        failed = [c for c in json.loads(out)["checks"] if c["status"] != "pass"]
        problems.append(f"{name}: check exited {code}, {summary}, {statements} statements; not holding: {failed}")
    return problems, text
