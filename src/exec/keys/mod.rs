//! The duplicate-key engine: exact key counts at the speed of reading keys.
//!
//! DataFusion plans the scan and decodes the Parquet; this module consumes
//! the key columns' Arrow batches, one task per scan partition, and runs the
//! strategy that `plan::keys` chose from the footers:
//!
//! ```text
//!  batches ──encode──▶ key words ──radix──▶ partitions ──count──▶ repeated words
//!   (packed: exact)                        (memory, or spilled)    │
//!   (text of hex digits or short: packed, exact)                   │
//!   (fingerprint: hash of 32+partition bits) ───────────────────────┴─▶ verify pass:
//!                                                 exact keys behind repeated hashes
//!  ordered input: runs of equal keys, checked while streaming (constant memory)
//! ```
//!
//! Every strategy gives the same `Duplicates` as the grouped pass: the number
//! of keys occurring more than once, and the top samples (count descending,
//! key ascending, in Arrow's row order).

mod compact;
mod count;
mod decode;
mod direct;
mod encode;
mod filed;
mod found;
mod gave_up;
pub mod join;
mod kept;
mod key;
mod ordered;
mod pages;
mod retain;
mod rowpages;
mod slab;
mod store;
mod tasks;
mod text;
mod verify;
mod walks;

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::ArrayRef;
use datafusion::prelude::SessionContext;

use crate::exec::Duplicates;
use crate::exec::ExecError as Error;
use crate::plan::keys::{KeyJob, KeyStrategy, Packing, TextForm};
use crate::staged::StagedInput;
use found::{key_types, rank_words};
use key::Key;
use rowpages::Paged;
use store::{LocalStore, Narrow, Split, Whole};
use tasks::{scan, Sidecar};

pub use encode::PackError;
pub use found::Found;
pub use gave_up::GaveUp;
pub(crate) use retain::key_bytes;
pub use store::StoreError;
pub(crate) use tasks::threads;
pub(crate) use tasks::{one_stream, streams};

/// Runs `strategy` for `job` (never [`KeyStrategy::Grouped`], which the
/// caller runs as a DataFusion plan).
pub async fn find(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    strategy: &KeyStrategy,
    label: &str,
) -> Result<Found, Error> {
    match strategy {
        KeyStrategy::Packed(p) => {
            let whole = whole(input);
            match Narrow::new(p.bits(), whole.0) {
                Some(narrow) => {
                    packed::<u64, _>(ctx, input, job, p, label, (whole.0, narrow)).await
                }
                None if p.bits() <= 64 => packed::<u64, _>(ctx, input, job, p, label, whole).await,
                None => packed::<u128, _>(ctx, input, job, p, label, whole).await,
            }
        }
        KeyStrategy::Fingerprint { test_bits } => {
            fingerprinted(ctx, input, job, *test_bits, label).await
        }
        KeyStrategy::Text {
            form,
            null_code,
            fallback,
            ..
        } => {
            let started = Instant::now();
            match text_packed(ctx, input, job, *form, *null_code, label).await? {
                Ok(found) => Ok(found),
                Err(misfit) => {
                    let why = format!("text packing stopped at {misfit}, which is not {form}");
                    fall_back(ctx, input, job, fallback, label, why, started).await
                }
            }
        }
        KeyStrategy::Ordered {
            leading, fallback, ..
        } => {
            let started = Instant::now();
            match ordered::find(ctx, input, job, leading, fallback, label).await? {
                Some(found) => Ok(found),
                None => {
                    let why = "ordered scan stopped where the order broke".to_string();
                    fall_back(ctx, input, job, fallback, label, why, started).await
                }
            }
        }
        KeyStrategy::Grouped => Err(Error::Audit(
            "internal: the grouped strategy runs as a DataFusion plan".into(),
        )),
    }
}

/// Runs `fallback` after a strategy stopped (`why`, since `started`), and
/// says so first in the passes.
async fn fall_back(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    fallback: &KeyStrategy,
    label: &str,
    why: String,
    started: Instant,
) -> Result<Found, Error> {
    let mut found = Box::pin(find(ctx, input, job, fallback, label)).await?;
    found.passes.insert(
        0,
        format!(
            "{why} ({:.2} s), then {fallback}",
            started.elapsed().as_secs_f64()
        ),
    );
    Ok(found)
}

/// The partitions for the staged rows, each word kept whole.
fn whole(input: &StagedInput) -> (usize, Whole) {
    let partitions = store::partitions_for(input.row_count());
    (partitions, Whole::new(partitions))
}

/// Radix-partitions every counted row's word (in `partitions` partitions,
/// each keeping what `split` keeps of a word), then counts each partition.
async fn partition_and_count<K: Key, R: Split<K>>(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    label: &str,
    split: (usize, R),
    encode: impl Fn(&[ArrayRef], &mut Vec<K>) -> Result<(), Error> + Send + Sync + 'static,
) -> Result<(count::Counted<K>, u64, Vec<String>), Error> {
    partition_keep_count(ctx, input, job, label, split, || (), encode)
        .await
        .map(|(counted, spilled, passes, _)| (counted, spilled, passes))
}

/// [`partition_and_count`], with a sidecar per scan task that sees every
/// batch and its words; returns the sidecars too.
async fn partition_keep_count<K: Key, R: Split<K>, S: Sidecar<K>>(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    label: &str,
    (partitions, split): (usize, R),
    sidecar: impl Fn() -> S,
    encode: impl Fn(&[ArrayRef], &mut Vec<K>) -> Result<(), Error> + Send + Sync + 'static,
) -> Result<(count::Counted<K>, u64, Vec<String>, Vec<S>), Error> {
    let started = Instant::now();
    let (streams, _bar) = streams(ctx, input, &job.keys, label).await?;
    let runtime = ctx.runtime_env();
    let nulls_equal = job.nulls_equal;
    let stores = scan(
        streams,
        || {
            (
                LocalStore::<R::Stored>::new(partitions, runtime.clone(), "dqgate key check"),
                Vec::new(),
                sidecar(),
            )
        },
        move |(store, words, kept): &mut (LocalStore<R::Stored>, Vec<K>, S), columns| {
            encode(columns, words)?;
            kept.keep(columns, words);
            let counted = encode::counted_rows(columns, nulls_equal);
            match counted {
                None => store.extend_split(words.iter().map(|w| split.split(*w))),
                Some(valid) => {
                    store.extend_split(valid.valid_indices().map(|i| split.split(words[i])))
                }
            }
            .map_err(Error::from)
        },
    )
    .await?;
    let (stores, kept): (Vec<LocalStore<R::Stored>>, Vec<S>) =
        stores.into_iter().map(|(s, _, k)| (s, k)).unzip();
    let (counted, spilled, passes) =
        count_stores(ctx, stores, (partitions, split), "scan", started).await?;
    Ok((counted, spilled, passes, kept))
}

/// Counts the partitions of `stores` (filled by `scan` since `started`),
/// and says what each step cost.
async fn count_stores<K: Key, R: Split<K>>(
    ctx: &SessionContext,
    stores: Vec<LocalStore<R::Stored>>,
    (partitions, split): (usize, R),
    scan: &str,
    started: Instant,
) -> Result<(count::Counted<K>, u64, Vec<String>), Error> {
    let scanned = started.elapsed();
    let words: u64 = stores.iter().map(|s| s.words).sum();
    let spilled: u64 = stores.iter().map(LocalStore::spilled_bytes).sum();
    let counting = Instant::now();
    let threads = threads(ctx);
    let (counted, stores) = tokio::task::spawn_blocking(move || {
        let counted = count::count(&stores, threads, |p, w| split.join(p, w));
        (counted, stores)
    })
    .await
    .map_err(|e| Error::Audit(format!("a key check task failed: {e}")))?;
    let counted = counted?;
    drop(stores);
    let mut passes = vec![format!(
        "{scan} and radix-partition {words} key words into {partitions} partitions ({} bytes a word): {:.2} s{}",
        R::BYTES,
        scanned.as_secs_f64(),
        if spilled > 0 {
            format!(", {spilled} bytes spilled")
        } else {
            String::new()
        }
    )];
    passes.push(format!(
        "count the partitions on {threads} thread(s): {:.2} s",
        counting.elapsed().as_secs_f64()
    ));
    Ok((counted, spilled, passes))
}

/// [`partition_and_count`] of the fingerprints of a key walked page by
/// page ([`pages`], [`rowpages`]); cut by `bits`.
async fn partition_pages<R: Split<u64>>(
    ctx: &SessionContext,
    paged: &Paged,
    job: &KeyJob,
    label: &str,
    (partitions, split): (usize, R),
    bits: u32,
) -> Result<(count::Counted<u64>, u64, Vec<String>), Error> {
    let started = Instant::now();
    let runtime = ctx.runtime_env();
    let fill = || Filling {
        store: LocalStore::<R::Stored>::new(partitions, runtime.clone(), "dqgate key check"),
        words: Vec::with_capacity(FILL),
        split,
        mask: encode::fingerprint_mask(Some(bits)),
        nulls_equal: job.nulls_equal,
        failed: None,
    };
    let (filled, repeats) = match paged {
        Paged::One(text) => pages::walk(text, label, fill).await?,
        Paged::Rows(rows) => rowpages::walk(rows, label, &runtime.memory_pool, fill).await?,
    };
    let mut stores = Vec::new();
    for mut f in filled {
        f.flush();
        if let Some(e) = f.failed {
            return Err(e.into());
        }
        stores.push(f.store);
    }
    let how = match pages::repeats(repeats) {
        r if r.is_empty() => "scan (page by page)".to_string(),
        r => format!("scan (page by page){r},"),
    };
    count_stores(ctx, stores, (partitions, split), &how, started).await
}

/// The fingerprints of every counted row (cut to `bits`), partitioned as
/// `split` says and counted: walked page by page when there is such a
/// plan, else from the key columns' batches, kept as `budget` allows (the
/// kept batches are returned).
async fn fingerprint_scan<R: Split<u64>>(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    label: &str,
    split: (usize, R),
    bits: u32,
    (paged, budget): (Option<&Paged>, &retain::Budget),
) -> Result<(count::Counted<u64>, u64, Vec<String>, Vec<retain::Retainer>), Error> {
    if let Some(paged) = paged {
        let (counted, spilled, passes) =
            partition_pages(ctx, paged, job, label, split, bits).await?;
        return Ok((counted, spilled, passes, Vec::new()));
    }
    let encode = move |c: &[ArrayRef], out: &mut Vec<u64>| {
        encode::fingerprints(c, Some(bits), out).map_err(Error::Fingerprint)
    };
    partition_keep_count(ctx, input, job, label, split, || budget.retainer(), encode).await
}

/// Words a [`Filling`] gathers before it pushes them.
const FILL: usize = 4096;

/// A run's store, filled with the fingerprints of its counted rows.
struct Filling<R: Split<u64>> {
    store: LocalStore<R::Stored>,
    words: Vec<u64>,
    split: R,
    mask: u64,
    nulls_equal: bool,
    failed: Option<store::StoreError>,
}

impl<R: Split<u64>> Filling<R> {
    fn flush(&mut self) {
        let split = self.split;
        if self.failed.is_none() {
            let pushed = self
                .store
                .extend_split(self.words.iter().map(|w| split.split(*w)));
            self.failed = pushed.err();
        }
        self.words.clear();
    }
}

impl<R: Split<u64>> Filling<R> {
    #[inline]
    fn push(&mut self, fingerprint: u64) {
        self.words.push(fingerprint & self.mask);
        if self.words.len() == FILL {
            self.flush();
        }
    }
}

impl<R: Split<u64>> rowpages::Rows for Filling<R> {
    fn rows(&mut self, hashes: &[u64], nulls: &[bool]) {
        for (&h, &null) in hashes.iter().zip(nulls) {
            if self.nulls_equal || !null {
                self.push(h);
            }
        }
    }
}

impl<R: Split<u64>> pages::Visit for Filling<R> {
    #[inline]
    fn value(&mut self, fingerprint: u64, _: &[u8]) {
        self.push(fingerprint);
    }

    /// Rows come by value: a fingerprint counted twice is a candidate
    /// however often it was counted (the verification counts its rows), so
    /// a value's rows of a chunk are at most two words.
    fn by_value(&self) -> bool {
        true
    }

    fn rows(&mut self, fingerprint: u64, _: &[u8], rows: u64) {
        for _ in 0..rows.min(2) {
            self.push(fingerprint);
        }
    }

    /// A null row's fingerprint is 0, as `encode::fingerprints` leaves it;
    /// at most two words, as [`Self::rows`].
    fn nulls(&mut self, n: u64) {
        if self.nulls_equal {
            for _ in 0..n.min(2) {
                self.push(0);
            }
        }
    }
}

/// Fixed-width keys: the packed word is the key, so counting is exact.
async fn packed<K: Key, R: Split<K>>(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    packing: &Packing,
    label: &str,
    split: (usize, R),
) -> Result<Found, Error> {
    let encoding = packing.clone();
    let nulls_equal = job.nulls_equal;
    let (counted, spilled, passes) =
        partition_and_count::<K, R>(ctx, input, job, label, split, move |c, out| {
            encode::pack(&encoding, c, nulls_equal, out).map_err(Error::from)
        })
        .await?;
    let types = key_types(input, job)?;
    Ok(Found {
        duplicates: rank_words(counted.repeated, |w| encode::unpack(packing, &types, w)),
        distinct: counted.distinct,
        spilled_bytes: spilled,
        passes,
    })
}

/// A single text key whose values pack exactly: counted as packed words,
/// or the first value that does not fit.
async fn text_packed(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    form: TextForm,
    null_code: bool,
    label: &str,
) -> Result<Result<Found, text::Misfit>, Error> {
    let nulls_equal = job.nulls_equal;
    let run = partition_and_count(ctx, input, job, label, whole(input), move |c, out| {
        text::pack(form, null_code, nulls_equal, &c[0], out)
            .map_err(|m| Error::GaveUp(GaveUp::Misfit(m)))
    })
    .await;
    let (counted, spilled, passes) = match run {
        Err(Error::GaveUp(GaveUp::Misfit(m))) => return Ok(Err(m)),
        r => r?,
    };
    Ok(Ok(Found {
        duplicates: rank_words(counted.repeated, |w| vec![text::unpack(form, null_code, w)]),
        distinct: counted.distinct,
        spilled_bytes: spilled,
        passes,
    }))
}

/// Wide keys: count fingerprints (cut so that a partition keeps 4 bytes a
/// row), then verify the repeated ones against the exact keys (only when
/// there are any): from the decoded key columns the scan kept, when they
/// fit the budget, else by reading them again.
async fn fingerprinted(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    bits: Option<u32>,
    label: &str,
) -> Result<Found, Error> {
    let budget = retain::Budget::new(ctx, input, job);
    // Cut fingerprints, 4 bytes a row (see `store::fingerprint_bits`).
    let (partitions, whole) = whole(input);
    let bits = bits.unwrap_or_else(|| store::fingerprint_bits(input.row_count(), partitions));
    // Nothing to keep: the key is walked page by page where it can be.
    let paged = match budget.keeps_nothing() {
        true => rowpages::paged(input, &job.keys, threads(ctx)),
        false => None,
    };
    let text = paged.as_ref();
    let (counted, spilled, mut passes, kept) = match Narrow::new(bits, partitions) {
        Some(narrow) => {
            let split = (partitions, narrow);
            fingerprint_scan(ctx, input, job, label, split, bits, (text, &budget)).await?
        }
        None => {
            let split = (partitions, whole);
            fingerprint_scan(ctx, input, job, label, split, bits, (text, &budget)).await?
        }
    };
    let bits = Some(bits);
    if counted.repeated.is_empty() {
        return Ok(Found {
            duplicates: Duplicates::default(),
            distinct: counted.distinct,
            spilled_bytes: spilled,
            passes,
        });
    }
    let started = Instant::now();
    let source = match budget.kept(kept) {
        Some(kept) => verify::Source::Kept(kept.into_iter().map(Arc::new).collect()),
        None => verify::Source::Read,
    };
    let from = match &source {
        verify::Source::Kept(k) => format!(
            "the {} MB of key columns the scan kept",
            k.iter().map(|r| r.bytes).sum::<usize>() >> 20
        ),
        verify::Source::Read => "the key columns read again".to_string(),
    };
    let exact = verify::verify(ctx, input, job, &counted.repeated, bits, label, source).await?;
    passes.push(format!(
        "verify {} repeated fingerprint(s) against the exact keys in {from}{}{}: {:.2} s",
        counted.repeated.len(),
        match exact.paged {
            true => format!(
                " page by page{}{}",
                match exact.by_value {
                    true => " by value (a dictionary's rows tallied, plain values in batches)",
                    false => "",
                },
                pages::repeats(exact.repeats)
            ),
            false => String::new(),
        },
        match exact.rounds {
            1 => String::new(),
            n => format!(", in {n} rounds"),
        },
        started.elapsed().as_secs_f64()
    ));
    let distinct = counted.distinct - counted.repeated.len() as u64 + exact.distinct;
    Ok(Found {
        duplicates: exact.duplicates,
        distinct,
        spilled_bytes: spilled,
        passes,
    })
}
