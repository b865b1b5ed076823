"""Every example on docs/recipes.md runs here (or, for the shell script, in
`cargo test`), against the installed package.

The code blocks of the page must be verbatim parts of the recipe files, so
that what a reader copies is what these tests ran."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import RECIPES, REPO, RULES, published_files, require, write_sales

PAGE = REPO / "docs" / "recipes.md"
GOOD, BAD = "2025-03-05", "2025-03-06"

#: Each recipe file and the test that runs it.
RUN_BY = {
    "publish_partition.py": "test_recipes.py::test_python_api_recipe",
    "dagster_assets.py": "test_recipes.py::test_dagster_recipe",
    "airflow_dag.py": "test_airflow.py (the DAG under test is this file)",
    "dbt/models/dqgate_publish.py": "test_recipes.py::test_dbt_recipe",
    "dbt/models/daily_sales_staged.sql": "test_recipes.py::test_dbt_recipe",
    "dbt/models/schema.yml": "test_recipes.py::test_dbt_recipe",
    "gate.sh": "tests/it/reports.rs (cargo test)",
    "daily_sales.dq": "every recipe test: the rule file they gate with",
}


def test_every_recipe_file_is_run_by_a_test():
    files = {str(p.relative_to(RECIPES)) for p in RECIPES.rglob("*") if p.is_file()
             and "__pycache__" not in p.parts}
    assert files == set(RUN_BY)


def test_every_code_block_on_the_page_is_part_of_a_recipe_file():
    page = PAGE.read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", page, re.S)
    assert len(blocks) >= 4
    sources = {p: p.read_text() for p in RECIPES.rglob("*") if p.is_file() and p.suffix != ".pyc"}
    for lang, block in blocks:
        block = textwrap.dedent(block).strip()
        if lang == "sh":  # command lines: checked where they name a recipe file
            for name in re.findall(r"docs/recipes/([\w/.]+)", block):
                assert (RECIPES / name).is_file(), name
            continue
        assert any(_contains(src, block) for src in sources.values()), (
            f"this {lang} block of {PAGE.name} is in no recipe file:\n{block}")


def _contains(source: str, block: str) -> bool:
    norm = lambda s: [line.strip() for line in s.strip().splitlines() if line.strip()]  # noqa: E731
    lines, want = norm(source), norm(block)
    return any(lines[i:i + len(want)] == want for i in range(len(lines) - len(want) + 1))


def test_python_api_recipe(tmp_path):
    table = tmp_path / "warehouse"
    script = RECIPES / "publish_partition.py"

    def run(day: str, bad: bool) -> subprocess.CompletedProcess:
        staged = write_sales(tmp_path / "staging" / day, day, bad=bad)
        return subprocess.run([sys.executable, str(script), str(RULES), str(staged), day, str(table)],
                              cwd=tmp_path, capture_output=True, text=True)

    ok = run(GOOD, False)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"published sales_date={GOOD}: 7 checks, 2000 rows, sha256:")
    assert (tmp_path / f"verdict-{GOOD}.json").read_text().startswith('{\n  "format": "dqgate.verdict/v1"')
    before = published_files(table)
    failed = run(BAD, True)
    assert failed.returncode == 1
    assert "FAILED unique(order_id): duplicate_count(order_id) = 2 (expected = 0)" in failed.stdout
    assert published_files(table) == before
    bad_rules = tmp_path / "bad.dq"
    bad_rules.write_text("table daily_sales\npartitioned by sales_date\ncheck min(amout) >= 0\n")
    err = subprocess.run([sys.executable, str(script), str(bad_rules), str(tmp_path / "staging" / BAD),
                          BAD, str(table)], capture_output=True, text=True)
    assert err.returncode == 1 and "dqgate.RuleError" in err.stderr and "^^^^^" in err.stderr


def _load(path: pathlib.Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dagster_recipe(tmp_path, monkeypatch):
    dagster = require("dagster")
    for name, sub in [("LANDING", "landing"), ("STAGING", "staging"), ("TABLE", "warehouse")]:
        monkeypatch.setenv(f"DAILY_SALES_{name}", str(tmp_path / sub))
    monkeypatch.setenv("DAILY_SALES_RULES", str(RULES))
    write_sales(tmp_path / "landing" / GOOD, GOOD)
    write_sales(tmp_path / "landing" / BAD, BAD, bad=True)
    defs = _load(RECIPES / "dagster_assets.py", "dagster_assets").defs
    job = defs.resolve_implicit_global_asset_job_def()

    def run(day: str):
        result = job.execute_in_process(partition_key=day, instance=dagster.DagsterInstance.ephemeral(),
                                        raise_on_error=False)
        done = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
        [check] = result.get_asset_check_evaluations()
        return result, done, check

    result, done, check = run(GOOD)
    assert result.success and check.passed
    assert done == {"daily_sales_staged", "daily_sales", "sales_dashboard"}
    assert (tmp_path / "warehouse" / f"sales_date={GOOD}").is_dir()
    result, done, check = run(BAD)
    assert not result.success and not check.passed and done == {"daily_sales_staged"}
    assert not (tmp_path / "warehouse" / f"sales_date={BAD}").exists()
    assert {c["name"] for c in check.metadata["failed_checks"].value} == {
        "unique(order_id)", "values(currency) in ('EUR', 'USD', 'GBP')"}


def test_dbt_recipe(tmp_path):
    dbt = pathlib.Path(sys.executable).parent / "dbt"
    if not dbt.exists():
        require("dbt.adapters.duckdb")
    project = tmp_path / "shop"
    shutil.copytree(RECIPES / "dbt" / "models", project / "models")
    (project / "dbt_project.yml").write_text(
        "name: shop\nversion: '1.0'\nprofile: shop\nmodel-paths: [models]\n")
    (project / "profiles.yml").write_text(
        f"shop:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n"
        f"      path: {tmp_path / 'shop.duckdb'}\n")
    orders = tmp_path / "orders"
    write_sales(orders / GOOD, GOOD)
    write_sales(orders / BAD, BAD, bad=True)
    table = tmp_path / "warehouse"

    def run(day: str) -> subprocess.CompletedProcess:
        staging = tmp_path / "staging" / day
        staging.mkdir(parents=True)
        variables = (f"{{sales_date: '{day}', staging: '{staging}', table: '{table}', "
                     f"rules: '{RULES}', orders: '{orders}/*/*.parquet'}}")
        return subprocess.run(
            [str(dbt), "run", "--select", "daily_sales_staged+", "--vars", variables,
             "--project-dir", str(project), "--profiles-dir", str(project)],
            cwd=project, capture_output=True, text=True,
            env={**os.environ, "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"})

    ok = run(GOOD)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (table / f"sales_date={GOOD}").is_dir()
    before = published_files(table)
    failed = run(BAD)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert f"sales_date={BAD} failed the gate, nothing was published" in failed.stdout
    assert published_files(table) == before
