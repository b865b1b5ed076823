//! Keys that arrive in order of a leading column: equal keys are side by
//! side, so a check needs only the current run of rows with one leading
//! value, never a table of all keys.
//!
//! The footers said the leading column's row-group ranges never go back;
//! this pass verifies the rows themselves. Each scan partition reads a
//! contiguous slice of the files (work stealing between partitions is
//! turned off for this scan), so each stream is checked on its own:
//! its interior runs are counted as they close, and its first and last runs
//! are kept, because a run of the same leading value can continue in the
//! neighbouring stream. At the end the streams' ranges must follow one
//! another (touching at most at one value), and the edge runs of equal
//! leading values are merged and counted. A run of one key (a date column
//! in order, a constant column) is kept as that key and its rows, however
//! long. If a stream's leading values go back, or a run of different keys
//! grows beyond [`MAX_RUN`] rows, the pass stops and the caller runs the
//! fallback strategy.

use std::collections::BTreeMap;

use datafusion::arrow::array::ArrayRef;
use datafusion::prelude::SessionContext;

use super::encode;
use super::found::{key_types, rank_words, Found};
use super::gave_up::GaveUp;
use super::key::Key;
use super::tasks::{scan, streams};
use crate::exec::ExecError as Error;
use crate::plan::keys::{KeyJob, KeyStrategy, Packing};
use crate::staged::StagedInput;

/// The longest run of one leading value kept in memory (16 MiB of u128).
pub const MAX_RUN: usize = 1 << 20;

/// Why the pass stops when the leading values go back.
const BROKE: &str = "the order broke";

/// Counts `job`'s duplicates in one pass over input ordered by `leading`;
/// `Err` says why the pass stopped (the input turned out not to be
/// ordered, say).
pub async fn find(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    leading: &str,
    fallback: &KeyStrategy,
    label: &str,
) -> Result<Result<Found, String>, Error> {
    let KeyStrategy::Packed(packing) = fallback else {
        return Ok(Err("its fallback is not a packed key".into()));
    };
    if packing.bits() <= 64 {
        find_words::<u64>(ctx, input, job, packing, leading, label).await
    } else {
        find_words::<u128>(ctx, input, job, packing, leading, label).await
    }
}

async fn find_words<K: Key>(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    packing: &Packing,
    leading: &str,
    label: &str,
) -> Result<Result<Found, String>, Error> {
    let started = std::time::Instant::now();
    let Some(lead) = packing.parts.iter().position(|p| p.column == leading) else {
        return Ok(Err(format!("{leading} is not a part of the key")));
    };
    let (streams, _bar) = streams(&in_file_order(ctx), input, &job.keys, label).await?;
    let encoding = packing.clone();
    let nulls_equal = job.nulls_equal;
    let result = scan(
        streams,
        Stream::<K>::default,
        move |s, columns: &[ArrayRef]| s.push(&encoding, lead, nulls_equal, columns),
    )
    .await;
    let streams = match result {
        Ok(s) => s,
        Err(Error::GaveUp(GaveUp::OutOfOrder)) => return Ok(Err(BROKE.into())),
        Err(Error::GaveUp(GaveUp::LongRun)) => {
            return Ok(Err(format!(
                "a run of one {leading} value held more than {MAX_RUN} rows of different keys"
            )))
        }
        Err(e) => return Err(e),
    };
    let Some(mut counted) = merge(streams) else {
        return Ok(Err(BROKE.into()));
    };
    let types = key_types(input, job)?;
    let repeated = std::mem::take(&mut counted.repeated);
    let keys = repeated.len() as u64;
    Ok(Ok(Found {
        duplicates: rank_words((repeated, keys), |w| {
            super::encode::unpack(packing, &types, w)
        }),
        distinct: counted.distinct,
        spilled_bytes: 0,
        passes: vec![format!(
            "one ordered scan, runs of equal {leading} checked while streaming: {:.2} s",
            started.elapsed().as_secs_f64()
        )],
    }))
}

/// `ctx` with DataFusion's work stealing between scan partitions off: an
/// idle partition would otherwise take the next unopened file of another
/// (DataFusion 55's shared file queue), so a stream would read, say, the
/// first and the last file, and its edge runs would not be the only ones
/// that can continue elsewhere. Without it, each partition reads its own
/// contiguous slice of the files, in order.
fn in_file_order(ctx: &SessionContext) -> SessionContext {
    let state = ctx.state();
    let mut config = state.config().clone();
    config
        .options_mut()
        .execution
        .enable_file_stream_work_stealing = false;
    let state = datafusion::execution::SessionStateBuilder::new_from_existing(state)
        .with_config(config)
        .build();
    SessionContext::new_with_state(state)
}

/// One stream's state.
struct Stream<K> {
    words: Vec<K>,
    codes: Vec<u64>,
    /// The current run's leading code (`None` before the first row) and
    /// words; the buffer is reused from run to run.
    code: Option<u128>,
    run: Vec<K>,
    /// Rows of `run[0]` beyond the one in `run`, while the run is of that
    /// key alone (`run` then holds it once).
    more: u64,
    /// The first run, once a second one started.
    head: Option<(u128, Vec<K>, u64)>,
    repeated: Vec<(K, u64)>,
    distinct: u64,
}

impl<K> Default for Stream<K> {
    fn default() -> Self {
        Stream {
            words: Vec::new(),
            codes: Vec::new(),
            code: None,
            run: Vec::new(),
            more: 0,
            head: None,
            repeated: Vec::new(),
            distinct: 0,
        }
    }
}

impl<K: Key> Stream<K> {
    fn push(
        &mut self,
        packing: &Packing,
        lead: usize,
        nulls_equal: bool,
        columns: &[ArrayRef],
    ) -> Result<(), Error> {
        encode::pack(packing, columns, nulls_equal, &mut self.words)?;
        let mut codes = std::mem::take(&mut self.codes);
        encode::codes_into(&packing.parts[lead], &columns[lead], u128::MAX, &mut codes)?;
        let counted = encode::counted_rows(columns, nulls_equal);
        let words = std::mem::take(&mut self.words);
        let result = match &counted {
            None => self.rows(&codes, &words),
            Some(valid) => valid
                .valid_indices()
                .try_for_each(|i| self.row(u128::from(codes[i]), words[i])),
        };
        self.words = words;
        self.codes = codes;
        result
    }

    /// Every row of a batch without uncounted rows, a run at a time: the
    /// order is checked for the whole batch in one loop that vectorizes,
    /// and each run of equal leading codes is moved in one copy.
    fn rows(&mut self, codes: &[u64], words: &[K]) -> Result<(), Error> {
        let Some(&first) = codes.first() else {
            return Ok(());
        };
        let before = self.code.is_some_and(|c| c > u128::from(first));
        if before || codes.windows(2).any(|w| w[1] < w[0]) {
            return Err(GaveUp::OutOfOrder.into());
        }
        let mut i = 0;
        while i < codes.len() {
            let code = codes[i];
            let end = i + codes[i..].iter().take_while(|c| **c == code).count();
            if self.code != Some(u128::from(code)) {
                self.close_run();
                self.code = Some(u128::from(code));
            }
            self.extend(&words[i..end])?;
            i = end;
        }
        Ok(())
    }

    /// Adds `words` (of the current run's leading value) to the run: a
    /// run of one key only counts them.
    fn extend(&mut self, words: &[K]) -> Result<(), Error> {
        let Some(&first) = self.run.first().or(words.first()) else {
            return Ok(());
        };
        if self.run.len() <= 1 && words.iter().all(|w| *w == first) {
            self.more += words.len() as u64 - u64::from(self.run.is_empty());
            self.run.truncate(0);
            self.run.push(first);
            return Ok(());
        }
        if self.run.len() + self.more as usize + words.len() > MAX_RUN {
            return Err(GaveUp::LongRun.into());
        }
        let more = std::mem::take(&mut self.more) as usize;
        self.run.resize(self.run.len() + more, first);
        self.run.extend_from_slice(words);
        Ok(())
    }

    /// Ends the current run: kept as the head if it is the first, counted
    /// otherwise.
    fn close_run(&mut self) {
        if let Some(c) = self.code {
            if self.head.is_none() {
                self.head = Some((c, self.run.clone(), self.more));
            } else {
                let more = self.run.first().map(|w| (*w, self.more));
                count_run(&mut self.run, more, &mut self.repeated, &mut self.distinct);
            }
        }
        self.run.clear();
        self.more = 0;
    }

    #[inline]
    fn row(&mut self, code: u128, w: K) -> Result<(), Error> {
        match self.code {
            Some(c) if c == code => self.extend(&[w])?,
            Some(c) if c > code => return Err(GaveUp::OutOfOrder.into()),
            Some(_) => {
                self.close_run();
                self.run.push(w);
                self.code = Some(code);
            }
            None => {
                self.run.push(w);
                self.code = Some(code);
            }
        }
        Ok(())
    }
}

/// Counts one run's words (runs are short: sorting is cheapest), each
/// word of `more` that many times more.
fn count_run<K: Key>(
    run: &mut [K],
    more: impl IntoIterator<Item = (K, u64)>,
    repeated: &mut Vec<(K, u64)>,
    distinct: &mut u64,
) {
    let more: Vec<(K, u64)> = more.into_iter().filter(|m| m.1 > 0).collect();
    if !more.is_empty() {
        run.sort_unstable();
        count_sorted(run, &more, repeated, distinct);
        return;
    }
    match run {
        [] => return,
        [_] => {
            *distinct += 1;
            return;
        }
        [a, b] => {
            if a == b {
                *distinct += 1;
                repeated.push((*a, 2));
            } else {
                *distinct += 2;
            }
            return;
        }
        _ => {}
    }
    // Rows in order of the whole key (TPC-H's line numbers within an order,
    // tenants within a timestamp) need no sort.
    if run.windows(2).all(|w| w[0] < w[1]) {
        *distinct += run.len() as u64;
        return;
    }
    run.sort_unstable();
    count_sorted(run, &[], repeated, distinct);
}

/// Counts sorted words, each word of `more` that many times more.
fn count_sorted<K: Key>(
    run: &[K],
    more: &[(K, u64)],
    repeated: &mut Vec<(K, u64)>,
    distinct: &mut u64,
) {
    let mut i = 0;
    while i < run.len() {
        let j = i + run[i..].iter().take_while(|w| **w == run[i]).count();
        let more: u64 = more.iter().filter(|m| m.0 == run[i]).map(|m| m.1).sum();
        let n = (j - i) as u64 + more;
        *distinct += 1;
        if n > 1 {
            repeated.push((run[i], n));
        }
        i = j;
    }
}

struct Merged<K> {
    repeated: Vec<(K, u64)>,
    distinct: u64,
}

/// Joins the streams: their ranges must follow one another; edge runs of the
/// same leading value are counted together. `None` when ranges overlap.
fn merge<K: Key>(streams: Vec<Stream<K>>) -> Option<Merged<K>> {
    let mut repeated = Vec::new();
    let mut distinct = 0;
    let mut ranges = Vec::new();
    // Each edge value's words, and the rows of some of them beyond.
    type Edge<K> = (Vec<K>, Vec<(K, u64)>);
    let mut edges: BTreeMap<u128, Edge<K>> = BTreeMap::new();
    for mut s in streams {
        repeated.append(&mut s.repeated);
        distinct += s.distinct;
        let Some(last) = s.code else {
            continue; // an empty stream
        };
        let tail = (last, std::mem::take(&mut s.run), s.more);
        let first = s.head.as_ref().map_or(last, |h| h.0);
        ranges.push((first, last));
        for (code, words, more) in s.head.into_iter().chain(std::iter::once(tail)) {
            let edge = edges.entry(code).or_default();
            edge.1.extend(words.first().map(|w| (*w, more)));
            edge.0.extend(words);
        }
    }
    ranges.sort_unstable();
    if ranges.windows(2).any(|w| w[0].1 > w[1].0) {
        return None;
    }
    for (_, (mut run, more)) in edges {
        count_run(&mut run, more, &mut repeated, &mut distinct);
    }
    Some(Merged { repeated, distinct })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(rows: &[(u128, u64)]) -> Result<Stream<u64>, Error> {
        let mut s = Stream::default();
        for (c, w) in rows {
            s.row(*c, *w)?;
        }
        Ok(s)
    }

    #[test]
    fn runs_are_counted_within_and_across_streams() {
        // Leading code, word: the word carries the whole key.
        let a = stream(&[(1, 10), (1, 10), (2, 20), (3, 30), (3, 31), (5, 50)]).unwrap();
        let b = stream(&[(5, 50), (5, 51), (6, 60), (6, 60), (6, 60)]).unwrap();
        let c = stream(&[(7, 70)]).unwrap();
        let mut m = merge(vec![c, b, a]).unwrap();
        m.repeated.sort();
        assert_eq!(m.repeated, vec![(10, 2), (50, 2), (60, 3)]);
        assert_eq!(m.distinct, 8, "10 20 30 31 50 51 60 70");
    }

    /// A run of one key is counted however long, in a stream and across
    /// streams, by rows and by batches; a run of different keys past
    /// [`MAX_RUN`] stops the pass.
    #[test]
    fn a_run_of_one_key_is_counted_however_long() {
        let long = MAX_RUN as u64 + 5;
        let mut a = stream(&[(1, 10), (2, 20), (2, 21), (2, 20)]).unwrap();
        a.rows(&[2, 2, 3], &[20, 20, 30]).unwrap();
        let ones = vec![30u64; long as usize];
        a.rows(&vec![3; ones.len()], &ones).unwrap();
        let mut b = stream(&[(3, 30), (3, 31)]).unwrap();
        b.rows(&[3, 4, 4], &[30, 40, 40]).unwrap();
        for _ in 0..long {
            b.row(5, 50).unwrap();
        }
        b.rows(&[6; 3], &[60, 60, 60]).unwrap();
        let mut m = merge(vec![b, a]).unwrap();
        m.repeated.sort();
        let want = vec![(20, 4), (30, long + 3), (40, 2), (50, long), (60, 3)];
        assert_eq!(m.repeated, want);
        assert_eq!(m.distinct, 8, "10 20 21 30 31 40 50 60");

        let mut c = Stream::<u64>::default();
        c.rows(&vec![7; MAX_RUN], &vec![70; MAX_RUN]).unwrap();
        assert!(matches!(
            c.rows(&[7], &[71]),
            Err(Error::GaveUp(GaveUp::LongRun))
        ));
        let mut d = stream(&[(7, 70), (7, 71)]).unwrap();
        let many: Vec<u64> = (0..MAX_RUN as u64).collect();
        assert!(matches!(
            d.rows(&vec![7; many.len()], &many),
            Err(Error::GaveUp(GaveUp::LongRun))
        ));
    }

    #[test]
    fn order_that_goes_back_or_overlapping_streams_stop_the_pass() {
        assert!(stream(&[(1, 1), (3, 3), (2, 2)]).is_err());
        let a = stream(&[(1, 1), (5, 5)]).unwrap();
        let b = stream(&[(3, 3), (9, 9)]).unwrap();
        assert!(merge(vec![a, b]).is_none());
    }
}
