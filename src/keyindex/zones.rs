//! Key zones: for each key column, the ranges its values fall in across a
//! partition's distinct keys, cut where the values leave the widest gaps.
//! They are kept in the index's header (format 3), which has a checksum of
//! its own, so a later audit rules a partition out by reading its header
//! alone: when no staged value of some key column lies in any of that
//! column's zones, no staged key can be in the partition.
//!
//! Footer ranges cannot do this for a row group that holds two clusters of
//! keys (`eu-…` and `us-…` order numbers in a file sorted by key): its range
//! spans every later `eu-` key. The zones cut between the clusters.
//!
//! The zones are found in one pass, without sorting: each value falls in a
//! bucket by the two bytes after the prefix that all values share, and each
//! bucket keeps its least and greatest value. Runs of adjacent buckets are
//! merged into at most [`ZONES`] zones, cut first at the widest runs of
//! empty buckets, then by count. Every value lies in its zone, whatever the
//! cut: a zone map that is not fine is still exact.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use super::canon::{int_of, part, Columns, Kind};

/// At most this many zones a column.
pub const ZONES: usize = 32;
/// A text bound longer than this keeps no zones for its column (they would
/// swell the header that every audit reads).
const LONGEST: usize = 256;

/// One key column's zones, `[least, greatest]` each, in ascending order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Zones {
    Int(Vec<(i128, i128)>),
    Text(Vec<(String, String)>),
}

/// The zones of each key column of `keys` (canonical keys of `kinds`, read
/// twice, best in the order they lie in memory); `None` for a column whose
/// zones are not kept (a text bound too long).
pub fn of<'a>(kinds: &[Kind], keys: impl Iterator<Item = &'a [u8]> + Clone) -> Vec<Option<Zones>> {
    (0..kinds.len())
        .map(|c| {
            let values = keys.clone().filter_map(move |key| part(kinds, key, c));
            let bounds = cut(values, ZONES);
            match kinds[c] {
                Kind::Int => each(&bounds, int_of).map(Zones::Int),
                Kind::Text => each(&bounds, |b| {
                    let s = std::str::from_utf8(b).ok()?;
                    (s.len() <= LONGEST).then(|| s.to_string())
                })
                .map(Zones::Text),
            }
        })
        .collect()
}

/// Each bound of `bounds` as `f` reads it; `None` when one is not read.
fn each<T>(bounds: &[(&[u8], &[u8])], f: impl Fn(&[u8]) -> Option<T>) -> Option<Vec<(T, T)>> {
    bounds
        .iter()
        .map(|(lo, hi)| Some((f(lo)?, f(hi)?)))
        .collect()
}

/// The two bytes of `v` after its first `at` (zero past its end), as a
/// number: of values that share their first `at` bytes, a value's number
/// never exceeds a greater value's.
pub(crate) fn two_bytes_after(v: &[u8], at: usize) -> usize {
    let byte = |i: usize| v.get(at + i).copied().unwrap_or(0) as usize;
    (byte(0) << 8) | byte(1)
}

/// A non-empty bucket of values: where it is, its least and greatest
/// value, and how many values it holds.
#[derive(Clone, Copy)]
struct Bucket<'a> {
    at: usize,
    least: &'a [u8],
    greatest: &'a [u8],
    count: u64,
}

/// The `[least, greatest]` of at most `most` zones that together hold every
/// one of `values` (bytes, compared as bytes), in ascending order.
fn cut<'a>(
    values: impl Iterator<Item = &'a [u8]> + Clone,
    most: usize,
) -> Vec<(&'a [u8], &'a [u8])> {
    let mut all = values.clone();
    let Some(first) = all.next() else {
        return Vec::new();
    };
    let (least, greatest) = all.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let shared = shared_len(least, greatest);
    let bucket = |v: &[u8]| two_bytes_after(v, shared);
    let mut buckets: Vec<Option<Bucket>> = vec![None; 1 << 16];
    for v in values {
        let at = bucket(v);
        let b = buckets[at].get_or_insert(Bucket {
            at,
            least: v,
            greatest: v,
            count: 0,
        });
        b.least = b.least.min(v);
        b.greatest = b.greatest.max(v);
        b.count += 1;
    }
    let full: Vec<Bucket> = buckets.into_iter().flatten().collect();
    let mut out = Vec::new();
    let mut from = 0;
    for to in cuts(&full, most).into_iter().chain([full.len()]) {
        out.push((full[from].least, full[to - 1].greatest));
        from = to;
    }
    out
}

/// Where to cut the non-empty buckets `full` into at most `most` runs: the
/// positions (1..len) that start a new run, ascending. The widest gaps
/// between buckets first, then the places that split the values most
/// evenly.
fn cuts(full: &[Bucket], most: usize) -> Vec<usize> {
    let most = most.max(1);
    if full.len() <= most {
        return (1..full.len()).collect();
    }
    let mut gaps: Vec<(usize, usize)> = (1..full.len())
        .map(|i| (full[i].at - full[i - 1].at, i))
        .filter(|(gap, _)| *gap > 1)
        .collect();
    gaps.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut picked: Vec<usize> = gaps.iter().take(most - 1).map(|g| g.1).collect();
    let total: u64 = full.iter().map(|b| b.count).sum();
    let even = most - 1 - picked.len();
    let (mut seen, mut next) = (0u64, 1usize);
    for (i, w) in full.windows(2).enumerate() {
        seen += w[0].count;
        if next <= even && seen * (even as u64 + 1) >= total * next as u64 {
            picked.push(i + 1);
            next += 1;
        }
    }
    picked.sort_unstable();
    picked.dedup();
    picked.truncate(most - 1);
    picked
}

/// The keys that can lie in some partition of a table whose every
/// partition has key zones: for each column zoned in all of them, the
/// union of their zones. A key with a column outside that union is in no
/// partition, so a lookup need not fingerprint it (keys that rise with
/// time: the day's new keys lie beyond every published zone).
pub struct Within {
    /// Per column, the union of the zones, merged and ascending; `None`
    /// for a column some partition has no zones of.
    columns: Vec<Option<Union>>,
}

/// One column's zones put together: merged where they meet, ascending.
enum Union {
    Int(Vec<(i128, i128)>),
    Text(Vec<(Vec<u8>, Vec<u8>)>),
}

impl Within {
    /// Of the zones of every partition (`parts`, one entry a column each);
    /// `None` when no column is zoned in all of them.
    pub fn of<'a>(
        kinds: &[Kind],
        parts: impl IntoIterator<Item = &'a [Option<Zones>]>,
    ) -> Option<Within> {
        let mut columns: Vec<Option<Union>> = (kinds.iter())
            .map(|k| {
                Some(match k {
                    Kind::Int => Union::Int(Vec::new()),
                    Kind::Text => Union::Text(Vec::new()),
                })
            })
            .collect();
        for zones in parts {
            if zones.len() != kinds.len() {
                return None;
            }
            for (column, zones) in columns.iter_mut().zip(zones) {
                match (column.as_mut(), zones) {
                    (Some(Union::Int(all)), Some(Zones::Int(z))) => all.extend(z),
                    (Some(Union::Text(all)), Some(Zones::Text(z))) => all.extend(
                        z.iter()
                            .map(|(lo, hi)| (lo.as_bytes().to_vec(), hi.as_bytes().to_vec())),
                    ),
                    _ => *column = None,
                }
            }
        }
        // Each staged value is held against the union, so it is kept
        // short: zones that meet are merged, and then the closest ones
        // until at most `UNION` are left (a coarser union holds more keys
        // than it must, never fewer; a day's zones next to the day
        // before's are the closest, the gaps between clusters the widest).
        for column in columns.iter_mut().flatten() {
            match column {
                // No integer lies between two zones that follow at once.
                Union::Int(all) => {
                    merge(all, |lo, hi| *lo <= hi.saturating_add(1));
                    coarsen(all, |hi, lo| lo.saturating_sub(*hi));
                }
                // Text: the longer the bytes two bounds share, the closer.
                Union::Text(all) => {
                    merge(all, |lo, hi| lo <= hi);
                    coarsen(all, |hi, lo| std::cmp::Reverse(shared_len(hi, lo)));
                }
            }
        }
        columns
            .iter()
            .any(Option::is_some)
            .then_some(Within { columns })
    }

    /// Sets `keep[row]` to false for each row of `columns` whose key has a
    /// zoned column outside every zone (a null part: it is no key, and
    /// held), a column at a time.
    pub fn sift(&self, columns: &Columns, keep: &mut [bool]) {
        for (c, union) in self.columns.iter().enumerate() {
            match union {
                Some(Union::Int(zones)) => match zones.as_slice() {
                    // One range, as the zones of keys that rise with time
                    // merge into.
                    [(lo, hi)] => columns.each_int(c, |row, v| {
                        keep[row] &= *lo <= v && v <= *hi;
                    }),
                    _ => columns.each_int(c, |row, v| {
                        keep[row] &= inside(zones, |z| z.cmp(&v));
                    }),
                },
                Some(Union::Text(zones)) => columns.each_text(c, |row, v| {
                    keep[row] &= inside(zones, |z| z.as_slice().cmp(v));
                }),
                None => {}
            }
        }
    }

    /// Whether integer `v` of column `c` lies within one of its zones (a
    /// column not zoned, or not of integers: yes).
    pub fn holds_int(&self, c: usize, v: i128) -> bool {
        match self.columns.get(c) {
            Some(Some(Union::Int(zones))) => inside(zones, |z| z.cmp(&v)),
            _ => true,
        }
    }

    /// Whether text `v` of column `c` lies within one of its zones (a
    /// column not zoned, or not of text: yes).
    pub fn holds_text(&self, c: usize, v: &[u8]) -> bool {
        match self.columns.get(c) {
            Some(Some(Union::Text(zones))) => inside(zones, |z| z.as_slice().cmp(v)),
            _ => true,
        }
    }
}

/// Sorts `all` and merges the ranges that `meet` (the next one's least
/// against the greatest so far).
fn merge<T: Ord + Clone>(all: &mut Vec<(T, T)>, meet: impl Fn(&T, &T) -> bool) {
    all.sort_unstable();
    let mut merged: Vec<(T, T)> = Vec::with_capacity(all.len());
    for (lo, hi) in all.drain(..) {
        match merged.last_mut() {
            Some(last) if meet(&lo, &last.1) => {
                if hi > last.1 {
                    last.1 = hi;
                }
            }
            _ => merged.push((lo, hi)),
        }
    }
    *all = merged;
}

/// At most this many ranges a column of [`Within`].
const UNION: usize = 16;

/// Merges the ranges of `all` (ascending, apart) across their smallest
/// gaps, `gap` of a range's greatest and the next one's least, until at
/// most [`UNION`] are left.
fn coarsen<T: Clone, G: Ord>(all: &mut Vec<(T, T)>, gap: impl Fn(&T, &T) -> G) {
    if all.len() <= UNION {
        return;
    }
    let mut gaps: Vec<(G, usize)> = (1..all.len())
        .map(|i| (gap(&all[i - 1].1, &all[i].0), i))
        .collect();
    gaps.sort_by(|a, b| a.0.cmp(&b.0));
    let mut joined = vec![false; all.len()];
    for (_, i) in gaps.iter().take(all.len() - UNION) {
        joined[*i] = true;
    }
    let mut out: Vec<(T, T)> = Vec::with_capacity(UNION);
    for (i, (lo, hi)) in all.drain(..).enumerate() {
        match out.last_mut() {
            Some(last) if joined[i] => last.1 = hi,
            _ => out.push((lo, hi)),
        }
    }
    *all = out;
}

/// Whether a value lies in one of `zones` (ascending, apart), `against`
/// ordering a bound before or after it: the ends first, as keys that rise
/// with time lie past the last.
fn inside<T>(zones: &[(T, T)], against: impl Fn(&T) -> Ordering) -> bool {
    let below = |bound: &T| against(bound).is_le();
    match (zones.first(), zones.last()) {
        (Some(first), Some(last)) if below(&first.0) && against(&last.1).is_ge() => {
            let at = zones.partition_point(|(lo, _)| below(lo));
            at > 0 && against(&zones[at - 1].1).is_ge()
        }
        _ => false,
    }
}

/// How many leading bytes `a` and `b` share, compared 8 at a time.
#[inline]
pub(crate) fn shared_len(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + 8 <= n {
        let x = u64::from_le_bytes(a[at..at + 8].try_into().unwrap_or_default());
        let y = u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
        if x != y {
            return at + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + (a[at..n].iter().zip(&b[at..n]))
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes two keys start with alike, 8 at a time, are a byte
    /// loop's, whatever their lengths and wherever they differ.
    #[test]
    fn shared_len_is_a_byte_loops() {
        let mut next = crate::test_rng::below(5);
        for _ in 0..2_000 {
            let a: Vec<u8> = (0..next(40)).map(|_| next(3) as u8).collect();
            let mut b = a.clone();
            b.truncate(next(41) as usize);
            if !b.is_empty() && next(2) == 0 {
                let at = next(b.len() as u64) as usize;
                b[at] ^= 1 << next(8);
            }
            b.extend((0..next(9)).map(|_| next(3) as u8));
            let want = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            assert_eq!(shared_len(&a, &b), want);
            assert_eq!(shared_len(&b, &a), want);
        }
    }

    fn zones(values: &[&str], most: usize) -> Vec<(String, String)> {
        let bytes: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        cut(bytes.iter().copied(), most)
            .into_iter()
            .map(|(a, b)| {
                (
                    String::from_utf8(a.to_vec()).unwrap(),
                    String::from_utf8(b.to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn cuts_between_clusters_of_keys() {
        let mut keys: Vec<String> = (0..1000)
            .flat_map(|i| {
                [
                    format!("eu-orders-{:08}", 5000 + i),
                    format!("us-orders-{:08}", 5000 + i),
                ]
            })
            .collect();
        keys.reverse();
        let refs: Vec<&str> = keys.iter().map(|s| s.as_str()).collect();
        let z = zones(&refs, 32);
        assert_eq!(
            z,
            [
                ("eu-orders-00005000".into(), "eu-orders-00005999".into()),
                ("us-orders-00005000".into(), "us-orders-00005999".into())
            ]
        );
    }

    /// Every value lies in a zone, the zones ascend without overlapping,
    /// and there are at most as many as asked, whatever the values.
    #[test]
    fn every_value_lies_in_a_zone() {
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..300 {
            let n = (next() % 400) as usize;
            let alphabet: &[u8] = match round % 4 {
                0 => b"ab",
                1 => b"\0\x01\xff",
                2 => b"0123456789",
                _ => b"abcdefghijklmnopqrstuvwxyz-",
            };
            let prefix = "x".repeat(round % 3);
            let values: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    let len = (next() % 6) as usize;
                    let mut v = prefix.as_bytes().to_vec();
                    v.extend((0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]));
                    v
                })
                .collect();
            let most = 1 + (next() % 40) as usize;
            let z = cut(values.iter().map(|v| v.as_slice()), most);
            assert!(z.len() <= most, "round {round}");
            assert_eq!(z.is_empty(), values.is_empty());
            for w in z.windows(2) {
                assert!(w[0].1 < w[1].0, "round {round}: {z:?}");
            }
            for v in &values {
                let within = z
                    .iter()
                    .filter(|(lo, hi)| *lo <= v.as_slice() && v.as_slice() <= *hi);
                assert_eq!(within.count(), 1, "round {round}: {v:?} in {z:?}");
            }
        }
    }

    /// The key columns of the one row (n, s).
    /// Keys of an integer and a text part, a row each (`None`: a null).
    fn keys(rows: &[(Option<i64>, Option<&str>)]) -> Columns {
        use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
        use std::sync::Arc;
        let columns: [ArrayRef; 2] = [
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1))),
        ];
        Columns::new(&columns, &[Kind::Int, Kind::Text]).unwrap()
    }

    fn holds(within: &Within, n: i64, s: &str) -> bool {
        let mut keep = [true];
        within.sift(&keys(&[(Some(n), Some(s))]), &mut keep);
        keep[0]
    }

    #[test]
    fn within_holds_a_key_exactly_when_each_zoned_column_lies_in_some_zone() {
        let kinds = [Kind::Int, Kind::Text];
        let mut next = crate::test_rng::below(7);
        for round in 0..200 {
            // A few partitions, each with a few zones a column (integer
            // zones that follow at once, that overlap, and apart; text
            // zones sharing prefixes); now and then a column unzoned.
            let parts: Vec<Vec<Option<Zones>>> = (0..1 + next(4))
                .map(|_| {
                    let ints = (0..1 + next(3))
                        .map(|_| {
                            let lo = next(60) as i128 - 30;
                            (lo, lo + next(6) as i128)
                        })
                        .collect();
                    let texts = (0..1 + next(3))
                        .map(|_| {
                            let lo = format!("k{}", next(50));
                            let hi = format!("{lo}{}", next(9));
                            (lo, hi)
                        })
                        .collect();
                    vec![
                        (next(9) > 0).then_some(Zones::Int(ints)),
                        (next(9) > 0).then_some(Zones::Text(texts)),
                    ]
                })
                .collect();
            let within = Within::of(&kinds, parts.iter().map(Vec::as_slice));
            let zoned = |c: usize| parts.iter().all(|p| p[c].is_some());
            assert_eq!(within.is_some(), zoned(0) || zoned(1), "round {round}");
            let in_some = |c: usize, n: i64, s: &str| {
                parts.iter().any(|p| match &p[c] {
                    Some(Zones::Int(z)) => {
                        z.iter().any(|(lo, hi)| (*lo..=*hi).contains(&(n as i128)))
                    }
                    Some(Zones::Text(z)) => z
                        .iter()
                        .any(|(lo, hi)| lo.as_str() <= s && s <= hi.as_str()),
                    None => true,
                })
            };
            // One batch of keys, a part null now and then (held: no key).
            let rows: Vec<(Option<i64>, Option<String>)> = (0..100)
                .map(|_| {
                    let n = next(80) as i64 - 40;
                    let s = format!(
                        "k{}{}",
                        next(60),
                        ["", "0", "5", "9", "99"][next(5) as usize]
                    );
                    ((next(12) > 0).then_some(n), (next(12) > 0).then_some(s))
                })
                .collect();
            let batch: Vec<_> = rows.iter().map(|(n, s)| (*n, s.as_deref())).collect();
            let mut keep = vec![true; rows.len()];
            if let Some(w) = &within {
                w.sift(&keys(&batch), &mut keep);
            }
            for ((n, s), got) in rows.iter().zip(keep) {
                let int = n.is_none_or(|n| !zoned(0) || in_some(0, n, ""));
                let text = s.as_ref().is_none_or(|s| !zoned(1) || in_some(1, 0, s));
                assert_eq!(
                    got,
                    int && text,
                    "round {round}: ({n:?}, {s:?}) in {parts:?}"
                );
            }
        }
    }

    /// A table of many days, each a zone of rising integers and two
    /// clusters of text: the union is cut down to a few ranges, holds every
    /// key that some zone holds, and still leaves out the new day's keys
    /// past every zone.
    #[test]
    fn within_of_many_zones_is_coarser_but_holds_every_zoned_key() {
        let kinds = [Kind::Int, Kind::Text];
        let mut next = crate::test_rng::below(11);
        let days: Vec<Vec<Option<Zones>>> = (0..300i128)
            .map(|d| {
                let text = |region: &str| {
                    let lo = format!("{region}-orders-{:07}", d * 1000);
                    let hi = format!("{region}-orders-{:07}", d * 1000 + 999);
                    (lo, hi)
                };
                vec![
                    Some(Zones::Int(vec![(d * 1000, d * 1000 + 990)])),
                    Some(Zones::Text(vec![text("eu"), text("us")])),
                ]
            })
            .collect();
        let within = Within::of(&kinds, days.iter().map(Vec::as_slice)).unwrap();
        for c in &within.columns {
            match c {
                Some(Union::Int(z)) => assert!(z.len() <= UNION, "{z:?}"),
                Some(Union::Text(z)) => assert!(z.len() <= UNION, "{z:?}"),
                None => panic!("every column is zoned"),
            }
        }
        for _ in 0..2000 {
            let (d, i) = (next(300) as i64, next(1000) as i64);
            let region = ["eu", "us"][next(2) as usize];
            let n = d * 1000 + i.min(990);
            let s = format!("{region}-orders-{:07}", d * 1000 + i);
            assert!(holds(&within, n, &s), "({n}, {s})");
            // The next day's keys: past every zone of both columns.
            let s = format!("{region}-orders-{:07}", 300_000 + i);
            assert!(!holds(&within, 300_000 + i, "eu-orders-0000000"));
            assert!(!holds(&within, 0, &s), "{s}");
        }
    }
}
