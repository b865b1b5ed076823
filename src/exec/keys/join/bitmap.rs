//! The join through a bitmap, for keys of at most [`BITMAP_BITS`] bits: the
//! other side becomes one bit per possible key, and each staged key is one
//! bit test.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use datafusion::prelude::SessionContext;

use super::job::{samples, side_streams, staged_words, Job, Joined, Side, Want};
use crate::exec::keys::count::{each_partition, visit, words_of, Table};
use crate::exec::keys::encode;
use crate::exec::keys::store::{self, LocalStore};
use crate::exec::keys::tasks::{scan, threads};
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;
use crate::plan::keys::Packing;

/// Keys of at most this many bits join through a bitmap: 2^27 bits, 16 MiB
/// a scan partition.
pub const BITMAP_BITS: u32 = 27;

pub(super) fn bitmap_words(packing: &Packing) -> usize {
    (1usize << packing.bits().min(BITMAP_BITS)).div_ceil(64)
}

/// The other side as a bitmap of its in-range keys; the staged keys that
/// the check reports are counted in radix partitions.
pub(super) async fn by_bitmap(
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
            encode::pack_in_range(&encoding, columns, scratch)?;
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
    )?;
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
