//! The verification pass of fingerprinted keys: which exact keys stand
//! behind the fingerprints that repeat.
//!
//! A fingerprint that occurs more than once is a *candidate*: its rows hold
//! one key repeated, or several keys whose 64-bit hashes collide. This pass
//! reads the key columns again and, for every counted row whose fingerprint
//! is a candidate, files the row's exact key under its fingerprint
//! ([`super::filed`]): a compare with the first key filed there, and a
//! copy only for a key not seen before. So a candidate row costs a probe
//! and a `memcmp`, whether the column repeats a thousand keys (`unique`) or
//! every key ten times (`distinct_count`).
//!
//! Exact keys are compared as bytes: the value's bytes for a single text
//! column (with a tag byte telling null from the empty string), Arrow's row
//! format otherwise (which keeps NaN and -0.0 apart as the grouped pass
//! does, after [`encode::fold_zeros`]).
//!
//! The rows come from the key columns the first pass kept
//! ([`super::retain`]), when they fitted its budget, or from a new read of
//! the key columns (of a single text key's pages where it can:
//! [`super::pages`]; of a composite's, when its candidates lie in few rows,
//! only those rows, where the first pass placed them: [`super::placed`]).
//!
//! Memory: the filed keys of all candidates. When they would not fit the
//! budget (a quarter of `--memory-limit`, or 1 GiB), or when there are many
//! of them, the candidates are split by fingerprint into rounds. Over a
//! new read the rounds share one, whose candidate rows are written to disk
//! by round ([`super::spilled`]); over kept columns, or where nothing can
//! be written, each round goes over the rows again.

use std::sync::Arc;

use datafusion::arrow::array::{Array, StringViewArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::prelude::SessionContext;

use super::encode;
use super::filed::{self, Candidates, Filed, MOST};
use super::found::{key_types, Tallied};
use super::hits::{budget, decoded_types, file_batch, file_each, Form, Hits, SPILL};
use super::pages::{self, Visit};
use super::placed;
use super::retain::{key_bytes, Retainer};
use super::spilled;
use super::tasks::{scan, streams, threads};
use crate::exec::Duplicates;
use crate::exec::ExecError as Error;
use crate::plan::keys::KeyJob;
use crate::staged::StagedInput;

/// Where the verification finds the rows.
pub(super) enum Source {
    /// The batches the scan tasks kept, with their fingerprints.
    Kept(Vec<Arc<Retainer>>),
    /// A new read of the key columns.
    Read,
    /// A composite's candidate rows where its first pass placed them
    /// ([`placed`]): only those are read, when the candidates are few
    /// enough for one round, else every row.
    Placed(placed::Placing),
}

/// What the exact keys behind the candidates are.
pub(super) struct Exact {
    pub duplicates: Duplicates,
    /// Distinct exact keys among the candidates' rows.
    pub distinct: u64,
    /// How many times the key columns were read (rounds).
    pub rounds: usize,
    /// Whether they were walked page by page.
    pub paged: bool,
    /// Dictionary pages skipped as repeats of a kept one.
    pub repeats: u64,
    /// Whether the pages' rows came by value (see [`Visit::by_value`]).
    pub by_value: bool,
    /// Bytes the rounds' rows took on disk, when they were written there.
    pub spilled: Option<u64>,
    /// Whether the candidates' rows were read where the first pass placed
    /// them (`Some(false)`: they could not be, or a row there was no
    /// candidate, so every row was read for every candidate).
    pub placed: Option<bool>,
}

/// The most candidates of a round whose rows were written to disk.
const ROUND_CANDIDATES: usize = 1 << 17;

/// The most rounds.
const MOST_ROUNDS: usize = 1024;

/// Bytes a candidate costs once: its slots in [`Candidates`] (at most
/// half full) and its filter bits.
const PER_CANDIDATE: u64 = 72;

/// Bytes a run's filing of a candidate costs besides the key's bytes: its
/// entry and the tag byte. Every run may file every candidate.
const PER_FILED: u64 = 25;

/// Verifies the candidates `repeated` (fingerprint, rows), fingerprinted
/// with `bits` as the first pass did.
pub(super) async fn verify(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    repeated: Vec<(u64, u64)>,
    bits: Option<u32>,
    label: &str,
    source: Source,
) -> Result<Exact, Error> {
    let n = repeated.len();
    let mut rounds = rounds_for(ctx, input, job, n as u64);
    let spill_from = crate::hooks::spill_candidates().unwrap_or(SPILL);
    // Placed rows are read alone in one round, or not at all (the caller
    // then reads every row for every candidate).
    let placed = matches!(source, Source::Placed(_));
    if placed && (rounds > 1 || n >= spill_from) {
        return Ok(Exact::not_placed());
    }
    // A single text key read again is hashed from its pages.
    let text = match (&source, job.keys.as_slice()) {
        (Source::Read, [k]) => pages::plan(input, k, threads(ctx)),
        _ => None,
    };
    let mut tallied = Tallied::default();
    let mut types = None;
    let (mut repeats, mut by_value) = (0, false);
    // Rounds over a new read share one: it writes each round's rows to
    // disk, and each round reads only its own back. So more rounds cost
    // no more reads, and a round of at most ROUND_CANDIDATES keeps its
    // tables within a core's cache; many candidates go so even when their
    // keys would fit the budget. Where nothing can be written (no
    // temporary directory, a full disk), each round reads the columns.
    let spills = matches!(source, Source::Read) && (rounds > 1 || n >= spill_from);
    let more = match spills {
        true => rounds.max(n.div_ceil(ROUND_CANDIDATES)).min(MOST_ROUNDS),
        false => rounds,
    };
    // The candidates by round, without their rows (half the bytes).
    let candidate_rows = repeated.iter().map(|(_, rows)| rows).sum();
    let mut by_round = ByRound::new(repeated.iter().map(|(w, _)| *w), more);
    drop(repeated);
    let spilled = match spills {
        true => {
            let by = n >= crate::hooks::by_value().unwrap_or(BY_VALUE);
            let all = (&by_round.words[..], candidate_rows, more, bits, by);
            match spilled::spill(ctx, input, job, all, text.as_ref(), label).await {
                Ok(s) => {
                    rounds = more;
                    (repeats, by_value) = (s.repeats, by && text.is_some());
                    Some(s)
                }
                Err(_) => {
                    by_round = ByRound::new(by_round.words.iter().copied(), rounds);
                    None
                }
            }
        }
        false => None,
    };
    for round in 0..rounds {
        let candidates = Candidates::new(by_round.round(round).iter().copied());
        let shown = match rounds {
            1 => format!("{label}, verify"),
            n => format!("{label}, verify {}/{n}", round + 1),
        };
        let candidates = Arc::new(candidates);
        let (filed, t) = match (&spilled, &source) {
            (Some(s), _) => (spilled::file(s, &candidates, round).await?, s.types.clone()),
            (None, Source::Kept(kept)) => file_kept(kept, job, &candidates, bits).await?,
            (None, Source::Read) => match &text {
                // Filed as text, whatever the table's text type.
                Some(text) => {
                    let by = candidates.len() >= crate::hooks::by_value().unwrap_or(BY_VALUE);
                    let (filed, skipped) =
                        file_pages(text, job, (candidates, by), bits, &shown).await?;
                    repeats += skipped;
                    by_value |= by;
                    (filed, vec![DataType::Utf8View])
                }
                None => file_keys(ctx, input, job, candidates, bits, &shown).await?,
            },
            (None, Source::Placed(p)) => {
                match placed::file_placed(p, input, job, &candidates, bits).await? {
                    Some(read) => read,
                    None => return Ok(Exact::not_placed()),
                }
            }
        };
        if !t.is_empty() {
            types = Some(t);
        }
        let threads = threads(ctx);
        let counted = tokio::task::spawn_blocking(move || {
            filed::together(&filed, threads, Tallied::default, |t, _, key, rows| {
                t.key(key[0], &key[1..], rows);
            })
        })
        .await
        .map_err(|e| Error::Audit(format!("a key check task failed: {e}")))?;
        counted.into_iter().for_each(|t| tallied.absorb(t));
    }
    let types = match types {
        Some(t) => t,
        None => key_types(input, job)?,
    };
    Ok(Exact {
        distinct: tallied.distinct,
        duplicates: tallied.duplicates(&job.keys, &types)?,
        rounds,
        paged: text.is_some(),
        repeats,
        by_value,
        spilled: spilled.map(|s| s.bytes()),
        placed: placed.then_some(true),
    })
}

impl Exact {
    /// Nothing verified: the placed rows were read (`placed`) or not.
    fn nothing(placed: bool) -> Exact {
        Exact {
            duplicates: Duplicates::default(),
            distinct: 0,
            rounds: 0,
            paged: false,
            repeats: 0,
            by_value: false,
            spilled: None,
            placed: Some(placed),
        }
    }

    /// No candidate left to read once the placed rows were told apart.
    pub(super) fn placed_none() -> Exact {
        Exact::nothing(true)
    }

    /// The placed rows could not be read alone: every row must be.
    fn not_placed() -> Exact {
        Exact::nothing(false)
    }
}

/// The candidates' fingerprints by round: round `w % rounds` of each.
/// (Each round picking its own from all of them took a third of the CPU
/// of a verification of 5M candidates in 32 rounds.)
struct ByRound {
    words: Vec<u64>,
    /// Where each round's words start in `words`, and the end.
    starts: Vec<usize>,
}

impl ByRound {
    fn new(words: impl Iterator<Item = u64> + Clone, rounds: usize) -> ByRound {
        let round = |w: u64| (w % rounds as u64) as usize;
        let mut starts = vec![0usize; rounds + 1];
        for w in words.clone() {
            starts[round(w) + 1] += 1;
        }
        for r in 0..rounds {
            starts[r + 1] += starts[r];
        }
        let mut at = starts.clone();
        let mut by = vec![0u64; starts[rounds]];
        for w in words {
            let r = round(w);
            by[at[r]] = w;
            at[r] += 1;
        }
        ByRound { words: by, starts }
    }

    fn round(&self, r: usize) -> &[u64] {
        &self.words[self.starts[r]..self.starts[r + 1]]
    }
}

/// How many rounds keep the filed keys of `candidates` fingerprints within
/// the budget, from the footers' average key size.
fn rounds_for(ctx: &SessionContext, input: &StagedInput, job: &KeyJob, candidates: u64) -> usize {
    let budget = budget(ctx);
    let key_bytes = key_bytes(input, &job.keys);
    let runs = threads(ctx) as u64;
    let need = candidates.saturating_mul(PER_CANDIDATE + runs * (key_bytes + PER_FILED));
    // Ordinals are u32s: at most MOST candidates a round.
    let fewest = candidates.div_ceil(MOST);
    need.div_ceil(budget)
        .max(fewest)
        .clamp(1, MOST_ROUNDS as u64) as usize
}

/// One read of the key columns: every counted row whose fingerprint is a
/// candidate, filed. Returns the filed keys and the key types as the
/// streams decode them.
async fn file_keys(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    candidates: Arc<Candidates>,
    bits: Option<u32>,
    label: &str,
) -> Result<(Vec<Filed>, Vec<DataType>), Error> {
    let (streams, _bar) = streams(ctx, input, &job.keys, label).await?;
    let types = decoded_types(&streams, input, job)?;
    let form = Arc::new(Form::of(&types)?);
    let nulls_equal = job.nulls_equal;
    let filed = scan(
        streams,
        {
            let candidates = candidates.clone();
            move || (Filed::new(candidates.len()), Vec::new(), Hits::default())
        },
        move |(filed, hashes, hits): &mut (Filed, Vec<u64>, Hits), columns| {
            encode::fingerprints(columns, bits, hashes).map_err(Error::Fingerprint)?;
            file_batch(
                filed,
                (columns, hashes.as_slice()),
                hits,
                (&form, &candidates),
                nulls_equal,
            )
            .map(|_| ())
        },
    )
    .await?;
    Ok((filed.into_iter().map(|(f, _, _)| f).collect(), types))
}

/// One read of a single text key's pages ([`pages`]): every counted row
/// whose fingerprint is a candidate, filed; and the dictionary pages
/// skipped as repeats. The rows come by value if `by_value`.
async fn file_pages(
    text: &pages::TextPages,
    job: &KeyJob,
    (candidates, by_value): (Arc<Candidates>, bool),
    bits: Option<u32>,
    label: &str,
) -> Result<(Vec<Filed>, u64), Error> {
    let filing = || Filing {
        by_value,
        filed: Filed::new(candidates.len()),
        candidates: candidates.clone(),
        mask: encode::fingerprint_mask(bits),
        nulls_equal: job.nulls_equal,
    };
    let (parts, repeats) = pages::walk(text, label, filing).await?;
    Ok((parts.into_iter().map(|f| f.filed).collect(), repeats))
}

/// The fewest candidates for which a page's rows come by value (a
/// dictionary's tallied, plain values in batches): past them the
/// candidates' filter no longer fits a core's cache.
pub(super) const BY_VALUE: usize = 1 << 14;

/// A run's filed candidates.
struct Filing {
    /// Whether rows come by value (see [`Visit::by_value`]).
    by_value: bool,
    filed: Filed,
    candidates: Arc<Candidates>,
    mask: u64,
    nulls_equal: bool,
}

impl Visit for Filing {
    #[inline]
    fn value(&mut self, fingerprint: u64, value: &[u8]) {
        self.rows(fingerprint, value, 1);
    }

    /// With many candidates, most rows' probes miss the cache; tallied,
    /// a dictionary-encoded row costs an increment (see `decode::Tally`).
    fn by_value(&self) -> bool {
        self.by_value
    }

    fn batch(&mut self, values: &[(u64, &[u8])]) {
        let mask = self.mask;
        self.filed.batch(
            &self.candidates,
            values,
            |(h, _)| h & mask,
            |(_, v)| (1, v, 1),
        );
    }

    #[inline]
    fn rows(&mut self, fingerprint: u64, value: &[u8], rows: u64) {
        if let Some(i) = self.candidates.index(fingerprint & self.mask) {
            self.filed.file(i, 1, value, rows);
        }
    }

    /// Null rows, each of fingerprint 0 (see `encode::fingerprints`).
    fn nulls(&mut self, n: u64) {
        if let (true, Some(i)) = (self.nulls_equal, self.candidates.index(0)) {
            self.filed.file(i, 0, &[], n);
        }
    }
}

/// The kept batches of every scan task: each task's in a blocking task of
/// its own.
async fn file_kept(
    kept: &[Arc<Retainer>],
    job: &KeyJob,
    candidates: &Arc<Candidates>,
    bits: Option<u32>,
) -> Result<(Vec<Filed>, Vec<DataType>), Error> {
    if let Some(t) = kept.iter().find_map(|r| r.text.as_ref()?.data_type.clone()) {
        return Ok((file_kept_text(kept, candidates, &t, bits).await?, vec![t]));
    }
    let Some(types) = kept
        .iter()
        .find_map(|r| r.batches.first())
        .map(|(columns, _)| {
            columns
                .iter()
                .map(|c| c.data_type().clone())
                .collect::<Vec<_>>()
        })
    else {
        return Ok((Vec::new(), Vec::new()));
    };
    let form = Arc::new(Form::of(&types)?);
    let (candidates, nulls_equal) = (candidates.clone(), job.nulls_equal);
    let filed = file_each(kept, move |r| {
        let (mut filed, mut hits) = (Filed::new(candidates.len()), Hits::default());
        for (columns, hashes) in &r.batches {
            let batch = (columns.as_slice(), hashes.as_slice());
            file_batch(
                &mut filed,
                batch,
                &mut hits,
                (&form, &candidates),
                nulls_equal,
            )?;
        }
        Ok(filed)
    })
    .await?;
    Ok((filed, types))
}

/// The rows every scan task kept compactly ([`super::compact`]) whose
/// fingerprint is a candidate, filed: each task's in a blocking task. The
/// kept 16 bits of a row's fingerprint pass it on to be fingerprinted
/// again (as the scan did: `bits`, the column's type) only when some
/// candidate has the same 16 bits.
async fn file_kept_text(
    kept: &[Arc<Retainer>],
    candidates: &Arc<Candidates>,
    data_type: &DataType,
    bits: Option<u32>,
) -> Result<Vec<Filed>, Error> {
    let (candidates, data_type) = (candidates.clone(), data_type.clone());
    file_each(kept, move |r| {
        let (mut filed, mut hashes, mut failed) = (Filed::new(candidates.len()), Vec::new(), None);
        let Some(text) = &r.text else {
            return Ok(filed);
        };
        text.each_maybe(
            |b| candidates.maybe(b),
            |values| {
                if failed.is_some() {
                    return;
                }
                let column = values
                    .iter()
                    .map(|v| v.map(std::str::from_utf8).transpose())
                    .collect::<Result<StringViewArray, _>>()
                    .map_err(|e| Error::Audit(format!("a kept text key is not UTF-8: {e}")))
                    .and_then(|a| Ok(cast(&a, &data_type)?));
                let hashed = column.and_then(|c| {
                    encode::fingerprints(&[c], bits, &mut hashes).map_err(Error::Fingerprint)
                });
                if let Err(e) = hashed {
                    failed = Some(e);
                    return;
                }
                // A batch at a time, each key's misses overlapping the
                // others' (`Filed::batch`).
                let rows: Vec<(Option<&[u8]>, u64)> =
                    values.iter().copied().zip(hashes.iter().copied()).collect();
                for batch in rows.chunks(pages::BATCH) {
                    filed.batch(
                        &candidates,
                        batch,
                        |r| r.1,
                        |r| match r.0 {
                            Some(v) => (1, v, 1),
                            None => (0, &[], 1),
                        },
                    );
                }
            },
        );
        failed.map_or(Ok(filed), Err)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_round_holds_each_word_once_in_its_round() {
        for rounds in [1usize, 2, 7, 64] {
            let words: Vec<u64> = (0..10_000u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (i % 3))
                .collect();
            let by = ByRound::new(words.iter().copied(), rounds);
            let mut all = Vec::new();
            for r in 0..rounds {
                let mine = by.round(r);
                assert!(mine.iter().all(|w| (w % rounds as u64) as usize == r));
                all.extend_from_slice(mine);
            }
            let (mut want, mut got) = (words, all);
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want, "{rounds} rounds");
        }
    }
}
