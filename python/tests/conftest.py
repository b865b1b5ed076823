"""Fixtures: real Parquet partitions written by pyarrow, and the recipes'
rule file. The tests run the installed package and its bundled binary."""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import os
import pathlib
import random
from decimal import Decimal
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
RECIPES = REPO / "docs" / "recipes"
RULES = RECIPES / "daily_sales.dq"

SCHEMA = pa.schema([
    ("sales_date", pa.date32()),
    ("order_id", pa.int64()),
    ("customer_id", pa.int64()),
    ("sku", pa.string()),
    ("amount", pa.decimal128(12, 2)),
    ("currency", pa.string()),
])


def require(module: str):
    """Import an optional test dependency: skip without it, except where
    DQGATE_TESTS_REQUIRE_ALL is set (.ci/run), where a missing one fails."""
    if importlib.util.find_spec(module.split(".")[0]) is None and not os.environ.get(
            "DQGATE_TESTS_REQUIRE_ALL"):
        pytest.skip(f"{module} is not installed", allow_module_level=True)
    return importlib.import_module(module)


def write_sales(directory: pathlib.Path, day: str, *, rows: int = 2000, bad: bool = False,
                files: int = 2) -> pathlib.Path:
    """Stage a day of sales as `files` Parquet files. A bad day has two
    duplicated order ids and a currency outside the allowed set."""
    rng = random.Random(day)
    date = dt.date.fromisoformat(day)
    ids = list(range(1, rows + 1))
    currency = [rng.choice(["EUR", "USD", "GBP"]) for _ in ids]
    if bad:
        ids[10] = ids[11] = 7
        ids[20] = 9
        currency[5] = "JPY"
    table = pa.table({
        "sales_date": [date] * rows,
        "order_id": ids,
        "customer_id": [rng.randint(1, 5000) for _ in ids],
        "sku": [f"SKU-{rng.randint(0, 999):05d}" for _ in ids],
        "amount": [Decimal(rng.randint(0, 10**6)) / 100 for _ in ids],
        "currency": currency,
    }, schema=SCHEMA)
    directory.mkdir(parents=True, exist_ok=True)
    step = -(-rows // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), directory / f"part-{i:05d}.parquet")
    return directory


@pytest.fixture
def rules() -> pathlib.Path:
    return RULES


@pytest.fixture
def stage(tmp_path: pathlib.Path) -> Callable[..., pathlib.Path]:
    """stage(day, bad=False) -> the staged directory of that day."""

    def make(day: str, *, bad: bool = False, rows: int = 2000) -> pathlib.Path:
        return write_sales(tmp_path / "staging" / day, day, bad=bad, rows=rows)

    return make


@pytest.fixture
def table(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "warehouse" / "daily_sales"


def published_files(table: pathlib.Path) -> dict[str, bytes]:
    """Every file under the table root and its bytes (empty if there is none)."""
    if not table.exists():
        return {}
    return {str(p.relative_to(table)): p.read_bytes() for p in sorted(table.rglob("*")) if p.is_file()}
