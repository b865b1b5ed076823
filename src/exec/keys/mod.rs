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

mod adjacent;
mod affixes;
mod binned;
mod compact;
mod count;
mod decode;
mod direct;
mod disk;
mod encode;
mod entries;
mod filed;
mod filling;
mod found;
mod gave_up;
mod hits;
mod in_order;
pub mod join;
mod kept;
mod key;
mod ordered;
mod pages;
mod passes;
mod placed;
mod retain;
mod rowbins;
mod rowpages;
mod segments;
mod slab;
mod spilled;
mod store;
mod stretches;
mod tasks;
#[cfg(test)]
mod testing;
mod text;
mod together;
mod tuples;
mod values;
mod varint;
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
use in_order::partition_pages;
use key::Key;
use passes::count_stores;
use passes::Scanned;
use rowpages::Paged;
use store::{LocalStore, Narrow, Split, Whole};
use tasks::{scan, Sidecar};

pub use encode::PackError;
pub use found::Found;
pub use gave_up::GaveUp;
pub(crate) use hits::budget;
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
            fingerprinted(ctx, input, job, *test_bits, label, true).await
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
                Ok(found) => Ok(found),
                Err(why) => {
                    let why = format!("ordered scan stopped: {why}");
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
    let stopped = started.elapsed();
    let mut found = Box::pin(find(ctx, input, job, fallback, label)).await?;
    found.passes.insert(
        0,
        format!("{why} ({:.2} s), then {fallback}", stopped.as_secs_f64()),
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
    let keep = (|| (), count::Keep::Top(crate::exec::SAMPLES));
    partition_keep_count(ctx, input, job, label, split, keep, encode)
        .await
        .map(|(counted, spilled, passes, _)| (counted, spilled, passes))
}

/// [`partition_and_count`], with a sidecar per scan task that sees every
/// batch and its words, keeping the repeated words `keep` says; returns the
/// sidecars too.
async fn partition_keep_count<K: Key, R: Split<K>, S: Sidecar<K>>(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    label: &str,
    (partitions, split): (usize, R),
    (sidecar, keep): (impl Fn() -> S, count::Keep),
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
        count_stores(ctx, stores, (partitions, split), "scan", (started, keep)).await?;
    Ok((counted, spilled, passes, kept))
}

/// The fingerprints of every counted row (cut to `bits`), partitioned as
/// `split` says and counted: walked page by page when there is such a
/// plan (a single text key's exact values, when they are the answer),
/// else from the key columns' batches, kept as `budget` allows.
async fn fingerprint_scan<R: Split<u64>>(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    label: &str,
    split: (usize, R),
    (bits, most): (u32, u64),
    (paged, budget): (Option<&Paged>, &retain::Budget),
) -> Result<Scanned, Error> {
    if let Some(paged) = paged {
        return partition_pages(ctx, paged, job, label, split, (bits, most)).await;
    }
    let encode = move |c: &[ArrayRef], out: &mut Vec<u64>| {
        encode::fingerprints(c, Some(bits), out).map_err(Error::Fingerprint)
    };
    // Every repeated fingerprint is a candidate to verify.
    let retainers = (|| budget.retainer(), count::Keep::Most(u64::MAX));
    let (counted, spilled, passes, kept) =
        partition_keep_count(ctx, input, job, label, split, retainers, encode).await?;
    Ok(Scanned::Counted(counted, spilled, passes, kept, None))
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
        duplicates: rank_words((counted.repeated, counted.candidates), |w| {
            encode::unpack(packing, &types, w)
        }),
        distinct: counted.distinct,
        spilled_bytes: spilled,
        passes,
    })
}

/// A single text key whose values pack exactly: counted as packed words
/// (64-bit ones, narrowed where they can be, when the form's words fit),
/// or the first value that does not fit.
async fn text_packed(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    form: TextForm,
    null_code: bool,
    label: &str,
) -> Result<Result<Found, text::Misfit>, Error> {
    let bits = form.bits(null_code);
    let (partitions, whole) = whole(input);
    let text = (form, null_code);
    match Narrow::new(bits, partitions) {
        Some(narrow) => {
            text_words::<u64, _>(ctx, input, job, text, label, (partitions, narrow)).await
        }
        None if bits <= 64 => {
            text_words::<u64, _>(ctx, input, job, text, label, (partitions, whole)).await
        }
        None => text_words::<u128, _>(ctx, input, job, text, label, (partitions, whole)).await,
    }
}

/// [`text_packed`] in words of `K`.
async fn text_words<K: Key, R: Split<K>>(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    (form, null_code): (TextForm, bool),
    label: &str,
    split: (usize, R),
) -> Result<Result<Found, text::Misfit>, Error> {
    let nulls_equal = job.nulls_equal;
    let run = partition_and_count::<K, R>(ctx, input, job, label, split, move |c, out| {
        text::pack(form, null_code, nulls_equal, &c[0], out)
            .map_err(|m| Error::GaveUp(GaveUp::Misfit(m)))
    })
    .await;
    let (counted, spilled, mut passes) = match run {
        Err(Error::GaveUp(GaveUp::Misfit(m))) => return Ok(Err(m)),
        r => r?,
    };
    if let Some(scan) = passes.first_mut() {
        *scan = scan.replacen("scan", &format!("scan (values packed as {form})"), 1);
    }
    Ok(Ok(Found {
        duplicates: rank_words((counted.repeated, counted.candidates), |w| {
            vec![text::unpack(form, null_code, w.wide())]
        }),
        distinct: counted.distinct,
        spilled_bytes: spilled,
        passes,
    }))
}

/// Wide keys: count fingerprints (cut so that a partition keeps 4 bytes a
/// row), then verify the repeated ones against the exact keys (only when
/// there are any): from the decoded key columns the scan kept, when they
/// fit the budget, else by reading them again; or, when most rows are a
/// candidate's and `bins`, by reading every row again into bins.
async fn fingerprinted(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    test_bits: Option<u32>,
    label: &str,
    bins: bool,
) -> Result<Found, Error> {
    let budget = retain::Budget::new(ctx, input, job);
    // Cut fingerprints, 4 bytes a row (see `store::fingerprint_bits`).
    let (partitions, whole) = whole(input);
    let bits = test_bits.unwrap_or_else(|| store::fingerprint_bits(input.row_count(), partitions));
    // Nothing to keep: the key is walked page by page where it can be.
    let paged = match budget.keeps_nothing() {
        true => rowpages::paged(input, &job.keys, threads(ctx)),
        false => None,
    };
    let text = paged.as_ref();
    // A composite walked page by page can be read again whole into bins
    // when most rows are a candidate's, so the count keeps no more
    // candidates than the memory limit holds (16 bytes each, four times
    // the key budget): past them, it is read again into bins, however few
    // of its rows repeat. (Below it, the verification holds them: a
    // tenth of 10M rows twice, 1M candidates, is verified by round in
    // 0.65 s where the bins take 1.03 s, and the scan's own memory is the
    // peak under a small limit either way.)
    let bins = bins && crate::hooks::bin_rows() != Some(0);
    let most = match (&paged, bins) {
        (Some(Paged::Rows(_)), true) => {
            crate::hooks::most_candidates().unwrap_or(hits::budget(ctx) / 4)
        }
        _ => u64::MAX,
    };
    let scanned = match Narrow::new(bits, partitions) {
        Some(narrow) => {
            let split = (partitions, narrow);
            fingerprint_scan(ctx, input, job, label, split, (bits, most), (text, &budget)).await?
        }
        None => {
            let split = (partitions, whole);
            fingerprint_scan(ctx, input, job, label, split, (bits, most), (text, &budget)).await?
        }
    };
    let (counted, spilled, mut passes, kept, placed) = match scanned {
        Scanned::Counted(counted, spilled, passes, kept, placed) => {
            (counted, spilled, passes, kept, placed)
        }
        Scanned::Exact(found) => return Ok(found),
    };
    let bits = Some(bits);
    if counted.candidates == 0 {
        return Ok(Found {
            duplicates: Duplicates::default(),
            distinct: counted.distinct,
            spilled_bytes: spilled,
            passes,
        });
    }
    let started = Instant::now();
    let candidates = counted.candidates as usize;
    // When most rows are a candidate's (or the count kept none of them),
    // a composite walked page by page is read again whole into bins
    // ([`rowbins`]), rather than its rows written to disk by round of
    // candidates.
    let candidate_rows = counted.candidate_rows;
    let rows = counted.distinct - candidates as u64 + candidate_rows;
    let most_rows = 2 * candidate_rows >= rows || !counted.complete();
    if let (Some(Paged::Rows(walks)), true) = (&paged, bins && kept.is_empty() && most_rows) {
        let each = (
            encode::fingerprint_mask(bits),
            rowbins::most(ctx, walks.runs.len()),
        );
        // (`bins` is false when the test hook turns bins off.)
        if let Some(runs) = rowbins::every_row_bins(walks, job, each, &ctx.runtime_env()) {
            // The bins need neither the candidates nor the places: they
            // are dropped while the bins fill (25M candidates held 400 MB
            // at 50M rows), and counted again should the bins fill with
            // nowhere to write.
            let why = match counted.complete() {
                true => "most rows are a candidate's".to_string(),
                false => format!("{candidates} candidates, more than the count keeps"),
            };
            drop((counted, placed));
            let walked = (walks, label);
            let found = match rowbins::every_row(runs, walked, (job, &why), threads(ctx)).await? {
                Some(found) => found,
                None => {
                    passes.push(format!(
                        "{why}, and their bins filled with nowhere to write: count again, to verify by round: {:.2} s",
                        started.elapsed().as_secs_f64()
                    ));
                    Box::pin(fingerprinted(ctx, input, job, test_bits, label, false)).await?
                }
            };
            return Ok(after(passes, spilled, found));
        }
    }
    if !counted.complete() {
        passes.push(format!(
            "{candidates} candidates, more than the count keeps, and no bins: count again, to verify by round: {:.2} s",
            started.elapsed().as_secs_f64()
        ));
        let found = Box::pin(fingerprinted(ctx, input, job, test_bits, label, false)).await?;
        return Ok(after(passes, spilled, found));
    }
    let (kept, placing) = match (budget.kept(kept), placed, &paged) {
        (Some(kept), _, _) => (Some(kept.into_iter().map(Arc::new).collect()), None),
        (None, Some(placed), Some(Paged::Rows(walks))) => (None, Some((walks, placed))),
        _ => (None, None),
    };
    let kept_mb =
        (kept.as_ref()).map(|k: &Vec<Arc<_>>| k.iter().map(|r| r.bytes).sum::<usize>() >> 20);
    // The rows placed and not told apart are read alone; should one of
    // them not be a candidate, every row is read again for them all.
    let (mut apart, mut verified) = (0, candidates);
    let exact = match placing {
        Some((walks, placed)) => {
            let placing = placed::Placing {
                files: walks.files.clone(),
                runs: walks.runs.clone(),
                rows: placed.runs,
            };
            let left = placed.left;
            verified = left.len();
            let exact = match left.is_empty() {
                true => verify::Exact::placed_none(),
                false => {
                    let source = verify::Source::Placed(placing);
                    verify::verify(ctx, input, job, left, bits, label, source).await?
                }
            };
            match exact.placed {
                Some(true) => {
                    apart = placed.apart;
                    exact
                }
                _ => {
                    verified = candidates;
                    let all = counted.repeated;
                    let source = verify::Source::Read;
                    let mut exact =
                        verify::verify(ctx, input, job, all, bits, label, source).await?;
                    exact.placed = Some(false);
                    exact
                }
            }
        }
        None => {
            let source = match kept {
                Some(kept) => verify::Source::Kept(kept),
                None => verify::Source::Read,
            };
            verify::verify(ctx, input, job, counted.repeated, bits, label, source).await?
        }
    };
    let from = match (kept_mb, exact.placed) {
        (Some(mb), _) => format!("the {mb} MB of key columns the scan kept"),
        (None, Some(true)) => {
            "the key columns' candidate rows, read where the scan placed them".to_string()
        }
        (None, Some(false)) => {
            "the key columns read again (the rows placed by the scan were not read alone)"
                .to_string()
        }
        (None, None) => "the key columns read again".to_string(),
    };
    if exact.placed == Some(true) && exact.rounds == 0 {
        passes.push(format!(
            "verify nothing: every candidate row was told apart by its hash's other bits: {:.2} s",
            started.elapsed().as_secs_f64()
        ));
    } else {
        passes.push(format!(
            "verify {verified} repeated fingerprint(s) against the exact keys in {from}{}{}: {:.2} s",
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
            match (exact.rounds, exact.spilled) {
                (0 | 1, None) => String::new(),
                (n, None) => format!(", in {n} rounds"),
                (n, Some(bytes)) => format!(
                    ", in {n} rounds of one read (its candidate rows written to disk by round: {} MB)",
                    bytes >> 20
                ),
            },
            started.elapsed().as_secs_f64()
        ));
    }
    let distinct = counted.distinct - candidates as u64 + apart + exact.distinct;
    Ok(Found {
        duplicates: exact.duplicates,
        distinct,
        spilled_bytes: spilled + exact.spilled.unwrap_or(0),
        passes,
    })
}

/// What a pass found after the passes of timing lines `passes`, which
/// wrote `spilled` bytes to disk.
fn after(mut passes: Vec<String>, spilled: u64, found: Found) -> Found {
    passes.extend(found.passes);
    Found {
        passes,
        spilled_bytes: spilled + found.spilled_bytes,
        ..found
    }
}
