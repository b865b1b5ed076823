//! `unique(...) across published` on text keys that pack into no word, on
//! the key engine's fingerprinted join, against DataFusion's grouped semi
//! join: random alphabets and lengths (the empty string and multi-byte
//! UTF-8 included), nulls, the four Arrow layouts of text, composites with
//! an integer part, and fingerprints cut to a few bits so that nearly every
//! key collides. Verdicts are byte-identical, samples included.

use std::fs::{self, File};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, DictionaryArray, Int32Array, LargeStringArray, RecordBatch, StringArray,
    StringViewArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Encoding;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
use datafusion::parquet::schema::types::ColumnPath;

use super::oracle::splitmix::Rng;
use crate::support::{check_across, check_across_with, publish_into};

/// Alphabets of the keys: base64 ids, business codes, e-mail-like text,
/// and multi-byte UTF-8.
const ALPHABETS: [&str; 4] = [
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "0123456789-_.#",
    "abcdefghij@.",
    "éß漢字🙂aZ",
];

/// A pool of distinct-ish keys: random alphabet and length (0 to 40
/// characters), so no column packs into a word.
pub(super) fn pool(rng: &mut Rng, n: usize) -> Vec<String> {
    let mut keys = vec![String::new(), "x".repeat(40)];
    while keys.len() < n {
        let alphabet: Vec<char> = ALPHABETS[rng.below(4) as usize].chars().collect();
        let len = rng.below(41) as usize;
        keys.push(
            (0..len)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect(),
        );
    }
    keys
}

/// One to three files of fewer than `most` rows each, of keys from
/// `keys[from..from + span]`, in `layout` (0 string, 1 large string, 2
/// dictionary, 3 string view), with nulls.
pub(super) fn write(
    rng: &mut Rng,
    dir: &Path,
    keys: &[String],
    (from, span, most): (usize, usize, u64),
    layout: u64,
) {
    fs::create_dir_all(dir).unwrap();
    let text = match layout {
        0 => DataType::Utf8,
        1 => DataType::LargeUtf8,
        2 => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        _ => DataType::Utf8View,
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", text, true),
        Field::new("n", DataType::Int32, true),
    ]));
    for f in 0..1 + rng.below(3) {
        let rows = rng.below(most) as usize;
        let mut s: Vec<Option<&str>> = Vec::new();
        let mut n = Vec::new();
        for _ in 0..rows {
            let k = from + rng.below(span as u64) as usize;
            s.push((rng.below(12) != 0).then(|| keys[k].as_str()));
            n.push((rng.below(12) != 0).then_some((k % 3) as i32));
        }
        let s: ArrayRef = match layout {
            0 => Arc::new(StringArray::from(s)),
            1 => Arc::new(LargeStringArray::from(s)),
            2 => Arc::new(s.into_iter().collect::<DictionaryArray<Int32Type>>()),
            _ => Arc::new(StringViewArray::from(s)),
        };
        let batch =
            RecordBatch::try_new(schema.clone(), vec![s, Arc::new(Int32Array::from(n))]).unwrap();
        let stats = match rng.below(3) {
            0 => EnabledStatistics::None,
            1 => EnabledStatistics::Chunk,
            _ => EnabledStatistics::Page,
        };
        let group = 8 + rng.below(60) as usize;
        let mut props = WriterProperties::builder()
            .set_statistics_enabled(stats)
            .set_max_row_group_row_count(Some(group))
            .set_data_page_row_count_limit(4 + rng.below(20) as usize);
        // A third of the files' text in pages the key engine's page walker
        // leaves to the Arrow reader, a third without a dictionary.
        let s = ColumnPath::from("s");
        match rng.below(3) {
            0 => {
                props = props
                    .set_column_dictionary_enabled(s.clone(), false)
                    .set_column_encoding(s, Encoding::DELTA_BYTE_ARRAY)
            }
            1 => props = props.set_column_dictionary_enabled(s, false),
            _ => {}
        }
        let props = props.build();
        let file = File::create(dir.join(format!("part-{f}.parquet"))).unwrap();
        let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
        // A row group at a time: the writer splits a larger batch by
        // calling itself, a frame a group.
        for at in (0..rows).step_by(group) {
            w.write(&batch.slice(at, group.min(rows - at))).unwrap();
        }
        w.close().unwrap();
    }
}

/// Writes `rules.dq` in `cwd`.
pub(super) fn rules(cwd: &Path, text: &str) {
    fs::write(cwd.join("rules.dq"), text).unwrap();
}

#[test]
fn text_keys_across_published_give_the_grouped_verdict() {
    for seed in [11u64, 12, 13, 14, 15, 16] {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path();
        let mut rng = Rng(seed);
        let keys = pool(&mut rng, 400);
        rules(cwd, "table t\npartitioned by day\ncheck row_count >= 0\n");
        for day in 1..=3usize {
            let dir = cwd.join(format!("s{day}"));
            let layout = rng.below(4);
            write(&mut rng, &dir, &keys, ((day - 1) * 80, 200, 160), layout);
            publish_into(cwd, "rules.dq", &dir, &format!("day={day}"));
        }
        rules(
            cwd,
            "table t\npartitioned by day\n\
             check unique(s) across published\n\
             check unique(s, n) across published\n\
             check unique(n, s) across published\n",
        );
        let staged = cwd.join("new");
        let layout = rng.below(4);
        write(&mut rng, &staged, &keys, (120, 200, 160), layout);
        for day in ["2", "9"] {
            let (grouped, _) = check_across(cwd, &staged, day, Some("grouped"));
            assert!(
                grouped.contains("\"partition\""),
                "some keys clash:\n{grouped}"
            );
            let (engine, log) = check_across(cwd, &staged, day, None);
            assert_eq!(engine, grouped, "seed {seed}, day {day}");
            assert!(
                log.contains("64-bit fingerprints, keys compared as bytes"),
                "the fingerprinted join ran:\n{log}"
            );
            // Three bits of fingerprint: eight fingerprints for every key.
            let bits = [("DQGATE_TEST_FINGERPRINT_BITS", "3")];
            let (collided, _) = check_across_with(cwd, &staged, day, &bits, &[]);
            assert_eq!(collided, grouped, "seed {seed}, day {day}, colliding");
            // A staged side too large for the in-place table is spread
            // into radix partitions (forced on these small files).
            let spread = ("DQGATE_TEST_PROBE_ROWS", "0");
            let (got, log) = check_across_with(cwd, &staged, day, &[spread], &[]);
            assert_eq!(got, grouped, "seed {seed}, day {day}, spread");
            assert!(log.contains("radix partitions:"), "spread:\n{log}");
            let (got, _) = check_across_with(cwd, &staged, day, &[spread, bits[0]], &[]);
            assert_eq!(got, grouped, "seed {seed}, day {day}, spread and colliding");
            // The partitions written to disk past 256 bytes and read back.
            let spill = ("DQGATE_TEST_SPREAD_BYTES", "256");
            for env in [&[spread, spill][..], &[spread, spill, bits[0]]] {
                let (got, log) = check_across_with(cwd, &staged, day, env, &[]);
                assert_eq!(got, grouped, "seed {seed}, day {day}, spilled, {env:?}");
                assert!(log.contains("MB written to disk) into"), "spilled:\n{log}");
            }
        }
    }
}

/// Under a memory limit that the staged keys' in-place table does not fit,
/// the keys are spread into radix partitions (which need less here than
/// DataFusion's semi-join: at 2 MiB neither fits), with the same verdict.
#[test]
fn a_table_the_pool_refuses_is_spread() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let mut rng = Rng(21);
    let keys = pool(&mut rng, 100_000);
    rules(cwd, "table t\npartitioned by day\ncheck row_count >= 0\n");
    let dir = cwd.join("s1");
    write(&mut rng, &dir, &keys, (0, 100_000, 40_000), 0);
    publish_into(cwd, "rules.dq", &dir, "day=1");
    rules(
        cwd,
        "table t\npartitioned by day\ncheck unique(s) across published\n",
    );
    let staged = cwd.join("new");
    write(&mut rng, &staged, &keys, (0, 100_000, 40_000), 0);
    let (grouped, _) = check_across(cwd, &staged, "2", Some("grouped"));
    assert!(grouped.contains("\"partition\""), "keys clash:\n{grouped}");
    let (_, unlimited) = check_across(cwd, &staged, "2", None);
    assert!(
        unlimited.contains("64-bit fingerprints"),
        "without a limit the engine joins:\n{unlimited}"
    );
    let limit = ["--memory-limit", "4MiB"];
    let (limited, log) = check_across_with(cwd, &staged, "2", &[], &limit);
    assert!(
        log.contains("radix partitions:") && !log.contains("filter of the"),
        "the join was spread:\n{log}"
    );
    assert_eq!(limited, grouped);
}
