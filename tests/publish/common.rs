//! Test fixtures: staged partitions of real Parquet files, hand-made passing
//! verdicts, and readers that check what a table shows.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use datafusion::arrow::array::{Array, Int64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use dqgate::publish::{PublishOptions, PublishOutcome, Table};
use dqgate::runkey::RunKey;
use dqgate::staged::{fingerprint_dir, list_parquet_files};
use dqgate::verdict::{InputFile, InputSummary, PassedVerdict, Verdict};

/// A table root and a staging area side by side in one temp dir.
pub struct Env {
    pub tmp: tempfile::TempDir,
    pub table: Table,
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let table = Table::open(&tmp.path().join("table")).unwrap();
        Env { tmp, table }
    }

    pub fn root(&self) -> &Path {
        &self.table.root
    }

    /// A staged directory holding `files` files whose rows all carry
    /// `version`.
    pub fn stage(&self, name: &str, version: i64, files: usize) -> PathBuf {
        let dir = self.tmp.path().join("staging").join(name);
        stage_into(&dir, version, files);
        dir
    }

    /// Stages version `v` and publishes it against whatever is current.
    pub fn publish_version(&self, key: &RunKey, v: i64, opts: &PublishOptions) -> PublishOutcome {
        let staged = self.stage(&format!("s{v}"), v, 2);
        let passed = passed(&staged);
        let cur = self.table.current(key).unwrap().map(|c| c.fingerprint);
        self.table
            .publish(key, &staged, &passed, cur.as_deref(), opts)
            .unwrap()
    }
}

pub fn stage_into(dir: &Path, version: i64, files: usize) {
    fs::create_dir_all(dir).unwrap();
    for i in 0..files {
        write_parquet(&dir.join(format!("part-{i:05}.parquet")), version, 10 + i);
    }
}

/// One Parquet file: `rows` rows of (`version`, `id`).
pub fn write_parquet(path: &Path, version: i64, rows: usize) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("version", DataType::Int64, false),
        Field::new("id", DataType::Int64, false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![version; rows])),
            Arc::new(Int64Array::from_iter_values(0..rows as i64)),
        ],
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(File::create(path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// The distinct `version` values in a Parquet file.
pub fn versions_in(path: &Path) -> std::io::Result<BTreeSet<i64>> {
    let file = File::open(path)?;
    read_versions(file).map_err(std::io::Error::other)
}

pub fn read_versions(file: File) -> Result<BTreeSet<i64>, String> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| e.to_string())?;
    let mut out = BTreeSet::new();
    for batch in reader {
        let batch = batch.map_err(|e| e.to_string())?;
        let col = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        for i in 0..col.len() {
            out.insert(col.value(i));
        }
    }
    Ok(out)
}

/// A passing verdict over `staged` as it is now (what the audit would give).
pub fn passed(staged: &Path) -> PassedVerdict {
    let files = list_parquet_files(staged).unwrap();
    let verdict = Verdict {
        table: "t".into(),
        partition: vec![("d".into(), "1".into())],
        rules_path: "rules.dq".into(),
        rules_sha256: "0".repeat(64),
        input: InputSummary {
            row_count: 0,
            files: files
                .iter()
                .map(|(rel, abs)| InputFile {
                    path: rel.clone(),
                    bytes: fs::metadata(abs).unwrap().len(),
                })
                .collect(),
            fingerprint: fingerprint_dir(staged).unwrap(),
        },
        checks: vec![],
        compared_against: None,
    };
    verdict.into_passed().unwrap()
}

pub fn key(pairs: &[(&str, &str)]) -> RunKey {
    let args: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let keys: Vec<String> = pairs.iter().map(|(k, _)| k.to_string()).collect();
    RunKey::parse(&args, &keys).unwrap()
}

/// Every file under `dir` whose name ends in `.parquet`: what
/// `ROOT/**/*.parquet` matches (hidden directories included).
pub fn glob_parquet(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(glob_parquet(&p));
        } else if p.to_string_lossy().ends_with(".parquet") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The published partitions' manifest files, by reading each record found.
pub fn published_files(root: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    collect_records(root, &mut out);
    out
}

fn collect_records(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().unwrap().is_dir() {
            collect_records(&e.path(), out);
        } else if e.file_name() == "_dqgate_audit.json" {
            let json: serde_json::Value =
                serde_json::from_str(&fs::read_to_string(e.path()).unwrap()).unwrap();
            for f in json["published"]["files"].as_array().unwrap() {
                out.insert(dir.join(f["path"].as_str().unwrap()));
            }
        }
    }
}

/// Invariant: nothing under ROOT matching `**/*.parquet` is anything but a
/// file of a published partition's manifest.
pub fn assert_only_published(root: &Path) {
    let globbed: BTreeSet<PathBuf> = glob_parquet(root).into_iter().collect();
    assert_eq!(
        globbed,
        published_files(root),
        "ROOT/**/*.parquet shows more or less than the published files"
    );
}

/// Reads a partition the "resolve once" way: opens the record, then the
/// files it lists; returns the distinct versions seen.
pub fn read_partition(dir: &Path) -> BTreeSet<i64> {
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("_dqgate_audit.json")).unwrap()).unwrap();
    let mut out = BTreeSet::new();
    for f in json["published"]["files"].as_array().unwrap() {
        out.extend(versions_in(&dir.join(f["path"].as_str().unwrap())).unwrap());
    }
    out
}

/// The `published.files[].path` names of a partition's record.
pub fn manifest_names(dir: &Path) -> BTreeSet<String> {
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("_dqgate_audit.json")).unwrap()).unwrap();
    json["published"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

/// The kept-versions directories of a partition, oldest first.
pub fn kept_dirs(env: &Env, rel: &str) -> Vec<PathBuf> {
    let dir = env.tmp.path().join(".table.dqgate/versions").join(rel);
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Tells reader threads to stop when dropped, also when the writer panics,
/// so that a failing test fails instead of hanging in `thread::scope`.
pub struct StopOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs `body` while a resolve-once reader and a listing reader read the
/// partition; returns (resolve-once reads, listing reads, listing reads
/// that hit a swapped-out file).
pub fn with_readers(root: &Path, body: impl FnOnce()) -> (usize, usize, usize) {
    let part = root.join("d=1");
    let stop = AtomicBool::new(false);
    let (resolved, listed, missing) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                if let Some(r) = crate::race::read_resolved_once(&part) {
                    let seen = r.expect("a resolve-once reader never misses a file");
                    assert_eq!(seen.len(), 1, "resolve-once reader saw {seen:?}");
                    resolved.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let mut seen = std::collections::BTreeSet::new();
                let mut gone = false;
                for f in glob_parquet(root) {
                    match versions_in(&f) {
                        Ok(v) => seen.extend(v),
                        Err(_) => gone = true,
                    }
                }
                assert!(seen.len() <= 1, "a listing reader saw rows of {seen:?}");
                if gone {
                    missing.fetch_add(1, Ordering::Relaxed);
                } else if !seen.is_empty() {
                    listed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let _stop = StopOnDrop(&stop);
        body();
    });
    (
        resolved.into_inner(),
        listed.into_inner(),
        missing.into_inner(),
    )
}
