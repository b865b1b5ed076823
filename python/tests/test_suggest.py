"""`dqgate.suggest`: a rule file proposed from the data, that holds on it."""

from __future__ import annotations

import pytest

import dqgate

DAY = "2025-03-05"
KEY = {"sales_date": DAY}


def test_a_suggestion_holds_on_its_data_and_catches_a_bad_day(stage, tmp_path):
    staged = stage(DAY)
    text = dqgate.suggest(staged, KEY, name="daily_sales")
    assert text.startswith("# Suggested by `dqgate suggest` from 2 files, 2,000 rows")
    for line in ("table daily_sales\npartitioned by sales_date\n",
                 "check all(sales_date = partition.sales_date) as 'rows belong to the run key'",
                 "check primary_key(order_id) ",
                 "check values(currency) in ('EUR', 'GBP', 'USD') "):
        assert line in text
    rules = tmp_path / "suggested.dq"
    rules.write_text(text)
    assert dqgate.lint(rules, staged) == []
    v = dqgate.check(rules, staged, KEY)
    statements = sum(1 for line in text.splitlines() if line.startswith("check "))
    assert v.passed and v.summary.passed == v.summary.checks == statements
    # Another day's rows, with duplicated ids and a new currency, staged as this day's.
    bad = dqgate.check(rules, stage("2025-03-06", bad=True), KEY)
    failed = {c.name for c in bad.failed_checks}
    assert {"rows belong to the run key", "primary_key(order_id)",
            "values(currency) in ('EUR', 'GBP', 'USD')"} <= failed


def test_without_a_run_key_it_names_a_candidate(stage):
    text = dqgate.suggest(str(stage(DAY)))
    assert f"# run key candidate: --partition sales_date={DAY}\n" in text
    assert "\npartitioned by" not in text
    assert text == dqgate.suggest(stage(DAY))


def test_history_baselines_from_a_published_table(rules, stage, table, tmp_path):
    for day in ("2025-03-01", "2025-03-02"):
        assert dqgate.publish(rules, stage(day), {"sales_date": day}, table).passed
    staged = stage(DAY)
    text = dqgate.suggest(staged, KEY, table)
    assert "check row_count between 0.5 * median(history(7).row_count) and 2 * median(history(7).row_count)" in text
    suggested = tmp_path / "with_history.dq"
    suggested.write_text(text)
    v = dqgate.check(suggested, staged, KEY, table)
    assert v.passed and v.summary.skipped == 0


def test_errors_raise(stage, tmp_path):
    with pytest.raises(dqgate.UsageError) as e:
        dqgate.suggest(stage(DAY), {"sales_date": "yesterday"})
    assert e.value.exit_code == 2 and "sales_date=yesterday" in str(e.value)
    with pytest.raises(dqgate.AuditError) as e:
        dqgate.suggest(tmp_path / "missing")
    assert e.value.exit_code == 3
