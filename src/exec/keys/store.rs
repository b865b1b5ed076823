//! Radix partitions of key words, in memory or spilled to disk.
//!
//! Each scan partition (one per thread) owns a [`LocalStore`]: a word goes to
//! partition `mix(word) >> shift`. It is first written into that partition's
//! line of [`line_words`] words (all lines together stay in L1 or L2), and a
//! full line is copied into the partition's open chunk in one go, so the
//! scattered writes to thousands of chunks happen once every line, not every
//! row (the software write-combining of radix joins). On x86-64 that copy is
//! a non-temporal store: the chunk's cache line is written without being
//! read first, and the words go to memory without evicting the lines.
//!
//! Chunks of [`chunk_words`] words are carved out of [`Slab`]s: anonymous memory
//! mapped untouched and advised to use transparent huge pages, so that
//! storing 8 bytes a row costs one page fault per 2 MiB, not per 4 KiB (in a
//! virtual machine the faults were a third of the partitioning pass). The
//! store holds 4, 8 or 16 bytes a row: 4 for packed words that [`Narrow`]
//! splits into a partition and 32 kept bits. Slabs are reserved from DataFusion's
//! memory pool; when a reservation fails (only under `--memory-limit`), every
//! chunk goes to a spill file, whose index says where each partition's words
//! are, and the slabs already held are used again.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::spill_file::SpillFile;

use super::key::Key;
use super::slab::Slab;

/// Words per chunk: 2 KiB of u64 or u32 (4 KiB of u128).
pub const fn chunk_words<K: Key>() -> usize {
    2048 / if K::BYTES < 8 { K::BYTES } else { 8 }
}

/// Words per write-combining line ([`Key::Line`]): one 64-byte cache line
/// of u64 or u32 (two of u128).
pub const fn line_words<K: Key>() -> usize {
    std::mem::size_of::<K::Line>() / K::BYTES
}

/// How many radix partitions suit `rows` rows: partitions of 24k to 48k
/// words, whose sieve (8 bits a word, at most 48 KiB) stays in L1 or L2
/// with the partition's words.
pub fn partitions_for(rows: u64) -> usize {
    let want = (rows / 24_000).max(1);
    let fewer = if want.is_power_of_two() {
        want
    } else {
        want.next_power_of_two() / 2
    };
    (fewer as usize).clamp(16, 4096)
}

/// How many bits of a fingerprint `rows` rows in `partitions` partitions
/// keep: 32 more than the partition bits, so that [`Narrow`] keeps 4 bytes
/// a row, not 8. The cut adds false candidates, about n^2 / 2^(bits+1)
/// (140 at 50M rows, 280 at 100M), which the verification resolves as it
/// resolves any repeat: exactness never rests on the fingerprint. Past some
/// 10,000 of them (600M rows) the whole 64 bits are kept instead.
pub fn fingerprint_bits(rows: u64, partitions: usize) -> u32 {
    let cut = 32 + partitions.trailing_zeros();
    let false_pairs = (rows as f64).powi(2) / 2f64.powi(cut as i32 + 1);
    if false_pairs <= 10_000.0 {
        cut
    } else {
        64
    }
}

/// Where a word goes and what its partition keeps of it: [`Whole`] or
/// [`Narrow`].
pub trait Split<K: Key>: Copy + Send + Sync + 'static {
    type Stored: Key;
    /// Bytes kept of a word.
    const BYTES: usize = Self::Stored::BYTES;
    fn split(self, word: K) -> (usize, Self::Stored);
    /// The word that `split` gave as `(partition, stored)`.
    fn join(self, partition: usize, stored: Self::Stored) -> K;
}

/// Every word kept whole, in the partition its hash's high bits pick.
#[derive(Clone, Copy)]
pub struct Whole {
    shift: u32,
}

impl Whole {
    pub fn new(partitions: usize) -> Whole {
        Whole {
            shift: 64 - partitions.trailing_zeros(),
        }
    }
}

impl<K: Key> Split<K> for Whole {
    type Stored = K;
    #[inline(always)]
    fn split(self, word: K) -> (usize, K) {
        (
            word.mix().checked_shr(self.shift).unwrap_or(0) as usize,
            word,
        )
    }
    fn join(self, _: usize, stored: K) -> K {
        stored
    }
}

/// Packed words of `bits` bits kept in 4 bytes: a bijection of the `bits`
/// bits (multiplying by an odd number, modulo 2^bits) scrambles each word,
/// its high bits pick the partition and the partition keeps the low 32 or
/// fewer. The multiplier is the golden ratio's (Fibonacci hashing), whose
/// high product bits spread keys of any layout, runs of ids, multiples and
/// scattered ones alike, evenly over the partitions; its inverse modulo
/// 2^bits gives the word back. Half the bytes of a 64-bit word to write,
/// fault in and count: keys of up to 32 bits plus the partition bits (43 at
/// 50M rows), ids and dates mostly.
#[derive(Clone, Copy, Debug)]
pub struct Narrow {
    /// The word's bits set, and the kept low bits set.
    word: u64,
    kept: u64,
    /// How many bits are kept.
    low: u32,
    mul: u64,
    inv: u64,
}

/// The `bits` low bits set.
#[inline(always)]
fn low_mask(bits: u32) -> u64 {
    u64::MAX.checked_shr(64 - bits).unwrap_or(0)
}

impl Narrow {
    /// For words of `bits` bits in `partitions` partitions (a power of
    /// two), if a partition needs to keep at most 32 bits of each.
    pub fn new(bits: u32, partitions: usize) -> Option<Narrow> {
        let high = partitions.trailing_zeros();
        if bits > 32 + high {
            return None;
        }
        let mul = 0x9E37_79B9_7F4A_7C15u64.checked_shr(64 - bits).unwrap_or(0) | 1;
        // Newton's iteration doubles the bits of an odd number's inverse
        // modulo 2^64 each step: 1, then 2, 4, ... 64.
        let mut inv = 1u64;
        for _ in 0..6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(mul.wrapping_mul(inv)));
        }
        debug_assert_eq!(mul.wrapping_mul(inv), 1);
        let low = bits.saturating_sub(high);
        Some(Narrow {
            word: low_mask(bits),
            kept: low_mask(low),
            low,
            mul,
            inv,
        })
    }
}

impl Split<u64> for Narrow {
    type Stored = u32;
    #[inline(always)]
    fn split(self, word: u64) -> (usize, u32) {
        let s = word.wrapping_mul(self.mul) & self.word;
        ((s >> self.low) as usize, (s & self.kept) as u32)
    }
    fn join(self, partition: usize, stored: u32) -> u64 {
        let s = ((partition as u64) << self.low) | u64::from(stored);
        s.wrapping_mul(self.inv) & self.word
    }
}

/// One spill file and where each partition's words are in it.
pub struct Spill {
    pub file: Arc<dyn SpillFile>,
    /// `(partition, byte offset, words)`.
    pub segments: Vec<(u32, u64, u32)>,
}

/// Copies a full line into `dst` (line-aligned), bypassing the cache on
/// x86-64. The stores are weakly ordered: [`fence`] before another thread
/// reads them.
#[inline(always)]
fn write_line<K: Key>(dst: &mut [K], line: &K::Line) {
    let line = line.as_ref();
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        assert!(dst.len() == line.len() && dst.as_ptr().align_offset(16) == 0);
        let to = dst.as_mut_ptr().cast::<__m128i>();
        let from = line.as_ptr().cast::<__m128i>();
        for i in 0..line_words::<K>() * K::BYTES / 16 {
            // SAFETY: both lines are line_words * K::BYTES bytes long, `dst` is
            // 16-byte aligned (checked above), SSE2 is part of x86-64.
            unsafe { _mm_stream_si128(to.add(i), _mm_loadu_si128(from.add(i))) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(line);
}

/// Orders this thread's non-temporal stores before whatever follows.
#[inline]
fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Why the words could not be spilled to disk or read back.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("creating a spill file: {0}")]
    Create(#[source] DataFusionError),
    #[error("opening a spill file: {0}")]
    Open(#[source] std::io::Error),
    #[error("writing a spill file: {0}")]
    Write(#[source] std::io::Error),
    #[error("reading a spill file: {0}")]
    Read(#[source] std::io::Error),
    #[error("the key engine spills to a local temporary directory, and none is configured")]
    NoTempDir,
}

/// No open chunk: the chunk index of a partition before its first line.
const NONE: u32 = u32::MAX;

pub struct LocalStore<K: Key> {
    /// Where a word pushed whole goes.
    whole: Whole,
    mask: usize,
    /// One line a partition, `fill[p]` of its words in use.
    lines: Vec<K::Line>,
    fill: Vec<u32>,
    chunks: Chunks<K>,
    /// Words pushed.
    pub words: u64,
}

/// The chunks of every partition, apart from the lines, so that the push
/// loop borrows the lines and the chunks at once and keeps its state in
/// registers.
struct Chunks<K: Key> {
    /// Each partition's open chunk and the words in it.
    open: Vec<(u32, u32)>,
    /// Each partition's full chunks.
    full: Vec<Vec<u32>>,
    slabs: Vec<Slab<K>>,
    /// Chunks a slab holds, and chunks handed out of the slabs.
    per_slab: usize,
    taken: usize,
    /// Whether every non-temporal store is fenced.
    sealed: bool,
    reservation: MemoryReservation,
    runtime: Arc<RuntimeEnv>,
    spills: Vec<Spill>,
    spilled_bytes: u64,
}

impl<K: Key> LocalStore<K> {
    pub fn new(partitions: usize, runtime: Arc<RuntimeEnv>, name: &str) -> LocalStore<K> {
        let reservation = MemoryConsumer::new(name)
            .with_can_spill(true)
            .register(&runtime.memory_pool);
        // About two chunks a partition per slab, from 2 MiB (one huge page)
        // to 32 MiB, a power of two of chunks.
        let bytes = (partitions * chunk_words::<K>() * K::BYTES * 2)
            .next_power_of_two()
            .clamp(2 << 20, 32 << 20);
        LocalStore {
            whole: Whole::new(partitions),
            mask: partitions - 1,
            lines: vec![K::LINE; partitions],
            fill: vec![0; partitions],
            chunks: Chunks {
                open: vec![(NONE, 0); partitions],
                full: (0..partitions).map(|_| Vec::new()).collect(),
                slabs: Vec::new(),
                per_slab: bytes / (chunk_words::<K>() * K::BYTES),
                taken: 0,
                sealed: true,
                reservation,
                runtime,
                spills: Vec::new(),
                spilled_bytes: 0,
            },
            words: 0,
        }
    }

    pub fn partitions(&self) -> usize {
        self.fill.len()
    }

    /// Bytes written to spill files.
    pub fn spilled_bytes(&self) -> u64 {
        self.chunks.spilled_bytes
    }

    /// Pushes every word of `words`, ready to be read by any thread.
    #[cfg(test)]
    pub fn push_all(&mut self, words: &[K]) -> Result<(), StoreError> {
        self.extend(words.iter().copied())
    }

    /// Pushes every word of `words`, ready to be read by any thread.
    pub fn extend(&mut self, words: impl IntoIterator<Item = K>) -> Result<(), StoreError> {
        let whole = self.whole;
        self.extend_split(words.into_iter().map(|w| whole.split(w)))
    }

    /// Pushes every `(partition, word)` of `words` (a partition past the
    /// last wraps around), ready to be read by any thread: for words whose
    /// partition the caller picks, as [`Narrow`] does.
    pub fn extend_split(
        &mut self,
        words: impl IntoIterator<Item = (usize, K)>,
    ) -> Result<(), StoreError> {
        let mask = self.mask;
        let lines = &mut self.lines[..=mask];
        let fill = &mut self.fill[..=mask];
        let mut pushed = 0u64;
        for (p, w) in words {
            pushed += 1;
            push_word(p & mask, lines, fill, &mut self.chunks, w)?;
        }
        self.words += pushed;
        self.chunks.seal();
        Ok(())
    }

    /// Pushes one word. Call [`LocalStore::seal`] before another thread
    /// reads the store.
    #[inline]
    pub fn push(&mut self, word: K) -> Result<(), StoreError> {
        self.words += 1;
        push_word(
            Split::<K>::split(self.whole, word).0 & self.mask,
            &mut self.lines,
            &mut self.fill,
            &mut self.chunks,
            word,
        )
    }

    /// Orders the pushed words before any later read by another thread.
    pub fn seal(&mut self) {
        self.chunks.seal();
    }

    /// The in-memory words of partition `p`.
    pub fn in_memory(&self, p: usize) -> impl Iterator<Item = &[K]> {
        debug_assert!(
            self.chunks.sealed,
            "a store is read before its pushes are sealed"
        );
        let line = &self.lines[p].as_ref()[..self.fill[p] as usize];
        self.chunks.of(p).chain([line])
    }

    /// Words of partition `p` across spill files and memory.
    pub fn words_of(&self, p: usize) -> usize {
        let spilled: usize = self
            .chunks
            .spills
            .iter()
            .flat_map(|s| s.segments.iter())
            .filter(|s| s.0 as usize == p)
            .map(|s| s.2 as usize)
            .sum();
        spilled + self.in_memory(p).map(<[K]>::len).sum::<usize>()
    }

    /// Reads partition `p`'s spilled words and calls `f` on them, a MiB
    /// at most at a time (a hot word's partition may be most of a spill).
    pub fn spilled(
        &self,
        p: usize,
        buf: &mut Vec<u8>,
        mut f: impl FnMut(K),
    ) -> Result<(), StoreError> {
        use std::os::unix::fs::FileExt;
        const PIECE: usize = 1 << 20;
        for spill in &self.chunks.spills {
            let file = File::open(spill_path(&spill.file)?).map_err(StoreError::Read)?;
            for &(part, offset, words) in &spill.segments {
                if part as usize != p {
                    continue;
                }
                let end = offset + (words as usize * K::BYTES) as u64;
                let mut at = offset;
                while at < end {
                    buf.resize(((end - at) as usize).min(PIECE / K::BYTES * K::BYTES), 0);
                    file.read_exact_at(buf, at).map_err(StoreError::Read)?;
                    buf.chunks_exact(K::BYTES).for_each(|b| f(K::read_le(b)));
                    at += buf.len() as u64;
                }
            }
        }
        Ok(())
    }
}

/// Writes `word` into partition `p`'s line, and a full line into the
/// partition's open chunk.
#[inline(always)]
fn push_word<K: Key>(
    p: usize,
    lines: &mut [K::Line],
    fill: &mut [u32],
    chunks: &mut Chunks<K>,
    word: K,
) -> Result<(), StoreError> {
    let f = fill[p] as usize;
    if f + 1 < line_words::<K>() {
        lines[p].as_mut()[f] = word;
        fill[p] = f as u32 + 1;
        return Ok(());
    }
    fill[p] = 0;
    // `word` goes straight from the register: the line was written long
    // ago, so no store is read back while still in flight.
    let mut line = lines[p];
    line.as_mut()[line_words::<K>() - 1] = word;
    chunks.flush_line(p, &line)
}

impl<K: Key> Chunks<K> {
    fn seal(&mut self) {
        if !self.sealed {
            fence();
            self.sealed = true;
        }
    }

    /// Writes partition `p`'s full line into its open chunk.
    fn flush_line(&mut self, p: usize, line: &K::Line) -> Result<(), StoreError> {
        let n = line_words::<K>();
        if self.open[p].1 as usize == chunk_words::<K>() || self.open[p].0 == NONE {
            if self.open[p].0 != NONE {
                self.full[p].push(self.open[p].0);
            }
            self.open[p] = (NONE, 0);
            // May spill every chunk, this partition's too.
            let c = self.take_chunk()?;
            self.open[p] = (c, 0);
        }
        let (c, used) = self.open[p];
        let (slab, at) = self.locate(c);
        let at = at + used as usize;
        write_line(&mut self.slabs[slab].words_mut()[at..at + n], line);
        self.open[p].1 = used + n as u32;
        self.sealed = false;
        Ok(())
    }

    /// Slab and word offset of chunk `c`.
    #[inline]
    fn locate(&self, c: u32) -> (usize, usize) {
        // Slabs hold a power of two of chunks: no division.
        let c = c as usize;
        (
            c >> self.per_slab.trailing_zeros(),
            (c & (self.per_slab - 1)) * chunk_words::<K>(),
        )
    }

    /// The next free chunk: from the slabs held, else from a new slab, else
    /// (the memory pool refuses one) from the slabs held after every chunk
    /// is spilled.
    fn take_chunk(&mut self) -> Result<u32, StoreError> {
        if self.taken == self.slabs.len() * self.per_slab {
            let words = self.per_slab * chunk_words::<K>();
            let bytes = words * K::BYTES;
            if self.reservation.try_grow(bytes).is_ok() {
                self.slabs.push(Slab::new(words));
            } else if self.slabs.is_empty() {
                // The first slab even past the limit: a store needs one.
                self.reservation.grow(bytes);
                self.slabs.push(Slab::new(words));
            } else {
                self.spill()?;
            }
        }
        let c = self.taken;
        self.taken += 1;
        Ok(c as u32)
    }

    /// Writes every chunk to a new spill file, so that all slabs are free.
    fn spill(&mut self) -> Result<(), StoreError> {
        self.seal();
        let file = self
            .runtime
            .disk_manager
            .create_tmp_file("dqgate key words")
            .map_err(StoreError::Create)?;
        let path = spill_path(&file)?;
        let mut out = BufWriter::new(
            File::options()
                .append(true)
                .open(path)
                .map_err(StoreError::Open)?,
        );
        let mut segments = Vec::new();
        let mut offset = 0u64;
        let mut bytes = Vec::with_capacity(chunk_words::<K>() * K::BYTES);
        for p in 0..self.open.len() {
            let mut words = 0usize;
            for chunk in self.of(p) {
                bytes.clear();
                chunk.iter().for_each(|w| w.write_le(&mut bytes));
                out.write_all(&bytes).map_err(StoreError::Write)?;
                words += chunk.len();
            }
            if words > 0 {
                segments.push((p as u32, offset, words as u32));
                offset += (words * K::BYTES) as u64;
            }
            self.full[p].clear();
            self.open[p] = (NONE, 0);
        }
        out.flush().map_err(StoreError::Write)?;
        self.taken = 0;
        self.spilled_bytes += offset;
        if offset > 0 {
            self.spills.push(Spill { file, segments });
        }
        Ok(())
    }

    /// Partition `p`'s chunks: the full ones, then the used part of the
    /// open one.
    fn of(&self, p: usize) -> impl Iterator<Item = &[K]> {
        let (open, used) = self.open[p];
        let full = self.full[p].iter().map(|c| (*c, chunk_words::<K>()));
        let open = (open != NONE).then_some((open, used as usize));
        full.chain(open).map(move |(c, n)| {
            let (slab, at) = self.locate(c);
            &self.slabs[slab].words()[at..at + n]
        })
    }
}

fn spill_path(file: &Arc<dyn SpillFile>) -> Result<&std::path::Path, StoreError> {
    file.path().ok_or(StoreError::NoTempDir)
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
                .all(|w| Split::<u64>::split(store.whole, *w).0 == p));
            seen.extend(here);
        }
        let mut want = words.clone();
        want.sort_unstable();
        seen.sort_unstable();
        assert_eq!(seen, want);
    }

    #[test]
    fn a_store_under_a_small_limit_spills_and_reuses_its_slabs_losing_nothing() {
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_limit(4 << 20, 1.0)
            .build_arc()
            .expect("runtime");
        let mut store = LocalStore::<u128>::new(64, runtime, "test");
        let words: Vec<u128> = (0..1_000_000u128).map(|i| (i * 7919) % 600_000).collect();
        for batch in words.chunks(8192) {
            store.push_all(batch).expect("push");
        }
        assert!(store.spilled_bytes() > 0 && store.chunks.spills.len() > 1);
        let mut seen = Vec::new();
        let mut buf = Vec::new();
        for p in 0..store.partitions() {
            let before = seen.len();
            seen.extend(store.in_memory(p).flatten().copied());
            store.spilled(p, &mut buf, |w| seen.push(w)).expect("read");
            assert_eq!(seen.len() - before, store.words_of(p));
        }
        let mut want = words.clone();
        want.sort_unstable();
        seen.sort_unstable();
        assert_eq!(seen, want);
    }

    /// Split and join are inverse for every width a narrow word takes, and
    /// the partition and the kept bits stay in their ranges.
    #[test]
    fn narrow_words_split_and_join_back() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for partitions in [16usize, 256, 2048, 4096] {
            let high = partitions.trailing_zeros();
            assert!(Narrow::new(33 + high, partitions).is_none());
            for bits in 0..=32 + high {
                let n = Narrow::new(bits, partitions).expect("fits");
                for _ in 0..200 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let w = x & low_mask(bits);
                    let (p, kept) = n.split(w);
                    assert!(p < partitions, "{bits} bits");
                    assert!(u64::from(kept) <= low_mask(32));
                    assert_eq!(n.join(p, kept), w, "{bits} bits, {partitions} partitions");
                }
                // The extremes too.
                for w in [0, low_mask(bits)] {
                    let (p, kept) = n.split(w);
                    assert_eq!(n.join(p, kept), w);
                }
            }
        }
    }

    /// Runs of ids, multiples of a power of two and ids scattered over a
    /// wide range all spread evenly over the partitions.
    #[test]
    fn narrow_words_spread_over_the_partitions() {
        let partitions = 2048;
        let n = Narrow::new(40, partitions).expect("fits");
        type Layout = (&'static str, fn(u64) -> u64);
        let layouts: [Layout; 3] = [
            ("a run", |i| 1_000_000 + i),
            ("multiples of 1024", |i| i << 10),
            ("scattered", |i| i.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 24),
        ];
        for (name, id) in layouts {
            let mut sizes = vec![0u32; partitions];
            for i in 0..(partitions as u64 * 64) {
                sizes[n.split(id(i)).0] += 1;
            }
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(
                *min >= 32 && *max <= 128,
                "{name}: partitions of {min} to {max} words"
            );
        }
    }

    /// Narrow words counted through a store of u32 give the repeats and the
    /// distinct count of the same words counted whole.
    #[test]
    fn narrow_and_whole_words_count_alike() {
        let runtime = RuntimeEnvBuilder::new().build_arc().expect("runtime");
        let partitions = 64;
        let narrow = Narrow::new(30, partitions).expect("fits");
        let words: Vec<u64> = (0..60_000u64)
            .map(|i| (i * 7919 + (i % 13) * (1 << 29)) % (1 << 30))
            .chain((0..500).map(|i| i * 3))
            .collect();
        let mut small = LocalStore::<u32>::new(partitions, runtime.clone(), "test");
        small
            .extend_split(words.iter().map(|w| narrow.split(*w)))
            .expect("push");
        let mut whole = LocalStore::<u64>::new(partitions, runtime, "test");
        whole.push_all(&words).expect("push");
        let a = super::super::count::count(
            &[small],
            (2, super::super::count::Keep::Most(u64::MAX)),
            |p, w| narrow.join(p, w),
        )
        .expect("count");
        let b = super::super::count::count(
            &[whole],
            (2, super::super::count::Keep::Most(u64::MAX)),
            |_, w| w,
        )
        .expect("count");
        let (distinct, repeated) = super::super::testing::counted(&words);
        for mut c in [a, b] {
            c.repeated.sort_unstable();
            assert_eq!((c.distinct, c.repeated), (distinct, repeated.clone()));
        }
    }

    #[test]
    fn partitions_grow_with_rows_in_powers_of_two() {
        assert_eq!(partitions_for(0), 16);
        assert_eq!(partitions_for(10_000_000), 256);
        assert_eq!(partitions_for(50_000_000), 2048);
        assert_eq!(partitions_for(100_000_000), 4096);
        assert!(partitions_for(u64::MAX).is_power_of_two());
    }

    #[test]
    fn fingerprints_are_cut_to_4_bytes_a_row_until_false_candidates_would_swell() {
        for rows in [0, 1_000_000, 50_000_000, 100_000_000, 500_000_000] {
            let partitions = partitions_for(rows);
            let bits = fingerprint_bits(rows, partitions);
            assert_eq!(bits, 32 + partitions.trailing_zeros(), "{rows} rows");
            assert!(Narrow::new(bits, partitions).is_some());
        }
        assert_eq!(
            fingerprint_bits(1_000_000_000, partitions_for(1_000_000_000)),
            64
        );
    }
}
