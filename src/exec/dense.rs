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
//! entry. For 50M unique keys the bitmap is 8 MiB, where a hash aggregate
//! holds every key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::{HashMap, HashSet};
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use super::ExecError as Error;
use super::{Duplicates, SAMPLES};
use crate::staged::StagedInput;
use crate::value::Value;

/// The largest bitmap dqgate builds: 2^32 bits, 512 MiB.
pub const MAX_BITS: u64 = 1 << 32;

/// Whether a key range of `span` values suits a bitmap for `rows` rows
/// within `memory_limit` bytes.
pub fn worthwhile(span: u64, rows: u64, memory_limit: Option<usize>) -> bool {
    let bytes = span.div_ceil(8);
    span <= MAX_BITS
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
    let (marks, more) = marked(ctx, input, column, (min, max), true, label).await?;
    Ok(marks.duplicates(more))
}

/// The marks of every value of `column`, and (with `repeats`) each
/// value's occurrences past the second.
async fn marked(
    ctx: &SessionContext,
    input: &StagedInput,
    column: &str,
    (min, max): (i64, i64),
    repeats: bool,
    label: &str,
) -> Result<(Arc<Marks>, HashMap<i64, u64>), Error> {
    let (streams, _bar) = super::keys::streams(ctx, input, &[column.to_string()], label).await?;
    let marks = Arc::new(Marks::new(min, max, repeats));
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|stream| tokio::spawn(mark_partition(stream, marks.clone())))
        .collect();
    let mut more: HashMap<i64, u64> = HashMap::default();
    for t in tasks {
        let part = t
            .await
            .map_err(|e| Error::Audit(format!("a key check task failed: {e}")))??;
        for (k, n) in part {
            *more.entry(k).or_default() += n;
        }
    }
    Ok((marks, more))
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
}

impl Marks {
    fn new(min: i64, max: i64, repeats: bool) -> Marks {
        let span = (max as i128 - min as i128 + 1) as u64;
        Marks {
            min,
            max,
            seen: (0..span.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            twice: OnceLock::new(),
            repeats,
        }
    }

    /// Marks every key of `keys` (the rows of `valid`, or all): a third
    /// and later occurrence of a key is counted in `more`.
    fn mark_all(
        &self,
        keys: &[i64],
        valid: Option<&NullBuffer>,
        more: &mut HashMap<i64, u64>,
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
                    *more.entry(k).or_default() += 1;
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
    fn duplicates(&self, more: HashMap<i64, u64>) -> Duplicates {
        let Some(twice) = self.twice.get() else {
            return Duplicates {
                keys: 0,
                samples: Vec::new(),
            };
        };
        let keys = ones(twice);
        let mut ranked: Vec<(i64, u64)> = more.into_iter().map(|(k, n)| (k, n + 2)).collect();
        ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(SAMPLES);
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

/// Marks one partition's keys; returns each key seen a third time and
/// more with how many such times this partition saw it.
async fn mark_partition(
    mut stream: datafusion::execution::SendableRecordBatchStream,
    marks: Arc<Marks>,
) -> Result<HashMap<i64, u64>, Error> {
    let mut more: HashMap<i64, u64> = HashMap::default();
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
    use super::*;

    /// Keys seen once, twice, three times and more, from two partitions,
    /// give the repeated keys and samples that a map of every key gives.
    #[test]
    fn marks_find_every_repeated_key_and_rank_the_samples() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for (span, rows, hot) in [
            (1000i64, 0, 0),
            (1000, 600, 0),
            (100, 400, 3),
            (5000, 9000, 40),
            (100_000, 2000, 0),
            (100_000, 3000, 2),
        ] {
            let (min, max) = (-17, -17 + span - 1);
            let marks = Marks::new(min, max, true);
            let mut oracle: std::collections::HashMap<i64, u64> = Default::default();
            let (mut a, mut b) = (HashMap::default(), HashMap::default());
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
            for (k, n) in b {
                *a.entry(k).or_default() += n;
            }
            let distinct = Marks::new(min, max, false);
            let mut none = HashMap::default();
            distinct.mark_all(&keys, None, &mut none).unwrap();
            assert!(none.is_empty() && distinct.twice.get().is_none());
            assert_eq!(distinct.seen(), oracle.len() as u64);
            let got = marks.duplicates(a);
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
                "{span} keys, {rows} rows"
            );
        }
        let outside = Marks::new(0, 9, true).mark_all(&[3, 10], None, &mut HashMap::default());
        assert!(outside
            .unwrap_err()
            .to_string()
            .contains("key value 10 lies outside"));
    }

    #[test]
    fn bitmaps_only_where_they_pay() {
        assert!(worthwhile(50_000_000, 50_000_000, None));
        assert!(worthwhile(1000, 10, None), "tiny ranges are always fine");
        assert!(!worthwhile(1 << 40, 1 << 30, None), "beyond 512 MiB");
        assert!(!worthwhile(1 << 30, 1000, None), "sparse keys");
        assert!(
            !worthwhile(1 << 30, 1 << 30, Some(64 << 20)),
            "over the memory limit"
        );
    }
}
