//! The key index beside a published version: the distinct keys of the
//! columns of a `unique(...) across published` check, written by `publish`
//! into the version's directory, so that it swaps in atomically with the
//! data, is listed (with its checksum) in the audit record, and leaves with
//! its version on a rollback or a prune.
//!
//! A later audit's `across published` reads the indexes of the other
//! partitions instead of their Parquet key columns: 4 bytes a key (the top
//! 32 bits of its fingerprint), then only the keys whose whole fingerprints
//! match a staged key's, compared as bytes (read from their Parquet files
//! by the row the index keeps; a key of integer parts only is kept whole in
//! the index, and compared from it).
//!
//! An index is used only when it is whole and is the index of the files
//! beside it: its header carries the fingerprint of those files (relative
//! paths, sizes, footers), which must equal the partition's as the audit
//! read it, and every byte used is covered by a checksum. Otherwise (or when
//! a partition has none: published by an older dqgate, or through Delta)
//! the partitions are read from their Parquet files.
//!
//! - `canon`: keys as canonical bytes, the same whatever the layout or width.
//! - `distinct`: the distinct keys of a stream, sorted by fingerprint.
//! - `file`: the index file, written and read.
//! - `legacy`: format 1's lookup, for indexes written until 2026-12-03.
//! - `topbits`: the bitmap and buckets the staged keys are looked up through.
//! - `zones`: the ranges of each key column's values, kept in the header, by
//!   which an audit rules a partition out without reading its index.

mod canon;
mod distinct;
mod file;
mod legacy;
mod rows;
mod topbits;
mod zones;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::parquet::file::metadata::ParquetMetaData;

pub use canon::{cmp, decode, Columns, Kind};
use distinct::cut;
pub use distinct::{fingerprint, Collecting, Distinct, Finder};
pub use file::{file_name, Header, IndexError, Opened, PREFIX};
pub use rows::read_keys;
pub(crate) use zones::{shared_len, two_bytes_after};
pub use zones::{Within, Zones};

/// An index ready to be written: the distinct keys of the staged files,
/// each with the first row that holds it, and their key zones.
pub struct Built {
    pub columns: Vec<String>,
    keys: Distinct,
    zones: Vec<Option<Zones>>,
    hash_bits: u32,
    /// The staged files (relative paths) and their rows, in the order the
    /// rows were counted.
    files: Vec<(String, u64)>,
}

impl Built {
    /// The index of `keys`, the distinct keys of `columns` read from the
    /// staged `files` in order, fingerprints cut to `hash_bits` (64 but
    /// under the test-only collision switch).
    pub fn new(
        columns: &[String],
        (keys, zones): (Distinct, Vec<Option<Zones>>),
        hash_bits: u32,
        files: Vec<(String, u64)>,
    ) -> Built {
        Built {
            columns: columns.to_vec(),
            keys,
            zones,
            hash_bits: hash_bits.min(64),
            files,
        }
    }

    /// Its file name, beside the files whose fingerprint is `fingerprint`.
    pub fn file_name(&self, fingerprint: &str) -> String {
        file_name(&self.columns, fingerprint)
    }

    /// Its bytes, for the published files whose fingerprint is
    /// `fingerprint`; `published` names each staged file as a reader of the
    /// table will (`None`: the index cannot be written).
    pub fn bytes(
        &self,
        fingerprint: &str,
        published: impl Fn(&str) -> Option<String>,
    ) -> Option<Vec<u8>> {
        let files = self
            .files
            .iter()
            .map(|(staged, rows)| Some((published(staged)?, *rows)))
            .collect::<Option<Vec<_>>>()?;
        let rows: u64 = files.iter().map(|(_, r)| r).sum();
        if rows > u32::MAX as u64 {
            return None;
        }
        Some(file::encode(
            &self.keys,
            &self.columns,
            (fingerprint, files),
            (self.hash_bits, self.zones.clone()),
        ))
    }
}

/// Where a partition's index of `columns` is, and its files now: their
/// fingerprint, and each file (its path as the table names it, where it
/// is, its footer).
pub struct Expected {
    pub path: PathBuf,
    pub fingerprint: String,
    pub files: Vec<(String, PathBuf, Arc<ParquetMetaData>)>,
    /// Its key zones, once [`usable`] read them from a checked header
    /// (empty: none kept, every staged key may be there).
    pub zones: Vec<Option<Zones>>,
}

/// The index of `columns` a partition in `dir` whose files have
/// `fingerprint` would have: by the name of its version; else by the name
/// an older dqgate gave it (its head still ties it to its files); else
/// another version's index of these columns, which then says why it is
/// not used (its files are not these); else the name it would have.
pub fn path_in(dir: &Path, columns: &[String], fingerprint: &str) -> PathBuf {
    let named = dir.join(file_name(columns, fingerprint));
    if named.exists() {
        return named;
    }
    let legacy = dir.join(file::legacy_file_name(columns));
    if legacy.exists() {
        return legacy;
    }
    other_version(dir, columns).unwrap_or(named)
}

/// The first (by name) index of `columns` in `dir` of any version.
fn other_version(dir: &Path, columns: &[String]) -> Option<PathBuf> {
    let stem = file::versioned_stem(columns);
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(&stem) && name.ends_with(".idx")
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Whether the index at `e` is worth opening for keys of `kinds`: it exists,
/// indexes `columns` and is the index of the files there now (its head is
/// checked when it is opened). Its zones (from a header checked on its
/// own) are kept in `e`.
pub fn usable(e: &mut Expected, columns: &[String], kinds: &[Kind]) -> Result<(), IndexError> {
    let h = Opened::peek(&e.path)?;
    check(&h, e, columns, kinds)?;
    e.zones = h.zones;
    Ok(())
}

fn check(h: &Header, e: &Expected, columns: &[String], kinds: &[Kind]) -> Result<(), IndexError> {
    let stale = |reason: String| IndexError::Stale {
        path: e.path.display().to_string(),
        reason,
    };
    if h.columns != columns || h.kinds != kinds {
        return Err(stale(format!(
            "it indexes {:?} as {:?}, the check compares {:?} as {:?}",
            h.columns, h.kinds, columns, kinds
        )));
    }
    if h.fingerprint != e.fingerprint {
        return Err(stale(format!(
            "it was written for files with fingerprint {}, the files there have {}",
            h.fingerprint, e.fingerprint
        )));
    }
    Ok(())
}

/// The staged keys as each index needs them, built once for all threads:
/// a finder by the index's hash bits, and for a format 1 index a probe by
/// its (hash bits, bucket bits).
#[derive(Default)]
struct Looking {
    finders: HashMap<u32, Arc<Finder>>,
    probes: HashMap<(u32, u32), Arc<file::Probe>>,
}

type Probes = Mutex<Looking>;

/// What a lookup found: (staged entry, index number) of every staged key
/// an index holds, sorted; and how many index keys it went through.
#[derive(Debug, Default)]
pub struct Found {
    pub pairs: Vec<(u32, u32)>,
    pub keys_read: u64,
}

/// Looks up every key of `staged` in every index of `expected`, `threads`
/// at a time (`ready`: a finder of `staged` already made). Any index that
/// cannot be used stops the lookup with why.
pub fn lookup(
    (staged, ready): (&Arc<Distinct>, Arc<Finder>),
    columns: &[String],
    expected: &[Expected],
    threads: usize,
) -> Result<Found, IndexError> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let out = Mutex::new((Found::default(), None::<IndexError>));
    let mut looking = Looking::default();
    looking.finders.insert(ready.hash_bits(), ready);
    let probes: Probes = Mutex::new(looking);
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, expected.len().max(1)) {
            s.spawn(|| {
                let mut found = Found::default();
                // The buffer each index's head is read into.
                let mut head = Vec::new();
                while !failed.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some(e) = expected.get(n) else { break };
                    let one = one_index(staged, columns, e, (&probes, &mut head), |j| {
                        found.pairs.push((j as u32, n as u32));
                    });
                    match one {
                        Ok(read) => found.keys_read += read,
                        Err(err) => {
                            failed.store(true, Ordering::Relaxed);
                            let mut o = out.lock().expect("no thread panics holding it");
                            o.1.get_or_insert(err);
                            return;
                        }
                    }
                }
                let mut o = out.lock().expect("no thread panics holding it");
                o.0.pairs.extend(found.pairs);
                o.0.keys_read += found.keys_read;
            });
        }
    });
    let (mut found, err) = out.into_inner().expect("no thread panics holding it");
    if let Some(err) = err {
        return Err(err);
    }
    found.pairs.sort_unstable();
    found.pairs.dedup();
    Ok(found)
}

/// Looks up `staged` in one index; calls `hit` with each staged entry it
/// holds; returns how many keys the index has.
fn one_index(
    staged: &Arc<Distinct>,
    columns: &[String],
    e: &Expected,
    (probes, head): (&Probes, &mut Vec<u8>),
    mut hit: impl FnMut(usize),
) -> Result<u64, IndexError> {
    let mut index = Opened::open_reusing(&e.path, std::mem::take(head))?;
    let h = index.header.clone();
    check(&h, e, columns, &staged.kinds)?;
    let corrupt = |reason: &str| IndexError::Corrupt {
        path: e.path.display().to_string(),
        reason: reason.to_string(),
    };
    // Where each of the index's files starts in its row count, and which
    // of the partition's files it is.
    let mut starts = Vec::with_capacity(h.files.len());
    let mut at = 0u64;
    for (name, rows) in &h.files {
        let f = e
            .files
            .iter()
            .position(|(n, _, _)| n == name)
            .ok_or_else(|| {
                corrupt(&format!(
                    "it names a file `{name}` that the partition does not have"
                ))
            })?;
        starts.push((at, f));
        at += rows;
    }
    let finder = || {
        (probes.lock().expect("no thread panics holding it"))
            .finders
            .entry(h.hash_bits)
            .or_insert_with(|| Arc::new(Finder::new(staged.clone(), h.hash_bits)))
            .clone()
    };
    let probe = || {
        (probes.lock().expect("no thread panics holding it"))
            .probes
            .entry((h.hash_bits, h.bucket_bits))
            .or_insert_with(|| {
                let hashes = staged.entries.iter().map(|x| cut(x.hash, h.hash_bits));
                Arc::new(file::Probe::new(hashes, h.bucket_bits))
            })
            .clone()
    };
    let mut candidates = Vec::new();
    index.matches(finder, probe, |j, i| candidates.push((j, i)))?;
    if index.holds_keys() {
        // Its keys were compared as bytes: no file is read.
        candidates.iter().for_each(|(j, _)| hit(*j));
        *head = index.into_head();
        return Ok(h.keys);
    }
    // (file, row in it, staged entry) of each candidate.
    let mut wanted: Vec<(usize, u64, usize)> = Vec::with_capacity(candidates.len());
    for (j, i) in candidates {
        let row = index.row(i)?;
        let k = starts.partition_point(|(s, _)| *s <= row);
        if row >= at || k == 0 {
            return Err(corrupt("a key's row is beyond its files' rows"));
        }
        let (start, f) = starts[k - 1];
        wanted.push((f, row - start, j));
    }
    *head = index.into_head();
    wanted.sort_unstable();
    for group in wanted.chunk_by(|a, b| a.0 == b.0) {
        let (_, path, meta) = &e.files[group[0].0];
        let mut rows: Vec<u64> = group.iter().map(|w| w.1).collect();
        rows.dedup();
        if rows
            .last()
            .is_some_and(|r| *r >= meta.file_metadata().num_rows().max(0) as u64)
        {
            return Err(corrupt("a key's row is beyond its file's rows"));
        }
        let (mut next, mut key) = (0usize, Vec::new());
        let mut failed = None;
        let read = rows::read_keys(
            path,
            meta,
            columns,
            &staged.kinds,
            Some(&rows),
            |cols, n| {
                for r in 0..n {
                    let Some(row) = rows.get(next) else { break };
                    next += 1;
                    key.clear();
                    if !cols.encode(r, &mut key) {
                        failed = Some("a row it names has no key (a null part)");
                        continue;
                    }
                    for w in group.iter().filter(|w| w.1 == *row) {
                        if staged.key(&staged.entries[w.2]) == key.as_slice() {
                            hit(w.2);
                        }
                    }
                }
            },
        );
        read.map_err(|reason| IndexError::Io {
            path: path.display().to_string(),
            reason,
        })?;
        if let Some(why) = failed {
            return Err(corrupt(why));
        }
        if next != rows.len() {
            return Err(corrupt("fewer rows were read than it names"));
        }
    }
    Ok(h.keys)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::fs::File;

    use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, UnboundedMemoryPool};
    use datafusion::parquet::arrow::arrow_reader::ArrowReaderMetadata;
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;

    use super::*;

    const KINDS: [Kind; 2] = [Kind::Text, Kind::Int];

    fn columns() -> Vec<String> {
        vec!["s".to_string(), "n".to_string()]
    }

    /// A key's columns and kinds: (`s`, `n`) by default.
    type Key = (Vec<String>, Vec<Kind>);

    fn text_and_int() -> Key {
        (columns(), KINDS.to_vec())
    }

    /// The keys an index holds as canonical bytes (format 4): one integer
    /// (negative ones too), and two.
    fn int_keys() -> [Key; 2] {
        let names = |n: &[&str]| n.iter().map(|c| c.to_string()).collect();
        [
            (names(&["m"]), vec![Kind::Int]),
            (names(&["n", "m"]), vec![Kind::Int, Kind::Int]),
        ]
    }

    fn rows(from: i64, to: i64) -> Vec<(String, i64, i64)> {
        (from..to)
            .map(|i| {
                let s = "k".repeat((i % 5) as usize) + &i.to_string();
                (s, i % 3 - 1, i * 7919 - 1_000_000)
            })
            .collect()
    }

    /// Writes (text, int, int) rows as `s`, `n`, `m` to a Parquet file of
    /// small row groups; its footer.
    fn parquet(path: &Path, rows: &[(String, i64, i64)]) -> Arc<ParquetMetaData> {
        let s: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0)));
        let n: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1)));
        let m: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2)));
        let batch = RecordBatch::try_from_iter([("s", s), ("n", n), ("m", m)]).unwrap();
        write_batch(path, &batch)
    }

    /// Writes `batch` to a Parquet file of small row groups; its footer.
    fn write_batch(path: &Path, batch: &RecordBatch) -> Arc<ParquetMetaData> {
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(70))
            .build();
        let mut w =
            ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        let file = File::open(path).unwrap();
        ArrowReaderMetadata::load(&file, Default::default())
            .unwrap()
            .metadata()
            .clone()
    }

    /// The distinct keys (`s`, `n`) of the file, with fingerprints cut to
    /// `bits`.
    fn distinct(path: &Path, meta: &Arc<ParquetMetaData>, bits: u32) -> Distinct {
        with_zones(path, meta, bits, &text_and_int()).0
    }

    /// The distinct keys `key` of the file, and the keys' zones.
    fn with_zones(
        path: &Path,
        meta: &Arc<ParquetMetaData>,
        bits: u32,
        (columns, kinds): &Key,
    ) -> (Distinct, Vec<Option<Zones>>) {
        let mut c = Collecting::new(0, 0, bits);
        let mut at = 0;
        read_keys(path, meta, columns, kinds, None, |cols, n| {
            c.push(cols, n, at);
            at += n as u64;
        })
        .unwrap();
        let pool: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
        let zones = c.zones(kinds);
        let memory = MemoryConsumer::new("test").register(&pool);
        (c.finish(kinds.clone(), memory), zones)
    }

    fn expected(index: &Path, file: &Path, meta: &Arc<ParquetMetaData>) -> Expected {
        Expected {
            path: index.to_path_buf(),
            fingerprint: "files".into(),
            files: vec![("p.parquet".into(), file.to_path_buf(), meta.clone())],
            zones: Vec::new(),
        }
    }

    /// The staged keys found through the index of `columns`, as their
    /// bytes.
    fn found(
        staged: &Arc<Distinct>,
        e: &Expected,
        columns: &[String],
    ) -> Result<HashSet<Vec<u8>>, IndexError> {
        let ready = Arc::new(Finder::new(staged.clone(), 64));
        let f = lookup((staged, ready), columns, std::slice::from_ref(e), 1)?;
        Ok(f.pairs
            .iter()
            .map(|(j, _)| staged.key(&staged.entries[*j as usize]).to_vec())
            .collect())
    }

    #[test]
    fn finds_exactly_the_keys_it_holds_and_refuses_any_flipped_bit() {
        let keys = [vec![text_and_int()], int_keys().to_vec()].concat();
        for (key, bits) in keys.iter().flat_map(|k| [(k, 64), (k, 3)]) {
            let (columns, kinds) = key;
            let tmp = tempfile::tempdir().unwrap();
            let file = tmp.path().join("p.parquet");
            let mut published_rows = rows(0, 300);
            published_rows.extend(rows(100, 150)); // repeated keys
            let meta = parquet(&file, &published_rows);
            let (published, zones) = with_zones(&file, &meta, bits, key);
            assert_eq!(zones.len(), kinds.len());
            let index = tmp.path().join(file_name(columns, "f"));
            let listed = vec![("p.parquet".to_string(), published_rows.len() as u64)];
            let zones = (bits, zones);
            let bytes = file::encode(&published, columns, ("files", listed), zones);
            std::fs::write(&index, &bytes).unwrap();
            let staged_file = tmp.path().join("s.parquet");
            let staged_meta = parquet(&staged_file, &rows(200, 500));
            let staged = Arc::new(with_zones(&staged_file, &staged_meta, 64, key).0);
            let want: HashSet<Vec<u8>> = staged
                .entries
                .iter()
                .map(|e| staged.key(e).to_vec())
                .filter(|k| published.entries.iter().any(|p| published.key(p) == k))
                .collect();
            if kinds.len() == 1 {
                assert_eq!(want.len(), 100);
            } else {
                assert!(want.len() > 50, "{}", want.len());
            }
            let e = expected(&index, &file, &meta);
            assert_eq!(
                found(&staged, &e, columns).unwrap(),
                want,
                "{key:?}, {bits} bits"
            );
            // Every byte flipped: refused, or the same keys found; the
            // header alone (its zones) refused, or the same.
            let header = Opened::peek(&index).unwrap();
            let exact = kinds.iter().all(|k| *k == Kind::Int);
            assert_eq!(header.format, if exact { 4 } else { 3 });
            assert!(header.zones.iter().all(|z| z.is_some()), "{header:?}");
            for at in (0..bytes.len()).filter(|_| bits == 64) {
                let mut bad = bytes.clone();
                bad[at] ^= 0x10;
                std::fs::write(&index, &bad).unwrap();
                if let Ok(got) = found(&staged, &e, columns) {
                    assert_eq!(got, want, "byte {at} flipped, {key:?}, {bits} bits");
                }
                if let Ok(h) = Opened::peek(&index) {
                    assert_eq!(h, header, "byte {at} flipped");
                }
            }
            // Cut short anywhere: refused.
            for len in [0, 10, 30, bytes.len() / 2, bytes.len() - 1] {
                std::fs::write(&index, &bytes[..len]).unwrap();
                assert!(found(&staged, &e, columns).is_err(), "cut to {len} bytes");
            }
            // An index of keys as bytes reads no Parquet file; the others
            // do.
            std::fs::write(&index, &bytes).unwrap();
            std::fs::remove_file(&file).unwrap();
            assert_eq!(
                found(&staged, &e, columns).is_ok(),
                exact,
                "{key:?}, {bits} bits"
            );
        }
    }

    /// An index of whole integer keys (format 4) tells apart keys whose 64
    /// bits are the same but whose values are not (`u64::MAX` and -1), and
    /// finds a key whatever the integer type on either side, even when
    /// every fingerprint collides.
    #[test]
    fn whole_integer_keys_are_compared_by_value() {
        use datafusion::arrow::array::{Int32Array, UInt64Array};
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("p.parquet");
        let published: ArrayRef = Arc::new(UInt64Array::from(vec![
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            5,
            7,
        ]));
        let meta = write_batch(
            &file,
            &RecordBatch::try_from_iter([("u", published)]).unwrap(),
        );
        let staged_file = tmp.path().join("s.parquet");
        let staged: ArrayRef = Arc::new(Int32Array::from(vec![-1, -2, i32::MIN, 5, 6]));
        let staged_meta = write_batch(
            &staged_file,
            &RecordBatch::try_from_iter([("u", staged)]).unwrap(),
        );
        let key: Key = (vec!["u".to_string()], vec![Kind::Int]);
        for bits in [64, 3, 0] {
            let (published, zones) = with_zones(&file, &meta, bits, &key);
            let index = tmp.path().join(file_name(&key.0, "f"));
            let listed = vec![("p.parquet".to_string(), 5)];
            let bytes = file::encode(&published, &key.0, ("files", listed), (bits, zones));
            assert_eq!(&bytes[..8], b"DQGKEYS4");
            std::fs::write(&index, &bytes).unwrap();
            let staged = Arc::new(with_zones(&staged_file, &staged_meta, 64, &key).0);
            let e = expected(&index, &file, &meta);
            let got = found(&staged, &e, &key.0).unwrap();
            let five: Vec<u8> = [&[1u8][..], &5u64.to_be_bytes()].concat();
            assert_eq!(got, HashSet::from([five]), "{bits} bits");
        }
    }

    #[test]
    fn an_index_of_other_files_or_columns_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("p.parquet");
        let meta = parquet(&file, &rows(0, 50));
        let published = distinct(&file, &meta, 64);
        let index = tmp.path().join(file_name(&columns(), "f"));
        let listed = || vec![("p.parquet".to_string(), 50)];
        let write = |columns: &[String], fingerprint: &str| {
            let bytes = file::encode(&published, columns, (fingerprint, listed()), (64, vec![]));
            std::fs::write(&index, bytes).unwrap();
        };
        let mut e = expected(&index, &file, &meta);
        write(&columns(), "other files");
        assert!(matches!(
            usable(&mut e, &columns(), &KINDS),
            Err(IndexError::Stale { .. })
        ));
        write(&["n".to_string(), "s".to_string()], "files");
        assert!(matches!(
            usable(&mut e, &columns(), &KINDS),
            Err(IndexError::Stale { .. })
        ));
        write(&columns(), "files");
        assert!(usable(&mut e, &columns(), &KINDS).is_ok());
        std::fs::remove_file(&index).unwrap();
        assert!(matches!(
            usable(&mut e, &columns(), &KINDS),
            Err(IndexError::Missing(_))
        ));
    }
}
