//! The index file: `_dqgate_keys_<hash of the columns>.idx` in a version's
//! directory.
//!
//! ```text
//! "DQGKEYS1"                     magic, 8 bytes
//! checksum                       XXH3-64 of everything from here to the tail
//! header length, header          4 bytes (LE), then JSON (`Header`)
//! buckets                        (2^bucket_bits + 1) × u32: where each bucket starts
//! fingerprints                   keys × u32: the 32 bits after the bucket's
//! block checksums                one XXH3-64 a 64 KiB block of the tail
//! tail                           keys × u32: a row that holds the key, counted
//!                                through the header's files in their order
//! ```
//!
//! Keys are sorted by fingerprint. A lookup reads the head (about 4.5
//! bytes a key) and, only for the keys whose fingerprints match, their rows
//! from the tail, in whole checked blocks; the key at that row is then read
//! from its Parquet file and compared as bytes. Nothing read is used
//! before its checksum is: a bit flipped anywhere makes the index refused,
//! never a key missed. The whole index is about 8.5 bytes a distinct key.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use twox_hash::XxHash3_64;

use super::canon::Kind;
use super::distinct::Distinct;
use super::topbits::{bucket, bucket_bits, starts, TopBits};

const MAGIC: &[u8; 8] = b"DQGKEYS1";
const BLOCK: u64 = 1 << 16;
/// The file names of indexes start with this.
pub const PREFIX: &str = "_dqgate_keys_";

/// What an index says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    /// The key columns, in order.
    pub columns: Vec<String>,
    pub kinds: Vec<Kind>,
    /// The fingerprint of the files it indexes, as a partition's input
    /// computes it (relative paths, sizes and footers).
    pub fingerprint: String,
    /// Those files (paths from the table's root) and their rows, in the
    /// order rows are counted in.
    pub files: Vec<(String, u64)>,
    /// How many of each fingerprint's 64 bits were kept (64 but under the
    /// test-only collision switch).
    pub hash_bits: u32,
    pub keys: u64,
    pub bucket_bits: u32,
    pub tail: u64,
}

/// Why an index cannot be used: its partition's files are then read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("{0} has no key index")]
    Missing(String),
    #[error("cannot read the key index {path}: {reason}")]
    Io { path: String, reason: String },
    #[error("the key index {path} is corrupt: {reason}")]
    Corrupt { path: String, reason: String },
    #[error("the key index {path} does not match its files: {reason}")]
    Stale { path: String, reason: String },
}

/// The file name of the index of `columns`.
pub fn file_name(columns: &[String]) -> String {
    let joined = columns.join("\u{0}");
    format!(
        "{PREFIX}{:016x}.idx",
        XxHash3_64::oneshot(joined.as_bytes())
    )
}

/// The 32 bits after the bucket's.
fn fp(hash: u64, bits: u32) -> u32 {
    ((hash << bits) >> 32) as u32
}

/// `hash` cut to what an index with `bits` of bucket holds of it.
pub fn prefix(hash: u64, bits: u32) -> u64 {
    hash >> (32 - bits)
}

/// The staged keys as an index with `bucket_bits` of bucket sees them: the
/// low 32 bits of their prefixes (see [`prefix`]), sorted, where each
/// bucket's start, and a bitmap of the top bits of the prefixes.
pub struct Probe {
    lows: Vec<u32>,
    starts: Vec<u32>,
    top_bits: TopBits,
}

impl Probe {
    /// The probe of staged fingerprints `hashes` (sorted, cut to the
    /// index's hash bits) for indexes of `bucket_bits`.
    pub fn new(hashes: impl ExactSizeIterator<Item = u64>, bucket_bits: u32) -> Probe {
        let prefixes: Vec<u64> = hashes.map(|h| prefix(h, bucket_bits)).collect();
        let buckets = prefixes.iter().map(|p| (p >> 32) as usize);
        Probe {
            starts: starts(1 << bucket_bits, buckets),
            top_bits: TopBits::new(prefixes.iter().copied(), bucket_bits + 32),
            lows: prefixes.iter().map(|p| *p as u32).collect(),
        }
    }
}

/// The bytes of the index of `keys` (each with its row, counted through
/// `files` in order), whose files have fingerprint `fingerprint`.
pub fn encode(
    keys: &Distinct,
    columns: &[String],
    (fingerprint, files): (&str, Vec<(String, u64)>),
    hash_bits: u32,
) -> Vec<u8> {
    let n = keys.entries.len() as u64;
    let bits = bucket_bits(n);
    let mut tail = Vec::with_capacity(keys.entries.len() * 4);
    for e in &keys.entries {
        tail.extend_from_slice(&e.row.to_le_bytes());
    }
    let header = Header {
        format: 1,
        columns: columns.to_vec(),
        kinds: keys.kinds.clone(),
        fingerprint: fingerprint.to_string(),
        files,
        hash_bits,
        keys: n,
        bucket_bits: bits,
        tail: tail.len() as u64,
    };
    let json = serde_json::to_vec(&header).expect("a header serializes");
    let mut head = Vec::new();
    head.extend_from_slice(&(json.len() as u32).to_le_bytes());
    head.extend_from_slice(&json);
    starts(
        1 << bits,
        keys.entries.iter().map(|e| bucket(e.hash, bits) as usize),
    )
    .iter()
    .for_each(|s| head.extend_from_slice(&s.to_le_bytes()));
    for e in &keys.entries {
        head.extend_from_slice(&fp(e.hash, bits).to_le_bytes());
    }
    for block in tail.chunks(BLOCK as usize) {
        head.extend_from_slice(&XxHash3_64::oneshot(block).to_le_bytes());
    }
    let mut out = Vec::with_capacity(16 + head.len() + tail.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&XxHash3_64::oneshot(&head).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(&tail);
    out
}

/// An index opened and checked: its head in memory, its tail read on demand.
pub struct Opened {
    path: PathBuf,
    file: File,
    pub header: Header,
    starts: Vec<u32>,
    /// The head as read, and where its fingerprints start in it (they are
    /// read in place: 4 bytes a key, the bulk of the head).
    head: Vec<u8>,
    fps_at: usize,
    sums: Vec<u64>,
    tail_at: u64,
    /// The last blocks of the tail read and checked (keys are asked for in
    /// index order, offsets and bytes alternating).
    cache: Vec<(u64, Vec<u8>)>,
}

/// How many checked blocks of the tail an opened index keeps.
const CACHED: usize = 4;

fn le_u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

impl Opened {
    /// Reads the header only, unchecked: whether the index is worth opening.
    pub fn peek(path: &Path) -> Result<Header, IndexError> {
        let mut file = open(path)?;
        let mut start = [0u8; 20];
        read_exact(&mut file, &mut start, path)?;
        let len = check_start(&start, path)?;
        let mut json = vec![0u8; len];
        read_exact(&mut file, &mut json, path)?;
        parse_header(&json, path)
    }

    /// Opens `path` and checks its head against its checksum.
    pub fn open(path: &Path) -> Result<Opened, IndexError> {
        Opened::open_reusing(path, Vec::new())
    }

    /// As [`Opened::open`], reading the head into `head` (the buffer of an
    /// index opened before, see [`Opened::into_head`]).
    pub fn open_reusing(path: &Path, mut head: Vec<u8>) -> Result<Opened, IndexError> {
        let mut file = open(path)?;
        let size = file.metadata().map_err(|e| io(path, e))?.len();
        let mut start = [0u8; 20];
        read_exact(&mut file, &mut start, path)?;
        let len = check_start(&start, path)?;
        let sum = u64::from_le_bytes(start[8..16].try_into().expect("8 bytes"));
        let mut json = vec![0u8; len];
        read_exact(&mut file, &mut json, path)?;
        let header = parse_header(&json, path)?;
        let corrupt = |reason: &str| corrupt(path, reason);
        if header.format != 1 || header.bucket_bits > 30 || header.keys > u32::MAX as u64 {
            return Err(corrupt("its header is not one this dqgate writes"));
        }
        let buckets = (1u64 << header.bucket_bits) + 1;
        let blocks = header.tail.div_ceil(BLOCK);
        let rest = buckets * 4 + header.keys * 4 + blocks * 8;
        let tail_at = 20 + len as u64 + rest;
        if tail_at.checked_add(header.tail) != Some(size) {
            return Err(corrupt("its size is not what its header says"));
        }
        // One read of the whole head (a reused buffer is only cleared).
        head.clear();
        head.resize(rest as usize, 0);
        read_exact(&mut file, &mut head, path)?;
        let mut hasher = XxHash3_64::default();
        use std::hash::Hasher;
        hasher.write(&start[16..20]);
        hasher.write(&json);
        hasher.write(&head);
        if hasher.finish() != sum {
            return Err(corrupt("its checksum does not match"));
        }
        let fps_at = buckets as usize * 4;
        let sums_at = fps_at + header.keys as usize * 4;
        let starts = le_u32s(&head[..fps_at]);
        if starts.windows(2).any(|w| w[0] > w[1]) || starts.last() != Some(&(header.keys as u32)) {
            return Err(corrupt("its buckets are out of order"));
        }
        Ok(Opened {
            path: path.to_path_buf(),
            file,
            starts,
            sums: head[sums_at..]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
            tail_at,
            header,
            head,
            fps_at,
            cache: Vec::new(),
        })
    }

    /// Calls `f(j, i)` for each staged key `j` of `probe` whose
    /// fingerprint equals the index's key `i`'s.
    ///
    /// Each of the index's keys tests one bit of the probe's bitmap; the
    /// keys are sorted by fingerprint, so the bitmap is read in order, and
    /// no test waits on another's outcome. Only a set bit (about one key in
    /// 64 that the staged keys do not hold) compares the key with the staged
    /// keys of its bucket.
    pub fn matches(&self, probe: &Probe, mut f: impl FnMut(usize, u64)) {
        let fps = self.fingerprints();
        for (b, w) in self.starts.windows(2).enumerate() {
            let high = (b as u64) << 32;
            for (i, fp) in fps[w[0] as usize..w[1] as usize].iter().enumerate() {
                if probe.top_bits.holds(high | *fp as u64) {
                    let (lo, hi) = (probe.starts[b] as usize, probe.starts[b + 1] as usize);
                    for (s, x) in probe.lows[lo..hi].iter().enumerate() {
                        if *x == *fp {
                            f(lo + s, w[0] as u64 + i as u64);
                        }
                    }
                }
            }
        }
    }

    /// Its head's buffer, for the next index to be opened into.
    pub fn into_head(self) -> Vec<u8> {
        self.head
    }

    /// The fingerprints, in place when the head's bytes are aligned little
    /// endian words (they are where a `Vec<u8>` is), else copied.
    fn fingerprints(&self) -> std::borrow::Cow<'_, [u32]> {
        let bytes = &self.head[self.fps_at..self.fps_at + self.header.keys as usize * 4];
        if cfg!(target_endian = "little") {
            // SAFETY: every bit pattern is a valid u32; `align_to` puts in
            // `words` only what is aligned for it.
            let (before, words, after) = unsafe { bytes.align_to::<u32>() };
            if before.is_empty() && after.is_empty() {
                return std::borrow::Cow::Borrowed(words);
            }
        }
        std::borrow::Cow::Owned(le_u32s(bytes))
    }

    /// The row that holds the index's key `i`, from a checked block.
    pub fn row(&mut self, i: u64) -> Result<u64, IndexError> {
        if i >= self.header.keys || self.header.tail != self.header.keys * 4 {
            return Err(corrupt(&self.path, "a key beyond its end was asked for"));
        }
        let at = self.tail(i * 4, i * 4 + 4)?;
        Ok(u32::from_le_bytes(at[..4].try_into().expect("4 bytes")) as u64)
    }

    /// Bytes `[start, end)` of the tail, every block they touch checked.
    fn tail(&mut self, start: u64, end: u64) -> Result<Vec<u8>, IndexError> {
        if end > self.header.tail {
            return Err(corrupt(&self.path, "it ends early"));
        }
        let mut out = Vec::with_capacity((end - start) as usize);
        let mut at = start;
        while at < end {
            let b = at / BLOCK;
            let block = self.block(b)?;
            let from = (at - b * BLOCK) as usize;
            let to = ((end - b * BLOCK) as usize).min(block.len());
            out.extend_from_slice(&block[from..to]);
            at = b * BLOCK + to as u64;
        }
        Ok(out)
    }

    /// Block `b` of the tail, checked.
    fn block(&mut self, b: u64) -> Result<&[u8], IndexError> {
        if let Some(k) = self.cache.iter().position(|(n, _)| *n == b) {
            return Ok(&self.cache[k].1);
        }
        let from = b * BLOCK;
        let to = (from + BLOCK).min(self.header.tail);
        let mut bytes = vec![0u8; (to - from) as usize];
        self.file
            .read_exact_at(&mut bytes, self.tail_at + from)
            .map_err(|e| io(&self.path, e))?;
        if self.sums.get(b as usize).copied() != Some(XxHash3_64::oneshot(&bytes)) {
            return Err(corrupt(
                &self.path,
                "a block of its keys does not match its checksum",
            ));
        }
        if self.cache.len() == CACHED {
            self.cache.remove(0);
        }
        self.cache.push((b, bytes));
        Ok(&self.cache.last().expect("just pushed").1)
    }
}

fn open(path: &Path) -> Result<File, IndexError> {
    File::open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            IndexError::Missing(path.parent().unwrap_or(path).display().to_string())
        }
        _ => io(path, e),
    })
}

fn read_exact(file: &mut File, buf: &mut [u8], path: &Path) -> Result<(), IndexError> {
    file.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => corrupt(path, "it ends early"),
        _ => io(path, e),
    })
}

fn check_start(start: &[u8; 20], path: &Path) -> Result<usize, IndexError> {
    if &start[..8] != MAGIC {
        return Err(corrupt(path, "it does not start as a dqgate key index"));
    }
    let len = u32::from_le_bytes(start[16..20].try_into().expect("4 bytes")) as usize;
    if len > 1 << 20 {
        return Err(corrupt(path, "its header is too long"));
    }
    Ok(len)
}

fn parse_header(json: &[u8], path: &Path) -> Result<Header, IndexError> {
    serde_json::from_slice(json).map_err(|e| corrupt(path, &format!("its header: {e}")))
}

fn io(path: &Path, e: std::io::Error) -> IndexError {
    IndexError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

fn corrupt(path: &Path, reason: &str) -> IndexError {
    IndexError::Corrupt {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}
