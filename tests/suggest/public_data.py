"""`dqgate suggest` on real public data sets that PyPI packages ship.

    python tests/suggest/public_data.py DQGATE_BINARY WORK_DIR

Needs pyarrow, and the packages palmerpenguins 0.1.6 (CC0; the Palmer
Station penguins, clean and raw) and vega_datasets 0.9.0 (BSD-3; their
bundled CSVs), installed with `pip install --no-deps`: their files are found
through the import system without importing them (so without pandas). Each
CSV is converted to Parquet with pyarrow, laid out as a pipeline would stage
it (several files, a `key=value` directory), and goes through
tests/suggest/roundtrip.py: the suggested rule file must lint and every
statement must hold when `dqgate check` runs it on the same files. Prints
what each suggestion found; exits 1 on any problem.
"""

import importlib.util
import os
import shutil
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roundtrip import round_trip  # noqa: E402


def package_file(package, *parts):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"the package {package} is not installed (pip install --no-deps {package})")
    return os.path.join(spec.submodule_search_locations[0], *parts)


def read_csv(path):
    # "NA" is the penguins' missing value; pyarrow reads it as null.
    options = pcsv.ConvertOptions(null_values=["NA", ""], strings_can_be_null=True)
    return pcsv.read_csv(path, convert_options=options)


def with_date(table, column, format):
    """`column`, text in `format`, as a date column."""
    dates = pc.strptime(table[column], format=format, unit="s").cast(pa.date32())
    return table.set_column(table.schema.get_field_index(column), column, dates)


def write_files(table, dir, files):
    """`table` as `files` Parquet files of about equal rows in `dir`."""
    os.makedirs(dir)
    step = -(-table.num_rows // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), os.path.join(dir, f"part-{i:05d}.parquet"))


def stage(work):
    """(name, staged dir, what the suggestion must contain)."""
    out = []
    penguins = read_csv(package_file("palmerpenguins", "data", "penguins.csv"))
    d = os.path.join(work, "penguins")
    write_files(penguins, d, 1)
    out.append((d, ["check values(species) in ('Adelie', 'Chinstrap', 'Gentoo')",
                    "check values(island) in ('Biscoe', 'Dream', 'Torgersen')",
                    "check null_rate(sex) <= "]))

    raw = read_csv(package_file("palmerpenguins", "data", "penguins-raw.csv"))
    d = os.path.join(work, "penguins_raw")
    write_files(raw, d, 3)
    out.append((d, ["check column \"Date Egg\" is date", "check values(\"Clutch Completion\") in ('No', 'Yes')"]))

    # One year of Seattle weather staged as a Hive partition `year=2015/`.
    weather = with_date(read_csv(package_file("vega_datasets", "_data", "seattle-weather.csv")), "date", "%Y/%m/%d")
    year = pc.year(weather["date"])
    weather = weather.filter(pc.equal(year, 2015))
    d = os.path.join(work, "seattle_weather")
    write_files(weather, os.path.join(d, "year=2015"), 2)
    out.append((d, ["partitioned by year", "check all(year = partition.year)",
                    "check primary_key(\"date\")"]))

    # Stock prices: unique per (symbol, date) only, a key of two columns.
    stocks = with_date(read_csv(package_file("vega_datasets", "_data", "stocks.csv")), "date", "%b %d %Y")
    d = os.path.join(work, "stocks")
    write_files(stocks, d, 2)
    out.append((d, ["check values(symbol) in ('AAPL', 'AMZN', 'GOOG', 'IBM', 'MSFT')",
                    "check primary_key("]))

    airports = read_csv(package_file("vega_datasets", "_data", "airports.csv"))
    d = os.path.join(work, "airports")
    write_files(airports, d, 4)
    out.append((d, ["check primary_key(iata)"]))
    return out


def main():
    binary, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = 0
    for staged, wanted in stage(work):
        name = os.path.basename(staged)
        problems, text = round_trip(binary, staged, work, name)
        problems += [f"{name}: the suggestion lacks {w!r}:\n{text}" for w in wanted if text and w not in text]
        for p in problems:
            print(f"FAIL {p}")
        failures += len(problems)
        statements = sum(1 for line in text.splitlines() if line.startswith("check "))
        print(f"{'ok  ' if not problems else 'FAIL'} {name}: {statements} suggested statements hold")
    print(f"public data sets: {failures} problem(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
