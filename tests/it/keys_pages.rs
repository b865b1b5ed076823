//! A single text key hashed from its Parquet pages (the fingerprint
//! strategy's scan and verification when the key column is not kept in
//! memory, here under a small `--memory-limit`) against the grouped pass:
//! random text of every width (empty strings, multi-byte UTF-8, long
//! values), nulls in both null modes, written as v1 and v2 pages, with
//! dictionaries that give way to plain pages, with delta encodings (read
//! by the Arrow reader instead), compressed or not, as `Utf8` and
//! `LargeUtf8`, in several files and row groups. The verdict, samples
//! included, is byte-identical, with whole and with colliding
//! fingerprints, and `-v` says the pages were read.

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

fn write(rng: &mut Rng, dir: &Path, large: bool) {
    fs::create_dir_all(dir).unwrap();
    let files = 1 + rng.below(3);
    let distinct = 2_000 + rng.below(20_000);
    let nulls = rng.below(3) * 50;
    for f in 0..files {
        let n = 25_000 + rng.below(20_000) as usize;
        let values: Vec<Option<String>> = (0..n)
            .map(|_| (rng.below(1000) >= nulls).then(|| value(rng.below(distinct))))
            .collect();
        let (field, column): (DataType, ArrayRef) = match large {
            true => (
                DataType::LargeUtf8,
                Arc::new(LargeStringArray::from(values)),
            ),
            false => (DataType::Utf8, Arc::new(StringArray::from(values))),
        };
        let schema = Arc::new(Schema::new(vec![Field::new("s", field, true)]));
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
            0 => {
                props = props
                    .set_dictionary_enabled(false)
                    .set_encoding(Encoding::DELTA_BYTE_ARRAY)
            }
            1 => props = props.set_dictionary_enabled(false),
            _ => {}
        }
        let file = fs::File::create(dir.join(format!("part-{f}.parquet"))).unwrap();
        let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
        let mut w = ArrowWriter::try_new(file, schema, Some(props.build())).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }
}

/// `dqgate check -v` with `env`: (JSON verdict, stderr).
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
    fn text_keys_read_page_by_page_give_the_grouped_verdict(seed in any::<u64>(), large: bool) {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("k.dq"), RULES).unwrap();
        write(&mut Rng(seed), &tmp.path().join("staged"), large);
        let (grouped, _) = check(tmp.path(), &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], None);
        for bits in [None, Some("6")] {
            let mut env = vec![("DQGATE_TEST_KEY_STRATEGY", "fingerprint")];
            env.extend(bits.map(|b| ("DQGATE_TEST_FINGERPRINT_BITS", b)));
            let (got, stderr) = check(tmp.path(), &env, Some("512KiB"));
            prop_assert!(stderr.contains("scan (page by page)"), "{}", stderr);
            prop_assert!(got == grouped, "bits {:?}:\n{}\n---\n{}", bits, got, grouped);
        }
    }
}
