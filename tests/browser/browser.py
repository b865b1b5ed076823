#!/usr/bin/env python3
"""Browser test of `dqgate report`: render the page in headless Chromium.

    browser.py DQGATE WORKDIR [SCREENSHOT]

Builds a real table with the shell recipe (docs/recipes/gate.sh): four
published days from the bundled fixtures, a fifth day that fails the gate, a
passing check of a sixth day and a run that cannot audit. Renders the three
verdicts and the table's history with `dqgate report`, loads the page in
headless Chromium and checks that

- the page loads no resource and raises no script or console error (a
  control page with a deliberate script error proves the detection works),
- the rendered DOM holds each verdict's status, the check names, samples,
  the error message and one chart per numeric metric,
- a screenshot can be taken (written to SCREENSHOT, default WORKDIR/report.png,
  window 1200x1600 or DQGATE_SHOT_SIZE; docs/report.png was taken with
  DQGATE_SHOT_SIZE=1200,2000 so that the charts show).

Chromium comes from the system packages (`apt-get install chromium`).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(REPO, "testdata", "data")
RULES = os.path.join("docs", "recipes", "daily_sales.dq")
GATE = os.path.join(REPO, "docs", "recipes", "gate.sh")


def fail(msg):
    print(f"browser test: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


FILES = ["part-00000.parquet", "part-00001.parquet", "batch=2/part-00002.parquet"]


def stage(work, name, fixture, files=FILES):
    """Copies a fixture's data files (or some of them) to a fresh staged
    directory. The fixtures also hold Spark-style leftovers (`_temporary/`),
    which `publish` rightly refuses."""
    dst = os.path.join(work, "staging", name)
    src = os.path.join(DATA, fixture)
    for f in files:
        os.makedirs(os.path.dirname(os.path.join(dst, f)), exist_ok=True)
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    return dst


def gate(dqgate, work, staged, date, expect):
    env = dict(os.environ, DQGATE=dqgate)
    table = os.path.join(work, "warehouse", "daily_sales")
    r = subprocess.run(
        ["bash", GATE, RULES, staged, date, table, os.path.join(work, "reports")],
        cwd=REPO, env=env, capture_output=True, text=True,
    )
    if r.returncode != expect:
        fail(f"gate.sh {date}: exit {r.returncode}, expected {expect}\n{r.stdout}{r.stderr}")
    return table


def build_report(dqgate, work):
    """A table with history, three verdicts, and their report; returns its path."""
    days = [
        ("2025-03-01", "sales_ok", FILES),
        ("2025-03-02", "sales_small", FILES),
        ("2025-03-03", "sales_ok", FILES[:2]),
        ("2025-03-04", "sales_ok", ["part-00000.parquet", "batch=2/part-00002.parquet"]),
    ]
    for date, fixture, files in days:
        table = gate(dqgate, work, stage(work, date, fixture, files), date, 0)
    # A day that fails the gate: nothing is published, the verdict is kept.
    gate(dqgate, work, stage(work, "2025-03-05", "sales_bad"), "2025-03-05", 1)
    if os.path.exists(os.path.join(table, "sales_date=2025-03-05")):
        fail("a failed gate published its partition")
    reports = os.path.join(work, "reports")
    passing = os.path.join(reports, "check-2025-03-06.json")
    with open(passing, "w") as out:
        subprocess.run(
            [dqgate, "check", RULES, "--staged", os.path.join(DATA, "sales_small"),
             "--partition", "sales_date=2025-03-06", "--table", table, "--format", "json"],
            cwd=REPO, stdout=out, stderr=subprocess.DEVNULL, check=True,
        )
    broken = os.path.join(reports, "check-2025-03-07.json")
    with open(broken, "w") as out:
        r = subprocess.run(
            [dqgate, "check", RULES, "--staged", os.path.join(DATA, "truncated"),
             "--partition", "sales_date=2025-03-07", "--format", "json"],
            cwd=REPO, stdout=out, stderr=subprocess.DEVNULL,
        )
    if r.returncode != 3:
        fail(f"auditing a truncated file: exit {r.returncode}, expected 3")
    # The failing day again, with each failing check's rows written.
    rows = os.path.join(work, "failed-rows")
    with_rows = os.path.join(reports, "check-2025-03-05-rows.json")
    with open(with_rows, "w") as out:
        r = subprocess.run(
            [dqgate, "check", RULES, "--staged", os.path.join(work, "staging", "2025-03-05"),
             "--partition", "sales_date=2025-03-05", "--format", "json",
             "--failed-rows", rows, "--failed-rows-limit", "25"],
            cwd=REPO, stdout=out, stderr=subprocess.DEVNULL,
        )
    if r.returncode != 1:
        fail(f"checking the failing day with --failed-rows: exit {r.returncode}, expected 1")
    page = os.path.join(work, "report.html")
    subprocess.run(
        [dqgate, "report", os.path.join(reports, "verdict-2025-03-05.json"), broken, passing,
         with_rows, "--table", table, "--failed-rows", rows, "-o", page],
        check=True,
    )
    return page


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    fail("no chromium on PATH (apt-get install -y chromium)")


def run_chromium(browser, page, *extra):
    profile = tempfile.mkdtemp(prefix="dqgate-chromium-")
    try:
        r = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
             "--enable-logging=stderr", "--v=0", *extra, "file://" + page],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return r


# Console messages Chromium logs with --enable-logging: `CONSOLE(12)] "..."`;
# failed loads of resources name net::ERR_...
PROBLEM = re.compile(r'CONSOLE\(\d+\)\]|Uncaught|net::ERR_|Failed to load resource')


def problems(stderr):
    return [line for line in stderr.splitlines() if PROBLEM.search(line)]


def control(browser, work):
    """A page with a script error must be caught, or the check proves nothing."""
    bad = os.path.join(work, "control.html")
    with open(bad, "w") as f:
        f.write("<!DOCTYPE html><html><body><p>control</p>"
                "<script>no_such_function();</script></body></html>")
    r = run_chromium(browser, bad, "--dump-dom")
    if not any("no_such_function" in p for p in problems(r.stderr)):
        fail("the control page's script error was not detected; stderr:\n" + r.stderr[-2000:])


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    dqgate, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shot = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else os.path.join(work, "report.png")
    os.makedirs(work, exist_ok=True)
    page = build_report(dqgate, work)
    html = open(page, encoding="utf-8").read()
    for external in ("<script", "<link", "src=", "@import", "url("):
        if external in html:
            fail(f"the page is not self-contained: it holds `{external}`")

    browser = chromium()
    control(browser, work)
    r = run_chromium(browser, page, "--dump-dom")
    if r.returncode != 0:
        fail(f"chromium exit {r.returncode}:\n{r.stderr[-2000:]}")
    found = problems(r.stderr)
    if found:
        fail("console errors:\n" + "\n".join(found))
    dom = r.stdout
    expected = [
        "dqgate report",
        '<span class="badge fail">FAIL</span> daily_sales [sales_date=2025-03-05]',
        '<span class="badge pass">PASS</span> daily_sales [sales_date=2025-03-06]',
        '<span class="badge error">ERROR</span>',
        "unique(order_id)", "no sudden drop", "null_rate(sku) &lt; 0.5%",
        "JPY", "2 samples", "5.92 %",
        "Published history of",
        "sales_date=2025-03-04",
    ]
    for text in expected:
        if text not in dom:
            fail(f"rendered page lacks {text!r}")
    # The failed rows under their checks: every column, the file and row.
    failed_rows = [
        "failed rows: line-0008-unique_order_id.parquet (7 rows)",
        "failed rows: line-0007-null_rate_customer_id_2.parquet (25 rows, cut at the limit), the first 10",
        "<th>_dqgate_file</th><th>_dqgate_row</th>",
        "<td>JPY</td>",
    ]
    for text in failed_rows:
        if text not in dom:
            fail(f"rendered page lacks the failed rows {text!r}")
    tables = re.findall(r'<details class="samples failed-rows" open="">.*?</details>', dom, re.S)
    if len(tables) != 4 or any(t.count("<tr>") < 2 for t in tables):
        fail(f"expected a table of rows under each of the 4 checks with failed rows, found {len(tables)}")
    charts = dom.count('<svg class="chart"')
    if charts < 5:
        fail(f"expected a chart per numeric metric (at least 5), found {charts}")

    size = os.environ.get("DQGATE_SHOT_SIZE", "1200,1600")
    r = run_chromium(browser, page, f"--screenshot={shot}", f"--window-size={size}",
                     "--hide-scrollbars")
    if r.returncode != 0 or not os.path.exists(shot) or os.path.getsize(shot) < 10_000:
        fail(f"no screenshot (exit {r.returncode}):\n{r.stderr[-2000:]}")
    print(f"browser test: ok ({charts} charts rendered, screenshot {shot})")


if __name__ == "__main__":
    main()
