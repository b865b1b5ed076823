//! The joins of keys that pack into no word (text of any shape, composites
//! with a text part): the distinct staged keys, exact, with their rows, in
//! one table by fingerprint behind the probing filter; the other side is
//! hashed as it streams, and only the few rows that pass the filter are
//! compared with a staged key as bytes. The keys it finds are
//! [`Want::Present`](super::Want::Present) (`unique(k) across published`);
//! the rest, with their rows, are [`Want::Missing`](super::Want::Missing)
//! (`values(k) in REF(k)`).
//!
//! Exactness never depends on the hash: a staged key is found only when the
//! other side's key bytes equal it, and keys whose fingerprints collide sit
//! in the table side by side. Keys are compared as their value's bytes for
//! a single text column, as Arrow's row format otherwise (both sides cast
//! to the same types first: text as `Utf8View`, the rest to the compared
//! type). Floats are left to the grouped join, which compares NaN and -0.0
//! its own way.
//!
//! Memory: the staged keys' bytes, an entry, a count and up to three
//! slots of 32 bytes a distinct key (see `keyset`), reserved from the pool
//! before the build; the other side is not stored. A lookup
//! ([`Fingerprinted::with_most_keys`]) gives up past that many keys in a
//! scan task ([`GaveUp::TooManyKeys`]), for its caller's fallback.

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, UInt32Type};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::prelude::SessionContext;

use super::job::{parts_of, side_streams, Joined, Side, Want};
use super::keyset::{room, KeySet, ENTRY, SLOT, TOUCHED};
use super::probe::{each_passing, filter_spot, PROBE_ROWS};
use crate::exec::keys::encode;
use crate::exec::keys::hits::Form;
use crate::exec::keys::key::Key;
use crate::exec::keys::tasks::{scan, threads};
use crate::exec::keys::GaveUp;
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;
use crate::value::Value;

/// What a fingerprinted join takes: the staged key types (for samples),
/// the types both sides are compared in, and what the staged keys are
/// expected to cost.
#[derive(Debug, Clone)]
pub struct Fingerprinted {
    pub(super) staged: Vec<DataType>,
    pub(super) compared: Vec<DataType>,
    /// Expected bytes of one staged key, from the footers.
    pub(super) key_bytes: u64,
    /// The test-only collision switch: keep only this many bits of each
    /// fingerprint.
    pub(super) bits: Option<u32>,
    /// The most distinct staged keys a scan task's table may hold: past
    /// it, the build gives up ([`GaveUp::TooManyKeys`]).
    pub(super) most_keys: Option<usize>,
}

impl Fingerprinted {
    /// Expected bytes of one staged key, from the footers.
    pub fn key_bytes(&self) -> u64 {
        self.key_bytes
    }

    /// The same join, giving up past `most` distinct staged keys in a
    /// scan task's table.
    pub fn with_most_keys(self, most: usize) -> Fingerprinted {
        Fingerprinted {
            most_keys: Some(most),
            ..self
        }
    }
}

/// The fingerprinted join of keys of `staged` types compared in `compared`
/// types, or `None` when a part is a float or a type the engine does not
/// compare (nested, intervals).
pub fn fingerprinted_for(
    staged: &[DataType],
    compared: &[DataType],
    key_bytes: u64,
    bits: Option<u32>,
) -> Option<Fingerprinted> {
    let compared: Vec<DataType> = compared.iter().map(as_compared).collect::<Option<_>>()?;
    (staged.len() == compared.len() && !compared.is_empty()).then(|| Fingerprinted {
        staged: staged.to_vec(),
        compared,
        key_bytes,
        bits,
        most_keys: None,
    })
}

/// The type a key part is compared in, `None` when the engine leaves it to
/// the grouped join.
fn as_compared(t: &DataType) -> Option<DataType> {
    use DataType::*;
    match t {
        Utf8 | LargeUtf8 | Utf8View => Some(Utf8View),
        Dictionary(_, v) => as_compared(v),
        Binary | LargeBinary | BinaryView | FixedSizeBinary(_) => Some(t.clone()),
        Boolean | Date32 | Date64 | Timestamp(..) | Decimal128(..) | Decimal256(..) => {
            Some(t.clone())
        }
        t if t.is_integer() => Some(t.clone()),
        _ => None,
    }
}

/// How the engine joins fingerprinted keys, for `explain`.
pub fn describe_fingerprinted() -> String {
    "by the key engine: the distinct staged keys in one table by 64-bit fingerprint, behind a blocked filter; each other-side key is hashed as it streams, and only those that pass the filter are compared with a staged key as bytes".into()
}

/// Whether a staged side of `rows` rows may be held in the in-place table:
/// at most [`PROBE_ROWS`] (a test build takes another bound from
/// `DQGATE_TEST_PROBE_ROWS`); a larger one is spread.
pub fn in_place(rows: u64) -> bool {
    rows <= crate::hooks::probe_rows().unwrap_or(PROBE_ROWS)
}

/// The table's memory, reserved from the pool, when the staged side fits
/// the engine's table: a lookup's at most keys, else its rows if at most
/// [`in_place`] allows.
pub(super) fn fits(
    ctx: &SessionContext,
    plan: &Fingerprinted,
    rows: u64,
) -> Option<MemoryReservation> {
    // A lookup's table gives up past its most keys in a scan task, so it
    // never holds more, whatever the staged rows: 50M rows of 150,000
    // e-mail addresses were spread into 3.3 GB of radix partitions, as if
    // every row could be a key.
    let keys = match plan.most_keys {
        Some(most) => rows.min(most.saturating_mul(threads(ctx)) as u64),
        None if in_place(rows) => rows,
        None => return None,
    };
    let filter = (1usize << filter_bits(keys)) / 8;
    // A key's bytes, its entry, its rows and up to three slots (at most
    // three quarters taken, a power of two of them); and half as much
    // again while the scan tasks' sets merge into the largest.
    let per_key = plan.key_bytes as usize + ENTRY + 8 + 3 * SLOT;
    let bytes = keys as usize * per_key * 3 / 2 + filter;
    let pool = &ctx.runtime_env().memory_pool;
    let reservation = MemoryConsumer::new("dqgate fingerprint join").register(pool);
    reservation.try_grow(bytes).ok()?;
    Some(reservation)
}

/// Bits of the filter in front of `keys` staged keys: about 16 a key,
/// half the packed probe's. Every other-side row tests it, and at 365M
/// published rows against 1M staged ULIDs a filter of 2 MiB probed about
/// 10% faster than one of 4 MiB (5.6 to 6.4 s against 5.9 to 8.1 s): more
/// of it stays in the cores' caches, and the extra false positives (a
/// slot load each) cost less than that.
fn filter_bits(keys: u64) -> u32 {
    (keys.max(1) * 16)
        .next_power_of_two()
        .trailing_zeros()
        .clamp(16, 31)
}

/// The staged side of the join, built: its distinct keys, the filter in
/// front of them, and how long they took.
pub struct StagedKeys {
    set: KeySet,
    filter: Vec<u64>,
    /// 64 minus the bits of a filter word's index.
    shift: u32,
    form: Arc<Form>,
    plan: Fingerprinted,
    built: std::time::Duration,
    /// The pool's share, held until the join ends.
    _reserved: MemoryReservation,
}

/// Reads the staged side into its table and filter.
pub(super) async fn build(
    staged: Side,
    plan: &Fingerprinted,
    reserved: MemoryReservation,
    label: &str,
) -> Result<StagedKeys, Error> {
    let started = Instant::now();
    let form = Arc::new(Form::of(&plan.compared)?);
    let mut parts = match staged.pages_as(&plan.compared) {
        Some(pages) => {
            let bytes = plan.key_bytes as usize;
            super::paged::sets(pages, (plan.most_keys, bytes, plan.bits), label).await?
        }
        None => streamed_sets(staged, plan, form.clone(), label).await?,
    };
    parts.sort_by_key(|s| std::cmp::Reverse(s.entries.len()));
    let mut parts = parts.into_iter();
    let mut set = parts.next().unwrap_or_default();
    let rest: Vec<KeySet> = parts.collect();
    // Room for every key of the others at once (one placing of the slots
    // again, not one a doubling), unless the keys are expected to be few
    // (a lookup): then the tasks have seen mostly the same keys, and the
    // set grows only for those it lacks.
    if plan.most_keys.is_none() {
        set.reserve(rest.iter().map(|s| s.entries.len()).sum(), 0);
    }
    for part in &rest {
        set.merge(part);
    }
    set.finish();
    let filter_bits = filter_bits(set.entries.len() as u64);
    let shift = 64 - (filter_bits - 6);
    let mut filter = vec![0u64; 1 << (filter_bits - 6)];
    for e in &set.entries {
        let (i, m) = filter_spot(e.fp.mix(), shift);
        filter[i] |= m;
    }
    Ok(StagedKeys {
        set,
        filter,
        shift,
        form,
        plan: plan.clone(),
        built: started.elapsed(),
        _reserved: reserved,
    })
}

/// The staged keys of `staged` read as batches, each scan task's in a set
/// of its own.
async fn streamed_sets(
    staged: Side,
    plan: &Fingerprinted,
    shape: Arc<Form>,
    label: &str,
) -> Result<Vec<KeySet>, Error> {
    let rows = staged.rows;
    let (streams, bar) = side_streams(staged, label).await?;
    let (compared, bits, most) = (plan.compared.clone(), plan.bits, plan.most_keys);
    let share = room(rows, streams.len(), most);
    let key_bytes = plan.key_bytes as usize;
    let parts = scan(
        streams,
        move || (KeySet::with_capacity(share, share * key_bytes), Vec::new()),
        move |(set, hashes): &mut (KeySet, Vec<u64>), columns| {
            let columns = as_types(columns, &compared)?;
            encode::fingerprints(&columns, bits, hashes).map_err(Error::Fingerprint)?;
            let counted = encode::counted_rows(&columns, false);
            // A few hundred rows at a time, so that the slots `touch`
            // loaded are still in the core's cache when the adds come.
            for from in (0..hashes.len()).step_by(TOUCHED) {
                let to = (from + TOUCHED).min(hashes.len());
                set.touch(&hashes[from..to]);
                let rows = (from..to).filter(|&i| counted.as_ref().is_none_or(|c| c.is_valid(i)));
                shape.each_key(&columns, rows, |i, key| set.add(hashes[i], key, 1))?;
            }
            match most {
                Some(most) if set.entries.len() > most => Err(GaveUp::TooManyKeys(most).into()),
                _ => Ok(()),
            }
        },
    )
    .await?;
    drop(bar);
    Ok(parts.into_iter().map(|(s, _)| s).collect())
}

/// The join: the distinct staged keys the other side holds too
/// ([`Want::Present`]), or the staged rows whose key it lacks
/// ([`Want::Missing`]).
pub(super) async fn probe(
    staged: StagedKeys,
    other: Side,
    want: Want,
    label: &str,
) -> Result<Joined, Error> {
    let StagedKeys {
        set,
        filter,
        shift,
        form,
        plan,
        built,
        _reserved,
    } = staged;
    let bits = plan.bits;
    let probing = Instant::now();
    let shared = Arc::new((set, filter));
    let (streams, bar) = side_streams(other, &format!("{label}, other side")).await?;
    let (seen, compared, width) = (shared.clone(), plan.compared.clone(), plan.compared.len());
    let probing_form = form.clone();
    let entries = shared.0.entries.len();
    let found = scan(
        streams,
        move || Probe::new(entries),
        move |probe: &mut Probe, columns| {
            let rows = columns.first().map_or(0, |c| c.len());
            probe.rows += rows as u64;
            // The other side's part, when its batches carry one (a batch
            // never spans two parts).
            let part = columns
                .get(width)
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
                .filter(|a| !a.is_empty())
                .map(|a| a.value(0));
            let keys = as_types(&columns[..width.min(columns.len())], &compared)?;
            let (set, filter) = &*seen;
            let Probe {
                found,
                hashes,
                hit,
                located,
                ..
            } = probe;
            encode::fingerprints(&keys, bits, hashes).map_err(Error::Fingerprint)?;
            let counted = encode::counted_rows(&keys, false);
            hit.clear();
            each_passing(filter, shift, hashes, |i| {
                if counted.as_ref().is_none_or(|v| v.is_valid(i)) {
                    hit.push(i as u32);
                }
            });
            if hit.is_empty() {
                return Ok(());
            }
            let rows = hit.iter().map(|&i| i as usize);
            probing_form.each_key(&keys, rows, |i, key| {
                if let Some(e) = set.find(hashes[i], key) {
                    found[e as usize >> 6] |= 1 << (e & 63);
                    if let Some(p) = part {
                        located.push((e, p));
                    }
                }
            })
        },
    )
    .await?;
    drop(bar);
    let read: u64 = found.iter().map(|p| p.rows).sum();
    let mut all = vec![0u64; entries.div_ceil(64)];
    let mut located: Vec<(u32, u32)> = Vec::new();
    for p in found {
        all.iter_mut().zip(&p.found).for_each(|(a, f)| *a |= f);
        located.extend(p.located);
    }
    let (set, _) = &*shared;
    let (hits, value) = set.reported(&all, want);
    // Every find is located when the other side's batches carry their
    // part, none when they do not (nor for keys it lacks).
    let numbered = want == Want::Present && (hits.is_empty() || !located.is_empty());
    located.sort_unstable();
    located.dedup();
    let best = set.top(hits, SAMPLES);
    let located = numbered.then(|| parts_of(&located, best.iter().copied()));
    let samples = form.decode(set, &best, &plan.staged)?;
    Ok(Joined {
        value,
        samples,
        located,
        passes: vec![
            format!(
                "table and filter of the {} distinct staged key(s) (64-bit fingerprints, keys compared as bytes): {:.2} s",
                set.entries.len(),
                built.as_secs_f64()
            ),
            format!(
                "probe {read} other-side row(s), {value} {}: {:.2} s",
                want.outcome(),
                probing.elapsed().as_secs_f64()
            ),
        ],
    })
}

/// `columns` cast to `types` where they differ.
pub(super) fn as_types(columns: &[ArrayRef], types: &[DataType]) -> Result<Vec<ArrayRef>, Error> {
    columns
        .iter()
        .zip(types)
        .map(|(c, t)| {
            if c.data_type() == t {
                Ok(c.clone())
            } else {
                cast(c, t).map_err(Error::from)
            }
        })
        .collect()
}

/// How the fingerprinted join turns keys into bytes and back: a single
/// text column is always `Utf8View` here (see [`as_compared`]).
impl Form {
    /// Calls `f` with the key bytes of each of `rows` (of `columns`, cast
    /// to the compared types).
    pub(super) fn each_key(
        &self,
        columns: &[ArrayRef],
        rows: impl Iterator<Item = usize>,
        mut f: impl FnMut(usize, &[u8]),
    ) -> Result<(), Error> {
        match self {
            Form::Text => {
                let a = columns[0].as_string_view();
                rows.for_each(|i| f(i, a.value(i).as_bytes()));
            }
            Form::Rows(converter) => {
                let rows: Vec<u32> = rows.map(|i| i as u32).collect();
                let idx = UInt32Array::from(rows.clone());
                let taken = columns
                    .iter()
                    .map(|c| take(c.as_ref(), &idx, None))
                    .collect::<Result<Vec<_>, _>>()?;
                let converted = converter.convert_columns(&taken)?;
                for (j, row) in converted.iter().enumerate() {
                    f(rows[j] as usize, row.as_ref());
                }
            }
        }
        Ok(())
    }

    /// The keys of `entries` as values of the `staged` types.
    pub(super) fn decode(
        &self,
        set: &KeySet,
        entries: &[u32],
        staged: &[DataType],
    ) -> Result<Vec<(Vec<Value>, u64)>, Error> {
        let columns: Vec<ArrayRef> = match self {
            Form::Text => {
                let values = entries
                    .iter()
                    .map(|e| std::str::from_utf8(set.key(*e)).map(Some))
                    .collect::<Result<datafusion::arrow::array::StringViewArray, _>>()
                    .map_err(|e| Error::Audit(format!("a text key is not UTF-8: {e}")))?;
                vec![Arc::new(values)]
            }
            Form::Rows(converter) => {
                let parser = converter.parser();
                let rows: Vec<_> = entries.iter().map(|e| parser.parse(set.key(*e))).collect();
                converter.convert_rows(rows.iter().copied())?
            }
        };
        let columns = as_types(&columns, staged)?;
        entries
            .iter()
            .enumerate()
            .map(|(r, e)| {
                let key = columns
                    .iter()
                    .map(|c| crate::exec::topk::value_at(c.as_ref(), r))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((key, set.rows[*e as usize]))
            })
            .collect()
    }
}

/// A probing task's state: the staged entries it found (a bit each), its
/// fingerprints and filter hits of the batch, the rows it read, and
/// (entry, part) of each find.
struct Probe {
    found: Vec<u64>,
    hashes: Vec<u64>,
    hit: Vec<u32>,
    rows: u64,
    located: Vec<(u32, u32)>,
}

impl Probe {
    fn new(entries: usize) -> Probe {
        Probe {
            found: vec![0; entries.div_ceil(64)],
            hashes: Vec::new(),
            hit: Vec::new(),
            rows: 0,
            located: Vec::new(),
        }
    }
}
