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
//! pool before the scans. When they would take more than the key engine's
//! budget (a quarter of `--memory-limit`, or 1 GiB), or the pool refuses
//! them, each scan task's partitions are appended to its temporary file
//! whenever they fill its share of the budget (the first side's filter
//! built from them as they go), and a partition is joined from its
//! segments read back and what memory holds: Grace's hash join, whose
//! partitions the scans fill as they go. Only when the pool refuses that
//! budget too, or there is no temporary directory, does the caller fall
//! back to DataFusion's anti- or semi-join.

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
use super::records::{each_of, each_record, Filter, Records, Room, HEAD};
use crate::exec::keys::encode;
use crate::exec::keys::hits;
use crate::exec::keys::hits::Form;
use crate::exec::keys::key::Key;
use crate::exec::keys::pages::{walk, TextPages, Visit};
use crate::exec::keys::tasks::{scan, threads};
use crate::exec::ExecError as Error;

/// Staged keys a partition is meant to hold: its set (slots, entries and
/// bytes) then stays in a core's own cache.
const PARTITION_KEYS: u64 = 16 << 10;

/// The least room a partition of a spilling join should have in each scan
/// task: partitions of a few records each would be written mostly empty.
const LEAST_ROOM: usize = 4 << 10;

/// The fewest partitions.
const FEWEST_PARTITIONS: usize = 16;

/// The most partitions of a spilling join.
const MOST_SPILLED_PARTITIONS: usize = 8192;

/// The partitions of a join of `records` bytes of records that spills
/// past `budget` on `threads` threads, from the `partitions` it would have
/// in memory: more when a partition's records, read back for its join,
/// would take more than an eighth of the budget a thread (up to 8,192),
/// and fewer when each would keep less than [`LEAST_ROOM`] in every scan
/// task of the first side (half the budget); a power of two, at least 16.
fn spilled_partitions(partitions: usize, records: usize, budget: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let read_back = (budget / 8 / threads).max(1);
    let wanted = records.div_ceil(read_back).next_power_of_two();
    let most = (budget / 2 / threads / LEAST_ROOM).max(1);
    (partitions.max(wanted).min(MOST_SPILLED_PARTITIONS))
        .min(1 << most.ilog2())
        .max(FEWEST_PARTITIONS)
}

/// Partitions for `staged` staged rows: a power of two, 16 to 1,024. At
/// 10M staged rows of 26-byte keys against a reference of as many, 64,
/// 256, 1,024 and 2,048 partitions all took 1.5 to 1.7 s: fewer make the
/// scans cheaper (each task's appends spread over fewer pages) and the
/// joins dearer (a partition's set falls out of the core's cache).
fn partitions_for(staged: u64) -> usize {
    (staged / PARTITION_KEYS)
        .next_power_of_two()
        .clamp(FEWEST_PARTITIONS as u64, 1024) as usize
}

/// How the engine joins many fingerprinted keys, for `explain`.
pub fn describe_spread() -> String {
    "by the key engine: both sides' keys spread by 64-bit fingerprint into radix partitions with their bytes (an other side larger than the staged side through a filter of the staged fingerprints first), and each partition's keys compared as bytes in a set in a core's cache; the partitions written to disk past the key engine's budget and read back a partition at a time; DataFusion's join instead if the memory pool refuses that budget".into()
}

/// The staged rows whose key `other` lacks ([`Want::Missing`]), or the
/// distinct staged keys it holds too ([`Want::Present`]; their parts are
/// not located), with the `samples` keys of the most rows; with `every`,
/// every key reported, up to a bound (the failed rows of a lookup select
/// the staged rows by them): more than `samples` of them come back as
/// `samples` keys, whichever they are. `None` when the pool refuses the
/// records' memory.
pub async fn spread(
    ctx: &SessionContext,
    (staged, other): (Side, Side),
    plan: &Fingerprinted,
    want: Want,
    (samples, every): (usize, bool),
    label: &str,
) -> Result<Option<Joined>, Error> {
    // A key's rows are counted in 32 bits.
    if staged.rows > u64::from(u32::MAX) {
        return Ok(None);
    }
    let started = Instant::now();
    let threads = threads(ctx);
    let mut partitions = partitions_for(staged.rows);
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
    let mut filtered = second_rows > first_rows;
    let filter_bits = filter_bits(first_rows);
    let mut filter_words = if filtered {
        1usize << (filter_bits - 6)
    } else {
        0
    };
    // The second side's records: all of them, or (filtered) about as many
    // as the first side's and the few false positives.
    let kept = |filtered| match filtered {
        true => second_rows.min(first_rows + second_rows / 32),
        false => second_rows,
    };
    let mut second_kept = kept(filtered);
    let runtime = ctx.runtime_env();
    let reservation = MemoryConsumer::new("dqgate spread join").register(&runtime.memory_pool);
    let records = (first_rows + second_kept) as usize * record;
    let wanted = records / 10 * 11 + filter_words * 8;
    let budget =
        (hits::budget(ctx) as usize).min(crate::hooks::spread_bytes().unwrap_or(usize::MAX));
    // Past the budget, or refused, the records spill: the budget reserved,
    // the filter's words taken from it (none past a quarter of it: the
    // second side is then kept whole), the first side given half the rest.
    let spills = wanted > budget || reservation.try_grow(wanted).is_err();
    let mut rooms = None;
    if spills {
        if !runtime.disk_manager.tmp_files_enabled() || reservation.try_grow(budget).is_err() {
            return Ok(None);
        }
        if filter_words * 8 > budget / 4 {
            (filtered, filter_words) = (false, 0);
            second_kept = kept(false);
        }
        rooms = Some(budget - filter_words * 8);
        let records = (first_rows + second_kept) as usize * record;
        partitions = spilled_partitions(partitions, records, budget, threads);
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
    // The filter, built from the first side's records (those written to
    // disk as they are), partition by partition.
    let builds = Arc::new(Mutex::new(match filtered {
        true => Filter::new(filter_words, filter_bits),
        false => Filter::default(),
    }));
    let room = |most| Room {
        runtime: runtime.clone(),
        most,
        builds: filtered.then(|| builds.clone()),
    };
    let first_room = rooms.map(|r| room(r / 2));
    let (firsts, first_read) =
        (reading.side(first, first_rows, None, first_room, first_label)).await?;
    let mut filter = std::mem::take(&mut *builds.lock().expect("lock"));
    if filtered {
        for p in 0..partitions {
            for s in &firsts {
                each_record(&s.parts[p], |fp, _| filter.add(fp));
            }
        }
    }
    let through = filtered.then(|| (Arc::new(filter.words), filter.shift));
    let first_held: usize = firsts.iter().map(Records::bytes).sum();
    let second_room = rooms.map(|r| Room {
        builds: None,
        ..room(r.saturating_sub(first_held))
    });
    let (seconds, second_read) = reading
        .side(second, second_kept, through, second_room, second_label)
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
    let written: u64 = stageds.iter().chain(&others).map(Records::written).sum();
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
        |(set, seen): &mut (KeySet, Vec<u64>), p, buf| {
            let keys: usize = stageds.iter().map(|s| s.counts[p] as usize).sum();
            let bytes: usize = stageds.iter().map(|s| s.bytes_of(p)).sum();
            set.reset(keys, bytes.saturating_sub(keys * HEAD));
            each_of(&stageds, p, buf, |fp, key| set.add(fp, key, 1))?;
            seen.clear();
            seen.resize(set.entries.len().div_ceil(64), 0);
            each_of(&others, p, buf, |fp, key| {
                if let Some(e) = set.find(fp, key) {
                    seen[e as usize >> 6] |= 1 << (e & 63);
                }
            })?;
            set.finish();
            let (hits, value) = set.reported(seen, want);
            let best: Vec<(u64, Vec<u8>, u64)> = set
                .top(hits, samples)
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
            // Every key asked for: past `samples` of them, the answer is
            // that there are more, whichever they are.
            if !every || f.1.len() <= samples {
                f.1.extend(best);
            }
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
    let ranked = top.top((0..top.entries.len() as u32).collect(), samples);
    let samples = reading.form.decode(&top, &ranked, &plan.staged)?;
    Ok(Some(Joined {
        value,
        samples,
        located: None,
        passes: vec![
            format!(
                "spread {staged_kept} of {staged_read} staged and {other_kept} of {other_read} other-side key(s) (64-bit fingerprints, with their bytes: {} MB{}) into {partitions} radix partitions: {:.2} s",
                held >> 20,
                match written {
                    0 => String::new(),
                    n => format!(" in memory, {} MB written to disk", n >> 20),
                },
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
        room: Option<Room>,
        label: &str,
    ) -> Result<(Vec<Records>, u64), Error> {
        if let Some(pages) = side.pages_as(&self.compared) {
            return self.paged(pages, kept, filter, room, label).await;
        }
        let (streams, bar) = side_streams(side, label).await?;
        let partitions = self.partitions;
        // Each scan task's partitions start with room for their share.
        let tasks = streams.len().max(1);
        let share = (kept as usize).div_ceil(tasks * partitions) * self.record * 11 / 10;
        let (types, shape, bits) = (self.compared.clone(), self.form.clone(), self.bits);
        let read = scan(
            streams,
            move || {
                (
                    Records::new(partitions, share, room.as_ref().map(|r| (r, tasks))),
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
        kept_whole(read.into_iter().map(|r| r.0).collect(), rows)
    }

    /// [`Reading::side`] of a single text key walked page by page: each
    /// value's fingerprint (its view's, as the other side's) and bytes are
    /// filed where they lie in the page, without an Arrow array.
    async fn paged(
        &self,
        pages: &TextPages,
        kept: u64,
        filter: Option<(Arc<Vec<u64>>, u32)>,
        room: Option<Room>,
        label: &str,
    ) -> Result<(Vec<Records>, u64), Error> {
        let partitions = self.partitions;
        let tasks = pages.runs.len().max(1);
        let share = (kept as usize).div_ceil(tasks * partitions) * self.record * 11 / 10;
        let mask = encode::fingerprint_mask(self.bits);
        let (filed, _) = walk(pages, label, || Filing {
            records: Records::new(partitions, share, room.as_ref().map(|r| (r, tasks))),
            filter: filter.clone(),
            mask,
            read: 0,
        })
        .await?;
        let rows = filed.iter().map(|f| f.read).sum();
        kept_whole(filed.into_iter().map(|f| f.records).collect(), rows)
    }
}

/// A side's records and rows read, or the error of a write that failed
/// (after which its task kept no record).
fn kept_whole(mut records: Vec<Records>, rows: u64) -> Result<(Vec<Records>, u64), Error> {
    match records.iter_mut().find_map(|r| r.failed.take()) {
        Some(e) => Err(e.into()),
        None => Ok((records, rows)),
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

    /// A spilling join keeps its partitions unless a partition read back
    /// would outgrow an eighth of the budget a thread (more of them, up to
    /// 8,192) or the budget leaves a partition less than 4 KiB a task
    /// (fewer, at least 16).
    #[test]
    fn a_spilling_join_picks_partitions_its_budget_can_hold() {
        const GIB: usize = 1 << 30;
        // 3.4 GB at the default budget: 1,024 as in memory.
        assert_eq!(spilled_partitions(1024, 3_400_000_000, GIB, 2), 1024);
        // 34 GB: 512 partitions would each read back 66 MB; 64 MiB a thread.
        assert_eq!(spilled_partitions(1024, 34_000_000_000, GIB, 2), 1024);
        assert_eq!(spilled_partitions(1024, 340_000_000_000, GIB, 2), 8192);
        // 256 MiB of limit (64 MiB of budget): 3.4 GB in 1,024 of 3.3 MB.
        assert_eq!(spilled_partitions(1024, 3_400_000_000, 64 << 20, 2), 1024);
        assert_eq!(spilled_partitions(1024, 34_000_000_000, 64 << 20, 2), 4096);
        // 1 MiB of budget: 64 partitions keep 4 KiB each in two tasks.
        assert_eq!(spilled_partitions(1024, 600_000_000, 1 << 20, 2), 64);
        assert_eq!(spilled_partitions(16, 0, 0, 2), 16);
    }
}
