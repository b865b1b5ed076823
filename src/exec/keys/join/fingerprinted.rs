//! [`Want::Present`](super::Want::Present) for keys that pack into no word
//! (text of any shape, composites with a text part): the distinct staged
//! keys, exact, in one table by fingerprint behind the probing filter; the
//! other side is hashed as it streams, and only the few rows that pass the
//! filter are compared with a staged key as bytes.
//!
//! Exactness never depends on the hash: a staged key is found only when the
//! other side's key bytes equal it, and keys whose fingerprints collide sit
//! in the table side by side. Keys are compared as their value's bytes for
//! a single text column, as Arrow's row format otherwise (both sides cast
//! to the same types first: text as `Utf8View`, the rest to the compared
//! type). Floats are left to the grouped join, which compares NaN and -0.0
//! its own way.
//!
//! Memory: the staged keys' bytes and one entry a distinct key, reserved
//! from the pool before the build; the other side is not stored.

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, UInt32Type};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::prelude::SessionContext;

use super::job::{parts_of, side_streams, Joined, Side};
use super::probe::{each_passing, filter_spot, PROBE_ROWS};
use crate::exec::keys::encode;
use crate::exec::keys::key::Key;
use crate::exec::keys::tasks::scan;
use crate::exec::keys::verify::Form;
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;
use crate::value::Value;

/// What a fingerprinted join takes: the staged key types (for samples),
/// the types both sides are compared in, and what the staged keys are
/// expected to cost.
#[derive(Debug, Clone)]
pub struct Fingerprinted {
    staged: Vec<DataType>,
    compared: Vec<DataType>,
    /// Expected bytes of one staged key, from the footers.
    key_bytes: u64,
    /// The test-only collision switch: keep only this many bits of each
    /// fingerprint.
    bits: Option<u32>,
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

/// The table's memory, reserved from the pool, when the staged side fits
/// the engine's table.
pub(super) fn fits(
    ctx: &SessionContext,
    plan: &Fingerprinted,
    rows: u64,
) -> Option<MemoryReservation> {
    if rows > PROBE_ROWS {
        return None;
    }
    let filter = (1usize << filter_bits(rows)) / 8;
    // A key's bytes, its entry and two slots of 8 bytes; and half as much
    // again while the scan tasks' sets merge into the largest.
    let bytes = rows as usize * (plan.key_bytes as usize + ENTRY + 16) * 3 / 2 + filter;
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

/// Bytes of an [`Entry`].
const ENTRY: usize = std::mem::size_of::<Entry>();

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
    let rows = staged.rows as usize;
    let (streams, bar) = side_streams(staged, label).await?;
    let (compared, bits) = (plan.compared.clone(), plan.bits);
    let shape = form.clone();
    // Each task's set sized for its share of the rows, so that it never
    // grows (growing copies the keys and rehashes them).
    let share = rows.div_ceil(streams.len().max(1));
    let key_bytes = plan.key_bytes as usize;
    let parts = scan(
        streams,
        move || (KeySet::with_capacity(share, share * key_bytes), Vec::new()),
        move |(set, hashes): &mut (KeySet, Vec<u64>), columns| {
            let columns = as_types(columns, &compared)?;
            encode::fingerprints(&columns, bits, hashes).map_err(Error::Fingerprint)?;
            let counted = encode::counted_rows(&columns, false);
            let rows =
                (0..hashes.len()).filter(|&i| counted.as_ref().is_none_or(|c| c.is_valid(i)));
            set.touch(hashes);
            shape.each_key(&columns, rows, |i, key| set.add(hashes[i], key, 1))
        },
    )
    .await?;
    drop(bar);
    let mut parts: Vec<KeySet> = parts.into_iter().map(|(s, _)| s).collect();
    parts.sort_by_key(|s| std::cmp::Reverse(s.entries.len()));
    let mut parts = parts.into_iter();
    let mut set = parts.next().unwrap_or_default();
    let rest: Vec<KeySet> = parts.collect();
    set.reserve(
        rest.iter().map(|s| s.entries.len()).sum(),
        rest.iter().map(|s| s.bytes.len()).sum(),
    );
    for part in &rest {
        set.merge(part);
    }
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

/// The join: every distinct staged key the other side holds too.
pub(super) async fn probe(staged: StagedKeys, other: Side, label: &str) -> Result<Joined, Error> {
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
    let hits: Vec<u32> = (0..entries as u32)
        .filter(|e| all[*e as usize >> 6] & (1 << (e & 63)) != 0)
        .collect();
    // Every find is located when the other side's batches carry their
    // part, none when they do not.
    let numbered = hits.is_empty() || !located.is_empty();
    located.sort_unstable();
    located.dedup();
    let (set, _) = &*shared;
    let value = hits.len() as u64;
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
                "probe {read} other-side row(s), {value} staged key(s) also there: {:.2} s",
                probing.elapsed().as_secs_f64()
            ),
        ],
    })
}

/// `columns` cast to `types` where they differ.
fn as_types(columns: &[ArrayRef], types: &[DataType]) -> Result<Vec<ArrayRef>, Error> {
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
    fn each_key(
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
    fn decode(
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
                Ok((key, set.entries[*e as usize].rows))
            })
            .collect()
    }
}

/// One distinct key: its fingerprint, where its bytes lie, and its rows.
#[derive(Debug, Clone, Copy)]
struct Entry {
    fp: u64,
    start: u64,
    len: u32,
    rows: u64,
}

/// Distinct exact keys by fingerprint: an open-addressing table of entry
/// numbers (keys whose fingerprints collide take slots side by side), the
/// entries, and their bytes end to end. A slot keeps 32 bits of its key's
/// mixed fingerprint beside the entry number, so a probe that meets
/// another key's slot rarely has to load that key's entry.
#[derive(Default)]
struct KeySet {
    /// `tag << 32 | (entry number + 1)`; 0 is an empty slot.
    slots: Vec<u64>,
    entries: Vec<Entry>,
    bytes: Vec<u8>,
}

/// The first slot of a fingerprint (in a table of `mask + 1` slots) and
/// the tag its slots carry.
#[inline]
fn slot_of(fp: u64, mask: usize) -> (usize, u64) {
    let h = fp.mix();
    ((h as usize) & mask, h >> 32)
}

impl KeySet {
    fn key(&self, e: u32) -> &[u8] {
        let Entry { start, len, .. } = self.entries[e as usize];
        &self.bytes[start as usize..start as usize + len as usize]
    }

    /// Where `key` (fingerprint `fp`) is: `Ok(entry)`, or `Err(slot)`, the
    /// empty slot it would take.
    #[inline]
    fn locate(&self, fp: u64, key: &[u8]) -> Result<u32, usize> {
        let mask = self.slots.len() - 1;
        let (mut i, tag) = slot_of(fp, mask);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return Err(i);
            }
            let e = (s as u32).wrapping_sub(1);
            if s >> 32 == tag && self.entries[e as usize].fp == fp && self.key(e) == key {
                return Ok(e);
            }
            i = (i + 1) & mask;
        }
    }

    /// The entry of `key`, whose fingerprint is `fp`.
    #[inline]
    fn find(&self, fp: u64, key: &[u8]) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.locate(fp, key).ok()
    }

    /// Loads the first slot of each of `fps`, so that the adds that follow
    /// find them in the cache: the loads do not depend on each other and
    /// overlap, where each add waits for its own.
    fn touch(&self, fps: &[u64]) {
        if self.slots.is_empty() {
            return;
        }
        let mask = self.slots.len() - 1;
        let mut sum = 0u64;
        for fp in fps {
            sum = sum.wrapping_add(self.slots[slot_of(*fp, mask).0]);
        }
        std::hint::black_box(sum);
    }

    /// Counts `rows` more rows of `key`.
    fn add(&mut self, fp: u64, key: &[u8], rows: u64) {
        if (self.entries.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        match self.locate(fp, key) {
            Ok(e) => self.entries[e as usize].rows += rows,
            Err(i) => {
                self.entries.push(Entry {
                    fp,
                    start: self.bytes.len() as u64,
                    len: key.len() as u32,
                    rows,
                });
                self.bytes.extend_from_slice(key);
                let tag = slot_of(fp, 0).1;
                self.slots[i] = tag << 32 | self.entries.len() as u64;
            }
        }
    }

    /// An empty set for `keys` keys of `bytes` bytes in all.
    fn with_capacity(keys: usize, bytes: usize) -> KeySet {
        let mut set = KeySet::default();
        set.reserve(keys, bytes);
        set
    }

    /// Room for `keys` more keys of `bytes` more bytes in all.
    fn reserve(&mut self, keys: usize, bytes: usize) {
        self.entries.reserve(keys);
        self.bytes.reserve(bytes);
        let want = ((self.entries.len() + keys) * 2).next_power_of_two();
        if want > self.slots.len() {
            self.rehash(want);
        }
    }

    fn grow(&mut self) {
        self.rehash((self.slots.len() * 2).max(1024));
    }

    /// Every entry in a table of `n` slots.
    fn rehash(&mut self, n: usize) {
        self.slots = vec![0; n];
        let mask = n - 1;
        for (e, entry) in self.entries.iter().enumerate() {
            let (mut i, tag) = slot_of(entry.fp, mask);
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = tag << 32 | (e as u64 + 1);
        }
    }

    /// Adds every key of `other` with its rows.
    fn merge(&mut self, other: &KeySet) {
        for (e, entry) in other.entries.iter().enumerate() {
            self.add(entry.fp, other.key(e as u32), entry.rows);
        }
    }

    /// The `k` entries of `hits` with the most rows, then the smallest key
    /// bytes (which order as the keys do: text bytes, and Arrow's row
    /// format, ascending), in that order.
    fn top(&self, mut hits: Vec<u32>, k: usize) -> Vec<u32> {
        let order = |a: &u32, b: &u32| {
            let (x, y) = (&self.entries[*a as usize], &self.entries[*b as usize]);
            y.rows
                .cmp(&x.rows)
                .then_with(|| self.key(*a).cmp(self.key(*b)))
        };
        if hits.len() > k && k > 0 {
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.truncate(k);
        hits.sort_unstable_by(order);
        hits
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys whose fingerprints collide are kept apart and found exactly.
    #[test]
    fn colliding_fingerprints_keep_their_keys_apart() {
        let mut set = KeySet::default();
        let keys: Vec<String> = (0..5000).map(|i| format!("key-{i}")).collect();
        for (i, k) in keys.iter().enumerate() {
            // Eight fingerprints for 5,000 keys.
            set.add((i % 8) as u64, k.as_bytes(), 1 + (i % 3) as u64);
        }
        set.add(3, b"key-3", 10);
        assert_eq!(set.entries.len(), 5000);
        for (i, k) in keys.iter().enumerate() {
            let e = set.find((i % 8) as u64, k.as_bytes()).expect("found");
            assert_eq!(set.key(e), k.as_bytes());
            assert!(set.find((i % 8 + 1) as u64 % 8, k.as_bytes()).is_none());
        }
        assert!(set.find(0, b"key-").is_none());
        assert!(set.find(0, b"").is_none());
        let all: Vec<u32> = (0..5000).collect();
        let top = set.top(all, 3);
        let shown: Vec<(&[u8], u64)> = top
            .iter()
            .map(|e| (set.key(*e), set.entries[*e as usize].rows))
            .collect();
        assert_eq!(
            shown,
            [
                (&b"key-3"[..], 11),
                (&b"key-1001"[..], 3),
                (&b"key-1004"[..], 3)
            ]
        );
    }
}
