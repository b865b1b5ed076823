//! The fingerprinted joins of many keys: `values(k) in REF(k)` whose
//! reference, or whose distinct staged keys, are too many for the table
//! that `fingerprinted` probes in place (each probe of a table of millions
//! of keys is a few cache misses), and `unique(k) across published` whose
//! staged side is too large for that table. Both sides are spread by fingerprint
//! into radix partitions, each key as a record of its fingerprint, length
//! and bytes; the larger side through a filter of the other's
//! fingerprints where it may be (see [`spread`]).
//! Each partition is then joined on its own, in parallel, in a core's
//! cache: its staged keys counted in a [`KeySet`], the other side's keys
//! looked up in it.
//!
//! Exactness never depends on the hash: a staged key is found only when an
//! other-side key's bytes equal it, and keys whose fingerprints collide go
//! to the same partition and sit in its set side by side.
//!
//! Memory: both sides' records (12 bytes and the key's bytes a row, the
//! filtered side's only for the rows that pass the filter), reserved from the
//! pool before the scans; when the pool refuses, the caller falls back to
//! DataFusion's anti- or semi-join.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::arrow::datatypes::DataType;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::prelude::SessionContext;

use super::fingerprinted::{as_types, Fingerprinted};
use super::job::{side_streams, Joined, Side, Want};
use super::keyset::KeySet;
use super::partitioned::filter_bits;
use super::probe::{each_passing, filter_spot};
use crate::exec::keys::encode;
use crate::exec::keys::hits::Form;
use crate::exec::keys::key::Key;
use crate::exec::keys::pages::{walk, TextPages, Visit};
use crate::exec::keys::tasks::{scan, threads};
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;

/// Bytes of a record before its key: the fingerprint and the key's length.
const HEAD: usize = 12;

/// Staged keys a partition is meant to hold: its set (slots, entries and
/// bytes) then stays in a core's own cache.
const PARTITION_KEYS: u64 = 16 << 10;

/// Partitions for `staged` staged rows: a power of two, 16 to 1,024. At
/// 10M staged rows of 26-byte keys against a reference of as many, 64,
/// 256, 1,024 and 2,048 partitions all took 1.5 to 1.7 s: fewer make the
/// scans cheaper (each task's appends spread over fewer pages) and the
/// joins dearer (a partition's set falls out of the core's cache).
fn partitions_for(staged: u64) -> usize {
    (staged / PARTITION_KEYS)
        .next_power_of_two()
        .clamp(16, 1024) as usize
}

/// One side's keys, by partition: each partition's records end to end.
struct Records {
    parts: Vec<Vec<u8>>,
    /// Records of each partition.
    counts: Vec<u32>,
    /// 64 minus the bits of a partition's number.
    shift: u32,
}

impl Records {
    fn new(partitions: usize, bytes_each: usize) -> Records {
        Records {
            parts: (0..partitions)
                .map(|_| Vec::with_capacity(bytes_each))
                .collect(),
            counts: vec![0; partitions],
            shift: 64 - partitions.trailing_zeros(),
        }
    }

    #[inline]
    fn push(&mut self, fp: u64, key: &[u8]) {
        let p = partition_of(fp, self.shift);
        let part = &mut self.parts[p];
        part.extend_from_slice(&fp.to_le_bytes());
        part.extend_from_slice(&(key.len() as u32).to_le_bytes());
        part.extend_from_slice(key);
        self.counts[p] += 1;
    }

    fn bytes(&self) -> usize {
        self.parts.iter().map(Vec::capacity).sum()
    }
}

/// The partition of a key with fingerprint `fp` (the mixed fingerprint's
/// high bits; the set in a partition takes its slot from the low bits).
#[inline]
fn partition_of(fp: u64, shift: u32) -> usize {
    fp.mix().checked_shr(shift).unwrap_or(0) as usize
}

/// Calls `f` with the fingerprint and bytes of each record of `part`.
fn each_record(part: &[u8], mut f: impl FnMut(u64, &[u8])) {
    let mut at = 0;
    while at < part.len() {
        let fp = u64::from_le_bytes(part[at..at + 8].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(part[at + 8..at + HEAD].try_into().expect("4 bytes")) as usize;
        f(fp, &part[at + HEAD..at + HEAD + len]);
        at += HEAD + len;
    }
}

/// How the engine joins many fingerprinted keys, for `explain`.
pub fn describe_spread() -> String {
    "by the key engine: both sides' keys spread by 64-bit fingerprint into radix partitions with their bytes (an other side larger than the staged side through a filter of the staged fingerprints first), and each partition's keys compared as bytes in a set in a core's cache; DataFusion's join instead if the memory pool refuses the partitions".into()
}

/// The staged rows whose key `other` lacks ([`Want::Missing`]), or the
/// distinct staged keys it holds too ([`Want::Present`]; their parts are
/// not located), or `None` when the pool refuses the records' memory.
pub async fn spread(
    ctx: &SessionContext,
    staged: Side,
    other: Side,
    plan: &Fingerprinted,
    want: Want,
    label: &str,
) -> Result<Option<Joined>, Error> {
    // A key's rows are counted in 32 bits.
    if staged.rows > u64::from(u32::MAX) {
        return Ok(None);
    }
    let started = Instant::now();
    let threads = threads(ctx);
    let partitions = partitions_for(staged.rows);
    let record = (HEAD as u64 + plan.key_bytes) as usize;
    // The side read second goes through a filter of the first side's
    // fingerprints when it is the larger: most of its keys are then
    // dropped before they cost a record. A side no larger would keep most
    // of its keys, and each would cost a filter test (a cache miss) for
    // nothing. The staged rows whose key the other side lacks are the
    // answer of `Want::Missing`, so there the staged side is read whole,
    // first; `Want::Present` reads the smaller side first.
    let staged_first = want == Want::Missing || staged.rows <= other.rows;
    let (first_rows, second_rows) = match staged_first {
        true => (staged.rows, other.rows),
        false => (other.rows, staged.rows),
    };
    let filtered = second_rows > first_rows;
    let filter_bits = filter_bits(first_rows);
    let filter_words = if filtered {
        1usize << (filter_bits - 6)
    } else {
        0
    };
    // The second side's records: all of them, or (filtered) about as many
    // as the first side's and the few false positives.
    let second_kept = if filtered {
        second_rows.min(first_rows + second_rows / 32)
    } else {
        second_rows
    };
    let pool = &ctx.runtime_env().memory_pool;
    let reservation = MemoryConsumer::new("dqgate spread join").register(pool);
    let records = (first_rows + second_kept) as usize * record;
    if reservation
        .try_grow(records / 10 * 11 + filter_words * 8)
        .is_err()
    {
        return Ok(None);
    }
    let reading = Reading {
        form: Arc::new(Form::of(&plan.compared)?),
        compared: plan.compared.clone(),
        bits: plan.bits,
        partitions,
        record,
    };
    let other_label = format!("{label}, other side");
    let (first, first_label, second, second_label) = match staged_first {
        true => (staged, label, other, other_label.as_str()),
        false => (other, other_label.as_str(), staged, label),
    };
    let (firsts, first_read) = reading.side(first, first_rows, None, first_label).await?;
    // The filter's word of a fingerprint is picked by the high bits of its
    // mix, as its partition is: built partition by partition, it is
    // written a small block at a time.
    let shift = 64 - (filter_bits - 6);
    let mut filter = vec![0u64; filter_words];
    if filtered {
        for p in 0..partitions {
            for s in &firsts {
                each_record(&s.parts[p], |fp, _| {
                    let (w, m) = filter_spot(fp.mix(), shift);
                    filter[w] |= m;
                });
            }
        }
    }
    let through = filtered.then(|| (Arc::new(filter), shift));
    let (seconds, second_read) = reading
        .side(second, second_kept, through, second_label)
        .await?;
    let ((stageds, staged_read), (others, other_read)) = match staged_first {
        true => ((firsts, first_read), (seconds, second_read)),
        false => ((seconds, second_read), (firsts, first_read)),
    };
    let kept = |side: &[Records]| -> u64 {
        side.iter()
            .flat_map(|o| &o.counts)
            .map(|&n| u64::from(n))
            .sum()
    };
    let (staged_kept, other_kept) = (kept(&stageds), kept(&others));
    let held: usize = stageds.iter().chain(&others).map(Records::bytes).sum();
    // What the records took, when more than was reserved (a side of many
    // duplicates, past the filter).
    reservation.resize(reservation.size().max(held + filter_words * 8));
    let scanned = started.elapsed();

    // Each partition on its own.
    let joining = Instant::now();
    let found = Mutex::new((0u64, Vec::<(u64, Vec<u8>, u64)>::new()));
    crate::exec::keys::count::each_partition(
        partitions,
        threads,
        || (KeySet::default(), Vec::<u64>::new()),
        |(set, seen): &mut (KeySet, Vec<u64>), p, _| {
            let keys: usize = stageds.iter().map(|s| s.counts[p] as usize).sum();
            let bytes: usize = stageds.iter().map(|s| s.parts[p].len()).sum();
            set.reset(keys, bytes.saturating_sub(keys * HEAD));
            for s in &stageds {
                each_record(&s.parts[p], |fp, key| set.add(fp, key, 1));
            }
            seen.clear();
            seen.resize(set.entries.len().div_ceil(64), 0);
            for o in &others {
                each_record(&o.parts[p], |fp, key| {
                    if let Some(e) = set.find(fp, key) {
                        seen[e as usize >> 6] |= 1 << (e & 63);
                    }
                });
            }
            set.finish();
            let (hits, value) = set.reported(seen, want);
            let best: Vec<(u64, Vec<u8>, u64)> = set
                .top(hits, SAMPLES)
                .into_iter()
                .map(|e| {
                    (
                        set.fingerprint(e),
                        set.key(e).to_vec(),
                        set.rows[e as usize],
                    )
                })
                .collect();
            let mut f = found.lock().expect("lock");
            f.0 += value;
            f.1.extend(best);
            Ok(())
        },
    )?;
    drop(reservation);
    let (value, best) = found.into_inner().expect("lock");
    // The best of every partition's best, in one set to rank and decode.
    let mut top = KeySet::default();
    for (fp, key, rows) in &best {
        top.add(*fp, key, *rows as u32);
    }
    top.finish();
    let ranked = top.top((0..top.entries.len() as u32).collect(), SAMPLES);
    let samples = reading.form.decode(&top, &ranked, &plan.staged)?;
    Ok(Some(Joined {
        value,
        samples,
        located: None,
        passes: vec![
            format!(
                "spread {staged_kept} of {staged_read} staged and {other_kept} of {other_read} other-side key(s) (64-bit fingerprints, with their bytes: {} MB) into {partitions} radix partitions: {:.2} s",
                held >> 20,
                scanned.as_secs_f64()
            ),
            format!(
                "join the partitions on {threads} thread(s), keys compared as bytes, {value} {}: {:.2} s",
                want.outcome(),
                joining.elapsed().as_secs_f64()
            ),
        ],
    }))
}

/// How a spread join reads a side: the key form and types, the test-only
/// fingerprint bits, the partitions, and the bytes a record is expected
/// to take.
struct Reading {
    form: Arc<Form>,
    compared: Vec<DataType>,
    bits: Option<u32>,
    partitions: usize,
    record: usize,
}

impl Reading {
    /// The records of `side` (about `kept` of them), each scan task's in
    /// its own partitions; through `filter` (its words and shift) when
    /// given. Returns them with the rows read.
    async fn side(
        &self,
        side: Side,
        kept: u64,
        filter: Option<(Arc<Vec<u64>>, u32)>,
        label: &str,
    ) -> Result<(Vec<Records>, u64), Error> {
        if let Some(pages) = side.pages_as(&self.compared) {
            return self.paged(pages, kept, filter, label).await;
        }
        let (streams, bar) = side_streams(side, label).await?;
        let partitions = self.partitions;
        // Each scan task's partitions start with room for their share.
        let share =
            (kept as usize).div_ceil(streams.len().max(1) * partitions) * self.record * 11 / 10;
        let (types, shape, bits) = (self.compared.clone(), self.form.clone(), self.bits);
        let read = scan(
            streams,
            move || {
                (
                    Records::new(partitions, share),
                    Vec::new(),
                    Vec::new(),
                    0u64,
                )
            },
            move |(records, hashes, hit, read): &mut (Records, Vec<u64>, Vec<u32>, u64),
                  columns| {
                let columns = as_types(columns, &types)?;
                *read += columns.first().map_or(0, |c| c.len()) as u64;
                encode::fingerprints(&columns, bits, hashes).map_err(Error::Fingerprint)?;
                let counted = encode::counted_rows(&columns, false);
                let counted = |i: usize| counted.as_ref().is_none_or(|c| c.is_valid(i));
                let Some((filter, shift)) = &filter else {
                    let rows = (0..hashes.len()).filter(|&i| counted(i));
                    return shape.each_key(&columns, rows, |i, key| records.push(hashes[i], key));
                };
                hit.clear();
                each_passing(filter, *shift, hashes, |i| {
                    if counted(i) {
                        hit.push(i as u32);
                    }
                });
                let rows = hit.iter().map(|&i| i as usize);
                shape.each_key(&columns, rows, |i, key| records.push(hashes[i], key))
            },
        )
        .await?;
        drop(bar);
        let rows = read.iter().map(|r| r.3).sum();
        Ok((read.into_iter().map(|r| r.0).collect(), rows))
    }

    /// [`Reading::side`] of a single text key walked page by page: each
    /// value's fingerprint (its view's, as the other side's) and bytes are
    /// filed where they lie in the page, without an Arrow array.
    async fn paged(
        &self,
        pages: &TextPages,
        kept: u64,
        filter: Option<(Arc<Vec<u64>>, u32)>,
        label: &str,
    ) -> Result<(Vec<Records>, u64), Error> {
        let partitions = self.partitions;
        let share =
            (kept as usize).div_ceil(pages.runs.len().max(1) * partitions) * self.record * 11 / 10;
        let mask = encode::fingerprint_mask(self.bits);
        let (filed, _) = walk(pages, label, || Filing {
            records: Records::new(partitions, share),
            filter: filter.clone(),
            mask,
            read: 0,
        })
        .await?;
        let rows = filed.iter().map(|f| f.read).sum();
        Ok((filed.into_iter().map(|f| f.records).collect(), rows))
    }
}

/// What a page walk files: each non-null value that passes the filter, if
/// any, as a record of its fingerprint cut by `mask`.
struct Filing {
    records: Records,
    filter: Option<(Arc<Vec<u64>>, u32)>,
    mask: u64,
    read: u64,
}

impl Visit for Filing {
    fn value(&mut self, fingerprint: u64, value: &[u8]) {
        self.read += 1;
        let fp = fingerprint & self.mask;
        if let Some((filter, shift)) = &self.filter {
            let (w, m) = filter_spot(fp.mix(), *shift);
            if filter[w] & m != m {
                return;
            }
        }
        self.records.push(fp, value);
    }

    fn nulls(&mut self, n: u64) {
        self.read += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records come back as they went in, each in the partition its
    /// fingerprint's mix picks, keys of any length (none included).
    #[test]
    fn records_come_back_in_their_partitions() {
        let mut records = Records::new(16, 0);
        let keys: Vec<(u64, Vec<u8>)> = (0..500u64)
            .map(|i| {
                (
                    i.wrapping_mul(0x2545_F491_4F6C_DD1D),
                    vec![i as u8; (i % 40) as usize],
                )
            })
            .collect();
        for (fp, key) in &keys {
            records.push(*fp, key);
        }
        let mut back = Vec::new();
        for (p, part) in records.parts.iter().enumerate() {
            let mut n = 0;
            each_record(part, |fp, key| {
                assert_eq!(partition_of(fp, records.shift), p);
                back.push((fp, key.to_vec()));
                n += 1;
            });
            assert_eq!(n, records.counts[p]);
        }
        back.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(back, want);
        assert!(records.counts.iter().filter(|&&n| n > 0).count() > 8);
    }
}
