//! A single text key hashed from its Parquet pages (the fingerprint
//! strategy's scan and verification when the key column is not kept in
//! memory, here under a small `--memory-limit`) against the grouped pass:
//! random text of every width (empty strings, multi-byte UTF-8, long
//! values), nulls in both null modes, written as v1 and v2 pages, with
//! dictionaries that give way to plain pages, with delta encodings (read
//! by the Arrow reader instead), compressed or not, as `Utf8`,
//! `LargeUtf8` and a dictionary of `Utf8`, in several files and row groups. The verdict, samples
//! included, is byte-identical, with whole and with colliding
//! fingerprints, and `-v` says the pages were read. Composite keys of text
//! and integer parts (nulls in each part), fingerprinted page by page, are
//! held to the grouped verdict the same way. The verification also takes
//! a single key's rows by value (tallied by dictionary index, plain values
//! in batches), as it does for many candidates. And the first pass tables
//! a single key's exact values, the answer when every run keeps its table,
//! and counted as fingerprints from wherever a run gives it up; or bins
//! them from any point, tabled a bin at a time at the end, or given up as
//! fingerprints when the bins are full.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, LargeStringArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, Encoding};
use datafusion::parquet::file::properties::{WriterProperties, WriterVersion};
use proptest::prelude::*;

use super::oracle::splitmix::Rng;

const RULES: &str = "table t
check unique(s)
check duplicate_count(s) nulls not distinct = 0
check distinct_count(s) > 0
";

/// A value of any shape for `v`: equal `v`, equal text.
fn value(v: u64) -> String {
    const ALPHABET: [char; 12] = [
        'a', 'Z', '0', '-', '/', ' ', 'é', 'ß', '日', '🙂', '\u{0}', '.',
    ];
    let mut r = Rng(v);
    let len = match r.below(4) {
        0 => r.below(3),
        1 => 10 + r.below(6),
        _ => r.below(40),
    } as usize;
    (0..len)
        .map(|_| ALPHABET[r.below(ALPHABET.len() as u64) as usize])
        .collect()
}

/// `values` as text of `layout`: 0 `Utf8`, 1 `LargeUtf8`, 2 a dictionary
/// of `Utf8` (pandas categoricals, pyarrow's `dictionary_encode`).
fn text_array(values: Vec<Option<String>>, layout: u8) -> ArrayRef {
    use datafusion::arrow::array::DictionaryArray;
    use datafusion::arrow::datatypes::Int32Type;
    match layout {
        0 => Arc::new(StringArray::from(values)),
        1 => Arc::new(LargeStringArray::from(values)),
        _ => Arc::new(
            (values.iter())
                .map(Option::as_deref)
                .collect::<DictionaryArray<Int32Type>>(),
        ),
    }
}

fn write(rng: &mut Rng, dir: &Path, layout: u8) {
    fs::create_dir_all(dir).unwrap();
    let files = 1 + rng.below(3);
    let distinct = 2_000 + rng.below(20_000);
    let nulls = rng.below(3) * 50;
    // Half the time 19 values in 20 share a prefix and a suffix (which
    // the bins keep once).
    let affixed = rng.below(2) == 0;
    let affix = |v: u64| match affixed && !v.is_multiple_of(20) {
        true => format!("cust-{}@shop.example", value(v)),
        false => value(v),
    };
    for f in 0..files {
        let n = 25_000 + rng.below(20_000) as usize;
        let values: Vec<Option<String>> = (0..n)
            .map(|_| (rng.below(1000) >= nulls).then(|| affix(rng.below(distinct))))
            .collect();
        let column = text_array(values, layout);
        let field = Field::new("s", column.data_type().clone(), true);
        let schema = Arc::new(Schema::new(vec![field]));
        let delta = |p: Builder| p.set_encoding(Encoding::DELTA_BYTE_ARRAY);
        let batch = RecordBatch::try_new(schema, vec![column]).unwrap();
        write_file(rng, &dir.join(format!("part-{f}.parquet")), &batch, delta);
    }
}

type Builder = datafusion::parquet::file::properties::WriterPropertiesBuilder;

/// `batch` written to `path` with random writer settings: v1 or v2 pages,
/// page, dictionary and row group limits, codec, and a quarter of the
/// time no dictionary and the encodings `delta` sets, a quarter no
/// dictionary.
fn write_file(rng: &mut Rng, path: &Path, batch: &RecordBatch, delta: impl Fn(Builder) -> Builder) {
    let version = match rng.below(2) {
        0 => WriterVersion::PARQUET_1_0,
        _ => WriterVersion::PARQUET_2_0,
    };
    let mut props = WriterProperties::builder()
        .set_writer_version(version)
        .set_dictionary_page_size_limit(1 << (8 + rng.below(12)))
        .set_data_page_row_count_limit(100 + rng.below(5_000) as usize)
        .set_write_batch_size(64)
        .set_max_row_group_row_count(Some(2_000 + rng.below(10_000) as usize))
        .set_compression(match rng.below(3) {
            0 => Compression::UNCOMPRESSED,
            1 => Compression::SNAPPY,
            _ => Compression::ZSTD(Default::default()),
        });
    match rng.below(4) {
        0 => props = delta(props.set_dictionary_enabled(false)),
        1 => props = props.set_dictionary_enabled(false),
        _ => {}
    }
    let file = fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props.build())).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// `dqgate check -v` with `env`: (JSON verdict, stderr).
/// The fingerprint strategy, the key columns not kept (so that they are
/// read page by page), with fingerprints cut to `bits` if given.
fn paged_env(bits: Option<&'static str>) -> Vec<(&'static str, &'static str)> {
    let mut env = vec![
        ("DQGATE_TEST_KEY_STRATEGY", "fingerprint"),
        ("DQGATE_TEST_KEEP_BYTES", "0"),
    ];
    env.extend(bits.map(|b| ("DQGATE_TEST_FINGERPRINT_BITS", b)));
    env
}

fn check(dir: &Path, env: &[(&str, &str)], limit: Option<&str>) -> (String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
    cmd.current_dir(dir)
        .args([
            "check", "k.dq", "--staged", "staged", "--format", "json", "-v",
        ])
        .envs(env.iter().copied());
    if let Some(l) = limit {
        cmd.args(["--memory-limit", l]);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    #[test]
    fn text_keys_read_page_by_page_give_the_grouped_verdict(seed in any::<u64>(), layout in 0..3u8) {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("k.dq"), RULES).unwrap();
        write(&mut Rng(seed), &tmp.path().join("staged"), layout);
        let (grouped, _) = check(tmp.path(), &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
        let give_up = (Rng(seed ^ 1).below(1000) + 1).to_string();
        for bits in [None, Some("6")] {
            let mut env = vec![("DQGATE_TEST_KEY_STRATEGY", "fingerprint")];
            env.extend(bits.map(|b| ("DQGATE_TEST_FINGERPRINT_BITS", b)));
            // Counted and verified, the runs' tables of exact values off.
            env.push(("DQGATE_TEST_EXACT_VALUES", "0"));
            let (got, stderr) = check(tmp.path(), &env, Some("512KiB"));
            prop_assert!(stderr.contains("scan (page by page)"), "{}", stderr);
            prop_assert!(got == grouped, "bits {:?}:\n{}\n---\n{}", bits, got, grouped);
            // The verification's rows by value: a dictionary's tallied,
            // plain values in batches, nulls counted.
            env.push(("DQGATE_TEST_BY_VALUE", "0"));
            let (got, stderr) = check(tmp.path(), &env, Some("512KiB"));
            prop_assert!(stderr.contains("page by page by value"), "{}", stderr);
            prop_assert!(got == grouped, "by value, bits {:?}:\n{}\n---\n{}", bits, got, grouped);
            env.pop();
            env.pop();
            // The exact values tabled by the first pass, which are the
            // answer: read once.
            env.push(("DQGATE_TEST_KEEP_BYTES", "0"));
            let (got, stderr) = check(tmp.path(), &env, None);
            prop_assert!(stderr.contains("tabling the exact values"), "{}", stderr);
            prop_assert!(!stderr.contains("repeated fingerprint"), "{}", stderr);
            prop_assert!(got == grouped, "tabled, bits {:?}:\n{}\n---\n{}", bits, got, grouped);
            // Binned from any point: every run's bins, tabled a bin at a
            // time at the end, are the answer; under a small limit written
            // to disk and read back, a bin above the others tabled in
            // place or not; or, full with nowhere to write, given up as
            // fingerprints, and verified.
            env.push(("DQGATE_TEST_BIN_VALUES", &give_up));
            let (got, stderr) = check(tmp.path(), &env, None);
            prop_assert!(stderr.contains("binning the exact values"), "{}", stderr);
            prop_assert!(!stderr.contains("repeated fingerprint"), "{}", stderr);
            prop_assert!(got == grouped, "binned at {}, bits {:?}:\n{}\n---\n{}", give_up, bits, got, grouped);
            // A bin above the others' mean tabled in place before it grows
            // or is written.
            env.push(("DQGATE_TEST_OUTSIZED_BIN", "1"));
            let (got, _) = check(tmp.path(), &env, Some("512KiB"));
            prop_assert!(got == grouped, "bins in place at {}, bits {:?}:\n{}\n---\n{}", give_up, bits, got, grouped);
            env.pop();
            // (The bins' budget 64 KiB whatever the values' lengths, and
            // none tabled in place, which could spare the writes and the
            // giving up.)
            env.push(("DQGATE_TEST_BIN_BYTES", "65536"));
            env.push(("DQGATE_TEST_OUTSIZED_BIN", "1000000000"));
            let (got, stderr) = check(tmp.path(), &env, Some("512KiB"));
            prop_assert!(stderr.contains("MB written to disk): "), "{}", stderr);
            prop_assert!(got == grouped, "bins on disk at {}, bits {:?}:\n{}\n---\n{}", give_up, bits, got, grouped);
            // Binned from the first value (a table of more, turned to bins
            // of 64 KiB, might not fit them), full with nowhere to write.
            let nowhere = tmp.path().join("nowhere");
            env.extend([("TMPDIR", nowhere.to_str().unwrap()), ("DQGATE_TEST_BIN_VALUES", "1")]);
            let (got, stderr) = check(tmp.path(), &env, Some("512KiB"));
            prop_assert!(stderr.contains("then their bins"), "{}", stderr);
            prop_assert!(got == grouped, "bins full, bits {:?}:\n{}\n---\n{}", bits, got, grouped);
            env.truncate(env.len() - 5);
            // Given up at any point: the values tabled so far counted as
            // fingerprints, and verified.
            env.push(("DQGATE_TEST_EXACT_VALUES", &give_up));
            let (got, stderr) = check(tmp.path(), &env, None);
            prop_assert!(stderr.contains("giving up their table"), "{}", stderr);
            prop_assert!(got == grouped, "given up at {}, bits {:?}:\n{}\n---\n{}", give_up, bits, got, grouped);
            env.pop();
            env.pop();
            // Kept in memory instead (the batches, or text compactly).
            let (got, stderr) = check(tmp.path(), &env, None);
            prop_assert!(stderr.contains("the scan kept"), "{}", stderr);
            prop_assert!(got == grouped, "kept, bits {:?}:\n{}\n---\n{}", bits, got, grouped);
        }
    }
}

/// Files of text keys in order of their bytes, with nulls anywhere: one
/// order across the files (a key may span two), or (`overlapping`) each
/// file in order on its own, their ranges overlapping.
fn write_sorted(rng: &mut Rng, dir: &Path, layout: u8, overlapping: bool) {
    fs::create_dir_all(dir).unwrap();
    let files = 1 + rng.below(3) as usize;
    let distinct = 2_000 + rng.below(20_000);
    let nulls = rng.below(3) * 50;
    let n = files * (20_000 + rng.below(20_000) as usize);
    let mut keys: Vec<String> = (0..n).map(|_| value(rng.below(distinct))).collect();
    let per = n.div_ceil(files);
    match overlapping {
        false => keys.sort_unstable(),
        true => keys.chunks_mut(per).for_each(|c| c.sort_unstable()),
    }
    for (f, chunk) in keys.chunks(per).enumerate() {
        let values: Vec<Option<String>> = (chunk.iter())
            .map(|k| (rng.below(1000) >= nulls).then(|| k.clone()))
            .collect();
        let column = text_array(values, layout);
        let field = Field::new("s", column.data_type().clone(), true);
        let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![column]).unwrap();
        let delta = |p: Builder| p.set_encoding(Encoding::DELTA_BYTE_ARRAY);
        write_file(rng, &dir.join(format!("part-{f}.parquet")), &batch, delta);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Keys in order are counted side by side in the first pass, with no
    /// table and no verification; files each in order whose ranges overlap
    /// are kept in stretches and merged, from memory or written to disk
    /// past the test hook's most keys. Stretches given up at any point (no
    /// disk to write to), or never kept, leave the tables or the
    /// fingerprints to count them. Every way gives the grouped verdict,
    /// samples included.
    #[test]
    fn text_keys_in_order_are_counted_side_by_side(seed in any::<u64>(), layout in 0..3u8, overlapping: bool) {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("k.dq"), RULES).unwrap();
        let mut rng = Rng(seed);
        write_sorted(&mut rng, &tmp.path().join("staged"), layout, overlapping);
        let files = fs::read_dir(tmp.path().join("staged")).unwrap().count();
        let (grouped, _) = check(tmp.path(), &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
        let most = (500 + rng.below(1000)).to_string();
        for bits in [None, Some("6")] {
            let mut env = vec![
                ("DQGATE_TEST_KEY_STRATEGY", "fingerprint"),
                ("DQGATE_TEST_KEEP_BYTES", "0"),
                ("DQGATE_TEST_EXACT_VALUES", "0"),
            ];
            env.extend(bits.map(|b| ("DQGATE_TEST_FINGERPRINT_BITS", b)));
            // Files whose footers say they are in order are counted in
            // order alone first.
            let (got, stderr) = check(tmp.path(), &env, None);
            let footers = stderr.contains("as the footers' ranges said (nothing else kept)");
            prop_assert!(!footers || !overlapping || files == 1, "{}", stderr);
            prop_assert!(got == grouped, "footers, bits {:?}:\n{}\n---\n{}", bits, got, grouped);
            // The rest keep their tables, fingerprints and stretches all
            // along.
            env.push(("DQGATE_TEST_FOOTER_ORDER", "0"));
            let (got, stderr) = check(tmp.path(), &env, None);
            prop_assert!(!stderr.contains("footers' ranges"), "{}", stderr);
            let side_by_side = stderr.contains("the values in order: counted side by side");
            prop_assert!(side_by_side == (!overlapping || files == 1), "{}", stderr);
            let merged = stderr.contains("merge the stretches in order");
            prop_assert!(merged == (overlapping && files > 1), "{}", stderr);
            prop_assert!(got == grouped, "bits {:?}:\n{}\n---\n{}", bits, got, grouped);
            // Stretches written to disk past the test hook's most keys
            // in memory, and merged from there.
            let mut spilled = env.clone();
            spilled.push(("DQGATE_TEST_SORTED_KEYS", most.as_str()));
            let (got, stderr) = check(tmp.path(), &spilled, None);
            prop_assert!(merged == stderr.contains("merge the stretches in order"), "{}", stderr);
            prop_assert!(!merged || stderr.contains("written to disk"), "{}", stderr);
            prop_assert!(got == grouped, "to disk, bits {:?}:\n{}\n---\n{}", bits, got, grouped);
            // Given up full (no disk to write to), with the tables off and
            // on, or never kept.
            let nowhere = tmp.path().join("no-such-directory");
            let nowhere = nowhere.to_str().unwrap();
            for (sorted, tables) in [(most.as_str(), "0"), (most.as_str(), "1000000"), ("0", "0")] {
                let mut env = env.clone();
                env.extend([("DQGATE_TEST_SORTED_KEYS", sorted), ("TMPDIR", nowhere)]);
                env[2].1 = tables;
                let (got, stderr) = check(tmp.path(), &env, None);
                prop_assert!(!stderr.contains("merge the stretches"), "{}", stderr);
                prop_assert!(got == grouped, "sorted {} tables {} bits {:?}:\n{}\n---\n{}", sorted, tables, bits, got, grouped);
            }
        }
    }
}

/// `values` written as one file of row groups of `group` rows, with
/// statistics (a text column, pages of 1,000 rows).
fn write_groups(dir: &Path, values: Vec<Option<String>>, group: usize) {
    write_named(dir, "part-0.parquet", values, group);
}

/// [`write_groups`] to the file `name`.
fn write_named(dir: &Path, name: &str, values: Vec<Option<String>>, group: usize) {
    fs::create_dir_all(dir).unwrap();
    let column: ArrayRef = Arc::new(StringArray::from(values));
    let field = Field::new("s", DataType::Utf8, true);
    let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![column]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group))
        .set_data_page_row_count_limit(1_000)
        .set_write_batch_size(100)
        .build();
    let file = fs::File::create(dir.join(name)).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Sorted files whose ranges follow one another, listed out of their
/// order (`data_10` before `data_2`, as a sorted export of many files is
/// named): their row groups are read in the order of their ranges, and
/// counted in order alone, a key at the end of one file and the start of
/// the next counted once. Their ranges overlapping, they are not.
#[test]
fn sorted_files_listed_out_of_their_order_are_counted_in_order() {
    // Each file's first key this many below the one before's last plus one.
    for overlap in [0, 1, 2] {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("k.dq"), RULES).unwrap();
        let staged = tmp.path().join("staged");
        for f in 0..12u64 {
            let first = (f * 1_000).saturating_sub(overlap);
            let values =
                (first..(f + 1) * 1_000).map(|k| Some(format!("key-{k:06}-of-some-width")));
            let mut values: Vec<Option<String>> = values.collect();
            values.push(values[3].clone());
            values.sort();
            write_named(&staged, &format!("data_{f}.parquet"), values, 400);
        }
        let ((got, counted, again, _), grouped) = in_order_check(tmp.path(), None);
        assert_eq!(
            (counted, again),
            (overlap < 2, false),
            "overlapping: {overlap}"
        );
        assert_eq!(got, grouped);
    }
}

/// The fingerprint strategy's run of `k.dq` over `dir`'s staged files,
/// the key columns not kept (`limit`: a memory limit): (its verdict,
/// whether the first pass counted the values in order as the footers
/// said, whether it had to read them again, and then whether it tabled
/// each row group on its own), beside the grouped verdict.
fn in_order_check(dir: &Path, limit: Option<&str>) -> ((String, bool, bool, bool), String) {
    let (grouped, _) = check(dir, &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
    let (got, stderr) = check(dir, &paged_env(None), limit);
    let counted = stderr.contains("as the footers' ranges said (nothing else kept)");
    let again = stderr.contains("as the footers' ranges said, until one came out of order");
    let tabled = stderr.contains("each row group's values tabled on their own");
    ((got, counted, again, tabled), grouped)
}

/// Keys of `groups` row groups of `rows` rows each holding a range of
/// keys out of order (a range-partitioned write, not sorted within), with
/// nulls (`nulls` in 1,000): the keys sorted, then shuffled within each
/// row group, so that the ranges follow one another and may share a key
/// at their ends.
fn ranges(
    rng: &mut Rng,
    groups: usize,
    rows: usize,
    distinct: u64,
    nulls: u64,
) -> Vec<Option<String>> {
    clusters(rng, &vec![1; groups], rows, distinct, nulls)
}

/// [`ranges`] with the rows of each cluster of row groups (`sizes`: how
/// many row groups each) shuffled together, so that the ranges of a
/// cluster's row groups meet.
fn clusters(
    rng: &mut Rng,
    sizes: &[usize],
    rows: usize,
    distinct: u64,
    nulls: u64,
) -> Vec<Option<String>> {
    let groups: usize = sizes.iter().sum();
    let mut keys: Vec<String> = (0..groups * rows)
        .map(|_| value(rng.below(distinct)))
        .collect();
    keys.sort_unstable();
    let mut values: Vec<Option<String>> = Vec::with_capacity(keys.len());
    let mut at = 0;
    for n in sizes {
        let chunk = &mut keys[at..at + n * rows];
        at += n * rows;
        for i in (1..chunk.len()).rev() {
            chunk.swap(i, rng.below(i as u64 + 1) as usize);
        }
        values.extend(
            chunk
                .iter()
                .map(|k| (rng.below(1000) >= nulls).then(|| k.clone())),
        );
    }
    values
}

/// Row groups whose ranges follow one another, each holding its range's
/// keys out of order: the footers say the values are in order, the first
/// value out of order ends that count, and each row group's values are
/// tabled on their own and counted as the runs in order are. Under a
/// memory limit too small for a row group's table, the whole pass reads
/// them again instead.
#[test]
fn row_groups_of_key_ranges_out_of_order_are_tabled_each_on_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("k.dq"), RULES).unwrap();
    let values = ranges(&mut Rng(7), 4, 40_000, 100_000, 20);
    write_groups(&tmp.path().join("staged"), values, 40_000);
    let ((got, counted, again, tabled), grouped) = in_order_check(tmp.path(), None);
    assert!(
        !counted && again && tabled,
        "the first pass met values out of order"
    );
    assert_eq!(got, grouped);
    assert!(got.contains("\"status\": \"fail\""), "{got}");
    let ((got, _, again, tabled), _) = in_order_check(tmp.path(), Some("64KiB"));
    assert!(again && !tabled, "no room for a row group's table");
    assert_eq!(got, grouped);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Row groups of key ranges out of order within, of random text and
    /// row group sizes, with nulls, keys shared at the ranges' ends, some
    /// meeting in clusters, with whole and colliding fingerprints: each
    /// (cluster) tabled on its own, they give the grouped verdict, samples
    /// included.
    #[test]
    fn row_groups_of_key_ranges_give_the_grouped_verdict(seed in any::<u64>()) {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("k.dq"), RULES).unwrap();
        let mut rng = Rng(seed);
        let rows = 500 + rng.below(5_000) as usize;
        let distinct = 50 + rng.below(20_000);
        let nulls = rng.below(3) * 50;
        // Row groups apart, or meeting in clusters of two (the clusters'
        // ranges apart).
        let sizes: Vec<usize> = match rng.below(2) {
            0 => vec![1; 2 + rng.below(6) as usize],
            _ => (0..3 + rng.below(4)).map(|_| 1 + rng.below(2) as usize).collect(),
        };
        let values = clusters(&mut rng, &sizes, rows, distinct, nulls);
        write_groups(&tmp.path().join("staged"), values, rows);
        let (grouped, _) = check(tmp.path(), &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
        for bits in [None, Some("6")] {
            let env = paged_env(bits);
            let (got, stderr) = check(tmp.path(), &env, None);
            let tabled = stderr.contains("each row group's values tabled on their own");
            let counted = stderr.contains("as the footers' ranges said (nothing else kept)");
            prop_assert!(tabled || counted, "{}", stderr);
            prop_assert!(got == grouped, "bits {:?}:\n{}\n---\n{}", bits, got, grouped);
        }
    }
}

/// Sorted keys after a row group of nulls alone, each read by a run of
/// its own: the nulls are one repeated key with nulls not distinct, and
/// are counted though their run met no value (they were lost before).
#[test]
fn sorted_keys_after_a_row_group_of_nulls_count_the_nulls() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("k.dq"), RULES).unwrap();
    let mut values: Vec<Option<String>> = vec![None; 20_000];
    values.extend((0..20_000).map(|i| Some(format!("customer-{:08}@example-mail.com", i / 2))));
    write_groups(&tmp.path().join("staged"), values, 20_000);
    let ((got, counted, again, _), grouped) = in_order_check(tmp.path(), None);
    assert!(counted && !again, "the footers say the values are in order");
    assert_eq!(got, grouped);
    let verdict: serde_json::Value = serde_json::from_str(&got).unwrap();
    let values: Vec<u64> = (verdict["checks"].as_array().unwrap().iter())
        .map(|c| c["value"].as_u64().unwrap())
        .collect();
    // unique(s), the nulls' key besides, and the distinct keys.
    assert_eq!(values, vec![10_000, 10_001, 10_000]);
}

/// A run that gives its table of exact values up pushes what it tabled as
/// fingerprints, its null rows included: here all of them come before the
/// point where it gives up (one row group, one run), and with nulls equal
/// they are a repeated key the verdict counts.
#[test]
fn a_table_given_up_counts_the_null_rows_it_held() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("k.dq"), RULES).unwrap();
    let staged = tmp.path().join("staged");
    fs::create_dir_all(&staged).unwrap();
    let mut values: Vec<Option<String>> = vec![None, None, None, Some("a".into())];
    values.extend((0..5_000).map(|i| Some(format!("v{i}"))));
    values.push(Some("a".into()));
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)])),
        vec![text_array(values, 0)],
    )
    .unwrap();
    let file = fs::File::create(staged.join("part-0.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let (grouped, _) = check(tmp.path(), &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
    let env = [
        ("DQGATE_TEST_KEY_STRATEGY", "fingerprint"),
        ("DQGATE_TEST_KEEP_BYTES", "0"),
        ("DQGATE_TEST_EXACT_VALUES", "10"),
        ("DQGATE_TEST_FOOTER_ORDER", "0"),
    ];
    let (got, stderr) = check(tmp.path(), &env, None);
    assert!(stderr.contains("giving up their table"), "{stderr}");
    assert_eq!(got, grouped);
    assert!(
        grouped.contains("\"value\": 2"),
        "the nulls and `a` repeat: {grouped}"
    );
}

const COMPOSITE_RULES: &str = "table t
check unique(s, n)
check duplicate_count(n, s, u) nulls not distinct = 0
check primary_key(u, s)
";

/// Composite keys of text and integer parts (`s` text, `n` a 32- or 64-bit
/// integer, `u` text), each part with nulls, few enough distinct values
/// that keys repeat, written as [`write`] writes its files. `Sparse`:
/// nearly every `s` and `n` distinct instead, and about one row in 300 a
/// copy of an earlier row of its file (its nulls too), as a retried load
/// repeats a few rows.
fn write_composite(rng: &mut Rng, dir: &Path, (layout, wide): (u8, bool), sparse: bool) {
    use datafusion::arrow::array::{Int32Array, Int64Array};
    use datafusion::parquet::schema::types::ColumnPath;
    fs::create_dir_all(dir).unwrap();
    let files = 1 + rng.below(3);
    let (ds, dn) = match sparse {
        false => (50 + rng.below(400), 2 + rng.below(60)),
        true => (1 << 40, 1 << 24),
    };
    let nulls = rng.below(3) * 30;
    for f in 0..files {
        let n = 20_000 + rng.below(20_000) as usize;
        let text = |rng: &mut Rng, d: u64| -> Vec<Option<String>> {
            (0..n)
                .map(|_| {
                    (rng.below(1000) >= nulls).then(|| match (sparse, rng.below(d)) {
                        (true, v) if d > 3 => format!("{}{v}", value(v)),
                        (_, v) => value(v),
                    })
                })
                .collect()
        };
        let (mut s, mut u) = (text(rng, ds), text(rng, 3));
        let mut ints: Vec<Option<i64>> = (0..n)
            .map(|_| (rng.below(1000) >= nulls).then(|| rng.below(dn) as i64 * -7_777_777))
            .collect();
        for i in 1..n {
            if sparse && rng.below(300) == 0 {
                let j = rng.below(i as u64) as usize;
                (s[i], u[i], ints[i]) = (s[j].clone(), u[j].clone(), ints[j]);
            }
        }
        let (int_type, int_column): (DataType, ArrayRef) = match wide {
            true => (DataType::Int64, Arc::new(Int64Array::from(ints))),
            false => {
                let narrow = ints.iter().map(|v| v.map(|x| (x >> 8) as i32));
                (DataType::Int32, Arc::new(narrow.collect::<Int32Array>()))
            }
        };
        // `u` is plain text whatever `s` is.
        let (s, u) = (text_array(s, layout), text_array(u, 0));
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", s.data_type().clone(), true),
            Field::new("n", int_type, true),
            Field::new("u", u.data_type().clone(), true),
        ]));
        let delta = |p: Builder| {
            p.set_column_encoding(ColumnPath::from("s"), Encoding::DELTA_BYTE_ARRAY)
                .set_column_encoding(ColumnPath::from("n"), Encoding::DELTA_BINARY_PACKED)
        };
        let columns = vec![s, int_column, u];
        let batch = RecordBatch::try_new(schema, columns).unwrap();
        write_file(rng, &dir.join(format!("part-{f}.parquet")), &batch, delta);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Composite keys with text and integer parts, fingerprinted page by
    /// page (a column at a time, rows matched by position; nothing kept,
    /// as for large partitions) and verified from their batches, give the
    /// grouped verdict, samples included.
    #[test]
    fn composite_keys_read_page_by_page_give_the_grouped_verdict(
        seed in any::<u64>(),
        layout in 0..3u8,
        wide: bool,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("k.dq"), COMPOSITE_RULES).unwrap();
        write_composite(&mut Rng(seed), &tmp.path().join("staged"), (layout, wide), false);
        let (grouped, _) = check(tmp.path(), &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
        // Most rows are a candidate's, so every row is read again into
        // bins, unless bins are off (`DQGATE_TEST_BIN_ROWS=0`): then the
        // candidates' rows are verified by round.
        for (bits, bins) in [(None, None), (Some("6"), None), (Some("6"), Some("0"))] {
            let mut env = paged_env(bits);
            env.extend(bins.map(|b| ("DQGATE_TEST_BIN_ROWS", b)));
            let (got, stderr) = check(tmp.path(), &env, None);
            prop_assert!(stderr.contains("scan (page by page)"), "{}", stderr);
            prop_assert!(got == grouped, "bits {:?} bins {:?}:\n{}\n---\n{}", bits, bins, got, grouped);
            // Cut to 6 bits, every row is a candidate's.
            if bits.is_some() {
                let again = stderr.contains("read every row again, binning");
                prop_assert!(again == bins.is_none(), "{}", stderr);
                if bins.is_some() {
                    continue;
                }
            }
            // Kept in memory instead.
            let kept: Vec<_> = (env.iter().copied())
                .filter(|(k, _)| *k != "DQGATE_TEST_KEEP_BYTES")
                .collect();
            let (got, stderr) = check(tmp.path(), &kept, None);
            prop_assert!(stderr.contains("the scan kept"), "{}", stderr);
            prop_assert!(got == grouped, "kept, bits {:?}:\n{}\n---\n{}", bits, got, grouped);
        }
        // Every row read again into bins that fill with nowhere to write:
        // the candidates were dropped while the bins filled, so the count
        // runs again, and verifies by round.
        let nowhere = tmp.path().join("no-such-dir");
        let nowhere = nowhere.to_str().unwrap();
        let mut env = paged_env(Some("6"));
        env.extend([("DQGATE_TEST_BIN_BYTES", "65536"), ("TMPDIR", nowhere)]);
        let (got, stderr) = check(tmp.path(), &env, None);
        prop_assert!(stderr.contains("nowhere to write: count again"), "{}", stderr);
        prop_assert!(got == grouped, "bins that did not fit:\n{}\n---\n{}", got, grouped);
        // More candidates than the count keeps (a memory limit's worth):
        // it keeps none, and every row is read again into bins, however
        // few of them repeat; or, with no room for bins, counted again to
        // verify by round.
        let binned = "more than the count keeps: read every row again, binning";
        let again = "and no bins: count again";
        for (way, bin_bytes, said) in [("binned", None, binned), ("no bins", Some("1"), again)] {
            let mut env = paged_env(None);
            env.push(("DQGATE_TEST_MOST_CANDIDATES", "3"));
            env.extend(bin_bytes.map(|b| ("DQGATE_TEST_BIN_BYTES", b)));
            let (got, stderr) = check(tmp.path(), &env, None);
            prop_assert!(got == grouped, "{}:\n{}\n---\n{}", way, got, grouped);
            prop_assert!(stderr.contains(said), "{}: {}", way, stderr);
        }
        // Keys binned from the first row group on, or from a later one
        // (those before read again at the end); in bins that spill to
        // disk; and in bins that fill with nowhere to write, given up to
        // the fingerprints.
        let cases: [(&str, &[(&str, &str)]); 4] = [
            ("1", &[]),
            ("3000", &[]),
            ("1", &[("DQGATE_TEST_BIN_BYTES", "65536")]),
            ("3000", &[("DQGATE_TEST_BIN_BYTES", "65536"), ("TMPDIR", nowhere)]),
        ];
        for (from, more) in cases {
            let mut env = paged_env(None);
            env.push(("DQGATE_TEST_BIN_ROWS", from));
            env.extend_from_slice(more);
            let (got, stderr) = check(tmp.path(), &env, None);
            prop_assert!(got == grouped, "binned from {} {:?}:\n{}\n---\n{}", from, more, got, grouped);
            if from == "1" && more.is_empty() {
                prop_assert!(stderr.contains("binning the exact keys"), "{}", stderr);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    /// Composite keys that repeat in a few rows are verified by reading
    /// only those rows, where the first pass placed them, less those told
    /// apart by their hashes' other bits: the verdict, samples included,
    /// is the grouped pass's and the one of reading every row again, with
    /// whole fingerprints, with fingerprints cut so that many collide, and
    /// under a memory limit that spills the scan.
    #[test]
    fn composite_keys_repeated_in_few_rows_are_read_where_the_scan_placed_them(
        seed in any::<u64>(),
        layout in 0..3u8,
        wide: bool,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("k.dq"), COMPOSITE_RULES).unwrap();
        write_composite(&mut Rng(seed), &tmp.path().join("staged"), (layout, wide), true);
        let (grouped, _) = check(tmp.path(), &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
        for (bits, limit) in [(None, None), (Some("22"), None), (None, Some("2MiB"))] {
            let env = paged_env(bits);
            let (got, stderr) = check(tmp.path(), &env, limit);
            prop_assert!(got == grouped, "bits {:?} {:?}:\n{}\n---\n{}", bits, limit, got, grouped);
            if limit.is_none() {
                let read = stderr.contains("read where the scan placed them")
                    || stderr.contains("every candidate row was told apart");
                prop_assert!(read, "{}", stderr);
            }
            // Cut to 22 bits, fingerprints of different keys meet, and
            // their rows are told apart by their hashes' other bits.
            if bits.is_some() {
                prop_assert!(!stderr.contains(", 0 told apart by"), "{}", stderr);
            }
        }
        let mut env = paged_env(None);
        env.push(("DQGATE_TEST_PLACES", "0"));
        let (got, stderr) = check(tmp.path(), &env, None);
        prop_assert!(stderr.contains("the key columns read again"), "{}", stderr);
        prop_assert!(got == grouped, "not placed:\n{}\n---\n{}", got, grouped);
    }
}

/// Row groups that repeat one dictionary page byte for byte (as pyarrow
/// writes an Arrow dictionary into every group): each group starts with
/// the same distinct values in the same order, so the writer's
/// dictionaries are the same bytes. The pages after the first are skipped
/// in both passes of a single key, and in the scan of a composite, and
/// `-v` says so; the verdicts, samples included, are the grouped pass's.
#[test]
fn a_repeated_dictionary_page_is_parsed_once_a_run() {
    use datafusion::arrow::array::Int32Array;
    let (groups, distinct, extra) = (5, 3_000u64, 2_000u64);
    let mut rng = Rng(7);
    let mut s = Vec::new();
    for _ in 0..groups {
        s.extend((0..distinct).map(|v| Some(value(v))));
        s.extend((0..extra).map(|_| (rng.below(10) > 0).then(|| value(rng.below(distinct)))));
    }
    let n: Vec<Option<i32>> = (0..s.len()).map(|i| Some((i % 3) as i32)).collect();
    for layout in [0, 2] {
        let tmp = tempfile::tempdir().unwrap();
        let staged = tmp.path().join("staged");
        fs::create_dir_all(&staged).unwrap();
        let column = text_array(s.clone(), layout);
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", column.data_type().clone(), true),
            Field::new("n", DataType::Int32, true),
        ]));
        let columns: Vec<ArrayRef> = vec![column, Arc::new(Int32Array::from(n.clone()))];
        let batch = RecordBatch::try_new(schema, columns).unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_page_size_limit(1 << 20)
            .set_max_row_group_row_count(Some((distinct + extra) as usize))
            .set_compression(Compression::SNAPPY)
            .build();
        let file = fs::File::create(staged.join("part-0.parquet")).unwrap();
        let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        // As many as the groups, less one a run (the runs depend on the
        // machine's threads).
        let skipped = "dictionary page(s) that repeat the last one parsed";
        for rules in [RULES, "table t\ncheck unique(s, n)\n"] {
            fs::write(tmp.path().join("k.dq"), rules).unwrap();
            let (grouped, _) = check(tmp.path(), &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
            let env = [
                ("DQGATE_TEST_KEY_STRATEGY", "fingerprint"),
                ("DQGATE_TEST_KEEP_BYTES", "0"),
                ("DQGATE_TEST_EXACT_VALUES", "0"),
            ];
            let (got, stderr) = check(tmp.path(), &env, None);
            assert_eq!(got, grouped, "layout {layout}, {rules}");
            let scan = "scan (page by page), skipping ";
            assert!(
                stderr.contains(scan) && stderr.contains(skipped),
                "layout {layout}, {rules}: {stderr}"
            );
            if rules == RULES {
                let verify = "read again page by page, skipping ";
                assert!(stderr.contains(verify), "layout {layout}: {stderr}");
            }
        }
    }
}
