//! Radix partitions of key words, in memory or spilled to disk.
//!
//! Each scan partition (one per thread) owns a [`LocalStore`]: a word goes to
//! partition `mix(word) >> shift`. It is first written into that partition's
//! line of [`LINE`] words (all lines together stay in L1), and a full line is
//! copied into the partition's open chunk in one go, so the scattered writes
//! to hundreds of chunks happen once every [`LINE`] rows, not every row (the
//! software write-combining of radix joins). Full chunks of [`CHUNK`] words
//! are kept as they are, so the store holds 8 (or 16) bytes a row. Chunks are
//! reserved from DataFusion's memory pool; when a reservation fails (only
//! under `--memory-limit`), every full chunk goes to a spill file, whose
//! index says where each partition's words are, and memory is released.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::spill_file::SpillFile;

use super::key::Key;

/// Words per chunk: 8 KiB of u64.
pub const CHUNK: usize = 1024;

/// Words per write-combining line: one 64-byte cache line of u64.
pub const LINE: usize = 8;

/// How many radix partitions suit `rows` rows: partitions of 48k to 96k
/// words, whose counting table (at most 2^17 slots of 8 bytes, 1 MiB) fits a
/// core's L2, and no more, so that the scattered writes stay few.
pub fn partitions_for(rows: u64) -> usize {
    let want = (rows / 48_000).max(1);
    let fewer = if want.is_power_of_two() {
        want
    } else {
        want.next_power_of_two() / 2
    };
    (fewer as usize).clamp(16, 4096)
}

/// One spill file and where each partition's words are in it.
pub struct Spill {
    pub file: Arc<dyn SpillFile>,
    /// `(partition, byte offset, words)`.
    pub segments: Vec<(u32, u64, u32)>,
}

pub struct LocalStore<K: Key> {
    shift: u32,
    /// One line a partition, `fill[p]` of its words in use.
    lines: Vec<[K; LINE]>,
    fill: Vec<u8>,
    open: Vec<Vec<K>>,
    full: Vec<Vec<Vec<K>>>,
    reservation: MemoryReservation,
    runtime: Arc<RuntimeEnv>,
    pub spills: Vec<Spill>,
    pub spilled_bytes: u64,
    /// Words pushed.
    pub words: u64,
}

impl<K: Key> LocalStore<K> {
    pub fn new(partitions: usize, runtime: Arc<RuntimeEnv>, name: &str) -> LocalStore<K> {
        let reservation = MemoryConsumer::new(name)
            .with_can_spill(true)
            .register(&runtime.memory_pool);
        LocalStore {
            shift: 64 - partitions.trailing_zeros(),
            lines: vec![[K::ZERO; LINE]; partitions],
            fill: vec![0; partitions],
            open: (0..partitions).map(|_| Vec::new()).collect(),
            full: (0..partitions).map(|_| Vec::new()).collect(),
            reservation,
            runtime,
            spills: Vec::new(),
            spilled_bytes: 0,
            words: 0,
        }
    }

    pub fn partitions(&self) -> usize {
        self.open.len()
    }

    /// The partition of a word.
    #[inline]
    pub fn partition_of(shift: u32, word: K) -> usize {
        word.mix().checked_shr(shift).unwrap_or(0) as usize
    }

    /// Pushes every word of `words`.
    pub fn push_all(&mut self, words: &[K]) -> Result<(), String> {
        for w in words {
            self.push_word(*w)?;
        }
        self.words += words.len() as u64;
        Ok(())
    }

    #[inline]
    pub fn push(&mut self, word: K) -> Result<(), String> {
        self.words += 1;
        self.push_word(word)
    }

    #[inline(always)]
    fn push_word(&mut self, word: K) -> Result<(), String> {
        let p = Self::partition_of(self.shift, word);
        let f = usize::from(self.fill[p]);
        if f + 1 < LINE {
            self.lines[p][f] = word;
            self.fill[p] = (f + 1) as u8;
            return Ok(());
        }
        self.fill[p] = 0;
        self.flush_line(p, word)
    }

    /// Moves partition `p`'s line, completed by `last`, into its open chunk.
    /// `last` goes straight from the register: the line was written long
    /// ago, so no store is read back while still in flight.
    #[inline]
    fn flush_line(&mut self, p: usize, last: K) -> Result<(), String> {
        if self.open[p].capacity() == 0 {
            self.reserve()?;
            self.open[p].reserve_exact(CHUNK);
        }
        let open = &mut self.open[p];
        open.extend_from_slice(&self.lines[p][..LINE - 1]);
        open.push(last);
        if open.len() == CHUNK {
            let chunk = std::mem::take(open);
            self.full[p].push(chunk);
        }
        Ok(())
    }

    /// Reserves one more chunk, spilling the full chunks first when the
    /// memory pool refuses.
    fn reserve(&mut self) -> Result<(), String> {
        let bytes = CHUNK * K::BYTES;
        if self.reservation.try_grow(bytes).is_ok() {
            return Ok(());
        }
        self.spill()?;
        // Open chunks stay in memory: at most one per partition.
        self.reservation.grow(bytes);
        Ok(())
    }

    fn spill(&mut self) -> Result<(), String> {
        let file = self
            .runtime
            .disk_manager
            .create_tmp_file("dqgate key words")
            .map_err(|e| format!("creating a spill file: {e}"))?;
        let path = spill_path(&file)?;
        let mut out = BufWriter::new(
            File::options()
                .append(true)
                .open(path)
                .map_err(|e| format!("opening a spill file: {e}"))?,
        );
        let mut segments = Vec::new();
        let mut offset = 0u64;
        let mut bytes = Vec::with_capacity(CHUNK * K::BYTES);
        let mut freed = 0usize;
        for (p, chunks) in self.full.iter_mut().enumerate() {
            let words: usize = chunks.iter().map(Vec::len).sum();
            if words == 0 {
                continue;
            }
            for chunk in chunks.drain(..) {
                bytes.clear();
                chunk.iter().for_each(|w| w.write_le(&mut bytes));
                out.write_all(&bytes)
                    .map_err(|e| format!("writing a spill file: {e}"))?;
                freed += CHUNK * K::BYTES;
            }
            segments.push((p as u32, offset, words as u32));
            offset += (words * K::BYTES) as u64;
        }
        out.flush()
            .map_err(|e| format!("writing a spill file: {e}"))?;
        self.reservation.shrink(freed.min(self.reservation.size()));
        self.spilled_bytes += offset;
        if offset > 0 {
            self.spills.push(Spill { file, segments });
        }
        Ok(())
    }

    /// The in-memory words of partition `p`.
    pub fn in_memory(&self, p: usize) -> impl Iterator<Item = &[K]> {
        let line = &self.lines[p][..usize::from(self.fill[p])];
        self.full[p]
            .iter()
            .map(Vec::as_slice)
            .chain([self.open[p].as_slice(), line])
    }

    /// Words of partition `p` across spill files and memory.
    pub fn words_of(&self, p: usize) -> usize {
        let spilled: usize = self
            .spills
            .iter()
            .flat_map(|s| s.segments.iter())
            .filter(|s| s.0 as usize == p)
            .map(|s| s.2 as usize)
            .sum();
        spilled + self.in_memory(p).map(<[K]>::len).sum::<usize>()
    }

    /// Reads partition `p`'s spilled words and calls `f` on them.
    pub fn spilled(&self, p: usize, buf: &mut Vec<u8>, mut f: impl FnMut(K)) -> Result<(), String> {
        use std::os::unix::fs::FileExt;
        for spill in &self.spills {
            let file = File::open(spill_path(&spill.file)?)
                .map_err(|e| format!("reading a spill file: {e}"))?;
            for &(part, offset, words) in &spill.segments {
                if part as usize != p {
                    continue;
                }
                buf.resize(words as usize * K::BYTES, 0);
                file.read_exact_at(buf, offset)
                    .map_err(|e| format!("reading a spill file: {e}"))?;
                buf.chunks_exact(K::BYTES).for_each(|b| f(K::read_le(b)));
            }
        }
        Ok(())
    }
}

fn spill_path(file: &Arc<dyn SpillFile>) -> Result<&std::path::Path, String> {
    file.path().ok_or_else(|| {
        "the key engine spills to a local temporary directory, and none is configured".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;

    #[test]
    fn every_pushed_word_is_in_its_partition_once_lines_chunks_and_all() {
        let runtime = RuntimeEnvBuilder::new().build_arc().expect("runtime");
        let mut store = LocalStore::<u64>::new(16, runtime, "test");
        // Enough words for full chunks, open chunks and part-filled lines.
        let words: Vec<u64> = (0..40_000u64)
            .map(|i| i.wrapping_mul(7919) % 50_000)
            .collect();
        store.push_all(&words).expect("push");
        assert_eq!(store.words, words.len() as u64);
        let mut seen = Vec::new();
        for p in 0..store.partitions() {
            let here: Vec<u64> = store.in_memory(p).flatten().copied().collect();
            assert_eq!(here.len(), store.words_of(p));
            assert!(here
                .iter()
                .all(|w| LocalStore::<u64>::partition_of(store.shift, *w) == p));
            seen.extend(here);
        }
        let mut want = words.clone();
        want.sort_unstable();
        seen.sort_unstable();
        assert_eq!(seen, want);
    }

    #[test]
    fn partitions_grow_with_rows_in_powers_of_two() {
        assert_eq!(partitions_for(0), 16);
        assert_eq!(partitions_for(50_000_000), 1024);
        assert_eq!(partitions_for(100_000_000), 2048);
        assert!(partitions_for(u64::MAX).is_power_of_two());
    }
}
