//! A verification in rounds that reads the key columns once
//! ([`super::verify`]): the rows whose fingerprint may be a candidate of
//! some round are written to disk, each under its round, in one read; each
//! round then files only its own rows, read back from disk.
//!
//! Rounds come when the exact keys of every candidate would not fit the
//! budget (a quarter of `--memory-limit`, or 1 GiB): a column of 10M text
//! keys each twice has 5M candidates. Before, every round read the key
//! columns again: 32 rounds, 20.7 s, under `--memory-limit 128MiB`, where
//! DuckDB's `count(DISTINCT)` spills and takes 6.5 s (`benches/README.md`).
//!
//! A run writes one temporary file (from DataFusion's disk manager, so
//! under its temporary directory and its limit). Each round's rows gather
//! in a buffer of their own, written as a chunk when full; a round reads
//! its chunks back in order. A row is its fingerprint (8 bytes, little
//! endian), a head (4 bytes: the key's length, its tag and whether a row
//! count follows), the rows when more than one (8 bytes), then the key's
//! bytes. Memory: the filter and the rounds' buffers, within a quarter of
//! the budget each (and the buffers at most [`CHUNK`] bytes each).

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::spill_file::SpillFile;
use datafusion::prelude::SessionContext;

use super::encode;
use super::filed::{Candidates, Filed, Filter};
use super::hits::{budget, decoded_types, file_each, Form, Hits};
use super::pages::{self, TextPages, Visit};
use super::tasks::{scan, streams, threads};
use crate::exec::ExecError as Error;
use crate::plan::keys::KeyJob;
use crate::staged::StagedInput;

/// What the one read of every round wrote.
pub(super) struct Spill {
    /// Each run's rows.
    runs: Vec<Arc<Spilled>>,
    /// The key types as the read decoded them.
    pub types: Vec<DataType>,
    /// Dictionary pages skipped as repeats of a kept one.
    pub repeats: u64,
}

impl Spill {
    /// Bytes written to disk.
    pub(super) fn bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.bytes()).sum()
    }
}

/// Reads the key columns once for `rounds` rounds of the candidates
/// `words` (fingerprinted with `bits`, in `candidate_rows` rows): a row
/// whose fingerprint passes the filter of all candidates is written under
/// its round. The pages of a single text key are walked where `text` says
/// so (by value if `by`).
pub(super) async fn spill(
    ctx: &SessionContext,
    input: &StagedInput,
    job: &KeyJob,
    (words, candidate_rows, rounds, bits, by): (&[u64], u64, usize, Option<u32>, bool),
    text: Option<&TextPages>,
    label: &str,
) -> Result<Spill, Error> {
    // A quarter of the budget for the filter, a quarter for the buffers.
    let quarter = (budget(ctx) / 4) as usize;
    // When candidates hold most rows, the filter would pass most of the
    // others too, at a cache miss a row: every row is written.
    let filter = (candidate_rows < input.row_count() / 2).then(|| {
        let len = Filter::sized(words.len(), 16, quarter.saturating_mul(8));
        Arc::new(Filter::new(len, words.iter().copied()))
    });
    let runs = threads(ctx).max(1);
    let chunk = (quarter / (rounds * runs)).clamp(4 << 10, CHUNK);
    let runtime = ctx.runtime_env();
    let new = move || Spilled::new(runtime.clone(), rounds, chunk);
    let label = format!("{label}, verify: write the rows of {rounds} rounds");
    let (mut written, types, repeats) = match text {
        Some(text) => {
            let spilling = || Spilling {
                spilled: new(),
                filter: filter.clone(),
                mask: encode::fingerprint_mask(bits),
                by_value: by,
                nulls_equal: job.nulls_equal,
                failed: None,
            };
            let (parts, repeats) = pages::walk(text, &label, spilling).await?;
            let mut written = Vec::new();
            for p in parts {
                if let Some(e) = p.failed {
                    return Err(e);
                }
                written.push(p.spilled);
            }
            (written, vec![DataType::Utf8View], repeats)
        }
        None => {
            let (streams, _bar) = streams(ctx, input, &job.keys, &label).await?;
            let types = decoded_types(&streams, input, job)?;
            let form = Arc::new(Form::of(&types)?);
            let nulls_equal = job.nulls_equal;
            let parts = scan(
                streams,
                move || (new(), Vec::new(), Hits::default()),
                move |(s, hashes, hits): &mut (Spilled, Vec<u64>, Hits), columns| {
                    encode::fingerprints(columns, bits, hashes).map_err(Error::Fingerprint)?;
                    let pass = |w| filter.as_ref().is_none_or(|f| f.passes(w)).then_some(0);
                    hits.pick((columns, hashes), nulls_equal, pass);
                    let mut failed = Ok(());
                    hits.keys(columns, &form, |i, _, tag, bytes| {
                        if failed.is_ok() {
                            failed = s.push(hashes[i], tag, bytes, 1);
                        }
                    })?;
                    failed
                },
            )
            .await?;
            (parts.into_iter().map(|(s, _, _)| s).collect(), types, 0)
        }
    };
    for s in &mut written {
        s.finish()?;
    }
    Ok(Spill {
        runs: written.into_iter().map(Arc::new).collect(),
        types,
        repeats,
    })
}

/// Round `round`'s rows that are its `candidates`, filed: each run's in a
/// blocking task of its own.
pub(super) async fn file(
    spill: &Spill,
    candidates: &Arc<Candidates>,
    round: usize,
) -> Result<Vec<Filed>, Error> {
    let candidates = candidates.clone();
    file_each(&spill.runs, move |s: &Spilled| {
        let mut filed = Filed::new(candidates.len());
        s.each(round, |rows| {
            filed.batch(&candidates, rows, |r| r.0, |r| (r.1, r.2, r.3));
        })?;
        Ok(filed)
    })
    .await
}

/// A run of the pages' walk: the rows that pass the filter, written.
struct Spilling {
    spilled: Spilled,
    /// None: every row is written.
    filter: Option<Arc<Filter>>,
    /// The test-only narrow fingerprints' mask.
    mask: u64,
    by_value: bool,
    nulls_equal: bool,
    /// The first write that failed: the walk stops before the next row
    /// group.
    failed: Option<Error>,
}

impl Spilling {
    #[inline]
    fn write(&mut self, fp: u64, tag: u8, value: &[u8], rows: u64) {
        if self.failed.is_none() && self.filter.as_ref().is_none_or(|f| f.passes(fp)) {
            if let Err(e) = self.spilled.push(fp, tag, value, rows) {
                self.failed = Some(e);
            }
        }
    }
}

impl Visit for Spilling {
    #[inline]
    fn value(&mut self, fingerprint: u64, value: &[u8]) {
        self.write(fingerprint & self.mask, 1, value, 1);
    }

    fn by_value(&self) -> bool {
        self.by_value
    }

    #[inline]
    fn rows(&mut self, fingerprint: u64, value: &[u8], rows: u64) {
        self.write(fingerprint & self.mask, 1, value, rows);
    }

    /// Null rows, each of fingerprint 0 (see `encode::fingerprints`).
    fn nulls(&mut self, n: u64) {
        if self.nulls_equal {
            self.write(0, 0, &[], n);
        }
    }

    fn stop(&mut self) -> Option<Error> {
        self.failed.take()
    }
}

/// What a run writes: the rows of every round that pass the filter.
pub(super) struct Spilled {
    runtime: Arc<RuntimeEnv>,
    /// Created at the first chunk written.
    file: Option<(Arc<dyn SpillFile>, File)>,
    /// Each round's rows not yet written.
    open: Vec<Vec<u8>>,
    /// Each round's chunks in the file: offset and length.
    chunks: Vec<Vec<(u64, u32)>>,
    /// The size at which a round's buffer is written.
    chunk: usize,
    /// Bytes written.
    at: u64,
    /// Rows written.
    pub rows: u64,
}

/// The most bytes a round's buffer holds before it is written. (64 KiB
/// measured 10-20% slower on 50M rows in 191 rounds.)
const CHUNK: usize = 1 << 20;

/// A key longer than this is refused: its length must fit the head.
const LONGEST: usize = (1 << 30) - 1;

impl Spilled {
    /// Room for `rounds` rounds, written `chunk` bytes at a time.
    pub(super) fn new(runtime: Arc<RuntimeEnv>, rounds: usize, chunk: usize) -> Spilled {
        Spilled {
            runtime,
            file: None,
            open: vec![Vec::new(); rounds],
            chunks: vec![Vec::new(); rounds],
            chunk: chunk.max(64),
            at: 0,
            rows: 0,
        }
    }

    /// Writes `rows` rows of the key `tag`, `bytes` under its fingerprint
    /// `fp`, in round `fp % rounds`.
    #[inline]
    pub(super) fn push(&mut self, fp: u64, tag: u8, bytes: &[u8], rows: u64) -> Result<(), Error> {
        if bytes.len() > LONGEST {
            return Err(Error::Audit(format!(
                "a key of {} bytes is too long for the verification's spill file (at most {LONGEST})",
                bytes.len()
            )));
        }
        let round = (fp % self.open.len() as u64) as usize;
        let many = rows != 1;
        let head = ((bytes.len() as u32) << 2) | (u32::from(tag) << 1) | u32::from(many);
        let buf = &mut self.open[round];
        buf.extend_from_slice(&fp.to_le_bytes());
        buf.extend_from_slice(&head.to_le_bytes());
        if many {
            buf.extend_from_slice(&rows.to_le_bytes());
        }
        buf.extend_from_slice(bytes);
        self.rows += rows;
        if buf.len() >= self.chunk {
            self.write(round)?;
        }
        Ok(())
    }

    /// Writes round `round`'s buffer as a chunk.
    fn write(&mut self, round: usize) -> Result<(), Error> {
        let len = self.open[round].len();
        if len == 0 {
            return Ok(());
        }
        let failed = |e: &dyn std::fmt::Display| {
            Error::Audit(format!("writing the verification's spill file: {e}"))
        };
        if self.file.is_none() {
            let spill = self
                .runtime
                .disk_manager
                .create_tmp_file("dqgate verification rows")
                .map_err(|e| failed(&e))?;
            let path = spill
                .path()
                .ok_or_else(|| failed(&"no temporary directory to write it in"))?;
            let out = File::options()
                .read(true)
                .append(true)
                .open(path)
                .map_err(|e| failed(&e))?;
            self.file = Some((spill, out));
        }
        let (_, out) = self.file.as_mut().expect("created above");
        out.write_all(&self.open[round]).map_err(|e| failed(&e))?;
        self.chunks[round].push((self.at, len as u32));
        self.at += len as u64;
        self.open[round].clear();
        Ok(())
    }

    /// Writes every round's buffer, and frees them.
    pub(super) fn finish(&mut self) -> Result<(), Error> {
        for r in 0..self.open.len() {
            self.write(r)?;
            self.open[r] = Vec::new();
        }
        Ok(())
    }

    /// Bytes written to disk.
    pub(super) fn bytes(&self) -> u64 {
        self.at
    }

    /// Every row of round `round`, in the order written, a few at a time
    /// ([`pages::BATCH`]): `f(rows)`, each row its fingerprint, tag, bytes
    /// and rows.
    pub(super) fn each(
        &self,
        round: usize,
        mut f: impl FnMut(&[(u64, u8, &[u8], u64)]),
    ) -> Result<(), Error> {
        let Some((spill, _)) = &self.file else {
            return Ok(());
        };
        let failed = |e: &dyn std::fmt::Display| {
            Error::Audit(format!("reading the verification's spill file: {e}"))
        };
        let path = spill
            .path()
            .ok_or_else(|| failed(&"its temporary file is gone"))?;
        let mut file = File::open(path).map_err(|e| failed(&e))?;
        let mut buf = Vec::new();
        for &(offset, len) in &self.chunks[round] {
            buf.resize(len as usize, 0);
            file.seek(SeekFrom::Start(offset)).map_err(|e| failed(&e))?;
            file.read_exact(&mut buf).map_err(|e| failed(&e))?;
            let mut rows = Vec::with_capacity(pages::BATCH);
            let mut at = 0;
            while at < buf.len() {
                let fp = u64::from_le_bytes(word(&buf, at)?);
                let head = u32::from_le_bytes(word(&buf, at + 8)?);
                at += 12;
                let n = match head & 1 {
                    1 => {
                        let n = u64::from_le_bytes(word(&buf, at)?);
                        at += 8;
                        n
                    }
                    _ => 1,
                };
                let len = (head >> 2) as usize;
                let bytes = buf
                    .get(at..at + len)
                    .ok_or_else(|| failed(&"a row runs past its chunk"))?;
                rows.push((fp, ((head >> 1) & 1) as u8, bytes, n));
                at += len;
                if rows.len() == pages::BATCH {
                    f(&rows);
                    rows.clear();
                }
            }
            f(&rows);
        }
        Ok(())
    }
}

/// The `N` bytes at `at` of a chunk.
fn word<const N: usize>(buf: &[u8], at: usize) -> Result<[u8; N], Error> {
    buf.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            Error::Audit("reading the verification's spill file: a row runs past its chunk".into())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;

    #[test]
    fn every_row_comes_back_in_its_round_in_order() {
        let runtime = RuntimeEnvBuilder::new().build_arc().expect("runtime");
        // Chunks of 100 bytes: most rounds write several.
        let mut s = Spilled::new(runtime, 7, 100);
        type Row = (u64, u8, Vec<u8>, u64);
        let mut want: Vec<Vec<Row>> = vec![Vec::new(); 7];
        for i in 0..5_000u64 {
            let fp = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let bytes = vec![b'a' + (i % 26) as u8; (i % 40) as usize];
            let (tag, rows) = ((i % 5 != 0) as u8, 1 + (i % 3) * 1000);
            s.push(fp, tag, &bytes, rows).expect("push");
            want[(fp % 7) as usize].push((fp, tag, bytes, rows));
        }
        s.finish().expect("finish");
        assert!(s.bytes() > 0);
        for (r, want) in want.iter().enumerate() {
            let mut got = Vec::new();
            s.each(r, |rows| {
                got.extend(
                    rows.iter()
                        .map(|(fp, tag, b, n)| (*fp, *tag, b.to_vec(), *n)),
                )
            })
            .expect("each");
            assert_eq!(&got, want, "round {r}");
        }
    }
}
