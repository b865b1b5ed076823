//! The index file: `_dqgate_keys_<hash of the columns>.idx` in a version's
//! directory. This dqgate writes format 4 for keys of integer parts only
//! and format 3 for the others, and reads formats 1 to 4.
//!
//! ```text
//! "DQGKEYS3"                     magic, 8 bytes
//! checksum                       XXH3-64 of the header length and header
//! header length, header          4 bytes (LE), then JSON (`Header`), which
//!                                holds the checksum of the rest of the head
//!                                and the key zones (see `zones`)
//! tops                           keys × u32: each fingerprint's top 32 bits
//! block checksums                one XXH3-64 a 1 KiB block of the tail
//! tail                           keys × u32: each fingerprint's low 32 bits;
//!                                then keys × u32: a row that holds the key,
//!                                counted through the header's files in order
//! ```
//!
//! Keys are sorted by fingerprint. An audit first reads the header alone
//! (checked by its own checksum): when its zones rule out every staged key,
//! the partition is done. Else a lookup reads the head (4 bytes a key and
//! a header): each top tests one bit of a bitmap of the staged
//! fingerprints in one flat pass. Only where a top equals a staged key's
//! (about one key in 4,000) is its low half read from the tail, in checked
//! blocks; where the whole fingerprint matches, its row is, and the key at
//! that row is read from its Parquet file and compared as bytes. Nothing
//! read is used before its checksum is: a bit flipped anywhere makes the
//! index refused, never a key missed. The whole index is about 12 bytes a
//! distinct key.
//!
//! Format 4 (`"DQGKEYS4"`) is format 3 for keys whose parts are all
//! integers: its tail holds each key's canonical bytes (9 bytes a part, see
//! `canon`) instead of the low halves and rows. Where a top equals a staged
//! key's, the key is read from the tail and compared as bytes: no Parquet
//! file is read, where in format 3 each file with a clashing key has its
//! key column chunk decompressed and decoded for a few rows (the files
//! have no page index to read less). The whole index is about 13 bytes a
//! distinct key of one part.
//!
//! Format 2 (`"DQGKEYS2"`, written until 2026-12-03) is format 3 without
//! zones, with one checksum over the header and the rest of the head.
//! Format 1 (`"DQGKEYS1"`) kept a bucket table and the 32 bits after each
//! key's bucket in the head, and only the rows in the tail (64 KiB
//! blocks); its test of the bitmap needs each key's bucket, a loop per
//! bucket that costs twice the flat pass.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use twox_hash::XxHash3_64;

use super::canon::Kind;
use super::distinct::{Distinct, Finder};
pub use super::legacy::Probe;
use super::zones::Zones;

const MAGIC_1: &[u8; 8] = b"DQGKEYS1";
const MAGIC_2: &[u8; 8] = b"DQGKEYS2";
const MAGIC_3: &[u8; 8] = b"DQGKEYS3";
const MAGIC_4: &[u8; 8] = b"DQGKEYS4";
/// The format this dqgate writes for keys with a text part.
const FORMAT: u32 = 3;
/// The format this dqgate writes for keys whose parts are all integers:
/// their canonical bytes in the tail.
const EXACT_FORMAT: u32 = 4;
/// The bytes of an integer part's canonical key.
const INT_BYTES: u64 = 9;

/// Whether keys of `kinds` are kept whole (format 4): every part an
/// integer.
fn whole_kinds(kinds: &[Kind]) -> bool {
    !kinds.is_empty() && kinds.iter().all(|k| *k == Kind::Int)
}

/// The tail's bytes a key, in a `format` index of `parts` key parts.
fn width(format: u32, parts: usize) -> u64 {
    match format {
        1 => 4,
        EXACT_FORMAT => INT_BYTES * parts as u64,
        _ => 8,
    }
}

/// The tail's checked blocks, by format: small after format 1, where the
/// words of scattered fingerprints are read one at a time; a whole number
/// of keys in format 4, so that no key spans two.
fn block_size(format: u32, parts: usize) -> u64 {
    match format {
        1 => 1 << 16,
        EXACT_FORMAT => ((1 << 10) / width(format, parts)).max(1) * width(format, parts),
        _ => 1 << 10,
    }
}

/// What a format keeps where, for an index of `keys` keys of `parts` parts
/// whose header says `bucket_bits`: the words of its bucket table and the
/// tail's bytes.
fn layout(format: u32, bucket_bits: u32, keys: u64, parts: usize) -> (u64, u64) {
    match format {
        1 => ((1 << bucket_bits) + 1, keys * 4),
        _ => (0, keys * width(format, parts)),
    }
}
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
    /// Bits of the bucket table (format 1; 0 in later formats, which have
    /// none).
    pub bucket_bits: u32,
    pub tail: u64,
    /// The checksum of the head after the header (format 3, whose header
    /// has a checksum of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_sum: Option<u64>,
    /// Each key column's zones, `None` where not kept (format 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<Option<Zones>>,
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

/// The file name of the index of `columns` over the files whose
/// fingerprint is `fingerprint`. Each version's index has a name of its
/// own: a Delta partition's directory holds the files of every version,
/// and one publisher's index never replaces another's.
pub fn file_name(columns: &[String], fingerprint: &str) -> String {
    format!(
        "{}{:016x}.idx",
        versioned_stem(columns),
        XxHash3_64::oneshot(fingerprint.as_bytes())
    )
}

/// What the names of every version's index of `columns` start with.
pub(super) fn versioned_stem(columns: &[String]) -> String {
    format!("{PREFIX}{:016x}_", columns_hash(columns))
}

/// The name indexes of `columns` had before their names held their
/// version (dqgate before 2026-12-03): still read, as tables published
/// then keep them.
pub(super) fn legacy_file_name(columns: &[String]) -> String {
    format!("{PREFIX}{:016x}.idx", columns_hash(columns))
}

fn columns_hash(columns: &[String]) -> u64 {
    XxHash3_64::oneshot(columns.join("\u{0}").as_bytes())
}

/// The bytes of the index of `keys` (each with its row, counted through
/// `files` in order), whose files have fingerprint `fingerprint`, with its
/// fingerprints cut to `hash_bits` and its key `zones`.
pub fn encode(
    keys: &Distinct,
    columns: &[String],
    (fingerprint, files): (&str, Vec<(String, u64)>),
    (hash_bits, zones): (u32, Vec<Option<Zones>>),
) -> Vec<u8> {
    let n = keys.entries.len() as u64;
    let parts = keys.kinds.len();
    let exact = width(EXACT_FORMAT, parts) as usize;
    let format =
        if whole_kinds(&keys.kinds) && keys.entries.iter().all(|e| keys.key(e).len() == exact) {
            EXACT_FORMAT
        } else {
            FORMAT
        };
    let mut tail = Vec::with_capacity(keys.entries.len() * width(format, parts) as usize);
    if format == EXACT_FORMAT {
        for e in &keys.entries {
            tail.extend_from_slice(keys.key(e));
        }
    } else {
        for e in &keys.entries {
            tail.extend_from_slice(&(e.hash as u32).to_le_bytes());
        }
        for e in &keys.entries {
            tail.extend_from_slice(&e.row.to_le_bytes());
        }
    }
    let mut head = Vec::with_capacity(keys.entries.len() * 4 + tail.len() / 128 + 8);
    for e in &keys.entries {
        head.extend_from_slice(&((e.hash >> 32) as u32).to_le_bytes());
    }
    for block in tail.chunks(block_size(format, parts) as usize) {
        head.extend_from_slice(&XxHash3_64::oneshot(block).to_le_bytes());
    }
    let header = Header {
        format,
        columns: columns.to_vec(),
        kinds: keys.kinds.clone(),
        fingerprint: fingerprint.to_string(),
        files,
        hash_bits,
        keys: n,
        bucket_bits: 0,
        tail: tail.len() as u64,
        head_sum: Some(XxHash3_64::oneshot(&head)),
        zones,
    };
    let json = serde_json::to_vec(&header).expect("a header serializes");
    let mut framed = Vec::with_capacity(4 + json.len());
    framed.extend_from_slice(&(json.len() as u32).to_le_bytes());
    framed.extend_from_slice(&json);
    let mut out = Vec::with_capacity(16 + framed.len() + head.len() + tail.len());
    out.extend_from_slice(if format == EXACT_FORMAT {
        MAGIC_4
    } else {
        MAGIC_3
    });
    out.extend_from_slice(&XxHash3_64::oneshot(&framed).to_le_bytes());
    out.extend_from_slice(&framed);
    out.extend_from_slice(&head);
    out.extend_from_slice(&tail);
    out
}

/// An index opened and checked: its head in memory, its tail read on demand.
pub struct Opened {
    path: PathBuf,
    file: File,
    pub header: Header,
    /// Where each bucket starts (format 1; empty in format 2).
    starts: Vec<u32>,
    /// The head as read, and where its words (format 1: the 32 bits after
    /// each key's bucket; format 2: each fingerprint's top 32 bits) start
    /// in it. They are read in place: 4 bytes a key, the bulk of the head.
    head: Vec<u8>,
    words_at: usize,
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
    /// Reads the header only: whether the index is worth opening, and its
    /// zones. A format 3 header is checked against its checksum (the
    /// zones are used on their own); an older one is checked when the
    /// index is opened.
    pub fn peek(path: &Path) -> Result<Header, IndexError> {
        read_header(&mut open(path)?, path).map(|h| h.3)
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
        let (format, start, json, header) = read_header(&mut file, path)?;
        let corrupt = |reason: &str| corrupt(path, reason);
        let bucket_bits = if format == 1 { header.bucket_bits } else { 0 };
        if header.format != format || bucket_bits > 30 || header.keys > u32::MAX as u64 {
            return Err(corrupt("its header is not one this dqgate writes"));
        }
        let parts = header.kinds.len();
        if format == EXACT_FORMAT && !whole_kinds(&header.kinds) {
            return Err(corrupt("it holds keys as integers, but its kinds are not"));
        }
        let (buckets, tail) = layout(format, bucket_bits, header.keys, parts);
        if header.tail != tail {
            return Err(corrupt("its tail is not as long as its keys need"));
        }
        let blocks = header.tail.div_ceil(block_size(format, parts));
        let rest = buckets * 4 + header.keys * 4 + blocks * 8;
        let tail_at = 20 + json.len() as u64 + rest;
        if tail_at.checked_add(header.tail) != Some(size) {
            return Err(corrupt("its size is not what its header says"));
        }
        // One read of the whole head into a reused buffer: it is cut or
        // grown, not cleared, as every byte is read over.
        head.resize(rest as usize, 0);
        read_exact(&mut file, &mut head, path)?;
        let sum = match format {
            1 | 2 => {
                let mut hasher = XxHash3_64::default();
                use std::hash::Hasher;
                hasher.write(&start[16..20]);
                hasher.write(&json);
                hasher.write(&head);
                (hasher.finish(), sum_of(&start))
            }
            _ => (XxHash3_64::oneshot(&head), header.head_sum.unwrap_or(!0)),
        };
        if sum.0 != sum.1 {
            return Err(corrupt("its checksum does not match"));
        }
        let words_at = buckets as usize * 4;
        let sums_at = words_at + header.keys as usize * 4;
        let starts = le_u32s(&head[..words_at]);
        if format == 1
            && (starts.windows(2).any(|w| w[0] > w[1])
                || starts.last() != Some(&(header.keys as u32)))
        {
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
            words_at,
            cache: Vec::new(),
        })
    }

    /// Calls `f(j, i)` for each staged key `j` whose fingerprint equals
    /// the index's key `i`'s. The staged keys (cut to the index's hash
    /// bits) are made on demand as the index's format needs them: as a
    /// [`Finder`] (format 2) or a `Probe` (format 1).
    pub fn matches(
        &mut self,
        finder: impl FnOnce() -> Arc<Finder>,
        probe: impl FnOnce() -> Arc<Probe>,
        mut f: impl FnMut(usize, u64),
    ) -> Result<(), IndexError> {
        if self.header.format == 1 {
            probe().matches(&self.starts, &self.words(), f);
            return Ok(());
        }
        let finder = finder();
        // One flat pass over the tops: each tests one bit of the staged
        // bitmap, independent loads read in order. About one key in 64
        // passes; of those, the ones whose top equals a staged key's top
        // (about one in 64 again) have their low halves read (in format
        // 4, their keys).
        let mut passed = Vec::new();
        for (i, top) in self.words().iter().enumerate() {
            if finder.may_hold_top(*top) {
                passed.push((i as u64, *top));
            }
        }
        finder.warm(passed.iter().map(|(_, top)| *top));
        if self.holds_keys() {
            for (i, top) in passed {
                let mut key = None;
                for j in finder.with_top(top) {
                    let key = match &key {
                        Some(k) => k,
                        None => key.insert(self.key(i)?),
                    };
                    if finder.key(j) == key.as_slice() {
                        f(j, i);
                    }
                }
            }
            return Ok(());
        }
        for (i, top) in passed {
            let mut low = None;
            for j in finder.with_top(top) {
                let low = match low {
                    Some(l) => l,
                    None => *low.insert(self.word(i)?),
                };
                if finder.hash(j) & 0xFFFF_FFFF == low {
                    f(j, i);
                }
            }
        }
        Ok(())
    }

    /// Its head's buffer, for the next index to be opened into.
    pub fn into_head(self) -> Vec<u8> {
        self.head
    }

    /// The head's words, in place when the head's bytes are aligned little
    /// endian words (they are where a `Vec<u8>` is), else copied.
    fn words(&self) -> std::borrow::Cow<'_, [u32]> {
        let bytes = &self.head[self.words_at..self.words_at + self.header.keys as usize * 4];
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

    /// Whether its tail holds the keys themselves (format 4), so that
    /// [`Opened::matches`] compares them and no row is read.
    pub fn holds_keys(&self) -> bool {
        self.header.format == EXACT_FORMAT
    }

    /// The row that holds the index's key `i`, from a checked block (an
    /// index that [`Opened::holds_keys`] has none).
    pub fn row(&mut self, i: u64) -> Result<u64, IndexError> {
        let rows_at = match self.header.format {
            1 => 0,
            EXACT_FORMAT => {
                return Err(corrupt(&self.path, "its keys have no rows"));
            }
            _ => self.header.keys,
        };
        self.word(rows_at + i)
    }

    /// The tail's word `i`, from a checked block.
    fn word(&mut self, i: u64) -> Result<u64, IndexError> {
        let word = self.tail_bytes(i * 4, 4)?;
        Ok(u32::from_le_bytes(word.try_into().expect("4 bytes")) as u64)
    }

    /// The canonical bytes of the index's key `i` (format 4), from a
    /// checked block.
    fn key(&mut self, i: u64) -> Result<Vec<u8>, IndexError> {
        let len = width(EXACT_FORMAT, self.header.kinds.len());
        self.tail_bytes(i * len, len as usize).map(<[u8]>::to_vec)
    }

    /// `len` bytes of the tail from `from`, within one checked block.
    fn tail_bytes(&mut self, from: u64, len: usize) -> Result<&[u8], IndexError> {
        let size = block_size(self.header.format, self.header.kinds.len());
        let (b, at) = (from / size, (from % size) as usize);
        if from + len as u64 > self.header.tail || at + len > size as usize {
            return Err(corrupt(&self.path, "a key beyond its end was asked for"));
        }
        let block = self.block(b, size)?;
        Ok(&block[at..at + len])
    }

    /// Block `b` (of `size` bytes) of the tail, checked.
    fn block(&mut self, b: u64, size: u64) -> Result<&[u8], IndexError> {
        if let Some(k) = self.cache.iter().position(|(n, _)| *n == b) {
            return Ok(&self.cache[k].1);
        }
        let from = b * size;
        let to = (from + size).min(self.header.tail);
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

/// The format, first bytes, header bytes and header of the index `file`,
/// read from its start: a format 3 header checked against its own
/// checksum; an older one (checked with the rest of its head) without
/// zones.
fn read_header(
    file: &mut File,
    path: &Path,
) -> Result<(u32, [u8; 20], Vec<u8>, Header), IndexError> {
    let mut start = [0u8; 20];
    read_exact(file, &mut start, path)?;
    let (format, len) = check_start(&start, path)?;
    let mut json = vec![0u8; len];
    read_exact(file, &mut json, path)?;
    if format >= 3 && header_sum(&start, &json) != sum_of(&start) {
        return Err(corrupt(path, "its header does not match its checksum"));
    }
    let mut header = parse_header(&json, path)?;
    if format < 3 {
        header.zones.clear();
    }
    Ok((format, start, json, header))
}

fn read_exact(file: &mut File, buf: &mut [u8], path: &Path) -> Result<(), IndexError> {
    file.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => corrupt(path, "it ends early"),
        _ => io(path, e),
    })
}

/// The format and the header's length.
fn check_start(start: &[u8; 20], path: &Path) -> Result<(u32, usize), IndexError> {
    let format = match &start[..8] {
        m if m == MAGIC_4 => EXACT_FORMAT,
        m if m == MAGIC_3 => 3,
        m if m == MAGIC_2 => 2,
        m if m == MAGIC_1 => 1,
        _ => return Err(corrupt(path, "it does not start as a dqgate key index")),
    };
    let len = u32::from_le_bytes(start[16..20].try_into().expect("4 bytes")) as usize;
    if len > 1 << 20 {
        return Err(corrupt(path, "its header is too long"));
    }
    Ok((format, len))
}

/// The checksum after the magic.
fn sum_of(start: &[u8; 20]) -> u64 {
    u64::from_le_bytes(start[8..16].try_into().expect("8 bytes"))
}

/// What a header (with its length, `start[16..20]`) sums to: a format 3
/// index's [`sum_of`].
fn header_sum(start: &[u8; 20], json: &[u8]) -> u64 {
    let mut hasher = XxHash3_64::default();
    use std::hash::Hasher;
    hasher.write(&start[16..20]);
    hasher.write(json);
    hasher.finish()
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
