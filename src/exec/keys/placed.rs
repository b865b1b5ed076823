//! Where the first pass of a composite key walked page by page put each
//! row, so that the verification reads only the candidates' rows.
//!
//! The fingerprint scan of a composite ([`super::rowpages`]) pushes each
//! counted row's fingerprint into its run's store, in row order, into the
//! radix partition the fingerprint picks. Beside it a run notes each row's
//! partition ([`Places`], 2 bytes a row, reserved in the memory pool). Once
//! the count knows the repeated fingerprints, [`candidate_rows`] finds
//! them in each partition by their place `j` among its words, and the
//! notes turn "the `j`-th word of partition `p`" back into a row of the run:
//! the row where `p` was noted for the `j`-th time.
//!
//! A note also keeps, above the partition, the top bits of the row's
//! whole 64-bit hash, which the cut fingerprint drops (7 of them at 256
//! partitions, at least 3). Rows of one key share their whole hash, so a
//! candidate's row whose bits no other row of that candidate shares holds
//! a key seen once: it is *told apart*, counted as a distinct key, and
//! never read. That is how the false candidates of the cut (two keys
//! whose cut fingerprints meet, some 45 at 10M rows) mostly vanish: a
//! check that passes reads nothing again.
//!
//! The verification then reads the key columns of only the row groups
//! that hold the rows left, and of those only the rows ([`RowSelection`]):
//! the reader still decompresses their pages, but decodes and hashes a
//! few rows, not all of them. Every row so read must hash to a candidate
//! and be counted, and the rows placed must be as many as the count's; if
//! not, every candidate is verified again from every row (`verify`), so a
//! wrong place can never lose a key.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};

use datafusion::arrow::datatypes::DataType;

use super::count::share;
use super::encode;
use super::filed::{Candidates, Filed, Filter};
use super::hits::{file_batch, Form, Hits, SPILL};
use super::key::Key;
use super::store::{LocalStore, StoreError};
use super::walks::{read_as, FileColumns};
use crate::exec::ExecError as Error;
use crate::plan::keys::KeyJob;
use crate::staged::StagedInput;

/// A row that is not counted (a null part, nulls not equal).
const UNCOUNTED: u16 = u16::MAX;

/// A run's note of each row, in the order the run walked them: its
/// partition in the low `pbits` bits, and above them the top `ebits` bits
/// of its whole hash, which the cut fingerprint does not keep (the top
/// bit is left clear, so that no note is [`UNCOUNTED`]).
pub(super) struct Places {
    parts: Vec<u16>,
    pbits: u32,
    ebits: u32,
    reserved: MemoryReservation,
}

impl Places {
    /// Places of a run of `rows` rows whose store has `partitions`
    /// partitions, reserved in `pool`; `None` when a partition would not
    /// fit a note, or the pool refuses them.
    pub(super) fn new(partitions: usize, rows: u64, pool: &Arc<dyn MemoryPool>) -> Option<Places> {
        let rows = usize::try_from(rows).ok()?;
        let pbits = partitions.trailing_zeros();
        let reserved = MemoryConsumer::new("dqgate key places").register(pool);
        let fits = partitions.is_power_of_two() && pbits <= 12;
        (fits && reserved.try_grow(rows * 2).is_ok()).then(|| Places {
            parts: Vec::with_capacity(rows),
            pbits,
            ebits: 15 - pbits,
            reserved,
        })
    }

    /// Room for `n` more rows: false when the pool refuses it (a run
    /// longer than its footers said).
    pub(super) fn room(&mut self, n: usize) -> bool {
        let need = self.parts.len() + n;
        if need <= self.parts.capacity() {
            return true;
        }
        if self.reserved.try_resize(need * 2).is_err() {
            return false;
        }
        self.parts.reserve_exact(need - self.parts.len());
        true
    }

    /// The next rows, of whole fingerprints `hashes` (each in the
    /// partition `partition` gives), a part of those of `nulls` null:
    /// false (the places to be given up) when the pool refuses them.
    pub(super) fn note(
        &mut self,
        hashes: &[u64],
        nulls: &[bool],
        nulls_equal: bool,
        partition: impl Fn(u64) -> usize,
    ) -> bool {
        if !self.room(hashes.len()) {
            return false;
        }
        let (pbits, top) = (self.pbits, 64 - self.ebits);
        let note = |(&h, &null): (&u64, &bool)| match nulls_equal || !null {
            true => (partition(h) | ((h >> top) << pbits) as usize) as u16,
            false => UNCOUNTED,
        };
        self.parts.extend(hashes.iter().zip(nulls).map(note));
        true
    }
}

/// After the count of the `repeated` fingerprints (and how often) in
/// `stores` (`split`: a fingerprint to its partition and stored word), the
/// rows of the candidates as `places` say, and what finding them took;
/// `None` when there are none, or too many to be worth reading alone (more
/// than a sixteenth of the rows, or too many candidates for one round of
/// the verification).
pub(super) fn after_count<S: Key>(
    repeated: &[(u64, u64)],
    stores: &[LocalStore<S>],
    places: Vec<Places>,
    split: impl Fn(u64) -> (usize, S),
    threads: usize,
) -> Option<(Result<Option<Placed>, StoreError>, Duration)> {
    let started = Instant::now();
    let rows: u64 = repeated.iter().map(|(_, n)| n).sum();
    let words: u64 = stores.iter().map(|s| s.words).sum();
    let few = repeated.len() < SPILL && rows.saturating_mul(16) <= words;
    if repeated.is_empty() || !few {
        return None;
    }
    let placed = candidate_rows(stores, &places, split, (repeated, rows), threads);
    Some((placed, started.elapsed()))
}

/// The timing line of placing the candidates' rows (`None`: the notes
/// and the stores disagreed), which took `took`.
pub(super) fn line(placed: Option<&Placed>, took: Duration) -> String {
    match placed {
        Some(p) => format!(
            "place {} candidate row(s) by the partitions the scan noted (2 bytes a row), {} told apart by {} more bits of their hashes ({} candidate(s) left): {:.2} s",
            p.rows() as u64 + p.apart,
            p.apart,
            p.ebits,
            p.left.len(),
            took.as_secs_f64()
        ),
        None => format!(
            "place the candidate rows by the partitions the scan noted: they disagree with the count, so every row is read again ({:.2} s)",
            took.as_secs_f64()
        ),
    }
}

/// The rows of each run that hold a candidate and may repeat its key
/// (ascending), and the candidates (with their rows) they hold. A row
/// whose note's top hash bits no other row of its candidate shares holds
/// a key of its own, so it is *told apart*: counted as a distinct key,
/// never read.
pub(super) struct Placed {
    pub runs: Vec<Vec<u64>>,
    pub left: Vec<(u64, u64)>,
    /// Rows told apart.
    pub apart: u64,
    /// The note's top hash bits.
    pub ebits: u32,
}

impl Placed {
    /// Rows placed and left to read, over every run.
    pub(super) fn rows(&self) -> usize {
        self.runs.iter().map(Vec::len).sum()
    }
}

/// One run's candidate rows: each row, its candidate (an index into the
/// candidates sorted by partition and stored word) and its note's top
/// hash bits.
#[derive(Default)]
struct RunRows {
    rows: Vec<u64>,
    ids: Vec<u32>,
    tops: Vec<u16>,
}

/// The rows whose fingerprint is a candidate (`rows` of them, as the
/// count says), each run's found in its store (`join`: a partition's
/// stored word to the fingerprint) and placed by its notes, on up to
/// `threads` threads. `None` when the notes and the store disagree, or
/// the rows placed are not as many as the count's (they never should be:
/// the verification then reads every row).
pub(super) fn candidate_rows<S: Key>(
    stores: &[LocalStore<S>],
    places: &[Places],
    split: impl Fn(u64) -> (usize, S),
    (repeated, rows): (&[(u64, u64)], u64),
    threads: usize,
) -> Result<Option<Placed>, StoreError> {
    let Some(partitions) = stores.first().map(LocalStore::partitions) else {
        return Ok(None);
    };
    if stores.len() != places.len() {
        return Ok(None);
    }
    // Each partition's candidates as it stores them (with their
    // fingerprints), and a filter of them all (about 64 bits a candidate)
    // that most words fail.
    let mut stored: Vec<Vec<(S, u64)>> = vec![Vec::new(); partitions];
    let mut filter = Filter::new(
        Filter::sized(repeated.len(), 64, 1 << 26),
        std::iter::empty(),
    );
    for &(w, _) in repeated {
        let (p, s) = split(w);
        stored[p & (partitions - 1)].push((s, w));
        filter.set(s.mix());
    }
    stored.iter_mut().for_each(|s| s.sort_unstable());
    let (stored, filter) = (&stored, &filter);
    let done = share(stores.len(), threads, Vec::new, |mine, run| {
        mine.push((run, run_rows(&stores[run], &places[run], (stored, filter))));
    });
    let mut found: Vec<_> = done.into_iter().flatten().collect();
    found.sort_by_key(|(run, _)| *run);
    let mut runs = Vec::with_capacity(found.len());
    for (_, f) in found {
        match f? {
            Some(rows) => runs.push(rows),
            None => return Ok(None),
        }
    }
    // Every row of every candidate, each once.
    let placed: usize = runs.iter().map(|r| r.rows.len()).sum();
    if placed as u64 != rows {
        return Ok(None);
    }
    let fingerprints: Vec<u64> = stored.iter().flatten().map(|(_, w)| *w).collect();
    let ebits = places.first().map_or(0, |p| p.ebits);
    Ok(Some(told_apart(runs, &fingerprints, ebits)))
}

/// The rows of `runs` left once each candidate's rows are told apart by
/// their top hash bits (`fingerprints`: each candidate's).
fn told_apart(runs: Vec<RunRows>, fingerprints: &[u64], ebits: u32) -> Placed {
    let key = |id: u32, top: u16| (u64::from(id) << 16) | u64::from(top);
    let mut alike: HashMap<u64, u32> = HashMap::new();
    for r in &runs {
        for (&id, &top) in r.ids.iter().zip(&r.tops) {
            *alike.entry(key(id, top)).or_default() += 1;
        }
    }
    let mut left: HashMap<u32, u64> = HashMap::new();
    let mut apart = 0;
    let runs = (runs.into_iter())
        .map(|r| {
            let mut rows = Vec::with_capacity(r.rows.len());
            for ((&row, &id), &top) in r.rows.iter().zip(&r.ids).zip(&r.tops) {
                match alike[&key(id, top)] > 1 {
                    true => {
                        rows.push(row);
                        *left.entry(id).or_default() += 1;
                    }
                    false => apart += 1,
                }
            }
            rows
        })
        .collect();
    let mut left: Vec<(u64, u64)> = (left.into_iter())
        .map(|(id, n)| (fingerprints[id as usize], n))
        .collect();
    left.sort_unstable();
    Placed {
        runs,
        left,
        apart,
        ebits,
    }
}

/// One run's candidate rows (see [`candidate_rows`]).
fn run_rows<S: Key>(
    store: &LocalStore<S>,
    places: &Places,
    (stored, filter): (&[Vec<(S, u64)>], &Filter),
) -> Result<Option<RunRows>, StoreError> {
    let partitions = store.partitions();
    if stored.len() != partitions || partitions != 1 << places.pbits {
        return Ok(None);
    }
    // Each partition's candidates, by their place among its words, and
    // the index of the first of its candidates among all.
    let mut wanted: Vec<Vec<(u64, u32)>> = vec![Vec::new(); partitions];
    let firsts: Vec<u32> = (stored.iter())
        .scan(0u32, |at, s| {
            let first = *at;
            *at += s.len() as u32;
            Some(first)
        })
        .collect();
    let mut words = vec![0u64; partitions];
    let (mut buf, mut spilled) = (Vec::new(), Vec::new());
    for (p, want) in wanted.iter_mut().enumerate() {
        let mine = &stored[p];
        let mut j = 0u64;
        // Spilled words first, then memory's: the order the run pushed.
        spilled.clear();
        store.spilled(p, &mut buf, |s| spilled.push(s))?;
        for chunk in std::iter::once(&spilled[..]).chain(store.in_memory(p)) {
            if !mine.is_empty() {
                for (i, s) in chunk.iter().enumerate() {
                    if !filter.passes(s.mix()) {
                        continue;
                    }
                    if let Ok(k) = mine.binary_search_by_key(s, |(s, _)| *s) {
                        want.push((j + i as u64, firsts[p] + k as u32));
                    }
                }
            }
            j += chunk.len() as u64;
        }
        words[p] = j;
    }
    // Each partition's words seen so far and the place of its next
    // candidate (u32::MAX: none), side by side for one load a row.
    if words.iter().any(|w| *w >= u64::from(u32::MAX)) {
        return Ok(None);
    }
    let target = |w: &[(u64, u32)], at: usize| w.get(at).map_or(u32::MAX, |j| j.0 as u32);
    let mut state: Vec<(u32, u32)> = wanted.iter().map(|w| (0, target(w, 0))).collect();
    let mut next = vec![0usize; partitions];
    let mut found = RunRows::default();
    let mask = partitions - 1;
    for (r, &note) in places.parts.iter().enumerate() {
        if note == UNCOUNTED {
            continue;
        }
        let p = usize::from(note) & mask;
        let (seen, at) = &mut state[p];
        if *seen == *at {
            found.rows.push(r as u64);
            found.ids.push(wanted[p][next[p]].1);
            found.tops.push(note >> places.pbits);
            next[p] += 1;
            *at = target(&wanted[p], next[p]);
        }
        *seen += 1;
    }
    let whole = (state.iter().zip(&words)).all(|((seen, _), w)| u64::from(*seen) == *w)
        && (next.iter().zip(&wanted)).all(|(at, w)| *at == w.len());
    Ok(whole.then_some(found))
}

/// Where a composite's candidate rows are: the files and runs its first
/// pass walked, and each run's candidate rows.
pub(super) struct Placing {
    pub files: Arc<Vec<FileColumns>>,
    pub runs: Vec<Vec<(usize, usize)>>,
    pub rows: Vec<Vec<u64>>,
}

/// The candidate rows of every run filed, read where they were placed
/// (each run in a blocking task), with the key types they were read as;
/// `None` when a row read is not a counted row of a candidate.
pub(super) async fn file_placed(
    placing: &Placing,
    input: &StagedInput,
    job: &KeyJob,
    candidates: &Arc<Candidates>,
    bits: Option<u32>,
) -> Result<Option<(Vec<Filed>, Vec<DataType>)>, Error> {
    let types = (job.keys.iter())
        .map(|k| Ok(read_as(input.schema.field_with_name(k)?.data_type())))
        .collect::<Result<Vec<_>, datafusion::arrow::error::ArrowError>>()?;
    let form = Arc::new(Form::of(&types)?);
    let nulls_equal = job.nulls_equal;
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (run, rows)) in placing.runs.iter().zip(&placing.rows).enumerate() {
        let (files, run, rows) = (placing.files.clone(), run.clone(), rows.clone());
        let (form, candidates) = (form.clone(), candidates.clone());
        tasks.spawn_blocking(move || {
            let read = Read {
                form: &form,
                candidates: &candidates,
                bits,
                nulls_equal,
            };
            Ok::<_, Error>((i, read.run(&files, &run, &rows)?))
        });
    }
    let mut parts = Vec::new();
    while let Some(done) = tasks.join_next().await {
        parts.push(done.map_err(|e| Error::Audit(format!("a key check task failed: {e}")))??);
    }
    parts.sort_by_key(|(i, _)| *i);
    let filed: Option<Vec<Filed>> = parts.into_iter().map(|(_, f)| f).collect();
    Ok(filed.map(|f| (f, types)))
}

/// How a run's placed rows are read and filed.
struct Read<'a> {
    form: &'a Form,
    candidates: &'a Candidates,
    bits: Option<u32>,
    nulls_equal: bool,
}

impl Read<'_> {
    /// The rows `rows` of the row groups `run` of `files`, filed; `None`
    /// when one is not a counted row of a candidate, or is missing.
    fn run(
        &self,
        files: &[FileColumns],
        run: &[(usize, usize)],
        rows: &[u64],
    ) -> Result<Option<Filed>, Error> {
        let mut filed = Filed::new(self.candidates.len());
        let (mut hits, mut hashes) = (Hits::default(), Vec::new());
        let (mut base, mut at) = (0u64, 0usize);
        for &(file, group) in run {
            let Some(file) = files.get(file) else {
                return Ok(None);
            };
            let plan = &file.arrow;
            let n = plan.metadata.metadata().row_group(group).num_rows().max(0) as u64;
            let end = at + rows[at..].partition_point(|&r| r < base + n);
            if end > at {
                let offsets: Vec<u64> = rows[at..end].iter().map(|r| r - base).collect();
                let failed =
                    |e: String| Error::Audit(format!("reading {}: {e}", plan.path.display()));
                let mut read = 0;
                for batch in plan
                    .selected_batches(group, selection(&offsets, n))
                    .map_err(failed)?
                {
                    let batch = batch.map_err(failed)?;
                    let columns = batch.columns();
                    encode::fingerprints(columns, self.bits, &mut hashes)
                        .map_err(Error::Fingerprint)?;
                    let picked = file_batch(
                        &mut filed,
                        (columns, hashes.as_slice()),
                        &mut hits,
                        (self.form, self.candidates),
                        self.nulls_equal,
                    )?;
                    if picked != batch.num_rows() {
                        return Ok(None);
                    }
                    read += batch.num_rows();
                }
                if read != end - at {
                    return Ok(None);
                }
                at = end;
            }
            base += n;
        }
        Ok((at == rows.len()).then_some(filed))
    }
}

/// The selection of `rows` (ascending, each below `of`) among `of` rows.
pub(super) fn selection(rows: &[u64], of: u64) -> RowSelection {
    let mut selectors = Vec::new();
    let mut at = 0u64;
    for &r in rows {
        if r > at {
            selectors.push(RowSelector::skip((r - at) as usize));
        }
        match selectors.last_mut() {
            Some(s) if !s.skip && r == at => s.row_count += 1,
            _ => selectors.push(RowSelector::select(1)),
        }
        at = r + 1;
    }
    if of > at {
        selectors.push(RowSelector::skip((of - at) as usize));
    }
    RowSelection::from(selectors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::keys::store::{Narrow, Split};
    use datafusion::execution::memory_pool::UnboundedMemoryPool;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use std::collections::HashMap;

    /// Candidate rows found through the stores and the notes are the rows
    /// whose word is a candidate: over two runs, with rows not counted,
    /// narrow words, stores in memory and spilled to disk, some repeated
    /// words left out of the candidates; and a note short of its store's
    /// words, or a count that is not the rows', gives no places.
    #[test]
    fn candidate_rows_are_the_rows_of_the_candidates() {
        for limit in [None, Some(1usize << 20)] {
            let mut builder = RuntimeEnvBuilder::new();
            if let Some(l) = limit {
                builder = builder.with_memory_limit(l, 1.0);
            }
            let runtime = builder.build_arc().expect("runtime");
            let partitions = 64;
            let split = Narrow::new(38, partitions).expect("narrow");
            let (mut stores, mut places, mut rows) = (Vec::new(), Vec::new(), Vec::new());
            let mut x = 7u64;
            for _ in 0..2 {
                let mut store = LocalStore::<u32>::new(partitions, runtime.clone(), "test");
                // Apart from the stores' pool, which the limit fills.
                let pool: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
                let mut placed = Places::new(partitions, 1, &pool).expect("places");
                let mut run = Vec::new();
                for _ in 0..700_000 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    // About one row in 50 not counted. Keys k and
                    // k + 1,000,000 share a cut fingerprint (`word`) but
                    // not their whole hash's top bits.
                    let k = (x >> 20) % 2_000_000;
                    let word = (k % 1_000_000) * 0x9E37 % (1 << 38);
                    let whole = word | ((k / 1_000_000) << 63);
                    let counted = !(x >> 8).is_multiple_of(50);
                    if counted {
                        store.extend_split([split.split(word)]).expect("push");
                    }
                    let mask = (1u64 << 38) - 1;
                    let partition = |w: u64| split.split(w & mask).0 & (partitions - 1);
                    assert!(placed.note(&[whole], &[!counted], false, partition));
                    run.push(counted.then_some(k));
                }
                stores.push(store);
                places.push(placed);
                rows.push(run);
            }
            if limit.is_some() {
                assert!(stores.iter().any(|s| s.spilled_bytes() > 0));
            }
            let word = |k: u64| (k % 1_000_000) * 0x9E37 % (1 << 38);
            let (mut words, mut keys): (HashMap<u64, u64>, HashMap<u64, u64>) = Default::default();
            for &k in rows.iter().flatten().flatten() {
                *words.entry(word(k)).or_default() += 1;
                *keys.entry(k).or_default() += 1;
            }
            let mut repeated: Vec<(u64, u64)> = words.into_iter().filter(|c| c.1 > 1).collect();
            repeated.sort_unstable();
            // Every third repeated word is left out.
            let repeated: Vec<(u64, u64)> = (repeated.iter().enumerate())
                .filter(|(i, _)| i % 3 != 0)
                .map(|(_, r)| *r)
                .collect();
            assert!(repeated.len() > 1000);
            let total: u64 = repeated.iter().map(|r| r.1).sum();
            let set: HashMap<u64, u64> = repeated.iter().copied().collect();
            // Left: the rows of a candidate whose key repeats; told apart:
            // the rest of its rows.
            let candidate = |k: &Option<u64>| k.is_some_and(|k| set.contains_key(&word(k)));
            let want: Vec<Vec<u64>> = (rows.iter())
                .map(|run| {
                    (run.iter().enumerate())
                        .filter(|(_, k)| candidate(k) && k.is_some_and(|k| keys[&k] > 1))
                        .map(|(r, _)| r as u64)
                        .collect()
                })
                .collect();
            let found = |places: &[Places], total| {
                candidate_rows(&stores, places, |w| split.split(w), (&repeated, total), 2)
                    .expect("read")
            };
            let got = found(&places, total).expect("placed");
            assert_eq!(got.runs, want, "limit {limit:?}");
            let left: u64 = want.iter().map(|r| r.len() as u64).sum();
            assert!(
                got.apart > 1000 && got.apart + left == total,
                "{}",
                got.apart
            );
            let mut by_word: HashMap<u64, u64> = HashMap::new();
            let repeats = keys
                .iter()
                .filter(|(k, n)| **n > 1 && set.contains_key(&word(**k)));
            repeats.for_each(|(k, n)| *by_word.entry(word(*k)).or_default() += n);
            let mut want_left: Vec<(u64, u64)> = by_word.into_iter().collect();
            want_left.sort_unstable();
            assert_eq!(got.left, want_left);
            assert!(found(&places, total + 1).is_none());
            // A note lost: the run's notes no longer match its store.
            let lost = places[1]
                .parts
                .iter()
                .position(|p| *p != UNCOUNTED)
                .unwrap();
            places[1].parts.remove(lost);
            assert!(found(&places, total).is_none());
        }
    }

    #[test]
    fn a_selection_picks_the_rows_and_nothing_else() {
        let cases: [(&[u64], u64); 5] = [
            (&[], 5),
            (&[0], 1),
            (&[0, 1, 2, 7, 9], 10),
            (&[3, 4, 8], 20),
            (&[19], 20),
        ];
        for (rows, of) in cases {
            let s = selection(rows, of);
            let mut picked = Vec::new();
            let mut at = 0u64;
            let mut total = 0u64;
            for sel in s.iter() {
                if !sel.skip {
                    picked.extend(at..at + sel.row_count as u64);
                }
                at += sel.row_count as u64;
                total += sel.row_count as u64;
            }
            assert_eq!(picked, rows, "{rows:?} of {of}");
            assert_eq!(total, of, "{rows:?} of {of}");
        }
    }
}
