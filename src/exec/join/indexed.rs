//! `unique(k) across published` through the key indexes beside the
//! published versions (see `keyindex`): the staged keys are looked up in
//! each partition's index instead of its Parquet key columns. Used only
//! when every other partition has an index that matches its files; else
//! the partitions are read as before, and the reason is told.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::{DataType, UInt32Type};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use super::PublishedPart;
use crate::exec::published;
use crate::exec::{keys, ExecError, SAMPLES};
use crate::keyindex::{self, Built, Collecting, Columns, Distinct, Expected, Finder, Kind, Within};
use crate::staged::{Location, StagedInput};
use crate::value::Value;

/// What the indexes gave: the clashing distinct keys, the top ones (staged
/// values, staged rows) and where each lives (top key, partition).
pub(super) struct ByIndex {
    pub value: u64,
    pub best: Vec<(Vec<Value>, u64)>,
    pub located: Vec<(usize, String)>,
    pub passes: Vec<String>,
}

/// The distinct keys of `columns` in `staged`, fingerprints cut to `bits`;
/// `None` when a column's type has no index kind or the memory pool refuses
/// the keys. `shared`: a scan of the key columns, as they come, that
/// serves another reader too (see [`super::side::tee_staged_keys`]); else they are
/// read here. `within`: the zones of every published partition, when each
/// has them: only the keys within are kept (see [`Indexes::within`]).
pub async fn distinct_keys(
    ctx: &SessionContext,
    staged: &StagedInput,
    columns: &[String],
    bits: u32,
    (shared, within): (Option<SendableRecordBatchStream>, Option<Arc<Within>>),
) -> Result<Option<Distinct>, ExecError> {
    let types = super::staged_types(staged, columns)?;
    let Some(kinds) = Kind::all(&types) else {
        return Ok(None);
    };
    let (rows, key_bytes) = (staged.row_count(), keys::key_bytes(staged, columns));
    let memory = MemoryConsumer::new("dqgate key index").register(&ctx.runtime_env().memory_pool);
    let want = Collecting::bytes_for(rows, key_bytes, kinds.len());
    if rows > u32::MAX as u64 / 2 || memory.try_grow(want).is_err() {
        return Ok(None);
    }
    let mut stream = match shared {
        Some(stream) => stream,
        None => super::staged_keys_stream(ctx, staged, columns, "keys for the key index").await?,
    };
    let mut keys = Collecting::new(rows, key_bytes, bits).within(within);
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(|e| ExecError::engine("reading keys for the key index", e))?;
        keys.push(&Columns::new(batch.columns(), &kinds)?, batch.num_rows(), 0);
        let used = keys.bytes();
        if used > memory.size() && memory.try_grow(used - memory.size()).is_err() {
            return Ok(None);
        }
    }
    Ok(Some(keys.finish(kinds, memory)))
}

/// The key index of `columns` for a publish of `staged` (`bits`: the
/// test-only collision switch): the staged files are read in order, so
/// that each key keeps a row that holds it. `None` when the key has no
/// index kind, a key column is not in the files (a Hive directory's), the
/// files are not local, or the memory pool refuses the keys.
pub async fn key_index(
    ctx: &SessionContext,
    staged: &StagedInput,
    columns: &[String],
    bits: Option<u32>,
) -> Result<Option<Built>, ExecError> {
    let bits = bits.unwrap_or(64);
    let types = super::staged_types(staged, columns)?;
    let (Some(kinds), Location::Local(dir)) = (Kind::all(&types), &staged.location) else {
        return Ok(None);
    };
    let (rows, key_bytes) = (staged.row_count(), keys::key_bytes(staged, columns));
    let memory = MemoryConsumer::new("dqgate key index").register(&ctx.runtime_env().memory_pool);
    if rows > u32::MAX as u64
        || memory
            .try_grow(Collecting::bytes_for(rows, key_bytes, kinds.len()))
            .is_err()
    {
        return Ok(None);
    }
    let files: Vec<(String, PathBuf, _)> = staged
        .files
        .iter()
        .map(|f| (f.path.clone(), dir.join(&f.path), f.metadata.clone()))
        .collect();
    let (columns, kinds) = (columns.to_vec(), kinds.clone());
    let read = tokio::task::spawn_blocking(move || {
        let mut keys = Collecting::new(rows, key_bytes, bits);
        let mut at = 0u64;
        for (_, path, meta) in &files {
            keyindex::read_keys(path, meta, &columns, &kinds, None, |cols, n| {
                keys.push(cols, n, at);
                at += n as u64;
            })
            .ok()?;
            if keys.bytes() > memory.size()
                && memory.try_grow(keys.bytes() - memory.size()).is_err()
            {
                return None;
            }
        }
        let listed = files
            .iter()
            .map(|(rel, _, meta)| (rel.clone(), meta.file_metadata().num_rows().max(0) as u64))
            .collect();
        let zones = keys.zones(&kinds);
        Some(((keys.finish(kinds, memory), zones), listed, columns))
    })
    .await
    .map_err(|e| ExecError::Audit(format!("reading keys for the key index stopped: {e}")))?;
    Ok(read.map(|(keys, files, columns)| Built::new(&columns, keys, bits, files)))
}

/// The distinct staged keys and a finder of them by whole fingerprints,
/// made in the task that read them, beside the footers' comparison.
pub(super) struct StagedKeys {
    distinct: Arc<Distinct>,
    finder: Arc<Finder>,
}

impl StagedKeys {
    pub fn new(distinct: Distinct) -> StagedKeys {
        let distinct = Arc::new(distinct);
        let finder = Arc::new(Finder::new(distinct.clone(), 64));
        StagedKeys { distinct, finder }
    }

    /// A finder comparing `bits` of each fingerprint (64 but under the
    /// test-only collision switch).
    fn finder(&self, bits: Option<u32>) -> Arc<Finder> {
        match bits {
            Some(b) if b != self.finder.hash_bits() => {
                Arc::new(Finder::new(self.distinct.clone(), b))
            }
            _ => self.finder.clone(),
        }
    }
}

/// The key indexes a check can read.
pub(super) struct Indexes {
    /// Each part with a usable index (its number in the parts) and where
    /// that index is.
    pub indexed: Vec<(usize, Expected)>,
    /// The parts without one, whose files are read instead, and why the
    /// first of them has none.
    pub lacking: Vec<usize>,
    pub why: Option<String>,
}

impl Indexes {
    /// Takes out the indexed parts whose key zones hold no staged value
    /// (`values`, compared in `types`): no staged key can be in them.
    /// Their part numbers, ascending.
    pub fn rule_out(&mut self, values: &published::StagedValues, types: &[DataType]) -> Vec<usize> {
        let mut out = Vec::new();
        self.indexed.retain(|(n, e)| {
            let keep = e.zones.is_empty() || values.admits_zones(&e.zones, types);
            if !keep {
                out.push(*n);
            }
            keep
        });
        out
    }

    /// The keys that can lie in a published partition, by the key zones
    /// of every part's index (keys of `kinds`); `None` when a part has no
    /// usable index or no zones: then every staged key is looked up.
    pub fn within(&self, kinds: &[Kind]) -> Option<Within> {
        if !self.lacking.is_empty() || self.indexed.iter().any(|(_, e)| e.zones.is_empty()) {
            return None;
        }
        Within::of(kinds, self.indexed.iter().map(|(_, e)| e.zones.as_slice()))
    }

    /// Why the parts without an index cannot be read beside the others'
    /// indexes (`readable`: whether the footers planned the rows of every
    /// part), so that every part's files are read; `None` when they can.
    pub fn unreadable(&self, readable: bool, parts: usize) -> Option<String> {
        let line = self.lacking_line(parts).filter(|_| !readable)?;
        Some(format!("{line}, so the partitions' files are read"))
    }

    /// What `-v` and `explain` say of the parts without an index.
    fn lacking_line(&self, parts: usize) -> Option<String> {
        self.why.as_ref().map(|why| {
            format!(
                "{} of {parts} published partition(s) have no key index of these columns that can be used ({why})",
                self.lacking.len()
            )
        })
    }
}

/// Where each part's index is, or why no index can be used (then every
/// part's files are read). A part without a usable index among parts with
/// one is read from its files, beside the others' indexes.
pub(super) fn expected(
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
    compared: &[DataType],
) -> Result<Indexes, String> {
    let staged_types = super::staged_types(staged, keys).map_err(|e| e.to_string())?;
    let kinds = match (Kind::all(&staged_types), Kind::all(compared)) {
        (Some(a), Some(b)) if a == b => a,
        _ => return Err("the key has a part that no index holds (only integers and text)".into()),
    };
    let mut out = Indexes {
        indexed: Vec::with_capacity(parts.len()),
        lacking: Vec::new(),
        why: None,
    };
    for (n, p) in parts.iter().enumerate() {
        let Location::Local(root) = &p.input.location else {
            return Err(format!("the partition `{}` is on an object store", p.rel));
        };
        // A part read from the table names its files from the table's root.
        let prefix = format!("{}/", p.rel);
        let dir = match p.input.files.iter().all(|f| f.path.starts_with(&prefix)) {
            true => root.join(&p.rel),
            false => root.clone(),
        };
        let mut e = Expected {
            path: keyindex::path_in(&dir, keys, &p.input.fingerprint),
            fingerprint: p.input.fingerprint.clone(),
            files: p
                .input
                .files
                .iter()
                .map(|f| (f.path.clone(), root.join(&f.path), f.metadata.clone()))
                .collect(),
            zones: Vec::new(),
        };
        match keyindex::usable(&mut e, keys, &kinds) {
            Ok(()) => out.indexed.push((n, e)),
            Err(why) => {
                out.lacking.push(n);
                out.why.get_or_insert(why.to_string());
            }
        }
    }
    match (out.indexed.is_empty(), out.lacking_line(parts.len())) {
        (true, Some(line)) => Err(format!("{line}, so the partitions' files are read")),
        _ => Ok(out),
    }
}

/// How `across published` runs through the indexes `i` of `parts`
/// published partitions, for `explain`.
pub(super) fn describe(i: &Indexes, parts: usize) -> String {
    let bytes: u64 = (i.indexed.iter())
        .filter_map(|(_, e)| std::fs::metadata(&e.path).ok())
        .map(|m| m.len())
        .sum();
    let mut out = format!(
        "by the key indexes beside the {} published version(s), {} in all, instead of their key columns: the distinct staged keys, sorted by 64-bit fingerprint, as a bitmap each index's fingerprints are tested against; only the rows of keys whose fingerprints match are read from the Parquet files and compared as bytes",
        i.indexed.len(),
        match bytes {
            0..1_000_000 => format!("{bytes} bytes"),
            b => format!("{:.1} MB", b as f64 / 1e6),
        }
    );
    if let Some(line) = i.lacking_line(parts) {
        out += &format!(
            "; {line}: their files are read and their keys probed with the same staged keys"
        );
    } else if i.indexed.iter().all(|(_, e)| !e.zones.is_empty()) {
        out += "; a staged key outside every index's key zones is in no partition, and is left out before it is fingerprinted";
    }
    out
}

/// Looks the staged keys (`staged`) up in the indexes of `parts`, and in
/// the files of the parts without one (read as `pruned` says; `None`: they
/// cannot be read so), `threads` at a time (`took`: when the pass began,
/// and what its first steps took; `bits`: the test-only collision switch). `Err` says why they could not
/// be used (the caller then reads every part's files).
pub(super) async fn lookup(
    staged: StagedKeys,
    indexes: Indexes,
    pruned: Option<&published::Pruned>,
    (parts, keys): (&[PublishedPart], &[String]),
    (threads, bits): (usize, Option<u32>),
    took: Took,
) -> Result<Result<ByIndex, String>, ExecError> {
    let started = took.started;
    if let Some(why) = indexes.unreadable(pruned.is_some(), parts.len()) {
        return Ok(Err(why));
    }
    let lacking = indexes.lacking_line(parts.len());
    let rest = pruned
        .filter(|_| lacking.is_some())
        .map(|p| p.only(|part| indexes.lacking.binary_search(&part).is_ok()));
    let read_staged = started.elapsed();
    let distinct = staged.distinct.clone();
    let (shared, ready) = (distinct.clone(), staged.finder.clone());
    let columns = keys.to_vec();
    let (numbers, expected): (Vec<usize>, Vec<Expected>) = indexes.indexed.into_iter().unzip();
    let looked = tokio::task::spawn_blocking(move || {
        keyindex::lookup((&shared, ready), &columns, &expected, threads)
    })
    .await
    .map_err(|e| ExecError::Audit(format!("the key index lookup stopped: {e}")))?;
    let found = match looked {
        Ok(f) => f,
        Err(why) => {
            return Ok(Err(format!("{why}, so the partitions' files are read")));
        }
    };
    let mut pairs: Vec<(u32, u32)> = (found.pairs.iter())
        .map(|(e, n)| (*e, numbers[*n as usize] as u32))
        .collect();
    let mut passes = vec![
        staged_pass(&distinct, &took),
        format!(
            "look them up in the key indexes of {} published partition(s), {} indexed key(s), {} staged key(s) also there: {:.2} s",
            numbers.len(),
            found.keys_read,
            clashing(&found.pairs),
            (started.elapsed() - read_staged).as_secs_f64()
        ),
    ];
    if let (Some(rest), Some(line)) = (rest, lacking) {
        let from = started.elapsed();
        let more = probe_rows(staged.finder(bits), &rest, threads).await?;
        passes.push(format!(
            "{line}: probe them with those partitions' rows (reads {}), {} staged key(s) also there: {:.2} s",
            rest.counts.describe(),
            clashing(&more),
            (started.elapsed() - from).as_secs_f64()
        ));
        pairs.extend(more);
        pairs.sort_unstable();
        pairs.dedup();
    }
    by_found(&distinct, pairs, |p| parts[p as usize].rel.clone(), passes).map(Ok)
}

/// Looks the staged keys (`staged`) up in the published rows the footers
/// left to read (`pruned`, keys that rise with time), `threads` streams at
/// a time. The staged keys were read once, for the indexes, and serve as
/// the probe's table (`took`: when the pass began, and what its first
/// steps took; `bits`: the test-only collision switch).
pub(super) async fn probe_pruned(
    staged: StagedKeys,
    pruned: &published::Pruned,
    (threads, bits): (usize, Option<u32>),
    took: Took,
) -> Result<ByIndex, ExecError> {
    let started = took.started;
    let read_staged = started.elapsed();
    let distinct = staged.distinct.clone();
    let pairs = probe_rows(staged.finder(bits), pruned, threads).await?;
    let passes = vec![
        staged_pass(&distinct, &took),
        format!(
            "probe them with the published rows the footers left (reads {}), {} staged key(s) also there: {:.2} s",
            pruned.counts.describe(),
            clashing(&pairs),
            (started.elapsed() - read_staged).as_secs_f64()
        ),
    ];
    by_found(
        &distinct,
        pairs,
        |p| pruned.rel(p as usize).to_string(),
        passes,
    )
}

/// (staged entry, part) of every row of `pruned` whose key `finder` holds,
/// sorted, read `threads` streams at a time: each row's key is found among
/// the staged keys by fingerprint and compared as bytes.
async fn probe_rows(
    finder: Arc<Finder>,
    pruned: &published::Pruned,
    threads: usize,
) -> Result<Vec<(u32, u32)>, ExecError> {
    let kinds = finder.kinds().to_vec();
    let tasks: Vec<_> = pruned
        .streams(threads)
        .into_iter()
        .map(|mut stream| {
            let (finder, kinds) = (finder.clone(), kinds.clone());
            tokio::spawn(async move {
                let (mut pairs, mut key) = (Vec::new(), Vec::new());
                let (mut hashes, mut rows) = (Vec::new(), Vec::new());
                while let Some(batch) = stream.next().await {
                    let batch =
                        batch.map_err(|e| ExecError::engine("reading the published keys", e))?;
                    let n = kinds.len();
                    let columns = Columns::new(&batch.columns()[..n], &kinds)?;
                    let part = batch.column(n).as_primitive::<UInt32Type>();
                    // Fingerprints first, then the bitmap's tests all
                    // together, then only the rows they let through.
                    hashes.clear();
                    rows.clear();
                    for row in 0..batch.num_rows() {
                        key.clear();
                        if columns.encode(row, &mut key) {
                            rows.push(hashes.len() as u32);
                        }
                        hashes.push(finder.fingerprint(&key));
                    }
                    finder.sift(&hashes, &mut rows);
                    for row in rows.iter().map(|r| *r as usize) {
                        key.clear();
                        columns.encode(row, &mut key);
                        if let Some(e) = finder.find(&key, hashes[row]) {
                            pairs.push((e as u32, part.value(row)));
                        }
                    }
                }
                Ok::<_, ExecError>(pairs)
            })
        })
        .collect();
    let mut pairs = Vec::new();
    for t in tasks {
        let got = t.await.map_err(|e| {
            ExecError::Audit(format!("the probe of the published rows stopped: {e}"))
        })?;
        pairs.extend(got?);
    }
    pairs.sort_unstable();
    pairs.dedup();
    Ok(pairs)
}

/// The timing line of reading the distinct staged keys (`took`).
fn staged_pass(distinct: &Distinct, took: &Took) -> String {
    let outside = match distinct.outside {
        0 => String::new(),
        n => format!("; {n} staged row(s) left out, their keys outside every published partition's key zones"),
    };
    format!(
        "distinct staged keys for the key indexes ({}{outside}): {:.2} s, beside the footers' comparison with the staged keys: {:.2} s",
        distinct.entries.len(),
        took.distinct.as_secs_f64(),
        took.footers.as_secs_f64()
    )
}

/// When the pass began, and what its two first steps took (they run at
/// once): the distinct staged keys, and the footers' comparison.
pub(super) struct Took {
    pub started: Instant,
    pub distinct: std::time::Duration,
    pub footers: std::time::Duration,
}

/// How many staged keys (the firsts of sorted `pairs`) were found.
fn clashing(pairs: &[(u32, u32)]) -> u64 {
    pairs.chunk_by(|a, b| a.0 == b.0).count() as u64
}

/// The clashing keys of `pairs` (staged entry, part; sorted), the top ones
/// with their values and the parts they are in (`rel` names a part).
fn by_found(
    distinct: &Distinct,
    pairs: Vec<(u32, u32)>,
    rel: impl Fn(u32) -> String,
    passes: Vec<String>,
) -> Result<ByIndex, ExecError> {
    let mut hits: Vec<u32> = pairs.iter().map(|(e, _)| *e).collect();
    hits.dedup();
    let value = hits.len() as u64;
    let best = top(distinct, hits, SAMPLES);
    let mut located = Vec::new();
    for (i, e) in best.iter().enumerate() {
        for (_, part) in pairs.iter().filter(|(x, _)| x == e) {
            located.push((i, rel(*part)));
        }
    }
    located.sort_unstable();
    let best = best
        .iter()
        .map(|e| {
            let entry = &distinct.entries[*e as usize];
            keyindex::decode(&distinct.kinds, distinct.key(entry))
                .map(|v| (v, entry.rows as u64))
                .ok_or_else(|| ExecError::Audit("a staged key could not be decoded".into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ByIndex {
        value,
        best,
        located,
        passes,
    })
}

/// The `k` entries of `hits` with the most staged rows, ties by key value.
fn top(d: &Distinct, mut hits: Vec<u32>, k: usize) -> Vec<u32> {
    let order = |a: &u32, b: &u32| {
        let (x, y) = (&d.entries[*a as usize], &d.entries[*b as usize]);
        y.rows
            .cmp(&x.rows)
            .then_with(|| keyindex::cmp(&d.kinds, d.key(x), d.key(y)))
    };
    if hits.len() > k && k > 0 {
        hits.select_nth_unstable_by(k - 1, order);
    }
    hits.truncate(k);
    hits.sort_unstable_by(order);
    hits
}
