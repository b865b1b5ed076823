"""What one call costs: the process start of the bundled binary against audits.

    python python/overhead.py [ROWS]

Run with the dqgate package installed and pyarrow; writes its partitions to
a temporary directory. Prints median wall times in milliseconds.
"""

import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(pathlib.Path(__file__).parent / "tests"))
from conftest import RULES, write_sales  # noqa: E402

import dqgate  # noqa: E402

KEY = {"sales_date": "2025-03-05"}


def median_ms(f, n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main(rows: int) -> None:
    tmp = pathlib.Path(tempfile.mkdtemp())
    small = write_sales(tmp / "small", KEY["sales_date"])
    base = pq.read_table(write_sales(tmp / "base", KEY["sales_date"], rows=100_000, files=1)
                         / "part-00000.parquet")
    big = tmp / "big"
    big.mkdir()
    for i in range(rows // 100_000):  # distinct order ids across files
        part = base.set_column(1, "order_id", pc.add(base["order_id"], i * 100_000))
        pq.write_table(part, big / f"part-{i:05d}.parquet")
    exe = dqgate.find_dqgate_bin()
    cli = [exe, "check", str(RULES), "--staged", str(small), "--partition",
           f"sales_date={KEY['sales_date']}", "--format", "json"]
    print(f"binary: {exe} ({pathlib.Path(exe).stat().st_size >> 20} MiB)")
    print("process start (dqgate --version):   %7.1f" % median_ms(
        lambda: subprocess.run([exe, "--version"], capture_output=True), 20))
    print("dqgate.lint(rules), no data:         %7.1f" % median_ms(lambda: dqgate.lint(RULES), 20))
    print("CLI check, 2,000 rows:               %7.1f" % median_ms(
        lambda: subprocess.run(cli, capture_output=True), 10))
    print("dqgate.check, 2,000 rows:            %7.1f" % median_ms(
        lambda: dqgate.check(RULES, small, KEY), 10))
    print(f"dqgate.check, {rows:,} rows:     %7.1f" % median_ms(
        lambda: dqgate.check(RULES, big, KEY), 3))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
