//! The join passes on the key engine: `values(k) in REF(k)` (staged rows
//! whose key the other side lacks) and `unique(k) across published` (distinct
//! staged keys that the other side holds too), for keys that pack exactly.
//!
//! The packing is the staged side's, from its footer ranges. A key of the
//! other side outside those ranges cannot equal any staged key, so it is
//! dropped while packing: a reference or a published table much wider than
//! the staged partition costs its scan and nothing more.
//!
//! - Keys of at most [`BITMAP_BITS`] bits: the other side becomes a bitmap
//!   (one bit per possible key), and each staged key is one bit test. Only
//!   the staged keys that the check reports (missing, or present) are kept,
//!   and counted in radix partitions for the samples.
//! - Wider keys: both sides are radix-partitioned the same way, and each
//!   partition is joined on its own, in parallel, in a core's cache.
//!
//! Rows with a null key part are left out on both sides, as in the grouped
//! anti- and semi-join.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::arrow::array::{ArrayRef, AsArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::datatypes::UInt32Type;
use datafusion::dataframe::DataFrame;
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;

use super::count::{self, each_partition, visit, words_of, Table};
use super::encode;
use super::key::Key;
use super::store::{self, LocalStore};
use super::tasks::{frame_streams, scan, threads};
use crate::exec::progress;
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;
use crate::plan::keys::{KeyJob, Packing, PartKind};
use crate::staged::StagedInput;
use crate::value::Value;

/// Keys of at most this many bits join through a bitmap: 2^27 bits, 16 MiB
/// a scan partition.
pub const BITMAP_BITS: u32 = 27;

/// What a join pass reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Staged rows whose key the other side lacks.
    Missing,
    /// Distinct staged keys that the other side holds too.
    Present,
}

/// What a join pass found.
#[derive(Debug, Clone, Default)]
pub struct Joined {
    /// Staged rows ([`Want::Missing`]) or distinct staged keys
    /// ([`Want::Present`]).
    pub value: u64,
    /// The reported keys with the most staged rows (count descending, key
    /// ascending), values in the order of the key columns.
    pub samples: Vec<(Vec<Value>, u64)>,
    /// One line a pass: what it did and how long it took.
    pub passes: Vec<String>,
    /// For each sample, the parts of the other side that hold it (indices
    /// from the other side's part column), when the pass saw them.
    pub located: Option<Vec<Vec<u32>>>,
}

/// What a join pass computes: the staged packing, the staged key types
/// (for samples), what it reports, and its progress label.
struct Job<'a> {
    packing: &'a Packing,
    types: &'a [DataType],
    want: Want,
    label: &'a str,
}

/// One side of a join: its key columns (in key order) and its row count
/// (for the progress bar and the partition count).
pub struct Side {
    pub input: SideInput,
    pub rows: u64,
}

/// Where a side's key columns come from.
pub enum SideInput {
    /// A DataFusion plan.
    Frame(DataFrame),
    /// Streams already open (the pruned published side).
    Streams(Vec<SendableRecordBatchStream>),
}

/// The streams of `side`, with a progress bar when it is a plan.
pub(super) async fn side_streams(
    side: Side,
    label: &str,
) -> Result<(Vec<SendableRecordBatchStream>, Option<progress::Progress>), Error> {
    match side.input {
        SideInput::Frame(frame) => {
            let (streams, bar) = frame_streams(frame, label, side.rows).await?;
            Ok((streams, Some(bar)))
        }
        SideInput::Streams(streams) => Ok((streams, None)),
    }
}

/// The packing a join on the staged `columns` runs with, or `None` when the
/// engine cannot run it: a part is not fixed-width, is a float (whose NaN
/// and -0.0 the grouped join compares its own way), or is compared in a type
/// whose values are not the staged values' (`compared`: the type the other
/// side is cast to). Integers of any width compare by value.
pub fn packing_for(
    staged: &StagedInput,
    columns: &[String],
    compared: &[DataType],
) -> Option<Packing> {
    let job = KeyJob {
        keys: columns.to_vec(),
        nulls_equal: false,
    };
    let facts = |c: &str| crate::exec::stats::column_facts(staged, c);
    let packing = crate::plan::keys::packing(&job, &staged.schema, &facts)?;
    let same_values = packing.parts.iter().zip(compared).all(|(part, to)| {
        let Ok(field) = staged.schema.field_with_name(&part.column) else {
            return false;
        };
        let ty = field.data_type();
        match part.kind {
            PartKind::Float32 | PartKind::Float64 => false,
            _ if ty.is_integer() && to.is_integer() => true,
            _ => ty == to,
        }
    });
    (same_values && packing.bits() <= 128 && compared.len() == columns.len()).then_some(packing)
}

/// How the engine joins on `packing`, for `explain`.
pub fn describe(packing: &Packing) -> String {
    let parts: Vec<String> = packing
        .parts
        .iter()
        .map(|p| format!("{} {} bits", p.column, p.bits))
        .collect();
    let how = if packing.bits() <= BITMAP_BITS {
        "a bitmap of the other side's keys, one bit test a staged row"
    } else {
        "both sides radix-partitioned and joined partition by partition"
    };
    format!(
        "by the key engine: keys packed by the staged footer ranges ({} = {} bits; other-side keys outside them dropped), {how}",
        parts.join(" + "),
        packing.bits()
    )
}

/// Runs the join of `staged` against `other` (both projected to the key
/// columns in key order; `types`: the staged key types, for samples).
pub async fn run(
    ctx: &SessionContext,
    staged: Side,
    other: Side,
    packing: &Packing,
    types: &[DataType],
    want: Want,
    label: &str,
) -> Result<Joined, Error> {
    let job = Job {
        packing,
        types,
        want,
        label,
    };
    let bitmap_bytes = bitmap_words(packing) * 8 * threads(ctx).max(1);
    if packing.bits() <= BITMAP_BITS {
        let pool = &ctx.runtime_env().memory_pool;
        let reservation = MemoryConsumer::new("dqgate join bitmap").register(pool);
        if reservation.try_grow(bitmap_bytes).is_ok() {
            let joined = by_bitmap(ctx, staged, other, &job).await;
            drop(reservation);
            return joined;
        }
    }
    if want == Want::Present && staged.rows <= PROBE_ROWS {
        let width = if packing.bits() <= 64 { 8 } else { 16 };
        let pool = &ctx.runtime_env().memory_pool;
        let reservation = MemoryConsumer::new("dqgate join table").register(pool);
        let table_bytes = (staged.rows as usize * 2).next_power_of_two() * width;
        let filter_bytes = (1usize << probe_filter_bits(staged.rows)) / 8;
        if reservation.try_grow(table_bytes * 2 + filter_bytes).is_ok() {
            let joined = if packing.bits() <= 64 {
                probed::<u64>(staged, other, &job).await
            } else {
                probed::<u128>(staged, other, &job).await
            };
            drop(reservation);
            return joined;
        }
    }
    if packing.bits() <= 64 {
        partitioned::<u64>(ctx, staged, other, &job).await
    } else {
        partitioned::<u128>(ctx, staged, other, &job).await
    }
}

/// Staged sides of at most this many rows are held whole in one table for
/// [`Want::Present`], and the other side probes it while it streams.
pub const PROBE_ROWS: u64 = 16 << 20;

/// Words whose filter words a probing task loads together.
const CHUNK: usize = 16;

/// Bits of the probing filter: about 32 a staged row, 2^16 to 2^31.
/// Every probe of a filter this size misses the core's cache alike, so a
/// larger filter costs nothing there, and each false positive costs a
/// probe of the table (one more miss): at 32 bits and three bits a key, a
/// few in ten thousand pass.
fn probe_filter_bits(rows: u64) -> u32 {
    let want = (rows.max(1) * 32).next_power_of_two().trailing_zeros();
    want.clamp(16, 31)
}

/// The filter word and the three bits of it that a word with hash `h`
/// sets (`shift`: 64 minus the bits of the word index).
#[inline]
fn filter_spot(h: u64, shift: u32) -> (usize, u64) {
    let bits = (1u64 << (h & 63)) | (1u64 << ((h >> 6) & 63)) | (1u64 << ((h >> 12) & 63));
    ((h >> shift) as usize, bits)
}

/// [`Want::Present`] with the staged side as the build side: its distinct
/// words in one table, behind a blocked filter (three bits in one 64-bit
/// word a key, about 32 bits a staged row); each other-side word costs a
/// filter test while it streams, and the few that pass it a table probe.
/// Nothing of the other side is stored but the staged words it holds.
async fn probed<K: Key>(staged: Side, other: Side, job: &Job<'_>) -> Result<Joined, Error> {
    let Job {
        packing,
        types,
        label,
        ..
    } = *job;
    let started = Instant::now();
    let encoding = packing.clone();
    let (streams, bar) = side_streams(staged, label).await?;
    let parts = scan(
        streams,
        || (Vec::<K>::new(), Vec::<K>::new()),
        move |(all, scratch): &mut (Vec<K>, Vec<K>), columns| {
            staged_words(&encoding, columns, scratch, |w| {
                all.push(w);
                Ok(())
            })
        },
    )
    .await?;
    drop(bar);
    let words: usize = parts.iter().map(|(w, _)| w.len()).sum();
    let mut table = Table::<K>::default();
    table.reset(words);
    let bits = probe_filter_bits(words as u64);
    let shift = 64 - (bits - 6);
    let mut filter = vec![0u64; 1 << (bits - 6)];
    for (part, _) in parts {
        for w in part {
            table.insert(w);
            let (i, m) = filter_spot(w.mix(), shift);
            filter[i] |= m;
        }
    }
    let built = started.elapsed();

    let probing = Instant::now();
    let shared = Arc::new((table, filter));
    let encoding = packing.clone();
    let (streams, bar) = side_streams(other, &format!("{label}, other side")).await?;
    let seen = shared.clone();
    let width = packing.parts.len();
    let found = scan(
        streams,
        Probe::<K>::default,
        move |probe: &mut Probe<K>, columns| {
            probe.rows += columns.first().map_or(0, |c| c.len() as u64);
            // The other side's part, when its batches carry one (a batch
            // never spans two parts).
            let part = columns
                .get(width)
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
                .filter(|a| !a.is_empty())
                .map(|a| a.value(0));
            let (table, filter) = &*seen;
            let Probe {
                found,
                scratch,
                located,
                ..
            } = probe;
            encode::pack_in_range(&encoding, columns, scratch).map_err(pack_error)?;
            // A chunk's filter words are loaded first, with nothing
            // between the loads, so their cache misses overlap; then
            // tested.
            for chunk in scratch.chunks(CHUNK) {
                let mut spots = [(0usize, 0u64); CHUNK];
                let mut words = [0u64; CHUNK];
                for (s, w) in spots.iter_mut().zip(chunk) {
                    *s = filter_spot(w.mix(), shift);
                }
                for (f, (i, _)) in words.iter_mut().zip(&spots).take(chunk.len()) {
                    *f = filter[*i];
                }
                for ((w, (_, m)), f) in chunk.iter().zip(&spots).zip(&words) {
                    if f & m == *m && table.contains(*w) {
                        if found.distinct * 2 + 2 > found.capacity() as u64 {
                            found.grow();
                        }
                        if !found.contains(*w) {
                            found.insert(*w);
                        }
                        if let Some(p) = part {
                            located.push((*w, p));
                        }
                    }
                }
            }
            Ok(())
        },
    )
    .await?;
    drop(bar);
    let read: u64 = found.iter().map(|p| p.rows).sum();
    let mut all = Table::<K>::default();
    all.reset(found.iter().map(|p| p.found.distinct as usize).sum());
    let mut located: Vec<(K, u32)> = Vec::new();
    for p in found {
        p.found.words().for_each(|w| {
            if !all.contains(w) {
                all.insert(w);
            }
        });
        located.extend(p.located);
    }
    // Every find is located when the other side's batches carry their
    // part, none when they do not.
    let numbered = all.distinct == 0 || !located.is_empty();
    located.sort_unstable();
    located.dedup();
    let (table, _) = &*shared;
    let mut best: Vec<(K, u64)> = all.words().map(|w| (w, table.count_of(w))).collect();
    count::rank_top(&mut best, SAMPLES);
    let located = numbered.then(|| {
        best.iter()
            .map(|(w, _)| {
                let at = located.partition_point(|(x, _)| x < w);
                located[at..]
                    .iter()
                    .take_while(|(x, _)| x == w)
                    .map(|(_, p)| *p)
                    .collect()
            })
            .collect()
    });
    Ok(Joined {
        value: all.distinct,
        samples: samples(packing, types, best),
        located,
        passes: vec![
            format!(
                "table and filter of the {} distinct staged key(s) ({} bits): {:.2} s",
                shared.0.distinct,
                packing.bits(),
                built.as_secs_f64()
            ),
            format!(
                "probe {read} other-side row(s), {} staged key(s) also there: {:.2} s",
                all.distinct,
                probing.elapsed().as_secs_f64()
            ),
        ],
    })
}

/// A probing task's state: the staged words it found, its scratch words,
/// the rows it read, and (word, part) of each find.
struct Probe<K: Key> {
    found: Table<K>,
    scratch: Vec<K>,
    rows: u64,
    located: Vec<(K, u32)>,
}

impl<K: Key> Default for Probe<K> {
    fn default() -> Self {
        Probe {
            found: Table::default(),
            scratch: Vec::new(),
            rows: 0,
            located: Vec::new(),
        }
    }
}

/// Bits of the staged side's filter: about 8 a staged row, 2^16 to 2^28
/// (32 MiB).
fn filter_bits(rows: u64) -> u32 {
    let want = (rows.max(1) * 8).next_power_of_two().trailing_zeros();
    want.clamp(16, 28)
}

fn bitmap_words(packing: &Packing) -> usize {
    (1usize << packing.bits().min(BITMAP_BITS)).div_ceil(64)
}

fn pack_error(e: encode::PackError) -> Error {
    Error::Audit(e.to_string())
}

/// Staged words of the rows without a null key part.
fn staged_words<K: Key>(
    packing: &Packing,
    columns: &[ArrayRef],
    words: &mut Vec<K>,
    mut f: impl FnMut(K) -> Result<(), String>,
) -> Result<(), Error> {
    encode::pack(packing, columns, false, words).map_err(pack_error)?;
    match encode::counted_rows(columns, false) {
        None => words.iter().try_for_each(|w| f(*w)),
        Some(valid) => valid.valid_indices().try_for_each(|i| f(words[i])),
    }
    .map_err(Error::Audit)
}

/// The other side as a bitmap of its in-range keys; the staged keys that
/// the check reports are counted in radix partitions.
async fn by_bitmap(
    ctx: &SessionContext,
    staged: Side,
    other: Side,
    job: &Job<'_>,
) -> Result<Joined, Error> {
    let Job {
        packing,
        types,
        want,
        label,
    } = *job;
    let started = Instant::now();
    let words = bitmap_words(packing);
    let (streams, bar) = side_streams(other, &format!("{label}, other side")).await?;
    let encoding = packing.clone();
    let maps = scan(
        streams,
        move || (vec![0u64; words], Vec::<u64>::new()),
        move |(map, scratch): &mut (Vec<u64>, Vec<u64>), columns| {
            encode::pack_in_range(&encoding, columns, scratch).map_err(pack_error)?;
            scratch
                .iter()
                .for_each(|w| map[(*w >> 6) as usize] |= 1 << (*w & 63));
            Ok(())
        },
    )
    .await?;
    drop(bar);
    let mut maps = maps.into_iter().map(|(m, _)| m);
    let mut bitmap = maps.next().unwrap_or_else(|| vec![0u64; words]);
    for m in maps {
        bitmap.iter_mut().zip(&m).for_each(|(a, b)| *a |= *b);
    }
    let keys: u64 = bitmap.iter().map(|w| u64::from(w.count_ones())).sum();
    let built = started.elapsed();

    let probing = Instant::now();
    let bitmap = Arc::new(bitmap);
    let partitions = store::partitions_for(staged.rows / 16);
    let runtime = ctx.runtime_env();
    let encoding = packing.clone();
    let (streams, bar) = side_streams(staged, label).await?;
    let stores = scan(
        streams,
        move || {
            (
                LocalStore::<u64>::new(partitions, runtime.clone(), "dqgate join"),
                Vec::new(),
            )
        },
        move |(store, scratch): &mut (LocalStore<u64>, Vec<u64>), columns| {
            staged_words(&encoding, columns, scratch, |w| {
                let held = bitmap[(w >> 6) as usize] & (1 << (w & 63)) != 0;
                if held == (want == Want::Present) {
                    store.push(w)?;
                }
                Ok(())
            })?;
            store.seal();
            Ok(())
        },
    )
    .await?;
    drop(bar);
    let stores: Vec<LocalStore<u64>> = stores.into_iter().map(|(s, _)| s).collect();
    let reported: u64 = stores.iter().map(|s| s.words).sum();
    let probed = probing.elapsed();

    let ranking = Instant::now();
    let found = Mutex::new((0u64, Vec::new()));
    each_partition(
        partitions,
        threads(ctx),
        Table::<u64>::default,
        |table, p, buf| {
            table.reset(words_of(&stores, p));
            visit(&stores, p, buf, |w| table.insert(w))?;
            let mut f = found.lock().expect("lock");
            f.0 += match want {
                Want::Missing => words_of(&stores, p) as u64,
                Want::Present => table.distinct,
            };
            f.1.extend(table.top(SAMPLES));
            Ok(())
        },
    )
    .map_err(Error::Audit)?;
    let (value, best) = found.into_inner().expect("lock");
    let what = match want {
        Want::Missing => "missing from",
        Want::Present => "also in",
    };
    Ok(Joined {
        value,
        samples: samples(packing, types, best),
        located: None,
        passes: vec![
            format!(
                "bitmap of the other side's {keys} distinct key(s) in the staged range ({} bits): {:.2} s",
                packing.bits(),
                built.as_secs_f64()
            ),
            format!(
                "probe the staged keys, {reported} row(s) {what} the other side: {:.2} s",
                probed.as_secs_f64()
            ),
            format!(
                "rank the reported keys: {:.2} s",
                ranking.elapsed().as_secs_f64()
            ),
        ],
    })
}

/// Both sides radix-partitioned alike, then joined partition by partition.
async fn partitioned<K: Key>(
    ctx: &SessionContext,
    staged: Side,
    other: Side,
    job: &Job<'_>,
) -> Result<Joined, Error> {
    let Job {
        packing,
        types,
        want,
        label,
    } = *job;
    let started = Instant::now();
    let partitions = store::partitions_for(staged.rows + other.rows);
    let runtime = ctx.runtime_env();
    let new_store = move || {
        (
            LocalStore::<K>::new(partitions, runtime.clone(), "dqgate join"),
            Vec::new(),
        )
    };
    // The staged side first, and a one-hash filter of its words: an
    // other-side word whose bit is clear cannot match, and is dropped
    // before it costs a store.
    let filter_bits = filter_bits(staged.rows);
    let pool = &ctx.runtime_env().memory_pool;
    let reservation = MemoryConsumer::new("dqgate join filter").register(pool);
    let filtered = reservation
        .try_grow((1usize << filter_bits) / 8 * (threads(ctx) + 1))
        .is_ok();
    let filter_words = if filtered {
        (1usize << filter_bits) / 64
    } else {
        0
    };
    let shift = 64 - filter_bits;
    let encoding = packing.clone();
    let (streams, bar) = side_streams(staged, label).await?;
    let new_staged = new_store.clone();
    let stageds = scan(
        streams,
        move || (new_staged(), vec![0u64; filter_words]),
        move |((store, scratch), filter): &mut ((LocalStore<K>, Vec<K>), Vec<u64>), columns| {
            staged_words(&encoding, columns, scratch, |w| {
                if filtered {
                    let bit = w.mix() >> shift;
                    filter[(bit >> 6) as usize] |= 1 << (bit & 63);
                }
                store.push(w)
            })?;
            store.seal();
            Ok(())
        },
    )
    .await?;
    drop(bar);
    let mut filter = vec![0u64; filter_words];
    let stageds: Vec<LocalStore<K>> = stageds
        .into_iter()
        .map(|((store, _), f)| {
            filter.iter_mut().zip(&f).for_each(|(a, b)| *a |= *b);
            store
        })
        .collect();
    let filter = Arc::new(filter);
    let encoding = packing.clone();
    let (streams, bar) = side_streams(other, &format!("{label}, other side")).await?;
    let others = scan(
        streams,
        new_store,
        move |(store, scratch): &mut (LocalStore<K>, Vec<K>), columns| {
            encode::pack_in_range(&encoding, columns, scratch).map_err(pack_error)?;
            store
                .extend(scratch.iter().copied().filter(|w| {
                    let bit = w.mix() >> shift;
                    !filtered || filter[(bit >> 6) as usize] & (1 << (bit & 63)) != 0
                }))
                .map_err(Error::Audit)
        },
    )
    .await?;
    drop(bar);
    drop(reservation);
    let others: Vec<LocalStore<K>> = others.into_iter().map(|(s, _)| s).collect();
    let words: u64 = others.iter().chain(&stageds).map(|s| s.words).sum();
    let spilled: u64 = others
        .iter()
        .chain(&stageds)
        .map(LocalStore::spilled_bytes)
        .sum();
    let scanned = started.elapsed();

    let joining = Instant::now();
    let found = Mutex::new((0u64, Vec::new()));
    each_partition(
        partitions,
        threads(ctx),
        || (Table::<K>::default(), Table::<K>::default()),
        |(a, b), p, buf| {
            let (value, best) = match want {
                Want::Missing => {
                    b.reset(words_of(&others, p));
                    visit(&others, p, buf, |w| b.insert(w))?;
                    a.reset(words_of(&stageds, p));
                    let mut missing = 0u64;
                    visit(&stageds, p, buf, |w| {
                        if !b.contains(w) {
                            a.insert(w);
                            missing += 1;
                        }
                    })?;
                    (missing, a.top(SAMPLES))
                }
                Want::Present => {
                    a.reset(words_of(&stageds, p));
                    visit(&stageds, p, buf, |w| a.insert(w))?;
                    b.reset(a.distinct as usize);
                    visit(&others, p, buf, |w| {
                        if a.contains(w) && !b.contains(w) {
                            b.insert(w);
                        }
                    })?;
                    let mut best: Vec<(K, u64)> = b.words().map(|w| (w, a.count_of(w))).collect();
                    count::rank_top(&mut best, SAMPLES);
                    (b.distinct, best)
                }
            };
            let mut f = found.lock().expect("lock");
            f.0 += value;
            f.1.extend(best);
            Ok(())
        },
    )
    .map_err(Error::Audit)?;
    let (value, best) = found.into_inner().expect("lock");
    Ok(Joined {
        value,
        samples: samples(packing, types, best),
        located: None,
        passes: vec![
            format!(
                "scan and radix-partition {words} key words of both sides (other-side keys that no staged key's filter bit admits dropped) into {partitions} partitions: {:.2} s{}",
                scanned.as_secs_f64(),
                if spilled > 0 {
                    format!(", {spilled} bytes spilled")
                } else {
                    String::new()
                }
            ),
            format!(
                "join the partitions on {} thread(s): {:.2} s",
                threads(ctx),
                joining.elapsed().as_secs_f64()
            ),
        ],
    })
}

/// The best keys over all partitions, decoded.
fn samples<K: Key>(
    packing: &Packing,
    types: &[DataType],
    mut best: Vec<(K, u64)>,
) -> Vec<(Vec<Value>, u64)> {
    count::rank_top(&mut best, SAMPLES);
    best.into_iter()
        .map(|(w, n)| (encode::unpack(packing, types, w), n))
        .collect()
}
