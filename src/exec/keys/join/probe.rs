//! [`Want::Present`](super::Want::Present) with a small staged side: its
//! distinct words in one table behind a blocked filter, probed by the other
//! side while it streams.

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::datatypes::UInt32Type;

use super::job::{parts_of, samples, side_streams, staged_words, Job, Joined, Side};
use crate::exec::keys::count::{self, Table};
use crate::exec::keys::encode;
use crate::exec::keys::key::Key;
use crate::exec::keys::tasks::scan;
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;

/// Staged sides of at most this many rows are held whole in one table for
/// [`Want::Present`](super::Want::Present), and the other side probes it
/// while it streams.
pub const PROBE_ROWS: u64 = 16 << 20;

/// Words whose filter words a probing task loads together.
const CHUNK: usize = 16;

/// Bits of the probing filter: about 32 a staged row, 2^16 to 2^31.
/// Every probe of a filter this size misses the core's cache alike, so a
/// larger filter costs nothing there, and each false positive costs a
/// probe of the table (one more miss): at 32 bits and three bits a key, a
/// few in ten thousand pass.
pub(super) fn probe_filter_bits(rows: u64) -> u32 {
    let want = (rows.max(1) * 32).next_power_of_two().trailing_zeros();
    want.clamp(16, 31)
}

/// The filter word and the three bits of it that a word with hash `h`
/// sets (`shift`: 64 minus the bits of the word index).
#[inline]
pub(super) fn filter_spot(h: u64, shift: u32) -> (usize, u64) {
    let bits = (1u64 << (h & 63)) | (1u64 << ((h >> 6) & 63)) | (1u64 << ((h >> 12) & 63));
    ((h >> shift) as usize, bits)
}

/// Calls `f` with the index of each of `words` whose bits in `filter` are
/// all set (`shift`: see [`filter_spot`]). A chunk's filter words are
/// loaded first, with nothing between the loads, so that their cache
/// misses overlap; then tested.
#[inline]
pub(super) fn each_passing<K: Key>(
    filter: &[u64],
    shift: u32,
    words: &[K],
    mut f: impl FnMut(usize),
) {
    for (c, chunk) in words.chunks(CHUNK).enumerate() {
        let mut spots = [(0usize, 0u64); CHUNK];
        let mut loaded = [0u64; CHUNK];
        for (s, w) in spots.iter_mut().zip(chunk) {
            *s = filter_spot(w.mix(), shift);
        }
        for (l, (i, _)) in loaded.iter_mut().zip(&spots).take(chunk.len()) {
            *l = filter[*i];
        }
        for (j, ((_, m), l)) in spots.iter().zip(&loaded).take(chunk.len()).enumerate() {
            if l & m == *m {
                f(c * CHUNK + j);
            }
        }
    }
}

/// [`Want::Present`](super::Want::Present) with the staged side as the
/// build side: its distinct words in one table, behind a blocked filter
/// (three bits in one 64-bit word a key, about 32 bits a staged row); each
/// other-side word costs a filter test while it streams, and the few that
/// pass it a table probe. Nothing of the other side is stored but the
/// staged words it holds.
pub(super) async fn probed<K: Key>(
    staged: Side,
    other: Side,
    job: &Job<'_>,
) -> Result<Joined, Error> {
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
            encode::pack_in_range(&encoding, columns, scratch)?;
            each_passing(filter, shift, scratch, |i| {
                let w = scratch[i];
                if table.contains(w) {
                    found.make_room();
                    if !found.contains(w) {
                        found.insert(w);
                    }
                    if let Some(p) = part {
                        located.push((w, p));
                    }
                }
            });
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
    let located = numbered.then(|| parts_of(&located, best.iter().map(|(w, _)| *w)));
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
