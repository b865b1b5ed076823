//! The verification pass of fingerprinted keys: which exact keys stand
//! behind the fingerprints that repeat.
//!
//! A fingerprint that occurs more than once is a *candidate*: its rows hold
//! one key repeated, or several keys whose 64-bit hashes collide. This pass
//! reads the key columns again and, for every counted row whose fingerprint
//! is a candidate, files the row's exact key under its fingerprint: a
//! compare with the few keys already filed there (almost always one), and
//! an allocation only for a key not seen before. So a candidate row costs a
//! hash probe and a `memcmp`, whether the column repeats a thousand keys
//! (`unique`) or every key ten times (`distinct_count`).
//!
//! Exact keys are compared as bytes: the value's bytes for a single text
//! column (with a tag byte telling null from the empty string), Arrow's row
//! format otherwise (which keeps NaN and -0.0 apart as the grouped pass
//! does, after [`encode::fold_zeros`]).
//!
//! The rows come from the key columns the first pass kept
//! ([`super::retain`]), when they fitted its budget, or from a new read of
//! the key columns (of a single text key's pages where it can:
//! [`super::pages`]).
//!
//! Memory: the filed keys of all candidates. When they would not fit the
//! budget (a quarter of `--memory-limit`, or 1 GiB), the candidates are split
//! by fingerprint into rounds, each of which goes over the rows again.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray as _, StringViewArray, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::RowConverter;
use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::prelude::SessionContext;

use super::count::Table;
use super::encode;
use super::found::{converter, key_types, owned_rows, rank, values_of};
use super::pages::{self, Visit};
use super::retain::{key_bytes, Retainer};
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
}

/// Budget for the filed keys when no memory limit is set.
const DEFAULT_BUDGET: u64 = 1 << 30;

/// Bytes a filed key costs besides its own bytes (map slot, vector, box).
const PER_KEY: u64 = 80;

/// Verifies the candidates `repeated` (fingerprint, rows), fingerprinted
/// with `bits` as the first pass did.
pub(super) async fn verify(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    repeated: &[(u64, u64)],
    bits: Option<u32>,
    label: &str,
    source: Source,
) -> Result<Exact, Error> {
    let rounds = rounds_for(ctx, input, job, repeated.len() as u64);
    // A single text key read again is hashed from its pages.
    let text = match (&source, job.keys.as_slice()) {
        (Source::Read, [k]) => pages::plan(input, k, threads(ctx)),
        _ => None,
    };
    let mut distinct = 0;
    let mut dups: Vec<(Box<[u8]>, u64)> = Vec::new();
    let mut types = None;
    let mut repeats = 0;
    for round in 0..rounds {
        let mine = |w: &u64| rounds == 1 || (w % rounds as u64) as usize == round;
        let candidates = Candidates::new(repeated.iter().map(|(w, _)| *w).filter(mine));
        let shown = match rounds {
            1 => format!("{label}, verify"),
            n => format!("{label}, verify {}/{n}", round + 1),
        };
        let candidates = Arc::new(candidates);
        let (filed, t) = match &source {
            Source::Kept(kept) => file_kept(kept, job, &candidates, bits).await?,
            Source::Read => match &text {
                // Filed as text, whatever the table's text type.
                Some(text) => {
                    let (filed, skipped) = file_pages(text, job, candidates, bits, &shown).await?;
                    repeats += skipped;
                    (filed, vec![DataType::Utf8View])
                }
                None => file_keys(ctx, input, job, candidates, bits, &shown).await?,
            },
        };
        if !t.is_empty() {
            types = Some(t);
        }
        for keys in filed.into_values() {
            distinct += keys.len() as u64;
            dups.extend(keys.into_iter().filter(|(_, n)| *n > 1));
        }
    }
    let types = match types {
        Some(t) => values_of(&t),
        None => values_of(&key_types(input, job)?),
    };
    let converter = converter(&types)?;
    let rows = owned_rows(&converter, &types, dups)?;
    Ok(Exact {
        duplicates: rank(&converter, &job.keys, rows)?,
        distinct,
        rounds,
        paged: text.is_some(),
        repeats,
    })
}

/// How many rounds keep the filed keys of `candidates` fingerprints within
/// the budget, from the footers' average key size.
fn rounds_for(ctx: &SessionContext, input: &StagedInput, job: &KeyJob, candidates: u64) -> usize {
    let budget = match ctx.runtime_env().memory_pool.memory_limit() {
        MemoryLimit::Finite(limit) => (limit as u64 / 4).max(1 << 20),
        _ => DEFAULT_BUDGET,
    };
    let key_bytes = key_bytes(input, &job.keys);
    let need = candidates.saturating_mul(key_bytes + PER_KEY);
    need.div_ceil(budget).clamp(1, 1024) as usize
}

/// The candidate fingerprints of a round, behind a bit filter: a row is
/// tested against the table only when its fingerprint's filter bit is set.
/// With about 1.5% of the bits set, the test is a load and a branch that
/// is almost always "no", where the table's probe alone ends at a
/// mispredicted branch for every other row (half of its slots are empty).
/// Measured on 50M text keys, the probe was 0.5 s of a 1.2 s verification.
pub(super) struct Candidates {
    table: Table<u64>,
    bits: Vec<u64>,
    mask: u64,
    /// A bit for each value of the candidates' low 16 bits, which is all
    /// that compactly kept text keeps of a fingerprint.
    low16: Vec<u64>,
}

impl Candidates {
    fn new(fingerprints: impl Iterator<Item = u64> + Clone) -> Candidates {
        let n = fingerprints.clone().count();
        // 64 bits a candidate, from 1 Ki to 8 Mi bits (1 MiB).
        let len = (n.saturating_mul(64))
            .next_power_of_two()
            .clamp(1 << 10, 1 << 23);
        let mut table = Table::<u64>::default();
        table.reset(n);
        let mut bits = vec![0u64; len / 64];
        let mut low16 = vec![0u64; (1 << 16) / 64];
        let mask = len as u64 - 1;
        for w in fingerprints {
            table.insert(w);
            let b = Self::bit(w, mask);
            bits[(b >> 6) as usize] |= 1 << (b & 63);
            low16[usize::from(w as u16 >> 6)] |= 1 << (w & 63);
        }
        Candidates {
            table,
            bits,
            mask,
            low16,
        }
    }

    /// Whether some candidate's low 16 bits are `low`.
    #[inline]
    fn maybe(&self, low: u16) -> bool {
        self.low16[usize::from(low >> 6)] & (1 << (low & 63)) != 0
    }

    /// The filter bit of `w`: its low bits, which the table's own slot
    /// (from a multiplied mix) does not follow, and which the test-only
    /// narrow fingerprints keep.
    #[inline]
    fn bit(w: u64, mask: u64) -> u64 {
        w & mask
    }

    #[inline]
    fn contains(&self, w: u64) -> bool {
        let b = Self::bit(w, self.mask);
        self.bits[(b >> 6) as usize] & (1 << (b & 63)) != 0 && self.table.contains(w)
    }
}

/// The exact keys of candidates, filed by fingerprint: (key bytes, rows).
type Filed = HashMap<u64, Vec<(Box<[u8]>, u64)>>;

fn file(filed: &mut Filed, fp: u64, tag: u8, bytes: &[u8], rows: u64) {
    let keys = filed.entry(fp).or_default();
    match keys
        .iter_mut()
        .find(|(k, _)| k[0] == tag && k[1..] == *bytes)
    {
        Some((_, n)) => *n += rows,
        None => {
            let mut key = Vec::with_capacity(bytes.len() + 1);
            key.push(tag);
            key.extend_from_slice(bytes);
            keys.push((key.into_boxed_slice(), rows));
        }
    }
}

/// How a row's exact key becomes bytes. Filed here, a key carries a tag
/// byte before them: 0 for a null text value, 1 otherwise.
pub(super) enum Form {
    /// A single text column: the value's bytes.
    Text,
    /// Arrow's row format.
    Rows(RowConverter),
}

impl Form {
    /// The form of keys of `types`: text (in a dictionary too) as text,
    /// anything else as rows of the types' values ([`values_of`]).
    pub(super) fn of(types: &[DataType]) -> Result<Form, Error> {
        Ok(match values_of(types).as_slice() {
            [DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View] => Form::Text,
            types => Form::Rows(converter(types)?),
        })
    }
}

/// `columns` at rows `hit`, each dictionary as its values.
fn taken_values(columns: &[ArrayRef], hit: &[u32]) -> Result<Vec<ArrayRef>, Error> {
    let idx = UInt32Array::from(hit.to_vec());
    (columns.iter())
        .map(|c| {
            let taken = take(c.as_ref(), &idx, None)?;
            Ok(match c.data_type() {
                DataType::Dictionary(_, v) => cast(&taken, v)?,
                _ => taken,
            })
        })
        .collect()
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
) -> Result<(Filed, Vec<DataType>), Error> {
    let (streams, _bar) = streams(ctx, input, &job.keys, label).await?;
    let types = match streams.first() {
        Some(s) => s
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect(),
        None => key_types(input, job)?,
    };
    let form = Arc::new(Form::of(&types)?);
    let nulls_equal = job.nulls_equal;
    let filed = scan(
        streams,
        || (Filed::new(), Vec::new(), Vec::new()),
        move |(filed, hashes, hit): &mut (Filed, Vec<u64>, Vec<u32>), columns| {
            encode::fingerprints(columns, bits, hashes).map_err(Error::Fingerprint)?;
            file_batch(
                filed,
                (columns, hashes.as_slice()),
                hit,
                &form,
                &candidates,
                nulls_equal,
            )
        },
    )
    .await?;
    Ok((merge(filed.into_iter().map(|(f, _, _)| f)), types))
}

/// One read of a single text key's pages ([`pages`]): every counted row
/// whose fingerprint is a candidate, filed; and the dictionary pages
/// skipped as repeats.
async fn file_pages(
    text: &pages::TextPages,
    job: &KeyJob,
    candidates: Arc<Candidates>,
    bits: Option<u32>,
    label: &str,
) -> Result<(Filed, u64), Error> {
    let filing = || Filing {
        filed: Filed::new(),
        candidates: candidates.clone(),
        mask: encode::fingerprint_mask(bits),
        nulls_equal: job.nulls_equal,
    };
    let (parts, repeats) = pages::walk(text, label, filing).await?;
    Ok((merge(parts.into_iter().map(|f| f.filed)), repeats))
}

/// A run's filed candidates.
struct Filing {
    filed: Filed,
    candidates: Arc<Candidates>,
    mask: u64,
    nulls_equal: bool,
}

impl Visit for Filing {
    #[inline]
    fn value(&mut self, fingerprint: u64, value: &[u8]) {
        let fp = fingerprint & self.mask;
        if self.candidates.contains(fp) {
            file(&mut self.filed, fp, 1, value, 1);
        }
    }

    /// Null rows, each of fingerprint 0 (see `encode::fingerprints`).
    fn nulls(&mut self, n: u64) {
        if self.nulls_equal && n > 0 && self.candidates.contains(0) {
            file(&mut self.filed, 0, 0, &[], n);
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
) -> Result<(Filed, Vec<DataType>), Error> {
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
        return Ok((Filed::new(), Vec::new()));
    };
    let form = Arc::new(Form::of(&types)?);
    let (candidates, nulls_equal) = (candidates.clone(), job.nulls_equal);
    let filed = file_each(kept, move |r| {
        let (mut filed, mut hit) = (Filed::new(), Vec::new());
        for (columns, hashes) in &r.batches {
            let batch = (columns.as_slice(), hashes.as_slice());
            file_batch(&mut filed, batch, &mut hit, &form, &candidates, nulls_equal)?;
        }
        Ok(filed)
    })
    .await?;
    Ok((filed, types))
}

/// `file` of every scan task's kept rows, each in a blocking task of its
/// own, merged in task order.
async fn file_each(
    kept: &[Arc<Retainer>],
    file: impl Fn(&Retainer) -> Result<Filed, Error> + Send + Sync + 'static,
) -> Result<Filed, Error> {
    let file = Arc::new(file);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, r) in kept.iter().enumerate() {
        let (r, file) = (r.clone(), file.clone());
        tasks.spawn_blocking(move || Ok::<_, Error>((i, file(&r)?)));
    }
    let mut parts = Vec::new();
    while let Some(done) = tasks.join_next().await {
        parts.push(done.map_err(|e| Error::Audit(format!("a key check task failed: {e}")))??);
    }
    parts.sort_by_key(|(i, _)| *i);
    Ok(merge(parts.into_iter().map(|(_, f)| f)))
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
) -> Result<Filed, Error> {
    let (candidates, data_type) = (candidates.clone(), data_type.clone());
    file_each(kept, move |r| {
        let (mut filed, mut hashes, mut failed) = (Filed::new(), Vec::new(), None);
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
                for (&v, &fp) in values.iter().zip(&hashes) {
                    if candidates.contains(fp) {
                        file_text_value(&mut filed, fp, v);
                    }
                }
            },
        );
        failed.map_or(Ok(filed), Err)
    })
    .await
}

/// Files the counted rows of one batch whose fingerprint (`hashes`) is a
/// candidate.
fn file_batch(
    filed: &mut Filed,
    (columns, hashes): (&[ArrayRef], &[u64]),
    hit: &mut Vec<u32>,
    form: &Form,
    candidates: &Candidates,
    nulls_equal: bool,
) -> Result<(), Error> {
    let counted = encode::counted_rows(columns, nulls_equal);
    hit.clear();
    hit.extend(
        (0..hashes.len())
            .filter(|&i| {
                counted.as_ref().is_none_or(|v| v.is_valid(i)) && candidates.contains(hashes[i])
            })
            .map(|i| i as u32),
    );
    if hit.is_empty() {
        return Ok(());
    }
    match form {
        Form::Text => file_text(filed, hashes, hit, &columns[0])?,
        Form::Rows(conv) => file_rows(filed, hashes, hit, columns, conv)?,
    }
    Ok(())
}

/// One filing of the keys of several.
fn merge(parts: impl IntoIterator<Item = Filed>) -> Filed {
    let mut all = Filed::new();
    for part in parts {
        if all.is_empty() {
            all = part;
            continue;
        }
        for (fp, keys) in part {
            for (k, n) in keys {
                file(&mut all, fp, k[0], &k[1..], n);
            }
        }
    }
    all
}

/// Files one row of a text key (`None`: null).
fn file_text_value(filed: &mut Filed, fp: u64, value: Option<&[u8]>) {
    match value {
        Some(v) => file(filed, fp, 1, v, 1),
        None => file(filed, fp, 0, &[], 1),
    }
}

fn file_text(
    filed: &mut Filed,
    hashes: &[u64],
    hit: &[u32],
    column: &ArrayRef,
) -> Result<(), Error> {
    if let DataType::Dictionary(..) = column.data_type() {
        let taken = cast(
            &taken_values(std::slice::from_ref(column), hit)?[0],
            &DataType::Utf8View,
        )?;
        let a = taken.as_string_view();
        for (j, &i) in hit.iter().enumerate() {
            let value = a.is_valid(j).then(|| a.value(j).as_bytes());
            file_text_value(filed, hashes[i as usize], value);
        }
        return Ok(());
    }
    let mut put = |i: usize, value: Option<&[u8]>| file_text_value(filed, hashes[i], value);
    let rows = hit.iter().map(|&i| i as usize);
    match column.data_type() {
        DataType::Utf8View => {
            let a = column.as_string_view();
            rows.for_each(|i| put(i, a.is_valid(i).then(|| a.value(i).as_bytes())));
        }
        DataType::LargeUtf8 => {
            let a = column.as_string::<i64>();
            rows.for_each(|i| put(i, a.is_valid(i).then(|| a.value(i).as_bytes())));
        }
        _ => {
            let a = column.as_string::<i32>();
            rows.for_each(|i| put(i, a.is_valid(i).then(|| a.value(i).as_bytes())));
        }
    }
    Ok(())
}

fn file_rows(
    filed: &mut Filed,
    hashes: &[u64],
    hit: &[u32],
    columns: &[ArrayRef],
    converter: &RowConverter,
) -> Result<(), Error> {
    let taken = taken_values(&encode::fold_zeros(columns), hit)?;
    let rows = converter.convert_columns(&taken)?;
    for (j, row) in rows.iter().enumerate() {
        file(filed, hashes[hit[j] as usize], 1, row.as_ref(), 1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter only ever says "no" early: every candidate is found,
    /// whatever its bits (narrow test fingerprints, the empty word, a
    /// filter saturated by more candidates than its bits), and nothing
    /// else is.
    #[test]
    fn candidates_are_found_and_nothing_else() {
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 7);
        for (n, narrow) in [
            (0u64, None),
            (1, None),
            (1000, None),
            (300_000, Some(12u32)),
        ] {
            let cut = |w: u64| narrow.map_or(w, |b| w & ((1 << b) - 1));
            let words: Vec<u64> = (0..n).map(|i| cut(mix(2 * i))).collect();
            let c = Candidates::new(words.iter().copied());
            assert!(words.iter().all(|w| c.contains(*w)), "{n} candidates");
            let wanted: std::collections::HashSet<u64> = words.iter().copied().collect();
            let strays = (0..20_000u64)
                .map(|i| cut(mix(2 * i + 1)))
                .filter(|w| c.contains(*w) && !wanted.contains(w))
                .count();
            assert_eq!(strays, 0, "{n} candidates");
        }
        let with_empty = Candidates::new([0u64, 5].into_iter());
        assert!(with_empty.contains(0) && with_empty.contains(5) && !with_empty.contains(6));
    }
}
