//! Duplicate detection for an integer key whose range is known and dense:
//! one bit per possible key value instead of a hash table.
//!
//! When the footers give the exact min and max of an integer key column and
//! the range is not much larger than the row count, a bitmap of `max - min + 1`
//! bits finds every repeated key in one streaming pass over that column alone:
//! each partition of the scan sets bits with an atomic `fetch_or`, and a value
//! whose bit was already set is a duplicate occurrence. It sets its bit in a
//! second bitmap of keys seen twice (made at the first repeat: at most as
//! large again, within the limit `worthwhile` keeps), and only a third
//! occurrence and more is counted in a map, so every key twice costs no map
//! entry. When third occurrences are many (each key ten times), a
//! partition's map gives way to its own byte per key of the range, counting
//! them modulo 256 (the map takes each wrap), reserved from the memory
//! pool: the map stays if it cannot be. For 50M unique keys the bitmap is
//! 6 MiB, where a hash aggregate holds every key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{HashMap, HashSet};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use super::ExecError as Error;
use super::{Duplicates, SAMPLES};
use crate::staged::StagedInput;
use crate::value::Value;

/// The largest bitmap dqgate builds: 2^32 bits, 512 MiB.
pub const MAX_BITS: u64 = 1 << 32;

/// The most values among which the scan sets bits at once: 2^26, 8 MiB of
/// bitmap, a part of a server's last-level cache that others leave to it.
/// Each row sets a bit at random among them; past the cache every row is a
/// miss to memory, and the key engine's count wins. `unique(k)` of 10M
/// scattered unique keys spread over 6 times their number (7.5 MiB): 0.08
/// s on the bitmap, 0.09 s on the key engine; over 8 times (10 MiB)
/// 0.09-0.19 s against 0.09 s (the bitmap's time depending on what else
/// the machine runs); over 16 times 0.15 s against 0.09 s, over 60 times
/// 0.23 s against 0.09 s.
pub const CACHED_BITS: u64 = 1 << 26;

/// The values of a range of `span` among which the scan sets bits at
/// once: the widest row group's range when the row groups' ranges
/// (`row_groups`, in scan order) follow one another (ids written in
/// order, whatever their range), else the whole range.
pub fn working_span(span: u64, row_groups: Option<&[(i128, i128)]>) -> u64 {
    match row_groups {
        Some(g) if crate::plan::keys::follow_one_another(g) => {
            (g.iter().map(|(lo, hi)| (hi - lo + 1) as u64).max()).unwrap_or(span)
        }
        _ => span,
    }
}

/// Whether a key range of `span` values, `working` of them set at once
/// ([`working_span`]), suits `bitmaps` bitmaps (two for duplicates, one for
/// a distinct count) for `rows` rows within `memory_limit` bytes.
pub fn worthwhile(
    (span, working): (u64, u64),
    rows: u64,
    memory_limit: Option<usize>,
    bitmaps: u64,
) -> bool {
    let bytes = span.div_ceil(8) * bitmaps;
    span <= MAX_BITS
        && working <= CACHED_BITS
        && span <= rows.saturating_mul(64).max(1 << 20)
        && memory_limit.is_none_or(|limit| bytes <= limit as u64 / 2)
}

/// Finds duplicated values of `column`, all within `[min, max]`.
pub async fn duplicates(
    ctx: &SessionContext,
    input: &StagedInput,
    column: &str,
    (min, max): (i64, i64),
    label: &str,
) -> Result<Duplicates, Error> {
    let (marks, parts) = marked(ctx, input, column, (min, max), true, label).await?;
    Ok(marks.duplicates(parts))
}

/// The marks of every value of `column`, and (with `repeats`) each
/// partition's count of occurrences past the second.
async fn marked(
    ctx: &SessionContext,
    input: &StagedInput,
    column: &str,
    (min, max): (i64, i64),
    repeats: bool,
    label: &str,
) -> Result<(Arc<Marks>, Vec<More>), Error> {
    let (streams, _bar) = super::keys::streams(ctx, input, &[column.to_string()], label).await?;
    let pool = ctx.runtime_env().memory_pool.clone();
    let marks = Arc::new(Marks::new(min, max, repeats, pool));
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|stream| tokio::spawn(mark_partition(stream, marks.clone())))
        .collect();
    let mut parts = Vec::with_capacity(tasks.len());
    for t in tasks {
        parts.push(
            t.await
                .map_err(|e| Error::Audit(format!("a key check task failed: {e}")))??,
        );
    }
    Ok((marks, parts))
}

/// Counts the distinct non-null values of `column`, all within
/// `[min, max]`: the bits its scan sets.
pub async fn distinct(
    ctx: &SessionContext,
    input: &StagedInput,
    column: &str,
    range: (i64, i64),
    label: &str,
) -> Result<u64, Error> {
    let (marks, _) = marked(ctx, input, column, range, false, label).await?;
    Ok(marks.seen())
}

/// A bit for each key of `[min, max]` seen, and (made at the first
/// repeat) one for each key seen twice: a key seen twice costs no map
/// entry, only a key seen a third time and more.
struct Marks {
    min: i64,
    max: i64,
    seen: Vec<AtomicU64>,
    twice: OnceLock<Vec<AtomicU64>>,
    /// Whether repeats are marked and counted (for duplicates), or only
    /// the keys seen (for a distinct count).
    repeats: bool,
    /// Where a partition's byte counts are reserved.
    pool: Arc<dyn MemoryPool>,
}

/// One partition's occurrences past the second of each key: in a map,
/// then (once the map holds [`Marks::crowded`] keys, if the memory pool
/// grants it) in a byte per key of the range, counting modulo 256 while
/// the map takes each wrap. The partition's own, so a hot key's count
/// never moves between the cores.
#[derive(Default)]
struct More {
    map: HashMap<i64, u64>,
    bytes: Vec<u8>,
    /// The memory of `bytes`, or `None` before they were asked for;
    /// `Some(None)` when the pool refused them.
    reserved: Option<Option<MemoryReservation>>,
}

impl Marks {
    fn new(min: i64, max: i64, repeats: bool, pool: Arc<dyn MemoryPool>) -> Marks {
        let span = (max as i128 - min as i128 + 1) as u64;
        Marks {
            min,
            max,
            seen: (0..span.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            twice: OnceLock::new(),
            repeats,
            pool,
        }
    }

    /// How many keys a partition's map holds before the byte counts are
    /// made: a 32nd of the range, where the map (about 24 bytes a key)
    /// takes about as much memory as they do.
    fn crowded(&self) -> usize {
        (self.seen.len() * 2).max(1 << 12)
    }

    /// Counts an occurrence past the second of `k`, at `at` in the range.
    fn count_more(&self, k: i64, at: u64, more: &mut More) {
        if let Some(b) = more.bytes.get_mut(at as usize) {
            *b = b.wrapping_add(1);
            if *b == 0 {
                *more.map.entry(k).or_default() += 256;
            }
            return;
        }
        *more.map.entry(k).or_default() += 1;
        if more.reserved.is_none() && more.map.len() >= self.crowded() {
            let span = self.seen.len() * 64;
            let reservation = MemoryConsumer::new("dqgate dense key counts").register(&self.pool);
            more.reserved = Some(reservation.try_grow(span).ok().map(|()| reservation));
            if matches!(more.reserved, Some(Some(_))) {
                more.bytes = vec![0; span];
            }
        }
    }

    /// Visits each key that has occurrences past the second with their
    /// number, given each partition's counts.
    fn past_second(&self, parts: Vec<More>, mut visit: impl FnMut(i64, u64)) {
        let mut map: HashMap<i64, u64> = HashMap::default();
        let mut bytes: Vec<&[u8]> = Vec::new();
        for part in &parts {
            for (k, n) in &part.map {
                *map.entry(*k).or_default() += n;
            }
            if !part.bytes.is_empty() {
                bytes.push(&part.bytes);
            }
        }
        let key = |at: usize| (self.min as i128 + at as i128) as i64;
        for at in 0..bytes.first().map_or(0, |b| b.len()) {
            let n: u64 = bytes.iter().map(|b| u64::from(b[at])).sum();
            if n != 0 {
                let k = key(at);
                visit(k, n + map.remove(&k).unwrap_or(0));
            }
        }
        map.into_iter().for_each(|(k, n)| visit(k, n));
    }

    /// Marks every key of `keys` (the rows of `valid`, or all): a third
    /// and later occurrence of a key is counted in `more`.
    fn mark_all(
        &self,
        keys: &[i64],
        valid: Option<&NullBuffer>,
        more: &mut More,
    ) -> Result<(), Error> {
        let (min, max, seen) = (self.min, self.max, &self.seen[..]);
        let mut mark = |k: i64| {
            if k < min || k > max {
                return false;
            }
            let at = (k as i128 - min as i128) as u64;
            let (word, bit) = ((at >> 6) as usize, 1u64 << (at & 63));
            if seen[word].fetch_or(bit, Ordering::Relaxed) & bit != 0 && self.repeats {
                let twice = (self.twice)
                    .get_or_init(|| (0..seen.len()).map(|_| AtomicU64::new(0)).collect());
                if twice[word].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
                    self.count_more(k, at, more);
                }
            }
            true
        };
        let outside = match valid {
            None => keys.iter().find(|k| !mark(**k)),
            Some(v) => v.valid_indices().map(|i| &keys[i]).find(|k| !mark(**k)),
        };
        match outside {
            None => Ok(()),
            Some(k) => Err(Error::Audit(format!(
                "key value {k} lies outside the range [{min}, {max}] that the Parquet statistics declare: the files are inconsistent"
            ))),
        }
    }

    /// How many keys were marked.
    fn seen(&self) -> u64 {
        ones(&self.seen)
    }

    /// The repeated keys: how many, and the top samples (rows descending,
    /// key ascending), given the occurrences past the second of each key.
    fn duplicates(&self, parts: Vec<More>) -> Duplicates {
        let Some(twice) = self.twice.get() else {
            return Duplicates {
                keys: 0,
                samples: Vec::new(),
            };
        };
        let keys = ones(twice);
        // The best SAMPLES keys seen three times and more, best first.
        let mut ranked: Vec<(i64, u64)> = Vec::with_capacity(SAMPLES + 1);
        let better = |a: &(i64, u64), b: &(i64, u64)| b.1.cmp(&a.1).then(a.0.cmp(&b.0)).is_lt();
        self.past_second(parts, |k, n| {
            let key = (k, n + 2);
            if ranked.len() < SAMPLES || better(&key, &ranked[SAMPLES - 1]) {
                let at = ranked.partition_point(|r| better(r, &key));
                ranked.insert(at, key);
                ranked.truncate(SAMPLES);
            }
        });
        // Then the smallest keys seen exactly twice (when fewer than
        // SAMPLES were seen more often, `ranked` holds all of those).
        let thrice: HashSet<i64> = ranked.iter().map(|r| r.0).collect();
        let twice_only = twice.iter().enumerate().flat_map(|(i, w)| {
            let mut bits = w.load(Ordering::Relaxed);
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    (self.min as i128 + (i as i128) * 64 + b as i128) as i64
                })
            })
        });
        let want = SAMPLES - ranked.len();
        let rest: Vec<(i64, u64)> = (twice_only.filter(|k| !thrice.contains(k)))
            .take(want)
            .map(|k| (k, 2))
            .collect();
        ranked.extend(rest);
        Duplicates {
            keys,
            samples: ranked
                .into_iter()
                .map(|(k, n)| (vec![Value::Int(k as i128)], n))
                .collect(),
        }
    }
}

/// The bits set in `bits`.
fn ones(bits: &[AtomicU64]) -> u64 {
    (bits.iter())
        .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
        .sum()
}

/// Marks one partition's keys; returns how many times it saw each key
/// past its second occurrence.
async fn mark_partition(
    mut stream: datafusion::execution::SendableRecordBatchStream,
    marks: Arc<Marks>,
) -> Result<More, Error> {
    let mut more = More::default();
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(|e| Error::engine("running a key check", e))?;
        let column = batch.column(0);
        let keys = if column.data_type() == &DataType::Int64 {
            column.clone()
        } else {
            cast(column, &DataType::Int64).map_err(|e| Error::Audit(format!("key column: {e}")))?
        };
        let keys = keys.as_primitive::<Int64Type>();
        let valid = keys.nulls().filter(|n| n.null_count() > 0);
        marks.mark_all(keys.values(), valid, &mut more)?;
    }
    Ok(more)
}

#[cfg(test)]
mod tests {
    use datafusion::execution::memory_pool::{GreedyMemoryPool, UnboundedMemoryPool};

    use super::*;

    /// Keys seen once, twice, three times and more, from two partitions,
    /// give the repeated keys and samples that a map of every key gives.
    #[test]
    fn marks_find_every_repeated_key_and_rank_the_samples() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for case in [
            (1000i64, 0, 0),
            (1000, 600, 0),
            (100, 400, 3),
            (5000, 9000, 40),
            (100_000, 2000, 0),
            (100_000, 3000, 2),
            // Enough keys seen three times to crowd the maps, and hot keys
            // counted past 256 in the bytes.
            (100_000, 600_000, 0),
            (100_000, 600_000, 3),
        ]
        .into_iter()
        .flat_map(|case| [(case, true), (case, false)])
        {
            let ((span, rows, hot), granted) = case;
            let (min, max) = (-17, -17 + span - 1);
            let pool: Arc<dyn MemoryPool> = if granted {
                Arc::new(UnboundedMemoryPool::default())
            } else {
                Arc::new(GreedyMemoryPool::new(1000))
            };
            let marks = Marks::new(min, max, true, pool.clone());
            let mut oracle: std::collections::HashMap<i64, u64> = Default::default();
            let (mut a, mut b) = (More::default(), More::default());
            let mut keys = Vec::new();
            for i in 0..rows {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = if i % 5 == 0 && hot > 0 {
                    min + (x % hot) as i64
                } else {
                    min + (x % span as u64) as i64
                };
                *oracle.entry(k).or_default() += 1;
                keys.push(k);
                let part = if i % 2 == 0 { &mut a } else { &mut b };
                marks.mark_all(&[k], None, part).unwrap();
            }
            let crowded = (rows >= 600_000).then_some(granted);
            for part in [&a, &b] {
                assert_eq!(part.reserved.as_ref().map(Option::is_some), crowded);
                assert_eq!(part.bytes.is_empty(), crowded != Some(true));
            }
            let distinct = Marks::new(min, max, false, pool);
            let mut none = More::default();
            distinct.mark_all(&keys, None, &mut none).unwrap();
            assert!(none.map.is_empty() && distinct.twice.get().is_none());
            assert_eq!(distinct.seen(), oracle.len() as u64);
            let got = marks.duplicates(vec![a, b]);
            let mut want: Vec<(i64, u64)> = oracle.into_iter().filter(|e| e.1 > 1).collect();
            let keys = want.len() as u64;
            want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            want.truncate(SAMPLES);
            let want: Vec<_> = (want.into_iter())
                .map(|(k, n)| (vec![Value::Int(k as i128)], n))
                .collect();
            assert_eq!(
                (got.keys, got.samples),
                (keys, want),
                "{span} keys, {rows} rows, hot {hot}, counts granted {granted}"
            );
        }
        let pool = Arc::new(UnboundedMemoryPool::default());
        let outside = Marks::new(0, 9, true, pool).mark_all(&[3, 10], None, &mut More::default());
        assert!(outside
            .unwrap_err()
            .to_string()
            .contains("key value 10 lies outside"));
    }

    #[test]
    fn bitmaps_only_where_they_pay() {
        let scattered = |span| (span, span);
        assert!(worthwhile(scattered(50_000_000), 50_000_000, None, 2));
        assert!(
            worthwhile(scattered(1000), 10, None, 2),
            "tiny ranges are always fine"
        );
        assert!(
            !worthwhile(scattered(1 << 30), 1000, None, 1),
            "sparse keys"
        );
        assert!(
            !worthwhile(scattered(80_000_000), 10_000_000, None, 1),
            "10 MB set at random: past the cache"
        );
        assert!(worthwhile(scattered(60_000_000), 10_000_000, None, 2));
        assert!(!worthwhile(scattered((1 << 26) + 1), 1 << 26, None, 1));
        // In order, a row group's range at a time: only the whole bitmap's
        // size and the memory limit bound it.
        assert!(worthwhile((1 << 32, 1 << 20), 1 << 30, None, 2));
        assert!(
            !worthwhile((1 << 33, 1 << 20), 1 << 30, None, 1),
            "beyond 512 MiB"
        );
        assert!(
            !worthwhile((1 << 30, 1 << 20), 1 << 30, Some(64 << 20), 1),
            "over the memory limit"
        );
        // 64 Mi keys: one bitmap of 8 MiB fits half of 20 MB, two do not.
        assert!(worthwhile(scattered(1 << 26), 1 << 26, Some(20 << 20), 1));
        assert!(!worthwhile(scattered(1 << 26), 1 << 26, Some(20 << 20), 2));
    }

    #[test]
    fn row_groups_in_order_set_bits_a_range_at_a_time() {
        let groups = [(0, 999), (1000, 2999), (3000, 3500)];
        assert_eq!(working_span(3501, Some(&groups)), 2000);
        let overlapping = [(0, 999), (500, 2999)];
        assert_eq!(working_span(3000, Some(&overlapping)), 3000);
        let backwards = [(1000, 2999), (0, 999)];
        assert_eq!(working_span(3000, Some(&backwards)), 3000);
        assert_eq!(working_span(1000, Some(&[(0, 999)])), 1000, "one group");
        assert_eq!(working_span(1000, None), 1000);
    }
}
