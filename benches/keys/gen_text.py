"""Text keys that are neither hex nor short, as producers write them, for
benches/keys/run.py --text.

    python benches/keys/gen_text.py ROWS OUT_DIR [--files 4] [--dups 1000] [--columns ref_id,code]

Writes OUT_DIR/part-NNN.parquet with pyarrow's defaults (Snappy, row groups
of 1Mi rows, dictionary tried first), rows split evenly over the files:

| column | values |
|--------|--------|
| ref_id | 22 random letters and digits (a base62 id of 131 bits) |
| b64_id | 16 random bytes in base64: 24 characters, `+`, `/` and `==` |
| code   | a business code of 6 to 28 letters, digits and `-/._#` |
| email  | `first.last` + 0 to 4 digits + `@` + one of 40 domains |
| path   | a URL path `/category/slug-words/id` of 25 to 47 characters |

--dups rows (scattered by a seeded shuffle, not adjacent) take every key of
another row chosen at random, as a replayed or retried write does; so each
column has about that many duplicated keys (a few fewer where two copies
share a source). DuckDB answers every check in the same run, so the exact
counts need not be known here.
"""

import argparse
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ALNUM = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)
CODE = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-/._#", dtype=np.uint8)
LOWER = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
DIGITS = np.frombuffer(b"0123456789", dtype=np.uint8)
DOMAINS = [f"{w}.{t}" for w in ("example", "mail", "corp", "shop", "post", "inbox", "web", "net",
                                 "acme", "globex") for t in ("com", "org", "de", "io")]
CATEGORIES = ["books", "garden", "toys", "kitchen", "sports", "music", "tools", "baby", "beauty",
              "auto", "office", "pets", "shoes", "games", "phones", "lamps"]


def strings(rng, n, alphabet, lo, hi):
    """n random strings of lengths lo..hi (inclusive) over alphabet."""
    lengths = rng.integers(lo, hi + 1, n) if hi > lo else np.full(n, lo)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = alphabet[rng.integers(0, len(alphabet), int(offsets[-1]))]
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))


def base64_ids(rng, n):
    bits = rng.integers(0, 64, (n, 22), dtype=np.uint8)
    text = np.empty((n, 24), dtype=np.uint8)
    text[:, :22] = B64[bits]
    text[:, 21] = B64[bits[:, 21] & 0x30]  # 128 bits: the last digit keeps 2 bits
    text[:, 22:] = ord("=")
    return pa.array(text.view("S24").ravel(), type=pa.large_binary()).cast(pa.large_string())


def large(text):
    return pa.scalar(text, pa.large_string())


def emails(rng, n):
    first = strings(rng, n, LOWER, 3, 9)
    last = strings(rng, n, LOWER, 3, 12)
    digits = strings(rng, n, DIGITS, 0, 4)
    domain = pa.array(np.array(DOMAINS)[rng.integers(0, len(DOMAINS), n)], type=pa.large_string())
    name = pc.binary_join_element_wise(first, last, large("."))
    return pc.binary_join_element_wise(pc.binary_join_element_wise(name, digits, large("")), domain, large("@"))


def paths(rng, n):
    cat = pa.array(np.array(CATEGORIES)[rng.integers(0, len(CATEGORIES), n)], type=pa.large_string())
    slug = pc.binary_join_element_wise(strings(rng, n, LOWER, 4, 12), strings(rng, n, LOWER, 3, 14), large("-"))
    ident = strings(rng, n, ALNUM, 10, 10)
    return pc.binary_join_element_wise(large(""), cat, slug, ident, large("/"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("rows", type=int)
    p.add_argument("out")
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--dups", type=int, default=1000)
    p.add_argument("--columns", default="ref_id,b64_id,code,email,path",
                   help="the columns to write (at 100M rows, all five need about 16 GB of memory)")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(20261202)
    # Rows that copy another row's keys: (copy, source) pairs over the whole data set.
    copies = rng.choice(a.rows, a.dups, replace=False)
    sources = rng.integers(0, a.rows, a.dups)
    per = -(-a.rows // a.files)
    columns = {"ref_id": lambda r, n: strings(r, n, ALNUM, 22, 22), "b64_id": base64_ids,
               "code": lambda r, n: strings(r, n, CODE, 6, 28), "email": emails, "path": paths}
    # Each column is generated whole with its own seed, so a source row in
    # another file is known before the copy's file is written.
    # Columns are built as large_string (a column of 100M values holds more
    # than 2 GiB) and written as string, as at every size.
    wanted = a.columns.split(",")
    whole = {name: make(np.random.default_rng([20261202, i]), a.rows)
             for i, (name, make) in enumerate(columns.items()) if name in wanted}
    take = np.arange(a.rows)
    take[copies] = sources
    idx = pa.array(take)
    for f in range(a.files):
        lo, hi = f * per, min(a.rows, (f + 1) * per)
        part = idx.slice(lo, hi - lo)
        table = pa.table({name: col.take(part).cast(pa.string()) for name, col in whole.items()})
        pq.write_table(table, os.path.join(a.out, f"part-{f:03d}.parquet"))
    open(os.path.join(a.out, "_generated"), "w").write(f"{a.rows} rows, {a.files} files\n")


if __name__ == "__main__":
    main()
