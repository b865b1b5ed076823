//! The join of wider keys: both sides radix-partitioned the same way (the
//! other side through a filter of the staged words), and each partition
//! joined on its own, in parallel, in a core's cache.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::prelude::SessionContext;

use super::job::{samples, side_streams, staged_words, Job, Joined, Side, Want};
use crate::exec::keys::count::{self, each_partition, visit, words_of, Table};
use crate::exec::keys::encode;
use crate::exec::keys::key::Key;
use crate::exec::keys::store::{self, LocalStore};
use crate::exec::keys::tasks::{scan, threads};
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;

/// Bits of the staged side's filter (and of the first side's, in a spread
/// join): about 8 a row, 2^16 to 2^28 (32 MiB).
pub(super) fn filter_bits(rows: u64) -> u32 {
    let want = (rows.max(1) * 8).next_power_of_two().trailing_zeros();
    want.clamp(16, 28)
}

/// Both sides radix-partitioned alike, then joined partition by partition.
pub(super) async fn partitioned<K: Key>(
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
            encode::pack_in_range(&encoding, columns, scratch)?;
            store
                .extend(scratch.iter().copied().filter(|w| {
                    let bit = w.mix() >> shift;
                    !filtered || filter[(bit >> 6) as usize] & (1 << (bit & 63)) != 0
                }))
                .map_err(Error::from)
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
    )?;
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
